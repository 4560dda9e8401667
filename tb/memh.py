"""The bench side of the memory hooks that ``sim.runner.sim_verilog`` adds to a top with a
memory named ``mem``: whole memory images in and out through $readmemh / $writememh files
instead of one simulator call (or one clock) per word.

* ``+TCORE_MEMH_IN=file``: the memory's initial contents (the runner passes it);
* :func:`load`: words ``base ..`` from ``$TCORE_MEMH_LOAD`` at run time;
* :func:`dump`: words ``base ..`` to ``$TCORE_MEMH_OUT``, read back as bytes.

Both pulse their trigger between clock edges and take 3 ns; the design must not be writing
the memory meanwhile.
"""

from __future__ import annotations

import os

import numpy as np
from cocotb.triggers import Timer

__all__ = ["write_memh", "read_memh", "load", "dump"]


def write_memh(path, image: np.ndarray):
    """A byte image as $readmemh text: one 128-bit word (32 hex digits) per line."""
    words = np.ascontiguousarray(image, np.uint8).reshape(-1, 16)[:, ::-1]
    with open(path, "w") as f:
        f.write("\n".join(w.tobytes().hex() for w in words))
        f.write("\n")


def read_memh(path, nwords, base: int = 0) -> np.ndarray:
    """$writememh text back to a byte image.

    A word with an X or Z digit (an unwritten or undriven bit on Icarus) is a failure that
    names its word address (``base`` + line), never a zero.
    """
    lines = [ln.strip() for ln in open(path) if ln.strip() and not ln.startswith("//")]
    if len(lines) != nwords:
        raise AssertionError(f"memory dump has {len(lines)} words, expected {nwords}")
    unknown = [i for i, ln in enumerate(lines) if any(ch in "xXzZ" for ch in ln)]
    if unknown:
        first = ", ".join(f"word {base + i} ({lines[i]})" for i in unknown[:4])
        raise AssertionError(f"memory dump holds X or Z in {len(unknown)} of {nwords} words: "
                             f"{first}{' ...' if len(unknown) > 4 else ''}")
    return np.frombuffer(b"".join(bytes.fromhex(ln.zfill(32))[::-1] for ln in lines),
                         np.uint8).copy()


async def _pulse(dut, trigger, base: int, nwords: int):
    dut.tcore_dump_lo.value, dut.tcore_dump_hi.value = base, base + nwords - 1
    await Timer(1, unit="ns")
    trigger.value = 1
    await Timer(1, unit="ns")
    trigger.value = 0
    await Timer(1, unit="ns")


async def load(dut, base: int, image: np.ndarray):
    """Put a byte image (a whole number of 16-byte words) at word ``base``."""
    path = os.environ.get("TCORE_MEMH_LOAD", "tcore_load.memh")
    image = np.asarray(image, np.uint8)
    write_memh(path, image)
    await _pulse(dut, dut.tcore_load, base, image.size // 16)


async def dump(dut, base: int, nwords: int) -> np.ndarray:
    """The bytes of words ``base .. base + nwords - 1``."""
    await _pulse(dut, dut.tcore_dump, base, nwords)
    return read_memh(os.environ.get("TCORE_MEMH_OUT", "tcore_dump.memh"), nwords, base)
