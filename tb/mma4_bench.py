"""cocotb bench for the MMA4 core (``rtl/mma4.py``), scoreboarded against ``golden.mma.mma4``.

Driver, monitor, model and checker are separate small classes.  Tests:

* ``job``: runs the batch in the hand-over's ``job`` file (:class:`tb.beats.Job`) and writes
  D to its ``result`` file; used by ``tcore verify`` and the silicon tests, which compare it.
* ``random_stalls``: random tiles in every mode with random valid/ready stalls on both sides.
* ``throughput_latency``: with no stalls, a beat is accepted every clock and D leaves at the
  mode's rate, exactly ``latency`` (K=4) or ``latency + 3`` (K=16) clocks after the last beat.
* ``reset_midstream``: a reset in the middle of a stream leaves no stale or X output.

The hand-over (:mod:`tb.handover`) gives the design's documented latency (option
``latency``), the job test's stall probability (``stall``) and the random tests' ``seed``.
"""

from __future__ import annotations

import random
import time

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ReadOnly, RisingEdge

from golden import mma, mma4
from tb.beats import Job, block_beats, blocks_to_tiles, load_jobs, pack_payloads, unpack_outputs
from tb.handover import handover

CLOCK_NS = 10


class Driver:
    """Drives beats on ``i``; holds valid and payload until accepted (stream rules)."""

    def __init__(self, dut, stall: float = 0.0, rng=None):
        self.dut, self.stall, self.rng = dut, stall, rng or random.Random(0)
        self.queue: list[int] = []
        self.sent = 0
        self.accept_cycles: list[int] = []
        self._holding = False

    def load(self, payloads):
        self.queue.extend(payloads)

    def drive(self):
        if self._holding:
            return
        if self.queue and self.rng.random() >= self.stall:
            self.dut.i__payload.value = self.queue[0]
            self.dut.i__valid.value = 1
            self._holding = True
        else:
            self.dut.i__valid.value = 0

    def sample(self, cycle):
        ready = self.dut.i__ready.value
        if not ready.is_resolvable:
            raise AssertionError(f"X or Z on i.ready at clock {cycle}: {ready}")
        if self._holding and ready == 1:
            self.queue.pop(0)
            self.sent += 1
            self.accept_cycles.append(cycle)
            self._holding = False


class Monitor:
    """Collects D words from ``o``, with random backpressure."""

    def __init__(self, dut, stall: float = 0.0, rng=None):
        self.dut, self.stall, self.rng = dut, stall, rng or random.Random(1)
        self.words: list[int] = []
        self.cycles: list[int] = []
        self.x_seen = False

    def drive(self):
        self.dut.o__ready.value = 0 if self.rng.random() < self.stall else 1

    def sample(self, cycle):
        valid = self.dut.o__valid.value
        if not valid.is_resolvable:
            self.x_seen = True
            raise AssertionError(f"X or Z on o.valid at clock {cycle}: {valid}")
        if valid == 1 and self.dut.o__ready.value == 1:
            val = self.dut.o__payload.value
            if not val.is_resolvable:       # a failure where it happens, never a zero
                self.x_seen = True
                raise AssertionError(f"X or Z on o.payload at clock {cycle} (output "
                                     f"{len(self.words)}): {val}")
            self.words.append(val.to_unsigned())
            self.cycles.append(cycle)


class Harness:
    """Clock, reset and the per-cycle loop that steps driver and monitor together."""

    def __init__(self, dut, in_stall=0.0, out_stall=0.0, seed=0):
        self.dut = dut
        rng = random.Random(seed)
        self.drv = Driver(dut, in_stall, random.Random(rng.random()))
        self.mon = Monitor(dut, out_stall, random.Random(rng.random()))
        self.cycle = 0

    async def start(self):
        cocotb.start_soon(Clock(self.dut.clk, CLOCK_NS, unit="ns").start())
        self.dut.i__valid.value = 0
        self.dut.o__ready.value = 0
        self.dut.rst.value = 1
        for _ in range(2):
            await RisingEdge(self.dut.clk)
        self.dut.rst.value = 0

    async def step(self):
        self.drv.drive()
        self.mon.drive()
        await ReadOnly()
        self.drv.sample(self.cycle)
        self.mon.sample(self.cycle)
        await RisingEdge(self.dut.clk)
        self.cycle += 1

    async def run_until(self, n_out, limit):
        start = self.cycle
        while len(self.mon.words) < n_out:
            if self.cycle - start > limit:
                raise AssertionError(f"timeout: {len(self.mon.words)} of {n_out} outputs "
                                     f"after {limit} cycles")
            await self.step()


async def run_job(h: Harness, job: Job) -> np.ndarray:
    """Run every K step of ``job`` through the core, feeding each D back as the next C."""
    t = job.a.shape[0]
    c = job.c
    for s in range(len(job.steps)):
        payloads = job.step_payloads(s, c)
        groups = t * 16
        before = len(h.mon.words)
        h.drv.load(payloads)
        await h.run_until(before + groups, limit=50 * len(payloads) + 1000)
        d = unpack_outputs(h.mon.words[before:before + groups], job.acc_f16)
        c = blocks_to_tiles(d, t)
    assert not h.mon.x_seen, "X or Z on o.payload"
    return c


def _option(name, default):
    return int(handover().option(name, default))


@cocotb.test()
async def job(dut):
    """The batch in the hand-over's job file, D to its result file."""
    stall = float(handover().option("stall", 0))
    h = Harness(dut, stall, stall, seed=_option("seed", 0))
    await h.start()
    out = {}
    for i, j in enumerate(load_jobs(handover().job)):
        t0, c0 = time.perf_counter(), h.cycle
        out[f"d{i}"] = await run_job(h, j)
        out[f"cycles{i}"], out[f"sim_s{i}"] = h.cycle - c0, time.perf_counter() - t0
    np.savez(handover().result, **out)


def random_tiles(rng, t, k, bf16, acc_f16):
    """Random operands with a spread of exponents, zeros and a few specials."""
    def ops(shape):
        x = rng.standard_normal(shape) * np.exp2(rng.integers(-6, 7, shape))
        x[rng.random(shape) < 0.05] = 0
        if bf16:
            import ml_dtypes
            bits = x.astype(ml_dtypes.bfloat16).view(np.uint16)
        else:
            bits = x.astype(np.float16).view(np.uint16)
        specials = np.array([0x7C00, 0xFC00, 0x7E00, 0x0001, 0x8000] if not bf16 else
                            [0x7F80, 0xFF80, 0x7FC0, 0x0001, 0x8000], np.uint16)
        pick = rng.random(shape) < 0.003
        bits[pick] = rng.choice(specials, int(pick.sum()))
        return bits
    a, b = ops((t, 16, k)), ops((t, k, 16))
    cx = rng.standard_normal((t, 16, 16))
    c = cx.astype(np.float16).view(np.uint16) if acc_f16 else cx.astype(np.float32).view(np.uint32)
    return a, b, c


@cocotb.test()
async def random_stalls(dut):
    """Random tiles in K=16 and K=4 mode, all kernels, random stalls on both sides."""
    seed = _option("seed", 1)
    rng = np.random.default_rng(seed)
    h = Harness(dut, in_stall=0.3, out_stall=0.3, seed=seed)
    await h.start()
    for bf16, acc_f16 in ((False, False), (True, False), (False, True)):
        for fused in (True, False):
            a, b, c = random_tiles(rng, 2, 16 if fused else 4, bf16, acc_f16)
            fmt = dict(in_fmt="bf16" if bf16 else "fp16", out_fmt="fp16" if acc_f16 else "fp32")
            a4, b4, c4, last = block_beats(a, b, c, 0, fused)
            h.drv.load(pack_payloads(a4, b4, c4, last, bf16, acc_f16))
            before = len(h.mon.words)
            await h.run_until(before + 32, limit=4000)
            got = unpack_outputs(h.mon.words[before:], acc_f16)
            # Model: the golden twin on each 4x4 block (K = 16 fused, or one K = 4 step).
            groups = int(last.sum())
            nsl = len(last) // groups
            ga = a4.reshape(groups, nsl, 4, 4).transpose(0, 2, 1, 3).reshape(groups, 4, 4 * nsl)
            gb = b4.reshape(groups, nsl, 4, 4).reshape(groups, 4 * nsl, 4)
            gc = c4[::nsl].reshape(groups, 4, 4).astype(c.dtype)
            want = mma4(ga, gb, gc, fused=fused, **fmt).reshape(groups, 16)
            bad = np.argwhere(got != want)
            assert len(bad) == 0, (f"{fmt} fused={fused}: {len(bad)} mismatches, first at "
                                   f"group/elem {bad[0]}: {got[tuple(bad[0])]:#x} != {want[tuple(bad[0])]:#x}")
    assert not h.mon.x_seen


@cocotb.test()
async def throughput_latency(dut):
    """No stalls: one beat per clock in; D out at the mode's rate after the documented latency."""
    latency = _option("latency", -1)
    rng = np.random.default_rng(2)
    h = Harness(dut)
    await h.start()
    for fused, period, extra in ((False, 1, 0), (True, 4, 3)):
        a, b, c = random_tiles(rng, 2, 16 if fused else 4, False, False)
        a4, b4, c4, last = block_beats(a, b, c, 0, fused)
        first_out = len(h.mon.words)
        sent0 = h.drv.sent
        h.drv.load(pack_payloads(a4, b4, c4, last, False, False))
        await h.run_until(first_out + 32, limit=1000)
        acc = h.drv.accept_cycles[sent0:]
        assert np.all(np.diff(acc) == 1), f"fused={fused}: a beat was refused with no stall"
        outs = h.mon.cycles[first_out:]
        assert np.all(np.diff(outs) == period), f"fused={fused}: D not every {period} clock(s)"
        last_beats = [cy for cy, l in zip(acc, last) if l]
        lat = [o - l for o, l in zip(outs, last_beats)]
        assert set(lat) == {latency + extra}, f"fused={fused}: latency {set(lat)} != {latency + extra}"
        for _ in range(latency + 8):      # drain before the next mode
            await h.step()
    dut._log.info(f"latency {latency} (K=4), {latency + 3} after the last beat (K=16); "
                  f"1 beat = 64 products per clock")


@cocotb.test()
async def reset_midstream(dut):
    """Reset while beats are in flight: no output until new beats, and those are right."""
    rng = np.random.default_rng(3)
    h = Harness(dut)
    await h.start()
    a, b, c = random_tiles(rng, 1, 16, False, False)
    h.drv.load(pack_payloads(*block_beats(a, b, c, 0, True), False, False))
    for _ in range(13):                  # mid-stream: some groups replaying, some buffered
        await h.step()
    dut.rst.value = 1
    await h.step()
    await h.step()
    dut.rst.value = 0
    h.drv.queue.clear()
    h.drv._holding = False
    seen = len(h.mon.words)
    for _ in range(30):
        await h.step()
        assert dut.o__valid.value.is_resolvable and dut.o__valid.value == 0, "output after reset"
    assert len(h.mon.words) == seen
    a, b, c = random_tiles(rng, 1, 16, False, False)
    h.drv.load(pack_payloads(*block_beats(a, b, c, 0, True), False, False))
    await h.run_until(seen + 16, limit=500)
    got = blocks_to_tiles(unpack_outputs(h.mon.words[seen:], False), 1)

    assert np.array_equal(got, mma(a, b, c)), "wrong results after a reset"
    assert not h.mon.x_seen


def _group_beats(a, b, c, *, bf16, acc_f16, flip_later=False):
    """The beats of one group: a (4, 4n), b (4n, 4), c (4, 4) bits -> n payloads.  With
    ``flip_later`` the beats after the first carry the other format flags, which the core
    must ignore (a group takes bf16 and acc_f16 from its first beat)."""
    nb = a.shape[1] // 4
    out = []
    for s in range(nb):
        a4 = a[:, 4 * s:4 * s + 4].reshape(1, 16)
        b4 = b[4 * s:4 * s + 4, :].reshape(1, 16)
        c4 = c.astype(np.uint32).reshape(1, 16)
        fb, fa = (bf16, acc_f16) if s == 0 or not flip_later else (not bf16, not acc_f16)
        out += pack_payloads(a4, b4, c4, np.array([s == nb - 1]), fb, fa)
    return out


@cocotb.test()
async def groups_and_format_changes(dut):
    """Groups of 1, 2, 3 and 4 beats (K = 4, 8, 12, 16) in random order, each in a random
    format (FP16 or BF16 in, FP32 or FP16 out), streamed back to back with random stalls on
    both sides, so that format changes meet beats of other formats in flight.  Each group is
    one block fused dot-add of its 4n products and C: ``golden.mma`` with K = 4n."""
    seed = _option("seed", 4)
    rng = np.random.default_rng(seed)
    h = Harness(dut, in_stall=0.25, out_stall=0.25, seed=seed)
    await h.start()
    kernels = [(False, False), (True, False), (False, True)]
    groups = []
    for g in range(_option("groups", 64)):
        nb = int(rng.integers(1, 5))
        bf16, acc_f16 = kernels[int(rng.integers(3))]
        a, b, c = random_tiles(rng, 1, 4 * nb, bf16, acc_f16)
        a, b, c = a[0, :4], b[0, :, :4], c[0, :4, :4]
        groups.append((a, b, c, bf16, acc_f16))
        h.drv.load(_group_beats(a, b, c, bf16=bf16, acc_f16=acc_f16, flip_later=bool(g % 2)))
    await h.run_until(len(groups), limit=50 * 4 * len(groups) + 1000)
    assert not h.mon.x_seen, "X or Z on o.payload"
    sizes = {}
    for g, ((a, b, c, bf16, acc_f16), word) in enumerate(zip(groups, h.mon.words)):
        fmt = dict(in_fmt="bf16" if bf16 else "fp16", out_fmt="fp16" if acc_f16 else "fp32")
        want = mma(a, b, c, **fmt).reshape(16)
        got = unpack_outputs([word], acc_f16)[0]
        bad = np.flatnonzero(got != want)
        assert bad.size == 0, (f"group {g} (K={a.shape[1]}, {fmt}): {bad.size} of 16 differ, "
                               f"first D[{bad[0] // 4}][{bad[0] % 4}] {got[bad[0]]:#x} != {want[bad[0]]:#x}")
        sizes[a.shape[1]] = sizes.get(a.shape[1], 0) + 1
    assert sorted(sizes) == [4, 8, 12, 16], sizes
    dut._log.info(f"groups by K: {sizes}")
