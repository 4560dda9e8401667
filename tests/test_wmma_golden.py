"""tcore.golden.wmma: the WMMA API on NumPy fragments."""

import numpy as np
import pytest

from tcore.golden import mma
from tcore.golden.wmma import (Fragment, WmmaError, element_map, fill_fragment, load_matrix_sync,
                         mma_sync, store_matrix_sync)


def rand16(rng, shape):
    return rng.standard_normal(shape).astype(np.float16).view(np.uint16)


def test_each_element_is_held_by_exactly_one_lane_slot():
    for kind in ("matrix_a", "matrix_b", "accumulator"):
        rc = element_map(kind).reshape(-1, 2)
        assert len({tuple(x) for x in rc}) == 256, kind


@pytest.mark.parametrize("layout", ["row_major", "col_major"])
def test_load_mma_store_round_trip(layout):
    rng = np.random.default_rng(0)
    A, B = rand16(rng, (16, 16)), rand16(rng, (16, 16))
    C = rng.standard_normal((16, 16)).astype(np.float32).view(np.uint32)
    mem = np.zeros(16384, np.uint8)
    ldm = 24
    for name, mat, addr, es in (("a", A, 0, 2), ("b", B, 1024, 2), ("c", C, 2048, 4)):
        for line in range(16):
            vals = mat[line] if layout == "row_major" else mat[:, line]
            mem[addr + line * ldm * es: addr + line * ldm * es + 16 * es] = np.ascontiguousarray(vals).view(np.uint8)
    a = load_matrix_sync(Fragment.new("matrix_a", "fp16"), mem, 0, ldm, layout)
    b = load_matrix_sync(Fragment.new("matrix_b", "fp16"), mem, 1024, ldm, layout)
    c = load_matrix_sync(Fragment.new("accumulator", "fp32"), mem, 2048, ldm, "mem_" + layout)
    assert np.array_equal(a.to_matrix(), A) and np.array_equal(c.to_matrix(), C)
    assert a.x().shape == (32, 16) and np.array_equal(a.x()[:, 8:], a.x()[:, :8])
    d = mma_sync(Fragment.new("accumulator", "fp32"), a, b, c)
    store_matrix_sync(mem, 8192, d, 16, "mem_row_major")
    got = mem[8192:8192 + 1024].view(np.uint32).reshape(16, 16)
    assert np.array_equal(got, mma(A, B, C))


def test_fill_fragment():
    f = fill_fragment(Fragment.new("accumulator", "fp16"), 0x3C00)
    assert np.all(f.to_matrix() == 0x3C00)


@pytest.mark.parametrize("esize,addr,ldm,msg", [
    (2, 0, 12, "multiple of 8"), (4, 0, 6, "multiple of 4"), (2, 16, 16, "aligned"),
    (4, 0, 0, "positive"), (2, 4096 * 4 - 32, 16, "outside"),
])
def test_bad_ldm_and_alignment_are_refused(esize, addr, ldm, msg):
    mem = np.zeros(4096 * 4, np.uint8)
    kind, fmt = ("matrix_a", "fp16") if esize == 2 else ("accumulator", "fp32")
    with pytest.raises(WmmaError, match=msg):
        load_matrix_sync(Fragment.new(kind, fmt), mem, addr, ldm, "row_major")


def test_invalid_combinations():
    a, b = Fragment.new("matrix_a", "bf16"), Fragment.new("matrix_b", "bf16")
    c = Fragment.new("accumulator", "fp16")
    with pytest.raises(WmmaError, match="unsupported operation bf16->fp16"):
        mma_sync(c, a, b, c)
    with pytest.raises(WmmaError, match="takes"):
        mma_sync(c, b, a, c)
    with pytest.raises(ValueError, match="holds"):
        Fragment.new("matrix_a", "fp32")
    with pytest.raises(WmmaError, match="accumulator fragments only"):
        store_matrix_sync(np.zeros(4096, np.uint8), 0, a, 16, "row_major")


@pytest.mark.parametrize("shape", ["m32n8k16", "m8n32k16"])
@pytest.mark.parametrize("layout", ["row_major", "col_major"])
def test_other_shapes_round_trip(shape, layout):
    """m32n8k16 / m8n32k16: every element held once, load -> mma_sync -> store is golden.mma
    on the shape's matrices (32x16 @ 16x8, 8x16 @ 16x32)."""
    from tcore.host.wmma_model import get_matrix, put_matrix
    rng = np.random.default_rng(1)
    m, n = (32, 8) if shape == "m32n8k16" else (8, 32)
    A, B = rand16(rng, (m, 16)), rand16(rng, (16, n))
    C = rng.standard_normal((m, n)).astype(np.float32).view(np.uint32)
    col = layout == "col_major"
    mem = np.zeros(16384, np.uint8)
    ld = lambda rows, cols: (rows if col else cols) + 8
    put_matrix(mem, 0, A, ld(m, 16), col)
    put_matrix(mem, 4096, B, ld(16, n), col)
    put_matrix(mem, 8192, C, ld(m, n), col)
    a = load_matrix_sync(Fragment.new("matrix_a", "fp16", shape), mem, 0, ld(m, 16), layout)
    b = load_matrix_sync(Fragment.new("matrix_b", "fp16", shape), mem, 4096, ld(16, n), layout)
    c = load_matrix_sync(Fragment.new("accumulator", "fp32", shape), mem, 8192, ld(m, n), "mem_" + layout)
    for f, want in ((a, A), (b, B), (c, C)):
        assert np.array_equal(f.to_matrix(), want)
        rc = element_map(f.kind, shape).reshape(-1, 2)
        assert len({tuple(x) for x in rc}) == want.size
    assert a.x().shape == (32, 16) and b.x().shape == (32, 16) and c.x().shape == (32, 8)
    d = mma_sync(Fragment.new("accumulator", "fp32", shape), a, b, c)
    store_matrix_sync(mem, 12288, d, ld(m, n), "mem_" + layout)
    got = get_matrix(mem, 12288, ld(m, n), np.uint32, col, (m, n))
    assert np.array_equal(got, mma(A, B, C))
    with pytest.raises(WmmaError, match="one shape"):
        mma_sync(Fragment.new("accumulator", "fp32"), a, b, c)
