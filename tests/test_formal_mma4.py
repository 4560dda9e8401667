"""The MMA4 core's stream ports under SymbiYosys (``tb/mma4_formal.py``): with the payload
abstracted to a 1-bit mark, a beat accepted is never lost or duplicated, outputs come in order,
valid and payload are held until ready, and a reset in mid-stream leaves no stale output; to a
depth of the fused latency plus 8 beats.  And the check shown to bite on an injected fault."""

import pytest

from tcore.rtl.mma4 import MAX_BEATS, MMA4
from tcore.sim.formal import PROOFS, prove
from tcore.tb.mma4_formal import harness


def test_mma4_stream_ports_hold():
    make, depth, mode = PROOFS["mma4"]
    assert depth >= MMA4.latency_of() + MAX_BEATS - 1 + 8
    r = prove("mma4", make(), depth=depth, mode=mode)
    assert r.passed, f"{r.failed} (log {r.log})"


@pytest.mark.slow
def test_mma4_stream_ports_hold_without_the_skid():
    """The same proof on the core built with ``skid=False`` (the ECP5-25F build)."""
    make, depth, mode = PROOFS["mma4-noskid"]
    r = prove("mma4-noskid", make(), depth=depth, mode=mode)
    assert r.passed, f"{r.failed} (log {r.log})"


def test_mma4_proof_catches_a_dropped_valid():
    r = prove("mma4-glitch", harness(glitch=True), depth=MMA4.latency_of() + 4, mode="bmc")
    assert r.status == "FAIL" and "o.valid or o.payload changed without o.ready" in r.failed, r
