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


class CliError(Exception):
    """An error reported as one line on stderr with exit status 2."""


# -- verify ---------------------------------------------------------------------------------------

def cmd_verify(args) -> int:
    from golden import get_arch
    from golden.silicon import KERNELS, VectorFileError, kernels_in, load, problem
    from sim.backends import BackendError, run_tiles

    arch = get_arch(args.arch)
    if args.tiles is not None and args.tiles < 1:
        raise CliError(f"--tiles must be at least 1, not {args.tiles}")
    if args.kernel != "all" and KERNELS[args.kernel].in_fmt == "bf16" and not arch.bf16:
        raise CliError(f"--arch {arch.name} has no BF16 path: kernel {args.kernel} cannot run")
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
                if KERNELS[name].in_fmt == "bf16" and not arch.bf16:
                    print(f"{Path(path).name}: skipping {name}: {arch.name} has no BF16 path")
                    continue
                jobs.append((path, problem(data, name, args.tiles, where=str(path))))
        except VectorFileError as e:
            raise CliError(str(e)) from None
    checked = mismatched = 0
    for path, prob in jobs:
        k = prob.kernel
        try:
            got, info = run_tiles(args.backend, prob.a, prob.b, prob.c, in_fmt=k.in_fmt,
                                  out_fmt=k.out_fmt, arch=arch, through=args.through,
                                  waves=args.waves, gemm=prob.gemm)
        except BackendError as e:
            raise CliError(str(e)) from None
        if info.get("waves"):
            print(f"waveform: {info['waves']}")
        bad = int((got != prob.expected).sum())
        what = (f"gemm {prob.gemm[0]}x{prob.gemm[1]}x{prob.gemm[2]}, {len(prob.c)} tiles"
                if prob.gemm else f"{len(prob.c)} tiles")
        print(f"{Path(path).name:40s} {k.name:9s} {what:28s} "
              f"checked {got.size:7d} mismatches {bad}", flush=True)
        checked += got.size
        mismatched += bad
    print(f"checked {checked} mismatches {mismatched}")
    return EXIT_OK if mismatched == 0 else EXIT_MISMATCH


# -- verilog --------------------------------------------------------------------------------------

def cmd_verilog(args) -> int:
    from rtl.designs import DESIGNS, to_verilog

    out = Path(args.o)
    out.mkdir(parents=True, exist_ok=True)
    names = args.design or sorted(DESIGNS)
    for name in names:
        if name not in DESIGNS:
            raise CliError(f"unknown design {name!r}; designs: {', '.join(sorted(DESIGNS))}")
        path = out / f"{name}.v"
        path.write_text(to_verilog(name))
        print(f"wrote {path}", flush=True)
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


def bench_golden(tiles: int = 4096, repeat: int = 5, seed: int = 1) -> dict:
    """Time the golden model against float32 ``numpy.matmul`` on the same random tiles."""
    import time
    import numpy as np
    from golden import mma

    rng = np.random.default_rng(seed)
    a32 = rng.standard_normal((tiles, 16, 16)).astype(np.float16)
    b32 = rng.standard_normal((tiles, 16, 16)).astype(np.float16)
    c32 = rng.standard_normal((tiles, 16, 16)).astype(np.float32)
    a, b, c = a32.view(np.uint16), b32.view(np.uint16), c32.view(np.uint32)
    a32, b32 = a32.astype(np.float32), b32.astype(np.float32)

    def best(fn):
        times = []
        for _ in range(repeat):
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
        return min(times)

    golden_s = best(lambda: mma(a, b, c, in_fmt="fp16", out_fmt="fp32"))
    matmul_s = best(lambda: np.matmul(a32, b32) + c32)
    dots = tiles * 256
    return {"tiles": tiles, "dots": dots, "golden_s": golden_s, "matmul_f32_s": matmul_s,
            "dots_per_s": dots / golden_s, "ratio": golden_s / matmul_s}


def bench_sim(tiles: dict | None = None, seed: int = 1) -> dict:
    """Tiles per second through the MMA4 core (fused K=16, FP16 -> FP32) on each simulator.

    Builds first (not timed).  Rates use the time spent simulating (driving beats and reading
    D), not the simulator's start-up, which ``wall_s`` includes.
    """
    import time
    import numpy as np
    from sim.core import run_core
    from sim.runner import build, SimError
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
        out[sim] = {"tiles": n, "wall_s": wall, "sim_s": info["sim_s"],
                    "tiles_per_s": n / info["sim_s"], "cycles": info["cycles"],
                    "cycles_per_s": info["cycles"] / info["sim_s"]}
    base = out.get("verilator", next(iter(out.values())))["tiles_per_s"]
    for r in out.values():
        r["ratio_vs_verilator"] = r["tiles_per_s"] / base
    return out


def cmd_bench(args) -> int:
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
        print(f"golden model : {r['dots']} FP16->FP32 dot products (16 terms) in "
              f"{r['golden_s'] * 1e3:.1f} ms = {r['dots_per_s'] / 1e6:.2f} M dots/s (best of 5, 1 thread)")
        print(f"numpy float32: matmul + add on the same tiles in {r['matmul_f32_s'] * 1e3:.2f} ms")
        print(f"ratio golden/matmul: {r['ratio']:.0f}x")
        if args.json:
            print(json.dumps(r))
        return EXIT_OK
    raise CliError(f"unknown benchmark {args.what!r}")


# -- parser ---------------------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tcore", description="Bit-exact NVIDIA tensor-core model: "
                                "golden model, RTL, benches.")
    sub = p.add_subparsers(dest="cmd", required=True, metavar="COMMAND")

    v = sub.add_parser("verify", help="check a backend against captured silicon vectors")
    v.add_argument("files", nargs="+", metavar="FILE.npz")
    v.add_argument("--kernel", default="all", choices=["f16_f32", "bf16_f32", "f16_f16", "all"])
    v.add_argument("--backend", default="golden")
    v.add_argument("--through", default="core", choices=["core", "wmma"],
                   help="RTL path for tiles: the MMA core directly, or memory -> WMMA -> memory")
    v.add_argument("--arch", default="hopper", choices=["volta", "ampere", "hopper"])
    v.add_argument("--tiles", type=int, default=None, metavar="N",
                   help="only the first N tiles (16x16 output tiles of a whole GEMM)")
    v.add_argument("--waves", action="store_true", default=os.environ.get("WAVES") == "1",
                   help="dump waveforms (RTL backends; also WAVES=1): FST where available, else VCD")
    v.set_defaults(func=cmd_verify)

    g = sub.add_parser("verilog", help="write the Verilog of every top-level design")
    g.add_argument("-o", required=True, metavar="DIR", help="output folder")
    g.add_argument("--design", action="append", help="only this design (repeatable)")
    g.set_defaults(func=cmd_verilog)

    lay = sub.add_parser("layout", help="the WMMA fragment layout (lane/slot map) of the RTL")
    lay.add_argument("--json", action="store_true", help="one JSON object keyed by fragment kind")
    lay.set_defaults(func=cmd_layout)

    b = sub.add_parser("bench", help="benchmarks that print figures")
    b.add_argument("what", choices=["golden", "sim"])
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
