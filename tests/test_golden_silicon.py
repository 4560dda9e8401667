"""The golden model against every captured H200 vector: every output bit."""

import json

import numpy as np
import pytest

from tcore.golden import mma
from tcore.golden.formats import to_float
from tcore.golden.silicon import KERNELS, load, problem

from .conftest import SILICON

TILE_FILES = sorted(p.name for p in SILICON.glob("h200_*.npz") if "matmulT" not in p.name)
GEMM_FILES = sorted(p.name for p in SILICON.glob("h200_matmulT_*.npz"))


def test_silicon_files_are_present():
    assert len(TILE_FILES) == 9 and len(GEMM_FILES) == 4


@pytest.mark.parametrize("kernel", ["f16_f32", "bf16_f32", "f16_f16"])
@pytest.mark.parametrize("name", TILE_FILES + GEMM_FILES)
def test_golden_matches_silicon(name, kernel):
    data = load(SILICON / name)
    k = KERNELS[kernel]
    # Tile files are batches of 16x16x16 MMAs; a whole matmulT GEMM is one (M, K) x (K, N)
    # product whose K/16 steps chain from the file's c.  mma covers both.
    got = mma(data["a"], data["b"], data[k.c_key], in_fmt=k.in_fmt, out_fmt=k.out_fmt)
    want = data[k.d_key]
    assert got.dtype == want.dtype and got.shape == want.shape
    assert int((got != want).sum()) == 0


@pytest.mark.parametrize("kernel", ["f16_f32", "bf16_f32"])
@pytest.mark.parametrize("name", GEMM_FILES)
def test_float32_matmul_does_not_reproduce_silicon(name, kernel):
    """Teeth: a plain float32 GEMM of the same inputs differs from the H200 in many outputs."""
    data = load(SILICON / name)
    k = KERNELS[kernel]
    a, b = to_float(data["a"], k.in_fmt), to_float(data["b"], k.in_fmt)
    d32 = (a.astype(np.float32) @ b.astype(np.float32)).view(np.uint32)
    differ = (d32 != data[k.d_key]).mean()
    assert differ > 0.2, f"float32 matmul agrees too often ({1 - differ:.0%})"


def test_gemm_tiles_equal_whole_gemm():
    """Extracting 16x16 output tiles of a GEMM file and running them as tiles gives the GEMM."""
    data = load(SILICON / "h200_matmulT_wide_64x128x48.npz")
    prob = problem(data, "f16_f32")
    assert prob.gemm == (64, 128, 48) and prob.a.shape == (12, 16, 128)
    got = mma(prob.a, prob.b, prob.c)
    assert np.array_equal(got, prob.expected)
    first = problem(data, "f16_f32", tiles=4)
    assert np.array_equal(first.expected, prob.expected[:4])
    assert np.array_equal(first.expected[1], data["d_f16_f32"][0:16, 16:32])


def test_meta_is_informational():
    meta = json.loads(str(load(SILICON / "h200_normal.npz")["meta"]))
    assert "H200" in meta["device"]
