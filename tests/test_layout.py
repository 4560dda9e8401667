"""The fragment layout: golden formulas and the RTL bank against the H200's measured dumps."""

import json

import numpy as np
import pytest

from tcore.golden.layout_file import HEADINGS, parse_layouts
from tcore.golden.wmma import SHAPES, storage_map
from tcore.sim.cli import main

from .conftest import SILICON

H200 = parse_layouts(SILICON / "h200_wmma_layout.txt")
ALL_SHAPES = parse_layouts(SILICON / "h200_wmma_layouts_all_shapes.txt")


def test_file_has_the_six_kinds():
    assert tuple(H200) == HEADINGS
    assert [v.shape for v in H200.values()] == [(32, 16)] * 4 + [(32, 8)] * 2


@pytest.mark.parametrize("heading", HEADINGS)
def test_golden_layout_matches_h200(heading):
    kind, layout = heading.split()
    assert np.array_equal(storage_map(kind, layout), H200[heading])


@pytest.mark.parametrize("acc", ["float", "half"])
@pytest.mark.parametrize("layout", ["mem_row_major", "mem_col_major"])
def test_half_and_float_accumulators_share_the_layout(acc, layout):
    got = ALL_SHAPES[f"m16n16k16 accumulator({acc}) {layout}"]
    assert np.array_equal(got, storage_map("accumulator", layout))


def test_tcore_layout_json_equals_h200_file(capsys):
    assert main(["layout", "--json"]) == 0
    lay = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert list(lay) == list(HEADINGS)
    for heading in HEADINGS:
        assert len(lay[heading]) == 32
        assert np.array_equal(np.array(lay[heading]), H200[heading]), heading


def test_tcore_layout_text_is_the_h200_file(capsys):
    assert main(["layout"]) == 0
    assert capsys.readouterr().out == (SILICON / "h200_wmma_layout.txt").read_text()


SHAPE_LINES = {"m16n16k16": (0, 264), "m32n8k16": (264, 528), "m8n32k16": (528, 792)}


@pytest.mark.parametrize("heading", list(ALL_SHAPES))
def test_golden_layout_of_every_shape_matches_h200(heading):
    shape, kind, layout = heading.split()
    assert np.array_equal(storage_map(kind.split("(")[0], layout, shape), ALL_SHAPES[heading])


@pytest.mark.parametrize("shape", list(SHAPES))
def test_tcore_layout_shape_is_the_all_shapes_file_section(shape, capsys):
    """Read out of the RTL register file after loads through its port (the other shapes'
    word translation included): the measured file's section, byte for byte."""
    assert main(["layout", "--shape", shape]) == 0
    lo, hi = SHAPE_LINES[shape]
    lines = (SILICON / "h200_wmma_layouts_all_shapes.txt").read_text().splitlines(keepends=True)
    assert lines[lo].startswith(f"# {shape} ") and (hi == len(lines) or not lines[hi].startswith(f"# {shape} "))
    assert capsys.readouterr().out == "".join(lines[lo:hi])


def test_m8n32k16_is_m32n8k16_transposed():
    """The fact the register file uses for m8n32k16: each of its sections is m32n8k16's with
    A and B swapped and the layout flipped."""
    flip = {"row_major": "col_major", "col_major": "row_major",
            "mem_row_major": "mem_col_major", "mem_col_major": "mem_row_major"}
    swap = {"matrix_a": "matrix_b", "matrix_b": "matrix_a"}
    for heading, v in ALL_SHAPES.items():
        shape, kind, layout = heading.split()
        if shape == "m8n32k16":
            assert np.array_equal(v, ALL_SHAPES[f"m32n8k16 {swap.get(kind, kind)} {flip[layout]}"])
