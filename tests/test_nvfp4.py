"""NVFP4 / MXFP4 golden model: codecs against ml_dtypes, the quantiser against NVIDIA's recipe
(re-derived here with ml_dtypes casts), decode and block-scaled MMA semantics."""

import ml_dtypes
import numpy as np
import pytest

from tcore.golden import nvfp4
from tcore.golden.gemm import matmul_t
from tcore.golden.nvfp4 import QuantizeError, quantize

ALL8 = np.arange(256, dtype=np.uint8)
ALL4 = np.arange(16, dtype=np.uint8)


# --- codecs, every code ------------------------------------------------------------------------

def test_e2m1_decode_every_code():
    assert np.array_equal(nvfp4.e2m1_decode(ALL4), ALL4.view(ml_dtypes.float4_e2m1fn).astype(np.float32))


def test_e2m1_encode_round_trips_and_matches_ml_dtypes():
    v = nvfp4.e2m1_decode(ALL4)
    assert np.array_equal(nvfp4.e2m1_encode(v), ALL4)
    rng = np.random.default_rng(1)
    x = (rng.standard_normal(100000) * np.exp2(rng.integers(-4, 3, 100000))).astype(np.float32)
    # Exact ties (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5) and beyond the range (saturation at 6).
    x = np.concatenate([x, np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5, 6.5, 1e30, -0.25, -5, -7], np.float32)])
    want = x.astype(ml_dtypes.float4_e2m1fn).view(np.uint8) & 0xF
    assert np.array_equal(nvfp4.e2m1_encode(x), want)


def test_e4m3_decode_every_code():
    want = ALL8.view(ml_dtypes.float8_e4m3fn).astype(np.float32)
    assert np.array_equal(nvfp4.e4m3_decode(ALL8), want, equal_nan=True)


def test_e4m3_encode_matches_ml_dtypes():
    v = nvfp4.e4m3_decode(ALL8)
    ok = ~np.isnan(v)
    assert np.array_equal(nvfp4.e4m3_encode(v[ok]), ALL8[ok])
    rng = np.random.default_rng(2)
    x = (rng.standard_normal(200000) * np.exp2(rng.integers(-14, 10, 200000))).astype(np.float32)
    # Midpoints between neighbouring codes (ties to even), and 448..480 (rounds to 448, then NaN).
    mid = ((v[ok][1:127].astype(np.float64) + v[ok][2:128]) / 2).astype(np.float32)
    x = np.concatenate([x, mid, -mid, np.array([448, 463.9, 464, 465, 1e9], np.float32)])
    assert np.array_equal(nvfp4.e4m3_encode(x), x.astype(ml_dtypes.float8_e4m3fn).view(np.uint8))


def test_ue4m3_negative_and_nan_codes_are_nan():
    s = nvfp4.ue4m3_decode(ALL8)
    assert np.isnan(s[128:]).all() and np.isnan(s[0x7F])
    assert np.array_equal(s[:0x7F], nvfp4.e4m3_decode(ALL8[:0x7F]))


def test_e8m0_decode_every_code():
    want = ALL8.view(ml_dtypes.float8_e8m0fnu).astype(np.float64)
    assert np.array_equal(nvfp4.e8m0_decode(ALL8), want, equal_nan=True)


def test_fp32_codec():
    x = np.array([1.5, -0.0, np.inf, 1e-45], np.float32)
    assert np.array_equal(nvfp4.fp32_decode(nvfp4.fp32_encode(x)), x)
    assert nvfp4.fp32_encode(np.float32(1.0)) == 0x3F800000


# --- the quantiser against the recipe ----------------------------------------------------------

def recipe_nvfp4(x):
    """NVIDIA's recipe, written from docs/numerics.md with ml_dtypes casts."""
    amax = np.float32(np.abs(x).max())
    ts = amax / np.float32(2688) if amax > 0 else np.float32(1)
    blocks = x.reshape(*x.shape[:-1], -1, 16)
    with np.errstate(divide="ignore"):
        bs = np.abs(blocks).max(-1) / (np.float32(6) * ts)
    bs = np.minimum(bs, np.float32(448)).astype(ml_dtypes.float8_e4m3fn)
    dec = bs.astype(np.float32) * ts
    with np.errstate(divide="ignore", invalid="ignore"):
        e = blocks / dec[..., None]
    e = np.where(dec[..., None] > 0, e, 0).astype(np.float32)
    codes = np.clip(e, -6, 6).astype(ml_dtypes.float4_e2m1fn).view(np.uint8) & 0xF
    return codes.reshape(x.shape), bs.view(np.uint8), ts


def recipe_mxfp4(x):
    blocks = x.reshape(*x.shape[:-1], -1, 32).astype(np.float64)
    amax = np.abs(blocks).max(-1)
    exp = np.full(amax.shape, -127)
    nz = amax > 0
    exp[nz] = np.clip(np.floor(np.log2(amax[nz])).astype(int) - 2, -127, 127)
    e = (blocks / np.exp2(exp)[..., None]).astype(np.float32)
    codes = np.clip(e, -6, 6).astype(ml_dtypes.float4_e2m1fn).view(np.uint8) & 0xF
    return codes.reshape(x.shape), (exp + 127).astype(np.uint8)


def _edge_tensors():
    rng = np.random.default_rng(7)
    yield "normal", rng.standard_normal((8, 64)).astype(np.float32)
    yield "wide range", (rng.standard_normal((4, 128)) * np.exp2(rng.integers(-30, 30, (4, 128)))).astype(np.float32)
    z = rng.standard_normal((2, 64)).astype(np.float32)
    z[0, :32] = 0
    yield "zero blocks", z
    yield "all zero", np.zeros((2, 64), np.float32)
    one = np.full((1, 64), 1e-3, np.float32)
    one[0, 5] = 1e4
    yield "one outlier", one
    yield "negative zeros", -np.zeros((1, 32), np.float32)
    yield "huge", np.full((1, 32), 3e38, np.float32)
    yield "subnormal", np.full((1, 32), 1e-44, np.float32)
    ties = np.tile(np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5, 6], np.float32), 8)[None]
    yield "ties", ties


@pytest.mark.parametrize("name,x", list(_edge_tensors()), ids=[n for n, _ in _edge_tensors()])
def test_nvfp4_quantiser_follows_recipe(name, x):
    q = quantize(x, "nvfp4")
    codes, scales, ts = recipe_nvfp4(x)
    assert q.tensor_scale == ts
    assert np.array_equal(q.scales, scales)
    assert np.array_equal(q.codes, codes)
    assert q.codes.dtype == np.uint8 and q.scales.shape == (*x.shape[:-1], x.shape[-1] // 16)
    assert np.isfinite(q.dequantize()).all()


@pytest.mark.parametrize("name,x", list(_edge_tensors()), ids=[n for n, _ in _edge_tensors()])
def test_mxfp4_quantiser_follows_ocp(name, x):
    q = quantize(x, "mxfp4")
    codes, scales = recipe_mxfp4(x)
    assert q.tensor_scale == 1.0
    assert np.array_equal(q.scales, scales)
    assert np.array_equal(q.codes, codes)


def test_quantiser_error_is_small_on_normal_data():
    x = np.random.default_rng(3).standard_normal((64, 256)).astype(np.float32)
    for fmt, bound in (("nvfp4", 0.12), ("mxfp4", 0.2)):
        rel = np.linalg.norm(quantize(x, fmt).dequantize() - x) / np.linalg.norm(x)
        assert 0.01 < rel < bound, (fmt, rel)


def test_packed_puts_element_2k_in_the_low_nibble():
    x = np.array([[1, 6, -0.5, 0] + [0] * 12], np.float32)
    q = quantize(x, "nvfp4")
    p = q.packed()
    assert p.shape == (1, 8)
    assert p[0, 0] == (q.codes[0, 0] | q.codes[0, 1] << 4)
    assert p[0, 1] == (q.codes[0, 2] | q.codes[0, 3] << 4)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_quantiser_refuses_nan_and_inf(bad):
    x = np.ones((1, 32), np.float32)
    x[0, 3] = bad
    for fmt in ("nvfp4", "mxfp4"):
        with pytest.raises(QuantizeError, match="NaN or Inf"):
            quantize(x, fmt)


def test_quantiser_refuses_bad_shapes_and_dtypes():
    with pytest.raises(QuantizeError, match="multiple of 16"):
        quantize(np.ones((2, 24), np.float32), "nvfp4")
    with pytest.raises(QuantizeError, match="multiple of 32"):
        quantize(np.ones((2, 16), np.float32), "mxfp4")
    with pytest.raises(QuantizeError, match="float32"):
        quantize(np.ones((2, 16)), "nvfp4")
    with pytest.raises(QuantizeError, match="Format"):
        quantize(np.ones((2, 16), np.float32), "fp4")


# --- decode and block-scaled MMA ---------------------------------------------------------------

def test_nvfp4_decode_is_exact_in_fp16():
    codes, scales = np.meshgrid(ALL4, ALL8, indexing="ij")
    out = nvfp4.decode_elements(codes, scales, "nvfp4")
    value = nvfp4.e2m1_decode(codes).astype(np.float64) * nvfp4.ue4m3_decode(scales)
    nan = np.isnan(value)
    assert np.array_equal(nan, (scales >= 0x7F))           # 0x7F and every signed code
    assert (out[nan] == 0x7FFF).all()
    assert np.array_equal(out[~nan].view(np.float16).astype(np.float64), value[~nan])
    # Signs of zero follow the element.
    assert out[8, 0x38] == 0x8000 and out[0, 0x38] == 0x0000


def test_mxfp4_decode_is_exact_in_bf16_and_overflows_only_at_253():
    codes, scales = np.meshgrid(ALL4, ALL8, indexing="ij")
    out = nvfp4.decode_elements(codes, scales, "mxfp4")
    f = (out.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    value = nvfp4.e2m1_decode(codes).astype(np.float64) * np.exp2(scales.astype(np.float64) - 127)
    ok = scales <= 252
    assert np.array_equal(f[ok], value[ok])
    assert (out[:, 255] == 0x7FFF).all()
    # 6 * 2**(253-127) = 1.5 * 2**128 overflows BF16; 1 * 2**126 does not.
    assert out[7, 253] == 0x7F80 and out[15, 254] == 0xFF80 and out[2, 253] == 0x7E80
    assert np.isinf(f[:, 253:255]).any() and not np.isinf(f[:, :253]).any()


def test_block_scaled_gemm_semantics():
    rng = np.random.default_rng(4)
    a = rng.standard_normal((32, 64)).astype(np.float32)
    bt = rng.standard_normal((16, 64)).astype(np.float32)
    for fmt, f in (("nvfp4", np.float16), ("mxfp4", ml_dtypes.bfloat16)):
        qa, qbt = quantize(a, fmt), quantize(bt, fmt)
        d = nvfp4.gemm(qa, qbt)
        # The decoded operands are dequantize() without the tensor scale, exactly.
        ad = (qa.dequantize() / qa.tensor_scale).astype(f).view(np.uint16)
        bd = (qbt.dequantize() / qbt.tensor_scale).astype(f).view(np.uint16)
        core = matmul_t(ad, np.ascontiguousarray(bd.T), in_fmt="fp16" if f is np.float16 else "bf16")
        alpha = np.float32(qa.tensor_scale) * np.float32(qbt.tensor_scale)
        want = (core.view(np.float32) * alpha).view(np.uint32)
        assert np.array_equal(d, want), fmt
        # A given C joins the FP32 accumulation before the tensor scales apply.
        assert np.array_equal(nvfp4.gemm(qa, qbt, np.zeros((32, 16), np.uint32)), d)
        c = np.full((32, 16), np.float32(1.0)).view(np.uint32)
        from tcore.golden.mma import mma
        core_c = mma(ad, np.ascontiguousarray(bd.T), c, in_fmt="fp16" if f is np.float16 else "bf16")
        assert np.array_equal(nvfp4.gemm(qa, qbt, c), (core_c.view(np.float32) * alpha).view(np.uint32))


def test_scale_fp32_rounds_like_ieee_and_canonicalises_nan():
    d = np.array([0x3F800001, 0x00000001, 0x7F7FFFFF, 0x7FC00001, 0xFF800000], np.uint32)
    out = nvfp4.scale_fp32(d, np.float32(0.5))
    assert list(out[:3]) == list((d[:3].view(np.float32) * np.float32(0.5)).view(np.uint32))
    assert out[3] == 0x7FFFFFFF and out[4] == 0xFF800000
    assert nvfp4.scale_fp32(np.uint32(0x7F800000), np.float32(0))[()] == 0x7FFFFFFF
