"""``make lint``: Verilator ``--lint-only -Wall`` on the Verilog of every top-level design.

The only waivers are in ``rtl/lint/waivers.vlt``, one line of reason per class.  Exit status is
non-zero if Verilator reports anything.
"""

from __future__ import annotations

import subprocess
import sys

from .runner import ROOT, build_root, setup_path

WAIVERS = ROOT / "rtl" / "lint" / "waivers.vlt"


def lint_file(path, top: str) -> str:
    """Verilator's lint report for one Verilog file (empty when clean)."""
    setup_path()
    r = subprocess.run(["verilator", "--lint-only", "-Wall", "--quiet", str(WAIVERS), str(path),
                        "--top-module", top], capture_output=True, text=True)
    report = (r.stdout + r.stderr).strip()
    if r.returncode and not report:
        report = f"verilator exited with status {r.returncode}"
    return report


def main() -> int:
    from rtl.designs import DESIGNS, LINT_PARAMS, to_verilog

    out = build_root() / "lint"
    out.mkdir(parents=True, exist_ok=True)
    bad = 0
    for name in sorted(DESIGNS):
        v = out / f"{name}.v"
        v.write_text(to_verilog(name, **LINT_PARAMS[name]))
        report = lint_file(v, name)
        if report:
            bad += 1
            print(f"{name}: verilator reports:\n{report}")
        else:
            print(f"{name}: clean (verilator --lint-only -Wall)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
