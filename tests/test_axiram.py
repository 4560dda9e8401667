"""The board's AXI memory (design ``axiram``): cocotbext-axi's master and the CPU port against
a byte array, on both simulators."""

import pytest

from tcore.sim.runner import run_bench

TESTS = ["bursts_of_every_length_and_alignment", "reads_writes_and_the_cpu_at_once"]


@pytest.mark.parametrize("sim", ["verilator", "icarus"])
def test_axiram_bench(sim):
    from tcore.rtl.designs import LINT_PARAMS
    run_bench(sim, "axiram", "tcore.tb.axiram_bench", TESTS, params=LINT_PARAMS["axiram"], quiet=True)
