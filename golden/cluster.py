"""The golden model on a ``dask.distributed`` cluster: :func:`cluster_mma` (``tcore gemm
--scheduler``) and :func:`verify_tiles` (``tcore verify --scheduler``'s task).  The blockwise
dask arrays are :mod:`tcore.golden.distributed`'s; this module sits above both it and the engine."""

from __future__ import annotations

import numpy as np

from . import distributed
from .distributed import connect
from .mma import mma

__all__ = ["cluster_mma", "verify_tiles", "connect"]


def cluster_mma(client, a, b, c, *, parts=None, **kwargs):
    """:func:`tcore.golden.mma.mma` of NumPy bits computed on ``client``'s cluster: the output cut into
    ``parts`` blocks (default four per worker thread), D back as NumPy."""
    da = distributed._da()
    if parts is None:
        parts = 4 * max(1, sum(client.nthreads().values()))
    m, n = c.shape[-2:]
    rm, cn = distributed.split(m, n, parts)
    lead = (-1,) * (a.ndim - 2)
    # The operands go to the cluster once (scatter), not inside every task's graph.  Keys of
    # their own (hash=False): content-hashed keys are shared with an earlier scatter of the
    # same bits, and a computation that starts while the scheduler still forgets that one's
    # key fails with "lost dependencies" (dask/distributed#8576).
    fa, fb, fc = client.scatter([np.asarray(a), np.asarray(b), np.asarray(c)], hash=False)
    xa = da.from_delayed(_delayed(fa), a.shape, a.dtype).rechunk(lead + (rm, -1))
    xb = da.from_delayed(_delayed(fb), b.shape, b.dtype).rechunk(lead + (-1, cn))
    xc = da.from_delayed(_delayed(fc), c.shape, c.dtype).rechunk(lead + (rm, cn))
    d = mma(xa, xb, xc, **kwargs)
    return client.compute(d).result()


def _delayed(future):
    import dask
    return dask.delayed(future)


def verify_tiles(a, b, c, expected, **kwargs) -> tuple[int, int]:
    """``(checked, mismatches)`` of the golden model against captured outputs: one ``tcore
    verify`` job (a file's kernel), run where it is submitted (a cluster worker)."""
    got = mma(a, b, c, **kwargs)
    return int(got.size), int((got != expected).sum())
