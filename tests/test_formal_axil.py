"""The AXI4-Lite slave's handshake rules, proved with SymbiYosys (bounded, from reset), and the
proof shown to bite on a fault injected between the slave and the checker."""

from tcore.sim.formal import PROOFS, prove
from tcore.tb.axil_formal import AxiLiteHarness


def test_axil_handshake_rules_hold():
    make, depth, mode = PROOFS["axil"]
    r = prove("axil", make(), depth=depth, mode=mode)
    assert r.passed, f"{r.failed} (log {r.log})"
    assert depth >= 20


def test_axil_proof_catches_a_dropped_bvalid():
    r = prove("axil-glitch", AxiLiteHarness(glitch=True), depth=8, mode="bmc")
    assert r.status == "FAIL" and "BVALID dropped without BREADY" in r.failed
