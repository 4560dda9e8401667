"""The silicon probe: its captures (committed) against the golden model, and its refusals."""

import json

import numpy as np
import pytest

from tcore.golden import mma
from tcore.golden.layout_file import parse_layouts
from tcore.golden.probe import CLASSES, make_class
from tcore.golden.silicon import KERNELS, kernels_in, load
from tcore.sim.cli import main

from .conftest import SILICON

PROBE = SILICON.parent / "probe"
FILES = sorted(p.name for p in PROBE.glob("*.npz"))


def test_every_class_was_captured():
    assert FILES == sorted(f"h200_{c}.npz" for c in CLASSES)


@pytest.mark.parametrize("name", FILES)
def test_probe_capture_matches_golden(name):
    data = load(PROBE / name)
    meta = json.loads(str(data["meta"]))
    assert "H200" in meta["device"] and meta["mma_equals_wmma"]
    names = kernels_in(data)
    assert {"f16_f32", "bf16_f32", "f16_f16"} <= set(names), names
    for k in (KERNELS[name] for name in names):
        got = mma(data["a"], data["b"], data[k.c_key], in_fmt=k.in_fmt, out_fmt=k.out_fmt)
        assert np.array_equal(got, data[k.d_key]), f"{name} {k.name}"
        assert np.array_equal(data[k.d_key], data["wmma_" + k.name])


def test_new_captures_differ_from_the_shared_ones():
    new, old = load(PROBE / "h200_normal.npz"), load(SILICON / "h200_normal.npz")
    assert not np.array_equal(new["a"], old["a"])


def test_probe_layout_dump_equals_the_measured_file():
    new = parse_layouts(PROBE / "h200_wmma_layout.txt")
    old = parse_layouts(SILICON / "h200_wmma_layout.txt")
    assert list(new) == list(old)
    assert all(np.array_equal(new[h], old[h]) for h in old)


def test_inputs_are_reproducible():
    a1 = make_class("wide", 2, np.random.default_rng(5))
    a2 = make_class("wide", 2, np.random.default_rng(5))
    assert all(np.array_equal(x, y) for x, y in zip(a1, a2))
    a, b, _ = a1
    assert not np.any((a & 0x7C00) == 0x7C00) and not np.any((b & 0x7C00) == 0x7C00)


def test_probe_without_nvcc_says_so(tmp_path, capsys):
    code = main(["probe", "--out", str(tmp_path), "--nvcc", "no-such-nvcc"])
    assert code == 2 and "nvcc" in capsys.readouterr().err
