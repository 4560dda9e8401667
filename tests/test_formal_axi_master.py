"""The SoC block's AXI4 master (several read bursts in flight) keeps the AXI4 handshake and
burst rules against any legal slave, proved with SymbiYosys (bounded, from reset); the proof is
shown to bite on a fault injected between the master and the checker."""

from sim.formal import PROOFS, prove
from tb.axi_master_formal import AxiMasterHarness


def test_axi_master_handshake_rules_hold():
    make, depth, mode = PROOFS["axi-master"]
    r = prove("axi-master", make(), depth=depth, mode=mode)
    assert r.passed, f"{r.failed} (log {r.log})"
    assert depth >= 20


def test_axi_master_proof_catches_a_dropped_arvalid():
    r = prove("axi-master-glitch", AxiMasterHarness(glitch=True), depth=10, mode="bmc")
    assert r.status == "FAIL" and "ARVALID dropped without ARREADY" in r.failed
