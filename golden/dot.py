"""The block fused dot-add: one tensor-core step, d = dot(a[0:n], b[0:n]) + c.

This is the rule of ``docs/numerics.md`` (measured on an H200):

1. NaN if any input is NaN, a product is Inf x 0, or the Infs among products and c have both
   signs; otherwise any Inf gives that Inf.  NaN is canonical (0x7FFFFFFF, 0x7FFF).
2. Products are exact and unnormalised; their nominal exponent is ea + eb.  c keeps its own.
3. E = the largest nominal exponent among the nonzero terms (FP16 out: at least the floor).
4. Every term is truncated toward zero to a multiple of 2**(E - F); no guard or sticky bit.
5. The truncated terms are added exactly.
6. FP32 out: truncated (RZ) to FP32, >= 2**128 gives Inf, subnormals kept.  FP16 out: rounded
   once to nearest-even; overflow gives Inf.
7. Every zero result is +0.

Why float64 is exact here: an FP16 or BF16 product has at most 22 significant bits and an
exponent far inside float64's range; scaling by the power of two ``2**(F - E)`` turns every term
into a number below ``2**(F + 2)`` whose truncation is ``numpy.trunc``; a sum of up to 17 such
integers stays below 2**53.  So the whole step is a handful of float64 array operations, and
the special values fall out of IEEE float64 arithmetic (Inf x 0 = NaN, Inf - Inf = NaN).
"""

from __future__ import annotations

import numpy as np

from .formats import FP16, FP32, canonical_nan, decode, classify, get_format, NAN, INF, ZERO

__all__ = ["fused_sum", "round_output", "exact_round"]


def fused_sum(a_vals, a_pows, b_vals, b_pows, c_val, c_pow, grid: int, floor: int | None = None):
    """The truncated, exactly added sum of one step, as exact float64 values.

    Parameters
    ----------
    a_vals, a_pows, b_vals, b_pows : sequences of arrays
        For each of the step's k terms, the float64 values and ``2**nominal_exponent``
        (:func:`tcore.golden.formats.pow2_nominal`) of the two factors, broadcastable to the output.
    c_val, c_pow : array
        The addend's value and power, of the output's shape.
    grid : int
        F of the rule.
    floor : int or None
        Lower bound on E (FP16-output mode).

    Returns
    -------
    float64 array: the exact value of the sum of the truncated terms, or the IEEE special
    (Inf or NaN) where the rule gives one.
    """
    big_e = np.array(c_pow, dtype=np.float64, copy=True)
    for pa, pb in zip(a_pows, b_pows):
        np.maximum(big_e, pa * pb, out=big_e)
    if floor is not None:
        np.maximum(big_e, 2.0 ** floor, out=big_e)
    # 2**(F - E); 1.0 where every term is zero (any scale leaves zeros zero).
    scale = np.divide(2.0 ** grid, big_e, out=np.ones_like(big_e), where=big_e > 0)
    with np.errstate(invalid="ignore"):       # Inf x 0 and Inf - Inf are NaN, as the rule says
        total = np.trunc(c_val * scale)
        for va, vb in zip(a_vals, b_vals):
            term = va * vb
            term *= scale
            np.trunc(term, out=term)
            total += term
    total /= scale
    return total


def round_output(v, out_fmt, fp32_cut: int | None = None) -> np.ndarray:
    """Round exact float64 results to the output format's bits (step 6 and 7 of the rule).

    FP32: toward zero, magnitudes >= 2**128 to Inf, subnormals kept; with ``fp32_cut`` the
    result is then cut toward zero to that many fraction bits (FP8 on Hopper: 13), i.e. the
    pattern's low ``23 - fp32_cut`` bits are cleared.  FP16: to nearest-even in one step
    (NumPy's float64 to float16 conversion rounds correctly), overflow to Inf.  Zeros become +0
    and NaNs the canonical NaN.
    """
    out_fmt = get_format(out_fmt)
    v = np.asarray(v, dtype=np.float64)
    nan = np.isnan(v)
    with np.errstate(over="ignore", invalid="ignore"):
        if out_fmt is FP32:
            mag = np.abs(v)
            # Clearing the 29 low fraction bits of a float64 truncates it to 24 bits.
            trunc = (mag.view(np.uint64) & np.uint64(~0x1FFFFFFF & 0xFFFFFFFFFFFFFFFF)).view(np.float64)
            sub = mag < 2.0 ** -126
            if np.any(sub):
                trunc = np.where(sub, np.trunc(mag * 2.0 ** 149) * 2.0 ** -149, trunc)
            bits = trunc.astype(np.float32).view(np.uint32)
            if fp32_cut is not None:
                # Inf's fraction is zero, so the cut leaves it; a NaN is made canonical below.
                bits &= np.uint32(~((1 << (23 - fp32_cut)) - 1) & 0xFFFFFFFF)
            bits = bits | (np.signbit(v).astype(np.uint32) << 31)
            bits[bits == 0x80000000] = 0
        elif out_fmt is FP16:
            bits = v.astype(np.float16).view(np.uint16)
            bits[(bits & 0x7FFF) == 0] = 0
        else:
            raise ValueError(f"Output format must be fp32 or fp16, not {out_fmt.name}")
    bits[nan] = canonical_nan(out_fmt)
    return bits


_LIMB = 30


def exact_round(terms, shape, out_fmt) -> np.ndarray:
    """Round the exact sum of integer-significand terms once, to nearest-even.

    The reference for the ``ieee`` mode.  Each term is ``(sign, significand, exponent)`` of
    int64 arrays broadcastable to ``shape`` (value ``(-1)**sign * significand * 2**exponent``,
    significand below 2**30).  The sum is kept exactly in 30-bit limbs, so no term is lost,
    however far apart the exponents.  Finite terms only: specials are the caller's.
    """
    out_fmt = get_format(out_fmt)
    terms = [tuple(np.broadcast_to(np.asarray(x, dtype=np.int64), shape) for x in t) for t in terms]
    size = int(np.prod(shape))
    flat = [(s.reshape(size), m.reshape(size), e.reshape(size)) for s, m, e in terms]
    if size == 0:
        return np.zeros(shape, dtype=out_fmt.dtype)
    emin = min(int(e[m != 0].min(initial=0)) for _, m, e in flat)
    emax = max(int(e[m != 0].max(initial=0)) for _, m, e in flat)
    nlimbs = (emax - emin + 32) // _LIMB + 3   # room for the significand and carries
    acc = np.zeros((nlimbs + 1, size), dtype=np.int64)   # limb 0 is a zero pad below
    cols = np.arange(size)
    for s, m, e in flat:
        off = np.where(m != 0, e - emin, 0)
        limb, shift = off // _LIMB + 1, off % _LIMB
        v = m << shift
        sgn = 1 - 2 * s
        acc[limb, cols] += sgn * (v & ((1 << _LIMB) - 1))
        acc[limb + 1, cols] += sgn * (v >> _LIMB)

    def carry(a):
        for i in range(a.shape[0] - 1):
            c = a[i] >> _LIMB
            a[i] -= c << _LIMB
            a[i + 1] += c

    carry(acc)
    neg = acc[-1] < 0
    acc[:, neg] = -acc[:, neg]
    carry(acc)
    nz = acc != 0
    anynz = nz.any(axis=0)
    top = np.where(anynz, acc.shape[0] - 1 - np.argmax(nz[::-1], axis=0), 1)
    hi = acc[top, cols]
    lo = acc[top - 1, cols]
    below = np.cumsum(nz, axis=0)          # nonzero limbs at or below each index
    sticky = below[np.maximum(top - 2, 0), cols] > 0
    sticky &= top >= 2
    word = (hi << _LIMB) | lo               # < 2**60
    base = (top - 2) * _LIMB + emin         # exponent of word's last bit
    _, bl = np.frexp(word.astype(np.float64))
    bl = bl.astype(np.int64)
    bl -= (np.left_shift(1, np.maximum(bl - 1, 0)) > word).astype(np.int64)
    lead = bl - 1 + base
    p, e_lo = out_fmt.precision, out_fmt.emin
    q = np.maximum(lead - (p - 1), e_lo - (p - 1))
    r = np.clip(q - base, 0, 62)
    kept = word >> r
    rem = word - (kept << r)
    half = np.where(r > 0, np.left_shift(1, np.maximum(r - 1, 0)), 0)
    up = (r > 0) & ((rem > half) | ((rem == half) & (sticky | ((kept & 1) == 1))))
    kept = kept + up
    with np.errstate(over="ignore"):
        val = np.ldexp(kept.astype(np.float64), (base + r).astype(np.int32))
    val = np.where(neg, -val, val)
    val[~anynz] = 0.0
    with np.errstate(over="ignore"):
        bits = val.astype(np.float32).view(np.uint32) if out_fmt is FP32 else \
            val.astype(np.float16).view(np.uint16)
    bits[val == 0] = 0
    return bits.reshape(shape)


def finite_terms(bits, fmt):
    """``(sign, significand, exponent)`` with value ``(-1)**s * m * 2**e`` for finite bits."""
    fmt = get_format(fmt)
    s, m, e = decode(bits, fmt)
    return s, m, e - fmt.frac_bits


def special_mask(bits, fmt):
    """True where a pattern is Inf or NaN."""
    cls = classify(bits, fmt)
    return (cls == INF) | (cls == NAN)


def is_zero(bits, fmt):
    return classify(bits, fmt) == ZERO
