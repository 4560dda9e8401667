"""golden.wmma: the WMMA API on NumPy fragments."""

import numpy as np
import pytest

from golden import mma
from golden.wmma import (Fragment, WmmaError, element_map, fill_fragment, load_matrix_sync,
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
    with pytest.raises(WmmaError, match="not a WMMA combination"):
        mma_sync(c, a, b, c)
    with pytest.raises(WmmaError, match="takes"):
        mma_sync(c, b, a, c)
    with pytest.raises(ValueError, match="holds"):
        Fragment.new("matrix_a", "fp32")
    with pytest.raises(WmmaError, match="accumulator fragments only"):
        store_matrix_sync(np.zeros(4096, np.uint8), 0, a, 16, "row_major")
