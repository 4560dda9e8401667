"""Floating-point bit formats: FP16, BF16, FP32, TF32, FP8 E4M3 and E5M2 (and the shared
vocabulary of the model).

Every value is carried as its bit pattern in an unsigned integer array (uint8, uint16 or
uint32).  FP8 E4M3 is OCP's ``e4m3fn`` (``ml_dtypes.float8_e4m3fn``): bias 7, no Inf, S.1111.111
the only NaN, so exponent field 15 holds normals up to 448.  E5M2 is IEEE-like (bias 15, Inf and
NaN).  TF32 is an FP32 pattern of which the tensor core reads only the top 19 bits: the 13 low
fraction bits are ignored (truncated, not rounded), and the pattern is classified after that
masking, so a NaN whose payload lies only in those bits reads as Inf.  The tensor-core
rule (``docs/numerics.md``) speaks of a number as ``(-1)**sign * significand *
2**(nominal_exponent - frac_bits)``, where the *nominal exponent* of a subnormal is the minimum
normal exponent (-14 for FP16, -126 for BF16 and FP32).  :func:`decode` and :func:`encode`
convert between bit patterns and that triple; :func:`to_float` gives exact float64 values.

The functions are vectorised over any array shape.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

__all__ = [
    "Format", "FP16", "BF16", "FP32", "TF32", "E4M3", "E5M2", "FORMATS", "get_format",
    "ZERO", "SUBNORMAL", "NORMAL", "INF", "NAN",
    "fields", "classify", "decode", "encode", "to_float", "pow2_nominal",
    "value_table", "pow2_table", "canonical_nan", "e4m3_decode", "e4m3_encode",
]

# Classification codes returned by :func:`classify`.
ZERO, SUBNORMAL, NORMAL, INF, NAN = 0, 1, 2, 3, 4


@dataclass(frozen=True)
class Format:
    """An IEEE-style binary floating-point format.

    Parameters
    ----------
    name : str
        ``"fp16"``, ``"bf16"``, ``"fp32"``, ``"tf32"``, ``"e4m3"`` or ``"e5m2"``.
    exp_bits, frac_bits : int
        Widths of the exponent and fraction fields of the pattern; the sign is the top bit.
    finite : bool
        OCP ``fn`` encoding: no Inf; only the all-ones exponent and fraction is NaN, and the
        rest of the top binade is normal (E4M3).
    ignored : int
        Low fraction bits the tensor core does not read (TF32: 13); they are cleared before
        anything else, so the format has ``frac_bits - ignored`` effective fraction bits.
    """

    name: str
    exp_bits: int
    frac_bits: int
    finite: bool = False
    ignored: int = 0

    @property
    def width(self) -> int:
        return 1 + self.exp_bits + self.frac_bits

    @property
    def bias(self) -> int:
        return (1 << (self.exp_bits - 1)) - 1

    @property
    def emin(self) -> int:
        """Minimum normal exponent, also the nominal exponent of subnormals."""
        return 1 - self.bias

    @property
    def emax(self) -> int:
        return self.bias + 1 if self.finite else self.bias

    @property
    def precision(self) -> int:
        """Significand bits including the hidden one."""
        return self.frac_bits - self.ignored + 1

    @property
    def dtype(self):
        return {8: np.uint8, 16: np.uint16}.get(self.width, np.uint32)

    @property
    def exp_max_field(self) -> int:
        return (1 << self.exp_bits) - 1

    def __repr__(self) -> str:
        return f"Format({self.name})"


def _formats() -> dict:
    """A :class:`Format` per float format of the table (``tcore.numerics.formats``: the inputs'
    rows and the accumulators)."""
    from tcore.numerics.formats import float_fields
    return {name: Format(name, f.exp, f.frac, f.finite, f.ignored)
            for name, f in float_fields().items()}


FORMATS = _formats()
FP16, BF16, FP32, TF32, E4M3, E5M2 = (FORMATS[n] for n in ("fp16", "bf16", "fp32", "tf32",
                                                           "e4m3", "e5m2"))


def get_format(fmt) -> Format:
    """Return the :class:`Format` named by ``fmt`` (a name or a Format)."""
    if isinstance(fmt, Format):
        return fmt
    if fmt in FORMATS:
        return FORMATS[fmt]
    from tcore.numerics.formats import float_fields
    fields = float_fields().get(fmt) if isinstance(fmt, str) else None
    if fields is None:
        raise ValueError(f"Format must be one of {sorted(float_fields())}, not {fmt!r}")
    # A row the table has gained since this module loaded.
    return Format(fmt, fields.exp, fields.frac, fields.finite, fields.ignored)


def canonical_nan(fmt) -> int:
    """The NaN pattern the tensor core produces: all ones below the sign (0x7FFF, 0x7FFFFFFF;
    0x7F for the FP8 formats)."""
    fmt = get_format(fmt)
    return (1 << (fmt.width - 1)) - 1


def _as_bits(bits, fmt: Format) -> np.ndarray:
    bits = np.asarray(bits)
    if bits.dtype.kind not in "ui":
        raise TypeError(f"{fmt.name} bit patterns must be an integer array, not {bits.dtype}")
    return bits.astype(np.int64) & (((1 << fmt.width) - 1) & ~((1 << fmt.ignored) - 1))


def fields(bits, fmt):
    """Split bit patterns into ``(sign, exponent_field, fraction_field)`` int64 arrays."""
    fmt = get_format(fmt)
    b = _as_bits(bits, fmt)
    frac = b & ((1 << fmt.frac_bits) - 1)
    exp = (b >> fmt.frac_bits) & fmt.exp_max_field
    sign = b >> (fmt.width - 1)
    return sign, exp, frac


def classify(bits, fmt) -> np.ndarray:
    """Classify each pattern as ZERO, SUBNORMAL, NORMAL, INF or NAN (int8 codes)."""
    fmt = get_format(fmt)
    _, exp, frac = fields(bits, fmt)
    top = exp == fmt.exp_max_field
    out = np.full(exp.shape, NORMAL, dtype=np.int8)
    out[(exp == 0) & (frac == 0)] = ZERO
    out[(exp == 0) & (frac != 0)] = SUBNORMAL
    if fmt.finite:
        out[top & (frac == (1 << fmt.frac_bits) - 1)] = NAN
    else:
        out[top & (frac == 0)] = INF
        out[top & (frac != 0)] = NAN
    return out


def decode(bits, fmt):
    """Return ``(sign, significand, nominal_exponent)`` of finite patterns.

    ``value = (-1)**sign * significand * 2**(nominal_exponent - fmt.frac_bits)``.  Subnormals
    and zeros get the nominal exponent ``fmt.emin``.  For Inf/NaN patterns the triple is that
    of the field contents and carries no meaning; use :func:`classify` first.
    """
    fmt = get_format(fmt)
    sign, exp, frac = fields(bits, fmt)
    sig = frac | ((exp > 0).astype(np.int64) << fmt.frac_bits)
    nexp = np.maximum(exp, 1) - fmt.bias
    return sign, sig, nexp


def encode(sign, significand, nominal_exponent, fmt) -> np.ndarray:
    """Inverse of :func:`decode` for exactly representable finite values.

    ``significand`` must be below ``2**fmt.precision``; a significand with the hidden bit set
    is normal, otherwise the nominal exponent must be ``fmt.emin`` (subnormal or zero).
    """
    fmt = get_format(fmt)
    sign = np.asarray(sign, dtype=np.int64)
    sig = np.asarray(significand, dtype=np.int64)
    nexp = np.asarray(nominal_exponent, dtype=np.int64)
    if np.any((sig < 0) | (sig >> fmt.precision != 0)):
        raise ValueError(f"{fmt.name} significand must be in [0, 2**{fmt.precision})")
    hidden = (sig >> fmt.frac_bits) & 1
    if np.any((hidden == 0) & (nexp != fmt.emin)):
        raise ValueError(f"{fmt.name} subnormal significand needs nominal exponent {fmt.emin}")
    if np.any((nexp < fmt.emin) | (nexp > fmt.emax)):
        raise ValueError(f"{fmt.name} nominal exponent out of [{fmt.emin}, {fmt.emax}]")
    exp = np.where(hidden == 1, nexp + fmt.bias, 0)
    bits = (sign << (fmt.width - 1)) | (exp << fmt.frac_bits) | (sig & ((1 << fmt.frac_bits) - 1))
    return bits.astype(fmt.dtype)


def to_float(bits, fmt) -> np.ndarray:
    """Exact float64 values of the patterns (Inf and NaN included)."""
    fmt = get_format(fmt)
    if fmt.width == 32:
        return _as_bits(bits, fmt).astype(np.uint32).view(np.float32).astype(np.float64)
    return value_table(fmt)[np.asarray(bits).astype(fmt.dtype)]


def pow2_nominal(bits, fmt) -> np.ndarray:
    """``2.0**nominal_exponent`` for nonzero finite patterns, 0.0 for zeros, 1.0 for Inf/NaN.

    Products' nominal exponents add, so their powers multiply exactly in float64; a zero factor
    makes the product's entry 0, which keeps zero terms out of the maximum that finds E.
    Inf/NaN entries get 1.0: when one is present the result is not finite and E is unused.
    """
    fmt = get_format(fmt)
    if fmt.width != 32:
        return pow2_table(fmt)[np.asarray(bits).astype(fmt.dtype)]
    _, exp, frac = fields(bits, fmt)
    out = np.ldexp(1.0, (np.maximum(exp, 1) - fmt.bias).astype(np.int32))
    out[(exp == 0) & (frac == 0)] = 0.0
    out[exp == fmt.exp_max_field] = 1.0
    return out


@lru_cache(maxsize=None)
def value_table(fmt) -> np.ndarray:
    """float64 value of every 8- or 16-bit pattern (read-only, 256 or 65,536 entries)."""
    fmt = get_format(fmt)
    if fmt.width > 16:
        raise ValueError(f"value_table is for 8- and 16-bit formats, not {fmt.name}")
    bits = np.arange(1 << fmt.width, dtype=np.int64)
    sign, sig, nexp = decode(bits, fmt)
    val = np.ldexp(sig.astype(np.float64), (nexp - fmt.frac_bits).astype(np.int32))
    cls = classify(bits, fmt)
    val[cls == INF] = np.inf
    val[cls == NAN] = np.nan
    val = np.where(sign == 1, -val, val)
    val.flags.writeable = False
    return val


@lru_cache(maxsize=None)
def pow2_table(fmt) -> np.ndarray:
    """:func:`pow2_nominal` of every 8- or 16-bit pattern (read-only)."""
    fmt = get_format(fmt)
    if fmt.width > 16:
        raise ValueError(f"pow2_table is for 8- and 16-bit formats, not {fmt.name}")
    bits = np.arange(1 << fmt.width, dtype=np.int64)
    _, _, nexp = decode(bits, fmt)
    out = np.ldexp(1.0, nexp.astype(np.int32))
    cls = classify(bits, fmt)
    out[cls == ZERO] = 0.0
    out[(cls == INF) | (cls == NAN)] = 1.0
    out.flags.writeable = False
    return out


# --- the E4M3 codec (FP8 inputs and NVFP4 block scales) ----------------------------------------

E4M3_MAX = 448.0


def e4m3_decode(codes) -> np.ndarray:
    """E4M3 (OCP ``e4m3fn``: bias 7, no Inf, 0x7F/0xFF NaN) codes to float32 (exact)."""
    return to_float(codes, E4M3).astype(np.float32)


def e4m3_encode(x) -> np.ndarray:
    """float32 to E4M3 codes, round to nearest even (direct from float32, no double rounding).
    Magnitudes that round above 448 and NaN give NaN (0x7F, signed); E4M3 has no Inf."""
    x = np.asarray(x, np.float32)
    mag = np.abs(x).astype(np.float64)
    # The quantum of the value's binade: 2**(e-3) for 2**e <= mag < 2**(e+1), e >= -6
    # (subnormals share 2**-9).  frexp gives e exactly.
    e = np.maximum(np.frexp(np.where(np.isfinite(mag), mag, 0))[1] - 1, -6)
    v = np.rint(mag / np.exp2(e - 3)) * np.exp2(e - 3)       # rint: ties to even
    # Code = exponent field * 8 + mantissa; for v < 2**-6 that is v / 2**-9, and a rounding up
    # into the next binade lands on the right code too.
    ev = np.maximum(np.frexp(v)[1] - 1, -6)
    code = np.where(v < 2.0 ** -6, v / 2.0 ** -9, 8 * (ev + 7) + v / np.exp2(ev - 3) - 8)
    code = np.where((v > E4M3_MAX) | ~np.isfinite(mag), 0x7F, np.rint(code)).astype(np.int64)
    return (code | np.where(np.signbit(x), 0x80, 0)).astype(np.uint8)
