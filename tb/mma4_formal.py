"""Formal check of the MMA4 core's stream ports (SymbiYosys bounded model check, run by
:mod:`tcore.sim.formal` as proof ``mma4``: ``make formal`` and ``tests/test_formal_mma4.py``).

The control under proof is MMA4's own code: the exponent lane's group tracking and ``i.ready``,
the group and significand FIFOs, the launcher with its output credits, the significand lane's
valid/first/last pipeline and the output FIFO.  Only the payload is abstracted
(:class:`MMA4Control`): a beat carries a 1-bit mark instead of A, B and C - set on the last
beat of one group, the watched one, chosen freely and held for the trace - and the datapath
between the FIFOs is a delay line of exactly the core's depth that carries the mark of the
group's last beat twice, once through the significand FIFO and once through the group FIFO.
One bit is enough (data independence: the core never looks at the payload), and it keeps the
FIFOs' memories small for the solver.

Properties, on every trace from reset up to :data:`DEPTH` clocks (the fused latency plus 8
beats), with arbitrary valid / ready / last / kind / accumulator patterns (so the 8-bit kinds'
two passes per beat are in it) and a reset at any clock:

* every output is the next group in order, never lost, duplicated or invented: the n-th word
  after a reset carries the mark, both copies, when the n-th group is the watched one, and
  every other word carries none (for an arbitrary, fixed n); no word leaves before its group
  has been accepted (so a reset in mid-stream leaves nothing stale behind);
* ``o.valid`` and ``o.payload`` are held until ``o.ready``.

The core is built with 2 waiting groups and 4 output credits (instead of 16 and 512), so that
backpressure fills every FIFO within the depth; the control does not depend on those sizes
but through the counters' widths.  Throughput and latency with ``o.ready`` high are the
simulation bench's checks (``tb/mma4_bench.py``, exact, from ``MMA4.latency_of``).
"""


from amaranth import *
from amaranth.hdl import Assert, Assume
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from tcore.rtl.datapath import RoundPack
from tcore.rtl.formats import InputKind, Mode
from tcore.rtl.mma4 import MAX_BEATS, MAX_PASSES, MMA4

__all__ = ["MMA4Control", "StreamCheck", "DEPTH", "harness"]

TAG = 1                                          # the mark
COUNT = 6                                        # groups and words counted since reset
# The 16-bit kinds' fused latency + 8 beats (37 clocks; an 8-bit group's two passes per beat
# are inside it: its fused latency + 4 beats).  The FP8 fused latency + 8 beats, 41 clocks,
# is a much longer proof (minutes per clock of depth) and is not run.
DEPTH = MMA4.latency_of(InputKind.FP16, MAX_BEATS) + 8


class _Beat(data.Struct):
    tag: TAG


class _Group(data.Struct):
    tag: TAG
    mode: Mode
    n: range(MAX_PASSES)


class MMA4Control(MMA4):
    """MMA4 with the payload abstracted to tags; the control is inherited unchanged.

    A word is ``Cat(tag via the significand FIFO, tag via the group FIFO)`` of the group's
    last beat, written into the output FIFO at the clock the real core writes D."""

    _beat_layout, _group_layout, _word_layout = _Beat, _Group, 2 * TAG

    def __init__(self, *, groups=None, outputs=None, glitch=False, skid=True):
        self._glitch = glitch
        if groups is not None:
            self.GROUPS, self.BEATS = groups, groups * MAX_PASSES
        if outputs is not None:
            self.OUTPUTS = outputs
        super().__init__(skid=skid)

    def _beat_unpack(self, m, beat, sel, first, mode):
        ent = Signal(_Beat)
        tag = self._delay(m, self._delay(m, beat.a[0][:TAG], "x1_tag"), "x2_tag")  # X1, X2
        m.d.comb += ent.tag.eq(tag)
        return ent, tag

    def _floored_c(self, m, ent, ctl):
        return None

    def _beat_reduce(self, m, ent, tag, c_floored):
        for s in range(4, self.EXP_STAGES):
            tag = self._delay(m, tag, f"x{s}_tag")
        return tag

    def _group_reduce(self, m, ent, tag, valid, last, mode):
        m.d.comb += ent.tag.eq(tag)

    def _significands(self, m, v1, ctl1, grp, ent, out_wr):
        vs, ctls, _, push = self._lane_control(m, v1, ctl1)
        word = Cat(ent.tag, grp.tag)
        # L2..L8, N0 (the accumulator), N1.. the rounder's stages: the real lane's registers
        # (a wrong count here would put the word beside another group's push, and fail).
        for s in range(len(range(2, self.LANE_STAGES + 1)) + 1 + RoundPack.STAGES):
            word = self._delay(m, word, f"d{s}_word")
        self._push(m, out_wr, push, word)
        return push

    def _output(self, m, out_rd, pop, pushed):
        super()._output(m, out_rd, pop, pushed)
        if self._glitch:                    # o.valid falls after one clock, ready or not
            with m.If(self.o.valid & ~self.o.ready):
                m.d.sync += self.o.valid.eq(0)

    @staticmethod
    def _delay(m, value, name):
        reg = Signal(len(value), name=name, reset_less=True)
        m.d.sync += reg.eq(value)
        return reg


class StreamCheck(wiring.Component):
    """The harness: free stream inputs under the stream rules, a scoreboard, the assertions.

    ``watch`` picks (and holds) which group the order check follows."""

    def __init__(self, *, groups=None, outputs=None, glitch=False, skid=True):
        self.dut = MMA4Control(groups=groups, outputs=outputs, glitch=glitch, skid=skid)
        super().__init__({
            "i_valid": In(1), "i_last": In(1), "i_kind": In(3), "i_f16": In(1),
            "o_ready": In(1), "watch": In(COUNT),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = self.dut
        i, o = dut.i, dut.o

        # -- the input side: stream rules, tags in order ------------------------------------
        groups, words = Signal(COUNT), Signal(COUNT)    # groups closed, words out since reset
        widx = Signal(2)
        ends = self.i_last | (widx == MAX_BEATS - 1)    # this beat ends a group if accepted
        mark = ends & (groups == self.watch)
        m.d.comb += [i.valid.eq(self.i_valid), i.payload.last.eq(self.i_last),
                     i.payload.mode.kind.eq(self.i_kind), i.payload.mode.acc_f16.eq(self.i_f16),
                     i.payload.a[0].eq(mark), o.ready.eq(self.o_ready)]
        held = Signal()                         # a beat was offered and not taken last clock
        held_last, held_fmt = Signal(), Signal(4)
        m.d.sync += [held.eq(i.valid & ~i.ready), held_last.eq(self.i_last),
                     held_fmt.eq(Cat(self.i_kind, self.i_f16))]
        with m.If(held):
            m.d.comb += Assume(i.valid & (self.i_last == held_last) &
                               (Cat(self.i_kind, self.i_f16) == held_fmt))
        # watch is one fixed group number for the whole trace.
        watch_q, watch_set = Signal(COUNT, reset_less=True), Signal(reset_less=True)
        m.d.sync += [watch_q.eq(self.watch), watch_set.eq(1)]
        with m.If(watch_set):
            m.d.comb += Assume(self.watch == watch_q)

        # -- scoreboard: groups closed, words out, the watched group ------------------------
        accept = i.valid & i.ready
        closes = accept & ends
        seen = Signal()
        pop = o.valid & o.ready
        with m.If(accept):
            m.d.sync += widx.eq(Mux(closes, 0, widx + 1))
        m.d.sync += [groups.eq(groups + closes), words.eq(words + pop)]
        with m.If(closes & mark):
            m.d.sync += seen.eq(1)
        watched_out = pop & (words == self.watch)
        # -- the properties -------------------------------------------------------------------
        with m.If(pop):
            m.d.comb += Assert(words < groups, "a word out before its group was accepted")
        word = o.payload.as_value()[:2 * TAG]
        with m.If(watched_out):
            m.d.comb += Assert(seen & (word == 0b11), "the watched group is not the word at its place")
        with m.If(pop & (words != self.watch)):
            m.d.comb += Assert(word == 0, "the watched group out at another place")
        stalled, stalled_word = Signal(), Signal(2 * TAG)
        m.d.sync += [stalled.eq(o.valid & ~o.ready), stalled_word.eq(o.payload.as_value()[:2 * TAG])]
        with m.If(stalled):
            m.d.comb += Assert(o.valid & (o.payload.as_value()[:2 * TAG] == stalled_word),
                               "o.valid or o.payload changed without o.ready")
        return m


def harness(*, glitch: bool = False, skid: bool = True) -> "StreamCheck":
    """The proof's harness (2 groups, 4 credits); ``glitch`` breaks the output's hold rule
    (``o.valid`` falls a clock after it rose, ready or not) to show that the check bites;
    ``skid`` as the core's build parameter (the output FIFO read with or without it)."""
    return StreamCheck(groups=2, outputs=4, glitch=glitch, skid=skid)
