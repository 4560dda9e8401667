"""cocotb bench for the GEMM top (``rtl/gemm.py``), scoreboarded against ``tcore.golden.gemm.matmul_t``.

The memories are loaded once through the simulator's access to the memory array (no clock
cycles), the RTL runs on its own until ``done`` (the bench only wakes every few thousand
clocks to report progress), and D is read once: per-clock Python would cost ~30x.

* ``job``: the GEMM in the hand-over's ``job`` file (a, b bits, formats); D, cycles and
  beats to its ``result`` file; progress ("tiles done/total clocks") to its ``progress`` file.
* ``random_gemms``: a few shapes and formats, every bit against the golden model, and the
  core-beat count that utilisation is computed from.
* ``reset_midrun``: a reset while a GEMM runs stops it (no done, no further memory writes),
  and the next GEMM is bit-exact.

Every wait for ``done`` is bounded by a clock budget derived from the job
(:func:`tcore.host.images.clock_budget`; the hand-over's ``clock_budget`` option overrides it): a lost ``done`` is a failure
that names what was awaited, not a hang.
"""

from __future__ import annotations

import time

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles, RisingEdge

from tcore.golden.gemm import matmul_t
from tcore.tb import memh
from tcore.tb.gemm_driver import GemmRunner, random_operands
from tcore.numerics import Op
from tcore.host.handover import handover
from tcore.host.images import gemm_layout as layout
from tcore.tb.common import reset

@cocotb.test()
async def job(dut):
    r = GemmRunner(dut)
    await r.start()
    h = handover()
    with np.load(h.job) as z:
        a, b, op = z["a"], z["b"], Op.parse(str(z["op"]))
    # The operation's mode fields and K step (the Op's), the sparse flag where A is 2:4.
    fields = {**{f: int(v) for f, v in op.mode_fields.items()}, **({"sparse": 1} if op.sparse else {})}
    kstep = op.k_step
    t0 = time.perf_counter()
    d, cycles, beats = await r.run(a, b, fields=fields, kstep=kstep, preloaded=True,
                                   progress=h.progress)
    np.savez(h.result, d=d, cycles=cycles, beats=beats,
             sim_s=time.perf_counter() - t0)


@cocotb.test()
async def random_gemms(dut):
    """Shapes and formats against the golden model; beats = M*N*K/64 (every FMA done once)."""
    rng = np.random.default_rng(handover().option("seed", 3))
    r = GemmRunner(dut)
    await r.start()
    for m, n, k, fmt, acc_f16 in ((32, 48, 32, "fp16", False), (16, 32, 48, "bf16", False),
                                  (48, 16, 32, "fp16", True), (16, 16, 16, "fp16", False)):
        a, b = random_operands(rng, m, n, k, fmt)
        d, cycles, beats = await r.run(a, b, bf16=fmt == "bf16", acc_f16=acc_f16, chunk=64)
        want = matmul_t(a, b, in_fmt=fmt, out_fmt="fp16" if acc_f16 else "fp32")
        bad = int((d != want).sum())
        assert bad == 0, f"{m}x{n}x{k} {fmt} acc_f16={acc_f16}: {bad} mismatches"
        assert beats == m * n * k // 64, f"{beats} beats for {m}x{n}x{k}"
        assert cycles >= beats // handover().param("warps")
        dut._log.info(f"{m}x{n}x{k} {fmt}: {cycles} clocks, {beats} beats")


@cocotb.test()
async def reset_midrun(dut):
    """Reset in the middle of a GEMM: busy and done fall and stay low, the memory is not
    written after the reset, and the next GEMM (other operands) is bit-exact."""
    rng = np.random.default_rng(handover().option("seed", 4))
    r = GemmRunner(dut)
    await r.start()
    m, n, k = 32, 32, 32
    a, b = random_operands(rng, m, n, k, "fp16")
    _, _, d_base, end = layout(m, n, k, False)
    await r.preload(a, b, False)
    # D starts as a known pattern, so that a write after the reset shows.
    await memh.load(dut, d_base, np.full((end - d_base) * 16, 0xA5, np.uint8))
    await r.launch(a, b, bf16=False, acc_f16=False)
    await ClockCycles(dut.clk, 300)          # a first tile stored or storing, others in flight
    assert dut.busy.value == 1 and dut.done.value == 0, "the GEMM ended before the reset"
    await reset(dut)
    await RisingEdge(dut.clk)
    before = await r.peek(d_base, end - d_base)
    for _ in range(400):
        await RisingEdge(dut.clk)
        assert dut.busy.value.is_resolvable and dut.busy.value == 0, "busy after the reset"
        assert dut.done.value.is_resolvable and dut.done.value == 0, "done after the reset"
    assert dut.tiles_done.value == 0 and dut.cycles.value == 0 and dut.beats.value == 0
    after = await r.peek(d_base, end - d_base)
    assert np.array_equal(before, after), "the memory was written after the reset"
    a, b = random_operands(rng, m, n, k, "fp16")
    d, cycles, beats = await r.run(a, b, bf16=False, acc_f16=False, chunk=64)
    want = matmul_t(a, b)
    bad = int((d != want).sum())
    assert bad == 0, f"after a reset: {bad} of {d.size} mismatches"
    assert beats == m * n * k // 64, f"{beats} beats after a reset"
