"""The MMA4 core through its cocotb bench on Verilator and Icarus, and on Amaranth's simulator:
random stalls, throughput and latency, reset in mid-stream, groups of 1 to 4 beats with
format changes in flight.

Silicon tiles go through the RTL and every output bit is compared with what the H200 computed
(and hence with the golden model, which matches it bit for bit).
"""

import dataclasses
import re

import numpy as np
import pytest

from tcore.golden import mma
from tcore.golden.silicon import load, problem
from tcore.rtl.mma4 import MMA4
from tcore.numerics import Op
from tcore.rtl.designs import preset
from tcore.sim.run import Operands, run, run_batches
from tcore.sim.runner import SimError, run_bench

from .conftest import SILICON, kernel_batch, sparse_batch

CORE = preset("lint", "mma4")

SIMS = ["verilator", "icarus"]
LATENCY = MMA4.latency_of()


@pytest.mark.parametrize("sim", SIMS)
def test_bench_random_stalls_throughput_reset(sim):
    # Icarus (~100 clocks/s with the core busy) takes one random tile per kernel and 24 groups.
    run_bench(sim, "mma4", "tcore.tb.mma4_bench",
              ["random_stalls", "throughput_latency", "reset_midstream", "groups_and_format_changes"],
              params=CORE.params, quiet=True,
              options={"latency": LATENCY, "seed": 11,
                       **({"tiles": 1, "groups": 24, "kernels": 3} if sim == "icarus" else {})})


def test_bench_has_teeth_on_latency():
    """The throughput/latency check fails when told a latency the core does not have."""
    with pytest.raises(SimError, match="throughput_latency"):
        run_bench("verilator", "mma4", "tcore.tb.mma4_bench", "throughput_latency", params=CORE.params,
                  options={"latency": LATENCY + 1}, quiet=True)


# (file, tiles) per simulator: Verilator takes volume, Icarus (~200 beats/s) a few tiles.
CASES = {
    "verilator": [("h200_targeted.npz", None), ("h200_special.npz", 16), ("h200_subnormal.npz", 16),
                  ("h200_overflow.npz", 16), ("h200_wide.npz", 16), ("h200_cancel.npz", 8),
                  ("h200_matmulT_wide_64x128x48.npz", 4)],
    "icarus": [("h200_targeted.npz", 2), ("h200_special.npz", 1)],
}


@pytest.mark.parametrize("kernel", ["f16_f32", "bf16_f32", "f16_f16"])
@pytest.mark.parametrize("sim", SIMS)
def test_silicon_through_core(sim, kernel):
    """Every file of CASES in one simulator run per kernel."""
    probs = [(name, problem(load(SILICON / name), kernel, tiles)) for name, tiles in CASES[sim]]
    results = run_batches(CORE, [kernel_batch(p) for _, p in probs], sim)
    assert len(results) == len(probs)
    for (name, p), r in zip(probs, results):
        bad = int((r.d != p.expected).sum())
        assert bad == 0, f"{name} {kernel} on {sim}: {bad} of {r.d.size} outputs differ from the H200"
        steps = p.a.shape[2] // 16
        assert r.cycles >= len(p.c) * 64 * steps     # one beat per clock at best


def test_core_with_stalls_matches_golden():
    """Random backpressure on both streams during a chained (K = 64) run loses nothing."""
    rng = np.random.default_rng(8)
    a = rng.standard_normal((3, 16, 64)).astype(np.float16).view(np.uint16)
    b = rng.standard_normal((3, 64, 16)).astype(np.float16).view(np.uint16)
    c = rng.standard_normal((3, 16, 16)).astype(np.float16).view(np.uint16)
    r = run(CORE, Op.parse("fp16->fp16"), Operands(a, b, c), "verilator", stall=0.4, seed=5)
    assert np.array_equal(r.d, mma(a, b, c, out_fmt="fp16"))


def test_amaranth_simulator_backend():
    p = problem(load(SILICON / "h200_targeted.npz"), "f16_f16", 1)
    r = run(CORE, p.kernel.op, Operands(p.a, p.b, p.c), "amaranth")
    assert np.array_equal(r.d, p.expected) and r.cycles >= 64


def test_verify_cli_with_waves_names_the_waveform(capsys):
    """The waveform is named after the run, moved out of the build folder, never overwritten by
    the next run, and named (with its size) in the summary."""
    from pathlib import Path

    from tcore.sim.cli import main
    runs = []
    for _ in range(2):
        code = main(["verify", str(SILICON / "h200_ints.npz"), "--backend", "icarus", "--tiles",
                     "1", "--kernel", "f16_f32", "--waves"])
        out = capsys.readouterr().out
        assert code == 0 and out.strip().splitlines()[-1] == "checked 256 mismatches 0"
        line = next(l for l in out.splitlines() if l.startswith("waveform: "))
        path, note = line.split(": ", 1)[1].rsplit(" (", 1)
        runs.append(Path(path))
        assert note.endswith("MB)")
    first, second = runs
    assert first.name == "h200_ints-f16_f32-core-icarus.fst" or first.name.startswith(
        "h200_ints-f16_f32-core-icarus-")
    assert second != first and first.exists() and second.exists()
    assert second.parent.name == "waves" and second.stat().st_size > 1000
    for p in runs:
        p.unlink()


# Icarus in make test (its build takes seconds; each generation is its own build).
@pytest.mark.parametrize("arch,sim,tiles", [
    ("ampere", "icarus", 1), ("volta", "icarus", 1),
    pytest.param("ampere", "verilator", 16, marks=pytest.mark.slow),
    pytest.param("volta", "verilator", 16, marks=pytest.mark.slow)])
def test_core_built_for_other_generations(arch, sim, tiles):
    """MMA4(arch=...) computes the golden model's Ampere (block 8, grid 2**(E-24), each 8-term
    step rounded, FP16-out floor -20) and Volta (block 4, 2**(E-23), floor -19, no BF16)
    parameter sets bit for bit, on random tiles and on the designed silicon tiles (whose
    H200 results these generations would not give)."""
    from tcore.golden import get_arch
    from tcore.tb.mma4_bench import random_tiles
    rng = np.random.default_rng(21)
    kernels = [("f16_f32", "fp16", "fp32"), ("f16_f16", "fp16", "fp16")]
    if get_arch(arch).bf16:
        kernels.append(("bf16_f32", "bf16", "fp32"))
    differs = 0
    for kernel, in_fmt, out_fmt in kernels:
        parts = [random_tiles(rng, tiles, 16, in_fmt, out_fmt)]
        for name in ("h200_targeted.npz", "h200_subnormal.npz"):
            p = problem(load(SILICON / name), kernel, tiles)
            parts.append((p.a, p.b, p.c))
        a, b, c = (np.concatenate(x) for x in zip(*parts))
        d = run(CORE.replace(arch=arch), Op(in_fmt, acc=out_fmt), Operands(a, b, c), sim).d
        want = mma(a, b, c, in_fmt=in_fmt, out_fmt=out_fmt, arch=arch)
        bad = int((d != want).sum())
        assert bad == 0, f"{arch} {kernel} on {sim}: {bad} of {d.size} outputs differ from the golden model"
        differs += int((want != mma(a, b, c, in_fmt=in_fmt, out_fmt=out_fmt)).sum())
    assert differs > 0, "these tiles cannot tell the generation from Hopper"


def test_verify_rtl_other_arch_runs_through_the_core_only(capsys):
    from tcore.sim.cli import main
    code = main(["verify", str(SILICON / "h200_ints.npz"), "--backend", "icarus", "--arch", "ampere",
                 "--through", "wmma"])
    assert code == 2 and "--through core" in capsys.readouterr().err


@pytest.mark.parametrize("sim, tiles", [pytest.param("verilator", 64, marks=pytest.mark.slow),
                                        ("icarus", 2)])
def test_silicon_through_the_ecp5_dsp_variant(sim, tiles):
    """The core tcore synth places instantiates MULT18X18D blocks instead of ``*``: simulated
    with the behavioural MULT18X18D model (rtl/lint/MULT18X18D.v; Yosys has only a blackbox),
    silicon tiles of every kernel are bit-exact."""
    probs = [problem(load(SILICON / "h200_targeted.npz"), kernel, tiles)
             for kernel in ("f16_f32", "bf16_f32", "f16_f16")]
    results = run_batches(CORE.replace(dsp="ecp5"), [kernel_batch(p) for p in probs], sim)
    for p, r in zip(probs, results):
        d = r.d
        bad = int((d != p.expected).sum())
        assert bad == 0, f"{p.kernel.name} on {sim} (dsp=ecp5): {bad} of {d.size} outputs differ"


LOWPREC = SILICON / "lowprec"


def _lowprec_problems(tiles=None):
    """(file name, problem) for ``tiles`` tiles (None: all) of every kernel of every
    low-precision capture."""
    from tcore.golden.silicon import KERNELS, kernels_in
    probs = []
    for path in sorted(LOWPREC.glob("*.npz")):
        data = load(path)
        for kernel in kernels_in(data):
            assert CORE.supports(KERNELS[kernel].op), f"{path.name}: {kernel} has no RTL path"
            probs.append((path.name, problem(data, kernel, tiles)))
    return probs


def _chain_kind(name: str) -> str | None:
    """``f16`` or ``fp8`` for a chained-wgmma capture (``h200_wgmma_chain_<kind>_*.npz``)."""
    m = re.match(r"h200_wgmma_chain_([a-z0-9]+)_", name)
    return m.group(1) if m else None


def _lowprec_few(k_per_file: int = 64, most: int = 4, chains: int | None = None):
    """A few tiles of every low-precision capture, for Icarus (about 30-100 clocks/s on the
    64-lane core): ``k_per_file // K`` tiles of a file (2 of an FP8 or INT8 file, 4 of a TF32
    file, one of a chained-wgmma file, whose tile is 4-8 wgmma steps), at most ``most``, the
    file's kernels taken in turn from a different kernel and tile for each file, so every
    kernel meets several files and the tiles are not always the first.  ``chains``: only that
    many chained-wgmma files of each input kind (their tiles are 512 and 1,024 clocks, two
    thirds of all the clocks with every file)."""
    from tcore.golden.silicon import KERNELS, kernels_in
    probs = []
    kept: dict[str, int] = {}
    for i, path in enumerate(sorted(LOWPREC.glob("*.npz"))):
        chain = _chain_kind(path.name)
        if chain and chains is not None:
            if kept.get(chain, 0) >= chains:
                continue
            kept[chain] = kept.get(chain, 0) + 1
        data = load(path)
        kernels = kernels_in(data)
        n_tiles, k = data["a"].shape[0], data["a"].shape[-1]
        for j in range(min(most, max(1, k_per_file // k))):
            kernel = kernels[(i + j) % len(kernels)]
            assert CORE.supports(KERNELS[kernel].op), f"{path.name}: {kernel} has no RTL path"
            p = problem(data, kernel)
            t = slice((5 * i + 11 * j) % n_tiles, None)
            probs.append((path.name, dataclasses.replace(p, a=p.a[t][:1], b=p.b[t][:1],
                                                         c=p.c[t][:1], expected=p.expected[t][:1])))
    return probs


@pytest.mark.parametrize("sim,few", [("verilator", False), ("icarus", True),
                                     pytest.param("icarus", False, marks=pytest.mark.slow)])
def test_lowprec_silicon_through_core(sim, few):
    """Low-precision captures (FP8 E4M3/E5M2/mixed with FP32 and FP16 out, TF32, INT8
    wrapped and saturated, the chained wgmma files) through the core, every output bit equal
    to the H200's: every tile of every file on Verilator; on Icarus one or two tiles of every
    single-instruction file and of one chained file of each kind (``_lowprec_few(32, 2, 1)``),
    or under ``slow`` two tiles of every kernel of every file."""
    probs = _lowprec_few(32, 2, 1) if few else _lowprec_problems(None if sim == "verilator" else 2)
    files = sorted(p.name for p in LOWPREC.glob("*.npz"))
    assert len(files) == 31
    names = {name for name, _ in probs}
    if few:
        assert names >= {f for f in files if not _chain_kind(f)}
        assert sorted(_chain_kind(f) for f in names if _chain_kind(f)) == ["f16", "fp8"]
    else:
        assert names == set(files)
    kernels = {p.kernel.name for _, p in probs}
    assert {"tf32_f32", "e4m3_f32", "e5m2_f32", "e4m3_e5m2_f32", "e4m3_f16", "s8_s32",
            "s8_s32_sat", "u8_s8_s32"} <= kernels
    results = run_batches(CORE, [kernel_batch(p) for _, p in probs], sim)
    assert len(results) == len(probs)
    for (name, p), d in zip(probs, (r.d for r in results)):
        bad = int((d != p.expected).sum())
        assert bad == 0, f"{name} {p.kernel.name} on {sim}: {bad} of {d.size} outputs differ from the H200"


# --- warps of fewer lanes ---------------------------------------------------------------------

def test_lanes_parameter_timing_and_refusal():
    """A pass takes 64 // lanes clocks: beats of every kind and group latencies follow."""
    from tcore.rtl.mma4 import InputKind
    assert [MMA4.beat_clocks(k, 16) for k in (InputKind.FP16, InputKind.TF32, InputKind.FP8, InputKind.INT8)] == [4, 4, 8, 8]
    assert MMA4.beat_clocks(InputKind.FP8, 32) == 4 and MMA4.beat_clocks(InputKind.BF16, 64) == 1
    assert MMA4.latency_of(InputKind.FP16, 4, lanes=16) == MMA4.LATENCY + 15
    # An 8-bit beat is accepted at its first pass: its second pass's slices are added.
    assert MMA4.latency_of(InputKind.FP8, 1, lanes=32) == MMA4.LATENCY + 5
    assert MMA4.latency_of(InputKind.INT8, 4) == MMA4.LATENCY + 8
    assert MMA4(lanes=16).lanes == 16
    with pytest.raises(ValueError, match="lanes must be one of 64, 32, 16"):
        MMA4(lanes=8)


def test_bench_of_a_16_lane_core():
    """The 16-lane core on Verilator: random stalls in every kernel, a beat every 4 clocks (8
    for the 8-bit kinds) and the exact latency, reset in mid-stream, groups of 1 to 4 beats;
    then silicon tiles of every low-precision file, of the FP16/BF16 kernels and of the 2:4
    sparse captures through it (with stalls, so through the same build), bit for bit."""
    core = CORE.replace(lanes=16)
    run_bench("verilator", "mma4", "tcore.tb.mma4_bench",
              ["random_stalls", "throughput_latency", "reset_midstream", "groups_and_format_changes"],
              params=core.params, quiet=True, options={"latency": LATENCY, "seed": 12})
    probs = _lowprec_few(k_per_file=32, most=1) + [
        ("h200_targeted.npz", problem(load(SILICON / "h200_targeted.npz"), k, 2))
        for k in ("f16_f32", "bf16_f32", "f16_f16")]
    sparse = _sparse_problems(2)
    results = run_batches(core, [kernel_batch(p) for _, p in probs]
                          + [sparse_batch(p) for _, p in sparse], "verilator", stall=0.1, seed=3)
    for (name, p), d in zip(probs + sparse, (r.d for r in results)):
        bad = int((d != p.expected).sum())
        assert bad == 0, f"{name} {getattr(p, 'kernel', p).name} (16 lanes): {bad} of {d.size} outputs differ"


@pytest.mark.slow
@pytest.mark.parametrize("lanes", [16, 32])
def test_silicon_through_cores_of_fewer_lanes(lanes):
    """Every tile of every low-precision capture, the FP16/BF16 files of CASES and the 2:4
    sparse captures through a core of 16 or 32 lanes (the beat player, no stalls), every bit
    equal to the H200's."""
    probs = _lowprec_problems() + [(name, problem(load(SILICON / name), k, tiles))
                                   for name, tiles in CASES["verilator"]
                                   for k in ("f16_f32", "bf16_f32", "f16_f16")]
    sparse = _sparse_problems()
    results = run_batches(CORE.replace(lanes=lanes), [kernel_batch(p) for _, p in probs]
                          + [sparse_batch(p) for _, p in sparse], "verilator")
    for (name, p), d in zip(probs + sparse, (r.d for r in results)):
        bad = int((d != p.expected).sum())
        assert bad == 0, f"{name} {getattr(p, 'kernel', p).name} ({lanes} lanes): {bad} of {d.size} outputs differ"


# --- 2:4 sparse beats ---------------------------------------------------------------------------

SPARSE = SILICON / "sparse"


@pytest.mark.parametrize("lanes", [16, pytest.param(64, marks=pytest.mark.slow)])
def test_silicon_through_the_dense_only_core(lanes):
    """The core without its 2:4 select network, as ``tcore synth --dense-only`` places it
    (MULT18X18D multipliers; 16 lanes is the ECP5-25F build, also without the output skid
    register, with random stalls on both sides; 64 keeps B once per element in its
    significand FIFO): tiles of every low-precision capture (every tile at 64 lanes) and of
    the FP16/BF16 kernels on Verilator, every bit equal to the H200's."""
    lowprec = _lowprec_few(k_per_file=32, most=1) if lanes == 16 else _lowprec_problems()
    probs = lowprec + [("h200_targeted.npz", problem(load(SILICON / "h200_targeted.npz"), k, 4))
                       for k in ("f16_f32", "bf16_f32", "f16_f16")]
    core = (preset("ecp5-25f", "mma4") if lanes == 16 else
            CORE.replace(dsp="ecp5", lanes=lanes, sparse=False))
    results = run_batches(core, [kernel_batch(p) for _, p in probs], "verilator",
                          **({"stall": 0.2, "seed": 4} if lanes == 16 else {}))
    for (name, p), d in zip(probs, (r.d for r in results)):
        bad = int((d != p.expected).sum())
        assert bad == 0, f"{name} {p.kernel.name} (dense-only, {lanes} lanes): {bad} of {d.size} outputs differ"


def _sparse_problems(tiles=None):
    from tcore.golden.sparse import tile_problems
    probs = []
    for path in sorted(SPARSE.glob("*.npz")):
        probs += [(path.name, p) for p in tile_problems(load(path), tiles=tiles, where=path.name)]
    return probs


@pytest.mark.parametrize("sim,tiles,stall,lanes", [("verilator", None, 0.0, 64),
                                                   ("verilator", 24, 0.3, 64),
                                                   ("icarus", 2, 0.0, 64)])
def test_sparse_silicon_through_core(sim, tiles, stall, lanes):
    """The H200's mma.sp / wgmma.sp captures (FP16 and BF16, FP32 and FP16 accumulators) through
    the core's 2:4 sparse beats, every output bit equal to the silicon's: every tile on
    Verilator, and with random valid/ready stalls on both streams; a few tiles on Icarus."""
    probs = _sparse_problems(tiles)
    assert {p.name for _, p in probs} == {"f16_f32", "f16_f16", "bf16_f32", "wg_f16_f32",
                                          "wg_f16_f16", "wg_bf16_f32"}
    results = run_batches(CORE.replace(lanes=lanes), [sparse_batch(p) for _, p in probs], sim,
                          stall=stall, seed=4)
    for (name, p), r in zip(probs, results):
        bad = int((r.d != p.expected).sum())
        assert bad == 0, f"{name} {p.name} on {sim} (2:4 sparse): {bad} of {r.d.size} outputs differ"
        if not stall:
            # 64 sparse beats a tile (16 blocks x 4), one a clock: 128 logical FMA per clock.
            assert r.cycles >= 64 * len(p.b)


def test_sparse_beats_read_the_named_b_rows():
    """The beats' metadata decides which B rows enter: the same stored A with other (valid)
    metadata gives other D on the core, the golden model's, bit for bit (an RTL that read the
    dense rows or the wrong nibble would give the silicon's bits here only by chance)."""
    from tcore.golden.sparse import SparseA, mma_sp
    _, p = _sparse_problems(4)[0]
    # Every group's stored values at logical k 2 and 3 (nibble 0xE: i0 = 2, i1 = 3).
    alt = SparseA(p.sp.values, np.full_like(p.sp.meta, 0xEEEEEEEE), p.sp.k, p.in_fmt)
    want = mma_sp(alt, p.b, p.c, in_fmt=p.in_fmt, out_fmt=p.out_fmt)
    assert np.any(want != p.expected)
    d = run(CORE, Op(p.in_fmt, acc=p.out_fmt, sparse=True),
            Operands(alt.values, p.b, p.c, alt.meta), "verilator").d
    assert np.array_equal(d, want)


def test_input_ready_is_registered_state_only():
    """``i.ready`` never follows ``i.valid`` or the payload within a clock (the tops' feeders
    would otherwise wait on the kind's decode): on a random stream of every kind with random
    output stalls, flipping valid, last and the kind before each edge leaves ready as it was.
    The core's own control on the formal harness's payload-free model (small FIFOs, so that
    ready falls often)."""
    import random

    from amaranth.sim import Simulator

    from tcore.rtl.formats import InputKind
    from tcore.tb.mma4_formal import MMA4Control

    dut = MMA4Control(groups=2, outputs=4)
    kinds = [InputKind.FP16, InputKind.TF32, InputKind.FP8, InputKind.INT8]
    seen = {"low": 0, "high": 0}

    async def bench(ctx):
        rng = random.Random(5)
        held = None
        for _ in range(600):
            if held is None:
                held = (rng.random() < 0.8, rng.random() < 0.3, rng.choice(kinds))
            valid, last, kind = held
            ctx.set(dut.o.ready, rng.random() < 0.5)
            ctx.set(dut.i.valid, valid)
            ctx.set(dut.i.payload.last, last)
            ctx.set(dut.i.payload.mode.kind, kind)
            ready = ctx.get(dut.i.ready)
            for k in kinds:                 # the same clock, other inputs
                ctx.set(dut.i.valid, not valid)
                ctx.set(dut.i.payload.last, not last)
                ctx.set(dut.i.payload.mode.kind, k)
                assert ctx.get(dut.i.ready) == ready
            ctx.set(dut.i.valid, valid)
            ctx.set(dut.i.payload.last, last)
            ctx.set(dut.i.payload.mode.kind, kind)
            seen["high" if ready else "low"] += 1
            if not valid or ready:
                held = None
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert seen["low"] > 50 and seen["high"] > 50, seen
