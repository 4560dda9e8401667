"""``tcore benchmark`` (``tcore bench``, its old name): the benchmarks of
:mod:`tcore.sim.benchmark`, as tables (and ``--json``)."""

from __future__ import annotations

import json

from .common import CliError, EXIT_OK

NAME = "benchmark"
#: The command's old name, kept for scripts that use it.
ALIASES = ("bench",)
HELP = "benchmarks that print figures"


def add_arguments(parser):
    parser.add_argument("what", choices=["golden", "sim", "soc", "all"],
                        help="all: golden, sim and a GEMM, as one table (make benchmark); soc: the soc "
                             "design with 1, 2, 4 and 8 warps")
    parser.add_argument("--size", type=int, default=64, metavar="N",
                        help="soc: an NxNxN GEMM (a multiple of 16; default 64)")
    parser.add_argument("--tiles", type=int, default=4096)
    parser.add_argument("--workers", type=int, default=None, metavar="N",
                        help="golden: threads for the golden model (default: every core)")
    parser.add_argument("--gemm", type=int, default=0, metavar="N",
                        help="golden: also time one NxNxN FP16->FP32 GEMM (compiled engine)")
    parser.add_argument("--json", action="store_true", help="last line: one JSON object")


def run(args) -> int:
    from tcore.sim import benchmark

    benchmark.pin_blas_threads()            # one BLAS thread, before NumPy loads
    try:
        if args.what == "all":
            r = benchmark.benchmark_all()
            print()
            benchmark.print_benchmark_table(r)
        elif args.what == "soc":
            if args.size < 16 or args.size % 16:
                raise CliError(f"--size must be a positive multiple of 16, not {args.size}")
            r = benchmark.benchmark_soc(args.size)
            benchmark.print_soc_table(r)
        elif args.what == "sim":
            r = benchmark.benchmark_sim()
            print(f"{'simulator':10s} {'tiles':>6s} {'sim s':>7s} {'wall s':>7s} {'tiles/s':>9s} "
                  f"{'cycles/s':>9s} {'vs verilator':>13s}")
            for sim, x in r.items():
                print(f"{sim:10s} {x['tiles']:6d} {x['sim_s']:7.2f} {x['wall_s']:7.2f} "
                      f"{x['tiles_per_s']:9.2f} {x['cycles_per_s']:9.0f} {x['ratio_vs_verilator']:12.4f}x")
        else:
            r = benchmark.benchmark_golden(tiles=args.tiles, workers=args.workers, gemm=args.gemm)
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
    except benchmark.BenchmarkError as e:
        raise CliError(str(e)) from None
    if args.json:
        print(json.dumps(r))
    return EXIT_OK
