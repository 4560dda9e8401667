"""Tile batches through the core or the warp design on a simulator (:func:`run_tiles`, the
engine :func:`tcore.sim.run.run_batches` calls for the ``mma4``, ``mma4play`` and ``wmma``
builds).

An ``mma4`` build takes beats straight into the MMA4 core: with no stalls asked for, through
the beat player (``mma4play``, ``tcore.tb.player_bench``: each K step's beats loaded into memory at
once, the core free-running), else through the core's own ports with a bench that drives
every clock (``tcore.tb.mma4_bench``, random valid/ready stalls); a ``wmma`` build sends every tile
through memory -> load_matrix_sync -> mma_sync -> store_matrix_sync -> memory on the warp
design (``tcore.tb.wmma_bench``).  Both chain K in 16-wide fused steps.
"""

from __future__ import annotations

import os
import tempfile

import numpy as np

from tcore.host.beats import Job, save_jobs
from tcore.rtl.designs import Build, preset

from .runner import build_dir, build_root, keep_waves, run_bench, wave_file

__all__ = ["run_tiles", "BENCHES", "bench_options", "wmma_words"]

#: Each tile design's bench module.
BENCHES = {"mma4": "tcore.tb.mma4_bench", "mma4play": "tcore.tb.player_bench",
           "wmma": "tcore.tb.wmma_bench"}


def wmma_words(k: int, esize: int = 2) -> int:
    """Memory words a 16 x K x 16 tile takes on the warp design (tb.wmma_bench.tile_image):
    A and B (``esize`` bytes each), C and D (FP32), each 32-byte aligned."""
    return (2 * 16 * k * esize + 2 * 16 * 16 * 4) // 16


def player_of(build: Build) -> Build:
    """The beat player around the core of an ``mma4`` build (its fields, the lint preset's
    depth)."""
    fields = {k: v for k, v in build.params.items() if k != "skid"}
    return preset("lint", "mma4play").replace(**fields)


def run_tiles(build: Build, batches, sim: str, *, waves=False, stall: float = 0.0, seed: int = 0,
              quiet=True) -> list:
    """D of every :class:`tcore.sim.run.Batch` (tiles) on ``build`` in ONE simulator run (one
    start-up, one build check); a list of :class:`tcore.sim.run.Result`."""
    from .batch import Result

    if build.design == "mma4" and not stall and sim != "amaranth":
        build = player_of(build)
    if build.design == "wmma":      # the memory is sized from the job (a tile's A, B, C and D)
        need = max(wmma_words(np.shape(bt.operands.a)[-1], np.asarray(bt.operands.a).itemsize)
                   for bt in batches)
        build = build.replace(mem_words=max(build.mem_words, 1 << (need - 1).bit_length()))
    # A 16-bit kind's group is the generation's block (Hopper 16, Ampere 8, Volta 4).
    group = 4
    if build.design in ("mma4", "mma4play") and build.arch != "hopper":
        from tcore.numerics import get_arch
        group = get_arch(build.arch).step("fp16").block // 4
    jobs = [Job(bt.operands.a, bt.operands.b, bt.operands.c_or_zero(bt.op), in_fmt=bt.op.a,
                out_fmt=bt.op.acc, b_fmt=bt.op.b, saturate=bt.op.saturate,
                group=group if bt.op.kind in ("fp16", "bf16") else 4, a_meta=bt.operands.meta)
            for bt in batches]
    dtypes = [bt.op.acc_bits for bt in batches]
    label = waves if isinstance(waves, str) else f"{build.tag}-{sim}"
    if sim == "amaranth":
        from .amaranth_sim import run_job
        vcd = None
        if waves:
            vcd = build_root() / "amaranth-mma4" / "mma4.vcd"
            vcd.parent.mkdir(parents=True, exist_ok=True)
        out = []
        for i, job in enumerate(jobs):
            d, cycles, sim_s = run_job(build.make(), job, vcd=vcd and str(vcd))
            kept = keep_waves(vcd, label if len(jobs) == 1 else f"{label}-batch{i}") if waves else None
            out.append(Result(d, cycles, None, sim_s, kept))
        return out
    options = {"stall": stall, "resp_stall": stall, "seed": seed, **bench_options(build)}
    work = build_root() / "jobs"
    work.mkdir(parents=True, exist_ok=True)
    out = []
    with tempfile.TemporaryDirectory(dir=work) as tmp:
        jpath, rpath = os.path.join(tmp, "job.npz"), os.path.join(tmp, "result.npz")
        save_jobs(jpath, jobs)
        run_bench(sim, build.design, BENCHES[build.design], "job", params=build.params,
                  options=options, files=dict(job=jpath, result=rpath), waves=waves, quiet=quiet)
        kept = None
        if waves:       # one file for the run, moved out of the build folder under its label
            kept = keep_waves(wave_file(sim, build_dir(sim, build.design, build.params, True),
                                        build.design), label)
        with np.load(rpath) as r:
            for i, dt in enumerate(dtypes):
                out.append(Result(r[f"d{i}"].astype(dt), int(r[f"cycles{i}"]), None,
                                  float(r[f"sim_s{i}"]), kept))
    return out


def bench_options(build: Build) -> dict:
    """The hand-over options a bench needs to check its design's documented timing (the
    bench adds a group's further slices itself, from the build)."""
    from tcore.rtl.formats import InputKind
    from tcore.rtl.mma4 import MMA4
    from tcore.rtl.wmma import WmmaSequencer
    if build.design in ("mma4", "mma4play"):
        return {"latency": MMA4.LATENCY}
    return {"mma_cycles": WmmaSequencer.mma_cycles_of(lanes=build.lanes),
            "mma_cycles_fp8": WmmaSequencer.mma_cycles_of(InputKind.FP8, build.lanes)}
