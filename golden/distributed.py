"""The golden model on ``dask.array`` inputs, and on a ``dask.distributed`` cluster.

:func:`tcore.golden.mma.mma` and :func:`tcore.golden.matmul` hand dask arrays here (a check at their top):
the result is a lazy ``dask.array`` of output blocks, each block the serial golden function on
one block of rows of A (with the whole K) and one block of columns of B (the whole K), so every
output element's K chain runs, in order, inside one task, exactly as in the serial model.  K is
never split (the chain rule makes it sequential; ``promote=128`` could be split at 128, but is
not).  A is rechunked to (its row chunks, all of K), B to (all of K, its column chunks), C to
(A's row chunks, B's column chunks); batch dimensions keep (and align) their chunks.

Each task runs the serial function with ``workers=1`` unless ``workers`` is given: dask spreads
the blocks over its workers' threads, one block per thread.

``dask`` (and ``distributed`` for :func:`connect`) are optional: ``pip install 'tcore[dask]'``.
Nothing here imports them until a dask array arrives.
"""

from __future__ import annotations

from functools import partial

import numpy as np

__all__ = ["is_dask", "mma", "matmul", "connect", "split", "DaskMissing"]


class DaskMissing(ImportError):
    """dask (or dask.distributed) is not installed."""


def is_dask(x) -> bool:
    """Whether ``x`` is a dask collection (duck-typed: no dask import)."""
    return hasattr(x, "__dask_graph__")


def _da():
    try:
        import dask.array as da
    except ImportError:
        raise DaskMissing("dask arrays need dask: pip install 'dask[distributed]' "
                          "(or tcore[dask])") from None
    return da


def _as_array(da, x, name):
    if is_dask(x) and not isinstance(x, da.Array):
        raise TypeError(f"{name} is a dask {type(x).__name__}; golden takes dask.array.Array "
                        "(or NumPy) operands")
    return x


def _view(shape, dtype):
    """A zero-memory NumPy stand-in of ``shape`` and ``dtype`` for the serial checks."""
    return np.broadcast_to(np.zeros((), dtype), shape)


def _blockwise(fn, a, b, c, dtype, kwargs):
    """D blocks = ``fn(a_block, b_block[, c_block], **kwargs)``, K whole in every block.

    ``a`` (..., M, K), ``b`` (..., K, N), ``c`` (..., M, N) or None: any mix of dask and NumPy
    arrays (NumPy ones are chunked to match the dask ones).  Batch dimensions broadcast as in
    ``numpy.matmul`` (dask aligns their chunks; a size-1 dimension is broadcast).
    """
    da = _da()
    # Row chunks from A (else C), column chunks from B (else C).
    rows = a.chunks[-2] if is_dask(a) else (c.chunks[-2] if is_dask(c) else -1)
    cols = b.chunks[-1] if is_dask(b) else (c.chunks[-1] if is_dask(c) else -1)
    batch = np.broadcast_shapes(*(x.shape[:-2] for x in (a, b, c) if x is not None))
    nb = len(batch)
    bi = tuple(f"b{i}" for i in range(nb))
    args = []
    for x, want, ind in ((a, (rows, -1), ("i", "k")), (b, (-1, cols), ("k", "j")),
                         (c, (rows, cols), ("i", "j"))):
        if x is None:
            continue
        if is_dask(x):
            x = x.rechunk({x.ndim - 2: want[0], x.ndim - 1: want[1]})
        else:
            x = np.asarray(x)
            x = da.from_array(x, chunks=(-1,) * (x.ndim - 2) + want)
        args += [x, bi[nb - (x.ndim - 2):] + ind]
    return da.blockwise(partial(_block, fn, kwargs), bi + ("i", "j"), *args, dtype=dtype,
                        concatenate=True, meta=np.empty((0,) * (nb + 2), dtype))


def _block(fn, kwargs, *blocks):
    """One output block: the serial golden function on NumPy blocks."""
    return fn(*blocks, **kwargs)


def mma(a, b, c, *, serial, check, workers=None, **kwargs):
    """``serial`` (:func:`tcore.golden.mma.mma`, which hands dask arrays here) on dask arrays (any
    operand a ``dask.array``): a lazy ``dask.array`` of D's bits, chunked over M (A's row
    chunks) and N (B's column chunks), the whole K in each block.  The arguments are checked
    now, as the serial model checks them (``check``: :func:`tcore.golden.mma.check_operands`).  The
    engine passes itself in, so that this module imports none of the engines."""
    da = _da()
    a, b, c = (_as_array(da, x, n) for x, n in ((a, "a"), (b, "b"), (c, "c")))
    check(*(_view(x.shape, x.dtype) for x in (a, b, c)), kwargs.get("in_fmt", "fp16"),
                        kwargs.get("out_fmt", "fp32"), kwargs.get("b_fmt"))
    # The other arguments (mode, instr, arch, engine, promote, ...): a 1x1x1 product checks them.
    serial(np.zeros((1, 1), a.dtype), np.zeros((1, 1), b.dtype), np.zeros((1, 1), c.dtype),
             workers=1, **kwargs)
    kwargs["workers"] = 1 if workers is None else workers
    return _blockwise(serial, a, b, c, c.dtype, kwargs)


def matmul(a, b, c=None, *, serial, op_of, check, workers=None, **kwargs):
    """``serial`` (:func:`tcore.golden.matmul`) on dask arrays: a lazy ``dask.array`` (float32,
    float16 or int32), chunked over M and N as :func:`mma`, the whole K in each block.
    ``op_of`` is :func:`tcore.golden.floats.matmul_op`, ``check`` :func:`tcore.golden.mma.check_operands`."""
    da = _da()
    a, b, c = (_as_array(da, x, n) for x, n in ((a, "a"), (b, "b"), (c, "c")))
    for name, x in (("a", a), ("b", b)):
        if not hasattr(x, "dtype"):
            raise TypeError(f"{name} must be an array (dask or NumPy), not {type(x).__name__}")
    if a.ndim < 2 or b.ndim < 2:
        raise ValueError(f"a and b must be at least 2-D (..., rows, cols), not {a.shape}, {b.shape}")
    # Formats, out, c's dtype and the other arguments: the serial function on a 1x1x1 product.
    c1 = None if c is None else np.zeros((1, 1), c.dtype)
    d1 = serial(np.zeros((1, 1), a.dtype), np.zeros((1, 1), b.dtype), c1, workers=1, **kwargs)
    op = op_of(a.dtype, b.dtype, **{k: kwargs[k] for k in
                                    ("out", "saturate", "instr", "promote") if k in kwargs})
    cshape = (a.shape[-2], b.shape[-1]) if c is None else c.shape
    check(_view(a.shape, op.a_bits), _view(b.shape, op.b_bits),
                   _view(cshape, op.acc_bits), op.a, op.acc, op.b)
    kwargs["workers"] = 1 if workers is None else workers
    return _blockwise(serial, a, b, c, d1.dtype, kwargs)


# -- a cluster --------------------------------------------------------------------------------

def connect(address: str, timeout: float | str | None = None):
    """A ``dask.distributed.Client`` of the scheduler at ``address`` (``tcp://host:port``).

    Raises :class:`DaskMissing` where dask.distributed is not installed and ``OSError`` (one
    line) where the scheduler cannot be reached within ``timeout`` (default: dask's
    ``distributed.comm.timeouts.connect``, 30 s unless configured).
    """
    try:
        from distributed import Client
    except ImportError:
        raise DaskMissing("--scheduler needs dask.distributed: pip install 'dask[distributed]' "
                          "(or tcore[dask])") from None
    try:
        kw = {} if timeout is None else {"timeout": timeout}
        return Client(address, set_as_default=False, **kw)
    except (OSError, TimeoutError, ValueError, TypeError) as e:
        why = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise OSError(f"cannot reach the dask scheduler at {address}: {why}") from None


def split(m: int, n: int, parts: int, align: int = 16) -> tuple[int, int]:
    """Row and column block sizes (multiples of ``align`` where the matrix allows) that cut an
    M x N output into about ``parts`` nearly square-gridded blocks."""
    parts = max(1, int(parts))
    pm = max(1, min(-(-m // align), round(parts ** 0.5)))
    pn = max(1, min(-(-n // align), -(-parts // pm)))
    rm = -(-(-(-m // pm)) // align) * align
    cn = -(-(-(-n // pn)) // align) * align
    return min(rm, m), min(cn, n)
