"""A GEMM on the board: the operands laid out in its AXI memory, sent, run, D read back and
checked bit for bit against the golden model.

Layout (byte offsets from 0, each operand 16-byte aligned): A (M x K, row-major), B (K x N;
B^T, N x K, for the kinds the SoC block reads column-major: TF32, FP8, INT8), C (M x N, when
given), D (M x N).  The accumulator is FP32, FP16 or S32 (the Op's).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from tcore.numerics import Op

from . import protocol as P
from .link import BoardLink

__all__ = ["BoardGemm", "run_on_board", "layout", "op_fields", "run_fields", "golden_d"]


@dataclass
class BoardGemm:
    """What to run: bit patterns of A (M x K), B (K x N) and C (M x N, or None) and the
    operation (:class:`tcore.numerics.Op`)."""
    a: np.ndarray
    b: np.ndarray
    c: np.ndarray | None
    op: Op

    @property
    def shape(self):
        return self.a.shape[0], self.b.shape[1], self.a.shape[1]


def _align(n: int) -> int:
    return (n + 15) & ~15


def layout(g: BoardGemm) -> dict:
    """The byte offsets of A, B, C and D and the memory they need (``end``)."""
    m, n, k = g.shape
    es = g.op.a_format.bytes
    cs = np.dtype(g.op.acc_bits).itemsize
    a = 0
    b = _align(a + m * k * es)
    c = _align(b + k * n * es)
    d = _align(c + (m * n * cs if g.c is not None else 0))
    return {"a": a, "b": b, "c": c, "d": d, "end": d + m * n * cs}


def golden_d(g: BoardGemm) -> np.ndarray:
    from tcore.golden.mma import mma
    m, n, _ = g.shape
    c = g.c if g.c is not None else np.zeros((m, n), g.op.acc_bits)
    return mma(g.a, g.b, c, op=g.op)


def op_fields(op: Op) -> tuple[int, int]:
    """The SoC block's FORMAT code (A's format) and the protocol's flags of an operation, C
    aside (``B_ALT``: B the other FP8 format than A's, as the block's ``FORMAT.b_alt``)."""
    from tcore.rtl.regmap import InFormat
    flags = ((P.Flag.ACC_F16 if op.acc == "fp16" else 0) | (P.Flag.SAT if op.saturate else 0)
             | (P.Flag.B_ALT if op.b != op.a and op.kind == "fp8" else 0)
             | (P.Flag.SPARSE if op.sparse else 0))
    return InFormat[op.a.upper()].value, int(flags)


def run_fields(g: BoardGemm, lay: dict) -> dict:
    """The RUN request's fields (:data:`protocol.RUN_FIELDS`) of a GEMM laid out as ``lay``."""
    m, n, k = g.shape
    fmt, flags = op_fields(g.op)
    return {"m": m, "n": n, "k": k, "in_fmt": fmt,
            "flags": flags | (P.Flag.C_GIVEN if g.c is not None else 0),
            "a": lay["a"], "b": lay["b"], "c": lay["c"], "d": lay["d"], "lda": k,
            "ldb": k if g.op.mode_fields["b_cols"] else n, "ldc": n, "ldd": n}


def run_on_board(link: BoardLink, g: BoardGemm, *, progress=None) -> dict:
    """Send, run, read back, check.  Returns the figures and ``d`` (the board's D bits)."""
    m, n, k = g.shape
    lay = layout(g)
    b_mem = g.b.T if g.op.mode_fields["b_cols"] else g.b
    total = lay["end"]                    # bytes sent and read back, near enough
    sent = [0]

    def moved(nbytes):
        sent[0] += nbytes
        if progress:
            progress(sent[0], total)

    t0 = time.perf_counter()
    link.write(lay["a"], np.ascontiguousarray(g.a).tobytes(), moved)
    link.write(lay["b"], np.ascontiguousarray(b_mem).tobytes(), moved)
    if g.c is not None:
        link.write(lay["c"], np.ascontiguousarray(g.c).tobytes(), moved)
    t1 = time.perf_counter()
    done = link.run(**run_fields(g, lay))
    t2 = time.perf_counter()
    raw = link.read(lay["d"], m * n * np.dtype(g.op.acc_bits).itemsize, moved)
    t3 = time.perf_counter()
    d = np.frombuffer(raw, g.op.acc_bits).reshape(m, n).copy()
    want = golden_d(g)
    return {"d": d, "mismatches": int((d != want).sum()), "outputs": m * n, **done,
            "send_s": round(t1 - t0, 2), "run_s": round(t2 - t1, 2), "read_s": round(t3 - t2, 2),
            "layout": lay}

