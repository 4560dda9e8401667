"""The AXI4-Lite register block: cocotbext-axi's master with pauses on every channel, on both
simulators; the register document generated from the same definition."""

from pathlib import Path

import pytest

from tcore.rtl.regmap import REGISTERS, markdown
from tcore.sim.cli import main
from tcore.sim.runner import run_bench

TESTS = ["reset_values_and_constants", "rw_registers_and_strobes", "engine_inputs_read_back",
         "start_pulses_once_and_done_is_sticky", "unmapped_addresses_answer_slverr",
         "concurrent_traffic_under_pauses"]
DOC = Path(__file__).resolve().parent.parent / "docs" / "registers.md"


@pytest.mark.parametrize("sim", ["verilator", "icarus"])
def test_axil_bench(sim):
    run_bench(sim, "axilregs", "tcore.tb.axil_bench", TESTS, params={}, quiet=True)


def test_register_document_matches_the_map(tmp_path, capsys):
    assert DOC.read_text() == markdown() + "\n"
    out = tmp_path / "regs.md"
    assert main(["regs", "-o", str(out)]) == 0
    assert out.read_text() == DOC.read_text()
    for r in REGISTERS:
        assert f"`{r.name}` (0x{r.offset:02X})" in DOC.read_text()
