"""The FP4 front end in RTL: the exhaustive decode bench on both simulators, the FP32 epilogue
multiplier against NumPy, and quantised GEMMs through the fp4gemm design."""

import json

import numpy as np
import pytest
from amaranth.sim import Simulator

from tcore.rtl.nvfp4 import Fp32Mul
from tcore.sim.cli import main
from tcore.sim.runner import run_bench
from tcore.rtl.designs import preset

#: The FP4 top with 16-lane cores (the tests' shorter build).
FP4_16 = preset("lint", "fp4gemm").replace(lanes=16)


@pytest.mark.parametrize("sim", ["verilator", "icarus"])
def test_decode_bench_exhaustive(sim):
    run_bench(sim, "fp4dec", "tcore.tb.fp4_bench", "decode_exhaustive", params={"lanes": 16}, quiet=True)


def _mul_cases():
    rng = np.random.default_rng(11)
    n = 2000
    raw = rng.integers(0, 2 ** 32, (2, n), dtype=np.uint64).astype(np.uint32)
    # Products that land in the subnormal range, overflow, or round at the boundary.
    x = (rng.standard_normal(n) * np.exp2(rng.integers(-150, 128, n))).astype(np.float32).view(np.uint32)
    y = (rng.standard_normal(n) * np.exp2(rng.integers(-30, 10, n))).astype(np.float32).view(np.uint32)
    sp = np.array([0, 0x80000000, 1, 0x7FFFFF, 0x800000, 0x7F7FFFFF, 0x7F800000, 0xFF800000,
                   0x7FC00000, 0xFFFFFFFF, 0x3F800000, 0x3F000000, 0x00400000, 0x34000000,
                   0x33000000, 0x33000001, 0x3F7FFFFF], np.uint32)
    ea, eb = np.meshgrid(sp, sp)
    return np.concatenate([raw[0], x, ea.ravel()]), np.concatenate([raw[1], y, eb.ravel()])


def test_fp32_mul_matches_ieee():
    a, b = _mul_cases()
    with np.errstate(all="ignore"):
        p = a.view(np.float32) * b.view(np.float32)
    want = np.where(np.isnan(p), np.uint32(0x7FFFFFFF), p.view(np.uint32))
    dut = Fp32Mul()
    bad = []

    async def bench(ctx):
        for i in range(a.size):
            ctx.set(dut.a, int(a[i]))
            ctx.set(dut.b, int(b[i]))
            got = ctx.get(dut.p)
            if got != want[i]:
                bad.append((hex(a[i]), hex(b[i]), hex(got), hex(want[i])))

    sim = Simulator(dut)
    sim.add_testbench(bench)
    sim.run()
    assert not bad, f"{len(bad)} of {a.size} products differ, e.g. {bad[:4]}"


# The FP4 front end does not depend on the core's size: make test runs it on 16-lane warps (a
# smaller build); the default 64-lane build runs under slow (its GEMM top is tested in
# test_gemm_rtl.py).
@pytest.mark.parametrize("fmt,m,n,k,lanes", [
    ("nvfp4", 64, 64, 64, 16), ("mxfp4", 32, 48, 64, 16),
    pytest.param("nvfp4", 64, 64, 64, 64, marks=pytest.mark.slow)])
def test_fp4_gemm_on_verilator(fmt, m, n, k, lanes, capsys):
    code = main(["gemm", "--m", str(m), "--n", str(n), "--k", str(k), "--format", fmt,
                 "--backend", "verilator", "--json", "--seed", "5", "--lanes", str(lanes)])
    r = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 0 and r["mismatches"] == 0 and r["format"] == fmt and r["lanes"] == lanes
    # What 4 bits cost on standard normal data (about 0.13 for NVFP4, 0.16 for MXFP4).
    assert 0.02 < r["rel_err_vs_fp64"] < 0.3
    # The GEMM phase keeps its core busy; decode and epilogue are counted in "cycles".
    assert r["gemm_utilization"] > 0.9 and r["cycles"] > r["gemm_cycles"]


@pytest.mark.parametrize("args,msg", [
    (["--format", "nvfp4", "--acc", "f16"], "accumulate in FP32"),
    (["--format", "mxfp4", "--k", "48"], "multiple of 32"),
    (["--format", "nvfp4", "--backend", "amaranth"], "golden, icarus or verilator"),
    (["--format", "nvfp4", "--arch", "ampere"], "Hopper"),
])
def test_fp4_gemm_refuses_what_it_cannot_run(args, msg, capsys):
    base = {"--m": "32", "--n": "32", "--k": "64", "--backend": "golden"}
    for i in range(0, len(args), 2):
        base[args[i]] = args[i + 1]
    code = main(["gemm"] + [x for kv in base.items() for x in kv])
    assert code == 2 and msg in capsys.readouterr().err


def _quantised(fmt, m, n, k, seed):
    from tcore.golden import nvfp4
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(np.float32)
    bt = rng.standard_normal((n, k)).astype(np.float32)
    return nvfp4.quantize(a, fmt), nvfp4.quantize(bt, fmt)


@pytest.mark.parametrize("fmt,specials", [("nvfp4", [0x7F, 0x80, 0xFF, 0xC3]), ("mxfp4", [253, 254, 255])])
def test_fp4_gemm_special_scale_codes_through_rtl(fmt, specials):
    """Block scales that decode to NaN (UE4M3 0x7F or a sign bit; E8M0 255) or overflow BF16
    (E8M0 253, 254, with the block's largest codes) through decode -> GEMM -> epilogue on the
    RTL: every bit equals golden.nvfp4.gemm, and the specials do reach D."""
    from tcore.golden import nvfp4
    from tcore.sim.gemm import run_fp4_gemm
    m, n, k = 32, 32, 64
    qa, qbt = _quantised(fmt, m, n, k, 21)
    for i, code in enumerate(specials):
        qa.scales[2 * i, 0] = code             # one block of a row of A per special code
        qa.codes[2 * i, :qa.block] = 0x7       # +6.0, the largest element: overflows at 253/254
    d, _ = run_fp4_gemm("verilator", qa, qbt, build=FP4_16, progress=False)
    want = nvfp4.gemm(qa, qbt)
    bad = np.flatnonzero(d != want)
    assert bad.size == 0, f"{bad.size} of {d.size} differ, first {d.flat[bad[0]]:#x} != {want.flat[bad[0]]:#x}"
    f = d.view(np.float32)
    rows = [2 * i for i in range(len(specials))]
    nan_rows = [r for r, c in zip(rows, specials) if (fmt == "nvfp4") or c == 255]
    assert np.isnan(f[nan_rows]).all(), "a NaN scale did not make its rows NaN"
    assert (d[nan_rows] == 0x7FFFFFFF).all(), "NaN is not canonical"
    if fmt == "mxfp4":
        assert np.isinf(f[[0, 2]]).any() or np.isnan(f[[0, 2]]).any(), "E8M0 253/254 did not overflow"
    others = [r for r in range(m) if r not in rows]
    assert np.isfinite(f[others]).all()


def test_fp4_gemm_reset_midrun_in_every_phase():
    """Reset in decode, in the GEMM and in the epilogue (clocks taken from a clean run): nothing
    runs or is written after it, and the job run again is bit-exact."""
    from tcore.sim.gemm import fp4_reset_bench, run_fp4_gemm
    from tcore.golden import nvfp4
    qa, qbt = _quantised("nvfp4", 32, 32, 64, 22)
    d, info = run_fp4_gemm("verilator", qa, qbt, build=FP4_16, progress=False)
    assert np.array_equal(d, nvfp4.gemm(qa, qbt))
    decode = (info["cycles"] - info["gemm_cycles"]) // 2          # well inside the decode phase
    epilogue_end = info["cycles"]
    epilogue_words = 32 * 32 * 4 // 16
    decode_words = (32 * 64 + 64 * 32) * 2 // 16
    assert info["cycles"] - info["gemm_cycles"] >= 4 * decode_words + 3 * epilogue_words
    for at in (decode // 3, 4 * decode_words + info["gemm_cycles"] // 2, epilogue_end - epilogue_words):
        fp4_reset_bench("verilator", qa, qbt, at, build=FP4_16)


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_fp4_gemm_on_icarus():
    """The fp4gemm design on Icarus (the GEMM top runs tens of clocks/s there): a 16x16x32 MXFP4
    and NVFP4 GEMM each, bit-exact."""
    from tcore.golden import nvfp4
    from tcore.sim.gemm import run_fp4_gemm
    for fmt in ("mxfp4", "nvfp4"):
        qa, qbt = _quantised(fmt, 16, 16, 32, 23)
        d, _ = run_fp4_gemm("icarus", qa, qbt, progress=False)
        assert np.array_equal(d, nvfp4.gemm(qa, qbt)), fmt
