"""Matrix multiply-accumulate on tiles: D = A·B + C, chained over K in steps of the block width.

:func:`mma` is the model of a tensor-core MMA of any K (a WMMA 16x16x16 step, a 16x16x32, a
wgmma chain, or a whole matmulT GEMM), on bit patterns: the k range is cut into steps of the
block width n of the generation and input kind (:mod:`numerics`; the last step may be
shorter), each step is one block fused dot-add (:mod:`tcore.golden.dot`), and the rounded output of a
step is the addend of the next.  Integer inputs (S8, U8) sum exactly instead, wrapped modulo
2**32 or clamped per step.  :func:`mma4` is the golden twin of the RTL core ``rtl/mma4.py``.

Two engines give the same bits: ``"compiled"`` (the default where numba imports) runs the
chain in the numba kernels of :mod:`tcore.golden.fast`; ``"numpy"`` runs it as NumPy array
operations (:func:`tcore.golden.dot.fused_sum`, :func:`tcore.golden.dot.round_output`), the twin the tests
check it against.  Either spreads the output tiles (or blocks of output rows) over ``workers``
threads; K, a sequential chain, is never split.
"""

from __future__ import annotations

import os

import numpy as np

from tcore.numerics import Op
from tcore.numerics.formats import INPUT_FORMATS, dtype_of

from .arch import get_arch, HOPPER
from .dot import exact_round, finite_terms, fused_sum, round_output
from .formats import FP16, FP32, Format, get_format, pow2_nominal, to_float

__all__ = ["mma", "mma4", "MODES", "INSTRS", "ENGINES", "default_engine", "IN_FORMATS",
           "INT_FORMATS", "check_operands", "input_kind", "instr_of"]

MODES = ("hopper", "ieee")
INSTRS = ("mma", "wgmma")
#: Integer input formats (two's complement S8, unsigned U8); their accumulator is S32.
INT_FORMATS = tuple(f.name for f in INPUT_FORMATS.values() if f.integer)
#: Every input format, with the B formats it pairs with (A's first).  (The checks read the
#: table itself, so a row added to it counts.)
IN_FORMATS = {f.name: f.b_formats for f in INPUT_FORMATS.values()}

# Output elements handled per pass: keeps the working arrays inside the cache.
_CHUNK = 16384


def input_kind(fmt: str) -> str:
    """The datapath kind (:data:`tcore.numerics.KINDS`) of an input format name."""
    return INPUT_FORMATS[fmt].kind if fmt in INPUT_FORMATS else fmt


def instr_of(fmt: str) -> str:
    """The instruction a tensor-core step of input format (or kind) ``fmt`` is measured
    through: ``"wgmma"`` for FP8 (``mma.sync`` FP8 is an emulation on sm_90), ``"mma"``
    otherwise; the format table's (:attr:`tcore.numerics.Op.default_instr`)."""
    kind = input_kind(fmt)
    return next((f.instrs[0] for f in INPUT_FORMATS.values() if f.kind == kind), "mma")


def _out_dtype(out_fmt: str):
    return np.dtype(dtype_of(out_fmt))


def check_operands(a, b, c, in_fmt, out_fmt, b_fmt=None):
    """Validate operand arrays and formats; return ``(a, b, c, in_fmt, out_fmt, b_fmt)``.

    Formats come back as names for the integer kinds and ``s32``, as :class:`Format` otherwise.
    Raises TypeError for wrong dtypes and ValueError for wrong shapes or formats, each with a
    message that names the operand.
    """
    in_name = in_fmt.name if isinstance(in_fmt, Format) else in_fmt
    if in_name not in INPUT_FORMATS:
        raise ValueError(f"Input format must be one of {', '.join(INPUT_FORMATS)}, not {in_fmt!r}")
    pairs = INPUT_FORMATS[in_name].b_formats
    b_name = b_fmt.name if isinstance(b_fmt, Format) else (b_fmt or pairs[0])
    if b_name not in pairs:
        raise ValueError(f"A in {in_name} pairs with B in {' or '.join(pairs)}, "
                         f"not {b_name!r}")
    out_name = out_fmt.name if isinstance(out_fmt, Format) else out_fmt
    outs = INPUT_FORMATS[in_name].outputs
    if out_name not in outs:
        raise ValueError(f"Output format for {in_name} inputs must be {' or '.join(outs)}, "
                         f"not {out_fmt!r}")
    a, b, c = np.asarray(a), np.asarray(b), np.asarray(c)
    for name, arr, want, what in (("a", a, np.dtype(INPUT_FORMATS[in_name].dtype), in_name),
                                  ("b", b, np.dtype(INPUT_FORMATS[b_name].dtype), b_name),
                                  ("c", c, _out_dtype(out_name), out_name)):
        if arr.dtype != want:
            hint = "" if arr.dtype.kind in "ui" else (
                f"; for a float array x pass x.view(np.{np.dtype(want).name}), or use "
                "tcore.golden.matmul, which takes floats")
            raise TypeError(f"{name} must hold {np.dtype(want).name} bit patterns ({what}), "
                            f"not {arr.dtype}{hint}")
    if a.ndim < 2 or b.ndim < 2 or c.ndim < 2:
        raise ValueError(f"a, b and c must be at least 2-D (..., rows, cols), "
                         f"not {a.shape}, {b.shape}, {c.shape}")
    m, k = a.shape[-2:]
    k2, n = b.shape[-2:]
    if k != k2:
        raise ValueError(f"a is (..., {m}, {k}) but b is (..., {k2}, {n}): K differs")
    if k < 1:
        raise ValueError("K must be at least 1")
    if c.shape[-2:] != (m, n):
        raise ValueError(f"c must be (..., {m}, {n}) to match a and b, not {c.shape}")
    try:
        np.broadcast_shapes(a.shape[:-2], b.shape[:-2], c.shape[:-2])
    except ValueError:
        raise ValueError(f"batch shapes of a {a.shape}, b {b.shape}, c {c.shape} "
                         "do not broadcast") from None
    if input_kind(in_name) != "int8":
        in_name, b_name, out_name = get_format(in_name), get_format(b_name), get_format(out_name)
    return a, b, c, in_name, out_name, b_name


ENGINES = ("compiled", "numpy")


def default_engine() -> str:
    """``"compiled"`` where numba imports (:mod:`tcore.golden.fast`), ``"numpy"`` otherwise."""
    from . import fast
    return "compiled" if fast.AVAILABLE else "numpy"


def mma(a, b, c, *, op=None, in_fmt="fp16", out_fmt="fp32", b_fmt=None, arch=HOPPER,
        mode="hopper", instr="mma", saturate=False, promote=None, engine=None, workers=None):
    """D = A·B + C with the tensor core's arithmetic, on bit patterns.

    The operation is ``op`` (a :class:`tcore.numerics.Op`, or its spelling such as ``"e4m3->fp16"``),
    or the keywords ``in_fmt`` .. ``promote`` one by one; not both.

    Parameters
    ----------
    a : uint array (..., M, K)
        A's bit patterns: uint16 for FP16/BF16, uint32 for TF32 (FP32 patterns whose 13 low
        fraction bits are ignored), uint8 for E4M3/E5M2 and for S8 (two's complement) / U8.
    b : uint array (..., K, N)
        B, in ``b_fmt``.
    c : uint32 array (..., M, N), or uint16 in FP16-output mode
        The addend (FP32 bits, FP16 bits, or S32 bits for integer inputs).
    in_fmt : "fp16", "bf16", "tf32", "e4m3", "e5m2", "s8" or "u8"
        A's format.
    out_fmt : "fp32", "fp16" or "s32"
        The accumulator: FP32 (round toward zero; FP8 also cut to 13 fraction bits) or FP16
        (one round to nearest-even) for FP16 and FP8 inputs, FP32 for BF16 and TF32, S32 for
        integers.
    b_fmt : str or None
        B's format: the same as A's (None), the other FP8 format for mixed FP8, S8 for U8 A.
    arch : "hopper", "ampere", "volta" or an :class:`tcore.numerics.Arch`
        Block width, grid and FP16 floor per input kind (:mod:`numerics`); TF32, FP8 and INT8
        are modelled for Hopper only.
    mode : "hopper" or "ieee"
        ``"ieee"`` is the textbook fused reference instead (floating-point inputs): the exact
        sum of all K products and c rounded once to nearest-even (for comparison; zero gives
        +0, NaN is canonical).
    instr : "mma" or "wgmma"
        The instruction modelled.  They give the same bits for FP16, BF16, TF32 and INT8
        (measured on the H200); FP8 needs ``"wgmma"``: ``mma.sync`` with FP8 operands on sm_90
        is a compiler emulation (conversion to FP16, then an FP16 MMA) that is not modelled.
    saturate : bool
        Integer inputs: clamp each 32-wide K step's result to the S32 range (``.satfinite``)
        instead of wrapping it modulo 2**32.
    promote : None or 128
        FP8 with FP32 output: cuBLASLt's default accumulation (``torch._scaled_mm`` with
        ``use_fast_accum=False``): K in chunks of 128, each a wgmma chain from c = 0, the chunk
        results added in K order into an FP32 accumulator with round-to-nearest-even, then c
        added the same way, once.  None is the plain chain.
    engine : None, "compiled" or "numpy"
        Who computes: ``"compiled"`` runs the chain in numba kernels (:mod:`tcore.golden.fast`),
        ``"numpy"`` in NumPy array operations (:mod:`tcore.golden.dot`, the checked twin); the bits
        are the same.  None: compiled where numba imports, NumPy otherwise.  ``mode="ieee"``
        always runs in NumPy; INT8's compiled engine sums each step in float32 BLAS (exact:
        every partial sum is an integer below 2**20).
    workers : None or int
        Threads the output tiles (blocks of output rows; never K) are spread over; None is
        every core (``os.cpu_count()``).

    Returns
    -------
    D bits, shape broadcast(...) + (M, N), dtype of c.  Given ``dask.array`` operands, a lazy
    ``dask.array`` of D instead, chunked over M and N, the whole K in each block
    (:mod:`tcore.golden.distributed`).
    """
    if op is not None:
        if (in_fmt, out_fmt, b_fmt, instr, saturate, promote) != ("fp16", "fp32", None, "mma",
                                                                  False, None):
            raise TypeError("give the operation as op= or as in_fmt, b_fmt, out_fmt, instr, "
                            "saturate and promote, not both")
        op = Op.parse(op) if isinstance(op, str) else op
        if op.sparse:
            raise ValueError(f"{op} has a 2:4 sparse A: golden.sparse.mma_sp computes it")
        in_fmt, b_fmt, out_fmt = op.a, op.b, op.acc
        instr, saturate, promote = op.instr, op.saturate, op.promote
    if any(hasattr(x, "__dask_graph__") for x in (a, b, c)):      # dask: golden.distributed
        from .distributed import mma as dask_mma
        return dask_mma(a, b, c, serial=mma, check=check_operands, in_fmt=in_fmt, out_fmt=out_fmt, b_fmt=b_fmt, arch=arch, mode=mode,
                        instr=instr, saturate=saturate, promote=promote, engine=engine,
                        workers=workers)
    a, b, c, in_fmt, out_fmt, b_fmt = check_operands(a, b, c, in_fmt, out_fmt, b_fmt)
    arch = get_arch(arch)
    in_name = in_fmt if isinstance(in_fmt, str) else in_fmt.name
    kind = input_kind(in_name)
    if mode not in MODES:
        raise ValueError(f"Mode must be one of {MODES}, not {mode!r}")
    if instr not in INSTRS:
        raise ValueError(f"Instruction must be one of {INSTRS}, not {instr!r}")
    if kind == "fp8" and instr != "wgmma":
        raise ValueError(f"FP8 inputs need instr='wgmma' (instr_of({in_name!r}), golden.matmul's "
                         f"default for FP8), not instr={instr!r}: mma.sync with FP8 operands on "
                         "sm_90 is a compiler emulation (conversion to FP16, then an FP16 MMA) that "
                         "this model does not reproduce")
    if engine is None:
        engine = default_engine()
    if engine not in ENGINES:
        raise ValueError(f"Engine must be one of {ENGINES} or None, not {engine!r}")
    if engine == "compiled":
        from . import fast
        if not fast.AVAILABLE:
            raise RuntimeError("engine='compiled' needs numba, which does not import here; "
                               "use engine='numpy' (or None, which falls back to it)")
    if workers is None:
        workers = os.cpu_count() or 1
    if int(workers) < 1:
        raise ValueError(f"workers must be at least 1, not {workers!r}")
    if kind == "bf16" and not arch.bf16:
        raise ValueError(f"{arch.name} has no BF16 path")
    step = arch.step(kind)
    if mode == "ieee" and kind == "int8":
        raise ValueError("mode='ieee' is for floating-point inputs; integer sums are exact already")
    if saturate and kind != "int8":
        raise ValueError("saturate is for integer (S8/U8) inputs")
    if promote is not None:
        if promote != 128:
            raise ValueError(f"promote must be None or 128, not {promote!r}")
        if kind != "fp8" or out_fmt is not FP32 or mode != "hopper":
            raise ValueError("promote=128 is cuBLASLt's FP8 accumulation: FP8 inputs, FP32 output")
    m, k = a.shape[-2:]
    n = b.shape[-1]
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2], c.shape[:-2])
    nb = int(np.prod(batch, dtype=np.int64))
    if nb * m * n == 0:                         # nothing to compute: the empty result
        return np.zeros(batch + (m, n), dtype=c.dtype)
    a = np.broadcast_to(a, batch + (m, k)).reshape(nb, m, k)
    b = np.broadcast_to(b, batch + (k, n)).reshape(nb, k, n)
    c = np.broadcast_to(c, batch + (m, n)).reshape(nb, m, n)
    if engine == "compiled" and mode != "ieee" and kind != "int8":
        return _compiled(a, b, c, kind, in_fmt, b_fmt, out_fmt, step, saturate, promote,
                         workers).reshape(batch + (m, n))
    out = np.empty(c.shape, dtype=c.dtype)
    if kind == "int8":
        exact = _int_chunk if engine == "numpy" else _int_blas_chunk

        def run(a, b, c):
            return exact(a, b, c, in_fmt == "u8", step.block, saturate)
    elif mode == "ieee":
        def run(a, b, c):
            return _ieee_chunk(a, b, c, in_fmt, b_fmt, out_fmt)
    elif promote:
        def run(a, b, c):
            return _promoted_chunk(a, b, c, in_fmt, b_fmt, step, promote)
    else:
        def run(a, b, c):
            return _step_chunk(a, b, c, in_fmt, b_fmt, out_fmt, step)
    per = max(1, _CHUNK // (m * n))
    if c.shape[0] > 1 or m * n <= _CHUNK:
        # Chunks of whole tiles (batch entries), spread over the workers.
        parts = [(slice(t0, t0 + per), slice(None)) for t0 in range(0, c.shape[0], per)]
    else:
        # One large product: chunks of output rows (each with its whole K chain).
        rows = max(1, _CHUNK // n)
        parts = [(slice(None), slice(i0, i0 + rows)) for i0 in range(0, m, rows)]

    def one(part):
        ts, rs = part
        out[ts, rs] = run(a[ts, rs], b[ts], c[ts, rs])

    if int(workers) > 1 and len(parts) > 1:          # NumPy releases the GIL in its loops
        from .fast import _map, _parts
        _map(lambda lo, hi: [one(p) for p in parts[lo:hi]], _parts(len(parts), int(workers)))
    else:
        for p in parts:
            one(p)
    return out.reshape(batch + (m, n))


def _compiled(a, b, c, kind, a_fmt, b_fmt, out_fmt, step, saturate, promote, workers):
    """The floating-point chain in the numba kernels of :mod:`tcore.golden.fast`; (nb, m, k) x
    (nb, k, n) bits.  (INT8's compiled engine is float32 BLAS: :func:`_int_blas_chunk`.)"""
    from . import fast
    fp16 = out_fmt is FP16
    if fast.tiles_mode(a.shape, b.shape):
        return fast.run_tiles(a, b, c, a_fmt, b_fmt, grid=step.grid, block=step.block,
                              floor=step.f16_floor if fp16 else None, fp16=fp16,
                              cut=None if fp16 else step.fp32_cut, promote=promote,
                              workers=workers)
    va, pa = to_float(a, a_fmt), pow2_nominal(a, a_fmt)
    vb, pb = to_float(b, b_fmt), pow2_nominal(b, b_fmt)
    return fast.run_fp(va, pa, vb, pb, c, grid=step.grid, block=step.block,
                       floor=step.f16_floor if fp16 else None, fp16=fp16,
                       cut=None if fp16 else step.fp32_cut, promote=promote, workers=workers)


def _step_chunk(a, b, c, a_fmt, b_fmt, out_fmt, step):
    va, pa = to_float(a, a_fmt), pow2_nominal(a, a_fmt)
    vb, pb = to_float(b, b_fmt), pow2_nominal(b, b_fmt)
    floor = step.f16_floor if out_fmt is FP16 else None
    k = a.shape[-1]
    for k0 in range(0, k, step.block):
        ks = range(k0, min(k0 + step.block, k))
        v = fused_sum([va[:, :, i, None] for i in ks], [pa[:, :, i, None] for i in ks],
                      [vb[:, None, i, :] for i in ks], [pb[:, None, i, :] for i in ks],
                      to_float(c, out_fmt), pow2_nominal(c, out_fmt), step.grid, floor)
        c = round_output(v, out_fmt, fp32_cut=step.fp32_cut)
    return c


def _promoted_chunk(a, b, c, a_fmt, b_fmt, step, width):
    """cuBLASLt's FP8 accumulation: wgmma chains over K chunks of ``width``, promoted to FP32."""
    zero = np.zeros(c.shape, np.uint32)
    acc = np.zeros(c.shape, np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        for k0 in range(0, a.shape[-1], width):
            part = _step_chunk(a[..., k0:k0 + width], b[..., k0:k0 + width, :], zero,
                               a_fmt, b_fmt, FP32, step)
            acc += part.view(np.float32)          # float32 addition: IEEE round-to-nearest-even
        acc += c.view(np.float32)
    bits = acc.view(np.uint32).copy()
    bits[np.isnan(acc)] = 0x7FFFFFFF
    return bits


def _int_chunk(a, b, c, unsigned_a: bool, block: int, saturate: bool):
    """The exact integer sum per K step of ``block``, wrapped modulo 2**32 or clamped."""
    va = (a if unsigned_a else a.view(np.int8)).astype(np.int64)
    vb = b.view(np.int8).astype(np.int64)
    acc = c.view(np.int32).astype(np.int64)
    lo, hi = -(1 << 31), (1 << 31) - 1
    for k0 in range(0, a.shape[-1], block):
        acc = acc + np.matmul(va[..., k0:k0 + block], vb[..., k0:k0 + block, :])
        acc = np.clip(acc, lo, hi) if saturate else ((acc - lo) & 0xFFFFFFFF) + lo
    return (acc & 0xFFFFFFFF).astype(np.uint32)


def _int_blas_chunk(a, b, c, unsigned_a: bool, block: int, saturate: bool):
    """:func:`_int_chunk` with each step's sum from float32 ``numpy.matmul`` (BLAS): every
    product is at most 255 * 128 = 2**15 in magnitude and a step adds at most 32 of them, so
    every partial sum, in any order, is an integer below 2**20 and float32 holds it exactly."""
    if block > 256:
        return _int_chunk(a, b, c, unsigned_a, block, saturate)
    va = (a if unsigned_a else a.view(np.int8)).astype(np.float32)
    vb = b.view(np.int8).astype(np.float32)
    acc = c.view(np.int32).astype(np.int64)
    lo, hi = -(1 << 31), (1 << 31) - 1
    for k0 in range(0, a.shape[-1], block):
        acc += np.matmul(va[..., k0:k0 + block], vb[..., k0:k0 + block, :]).astype(np.int64)
        acc = np.clip(acc, lo, hi) if saturate else ((acc - lo) & 0xFFFFFFFF) + lo
    return (acc & 0xFFFFFFFF).astype(np.uint32)


def _ieee_chunk(a, b, c, a_fmt, b_fmt, out_fmt):
    va, vb, vc = to_float(a, a_fmt), to_float(b, b_fmt), to_float(c, out_fmt)
    shape = c.shape
    # Specials follow IEEE: a float64 sum is NaN/Inf exactly where the exact sum is.
    with np.errstate(invalid="ignore"):
        naive = vc + sum(va[:, :, i, None] * vb[:, None, i, :] for i in range(a.shape[-1]))
    sa, ma, ea = finite_terms(a, a_fmt)
    sb, mb, eb = finite_terms(b, b_fmt)
    terms = [finite_terms(c, out_fmt)]
    for i in range(a.shape[-1]):
        terms.append((sa[:, :, i, None] ^ sb[:, None, i, :], ma[:, :, i, None] * mb[:, None, i, :],
                      ea[:, :, i, None] + eb[:, None, i, :]))
    bits = exact_round(terms, shape, out_fmt)
    special = ~np.isfinite(naive)
    if np.any(special):
        bits[special] = round_output(naive[special], out_fmt)
    return bits


#: k slices one beat of the RTL core carries per input format (``tcore.rtl.mma4.KDEPTH``).
MMA4_KDEPTH = {f.name: f.beat_k for f in INPUT_FORMATS.values()}


def mma4(a, b, c, *, in_fmt="fp16", out_fmt="fp32", b_fmt=None, saturate=False, fused=True):
    """Golden twin of the RTL ``MMA4`` core: one group.

    A beat carries KD k slices (4 FP16/BF16, 2 TF32, 8 FP8/INT8: :data:`MMA4_KDEPTH`).
    ``fused=True`` (four beats, one Hopper block): a (..., 4, 4 KD), b (..., 4 KD, 4),
    c (..., 4, 4); one block fused dot-add over all the products and C (INT8: their exact sum,
    wrapped or saturated).  ``fused=False`` (single-beat mode): a (..., 4, KD), b (..., KD, 4);
    the same rule over KD products.  Both are :func:`mma` with the Hopper parameters (FP8 as
    ``wgmma`` computes it).
    """
    a, b, c = np.asarray(a), np.asarray(b), np.asarray(c)
    if in_fmt not in MMA4_KDEPTH:
        raise ValueError(f"mma4 takes {', '.join(MMA4_KDEPTH)} inputs, not {in_fmt!r}")
    want_k = MMA4_KDEPTH[in_fmt] * (4 if fused else 1)
    if a.shape[-2:] != (4, want_k) or b.shape[-2:] != (want_k, 4) or c.shape[-2:] != (4, 4):
        raise ValueError(f"mma4 with {in_fmt} and fused={fused} takes a (..., 4, {want_k}), "
                         f"b (..., {want_k}, 4), c (..., 4, 4); not {a.shape}, {b.shape}, {c.shape}")
    return mma(a, b, c, op=Op(in_fmt, b_fmt, out_fmt, saturate), arch=HOPPER)
