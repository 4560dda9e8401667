"""``tcore.golden.matmul``: the tensor core's D = A·B + C on NumPy floats (or integers), any shape.

The entry for numerics work: the arrays' dtypes say the formats, and the result is an ordinary
float32 / float16 / int32 array holding exactly the bits an H200 produces.  Underneath it is
:func:`tcore.golden.mma.mma` on the bit patterns.

==================================  =====================  ==============================
``a``, ``b`` dtypes                 input format           ``out`` (result dtype)
==================================  =====================  ==============================
float16, float16                    FP16                   None (float32) or "fp16"
bfloat16, bfloat16 (ml_dtypes)      BF16                   None (float32)
float8_e4m3fn / float8_e5m2, any    FP8 E4M3 / E5M2        None (float32) or "fp16";
mix (ml_dtypes)                                            (``wgmma``, the default)
float32, float32                    TF32 (low 13 fraction  None (float32)
                                    bits ignored)
int8 or uint8, int8                 S8 / U8 x S8           None (int32)
==================================  =====================  ==============================
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from tcore.numerics import Op
from tcore.numerics.formats import INPUT_FORMATS, format_of

from .mma import mma

__all__ = ["matmul", "matmul_op"]


_ACCEPTED = ("a and b both float16 (FP16), both bfloat16 (BF16), float8_e4m3fn/float8_e5m2 in "
             "any mix (FP8), both float32 (TF32), or int8/uint8 a with int8 b (INT8)")


def _formats(a_dtype, b_dtype):
    """A's and B's formats, from the value types of the format table."""
    fa, fb = format_of(a_dtype), format_of(b_dtype)
    if fa is None or fb not in INPUT_FORMATS[fa].b_formats:
        raise TypeError(f"matmul takes {_ACCEPTED}; not a {np.dtype(a_dtype)}, "
                        f"b {np.dtype(b_dtype)}")
    return fa, fb


def matmul_op(a_dtype, b_dtype, *, out=None, saturate=False, instr=None, promote=None) -> Op:
    """The :class:`tcore.numerics.Op` :func:`matmul` computes for ``a`` and ``b`` of these dtypes
    and these keywords; TypeError, ValueError (:class:`tcore.numerics.UnsupportedOp`) as it."""
    fa, fb = _formats(a_dtype, b_dtype)
    if out not in (None, "fp16"):
        raise ValueError(f"out must be None (FP32, S32 for INT8) or 'fp16', not {out!r}")
    return Op(fa, fb, out or INPUT_FORMATS[fa].outputs[0], saturate, instr=instr, promote=promote)


def matmul(a, b, c=None, *, out=None, arch="hopper", instr=None, saturate=False, promote=None,
           engine=None, workers=None, split_k=None, alpha=None, beta=None, bias=None,
           scale_a=None, scale_b=None, out_dtype=None):
    """D = A·B + C as an NVIDIA tensor core computes it (default: an H200).

    Parameters
    ----------
    a : array (..., M, K)
        float16, ml_dtypes bfloat16, float8_e4m3fn or float8_e5m2, float32 (read as TF32: its
        13 low fraction bits are ignored, not rounded), int8 or uint8.
    b : array (..., K, N)
        The same format as ``a`` (FP8: either E4M3 or E5M2; INT8: int8).
    c : array (..., M, N) or None
        The addend, zeros if None: float32 (float16 when ``out="fp16"``), int32 for INT8.
    out : None or "fp16"
        The accumulator: None is FP32 (S32 for INT8); ``"fp16"`` rounds each step once to
        nearest-even FP16 (FP16 and FP8 inputs only).
    arch : "hopper", "ampere" or "volta"
        FP16/BF16 for all three; TF32, FP8 and INT8 are modelled for Hopper only.
    instr : None, "mma" or "wgmma"
        The instruction modelled; None is the one the kind was measured through
        (:func:`tcore.golden.mma.instr_of`: ``"wgmma"`` for FP8, ``"mma"`` otherwise).  The two give
        the same bits for FP16, BF16, TF32 and INT8 (measured); FP8 requires ``"wgmma"``
        (``mma.sync`` FP8 is a compiler emulation on sm_90, not modelled).
    saturate : bool
        INT8: ``.satfinite``, the sum clamped to the int32 range after each 32-wide K step
        (as chained instructions do); otherwise it wraps modulo 2**32.
    promote : None or 128
        FP8 with FP32 output: cuBLASLt's default accumulation (``torch._scaled_mm`` without
        fast accumulation): K chunks of 128, each a wgmma chain from zero, added in K order
        into FP32 with round-to-nearest-even, then C added once, the same way.
    engine, workers
        As in :func:`tcore.golden.mma.mma`: compiled kernels (default where numba imports) or the
        NumPy twin, the same bits; output tiles spread over ``workers`` threads (default: every
        core).

    split_k, alpha, beta, bias, scale_a, scale_b, out_dtype
        A library GEMM (cuBLAS / cuBLASLt as PyTorch calls them, :mod:`tcore.golden.cublas`): any of
        these given, the chain starts from zero and ``c`` is the epilogue's C instead of the
        accumulator's start.  ``split_k``: the split count S of a split-K kernel (FP16/BF16;
        None or 1: no split; 1 <= S <= ceil(K/64)).  ``alpha`` (default 1), ``beta`` (default 1
        with ``c``): ``torch.addmm``'s; ``bias`` (N,): ``F.linear``'s or ``_scaled_mm``'s 1-D
        bias.  ``scale_a``, ``scale_b`` (FP8 only): one value each (tensor-wise: a Python
        number or 0-d value is rounded once to FP32, as ``torch.tensor(0.3)`` is; a size-1
        array must be float32) or float32 (M, 1) and (1, N) arrays (row-wise).  ``out_dtype``: float32 (default), float16 or bfloat16, one
        round to nearest-even of the FP32 result at the points the rules say.  The rules, as
        measured: :mod:`tcore.golden.cublas`, ``docs/numerics.md``; what they do not pin down
        raises :class:`tcore.golden.cublas.NotModelled` (a ValueError).

    K longer than the instruction's is the chain rule: steps of the block width (16 for
    FP16/BF16, 32 for FP8, 8 for TF32 on Hopper), each step's rounded result the next one's C.
    Batch dimensions broadcast as in ``numpy.matmul``.

    Returns
    -------
    float32, float16 or int32 array of shape broadcast(...) + (M, N); given ``dask.array``
    operands, a lazy ``dask.array`` of it, chunked over M and N, the whole K in each block
    (:mod:`tcore.golden.distributed`).

    Example
    -------
    One FP16 product of 1 and three of 2**-24: the exact sum is 1 + 3 * 2**-24; the H200
    truncates the sum toward zero to FP32, so D is 1 + 2**-23, where a float64 (or a correctly
    rounded FP32) result differs:

    >>> import numpy as np; from golden import matmul
    >>> a = np.array([[1, 2**-12, 2**-12, 2**-12]], np.float16)
    >>> float(matmul(a, a.T.copy())[0, 0])
    1.0000001192092896
    >>> float((a.astype(np.float64) @ a.T.astype(np.float64))[0, 0])
    1.0000001788139343
    """
    library = {"split_k": split_k, "alpha": alpha, "beta": beta, "bias": bias,
               "scale_a": scale_a, "scale_b": scale_b, "out_dtype": out_dtype}
    if any(v is not None for v in library.values()):
        return _library(a, b, c, arch=arch, instr=instr, promote=promote, engine=engine,
                        workers=workers, out=out, saturate=saturate, **library)
    if any(hasattr(x, "__dask_graph__") for x in (a, b, c)):      # dask: golden.distributed
        from .distributed import matmul as dask_matmul
        from .mma import check_operands
        return dask_matmul(a, b, c, serial=matmul, op_of=matmul_op, check=check_operands, out=out, arch=arch, instr=instr, saturate=saturate,
                           promote=promote, engine=engine, workers=workers)
    a, b = np.asarray(a), np.asarray(b)
    op = matmul_op(a.dtype, b.dtype, out=out, saturate=saturate, instr=instr, promote=promote)
    c_dtype = op.acc_dtype
    if a.ndim < 2 or b.ndim < 2:
        raise ValueError(f"a and b must be at least 2-D (..., rows, cols), not {a.shape}, {b.shape}")
    if c is None:
        c = np.zeros((a.shape[-2], b.shape[-1]), c_dtype)
    c = np.asarray(c)
    if c.dtype != c_dtype:
        raise TypeError(f"c must be {np.dtype(c_dtype).name} for {a.dtype} inputs with "
                        f"out={out!r}, not {c.dtype}")
    bits = mma(a.view(op.a_bits), b.view(op.b_bits), c.view(op.acc_bits), op=op, arch=arch,
               engine=engine, workers=workers)
    return bits.view(c_dtype)


def _library(a, b, c, *, arch, instr, promote, engine, workers, out, saturate, split_k, alpha,
             beta, bias, scale_a, scale_b, out_dtype):
    """tcore.golden.matmul's library GEMM: the FP32 chain from zero (split where asked), then the
    epilogue of :func:`tcore.golden.cublas.epilogue`."""
    from . import cublas
    if any(hasattr(x, "__dask_graph__") for x in (a, b, c, bias, scale_a, scale_b)):
        raise ValueError("split_k, alpha, beta, bias, scales and out_dtype take NumPy arrays, "
                         "not dask arrays")
    a, b = np.asarray(a), np.asarray(b)
    fa, fb = _formats(a.dtype, b.dtype)
    if INPUT_FORMATS[fa].integer:
        raise ValueError("split_k, alpha, beta, bias, scales and out_dtype are for floating-point "
                         "GEMMs (INT8: torch._int_mm has none of them)")
    if out is not None or saturate:
        raise ValueError("a library GEMM accumulates in FP32: out and saturate do not apply "
                         "(out_dtype is its result type)")
    if a.ndim < 2 or b.ndim < 2:
        raise ValueError(f"a and b must be at least 2-D (..., rows, cols), not {a.shape}, {b.shape}")
    fp8 = INPUT_FORMATS[fa].kind == "fp8"
    fmt_out = cublas.out_format(np.float32 if out_dtype is None else out_dtype)
    m, k = a.shape[-2:]
    n = b.shape[-1]
    if (scale_a is None) != (scale_b is None):
        raise ValueError("give both scale_a and scale_b, or neither")
    if scale_a is not None:
        if not fp8:
            raise ValueError(f"scale_a and scale_b are for FP8 inputs (torch._scaled_mm), not {a.dtype}")
        scale_a, scale_b, _ = cublas.fp8_scales(scale_a, scale_b, m, n)
    if fp8 and (c is not None or alpha is not None or beta is not None):
        raise ValueError("FP8 library GEMMs (torch._scaled_mm) take scale_a, scale_b and a "
                         "bias, not c, alpha or beta")
    if bias is not None:
        bias = np.asarray(bias)
        if bias.shape != (n,):
            raise ValueError(f"bias must be a vector of N = {n} values, not shape {bias.shape}")
        if bias.dtype not in (np.float32, np.float16, np.dtype(ml_dtypes.bfloat16)):
            raise ValueError(f"bias must be float32, float16 or bfloat16, not {bias.dtype}")
    if c is not None:
        c = np.asarray(c)
        if c.dtype not in (np.float32, np.float16, np.dtype(ml_dtypes.bfloat16)):
            raise ValueError(f"c (the epilogue's C) must be float32, float16 or bfloat16, "
                             f"not {c.dtype}")
        try:
            np.broadcast_shapes(c.shape, a.shape[:-2] + (m, n))
        except ValueError:
            raise ValueError(f"c of shape {c.shape} does not broadcast to the result "
                             f"{a.shape[:-2] + (m, n)}") from None
    s = 1 if split_k is None else split_k
    slices = cublas.split_slices(k, s, fa)
    alpha = 1.0 if alpha is None else alpha
    cublas.check_epilogue(alpha=alpha, beta=beta, c=c, bias=bias, scaled=scale_a is not None,
                          split=s > 1)
    op = Op(fa, fb, "fp32", instr=instr, promote=promote)

    def chain(lo, hi):
        aa, bb = a[..., lo:hi], b[..., lo:hi, :]
        zero = np.zeros(np.broadcast_shapes(aa.shape[:-2], bb.shape[:-2]) + (m, n), np.uint32)
        return mma(aa.view(op.a_bits), bb.view(op.b_bits), zero, op=op, arch=arch,
                   engine=engine, workers=workers).view(np.float32)

    acc = cublas.split_k_reduce(chain(lo, hi) for lo, hi in slices)
    return cublas.epilogue(acc, fmt_out, alpha=alpha, beta=beta, c=c, bias=bias,
                           scale_a=scale_a, scale_b=scale_b, split=s > 1)
