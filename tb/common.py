"""What every bench needs: the clock and reset, random pauses, and a stream driver and monitor.

The streams are Amaranth ``lib.stream`` ports as the RTL names them in Verilog
(``<port>__valid``, ``<port>__ready``, ``<port>__payload``).  The driver and the monitor are
stepped by the bench once per clock: :meth:`drive` before ``ReadOnly``, :meth:`sample` in it,
so that a bench owns its clock loop and can count clocks exactly.
"""

from __future__ import annotations

import random
from collections import deque

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, RisingEdge

__all__ = ["CLOCK_NS", "clock", "start", "reset", "pauses", "pause_channels", "StreamDriver",
           "StreamMonitor"]

#: The benches' clock period.
CLOCK_NS = 10


def clock(dut, gpi: bool = False):
    """Start ``clk`` with period :data:`CLOCK_NS`.  ``gpi``: the clock runs in the simulator
    interface (C++), not as a Python coroutine, so a long run has no Python on its edges."""
    cocotb.start_soon(Clock(dut.clk, CLOCK_NS, unit="ns", **({"impl": "gpi"} if gpi else {})).start())


async def reset(dut, hold: int = 2, edge=RisingEdge):
    """Hold ``rst`` high for ``hold`` edges of ``clk`` (``edge``: RisingEdge or FallingEdge)."""
    dut.rst.value = 1
    for _ in range(hold):
        await edge(dut.clk)
    dut.rst.value = 0


async def start(dut, *, zero=(), hold: int = 2, after: int = 0, edge=RisingEdge,
                gpi: bool = False):
    """Start the clock (:func:`clock`), drive the inputs named in ``zero`` low, reset
    (:func:`reset`) and wait ``after`` more clocks."""
    clock(dut, gpi)
    for name in zero:
        getattr(dut, name).value = 0
    await reset(dut, hold, edge)
    if after:
        await ClockCycles(dut.clk, after)


def pauses(rng: random.Random, p: float):
    """An endless pause generator (cocotbext-axi's ``set_pause_generator``): True with
    probability ``p`` each clock."""
    while True:
        yield rng.random() < p


def pause_channels(rng: random.Random, p: float, *ports):
    """Random pauses (:func:`pauses`, probability ``p``) on all five channels of each
    cocotbext-axi master or slave in ``ports``, each channel's generator seeded from ``rng``
    in turn (AW, W, B, AR, R of the first port, then the next)."""
    for port in ports:
        for ch in (port.write_if.aw_channel, port.write_if.w_channel, port.write_if.b_channel,
                   port.read_if.ar_channel, port.read_if.r_channel):
            ch.set_pause_generator(pauses(random.Random(rng.random()), p))


def _resolved(sig, port: str, what: str, cycle: int):
    value = sig.value
    if not value.is_resolvable:      # a failure where it happens, never read as a zero
        raise AssertionError(f"X or Z on {port}.{what} at clock {cycle}: {value}")
    return value


class _StreamPort:
    """The three signals of the stream ``port`` of ``dut``, and the random source of its
    stalls."""

    def __init__(self, dut, port: str, stall: float, rng):
        self.valid = getattr(dut, f"{port}__valid")
        self.ready = getattr(dut, f"{port}__ready")
        self.payload = getattr(dut, f"{port}__payload")
        self.port, self.stall, self.rng = port, stall, rng


class StreamDriver(_StreamPort):
    """Drives the stream ``port`` of ``dut``: payloads queued by :meth:`load` go out in order,
    valid and payload held until accepted (the stream rules); each clock with a payload waiting
    stays idle with probability ``stall``.

    ``sent`` counts accepted payloads and ``accept_cycles`` gives the clock of each."""

    def __init__(self, dut, port: str, stall: float = 0.0, rng=None):
        super().__init__(dut, port, stall, rng or random.Random(0))
        self.queue: deque[int] = deque()
        self.sent = 0
        self.accept_cycles: list[int] = []
        self._holding = False

    def load(self, payloads):
        self.queue.extend(payloads)

    def drive(self):
        if self._holding:
            return
        if self.queue and self.rng.random() >= self.stall:
            self.payload.value = self.queue[0]
            self.valid.value = 1
            self._holding = True
        else:
            self.valid.value = 0

    def sample(self, cycle: int):
        ready = _resolved(self.ready, self.port, "ready", cycle)
        if self._holding and ready == 1:
            self.queue.popleft()
            self.sent += 1
            self.accept_cycles.append(cycle)
            self._holding = False

    def idle(self):
        """Drop what is queued and drive valid low (before a reset, or at the end)."""
        self.queue.clear()
        self._holding = False
        self.valid.value = 0


class StreamMonitor(_StreamPort):
    """Takes payloads off the stream ``port`` of ``dut``, ready low with probability ``stall``
    each clock; ``words`` and ``cycles`` hold each payload (an int) and its clock.  X or Z on
    valid, or on a payload taken, fails at that clock."""

    def __init__(self, dut, port: str, stall: float = 0.0, rng=None):
        super().__init__(dut, port, stall, rng or random.Random(1))
        self.words: list[int] = []
        self.cycles: list[int] = []
        self.x_seen = False

    def drive(self):
        self.ready.value = 0 if self.rng.random() < self.stall else 1

    def sample(self, cycle: int):
        try:
            valid = _resolved(self.valid, self.port, "valid", cycle)
            if valid == 1 and self.ready.value == 1:
                word = _resolved(self.payload, self.port, f"payload (word {len(self.words)})",
                                 cycle)
                self.words.append(word.to_unsigned())
                self.cycles.append(cycle)
        except AssertionError:
            self.x_seen = True
            raise
