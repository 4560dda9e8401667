"""cocotb testbenches, one per design, and the formal harnesses (``tcore.sim.formal``)."""
