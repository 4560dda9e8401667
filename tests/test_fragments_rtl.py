"""The warp register file (``rtl/fragments.py``) through its own cocotb bench on Verilator and
Icarus, against the golden WMMA API: loads of every layout and several ldm, stores, fills, D
write-back, dual-port loads and the registered read timing."""

import pytest

from tcore.rtl.designs import LINT_PARAMS
from tcore.sim.runner import run_bench

TESTS = ["loads_and_stores", "dual_port_loads", "fill_and_writeback", "read_timing"]


@pytest.mark.parametrize("sim", ["verilator", "icarus"])
def test_fragments_bench(sim):
    params = LINT_PARAMS["fragments"]
    run_bench(sim, "fragments", "tcore.tb.fragments_bench", TESTS, params=params,
              quiet=True)


@pytest.mark.parametrize("stage", [False, True])
def test_load_stage_writes_a_clock_later(stage):
    """``load_stage``: a word on the load port reaches the register file's columns a clock
    later than without it (Amaranth simulator, the columns' contents read directly)."""
    from amaranth.sim import Simulator

    from tcore.rtl.fragments import MATRIX_A, FragmentBank, Shape

    dut = FragmentBank(a_frags=1, b_frags=1, acc_frags=1, load_stage=stage)
    cols = dut.columns[MATRIX_A]
    seen = []

    async def bench(ctx):
        port = dut.load[0]
        ctx.set(port.en, 1)
        ctx.set(port.kind, MATRIX_A)
        ctx.set(port.mnk, Shape.M16N16K16)
        ctx.set(port.line, 3)
        ctx.set(port.word, 1)
        ctx.set(port.data, int.from_bytes(bytes(range(1, 17)), "little"))
        await ctx.tick()
        ctx.set(port.en, 0)
        for _ in range(3):
            seen.append(sum(ctx.get(mem.data[e]) != 0 for mem in cols for e in range(mem.depth)))
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    # The word's elements are in the columns from the clock it lands on, and stay.
    landed = [n > 0 for n in seen]
    assert landed == ([False, True, True] if stage else [True, True, True]), seen
    assert seen[1] == seen[2]
