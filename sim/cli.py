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
    from golden import get_arch
    from golden.silicon import KERNELS
    from sim.backends import RTL_BACKENDS, RTL_KERNELS, WARP_KERNELS

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
        if rtl and args.through == "soc" and name not in WARP_KERNELS:
            return (f"kernel {name} does not run --through soc: the SoC block has the "
                    f"{', '.join(WARP_KERNELS)} kernels")
        return None

    if args.kernel != "all" and refuse(args.kernel):
        raise CliError(refuse(args.kernel))
    _refuse_golden_options(args, (("--waves", args.waves), ("--through", args.through)))
    if args.cores is not None and args.through not in ("gemm", "soc"):
        raise CliError("--cores is for --through gemm or soc (the warps of those tops)")
    if args.cores is not None and not 1 <= args.cores <= 8:
        raise CliError(f"--cores must be 1 to 8, not {args.cores}")
    cores = args.cores or 1
    if args.through == "soc" and args.backend == "amaranth":
        raise CliError("--through soc runs on --backend verilator or icarus (the soc design is too "
                       "large for Amaranth's simulator)")
    if args.scheduler and args.backend != "golden":
        raise CliError("--scheduler is for --backend golden (RTL simulations run here)")
    client = None
    if args.scheduler:                  # files x kernels go to a dask cluster (golden.distributed)
        from golden.distributed import connect
        try:
            client = connect(args.scheduler)
        except (ImportError, OSError) as e:
            raise CliError(str(e)) from None
    try:
        return _verify_jobs(args, client, arch, rtl, cores, refuse)
    finally:
        if client is not None:
            client.close()


def _verify_jobs(args, client, arch, rtl, cores, refuse) -> int:
    """``tcore verify``'s work (cmd_verify): read every file, run, print; on ``client``'s
    cluster where given (golden backend)."""
    import numpy as np
    from golden.silicon import KERNELS, Problem, VectorFileError, kernels_in, load, problem
    from golden.sparse import is_sparse_file, verify_file as verify_sparse
    from sim.backends import RTL_BACKENDS, BackendError, run_tiles
    from sim.gemm import run_gemm
    from sim.runner import SimError
    from sim.soc import run_soc
    if client is not None:
        from golden.distributed import verify_tiles
    # Read and validate every file before running anything: a bad file fails fast.
    jobs = []
    for path in args.files:
        try:
            data = load(path)
            if is_sparse_file(data):
                # 2:4 sparse captures (mma.sp tiles, cuSPARSELt GEMMs): golden.sparse checks them,
                # here, so that a bad one fails before anything runs; printed in file order below.
                if args.backend != "golden":
                    raise CliError(f"{path}: 2:4 sparse captures run on --backend golden only "
                                   "(there is no sparse RTL yet)")
                if arch.name != "hopper":
                    raise CliError(f"{path}: 2:4 sparse MMA is modelled for --arch hopper only")
                kw = dict(kernel=None if args.kernel == "all" else args.kernel, tiles=args.tiles,
                          where=str(path))
                try:
                    checks = (client.submit(verify_sparse, data, **kw, pure=False) if client
                              else verify_sparse(data, **kw))
                except (ValueError, TypeError) as e:
                    raise CliError(str(e)) from None
                jobs.append((path, data, checks))
                continue
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
                prob = problem(data, name, args.tiles, where=str(path))
                if rtl:
                    _check_rtl_shapes(prob, path, args.through)
                jobs.append((path, data, prob))
        except VectorFileError as e:
            raise CliError(str(e)) from None
    if not jobs:
        raise CliError(f"nothing to check: no kernel of these files runs with --arch {arch.name}")
    if client is not None:
        # Every job to the cluster now (sparse ones are there already): one task per file and
        # kernel, the results printed in file order as below.
        for i, (path, data, prob) in enumerate(jobs):
            if isinstance(prob, Problem):
                jobs[i] = (path, data, prob, client.submit(
                    verify_tiles, prob.a, prob.b, prob.c, prob.expected, arch=arch,
                    **prob.kernel.mma_args(), pure=False))
        for i, (path, data, prob, *job) in enumerate(jobs):
            if not job:                                # a sparse file: its checks, or its error
                try:
                    jobs[i] = (path, data, prob.result())
                except (ValueError, TypeError) as e:
                    raise CliError(str(e)) from None
    checked = mismatched = 0
    rtl = args.backend in RTL_BACKENDS
    for path, data, prob, *job in jobs:
        if isinstance(prob, list):                     # a sparse file's golden.sparse checks
            for r in prob:
                if r.kind == "dense":
                    print(f"{Path(path).name:40s} {r.name:13s} {r.what:28s} dense, expected to "
                          f"differ: {r.mismatches} of {r.checked} outputs differ from the 2:4 rule "
                          "(not counted)", flush=True)
                    continue
                print(f"{Path(path).name:40s} {r.name:13s} {r.what:28s} "
                      f"checked {r.checked:7d} mismatches {r.mismatches}", flush=True)
                checked += r.checked
                mismatched += r.mismatches
            continue
        k = prob.kernel
        # A whole GEMM on an RTL backend runs on the GEMM top, unless a tile path is asked for
        # or only some tiles are (the GEMM top computes every tile).
        whole = prob.gemm is not None and rtl and (args.through in ("gemm", "soc") or
                                                   (args.through is None and args.tiles is None))
        if whole and args.through != "soc" and np.any(data[k.c_key] != 0):
            print(f"{Path(path).name}: C is not zero (the GEMM top computes matmulT's A*B): "
                  "running its tiles through the core")
            whole = False
        if job:                                        # run on the cluster (--scheduler)
            size, bad = job[0].result()
            what = (f"gemm {prob.gemm[0]}x{prob.gemm[1]}x{prob.gemm[2]}, {len(prob.c)} tiles"
                    if prob.gemm else f"{len(prob.c)} tiles")
            print(f"{Path(path).name:40s} {k.name:13s} {what:28s} "
                  f"checked {size:7d} mismatches {bad}", flush=True)
            checked += size
            mismatched += bad
            continue
        try:
            if whole and args.through == "soc":
                if arch.name != "hopper":
                    raise BackendError(f"the RTL implements the Hopper arithmetic only, not --arch {arch.name}")
                # The AXI memory holds A, B and C; D = A*B + C on the soc design.
                d, info = run_soc(args.backend, data["a"], data["b"], data[k.c_key],
                                  in_fmt=k.in_fmt, out_fmt=k.out_fmt, params={"cores": cores} if cores > 1 else None,
                                  waves=args.waves and f"{Path(path).stem}-{k.name}-soc-{args.backend}")
                got = d.reshape(d.shape[0] // 16, 16, d.shape[1] // 16, 16).transpose(0, 2, 1, 3)
                got = got.reshape(-1, 16, 16)[:len(prob.c)]
            elif whole:
                if arch.name != "hopper":
                    raise BackendError(f"the RTL implements the Hopper arithmetic only, not --arch {arch.name}")
                d, info = run_gemm(args.backend, data["a"], data["b"], in_fmt=k.in_fmt,
                                   b_fmt=k.b_fmt, saturate=k.saturate,
                                   out_fmt=k.out_fmt, progress=False, cores=cores,
                                   waves=args.waves and f"{Path(path).stem}-{k.name}-gemm-{args.backend}")
                got = d.reshape(d.shape[0] // 16, 16, d.shape[1] // 16, 16).transpose(0, 2, 1, 3)
                got = got.reshape(-1, 16, 16)[:len(prob.c)]
            else:
                got, info = run_tiles(args.backend, prob.a, prob.b, prob.c, arch=arch,
                                      through=args.through or "core",
                                      waves=args.waves and (f"{Path(path).stem}-{k.name}-"
                                                            f"{args.through or 'core'}-{args.backend}"),
                                      **k.mma_args())
        except (BackendError, SimError) as e:
            raise CliError(str(e)) from None
        if info.get("waves"):
            print(f"waveform: {info['waves']} ({_wave_note(info['waves'])})")
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


def _check_rtl_shapes(prob, path, through):
    """Refuse, before any build, what the RTL cannot take: tiles other than 16x16 outputs, K not
    a multiple of the kind's block, the GEMM top for a tile file."""
    from sim.backends import RTL_K_STEP
    t, m, k = prob.a.shape
    n = prob.b.shape[-1]
    if prob.gemm is None and (m, n) != (16, 16):
        raise CliError(f"{path}: the RTL computes 16x16 output tiles; this file's tiles are {m}x{n}")
    step = RTL_K_STEP[prob.kernel.in_fmt]
    if k % step:
        raise CliError(f"{path}: the RTL runs {prob.kernel.in_fmt} K in steps of {step}; K = {k} "
                       f"is not a multiple of {step}")
    if through == "gemm" and prob.gemm is None:
        raise CliError(f"{path}: --through gemm runs whole-GEMM files (a is M x K); this is "
                       "a tile file (--through soc runs each tile as a GEMM of its own)")


# -- gemm -----------------------------------------------------------------------------------------

def _gemm_operands(args):
    """A, B (and C) bits and the input format: the user's files, or random normal values."""
    import numpy as np
    from sim.operands import OperandError, load_matrix, operand_bits, random_operands
    if (args.a is None) != (args.b is None):
        raise CliError("--a and --b go together")
    if args.a is None:
        for name in ("m", "n", "k"):
            if getattr(args, name) is None:
                raise CliError(f"--{name} is required (or give the operands with --a and --b)")
        if args.c is not None:
            raise CliError("--c goes with --a and --b")
        fmt = args.format or "fp16"
        return (*random_operands(args.m, args.n, args.k, fmt, args.seed), None, fmt)
    try:
        a, fa = operand_bits(load_matrix(args.a, "a"), "a", args.format)
        b, fb = operand_bits(load_matrix(args.b, "b"), "b", args.format or fa)
    except OperandError as e:
        raise CliError(str(e)) from None
    if fa != fb:
        raise CliError(f"--a is {fa} but --b is {fb}: both operands take one format")
    if a.shape[1] != b.shape[0]:
        raise CliError(f"--a is {a.shape[0]}x{a.shape[1]} but --b is {b.shape[0]}x{b.shape[1]}: K differs")
    for name, v in (("m", a.shape[0]), ("n", b.shape[1]), ("k", a.shape[1])):
        given = getattr(args, name)
        if given is not None and given != v:
            raise CliError(f"--{name} {given} does not match the operands' {name.upper()} = {v}")
        setattr(args, name, v)
    c = None
    if args.c is not None:
        if args.backend != "golden":
            raise CliError("--c (D = A*B + C) runs on --backend golden only: the GEMM top computes "
                           "matmulT's A*B, with C = 0")
        try:
            cx = load_matrix(args.c, "c")
        except OperandError as e:
            raise CliError(str(e)) from None
        want = np.float32 if args.acc == "f32" else np.float16
        if cx.dtype != want:
            raise CliError(f"--c must be {np.dtype(want).name} for --acc {args.acc}, not {cx.dtype}")
        if cx.shape != (a.shape[0], b.shape[1]):
            raise CliError(f"--c must be {a.shape[0]}x{b.shape[1]}, not {cx.shape[0]}x{cx.shape[1]}")
        c = cx.view(np.uint32 if want == np.float32 else np.uint16)
    return np.ascontiguousarray(a), np.ascontiguousarray(b), c, fa


def _refuse_golden_options(args, names):
    if args.backend == "golden":
        for flag, given in names:
            if given:
                raise CliError(f"{flag} has no meaning on --backend golden (it is for the RTL backends)")


#: ``tcore gemm --format`` choices of the Hopper low-precision paths: (A, B) formats.
LOWPREC_FORMATS = {"tf32": ("tf32", "tf32"), "e4m3": ("e4m3", "e4m3"), "e5m2": ("e5m2", "e5m2"),
                   "e4m3_e5m2": ("e4m3", "e5m2"), "s8": ("s8", "s8"), "u8": ("u8", "s8")}


def cmd_gemm(args) -> int:
    import time
    import numpy as np
    from golden import mma
    from golden.gemm import check_gemm

    t0 = time.perf_counter()
    _check_output(args.o)
    if args.seed < 0:
        raise CliError(f"--seed must be a non-negative integer, not {args.seed}")
    _refuse_golden_options(args, (("--waves", args.waves), ("--cores", args.cores != 1)))
    if args.scheduler and args.backend != "golden":
        raise CliError("--scheduler is for --backend golden (RTL simulations run here)")
    if args.scheduler and args.format not in (None, "fp16", "bf16"):
        raise CliError(f"--scheduler runs --format fp16 or bf16 GEMMs, not {args.format}")
    if args.format in LOWPREC_FORMATS:
        return _gemm_lowprec(args, t0)
    if args.acc in ("s32", "s32sat"):
        raise CliError(f"--acc {args.acc} is for INT8 inputs (--format s8 or u8)")
    args.acc = args.acc or "f32"
    if args.format in ("nvfp4", "mxfp4"):
        if args.a or args.b or args.c:
            raise CliError(f"--format {args.format} quantises random float32 operands; --a/--b/--c "
                           "take FP16 or BF16 matrices")
        if None in (args.m, args.n, args.k):
            raise CliError("--m, --n and --k are required")
        return _gemm_fp4(args, t0)
    out_fmt = {"f32": "fp32", "f16": "fp16"}[args.acc]
    a, b, c, in_fmt = _gemm_operands(args)
    if args.arch != "hopper" and args.backend != "golden":
        raise CliError(f"the RTL implements the Hopper arithmetic only, not --arch {args.arch}")
    if in_fmt == "bf16" and out_fmt == "fp16":
        raise CliError("BF16 inputs with an FP16 accumulator is not a WMMA combination")
    if args.backend != "golden" or args.a is None:
        try:
            check_gemm(args.m, args.n, args.k, in_fmt, out_fmt)
        except ValueError as e:
            raise CliError(str(e)) from None
    zero = np.zeros((args.m, args.n), np.uint32 if out_fmt == "fp32" else np.uint16)
    client = None
    if args.scheduler:                  # the golden model's output blocks on a dask cluster
        from functools import partial
        from golden.distributed import cluster_mma, connect
        try:
            client = connect(args.scheduler)
        except (ImportError, OSError) as e:
            raise CliError(str(e)) from None
        mma = partial(cluster_mma, client)
    try:
        return _gemm_run(args, t0, mma, a, b, c, zero, in_fmt, out_fmt)
    finally:
        if client is not None:
            client.close()


def _gemm_run(args, t0, mma, a, b, c, zero, in_fmt, out_fmt) -> int:
    """cmd_gemm's FP16/BF16 run and report; ``mma`` is the golden model (local, or on a dask
    cluster with --scheduler)."""
    import time
    import numpy as np
    from golden.formats import to_float
    from sim.gemm import run_gemm
    from sim.runner import SimError
    if args.backend == "golden":
        t = time.perf_counter()
        d = mma(a, b, zero if c is None else c, in_fmt=in_fmt, out_fmt=out_fmt, arch=args.arch)
        info = {"cycles": None, "sim_s": time.perf_counter() - t}
    else:
        if not 1 <= args.cores <= 8:
            raise CliError(f"--cores must be 1 to 8, not {args.cores}")
        try:
            d, info = run_gemm(args.backend, a, b, in_fmt=in_fmt, out_fmt=out_fmt, cores=args.cores,
                               waves=args.waves and _wave_label(args, in_fmt), progress=not args.json)
        except SimError as e:
            raise CliError(str(e)) from None
        except ValueError as e:             # run_gemm's refusals of a request (size, memory)
            raise CliError(str(e)) from None
    want = mma(a, b, zero if c is None else c, in_fmt=in_fmt, out_fmt=out_fmt, arch=args.arch)
    mismatches = int((d != want).sum())
    exact = to_float(a, in_fmt) @ to_float(b, in_fmt)
    if c is not None:
        exact = exact + to_float(c, out_fmt)
    with np.errstate(invalid="ignore"):
        diff = np.abs(to_float(d, out_fmt) - exact)
    err = float(np.nanmax(diff)) if not np.isnan(diff).all() else float("nan")
    r = _gemm_result(args, in_fmt, out_fmt, info, mismatches, t0, max_abs_err_vs_fp64=err,
                     inputs="files" if args.a else "random")
    cycles, peak = r["cycles"], r["peak_fma_per_cycle"]
    print(f"GEMM {args.m}x{args.n}x{args.k} {in_fmt} -> {out_fmt} on {args.backend}"
          f"{f' ({args.cores} core' + ('s' if args.cores > 1 else '') + ')' if cycles else ''}"
          f"{', operands from ' + args.a + ' and ' + args.b if args.a else ''}")
    if cycles:
        print(f"  cycles          {cycles}  ({r['sim_cycles_per_s']:.0f} simulated cycles/s)")
        print(f"  FMA per clock   {r['fma_per_cycle']:.1f} of {peak} peak  (utilisation {r['utilization']:.3f})")
    return _gemm_report(r, d, out_fmt, info, args,
                        f"  max |D - fp64|  {err:.3g}  (float64 result of the same inputs)")


def _gemm_lowprec(args, t0) -> int:
    """``tcore gemm --format tf32|e4m3|e5m2|e4m3_e5m2|s8|u8``: random operands, matmulT on the
    GEMM top (B in the TN layout), checked bit for bit against the golden model; the error is
    measured against the float64 (INT8: the exact integer) product."""
    import numpy as np
    from golden.formats import to_float
    from sim.gemm import run_gemm
    from sim.runner import SimError

    fmt = args.format
    in_fmt, b_fmt = LOWPREC_FORMATS[fmt]
    integer = in_fmt in ("s8", "u8")
    acc = args.acc or ("s32" if integer else "f32")
    allowed = ("s32", "s32sat") if integer else ("f32",) if fmt == "tf32" else ("f32", "f16")
    if acc not in allowed:
        raise CliError(f"--format {fmt} takes --acc {' or '.join(allowed)}, not {acc}")
    if args.a or args.b or args.c:
        raise CliError(f"--format {fmt} runs random operands; --a/--b/--c take FP16 or BF16 matrices")
    if None in (args.m, args.n, args.k):
        raise CliError("--m, --n and --k are required")
    if args.arch != "hopper":
        raise CliError(f"--format {fmt} is modelled for --arch hopper only")
    if args.backend == "amaranth":
        raise CliError(f"--format {fmt} runs on --backend verilator, icarus or golden")
    out_fmt = {"f32": "fp32", "f16": "fp16", "s32": "s32", "s32sat": "s32"}[acc]
    from sim.operands import lowprec_operands
    a, b = lowprec_operands(args.m, args.n, args.k, in_fmt, b_fmt, args.seed)
    try:
        d, info = run_gemm(args.backend, a, b, in_fmt=in_fmt, b_fmt=b_fmt, out_fmt=out_fmt,
                           saturate=acc == "s32sat", cores=args.cores, progress=not args.json,
                           waves=args.waves and _wave_label(args, fmt))
    except (SimError, ValueError) as e:
        raise CliError(str(e)) from None
    from golden import mma
    from golden.mma import instr_of
    zero = np.zeros((args.m, args.n), np.uint16 if out_fmt == "fp16" else np.uint32)
    want = mma(a, b, zero, in_fmt=in_fmt, b_fmt=b_fmt, out_fmt=out_fmt, saturate=acc == "s32sat",
               instr=instr_of(in_fmt))
    mismatches = int((d != want).sum())
    if integer:
        ia = (a if in_fmt == "u8" else a.view(np.int8)).astype(np.int64)
        exact = ia @ b.view(np.int8).astype(np.int64)
        err = float(np.abs(d.view(np.int32).astype(np.int64) - exact).max())
        what = "the exact integer product (wrap or saturation shows here)"
    else:
        exact = to_float(a, in_fmt) @ to_float(b, b_fmt)
        with np.errstate(invalid="ignore"):
            diff = np.abs(to_float(d, out_fmt) - exact)
        err = float(np.nanmax(diff)) if not np.isnan(diff).all() else float("nan")
        what = "float64 result of the same inputs"
    # Products per clock of the mode on one core (rtl.mma4: 64 FP16/BF16/FP8/INT8, 32 TF32).
    per_core = 32 if in_fmt == "tf32" else 64
    r = _gemm_result(args, fmt, acc, info, mismatches, t0, max_abs_err_vs_fp64=err,
                     inputs="random", peak=per_core * args.cores)
    cycles, peak = r["cycles"], r["peak_fma_per_cycle"]
    print(f"GEMM {args.m}x{args.n}x{args.k} {fmt} -> {acc} on {args.backend}"
          f"{f' ({args.cores} core' + ('s' if args.cores > 1 else '') + ')' if cycles else ''}")
    if cycles:
        print(f"  cycles          {cycles}  ({r['sim_cycles_per_s']:.0f} simulated cycles/s)")
        print(f"  FMA per clock   {r['fma_per_cycle']:.1f} of {peak} peak  (utilisation {r['utilization']:.3f})")
    return _gemm_report(r, d, out_fmt, info, args, f"  max |D - exact| {err:.3g}  ({what})")


def _check_output(path: str | None):
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
        d, info = run_fp4_gemm(args.backend, qa, qbt, cores=args.cores,
                               waves=args.waves and _wave_label(args, fmt),
                               progress=not args.json)
    except SimError as e:
        raise CliError(str(e)) from None
    except ValueError as e:             # run_fp4_gemm's refusals of a request (backend, size)
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
    return _gemm_report(r, d, "fp32", info, args,
                        f"  rel. error      {rel:.4g}  (Frobenius, vs the float64 product of the "
                        "unquantised inputs)")


def _wave_note(path) -> str:
    from sim.runner import wave_note
    return wave_note(Path(path))


def _wave_label(args, fmt: str) -> str:
    """A GEMM run's waveform name: what ran, on what, from which seed or files."""
    what = (f"{Path(args.a).stem}-{Path(args.b).stem}" if getattr(args, "a", None)
            else f"{args.m}x{args.n}x{args.k}-seed{args.seed}")
    return f"gemm-{what}-{fmt}-{args.acc}-cores{args.cores}-{args.backend}"


def _gemm_result(args, fmt: str, acc: str, info: dict, mismatches: int, t0: float, peak=None,
                 **extra) -> dict:
    """The ``tcore gemm --json`` object: the run's figures and ``extra`` keys; ``peak`` the
    products per clock of the cores (default 64 per core, the FP16 rate)."""
    import time
    cycles = info["cycles"]
    fma = args.m * args.n * args.k
    peak = peak or 64 * args.cores
    r = {"m": args.m, "n": args.n, "k": args.k, "format": fmt, "acc": acc, "cores": args.cores,
         "backend": args.backend, "cycles": cycles,
         "fma_per_cycle": fma / cycles if cycles else None, "peak_fma_per_cycle": peak,
         "utilization": fma / cycles / peak if cycles else None, "mismatches": mismatches,
         **extra, "wall_s": time.perf_counter() - t0,
         "sim_cycles_per_s": cycles / info["sim_s"] if cycles else None, "seed": args.seed}
    if info.get("waves"):
        r["waves"] = str(info["waves"])
    return r


def _gemm_report(r: dict, d, out_fmt: str, info: dict, args, error_line: str) -> int:
    """The last lines of ``tcore gemm``: bit-exactness, error, waveform, D written (``-o``),
    JSON; the exit status."""
    import numpy as np
    bad = r["mismatches"]
    print(f"  bit-exact       {'yes' if bad == 0 else 'NO'}: {bad} of {d.size} outputs differ "
          "from the golden model")
    print(error_line)
    if info.get("waves"):
        print(f"  waveform        {info['waves']} ({_wave_note(info['waves'])})")
    if args.o:
        view = {"fp32": np.float32, "fp16": np.float16, "s32": np.int32}[out_fmt]
        np.savez(args.o, d=d.view(view), d_bits=d)
        r["output"] = args.o
        print(f"  wrote           {args.o}  (d: the values, d_bits: the bit patterns)")
    as_json = args.json
    if as_json:
        print(json.dumps(r))
    return EXIT_OK if bad == 0 else EXIT_MISMATCH


# -- verilog --------------------------------------------------------------------------------------

def cmd_verilog(args) -> int:
    from rtl.designs import DESIGNS, LINT_PARAMS, make, parameters, to_verilog

    out = Path(args.o)
    if out.exists() and not out.is_dir():
        raise CliError(f"-o {out}: exists and is not a folder")
    names = args.design or sorted(DESIGNS)
    for name in names:
        if name not in DESIGNS:
            raise CliError(f"unknown design {name!r}; designs: {', '.join(sorted(DESIGNS))}")
    asked = {"cores": args.cores,
             "mem_words": None if args.mem_kib is None else args.mem_kib * 1024 // 16,
             "data_width": args.data_width}
    flags = {"cores": "--cores", "mem_words": "--mem-kib",
             "data_width": "--data-width"}
    if args.mem_kib is not None and (args.mem_kib < 1 or args.mem_kib & (args.mem_kib - 1)):
        raise CliError(f"--mem-kib must be a power of two, not {args.mem_kib}")
    builds = []
    for name in names:
        takes = parameters(name)
        params = dict(LINT_PARAMS[name])
        for key, value in asked.items():
            if value is None:
                continue
            if key not in takes:
                raise CliError(f"design {name} has no {flags[key]} parameter (it takes: "
                               f"{', '.join(flags.get(k, k) for k in takes) or 'none'})")
            params[key] = value
        try:
            make(name, **params)                 # the design checks its parameters' values
        except ValueError as e:
            raise CliError(f"design {name}: {e}") from None
        builds.append((name, params))
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise CliError(f"-o {out}: cannot create the folder ({e.strerror})") from None
    for name, params in builds:
        path = out / f"{name}.v"
        path.write_text(to_verilog(name, header=True, **params))
        print(f"wrote {path}  ({', '.join(f'{k}={v}' for k, v in sorted(params.items())) or 'defaults'})",
              flush=True)
        if name == "soc":           # and the plain Verilog testbench that drives it
            from sim.soc_demo import testbench
            tb = out / "tb_soc.v"
            tb.write_text(testbench(params.get("data_width", 128), params.get("addr_width", 32)))
            print(f"wrote {tb}  (plain Verilog testbench: see its header; make soc-demo runs it)")
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
    from sim.layout import NOTE, rtl_layout

    lay = rtl_layout(args.shape)
    if args.json:
        print(json.dumps(lay))
    else:
        note = NOTE[None if args.shape is None else "shape"]
        for heading, lanes in lay.items():
            print(f"# {heading} num_elements={len(lanes[0])} {note}")
            for lane, slots in enumerate(lanes):
                print(f"lane {lane:2d}: " + " ".join(f"{v:3d}" for v in slots))
    return EXIT_OK


# -- bench ----------------------------------------------------------------------------------------

def cmd_bench(args) -> int:
    from sim import bench

    try:
        if args.what == "all":
            r = bench.bench_all()
            print()
            bench.print_bench_table(r)
        elif args.what == "soc":
            r = bench.bench_soc()
            print(f"soc design, {r['m']}x{r['n']}x{r['k']} FP16->FP32 on {r['backend']}, AXI memory "
                  "without pauses, bit-exact")
            print(f"{'warps':>5s} {'clocks':>8s} {'FMA/clock':>9s} {'core util':>9s} {'vs 1 warp':>9s}")
            for x in r["runs"]:
                print(f"{x['warps']:5d} {x['cycles']:8d} {x['fma_per_clock']:9.1f} "
                      f"{x['utilization']:9.3f} {x['speedup_vs_1']:8.2f}x")
        elif args.what == "sim":
            r = bench.bench_sim()
            print(f"{'simulator':10s} {'tiles':>6s} {'sim s':>7s} {'wall s':>7s} {'tiles/s':>9s} "
                  f"{'cycles/s':>9s} {'vs verilator':>13s}")
            for sim, x in r.items():
                print(f"{sim:10s} {x['tiles']:6d} {x['sim_s']:7.2f} {x['wall_s']:7.2f} "
                      f"{x['tiles_per_s']:9.2f} {x['cycles_per_s']:9.0f} {x['ratio_vs_verilator']:12.4f}x")
        else:
            r = bench.bench_golden(tiles=args.tiles, workers=args.workers, gemm=args.gemm)
            print(f"golden model against float32 numpy.matmul + C on {r['tiles']} random 16x16 tiles "
                  f"per kind (best of 5; numpy.matmul on 1 BLAS thread, {r['blas']}; golden model "
                  f"on {r['workers']} of {r['cpus']} cores; {r['load_before']} before, "
                  f"{r['load_after']} after)")
            engines = list(next(iter(r["kinds"].values()))["engines"])
            print(f"{'input kind':24s} {'terms':>5s} {'workers':>7s} {'matmul ms':>10s} " +
                  " ".join(f"{e + ' ms':>12s} {'M dots/s':>9s} {'ratio':>7s}" for e in engines))
            for x in r["kinds"].values():
                print(f"{x['label']:24s} {x['k']:5d} {x['workers']:7d} {x['matmul_f32_s'] * 1e3:10.2f} " +
                      " ".join(f"{e['golden_s'] * 1e3:12.1f} {e['dots_per_s'] / 1e6:9.2f} "
                               f"{e['ratio']:6.1f}x" for e in x["engines"].values()))
            if "gemm" in r:
                g = r["gemm"]
                print(f"GEMM {g['n']}x{g['n']}x{g['n']} FP16->FP32, {g['engine']} engine, "
                      f"{g['workers']} workers: {g['golden_s']:.2f} s "
                      f"({g['dots_per_s'] / 1e6:.2f} M dots/s of K={g['n']}); float32 numpy.matmul "
                      f"{g['matmul_f32_s']:.3f} s; {g['load_after']}")
    except bench.BenchError as e:
        raise CliError(str(e)) from None
    if args.json:
        print(json.dumps(r))
    return EXIT_OK


# -- synth ----------------------------------------------------------------------------------------

def cmd_synth(args) -> int:
    from sim.synth import SYNTH_PARAMS, SynthError, heatmap_text, synth

    params = dict(SYNTH_PARAMS.get(args.design, {}))
    try:
        r = synth(args.design, device=args.device, params=params, freq_mhz=args.freq,
                  progress=lambda line: print(f"  {line}", file=sys.stderr, flush=True),
                  fresh=args.fresh, router=args.router, route=not args.place_only,
                  seeds=args.seeds, seed=args.seed, jobs=args.jobs, harness=not args.ooc,
                  timeout_s=None if args.timeout is None else 60 * args.timeout)
    except SynthError as e:
        raise CliError(str(e)) from None
    ctx = "out of context" if args.ooc else (f"in the harness: +{r['harness_ports']['in_bits']} "
                                             f"input and +{r['harness_ports']['out_bits']} output "
                                             "chain flip-flops")
    print(f"{r['design']} {r['params']} on {r['device']} ({ctx})")
    for key, name in (("luts", "LUT4"), ("ffs", "flip-flops"), ("dsps", "MULT18X18D"), ("brams", "DP16KD")):
        print(f"  {name:11s} {r[key]:7d} of {r[key + '_available']}")
    fmax = f"{r['fmax_mhz']:.1f} MHz" if r["fmax_mhz"] else "n/a (no clock)"
    if args.place_only:
        fmax += " estimated after placement (--place-only)" if r["fmax_mhz"] else ""
    elif not r["routed"]:
        fmax = "none: routing did not finish" + (f" ({r['arcs_left']} arcs left)" if "arcs_left" in r else "")
    print(f"  Fmax        {fmax}" + (f"  (latency {r['latency_clocks']} clocks)" if "latency_clocks" in r else ""))
    if len(r["seeds"]) > 1 or not args.place_only:
        for s in r["seeds"]:
            state = "routed" if s["routed"] else ("placed" if args.place_only else "NOT routed")
            f = f"{s['fmax_mhz']:.1f} MHz" if s["fmax_mhz"] else "-"
            times = ", ".join(f"{k[:-2]} {s[k]:.0f} s" for k in ("place_s", "route_s") if s.get(k) is not None)
            print(f"  seed {s['seed']:<5d} {state:10s} {f:>10s}  {times}" + ("  <- kept" if s["seed"] == r["seed"] else ""))
    lp = r["logic_path"]
    if lp:
        print(f"  logic path  {lp['logic_ns']:.2f} ns before routing (Yosys sta: {lp['luts']} LUT4, "
              f"{lp['carry_cells']} carry cells): {lp['from']} -> {lp['to']}")
    cp = r["critical_path"]
    if cp:
        print(f"  critical    {cp['total_ns']:.2f} ns ({cp['logic_ns']:.2f} logic, {cp['routing_ns']:.2f} "
              f"routing, {cp['cells']} cells): {cp['from']} -> {cp['to']}")
    cg = r["congestion"]
    if cg:
        print(f"  fullest {cg['region_tiles']}x{cg['region_tiles']}-tile regions (logic cells, fill):")
        for b in cg["fullest"]:
            owners = ", ".join(f"{k} {v}" for k, v in b["owners"].items())
            print(f"    X{b['x']:<3d} Y{b['y']:<3d} {b['cells']:5d} cells, {100 * b['fill']:3.0f} %  ({owners})")
        print(f"  map of logic cells per region: {r['work']}/congestion-s{r['seed']}.txt")
    if args.json:
        print(json.dumps(r))
    return EXIT_OK


# -- regs -----------------------------------------------------------------------------------------

def cmd_regs(args) -> int:
    from rtl.regmap import c_header, markdown

    text = c_header() if args.c_header else markdown() + "\n"
    if args.o is None:
        print(text, end="")
        return EXIT_OK
    out = Path(args.o)
    if not out.parent.is_dir():
        raise CliError(f"-o {out}: no such folder {out.parent}")
    out.write_text(text)
    print(f"wrote {out}")
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
    elif args.what == "sparse":
        errors = plots.sparse_errors()
        print("relative error vs float64 (same pruned FP16 inputs, FP32 out), 64 x 64 x K")
        print(f"{'K':>6s}" + "".join(f"  {d[:7] + ' ' + name:>15s}" for d in errors
                                     for name in ("sparse", "dense")))
        for i, k in enumerate(plots.SPARSE_KS):
            print(f"{k:6d}" + "".join(f"  {errors[d][name][i]:15.3e}" for d in errors
                                      for name in ("sparse", "dense")))
        plots.plot_sparse(errors, str(out), ks=plots.SPARSE_KS)
    else:
        errors = plots.accumulation_errors()
        print(f"{'K':>6s}" + "".join(f"  {d[:7] + ' ' + acc:>15s}" for d in errors for acc in ("fp16", "fp32")))
        for i, k in enumerate(plots.ACC_KS):
            print(f"{k:6d}" + "".join(f"  {errors[d][acc][i]:15.3e}" for d in errors for acc in ("fp16", "fp32")))
        plots.plot_accumulation(errors, str(out))
    print(f"wrote {out}")
    return EXIT_OK


# -- parser ---------------------------------------------------------------------------------------

def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("tcore")
    except PackageNotFoundError:               # a source tree run without installing
        return "(not installed)"


def _positive(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    try:
        v = int(text)
    except ValueError:
        v = 0
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1, not {text!r}")
    return v


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tcore", description="Bit-exact NVIDIA tensor-core model: "
                                "golden model, RTL, benches.")
    p.add_argument("--version", action="version", version=f"tcore {_version()}")
    sub = p.add_subparsers(dest="cmd", required=True, metavar="COMMAND")

    v = sub.add_parser("verify", help="check a backend against captured silicon vectors")
    v.add_argument("files", nargs="+", metavar="FILE.npz")
    v.add_argument("--kernel", default="all", choices=[*KERNEL_NAMES, "all"],
                   help="the d_<kernel> array to check (default: every one the file has)")
    v.add_argument("--backend", default="golden", choices=["golden", "amaranth", "icarus", "verilator"])
    v.add_argument("--through", default=None, choices=["core", "wmma", "gemm", "soc"],
                   help="RTL path: tiles straight into the MMA core (the default, but for whole "
                        "GEMMs without --tiles), memory -> WMMA ops -> memory, the GEMM top, or "
                        "the AXI SoC block (whole GEMMs, C included)")
    v.add_argument("--arch", default="hopper", choices=["volta", "ampere", "hopper"])
    v.add_argument("--cores", type=int, default=None, metavar="N",
                   help="warps of the GEMM top or the soc block (--through gemm or soc), 1..8")
    v.add_argument("--tiles", type=int, default=None, metavar="N",
                   help="only the first N tiles (16x16 output tiles of a whole GEMM)")
    v.add_argument("--waves", action="store_true", default=None,
                   help="dump waveforms (RTL backends; also WAVES=1) to build/waves/, named after "
                        "the file, kernel and path: FST where available, else VCD")
    v.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="golden backend: run the files x kernels on this dask.distributed "
                        "scheduler (e.g. tcp://127.0.0.1:8786; needs tcore[dask])")
    v.set_defaults(func=cmd_verify)

    gm = sub.add_parser("gemm", help="a GEMM (random, or your matrices) through the matmulT GEMM "
                                     "top, checked bit for bit")
    gm.add_argument("--m", type=int, default=None, help="rows of A and D (from --a if given)")
    gm.add_argument("--n", type=int, default=None, help="columns of B and D (from --b if given)")
    gm.add_argument("--k", type=int, default=None, help="columns of A, rows of B (from --a if given)")
    gm.add_argument("--a", default=None, metavar="A.npy",
                    help="A (M x K): float16 or bfloat16 values, or uint16 bits with --format")
    gm.add_argument("--b", default=None, metavar="B.npy", help="B (K x N), the same format as A")
    gm.add_argument("--c", default=None, metavar="C.npy",
                    help="C (M x N; float32, float16 with --acc f16): D = A*B + C (golden backend)")
    gm.add_argument("-o", default=None, metavar="D.npz", help="write D: keys d (values), d_bits")
    gm.add_argument("--format", default=None, choices=["fp16", "bf16", *LOWPREC_FORMATS, "nvfp4", "mxfp4"],
                    help="operands: FP16/BF16 (default fp16; with --a, the array's dtype); random "
                         "TF32, FP8 (e4m3, e5m2, e4m3_e5m2: A E4M3, B E5M2) or INT8 (s8; u8: A "
                         "unsigned, B signed) operands; or random float32 quantised to NVFP4/MXFP4 "
                         "and decoded by the FP4 front end")
    gm.add_argument("--acc", default=None, choices=["f32", "f16", "s32", "s32sat"],
                    help="accumulator: f32 (default), f16 (FP16 and FP8 inputs); s32 (INT8, "
                         "wrapped; the default there) or s32sat (saturated per 32-wide K step)")
    gm.add_argument("--cores", type=int, default=1, help="4x4x4 cores (warps), 1..8")
    gm.add_argument("--backend", default="verilator", choices=["golden", "amaranth", "icarus", "verilator"])
    gm.add_argument("--arch", default="hopper", choices=["volta", "ampere", "hopper"])
    gm.add_argument("--seed", type=int, default=1)
    gm.add_argument("--waves", action="store_true", default=None,
                    help="dump waveforms (RTL backends; also WAVES=1) to build/waves/, named after "
                         "the run: FST where available (Icarus; Verilator with liblz4-dev), else VCD")
    gm.add_argument("--json", action="store_true", help="last line: one JSON object")
    gm.add_argument("--scheduler", default=None, metavar="ADDRESS",
                    help="golden backend, FP16/BF16: compute D's blocks on this dask.distributed "
                         "scheduler (e.g. tcp://127.0.0.1:8786; needs tcore[dask])")
    gm.set_defaults(func=cmd_gemm)

    g = sub.add_parser("verilog", help="write the Verilog of every top-level design")
    g.add_argument("-o", required=True, metavar="DIR", help="output folder")
    g.add_argument("--design", action="append", help="only this design (repeatable)")
    g.add_argument("--cores", type=int, default=None, help="warps of the GEMM tops (gemm, fp4gemm, soc)")
    g.add_argument("--mem-kib", type=int, default=None, metavar="KIB",
                   help="working memory of wmma, gemm, fp4gemm in KiB (a power of two)")
    g.add_argument("--data-width", type=int, default=None, metavar="BITS",
                   help="AXI4 data width of soc: 32, 64 or 128 (soc also gets tb_soc.v, a plain "
                        "Verilog testbench)")
    g.set_defaults(func=cmd_verilog)

    pr = sub.add_parser("probe", help="capture this machine's GPU tensor-core results (needs nvcc and a GPU)")
    pr.add_argument("--out", required=True, metavar="DIR")
    pr.add_argument("--tiles", type=int, default=512, help="tiles per input class")
    pr.add_argument("--seed", type=int, default=2026)
    pr.add_argument("--nvcc", default="nvcc")
    pr.set_defaults(func=cmd_probe)

    lay = sub.add_parser("layout", help="the WMMA fragment layout (lane/slot map) of the RTL")
    lay.add_argument("--json", action="store_true", help="one JSON object keyed by fragment kind")
    lay.add_argument("--shape", choices=["m16n16k16", "m32n8k16", "m8n32k16"],
                     help="the shape's sections, as h200_wmma_layouts_all_shapes.txt has them "
                          "(default: the m16n16k16 sections of h200_wmma_layout.txt)")
    lay.set_defaults(func=cmd_layout)

    sy = sub.add_parser("synth", help="FPGA synthesis, place and route (ECP5): area and Fmax")
    sy.add_argument("--design", default="mma4", help="mma4 (default), gemm, wmma, fp4dec, fp4gemm, soc")
    sy.add_argument("--device", default="ecp5-85k", choices=["ecp5-25k", "ecp5-45k", "ecp5-85k"])
    sy.add_argument("--freq", type=float, default=100.0, help="target clock for placement, MHz")
    sy.add_argument("--json", action="store_true", help="last line: one JSON object")
    sy.add_argument("--fresh", action="store_true",
                    help="run Yosys and nextpnr again even where their inputs have not changed")
    sy.add_argument("--router", default="router1", choices=["router1", "router2"],
                    help="nextpnr's router (default router1, nextpnr-ecp5's own)")
    sy.add_argument("--place-only", action="store_true",
                    help="stop after placement: Fmax is the placer's estimate")
    sy.add_argument("--seeds", type=_positive, default=1, metavar="N",
                    help="place and route with N seeds (from --seed on), report each, keep the best")
    sy.add_argument("--seed", type=int, default=1, help="the first placer seed (default 1)")
    sy.add_argument("--jobs", type=_positive, default=1, metavar="J",
                    help="seeds run J at a time (each nextpnr is single-threaded; default 1)")
    sy.add_argument("--timeout", type=float, default=None, metavar="MIN",
                    help="stop a seed's nextpnr after MIN minutes (reported as not routed, with "
                         "the router's progress)")
    sy.add_argument("--ooc", action="store_true",
                    help="out of context (nextpnr --out-of-context: ports as internal nets, no "
                         "global clock) instead of the pin harness")
    sy.set_defaults(func=cmd_synth)

    pl = sub.add_parser("plot", help="pictures: fragment ownership, accumulation error vs K, "
                                     "Hopper's FP8 accumulation, 2:4 sparse vs dense")
    pl.add_argument("what", choices=["layout", "accumulation", "fp8-accumulation", "sparse"])
    pl.add_argument("-o", required=True, metavar="FILE.png")
    pl.set_defaults(func=cmd_plot)

    rg = sub.add_parser("regs", help="the GEMM accelerator's register map (Markdown, or a C header)")
    rg.add_argument("-o", default=None, metavar="FILE", help="write it here (else stdout)")
    rg.add_argument("--c-header", action="store_true",
                    help="C macros and enums (tcore_regs.h, as in sw/include/) instead of Markdown")
    rg.set_defaults(func=cmd_regs)

    b = sub.add_parser("bench", help="benchmarks that print figures")
    b.add_argument("what", choices=["golden", "sim", "soc", "all"],
                   help="all: golden, sim and a GEMM, as one table (make bench); soc: the soc "
                        "design with 1, 2 and 4 warps")
    b.add_argument("--tiles", type=int, default=4096)
    b.add_argument("--workers", type=int, default=None, metavar="N",
                   help="golden: threads for the golden model (default: every core)")
    b.add_argument("--gemm", type=int, default=0, metavar="N",
                   help="golden: also time one NxNxN FP16->FP32 GEMM (compiled engine)")
    b.add_argument("--json", action="store_true", help="last line: one JSON object")
    b.set_defaults(func=cmd_bench)
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if getattr(args, "waves", False) is None:
        # WAVES=1 (make sim's switch) asks for waveforms wherever there are any: on RTL backends.
        args.waves = os.environ.get("WAVES") == "1" and args.backend != "golden"
    if args.cmd == "bench":
        from sim.bench import pin_blas_threads
        pin_blas_threads()
    try:
        return args.func(args)
    except CliError as e:
        print(f"tcore {args.cmd}: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"tcore {args.cmd}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
