"""``tcore plot``: the pictures of ``tcore.sim.plots``."""

from __future__ import annotations

from pathlib import Path

from .common import CliError, EXIT_OK

NAME = "plot"
HELP = ("pictures: fragment ownership, accumulation error vs K, Hopper's FP8 accumulation, "
        "2:4 sparse vs dense")


def add_arguments(parser):
    parser.add_argument("what", choices=["layout", "accumulation", "fp8-accumulation", "sparse"])
    parser.add_argument("-o", required=True, metavar="FILE.png")


def run(args) -> int:
    from tcore.sim import plots

    out = Path(args.o)
    if out.parent and not out.parent.exists():
        raise CliError(f"no such folder: {out.parent}")
    try:
        plots._pyplot()
    except RuntimeError as e:
        raise CliError(str(e)) from None
    if args.what == "layout":
        from tcore.sim.layout import rtl_layout
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
