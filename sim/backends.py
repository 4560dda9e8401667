"""Backends that compute batches of output tiles: the golden model or the RTL in a simulator.

Every backend takes the same arguments as :func:`golden.mma.mma` on tile batches
(a (T, 16, K), b (T, K, 16), c (T, 16, 16)) and returns D bits of c's shape, so that
``tcore verify`` and the tests compare any backend against silicon the same way.
"""

from __future__ import annotations

BACKENDS = ("golden", "amaranth", "icarus", "verilator")
RTL_BACKENDS = ("amaranth", "icarus", "verilator")


#: The captured kernels (``golden.silicon.KERNELS``) the RTL computes: the FP16/BF16 paths.
RTL_KERNELS = ("f16_f32", "bf16_f32", "f16_f16")


class BackendError(RuntimeError):
    """A backend cannot run the request (missing simulator, unsupported option)."""


def run_tiles(backend: str, a, b, c, *, in_fmt, out_fmt, arch="hopper", through="core",
              waves=False, b_fmt=None, instr="mma", saturate=False, promote=None):
    """Compute D = A·B + C for a batch of 16x16 output tiles on ``backend``.

    ``in_fmt`` .. ``promote`` are :func:`golden.mma.mma`'s; the RTL backends take FP16 and BF16
    inputs (FP32 or FP16 out) only.  Returns ``(d, info)``; ``info`` has ``cycles`` and
    ``waves`` (a path) for RTL backends.
    """
    from golden import get_arch

    arch = get_arch(arch)
    if backend == "golden":
        from golden import mma
        return mma(a, b, c, in_fmt=in_fmt, out_fmt=out_fmt, b_fmt=b_fmt, arch=arch, instr=instr,
                   saturate=saturate, promote=promote), {}
    if backend not in RTL_BACKENDS:
        raise BackendError(f"Backend must be one of {', '.join(BACKENDS)}, not {backend!r}")
    if in_fmt not in ("fp16", "bf16") or b_fmt not in (None, in_fmt) or promote:
        raise BackendError(f"the RTL computes FP16 and BF16 inputs only, not {in_fmt}"
                           f"{' x ' + b_fmt if b_fmt and b_fmt != in_fmt else ''}")
    if arch.name != "hopper":
        raise BackendError(f"the RTL core implements the Hopper arithmetic only, not --arch {arch.name}")
    if a.shape[2] % 16:
        raise BackendError(f"the RTL runs K in steps of 16; K = {a.shape[2]} is not a multiple of 16")
    if through not in ("core", "wmma"):
        raise BackendError(f"--through {through} runs whole-GEMM files only; tiles go through "
                           "core or wmma")
    if through == "wmma" and backend == "amaranth":
        raise BackendError("--through wmma runs on icarus or verilator (the warp design is too "
                           "large for Amaranth's simulator)")
    from .core import run_through
    from .runner import SimError
    try:
        return run_through(through, backend, a, b, c, in_fmt=in_fmt, out_fmt=out_fmt, waves=waves)
    except SimError as e:
        raise BackendError(str(e)) from None
