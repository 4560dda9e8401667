"""The UART (design ``uart``): 8N1 frames both ways against the bench's own line, framing
errors, a full receive FIFO and glitches, on both simulators."""

import pytest

from tcore.sim.runner import run_bench

TESTS = ["received_bytes_arrive_in_order", "written_bytes_go_out_on_the_line",
         "framing_errors_overflow_and_glitches_are_flagged"]


@pytest.mark.parametrize("sim", ["verilator", "icarus"])
def test_uart_bench(sim):
    from tcore.rtl.designs import LINT_PARAMS
    run_bench(sim, "uart", "tcore.tb.uart_bench", TESTS, params=LINT_PARAMS["uart"], quiet=True)
