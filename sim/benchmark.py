"""The benchmarks behind ``tcore benchmark``: the golden model per input kind against NumPy, the
MMA4 core on each simulator, and a GEMM on the GEMM top.  They print figures; no test depends
on a timing.
"""

from __future__ import annotations

import os

__all__ = ["BenchmarkError", "pin_blas_threads", "benchmark_golden", "benchmark_sim", "benchmark_gemm",
           "benchmark_soc", "benchmark_all", "print_benchmark_table", "print_soc_table", "GOLDEN_BENCH_KINDS"]


class BenchmarkError(RuntimeError):
    """A benchmark could not run, or its result was not bit-exact."""


def pin_blas_threads():
    """One BLAS thread: set before NumPy loads (``tcore benchmark`` does it first thing)."""
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = "1"


#: ``tcore benchmark golden``'s input kinds: (label, golden.matmul arguments, K of one instruction).
GOLDEN_BENCH_KINDS = {
    "fp16_f32": ("FP16->FP32", "float16", {}, 16),
    "bf16_f32": ("BF16->FP32", "bfloat16", {}, 16),
    "fp16_f16": ("FP16->FP16", "float16", {"out": "fp16"}, 16),
    "e4m3_f32": ("FP8 E4M3->FP32 (wgmma)", "float8_e4m3fn", {}, 32),
    "tf32_f32": ("TF32->FP32", "float32", {}, 8),
    "s8_s32": ("INT8->S32", "int8", {}, 32),
}


def _blas() -> str:
    import numpy as np
    try:
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        return f"{blas.get('name', '?')} {blas.get('version', '')}".strip()
    except Exception:                               # older NumPy: no dict form of the config
        return "unknown BLAS"


def _load() -> str:
    try:
        return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "load average unknown"


def benchmark_golden(tiles: int = 4096, repeat: int = 5, seed: int = 1, workers: int | None = None,
                 gemm: int = 0, engines=("numpy", "compiled")) -> dict:
    """Time the golden model against float32 ``numpy.matmul`` (+ C) on the same random tiles,
    for each input kind and engine: ``tiles`` 16x16 tiles of one instruction's K (16, 32 for
    FP8 and INT8, 8 for TF32), best of ``repeat``; NumPy's matmul on one BLAS thread, the
    golden model on ``workers`` threads (None: every core).  The compiled engine's kernels are
    compiled (or loaded from numba's cache) before timing.  ``gemm`` > 0 also times one
    ``gemm``-cubed FP16 -> FP32 product (compiled engine, once)."""
    import time
    import numpy as np
    from tcore.golden import matmul
    from tcore.golden.mma import default_engine
    from tcore.numerics.formats import numpy_dtype

    if tiles < 1:
        raise BenchmarkError(f"--tiles must be at least 1, not {tiles}")
    if workers is not None and workers < 1:
        raise BenchmarkError(f"--workers must be at least 1, not {workers}")
    workers = workers or os.cpu_count() or 1
    engines = [e for e in engines if e != "compiled" or default_engine() == "compiled"]
    rng = np.random.default_rng(seed)

    def best(fn):
        times = []
        for _ in range(repeat):
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
        return min(times)

    load_before = _load()
    kinds = {}
    for key, (label, dtype, kw, k) in GOLDEN_BENCH_KINDS.items():
        dt = numpy_dtype(dtype)
        if dt.kind == "i":
            a = rng.integers(-128, 128, (tiles, 16, k)).astype(dt)
            b = rng.integers(-128, 128, (tiles, k, 16)).astype(dt)
            c = rng.integers(-2**20, 2**20, (tiles, 16, 16)).astype(np.int32)
        else:
            a = rng.standard_normal((tiles, 16, k)).astype(dt)
            b = rng.standard_normal((tiles, k, 16)).astype(dt)
            c = rng.standard_normal((tiles, 16, 16)).astype(np.float16 if kw.get("out") else np.float32)
        a32, b32, c32 = a.astype(np.float32), b.astype(np.float32), c.astype(np.float32)
        matmul_s = best(lambda: np.matmul(a32, b32) + c32)
        dots = tiles * 256
        row = {"label": label, "k": k, "dots": dots, "matmul_f32_s": matmul_s, "workers": workers,
               "engines": {}}
        ref = None
        for engine in engines:
            d = matmul(a, b, c, engine=engine, workers=workers, **kw)     # compiles, warms up
            if ref is None:
                ref = d
            elif not np.array_equal(d.view(np.uint8), ref.view(np.uint8)):
                raise BenchmarkError(f"{label}: the {engine} engine's bits differ from {engines[0]}'s")
            s = best(lambda: matmul(a, b, c, engine=engine, workers=workers, **kw))
            row["engines"][engine] = {"golden_s": s, "dots_per_s": dots / s, "ratio": s / matmul_s}
        main = row["engines"][engines[-1]]
        row.update(engine=engines[-1], golden_s=main["golden_s"], dots_per_s=main["dots_per_s"],
                   ratio=main["ratio"])
        kinds[key] = row
    out = {"tiles": tiles, "blas": _blas(), "threads": 1, "workers": workers, "kinds": kinds,
           "load_before": load_before, "load_after": _load(), "cpus": os.cpu_count()}
    f16 = kinds["fp16_f32"]
    out.update({key: f16[key] for key in ("dots", "golden_s", "matmul_f32_s", "dots_per_s", "ratio")})
    if gemm:
        a = rng.standard_normal((gemm, gemm)).astype(np.float16)
        b = rng.standard_normal((gemm, gemm)).astype(np.float16)
        matmul(a[:64, :64], b[:64, :64], workers=workers)                  # compile first
        t = time.perf_counter()
        matmul(a, b, workers=workers)
        gemm_s = time.perf_counter() - t
        a32, b32 = a.astype(np.float32), b.astype(np.float32)
        t = time.perf_counter()
        np.matmul(a32, b32)
        out["gemm"] = {"n": gemm, "engine": engines[-1], "workers": workers, "golden_s": gemm_s,
                       "matmul_f32_s": time.perf_counter() - t, "dots_per_s": gemm * gemm / gemm_s,
                       "load_after": _load()}
    return out


def benchmark_sim(tiles: dict | None = None, seed: int = 1) -> dict:
    """Tiles per second through the MMA4 core (fused K=16, FP16 -> FP32) on each simulator.

    Builds first (not timed).  Rates use the time spent simulating (driving beats and reading
    D), not the simulator's start-up, which ``wall_s`` includes.
    """
    import time
    import numpy as np
    from tcore.golden import mma
    from tcore.numerics import Op
    from tcore.rtl.designs import preset
    from tcore.sim.core import player_of
    from tcore.sim.run import Operands, run
    from tcore.sim.runner import build

    tiles = tiles or {"verilator": 256, "icarus": 4, "amaranth": 2}
    rng = np.random.default_rng(seed)
    out = {}
    for sim, n in tiles.items():
        a = rng.standard_normal((n, 16, 16)).astype(np.float16).view(np.uint16)
        b = rng.standard_normal((n, 16, 16)).astype(np.float16).view(np.uint16)
        c = rng.standard_normal((n, 16, 16)).astype(np.float32).view(np.uint32)
        core = preset("lint", "mma4")
        if sim != "amaranth":       # what the run builds: the core in its beat player
            build(sim, "mma4play", player_of(core).params)
        print(f"  {sim}: {n} tiles ...", flush=True)
        t = time.perf_counter()
        r = run(core, Op.parse("fp16->fp32"), Operands(a, b, c), sim)
        wall = time.perf_counter() - t
        bad = int((r.d != mma(a, b, c)).sum())
        if bad:
            raise BenchmarkError(f"{sim}: {bad} outputs differ from the golden model")
        out[sim] = {"tiles": n, "wall_s": wall, "sim_s": r.sim_s, "mismatches": bad,
                    "tiles_per_s": n / r.sim_s, "cycles": r.cycles,
                    "cycles_per_s": r.cycles / r.sim_s}
    base = out.get("verilator", next(iter(out.values())))["tiles_per_s"]
    for r in out.values():
        r["ratio_vs_verilator"] = r["tiles_per_s"] / base
    return out


def benchmark_gemm(m=128, n=128, k=128, backend="verilator", seed=1) -> dict:
    """A random FP16 -> FP32 GEMM on the GEMM top: clocks, utilisation, bit-exactness."""
    from tcore.golden.gemm import matmul_t
    from tcore.numerics import Op
    from tcore.rtl.designs import preset
    from tcore.sim.run import Operands, run

    op = Op.parse("fp16->fp32")
    a, b = op.random_operands(m, n, k, seed)
    top = preset("lint", "gemm")
    r = run(top, op, Operands(a, b), backend)
    bad = int((r.d != matmul_t(a, b)).sum())
    if bad:
        raise BenchmarkError(f"GEMM: {bad} outputs differ from the golden model")
    return {"m": m, "n": n, "k": k, "backend": backend, "cycles": r.cycles,
            "utilization": m * n * k / r.cycles / top.peak_fma(op), "mismatches": bad,
            "sim_cycles_per_s": r.cycles / r.sim_s}


def benchmark_soc(m=64, n=None, k=None, warps=(1, 2, 4, 8), backend="verilator", seed=1) -> dict:
    """A random FP16 -> FP32 GEMM through the ``soc`` design (AXI memory without pauses) with
    each number of warps: clocks (the CYCLES register), utilisation of the warps' cores, the
    speed-up over the first (one warp), and the AXI4 read data bus's busy share (R beats
    per clock; the 128-bit bus carries at most one a clock), all in one run.  ``m`` alone
    sets a cube (``benchmark_soc(256)``: 256x256x256)."""
    from tcore.golden.gemm import matmul_t
    from tcore.numerics import Op
    from tcore.rtl.designs import preset
    from tcore.sim.run import Operands, run

    n, k = n or m, k or m
    op = Op.parse("fp16->fp32")
    a, b = op.random_operands(m, n, k, seed)
    want = matmul_t(a, b)
    rows = []
    for w in warps:
        print(f"  {m}x{n}x{k}, {w} warp{'s' if w > 1 else ''} ...", flush=True)
        soc = preset("lint", "soc").replace(warps=w)
        r = run(soc, op, Operands(a, b), backend)
        bad = int((r.d != want).sum())
        if bad:
            raise BenchmarkError(f"soc with {w} warps: {bad} outputs differ from the golden model")
        rows.append({"warps": w, "cycles": r.cycles, "mismatches": bad,
                     "utilization": m * n * k / r.cycles / soc.peak_fma(op),
                     "fma_per_clock": m * n * k / r.cycles,
                     "read_bus": m * n * k // 64 / r.cycles})       # 64 FP16 per beat pair
    for r in rows:
        r["speedup_vs_1"] = rows[0]["cycles"] / r["cycles"]
    return {"m": m, "n": n, "k": k, "backend": backend, "runs": rows}


def print_soc_table(r: dict):
    """``benchmark_soc``'s result as the Markdown table of docs/soc.md."""
    print(f"soc design, {r['m']}x{r['n']}x{r['k']} FP16->FP32 on {r['backend']}, AXI memory "
          "without pauses, bit-exact")
    print()
    print("| warps | clocks | FMA per clock | core utilisation | read bus busy | vs 1 warp |")
    print("|---|---|---|---|---|---|")
    for x in r["runs"]:
        print(f"| {x['warps']} | {x['cycles']:,} | {x['fma_per_clock']:.1f} | {x['utilization']:.3f} "
              f"| {x['read_bus']:.2f} | {x['speedup_vs_1']:.2f}x |")


def _machine() -> str:
    import platform
    cpu = platform.processor() or platform.machine()
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} CPUs, Python {platform.python_version()}"


def benchmark_all() -> dict:
    import datetime
    print("  golden model ...", flush=True)
    g = benchmark_golden()
    s = benchmark_sim()
    print("  GEMM 128x128x128 on Verilator ...", flush=True)
    gm = benchmark_gemm()
    return {"date": datetime.date.today().isoformat(), "machine": _machine(), "golden": g, "sim": s,
            "gemm": gm}


def print_benchmark_table(r: dict):
    g, s, gm = r["golden"], r["sim"], r["gemm"]
    print(f"tcore benchmarks, {r['date']}, {r['machine']}, NumPy with {g['blas']}, 1 thread")
    print()
    print("| benchmark | figure | ratio |")
    print("|---|---|---|")
    for x in g["kinds"].values():
        print(f"| golden model, {x['label']} {x['k']}-term dot products (1 thread) | "
              f"{x['dots_per_s'] / 1e6:.2f} M/s | {x['ratio']:.0f}x the time of numpy float32 matmul |")
    for sim, x in s.items():
        print(f"| MMA4 core on {sim}, K=16 tiles, bit-exact | {x['tiles_per_s']:.2f} tiles/s "
              f"({x['cycles_per_s']:.0f} clocks/s) | {x['ratio_vs_verilator']:.4f} of Verilator |")
    print(f"| GEMM top {gm['m']}x{gm['n']}x{gm['k']} FP16->FP32, 1 core, {gm['backend']}, bit-exact | "
          f"utilisation {gm['utilization']:.3f} ({gm['cycles']} clocks) | "
          f"{gm['sim_cycles_per_s']:.0f} simulated clocks/s |")
