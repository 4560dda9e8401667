"""Plain-data helpers for the WMMA benches: memory images, commands, and the golden reference.

Memory is a uint8 array; word w of the 128-bit memory is bytes 16w .. 16w+15 (little-endian).
"""

from __future__ import annotations

import enum

import numpy as np

from amaranth.lib import data

from tcore.rtl.wmma import Op as _RtlOp
from tcore.rtl.wmma import WmmaCmd, WmmaResp
from tcore.host.images import pack_struct, unpack_struct

# The RTL's op codes as plain integers (``tcore.rtl.wmma.Op`` is an Amaranth enum of the port).
Op = enum.IntEnum("Op", {op.name: op.value for op in _RtlOp})

__all__ = ["Op", "cmd_word", "resp_fields", "words_of", "bytes_of", "put_matrix", "get_matrix", "KIND", "CMD_BITS"]

KIND = {"matrix_a": 0, "matrix_b": 1, "accumulator": 2}
CMD_BITS = data.Layout.cast(WmmaCmd).size


def cmd_word(**fields) -> int:
    """Pack a :class:`tcore.rtl.wmma.WmmaCmd` into an integer (LSB first, as the Verilog port), from
    the RTL's own layout; fields not given are 0 (``bf16=True`` stands for ``fmt=1``, BF16)."""
    if "bf16" in fields:
        fields["fmt"] = 1 if fields.pop("bf16") else fields.get("fmt", 0)
    return pack_struct(WmmaCmd, **fields)


def resp_fields(word: int) -> dict:
    """A :class:`tcore.rtl.wmma.WmmaResp` port word as its fields."""
    return unpack_struct(WmmaResp, word)


def words_of(mem: np.ndarray) -> list[int]:
    return [int.from_bytes(mem[i:i + 16].tobytes(), "little") for i in range(0, len(mem), 16)]


def bytes_of(words) -> np.ndarray:
    return np.frombuffer(b"".join(int(w).to_bytes(16, "little") for w in words), np.uint8).copy()


def put_matrix(mem, addr, mat, ldm, col_major=False):
    """Write a matrix (16x16, or any rows x cols) of uint16/uint32 into the byte memory with
    leading dimension ldm."""
    mat = np.asarray(mat)
    es = mat.dtype.itemsize
    lines, per = mat.shape[::-1] if col_major else mat.shape
    for line in range(lines):
        vals = mat[line] if not col_major else mat[:, line]
        start = addr + line * ldm * es
        mem[start:start + per * es] = np.ascontiguousarray(vals).view(np.uint8)


def get_matrix(mem, addr, ldm, dtype, col_major=False, shape=(16, 16)):
    """The ``shape`` (rows, cols) matrix at byte ``addr`` with leading dimension ldm."""
    es = np.dtype(dtype).itemsize
    out = np.zeros(shape, dtype)
    lines, per = shape[::-1] if col_major else shape
    for line in range(lines):
        start = addr + line * ldm * es
        vals = mem[start:start + per * es].copy().view(dtype)
        if col_major:
            out[:, line] = vals
        else:
            out[line] = vals
    return out
