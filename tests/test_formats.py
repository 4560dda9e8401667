"""Bit formats against ml_dtypes on every 16-bit pattern, and FP32 on samples."""

import ml_dtypes
import numpy as np
import pytest

from tcore.golden import formats as F

ALL16 = np.arange(1 << 16, dtype=np.uint16)
NP_TYPES = {"fp16": np.float16, "bf16": ml_dtypes.bfloat16}


@pytest.mark.parametrize("name", ["fp16", "bf16"])
def test_value_of_every_pattern(name):
    want = ALL16.view(NP_TYPES[name]).astype(np.float64)
    got = F.to_float(ALL16, name)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    assert np.array_equal(got[ok], want[ok])
    assert np.array_equal(np.signbit(got[ok]), np.signbit(want[ok]))


@pytest.mark.parametrize("name", ["fp16", "bf16"])
def test_classify_every_pattern(name):
    x = ALL16.view(NP_TYPES[name]).astype(np.float64)
    fi = ml_dtypes.finfo(NP_TYPES[name])
    cls = F.classify(ALL16, name)
    assert np.array_equal(cls == F.NAN, np.isnan(x))
    assert np.array_equal(cls == F.INF, np.isinf(x))
    assert np.array_equal(cls == F.ZERO, x == 0)
    sub = np.isfinite(x) & (x != 0) & (np.abs(x) < float(fi.smallest_normal))
    assert np.array_equal(cls == F.SUBNORMAL, sub)


@pytest.mark.parametrize("name", ["fp16", "bf16"])
def test_decode_encode_round_trip_every_finite_pattern(name):
    fmt = F.get_format(name)
    finite = np.isfinite(ALL16.view(NP_TYPES[name]).astype(np.float64))
    bits = ALL16[finite]
    s, m, e = F.decode(bits, fmt)
    value = np.where(s == 1, -1.0, 1.0) * np.ldexp(m.astype(np.float64), (e - fmt.frac_bits).astype(np.int32))
    assert np.array_equal(value, bits.view(NP_TYPES[name]).astype(np.float64))
    assert np.array_equal(F.encode(s, m, e, fmt), bits)
    # Subnormals carry the minimum normal exponent (the nominal exponent of the rule).
    sub = F.classify(bits, fmt) == F.SUBNORMAL
    assert np.all(e[sub] == fmt.emin) and np.all(m[sub] < (1 << fmt.frac_bits))


def test_fp32_decode_and_pow2_on_samples():
    rng = np.random.default_rng(0)
    bits = np.concatenate([rng.integers(0, 1 << 32, 200000, dtype=np.uint64).astype(np.uint32),
                           np.array([0, 0x80000000, 1, 0x807FFFFF, 0x00800000, 0x7F7FFFFF], np.uint32)])
    x = bits.view(np.float32).astype(np.float64)
    fin = np.isfinite(x)
    s, m, e = F.decode(bits[fin], "fp32")
    got = np.where(s == 1, -1.0, 1.0) * np.ldexp(m.astype(np.float64), (e - 23).astype(np.int32))
    assert np.array_equal(got, x[fin])
    assert np.array_equal(F.encode(s, m, e, "fp32"), bits[fin])
    p = F.pow2_nominal(bits, "fp32")
    nz = fin & (x != 0)
    _, ex = np.frexp(np.abs(x[nz]))
    assert np.array_equal(p[nz], np.ldexp(1.0, np.maximum(ex - 1, -126)))
    assert np.all(p[x == 0] == 0)


def test_pow2_table_is_nominal_exponent():
    # 1.5 (0x3E00): nominal exponent 0; smallest subnormal 0x0001: -14; zero: 0.0 marker.
    p = F.pow2_table("fp16")
    assert p[0x3E00] == 1.0 and p[0x0001] == 2.0 ** -14 and p[0x0000] == 0.0 and p[0x8000] == 0.0
    assert F.pow2_table("bf16")[0x0001] == 2.0 ** -126


def test_bad_inputs_are_rejected():
    with pytest.raises(ValueError, match="Format must be one of"):
        F.get_format("fp8")
    with pytest.raises(TypeError, match="integer array"):
        F.decode(np.array([1.0]), "fp16")
    with pytest.raises(ValueError, match="subnormal significand"):
        F.encode(0, 5, 3, "fp16")
    with pytest.raises(ValueError, match="significand must be"):
        F.encode(0, 1 << 11, 0, "fp16")
