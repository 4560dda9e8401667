"""Whole GEMMs on the GEMM top (``rtl/gemm.py``): :func:`run_gemm` is the engine
:func:`tcore.sim.run.run` calls for a ``gemm`` build; :func:`run_fp4_gemm` runs NVFP4/MXFP4 on
the ``fp4gemm`` design.  Verilator and Icarus run ``tcore.tb.gemm_bench`` (memories loaded once, the
RTL free running); Amaranth's simulator drives the same top through its host port (small
GEMMs only).
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time

import numpy as np

from tcore.rtl.designs import Build, preset

from .runner import SimError, build_dir, build_root, keep_waves, run_bench, wave_file

__all__ = ["run_gemm", "run_fp4_gemm", "fp4_reset_bench", "mem_words_for", "MIN_WORDS",
           "MAX_WORDS"]

# The GEMM top's memory is a build field sized from the job: a power of two, so that jobs
# share a few builds.  512 KiB (the lint preset): the benches, the tests' GEMMs and every
# captured file share one build.
MIN_WORDS = preset("lint", "gemm").mem_words
MAX_WORDS = 1 << 22     # 64 MiB: the largest memory the simulators build here


def mem_words_for(words: int) -> int:
    """The memory a job of ``words`` 16-byte words runs in: the next power of two, at least
    MIN_WORDS; ValueError beyond MAX_WORDS."""
    if words > MAX_WORDS:
        raise ValueError(f"needs {words} memory words of 16 bytes; the simulators build the GEMM "
                         f"top with at most {MAX_WORDS} ({MAX_WORDS * 16 >> 20} MiB)")
    return max(MIN_WORDS, 1 << max(0, words - 1).bit_length())


def sized(build: Build, words: int, what: str) -> Build:
    """``build`` with a memory of at least ``words`` (:func:`mem_words_for`); SimError naming
    the job (``what``) where it cannot be built."""
    try:
        return build.replace(mem_words=max(build.mem_words, mem_words_for(words)))
    except ValueError as e:
        raise SimError(f"a {what} {e}") from None


def words_needed(m: int, n: int, k: int, op) -> int:
    """16-byte memory words a dense M x N x K GEMM of ``op`` takes: A, B and D."""
    esize = op.a_format.bytes
    return (m * k * esize + k * n * esize + m * n * np.dtype(op.acc_bits).itemsize) // 16


def run_gemm(build: Build, batch, backend: str, *, waves=False, progress=True):
    """D = A·B as matmulT of one :class:`tcore.sim.run.Batch` (A (M, K), B (K, N), C zero) on
    a ``gemm`` build; a :class:`tcore.sim.run.Result` (``beats``: core beats).

    TF32, FP8 and INT8 go to the GEMM top with B column-major (the TN layout); a 2:4 sparse A
    (its stored values and metadata) runs as ``mma.sp`` k32 steps.  ``waves``: False, True
    or the waveform's name (True names it after the sizes)."""
    from tcore.host.images import sparse_image, sparse_layout
    op, x = batch.op, batch.operands
    a, b = np.asarray(x.a), np.asarray(x.b)
    m, n, k = x.mnk
    _check_tiles(m, n, k)
    if op.sparse:
        end = sparse_layout(m, n, k, op.acc == "fp16")[-1]
        build = sized(build, end, f"{m}x{k}x{n} sparse GEMM")
        img, b_mem = sparse_image(a, x.meta, b), b
        label = f"gemm-sparse-{m}x{n}x{k}-{op.a}-{backend}"
    else:
        build = sized(build, words_needed(m, n, k, op), f"{m}x{k}x{n} GEMM")
        if backend == "amaranth":
            return _run_amaranth(a, b, op, build)
        b_mem = np.ascontiguousarray(b.T) if op.mode_fields["b_cols"] else b
        # The operands go in as the memory's initial contents (A, then B: host.images.gemm_layout).
        img = np.concatenate([np.ascontiguousarray(a).view(np.uint8).reshape(-1),
                              b_mem.view(np.uint8).reshape(-1)])
        label = f"gemm-{m}x{n}x{k}-{op.a}-{backend}"
    return _gemm_top(backend, build, img, dict(a=a, b=b_mem, op=str(op)), (m, n), waves,
                     progress, label)


def _gemm_top(backend, build, img, job, mn, waves, progress, label):
    """Run ``job`` on ``build`` (a ``gemm`` build) with memory image ``img``; the Result
    (the kept waveform named ``label`` unless ``waves`` names it)."""
    from .batch import Result
    m, n = mn
    r = _run_design(backend, build, "tcore.tb.gemm_bench", img, job, (m // 16) * (n // 16),
                    waves=waves, progress=progress)
    kept = None
    if waves:
        kept = keep_waves(wave_file(backend, build_dir(backend, "gemm", build.params, True),
                                    "gemm"), waves if isinstance(waves, str) else label)
    return Result(r["d"], int(r["cycles"]), int(r["beats"]), float(r["sim_s"]), kept)


def _check_tiles(m, n, k):
    from tcore.rtl.gemm import TILE_BITS
    limit = ((1 << TILE_BITS) - 1) * 16
    if max(m, n, k) > limit:
        raise ValueError(f"M, N and K must be at most {limit} ({(1 << TILE_BITS) - 1} tiles)")


def _run_design(backend, build, module, image, job: dict, tiles, *, waves, progress,
                test="job", options=None):
    """Run ``module``'s ``job`` test on ``build`` with the memory preloaded with ``image``
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
                run_bench(backend, build.design, module, test, params=build.params, files=files,
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


def fp4_reset_bench(backend: str, qa, qbt, reset_at: int, *, build: Build | None = None):
    """Run ``tcore.tb.fp4_bench.reset_midrun`` on the quantised GEMM: reset ``reset_at`` clocks after
    start, then the whole job again, checked against :func:`tcore.golden.nvfp4.gemm`."""
    from tcore.golden import nvfp4
    from tcore.host.images import fp4_image

    m, k = qa.codes.shape
    n = qbt.codes.shape[0]
    img, cfg, fcfg = fp4_image(qa, qbt)
    job = {**{f"cfg_{key}": v for key, v in cfg.items()}, **{f"fcfg_{key}": v for key, v in fcfg.items()},
           "want": nvfp4.gemm(qa, qbt)}
    build = sized(build or preset("lint", "fp4gemm"), img.size // 16, f"{m}x{k}x{n} GEMM")
    _run_design(backend, build, "tcore.tb.fp4_bench", img, job,
                (m // 16) * (n // 16), waves=False, progress=False, test="reset_midrun",
                options={"reset_at": reset_at})


def run_fp4_gemm(backend: str, qa, qbt, *, build: Build | None = None, waves=False, progress=True):
    """D (FP32 bits) for quantised A (M x K) and B^T (N x K) on ``backend`` ("golden",
    "icarus", "verilator"): the ``fp4gemm`` design decodes, runs matmulT and scales by the
    tensor scales (:class:`tcore.rtl.nvfp4.Fp4GemmTop`, its warps of ``lanes`` multipliers); the
    golden model is :func:`tcore.golden.nvfp4.gemm`.
    """
    from tcore.golden import nvfp4
    from tcore.golden.gemm import check_gemm

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
    build = sized(build or preset("lint", "fp4gemm"), img.size // 16, f"{m}x{k}x{n} {qa.fmt} GEMM")
    job = {**{f"cfg_{key}": v for key, v in cfg.items()}, **{f"fcfg_{key}": v for key, v in fcfg.items()}}
    r = _run_design(backend, build, "tcore.tb.fp4_bench", img, job, (m // 16) * (n // 16),
                    waves=waves, progress=progress)
    info = {"cycles": int(r["cycles"]), "beats": int(r["beats"]), "gemm_cycles": int(r["gemm_cycles"]),
            "sim_s": float(r["sim_s"])}
    if waves:
        label = waves if isinstance(waves, str) else f"fp4gemm-{m}x{n}x{k}-{qa.fmt}-{backend}"
        info["waves"] = keep_waves(wave_file(backend, build_dir(backend, "fp4gemm", build.params, True),
                                             "fp4gemm"), label)
    return r["d"].astype(np.uint32), info


def _run_amaranth(a, b, op, build):
    from amaranth.sim import Simulator

    from tcore.host.images import clock_budget, gemm_layout as layout
    from tcore.host.wmma_model import bytes_of, words_of

    from .batch import Result

    m, k = a.shape
    n = b.shape[1]
    acc_f16 = op.acc == "fp16"
    a_base, b_base, d_base, end = layout(m, n, k, acc_f16)
    # The smallest memory that holds the job (Amaranth simulates every word).
    build = build.replace(mem_words=1 << max(6, (end - 1).bit_length()))
    dut = build.make()
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
                              b_base=b_base, d_base=d_base, kind=op.mode_fields["kind"], acc_f16=acc_f16))
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        budget = clock_budget(m, n, k, build.warps)
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
        res["d"] = bytes_of(out).view(op.acc_bits).reshape(m, n)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    t = time.perf_counter()
    sim.run()
    return Result(res["d"], res["cycles"], res["beats"], time.perf_counter() - t)
