"""mma_sync on the register file: the beat feeder and the D drain that the WMMA sequencer and the
matmulT warps share.

An mma_sync is 64 beats: for each output block (i, j) in row-major order, the four k slices
s = 0..3 as one fused group (A block (i, s), B block (s, j), C block (i, j) with the first).
The register file's reads are registered, so the feeder reads beat n + 1 while the core takes
beat n: the core sees a beat every clock, the first one the clock after ``start``.

The other WMMA shapes (``tall``: m32n8k16, and m8n32k16 run as its transpose) take the same 64
beats over the 16 blocks of their accumulator fragment (rows 16..31 of the 32x8 at columns
8..15, :mod:`tcore.numerics.fragments`): output block (i, j) reads A block (i, s) of fragment
a + j // 2 (the pair) and B block (s, j % 2).
"""

from amaranth import *
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from .fragments import MmaReadSignature, MmaWriteSignature
from .formats import Mode
from .mma4 import Beat, DTile

__all__ = ["BeatFeeder", "DrainD"]


class BeatFeeder(wiring.Component):
    """Sends the 64 beats of an mma_sync from the register file to the core.

    ``start`` (with ``a``, ``b``, ``c`` fragments, ``tall`` and the flags) is taken when ``ready`` is
    high; the read of beat 0 goes out in that same clock, so beat 0 reaches the core on the
    next.  ``ready`` is high when idle and in the clock the last beat is accepted (back-to-back
    mma_syncs leave no gap).  ``zero_c`` sends C = 0 (matmulT's ``fill_fragment(c, 0)``).

    Members
    -------
    start, a, b, c, tall, mode, zero_c : In
    ready : Out(1)
    busy : Out(1), a beat is waiting for the core or still to be read
    accepted : Out(1), the core took a beat this clock; ``last``: it was the 64th
    rd : Out(MmaReadSignature()), to the register file
    beat : Out(stream.Signature(Beat)), to the core
    """

    def __init__(self):
        super().__init__({
            "start": In(1), "a": In(3), "b": In(3), "c": In(3), "tall": In(1),
            "mode": In(Mode), "zero_c": In(1),
            "ready": Out(1), "busy": Out(1), "accepted": Out(1), "last": Out(1),
            "rd": Out(MmaReadSignature()),
            "beat": Out(stream.Signature(Beat)),
        })

    def elaborate(self, platform):
        m = Module()
        frags = [Signal(3, name=n) for n in ("fa", "fb", "fc")]
        mode, zero_c, tall = Signal(Mode), Signal(), Signal()
        nxt = Signal(6)                 # the next beat to read: (i, j, s) = nxt[4:6], [2:4], [0:2]
        more = Signal()                 # beats left to read
        vld = Signal()                  # the read register holds a beat for the core
        cur_s, cur_last = Signal(2), Signal()
        rd, beat = self.rd, self.beat

        accept = vld & beat.ready
        last = accept & cur_last
        m.d.comb += [self.accepted.eq(accept), self.last.eq(last),
                     self.ready.eq(~vld | last), self.busy.eq(vld | more)]
        go = self.start & self.ready
        # Read beat 0 of a new mma_sync, or the next beat when the core takes one (or the
        # register is empty).
        step = more & (accept | ~vld)
        # The address is the next beat's while beats are left to read, else beat 0 of the
        # mma_sync offered at ``start`` (``go`` implies none are left): it does not wait for
        # this clock's handshake with the core, which only enables the read.
        idx = Mux(more, nxt, 0)
        j, t = idx[2:4], Mux(more, tall, self.tall)
        m.d.comb += [
            rd.en.eq(go | step),
            rd.a.eq(Mux(more, frags[0], self.a) + (t & j[1])), rd.b.eq(Mux(more, frags[1], self.b)),
            rd.c.eq(Mux(more, frags[2], self.c)),
            rd.s.eq(idx[0:2]), rd.j.eq(j), rd.jb.eq(Cat(j[0], j[1] & ~t)), rd.i.eq(idx[4:6]),
            rd.sparse.eq(Mux(more, mode.sparse, self.mode.sparse)),
        ]
        with m.If(go):
            m.d.sync += [frags[0].eq(self.a), frags[1].eq(self.b), frags[2].eq(self.c),
                         mode.eq(self.mode), zero_c.eq(self.zero_c), tall.eq(self.tall),
                         nxt.eq(1), more.eq(1), vld.eq(1), cur_s.eq(0), cur_last.eq(0)]
        with m.Elif(step):
            m.d.sync += [nxt.eq(nxt + 1), more.eq(nxt != 63), vld.eq(1), cur_s.eq(nxt[0:2]),
                         cur_last.eq(nxt == 63)]
        with m.Elif(accept):
            m.d.sync += vld.eq(0)
        m.d.comb += [
            beat.valid.eq(vld),
            beat.payload.a.eq(rd.beat_a), beat.payload.b.eq(rd.beat_b),
            beat.payload.c.eq(Mux(zero_c, 0, rd.beat_c.as_value())),
            beat.payload.last.eq(cur_s == 3),
            beat.payload.mode.eq(mode),
            beat.payload.b_hi.eq(rd.beat_b_hi), beat.payload.meta.eq(rd.beat_meta),
        ]
        return m


class DrainD(wiring.Component):
    """Writes the core's D blocks into accumulator ``frag`` in output order (0, 0), (0, 1), ...;
    ``done`` pulses with the 16th block of an mma_sync.  The core is never stalled."""

    def __init__(self):
        super().__init__({
            "d": In(stream.Signature(DTile)), "frag": In(3),
            "wr": Out(MmaWriteSignature()), "done": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        oi, oj = Signal(2), Signal(2)
        m.d.comb += [self.d.ready.eq(1),
                     self.wr.en.eq(self.d.valid), self.wr.frag.eq(self.frag),
                     self.wr.i.eq(oi), self.wr.j.eq(oj), self.wr.data.eq(self.d.payload)]
        with m.If(self.d.valid):
            m.d.sync += Cat(oj, oi).eq(Cat(oj, oi) + 1)
            m.d.comb += self.done.eq((oi == 3) & (oj == 3))
        return m
