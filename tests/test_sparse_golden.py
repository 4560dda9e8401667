"""The 2:4 sparse golden model (golden.sparse) against the H200's mma.sp / wgmma.sp / cuSPARSELt
captures, the alternatives that must miss them, the compressed format, the pruner and the CLI.

Expected outputs come from silicon (tests/data/silicon/sparse*/) or are worked out by hand in
the test; the model under test never supplies its own expected values.
"""

import json
import warnings

import ml_dtypes
import numpy as np
import pytest

from tcore.golden.formats import INF, NAN, classify
from tcore.golden.mma import mma
from tcore.golden.sparse import (SparseA, compress, cslt_mm, decompress, from_capture, is_sparse_file,
                           matmul_sp, mma_sp, prune_24, prune_24_bits, verify_file)
from tcore.numerics import Arch
from tcore.sim.cli import main

from .conftest import SILICON

SPARSE = SILICON / "sparse"
TORCH = SILICON / "sparse_torch"
TILE_FILES = sorted(SPARSE.glob("*.npz"))
TORCH_FILES = sorted(TORCH.glob("*.npz"))
FMT = {"f16": "fp16", "bf16": "bf16", "e4m3": "e4m3"}


def _load(path):
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def _quiet():
    """NumPy casts of the captures' special C values (NaN, huge) warn; the values are intended."""
    return warnings.catch_warnings(action="ignore", category=RuntimeWarning)


@pytest.fixture(scope="module")
def tiles():
    """Per tile file: data, in format, SparseA, classes, C rounded to FP16 (RNE, as captured)."""
    out = {}
    for path in TILE_FILES:
        d = _load(path)
        meta = json.loads(str(d["meta"]))
        fmt = FMT[meta["dtype"]]
        with _quiet():
            c16 = d["c"].view(np.float32).astype(np.float16).view(np.uint16)
        out[fmt] = dict(d=d, fmt=fmt, sp=from_capture(d["a"], d["a_meta"], fmt),
                        classes=meta["classes"], c16=c16)
    return out


def test_the_capture_files_are_here():
    assert [p.name for p in TILE_FILES] == ["h200_sparse_bf16.npz", "h200_sparse_f16.npz"]
    assert len(TORCH_FILES) == 9
    assert (SPARSE / "README.md").is_file() and (TORCH / "README.md").is_file()


# -- bit-exact on every capture --------------------------------------------------------------------

@pytest.mark.parametrize("path", TILE_FILES, ids=lambda p: p.stem)
def test_every_sparse_tile_kernel_bit_exact(path):
    with _quiet():
        checks = verify_file(path)
    d = _load(path)
    want = sorted(k[2:] for k in d if k.startswith("d_"))
    assert sorted(r.name for r in checks) == want and len(want) in (2, 4)
    for r in checks:
        assert r.kind == "sparse"
        assert r.checked == 432 * 256
        assert r.mismatches == 0, r


@pytest.mark.parametrize("path", TORCH_FILES, ids=lambda p: p.stem)
def test_every_torch_sparse_gemm_bit_exact(path):
    checks = verify_file(path)
    d = _load(path)
    sparse_keys = sorted(k[2:] for k in d if k.startswith("d_") and not k.startswith("d_dense"))
    assert sorted(r.name for r in checks if r.kind == "sparse") == sparse_keys
    assert sparse_keys
    m, n = d["a"].shape[0], d["b"].shape[1]
    for r in checks:
        if r.kind == "sparse":
            assert r.checked == m * n and r.mismatches == 0, r
        else:
            assert r.name.startswith("dense")


def test_mma_sp_directly_on_the_f16_capture(tiles):
    t = tiles["fp16"]
    d = t["d"]
    got = mma_sp(t["sp"], d["b"], d["c"], in_fmt="fp16", out_fmt="fp32")
    assert np.array_equal(got, d["d_f16_f32"]) and np.array_equal(got, d["d_wg_f16_f32"])
    got16 = mma_sp(t["sp"], d["b"], t["c16"], in_fmt="fp16", out_fmt="fp16")
    assert got16.dtype == np.uint16 and np.array_equal(got16, d["d_f16_f16"])


def test_the_dense_references_are_not_the_sparse_gemm():
    """cuBLAS on the same pruned A differs from cuSPARSELt (e.g. 17 FP16 outputs at 128x256x128)."""
    checks = {r.name: r for r in verify_file(TORCH / "h200_sparse_torch_f16_128x256x128.npz")}
    assert checks["dense"].kind == "dense" and checks["dense"].mismatches > 0
    d = _load(TORCH / "h200_sparse_torch_f16_128x256x128.npz")
    assert np.sum(d["d_dense"] != d["d_cslt"]) == checks["dense"].mismatches


# -- the alternatives miss -------------------------------------------------------------------------

def _miss(got, want):
    return int(np.sum(got != want))


@pytest.mark.parametrize("fmt,key,out", [("fp16", "d_f16_f32", "fp32"), ("fp16", "d_f16_f16", "fp16"),
                                         ("bf16", "d_bf16_f32", "fp32")])
def test_alternative_step_widths_and_the_dense_chain_miss(tiles, fmt, key, out):
    """Not two chained k16 halves (8 stored products a step), not steps of 4 stored products (8
    logical K), not the dense K/16 chain on the decompressed A: each misses >= 10 % of outputs
    (measured: 13-24 %, 20-40 %, 19-29 %)."""
    t = tiles[fmt]
    d, sp = t["d"], t["sp"]
    c = d["c"] if out == "fp32" else t["c16"]
    want = d[key]
    total = want.size
    assert _miss(mma_sp(sp, d["b"], c, in_fmt=fmt, out_fmt=out), want) == 0
    halves = _miss(mma_sp(sp, d["b"], c, in_fmt=fmt, out_fmt=out, block=8), want)
    fours = _miss(mma_sp(sp, d["b"], c, in_fmt=fmt, out_fmt=out, block=4), want)
    dense = _miss(mma(decompress(sp), d["b"], c, in_fmt=fmt, out_fmt=out, engine="numpy"), want)
    for n in (halves, fours, dense):
        assert n > 0.10 * total, (halves, fours, dense)


@pytest.mark.parametrize("fmt,key", [("fp16", "d_f16_f32"), ("bf16", "d_bf16_f32")])
def test_a_32_wide_dense_block_misses_only_where_pruned_b_is_special(tiles, fmt, key):
    """One fused 32-product block over the decompressed A (pruned zeros included) agrees wherever
    B's pruned rows are finite, and misses where an Inf/NaN sits there (0 x Inf = NaN would
    reach D; the sparse core never reads those rows) -- most of all in the prunedb class."""
    t = tiles[fmt]
    d, sp = t["d"], t["sp"]
    wide = Arch("wide32", block=32, grid=25, f16_floor=-21)
    with _quiet():
        got = mma(decompress(sp), d["b"], d["c"], in_fmt=fmt, out_fmt="fp32", arch=wide,
                  engine="numpy")
    bad = got != d[key]
    pruned = np.ones(d["a"].shape, bool)
    np.put_along_axis(pruned, sp.indices(), False, axis=-1)
    cls_b = classify(d["b"], fmt)
    special = ((cls_b == INF) | (cls_b == NAN)).astype(np.int64)
    reach = np.einsum("tmk,tkn->tmn", pruned.astype(np.int64), special) > 0
    assert not np.any(bad & ~reach)
    prunedb = d["cls"] == t["classes"].index("prunedb")
    assert bad[prunedb].mean() > 0.5
    # The pruned-B class really holds specials in B's pruned rows, and silicon's D is finite there.
    assert reach[prunedb].mean() > 0.5


def test_the_fp16_output_floor_matters(tiles):
    t = tiles["fp16"]
    d = t["d"]
    got = mma_sp(t["sp"], d["b"], t["c16"], in_fmt="fp16", out_fmt="fp16", floor=False)
    bad = got != d["d_f16_f16"]
    assert bad.sum() > 0
    floor_cls = t["classes"].index("floor")
    assert np.all(d["cls"][np.nonzero(bad)[0]] == floor_cls)


def test_torch_segment_k_and_step_width_matter():
    """segment_k_on files miss without the slices; FP8 steps of 32 logical K (16 stored) miss
    the 64-wide rule; the dense chain on the pruned A misses d_cslt."""
    d = _load(TORCH / "h200_sparse_torch_f16_cancel_64x2048x64.npz")
    sp = compress(d["a"], "fp16")
    assert np.array_equal(cslt_mm(sp, d["b"], in_fmt="fp16", segment_k=1024), d["d_cslt"])
    assert _miss(cslt_mm(sp, d["b"], in_fmt="fp16"), d["d_cslt"]) > 0
    dense = mma(d["a"], d["b"], np.zeros((64, 64), np.uint32), in_fmt="fp16", out_fmt="fp32",
                engine="numpy").view(np.float32).astype(np.float16).view(np.uint16)
    assert _miss(dense, d["d_cslt"]) > 0
    e = _load(TORCH / "h200_sparse_torch_e4m3_64x4096x64.npz")
    spe = compress(e["a"], "e4m3")
    assert np.array_equal(cslt_mm(spe, e["b"], in_fmt="e4m3", segment_k=2048), e["d_e4m3_f32_colB"])
    assert _miss(cslt_mm(spe, e["b"], in_fmt="e4m3"), e["d_e4m3_f32_colB"]) > 0
    e2 = _load(TORCH / "h200_sparse_torch_e4m3_128x256x128.npz")
    sp2 = compress(e2["a"], "e4m3")
    assert np.array_equal(cslt_mm(sp2, e2["b"], in_fmt="e4m3"), e2["d_e4m3_f32_colB"])
    assert _miss(cslt_mm(sp2, e2["b"], in_fmt="e4m3", block=16), e2["d_e4m3_f32_colB"]) > 0


# -- the rule on hand-worked cases -----------------------------------------------------------------

def _one_row(pairs, k=32, fmt_dtype=np.float16):
    """A (1, K) with the given {k: value} (2:4 by construction) and its bits."""
    a = np.zeros((1, k), fmt_dtype)
    for kk, v in pairs.items():
        a[0, kk] = v
    return a


def test_one_k32_step_is_one_alignment():
    """1 - 1 in the first k16 half, 2**-15 * 2**-15 = 2**-30 in the second: one step has
    E = 0, so 2**-30 falls below the 2**-25 grid and D = +0; two halves would give 2**-30."""
    a = _one_row({0: 1.0, 1: -1.0, 16: 2.0 ** -15})
    b = np.zeros((32, 1), np.float16)
    b[0, 0] = b[1, 0] = 1.0
    b[16, 0] = 2.0 ** -15
    d = matmul_sp(a, b, prune=False)
    assert d.view(np.uint32)[0, 0] == 0
    halves = matmul_sp(a, b, prune=False, block=8)
    assert float(halves[0, 0]) == 2.0 ** -30


def test_pruned_b_rows_are_never_read_and_stored_zero_times_inf_is_nan():
    a = _one_row({0: 2.0, 2: 3.0})               # group 0 keeps K 0 and 2; K 1 and 3 pruned
    b = np.ones((32, 1), np.float16)
    b[1, 0] = np.inf
    b[3, 0] = np.nan
    assert float(matmul_sp(a, b, prune=False)[0, 0]) == 5.0
    # A stored zero is an ordinary zero: 0 x Inf = NaN (canonical FP32 NaN).
    sp = SparseA(np.zeros((1, 16), np.uint16), np.array([[0x44444444]], np.uint32),
                 32, "fp16")
    b2 = np.ones((32, 1), np.float16)
    b2[0, 0] = np.inf                             # K 0 is stored (group 0 nibble 0x4: K 0, 1)
    got = mma_sp(sp, b2.view(np.uint16), np.zeros((1, 1), np.uint32))
    assert got[0, 0] == 0x7FFFFFFF


def test_fp8_step_fuses_64_logical_k():
    """E4M3: 32 stored products (64 logical K) a step.  1 - 1 at K 0, 1 and 2**-7 * 2**-7 =
    2**-14 at K 32 (stored column 16): in one step E = 0 and 2**-14 falls below the 2**-13 grid,
    D = +0; steps of 32 logical K (16 stored) would keep it."""
    e4 = ml_dtypes.float8_e4m3fn
    a = np.zeros((1, 64), e4)
    b = np.zeros((64, 1), e4)
    a[0, 0], a[0, 1], a[0, 32] = 1.0, -1.0, 2.0 ** -7
    b[0, 0], b[1, 0], b[32, 0] = 1.0, 1.0, 2.0 ** -7
    assert matmul_sp(a, b, prune=False).view(np.uint32)[0, 0] == 0
    assert float(matmul_sp(a, b, prune=False, block=16)[0, 0]) == 2.0 ** -14


# -- the compressed format -------------------------------------------------------------------------

def test_metadata_nibbles_in_ptx_order():
    a = np.zeros((1, 40), np.uint16)
    pos = {0: (0, 1), 1: (2, 3), 2: (1, 3), 3: (0, 1), 4: (0, 1), 5: (0, 1), 6: (0, 1),
           7: (0, 3), 8: (1, 2), 9: (0, 2)}
    for q, (i0, i1) in pos.items():
        a[0, 4 * q + i0] = 0x3C00 + q             # nonzero FP16 values
        a[0, 4 * q + i1] = 0x4000 + q
    sp = compress(a, "fp16")
    assert sp.meta.dtype == np.uint32 and sp.meta.shape == (1, 2)
    assert int(sp.meta[0, 0]) == 0xC4444DE4
    assert int(sp.meta[0, 1]) == 0x89                # groups 8 (1, 2) -> 0x9, 9 (0, 2) -> 0x8
    assert sp.values.shape == (1, 20)
    assert list(sp.values[0, :4]) == [0x3C00, 0x4000, 0x3C01, 0x4001]
    assert np.array_equal(decompress(sp), a)


def test_capture_round_trip(tiles):
    for t in tiles.values():
        d, sp = t["d"], t["sp"]
        assert sp.values.shape == (432, 16, 16) and sp.meta.shape == (432, 16, 1)
        assert np.array_equal(sp.to_dense(), d["a"])
        # The stored columns as the README defines them: take_along_axis(a, k, axis=2).
        nib = (d["a_meta"][..., None].astype(np.int64) >> (4 * np.arange(8))) & 0xF
        k = np.stack([4 * np.arange(8) + (nib & 3), 4 * np.arange(8) + (nib >> 2)], -1)
        k = k.reshape(432, 16, 16)
        assert np.array_equal(sp.indices(), k)
        assert np.array_equal(sp.values, np.take_along_axis(d["a"], k, axis=2))
        # Compressing the dense A again gives the same A back (metadata may differ only where
        # a group stores a zero).
        again = compress(d["a"], t["fmt"])
        assert np.array_equal(again.to_dense(), d["a"])
        both_nonzero = (sp.values.reshape(432, 16, 8, 2) != 0).all(-1)
        assert np.array_equal(again.indices().reshape(432, 16, 8, 2)[both_nonzero],
                              k.reshape(432, 16, 8, 2)[both_nonzero])


def test_torch_a_is_2_4_and_compresses():
    for path in TORCH_FILES:
        d = _load(path)
        fmt = FMT[json.loads(str(d["meta"]))["dtype"]]
        sp = compress(d["a"], fmt)
        assert sp.values.shape == (d["a"].shape[0], d["a"].shape[1] // 2)
        assert np.array_equal(sp.to_dense(), d["a"])
        assert np.array_equal(prune_24_bits(d["a"], fmt), d["a"])     # already 2:4: unchanged


def test_compress_keeps_minus_zero_and_fills_spare_slots_low():
    a = np.array([[0, 0x8000, 0, 0, 0, 0, 0, 0x3C00]], np.uint16)
    sp = compress(a, "fp16")
    assert list(sp.indices()[0]) == [0, 1, 4, 7]      # -0 at K 1 is a value; group 1 fills K 4
    assert np.array_equal(decompress(sp), a)


# -- the pruner ------------------------------------------------------------------------------------

@pytest.mark.parametrize("row,kept", [
    ([1.0, -3.0, 2.0, 0.5], [0.0, -3.0, 2.0, 0.0]),          # the two largest magnitudes
    ([2.0, 2.0, 2.0, 1.0], [2.0, 2.0, 0.0, 0.0]),            # ties: the lower K wins
    ([1.0, -2.0, 2.0, 1.0], [0.0, -2.0, 2.0, 0.0]),          # -2 and 2 tie in magnitude
    ([5.0, 1.0, 1.0, 1.0], [5.0, 1.0, 0.0, 0.0]),
    ([1.0, np.inf, 3.0, -np.inf], [0.0, np.inf, 0.0, -np.inf]),
    ([0.0, 0.0, 0.0, 7.0], [0.0, 0.0, 0.0, 7.0]),
])
def test_prune_keeps_two_largest_ties_to_lower_k(row, kept):
    x = np.array([row], np.float16)
    got = prune_24(x)
    assert got.dtype == np.float16
    assert got.tolist() == [kept]


def test_prune_keeps_nan_first_minus_zero_over_plus_zero():
    x = np.array([[1.0, np.nan, 3.0, 2.0, -0.0, 4.0, -1.0, 1.0]], np.float16)
    got = prune_24(x).view(np.uint16)
    assert (got[0, 1] & 0x7C00) == 0x7C00 and (got[0, 1] & 0x3FF) != 0       # NaN kept
    assert got[0].tolist()[2:] == [0x4200, 0, 0, 0x4400, 0xBC00, 0]             # 3.0; 4, -1 (tie: K 6)
    assert got[0, 0] == 0 and got[0, 3] == 0                                   # +0 where pruned
    zeros = prune_24_bits(np.array([[0, 0, 0x8000, 0], [0x8000, 0x8000, 0x8000, 0]], np.uint16), "fp16")
    assert zeros.tolist() == [[0, 0, 0x8000, 0], [0x8000, 0x8000, 0, 0]]       # -0 ranks above +0
    nan_pair = prune_24(np.array([[np.nan, np.inf, np.nan, 1.0]], np.float16)).view(np.uint16)
    assert nan_pair[0, 1] == 0 and nan_pair[0, 3] == 0


def test_prune_other_formats_and_bits():
    bf = np.array([[0.5, -0.25, 8.0, -8.0]], ml_dtypes.bfloat16)
    assert prune_24(bf).astype(np.float32).tolist() == [[0.0, 0.0, 8.0, -8.0]]
    e4 = np.array([[448.0, 1.0, 2.0, -448.0]], ml_dtypes.float8_e4m3fn)
    assert prune_24(e4).astype(np.float32).tolist() == [[448.0, 0.0, 0.0, -448.0]]
    assert prune_24_bits(np.array([[0x7F, 0x01, 0x7E, 0x02]], np.uint8), "e4m3").tolist() == \
        [[0x7F, 0, 0x7E, 0]]                     # E4M3 NaN above its max normal


def test_matmul_sp_prunes_by_default():
    a = np.array([[4.0, 1.0, 2.0, 3.0]], np.float16)       # keeps K 0 and 3
    b = np.array([[1.0], [1000.0], [1.0], [1.0]], np.float16)
    d = matmul_sp(a, b)
    assert d.dtype == np.float32 and d.tolist() == [[7.0]]
    d16 = matmul_sp(a, b, np.array([[0.5]], np.float16), out="fp16")
    assert d16.dtype == np.float16 and d16.tolist() == [[7.5]]
    with pytest.raises(ValueError, match="not 2:4 sparse"):
        matmul_sp(a, b, prune=False)


# -- errors ----------------------------------------------------------------------------------------

def test_error_messages():
    with pytest.raises(ValueError, match="multiple of 4"):
        compress(np.zeros((2, 6), np.uint16), "fp16")
    with pytest.raises(ValueError, match=r"row \(1,\), logical K 4\.\.7 holds 3 values"):
        a = np.zeros((2, 8), np.uint16)
        a[1, 4:7] = 0x3C00
        compress(a, "fp16")
    with pytest.raises(TypeError, match="must hold uint16 bit patterns"):
        compress(np.zeros((2, 8), np.float16), "fp16")
    with pytest.raises(TypeError, match="uint8 bit patterns"):
        compress(np.zeros((2, 8), np.uint16), "e4m3")
    with pytest.raises(ValueError, match="fmt of a 2:4 sparse A must be one of"):
        compress(np.zeros((2, 8), np.uint32), "tf32")
    with pytest.raises(ValueError, match=r"bad 2:4 metadata at row \(0,\), group 1 .*i0 < i1"):
        SparseA(np.zeros((1, 16), np.uint16), np.array([[0x44444414]], np.uint32), 32, "fp16")
    with pytest.raises(TypeError, match="meta must be uint32"):
        SparseA(np.zeros((1, 16), np.uint16), np.array([[0x44444444]], np.int64), 32, "fp16")
    with pytest.raises(ValueError, match="meta must be"):
        SparseA(np.zeros((1, 16), np.uint16), np.zeros((1, 2), np.uint32) + 0x44444444, 32, "fp16")
    a = np.zeros((1, 32), np.uint16)
    a[0, 2] = 0x3C00                               # K 2, but the metadata keeps K 0 and 1
    with pytest.raises(ValueError, match="a position a_meta prunes"):
        from_capture(a, np.array([0x44444444], np.uint32), "fp16")
    sp = compress(np.zeros((1, 32), np.uint16), "fp16")
    with pytest.raises(ValueError, match="K = 32"):
        mma_sp(sp, np.zeros((16, 8), np.uint16), np.zeros((1, 8), np.uint32))
    with pytest.raises(TypeError, match="c must hold uint32"):
        mma_sp(sp, np.zeros((32, 8), np.uint16), np.zeros((1, 8), np.uint16))
    with pytest.raises(TypeError, match="SparseA"):
        mma_sp(np.zeros((1, 32), np.uint16), np.zeros((32, 8), np.uint16), np.zeros((1, 8), np.uint32))
    with pytest.raises(ValueError, match="Output format for sparse bf16 inputs must be fp32"):
        mma_sp(compress(np.zeros((1, 32), np.uint16), "bf16"), np.zeros((32, 8), np.uint16),
               np.zeros((1, 8), np.uint16), in_fmt="bf16", out_fmt="fp16")
    with pytest.raises(TypeError, match="matmul_sp takes a as a SparseA"):
        matmul_sp(np.zeros((1, 4), np.float32), np.zeros((4, 1), np.float32))


def test_is_sparse_file():
    assert is_sparse_file(_load(TILE_FILES[0]))
    assert is_sparse_file(_load(TORCH_FILES[0]))
    assert not is_sparse_file(_load(SILICON / "h200_ints.npz"))


# -- the CLI ---------------------------------------------------------------------------------------

def _run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_verify_sparse_tile_files(capsys):
    with _quiet():
        code, out, _ = _run(capsys, "verify", *map(str, TILE_FILES))
    assert code == 0
    lines = out.strip().splitlines()
    assert len(lines) == 6 + 1
    assert all(line.endswith("mismatches 0") for line in lines)
    assert lines[-1] == f"checked {6 * 432 * 256} mismatches 0"


def test_cli_verify_torch_files(capsys):
    code, out, _ = _run(capsys, "verify", *map(str, TORCH_FILES))
    assert code == 0
    lines = out.strip().splitlines()
    assert lines[-1].endswith(" mismatches 0") and lines[-1].startswith("checked ")
    assert int(lines[-1].split()[1]) == 294912
    assert any("segment-K on" in ln for ln in lines)
    assert any("dense, expected to differ" in ln and "not counted" in ln for ln in lines)


def test_cli_verify_sparse_mismatch_exit_1(tmp_path, capsys):
    d = _load(SPARSE / "h200_sparse_bf16.npz")
    d["d_bf16_f32"] = d["d_bf16_f32"].copy()
    d["d_bf16_f32"][3, 2, 1] ^= 1
    f = tmp_path / "bad.npz"
    np.savez(f, **d)
    with _quiet():
        code, out, _ = _run(capsys, "verify", str(f), "--kernel", "bf16_f32")
    assert code == 1
    assert out.strip().splitlines()[-1] == f"checked {2 * 432 * 256} mismatches 1"


def test_cli_sparse_tiles_through_the_rtl_core_torch_files_refused(capsys):
    """Sparse tile files run through the RTL core's sparse beats (the RTL tests check every
    tile); PyTorch's sparse GEMM files, and other RTL paths, are refused with one line."""
    code, out, err = _run(capsys, "verify", str(TILE_FILES[1]), "--backend", "verilator",
                          "--tiles", "1", "--kernel", "f16_f32")
    assert code == 0 and out.strip().splitlines()[-1] == "checked 512 mismatches 0", (out, err)
    code, out, err = _run(capsys, "verify", str(TORCH_FILES[0]), "--backend", "verilator")
    assert code == 2 and out == "" and "--backend golden" in err and len(err.strip().splitlines()) == 1
    code, out, err = _run(capsys, "verify", str(TILE_FILES[1]), "--backend", "verilator",
                          "--through", "wmma")
    assert code == 2 and out == "" and "--through core" in err


def test_sparse_error_plot_data_and_png(tmp_path, capsys):
    """Same pruned inputs: the sparse GEMM (half as many RZ steps) is no worse than the dense chain."""
    pytest.importorskip("matplotlib")
    from tcore.sim.plots import sparse_errors
    e = sparse_errors(ks=[64, 512], m=16, n=16)
    for dist in e:
        assert all(0 < s <= d for s, d in zip(e[dist]["sparse"], e[dist]["dense"]))
    out = tmp_path / "sparse.png"
    code, text, _ = _run(capsys, "plot", "sparse", "-o", str(out))
    assert code == 0 and text.strip().endswith(f"wrote {out}")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 20000
