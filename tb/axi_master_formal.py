"""Formal harness of the SoC block's AXI4 master (:class:`rtl.soc.TileDma`): the handshake
rules, proved by :func:`sim.formal.prove` against any slave that obeys the protocol and any
sequence of tile requests.

Free inputs: the tile requests (``start`` while the master is idle, with any 16-byte aligned
address and stride and any row count and row length, as the SoC's configuration checks allow) and every slave-driven signal of the bus, constrained only by the
rules a slave must keep (ARM IHI 0022, A3.2.1 and A3.4): B and R held with their payload until
READY, no response without a request, RLAST on the last beat of each read burst (in order, one
ID).  Asserted of the master:

* AW, W and AR held: VALID and payload stay until READY;
* bursts: no write beat without its address, WLAST exactly on beat AWLEN of each burst, no
  burst crossing a 4 KiB boundary;
* at most :attr:`rtl.soc.TileDma.MAX_READS` read bursts and one write burst in flight;
* ``done`` only when every burst asked for has had its data and response.

Bounded model checking from reset (``depth`` clocks).  ``glitch=True`` makes the checker see
an ARVALID that may drop while an address waits for ARREADY (a fault between the master and
the checker): the proof must fail then, naming that rule.
"""

from __future__ import annotations

from amaranth import *
from amaranth.hdl import Assert, Assume
from amaranth.lib import wiring
from amaranth.lib.wiring import In

from rtl.soc import TileDma
from tb.formal_rules import held_until_ready, past as _past

__all__ = ["AxiMasterHarness"]

_SLAVE = ("awready", "wready", "bid", "bresp", "bvalid", "arready", "rid", "rdata", "rresp",
          "rlast", "rvalid")
_REQUEST = ("start", "write", "addr", "stride", "rows", "row_words", "word")


class AxiMasterHarness(wiring.Component):
    def __init__(self, *, glitch: bool = False, data_width: int = 128):
        self._glitch, self._dw = glitch, data_width
        self.dma = TileDma(data_width=data_width)
        sig = self.dma.signature.members
        axi = sig["axi"].signature.members
        members = {name: In(axi[name].shape) for name in _SLAVE}
        members.update({name: In(sig[name].shape) for name in _REQUEST})
        members["sr_data"] = In(sig["sr_data"].shape)
        members["fault"] = In(1)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = self.dma
        axi = dut.axi
        for name in _SLAVE:
            m.d.comb += getattr(axi, name).eq(getattr(self, name))
        for name in _REQUEST + ("sr_data",):
            m.d.comb += getattr(dut, name).eq(getattr(self, name))

        first = Signal(init=1, reset_less=True)
        m.d.sync += first.eq(0)
        m.d.comb += Assume(ResetSignal() == first)

        def past(v, name):
            return _past(m, v, name)

        live = ~first & ~past(ResetSignal(), "rst")
        # A request only while idle (the SoC's arbiter starts the master only then).
        m.d.comb += Assume(~self.start | (~dut.busy & ~dut.done))
        # ... with what the SoC's checks guarantee: 16-byte aligned rows, at least one row
        # of at least one word.
        with m.If(self.start):
            m.d.comb += [Assume(self.addr[:4] == 0), Assume(self.stride[:4] == 0),
                         Assume(self.rows != 0), Assume(self.row_words != 0)]

        # What the checker sees of ARVALID (glitch: one that may drop while waiting).
        arvalid = Signal()
        m.d.comb += arvalid.eq(axi.arvalid & ~(self.fault & past(axi.arvalid & ~axi.arready,
                                                                  "dut_arwait")
                                               if self._glitch else 0))

        # Slave rules (assumed): B and R held with their payload until READY.
        for valid, ready, payload in (("bvalid", "bready", ("bresp", "bid")),
                                      ("rvalid", "rready", ("rdata", "rresp", "rlast", "rid"))):
            held_until_ready(m, live, Assume, getattr(axi, valid), getattr(axi, ready),
                             {p: getattr(axi, p) for p in payload}, f"s_{valid}")
        m.d.comb += [Assume(axi.bid == 0), Assume(axi.rid == 0)]

        # Master rules (asserted): AW, W, AR held with their payload until READY.
        for valid, ready, payload, seen in (
                ("awvalid", "awready", ("awaddr", "awlen", "awsize", "awburst"), axi.awvalid),
                ("wvalid", "wready", ("wdata", "wlast", "wstrb"), axi.wvalid),
                ("arvalid", "arready", ("araddr", "arlen", "arsize", "arburst"), arvalid)):
            held_until_ready(m, live, Assert, getattr(axi, valid), getattr(axi, ready),
                             {p: getattr(axi, p) for p in payload}, valid, seen=seen)

        beat_bytes = self._dw // 8
        # No burst crosses a 4 KiB boundary.
        for valid, addr, blen in ((axi.awvalid, axi.awaddr, axi.awlen), (axi.arvalid, axi.araddr, axi.arlen)):
            with m.If(valid):
                m.d.comb += Assert(addr[:12] + (blen + 1) * beat_bytes <= 4096,
                                   "a burst crosses a 4 KiB boundary")

        # Reads in flight: the lengths of the bursts asked for and not yet answered, in order.
        n = dut.MAX_READS
        lens = Array(Signal(8, name=f"rlen{i}") for i in range(n + 1))
        head, tail = Signal(range(n + 1)), Signal(range(n + 1))
        count = Signal(range(n + 2))
        rbeat = Signal(8)                   # beats of the oldest burst already received
        ar_fire = axi.arvalid & axi.arready
        r_fire = axi.rvalid & axi.rready
        r_end = r_fire & axi.rlast
        with m.If(ar_fire):
            m.d.sync += [lens[tail].eq(axi.arlen), tail.eq(Mux(tail == n, 0, tail + 1))]
        with m.If(r_end):
            m.d.sync += [head.eq(Mux(head == n, 0, head + 1)), rbeat.eq(0)]
        with m.Elif(r_fire):
            m.d.sync += rbeat.eq(rbeat + 1)
        m.d.sync += count.eq(count + ar_fire - r_end)
        # The slave answers only what was asked, RLAST on each burst's last beat.
        m.d.comb += [Assume(~axi.rvalid | (count != 0)),
                     Assume(~axi.rvalid | (axi.rlast == (rbeat == lens[head])))]
        m.d.comb += Assert(count <= n, "more read bursts in flight than MAX_READS")

        # Writes: one burst at a time, WLAST on beat AWLEN, no beat without its address.
        w_open, w_len, w_beat = Signal(), Signal(8), Signal(8)
        b_due = Signal()                    # a burst's data is in, its response not yet
        with m.If(axi.awvalid & axi.awready):
            m.d.sync += [w_open.eq(1), w_len.eq(axi.awlen), w_beat.eq(0)]
        w_fire = axi.wvalid & axi.wready
        with m.If(w_fire):
            m.d.sync += w_beat.eq(w_beat + 1)
            with m.If(axi.wlast):
                m.d.sync += [w_open.eq(0), b_due.eq(1)]
        with m.If(axi.bvalid & axi.bready):
            m.d.sync += b_due.eq(0)
        m.d.comb += Assume(~axi.bvalid | b_due)
        with m.If(axi.wvalid):
            m.d.comb += [Assert(w_open, "a write beat without its address"),
                         Assert(axi.wlast == (w_beat == w_len), "WLAST not on beat AWLEN")]
        with m.If(axi.awvalid):
            m.d.comb += Assert(~w_open & ~b_due, "a second write burst in flight")
        # done: nothing left in flight.
        with m.If(dut.done):
            m.d.comb += [Assert(count == 0, "done with read bursts in flight"),
                         Assert(~w_open & ~b_due, "done with a write burst in flight")]
        return m
