"""MMA4: the pipelined 4x4x4 tensor-core step, D = A·B + C, 64 products per clock.

Golden twin: :func:`golden.mma.mma4`.
"""

from amaranth import *
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .datapath import (ACC_WIDTH, E_NONE, E_WIDTH, Aligner, ExpMax, Multiplier, Normaliser,
                       PackFP16, PackFP32, PRODUCT_TERM_BITS, ADDEND_TERM_BITS, saturate_shift)
from .formats import Unpack, UnpackAddend

__all__ = ["Beat", "DTile", "MMA4", "F16_FLOOR"]

F16_FLOOR = -21     # FP16-output mode: E is at least this (measured on the H200)
MAX_BEATS = 4       # a group fuses at most 4 beats: K = 16


class Beat(data.Struct):
    """One input beat of the MMA4 stream (1027 bits).

    Members
    -------
    a : 16 x 16 bits
        A[i][k] at index ``4*i + k``, FP16 or BF16.
    b : 16 x 16 bits
        B[k][j] at index ``4*k + j``.
    c : 16 x 32 bits
        C[i][j] at index ``4*i + j``: FP32, or FP16 in the low half.  Read on a group's first
        beat only.
    last : 1
        Ends a group.  A group is 1 to 4 consecutive beats fused into one block dot-add over
        all their products and C; a group also ends after its fourth beat.
    bf16 : 1
        A and B are BF16 (else FP16).
    acc_f16 : 1
        C and D are FP16, rounded to nearest-even with E floored at -21 (else FP32, rounded
        toward zero).  ``bf16`` and ``acc_f16`` are taken from a group's first beat.
    """

    a: data.ArrayLayout(16, 16)
    b: data.ArrayLayout(16, 16)
    c: data.ArrayLayout(32, 16)
    last: 1
    bf16: 1
    acc_f16: 1


DTile = data.ArrayLayout(32, 16)
"""One output: D[i][j] at index ``4*i + j``, FP32 bits or FP16 bits in the low half."""


def _stage(m, en, on, value):
    """A pipeline register under the global enable when ``on``, else a wire.

    ``value`` may be nested lists of values; the same structure comes back.
    """
    if isinstance(value, (list, tuple)):
        return [_stage(m, en, on, v) for v in value]
    if not on:
        return value
    shape = value.shape() if isinstance(value, data.View) else Value.cast(value).shape()
    reg = Signal(shape)
    with m.If(en):
        m.d.sync += reg.eq(value)
    return reg


class MMA4(wiring.Component):
    """Pipelined 4x4x4 MMA core with Hopper-exact block fusion: D = A·B + C, 64 FMA per clock.

    The core accepts one :class:`Beat` (A 4x4, B 4x4, C 4x4) per clock.  Beats are fused in
    groups (``last`` ends one): in **K=4 mode** every beat is its own group and gives one D 4x4
    per clock; in **fused K=16 mode** four consecutive beats carry the four 4-wide k slices of
    A (columns 4s..4s+3) and B (rows 4s..4s+3), C with the first, and give one D per 4 clocks.

    A group is one block fused dot-add (``docs/numerics.md``): the H200 aligns all 16 products
    and C of a WMMA step to ONE exponent E, so the core cannot align a beat before it has seen
    the whole group.  It therefore runs an *exponent-only pass* as beats arrive (unpack, add
    exponents, maximum over the group) while storing the raw beats in one of two group buffers;
    a complete group is then replayed through the full datapath (multiply, truncate to the
    2**(E-25) grid, add into a 34-bit fixed-point accumulator) and rounded once at the end.
    The two buffers let group g+1 arrive while group g is replayed, so the multipliers stay busy.

    Latency: with no stalls, D leaves ``latency`` = 4 + ``stages`` clocks after the cycle its
    group's last beat was accepted in K=4 mode, and ``latency + 3`` in fused K=16 mode (the
    replay of a group starts when it is complete).  Throughput: one beat, 64 products, per clock
    in every mode.

    Streams follow ``lib.stream`` rules; backpressure on ``o`` stalls the datapath without loss,
    and ``i.ready`` falls once both group buffers are full.

    Parameters
    ----------
    stages : int, 0..3
        Optional pipeline registers, added in this order: after the multipliers, after the
        normaliser, after the aligners.  More registers give a higher Fmax.

    Members
    -------
    i : In(stream.Signature(Beat))
    o : Out(stream.Signature(DTile))
    """

    def __init__(self, *, stages: int = 2):
        if stages not in (0, 1, 2, 3):
            raise ValueError(f"Pipeline stages must be 0, 1, 2 or 3, not {stages!r}")
        self._stages = stages
        super().__init__({
            "i": In(stream.Signature(Beat)),
            "o": Out(stream.Signature(DTile)),
        })

    @property
    def stages(self):
        return self._stages

    @property
    def latency(self):
        return self.latency_of(self._stages)

    @staticmethod
    def latency_of(stages: int) -> int:
        """K=4-mode latency of a core with ``stages`` optional registers (see the class doc)."""
        return 4 + stages

    def elaborate(self, platform):
        m = Module()
        en = Signal()
        m.d.comb += en.eq(~self.o.valid | self.o.ready)
        r_mul, r_norm, r_align = (self._stages >= 1, self._stages >= 2, self._stages >= 3)

        # ---- collector: exponent-only pass and two group buffers ----------------------------
        beat = self.i.payload
        wr, rd = Signal(), Signal()
        widx, ridx = Signal(2), Signal(2)
        full = [Signal(name=f"full{s}") for s in range(2)]
        buf_a = [[Signal(256, name=f"buf{s}_a{k}") for k in range(MAX_BEATS)] for s in range(2)]
        buf_b = [[Signal(256, name=f"buf{s}_b{k}") for k in range(MAX_BEATS)] for s in range(2)]
        buf_c = [Signal(512, name=f"buf{s}_c") for s in range(2)]
        buf_e = [Signal(data.ArrayLayout(signed(E_WIDTH), 16), name=f"buf{s}_e") for s in range(2)]
        buf_n = [Signal(2, name=f"buf{s}_n") for s in range(2)]
        buf_bf16 = [Signal(name=f"buf{s}_bf16") for s in range(2)]
        buf_f16 = [Signal(name=f"buf{s}_f16") for s in range(2)]

        first_in = widx == 0
        bf16_in = Mux(first_in, beat.bf16, Mux(wr, buf_bf16[1], buf_bf16[0]))
        f16_in = Mux(first_in, beat.acc_f16, Mux(wr, buf_f16[1], buf_f16[0]))
        m.d.comb += self.i.ready.eq(~Mux(wr, full[1], full[0]))
        accept = self.i.valid & self.i.ready

        ua, ub = self._unpackers(m, "xa", beat.a, bf16_in), self._unpackers(m, "xb", beat.b, bf16_in)
        uc = self._unpackers(m, "xc", beat.c, f16_in, UnpackAddend)
        beat_e = []
        for i in range(4):
            for j in range(4):
                mx = m.submodules[f"xmax{i}{j}"] = ExpMax(5)
                for k in range(4):
                    m.d.comb += [mx.exp[k].eq(ua[4 * i + k].exp + ub[4 * k + j].exp),
                                 mx.en[k].eq(~ua[4 * i + k].zero & ~ub[4 * k + j].zero)]
                m.d.comb += [mx.exp[4].eq(uc[4 * i + j].exp),
                             mx.en[4].eq(first_in & ~uc[4 * i + j].zero)]
                beat_e.append(mx.o)

        with m.If(accept):
            for s in range(2):
                with m.If(wr == s):
                    for k in range(MAX_BEATS):
                        with m.If(widx == k):
                            m.d.sync += [buf_a[s][k].eq(beat.a), buf_b[s][k].eq(beat.b)]
                    with m.If(first_in):
                        m.d.sync += [buf_c[s].eq(beat.c), buf_bf16[s].eq(beat.bf16),
                                     buf_f16[s].eq(beat.acc_f16)]
                        m.d.sync += [buf_e[s][x].eq(beat_e[x]) for x in range(16)]
                    with m.Else():
                        m.d.sync += [buf_e[s][x].eq(Mux(beat_e[x] > buf_e[s][x], beat_e[x], buf_e[s][x]))
                                     for x in range(16)]
                    with m.If(beat.last | (widx == MAX_BEATS - 1)):
                        m.d.sync += [full[s].eq(1), buf_n[s].eq(widx), wr.eq(~wr), widx.eq(0)]
                    with m.Else():
                        m.d.sync += widx.eq(widx + 1)

        # ---- replay: one beat of the oldest complete group per clock (stage 0 register) ------
        v0 = Signal()
        x_a, x_b, x_c = Signal(256), Signal(256), Signal(512)
        x_e = Signal(data.ArrayLayout(signed(E_WIDTH), 16))
        x_first, x_last, x_bf16, x_f16 = Signal(), Signal(), Signal(), Signal()
        rd_full = Mux(rd, full[1], full[0])
        rd_n = Mux(rd, buf_n[1], buf_n[0])
        rd_f16 = Mux(rd, buf_f16[1], buf_f16[0])
        with m.If(en):
            m.d.sync += v0.eq(rd_full)
            with m.If(rd_full):
                m.d.sync += [
                    x_a.eq(Array([Array(buf_a[0]), Array(buf_a[1])])[rd][ridx]),
                    x_b.eq(Array([Array(buf_b[0]), Array(buf_b[1])])[rd][ridx]),
                    x_c.eq(Mux(rd, buf_c[1], buf_c[0])),
                    x_first.eq(ridx == 0),
                    x_last.eq(ridx == rd_n),
                    x_bf16.eq(Mux(rd, buf_bf16[1], buf_bf16[0])),
                    x_f16.eq(rd_f16),
                ]
                for x in range(16):
                    e = Mux(rd, buf_e[1][x], buf_e[0][x])
                    m.d.sync += x_e[x].eq(Mux(rd_f16 & (e < F16_FLOOR), F16_FLOOR, e))
                with m.If(ridx == rd_n):
                    m.d.sync += [ridx.eq(0), rd.eq(~rd)]
                    for s in range(2):
                        with m.If(rd == s):
                            m.d.sync += full[s].eq(0)
                with m.Else():
                    m.d.sync += ridx.eq(ridx + 1)

        # ---- multiply: 64 exact products --------------------------------------------------
        pa = self._unpackers(m, "ua", data.View(data.ArrayLayout(16, 16), x_a), x_bf16)
        pb = self._unpackers(m, "ub", data.View(data.ArrayLayout(16, 16), x_b), x_bf16)
        pc = self._unpackers(m, "uc", data.View(data.ArrayLayout(32, 16), x_c), x_f16, UnpackAddend)
        prods = []
        for i in range(4):
            for j in range(4):
                for k in range(4):
                    mul = m.submodules[f"mul{i}{j}{k}"] = Multiplier()
                    m.d.comb += [mul.a.eq(pa[4 * i + k]), mul.b.eq(pb[4 * k + j])]
                    prods.append(mul.o)
        ctl = [v0, x_first, x_last, x_f16]
        st = _stage(m, en, r_mul, [prods, list(pc), [x_e[x] for x in range(16)], ctl])
        prods, addends, exps, (v1, first1, last1, f16_1) = st

        # ---- align: truncate every term to the 2**(E-25) grid --------------------------------
        terms, nan_b, pinf_b, ninf_b = [], [], [], []
        for x in range(16):
            e = exps[x]
            for k in range(4):
                p = prods[4 * x + k]
                al = m.submodules[f"align{x}_{k}"] = Aligner(PRODUCT_TERM_BITS)
                m.d.comb += [al.mag.eq(p.sig.shift_left(5)), al.neg.eq(p.sign),
                             al.shift.eq(saturate_shift(m, e - p.exp, PRODUCT_TERM_BITS))]
                terms.append(al.o)
            c = addends[x]
            al = m.submodules[f"align{x}_c"] = Aligner(ADDEND_TERM_BITS)
            m.d.comb += [al.mag.eq(Mux(first1, c.sig.shift_left(2), 0)), al.neg.eq(c.sign),
                         al.shift.eq(saturate_shift(m, e - c.exp, ADDEND_TERM_BITS))]
            terms.append(al.o)
            ps = prods[4 * x:4 * x + 4]
            nan_b.append(Cat(*(p.nan for p in ps), first1 & c.nan).any())
            pinf_b.append(Cat(*(p.inf & ~p.sign for p in ps), first1 & c.inf & ~c.sign).any())
            ninf_b.append(Cat(*(p.inf & p.sign for p in ps), first1 & c.inf & c.sign).any())
        st = _stage(m, en, r_align, [terms, nan_b, pinf_b, ninf_b, exps, [v1, first1, last1, f16_1]])
        terms, nan_b, pinf_b, ninf_b, exps, (v2, first2, last2, f16_2) = st

        # ---- add: one fixed-point accumulator per output, exact ------------------------------
        acc = [Signal(signed(ACC_WIDTH), name=f"acc{x}") for x in range(16)]
        acc_nan = [Signal(name=f"acc_nan{x}") for x in range(16)]
        acc_pinf = [Signal(name=f"acc_pinf{x}") for x in range(16)]
        acc_ninf = [Signal(name=f"acc_ninf{x}") for x in range(16)]
        acc_e = [Signal(signed(E_WIDTH), name=f"acc_e{x}") for x in range(16)]
        v3, f16_3 = Signal(), Signal()
        with m.If(en):
            m.d.sync += [v3.eq(v2 & last2), f16_3.eq(f16_2)]
            with m.If(v2):
                for x in range(16):
                    beat_sum = sum(terms[5 * x:5 * x + 5])
                    with m.If(first2):
                        m.d.sync += [acc[x].eq(beat_sum), acc_nan[x].eq(nan_b[x]),
                                     acc_pinf[x].eq(pinf_b[x]), acc_ninf[x].eq(ninf_b[x])]
                    with m.Else():
                        m.d.sync += [acc[x].eq(acc[x] + beat_sum),
                                     acc_nan[x].eq(acc_nan[x] | nan_b[x]),
                                     acc_pinf[x].eq(acc_pinf[x] | pinf_b[x]),
                                     acc_ninf[x].eq(acc_ninf[x] | ninf_b[x])]
                    m.d.sync += acc_e[x].eq(exps[x])

        # ---- normalise ---------------------------------------------------------------------
        norm = []
        for x in range(16):
            nm = m.submodules[f"norm{x}"] = Normaliser()
            m.d.comb += nm.acc.eq(acc[x])
            norm.append([nm.mag, nm.msb, nm.neg, acc_e[x], acc_nan[x] | (acc_pinf[x] & acc_ninf[x]),
                         acc_pinf[x], acc_ninf[x]])
        norm, (v4, f16_4) = _stage(m, en, r_norm, [norm, [v3, f16_3]])

        # ---- round and pack, specials, output register -------------------------------------
        out = Signal(DTile)
        for x in range(16):
            mag, msb, neg, e, nan, pinf, ninf = norm[x]
            p32 = m.submodules[f"pack32_{x}"] = PackFP32()
            p16 = m.submodules[f"pack16_{x}"] = PackFP16()
            for p in (p32, p16):
                m.d.comb += [p.mag.eq(mag), p.msb.eq(msb), p.neg.eq(neg), p.e.eq(e)]
            with m.If(nan):
                m.d.comb += out[x].eq(Mux(f16_4, 0x7FFF, 0x7FFFFFFF))
            with m.Elif(pinf):
                m.d.comb += out[x].eq(Mux(f16_4, 0x7C00, 0x7F800000))
            with m.Elif(ninf):
                m.d.comb += out[x].eq(Mux(f16_4, 0xFC00, 0xFF800000))
            with m.Else():
                m.d.comb += out[x].eq(Mux(f16_4, p16.bits, p32.bits))
        with m.If(en):
            m.d.sync += [self.o.valid.eq(v4), self.o.payload.eq(out)]
        return m

    @staticmethod
    def _unpackers(m, prefix, elems, flag, cls=Unpack):
        """16 unpackers of ``cls`` on ``elems``; ``flag`` is their format select input."""
        outs = []
        for x in range(16):
            u = m.submodules[f"{prefix}{x}"] = cls()
            m.d.comb += [u.bits.eq(elems[x]), (u.bf16 if cls is Unpack else u.f16).eq(flag)]
            outs.append(u.o)
        return outs
