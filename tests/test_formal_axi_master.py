"""The SoC block's AXI4 master (read and write engines at once, several bursts in flight on
each, reads of several transfers back to back) keeps the AXI4 handshake and burst rules against
any legal slave, proved with SymbiYosys (bounded, from reset); the proof is shown to bite on a
fault injected between the master and the checker."""

import pytest

from tcore.sim.formal import PROOFS, prove
from tcore.tb.axi_master_formal import SHIPPED_DEPTH, AxiMasterHarness, shipped


def test_axi_master_handshake_rules_hold():
    make, depth, mode = PROOFS["axi-master"]
    r = prove("axi-master", make(), depth=depth, mode=mode)
    assert r.passed, f"{r.failed} (log {r.log})"
    assert depth >= 20


@pytest.mark.slow
def test_axi_master_as_shipped_holds():
    """8 read and 4 write bursts in flight, the next read transfer taken while the last one's
    data arrives (a minute or two)."""
    r = prove("axi-master-shipped", shipped(), depth=SHIPPED_DEPTH, mode="bmc", timeout_s=1200)
    assert r.passed, f"{r.failed} (log {r.log})"


def test_axi_master_proof_catches_a_dropped_arvalid():
    r = prove("axi-master-glitch", AxiMasterHarness(glitch=True), depth=10, mode="bmc")
    assert r.status == "FAIL" and "ARVALID dropped without ARREADY" in r.failed
