"""``tcore probe``: capture this machine's GPU tensor-core results (``tcore.golden.probe``)."""

from __future__ import annotations

from pathlib import Path

from .common import CliError, EXIT_OK

NAME = "probe"
HELP = "capture this machine's GPU tensor-core results (needs nvcc and a GPU)"


def add_arguments(parser):
    parser.add_argument("--out", required=True, metavar="DIR")
    parser.add_argument("--tiles", type=int, default=512, help="tiles per input class")
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--nvcc", default="nvcc")


def run(args) -> int:
    from tcore.golden.probe import ProbeError, run_probe

    try:
        written = run_probe(Path(args.out), tiles=args.tiles, seed=args.seed, nvcc=args.nvcc)
    except ProbeError as e:
        raise CliError(str(e)) from None
    print(f"wrote {len(written)} files into {args.out}; check them with: tcore verify {args.out}/*.npz")
    return EXIT_OK
