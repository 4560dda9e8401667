"""``tcore verify``: check a backend (the golden model or the RTL on a simulator) against
captured silicon vectors, file by file and kernel by kernel."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tcore.rtl.sizes import LANES

from tcore.numerics import Op
from tcore.numerics.op import CAPTURED

from .common import EXIT_MISMATCH, EXIT_OK, CliError, refuse_golden_options, wave_note

NAME = "verify"
HELP = "check a backend against captured silicon vectors"

#: ``tcore verify --kernel`` choices: the captured operations' kernel names (no NumPy needed).
KERNEL_NAMES = tuple(Op.parse(s).kernel_name for s in CAPTURED)


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
    parser.add_argument("--warps", "--cores", dest="warps", type=int, default=None, metavar="N",
                        help="warps of the GEMM top or the soc block (--through gemm or soc), 1..8")
    parser.add_argument("--lanes", type=int, default=64, choices=LANES,
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

    arch = get_arch(args.arch)
    rtl = args.backend != "golden"
    if args.tiles is not None and args.tiles < 1:
        raise CliError(f"--tiles must be at least 1, not {args.tiles}")
    why = _refusal(args, arch, args.kernel) if args.kernel != "all" else None
    if why:
        raise CliError(why)
    refuse_golden_options(args, (("--waves", args.waves), ("--through", args.through),
                                 ("--lanes", args.lanes != 64)))
    if args.warps is not None and args.through not in ("gemm", "soc"):
        raise CliError("--warps is for --through gemm or soc (the warps of those tops)")
    if rtl:
        _build(args, arch, args.through or "core")      # the fields' refusals, before any file
    if args.scheduler and rtl:
        raise CliError("--scheduler is for --backend golden (RTL simulations run here)")
    client = None
    if args.scheduler:                  # files x kernels go to a dask cluster (golden.distributed)
        from tcore.golden.distributed import connect
        try:
            client = connect(args.scheduler)
        except (ImportError, OSError) as e:
            raise CliError(str(e)) from None
    try:
        jobs = [job for path in args.files for job in _jobs_of(args, arch, path, client)]
        if not jobs:
            raise CliError(f"nothing to check: no kernel of these files runs with --arch {arch.name}")
        checked = mismatched = 0
        for job in jobs:
            c, m = job.report(args, arch)
            checked, mismatched = checked + c, mismatched + m
    finally:
        if client is not None:
            client.close()
    print(f"checked {checked} mismatches {mismatched}")
    return EXIT_OK if mismatched == 0 else EXIT_MISMATCH


def _build(args, arch, through: str):
    """The :class:`tcore.rtl.designs.Build` of ``--through`` with ``--warps``, ``--lanes`` and
    ``--arch`` (:func:`tcore.sim.run.path_build`); CliError with its refusal."""
    from tcore.sim.run import RunError, path_build
    try:
        return path_build(through, warps=args.warps or 1, lanes=args.lanes, arch=arch.name)
    except RunError as e:
        raise CliError(str(e)) from None


def _refusal(args, arch, name: str) -> str | None:
    """Why captured kernel ``name`` cannot run here (the generation, or the RTL path's
    build), or None."""
    from tcore.golden.silicon import KERNELS
    op = KERNELS[name].op
    if not arch.has(op.kind):
        return f"--arch {arch.name} has no {op.kind.upper()} path: kernel {name} is modelled for hopper"
    if args.backend != "golden":
        why = _build(args, arch, args.through or "core").refusal(op)
        if why:
            return f"kernel {name} runs on --backend golden only: {why}"
    return None


# -- the jobs: what one file asks for, read and checked before anything runs ---------------------

@dataclass
class LibraryChecks:
    """A file the golden model checks whole: a cuBLAS library capture (split-K, epilogues,
    FP8 scales: ``tcore.golden.cublas``) or a 2:4 sparse file (``tcore.golden.sparse``); ``checks`` are
    their results, or the cluster's future of them."""
    path: str
    checks: object

    def report(self, args, arch) -> tuple[int, int]:
        checks = self.checks
        if hasattr(checks, "result"):                  # a dask future
            try:
                checks = checks.result()
            except (ValueError, TypeError) as e:
                raise CliError(str(e)) from None
        checked = bad = 0
        for r in checks:
            if getattr(r, "kind", None) == "dense":
                print(f"{Path(self.path).name:40s} {r.name:13s} {r.what:28s} dense, expected to "
                      f"differ: {r.mismatches} of {r.checked} outputs differ from the 2:4 rule "
                      "(not counted)", flush=True)
                continue
            _line(self.path, r.name, r.what, r.checked, r.mismatches)
            checked, bad = checked + r.checked, bad + r.mismatches
        return checked, bad


@dataclass
class SparseTiles:
    """A 2:4 sparse tile file's kernels (``tcore.golden.sparse.TileProblem`` s) through the RTL
    core's sparse beats."""
    path: str
    problems: tuple

    def report(self, args, arch) -> tuple[int, int]:
        from tcore.numerics import Op
        from tcore.sim.run import Operands
        checked = bad = 0
        for p in self.problems:
            op = Op(p.in_fmt, acc=p.out_fmt, sparse=True)
            got, _ = _run(args, arch, "core", op, Operands(p.sp.values, p.b, p.c, p.sp.meta),
                          f"{Path(self.path).stem}-{p.name}-core-{args.backend}")
            n = int((got != p.expected).sum())
            _line(self.path, p.name, f"{len(p.b)} tiles, 2:4 k{p.sp.k}", got.size, n)
            checked, bad = checked + got.size, bad + n
        return checked, bad


@dataclass
class KernelRun:
    """One kernel of a dense capture (``tcore.golden.silicon.Problem``): its tiles, or the whole
    GEMM, on the backend; ``future``: the cluster's (size, mismatches) with ``--scheduler``."""
    path: str
    data: dict
    problem: object
    future: object = None

    def report(self, args, arch) -> tuple[int, int]:
        import numpy as np
        from tcore.sim.run import Operands
        prob, k = self.problem, self.problem.kernel
        what = (f"gemm {prob.gemm[0]}x{prob.gemm[1]}x{prob.gemm[2]}, {len(prob.c)} tiles"
                if prob.gemm else f"{len(prob.c)} tiles")
        if self.future is not None:
            size, n = self.future.result()
            _line(self.path, k.name, what, size, n)
            return size, n
        through = _through(args, prob)
        if through == "gemm" and np.any(self.data[k.c_key] != 0):
            print(f"{Path(self.path).name}: C is not zero (the GEMM top computes matmulT's A*B): "
                  "running its tiles through the core")
            through = "core"
        label = f"{Path(self.path).stem}-{k.name}-{through}-{args.backend}"
        if through in ("gemm", "soc") and prob.gemm is not None:
            # The whole GEMM (the soc block: with C) on the top; D back into tiles.
            c = self.data[k.c_key] if through == "soc" else None
            d, info = _run(args, arch, through, k.op,
                           Operands(self.data["a"], self.data["b"], c), label)
            got = d.reshape(d.shape[0] // 16, 16, d.shape[1] // 16, 16).transpose(0, 2, 1, 3)
            got = got.reshape(-1, 16, 16)[:len(prob.c)]
            what += f", {info.cycles} clk"
        else:
            got, _ = _run(args, arch, through, k.op, Operands(prob.a, prob.b, prob.c), label)
        n = int((got != prob.expected).sum())
        _line(self.path, k.name, what, got.size, n)
        return got.size, n


def _through(args, prob) -> str:
    """The RTL path of a problem: ``--through``; else a whole GEMM on the GEMM top (unless only
    some tiles are asked for: the top computes every one), tiles through the core."""
    if args.backend == "golden":
        return "core"
    if args.through:
        return args.through
    return "gemm" if prob.gemm is not None and args.tiles is None else "core"


def _run(args, arch, through: str, op, operands, label):
    """:func:`tcore.sim.run.run` of one operation; D and the Result (a waveform's line
    printed); CliError for a refusal or a failed simulation."""
    from tcore.sim.run import RunError, run
    build = None if args.backend == "golden" else _build(args, arch, through)
    try:
        r = run(build, op, operands, args.backend, arch=arch.name,
                waves=bool(args.waves) and label)
    except RunError as e:
        raise CliError(str(e)) from None
    if r.waves:
        print(f"waveform: {r.waves} ({wave_note(r.waves)})")
    return r.d, r


def _jobs_of(args, arch, path, client) -> list:
    """The jobs of one file, read and validated (CliError for a bad one); with ``client``,
    the golden model's work already sent to the cluster."""
    from tcore.golden.silicon import KERNELS, VectorFileError, kernels_in, load, problem
    from tcore.golden.silicon import is_cublas_file, verify_cublas_file as verify_cublas
    from tcore.golden.sparse import is_sparse_file, verify_file as verify_sparse
    rtl = args.backend != "golden"
    try:
        data = load(path)
        if is_cublas_file(data):
            # cuBLAS split-K / epilogue / FP8-scale captures (torch_splitk/): whole library
            # GEMMs through golden.matmul's library keywords (golden.cublas).
            if rtl or arch.name != "hopper" or args.kernel != "all" or args.tiles is not None:
                raise CliError(f"{path}: a cuBLAS library capture runs with --backend golden "
                               "--arch hopper, every kernel and whole (no --kernel, --tiles)")
            try:
                return [LibraryChecks(path, client.submit(verify_cublas, data, where=str(path),
                                                          pure=False)
                                      if client else verify_cublas(data, where=str(path)))]
            except (ValueError, TypeError) as e:
                raise CliError(str(e)) from None
        if is_sparse_file(data):
            if arch.name != "hopper":
                raise CliError(f"{path}: 2:4 sparse MMA is modelled for --arch hopper only")
            if rtl:     # tile files through the core's 2:4 sparse beats
                return [SparseTiles(path, _sparse_rtl_problems(args, data, path))]
            kw = dict(kernel=None if args.kernel == "all" else args.kernel, tiles=args.tiles,
                      where=str(path))
            try:
                return [LibraryChecks(path, client.submit(verify_sparse, data, **kw, pure=False)
                                      if client else verify_sparse(data, **kw))]
            except (ValueError, TypeError) as e:
                raise CliError(str(e)) from None
        names = kernels_in(data) if args.kernel == "all" else [args.kernel]
        if not names:
            raise VectorFileError(f"{path}: none of the keys "
                                  f"{', '.join(k.d_key for k in KERNELS.values())}")
        jobs = []
        for name in names:
            why = _refusal(args, arch, name)
            if why and arch.has(KERNELS[name].kind):
                raise CliError(f"{path}: {why}")
            if why:
                print(f"{Path(path).name}: skipping {name}: {arch.name} has no "
                      f"{KERNELS[name].kind.upper()} path")
                continue
            prob = problem(data, name, args.tiles, where=str(path))
            if rtl:
                _check_rtl_shapes(prob, path, args.through)
            future = None
            if client is not None:
                from tcore.golden.cluster import verify_tiles
                future = client.submit(verify_tiles, prob.a, prob.b, prob.c, prob.expected,
                                       arch=arch, **prob.kernel.mma_args(), pure=False)
            jobs.append(KernelRun(path, data, prob, future))
        return jobs
    except VectorFileError as e:
        raise CliError(str(e)) from None


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
