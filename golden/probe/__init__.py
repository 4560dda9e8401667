"""Silicon probe: capture any NVIDIA GPU's tensor-core results in the silicon-vector format.

``tcore probe --out DIR`` compiles ``probe.cu`` with ``nvcc`` and runs it on the local GPU
(sm_80 or newer: it uses ``mma.sync.aligned.m16n8k16`` for FP16 and BF16).  For each input
class it writes ``<gpu>_<class>.npz`` with the keys of ``tests/data/silicon/README.md`` (a, b,
c, c16, d_f16_f32, d_bf16_f32, d_f16_f16, meta), plus the WMMA 16x16x16 results of the same
tiles (``wmma_*``), and ``<gpu>_wmma_layout.txt``, the fragment layout dump.  Check a capture
against the model with ``tcore verify DIR/*.npz``.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np

__all__ = ["CLASSES", "make_class", "run_probe", "ProbeError"]

HERE = Path(__file__).parent
CLASSES = ("normal", "wide", "align", "cancel", "special", "subnormal", "overflow", "ints", "targeted")


class ProbeError(RuntimeError):
    """No nvcc, no GPU, or the probe failed."""


def _f16(x):
    return np.asarray(x, np.float64).astype(np.float16).view(np.uint16)


def _finite_bits(rng, shape):
    """Random 16-bit patterns that are finite as FP16 (and therefore as BF16)."""
    bits = rng.integers(0, 1 << 16, shape, dtype=np.uint32).astype(np.uint16)
    bad = (bits & 0x7C00) == 0x7C00
    bits[bad] &= 0xBBFF          # clear one exponent bit: finite
    return bits


def make_class(name: str, t: int, rng):
    """Inputs a, b (uint16 bits) and c (FP32 bits) of ``t`` 16x16x16 tiles of one class."""
    shape = (t, 16, 16)
    c = rng.standard_normal(shape).astype(np.float32)
    if name == "normal":
        a, b = _f16(rng.standard_normal(shape)), _f16(rng.standard_normal(shape))
    elif name == "wide":
        a, b = _finite_bits(rng, shape), _finite_bits(rng, shape)
        c = (rng.standard_normal(shape) * np.exp2(rng.integers(-60, 60, shape))).astype(np.float32)
    elif name == "align":
        e = rng.integers(-3, 4, (2,) + shape)
        a = _f16(rng.choice([-1, 1], shape) * (1 + rng.random(shape)) * np.exp2(e[0]))
        b = _f16(rng.choice([-1, 1], shape) * (1 + rng.random(shape)) * np.exp2(e[1]))
        c = (rng.choice([-1, 1], shape) * (1 + rng.random(shape)) * np.exp2(rng.integers(-3, 6, shape))).astype(np.float32)
    elif name == "cancel":
        x = rng.standard_normal(shape)
        y = rng.standard_normal(shape)
        x[:, :, 1::2] = -x[:, :, 0::2]            # a[k+1] = -a[k], b[k+1] = b[k]: products cancel
        y[:, 1::2, :] = y[:, 0::2, :]
        x[:, :, 1::2] *= 1 + (rng.random(x[:, :, 1::2].shape) < 0.3) * 2.0 ** -rng.integers(5, 11, x[:, :, 1::2].shape)
        a, b = _f16(x), _f16(y)
        c = (rng.standard_normal(shape) * 2.0 ** -20).astype(np.float32)
    elif name == "special":
        a, b = _f16(rng.standard_normal(shape)), _f16(rng.standard_normal(shape))
        specials = np.array([0x7C00, 0xFC00, 0x7E00, 0x0000, 0x8000, 0x7BFF, 0x0001, 0x03FF], np.uint16)
        for arr in (a, b):
            pick = rng.random(shape) < 0.02
            arr[pick] = rng.choice(specials, int(pick.sum()))
        cs = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 3.4e38, 1e-45], np.float32)
        pick = rng.random(shape) < 0.02
        c[pick] = rng.choice(cs, int(pick.sum()))
    elif name == "subnormal":
        a = rng.integers(0, 0x400, shape).astype(np.uint16) | (rng.integers(0, 2, shape).astype(np.uint16) << 15)
        b = _f16(rng.standard_normal(shape) * 2.0 ** rng.integers(-14, 4, shape))
        c = (rng.standard_normal(shape) * 2.0 ** -30).astype(np.float32)
    elif name == "overflow":
        a = _f16(rng.choice([-1, 1], shape) * rng.uniform(1000, 65504, shape))
        b = _f16(rng.choice([-1, 1], shape) * rng.uniform(1000, 65504, shape))
        c = (rng.choice([-1, 1], shape) * rng.uniform(0.9, 1.0, shape) * 3.4e38).astype(np.float32)
    elif name == "ints":
        a, b = _f16(rng.integers(-8, 9, shape)), _f16(rng.integers(-8, 9, shape))
        c = rng.integers(-64, 65, shape).astype(np.float32)
    elif name == "targeted":
        # The discriminating cases of the project's H200 capture, replayed (deterministic).
        data = np.load(Path(__file__).resolve().parents[2] / "tests/data/silicon/h200_targeted.npz")
        return data["a"].copy(), data["b"].copy(), data["c"].copy()
    else:
        raise ValueError(f"Class must be one of {CLASSES}, not {name!r}")
    return a, b, c.view(np.uint32)


def _check_tools(nvcc: str):
    if shutil.which(nvcc) is None:
        raise ProbeError(f"{nvcc} not found: the probe needs the CUDA toolkit (nvcc) and an NVIDIA GPU")
    smi = shutil.which("nvidia-smi")
    if smi:
        r = subprocess.run([smi, "-L"], capture_output=True, text=True)
        if r.returncode or "GPU" not in r.stdout:
            raise ProbeError("no NVIDIA GPU visible (nvidia-smi -L lists none)")


def run_probe(out: Path, *, tiles: int = 512, seed: int = 2026, nvcc: str = "nvcc",
              classes=CLASSES, log=print) -> list[Path]:
    """Build and run the probe; write one .npz per class and the layout dump into ``out``."""
    _check_tools(nvcc)
    out = Path(out)
    work = out / "build"
    work.mkdir(parents=True, exist_ok=True)
    exe = work / "probe"
    r = subprocess.run([nvcc, "-O2", "-std=c++17", "-arch=native", str(HERE / "probe.cu"), "-o", str(exe)],
                       capture_output=True, text=True)
    if r.returncode:
        said = (r.stderr.strip() or r.stdout.strip() or "(it printed nothing)")
        raise ProbeError(f"{nvcc} failed (exit status {r.returncode}):\n{said}")
    rng = np.random.default_rng(seed)
    written = []
    gpu = None
    for name in classes:
        n = 4 if name == "targeted" else (64 if name == "ints" else tiles)
        a, b, c = make_class(name, n, rng)
        with np.errstate(over="ignore"):      # FP32 beyond FP16 range rounds to Inf, as intended
            c16 = c.view(np.float32).astype(np.float16).view(np.uint16)
        inp = work / "in.bin"
        res = work / "out.bin"
        np.concatenate([a.reshape(-1).view(np.uint8), b.reshape(-1).view(np.uint8),
                        c.reshape(-1).view(np.uint8), c16.reshape(-1).view(np.uint8)]).tofile(inp)
        r = subprocess.run([str(exe), "tiles", str(inp), str(res), str(n)], capture_output=True, text=True)
        if r.returncode:
            raise ProbeError(f"probe failed on class {name}: {r.stderr.strip()}")
        dev, sm, drv, rt = r.stdout.strip().split("|")
        gpu = gpu or re.sub(r"[^a-z0-9]+", "", dev.lower().replace("nvidia", ""))
        raw = np.fromfile(res, np.uint8)
        sz = n * 256
        m32 = raw[:sz * 8].view(np.uint32).reshape(2, n, 16, 16)
        m16 = raw[sz * 8:sz * 10].view(np.uint16).reshape(n, 16, 16)
        w32 = raw[sz * 10:sz * 18].view(np.uint32).reshape(2, n, 16, 16)
        w16 = raw[sz * 18:sz * 20].view(np.uint16).reshape(n, 16, 16)
        meta = {"device": f"{dev} ({sm}), driver {drv}, CUDA runtime {rt}", "class": name, "seed": seed,
                "instructions": "mma.sync.aligned.m16n8k16.row.col (two per tile); wmma_*: WMMA 16x16x16",
                "mma_equals_wmma": bool(np.array_equal(m32, w32) and np.array_equal(m16, w16))}
        path = out / f"{gpu}_{name}.npz"
        np.savez_compressed(path, a=a, b=b, c=c, c16=c16, d_f16_f32=m32[0], d_bf16_f32=m32[1],
                            d_f16_f16=m16, wmma_f16_f32=w32[0], wmma_bf16_f32=w32[1],
                            wmma_f16_f16=w16, meta=json.dumps(meta))
        log(f"{path.name}: {n} tiles, mma.sync == WMMA: {meta['mma_equals_wmma']}")
        written.append(path)
    lay = out / f"{gpu}_wmma_layout.txt"
    r = subprocess.run([str(exe), "layout", str(lay)], capture_output=True, text=True)
    if r.returncode:
        raise ProbeError(f"layout dump failed: {r.stderr.strip()}")
    log(f"{lay.name}: fragment layout")
    written.append(lay)
    return written
