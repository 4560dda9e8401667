"""The warp register file (``rtl/fragments.py``) through its own cocotb bench on Verilator and
Icarus, against the golden WMMA API: loads of every layout and several ldm, stores, fills, D
write-back, dual-port loads and the registered read timing."""

import pytest

from rtl.designs import LINT_PARAMS
from sim.runner import run_bench

TESTS = ["loads_and_stores", "dual_port_loads", "fill_and_writeback", "read_timing"]


@pytest.mark.parametrize("sim", ["verilator", "icarus"])
def test_fragments_bench(sim):
    params = LINT_PARAMS["fragments"]
    run_bench(sim, "fragments", "tb.fragments_bench", TESTS, params=params,
              quiet=True)
