"""Backends that compute batches of output tiles: the golden model or the RTL in a simulator.

Every backend takes the same arguments as :func:`golden.mma.mma` on tile batches
(a (T, 16, K), b (T, K, 16), c (T, 16, 16)) and returns D bits of c's shape, so that
``tcore verify`` and the tests compare any backend against silicon the same way.
"""

from __future__ import annotations

from tcore.golden.silicon import KERNELS
from tcore.numerics import Op, UnsupportedOp

BACKENDS = ("golden", "amaranth", "icarus", "verilator")
RTL_BACKENDS = ("amaranth", "icarus", "verilator")


#: The captured kernels (``golden.silicon.KERNELS``) the RTL computes: every tensor-core kernel
#: (the MMA4 core); cuBLASLt's promoted FP8 accumulation (``e4m3_f32_p128``) is a library's
#: loop around the tensor core, not a tensor-core operation.
RTL_KERNELS = tuple(name for name, k in KERNELS.items() if k.op.promote is None)
#: The kernels the SoC design (``--through soc``) computes: every kernel of RTL_KERNELS, as
#: the warp design and the GEMM top do.
WARP_KERNELS = RTL_KERNELS


class BackendError(RuntimeError):
    """A backend cannot run the request (missing simulator, unsupported option)."""


def run_tiles(backend: str, a, b, c, *, in_fmt, out_fmt, arch="hopper", through="core",
              waves=False, b_fmt=None, instr="mma", saturate=False, promote=None, lanes=64,
              a_meta=None):
    """Compute D = A·B + C for a batch of 16x16 output tiles on ``backend``.

    ``in_fmt`` .. ``promote`` are :func:`golden.mma.mma`'s; the RTL backends take every
    Hopper kernel through the core (FP8 as ``wgmma`` computes it, no ``promote``) and FP16 /
    BF16 through the warp path.  Returns ``(d, info)``; ``info`` has ``cycles`` and ``waves``
    (a path) for RTL backends.  ``lanes``: the multipliers of the core (every path).
    With ``a_meta`` (PTX 2:4 metadata words, (T, 16, K/32)), ``a`` (T, 16, K/2) is a 2:4 sparse
    A's stored values (``mma.sp``, FP16/BF16, K a multiple of 32): the golden model's
    :func:`golden.sparse.mma_sp`, the RTL core's sparse beats.
    """
    from tcore.golden import get_arch

    arch = get_arch(arch)
    if a_meta is not None:
        return _run_sparse(backend, a, b, c, a_meta, in_fmt=in_fmt, out_fmt=out_fmt, arch=arch,
                           through=through, waves=waves, lanes=lanes)
    if backend == "golden":
        from tcore.golden import mma
        return mma(a, b, c, in_fmt=in_fmt, out_fmt=out_fmt, b_fmt=b_fmt, arch=arch, instr=instr,
                   saturate=saturate, promote=promote), {}
    if backend not in RTL_BACKENDS:
        raise BackendError(f"Backend must be one of {', '.join(BACKENDS)}, not {backend!r}")
    if promote:
        raise BackendError("promote=128 is cuBLASLt's accumulation loop around the tensor core, "
                           "not a tensor-core operation: the RTL has no such mode")
    try:
        op = Op(in_fmt, b_fmt, out_fmt, saturate)
    except UnsupportedOp as e:
        raise BackendError(str(e)) from None
    params = None
    if arch.name != "hopper":
        if through != "core":
            raise BackendError(f"--arch {arch.name} runs --through core (the MMA4 core built for "
                               "that generation); the warp designs implement Hopper's")
        if in_fmt not in ("fp16", "bf16"):
            raise BackendError(f"--arch {arch.name} is modelled for FP16 and BF16 only")
        from .core import DEFAULT_PARAMS
        params = {**DEFAULT_PARAMS, "arch": arch.name}
    step = op.k_step
    if a.shape[2] % step:
        raise BackendError(f"the RTL runs {in_fmt} K in steps of {step}; K = {a.shape[2]} is not "
                           f"a multiple of {step}")
    if through == "soc":
        # Each 16x16 tile as a GEMM of its own through the AXI block, one after another.
        from .runner import SimError
        from .soc import run_soc
        if backend == "amaranth":
            raise BackendError("--through soc runs on icarus or verilator (the soc design is "
                               "too large for Amaranth's simulator)")
        from tcore.rtl.designs import LINT_PARAMS
        soc_params = {**LINT_PARAMS["soc"], **({"lanes": lanes} if lanes != 64 else {})}
        try:
            return run_soc(backend, a, b, c, in_fmt=in_fmt, out_fmt=out_fmt, b_fmt=b_fmt,
                           saturate=saturate, waves=waves, params=soc_params)
        except (SimError, ValueError) as e:
            raise BackendError(str(e)) from None
    if lanes != 64:
        from .core import DEFAULT_PARAMS, PATHS
        base = DEFAULT_PARAMS if through == "core" else PATHS[through][2] if through in PATHS else {}
        params = {**(params or base), "lanes": lanes}
    if through not in ("core", "wmma"):
        raise BackendError(f"--through {through} runs whole-GEMM files only; tiles go through "
                           "core, wmma or soc")
    if through == "wmma" and backend == "amaranth":
        raise BackendError("--through wmma runs on icarus or verilator (the warp design is too "
                           "large for Amaranth's simulator)")
    from .core import run_through
    from .runner import SimError
    try:
        return run_through(through, backend, a, b, c, in_fmt=in_fmt, out_fmt=out_fmt,
                           b_fmt=b_fmt, saturate=saturate, waves=waves, params=params)
    except SimError as e:
        raise BackendError(str(e)) from None


def _run_sparse(backend, values, b, c, a_meta, *, in_fmt, out_fmt, arch, through, waves, lanes):
    """:func:`run_tiles` for a 2:4 sparse A (stored ``values`` and ``a_meta``)."""
    if backend == "golden":
        from tcore.golden.sparse import SparseA, mma_sp
        sp = SparseA(values, a_meta, b.shape[1], in_fmt)
        return mma_sp(sp, b, c, in_fmt=in_fmt, out_fmt=out_fmt, arch=arch), {}
    if backend not in RTL_BACKENDS:
        raise BackendError(f"Backend must be one of {', '.join(BACKENDS)}, not {backend!r}")
    if through != "core" or arch.name != "hopper" or in_fmt not in ("fp16", "bf16"):
        raise BackendError("2:4 sparse tiles run on the RTL --through core, FP16 or BF16, "
                           f"--arch hopper (not --through {through}, {in_fmt}, {arch.name})")
    if b.shape[1] % 32:
        raise BackendError(f"the RTL runs 2:4 sparse K in steps of 32; K = {b.shape[1]} is not")
    from .core import DEFAULT_PARAMS, run_many
    from .runner import SimError
    params = {**DEFAULT_PARAMS, **({"lanes": lanes} if lanes != 64 else {})}
    try:
        return run_many("core", backend, [(values, b, c, in_fmt, out_fmt, None, False, a_meta)],
                        waves=waves, params=params)[0]
    except SimError as e:
        raise BackendError(str(e)) from None
