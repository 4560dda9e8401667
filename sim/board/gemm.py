"""A GEMM on the board: the operands laid out in its AXI memory, sent, run, D read back and
checked bit for bit against the golden model.

Layout (byte offsets from 0, each operand 16-byte aligned): A (M x K, row-major), B (K x N;
B^T, N x K, for the kinds the SoC block reads column-major: TF32, FP8, INT8), C (M x N, when
given), D (M x N).  The accumulator is FP32, FP16 or S32 (``out_fmt``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from numerics.formats import INPUT_FORMATS, OUTPUT_BITS

from . import protocol as P
from .link import BoardLink

__all__ = ["BoardGemm", "run_on_board", "layout"]


@dataclass
class BoardGemm:
    """What to run: bit patterns of A (M x K), B (K x N) and C (M x N, or None) and the
    kind."""
    a: np.ndarray
    b: np.ndarray
    c: np.ndarray | None
    in_fmt: str
    b_fmt: str
    out_fmt: str
    saturate: bool = False

    @property
    def shape(self):
        return self.a.shape[0], self.b.shape[1], self.a.shape[1]


def _align(n: int) -> int:
    return (n + 15) & ~15


def layout(g: BoardGemm) -> dict:
    """The byte offsets of A, B, C and D and the memory they need (``end``)."""
    m, n, k = g.shape
    es = INPUT_FORMATS[g.in_fmt].bytes
    cs = OUTPUT_BITS[g.out_fmt] // 8
    a = 0
    b = _align(a + m * k * es)
    c = _align(b + k * n * es)
    d = _align(c + (m * n * cs if g.c is not None else 0))
    return {"a": a, "b": b, "c": c, "d": d, "end": d + m * n * cs}


def golden_d(g: BoardGemm) -> np.ndarray:
    from golden.mma import instr_of, mma
    m, n, _ = g.shape
    c = g.c if g.c is not None else np.zeros((m, n), np.uint16 if g.out_fmt == "fp16" else np.uint32)
    return mma(g.a, g.b, c, in_fmt=g.in_fmt, b_fmt=g.b_fmt, out_fmt=g.out_fmt,
               instr=instr_of(g.in_fmt), saturate=g.saturate)


def run_on_board(link: BoardLink, g: BoardGemm, *, progress=None) -> dict:
    """Send, run, read back, check.  Returns the figures and ``d`` (the board's D bits)."""
    from rtl.regmap import InFormat
    m, n, k = g.shape
    lay = layout(g)
    fmt = INPUT_FORMATS[g.in_fmt]
    b_mem = g.b.T if fmt.b_cols else g.b
    flags = ((P.Flag.C_GIVEN if g.c is not None else 0) | (P.Flag.ACC_F16 if g.out_fmt == "fp16" else 0)
             | (P.Flag.B_ALT if g.b_fmt != g.in_fmt and fmt.kind == "fp8" else 0)
             | (P.Flag.SAT if g.saturate else 0))
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
    done = link.run(m=m, n=n, k=k, in_fmt=InFormat[g.in_fmt.upper()].value, flags=int(flags),
                    a=lay["a"], b=lay["b"], c=lay["c"], d=lay["d"], lda=k,
                    ldb=k if fmt.b_cols else n, ldc=n, ldd=n)
    t2 = time.perf_counter()
    cs = OUTPUT_BITS[g.out_fmt] // 8
    raw = link.read(lay["d"], m * n * cs, moved)
    t3 = time.perf_counter()
    d = np.frombuffer(raw, np.uint16 if cs == 2 else np.uint32).reshape(m, n).copy()
    want = golden_d(g)
    return {"d": d, "mismatches": int((d != want).sum()), "outputs": m * n, **done,
            "send_s": round(t1 - t0, 2), "run_s": round(t2 - t1, 2), "read_s": round(t3 - t2, 2),
            "layout": lay}
