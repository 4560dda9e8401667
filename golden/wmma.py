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

The map itself lives in :mod:`numerics.fragments` (shared with the RTL register file).

Memory is a flat byte array; ``ldm`` is the leading dimension in elements, as in CUDA: a
multiple of 8 for 16-bit elements and 4 for 32-bit ones, the address 256-bit (32-byte) aligned.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from numerics.fragments import element_map

from .mma import mma

__all__ = ["KINDS", "LAYOUTS", "element_map", "storage_map", "Fragment", "WmmaError",
           "fill_fragment", "load_matrix_sync", "mma_sync", "store_matrix_sync", "check_ldm"]

KINDS = ("matrix_a", "matrix_b", "accumulator")
LAYOUTS = ("row_major", "col_major")
LANES = 32


class WmmaError(ValueError):
    """An operation the hardware refuses: bad ldm, misaligned address, out-of-range access."""


def num_elements(kind: str) -> int:
    return 8 if kind == "accumulator" else 16


def storage_map(kind: str, layout: str) -> np.ndarray:
    """(32, num_elements) storage index of each lane/slot in a 16x16 buffer of ``layout``.

    ``layout`` is ``row_major``/``col_major`` (``mem_row_major``/``mem_col_major`` for the
    accumulator are accepted too).  This is what ``h200_wmma_layout.txt`` records.
    """
    layout = layout.removeprefix("mem_")
    if layout not in LAYOUTS:
        raise ValueError(f"Layout must be one of {LAYOUTS}, not {layout!r}")
    rc = element_map(kind)
    idx = rc[..., 0] * 16 + rc[..., 1] if layout == "row_major" else rc[..., 1] * 16 + rc[..., 0]
    return np.tile(idx, (1, num_elements(kind) // 8))


@dataclass
class Fragment:
    """A warp's fragment: ``data`` is (32 lanes, 8 distinct slots) of bit patterns.

    ``fmt`` is the element format: fp16/bf16 for matrix_a/matrix_b, fp32/fp16 for accumulators.
    """

    kind: str
    fmt: str
    data: np.ndarray

    @classmethod
    def new(cls, kind, fmt):
        if kind not in KINDS:
            raise ValueError(f"Fragment kind must be one of {KINDS}, not {kind!r}")
        want = ("fp32", "fp16") if kind == "accumulator" else ("fp16", "bf16")
        if fmt not in want:
            raise ValueError(f"A {kind} fragment holds {' or '.join(want)}, not {fmt!r}")
        dtype = np.uint32 if fmt == "fp32" else np.uint16
        return cls(kind, fmt, np.zeros((LANES, 8), dtype))

    @property
    def esize(self) -> int:
        return self.data.dtype.itemsize

    def x(self) -> np.ndarray:
        """The num_elements slots of each lane, as CUDA's ``frag.x[]`` shows them."""
        return np.tile(self.data, (1, num_elements(self.kind) // 8))

    def to_matrix(self) -> np.ndarray:
        """The 16x16 matrix the warp holds."""
        m = np.zeros((16, 16), self.data.dtype)
        rc = element_map(self.kind)
        m[rc[..., 0], rc[..., 1]] = self.data
        return m

    def from_matrix(self, m):
        rc = element_map(self.kind)
        self.data[...] = np.asarray(m)[rc[..., 0], rc[..., 1]]
        return self


def check_ldm(esize: int, addr: int, ldm: int, mem_bytes: int | None = None):
    """Raise WmmaError unless ldm and addr are legal for a 16x16 access of ``esize``-byte elements."""
    step = 16 // esize          # 8 elements of 2 bytes, 4 of 4 bytes: 16 bytes
    if ldm <= 0 or ldm % step:
        raise WmmaError(f"ldm must be a positive multiple of {step} for {8 * esize}-bit elements, not {ldm}")
    if addr % 32:
        raise WmmaError(f"address must be 256-bit (32-byte) aligned, not {addr:#x}")
    if mem_bytes is not None:
        end = addr + (15 * ldm + 16) * esize
        if addr < 0 or end > mem_bytes:
            raise WmmaError(f"access {addr:#x}..{end:#x} is outside the {mem_bytes}-byte memory")


def _addresses(esize, addr, ldm, layout):
    """Byte address of element (row, col) of the 16x16 access, (16, 16) array."""
    r, c = np.meshgrid(np.arange(16), np.arange(16), indexing="ij")
    line, pos = (r, c) if layout == "row_major" else (c, r)
    return addr + (line * ldm + pos) * esize


def fill_fragment(frag: Fragment, value: int) -> Fragment:
    frag.data[...] = value
    return frag


def load_matrix_sync(frag: Fragment, mem: np.ndarray, addr: int, ldm: int, layout: str) -> Fragment:
    """Load the 16x16 matrix at byte ``addr`` of ``mem`` (uint8) into ``frag``."""
    layout = layout.removeprefix("mem_")
    check_ldm(frag.esize, addr, ldm, len(mem))
    where = _addresses(frag.esize, addr, ldm, layout)
    raw = np.stack([mem[where + b] for b in range(frag.esize)], axis=-1).copy()
    frag.from_matrix(raw.view(frag.data.dtype)[..., 0])
    return frag


def store_matrix_sync(mem: np.ndarray, addr: int, frag: Fragment, ldm: int, layout: str):
    """Store an accumulator fragment as a 16x16 matrix at byte ``addr`` of ``mem``."""
    if frag.kind != "accumulator":
        raise WmmaError("store_matrix_sync stores accumulator fragments only")
    layout = layout.removeprefix("mem_")
    check_ldm(frag.esize, addr, ldm, len(mem))
    where = _addresses(frag.esize, addr, ldm, layout)
    raw = frag.to_matrix()[..., None].view(np.uint8)
    for b in range(frag.esize):
        mem[where + b] = raw[..., b]


def mma_sync(d: Fragment, a: Fragment, b: Fragment, c: Fragment, arch="hopper") -> Fragment:
    """d = a·b + c with the tensor core's arithmetic (one 16x16x16 block fused step on Hopper)."""
    if (a.kind, b.kind, c.kind, d.kind) != ("matrix_a", "matrix_b", "accumulator", "accumulator"):
        raise WmmaError("mma_sync takes (accumulator, matrix_a, matrix_b, accumulator)")
    if a.fmt != b.fmt or c.fmt != d.fmt:
        raise WmmaError("a and b, and c and d, must have the same element format")
    if a.fmt == "bf16" and d.fmt == "fp16":
        raise WmmaError("BF16 inputs with an FP16 accumulator is not a WMMA combination")
    d.from_matrix(mma(a.to_matrix(), b.to_matrix(), c.to_matrix(), in_fmt=a.fmt, out_fmt=d.fmt,
                      arch=arch))
    return d
