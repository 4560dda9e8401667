"""Unit tests of the datapath pieces on Amaranth's simulator, each against the golden model.

Combinational components: set inputs, read outputs, no clock.  Sample counts are small
because Amaranth's simulator is slow; the cocotb benches cover volume.
"""

import numpy as np
import pytest
from amaranth.sim import Simulator

from golden import formats as GF
from golden.dot import round_output
from rtl.datapath import ACC_WIDTH, E_NONE, Aligner, ExpMax, Multiplier, Normaliser, PackFP16, PackFP32
from rtl.formats import Unpack, UnpackAddend


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


@pytest.mark.parametrize("fmt", ["fp16", "bf16"])
def test_unpack(fmt):
    dut = Unpack()
    pats = interesting16(np.random.default_rng(1), 600)
    sign, sig, nexp = GF.decode(pats, fmt)
    cls = GF.classify(pats, fmt)
    shift = 3 if fmt == "bf16" else 0       # BF16 significands are aligned to 10 fraction bits

    async def tb(ctx):
        ctx.set(dut.bf16, fmt == "bf16")
        for i, p in enumerate(pats):
            ctx.set(dut.bits, int(p))
            o = ctx.get(dut.o)
            if cls[i] in (GF.INF, GF.NAN):
                assert (o.inf, o.nan) == (cls[i] == GF.INF, cls[i] == GF.NAN), hex(p)
                continue
            assert (o.sign, o.sig, o.exp) == (sign[i], sig[i] << shift, nexp[i]), hex(p)
            assert o.zero == (cls[i] == GF.ZERO) and not o.inf and not o.nan

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


def test_multiplier_is_exact_and_unnormalised():
    dut = Multiplier()
    rng = np.random.default_rng(3)

    async def tb(ctx):
        for _ in range(500):
            a = dict(sig=int(rng.integers(0, 2048)), exp=int(rng.integers(-126, 128)),
                     sign=int(rng.integers(2)), zero=0, inf=0, nan=0)
            b = dict(sig=int(rng.integers(0, 2048)), exp=int(rng.integers(-126, 128)),
                     sign=int(rng.integers(2)), zero=0, inf=0, nan=0)
            ctx.set(dut.a, a)
            ctx.set(dut.b, b)
            o = ctx.get(dut.o)
            assert o.sig == a["sig"] * b["sig"] and o.exp == a["exp"] + b["exp"]
            assert o.sign == a["sign"] ^ b["sign"] and not o.nan and not o.inf
        # Inf x 0 is NaN; Inf x finite is Inf.
        z = dict(sig=0, exp=-14, sign=0, zero=1, inf=0, nan=0)
        inf = dict(sig=1024, exp=16, sign=1, zero=0, inf=1, nan=0)
        one = dict(sig=1024, exp=0, sign=0, zero=0, inf=0, nan=0)
        ctx.set(dut.a, inf)
        ctx.set(dut.b, z)
        assert ctx.get(dut.o.nan) and not ctx.get(dut.o.inf)
        ctx.set(dut.b, one)
        assert ctx.get(dut.o.inf) and not ctx.get(dut.o.nan) and ctx.get(dut.o.sign)

    comb_run(dut, tb)


def test_expmax_ignores_disabled_inputs():
    dut = ExpMax(5)
    rng = np.random.default_rng(4)

    async def tb(ctx):
        for _ in range(300):
            e = rng.integers(-300, 300, 5)
            en = rng.integers(0, 2, 5)
            for k in range(5):
                ctx.set(dut.exp[k], int(e[k]))
                ctx.set(dut.en[k], int(en[k]))
            want = int(e[en == 1].max()) if en.any() else E_NONE
            assert ctx.get(dut.o) == want

    comb_run(dut, tb)


def test_aligner_truncates_magnitude_toward_zero():
    dut = Aligner(27)
    rng = np.random.default_rng(5)

    async def tb(ctx):
        for _ in range(300):
            mag, sh, neg = int(rng.integers(0, 1 << 27)), int(rng.integers(0, 28)), int(rng.integers(2))
            ctx.set(dut.mag, mag)
            ctx.set(dut.shift, sh)
            ctx.set(dut.neg, neg)
            want = mag >> sh
            assert ctx.get(dut.o) == (-want if neg else want)

    comb_run(dut, tb)


def test_normaliser_finds_the_leading_one():
    dut = Normaliser()
    rng = np.random.default_rng(6)

    async def tb(ctx):
        vals = [0, 1, -1, (1 << 33) - 1, -(1 << 33) + 1] + [
            int(rng.integers(-(1 << 33) + 1, 1 << 33)) >> int(rng.integers(0, 33)) for _ in range(300)]
        for v in vals:
            ctx.set(dut.acc, v)
            assert ctx.get(dut.neg) == (v < 0) and ctx.get(dut.mag) == abs(v)
            assert ctx.get(dut.msb) == max(abs(v).bit_length() - 1, 0)

    comb_run(dut, tb)


def _tie(mag: int, e: int, out_fmt: str):
    """``mag`` moved to the nearest value of the form (n + 1/2) ulp of ``out_fmt`` in its binade
    (an exact tie between two neighbours; at the top of FP16, the tie between 65504 and
    65536), or None where that value is not a multiple of the packer's 2**(e - 25)."""
    if mag == 0:
        return None
    v = mag * 2.0 ** (e - 25)
    top, p, emin = (127, 23, -126) if out_fmt == "fp32" else (15, 10, -14)
    ev = int(np.floor(np.log2(v)))
    if ev > top:
        return None
    ulp = 2.0 ** (max(ev, emin) - p)
    t = (np.floor(v / ulp) + 0.5) * ulp
    m = t / 2.0 ** (e - 25)
    if m != int(m) or not 0 < m < 1 << 33:
        return None
    return int(m)


@pytest.mark.parametrize("out_fmt", ["fp32", "fp16"])
def test_packers_round_like_golden(out_fmt):
    """value = (-1)**neg * mag * 2**(e - 25) rounded by the packer == golden round_output, on
    random values and on constructed exact ties (at least 300, every one a tie)."""
    dut = PackFP32() if out_fmt == "fp32" else PackFP16()
    rng = np.random.default_rng(7)
    if out_fmt == "fp32":
        es = list(rng.integers(-180, 260, 400)) + [-124, -125, -126, -149, -150, 127, 128, 102, 103]
    else:
        es = list(rng.integers(-21, 40, 400)) + [-21, -20, -10, -5, 0, 4, 5, 6, 15, 16]
    cases = [(int(rng.integers(0, 1 << 33)) >> int(rng.integers(0, 34)), int(e), False) for e in es]
    # Every e where results are finite and nonzero, twice: an exact tie where the binade allows.
    tie_es = list(range(-150, 128)) * 2 if out_fmt == "fp32" else list(range(-21, 18)) * 8
    for e in tie_es:
        for _ in range(24):
            t = _tie(int(rng.integers(1, 1 << 33)) >> int(rng.integers(0, 22)), int(e), out_fmt)
            if t is not None:
                cases.append((t, int(e), True))
                break
    if out_fmt == "fp16":        # the overflow tie: 65520 = 0xFFF * 2**4, halfway to 65536 (Inf)
        cases.append((0xFFF << 12, 17, True))
    ties = sum(tie for _, _, tie in cases)
    assert ties >= 300, f"only {ties} ties constructed"

    async def tb(ctx):
        for mag, e, tie in cases:
            neg = int(rng.integers(2))
            ctx.set(dut.mag, mag)
            ctx.set(dut.msb, max(mag.bit_length() - 1, 0))
            ctx.set(dut.neg, neg)
            ctx.set(dut.e, e)
            v = np.ldexp(float(-mag if neg else mag), e - 25)
            want = int(round_output(np.array([v]), out_fmt)[0])
            got = ctx.get(dut.bits) & (0xFFFF if out_fmt == "fp16" else 0xFFFFFFFF)
            assert got == want, f"mag={mag:#x} e={e} neg={neg} tie={tie}: {got:#x} != {want:#x}"

    comb_run(dut, tb)


def test_bad_parameters():
    from rtl.mma4 import MMA4
    with pytest.raises(ValueError, match="Pipeline stages must be"):
        MMA4(stages=5)
    with pytest.raises(ValueError, match="at least one input"):
        ExpMax(0)
