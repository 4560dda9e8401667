"""The H200's WMMA fragment layout (m16n16k16) and the register-file organisation it allows.

One home for the map that both the golden model (:mod:`tcore.golden.wmma`) and the RTL register
file (:mod:`tcore.rtl.fragments`) need; it imports nothing of the project.

The layout (measured, ``tests/data/silicon/h200_wmma_layout.txt``), with g = lane // 4 and
t = lane % 4:

* ``matrix_a`` slot i (0..7): row g + 8*(i in {2,3,6,7}), column 2t + (i & 1) + 8*(i >= 4);
* ``matrix_b`` slot i: row 2t + (i & 1) + 8*(i in {2,3,6,7}), column g + 8*(i >= 4);
* ``accumulator``: as ``matrix_a``.

The fact a register file uses: every 4x4 block of a fragment is held by exactly 8 lanes, two
elements each.  For block (R, C) (block row R, block column C, 0..3 each) the lanes are the
*lane group* q = 2*lane[4] + lane[1], and a lane's *position* in its group is
l = 2*lane[3:2] + lane[0]:

* ``matrix_a``/``accumulator``: q = 2*(R % 2) + C % 2; the lane at position l holds row
  l // 2 of the block, columns 2*(l % 2) and 2*(l % 2) + 1 (its *half* 0 and 1) in slots
  4*(C // 2) + 2*(R // 2) + half;
* ``matrix_b``: q = 2*(C % 2) + R % 2; the lane at position l holds column l // 2 of the
  block, rows 2*(l % 2) and 2*(l % 2) + 1, in slots 4*(C // 2) + 2*(R // 2) + half.

So a register file with one *entry* per block (16 per fragment) and one *column* per lane
position (8 columns of two elements) gives the core a 4x4 block in one read of one entry.

The other two WMMA shapes (measured, ``tests/data/silicon/h200_wmma_layouts_all_shapes.txt``)
are made of the same pieces:

* ``m32n8k16``: A (32x16) is two m16n16k16 A fragments one above the other (slots 0..7 rows
  0..15, slots 8..15 rows 16..31: 16 distinct elements per lane); B (16x8) is the left half of
  an m16n16k16 B (slots 0..3, repeated four times); the accumulator (32x8) holds rows 0..15 in
  slots 0..3 and rows 16..31 in slots 4..7, each as the left half of an m16n16k16 accumulator.
* ``m8n32k16`` is m32n8k16 transposed: its A, B and accumulator have exactly the lanes and
  slots of m32n8k16's B, A and accumulator transposed (D^T = B^T A^T), row-major for
  column-major, in every section of the measured file.

So every element of the other shapes has a place in a 16x16 fragment of the register file
(:func:`shape_place`): the lane that holds it there is the lane that holds it in the shape,
and the slot is the same (plus 8 in the second fragment of a 32x16 pair).
"""

from __future__ import annotations

import numpy as np

__all__ = ["ROLES", "THREADS", "SLOTS", "BLOCKS", "COLUMNS", "element_map", "lane_of",
           "position_of", "group_of", "block_place", "skew", "element_of"]

ROLES = ("matrix_a", "matrix_b", "accumulator")
SHAPES = {"m16n16k16": (16, 16, 16), "m32n8k16": (32, 8, 16), "m8n32k16": (8, 32, 16)}
#: A warp's threads (CUDA names a thread's index in its warp its lane: ``lane_of``), and the
#: distinct slots each holds (matrix fragments repeat them as 8..15).  Not the core's lanes.
THREADS, SLOTS = 32, 8
BLOCKS = 16                 # 4x4 blocks of a 16x16 fragment: register-file entries
COLUMNS = 8                 # lane positions in a group: register-file columns


def _check(kind):
    if kind not in ROLES:
        raise ValueError(f"Fragment role must be one of {ROLES}, not {kind!r}")


def _check_shape(shape):
    if shape not in SHAPES:
        raise ValueError(f"WMMA shape must be one of {tuple(SHAPES)}, not {shape!r}")


def dims(kind: str, shape: str = "m16n16k16") -> tuple[int, int]:
    """(rows, columns) of a ``kind`` fragment of ``shape``: A is MxK, B KxN, C/D MxN."""
    _check(kind)
    _check_shape(shape)
    m, n, k = SHAPES[shape]
    return {"matrix_a": (m, k), "matrix_b": (k, n), "accumulator": (m, n)}[kind]


def distinct(kind: str, shape: str = "m16n16k16") -> int:
    """Distinct elements per lane: rows * columns / 32 (16, 8 or 4)."""
    r, c = dims(kind, shape)
    return r * c // THREADS


def element_map(kind: str, shape: str = "m16n16k16") -> np.ndarray:
    """(32, distinct, 2) int array: the (row, col) each lane holds in each distinct slot."""
    _check(kind)
    _check_shape(shape)
    if shape == "m32n8k16":
        base = element_map(kind)
        if kind == "matrix_b":                      # the left half: slots 0..3
            return base[:, :4].copy()
        if kind == "matrix_a":                      # two fragments, one above the other
            hi = base + np.array([16, 0])
            return np.concatenate([base, hi], axis=1)
        left = base[:, :4]                          # accumulator: rows 16..31 in slots 4..7
        return np.concatenate([left, left + np.array([16, 0])], axis=1)
    if shape == "m8n32k16":                         # m32n8k16 transposed, A and B swapped
        other = {"matrix_a": "matrix_b", "matrix_b": "matrix_a"}.get(kind, kind)
        return element_map(other, "m32n8k16")[..., ::-1].copy()
    lane = np.arange(THREADS)[:, None]
    i = np.arange(SLOTS)[None, :]
    g, t = lane // 4, lane % 4
    hi_row = np.isin(i, (2, 3, 6, 7)) * 8       # the same for all three kinds
    hi_col = (i >= 4) * 8
    if kind == "matrix_b":
        row, col = 2 * t + (i & 1) + hi_row, g + hi_col
    else:
        row, col = g + hi_row, 2 * t + (i & 1) + hi_col
    return np.stack(np.broadcast_arrays(row, col), axis=-1)


def group_of(kind: str, br: int, bc: int) -> int:
    """The lane group q that holds block (br, bc)."""
    _check(kind)
    if kind == "matrix_b":
        return 2 * (bc % 2) + br % 2
    return 2 * (br % 2) + bc % 2


def lane_of(q: int, l: int) -> int:
    """The lane at position ``l`` (0..7) of group ``q`` (0..3)."""
    return 16 * (q >> 1) + 4 * (l >> 1) + 2 * (q & 1) + (l & 1)


def position_of(lane: int) -> tuple[int, int]:
    """(q, l) of a lane."""
    return 2 * (lane >> 4 & 1) + (lane >> 1 & 1), 2 * (lane >> 2 & 3) + (lane & 1)


def block_place(kind: str, row: int, col: int) -> tuple[int, int, int]:
    """(entry, column, half) of element (row, col): entry = 4 * block row + block column,
    column = the lane position l that holds it, half = which of the lane's two elements."""
    _check(kind)
    br, bc, r, c = row // 4, col // 4, row % 4, col % 4
    if kind == "matrix_b":
        column, half = 2 * c + r // 2, r % 2
    else:
        column, half = 2 * r + c // 2, c % 2
    return 4 * br + bc, column, half


def element_of(kind: str, entry: int, column: int, half: int) -> tuple[int, int]:
    """The inverse of :func:`block_place`: (row, col) of a register-file element."""
    _check(kind)
    br, bc = divmod(entry, 4)
    if kind == "matrix_b":
        r, c = 2 * (column % 2) + half, column // 2
    else:
        r, c = column // 2, 2 * (column % 2) + half
    return 4 * br + r, 4 * bc + c


def slot_of(kind: str, entry: int, half: int) -> int:
    """The slot (0..7) in which a lane holds ``half`` of block ``entry``."""
    _check(kind)
    br, bc = divmod(entry, 4)
    return 4 * (bc // 2) + 2 * (br // 2) + half


def lane_slot(kind: str, entry: int, column: int, half: int) -> tuple[int, int]:
    """(lane, slot) that holds a register-file element."""
    br, bc = divmod(entry, 4)
    return lane_of(group_of(kind, br, bc), column), slot_of(kind, entry, half)


def shape_place(shape: str, kind: str, row: int, col: int) -> tuple[str, int, int, int]:
    """Where element (row, col) of a ``kind`` fragment of ``shape`` lives in the register file:
    (kind of the 16x16 fragment, fragment offset 0 or 1, row, col in that fragment).

    m32n8k16: A row r goes to fragment r // 16 of a pair, the accumulator's rows 16..31 to
    columns 8..15; m8n32k16: the transpose of m32n8k16 (A into a B fragment, B into an A
    pair, the accumulator transposed).
    """
    r, c = dims(kind, shape)
    if not (0 <= row < r and 0 <= col < c):
        raise ValueError(f"({row}, {col}) is outside a {r}x{c} {kind} of {shape}")
    if shape == "m16n16k16":
        return kind, 0, row, col
    if shape == "m8n32k16":
        other = {"matrix_a": "matrix_b", "matrix_b": "matrix_a"}.get(kind, kind)
        return shape_place("m32n8k16", other, col, row)
    if kind == "matrix_a":
        return kind, row // 16, row % 16, col
    if kind == "matrix_b":
        return kind, 0, row, col
    return kind, 0, row % 16, col + 8 * (row // 16)


def skew(kind: str, entry: int) -> int:
    """The column skew of an entry: physical column = logical column XOR skew.

    skew = q with its two bits swapped (q the entry's lane group): 2 * (block column % 2) +
    block row % 2 for A and accumulators, 2 * (block row % 2) + block column % 2 for B.  Then
    the two entries that one 128-bit memory word of 8 16-bit elements touches (a row-major word
    spans two blocks side by side, a column-major word two blocks one above the other) use
    disjoint physical columns, for A, B and FP16 accumulators, row- and column-major alike:
    every word writes in one clock.  (The word's two entries differ in one bit of q; that bit
    flips the bit of the column that the word's line does not already fix.)
    """
    br, bc = divmod(entry, 4)
    q = group_of(kind, br, bc)
    return 2 * (q & 1) + (q >> 1)


__all__ += ["slot_of", "lane_slot", "SHAPES", "dims", "distinct", "shape_place"]
