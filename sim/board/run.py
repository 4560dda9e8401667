"""A board's run behind the one runner (:func:`tcore.sim.run.run`): :func:`run_board` sends a
GEMM to the board at a port, or to its simulated twin, through :func:`session`."""

from __future__ import annotations

import numpy as np

from .gemm import BoardGemm, layout, run_on_board
from .link import BoardLink, open_port

__all__ = ["run_board", "session"]


def session(port, build, g: BoardGemm, reply_s: float, say=None):
    """Open ``port`` (a serial device or a pyserial URL), check that a tcore board answers,
    run ``g`` (:func:`run_on_board`); the figures and the board's INFO."""
    from tcore.rtl.board import BOARD_MAGIC

    from .boards import BoardError
    link = BoardLink(open_port(port, baud=build.baud, timeout=0.2), reply_s=reply_s,
                     on_text=say or (lambda line: None))
    try:
        info = link.info()
        if info["magic"] != BOARD_MAGIC:
            raise BoardError(f"{port} answered, but not as a tcore board")
        return run_on_board(link, g), info
    finally:
        link.close()


def run_board(build, batch, backend: str, *, port=None, reply_s=None, say=None):
    """The engine :func:`tcore.sim.run.run` calls for a board's build
    (:class:`tcore.sim.board.boards.BoardBuild`): one :class:`tcore.sim.run.Batch` (A M x K,
    B K x N, C or None) on the board at ``port`` (``backend="board"``) or on its simulated
    twin (``"verilator"``, ``"icarus"``).  The :class:`tcore.sim.run.Result`'s ``extra`` holds
    the board's own figures (CPU cycles, line times, mismatches against the golden model,
    INFO); errors are the link's, the board's and the simulator's."""
    from tcore.sim.batch import Result

    from .boards import BoardError
    op, x = batch.op, batch.operands
    g = BoardGemm(np.ascontiguousarray(x.a), np.ascontiguousarray(x.b),
                  None if x.c is None else np.ascontiguousarray(x.c), op)
    m, n, k = g.shape
    need = layout(g)["end"]
    if need > build.mem_bytes:
        raise BoardError(f"{m}x{n}x{k} {op} needs {need:,} bytes of the board's memory, which "
                         f"holds {build.mem_bytes:,}")
    simulated = backend != "board"
    # An answer's time: the bytes of the largest frame at the line rate, the GEMM's clocks,
    # a margin; a simulation runs some ten thousand times slower than a board.
    reply_s = reply_s or (600.0 if simulated else 30.0 + 2 * m * n * k / build.clk_hz)
    if simulated:
        from .simulate import simulated_board
        with simulated_board(build, sim=backend) as url:
            r, info = session(url, build, g, reply_s, say)
    else:
        if not port:
            raise BoardError("a board run needs its port (a serial device or a pyserial URL)")
        r, info = session(port, build, g, reply_s, say)
    d = r.pop("d")
    return Result(d, r["cycles"], r["beats"], r["run_s"], None, extra={**r, "info": info})
