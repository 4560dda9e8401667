"""The ``ieee`` mode against exact rational arithmetic (fractions.Fraction)."""

from fractions import Fraction

import numpy as np
import pytest

from tcore.golden import get_format, mma
from tcore.golden.formats import to_float


def round_fraction(x: Fraction, fmt) -> int:
    """Round a rational to nearest-even in ``fmt``; return the bit pattern (+0 for zero)."""
    fmt = get_format(fmt)
    if x == 0:
        return 0
    neg, a = x < 0, abs(x)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    q = max(e, fmt.emin) - (fmt.precision - 1)
    scaled = a / Fraction(2) ** q
    n = scaled.numerator // scaled.denominator
    rem = scaled - n
    if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and n % 2 == 1):
        n += 1
    val = n * Fraction(2) ** q
    np_t = np.float32 if fmt.name == "fp32" else np.float16
    if val >= Fraction(2) ** (fmt.emax + 1):
        out = np_t(np.inf)
    else:
        out = np_t(float(val))
        assert Fraction(float(out)) == val
    bits = int(out.view(np.uint32 if fmt.name == "fp32" else np.uint16))
    return bits | (neg << (fmt.width - 1))


def random_finite(rng, shape, fmt, nbits):
    """Random finite bit patterns with exponents spread over the whole range."""
    mask = (1 << nbits) - 1
    out = rng.integers(0, mask + 1, size=shape, dtype=np.uint64).astype(np.uint32 if nbits == 32 else np.uint16)
    x = to_float(out, fmt)
    while not np.all(np.isfinite(x)):
        bad = ~np.isfinite(x)
        out[bad] = rng.integers(0, mask + 1, size=int(bad.sum()), dtype=np.uint64)
        x = to_float(out, fmt)
    return out


def _bits(x, fmt):
    """float64 values to ``fmt`` bits (rounded to nearest by the conversion)."""
    if fmt == "bf16":
        import ml_dtypes
        return np.asarray(x).astype(ml_dtypes.bfloat16).view(np.uint16)
    if fmt == "fp16":
        return np.asarray(x).astype(np.float16).view(np.uint16)
    return np.asarray(x).astype(np.float32).view(np.uint32)


RANGES = {"fp16": (-24, 15), "bf16": (-133, 127), "fp32": (-149, 127)}   # exponents, subnormals in


def wide_operands(rng, t, k, in_fmt, out_fmt):
    """Exponents over the whole input range, subnormals included, but paired so that every
    product's exponent lands inside the output's range (at most 2**(emax - 6)): A's exponent
    depends on k (and +-2 per row), B's is the product's target minus it.  Most outputs are
    then finite; the test checks that they are."""
    lo, hi = RANGES[in_fmt]
    olo, ohi = RANGES[out_fmt]
    ea = rng.integers(lo, hi + 1, (t, 1, k)) + rng.integers(-2, 3, (t, 4, k))
    target = rng.integers(max(olo - 4, 2 * lo), ohi - 6, (t, k, 4))
    eb = np.clip(target - ea[:, :1, :].transpose(0, 2, 1), lo, hi)
    ea = np.clip(ea, lo, hi)
    frac = lambda shape: 1 + rng.integers(0, 1 << 10, shape) / 1024.0
    sign = lambda shape: rng.choice([-1.0, 1.0], shape)
    a = _bits(sign(ea.shape) * frac(ea.shape) * np.exp2(ea.astype(float)), in_fmt)
    b = _bits(sign(eb.shape) * frac(eb.shape) * np.exp2(eb.astype(float)), in_fmt)
    c_bits = 32 if out_fmt == "fp32" else 16
    c = random_finite(rng, (t, 4, 4), out_fmt, c_bits)
    return a, b, c


def cancelling_operands(rng, t, k, in_fmt, out_fmt):
    """Values near 1 that cancel: A = +-(1 + small), B = 1 + small, with as many + as - signs
    along k, and C = -(1 + small) or +(1 + small) to cancel an odd term: the exact sum is a few
    units in the last place of the inputs, far below its terms, which stresses rounding, ties and the sticky
    bit.  The test checks that the sums do cancel."""
    ulp = 2.0 ** (-10 if in_fmt == "fp16" else -7)
    near1 = lambda shape: 1 + rng.integers(-3, 4, shape) * ulp
    signs = np.array([1.0, -1.0] * (k // 2) + [1.0] * (k % 2))
    sa = np.stack([np.stack([rng.permutation(signs) for _ in range(4)]) for _ in range(t)])
    a = _bits(sa * near1((t, 4, k)), in_fmt)
    b = _bits(near1((t, k, 4)), in_fmt)
    c = _bits(-(k % 2) * near1((t, 4, 4)) + (1 - k % 2) * rng.integers(-4, 5, (t, 4, 4)) * 2.0 ** -12,
              out_fmt)
    return a, b, c


@pytest.mark.parametrize("in_fmt,out_fmt,k,spread,seed", [
    ("fp16", "fp32", 16, "wide", 101), ("fp16", "fp16", 16, "wide", 102), ("bf16", "fp32", 16, "wide", 103),
    ("fp16", "fp32", 33, "cancel", 104), ("fp16", "fp16", 7, "cancel", 105), ("bf16", "fp32", 5, "cancel", 106),
    ("fp16", "fp32", 16, "cancel", 107), ("bf16", "fp32", 16, "cancel", 108),
])
def test_ieee_mode_is_exactly_rounded(in_fmt, out_fmt, k, spread, seed):
    print(f"seed {seed}")           # fixed per case: a failure reproduces
    rng = np.random.default_rng(seed)
    t = 6
    make = wide_operands if spread == "wide" else cancelling_operands
    a, b, c = make(rng, t, k, in_fmt, out_fmt)
    got = mma(a, b, c, in_fmt=in_fmt, out_fmt=out_fmt, mode="ieee")
    va, vb, vc = to_float(a, in_fmt), to_float(b, in_fmt), to_float(c, out_fmt)
    finite = cancelled = 0
    for ti in range(t):
        for i in range(4):
            for j in range(4):
                terms = [Fraction(float(vc[ti, i, j]))] + [
                    Fraction(float(va[ti, i, kk])) * Fraction(float(vb[ti, kk, j])) for kk in range(k)]
                exact = sum(terms)
                want = round_fraction(exact, out_fmt)
                assert int(got[ti, i, j]) == want, (f"seed {seed}: D[{ti}][{i}][{j}] "
                                                     f"{int(got[ti, i, j]):#x} != {want:#x}")
                finite += bool(np.isfinite(to_float(np.array(want, got.dtype), out_fmt)))
                cancelled += abs(exact) * 8 <= max(abs(x) for x in terms)
    n = t * 16
    assert finite >= 0.9 * n, f"seed {seed}: only {finite} of {n} outputs are finite"
    if spread == "cancel":
        assert cancelled >= 0.8 * n, f"seed {seed}: only {cancelled} of {n} sums cancel"


def test_ieee_mode_specials():
    one, inf, zero = 0x3C00, 0x7C00, 0x0000
    a = np.array([[[inf, one], [one, one], [inf, zero], [inf, zero]]], np.uint16)
    b = np.array([[[one], [one]]], np.uint16)
    b0 = np.array([[[zero], [one]]], np.uint16)
    c = np.zeros((1, 4, 1), np.uint32)
    got = mma(a, b, c, mode="ieee")[0, :, 0]
    assert got[0] == 0x7F800000 and got[1] == 0x40000000
    got0 = mma(a, b0, c, mode="ieee")[0, :, 0]
    assert got0[0] == 0x7FFFFFFF   # Inf x 0
