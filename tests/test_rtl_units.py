"""Unit tests of the datapath pieces on Amaranth's simulator, each against the golden model.

Combinational components: set inputs, read outputs, no clock.  Sample counts are small
because Amaranth's simulator is slow; the cocotb benches cover volume.
"""

import numpy as np
import pytest
from amaranth.sim import Simulator

from tcore.golden import formats as GF
from tcore.golden.dot import round_output
from amaranth import Module, Signal, signed

from tcore.rtl.datapath import (ADDEND_SHIFT, EXP_BIAS, GRID, PRODUCT_SHIFT, Multiplier, RoundPack,
                          add_cin, addend_shift, dsp_operands, leading_zeros, product_term)
from tcore.rtl.formats import Unpack, UnpackAddend


def comb_run(dut, fn):
    """Run ``fn(ctx)`` as a testbench on a combinational design."""
    sim = Simulator(dut)
    sim.add_testbench(fn)
    sim.run()


def interesting16(rng, n):
    """Random 16-bit patterns plus every class boundary."""
    edge = [0x0000, 0x8000, 0x0001, 0x03FF, 0x0400, 0x3C00, 0x7BFF, 0x7C00, 0xFC00, 0x7C01, 0x7E00,
            0x007F, 0x0080, 0x7F7F, 0x7F80, 0x7F81, 0xFFFF]
    return np.concatenate([np.array(edge, np.uint16), rng.integers(0, 1 << 16, n, dtype=np.uint16)])


def _unpack_patterns(fmt, rng):
    if fmt in ("fp16", "bf16"):
        return interesting16(rng, 600)
    if fmt == "tf32":        # FP32 patterns: the 13 low bits must not matter
        edge = np.array([0, 0x80000000, 0x00002000, 0x00001FFF, 0x007FE000, 0x00800000,
                         0x7F800000, 0x7F801FFF, 0x7F802000, 0xFF800000, 0x7FFFFFFF, 0x3F800000,
                         0x7F7FFFFF], np.uint32)
        return np.concatenate([edge, rng.integers(0, 1 << 32, 600, dtype=np.uint64).astype(np.uint32)])
    return np.arange(256, dtype=np.uint8)      # every byte


@pytest.mark.parametrize("fmt", ["fp16", "bf16", "tf32", "e4m3", "e5m2", "s8", "u8"])
def test_unpack(fmt):
    """Every input format onto the one Operand: value = (-1)**sign * sig * 2**(bexp - 137)
    equal to the golden model's exact value, and the zero / Inf / NaN flags its classes."""
    from tcore.rtl.formats import InputKind
    dut = Unpack()
    pats = _unpack_patterns(fmt, np.random.default_rng(1))
    kind = {"fp16": InputKind.FP16, "bf16": InputKind.BF16, "tf32": InputKind.TF32, "e4m3": InputKind.FP8,
            "e5m2": InputKind.FP8, "s8": InputKind.INT8, "u8": InputKind.INT8}[fmt]
    if fmt in ("s8", "u8"):
        value = (pats.view(np.int8) if fmt == "s8" else pats).astype(np.float64)
        cls = np.where(value == 0, GF.ZERO, GF.NORMAL)
    else:
        value = GF.to_float(pats, fmt)
        cls = GF.classify(pats, fmt)

    async def tb(ctx):
        ctx.set(dut.kind, kind)
        ctx.set(dut.alt, fmt in ("e5m2", "u8"))
        for i, p in enumerate(pats):
            ctx.set(dut.bits, int(p))
            o = ctx.get(dut.o)
            assert (o.zero, o.inf, o.nan) == (cls[i] == GF.ZERO, cls[i] == GF.INF,
                                              cls[i] == GF.NAN), hex(p)
            if cls[i] in (GF.INF, GF.NAN):
                assert np.signbit(value[i]) == o.sign or cls[i] == GF.NAN, hex(p)
                continue
            got = (-1.0) ** o.sign * o.sig * 2.0 ** (o.bexp - 137)
            assert got == value[i] and (o.sig != 0 or o.zero), (hex(p), got, value[i])
            assert o.sig < 2048

    comb_run(dut, tb)


@pytest.mark.parametrize("f16", [False, True])
def test_unpack_addend(f16):
    dut = UnpackAddend()
    rng = np.random.default_rng(2)
    if f16:
        pats = interesting16(rng, 400).astype(np.uint32)
        fmt, shift = "fp16", 13
    else:
        pats = np.concatenate([np.array([0, 0x80000000, 1, 0x7FFFFF, 0x800000, 0x7F800000,
                                         0x7FC00000, 0x7F7FFFFF], np.uint32),
                               rng.integers(0, 1 << 32, 400, dtype=np.uint64).astype(np.uint32)])
        fmt, shift = "fp32", 0
    sign, sig, nexp = GF.decode(pats, fmt)
    cls = GF.classify(pats, fmt)

    async def tb(ctx):
        ctx.set(dut.f16, f16)
        for i, p in enumerate(pats):
            ctx.set(dut.bits, int(p))
            o = ctx.get(dut.o)
            assert (o.inf, o.nan, o.zero) == (cls[i] == GF.INF, cls[i] == GF.NAN, cls[i] == GF.ZERO)
            if cls[i] not in (GF.INF, GF.NAN):
                assert (o.sign, o.sig, o.exp) == (sign[i], sig[i] << shift, nexp[i]), hex(p)

    comb_run(dut, tb)


def test_multiplier_is_exact_with_three_registers():
    """The generic DSP model: p = a * b of three clocks before, every clock."""
    dut = Multiplier()
    rng = np.random.default_rng(3)
    pairs = [(int(rng.integers(0, 1 << 14)), int(rng.integers(0, 1 << 15))) for _ in range(200)]

    async def tb(ctx):
        for n, (a, b) in enumerate(pairs + [(0, 0)] * 3):
            ctx.set(dut.a, a)
            ctx.set(dut.b, b)
            await ctx.tick()
            if 2 <= n < len(pairs) + 2:     # after the tick of cycle n, p shows cycle n - 2
                pa, pb = pairs[n - 2]
                assert ctx.get(dut.p) == pa * pb, (n, pa, pb)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()


def test_product_term_is_the_truncated_aligned_product():
    """DSP operands (the fine shift) then the 4:1 mux: (P << 5) >> d, in ones' complement
    when negative, for every d of 0..31 (27 and up leave nothing)."""
    m = Module()
    sa, sb, d, neg = Signal(11), Signal(11), Signal(5), Signal()
    a, b, q = dsp_operands(sa, sb, d)
    t = Signal(signed(28))
    m.d.comb += t.eq(product_term(a * b, q, neg))
    rng = np.random.default_rng(4)

    async def tb(ctx):
        for n in range(1500):
            x, y = int(rng.integers(0, 2048)), int(rng.integers(0, 2048))
            dd, ng = n % 32, int(rng.integers(2))
            ctx.set(sa, x)
            ctx.set(sb, y)
            ctx.set(d, dd)
            ctx.set(neg, ng)
            want = ((x * y) << PRODUCT_SHIFT) >> dd
            assert ctx.get(t) == (~want if ng else want), (x, y, dd, ng)

    comb_run(m, tb)


def test_addend_shift_and_carry_in_adder():
    """The addend's two-level right shift (sig << 2) >> d, and a + b + cin as one chain."""
    m = Module()
    sig, d = Signal(24), Signal(5)
    s1 = addend_shift(m, sig.shift_left(ADDEND_SHIFT), d, 0)
    s2 = addend_shift(m, s1, d, 1)
    a, b, cin = Signal(signed(29)), Signal(signed(31)), Signal()
    total = Signal(signed(34))
    m.d.comb += total.eq(add_cin(a, b, cin, 34))
    rng = np.random.default_rng(5)

    async def tb(ctx):
        for n in range(600):
            v, dd = int(rng.integers(0, 1 << 24)), n % 32
            ctx.set(sig, v)
            ctx.set(d, dd)
            assert ctx.get(s2) == (v << ADDEND_SHIFT) >> dd, (v, dd)
            x, y, c = int(rng.integers(-(1 << 28), 1 << 28)), int(rng.integers(-(1 << 30), 1 << 30)), n % 2
            ctx.set(a, x)
            ctx.set(b, y)
            ctx.set(cin, c)
            assert ctx.get(total) == x + y + c

    comb_run(m, tb)


def test_leading_zeros_tree():
    m = Module()
    x = Signal(33)
    lz = leading_zeros(m, x)
    rng = np.random.default_rng(6)

    async def tb(ctx):
        for v in [0, 1, (1 << 33) - 1, 1 << 32] + [int(rng.integers(1, 1 << 33)) >> int(rng.integers(0, 33))
                                                  for _ in range(300)]:
            ctx.set(x, v)
            assert ctx.get(lz) == 33 - v.bit_length(), hex(v)

    comb_run(m, tb)


def _tie(mag: int, e: int, out_fmt: str):
    """``mag`` moved to the nearest value of the form (n + 1/2) ulp of ``out_fmt`` in its binade
    (an exact tie between two neighbours; at the top of FP16, the tie between 65504 and
    65536), or None where that value is not a multiple of 2**(e - GRID)."""
    if mag == 0:
        return None
    v = mag * 2.0 ** (e - GRID)
    top, p, emin = (127, 23, -126) if out_fmt == "fp32" else (15, 10, -14)
    ev = int(np.floor(np.log2(v)))
    if ev > top:
        return None
    ulp = 2.0 ** (max(ev, emin) - p)
    t = (np.floor(v / ulp) + 0.5) * ulp
    m = t / 2.0 ** (e - GRID)
    if m != int(m) or not 0 < m < 1 << 33:
        return None
    return int(m)


@pytest.mark.parametrize("out_fmt", ["fp32", "fp16"])
def test_round_pack_like_golden(out_fmt):
    """value = acc * 2**(e - 254 - 25) through the one rounder == golden round_output: RZ to
    FP32 (subnormals, the pre-cut below 2**-133, overflow), RNE to FP16 (ties, subnormals,
    overflow by a rounding carry), zero as +0, and the specials; on random values and on
    constructed exact ties (at least 300, every one a tie).  F enters through the decode the
    core registers ahead of the rounder (``RoundPack.clamp_decode``)."""
    dut, f = RoundPack(pipelined=False), Signal(signed(10))
    top = Module()
    top.submodules.rp = dut
    top.d.comb += dut.clamp.eq(RoundPack.clamp_decode(f, dut.int8))
    rng = np.random.default_rng(7)
    f16 = out_fmt == "fp16"
    if f16:
        es = list(rng.integers(233, 300, 500)) + [233, 234, 243, 244, 254, 269, 270, 271, 272]
    else:
        es = list(rng.integers(0, 511, 500)) + [0, 1, 97, 98, 99, 100, 120, 121, 122, 127, 128,
                                                 129, 381, 382, 383, 510]
    cases = []                   # (acc, biased e, special, tie)
    for n, e in enumerate(es):
        acc = int(rng.integers(0, 1 << 33)) >> int(rng.integers(0, 34))
        if rng.random() < 0.1:
            acc = ((1 << int(rng.integers(11, 33))) - 1)     # long carries
        acc = -acc if n % 2 else acc
        cases.append((acc, int(e), 0 if n % 7 else 1 + (n // 7) % 3, False))
    # Every nominal e where results are finite and nonzero, twice (FP32) or 8 times (FP16):
    # an exact tie where the binade allows, either sign.
    tie_es = list(range(-150, 128)) * 2 if not f16 else list(range(-21, 18)) * 8
    for e in tie_es:
        for _ in range(24):
            t = _tie(int(rng.integers(1, 1 << 33)) >> int(rng.integers(0, 22)), int(e), out_fmt)
            if t is not None:
                cases.append((t if rng.integers(2) else -t, int(e) + EXP_BIAS, 0, True))
                break
    if f16:                      # the overflow tie: 65520 = 0xFFF * 2**4, halfway to 65536 (Inf)
        cases.append((0xFFF << 12, 17 + EXP_BIAS, 0, True))
    ties = sum(tie for *_, tie in cases)
    assert ties >= 300, f"only {ties} ties constructed"

    async def tb(ctx):
        ctx.set(dut.f16, f16)
        for acc, e, special, tie in cases:
            ctx.set(dut.acc, acc)
            ctx.set(f, e - (EXP_BIAS - 21 if f16 else EXP_BIAS - 133))
            ctx.set(dut.special, special)
            if special:
                want = {1: 0x7FFF if f16 else 0x7FFFFFFF, 2: 0x7C00 if f16 else 0x7F800000,
                        3: 0xFC00 if f16 else 0xFF800000}[special]
            else:
                want = int(round_output(np.array([np.ldexp(float(acc), e - EXP_BIAS - GRID)]),
                                        out_fmt)[0])
            got = ctx.get(dut.bits)
            assert got == want, f"acc={acc:#x} e={e} special={special} tie={tie}: {got:#x} != {want:#x}"

    comb_run(top, tb)


def test_round_pack_clamp_matches_its_formula():
    """clamp_of is the F the rounder test above feeds by hand."""
    m = Module()
    e, f16 = Signal(9), Signal()
    f = Signal(signed(10))
    m.d.comb += f.eq(RoundPack.clamp_of(e, f16))

    async def tb(ctx):
        for v in (0, 121, 233, 300, 510):
            for h in (0, 1):
                ctx.set(e, v)
                ctx.set(f16, h)
                assert ctx.get(f) == v - (233 if h else 121)

    comb_run(m, tb)


def test_bad_parameters():
    from tcore.rtl.mma4 import MMA4
    with pytest.raises(ValueError, match="dsp must be"):
        MMA4(dsp="xilinx")
    with pytest.raises(ValueError, match="Multiplier arch must be"):
        Multiplier(arch="xilinx")


def test_beat_player_depth_must_be_a_power_of_two():
    from tcore.rtl.player import BeatPlayer
    for bad in (0, 100, 8):
        with pytest.raises(ValueError, match="power of two"):
            BeatPlayer(depth=bad)
    assert BeatPlayer(depth=64).depth == 64


def test_tile_dispenser_hands_out_row_major_lowest_claim_first():
    """The dispenser the GEMM top and the SoC share: a 2x3 grid, three warps claiming in
    various patterns; each clock the lowest-numbered claim is taken and gets the next tile in
    row-major order, then ``none`` once all six are out; ``start`` begins again."""
    from tcore.rtl.dispenser import TileDispenser
    dut = TileDispenser(ports=3, tile_bits=4)
    # (claims as a bit mask) -> (port taken or None, ti, tj, row_end, none, advance)
    script = [
        (0b000, (None, 0, 0, 0, 0, 0)),
        (0b110, (1, 0, 0, 0, 0, 1)),
        (0b111, (0, 0, 1, 0, 0, 1)),
        (0b100, (2, 0, 2, 1, 0, 1)),
        (0b010, (1, 1, 0, 0, 0, 1)),
        (0b000, (None, 1, 1, 0, 0, 0)),
        (0b101, (0, 1, 1, 0, 0, 1)),
        (0b011, (0, 1, 2, 1, 0, 1)),
        (0b110, (1, 2, 0, 0, 1, 0)),        # all out: a claim is taken with none
        (0b001, (0, 2, 0, 0, 1, 0)),
    ]

    async def tb(ctx):
        ctx.set(dut.tiles_m, 2)
        ctx.set(dut.tiles_n, 3)
        for again in range(2):
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            for mask, want in script:
                for i in range(3):
                    ctx.set(dut.claims[i].valid, (mask >> i) & 1)
                ready = [ctx.get(dut.claims[i].ready) for i in range(3)]
                assert sum(ready) == (1 if mask else 0) and all(r <= (mask >> i) & 1
                                                                for i, r in enumerate(ready))
                port = ready.index(1) if any(ready) else None
                t = dut.tile
                got = (port, ctx.get(t.ti), ctx.get(t.tj), ctx.get(t.row_end), ctx.get(t.none),
                       ctx.get(dut.advance))
                assert got == want, (again, mask, got, want)
                await ctx.tick()
        # An empty grid: nothing to hand out.
        ctx.set(dut.tiles_m, 0)
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        ctx.set(dut.claims[2].valid, 1)
        assert ctx.get(dut.tile.none) == 1 and ctx.get(dut.advance) == 0

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
