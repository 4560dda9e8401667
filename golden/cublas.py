"""cuBLAS and cuBLASLt GEMMs as PyTorch runs them on Hopper: split-K, epilogues, FP8 scales.

A library GEMM is the tensor core's K chain (:func:`tcore.golden.mma.mma`) plus what the library does
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

What the captures do not pin down is refused here with :class:`NotModelled` (a ValueError):
split-K with beta = 1 and a matrix C, a bias with alpha != 1 (:func:`check_epilogue`, which
:func:`epilogue` runs), split-K on inputs other than FP16/BF16 (:func:`split_slices` given the
input format), FP8 scales that are neither tensor-wise nor row-wise (:func:`fp8_scales`).
"""

from __future__ import annotations

import numbers
from math import ceil

import ml_dtypes
import numpy as np

from tcore.numerics.formats import values_dtype

from .sparse import bf16_rne

__all__ = ["NotModelled", "SPLIT_K_TILE", "SPLIT_K_MAX_OUTPUTS", "split_k_auto", "split_slices",
           "split_k_reduce", "rne32", "fma32", "round_out", "out_format", "fp8_scales",
           "check_epilogue", "epilogue"]

#: K granularity of cuBLAS's split-K slices (the kernels' K tile).
SPLIT_K_TILE = 64
#: The largest output (M * N) on which cuBLAS was seen to split K (64 x 64 on the H200).
#: No capture has a larger output with K > 2048, so above it the split count is not measured;
#: :func:`split_k_auto` chooses 1 there.
SPLIT_K_MAX_OUTPUTS = 64 * 64


class NotModelled(ValueError):
    """A library GEMM the captures do not pin down (split-K with beta = 1, a bias with alpha,
    split-K of other inputs than FP16/BF16, block-wise FP8 scales, ...): a ValueError, so
    :func:`tcore.golden.matmul` callers see one; ``tcore.torch`` turns it into ``Unsupported``."""

_OUT = {name: values_dtype(name) for name in ("fp32", "fp16", "bf16")}


def split_k_auto(m: int, k: int, n: int) -> int:
    """The split count cuBLAS picked for an (M, K) x (K, N) FP16/BF16 GEMM with PyTorch's default
    workspace on the captured shapes: S = max(1, floor(3K / 4096)) for outputs up to
    :data:`SPLIT_K_MAX_OUTPUTS` elements (K <= 2048 does not split).  Above 64 x 64 outputs
    the split count is not measured (no capture there has K > 2048): this returns 1 there as a
    chosen default, not a measurement.  cuBLAS's heuristic is its own: a profile of the GPU
    run says what it picked (``tcore.torch.kernels_from_profile``)."""
    if m * n > SPLIT_K_MAX_OUTPUTS:
        return 1
    return max(1, min(3 * k // 4096, ceil(k / SPLIT_K_TILE)))


def split_slices(k: int, split_k, in_fmt: str | None = None) -> list[tuple[int, int]]:
    """The K ranges [k0, k1) of split-K with ``split_k`` slices of ``ceil(ceil(K/64)/S)*64``
    (the last shorter); ValueError for a count below 1 or above ceil(K/64), and, given the
    input format ``in_fmt`` (golden's names: "fp16", "bf16", "tf32", "e4m3", ...),
    :class:`NotModelled` for a split of other inputs than FP16/BF16."""
    steps = ceil(k / SPLIT_K_TILE)
    if isinstance(split_k, bool) or not isinstance(split_k, (int, np.integer)):
        raise ValueError(f"split_k must be an int (the split count; 1 = no split), "
                         f"not {split_k!r}")
    if not 1 <= split_k <= steps:
        raise ValueError(f"split_k={split_k} does not fit K={k}: cuBLAS cuts K in slices of "
                         f"whole {SPLIT_K_TILE}-wide steps, so 1 <= split_k <= {steps}")
    if split_k > 1 and in_fmt is not None and in_fmt not in ("fp16", "bf16"):
        raise NotModelled(f"split_k={split_k}: split-K is measured for FP16/BF16 inputs only, "
                          f"not {in_fmt.upper()} (pass split_k=1 where the GPU ran no splitK "
                          "kernel)")
    width = ceil(steps / int(split_k)) * SPLIT_K_TILE
    return [(k0, min(k0 + width, k)) for k0 in range(0, k, width)]


def split_k_reduce(partials) -> np.ndarray:
    """cuBLASLt's ``splitKreduce_kernel`` (rule 1): the FP32 partial products of the K slices
    (an iterable, in K order) added in K order, each add one round to nearest-even in FP32."""
    it = iter(partials)
    acc = np.asarray(next(it), np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        for part in it:
            acc = acc + np.asarray(part, np.float32)      # float32 addition: RNE32
    return acc


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
    return bf16_rne(x.view(np.uint32)).view(ml_dtypes.bfloat16)


def _fp32_scale(name, s):
    """One scale as float32: a Python number or a 0-d value rounded once to FP32 (as PyTorch
    makes ``torch.tensor(0.3)`` float32); an array of more dimensions must be float32."""
    if isinstance(s, (bool, np.bool_)):
        raise ValueError(f"{name} must be a number or a float32 array, not {s!r}")
    if isinstance(s, numbers.Real) or (isinstance(s, np.ndarray) and s.ndim == 0) \
            or isinstance(s, np.generic):
        arr = np.asarray(s)
        if arr.dtype.kind not in "fiu":
            raise ValueError(f"{name} must be a number or a float32 array, not {arr.dtype}")
        return np.float32(arr)
    arr = np.asarray(s)
    if arr.dtype != np.float32:
        raise ValueError(f"{name} must be float32 (or a Python number / 0-d value, taken as "
                         f"FP32), not {arr.dtype}")
    return arr


def fp8_scales(scale_a, scale_b, m: int, n: int):
    """``(scale_a, scale_b, rowwise)`` of ``torch._scaled_mm`` as float32: one value each
    (tensor-wise; a Python number or 0-d value is rounded once to FP32) or scale_a (M, 1) with
    scale_b (1, N) (row-wise, float32 arrays).  ValueError for another dtype;
    :class:`NotModelled` naming the scale whose shape is neither (block-wise scales)."""
    sa, sb = _fp32_scale("scale_a", scale_a), _fp32_scale("scale_b", scale_b)
    if sa.size == 1:
        if sb.size != 1:
            raise NotModelled(f"scale_b of shape {sb.shape} with a tensor-wise scale_a: "
                              "scale_b must be one value too")
        return sa.reshape(()), sb.reshape(()), False
    if sa.shape != (m, 1):
        raise NotModelled(f"scale_a of shape {sa.shape} is neither one value (tensor-wise) nor "
                          f"({m}, 1) (row-wise); block-wise scales are not modelled")
    if sb.shape != (1, n):
        raise NotModelled(f"scale_b of shape {sb.shape} with a row-wise scale_a: scale_b must "
                          f"be (1, {n})")
    return sa, sb, True


def check_epilogue(*, alpha=1.0, beta=None, c=None, bias=None, scaled=False,
                   split=False) -> None:
    """Refuse an epilogue the captures do not pin down (:class:`NotModelled`: split-K with
    beta = 1 and a matrix C, a bias with alpha != 1) or that no library call has (ValueError:
    C with a bias, FP8 scales with alpha or C).  :func:`epilogue` runs it; callers may run it
    before computing the accumulator."""
    alpha = np.float32(alpha)
    if scaled and (alpha != 1 or c is not None):
        raise ValueError("FP8 scales go with neither alpha nor C (torch._scaled_mm takes a bias)")
    if bias is not None:
        if c is not None:
            raise ValueError("give C or a bias, not both")
        if alpha != 1:
            raise NotModelled("a bias with alpha != 1 (cuBLASLt's bias epilogue with alpha) is "
                              "not in the captures")
    if split and c is not None and beta != 0 and np.float32(1 if beta is None else beta) == 1:
        raise NotModelled("split-K with beta = 1 and a matrix C is not in the captures (their "
                          "split-K addmm has beta = 1.3); pass split_k=1 where the GPU ran no "
                          "splitK kernel")


def epilogue(acc, out_dtype=np.float32, *, alpha=1.0, beta=None, c=None, bias=None,
             scale_a=None, scale_b=None, split=False) -> np.ndarray:
    """The library's result from the FP32 accumulator ``acc`` (..., M, N): rules 2 to 7 of
    the module docstring, then RNE_out.

    ``c`` (broadcasting to acc) with ``beta`` (None: 1) is addmm's C; ``bias`` (N,) a 1-D bias;
    ``scale_a`` / ``scale_b`` FP8 scales (one value each, or (M, 1) and (1, N), as
    :func:`fp8_scales` gives them); ``split`` says whether ``acc`` came from a split-K kernel
    (its reduce kernel's epilogue, rule 5).  :func:`check_epilogue`'s refusals first.
    """
    check_epilogue(alpha=alpha, beta=beta, c=c, bias=bias,
                   scaled=scale_a is not None or scale_b is not None, split=split)
    acc = np.asarray(acc, np.float32)
    alpha = np.float32(alpha)
    with np.errstate(all="ignore"):
        if scale_a is not None or scale_b is not None:
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
            return round_out(rne32(y + np.asarray(bias, np.float32)), out_dtype)   # rules 4, 6
        if c is None or beta == 0:
            return round_out(y, out_dtype)
        beta = np.float32(1 if beta is None else beta)
        c = np.asarray(c, np.float32)
        if split:
            return round_out(fma32(beta, c, y), out_dtype)                  # rule 5
        if beta == 1:
            return round_out(rne32(round_out(y, out_dtype).astype(np.float32) + c), out_dtype)
        return round_out(fma32(alpha, acc, rne32(beta * c)), out_dtype)     # rule 2
