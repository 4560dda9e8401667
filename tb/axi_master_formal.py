"""Formal harness of the SoC block's AXI4 master (:class:`tcore.rtl.soc.TileDma`): the handshake
rules, proved by :func:`tcore.sim.formal.prove` against any slave that obeys the protocol and any
sequence of read and write tile requests (the two engines run at once).

Free inputs: the tile requests of both engines (taken when ready, with any 16-byte aligned
address and stride and any row count and row length, as the SoC's configuration checks allow;
any tag), ``clear`` while idle, and every slave-driven signal of the bus, constrained only by
the rules a slave must keep (ARM IHI 0022, A3.2.1 and A3.4): B and R held with their payload
until READY, no response without a request (a write response only after the burst's last
data beat), RLAST on the last beat of each read burst (in order, one ID).  Asserted of the
master:

* AW, W and AR held: VALID and payload stay until READY;
* bursts: no write beat without its address, WLAST exactly on beat AWLEN of each burst (in
  order, several bursts in flight), no burst crossing a 4 KiB boundary;
* at most :attr:`tcore.rtl.soc.TileDma.MAX_READS` read bursts and
  :attr:`tcore.rtl.soc.TileDma.MAX_WRITES` write bursts in flight;
* ``rd_done`` only for a transfer taken and not yet done, the oldest, with its tag, when
  none of its bursts is in flight (the next transfer's may be); ``wr_done`` only when every
  write burst asked for has had its data and response.

Bounded model checking from reset (``depth`` clocks), in two settings: the harness's defaults
(``make formal``, depth 20: both engines at once, one transfer at a time each, the write
engine with one burst in flight) and :func:`shipped` (the master exactly as the SoC builds it,
reads taken back to back, 4 write bursts in flight; depth :data:`SHIPPED_DEPTH`, the most the
solver finishes in minutes).  ``glitch=True`` makes the checker see
an ARVALID that may drop while an address waits for ARREADY (a fault between the master and
the checker): the proof must fail then, naming that rule.
"""

from __future__ import annotations

from amaranth import *
from amaranth.hdl import Assert, Assume
from amaranth.lib import wiring
from amaranth.lib.wiring import In

from tcore.rtl.soc import TileDma
from tcore.tb.formal_rules import held_until_ready, past as _past

__all__ = ["AxiMasterHarness", "shipped", "SHIPPED_DEPTH"]

#: The depth :func:`shipped` is proved to (about 40 s of solver time; a clock more about doubles it)
SHIPPED_DEPTH = 13


def shipped(**kw) -> "AxiMasterHarness":
    """The harness of the master exactly as the SoC builds it: 8 read and 4 write bursts in
    flight, the next read taken while the last one's data arrives."""
    return AxiMasterHarness(one_at_a_time=False, max_reads=None, max_writes=None, **kw)

_SLAVE = ("awready", "wready", "bid", "bresp", "bvalid", "arready", "rid", "rdata", "rresp",
          "rlast", "rvalid")
_FIELDS = ("addr", "stride", "rows", "row_words", "word")
# The harness's request inputs, each the DUT's stream member it drives.
_REQUEST = {"rd_valid": ("rd", "valid"), "rd_tag": ("rd", "tag"),
            **{f"rd_{f}": ("rd", f) for f in _FIELDS}, "wr_valid": ("wr", "valid"),
            **{f"wr_{f}": ("wr", f) for f in _FIELDS}}


def _request_port(dut, name):
    side, field = _REQUEST[name]
    port = getattr(dut, side)
    return port.valid if field == "valid" else getattr(port.payload, field)


class AxiMasterHarness(wiring.Component):
    """``side``: ``"read"`` or ``"write"`` gives requests to that engine only (the two share
    no state but ``clear``); ``"both"`` to both.  ``one_at_a_time``: a request only while its
    engine is idle (else the next read is taken while the last one's data arrives, as the SoC
    does).  ``max_reads`` and ``max_writes`` replace :class:`tcore.rtl.soc.TileDma`'s bursts in
    flight.

    The defaults are the proof ``make formal`` runs to depth 20: both engines at once, one
    transfer at a time each, 8 read bursts and 1 write burst in flight (the solver's time
    grows too fast beyond that at this depth).  ``shipped()`` is the master as the SoC has it
    (8 and 4 bursts, reads back to back), proved to a smaller depth."""

    def __init__(self, *, glitch: bool = False, data_width: int = 128, side: str = "both",
                 one_at_a_time: bool = True, max_reads: int | None = None,
                 max_writes: int | None = 1):
        if side not in ("read", "write", "both"):
            raise ValueError(f"side must be read, write or both, not {side!r}")
        self._glitch, self._dw, self._side, self._one = glitch, data_width, side, one_at_a_time
        self.dma = TileDma(data_width=data_width)
        if max_reads is not None:
            self.dma.MAX_READS = max_reads
        if max_writes is not None:
            self.dma.MAX_WRITES = max_writes
        sig = self.dma.signature.members
        axi = sig["axi"].signature.members
        members = {name: In(axi[name].shape) for name in _SLAVE}
        # Addresses as wide as the master's (the stream's field is 64 bits; it takes the low ones).
        members.update({name: In(self.dma._aw if name.endswith("_addr")
                                 else len(_request_port(self.dma, name))) for name in _REQUEST})
        members["clear"] = In(1)
        members["sr_data"] = In(len(self.dma.sr.data))
        members["fault"] = In(1)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = self.dma
        axi = dut.axi
        for name in _SLAVE:
            m.d.comb += getattr(axi, name).eq(getattr(self, name))
        for name in _REQUEST:
            m.d.comb += _request_port(dut, name).eq(getattr(self, name))
        m.d.comb += dut.clear.eq(self.clear)
        m.d.comb += dut.sr.data.eq(self.sr_data)

        first = Signal(init=1, reset_less=True)
        m.d.sync += first.eq(0)
        m.d.comb += Assume(ResetSignal() == first)

        def past(v, name):
            return _past(m, v, name)

        live = ~first & ~past(ResetSignal(), "rst")
        # Requests with what the SoC's checks guarantee: 16-byte aligned rows, at least one
        # row of at least one word; ``clear`` only while idle (the SoC clears at start).
        for side in ("rd", "wr"):
            with m.If(getattr(self, f"{side}_valid")):
                m.d.comb += [Assume(getattr(self, f"{side}_addr")[:4] == 0),
                             Assume(getattr(self, f"{side}_stride")[:4] == 0),
                             Assume(getattr(self, f"{side}_rows") != 0),
                             Assume(getattr(self, f"{side}_row_words") != 0)]
        m.d.comb += Assume(~self.clear | ~dut.busy)
        if self._one:                      # a request only while its engine is idle
            m.d.comb += [Assume(~self.rd_valid | ~dut.rd_busy), Assume(~self.wr_valid | ~dut.wr_busy)]
        if self._side == "read":
            m.d.comb += Assume(~self.wr_valid)
        elif self._side == "write":
            m.d.comb += Assume(~self.rd_valid)

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

        # Read transfers taken and not done (at most two: the one receiving data, the one
        # sending addresses), each with its tag and a sequence bit; every read burst carries
        # the sequence bit of the newest transfer taken (only it may send addresses).
        rd_take = self.rd_valid & dut.rd.ready
        tq = Array(Signal(3, name=f"tq{i}") for i in range(4))
        sq = Array(Signal(name=f"sq{i}") for i in range(4))
        t_head, t_tail, t_count = Signal(2), Signal(2), Signal(3)
        seq = Signal()                       # the sequence bit of the newest transfer taken
        with m.If(rd_take):
            m.d.sync += [tq[t_tail].eq(self.rd_tag), sq[t_tail].eq(~seq), seq.eq(~seq),
                         t_tail.eq(t_tail + 1)]
        with m.If(dut.rd_done):
            m.d.sync += t_head.eq(t_head + 1)
        m.d.sync += t_count.eq(t_count + rd_take - dut.rd_done)
        m.d.comb += Assert(t_count <= 2, "more than two read transfers taken")

        # Reads in flight: the lengths of the bursts asked for and not yet answered, in order.
        n = dut.MAX_READS
        lens = Array(Signal(8, name=f"rlen{i}") for i in range(n + 1))
        bseq = Array(Signal(name=f"rseq{i}") for i in range(n + 1))
        head, tail = Signal(range(n + 1)), Signal(range(n + 1))
        count = Signal(range(n + 2))
        rbeat = Signal(8)                   # beats of the oldest burst already received
        ar_fire = axi.arvalid & axi.arready
        r_fire = axi.rvalid & axi.rready
        r_end = r_fire & axi.rlast
        with m.If(ar_fire):
            m.d.sync += [lens[tail].eq(axi.arlen), bseq[tail].eq(seq),
                         tail.eq(Mux(tail == n, 0, tail + 1))]
        with m.If(r_end):
            m.d.sync += [head.eq(Mux(head == n, 0, head + 1)), rbeat.eq(0)]
        with m.Elif(r_fire):
            m.d.sync += rbeat.eq(rbeat + 1)
        m.d.sync += count.eq(count + ar_fire - r_end)
        # The slave answers only what was asked, RLAST on each burst's last beat.
        m.d.comb += [Assume(~axi.rvalid | (count != 0)),
                     Assume(~axi.rvalid | (axi.rlast == (rbeat == lens[head])))]
        m.d.comb += Assert(count <= n, "more read bursts in flight than MAX_READS")
        m.d.comb += Assert(~axi.arvalid | (t_count != 0), "a read address with no transfer taken")
        # rd_done: the oldest transfer, its tag, none of its bursts left in flight.
        with m.If(dut.rd_done):
            m.d.comb += [Assert(t_count != 0, "rd_done with no read transfer taken"),
                         Assert(dut.rd_done_tag == tq[t_head], "rd_done with another tag"),
                         Assert((count == 0) | (bseq[head] != sq[t_head]),
                                "rd_done with read bursts of the transfer in flight")]

        # Writes: WLAST on beat AWLEN of each burst in order, no beat without its address.
        nw = dut.MAX_WRITES
        # (nw entries: a burst beyond them is caught by the in-flight bound a clock later)
        wlens = Array(Signal(8, name=f"wlen{i}") for i in range(nw))
        w_head, w_tail = Signal(range(nw)), Signal(range(nw))
        w_open = Signal(range(nw + 2))      # bursts whose address went out, data not all
        w_beat = Signal(8)
        b_due = Signal(range(nw + 2))       # bursts whose data is in, response not yet
        aw_out = Signal(range(nw + 2))      # bursts whose address went out, no response yet
        aw_fire = axi.awvalid & axi.awready
        w_fire = axi.wvalid & axi.wready
        w_end = w_fire & axi.wlast
        b_fire = axi.bvalid & axi.bready
        with m.If(aw_fire):
            m.d.sync += [wlens[w_tail].eq(axi.awlen), w_tail.eq(Mux(w_tail == nw - 1, 0, w_tail + 1))]
        with m.If(w_end):
            m.d.sync += [w_head.eq(Mux(w_head == nw - 1, 0, w_head + 1)), w_beat.eq(0)]
        with m.Elif(w_fire):
            m.d.sync += w_beat.eq(w_beat + 1)
        m.d.sync += [w_open.eq(w_open + aw_fire - w_end), b_due.eq(b_due + w_end - b_fire),
                     aw_out.eq(aw_out + aw_fire - b_fire)]
        m.d.comb += Assume(~axi.bvalid | (b_due != 0))
        with m.If(axi.wvalid):
            m.d.comb += [Assert(w_open != 0, "a write beat without its address"),
                         Assert(axi.wlast == (w_beat == wlens[w_head]), "WLAST not on beat AWLEN")]
        m.d.comb += Assert(aw_out <= nw, "more write bursts in flight than MAX_WRITES")
        # wr_done: nothing of the write side left in flight.
        with m.If(dut.wr_done):
            m.d.comb += Assert(aw_out == 0, "wr_done with a write burst in flight")
        return m
