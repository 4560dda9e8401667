"""cocotb bench of the AXI4-Lite register block (design ``axilregs``, ``rtl/axil.py``),
driven by cocotbext-axi's ``AxiLiteMaster`` with random pauses on all five channels.

Its reference is the register map itself (``rtl/regmap.py``): reset values, constants, field
access rules.  Every test checks each response code.
"""

from __future__ import annotations

import random

import cocotb
from cocotb.triggers import ClockCycles, Combine, FallingEdge, ReadOnly, RisingEdge, with_timeout
from cocotbext.axi import AxiLiteBus, AxiLiteMaster, AxiResp

from tcore.rtl.axil import field_port
from tcore.rtl.regmap import REGISTERS, Access, register
from tcore.host.handover import handover
from tcore.tb.common import pause_channels, start

TIMEOUT_US = 200          # no transaction of these tests takes near that: a hang fails


class Bench:
    def __init__(self, dut, pause: float = 0.4):
        self.dut = dut
        seed = int(handover().option("seed", 1))
        self.rng = random.Random(seed)
        dut._log.info(f"seed {seed}")
        self.axil = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axil"), dut.clk, dut.rst)
        if pause:
            pause_channels(self.rng, pause, self.axil)

    async def start(self):
        dut = self.dut
        await start(dut, zero=("status_busy", "status_done_set", "status_error", "cycles_lo",
                               "cycles_hi", "beats_lo", "beats_hi"), hold=3, after=2)

    async def read(self, offset: int, resp=AxiResp.OKAY) -> int:
        r = await with_timeout(self.axil.read(offset, 4), TIMEOUT_US, "us")
        assert r.resp == resp, f"read {offset:#x}: {r.resp!r}, expected {resp!r}"
        return int.from_bytes(r.data, "little")

    async def write(self, offset: int, value: int, nbytes: int = 4, resp=AxiResp.OKAY):
        data = (value & ((1 << (8 * nbytes)) - 1)).to_bytes(nbytes, "little")
        r = await with_timeout(self.axil.write(offset, data), TIMEOUT_US, "us")
        assert r.resp == resp, f"write {offset:#x}: {r.resp!r}, expected {resp!r}"


def rw_mask(reg) -> int:
    return sum(f.mask for f in reg.fields if f.access is Access.RW)


async def port_value(dut, reg, field) -> int:
    await ReadOnly()
    v = int(getattr(dut, field_port(reg, field)).value)
    await FallingEdge(dut.clk)
    return v


@cocotb.test()
async def reset_values_and_constants(dut):
    """Every register reads its documented reset value (the map's), with OKAY."""
    b = Bench(dut)
    await b.start()
    for reg in REGISTERS:
        assert await b.read(reg.offset) == reg.reset, reg.name


@cocotb.test()
async def rw_registers_and_strobes(dut):
    """Each RW register keeps what is written, bit for bit, drives its ports, and WSTRB writes
    only the bytes it selects; read-only fields ignore writes."""
    b = Bench(dut)
    await b.start()
    shadow = {r.name: r.reset for r in REGISTERS}
    for _ in range(3):
        for reg in REGISTERS:
            if any(f.access is Access.W1S or f.access is Access.W1C for f in reg.fields):
                continue
            v = b.rng.getrandbits(32)
            await b.write(reg.offset, v)
            mask = rw_mask(reg)
            shadow[reg.name] = (shadow[reg.name] & ~mask) | (v & mask)
        for reg in REGISTERS:
            assert await b.read(reg.offset) == shadow[reg.name], reg.name
    for reg in (register("M"), register("LDA"), register("FORMAT")):
        for byte in range(4):
            v = b.rng.getrandbits(8)
            await b.write(reg.offset + byte, v, nbytes=1)
            mask = rw_mask(reg) & (0xFF << (8 * byte))
            shadow[reg.name] = (shadow[reg.name] & ~mask) | ((v << (8 * byte)) & mask)
            assert await b.read(reg.offset) == shadow[reg.name], (reg.name, byte)
    for reg in REGISTERS:
        for f in reg.fields:
            if f.access is Access.RW:
                want = (shadow[reg.name] & f.mask) >> f.lsb
                assert await port_value(dut, reg, f) == want, (reg.name, f.name)


@cocotb.test()
async def engine_inputs_read_back(dut):
    """RO fields show the engine's signals as they are at the read."""
    b = Bench(dut)
    await b.start()
    for name in ("cycles_lo", "cycles_hi", "beats_lo", "beats_hi"):
        v = b.rng.getrandbits(32)
        getattr(dut, name).value = v
        assert await b.read(register(name.upper()).offset) == v, name
    dut.status_busy.value = 1
    dut.status_error.value = 9
    assert await b.read(register("STATUS").offset) == 1 | (9 << 4)


@cocotb.test()
async def start_pulses_once_and_done_is_sticky(dut):
    """CTRL.start (W1S) is one clock high per write of 1 and reads 0; STATUS.done (W1C) stays
    set until a 1 is written to it, and a soft reset clears it too."""
    b = Bench(dut)
    await b.start()
    pulses = {"ctrl_start": 0, "ctrl_soft_reset": 0}

    async def count():
        while True:
            await RisingEdge(dut.clk)
            await ReadOnly()
            for k in pulses:
                pulses[k] += int(getattr(dut, k).value)

    cocotb.start_soon(count())
    ctrl = register("CTRL").offset
    for i in range(3):
        await b.write(ctrl, 0b011)                  # start, irq_en
    await ClockCycles(dut.clk, 2)
    assert pulses == {"ctrl_start": 3, "ctrl_soft_reset": 0}
    assert await b.read(ctrl) == 0b010              # start reads 0, irq_en kept
    await b.write(ctrl, 0b010)                      # start = 0: no pulse
    await ClockCycles(dut.clk, 2)
    assert pulses["ctrl_start"] == 3

    status = register("STATUS").offset
    await FallingEdge(dut.clk)
    dut.status_done_set.value = 1
    await FallingEdge(dut.clk)
    dut.status_done_set.value = 0
    for _ in range(2):
        assert await b.read(status) & 2 == 2
    await b.write(status, 0)                        # writing 0 leaves it
    assert await b.read(status) & 2 == 2
    await b.write(status, 2)                        # writing 1 clears
    assert await b.read(status) & 2 == 0
    dut.status_done_set.value = 1
    await FallingEdge(dut.clk)
    dut.status_done_set.value = 0
    await b.write(ctrl, 0b100)                      # soft reset
    await ClockCycles(dut.clk, 2)
    assert pulses["ctrl_soft_reset"] == 1 and await b.read(status) & 2 == 0


@cocotb.test()
async def unmapped_addresses_answer_slverr(dut):
    b = Bench(dut)
    await b.start()
    top = max(r.offset for r in REGISTERS)
    for offset in (top + 4, top + 0x40, 0x3FC):
        await b.read(offset, resp=AxiResp.SLVERR)
        await b.write(offset, 0xFFFFFFFF, resp=AxiResp.SLVERR)
    await b.write(register("ID").offset, 0, resp=AxiResp.OKAY)   # mapped, read-only: ignored
    assert await b.read(register("ID").offset) == register("ID").reset


@cocotb.test()
async def concurrent_traffic_under_pauses(dut):
    """Reads and writes issued at once from several coroutines, pauses on every channel: each
    completes (bounded wait), in order per address, with the right data."""
    b = Bench(dut, pause=0.6)
    await b.start()
    regs = [register(n) for n in ("M", "N", "K", "LDA", "LDB", "LDC", "LDD", "A_LO", "B_HI")]

    async def worker(reg):
        for _ in range(6):
            v = b.rng.getrandbits(32)
            await b.write(reg.offset, v)
            assert await b.read(reg.offset) == v, reg.name

    await Combine(*(cocotb.start_soon(worker(r)) for r in regs))
