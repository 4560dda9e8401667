"""The warp WMMA unit (memory, fragment bank, sequencer, core) through its cocotb bench on
Verilator and Icarus: layouts, ldm, refused commands, back-to-back timing, reset in mid-run,
response back-pressure and silicon tiles."""

import numpy as np
import pytest

from tcore.golden.silicon import load, problem
from tcore.rtl.designs import preset
from tcore.sim.core import bench_options
from tcore.sim.run import Operands, run, run_batches
from tcore.sim.runner import SimError, run_bench

from .conftest import SILICON, kernel_batch

WMMA = preset("lint", "wmma")

SIMS = ["verilator", "icarus"]


@pytest.mark.parametrize("sim", SIMS)
def test_wmma_bench(sim):
    # Icarus (tens of clocks a second with the core busy) leaves the clock counts of
    # back_to_back and the reset to Verilator (slow: test_wmma_timing_and_reset_on_icarus)
    # and takes the last of the six other-shape tiles.
    tests = ["layouts_and_ldm", "bad_ldm_and_alignment", "other_shapes"]
    run_bench(sim, "wmma", "tcore.tb.wmma_bench",
              tests + (["back_to_back", "reset_midrun"] if sim == "verilator" else []),
              params=WMMA.params, quiet=True,
              options={**bench_options(WMMA), **({"shape_cases": 1} if sim == "icarus" else {})})


@pytest.mark.slow
def test_wmma_timing_and_reset_on_icarus():
    """back_to_back's clock counts, the reset test (where X after a reset would show) and
    every other-shape tile on Icarus."""
    run_bench("icarus", "wmma", "tcore.tb.wmma_bench", ["back_to_back", "reset_midrun", "other_shapes"],
              params=WMMA.params, options=bench_options(WMMA), quiet=True)


def test_wmma_bench_checks_documented_mma_cycles():
    options = {"mma_cycles": bench_options(WMMA)["mma_cycles"] - 1}
    with pytest.raises(SimError, match="back_to_back"):
        run_bench("verilator", "wmma", "tcore.tb.wmma_bench", "back_to_back", params=WMMA.params,
                  options=options, quiet=True)


CASES = {
    "verilator": [("h200_targeted.npz", None), ("h200_special.npz", 4), ("h200_normal.npz", 4),
                  ("h200_matmulT_normal_64x64x64.npz", 2)],
    "icarus": [("h200_targeted.npz", 1)],
}


@pytest.mark.parametrize("kernel", ["f16_f32", "bf16_f32", "f16_f16"])
@pytest.mark.parametrize("sim", SIMS)
def test_silicon_through_wmma(sim, kernel):
    """Every file of CASES in one simulator run per kernel."""
    probs = [(name, problem(load(SILICON / name), kernel, tiles)) for name, tiles in CASES[sim]]
    results = run_batches(WMMA, [kernel_batch(p) for _, p in probs], sim)
    assert len(results) == len(probs)
    for (name, p), d in zip(probs, (r.d for r in results)):
        bad = int((d != p.expected).sum())
        assert bad == 0, f"{name} {kernel} through wmma on {sim}: {bad} of {d.size} differ from the H200"


def test_silicon_through_wmma_with_response_backpressure():
    """resp.ready low at random (half the clocks): no response lost, every bit the H200's."""
    p = problem(load(SILICON / "h200_normal.npz"), "f16_f32", 3)
    d = run(WMMA, p.kernel.op, Operands(p.a, p.b, p.c), "verilator", stall=0.5, seed=3).d
    assert np.array_equal(d, p.expected)


def test_response_check_has_teeth():
    """The per-response check the bench applies to every command it issues."""
    from tcore.tb.wmma_bench import check_responses
    from tcore.host.wmma_model import Op, cmd_word
    cmds = [cmd_word(op=Op.FILL, kind=2, tag=1), cmd_word(op=Op.MMA, tag=2)]
    check_responses(cmds, [{"tag": 2, "op": Op.MMA, "error": 0}, {"tag": 1, "op": Op.FILL, "error": 0}])
    with pytest.raises(AssertionError, match="do not answer"):       # a lost response
        check_responses(cmds, [{"tag": 1, "op": Op.FILL, "error": 0}])
    with pytest.raises(AssertionError, match="do not answer"):       # a wrong op
        check_responses(cmds, [{"tag": 1, "op": Op.FILL, "error": 0}, {"tag": 2, "op": Op.LOAD, "error": 0}])
    with pytest.raises(AssertionError, match="tag 2 .*error 1, expected 0"):
        check_responses(cmds, [{"tag": 1, "op": Op.FILL, "error": 0}, {"tag": 2, "op": Op.MMA, "error": 1}])
    with pytest.raises(AssertionError, match="tag 1 .*error 0, expected 1"):
        check_responses(cmds, [{"tag": 1, "op": Op.FILL, "error": 0}, {"tag": 2, "op": Op.MMA, "error": 0}],
                        refused={1})


def test_golden_wmma_reference_tells_layouts_apart():
    """The reference the bench compares the RTL's memory with (golden load_matrix_sync /
    mma_sync / store_matrix_sync on the bench's image) gives mma() at D with the right layout,
    and different bytes when one layout flag is wrong: the comparison can fail."""
    from tcore.golden import mma
    from tcore.tb.wmma_bench import _rand, golden_tile, tile_image
    from tcore.host.wmma_model import get_matrix
    rng = np.random.default_rng(2)
    a, b, c = _rand(rng, (16, 32), "fp16"), _rand(rng, (32, 16), "fp16"), _rand(rng, (16, 16), "fp32")
    layout = dict(a_col=True, ldb=24, ldc=20, d_col=True)
    mem, addrs, end = tile_image(a, b, c, acc_f16=False, **layout)
    ref = golden_tile(mem, addrs, 32, bf16=False, acc_f16=False, **layout)
    d = get_matrix(ref, addrs["d"], addrs["ldc"], np.uint32, col_major=True)
    assert np.array_equal(d, mma(a, b, c))
    assert np.array_equal(ref[:addrs["d"]], mem[:addrs["d"]])      # only D is written
    for wrong in ("a_col", "b_col", "c_col", "d_col"):
        bad = golden_tile(mem, addrs, 32, bf16=False, acc_f16=False, **{**layout, wrong: not layout.get(wrong)})
        assert not np.array_equal(bad[:end], ref[:end]), wrong


def _lowprec(files, tiles):
    from tcore.golden.silicon import kernels_in
    probs = []
    for name in files:
        data = load(SILICON / "lowprec" / name)
        probs += [(name, problem(data, kernel, tiles)) for kernel in kernels_in(data)]
    return probs


LOWPREC_CASES = {
    "verilator": (sorted(p.name for p in (SILICON / "lowprec").glob("*.npz")), 1),
    "icarus": (["h200_fp8_bits.npz", "h200_tf32_bits.npz", "h200_int8_extreme.npz"], 1),
}


@pytest.mark.parametrize("sim", ["verilator", pytest.param("icarus", marks=pytest.mark.slow)])
def test_lowprec_silicon_through_wmma(sim):
    """FP8 (E4M3, E5M2, mixed; FP32 and FP16 accumulators), TF32 and INT8 tiles through memory
    -> load_matrix_sync (A row-major, B column-major) -> mma_sync -> store_matrix_sync ->
    memory: every bit the H200's (Verilator: a tile of every low-precision file and kernel)."""
    files, tiles = LOWPREC_CASES[sim]
    probs = _lowprec(files, tiles)
    results = run_batches(WMMA, [kernel_batch(p) for _, p in probs], sim)
    for (name, p), d in zip(probs, (r.d for r in results)):
        bad = int((d != p.expected).sum())
        assert bad == 0, f"{name} {p.kernel.name} through wmma on {sim}: {bad} of {d.size} differ"


@pytest.mark.slow
@pytest.mark.parametrize("lanes", [16])
def test_wmma_bench_with_fewer_lanes(lanes):
    """The warp with a 16-lane core: layouts, other shapes, and mma_sync taking exactly
    WmmaSequencer.mma_cycles_of(lanes=16) clocks (295 for FP16, against 94 with 64 lanes;
    567 for FP8, against 162)."""
    build = WMMA.replace(lanes=lanes)
    assert bench_options(build)["mma_cycles"] == 295
    assert bench_options(build)["mma_cycles_fp8"] == 567
    run_bench("verilator", "wmma", "tcore.tb.wmma_bench", ["back_to_back", "layouts_and_ldm", "other_shapes"],
              params=build.params, options=bench_options(build), quiet=True)
