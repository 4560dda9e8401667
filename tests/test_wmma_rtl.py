"""The warp WMMA unit (memory, fragment bank, sequencer, core) through its cocotb bench on
Verilator and Icarus: layouts, ldm, refused commands, back-to-back timing and silicon tiles."""

import numpy as np
import pytest

from golden.silicon import load, problem
from sim.core import PATHS, bench_env, run_through
from sim.runner import SimError, run_bench

from .conftest import SILICON

SIMS = ["verilator", "icarus"]


@pytest.mark.parametrize("sim", SIMS)
def test_wmma_bench(sim):
    run_bench(sim, "wmma", "tb.wmma_bench", ["layouts_and_ldm", "bad_ldm_and_alignment", "back_to_back"],
              params=PATHS["wmma"][2], env=bench_env("wmma"), quiet=True)


def test_wmma_bench_checks_documented_mma_cycles():
    env = {**bench_env("wmma"), "TCORE_MMA_CYCLES": str(int(bench_env("wmma")["TCORE_MMA_CYCLES"]) - 1)}
    with pytest.raises(SimError, match="back_to_back"):
        run_bench("verilator", "wmma", "tb.wmma_bench", "back_to_back", params=PATHS["wmma"][2],
                  env=env, quiet=True)


CASES = {
    "verilator": [("h200_targeted.npz", None), ("h200_special.npz", 4), ("h200_normal.npz", 4),
                  ("h200_matmulT_normal_64x64x64.npz", 2)],
    "icarus": [("h200_targeted.npz", 1)],
}


@pytest.mark.parametrize("kernel", ["f16_f32", "bf16_f32", "f16_f16"])
@pytest.mark.parametrize("sim", SIMS)
def test_silicon_through_wmma(sim, kernel):
    for name, tiles in CASES[sim]:
        p = problem(load(SILICON / name), kernel, tiles)
        d, _ = run_through("wmma", sim, p.a, p.b, p.c, in_fmt=p.kernel.in_fmt, out_fmt=p.kernel.out_fmt)
        bad = int((d != p.expected).sum())
        assert bad == 0, f"{name} {kernel} through wmma on {sim}: {bad} of {d.size} differ from the H200"
