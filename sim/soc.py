"""Whole GEMMs through the ``soc`` design (``rtl/soc.py``): A, B and C in an AXI4 memory,
the registers programmed over AXI4-Lite, D read back after the interrupt (``tb.soc_bench``'s
``job`` test, cocotbext-axi on both buses)."""

from __future__ import annotations

import os
import tempfile

import numpy as np

from golden.gemm import check_gemm

from .runner import SimError, build_dir, build_root, keep_waves, run_bench, wave_file

__all__ = ["run_soc"]


def run_soc(backend: str, a, b, c=None, *, in_fmt="fp16", out_fmt="fp32", waves=False,
            pause: float = 0.0, params=None):
    """D = A·B (+ C) bits on ``backend`` ("verilator" or "icarus") through the soc design.

    ``pause``: the probability that each AXI channel pauses in a clock (0: none, the fastest).
    Returns D and a dict with ``cycles`` (the CYCLES register) and ``sim_s``.
    """
    from rtl.designs import LINT_PARAMS
    from rtl.regmap import ErrorCode

    if backend not in ("verilator", "icarus"):
        raise ValueError(f"the soc design runs on verilator or icarus, not {backend!r}")
    m, k = a.shape
    n = b.shape[1]
    check_gemm(m, n, k, in_fmt, out_fmt)
    if in_fmt not in ("fp16", "bf16"):
        raise ValueError(f"the soc design takes FP16 or BF16 inputs, not {in_fmt}")
    params = dict(LINT_PARAMS["soc"] if params is None else params)
    acc_f16 = out_fmt == "fp16"
    cdt = np.uint16 if acc_f16 else np.uint32
    c_given = c is not None and bool(np.any(c))
    c = np.zeros((m, n), cdt) if c is None else np.asarray(c, cdt)
    work = build_root() / "jobs"
    work.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=work) as tmp:
        jpath, rpath = os.path.join(tmp, "job.npz"), os.path.join(tmp, "result.npz")
        np.savez(jpath, a=a, b=b, c=c, bf16=in_fmt == "bf16", acc_f16=acc_f16, c_given=c_given)
        run_bench(backend, "soc", "tb.soc_bench", "job", params=params,
                  options={"pause": pause}, files=dict(job=jpath, result=rpath), waves=waves,
                  quiet=True)
        with np.load(rpath) as r:
            d, err = r["d"].astype(cdt), int(r["error"])
            info = {"cycles": int(r["cycles"]), "sim_s": float(r["sim_s"])}
    if err:
        raise SimError(f"soc: the run ended with STATUS.error {err} ({ErrorCode(err).name})")
    if waves:
        label = waves if isinstance(waves, str) else f"soc-{m}x{n}x{k}-{backend}"
        info["waves"] = keep_waves(wave_file(backend, build_dir(backend, "soc", params, True),
                                             "soc"), label)
    return d, info
