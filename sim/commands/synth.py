"""``tcore synth``: FPGA synthesis, place and route on ECP5 (``tcore.sim.synth``)."""

from __future__ import annotations

import json
import sys

from tcore.rtl.sizes import LANES

from .common import CliError, EXIT_OK, positive

NAME = "synth"
HELP = "FPGA synthesis, place and route (ECP5): area and Fmax"


def add_arguments(parser):
    parser.add_argument("--design", default="mma4", help="mma4 (default), gemm, wmma, fp4dec, fp4gemm, soc")
    parser.add_argument("--device", default="ecp5-85k", choices=["ecp5-25k", "ecp5-45k", "ecp5-85k"])
    parser.add_argument("--preset", default="ecp5-85f", metavar="NAME",
                        help="the build to place: ecp5-85f (default), ecp5-25f (--design mma4: 16 "
                             "lanes, no 2:4 select network, no skid register; with --device "
                             "ecp5-25k) or lint; the flags below change it")
    parser.add_argument("--lanes", type=int, default=None, choices=LANES,
                        help="multipliers of the MMA4 core (mma4, gemm, wmma, soc; default 64)")
    parser.add_argument("--dense-only", action="store_true",
                        help="mma4: the core without its 2:4 sparse select network (smaller: the "
                             "16-lane core on the ECP5-25F needs it; sparse beats then unsupported)")
    parser.add_argument("--no-skid", action="store_true",
                        help="mma4: the core without the skid register beside its output (514 "
                             "fewer flip-flops at 16 lanes, for the ECP5-25F; o.ready then reaches "
                             "the output FIFO's read; same bits and rates)")
    parser.add_argument("--freq", type=float, default=100.0, help="target clock for placement, MHz")
    parser.add_argument("--json", action="store_true", help="last line: one JSON object")
    parser.add_argument("--fresh", action="store_true",
                        help="run Yosys and nextpnr again even where their inputs have not changed")
    parser.add_argument("--router", default="router1", choices=["router1", "router2"],
                        help="nextpnr's router (default router1, nextpnr-ecp5's own)")
    parser.add_argument("--placer", default="static", choices=["static", "heap"],
                        help="nextpnr's placer: static (electrostatic; the default here: far less "
                             "wire to route on the MMA4 core and the GEMM top) or heap (HeAP, "
                             "nextpnr's own default)")
    parser.add_argument("--place-only", action="store_true",
                        help="stop after placement: Fmax is the placer's estimate")
    parser.add_argument("--seeds", type=positive, default=1, metavar="N",
                        help="place and route with N seeds (from --seed on), report each, keep the best")
    parser.add_argument("--seed", type=int, default=1, help="the first placer seed (default 1)")
    parser.add_argument("--jobs", type=positive, default=1, metavar="J",
                        help="seeds run J at a time (each nextpnr is single-threaded; default 1)")
    parser.add_argument("--timeout", type=float, default=None, metavar="MIN",
                        help="stop a seed's nextpnr after MIN minutes (reported as not routed, with "
                             "the router's progress)")
    parser.add_argument("--ooc", action="store_true",
                        help="out of context (nextpnr --out-of-context: ports as internal nets, no "
                             "global clock) instead of the pin harness")


def run(args) -> int:
    from tcore.rtl.designs import DESIGNS, PRESETS, Build
    from tcore.sim.synth import SynthError, synth

    if args.preset not in PRESETS:
        raise CliError(f"unknown preset {args.preset!r}; presets: {', '.join(PRESETS)}")
    if args.design not in DESIGNS:
        raise CliError(f"Design must be one of {', '.join(sorted(DESIGNS))}, not {args.design!r}")
    base = PRESETS[args.preset].get(args.design)
    if base is None and args.preset != "ecp5-85f":
        raise CliError(f"preset {args.preset} has no {args.design} build (it has "
                       f"{', '.join(PRESETS[args.preset])})")
    params = dict((base or Build(args.design)).params)
    if args.lanes is not None:
        from tcore.rtl.designs import parameters
        if "lanes" not in parameters(args.design) or args.design == "fp4dec":
            raise CliError(f"design {args.design} has no --lanes parameter")
        params["lanes"] = args.lanes
    if args.dense_only:
        if args.design != "mma4":
            raise CliError("--dense-only is for --design mma4 (the other tops tie the core's sparse "
                           "inputs off)")
        params["sparse"] = False
    if args.no_skid:
        if args.design != "mma4":
            raise CliError("--no-skid is for --design mma4 (the tops keep the core's skid)")
        params["skid"] = False
    try:
        r = synth(args.design, device=args.device, params=params, freq_mhz=args.freq,
                  progress=lambda line: print(f"  {line}", file=sys.stderr, flush=True),
                  fresh=args.fresh, router=args.router, route=not args.place_only,
                  seeds=args.seeds, seed=args.seed, jobs=args.jobs, harness=not args.ooc,
                  timeout_s=None if args.timeout is None else 60 * args.timeout,
                  placer=args.placer)
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
            state = ("FAILED" if "error" in s else "routed" if s["routed"]
                     else "placed" if args.place_only else "NOT routed")
            f = f"{s['fmax_mhz']:.1f} MHz" if s["fmax_mhz"] else "-"
            times = ", ".join(f"{k[:-2]} {s[k]:.0f} s" for k in ("place_s", "route_s") if s.get(k) is not None)
            print(f"  seed {s['seed']:<5d} {state:10s} {f:>10s}  {times}" + ("  <- kept" if s["seed"] == r["seed"] else "")
                  + (f"  ({s['error']})" if "error" in s else ""))
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
