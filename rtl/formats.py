"""Bit formats as ``lib.data`` layouts, and the unpackers that turn them into datapath operands.

Golden twin: :mod:`golden.formats`.

Layouts are listed LSB first, as the bit patterns are.  The unpackers map both 16-bit input
formats (FP16, BF16) onto one operand shape, :class:`Operand`, so that the rest of the datapath
is format-agnostic: an 11-bit significand with 10 fraction bits (a BF16 significand is shifted
left by 3) and a signed nominal exponent wide enough for BF16.  The accumulator formats (FP32,
FP16) map onto :class:`Addend` the same way (24-bit significand, 23 fraction bits).
"""

from amaranth import *
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["FP16Bits", "BF16Bits", "FP32Bits", "FP16", "FP32", "Operand", "Addend", "Unpack",
           "UnpackAddend"]


class FP16Bits(data.Struct):
    fraction: 10
    exponent: 5
    sign: 1


class BF16Bits(data.Struct):
    fraction: 7
    exponent: 8
    sign: 1


class FP32Bits(data.Struct):
    fraction: 23
    exponent: 8
    sign: 1


class FP32:
    """FP32 constants: exponent bias and the special results the core produces."""
    bias = 127
    canonical_nan = 0x7FFF_FFFF       # the NaN every Hopper MMA returns, FP32 out
    pos_inf = 0x7F80_0000
    neg_inf = 0xFF80_0000


class FP16:
    """FP16 constants: exponent bias and the special results the core produces."""
    bias = 15
    canonical_nan = 0x7FFF
    pos_inf = 0x7C00
    neg_inf = 0xFC00


class Operand(data.Struct):
    """An unpacked FP16/BF16 input: value = (-1)**sign * sig * 2**(exp - 10)."""
    sig: 11
    exp: signed(9)     # nominal exponent: subnormals take the minimum normal exponent
    sign: 1
    zero: 1
    inf: 1
    nan: 1


class Addend(data.Struct):
    """An unpacked FP32/FP16 accumulator value: value = (-1)**sign * sig * 2**(exp - 23)."""
    sig: 24
    exp: signed(9)
    sign: 1
    zero: 1
    inf: 1
    nan: 1


def _classify(m, o, exponent, fraction, top):
    m.d.comb += [
        o.zero.eq((exponent == 0) & (fraction == 0)),
        o.inf.eq((exponent == top) & (fraction == 0)),
        o.nan.eq((exponent == top) & (fraction != 0)),
    ]


class Unpack(wiring.Component):
    """FP16 or BF16 bits to an :class:`Operand`.  Combinational.

    Members
    -------
    bits : In(16)
    bf16 : In(1)
        Read ``bits`` as BF16 instead of FP16.
    o : Out(Operand)
    """

    bits: In(16)
    bf16: In(1)
    o: Out(Operand)

    def elaborate(self, platform):
        m = Module()
        h = FP16Bits(self.bits)
        b = BF16Bits(self.bits)
        o = self.o
        m.d.comb += o.sign.eq(self.bits[15])
        with m.If(self.bf16):
            m.d.comb += [
                o.sig.eq(Cat(C(0, 3), b.fraction, b.exponent != 0)),
                o.exp.eq(Mux(b.exponent == 0, 1, b.exponent) - 127),
            ]
            _classify(m, o, b.exponent, b.fraction, 0xFF)
        with m.Else():
            m.d.comb += [
                o.sig.eq(Cat(h.fraction, h.exponent != 0)),
                o.exp.eq(Mux(h.exponent == 0, 1, h.exponent) - 15),
            ]
            _classify(m, o, h.exponent, h.fraction, 0x1F)
        return m


class UnpackAddend(wiring.Component):
    """FP32 bits, or FP16 bits in the low half, to an :class:`Addend`.  Combinational.

    Members
    -------
    bits : In(32)
    f16 : In(1)
        Read ``bits[0:16]`` as FP16 instead of ``bits`` as FP32.
    o : Out(Addend)
    """

    bits: In(32)
    f16: In(1)
    o: Out(Addend)

    def elaborate(self, platform):
        m = Module()
        s = FP32Bits(self.bits)
        h = FP16Bits(self.bits[:16])
        o = self.o
        with m.If(self.f16):
            m.d.comb += [
                o.sign.eq(h.sign),
                o.sig.eq(Cat(C(0, 13), h.fraction, h.exponent != 0)),
                o.exp.eq(Mux(h.exponent == 0, 1, h.exponent) - 15),
            ]
            _classify(m, o, h.exponent, h.fraction, 0x1F)
        with m.Else():
            m.d.comb += [
                o.sign.eq(s.sign),
                o.sig.eq(Cat(s.fraction, s.exponent != 0)),
                o.exp.eq(Mux(s.exponent == 0, 1, s.exponent) - 127),
            ]
            _classify(m, o, s.exponent, s.fraction, 0xFF)
        return m
