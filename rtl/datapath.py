"""The pieces of one block fused dot-add: multiplier, exponent maximum, aligner, normaliser and
the two output packers.  All combinational; the core (:mod:`rtl.mma4`) places the registers.

Golden twin: :func:`golden.dot.fused_sum` and :func:`golden.dot.round_output`.

Fixed-point convention: a term is an integer multiple of ``2**(E - 25)`` (the Hopper grid), where
E is the block's exponent.  A product ``sig * 2**(exp - 20)`` (22-bit significand) becomes
``(sig << 5) >> (E - exp)``, below 2**27; an addend ``sig * 2**(exp - 23)`` becomes
``(sig << 2) >> (E - exp)``, below 2**26.  A right shift drops the bits below the grid, which is
the rule's truncation toward zero on the magnitude; the sign is applied afterwards.
"""

from amaranth import *
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from .formats import Addend, Operand

__all__ = ["GRID", "ACC_WIDTH", "E_NONE", "Product", "Multiplier", "ExpMax", "Aligner",
           "Normaliser", "PackFP32", "PackFP16"]

GRID = 25                       # F: terms are truncated to multiples of 2**(E - GRID)
PRODUCT_TERM_BITS = 27          # 22-bit product significand << 5
ADDEND_TERM_BITS = 26           # 24-bit addend significand << 2
ACC_WIDTH = 34                  # signed: 17 terms below 2**27 each, with room to spare
E_WIDTH = 11                    # signed block exponent; BF16 products reach +-254
E_NONE = -(1 << (E_WIDTH - 1))  # "no nonzero term": below every real exponent


class Product(data.Struct):
    """An exact, unnormalised product: value = (-1)**sign * sig * 2**(exp - 20)."""
    sig: 22
    exp: signed(10)
    sign: 1
    zero: 1
    inf: 1
    nan: 1


class Multiplier(wiring.Component):
    """Exact significand product and exponent sum of two :class:`Operand`s.

    The product is not renormalised (its nominal exponent is ``a.exp + b.exp``), and its
    special flags follow IEEE: Inf x 0 is NaN.
    """

    a: In(Operand)
    b: In(Operand)
    o: Out(Product)

    def elaborate(self, platform):
        m = Module()
        a, b, o = self.a, self.b, self.o
        nan = a.nan | b.nan | (a.inf & b.zero) | (b.inf & a.zero)
        m.d.comb += [
            o.sig.eq(a.sig * b.sig),
            o.exp.eq(a.exp + b.exp),
            o.sign.eq(a.sign ^ b.sign),
            o.zero.eq(a.zero | b.zero),
            o.nan.eq(nan),
            o.inf.eq((a.inf | b.inf) & ~nan),
        ]
        return m


class ExpMax(wiring.Component):
    """Maximum of ``n`` signed exponents, each with an enable (disabled inputs are ignored).

    Gives :data:`E_NONE` when no input is enabled.  A balanced tree of comparators.
    """

    def __init__(self, n: int):
        if n < 1:
            raise ValueError(f"ExpMax needs at least one input, not {n!r}")
        self._n = n
        super().__init__({
            "exp": In(signed(E_WIDTH)).array(n),
            "en": In(1).array(n),
            "o": Out(signed(E_WIDTH)),
        })

    @property
    def n(self):
        return self._n

    def elaborate(self, platform):
        m = Module()
        level = [Mux(en, e, E_NONE) for e, en in zip(self.exp, self.en)]
        while len(level) > 1:
            nxt = [Mux(x > y, x, y) for x, y in zip(level[0::2], level[1::2])]
            if len(level) % 2:
                nxt.append(level[-1])
            level = nxt
        m.d.comb += self.o.eq(level[0])
        return m


class Aligner(wiring.Component):
    """Shift a magnitude right by ``shift`` (dropping what falls below the grid), then sign it.

    Parameters
    ----------
    width : int
        Width of ``mag``; shifts of ``width`` or more give 0.

    Members
    -------
    mag : In(width)
    shift : In(unsigned)
        Saturated by the caller to at most ``width``.
    neg : In(1)
    o : Out(signed(width + 1))
    """

    def __init__(self, width: int):
        self._width = width
        self._shift_bits = width.bit_length()
        super().__init__({
            "mag": In(width),
            "shift": In(self._shift_bits),
            "neg": In(1),
            "o": Out(signed(width + 1)),
        })

    def elaborate(self, platform):
        m = Module()
        t = Signal(self._width)
        m.d.comb += t.eq(self.mag >> self.shift)
        m.d.comb += self.o.eq(Mux(self.neg, -t, t))
        return m


def saturate_shift(m, d, limit):
    """A signed distance ``d`` clamped into [0, limit] as an unsigned signal."""
    out = Signal(range(limit + 1))
    m.d.comb += out.eq(Mux(d < 0, 0, Mux(d > limit, limit, d)))
    return out


class Normaliser(wiring.Component):
    """Magnitude, sign and leading-one position of the accumulated sum.

    Members
    -------
    acc : In(signed(ACC_WIDTH))
    mag : Out(ACC_WIDTH - 1)
    neg : Out(1)
    msb : Out(range(ACC_WIDTH))
        Index of the leading one of ``mag`` (0 when ``mag`` is 0).
    """

    acc: In(signed(ACC_WIDTH))
    mag: Out(ACC_WIDTH - 1)
    neg: Out(1)
    msb: Out(range(ACC_WIDTH))

    def elaborate(self, platform):
        m = Module()
        m.d.comb += [
            self.neg.eq(self.acc < 0),
            self.mag.eq(Mux(self.acc < 0, -self.acc, self.acc)),
        ]
        # Leading-one detector as a binary search: log2(width) levels of muxes.
        x = self.mag
        width = len(x)
        levels = []
        step = 1 << (width - 1).bit_length()
        pos_bits = []
        cur = Cat(x, C(0, step - width))
        while step > 1:
            half = step // 2
            hi = cur[half:step]
            has_hi = hi != 0
            pos_bits.append(has_hi)
            nxt = Signal(half)
            m.d.comb += nxt.eq(Mux(has_hi, hi, cur[:half]))
            cur = nxt
            step = half
        m.d.comb += self.msb.eq(Cat(*reversed(pos_bits)))
        return m


class _Packer(wiring.Component):
    """The ports of both packers: value = (-1)**neg * mag * 2**(e - 25), ``msb`` the leading
    one of ``mag``, ``bits`` the result (FP16 in the low half)."""

    mag: In(ACC_WIDTH - 1)
    msb: In(range(ACC_WIDTH))
    neg: In(1)
    e: In(signed(E_WIDTH))
    bits: Out(32)


class PackFP32(_Packer):
    """Round toward zero to FP32: value = (-1)**neg * mag * 2**(e - 25).

    ``e`` is the block exponent E; ``msb`` the leading-one index of ``mag``.  Subnormal results
    are kept, magnitudes of 2**128 or more give Inf, zero gives +0.
    """

    def elaborate(self, platform):
        m = Module()
        ev = Signal(signed(E_WIDTH + 2))          # exponent of the leading one
        m.d.comb += ev.eq(self.e - GRID + self.msb)
        # Quantum of the result: 2**(ev - 23) when normal, 2**-149 when subnormal.
        # shift = quantum exponent - (e - 25): right when positive, left when negative.
        shift = Signal(signed(E_WIDTH + 2))
        m.d.comb += shift.eq(Mux(ev >= -126, self.msb - 23, -124 - self.e))
        right = saturate_shift(m, shift, ACC_WIDTH)
        sig = Signal(24)
        with m.If(shift >= 0):
            m.d.comb += sig.eq(self.mag >> right)
        with m.Else():
            m.d.comb += sig.eq(self.mag << (-shift)[:5])
        packed = Signal(32)
        m.d.comb += packed.eq(Mux(ev >= -126, (ev + 126)[:8].shift_left(23), 0) + sig)
        with m.If((self.mag == 0) | (packed == 0)):   # zero sum, or below the smallest subnormal: +0
            m.d.comb += self.bits.eq(0)
        with m.Elif(ev >= 128):
            m.d.comb += self.bits.eq(Cat(C(0, 23), C(0xFF, 8), self.neg))
        with m.Else():
            m.d.comb += self.bits.eq(Cat(packed[:31], self.neg))
        return m


class PackFP16(_Packer):
    """Round to nearest-even to FP16, once, from the exact sum: value = (-1)**neg * mag * 2**(e - 25).

    Overflow gives Inf, zero (also a nonzero sum that rounds to zero) gives +0.  The caller has
    already raised E to the FP16-output floor (-21), which bounds the shifts here.
    """

    def elaborate(self, platform):
        m = Module()
        ev = Signal(signed(E_WIDTH + 2))
        m.d.comb += ev.eq(self.e - GRID + self.msb)
        # Quantum 2**(ev - 10) when normal, 2**-24 when subnormal.
        shift = Signal(signed(E_WIDTH + 2))
        m.d.comb += shift.eq(Mux(ev >= -14, self.msb - 10, 1 - self.e))
        right = saturate_shift(m, shift, ACC_WIDTH)
        kept = Signal(ACC_WIDTH)
        rounded = Signal(ACC_WIDTH)
        with m.If(shift > 0):
            right1 = Signal(range(ACC_WIDTH + 1))
            m.d.comb += right1.eq(right - 1)
            guard = (self.mag >> right1)[0]
            below = Signal(ACC_WIDTH)
            m.d.comb += below.eq((Const(1, ACC_WIDTH) << right1) - 1)
            sticky = (self.mag & below) != 0
            m.d.comb += kept.eq(self.mag >> right)
            m.d.comb += rounded.eq(kept + (guard & (sticky | kept[0])))
        with m.Else():
            m.d.comb += kept.eq(self.mag << (-shift)[:5])
            m.d.comb += rounded.eq(kept)
        packed = Signal(ACC_WIDTH + 1)
        m.d.comb += packed.eq(Mux(ev >= -14, (ev + 14)[:6].shift_left(10), 0) + rounded)
        with m.If((self.mag == 0) | (packed == 0)):   # zero sum, or rounds to zero: +0
            m.d.comb += self.bits.eq(0)
        with m.Elif((ev >= 16) | (packed >= 0x7C00)):
            m.d.comb += self.bits.eq(Cat(C(0x7C00, 15), self.neg))
        with m.Else():
            m.d.comb += self.bits.eq(Cat(packed[:15], self.neg))
        return m
