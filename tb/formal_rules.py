"""Pieces the formal harnesses (``tb/*_formal.py``) share: last clock's value of a signal, and
the AXI rule that a VALID, once high, stays high with its payload until READY (ARM IHI 0022,
A3.2.1), assumed of the side the harness leaves free or asserted of the design."""

from __future__ import annotations

from amaranth import Signal

__all__ = ["past", "held_until_ready"]


def past(m, v, name: str):
    """``v`` one clock ago (a register made here, outside any ``If``: it updates each clock)."""
    r = Signal.like(v, name=f"past_{name}", reset_less=True)
    m.d.sync += r.eq(v)
    return r


def held_until_ready(m, live, check, valid, ready, payload: dict, name: str, *, seen=None):
    """While ``valid`` waited for ``ready`` last clock: ``check`` (``Assume`` or ``Assert``)
    that VALID (``seen``, the checker's view of it, if given) is still high and every payload
    signal (``{NAME: signal}``) unchanged.  ``name`` is the channel's VALID name (``"arvalid"``)
    in the messages and register names."""
    held = past(m, valid & ~ready, name)
    before = [(label, now, past(m, now, f"{name}_{label}")) for label, now in payload.items()]
    ready_name = name.replace("valid", "ready").upper()
    with m.If(live & held):
        m.d.comb += check(valid if seen is None else seen, f"{name.upper()} dropped without {ready_name}")
        for label, now, then in before:
            m.d.comb += check(now == then, f"{label.upper()} changed while waiting")
