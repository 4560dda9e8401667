"""``tcore board``: the tensor core on an ECP5 board: ``list`` the boards, ``build`` a
bitstream, ``program`` it, ``run`` a GEMM on the board (or its simulation, ``--sim``) from
the PC over the UART, checked bit for bit against the golden model.  The protocol and the
board top are in ``docs/board.md``."""

from __future__ import annotations

import json
import sys

from tcore.rtl.sizes import LANES

from .common import EXIT_MISMATCH, EXIT_OK, CliError, operation, positive

NAME = "board"
HELP = "the tensor core on an ECP5 board: list, build, program, run (or simulate) GEMMs"



def _formats() -> dict:
    """``--format`` name -> (A, B), from the format table: each format with its own B, and
    ``A_B`` for the other B formats it pairs with."""
    from tcore.numerics.formats import INPUT_FORMATS
    return {**{f.name: (f.name, f.b_formats[0]) for f in INPUT_FORMATS.values()},
            **{f"{f.name}_{b}": (f.name, b) for f in INPUT_FORMATS.values() for b in f.b_formats[1:]}}


def _format_choices():
    return list(_formats())


def _acc_choices():
    from tcore.sim.jobs import ACCUMULATORS
    return list(ACCUMULATORS)


def _board_choices():
    from tcore.sim.board.boards import BOARDS
    return list(BOARDS)


def add_arguments(parser):
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    p = sub.add_parser("list", help="the boards and what fits each")
    p.add_argument("--json", action="store_true", help="one JSON object")

    p = sub.add_parser("build", help="the board top's bitstream (build/board/<board>/tcore.bit)")
    _build_options(p)
    p.add_argument("--seeds", type=positive, default=1, help="nextpnr seeds to try (the best kept)")
    p.add_argument("--seed", type=int, default=1, help="the first seed")
    p.add_argument("--placer", default="static", choices=["static", "heap"],
                   help="nextpnr's placer (default static)")
    p.add_argument("--timeout", type=float, default=None, metavar="S",
                   help="stop a seed's place and route after S seconds")
    p.add_argument("--json", action="store_true", help="last line: one JSON object")

    p = sub.add_parser("program", help="load the bitstream with openFPGALoader (or print the command)")
    p.add_argument("--board", default="ulx3s-85f", choices=_board_choices())
    p.add_argument("--lanes", type=int, default=16, choices=LANES)
    p.add_argument("--clock", type=float, default=None, metavar="MHZ")
    p.add_argument("--baud", type=int, default=115200)
    p.add_argument("--bitstream", default=None, metavar="FILE", help="default: the build's tcore.bit")
    p.add_argument("--flash", action="store_true", help="write the SPI flash (kept over power cycles)")

    p = sub.add_parser("run", help="a GEMM on the board from this PC (or on its simulation), "
                                   "checked bit for bit")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--port", default=None, help="the board's serial port (/dev/ttyUSB0) or a pyserial URL")
    where.add_argument("--sim", action="store_true",
                       help="the board top on Verilator (the same RTL and firmware; a faster UART)")
    _build_options(p)
    p.add_argument("--simulator", default="verilator", choices=["verilator", "icarus"],
                   help="with --sim: the simulator")
    p.add_argument("--m", type=int, default=None)
    p.add_argument("--n", type=int, default=None)
    p.add_argument("--k", type=int, default=None)
    p.add_argument("--a", default=None, metavar="A.npy",
                   help="A (M x K): float16, bfloat16, float8_e4m3fn, float8_e5m2, int8, uint8, or "
                        "float32 with --format tf32, or uint16 bits with --format")
    p.add_argument("--b", default=None, metavar="B.npy", help="B (K x N)")
    p.add_argument("--c", default=None, metavar="C.npy",
                   help="C (M x N): float32, float16 (--acc f16) or int32: D = A*B + C")
    p.add_argument("--format", default=None, choices=_format_choices(),
                   help="the operands' format (random operands; with --a, what the dtype does not "
                        "say): A's, or A_B for mixed FP8")
    p.add_argument("--acc", default=None, choices=_acc_choices(),
                   help="accumulator: f32 (default), f16 (FP16, FP8), s32 / s32sat (INT8)")
    p.add_argument("--sparse", action="store_true",
                   help="2:4 sparse A: the SoC block has no sparse path, so the board refuses it "
                        "(its KIND error)")
    p.add_argument("--seed", type=int, default=1, help="random operands' seed")
    p.add_argument("-o", default=None, metavar="D.npz", help="write D: keys d (values), d_bits")
    p.add_argument("--timeout", type=float, default=None, metavar="S",
                   help="seconds an answer may take (default: from the sizes and the line)")
    p.add_argument("--quiet", action="store_true", help="do not print the board's text lines")
    p.add_argument("--json", action="store_true", help="last line: one JSON object")


def _build_options(p):
    p.add_argument("--board", default="ulx3s-85f", choices=_board_choices())
    p.add_argument("--lanes", type=int, default=16, choices=LANES,
                   help="the core's multipliers (default 16)")
    p.add_argument("--clock", type=float, default=None, metavar="MHZ",
                   help="the tensor core's (and CPU's) clock; default: the board's (tcore board list)")
    p.add_argument("--baud", type=int, default=115200, help="UART baud rate (up to 3,000,000)")


def _build(args, sim=False):
    from tcore.sim.board.boards import BoardBuild, BoardError, board_of
    try:
        return BoardBuild(board_of(args.board), lanes=args.lanes, clock_mhz=args.clock,
                          baud=args.baud, sim=sim)
    except BoardError as e:
        raise CliError(str(e)) from None


def run(args) -> int:
    return {"list": _list, "build": _build_cmd, "program": _program, "run": _run}[args.action](args)


# -- list ---------------------------------------------------------------------------------------

def _list(args) -> int:
    from tcore.sim.board.boards import BOARDS, BoardBuild
    rows = []
    for b in BOARDS.values():
        build = BoardBuild(b)
        rows.append({"board": b.name, "part": b.part, "clock_mhz": b.clock_mhz,
                     "fits": b.fits, "mem_bytes": build.mem_bytes,
                     "oscillator": b.clock, "uart": f"{b.uart[0]} {b.uart[1]}"})
    if args.json:
        print(json.dumps({"boards": rows}))
        return EXIT_OK
    print(f"{'board':16} {'part':14} {'clock':>9}  what fits")
    for r in rows:
        print(f"{r['board']:16} {r['part']:14} {r['clock_mhz']:>5g} MHz  {r['fits']}")
    print("25F parts (ULX3S-25F, Colorlight 5A-75B): no build fits; see docs/board.md")
    return EXIT_OK


# -- build --------------------------------------------------------------------------------------

def _build_cmd(args) -> int:
    from tcore.sim.board.build import build_bitstream
    from tcore.sim.board.boards import BoardError
    from tcore.sim.board.firmware import FirmwareError
    from tcore.sim.synth import SynthError
    build = _build(args)
    say = (lambda line: print(f"tcore board: {line}", file=sys.stderr, flush=True))
    try:
        r = build_bitstream(build, seeds=args.seeds, seed=args.seed, placer=args.placer,
                            progress=say, timeout_s=args.timeout)
    except (SynthError, BoardError, FirmwareError) as e:
        raise CliError(str(e).splitlines()[0]) from None
    print(f"{r['board']} ({r['part']}), {r['lanes']}-lane core at {r['clock_mhz']:g} MHz: "
          f"routed Fmax {r['fmax_mhz']} MHz, timing {'met' if r['timing_met'] else 'NOT met'}")
    print(f"  LUT4 {r['luts']:,}/{r['luts_available']:,}, FF {r['ffs']:,}/{r['ffs_available']:,}, "
          f"MULT18X18D {r['dsps']}/{r['dsps_available']}, DP16KD {r['brams']}/{r['brams_available']}")
    print(f"  yosys {r['yosys_s']:.0f} s, nextpnr {r['nextpnr_s']:.0f} s; bitstream {r['bitstream']}")
    if args.json:
        print(json.dumps(r))
    return EXIT_OK if r["timing_met"] else EXIT_MISMATCH


# -- program ------------------------------------------------------------------------------------

def _program(args) -> int:
    import shlex
    import shutil
    import subprocess
    from pathlib import Path
    from tcore.sim.board.build import bitstream_dir
    build = _build(args)
    bit = Path(args.bitstream) if args.bitstream else bitstream_dir(build) / "tcore.bit"
    if not bit.is_file():
        raise CliError(f"no bitstream at {bit}: run tcore board build --board {args.board} first")
    cmd = ["openFPGALoader", *build.board.programmer, *(["-f"] if args.flash else []), str(bit)]
    if shutil.which("openFPGALoader") is None:
        print("openFPGALoader is not installed (apt-get install openfpgaloader); run:")
        print("  " + shlex.join(cmd))
        return EXIT_OK
    return subprocess.call(cmd)


# -- run ------------------------------------------------------------------------------------------

def _operands(args):
    """``(BoardGemm, inputs)`` from the options: the user's matrices or random ones."""
    import numpy as np
    from tcore.sim.board.gemm import BoardGemm
    from tcore.sim.operands import OperandError, load_matrix
    if args.a or args.b:
        if not (args.a and args.b):
            raise CliError("--a and --b go together")
        fa_opt, fb_opt = _formats()[args.format] if args.format else (None, None)
        try:
            a, fa = _bits(load_matrix(args.a, "a"), "a", fa_opt)
            b, fb = _bits(load_matrix(args.b, "b"), "b", fb_opt or fa)
        except OperandError as e:
            raise CliError(str(e)) from None
        if a.shape[1] != b.shape[0]:
            raise CliError(f"--a is {a.shape[0]}x{a.shape[1]} and --b {b.shape[0]}x{b.shape[1]}: "
                           "A's columns must be B's rows")
        for flag, v in (("--m", args.m), ("--n", args.n), ("--k", args.k)):
            if v is not None:
                raise CliError(f"{flag} comes from --a and --b; leave it out")
        op = operation(fa, fb, args.acc, sparse=args.sparse)
        inputs = "files"
    else:
        if args.c:
            raise CliError("--c goes with --a and --b")
        if None in (args.m, args.n, args.k):
            raise CliError("--m, --n and --k are required (or --a and --b)")
        op = operation(*_formats()[args.format or "fp16"], args.acc, sparse=args.sparse)
        a, b = op.random_operands(args.m, args.n, args.k, args.seed)
        inputs = "random"
    m, k = a.shape
    n = b.shape[1]
    for flag, v, mult in (("M", m, 16), ("N", n, 16), ("K", k, op.k_step)):
        if v < 1 or v % mult:
            raise CliError(f"{flag} must be a positive multiple of {mult} for {op}, not {v}")
    c = None
    if args.c:
        try:
            c = _c_bits(load_matrix(args.c, "c"), op, (m, n))
        except OperandError as e:
            raise CliError(str(e)) from None
    return BoardGemm(np.ascontiguousarray(a), np.ascontiguousarray(b), c, op), inputs


def _bits(x, what, fmt):
    """An operand's bits and format: its dtype says the format where it can (``fmt``, from
    ``--format``, must then agree); raw data (uint16, or a bfloat16 array as ``numpy.save``
    stores it; float32 for TF32) needs ``fmt``."""
    from tcore.numerics import Op
    from tcore.numerics.formats import INPUT_FORMATS, format_of, values_dtype
    from tcore.sim.operands import OperandError
    # float32 says FP32, not TF32 (whose 13 low fraction bits the core ignores): --format tf32
    kinds = [f for f in INPUT_FORMATS if f != "tf32"]
    got = format_of(x.dtype, kinds)
    if got is not None:
        if fmt is not None and fmt != got:
            raise OperandError(f"--{what} holds {x.dtype} ({got}) values but --format says {fmt}")
        return x.view(Op(got).a_bits), got
    if fmt is not None and x.dtype.itemsize == INPUT_FORMATS[fmt].bytes and x.dtype.kind in "uVf":
        return x.view(Op(fmt).a_bits), fmt
    raise OperandError(f"--{what} has dtype {x.dtype}; give "
                       + ", ".join(str(values_dtype(f)) for f in kinds)
                       + " (raw bits, or float32 for tf32, with --format)")


def _c_bits(x, op, shape):
    """C's bits: its dtype must be the accumulator's values."""
    import numpy as np
    from tcore.sim.operands import OperandError
    if x.dtype != np.dtype(op.acc_dtype):
        raise OperandError(f"--c must be {np.dtype(op.acc_dtype)} for {op}, not {x.dtype}")
    if x.shape != shape:
        raise OperandError(f"--c is {x.shape[0]}x{x.shape[1]}, D is {shape[0]}x{shape[1]}")
    return np.ascontiguousarray(x).view(op.acc_bits)


def _run(args) -> int:
    import time
    import numpy as np
    from tcore.sim.commands.gemm import check_output
    from tcore.sim.run import Operands, RunError, run

    check_output(args.o)
    if args.seed < 0:
        raise CliError(f"--seed must be a non-negative integer, not {args.seed}")
    build = _build(args, sim=args.sim)
    g, inputs = _operands(args)
    m, n, k = g.shape
    say = (lambda line: None) if args.quiet else (lambda line: print(f"board: {line}", file=sys.stderr, flush=True))
    t0 = time.perf_counter()
    try:        # the one runner: the board at --port, or its simulated twin
        result = run(build, g.op, Operands(g.a, g.b, g.c), args.simulator if args.sim else "board",
                     port=args.port, say=say, reply_s=args.timeout)
    except RunError as e:
        raise CliError(str(e)) from None
    wall = time.perf_counter() - t0
    d, r = result.d, dict(result.extra)
    info = r.pop("info")
    clk = info["clk_hz"]
    secs = r["cycles"] / clk
    gflops = 2 * m * n * k / secs / 1e9 if r["cycles"] else None
    s = {"board": build.board.name, "sim": bool(args.sim), "m": m, "n": n, "k": k,
         "op": str(g.op), "c": g.c is not None, "inputs": inputs,
         "lanes": info["lanes"], "clock_mhz": clk / 1e6, "cycles": r["cycles"], "beats": r["beats"],
         "cpu_cycles": r["cpu_cycles"], "gflops": gflops, "mismatches": r["mismatches"],
         "outputs": r["outputs"], "bit_exact": r["mismatches"] == 0,
         "selftest_failed": info["selftest_failed"], "send_s": r["send_s"], "run_s": r["run_s"],
         "read_s": r["read_s"], "wall_s": round(wall, 1), "seed": args.seed}
    where = f"{build.board.name} ({'simulated' if args.sim else args.port})"
    print(f"GEMM {m}x{n}x{k} {g.op}{' + C' if s['c'] else ''} on {where}, "
          f"{info['lanes']}-lane core at {clk / 1e6:g} MHz")
    print(f"  cycles          {r['cycles']:,} ({r['beats']:,} core beats; CPU {r['cpu_cycles']:,})")
    if gflops is not None:
        print(f"  GFLOP/s         {gflops:.3f} at the board clock")
    print(f"  bit-exact       {'yes' if r['mismatches'] == 0 else 'NO'}: {r['mismatches']} of "
          f"{r['outputs']} outputs differ from the golden model")
    print(f"  line            {r['send_s']:.1f} s sending, {r['read_s']:.1f} s reading back")
    if args.o:
        np.savez(args.o, d=d.view(g.op.acc_dtype), d_bits=d)
        s["output"] = args.o
        print(f"  wrote           {args.o}  (d: the values, d_bits: the bit patterns)")
    if args.json:
        print(json.dumps(s))
    return EXIT_OK if r["mismatches"] == 0 else EXIT_MISMATCH
