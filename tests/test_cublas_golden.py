"""golden.cublas: cuBLAS split-K, the addmm / linear epilogues and FP8 scales against the
``tests/data/silicon/torch_splitk/`` captures (no torch needed).

Expected values are the captured bits; the "rule bites" tests count how many captured outputs a
rule with one point changed misses (the README of the captures gives the same counts where it
gives one).
"""

import json
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

import golden
from golden import cublas
from golden.cublas import fma32, rne32, round_out, split_k_auto
from golden.silicon import cublas_calls, load, verify_cublas_file

from .conftest import SILICON

SPLITK = SILICON / "torch_splitk"
FILES = sorted(SPLITK.glob("*.npz"))
SPLIT_FILES = [p for p in FILES if p.name.startswith("h100_splitk")]
_IN = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "e4m3": ml_dtypes.float8_e4m3fn}


def _meta(data):
    return json.loads(str(data["meta"]))


def _ab(data):
    dt = _IN[_meta(data)["dtype"]]
    return data["a"].view(dt), data["b"].view(dt)


def _miss(got, want):
    return int((np.asarray(got).view(want.dtype) != want).sum())


def test_the_capture_files_are_here_with_their_readme():
    assert len(FILES) == 16 and len(SPLIT_FILES) == 11
    assert (SPLITK / "README.md").is_file()
    total = sum(v.size for p in FILES for k, v in load(p).items() if k.startswith(("d_", "d32_")))
    assert total == 1_141_152


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_every_output_bit_exact_through_golden_matmul(path):
    checks = verify_cublas_file(path)
    data = load(path)
    assert [c.name for c in checks] == [k.removeprefix("d_") for k in data
                                        if k.startswith(("d_", "d32_"))]
    assert all(c.mismatches == 0 for c in checks), [(c.name, c.mismatches) for c in checks]
    assert sum(c.checked for c in checks) == sum(v.size for k, v in data.items()
                                                 if k.startswith(("d_", "d32_")))


@pytest.mark.parametrize("path", SPLIT_FILES, ids=lambda p: p.stem)
def test_split_count_auto_is_what_cublas_ran(path):
    data = load(path)
    meta = _meta(data)
    counts = set(meta["numSplitsK"].values())
    assert len(counts) == 1
    # every output key ran a splitK kernel with that count
    assert all(any("splitK" in k[0] for k in meta["kernels"][key]) for key in meta["numSplitsK"])
    assert split_k_auto(meta["M"], meta["K"], meta["N"]) == counts.pop()


def test_split_count_auto_on_the_h200_captures():
    """The dense cuBLAS references of sparse_torch/: 64x4096x64 ran split-K (S = 3 matches it),
    64x2048x64 and the 128-wide outputs did not."""
    sp = SILICON / "sparse_torch"
    data = load(sp / "h200_sparse_torch_f16_64x4096x64.npz")
    a, b = _ab(data)
    assert split_k_auto(64, 4096, 64) == 3
    assert _miss(golden.matmul(a, b, split_k=3), data["d_dense_f32"]) == 0
    assert _miss(golden.matmul(a, b, split_k=3, out_dtype=np.float16), data["d_dense"]) == 0
    assert _miss(golden.matmul(a, b), data["d_dense_f32"]) == 4078          # the plain chain
    for shape in ((64, 2048, 64), (128, 256, 128), (128, 512, 128), (256, 512, 256),
                  (16, 2048, 16)):
        assert split_k_auto(*shape) == 1
    assert split_k_auto(128, 8192, 128) == 1                # larger outputs are not split


def test_split_slices():
    assert cublas.split_slices(4096, 3) == [(0, 1408), (1408, 2816), (2816, 4096)]
    assert cublas.split_slices(100, 2) == [(0, 64), (64, 100)]
    assert cublas.split_slices(5120, 1) == [(0, 5120)]


# --- the rules bite: one point changed, the captures miss ------------------------------------------

def _calls(paths):
    for path in paths:
        data = load(path)
        a, b = _ab(data)
        for key, kw in cublas_calls(data, str(path)):
            yield data, a, b, key, kw


def test_the_plain_chain_misses_the_split_k_files():
    miss = {"fp32": [0, 0], "16": [0, 0]}
    for data, a, b, key, kw in _calls(SPLIT_FILES):
        want = data[key]            # addmm included: the non-split kernel's epilogue there
        got = golden.matmul(a, b, **(kw | {"split_k": 1}))
        m = miss["fp32" if want.dtype == np.uint32 else "16"]
        m[0] += _miss(got, want)
        m[1] += want.size
    assert miss == {"fp32": [8064, 8112], "16": [1836, 18928]}


def test_wrong_split_counts_miss():
    for data, a, b, key, kw in _calls(SPLIT_FILES):
        if key != "d32_rr0":
            continue
        s = kw["split_k"]
        for wrong in (s - 1, s + 1):
            assert _miss(golden.matmul(a, b, split_k=wrong), data[key]) > 0.9 * data[key].size


def _acc(a, b, kw):
    return golden.matmul(a, b, **{k: v for k, v in kw.items() if k in ("split_k", "promote")})


def test_one_fma_misses_addmm_with_beta_one_and_the_split_k_reduce():
    """README: the single FMA alpha * acc + beta * C misses 23,664 beta = 1 outputs of the
    epilogue files and 779 FP32 outputs of the split-K addmm."""
    beta_one = split = 0
    for data, a, b, key, kw in _calls(FILES):
        if "c" not in kw:
            continue
        want = data[key]
        fma = round_out(fma32(np.float32(kw["alpha"]), _acc(a, b, kw),
                              rne32(np.float32(kw["beta"]) * kw["c"].astype(np.float32))),
                        kw["out_dtype"])
        if kw["split_k"] > 1:
            split += _miss(fma, want)
        elif kw["beta"] == 1:
            beta_one += _miss(fma, want)
        else:
            assert _miss(fma, want) == 0        # beta != 1: the single FMA is the rule
    assert (beta_one, split) == (23_664, 779)


def test_one_rounding_of_acc_plus_bias_misses_linear():
    """README: rounding acc + bias once to FP16/BF16 (no FP32 rounding first) misses 7,623
    outputs of the epilogue files' F.linear."""
    miss = 0
    for data, a, b, key, kw in _calls([p for p in FILES if "_epi_" in p.name]):
        if key != "d_lin":
            continue
        exact = _acc(a, b, kw).astype(np.float64) + kw["bias"].astype(np.float64)  # exact sum
        miss += _miss(exact.astype(kw["out_dtype"]), data[key])
    assert miss == 7623


def test_row_wise_scales_multiply_the_column_scale_first():
    f32 = b16 = 0
    for data, a, b, key, kw in _calls([p for p in FILES if "_fp8_" in p.name]):
        if not key.startswith("d_rw") or "bias" in kw:
            continue
        acc = _acc(a, b, kw)
        other = round_out(rne32(rne32(acc * kw["scale_a"]) * kw["scale_b"]), kw["out_dtype"])
        if data[key].dtype == np.uint32:
            f32 += _miss(other, data[key])
        else:
            b16 += _miss(other, data[key])
    assert (f32, b16) == (21_422, 36)


def test_tensor_wise_scales_round_their_product_first():
    for data, a, b, key, kw in _calls([p for p in FILES if "_fp8_normal" in p.name]):
        if key != "d_tw_fast_f32":
            continue
        acc = _acc(a, b, kw)
        two = rne32(rne32(acc * kw["scale_a"]) * kw["scale_b"])     # two roundings instead
        assert _miss(two, data[key]) > 1000


# --- the FMA and the refusals ------------------------------------------------------------------------

def test_fma32_rounds_once():
    rng = np.random.default_rng(11)
    x = rng.standard_normal(2000).astype(np.float32)
    y = (rng.standard_normal(2000) * 2.0 ** rng.integers(-30, 30, 2000)).astype(np.float32)
    z = (-x.astype(np.float64) * y * (1 + rng.standard_normal(2000) * 2.0 ** -20)).astype(np.float32)
    got = fma32(x, y, z)
    for xi, yi, zi, gi in zip(x, y, z, got):
        exact = Fraction(float(xi)) * Fraction(float(yi)) + Fraction(float(zi))
        lo = np.float32(float(exact))
        cands = [lo, np.nextafter(lo, np.float32(np.inf)), np.nextafter(lo, np.float32(-np.inf))]
        best = min(cands, key=lambda c: (abs(Fraction(float(c)) - exact),
                                         int(np.array(c).view(np.uint32)) & 1))
        assert gi == best


def test_bad_arguments_name_themselves():
    a = np.ones((4, 256), np.float16)
    b = np.ones((256, 8), np.float16)
    with pytest.raises(ValueError, match=r"split_k=5 does not fit K=256.*split_k <= 4"):
        golden.matmul(a, b, split_k=5)
    with pytest.raises(ValueError, match="split_k"):
        golden.matmul(a, b, split_k=0)
    with pytest.raises(ValueError, match="out_dtype"):
        golden.matmul(a, b, out_dtype=np.int8)
    with pytest.raises(ValueError, match="bias"):
        golden.matmul(a, b, bias=np.ones(4, np.float16))
    with pytest.raises(ValueError, match="beta = 1"):
        golden.matmul(a, b, np.ones((4, 8), np.float16), split_k=2)
    a8, b8 = a.astype(ml_dtypes.float8_e4m3fn), b.astype(ml_dtypes.float8_e4m3fn)
    one = np.float32(1)
    with pytest.raises(ValueError, match="scale_a"):
        golden.matmul(a8, b8, scale_a=np.ones((4, 2), np.float32), scale_b=np.ones((1, 8), np.float32))
    with pytest.raises(ValueError, match="scale_a and scale_b"):
        golden.matmul(a8, b8, scale_a=one)
    with pytest.raises(ValueError, match="FP16/BF16"):
        golden.matmul(a8, b8, scale_a=one, scale_b=one, split_k=2)
    with pytest.raises(ValueError, match="FP8"):
        golden.matmul(a, b, scale_a=one, scale_b=one)
