from pathlib import Path

import pytest

SILICON = Path(__file__).parent / "data" / "silicon"


@pytest.fixture(scope="session")
def silicon_dir():
    return SILICON


def kernel_batch(p):
    """The runner's batch of a capture's problem (``tcore.golden.silicon.Problem``): its kernel's Op
    on its tiles."""
    from tcore.sim.run import Batch, Operands
    return Batch(p.kernel.op, Operands(p.a, p.b, p.c))


def sparse_batch(p):
    """The runner's batch of a 2:4 sparse tile problem (``tcore.golden.sparse.TileProblem``)."""
    from tcore.numerics import Op
    from tcore.sim.run import Batch, Operands
    return Batch(Op(p.in_fmt, acc=p.out_fmt, sparse=True), Operands(p.sp.values, p.b, p.c, p.sp.meta))
