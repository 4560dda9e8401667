"""The FP4 front end in RTL: the exhaustive decode bench on both simulators, the FP32 epilogue
multiplier against NumPy, and quantised GEMMs through the fp4gemm design."""

import json

import numpy as np
import pytest
from amaranth.sim import Simulator

from rtl.nvfp4 import Fp32Mul
from sim.cli import main
from sim.runner import run_bench


@pytest.mark.parametrize("sim", ["verilator", "icarus"])
def test_decode_bench_exhaustive(sim):
    run_bench(sim, "fp4dec", "tb.fp4_bench", "decode_exhaustive", params={"lanes": 16}, quiet=True)


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


@pytest.mark.parametrize("fmt,m,n,k", [("nvfp4", 64, 64, 64), ("mxfp4", 32, 48, 64)])
def test_fp4_gemm_on_verilator(fmt, m, n, k, capsys):
    code = main(["gemm", "--m", str(m), "--n", str(n), "--k", str(k), "--format", fmt,
                 "--backend", "verilator", "--json", "--seed", "5"])
    r = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 0 and r["mismatches"] == 0 and r["format"] == fmt
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
