"""matmulT: the tiled GEMM of the classic WMMA kernel, as the H200 computes it.

Golden twin of ``rtl/gemm.py``.  One warp per 16x16 tile of D: ``fill_fragment(c, 0)``; for each
16-wide step of K, ``load_matrix_sync`` the A and B tiles and ``mma_sync(c, a, b, c)``; then
``store_matrix_sync``.  Per output this is K/16 chained block fused dot-adds starting from 0,
which is :func:`tcore.golden.mma.mma` with C = 0.
"""

from __future__ import annotations

import numpy as np

from tcore.numerics import Op

from .mma import mma

__all__ = ["matmul_t", "check_gemm"]


def check_gemm(m: int, n: int, k: int, in_fmt: str = "fp16", out_fmt: str = "fp32"):
    """Raise ValueError with a clear message for a GEMM matmulT cannot run (the operation's
    refusal is :class:`tcore.numerics.UnsupportedOp`'s)."""
    for name, v in (("M", m), ("N", n), ("K", k)):
        if v < 16 or v % 16:
            raise ValueError(f"{name} must be a positive multiple of 16 (one 16x16 tile), not {v}")
    Op(in_fmt, acc=out_fmt)


def matmul_t(a, b, *, in_fmt="fp16", out_fmt="fp32", arch="hopper") -> np.ndarray:
    """D = A·B for A (M, K) and B (K, N) bit arrays, as matmulT on the tensor core."""
    a, b = np.asarray(a), np.asarray(b)
    check_gemm(a.shape[0], b.shape[1], a.shape[1], in_fmt, out_fmt)
    op = Op(in_fmt, acc=out_fmt)
    return mma(a, b, np.zeros((a.shape[0], b.shape[1]), op.acc_bits), op=op, arch=arch)
