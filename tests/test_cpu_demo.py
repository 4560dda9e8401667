"""A RISC-V CPU drives the ``soc`` block from C (``make cpu-demo``), and the C files users take:
the generated register header and the driver."""

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tcore.rtl.regmap import REGISTERS, ErrorCode, InFormat, c_header
from tcore.sim.cli import main

HAVE_GCC = shutil.which("riscv64-unknown-elf-gcc") is not None
needs_gcc = pytest.mark.skipif(not HAVE_GCC, reason="gcc-riscv64-unknown-elf not installed")


def test_committed_c_header_is_the_generated_one(capsys):
    from pathlib import Path
    root = Path(__file__).resolve().parent.parent
    assert (root / "sw/include/tcore_regs.h").read_text() == c_header()
    assert main(["regs", "--c-header"]) == 0
    assert capsys.readouterr().out == c_header()


def test_c_header_compiles_to_the_register_map(tmp_path):
    """A host C program prints every offset, mask and code of tcore_regs.h (and includes
    tcore.h): the values must be the register map's, so the header says what the RTL does."""
    lines = ['#include <stdio.h>', '#include "tcore.h"', "int main(void) {"]
    want = []
    for r in REGISTERS:
        lines.append(f'printf("%u\\n", (unsigned)TCORE_REG_{r.name});')
        want.append(r.offset)
        if not (len(r.fields) == 1 and r.fields[0].width == 32):
            for f in r.fields:
                base = f"TCORE_{r.name}_{f.name}".upper()
                lines.append(f'printf("%u %u %u\\n", (unsigned){base}_LSB, (unsigned){base}_WIDTH, (unsigned){base}_MASK);')
                want.append(f"{f.lsb} {f.width} {((1 << f.width) - 1) << f.lsb}")
    for e in ErrorCode:
        lines.append(f'printf("%d\\n", (int)TCORE_ERR_{e.name});')
        want.append(int(e))
    for e in InFormat:
        lines.append(f'printf("%d\\n", (int)TCORE_FMT_{e.name});')
        want.append(int(e))
    lines += ['printf("%u\\n", (unsigned)TCORE_ID_VALUE);', "return 0; }"]
    want.append(0x74636F72)
    (tmp_path / "t.c").write_text("\n".join(lines) + "\n")
    from pathlib import Path
    inc = Path(__file__).resolve().parent.parent / "sw/include"
    subprocess.run(["cc", "-std=c99", "-Wall", "-Werror", "-I", str(inc), "-o", "t", "t.c"],
                   cwd=tmp_path, check=True)
    got = subprocess.run(["./t"], cwd=tmp_path, capture_output=True, text=True, check=True).stdout
    assert got.split("\n")[:-1] == [str(w) for w in want]


def test_software_reference_rounds_each_add():
    """The model of the firmware's C loop adds in float32 one product at a time: for
    1 + 2**-24 + 2**-24 (each add a tie to even), it gives 1.0, where a wider sum gives more."""
    from tcore.sim.cpu_demo import software_reference
    a = np.array([[1.0, 2.0 ** -12, 2.0 ** -12]], np.float16).view(np.uint16)
    b = np.array([[1.0], [2.0 ** -12], [2.0 ** -12]], np.float16).view(np.uint16)
    assert software_reference(a, b, "fp16").view(np.float32)[0, 0] == np.float32(1.0)
    wide = np.float64(1) + 2 * 2.0 ** -24
    assert np.float32(wide) != np.float32(1.0)


@needs_gcc
def test_cpu_demo_small_gemm(monkeypatch):
    """PicoRV32 firmware programs the block through the C driver: D bit-exact against the
    golden model, a bad size answered with BAD_SIZE through the driver, the CPU's own
    soft-float GEMM equal to its float32 model, and both timed by the CPU."""
    from tcore.sim.cpu_demo import run_cpu_demo
    from tcore.sim.runner import build_root
    # A 16-lane core: the same results as 64 lanes (tests/test_mma4_rtl.py), a faster simulation.
    # A relative build folder, as `make cpu-demo CPU_DEMO_ARGS="-o DIR"` passes it; under
    # build/, so that the simulation is rebuilt only when its Verilog changes, as the benches'.
    build_root().mkdir(parents=True, exist_ok=True)
    monkeypatch.chdir(build_root())
    r = run_cpu_demo(Path("cpu-demo-test"), m=16, n=16, k=16, fmt="fp16", lanes=16, log=lambda line: None)
    assert r["exit"] == 0 and r["bus_errors"] == 0, r
    assert r["status"] == 0 and r["mismatches"] == 0, r
    assert r["bad_size_status"] == ErrorCode.BAD_SIZE
    assert r["beats"] == 16 * 16 * 16 // 64
    assert r["software_mismatches"] == 0
    assert r["accel_block_cycles"] < r["accel_cpu_clocks"] < r["sw_cpu_clocks"]
    # BF16, no software GEMM: the simulation is reused (same Verilog), the firmware too.
    r = run_cpu_demo(Path("cpu-demo-test"), m=32, n=16, k=32, fmt="bf16", seed=3, software=False, lanes=16,
                     log=lambda line: None)
    assert r["exit"] == 0 and r["status"] == 0 and r["mismatches"] == 0, r
    assert "sw_cpu_clocks" not in r


def test_cpu_demo_refuses_bad_sizes(tmp_path):
    from tcore.sim.cpu_demo import run_cpu_demo
    from tcore.sim.soc_demo import DemoError
    with pytest.raises(DemoError, match="multiple of 16"):
        run_cpu_demo(tmp_path, m=24, n=16, k=16)
    with pytest.raises(DemoError, match="at most 16384"):
        run_cpu_demo(tmp_path, m=256, n=256, k=16)
    with pytest.raises(DemoError, match="lanes must be one of 64, 32, 16, not 8"):
        run_cpu_demo(tmp_path, m=16, n=16, k=16, lanes=8)
