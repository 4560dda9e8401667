"""``make lint``: Verilator ``--lint-only -Wall`` on the Verilog of every top-level design.

The only waivers are in ``rtl/lint/waivers.vlt``, one line of reason per class.  Exit status is
non-zero if Verilator reports anything.
"""

from __future__ import annotations

import os
import subprocess
import sys

from .runner import MULT18X18D_MODEL as MULT18X18D
from .runner import ROOT, setup_path, verilog_for

WAIVERS = ROOT / "rtl" / "lint" / "waivers.vlt"
#: PicoRV32's Verilog is linted by its own project, not here.
PICORV32_WAIVER = ROOT / "rtl" / "lint" / "picorv32.vlt"


def lint_file(path, top: str, extra=()) -> str:
    """Verilator's lint report for one Verilog file (and ``extra`` model files; empty when
    clean)."""
    setup_path()
    r = subprocess.run(["verilator", "--lint-only", "-Wall", "--quiet", str(WAIVERS),
                        *map(str, extra), str(path), "--top-module", top],
                       capture_output=True, text=True)
    report = (r.stdout + r.stderr).strip()
    if r.returncode and not report:
        report = f"verilator exited with status {r.returncode}"
    return report


def _lint_job(job) -> tuple[str, str]:
    label, name, params, extra = job
    if name == "board":
        return label, _lint_board()
    # The benches' Verilog cache: lint elaborates each design once for the tests too.
    return label, lint_file(verilog_for(name, params), name, extra)


def _lint_board() -> str:
    """The board top as the simulated board builds it (its firmware compiled), with
    PicoRV32's Verilog beside it (not ours: its file is waived whole)."""
    from tcore.sim.board.boards import BoardBuild, board_of
    from tcore.sim.board.simulate import sim_source
    path, extra = sim_source(BoardBuild(board_of("ulx3s-85f"), sim=True))()
    return lint_file(path, "board", [PICORV32_WAIVER, *extra])


def main() -> int:
    from concurrent.futures import ProcessPoolExecutor
    from tcore.rtl.designs import DESIGNS, LINT_PARAMS
    jobs = [(name, name, LINT_PARAMS[name], ()) for name in sorted(DESIGNS)]
    # The variant tcore synth builds: MULT18X18D instances instead of *.
    jobs.append(("mma4 (dsp=ecp5)", "mma4", {"dsp": "ecp5"}, (MULT18X18D,)))
    jobs.append(("board (ulx3s-85f, the simulated board's build)", "board", {}, ()))
    bad = 0
    # Elaboration is most of the time and one process each: one design per CPU.
    with ProcessPoolExecutor(max_workers=max(1, min(len(jobs), os.cpu_count() or 1))) as pool:
        for label, report in pool.map(_lint_job, jobs):
            if report:
                bad += 1
                print(f"{label}: verilator reports:\n{report}", flush=True)
            else:
                print(f"{label}: clean (verilator --lint-only -Wall)", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
