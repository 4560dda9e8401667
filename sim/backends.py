"""Backends that compute batches of output tiles: the golden model or the RTL in a simulator.

Every backend takes the same arguments as :func:`golden.mma.mma` on tile batches
(a (T, 16, K), b (T, K, 16), c (T, 16, 16)) and returns D bits of c's shape, so that
``tcore verify`` and the tests compare any backend against silicon the same way.
"""

from __future__ import annotations

BACKENDS = ("golden",)


class BackendError(RuntimeError):
    """A backend cannot run the request (missing simulator, unsupported option)."""


def run_tiles(backend: str, a, b, c, *, in_fmt, out_fmt, arch="hopper", through="core", **opts):
    """Compute D = A·B + C for a batch of 16x16 output tiles on ``backend``."""
    if backend == "golden":
        from golden import mma
        return mma(a, b, c, in_fmt=in_fmt, out_fmt=out_fmt, arch=arch)
    raise BackendError(f"Backend must be one of {', '.join(BACKENDS)}, not {backend!r}")
