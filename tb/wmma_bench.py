"""cocotb bench for the warp WMMA unit (``rtl/wmma.py``: memory, fragment bank, sequencer,
MMA4 core), scoreboarded against ``tcore.golden.wmma``.

* ``job``: every tile of the hand-over's ``job`` file goes memory -> load_matrix_sync -> mma_sync (K chained
  in the accumulator fragment) -> store_matrix_sync -> memory; D to its ``result`` file.
* ``layouts_and_ldm``: all layouts (A, B row/col-major, C and D mem_row/mem_col) and several
  ldm values, random tiles, with random back-pressure on the responses; the memory after the
  RTL's store equals the memory after the golden WMMA API's load_matrix_sync / mma_sync /
  store_matrix_sync on the same image, byte for byte.
* ``bad_ldm_and_alignment``: refused commands raise the error flag and write nothing (all of
  memory is read back).
* ``back_to_back``: commands issued every clock; measures clocks per mma_sync and checks that
  loads overlap it.
* ``reset_midrun``: a reset during a tile program drops it (no response, no memory write);
  the next program is bit-exact.
* ``other_shapes``: m32n8k16 and m8n32k16 tile programs (K chained, FP16/BF16, FP32/FP16
  accumulators, every layout of A, B, C and D), D against ``tcore.golden.mma`` and the whole memory
  against the golden WMMA API's; then mma_syncs on fragments of another shape, or of the
  other kind, are refused.

Every test checks every response: one per command, with the command's tag and op, and the
error flag only where a command is meant to be refused.  The hand-over (:mod:`tcore.host.handover`)
gives the memory size (the design's ``mem_words``), ``resp_stall`` (job test: ``resp.ready``
low at random), ``mma_cycles`` (the documented mma_sync time) and ``seed``.
"""

from __future__ import annotations

import random
import time

import cocotb
import numpy as np
from cocotb.triggers import ReadOnly, RisingEdge

from tcore.golden import mma
from tcore.golden.wmma import Fragment, load_matrix_sync, mma_sync, store_matrix_sync
from tcore.numerics.formats import INPUT_FORMATS, dtype_of
from tcore.numerics.fragments import SHAPES
from tcore.host.beats import load_jobs
from tcore.host.handover import handover
from tcore.host.images import unpack_struct
from tcore.host.wmma_model import Op, bytes_of, cmd_word, get_matrix, put_matrix, resp_fields, words_of
from tcore.rtl.wmma import WmmaCmd
from tcore.tb import memh
from tcore.tb.common import StreamDriver, StreamMonitor, reset, start


def acc_bits(acc_f16: bool):
    """D's bit dtype: the FP16 or the FP32 accumulator's."""
    return np.dtype(dtype_of("fp16" if acc_f16 else "fp32"))


def mem_bytes() -> int:
    """The memory of the design under test, in bytes (its build parameter)."""
    return handover().param("mem_words") * 16


class Warp:
    """Drives the WarpTop: host memory access, a command queue, responses with their clocks."""

    def __init__(self, dut, resp_stall: float = 0.0, seed: int = 0):
        self.dut = dut
        self.cycle = 0
        self.resps: list[tuple[int, dict]] = []
        self.last_span = 0          # clocks from the first issue to the last response of run()
        self.resp_stall, self.rng = resp_stall, random.Random(seed)

    async def start(self):
        self.dut.resp__ready.value = 1
        await start(self.dut, zero=("cmd__valid", "host_we"))

    async def write_mem(self, addr: int, data: np.ndarray):
        """Write bytes at a 16-byte-aligned address through the host port."""
        d = self.dut
        for i, w in enumerate(words_of(np.asarray(data, np.uint8))):
            d.host_addr.value = addr // 16 + i
            d.host_wdata.value = w
            d.host_we.value = 1
            await RisingEdge(d.clk)
        d.host_we.value = 0

    async def load_mem(self, addr: int, data: np.ndarray):
        """Put bytes at a 16-byte-aligned address in zero clocks, through the memory load hook
        (``tcore.tb.memh``): a K=2048 tile is 8 k words, which per-clock host writes take minutes to
        send on Icarus.  The design must be idle."""
        await memh.load(self.dut, addr // 16, data)
        await self._next_clock()

    async def dump_mem(self, addr: int, nbytes: int) -> np.ndarray:
        """Read bytes at once through the memory dump hook (``tcore.tb.memh``)."""
        out = await memh.dump(self.dut, addr // 16, nbytes // 16)
        await self._next_clock()
        return out

    async def _next_clock(self):
        await RisingEdge(self.dut.clk)
        self.cycle += 1

    async def read_mem(self, addr: int, nbytes: int) -> np.ndarray:
        d = self.dut
        words = []
        for i in range(nbytes // 16):
            d.host_addr.value = addr // 16 + i
            await RisingEdge(d.clk)
            await ReadOnly()
            words.append(d.host_rdata.value.to_unsigned())
            await RisingEdge(d.clk)
        return bytes_of(words)

    async def run(self, cmds: list[int], limit: int | None = None, *, refused=(), abort_after=None):
        """Issue ``cmds`` back to back (valid held until ready) and wait for every response,
        at most ``limit`` clocks (default: from the commands).  ``resp.ready`` is held low at
        random with probability ``resp_stall``.  Every response is checked: one per command,
        each (tag, op) once, the error flag set exactly for the tags in ``refused``.

        ``abort_after``: stop after that many clocks, wherever the program is, and return
        the responses so far unchecked (for a reset in mid-run)."""
        d = self.dut
        drv, mon = StreamDriver(d, "cmd"), StreamMonitor(d, "resp", self.resp_stall, self.rng)
        drv.load(cmds)
        if limit is None:       # 64 words or 64 beats + latency per command at most, stalls
            limit = int(200 * len(cmds) / (1 - min(self.resp_stall, 0.9))) + 1000
        start = self.cycle
        while len(mon.words) < len(cmds):
            if abort_after is not None and self.cycle - start >= abort_after:
                drv.idle()
                got = [(c, resp_fields(w)) for c, w in zip(mon.cycles, mon.words)]
                self.resps += got
                return got
            drv.drive()
            mon.drive()
            await ReadOnly()
            drv.sample(self.cycle)
            mon.sample(self.cycle)
            await RisingEdge(d.clk)
            self.cycle += 1
            if self.cycle - start > limit:
                raise AssertionError(f"timeout: {len(mon.words)} of {len(cmds)} responses "
                                     f"after {limit} clocks")
        drv.idle()
        d.resp__ready.value = 1
        self.resps += [(c, resp_fields(w)) for c, w in zip(mon.cycles, mon.words)]
        self.last_span = self.cycle - start
        got = self.resps[-len(cmds):]
        check_responses(cmds, [r for _, r in got], refused)
        return got


def check_responses(cmds, resps, refused=()):
    """One response per command: the same (tag, op) pairs, each error flag as expected."""
    want = sorted((cmd_fields(c)["tag"], cmd_fields(c)["op"]) for c in cmds)
    have = sorted((r["tag"], r["op"]) for r in resps)
    assert have == want, f"responses {have} do not answer commands {want}"
    for r in resps:
        assert r["error"] == (r["tag"] in refused), \
            f"tag {r['tag']} (op {r['op']}): error {r['error']}, expected {int(r['tag'] in refused)}"


def cmd_fields(word: int) -> dict:
    """A command word's fields (the inverse of ``cmd_word``, from the RTL's layout)."""
    return unpack_struct(WmmaCmd, word)


def _mode_fields(mode, bf16):
    """The WmmaCmd format fields of a :class:`tcore.host.beats.Mode` (or of FP16/BF16)."""
    if mode is None:
        return {"fmt": int(bf16)}, 2
    alt = lambda f: int(INPUT_FORMATS[f].alt)
    esize = INPUT_FORMATS[mode.in_fmt].bytes
    return {"fmt": mode.kind, "a_alt": alt(mode.in_fmt), "b_alt": alt(mode.b_fmt),
            "sat": int(mode.saturate)}, esize


def tile_program(k, a_addr, lda, b_addr, ldb, c_addr, d_addr, ldc, *, bf16, acc_f16,
                 a_col=False, b_col=False, c_col=False, d_col=False, mode=None):
    """The matmulT inner loop for one 16x16 output tile: load C; for each K step (32 bytes of
    a row of A and of a column of B: 16 FP16/BF16, 8 TF32, 32 FP8/INT8 elements) load A and B
    into alternating fragments and mma_sync into the accumulator; store D.  ``mode`` (a
    :class:`tcore.host.beats.Mode`) gives the kind; None is FP16, or BF16 with ``bf16``."""
    fmt, esz = _mode_fields(mode, bf16)
    kstep = 32 // esz
    cmds = [dict(op=Op.LOAD, kind=2, frag=0, addr=c_addr, ldm=ldc, col_major=c_col, acc_f16=acc_f16)]
    for s in range(k // kstep):
        fa, fb = 2 * (s % 2), 2 * (s % 2) + 1
        a_off = (s * kstep * lda if a_col else s * kstep) * esz
        b_off = (s * kstep if b_col else s * kstep * ldb) * esz
        cmds += [dict(op=Op.LOAD, kind=0, frag=fa, addr=a_addr + a_off, ldm=lda, col_major=a_col,
                      fmt=fmt["fmt"]),
                 dict(op=Op.LOAD, kind=1, frag=fb, addr=b_addr + b_off, ldm=ldb, col_major=b_col,
                      fmt=fmt["fmt"]),
                 dict(op=Op.MMA, frag=0, fa=fa, fb=fb, fc=0, acc_f16=acc_f16, **fmt)]
    cmds.append(dict(op=Op.STORE, kind=2, frag=0, addr=d_addr, ldm=ldc, col_major=d_col, acc_f16=acc_f16))
    # Tags count up (modulo 256), so that a lost or repeated response shows.
    return [cmd_word(**c, tag=i % 256) for i, c in enumerate(cmds)]


def tile_image(a, b, c, *, acc_f16, **layout):
    """The memory image of one tile (a 16xK, b Kx16, c 16x16 bits; any element size) and
    where each part sits: ``(mem, addrs, end)`` with addrs = dict(a, lda, b, ldb, c, d, ldc)."""
    k = a.shape[1]
    es = a.itemsize
    lda = layout.get("lda", k if not layout.get("a_col") else 16)
    ldb = layout.get("ldb", 16 if not layout.get("b_col") else k)
    ldc = layout.get("ldc", 16)
    a_addr = 0
    a_bytes = (16 * lda if not layout.get("a_col") else k * lda) * es
    b_addr = (a_bytes + 31) // 32 * 32
    b_bytes = (k * ldb if not layout.get("b_col") else 16 * ldb) * es
    c_addr = (b_addr + b_bytes + 31) // 32 * 32
    esz = 2 if acc_f16 else 4
    d_addr = c_addr + (16 * ldc * esz + 31) // 32 * 32
    end = (d_addr + 16 * ldc * esz + 15) // 16 * 16
    mem = np.zeros(end, np.uint8)
    for row in range(16):              # A: 16 x K
        line = a[row] if not layout.get("a_col") else None
        if line is not None:
            mem[a_addr + row * lda * es:a_addr + row * lda * es + es * k] = line.view(np.uint8)
    if layout.get("a_col"):
        for col in range(k):
            mem[a_addr + col * lda * es:a_addr + col * lda * es + 16 * es] = np.ascontiguousarray(a[:, col]).view(np.uint8)
    if not layout.get("b_col"):
        for row in range(k):
            mem[b_addr + row * ldb * es:b_addr + row * ldb * es + 16 * es] = b[row].view(np.uint8)
    else:
        for col in range(16):
            mem[b_addr + col * ldb * es:b_addr + col * ldb * es + es * k] = np.ascontiguousarray(b[:, col]).view(np.uint8)
    put_matrix(mem, c_addr, c, ldc, layout.get("c_col", False))
    return mem, dict(a=a_addr, lda=lda, b=b_addr, ldb=ldb, c=c_addr, d=d_addr, ldc=ldc), end


def golden_tile(mem, addrs, k, *, bf16, acc_f16, **layout):
    """The same tile program on the golden WMMA API (``tcore.golden.wmma``), on a copy of ``mem``:
    load_matrix_sync C, then per 16-wide step load A and B and mma_sync, store_matrix_sync D."""
    mem = mem.copy()
    in_fmt, acc = ("bf16" if bf16 else "fp16"), ("fp16" if acc_f16 else "fp32")
    rc = lambda col: "col_major" if col else "row_major"
    acc_frag = load_matrix_sync(Fragment.new("accumulator", acc), mem, addrs["c"], addrs["ldc"],
                                "mem_" + rc(layout.get("c_col")))
    for s in range(k // 16):
        a_off = (s * 16 * addrs["lda"] if layout.get("a_col") else s * 16) * 2
        b_off = (s * 16 if layout.get("b_col") else s * 16 * addrs["ldb"]) * 2
        fa = load_matrix_sync(Fragment.new("matrix_a", in_fmt), mem, addrs["a"] + a_off,
                              addrs["lda"], rc(layout.get("a_col")))
        fb = load_matrix_sync(Fragment.new("matrix_b", in_fmt), mem, addrs["b"] + b_off,
                              addrs["ldb"], rc(layout.get("b_col")))
        acc_frag = mma_sync(Fragment.new("accumulator", acc), fa, fb, acc_frag)
    store_matrix_sync(mem, addrs["d"], acc_frag, addrs["ldc"], "mem_" + rc(layout.get("d_col")))
    return mem


async def run_tile(w: Warp, a, b, c, *, bf16, acc_f16, image=False, mode=None, **layout):
    """One output tile (a 16xK, b Kx16, c 16x16 bits) through memory and the warp; returns D
    (and, with ``image``, the memory image before and the memory read back after).  ``mode``
    (:class:`tcore.host.beats.Mode`) for the TF32, FP8 and INT8 kinds, whose B goes column-major."""
    k = a.shape[1]
    if mode is not None and mode.kd != 4:
        layout = {"b_col": True, **layout}
    mem, addrs, end = tile_image(a, b, c, acc_f16=acc_f16, **layout)
    await w.load_mem(0, mem[:end])
    tiling = {key: v for key, v in layout.items() if key not in ("lda", "ldb", "ldc")}
    await w.run(tile_program(k, addrs["a"], addrs["lda"], addrs["b"], addrs["ldb"], addrs["c"],
                             addrs["d"], addrs["ldc"], bf16=bf16, acc_f16=acc_f16, mode=mode,
                             **tiling))
    esz = 2 if acc_f16 else 4
    if image:
        after = await w.dump_mem(0, end)
        d = get_matrix(after, addrs["d"], addrs["ldc"], acc_bits(acc_f16),
                       layout.get("d_col", False))
        return d, mem[:end], after, addrs
    out = await w.dump_mem(addrs["d"], 16 * addrs["ldc"] * esz)
    return get_matrix(out, 0, addrs["ldc"], acc_bits(acc_f16), layout.get("d_col", False))


@cocotb.test()
async def job(dut):
    w = Warp(dut, resp_stall=float(handover().option("resp_stall", 0)),
             seed=int(handover().option("seed", 0)))
    await w.start()
    out = {}
    for i, j in enumerate(load_jobs(handover().job)):
        t0, c0 = time.perf_counter(), w.cycle
        out[f"d{i}"] = np.stack([await run_tile(w, j.a[t], j.b[t], j.c[t], bf16=j.mode.in_fmt == "bf16",
                                                acc_f16=j.acc_f16, mode=j.mode)
                                 for t in range(j.a.shape[0])])
        out[f"cycles{i}"], out[f"sim_s{i}"] = w.cycle - c0, time.perf_counter() - t0
    np.savez(handover().result, **out)


def _rand(rng, shape, fmt):
    x = rng.standard_normal(shape) * np.exp2(rng.integers(-4, 5, shape))
    if fmt == "bf16":
        import ml_dtypes
        return x.astype(ml_dtypes.bfloat16).view(np.uint16)
    if fmt == "fp16":
        return x.astype(np.float16).view(np.uint16)
    return x.astype(np.float32).view(np.uint32)


@cocotb.test()
async def layouts_and_ldm(dut):
    """Every memory layout and several leading dimensions, against the golden model."""
    seed = int(handover().option("seed", 1))
    rng = np.random.default_rng(seed)
    w = Warp(dut, resp_stall=0.4, seed=seed)
    await w.start()
    # Three tiles cover A, B, C and D in both layouts, FP16/BF16 inputs, FP32/FP16 accumulators,
    # chained K and leading dimensions larger than the matrix.
    cases = [
        dict(k=32, bf16=False, acc_f16=False, a_col=True, b_col=True, lda=24, ldb=40),
        dict(k=16, bf16=True, acc_f16=False, c_col=True, d_col=True, ldc=20, lda=32),
        dict(k=32, bf16=False, acc_f16=True, a_col=True, ldb=24, ldc=24, c_col=True),
    ]
    for case in cases:
        k, bf16, acc_f16 = case.pop("k"), case.pop("bf16"), case.pop("acc_f16")
        a = _rand(rng, (16, k), "bf16" if bf16 else "fp16")
        b = _rand(rng, (k, 16), "bf16" if bf16 else "fp16")
        c = _rand(rng, (16, 16), "fp16" if acc_f16 else "fp32")
        got, before, after, addrs = await run_tile(w, a, b, c, bf16=bf16, acc_f16=acc_f16,
                                                   image=True, **dict(case))
        want = mma(a, b, c, in_fmt="bf16" if bf16 else "fp16", out_fmt="fp16" if acc_f16 else "fp32")
        bad = int((got != want).sum())
        assert bad == 0, f"{case} k={k} bf16={bf16} acc_f16={acc_f16}: {bad} mismatches"
        # The RTL's fragments against the golden WMMA API's: the golden load_matrix_sync /
        # mma_sync / store_matrix_sync on the same image leave the same bytes everywhere (D
        # where the layout puts it, padding between ldm lines untouched).
        gmem = golden_tile(before, addrs, k, bf16=bf16, acc_f16=acc_f16, **case)[:after.size]
        diff = np.flatnonzero(gmem != after)
        assert diff.size == 0, (f"{case} k={k}: memory differs from the golden WMMA API at "
                                f"{diff.size} bytes, first at byte {diff[0]}")


@cocotb.test()
async def bad_ldm_and_alignment(dut):
    """Bad ldm, misalignment, out-of-range and invalid combinations: error flag, nothing written."""
    w = Warp(dut)
    await w.start()
    # All of memory holds a known pattern (loaded at once), the first 4 KiB written through
    # the host port; all of it is read back at the end, the top 512 bytes that the
    # out-of-range store aims at included.
    image = np.random.default_rng(7).integers(0, 256, mem_bytes(), dtype=np.uint8)
    await w.load_mem(0, image)
    marker = np.arange(4096, dtype=np.uint8)
    await w.write_mem(0, marker)
    image[:4096] = marker
    # A known accumulator, stored once as the reference of "unchanged".
    await w.run([cmd_word(op=Op.FILL, kind=2, frag=1, value=0x3F800000, tag=9)])
    bad = [
        cmd_word(op=Op.LOAD, kind=0, frag=0, addr=0, ldm=12, tag=1),           # ldm % 8
        cmd_word(op=Op.LOAD, kind=2, frag=1, addr=0, ldm=18, tag=2),           # ldm % 4 (FP32)
        cmd_word(op=Op.LOAD, kind=2, frag=1, addr=0, ldm=20, acc_f16=1, tag=3),  # ldm % 8 (FP16)
        cmd_word(op=Op.LOAD, kind=1, frag=0, addr=16, ldm=16, tag=4),          # not 32-byte aligned
        cmd_word(op=Op.STORE, kind=2, frag=1, addr=48, ldm=16, tag=5),         # not aligned
        cmd_word(op=Op.STORE, kind=2, frag=1, addr=64, ldm=6, tag=6),          # ldm % 4
        cmd_word(op=Op.STORE, kind=2, frag=1, addr=mem_bytes() - 512, ldm=16, tag=7),  # out of range
        cmd_word(op=Op.LOAD, kind=0, frag=0, addr=0, ldm=0, tag=8),            # ldm 0
        cmd_word(op=Op.STORE, kind=0, frag=0, addr=0, ldm=16, tag=10),         # store of a matrix_a
        cmd_word(op=Op.MMA, frag=0, fa=1, fb=1, fc=0, tag=11),                 # a is not a matrix_a
        cmd_word(op=Op.MMA, frag=0, fa=0, fb=1, fc=0, bf16=1, acc_f16=1, tag=12),  # BF16 + FP16 acc
        cmd_word(op=Op.LOAD, kind=2, frag=5, addr=0, ldm=16, tag=13),          # no such fragment
        cmd_word(op=Op.LOAD, kind=1, frag=1, addr=0, ldm=32, fmt=3, tag=16),   # FP8 B row-major
        cmd_word(op=Op.LOAD, kind=0, frag=0, addr=0, ldm=32, fmt=4, col_major=1, tag=17),  # INT8 A col-major
        cmd_word(op=Op.LOAD, kind=0, frag=0, addr=0, ldm=24, fmt=3, tag=18),   # ldm % 16 (bytes)
        cmd_word(op=Op.LOAD, kind=1, frag=1, addr=0, ldm=10, fmt=2, col_major=1, tag=19),  # ldm % 4 (TF32)
        cmd_word(op=Op.MMA, frag=0, fa=0, fb=1, fc=0, fmt=2, acc_f16=1, tag=20),  # TF32 + FP16 acc
        cmd_word(op=Op.MMA, frag=0, fa=0, fb=1, fc=0, fmt=4, acc_f16=1, tag=21),  # INT8 + FP16 acc
        cmd_word(op=Op.MMA, frag=0, fa=0, fb=1, fc=0, fmt=6, tag=22),          # no such kind
    ]
    # fragment 1 of the matrix bank must be a matrix_b for tag 11's check to be about fa.
    await w.run([cmd_word(op=Op.FILL, kind=1, frag=1, value=0, tag=14)])
    await w.run(bad, refused={1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 12, 13, 16, 17, 18, 19, 20, 21, 22})
    after = await w.dump_mem(0, mem_bytes())
    diff = np.flatnonzero(after != image)
    assert diff.size == 0, f"a refused command wrote memory: {diff.size} bytes, first at {diff[0]}"
    # The accumulator fill survived the refused load into it.
    await w.run([cmd_word(op=Op.STORE, kind=2, frag=1, addr=4096, ldm=16, tag=15)])
    d = get_matrix(await w.read_mem(4096, 1024), 0, 16, np.uint32)      # the host read port
    assert np.all(d == 0x3F800000), "a refused load changed the fragment"


@cocotb.test()
async def back_to_back(dut):
    """Commands every clock: clocks per mma_sync, and loads overlapping it."""
    rng = np.random.default_rng(5)
    mma_cycles = int(handover().option("mma_cycles", -1))
    w = Warp(dut)
    await w.start()
    k = 64
    a, b = _rand(rng, (16, k), "fp16"), _rand(rng, (k, 16), "fp16")
    c = _rand(rng, (16, 16), "fp32")
    got = await run_tile(w, a, b, c, bf16=False, acc_f16=False)
    assert np.array_equal(got, mma(a, b, c)), "back-to-back chained mma_sync mismatch"
    program = w.last_span
    # Single mma_sync, nothing else in flight: issue -> response.
    await w.run([cmd_word(op=Op.FILL, kind=0, frag=0, value=0x3C00, tag=1),
                 cmd_word(op=Op.FILL, kind=1, frag=1, value=0x3C00, tag=2),
                 cmd_word(op=Op.FILL, kind=2, frag=0, value=0, tag=3)])
    start = w.cycle
    r = await w.run([cmd_word(op=Op.MMA, frag=0, fa=0, fb=1, fc=0, tag=4)])
    one = r[0][0] - start
    dut._log.info(f"clocks per mma_sync (issue to response): {one}; "
                  f"K=64 tile program: {program} clocks")
    if mma_cycles >= 0:
        assert one == mma_cycles, f"mma_sync took {one} clocks, documented {mma_cycles}"
    # An FP8 mma_sync (two passes a beat, the beat accepted at its first): issue -> response.
    mma_cycles_fp8 = int(handover().option("mma_cycles_fp8", -1))
    await w.run([cmd_word(op=Op.LOAD, kind=0, frag=0, addr=0, ldm=32, fmt=3, tag=5),
                 cmd_word(op=Op.LOAD, kind=1, frag=1, addr=0, ldm=32, fmt=3, col_major=1, tag=6),
                 cmd_word(op=Op.FILL, kind=2, frag=0, value=0, tag=7)])
    start = w.cycle
    r = await w.run([cmd_word(op=Op.MMA, frag=0, fa=0, fb=1, fc=0, fmt=3, tag=8)])
    one_fp8 = r[0][0] - start
    dut._log.info(f"clocks per FP8 mma_sync (issue to response): {one_fp8}")
    if mma_cycles_fp8 >= 0:
        assert one_fp8 == mma_cycles_fp8, f"FP8 mma_sync took {one_fp8} clocks, documented {mma_cycles_fp8}"
    # Overlap: the loads of step s+1 run during mma s, so the K=64 tile program (a C load of
    # 64 words, 8 loads of 32 words, 4 mma, a store of 64 words) beats running them in series.
    # Three of the four A/B load pairs (64 clocks each) can hide under an mma_sync: demand
    # that at least 160 of those 192 clocks are saved.
    serial = 64 + 8 * 32 + 4 * one + 64
    assert program <= serial - 160, f"loads did not overlap mma_sync: {program} vs {serial} in series"


@cocotb.test()
async def reset_midrun(dut):
    """Reset while a K=64 tile program runs (loads and an mma_sync in flight): no response and
    no memory write after it, and the next program, on other operands, is bit-exact."""
    rng = np.random.default_rng(int(handover().option("seed", 6)))
    w = Warp(dut)
    await w.start()
    k = 64
    a, b, c = _rand(rng, (16, k), "fp16"), _rand(rng, (k, 16), "fp16"), _rand(rng, (16, 16), "fp32")
    mem, addrs, end = tile_image(a, b, c, acc_f16=False)
    await w.load_mem(0, mem[:end])
    program = tile_program(k, addrs["a"], addrs["lda"], addrs["b"], addrs["ldb"], addrs["c"],
                           addrs["d"], addrs["ldc"], bf16=False, acc_f16=False)
    got = await w.run(program, abort_after=200)       # C and step 0 loaded, an mma_sync running
    assert 0 < len(got) < len(program), f"{len(got)} of {len(program)} responses at the reset"
    await reset(dut)
    for _ in range(300):
        await RisingEdge(dut.clk)
        w.cycle += 1
        assert dut.resp__valid.value.is_resolvable and dut.resp__valid.value == 0, "response after reset"
    after = await w.dump_mem(0, end)
    assert np.array_equal(after, mem[:end]), "memory written after the reset (D stored?)"
    a, b, c = _rand(rng, (16, k), "fp16"), _rand(rng, (k, 16), "fp16"), _rand(rng, (16, 16), "fp32")
    d = await run_tile(w, a, b, c, bf16=False, acc_f16=False)
    bad = int((d != mma(a, b, c)).sum())
    assert bad == 0, f"after a reset: {bad} mismatches"


MNK = {"m16n16k16": 0, "m32n8k16": 1, "m8n32k16": 2}       # rtl.fragments.Shape codes


def shape_case(rng, shape, k, in_fmt, acc, layout, lds):
    """One tile of ``shape`` with K = ``k``: the memory image, the program, and what it must
    leave there.  ``layout``: column-major flags of A, B, C, D; ``lds``: lda, ldb, ldc.

    Fragments: the 32x16 operand (m32n8k16's A, m8n32k16's B) is the pair 0, 1; the other
    matrix is fragment 2; the accumulator is 0.  Returns (mem, cmds, want, d_at) with want
    the golden WMMA API's memory after the same program and d_at = (addr, ldm, dtype, col,
    (rows, cols), expected D from golden.mma)."""
    mm, nn, _ = SHAPES[shape]
    a_col, b_col, c_col, d_col = layout
    lda, ldb, ldc = lds
    es = 2
    cdt = np.dtype(dtype_of(acc))
    a, b = _rand(rng, (mm, k), in_fmt), _rand(rng, (k, nn), in_fmt)
    c = _rand(rng, (mm, nn), acc)
    span = lambda rows, cols, ld, col, e: ((cols if col else rows) * ld) * e
    a_at = 0
    b_at = a_at + (span(mm, k, lda, a_col, es) + 31) // 32 * 32
    c_at = b_at + (span(k, nn, ldb, b_col, es) + 31) // 32 * 32
    d_at = c_at + (span(mm, nn, ldc, c_col, cdt.itemsize) + 31) // 32 * 32
    end = d_at + (span(mm, nn, ldc, d_col, cdt.itemsize) + 31) // 32 * 32
    mem = np.zeros(end, np.uint8)
    put_matrix(mem, a_at, a, lda, a_col)
    put_matrix(mem, b_at, b, ldb, b_col)
    put_matrix(mem, c_at, c, ldc, c_col)
    fa, fb = (0, 2) if shape == "m32n8k16" else (2, 0)
    mnk, bf16, f16 = MNK[shape], int(in_fmt == "bf16"), int(acc == "fp16")
    cmds = [dict(op=Op.LOAD, kind=2, frag=0, addr=c_at, ldm=ldc, col_major=c_col, acc_f16=f16)]
    rc = lambda col: "col_major" if col else "row_major"
    gmem = mem.copy()
    gacc = load_matrix_sync(Fragment.new("accumulator", acc, shape), gmem, c_at, ldc, "mem_" + rc(c_col))
    for s in range(k // 16):
        a_off = (s * 16 * lda if a_col else s * 16) * es
        b_off = (s * 16 if b_col else s * 16 * ldb) * es
        cmds += [dict(op=Op.LOAD, kind=0, frag=fa, addr=a_at + a_off, ldm=lda, col_major=a_col, fmt=bf16),
                 dict(op=Op.LOAD, kind=1, frag=fb, addr=b_at + b_off, ldm=ldb, col_major=b_col, fmt=bf16),
                 dict(op=Op.MMA, frag=0, fa=fa, fb=fb, fc=0, fmt=bf16, acc_f16=f16)]
        ga = load_matrix_sync(Fragment.new("matrix_a", in_fmt, shape), gmem, a_at + a_off, lda, rc(a_col))
        gb = load_matrix_sync(Fragment.new("matrix_b", in_fmt, shape), gmem, b_at + b_off, ldb, rc(b_col))
        gacc = mma_sync(Fragment.new("accumulator", acc, shape), ga, gb, gacc)
    cmds.append(dict(op=Op.STORE, kind=2, frag=0, addr=d_at, ldm=ldc, col_major=d_col, acc_f16=f16))
    store_matrix_sync(gmem, d_at, gacc, ldc, "mem_" + rc(d_col))
    words_ = [cmd_word(**cmd, mnk=mnk, tag=i) for i, cmd in enumerate(cmds)]
    expected = mma(a, b, c, in_fmt=in_fmt, out_fmt=acc)
    return mem, words_, gmem, (d_at, ldc, cdt, d_col, (mm, nn), expected)


SHAPE_CASES = [
    # shape, K, inputs, accumulator, (A, B, C, D column-major), (lda, ldb, ldc)
    ("m32n8k16", 32, "fp16", "fp32", (0, 1, 0, 1), (40, 32, 32)),
    ("m32n8k16", 32, "bf16", "fp32", (1, 0, 1, 0), (32, 16, 32)),
    ("m32n8k16", 16, "fp16", "fp16", (1, 1, 0, 1), (40, 24, 32)),
    ("m8n32k16", 32, "fp16", "fp32", (0, 0, 0, 1), (32, 40, 32)),
    ("m8n32k16", 16, "bf16", "fp32", (1, 1, 1, 0), (8, 16, 32)),
    ("m8n32k16", 32, "fp16", "fp16", (1, 0, 1, 1), (16, 32, 8)),
]


@cocotb.test()
async def other_shapes(dut):
    """m32n8k16 and m8n32k16 against golden.mma and the golden WMMA API, then refusals."""
    seed = int(handover().option("seed", 1))
    rng = np.random.default_rng(seed + 40)
    w = Warp(dut, resp_stall=0.3, seed=seed)
    await w.start()
    cases = SHAPE_CASES[-int(handover().option("shape_cases", len(SHAPE_CASES))):]  # Icarus: the last
    for shape, k, in_fmt, acc, layout, lds in cases:
        what = f"{shape} K={k} {in_fmt}->{acc} col-major A,B,C,D={layout} ld={lds}"
        mem, cmds, want, (d_at, ldc, cdt, d_col, dims, expected) = shape_case(
            rng, shape, k, in_fmt, acc, layout, lds)
        await w.load_mem(0, mem)
        await w.run(cmds)
        after = await w.dump_mem(0, mem.size)
        d = get_matrix(after, d_at, ldc, cdt, bool(d_col), dims)
        bad = int((d != expected).sum())
        assert bad == 0, f"{what}: {bad} of {d.size} outputs differ from golden.mma"
        diff = np.flatnonzero(after != want)
        assert diff.size == 0, (f"{what}: memory differs from the golden WMMA API at {diff.size} "
                                f"bytes, first at byte {diff[0]}")
    assert cases[-1][0] == "m8n32k16"
    # The last case left an m8n32k16 B pair in fragments 0, 1 and its A in fragment 2.
    refused = [
        cmd_word(op=Op.MMA, frag=0, fa=2, fb=0, fc=0, mnk=1, tag=1),    # m8n32 fragments as m32n8
        cmd_word(op=Op.MMA, frag=0, fa=0, fb=2, fc=0, mnk=0, tag=2),    # ... as m16n16k16
        cmd_word(op=Op.MMA, frag=0, fa=0, fb=2, fc=0, mnk=2, tag=3),    # a and b swapped
        cmd_word(op=Op.MMA, frag=0, fa=2, fb=0, fc=0, mnk=3, tag=4),    # no such shape
        cmd_word(op=Op.MMA, frag=0, fa=2, fb=0, fc=0, mnk=2, fmt=3, tag=5),   # FP8 in m8n32k16
        cmd_word(op=Op.LOAD, kind=0, frag=3, addr=0, ldm=16, mnk=1, tag=6),   # pair 3, 4: no 4
        cmd_word(op=Op.LOAD, kind=0, frag=0, addr=0, ldm=32, mnk=1, fmt=3, tag=7),  # FP8 A, m32n8
        cmd_word(op=Op.FILL, kind=1, frag=3, mnk=2, tag=8),                   # pair 3, 4
        # 32 lines of ldm 8 FP32 end past the memory (16 would not)
        cmd_word(op=Op.LOAD, kind=2, frag=0, addr=mem_bytes() - 768, ldm=8, mnk=1, tag=9),
        cmd_word(op=Op.MMA, frag=0, fa=2, fb=0, fc=0, mnk=2, tag=10),   # the right one: runs
    ]
    await w.run(refused, refused={1, 2, 3, 4, 5, 6, 7, 8, 9})
