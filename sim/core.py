"""Running tile batches through the MMA4 core on a simulator (the ``--through core`` path)."""

from __future__ import annotations

import os
import tempfile

import numpy as np

from tb.beats import Job

from .runner import build_root, run_bench, wave_file, build_dir

__all__ = ["run_core", "DEFAULT_PARAMS"]

DEFAULT_PARAMS = {"stages": 2}


def run_core(sim: str, a, b, c, *, in_fmt: str, out_fmt: str, waves: bool = False,
             stall: float = 0.0, seed: int = 0, params=None, quiet=True) -> tuple[np.ndarray, dict]:
    """D for tiles a (T, 16, K), b (T, K, 16), c (T, 16, 16) through the core on ``sim``.

    K is chained in fused 16-wide steps, each D fed back as the next C.  Returns D and a dict
    with ``cycles`` and, with ``waves``, the waveform path.
    """
    from rtl.mma4 import MMA4

    params = dict(DEFAULT_PARAMS if params is None else params)
    job = Job(a, b, c, bf16=in_fmt == "bf16", acc_f16=out_fmt == "fp16")
    if sim == "amaranth":
        from .amaranth_sim import run_job
        vcd = None
        if waves:
            vcd = build_root() / "amaranth-mma4" / "mma4.vcd"
            vcd.parent.mkdir(parents=True, exist_ok=True)
        d, cycles, sim_s = run_job(MMA4(**params), job, vcd=vcd and str(vcd))
        return d, {"cycles": cycles, "sim_s": sim_s, "waves": vcd}
    work = build_root() / "jobs"
    work.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=work) as tmp:
        jpath, rpath = os.path.join(tmp, "job.npz"), os.path.join(tmp, "result.npz")
        job.save(jpath)
        env = {"TCORE_JOB": jpath, "TCORE_RESULT": rpath, "TCORE_STALL": str(stall),
               "TCORE_SEED": str(seed), "TCORE_LATENCY": str(MMA4(**params).latency)}
        run_bench(sim, "mma4", "tb.mma4_bench", "job", params=params, env=env, waves=waves,
                  quiet=quiet)
        with np.load(rpath) as r:
            d, cycles, sim_s = r["d"], int(r["cycles"]), float(r["sim_s"])
    info = {"cycles": cycles, "sim_s": sim_s}
    if waves:
        info["waves"] = wave_file(sim, build_dir(sim, "mma4", params, True), "mma4")
    return d.astype(c.dtype), info
