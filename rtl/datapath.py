"""The pieces of one block fused dot-add as the pipelined core (:mod:`tcore.rtl.mma4`) uses them:
biased exponents, the DSP multiplier with its registers, the product and addend aligners, the
adders with negation through carry-ins, a tree leading-zero count and the one normalise /
round / pack unit for both output formats.

Golden twin: :func:`tcore.golden.dot.fused_sum` and :func:`tcore.golden.dot.round_output`.

Exponents are *biased* and unsigned: an operand's exponent ``u`` is its nominal exponent + 127
(FP16 and BF16 alike), a product's ``pe = ua + ub`` is nominal + 254 (0 marks a zero product),
an addend's likewise nominal + 254, and the block exponent E the largest of them (9 bits).

Fixed point: a term is an integer multiple of ``2**(E - GRID)`` (Hopper: GRID = 25).  A
product ``P * 2**(pe - 254 - 20)`` (P the 22-bit exact significand product) becomes
``(P << 5) >> (E - pe)``, below 2**27; an addend ``sig * 2**(pe - 254 - 23)`` becomes
``(sig << 2) >> (E - pe)``, below 2**26.  The right shift drops the bits below the grid: the
rule's truncation toward zero on the magnitude; the sign is applied afterwards, as a ones'
complement whose +1 rides on an adder's carry-in.
"""

from amaranth import *
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from tcore.numerics import HOPPER

from .formats import FP16, FP32, Special

__all__ = ["GRID", "F16_FLOOR", "FP8_TRUNC_BITS", "FP8_CUT", "coarse", "EXP_BIAS", "E_WIDTH", "ACC_WIDTH", "PRODUCT_SHIFT", "ADDEND_SHIFT", "PRODUCT_TERM_BITS", "PAIR_BITS",
           "ADDEND_TERM_BITS", "E_F16_FLOOR", "Multiplier", "dsp_operands", "product_term",
           "addend_shift", "extend", "add_cin", "leading_zeros", "ClampDecode", "RoundPack"]

_STEP = HOPPER.step("fp16")
GRID = _STEP.grid               # F: terms are truncated to multiples of 2**(E - GRID)
# FP8 inputs truncate on a coarser grid, 2**(E - 13): the low GRID - 13 bits of every term
# (a multiple of 2**(E - GRID)) are cleared; truncating twice toward zero is truncating once.
FP8_TRUNC_BITS = GRID - HOPPER.step("fp8").grid
FP8_CUT = HOPPER.step("fp8").fp32_cut
F16_FLOOR = _STEP.f16_floor     # FP16-output mode: E is at least this
EXP_BIAS = 254                  # a biased product / block exponent is nominal + 254
E_WIDTH = 9                     # biased exponents: 0 (no nonzero term) .. 510
E_F16_FLOOR = F16_FLOOR + EXP_BIAS
PRODUCT_SHIFT = GRID - 20       # a 22-bit product significand has 20 fraction bits
ADDEND_SHIFT = GRID - 23        # a 24-bit addend significand has 23
PRODUCT_TERM_BITS = 22 + PRODUCT_SHIFT
ADDEND_TERM_BITS = 24 + ADDEND_SHIFT
#: A sum of two signed product terms (the first adder level): term bits, a sign and a carry.
PAIR_BITS = PRODUCT_TERM_BITS + 2
# Signed: 17 terms below 2**27 each, or an INT8 group's S32 C and 32 products below 2**15.
ACC_WIDTH = 34
# The result's LSB sits at bit 9 (FP32) or 22 (FP16) of the normalised 33-bit magnitude; the
# left shift that puts it at the smallest subnormal quantum is E_nom + CLAMP.
F32_CLAMP = 149 + 9 - GRID
F16_CLAMP = 24 + 22 - GRID
# The DSP operands carry the fine part of a product's shift (see dsp_operands).
DSP_A_BITS, DSP_B_BITS, DSP_P_BITS = 14, 15, 29


class Multiplier(wiring.Component):
    """An unsigned DSP multiplier with its input, pipeline and output registers: ``p`` is
    ``a * b`` of three clocks before.  Throughput one product per clock.

    ``arch="generic"`` writes ``*`` between registers (any simulator, any target);
    ``arch="ecp5"`` instantiates an ECP5 ``MULT18X18D`` with its three register stages on, which
    Yosys does not infer from fabric registers.
    """

    LATENCY = 3

    def __init__(self, a_bits=DSP_A_BITS, b_bits=DSP_B_BITS, *, arch="generic"):
        if arch not in ("generic", "ecp5"):
            raise ValueError(f"Multiplier arch must be 'generic' or 'ecp5', not {arch!r}")
        if arch == "ecp5" and max(a_bits, b_bits) > 18:
            raise ValueError("MULT18X18D operands are at most 18 bits")
        self._arch = arch
        super().__init__({"a": In(a_bits), "b": In(b_bits), "p": Out(a_bits + b_bits)})

    def elaborate(self, platform):
        m = Module()
        if self._arch == "generic":
            a1 = Signal.like(self.a, reset_less=True)
            b1 = Signal.like(self.b, reset_less=True)
            p2 = Signal.like(self.p, reset_less=True)
            p3 = Signal.like(self.p, reset_less=True)
            m.d.sync += [a1.eq(self.a), b1.eq(self.b), p2.eq(a1 * b1), p3.eq(p2)]
            m.d.comb += self.p.eq(p3)
            return m
        p = Signal(36)
        ports = {f"i_A{n}": self.a[n] if n < len(self.a) else C(0, 1) for n in range(18)}
        ports.update({f"i_B{n}": self.b[n] if n < len(self.b) else C(0, 1) for n in range(18)})
        ports.update({f"i_C{n}": C(0, 1) for n in range(18)})
        ports.update({f"o_P{n}": p[n] for n in range(36)})
        m.submodules.dsp = Instance(
            "MULT18X18D",
            p_REG_INPUTA_CLK="CLK0", p_REG_INPUTB_CLK="CLK0", p_REG_PIPELINE_CLK="CLK0",
            p_REG_OUTPUT_CLK="CLK0", p_GSR="DISABLED", p_RESETMODE="SYNC",
            i_SIGNEDA=C(0, 1), i_SIGNEDB=C(0, 1), i_SOURCEA=C(0, 1), i_SOURCEB=C(0, 1),
            i_CLK0=ClockSignal(), i_CLK1=C(0, 1), i_CLK2=C(0, 1), i_CLK3=C(0, 1),
            i_CE0=C(1, 1), i_CE1=C(0, 1), i_CE2=C(0, 1), i_CE3=C(0, 1),
            i_RST0=C(0, 1), i_RST1=C(0, 1), i_RST2=C(0, 1), i_RST3=C(0, 1),
            **ports)
        m.d.comb += self.p.eq(p[:len(self.p)])
        return m


def dsp_operands(sig_a, sig_b, d):
    """Split a product's right shift ``d`` (0..31) between the DSP and one fabric mux.

    ``d = 8q + r``: the DSP computes ``Q = (sig_a << s_a) * (sig_b << 4 s_b) = P << (7 - r)``
    (``7 - r = 4 s_b + s_a``; 14- and 15-bit operands, so a 4:1 and a 2:1 mux), and
    :func:`product_term` shifts Q right by ``8q + 7 - PRODUCT_SHIFT``: a 4:1 mux.  Returns
    ``(a, b, q)``.
    """
    s = ~d[0:3]                                      # 7 - r
    a = Mux(s[1], Mux(s[0], sig_a << 3, sig_a << 2), Mux(s[0], sig_a << 1, sig_a))
    b = Mux(s[2], sig_b << 4, sig_b)
    return a[:DSP_A_BITS], b[:DSP_B_BITS], d[3:5]


def coarse(t, fp8, wide=C(0, 1), base: int = 0):
    """``t`` with its low :data:`FP8_TRUNC_BITS` bits cleared where ``fp8`` (the FP8 grid), and
    its low ``base`` bits where ``wide`` (the FP16/BF16 step of a generation whose grid is
    ``GRID - base``: Ampere 1, Volta 2)."""
    keep = Cat(~(fp8 | wide).replicate(base), ~fp8.replicate(FP8_TRUNC_BITS - base))
    return t & Cat(keep, C(-1, len(t) - FP8_TRUNC_BITS))     # reads t once


def product_term(q_prod, q, neg, fp8=C(0, 1), wide=C(0, 1), drop: int = 0):
    """The aligned product term in ones' complement: ``(Q >> (8q + 7 - PRODUCT_SHIFT)) ^ neg``
    (``PRODUCT_TERM_BITS`` wide, and a sign bit), on the FP8 grid where ``fp8``; the +1 of a
    negative term is the caller's carry-in; where ``wide``, the low ``drop`` bits are cleared too
    (:func:`coarse`).  The XOR shares the mux's LUTs."""
    base = 7 - PRODUCT_SHIFT
    opts = [q_prod[base + 8 * n:][:PRODUCT_TERM_BITS] for n in range(4)]
    t = coarse(Mux(q[1], Mux(q[0], opts[3], opts[2]), Mux(q[0], opts[1], opts[0])), fp8, wide, drop)
    return Cat(t ^ neg.replicate(PRODUCT_TERM_BITS), neg).as_signed()


def addend_shift(m, mag, d, level):
    """One level of the addend's two-level right shift: ``level`` 0 shifts by ``8 * d[3:5]``
    (4:1 mux), level 1 by ``d[0:3]`` (8:1 mux)."""
    out = Signal(len(mag))
    if level == 0:
        m.d.comb += out.eq(Array([mag >> (8 * n) for n in range(4)])[d[3:5]])
    else:
        m.d.comb += out.eq(mag >> d[0:3])
    return out


def extend(v, width):
    """``v`` sign- or zero-extended (by its own signedness) or cut to ``width`` bits."""
    # An OR with a zero constant extends ``v`` by its shape, as a Cat of copies of ``v[-1]``
    # would, but reads ``v`` once: Amaranth builds an expression again for each read.
    return (Value.cast(v) | C(0, width))[:width]


def add_cin(a, b, cin, width):
    """``a + b + cin`` modulo 2**width (signed result) as one carry chain: the carry-in rides
    in an extra low bit, ``Cat(1, a) + Cat(cin, b)``."""
    ax = Cat(C(1, 1), extend(a, width))
    bx = Cat(cin, extend(b, width))
    return (ax + bx)[1:width + 1].as_signed()


def leading_zeros(m, x):
    """Leading-zero count of ``x`` (MSB = ``x[-1]``) as a tree of 2:1 merges, log2 levels deep;
    ``len(x)`` when ``x`` is 0."""
    n = len(x)
    size = 1 << (n - 1).bit_length()
    # Pad below the LSB with ones: the count of a nonzero x is unchanged, and 0 counts n.
    w = Cat(C((1 << (size - n)) - 1, size - n), x) if size > n else x

    def tree(bits):             # -> (all zero, count of leading zeros below the width)
        if len(bits) == 2:                # a leaf: no zero-width counts
            return ~bits[1] & ~bits[0], ~bits[1]
        half = len(bits) // 2
        zl, cl = tree(bits[:half])      # low half
        zh, ch = tree(bits[half:])      # high half
        z = Signal()                    # a signal: read three times by the next level up
        m.d.comb += z.eq(zh & zl)
        return z, Cat(Mux(zh, cl, ch), zh)

    _, count = tree(w)
    out = Signal(range(size + 1))
    m.d.comb += out.eq(count)
    return out


class ClampDecode(data.Struct):
    """What the rounder's first stage reads of the clamp F (:meth:`RoundPack.clamp_decode`):
    it depends on F and the kind only, which a group knows long before its sum, so that the
    caller can compute it stages ahead and register it (the core does, at L8 -> N0)."""

    marker: ACC_WIDTH - 1           # the one bit at the clamp that stops the leading-zero count
    f_eff: E_WIDTH + 1              # F, or F' = F + 8k of a low clamp (0..7)
    low: 1                          # an FP32 clamp below 0: the value is cut by 8k bits
    right: 3                        # that right shift by 8k, one-hot (k = 1, 2, 3; none: all gone)


class RoundPack(wiring.Component):
    """The one normalise / round / pack unit of an output, FP32 and FP16 alike.

    value = ``acc * 2**(e - EXP_BIAS - GRID)``; ``e`` is the block's biased exponent (already
    raised to the FP16 floor in FP16 mode).  ``bits`` is the value rounded toward zero to FP32,
    or to nearest-even once to FP16 (low half): every zero is +0, overflow gives Inf,
    ``special`` (:class:`tcore.rtl.formats.Special`) overrides with the canonical value.

    How: the magnitude is shifted left to put its leading one at bit 32, the shift clamped where
    the result is subnormal (a marker bit at the clamp stops the leading-zero count), so that
    the result's significand is a fixed field: bits 32..9 (FP32, RZ: a field select) or 32..22
    with guard bit 21 and sticky 20..0 (FP16, RNE).  The exponent field is then ``F - L``
    (F = the clamp, L = the shift), added to the significand so that its hidden bit and a
    rounding carry step the exponent.  FP32 results below 2**-126 whose E leaves the clamp
    negative are first cut by a multiple of 8 bits (RZ: truncation).

    The clamp arrives decoded (``clamp``, :class:`ClampDecode`, from :meth:`clamp_decode` of F
    and ``int8``), so that no compare or shift of F sits between the caller's registers and N1.

    Latency: ``STAGES`` clocks with ``pipelined`` (input to ``bits``, registers N1..N5; ``bits``
    is combinational after the last, for the caller's output memory), 0 without.  Throughput
    one value per clock.
    """

    STAGES = 5

    acc: In(signed(ACC_WIDTH))
    clamp: In(ClampDecode)          # clamp_decode of F: e - 233 (FP16 out) or e - 121 (FP32 out)
    f16: In(1)
    special: In(Special)
    cut13: In(1)                    # FP32 out: then cut to 13 fraction bits (FP8 inputs)
    int8: In(1)                     # acc is an integer result: pass it as S32 bits
    sat: In(1)                      # ... clamped to the S32 range (else wrapped)
    bits: Out(32)

    def __init__(self, *, pipelined=True):
        self._pipelined = pipelined
        super().__init__()

    @staticmethod
    def clamp_of(e, f16):
        """F from the biased block exponent: the left shift that puts the LSB of the result
        at the smallest subnormal quantum (2**-24 FP16, 2**-149 FP32)."""
        return (e - Mux(f16, EXP_BIAS - F16_CLAMP, EXP_BIAS - F32_CLAMP))[:E_WIDTH + 1].as_signed()

    @staticmethod
    def clamp_decode(f, int8):
        """The :class:`ClampDecode` value of the clamp F (signed, ``E_WIDTH + 1`` bits) for a
        float (``int8`` 0) or integer (1) result.  An FP32 clamp below 0 (E_nom < -133) needs
        no leading-zero count: the value is cut by 8k bits, k = ceil(-F/8), leaving F' = F + 8k
        in 0..7 and at least 8 leading zeros, so L = F' (and the exponent field is 0)."""
        W = ACC_WIDTH - 1
        low = (f < 0) & ~int8
        k = (~f[3:5] + 1)[:2]
        f_eff = Mux(low, f[0:3], f)[:E_WIDTH + 1]
        gone = f < -24                                  # every bit lies below 2**-149
        # (A low clamp's marker is never read: its L is F'.  So the marker needs F, not F'.)
        marker = Mux(f < W, Const(1 << (W - 1), W) >> f[:6], 0)
        right = Cat(*(low & ~gone & (k == n) for n in (1, 2, 3)))
        return Cat(marker, f_eff, low, right)

    def _reg(self, m, value, name):
        sig = Signal(value.shape(), name=name, reset_less=True)
        if self._pipelined:
            m.d.sync += sig.eq(value)
        else:
            m.d.comb += sig.eq(value)
        return sig

    def elaborate(self, platform):
        m = Module()
        W = ACC_WIDTH - 1                               # magnitude bits: 33, MSB at 32
        acc, cl = self.acc, self.clamp

        # N1: the magnitude, and the clamp's decode (marker, F or F', the low clamp's shift).
        neg = acc[-1]
        mag = Mux(neg, -acc, acc)[:W]
        # An integer result (INT8 inputs: acc = C + the exact products) replaces ``mag`` at N2,
        # with no shift: S32 bits, wrapped, or clamped when the top three bits disagree.
        top = acc[31:ACC_WIDTH]
        over = ~acc[-1] & (top != 0)
        under = acc[-1] & (top != 0b111)
        s32 = Mux(self.sat & over, 0x7FFF_FFFF, Mux(self.sat & under, 0x8000_0000, acc[:32]))
        n1 = [self._reg(m, v, f"n1_{i}") for i, v in enumerate(
            [mag, s32, cl.marker, cl.f_eff, cl.low, cl.right, neg, self.f16, self.special,
             self.cut13, self.int8])]
        mag1, s32_1, marker1, f1, low1, right1, neg1, f16_1, sp1, c13_1, int_1 = n1

        # N2: the left shift L = min(leading zeros, F) by the marker (none for an integer),
        # counted per byte: the probe with seven ones below it is five bytes from the top, and
        # each byte's count of leading zeros is its own 8-bit tree.
        probe1 = mag1 | marker1
        mag1 = Mux(int_1, s32_1, mag1)
        padded = Cat(C(0x7F, 7), probe1)
        chunks = [padded[40 - 8 * (c + 1):40 - 8 * c] for c in range(5)]
        nz = Cat(*(ch.any() | (int_1 if c == 0 else 0) for c, ch in enumerate(chunks)))
        cnt = [Mux(int_1, 0, leading_zeros(m, ch)[:3]) for ch in chunks]
        n2 = [self._reg(m, v, f"n2_{i}") for i, v in enumerate(
            [mag1, nz, Cat(*cnt), f1, low1, right1, neg1, f16_1, sp1, c13_1, int_1])]
        mag2, nz2, cnt2, f2, low2, right2, neg2, f16_2, sp2, c13_2, int_2 = n2

        # N3: the shift's coarse level, one-hot: left by 8c for the leading nonzero byte c (the
        # last one always has a bit), or right by 8k for a low clamp; the fine count (that
        # byte's, or F'); and the exponent field base F - L.
        pick = Signal(5)        # a signal: each select is read by every bit of the shift
        m.d.comb += pick.eq(Cat(*(~low2 & nz2[c] & ~nz2[:c].any() if c else ~low2 & nz2[0]
                                  for c in range(5))))
        y, fine = C(0, W), C(0, 3)
        for c in range(5):
            y = y | (pick[c].replicate(W) & (mag2 << (8 * c))[:W])
            fine = fine | (pick[c].replicate(3) & cnt2[3 * c:3 * c + 3])
        for n in (1, 2, 3):
            y = y | (right2[n - 1].replicate(W) & (mag2 >> (8 * n)))
        fine = Mux(low2, f2[0:3], fine)
        idx = Cat(pick[1] | pick[3], pick[2] | pick[3], pick[4])
        base = (f2 - Cat(fine, idx))[:E_WIDTH + 1]
        n3 = [self._reg(m, v, f"n3_{i}") for i, v in enumerate(
            [y, fine, base, neg2, f16_2, sp2, c13_2, int_2])]
        y3, l3, base3, neg3, f16_3, sp3, c13_3, int_3 = n3

        # N4: the fine level.
        z = (y3 << l3)[:W]
        n4 = [self._reg(m, v, f"n4_{i}") for i, v in enumerate(
            [z, base3, neg3, f16_3, sp3, c13_3, int_3])]
        z4, base4, neg4, f16_4, sp4, c13_4, int_4 = n4

        # N5: guard, sticky and what overflow and zero need, ahead of the packing add.  The
        # FP8 cut clears the 10 low fraction bits (RZ again: no carry), before the zero test.
        s32, s16 = z4[9:33], z4[22:33]
        s32 = Mux(c13_4, Cat(C(0, 23 - FP8_CUT), s32[23 - FP8_CUT:]), s32)
        guard, sticky = z4[21], z4[0:21].any()
        up = f16_4 & guard & (sticky | s16[0])
        # base > 0 means a normal result, whose hidden bit is in the field: S = 0 is a zero.
        sig_zero = Mux(f16_4, s16 == 0, s32 == 0)
        ovf_now = Mux(f16_4, base4 >= 30, base4 >= 254)
        ovf_up = f16_4 & (base4 == 29) & (s16 == 0x7FF)
        n5 = [self._reg(m, v, f"n5_{i}") for i, v in enumerate(
            [s32, base4, up, sig_zero, ovf_now, ovf_up, neg4, f16_4, sp4, z4[0:9], int_4])]
        self._pack(m, *n5)
        return m

    def _pack(self, m, s32_5, base5, up5, zero5, ovf5, ovfu5, neg5, f16_5, sp5, low5, int_5):
        """Pack: exponent base + significand (+ the rounding carry), then zero, Inf and
        specials (combinational, after N5)."""
        packed = add_cin(Mux(f16_5, base5 << 10, base5 << 23)[:31],
                         Mux(f16_5, s32_5[13:24], s32_5), up5, 31)
        zero = zero5 & ~up5
        ovf = ovf5 | (ovfu5 & up5)
        with m.Switch(sp5):
            with m.Case(Special.NAN):
                m.d.comb += self.bits.eq(Mux(f16_5, FP16.canonical_nan, FP32.canonical_nan))
            with m.Case(Special.POS_INF):
                m.d.comb += self.bits.eq(Mux(f16_5, FP16.pos_inf, FP32.pos_inf))
            with m.Case(Special.NEG_INF):
                m.d.comb += self.bits.eq(Mux(f16_5, FP16.neg_inf, FP32.neg_inf))
            with m.Default():
                with m.If(int_5):
                    m.d.comb += self.bits.eq(Cat(low5, s32_5)[:32])
                with m.Elif(zero):
                    m.d.comb += self.bits.eq(0)
                with m.Elif(ovf):
                    m.d.comb += self.bits.eq(Mux(f16_5, Mux(neg5, FP16.neg_inf, FP16.pos_inf),
                                                 Mux(neg5, FP32.neg_inf, FP32.pos_inf)))
                with m.Elif(f16_5):
                    m.d.comb += self.bits.eq(Cat(packed[:15], neg5))
                with m.Else():
                    m.d.comb += self.bits.eq(Cat(packed[:31], neg5))
