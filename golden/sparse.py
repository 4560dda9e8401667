"""2:4 structured-sparse MMA on Hopper (``mma.sp``, ``wgmma.sp``, cuSPARSELt), bit-exact to an H200.

A 2:4-sparse A keeps, of every group of 4 logical K positions of a row, at most 2 values; the
tensor core reads the kept (*stored*) values, K/2 per row, plus per-row *metadata* that says
which logical K each stored value sits at.

The rule (measured on an H200, ``shared/spec/numerics.md``, "2:4 sparse MMA on Hopper"; the
captures are ``tests/data/silicon/sparse/`` and ``sparse_torch/``):

* One ``mma.sp`` m16n8k32 step (FP16/BF16 in; ``wgmma.sp`` m64nNk32 gives the same bits) is
  ONE block fused dot-add (:mod:`tcore.golden.dot`) of its 16 stored products
  ``a_comp[m, j] * b[k(m, j), n]`` plus C, with the dense Hopper FP16/BF16 step's parameters:
  grid 2**(E-25), exact sum, RZ to FP32 or one RNE to FP16, and in FP16-output mode the floor
  E >= -21.  ``k(m, 2q+s) = 4q + i_s(m, q)``.
* Pruned positions take no part at all: they do not enter E, and B's rows there are never read
  (an Inf or NaN of B at a pruned K never reaches D).  A stored zero is an ordinary zero
  (stored 0 x selected Inf = NaN).
* So a sparse step is the dense step over the *compressed* K with B gathered per row: a step
  fuses as many stored products as the dense instruction fuses products (FP16/BF16: 16 stored =
  32 logical K; FP8, with the FP8 wgmma rule of grid 2**(E-13), RZ and a 13-bit cut: 32 stored =
  64 logical K).  A longer K chains steps, each step's rounded result the next one's C.

What it is not (each misses the captures, ``tests/test_sparse_golden.py`` measures by how much):
two chained k16 halves (steps of 8 stored products), steps of 4 stored products, the dense
chain over the decompressed A, and (only where B holds Inf/NaN at pruned K) a 32-wide fused
block over the decompressed A; the FP16-output step without its floor misses too.

Compressed form (:class:`SparseA`): ``values`` (..., M, K/2) bit patterns, stored column 2q+s
holding logical K 4q + i_s; ``meta`` (..., M, ceil(K/32)) uint32 in the PTX nibble order of the
captures: bits 4q..4q+3 of word w are ``i0 | i1 << 2`` for group 8w+q, i0 < i1 (one word per
32 logical K; the nibbles of a last, partial word beyond K are 0 and ignored).

PyTorch / cuSPARSELt (:func:`cslt_mm`): ``torch.mm(to_sparse_semi_structured(A), B)`` and
``torch._cslt_sparse_mm`` are a chain of these steps from C = +0 with FP32 between steps, rounded
once (RNE) to the output type; ``segment_k_on`` kernels cut K into slices, each a chain from
+0, and add the slice results in FP32 (RNE) in K order before that rounding.

Pruning (:func:`prune_24`): keep the two largest magnitudes of each group of 4, as
``to_sparse_semi_structured`` users and cuSPARSELt's ``cusparseLtSpMMAPrune`` (strip mode) do;
ties go to the lower K index (of two zeros, -0 before +0, so a 2:4 input is left unchanged); a
NaN counts as larger than any number (Inf included), so a NaN is never pruned away silently.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tcore.numerics.formats import dtype_of

from .arch import HOPPER, get_arch
from .dot import fused_sum, round_output
from .formats import FP16, FP32, get_format, pow2_nominal, to_float

__all__ = ["SparseA", "compress", "decompress", "from_capture", "prune_24", "prune_24_bits",
           "mma_sp", "matmul_sp", "cslt_mm", "SEGMENT_K", "KernelCheck", "verify_file",
           "is_sparse_file", "SPARSE_IN_FORMATS", "TileProblem", "tile_problems", "bf16_rne"]

#: Input formats a sparse step takes, with the B formats each pairs with.
SPARSE_IN_FORMATS = {"fp16": ("fp16",), "bf16": ("bf16",), "e4m3": ("e4m3", "e5m2"),
                     "e5m2": ("e5m2", "e4m3")}
_BITS = {n: np.dtype(dtype_of(n)) for n in SPARSE_IN_FORMATS}
#: Logical K per metadata word.
_K_PER_WORD = 32
#: cuSPARSELt ``segment_k_on`` slice length in logical K, fitted on the captures: FP16 1024
#: (K = 2048 and 4096), FP8 2048 (K = 4096, two slices; other K not measured).  BF16 has no
#: segment-K capture; the FP16 value is assumed.
SEGMENT_K = {"fp16": 1024, "bf16": 1024, "e4m3": 2048, "e5m2": 2048}


def _kind(fmt: str) -> str:
    return "fp8" if fmt in ("e4m3", "e5m2") else fmt


def _check_fmt(fmt, what="in_fmt"):
    name = getattr(fmt, "name", fmt)
    if name not in SPARSE_IN_FORMATS:
        raise ValueError(f"{what} of a 2:4 sparse A must be one of {', '.join(SPARSE_IN_FORMATS)}, "
                         f"not {fmt!r}")
    return name


def _check_bits(arr, fmt, what):
    arr = np.asarray(arr)
    want = np.dtype(_BITS[fmt])
    if arr.dtype != want:
        hint = "" if arr.dtype.kind in "ui" else (
            f"; for a float array x pass x.view(np.{want.name}), or use golden.sparse.matmul_sp, "
            "which takes floats")
        raise TypeError(f"{what} must hold {want.name} bit patterns ({fmt}), not {arr.dtype}{hint}")
    return arr


# -- the compressed form ---------------------------------------------------------------------------

@dataclass(frozen=True)
class SparseA:
    """A 2:4-sparse A in the tensor core's compressed form.

    Attributes
    ----------
    values : uint array (..., M, K/2)
        The stored values' bit patterns (uint16 FP16/BF16, uint8 FP8); stored column 2q+s is
        the s-th kept value of group q (logical K 4q..4q+3).
    meta : uint32 array (..., M, ceil(K/32))
        The metadata in PTX nibble order: bits 4q..4q+3 of word w are ``i0 | i1 << 2`` for
        group 8w+q, with i0 < i1 the K offsets (0..3) of its two stored values.
    k : int
        The logical K (a multiple of 4).
    fmt : str
        ``"fp16"``, ``"bf16"``, ``"e4m3"`` or ``"e5m2"``.

    Build one with :func:`compress` (from a dense A), :func:`from_capture` (a capture's
    ``a``/``a_meta``) or directly; the constructor checks shapes, dtypes and indices.
    """

    values: np.ndarray
    meta: np.ndarray
    k: int
    fmt: str

    def __post_init__(self):
        fmt = _check_fmt(self.fmt, "fmt")
        object.__setattr__(self, "fmt", fmt)
        k = int(self.k)
        if k < 4 or k % 4:
            raise ValueError(f"logical K of a 2:4 sparse A must be a positive multiple of 4, not {k}")
        object.__setattr__(self, "k", k)
        values = _check_bits(self.values, fmt, "values")
        meta = np.asarray(self.meta)
        if meta.dtype != np.uint32:
            raise TypeError(f"meta must be uint32 words, not {meta.dtype}")
        if values.ndim < 2 or values.shape[-1] != k // 2:
            raise ValueError(f"values must be (..., M, K/2) = (..., M, {k // 2}), not {values.shape}")
        words = -(-k // _K_PER_WORD)
        if meta.shape != values.shape[:-1] + (words,):
            raise ValueError(f"meta must be (..., M, ceil(K/32)) = {values.shape[:-1] + (words,)}, "
                             f"not {meta.shape}")
        object.__setattr__(self, "values", values)
        object.__setattr__(self, "meta", meta)
        self.indices()        # validates every nibble

    @property
    def shape(self) -> tuple:
        """The logical (dense) shape (..., M, K)."""
        return self.values.shape[:-1] + (self.k,)

    def nibbles(self) -> np.ndarray:
        """Each group's metadata nibble ``i0 | i1 << 2``: int64 (..., M, K/4)."""
        q = np.arange(self.k // 4)
        return (self.meta[..., q // 8].astype(np.int64) >> (4 * (q % 8))) & 0xF

    def indices(self) -> np.ndarray:
        """Logical K of every stored value: int64 (..., M, K/2), ``4q + i_s`` at column 2q+s.

        ValueError if a nibble does not have i0 < i1 (names the first bad row and group)."""
        groups = self.k // 4
        q = np.arange(groups)
        nib = self.nibbles()
        i0, i1 = nib & 3, nib >> 2
        bad = i0 >= i1
        if np.any(bad):
            where = np.argwhere(bad)[0]
            g = int(where[-1])
            raise ValueError(f"bad 2:4 metadata at row {tuple(int(x) for x in where[:-1])}, group {g} "
                             f"(logical K {4 * g}..{4 * g + 3}): nibble {int(nib[tuple(where)]):#x} "
                             f"gives indices ({int(i0[tuple(where)])}, {int(i1[tuple(where)])}); "
                             "a group's two indices must be 0..3 with i0 < i1")
        idx = np.stack([4 * q + i0, 4 * q + i1], axis=-1)
        return idx.reshape(idx.shape[:-2] + (2 * groups,))

    def to_dense(self) -> np.ndarray:
        """The logical A (..., M, K): stored values at their K, +0 at the pruned positions."""
        return decompress(self)


def _pack_meta(i0, i1):
    """Metadata words (..., M, ceil(K/32)) from per-group indices (..., M, K/4)."""
    groups = i0.shape[-1]
    words = -(-groups // 8)
    nib = (i0 | (i1 << 2)).astype(np.uint64)
    pad = words * 8 - groups
    if pad:
        nib = np.concatenate([nib, np.zeros(nib.shape[:-1] + (pad,), np.uint64)], axis=-1)
    nib = nib.reshape(nib.shape[:-1] + (words, 8))
    word = (nib << (np.arange(8, dtype=np.uint64) * 4)).sum(axis=-1)
    return word.astype(np.uint32)


def _groups(bits, fmt, what="a"):
    bits = _check_bits(bits, fmt, what)
    if bits.ndim < 2:
        raise ValueError(f"{what} must be at least 2-D (..., M, K), not shape {bits.shape}")
    k = bits.shape[-1]
    if k < 4 or k % 4:
        raise ValueError(f"2:4 sparsity needs K a positive multiple of 4 (groups of 4 along K); "
                         f"{what} has K = {k}")
    return bits.reshape(bits.shape[:-1] + (k // 4, 4))


def compress(a, fmt="fp16", *, prune=False) -> SparseA:
    """Compress a dense 2:4-sparse A (bit patterns (..., M, K)) into a :class:`SparseA`.

    A position counts as empty only if it holds +0 (pattern 0): anything else, -0 included, is a
    value that must be stored, so ``decompress(compress(a))`` gives back ``a`` bit for bit.
    Without ``prune``, a group of 4 with more than 2 such values is a ValueError naming it;
    with ``prune=True`` the group is pruned first (:func:`prune_24_bits`).  A group with fewer
    than 2 values stores +0 in the spare slots, at the lowest free K offsets.
    """
    fmt = _check_fmt(fmt, "fmt")
    g = _groups(a, fmt)
    if prune:
        g = _groups(prune_24_bits(a, fmt), fmt)
    full = g != 0
    count = full.sum(axis=-1)
    if np.any(count > 2):
        where = np.argwhere(count > 2)[0]
        q = int(where[-1])
        raise ValueError(f"A is not 2:4 sparse: row {tuple(int(x) for x in where[:-1])}, logical K "
                         f"{4 * q}..{4 * q + 3} holds {int(count[tuple(where)])} values other than +0 "
                         "(at most 2 of every 4); prune it first (golden.sparse.prune_24_bits, or "
                         "compress(..., prune=True))")
    # Offsets of the stored slots: the values first, then the lowest empty positions; sorted.
    order = np.argsort(~full, axis=-1, kind="stable")[..., :2]
    order = np.sort(order, axis=-1)
    vals = np.take_along_axis(g, order, axis=-1)
    values = vals.reshape(vals.shape[:-2] + (-1,))
    meta = _pack_meta(order[..., 0], order[..., 1])
    return SparseA(values, meta, g.shape[-2] * 4, fmt)


def decompress(sp: SparseA) -> np.ndarray:
    """The dense logical A (..., M, K) of a :class:`SparseA`, +0 at pruned positions."""
    if not isinstance(sp, SparseA):
        raise TypeError(f"decompress takes a golden.sparse.SparseA, not {type(sp).__name__}")
    out = np.zeros(sp.shape, dtype=sp.values.dtype)
    np.put_along_axis(out, sp.indices(), sp.values, axis=-1)
    return out


def from_capture(a, a_meta, fmt="fp16") -> SparseA:
    """The :class:`SparseA` of a capture's ``a`` (dense logical A bits, (..., M, K)) and
    ``a_meta`` (uint32 (..., M, ceil(K/32)); (..., M) is taken as one word per row where
    K <= 32, the captures' layout).

    ValueError if the metadata is malformed or ``a`` holds anything but +0 at a position the
    metadata prunes (the captures hold +0 there by construction)."""
    fmt = _check_fmt(fmt, "fmt")
    a = _check_bits(a, fmt, "a")
    _groups(a, fmt)
    k = a.shape[-1]
    a_meta = np.asarray(a_meta)
    if a_meta.shape == a.shape[:-1] and k <= _K_PER_WORD:
        a_meta = a_meta[..., None]         # the captures' (T, M): one word per row at K = 32
    idx = SparseA(np.zeros(a.shape[:-1] + (k // 2,), a.dtype), a_meta, k, fmt).indices()
    values = np.take_along_axis(a, idx, axis=-1)
    sp = SparseA(values, a_meta, k, fmt)
    left = a.copy()
    np.put_along_axis(left, idx, 0, axis=-1)
    if np.any(left != 0):
        where = tuple(int(x) for x in np.argwhere(left != 0)[0])
        raise ValueError(f"a holds {int(a[where]):#x} at {where}, a position a_meta prunes; "
                         "pruned positions must be +0")
    return sp


# -- the pruner ------------------------------------------------------------------------------------

def prune_24_bits(a, fmt="fp16") -> np.ndarray:
    """Make a dense A 2:4 sparse: keep the two largest magnitudes of every group of 4 along K.

    On bit patterns (..., M, K), K a multiple of 4; the result has the same shape, +0 at the two
    pruned positions of each group.  Magnitude is compared on the pattern with its sign bit
    cleared, which orders every finite value and Inf by magnitude and puts NaN above Inf
    (E4M3's only NaN, S.1111.111, is above its largest normal too): a NaN is kept, never pruned
    away silently.  **Ties go to the lower K index** (a stable sort by decreasing magnitude;
    +x and -x tie), with one refinement: of two zeros, -0 ranks above +0, so that an A that is
    already 2:4 (at most 2 patterns other than +0 per group, what :func:`compress` accepts)
    comes back unchanged.  Which zero is kept changes no output of the rule (a zero product
    never enters E, and 0 x Inf is NaN for either sign).  The choice is deterministic.
    """
    fmt = _check_fmt(fmt, "fmt")
    g = _groups(a, fmt)
    width = get_format(fmt).width
    raw = g.astype(np.int64)
    rank = ((raw & ((1 << (width - 1)) - 1)) << 1) | (raw != 0)
    keep = np.argsort(-rank, axis=-1, kind="stable")[..., :2]
    out = np.zeros_like(g)
    np.put_along_axis(out, keep, np.take_along_axis(g, keep, axis=-1), axis=-1)
    return out.reshape(np.asarray(a).shape)


def _float_fmt(x):
    """The format of a float array a 2:4 sparse A may be in (the table's ``sparse`` rows), or
    None."""
    from tcore.numerics.formats import INPUT_FORMATS, format_of
    return format_of(np.asarray(x).dtype, [f for f, row in INPUT_FORMATS.items() if row.sparse])


def prune_24(x) -> np.ndarray:
    """:func:`prune_24_bits` on a float array (float16, bfloat16, float8_e4m3fn, float8_e5m2):
    the two largest magnitudes of each group of 4 along the last axis kept, ties to the lower
    index (-0 before +0), NaN kept before anything else; pruned entries +0.  Returns the same dtype."""
    x = np.asarray(x)
    fmt = _float_fmt(x)
    if fmt is None:
        raise TypeError(f"prune_24 takes float16, bfloat16, float8_e4m3fn or float8_e5m2 arrays, "
                        f"not {x.dtype}")
    return prune_24_bits(x.view(_BITS[fmt]), fmt).view(x.dtype)


# -- the sparse MMA --------------------------------------------------------------------------------

def _prepare(a_sparse, b, c, in_fmt, out_fmt, b_fmt, c_dtype):
    if not isinstance(a_sparse, SparseA):
        raise TypeError(f"a_sparse must be a golden.sparse.SparseA (golden.sparse.compress or "
                        f"from_capture make one), not {type(a_sparse).__name__}")
    in_fmt = _check_fmt(in_fmt)
    if a_sparse.fmt != in_fmt:
        raise ValueError(f"a_sparse holds {a_sparse.fmt} values but in_fmt is {in_fmt!r}")
    b_fmt = b_fmt or in_fmt
    if b_fmt not in SPARSE_IN_FORMATS[in_fmt]:
        raise ValueError(f"A in {in_fmt} pairs with B in {' or '.join(SPARSE_IN_FORMATS[in_fmt])}, "
                         f"not {b_fmt!r}")
    b = _check_bits(b, b_fmt, "b")
    if b.ndim < 2 or b.shape[-2] != a_sparse.k:
        raise ValueError(f"b must be (..., K, N) with K = {a_sparse.k} (A's logical K), "
                         f"not {b.shape}")
    m, n = a_sparse.shape[-2], b.shape[-1]
    if c is not None:
        c = np.asarray(c)
        if c.dtype != c_dtype:
            raise TypeError(f"c must hold {np.dtype(c_dtype).name} bit patterns ({out_fmt}), "
                            f"not {c.dtype}")
        if c.ndim < 2 or c.shape[-2:] != (m, n):
            raise ValueError(f"c must be (..., {m}, {n}) to match A and b, not {c.shape}")
    try:
        batch = np.broadcast_shapes(a_sparse.shape[:-2], b.shape[:-2],
                                    () if c is None else c.shape[:-2])
    except ValueError:
        raise ValueError(f"batch shapes of A {a_sparse.shape}, b {b.shape}"
                         f"{'' if c is None else f', c {c.shape}'} do not broadcast") from None
    nb = int(np.prod(batch, dtype=np.int64))
    kc = a_sparse.k // 2
    vals = np.broadcast_to(a_sparse.values, batch + (m, kc)).reshape(nb, m, kc)
    idx = np.broadcast_to(a_sparse.indices(), batch + (m, kc)).reshape(nb, m, kc)
    b = np.broadcast_to(b, batch + (a_sparse.k, n)).reshape(nb, a_sparse.k, n)
    if c is not None:
        c = np.broadcast_to(c, batch + (m, n)).reshape(nb, m, n)
    return vals, idx, b, c, in_fmt, b_fmt, batch


def _chain(vals, idx, b, c, a_fmt, b_fmt, out_fmt, block, grid, floor, cut, j0=0, j1=None):
    """The step chain over stored columns j0..j1 of (nb, m, kc) vals/idx, b (nb, K, n)."""
    out_fmt = get_format(out_fmt)
    j1 = vals.shape[-1] if j1 is None else j1
    va, pa = to_float(vals, a_fmt), pow2_nominal(vals, a_fmt)
    with np.errstate(invalid="ignore"):      # a signalling-NaN C widens to float64 quietly
        return _steps(va, pa, idx, b, c, b_fmt, out_fmt, block, grid, floor, cut, j0, j1)


def _steps(va, pa, idx, b, c, b_fmt, out_fmt, block, grid, floor, cut, j0, j1):
    for s0 in range(j0, j1, block):
        js = range(s0, min(s0 + block, j1))
        # B's rows at the stored K of each output row: (nb, m, step, n).  Pruned rows of B are
        # never read, so whatever they hold cannot reach D.
        bg = np.take_along_axis(b[:, None, :, :], idx[:, :, s0:js[-1] + 1, None], axis=2)
        vb, pb = to_float(bg, b_fmt), pow2_nominal(bg, b_fmt)
        v = fused_sum([va[:, :, j, None] for j in js], [pa[:, :, j, None] for j in js],
                      [vb[:, :, j - s0, :] for j in js], [pb[:, :, j - s0, :] for j in js],
                      to_float(c, out_fmt), pow2_nominal(c, out_fmt), grid, floor)
        c = round_output(v, out_fmt, fp32_cut=None if out_fmt is FP16 else cut)
    return c


def mma_sp(a_sparse, b, c, *, in_fmt="fp16", out_fmt="fp32", b_fmt=None, arch=HOPPER,
           block=None, floor=True):
    """D = A·B + C with A 2:4 sparse, on bit patterns, as ``mma.sp`` / ``wgmma.sp`` compute it.

    Parameters
    ----------
    a_sparse : SparseA
        A (..., M, K) in compressed form.
    b : uint array (..., K, N)
        B's bit patterns (the full logical K; the rows A prunes are never read).
    c : uint32 array (..., M, N), or uint16 FP16 bits with ``out_fmt="fp16"``
        The addend.
    in_fmt : "fp16", "bf16", "e4m3" or "e5m2"
        A's format (must be ``a_sparse.fmt``).
    out_fmt : "fp32" or "fp16"
        FP32 (RZ; FP8 also cut to 13 fraction bits) or FP16 (one RNE per step; FP16 and FP8 in).
    b_fmt : str or None
        B's format: A's (None), or the other FP8 format.
    arch : the Hopper parameters (``tcore.numerics.HOPPER``, or an Arch of one's own for experiments)
        Grid, FP16 floor and, by default, the block: a sparse step fuses ``arch.step(kind).block``
        stored products (16 = one m16n8k32 for FP16/BF16; 32 = one wgmma k64 for FP8).
    block : int or None
        Stored products per step, overriding the arch (the tests' alternatives: 8 is two
        chained k16 halves).
    floor : bool
        Apply the FP16-output floor on E (the measured rule); False is for showing it matters.

    Returns
    -------
    D bits, shape broadcast(...) + (M, N), dtype of c.

    The chain cuts the stored K into steps of ``block`` (a last, shorter step fuses what is
    left); each step is one block fused dot-add of ``a_comp[m, j] * b[k(m, j), n]`` plus the
    previous step's rounded result.
    """
    arch = get_arch(arch)
    in_name = _check_fmt(in_fmt)
    kind = _kind(in_name)
    outs = ("fp32", "fp16") if kind in ("fp16", "fp8") else ("fp32",)
    out_name = getattr(out_fmt, "name", out_fmt)
    if out_name not in outs:
        raise ValueError(f"Output format for sparse {in_name} inputs must be {' or '.join(outs)}, "
                         f"not {out_fmt!r}")
    c_dtype = np.dtype(dtype_of(out_name))
    if c is None:
        raise ValueError("c is required (bit patterns of the addend; zeros for A·B alone)")
    vals, idx, b, c, in_name, b_name, batch = _prepare(a_sparse, b, c, in_name, out_name, b_fmt,
                                                       c_dtype)
    step = arch.step(kind)
    if block is None:
        block = step.block
    if int(block) < 1:
        raise ValueError(f"block must be at least 1 stored product, not {block!r}")
    fl = step.f16_floor if (out_name == "fp16" and floor) else None
    m, n = a_sparse.shape[-2], b.shape[-1]
    if vals.shape[0] * m * n == 0:
        return np.zeros(batch + (m, n), dtype=c_dtype)
    d = _chain(vals, idx, b, c, in_name, b_name, out_name, int(block), step.grid, fl,
               step.fp32_cut)
    return d.reshape(batch + (m, n))


def bf16_rne(f32_bits):
    """FP32 bits to BF16 bits, round to nearest-even; NaN to the canonical 0x7FFF."""
    u = np.asarray(f32_bits, dtype=np.uint32).astype(np.uint64)
    r = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    out = r.astype(np.uint16)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    out[nan] = 0x7FFF
    return out


def cslt_mm(a_sparse, b, *, in_fmt="fp16", out_fmt=None, b_fmt=None, segment_k=None,
            block=None):
    """PyTorch's 2:4 sparse GEMM on Hopper (cuSPARSELt 0.8 sm90 kernels), on bit patterns.

    ``torch.mm(to_sparse_semi_structured(A), B)`` / ``torch._cslt_sparse_mm``: a chain of sparse
    steps over K from C = +0 (FP16/BF16: 32 logical K a step, FP8: 64), FP32 between steps
    (RZ; FP8 with its 13-bit cut), then ONE round to nearest-even to the output.

    Parameters
    ----------
    a_sparse : SparseA (..., M, K);  b : uint array (..., K, N)
    in_fmt : "fp16", "bf16", "e4m3" or "e5m2"
    out_fmt : "fp16", "bf16" or "fp32"
        The output; None is the input format for FP16/BF16 (``torch.mm``'s result dtype) and
        FP32 for FP8 (``out_dtype=torch.float32``).  FP32 keeps the chain's FP32 bits.
    segment_k : None, True or int
        None/False: one chain over K (``segment_k_off`` kernels).  An int: the
        ``segment_k_on`` rule with slices of that many logical K, each a chain from +0, the
        slice results added in FP32 (float32 addition, RNE) in K order, then the final rounding.
        True: the fitted slice length :data:`SEGMENT_K` of the format.
    block : int or None
        Stored products per step; None is the measured one (16 FP16/BF16, 32 FP8).  For
        experiments (the tests show other widths miss).

    Returns
    -------
    uint16 (FP16/BF16 out) or uint32 (FP32 out) bits, (..., M, N).
    """
    in_name = _check_fmt(in_fmt)
    if out_fmt is None:
        out_fmt = "fp32" if _kind(in_name) == "fp8" else in_name
    if out_fmt not in ("fp16", "bf16", "fp32"):
        raise ValueError(f"out_fmt must be 'fp16', 'bf16' or 'fp32', not {out_fmt!r}")
    vals, idx, b, _, in_name, b_name, batch = _prepare(a_sparse, b, None, in_name, "fp32", b_fmt,
                                                       np.uint32)
    k = a_sparse.k
    if segment_k is True:
        segment_k = SEGMENT_K[in_name]
    if segment_k in (None, False):
        segment_k = k
    segment_k = int(segment_k)
    if segment_k < 1 or segment_k % 4:
        raise ValueError(f"segment_k must be a positive multiple of 4 logical K, not {segment_k}")
    step = HOPPER.step(_kind(in_name))
    m, n = a_sparse.shape[-2], b.shape[-1]
    nb = vals.shape[0]
    zero = np.zeros((nb, m, n), np.uint32)
    acc = None
    with np.errstate(invalid="ignore", over="ignore"):
        for k0 in range(0, k, segment_k):
            part = _chain(vals, idx, b, zero, in_name, b_name, FP32, int(block or step.block),
                          step.grid, None,
                          step.fp32_cut, j0=k0 // 2, j1=min(k0 + segment_k, k) // 2)
            part = part.view(np.float32)
            acc = part.copy() if acc is None else acc + part   # float32 addition: RNE
    bits = acc.view(np.uint32).copy()
    bits[np.isnan(acc)] = 0x7FFFFFFF
    if out_fmt == "fp16":
        with np.errstate(over="ignore", invalid="ignore"):
            bits = acc.astype(np.float16).view(np.uint16).copy()      # one RNE
        bits[np.isnan(acc)] = 0x7FFF
    elif out_fmt == "bf16":
        bits = bf16_rne(bits)
    return bits.reshape(batch + (m, n))


# -- floats ----------------------------------------------------------------------------------------

def matmul_sp(a, b, c=None, *, out=None, prune=True, block=None, floor=True):
    """D = A·B + C with A 2:4 sparse, on NumPy floats, as ``mma.sp`` / ``wgmma.sp`` chain it.

    Parameters
    ----------
    a : float array (..., M, K) or SparseA
        float16, ml_dtypes bfloat16, float8_e4m3fn or float8_e5m2.  A dense array is made 2:4
        by :func:`prune_24` when ``prune`` (the default); with ``prune=False`` it must already
        be 2:4 sparse (at most 2 entries other than +0 per group of 4), else ValueError.
    b : float array (..., K, N)
        The same format as A (FP8: either FP8 format).
    c : float32 array (..., M, N), float16 with ``out="fp16"``, or None (zeros)
    out : None or "fp16"
        None: FP32 accumulator; ``"fp16"``: FP16 (FP16 and FP8 inputs).

    Returns
    -------
    float32 or float16 array (..., M, N) holding the H200's bits.
    """
    from tcore.numerics.formats import values_dtype
    b = np.asarray(b)
    fb = _float_fmt(b)
    if isinstance(a, SparseA):
        fa = a.fmt
        sp = a
    else:
        a = np.asarray(a)
        fa = _float_fmt(a)
        if fa is None:
            raise TypeError(f"matmul_sp takes a as a SparseA or a float16, bfloat16, float8_e4m3fn "
                            f"or float8_e5m2 array, not {a.dtype}")
        sp = compress(a.view(_BITS[fa]), fa, prune=prune)
    if fb is None or fb not in SPARSE_IN_FORMATS[fa]:
        raise TypeError(f"b must be {' or '.join(values_dtype(f).name for f in SPARSE_IN_FORMATS[fa])} "
                        f"to go with a {fa} A, not {b.dtype}")
    if out not in (None, "fp16"):
        raise ValueError(f"out must be None (FP32) or 'fp16', not {out!r}")
    out_fmt = out or "fp32"
    c_dtype = np.float16 if out == "fp16" else np.float32
    if c is None:
        c = np.zeros(sp.shape[-2:-1] + (b.shape[-1],), c_dtype)
    c = np.asarray(c)
    if c.dtype != c_dtype:
        raise TypeError(f"c must be {np.dtype(c_dtype).name} with out={out!r}, not {c.dtype}")
    bits = mma_sp(sp, b.view(_BITS[fb]), c.view(dtype_of(out or "fp32")),
                  in_fmt=fa, b_fmt=fb, out_fmt=out_fmt, block=block, floor=floor)
    return bits.view(c_dtype)


# -- capture files ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class KernelCheck:
    """One kernel of one capture file checked against the model.

    ``kind`` is ``"sparse"`` (a sparse kernel: ``mismatches`` must be 0) or ``"dense"`` (a dense
    reference GEMM of the same pruned inputs, which the sparse rule is NOT expected to match:
    ``mismatches`` counts how many outputs differ from the sparse model, for information).
    """

    name: str
    checked: int
    mismatches: int
    kind: str
    what: str


def _is_torch_key(key: str) -> bool:
    return key.startswith("d_cslt") or (key.startswith("d_e4m3_") and "_colB" in key)


def is_sparse_file(data: dict) -> bool:
    """Whether a loaded capture is a 2:4 sparse one: a tile file (an ``a_meta`` array) or a
    PyTorch sparse GEMM file (``d_cslt*`` or ``d_e4m3_*_colB*`` keys)."""
    return "a_meta" in data or any(_is_torch_key(k) for k in data)


def _meta(data):
    try:
        return json.loads(str(data["meta"]))
    except (KeyError, ValueError):
        return {}


def _tile_kernel(key):
    """(in_fmt, out_fmt) of a sparse tile file's d_[wg_]<in>_<out> key, or None."""
    name = key[2:].removeprefix("wg_")
    table = {"f16_f32": ("fp16", "fp32"), "f16_f16": ("fp16", "fp16"),
             "bf16_f32": ("bf16", "fp32")}
    return table.get(name)


def _need(data, key, dtype, where):
    if key not in data:
        raise ValueError(f"{where}: missing key {key!r}")
    arr = np.asarray(data[key])
    if arr.dtype != np.dtype(dtype):
        raise ValueError(f"{where}: {key!r} must be {np.dtype(dtype).name}, not {arr.dtype}")
    return arr


def verify_file(source, *, kernel=None, tiles=None, where=None) -> list[KernelCheck]:
    """Check every sparse kernel of one capture file against the model.

    ``source`` is a path or an already loaded dict of arrays.  Tile files (``a_meta``):
    ``d_f16_f32``, ``d_bf16_f32`` (C = ``c``), ``d_f16_f16`` (C = ``c`` rounded to FP16,
    nearest-even) and their ``d_wg_*`` twins, each through :func:`mma_sp`.  PyTorch files:
    ``d_cslt*`` and ``d_e4m3_*_colB*`` through :func:`cslt_mm`, segment-K on or off as the
    cuSPARSELt kernel name in ``meta`` says; the dense references ``d_dense*`` come back as
    ``kind="dense"`` (compared with the sparse model, not expected to agree).

    ``kernel`` keeps only the keys ``d_<kernel>`` and ``d_wg_<kernel>``; ``tiles`` only the first
    N tiles of a tile file.  Returns a list of :class:`KernelCheck`; ValueError for a file that
    is not a readable sparse capture.
    """
    if isinstance(source, (str, Path)):
        where = where or str(source)
        with np.load(source, allow_pickle=False) as z:
            data = {k: z[k] for k in z.files}
    else:
        data = source
        where = where or "file"
    if not is_sparse_file(data):
        raise ValueError(f"{where}: not a 2:4 sparse capture (no 'a_meta', d_cslt* or "
                         "d_e4m3_*_colB keys)")
    keys = [k for k in data if k.startswith("d_")]
    if kernel is not None:
        keys = [k for k in keys if k in (f"d_{kernel}", f"d_wg_{kernel}")]
        if not keys:
            raise ValueError(f"{where}: no kernel {kernel!r} in this sparse file")
    if tiles is not None and tiles < 1:
        raise ValueError(f"tiles must be at least 1, not {tiles}")
    return (_verify_tiles if "a_meta" in data else _verify_torch)(data, keys, tiles, where)


@dataclass(frozen=True)
class TileProblem:
    """One kernel of a sparse tile file: D = ``sp`` x ``b`` + ``c`` should be ``expected``."""

    name: str
    sp: SparseA
    b: np.ndarray
    c: np.ndarray
    expected: np.ndarray
    in_fmt: str
    out_fmt: str


def tile_problems(data, *, kernel=None, tiles=None, where="file") -> list[TileProblem]:
    """The kernels of a loaded sparse tile file (``a_meta``) as :class:`TileProblem` s, the
    first ``tiles`` tiles (None: all), only ``d_<kernel>`` / ``d_wg_<kernel>`` where given;
    ValueError for a malformed file."""
    keys = [k for k in data if k.startswith("d_")]
    if kernel is not None:
        keys = [k for k in keys if k in (f"d_{kernel}", f"d_wg_{kernel}")]
        if not keys:
            raise ValueError(f"{where}: no kernel {kernel!r} in this sparse file")
    return _tile_problems(data, keys, tiles, where)


def _tile_problems(data, keys, tiles, where):
    fmt = _meta(data).get("dtype", "f16")
    in_fmt = {"f16": "fp16", "bf16": "bf16"}.get(fmt)
    if in_fmt is None:
        raise ValueError(f"{where}: meta dtype must be f16 or bf16, not {fmt!r}")
    sl = slice(None, tiles)
    a = _need(data, "a", np.uint16, where)[sl]
    meta = _need(data, "a_meta", np.uint32, where)[sl]
    b = _need(data, "b", np.uint16, where)[sl]
    c = _need(data, "c", np.uint32, where)[sl]
    if a.ndim != 3 or b.shape[:2] != (a.shape[0], a.shape[2]) or c.shape != (a.shape[0], a.shape[1], b.shape[2]):
        raise ValueError(f"{where}: shapes a {a.shape}, a_meta {meta.shape}, b {b.shape}, c {c.shape} "
                         "do not make (T, M, K) x (T, K, N) tiles")
    try:
        sp = from_capture(a, meta, in_fmt)
    except (ValueError, TypeError) as e:
        raise ValueError(f"{where}: {e}") from None
    with np.errstate(over="ignore", invalid="ignore"):
        c16 = c.view(np.float32).astype(np.float16).view(np.uint16)   # __float2half_rn
    out = []
    for key in keys:
        kern = _tile_kernel(key)
        if kern is None:
            raise ValueError(f"{where}: unknown sparse kernel key {key!r}")
        kin, kout = kern
        if kin != in_fmt:
            raise ValueError(f"{where}: {key!r} is a {kin} kernel in a {in_fmt} file")
        want = _need(data, key, np.dtype(dtype_of(kout)), where)[sl]
        out.append(TileProblem(key[2:], sp, b, c if kout == "fp32" else c16, want, in_fmt, kout))
    return out


def _verify_tiles(data, keys, tiles, where):
    out = []
    for p in _tile_problems(data, keys, tiles, where):
        got = mma_sp(p.sp, p.b, p.c, in_fmt=p.in_fmt, out_fmt=p.out_fmt)
        out.append(KernelCheck(p.name, int(p.expected.size), int((got != p.expected).sum()),
                               "sparse", f"{len(p.b)} tiles, 2:4 k{p.sp.k}"))
    return out


def _verify_torch(data, keys, tiles, where):
    if tiles is not None:
        raise ValueError(f"{where}: --tiles is for sparse tile files; a whole sparse GEMM file is "
                         "checked whole")
    meta = _meta(data)
    fmt = {"f16": "fp16", "bf16": "bf16", "e4m3": "e4m3"}.get(meta.get("dtype"))
    if fmt is None:
        raise ValueError(f"{where}: meta dtype must be f16, bf16 or e4m3, not {meta.get('dtype')!r}")
    bits = _BITS[fmt]
    a = _need(data, "a", bits, where)
    b = _need(data, "b", bits, where)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"{where}: a {a.shape} and b {b.shape} are not an (M, K) x (K, N) GEMM")
    try:
        sp = compress(a, fmt)
    except (ValueError, TypeError) as e:
        raise ValueError(f"{where}: {e}") from None
    m, k = a.shape
    n = b.shape[1]
    kernels = meta.get("kernels", {})
    cache = {}

    def model(out_fmt, seg):
        if (out_fmt, seg) not in cache:
            cache[out_fmt, seg] = cslt_mm(sp, b, in_fmt=fmt, out_fmt=out_fmt,
                                          segment_k=SEGMENT_K[fmt] if seg else None)
        return cache[out_fmt, seg]

    out = []
    for key in keys:
        names = kernels.get(key, [])
        seg = any("segment_k_on" in nm for nm in names)
        if key.startswith("d_dense"):
            # Dense cuBLAS references on the same pruned A: compared for information only.
            d = data[key]
            out_fmt = "fp32" if d.dtype == np.uint32 else (fmt if fmt != "e4m3" else "bf16")
            got = model(out_fmt, False)
            out.append(KernelCheck(key[2:], int(d.size), int((got != d).sum()), "dense",
                                   f"gemm {m}x{k}x{n}"))
            continue
        if not _is_torch_key(key):
            raise ValueError(f"{where}: unknown key {key!r} in a sparse GEMM file")
        if not any("sparse" in nm for nm in names):
            raise ValueError(f"{where}: meta names no cuSPARSELt kernel for {key!r} "
                             "(its segment_k_on/off decides the rule)")
        if fmt == "e4m3":
            out_fmt = "fp32" if "_f32_" in key else "bf16"
        else:
            out_fmt = fmt
        want = _need(data, key, np.dtype(dtype_of(out_fmt)), where)
        if want.shape != (m, n):
            raise ValueError(f"{where}: {key!r} must be ({m}, {n}), not {want.shape}")
        got = model(out_fmt, seg)
        what = f"gemm {m}x{k}x{n}, segment-K {'on, ' + str(SEGMENT_K[fmt]) if seg else 'off'}"
        out.append(KernelCheck(key[2:], int(want.size), int((got != want).sum()), "sparse", what))
    return out
