"""The MMA4 core between two ends of one memory, free-running: a beat player.

Golden twin: :func:`tcore.golden.mma.mma4` (the core's; the player only moves words).

A bench, or an FPGA bring-up, writes a stream of beats (:class:`tcore.rtl.mma4.Beat`, one per
memory word) into ``mem``, sets ``count`` (beats) and ``expect`` (D blocks), and pulses
``start``: the player sends word 0, 1, ... to the core at the core's own pace (the 8-bit kinds
take two clocks a beat) and writes D block g over word g.  Word g is always free by then: a
group is at least one beat, so group g's first beat is word g or later and has been read.
``done`` is high once ``expect`` D blocks are written, until the next ``start``.

No clock of the run needs its driver, so a simulator runs the core at its own speed (a
cocotb bench that steps every clock runs a few thousand clocks a second).

Throughput: the core's (one beat per clock with 64 lanes).  Latency: the core's, plus one clock for
the memory read.

Parameters
----------
depth : int
    Memory words (beats of one run), a power of two.
dsp, arch, lanes, sparse : the core's (:class:`tcore.rtl.mma4.MMA4`).

Members
-------
start : In(1)
count, expect : In(address bits + 1)
done : Out(1)
busy : Out(1), started and not done
"""

from amaranth import *
from amaranth.lib import data, memory, wiring
from amaranth.lib.wiring import In, Out

from .mma4 import MMA4, Beat

__all__ = ["BeatPlayer"]

WORD_BITS = data.Layout.cast(Beat).size


class BeatPlayer(wiring.Component):
    def __init__(self, *, depth: int = 2048, dsp: str = "generic", arch: str = "hopper",
                 lanes: int = 64, sparse: bool = True):
        if depth < 16 or depth & (depth - 1):
            raise ValueError(f"Depth must be a power of two >= 16, not {depth!r}")
        self._depth = depth
        self.core = MMA4(dsp=dsp, arch=arch, lanes=lanes, sparse=sparse)
        n = depth.bit_length()          # 0 .. depth
        super().__init__({"start": In(1), "count": In(n), "expect": In(n),
                          "done": Out(1), "busy": Out(1)})

    @property
    def depth(self):
        return self._depth

    def elaborate(self, platform):
        m = Module()
        m.submodules.core = core = self.core
        # Named "mem" (rtl.designs.bench_memory's default): the simulators' memory hooks
        # (sim.runner) load and dump it by name.
        m.submodules.mem = mem = memory.Memory(shape=WORD_BITS, depth=self._depth, init=[])
        rd, wr = mem.read_port(transparent_for=()), mem.write_port()
        n = self._depth.bit_length()
        ptr, outs = Signal(n), Signal(n)       # next word to read; D blocks written
        vld, running = Signal(), Signal()      # the read port holds a beat for the core

        accept = vld & core.i.ready
        fetch = running & (ptr < self.count) & (accept | ~vld)
        m.d.comb += [rd.addr.eq(ptr), rd.en.eq(fetch),
                     core.i.valid.eq(vld), core.i.payload.eq(rd.data),
                     core.o.ready.eq(1),
                     self.done.eq(running & (outs == self.expect)),
                     self.busy.eq(running & (outs != self.expect))]
        with m.If(fetch):
            m.d.sync += [ptr.eq(ptr + 1), vld.eq(1)]
        with m.Elif(accept):
            m.d.sync += vld.eq(0)
        with m.If(core.o.valid):
            m.d.comb += [wr.addr.eq(outs), wr.data.eq(core.o.payload.as_value()), wr.en.eq(1)]
            m.d.sync += outs.eq(outs + 1)
        # start last: it wins over the clock's other updates.
        with m.If(self.start):
            m.d.sync += [ptr.eq(0), outs.eq(0), vld.eq(0), running.eq(1)]
        return m
