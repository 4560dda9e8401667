"""What the runner (:mod:`tcore.sim.run`) takes and gives: :class:`Operands` (the bits of A,
B, C and a 2:4 sparse A's metadata), a :class:`Batch` (an Op on its operands) and a
:class:`Result` (D and what the run measured).  The engines (:mod:`tcore.sim.core`,
:mod:`tcore.sim.gemm`, :mod:`tcore.sim.soc`) take and give them too."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tcore.numerics import Op

__all__ = ["Operands", "Batch", "Result"]


@dataclass(frozen=True)
class Operands:
    """Bit patterns of A, B and C (None: zero), either tiles (A (T, 16, K), B (T, K, 16),
    C (T, 16, 16)) or one GEMM (A (M, K), B (K, N), C (M, N)).  With ``meta`` (PTX 2:4
    metadata words) A holds a 2:4 sparse A's stored values (K / 2 of them a row)."""
    a: np.ndarray
    b: np.ndarray
    c: np.ndarray | None = None
    meta: np.ndarray | None = None

    @property
    def tiles(self) -> bool:
        """A batch of tiles (3-D operands), not one GEMM."""
        return np.ndim(self.a) == 3

    @property
    def mnk(self) -> tuple[int, int, int]:
        """M, N and the logical K (of B: a sparse A stores half of it)."""
        return np.shape(self.a)[-2], np.shape(self.b)[-1], np.shape(self.b)[-2]

    def c_or_zero(self, op: Op) -> np.ndarray:
        """C, or zeros of D's shape in the accumulator's bits."""
        if self.c is not None:
            return np.asarray(self.c, op.acc_bits)
        return np.zeros(np.shape(self.a)[:-1] + (np.shape(self.b)[-1],), op.acc_bits)


@dataclass(frozen=True)
class Batch:
    """One operation on its operands: what :func:`run_batches` takes a list of."""
    op: Op
    operands: Operands


@dataclass
class Result:
    """D's bits (C's shape) and what the run measured: ``cycles`` (the RTL's clocks; None on
    the golden model), ``beats`` (core beats: 64 FMA each, 128 logical FMA sparse), ``sim_s``
    (seconds computing, start-up excluded), ``waves`` (the kept waveform) and ``extra``
    (a path's own figures)."""
    d: np.ndarray
    cycles: int | None = None
    beats: int | None = None
    sim_s: float = 0.0
    waves: Path | None = None
    extra: dict = field(default_factory=dict)
