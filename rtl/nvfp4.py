"""The NVFP4 / MXFP4 front end: 4-bit elements and block scales decoded into tensor-core operands.

Golden twin: :mod:`tcore.golden.nvfp4`.

* :class:`Fp4Decoder`: E2M1 codes and per-element scale codes (UE4M3 for NVFP4, E8M0 for MXFP4)
  to the exact FP16 (NVFP4) or BF16 (MXFP4) values, ``lanes`` per clock.
* :class:`Fp32Mul` / :class:`Fp32Scale`: the epilogue, FP32 x FP32 with IEEE rounding (nearest
  even, subnormals kept), for the tensor-scale multiply on the accumulator output.
* :class:`Fp4GemmTop` (the ``fp4gemm`` design): the GEMM top (:class:`tcore.rtl.gemm.GemmTop`) behind
  a front end that unpacks packed A and B (codes and scales in the same memory) into the FP16 /
  BF16 operand areas, runs matmulT, then scales D by the tensor-scale product in place.

This is FP4 decode + Hopper FP16/BF16 arithmetic, not Blackwell's native FP4 datapath.
"""

from typing import NamedTuple

from amaranth import *
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .fragments import WORD_BITS, host_port
from .formats import InputKind
from .gemm import ADDR_BITS, TILE_BITS, GemmConfig, GemmTop

__all__ = ["Fp4Decoder", "Fp32Mul", "Fp32Scale", "Fp4Config", "Fp4GemmTop"]

NAN16 = 0x7FFF          # the tensor core's canonical NaN (FP16 and BF16 alike)
NAN32 = 0x7FFFFFFF


def _lead(m, value, width):
    """The index of the highest set bit of ``value`` (0 when none), as a comb signal."""
    lead = Signal(range(width), name="lead")
    for i in range(width):
        with m.If(value[i]):
            m.d.comb += lead.eq(i)
    return lead


class Fp4Decoder(wiring.Component):
    """Decode ``lanes`` E2M1 elements with their scales, exactly.

    NVFP4 (``mx`` = 0): element x UE4M3 scale as FP16.  The product of a 4-bit element magnitude
    (in halves: 0, 1, 2, 3, 4, 6, 8, 12) and a 4-bit scale significand has at most 6 significant
    bits and lies in 2**-10 .. 2688, so it is a normal FP16 with no rounding.  A scale 0x7F or
    with its sign bit set gives NaN (0x7FFF).

    MXFP4 (``mx`` = 1): element x 2**(s - 127) as BF16: normal, subnormal for s <= 1, Inf when
    the exponent passes BF16's range (s = 253, 254 with large elements), NaN for s = 255.

    Ports: ``codes`` (4 bits per lane), ``scales`` (8 bits per lane), ``mx``; ``values`` (16
    bits per lane).  Combinational, or with ``registered`` one clock of latency, a new set of
    lanes every clock.
    """

    def __init__(self, lanes: int = 8, *, registered: bool = False):
        self._lanes, self._registered = lanes, registered
        super().__init__({
            "codes": In(4 * lanes), "scales": In(8 * lanes), "mx": In(1),
            "values": Out(16 * lanes),
        })

    @property
    def lanes(self):
        return self._lanes

    def elaborate(self, platform):
        m = Module()
        out = Signal(16 * self._lanes)
        for i in range(self._lanes):
            m.d.comb += out[16 * i:16 * i + 16].eq(
                self._lane(m, self.codes[4 * i:4 * i + 4], self.scales[8 * i:8 * i + 8]))
        if self._registered:
            m.d.sync += self.values.eq(out)
        else:
            m.d.comb += self.values.eq(out)
        return m

    def _lane(self, m, code, scale):
        sign, e, man = code[3], code[1:3], code[0]
        # Element magnitude in halves: e = 0: man; else (2 + man) << (e - 1).
        pe = Signal(4)
        with m.If(e == 0):
            m.d.comb += pe.eq(man)
        with m.Else():
            m.d.comb += pe.eq(Cat(man, C(1, 1)) << (e - 1)[0:2])
        res = Signal(16)

        # NVFP4: scale = S * 2**(max(es, 1) - 10); value = pe * S * 2**(max(es, 1) - 11).
        es, ms = scale[3:7], scale[0:3]
        s_sig = Mux(es == 0, ms, Cat(ms, C(1, 1)))
        es1 = Mux(es == 0, 1, es)
        # p = pe * S with pe = man (e = 0) or (2 + man) << (e - 1): shifts and one add, not a
        # multiplier (synthesis would spend a DSP block on each 4 x 4 product).
        p = Signal(8)
        p_lin = Signal(6)
        m.d.comb += p_lin.eq(Mux(e == 0, 0, s_sig.shift_left(1)) + Mux(man, s_sig, 0))
        m.d.comb += p.eq(p_lin << (e - 1)[0:2])
        with m.If(e == 0):
            m.d.comb += p.eq(p_lin)
        lp = _lead(m, p, 8)
        f16 = Signal(16)
        with m.If(scale[7] | (scale[0:7] == 0x7F)):
            m.d.comb += f16.eq(NAN16)
        with m.Elif(p == 0):
            m.d.comb += f16.eq(Cat(C(0, 15), sign))
        with m.Else():
            # 1.f * 2**(lp + es1 - 11): FP16 exponent field lp + es1 + 4 (5 .. 26).
            frac = (p.shift_left(10) >> lp)[0:10]
            m.d.comb += f16.eq(Cat(frac, (lp + es1 + 4)[0:5], sign))

        # MXFP4: value = pe * 2**(s - 128); BF16 exponent field s + lead - 1.
        lx = _lead(m, pe, 4)
        bexp = Signal(signed(11))
        m.d.comb += bexp.eq(scale + lx - 1)
        b16 = Signal(16)
        with m.If(scale == 0xFF):
            m.d.comb += b16.eq(NAN16)
        with m.Elif(pe == 0):
            m.d.comb += b16.eq(Cat(C(0, 15), sign))
        with m.Elif(bexp >= 255):
            m.d.comb += b16.eq(Cat(C(0, 7), C(0xFF, 8), sign))
        with m.Elif(bexp <= 0):
            # Subnormal: value = f * 2**-133 with f = pe * 2**(s + 5) (s <= 1 here).
            m.d.comb += b16.eq(Cat((pe << (scale[0:3] + 5))[0:7], C(0, 8), sign))
        with m.Else():
            m.d.comb += b16.eq(Cat((pe.shift_left(7) >> lx)[0:7], bexp[0:8], sign))

        m.d.comb += res.eq(Mux(self.mx, b16, f16))
        return res


class Fp32Mul(wiring.Component):
    """``p = a * b`` in FP32: IEEE round to nearest even, subnormal inputs and outputs, Inf on
    overflow; NaN (any NaN input, or Inf x 0) gives the canonical 0x7FFFFFFF.  Combinational.

    The 24 x 24-bit product is normalised to put its leading one at bit 47, so the result's
    biased exponent is ``ea + eb - 126 - lz``; a result below the normal range is shifted right
    by ``1 - exponent`` more before rounding.  Packing ``(exponent - 1) << 23`` plus the rounded
    24-bit significand lets a rounding carry move into the exponent (and a subnormal into the
    smallest normal) by itself.
    """

    def __init__(self):
        super().__init__({"a": In(32), "b": In(32), "p": Out(32)})

    def elaborate(self, platform):
        m = Module()
        a, b = self.a, self.b
        ea, eb, fa, fb = a[23:31], b[23:31], a[0:23], b[0:23]
        sign = a[31] ^ b[31]
        a_nan, b_nan = (ea == 0xFF) & (fa != 0), (eb == 0xFF) & (fb != 0)
        a_inf, b_inf = (ea == 0xFF) & (fa == 0), (eb == 0xFF) & (fb == 0)
        a_zero, b_zero = (ea == 0) & (fa == 0), (eb == 0) & (fb == 0)
        ma = Cat(fa, ea != 0)
        mb = Cat(fb, eb != 0)
        prod = Signal(48)
        m.d.comb += prod.eq(ma * mb)
        lz = Signal(range(48))
        top = _lead(m, prod, 48)
        m.d.comb += lz.eq(47 - top)
        norm = Signal(48)
        m.d.comb += norm.eq(prod << lz)
        exp = Signal(signed(11))
        m.d.comb += exp.eq(Mux(ea == 0, 1, ea) + Mux(eb == 0, 1, eb) - 126 - lz)
        # Below the normal range: shift right by 1 - exp (capped: past 26 everything is sticky).
        extra = Signal(range(27))
        with m.If(exp <= 0):
            m.d.comb += extra.eq(Mux(1 - exp > 26, 26, 1 - exp))
        wide = Signal(48 + 26)
        m.d.comb += wide.eq(Cat(C(0, 26), norm) >> extra)
        sig = wide[24 + 26:]                 # 24 bits kept
        guard = wide[23 + 26]
        sticky = wide[0:23 + 26] != 0
        up = guard & (sticky | sig[0])
        packed = Signal(33)
        m.d.comb += packed.eq(Mux(exp > 0, (exp - 1)[0:8].shift_left(23), 0) + sig + up)
        with m.If(a_nan | b_nan | (a_inf & b_zero) | (b_inf & a_zero)):
            m.d.comb += self.p.eq(NAN32)
        with m.Elif(a_inf | b_inf):
            m.d.comb += self.p.eq(Cat(C(0, 23), C(0xFF, 8), sign))
        with m.Elif(a_zero | b_zero):
            m.d.comb += self.p.eq(Cat(C(0, 31), sign))
        with m.Elif((exp >= 255) | (packed >= 0x7F800000)):
            m.d.comb += self.p.eq(Cat(C(0, 23), C(0xFF, 8), sign))
        with m.Else():
            m.d.comb += self.p.eq(Cat(packed[0:31], sign))
        return m


class Fp32Scale(wiring.Component):
    """A memory word of four FP32 values times ``alpha`` (four :class:`Fp32Mul`)."""

    def __init__(self):
        super().__init__({"word": In(WORD_BITS), "alpha": In(32), "out": Out(WORD_BITS)})

    def elaborate(self, platform):
        m = Module()
        for i in range(WORD_BITS // 32):
            m.submodules[f"mul{i}"] = mul = Fp32Mul()
            m.d.comb += [mul.a.eq(self.word[32 * i:32 * i + 32]), mul.b.eq(self.alpha),
                         self.out[32 * i:32 * i + 32].eq(mul.p)]
        return m


class Fp4Config(data.Struct):
    """Where the packed operands are, and the tensor-scale product.

    Word addresses of 128-bit words.  A's codes are M x K row-major, two per byte (element 2k
    in the low nibble); A's scales are M x K/block bytes, row-major.  B's codes are K x N
    row-major (B's own layout), B's scales K/block x N bytes: scale (kb, n) covers B[16 kb ..
    16 kb + 15, n] (32 for MXFP4).  Both operands are thus blocked along K, as NVIDIA's FP4
    GEMMs block them.  ``alpha`` is the FP32 product of the two tensor scales (1.0 for MXFP4).
    """

    a_codes: ADDR_BITS
    a_scales: ADDR_BITS
    b_codes: ADDR_BITS
    b_scales: ADDR_BITS
    alpha: 32
    mx: 1


class _DecodeWalk(NamedTuple):
    """The decode phase's state and addresses (:meth:`Fp4GemmTop._decode_walk`): region (0 =
    A, 1 = B), output word ``w``, B's element row ``k`` and word column ``j``, ``srow`` =
    (k >> block_shift) * N, the code word read."""
    region: Signal
    w: Signal
    k: Signal
    j: Signal
    srow: Signal
    code_word: Signal
    n_words: Signal
    n: Signal
    d_words: Signal
    block_mask: Value
    code_addr: Value
    scale_addr: Value
    dst_addr: Value
    words: Value


class Fp4GemmTop(wiring.Component):
    """The ``fp4gemm`` design: decode front end + GEMM top + tensor-scale epilogue.

    Set ``cfg`` (the GEMM; ``bf16`` and ``acc_f16`` are forced from ``fcfg.mx``: FP32
    accumulation, BF16 operands for MXFP4, FP16 for NVFP4) and ``fcfg``, pulse ``start``:

    1. *decode*: each 128-bit word of the FP16/BF16 A and B areas (``cfg.a_base``, ``b_base``)
       is made from 8 codes and their scales: read the code word, read the scale word, wait
       for them (the GEMM top's read data is two clocks late), write (4 clocks per word);
    2. *GEMM*: :class:`tcore.rtl.gemm.GemmTop` runs matmulT;
    3. *epilogue*: each word of D is read, multiplied by ``alpha`` (:class:`Fp32Scale`) and
       written back (3 clocks per word).

    ``done`` rises at the end; ``cycles`` counts all three phases, ``gemm_cycles`` and ``beats``
    the GEMM's.  The host port reaches the memory while the design is idle.  ``warps``,
    ``mem_words`` and ``lanes`` (64, 32 or 16 multipliers per core) are the GEMM top's.
    """

    #: The working memory is the GEMM top's (instance ``gemm``): the benches' load/dump hooks.
    BENCH_MEMORY = "gemm.mem"

    def __init__(self, *, warps: int = 1, mem_words: int = 32768, lanes: int = 64):
        self.gemm = GemmTop(warps=warps, mem_words=mem_words, lanes=lanes, sparse=False)
        super().__init__({
            "cfg": In(GemmConfig), "fcfg": In(Fp4Config), "start": In(1),
            "busy": Out(1), "done": Out(1), "cycles": Out(32), "gemm_cycles": Out(32),
            "beats": Out(32), "tiles_done": Out(2 * TILE_BITS),
            **host_port(mem_words),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.gemm = gemm = self.gemm
        m.submodules.dec = dec = Fp4Decoder(lanes=WORD_BITS // 16)
        m.submodules.scale = scale = Fp32Scale()

        cfg, fcfg = Signal(GemmConfig), Signal(Fp4Config)
        m.d.comb += [gemm.cfg.eq(cfg), self.host_rdata.eq(gemm.host_rdata),
                     self.tiles_done.eq(gemm.tiles_done), self.beats.eq(gemm.beats),
                     self.gemm_cycles.eq(gemm.cycles), dec.mx.eq(fcfg.mx),
                     scale.alpha.eq(fcfg.alpha)]
        addr, wdata, we = Signal.like(gemm.host_addr), Signal(WORD_BITS), Signal()
        running = Signal()
        with m.If(running):
            m.d.comb += [gemm.host_addr.eq(addr), gemm.host_wdata.eq(wdata), gemm.host_we.eq(we)]
        with m.Else():
            m.d.comb += [gemm.host_addr.eq(self.host_addr), gemm.host_wdata.eq(self.host_wdata),
                         gemm.host_we.eq(self.host_we)]

        walk = self._decode_walk(m, cfg, fcfg, dec, gemm.host_rdata)
        with m.If(running):
            m.d.sync += self.cycles.eq(self.cycles + 1)
        m.d.comb += self.busy.eq(running)

        with m.FSM():
            with m.State("IDLE"):
                with m.If(self.start):
                    m.d.sync += [cfg.eq(self.cfg), cfg.kind.eq(Mux(self.fcfg.mx, InputKind.BF16, InputKind.FP16)), cfg.acc_f16.eq(0),
                                 fcfg.eq(self.fcfg), running.eq(1), self.done.eq(0),
                                 self.cycles.eq(0), walk.region.eq(0), walk.w.eq(0),
                                 walk.k.eq(0), walk.j.eq(0), walk.srow.eq(0)]
                    m.next = "RD_CODE"
            with m.State("RD_CODE"):
                m.d.comb += addr.eq(walk.code_addr)
                m.next = "RD_SCALE"
            with m.State("RD_SCALE"):
                m.d.comb += addr.eq(walk.scale_addr)
                m.next = "RD_WAIT"
            with m.State("RD_WAIT"):       # the GEMM top's read data is two clocks late
                m.d.sync += walk.code_word.eq(gemm.host_rdata)
                m.next = "WR"
            with m.State("WR"):
                m.d.comb += [addr.eq(walk.dst_addr), wdata.eq(dec.values), we.eq(1)]
                self._step_decode(m, walk)
            with m.State("GEMM"):
                m.d.comb += gemm.start.eq(1)
                m.next = "GEMM_WAIT"
            with m.State("GEMM_WAIT"):
                with m.If(gemm.done & ~gemm.busy):
                    m.next = "EPI_RD"
            with m.State("EPI_RD"):
                m.d.comb += addr.eq(cfg.d_base + walk.w)
                m.next = "EPI_WAIT"
            with m.State("EPI_WAIT"):
                m.next = "EPI_WR"
            with m.State("EPI_WR"):
                m.d.comb += [scale.word.eq(gemm.host_rdata), addr.eq(cfg.d_base + walk.w),
                             wdata.eq(scale.out), we.eq(1)]
                with m.If(walk.w == walk.d_words - 1):
                    m.d.sync += [running.eq(0), self.done.eq(1)]
                    m.next = "IDLE"
                with m.Else():
                    m.d.sync += walk.w.eq(walk.w + 1)
                    m.next = "EPI_RD"
        return m

    @staticmethod
    def _decode_walk(m, cfg, fcfg, dec, sword):
        """The decode phase's counters and addresses (:class:`_DecodeWalk`), the decoder fed
        from the code word and ``sword``, the scale word read."""
        region = Signal()
        w = Signal(ADDR_BITS)
        k, j = Signal(TILE_BITS + 4), Signal(TILE_BITS + 1)
        srow = Signal(ADDR_BITS)
        code_word = Signal(WORD_BITS)
        a_words = Signal(ADDR_BITS)
        b_words = Signal(ADDR_BITS)
        d_words = Signal(ADDR_BITS)
        n_words = Signal(TILE_BITS + 1)    # words per row of B: N / 8
        n = Signal(TILE_BITS + 4)
        m.d.comb += [a_words.eq(cfg.tiles_m * cfg.steps * 32), b_words.eq(cfg.steps * cfg.tiles_n * 32),
                     d_words.eq(cfg.tiles_m * cfg.tiles_n * 64), n_words.eq(cfg.tiles_n * 2),
                     n.eq(cfg.tiles_n * 16)]
        block_mask = Mux(fcfg.mx, 31, 15)   # block size - 1
        # Scale index of the word's first element, and where the word's 8 scales sit.
        a_sidx = Signal(ADDR_BITS)
        m.d.comb += a_sidx.eq(Mux(fcfg.mx, w >> 2, w >> 1))
        b_sidx = Signal(ADDR_BITS)
        m.d.comb += b_sidx.eq(srow + (j << 3))
        code_addr = Mux(region, fcfg.b_codes, fcfg.a_codes) + (w >> 2)
        scale_addr = Mux(region, fcfg.b_scales + (b_sidx >> 4), fcfg.a_scales + (a_sidx >> 4))
        dst_addr = Mux(region, cfg.b_base, cfg.a_base) + w
        nib = Signal(32)
        m.d.comb += nib.eq(code_word.word_select(w[0:2], 32))
        scales = Signal(64)
        with m.If(region):
            m.d.comb += scales.eq(sword.word_select(b_sidx[3], 64))
        with m.Else():
            m.d.comb += scales.eq(Cat(*[sword.word_select(a_sidx[0:4], 8)] * 8))
        m.d.comb += [dec.codes.eq(nib), dec.scales.eq(scales)]
        words = Mux(region, b_words, a_words)
        return _DecodeWalk(region, w, k, j, srow, code_word, n_words, n, d_words, block_mask,
                           code_addr, scale_addr, dst_addr, words)

    @staticmethod
    def _step_decode(m, walk):
        """The WR state's step: the next output word and B's row/column counters; after the
        last word of A, B's first (state RD_CODE), after B's, the GEMM."""
        with m.If(walk.j == walk.n_words - 1):
            m.d.sync += [walk.j.eq(0), walk.k.eq(walk.k + 1)]
            with m.If(((walk.k + 1) & walk.block_mask) == 0):
                m.d.sync += walk.srow.eq(walk.srow + walk.n)
        with m.Else():
            m.d.sync += walk.j.eq(walk.j + 1)
        with m.If(walk.w == walk.words - 1):
            m.d.sync += [walk.w.eq(0), walk.region.eq(1), walk.k.eq(0), walk.j.eq(0), walk.srow.eq(0)]
            with m.If(walk.region):
                m.next = "GEMM"
            with m.Else():
                m.next = "RD_CODE"
        with m.Else():
            m.d.sync += walk.w.eq(walk.w + 1)
            m.next = "RD_CODE"
