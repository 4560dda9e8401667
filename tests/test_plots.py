"""The pictures: ownership data against the H200 layout file, and both plots render."""

import numpy as np
import pytest

from tcore.golden.layout_file import parse_layouts
from tcore.sim.cli import main
from tcore.sim.plots import accumulation_errors, ownership

from .conftest import SILICON


def test_ownership_map_is_the_h200_layout():
    """Each element of each fragment is held by exactly one lane; the lane is the H200's."""
    from tcore.sim.layout import rtl_layout
    lay = rtl_layout()
    h200 = parse_layouts(SILICON / "h200_wmma_layout.txt")
    for heading in lay:
        lane_of, slot_of = ownership(lay, heading)
        assert (lane_of >= 0).all() and (slot_of >= 0).all(), heading
        col = "col_major" in heading
        for lane, slots in enumerate(h200[heading]):
            for slot, idx in enumerate(slots[:8]):
                r, c = (idx % 16, idx // 16) if col else (idx // 16, idx % 16)
                assert lane_of[r, c] == lane and slot_of[r, c] == slot, (heading, lane, slot)
        # 32 lanes x 8 slots cover the 256 elements once.
        assert sorted(np.bincount(lane_of.ravel(), minlength=32)) == [8] * 32


def test_fp16_accumulation_loses_to_fp32():
    e = accumulation_errors(ks=[16, 1024], m=16, n=16)
    for dist in e:
        # FP16 output is worse at every K, and the gap stays over 10x at K = 1024.
        assert all(f16 > 10 * f32 for f16, f32 in zip(e[dist]["fp16"], e[dist]["fp32"]))
        assert e[dist]["fp16"][1] > e[dist]["fp16"][0]


@pytest.mark.parametrize("what", ["layout", "accumulation"])
def test_plot_writes_a_png(what, tmp_path, capsys):
    out = tmp_path / f"{what}.png"
    assert main(["plot", what, "-o", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 20000
