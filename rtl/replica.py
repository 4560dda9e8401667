"""Register copies that synthesis keeps apart: one register's fan-out split into local copies.

Yosys merges flip-flops with the same inputs (``opt_merge``), which undoes a copy written in
the RTL: the one register left then drives every load across the chip, and the wire, not the
logic, sets the clock.  A register made by :func:`replica` carries the attribute
:data:`REPLICA_ATTR`; the synthesis script (:func:`tcore.sim.synth.yosys_script`) marks the
flip-flops that drive such a signal ``keep`` before Yosys's first ``opt_merge``, so that each
copy stays a flip-flop of its own and the placer can put it beside its loads.  Simulation
sees an ordinary register.
"""

from amaranth import *

__all__ = ["REPLICA_ATTR", "replica"]

#: The signal attribute that asks synthesis to keep a register's flip-flops apart.
REPLICA_ATTR = "tcore_replica"


def replica(m, value, name, *, reset_less=True):
    """A register loaded with ``value`` every clock that synthesis does not merge with its
    twins (registers of the same ``value``).  Returns the register; one clock of latency."""
    reg = Signal(Value.cast(value).shape(), name=name, reset_less=reset_less,
                 attrs={REPLICA_ATTR: 1})
    m.d.sync += reg.eq(value)
    return reg
