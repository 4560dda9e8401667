"""The ``ieee`` mode against exact rational arithmetic (fractions.Fraction)."""

from fractions import Fraction

import numpy as np
import pytest

from golden import get_format, mma
from golden.formats import to_float


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


@pytest.mark.parametrize("in_fmt,out_fmt,k,spread", [
    ("fp16", "fp32", 16, "wide"), ("fp16", "fp16", 16, "wide"), ("bf16", "fp32", 16, "wide"),
    ("fp16", "fp32", 33, "narrow"), ("fp16", "fp16", 7, "narrow"), ("bf16", "fp32", 5, "narrow"),
])
def test_ieee_mode_is_exactly_rounded(in_fmt, out_fmt, k, spread):
    rng = np.random.default_rng(hash((in_fmt, out_fmt, k)) & 0xFFFF)
    t = 6
    if spread == "wide":
        a = random_finite(rng, (t, 4, k), in_fmt, 16)
        b = random_finite(rng, (t, k, 4), in_fmt, 16)
    else:   # values near 1 that cancel: stresses rounding, ties and the sticky bit
        conv = np.float16 if in_fmt == "fp16" else __import__("ml_dtypes").bfloat16
        a = rng.standard_normal((t, 4, k)).astype(conv).view(np.uint16)
        b = rng.standard_normal((t, k, 4)).astype(conv).view(np.uint16)
    c_bits = 32 if out_fmt == "fp32" else 16
    c = random_finite(rng, (t, 4, 4), out_fmt, c_bits) if spread == "wide" else \
        rng.standard_normal((t, 4, 4)).astype(np.float32 if out_fmt == "fp32" else np.float16).view(
            np.uint32 if out_fmt == "fp32" else np.uint16)
    got = mma(a, b, c, in_fmt=in_fmt, out_fmt=out_fmt, mode="ieee")
    va, vb, vc = to_float(a, in_fmt), to_float(b, in_fmt), to_float(c, out_fmt)
    for ti in range(t):
        for i in range(4):
            for j in range(4):
                exact = Fraction(float(vc[ti, i, j])) + sum(
                    Fraction(float(va[ti, i, kk])) * Fraction(float(vb[ti, kk, j])) for kk in range(k))
                assert int(got[ti, i, j]) == round_fraction(exact, out_fmt), (ti, i, j)


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
