"""The ``soc`` design under cocotbext-axi (all under ``slow``, ``make test-all``): GEMMs bit-exact against the golden model through the
AXI4-Lite registers and the AXI4 master, bad configurations, memory errors, soft reset."""

import pytest

from sim.runner import run_bench

TESTS = ["gemms", "bad_configs", "read_error", "write_error", "soft_reset"]


@pytest.mark.slow          # a 6.8 MB design today (fragments in flip-flops): minutes to build
def test_soc_bench_verilator():
    run_bench("verilator", "soc", "tb.soc_bench", TESTS, params={}, quiet=True)


@pytest.mark.slow
@pytest.mark.parametrize("width", [32, 64])
def test_soc_narrow_data_bus(width):
    run_bench("verilator", "soc", "tb.soc_bench", ["gemms"], params={"data_width": width},
              options={"cases": "16x32x32:fp16:f32:c,32x16x16:bf16:f32:0"}, quiet=True)


@pytest.mark.slow
def test_soc_bench_icarus():
    run_bench("icarus", "soc", "tb.soc_bench", ["gemms", "bad_configs"], params={},
              options={"cases": "16x16x32:fp16:f32:c"}, quiet=True)
