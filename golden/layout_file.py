"""Parsing the measured lane/slot dumps (``h200_wmma_layout*.txt``)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

__all__ = ["parse_layouts", "HEADINGS"]

HEADINGS = ("matrix_a row_major", "matrix_a col_major", "matrix_b row_major", "matrix_b col_major",
            "accumulator mem_row_major", "accumulator mem_col_major")


def parse_layouts(path) -> dict[str, np.ndarray]:
    """{heading: (32, num_elements) int array} for every ``# heading num_elements=N`` block.

    The heading is the text between ``#`` and ``num_elements``, e.g. ``matrix_a row_major`` or
    ``m32n8k16 accumulator(half) mem_col_major``.
    """
    out, cur, rows = {}, None, []
    for line in Path(path).read_text().splitlines():
        m = re.match(r"#\s*(.*?)\s+num_elements=(\d+)", line)
        if m:
            if cur:
                out[cur] = np.array(rows)
            cur, rows = m.group(1), []
            continue
        m = re.match(r"lane\s+(\d+):\s*(.*)", line)
        if m and cur:
            if int(m.group(1)) != len(rows):
                raise ValueError(f"{path}: lanes out of order in {cur!r}")
            rows.append([int(v) for v in m.group(2).split()])
    if cur:
        out[cur] = np.array(rows)
    return out
