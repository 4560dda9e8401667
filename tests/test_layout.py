"""The fragment layout: golden formulas and the RTL bank against the H200's measured dumps."""

import json

import numpy as np
import pytest

from golden.layout_file import HEADINGS, parse_layouts
from golden.wmma import storage_map
from sim.cli import main

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
