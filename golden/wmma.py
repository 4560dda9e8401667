"""WMMA on NumPy fragments: the warp-level view of the tensor core, as an H200 lays it out.

Golden twin of ``rtl/wmma.py``, and a teaching model: 32 lanes of a warp cooperatively hold a
16x16 matrix.  Each lane holds a few elements ("slots") of each fragment; which element sits in
which (lane, slot) is what NVIDIA calls the fragment layout.  It is opaque in CUDA, but an H200
was measured (``tests/data/silicon/h200_wmma_layout.txt``): for m16n16k16, with g = lane // 4
and t = lane % 4 (the PTX ISA's m16n8k16 layouts, two of them side by side):

* ``matrix_a`` slot i (0..7): row g + 8*(i in {2,3,6,7}), column 2t + (i & 1) + 8*(i >= 4);
  slots 8..15 repeat slots 0..7 (num_elements = 16, 8 distinct);
* ``matrix_b`` slot i: row 2t + (i & 1) + 8*(i in {2,3,6,7}), column g + 8*(i >= 4);
* ``accumulator`` slot i (0..7): as ``matrix_a`` (num_elements = 8).

The map itself lives in :mod:`tcore.numerics.fragments` (shared with the RTL register file), with
the other two shapes CUDA has for FP16/BF16, ``m32n8k16`` (A 32x16 with 16 distinct elements
per lane, B 16x8 with 4) and ``m8n32k16`` (its transpose); every function here takes
``shape=`` (default m16n16k16).

Memory is a flat byte array; ``ldm`` is the leading dimension in elements, as in CUDA: a
multiple of 8 for 16-bit elements and 4 for 32-bit ones, the address 256-bit (32-byte) aligned.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tcore.numerics import Op, UnsupportedOp
from tcore.numerics.fragments import ROLES, SHAPES, THREADS, dims, distinct, element_map
from tcore.numerics.formats import dtype_of

from .mma import mma

__all__ = ["ROLES", "LAYOUTS", "SHAPES", "element_map", "storage_map", "Fragment", "WmmaError",
           "fill_fragment", "load_matrix_sync", "mma_sync", "store_matrix_sync", "check_ldm"]

LAYOUTS = ("row_major", "col_major")


class WmmaError(ValueError):
    """An operation the hardware refuses: bad ldm, misaligned address, out-of-range access."""


def num_elements(kind: str) -> int:
    return 8 if kind == "accumulator" else 16


def storage_map(kind: str, layout: str, shape: str = "m16n16k16") -> np.ndarray:
    """(32, num_elements) storage index of each lane/slot in a buffer of ``layout`` holding the
    fragment's matrix (16x16, or 32x16, 16x8, 32x8 ... for the other shapes) with no padding.

    ``layout`` is ``row_major``/``col_major`` (``mem_row_major``/``mem_col_major`` for the
    accumulator are accepted too).  This is what ``h200_wmma_layout*.txt`` record.
    """
    layout = layout.removeprefix("mem_")
    if layout not in LAYOUTS:
        raise ValueError(f"Layout must be one of {LAYOUTS}, not {layout!r}")
    rc = element_map(kind, shape)
    rows, cols = dims(kind, shape)
    idx = rc[..., 0] * cols + rc[..., 1] if layout == "row_major" else rc[..., 1] * rows + rc[..., 0]
    return np.tile(idx, (1, num_elements(kind) // idx.shape[1]))


@dataclass
class Fragment:
    """A warp's fragment: ``data`` is (32 lanes, distinct slots) of bit patterns (8 distinct
    slots in m16n16k16; 16 for m32n8k16's A and m8n32k16's B, 4 for the other operand).

    ``fmt`` is the element format: fp16/bf16 for matrix_a/matrix_b, fp32/fp16 for accumulators.
    """

    kind: str
    fmt: str
    data: np.ndarray
    shape: str = "m16n16k16"

    @classmethod
    def new(cls, kind, fmt, shape="m16n16k16"):
        if kind not in ROLES:
            raise ValueError(f"Fragment role must be one of {ROLES}, not {kind!r}")
        if shape not in SHAPES:
            raise ValueError(f"WMMA shape must be one of {tuple(SHAPES)}, not {shape!r}")
        want = ("fp32", "fp16") if kind == "accumulator" else ("fp16", "bf16")
        if fmt not in want:
            raise ValueError(f"A {kind} fragment holds {' or '.join(want)}, not {fmt!r}")
        dtype = np.dtype(dtype_of(fmt))
        return cls(kind, fmt, np.zeros((THREADS, distinct(kind, shape)), dtype), shape)

    @property
    def esize(self) -> int:
        return self.data.dtype.itemsize

    @property
    def dims(self) -> tuple[int, int]:
        """(rows, columns) of the matrix the warp holds."""
        return dims(self.kind, self.shape)

    def x(self) -> np.ndarray:
        """The num_elements slots of each lane, as CUDA's ``frag.x[]`` shows them."""
        return np.tile(self.data, (1, num_elements(self.kind) // self.data.shape[1]))

    def to_matrix(self) -> np.ndarray:
        """The matrix the warp holds (16x16 in m16n16k16)."""
        m = np.zeros(self.dims, self.data.dtype)
        rc = element_map(self.kind, self.shape)
        m[rc[..., 0], rc[..., 1]] = self.data
        return m

    def from_matrix(self, m):
        m = np.asarray(m)
        if m.shape != self.dims:
            raise ValueError(f"a {self.shape} {self.kind} holds a {self.dims} matrix, not {m.shape}")
        rc = element_map(self.kind, self.shape)
        self.data[...] = m[rc[..., 0], rc[..., 1]]
        return self


def check_ldm(esize: int, addr: int, ldm: int, mem_bytes: int | None = None, lines: int = 16,
              per_line: int = 16):
    """Raise WmmaError unless ldm and addr are legal for an access of ``lines`` lines of
    ``per_line`` ``esize``-byte elements (16 x 16 in m16n16k16)."""
    step = 16 // esize          # 8 elements of 2 bytes, 4 of 4 bytes: 16 bytes
    if ldm <= 0 or ldm % step:
        raise WmmaError(f"ldm must be a positive multiple of {step} for {8 * esize}-bit elements, not {ldm}")
    if addr % 32:
        raise WmmaError(f"address must be 256-bit (32-byte) aligned, not {addr:#x}")
    if mem_bytes is not None:
        end = addr + ((lines - 1) * ldm + per_line) * esize
        if addr < 0 or end > mem_bytes:
            raise WmmaError(f"access {addr:#x}..{end:#x} is outside the {mem_bytes}-byte memory")


def _lines(frag: Fragment, layout: str) -> tuple[int, int]:
    """(lines, elements per line) of the fragment's matrix in memory of ``layout``."""
    rows, cols = frag.dims
    return (rows, cols) if layout == "row_major" else (cols, rows)


def _addresses(esize, addr, ldm, layout, shape=(16, 16)):
    """Byte address of element (row, col) of the access, a ``shape`` (rows, cols) array."""
    r, c = np.meshgrid(np.arange(shape[0]), np.arange(shape[1]), indexing="ij")
    line, pos = (r, c) if layout == "row_major" else (c, r)
    return addr + (line * ldm + pos) * esize


def fill_fragment(frag: Fragment, value: int) -> Fragment:
    frag.data[...] = value
    return frag


def load_matrix_sync(frag: Fragment, mem: np.ndarray, addr: int, ldm: int, layout: str) -> Fragment:
    """Load the fragment's matrix (16x16 in m16n16k16) at byte ``addr`` of ``mem`` (uint8)."""
    layout = layout.removeprefix("mem_")
    check_ldm(frag.esize, addr, ldm, len(mem), *_lines(frag, layout))
    where = _addresses(frag.esize, addr, ldm, layout, frag.dims)
    raw = np.stack([mem[where + b] for b in range(frag.esize)], axis=-1).copy()
    frag.from_matrix(raw.view(frag.data.dtype)[..., 0])
    return frag


def store_matrix_sync(mem: np.ndarray, addr: int, frag: Fragment, ldm: int, layout: str):
    """Store an accumulator fragment's matrix (16x16 in m16n16k16) at byte ``addr`` of ``mem``."""
    if frag.kind != "accumulator":
        raise WmmaError("store_matrix_sync stores accumulator fragments only")
    layout = layout.removeprefix("mem_")
    check_ldm(frag.esize, addr, ldm, len(mem), *_lines(frag, layout))
    where = _addresses(frag.esize, addr, ldm, layout, frag.dims)
    raw = frag.to_matrix()[..., None].view(np.uint8)
    for b in range(frag.esize):
        mem[where + b] = raw[..., b]


def mma_sync(d: Fragment, a: Fragment, b: Fragment, c: Fragment, arch="hopper") -> Fragment:
    """d = a·b + c with the tensor core's arithmetic (one K=16 block fused step on Hopper)."""
    if (a.kind, b.kind, c.kind, d.kind) != ("matrix_a", "matrix_b", "accumulator", "accumulator"):
        raise WmmaError("mma_sync takes (accumulator, matrix_a, matrix_b, accumulator)")
    if len({a.shape, b.shape, c.shape, d.shape}) != 1:
        raise WmmaError(f"mma_sync's fragments must have one shape, not "
                        f"{a.shape}, {b.shape}, {c.shape}, {d.shape}")
    if a.fmt != b.fmt or c.fmt != d.fmt:
        raise WmmaError("a and b, and c and d, must have the same element format")
    try:
        op = Op(a.fmt, b.fmt, d.fmt)
    except UnsupportedOp as e:
        raise WmmaError(str(e)) from None
    d.from_matrix(mma(a.to_matrix(), b.to_matrix(), c.to_matrix(), op=op, arch=arch))
    return d
