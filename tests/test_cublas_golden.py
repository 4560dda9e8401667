"""tcore.golden.cublas: cuBLAS split-K, the addmm / linear epilogues and FP8 scales against the
``tests/data/silicon/torch_splitk/`` captures (no torch needed).

Expected values are the captured bits; the "rule bites" tests count how many captured outputs a
rule with one point changed misses, exactly.  The split-K alternatives are counted the way the
captures' README counts them (its figures: reverse order 1,902, pairwise 362, exact sum 1,402,
16-bit partials 3,852, 32-wide slices 2,835, S +- 1 246-3,154); the epilogue and FP8 ones are
the counts docs/numerics.md gives.
"""

import json
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

from tcore import golden
from tcore.golden import cublas
from tcore.golden.cublas import fma32, rne32, round_out, split_k_auto
from tcore.golden.silicon import cublas_calls, load, verify_cublas_file

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
    # Not measured (no capture has an output above 64 x 64 with K > 2048): the default chosen
    # for larger outputs is no split.
    assert split_k_auto(128, 8192, 128) == 1


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


#: The split-K files' plain products (as the README counts its split-K alternatives):
#: torch.mm with FP32 output (d32_rr0/1: 5,408 outputs) and with FP16/BF16 output (d_rr0/1,
#: d_matmulT_rr1: 8,112 outputs).
_MM_KEYS = ("d32_rr0", "d32_rr1", "d_rr0", "d_rr1", "d_matmulT_rr1")


def test_wrong_split_counts_miss():
    """S - 1 and S + 1 for each split-K file, the misses summed over the files per wrong S on
    the FP32 torch.mm outputs (d32_rr0, d32_rr1: 5,408 outputs): the README's 246-3,154."""
    miss = {}
    for data, a, b, key, kw in _calls(SPLIT_FILES):
        if key not in ("d32_rr0", "d32_rr1"):
            continue
        s = kw["split_k"]
        for wrong in (s - 1, s + 1):
            miss[wrong] = miss.get(wrong, 0) + _miss(golden.matmul(a, b, split_k=wrong), data[key])
    assert miss == {1: 1518, 2: 3154, 3: 1486, 4: 3154, 5: 408, 7: 412, 11: 252, 13: 246}


def _exact_sum(parts):
    """The partials summed exactly (float64 holds every sum here: the TwoSum error of each add
    is checked to be zero), rounded once to FP32."""
    acc = np.zeros_like(parts[0], np.float64)
    for p in parts:
        s = acc + p
        t = s - acc
        assert not ((acc - (s - t)) + (p - t)).any()       # TwoSum: no rounding error
        acc = s
    return acc.astype(np.float32)


def _pairwise(parts):
    while len(parts) > 1:
        parts = [parts[i] + parts[i + 1] for i in range(0, len(parts) - 1, 2)] + \
                ([parts[-1]] if len(parts) % 2 else [])
    return parts[0]


def _slices(k, s, width):
    steps = -(-k // width)
    w = -(-steps // s) * width
    return [(k0, min(k0 + w, k)) for k0 in range(0, k, w)]


def test_split_k_alternatives_miss():
    """Each way of combining the K slices that the captures reject, counted over the split-K
    files' torch.mm outputs (:data:`_MM_KEYS`, 13,520 outputs; the 16-bit partials over the
    8,112 FP16/BF16 ones): the captures' README's counts."""
    def partials(a, b, slices):
        return [golden.matmul(a[:, lo:hi].copy(), b[lo:hi].copy()) for lo, hi in slices]

    miss = dict(reverse=0, pairwise=0, exact=0, half_partials=0, slices32=0, rule=0)
    for data, a, b, key, kw in _calls(SPLIT_FILES):
        if key not in _MM_KEYS:
            continue
        k, s, out = a.shape[1], kw["split_k"], kw["out_dtype"]
        parts = partials(a, b, cublas.split_slices(k, s))
        assert _slices(k, s, 64) == cublas.split_slices(k, s)
        sums = dict(rule=cublas.split_k_reduce(parts),
                    reverse=cublas.split_k_reduce(parts[::-1]),
                    pairwise=_pairwise(parts), exact=_exact_sum(parts),
                    slices32=cublas.split_k_reduce(partials(a, b, _slices(k, s, 32))))
        for name, acc in sums.items():
            miss[name] += _miss(round_out(acc, out), data[key])
        if out is not np.float32:       # each partial kept in FP16/BF16, added in FP32
            half = cublas.split_k_reduce(round_out(p, out).astype(np.float32) for p in parts)
            miss["half_partials"] += _miss(round_out(half, out), data[key])
    assert miss == dict(reverse=1902, pairwise=362, exact=1402, half_partials=3852,
                        slices32=2835, rule=0)


def _acc(a, b, kw):
    return golden.matmul(a, b, **{k: v for k, v in kw.items() if k in ("split_k", "promote")})


def test_one_fma_misses_addmm_with_beta_one_and_the_split_k_reduce():
    """README: the single FMA alpha * acc + beta * C misses 23,664 beta = 1 outputs of the
    epilogue files and 779 of the 2,704 FP32 outputs of the split-K addmm (none of its 5,408
    FP16/BF16 ones)."""
    beta_one = split = split16 = 0
    for data, a, b, key, kw in _calls(FILES):
        if "c" not in kw:
            continue
        want = data[key]
        fma = round_out(fma32(np.float32(kw["alpha"]), _acc(a, b, kw),
                              rne32(np.float32(kw["beta"]) * kw["c"].astype(np.float32))),
                        kw["out_dtype"])
        if kw["split_k"] > 1 and want.dtype == np.uint32:
            split += _miss(fma, want)
        elif kw["split_k"] > 1:
            split16 += _miss(fma, want)
        elif kw["beta"] == 1:
            beta_one += _miss(fma, want)
        else:
            assert _miss(fma, want) == 0        # beta != 1: the single FMA is the rule
    assert (beta_one, split, split16) == (23_664, 779, 0)


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
    """(acc * scale_a[i]) * scale_b[j] (the row scale first) misses 21,422 of the 65,536 FP32
    row-wise outputs and 38 of the 131,072 BF16 ones (the _bias keys included, their bias added
    as the rule adds it) of the two FP8 files; the README gives 21,000-28,000 and 38-57."""
    f32 = b16 = 0
    for data, a, b, key, kw in _calls([p for p in FILES if "_fp8_" in p.name]):
        if not key.startswith("d_rw"):
            continue
        acc = _acc(a, b, kw)
        other = rne32(rne32(acc * kw["scale_a"]) * kw["scale_b"])
        if "bias" in kw:
            other = rne32(other + kw["bias"].astype(np.float32))
        other = round_out(other, kw["out_dtype"])
        if data[key].dtype == np.uint32:
            f32 += _miss(other, data[key])
        else:
            b16 += _miss(other, data[key])
    assert (f32, b16) == (21_422, 38)


def test_tensor_wise_bias_is_a_separate_fp32_add():
    """A bias on tensor-wise _scaled_mm: RNE32(RNE32(acc * s) + bias) misses none of the 8
    _bias outputs of the FP8 files (131,072); one fused fma32(s, acc, bias) misses 4, two each
    in h100_fp8_normal's d_tw_fast_f16_bias and d_tw_slow_f16_bias."""
    fused, separate = {}, 0
    for data, a, b, key, kw in _calls([p for p in FILES if "_fp8_" in p.name]):
        if not key.startswith("d_tw") or "bias" not in kw:
            continue
        acc, bias = _acc(a, b, kw), kw["bias"].astype(np.float32)
        s = rne32(kw["scale_a"] * kw["scale_b"])
        separate += _miss(round_out(rne32(rne32(acc * s) + bias), kw["out_dtype"]), data[key])
        n = _miss(round_out(fma32(s, acc, bias), kw["out_dtype"]), data[key])
        if n:
            fused[(_meta(data)["set"], key)] = n
    assert separate == 0
    assert fused == {("normal", "d_tw_fast_f16_bias"): 2, ("normal", "d_tw_slow_f16_bias"): 2}


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
    with pytest.raises(ValueError, match="scale_b must be float32"):
        golden.matmul(a8, b8, scale_a=np.ones((4, 1), np.float32),
                      scale_b=np.ones((1, 8), np.float64))
    with pytest.raises(cublas.NotModelled, match="block-wise"):
        golden.matmul(a8, b8, scale_a=np.ones((4, 2), np.float32), scale_b=one)


def test_python_float_scales_are_fp32():
    """scale_a / scale_b as Python floats or 0-d values: rounded once to FP32, the same bits
    as float32 scales (the h100_fp8_normal file's tensor-wise output)."""
    data = load(SPLITK / "h100_fp8_normal_e4m3_128x512x128.npz")
    a, b = _ab(data)
    meta = _meta(data)
    want = data["d_tw_fast_f32"]
    for sa, sb in ((meta["scale_a_tw"], meta["scale_b_tw"]),
                   (np.float64(meta["scale_a_tw"]), np.array(meta["scale_b_tw"]))):
        assert _miss(golden.matmul(a, b, scale_a=sa, scale_b=sb), want) == 0
