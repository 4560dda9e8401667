"""The simulated board: the board top (the same RTL and firmware as a bitstream, with the
simulation's UART divisor and frame timeout) on Verilator or Icarus under the board bench
(``tb/board_bench.py``), whose UART lines are bridged to a TCP socket on the loopback
address.  :func:`simulated_board` yields the pyserial URL of that socket, so that the host
code that talks to a board (:class:`tcore.sim.board.link.BoardLink`) talks to the simulation
unchanged.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time

from .boards import BoardBuild
from .model import board_top, picorv32_verilog, work_dir

__all__ = ["simulated_board", "sim_source"]


def sim_source(build: BoardBuild, log=None):
    """The runner's ``source`` for the board top: its Verilog (elaborated again only when the
    RTL, the firmware or the build changed) and PicoRV32's."""
    def source():
        from amaranth.back import verilog
        from tcore.sim.runner import _rtl_hash, digest
        from .firmware import build_firmware
        folder = work_dir(build)
        folder.mkdir(parents=True, exist_ok=True)
        fw = build_firmware(folder / "firmware", build.fw_bytes, build.cases(), log)
        path, stamp = folder / "board.v", folder / "board.hash"
        key = digest(_rtl_hash("board", build.top_params()), fw)[:16]
        if not (path.exists() and stamp.exists() and stamp.read_text() == key):
            if log:
                log(f"board top ({build.folder}): elaborating (Amaranth -> Verilog) ...")
            t = time.perf_counter()
            text = verilog.convert(board_top(build, log, fw), name="board", emit_src=False)
            path.write_text(text)
            stamp.write_text(key)
            if log:
                log(f"board top: elaborated in {time.perf_counter() - t:.1f} s")
        return path, [picorv32_verilog()]
    return source


def _serve(args: dict):
    """The bench process: build the simulated board and serve its hosts until the stop file
    appears (its output goes to the parent's stderr, so that the host's stdout keeps only its
    report)."""
    from tcore.sim.runner import run_bench
    from .boards import board_of
    from .firmware import SelfTestCase
    cases = args.get("selftest")
    build = BoardBuild(board_of(args["board"]), lanes=args["lanes"], sim=True,
                       selftest=None if cases is None else tuple(SelfTestCase(**c) for c in cases))
    say = (lambda line: print(f"tcore build: {line}", file=sys.stderr, flush=True))
    run_bench(args["sim"], "board", "tcore.tb.board_bench", "board_serves_the_host",
              params={"board": build.folder}, quiet=True,
              options={"divisor": build.divisor, "accept_s": args["accept_s"],
                       "stop_file": args["stop_file"]},
              files={"progress": args["port_file"]}, source=sim_source(build, say))


@contextlib.contextmanager
def simulated_board(build: BoardBuild, *, sim: str = "verilator", accept_s: float = 600.0):
    """Build and start the simulated board (in a process of its own); yield its
    ``socket://`` URL, which hosts may open one after another.  The simulation ends when the
    context ends (after the connection of the moment closes); a failed bench is a
    :class:`tcore.sim.runner.SimError` on the way out."""
    import json
    import subprocess
    from tcore.sim.runner import SimError
    import dataclasses
    build = build if build.sim else build.for_sim()
    folder = work_dir(build)
    folder.mkdir(parents=True, exist_ok=True)
    tag = f"{os.getpid()}-{os.urandom(3).hex()}"
    port_file, stop_file = folder / f"port-{tag}.txt", folder / f"stop-{tag}"
    args = {"board": build.board.name, "lanes": build.lanes, "sim": sim, "accept_s": accept_s,
            "port_file": str(port_file), "stop_file": str(stop_file),
            "selftest": None if build.selftest is None else [dataclasses.asdict(c) for c in build.selftest]}
    proc = subprocess.Popen([sys.executable, "-m", "tcore.sim.board.simulate", json.dumps(args)],
                            stdout=2, stderr=2, stdin=subprocess.DEVNULL)   # fd 2: stderr
    port = None
    try:
        while port is None:
            if proc.poll() is not None:
                raise SimError(f"the simulated board stopped before it listened (exit {proc.returncode})")
            text = port_file.read_text().strip() if port_file.exists() else ""
            if text:
                port = int(text)
            else:
                time.sleep(0.1)
        yield f"socket://127.0.0.1:{port}"
    finally:
        stop_file.touch()                 # the bench ends at its next wait for a host
        try:
            proc.wait(timeout=accept_s + 60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        port_file.unlink(missing_ok=True)
        stop_file.unlink(missing_ok=True)
    if proc.returncode:
        raise SimError(f"the board bench failed (exit {proc.returncode}); its log is in "
                       f"{folder.parent.parent}/verilator-board-board{build.folder}/")


if __name__ == "__main__":
    import json
    _serve(json.loads(sys.argv[1]))
