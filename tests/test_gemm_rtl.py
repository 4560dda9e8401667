"""The GEMM top (matmulT on 1, 2 and, under ``slow``, 8 warps): bench on both simulators, reset
in mid-run, every captured silicon GEMM, utilisation bounds, the CLI."""

import json

import numpy as np
import pytest

from tcore.golden.gemm import matmul_t
from tcore.golden.silicon import KERNELS, load
from tcore.sim.cli import main
from tcore.numerics import Op
from tcore.rtl.designs import preset
from tcore.sim.run import Operands, run
from tcore.sim.runner import run_bench

from .conftest import SILICON

GEMM = preset("lint", "gemm")
FP16 = Op.parse("fp16->fp32")


def random_operands(m, n, k, fmt, seed):
    return Op(fmt).random_operands(m, n, k, seed)


def gemm(backend, a, b, op=FP16, build=GEMM):
    """D = A*B on the GEMM top (``build``), or on the golden model, through the runner."""
    return run(None if backend == "golden" else build, op, Operands(a, b), backend)


GEMM_FILES = sorted(p.name for p in SILICON.glob("h200_matmulT_*.npz"))


# Icarus runs the GEMM top at ~70 clocks/s (tcore gemm --m 32 --n 32 --k 32 --backend icarus):
# its four random GEMMs stay under slow;
# test_tcore_gemm_fp16_accumulate_on_icarus keeps a small Icarus GEMM in make test.
@pytest.mark.parametrize("sim", ["verilator", pytest.param("icarus", marks=pytest.mark.slow)])
def test_gemm_bench_random(sim):
    tests = ["random_gemms", "reset_midrun"] if sim == "verilator" else ["random_gemms"]
    run_bench(sim, "gemm", "tcore.tb.gemm_bench", tests, params=GEMM.params,
              quiet=True)


# Two warps of 16-lane warps: how warps share the tiles and the memory does not depend on the
# core's size (test_gemm_top_eight_warps runs 64-lane warps), and their build is shorter.
def test_gemm_bench_random_two_warps():
    run_bench("verilator", "gemm", "tcore.tb.gemm_bench", ["random_gemms", "reset_midrun"],
              params=GEMM.replace(warps=2, lanes=16).params, quiet=True)


@pytest.mark.parametrize("warps,lanes,floor", [(1, 64, 0.97), (2, 16, 0.95)])
def test_gemm_top_bit_exact_and_busy(warps, lanes, floor):
    """128x128x128 FP16 -> FP32 on one 64-lane warp and two 16-lane ones: every bit equals the
    golden model, every FMA is done once (beats = MNK/64), and the warps are busy at least
    ``floor`` of the clocks (a beat takes 64 / lanes clocks)."""
    m = n = k = 128
    a, b = random_operands(m, n, k, "fp16", 7)
    build = GEMM.replace(warps=warps, lanes=lanes)
    r = gemm("verilator", a, b, build=build)
    assert np.array_equal(r.d, matmul_t(a, b))
    assert r.beats == m * n * k // 64
    util = r.beats * build.beat_clocks() / (r.cycles * warps)
    assert floor <= util <= 1, f"{warps} warp(s): utilisation {util:.3f} ({r.cycles} clocks)"


def test_gemm_top_in_amaranth_reads_d_through_its_host_port():
    """Amaranth's simulator runs the GEMM top and reads D back through the host port, one word
    a clock, each two clocks after its address (host_rdata is registered): bit-exact."""
    a, b = random_operands(16, 32, 16, "fp16", 3)
    r = gemm("amaranth", a, b, build=GEMM.replace(lanes=16))
    assert np.array_equal(r.d, matmul_t(a, b))
    assert r.beats == 16 * 32 * 16 // 64


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_gemm_top_eight_warps():
    """256x256x128 on 8 warps (a 13-minute build): bit-exact, utilisation at least 0.93."""
    m, n, k = 256, 256, 128
    a, b = random_operands(m, n, k, "fp16", 8)
    r = gemm("verilator", a, b, build=GEMM.replace(warps=8))
    assert np.array_equal(r.d, matmul_t(a, b))
    assert r.beats == m * n * k // 64
    util = r.beats / (r.cycles * 8)
    assert 0.93 <= util <= 1, f"8 warps: utilisation {util:.3f} ({r.cycles} clocks)"


@pytest.mark.slow
def test_gemm_top_large_k():
    """32 x 8192 x 32 on 1 warp: 512 chained K steps (past the old 8-bit step count) in a
    memory sized from the job (2 MiB, past the old fixed 512 KiB); every bit equals the golden
    model, every FMA done once, and the core stays busy."""
    m, n, k = 32, 32, 8192
    a, b = random_operands(m, n, k, "fp16", 9)
    r = gemm("verilator", a, b)
    assert np.array_equal(r.d, matmul_t(a, b))
    assert r.beats == m * n * k // 64
    assert r.beats / r.cycles >= 0.99, f"{r.cycles} clocks"


def test_memory_sized_from_the_job():
    """The GEMM top's memory: the next power of two of what the job needs, at least 512 KiB,
    refused past 64 MiB; the config's fields take K = 16384."""
    from amaranth.lib import data

    from tcore.rtl.gemm import GemmConfig
    from tcore.sim.gemm import MAX_WORDS, MIN_WORDS, mem_words_for, words_needed
    assert mem_words_for(1) == MIN_WORDS == 32768
    assert mem_words_for(32769) == 65536 and mem_words_for(65536) == 65536
    assert mem_words_for(words_needed(32, 32, 8192, FP16)) == 131072
    assert mem_words_for(words_needed(48, 32, 4096, FP16)) == 65536     # the held-back capture
    assert mem_words_for(MAX_WORDS) == MAX_WORDS
    with pytest.raises(ValueError, match="memory words"):
        mem_words_for(MAX_WORDS + 1)
    fields = {name: f.width for name, f in data.Layout.cast(GemmConfig)}
    assert (1 << fields["steps"]) > 16384 // 16 and (1 << fields["tiles_m"]) > 16384 // 16


@pytest.mark.slow
def test_silicon_gemm_through_gemm_top_on_icarus(capsys):
    """The smallest captured whole GEMM through the GEMM top on Icarus, FP16 -> FP32 (about
    4 k clocks at ~16 clocks/s): every output equals the H200's."""
    name = "h200_matmulT_normal_64x64x64.npz"
    code = main(["verify", str(SILICON / name), "--backend", "icarus", "--kernel", "f16_f32"])
    out = capsys.readouterr().out.strip().splitlines()
    assert code == 0 and out[-1] == f"checked {64 * 64} mismatches 0", out[-4:]
    assert " clk" in out[-2]


@pytest.mark.parametrize("name", GEMM_FILES)
def test_silicon_gemm_through_gemm_top(name, capsys):
    """Every output of a captured matmulT GEMM, through the GEMM top, equals the H200's."""
    code = main(["verify", str(SILICON / name), "--backend", "verilator"])
    out = capsys.readouterr().out.strip().splitlines()
    m, n = load(SILICON / name)["d_f16_f32"].shape
    assert code == 0 and out[-1] == f"checked {3 * m * n} mismatches 0"
    assert all(" clk" in line for line in out[:-1])        # ran on the GEMM top


def test_tcore_gemm_json(capsys):
    code = main(["gemm", "--m", "64", "--n", "32", "--k", "64", "--backend", "verilator", "--json"])
    r = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 0 and r["mismatches"] == 0
    for key in ("m", "n", "k", "warps", "backend", "cycles", "fma_per_cycle", "peak_fma_per_cycle",
                "mismatches", "max_abs_err_vs_fp64", "wall_s", "sim_cycles_per_s"):
        assert key in r
    assert r["fma_per_cycle"] == pytest.approx(64 * 32 * 64 / r["cycles"])
    assert r["fma_per_cycle"] <= r["peak_fma_per_cycle"] == 64
    assert 0 < r["max_abs_err_vs_fp64"] < 1e-3


def test_tcore_gemm_fp16_accumulate_on_icarus(capsys):
    code = main(["gemm", "--m", "16", "--n", "32", "--k", "32", "--acc", "f16", "--backend", "icarus", "--json"])
    r = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 0 and r["mismatches"] == 0 and r["acc"] == "fp16"


@pytest.mark.parametrize("argv,msg", [
    (["--m", "20", "--n", "16", "--k", "16"], "multiple of 16"),
    (["--m", "16", "--n", "16", "--k", "16", "--format", "bf16", "--acc", "f16"], "unsupported operation bf16->fp16: "),
    (["--m", "16", "--n", "16", "--k", "16", "--warps", "9"], "1 to 8"),
    (["--m", "4096", "--n", "4096", "--k", "4096"], "memory words"),
])
def test_tcore_gemm_refuses_bad_requests(argv, msg, capsys):
    code = main(["gemm", *argv, "--backend", "verilator"])
    err = capsys.readouterr().err
    assert code == 2 and msg in err


@pytest.mark.parametrize("kernel", ["f16_f32", "bf16_f32", "f16_f16"])
@pytest.mark.parametrize("name", GEMM_FILES)
def test_golden_gemm_backend_equals_silicon(name, kernel):
    """The golden backend of ``tcore gemm`` / the runner against the H200's own matmulT output
    (an independent reference: the captured D)."""
    data = load(SILICON / name)
    k = KERNELS[kernel]
    if data["a"].shape[1] % 16 or (k.c_key in data and np.any(data[k.c_key] != 0)):
        pytest.skip("not a matmulT case")
    r = gemm("golden", data["a"], data["b"], k.op)
    d = r.d
    assert r.cycles is None
    assert np.array_equal(d, data[k.d_key]), f"{name} {kernel}: {(d != data[k.d_key]).sum()} differ"
    # The comparison can fail: Ampere's rule (block 8, grid 2^(E-24)) on the same inputs misses.
    if kernel == "f16_f32":
        other = matmul_t(data["a"], data["b"], in_fmt=k.in_fmt, out_fmt=k.out_fmt, arch="ampere")
        assert not np.array_equal(other, data[k.d_key])


def test_golden_gemm_backend_on_exact_integers():
    """A designed case whose exact result every rule must give: small integers whose products
    and partial sums are exact in FP32 (no truncation, no rounding), against Python integers."""
    rng = np.random.default_rng(12)
    m, n, k = 32, 16, 48
    ai = rng.integers(-8, 9, (m, k))
    bi = rng.integers(-8, 9, (k, n))
    a = ai.astype(np.float16).view(np.uint16)
    b = bi.astype(np.float16).view(np.uint16)
    exact = ai @ bi                                  # |D| <= 48 * 64: exact in FP16 and FP32
    d32 = gemm("golden", a, b).d
    d16 = gemm("golden", a, b, Op.parse("fp16->fp16")).d
    assert np.array_equal(d32.view(np.float32), exact.astype(np.float32))
    assert np.array_equal(d16.view(np.float16), exact.astype(np.float16))


def test_tcore_gemm_golden_backend(capsys):
    """The CLI's golden backend: its JSON, and its error against float64 within the bound of
    the rule (RZ to FP32 after a truncated sum: a few units of 2^-23 of the largest term per
    16-wide step), not merely "equal to itself"."""
    code = main(["gemm", "--m", "32", "--n", "16", "--k", "48", "--format", "bf16", "--backend", "golden", "--json"])
    r = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 0 and r["mismatches"] == 0 and r["cycles"] is None
    a, b = random_operands(32, 16, 48, "bf16", 1)
    from tcore.golden.formats import to_float
    mag = np.abs(to_float(a, "bf16")) @ np.abs(to_float(b, "bf16"))
    assert 0 < r["max_abs_err_vs_fp64"] <= float(mag.max()) * 3 * 2.0 ** -21


@pytest.mark.parametrize("fmt,acc,peak", [("tf32", "f32", 32), ("e4m3_e5m2", "f32", 64),
                                          ("e4m3", "f16", 64), ("e5m2", "f32", 64),
                                          ("s8", "s32sat", 64), ("u8", "s32", 64)])
def test_tcore_gemm_lowprec_on_the_gemm_top(fmt, acc, peak, capsys):
    """TF32, FP8 and INT8 GEMMs on the GEMM top (B in the TN layout), bit-exact against the
    golden model, with the mode's own peak (products per clock) and K in the mode's steps."""
    code = main(["gemm", "--m", "32", "--n", "48", "--k", "64", "--format", fmt, "--acc", acc,
                 "--backend", "verilator", "--json", "--seed", "3"])
    r = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 0 and r["mismatches"] == 0 and r["format"] == fmt and r["acc"] == acc
    assert r["peak_fma_per_cycle"] == peak
    assert r["fma_per_cycle"] == pytest.approx(32 * 48 * 64 / r["cycles"])
    assert 0.85 < r["utilization"] <= 1
    if fmt in ("s8", "u8"):
        assert r["max_abs_err_vs_fp64"] == 0       # no sum of 64 products leaves S32
    else:
        assert 0 < r["max_abs_err_vs_fp64"] < (0.05 if acc == "f16" else 0.01)


@pytest.mark.parametrize("argv,msg", [
    (["--format", "tf32", "--acc", "f16"], "tf32 inputs accumulate in fp32, not 'fp16'"),
    (["--format", "s8", "--acc", "f32"], "s8 inputs accumulate in s32, not 'fp32'"),
    (["--acc", "s32"], "fp16 inputs accumulate in fp32 or fp16, not 's32'"),
    (["--format", "e4m3", "--k", "48"], "K of 32"),
    (["--format", "tf32", "--k", "20"], "K of 8"),
])
def test_tcore_gemm_lowprec_refusals(argv, msg, capsys):
    args = ["--m", "16", "--n", "16", "--k", "32"]
    if "--k" in argv:
        args = ["--m", "16", "--n", "16"]
    code = main(["gemm", *args, *argv, "--backend", "verilator"])
    err = capsys.readouterr().err
    assert code == 2 and msg in err, err


def test_torch_fp8_gemm_through_gemm_top(capsys):
    """A GEMM PyTorch itself ran on the H200 (``torch._scaled_mm``, E4M3, fast accumulation:
    the plain wgmma chain) through the GEMM top's FP8 mode: every bit equal."""
    code = main(["verify", str(SILICON / "torch" / "h200_torch_fp8_128x128x128.npz"),
                 "--backend", "verilator", "--kernel", "e4m3_f32"])
    out = capsys.readouterr().out.strip().splitlines()
    assert code == 0 and out[-1] == "checked 16384 mismatches 0" and " clk" in out[0]


@pytest.mark.slow
def test_gemm_top_with_16_lane_warps(capsys):
    """The GEMM top of 16-lane warps: its bench (random GEMMs, reset in mid-run), one FP16 and
    one FP8 GEMM bit-exact at over 0.95 of the 16-lane peak (16 FMA per clock in both), and
    every silicon GEMM file, bit for bit."""
    run_bench("verilator", "gemm", "tcore.tb.gemm_bench", ["random_gemms", "reset_midrun"],
              params=GEMM.replace(lanes=16).params, quiet=True)
    for argv in (["--format", "fp16"], ["--format", "e4m3"]):
        assert main(["gemm", "--m", "64", "--n", "64", "--k", "128", "--lanes", "16", "--json",
                     *argv]) == 0
        r = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert r["lanes"] == 16 and r["peak_fma_per_cycle"] == 16 and r["mismatches"] == 0
        assert r["utilization"] > 0.95, r
    for name in GEMM_FILES:
        assert main(["verify", str(SILICON / name), "--backend", "verilator", "--lanes", "16"]) == 0
        assert capsys.readouterr().out.strip().splitlines()[-1].endswith("mismatches 0")


# -- 2:4 sparse A ---------------------------------------------------------------------------------

@pytest.mark.parametrize("fmt,out_fmt,shape", [("fp16", "fp32", (48, 32, 96)),
                                               ("fp16", "fp16", (32, 16, 64)),
                                               ("bf16", "fp32", (16, 48, 128))])
def test_sparse_gemm_through_gemm_top(fmt, out_fmt, shape):
    """A 2:4 sparse A (pruned, compressed: values and metadata in memory) times a dense B on
    the GEMM top: every bit equals golden.sparse.mma_sp (chained mma.sp k32 steps), every
    logical FMA is done once (a sparse beat is 128), and it is not the dense product of the
    pruned A (the k32 fuses twice the products of a dense step)."""
    from tcore.golden import mma
    from tcore.golden.sparse import compress, mma_sp
    m, n, k = shape
    a, b = random_operands(m, n, k, fmt, 11)
    sp = compress(a, fmt, prune=True)
    zero = np.zeros((m, n), np.uint16 if out_fmt == "fp16" else np.uint32)
    r = run(GEMM, Op(fmt, acc=out_fmt, sparse=True), Operands(sp.values, b, None, sp.meta),
            "verilator")
    d = r.d
    assert np.array_equal(d, mma_sp(sp, b, zero, in_fmt=fmt, out_fmt=out_fmt))
    assert r.beats == m * n * k // 128
    assert not np.array_equal(d, mma(sp.to_dense(), b, zero, in_fmt=fmt, out_fmt=out_fmt))


def test_sparse_gemm_on_icarus():
    from tcore.golden.sparse import compress, mma_sp
    a, b = random_operands(16, 16, 64, "fp16", 12)
    sp = compress(a, "fp16", prune=True)
    r = run(GEMM, Op("fp16", sparse=True), Operands(sp.values, b, None, sp.meta), "icarus")
    assert np.array_equal(r.d, mma_sp(sp, b, np.zeros((16, 16), np.uint32)))
    assert r.beats == 16 * 16 * 64 // 128


def test_tcore_gemm_sparse_rate(capsys):
    """The issue's figure: 128x128x256 sparse on one 64-lane core, bit-exact, at least 0.95 of
    128 logical FMA per clock (a step loads in 66 clocks and computes in 64)."""
    code = main(["gemm", "--sparse", "--m", "128", "--n", "128", "--k", "256",
                 "--backend", "verilator", "--json"])
    r = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 0 and r["mismatches"] == 0 and r["sparse"] is True
    assert r["peak_fma_per_cycle"] == 128
    assert r["fma_per_cycle"] == pytest.approx(128 * 128 * 256 / r["cycles"])
    assert 0.95 <= r["utilization"] <= 1, r["cycles"]


@pytest.mark.parametrize("argv,msg", [
    (["--m", "16", "--n", "16", "--k", "48"], "K a multiple of 32"),
    (["--m", "16", "--n", "16", "--k", "32", "--format", "e4m3"], "FP16 or BF16"),
    (["--m", "16", "--n", "16", "--k", "32", "--format", "bf16", "--acc", "f16"], "unsupported operation bf16->fp16.sp: "),
    (["--m", "16", "--n", "16", "--k", "32", "--backend", "amaranth"], "verilator, icarus or golden"),
])
def test_tcore_gemm_sparse_refusals(argv, msg, capsys):
    code = main(["gemm", "--sparse", *argv])
    assert code == 2 and msg in capsys.readouterr().err


def test_tcore_gemm_sparse_prunes_the_users_a(tmp_path, capsys):
    """--a is pruned by the golden pruner: a dense A and its pruned copy give the same D."""
    from tcore.golden.sparse import prune_24_bits
    a, b = random_operands(16, 16, 64, "fp16", 13)
    np.save(tmp_path / "a.npy", a.view(np.float16))
    np.save(tmp_path / "ap.npy", prune_24_bits(a).view(np.float16))
    np.save(tmp_path / "b.npy", b.view(np.float16))
    outs = []
    for name in ("a", "ap"):
        code = main(["gemm", "--sparse", "--a", str(tmp_path / f"{name}.npy"), "--b",
                     str(tmp_path / "b.npy"), "--backend", "golden", "-o", str(tmp_path / f"{name}.npz")])
        assert code == 0
        outs.append(np.load(tmp_path / f"{name}.npz")["d_bits"])
    assert np.array_equal(outs[0], outs[1])
    assert "2:4 sparse A (pruned)" in capsys.readouterr().out
