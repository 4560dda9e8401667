"""cocotb bench for the GEMM top (``rtl/gemm.py``), scoreboarded against ``golden.gemm.matmul_t``.

The memories are loaded once through the simulator's access to the memory array (no clock
cycles), the RTL runs on its own until ``done`` (the bench only wakes every few thousand
clocks to report progress), and D is read once: per-clock Python would cost ~30x.

* ``job``: the GEMM in ``$TCORE_JOB`` (a, b bits, formats); D, cycles and beats to
  ``$TCORE_RESULT``; progress ("tiles done/total") to ``$TCORE_PROGRESS`` if set.
* ``random_gemms``: a few shapes and formats, every bit against the golden model, and the
  core-beat count that utilisation is computed from.
* ``reset_midrun``: a reset while a GEMM runs stops it (no done, no further memory writes),
  and the next GEMM is bit-exact.

Every wait for ``done`` is bounded by a clock budget derived from the job
(:func:`clock_budget`; ``$TCORE_CLOCK_BUDGET`` overrides it): a lost ``done`` is a failure
that names what was awaited, not a hang.
"""

from __future__ import annotations

import os
import time

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge, Timer

from golden.gemm import matmul_t
from rtl.gemm import GemmConfig
from tb import memh

CLOCK_NS = 10
def struct_fields(layout) -> list[tuple[str, int]]:
    """(name, width) of a ``lib.data.Struct``'s fields, LSB first: the RTL's own widths."""
    from amaranth.lib import data
    return [(name, field.width) for name, field in data.Layout.cast(layout)]


CFG_FIELDS = struct_fields(GemmConfig)


def cfg_word(**f) -> int:
    """Pack :class:`rtl.gemm.GemmConfig` (LSB first)."""
    return pack_fields(CFG_FIELDS, **f)


def pack_fields(fields, **f) -> int:
    """Pack named fields LSB first, as a ``lib.data.Struct`` lays them out."""
    word, pos = 0, 0
    for name, width in fields:
        v = int(f.pop(name))
        assert 0 <= v < (1 << width), f"{name}={v} does not fit in {width} bits"
        word |= v << pos
        pos += width
    assert not f, f
    return word


def layout(m, n, k, acc_f16):
    """Word addresses of A, B and D, and the words needed."""
    a_words = m * k * 2 // 16
    b_words = k * n * 2 // 16
    d_words = m * n * (2 if acc_f16 else 4) // 16
    return 0, a_words, a_words + b_words, a_words + b_words + d_words


def clock_budget(m, n, k, cores=1, extra=0) -> int:
    """Clocks a GEMM may take before its ``done`` counts as lost: twice the core beats per core
    (the GEMM top keeps its cores above 0.9 busy), 600 per 16x16 tile for loads and stores,
    ``extra`` (an FP4 design's decode and epilogue) and a margin."""
    override = os.environ.get("TCORE_CLOCK_BUDGET")
    if override:
        return int(override)
    beats = m * n * k // 64
    return 2 * beats // cores + 600 * (m // 16) * (n // 16) + extra + 5000


class GemmRunner:
    def __init__(self, dut):
        self.dut = dut

    async def start(self):
        d = self.dut
        # The clock runs in the simulator interface (C++), not as a Python coroutine: the RTL
        # then runs with no Python on its clock edges.
        cocotb.start_soon(Clock(d.clk, CLOCK_NS, unit="ns", impl="gpi").start())
        d.start.value = 0
        d.host_we.value = 0
        d.rst.value = 1
        await ClockCycles(d.clk, 2)
        d.rst.value = 0

    async def peek(self, base, nwords) -> np.ndarray:
        """Read words base.. at once through the memory dump hook (``tb.memh``)."""
        return await memh.dump(self.dut, base, nwords)

    async def preload(self, a, b, acc_f16):
        """Put A and B into the memory at once through the load hook (``tb.memh``); the
        design must be idle."""
        m, k = a.shape
        a_base, b_base, _, _ = layout(m, b.shape[1], k, acc_f16)
        assert b_base == a_base + a.size * 2 // 16
        await memh.load(self.dut, a_base, np.concatenate([
            np.ascontiguousarray(a).view(np.uint8).reshape(-1),
            np.ascontiguousarray(b).view(np.uint8).reshape(-1)]))
        await RisingEdge(self.dut.clk)

    async def launch(self, a, b, *, bf16, acc_f16):
        """Set cfg for A (M x K) and B (K x N) at the standard layout and pulse start."""
        d = self.dut
        m, k = a.shape
        n = b.shape[1]
        a_base, b_base, d_base, end = layout(m, n, k, acc_f16)
        d.cfg.value = cfg_word(tiles_m=m // 16, tiles_n=n // 16, steps=k // 16, a_base=a_base,
                               b_base=b_base, d_base=d_base, bf16=bf16, acc_f16=acc_f16)
        await RisingEdge(d.clk)
        d.start.value = 1
        await RisingEdge(d.clk)
        d.start.value = 0

    async def run(self, a, b, *, bf16, acc_f16, progress=None, chunk=1024, preloaded=False,
                  budget=None, extra=0):
        """Run a GEMM and return (D, cycles, beats); fail if ``done`` has not risen within
        ``budget`` clocks (default :func:`clock_budget`, ``extra`` added)."""
        d = self.dut
        m, k = a.shape
        n = b.shape[1]
        a_base, b_base, d_base, end = layout(m, n, k, acc_f16)
        cores = int(os.environ.get("TCORE_CORES", "1"))
        budget = clock_budget(m, n, k, cores, extra) if budget is None else budget
        if not preloaded:
            await self.preload(a, b, acc_f16)
        await self.launch(a, b, bf16=bf16, acc_f16=acc_f16)
        total = (m // 16) * (n // 16)
        waited = 0
        while True:
            # A timer, not ClockCycles: no Python runs on the clock edges in between.
            step = max(1, min(chunk, budget - waited))
            await Timer(step * CLOCK_NS, unit="ns")
            waited += step
            if progress:
                with open(progress, "w") as f:
                    f.write(f"{d.tiles_done.value.to_unsigned()} {total} {d.cycles.value.to_unsigned()}\n")
            if not d.done.value.is_resolvable:
                raise AssertionError(f"X or Z on done {waited} clocks after start: {d.done.value}")
            if d.done.value == 1:
                break
            if waited >= budget:
                raise AssertionError(
                    f"done did not rise within {budget} clocks of start ({m}x{n}x{k} GEMM, "
                    f"{d.tiles_done.value} of {total} tiles stored, busy={d.busy.value})")
        out = (await self.peek(d_base, end - d_base)).view(np.uint16 if acc_f16 else np.uint32).reshape(m, n)
        return out, d.cycles.value.to_unsigned(), d.beats.value.to_unsigned()


@cocotb.test()
async def job(dut):
    r = GemmRunner(dut)
    await r.start()
    with np.load(os.environ["TCORE_JOB"]) as z:
        a, b, bf16, acc_f16 = z["a"], z["b"], bool(z["bf16"]), bool(z["acc_f16"])
    t0 = time.perf_counter()
    d, cycles, beats = await r.run(a, b, bf16=bf16, acc_f16=acc_f16, preloaded=True,
                                   progress=os.environ.get("TCORE_PROGRESS"))
    np.savez(os.environ["TCORE_RESULT"], d=d, cycles=cycles, beats=beats,
             sim_s=time.perf_counter() - t0)


@cocotb.test()
async def random_gemms(dut):
    """Shapes and formats against the golden model; beats = M*N*K/64 (every FMA done once)."""
    rng = np.random.default_rng(int(os.environ.get("TCORE_SEED", "3")))
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
        assert cycles >= beats // int(os.environ.get("TCORE_CORES", "1"))
        dut._log.info(f"{m}x{n}x{k} {fmt}: {cycles} clocks, {beats} beats")


def random_operands(rng, m, n, k, fmt):
    import ml_dtypes
    conv = np.float16 if fmt == "fp16" else ml_dtypes.bfloat16
    a = rng.standard_normal((m, k)).astype(conv).view(np.uint16)
    b = rng.standard_normal((k, n)).astype(conv).view(np.uint16)
    return a, b


@cocotb.test()
async def reset_midrun(dut):
    """Reset in the middle of a GEMM: busy and done fall and stay low, the memory is not
    written after the reset, and the next GEMM (other operands) is bit-exact."""
    rng = np.random.default_rng(int(os.environ.get("TCORE_SEED", "4")))
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
    dut.rst.value = 1
    await ClockCycles(dut.clk, 2)
    dut.rst.value = 0
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
