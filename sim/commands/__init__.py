"""The ``tcore`` subcommands, one module each.

A command module has ``NAME`` and ``HELP`` (its line in ``tcore --help``), ``add_arguments(parser)``
(its options) and ``run(args) -> int`` (its work; the exit status, or :class:`CliError` for a
one-line error with status 2).  Modules import what they need inside ``run``, so that building
the parser loads no NumPy.  :mod:`tcore.sim.cli` builds the parser from :data:`COMMANDS`, in order.
"""

from . import benchmark, board, gemm, layout, plot, probe, regs, synth, verify, verilog
from .common import CliError, EXIT_MISMATCH, EXIT_OK, EXIT_USAGE

#: The subcommands in the order ``tcore --help`` lists them.
COMMANDS = (verify, gemm, verilog, probe, layout, synth, board, plot, regs, benchmark)

__all__ = ["COMMANDS", "CliError", "EXIT_OK", "EXIT_MISMATCH", "EXIT_USAGE"]
