"""NVFP4 and MXFP4: 4-bit block-scaled formats, their quantiser, and their MMA on the tensor core.

Golden twin of ``rtl/nvfp4.py``.  Facts from ``docs/numerics.md`` (NVFP4 and MXFP4 section):

* **E2M1** element: sign, 2 exponent bits (bias 1), 1 mantissa bit: +-{0, 0.5, 1, 1.5, 2, 3, 4,
  6}; no Inf or NaN.  Two per byte, element 2k in the low nibble.
* **NVFP4**: one **UE4M3** block scale per 16 consecutive elements along K (E4M3, bias 7, max
  448; 0x7F is NaN; the sign bit must be 0) and one FP32 **tensor scale** per tensor, applied
  after accumulation.
* **MXFP4** (OCP MX v1.0): one **E8M0** scale per 32 elements, 2**(s - 127); s = 255 is NaN.

What the model computes is *FP4 decode + Hopper FP16/BF16 arithmetic*: every E2M1 x UE4M3
product is exact in FP16 and every E2M1 x E8M0 product (s <= 252) exact in BF16, so the decoded
operands run on the H200's FP16/BF16 tensor-core path (``tcore.golden.mma``).  This is not
Blackwell's native FP4 datapath, whose accumulation has not been measured here.

Special values (all tested):

* An NVFP4 scale code that is NaN (0x7F, 0xFF) or negative (sign bit set) decodes every element
  of its block to NaN; an E8M0 code 255 likewise.  The decoded NaN is the tensor core's
  canonical 0x7FFF.
* E8M0 codes 253 and 254 overflow BF16 for the largest elements: those decode to +-Inf.
* ``quantize`` refuses NaN and Inf inputs (:class:`QuantizeError`): a NaN or Inf would make
  every scale of its tensor meaningless.  An all-zero tensor has tensor scale 1.0; a block whose
  scale decodes to 0 (all zero, or too small for E4M3 next to the tensor's amax) has all codes 0;
  so does a whole tensor whose amax/2688 underflows float32 (amax below about 3e-42).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .formats import E4M3_MAX, canonical_nan, e4m3_decode, e4m3_encode
from .gemm import check_gemm, matmul_t

__all__ = [
    "FORMATS", "E2M1_VALUES", "QuantizeError", "Quantized",
    "e2m1_decode", "e2m1_encode", "e4m3_decode", "e4m3_encode", "ue4m3_decode",
    "e8m0_decode", "fp32_decode", "fp32_encode", "pack_codes",
    "quantize", "dequantize", "decode_elements", "decode_operand", "scale_fp32", "gemm",
]

#: Block size along K and the decoded (tensor-core input) format of each 4-bit format.
FORMATS = {"nvfp4": {"block": 16, "decoded": "fp16"}, "mxfp4": {"block": 32, "decoded": "bf16"}}

#: Magnitudes of E2M1 codes 0..7 (codes 8..15 are the same, negative).
E2M1_VALUES = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6], np.float32)
E2M1_MAX = 6.0


class QuantizeError(ValueError):
    """The input cannot be quantised (NaN or Inf, or a shape the format cannot block)."""


# --- codecs -------------------------------------------------------------------------------------

def e2m1_decode(codes) -> np.ndarray:
    """E2M1 codes (0..15) to float32."""
    c = np.asarray(codes).astype(np.uint8) & 0xF
    v = E2M1_VALUES[c & 7]
    return np.where(c & 8, -v, v).astype(np.float32)


def e2m1_encode(x) -> np.ndarray:
    """float32 to E2M1 codes: round to nearest, ties to even, saturating at +-6 (sign kept,
    so -0.1 gives -0, code 8).  NaN is refused (E2M1 has none)."""
    x = np.asarray(x, np.float32)
    if np.isnan(x).any():
        raise QuantizeError("E2M1 has no NaN")
    mag = np.minimum(np.abs(x), np.float32(E2M1_MAX))
    # Each value's neighbours in the table; ties go to the even code (mantissa bit 0).
    hi = np.searchsorted(E2M1_VALUES, mag, side="left").clip(0, 7)
    lo = (hi - 1).clip(0, 7)
    d_lo, d_hi = mag - E2M1_VALUES[lo], E2M1_VALUES[hi] - mag
    code = np.where(d_lo < d_hi, lo, np.where(d_hi < d_lo, hi, np.where(lo % 2 == 0, lo, hi)))
    return (code | np.where(np.signbit(x), 8, 0)).astype(np.uint8)


def ue4m3_decode(codes) -> np.ndarray:
    """NVFP4 block-scale codes to float32: E4M3, with NaN for 0x7F and for any code whose sign
    bit is set (a scale must be positive)."""
    c = np.asarray(codes).astype(np.uint8)
    return np.where(c & 0x80, np.float32(np.nan), e4m3_decode(c & 0x7F)).astype(np.float32)


def e8m0_decode(codes) -> np.ndarray:
    """E8M0 codes to float64: 2**(s - 127); 255 is NaN.  (2**-127 is not a normal float32,
    hence float64.)"""
    s = np.asarray(codes).astype(np.int64)
    return np.where(s == 255, np.nan, np.exp2((s - 127).astype(np.float64)))


def fp32_decode(bits) -> np.ndarray:
    """FP32 bit patterns to float32."""
    return np.asarray(bits, np.uint32).view(np.float32)


def fp32_encode(x) -> np.ndarray:
    """float32 values to FP32 bit patterns."""
    return np.asarray(x, np.float32).view(np.uint32)


# --- quantiser ---------------------------------------------------------------------------------

@dataclass
class Quantized:
    """A tensor in NVFP4 or MXFP4, blocked along its last axis.

    ``codes``: uint8, one E2M1 code per element (unpacked), the input's shape.
    ``scales``: uint8 block-scale bits (UE4M3 or E8M0), shape ``(..., last // block)``.
    ``tensor_scale``: float32 (1.0 for MXFP4).
    """

    fmt: str
    codes: np.ndarray
    scales: np.ndarray
    tensor_scale: np.float32

    @property
    def block(self) -> int:
        return FORMATS[self.fmt]["block"]

    def packed(self) -> np.ndarray:
        """Two codes per byte along the last axis, element 2k in the low nibble."""
        return pack_codes(self.codes)

    def dequantize(self) -> np.ndarray:
        return dequantize(self)


def pack_codes(codes) -> np.ndarray:
    """E2M1 codes two per byte along the last axis, element 2k in the low nibble."""
    c = np.asarray(codes, np.uint8)
    return (c[..., 0::2] | (c[..., 1::2] << 4)).astype(np.uint8)


def _check_input(x, fmt):
    if fmt not in FORMATS:
        raise QuantizeError(f"Format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    x = np.asarray(x)
    if x.dtype != np.float32:
        raise QuantizeError(f"quantize takes a float32 array, not {x.dtype}")
    block = FORMATS[fmt]["block"]
    if x.ndim == 0 or x.shape[-1] == 0 or x.shape[-1] % block:
        raise QuantizeError(f"{fmt}: the last axis must be a positive multiple of {block}, "
                            f"not shape {x.shape}")
    if not np.isfinite(x).all():
        raise QuantizeError(f"{fmt}: the input has NaN or Inf; no scale represents it")
    return x, block


def quantize(x, fmt: str = "nvfp4") -> Quantized:
    """Quantise a float32 array along its last axis.

    NVFP4 (NVIDIA's recipe, all arithmetic in float32, dividing): tensor_scale = amax/(6*448);
    block scale = block_amax/(6*tensor_scale) clamped to <= 448 and cast to E4M3 (nearest even);
    element = x/(decoded block scale * tensor_scale), nearest even onto E2M1, saturating at 6.

    MXFP4 (OCP MX v1.0): shared exponent floor(log2(block amax)) - 2 (2 = E2M1's largest
    exponent), clamped to -127..127, as E8M0; element = x / 2**exponent onto E2M1 as above.
    """
    x, block = _check_input(x, fmt)
    blocks = x.reshape(*x.shape[:-1], x.shape[-1] // block, block)
    bamax = np.abs(blocks).max(axis=-1)
    if fmt == "nvfp4":
        amax = np.abs(x).max()
        ts = np.float32(amax) / np.float32(E2M1_MAX * E4M3_MAX) if amax > 0 else np.float32(1.0)
        with np.errstate(divide="ignore"):    # a tensor scale that underflowed to 0
            bs = np.minimum(bamax / (np.float32(E2M1_MAX) * ts), np.float32(E4M3_MAX)).astype(np.float32)
        scales = e4m3_encode(bs)
        denom = (e4m3_decode(scales) * ts).astype(np.float32)
    else:
        ts = np.float32(1.0)
        with np.errstate(divide="ignore"):
            exp = np.floor(np.log2(bamax.astype(np.float64))) - 2
        exp = np.clip(np.where(bamax > 0, exp, -127), -127, 127).astype(np.int64)
        scales = (exp + 127).astype(np.uint8)
        denom = np.exp2(exp.astype(np.float64))       # exact power of two
    with np.errstate(divide="ignore", invalid="ignore"):
        if fmt == "nvfp4":
            q = (blocks / denom[..., None]).astype(np.float32)
        else:
            # x / 2**e in float32: 2**-127 is a float32 subnormal, so divide as float64 (exact)
            # and round once to float32.
            q = (blocks.astype(np.float64) / denom[..., None]).astype(np.float32)
    q = np.where((denom > 0)[..., None], q, np.float32(0))
    codes = e2m1_encode(q).reshape(x.shape)
    return Quantized(fmt, codes, scales, np.float32(ts))


def dequantize(q: Quantized) -> np.ndarray:
    """float32 values: E2M1 x block scale x tensor scale (NaN where a scale is NaN)."""
    dec = decode_elements(q.codes, np.repeat(q.scales, q.block, axis=-1), q.fmt)
    fmt = FORMATS[q.fmt]["decoded"]
    if fmt == "fp16":
        vals = dec.view(np.float16).astype(np.float32)
    else:
        vals = (dec.astype(np.uint32) << 16).view(np.float32)
    return (vals * np.float32(q.tensor_scale)).astype(np.float32)


# --- decoding into tensor-core operands --------------------------------------------------------

def decode_elements(codes, scales, fmt: str) -> np.ndarray:
    """The decode front end: E2M1 ``codes`` with per-element scale codes ``scales`` (same shape)
    to FP16 (NVFP4) or BF16 (MXFP4) bits, exactly.  Twin of :class:`tcore.rtl.nvfp4.Fp4Decoder`."""
    import ml_dtypes

    codes, scales = np.broadcast_arrays(np.asarray(codes, np.uint8), np.asarray(scales, np.uint8))
    v = e2m1_decode(codes).astype(np.float64)
    if fmt == "nvfp4":
        s = ue4m3_decode(scales).astype(np.float64)
        out = (v * s).astype(np.float16).view(np.uint16)          # exact (<= 6 bits, 2^-10..2688)
        nan = np.isnan(s)
    elif fmt == "mxfp4":
        s = e8m0_decode(scales)
        with np.errstate(over="ignore"):
            out = (v * np.where(np.isnan(s), 0, s)).astype(ml_dtypes.bfloat16).view(np.uint16)
        nan = np.isnan(s)
    else:
        raise ValueError(f"Format must be nvfp4 or mxfp4, not {fmt!r}")
    return np.where(nan, np.uint16(canonical_nan("fp16")), out).astype(np.uint16)


def decode_operand(q: Quantized) -> np.ndarray:
    """A quantised operand (blocked along its last axis) as tensor-core input bits."""
    return decode_elements(q.codes, np.repeat(q.scales, q.block, axis=-1), q.fmt)


def scale_fp32(d_bits, alpha) -> np.ndarray:
    """The epilogue: FP32 ``d_bits`` x float32 ``alpha``, IEEE round-to-nearest-even with
    subnormals; NaN gives the canonical 0x7FFFFFFF.  Twin of :class:`tcore.rtl.nvfp4.Fp32Scale`."""
    with np.errstate(all="ignore"):
        p = fp32_decode(d_bits) * np.float32(alpha)
    bits = fp32_encode(p)
    return np.where(np.isnan(p), np.uint32(canonical_nan("fp32")), bits).astype(np.uint32)


def gemm(qa: Quantized, qbt: Quantized, c=None) -> np.ndarray:
    """Block-scaled D (FP32 bits) for A (M x K) and B given transposed (``qbt``: N x K), both
    quantised along K (the layout NVIDIA's FP4 GEMMs use).

    D = float32(ts_a * ts_b) x (Hopper MMA of the decoded A and B, FP32 accumulate, C = ``c``
    bits or 0); the FP16 path for NVFP4, BF16 for MXFP4.
    """
    if qa.fmt != qbt.fmt:
        raise ValueError(f"A is {qa.fmt} and B is {qbt.fmt}")
    a, b = decode_operand(qa), decode_operand(qbt).T
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"A {qa.codes.shape} and B^T {qbt.codes.shape} do not make a GEMM")
    in_fmt = FORMATS[qa.fmt]["decoded"]
    if c is None:
        d = matmul_t(a, np.ascontiguousarray(b), in_fmt=in_fmt, out_fmt="fp32")
    else:
        from .mma import mma
        check_gemm(a.shape[0], b.shape[1], a.shape[1], in_fmt, "fp32")
        d = mma(a, np.ascontiguousarray(b), np.asarray(c, np.uint32), in_fmt=in_fmt, out_fmt="fp32")
    alpha = np.float32(qa.tensor_scale) * np.float32(qbt.tensor_scale)
    return scale_fp32(d, alpha)
