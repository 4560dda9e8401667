"""The board top's bench (design ``board``): the simulated UART line bridged to a TCP socket on
the loopback address, so that the host's own code (``tcore board run --sim``, through
pyserial's ``socket://`` port) drives the real firmware, protocol and UART logic.

The bench drives ``uart_rx`` and samples ``uart_tx`` bit by bit, as a USB serial bridge
would: 8N1 at the build's ``divisor`` clocks a bit (its golden twin is :mod:`tcore.rtl.uart`'s
framing).  Bytes from the socket are sent on ``uart_rx`` back to back; every byte seen on
``uart_tx`` goes to the socket.  The bench listens on a free port and writes it to the
hand-over's ``progress`` file.  Hosts connect one after another (a test's several sessions
on one simulated board); the run ends when the ``stop_file`` appears, or when no host
connects within ``accept_s`` seconds.

Hand-over options: ``divisor`` (clocks a bit), ``accept_s``, ``stop_file``.
"""

from __future__ import annotations

import socket
import time
from pathlib import Path

import cocotb
from cocotb.triggers import Event, FallingEdge, Timer

from tcore.host.handover import handover
from tcore.tb.common import CLOCK_NS, start


class LineBridge:
    """The UART lines and the host connection of the moment (None between connections: the
    board's bytes then go nowhere, as on a cable nobody listens to)."""

    def __init__(self, dut, divisor: int):
        self.dut, self.bit_ns = dut, divisor * CLOCK_NS
        self.conn = None
        self.closed = Event()
        self.bytes_in = self.bytes_out = 0

    def attach(self, conn: socket.socket):
        conn.setblocking(False)
        self.conn = conn
        self.closed = Event()

    def _poll(self) -> bytes:
        if self.conn is None:
            return b""
        try:
            data = self.conn.recv(65536)
        except BlockingIOError:
            return b""
        except OSError:
            data = b""
        if not data:
            self.conn.close()
            self.conn = None
            self.closed.set()
        return data

    async def drive(self):
        """Host -> board: each byte as a start bit, 8 data bits LSB first, a stop bit, changed
        at falling clock edges (never at the edge the design samples on)."""
        rx = self.dut.uart_rx
        rx.value = 1
        pending = bytearray()
        while True:
            if not pending:
                pending += self._poll()
                if not pending:
                    # an idle line: look again after 64 bytes' time (a host's request waits
                    # that long, at most, to start)
                    await Timer(640 * self.bit_ns, unit="ns")
                    continue
            await FallingEdge(self.dut.clk)
            byte = pending.pop(0)
            bits = [0, *((byte >> i) & 1 for i in range(8)), 1]
            i = 0
            while i < 10:                     # a run of equal bits is one wait
                j = i
                while j < 10 and bits[j] == bits[i]:
                    j += 1
                rx.value = bits[i]
                await Timer((j - i) * self.bit_ns, unit="ns")
                i = j
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
            assert int(tx.value) == 1, f"uart_tx: a low stop bit after byte 0x{byte:02x}"
            if self.conn is not None:
                try:
                    self.conn.sendall(bytes([byte]))
                except OSError:
                    pass
            self.bytes_out += 1


def _accept(listener: socket.socket, stop: Path, wait_s: float):
    """The next host connection; None once the stop file exists or none came in ``wait_s``."""
    t0 = time.monotonic()
    listener.settimeout(0.1)
    while time.monotonic() - t0 < wait_s:
        if stop.exists():
            return None
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            continue
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn
    return None


@cocotb.test()
async def board_serves_the_host(dut):
    """Bridge the UART to host connections, one after another, until the stop file appears
    (or no host connects within ``accept_s``).  The simulation stands still while no host is
    connected: the board sees a silent line."""
    h = handover()
    divisor = int(h.option("divisor"))
    stop = Path(h.option("stop_file"))
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    with open(h.progress, "w") as f:
        f.write(f"{listener.getsockname()[1]}\n")
    dut.uart_rx.value = 1
    bridge = LineBridge(dut, divisor)
    conn = _accept(listener, stop, float(h.option("accept_s", 120)))
    await start(dut, gpi=True, hold=4)
    cocotb.start_soon(bridge.drive())
    cocotb.start_soon(bridge.monitor())
    connections = 0
    while conn is not None:
        connections += 1
        bridge.attach(conn)
        await bridge.closed.wait()
        assert not int(dut.trap.value), "the CPU trapped"
        conn = _accept(listener, stop, float(h.option("accept_s", 120)))
    listener.close()
    dut._log.info(f"{connections} host connections: {bridge.bytes_in} bytes in, "
                  f"{bridge.bytes_out} out")
