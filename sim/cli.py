"""The ``tcore`` command line: the top parser, built from the command modules of
:mod:`tcore.sim.commands` (each owns its options and its run), and the dispatch.

Subcommands import what they need when they run, so that ``tcore --help`` is instant and
``tcore benchmark`` can pin BLAS to one thread before NumPy loads.
"""

from __future__ import annotations

import argparse
import os
import sys

from tcore.sim.commands import COMMANDS, EXIT_USAGE, CliError


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("tcore")
    except PackageNotFoundError:               # a source tree run without installing
        return "(not installed)"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tcore", description="Bit-exact NVIDIA tensor-core model: "
                                "golden model, RTL, benches.")
    p.add_argument("--version", action="version", version=f"tcore {_version()}")
    sub = p.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    for command in COMMANDS:
        parser = sub.add_parser(command.NAME, help=command.HELP,
                                aliases=getattr(command, "ALIASES", ()))
        command.add_arguments(parser)
        parser.set_defaults(func=command.run)
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if getattr(args, "waves", False) is None:
        # WAVES=1 (make sim's switch) asks for waveforms wherever there are any: on RTL backends.
        args.waves = os.environ.get("WAVES") == "1" and args.backend != "golden"
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
