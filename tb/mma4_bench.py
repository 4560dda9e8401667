"""cocotb bench for the MMA4 core (``rtl/mma4.py``), scoreboarded against ``tcore.golden.mma.mma4``.

Driver and monitor (:mod:`tcore.tb.common`), model and checker are separate small pieces.  Tests:

* ``job``: runs the batch in the hand-over's ``job`` file (:class:`tcore.host.beats.Job`) and writes
  D to its ``result`` file; used by ``tcore verify`` and the silicon tests, which compare it.
* ``random_stalls``: random tiles in every kernel (FP16, BF16, TF32, FP8, INT8) and both
  group modes with random valid/ready stalls on both sides.
* ``throughput_latency``: with no stalls, a beat is accepted every clock (every two for the
  8-bit kinds: 64 products per clock; the build's ``beat_clocks()`` times as many with fewer lanes)
  and D leaves at the mode's rate, exactly ``latency`` plus one clock per further slice of
  the group after its last beat (8-bit kinds: plus the slices of the last beat's second pass,
  the beat being accepted at its first).
* ``reset_midstream``: a reset in the middle of a stream leaves no stale or X output.
* ``groups_and_format_changes``: groups of 1 to 4 beats in random kernels, back to back.

The hand-over (:mod:`tcore.host.handover`) gives the design's documented latency (option
``latency``) and multipliers (``lanes``), the job test's stall probability (``stall``) and the
random tests' ``seed``.
"""

from __future__ import annotations

import random
import time

import cocotb
import numpy as np
from cocotb.triggers import ReadOnly, RisingEdge

from tcore.golden import mma, mma4
from tcore.host.beats import Job, Mode, block_beats, blocks_to_tiles, load_jobs, pack_payloads, unpack_outputs
from tcore.host.handover import handover
from tcore.numerics import Op
from tcore.numerics.formats import dtype_of, values_dtype
from tcore.tb.common import StreamDriver, StreamMonitor, start

class Harness:
    """Clock, reset and the per-cycle loop that steps driver and monitor together."""

    def __init__(self, dut, in_stall=0.0, out_stall=0.0, seed=0):
        self.dut = dut
        rng = random.Random(seed)
        self.drv = StreamDriver(dut, "i", in_stall, random.Random(rng.random()))
        self.mon = StreamMonitor(dut, "o", out_stall, random.Random(rng.random()))
        self.cycle = 0

    async def start(self):
        await start(self.dut, zero=("i__valid", "o__ready"))

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


#: The kernels the core computes: (A format, B format, accumulator, saturate).
KERNELS = [("fp16", "fp16", "fp32", False), ("bf16", "bf16", "fp32", False),
           ("fp16", "fp16", "fp16", False), ("tf32", "tf32", "fp32", False),
           ("e4m3", "e4m3", "fp32", False), ("e5m2", "e5m2", "fp32", False),
           ("e4m3", "e5m2", "fp32", False), ("e5m2", "e4m3", "fp32", False),
           ("e4m3", "e4m3", "fp16", False), ("e5m2", "e5m2", "fp16", False),
           ("s8", "s8", "s32", False), ("s8", "s8", "s32", True), ("u8", "s8", "s32", False),
           ("u8", "s8", "s32", True)]
#: Clocks one beat takes, by the rates the core is specified for (64 multipliers).
BEAT_CLOCKS = {"fp16": 1, "bf16": 1, "tf32": 1, "e4m3": 2, "e5m2": 2, "s8": 2, "u8": 2}


def _ops(rng, shape, fmt):
    """Random A or B bits in ``fmt``: a spread of exponents, zeros and a few specials."""
    import ml_dtypes
    if fmt in ("s8", "u8"):
        bits = rng.integers(0, 256, shape, dtype=np.uint8)
        bits[rng.random(shape) < 0.1] = rng.choice(np.array([0, 0x7F, 0x80, 0xFF], np.uint8))
        return bits
    x = rng.standard_normal(shape) * np.exp2(rng.integers(-6, 7, shape))
    x[rng.random(shape) < 0.05] = 0
    if fmt in ("e4m3", "e5m2"):
        with np.errstate(over="ignore", invalid="ignore"):
            bits = x.astype(values_dtype(fmt)).view(np.uint8)
        wild = rng.random(shape) < 0.05            # any byte: NaN, Inf, subnormals
        bits[wild] = rng.integers(0, 256, int(wild.sum()), dtype=np.uint8)
        return bits
    if fmt == "tf32":                               # FP32 patterns, low 13 bits random
        bits = x.astype(np.float32).view(np.uint32) ^ rng.integers(0, 1 << 13, shape, dtype=np.uint32)
        specials = np.array([0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001, 0x00000001,
                             0x80000000, 0x007FFFFF], np.uint32)
    elif fmt == "bf16":
        bits = x.astype(ml_dtypes.bfloat16).view(np.uint16)
        specials = np.array([0x7F80, 0xFF80, 0x7FC0, 0x0001, 0x8000], np.uint16)
    else:
        bits = x.astype(np.float16).view(np.uint16)
        specials = np.array([0x7C00, 0xFC00, 0x7E00, 0x0001, 0x8000], np.uint16)
    pick = rng.random(shape) < 0.003
    bits[pick] = rng.choice(specials, int(pick.sum()))
    return bits


def random_tiles(rng, t, k, in_fmt="fp16", out_fmt="fp32", b_fmt=None):
    """Random a (t, 16, k), b (t, k, 16) and c (t, 16, 16) bits of a kernel."""
    a, b = _ops(rng, (t, 16, k), in_fmt), _ops(rng, (t, k, 16), b_fmt or in_fmt)
    if out_fmt == "s32":
        c = rng.integers(-(1 << 31), 1 << 31, (t, 16, 16), dtype=np.int64).astype(np.uint32)
        edge = rng.random(c.shape) < 0.2           # near the limits: wrap vs saturation
        c[edge] = np.array([0x7FFFFFF0, 0x80000010, 0x7FFFFFFF, 0x80000000], np.uint32)[
            rng.integers(0, 4, int(edge.sum()))]
        return a, b, c
    cx = rng.standard_normal((t, 16, 16))
    c = cx.astype(values_dtype(out_fmt)).view(dtype_of(out_fmt))
    return a, b, c


def _golden_groups(a4, b4, c4, last, c_dtype, mode: Mode, fused):
    """The golden twin on each group of the beat rows."""
    groups = int(last.sum())
    nsl, kd = len(last) // groups, mode.kd
    ga = a4.reshape(groups, nsl, 4, kd).transpose(0, 2, 1, 3).reshape(groups, 4, kd * nsl)
    gb = b4.reshape(groups, nsl, kd, 4).reshape(groups, kd * nsl, 4)
    gc = c4[::nsl].reshape(groups, 4, 4).astype(c_dtype)
    return mma4(ga, gb, gc, in_fmt=mode.in_fmt, b_fmt=mode.b_fmt, out_fmt=mode.out_fmt,
                saturate=mode.saturate, fused=fused).reshape(groups, 16)


@cocotb.test()
async def random_stalls(dut):
    """Random tiles of every kernel in fused and single-beat mode, random stalls on both sides."""
    seed = _option("seed", 1)
    tiles = _option("tiles", 2)
    rng = np.random.default_rng(seed)
    h = Harness(dut, in_stall=0.3, out_stall=0.3, seed=seed)
    await h.start()
    # Option "kernels": every n-th kernel only (a slow simulator's share; 1 = all).
    for in_fmt, b_fmt, out_fmt, sat in KERNELS[::_option("kernels", 1)]:
        mode = Mode(in_fmt, out_fmt, b_fmt, sat)
        for fused in (True, False):
            a, b, c = random_tiles(rng, tiles, mode.kd * (4 if fused else 1), in_fmt, out_fmt, b_fmt)
            a4, b4, c4, last = block_beats(a, b, c, 0, fused, mode.kd)
            h.drv.load(pack_payloads(a4, b4, c4, last, mode))
            before = len(h.mon.words)
            await h.run_until(before + 16 * tiles, limit=8000)
            got = unpack_outputs(h.mon.words[before:], mode.acc_f16)
            want = _golden_groups(a4, b4, c4, last, c.dtype, mode, fused)
            bad = np.argwhere(got != want)
            assert len(bad) == 0, (f"{in_fmt} x {b_fmt} -> {out_fmt} sat={sat} fused={fused}: "
                                   f"{len(bad)} mismatches, first at group/elem {bad[0]}: "
                                   f"{got[tuple(bad[0])]:#x} != {want[tuple(bad[0])]:#x}")
    assert not h.mon.x_seen


@cocotb.test()
async def throughput_latency(dut):
    """No stalls: a beat in every clock (8-bit kinds: every two); D out at the mode's rate,
    ``latency`` plus one clock per further pass after the group's last beat."""
    latency = _option("latency", -1)
    slices = handover().build.beat_clocks()     # clocks a pass takes (the build's lanes)
    rng = np.random.default_rng(2)
    h = Harness(dut)
    await h.start()
    for in_fmt, out_fmt in (("fp16", "fp32"), ("tf32", "fp32"), ("e4m3", "fp32"), ("s8", "s32")):
        mode, per_beat = Mode(in_fmt, out_fmt), BEAT_CLOCKS[in_fmt] * slices
        for fused, beats in ((False, 1), (True, 4)):
            a, b, c = random_tiles(rng, 2, mode.kd * beats, in_fmt, out_fmt)
            a4, b4, c4, last = block_beats(a, b, c, 0, fused, mode.kd)
            first_out = len(h.mon.words)
            sent0 = h.drv.sent
            h.drv.load(pack_payloads(a4, b4, c4, last, mode))
            await h.run_until(first_out + 32, limit=2000)
            acc = h.drv.accept_cycles[sent0:]
            what = f"{in_fmt} fused={fused}"
            assert np.all(np.diff(acc) == per_beat), f"{what}: a beat not every {per_beat} clock(s)"
            outs = h.mon.cycles[first_out:]
            period = per_beat * beats
            assert np.all(np.diff(outs) == period), f"{what}: D not every {period} clock(s)"
            last_beats = [cy for cy, l in zip(acc, last) if l]
            lat = [o - l for o, l in zip(outs, last_beats)]
            # An 8-bit beat is accepted at its first pass: its second pass's slices follow.
            want = latency + per_beat * beats - 1 + per_beat - slices
            assert set(lat) == {want}, f"{what}: latency {set(lat)} != {want}"
            want_d = _golden_groups(a4, b4, c4, last, c.dtype, mode, fused)
            assert np.array_equal(unpack_outputs(h.mon.words[first_out:], mode.acc_f16), want_d), what
            for _ in range(latency + 8):      # drain before the next mode
                await h.step()
            dut._log.info(f"{what}: latency {want} after the last beat; "
                          f"{4 * mode.kd * 16 // per_beat} products per clock")


@cocotb.test()
async def reset_midstream(dut):
    """Reset while beats are in flight: no output until new beats, and those are right."""
    rng = np.random.default_rng(3)
    h = Harness(dut)
    await h.start()
    mode = Mode()
    a, b, c = random_tiles(rng, 1, 16)
    h.drv.load(pack_payloads(*block_beats(a, b, c, 0, True), mode))
    for _ in range(13):                  # mid-stream: some groups streaming, some buffered
        await h.step()
    dut.rst.value = 1
    await h.step()
    await h.step()
    dut.rst.value = 0
    h.drv.idle()
    seen = len(h.mon.words)
    for _ in range(30):
        await h.step()
        assert dut.o__valid.value.is_resolvable and dut.o__valid.value == 0, "output after reset"
    assert len(h.mon.words) == seen
    a, b, c = random_tiles(rng, 1, 16)
    h.drv.load(pack_payloads(*block_beats(a, b, c, 0, True), mode))
    await h.run_until(seen + 16, limit=500)
    got = blocks_to_tiles(unpack_outputs(h.mon.words[seen:], False), 1)

    assert np.array_equal(got, mma(a, b, c)), "wrong results after a reset"
    assert not h.mon.x_seen


def _group_beats(a, b, c, mode: Mode, later: Mode | None = None):
    """The beats of one group: a (4, kd n), b (kd n, 4), c (4, 4) bits -> n payloads.  With
    ``later`` the beats after the first carry that other mode, which the core must ignore (a
    group takes its mode from its first beat)."""
    kd = mode.kd
    nb = a.shape[1] // kd
    out = []
    for s in range(nb):
        a4 = a[:, kd * s:kd * s + kd].reshape(1, 4 * kd)
        b4 = b[kd * s:kd * s + kd, :].reshape(1, 4 * kd)
        c4 = c.astype(np.uint32).reshape(1, 16)
        payload = pack_payloads(a4, b4, c4, np.array([s == nb - 1]), mode)[0]
        if s and later is not None:        # the same bits under the other mode's flags
            payload ^= (mode.flags() ^ later.flags()) << 1024
        out.append(payload)
    return out


@cocotb.test()
async def groups_and_format_changes(dut):
    """Groups of 1, 2, 3 and 4 beats in random order, each of a random kernel, streamed back
    to back with random stalls on both sides, so that kind changes meet beats of other kinds
    in flight.  Each group is one block of its n beats' products and C: ``tcore.golden.mma``."""
    seed = _option("seed", 4)
    rng = np.random.default_rng(seed)
    h = Harness(dut, in_stall=0.25, out_stall=0.25, seed=seed)
    await h.start()
    groups = []
    for g in range(_option("groups", 64)):
        nb = int(rng.integers(1, 5))
        in_fmt, b_fmt, out_fmt, sat = KERNELS[int(rng.integers(len(KERNELS)))]
        mode = Mode(in_fmt, out_fmt, b_fmt, sat)
        other = Mode(*(lambda k: (k[0], k[2], k[1], k[3]))(KERNELS[int(rng.integers(len(KERNELS)))]))
        a, b, c = random_tiles(rng, 1, mode.kd * nb, in_fmt, out_fmt, b_fmt)
        a, b, c = a[0, :4], b[0, :, :4], c[0, :4, :4]
        groups.append((a, b, c, mode))
        h.drv.load(_group_beats(a, b, c, mode, other if g % 2 else None))
    await h.run_until(len(groups), limit=50 * 8 * len(groups) + 1000)
    assert not h.mon.x_seen, "X or Z on o.payload"
    sizes = {}
    for g, ((a, b, c, mode), word) in enumerate(zip(groups, h.mon.words)):
        fmt = Op(mode.in_fmt, mode.b_fmt, mode.out_fmt, mode.saturate)    # its default instruction
        want = mma(a, b, c, op=fmt).reshape(16)
        got = unpack_outputs([word], mode.acc_f16)[0]
        bad = np.flatnonzero(got != want)
        assert bad.size == 0, (f"group {g} (K={a.shape[1]}, {fmt}): {bad.size} of 16 differ, "
                               f"first D[{bad[0] // 4}][{bad[0] % 4}] {got[bad[0]]:#x} != {want[bad[0]]:#x}")
        nbeats = a.shape[1] // mode.kd
        sizes[nbeats] = sizes.get(nbeats, 0) + 1
    assert sorted(sizes) == [1, 2, 3, 4], sizes
    dut._log.info(f"groups by beats: {sizes}")
