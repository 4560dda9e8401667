"""The ``tcore`` command line.

Subcommands import what they need when they run, so that ``tcore --help`` is instant and
``tcore bench`` can pin BLAS to one thread before NumPy loads.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

EXIT_OK, EXIT_MISMATCH, EXIT_USAGE = 0, 1, 2


#: ``tcore verify --kernel`` choices, as in ``golden.silicon.KERNELS`` (listed here so that
#: ``tcore --help`` need not import NumPy; a test checks that the two agree).
KERNEL_NAMES = ("f16_f32", "bf16_f32", "f16_f16", "e4m3_f32", "e5m2_f32", "e4m3_e5m2_f32",
                "e4m3_f16", "e4m3_f32_p128", "tf32_f32", "s8_s32", "s8_s32_sat", "u8_s8_s32")


class CliError(Exception):
    """An error reported as one line on stderr with exit status 2."""


# -- verify ---------------------------------------------------------------------------------------

def cmd_verify(args) -> int:
    import numpy as np
    from golden import get_arch
    from golden.silicon import KERNELS, VectorFileError, kernels_in, load, problem
    from sim.backends import RTL_BACKENDS, RTL_KERNELS, BackendError, run_tiles
    from sim.gemm import run_gemm
    from sim.runner import SimError

    arch = get_arch(args.arch)
    rtl = args.backend in RTL_BACKENDS
    if args.tiles is not None and args.tiles < 1:
        raise CliError(f"--tiles must be at least 1, not {args.tiles}")

    def refuse(name):
        """Why kernel ``name`` cannot run here (arch or backend), or None."""
        kind = KERNELS[name].kind
        if not arch.has(kind):
            return f"--arch {arch.name} has no {kind.upper()} path: kernel {name} is modelled for hopper"
        if rtl and name not in RTL_KERNELS:
            return (f"kernel {name} runs on --backend golden only: the RTL has the "
                    f"{', '.join(RTL_KERNELS)} kernels")
        return None

    if args.kernel != "all" and refuse(args.kernel):
        raise CliError(refuse(args.kernel))
    # Read and validate every file before running anything: a bad file fails fast.
    jobs = []
    for path in args.files:
        try:
            data = load(path)
            if args.kernel == "all":
                names = kernels_in(data)
                if not names:
                    raise VectorFileError(f"{path}: none of the keys "
                                          f"{', '.join(k.d_key for k in KERNELS.values())}")
            else:
                names = [args.kernel]
            for name in names:
                why = refuse(name)
                if why and rtl and arch.has(KERNELS[name].kind):
                    raise CliError(f"{path}: {why}")
                if why:
                    print(f"{Path(path).name}: skipping {name}: {arch.name} has no "
                          f"{KERNELS[name].kind.upper()} path")
                    continue
                jobs.append((path, data, problem(data, name, args.tiles, where=str(path))))
        except VectorFileError as e:
            raise CliError(str(e)) from None
    if not jobs:
        raise CliError(f"nothing to check: no kernel of these files runs with --arch {arch.name}")
    checked = mismatched = 0
    rtl = args.backend in RTL_BACKENDS
    for path, data, prob in jobs:
        k = prob.kernel
        # A whole GEMM on an RTL backend runs on the GEMM top, unless a tile path is asked for
        # or only some tiles are (the GEMM top computes every tile).
        whole = prob.gemm is not None and rtl and (args.through == "gemm" or
                                                   (args.through is None and args.tiles is None))
        if whole and np.any(data[k.c_key] != 0):
            print(f"{Path(path).name}: C is not zero (the GEMM top computes matmulT's A*B): "
                  "running its tiles through the core")
            whole = False
        try:
            if whole:
                if arch.name != "hopper":
                    raise BackendError(f"the RTL implements the Hopper arithmetic only, not --arch {arch.name}")
                d, info = run_gemm(args.backend, data["a"], data["b"], in_fmt=k.in_fmt,
                                   out_fmt=k.out_fmt, waves=args.waves, progress=False)
                got = d.reshape(d.shape[0] // 16, 16, d.shape[1] // 16, 16).transpose(0, 2, 1, 3)
                got = got.reshape(-1, 16, 16)[:len(prob.c)]
            else:
                got, info = run_tiles(args.backend, prob.a, prob.b, prob.c, arch=arch,
                                      through=args.through or "core", waves=args.waves,
                                      **k.mma_args())
        except (BackendError, SimError) as e:
            raise CliError(str(e)) from None
        if info.get("waves"):
            print(f"waveform: {info['waves']}")
        bad = int((got != prob.expected).sum())
        what = (f"gemm {prob.gemm[0]}x{prob.gemm[1]}x{prob.gemm[2]}, {len(prob.c)} tiles"
                if prob.gemm else f"{len(prob.c)} tiles")
        if whole:
            what += f", {info['cycles']} clk"
        print(f"{Path(path).name:40s} {k.name:13s} {what:28s} "
              f"checked {got.size:7d} mismatches {bad}", flush=True)
        checked += got.size
        mismatched += bad
    print(f"checked {checked} mismatches {mismatched}")
    return EXIT_OK if mismatched == 0 else EXIT_MISMATCH


# -- gemm -----------------------------------------------------------------------------------------

def random_operands(m, n, k, fmt, seed):
    """Random A (M, K) and B (K, N) bits: standard normal values rounded to the format."""
    import ml_dtypes
    import numpy as np
    rng = np.random.default_rng(seed)
    conv = np.float16 if fmt == "fp16" else ml_dtypes.bfloat16
    a = rng.standard_normal((m, k)).astype(conv).view(np.uint16)
    b = rng.standard_normal((k, n)).astype(conv).view(np.uint16)
    return a, b


def cmd_gemm(args) -> int:
    import time
    import numpy as np
    from golden.formats import to_float
    from golden.gemm import check_gemm, matmul_t
    from sim.gemm import run_gemm
    from sim.runner import SimError

    t0 = time.perf_counter()
    if args.format in ("nvfp4", "mxfp4"):
        return _gemm_fp4(args, t0)
    in_fmt, out_fmt = args.format, {"f32": "fp32", "f16": "fp16"}[args.acc]
    try:
        check_gemm(args.m, args.n, args.k, in_fmt, out_fmt)
    except ValueError as e:
        raise CliError(str(e)) from None
    if args.arch != "hopper" and args.backend != "golden":
        raise CliError(f"the RTL implements the Hopper arithmetic only, not --arch {args.arch}")
    a, b = random_operands(args.m, args.n, args.k, in_fmt, args.seed)
    try:
        d, info = run_gemm(args.backend, a, b, in_fmt=in_fmt, out_fmt=out_fmt, cores=args.cores,
                           waves=args.waves, progress=not args.json)
    except SimError as e:
        raise CliError(str(e)) from None
    want = matmul_t(a, b, in_fmt=in_fmt, out_fmt=out_fmt, arch=args.arch)
    mismatches = int((d != want).sum())
    exact = to_float(a, in_fmt) @ to_float(b, in_fmt)
    err = float(np.nanmax(np.abs(to_float(d, out_fmt) - exact)))
    r = _gemm_result(args, in_fmt, out_fmt, info, mismatches, t0, max_abs_err_vs_fp64=err)
    cycles, peak = r["cycles"], r["peak_fma_per_cycle"]
    print(f"GEMM {args.m}x{args.n}x{args.k} {in_fmt} -> {out_fmt} on {args.backend}"
          f"{f' ({args.cores} core' + ('s' if args.cores > 1 else '') + ')' if cycles else ''}")
    if cycles:
        print(f"  cycles          {cycles}  ({r['sim_cycles_per_s']:.0f} simulated cycles/s)")
        print(f"  FMA per clock   {r['fma_per_cycle']:.1f} of {peak} peak  (utilisation {r['utilization']:.3f})")
    return _gemm_report(r, d.size, info, args.json,
                        f"  max |D - fp64|  {err:.3g}  (float64 product of the same inputs)")


def _gemm_fp4(args, t0) -> int:
    """``tcore gemm --format nvfp4|mxfp4``: quantise random float32 A and B with the golden
    quantiser, run the block-scaled GEMM, check it bit for bit, and measure what 4 bits cost
    against the float64 product of the unquantised inputs."""
    import numpy as np
    from golden import nvfp4
    from golden.gemm import check_gemm
    from sim.gemm import run_fp4_gemm
    from sim.runner import SimError

    fmt = args.format
    block = nvfp4.FORMATS[fmt]["block"]
    try:
        check_gemm(args.m, args.n, args.k)
    except ValueError as e:
        raise CliError(str(e)) from None
    if args.k % block:
        raise CliError(f"{fmt} blocks K by {block}: --k must be a multiple of {block}, not {args.k}")
    if args.acc != "f32":
        raise CliError(f"{fmt} GEMMs accumulate in FP32 (the tensor scales apply to the FP32 "
                       "result): use --acc f32")
    if args.arch != "hopper":
        raise CliError(f"{fmt} runs on the Hopper FP16/BF16 arithmetic only, not --arch {args.arch}")
    rng = np.random.default_rng(args.seed)
    a = rng.standard_normal((args.m, args.k)).astype(np.float32)
    b = rng.standard_normal((args.k, args.n)).astype(np.float32)
    qa, qbt = nvfp4.quantize(a, fmt), nvfp4.quantize(np.ascontiguousarray(b.T), fmt)
    try:
        d, info = run_fp4_gemm(args.backend, qa, qbt, cores=args.cores, waves=args.waves,
                               progress=not args.json)
    except SimError as e:
        raise CliError(str(e)) from None
    want = nvfp4.gemm(qa, qbt)
    mismatches = int((d != want).sum())
    exact = a.astype(np.float64) @ b.astype(np.float64)
    got = d.view(np.float32).astype(np.float64)
    rel = float(np.linalg.norm(got - exact) / np.linalg.norm(exact))
    gcycles = info.get("gemm_cycles")
    fma = args.m * args.n * args.k
    r = _gemm_result(args, fmt, "fp32", info, mismatches, t0, rel_err_vs_fp64=rel, gemm_cycles=gcycles,
                     gemm_utilization=fma / gcycles / (64 * args.cores) if gcycles else None,
                     tensor_scale_a=float(qa.tensor_scale), tensor_scale_b=float(qbt.tensor_scale))
    cycles, peak = r["cycles"], r["peak_fma_per_cycle"]
    print(f"GEMM {args.m}x{args.n}x{args.k} {fmt} (decoded to {nvfp4.FORMATS[fmt]['decoded']}) -> fp32 "
          f"on {args.backend}")
    if cycles:
        print(f"  cycles          {cycles} in all: decode + {gcycles} GEMM + epilogue "
              f"({r['sim_cycles_per_s']:.0f} simulated cycles/s)")
        print(f"  FMA per clock   {r['fma_per_cycle']:.1f} of {peak} peak overall, "
              f"{fma / gcycles:.1f} in the GEMM (utilisation {r['gemm_utilization']:.3f})")
    return _gemm_report(r, d.size, info, args.json,
                        f"  rel. error      {rel:.4g}  (Frobenius, vs the float64 product of the "
                        "unquantised inputs)")


def _gemm_result(args, fmt: str, acc: str, info: dict, mismatches: int, t0: float, **extra) -> dict:
    """The ``tcore gemm --json`` object: the run's figures and ``extra`` keys."""
    import time
    cycles = info["cycles"]
    fma = args.m * args.n * args.k
    peak = 64 * args.cores
    r = {"m": args.m, "n": args.n, "k": args.k, "format": fmt, "acc": acc, "cores": args.cores,
         "backend": args.backend, "cycles": cycles,
         "fma_per_cycle": fma / cycles if cycles else None, "peak_fma_per_cycle": peak,
         "utilization": fma / cycles / peak if cycles else None, "mismatches": mismatches,
         **extra, "wall_s": time.perf_counter() - t0,
         "sim_cycles_per_s": cycles / info["sim_s"] if cycles else None, "seed": args.seed}
    if info.get("waves"):
        r["waves"] = str(info["waves"])
    return r


def _gemm_report(r: dict, outputs: int, info: dict, as_json: bool, error_line: str) -> int:
    """The last lines of ``tcore gemm``: bit-exactness, error, waveform, JSON; the exit status."""
    bad = r["mismatches"]
    print(f"  bit-exact       {'yes' if bad == 0 else 'NO'}: {bad} of {outputs} outputs differ "
          "from the golden model")
    print(error_line)
    if info.get("waves"):
        print(f"  waveform        {info['waves']}")
    if as_json:
        print(json.dumps(r))
    return EXIT_OK if bad == 0 else EXIT_MISMATCH


# -- verilog --------------------------------------------------------------------------------------

def cmd_verilog(args) -> int:
    from rtl.designs import DESIGNS, LINT_PARAMS, to_verilog

    out = Path(args.o)
    out.mkdir(parents=True, exist_ok=True)
    names = args.design or sorted(DESIGNS)
    for name in names:
        if name not in DESIGNS:
            raise CliError(f"unknown design {name!r}; designs: {', '.join(sorted(DESIGNS))}")
        path = out / f"{name}.v"
        path.write_text(to_verilog(name, **LINT_PARAMS[name]))
        print(f"wrote {path}", flush=True)
    return EXIT_OK


# -- probe ----------------------------------------------------------------------------------------

def cmd_probe(args) -> int:
    from golden.probe import ProbeError, run_probe

    try:
        written = run_probe(Path(args.out), tiles=args.tiles, seed=args.seed, nvcc=args.nvcc)
    except ProbeError as e:
        raise CliError(str(e)) from None
    print(f"wrote {len(written)} files into {args.out}; check them with: tcore verify {args.out}/*.npz")
    return EXIT_OK


# -- layout ---------------------------------------------------------------------------------------

def cmd_layout(args) -> int:
    from sim.layout import rtl_layout

    lay = rtl_layout()
    if args.json:
        print(json.dumps(lay))
    else:
        for heading, lanes in lay.items():
            print(f"# {heading} num_elements={len(lanes[0])} (value = storage index in the 16x16 buffer)")
            for lane, slots in enumerate(lanes):
                print(f"lane {lane:2d}: " + " ".join(f"{v:3d}" for v in slots))
    return EXIT_OK


# -- bench ----------------------------------------------------------------------------------------

def _pin_blas_threads():
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = "1"


#: ``tcore bench golden``'s input kinds: (label, golden.matmul arguments, K of one instruction).
GOLDEN_BENCH_KINDS = {
    "fp16_f32": ("FP16->FP32", "float16", {}, 16),
    "bf16_f32": ("BF16->FP32", "bfloat16", {}, 16),
    "fp16_f16": ("FP16->FP16", "float16", {"out": "fp16"}, 16),
    "e4m3_f32": ("FP8 E4M3->FP32 (wgmma)", "float8_e4m3fn", {"instr": "wgmma"}, 32),
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


def bench_golden(tiles: int = 4096, repeat: int = 5, seed: int = 1) -> dict:
    """Time the golden model against float32 ``numpy.matmul`` (+ C) on the same random tiles,
    for each input kind: ``tiles`` 16x16 tiles of one instruction's K (16, 32 for FP8 and
    INT8, 8 for TF32), one thread, best of ``repeat``."""
    import time
    import ml_dtypes
    import numpy as np
    from golden import matmul

    if tiles < 1:
        raise CliError(f"--tiles must be at least 1, not {tiles}")
    rng = np.random.default_rng(seed)

    def best(fn):
        times = []
        for _ in range(repeat):
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
        return min(times)

    kinds = {}
    for key, (label, dtype, kw, k) in GOLDEN_BENCH_KINDS.items():
        dt = np.dtype(getattr(ml_dtypes, dtype, None) or dtype)
        if dt.kind == "i":
            a = rng.integers(-128, 128, (tiles, 16, k)).astype(dt)
            b = rng.integers(-128, 128, (tiles, k, 16)).astype(dt)
            c = rng.integers(-2**20, 2**20, (tiles, 16, 16)).astype(np.int32)
        else:
            a = rng.standard_normal((tiles, 16, k)).astype(dt)
            b = rng.standard_normal((tiles, k, 16)).astype(dt)
            c = rng.standard_normal((tiles, 16, 16)).astype(np.float16 if kw.get("out") else np.float32)
        a32, b32, c32 = a.astype(np.float32), b.astype(np.float32), c.astype(np.float32)
        golden_s = best(lambda: matmul(a, b, c, **kw))
        matmul_s = best(lambda: np.matmul(a32, b32) + c32)
        dots = tiles * 256
        kinds[key] = {"label": label, "k": k, "dots": dots, "golden_s": golden_s,
                      "matmul_f32_s": matmul_s, "dots_per_s": dots / golden_s,
                      "ratio": golden_s / matmul_s}
    f16 = kinds["fp16_f32"]
    return {"tiles": tiles, "blas": _blas(), "threads": 1, "kinds": kinds,
            **{key: f16[key] for key in ("dots", "golden_s", "matmul_f32_s", "dots_per_s", "ratio")}}


def bench_sim(tiles: dict | None = None, seed: int = 1) -> dict:
    """Tiles per second through the MMA4 core (fused K=16, FP16 -> FP32) on each simulator.

    Builds first (not timed).  Rates use the time spent simulating (driving beats and reading
    D), not the simulator's start-up, which ``wall_s`` includes.
    """
    import time
    import numpy as np
    from golden import mma
    from sim.core import run_core
    from sim.runner import build
    from sim.core import DEFAULT_PARAMS

    tiles = tiles or {"verilator": 256, "icarus": 4, "amaranth": 2}
    rng = np.random.default_rng(seed)
    out = {}
    for sim, n in tiles.items():
        a = rng.standard_normal((n, 16, 16)).astype(np.float16).view(np.uint16)
        b = rng.standard_normal((n, 16, 16)).astype(np.float16).view(np.uint16)
        c = rng.standard_normal((n, 16, 16)).astype(np.float32).view(np.uint32)
        if sim != "amaranth":
            build(sim, "mma4", DEFAULT_PARAMS)
        print(f"  {sim}: {n} tiles ...", flush=True)
        t = time.perf_counter()
        d, info = run_core(sim, a, b, c, in_fmt="fp16", out_fmt="fp32")
        wall = time.perf_counter() - t
        bad = int((d != mma(a, b, c)).sum())
        if bad:
            raise CliError(f"{sim}: {bad} outputs differ from the golden model")
        out[sim] = {"tiles": n, "wall_s": wall, "sim_s": info["sim_s"], "mismatches": bad,
                    "tiles_per_s": n / info["sim_s"], "cycles": info["cycles"],
                    "cycles_per_s": info["cycles"] / info["sim_s"]}
    base = out.get("verilator", next(iter(out.values())))["tiles_per_s"]
    for r in out.values():
        r["ratio_vs_verilator"] = r["tiles_per_s"] / base
    return out


def bench_gemm(m=128, n=128, k=128, backend="verilator", seed=1) -> dict:
    """A random FP16 -> FP32 GEMM on the GEMM top: clocks, utilisation, bit-exactness."""
    from golden.gemm import matmul_t
    from sim.gemm import run_gemm

    a, b = random_operands(m, n, k, "fp16", seed)
    d, info = run_gemm(backend, a, b, progress=False)
    bad = int((d != matmul_t(a, b)).sum())
    if bad:
        raise CliError(f"GEMM: {bad} outputs differ from the golden model")
    return {"m": m, "n": n, "k": k, "backend": backend, "cycles": info["cycles"],
            "utilization": m * n * k / info["cycles"] / 64, "mismatches": bad,
            "sim_cycles_per_s": info["cycles"] / info["sim_s"]}


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


def bench_all() -> dict:
    import datetime
    print("  golden model ...", flush=True)
    g = bench_golden()
    s = bench_sim()
    print("  GEMM 128x128x128 on Verilator ...", flush=True)
    gm = bench_gemm()
    return {"date": datetime.date.today().isoformat(), "machine": _machine(), "golden": g, "sim": s,
            "gemm": gm}


def print_bench_table(r: dict):
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


def cmd_bench(args) -> int:
    if args.what == "all":
        r = bench_all()
        print()
        print_bench_table(r)
        if args.json:
            print(json.dumps(r))
        return EXIT_OK
    if args.what == "sim":
        r = bench_sim()
        print(f"{'simulator':10s} {'tiles':>6s} {'sim s':>7s} {'wall s':>7s} {'tiles/s':>9s} "
              f"{'cycles/s':>9s} {'vs verilator':>13s}")
        for sim, x in r.items():
            print(f"{sim:10s} {x['tiles']:6d} {x['sim_s']:7.2f} {x['wall_s']:7.2f} "
                  f"{x['tiles_per_s']:9.2f} {x['cycles_per_s']:9.0f} {x['ratio_vs_verilator']:12.4f}x")
        if args.json:
            print(json.dumps(r))
        return EXIT_OK
    if args.what == "golden":
        r = bench_golden(tiles=args.tiles)
        print(f"golden model against float32 numpy.matmul + C on {r['tiles']} random 16x16 tiles "
              f"per kind (best of 5, 1 thread, NumPy with {r['blas']})")
        print(f"{'input kind':24s} {'terms':>5s} {'golden ms':>10s} {'M dots/s':>9s} "
              f"{'matmul ms':>10s} {'ratio':>6s}")
        for x in r["kinds"].values():
            print(f"{x['label']:24s} {x['k']:5d} {x['golden_s'] * 1e3:10.1f} "
                  f"{x['dots_per_s'] / 1e6:9.2f} {x['matmul_f32_s'] * 1e3:10.2f} {x['ratio']:5.0f}x")
        if args.json:
            print(json.dumps(r))
        return EXIT_OK
    raise CliError(f"unknown benchmark {args.what!r}")


# -- synth ----------------------------------------------------------------------------------------

def cmd_synth(args) -> int:
    from sim.synth import SYNTH_PARAMS, SynthError, synth

    params = dict(SYNTH_PARAMS.get(args.design, {}))
    try:
        r = synth(args.design, device=args.device, params=params, freq_mhz=args.freq,
                  progress=lambda line: print(f"  {line}", file=sys.stderr, flush=True))
    except SynthError as e:
        raise CliError(str(e)) from None
    print(f"{r['design']} {r['params']} on {r['device']} (out of context)")
    for key, name in (("luts", "LUT4"), ("ffs", "flip-flops"), ("dsps", "MULT18X18D"), ("brams", "DP16KD")):
        print(f"  {name:11s} {r[key]:7d} of {r[key + '_available']}")
    fmax = f"{r['fmax_mhz']:.1f} MHz" if r["fmax_mhz"] else "n/a (no clock)"
    print(f"  Fmax        {fmax}" + (f"  (latency {r['latency_clocks']} clocks)" if "latency_clocks" in r else ""))
    if args.json:
        print(json.dumps(r))
    return EXIT_OK


# -- plot -----------------------------------------------------------------------------------------

def cmd_plot(args) -> int:
    from sim import plots

    out = Path(args.o)
    if out.parent and not out.parent.exists():
        raise CliError(f"no such folder: {out.parent}")
    try:
        plots._pyplot()
    except RuntimeError as e:
        raise CliError(str(e)) from None
    if args.what == "layout":
        from sim.layout import rtl_layout
        plots.plot_layout(rtl_layout(), str(out))
    elif args.what == "fp8-accumulation":
        errors = plots.fp8_accumulation_errors()
        names = list(plots.FP8_METHODS)
        print("median relative error vs float64, 64 x 64 x K, C = 0; columns: " +
              "; ".join(f"({i + 1}) {name}" for i, name in enumerate(names)))
        print(f"{'K':>6s}" + "".join(f"  {d[:7] + ' (' + str(i + 1) + ')':>13s}"
                                     for d in errors for i in range(len(names))))
        for j, k in enumerate(plots.FP8_KS):
            print(f"{k:6d}" + "".join(f"  {errors[d][name][j]:13.3e}" for d in errors for name in names))
        plots.plot_fp8_accumulation(errors, str(out), ks=plots.FP8_KS)
    else:
        errors = plots.accumulation_errors()
        print(f"{'K':>6s}" + "".join(f"  {d[:7] + ' ' + acc:>15s}" for d in errors for acc in ("fp16", "fp32")))
        for i, k in enumerate(plots.ACC_KS):
            print(f"{k:6d}" + "".join(f"  {errors[d][acc][i]:15.3e}" for d in errors for acc in ("fp16", "fp32")))
        plots.plot_accumulation(errors, str(out))
    print(f"wrote {out}")
    return EXIT_OK


# -- parser ---------------------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tcore", description="Bit-exact NVIDIA tensor-core model: "
                                "golden model, RTL, benches.")
    sub = p.add_subparsers(dest="cmd", required=True, metavar="COMMAND")

    v = sub.add_parser("verify", help="check a backend against captured silicon vectors")
    v.add_argument("files", nargs="+", metavar="FILE.npz")
    v.add_argument("--kernel", default="all", choices=[*KERNEL_NAMES, "all"],
                   help="the d_<kernel> array to check (default: every one the file has)")
    v.add_argument("--backend", default="golden")
    v.add_argument("--through", default=None, choices=["core", "wmma", "gemm"],
                   help="RTL path: tiles straight into the MMA core (the default, but for whole "
                        "GEMMs without --tiles), memory -> WMMA ops -> memory, or the GEMM top")
    v.add_argument("--arch", default="hopper", choices=["volta", "ampere", "hopper"])
    v.add_argument("--tiles", type=int, default=None, metavar="N",
                   help="only the first N tiles (16x16 output tiles of a whole GEMM)")
    v.add_argument("--waves", action="store_true", default=os.environ.get("WAVES") == "1",
                   help="dump waveforms (RTL backends; also WAVES=1): FST where available, else VCD")
    v.set_defaults(func=cmd_verify)

    gm = sub.add_parser("gemm", help="a random GEMM through the matmulT GEMM top, checked bit for bit")
    gm.add_argument("--m", type=int, required=True)
    gm.add_argument("--n", type=int, required=True)
    gm.add_argument("--k", type=int, required=True)
    gm.add_argument("--format", default="fp16", choices=["fp16", "bf16", "nvfp4", "mxfp4"],
                    help="operands: FP16/BF16 bits, or float32 quantised to NVFP4/MXFP4 and decoded "
                         "by the FP4 front end")
    gm.add_argument("--acc", default="f32", choices=["f32", "f16"])
    gm.add_argument("--cores", type=int, default=1, help="4x4x4 cores (warps), 1..8")
    gm.add_argument("--backend", default="verilator", choices=["golden", "amaranth", "icarus", "verilator"])
    gm.add_argument("--arch", default="hopper", choices=["volta", "ampere", "hopper"])
    gm.add_argument("--seed", type=int, default=1)
    gm.add_argument("--waves", action="store_true", default=os.environ.get("WAVES") == "1",
                    help="dump waveforms (also WAVES=1)")
    gm.add_argument("--json", action="store_true", help="last line: one JSON object")
    gm.set_defaults(func=cmd_gemm)

    g = sub.add_parser("verilog", help="write the Verilog of every top-level design")
    g.add_argument("-o", required=True, metavar="DIR", help="output folder")
    g.add_argument("--design", action="append", help="only this design (repeatable)")
    g.set_defaults(func=cmd_verilog)

    pr = sub.add_parser("probe", help="capture this machine's GPU tensor-core results (needs nvcc and a GPU)")
    pr.add_argument("--out", required=True, metavar="DIR")
    pr.add_argument("--tiles", type=int, default=512, help="tiles per input class")
    pr.add_argument("--seed", type=int, default=2026)
    pr.add_argument("--nvcc", default="nvcc")
    pr.set_defaults(func=cmd_probe)

    lay = sub.add_parser("layout", help="the WMMA fragment layout (lane/slot map) of the RTL")
    lay.add_argument("--json", action="store_true", help="one JSON object keyed by fragment kind")
    lay.set_defaults(func=cmd_layout)

    sy = sub.add_parser("synth", help="FPGA synthesis, place and route (ECP5): area and Fmax")
    sy.add_argument("--design", default="mma4", help="mma4 (default), gemm, wmma, fp4dec, fp4gemm")
    sy.add_argument("--device", default="ecp5-85k", choices=["ecp5-25k", "ecp5-45k", "ecp5-85k"])
    sy.add_argument("--freq", type=float, default=100.0, help="target clock for placement, MHz")
    sy.add_argument("--json", action="store_true", help="last line: one JSON object")
    sy.set_defaults(func=cmd_synth)

    pl = sub.add_parser("plot", help="pictures: fragment ownership, accumulation error vs K, "
                                     "Hopper's FP8 accumulation")
    pl.add_argument("what", choices=["layout", "accumulation", "fp8-accumulation"])
    pl.add_argument("-o", required=True, metavar="FILE.png")
    pl.set_defaults(func=cmd_plot)

    b = sub.add_parser("bench", help="benchmarks that print figures")
    b.add_argument("what", choices=["golden", "sim", "all"],
                   help="all: golden, sim and a GEMM, as one table (make bench)")
    b.add_argument("--tiles", type=int, default=4096)
    b.add_argument("--json", action="store_true", help="last line: one JSON object")
    b.set_defaults(func=cmd_bench)
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if args.cmd == "bench":
        _pin_blas_threads()
    try:
        return args.func(args)
    except (CliError, ValueError, TypeError) as e:
        print(f"tcore {args.cmd}: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"tcore {args.cmd}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
