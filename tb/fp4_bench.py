"""cocotb benches for the NVFP4/MXFP4 front end (``rtl/nvfp4.py``), scoreboarded against
``tcore.golden.nvfp4``.

* ``decode_exhaustive`` (design ``fp4dec``): every E2M1 code x every scale code (UE4M3 and E8M0),
  16 lanes a clock, each lane a different pair; checks the value one clock later, bit for bit.
* ``job`` (design ``fp4gemm``): a quantised GEMM whose packed operands are the memory's initial
  contents (``+TCORE_MEMH_IN``, laid out by :func:`tcore.host.images.fp4_image`): decode, matmulT, epilogue; D to
  the hand-over's ``result`` file.
* ``reset_midrun`` (design ``fp4gemm``): the same job, reset at the hand-over's ``reset_at`` option, in clocks
  after start (in decode, GEMM or epilogue): busy and done stay low and the memory is not
  written after the reset; the job run again from start equals the job's ``want`` bit for bit.
"""

from __future__ import annotations

import time

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles, FallingEdge, ReadOnly, RisingEdge

from tcore.golden.nvfp4 import decode_elements
from tcore.rtl.nvfp4 import Fp4Config
from tcore.tb.gemm_driver import GemmRunner
from tcore.host.handover import handover
from tcore.host.images import fcfg_word, fp4_extra_clocks, struct_fields
from tcore.tb.common import clock, reset



@cocotb.test()
async def decode_exhaustive(dut):
    clock(dut)
    lanes = len(dut.codes) // 4
    codes = np.repeat(np.arange(16, dtype=np.uint8), 256)
    scales = np.tile(np.arange(256, dtype=np.uint8), 16)
    # Start between edges, after Icarus's time-0 evaluation (sim.runner's trigger fix at 1 ns).
    await FallingEdge(dut.clk)
    checked = 0
    for fmt, mx in (("nvfp4", 0), ("mxfp4", 1)):
        want = decode_elements(codes, scales, fmt)
        for i in range(0, codes.size, lanes):
            dut.codes.value = sum(int(c) << (4 * j) for j, c in enumerate(codes[i:i + lanes]))
            dut.scales.value = sum(int(s) << (8 * j) for j, s in enumerate(scales[i:i + lanes]))
            dut.mx.value = mx
            await RisingEdge(dut.clk)
            await ReadOnly()
            out = dut.values.value.to_unsigned()
            for j in range(lanes):
                got = (out >> (16 * j)) & 0xFFFF
                assert got == want[i + j], (
                    f"{fmt}: code {codes[i + j]:#x} scale {scales[i + j]:#04x}: "
                    f"RTL {got:#06x}, golden {int(want[i + j]):#06x}")
                checked += 1
            await FallingEdge(dut.clk)
    assert checked == 2 * 16 * 256
    dut._log.info(f"decoded {checked} (code, scale) pairs bit-exactly")


def _load_job():
    with np.load(handover().job) as j:
        cfg = {f: int(j[f"cfg_{f}"]) for f in ("tiles_m", "tiles_n", "steps")}
        fcfg = {name: int(j[f"fcfg_{name}"]) for name, _, _ in struct_fields(Fp4Config)}
        want = j["want"] if "want" in j.files else None
    return cfg, fcfg, want


@cocotb.test()
async def reset_midrun(dut):
    r = GemmRunner(dut)
    await r.start()
    cfg, fcfg, want = _load_job()
    assert want is not None, "the job has no expected D"
    dut.fcfg.value = fcfg_word(**fcfg)
    m, n, k = cfg["tiles_m"] * 16, cfg["tiles_n"] * 16, cfg["steps"] * 16
    a, b = np.empty((m, k), np.uint16), np.empty((k, n), np.uint16)
    words = handover().param("mem_words")
    await r.launch(a, b, bf16=bool(fcfg["mx"]), acc_f16=False)
    await ClockCycles(dut.clk, handover().option("reset_at", 200))
    assert dut.busy.value == 1 and dut.done.value == 0, "the job ended before the reset"
    await reset(dut)
    await RisingEdge(dut.clk)
    before = await r.peek(0, words)
    for _ in range(300):
        await RisingEdge(dut.clk)
        assert dut.busy.value.is_resolvable and dut.busy.value == 0, "busy after the reset"
        assert dut.done.value.is_resolvable and dut.done.value == 0, "done after the reset"
    after = await r.peek(0, words)
    diff = np.flatnonzero(before != after)
    assert diff.size == 0, f"memory written after the reset: {diff.size} bytes, first at {diff[0]}"
    d, cycles, beats = await r.run(a, b, bf16=bool(fcfg["mx"]), acc_f16=False, preloaded=True,
                                   extra=fp4_extra_clocks(m, n, k), chunk=64)
    bad = np.flatnonzero(d.astype(np.uint32) != want)
    assert bad.size == 0, f"after a reset: {bad.size} of {d.size} differ, first at {bad[0]}"
    assert beats == m * n * k // 64


@cocotb.test()
async def job(dut):
    r = GemmRunner(dut)
    await r.start()
    cfg, fcfg, _ = _load_job()
    dut.fcfg.value = fcfg_word(**fcfg)
    m, n, k = cfg["tiles_m"] * 16, cfg["tiles_n"] * 16, cfg["steps"] * 16
    t0 = time.perf_counter()
    d, cycles, beats = await r.run(np.empty((m, k), np.uint16), np.empty((k, n), np.uint16),
                                   bf16=bool(fcfg["mx"]), acc_f16=False,
                                   progress=handover().progress, preloaded=True,
                                   extra=fp4_extra_clocks(m, n, k))
    np.savez(handover().result, d=d, cycles=cycles, beats=beats,
             gemm_cycles=dut.gemm_cycles.value.to_unsigned(), sim_s=time.perf_counter() - t0)
