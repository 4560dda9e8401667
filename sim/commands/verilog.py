"""``tcore verilog``: the Verilog of the top-level designs (``tcore.rtl.designs``)."""

from __future__ import annotations

from pathlib import Path

from tcore.rtl.sizes import LANES

from .common import CliError, EXIT_OK

NAME = "verilog"
HELP = "write the Verilog of every top-level design"


def add_arguments(parser):
    parser.add_argument("-o", required=True, metavar="DIR", help="output folder")
    parser.add_argument("--design", action="append", help="only this design (repeatable)")
    parser.add_argument("--preset", default="lint", metavar="NAME",
                        help="the builds to start from: lint (default: what make lint and the "
                             "benches build), ecp5-85f (what tcore synth places) or ecp5-25f (the "
                             "16-lane dense core without its skid register); the flags below "
                             "change them")
    parser.add_argument("--warps", "--cores", dest="warps", type=int, default=None, help="warps of the GEMM tops (gemm, fp4gemm, soc)")
    parser.add_argument("--lanes", type=int, default=None, choices=LANES,
                        help="multipliers of the MMA4 core (mma4, mma4play, gemm, fp4gemm, wmma, soc)")
    parser.add_argument("--dense-only", action="store_true",
                        help="mma4: the core without its 2:4 sparse select network")
    parser.add_argument("--no-skid", action="store_true",
                        help="mma4: the core without the skid register beside its output (514 "
                             "fewer flip-flops at 16 lanes; same bits and rates)")
    parser.add_argument("--mem-kib", type=int, default=None, metavar="KIB",
                        help="working memory of wmma, gemm, fp4gemm in KiB (a power of two)")
    parser.add_argument("--data-width", type=int, default=None, metavar="BITS",
                        help="AXI4 data width of soc: 32, 64 or 128 (soc also gets tb_soc.v, a plain "
                             "Verilog testbench)")


def run(args) -> int:
    from tcore.rtl.designs import DESIGNS, PRESETS, make, parameters
    from tcore.sim.runner import design_verilog

    out = Path(args.o)
    if out.exists() and not out.is_dir():
        raise CliError(f"-o {out}: exists and is not a folder")
    if args.preset not in PRESETS:
        raise CliError(f"unknown preset {args.preset!r}; presets: {', '.join(PRESETS)}")
    chosen = PRESETS[args.preset]
    names = args.design or sorted(chosen)
    for name in names:
        if name not in DESIGNS:
            raise CliError(f"unknown design {name!r}; designs: {', '.join(sorted(DESIGNS))}")
        if name not in chosen:
            raise CliError(f"preset {args.preset} has no {name} build (it has "
                           f"{', '.join(chosen)})")
    asked = {"warps": args.warps,
             "mem_words": None if args.mem_kib is None else args.mem_kib * 1024 // 16,
             "data_width": args.data_width, "lanes": args.lanes}
    flags = {"warps": "--warps", "mem_words": "--mem-kib",
             "data_width": "--data-width", "lanes": "--lanes"}
    if args.mem_kib is not None and (args.mem_kib < 1 or args.mem_kib & (args.mem_kib - 1)):
        raise CliError(f"--mem-kib must be a power of two, not {args.mem_kib}")
    builds = []
    for name in names:
        takes = parameters(name)
        if name == "fp4dec":        # its lanes are FP4 decoders, not the core's multipliers
            takes.pop("lanes", None)
        params = chosen[name].params
        for key, value in asked.items():
            if value is None:
                continue
            if key not in takes:
                raise CliError(f"design {name} has no {flags[key]} parameter (it takes: "
                               f"{', '.join(flags.get(k, k) for k in takes) or 'none'})")
            params[key] = value
        if args.dense_only:
            if name != "mma4":
                raise CliError(f"--dense-only is for --design mma4, not {name}")
            params["sparse"] = False
        if args.no_skid:
            if name != "mma4":
                raise CliError(f"--no-skid is for --design mma4, not {name}")
            params["skid"] = False
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
        # The Verilog comes from the benches' cache (build/verilog): elaborated once per design,
        # parameters and RTL source, whether make lint, a bench or this command asked first.
        path.write_text(design_verilog(name, params))
        print(f"wrote {path}  ({', '.join(f'{k}={v}' for k, v in sorted(params.items())) or 'defaults'})",
              flush=True)
        if name == "soc":           # and the plain Verilog testbench that drives it
            from tcore.sim.soc_demo import testbench
            tb = out / "tb_soc.v"
            soc = chosen[name].replace(**params)
            tb.write_text(testbench(soc.data_width, soc.addr_width))
            print(f"wrote {tb}  (plain Verilog testbench: see its header; make soc-demo runs it)")
    return EXIT_OK
