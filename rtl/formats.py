"""Bit formats as ``lib.data`` layouts, and the unpackers that turn them into datapath operands.

Golden twin: :mod:`tcore.golden.formats`.

Layouts are listed LSB first, as the bit patterns are.  The unpacker maps every input format
(FP16, BF16, TF32, FP8 E4M3 / E5M2, INT8 S8 / U8) onto one operand shape, :class:`Operand`, so
that the rest of the datapath is format-agnostic: an 11-bit significand with 10 fraction bits
and an exponent biased by 127.  The accumulator formats (FP32, FP16) map onto :class:`Addend`
the same way (24-bit significand, 23 fraction bits).  :class:`InputKind` and :class:`Mode` say how a
group is computed; they travel with the beats.
"""

from amaranth import *
from amaranth.lib import data, enum, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["FP16Bits", "BF16Bits", "FP32Bits", "FP16", "FP32", "InputKind", "Mode", "Special", "Operand", "Addend",
           "Fields", "FormatSel", "format_select", "unpack_fields", "unpack_finish", "Unpack", "UnpackAddend", "OPERAND_BIAS",
           "INT8_EXP"]


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


class InputKind(enum.Enum, shape=3):
    """The input kind of an MMA group: which formats A and B are read in (``Mode.kind``)."""
    FP16 = 0
    BF16 = 1
    TF32 = 2        # FP32 patterns, the 13 low fraction bits ignored
    FP8 = 3         # E4M3 or E5M2 per operand (``Mode.a_alt`` / ``b_alt``)
    INT8 = 4        # S8, or U8 per operand


class Special(enum.Enum, shape=2):
    """A group output's special result, which overrides its rounded sum with the canonical
    value of the output format (:class:`FP32`, :class:`FP16`)."""
    NONE = 0
    NAN = 1             # a NaN input, Inf - Inf, or 0 * Inf
    POS_INF = 2
    NEG_INF = 3


class Mode(data.Struct):
    """How a group is computed: input kind, accumulator and the per-operand variants.

    Members
    -------
    kind : InputKind
    acc_f16 : 1
        C and D are FP16, one round to nearest-even (FP16 and FP8 inputs); else FP32 (S32 for
        INT8).
    a_alt, b_alt : 1
        FP8: the operand is E5M2 (else E4M3).  INT8: it is unsigned U8 (else S8).
    sat : 1
        INT8: the group's result is clamped to the S32 range (``.satfinite``), else wrapped.
    sparse : 1
        FP16/BF16, Hopper: A is 2:4 sparse (``mma.sp``): a beat's A holds stored values and
        each product's B row is the one the beat's metadata names (:class:`tcore.rtl.mma4.Beat`).
    """

    kind: InputKind
    acc_f16: 1
    a_alt: 1
    b_alt: 1
    sat: 1
    sparse: 1


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


class Fields(data.Struct):
    """An A/B element with its format's fields picked out: the first half of :class:`Unpack`,
    one shape for every kind, so that the second half (:func:`unpack_finish`) needs no kind.

    Members
    -------
    frac : 10
        The fraction aligned to 10 bits (INT8: the byte).
    e : 8
        The exponent field, zero-extended (INT8: 137, the biased exponent of every INT8 value).
    k : 8
        ``127 - bias`` of the format (INT8: 0).
    top : 1
        The exponent field is all ones (Inf or NaN).
    nan7 : 1
        E4M3: the fraction is 111 (with ``top`` its only NaN; E4M3 has no Inf).
    sign : 1
        The sign bit (INT8: bit 7 of a signed byte).
    e4m3, int8 : 1
        The element is E4M3 / INT8.
    """

    frac: 10
    e: 8
    k: 8
    top: 1
    nan7: 1
    sign: 1
    e4m3: 1
    int8: 1


# (exponent field, fraction field, fraction shift to 10 bits, bias) per float format.
_FLOATS = {
    "fp16": (slice(10, 15), slice(0, 10), 0, 15),
    "bf16": (slice(7, 15), slice(0, 7), 3, 127),
    "tf32": (slice(23, 31), slice(13, 23), 0, 127),
    "e4m3": (slice(3, 7), slice(0, 3), 7, 7),
    "e5m2": (slice(2, 7), slice(0, 2), 8, 15),
}
_SIGN_BIT = {"fp16": 15, "bf16": 15, "tf32": 31, "e4m3": 7, "e5m2": 7}


class FormatSel(data.Struct):
    """An A/B element's format, one-hot (what :func:`unpack_fields` selects by)."""

    fp16: 1
    bf16: 1
    tf32: 1
    e4m3: 1
    e5m2: 1
    int8: 1     # INT8 (and the unused kind codes)


def format_select(kind, alt):
    """The :class:`FormatSel` bits of ``kind`` (``alt``: E5M2 / U8), as a value."""
    fp8 = kind == InputKind.FP8
    known = (kind == InputKind.FP16) | (kind == InputKind.BF16) | (kind == InputKind.TF32) | fp8
    return Cat(kind == InputKind.FP16, kind == InputKind.BF16, kind == InputKind.TF32, fp8 & ~alt, fp8 & alt,
               ~known)


def unpack_fields(m, bits, fmt, alt):
    """The first half of :class:`Unpack`: ``bits`` (32) in the format ``fmt`` (a
    :class:`FormatSel`; ``alt``: U8) to :class:`Fields`, as one AND-OR of the formats' fields
    under the one-hot selects (registers in the core, so that this is the stage's only logic)."""
    fmt = FormatSel(fmt)
    sel = {name: getattr(fmt, name) for name in _FLOATS}
    int8 = fmt.int8

    def pick(value_of, width):
        out = C(0, width)
        for name, s in sel.items():
            out = out | (s.replicate(width) & Value.cast(value_of(name))[:width])
        return out

    f = Signal(Fields)
    e_of = {n: bits[_FLOATS[n][0]] for n in _FLOATS}
    m.d.comb += [
        f.frac.eq(pick(lambda n: Cat(C(0, _FLOATS[n][2]), bits[_FLOATS[n][1]]), 10)
                  | (int8.replicate(10) & bits[0:8])),
        f.e.eq(pick(lambda n: e_of[n], 8) | (int8.replicate(8) & (INT8_EXP + OPERAND_BIAS))),
        f.k.eq(pick(lambda n: C(OPERAND_BIAS - _FLOATS[n][3], 8), 8)),
        f.top.eq(pick(lambda n: e_of[n].all(), 1)),
        f.nan7.eq(bits[0:3].all()),
        f.sign.eq(pick(lambda n: bits[_SIGN_BIT[n]], 1) | (int8 & bits[7] & ~alt)),
        f.e4m3.eq(sel["e4m3"]),
        f.int8.eq(int8),
    ]
    return f


def unpack_finish(m, f):
    """The second half of :class:`Unpack`: :class:`Fields` to an :class:`Operand` (no kind
    needed: the exponent add, the zero test and the INT8 magnitude)."""
    o = Signal(Operand)
    ez, fz = f.e == 0, f.frac == 0
    v = f.frac[0:8]
    mag = Mux(f.sign, -v.as_signed(), v)[:8]         # -128 -> 128: 8 bits unsigned
    m.d.comb += [
        o.sign.eq(f.sign),
        o.sig.eq(Mux(f.int8, mag, Cat(f.frac, ~ez))),
        o.bexp.eq(Mux(ez, 1, f.e) + f.k),
        o.zero.eq(fz & (ez | f.int8)),
        o.inf.eq(f.top & fz & ~f.e4m3),
        o.nan.eq(f.top & Mux(f.e4m3, f.nan7, ~fz)),
    ]
    return o


class Unpack(wiring.Component):
    """An A or B element of any :class:`InputKind` to an :class:`Operand`.  Combinational: the two
    halves :func:`unpack_fields` and :func:`unpack_finish`, which the core registers apart.

    Members
    -------
    bits : In(32)
        The element: FP16/BF16 in ``bits[0:16]``, TF32 as the whole FP32 pattern, FP8 and
        INT8 in ``bits[0:8]``.
    kind : In(InputKind)
    alt : In(1)
        FP8: E5M2 (else E4M3); INT8: unsigned (else two's complement).
    o : Out(Operand)
    """

    bits: In(32)
    kind: In(InputKind)
    alt: In(1)
    o: Out(Operand)

    def elaborate(self, platform):
        m = Module()
        fields = unpack_fields(m, self.bits, format_select(self.kind, self.alt), self.alt)
        m.d.comb += self.o.eq(unpack_finish(m, fields))
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
