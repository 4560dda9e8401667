"""Tiles <-> MMA4 beats: how a 16x16xK MMA is cut into the core's 4x4xKD beats, as plain data.

Shared by the cocotb benches, the Amaranth-simulator tests and the command line.  The bit
positions follow :class:`tcore.rtl.mma4.Beat`: ``a`` at bits 0..255, ``b`` 256..511, ``c`` 512..1023,
then ``last`` and the :class:`tcore.rtl.formats.Mode` (kind, acc_f16, a_alt, b_alt, sat, sparse), then
``b_hi`` and ``meta`` (2:4 sparse beats).  A beat carries KD k slices (:data:`tcore.rtl.mma4.KDEPTH`: 4
for FP16/BF16, 2 for TF32, 8 for FP8/INT8), and a fused group four beats: one Hopper block of
the kind.  A 2:4 sparse beat carries 4 stored k of A (logical K 8), B's 8 rows and the
metadata; its group, four beats, is one ``mma.sp`` k32 step.
"""

from __future__ import annotations

import numpy as np

from tcore.numerics.formats import INPUT_FORMATS

__all__ = ["BEAT_BITS", "Mode", "mode_of", "block_beats", "pack_payloads", "unpack_outputs", "Job",
           "save_jobs", "load_jobs", "blocks_to_tiles"]

#: Element dtype of A and B, and the RTL kind code, per input format.
_ELEM = {f.name: f.dtype for f in INPUT_FORMATS.values()}
_KIND = {f.name: f.code for f in INPUT_FORMATS.values()}
_ALT = tuple(f.name for f in INPUT_FORMATS.values() if f.alt)


def _beat_layout():
    """The bit positions of :class:`tcore.rtl.mma4.Beat`; :func:`pack_payloads` packs bytes in this
    order, so a change of the RTL's layout is an error here, not a wrong bit in a bench."""
    from amaranth.lib import data

    from tcore.rtl.formats import InputKind
    from tcore.rtl.mma4 import Beat, KDEPTH
    fields = {name: (f.offset, f.width) for name, f in data.Layout.cast(Beat)}
    expect = {"a": (0, 256), "b": (256, 256), "c": (512, 512), "last": (1024, 1), "mode": (1025, 8),
              "b_hi": (1033, 256), "meta": (1289, 32)}
    mode = {name: (f.offset, f.width) for name, f in data.Layout.cast(data.Layout.cast(Beat)["mode"].shape)}
    expect_mode = {"kind": (0, 3), "acc_f16": (3, 1), "a_alt": (4, 1), "b_alt": (5, 1), "sat": (6, 1),
                   "sparse": (7, 1)}
    kinds = {k.name.lower(): k.value for k in InputKind}
    if fields != expect or mode != expect_mode or kinds != {"fp16": 0, "bf16": 1, "tf32": 2, "fp8": 3, "int8": 4}:
        raise RuntimeError(f"tcore.rtl.mma4.Beat is laid out as {fields} / {mode} / {kinds}; host.beats "
                           f"packs {expect} / {expect_mode}")
    return data.Layout.cast(Beat).size, {k.value: d for k, d in KDEPTH.items()}


BEAT_BITS, _KDEPTH = _beat_layout()
BLOCKS = [(i, j) for i in range(4) for j in range(4)]     # 4x4 output blocks of a 16x16 tile


class Mode:
    """A group's formats as the core's :class:`tcore.rtl.formats.Mode` byte wants them."""

    def __init__(self, in_fmt="fp16", out_fmt="fp32", b_fmt=None, saturate=False, sparse=False):
        from tcore.numerics import Op, UnsupportedOp
        if in_fmt not in _KIND:
            raise ValueError(f"the MMA4 core takes {', '.join(_KIND)} inputs, not {in_fmt!r}")
        if sparse and in_fmt not in ("fp16", "bf16"):
            raise ValueError(f"2:4 sparse beats are FP16 or BF16, not {in_fmt!r}")
        try:        # the operation fills in B's format and checks the pairing
            self.op = Op(in_fmt, b_fmt, out_fmt, saturate, sparse=sparse)
        except UnsupportedOp as e:
            raise ValueError(str(e)) from None
        self.in_fmt, self.out_fmt, self.b_fmt = self.op.a, self.op.acc, self.op.b
        self.saturate, self.sparse = bool(saturate), bool(sparse)
        self.kind = _KIND[in_fmt]
        self.kd = _KDEPTH[self.kind]

    @property
    def acc_f16(self) -> bool:
        return self.out_fmt == "fp16"

    def flags(self) -> int:
        """``last`` excluded: the Mode bits, shifted to their place above ``last`` (bit 1024)."""
        return ((self.kind << 1) | (self.acc_f16 << 4) | ((self.in_fmt in _ALT) << 5)
                | ((self.b_fmt in _ALT) << 6) | (self.saturate << 7) | (self.sparse << 8))


def mode_of(in_fmt="fp16", out_fmt="fp32", b_fmt=None, saturate=False) -> Mode:
    return Mode(in_fmt, out_fmt, b_fmt, saturate)


def block_beats(a, b, c, k0: int, fused: bool = True, kd: int = 4, beats: int = 4):
    """The beats of one fused K step (k0 .. k0+4kd-1) for every 4x4 output block of every tile.

    a (T, 16, K), b (T, K, 16), c (T, 16, 16) bit arrays; ``kd`` k slices per beat, ``beats`` beats a
    fused group (4: one Hopper block; Ampere's FP16 block is 2, Volta's 1).  Returns
    ``(a4, b4, c4, last)`` with one row per beat, blocks in (tile, I, J) order and, within a
    block, the k slices: a4 (n, 4 kd) = A[4I+i][k0+kd s+k] at kd i+k; b4 (n, 4 kd) =
    B[k0+kd s+k][4J+j] at 4k+j; c4 (n, 16) = C[4I+i][4J+j] at 4i+j; last (n,) bool.
    ``fused=False`` makes each beat its own group (single-beat mode).  (The B rows are
    row-major here; :func:`pack_payloads` puts them in the core's column order.)
    """
    t = a.shape[0]
    ks = min(beats * kd, a.shape[2] - k0)
    if ks % kd:
        raise ValueError(f"K step of {ks} is not a multiple of {kd}")
    nsl = ks // kd
    # a: (T, I, i, s, k) -> (T, I, J, s, i, k)
    av = a[:, :, k0:k0 + ks].reshape(t, 4, 4, nsl, kd)
    av = np.broadcast_to(av.transpose(0, 1, 3, 2, 4)[:, :, None], (t, 4, 4, nsl, 4, kd))
    bv = b[:, k0:k0 + ks, :].reshape(t, nsl, kd, 4, 4)          # (T, s, k, J, j)
    bv = np.broadcast_to(bv.transpose(0, 3, 1, 2, 4)[:, None], (t, 4, 4, nsl, kd, 4))
    cv = c.reshape(t, 4, 4, 4, 4).transpose(0, 1, 3, 2, 4)     # (T, I, J, i, j)
    cv = np.broadcast_to(cv[:, :, :, None], (t, 4, 4, nsl, 4, 4))
    n = t * 16 * nsl
    last = np.ones((t, 4, 4, nsl), bool) if not fused else \
        np.broadcast_to(np.arange(nsl) == nsl - 1, (t, 4, 4, nsl))
    return (av.reshape(n, 4 * kd).copy(), bv.reshape(n, 4 * kd).copy(),
            cv.reshape(n, 16).astype(np.uint32), last.reshape(n).copy())


def b_columns(b4, elem: str) -> np.ndarray:
    """Beat rows of B (n, KD x 4, row-major ``4k + j``) as the core takes them: column j's 8
    bytes in the 16-bit words j, 4 + j, 8 + j, 12 + j (:class:`tcore.rtl.mma4.Beat`); (n, 32) bytes."""
    n = len(b4)
    size = np.dtype(elem).itemsize
    kd = 8 // size
    cols = np.ascontiguousarray(b4, elem).view(np.uint8).reshape(n, kd, 4, size)
    cols = cols.transpose(0, 2, 1, 3).reshape(n, 4, 4, 2)      # (j, word k', byte)
    return np.ascontiguousarray(cols.transpose(0, 2, 1, 3)).reshape(n, 32)


def pack_payloads(a4, b4, c4, last, mode: Mode) -> list[int]:
    """Beat rows to payload integers (LSB first, as the Verilog port ``i__payload``)."""
    n = len(last)
    elem = _ELEM[mode.in_fmt]
    flags = np.asarray(last, np.uint16) | np.uint16(mode.flags())
    raw = np.concatenate([np.ascontiguousarray(a4, elem).view(np.uint8).reshape(n, 32),
                          b_columns(b4, elem),
                          np.ascontiguousarray(c4, '<u4').view(np.uint8).reshape(n, 64),
                          flags.astype('<u2').view(np.uint8).reshape(n, 2)], axis=1)
    return [int.from_bytes(row.tobytes(), "little") for row in raw]


def pack_sparse_payloads(a4, b8, m4, c4, last, mode: Mode) -> list[int]:
    """2:4 sparse beat rows to payload integers: ``a4`` (n, 16) stored A at 4i + k, ``b8``
    (n, 32) B's 8 rows at 4k + j, ``m4`` (n,) the 32-bit metadata, ``c4``, ``last``."""
    head = pack_payloads(a4, b8[:, :16], c4, last, mode)
    hi = [int.from_bytes(row.tobytes(), "little") for row in b_columns(b8[:, 16:], _ELEM[mode.in_fmt])]
    return [h | (x << 1033) | (int(w) << 1289) for h, x, w in zip(head, hi, m4)]


def sparse_block_beats(values, nib, b, c, k0: int):
    """The beats of one 2:4 sparse step (logical K k0 .. k0+31, stored k0/2 ..) for every 4x4
    output block of every tile: ``values`` (T, 16, K/2) stored A, ``nib`` (T, 16, K/4) each
    group's metadata nibble, ``b`` (T, K, 16).  Returns ``(a4, b8, m4, c4, last)``: a4 (n, 16)
    stored A at 4i + k, b8 (n, 32) B's 8 rows of the beat at 4r + j, m4 (n,) metadata words
    (byte i: row i's two groups, the first low), c4, last."""
    a4, _, c4, last = block_beats(values, values.transpose(0, 2, 1), c, k0 // 2, True, 4)
    _, b8, _, _ = block_beats(np.zeros_like(b.transpose(0, 2, 1)), b, c, k0, True, 8)
    n4, _, _, _ = block_beats(nib, nib.transpose(0, 2, 1), c, k0 // 4, True, 2)
    shifts = (8 * np.arange(4)[:, None] + 4 * np.arange(2)[None, :]).reshape(8)
    m4 = (n4.astype(np.uint64) << shifts.astype(np.uint64)).sum(axis=1).astype(np.uint32)
    return a4, b8, m4, c4, last



def unpack_outputs(words, acc_f16: bool) -> np.ndarray:
    """Output payload integers to (n, 16) D bits (uint16 when ``acc_f16``)."""
    raw = b"".join(int(w).to_bytes(64, "little") for w in words)
    d = np.frombuffer(raw, dtype="<u4").reshape(len(words), 16)
    return d.astype(np.uint16) if acc_f16 else d.copy()


def blocks_to_tiles(d, t: int) -> np.ndarray:
    """(T*16, 16) block outputs in (tile, I, J) order, 4i+j inside, back to (T, 16, 16)."""
    return d.reshape(t, 4, 4, 4, 4).transpose(0, 1, 3, 2, 4).reshape(t, 16, 16)


class Job:
    """A batch of tiles to run through the core, K chained in fused steps of one Hopper block
    (16 FP16/BF16, 8 TF32, 32 FP8/INT8), or in single beats (``fused=False``).

    ``a`` (T, 16, K), ``b`` (T, K, 16), ``c`` (T, 16, 16); K a multiple of the kind's beat
    depth (a last step shorter than the block is fused over what is left, as the golden model
    does).  With ``a_meta`` (T, 16, K/32, PTX metadata words) A is 2:4 sparse: ``a`` (T, 16,
    K/2) its stored values, FP16 or BF16, and each step is one ``mma.sp`` k32 (four sparse
    beats).
    """

    def __init__(self, a, b, c, *, in_fmt="fp16", out_fmt="fp32", b_fmt=None, saturate=False,
                 fused: bool = True, group: int = 4, a_meta=None):
        self.a, self.b, self.c = np.asarray(a), np.asarray(b), np.asarray(c)
        self.a_meta = None if a_meta is None else np.asarray(a_meta, np.uint32)
        self.mode = Mode(in_fmt, out_fmt, b_fmt, saturate, sparse=a_meta is not None)
        self.fused, self.group = bool(fused), int(group)
        if self.a_meta is not None:         # 2:4 sparse: a holds the stored values, K/2 a row
            k = self.b.shape[1]
            if not fused or self.a.shape[2] * 2 != k or k % 32:
                raise ValueError(f"a 2:4 sparse job is fused, with K a multiple of 32 and K/2 "
                                 f"stored values a row, not a {self.a.shape} and b {self.b.shape}")
            from tcore.golden.sparse import SparseA      # checks the metadata, reads its nibbles
            self.nib = SparseA(self.a, self.a_meta, k, in_fmt).nibbles()
            self.steps = list(range(0, k, 32))
            return
        k, kd = self.a.shape[2], self.mode.kd
        if k % kd:
            raise ValueError(f"K must be a multiple of {kd} for {in_fmt} on the MMA4 core, not {k}")
        self.steps = list(range(0, k, self.group * kd if fused else kd))

    @property
    def acc_f16(self) -> bool:
        return self.mode.acc_f16

    def step_payloads(self, step: int, c) -> list[int]:
        k0, kd = self.steps[step], self.mode.kd
        if self.mode.sparse:
            return pack_sparse_payloads(*sparse_block_beats(self.a, self.nib, self.b, c, k0), self.mode)
        if self.fused:
            a4, b4, c4, last = block_beats(self.a, self.b, c, k0, True, kd, self.group)
        else:
            a4, b4, c4, last = block_beats(self.a[:, :, k0:k0 + kd], self.b[:, k0:k0 + kd], c, 0,
                                           False, kd)
        return pack_payloads(a4, b4, c4, last, self.mode)

    def arrays(self, i="") -> dict:
        m = self.mode
        extra = {} if self.a_meta is None else {f"a_meta{i}": self.a_meta}
        return {f"a{i}": self.a, f"b{i}": self.b, f"c{i}": self.c, f"fused{i}": self.fused,
                f"fmt{i}": np.array([m.in_fmt, m.out_fmt, m.b_fmt]), f"sat{i}": m.saturate,
                f"group{i}": self.group, **extra}

    @classmethod
    def from_arrays(cls, z, i=""):
        in_fmt, out_fmt, b_fmt = (str(x) for x in z[f"fmt{i}"])
        return cls(z[f"a{i}"], z[f"b{i}"], z[f"c{i}"], in_fmt=in_fmt, out_fmt=out_fmt,
                   b_fmt=b_fmt, saturate=bool(z[f"sat{i}"]), fused=bool(z[f"fused{i}"]),
                   group=int(z[f"group{i}"]),
                   a_meta=z[f"a_meta{i}"] if f"a_meta{i}" in z.files else None)

    def save(self, path):
        np.savez(path, **self.arrays())

    @classmethod
    def load(cls, path):
        with np.load(path) as z:
            return cls.from_arrays(z)


def save_jobs(path, jobs):
    """Several batches (of any K and format each) in one file: one simulator run for all."""
    arrays = {"n_jobs": len(jobs)}
    for i, j in enumerate(jobs):
        arrays.update(j.arrays(i))
    np.savez(path, **arrays)


def load_jobs(path) -> list[Job]:
    """The batches of :func:`save_jobs` (or the one of :meth:`Job.save`)."""
    with np.load(path) as z:
        if "n_jobs" not in z.files:
            return [Job.from_arrays(z)]
        return [Job.from_arrays(z, i) for i in range(int(z["n_jobs"]))]
