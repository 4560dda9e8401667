"""The bench side of the memory hooks that ``tcore.sim.runner.add_memory_hooks`` adds to a design's
working memory (``mem`` of the top, or the path its class names in ``BENCH_MEMORY``): whole
memory images in and out through $readmemh / $writememh files instead of one simulator call
(or one clock) per word.  The hooks' controls (``tcore_load``, ``tcore_dump``, the word
range) are the top module's registers wherever the memory is.

* ``+TCORE_MEMH_IN=file``: the memory's initial contents (the runner passes it);
* :func:`load`: words ``base ..`` from the hand-over's ``memh_load`` file at run time;
* :func:`dump`: words ``base ..`` to its ``memh_out`` file, read back as bytes.

The file formats (:func:`tcore.host.images.write_memh`, :func:`tcore.host.images.read_memh`) are plain data.

Both pulse their trigger between clock edges and take 3 ns; the design must not be writing
the memory meanwhile.
"""

from __future__ import annotations

import numpy as np
from cocotb.triggers import Timer

from tcore.host.handover import handover
from tcore.host.images import read_memh, read_memh_words, write_memh, write_memh_words

__all__ = ["write_memh", "read_memh", "load", "dump", "load_words", "dump_words"]


async def _pulse(dut, trigger, base: int, nwords: int):
    dut.tcore_dump_lo.value, dut.tcore_dump_hi.value = base, base + nwords - 1
    await Timer(1, unit="ns")
    trigger.value = 1
    await Timer(1, unit="ns")
    trigger.value = 0
    await Timer(1, unit="ns")


async def load(dut, base: int, image: np.ndarray):
    """Put a byte image (a whole number of 16-byte words) at word ``base``."""
    path = handover().memh_load
    image = np.asarray(image, np.uint8)
    write_memh(path, image)
    await _pulse(dut, dut.tcore_load, base, image.size // 16)


async def dump(dut, base: int, nwords: int) -> np.ndarray:
    """The bytes of words ``base .. base + nwords - 1``."""
    await _pulse(dut, dut.tcore_dump, base, nwords)
    return read_memh(handover().memh_out, nwords, base)


async def load_words(dut, base: int, words, width: int):
    """Put integers (``width``-bit words of a memory of any width) at word ``base``."""
    write_memh_words(handover().memh_load, words, width)
    await _pulse(dut, dut.tcore_load, base, len(words))


async def dump_words(dut, base: int, nwords: int) -> list[int]:
    """Words ``base .. base + nwords - 1`` as integers."""
    await _pulse(dut, dut.tcore_dump, base, nwords)
    return read_memh_words(handover().memh_out, nwords, base)
