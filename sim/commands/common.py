"""What every ``tcore`` subcommand shares: exit statuses, the one-line error, small checks."""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["EXIT_OK", "EXIT_MISMATCH", "EXIT_USAGE", "CliError", "positive",
           "refuse_golden_options", "wave_note", "operation"]

EXIT_OK, EXIT_MISMATCH, EXIT_USAGE = 0, 1, 2


class CliError(Exception):
    """An error reported as one line on stderr with exit status 2."""


def positive(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    try:
        v = int(text)
    except ValueError:
        v = 0
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1, not {text!r}")
    return v


def refuse_golden_options(args, names):
    """CliError for the first ``(flag, given)`` of ``names`` given on ``--backend golden``."""
    if args.backend == "golden":
        for flag, given in names:
            if given:
                raise CliError(f"{flag} has no meaning on --backend golden (it is for the RTL backends)")


def wave_note(path) -> str:
    """How to open the waveform at ``path``."""
    from tcore.sim.runner import wave_note
    return wave_note(Path(path))


def operation(a: str, b: str | None, acc: str | None, sparse: bool = False):
    """The :class:`tcore.numerics.Op` of ``--format``'s A and B and ``--acc`` (None: A's default);
    CliError with the operation's refusal."""
    from tcore.numerics import Op, UnsupportedOp
    from tcore.sim.jobs import ACCUMULATORS
    out, sat = ACCUMULATORS[acc] if acc else (None, False)
    try:
        return Op(a, b, out, sat, sparse=sparse)
    except UnsupportedOp as e:
        raise CliError(str(e)) from None
