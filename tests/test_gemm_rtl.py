"""The GEMM top (matmulT on 1..8 warps): bench on both simulators, silicon GEMMs, the CLI."""

import json

import numpy as np
import pytest

from golden.silicon import load
from sim.cli import main
from sim.gemm import gemm_params
from sim.runner import run_bench

from .conftest import SILICON


@pytest.mark.parametrize("sim", ["verilator", "icarus"])
def test_gemm_bench_random(sim):
    run_bench(sim, "gemm", "tb.gemm_bench", "random_gemms", params=gemm_params(1),
              env={"TCORE_CORES": "1"}, quiet=True)


@pytest.mark.parametrize("name", ["h200_matmulT_wide_64x128x48.npz", "h200_matmulT_normal_64x64x64.npz"])
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
    for key in ("m", "n", "k", "cores", "backend", "cycles", "fma_per_cycle", "peak_fma_per_cycle",
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
    (["--m", "16", "--n", "16", "--k", "16", "--format", "bf16", "--acc", "f16"], "not a WMMA combination"),
    (["--m", "16", "--n", "16", "--k", "16", "--cores", "9"], "1 to 8"),
    (["--m", "1024", "--n", "1024", "--k", "1024"], "memory words"),
])
def test_tcore_gemm_refuses_bad_requests(argv, msg, capsys):
    code = main(["gemm", *argv, "--backend", "verilator"])
    err = capsys.readouterr().err
    assert code == 2 and msg in err


def test_tcore_gemm_golden_backend(capsys):
    code = main(["gemm", "--m", "32", "--n", "16", "--k", "48", "--format", "bf16", "--backend", "golden", "--json"])
    r = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 0 and r["mismatches"] == 0 and r["cycles"] is None
