"""The board: its top on Verilator with the real firmware, protocol and UART, driven by the
host code a PC runs (``tcore board run``), every D checked against the golden model; and the
pieces a board build needs (the PLL settings, the platforms' pins, the generated header)."""

import shutil
import struct

import numpy as np
import pytest

from tcore.sim.board import protocol as P
from tcore.sim.board.boards import BOARDS, BoardBuild, board_of

HAVE_GCC = shutil.which("riscv64-unknown-elf-gcc") is not None
needs_gcc = pytest.mark.skipif(not HAVE_GCC, reason="gcc-riscv64-unknown-elf not installed")


# -- no simulation --------------------------------------------------------------------------------

def test_committed_board_header_is_the_generated_one():
    from pathlib import Path
    from tcore.sim.board.firmware import header_text
    root = Path(__file__).resolve().parent.parent
    assert (root / "sw/include/tcore_board.h").read_text() == header_text()


def test_frames_carry_crc32_of_type_length_and_payload():
    f = P.frame(P.H2B.READ, struct.pack("<II", 16, 32))
    assert f[0] == 0xA5 and f[1] == 0x03 and f[2:4] == b"\x08\x00"
    # CRC-32/IEEE of "type, length, payload" (zlib's check value of b"123456789" is 0xCBF43926)
    assert P.crc32(b"123456789") == 0xCBF43926
    import zlib
    assert struct.unpack("<I", f[-4:])[0] == zlib.crc32(f[1:-4])
    with pytest.raises(ValueError, match="at most 1024"):
        P.frame(P.H2B.WRITE, bytes(1025))


@pytest.mark.parametrize("f_in, f_out", [(25e6, 62.5e6), (25e6, 100e6), (100e6, 75e6), (48e6, 60e6)])
def test_pll_settings_keep_the_ecp5_ranges(f_in, f_out):
    from tcore.rtl.board import pll_config
    cfg = pll_config(f_in, f_out)
    pfd = f_in / cfg["CLKI_DIV"]
    out = pfd * cfg["CLKFB_DIV"]
    assert out == pytest.approx(cfg["f_out"]) and abs(out - f_out) <= 0.005 * f_out
    assert 3.125e6 <= pfd <= 400e6 and 400e6 <= out * cfg["CLKOP_DIV"] <= 800e6


def test_pll_refuses_what_it_cannot_make():
    from tcore.rtl.board import pll_config
    with pytest.raises(ValueError, match="no ECP5 PLL setting"):
        pll_config(25e6, 1e9)


def test_uart_divisor_and_refusals():
    from tcore.rtl.uart import divisor_of
    assert divisor_of(50e6, 115200) == 434
    with pytest.raises(ValueError, match="at least 4"):
        divisor_of(10e6, 3_000_000)
    with pytest.raises(ValueError, match="off"):
        divisor_of(20e6, 2_500_000 + 700_000)       # 6.25 clocks a bit: 4 % off


@pytest.mark.parametrize("name", [pytest.param(b, marks=[] if b == "ulx3s-85f" else pytest.mark.slow)
                                  for b in BOARDS])
def test_each_board_plan_has_its_pins_and_clock(name):
    """Amaranth's platform makes the build plan: the UART, LED and clock pins of the board are
    in the LPF, the PLL is in the netlist, the PLL's output is constrained."""
    pytest.importorskip("amaranth_boards")
    from tcore.rtl.board import BoardChip, BoardTop
    board = board_of(name)
    build = BoardBuild(board)
    platform = board.make_platform()
    top = BoardTop(firmware=b"\x13\x00\x00\x00", **build.top_params())
    plan = platform.prepare(BoardChip(board, top, build.clk_hz), name="tcore")
    lpf, il = plan.files["tcore.lpf"], plan.files["tcore.il"]
    assert f'FREQUENCY NET "clk_core" {build.clk_hz:.1f} HZ;' in lpf
    assert "uart_" in lpf and "LOCATE COMP" in lpf
    assert "EHXPLLL" in il and "picorv32" in il


def test_board_build_options_refused_in_one_line():
    from tcore.sim.board.boards import BoardError
    with pytest.raises(BoardError, match="--lanes must be"):
        BoardBuild(board_of("ulx3s-85f"), lanes=8)
    with pytest.raises(BoardError, match="unknown board"):
        board_of("de10-nano")
    with pytest.raises(BoardError, match="baud"):
        BoardBuild(board_of("ulx3s-85f"), baud=5_000_000)


@needs_gcc
def test_selftest_operands_are_the_firmwares():
    """The firmware's expected D is the golden model's on the operands the Python mirror of its
    generator draws; the mirror's first words are the xorshift32 sequence of the seed."""
    from tcore.sim.board.firmware import SELFTEST_CASES, _xorshift, selftest_operands
    x = 0x1001
    x ^= (x << 13) & 0xFFFFFFFF
    x ^= x >> 17
    x ^= (x << 5) & 0xFFFFFFFF
    assert int(_xorshift(0x1001, 1)[0]) == x
    a, b, c = selftest_operands(SELFTEST_CASES[0])
    assert a.shape == (32, 32) and a.dtype == np.uint16
    # every element finite, in [2^-3, 2)
    v = a.view(np.float16).astype(np.float64)
    assert np.isfinite(v).all() and (np.abs(v) < 2).all() and (np.abs(v) >= 2.0 ** -3).all()


# -- the simulated board -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def board():
    """One simulated ULX3S-85F board for the module's tests, and its reset text and INFO."""
    if not HAVE_GCC:
        pytest.skip("gcc-riscv64-unknown-elf not installed")
    pytest.importorskip("serial")
    from tcore.sim.board.link import BoardLink, open_port
    from tcore.sim.board.simulate import simulated_board
    with simulated_board(BoardBuild(board_of("ulx3s-85f"), sim=True)) as url:
        link = BoardLink(open_port(url, timeout=0.2), reply_s=300)
        info = link.info()
        text = list(link.text)
        link.close()
        yield {"url": url, "text": text, "info": info}


@pytest.fixture
def link(board):
    from tcore.sim.board.link import BoardLink, open_port
    lk = BoardLink(open_port(board["url"], timeout=0.2), reply_s=300)
    yield lk
    lk.close()


def test_board_boots_and_every_selftest_kind_is_bit_exact(board):
    from tcore.sim.board.firmware import SELFTEST_CASES
    text, info = board["text"], board["info"]
    assert info["magic"] == 0x74636264 and info["lanes"] == 16
    assert info["selftest_cases"] == len(SELFTEST_CASES) and info["selftest_failed"] == 0
    for case in SELFTEST_CASES:
        lines = [t for t in text if t.startswith(case.name + " ")]
        assert len(lines) == 1, (case.name, text)
        assert "32x32x32: 0 of 1,024 outputs differ, " in lines[0]
    assert "self-test: passed" in text
    assert any("2:4 sparse: not in this build" in t for t in text)


def _gemm(kind: str, m=16, n=16, k=32, c=True, seed=0):
    """Random operands of an operation (an Op spelling), C of the accumulator's values."""
    from tcore.numerics import Op
    from tcore.sim.board.gemm import BoardGemm
    op = Op.parse(kind)
    a, b = op.random_operands(m, n, k, seed)
    rng = np.random.default_rng(seed + 100)
    cb = None
    if c:
        if op.acc == "s32":
            cb = rng.integers(-2**31, 2**31, (m, n)).astype(np.int32).view(np.uint32)
        else:
            cb = rng.standard_normal((m, n)).astype(op.acc_dtype).view(op.acc_bits)
    return BoardGemm(a, b, cb, op)


KINDS = {"fp16->fp32": [], "fp16->fp16": ["--acc", "f16"], "bf16->fp32": ["--format", "bf16"],
         "tf32->fp32": ["--format", "tf32"], "e4m3->fp32": ["--format", "e4m3"],
         "e5m2->fp16": ["--format", "e5m2", "--acc", "f16"],
         "e4m3.e5m2->fp32": ["--format", "e4m3_e5m2"], "s8->s32": ["--format", "s8"],
         "u8.s8->s32.sat": ["--format", "u8", "--acc", "s32sat"]}


# The reset self-test checks every kind in make test; three kinds run through the CLI there
# too, the rest in the slow tests.
_FAST_KINDS = ("fp16->fp32", "e4m3.e5m2->fp32", "u8.s8->s32.sat")


@pytest.mark.parametrize("kind", [pytest.param(k, marks=[] if k in _FAST_KINDS else pytest.mark.slow)
                                  for k in KINDS])
def test_one_gemm_of_each_kind_through_tcore_board_run_is_bit_exact(board, kind, tmp_path, capsys):
    """``tcore board run`` on the simulated board, random operands of each kind: D (-o) is
    the golden model's D of the same operands."""
    import json
    from tcore.golden.mma import mma
    from tcore.numerics import Op
    from tcore.sim.cli import main
    m, n, k, seed = 16, 32, 64, list(KINDS).index(kind) + 3
    out = tmp_path / "d.npz"
    rc = main(["board", "run", "--port", board["url"], "--m", str(m), "--n", str(n), "--k", str(k),
               "--seed", str(seed), *KINDS[kind], "-o", str(out), "--json", "--quiet"])
    said = capsys.readouterr().out
    assert rc == 0, said
    s = json.loads(said.strip().splitlines()[-1])
    assert s["op"] == kind and s["mismatches"] == 0 and s["cycles"] > 0
    op = Op.parse(kind)
    a, b = op.random_operands(m, n, k, seed)
    want = mma(a, b, np.zeros((m, n), op.acc_bits), op=op)
    d = np.load(out)["d_bits"]
    assert np.array_equal(d, want) and d.any()


@pytest.mark.parametrize("kind", ["fp16->fp16", pytest.param("e5m2->fp16", marks=pytest.mark.slow),
                                  pytest.param("u8.s8->s32.sat", marks=pytest.mark.slow)])
def test_gemms_with_c_through_the_host_code_are_bit_exact(link, kind):
    from tcore.sim.board.gemm import golden_d, run_on_board
    g = _gemm(kind, seed=len(kind))
    r = run_on_board(link, g)
    assert r["mismatches"] == 0
    assert np.array_equal(r["d"], golden_d(g)) and r["d"].any()
    assert r["beats"] > 0 and r["cycles"] > 0


def _tiny_gemm_is_bit_exact(link):
    from tcore.sim.board.gemm import run_on_board
    r = run_on_board(link, _gemm("fp16->fp32", 16, 16, 16, seed=7))
    assert r["mismatches"] == 0 and r["d"].any()


def _expect_error(link, code):
    from tcore.sim.board.link import BoardReplyError
    with pytest.raises(BoardReplyError) as e:
        link.answer()
    assert e.value.code == code, str(e.value)
    return e.value


def _run_payload(**f):
    return struct.pack(f"<{len(P.RUN_FIELDS)}I", *(int(f.get(x, 0)) for x in P.RUN_FIELDS))


def test_damaged_frames_get_their_error_and_the_board_serves_on(link):
    good = P.frame(P.H2B.WRITE, struct.pack("<I", 0) + bytes(range(64)))
    # a corrupted frame: one payload bit flipped (its CRC no longer matches)
    bad = bytearray(good)
    bad[10] ^= 0x10
    link.send_raw(bytes(bad))
    _expect_error(link, P.Error.CRC)
    _tiny_gemm_is_bit_exact(link)
    # a wrong CRC
    link.send_raw(good[:-4] + bytes(4))
    _expect_error(link, P.Error.CRC)
    _tiny_gemm_is_bit_exact(link)
    # a truncated frame: the line falls silent inside it
    link.send_raw(good[:30])
    _expect_error(link, P.Error.TRUNCATED)
    _tiny_gemm_is_bit_exact(link)
    # a length over the largest payload, and an unknown request
    link.send_raw(bytes([P.SYNC, P.H2B.WRITE, 0xFF, 0x7F]) + bytes(16))
    _expect_error(link, P.Error.LENGTH)
    link.send_raw(P.frame(0x42))
    assert _expect_error(link, P.Error.TYPE).detail == 0x42
    _tiny_gemm_is_bit_exact(link)


def test_refused_gemms_get_their_error_and_the_next_runs_bit_exact(link, board):
    mem = board["info"]["mem_bytes"]
    # a size over the memory
    link.send_raw(P.frame(P.H2B.RUN, _run_payload(m=256, n=256, k=256, in_fmt=0, d=0)))
    _expect_error(link, P.Error.FIT)
    _tiny_gemm_is_bit_exact(link)
    # a kind the build lacks: 2:4 sparse, and a FORMAT code past the table
    link.send_raw(P.frame(P.H2B.RUN, _run_payload(m=16, n=16, k=32, flags=P.Flag.SPARSE, b=512, d=2048)))
    _expect_error(link, P.Error.KIND)
    link.send_raw(P.frame(P.H2B.RUN, _run_payload(m=16, n=16, k=32, in_fmt=7, b=512, d=2048)))
    _expect_error(link, P.Error.KIND)
    _tiny_gemm_is_bit_exact(link)
    # the block's own refusal (K not a multiple of 16: STATUS.error BAD_SIZE) as BLOCK
    from tcore.rtl.regmap import ErrorCode
    link.send_raw(P.frame(P.H2B.RUN, _run_payload(m=16, n=16, k=8, b=512, d=2048)))
    assert _expect_error(link, P.Error.BLOCK).detail == ErrorCode.BAD_SIZE
    # a write past the memory, a payload of the wrong size
    link.send_raw(P.frame(P.H2B.WRITE, struct.pack("<I", mem - 4) + bytes(8)))
    _expect_error(link, P.Error.RANGE)
    link.send_raw(P.frame(P.H2B.READ, bytes(3)))
    _expect_error(link, P.Error.PAYLOAD)
    _tiny_gemm_is_bit_exact(link)


def _matrices(folder, seed, m, n, k, dtype):
    """Random A, B (of ``dtype``) and FP32 C saved as .npy in ``folder``, and the options that
    name them."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    c = rng.standard_normal((m, n)).astype(np.float32)
    files = []
    for name, x in (("a", a), ("b", b), ("c", c)):
        np.save(folder / f"{name}.npy", x)
        files += [f"--{name}", str(folder / f"{name}.npy")]
    return a, b, c, files


def test_cli_runs_user_matrices_with_c_on_the_board(board, tmp_path, capsys):
    """``tcore board run --port``: the user's .npy files, C given, D written and bit-exact."""
    import ml_dtypes
    from tcore.golden import matmul
    from tcore.sim.cli import main
    a, b, c, files = _matrices(tmp_path, 11, 32, 16, 48, ml_dtypes.bfloat16)
    out = tmp_path / "d.npz"
    rc = main(["board", "run", "--port", board["url"], *files, "-o", str(out),
               "--format", "bf16", "--json", "--quiet"])   # numpy saves bfloat16 as raw 2-byte data
    said = capsys.readouterr().out
    assert rc == 0, said
    import json
    s = json.loads(said.strip().splitlines()[-1])
    assert s["mismatches"] == 0 and s["bit_exact"] and s["c"] and s["op"] == "bf16->fp32"
    d = np.load(out)
    want = matmul(a, b, c)
    assert np.array_equal(d["d_bits"], want.view(np.uint32))


def test_cli_refuses_bad_runs_in_one_line(capsys):
    from tcore.sim.cli import main
    assert main(["board", "run", "--sim", "--m", "16", "--n", "16", "--k", "24"]) == 2
    assert "K must be a positive multiple of 16" in capsys.readouterr().err
    assert main(["board", "run", "--sim", "--m", "512", "--n", "512", "--k", "512"]) == 2
    err = capsys.readouterr().err
    assert "bytes of the board's memory" in err and err.count("\n") == 1
    assert main(["board", "run", "--sim", "--m", "16", "--n", "16", "--k", "32", "--format",
                 "bf16", "--acc", "f16"]) == 2
    assert "bf16 inputs accumulate in fp32" in capsys.readouterr().err


@needs_gcc
def test_cli_sim_reproduces_a_gemm_with_c(tmp_path, capsys):
    """``tcore board run --sim``: its own simulated board, a user GEMM with C, bit for bit."""
    from tcore.golden import matmul
    from tcore.sim.cli import main
    a, b, c, files = _matrices(tmp_path, 5, 16, 32, 32, np.float16)
    out = tmp_path / "d.npz"
    rc = main(["board", "run", "--sim", *files, "-o", str(out), "--quiet"])
    assert rc == 0, capsys.readouterr()
    assert np.array_equal(np.load(out)["d_bits"], matmul(a, b, c).view(np.uint32))


@pytest.mark.slow
@needs_gcc
def test_board_on_icarus_boots_and_runs_a_gemm():
    """The board bench on Icarus: a one-case self-test (Icarus runs the CPU some 50 times
    slower than Verilator) and a GEMM through the host code, bit for bit."""
    pytest.importorskip("serial")
    from tcore.sim.board.firmware import SelfTestCase
    from tcore.sim.board.gemm import run_on_board
    from tcore.sim.board.link import BoardLink, open_port
    from tcore.sim.board.simulate import simulated_board
    build = BoardBuild(board_of("ulx3s-85f"), sim=True,
                       selftest=(SelfTestCase("fp16->fp32", size=16, seed=3),))
    with simulated_board(build, sim="icarus") as url:
        link = BoardLink(open_port(url, timeout=0.2), reply_s=1200)
        try:
            info = link.info()
            assert info["selftest_cases"] == 1 and info["selftest_failed"] == 0
            assert "fp16->fp32 16x16x16: 0 of 256 outputs differ," in " ".join(link.text)
            r = run_on_board(link, _gemm("bf16->fp32", 16, 16, 16, seed=4))
            assert r["mismatches"] == 0 and r["d"].any()
        finally:
            link.close()


def test_sparse_is_a_kind_the_board_lacks(board, capsys):
    """2:4 sparse is an operation the golden model has and this build's SoC block has not:
    the CLI refuses it before sending anything (the build's refusal, in one line), and sent
    anyway the board answers KIND."""
    from tcore.numerics import Op
    from tcore.sim.board.gemm import BoardGemm
    from tcore.sim.board.link import BoardReplyError
    from tcore.sim.board.run import session
    from tcore.sim.cli import main
    rc = main(["board", "run", "--port", board["url"], "--sparse", "--m", "16", "--n", "16",
               "--k", "32", "--quiet"])
    err = capsys.readouterr().err
    assert rc == 2 and "no 2:4 sparse path" in err and err.count("\n") == 1
    op = Op("fp16", sparse=True)
    a, b = op.random_operands(16, 16, 32, 1)
    with pytest.raises(BoardReplyError, match="KIND"):
        session(board["url"], BoardBuild(board_of("ulx3s-85f"), sim=True), BoardGemm(a, b, None, op), 300)


def test_program_prints_the_command_without_openfpgaloader(tmp_path, capsys, monkeypatch):
    import shutil as sh
    from tcore.sim.cli import main
    assert main(["board", "program", "--board", "ulx3s-85f", "--bitstream",
                 str(tmp_path / "none.bit")]) == 2
    assert "no bitstream" in capsys.readouterr().err
    bit = tmp_path / "tcore.bit"
    bit.write_bytes(b"\xff" * 16)
    real = sh.which
    monkeypatch.setattr(sh, "which", lambda name: None if name == "openFPGALoader" else real(name))
    assert main(["board", "program", "--board", "ecpix5-85f", "--bitstream", str(bit)]) == 0
    said = capsys.readouterr().out
    assert "openFPGALoader is not installed" in said and f"openFPGALoader -b ecpix5 {bit}" in said
