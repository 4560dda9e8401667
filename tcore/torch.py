"""PyTorch's GEMMs on CPU tensors with the bits an H200 returns (``docs/torch.md``).

``with tcore.torch.emulate():`` is a :class:`torch.overrides.TorchFunctionMode` under which
``torch.mm``, ``torch.matmul`` (and ``@``), ``torch.bmm``, ``torch.addmm``, ``torch.baddbmm``,
``torch.nn.functional.linear`` (so ``nn.Linear``), ``torch._scaled_mm`` and ``torch._int_mm``
on CPU tensors return what cuBLAS / cuBLASLt return on an H200: FP16 and BF16 (FP32 or
FP16/BF16 output), FP32 as TF32 where TF32 is allowed, FP8 E4M3/E5M2 with tensor-wise or
row-wise scales, INT8, with cuBLAS's split-K kernels and epilogues as measured.  The same
operations are plain functions here (:func:`mm`, :func:`matmul`, ...), and :func:`sparse_mm`
is cuSPARSELt's 2:4 sparse GEMM (``torch.mm(to_sparse_semi_structured(A), B)``), which PyTorch
cannot build on the CPU.

Every product goes through the golden model: :func:`tcore.golden.matmul` (the K chain of the tensor
core's block fused dot-add, ``promote=128`` for ``_scaled_mm``'s default accumulation, and its
library keywords: ``split_k``, ``alpha``/``beta``/``c``, ``bias``, ``scale_a``/``scale_b``,
``out_dtype``, whose rules are :mod:`tcore.golden.cublas`) and :func:`tcore.golden.sparse.cslt_mm`.  What
this module adds is the library around it:

* which kernel cuBLAS ran: the split count of its split-K kernels, per GEMM (``split_k`` of
  :class:`emulate`: ``"auto"``, the counts measured on the captured shapes, or what
  :func:`kernels_from_profile` read from a GPU run's profile);
* which epilogue PyTorch asks for: ``addmm`` with beta != 1 (one FMA), with beta = 1 (the
  product rounded to the output type, then C added), a 1-D bias (``linear``, the cuBLASLt bias
  epilogue), ``_scaled_mm``'s tensor-wise or row-wise scales and bias.  Combinations the
  captures do not pin down (split-K with beta = 1, cuBLASLt's bias epilogue with alpha != 1,
  TF32 split-K, block-wise scales: :class:`tcore.golden.cublas.NotModelled` from the golden model)
  raise :class:`Unsupported`.

Under the mode, tensors on another device (a real GPU, ``meta``) go to PyTorch untouched.  A
GEMM on CPU tensors that the model does not cover (FP32 without TF32, float64, integers other
than ``_int_mm``, FP8 in ``mm``, block-wise FP8 scales, FP8 output, a vector dot product, inputs
that require grad with grad mode on) and the GEMM-like operations that it does not model
(``einsum``, ``mv``, convolutions, ``scaled_dot_product_attention``, ... :data:`UNMODELLED`)
raise :class:`Unsupported`; with ``emulate(strict=False)`` PyTorch computes them on the CPU
instead.  The plain functions take tensors on any device (they compute on a CPU copy and return
on the input's device) and always raise :class:`Unsupported` for what they do not cover; their
results carry no autograd history.
"""

from __future__ import annotations

import numbers
import re
from dataclasses import dataclass, replace

import ml_dtypes
import numpy as np
import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from tcore import golden
from tcore.numerics.formats import INPUT_FORMATS, format_of, values_dtype
from tcore.golden import cublas as gcublas
from tcore.golden import sparse as gsparse

__all__ = ["emulate", "Unsupported", "ARCHS", "UNMODELLED", "mm", "matmul", "bmm", "addmm",
           "baddbmm", "linear", "scaled_mm", "int_mm", "sparse_mm", "prune_24", "tf32_allowed",
           "SEGMENT_K_FROM", "GemmKernel", "kernels_from_profile", "split_counts"]

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
    split_k: object = "auto"       # "auto", an int, a dict {(M, K, N): S} or a callable


def _split_option(split_k):
    """``split_k`` checked, a profile's records turned into their dict."""
    if isinstance(split_k, str):
        if split_k != "auto":
            raise ValueError(f"split_k must be 'auto', an int, a dict {{(M, K, N): S}} or a "
                             f"callable (M, K, N, dtype) -> S, not {split_k!r}")
        return split_k
    if isinstance(split_k, bool):
        raise ValueError(f"split_k must be 'auto', an int, a dict or a callable, not {split_k!r}")
    if isinstance(split_k, numbers.Integral):
        if split_k < 1:
            raise ValueError(f"split_k must be at least 1 (1 = no split), not {split_k}")
        return int(split_k)
    if isinstance(split_k, (list, tuple)) and all(isinstance(r, GemmKernel) for r in split_k):
        return split_counts(split_k)
    if isinstance(split_k, dict):
        for key, val in split_k.items():
            if (not isinstance(key, tuple) or len(key) != 3 or isinstance(val, bool)
                    or not isinstance(val, numbers.Integral) or val < 1):
                raise ValueError(f"split_k dict entries are (M, K, N): S with S >= 1, not "
                                 f"{key!r}: {val!r}")
        return dict(split_k)
    if callable(split_k):
        return split_k
    raise ValueError(f"split_k must be 'auto', an int, a dict {{(M, K, N): S}}, a callable "
                     f"(M, K, N, dtype) -> S or kernels_from_profile's records, not {split_k!r}")


def _options(arch, allow_tf32, workers, *, strict=True, plain=False, split_k="auto") -> _Opts:
    key = str(arch).lower()
    if key not in ARCHS:
        raise ValueError(f"arch must be one of {', '.join(ARCHS)}, not {arch!r} (the cuBLAS rules "
                         "are measured on an H200; other generations are not modelled here)")
    if allow_tf32 not in (None, True, False):
        raise ValueError(f"allow_tf32 must be None (read PyTorch's setting), True or False, "
                         f"not {allow_tf32!r}")
    if workers is not None and int(workers) < 1:
        raise ValueError(f"workers must be at least 1, not {workers!r}")
    return _Opts(ARCHS[key], allow_tf32, bool(strict), workers, plain, _split_option(split_k))


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


def _tensor(d: np.ndarray) -> torch.Tensor:
    """A result array (float32, float16, bfloat16 or int32) as a tensor, bits unchanged."""
    d = np.ascontiguousarray(d)
    if d.dtype == ml_dtypes.bfloat16:
        return torch.from_numpy(d.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(d)


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


def _split_count(opts: _Opts, key, dtype, auto_splits: bool) -> int:
    """The split count of one GEMM of PyTorch shape ``key`` = (M, K, N) under ``opts``;
    ``auto_splits`` False (batched GEMMs, a 1-D right operand: cuBLAS's gemv) makes "auto" 1.
    A TF32 shape "auto" would split gets its count, which golden refuses (not captured)."""
    m, k, n = key
    rule = opts.split_k
    if isinstance(rule, dict):
        rule = rule.get(tuple(int(v) for v in key), "auto")
    if rule == "auto":
        # The measured heuristic covers FP16/BF16 GEMMs of one matrix (torch_splitk/README).
        return gcublas.split_k_auto(m, k, n) if auto_splits else 1
    s = rule(m, k, n, dtype) if callable(rule) else rule
    if isinstance(s, bool) or not isinstance(s, numbers.Integral) or s < 1:
        raise ValueError(f"split_k gave {s!r} for {m}x{k}x{n}: the split count must be an int >= 1")
    return int(s)


def _check_inputs(opts: _Opts, a: torch.Tensor, b: torch.Tensor, what: str):
    """Refuse what cuBLAS's FP16 / BF16 / TF32 GEMMs do not take (FP8, integers, FP32 without
    TF32, mixed dtypes)."""
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


def _library(opts: _Opts, what: str, a: np.ndarray, b: np.ndarray, c=None, **kw) -> np.ndarray:
    """:func:`tcore.golden.matmul`'s library GEMM: what the captures do not pin down
    (:class:`tcore.golden.cublas.NotModelled`) is :class:`Unsupported`; another ValueError (a bad
    argument) stays one, naming the operation."""
    try:
        return golden.matmul(a, b, c, arch=opts.arch, workers=opts.workers, **kw)
    except gcublas.NotModelled as e:
        _unsupported(opts, f"{what}: {e}")
    except ValueError as e:
        raise ValueError(f"{what}: {e}") from None


def _gemm(opts: _Opts, a: torch.Tensor, b: torch.Tensor, what: str, out_dtype, key=None, *,
          vector=False, c=None, alpha=None, beta=None, bias=None) -> np.ndarray:
    """One cuBLAS GEMM of FP16, BF16 or FP32 (TF32) tensors through golden.matmul: the K chain
    from zero (split-K where the split count says so), the epilogue of golden.cublas, the
    result in ``out_dtype``.  ``key`` is the (M, K, N) the split count is chosen by (PyTorch's
    own shape, batch folded into M where PyTorch folds it); None: a's and b's last two axes,
    batched when either has batch axes.  ``vector``: b was a 1-D operand (``mv``, which cuBLAS
    runs as gemv, not a split-K GEMM): "auto" does not split it."""
    _check_inputs(opts, a, b, what)
    batched = False
    if key is None:
        key = (a.shape[-2], a.shape[-1], b.shape[-1])
        batched = a.dim() > 2 or b.dim() > 2
    split = _split_count(opts, key, a.dtype, not (batched or vector))
    return _library(opts, what, _to_numpy(a), _to_numpy(b), c, split_k=split, alpha=alpha,
                    beta=beta, bias=bias, out_dtype=_NP[out_dtype])


def _out_dtype(opts, in_dtype, out_dtype, what):
    if out_dtype is None or out_dtype == in_dtype:
        return in_dtype
    if out_dtype == torch.float32 and in_dtype in (torch.float16, torch.bfloat16):
        return out_dtype
    _unsupported(opts, f"{what} with out_dtype={out_dtype} on {in_dtype} inputs is not modelled "
                       "(out_dtype is the input dtype, or float32 for FP16/BF16)")


def _finish(d, device, out=None):
    t = _tensor(d)
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
    return _finish(_gemm(opts, input, mat2, "mm", dtype), device, out)


def _bmm(opts, input, mat2, out_dtype=None, *, out=None):
    device = _enter(opts, input, mat2, out)
    _shapes("bmm", input, mat2, ndim=3)
    if input.shape[0] != mat2.shape[0]:
        raise RuntimeError(f"bmm: batch sizes {input.shape[0]} and {mat2.shape[0]} differ")
    dtype = _out_dtype(opts, input.dtype, out_dtype, "bmm")
    return _finish(_gemm(opts, input, mat2, "bmm", dtype, None if input.shape[0] > 1 else
                         (input.shape[1], input.shape[2], mat2.shape[2])), device, out)


def _matmul_gemm(opts, input, other, what="matmul", **epi):
    """torch.matmul's shapes (vectors made matrices, batch broadcast) around :func:`_gemm`;
    a batched left operand times a matrix is one GEMM with the batch folded into M, as
    at::matmul runs it."""
    if input.dim() == 0 or other.dim() == 0:
        raise RuntimeError("both arguments to matmul need to be at least 1D")
    if input.dim() == 1 and other.dim() == 1:
        _unsupported(opts, "matmul of two vectors is torch.dot, which cuBLAS computes with "
                           "its dot routine, not a GEMM; not modelled")
    a = input.unsqueeze(0) if input.dim() == 1 else input
    b = other.unsqueeze(-1) if other.dim() == 1 else other
    _shapes(what, a, b)
    key = None
    if b.dim() == 2:
        key = (int(np.prod(a.shape[:-1])), a.shape[-1], b.shape[-1])
    d = _gemm(opts, a, b, what, input.dtype, key, vector=other.dim() == 1, **epi)
    if input.dim() == 1:
        d = d[..., 0, :]
    if other.dim() == 1:
        d = d[..., 0]
    return d


def _matmul(opts, input, other, *, out=None):
    device = _enter(opts, input, other, out)
    return _finish(_matmul_gemm(opts, input, other), device, out)


def _rmatmul(opts, self, other):
    return _matmul(opts, other, self)


def _addend(opts, c, in_dtype, what):
    if not isinstance(c, torch.Tensor):
        raise RuntimeError(f"{what}: input must be a tensor, not {type(c).__name__}")
    if c.dtype != in_dtype and not (c.dtype == torch.float32 and in_dtype in (torch.float16,
                                                                               torch.bfloat16)):
        _unsupported(opts, f"{what}: an addend of {c.dtype} with {in_dtype} inputs is not modelled")
    return _to_numpy(c)


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
    cn = _addend(opts, c, m1.dtype, what)
    shape = tuple(m1.shape[:-1]) + (m2.shape[-1],)
    try:
        np.broadcast_shapes(cn.shape, shape)
    except ValueError:
        raise RuntimeError(f"{what}: input of shape {tuple(c.shape)} does not broadcast to "
                           f"{shape}") from None
    alpha, beta = float(alpha), float(beta)
    # A batch of one is a plain GEMM (PyTorch calls gemm, not the batched routine).
    key = None if ndim == 2 or m1.shape[0] > 1 else (m1.shape[1], m1.shape[2], m2.shape[2])
    if ndim == 2 and beta == 1 and c.dim() == 1 and c.shape[0] == m2.shape[1] and c.is_contiguous():
        # at::addmm hands a 1-D input with beta = 1 to cuBLASLt's bias epilogue (golden
        # refuses it with alpha != 1: not in the captures).
        d = _gemm(opts, m1, m2, what, dtype, key, bias=cn, alpha=alpha)
    else:
        d = _gemm(opts, m1, m2, what, dtype, key, c=np.broadcast_to(cn, shape), alpha=alpha,
                  beta=beta)
    return _finish(d, device, out)


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
        return _finish(_matmul_gemm(opts, input, w_t, "linear"), device)
    if bias.dtype != input.dtype:
        raise RuntimeError(f"linear: bias is {bias.dtype}, input {input.dtype}")
    # at::linear: a 2-D input, or a contiguous one (3-D, or any with a 1-D bias), is one addmm
    # (batch folded into M): a 1-D bias goes to cuBLASLt's bias epilogue, another is addmm's
    # matrix input with beta = 1.  Otherwise matmul, then the bias added in the output type.
    fused = input.dim() == 2 or (input.is_contiguous() and (input.dim() == 3 or bias.dim() == 1))
    bn = _to_numpy(bias)
    if fused:
        flat = input.reshape(-1, input.shape[-1])
        _shapes("linear", flat, w_t)
        shape = (flat.shape[0], weight.shape[0])
        epi = (dict(bias=bn) if bias.dim() == 1 else
               dict(c=np.broadcast_to(bn, shape), alpha=1, beta=1))
        d = _gemm(opts, flat, w_t, "linear", input.dtype, **epi)
        return _finish(d.reshape(tuple(input.shape[:-1]) + (weight.shape[0],)), device)
    y = _matmul_gemm(opts, input, w_t, "linear")
    # The elementwise add: the output-type product plus the bias in FP32, rounded again
    # (golden.cublas's beta = 1 epilogue on the rounded product).
    d = gcublas.epilogue(y.astype(np.float32), y.dtype, c=np.broadcast_to(bn, y.shape), beta=1)
    return _finish(d, device)


def _scaled_mm(opts, input, mat2, scale_a, scale_b, bias=None, scale_result=None,
               out_dtype=None, use_fast_accum=False, *, out=None):
    device = _enter(opts, input, mat2, scale_a, scale_b, bias, scale_result, out)
    what = "_scaled_mm"
    if input.dtype not in _FP8 or mat2.dtype not in _FP8:
        _unsupported(opts, f"{what} of {input.dtype} and {mat2.dtype}: FP8 E4M3/E5M2 inputs only")
    if input.dtype == mat2.dtype == torch.float8_e5m2:
        _unsupported(opts, f"{what} of two E5M2 matrices: cuBLASLt has no E5M2 x E5M2 GEMM")
    _shapes(what, input, mat2, ndim=2)
    for name, sc in (("scale_a", scale_a), ("scale_b", scale_b)):     # as torch._scaled_mm
        if not isinstance(sc, torch.Tensor) or sc.dtype != torch.float32:
            _unsupported(opts, f"{what}: {name} must be a float32 tensor, not "
                               f"{getattr(sc, 'dtype', type(sc).__name__)}")
    rowwise = scale_a.numel() != 1          # golden.cublas.fp8_scales checks the shapes
    if scale_result is not None:
        _unsupported(opts, f"{what}: scale_result (an FP8 output) is not modelled")
    dtype = input.dtype if out_dtype is None else out_dtype
    if dtype not in (torch.float32, torch.bfloat16, torch.float16):
        _unsupported(opts, f"{what} with out_dtype={dtype} is not modelled (float32, bfloat16, "
                           "float16)")
    if rowwise and dtype == torch.float16:
        _unsupported(opts, f"{what} with row-wise scales and out_dtype=torch.float16 is not in "
                           "the captures (bfloat16 and float32 are)")
    bn = None
    if bias is not None:
        if dtype == torch.float32:
            raise RuntimeError("Bias is not supported when out_dtype is set to Float32")
        if bias.dtype not in (torch.bfloat16, torch.float16):
            _unsupported(opts, f"{what}: a {bias.dtype} bias is not modelled (bfloat16, float16)")
        if tuple(bias.shape) != (mat2.shape[1],):
            raise RuntimeError(f"{what}: bias must be a vector of {mat2.shape[1]} values, not "
                               f"shape {tuple(bias.shape)}")
        bn = _to_numpy(bias)
    d = _library(opts, what, _to_numpy(input), _to_numpy(mat2),
                 promote=None if use_fast_accum else 128, scale_a=_to_numpy(scale_a),
                 scale_b=_to_numpy(scale_b), bias=bn, out_dtype=_NP[dtype])
    return _finish(d, device, out)


def _int_mm(opts, input, mat2, *, out=None):
    device = _enter(opts, input, mat2, out)
    _shapes("_int_mm", input, mat2, ndim=2)
    if input.dtype != torch.int8 or mat2.dtype != torch.int8:
        _unsupported(opts, f"_int_mm of {input.dtype} and {mat2.dtype}: int8 inputs only")
    d = golden.matmul(_to_numpy(input), _to_numpy(mat2), arch=opts.arch, workers=opts.workers)
    return _finish(d, device, out)


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


# -- what a GPU run picked: kernels from a torch.profiler trace -----------------------------------

@dataclass(frozen=True)
class GemmKernel:
    """One GEMM of a GPU run, as its profile shows it.

    ``op`` the PyTorch operator that launched it (``aten::mm``, ``aten::addmm``, ...; None if
    the trace does not say), ``shape`` its (M, K, N) (None without ``record_shapes``),
    ``kernel`` / ``grid`` / ``block`` the cuBLAS kernel, ``split_k`` its split count (1: no
    split), ``beta`` the kernel's C handling (``"zero"``: no C, ``"one"``: beta = 1,
    ``"scaled"``: beta != 1), ``bias`` / ``rowwise`` whether it ran the bias epilogue / FP8
    row-wise scaling, ``accumulation`` for FP8 kernels ``"fast"`` or ``"promote128"`` (the
    ``algo2`` kernels: ``use_fast_accum=False``), ``reduce`` the split-K reduce kernel.
    """

    op: str | None
    shape: tuple | None
    kernel: str
    grid: tuple
    block: tuple
    split_k: int
    beta: str
    bias: bool
    rowwise: bool
    accumulation: str | None
    reduce: str | None = None


_NVJET = re.compile(r"nvjet_sm\d+_(?P<types>[a-z]+)_(?P<tm>\d+)x(?P<tn>\d+)_(?P<tk>\d+)x\d+_"
                    r"(?P<cm>\d+)x(?P<cn>\d+)_[a-z]+_(?P<flags>.*)_[NT]+$")


#: Where a GEMM operator's two factors stand among its arguments (the trace's "Input Dims"):
#: ``addmm(input, mat1, mat2, ...)`` and ``baddbmm`` after their C; ``linear(input, weight,
#: bias)`` with the weight (N, K) transposed.
_FACTORS = {"aten::mm": (0, 1), "aten::bmm": (0, 1), "aten::matmul": (0, 1),
            "aten::_scaled_mm": (0, 1), "aten::addmm": (1, 2), "aten::baddbmm": (1, 2),
            "aten::linear": (0, 1)}


def _gemm_dims(op, dims):
    """(M, K, N) of a GEMM operator from the trace's "Input Dims", its factors picked by the
    operator's argument positions (:data:`_FACTORS`); batch axes of a batched left factor
    times a matrix fold into M (as at::matmul and at::linear run them), those of ``bmm`` /
    ``baddbmm`` are left out (the mode keys their GEMMs by the last two axes).  None for
    another operator or dims that are not two such factors."""
    where = _FACTORS.get(op)
    if where is None or len(dims) <= max(where):
        return None
    x, y = dims[where[0]], dims[where[1]]
    if not all(isinstance(d, list) and len(d) >= 2 for d in (x, y)):
        return None
    if op == "aten::linear":
        if len(y) != 2:
            return None
        y = [y[1], y[0]]                     # weight (N, K): the factor is its transpose
    if x[-1] != y[-2]:
        return None
    m = int(np.prod(x[:-1])) if len(y) == 2 else int(x[-2])
    return (m, int(x[-1]), int(y[-1]))


def _split_from_grid(info, grid, shape):
    """The split count of a splitK kernel: its CTAs over its output tiles counted in whole
    clusters.  Which of PyTorch's M and N is cuBLAS's m depends on the layouts, so both are
    tried; where both divide, grid.y (the split axis whenever one CTA row covers the tiles)
    decides.  Without a shape: grid.y."""
    ctas = int(np.prod(grid))
    found = []
    if shape is not None:
        m, _, n = shape
        tm, tn, cm, cn = (int(info[k]) for k in ("tm", "tn", "cm", "cn"))
        for dm, dn in ((n, m), (m, n)):
            tiles = (-(-(-(-dm // tm)) // cm) * cm) * (-(-(-(-dn // tn)) // cn) * cn)
            if ctas % tiles == 0:
                found.append(ctas // tiles)
    if not found or int(grid[1]) in found:
        return int(grid[1])
    return found[0]


def _cublaslt_log(text):
    """{(M, K, N): numSplitsK} from cuBLASLt's trace log (``CUBLASLT_LOG_LEVEL=2``): every
    ``cublasLtMatmul`` line with ``numSplitsK=``, its shape from ``Ddesc`` (rows = N, cols = M
    of PyTorch's row-major result) and ``Adesc`` (K: rows with ``transA=OP_T``, else cols)."""
    out = {}
    for line in str(text).splitlines():
        if "cublasLtMatmul" not in line or "numSplitsK=" not in line:
            continue
        s = int(re.search(r"numSplitsK=(\d+)", line).group(1))
        d = re.search(r"Ddesc=\[[^\]]*?rows=(\d+) cols=(\d+)", line)
        a = re.search(r"Adesc=\[[^\]]*?rows=(\d+) cols=(\d+)", line)
        if d is None or a is None:
            continue
        k = int(a.group(1)) if "transA=OP_T" in line else int(a.group(2))
        out[(int(d.group(2)), k, int(d.group(1)))] = s
    return out


def kernels_from_profile(trace, *, cublaslt_log=None) -> list[GemmKernel]:
    """The cuBLAS / cuBLASLt GEMM kernels of a GPU run, in launch order.

    ``trace``: a ``torch.profiler.profile`` (run with ``record_shapes=True`` for the shapes),
    the path of its ``export_chrome_trace`` JSON, or that JSON loaded.  Kernels are the trace's
    ``nvjet_*`` events; each is tied to the PyTorch operator that launched it by its "External
    id", and its shape comes from the operator's "Input Dims".  A splitK kernel's split count is
    its CTA count over its output tiles (in whole clusters), unless ``cublaslt_log`` (the text
    of cuBLASLt's ``CUBLASLT_LOG_LEVEL=2`` log) gives that shape's ``numSplitsK``.

    Hand the records to ``emulate(split_k=records)`` (or :func:`split_counts`) to replay the
    run's split counts on the CPU.
    """
    import json
    import os
    import tempfile
    if hasattr(trace, "export_chrome_trace"):
        fd, path = tempfile.mkstemp(suffix=".json")
        os.close(fd)
        try:
            trace.export_chrome_trace(path)
            with open(path) as f:
                trace = json.load(f)
        finally:
            os.unlink(path)
    elif isinstance(trace, (str, os.PathLike)):
        with open(trace) as f:
            trace = json.load(f)
    events = trace.get("traceEvents", []) if isinstance(trace, dict) else list(trace)
    logged = _cublaslt_log(cublaslt_log) if cublaslt_log is not None else {}
    ops = {}
    for e in events:
        args = e.get("args") or {}
        if e.get("cat") == "cpu_op" and "External id" in args:
            ops[args["External id"]] = (e.get("name"),
                                        _gemm_dims(e.get("name"), args.get("Input Dims") or []))
    out = []
    for e in events:
        if e.get("cat") != "kernel":
            continue
        name, args = e.get("name", ""), e.get("args") or {}
        if "splitKreduce" in name and out and out[-1].split_k > 1 and out[-1].reduce is None:
            out[-1] = replace(out[-1], reduce=name)
            continue
        info = _NVJET.search(name)
        if info is None:
            continue
        op, shape = ops.get(args.get("External id"), (None, None))
        flags = info["flags"].split("_")
        grid, block = tuple(args.get("grid", (1, 1, 1))), tuple(args.get("block", (1, 1, 1)))
        split = 1
        if "splitK" in flags:
            split = logged.get(shape) or _split_from_grid(info, grid, shape)
        fp8 = info["types"].startswith("qq")
        out.append(GemmKernel(
            op, shape, name, grid, block, split,
            "one" if "badd" in flags else "scaled" if "bx" in flags else "zero",
            "bias" in flags, "ovscale" in flags,
            ("promote128" if "algo2" in flags else "fast") if fp8 else None))
    return out


def split_counts(kernels) -> dict:
    """``{(M, K, N): S}`` of :func:`kernels_from_profile`'s records (those with a shape, FP8
    ones left out: ``_scaled_mm`` is not split); ValueError where one shape ran two counts."""
    out = {}
    for r in kernels:
        if r.shape is None or r.accumulation is not None:
            continue
        if out.get(r.shape, r.split_k) != r.split_k:
            raise ValueError(f"the profile ran {r.shape[0]}x{r.shape[1]}x{r.shape[2]} with split "
                             f"counts {out[r.shape]} and {r.split_k}: pass split_k a callable")
        out[r.shape] = r.split_k
    return out


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
    split_k : "auto", int, dict, callable or kernels_from_profile's records
        The split count S of cuBLAS's split-K kernels per GEMM (1 = no split; FP16/BF16):
        an int for every GEMM; a dict ``{(M, K, N): S}`` (shapes not in it: "auto"); a
        callable ``(M, K, N, dtype) -> S``; the records of :func:`kernels_from_profile` (what
        a GPU run picked); ``"auto"``: the counts cuBLAS picked on the captured shapes with
        PyTorch's default workspace (:func:`tcore.golden.cublas.split_k_auto`: S = max(1,
        floor(3K / 4096)) for outputs up to 64 x 64).  Above 64 x 64 outputs the split count
        is NOT measured (no capture there has K > 2048): "auto" gives 1 there, a chosen
        default; profile the GPU run and pass ``split_k`` to be sure.  "auto" also gives 1 to
        batched GEMMs and to a 1-D right operand (``mv``: cuBLAS runs gemv there, not
        captured); an int, dict or callable applies as given.  (M, K, N) is PyTorch's shape of
        the GEMM, a batch folded into M where at::matmul / at::linear fold it.  cuBLAS's
        heuristic is its own: profile the GPU run where the shapes are not the captured ones.
        ``_scaled_mm`` is never split (no capture ran a split-K FP8 kernel).

    Example
    -------
    >>> import torch, tcore.torch
    >>> a = torch.tensor([[1, 2**-12, 2**-12, 2**-12]], dtype=torch.float16)
    >>> with tcore.torch.emulate():
    ...     d = torch.mm(a, a.T, out_dtype=torch.float32)
    >>> float(d)            # 1 + 3 * 2**-24 truncated toward zero, as the H200 does
    1.0000001192092896
    """

    def __init__(self, arch="h200", *, allow_tf32=None, strict=True, workers=None,
                 split_k="auto"):
        super().__init__()
        self.options = _options(arch, allow_tf32, workers, strict=strict, split_k=split_k)

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

def mm(input, mat2, out_dtype=None, *, arch="h200", allow_tf32=None, workers=None,
       split_k="auto"):
    """``torch.mm(input, mat2, out_dtype)`` as an H200 computes it (cuBLAS; ``split_k`` as in
    :class:`emulate`)."""
    return _mm(_options(arch, allow_tf32, workers, plain=True, split_k=split_k), input, mat2,
               out_dtype)


def bmm(input, mat2, out_dtype=None, *, arch="h200", allow_tf32=None, workers=None,
        split_k="auto"):
    """``torch.bmm(input, mat2, out_dtype)`` as an H200 computes it."""
    return _bmm(_options(arch, allow_tf32, workers, plain=True, split_k=split_k), input, mat2,
                out_dtype)


def matmul(input, other, *, arch="h200", allow_tf32=None, workers=None, split_k="auto"):
    """``torch.matmul(input, other)`` (``input @ other``) as an H200 computes it."""
    return _matmul(_options(arch, allow_tf32, workers, plain=True, split_k=split_k), input, other)


def addmm(input, mat1, mat2, out_dtype=None, *, beta=1, alpha=1, arch="h200", allow_tf32=None,
          workers=None, split_k="auto"):
    """``torch.addmm(input, mat1, mat2, beta=beta, alpha=alpha)``: the FP32 accumulator of
    mat1 @ mat2, then cuBLAS's epilogue as measured (:mod:`tcore.golden.cublas`: beta != 1 one FMA,
    beta = 1 the product rounded to the output type first, a 1-D input with alpha = beta = 1
    the bias epilogue)."""
    return _addmm(_options(arch, allow_tf32, workers, plain=True, split_k=split_k), input, mat1,
                  mat2, out_dtype, beta=beta, alpha=alpha)


def baddbmm(input, batch1, batch2, out_dtype=None, *, beta=1, alpha=1, arch="h200",
            allow_tf32=None, workers=None, split_k="auto"):
    """``torch.baddbmm``: :func:`addmm` per batch entry."""
    return _baddbmm(_options(arch, allow_tf32, workers, plain=True, split_k=split_k), input,
                    batch1, batch2, out_dtype, beta=beta, alpha=alpha)


def linear(input, weight, bias=None, *, arch="h200", allow_tf32=None, workers=None,
           split_k="auto"):
    """``torch.nn.functional.linear(input, weight, bias)``: input @ weight.T, a 1-D bias in
    cuBLASLt's bias epilogue (RNE_out(RNE32(acc + bias))) where ``at::linear`` fuses it (2-D or
    contiguous input), else added in the output type after it."""
    return _linear(_options(arch, allow_tf32, workers, plain=True, split_k=split_k), input,
                   weight, bias)


def scaled_mm(input, mat2, scale_a, scale_b, bias=None, scale_result=None, out_dtype=None,
              use_fast_accum=False, *, arch="h200", workers=None):
    """``torch._scaled_mm`` (cuBLASLt FP8) as an H200 computes it: the wgmma chain
    (``use_fast_accum=True``) or K in chunks of 128 promoted into FP32 (the default), then the
    scales as measured (tensor-wise: acc * RNE32(scale_a * scale_b); row-wise, scale_a (M, 1)
    and scale_b (1, N): (acc * scale_b) * scale_a, each product rounded to FP32), the bias
    added in FP32, then ``out_dtype`` (float32, bfloat16 or float16)."""
    return _scaled_mm(_options(arch, None, workers, plain=True), input, mat2, scale_a, scale_b,
                      bias, scale_result, out_dtype, use_fast_accum)


def int_mm(input, mat2, *, arch="h200", workers=None):
    """``torch._int_mm`` (INT8 x INT8 -> INT32): exact sums, wrapping modulo 2**32."""
    return _int_mm(_options(arch, None, workers, plain=True), input, mat2)


#: Tensor dtypes -> formats of the table: the 2:4 sparse inputs, and cuSPARSELt's outputs.
_SPARSE_FMT = {t: f for t, dt in _NP.items()
               if (f := format_of(dt)) is not None and INPUT_FORMATS[f].sparse}
_OUT_FMT = {t: f for t, dt in _NP.items() for f in ("fp32", "fp16", "bf16")
            if values_dtype(f) == np.dtype(dt)}
#: ``segment_k="auto"`` turns cuSPARSELt's segment-K on from this logical K (fitted on the
#: captured shapes; cuSPARSELt's own choice also depends on M, N and its heuristics).
SEGMENT_K_FROM = 2048


def sparse_mm(input, mat2, *, out_dtype=None, segment_k="auto", prune=False):
    """cuSPARSELt's 2:4 sparse GEMM: ``torch.mm(to_sparse_semi_structured(input), mat2)`` and
    ``torch._cslt_sparse_mm`` on an H200 (:func:`tcore.golden.sparse.cslt_mm`).

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
        the fitted slice (:data:`tcore.golden.sparse.SEGMENT_K`); False: off; an int: that slice.
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
    of each group of 4 kept (:func:`tcore.golden.sparse.prune_24`: ties to the lower index, NaN
    kept), the others +0."""
    fmt = _SPARSE_FMT.get(input.dtype)
    if fmt is None:
        raise Unsupported(f"prune_24 takes float16, bfloat16 or FP8 tensors, not {input.dtype}")
    out = gsparse.prune_24(_to_numpy(input))
    bits = out.view(np.uint16 if out.itemsize == 2 else np.uint8)
    raw = torch.from_numpy(np.ascontiguousarray(bits).view(np.int16 if out.itemsize == 2 else np.uint8))
    return raw.view(input.dtype).to(input.device)
