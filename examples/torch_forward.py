"""A small MLP's forward pass with an H200's GEMM bits, in FP16 and FP8, on the CPU.

    .venv/bin/python examples/torch_forward.py                   # table, docs/torch_forward.png
    .venv/bin/python examples/torch_forward.py --batch 16 --widths 64,128,32 --out /tmp/f.png

Needs the torch extra (``pip install -e '.[torch]'``) and matplotlib.  A few ``nn.Linear``
layers with ReLU between them (random weights, fixed seed) run four ways:

* FP16: the model in half precision, under ``tcore.torch.emulate()`` (what an H200's cuBLAS
  returns) and without it (PyTorch's own CPU kernels);
* FP8: each layer quantises its input and weight to E4M3 with one scale per tensor
  (amax / 448) and calls ``torch._scaled_mm(x8, w8.t(), scale_x, scale_w, bias=b,
  out_dtype=torch.bfloat16)`` (cuBLASLt's default accumulation), under the mode and without it;

and in float64 on the float32 master weights, the reference.  The table gives, per layer, the
relative error (Frobenius norm) of each run's output against the float64 run, and the share of
outputs where PyTorch's CPU result differs from the H200's on the same layer inputs.  Only the
GEMMs are the H200's: the quantisation, ReLU and casts are PyTorch's CPU elementwise operations
(IEEE operations that a GPU computes the same way).  The bias epilogue of both and the FP8
scales follow the rules measured on the ``tests/data/silicon/torch_splitk/`` captures
(``golden/cublas.py``, ``docs/numerics.md``).
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

import tcore.torch as tt

E4M3_MAX = 448.0
RUNS = ("fp16 H200", "fp16 CPU", "fp8 H200", "fp8 CPU")


@dataclass
class Layer:
    """One layer's inputs and outputs of the H200 runs (NumPy arrays, bits as PyTorch has them),
    its errors against float64 and the share of outputs PyTorch's CPU GEMM gives otherwise."""

    shape: tuple                      # (batch, in, out)
    fp16_in: np.ndarray               # float16 (batch, in)
    fp16_weight: np.ndarray           # float16 (out, in)
    fp16_bias: np.ndarray             # float16 (out,)
    fp16_out: np.ndarray              # float16 (batch, out), before the ReLU
    fp8_in: np.ndarray                # float8_e4m3fn (batch, in), the quantised input
    fp8_weight: np.ndarray            # float8_e4m3fn (out, in)
    fp8_scales: tuple                 # (scale_x, scale_w), float32
    fp8_bias: np.ndarray              # bfloat16 (out,)
    fp8_out: np.ndarray               # bfloat16 (batch, out), before the ReLU
    err: dict = field(default_factory=dict)       # run -> relative error vs float64
    differ: dict = field(default_factory=dict)    # "fp16" / "fp8" -> share of outputs


@dataclass
class Result:
    layers: list
    seconds: float


def _quantise(x: torch.Tensor):
    """E4M3 with one scale per tensor: scale = amax / 448, x8 = x / scale (round to nearest)."""
    scale = (x.float().abs().max() / E4M3_MAX).clamp(min=2.0 ** -126).reshape(())
    return (x.float() / scale).to(torch.float8_e4m3fn), scale


def _fp8_linear(x, weight, bias):
    x8, sx = _quantise(x)
    w8, sw = _quantise(weight)
    y = torch._scaled_mm(x8, w8.t(), sx, sw, bias=bias, out_dtype=torch.bfloat16)
    return y, x8, w8, sx, sw


def _rel(y: torch.Tensor, ref: torch.Tensor) -> float:
    y, ref = y.double(), ref.double()
    return float(torch.linalg.norm(y - ref) / torch.linalg.norm(ref))


def _np(t: torch.Tensor) -> np.ndarray:
    return tt._to_numpy(t).copy()


def run(batch=128, widths=(512, 1024, 1024, 512, 128), seed=0) -> Result:
    """The forward passes; returns a :class:`Result` with one :class:`Layer` per nn.Linear."""
    torch.manual_seed(seed)
    linears = [torch.nn.Linear(i, o) for i, o in zip(widths[:-1], widths[1:])]
    x = torch.randn(batch, widths[0])
    t0 = time.perf_counter()
    layers = []
    with torch.no_grad():
        x64 = x.double()
        h16, c16 = x.half(), x.half()             # H200 and CPU activations, FP16
        h8, c8 = x.bfloat16(), x.bfloat16()       # FP8 runs carry BF16 activations
        for n, lin in enumerate(linears):
            last = n == len(linears) - 1
            w, b = lin.weight, lin.bias
            w16, b16, b_bf = w.half(), b.half(), b.bfloat16()
            y64 = F.linear(x64, w.double(), b.double())
            with tt.emulate():
                y16 = F.linear(h16, w16, b16)
                y8, x8, w8, sx, sw = _fp8_linear(h8, w, b_bf)
            cpu16 = F.linear(c16, w16, b16)
            cpu8 = _fp8_linear(c8, w, b_bf)[0]
            same16 = F.linear(h16, w16, b16)                 # PyTorch CPU on the H200's inputs
            same8 = _fp8_linear(h8, w, b_bf)[0]
            layer = Layer((batch, w.shape[1], w.shape[0]), _np(h16), _np(w16), _np(b16), _np(y16),
                          _np(x8), _np(w8), (float(sx), float(sw)), _np(b_bf), _np(y8))
            layer.err = {"fp16 H200": _rel(y16, y64), "fp16 CPU": _rel(cpu16, y64),
                         "fp8 H200": _rel(y8, y64), "fp8 CPU": _rel(cpu8, y64)}
            layer.differ = {"fp16": float((y16.view(torch.int16) != same16.view(torch.int16))
                                          .double().mean()),
                            "fp8": float((y8.view(torch.int16) != same8.view(torch.int16))
                                         .double().mean())}
            layers.append(layer)
            act = (lambda t: t) if last else F.relu
            x64, h16, c16, h8, c8 = act(y64), act(y16), act(cpu16), act(y8), act(cpu8)
    return Result(layers, time.perf_counter() - t0)


def table(res: Result) -> str:
    head = (f"{'layer':>5} {'batch x in x out':>18} " + " ".join(f"{r:>10}" for r in RUNS)
            + f" {'fp16 differ':>12} {'fp8 differ':>11}")
    lines = ["relative error against float64 (Frobenius); differ: outputs where PyTorch's CPU "
             "GEMM differs from the H200 on the same inputs", head]
    for n, layer in enumerate(res.layers):
        shape = "x".join(str(s) for s in layer.shape)
        lines.append(f"{n + 1:>5} {shape:>18} " + " ".join(f"{layer.err[r]:>10.3e}" for r in RUNS)
                     + f" {100 * layer.differ['fp16']:>11.1f}% {100 * layer.differ['fp8']:>10.1f}%")
    return "\n".join(lines)


def plot(res: Result, path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = np.arange(1, len(res.layers) + 1)
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(10, 4))
    style = {"fp16 H200": ("C0", "o", "-"), "fp16 CPU": ("C0", "s", ":"),
             "fp8 H200": ("C3", "o", "-"), "fp8 CPU": ("C3", "s", ":")}
    for run_name in RUNS:
        color, marker, line = style[run_name]
        label = run_name.replace("H200", "H200 (tcore.torch)").replace("CPU", "PyTorch CPU")
        ax.semilogy(n, [layer.err[run_name] for layer in res.layers], color=color, marker=marker,
                    linestyle=line, label=label)
    ax.set_xlabel("layer")
    ax.set_ylabel("relative error vs float64")
    ax.set_xticks(n)
    ax.legend(fontsize=8)
    ax.set_title("MLP forward pass: error per layer")
    width = 0.38
    bx.bar(n - width / 2, [100 * layer.differ["fp16"] for layer in res.layers], width, color="C0",
           label="FP16")
    bx.bar(n + width / 2, [100 * layer.differ["fp8"] for layer in res.layers], width, color="C3",
           label="FP8 (_scaled_mm)")
    bx.set_xlabel("layer")
    bx.set_ylabel("% of outputs")
    bx.set_xticks(n)
    bx.legend(fontsize=8)
    bx.set_title("PyTorch CPU GEMM != H200 (same inputs)")
    shapes = ", ".join("x".join(str(s) for s in layer.shape) for layer in res.layers)
    fig.suptitle(f"tcore.torch.emulate(): batch x in x out = {shapes}", fontsize=9)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def report(res: Result, png=None) -> str:
    """The table (returned), and the figure at ``png`` if given."""
    text = table(res)
    if png is not None:
        plot(res, png)
    return text


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--widths", default="512,1024,1024,512,128",
                   help="layer widths, input first (default %(default)s)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=str(Path(__file__).parent.parent / "docs" / "torch_forward.png"),
                   help="the figure (default %(default)s); '' for none")
    args = p.parse_args(argv)
    widths = tuple(int(w) for w in args.widths.split(","))
    res = run(args.batch, widths, args.seed)
    print(report(res, args.out or None))
    print(f"{len(res.layers)} layers, 4 forward passes and float64 in {res.seconds:.1f} s"
          + (f"; figure: {os.path.relpath(args.out)}" if args.out else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
