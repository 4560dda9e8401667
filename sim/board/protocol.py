"""The board's serial protocol: frames between the host (``tcore board run``) and the board's
firmware (``sw/board/main.c``), both ways the same::

    0xA5 | type (1 byte) | length (2 bytes, LE) | payload (length bytes) | CRC-32 (4 bytes, LE)

The CRC is CRC-32 (IEEE 802.3, reflected, as ``zlib.crc32``) of type, length and payload.  A
payload is at most :data:`MAX_PAYLOAD` bytes, so a whole frame fits the board's receive FIFO
(2,048 bytes) however busy its CPU is.  The host sends one request and waits for its one
answer (a reply, or an :data:`ERR` frame); the board keeps serving after every error, and
after a bad frame it first waits for the line to fall silent (its ``TIMEOUT_CYCLES``), so
that the rest of a broken request is not read as a new one.  Bytes outside frames (the
self-test's text lines at reset) are plain ASCII, never 0xA5.

Requests (``H2B``) and their replies (``B2H``), payload fields little-endian 32-bit words:

=========  ==============================================  ============================================
request    payload                                         reply
=========  ==============================================  ============================================
INFO       none                                            INFO: :data:`INFO_FIELDS`
WRITE      offset, then the bytes to write there           WRITTEN: offset, length
READ       offset, length (<= MAX_PAYLOAD)                 DATA: the bytes
RUN        :data:`RUN_FIELDS`                              DONE: :data:`DONE_FIELDS`
=========  ==============================================  ============================================

Offsets are byte addresses in the board's AXI memory (the SoC block's address 0 on).  An
error reply is ``ERR`` with ``code`` (:class:`Error`) and ``detail`` (the block's
``STATUS.error`` for :attr:`Error.BLOCK`, else 0 or the offending value).
"""

from __future__ import annotations

import enum
import struct
import zlib

__all__ = ["SYNC", "MAX_PAYLOAD", "H2B", "B2H", "Error", "Flag", "INFO_FIELDS", "RUN_FIELDS",
           "DONE_FIELDS", "frame", "crc32", "c_defines", "PROTOCOL_VERSION"]

SYNC = 0xA5
MAX_PAYLOAD = 1024
PROTOCOL_VERSION = 1


class H2B(enum.IntEnum):
    """Request types (host to board)."""
    INFO = 0x01
    WRITE = 0x02
    READ = 0x03
    RUN = 0x04


class B2H(enum.IntEnum):
    """Reply types (board to host)."""
    INFO = 0x81
    WRITTEN = 0x82
    DATA = 0x83
    DONE = 0x84
    ERR = 0xFF


class Error(enum.IntEnum):
    """``ERR`` codes."""
    CRC = 1            # the frame's CRC-32 does not match
    TRUNCATED = 2      # the line fell silent inside a frame
    LENGTH = 3         # a length over MAX_PAYLOAD
    TYPE = 4           # an unknown request type
    PAYLOAD = 5        # a payload of the wrong size for its request
    RANGE = 6          # a WRITE or READ beyond the memory
    FIT = 7            # a RUN whose operands do not fit the memory
    KIND = 8           # a RUN of a kind this build lacks
    BLOCK = 9          # the SoC block's STATUS.error (detail) after a RUN
    OVERFLOW = 10      # the receive FIFO overflowed


class Flag(enum.IntFlag):
    """RUN ``flags``."""
    C_GIVEN = 1        # D = A*B + C (else A*B)
    ACC_F16 = 2        # C and D are FP16
    B_ALT = 4          # B is the other FP8 format
    SAT = 8            # INT8: .satfinite
    SPARSE = 16        # 2:4 sparse A (a kind the SoC block lacks: refused with KIND)


#: INFO reply: what the build is.  ``kinds``: bit i set when FORMAT.in_fmt i runs; bit 7 2:4
#: sparse.  ``selftest_cases``/``selftest_failed``: the reset self-test's GEMMs and how many
#: differed from the golden model.
INFO_FIELDS = ("magic", "version", "clk_hz", "divisor", "mem_bytes", "lanes", "kinds",
               "max_payload", "selftest_cases", "selftest_failed")
RUN_FIELDS = ("m", "n", "k", "in_fmt", "flags", "a", "b", "c", "d", "lda", "ldb", "ldc", "ldd")
DONE_FIELDS = ("status", "cycles_lo", "cycles_hi", "beats_lo", "beats_hi", "cpu_cycles")


def crc32(data: bytes) -> int:
    return zlib.crc32(data) & 0xFFFFFFFF


def frame(kind: int, payload: bytes = b"") -> bytes:
    """One frame of ``kind`` with ``payload``."""
    if len(payload) > MAX_PAYLOAD:
        raise ValueError(f"a payload holds at most {MAX_PAYLOAD} bytes, not {len(payload)}")
    body = struct.pack("<BH", kind, len(payload)) + payload
    return bytes([SYNC]) + body + struct.pack("<I", crc32(body))


def c_defines() -> list[str]:
    """The protocol's constants as C ``#define`` lines (``sw/include/tcore_board.h``)."""
    lines = [f"#define TB_SYNC 0x{SYNC:02X}u", f"#define TB_MAX_PAYLOAD {MAX_PAYLOAD}u",
             f"#define TB_PROTOCOL_VERSION {PROTOCOL_VERSION}u"]
    lines += [f"#define TB_REQ_{e.name} 0x{e.value:02X}u" for e in H2B]
    lines += [f"#define TB_REP_{e.name} 0x{e.value:02X}u" for e in B2H]
    lines += [f"#define TB_ERR_{e.name} {e.value}u" for e in Error]
    lines += [f"#define TB_FLAG_{e.name} {e.value}u" for e in Flag]
    for name, fields in (("INFO", INFO_FIELDS), ("RUN", RUN_FIELDS), ("DONE", DONE_FIELDS)):
        lines += [f"#define TB_{name}_{f.upper()} {i}u" for i, f in enumerate(fields)]
        lines.append(f"#define TB_{name}_WORDS {len(fields)}u")
    return lines
