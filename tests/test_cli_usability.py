"""``tcore`` with a user's own data and bad requests: operands from files, D written out, and a
clear one-line error (exit 2) for each request the tool cannot serve."""

import json
import re

import ml_dtypes
import numpy as np
import pytest
from amaranth.lib import data

from tcore.golden import matmul
from tcore.sim.cli import main

from .conftest import SILICON


def cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def operands(tmp_path):
    rng = np.random.default_rng(11)
    files = {}
    for name, shape, dtype in (("a", (5, 40), np.float16), ("b", (40, 3), np.float16),
                               ("c", (5, 3), np.float32), ("abf", (16, 32), ml_dtypes.bfloat16),
                               ("bbf", (32, 16), ml_dtypes.bfloat16), ("a32", (16, 16), np.float32)):
        x = rng.standard_normal(shape).astype(dtype)
        np.save(tmp_path / f"{name}.npy", x)
        files[name] = (tmp_path / f"{name}.npy", x)
    return files


def test_gemm_on_the_users_matrices_writes_d(operands, tmp_path, capsys):
    (fa, a), (fb, b), (fc, c) = operands["a"], operands["b"], operands["c"]
    out = tmp_path / "d.npz"
    code, text, _ = cli(capsys, "gemm", "--a", fa, "--b", fb, "--c", fc, "--backend", "golden",
                        "-o", out, "--json")
    r = json.loads(text.strip().splitlines()[-1])
    assert code == 0 and (r["m"], r["n"], r["k"]) == (5, 3, 40) and r["mismatches"] == 0
    d = np.load(out)
    want = matmul(a, b, c)                       # the floats-in model, on the same arrays
    assert d["d"].dtype == np.float32 and np.array_equal(d["d_bits"], want.view(np.uint32))
    assert np.array_equal(d["d"].view(np.uint32), d["d_bits"])


def test_gemm_bfloat16_files_need_their_format_named(operands, capsys):
    """numpy.save stores ml_dtypes bfloat16 as raw 2-byte data: tcore asks which format."""
    (fa, a), (fb, b) = operands["abf"], operands["bbf"]
    code, _, err = cli(capsys, "gemm", "--a", fa, "--b", fb, "--backend", "golden")
    assert code == 2 and "--format fp16|bf16" in err
    code, text, _ = cli(capsys, "gemm", "--a", fa, "--b", fb, "--format", "bf16", "--backend",
                        "golden", "--json")
    assert code == 0 and json.loads(text.strip().splitlines()[-1])["format"] == "bf16"


def test_gemm_users_matrices_through_the_rtl(operands, tmp_path, capsys):
    rng = np.random.default_rng(5)
    a = rng.standard_normal((32, 32)).astype(np.float16)
    b = rng.standard_normal((32, 16)).astype(np.float16)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    out = tmp_path / "d.npz"
    code, text, _ = cli(capsys, "gemm", "--a", tmp_path / "a.npy", "--b", tmp_path / "b.npy",
                        "--backend", "verilator", "-o", out, "--json")
    r = json.loads(text.strip().splitlines()[-1])
    assert code == 0 and r["mismatches"] == 0 and r["cycles"] > 0
    assert np.array_equal(np.load(out)["d_bits"], matmul(a, b).view(np.uint32))


@pytest.mark.parametrize("argv,msg", [
    (["--a", "a32", "--b", "a32"], "float32"),
    (["--a", "a", "--b", "b", "--c", "c", "--backend", "verilator"], "--backend golden only"),
    (["--a", "a", "--b", "a"], "K differs"),
    (["--a", "a"], "--a and --b go together"),
    (["--a", "a", "--b", "b", "--m", "6"], "does not match"),
    (["--a", "a", "--b", "b", "--format", "bf16"], "but --format is bf16"),
    (["--a", "a", "--b", "b", "--c", "a"], "--c must be float32"),
    (["--a", "a", "--b", "b", "-o", "d.txt"], "name it *.npz"),
    (["--a", "nothere", "--b", "b"], "no such file"),
    (["--m", "16", "--n", "16"], "--k is required"),
    (["--m", "16", "--n", "16", "--k", "16", "--waves"], "no meaning on --backend golden"),
    (["--m", "16", "--n", "16", "--k", "16", "--warps", "2"], "no meaning on --backend golden"),
    (["--m", "16", "--n", "16", "--k", "16", "--seed", "-1"], "--seed"),
])
def test_gemm_refuses_bad_requests_with_one_line(operands, argv, msg, capsys):
    argv = [str(operands[x][0]) if x in operands else x for x in argv]
    if "--backend" not in argv:
        argv += ["--backend", "golden"]
    code, out, err = cli(capsys, "gemm", *argv)
    assert code == 2 and msg in err and len(err.strip().splitlines()) == 1


def test_verify_refuses_before_building(tmp_path, capsys):
    """Tiles of 8 rows, K not a multiple of 16, a tile file --through gemm: refused at once."""
    data = dict(np.load(SILICON / "h200_ints.npz"))
    eight = {**data, "a": data["a"][:, :8], "c": data["c"][:, :8], "c16": data["c16"][:, :8],
             "d_f16_f32": data["d_f16_f32"][:, :8]}
    np.savez(tmp_path / "m8.npz", **eight)
    code, _, err = cli(capsys, "verify", tmp_path / "m8.npz", "--kernel", "f16_f32", "--backend", "icarus")
    assert code == 2 and "16x16 output tiles" in err
    code, _, err = cli(capsys, "verify", SILICON / "h200_ints.npz", "--backend", "icarus",
                       "--through", "gemm")
    assert code == 2 and "tile file" in err
    empty = {k: v[:0] if k != "meta" else v for k, v in data.items()}
    np.savez(tmp_path / "empty.npz", **empty)
    code, _, err = cli(capsys, "verify", tmp_path / "empty.npz")
    assert code == 2 and "nothing to check" in err


def test_verify_names_what_a_path_is(tmp_path, capsys):
    code, _, err = cli(capsys, "verify", tmp_path)
    assert code == 2 and "is a directory" in err
    text = tmp_path / "notes.npz"
    text.write_text("not an archive\n")
    code, _, err = cli(capsys, "verify", text)
    assert code == 2 and "not a readable .npz" in err and "pickle" not in err


def test_verilog_into_an_existing_file_is_a_clean_error(tmp_path, capsys):
    f = tmp_path / "taken"
    f.write_text("")
    code, out, err = cli(capsys, "verilog", "-o", f, "--design", "fp4dec")
    assert code == 2 and "exists and is not a folder" in err and out == ""


def test_version(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.startswith("tcore ")


def test_probe_shows_why_nvcc_failed(tmp_path, capsys):
    code, _, err = cli(capsys, "probe", "--out", tmp_path / "p", "--nvcc", "/bin/false")
    assert code == 2 and "/bin/false failed (exit status 1)" in err


def test_verilog_takes_design_parameters_and_documents_ports(tmp_path, capsys):
    from tcore.rtl.gemm import GemmConfig
    from tcore.rtl.mma4 import Beat
    # 16-lane warps: the same ports and layouts as 64, in half the elaboration time; the
    # parameters of the two-warp GEMM bench's and the 16-lane core bench's builds, whose
    # elaboration (cached in build/verilog) this command shares.
    code, out, _ = cli(capsys, "verilog", "-o", tmp_path, "--design", "gemm", "--warps", "2",
                       "--mem-kib", "512", "--lanes", "16")
    assert code == 0 and "lanes=16, mem_words=32768, warps=2" in out
    code, out, _ = cli(capsys, "verilog", "-o", tmp_path, "--design", "mma4", "--lanes", "16")
    assert code == 0 and "mma4" in out
    gemm = (tmp_path / "gemm.v").read_text()
    assert "module gemm(" in gemm and "parameters lanes=16, mem_words=32768, warps=2" in gemm
    # The header's bit fields are the layouts' own, LSB first.
    lay = data.Layout.cast(GemmConfig)
    for name, field in lay:
        lo, hi = field.offset, field.offset + field.width - 1
        assert (f"[{hi}:{lo}] {name}" if hi != lo else f"[{lo}] {name}") in gemm, name
    mma4 = (tmp_path / "mma4.v").read_text()
    beat = data.Layout.cast(Beat)
    assert f"[{beat['last'].offset}] last" in mma4 and f"input  [{beat.size - 1}:0] i__payload" in mma4


@pytest.mark.parametrize("argv,msg", [
    (["--design", "mma4", "--warps", "2"], "has no --warps parameter"),
    (["--design", "gemm", "--mem-kib", "48"], "power of two"),
    (["--design", "mma4", "--mem-kib", "64"], "has no --mem-kib parameter"),
    (["--design", "gemm", "--no-skid"], "--no-skid is for --design mma4"),
])
def test_verilog_refuses_parameters_a_design_does_not_take(argv, msg, tmp_path, capsys):
    code, out, err = cli(capsys, "verilog", "-o", tmp_path / "v", *argv)
    assert code == 2 and msg in err and not (tmp_path / "v").exists()


def test_verilog_no_skid_leaves_the_output_skid_register_out(tmp_path, capsys):
    """--no-skid builds the core without the 514-bit skid register beside o (the 16-lane
    ECP5-25F build): its Verilog has no ``skid`` register, the default's has."""
    code, out, _ = cli(capsys, "verilog", "-o", tmp_path / "a", "--design", "mma4", "--lanes", "16",
                       "--dense-only")
    assert code == 0
    code, out, _ = cli(capsys, "verilog", "-o", tmp_path / "b", "--design", "mma4", "--lanes", "16",
                       "--dense-only", "--no-skid")
    assert code == 0 and "skid=False" in (tmp_path / "b" / "mma4.v").read_text()
    assert re.search(r"reg \[\d+:0\] skid\b", (tmp_path / "a" / "mma4.v").read_text())
    assert not re.search(r"\bskid\b", (tmp_path / "b" / "mma4.v").read_text().replace("skid=False", ""))


def test_verilog_and_synth_start_from_a_preset(tmp_path, capsys):
    """--preset names the builds to start from: ecp5-25f is the 16-lane dense core without its
    skid register (what --lanes 16 --dense-only --no-skid spelled out), with the ECP5 DSPs;
    a preset without the design, or an unknown one, is one line of refusal."""
    code, out, _ = cli(capsys, "verilog", "-o", tmp_path, "--preset", "ecp5-25f")
    assert code == 0 and out.count("wrote ") == 1
    assert "mma4.v  (dsp=ecp5, lanes=16, skid=False, sparse=False)" in out
    text = (tmp_path / "mma4.v").read_text()
    assert "parameters dsp=ecp5, lanes=16, skid=False, sparse=False" in text
    for argv, msg in ((["verilog", "-o", tmp_path, "--preset", "ecp5-25f", "--design", "gemm"],
                       "preset ecp5-25f has no gemm build (it has mma4)"),
                      (["verilog", "-o", tmp_path, "--preset", "huge"], "unknown preset 'huge'"),
                      (["synth", "--preset", "ecp5-25f", "--design", "soc"],
                       "preset ecp5-25f has no soc build")):
        code, _, err = cli(capsys, *argv)
        assert code == 2 and msg in err and err.count("\n") == 1, err
