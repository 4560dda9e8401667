"""``make lint``: Verilator ``--lint-only -Wall`` on the Verilog of every top-level design.

The only waivers are in ``rtl/lint/waivers.vlt``, one line of reason per class.  Exit status is
non-zero if Verilator reports anything.
"""

from __future__ import annotations

import subprocess
import sys

from .runner import MULT18X18D_MODEL as MULT18X18D
from .runner import ROOT, build_root, setup_path

WAIVERS = ROOT / "rtl" / "lint" / "waivers.vlt"


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


def main() -> int:
    from rtl.designs import DESIGNS, LINT_PARAMS, to_verilog

    out = build_root() / "lint"
    out.mkdir(parents=True, exist_ok=True)
    bad = 0
    jobs = [(name, name, LINT_PARAMS[name], ()) for name in sorted(DESIGNS)]
    # The variant tcore synth builds: MULT18X18D instances instead of *.
    jobs.append(("mma4 (dsp=ecp5)", "mma4", {"dsp": "ecp5"}, (MULT18X18D,)))
    for label, name, params, extra in jobs:
        v = out / f"{label.replace(' ', '_').replace('(', '').replace(')', '').replace('=', '-')}.v"
        v.write_text(to_verilog(name, **params))
        report = lint_file(v, name, extra)
        if report:
            bad += 1
            print(f"{label}: verilator reports:\n{report}")
        else:
            print(f"{label}: clean (verilator --lint-only -Wall)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
