"""tcore.numerics.Op: spellings, the table's refusals, and the answers layers ask of an operation."""

import ml_dtypes
import numpy as np
import pytest

from tcore.numerics import Op, UnsupportedOp
from tcore.numerics import op as op_module

# Every spelling of the issue and the captures, with the fields it stands for.
SPELLINGS = {
    "fp16->fp32": dict(a="fp16", b="fp16", acc="fp32", instr="mma"),
    "fp16->fp16": dict(a="fp16", b="fp16", acc="fp16", instr="mma"),
    "bf16->fp32": dict(a="bf16", b="bf16", acc="fp32", instr="mma"),
    "tf32->fp32": dict(a="tf32", b="tf32", acc="fp32", instr="mma"),
    "e4m3->fp32": dict(a="e4m3", b="e4m3", acc="fp32", instr="wgmma"),
    "e5m2.e4m3->fp32": dict(a="e5m2", b="e4m3", acc="fp32", instr="wgmma"),
    "e4m3.e5m2->fp16": dict(a="e4m3", b="e5m2", acc="fp16", instr="wgmma"),
    "u8.s8->s32": dict(a="u8", b="s8", acc="s32", instr="mma"),
    "s8->s32.sat": dict(a="s8", b="s8", acc="s32", instr="mma", saturate=True),
    "fp16->fp32.sp": dict(a="fp16", b="fp16", acc="fp32", instr="mma", sparse=True),
    "e4m3->fp32.p128": dict(a="e4m3", b="e4m3", acc="fp32", instr="wgmma", promote=128),
    "bf16->fp32.wgmma": dict(a="bf16", b="bf16", acc="fp32", instr="wgmma"),
}


@pytest.mark.parametrize("text", SPELLINGS)
def test_parse_gives_the_fields_and_str_gives_the_spelling_back(text):
    op = Op.parse(text)
    assert op == Op(**SPELLINGS[text])
    assert str(op) == text
    assert Op.parse(str(op)) == op


def test_defaults_fill_in_so_equal_operations_are_equal():
    assert Op("u8") == Op.parse("u8->s32") == Op.parse("u8.s8->s32")
    assert str(Op("u8")) == "u8.s8->s32"
    assert Op("e5m2") == Op.parse("e5m2.e5m2->fp32.wgmma")
    assert str(Op.parse("e5m2.e5m2->fp32.wgmma")) == "e5m2->fp32"
    assert len({Op(), Op("fp16", "fp16", "fp32"), Op.parse("fp16->fp32")}) == 1


# The capture kernels' names (tests/data/silicon) and their operations, written out.
KERNEL_NAMES = {
    "f16_f32": "fp16->fp32", "bf16_f32": "bf16->fp32", "f16_f16": "fp16->fp16",
    "e4m3_f32": "e4m3->fp32", "e5m2_f32": "e5m2->fp32", "e4m3_e5m2_f32": "e4m3.e5m2->fp32",
    "e4m3_f16": "e4m3->fp16", "e4m3_f32_p128": "e4m3->fp32.p128", "tf32_f32": "tf32->fp32",
    "s8_s32": "s8->s32", "s8_s32_sat": "s8->s32.sat", "u8_s8_s32": "u8.s8->s32",
}


@pytest.mark.parametrize("name", KERNEL_NAMES)
def test_kernel_names_round_trip(name):
    op = Op.from_kernel(name)
    assert op == Op.parse(KERNEL_NAMES[name])
    assert op.kernel_name == name


def test_the_captured_kernels_are_ops():
    from tcore.golden.silicon import KERNELS
    assert sorted(KERNELS) == sorted(KERNEL_NAMES)
    for name, k in KERNELS.items():
        assert k.op == Op.parse(KERNEL_NAMES[name]) and k.name == name
        assert k.d_key == f"d_{name}"


@pytest.mark.parametrize("text,why", [
    ("bf16->fp16", "unsupported operation bf16->fp16: bf16 inputs accumulate in fp32, not 'fp16'"),
    ("tf32->fp16", "unsupported operation tf32->fp16: tf32 inputs accumulate in fp32, not 'fp16'"),
    ("s8->fp32", "unsupported operation s8->fp32: s8 inputs accumulate in s32, not 'fp32'"),
    ("s8.u8->s32", "unsupported operation s8.u8->s32: s8 A pairs with s8 B, not 'u8'"),
    ("fp16.bf16->fp32", "unsupported operation fp16.bf16->fp32: fp16 A pairs with fp16 B, not 'bf16'"),
    ("fp16->fp32.sat", "unsupported operation fp16->fp32.sat: saturate (.sat) is for integer "
                       "inputs, not fp16"),
    ("s8->s32.sp", "unsupported operation s8->s32.sp: 2:4 sparse A (.sp) is modelled for fp16, "
                   "bf16, e4m3, e5m2, not s8"),
    ("e4m3->fp32.mma", "unsupported operation e4m3->fp32.mma: e4m3 takes instr='wgmma', not "
                       "instr='mma'"),
    ("e4m3->fp16.p128", "unsupported operation e4m3->fp16.p128: promote (.pN) is cuBLASLt's"),
    ("fp16->fp32.p128", "unsupported operation fp16->fp32.p128: promote (.pN)"),
    ("e4m3->fp32.p48", "unsupported operation e4m3->fp32.p48: promote must be a positive multiple "
                       "of the e4m3 K step (32), not 48"),
    ("fp8->fp32", "unsupported operation fp8->fp32: A's format must be one of fp16, bf16, tf32, "
                  "e4m3, e5m2, s8, u8, not 'fp8'"),
    ("fp16", "unsupported operation 'fp16': an operation is spelled A[.B]->ACC"),
    ("fp16->fp32.sp.fast", "unsupported operation 'fp16->fp32.sp.fast': unknown mark 'fast'"),
    ("fp16->fp32.sp.sp", "mark 'sp' repeats"),
])
def test_every_refusal_has_one_wording(text, why):
    with pytest.raises(UnsupportedOp) as e:
        Op.parse(text)
    assert why in str(e.value)
    assert str(e.value).startswith("unsupported operation ")
    assert isinstance(e.value, ValueError)


def test_refusals_of_keywords_and_kernel_names_share_the_wording():
    with pytest.raises(UnsupportedOp, match=r"^unsupported operation bf16->fp16: "):
        Op("bf16", acc="fp16")
    with pytest.raises(UnsupportedOp, match=r"^unsupported operation 'f16_x_y_z': a kernel is named"):
        Op.from_kernel("f16_x_y_z")
    with pytest.raises(UnsupportedOp, match=r"^unsupported operation bf16->fp16: "):
        Op.from_kernel("bf16_f16")


def test_architecture():
    assert Op.parse("bf16->fp32").on("ampere") == Op.parse("bf16->fp32")
    with pytest.raises(UnsupportedOp, match=r"^unsupported operation bf16->fp32 on volta: volta "
                                            r"has no BF16 path modelled \(it has fp16 inputs\)"):
        Op.parse("bf16->fp32").on("volta")
    with pytest.raises(UnsupportedOp, match="ampere has no FP8 path"):
        Op.parse("e4m3->fp32").on("ampere")


def test_steps_and_dtypes():
    cases = {  # spelling: k_step, beat_k, a, b, acc values, a, b, acc bits
        "fp16->fp16": (16, 4, np.float16, np.float16, np.float16, np.uint16, np.uint16, np.uint16),
        "bf16->fp32": (16, 4, ml_dtypes.bfloat16, ml_dtypes.bfloat16, np.float32, np.uint16,
                       np.uint16, np.uint32),
        "tf32->fp32": (8, 2, np.float32, np.float32, np.float32, np.uint32, np.uint32, np.uint32),
        "e4m3.e5m2->fp16": (32, 8, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2, np.float16,
                            np.uint8, np.uint8, np.uint16),
        "u8.s8->s32": (32, 8, np.uint8, np.int8, np.int32, np.uint8, np.uint8, np.uint32),
        "fp16->fp32.sp": (32, 4, np.float16, np.float16, np.float32, np.uint16, np.uint16,
                          np.uint32),
    }
    for text, want in cases.items():
        op = Op.parse(text)
        got = (op.k_step, op.beat_k, op.a_dtype, op.b_dtype, op.acc_dtype, op.a_bits, op.b_bits,
               op.acc_bits)
        assert got[:2] == want[:2], text
        assert [np.dtype(d) for d in got[2:]] == [np.dtype(d) for d in want[2:]], text


def test_mode_fields():
    assert Op.parse("fp16->fp16").mode_fields == dict(kind=0, acc_f16=True, a_alt=False,
                                                      b_alt=False, sat=False, b_cols=False)
    assert Op.parse("bf16->fp32").mode_fields["kind"] == 1
    assert Op.parse("e4m3.e5m2->fp32").mode_fields == dict(kind=3, acc_f16=False, a_alt=False,
                                                           b_alt=True, sat=False, b_cols=True)
    assert Op.parse("u8.s8->s32.sat").mode_fields == dict(kind=4, acc_f16=False, a_alt=True,
                                                          b_alt=False, sat=True, b_cols=True)


def test_default_instruction():
    assert [Op(f).default_instr for f in ("fp16", "bf16", "tf32", "e4m3", "e5m2", "s8", "u8")] \
        == ["mma", "mma", "mma", "wgmma", "wgmma", "mma", "mma"]


def test_random_operands_are_values_of_the_formats():
    a, b = Op.parse("fp16->fp32").random_operands(3, 5, 7, seed=2)
    rng = np.random.default_rng(2)
    assert np.array_equal(a, rng.standard_normal((3, 7)).astype(np.float16).view(np.uint16))
    assert np.array_equal(b, rng.standard_normal((7, 5)).astype(np.float16).view(np.uint16))
    a, b = Op.parse("u8.s8->s32").random_operands(64, 64, 64, seed=1)
    assert a.dtype == b.dtype == np.uint8 and a.shape == b.shape == (64, 64)
    assert a.min() < 8 and a.max() > 247                 # U8 over 0..255
    sb = b.view(np.int8)
    assert sb.min() < -120 and sb.max() > 119            # S8 over -128..127
    a, b = Op.parse("e4m3.e5m2->fp32").random_operands(4, 4, 32, seed=3)
    x = a.view(ml_dtypes.float8_e4m3fn).astype(np.float32)
    assert np.all(np.isfinite(x)) and 0.3 < np.std(x) < 3
    y = b.view(ml_dtypes.float8_e5m2).astype(np.float32)
    assert np.all(np.isfinite(y)) and 0.3 < np.std(y) < 3
    a2, _ = Op.parse("e4m3.e5m2->fp32").random_operands(4, 4, 32, seed=3)
    assert np.array_equal(a, a2)                         # one seed, one draw


def test_from_numerics_and_numerics_op():
    assert op_module.Op is Op


def test_a_new_input_format_is_one_table_row(monkeypatch, capsys):
    """One row added to the format table (an FP6 E3M2 of the FP8 datapath, B E3M2 or E4M3, FP32
    accumulation, its bit fields): Op, its refusals, its operands, tcore gemm's choices, the
    RTL build's answer and the golden model (mma on bits, matmul on ml_dtypes arrays) pick it
    up with no other edit."""
    from tcore import golden
    from tcore.numerics.formats import INPUT_FORMATS, Fields, InputFormat
    from tcore.rtl.designs import preset
    from tcore.sim.cli import main
    monkeypatch.setitem(INPUT_FORMATS, "e3m2", InputFormat(
        "e3m2", "fp8", True, 8, ("e3m2", "e4m3"), ("fp32",), "float6_e3m2fn", instrs=("wgmma",),
        fields=Fields(3, 2, finite=True)))

    op = Op.parse("e3m2.e4m3->fp32")
    assert op == Op("e3m2", "e4m3", "fp32", instr="wgmma") == Op.from_kernel("e3m2_e4m3_f32")
    assert str(op) == "e3m2.e4m3->fp32" and op.kernel_name == "e3m2_e4m3_f32"
    assert op.k_step == 32 and op.beat_k == 8
    assert op.mode_fields == dict(kind=3, acc_f16=False, a_alt=True, b_alt=False, sat=False,
                                  b_cols=True)
    assert np.dtype(op.a_dtype) == np.dtype(ml_dtypes.float6_e3m2fn)
    a, _ = op.random_operands(8, 8, 32, seed=4)
    x = a.view(ml_dtypes.float6_e3m2fn).astype(np.float32)
    assert a.dtype == np.uint8 and np.all(np.abs(x) <= 28) and len(np.unique(x)) > 8

    for text, why in (("e3m2->fp16", "e3m2 inputs accumulate in fp32, not 'fp16'"),
                      ("e3m2.e5m2->fp32", "e3m2 A pairs with e3m2 or e4m3 B, not 'e5m2'"),
                      ("e3m2->fp32.mma", "e3m2 takes instr='wgmma', not instr='mma'"),
                      ("e2m1->fp32", "must be one of fp16, bf16, tf32, e4m3, e5m2, s8, u8, e3m2, "
                                     "not 'e2m1'")):
        with pytest.raises(UnsupportedOp, match=rf"^unsupported operation {text}: .*{why}"):
            Op.parse(text)

    with pytest.raises(SystemExit):
        main(["gemm", "--help"])
    usage = capsys.readouterr().out
    assert "e3m2" in usage and "e3m2_e4m3" in usage
    code = main(["gemm", "--format", "e3m2", "--acc", "f16", "--m", "16", "--n", "16", "--k", "32"])
    assert code == 2
    assert "unsupported operation e3m2->fp16: e3m2 inputs accumulate in fp32" in capsys.readouterr().err

    # The RTL's FP8 datapath takes it (its unpack is the one edit there); the golden model
    # computes it from the row's bit fields.  Every E3M2 value is an E4M3 value, so the same
    # values through the captured E4M3 path are the reference.
    assert preset("lint", "gemm").supports(op) and preset("lint", "soc").supports(op)
    a, b = op.random_operands(16, 16, 32, seed=5)
    a4 = a.view(ml_dtypes.float6_e3m2fn).astype(ml_dtypes.float8_e4m3fn)
    assert np.array_equal(a4.astype(np.float64), a.view(ml_dtypes.float6_e3m2fn).astype(np.float64))
    c = np.zeros((16, 16), np.uint32)
    want = golden.mma(a4.view(np.uint8), b, c, op=Op.parse("e4m3->fp32"))
    assert np.array_equal(golden.mma(a, b, c, op=op), want)
    d = golden.matmul(a.view(ml_dtypes.float6_e3m2fn), b.view(ml_dtypes.float8_e4m3fn))
    assert np.array_equal(d.view(np.uint32), want)
