"""Bit formats as ``lib.data`` layouts, and the unpackers that turn them into datapath operands.

Golden twin: :mod:`golden.formats`.

Layouts are listed LSB first, as the bit patterns are.  The unpacker maps every input format
(FP16, BF16, TF32, FP8 E4M3 / E5M2, INT8 S8 / U8) onto one operand shape, :class:`Operand`, so
that the rest of the datapath is format-agnostic: an 11-bit significand with 10 fraction bits
and an exponent biased by 127.  The accumulator formats (FP32, FP16) map onto :class:`Addend`
the same way (24-bit significand, 23 fraction bits).  :class:`Kind` and :class:`Mode` say how a
group is computed; they travel with the beats.
"""

from amaranth import *
from amaranth.lib import data, enum, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["FP16Bits", "BF16Bits", "FP32Bits", "FP16", "FP32", "Kind", "Mode", "Operand", "Addend",
           "Unpack", "UnpackAddend", "OPERAND_BIAS", "INT8_EXP"]


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


class Kind(enum.Enum, shape=3):
    """The input kind of an MMA group: which formats A and B are read in (``Mode.kind``)."""
    FP16 = 0
    BF16 = 1
    TF32 = 2        # FP32 patterns, the 13 low fraction bits ignored
    FP8 = 3         # E4M3 or E5M2 per operand (``Mode.a_alt`` / ``b_alt``)
    INT8 = 4        # S8, or U8 per operand


class Mode(data.Struct):
    """How a group is computed: input kind, accumulator and the per-operand variants.

    Members
    -------
    kind : Kind
    acc_f16 : 1
        C and D are FP16, one round to nearest-even (FP16 and FP8 inputs); else FP32 (S32 for
        INT8).
    a_alt, b_alt : 1
        FP8: the operand is E5M2 (else E4M3).  INT8: it is unsigned U8 (else S8).
    sat : 1
        INT8: the group's result is clamped to the S32 range (``.satfinite``), else wrapped.
    """

    kind: Kind
    acc_f16: 1
    a_alt: 1
    b_alt: 1
    sat: 1


#: Biased exponents: an operand's is its nominal exponent + 127, whatever its format.
OPERAND_BIAS = 127
#: An INT8 operand is read as significand |v| with 10 fraction bits at nominal exponent 10.
INT8_EXP = 10


class Operand(data.Struct):
    """An unpacked input: value = (-1)**sign * sig * 2**(bexp - 127 - 10).

    Every kind maps onto this one shape: the significand has 10 fraction bits (BF16's is
    shifted left by 3, E4M3's by 7, E5M2's by 8; INT8's is the magnitude at nominal exponent
    10), the exponent is biased by 127 (subnormals at the minimum normal exponent).
    """
    sig: 11
    bexp: 8
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
    """An A or B element of any :class:`Kind` to an :class:`Operand`.  Combinational.

    Members
    -------
    bits : In(32)
        The element: FP16/BF16 in ``bits[0:16]``, TF32 as the whole FP32 pattern, FP8 and
        INT8 in ``bits[0:8]``.
    kind : In(Kind)
    alt : In(1)
        FP8: E5M2 (else E4M3); INT8: unsigned (else two's complement).
    o : Out(Operand)
    """

    bits: In(32)
    kind: In(Kind)
    alt: In(1)
    o: Out(Operand)

    # (exponent field, fraction field, fraction shift to 10 bits, bias, Inf/NaN exponent or
    # None for E4M3's finite encoding) per float format.
    _FLOATS = {
        "fp16": (slice(10, 15), slice(0, 10), 0, 15),
        "bf16": (slice(7, 15), slice(0, 7), 3, 127),
        "tf32": (slice(23, 31), slice(13, 23), 0, 127),
        "e4m3": (slice(3, 7), slice(0, 3), 7, 7),
        "e5m2": (slice(2, 7), slice(0, 2), 8, 15),
    }

    def elaborate(self, platform):
        m = Module()
        o, bits = self.o, self.bits

        def unpack_float(name):
            ef, ff, shift, bias = self._FLOATS[name]
            e, f = bits[ef], bits[ff]
            top = (1 << len(e)) - 1
            m.d.comb += [
                o.sign.eq(bits[{"tf32": 31, "e4m3": 7, "e5m2": 7}.get(name, 15)]),
                o.sig.eq(Cat(C(0, shift), f, e != 0)),
                o.bexp.eq(Mux(e == 0, 1, e) + (OPERAND_BIAS - bias)),
                o.zero.eq((e == 0) & (f == 0)),
            ]
            if name == "e4m3":                  # no Inf; S.1111.111 is the only NaN
                m.d.comb += o.nan.eq((e == top) & (f == 0b111))
            else:
                m.d.comb += [o.inf.eq((e == top) & (f == 0)), o.nan.eq((e == top) & (f != 0))]

        with m.Switch(self.kind):
            with m.Case(Kind.FP16):
                unpack_float("fp16")
            with m.Case(Kind.BF16):
                unpack_float("bf16")
            with m.Case(Kind.TF32):
                unpack_float("tf32")
            with m.Case(Kind.FP8):
                with m.If(self.alt):
                    unpack_float("e5m2")
                with m.Else():
                    unpack_float("e4m3")
            with m.Default():                   # INT8 (and the unused codes)
                v = bits[0:8]
                neg = v[7] & ~self.alt
                mag = Mux(neg, -v.as_signed(), v)[:8]    # -128 -> 128: 8 bits unsigned
                m.d.comb += [o.sign.eq(neg), o.sig.eq(mag), o.zero.eq(v == 0),
                             o.bexp.eq(INT8_EXP + OPERAND_BIAS)]
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
