"""cocotb bench of the board's AXI memory (design ``axiram``, ``rtl/board.py``: ``AxiRam``).

Its golden twin is a byte array: cocotbext-axi's ``AxiMaster`` (random pauses on all five
channels) writes and reads bursts of every length and alignment, reads and writes at once,
while the CPU port (``cpu``: en/addr/we/wdata held until ``ack``) reads and writes words with
random byte enables; every byte read is checked against the array.
"""

from __future__ import annotations

import random

import cocotb
from cocotb.triggers import FallingEdge, ReadOnly, RisingEdge, with_timeout
from cocotbext.axi import AxiBus, AxiMaster

from tcore.host.handover import handover
from tcore.tb.common import pause_channels, start

WORD = 16                      # bytes in a memory word


class Bench:
    def __init__(self, dut, pause: float):
        self.dut = dut
        self.words = handover().param("words")
        self.size = self.words * WORD
        self.rng = random.Random(int(handover().option("seed", 1)))
        self.model = bytearray(self.size)
        self.axi = AxiMaster(AxiBus.from_prefix(dut, "axi_"), dut.clk, dut.rst)
        pause_channels(self.rng, pause, self.axi)

    async def start(self):
        d = self.dut
        for name in ("cpu__en", "cpu__addr", "cpu__we", "cpu__wdata"):
            getattr(d, name).value = 0
        await start(d, hold=3, after=2)
        # a reset leaves the memory as it was (an earlier test's bytes): start the model there
        r = await with_timeout(self.axi.read(0, self.size), 2000, "us")
        self.model = bytearray(r.data)

    async def axi_write(self, addr: int, data: bytes):
        await with_timeout(self.axi.write(addr, data), 2000, "us")
        self.model[addr:addr + len(data)] = data

    async def axi_check(self, addr: int, n: int):
        r = await with_timeout(self.axi.read(addr, n), 2000, "us")
        assert bytes(r.data) == bytes(self.model[addr:addr + n]), f"AXI read {addr:#x}+{n}"

    async def cpu(self, word: int, we: int = 0, data: int = 0) -> int:
        """One CPU access; returns the word read (before a write lands: the port's read)."""
        d = self.dut
        await FallingEdge(d.clk)
        d.cpu__en.value, d.cpu__addr.value, d.cpu__we.value, d.cpu__wdata.value = 1, word, we, data
        for _ in range(10_000):
            await RisingEdge(d.clk)
            await ReadOnly()
            if int(d.cpu__ack.value):
                got = int(d.cpu__rdata.value)
                break
        else:
            raise AssertionError(f"the CPU port never answered word {word}")
        await FallingEdge(d.clk)
        d.cpu__en.value = 0
        if we:
            raw = data.to_bytes(WORD, "little")
            for i in range(WORD):
                if (we >> i) & 1:
                    self.model[word * WORD + i] = raw[i]
        return got

    def span(self, limit: int = 300) -> tuple[int, int]:
        n = self.rng.randrange(1, limit)
        return self.rng.randrange(0, self.size - n), n


@cocotb.test()
async def bursts_of_every_length_and_alignment(dut):
    b = Bench(dut, pause=0.3)
    await b.start()
    for _ in range(60):
        addr, n = b.span()
        await b.axi_write(addr, bytes(b.rng.randrange(256) for _ in range(n)))
        addr, n = b.span()
        await b.axi_check(addr, n)
    await b.axi_check(0, b.size)              # the whole memory, in long bursts


@cocotb.test()
async def reads_writes_and_the_cpu_at_once(dut):
    """Writes and reads in flight together (separate regions, so the order between them does
    not matter), while the CPU reads and writes words of a third region."""
    b = Bench(dut, pause=0.5)
    await b.start()
    third = b.size // 3

    async def writer():
        for _ in range(30):
            n = b.rng.randrange(1, 200)
            addr = b.rng.randrange(0, third - n)
            await b.axi_write(addr, bytes(b.rng.randrange(256) for _ in range(n)))

    async def reader():
        for _ in range(30):
            n = b.rng.randrange(1, 200)
            await b.axi_check(b.rng.randrange(third, 2 * third - n), n)

    async def cpu():
        words = range(2 * third // WORD + 1, b.words)
        for _ in range(80):
            w = b.rng.choice(words)
            if b.rng.random() < 0.5:
                we = b.rng.randrange(1, 1 << WORD)
                await b.cpu(w, we, b.rng.getrandbits(8 * WORD))
            else:
                got = await b.cpu(w)
                want = int.from_bytes(b.model[w * WORD:(w + 1) * WORD], "little")
                assert got == want, f"CPU read {w}: {got:032x}, expected {want:032x}"

    tasks = [cocotb.start_soon(f()) for f in (writer, reader, cpu)]
    for t in tasks:
        await t
    await b.axi_check(0, b.size)              # what the CPU wrote, as the AXI side reads it
