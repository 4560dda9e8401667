"""Golden model: NumPy, vectorised, bit-exact to the H200 tensor core.

Data flows formats → dot (block fused dot-add) → mma (tiles, K chaining) → wmma (fragments)
→ gemm → nvfp4; :func:`matmul` (``floats.py``) is the same arithmetic on NumPy floats.  The arithmetic is the rule in ``docs/numerics.md`` (measured on an H200);
the captured silicon vectors in ``tests/data/silicon`` are its reference.
"""

from .arch import ARCHS, AMPERE, HOPPER, VOLTA, Arch, get_arch
from .formats import BF16, FP16, FP32, get_format
from .mma import mma, mma4
from .floats import matmul
from .sparse import SparseA, matmul_sp, mma_sp

__all__ = ["matmul", "mma", "mma4", "Arch", "ARCHS", "HOPPER", "AMPERE", "VOLTA", "get_arch",
           "FP16", "BF16", "FP32", "get_format"]
