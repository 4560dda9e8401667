"""cuBLAS and cuBLASLt GEMMs as PyTorch runs them on Hopper: split-K, epilogues, FP8 scales.

A library GEMM is the tensor core's K chain (:func:`golden.mma.mma`) plus what the library does
around it.  The rules here were measured on an H100 with torch 2.11 / cuBLAS 13.1
(``tests/data/silicon/torch_splitk/``, README there; the H200 ran the same kernels where both
were captured); ``docs/numerics.md`` has them with the alternatives the captures reject.
Every value below is FP32 unless said otherwise; RNE32 is one round to nearest-even to FP32,
RNE_out one round to nearest-even to the output type (FP32, FP16 or BF16); alpha, beta and the
FP8 scales are FP32 (PyTorch hands them to cuBLAS as FP32).

1. **Split-K** (FP16/BF16; kernels named ``..._splitK_...`` with ``splitKreduce_kernel``):
   K is cut into S contiguous slices of ``ceil(ceil(K/64)/S)*64`` (the last shorter), each
   slice the usual chain from +0; the S partials are added in K order, each add RNE32.
2. **addmm, beta != 1**: D = RNE_out(fma32(alpha, acc, RNE32(beta*C))).
3. **addmm, beta = 1** (C an (M, N) matrix): D = RNE_out(RNE_out(RNE32(alpha*acc)) + C), the
   sum in FP32.
4. **A 1-D bias** (``linear``, ``addmm`` with alpha = beta = 1): D = RNE_out(RNE32(acc + bias)).
5. **Split-K addmm** (beta != 1): D = RNE_out(fma32(beta, C, RNE32(alpha*acc))).
6. **FP8, tensor-wise scales**: s = RNE32(scale_a*scale_b); D = RNE_out(RNE32(acc*s)); with a
   bias RNE_out(RNE32(RNE32(acc*s) + bias)).
7. **FP8, row-wise scales** (scale_a (M, 1), scale_b (1, N)):
   D = RNE_out(RNE32(RNE32(acc*scale_b[j])*scale_a[i])); a bias as in 6.

Not measured, so refused here (ValueError): split-K with beta = 1 and a matrix C, a bias with
alpha != 1 on FP16/BF16 inputs, split-K on other inputs than FP16/BF16.
"""

from __future__ import annotations

from math import ceil

import ml_dtypes
import numpy as np

from .sparse import _bf16_rne

__all__ = ["SPLIT_K_TILE", "SPLIT_K_MAX_OUTPUTS", "split_k_auto", "split_slices", "rne32",
           "fma32", "round_out", "out_format", "epilogue"]

#: K granularity of cuBLAS's split-K slices (the kernels' K tile).
SPLIT_K_TILE = 64
#: The largest output (M * N) on which cuBLAS was seen to split K (64 x 64 on the H200);
#: :func:`split_k_auto` splits no larger output.
SPLIT_K_MAX_OUTPUTS = 64 * 64

_OUT = {"fp32": np.dtype(np.float32), "fp16": np.dtype(np.float16),
        "bf16": np.dtype(ml_dtypes.bfloat16)}


def split_k_auto(m: int, k: int, n: int) -> int:
    """The split count cuBLAS picked for an (M, K) x (K, N) FP16/BF16 GEMM with PyTorch's default
    workspace on the captured shapes: S = max(1, floor(3K / 4096)) for outputs up to
    :data:`SPLIT_K_MAX_OUTPUTS` elements (K <= 2048 does not split), 1 for larger outputs.
    cuBLAS's heuristic is its own: a profile of the GPU run says what it picked."""
    if m * n > SPLIT_K_MAX_OUTPUTS:
        return 1
    return max(1, min(3 * k // 4096, ceil(k / SPLIT_K_TILE)))


def split_slices(k: int, split_k) -> list[tuple[int, int]]:
    """The K ranges [k0, k1) of split-K with ``split_k`` slices of ``ceil(ceil(K/64)/S)*64``
    (the last shorter, or empty); ValueError for a count below 1 or above ceil(K/64)."""
    steps = ceil(k / SPLIT_K_TILE)
    if isinstance(split_k, bool) or not isinstance(split_k, (int, np.integer)):
        raise ValueError(f"split_k must be an int (the split count; 1 = no split), "
                         f"not {split_k!r}")
    if not 1 <= split_k <= steps:
        raise ValueError(f"split_k={split_k} does not fit K={k}: cuBLAS cuts K in slices of "
                         f"whole {SPLIT_K_TILE}-wide steps, so 1 <= split_k <= {steps}")
    width = ceil(steps / int(split_k)) * SPLIT_K_TILE
    return [(k0, min(k0 + width, k)) for k0 in range(0, k, width)]


def rne32(x) -> np.ndarray:
    """float32 values (float32 arithmetic is IEEE round to nearest-even)."""
    return np.asarray(x, np.float32)


def fma32(x, y, z) -> np.ndarray:
    """fl32(x * y + z) with one rounding to nearest-even, on float32 arrays: the exact product
    in float64, the sum rounded to odd in float64 (TwoSum), then to float32 (53 >= 24 + 2 bits,
    so the double rounding is exact)."""
    x, y, z = (np.asarray(v, np.float64) for v in (x, y, z))
    with np.errstate(all="ignore"):
        p = x * y
        s = p + z
        t = s - z
        e = (p - t) + (z - (s - t))
        bump = np.isfinite(s) & np.isfinite(e) & (e != 0) & ((s.view(np.int64) & 1) == 0)
        s = np.where(bump, np.nextafter(s, np.where(e > 0, np.inf, -np.inf)), s)
        return s.astype(np.float32)


def out_format(out_dtype) -> str:
    """"fp32", "fp16" or "bf16" for an output dtype given as a NumPy / ml_dtypes dtype or one of
    those names; ValueError naming ``out_dtype`` otherwise."""
    if isinstance(out_dtype, str) and out_dtype in _OUT:
        return out_dtype
    try:
        dt = np.dtype(out_dtype)
    except TypeError:
        dt = None
    for name, want in _OUT.items():
        if dt == want:
            return name
    raise ValueError(f"out_dtype must be float32, float16 or bfloat16 (or 'fp32', 'fp16', "
                     f"'bf16'), not {out_dtype!r}")


def round_out(x, out_dtype) -> np.ndarray:
    """RNE_out: float32 values rounded once to nearest-even to ``out_dtype`` (float32 is
    unchanged); a NaN becomes the canonical 0x7FFFFFFF / 0x7FFF, as the GPU writes it."""
    fmt = out_format(out_dtype)
    x = np.array(x, np.float32)
    nan = np.isnan(x)
    if fmt == "fp32":
        x.view(np.uint32)[nan] = 0x7FFFFFFF
        return x
    if fmt == "fp16":
        with np.errstate(over="ignore", invalid="ignore"):
            bits = x.astype(np.float16).view(np.uint16)
        bits[nan] = 0x7FFF
        return bits.view(np.float16)
    return _bf16_rne(x.view(np.uint32)).view(ml_dtypes.bfloat16)


def epilogue(acc, out_dtype=np.float32, *, alpha=1.0, beta=None, c=None, bias=None,
             scale_a=None, scale_b=None, split=False) -> np.ndarray:
    """The library's result from the FP32 accumulator ``acc`` (..., M, N): rules 2 to 7 of
    the module docstring, then RNE_out.

    ``c`` (broadcasting to acc) with ``beta`` (None: 1) is addmm's C; ``bias`` (N,) a 1-D bias;
    ``scale_a`` / ``scale_b`` FP8 scales (one value each, or (M, 1) and (1, N)); ``split``
    says whether ``acc`` came from a split-K kernel (its reduce kernel's epilogue, rule 5).
    ValueError for a combination the captures do not pin down.
    """
    acc = np.asarray(acc, np.float32)
    alpha = np.float32(alpha)
    with np.errstate(all="ignore"):
        if scale_a is not None or scale_b is not None:
            if alpha != 1 or c is not None:
                raise ValueError("FP8 scales go with neither alpha nor C (torch._scaled_mm "
                                 "takes a bias)")
            sa, sb = np.asarray(scale_a, np.float32), np.asarray(scale_b, np.float32)
            if sa.size == 1 and sb.size == 1:          # rule 6: tensor-wise
                y = rne32(acc * rne32(sa.reshape(()) * sb.reshape(())))
            else:                                       # rule 7: the column scale first
                y = rne32(rne32(acc * sb) * sa)
        elif alpha == 1:
            y = acc
        else:
            y = rne32(alpha * acc)
        if bias is not None:
            if c is not None:
                raise ValueError("give C or a bias, not both")
            if alpha != 1:
                raise ValueError("a bias with alpha != 1 (cuBLASLt's bias epilogue with alpha) "
                                 "is not in the captures")
            return round_out(rne32(y + np.asarray(bias, np.float32)), out_dtype)   # rules 4, 6
        if c is None or beta == 0:
            return round_out(y, out_dtype)
        beta = np.float32(1 if beta is None else beta)
        c = np.asarray(c, np.float32)
        if split:
            if beta == 1:
                raise ValueError("split-K with beta = 1 and a matrix C is not in the captures "
                                 "(their split-K addmm has beta = 1.3)")
            return round_out(fma32(beta, c, y), out_dtype)                  # rule 5
        if beta == 1:
            return round_out(rne32(round_out(y, out_dtype).astype(np.float32) + c), out_dtype)
        return round_out(fma32(alpha, acc, rne32(beta * c)), out_dtype)     # rule 2
