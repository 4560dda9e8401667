"""``make cpu-demo``: a RISC-V CPU drives the ``soc`` block from C, in simulation.

The system (:func:`system_verilog`, module ``tb_cpu``): PicoRV32 (the Verilog of the PyPI
package ``pythondata-cpu-picorv32``, RV32IM with cycle counters) on its native memory bus;
one RAM shared by the CPU and the block's AXI4 master; the block's AXI4-Lite registers behind a
small bus bridge; a console and an exit port for the firmware.  CPU memory map:

====================  ==========================================================
0x0000_0000           RAM (512 KiB, 128-bit words): code below 0x8000, then the
                      parameter block (0x8000), A (0x10000), B (0x20000), D
                      (0x30000), the software D (0x40000); stack at the top
0x1000_0000           the tcore registers (``sw/include/tcore_regs.h``)
0x2000_0000           console: a byte written here is printed
0x2000_0004           exit: a word written here ends the simulation with that code
====================  ==========================================================

The firmware (``sw/demo/main.c`` with the driver ``sw/tcore.c``, compiled by Debian's
``gcc-riscv64-unknown-elf``) reads the parameter block, calls ``tcore_gemm`` and times it with
``rdcycle``, checks that a bad size comes back as the block's error code, then computes the
same GEMM in software (libgcc's soft-float) and times that.  :func:`run_cpu_demo` builds the
firmware and the simulation (Verilator), runs them, and checks the block's D against the golden
model and the software D against a float32 model of the C loop, both bit for bit.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np

from .runner import digest as _digest
from .soc_demo import DemoError, _hex, _read_hex, soc_and_memory

__all__ = ["run_cpu_demo", "system_verilog", "build_firmware", "software_reference",
           "PARAMS_ADDR", "A_ADDR", "B_ADDR", "D_ADDR", "DSW_ADDR", "MAX_ELEMS"]

ROOT = Path(__file__).resolve().parent.parent
SW = ROOT / "sw"
MEM_BYTES = 1 << 19
PARAMS_ADDR, A_ADDR, B_ADDR, D_ADDR, DSW_ADDR = 0x8000, 0x10000, 0x20000, 0x30000, 0x40000
MAX_ELEMS = 16384                 # each operand region holds 64 KiB (sw/demo/main.c)
PARAMS_MAGIC = 0x7463646D         # "tcdm"
FLAG_SOFTWARE = 1
GCC = "riscv64-unknown-elf-gcc"
OBJCOPY = "riscv64-unknown-elf-objcopy"
DW = 128


def picorv32_verilog() -> Path:
    try:
        import pythondata_cpu_picorv32 as p
    except ImportError:
        raise DemoError("PicoRV32 not installed: pip install pythondata-cpu-picorv32 "
                        "(the test extra has it)") from None
    return Path(p.data_location) / "picorv32.v"


def system_verilog(data_width: int = DW) -> str:
    """The Verilog of ``tb_cpu``: clock, reset, PicoRV32, the shared RAM, the register bridge,
    the console and exit ports, and the ``soc`` block (the ``soc`` module comes separately)."""
    wb = data_width // 8
    words = MEM_BYTES // wb
    lane_bits = (wb // 4).bit_length() - 1
    lane = f"mem_addr[{lane_bits + 1}:2]" if lane_bits else "1'b0"
    cpu_port = f"""    // the CPU's port: RAM, the register bridge, console and exit
    cpu_ready <= 1'b0;
    if (cpu_valid && !cpu_ready) begin
      if (mem_addr < {MEM_BYTES}) begin
        cpu_ready <= 1'b1;
        cpu_rdata <= mem[mem_addr >> {wb.bit_length() - 1}][32*{lane} +: 32];
        for (j = 0; j < 4; j = j + 1)
          if (mem_wstrb[j]) mem[mem_addr >> {wb.bit_length() - 1}][32*{lane} + 8*j +: 8] <= mem_wdata[8*j +: 8];
      end else if (mem_addr[31:28] == 4'h2) begin
        cpu_ready <= 1'b1; cpu_rdata <= 32'h0;
        if (|mem_wstrb && mem_addr[3:0] == 4'h0) $write("%c", mem_wdata[7:0]);
        if (|mem_wstrb && mem_addr[3:0] == 4'h4) begin exit_code <= mem_wdata; exited <= 1'b1; end
      end else if (mem_addr[31:28] == 4'h1) begin
        // the AXI4-Lite bridge: one register access at a time
        case (br)
          2'd0: if (|mem_wstrb) begin
                  s_axil_awaddr <= mem_addr[9:0]; s_axil_awvalid <= 1'b1; s_axil_wdata <= mem_wdata;
                  s_axil_wstrb <= mem_wstrb; s_axil_wvalid <= 1'b1; s_axil_bready <= 1'b1; br <= 2'd1;
                end else begin
                  s_axil_araddr <= mem_addr[9:0]; s_axil_arvalid <= 1'b1; s_axil_rready <= 1'b1; br <= 2'd2;
                end
          2'd1: begin
                  if (s_axil_awready) s_axil_awvalid <= 1'b0;
                  if (s_axil_wready) s_axil_wvalid <= 1'b0;
                  if (s_axil_bvalid) begin
                    s_axil_bready <= 1'b0; cpu_ready <= 1'b1; br <= 2'd0;
                    if (s_axil_bresp != 2'b00) bus_errors <= bus_errors + 1;
                  end
                end
          default: begin
                  if (s_axil_arready) s_axil_arvalid <= 1'b0;
                  if (s_axil_rvalid) begin
                    s_axil_rready <= 1'b0; cpu_rdata <= s_axil_rdata; cpu_ready <= 1'b1; br <= 2'd0;
                    if (s_axil_rresp != 2'b00) bus_errors <= bus_errors + 1;
                  end
                end
        endcase
      end else begin
        cpu_ready <= 1'b1; cpu_rdata <= 32'hDEADBEEF; bus_errors <= bus_errors + 1;
      end
    end
"""
    return f"""// tb_cpu: PicoRV32 driving the tcore soc block (generated by tcore; see sim/cpu_demo.py).
`timescale 1ns/1ps
module tb_cpu;
  localparam DW = {data_width}, AW = 32, WB = {wb}, WORDS = {words};
  reg clk = 1'b0, rst = 1'b1;
  always #5 clk = ~clk;

  // ---- PicoRV32 on its native memory bus ---------------------------------------------------
  wire        cpu_valid, cpu_instr, trap;
  reg         cpu_ready = 1'b0;
  wire [31:0] mem_addr, mem_wdata;
  wire [3:0]  mem_wstrb;
  reg  [31:0] cpu_rdata = 32'h0;
  picorv32 #(
    .ENABLE_COUNTERS(1), .ENABLE_COUNTERS64(1), .ENABLE_MUL(0), .ENABLE_FAST_MUL(1),
    .ENABLE_DIV(1), .BARREL_SHIFTER(1), .COMPRESSED_ISA(0), .ENABLE_IRQ(0),
    .PROGADDR_RESET(32'h0), .STACKADDR(32'h{MEM_BYTES:X})
  ) cpu (
    .clk(clk), .resetn(!rst), .trap(trap),
    .mem_valid(cpu_valid), .mem_instr(cpu_instr), .mem_ready(cpu_ready), .mem_addr(mem_addr),
    .mem_wdata(mem_wdata), .mem_wstrb(mem_wstrb), .mem_rdata(cpu_rdata),
    .pcpi_wr(1'b0), .pcpi_rd(32'h0), .pcpi_wait(1'b0), .pcpi_ready(1'b0), .irq(32'h0)
  );

  reg  [1:0]  br = 2'd0;
  reg  [31:0] exit_code = 32'h0, bus_errors = 32'h0;
  reg         exited = 1'b0;
  integer     j;
{soc_and_memory(data_width, 32, "tb_cpu", cpu_port)}
  // ---- load, run, dump ------------------------------------------------------------------------
  integer clocks = 0, timeout;
  always @(posedge clk) clocks <= clocks + 1;
  initial begin
    if (!$value$plusargs("TIMEOUT=%d", timeout)) timeout = 100000000;
    // each file from its region's first word on, for as many words as it has
    $readmemh("firmware.hex", mem, 0);
    $readmemh("params.hex", mem, {PARAMS_ADDR // wb});
    $readmemh("a.hex", mem, {A_ADDR // wb});
    $readmemh("b.hex", mem, {B_ADDR // wb});
    repeat (4) @(posedge clk);
    rst = 1'b0;
    while (!exited && !trap && clocks < timeout) @(posedge clk);
    if (trap) $display("tb_cpu: the CPU trapped at clock %0d", clocks);
    else if (!exited) $display("tb_cpu: no exit in %0d clocks", timeout);
    $writememh("d.hex", mem, {D_ADDR // wb}, {D_ADDR // wb + (1 << 16) // wb - 1});
    $writememh("dsw.hex", mem, {DSW_ADDR // wb}, {DSW_ADDR // wb + (1 << 16) // wb - 1});
    $display("tb_cpu: exit %0d after %0d clocks, %0d bus errors", exit_code, clocks, bus_errors);
    $finish;
  end
endmodule
"""


def _run(cmd: list, cwd: Path, what: str):
    r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if r.returncode:
        raise DemoError(f"{what} failed:\n{(r.stderr or r.stdout).strip()[-2000:]}")
    return r


FIRMWARE_SOURCES = ("demo/start.S", "demo/main.c", "tcore.c", "include/tcore.h",
                    "include/tcore_regs.h", "demo/link.ld")
CFLAGS = ["-march=rv32im", "-mabi=ilp32", "-O2", "-ffreestanding", "-nostdlib",
          "-ffp-contract=off", "-fno-tree-loop-distribute-patterns", "-Wall", "-Wextra", "-Werror", "-Wl,--no-warn-rwx-segments"]


def build_firmware(out: Path, log=print) -> Path:
    """Compile ``sw/demo`` and the driver into ``out/firmware.hex`` (``DW``-bit words for
    ``$readmemh``); kept while the sources and flags are unchanged."""
    if shutil.which(GCC) is None:
        raise DemoError(f"{GCC} not found (apt-get install gcc-riscv64-unknown-elf)")
    key = _digest(*CFLAGS, *((SW / f).read_bytes() for f in FIRMWARE_SOURCES))
    hexfile, stamp = out / "firmware.hex", out / "firmware.inputs"
    if hexfile.exists() and stamp.exists() and stamp.read_text() == key:
        return hexfile
    t = time.perf_counter()
    _run([GCC, *CFLAGS, "-I", str(SW / "include"), "-T", str(SW / "demo/link.ld"),
          "-o", "firmware.elf", str(SW / "demo/start.S"), str(SW / "demo/main.c"),
          str(SW / "tcore.c"), "-lgcc"], out, "the firmware build")
    _run([OBJCOPY, "-O", "binary", "firmware.elf", "firmware.bin"], out, "objcopy")
    image = (out / "firmware.bin").read_bytes()
    if len(image) > PARAMS_ADDR:
        raise DemoError(f"the firmware ({len(image)} bytes) overlaps the parameter block")
    _hex(np.frombuffer(image, np.uint8), hexfile, DW)
    stamp.write_text(key)
    log(f"firmware: {len(image)} bytes ({time.perf_counter() - t:.1f} s)")
    return hexfile


def software_reference(a_bits: np.ndarray, b_bits: np.ndarray, fmt: str) -> np.ndarray:
    """What the firmware's software GEMM computes (FP32 bits): for each output, products in
    float32 (exact for 16-bit inputs) added one at a time along K from 0.0, each add rounded
    to nearest even, as the C loop with libgcc's soft-float does."""
    from tcore.numerics.formats import values_dtype
    dt = values_dtype(fmt)
    a = a_bits.view(dt).astype(np.float32)
    b = b_bits.view(dt).astype(np.float32)
    acc = np.zeros((a.shape[0], b.shape[1]), np.float32)
    with np.errstate(all="ignore"):
        for p in range(a.shape[1]):
            acc = acc + a[:, p, None] * b[None, p, :]
    return acc.view(np.uint32)


_KV = re.compile(r"(\w+)=(\d+)")


def _console(text: str, prefix: str) -> dict:
    for line in text.splitlines():
        if line.startswith(prefix):
            return {k: int(v) for k, v in _KV.findall(line)}
    return {}


def _build_sim(out: Path, log, lanes: int) -> Path:
    from tcore.sim.runner import design_verilog, setup_path

    soc = design_verilog("soc", {"data_width": DW, "lanes": lanes})
    tb = system_verilog(DW)
    cpu = picorv32_verilog().read_text()
    key = _digest(soc, tb, cpu)
    exe, stamp = out / "obj_dir" / "Vtb_cpu", out / "sim.inputs"
    if exe.exists() and stamp.exists() and stamp.read_text() == key:
        return exe
    (out / "soc.v").write_text(soc)
    (out / "tb_cpu.v").write_text(tb)
    (out / "picorv32.v").write_text(cpu)
    setup_path()
    t = time.perf_counter()
    log("building the simulation with Verilator (a few minutes the first time) ...")
    _run(["verilator", "--binary", "--timing", "-Wno-fatal", "-Wno-lint", "-Wno-style", "-O1",
          "-CFLAGS", "-fcoroutines", "--top-module", "tb_cpu", "tb_cpu.v", "soc.v", "picorv32.v",
          "-j", "2"], out, "verilator")
    stamp.write_text(key)
    log(f"built ({time.perf_counter() - t:.0f} s)")
    return exe


def run_cpu_demo(out: Path, *, m: int = 32, n: int = 32, k: int = 32, fmt: str = "fp16",
                 seed: int = 1, software: bool = True, lanes: int = 64, log=print) -> dict:
    """Build and run the CPU demo in ``out``; return its figures and checks.

    ``lanes``: the products per clock of the block's core (64, 32 or 16: the size of the
    core, not its results; the block's cycles grow as the lanes shrink).

    ``mismatches``: the block's D against :func:`tcore.golden.mma.mma`; ``software_mismatches``:
    the CPU's D against :func:`software_reference`; ``accel_cpu_clocks`` / ``sw_cpu_clocks``:
    the CPU's ``rdcycle`` around ``tcore_gemm`` and around the software GEMM (the same
    simulation, the same clock); ``speedup``: their ratio."""
    from tcore.golden import mma
    from tcore.rtl.mma4 import LANES
    from tcore.rtl.regmap import ErrorCode

    for name, v in (("M", m), ("N", n), ("K", k)):
        if v < 16 or v % 16:
            raise DemoError(f"{name} must be a positive multiple of 16, not {v}")
    if max(m * k, k * n, m * n) > MAX_ELEMS:
        raise DemoError(f"{m}x{n}x{k}: each of A, B and D must hold at most {MAX_ELEMS} elements")
    if fmt not in ("fp16", "bf16"):
        raise DemoError(f"format must be fp16 or bf16, not {fmt!r}")
    if lanes not in LANES:
        raise DemoError(f"lanes must be one of {', '.join(map(str, LANES))}, not {lanes}")
    out = Path(out).resolve()           # the simulation runs in it: a relative path would move
    out.mkdir(parents=True, exist_ok=True)
    build_firmware(out, log)
    exe = _build_sim(out, log, lanes)
    from tcore.numerics import Op
    a, b = Op(fmt).random_operands(m, n, k, seed)
    _hex(a, out / "a.hex", DW)
    _hex(b, out / "b.hex", DW)
    params = np.array([PARAMS_MAGIC, m, n, k, int(fmt == "bf16"), FLAG_SOFTWARE * software, 0, 0],
                      np.uint32)
    _hex(params, out / "params.hex", DW)
    for f in ("d.hex", "dsw.hex"):
        (out / f).unlink(missing_ok=True)
    t = time.perf_counter()
    r = subprocess.run([str(exe)], cwd=out, capture_output=True, text=True)
    sim_s = time.perf_counter() - t
    said = (r.stdout + r.stderr).strip()
    log(said)
    end = re.search(r"tb_cpu: exit (\d+) after (\d+) clocks, (\d+) bus errors", said)
    if end is None or not (out / "d.hex").exists():
        raise DemoError(f"the simulation did not finish:\n{said[-2000:]}")
    accel, sw = _console(said, "tcore-demo: accelerator"), _console(said, "tcore-demo: software")
    bad_size = _console(said, "tcore-demo: bad-size")
    d = _read_hex(out / "d.hex", DW)[:m * n * 4].view(np.uint32).reshape(m, n)
    want = mma(a, b, np.zeros((m, n), np.uint32), in_fmt=fmt, out_fmt="fp32")
    result = {"m": m, "n": n, "k": k, "format": fmt, "lanes": lanes, "exit": int(end[1]), "sim_clocks": int(end[2]),
              "bus_errors": int(end[3]), "sim_s": round(sim_s, 1),
              "status": accel.get("status"), "accel_cpu_clocks": accel.get("cpu_clocks"),
              "accel_block_cycles": accel.get("block_cycles"), "beats": accel.get("beats"),
              "bad_size_status": bad_size.get("status"),
              "bad_size_ok": bad_size.get("status") == ErrorCode.BAD_SIZE,
              "mismatches": int((d != want).sum())}
    if software:
        dsw = _read_hex(out / "dsw.hex", DW)[:m * n * 4].view(np.uint32).reshape(m, n)
        result["sw_cpu_clocks"] = sw.get("cpu_clocks")
        result["software_mismatches"] = int((dsw != software_reference(a, b, fmt)).sum())
        if sw.get("cpu_clocks") and accel.get("cpu_clocks"):
            result["speedup"] = round(sw["cpu_clocks"] / accel["cpu_clocks"], 1)
    return result


def main(argv=None) -> int:
    """``make cpu-demo``: exit 0 when the block's D is bit-exact and the run had no error."""
    import argparse
    import json
    import sys

    p = argparse.ArgumentParser(prog="python -m tcore.sim.cpu_demo",
                                description="PicoRV32 firmware drives the tcore soc block (Verilator); "
                                            "D is checked against the golden model bit for bit.")
    p.add_argument("--m", type=int, default=32)
    p.add_argument("--n", type=int, default=32)
    p.add_argument("--k", type=int, default=32)
    p.add_argument("--format", default="fp16", choices=["fp16", "bf16"])
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--lanes", type=int, default=64,
                   help="products per clock of the block's core: 64, 32 or 16 (default 64)")
    p.add_argument("--no-software", action="store_true", help="skip the CPU's own GEMM")
    p.add_argument("--json", action="store_true", help="last line: one JSON object")
    p.add_argument("-o", default=None, metavar="DIR", help="build folder (default build/cpu-demo)")
    args = p.parse_args(argv)
    from tcore.sim.runner import build_root
    out = Path(args.o) if args.o else build_root() / "cpu-demo"
    try:
        r = run_cpu_demo(out, m=args.m, n=args.n, k=args.k, fmt=args.format, seed=args.seed,
                         software=not args.no_software, lanes=args.lanes)
    except DemoError as e:
        print(f"cpu-demo: error: {e}", file=sys.stderr)
        return 2
    ok = (r["mismatches"] == 0 and r["status"] == 0 and r["exit"] == 0 and r["bad_size_ok"]
          and r.get("software_mismatches", 0) == 0 and r["bus_errors"] == 0)
    print(f"cpu-demo: {args.m}x{args.n}x{args.k} {args.format} -> fp32, PicoRV32 + tcore soc ({args.lanes}-lane core) on Verilator")
    print(f"  accelerator: status {r['status']}, D mismatches {r['mismatches']} of {args.m * args.n} "
          f"({'bit-exact' if r['mismatches'] == 0 else 'WRONG'}), {r['accel_cpu_clocks']} CPU clocks "
          f"(block {r['accel_block_cycles']} cycles, {r['beats']} beats)")
    print(f"  bad size:    status {r['bad_size_status']} ({'BAD_SIZE, as expected' if r['bad_size_ok'] else 'WRONG'})")
    if "sw_cpu_clocks" in r:
        print(f"  software:    {r['sw_cpu_clocks']} CPU clocks (soft-float), D mismatches "
              f"{r['software_mismatches']} against the float32 model")
        if "speedup" in r:
            print(f"  speed-up:    {r['speedup']}x (software clocks / accelerator clocks, same clock)")
    print(f"  simulation:  {r['sim_clocks']} clocks in {r['sim_s']} s; exit {r['exit']}, "
          f"{r['bus_errors']} bus errors: {'PASS' if ok else 'FAILED'}")
    if args.json:
        print(json.dumps(r))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
