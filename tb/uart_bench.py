"""cocotb bench of the UART (design ``uart``, ``rtl/uart.py``).

The golden twin is the 8N1 line itself: the bench drives ``rx`` and samples ``tx`` bit by bit
at the build's ``divisor`` clocks a bit (a low start bit, 8 data bits LSB first, a high stop
bit), as a USB serial bridge does, and compares the bytes both ways; it checks a framing error
(a low stop bit) and an overflow of the receive FIFO (``rx_depth`` bytes held, the rest lost)
set their sticky flags, and that a start-bit glitch is no byte.
"""

from __future__ import annotations

import random

import cocotb
from cocotb.triggers import ClockCycles, FallingEdge, ReadOnly, RisingEdge, Timer, with_timeout

from tcore.host.handover import handover
from tcore.tb.common import CLOCK_NS, start


class Line:
    """The bench's end of the line."""

    def __init__(self, dut):
        h = handover()
        self.dut = dut
        self.div = h.param("divisor")
        self.depth = h.param("rx_depth")
        self.bit_ns = self.div * CLOCK_NS
        self.rng = random.Random(int(h.option("seed", 1)))

    async def send(self, byte: int, stop: int = 1, gap_bits: int = 0):
        """One frame on ``rx``, changed at falling clock edges."""
        await FallingEdge(self.dut.clk)
        for bit in [0, *((byte >> i) & 1 for i in range(8)), stop]:
            self.dut.rx.value = bit
            await Timer(self.bit_ns, unit="ns")
        self.dut.rx.value = 1
        if gap_bits:
            await Timer(gap_bits * self.bit_ns, unit="ns")

    async def receive(self) -> int:
        """The next frame on ``tx``, sampled in the middle of each bit."""
        tx = self.dut.tx
        await FallingEdge(tx)
        await Timer(self.bit_ns // 2, unit="ns")
        assert int(tx.value) == 0, "tx: the start bit did not last half a bit"
        byte = 0
        for i in range(8):
            await Timer(self.bit_ns, unit="ns")
            byte |= int(tx.value) << i
        await Timer(self.bit_ns, unit="ns")
        assert int(tx.value) == 1, f"tx: a low stop bit after 0x{byte:02x}"
        return byte

    async def pop_all(self, stall: float = 0.0) -> list[int]:
        """Every byte waiting in the receive FIFO, with random stalls on ``rx_data.ready``."""
        dut, got = self.dut, []
        while True:
            await FallingEdge(dut.clk)
            ready = self.rng.random() >= stall
            dut.rx_data__ready.value = int(ready)
            await ReadOnly()
            if not int(dut.rx_data__valid.value):
                dut._log.debug("receive FIFO empty")
                await FallingEdge(dut.clk)
                dut.rx_data__ready.value = 0
                return got
            if ready:
                got.append(int(dut.rx_data__payload.value))


async def _start(dut) -> Line:
    dut.rx.value = 1
    dut.tx_data__valid.value = 0
    dut.rx_data__ready.value = 0
    dut.clear.value = 0
    await start(dut, hold=3, after=3)
    return Line(dut)


@cocotb.test()
async def received_bytes_arrive_in_order(dut):
    line = await _start(dut)
    sent = []
    for _ in range(4):
        burst = [line.rng.randrange(256) for _ in range(line.depth - 2)]
        for b in burst:                       # back to back, or with a few idle bits between
            await line.send(b, gap_bits=line.rng.choice([0, 0, 1, 3]))
        sent += burst
        await ClockCycles(dut.clk, 2 * line.div)
        assert int(dut.rx_level.value) == len(burst)
        got = await line.pop_all(stall=0.3)
        assert got == burst, f"sent {burst}, received {got}"
    assert int(dut.rx_overflow.value) == 0 and int(dut.rx_frame_error.value) == 0


@cocotb.test()
async def written_bytes_go_out_on_the_line(dut):
    line = await _start(dut)
    data = [line.rng.randrange(256) for _ in range(40)] + [0x00, 0xFF, 0x55, 0xAA]
    heard = []

    async def listen():
        for _ in data:
            heard.append(await line.receive())

    listener = cocotb.start_soon(listen())
    for b in data:                            # valid held with the payload until ready
        await FallingEdge(dut.clk)
        dut.tx_data__valid.value = 1
        dut.tx_data__payload.value = b
        while True:
            await RisingEdge(dut.clk)
            await ReadOnly()
            if int(dut.tx_data__ready.value):
                break
        await FallingEdge(dut.clk)
        dut.tx_data__valid.value = 0
        if line.rng.random() < 0.2:
            await ClockCycles(dut.clk, line.rng.randrange(1, 30 * line.div))
    await with_timeout(listener, 12 * line.div * len(data) * CLOCK_NS * 2, "ns")
    assert heard == data
    await ClockCycles(dut.clk, 2 * line.div)
    assert int(dut.tx_busy.value) == 0 and int(dut.tx.value) == 1


@cocotb.test()
async def framing_errors_overflow_and_glitches_are_flagged(dut):
    line = await _start(dut)
    # a low stop bit: the byte is dropped and the sticky flag set; the line then recovers
    await line.send(0x5A, stop=0)
    await ClockCycles(dut.clk, 2 * line.div)
    assert int(dut.rx_frame_error.value) == 1 and int(dut.rx_level.value) == 0
    await FallingEdge(dut.clk)
    dut.clear.value = 1
    await FallingEdge(dut.clk)
    dut.clear.value = 0
    assert int(dut.rx_frame_error.value) == 0
    await line.send(0x3C)
    await ClockCycles(dut.clk, 2 * line.div)
    assert await line.pop_all() == [0x3C]
    # a glitch shorter than half a bit is no start bit
    await FallingEdge(dut.clk)
    dut.rx.value = 0
    await ClockCycles(dut.clk, max(1, line.div // 2 - 2))
    dut.rx.value = 1
    await ClockCycles(dut.clk, 12 * line.div)
    assert int(dut.rx_level.value) == 0
    # more bytes than the FIFO holds: the first rx_depth kept, the overflow flag set
    burst = [line.rng.randrange(256) for _ in range(line.depth + 3)]
    for b in burst:
        await line.send(b)
    await ClockCycles(dut.clk, 2 * line.div)
    assert int(dut.rx_overflow.value) == 1
    assert await line.pop_all() == burst[:line.depth]
