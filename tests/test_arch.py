"""Parameter sets of other generations against published behaviour."""

import numpy as np
import pytest

from tcore.golden import mma

ONE, TWO_M23 = 0x3C00, 0x0002           # FP16 1.0 and 2**-23 (subnormal)
C = np.uint32(0x3F800001)               # FP32 1 + 2**-23
TWO, TWO_PLUS = 0x40000000, 0x40000001  # FP32 2.0 and 2 + 2**-22


def case(k):
    """c = 1 + 2**-23, a0 = b0 = 1, a[k-1] = 2**-23, b[k-1] = 1, all else 0."""
    a = np.zeros((1, k), np.uint16)
    b = np.zeros((k, 1), np.uint16)
    a[0, 0] = b[0, 0] = ONE
    a[0, k - 1], b[k - 1, 0] = TWO_M23, ONE
    return a, b, np.full((1, 1), C, np.uint32)


@pytest.mark.parametrize("k", range(2, 17))
def test_published_chained_steps(k):
    a, b, c = case(k)
    assert mma(a, b, c, arch="hopper")[0, 0] == TWO_PLUS            # measured on the H200
    assert mma(a, b, c, arch="ampere")[0, 0] == (TWO if k >= 9 else TWO_PLUS)
    assert mma(a, b, c, arch="volta")[0, 0] == (TWO if k >= 5 else TWO_PLUS)


def test_volta_has_no_bf16():
    a, b, c = case(4)
    with pytest.raises(ValueError, match="no BF16"):
        mma(a, b, c, in_fmt="bf16", arch="volta")


@pytest.mark.parametrize("b2,want", [
    (0x0008, {"volta": 0, "ampere": 0, "hopper": 1}),   # second product 2**-45
    (0x0020, {"volta": 0, "ampere": 1, "hopper": 1}),   # second product 2**-43
])
def test_fp16_out_floor_and_grid_per_generation(b2, want):
    """FP16 out: 2**-25 (a tie between 0 and the smallest subnormal) plus a tiny product.

    E = -25 is raised to the floor (-19, -20, -21), so the grid is 2**-42, 2**-44, 2**-46:
    the tiny product survives on the finer grids and breaks the tie upwards to 0x0001.
    """
    a = np.array([[0x0800, 0x0001]], np.uint16)          # 2**-13, 2**-24
    b = np.array([[0x0C00], [b2]], np.uint16)              # 2**-12, tiny
    c = np.zeros((1, 1), np.uint16)
    got = {arch: int(mma(a, b, c, out_fmt="fp16", arch=arch)[0, 0]) for arch in want}
    assert got == want
