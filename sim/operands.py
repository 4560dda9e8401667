"""GEMM operands: random ones of each input format, and a user's matrices read from .npy files.

``tcore gemm`` and the benches take their operands from here; random ones are
:meth:`tcore.numerics.Op.random_operands`.  Loaders raise :class:`OperandError`, whose message names
the operand as its command-line flag (``--a``).
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["OperandError", "fp4_operands", "load_matrix",
           "operand_bits"]


class OperandError(ValueError):
    """An operand file that cannot be used: missing, not one 2-D array, or of the wrong type."""


def fp4_operands(m, n, k, seed):
    """Random float32 A (M, K) and B (K, N), standard normal: the inputs an NVFP4/MXFP4 GEMM
    quantises."""
    import numpy as np
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    return a, b


def load_matrix(path: str, what: str):
    """Load a 2-D operand from a .npy file; ``what`` names it in errors (``--what``)."""
    import numpy as np
    p = Path(path)
    if p.is_dir():
        raise OperandError(f"--{what} {path}: is a directory, not a .npy file")
    if not p.is_file():
        raise OperandError(f"--{what} {path}: no such file")
    try:
        x = np.load(p, allow_pickle=False)
    except (OSError, ValueError, EOFError) as e:
        raise OperandError(f"--{what} {path}: not a NumPy .npy array ({e})") from None
    if not isinstance(x, np.ndarray):
        raise OperandError(f"--{what} {path}: an .npz archive; give one array as .npy (numpy.save)")
    if x.ndim != 2:
        raise OperandError(f"--{what} {path}: must be a 2-D matrix, not shape {x.shape}")
    return x


def operand_bits(x, what: str, fmt: str | None) -> tuple:
    """``(bits, format)`` of a loaded operand: its dtype says the format (float16 is FP16);
    raw 2-byte data (uint16 bit patterns, or an ml_dtypes bfloat16 array, which ``numpy.save``
    stores as 2-byte void) needs ``fmt``.  float32 and other dtypes are refused, never
    rounded."""
    import ml_dtypes
    import numpy as np
    if x.dtype == np.float16:
        if fmt not in (None, "fp16"):
            raise OperandError(f"--{what} holds float16 (FP16) values but --format is {fmt}")
        return x.view(np.uint16), "fp16"
    if x.dtype == ml_dtypes.bfloat16:
        if fmt not in (None, "bf16"):
            raise OperandError(f"--{what} holds bfloat16 (BF16) values but --format is {fmt}")
        return x.view(np.uint16), "bf16"
    if x.dtype.itemsize == 2 and x.dtype.kind in "uV":
        if fmt not in ("fp16", "bf16"):
            raise OperandError(f"--{what} holds raw 16-bit data ({x.dtype}: uint16 bit patterns, or "
                               "a bfloat16 array as numpy.save stores it): say which with --format "
                               "fp16|bf16")
        return x.view(np.uint16), fmt
    if x.dtype == np.float32:
        raise OperandError(f"--{what} is float32: the GEMM top takes FP16 or BF16 operands; round "
                           "them yourself (x.astype(numpy.float16) or ml_dtypes.bfloat16) to say how "
                           "(golden.matmul computes float32 inputs as TF32)")
    raise OperandError(f"--{what} has dtype {x.dtype}; tcore gemm takes float16 or bfloat16 arrays "
                       "(or uint16 bit patterns with --format)")
