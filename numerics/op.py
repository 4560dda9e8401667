"""What to compute: one tensor-core operation as a value (:class:`Op`).

An :class:`Op` is A's and B's element formats, the accumulator, and how the K chain runs
(saturation, 2:4 sparse A, the instruction, cuBLASLt's promotion interval).  It is checked once,
when made, against the format table (:data:`tcore.numerics.formats.INPUT_FORMATS`), and answers what
the golden model, the RTL's mode fields, the benches and the CLI ask of an operation, so none of
them restates a format's rule.

Its short spelling is A's format, ``.B`` where B's differs, ``->`` and the accumulator, then
marks: ``.sat`` (integer sums clamped per K step), ``.sp`` (2:4 sparse A), ``.pN`` (FP32
promotion every N of K) and ``.mma`` / ``.wgmma`` where the instruction is not the format's
default::

    fp16->fp32   fp16->fp16   bf16->fp32   tf32->fp32   e4m3.e5m2->fp16   u8.s8->s32
    s8->s32.sat  fp16->fp32.sp   e4m3->fp32.p128   fp16->fp32.wgmma

A capture's kernel name (``tcore.golden.silicon.KERNELS``) is the same operation in PTX's type names,
joined by ``_``: ``f16_f32``, ``u8_s8_s32``, ``s8_s32_sat``, ``e4m3_f32_p128``
(:attr:`Op.kernel_name`, :meth:`Op.from_kernel`).

Like the rest of :mod:`numerics` it imports nothing of the project outside it, and NumPy only
where an answer is an array or a dtype.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from . import formats
from .arch import get_arch
from .formats import OUTPUT_VALUES, PTX_NAMES, InputFormat, dtype_of, numpy_dtype

__all__ = ["Op", "UnsupportedOp", "INSTRS", "CAPTURED"]

#: The instructions an operation runs through.
INSTRS = ("mma", "wgmma")

#: The operations the H200 captures hold (``tests/data/silicon``), in the order ``tcore
#: verify`` lists their kernels; ``tcore.golden.silicon.KERNELS`` says where each one's data sits.
CAPTURED = ("fp16->fp32", "bf16->fp32", "fp16->fp16", "e4m3->fp32", "e5m2->fp32",
            "e4m3.e5m2->fp32", "e4m3->fp16", "e4m3->fp32.p128", "tf32->fp32", "s8->s32",
            "s8->s32.sat", "u8.s8->s32")

_SPELLING = "A[.B]->ACC[.sat][.sp][.pN][.mma|.wgmma], e.g. fp16->fp32 or e4m3.e5m2->fp16"
_KERNEL_SPELLING = "A[_B]_ACC[_sat][_sp][_pN][_mma|_wgmma] in PTX names, e.g. f16_f32"
_FROM_PTX = {v: k for k, v in PTX_NAMES.items()}


class UnsupportedOp(ValueError):
    """An operation that is not computed (or not modelled): every refusal reads
    ``unsupported operation <spelling>: <the rule it breaks>``."""

    def __init__(self, spelling: str, why: str):
        self.spelling, self.why = spelling, why
        super().__init__(f"unsupported operation {spelling}: {why}")


@dataclass(frozen=True)
class Op:
    """One tensor-core operation: D = A·B + C in these formats, K chained this way.

    Parameters
    ----------
    a : str
        A's format, a key of :data:`tcore.numerics.formats.INPUT_FORMATS` (``"fp16"``, ``"e4m3"``,
        ``"u8"``, ...).
    b : str or None
        B's format; None is A's default partner (its own, S8 for U8).
    acc : str or None
        The accumulator (C and D): ``"fp32"``, ``"fp16"`` or ``"s32"``; None is A's default.
    saturate : bool
        Integer inputs: each K step's sum clamped to the S32 range (``.satfinite``) instead of
        wrapped modulo 2**32.
    sparse : bool
        A is 2:4 sparse (``mma.sp``): two of every four A elements along K are zero.
    instr : str or None
        ``"mma"`` or ``"wgmma"``; None is the one the format was measured through.
    promote : int or None
        FP8 with an FP32 accumulator: cuBLASLt's accumulation, K in chunks of ``promote``
        (a multiple of the K step), each chunk's result added into FP32 with
        round-to-nearest-even; None is the plain chain.

    Members
    -------
    The missing B, accumulator and instruction are filled in, so two Ops that compute the same
    thing are equal.  Anything the table refuses raises :class:`UnsupportedOp` here, once.
    """

    a: str = "fp16"
    b: str | None = None
    acc: str | None = None
    saturate: bool = False
    sparse: bool = False
    instr: str | None = None
    promote: int | None = None

    def __post_init__(self):
        fa = formats.INPUT_FORMATS.get(self.a) if isinstance(self.a, str) else None
        if fa is not None:
            for name, value in (("b", fa.b_formats[0]), ("acc", fa.outputs[0]),
                                ("instr", fa.instrs[0])):
                if getattr(self, name) is None:
                    object.__setattr__(self, name, value)
        why = self._why_not(fa)
        if why:
            raise UnsupportedOp(self._spelling(), why)

    def _why_not(self, fa: InputFormat | None) -> str | None:
        """The rule this operation breaks, or None."""
        table = formats.INPUT_FORMATS
        if fa is None:
            return f"A's format must be one of {', '.join(table)}, not {self.a!r}"
        if self.b not in fa.b_formats:
            return f"{self.a} A pairs with {' or '.join(fa.b_formats)} B, not {self.b!r}"
        if self.acc not in fa.outputs:
            return f"{self.a} inputs accumulate in {' or '.join(fa.outputs)}, not {self.acc!r}"
        if self.instr not in fa.instrs:
            return (f"{self.a} takes instr={' or '.join(map(repr, fa.instrs))}, not "
                    f"instr={self.instr!r}" + (" (mma.sync with FP8 operands on sm_90 is a "
                                               "compiler emulation, not modelled)"
                                               if fa.kind == "fp8" else ""))
        if self.saturate and not fa.integer:
            return f"saturate (.sat) is for integer inputs, not {self.a}"
        if self.sparse and not fa.sparse:
            have = ", ".join(f.name for f in table.values() if f.sparse)
            return f"2:4 sparse A (.sp) is modelled for {have}, not {self.a}"
        if self.promote is not None:
            if fa.kind != "fp8" or self.acc != "fp32" or self.sparse:
                return ("promote (.pN) is cuBLASLt's dense FP8 accumulation: FP8 inputs with an "
                        "fp32 accumulator")
            if (isinstance(self.promote, bool) or not isinstance(self.promote, int)
                    or self.promote < 1 or self.promote % fa.k_step):
                return (f"promote must be a positive multiple of the {self.a} K step "
                        f"({fa.k_step}), not {self.promote!r}")
        return None

    # -- spellings ------------------------------------------------------------------------------

    @classmethod
    def parse(cls, text: str) -> Op:
        """The Op of a short spelling (module docstring); UnsupportedOp if it is not one."""
        m = re.fullmatch(r"([a-z0-9]+)(?:\.([a-z0-9]+))?->([a-z0-9]+)((?:\.[a-z0-9]+)*)",
                         text.strip()) if isinstance(text, str) else None
        if m is None:
            raise UnsupportedOp(repr(text), f"an operation is spelled {_SPELLING}")
        a, b, acc, marks = m.groups()
        return cls(a, b, acc, **_marks(text, marks.split(".")[1:], _SPELLING))

    @classmethod
    def from_kernel(cls, name: str) -> Op:
        """The Op of a capture's kernel name (``f16_f32``, ``u8_s8_s32``, ``e4m3_f32_p128``)."""
        parts = name.split("_") if isinstance(name, str) else []
        names = [p for p in parts if not _is_mark(p)]
        if len(names) not in (2, 3) or parts[:len(names)] != names:
            raise UnsupportedOp(repr(name), f"a kernel is named {_KERNEL_SPELLING}")
        a, *b, acc = (_FROM_PTX.get(p, p) for p in names)
        return cls(a, b[0] if b else None, acc, **_marks(name, parts[len(names):],
                                                          _KERNEL_SPELLING))

    def _parts(self) -> tuple[list[str], list[str]]:
        """(formats, marks) of the spelling: A, B where it differs, the accumulator."""
        names = [self.a, *([self.b] if self.b not in (None, self.a) else []), self.acc]
        fa = formats.INPUT_FORMATS.get(self.a)
        marks = (["sat"] * bool(self.saturate) + ["sp"] * bool(self.sparse)
                 + ([f"p{self.promote}"] if self.promote is not None else [])
                 + ([self.instr] if fa and self.instr not in (None, fa.instrs[0]) else []))
        return ["?" if n is None else str(n) for n in names], marks

    def _spelling(self) -> str:
        names, marks = self._parts()
        return ".".join(names[:-1]) + "->" + ".".join(names[-1:] + marks)

    def __str__(self) -> str:
        return self._spelling()

    @property
    def kernel_name(self) -> str:
        """The capture kernel's name of this operation (PTX type names, ``_``-joined)."""
        names, marks = self._parts()
        return "_".join([PTX_NAMES.get(n, n) for n in names] + marks)

    # -- what the layers ask --------------------------------------------------------------------

    @property
    def a_format(self) -> InputFormat:
        """A's row of the format table."""
        return formats.INPUT_FORMATS[self.a]

    @property
    def b_format(self) -> InputFormat:
        """B's row of the format table."""
        return formats.INPUT_FORMATS[self.b]

    @property
    def kind(self) -> str:
        """The datapath kind of the inputs (:data:`tcore.numerics.KINDS`)."""
        return self.a_format.kind

    @property
    def integer(self) -> bool:
        return self.a_format.integer

    @property
    def default_instr(self) -> str:
        """The instruction A's format was measured through (``tcore.golden.mma.instr_of``)."""
        return self.a_format.instrs[0]

    @property
    def k_step(self) -> int:
        """K of one m16n16 MMA step: a 256-bit row of A, twice that in logical K for a 2:4
        sparse A (``mma.sp`` k32 for FP16)."""
        return self.a_format.k_step * (2 if self.sparse else 1)

    @property
    def beat_k(self) -> int:
        """k slices of A's elements one beat of the 4x4 core carries (a 64-bit row)."""
        return self.a_format.beat_k

    @property
    def a_dtype(self):
        """NumPy dtype of A's values (``ml_dtypes`` for BF16 and FP8; float32 for TF32)."""
        return numpy_dtype(self.a_format.values)

    @property
    def b_dtype(self):
        """NumPy dtype of B's values."""
        return numpy_dtype(self.b_format.values)

    @property
    def acc_dtype(self):
        """NumPy dtype of C's and D's values: float32, float16 or int32."""
        return numpy_dtype(OUTPUT_VALUES[self.acc])

    @property
    def a_bits(self):
        """NumPy dtype of A's bit patterns (unsigned, the format's width)."""
        return numpy_dtype(self.a_format.dtype)

    @property
    def b_bits(self):
        """NumPy dtype of B's bit patterns."""
        return numpy_dtype(self.b_format.dtype)

    @property
    def acc_bits(self):
        """NumPy dtype of C's and D's bit patterns."""
        return numpy_dtype(dtype_of(self.acc))

    @property
    def mode_fields(self) -> dict:
        """The RTL's mode fields of this operation (``tcore.rtl.gemm.GemmConfig``'s, besides sizes,
        bases and ``sparse``): the kind's code, A's and B's variants, the FP16 accumulator,
        saturation, and B column-major (N x K, the TN layout) for the kinds wider than a
        32-bit pair per K step."""
        fa = self.a_format
        return {"kind": fa.code, "acc_f16": self.acc == "fp16", "a_alt": fa.alt,
                "b_alt": self.b_format.alt, "sat": bool(self.saturate), "b_cols": fa.b_cols}

    def on(self, arch) -> Op:
        """This Op, if generation ``arch`` (a name or :class:`tcore.numerics.Arch`) has its kind's
        path modelled; UnsupportedOp otherwise."""
        arch = get_arch(arch)
        if not arch.has(self.kind):
            have = ", ".join(f.name for f in formats.INPUT_FORMATS.values() if arch.has(f.kind))
            raise UnsupportedOp(f"{self} on {arch.name}",
                                f"{arch.name} has no {self.kind.upper()} path modelled (it has "
                                f"{have} inputs)")
        return self

    def random_operands(self, m: int, n: int, k: int, seed) -> tuple:
        """Random A (M, K) and B (K, N) bit patterns: standard normal values rounded to each
        format (TF32 kept as FP32 patterns), or uniform integers over the format's range.  A
        2:4 sparse Op's A is dense: prune it (``tcore.golden.sparse``)."""
        import numpy as np
        rng = np.random.default_rng(seed)

        def one(shape, dtype, bits):
            if dtype.kind in "iu":
                info = np.iinfo(dtype)
                x = rng.integers(info.min, info.max + 1, shape)
            else:
                x = rng.standard_normal(shape)
            return x.astype(dtype).view(bits)
        return one((m, k), self.a_dtype, self.a_bits), one((k, n), self.b_dtype, self.b_bits)


def _is_mark(part: str) -> bool:
    return part in ("sat", "sp", *INSTRS) or re.fullmatch(r"p[0-9]+", part) is not None


def _marks(text, marks, spelling) -> dict:
    """Op keywords of a spelling's marks; UnsupportedOp for an unknown or repeated one."""
    kw = {}
    for mark in marks:
        if not _is_mark(mark):
            raise UnsupportedOp(repr(text), f"unknown mark {mark!r}: an operation is spelled "
                                            f"{spelling}")
        key, value = ({"sat": ("saturate", True), "sp": ("sparse", True)}.get(mark)
                      or (("instr", mark) if mark in INSTRS else ("promote", int(mark[1:]))))
        if key in kw:
            raise UnsupportedOp(repr(text), f"mark {mark!r} repeats what {key} already is")
        kw[key] = value
    return kw
