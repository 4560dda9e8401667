"""Running whole GEMMs through the GEMM top (``rtl/gemm.py``) on a simulator, or the golden model.

``run_gemm`` returns D and a dict with ``cycles``, ``beats`` (core beats, 64 FMA each) and
``sim_s``.  Verilator and Icarus run ``tb.gemm_bench`` (memories loaded once, the RTL free
running); Amaranth's simulator drives the same top through its host port (small GEMMs only).
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time

import numpy as np

from tcore.golden.gemm import check_gemm, matmul_t
from tcore.numerics import Op
from tcore.rtl.designs import LINT_PARAMS

from .runner import SimError, build_dir, build_root, keep_waves, run_bench, wave_file

__all__ = ["run_gemm", "run_sparse_gemm", "run_fp4_gemm", "fp4_reset_bench", "gemm_params", "mem_words_for",
           "MIN_WORDS", "MAX_WORDS"]

# The GEMM top's memory is a build parameter sized from the job: a power of two, so that jobs
# share a few builds.
# 512 KiB (rtl.designs.LINT_PARAMS): the benches, the tests' GEMMs and every captured file
# share one build.
MIN_WORDS = LINT_PARAMS["gemm"]["mem_words"]
MAX_WORDS = 1 << 22     # 64 MiB: the largest memory the simulators build here


def mem_words_for(words: int) -> int:
    """The memory a job of ``words`` 16-byte words runs in: the next power of two, at least
    MIN_WORDS; ValueError beyond MAX_WORDS."""
    if words > MAX_WORDS:
        raise ValueError(f"needs {words} memory words of 16 bytes; the simulators build the GEMM "
                         f"top with at most {MAX_WORDS} ({MAX_WORDS * 16 >> 20} MiB)")
    return max(MIN_WORDS, 1 << max(0, words - 1).bit_length())


def gemm_params(cores: int, mem_words: int = MIN_WORDS, lanes: int = 64) -> dict:
    """The ``gemm`` design's build parameters (``lanes`` only where not the default 64, so
    that the default build keeps its folder)."""
    return {"cores": cores, "mem_words": mem_words, **({"lanes": lanes} if lanes != 64 else {})}


def words_needed(m, n, k, out_fmt, esize=2) -> int:
    return (m * k * esize + k * n * esize + m * n * (2 if out_fmt == "fp16" else 4)) // 16


def run_gemm(backend: str, a, b, *, in_fmt="fp16", out_fmt="fp32", b_fmt=None, saturate=False,
             cores=1, lanes=64, waves=False, progress=True):
    """D = A·B as matmulT on ``backend`` ("golden", "amaranth", "icarus", "verilator").

    A (M, K) and B (K, N) bit arrays of ``in_fmt`` / ``b_fmt``; TF32, FP8 and INT8 go to the
    GEMM top with B column-major (the TN layout), K in steps of 8 (TF32) or 32.
    ``waves``: False, True or the waveform's name (a run label; True names it after the sizes):
    the file is moved to ``build/waves/`` and never overwrites an earlier one.  ``lanes``: the
    multipliers of each warp's core (:class:`rtl.mma4.MMA4`).
    """
    m, k = a.shape
    n = b.shape[1]
    op = Op(in_fmt, b_fmt, out_fmt, saturate)
    esize, kstep, b_cols = op.a_format.bytes, op.k_step, op.a_format.b_cols
    if in_fmt in ("fp16", "bf16"):
        check_gemm(m, n, k, in_fmt, out_fmt)
    elif min(m, n) < 16 or m % 16 or n % 16 or k < kstep or k % kstep:
        raise ValueError(f"{in_fmt}: M and N must be multiples of 16 and K of {kstep}, not "
                         f"{m}x{n}x{k}")
    if not 1 <= cores <= 8:
        raise ValueError(f"--cores must be 1 to 8, not {cores}")
    if backend == "golden":
        from tcore.golden import mma
        t = time.perf_counter()
        d = mma(a, b, np.zeros((m, n), op.acc_bits), op=op)
        # A beat is 4 x 4 x beat_k FMA.
        return d, {"cycles": None, "beats": m * n * k // (16 * op.beat_k),
                   "sim_s": time.perf_counter() - t}
    if in_fmt not in ("fp16", "bf16"):
        if backend not in ("icarus", "verilator"):
            raise ValueError(f"{in_fmt} GEMMs run on --backend verilator or icarus")
        _check_tiles(m, n, k)
        params = gemm_params(cores, mem_words_for(words_needed(m, n, k, out_fmt, esize)), lanes)
        bt = np.ascontiguousarray(b.T) if b_cols else b
        img = np.concatenate([np.ascontiguousarray(a).view(np.uint8).reshape(-1),
                              bt.view(np.uint8).reshape(-1)])
        job = dict(a=a, b=bt, kstep=kstep, **op.mode_fields)
        return _gemm_top(backend, params, img, job, (m, n), waves, progress,
                         f"gemm-{m}x{n}x{k}-{in_fmt}-{backend}")
    _check_tiles(m, n, k)
    try:
        params = gemm_params(cores, mem_words_for(words_needed(m, n, k, out_fmt)), lanes)
    except ValueError as e:
        raise ValueError(f"a {m}x{k}x{n} GEMM {e}") from None
    if backend == "amaranth":
        return _run_amaranth(a, b, in_fmt, out_fmt, params)
    if backend not in ("icarus", "verilator"):
        raise ValueError(f"Backend must be golden, amaranth, icarus or verilator, not {backend!r}")
    # The operands go in as the memory's initial contents (A, then B: host.images.gemm_layout).
    img = np.concatenate([a.view(np.uint8).reshape(-1), b.view(np.uint8).reshape(-1)])
    job = dict(a=a, b=b, kstep=kstep, **op.mode_fields)
    return _gemm_top(backend, params, img, job, (m, n), waves, progress, f"gemm-{m}x{n}x{k}-{backend}")


def run_sparse_gemm(backend: str, sp, b, *, out_fmt="fp32", cores=1, lanes=64, waves=False,
                    progress=True):
    """D = A·B for a 2:4 sparse A (:class:`golden.sparse.SparseA`, FP16 or BF16, M x K) and B
    (K x N bits) on ``backend`` ("golden", "icarus", "verilator"): matmulT on the GEMM top,
    each K step one ``mma.sp`` k32; the golden model is :func:`golden.sparse.mma_sp` with C = 0.
    ``beats`` are sparse core beats (128 logical FMA each)."""
    from tcore.golden.sparse import mma_sp
    from tcore.host.images import sparse_image, sparse_layout

    m, k = sp.shape
    n = b.shape[1]
    in_fmt = sp.fmt
    if in_fmt not in ("fp16", "bf16"):
        raise ValueError(f"the GEMM top runs 2:4 sparse FP16 or BF16 A, not {in_fmt}")
    op = Op(in_fmt, acc=out_fmt, sparse=True)
    if b.shape[0] != k:
        raise ValueError(f"B has {b.shape[0]} rows but the sparse A's K is {k}")
    if min(m, n) < 16 or m % 16 or n % 16 or k < op.k_step or k % op.k_step:
        raise ValueError(f"a 2:4 sparse GEMM takes M and N multiples of 16 and K of "
                         f"{op.k_step}, not {m}x{n}x{k}")
    if backend == "golden":
        t = time.perf_counter()
        d = mma_sp(sp, b, np.zeros((m, n), op.acc_bits), in_fmt=in_fmt, out_fmt=out_fmt)
        return d, {"cycles": None, "beats": m * n * k // 128, "sim_s": time.perf_counter() - t}
    if backend not in ("icarus", "verilator"):
        raise ValueError(f"2:4 sparse GEMMs run on --backend golden, verilator or icarus, not {backend}")
    if not 1 <= cores <= 8:
        raise ValueError(f"--cores must be 1 to 8, not {cores}")
    _check_tiles(m, n, k)
    end = sparse_layout(m, n, k, out_fmt == "fp16")[-1]
    try:
        params = gemm_params(cores, mem_words_for(end), lanes)
    except ValueError as e:
        raise ValueError(f"a {m}x{k}x{n} sparse GEMM {e}") from None
    img = sparse_image(sp.values, sp.meta, b)
    job = dict(a=sp.values, b=b, kstep=op.k_step, sparse=1, **op.mode_fields)
    return _gemm_top(backend, params, img, job, (m, n), waves, progress,
                     f"gemm-sparse-{m}x{n}x{k}-{in_fmt}-{backend}")


def _gemm_top(backend, params, img, job, mn, waves, progress, label):
    """Run ``job`` on the ``gemm`` design with memory image ``img``; D and the info dict
    (cycles, beats, sim_s, and the kept waveform, named ``label`` unless ``waves`` names it)."""
    m, n = mn
    r = _run_design(backend, "gemm", "tcore.tb.gemm_bench", params, img, job, (m // 16) * (n // 16),
                    waves=waves, progress=progress)
    info = {"cycles": int(r["cycles"]), "beats": int(r["beats"]), "sim_s": float(r["sim_s"])}
    if waves:
        info["waves"] = keep_waves(wave_file(backend, build_dir(backend, "gemm", params, True),
                                             "gemm"), waves if isinstance(waves, str) else label)
    return r["d"], info


def _check_tiles(m, n, k):
    from tcore.rtl.gemm import TILE_BITS
    limit = ((1 << TILE_BITS) - 1) * 16
    if max(m, n, k) > limit:
        raise ValueError(f"M, N and K must be at most {limit} ({(1 << TILE_BITS) - 1} tiles)")


def _run_design(backend, design, module, params, image, job: dict, tiles, *, waves, progress,
                test="job", options=None):
    """Run ``module``'s ``job`` test on ``design`` with the memory preloaded with ``image``
    (bytes) and ``job`` saved for the bench; show a progress bar; return the bench's results."""
    from tcore.host.images import write_memh

    work = build_root() / "jobs"
    work.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=work) as tmp:
        jpath, rpath, ppath, min_, mout = (os.path.join(tmp, f) for f in
                                           ("job.npz", "result.npz", "progress", "in.memh", "out.memh"))
        np.savez(jpath, **job)
        write_memh(min_, image)
        files = dict(job=jpath, result=rpath, progress=ppath, memh_out=mout)
        plusargs = [f"+TCORE_MEMH_IN={min_}"]
        err = []

        def target():
            try:
                run_bench(backend, design, module, test, params=params, files=files,
                          options=options, waves=waves, quiet=True, plusargs=plusargs)
            except BaseException as e:       # reported in the caller's thread
                err.append(e)

        th = threading.Thread(target=target, daemon=True)
        th.start()
        while th.is_alive():
            th.join(0.5)
            if progress and os.path.exists(ppath):
                try:
                    done, total, cyc = (int(x) for x in open(ppath).read().split())
                except ValueError:
                    continue
                bar = "#" * (30 * done // max(total, 1))
                print(f"\r  {backend}: [{bar:30s}] {done}/{total} tiles, {cyc} clocks",
                      end="", file=sys.stderr, flush=True)
        if progress and os.path.exists(ppath):
            print(f"\r  {backend}: [{'#' * 30}] {tiles}/{tiles} tiles", " " * 20, file=sys.stderr)
        if err:
            raise err[0]
        if test != "job":
            return {}
        with np.load(rpath) as r:
            return {key: r[key] for key in r.files}


def fp4_reset_bench(backend: str, qa, qbt, reset_at: int, *, cores=1, lanes=64):
    """Run ``tb.fp4_bench.reset_midrun`` on the quantised GEMM: reset ``reset_at`` clocks after
    start, then the whole job again, checked against :func:`golden.nvfp4.gemm`."""
    from tcore.golden import nvfp4
    from tcore.host.images import fp4_image

    m, k = qa.codes.shape
    n = qbt.codes.shape[0]
    img, cfg, fcfg = fp4_image(qa, qbt)
    job = {**{f"cfg_{key}": v for key, v in cfg.items()}, **{f"fcfg_{key}": v for key, v in fcfg.items()},
           "want": nvfp4.gemm(qa, qbt)}
    params = gemm_params(cores, mem_words_for(img.size // 16), lanes)
    _run_design(backend, "fp4gemm", "tcore.tb.fp4_bench", params, img, job,
                (m // 16) * (n // 16), waves=False, progress=False, test="reset_midrun",
                options={"reset_at": reset_at})


def run_fp4_gemm(backend: str, qa, qbt, *, cores=1, lanes=64, waves=False, progress=True):
    """D (FP32 bits) for quantised A (M x K) and B^T (N x K) on ``backend`` ("golden",
    "icarus", "verilator"): the ``fp4gemm`` design decodes, runs matmulT and scales by the
    tensor scales (:class:`rtl.nvfp4.Fp4GemmTop`, its cores of ``lanes`` multipliers); the
    golden model is :func:`golden.nvfp4.gemm`.
    """
    from tcore.golden import nvfp4

    m, k = qa.codes.shape
    n = qbt.codes.shape[0]
    check_gemm(m, n, k, "fp16", "fp32")
    if backend == "golden":
        t = time.perf_counter()
        d = nvfp4.gemm(qa, qbt)
        return d, {"cycles": None, "beats": m * n * k // 64, "sim_s": time.perf_counter() - t}
    if backend not in ("icarus", "verilator"):
        raise ValueError(f"NVFP4/MXFP4 GEMMs run on golden, icarus or verilator, not {backend!r} "
                         "(the fp4gemm design is too large for Amaranth's simulator)")
    _check_tiles(m, n, k)
    from tcore.host.images import fp4_image
    img, cfg, fcfg = fp4_image(qa, qbt)
    try:
        params = gemm_params(cores, mem_words_for(img.size // 16), lanes)
    except ValueError as e:
        raise ValueError(f"a {m}x{k}x{n} {qa.fmt} GEMM {e}") from None
    job = {**{f"cfg_{key}": v for key, v in cfg.items()}, **{f"fcfg_{key}": v for key, v in fcfg.items()}}
    r = _run_design(backend, "fp4gemm", "tcore.tb.fp4_bench", params, img, job, (m // 16) * (n // 16),
                    waves=waves, progress=progress)
    info = {"cycles": int(r["cycles"]), "beats": int(r["beats"]), "gemm_cycles": int(r["gemm_cycles"]),
            "sim_s": float(r["sim_s"])}
    if waves:
        label = waves if isinstance(waves, str) else f"fp4gemm-{m}x{n}x{k}-{qa.fmt}-{backend}"
        info["waves"] = keep_waves(wave_file(backend, build_dir(backend, "fp4gemm", params, True),
                                             "fp4gemm"), label)
    return r["d"].astype(np.uint32), info


def _run_amaranth(a, b, in_fmt, out_fmt, params):
    from amaranth.sim import Simulator

    from tcore.rtl.gemm import GemmTop
    from tcore.host.images import clock_budget, gemm_layout as layout
    from tcore.host.wmma_model import bytes_of, words_of

    m, k = a.shape
    n = b.shape[1]
    acc_f16 = out_fmt == "fp16"
    a_base, b_base, d_base, end = layout(m, n, k, acc_f16)
    words = 1 << max(6, (end - 1).bit_length())
    dut = GemmTop(cores=params["cores"], mem_words=words, lanes=params.get("lanes", 64))
    res = {}

    async def bench(ctx):
        for i, w in enumerate(words_of(np.concatenate([a.view(np.uint8).reshape(-1),
                                                       b.view(np.uint8).reshape(-1)]))):
            ctx.set(dut.host_addr, i)
            ctx.set(dut.host_wdata, w)
            ctx.set(dut.host_we, 1)
            await ctx.tick()
        ctx.set(dut.host_we, 0)
        ctx.set(dut.cfg, dict(tiles_m=m // 16, tiles_n=n // 16, steps=k // 16, a_base=a_base,
                              b_base=b_base, d_base=d_base, kind=int(in_fmt == "bf16"), acc_f16=acc_f16))
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        budget = clock_budget(m, n, k, params["cores"])
        waited = 0
        while not ctx.get(dut.done):
            if waited >= budget:
                raise SimError(f"amaranth: done did not rise within {budget} clocks of start "
                               f"({m}x{n}x{k} GEMM, {ctx.get(dut.tiles_done)} of "
                               f"{(m // 16) * (n // 16)} tiles stored)")
            await ctx.tick()
            waited += 1
        res["cycles"], res["beats"] = ctx.get(dut.cycles), ctx.get(dut.beats)
        out = []
        # One read a clock; each word leaves two clocks after its address (host_rdata is a
        # register after the block RAM's).
        for i in range(d_base, end + 1):
            ctx.set(dut.host_addr, min(i, end - 1))
            await ctx.tick()
            if i > d_base:
                out.append(ctx.get(dut.host_rdata))
        res["d"] = bytes_of(out).view(np.uint16 if acc_f16 else np.uint32).reshape(m, n)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    t = time.perf_counter()
    sim.run()
    return res["d"], {"cycles": res["cycles"], "beats": res["beats"], "sim_s": time.perf_counter() - t}
