# One command for each job; CI and the README use the same ones.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
SIM    ?= verilator
PYTEST_ARGS ?=

.PHONY: venv sim soc-demo cpu-demo test test-all lint formal benchmark bench verilog synth plots clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "tcore needs Python >= 3.11, found " + sys.version.split()[0])'
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]'
	@touch $@

# The main job: a 128x128x128 FP16 -> FP32 GEMM through the RTL (SIM=verilator or icarus;
# WAVES=1 dumps a waveform), checked bit for bit against the golden model.
sim: $(STAMP)
	$(BIN)/tcore gemm --m 128 --n 128 --k 128 --format fp16 --acc f32 --seed 1 --backend $(SIM)

# The SoC block with its plain Verilog testbench (no cocotb): tcore writes soc.v, tb_soc.v and
# the operands' hex files, Icarus (SOC_SIM=icarus, the default) or Verilator runs the
# testbench, and D is compared with the golden model bit for bit.
SOC_SIM ?= icarus
soc-demo: $(STAMP)
	$(BIN)/python -m tcore.sim.soc_demo --sim $(SOC_SIM)

# A RISC-V CPU (PicoRV32) runs C firmware (sw/demo, the driver sw/tcore.c) that drives the soc
# block on Verilator: D checked bit for bit, the CPU's soft-float GEMM timed against the block's
# (needs Debian's gcc-riscv64-unknown-elf; CPU_DEMO_ARGS e.g. "--m 64 --n 64 --k 32").
CPU_DEMO_ARGS ?=
cpu-demo: $(STAMP)
	$(BIN)/python -m tcore.sim.cpu_demo $(CPU_DEMO_ARGS)

# make test: everything but the slow tests (pyproject's addopts leave them out); make test-all:
# the slow ones too.  Both print the 25 slowest tests and their wall time (budget of make test:
# 12 minutes on an idle 2-core machine).
test: $(STAMP)
	@start=$$(date +%s); $(BIN)/python -m pytest -n auto --dist worksteal --durations=25 $(PYTEST_ARGS); \
	rc=$$?; echo "make test: $$(( $$(date +%s) - start )) s wall clock"; exit $$rc

test-all: $(STAMP)
	@start=$$(date +%s); $(BIN)/python -m pytest -n auto --dist worksteal --durations=25 -m "slow or not slow" $(PYTEST_ARGS); \
	rc=$$?; echo "make test-all: $$(( $$(date +%s) - start )) s wall clock"; exit $$rc

lint: $(STAMP)
	$(BIN)/python -m tcore.sim.lint

# SymbiYosys proofs (yowasp-sby with the Yices solver, both from the test extra); make test runs
# them too (tests/test_formal_*.py).
formal: $(STAMP)
	$(BIN)/python -m tcore.sim.formal

verilog: $(STAMP)
	$(BIN)/tcore verilog -o build/verilog

# The benchmarks (figures, not tests); make bench is the old name.
benchmark: $(STAMP)
	$(BIN)/tcore benchmark all

bench: benchmark

# FPGA flow (ECP5, in the pin harness: docs/fpga.md) for the MMA4 core; needs the synth extra (installed here).
synth: $(STAMP)
	$(BIN)/python -m pip install -q -e '.[synth]'
	$(BIN)/tcore synth --design mma4

# The pictures in docs/ (matplotlib comes with the test extra).
plots: $(STAMP)
	$(BIN)/tcore plot layout -o docs/layout.png
	$(BIN)/tcore plot accumulation -o docs/accumulation.png
	$(BIN)/tcore plot fp8-accumulation -o docs/fp8_accumulation.png

# (and numba's on-disk cache of the golden model's compiled engine, golden/__pycache__/*.nb[ic])
clean:
	rm -rf build .pytest_cache
	find golden -name '*.nb[ic]' -delete
