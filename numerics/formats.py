"""The element formats as one table: what every layer needs to know of an input or output format.

The golden model (``golden/``), the RTL (``rtl/``), the benches' packers (``tb/``) and the CLI
read a format's kind, variant, width, K steps and pairings here, so a fact is stated once.
The arithmetic of each kind is :mod:`numerics` (``Arch.step``); the bit fields of a format are
:mod:`tcore.golden.formats` and :mod:`tcore.rtl.formats`.  It imports nothing of the project.

Input formats (PTX names in brackets; ``../shared/spec/numerics.md``):

===========  ======  ===  ====  ======  ======  ==========  ==========  ==============  ======
format       kind    alt  bits  beat_k  k_step  B formats   outputs     values          2:4
===========  ======  ===  ====  ======  ======  ==========  ==========  ==============  ======
fp16 (f16)   fp16    no   16    4       16      fp16        fp32, fp16  float16         yes
bf16         bf16    no   16    4       16      bf16        fp32        bfloat16        yes
tf32         tf32    no   32    2       8       tf32        fp32        float32         no
e4m3         fp8     no   8     8       32      e4m3, e5m2  fp32, fp16  float8_e4m3fn   yes
e5m2         fp8     yes  8     8       32      e5m2, e4m3  fp32, fp16  float8_e5m2     yes
s8           int8    no   8     8       32      s8          s32         int8            no
u8           int8    yes  8     8       32      s8          s32         uint8           no
===========  ======  ===  ====  ======  ======  ==========  ==========  ==============  ======

``beat_k`` is the k depth of one beat of the 4x4 core (a 64-bit row of A, ``64 // bits``
elements); ``k_step`` the K of one m16n16 MMA step (256-bit rows, ``256 // bits``).  ``values``
is the NumPy (or ``ml_dtypes``) type of the elements' values; ``2:4`` whether a 2:4 sparse A
(``mma.sp``) is modelled.  Every format runs through ``mma.sync`` and ``wgmma`` (the same bits,
measured) but FP8, which runs through ``wgmma`` only (``mma.sync`` FP8 on sm_90 is a compiler
emulation, not modelled).  :class:`tcore.numerics.op.Op` is an operation on these formats.
"""

from __future__ import annotations

from dataclasses import dataclass

from .arch import KINDS

__all__ = ["Fields", "InputFormat", "INPUT_FORMATS", "OUTPUT_BITS", "OUTPUT_FIELDS",
           "OUTPUT_VALUES", "PTX_NAMES", "input_format", "dtype_of", "numpy_dtype", "values_dtype",
           "format_of",
           "float_fields"]


@dataclass(frozen=True)
class Fields:
    """A binary float format's bit fields: the sign is the top bit, then ``exp`` exponent bits
    and ``frac`` fraction bits.  ``finite``: OCP's ``fn`` encoding (no Inf; only the all-ones
    exponent and fraction is NaN, the rest of the top binade is normal: E4M3).  ``ignored``:
    low fraction bits the tensor core does not read (TF32: 13)."""
    exp: int
    frac: int
    finite: bool = False
    ignored: int = 0


@dataclass(frozen=True)
class InputFormat:
    """One input element format.

    Parameters
    ----------
    name : str
        ``"fp16"``, ``"bf16"``, ``"tf32"``, ``"e4m3"``, ``"e5m2"``, ``"s8"`` or ``"u8"``.
    kind : str
        Its datapath kind, one of :data:`tcore.numerics.KINDS`; :attr:`code` is the kind's number
        (the RTL's ``InputKind``).
    alt : bool
        The second format of its kind (E5M2 of FP8, U8 of INT8): the RTL's ``a_alt``/``b_alt``.
    bits : int
        Storage width of one element (TF32 is stored as FP32, its 13 low fraction bits ignored).
    b_formats : tuple of str
        The B formats an A of this format pairs with, its own (or the default) first.
    outputs : tuple of str
        Its accumulator (C and D) formats, the default first.
    values : str
        The NumPy type of its values, by name: a NumPy dtype (``"float16"``) or an
        ``ml_dtypes`` type (``"bfloat16"``, ``"float8_e4m3fn"``); TF32's is ``"float32"``.
    instrs : tuple of str
        The instructions modelled for it (``"mma"``, ``"wgmma"``), the one it was measured
        through first.
    sparse : bool
        Whether a 2:4 sparse A of this format (``mma.sp``) is modelled.
    fields : Fields or None
        A float format's bit fields (:class:`Fields`); None for the integers.
    """

    name: str
    kind: str
    alt: bool
    bits: int
    b_formats: tuple
    outputs: tuple
    values: str
    instrs: tuple = ("mma", "wgmma")
    sparse: bool = False
    fields: "Fields | None" = None

    @property
    def code(self) -> int:
        """The kind's number: its place in :data:`tcore.numerics.KINDS` (``tcore.rtl.formats.InputKind``)."""
        return KINDS.index(self.kind)

    @property
    def bytes(self) -> int:
        return self.bits // 8

    @property
    def dtype(self) -> str:
        """NumPy dtype string of the raw bit patterns (little-endian unsigned)."""
        return f"<u{self.bytes}" if self.bytes > 1 else "u1"

    @property
    def beat_k(self) -> int:
        """k slices of one 4x4 core beat: a 64-bit row of A."""
        return 64 // self.bits

    @property
    def k_step(self) -> int:
        """K of one m16n16 MMA step (a 256-bit row of A)."""
        return 256 // self.bits

    @property
    def integer(self) -> bool:
        return self.kind == "int8"

    @property
    def b_cols(self) -> bool:
        """Whether B is given column-major (N x K, the TN layout) to the GEMM top: every kind
        wider than a 32-bit pair per K step (TF32, FP8, INT8)."""
        return self.kind not in ("fp16", "bf16")


_FP8 = dict(outputs=("fp32", "fp16"), instrs=("wgmma",), sparse=True)
INPUT_FORMATS = {f.name: f for f in (
    InputFormat("fp16", "fp16", False, 16, ("fp16",), ("fp32", "fp16"), "float16", sparse=True,
                fields=Fields(5, 10)),
    InputFormat("bf16", "bf16", False, 16, ("bf16",), ("fp32",), "bfloat16", sparse=True,
                fields=Fields(8, 7)),
    InputFormat("tf32", "tf32", False, 32, ("tf32",), ("fp32",), "float32",
                fields=Fields(8, 23, ignored=13)),
    InputFormat("e4m3", "fp8", False, 8, ("e4m3", "e5m2"), values="float8_e4m3fn",
                fields=Fields(4, 3, finite=True), **_FP8),
    InputFormat("e5m2", "fp8", True, 8, ("e5m2", "e4m3"), values="float8_e5m2",
                fields=Fields(5, 2), **_FP8),
    InputFormat("s8", "int8", False, 8, ("s8",), ("s32",), "int8"),
    InputFormat("u8", "int8", True, 8, ("s8",), ("s32",), "uint8"),
)}

#: Accumulator (C and D) formats and their widths.
OUTPUT_BITS = {"fp32": 32, "fp16": 16, "s32": 32}
#: The float accumulators' bit fields (FP16's are its input row's).
OUTPUT_FIELDS = {"fp32": Fields(8, 23), "fp16": Fields(5, 10)}
#: Accumulator formats and the NumPy types of their values.
OUTPUT_VALUES = {"fp32": "float32", "fp16": "float16", "s32": "int32"}
#: PTX's names of the formats where they differ from ours (``.f16``, ``.f32``); capture kernel
#: names (``f16_f32``) use them.
PTX_NAMES = {"fp16": "f16", "fp32": "f32"}


def input_format(name: str) -> InputFormat:
    """The :class:`InputFormat` named ``name``; ValueError listing the formats otherwise."""
    try:
        return INPUT_FORMATS[name]
    except (KeyError, TypeError):
        raise ValueError(f"Input format must be one of {', '.join(INPUT_FORMATS)}, "
                         f"not {name!r}") from None


def dtype_of(name: str) -> str:
    """NumPy dtype string of the bit patterns of an input or output format."""
    if name in OUTPUT_BITS:
        return f"<u{OUTPUT_BITS[name] // 8}"
    return input_format(name).dtype


def numpy_dtype(type_name: str):
    """A NumPy dtype by the name the table uses: a NumPy one (``"float16"``, ``"<u2"``) or an
    ``ml_dtypes`` type (``"bfloat16"``, ``"float8_e4m3fn"``).  Imports NumPy when called."""
    import ml_dtypes
    import numpy as np
    return np.dtype(getattr(ml_dtypes, type_name) if hasattr(ml_dtypes, type_name) else type_name)


def values_dtype(name: str):
    """The NumPy dtype of a format's values: an input format's (``ml_dtypes`` for BF16 and
    FP8, float32 for TF32), an accumulator's (``fp32``, ``fp16``, ``s32``), or ``bf16`` as a
    library GEMM's output."""
    return numpy_dtype(OUTPUT_VALUES[name] if name in OUTPUT_VALUES else input_format(name).values)


def format_of(dtype, formats=None) -> str | None:
    """The input format (of ``formats``, default every one) whose values are of NumPy
    ``dtype``, read from the table (float32 is TF32's; uint8 is U8's); None where none is."""
    import numpy as np
    want = np.dtype(dtype)
    for name in (INPUT_FORMATS if formats is None else formats):
        if values_dtype(name) == want:
            return name
    return None


def float_fields() -> dict:
    """Every float format's :class:`Fields` by name: the inputs' and the accumulators'."""
    out = {name: f.fields for name, f in INPUT_FORMATS.items() if f.fields is not None}
    for name, fields in OUTPUT_FIELDS.items():
        assert out.setdefault(name, fields) == fields, name
    return out
