"""Hopper FP8 (wgmma), TF32 and INT8, and PyTorch's own GEMMs: the golden model against every
captured H200 output, each rule's parameters pinned by captures that a changed rule misses."""

import dataclasses
import json

import ml_dtypes
import numpy as np
import pytest

from tcore.golden import HOPPER, matmul, mma
from tcore.golden.arch import Step
from tcore.golden.formats import E4M3, E5M2, INF, NAN, TF32, classify, e4m3_encode, to_float
from tcore.golden.silicon import KERNELS, kernels_in, load
from tcore.sim.cli import main
from tcore.sim.commands.verify import KERNEL_NAMES

from .conftest import SILICON

LOWPREC = SILICON / "lowprec"
TORCH = SILICON / "torch"
LOWPREC_FILES = sorted(p.name for p in LOWPREC.glob("*.npz"))
TORCH_FILES = sorted(p.name for p in TORCH.glob("*.npz"))


def c_of(data, kernel):
    """The kernel's C, straight from the file (FP8 FP16-output: c rounded to FP16)."""
    c = data[kernel.c_key]
    if kernel.c_to_f16:
        with np.errstate(over="ignore"):
            c = c.view(np.float32).astype(np.float16).view(np.uint16)
    return c


def run(data, name, **change):
    """The golden model on a file's own arrays (a tile batch or a whole GEMM alike)."""
    k = KERNELS[name]
    return mma(data["a"], data["b"], c_of(data, k), **{**k.mma_args(), **change})


def misses(files, name, **change):
    """Outputs of ``files`` that the rule with ``change`` gets wrong (the teeth of a parameter)."""
    total = 0
    for f in files:
        data = load(f)
        total += int((run(data, name, **change) != data[KERNELS[name].d_key]).sum())
    return total


def test_capture_files_are_present():
    assert len(LOWPREC_FILES) == 31 and len(TORCH_FILES) == 9
    assert sorted(KERNEL_NAMES) == sorted(KERNELS)        # the CLI's choices are the kernels


@pytest.mark.parametrize("name", LOWPREC_FILES + TORCH_FILES)
def test_golden_matches_every_kernel_of_every_capture(name):
    path = (LOWPREC if name in LOWPREC_FILES else TORCH) / name
    data = load(path)
    kinds = kernels_in(data)
    assert kinds, f"{name} has no d_<kernel> array"
    kind = json.loads(str(data["meta"]))["kind"]
    for kernel in kinds:
        got = run(data, kernel)
        want = data[KERNELS[kernel].d_key]
        assert got.dtype == want.dtype and got.shape == want.shape
        bad = int((got != want).sum())
        assert bad == 0, f"{name} ({kind}) {kernel}: {bad} of {want.size} outputs differ"


def test_every_new_kernel_is_captured():
    seen = set()
    for f in LOWPREC_FILES:
        seen |= set(kernels_in(load(LOWPREC / f)))
    for f in TORCH_FILES:
        seen |= set(kernels_in(load(TORCH / f)))
    assert seen == set(KERNELS) - {"f16_f16"}     # FP16-output FP16 is in the older captures


def test_fp8_results_keep_13_fraction_bits():
    data = load(LOWPREC / "h200_fp8_normal43.npz")
    d = data["d_e4m3_f32"]
    assert np.all(d & 0x3FF == 0) and np.any(d & 0x400)


# --- each parameter pinned: the rule with it changed misses captured outputs ---------------

FP8_FILES = [LOWPREC / f for f in LOWPREC_FILES if f.startswith("h200_fp8_")]
TF32_FILES = [LOWPREC / f for f in LOWPREC_FILES if f.startswith("h200_tf32_")]
INT8_FILES = [LOWPREC / f for f in LOWPREC_FILES if f.startswith("h200_int8_")]
FP8_CHAIN = [LOWPREC / f for f in LOWPREC_FILES if f.startswith("h200_wgmma_chain_fp8")]


def hopper_with(kind, **change):
    steps = dict(HOPPER.steps)
    steps[kind] = dataclasses.replace(steps[kind], **change)
    return dataclasses.replace(HOPPER, name=f"hopper-{kind}-changed", steps=steps)


FP8_CHANGES = {"n16": {"block": 16}, "F25": {"grid": 25}, "F14": {"grid": 14},
               "nocut": {"fp32_cut": None}}


@pytest.mark.parametrize("kernel,change", [
    (k, c) for k in ("e4m3_f32", "e5m2_f32", "e4m3_e5m2_f32", "e4m3_f16") for c in FP8_CHANGES
    if not (k == "e4m3_f16" and c == "nocut")])       # the cut is of FP32 results only
def test_fp8_parameters_are_pinned(kernel, change):
    assert misses(FP8_FILES, kernel, arch=hopper_with("fp8", **FP8_CHANGES[change])) > 0


def test_fp8_cut_is_not_an_fp16_output_parameter():
    """The cut applies to FP32 results only: FP16 outputs are the same with and without it."""
    assert misses(FP8_FILES[:3], "e4m3_f16", arch=hopper_with("fp8", fp32_cut=None)) == 0


def test_fp8_chains_step_by_step():
    """K = 256 as one step of 256 (no chaining) misses the captured wgmma chains."""
    assert misses(FP8_CHAIN, "e4m3_f32", arch=hopper_with("fp8", block=256)) > 0


@pytest.mark.parametrize("change", [{"block": 4}, {"block": 2}, {"grid": 24}, {"grid": 26}],
                         ids=["n4", "n2", "F24", "F26"])
def test_tf32_parameters_are_pinned(change):
    """(The captures are K = 8: they pin n >= 8, and no block wider than K can show.)"""
    assert misses(TF32_FILES, "tf32_f32", arch=hopper_with("tf32", **change)) > 0


def test_tf32_inputs_are_truncated_not_rounded():
    """Rounding the FP32 patterns to TF32 (nearest-even) instead of dropping 13 bits misses."""
    def rne_tf32(bits):
        b = bits.astype(np.uint64)
        keep = (b + 0xFFF + ((b >> 13) & 1)) & ~np.uint64(0x1FFF)
        finite = (bits & 0x7F800000) != 0x7F800000
        return np.where(finite, keep, b).astype(np.uint32)

    bad = 0
    for f in TF32_FILES:
        data = load(f)
        got = mma(rne_tf32(data["a"]), rne_tf32(data["b"]), data["c"], in_fmt="tf32", out_fmt="fp32")
        bad += int((got != data["d_tf32_f32"]).sum())
    assert bad > 0


def test_tf32_c_is_not_masked():
    """C keeps all 24 bits: masking it like the inputs misses captured outputs."""
    bad = 0
    for f in TF32_FILES:
        data = load(f)
        c = data["c"] & np.uint32(0xFFFFE000)
        bad += int((mma(data["a"], data["b"], c, in_fmt="tf32") != data["d_tf32_f32"]).sum())
    assert bad > 0


def test_int8_wraps_and_saturates_where_captured():
    assert misses(INT8_FILES, "s8_s32", saturate=True) > 0
    assert misses(INT8_FILES, "s8_s32_sat", saturate=False) > 0
    assert misses(INT8_FILES, "u8_s8_s32", in_fmt="s8", b_fmt="s8") > 0   # A read as signed


@pytest.mark.parametrize("name", [f for f in TORCH_FILES if "fp8" in f and "x128x" not in f])
def test_torch_fp8_accumulations_differ(name):
    """cuBLASLt's default (promoted) and fast FP8 accumulations are both needed: each rule
    misses the other's outputs (where K > 128; with K = 128 the two are the same sum)."""
    data = load(TORCH / name)
    assert int((run(data, "e4m3_f32", promote=128) != data["d_e4m3_f32"]).sum()) > 0
    assert int((run(data, "e4m3_f32_p128", promote=None) != data["d_e4m3_f32_p128"]).sum()) > 0


# --- the codecs -----------------------------------------------------------------------------

ALL8 = np.arange(256, dtype=np.uint8)


@pytest.mark.parametrize("fmt,dtype", [(E4M3, ml_dtypes.float8_e4m3fn), (E5M2, ml_dtypes.float8_e5m2)])
def test_fp8_codecs_equal_ml_dtypes_on_every_code(fmt, dtype):
    want = ALL8.view(dtype).astype(np.float64)
    got = to_float(ALL8, fmt)
    assert np.array_equal(got, want, equal_nan=True)
    cls = classify(ALL8, fmt)
    assert np.array_equal(cls == NAN, np.isnan(want)) and np.array_equal(cls == INF, np.isinf(want))


def test_e4m3_has_no_inf_and_two_nans():
    cls = classify(ALL8, E4M3)
    assert not np.any(cls == INF) and list(ALL8[cls == NAN]) == [0x7F, 0xFF]
    assert to_float(np.uint8(0x7E), E4M3) == 448.0


def test_e4m3_encoder_round_trips_every_finite_code():
    v = to_float(ALL8, E4M3).astype(np.float32)
    ok = np.isfinite(v)
    assert np.array_equal(e4m3_encode(v[ok]), ALL8[ok])


def test_tf32_ignores_13_low_bits_and_classifies_after_masking():
    bits = np.array([0x3F801FFF, 0x7F800001, 0x7F802000, 0x00001FFF, 0x80001000], np.uint32)
    assert list(to_float(bits, TF32)[[0, 3]]) == [1.0, 0.0]
    assert list(classify(bits, TF32)) == [2, INF, NAN, 0, 0]


# --- golden.matmul: floats in ---------------------------------------------------------------

def test_matmul_floats_equal_the_bits_model_on_torch_captures():
    data = load(TORCH / "h200_torch_fp8_128x128x128.npz")
    a, b = data["a"].view(ml_dtypes.float8_e4m3fn), data["b"].view(ml_dtypes.float8_e4m3fn)
    assert np.array_equal(matmul(a, b, instr="wgmma").view(np.uint32), data["d_e4m3_f32"])
    assert np.array_equal(matmul(a, b, instr="wgmma", promote=128).view(np.uint32),
                          data["d_e4m3_f32_p128"])
    data = load(TORCH / "h200_torch_bf16_128x128x128.npz")
    a, b = data["a"].view(ml_dtypes.bfloat16), data["b"].view(ml_dtypes.bfloat16)
    assert np.array_equal(matmul(a, b).view(np.uint32), data["d_bf16_f32"])


def test_matmul_int8_and_tf32_on_captures():
    data = load(LOWPREC / "h200_int8_extreme.npz")
    a, b, c = data["a"], data["b"].view(np.int8), data["c"].view(np.int32)
    assert np.array_equal(matmul(a.view(np.int8), b, c).view(np.uint32), data["d_s8_s32"])
    assert np.array_equal(matmul(a.view(np.int8), b, c, saturate=True).view(np.uint32),
                          data["d_s8_s32_sat"])
    assert np.array_equal(matmul(a, b, c).view(np.uint32), data["d_u8_s8_s32"])
    data = load(LOWPREC / "h200_tf32_normal.npz")
    got = matmul(data["a"].view(np.float32), data["b"].view(np.float32), data["c"].view(np.float32))
    assert np.array_equal(got.view(np.uint32), data["d_tf32_f32"])


def test_matmul_fp8_fp16_output_on_captures():
    data = load(LOWPREC / "h200_fp8_wide43.npz")
    a, b = data["a"].view(ml_dtypes.float8_e4m3fn), data["b"].view(ml_dtypes.float8_e5m2)
    with np.errstate(over="ignore"):
        c16 = data["c"].view(np.float32).astype(np.float16)
    assert np.array_equal(matmul(a, b, data["c"].view(np.float32), instr="wgmma").view(np.uint32),
                          data["d_e4m3_e5m2_f32"])
    a8 = data["a"].view(ml_dtypes.float8_e4m3fn)
    got = matmul(a8, data["b"].view(ml_dtypes.float8_e4m3fn), c16, out="fp16", instr="wgmma")
    assert got.dtype == np.float16 and np.array_equal(got.view(np.uint16), data["d_e4m3_f16"])


def test_matmul_differs_from_numpy_where_the_rule_says():
    """1 + 3 x 2**-24: the H200 truncates the sum to 1 + 2**-23, numpy rounds to nearest."""
    a = np.array([[1, 2**-12, 2**-12, 2**-12]], np.float16)
    d = matmul(a, a.T.copy())
    assert d.dtype == np.float32 and d[0, 0] == np.float32(1 + 2**-23)
    assert float((a.astype(np.float64) @ a.T.astype(np.float64))[0, 0]) == 1 + 3 * 2**-24


def test_matmul_int8_saturates_per_32_wide_step():
    """K = 64 from c = 2**31 - 1001: the first 32-wide step adds 32 * 127 * 127 and is clamped
    to 2**31 - 1, the second subtracts the same, so per-step clamping ends 32 * 127 * 127 below
    the top; the exact sum (and clamping once at the end) is c itself, and so is wrapping."""
    a = np.full((1, 64), 127, np.int8)
    b = np.concatenate([np.full((32, 1), 127, np.int8), np.full((32, 1), -127, np.int8)])
    c = np.array([[2**31 - 1 - 1000]], np.int32)
    assert matmul(a, b, c, saturate=True)[0, 0] == 2**31 - 1 - 32 * 127 * 127
    assert matmul(a, b, c)[0, 0] == 2**31 - 1 - 1000           # wraps and comes back exactly
    assert matmul(a.astype(np.uint8), b, c)[0, 0] == 2**31 - 1 - 1000


def test_matmul_wgmma_equals_mma_for_non_fp8():
    rng = np.random.default_rng(7)
    for dtype in (np.float16, ml_dtypes.bfloat16, np.float32):
        a = rng.standard_normal((3, 16, 40)).astype(dtype)
        b = rng.standard_normal((40, 24)).astype(dtype)
        assert np.array_equal(matmul(a, b).view(np.uint32), matmul(a, b, instr="wgmma").view(np.uint32))


def test_matmul_shapes_and_broadcasting():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((2, 1, 5, 33)).astype(np.float16)
    b = rng.standard_normal((3, 33, 7)).astype(np.float16)
    d = matmul(a, b)
    assert d.shape == (2, 3, 5, 7) and d.dtype == np.float32
    for i in range(2):
        for j in range(3):
            assert np.array_equal(d[i, j].view(np.uint32), matmul(a[i, 0], b[j]).view(np.uint32))
    assert matmul(np.zeros((0, 4), np.float16), np.zeros((4, 3), np.float16)).shape == (0, 3)


@pytest.mark.parametrize("a,b,kw,err,msg", [
    (np.float16, np.float32, {}, TypeError, "float16 (FP16)"),
    (np.float64, np.float64, {}, TypeError, "not a float64"),
    (np.int8, np.uint8, {}, TypeError, "int8/uint8 a with int8 b"),
    (ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e4m3fn, {"instr": "mma"}, ValueError, "instr='wgmma'"),
    (ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e4m3fn, {"instr": "wgmma", "arch": "ampere"},
     ValueError, "no FP8 path"),
    (np.float32, np.float32, {"out": "fp16"}, ValueError, "tf32 inputs accumulate in fp32"),
    (ml_dtypes.bfloat16, ml_dtypes.bfloat16, {"out": "fp16"}, ValueError,
     "unsupported operation bf16->fp16"),
    (np.float16, np.float16, {"promote": 128}, ValueError, "promote"),
    (np.float16, np.float16, {"saturate": True}, ValueError, "saturate"),
    (np.float16, np.float16, {"out": "bf16"}, ValueError, "out must be"),
])
def test_matmul_refuses_what_it_does_not_model(a, b, kw, err, msg):
    with pytest.raises(err, match=msg.replace("(", r"\(").replace(")", r"\)")):
        matmul(np.ones((2, 4), a), np.ones((4, 2), b), **kw)


def test_matmul_c_dtype_must_match_the_accumulator():
    with pytest.raises(TypeError, match="c must be float16"):
        matmul(np.ones((2, 4), np.float16), np.ones((4, 2), np.float16), np.zeros((2, 2), np.float32),
               out="fp16")


def test_bit_arrays_of_the_wrong_dtype_name_the_view():
    with pytest.raises(TypeError, match=r"x.view\(np.uint16\)"):
        mma(np.ones((2, 4), np.float16), np.ones((4, 2), np.uint16), np.zeros((2, 2), np.uint32))


def test_parameter_table_rows():
    """The Hopper rows of docs/numerics.md, as the golden model reads them."""
    assert HOPPER.step("fp16") == Step(16, 25, -21) == HOPPER.step("bf16")
    assert HOPPER.step("fp8") == Step(32, 13, None, 13)
    assert HOPPER.step("tf32") == Step(8, 25)
    assert HOPPER.step("int8").grid is None and HOPPER.step("int8").block == 32


# --- tcore verify on the new kernels ---------------------------------------------------------

def cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_verify_every_capture(capsys):
    files = [str(LOWPREC / f) for f in LOWPREC_FILES] + [str(TORCH / f) for f in TORCH_FILES]
    code, out, _ = cli(capsys, "verify", *files)
    last = out.strip().splitlines()[-1]
    assert code == 0 and last.startswith("checked ") and last.endswith(" mismatches 0")
    assert int(last.split()[1]) == 1_556_480 + 591_104


def test_verify_one_kernel_and_mismatch_exit(tmp_path, capsys):
    f = LOWPREC / "h200_fp8_single.npz"
    code, out, _ = cli(capsys, "verify", str(f), "--kernel", "e4m3_f16")
    assert code == 0 and out.strip().splitlines()[-1] == "checked 20480 mismatches 0"
    data = dict(np.load(f))
    data["d_e4m3_f16"] = data["d_e4m3_f16"].copy()
    data["d_e4m3_f16"][3, 2, 1] ^= 1
    bad = tmp_path / "bad.npz"
    np.savez(bad, **data)
    code, out, _ = cli(capsys, "verify", str(bad), "--kernel", "e4m3_f16")
    assert code == 1 and out.strip().splitlines()[-1] == "checked 20480 mismatches 1"


@pytest.mark.parametrize("argv,msg", [
    (["h200_fp8_bits.npz", "--kernel", "e4m3_f32", "--arch", "ampere"], "no FP8 path"),
    (["h200_tf32_bits.npz", "--kernel", "tf32_f32", "--arch", "volta"], "no TF32 path"),
    (["h200_fp8_bits.npz", "--arch", "ampere"], "nothing to check"),
    (["h200_int8_small.npz", "--backend", "verilator", "--through", "gemm"], "tile file"),
    (["h200_fp8_bits.npz", "--kernel", "tf32_f32"], "missing key 'd_tf32_f32'"),
])
def test_verify_refuses_what_cannot_run(argv, msg, capsys):
    code, out, err = cli(capsys, "verify", str(LOWPREC / argv[0]), *argv[1:])
    assert code == 2 and msg in err


def test_verify_all_on_ampere_skips_new_kernels_with_a_note(capsys):
    code, out, _ = cli(capsys, "verify", str(LOWPREC / "h200_wgmma_chain_f16_pos.npz"),
                       str(LOWPREC / "h200_int8_small.npz"), "--arch", "ampere")
    assert "skipping s8_s32: ampere has no INT8 path" in out
    assert out.strip().splitlines()[-1].startswith("checked 20480 mismatches ")


@pytest.mark.parametrize("mutate,msg", [
    (lambda d: d.update(a=d["a"].astype(np.uint16)), "'a' must be uint8"),
    (lambda d: d.update(b=d["b"][:, :16]), "'b' shape"),
    (lambda d: d.pop("c"), "missing key 'c'"),
    (lambda d: d.update(d_s8_s32=d["d_s8_s32"].astype(np.int64)), "'d_s8_s32' must be uint32"),
])
def test_verify_malformed_lowprec_files_exit_2(tmp_path, capsys, mutate, msg):
    data = dict(np.load(LOWPREC / "h200_int8_small.npz"))
    mutate(data)
    f = tmp_path / "bad.npz"
    np.savez(f, **data)
    code, out, err = cli(capsys, "verify", str(f), "--kernel", "s8_s32")
    assert code == 2 and msg in err and out == ""


# --- the FP8 accumulation picture ------------------------------------------------------------

def test_fp8_accumulation_figures():
    """The 13-bit accumulator loses to the promoted one once K passes 128, and both to FP16
    inputs with FP32 accumulation (exact here: E4M3 products are short)."""
    from tcore.sim.plots import FP8_METHODS, fp8_accumulation_errors
    e = fp8_accumulation_errors(ks=[32, 128, 1024], m=16, n=16)
    chain, promoted, fp16 = (e["uniform [0.5,1.5]"][name] for name in FP8_METHODS)
    assert chain[0] == promoted[0] and chain[1] == promoted[1]     # K <= 128: the same sum
    assert chain[2] > 10 * promoted[2] > 0
    assert fp16 == [0.0, 0.0, 0.0]
    normal = e["normal"]
    assert normal[list(FP8_METHODS)[0]][2] > normal[list(FP8_METHODS)[1]][2]


def test_plot_fp8_accumulation_writes_a_png(tmp_path, monkeypatch, capsys):
    import tcore.sim.plots as plots
    monkeypatch.setattr(plots, "FP8_KS", [32, 256])
    real = plots.fp8_accumulation_errors
    monkeypatch.setattr(plots, "fp8_accumulation_errors",
                        lambda: real(ks=[32, 256], m=16, n=16))
    out = tmp_path / "fp8.png"
    assert main(["plot", "fp8-accumulation", "-o", str(out)]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[2].split()[0] == "32" and len(table[2].split()) == 7
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 20000


def test_bench_golden_has_a_line_per_input_kind(capsys):
    assert main(["benchmark", "golden", "--tiles", "4", "--json"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    r = json.loads(out[-1])
    assert set(r["kinds"]) == {"fp16_f32", "bf16_f32", "fp16_f16", "e4m3_f32", "tf32_f32", "s8_s32"}
    assert all(x["dots"] == 4 * 256 and x["dots_per_s"] > 0 and x["ratio"] > 0
               for x in r["kinds"].values())
    assert sum(line.startswith(("FP", "BF", "TF", "INT")) for line in out) == 6
    assert main(["benchmark", "golden", "--tiles", "0"]) == 2
