"""The GEMM accelerator's control registers, as data: one definition for the RTL, the
documentation (``docs/registers.md``) and the benches.

32-bit registers on an AXI4-Lite slave, byte addresses, little-endian.  Each register is a list
of :class:`Field`\\ s; a field's :class:`Access` says what the hardware does with it:

* ``RW``: held in a register, read back; reset to ``reset``.
* ``RO``: driven by the engine; writes are ignored.  A field marked ``const`` is a build-time
  constant instead (ID, VERSION, CAPS), its ``reset`` the default.
* ``W1S``: write 1 to act (a one-clock pulse to the engine); reads 0.
* ``W1C``: a sticky bit the engine sets; write 1 to clear.

:func:`markdown` writes the register map document from these definitions.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from tcore.numerics.formats import INPUT_FORMATS

__all__ = ["Access", "Field", "Register", "REGISTERS", "ErrorCode", "InFormat", "ID_VALUE",
           "VERSION", "ADDR_BITS", "IN_BYTES", "register", "markdown", "c_header"]

ADDR_BITS = 8            # 64 32-bit registers of address space
ID_VALUE = 0x7463_6F72   # "tcor"
VERSION = (0, 2)


class Access(enum.Enum):
    RW = "rw"
    RO = "ro"
    W1S = "w1s"
    W1C = "w1c"


class ErrorCode(enum.IntEnum):
    """STATUS.error: why the last start was refused or a run stopped (0 while none)."""
    NONE = 0
    BAD_SIZE = 1          # M, N or K zero, not a multiple of 16 (K: of the kind's step), too big
    MISALIGNED = 2        # a base address not a multiple of 16 bytes
    BAD_LD = 3            # a leading dimension below the row length or rows not 16-byte aligned
    BAD_FORMAT = 4        # an unsupported format / accumulator / b_alt / sat combination
    READ_SLVERR = 5       # the memory answered a read with SLVERR
    READ_DECERR = 6       # ... with DECERR
    WRITE_SLVERR = 7      # the memory answered a write with SLVERR
    WRITE_DECERR = 8      # ... with DECERR
    ADDR_RANGE = 9        # a base address (or the end of an operand) beyond the address width
    ENGINE = 10           # the warp refused a command (an internal fault; not expected)


class InFormat(enum.IntEnum):
    """FORMAT.in_fmt: the element format of A (and of B, but for ``FORMAT.b_alt`` and U8)."""
    FP16 = 0
    BF16 = 1
    TF32 = 2              # FP32 patterns, the 13 low fraction bits ignored
    E4M3 = 3              # FP8
    E5M2 = 4              # FP8
    S8 = 5                # INT8, two's complement
    U8 = 6                # INT8 A unsigned, B S8


#: Bytes of an A/B element per input format (TF32 elements are 32-bit words).
IN_BYTES = {f: INPUT_FORMATS[f.name.lower()].bytes for f in InFormat}


@dataclass(frozen=True)
class Field:
    name: str
    lsb: int
    width: int
    access: Access
    reset: int = 0
    doc: str = ""
    const: bool = False

    def __post_init__(self):
        if self.const and self.access is not Access.RO:
            raise ValueError(f"Field {self.name!r}: only read-only fields can be constants")
        if not (0 <= self.lsb and self.width >= 1 and self.lsb + self.width <= 32):
            raise ValueError(f"Field {self.name!r} must fit 32 bits, not lsb {self.lsb} width {self.width}")
        if not 0 <= self.reset < (1 << self.width):
            raise ValueError(f"Field {self.name!r}: reset {self.reset} does not fit {self.width} bits")

    @property
    def mask(self) -> int:
        return ((1 << self.width) - 1) << self.lsb


@dataclass(frozen=True)
class Register:
    name: str
    offset: int
    fields: tuple
    doc: str = ""

    def __post_init__(self):
        if self.offset % 4 or not 0 <= self.offset < (4 << ADDR_BITS):
            raise ValueError(f"Register {self.name!r}: offset {self.offset:#x} is not a word in range")
        used = 0
        for f in self.fields:
            if used & f.mask:
                raise ValueError(f"Register {self.name!r}: field {f.name!r} overlaps another")
            used |= f.mask

    @property
    def reset(self) -> int:
        return sum(f.reset << f.lsb for f in self.fields)

    def pack(self, **values) -> int:
        """The register word with these field values (others 0); refuses unknown fields and
        values that do not fit."""
        byname = {f.name: f for f in self.fields}
        word = 0
        for name, v in values.items():
            if name not in byname:
                raise ValueError(f"{self.name} has no field {name!r}")
            f = byname[name]
            if not 0 <= int(v) < (1 << f.width):
                raise ValueError(f"{self.name}.{name} = {v} does not fit {f.width} bits")
            word |= int(v) << f.lsb
        return word

    def unpack(self, word: int) -> dict:
        """Field name -> value of a register word."""
        return {f.name: (word & f.mask) >> f.lsb for f in self.fields}


def _word(name, offset, doc, access=Access.RW, reset=0, const=False):
    return Register(name, offset, (Field("value", 0, 32, access, reset, doc, const),), doc)


def _const(name, lsb, width, reset, doc):
    return Field(name, lsb, width, Access.RO, reset, doc, const=True)


REGISTERS = (
    _word("ID", 0x00, "Identifies the block: 0x74636F72 (\"tcor\").", Access.RO, ID_VALUE, True),
    Register("VERSION", 0x04, (
        _const("minor", 0, 16, VERSION[1], "Minor version."),
        _const("major", 16, 16, VERSION[0], "Major version."),
    ), "Register-map version."),
    Register("CAPS", 0x08, (
        _const("fp16", 0, 1, 1, "FP16 inputs."),
        _const("bf16", 1, 1, 1, "BF16 inputs."),
        _const("acc_f16", 2, 1, 1, "FP16 accumulators (with FP16 inputs)."),
        _const("c_given", 3, 1, 1, "D = A*B + C."),
        _const("tf32", 4, 1, 1, "TF32 inputs."),
        _const("fp8", 5, 1, 1, "FP8 inputs (E4M3, E5M2, mixed), FP32 or FP16 accumulators."),
        _const("int8", 6, 1, 1, "INT8 inputs (S8, U8 x S8), S32 accumulators, wrap or satfinite."),
        _const("warps", 8, 4, 1, "Warps (each with a 4x4x4 core) in the engine."),
        _const("data_bytes_log2", 12, 4, 4, "log2 of the AXI4 master's data bytes."),
        _const("max_tiles_log2", 16, 5, 10, "M, N and K are at most 16 * 2**this."),
    ), "What this build does (read-only; set at build time)."),
    Register("CTRL", 0x0C, (
        Field("start", 0, 1, Access.W1S, 0, "Write 1: check the configuration and start "
              "(ignored while busy)."),
        Field("irq_en", 1, 1, Access.RW, 0, "Raise irq while STATUS.done is set."),
        Field("soft_reset", 2, 1, Access.W1S, 0, "Write 1: stop after the burst or warp "
              "command in flight (no AXI transfer is cut short), clear STATUS and the counters."),
    ), "Control."),
    Register("STATUS", 0x10, (
        Field("busy", 0, 1, Access.RO, 0, "A GEMM runs."),
        Field("done", 1, 1, Access.W1C, 0, "The last GEMM ended (successfully or with an "
              "error); write 1 to clear (and drop irq)."),
        Field("error", 4, 4, Access.RO, 0, "Error code of the last start or run "
              "(`ErrorCode`: 0 none)."),
    ), "Status."),
    _word("M", 0x14, "Rows of A and D (a multiple of 16)."),
    _word("N", 0x18, "Columns of B and D (a multiple of 16)."),
    _word("K", 0x1C, "Columns of A, rows of B (a multiple of 16; of 8 for TF32, 32 for FP8 and INT8)."),
    Register("FORMAT", 0x20, (
        Field("in_fmt", 0, 3, Access.RW, 0, "A and B: 0 FP16, 1 BF16, 2 TF32, 3 E4M3, 4 E5M2, "
              "5 S8, 6 U8 (A; B is S8) (`InFormat`).  TF32, FP8 and INT8 take B column-major: "
              "B^T (N x K) row-major at B_LO/B_HI, leading dimension LDB >= K."),
        Field("acc_f16", 4, 1, Access.RW, 0, "C and D are FP16 (else FP32, S32 for INT8); FP16 "
              "and FP8 inputs only."),
        Field("b_alt", 5, 1, Access.RW, 0, "FP8 only: B is the other FP8 format (E5M2 with E4M3 "
              "A, E4M3 with E5M2 A)."),
        Field("c_given", 8, 1, Access.RW, 0, "D = A*B + C (else D = A*B, C not read)."),
        Field("sat", 9, 1, Access.RW, 0, "INT8 only: each K step's S32 result is clamped "
              "(satfinite) instead of wrapped."),
    ), "Formats."),
    _word("A_LO", 0x24, "Byte address of A, bits 31..0 (16-byte aligned)."),
    _word("A_HI", 0x28, "Byte address of A, bits 63..32."),
    _word("B_LO", 0x2C, "Byte address of B, bits 31..0."),
    _word("B_HI", 0x30, "Byte address of B, bits 63..32."),
    _word("C_LO", 0x34, "Byte address of C, bits 31..0."),
    _word("C_HI", 0x38, "Byte address of C, bits 63..32."),
    _word("D_LO", 0x3C, "Byte address of D, bits 31..0."),
    _word("D_HI", 0x40, "Byte address of D, bits 63..32."),
    _word("LDA", 0x44, "Leading dimension of A in elements (row-major: >= K; rows 16-byte "
          "aligned: a multiple of 8 16-bit, 4 TF32 or 16 8-bit elements)."),
    _word("LDB", 0x48, "Leading dimension of B in elements (>= N, or >= K for B^T; rows 16-byte aligned)."),
    _word("LDC", 0x4C, "Leading dimension of C in elements (>= N, a multiple of 8)."),
    _word("LDD", 0x50, "Leading dimension of D in elements (>= N, a multiple of 8)."),
    _word("CYCLES_LO", 0x54, "Clocks of the last (or current) run, bits 31..0.", Access.RO),
    _word("CYCLES_HI", 0x58, "Clocks, bits 63..32.", Access.RO),
    _word("BEATS_LO", 0x5C, "Core beats of the run, bits 31..0: 64 per WMMA step of 16x16 "
          "(a beat is 64 FMA in FP16/BF16, 32 in TF32, 128 in FP8/INT8).", Access.RO),
    _word("BEATS_HI", 0x60, "Core beats, bits 63..32.", Access.RO),
)


def register(name: str) -> Register:
    for r in REGISTERS:
        if r.name == name:
            return r
    raise KeyError(f"no register {name!r}")


def _check_map():
    offsets = [r.offset for r in REGISTERS]
    if len(set(offsets)) != len(offsets):
        raise ValueError("two registers share an offset")


_check_map()

_ACCESS_DOC = {Access.RW: "read/write", Access.RO: "read-only", Access.W1S: "write 1 to act, reads 0",
               Access.W1C: "set by the engine, write 1 to clear"}


def _access_doc(f: Field) -> str:
    return "read-only, set at build time" if f.const else _ACCESS_DOC[f.access]

PROGRAMMING = """\
## Programming sequence

1. Read `ID` (0x74636F72) and `CAPS` to check the build.
2. Write `M`, `N`, `K`, `FORMAT`, the base addresses `A_LO`/`A_HI` .. `D_LO`/`D_HI` and the
   leading dimensions `LDA` .. `LDD` (`LDC` only matters with `FORMAT.c_given`).
3. Write `CTRL` with `start` = 1 (and `irq_en` = 1 for an interrupt).  The configuration is
   checked first: a bad one sets `STATUS.done` with `STATUS.error` != 0 and makes no memory
   access at all.
4. Wait for `irq` (or poll `STATUS` until `busy` = 0 and `done` = 1).  `STATUS.error` = 0:
   D is in memory; otherwise the run stopped at the error, and no D tile that depends on a
   failed read was written.
5. Write `STATUS` with `done` = 1 to clear it (and drop `irq`).  `CYCLES` and `BEATS` hold the
   run's clocks and core beats (64 per 16x16 WMMA step): FP16 utilisation = BEATS / CYCLES / warps.  The
   counters stop when a run ends; during a run, read `_HI`, `_LO`, then `_HI` again and
   repeat if it changed.
"""


def markdown() -> str:
    """The register map document (``docs/registers.md``), from :data:`REGISTERS`."""
    out = ["# GEMM accelerator registers", "",
           "Generated from `rtl/regmap.py` (the definition the RTL is built from) by "
           "`tcore regs -o docs/registers.md`; a test checks that the two agree.", "",
           f"AXI4-Lite slave, 32-bit data, {ADDR_BITS + 2}-bit byte addresses; unmapped "
           "addresses answer SLVERR, writes to read-only fields are ignored.", "",
           "| offset | register | reset | description |", "|---|---|---|---|"]
    for r in REGISTERS:
        out.append(f"| 0x{r.offset:02X} | `{r.name}` | 0x{r.reset:08X} | {r.doc} |")
    out.append("")
    for r in REGISTERS:
        out += [f"## `{r.name}` (0x{r.offset:02X})", "", r.doc, "",
                "| bits | field | access | reset | description |", "|---|---|---|---|---|"]
        for f in r.fields:
            bits = f"{f.lsb}" if f.width == 1 else f"{f.lsb + f.width - 1}:{f.lsb}"
            out.append(f"| {bits} | `{f.name}` | {_access_doc(f)} | {f.reset:#x} | {f.doc} |")
        out.append("")
    out += ["## Error codes (`STATUS.error`)", "", "| code | name |", "|---|---|"]
    out += [f"| {e.value} | `{e.name}` |" for e in ErrorCode]
    out += ["", PROGRAMMING]
    return "\n".join(out)


def _c_name(*parts: str) -> str:
    return "_".join(p.upper() for p in ("TCORE",) + parts)


def c_header() -> str:
    """``tcore_regs.h``: the register map as C macros (byte offsets, each field's LSB, width
    and mask, the build constants' reset values) and the error and format codes as enums, from
    :data:`REGISTERS`; ``tcore regs --c-header`` writes it."""
    out = ["/* tcore_regs.h: the tcore GEMM accelerator's register map.",
           " * Generated from rtl/regmap.py by `tcore regs --c-header`; do not edit.",
           f" * AXI4-Lite slave, 32-bit registers, {ADDR_BITS + 2}-bit byte offsets. */",
           "#ifndef TCORE_REGS_H", "#define TCORE_REGS_H", "",
           f"#define TCORE_ID_VALUE 0x{ID_VALUE:08X}u",
           f"#define TCORE_REG_SPAN 0x{4 << ADDR_BITS:X}u", "", "/* Register byte offsets */"]
    out += [f"#define {_c_name('REG', r.name):28s} 0x{r.offset:02X}u /* {r.doc} */" for r in REGISTERS]
    out += ["", "/* Fields: _LSB, _WIDTH, _MASK (in place); build constants also _RESET */"]
    for r in REGISTERS:
        if len(r.fields) == 1 and r.fields[0].width == 32:
            continue
        for f in r.fields:
            base = _c_name(r.name, f.name)
            out += [f"#define {base}_LSB {f.lsb}u", f"#define {base}_WIDTH {f.width}u",
                    f"#define {base}_MASK 0x{f.mask:08X}u"]
            if f.const:
                out.append(f"#define {base}_RESET {f.reset}u")
    out += ["", "/* STATUS.error codes */", "enum tcore_error {"]
    out += [f"    {_c_name('ERR', e.name)} = {e.value}," for e in ErrorCode]
    out += ["};", "", "/* FORMAT.in_fmt codes */", "enum tcore_in_format {"]
    out += [f"    {_c_name('FMT', e.name)} = {e.value}," for e in InFormat]
    out += ["};", "", "#endif /* TCORE_REGS_H */", ""]
    return "\n".join(out)
