"""cocotb bench for the warp register file (``rtl/fragments.py``), scoreboarded against the
golden WMMA API (``tcore.golden.wmma``).

A random byte memory stands for global memory.  Each case loads a fragment through a load
port, one 128-bit word per clock, exactly the words ``load_matrix_sync(addr, ldm, layout)``
reads, and then checks the register file against the golden fragment that
``tcore.golden.wmma.load_matrix_sync`` makes of the same memory:

* every core beat (``mma_rd``: all 16 blocks of A, B or C) equals the golden fragment's block;
* accumulators are stored back through the store port (one word per clock) under another
  layout, ldm and address, and the memory equals ``tcore.golden.wmma.store_matrix_sync``'s, byte
  for byte;

* ``loads_and_stores``: A, B row/col-major, FP32 and FP16 accumulators row/col-major, several
  ldm, random fragments and load ports;
* ``dual_port_loads``: A and B through ports 0 and 1 in the same clocks (as the GEMM top);
* ``fill_and_writeback``: fill_fragment one entry per clock; D blocks written through
  ``mma_wr`` and stored against the golden store of the same matrix;
* ``read_timing``: beat data come exactly one clock after an enabled address, store data
  exactly two clocks after, and both hold while the port is not enabled.
"""

from __future__ import annotations


import cocotb
import numpy as np
from cocotb.triggers import FallingEdge

from tcore.golden.wmma import Fragment, fill_fragment, load_matrix_sync, store_matrix_sync
from tcore.numerics.fragments import ROLES
from tcore.host.handover import handover
from tcore.tb.common import start
from tcore.numerics.formats import dtype_of

MEM_BYTES = 8192
KIND = {name: i for i, name in enumerate(ROLES)}
def frags() -> int:
    """Fragments of each kind that every port of the design under test addresses (its build
    parameters)."""
    h = handover()
    return min(h.param("a_frags"), h.param("b_frags"), h.param("acc_frags"))


class Bank:
    def __init__(self, dut):
        self.dut = dut

    async def start(self):
        d = self.dut
        await start(d, zero=("fill__en", "load__0__en", "load__1__en", "mma_rd__en", "mma_wr__en",
                             "store__en"), edge=FallingEdge)

    def port(self, p, field):
        return getattr(self.dut, f"load__{p}__{field}")

    def drive_load(self, p, kind, frag, col, f16, line, word, data):
        self.port(p, "en").value = 1
        self.port(p, "kind").value = KIND[kind]
        self.port(p, "mnk").value = 0               # m16n16k16 (the other shapes: tb.wmma_bench)
        self.port(p, "frag").value = frag
        self.port(p, "col").value = col
        self.port(p, "f16").value = f16
        self.port(p, "line").value = line
        self.port(p, "word").value = word
        self.port(p, "data").value = data

    async def load(self, mem, p, kind, frag, addr, ldm, layout, f16=False):
        """The words load_matrix_sync reads, one per clock, into fragment ``frag``."""
        for line, word, waddr in words(kind, addr, ldm, f16):
            self.drive_load(p, kind, frag, layout == "col_major", f16, line, word, word_at(mem, waddr))
            await FallingEdge(self.dut.clk)
        self.port(p, "en").value = 0

    async def beats(self, kind, frag):
        """Every block of the fragment through mma_rd: {entry: 16 values}."""
        d = self.dut
        order = [(i, j) for i in range(4) for j in range(4)]
        out = {}
        for br, bc in order:
            d.mma_rd__en.value = 1
            d.mma_rd__a.value = d.mma_rd__b.value = d.mma_rd__c.value = frag
            # A: (i, s) = (block row, block col); B: (s, j); C: (i, j)
            if kind == "matrix_a":
                d.mma_rd__i.value, d.mma_rd__s.value, d.mma_rd__j.value = br, bc, 0
            elif kind == "matrix_b":
                d.mma_rd__s.value, d.mma_rd__j.value, d.mma_rd__i.value = br, bc, 0
            else:
                d.mma_rd__i.value, d.mma_rd__j.value, d.mma_rd__s.value = br, bc, 0
            d.mma_rd__jb.value = bc if kind == "matrix_b" else 0   # B's block column
            await FallingEdge(d.clk)        # the address was taken at the rising edge
            out[br, bc] = beat_values(d, kind)
        d.mma_rd__en.value = 0
        return out

    def ask_store(self, frag, layout, f16, line, word):
        d = self.dut
        d.store__en.value = 1
        d.store__frag.value = frag
        d.store__mnk.value = 0
        d.store__col.value = layout == "col_major"
        d.store__f16.value = f16
        d.store__line.value = line
        d.store__word.value = word

    async def store(self, mem, frag, addr, ldm, layout, f16):
        """store_matrix_sync through the store port into ``mem`` (a copy is returned): a word
        asked for every clock, each word's data read two clocks after it was asked for."""
        d = self.dut
        mem = mem.copy()
        asked = []                              # byte addresses of the words in flight
        for w in [*words("accumulator", addr, ldm, f16), None, None]:
            if w is None:
                d.store__en.value = 0
            else:
                self.ask_store(frag, layout, f16, w[0], w[1])
            await FallingEdge(d.clk)
            asked.append(None if w is None else w[2])
            if len(asked) == 2:                 # the oldest word's data is on the port now
                waddr = asked.pop(0)
                if waddr is not None:
                    mem[waddr:waddr + 16] = np.frombuffer(
                        d.store__data.value.to_unsigned().to_bytes(16, "little"), np.uint8)
        return mem


def words(kind, addr, ldm, f16):
    """(line, word, byte address) of each 128-bit word of a 16x16 access."""
    esz = 4 if kind == "accumulator" and not f16 else 2
    per_line = 16 * esz // 16
    for line in range(16):
        for word in range(per_line):
            yield line, word, addr + line * ldm * esz + 16 * word


def word_at(mem, addr):
    return int.from_bytes(mem[addr:addr + 16].tobytes(), "little")


def beat_values(d, kind):
    if kind == "accumulator":
        v, w = d.mma_rd__beat_c.value.to_unsigned(), 32
    else:
        v, w = getattr(d, "mma_rd__beat_a" if kind == "matrix_a" else "mma_rd__beat_b").value.to_unsigned(), 16
    return [(v >> (w * e)) & ((1 << w) - 1) for e in range(16)]


def check_beats(got, frag: Fragment, what):
    """Beats against the golden fragment's matrix: block (R, C), element 4r + c."""
    mat = frag.to_matrix().astype(np.uint64)
    for (br, bc), vals in got.items():
        want = [int(mat[4 * br + e // 4, 4 * bc + e % 4]) for e in range(16)]
        if vals != want:
            where = [(r, c) for r in range(4) for c in range(4)
                     if vals == [int(mat[4 * r + e // 4, 4 * c + e % 4]) for e in range(16)]]
            what += f" (the beat is golden block {where})" if where else ""
        assert vals == want, f"{what}: block ({br}, {bc}) beat {[hex(x) for x in vals]}, golden {[hex(x) for x in want]}"


def rand_mem(rng):
    return rng.integers(0, 256, MEM_BYTES, dtype=np.uint8)


def aligned(rng, limit):
    return int(rng.integers(0, limit // 32)) * 32


CASES = [  # kind, fmt, layout, ldm
    ("matrix_a", "fp16", "row_major", 16), ("matrix_a", "fp16", "col_major", 24),
    ("matrix_a", "bf16", "row_major", 40), ("matrix_a", "fp16", "col_major", 64),
    ("matrix_b", "fp16", "row_major", 16), ("matrix_b", "bf16", "col_major", 32),
    ("matrix_b", "fp16", "row_major", 56), ("matrix_b", "fp16", "col_major", 16),
    ("accumulator", "fp32", "mem_row_major", 16), ("accumulator", "fp32", "mem_col_major", 20),
    ("accumulator", "fp32", "mem_row_major", 36), ("accumulator", "fp32", "mem_col_major", 16),
    ("accumulator", "fp16", "mem_row_major", 16), ("accumulator", "fp16", "mem_col_major", 24),
    ("accumulator", "fp16", "mem_row_major", 40), ("accumulator", "fp16", "mem_col_major", 16),
]


@cocotb.test()
async def loads_and_stores(dut):
    rng = np.random.default_rng(int(handover().option("seed", 1)))
    b = Bank(dut)
    await b.start()
    for kind, fmt, layout, ldm in CASES:
        mem = rand_mem(rng)
        f16 = fmt == "fp16" and kind == "accumulator"
        esz = 2 if fmt != "fp32" else 4
        addr = aligned(rng, MEM_BYTES - (15 * ldm + 16) * esz)
        frag, port = int(rng.integers(0, frags())), int(rng.integers(0, 2))
        want = load_matrix_sync(Fragment.new(kind, fmt), mem, addr, ldm, layout)
        await b.load(mem, port, kind, frag, addr, ldm, layout.removeprefix("mem_"), f16)
        what = f"{kind} {fmt} {layout} ldm {ldm} addr {addr:#x} frag {frag} port {port}"
        got = await b.beats(kind, frag)
        if kind == "accumulator" and f16:
            got = {k: [x & 0xFFFF if x >> 16 == 0 else -1 for x in v] for k, v in got.items()}
        check_beats(got, want, what)
        if kind == "accumulator":
            for out_layout in ("mem_row_major", "mem_col_major"):
                out_ldm = int(rng.choice([16, 24, 32])) if esz == 2 else int(rng.choice([16, 20, 28]))
                out_addr = aligned(rng, MEM_BYTES - (15 * out_ldm + 16) * esz)
                target = rand_mem(rng)
                gmem = target.copy()
                store_matrix_sync(gmem, out_addr, want, out_ldm, out_layout)
                rmem = await b.store(target, frag, out_addr, out_ldm, out_layout.removeprefix("mem_"), f16)
                diff = np.flatnonzero(rmem != gmem)
                assert diff.size == 0, (f"{what}: store {out_layout} ldm {out_ldm} differs from "
                                        f"golden store_matrix_sync at {diff.size} bytes, first {diff[0]}")
        dut._log.info(f"{what}: ok")


@cocotb.test()
async def dual_port_loads(dut):
    """A through port 0 and B through port 1 in the same clocks, into every fragment."""
    rng = np.random.default_rng(int(handover().option("seed", 2)))
    b = Bank(dut)
    await b.start()
    for frag in range(frags()):
        mem = rand_mem(rng)
        a_addr, b_addr = aligned(rng, 4096), 4096 + aligned(rng, 2048)
        lda, ldb = int(rng.choice([16, 32, 48])), int(rng.choice([16, 32, 48]))
        wa = load_matrix_sync(Fragment.new("matrix_a", "fp16"), mem, a_addr, lda, "row_major")
        wb = load_matrix_sync(Fragment.new("matrix_b", "fp16"), mem, b_addr, ldb, "row_major")
        for (la, wda, aa), (lb, wdb, ab) in zip(words("matrix_a", a_addr, lda, False),
                                                words("matrix_b", b_addr, ldb, False)):
            b.drive_load(0, "matrix_a", frag, 0, 0, la, wda, word_at(mem, aa))
            b.drive_load(1, "matrix_b", frag, 0, 0, lb, wdb, word_at(mem, ab))
            await FallingEdge(dut.clk)
        dut.load__0__en.value = dut.load__1__en.value = 0
        check_beats(await b.beats("matrix_a", frag), wa, f"dual-port A frag {frag}")
        check_beats(await b.beats("matrix_b", frag), wb, f"dual-port B frag {frag}")


@cocotb.test()
async def fill_and_writeback(dut):
    rng = np.random.default_rng(int(handover().option("seed", 3)))
    b = Bank(dut)
    await b.start()
    # fill_fragment: 16 entries, one per clock, of every kind; other fragments untouched.
    for kind, fmt in (("matrix_a", "fp16"), ("matrix_b", "bf16"), ("accumulator", "fp32")):
        for frag in range(frags()):
            value = int(rng.integers(0, 1 << (32 if fmt == "fp32" else 16)))
            for entry in range(16):
                dut.fill__en.value = 1
                dut.fill__kind.value = KIND[kind]
                dut.fill__frag.value = frag
                dut.fill__entry.value = entry
                dut.fill__value.value = value | (0xABCD0000 if fmt != "fp32" else 0)
                await FallingEdge(dut.clk)
            dut.fill__en.value = 0
            check_beats(await b.beats(kind, frag), fill_fragment(Fragment.new(kind, fmt), value),
                        f"fill {kind} frag {frag}")
    # D write-back: random blocks in random order, then a store of each layout.
    for f16 in (False, True):
        frag = int(rng.integers(0, frags()))
        d = rng.integers(0, 1 << 32, (16, 16), dtype=np.uint64).astype(np.uint32)
        if f16:
            d &= 0xFFFF
        for n in rng.permutation(16):
            i, j = divmod(int(n), 4)
            dut.mma_wr__en.value = 1
            dut.mma_wr__frag.value = frag
            dut.mma_wr__i.value, dut.mma_wr__j.value = i, j
            dut.mma_wr__data.value = sum(int(d[4 * i + e // 4, 4 * j + e % 4]) << (32 * e) for e in range(16))
            await FallingEdge(dut.clk)
        dut.mma_wr__en.value = 0
        fmt = "fp16" if f16 else "fp32"
        want = Fragment.new("accumulator", fmt).from_matrix(d.astype(dtype_of("fp16" if f16 else "fp32")))
        check_beats(await b.beats("accumulator", frag), want, f"mma_wr {fmt}")
        for layout, ldm in (("mem_row_major", 24), ("mem_col_major", 16)):
            target = rand_mem(rng)
            gmem = target.copy()
            store_matrix_sync(gmem, 256, want, ldm, layout)
            rmem = await b.store(target, frag, 256, ldm, layout.removeprefix("mem_"), f16)
            assert np.array_equal(rmem, gmem), f"mma_wr {fmt}: store {layout} differs from golden"


@cocotb.test()
async def read_timing(dut):
    """Registered reads: beat data one clock after an enabled address, store data two clocks after,
    held while not enabled."""
    rng = np.random.default_rng(4)
    b = Bank(dut)
    await b.start()
    mem = rand_mem(rng)
    want = load_matrix_sync(Fragment.new("matrix_a", "fp16"), mem, 0, 16, "row_major")
    await b.load(mem, 0, "matrix_a", 0, 0, 16, "row_major")
    mat = want.to_matrix()
    block = lambda br, bc: [int(mat[4 * br + e // 4, 4 * bc + e % 4]) for e in range(16)]
    dut.mma_rd__en.value = 1
    dut.mma_rd__a.value, dut.mma_rd__i.value, dut.mma_rd__s.value = 0, 1, 2
    dut.mma_rd__j.value = dut.mma_rd__jb.value = 0
    await FallingEdge(dut.clk)
    assert beat_values(dut, "matrix_a") == block(1, 2), "beat not there one clock after its address"
    dut.mma_rd__en.value = 0
    dut.mma_rd__i.value, dut.mma_rd__s.value = 3, 3
    for _ in range(3):
        await FallingEdge(dut.clk)
        assert beat_values(dut, "matrix_a") == block(1, 2), "beat not held while en is low"
    dut.mma_rd__en.value = 1
    await FallingEdge(dut.clk)
    assert beat_values(dut, "matrix_a") == block(3, 3)
    dut.mma_rd__en.value = 0
    # Store: two words asked for on consecutive clocks; each comes exactly two clocks after
    # its ask, and the second holds while the port is not asked.  An FP32 accumulator loaded
    # row-major with ldm 16 stores (row-major, ldm 16) the loaded memory's own words.
    await b.load(mem, 0, "accumulator", 0, 0, 16, "row_major")
    asks = [(3, 1), (7, 2)]
    want = [word_at(mem, line * 64 + 16 * word) for line, word in asks]
    seen = []
    for n in range(6):
        if n < len(asks):
            b.ask_store(0, "row_major", 0, *asks[n])
        else:
            dut.store__en.value = 0
        await FallingEdge(dut.clk)
        if n:                                   # after the first ask's clock: no data yet
            seen.append(dut.store__data.value.to_unsigned())
    assert seen == [want[0]] + [want[1]] * 4, (
        "store data not exactly two clocks after its ask, or not held while the port is idle")
