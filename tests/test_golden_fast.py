"""The golden model's compiled engine (numba kernels, golden/fast.py): the same bits as the NumPy
engine and as every captured H200 output, on any number of workers; and the FP8 default
instruction of golden.matmul."""

import ml_dtypes
import numpy as np
import pytest

from tcore.golden import matmul, mma
from tcore.golden import fast
from tcore.golden.mma import default_engine
from tcore.golden.silicon import KERNELS, kernels_in, load, problem

from .conftest import SILICON

pytestmark = pytest.mark.skipif(not fast.AVAILABLE, reason="numba does not import")

FILES = sorted(SILICON.glob("h200_*.npz")) + sorted((SILICON / "lowprec").glob("*.npz")) + \
    sorted((SILICON / "torch").glob("*.npz"))


def test_every_capture_file_is_covered():
    assert len(FILES) == 13 + 31 + 9


def test_compiled_is_the_default():
    assert default_engine() == "compiled"


def run(data, kernel, **kw):
    k = KERNELS[kernel]
    p = problem(data, kernel)
    c = p.c if p.gemm is None else (
        data[k.c_key] if not k.c_to_f16 else
        data[k.c_key].view(np.float32).astype(np.float16).view(np.uint16))
    if p.gemm is None:
        return mma(p.a, p.b, c, **k.mma_args(), **kw), p.expected
    return mma(data["a"], data["b"], c, **k.mma_args(), **kw), data[k.d_key]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_compiled_matches_silicon_and_the_numpy_engine(path):
    data = load(path)
    kernels = kernels_in(data)
    assert kernels
    for kernel in kernels:
        with np.errstate(over="ignore", invalid="ignore"):
            got, want = run(data, kernel, engine="compiled")
        assert got.dtype == want.dtype and got.shape == want.shape
        bad = int((got != want).sum())
        assert bad == 0, f"{path.name} {kernel}: {bad} of {want.size} outputs differ from silicon"
        with np.errstate(over="ignore", invalid="ignore"):
            twin, _ = run(data, kernel, engine="numpy")
        assert np.array_equal(got, twin)


@pytest.mark.parametrize("path", [p for p in FILES if "matmulT" in p.name or "torch" in str(p)],
                         ids=lambda p: p.name)
def test_whole_gemms_as_tiles(path):
    """A whole-GEMM capture cut into 16x16 output tiles (the tile kernel) gives the same bits
    as the GEMM itself (the column kernel) and as the capture."""
    data = load(path)
    for kernel in kernels_in(data):
        p = problem(data, kernel, tiles=64)
        with np.errstate(over="ignore", invalid="ignore"):
            got = mma(p.a, p.b, p.c, **p.kernel.mma_args(), engine="compiled")
        assert np.array_equal(got, p.expected), f"{path.name} {kernel}"


# --- workers -----------------------------------------------------------------------------

def random_case(rng, dtype, shape_a, shape_b):
    return rng.standard_normal(shape_a).astype(dtype), rng.standard_normal(shape_b).astype(dtype)


@pytest.mark.parametrize("dtype,kw", [
    (np.float16, {}), (np.float16, {"out": "fp16"}), (ml_dtypes.bfloat16, {}), (np.float32, {}),
    (ml_dtypes.float8_e4m3fn, {}), (ml_dtypes.float8_e5m2, {"out": "fp16"}),
    (ml_dtypes.float8_e4m3fn, {"promote": 128})])
@pytest.mark.parametrize("shapes", [((40, 16, 48), (40, 48, 16)), ((96, 300), (300, 80))],
                         ids=["tiles", "gemm"])
def test_workers_and_engines_agree(dtype, kw, shapes):
    rng = np.random.default_rng(11)
    a, b = random_case(rng, dtype, *shapes)
    one = matmul(a, b, workers=1, **kw)
    assert np.array_equal(one.view(np.uint8), matmul(a, b, workers=2, **kw).view(np.uint8))
    assert np.array_equal(one.view(np.uint8), matmul(a, b, workers=3, **kw).view(np.uint8))
    twin = matmul(a, b, engine="numpy", workers=2, **kw)
    assert np.array_equal(one.view(np.uint8), twin.view(np.uint8))
    assert np.array_equal(twin.view(np.uint8), matmul(a, b, engine="numpy", workers=1, **kw).view(np.uint8))


@pytest.mark.parametrize("sat", [False, True])
def test_int8_engines_and_workers_agree(sat):
    rng = np.random.default_rng(5)
    a = rng.integers(-128, 128, (50, 16, 96)).astype(np.int8)
    b = rng.integers(-128, 128, (50, 96, 16)).astype(np.int8)
    c = rng.integers(-2**31, 2**31, (50, 16, 16)).astype(np.int32)
    got = matmul(a, b, c, saturate=sat, workers=2)
    assert np.array_equal(got, matmul(a, b, c, saturate=sat, engine="numpy"))
    assert np.array_equal(got, matmul(a, b, c, saturate=sat, workers=1))
    assert np.array_equal(matmul(a.view(np.uint8), b, c, saturate=sat),
                          matmul(a.view(np.uint8), b, c, saturate=sat, engine="numpy"))


def test_int8_wrap_and_clamp_values():
    a = np.full((1, 64), 127, np.int8)
    b = np.full((64, 1), 127, np.int8)
    c = np.array([[2**31 - 100]], np.int32)
    assert matmul(a, b, c, saturate=True, engine="compiled")[0, 0] == 2**31 - 1
    assert matmul(a, b, c, engine="compiled")[0, 0] == 2**31 - 100 + 64 * 127 * 127 - 2**32


# --- special values, by hand --------------------------------------------------------------

INF16, NINF16, NAN16, ZERO16, NZERO16 = 0x7C00, 0xFC00, 0x7E00, 0x0000, 0x8000
ONE16, TWO16, MAX16, SUB16 = 0x3C00, 0x4000, 0x7BFF, 0x0001


def one_dot(a_bits, b_bits, c_bits, **kw):
    """d = sum a[k] b[k] + c for one output, through a 9-tile batch (tile kernel) and as one
    1x1 product (column kernel); both must agree."""
    a = np.array([a_bits], kw.pop("a_dtype", np.uint16))
    b = np.array([b_bits], a.dtype).T.copy()
    c = np.array([[c_bits]], kw.pop("c_dtype", np.uint32))
    one = mma(a, b, c, engine="compiled", **kw)
    tiles = mma(np.repeat(a[None], 9, 0), np.repeat(b[None], 9, 0), np.repeat(c[None], 9, 0),
                engine="compiled", **kw)
    twin = mma(a, b, c, engine="numpy", **kw)
    assert np.all(tiles == one[None]) and np.array_equal(one, twin)
    return int(one[0, 0])


def test_special_values_fp32_out():
    assert one_dot([NAN16, ONE16], [ONE16, ONE16], 0) == 0x7FFFFFFF           # NaN in: canonical
    assert one_dot([INF16, ONE16], [ZERO16, ONE16], 0) == 0x7FFFFFFF          # Inf x 0
    assert one_dot([INF16, NINF16], [ONE16, ONE16], 0) == 0x7FFFFFFF          # Inf - Inf
    assert one_dot([INF16, ONE16], [ONE16, ONE16], 0xFF800000) == 0x7FFFFFFF  # Inf + (-Inf c)
    assert one_dot([INF16, ONE16], [TWO16, ONE16], 0x3F800000) == 0x7F800000  # +Inf
    assert one_dot([NINF16], [ONE16], 0) == 0xFF800000                        # -Inf
    assert one_dot([ONE16], [ONE16], 0x7FC00001) == 0x7FFFFFFF                # NaN c
    assert one_dot([ONE16, ONE16], [ONE16, 0xBC00], 0) == 0                   # cancellation: +0
    assert one_dot([NZERO16], [ONE16], 0x80000000) == 0                       # -0 + -0: +0
    assert one_dot([SUB16], [SUB16], 0x80000000) == 0x27800000   # 2**-48, exact
    assert one_dot([ONE16], [ONE16], 0x7F7FFFFF) == 0x7F7FFFFF               # 1 truncated away
    # 1 + 3 x 2**-24 truncates to 1 + 2**-23 (a float32 sum would round to 1 + 2**-22)
    assert one_dot([ONE16, 0x0C00, 0x0C00, 0x0C00], [ONE16, 0x0C00, 0x0C00, 0x0C00], 0) == 0x3F800001
    # BF16: 2**-65 x 2**-65 = 2**-130 stays an FP32 subnormal (2**19 x 2**-149); 2**-150
    # truncates to +0, from either sign
    assert one_dot([0x1F00], [0x1F00], 0, in_fmt="bf16") == 0x00080000
    assert one_dot([0x1A00], [0x1A00], 0, in_fmt="bf16") == 0
    assert one_dot([0x9A00], [0x1A00], 0, in_fmt="bf16") == 0


def test_special_values_fp16_out():
    kw = {"out_fmt": "fp16", "c_dtype": np.uint16}
    assert one_dot([NAN16], [ONE16], 0, **kw) == 0x7FFF
    assert one_dot([INF16], [ZERO16], 0, **kw) == 0x7FFF
    assert one_dot([INF16, NINF16], [ONE16, ONE16], 0, **kw) == 0x7FFF
    assert one_dot([MAX16, MAX16], [ONE16, ONE16], 0, **kw) == 0x7C00        # overflow: Inf
    assert one_dot([MAX16], [0xBC00], 0xFBFF, **kw) == 0xFC00                 # -Inf
    assert one_dot([MAX16], [ONE16], 0x4C00, **kw) == 0x7C00    # 65504 + 16: the tie rounds up
    assert one_dot([MAX16], [ONE16], 0x4BFF, **kw) == 0x7BFF    # 65504 + 15.99: stays
    assert one_dot([ONE16], [0xBC00], 0x3C00, **kw) == 0                      # +0
    assert one_dot([SUB16], [ONE16], 0x8001, **kw) == 0                       # exact cancel
    assert one_dot([SUB16], [ONE16], 0, **kw) == SUB16                        # subnormal kept
    # 1 + 2**-11 (a tie) rounds to even (1); 1 + 3 x 2**-11 rounds up to 1 + 2**-9
    assert one_dot([ONE16, 0x1000], [ONE16, ONE16], 0, **kw) == 0x3C00
    assert one_dot([ONE16, 0x1000, 0x1000, 0x1000], [ONE16, ONE16, ONE16, ONE16], 0, **kw) == 0x3C02


def test_fp8_specials_and_cut():
    kw = {"in_fmt": "e4m3", "instr": "wgmma", "a_dtype": np.uint8}
    assert one_dot([0x7F, 0x38], [0x38, 0x38], 0, **kw) == 0x7FFFFFFF        # E4M3 NaN
    assert one_dot([0x7E], [0x7E], 0, **kw) == 0x48440000                    # 448 x 448 = 200704
    # 1 + 2**-14 (2**-7 x 2**-7): below the grid 2**(E-13), so 1
    assert one_dot([0x38, 0x04], [0x38, 0x04], 0, **kw) == 0x3F800000
    # 1.75 x 1.75 + 2**-13 = 3.0625 + 2**-13: on the grid, but the 13-bit cut of the FP32
    # result (exponent 1) drops it
    assert one_dot([0x3E, 0x08], [0x3E, 0x04], 0, **kw) == 0x40440000
    kw5 = {"in_fmt": "e5m2", "instr": "wgmma", "a_dtype": np.uint8}
    assert one_dot([0x7C, 0x3C], [0x00, 0x3C], 0, **kw5) == 0x7FFFFFFF       # Inf x 0
    assert one_dot([0x7C], [0x3C], 0, **kw5) == 0x7F800000


def test_tf32_nan_in_ignored_bits_reads_as_inf():
    kw = {"in_fmt": "tf32", "a_dtype": np.uint32}
    assert one_dot([0x7F800001], [0x3F800000], 0, **kw) == 0x7F800000
    assert one_dot([0x7F802000], [0x3F800000], 0, **kw) == 0x7FFFFFFF
    assert one_dot([0x3F801FFF], [0x3F800000], 0, **kw) == 0x3F800000


def test_fp16_rounding_equals_numpy_cast():
    """The kernels' own nearest-even rounding to FP16 against NumPy's float64 -> float16 cast:
    one FP16 product (exact, 22 bits) and c = 0, so the step rounds the product once.  Products
    whose nominal exponent is below the floor (-21) are left out (the grid could cut them)."""
    rng = np.random.default_rng(2)
    n = 40000
    a = rng.integers(0, 0x7C00, n, dtype=np.uint16) | (rng.integers(0, 2, n, dtype=np.uint16) << 15)
    b = rng.integers(0, 0x7C00, n, dtype=np.uint16)
    got = mma(a.reshape(-1, 1, 1), b.reshape(-1, 1, 1), np.zeros((n, 1, 1), np.uint16),
              out_fmt="fp16", engine="compiled").ravel()
    exact = a.view(np.float16).astype(np.float64) * b.view(np.float16).astype(np.float64)
    with np.errstate(over="ignore"):
        ref = exact.astype(np.float16).view(np.uint16).copy()
    ref[(ref & 0x7FFF) == 0] = 0
    nominal = np.maximum((a >> 10) & 31, 1).astype(int) + np.maximum((b >> 10) & 31, 1) - 30
    ok = nominal >= -21
    lo = (np.abs(exact) * 2.0 ** 24) % 1      # ties in the subnormal range are exercised
    assert ok.sum() > 20000 and np.any(ok & (lo == 0.5))
    assert np.array_equal(got[ok], ref[ok])


# --- the FP8 default instruction of golden.matmul --------------------------------------------

def test_matmul_fp8_defaults_to_wgmma():
    data = load(SILICON / "torch" / "h200_torch_fp8_128x128x128.npz")
    a, b = data["a"].view(ml_dtypes.float8_e4m3fn), data["b"].view(ml_dtypes.float8_e4m3fn)
    got = matmul(a, b)
    assert got.dtype == np.float32 and np.array_equal(got.view(np.uint32), data["d_e4m3_f32"])
    assert np.array_equal(matmul(a, b, promote=128).view(np.uint32), data["d_e4m3_f32_p128"])


def test_matmul_fp8_with_mma_sync_is_refused():
    a = np.ones((2, 32), ml_dtypes.float8_e4m3fn)
    with pytest.raises(ValueError, match=r"instr='wgmma'.*not instr='mma'"):
        matmul(a, a.T.copy(), instr="mma")


def test_engine_argument_checks(monkeypatch):
    a = np.ones((2, 16), np.float16)
    with pytest.raises(ValueError, match="Engine must be"):
        matmul(a, a.T.copy(), engine="gpu")
    with pytest.raises(ValueError, match="workers must be"):
        matmul(a, a.T.copy(), workers=0)
    monkeypatch.setattr(fast, "AVAILABLE", False)
    assert default_engine() == "numpy"
    assert matmul(a, a.T.copy())[0, 0] == 16.0            # falls back without an error
    with pytest.raises(RuntimeError, match="needs numba"):
        matmul(a, a.T.copy(), engine="compiled")
