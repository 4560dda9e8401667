"""A UART: 8 data bits, no parity, one stop bit (8N1), ``divisor`` clocks a bit.

Golden twin: the host side's byte framing (:mod:`tcore.sim.board.link`) and the board bench's
line driver and monitor (``tb/board_bench.py``), which drive and sample the same 8N1 frames.

:class:`UartTx` sends the bytes of a stream (LSB first after a low start bit, then a high stop
bit); :class:`UartRx` samples the line in the middle of each bit, after a two-flip-flop
synchroniser (the line comes from another clock: the USB bridge's), and offers each byte whose
stop bit is high.  :class:`Uart` puts a receive FIFO behind the receiver (one block RAM at the
default 2,048 bytes) so that a whole protocol frame waits for a busy CPU, and a small FIFO in
front of the transmitter.
"""

from amaranth import *
from amaranth.lib import fifo, stream, wiring
from amaranth.lib.cdc import FFSynchronizer
from amaranth.lib.wiring import In, Out

__all__ = ["UartTx", "UartRx", "Uart", "divisor_of"]


def divisor_of(clk_hz: float, baud: int) -> int:
    """Clocks a bit for ``baud`` at ``clk_hz``: the nearest integer, refused when the bit
    rate it gives is more than 2 % off (8N1 tolerates about 4 % between both ends) or the
    bit is under 4 clocks (the receiver samples in the middle of a bit)."""
    div = round(clk_hz / baud)
    if div < 4:
        raise ValueError(f"{baud} baud at {clk_hz / 1e6:g} MHz is {clk_hz / baud:.2f} clocks a "
                         "bit: the UART needs at least 4")
    err = abs(clk_hz / div - baud) / baud
    if err > 0.02:
        raise ValueError(f"{baud} baud at {clk_hz / 1e6:g} MHz: the nearest divisor ({div}) is "
                         f"{100 * err:.1f} % off (2 % at most)")
    return div


class UartTx(wiring.Component):
    """The transmitter: ``data`` (a stream of bytes) out on ``tx``, high while idle."""

    def __init__(self, divisor: int):
        if divisor < 4:
            raise ValueError(f"divisor must be at least 4, not {divisor}")
        self._div = divisor
        super().__init__({"data": In(stream.Signature(8)), "tx": Out(1, init=1),
                          "busy": Out(1)})

    def elaborate(self, platform):
        m = Module()
        shift = Signal(10, init=0x3FF)            # stop, data LSB..MSB, start: sent LSB first
        bits = Signal(range(11))                  # bits still to send
        timer = Signal(range(self._div))
        m.d.comb += [self.tx.eq(shift[0]), self.busy.eq(bits != 0),
                     self.data.ready.eq(bits == 0)]
        with m.If(self.data.valid & self.data.ready):
            m.d.sync += [shift.eq(Cat(C(0, 1), self.data.payload, C(1, 1))), bits.eq(10),
                         timer.eq(self._div - 1)]
        with m.Elif(bits != 0):
            with m.If(timer == 0):
                m.d.sync += [shift.eq(Cat(shift[1:], C(1, 1))), bits.eq(bits - 1),
                             timer.eq(self._div - 1)]
            with m.Else():
                m.d.sync += timer.eq(timer - 1)
        return m


class UartRx(wiring.Component):
    """The receiver: bytes from ``rx`` out on ``data`` (valid for one clock; no back-pressure:
    a byte the sink does not take is lost, so put a FIFO behind it).  ``frame_error`` pulses
    for a byte whose stop bit was low (the byte is dropped)."""

    def __init__(self, divisor: int):
        if divisor < 4:
            raise ValueError(f"divisor must be at least 4, not {divisor}")
        self._div = divisor
        super().__init__({"rx": In(1, init=1), "data": Out(stream.Signature(8, always_ready=True)),
                          "frame_error": Out(1)})

    def elaborate(self, platform):
        m = Module()
        line = Signal(init=1)
        m.submodules.sync = FFSynchronizer(self.rx, line, init=1)
        timer = Signal(range(self._div))
        bit = Signal(range(10))                   # 0: start, 1..8: data, 9: stop
        shift = Signal(8)
        with m.FSM():
            with m.State("IDLE"):
                with m.If(~line):                 # a start bit begins: sample its middle
                    m.d.sync += [timer.eq(self._div // 2 - 1), bit.eq(0)]
                    m.next = "BITS"
            with m.State("BITS"):
                with m.If(timer != 0):
                    m.d.sync += timer.eq(timer - 1)
                with m.Else():
                    m.d.sync += [timer.eq(self._div - 1), bit.eq(bit + 1)]
                    with m.If(bit == 0):
                        with m.If(line):          # a glitch, not a start bit
                            m.next = "IDLE"
                    with m.Elif(bit <= 8):
                        m.d.sync += shift.eq(Cat(shift[1:], line))
                    with m.Else():
                        # the stop bit: a low one (a framing error or a break) waits for
                        # the line to go idle before the next start bit counts
                        m.d.comb += [self.data.valid.eq(line), self.frame_error.eq(~line)]
                        m.next = "IDLE"
                        with m.If(~line):
                            m.next = "BREAK"
            with m.State("BREAK"):
                with m.If(line):
                    m.next = "IDLE"
        m.d.comb += self.data.payload.eq(shift)
        return m


class Uart(wiring.Component):
    """The UART with its FIFOs (design ``uart``; ``divisor`` 434 is 115200 baud at 50 MHz): ``tx_data`` (a stream of bytes to send), ``rx_data`` (the
    bytes received, in order; ``rx_level`` of them waiting), ``rx_overflow`` (sticky: a byte
    came while the receive FIFO was full), ``rx_frame_error`` (sticky), cleared by
    ``clear``.  The pins are ``tx`` and ``rx``."""

    def __init__(self, divisor: int = 434, rx_depth: int = 2048, tx_depth: int = 16):
        self._div, self._rx_depth, self._tx_depth = divisor, rx_depth, tx_depth
        super().__init__({
            "tx": Out(1, init=1), "rx": In(1, init=1),
            "tx_data": In(stream.Signature(8)), "rx_data": Out(stream.Signature(8)),
            "rx_level": Out(range(rx_depth + 1)), "tx_busy": Out(1),
            "rx_overflow": Out(1), "rx_frame_error": Out(1), "clear": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.txer = txer = UartTx(self._div)
        m.submodules.rxer = rxer = UartRx(self._div)
        m.submodules.tx_fifo = tx_fifo = fifo.SyncFIFOBuffered(width=8, depth=self._tx_depth)
        m.submodules.rx_fifo = rx_fifo = fifo.SyncFIFOBuffered(width=8, depth=self._rx_depth)
        m.d.comb += [
            self.tx.eq(txer.tx), rxer.rx.eq(self.rx),
            tx_fifo.w_data.eq(self.tx_data.payload), tx_fifo.w_en.eq(self.tx_data.valid),
            self.tx_data.ready.eq(tx_fifo.w_rdy),
            txer.data.payload.eq(tx_fifo.r_data), txer.data.valid.eq(tx_fifo.r_rdy),
            tx_fifo.r_en.eq(txer.data.ready),
            self.tx_busy.eq(tx_fifo.r_rdy | txer.busy),
            rx_fifo.w_data.eq(rxer.data.payload), rx_fifo.w_en.eq(rxer.data.valid),
            self.rx_data.payload.eq(rx_fifo.r_data), self.rx_data.valid.eq(rx_fifo.r_rdy),
            rx_fifo.r_en.eq(self.rx_data.ready), self.rx_level.eq(rx_fifo.r_level),
        ]
        with m.If(rxer.data.valid & ~rx_fifo.w_rdy):
            m.d.sync += self.rx_overflow.eq(1)
        with m.If(rxer.frame_error):
            m.d.sync += self.rx_frame_error.eq(1)
        with m.If(self.clear):
            m.d.sync += [self.rx_overflow.eq(0), self.rx_frame_error.eq(0)]
        return m
