"""The fragment layout as the RTL implements it, read out of the register file.

A buffer holding 0, 1, 2, ... (16x16, or the other shapes' 32x16, 16x8, 32x8, ...) is loaded
into the RTL ``FragmentBank`` on Amaranth's simulator (one memory word per clock through its
load port, as ``load_matrix_sync`` does: the port's own translation of the other shapes'
words included), and each lane's slots are read back out of the block-RAM columns where the
register file says it keeps them (:meth:`tcore.rtl.fragments.FragmentBank.locate`): the same
experiment that produced ``h200_wmma_layout*.txt`` on an H200.
"""

from __future__ import annotations

import copy
import functools
import json
import os
import tempfile

from amaranth.sim import Simulator

from tcore.numerics.fragments import SHAPES, dims
from tcore.rtl.fragments import ACCUMULATOR, THREADS, MATRIX_A, MATRIX_B, FragmentBank, Shape

__all__ = ["rtl_layout", "HEADINGS", "SHAPES", "NOTE"]

# (kind, column-major, FP16 accumulator) of each section
HEADINGS = {
    "matrix_a row_major": (MATRIX_A, 0, 0), "matrix_a col_major": (MATRIX_A, 1, 0),
    "matrix_b row_major": (MATRIX_B, 0, 0), "matrix_b col_major": (MATRIX_B, 1, 0),
    "accumulator mem_row_major": (ACCUMULATOR, 0, 0),
    "accumulator mem_col_major": (ACCUMULATOR, 1, 0),
}
# The sections of ``h200_wmma_layouts_all_shapes.txt``: the accumulator once per element type.
_SHAPE_SECTIONS = {
    **{h: v for h, v in HEADINGS.items() if not h.startswith("accumulator")},
    "accumulator(float) mem_row_major": (ACCUMULATOR, 0, 0),
    "accumulator(float) mem_col_major": (ACCUMULATOR, 1, 0),
    "accumulator(half) mem_row_major": (ACCUMULATOR, 0, 1),
    "accumulator(half) mem_col_major": (ACCUMULATOR, 1, 1),
}
# The text after ``num_elements=N`` in each file's headings.
NOTE = {None: "(value = storage index in the 16x16 buffer)",
        "shape": "(value = storage index; ldm = row length for row-major, column length for "
                 "col-major)"}
_SHAPE_CODE = {"m16n16k16": Shape.M16N16K16, "m32n8k16": Shape.M32N8K16, "m8n32k16": Shape.M8N32K16}


def sections(shape: str | None):
    """{heading: (kind, col, f16)}: the six m16n16k16 sections without ``shape`` (the headings
    of ``h200_wmma_layout.txt``), else the shape's eight (of the all-shapes file)."""
    if shape is None:
        return HEADINGS
    if shape not in SHAPES:
        raise ValueError(f"WMMA shape must be one of {tuple(SHAPES)}, not {shape!r}")
    return {f"{shape} {h}": v for h, v in _SHAPE_SECTIONS.items()}


def rtl_layout(shape: str | None = None) -> dict[str, list[list[int]]]:
    """{heading: 32 lists (one per lane) of storage indices, one per slot}.

    matrix_a/matrix_b report num_elements = 16 slots (in m16n16k16, 8..15 are the same
    registers as 0..7), the accumulator 8, as CUDA's ``fragment::num_elements``.  ``shape``
    (m16n16k16, m32n8k16 or m8n32k16) gives the sections of the all-shapes file; without it,
    those of ``h200_wmma_layout.txt``.

    The simulation takes seconds, so its result is kept: in this process, and in ``build/``
    under a key of the RTL sources and of this file (any edit of either simulates again).
    """
    sections(shape)                 # a bad shape raises here
    return copy.deepcopy(_cached_layout(shape))


@functools.lru_cache(maxsize=None)
def _cached_layout(shape):
    from .runner import _rtl_hash, build_root

    import hashlib
    me = hashlib.sha256(open(__file__, "rb").read()).hexdigest()[:16]     # the experiment itself
    path = build_root() / "layout" / f"{_rtl_hash('layout', {'bench': me, 'shape': str(shape)})}.json"
    if path.exists():
        try:
            return json.loads(path.read_text())
        except ValueError:          # a torn file: simulate again
            pass
    lay = _simulate_layout(shape)
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False) as f:
        json.dump(lay, f)
    os.replace(f.name, path)
    return lay


def _simulate_layout(shape) -> dict[str, list[list[int]]]:
    """Read the layout out of the RTL register file on Amaranth's simulator."""
    bank = FragmentBank(a_frags=2, b_frags=1, acc_frags=1)
    name = shape or "m16n16k16"
    result = {}

    async def bench(ctx):
        for heading, (kind, col, f16) in sections(shape).items():
            acc = kind == ACCUMULATOR
            width = 32 if acc and not f16 else 16
            per_word = 128 // width
            rows, cols = dims({MATRIX_A: "matrix_a", MATRIX_B: "matrix_b",
                               ACCUMULATOR: "accumulator"}[kind], name)
            lines, per_line = (cols, rows) if col else (rows, cols)
            lw = bank.load[0]
            ctx.set(lw.en, 1)
            ctx.set(lw.kind, kind)
            ctx.set(lw.mnk, _SHAPE_CODE[name])
            ctx.set(lw.col, col)
            ctx.set(lw.f16, f16)
            ctx.set(lw.frag, 0)
            for line in range(lines):
                for word in range(per_line // per_word):
                    first = line * per_line + word * per_word   # storage index of element 0
                    ctx.set(lw.line, line)
                    ctx.set(lw.word, word)
                    ctx.set(lw.data, sum((first + e) << (width * e) for e in range(per_word)))
                    await ctx.tick()
            ctx.set(lw.en, 0)
            lanes = []
            for lane in range(THREADS):
                row = []
                for slot in range(8 if acc else 16):
                    mem, addr, off, _ = bank.locate(kind, 0, lane, slot, name)
                    row.append((ctx.get(mem.data[addr]) >> off) & ((1 << width) - 1))
                lanes.append(row)
            result[heading] = lanes

    sim = Simulator(bank)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return result
