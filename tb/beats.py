"""Tiles <-> MMA4 beats: how a 16x16xK MMA is cut into the core's 4x4x4 beats, as plain data.

Shared by the cocotb benches, the Amaranth-simulator tests and the command line.  The bit
positions follow :class:`rtl.mma4.Beat`: ``a`` at bits 0..255, ``b`` 256..511, ``c`` 512..1023,
then ``last``, ``bf16``, ``acc_f16``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["BEAT_BITS", "block_beats", "pack_payloads", "unpack_outputs", "Job", "save_jobs", "load_jobs"]

def _beat_layout():
    """The bit positions of :class:`rtl.mma4.Beat`; :func:`pack_payloads` packs bytes in this
    order, so a change of the RTL's layout is an error here, not a wrong bit in a bench."""
    from amaranth.lib import data

    from rtl.mma4 import Beat
    fields = {name: (f.offset, f.width) for name, f in data.Layout.cast(Beat)}
    expect = {"a": (0, 256), "b": (256, 256), "c": (512, 512), "last": (1024, 1),
              "bf16": (1025, 1), "acc_f16": (1026, 1)}
    if fields != expect:
        raise RuntimeError(f"rtl.mma4.Beat is laid out as {fields}; tb.beats packs {expect}")
    return data.Layout.cast(Beat).size


BEAT_BITS = _beat_layout()
BLOCKS = [(i, j) for i in range(4) for j in range(4)]     # 4x4 output blocks of a 16x16 tile


def block_beats(a, b, c, k0: int, fused: bool = True):
    """The beats of one 16-wide K step (k0 .. k0+15) for every 4x4 output block of every tile.

    a (T, 16, K), b (T, K, 16), c (T, 16, 16) bit arrays.  Returns ``(a4, b4, c4, last)`` with
    one row per beat, blocks in (tile, I, J) order and, within a block, the four k slices:
    a4 (n, 16) uint16 = A[4I+i][k0+4s+k] at 4i+k; b4 (n, 16) = B[k0+4s+k][4J+j] at 4k+j;
    c4 (n, 16) uint32 = C[4I+i][4J+j] at 4i+j; last (n,) bool.  ``fused=False`` makes each
    slice its own group (K=4 mode).
    """
    t = a.shape[0]
    ks = min(16, a.shape[2] - k0)
    if ks % 4:
        raise ValueError(f"K step of {ks} is not a multiple of 4")
    nsl = ks // 4
    # a: (T, I, i, s, k) -> (T, I, J, s, i, k)
    av = a[:, :, k0:k0 + ks].reshape(t, 4, 4, nsl, 4)
    av = np.broadcast_to(av.transpose(0, 1, 3, 2, 4)[:, :, None], (t, 4, 4, nsl, 4, 4))
    bv = b[:, k0:k0 + ks, :].reshape(t, nsl, 4, 4, 4)          # (T, s, k, J, j)
    bv = np.broadcast_to(bv.transpose(0, 3, 1, 2, 4)[:, None], (t, 4, 4, nsl, 4, 4))
    cv = c.reshape(t, 4, 4, 4, 4).transpose(0, 1, 3, 2, 4)     # (T, I, J, i, j)
    cv = np.broadcast_to(cv[:, :, :, None], (t, 4, 4, nsl, 4, 4))
    n = t * 16 * nsl
    last = np.ones((t, 4, 4, nsl), bool) if not fused else \
        np.broadcast_to(np.arange(nsl) == nsl - 1, (t, 4, 4, nsl))
    return (av.reshape(n, 16).astype(np.uint16), bv.reshape(n, 16).astype(np.uint16),
            cv.reshape(n, 16).astype(np.uint32), last.reshape(n).copy())


def pack_payloads(a4, b4, c4, last, bf16: bool, acc_f16: bool) -> list[int]:
    """Beat rows to payload integers (LSB first, as the Verilog port ``i__payload``)."""
    n = len(last)
    flags = (np.asarray(last, np.uint8) | (np.uint8(bf16) << 1) | (np.uint8(acc_f16) << 2))
    raw = np.concatenate([np.ascontiguousarray(a4, '<u2').view(np.uint8).reshape(n, 32),
                          np.ascontiguousarray(b4, '<u2').view(np.uint8).reshape(n, 32),
                          np.ascontiguousarray(c4, '<u4').view(np.uint8).reshape(n, 64),
                          flags.reshape(n, 1)], axis=1)
    return [int.from_bytes(row.tobytes(), "little") for row in raw]


def unpack_outputs(words, acc_f16: bool) -> np.ndarray:
    """Output payload integers to (n, 16) D bits (uint16 when ``acc_f16``)."""
    raw = b"".join(int(w).to_bytes(64, "little") for w in words)
    d = np.frombuffer(raw, dtype="<u4").reshape(len(words), 16)
    return d.astype(np.uint16) if acc_f16 else d.copy()


def blocks_to_tiles(d, t: int) -> np.ndarray:
    """(T*16, 16) block outputs in (tile, I, J) order, 4i+j inside, back to (T, 16, 16)."""
    return d.reshape(t, 4, 4, 4, 4).transpose(0, 1, 3, 2, 4).reshape(t, 16, 16)


class Job:
    """A batch of tiles to run through the core, K chained in 16-wide fused steps.

    ``a`` (T, 16, K), ``b`` (T, K, 16), ``c`` (T, 16, 16); K a multiple of 4 (a last step
    shorter than 16 is fused over what is left, as the golden model does).
    """

    def __init__(self, a, b, c, *, bf16: bool, acc_f16: bool, fused: bool = True):
        self.a, self.b, self.c = np.asarray(a), np.asarray(b), np.asarray(c)
        self.bf16, self.acc_f16, self.fused = bool(bf16), bool(acc_f16), fused
        k = self.a.shape[2]
        if k % 4:
            raise ValueError(f"K must be a multiple of 4 for the MMA4 core, not {k}")
        self.steps = list(range(0, k, 16 if fused else 4))

    def step_payloads(self, step: int, c) -> list[int]:
        k0 = self.steps[step]
        if self.fused:
            a4, b4, c4, last = block_beats(self.a, self.b, c, k0, True)
        else:
            a4, b4, c4, last = block_beats(self.a[:, :, k0:k0 + 4], self.b[:, k0:k0 + 4], c, 0, False)
        return pack_payloads(a4, b4, c4, last, self.bf16, self.acc_f16)

    def save(self, path):
        np.savez(path, a=self.a, b=self.b, c=self.c, bf16=self.bf16, acc_f16=self.acc_f16,
                 fused=self.fused)

    @classmethod
    def load(cls, path):
        z = np.load(path)
        return cls(z["a"], z["b"], z["c"], bf16=bool(z["bf16"]), acc_f16=bool(z["acc_f16"]),
                   fused=bool(z["fused"]))


def save_jobs(path, jobs):
    """Several batches (of any K and format each) in one file: one simulator run for all."""
    arrays = {"n_jobs": len(jobs)}
    for i, j in enumerate(jobs):
        arrays.update({f"a{i}": j.a, f"b{i}": j.b, f"c{i}": j.c, f"bf16{i}": j.bf16,
                       f"acc_f16{i}": j.acc_f16, f"fused{i}": j.fused})
    np.savez(path, **arrays)


def load_jobs(path) -> list[Job]:
    """The batches of :func:`save_jobs` (or the one of :meth:`Job.save`)."""
    z = np.load(path)
    if "n_jobs" not in z.files:
        return [Job.load(path)]
    return [Job(z[f"a{i}"], z[f"b{i}"], z[f"c{i}"], bf16=bool(z[f"bf16{i}"]),
                acc_f16=bool(z[f"acc_f16{i}"]), fused=bool(z[f"fused{i}"]))
            for i in range(int(z["n_jobs"]))]
