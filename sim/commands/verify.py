"""``tcore verify``: check a backend (the golden model or the RTL on a simulator) against
captured silicon vectors, file by file and kernel by kernel."""

from __future__ import annotations

from pathlib import Path

from .common import EXIT_MISMATCH, EXIT_OK, CliError, refuse_golden_options, wave_note

NAME = "verify"
HELP = "check a backend against captured silicon vectors"

#: ``tcore verify --kernel`` choices, as in ``golden.silicon.KERNELS`` (listed here so that
#: ``tcore --help`` need not import NumPy; a test checks that the two agree).
KERNEL_NAMES = ("f16_f32", "bf16_f32", "f16_f16", "e4m3_f32", "e5m2_f32", "e4m3_e5m2_f32",
                "e4m3_f16", "e4m3_f32_p128", "tf32_f32", "s8_s32", "s8_s32_sat", "u8_s8_s32")


def add_arguments(parser):
    parser.add_argument("files", nargs="+", metavar="FILE.npz")
    parser.add_argument("--kernel", default="all", choices=[*KERNEL_NAMES, "all"],
                        help="the d_<kernel> array to check (default: every one the file has)")
    parser.add_argument("--backend", default="golden", choices=["golden", "amaranth", "icarus", "verilator"])
    parser.add_argument("--through", default=None, choices=["core", "wmma", "gemm", "soc"],
                        help="RTL path: tiles straight into the MMA core (the default, but for whole "
                             "GEMMs without --tiles), memory -> WMMA ops -> memory, the GEMM top, or "
                             "the AXI SoC block (whole GEMMs, C included)")
    parser.add_argument("--arch", default="hopper", choices=["volta", "ampere", "hopper"])
    parser.add_argument("--cores", type=int, default=None, metavar="N",
                        help="warps of the GEMM top or the soc block (--through gemm or soc), 1..8")
    parser.add_argument("--lanes", type=int, default=64, choices=[64, 32, 16],
                        help="multipliers of the RTL core (every --through path; default 64)")
    parser.add_argument("--tiles", type=int, default=None, metavar="N",
                        help="only the first N tiles (16x16 output tiles of a whole GEMM)")
    parser.add_argument("--waves", action="store_true", default=None,
                        help="dump waveforms (RTL backends; also WAVES=1) to build/waves/, named after "
                             "the file, kernel and path: FST where available, else VCD")
    parser.add_argument("--scheduler", default=None, metavar="ADDRESS",
                        help="golden backend: run the files x kernels on this dask.distributed "
                             "scheduler (e.g. tcp://127.0.0.1:8786; needs tcore[dask])")


def run(args) -> int:
    from tcore.golden import get_arch
    from tcore.golden.silicon import KERNELS
    from tcore.sim.backends import RTL_BACKENDS, RTL_KERNELS, WARP_KERNELS

    arch = get_arch(args.arch)
    rtl = args.backend in RTL_BACKENDS
    if args.tiles is not None and args.tiles < 1:
        raise CliError(f"--tiles must be at least 1, not {args.tiles}")

    def refuse(name):
        """Why kernel ``name`` cannot run here (arch or backend), or None."""
        kind = KERNELS[name].op.kind
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
    refuse_golden_options(args, (("--waves", args.waves), ("--through", args.through),
                                 ("--lanes", args.lanes != 64)))
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
        from tcore.golden.distributed import connect
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
    """``tcore verify``'s work (run): read every file, run, print; on ``client``'s
    cluster where given (golden backend)."""
    import numpy as np
    from tcore.golden.silicon import KERNELS, Problem, VectorFileError, kernels_in, load, problem
    from tcore.golden.silicon import is_cublas_file, verify_cublas_file as verify_cublas
    from tcore.golden.sparse import is_sparse_file, verify_file as verify_sparse
    from tcore.sim.backends import RTL_BACKENDS, BackendError, run_tiles
    from tcore.sim.gemm import run_gemm
    from tcore.sim.runner import SimError
    from tcore.sim.soc import run_soc
    if client is not None:
        from tcore.golden.distributed import verify_tiles
    # Read and validate every file before running anything: a bad file fails fast.
    jobs = []
    for path in args.files:
        try:
            data = load(path)
            if is_cublas_file(data):
                # cuBLAS split-K / epilogue / FP8-scale captures (torch_splitk/): whole library
                # GEMMs through golden.matmul's library keywords (golden.cublas).
                if rtl or arch.name != "hopper" or args.kernel != "all" or args.tiles is not None:
                    raise CliError(f"{path}: a cuBLAS library capture runs with --backend golden "
                                   "--arch hopper, every kernel and whole (no --kernel, --tiles)")
                try:
                    checks = (client.submit(verify_cublas, data, where=str(path), pure=False)
                              if client else verify_cublas(data, where=str(path)))
                except (ValueError, TypeError) as e:
                    raise CliError(str(e)) from None
                jobs.append((path, data, checks))
                continue
            if is_sparse_file(data):
                # 2:4 sparse captures (mma.sp tiles, cuSPARSELt GEMMs): golden.sparse checks them,
                # here, so that a bad one fails before anything runs; printed in file order below.
                if arch.name != "hopper":
                    raise CliError(f"{path}: 2:4 sparse MMA is modelled for --arch hopper only")
                if rtl:     # tile files through the core's 2:4 sparse beats
                    jobs.append((path, data, _sparse_rtl_problems(args, data, path)))
                    continue
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
        if isinstance(prob, tuple):                    # a sparse tile file through the RTL core
            for p in prob:
                try:
                    got, info = run_tiles(args.backend, p.sp.values, p.b, p.c, in_fmt=p.in_fmt,
                                          out_fmt=p.out_fmt, through="core", lanes=args.lanes,
                                          a_meta=p.sp.meta,
                                          waves=args.waves and f"{Path(path).stem}-{p.name}-core-{args.backend}")
                except (BackendError, SimError) as e:
                    raise CliError(str(e)) from None
                if info.get("waves"):
                    print(f"waveform: {info['waves']} ({wave_note(info['waves'])})")
                bad = int((got != p.expected).sum())
                _line(path, p.name, f"{len(p.b)} tiles, 2:4 k{p.sp.k}", got.size, bad)
                checked += got.size
                mismatched += bad
            continue
        if isinstance(prob, list):                     # a sparse file's golden.sparse checks
            for r in prob:
                if r.kind == "dense":
                    print(f"{Path(path).name:40s} {r.name:13s} {r.what:28s} dense, expected to "
                          f"differ: {r.mismatches} of {r.checked} outputs differ from the 2:4 rule "
                          "(not counted)", flush=True)
                    continue
                _line(path, r.name, r.what, r.checked, r.mismatches)
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
            _line(path, k.name, what, size, bad)
            checked += size
            mismatched += bad
            continue
        try:
            if whole and args.through == "soc":
                if arch.name != "hopper":
                    raise BackendError(f"the RTL implements the Hopper arithmetic only, not --arch {arch.name}")
                # The AXI memory holds A, B and C; D = A*B + C on the soc design.
                d, info = run_soc(args.backend, data["a"], data["b"], data[k.c_key],
                                  in_fmt=k.in_fmt, out_fmt=k.out_fmt, params=_soc_params(cores, args.lanes),
                                  waves=args.waves and f"{Path(path).stem}-{k.name}-soc-{args.backend}")
                got = d.reshape(d.shape[0] // 16, 16, d.shape[1] // 16, 16).transpose(0, 2, 1, 3)
                got = got.reshape(-1, 16, 16)[:len(prob.c)]
            elif whole:
                if arch.name != "hopper":
                    raise BackendError(f"the RTL implements the Hopper arithmetic only, not --arch {arch.name}")
                d, info = run_gemm(args.backend, data["a"], data["b"], in_fmt=k.in_fmt,
                                   b_fmt=k.b_fmt, saturate=k.saturate,
                                   out_fmt=k.out_fmt, progress=False, cores=cores, lanes=args.lanes,
                                   waves=args.waves and f"{Path(path).stem}-{k.name}-gemm-{args.backend}")
                got = d.reshape(d.shape[0] // 16, 16, d.shape[1] // 16, 16).transpose(0, 2, 1, 3)
                got = got.reshape(-1, 16, 16)[:len(prob.c)]
            else:
                got, info = run_tiles(args.backend, prob.a, prob.b, prob.c, arch=arch,
                                      through=args.through or "core", lanes=args.lanes,
                                      waves=args.waves and (f"{Path(path).stem}-{k.name}-"
                                                            f"{args.through or 'core'}-{args.backend}"),
                                      **k.mma_args())
        except (BackendError, SimError) as e:
            raise CliError(str(e)) from None
        if info.get("waves"):
            print(f"waveform: {info['waves']} ({wave_note(info['waves'])})")
        bad = int((got != prob.expected).sum())
        what = (f"gemm {prob.gemm[0]}x{prob.gemm[1]}x{prob.gemm[2]}, {len(prob.c)} tiles"
                if prob.gemm else f"{len(prob.c)} tiles")
        if whole:
            what += f", {info['cycles']} clk"
        _line(path, k.name, what, got.size, bad)
        checked += got.size
        mismatched += bad
    print(f"checked {checked} mismatches {mismatched}")
    return EXIT_OK if mismatched == 0 else EXIT_MISMATCH


def _line(path, kernel: str, what: str, checked: int, bad: int):
    """One file and kernel's line of the report."""
    print(f"{Path(path).name:40s} {kernel:13s} {what:28s} checked {checked:7d} mismatches {bad}",
          flush=True)


def _check_rtl_shapes(prob, path, through):
    """Refuse, before any build, what the RTL cannot take: tiles other than 16x16 outputs, K not
    a multiple of the kind's block, the GEMM top for a tile file."""
    t, m, k = prob.a.shape
    n = prob.b.shape[-1]
    if prob.gemm is None and (m, n) != (16, 16):
        raise CliError(f"{path}: the RTL computes 16x16 output tiles; this file's tiles are {m}x{n}")
    op = prob.kernel.op
    if k % op.k_step:
        raise CliError(f"{path}: the RTL runs {op.a} K in steps of {op.k_step}; K = {k} "
                       f"is not a multiple of {op.k_step}")
    if through == "gemm" and prob.gemm is None:
        raise CliError(f"{path}: --through gemm runs whole-GEMM files (a is M x K); this is "
                       "a tile file (--through soc runs each tile as a GEMM of its own)")


def _sparse_rtl_problems(args, data, path) -> tuple:
    """A sparse tile file's kernels for the RTL core (golden.sparse.TileProblem s); CliError for a
    PyTorch sparse GEMM file or a path other than the core."""
    from tcore.golden.sparse import tile_problems
    if "a_meta" not in data:
        raise CliError(f"{path}: PyTorch 2:4 sparse GEMM files run on --backend golden (their "
                       "epilogue rounds outside the tensor core); sparse tile files run through "
                       "the RTL core")
    if args.through not in (None, "core"):
        raise CliError(f"{path}: 2:4 sparse tiles run --through core, not --through {args.through}")
    try:
        probs = tile_problems(data, kernel=None if args.kernel == "all" else args.kernel,
                              tiles=args.tiles, where=str(path))
    except (ValueError, TypeError) as e:
        raise CliError(str(e)) from None
    # d_wg_* (wgmma.sp) has the inputs of d_* (mma.sp): both are checked, against their own bits.
    return tuple(probs)


def _soc_params(cores: int, lanes: int) -> dict | None:
    """The soc design's build parameters where not the default build's."""
    extra = {**({"cores": cores} if cores > 1 else {}), **({"lanes": lanes} if lanes != 64 else {})}
    return extra or None
