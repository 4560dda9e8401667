"""The H200's WMMA fragment layout (m16n16k16) and the register-file organisation it allows.

One home for the map that both the golden model (:mod:`golden.wmma`) and the RTL register
file (:mod:`rtl.fragments`) need; it imports nothing of the project.

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
"""

from __future__ import annotations

import numpy as np

__all__ = ["KINDS", "LANES", "SLOTS", "BLOCKS", "COLUMNS", "element_map", "lane_of",
           "position_of", "group_of", "block_place", "skew", "element_of"]

KINDS = ("matrix_a", "matrix_b", "accumulator")
LANES, SLOTS = 32, 8        # 8 distinct slots per lane (matrix fragments repeat them as 8..15)
BLOCKS = 16                 # 4x4 blocks of a 16x16 fragment: register-file entries
COLUMNS = 8                 # lane positions in a group: register-file columns


def _check(kind):
    if kind not in KINDS:
        raise ValueError(f"Fragment kind must be one of {KINDS}, not {kind!r}")


def element_map(kind: str) -> np.ndarray:
    """(32, 8, 2) int array: the (row, col) each lane holds in each distinct slot."""
    _check(kind)
    lane = np.arange(LANES)[:, None]
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


__all__ += ["slot_of", "lane_slot"]
