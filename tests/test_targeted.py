"""The 55 discriminating cases of h200_targeted.npz, one named test each, all three kernels.

Case q sits on the diagonal of tile q // 16 (row and column q % 16).  Each also checks that a
rule with one parameter changed gets it wrong where the case is built to pin that parameter.
"""

import numpy as np
import pytest

from golden import Arch, mma
from golden.silicon import KERNELS, load

from .conftest import SILICON

DATA = load(SILICON / "h200_targeted.npz")
NAMES = [str(n) for n in DATA["names"]]


def _golden(kernel, arch="hopper", mode="hopper"):
    k = KERNELS[kernel]
    return mma(DATA["a"], DATA["b"], DATA[k.c_key], in_fmt=k.in_fmt, out_fmt=k.out_fmt,
               arch=arch, mode=mode)


GOT = {k: _golden(k) for k in KERNELS}


def test_case_count():
    assert len(NAMES) == 55


@pytest.mark.parametrize("kernel", list(KERNELS))
@pytest.mark.parametrize("q", range(len(NAMES)), ids=NAMES)
def test_targeted_case(q, kernel):
    t, i = divmod(q, 16)
    want = DATA[KERNELS[kernel].d_key][t, i, i]
    got = GOT[kernel][t, i, i]
    assert got == want, f"{NAMES[q]} {kernel}: golden {got:#x}, H200 {want:#x}"


def _cases(prefix):
    return [q for q, n in enumerate(NAMES) if n.startswith(prefix)]


def _diag(bits, qs):
    return np.array([bits[q // 16, q % 16, q % 16] for q in qs])


@pytest.mark.parametrize("prefix,changed,kernel", [
    ("blockwidth", Arch("n8", block=8, grid=25, f16_floor=-21), "f16_f32"),
    ("extrabits", Arch("F24", block=16, grid=24, f16_floor=-21), "f16_f32"),
    ("floor_", Arch("floor22", block=16, grid=25, f16_floor=-22), "f16_f16"),
])
def test_cases_pin_their_parameter(prefix, changed, kernel):
    qs = _cases(prefix)
    assert qs
    want = _diag(DATA[KERNELS[kernel].d_key], qs)
    assert np.array_equal(_diag(GOT[kernel], qs), want)
    assert not np.array_equal(_diag(_golden(kernel, arch=changed), qs), want)


def test_ieee_reference_differs_from_silicon_on_targeted_cases():
    for kernel in ("f16_f32", "f16_f16"):
        want = DATA[KERNELS[kernel].d_key]
        assert (_golden(kernel, mode="ieee") != want).sum() > 0
