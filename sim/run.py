"""The one runner: :func:`run` computes an :class:`tcore.numerics.Op` on a :class:`Build` of a
design, or on the golden model, and returns a :class:`Result`.

Every front end goes through it: ``tcore gemm`` (:mod:`tcore.sim.jobs`), ``tcore verify``
(every ``--through`` path), ``tcore benchmark`` and the tests.  What runs where follows from the
build's design:

================  =========================================================================
``mma4``          tiles straight into the core: through the beat player (``mma4play``) when
                  nothing stalls, else through the core's own ports with random stalls
``mma4play``      tiles through the beat player
``wmma``          tiles: memory -> load_matrix_sync -> mma_sync -> store_matrix_sync -> memory
``gemm``          one whole GEMM on the matmulT GEMM top (A*B, C = 0)
``soc``           whole GEMMs (C included) through the AXI SoC block, or each tile as one
``board``         one whole GEMM (C included) on a board (:class:`tcore.sim.board.boards.
                  BoardBuild`): backend ``board`` with its ``port``, or its simulated twin on
                  ``icarus`` / ``verilator``
================  =========================================================================

The backend is ``golden`` (the build is not needed: None), ``amaranth``, ``icarus`` or
``verilator``.  :func:`run_batches` runs several :class:`Batch` es (an Op and its
:class:`Operands`) in one simulator run where the path allows (the core and WMMA paths: one
start-up).  Every refusal, the build's (:meth:`Build.refusal`), a shape or a backend, is a
:class:`RunError` raised before anything is built; so is a simulation that fails.
"""

from __future__ import annotations

import numpy as np

from tcore.numerics import Op, UnsupportedOp
from tcore.rtl.designs import Build

from .batch import Batch, Operands, Result

__all__ = ["run", "run_batches", "Operands", "Batch", "Result", "RunError", "BACKENDS",
           "SIMULATORS", "PATHS", "path_build"]

BACKENDS = ("golden", "amaranth", "icarus", "verilator", "board")
#: The backends that simulate the RTL.
SIMULATORS = ("amaranth", "icarus", "verilator")
#: ``tcore verify --through``: each path's design.
PATHS = {"core": "mma4", "wmma": "wmma", "gemm": "gemm", "soc": "soc"}
#: The designs Amaranth's simulator runs (the others are too large for it).
_AMARANTH = ("mma4", "gemm")


class RunError(RuntimeError):
    """A run that cannot be made (the build does not compute the operation, the operands'
    shapes, a backend) or that failed in the simulator; one line, for the CLI."""


def path_build(through: str, *, warps: int = 1, lanes: int = 64, arch: str = "hopper") -> Build:
    """The lint preset's build of a ``--through`` path with the CLI's fields: the core of
    ``lanes`` (and generation ``arch``, the core path only), ``warps`` (the GEMM top, the SoC
    block); RunError where a field has no meaning on the path."""
    from tcore.rtl.designs import preset
    if through not in PATHS:
        raise RunError(f"--through must be one of {', '.join(PATHS)}, not {through!r}")
    if warps != 1 and through not in ("gemm", "soc"):
        raise RunError("--warps is for --through gemm or soc (the warps of those tops)")
    if arch != "hopper" and through != "core":
        raise RunError(f"--arch {arch} runs --through core (the MMA4 core built for that "
                       "generation); the other designs implement Hopper's")
    fields = {"lanes": lanes, **({"warps": warps} if through in ("gemm", "soc") else {}),
              **({"arch": arch} if through == "core" else {})}
    try:
        return preset("lint", PATHS[through]).replace(**fields)
    except ValueError as e:         # a field's refusal, in the flag's name
        raise RunError(f"--{e}") from None


def run(build: Build | None, op: Op, operands: Operands, backend: str, **kw) -> Result:
    """Compute ``op`` on ``operands`` on ``build`` (None on the golden model) on ``backend``.

    Keywords: ``arch`` (the golden model's generation; the RTL's is the build's), ``waves``
    (False, True or the waveform's name), ``progress`` (a progress bar on stderr, the GEMM
    top), ``stall`` (the probability of a stall each clock, 0..1: the core's ports, the WMMA
    unit's responses, the SoC block's AXI channels), ``seed`` (the core's stalls), ``mma`` (the
    golden model's function, e.g. a dask cluster's).
    """
    return run_batches(build, [Batch(op, operands)], backend, **kw)[0]


def run_batches(build: Build | None, batches: list[Batch], backend: str, *, arch=None,
                waves=False, progress: bool = False, stall: float = 0.0, seed: int = 0,
                mma=None, port=None, say=None, reply_s=None) -> list[Result]:
    """:func:`run` for several batches, in one simulator run where the path allows it.
    ``port``, ``say`` (a callable hearing the board's text lines) and ``reply_s`` (the time an
    answer may take; None: from the GEMM's size) are a board's."""
    if backend not in BACKENDS:
        raise RunError(f"backend must be one of {', '.join(BACKENDS)}, not {backend!r}")
    if backend == "golden":
        return [_golden(bt, arch or (build.arch if build is not None and build.design == "mma4"
                                     else "hopper"), mma) for bt in batches]
    if build is None:
        raise RunError(f"--backend {backend} simulates a design: give its Build")
    if backend == "board" and build.design != "board":
        raise RunError(f"backend board runs a board's build, not the {build.design} design")
    if arch not in (None, "hopper") and build.design != "mma4":
        raise RunError(f"--arch {arch} runs on the core (the MMA4 core built for that "
                       "generation); the other designs implement Hopper's")
    if arch not in (None, build.arch if build.design == "mma4" else "hopper"):
        build = build.replace(arch=arch)
    for bt in batches:
        _check(build, bt, backend)
    from .runner import SimError
    if build.design == "board":
        from .board.boards import BoardError
        from .board.run import run_board
        from .board.link import BoardReplyError, LinkError
        try:
            return [run_board(build, bt, backend, port=port, say=say, reply_s=reply_s)
                    for bt in batches]
        except (BoardError, BoardReplyError, LinkError, SimError) as e:
            raise RunError(str(e).splitlines()[0]) from None
    try:
        if build.design in ("mma4", "mma4play", "wmma"):
            from .core import run_tiles
            return run_tiles(build, batches, backend, waves=waves, stall=stall, seed=seed)
        if build.design == "gemm":
            from .gemm import run_gemm
            return [run_gemm(build, bt, backend, waves=waves, progress=progress)
                    for bt in batches]
        from .soc import run_soc
        return [run_soc(build, bt, backend, waves=waves, pause=stall) for bt in batches]
    except SimError as e:
        raise RunError(str(e)) from None


def _check(build: Build, bt: Batch, backend: str):
    """RunError for what ``build`` cannot run: the operation, the operands' shapes, the
    simulator."""
    op, x = bt.op, bt.operands
    why = build.refusal(op)
    if why:
        raise RunError(why)
    if backend == "amaranth" and build.design not in _AMARANTH:
        via = {d: t for t, d in PATHS.items()}.get(build.design)
        raise RunError(f"the {build.design} design{f' (--through {via})' if via else ''} runs "
                       "on icarus or verilator (it is too large for Amaranth's simulator)")
    if (x.meta is not None) != op.sparse:
        raise RunError(f"{op}: " + ("2:4 sparse operands need A's metadata" if op.sparse else
                                    "metadata given for a dense operation"))
    m, n, k = x.mnk
    step = op.k_step
    if build.design in ("mma4", "mma4play", "wmma"):
        if not x.tiles or (m, n) != (16, 16):
            raise RunError(f"the {build.design} path computes 16x16 output tiles (A T x 16 x K), "
                           f"not A {'x'.join(map(str, np.shape(x.a)))}")
    elif build.design in ("gemm", "board"):
        if x.tiles:
            raise RunError(f"the {build.design} design runs one whole GEMM (A M x K); tiles go "
                           "through the core, wmma or soc")
        if build.design == "gemm" and x.c is not None and np.any(x.c):
            raise RunError("the GEMM top computes matmulT's A*B (C = 0); C goes through the "
                           "core or the soc block")
    if min(m, n) < 16 or m % 16 or n % 16 or k < step or k % step:
        raise RunError(f"{op} on the RTL: M and N multiples of 16 and K of {step}, not "
                       f"{m}x{n}x{k}")
    if backend == "amaranth" and build.design == "gemm" and op.kind not in ("fp16", "bf16"):
        raise RunError(f"{op}: Amaranth's simulator runs FP16/BF16 GEMMs; the others run on "
                       "verilator or icarus")


def _golden(bt: Batch, arch: str, mma) -> Result:
    """The golden model's D (:func:`tcore.golden.mma`, :func:`tcore.golden.sparse.mma_sp`)."""
    import time
    op, x = bt.op, bt.operands
    try:
        op = op.on(arch)
    except UnsupportedOp as e:
        raise RunError(str(e)) from None
    c = x.c_or_zero(op)
    t = time.perf_counter()
    if op.sparse:
        from tcore.golden.sparse import SparseA, mma_sp
        sp = SparseA(x.a, x.meta, x.mnk[2], op.a)
        d = mma_sp(sp, x.b, c, in_fmt=op.a, out_fmt=op.acc, arch=arch)
    elif mma is not None:
        d = mma(x.a, x.b, c, in_fmt=op.a, out_fmt=op.acc, arch=arch)
    else:
        from tcore.golden import mma as golden_mma
        d = golden_mma(x.a, x.b, c, op=op, arch=arch)
    k = x.mnk[2]
    beats = int(np.prod(np.shape(d))) * k // (16 * op.beat_k * (2 if op.sparse else 1))
    return Result(d, None, beats, time.perf_counter() - t)
