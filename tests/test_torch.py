"""tcore.torch: PyTorch's GEMMs under ``tcore.torch.emulate()`` against the H200 captures.

Every expected value in the capture tests is the silicon's bits from ``tests/data/silicon/torch/``,
``torch_splitk/`` and ``sparse_torch/`` (or those bits rounded to FP16/BF16 by NumPy / ml_dtypes, where the README
says the library's FP16/BF16 output is that rounding).  The other tests check the dispatch
(methods, ``@``, ``nn.Linear``), the epilogue, and what is refused or handed back to PyTorch.

CI installs the torch extra (``.ci/run``), so there a missing torch is an error; elsewhere the
module is skipped and says how to install it.
"""

import importlib.util
import json
import os
import sys
from fractions import Fraction
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

try:
    import torch
except ImportError:
    if os.environ.get("CI"):
        raise
    pytest.skip("needs the torch extra: .venv/bin/pip install -e '.[torch]' (CI installs it)",
                allow_module_level=True)

import torch.nn.functional as F

from tcore import golden
import tcore.torch as tt
from tcore.golden import cublas as gcublas
from tcore.golden.silicon import load

from .conftest import SILICON

TORCH = SILICON / "torch"
SPARSE = SILICON / "sparse_torch"
TORCH_FILES = sorted(TORCH.glob("*.npz"))
SPARSE_FILES = sorted(SPARSE.glob("*.npz"))
EXAMPLE = Path(__file__).parent.parent / "examples" / "torch_forward.py"

_NP = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "e4m3": ml_dtypes.float8_e4m3fn}
_T = {"f16": torch.float16, "bf16": torch.bfloat16, "e4m3": torch.float8_e4m3fn}


def _tensor(bits, fmt):
    """Capture bits (uint16 / uint8) as a CPU tensor of the format."""
    raw = torch.from_numpy(np.ascontiguousarray(bits).view(np.int16 if bits.itemsize == 2 else np.uint8))
    return raw.view(_T[fmt])


def _bits(t):
    """A result tensor's bit patterns as a NumPy uint array."""
    raw = {1: torch.uint8, 2: torch.int16, 4: torch.int32}[t.element_size()]
    return t.contiguous().view(raw).numpy().view({1: np.uint8, 2: np.uint16, 4: np.uint32}[t.element_size()])


def _round(f32_bits, fmt):
    """FP32 silicon bits rounded to nearest-even FP16 / BF16 (NumPy, ml_dtypes)."""
    return f32_bits.view(np.float32).astype(_NP[fmt]).view(np.uint16)


def _col_major(t):
    return t.t().contiguous().t()


def _mismatches(got, want):
    return int((_bits(got) != want).sum())


# --- the PyTorch captures: every file, bit for bit, through the mode ----------------------------

def test_the_capture_files_are_here():
    assert len(TORCH_FILES) == 9 and len(SPARSE_FILES) == 9


@pytest.mark.parametrize("path", TORCH_FILES, ids=lambda p: p.stem)
def test_every_torch_capture_bit_exact_through_the_mode(path):
    data = load(path)
    kind = json.loads(str(data["meta"]))["kind"]
    fmt = {"torch_f16": "f16", "torch_bf16": "bf16", "torch_fp8": "e4m3"}[kind]
    a, b = _tensor(data["a"], fmt), _tensor(data["b"], fmt)
    c = torch.from_numpy(data["c"].view(np.float32))
    checked = 0
    # The nows files ran with CUBLAS_WORKSPACE_CONFIG=:0:0: cuBLAS had no workspace to split K.
    nows = ":0:0" in json.loads(str(data["meta"])).get("settings", "")
    with torch.inference_mode(), tt.emulate(split_k=1 if nows else "auto"):
        if fmt in ("f16", "bf16"):
            want = data[f"d_{'f16' if fmt == 'f16' else 'bf16'}_f32"]
            want16 = _round(want, fmt)
            # torch.mm(a, b, out_dtype=torch.float32): the capture's own call.
            assert _mismatches(torch.mm(a, b, out_dtype=torch.float32), want) == 0
            assert _mismatches(torch.addmm(c, a, b, out_dtype=torch.float32), want) == 0
            assert _mismatches(torch.bmm(a[None], b[None], out_dtype=torch.float32), want[None]) == 0
            # The FP16/BF16 output: the FP32 result rounded once (the README's check).
            for got in (a @ b, torch.matmul(a, b), a.mm(b), torch.mm(a, b), F.linear(a, b.t()),
                        torch.linalg.matmul(a, b), torch.bmm(a[None], b[None])[0]):
                assert got.dtype == _T[fmt] and _mismatches(got, want16) == 0
            checked = want.size
        else:
            one = torch.tensor(1.0)
            bc = _col_major(b)            # cuBLASLt's FP8 layout: B column-major
            fast = torch._scaled_mm(a, bc, one, one, out_dtype=torch.float32, use_fast_accum=True)
            slow = torch._scaled_mm(a, bc, scale_a=one, scale_b=one, out_dtype=torch.float32)
            assert _mismatches(fast, data["d_e4m3_f32"]) == 0
            assert _mismatches(slow, data["d_e4m3_f32_p128"]) == 0
            bf = torch._scaled_mm(a, bc, one, one, out_dtype=torch.bfloat16)
            assert _mismatches(bf, _round(data["d_e4m3_f32_p128"], "bf16")) == 0
            checked = 2 * data["d_e4m3_f32"].size
    assert checked == sum(v.size for k, v in data.items() if k.startswith("d_"))


def test_the_torch_captures_are_591104_outputs():
    """The figure of README and docs/numerics.md: every output of the nine files."""
    total = sum(v.size for p in TORCH_FILES for k, v in load(p).items() if k.startswith("d_"))
    assert total == 591_104


# --- 2:4 sparse (cuSPARSELt) and the dense references of the sparse captures ---------------------

def test_to_sparse_semi_structured_needs_cuda():
    """Why sparse_mm takes the dense pruned A: PyTorch builds the sparse tensor on CUDA only."""
    a = torch.tensor([[1.0, 0, 2, 0] * 8] * 32, dtype=torch.float16)
    with pytest.raises(RuntimeError, match="Only CUDA tensors"):
        torch.sparse.to_sparse_semi_structured(a)


def _sparse_outputs(key, fmt):
    """The out_dtype of a sparse capture key (None: the input's)."""
    if fmt != "e4m3":
        return None
    return torch.float32 if "_f32_" in key else torch.bfloat16


@pytest.mark.parametrize("path", SPARSE_FILES, ids=lambda p: p.stem)
def test_every_sparse_torch_capture_bit_exact(path):
    data = load(path)
    meta = json.loads(str(data["meta"]))
    fmt = meta["dtype"]
    a, b = _tensor(data["a"], fmt), _tensor(data["b"], fmt)
    keys = [k for k in data if k.startswith("d_cslt") or (k.startswith("d_e4m3_") and "_colB" in k)]
    assert keys
    for key in keys:
        seg = any("segment_k_on" in name for name in meta["kernels"][key])
        out_dtype = _sparse_outputs(key, fmt)
        # The automatic choice is the one cuSPARSELt made on every captured shape.
        assert (a.shape[1] >= tt.SEGMENT_K_FROM) == seg
        got = tt.sparse_mm(a, b, out_dtype=out_dtype)
        assert _mismatches(got, data[key]) == 0, key
        assert _mismatches(tt.sparse_mm(a, b, out_dtype=out_dtype, segment_k=seg), data[key]) == 0
        # Without the segment-K slices the segment-K captures miss.
        if seg:
            assert _mismatches(tt.sparse_mm(a, b, out_dtype=out_dtype, segment_k=False), data[key]) > 0


@pytest.mark.parametrize("path", SPARSE_FILES, ids=lambda p: p.stem)
def test_dense_references_of_the_sparse_captures_through_the_mode(path):
    """The sparse files' dense cuBLAS GEMMs (H200) on the same pruned A: bit-exact through the
    mode with its automatic split count, the split-K kernel's outputs included; with split_k=1
    (the plain chain) those miss (4,078 of 4,096 FP32 outputs, 77 of 4,096 FP16)."""
    data = load(path)
    meta = json.loads(str(data["meta"]))
    fmt = meta["dtype"]
    a, b = _tensor(data["a"], fmt), _tensor(data["b"], fmt)
    one = torch.tensor(1.0)
    for split_k in ("auto", 1):
        _dense_references(data, meta, a, b, one, split_k)


def _dense_references(data, meta, a, b, one, split_k):
    with torch.no_grad(), tt.emulate(split_k=split_k):
        for key in [k for k in data if k.startswith("d_dense")]:
            split = any("splitK" in name for name in meta["kernels"][key])
            if key == "d_dense":
                got = a @ b
            elif key == "d_dense_f32":
                got = torch.mm(a, b, out_dtype=torch.float32)
            else:
                assert key == "d_dense_scaled_fast"
                got = torch._scaled_mm(a, _col_major(b), one, one, out_dtype=torch.float32,
                                       use_fast_accum=True)
            miss = _mismatches(got, data[key])
            if split and split_k == 1:
                assert miss == {"d_dense": 77, "d_dense_f32": 4078}[key], (key, miss)
            else:
                assert miss == 0, (key, miss)


def test_sparse_mm_prunes_and_refuses():
    g = torch.Generator().manual_seed(3)
    a = torch.randn(16, 64, generator=g).half()
    b = torch.randn(64, 8, generator=g).half()
    with pytest.raises(ValueError, match="not 2:4 sparse"):
        tt.sparse_mm(a, b)
    pruned = tt.prune_24(a)
    assert pruned.dtype == a.dtype and int((pruned.view(16, 16, 4) != 0).sum(-1).max()) <= 2
    assert torch.equal(tt.sparse_mm(a, b, prune=True), tt.sparse_mm(pruned, b))
    want = golden.sparse.matmul_sp(pruned.numpy(), b.numpy())          # FP32 chain from +0
    assert np.array_equal(_bits(tt.sparse_mm(pruned, b)), want.astype(np.float16).view(np.uint16))
    assert tt.sparse_mm(pruned.to(torch.bfloat16), b.to(torch.bfloat16)).dtype == torch.bfloat16
    with pytest.raises(tt.Unsupported, match="needs out_dtype"):
        tt.sparse_mm(pruned.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn))
    with pytest.raises(tt.Unsupported, match="not modelled"):
        tt.sparse_mm(pruned.float(), b.float())


# --- the mode: dispatch, shapes, dtypes ---------------------------------------------------------

def _rand(shape, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(dtype)


def _golden(a, b, **kw):
    return golden.matmul(tt._to_numpy(a), tt._to_numpy(b), **kw)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_mode_equals_golden_matmul_on_every_entry_point(dtype):
    a, b = _rand((3, 24, 40), dtype, 1), _rand((40, 16), dtype, 2)
    want = _golden(a, b)                                        # (3, 24, 16) FP32
    out = _tensor_like(want, dtype)
    with torch.no_grad(), tt.emulate():
        lin = torch.nn.Linear(40, 16, bias=False).to(dtype)
        lin.weight.copy_(b.t())
        for got in (a @ b, torch.matmul(a, b), a.matmul(b), torch.bmm(a, b.expand(3, 40, 16)),
                    a.bmm(b.expand(3, 40, 16)), F.linear(a, b.t()), lin(a),
                    torch.baddbmm(torch.zeros(3, 24, 16, dtype=dtype), a, b.expand(3, 40, 16))):
            assert got.dtype == dtype and torch.equal(_bits_t(got), _bits_t(out))
        got = torch.mm(a[1], b, out_dtype=torch.float32)
        assert np.array_equal(_bits(got), want[1].view(np.uint32))
    # The plain functions give the same.
    assert torch.equal(_bits_t(tt.matmul(a, b)), _bits_t(out))
    assert np.array_equal(_bits(tt.mm(a[0], b, torch.float32)), want[0].view(np.uint32))


def _tensor_like(f32, dtype):
    """Golden's FP32 result rounded to nearest-even FP16/BF16 (NumPy / ml_dtypes), as a tensor."""
    np_dtype = {torch.float16: np.float16, torch.bfloat16: ml_dtypes.bfloat16}[dtype]
    return torch.from_numpy(f32.astype(np_dtype).view(np.int16)).view(dtype)


def _bits_t(t):
    return t.contiguous().view({2: torch.int16, 4: torch.int32}[t.element_size()])


def test_matmul_vector_shapes_and_broadcasting():
    a, b = _rand((2, 1, 8, 32), torch.float16, 4), _rand((3, 32, 5), torch.float16, 5)
    v, w = _rand((32,), torch.float16, 6), _rand((32,), torch.float16, 7)
    with torch.no_grad(), tt.emulate():
        assert (a @ b).shape == (2, 3, 8, 5)
        assert torch.equal(_bits_t(a @ b), _bits_t(_tensor_like(_golden(a, b), torch.float16)))
        got = v @ b                                   # 1-D @ 3-D: (3, 5)
        assert got.shape == (3, 5)
        want = _golden(v[None], b)[:, 0, :]
        assert torch.equal(_bits_t(got), _bits_t(_tensor_like(want, torch.float16)))
        assert (b.transpose(1, 2) @ w).shape == (3, 5)
        with pytest.raises(tt.Unsupported, match="torch.dot"):
            v @ w
        with pytest.raises(RuntimeError, match="cannot be multiplied"):
            a @ a


def test_tf32_follows_pytorch_setting_and_the_argument():
    a, b = _rand((16, 40), torch.float32, 8), _rand((40, 12), torch.float32, 9)
    want = _golden(a, b)                           # float32 arrays: TF32, K in steps of 8
    old = torch.backends.cuda.matmul.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32 = False
        assert not tt.tf32_allowed()
        with torch.no_grad(), tt.emulate():
            with pytest.raises(tt.Unsupported, match="without TF32"):
                a @ b
        with torch.no_grad(), tt.emulate(allow_tf32=True):
            assert np.array_equal(_bits(a @ b), want.view(np.uint32))
        torch.backends.cuda.matmul.allow_tf32 = True
        assert tt.tf32_allowed()
        with torch.no_grad(), tt.emulate():
            assert np.array_equal(_bits(a @ b), want.view(np.uint32))
        with torch.no_grad(), tt.emulate(allow_tf32=False):
            with pytest.raises(tt.Unsupported):
                a @ b
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old
    assert np.array_equal(_bits(tt.mm(a, b, allow_tf32=True)), want.view(np.uint32))
    # TF32 reads the top 19 bits: the 13 low fraction bits change nothing.
    noisy = (a.view(torch.int32) ^ 0x1FFF).view(torch.float32)
    assert torch.equal(tt.mm(noisy, b, allow_tf32=True), tt.mm(a, b, allow_tf32=True))


def test_int_mm_wraps_like_the_golden_model():
    a = torch.full((32, 64), -128, dtype=torch.int8)
    b = torch.full((64, 16), -128, dtype=torch.int8)
    with torch.no_grad(), tt.emulate():
        got = torch._int_mm(a, b)
    assert got.dtype == torch.int32 and int(got[0, 0]) == 64 * 128 * 128


# --- the epilogue: C, alpha, beta, bias, scales ---------------------------------------------------

def test_addmm_and_linear_bias_follow_the_measured_epilogues():
    """The rules of torch_splitk/README.md written out in NumPy float32 arithmetic (RNE) on
    golden's FP32 accumulator: beta = 1 rounds the product to FP16 first, beta != 1 is one FMA,
    a 1-D bias one FP32 add."""
    a, b = _rand((8, 48), torch.float16, 12), _rand((48, 16), torch.float16, 13)
    bias = _rand((16,), torch.float16, 14)
    c = _rand((8, 16), torch.float16, 15)
    acc = _golden(a, b)
    c32 = c.numpy().astype(np.float32)
    with torch.no_grad(), tt.emulate():
        got = torch.addmm(c, a, b)
        want = (acc.astype(np.float16).astype(np.float32) + c32).astype(np.float16)
        assert np.array_equal(_bits(got), want.view(np.uint16))
        want_lin = (acc + bias.numpy().astype(np.float32)).astype(np.float16)
        assert np.array_equal(_bits(F.linear(a, b.t(), bias)), want_lin.view(np.uint16))
        assert np.array_equal(_bits(torch.addmm(bias, a, b)), want_lin.view(np.uint16))
        got = torch.addmm(c, a, b, beta=0.5, alpha=3.0)
        want = gcublas.fma32(np.float32(3.0), acc, np.float32(0.5) * c32)
        assert np.array_equal(_bits(got), want.astype(np.float16).view(np.uint16))
        got = torch.addmm(c, a, b, alpha=0.7)                 # beta = 1: alpha * acc rounded
        want = ((np.float32(0.7) * acc).astype(np.float16).astype(np.float32) + c32)
        assert np.array_equal(_bits(got), want.astype(np.float16).view(np.uint16))
        with pytest.raises(tt.Unsupported, match="bias epilogue with alpha"):
            torch.addmm(bias, a, b, alpha=0.7)
        # beta = 0 ignores C, NaN included (BLAS).
        nan_c = torch.full((8, 16), float("nan"), dtype=torch.float16)
        assert not torch.isnan(torch.addmm(nan_c, a, b, beta=0)).any()
        # A non-contiguous 3-D input: at::linear runs matmul, then adds the bias in FP16.
        x = _rand((16, 2, 48), torch.float16, 16).transpose(0, 1)
        y = (_golden(x, b).astype(np.float16).astype(np.float32) + bias.numpy().astype(np.float32))
        assert np.array_equal(_bits(F.linear(x, b.t(), bias)), y.astype(np.float16).view(np.uint16))
        out = torch.empty(0, dtype=torch.float16)
        torch.mm(a, b, out=out)
        assert out.shape == (8, 16) and np.array_equal(_bits(out), acc.astype(np.float16).view(np.uint16))


def test_scaled_mm_scales_and_bias():
    """The measured FP8 epilogues in NumPy float32 arithmetic: tensor-wise acc * RNE32(sa * sb),
    row-wise (acc * sb[j]) * sa[i], the bias one more FP32 add."""
    a = _rand((16, 64), torch.float32, 17).to(torch.float8_e4m3fn)
    b = _rand((24, 64), torch.float32, 18).to(torch.float8_e5m2).t()
    sa, sb = torch.tensor(0.37), torch.tensor(1.9)
    bias = _rand((24,), torch.bfloat16, 19)
    acc = _golden(a, b.contiguous(), promote=128)                # E4M3 x E5M2, golden's default
    alpha = np.float32(0.37) * np.float32(1.9)
    ra = torch.rand(16, 1) + 0.5
    rb = torch.rand(1, 24) + 0.5
    with torch.no_grad(), tt.emulate():
        got = torch._scaled_mm(a, b, sa, sb, out_dtype=torch.float32)
        assert np.array_equal(_bits(got), (alpha * acc).view(np.uint32))
        got = torch._scaled_mm(a, b, sa, sb, bias=bias, out_dtype=torch.bfloat16)
        want = ((alpha * acc) + bias.float().numpy()).astype(ml_dtypes.bfloat16)
        assert np.array_equal(_bits(got), want.view(np.uint16))
        got = torch._scaled_mm(a, b, ra, rb, out_dtype=torch.float32)
        want = (acc * rb.numpy()) * ra.numpy()
        assert np.array_equal(_bits(got), want.view(np.uint32))
        with pytest.raises(RuntimeError, match="Bias is not supported"):
            torch._scaled_mm(a, b, sa, sb, bias=bias, out_dtype=torch.float32)
        for bad, match in ((dict(scale_a=torch.ones(16, 2)), "scale_a of shape"),
                           (dict(scale_a=torch.ones(16, 1)), "scale_b of shape"),
                           (dict(scale_b=torch.ones(1, 24)), "scale_b of shape"),
                           (dict(scale_a=ra, scale_b=rb, out_dtype=torch.float16), "row-wise"),
                           (dict(out_dtype=None), "out_dtype"),
                           (dict(out_dtype=torch.float8_e4m3fn), "out_dtype"),
                           (dict(out_dtype=torch.int32), "out_dtype"),
                           (dict(scale_result=torch.tensor(1.0)), "scale_result")):
            kw = dict(scale_a=sa, scale_b=sb, out_dtype=torch.float32) | bad
            with pytest.raises(tt.Unsupported, match=match):
                torch._scaled_mm(a, b, **kw)
        e5 = a.float().to(torch.float8_e5m2)
        with pytest.raises(tt.Unsupported, match="E5M2 x E5M2"):
            torch._scaled_mm(e5, b, sa, sb, out_dtype=torch.float32)


# --- what the mode refuses, and what it hands back to PyTorch -----------------------------------

def test_other_devices_go_to_pytorch():
    a = torch.empty(4, 8, dtype=torch.float16, device="meta")
    b = torch.empty(8, 2, dtype=torch.float16, device="meta")
    with tt.emulate():
        assert (a @ b).device.type == "meta" and torch.mm(a, b).shape == (4, 2)
        assert torch.einsum("ij,jk->ik", a, b).device.type == "meta"


def test_unsupported_raises_or_falls_through():
    a, b = _rand((4, 16), torch.float16, 20), _rand((16, 8), torch.float16, 21)
    cases = [
        (lambda: a.double() @ b.double(), "float64"),
        (lambda: a.float() @ b.float(), "without TF32"),
        (lambda: torch.mm(a, b.float()), "one dtype"),
        (lambda: torch.einsum("ij,jk->ik", a, b), "einsum"),
        (lambda: torch.mv(a, b[:, 0]), "mv"),
        (lambda: F.conv1d(a[None], b.t()[:, :, None][:, :4]), "conv1d"),
        (lambda: torch.mm(a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn)), "_scaled_mm"),
    ]
    with torch.no_grad():
        with tt.emulate():
            for fn, match in cases:
                with pytest.raises(tt.Unsupported, match=match):
                    fn()
            assert torch.equal(a + 1, a + 1)           # not a GEMM: PyTorch, untouched
        own = a.double() @ b.double()                  # PyTorch's CPU result
        with tt.emulate(strict=False):
            assert torch.equal(a.double() @ b.double(), own)
            assert torch.allclose(torch.einsum("ij,jk->ik", a.float(), b.float()), own.float())
    w = torch.nn.Linear(16, 8).half()
    with tt.emulate():
        with pytest.raises(tt.Unsupported, match="forward only"):
            w(a)
    with tt.emulate(strict=False):
        assert w(a).requires_grad                      # PyTorch's own, with autograd
    with pytest.raises(ValueError, match="arch"):
        tt.emulate(arch="a100")
    with pytest.raises(tt.Unsupported, match="float64"):
        tt.mm(a.double(), b.double())


# --- the example ----------------------------------------------------------------------------------

def _example():
    spec = importlib.util.spec_from_file_location("torch_forward", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod             # dataclasses look their module up there
    try:
        spec.loader.exec_module(mod)
    finally:
        del sys.modules[spec.name]
    return mod


def test_example_forward_pass_is_the_golden_model(tmp_path):
    ex = _example()
    res = ex.run(batch=8, widths=(64, 96, 32, 16), seed=1)
    assert len(res.layers) == 3
    for layer in res.layers:
        # FP16: golden.matmul's FP32 accumulator, the bias added in FP32, one RNE to FP16.
        x, w, bias = layer.fp16_in, layer.fp16_weight, layer.fp16_bias
        acc = golden.matmul(x, w.T.copy())
        want = (acc + bias.astype(np.float32)).astype(np.float16)
        assert np.array_equal(layer.fp16_out.view(np.uint16), want.view(np.uint16))
        # FP8: golden.matmul with cuBLASLt's promotion, times RNE32(scale_x * scale_w), plus the
        # bias, each step rounded to FP32 (float32 arithmetic), then BF16.
        acc8 = golden.matmul(layer.fp8_in, layer.fp8_weight.T.copy(), promote=128)
        alpha = np.float32(layer.fp8_scales[0]) * np.float32(layer.fp8_scales[1])
        want8 = (alpha * acc8 + layer.fp8_bias.astype(np.float32)).astype(ml_dtypes.bfloat16)
        assert np.array_equal(layer.fp8_out.view(np.uint16), want8.view(np.uint16))
        assert 0 < layer.err["fp16 H200"] < 1e-2 and 0 < layer.err["fp8 H200"] < 0.2
    png = tmp_path / "forward.png"
    table = ex.report(res, png)
    assert png.stat().st_size > 5000 and "layer" in table and "fp8 H200" in table


# --- torch_splitk/: split-K, epilogues and FP8 scales through plain PyTorch calls -----------------

SPLITK = SILICON / "torch_splitk"
SPLITK_FILES = sorted(SPLITK.glob("*.npz"))


def _splitk_calls(data, meta):
    """Every output key of a torch_splitk file with the PyTorch call that made it."""
    fmt = meta["dtype"]
    a, b = _tensor(data["a"], fmt), _tensor(data["b"], fmt)
    if meta["kind"] == "fp8":
        bc = _col_major(b)
        tw = (torch.tensor(meta["scale_a_tw"]), torch.tensor(meta["scale_b_tw"]))
        rw = (torch.from_numpy(data["sa"].view(np.float32)), torch.from_numpy(data["sb"].view(np.float32)))
        out = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}
        calls = {}
        for key in [k for k in data if k.startswith("d_")]:
            _, scaling, acc, odt, *bias = key.split("_")
            kw = dict(out_dtype=out[odt], use_fast_accum=acc == "fast")
            if bias:
                kw["bias"] = _tensor(data["bias_f16" if odt == "f16" else "bias_bf16"],
                                     "f16" if odt == "f16" else "bf16")
            scales = tw if scaling == "tw" else rw
            calls[key] = lambda kw=kw, scales=scales: torch._scaled_mm(a, bc, *scales, **kw)
        return calls
    c, bias = _tensor(data["c"], fmt), _tensor(data["bias"], fmt)
    al, be = meta["alpha"], meta["beta"]
    f32 = torch.float32
    calls = {
        "mm": lambda: torch.mm(a, b), "32_mm": lambda: torch.mm(a, b, out_dtype=f32),
        "addmm_ab": lambda: torch.addmm(c, a, b, beta=be, alpha=al),
        "addmm_11": lambda: torch.addmm(c, a, b),
        "addmm_a1": lambda: torch.addmm(c, a, b, alpha=al),
        "addmm_1b": lambda: torch.addmm(c, a, b, beta=be),
        "addmm_bias_ab": lambda: torch.addmm(bias, a, b, beta=be, alpha=al),
        "lin": lambda: F.linear(a, b.t(), bias),
        "32_addmm_ab": lambda: torch.addmm(c.float(), a, b, f32, beta=be, alpha=al),
        "32_addmm_11": lambda: torch.addmm(c.float(), a, b, out_dtype=f32),
        "32_addmm_a1": lambda: torch.addmm(c.float(), a, b, out_dtype=f32, alpha=al),
        "32_addmm_1b": lambda: torch.addmm(c.float(), a, b, out_dtype=f32, beta=be),
        "32": lambda: torch.mm(a, b, out_dtype=f32),
        "matmulT": lambda: torch.mm(b.T, a.T).T,
        "32_addmm": lambda: torch.addmm(c.float(), a, b, out_dtype=f32, beta=be, alpha=al),
        "addmm": lambda: torch.addmm(c, a, b, beta=be, alpha=al),
        "rr0": lambda: torch.mm(a, b),       # FP16/BF16-output torch.mm on a split-K file
        "rr1": lambda: a @ b,
    }
    out = {}
    for key in [k for k in data if k.startswith(("d_", "d32_"))]:
        name = key[1:] if key.startswith("d32") else key[2:]
        if meta["kind"] == "splitk":         # the _rr0 / _rr1 suffix: the switch, not the call
            name = name[:-4] if name.endswith(("_rr0", "_rr1")) else name
        out[key] = calls[name]
    return out


def _rr(key, meta):
    """PyTorch's reduced-precision-reduction switch the output was captured with."""
    rr = meta.get("rr", {}).get(key)
    return bool(rr) if rr is not None else True


@pytest.mark.parametrize("path", SPLITK_FILES, ids=lambda p: p.stem)
def test_every_splitk_capture_bit_exact_through_the_mode(path):
    """Every output of every torch_splitk/ file through plain PyTorch calls under the mode:
    the automatic split count, the file's count as an int and as a callable, both
    reduced-precision settings as captured."""
    data = load(path)
    meta = json.loads(str(data["meta"]))
    calls = _splitk_calls(data, meta)
    assert sorted(calls) == sorted(k for k in data if k.startswith(("d_", "d32_")))
    mat = torch.backends.cuda.matmul
    old = (mat.allow_fp16_reduced_precision_reduction, mat.allow_bf16_reduced_precision_reduction)
    s = set(meta["numSplitsK"].values()).pop()
    try:
        for key, call in calls.items():
            mat.allow_fp16_reduced_precision_reduction = _rr(key, meta)
            mat.allow_bf16_reduced_precision_reduction = _rr(key, meta)
            for split_k in ("auto", s, lambda m, k, n, dtype: s):
                with torch.inference_mode(), tt.emulate(split_k=split_k):
                    got = call()
                assert got.shape == data[key].shape
                assert _mismatches(got, data[key]) == 0, (key, split_k)
    finally:
        mat.allow_fp16_reduced_precision_reduction, mat.allow_bf16_reduced_precision_reduction = old


def test_the_old_epilogue_missed_addmm_with_default_beta():
    """One FP32 rounding of acc + C (the epilogue the mode assumed before) misses 5,031 of the
    16,384 FP16 outputs of torch.addmm(C, a, b) in h100_epi_normal_f16_128x64x128."""
    data = load(SPLITK / "h100_epi_normal_f16_128x64x128.npz")
    acc = golden.matmul(data["a"].view(np.float16), data["b"].view(np.float16))
    old = (acc + data["c"].view(np.float16).astype(np.float32)).astype(np.float16)
    assert int((old.view(np.uint16) != data["d_addmm_11"]).sum()) == 5031
    with torch.no_grad(), tt.emulate():
        got = torch.addmm(_tensor(data["c"], "f16"), _tensor(data["a"], "f16"),
                          _tensor(data["b"], "f16"))
    assert _mismatches(got, data["d_addmm_11"]) == 0


def _trace_op(key, m, k, n):
    """The operator that launches the capture key's kernels and its "Input Dims", as
    torch.profiler records them (record_shapes=True): F.linear and addmm with a bias vector
    reach aten::addmm with the bias first, addmm with C (M, N) first, _scaled_mm its
    operands, its scales ([] for a 0-d tensor) and bias."""
    if "_tw_" in key or "_rw_" in key:
        scales = [[], []] if "_tw_" in key else [[m, 1], [1, n]]
        return "aten::_scaled_mm", [[m, k], [k, n]] + scales + ([[n]] if "bias" in key else [[]])
    if "lin" in key or "addmm_bias" in key:
        return "aten::addmm", [[n], [m, k], [k, n], [], []]
    if "addmm" in key:
        return "aten::addmm", [[m, n], [m, k], [k, n], [], []]
    if "matmulT" in key:
        return "aten::mm", [[n, k], [k, m]]
    return "aten::mm", [[m, k], [k, n]]


def _trace(data, meta):
    """A torch.profiler chrome trace of the capture's GEMMs, from its meta: one cpu_op per
    output key (its PyTorch operator and input shapes, :func:`_trace_op`) and the kernels it
    launched."""
    m, k, n = meta["M"], meta["K"], meta["N"]
    events = []
    for i, (key, kernels) in enumerate(meta["kernels"].items()):
        if key not in data:
            continue
        op, dims = _trace_op(key, m, k, n)
        events.append({"ph": "X", "cat": "cpu_op", "name": op,
                       "args": {"External id": i, "Input Dims": dims}})
        for name, grid, block in kernels:
            events.append({"ph": "X", "cat": "kernel", "name": name,
                           "args": {"External id": i, "grid": grid, "block": block}})
    return {"traceEvents": events}


@pytest.mark.parametrize("path", SPLITK_FILES, ids=lambda p: p.stem)
def test_profile_reader_finds_the_split_counts(path, tmp_path):
    data = load(path)
    meta = json.loads(str(data["meta"]))
    keys = [k for k in meta["kernels"] if k in data]
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps(_trace(data, meta)))
    records = tt.kernels_from_profile(str(trace))
    assert len(records) == len(keys)
    for key, r in zip(keys, records):
        assert r.split_k == meta["numSplitsK"][key], key
        assert (r.reduce is not None) == (r.split_k > 1)
        assert r.bias == ("_lin" in key or key.endswith("_bias"))
        if meta["kind"] == "fp8":
            assert r.accumulation == ("fast" if "_fast_" in key else "promote128")
            assert r.rowwise == ("_rw_" in key)
        elif "addmm" in key:
            assert r.beta == ("one" if key.endswith(("_11", "_a1")) else "scaled")
    if meta["kind"] != "splitk":
        return
    # Replay: the records' split counts under the mode give the captured bits.
    s = meta["numSplitsK"]["d32_rr0"]
    assert tt.split_counts(records) == {(meta["M"], meta["K"], meta["N"]): s,
                                        (meta["N"], meta["K"], meta["M"]): s}
    a, b = _tensor(data["a"], meta["dtype"]), _tensor(data["b"], meta["dtype"])
    with torch.no_grad(), tt.emulate(split_k=records):
        assert _mismatches(torch.mm(a, b, out_dtype=torch.float32), data["d32_rr0"]) == 0
    # Without the profile, the plain chain misses.
    with torch.no_grad(), tt.emulate(split_k=1):
        assert _mismatches(torch.mm(a, b, out_dtype=torch.float32), data["d32_rr0"]) > 0


def test_profile_replays_an_addmm_split_count_that_auto_would_not_pick():
    """An addmm (C (M, N) first in its Input Dims, M = N) whose kernel ran S = 2 where "auto"
    picks the captured S = 3: the records carry (M, K, N) and the replay runs S = 2, so the
    result differs from the capture (which S = 3 reproduces) and equals split_k=2."""
    data = load(SPLITK / "h100_splitk_normal_f16_16x4096x16.npz")
    meta = json.loads(str(data["meta"]))
    m, k, n = meta["M"], meta["K"], meta["N"]
    assert m == n and gcublas.split_k_auto(m, k, n) == 3 == meta["numSplitsK"]["d_addmm_rr0"]
    op, dims = _trace_op("d_addmm_rr0", m, k, n)
    assert (op, dims[0]) == ("aten::addmm", [m, n])
    (name, grid, block), reduce = meta["kernels"]["d_addmm_rr0"]
    assert grid == [1, 3, 1]
    trace = {"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": op, "args": {"External id": 7, "Input Dims": dims}},
        {"ph": "X", "cat": "kernel", "name": name,
         "args": {"External id": 7, "grid": [1, 2, 1], "block": block}},
        {"ph": "X", "cat": "kernel", "name": reduce[0],
         "args": {"External id": 7, "grid": reduce[1], "block": reduce[2]}}]}
    records = tt.kernels_from_profile(trace)
    assert [(r.op, r.shape, r.split_k, r.beta) for r in records] == \
        [("aten::addmm", (m, k, n), 2, "scaled")]
    assert tt.split_counts(records) == {(m, k, n): 2}
    a, b, c = (_tensor(data[x], "f16") for x in ("a", "b", "c"))
    call = lambda: torch.addmm(c, a, b, beta=meta["beta"], alpha=meta["alpha"])   # noqa: E731
    with torch.no_grad():
        with tt.emulate(split_k=records):
            replay = _bits(call())
        with tt.emulate(split_k=2):
            two = _bits(call())
        with tt.emulate():
            auto = _bits(call())
    assert np.array_equal(auto, data["d_addmm_rr0"])          # auto: S = 3, the capture
    assert np.array_equal(replay, two)
    assert int((replay != data["d_addmm_rr0"]).sum()) > 0     # S = 2, not auto's 3


def test_profile_reader_takes_the_cublaslt_log_and_a_profiler():
    data = load(SPLITK / "h100_splitk_normal_f16_16x4096x16.npz")
    meta = json.loads(str(data["meta"]))
    trace = _trace(data, meta)
    for e in trace["traceEvents"]:          # no grid: the split count must come from the log
        e["args"].pop("grid", None)
    log = ("[2026-12-07 10:00:00][cublasLt][1][Trace][cublasLtMatmul] A=0x1 Adesc=[type=R_16F "
           "rows=16 cols=4096 ld=16] B=0x2 Bdesc=[type=R_16F rows=4096 cols=16 ld=4096] C=0x3 "
           "Cdesc=[type=R_32F rows=16 cols=16 ld=16] D=0x3 Ddesc=[type=R_32F rows=16 cols=16 "
           "ld=16] computeDesc=[computeType=COMPUTE_32F scaleType=R_32F] algo=[algoId=66 "
           "numSplitsK=3 reductionScheme=REDUCTION_SCHEME_COMPUTE_TYPE] workSpaceSizeInBytes=0\n")
    records = tt.kernels_from_profile(trace, cublaslt_log=log)
    assert {r.split_k for r in records} == {3}
    # A CPU-only torch.profiler run has no GPU kernels: no records.
    with torch.profiler.profile(record_shapes=True) as prof:
        torch.mm(torch.ones(4, 4), torch.ones(4, 4))
    assert tt.kernels_from_profile(prof) == []


def test_auto_does_not_split_a_vector_right_operand():
    """a @ v with a 1-D v runs cuBLAS's gemv (not captured), not a split-K GEMM: "auto" gives
    it no split, where the (16, 4096) @ (4096, 1) matrix product gets S = 3.  In TF32 a split
    is refused, so the matrix product raises and the vector product is the plain chain."""
    a, v = _rand((16, 4096), torch.float32, 40), _rand((4096,), torch.float32, 41)
    with torch.no_grad(), tt.emulate(allow_tf32=True):
        got = a @ v
        with pytest.raises(tt.Unsupported, match="TF32"):
            a @ v[:, None]
    assert np.array_equal(_bits(got), _golden(a, v[:, None])[:, 0].view(np.uint32))
    h, w = a.half(), v.half()
    with torch.no_grad(), tt.emulate():
        got = torch.matmul(h, w)
    assert np.array_equal(_bits(got), _golden(h, w[:, None], out_dtype=np.float16)[:, 0]
                          .view(np.uint16))


def test_split_k_option_and_bad_counts():
    a, b = _rand((16, 4096), torch.float16, 30), _rand((4096, 16), torch.float16, 31)
    want = golden.matmul(a.numpy(), b.numpy(), split_k=3)
    with torch.no_grad():
        for split_k in ("auto", 3, {(16, 4096, 16): 3}, lambda m, k, n, dt: 3):
            with tt.emulate(split_k=split_k):
                assert np.array_equal(_bits(torch.mm(a, b, out_dtype=torch.float32)),
                                      want.view(np.uint32))
        assert np.array_equal(_bits(tt.mm(a, b, torch.float32, split_k=3)), want.view(np.uint32))
        with tt.emulate(split_k=65):
            with pytest.raises(ValueError, match=r"split_k=65 does not fit K=4096"):
                torch.mm(a, b)
        with tt.emulate(split_k=lambda m, k, n, dt: 0):
            with pytest.raises(ValueError, match="split_k gave 0"):
                torch.mm(a, b)
        with tt.emulate():                   # split-K with beta = 1 is not in the captures
            with pytest.raises(tt.Unsupported, match="beta = 1"):
                torch.addmm(torch.zeros(16, 16, dtype=torch.float16), a, b)
        with tt.emulate(split_k=1):
            torch.addmm(torch.zeros(16, 16, dtype=torch.float16), a, b)
        with tt.emulate(allow_tf32=True):    # TF32 split-K is not in the captures
            with pytest.raises(tt.Unsupported, match="TF32"):
                torch.mm(a.float(), b.float())
    for bad in ("fast", 0, True, {(1, 2): 3}, 2.5):
        with pytest.raises(ValueError, match="split_k"):
            tt.emulate(split_k=bad)
