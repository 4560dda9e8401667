"""Formal harness of the AXI4-Lite slave (``rtl/axil.py``): the handshake rules, proved by
:func:`tcore.sim.formal.prove` for any master that obeys the protocol.

Every master-driven signal of the bus is a free input of the harness (anything, each clock),
constrained only by the rules a master must keep (ARM IHI 0022, A3.2.1: once VALID is high it
stays high, with its payload, until READY).  Asserted of the slave:

* B and R hold: a response's VALID and payload stay until READY;
* no response without a request: B handshakes never outnumber the writes whose address and
  data were both accepted, R handshakes never outnumber accepted reads;
* a response for every request: a write whose address and data are in is answered (BVALID)
  the next clock, or as soon as the previous response leaves; a read likewise;
* at most two writes (one answered, one held) and one read are in flight, and write address
  and data are never more than one apart (the slave's own bounds).

Bounded model checking from reset (``depth`` clocks): every behaviour of every legal master
up to that depth.

``glitch=True`` makes the checker see a BVALID that may drop while a response waits for BREADY
(a fault injected between the slave and the checker): the proof must fail then, naming that
rule, which shows the checks bite.
"""

from __future__ import annotations

from amaranth import *
from amaranth.hdl import Assert, Assume
from amaranth.lib import wiring
from amaranth.lib.wiring import In

from tcore.rtl.axil import AxiLiteRegs, AxiLiteSignature
from tcore.rtl.regmap import ADDR_BITS
from tcore.tb.formal_rules import held_until_ready, past as _past

__all__ = ["AxiLiteHarness"]

_MASTER = ("awaddr", "awprot", "awvalid", "wdata", "wstrb", "wvalid", "bready",
           "araddr", "arprot", "arvalid", "rready")


class AxiLiteHarness(wiring.Component):
    def __init__(self, *, glitch: bool = False):
        self._glitch = glitch
        sig = AxiLiteSignature(ADDR_BITS + 2)
        members = {name: In(sig.members[name].shape) for name in _MASTER}
        members["fault"] = In(1)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = AxiLiteRegs()
        bus = dut.bus
        for name in _MASTER:
            m.d.comb += getattr(bus, name).eq(getattr(self, name))
        # The engine side: free too (RO inputs and the W1C set pulse).
        for name, member in dut.signature.members.items():
            if name != "bus" and member.flow == In:
                m.d.comb += getattr(dut, name).eq(Signal(member.shape, name=f"free_{name}"))

        # Reset in the first clock; afterwards the master may do anything the rules allow.
        first = Signal(init=1, reset_less=True)
        m.d.sync += first.eq(0)
        rst = ResetSignal()
        m.d.comb += Assume(rst == first)

        def past(v, name):
            return _past(m, v, name)

        # What the checker sees of BVALID: the slave's, or (glitch) one that may drop while a
        # response waits for BREADY.
        bvalid = Signal()
        waiting = past(bus.bvalid & ~bus.bready, "slave_bwait")
        m.d.comb += bvalid.eq(bus.bvalid & ~(self.fault & waiting if self._glitch else 0))

        # (Every ``past`` register is made here, outside any ``If``: it must update each clock.)
        live = ~first & ~past(rst, "rst")
        # Master rules (assumed): VALID and payload held until READY.
        for valid, ready, payload in (("awvalid", "awready", ("awaddr", "awprot")),
                                      ("wvalid", "wready", ("wdata", "wstrb")),
                                      ("arvalid", "arready", ("araddr", "arprot"))):
            held_until_ready(m, live, Assume, getattr(bus, valid), getattr(bus, ready),
                             {p: getattr(bus, p) for p in payload}, f"m_{valid}")

        # Slave rules (asserted): B and R held until READY (B as the checker sees it).
        held_until_ready(m, live, Assert, bvalid, bus.bready, {"bresp": bus.bresp}, "bvalid")
        held_until_ready(m, live, Assert, bus.rvalid, bus.rready,
                         {"rdata": bus.rdata, "rresp": bus.rresp}, "rvalid")

        # Counting requests and responses (6 bits: more than the proof's depth).
        def counter(event, name):
            c = Signal(6, name=name)
            with m.If(event):
                m.d.sync += c.eq(c + 1)
            return c

        aw = counter(bus.awvalid & bus.awready, "n_aw")
        w = counter(bus.wvalid & bus.wready, "n_w")
        b = counter(bvalid & bus.bready, "n_b")
        ar = counter(bus.arvalid & bus.arready, "n_ar")
        r = counter(bus.rvalid & bus.rready, "n_r")
        pairs = Signal(6)                       # writes whose address and data are both in
        m.d.comb += pairs.eq(Mux(aw < w, aw, w))
        m.d.comb += [
            Assert(~bvalid | (b < pairs), "BVALID without a write to answer"),
            Assert(~bus.rvalid | (r < ar), "RVALID without a read to answer"),
            Assert(b <= pairs, "more B responses than writes"),
            Assert(r <= ar, "more R responses than reads"),
            # One write held while the previous response waits; one read at a time.
            Assert(pairs - b <= 2, "more than two writes in flight"),
            Assert(ar - r <= 1, "more than one read in flight"),
            Assert((aw == w) | (aw == w + 1) | (w == aw + 1), "address and data more than one apart"),
        ]
        # A response for every request: a complete write with no response showing is answered
        # (BVALID) the next clock; so is an accepted read.
        wpend, rpend = past((pairs != b) & ~bvalid, "wpend"), past((ar != r) & ~bus.rvalid, "rpend")
        with m.If(live & wpend):
            m.d.comb += Assert(bvalid, "a complete write not answered the next clock")
        with m.If(live & rpend):
            m.d.comb += Assert(bus.rvalid, "an accepted read not answered the next clock")
        return m
