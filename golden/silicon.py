"""Reading captured silicon vectors (the ``.npz`` format of ``tests/data/silicon/README.md``,
``lowprec/README.md`` and ``torch/README.md`` there).

Two kinds of file share the keys ``a``, ``b``, ``c`` (``c16``) and ``d_<kernel>``:

* tile files: ``a`` (T, M, K), ``b`` (T, K, N), ``c`` and ``d_*`` (T, M, N): T independent MMAs;
* whole-GEMM files (matmulT): ``a`` (M, K), ``b`` (K, N), ``c`` and ``d_*`` (M, N).

They are told apart by ``a.ndim``; which kernels a file holds, by its ``d_<kernel>`` keys; the
operands' dtypes follow from the kernel (uint16 FP16/BF16, uint32 TF32, uint8 FP8 and INT8).  :func:`problem` turns either into a batch of 16-row by
16-column output tiles with their full K, which is how the matmulT kernel computes a GEMM (one
warp per 16x16 tile of C, K in steps of 16).

The ``torch_splitk/`` captures of cuBLAS library GEMMs have their own layout (README there):
whole GEMMs whose calls' alpha, beta, bias and scales are in ``meta``; :func:`verify_cublas_file`
checks them through :func:`tcore.golden.matmul`'s library keywords.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
import zipfile

import json

import numpy as np

from tcore.numerics import Op
from tcore.numerics.op import CAPTURED
from tcore.numerics.formats import INPUT_FORMATS, OUTPUT_BITS, PTX_NAMES, dtype_of, values_dtype

__all__ = ["Kernel", "KERNELS", "VectorFileError", "Problem", "load", "problem", "kernels_in",
           "is_cublas_file", "cublas_calls", "verify_cublas_file"]


class VectorFileError(ValueError):
    """A vector file is missing, unreadable, or lacks a key, dtype or shape it needs."""


@dataclass(frozen=True)
class Kernel:
    """One captured instruction (or library call): its operation and where its data sits.

    ``op`` is the :class:`tcore.numerics.Op` computed; the kernel's name is its
    :attr:`~tcore.numerics.Op.kernel_name` and D is the file's ``d_<name>``.  C is the file's
    ``c_key`` array, rounded from FP32 to FP16 (nearest-even) where ``c_to_f16`` (the FP8
    FP16-output captures keep only the FP32 ``c``).
    """

    op: Op
    c_key: str = "c"
    c_to_f16: bool = False

    @property
    def name(self) -> str:
        return self.op.kernel_name

    @property
    def d_key(self) -> str:
        return f"d_{self.name}"

    @property
    def in_fmt(self) -> str:
        return self.op.a

    @property
    def b_fmt(self) -> str:
        return self.op.b

    @property
    def out_fmt(self) -> str:
        return self.op.acc

    @property
    def instr(self) -> str:
        return self.op.instr

    @property
    def saturate(self) -> bool:
        return self.op.saturate

    @property
    def promote(self) -> int | None:
        return self.op.promote

    @property
    def kind(self) -> str:
        """The datapath kind (:data:`tcore.numerics.KINDS`) of the inputs."""
        return self.op.kind

    def mma_args(self) -> dict:
        """Keyword arguments of :func:`tcore.golden.mma.mma` for this kernel, one by one (so that a
        check can change one of them)."""
        op = self.op
        return {"in_fmt": op.a, "b_fmt": op.b, "out_fmt": op.acc, "instr": op.instr,
                "saturate": op.saturate, "promote": op.promote}


#: Where the captures keep a kernel's C other than in ``c`` (FP32): the FP16-accumulator
#: mma's ``c16``; the FP8 FP16-output wgmma rounds the FP32 ``c``.
_C_OF = {"fp16->fp16": dict(c_key="c16"), "e4m3->fp16": dict(c_to_f16=True)}

#: Every captured kernel (:data:`tcore.numerics.op.CAPTURED`) by name.
KERNELS = {k.name: k for k in (Kernel(Op.parse(s), **_C_OF.get(s, {})) for s in CAPTURED)}

_BITS = {n: np.dtype(dtype_of(n)) for n in (*INPUT_FORMATS, *OUTPUT_BITS)}


@dataclass
class Problem:
    """One kernel's work from one file, as a batch of output tiles.

    ``a`` (T, 16, K), ``b`` (T, K, 16), ``c`` and ``expected`` (T, 16, 16).  ``gemm`` is
    ``(M, K, N)`` for a whole-GEMM file, None for a tile file.
    """

    kernel: Kernel
    a: np.ndarray
    b: np.ndarray
    c: np.ndarray
    expected: np.ndarray
    gemm: tuple | None


def load(path) -> dict:
    """Load a vector file into a dict of arrays; VectorFileError if it cannot be read."""
    path = Path(path)
    if path.is_dir():
        raise VectorFileError(f"{path}: is a directory, not a .npz file")
    if not path.is_file():
        raise VectorFileError(f"{path}: no such file")
    if not zipfile.is_zipfile(path):
        raise VectorFileError(f"{path}: not a readable .npz file (an .npz is a zip archive of "
                              ".npy arrays, as numpy.savez writes)")
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as e:
        raise VectorFileError(f"{path}: not a readable .npz file ({e})") from None


def kernels_in(data: dict) -> list[str]:
    """Kernels whose expected-output key is present."""
    return [k.name for k in KERNELS.values() if k.d_key in data]


def _need(data, key, dtype, ndim, where):
    if key not in data:
        raise VectorFileError(f"{where}: missing key {key!r}")
    arr = data[key]
    if arr.dtype != np.dtype(dtype):
        raise VectorFileError(f"{where}: {key!r} must be {np.dtype(dtype).name}, not {arr.dtype}")
    if arr.ndim != ndim:
        raise VectorFileError(f"{where}: {key!r} must have {ndim} dimensions, not shape {arr.shape}")
    return arr


def problem(data: dict, kernel: str, tiles: int | None = None, where: str = "file") -> Problem:
    """Extract one kernel's inputs and expected outputs as a batch of 16x16 output tiles.

    ``tiles`` keeps the first N tiles of a tile file, or the first N 16x16 output tiles
    (row-major tile order, all K steps) of a whole-GEMM file.
    """
    kern = KERNELS[kernel]
    for key in ("a", kern.d_key):
        if key not in data:
            raise VectorFileError(f"{where}: missing key {key!r}")
    ndim = data["a"].ndim
    if ndim not in (2, 3):
        raise VectorFileError(f"{where}: 'a' must be (T, M, K) or (M, K), not shape {data['a'].shape}")
    a = _need(data, "a", _BITS[kern.in_fmt], ndim, where)
    b = _need(data, "b", _BITS[kern.b_fmt or kern.in_fmt], ndim, where)
    if kern.c_to_f16:
        c = _need(data, kern.c_key, np.uint32, ndim, where)
        with np.errstate(over="ignore", invalid="ignore"):
            c = c.view(np.float32).astype(np.float16).view(np.uint16)   # nearest-even
    else:
        c = _need(data, kern.c_key, _BITS[kern.out_fmt], ndim, where)
    d = _need(data, kern.d_key, _BITS[kern.out_fmt], ndim, where)
    lead = a.shape[:-2]
    m, k = a.shape[-2:]
    if b.shape[:-2] != lead or b.shape[-2] != k:
        raise VectorFileError(f"{where}: 'b' shape {b.shape} does not match 'a' shape {a.shape}")
    n = b.shape[-1]
    for key, arr in ((kern.c_key, c), (kern.d_key, d)):
        if arr.shape != lead + (m, n):
            raise VectorFileError(f"{where}: {key!r} must have shape {lead + (m, n)}, not {arr.shape}")
    if k < 1 or m < 1 or n < 1 or (ndim == 3 and a.shape[0] == 0):
        raise VectorFileError(f"{where}: nothing to check: empty matrices {a.shape} x {b.shape}")
    if tiles is not None and tiles < 1:
        raise ValueError(f"--tiles must be at least 1, not {tiles}")
    if ndim == 3:
        sl = slice(None, tiles)
        return Problem(kern, a[sl], b[sl], c[sl], d[sl], None)
    if m % 16 or n % 16:
        raise VectorFileError(f"{where}: a whole GEMM needs M and N multiples of 16, not {m}x{n}")
    ti, tj = m // 16, n // 16
    count = ti * tj if tiles is None else min(tiles, ti * tj)
    idx = np.arange(count)
    rows, cols = idx // tj, idx % tj
    r16 = rows[:, None] * 16 + np.arange(16)
    c16 = cols[:, None] * 16 + np.arange(16)
    return Problem(kern, a[r16], b[:, c16].transpose(1, 0, 2),
                   c[r16[:, :, None], c16[:, None, :]], d[r16[:, :, None], c16[:, None, :]],
                   (m, k, n))


# -- cuBLAS library captures (torch_splitk/) --------------------------------------------------------

_CUBLAS_KINDS = ("splitk", "epilogue", "fp8")
#: The input formats of the cuBLAS captures, by the PTX names the files use.
_CUBLAS_IN = ("f16", "bf16", "e4m3")


def _ptx_dtype(name: str):
    """The value dtype of a format by its PTX name (``f16``, ``f32``) or ours (``bf16``)."""
    return values_dtype({v: k for k, v in PTX_NAMES.items()}.get(name, name))
_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32}


def _json_meta(data) -> dict:
    try:
        return json.loads(str(data["meta"]))
    except (KeyError, ValueError):
        return {}


def is_cublas_file(data: dict) -> bool:
    """Whether a loaded capture is one of ``torch_splitk/``: meta ``kind`` splitk, epilogue or
    fp8 with the cuBLASLt log's ``numSplitsK`` per output (the FP8 tile files of ``lowprec/``
    share the kind, not the log)."""
    meta = _json_meta(data)
    return meta.get("kind") in _CUBLAS_KINDS and "numSplitsK" in meta


def _floats(data, key, dtype, where):
    if key not in data:
        raise ValueError(f"{where}: missing key {key!r}")
    arr = np.asarray(data[key])
    want = _UINT[np.dtype(dtype).itemsize]
    if arr.dtype != want:
        raise ValueError(f"{where}: {key!r} must be {np.dtype(want).name} bits, not {arr.dtype}")
    return arr.view(dtype)


def cublas_calls(data, where="file") -> list[tuple[str, dict]]:
    """Every output key of a ``torch_splitk/`` capture with the :func:`tcore.golden.matmul` keywords
    that compute it (besides ``a`` and ``b``): ``[(key, kwargs), ...]``, the split count from
    the file's ``numSplitsK``, alpha / beta / scales from its ``meta``."""
    meta = _json_meta(data)
    kind, fmt = meta.get("kind"), meta.get("dtype")
    if kind not in _CUBLAS_KINDS or fmt not in _CUBLAS_IN:
        raise ValueError(f"{where}: not a torch_splitk capture (meta kind {kind!r}, dtype {fmt!r})")
    in_dt = _ptx_dtype(fmt)
    splits = meta.get("numSplitsK", {})
    out = []
    for key in [k for k in data if k.startswith(("d_", "d32_"))]:
        d = data[key]
        f32 = d.dtype == np.uint32
        kw = {"split_k": int(splits.get(key, 1))}
        if kind == "fp8":
            parts = key.split("_")          # d_{tw,rw}_{fast,slow}_{f32,bf16,f16}[_bias]
            if len(parts) < 4 or parts[1] not in ("tw", "rw") or parts[2] not in ("fast", "slow"):
                raise ValueError(f"{where}: unknown FP8 key {key!r}")
            kw = {"out_dtype": _ptx_dtype(parts[3]),
                  "promote": None if parts[2] == "fast" else 128}
            if parts[1] == "tw":
                kw["scale_a"] = np.float32(meta["scale_a_tw"])
                kw["scale_b"] = np.float32(meta["scale_b_tw"])
            else:
                kw["scale_a"] = _floats(data, "sa", np.float32, where)
                kw["scale_b"] = _floats(data, "sb", np.float32, where)
            if key.endswith("_bias"):
                kw["bias"] = _floats(data, "bias_f16" if parts[3] == "f16" else "bias_bf16",
                                     _ptx_dtype("f16" if parts[3] == "f16" else "bf16"), where)
            out.append((key, kw))
            continue
        kw["out_dtype"] = np.float32 if f32 else in_dt
        alpha, beta = float(meta.get("alpha", 1)), float(meta.get("beta", 1))
        c = _floats(data, "c", in_dt, where)
        op = key.split("_")[1] if kind == "splitk" else "_".join(key.split("_")[1:])
        if kind == "splitk":
            op = {"rr0": "mm", "rr1": "mm", "addmm": "addmm_ab", "lin": "lin",
                  "matmulT": "matmulT"}.get(op)
        if op in ("mm", "matmulT"):
            pass
        elif op == "lin":
            kw["bias"] = _floats(data, "bias", in_dt, where)
        elif op in ("addmm_ab", "addmm_11", "addmm_a1", "addmm_1b"):
            a_, b_ = {"ab": (alpha, beta), "11": (1, 1), "a1": (alpha, 1),
                      "1b": (1, beta)}[op.split("_")[1]]
            kw.update(c=c.astype(np.float32) if f32 else c, alpha=a_, beta=b_)
        elif op == "addmm_bias_ab":
            bias = _floats(data, "bias", in_dt, where)
            kw.update(c=np.broadcast_to(bias, d.shape), alpha=alpha, beta=beta)
        else:
            raise ValueError(f"{where}: unknown key {key!r}")
        out.append((key, kw))
    return out


def verify_cublas_file(source, *, where=None) -> list:
    """Check every output of a ``torch_splitk/`` capture (a path or a loaded dict) against
    :func:`tcore.golden.matmul` with the file's split counts, alpha, beta, C, bias and scales
    (:mod:`tcore.golden.cublas`); a list of :class:`tcore.golden.sparse.KernelCheck` (``kind="cublas"``)."""
    from .floats import matmul
    from .sparse import KernelCheck
    if not isinstance(source, dict):
        where = where or str(source)
        with np.load(source, allow_pickle=False) as z:
            data = {k: z[k] for k in z.files}
    else:
        data, where = source, where or "file"
    meta = _json_meta(data)
    fmt = meta.get("dtype")
    calls = cublas_calls(data, where)
    a = _floats(data, "a", _ptx_dtype(fmt), where)
    b = _floats(data, "b", _ptx_dtype(fmt), where)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"{where}: a {a.shape} and b {b.shape} are not an (M, K) x (K, N) GEMM")
    m, k = a.shape
    n = b.shape[1]
    out = []
    for key, kw in calls:
        want = np.asarray(data[key])
        if want.shape != (m, n):
            raise ValueError(f"{where}: {key!r} must be ({m}, {n}), not {want.shape}")
        got = matmul(a, b, **kw)
        bad = int((got.view(want.dtype) != want).sum())
        s = kw.get("split_k", 1)
        out.append(KernelCheck(key.removeprefix("d_"), int(want.size), bad,
                               "cublas", f"gemm {m}x{k}x{n}" + (f", split-K {s}" if s > 1 else "")))
    return out
