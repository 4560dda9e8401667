"""Matrix multiply-accumulate on tiles: D = A·B + C, chained over K in steps of the block width.

:func:`mma` is the model of a tensor-core MMA of any K (a WMMA 16x16x16 step, a 16x16x32, or a
whole matmulT GEMM): the k range is cut into steps of the architecture's block width n (the last
may be shorter), each step is one block fused dot-add (:mod:`golden.dot`), and the rounded output
of a step is the addend of the next.  :func:`mma4` is the golden twin of the RTL core
``rtl/mma4.py``.
"""

from __future__ import annotations

import numpy as np

from .arch import get_arch, HOPPER
from .dot import exact_round, finite_terms, fused_sum, round_output
from .formats import FP16, FP32, get_format, pow2_nominal, to_float

__all__ = ["mma", "mma4", "MODES", "check_operands"]

MODES = ("hopper", "ieee")

# Output elements handled per pass: keeps the working arrays inside the cache.
_CHUNK = 16384


def check_operands(a, b, c, in_fmt, out_fmt):
    """Validate operand arrays and formats; return them as arrays with the formats resolved.

    Raises TypeError for wrong dtypes and ValueError for wrong shapes or formats, each with a
    message that names the operand.
    """
    in_fmt, out_fmt = get_format(in_fmt), get_format(out_fmt)
    if in_fmt not in (FP16, get_format("bf16")):
        raise ValueError(f"Input format must be fp16 or bf16, not {in_fmt.name}")
    if out_fmt not in (FP32, FP16):
        raise ValueError(f"Output format must be fp32 or fp16, not {out_fmt.name}")
    a, b, c = np.asarray(a), np.asarray(b), np.asarray(c)
    for name, arr, want in (("a", a, np.uint16), ("b", b, np.uint16), ("c", c, out_fmt.dtype)):
        if arr.dtype != want:
            raise TypeError(f"{name} must hold {np.dtype(want).name} bit patterns "
                            f"({out_fmt.name if name == 'c' else in_fmt.name}), not {arr.dtype}")
    if a.ndim < 2 or b.ndim < 2 or c.ndim < 2:
        raise ValueError(f"a, b and c must be at least 2-D (..., rows, cols), "
                         f"not {a.shape}, {b.shape}, {c.shape}")
    m, k = a.shape[-2:]
    k2, n = b.shape[-2:]
    if k != k2:
        raise ValueError(f"a is (..., {m}, {k}) but b is (..., {k2}, {n}): K differs")
    if k < 1:
        raise ValueError("K must be at least 1")
    if c.shape[-2:] != (m, n):
        raise ValueError(f"c must be (..., {m}, {n}) to match a and b, not {c.shape}")
    try:
        np.broadcast_shapes(a.shape[:-2], b.shape[:-2], c.shape[:-2])
    except ValueError:
        raise ValueError(f"batch shapes of a {a.shape}, b {b.shape}, c {c.shape} "
                         "do not broadcast") from None
    return a, b, c, in_fmt, out_fmt


def mma(a, b, c, *, in_fmt="fp16", out_fmt="fp32", arch=HOPPER, mode="hopper"):
    """D = A·B + C with the tensor core's arithmetic, on bit patterns.

    Parameters
    ----------
    a : uint16 array (..., M, K)
        A as FP16 or BF16 bits.
    b : uint16 array (..., K, N)
        B, same format.
    c : uint32 array (..., M, N), or uint16 in FP16-output mode
        The addend.
    in_fmt : "fp16" or "bf16"
    out_fmt : "fp32" or "fp16"
        The accumulator format; FP32 rounds toward zero, FP16 to nearest-even.
    arch : "hopper", "ampere", "volta" or an :class:`golden.arch.Arch`
        Block width, grid and FP16 floor (:mod:`golden.arch`).
    mode : "hopper" or "ieee"
        ``"ieee"`` is the textbook fused reference instead: the exact sum of all K products
        and c rounded once to nearest-even (for comparison; zero gives +0, NaN is canonical).

    Returns
    -------
    D bits, shape broadcast(...) + (M, N), dtype of c.
    """
    a, b, c, in_fmt, out_fmt = check_operands(a, b, c, in_fmt, out_fmt)
    arch = get_arch(arch)
    if mode not in MODES:
        raise ValueError(f"Mode must be one of {MODES}, not {mode!r}")
    if in_fmt.name == "bf16" and not arch.bf16:
        raise ValueError(f"{arch.name} has no BF16 path")
    m, k = a.shape[-2:]
    n = b.shape[-1]
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2], c.shape[:-2])
    a = np.broadcast_to(a, batch + (m, k)).reshape(-1, m, k)
    b = np.broadcast_to(b, batch + (k, n)).reshape(-1, k, n)
    c = np.broadcast_to(c, batch + (m, n)).reshape(-1, m, n)
    out = np.empty(c.shape, dtype=out_fmt.dtype)
    step = _ieee_chunk if mode == "ieee" else _hopper_chunk
    per = max(1, _CHUNK // (m * n))
    for t0 in range(0, c.shape[0], per):
        sl = slice(t0, t0 + per)
        out[sl] = step(a[sl], b[sl], c[sl], in_fmt, out_fmt, arch)
    return out.reshape(batch + (m, n))


def _hopper_chunk(a, b, c, in_fmt, out_fmt, arch):
    va, pa = to_float(a, in_fmt), pow2_nominal(a, in_fmt)
    vb, pb = to_float(b, in_fmt), pow2_nominal(b, in_fmt)
    floor = arch.f16_floor if out_fmt is FP16 else None
    k = a.shape[-1]
    for k0 in range(0, k, arch.block):
        ks = range(k0, min(k0 + arch.block, k))
        v = fused_sum([va[:, :, i, None] for i in ks], [pa[:, :, i, None] for i in ks],
                      [vb[:, None, i, :] for i in ks], [pb[:, None, i, :] for i in ks],
                      to_float(c, out_fmt), pow2_nominal(c, out_fmt), arch.grid, floor)
        c = round_output(v, out_fmt)
    return c


def _ieee_chunk(a, b, c, in_fmt, out_fmt, arch):
    va, vb, vc = to_float(a, in_fmt), to_float(b, in_fmt), to_float(c, out_fmt)
    shape = c.shape
    # Specials follow IEEE: a float64 sum is NaN/Inf exactly where the exact sum is.
    with np.errstate(invalid="ignore"):
        naive = vc + sum(va[:, :, i, None] * vb[:, None, i, :] for i in range(a.shape[-1]))
    sa, ma, ea = finite_terms(a, in_fmt)
    sb, mb, eb = finite_terms(b, in_fmt)
    terms = [finite_terms(c, out_fmt)]
    for i in range(a.shape[-1]):
        terms.append((sa[:, :, i, None] ^ sb[:, None, i, :], ma[:, :, i, None] * mb[:, None, i, :],
                      ea[:, :, i, None] + eb[:, None, i, :]))
    bits = exact_round(terms, shape, out_fmt)
    special = ~np.isfinite(naive)
    if np.any(special):
        bits[special] = round_output(naive[special], out_fmt)
    return bits


def mma4(a, b, c, *, in_fmt="fp16", out_fmt="fp32", fused=True):
    """Golden twin of the RTL ``MMA4`` core.

    ``fused=True`` (the core's K=16 mode): a (..., 4, 16), b (..., 16, 4), c (..., 4, 4); one
    Hopper block fused dot-add over all 16 products and c.  ``fused=False`` (K=4 mode):
    a (..., 4, 4), b (..., 4, 4); one step over 4 products and c.  Both are :func:`mma` with
    the Hopper parameters; the K=4 mode is the K=4 case of the same rule.
    """
    a, b, c = np.asarray(a), np.asarray(b), np.asarray(c)
    want_k = 16 if fused else 4
    if a.shape[-2:] != (4, want_k) or b.shape[-2:] != (want_k, 4) or c.shape[-2:] != (4, 4):
        raise ValueError(f"mma4 with fused={fused} takes a (..., 4, {want_k}), "
                         f"b (..., {want_k}, 4), c (..., 4, 4); not {a.shape}, {b.shape}, {c.shape}")
    return mma(a, b, c, in_fmt=in_fmt, out_fmt=out_fmt, arch=HOPPER)
