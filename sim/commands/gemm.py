"""``tcore gemm``: a GEMM (random, or the user's matrices) through the matmulT GEMM top, checked
bit for bit.  The arguments become one :class:`tcore.sim.jobs.GemmJob` (every refusal first, each as
a one-line error); :func:`tcore.sim.jobs.run_job` runs it; :func:`report` prints the result."""

from __future__ import annotations

import json
from pathlib import Path

from tcore.sim.jobs import ACCUMULATORS, FP4_FORMATS, format_choices, lowprec_formats
from tcore.numerics.formats import PTX_NAMES

from tcore.rtl.sizes import LANES

from .common import EXIT_MISMATCH, EXIT_OK, CliError, operation, refuse_golden_options, wave_note

NAME = "gemm"
HELP = "a GEMM (random, or your matrices) through the matmulT GEMM top, checked bit for bit"


def add_arguments(parser):
    parser.add_argument("--m", type=int, default=None, help="rows of A and D (from --a if given)")
    parser.add_argument("--n", type=int, default=None, help="columns of B and D (from --b if given)")
    parser.add_argument("--k", type=int, default=None, help="columns of A, rows of B (from --a if given)")
    parser.add_argument("--a", default=None, metavar="A.npy",
                        help="A (M x K): float16 or bfloat16 values, or uint16 bits with --format")
    parser.add_argument("--b", default=None, metavar="B.npy", help="B (K x N), the same format as A")
    parser.add_argument("--c", default=None, metavar="C.npy",
                        help="C (M x N; float32, float16 with --acc f16): D = A*B + C (golden backend)")
    parser.add_argument("-o", default=None, metavar="D.npz", help="write D: keys d (values), d_bits")
    parser.add_argument("--format", default=None, choices=format_choices(),
                        help="operands: FP16/BF16 (default fp16; with --a, the array's dtype); random "
                             "TF32, FP8 (e4m3, e5m2, e4m3_e5m2: A E4M3, B E5M2) or INT8 (s8; u8: A "
                             "unsigned, B signed) operands; or random float32 quantised to NVFP4/MXFP4 "
                             "and decoded by the FP4 front end")
    parser.add_argument("--acc", default=None, choices=list(ACCUMULATORS),
                        help="accumulator: f32 (default), f16 (FP16 and FP8 inputs); s32 (INT8, "
                             "wrapped; the default there) or s32sat (saturated per 32-wide K step)")
    parser.add_argument("--sparse", action="store_true",
                        help="2:4 sparse A (FP16/BF16): A (random, or --a) pruned by the golden "
                             "pruner (the two largest magnitudes of every 4 along K), run as "
                             "mma.sp k32 steps; FMA per clock counts logical FMA (peak 128 a core)")
    parser.add_argument("--warps", "--cores", dest="warps", type=int, default=1, help="warps, each with a 4x4x4 core, 1..8 (--cores: the old name)")
    parser.add_argument("--lanes", type=int, default=64, choices=LANES,
                        help="multipliers of each core (products per clock; default 64)")
    parser.add_argument("--backend", default="verilator", choices=["golden", "amaranth", "icarus", "verilator"])
    parser.add_argument("--arch", default="hopper", choices=["volta", "ampere", "hopper"])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--waves", action="store_true", default=None,
                        help="dump waveforms (RTL backends; also WAVES=1) to build/waves/, named after "
                             "the run: FST where available (Icarus; Verilator with liblz4-dev), else VCD")
    parser.add_argument("--json", action="store_true", help="last line: one JSON object")
    parser.add_argument("--scheduler", default=None, metavar="ADDRESS",
                        help="golden backend, FP16/BF16: compute D's blocks on this dask.distributed "
                             "scheduler (e.g. tcp://127.0.0.1:8786; needs tcore[dask])")


def run(args) -> int:
    import time
    from tcore.sim.jobs import GemmError, run_job

    t0 = time.perf_counter()
    job = make_job(args)
    mma = client = None
    if args.scheduler:                  # the golden model's output blocks on a dask cluster
        from functools import partial
        from tcore.golden.cluster import cluster_mma, connect
        try:
            client = connect(args.scheduler)
        except (ImportError, OSError) as e:
            raise CliError(str(e)) from None
        mma = partial(cluster_mma, client)
    try:
        result = run_job(job, mma=mma)
    except GemmError as e:
        raise CliError(str(e)) from None
    finally:
        if client is not None:
            client.close()
    return report(result, t0, output=args.o, as_json=args.json)


# -- the job --------------------------------------------------------------------------------------

def make_job(args):
    """The :class:`tcore.sim.jobs.GemmJob` the arguments ask for (operand files read); CliError for
    the first thing refused."""
    from tcore.sim.jobs import GemmJob

    check_output(args.o)
    if args.seed < 0:
        raise CliError(f"--seed must be a non-negative integer, not {args.seed}")
    refuse_golden_options(args, (("--waves", args.waves), ("--warps", args.warps != 1),
                                 ("--lanes", args.lanes != 64)))
    if args.backend != "golden":        # the build's own refusals (warps), in the flag's name
        from tcore.rtl.designs import preset
        try:
            preset("lint", "gemm").replace(warps=args.warps, lanes=args.lanes)
        except ValueError as e:
            raise CliError(f"--{e}") from None
    if args.scheduler and args.backend != "golden":
        raise CliError("--scheduler is for --backend golden (RTL simulations run here)")
    if args.scheduler and args.format not in (None, "fp16", "bf16"):
        raise CliError(f"--scheduler runs --format fp16 or bf16 GEMMs, not {args.format}")
    run = dict(backend=args.backend, arch=args.arch, warps=args.warps, lanes=args.lanes,
               seed=args.seed, progress=not args.json)
    if args.sparse:
        return _sparse_job(args, run)
    if args.format in lowprec_formats():
        fmt = args.format
        op = operation(*lowprec_formats()[fmt], args.acc)
        acc = args.acc or PTX_NAMES.get(op.acc, op.acc)
        if args.a or args.b or args.c:
            raise CliError(f"--format {fmt} runs random operands; --a/--b/--c take FP16 or BF16 matrices")
        if None in (args.m, args.n, args.k):
            raise CliError("--m, --n and --k are required")
        if args.arch != "hopper":
            raise CliError(f"--format {fmt} is modelled for --arch hopper only")
        if args.backend == "amaranth":
            raise CliError(f"--format {fmt} runs on --backend verilator, icarus or golden")
        return GemmJob(args.m, args.n, args.k, fmt, acc, **run,
                       waves=args.waves and wave_label(args, fmt, args.acc))
    acc = args.acc or "f32"
    if args.format in FP4_FORMATS:
        fmt = args.format
        if args.a or args.b or args.c:
            raise CliError(f"--format {fmt} quantises random float32 operands; --a/--b/--c "
                           "take FP16 or BF16 matrices")
        if None in (args.m, args.n, args.k):
            raise CliError("--m, --n and --k are required")
        _check_fp4(args.m, args.n, args.k, fmt, acc, args.arch)
        return GemmJob(args.m, args.n, args.k, fmt, acc, **run,
                       waves=args.waves and wave_label(args, fmt, acc))
    if args.a is None:
        operation(args.format or "fp16", None, acc)
    a, b, c, in_fmt, (m, n, k) = _operands(args, acc)
    op = operation(in_fmt, None, acc)
    if args.arch != "hopper" and args.backend != "golden":
        raise CliError(f"the RTL implements the Hopper arithmetic only, not --arch {args.arch}")
    if args.backend != "golden" or args.a is None:
        from tcore.golden.gemm import check_gemm
        try:
            check_gemm(m, n, k, op.a, op.acc)
        except ValueError as e:
            raise CliError(str(e)) from None
    return GemmJob(m, n, k, in_fmt, acc, **run, a=a, b=b, c=c,
                   files=None if args.a is None else (args.a, args.b),
                   waves=args.waves and wave_label(args, in_fmt, acc))


def _sparse_job(args, run):
    """The job of ``--sparse``: FP16/BF16 A and B (random or files), A pruned by the run."""
    from tcore.sim.jobs import GemmJob
    if args.format not in (None, "fp16", "bf16"):
        raise CliError(f"--sparse runs FP16 or BF16 A (mma.sp k32), not --format {args.format}")
    acc = args.acc or "f32"
    operation(args.format or "fp16", None, acc, sparse=True)
    if args.c is not None:
        raise CliError("--c has no meaning with --sparse (the GEMM top computes A*B, C = 0)")
    if args.scheduler:
        raise CliError("--scheduler runs dense GEMMs; --sparse runs here")
    if args.arch != "hopper":
        raise CliError(f"2:4 sparse MMA is modelled for --arch hopper only, not {args.arch}")
    if args.backend == "amaranth":
        raise CliError("--sparse runs on --backend verilator, icarus or golden")
    a, b, _, in_fmt, (m, n, k) = _operands(args, acc)
    step = operation(in_fmt, None, acc, sparse=True).k_step
    if min(m, n) < 16 or m % 16 or n % 16 or k < step or k % step:
        raise CliError(f"--sparse takes M and N multiples of 16 and K a multiple of {step} (one "
                       f"mma.sp k{step} a step), not {m}x{n}x{k}")
    return GemmJob(m, n, k, in_fmt, acc, **run, a=a, b=b, sparse=True,
                   files=None if args.a is None else (args.a, args.b),
                   waves=args.waves and wave_label(args, in_fmt + "-sparse", acc))


def _operands(args, acc):
    """A, B and C bits (None, None, None: random), the input format and (M, N, K): the user's
    files, or --m, --n and --k."""
    import numpy as np
    from tcore.sim.operands import OperandError, load_matrix, operand_bits
    if (args.a is None) != (args.b is None):
        raise CliError("--a and --b go together")
    if args.a is None:
        for name in ("m", "n", "k"):
            if getattr(args, name) is None:
                raise CliError(f"--{name} is required (or give the operands with --a and --b)")
        if args.c is not None:
            raise CliError("--c goes with --a and --b")
        return None, None, None, args.format or "fp16", (args.m, args.n, args.k)
    try:
        a, fa = operand_bits(load_matrix(args.a, "a"), "a", args.format)
        b, fb = operand_bits(load_matrix(args.b, "b"), "b", args.format or fa)
    except OperandError as e:
        raise CliError(str(e)) from None
    if fa != fb:
        raise CliError(f"--a is {fa} but --b is {fb}: both operands take one format")
    if a.shape[1] != b.shape[0]:
        raise CliError(f"--a is {a.shape[0]}x{a.shape[1]} but --b is {b.shape[0]}x{b.shape[1]}: K differs")
    mnk = {"m": a.shape[0], "n": b.shape[1], "k": a.shape[1]}
    for name, v in mnk.items():
        given = getattr(args, name)
        if given is not None and given != v:
            raise CliError(f"--{name} {given} does not match the operands' {name.upper()} = {v}")
    c = None
    if args.c is not None:
        if args.backend != "golden":
            raise CliError("--c (D = A*B + C) runs on --backend golden only: the GEMM top computes "
                           "matmulT's A*B, with C = 0")
        try:
            cx = load_matrix(args.c, "c")
        except OperandError as e:
            raise CliError(str(e)) from None
        want = operation(fa, None, acc).acc_dtype
        if cx.dtype != want:
            raise CliError(f"--c must be {np.dtype(want).name} for --acc {acc}, not {cx.dtype}")
        if cx.shape != (a.shape[0], b.shape[1]):
            raise CliError(f"--c must be {a.shape[0]}x{b.shape[1]}, not {cx.shape[0]}x{cx.shape[1]}")
        c = cx.view(operation(fa, None, acc).acc_bits)
    return np.ascontiguousarray(a), np.ascontiguousarray(b), c, fa, tuple(mnk.values())


def _check_fp4(m, n, k, fmt, acc, arch):
    """Refuse an NVFP4/MXFP4 GEMM the front end cannot run."""
    from tcore.golden import nvfp4
    from tcore.golden.gemm import check_gemm
    block = nvfp4.FORMATS[fmt]["block"]
    try:
        check_gemm(m, n, k)
    except ValueError as e:
        raise CliError(str(e)) from None
    if k % block:
        raise CliError(f"{fmt} blocks K by {block}: --k must be a multiple of {block}, not {k}")
    if acc != "f32":
        raise CliError(f"{fmt} GEMMs accumulate in FP32 (the tensor scales apply to the FP32 "
                       "result): use --acc f32")
    if arch != "hopper":
        raise CliError(f"{fmt} runs on the Hopper FP16/BF16 arithmetic only, not --arch {arch}")


def check_output(path: str | None):
    """Refuse a bad ``-o`` before anything runs."""
    if path is None:
        return
    p = Path(path)
    if p.suffix != ".npz":
        raise CliError(f"-o {path}: the output is an .npz file (keys d and d_bits); name it *.npz")
    if p.is_dir():
        raise CliError(f"-o {path}: is a directory")
    if not p.parent.is_dir():
        raise CliError(f"-o {path}: no such folder {p.parent}")


def wave_label(args, fmt: str, acc) -> str:
    """A GEMM run's waveform name: what ran, on what, from which seed or files."""
    what = (f"{Path(args.a).stem}-{Path(args.b).stem}" if args.a
            else f"{args.m}x{args.n}x{args.k}-seed{args.seed}")
    lanes = f"-lanes{args.lanes}" if args.lanes != 64 else ""
    return f"gemm-{what}-{fmt}-{acc}-warps{args.warps}{lanes}-{args.backend}"


# -- the report -----------------------------------------------------------------------------------

def summary(r, wall_s: float) -> dict:
    """The ``tcore gemm --json`` object of result ``r``."""
    job, cycles = r.job, r.cycles
    fma, peak = job.m * job.n * job.k, job.peak
    if job.format in FP4_FORMATS:
        extra = {"rel_err_vs_fp64": r.error, "gemm_cycles": r.gemm_cycles,
                 "gemm_utilization": fma / r.gemm_cycles / peak if r.gemm_cycles else None,
                 "tensor_scale_a": r.tensor_scales[0], "tensor_scale_b": r.tensor_scales[1]}
    else:
        extra = {"max_abs_err_vs_fp64": r.error, "inputs": "files" if job.files else "random"}
    s = {"m": job.m, "n": job.n, "k": job.k, "format": job.format, "sparse": job.sparse,
         "acc": _acc_name(job),
         "warps": job.warps, "lanes": job.lanes, "backend": job.backend, "cycles": cycles,
         "fma_per_cycle": fma / cycles if cycles else None, "peak_fma_per_cycle": peak,
         "utilization": fma / cycles / peak if cycles else None, "mismatches": r.mismatches,
         **extra, "wall_s": wall_s,
         "sim_cycles_per_s": cycles / r.sim_s if cycles else None, "seed": job.seed}
    if r.waves:
        s["waves"] = str(r.waves)
    return s


def _acc_name(job) -> str:
    """The accumulator as reports name it: D's format, but for the low-precision inputs (--acc)."""
    return job.acc if job.format in lowprec_formats() else job.out_fmt


def report(r, t0: float, output: str | None = None, as_json: bool = False) -> int:
    """Print result ``r`` (started at ``perf_counter`` time ``t0``), write D to ``output``
    (.npz: d, the values, and d_bits) where given; the exit status."""
    import time
    import numpy as np
    s = summary(r, time.perf_counter() - t0)
    job, cycles, peak = r.job, r.cycles, r.job.peak
    head = f"GEMM {job.m}x{job.n}x{job.k} "
    warps = (f" ({job.warps} warp" + ("s" if job.warps > 1 else "")
             + (f" of {job.lanes} lanes" if job.lanes != 64 else "") + ")" if cycles else "")
    rate = f"{s['sim_cycles_per_s']:.0f} simulated cycles/s" if cycles else ""
    if job.format in FP4_FORMATS:
        from tcore.golden.nvfp4 import FORMATS
        fma = job.m * job.n * job.k
        print(head + f"{job.format} (decoded to {FORMATS[job.format]['decoded']}) -> fp32 on {job.backend}")
        if cycles:
            print(f"  cycles          {cycles} in all: decode + {r.gemm_cycles} GEMM + epilogue ({rate})")
            print(f"  FMA per clock   {s['fma_per_cycle']:.1f} of {peak} peak overall, "
                  f"{fma / r.gemm_cycles:.1f} in the GEMM (utilisation {s['gemm_utilization']:.3f})")
        error = (f"  rel. error      {r.error:.4g}  (Frobenius, vs the float64 product of the "
                 "unquantised inputs)")
    else:
        files = f", operands from {job.files[0]} and {job.files[1]}" if job.files else ""
        sparse = " 2:4 sparse A (pruned)," if job.sparse else ""
        print(head + f"{job.format}{sparse} -> {_acc_name(job)} on {job.backend}{warps}{files}")
        if cycles:
            print(f"  cycles          {cycles}  ({rate})")
            logical = " logical" if job.sparse else ""
            print(f"  FMA per clock   {s['fma_per_cycle']:.1f} of {peak}{logical} peak  "
                  f"(utilisation {s['utilization']:.3f})")
        if job.sparse:
            error = f"  max |D - fp64|  {r.error:.3g}  (float64 product of the pruned A and B)"
        elif job.format not in lowprec_formats():
            error = f"  max |D - fp64|  {r.error:.3g}  (float64 result of the same inputs)"
        elif job.acc in ("s32", "s32sat"):
            error = (f"  max |D - exact| {r.error:.3g}  (the exact integer product (wrap or "
                     "saturation shows here))")
        else:
            error = f"  max |D - exact| {r.error:.3g}  (float64 result of the same inputs)"
    print(f"  bit-exact       {'yes' if r.mismatches == 0 else 'NO'}: {r.mismatches} of {r.d.size} "
          "outputs differ from the golden model")
    print(error)
    if r.waves:
        print(f"  waveform        {r.waves} ({wave_note(r.waves)})")
    if output:
        view = np.float32 if job.op is None else job.op.acc_dtype     # NVFP4/MXFP4: FP32
        np.savez(output, d=r.d.view(view), d_bits=r.d)
        s["output"] = output
        print(f"  wrote           {output}  (d: the values, d_bits: the bit patterns)")
    if as_json:
        print(json.dumps(s))
    return EXIT_OK if r.mismatches == 0 else EXIT_MISMATCH
