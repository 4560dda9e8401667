"""The host side of the board's serial protocol (:mod:`tcore.sim.board.protocol`) over a pyserial
port: a USB serial device (``/dev/ttyUSB0``) or any pyserial URL (``socket://127.0.0.1:PORT``,
the simulated board's).

:class:`BoardLink` sends one request and reads its one answer; an ``ERR`` answer raises
:class:`BoardReplyError` (with the board's code), and the link stays usable.  Text the board
prints between frames (the self-test's lines at reset) is collected line by line and handed to
``on_text``.
"""

from __future__ import annotations

import struct
import time

from . import protocol as P

__all__ = ["BoardLink", "BoardReplyError", "LinkError", "open_port"]


class LinkError(RuntimeError):
    """The line broke: no answer in time, a damaged answer, or the port failed."""


class BoardReplyError(RuntimeError):
    """The board answered a request with ``ERR``: :attr:`code` (:class:`protocol.Error`) and
    :attr:`detail`."""

    def __init__(self, code: int, detail: int):
        self.code, self.detail = code, detail
        try:
            name = P.Error(code).name
        except ValueError:
            name = f"error {code}"
        super().__init__(f"the board answered {name} (detail {detail})")


def open_port(port: str, baud: int = 115200, timeout: float = 1.0):
    """A pyserial port: a device path or a pyserial URL."""
    try:
        import serial
    except ImportError:
        raise LinkError("pyserial is not installed: pip install -e '.[board]'") from None
    try:
        return serial.serial_for_url(port, baudrate=baud, timeout=timeout)
    except (serial.SerialException, ValueError, OSError) as e:
        raise LinkError(f"cannot open {port}: {e}") from None


class BoardLink:
    """Requests to the board through ``port`` (pyserial-like: ``write``, ``read``,
    ``timeout``).  ``reply_s``: how long an answer may take (a GEMM at 115200 baud, or a
    simulation, takes long)."""

    def __init__(self, port, *, reply_s: float = 60.0, on_text=None):
        self.port, self.reply_s = port, reply_s
        self.on_text = on_text or (lambda line: None)
        self.text: list[str] = []
        self._line = bytearray()

    def close(self):
        self.port.close()

    # -- frames ---------------------------------------------------------------------------
    def send_raw(self, data: bytes):
        """Bytes onto the line as they are (a test's damaged frame)."""
        self.port.write(data)
        self.port.flush()

    def _read(self, n: int, deadline: float) -> bytes:
        out = bytearray()
        while len(out) < n:
            if time.monotonic() > deadline:
                raise LinkError(f"no answer from the board within {self.reply_s:g} s "
                                f"(got {len(out)} of {n} bytes)")
            out += self.port.read(n - len(out))
        return bytes(out)

    def _text_byte(self, b: int):
        if b in (10, 13):
            if self._line:
                line = self._line.decode("ascii", "replace")
                self.text.append(line)
                self.on_text(line)
                self._line.clear()
        else:
            self._line.append(b)

    def receive(self) -> tuple[int, bytes]:
        """The next frame's type and payload (text before it collected)."""
        deadline = time.monotonic() + self.reply_s
        while (b := self._read(1, deadline)[0]) != P.SYNC:
            self._text_byte(b)
        head = self._read(3, deadline)
        kind, length = struct.unpack("<BH", head)
        if length > P.MAX_PAYLOAD:
            raise LinkError(f"a damaged answer: length {length}")
        payload = self._read(length, deadline)
        (crc,) = struct.unpack("<I", self._read(4, deadline))
        if crc != P.crc32(head + payload):
            raise LinkError("a damaged answer: its CRC does not match")
        return kind, payload

    def request(self, kind: int, payload: bytes = b"", expect: int | None = None) -> bytes:
        """Send a request; return its reply's payload (``expect``: the reply type wanted)."""
        self.send_raw(P.frame(kind, payload))
        return self.answer(expect)

    def answer(self, expect: int | None = None) -> bytes:
        """Read the answer to a request sent: its payload, or :class:`BoardReplyError`."""
        kind, payload = self.receive()
        if kind == P.B2H.ERR:
            code, detail = struct.unpack("<II", payload[:8])
            raise BoardReplyError(code, detail)
        if expect is not None and kind != expect:
            raise LinkError(f"expected a reply of type 0x{expect:02x}, got 0x{kind:02x}")
        return payload

    # -- requests ---------------------------------------------------------------------------
    @staticmethod
    def _words(payload: bytes, fields) -> dict:
        values = struct.unpack(f"<{len(fields)}I", payload[:4 * len(fields)])
        return dict(zip(fields, values))

    def info(self) -> dict:
        return self._words(self.request(P.H2B.INFO, expect=P.B2H.INFO), P.INFO_FIELDS)

    def write(self, offset: int, data: bytes, progress=None):
        """Write ``data`` at byte ``offset`` of the board's memory, a frame at a time."""
        step = P.MAX_PAYLOAD - 4
        for i in range(0, len(data), step):
            chunk = data[i:i + step]
            self.request(P.H2B.WRITE, struct.pack("<I", offset + i) + chunk, expect=P.B2H.WRITTEN)
            if progress:
                progress(len(chunk))

    def read(self, offset: int, length: int, progress=None) -> bytes:
        out = bytearray()
        while len(out) < length:
            n = min(P.MAX_PAYLOAD, length - len(out))
            out += self.request(P.H2B.READ, struct.pack("<II", offset + len(out), n),
                                expect=P.B2H.DATA)
            if progress:
                progress(n)
        return bytes(out)

    def run(self, **fields) -> dict:
        """Run a GEMM (:data:`protocol.RUN_FIELDS`, missing ones 0); the DONE figures, with
        ``cycles`` and ``beats`` as whole numbers."""
        payload = struct.pack(f"<{len(P.RUN_FIELDS)}I", *(int(fields.get(f, 0)) for f in P.RUN_FIELDS))
        done = self._words(self.request(P.H2B.RUN, payload, expect=P.B2H.DONE), P.DONE_FIELDS)
        return {"cycles": done["cycles_lo"] | done["cycles_hi"] << 32,
                "beats": done["beats_lo"] | done["beats_hi"] << 32,
                "cpu_cycles": done["cpu_cycles"], "status": done["status"]}
