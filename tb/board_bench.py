"""The board top's bench (design ``board``): the simulated UART line bridged to a TCP socket on
the loopback address, so that the host's own code (``tcore board run --sim``, through
pyserial's ``socket://`` port) drives the real firmware, protocol and UART logic.

The bench drives ``uart_rx`` and samples ``uart_tx`` bit by bit, as a USB serial bridge
would: 8N1 at the build's ``divisor`` clocks a bit (its golden twin is :mod:`rtl.uart`'s
framing).  Bytes from the socket are sent on ``uart_rx`` back to back; every byte seen on
``uart_tx`` goes to the socket.  The bench listens on a free port and writes it to the
hand-over's ``progress`` file; the run ends when the host closes its connection (or no
host connects within ``accept_s`` seconds).

Hand-over options: ``divisor`` (clocks a bit), ``accept_s``.
"""

from __future__ import annotations

import socket

import cocotb
from cocotb.triggers import Event, FallingEdge, Timer

from host.handover import handover
from tb.common import CLOCK_NS, start


class LineBridge:
    """The socket and the two UART lines."""

    def __init__(self, dut, conn: socket.socket, divisor: int):
        self.dut, self.conn, self.bit_ns = dut, conn, divisor * CLOCK_NS
        self.closed = Event()
        self.bytes_in = self.bytes_out = 0
        conn.setblocking(False)

    def _poll(self) -> bytes:
        try:
            data = self.conn.recv(65536)
        except BlockingIOError:
            return b""
        except OSError:
            data = b""
        if not data:
            self.closed.set()
        return data

    async def drive(self):
        """Host -> board: each byte as a start bit, 8 data bits LSB first, a stop bit, changed
        at falling clock edges (never at the edge the design samples on)."""
        rx = self.dut.uart_rx
        rx.value = 1
        pending = bytearray()
        while not self.closed.is_set():
            if not pending:
                pending += self._poll()
                if not pending:
                    await Timer(10 * self.bit_ns, unit="ns")     # a byte's time, then look again
                    continue
            await FallingEdge(self.dut.clk)
            byte = pending.pop(0)
            for bit in [0, *((byte >> i) & 1 for i in range(8)), 1]:
                rx.value = bit
                await Timer(self.bit_ns, unit="ns")
            self.bytes_in += 1

    async def monitor(self):
        """Board -> host: sample each bit in its middle after the start bit's falling edge."""
        tx = self.dut.uart_tx
        while True:
            await FallingEdge(tx)
            await Timer(self.bit_ns * 3 // 2, unit="ns")
            byte = 0
            for i in range(8):
                byte |= int(tx.value) << i
                await Timer(self.bit_ns, unit="ns")
            stop = int(tx.value)
            assert stop == 1, f"uart_tx: a low stop bit after byte 0x{byte:02x}"
            try:
                self.conn.sendall(bytes([byte]))
            except OSError:
                self.closed.set()
            self.bytes_out += 1


@cocotb.test()
async def board_serves_the_host(dut):
    """Bridge the UART to one host connection until the host closes it."""
    h = handover()
    divisor = int(h.option("divisor"))
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(float(h.option("accept_s", 120)))
    with open(h.progress, "w") as f:
        f.write(f"{listener.getsockname()[1]}\n")
    dut.uart_rx.value = 1
    conn, _ = listener.accept()          # the simulation waits for the host, not the reverse
    listener.close()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    await start(dut, gpi=True, hold=4)
    bridge = LineBridge(dut, conn, divisor)
    cocotb.start_soon(bridge.drive())
    cocotb.start_soon(bridge.monitor())
    await bridge.closed.wait()
    conn.close()
    assert not int(dut.trap.value), "the CPU trapped"
    dut._log.info(f"host closed the line: {bridge.bytes_in} bytes in, {bridge.bytes_out} out")
