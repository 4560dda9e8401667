"""Whole GEMMs through the ``soc`` design (``rtl/soc.py``): A, B and C in an AXI4 memory,
the registers programmed over AXI4-Lite, D read back after the interrupt (``tcore.tb.soc_bench``'s
``job`` test, cocotbext-axi on both buses)."""

from __future__ import annotations

import os
import tempfile

import numpy as np

from tcore.rtl.designs import Build

from .runner import SimError, build_dir, build_root, keep_waves, run_bench, wave_file

__all__ = ["run_soc"]


def run_soc(build: Build, batch, backend: str, *, waves=False, pause: float = 0.0):
    """D = A·B (+ C) of one :class:`tcore.sim.run.Batch` on a ``soc`` build on ``backend``
    ("verilator" or "icarus"); a :class:`tcore.sim.run.Result` (``cycles``: the CYCLES
    registers, summed over a batch).

    Every Hopper kind (FP8 as wgmma computes it).  A (M, K) and B (K, N) are one GEMM; A
    (T, M, K) and B (T, K, N) are T GEMMs run one after another in one simulation (a batch of
    tiles).  ``pause``: the probability that each AXI channel pauses in a clock (0: none, the
    fastest).
    """
    from tcore.rtl.regmap import ErrorCode

    from .batch import Result

    if backend not in ("verilator", "icarus"):
        raise ValueError(f"the soc design runs on verilator or icarus, not {backend!r}")
    op, x = batch.op, batch.operands
    m, n, k = x.mnk
    c_given = x.c is not None and bool(np.any(x.c))
    work = build_root() / "jobs"
    work.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=work) as tmp:
        jpath, rpath = os.path.join(tmp, "job.npz"), os.path.join(tmp, "result.npz")
        np.savez(jpath, a=x.a, b=x.b, c=x.c_or_zero(op), op=str(op), c_given=c_given)
        run_bench(backend, "soc", "tcore.tb.soc_bench", "job", params=build.params,
                  options={"pause": pause}, files=dict(job=jpath, result=rpath), waves=waves,
                  quiet=True)
        with np.load(rpath) as r:
            d, err = r["d"].astype(op.acc_bits), int(r["error"])
            result = Result(d, int(r["cycles"]), None, float(r["sim_s"]))
    if err:
        raise SimError(f"soc: the run ended with STATUS.error {err} ({ErrorCode(err).name})")
    if waves:
        label = waves if isinstance(waves, str) else f"{build.tag}-{m}x{n}x{k}-{backend}"
        result.waves = keep_waves(wave_file(backend, build_dir(backend, "soc", build.params, True),
                                            "soc"), label)
    return result
