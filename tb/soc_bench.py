"""cocotb bench of the ``soc`` design (``rtl/soc.py``) with cocotbext-axi: ``AxiLiteMaster``
programs the registers, an AXI4 slave memory holds A, B, C and D, and every one of the seven
channels pauses at random.  D is checked bit for bit against the golden model
(``tcore.golden.mma``, D = A·B + C or A·B), and the memory around D against what was there before.

Tests: ``gemms`` (several sizes, leading dimensions, every input kind - FP16, BF16, TF32, FP8
E4M3/E5M2/mixed, INT8 S8/U8 with wrap or satfinite - FP32/FP16/S32 accumulators, C given or
zero; TF32, FP8 and INT8 with B column-major, B^T in memory), ``bad_configs`` (each refused with its code, no AXI request at all), ``read_error`` and
``write_error`` (SLVERR from the memory: the run stops with the code, nothing hangs, the tile
whose read failed is not written), ``decode_errors`` (DECERR on a read and on a write, each with
its own code), ``soft_reset`` (in mid-run, then a good run).  ``job`` runs the GEMM of the
hand-over's job file (A, B, C bits and formats; the channels pause with the ``pause`` option)
and writes D, STATUS.error and the cycle count to its result file (``tcore verify --through
soc``).
"""

from __future__ import annotations

import random

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge, with_timeout
from cocotbext.axi import AxiBus, AxiLiteBus, AxiLiteMaster, AxiResp, AxiSlave

from tcore.golden import mma
from tcore.numerics import Op
from tcore.rtl.regmap import REGISTERS, ErrorCode, InFormat, register
from tcore.host.handover import handover
from tcore.tb.common import pause_channels, start

REG = {r.name: r.offset for r in REGISTERS}
FP16 = Op.parse("fp16->fp32")


def format_word(fmt="fp16", b_fmt=None, acc_f16=False, c_given=False, sat=False) -> int:
    """FORMAT for A in ``fmt`` and B in ``b_fmt`` (None: the kind's own pairing), raw: the
    bad-configuration test writes combinations no Op has."""
    b_alt = b_fmt is not None and b_fmt != fmt and fmt in ("e4m3", "e5m2")
    return register("FORMAT").pack(in_fmt=InFormat[fmt.upper()], acc_f16=acc_f16,
                                   c_given=c_given, b_alt=b_alt, sat=sat)


def op_fields(op: Op) -> dict:
    """:meth:`Bench.program`'s format fields of an operation."""
    return dict(fmt=op.a, b_fmt=op.b, acc_f16=op.acc == "fp16", sat=op.saturate)


class Memory:
    """The AXI slave's target: a byte array; reads or writes touching ``bad`` (a byte range)
    raise, which cocotbext-axi answers with SLVERR."""

    def __init__(self, size: int):
        self.data = bytearray(size)
        self.bad_read = self.bad_write = range(0)

    def _check(self, address, length, bad):
        if address < bad.stop and address + length > bad.start:
            raise OSError(f"injected error at {address:#x}")

    async def read(self, address, length):
        self._check(address, length, self.bad_read)
        return bytes(self.data[address:address + length])

    async def write(self, address, data):
        self._check(address, len(data), self.bad_write)
        self.data[address:address + len(data)] = data


class Bench:
    def __init__(self, dut, pause: float = 0.3, mem_size: int = 1 << 20):
        self.dut = dut
        seed = int(handover().option("seed", 1))
        self.rng = random.Random(seed)
        self.np_rng = np.random.default_rng(seed)
        dut._log.info(f"seed {seed}")
        self.mem = Memory(mem_size)
        self.axil = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axil"), dut.clk, dut.rst)
        self.axi = AxiSlave(AxiBus.from_prefix(dut, "m_axi"), dut.clk, dut.rst, target=self.mem)
        self.requests = 0
        #: bus activity, counted each clock: R and W beats, clocks with a read burst or a
        #: write burst asked for and not yet answered (``tcore bench soc`` reports them)
        self.stats = dict(r_beats=0, w_beats=0, read_busy=0, write_busy=0, both_busy=0, clocks=0)
        if pause:
            pause_channels(self.rng, pause, self.axil, self.axi)
        # The memory answers a failed access with SLVERR; with ``decode_errors`` set, with DECERR
        # (an address no slave decodes), on the read data and the write response channels.
        self.decode_errors = False
        for ch in (self.axi.read_if.r_channel, self.axi.write_if.b_channel):
            ch.send = self._as_decerr(ch.send, "rresp" if ch is self.axi.read_if.r_channel else "bresp")

    def _as_decerr(self, send, field):
        async def wrapped(tr):
            if self.decode_errors and getattr(tr, field) == AxiResp.SLVERR:
                setattr(tr, field, AxiResp.DECERR)
            await send(tr)
        return wrapped

    async def start(self):
        dut = self.dut
        await start(dut, hold=3)
        cocotb.start_soon(self._count_requests())
        await ClockCycles(dut.clk, 2)

    async def _count_requests(self):
        dut, st = self.dut, self.stats

        def bit(sig):                            # 0 for an undriven (X/Z) signal
            v = sig.value
            return int(v) if v.is_resolvable else 0
        reads = writes = 0                       # bursts asked for, not yet answered
        while True:
            await RisingEdge(dut.clk)
            await ReadOnly()
            arv, awv = bit(dut.m_axi_arvalid), bit(dut.m_axi_awvalid)
            self.requests += arv + awv
            r = bit(dut.m_axi_rvalid) & bit(dut.m_axi_rready)
            w = bit(dut.m_axi_wvalid) & bit(dut.m_axi_wready)
            rb, wb = bool(reads or arv), bool(writes or awv)
            st["r_beats"] += r
            st["w_beats"] += w
            st["read_busy"] += rb
            st["write_busy"] += wb
            st["both_busy"] += rb and wb
            st["clocks"] += 1
            reads += (arv and bit(dut.m_axi_arready)) - (r and bit(dut.m_axi_rlast))
            writes += (awv and bit(dut.m_axi_awready)) - \
                (bit(dut.m_axi_bvalid) & bit(dut.m_axi_bready))

    async def reg_write(self, name, value):
        r = await with_timeout(self.axil.write(REG[name], int(value).to_bytes(4, "little")), 100, "us")
        assert r.resp == AxiResp.OKAY, (name, r.resp)

    async def reg_read(self, name) -> int:
        r = await with_timeout(self.axil.read(REG[name], 4), 100, "us")
        assert r.resp == AxiResp.OKAY, (name, r.resp)
        return int.from_bytes(r.data, "little")

    def put(self, addr, rows_bits, ld_elems):
        """Write a matrix of bit patterns row-major with leading dimension ``ld_elems``."""
        es = rows_bits.dtype.itemsize
        for r, row in enumerate(rows_bits):
            at = addr + r * ld_elems * es
            self.mem.data[at:at + row.nbytes] = row.tobytes()

    def get(self, addr, rows, cols, ld_elems, dtype):
        es = np.dtype(dtype).itemsize
        out = np.empty((rows, cols), dtype)
        for r in range(rows):
            at = addr + r * ld_elems * es
            out[r] = np.frombuffer(bytes(self.mem.data[at:at + cols * es]), dtype)
        return out

    async def program(self, *, m, n, k, a, b, c, d, lda, ldb, ldc, ldd, bf16=False, acc_f16=False,
                      c_given=False, fmt=None, b_fmt=None, sat=False):
        for name, v in (("M", m), ("N", n), ("K", k), ("LDA", lda), ("LDB", ldb), ("LDC", ldc),
                        ("LDD", ldd)):
            await self.reg_write(name, v)
        for x, addr in (("A", a), ("B", b), ("C", c), ("D", d)):
            await self.reg_write(f"{x}_LO", addr & 0xFFFFFFFF)
            await self.reg_write(f"{x}_HI", addr >> 32)
        fmt = fmt or ("bf16" if bf16 else "fp16")
        await self.reg_write("FORMAT", format_word(fmt, b_fmt, acc_f16, c_given, sat))

    async def run(self, budget_clocks: int):
        """Start with the interrupt enabled; wait for irq (bounded); return STATUS.error."""
        await self.reg_write("CTRL", 0b011)
        for _ in range(budget_clocks):
            await RisingEdge(self.dut.clk)
            if int(self.dut.irq.value):
                break
        else:
            raise AssertionError(f"no interrupt within {budget_clocks} clocks")
        status = await self.reg_read("STATUS")
        assert status & 0b11 == 0b10, f"STATUS {status:#x}: expected done and not busy"
        await self.reg_write("STATUS", 0b10)               # clear done
        await ClockCycles(self.dut.clk, 2)
        assert int(self.dut.irq.value) == 0, "irq still high after clearing done"
        return status >> 4


def budget(m, n, k, kstep=16) -> int:
    """Clocks a run may take: per K step two tile reads and the warp work, per tile a C
    read and a D write, each row a burst; paused channels at most double it; then 4x margin."""
    steps = (m // 16) * (n // 16) * (k // min(kstep, 16))
    tiles = (m // 16) * (n // 16)
    return 4 * (steps * 2 * (64 * 2 + 300) + tiles * 2 * (64 * 4 + 200) + 2000)


def operands(rng, m, n, k, op: Op, c_given):
    """Random A (M x K) and B (K x N) bit patterns of ``op`` (:meth:`Op.random_operands`) and
    C (M x N) in its accumulator: small integers for S32, standard normal values otherwise
    (zero unless ``c_given``)."""
    a, b = op.random_operands(m, n, k, rng)
    if not c_given:
        return a, b, np.zeros((m, n), op.acc_bits)
    c = (rng.integers(-2 ** 20, 2 ** 20, (m, n)) if op.integer else rng.standard_normal((m, n)))
    return a, b, c.astype(op.acc_dtype).view(op.acc_bits)


async def one_gemm(b: Bench, *, m, n, k, op: Op = FP16, c_given=False, pad=(8, 8, 8, 8)):
    a_bits, b_bits, c_bits = operands(b.np_rng, m, n, k, op, c_given)
    esz = op.a_format.bytes
    pad = tuple(max(p, 16 // esz) if i < 2 else p for i, p in enumerate(pad))  # rows 16-byte aligned
    cols = op.mode_fields["b_cols"]
    b_mem = np.ascontiguousarray(b_bits.T) if cols else b_bits      # B^T for the narrow kinds
    lda, ldb, ldc, ldd = k + pad[0], (k if cols else n) + pad[1], n + pad[2], n + pad[3]
    es = np.dtype(op.acc_bits).itemsize
    base_a = 0x1000
    base_b = base_a + ((m * lda * esz + 0xFFF) & ~0xFFF) + 0xFF0     # rows cross 4 KiB pages
    base_c = base_b + ((b_mem.shape[0] * ldb * esz + 0xFFF) & ~0xFFF) + 0x1000
    base_d = base_c + ((m * ldc * es + 0xFFF) & ~0xFFF) + 0xFE0
    b.put(base_a, a_bits, lda)
    b.put(base_b, b_mem, ldb)
    b.put(base_c, c_bits, ldc)
    sentinel = np.frombuffer(bytes([0xA5]) * (m * ldd * es), np.uint8)
    b.mem.data[base_d:base_d + sentinel.size] = sentinel.tobytes()
    await b.program(m=m, n=n, k=k, a=base_a, b=base_b, c=base_c, d=base_d, lda=lda, ldb=ldb,
                    ldc=ldc, ldd=ldd, c_given=c_given, **op_fields(op))
    err = await b.run(budget(m, n, k, op.k_step))
    assert err == 0, f"STATUS.error {err} ({ErrorCode(err).name})"
    got = b.get(base_d, m, n, ldd, op.acc_bits)
    want = mma(a_bits, b_bits, c_bits, op=op)         # the block's instruction: the Op's
    bad = int((got != want).sum())
    assert bad == 0, f"{m}x{n}x{k} {op} c_given={c_given}: {bad} of {got.size} differ"
    # Nothing written outside D's rows (the padding of each row keeps the sentinel).
    for r in range(m):
        at = base_d + r * ldd * es + n * es
        pad_bytes = bytes(b.mem.data[at:at + (ldd - n) * es])
        assert pad_bytes == bytes([0xA5]) * len(pad_bytes), f"row {r}: padding overwritten"
    cycles = await b.reg_read("CYCLES_LO")
    beats = await b.reg_read("BEATS_LO")
    want_beats = (m // 16) * (n // 16) * (k // op.k_step) * 64        # 64 beats a WMMA step
    assert beats == want_beats, f"BEATS {beats}, expected {want_beats}"
    b.dut._log.info(f"{m}x{n}x{k} {op} c_given={c_given}: {cycles} clocks, "
                    f"utilisation {beats / cycles:.3f}")
    return base_a, base_b, base_c, base_d


def cases() -> list:
    """The ``cases`` option: ``MxNxK:op:c`` items (``op`` an :class:`Op` spelling such as
    ``fp16->fp32``, ``e4m3.e5m2->fp16`` or ``s8->s32.sat``; ``c``: ``c`` for C given, else
    ``0``)."""
    raw = handover().option("cases", "32x32x32:fp16->fp32:c,16x48x32:bf16->fp32:0,"
                                     "32x16x16:fp16->fp16:c,16x16x16:tf32->fp32:c,"
                                     "32x16x64:e4m3->fp32:c,16x32x32:e4m3.e5m2->fp16:0,"
                                     "16x16x64:s8->s32.sat:c,16x16x32:u8->s32:0")
    out = []
    for spec in raw.split(","):
        shape, op, c = spec.split(":")
        m, n, k = (int(x) for x in shape.split("x"))
        out.append(dict(m=m, n=n, k=k, op=Op.parse(op), c_given=c == "c"))
    return out


@cocotb.test()
async def gemms(dut):
    b = Bench(dut)
    await b.start()
    assert await b.reg_read("ID") == 0x74636F72
    caps = register("CAPS").unpack(await b.reg_read("CAPS"))
    assert caps["warps"] == warps(), caps
    for case in cases():
        await one_gemm(b, **case)


@cocotb.test()
async def bad_configs(dut):
    """Each bad configuration is refused with its code and makes no memory request."""
    b = Bench(dut)
    await b.start()
    good = dict(m=16, n=16, k=16, a=0x1000, b=0x2000, c=0x3000, d=0x4000, lda=16, ldb=16,
                ldc=16, ldd=16)
    bad = [
        (dict(m=0), ErrorCode.BAD_SIZE), (dict(n=24), ErrorCode.BAD_SIZE),
        (dict(k=16 * 1025), ErrorCode.BAD_SIZE),
        (dict(a=0x1008), ErrorCode.MISALIGNED), (dict(d=0x4004), ErrorCode.MISALIGNED),
        (dict(b=1 << 33), ErrorCode.ADDR_RANGE),
        (dict(lda=8), ErrorCode.BAD_LD), (dict(ldb=20), ErrorCode.BAD_LD),
        (dict(ldd=12), ErrorCode.BAD_LD),
    ]
    for change, code in bad:
        await b.program(**{**good, **change})
        before = b.requests
        err = await b.run(2000)
        assert err == code, f"{change}: error {err}, expected {code.name}"
        assert b.requests == before, f"{change}: {b.requests - before} memory requests"
    k32 = dict(k=32, lda=32, ldb=32)                      # the 8-bit kinds' K step
    fmt_bad = [dict(bf16=True, acc_f16=True), dict(fmt="tf32", acc_f16=True),
               dict(fmt="s8", acc_f16=True, **k32),
               dict(fmt="fp16", sat=True), dict(fmt="e4m3", sat=True, **k32)]
    for change in fmt_bad:
        await b.program(**{**good, **change})
        before = b.requests
        err = await b.run(2000)
        assert err == ErrorCode.BAD_FORMAT, f"{change}: error {err}, expected BAD_FORMAT"
        assert b.requests == before, f"{change}: {b.requests - before} memory requests"
    # no input format 7; b_alt with FP16 inputs
    for word in (7, register("FORMAT").pack(in_fmt=InFormat.FP16, b_alt=1)):
        await b.program(**good)
        await b.reg_write("FORMAT", word)
        assert await b.run(2000) == ErrorCode.BAD_FORMAT, f"FORMAT {word:#x}"
    # The 8-bit kinds step K by 32 and need 16-byte rows of 8-bit elements.
    for change, code in ((dict(fmt="e4m3"), ErrorCode.BAD_SIZE),
                         (dict(fmt="s8", k=32, lda=40, ldb=32), ErrorCode.BAD_LD),
                         (dict(fmt="e5m2", k=32, lda=32, ldb=16), ErrorCode.BAD_LD)):
        await b.program(**{**good, **change})
        assert await b.run(2000) == code, change
    # C is read only when given: its base and leading dimension do not matter otherwise.
    await b.program(**{**good, "c": 0x3004, "ldc": 3})
    assert await b.run(budget(16, 16, 16)) == 0
    await b.program(**{**good, "c": 0x3004}, c_given=True)
    assert await b.run(2000) == ErrorCode.MISALIGNED


def warps() -> int:
    """The built design's warps (the design's default, 1, when the build does not set it)."""
    return handover().build.warps


@cocotb.test()
async def read_error(dut):
    """A read answered with SLVERR ends the run with READ_SLVERR; the tile whose operand failed
    is not written, the tile its warp finished before is.  With one warp no later tile is
    written; with several, another warp's tile is either whole and exact or not written."""
    b = Bench(dut)
    await b.start()
    m, n, k = 32, 32, 32
    a_bits, b_bits, _ = operands(b.np_rng, m, n, k, FP16, False)
    base_a, base_b, base_d = 0x1000, 0x4000, 0x9000
    b.put(base_a, a_bits, k)
    b.put(base_b, b_bits, n)
    b.mem.data[base_d:base_d + m * n * 4] = bytes([0x5A]) * (m * n * 4)
    # The second K step of tile (1, 0) reads A rows 16.. at columns 16..31: make those fail.
    row16 = base_a + 16 * k * 2
    b.mem.bad_read = range(row16 + 32, row16 + 64)
    await b.program(m=m, n=n, k=k, a=base_a, b=base_b, c=0, d=base_d, lda=k, ldb=n, ldc=n, ldd=n)
    assert await b.run(budget(m, n, k)) == ErrorCode.READ_SLVERR
    got = b.get(base_d, m, n, n, np.uint32)
    want = mma(a_bits, b_bits, np.zeros((m, n), np.uint32))
    tile = {(i, j): (slice(16 * i, 16 * i + 16), slice(16 * j, 16 * j + 16))
            for i in range(2) for j in range(2)}
    assert np.all(got[tile[1, 0]] == 0x5A5A5A5A), "the tile whose read failed was written"
    for t in ((0, 0), (0, 1), (1, 1)):
        whole, untouched = np.array_equal(got[tile[t]], want[tile[t]]), np.all(got[tile[t]] == 0x5A5A5A5A)
        if warps() == 1:         # the one warp did (0, 0) and (0, 1) before, and stopped
            assert whole if t[0] == 0 else untouched, f"tile {t}"
        else:                    # another warp stops at its next step: its tile all or nothing
            assert whole or untouched, f"tile {t}: partly written or wrong"
    b.mem.bad_read = range(0)
    await b.reg_write("CTRL", 0b100)                      # soft reset clears the error
    await ClockCycles(dut.clk, 4)
    assert (await b.reg_read("STATUS")) >> 4 == 0


@cocotb.test()
async def write_error(dut):
    b = Bench(dut)
    await b.start()
    m, n, k = 16, 32, 16
    base_d = 0x8000
    b.mem.bad_write = range(base_d + 40 * 4, base_d + 41 * 4)      # row 1, column 8
    a_bits, b_bits, _ = operands(b.np_rng, m, n, k, FP16, False)
    b.put(0x1000, a_bits, k)
    b.put(0x2000, b_bits, n)
    await b.program(m=m, n=n, k=k, a=0x1000, b=0x2000, c=0, d=base_d, lda=k, ldb=n, ldc=n, ldd=n)
    assert await b.run(budget(m, n, k)) == ErrorCode.WRITE_SLVERR
    b.mem.bad_write = range(0)
    await one_gemm(b, m=16, n=16, k=16)                   # and the next run is good


@cocotb.test()
async def soft_reset(dut):
    """A soft reset in mid-run stops the engine at the next burst or command boundary (no done,
    no interrupt), clears STATUS, and the next run is bit-exact."""
    b = Bench(dut)
    await b.start()
    m = n = k = 32
    a_bits, b_bits, _ = operands(b.np_rng, m, n, k, FP16, False)
    b.put(0x1000, a_bits, k)
    b.put(0x4000, b_bits, n)
    await b.program(m=m, n=n, k=k, a=0x1000, b=0x4000, c=0, d=0x8000, lda=k, ldb=n, ldc=n, ldd=n)
    await b.reg_write("CTRL", 0b011)
    await ClockCycles(dut.clk, 600)
    assert (await b.reg_read("STATUS")) & 1 == 1, "not busy in mid-run"
    await b.reg_write("CTRL", 0b110)                      # soft reset, irq_en kept
    for _ in range(5000):
        await RisingEdge(dut.clk)
        if (await b.reg_read("STATUS")) & 1 == 0:
            break
    else:
        raise AssertionError("still busy 5000 clocks after a soft reset")
    assert int(dut.irq.value) == 0 and await b.reg_read("STATUS") == 0
    await one_gemm(b, m=16, n=32, k=32)


@cocotb.test()
async def decode_errors(dut):
    """DECERR on a read ends the run with READ_DECERR, on a write with WRITE_DECERR; a soft
    reset clears the code and the next run is bit-exact."""
    b = Bench(dut)
    await b.start()
    b.decode_errors = True
    m = n = k = 16
    a_bits, b_bits, _ = operands(b.np_rng, m, n, k, FP16, False)
    b.put(0x1000, a_bits, k)
    b.put(0x2000, b_bits, n)
    b.mem.bad_read = range(0x2000, 0x2010)                  # B's first row
    await b.program(m=m, n=n, k=k, a=0x1000, b=0x2000, c=0, d=0x8000, lda=k, ldb=n, ldc=n, ldd=n)
    assert await b.run(budget(m, n, k)) == ErrorCode.READ_DECERR
    b.mem.bad_read = range(0)
    b.mem.bad_write = range(0x8000, 0x8004)
    await b.reg_write("CTRL", 0b100)
    await ClockCycles(dut.clk, 4)
    assert await b.run(budget(m, n, k)) == ErrorCode.WRITE_DECERR
    b.mem.bad_write = range(0)
    await b.reg_write("CTRL", 0b100)
    await ClockCycles(dut.clk, 4)
    assert (await b.reg_read("STATUS")) >> 4 == 0
    await one_gemm(b, m=16, n=16, k=16)


@cocotb.test()
async def job(dut):
    """The GEMM in the hand-over's job file through the AXI memory; D to its result file.

    A job of 3-D arrays (T, M, K) x (T, K, N) is T GEMMs run one after another (a batch of
    captured tiles); the result's ``cycles`` is their sum and ``error`` the first non-zero."""
    import time
    h = handover()
    with np.load(h.job) as z:
        a_all, b_all, c_all = z["a"], z["b"], z["c"]
        op, c_given = Op.parse(str(z["op"])), bool(z["c_given"])
    batch = a_all.ndim == 3
    if not batch:
        a_all, b_all, c_all = a_all[None], b_all[None], c_all[None]
    _, m, k = a_all.shape
    n = b_all.shape[2]
    es = np.dtype(op.acc_bits).itemsize
    esz = a_all.dtype.itemsize
    cols = op.mode_fields["b_cols"]

    def after(addr, nbytes):                # the next 4 KiB page after an operand
        return (addr + nbytes + 0xFFF) & ~0xFFF
    base_a = 0x1000
    base_b = after(base_a, m * k * esz)
    base_c = after(base_b, k * n * esz)
    base_d = after(base_c, m * n * es)
    b = Bench(dut, pause=float(h.option("pause", 0.0)), mem_size=after(base_d, m * n * es))
    await b.start()
    for key in b.stats:
        b.stats[key] = 0
    t0 = time.perf_counter()
    outs, err, cycles = [], 0, 0
    for a_bits, b_bits, c_bits in zip(a_all, b_all, c_all):
        b.put(base_a, a_bits, k)
        b.put(base_b, np.ascontiguousarray(b_bits.T) if cols else b_bits, k if cols else n)
        b.put(base_c, c_bits, n)
        await b.program(m=m, n=n, k=k, a=base_a, b=base_b, c=base_c, d=base_d, lda=k,
                        ldb=k if cols else n, ldc=n, ldd=n, c_given=c_given, **op_fields(op))
        e = await b.run(budget(m, n, k, op.k_step))
        cycles += await b.reg_read("CYCLES_LO") | (await b.reg_read("CYCLES_HI")) << 32
        outs.append(b.get(base_d, m, n, n, op.acc_bits))
        if e:
            err = e
            break
    d = np.stack(outs) if batch else outs[0]
    np.savez(h.result, d=d, error=err, cycles=cycles, sim_s=time.perf_counter() - t0,
             **{f"bus_{key}": v for key, v in b.stats.items()})
