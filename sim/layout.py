"""The fragment layout as the RTL implements it, read out of the register file.

A 16x16 buffer holding 0, 1, 2, ... is loaded into the RTL ``FragmentBank`` on Amaranth's
simulator (one memory word per clock through its load port, as ``load_matrix_sync`` does),
and each lane's slots are read back out of the block-RAM columns where the register file says
it keeps them (:meth:`rtl.fragments.FragmentBank.locate`): the same experiment that produced
``h200_wmma_layout.txt`` on an H200.
"""

from __future__ import annotations

import copy
import functools
import json
import os
import tempfile

from amaranth.sim import Simulator

from rtl.fragments import ACCUMULATOR, LANES, MATRIX_A, MATRIX_B, SLOTS, FragmentBank

__all__ = ["rtl_layout", "HEADINGS"]

HEADINGS = {
    "matrix_a row_major": (MATRIX_A, 0), "matrix_a col_major": (MATRIX_A, 1),
    "matrix_b row_major": (MATRIX_B, 0), "matrix_b col_major": (MATRIX_B, 1),
    "accumulator mem_row_major": (ACCUMULATOR, 0), "accumulator mem_col_major": (ACCUMULATOR, 1),
}


def rtl_layout() -> dict[str, list[list[int]]]:
    """{heading: 32 lists (one per lane) of storage indices, one per slot}.

    matrix_a/matrix_b report num_elements = 16 slots (8..15 are the same registers as 0..7),
    the accumulator 8, as CUDA's ``fragment::num_elements``.

    The simulation takes seconds, so its result is kept: in this process, and in ``build/``
    under a key of the RTL sources and of this file (any edit of either simulates again).
    """
    return copy.deepcopy(_cached_layout())


@functools.lru_cache(maxsize=1)
def _cached_layout():
    from .runner import _rtl_hash, build_root

    import hashlib
    me = hashlib.sha256(open(__file__, "rb").read()).hexdigest()[:16]     # the experiment itself
    path = build_root() / "layout" / f"{_rtl_hash('layout', {'bench': me})}.json"
    if path.exists():
        try:
            return json.loads(path.read_text())
        except ValueError:          # a torn file: simulate again
            pass
    lay = _simulate_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False) as f:
        json.dump(lay, f)
    os.replace(f.name, path)
    return lay


def _simulate_layout() -> dict[str, list[list[int]]]:
    """Read the layout out of the RTL register file on Amaranth's simulator."""
    bank = FragmentBank(a_frags=1, b_frags=1, acc_frags=1)
    result = {}

    async def bench(ctx):
        for heading, (kind, col) in HEADINGS.items():
            acc = kind == ACCUMULATOR
            per_word = 4 if acc else 8          # FP32 accumulator elements, or 16-bit ones
            width = 128 // per_word
            lw = bank.load[0]
            ctx.set(lw.en, 1)
            ctx.set(lw.kind, kind)
            ctx.set(lw.col, col)
            ctx.set(lw.f16, 0)
            ctx.set(lw.frag, 0)
            for line in range(16):
                for word in range(16 // per_word):
                    first = line * 16 + word * per_word     # storage index of the word's element 0
                    ctx.set(lw.line, line)
                    ctx.set(lw.word, word)
                    ctx.set(lw.data, sum((first + e) << (width * e) for e in range(per_word)))
                    await ctx.tick()
            ctx.set(lw.en, 0)
            lanes = []
            for lane in range(LANES):
                row = []
                for slot in range(SLOTS):
                    mem, addr, off, w = bank.locate(kind, 0, lane, slot)
                    row.append((ctx.get(mem.data[addr]) >> off) & ((1 << w) - 1))
                lanes.append(row)
            result[heading] = [row if acc else row + row for row in lanes]

    sim = Simulator(bank)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return result
