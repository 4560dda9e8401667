"""PyTorch's GEMMs on CPU tensors with the bits an H200 returns (``docs/torch.md``).

``with tcore.torch.emulate():`` is a :class:`torch.overrides.TorchFunctionMode` under which
``torch.mm``, ``torch.matmul`` (and ``@``), ``torch.bmm``, ``torch.addmm``, ``torch.baddbmm``,
``torch.nn.functional.linear`` (so ``nn.Linear``), ``torch._scaled_mm`` and ``torch._int_mm``
on CPU tensors return what cuBLAS / cuBLASLt return on an H200: FP16 and BF16 (FP32 or
FP16/BF16 output), FP32 as TF32 where TF32 is allowed, FP8 E4M3/E5M2 with tensor-wise scales,
INT8.  The same operations are plain functions here (:func:`mm`, :func:`matmul`, ...), and
:func:`sparse_mm` is cuSPARSELt's 2:4 sparse GEMM (``torch.mm(to_sparse_semi_structured(A),
B)``), which PyTorch cannot build on the CPU.

Every product goes through the golden model: :func:`golden.matmul` (the K chain of the tensor
core's block fused dot-add, ``promote=128`` for ``_scaled_mm``'s default accumulation) and
:func:`golden.sparse.cslt_mm`.  What this module adds is the library around it:

* the kernels modelled are cuBLAS's non-split-K ones: the accumulator starts at zero and runs
  the whole K as one chain (measured on the ``tests/data/silicon/torch/`` captures).  For small
  M and N with a large K cuBLAS may pick a split-K kernel whose reduction order is not known;
  ``CUBLAS_WORKSPACE_CONFIG=:0:0`` makes it pick the modelled kernels;
* the epilogue, in FP32: ``D = alpha * acc + beta * C`` (an FMA, one rounding to nearest-even,
  as CUTLASS's linear combination computes it; C is ``addmm``'s input or ``linear``'s bias),
  then one round to nearest-even to the output type.  With alpha = 1 and beta = 0 (``mm``,
  ``matmul``, ``bmm``, ``linear`` without a bias, ``_scaled_mm`` with scales 1) the result is
  the accumulator itself, which the captures check; the epilogue with C, alpha, beta or scales
  other than 1 is not in them;
* ``_scaled_mm``: alpha = scale_a * scale_b (rounded to FP32), bias as C.

Under the mode, tensors on another device (a real GPU, ``meta``) go to PyTorch untouched.  A
GEMM on CPU tensors that the model does not cover (FP32 without TF32, float64, integers other
than ``_int_mm``, FP8 in ``mm``, row-wise FP8 scales, FP8 output, a vector dot product, inputs
that require grad with grad mode on) and the GEMM-like operations that it does not model
(``einsum``, ``mv``, convolutions, ``scaled_dot_product_attention``, ... :data:`UNMODELLED`)
raise :class:`Unsupported`; with ``emulate(strict=False)`` PyTorch computes them on the CPU
instead.  The plain functions take tensors on any device (they compute on a CPU copy and return
on the input's device) and always raise :class:`Unsupported` for what they do not cover; their
results carry no autograd history.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import ml_dtypes
import numpy as np
import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

import golden
from golden import sparse as gsparse
from golden.sparse import _bf16_rne

__all__ = ["emulate", "Unsupported", "ARCHS", "UNMODELLED", "mm", "matmul", "bmm", "addmm",
           "baddbmm", "linear", "scaled_mm", "int_mm", "sparse_mm", "prune_24", "tf32_allowed",
           "SEGMENT_K_FROM"]

#: The ``arch`` names taken, with the golden model's parameter set of each (H100 and H200 are
#: the same sm_90 die; the rules were measured on an H200).
ARCHS = {"h200": "hopper", "h100": "hopper", "hopper": "hopper"}


class Unsupported(NotImplementedError):
    """A GEMM (or GEMM-like operation) on CPU tensors that the model does not cover.

    A NotImplementedError, not a TypeError: PyTorch turns a TypeError raised under ``a @ b``
    into NotImplemented and Python then reports an unrelated operand-type error."""


class _Defer(Exception):
    """Internal: the mode hands the call back to PyTorch."""


@dataclass(frozen=True)
class _Opts:
    arch: str = "hopper"
    allow_tf32: bool | None = None
    strict: bool = True
    workers: int | None = None
    plain: bool = False            # a plain function: any device, always strict


def _options(arch, allow_tf32, workers, *, strict=True, plain=False) -> _Opts:
    key = str(arch).lower()
    if key not in ARCHS:
        raise ValueError(f"arch must be one of {', '.join(ARCHS)}, not {arch!r} (the cuBLAS rules "
                         "are measured on an H200; other generations are not modelled here)")
    if allow_tf32 not in (None, True, False):
        raise ValueError(f"allow_tf32 must be None (read PyTorch's setting), True or False, "
                         f"not {allow_tf32!r}")
    if workers is not None and int(workers) < 1:
        raise ValueError(f"workers must be at least 1, not {workers!r}")
    return _Opts(ARCHS[key], allow_tf32, bool(strict), workers, plain)


def tf32_allowed() -> bool:
    """Whether PyTorch lets cuBLAS run FP32 GEMMs as TF32 now: the new API
    (``torch.backends.cuda.matmul.fp32_precision == "tf32"``, or the generic
    ``torch.backends.fp32_precision``) or the old one (``torch.backends.cuda.matmul.allow_tf32``,
    ``torch.set_float32_matmul_precision("high")``)."""
    mat = torch.backends.cuda.matmul
    for where in (mat, torch.backends):
        try:
            p = getattr(where, "fp32_precision", None)
        except RuntimeError:
            p = None
        if p == "tf32":
            return True
        if p == "ieee":
            return False
    try:
        return bool(mat.allow_tf32)
    except RuntimeError:          # old and new API mixed: PyTorch refuses to answer
        return False


def _unsupported(opts: _Opts, msg: str):
    if opts.strict or opts.plain:
        raise Unsupported(msg + ("" if opts.plain else
                                 "; emulate(strict=False) lets PyTorch compute it on the CPU"))
    raise _Defer


# -- tensors <-> NumPy ---------------------------------------------------------------------------

_FP8 = (torch.float8_e4m3fn, torch.float8_e5m2)
_NP = {torch.float16: np.float16, torch.bfloat16: ml_dtypes.bfloat16, torch.float32: np.float32,
       torch.float8_e4m3fn: ml_dtypes.float8_e4m3fn, torch.float8_e5m2: ml_dtypes.float8_e5m2,
       torch.int8: np.int8, torch.uint8: np.uint8, torch.int32: np.int32}
_RAW = {1: (torch.uint8, np.uint8), 2: (torch.int16, np.uint16), 4: (torch.int32, np.uint32)}
_NAME = {torch.float16: "FP16", torch.bfloat16: "BF16", torch.float32: "FP32",
         torch.float8_e4m3fn: "FP8 E4M3", torch.float8_e5m2: "FP8 E5M2"}


def _to_numpy(t: torch.Tensor) -> np.ndarray:
    """The tensor's values as a NumPy array of the matching (ml_dtypes) dtype, bits unchanged."""
    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    if t.dtype in (torch.float16, torch.float32, torch.int8, torch.uint8, torch.int32):
        return t.numpy()
    raw_t, raw_n = _RAW[t.element_size()]
    return t.view(raw_t).numpy().view(raw_n).view(_NP[t.dtype])


def _tensor(d: np.ndarray, dtype) -> torch.Tensor:
    """An FP32 (or int32) result as a tensor of ``dtype``: FP16 and BF16 are one round to
    nearest-even (a NaN becomes the canonical 0x7FFF, as the GPU's conversion gives)."""
    d = np.ascontiguousarray(d)
    if dtype in (torch.float32, torch.int32):
        return torch.from_numpy(d)
    if dtype == torch.float16:
        with np.errstate(over="ignore", invalid="ignore"):
            bits = d.astype(np.float16).view(np.uint16)
        bits[np.isnan(d)] = 0x7FFF
        return torch.from_numpy(bits.view(np.float16))
    if dtype == torch.bfloat16:
        bits = _bf16_rne(d.view(np.uint32))
        return torch.from_numpy(bits.view(np.int16)).view(torch.bfloat16)
    raise AssertionError(dtype)


def _fma32(x, y, z):
    """fl32(x * y + z) with one rounding to nearest-even, on float32 arrays: the exact product
    in float64, the sum rounded to odd in float64 (TwoSum), then to float32 (53 >= 24 + 2 bits,
    so the double rounding is exact)."""
    x, y, z = (np.asarray(v, np.float64) for v in (x, y, z))
    p = x * y
    s = p + z
    t = s - z
    e = (p - t) + (z - (s - t))
    bump = np.isfinite(s) & np.isfinite(e) & (e != 0) & ((s.view(np.int64) & 1) == 0)
    s = np.where(bump, np.nextafter(s, np.where(e > 0, np.inf, -np.inf)), s)
    return s.astype(np.float32)


def _epilogue(acc, alpha=1.0, c=None, beta=1.0):
    """cuBLAS's FP32 epilogue: alpha * acc + beta * C, one rounding (C absent or beta = 0:
    alpha * acc); NaN canonical (0x7FFFFFFF).  ``acc`` is golden's FP32 accumulator."""
    acc = np.asarray(acc, np.float32)
    alpha = np.float32(alpha)
    with np.errstate(all="ignore"):
        if c is None or beta == 0:
            d = acc if alpha == 1 else alpha * acc
        else:
            z = np.asarray(c, np.float32)
            if beta != 1:
                z = np.float32(beta) * z
            d = acc + z if alpha == 1 else _fma32(alpha, acc, z)
    d = np.array(d, np.float32)
    d.view(np.uint32)[np.isnan(d)] = 0x7FFFFFFF
    return d


# -- checks --------------------------------------------------------------------------------------

def _tensors(*xs):
    return [x for x in xs if isinstance(x, torch.Tensor)]


def _enter(opts: _Opts, *xs):
    """Defer tensors off the CPU (the mode), refuse autograd and non-strided layouts; return
    the device of the result (the first tensor's)."""
    ts = _tensors(*xs)
    if not opts.plain and any(t.device.type != "cpu" for t in ts):
        raise _Defer
    for t in ts:
        if t.layout != torch.strided:
            _unsupported(opts, f"a {t.layout} tensor is not modelled (dense strided tensors only; "
                               "2:4 sparse A: tcore.torch.sparse_mm)")
    if not opts.plain and torch.is_grad_enabled() and any(t.requires_grad for t in ts):
        _unsupported(opts, "the model is forward only: run it under torch.no_grad() or "
                           "torch.inference_mode() (an input requires grad)")
    return ts[0].device if ts else torch.device("cpu")


def _tf32(opts: _Opts) -> bool:
    return tf32_allowed() if opts.allow_tf32 is None else opts.allow_tf32


def _accumulate(opts: _Opts, a: torch.Tensor, b: torch.Tensor, what: str) -> np.ndarray:
    """golden.matmul's FP32 accumulator of two FP16, BF16 or FP32 (TF32) tensors, the whole K
    as one chain from zero (cuBLAS's non-split-K kernels)."""
    if a.dtype != b.dtype:
        _unsupported(opts, f"{what} of {a.dtype} and {b.dtype}: both inputs must have one dtype")
    dt = a.dtype
    if dt == torch.float32:
        if not _tf32(opts):
            _unsupported(opts, f"{what} on FP32 tensors without TF32 runs on the CUDA cores "
                               "(SGEMM), which is not modelled; allow TF32 "
                               "(torch.backends.cuda.matmul.allow_tf32 = True, or "
                               "emulate(allow_tf32=True) / allow_tf32=True)")
    elif dt in _FP8:
        _unsupported(opts, f"{what} on {dt} tensors: cuBLAS has no plain FP8 GEMM; "
                           "use torch._scaled_mm")
    elif dt not in (torch.float16, torch.bfloat16):
        _unsupported(opts, f"{what} on {dt} tensors is not modelled (FP16, BF16, FP32 as TF32; "
                           "FP8 through torch._scaled_mm, INT8 through torch._int_mm)")
    return golden.matmul(_to_numpy(a), _to_numpy(b), arch=opts.arch, workers=opts.workers)


def _out_dtype(opts, in_dtype, out_dtype, what):
    if out_dtype is None or out_dtype == in_dtype:
        return in_dtype
    if out_dtype == torch.float32 and in_dtype in (torch.float16, torch.bfloat16):
        return out_dtype
    _unsupported(opts, f"{what} with out_dtype={out_dtype} on {in_dtype} inputs is not modelled "
                       "(out_dtype is the input dtype, or float32 for FP16/BF16)")


def _finish(d, dtype, device, out=None):
    t = _tensor(d, dtype)
    if device.type != "cpu":
        t = t.to(device)
    if out is not None:
        if out.dtype != t.dtype:
            raise RuntimeError(f"out has dtype {out.dtype}, the result {t.dtype}")
        out.resize_(t.shape)
        out.copy_(t)
        return out
    return t


def _shapes(what, a, b, ndim=None):
    if ndim is not None and (a.dim() != ndim or b.dim() != ndim):
        raise RuntimeError(f"{what}: both arguments must be {ndim}-D, not {a.dim()}-D and "
                           f"{b.dim()}-D")
    if a.shape[-1] != b.shape[-2]:
        raise RuntimeError(f"{what}: shapes {tuple(a.shape)} and {tuple(b.shape)} cannot be "
                           "multiplied")
    try:
        torch.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except RuntimeError:
        raise RuntimeError(f"{what}: batch shapes of {tuple(a.shape)} and {tuple(b.shape)} do "
                           "not broadcast") from None


# -- the operations ------------------------------------------------------------------------------

def _mm(opts, input, mat2, out_dtype=None, *, out=None):
    device = _enter(opts, input, mat2, out)
    _shapes("mm", input, mat2, ndim=2)
    dtype = _out_dtype(opts, input.dtype, out_dtype, "mm")
    return _finish(_epilogue(_accumulate(opts, input, mat2, "mm")), dtype, device, out)


def _bmm(opts, input, mat2, out_dtype=None, *, out=None):
    device = _enter(opts, input, mat2, out)
    _shapes("bmm", input, mat2, ndim=3)
    if input.shape[0] != mat2.shape[0]:
        raise RuntimeError(f"bmm: batch sizes {input.shape[0]} and {mat2.shape[0]} differ")
    dtype = _out_dtype(opts, input.dtype, out_dtype, "bmm")
    return _finish(_epilogue(_accumulate(opts, input, mat2, "bmm")), dtype, device, out)


def _matmul_acc(opts, input, other, what="matmul"):
    """torch.matmul's shapes (vectors made matrices, batch broadcast) around the accumulator."""
    if input.dim() == 0 or other.dim() == 0:
        raise RuntimeError("both arguments to matmul need to be at least 1D")
    if input.dim() == 1 and other.dim() == 1:
        _unsupported(opts, "matmul of two vectors is torch.dot, which cuBLAS computes with "
                           "its dot routine, not a GEMM; not modelled")
    a = input.unsqueeze(0) if input.dim() == 1 else input
    b = other.unsqueeze(-1) if other.dim() == 1 else other
    _shapes(what, a, b)
    acc = _accumulate(opts, a, b, what)
    if input.dim() == 1:
        acc = acc[..., 0, :]
    if other.dim() == 1:
        acc = acc[..., 0]
    return acc


def _matmul(opts, input, other, *, out=None):
    device = _enter(opts, input, other, out)
    return _finish(_epilogue(_matmul_acc(opts, input, other)), input.dtype, device, out)


def _rmatmul(opts, self, other):
    return _matmul(opts, other, self)


def _addend(opts, c, in_dtype, what):
    if not isinstance(c, torch.Tensor):
        raise RuntimeError(f"{what}: input must be a tensor, not {type(c).__name__}")
    if c.dtype != in_dtype and not (c.dtype == torch.float32 and in_dtype in (torch.float16,
                                                                               torch.bfloat16)):
        _unsupported(opts, f"{what}: an addend of {c.dtype} with {in_dtype} inputs is not modelled")
    return _to_numpy(c).astype(np.float32)


def _addmm_args(args, kwargs):
    """(input, mat1, mat2, out_dtype, beta, alpha, out) of addmm/baddbmm in any of PyTorch's
    forms, the deprecated positional (beta, input, alpha, mat1, mat2) ones included."""
    args = list(args)
    beta, alpha = kwargs.pop("beta", 1), kwargs.pop("alpha", 1)
    if args and isinstance(args[0], numbers.Number):
        beta = args.pop(0)
        if len(args) == 4 and isinstance(args[1], numbers.Number):
            alpha = args.pop(1)
    names = ["input", "mat1", "mat2", "out_dtype"]
    given = dict(zip(names, args))
    for key in ("batch1", "batch2"):
        if key in kwargs:
            kwargs[{"batch1": "mat1", "batch2": "mat2"}[key]] = kwargs.pop(key)
    given.update({k: kwargs.pop(k) for k in names if k in kwargs})
    out = kwargs.pop("out", None)
    if kwargs:
        raise TypeError(f"unexpected arguments {sorted(kwargs)}")
    return (given["input"], given["mat1"], given["mat2"], given.get("out_dtype"), beta, alpha, out)


def _addmm_like(opts, what, ndim, args, kwargs):
    c, m1, m2, out_dtype, beta, alpha, out = _addmm_args(args, dict(kwargs))
    device = _enter(opts, c, m1, m2, out)
    _shapes(what, m1, m2, ndim=ndim)
    if ndim == 3 and m1.shape[0] != m2.shape[0]:
        raise RuntimeError(f"{what}: batch sizes {m1.shape[0]} and {m2.shape[0]} differ")
    dtype = _out_dtype(opts, m1.dtype, out_dtype, what)
    acc = _accumulate(opts, m1, m2, what)
    cn = _addend(opts, c, m1.dtype, what)
    try:
        cn = np.broadcast_to(cn, acc.shape)
    except ValueError:
        raise RuntimeError(f"{what}: input of shape {tuple(c.shape)} does not broadcast to "
                           f"{acc.shape}") from None
    return _finish(_epilogue(acc, alpha, cn, beta), dtype, device, out)


def _addmm(opts, *args, **kwargs):
    return _addmm_like(opts, "addmm", 2, args, kwargs)


def _baddbmm(opts, *args, **kwargs):
    return _addmm_like(opts, "baddbmm", 3, args, kwargs)


def _linear(opts, input, weight, bias=None):
    device = _enter(opts, input, weight, bias)
    if weight.dim() != 2:
        _unsupported(opts, f"linear with a {weight.dim()}-D weight is not modelled")
    w_t = weight.t()
    if bias is None:
        return _finish(_epilogue(_matmul_acc(opts, input, w_t, "linear")), input.dtype, device)
    if bias.dtype != input.dtype:
        raise RuntimeError(f"linear: bias is {bias.dtype}, input {input.dtype}")
    # at::linear: a 2-D input, or a contiguous one (3-D, or any with a 1-D bias), is one addmm
    # with the bias in the GEMM's epilogue; otherwise matmul, then the bias added in the
    # output type (an elementwise kernel: FP32 sum, rounded to the output type).
    fused = input.dim() == 2 or (input.is_contiguous() and (input.dim() == 3 or bias.dim() == 1))
    bn = _to_numpy(bias).astype(np.float32)
    if fused:
        flat = input.reshape(-1, input.shape[-1])
        _shapes("linear", flat, w_t)
        acc = _accumulate(opts, flat, w_t, "linear")
        d = _epilogue(acc, 1, np.broadcast_to(bn, acc.shape), 1)
        return _finish(d.reshape(tuple(input.shape[:-1]) + (weight.shape[0],)), input.dtype, device)
    y = _tensor(_epilogue(_matmul_acc(opts, input, w_t, "linear")), input.dtype)
    with np.errstate(all="ignore"):
        d = _to_numpy(y).astype(np.float32) + bn
    return _finish(_epilogue(d), input.dtype, device)


def _scaled_mm(opts, input, mat2, scale_a, scale_b, bias=None, scale_result=None,
               out_dtype=None, use_fast_accum=False, *, out=None):
    device = _enter(opts, input, mat2, scale_a, scale_b, bias, scale_result, out)
    what = "_scaled_mm"
    if input.dtype not in _FP8 or mat2.dtype not in _FP8:
        _unsupported(opts, f"{what} of {input.dtype} and {mat2.dtype}: FP8 E4M3/E5M2 inputs only")
    if input.dtype == mat2.dtype == torch.float8_e5m2:
        _unsupported(opts, f"{what} of two E5M2 matrices: cuBLASLt has no E5M2 x E5M2 GEMM")
    _shapes(what, input, mat2, ndim=2)
    for name, s in (("scale_a", scale_a), ("scale_b", scale_b)):
        if not isinstance(s, torch.Tensor) or s.numel() != 1 or s.dtype != torch.float32:
            _unsupported(opts, f"{what}: {name} must be one float32 value (tensor-wise scaling); "
                               "row-wise and block-wise scales are not modelled")
    if scale_result is not None:
        _unsupported(opts, f"{what}: scale_result (an FP8 output) is not modelled")
    dtype = input.dtype if out_dtype is None else out_dtype
    if dtype not in (torch.float32, torch.bfloat16, torch.float16):
        _unsupported(opts, f"{what} with out_dtype={dtype} is not modelled (float32, bfloat16, "
                           "float16)")
    acc = golden.matmul(_to_numpy(input), _to_numpy(mat2), arch=opts.arch,
                        promote=None if use_fast_accum else 128, workers=opts.workers)
    alpha = np.float32(_to_numpy(scale_a).reshape(())) * np.float32(_to_numpy(scale_b).reshape(()))
    c = None
    if bias is not None:
        if bias.dtype not in (torch.float32, torch.bfloat16, torch.float16):
            _unsupported(opts, f"{what}: a {bias.dtype} bias is not modelled")
        c = np.broadcast_to(_to_numpy(bias).astype(np.float32), acc.shape)
    return _finish(_epilogue(acc, alpha, c, 1), dtype, device, out)


def _int_mm(opts, input, mat2, *, out=None):
    device = _enter(opts, input, mat2, out)
    _shapes("_int_mm", input, mat2, ndim=2)
    if input.dtype != torch.int8 or mat2.dtype != torch.int8:
        _unsupported(opts, f"_int_mm of {input.dtype} and {mat2.dtype}: int8 inputs only")
    d = golden.matmul(_to_numpy(input), _to_numpy(mat2), arch=opts.arch, workers=opts.workers)
    return _finish(d, torch.int32, device, out)


_HANDLERS = {}
for _fn, _h in ((torch.mm, _mm), (torch.Tensor.mm, _mm), (torch.bmm, _bmm),
                (torch.Tensor.bmm, _bmm), (torch.matmul, _matmul), (torch.Tensor.matmul, _matmul),
                (torch.Tensor.__matmul__, _matmul), (torch.linalg.matmul, _matmul),
                (torch.Tensor.__rmatmul__, _rmatmul), (torch.addmm, _addmm),
                (torch.Tensor.addmm, _addmm), (torch.baddbmm, _baddbmm),
                (torch.Tensor.baddbmm, _baddbmm), (F.linear, _linear),
                (torch._scaled_mm, _scaled_mm), (torch._int_mm, _int_mm)):
    _HANDLERS[_fn] = _h


def _collect(names):
    out = []
    for name in names:
        obj = torch
        for part in name.split("."):
            obj = getattr(obj, part, None)
            if obj is None:
                break
        if obj is not None:
            out.append(obj)
    return out


#: GEMM-like operations the mode does not model: on CPU floating-point tensors they raise
#: :class:`Unsupported` (``strict=False``: PyTorch computes them).
UNMODELLED = tuple(_collect([
    "mv", "Tensor.mv", "dot", "Tensor.dot", "vdot", "Tensor.vdot", "inner", "Tensor.inner",
    "einsum", "tensordot", "addmv", "Tensor.addmv", "addbmm", "Tensor.addbmm", "chain_matmul",
    "linalg.multi_dot", "linalg.vecdot", "Tensor.addmm_", "Tensor.baddbmm_", "Tensor.addbmm_",
    "Tensor.addmv_", "Tensor.__imatmul__", "_addmm_activation", "sparse.mm", "sparse.addmm",
    "_cslt_sparse_mm", "_scaled_mm_v2", "_grouped_mm", "_scaled_grouped_mm",
    "nn.functional.bilinear", "nn.functional.conv1d", "nn.functional.conv2d",
    "nn.functional.conv3d", "nn.functional.conv_transpose1d", "nn.functional.conv_transpose2d",
    "nn.functional.conv_transpose3d", "nn.functional.scaled_dot_product_attention",
]))
_UNMODELLED = set(UNMODELLED)


def _cpu_floats(tree) -> bool:
    if isinstance(tree, torch.Tensor):
        return tree.device.type == "cpu" and tree.is_floating_point()
    if isinstance(tree, (list, tuple)):
        return any(_cpu_floats(x) for x in tree)
    if isinstance(tree, dict):
        return any(_cpu_floats(x) for x in tree.values())
    return False


def _name(func) -> str:
    return getattr(func, "__qualname__", None) or getattr(func, "__name__", repr(func))


class emulate(TorchFunctionMode):
    """A :class:`torch.overrides.TorchFunctionMode` under which PyTorch's GEMMs on CPU tensors
    return an H200's bits (module docstring; ``docs/torch.md``).

    Parameters
    ----------
    arch : "h200" (or "h100", "hopper": the same sm_90 tensor core)
    allow_tf32 : None, True or False
        FP32 GEMMs as TF32.  None reads PyTorch's setting at each call
        (``torch.backends.cuda.matmul.allow_tf32`` / ``fp32_precision``, :func:`tf32_allowed`);
        without TF32 an FP32 GEMM is not modelled.
    strict : bool
        True: a GEMM on CPU tensors that is not modelled raises :class:`Unsupported`.  False:
        PyTorch computes it (its own CPU bits, not the H200's).
    workers : int or None
        Threads for the golden model (None: every core).

    Example
    -------
    >>> import torch, tcore.torch
    >>> a = torch.tensor([[1, 2**-12, 2**-12, 2**-12]], dtype=torch.float16)
    >>> with tcore.torch.emulate():
    ...     d = torch.mm(a, a.T, out_dtype=torch.float32)
    >>> float(d)            # 1 + 3 * 2**-24 truncated toward zero, as the H200 does
    1.0000001192092896
    """

    def __init__(self, arch="h200", *, allow_tf32=None, strict=True, workers=None):
        super().__init__()
        self.options = _options(arch, allow_tf32, workers, strict=strict)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        handler = _HANDLERS.get(func)
        try:
            if handler is not None:
                return handler(self.options, *args, **kwargs)
            if func in _UNMODELLED and (_cpu_floats(args) or _cpu_floats(kwargs)):
                _unsupported(self.options, f"{_name(func)} is not modelled (a GEMM-like "
                                           "operation; write it with torch.matmul / torch.mm)")
        except _Defer:
            pass
        return func(*args, **kwargs)


# -- plain functions -----------------------------------------------------------------------------

def mm(input, mat2, out_dtype=None, *, arch="h200", allow_tf32=None, workers=None):
    """``torch.mm(input, mat2, out_dtype)`` as an H200 computes it (cuBLAS, non-split-K)."""
    return _mm(_options(arch, allow_tf32, workers, plain=True), input, mat2, out_dtype)


def bmm(input, mat2, out_dtype=None, *, arch="h200", allow_tf32=None, workers=None):
    """``torch.bmm(input, mat2, out_dtype)`` as an H200 computes it."""
    return _bmm(_options(arch, allow_tf32, workers, plain=True), input, mat2, out_dtype)


def matmul(input, other, *, arch="h200", allow_tf32=None, workers=None):
    """``torch.matmul(input, other)`` (``input @ other``) as an H200 computes it."""
    return _matmul(_options(arch, allow_tf32, workers, plain=True), input, other)


def addmm(input, mat1, mat2, out_dtype=None, *, beta=1, alpha=1, arch="h200", allow_tf32=None,
          workers=None):
    """``torch.addmm(input, mat1, mat2, beta=beta, alpha=alpha)``: the FP32 accumulator of
    mat1 @ mat2, then the FP32 epilogue alpha * acc + beta * input (one rounding), then the
    output type."""
    return _addmm(_options(arch, allow_tf32, workers, plain=True), input, mat1, mat2, out_dtype,
                  beta=beta, alpha=alpha)


def baddbmm(input, batch1, batch2, out_dtype=None, *, beta=1, alpha=1, arch="h200",
            allow_tf32=None, workers=None):
    """``torch.baddbmm``: :func:`addmm` per batch entry."""
    return _baddbmm(_options(arch, allow_tf32, workers, plain=True), input, batch1, batch2,
                    out_dtype, beta=beta, alpha=alpha)


def linear(input, weight, bias=None, *, arch="h200", allow_tf32=None, workers=None):
    """``torch.nn.functional.linear(input, weight, bias)``: input @ weight.T, the bias added in
    the GEMM's FP32 epilogue where ``at::linear`` fuses it (2-D or contiguous input), else in
    the output type after it."""
    return _linear(_options(arch, allow_tf32, workers, plain=True), input, weight, bias)


def scaled_mm(input, mat2, scale_a, scale_b, bias=None, scale_result=None, out_dtype=None,
              use_fast_accum=False, *, arch="h200", workers=None):
    """``torch._scaled_mm`` (cuBLASLt FP8) as an H200 computes it: the wgmma chain
    (``use_fast_accum=True``) or K in chunks of 128 promoted into FP32 (the default), then
    scale_a * scale_b (tensor-wise, FP32) and the bias in the FP32 epilogue, then ``out_dtype``
    (float32, bfloat16 or float16)."""
    return _scaled_mm(_options(arch, None, workers, plain=True), input, mat2, scale_a, scale_b,
                      bias, scale_result, out_dtype, use_fast_accum)


def int_mm(input, mat2, *, arch="h200", workers=None):
    """``torch._int_mm`` (INT8 x INT8 -> INT32): exact sums, wrapping modulo 2**32."""
    return _int_mm(_options(arch, None, workers, plain=True), input, mat2)


_SPARSE_FMT = {torch.float16: "fp16", torch.bfloat16: "bf16", torch.float8_e4m3fn: "e4m3",
               torch.float8_e5m2: "e5m2"}
_OUT_FMT = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}
#: ``segment_k="auto"`` turns cuSPARSELt's segment-K on from this logical K (fitted on the
#: captured shapes; cuSPARSELt's own choice also depends on M, N and its heuristics).
SEGMENT_K_FROM = 2048


def sparse_mm(input, mat2, *, out_dtype=None, segment_k="auto", prune=False):
    """cuSPARSELt's 2:4 sparse GEMM: ``torch.mm(to_sparse_semi_structured(input), mat2)`` and
    ``torch._cslt_sparse_mm`` on an H200 (:func:`golden.sparse.cslt_mm`).

    Parameters
    ----------
    input : tensor (M, K), float16, bfloat16, float8_e4m3fn or float8_e5m2
        The dense A, 2:4 sparse along K (at most 2 entries other than +0 in each group of 4);
        ``prune=True`` prunes it first (:func:`prune_24`).  PyTorch builds a
        ``SparseSemiStructuredTensor`` on CUDA only, so here A stays dense.
    mat2 : tensor (K, N), the same dtype (FP8: either FP8 type)
    out_dtype : None or a dtype
        FP16/BF16: None (the input dtype, ``torch.mm``'s result); FP8: float32, bfloat16 or
        float16 (``_cslt_sparse_mm(..., out_dtype=...)``), required.
    segment_k : "auto", bool or int
        cuSPARSELt's ``segment_k_on`` kernels cut K into slices added in FP32 (the kernel name
        says which ran).  "auto": on from K >= 2048 (how the captured shapes ran); True: on with
        the fitted slice (:data:`golden.sparse.SEGMENT_K`); False: off; an int: that slice.
    """
    device = _enter(_Opts(plain=True), input, mat2)
    fa, fb = _SPARSE_FMT.get(input.dtype), _SPARSE_FMT.get(mat2.dtype)
    if fa is None or fb is None or fb not in gsparse.SPARSE_IN_FORMATS[fa]:
        raise Unsupported(f"sparse_mm of {input.dtype} and {mat2.dtype} is not modelled (FP16, "
                          "BF16 or FP8 A with B of the same type; FP8 may mix E4M3 and E5M2)")
    if input.dim() != 2 or mat2.dim() != 2:
        raise RuntimeError(f"sparse_mm: both arguments must be 2-D, not {input.dim()}-D and "
                           f"{mat2.dim()}-D")
    _shapes("sparse_mm", input, mat2)
    if out_dtype is None:
        if fa in ("e4m3", "e5m2"):
            raise Unsupported("sparse_mm of FP8 needs out_dtype (float32, bfloat16 or float16); "
                              "an FP8 output is not modelled")
        out_dtype = input.dtype
    if out_dtype not in _OUT_FMT:
        raise Unsupported(f"sparse_mm with out_dtype={out_dtype} is not modelled")
    if fa in ("fp16", "bf16") and out_dtype not in (input.dtype,):
        raise Unsupported(f"sparse_mm of {input.dtype} returns {input.dtype} "
                          "(cuSPARSELt takes out_dtype for FP8 and INT8 only)")
    k = input.shape[1]
    if segment_k == "auto":
        segment_k = k >= SEGMENT_K_FROM
    a = _to_numpy(input)
    a_bits = a.view(np.uint16 if a.itemsize == 2 else np.uint8)
    try:
        sp = gsparse.compress(a_bits, fa, prune=prune)
    except ValueError as e:
        raise ValueError(f"sparse_mm: {e}") from None
    b = _to_numpy(mat2)
    bits = gsparse.cslt_mm(sp, b.view(np.uint16 if b.itemsize == 2 else np.uint8), in_fmt=fa,
                           b_fmt=fb, out_fmt=_OUT_FMT[out_dtype], segment_k=segment_k)
    if out_dtype == torch.float32:
        t = torch.from_numpy(bits.view(np.float32))
    else:
        t = torch.from_numpy(bits.view(np.int16)).view(out_dtype)
    return t.to(device) if device.type != "cpu" else t


def prune_24(input):
    """A 2:4 sparse copy of ``input`` (..., K) along its last axis: the two largest magnitudes
    of each group of 4 kept (:func:`golden.sparse.prune_24`: ties to the lower index, NaN
    kept), the others +0."""
    fmt = _SPARSE_FMT.get(input.dtype)
    if fmt is None:
        raise Unsupported(f"prune_24 takes float16, bfloat16 or FP8 tensors, not {input.dtype}")
    out = gsparse.prune_24(_to_numpy(input))
    bits = out.view(np.uint16 if out.itemsize == 2 else np.uint8)
    raw = torch.from_numpy(np.ascontiguousarray(bits).view(np.int16 if out.itemsize == 2 else np.uint8))
    return raw.view(input.dtype).to(input.device)
