"""Whole GEMMs through the ``soc`` design (``rtl/soc.py``): A, B and C in an AXI4 memory,
the registers programmed over AXI4-Lite, D read back after the interrupt (``tb.soc_bench``'s
``job`` test, cocotbext-axi on both buses)."""

from __future__ import annotations

import os
import tempfile

import numpy as np

from tcore.numerics.formats import INPUT_FORMATS

from .runner import SimError, build_dir, build_root, keep_waves, run_bench, wave_file

__all__ = ["run_soc"]


def run_soc(backend: str, a, b, c=None, *, in_fmt="fp16", out_fmt="fp32", b_fmt=None,
            saturate=False, waves=False, pause: float = 0.0, params=None):
    """D = A·B (+ C) bits on ``backend`` ("verilator" or "icarus") through the soc design.

    Every Hopper kind: ``in_fmt`` / ``b_fmt`` / ``out_fmt`` / ``saturate`` as
    :func:`golden.mma.mma` takes them (FP8 as wgmma computes it).  ``a`` (M, K) and ``b``
    (K, N) are one GEMM; ``a`` (T, M, K) and ``b`` (T, K, N) are T GEMMs run one after
    another in one simulation (a batch of tiles).  ``pause``: the probability that each AXI
    channel pauses in a clock (0: none, the fastest).  Returns D and a dict with ``cycles``
    (the CYCLES registers, summed over a batch) and ``sim_s``.
    """
    from tcore.rtl.designs import LINT_PARAMS
    from tcore.rtl.regmap import ErrorCode

    if backend not in ("verilator", "icarus"):
        raise ValueError(f"the soc design runs on verilator or icarus, not {backend!r}")
    m, k = a.shape[-2:]
    n = b.shape[-1]
    if in_fmt not in INPUT_FORMATS:
        raise ValueError(f"the soc design takes {', '.join(INPUT_FORMATS)} inputs, not {in_fmt}")
    kstep = INPUT_FORMATS[in_fmt].k_step
    if m % 16 or n % 16 or not m or not n or not k or k % min(kstep, 16):
        raise ValueError(f"{in_fmt} through the soc design: M and N multiples of 16 and K of "
                         f"{min(kstep, 16)}, not {m}x{n}x{k}")
    params = dict(LINT_PARAMS["soc"] if params is None else params)
    acc_f16 = out_fmt == "fp16"
    cdt = np.uint16 if acc_f16 else np.uint32
    c_given = c is not None and bool(np.any(c))
    c = np.zeros(a.shape[:-1] + (n,), cdt) if c is None else np.asarray(c, cdt)
    work = build_root() / "jobs"
    work.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=work) as tmp:
        jpath, rpath = os.path.join(tmp, "job.npz"), os.path.join(tmp, "result.npz")
        np.savez(jpath, a=a, b=b, c=c, in_fmt=in_fmt, b_fmt=b_fmt or "", acc_f16=acc_f16,
                 c_given=c_given, sat=bool(saturate))
        run_bench(backend, "soc", "tcore.tb.soc_bench", "job", params=params,
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
