"""Running tile batches through an RTL design on a simulator.

``--through core`` sends beats straight into the MMA4 core: with no stalls asked for, through
the beat player (``mma4play``, ``tb.player_bench``: each K step's beats loaded into memory at
once, the core free-running), else through the core's own ports with a bench that drives
every clock (``tb.mma4_bench``, random valid/ready stalls); ``--through
wmma`` sends every tile through memory -> load_matrix_sync -> mma_sync -> store_matrix_sync
-> memory on the warp design (``tb.wmma_bench``).  Both chain K in 16-wide fused steps.
"""

from __future__ import annotations

import os
import tempfile

import numpy as np

from tcore.rtl.designs import LINT_PARAMS
from tcore.host.beats import Job, save_jobs

from .runner import build_dir, build_root, keep_waves, run_bench, wave_file

__all__ = ["run_core", "run_through", "run_many", "DEFAULT_PARAMS", "PATHS"]

DEFAULT_PARAMS = {}
# 256 KiB at least: a 16 x 2048 A strip and a 2048 x 16 B strip fit; larger K grows it.
WMMA_MEM_WORDS = LINT_PARAMS["wmma"]["mem_words"]


def wmma_words(k: int, esize: int = 2) -> int:
    """Memory words a 16 x K x 16 tile takes on the warp design (tb.wmma_bench.tile_image):
    A and B (``esize`` bytes each), C and D (FP32), each 32-byte aligned."""
    return (2 * 16 * k * esize + 2 * 16 * 16 * 4) // 16

PATHS = {
    "core": ("mma4", "tcore.tb.mma4_bench", DEFAULT_PARAMS),
    "player": ("mma4play", "tcore.tb.player_bench", LINT_PARAMS["mma4play"]),
    "wmma": ("wmma", "tcore.tb.wmma_bench", {**DEFAULT_PARAMS, "mem_words": WMMA_MEM_WORDS}),
}


def run_through(through: str, sim: str, a, b, c, *, in_fmt: str, out_fmt: str, b_fmt=None,
                saturate=False, waves=False, stall: float = 0.0, seed: int = 0, params=None,
                quiet=True):
    """D for tiles a (T, 16, K), b (T, K, 16), c (T, 16, 16) on ``sim`` via path ``through``.

    ``in_fmt``, ``b_fmt``, ``out_fmt`` and ``saturate`` are :func:`golden.mma.mma`'s.

    Returns D and a dict with ``cycles``, ``sim_s`` (seconds spent simulating, start-up
    excluded) and, with ``waves`` (True or the waveform's name), the waveform's path under
    ``build/waves/``.
    """
    return run_many(through, sim, [(a, b, c, in_fmt, out_fmt, b_fmt, saturate)], waves=waves,
                    stall=stall, seed=seed, params=params, quiet=quiet)[0]


def run_many(through: str, sim: str, batches, *, waves=False, stall: float = 0.0, seed: int = 0,
             params=None, quiet=True):
    """:func:`run_through` for several batches ``(a, b, c, in_fmt, out_fmt[, b_fmt[,
    saturate[, a_meta]]])``, each of its own K and formats, in ONE simulator run (one start-up,
    one build check); with ``a_meta`` (PTX 2:4 metadata words) ``a`` is a 2:4 sparse A's
    stored values (``--through core``).  Returns a list of ``(d, info)``, one per batch."""
    from tcore.rtl.designs import make

    design, module, default = PATHS[through]
    params = dict(default if params is None else params)
    if through == "core" and not stall and sim != "amaranth":
        design, module, _ = PATHS["player"]
        params = {**PATHS["player"][2], **params}
    if through == "wmma":       # the memory is sized from the job (a tile's A, B, C and D)
        need = max(wmma_words(np.asarray(bt[0]).shape[-1], np.asarray(bt[0]).itemsize)
                   for bt in batches)
        params["mem_words"] = max(params["mem_words"], 1 << (need - 1).bit_length())
    jobs = []
    for bt in batches:
        a, b, c, in_fmt, out_fmt, b_fmt, saturate, a_meta = (tuple(bt) + (None, False, None)[len(bt) - 5:])[:8]
        if a_meta is not None and through != "core":
            raise ValueError("2:4 sparse tiles run --through core")
        # A 16-bit kind's group is the generation's block (Hopper 16, Ampere 8, Volta 4).
        group = 4
        if in_fmt in ("fp16", "bf16") and params.get("arch", "hopper") != "hopper":
            from tcore.numerics import get_arch
            group = get_arch(params["arch"]).step("fp16").block // 4
        jobs.append(Job(a, b, c, in_fmt=in_fmt, out_fmt=out_fmt, b_fmt=b_fmt, saturate=saturate,
                        group=group, a_meta=a_meta))
    dtypes = [np.asarray(bt[2]).dtype for bt in batches]
    if sim == "amaranth":
        if through != "core":
            raise ValueError("Amaranth's simulator runs --through core only (the warp design is "
                             "too large for it)")
        from .amaranth_sim import run_job
        vcd = None
        if waves:
            vcd = build_root() / "amaranth-mma4" / "mma4.vcd"
            vcd.parent.mkdir(parents=True, exist_ok=True)
        out = []
        for i, job in enumerate(jobs):
            d, cycles, sim_s = run_job(make(design, **params), job, vcd=vcd and str(vcd))
            kept = None
            if waves:
                label = waves if isinstance(waves, str) else f"{design}-{through}-{sim}"
                kept = keep_waves(vcd, label if len(jobs) == 1 else f"{label}-batch{i}")
            out.append((d, {"cycles": cycles, "sim_s": sim_s, "waves": kept}))
        return out
    options = {"stall": stall, "resp_stall": stall, "seed": seed, **bench_options(through, params)}
    work = build_root() / "jobs"
    work.mkdir(parents=True, exist_ok=True)
    out = []
    with tempfile.TemporaryDirectory(dir=work) as tmp:
        jpath, rpath = os.path.join(tmp, "job.npz"), os.path.join(tmp, "result.npz")
        save_jobs(jpath, jobs)
        run_bench(sim, design, module, "job", params=params, options=options,
                  files=dict(job=jpath, result=rpath), waves=waves, quiet=quiet)
        kept = None
        if waves:       # one file for the run, moved out of the build folder under its label
            label = waves if isinstance(waves, str) else f"{design}-{through}-{sim}"
            kept = keep_waves(wave_file(sim, build_dir(sim, design, params, True), design), label)
        with np.load(rpath) as r:
            for i, dt in enumerate(dtypes):
                info = {"cycles": int(r[f"cycles{i}"]), "sim_s": float(r[f"sim_s{i}"])}
                if waves:
                    info["waves"] = kept
                out.append((r[f"d{i}"].astype(dt), info))
    return out


def run_core(sim: str, a, b, c, **kw):
    """:func:`run_through` with ``through="core"``."""
    return run_through("core", sim, a, b, c, **kw)


def bench_options(through: str, params: dict | None = None) -> dict:
    """The hand-over options a bench needs to check its design's documented timing."""
    from tcore.rtl.mma4 import MMA4
    from tcore.rtl.wmma import WmmaSequencer
    params = dict(PATHS[through][2] if params is None else params)
    if through == "core":
        # The bench adds the clocks of a group's further slices itself, from ``lanes``.
        return {"latency": MMA4.LATENCY, "lanes": params.get("lanes", 64)}
    from tcore.rtl.formats import InputKind
    lanes = params.get("lanes", 64)
    return {"mma_cycles": WmmaSequencer.mma_cycles_of(lanes=lanes),
            "mma_cycles_fp8": WmmaSequencer.mma_cycles_of(InputKind.FP8, lanes)}
