"""``tcore`` on bad input: exit status 2, one line naming the problem on stderr, nothing run.
And ``tcore bench``, which had no test."""

import json

import numpy as np
import pytest

from tcore.sim.cli import main

from .conftest import SILICON

ONE = np.uint16(0x3C00)        # FP16 1.0


def tcore(argv, capsys):
    """(exit status, stdout, stderr) of ``tcore argv``, argparse's own exits included."""
    try:
        code = main(argv)
    except SystemExit as e:     # argparse refuses an invalid choice with SystemExit(2)
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


def _tile_file(path, k, tiles=1):
    """A tile file of all-ones FP16 A and B with K = k, C = 0: every D is exactly k."""
    np.savez(path, a=np.full((tiles, 16, k), ONE), b=np.full((tiles, k, 16), ONE),
             c=np.zeros((tiles, 16, 16), np.uint32), c16=np.zeros((tiles, 16, 16), np.uint16),
             d_f16_f32=np.full((tiles, 16, 16), np.float32(k)).view(np.uint32),
             d_f16_f16=np.full((tiles, 16, 16), np.float16(k)).view(np.uint16))
    return str(path)


def _gemm_file(path, m, n, k):
    np.savez(path, a=np.full((m, k), ONE), b=np.full((k, n), ONE), c=np.zeros((m, n), np.uint32),
             d_f16_f32=np.full((m, n), np.float32(k)).view(np.uint32))
    return str(path)


def _refused(code, out, err, *words):
    assert code == 2, (code, out, err)
    assert "error" in err and all(w in err for w in words), err
    assert "checked" not in out and "mismatches" not in out, out     # nothing ran


def test_verify_unknown_backend(tmp_path, capsys):
    _refused(*tcore(["verify", _tile_file(tmp_path / "t.npz", 16), "--backend", "nope"], capsys), "nope")


def test_verify_unknown_backend_on_a_gemm_file(capsys):
    name = str(SILICON / "h200_matmulT_normal_64x64x64.npz")
    _refused(*tcore(["verify", name, "--backend", "nope"], capsys), "nope")


def test_verify_through_gemm_on_a_tile_file(tmp_path, capsys):
    _refused(*tcore(["verify", _tile_file(tmp_path / "t.npz", 16), "--backend", "verilator",
                     "--through", "gemm"], capsys), "--through gemm", "tile file")


def test_verify_through_wmma_on_amaranth(tmp_path, capsys):
    _refused(*tcore(["verify", _tile_file(tmp_path / "t.npz", 16), "--backend", "amaranth",
                     "--through", "wmma"], capsys), "--through wmma", "icarus or verilator")


@pytest.mark.parametrize("backend", ["verilator", "icarus", "amaranth"])
def test_verify_k_not_a_multiple_of_16_on_rtl(tmp_path, backend, capsys):
    _refused(*tcore(["verify", _tile_file(tmp_path / "t.npz", 8), "--backend", backend,
                     "--kernel", "f16_f32"], capsys), "K = 8", "multiple of 16")


def test_verify_k_8_runs_on_golden(tmp_path, capsys):
    """The same file is fine for the golden model (any K): the refusal is the RTL's."""
    code, out, err = tcore(["verify", _tile_file(tmp_path / "t.npz", 8), "--kernel", "f16_f32"], capsys)
    assert code == 0 and out.strip().splitlines()[-1] == "checked 256 mismatches 0"


def test_verify_gemm_k_not_a_multiple_of_16_on_rtl(tmp_path, capsys):
    _refused(*tcore(["verify", _gemm_file(tmp_path / "g.npz", 16, 16, 24), "--backend", "verilator"],
                    capsys), "24", "multiple of 16")


def test_verify_wrong_a_ndim(tmp_path, capsys):
    path = tmp_path / "nd4.npz"
    z = np.zeros((1, 1, 16, 16), np.uint16)
    np.savez(path, a=z, b=z, c=z.astype(np.uint32), d_f16_f32=z.astype(np.uint32))
    _refused(*tcore(["verify", str(path)], capsys), "'a' must be", "(1, 1, 16, 16)")


@pytest.mark.parametrize("m,n", [(20, 16), (16, 24)])
def test_verify_gemm_m_n_not_multiples_of_16(tmp_path, m, n, capsys):
    _refused(*tcore(["verify", _gemm_file(tmp_path / "g.npz", m, n, 16)], capsys),
             "multiples of 16", f"{m}x{n}")


def test_verify_kernel_all_with_no_d_key(tmp_path, capsys):
    path = tmp_path / "nod.npz"
    np.savez(path, a=np.zeros((1, 16, 16), np.uint16), b=np.zeros((1, 16, 16), np.uint16),
             c=np.zeros((1, 16, 16), np.uint32))
    _refused(*tcore(["verify", str(path), "--kernel", "all"], capsys), "none of the keys", "d_f16_f32")


def test_verify_bad_file_fails_before_anything_runs(tmp_path, capsys):
    """A bad second file stops the run before the good first one is simulated."""
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a zip")
    _refused(*tcore(["verify", _tile_file(tmp_path / "t.npz", 16), str(bad), "--backend", "verilator"],
                    capsys), "bad.npz")


@pytest.mark.parametrize("backend", ["verilator", "icarus", "amaranth"])
def test_gemm_other_arch_on_rtl(backend, capsys):
    _refused(*tcore(["gemm", "--m", "16", "--n", "16", "--k", "16", "--arch", "ampere",
                     "--backend", backend], capsys), "Hopper", "ampere")


def test_verilog_unknown_design(tmp_path, capsys):
    code, out, err = tcore(["verilog", "-o", str(tmp_path / "v"), "--design", "nope"], capsys)
    _refused(code, out, err, "nope", "mma4")
    v = tmp_path / "v"
    assert not (v.exists() and any(v.glob("*.v"))), "a design was written"


def test_plot_into_a_missing_folder(tmp_path, capsys):
    out_png = tmp_path / "missing" / "layout.png"
    _refused(*tcore(["plot", "layout", "-o", str(out_png)], capsys), "no such folder", "missing")
    assert not out_png.parent.exists()


def test_bench_unknown_benchmark(capsys):
    code, _, err = tcore(["bench", "nope"], capsys)
    assert code == 2 and "nope" in err


def test_bench_golden(capsys):
    code, out, _ = tcore(["benchmark", "golden", "--tiles", "64", "--json"], capsys)
    r = json.loads(out.strip().splitlines()[-1])
    assert code == 0 and r["tiles"] == 64 and r["dots"] == 64 * 256
    assert r["dots_per_s"] > 0 and r["golden_s"] > 0 and r["matmul_f32_s"] > 0


@pytest.mark.slow          # two simulator builds and Amaranth's simulator: about 2 minutes
def test_bench_sim(capsys):
    """Every simulator's tiles are bit-exact (the bench raises otherwise) and take at least one
    clock per beat (64 beats per K=16 tile)."""
    code, out, _ = tcore(["bench", "sim", "--json"], capsys)
    r = json.loads(out.strip().splitlines()[-1])
    assert code == 0 and set(r) == {"verilator", "icarus", "amaranth"}
    for sim, x in r.items():
        assert x["mismatches"] == 0 and x["tiles"] >= 1, sim
        assert x["cycles"] >= 64 * x["tiles"], sim
    assert r["verilator"]["ratio_vs_verilator"] == 1.0


@pytest.mark.slow
def test_bench_all(capsys):
    code, out, _ = tcore(["bench", "all", "--json"], capsys)
    r = json.loads(out.strip().splitlines()[-1])
    assert code == 0 and {"golden", "sim", "gemm"} <= set(r)
    g = r["gemm"]
    assert g["mismatches"] == 0 and g["m"] == g["n"] == g["k"] == 128
    assert 0.95 <= g["utilization"] <= 1
    assert "| GEMM top 128x128x128" in out


@pytest.mark.parametrize("argv,words", [
    (["verify", "T", "--lanes", "16"], ["--lanes", "--backend golden"]),
    (["verify", "T", "--backend", "verilator", "--lanes", "8"], ["--lanes", "8"]),
    (["gemm", "--m", "16", "--n", "16", "--k", "16", "--backend", "golden", "--lanes", "16"], ["--lanes"]),
    (["gemm", "--m", "16", "--n", "16", "--k", "64", "--format", "nvfp4", "--backend", "golden", "--lanes", "16"],
     ["--lanes", "--backend golden"]),
    (["verilog", "-o", "O", "--design", "fp4dec", "--lanes", "16"], ["fp4dec", "--lanes"]),
    (["synth", "--design", "axilregs", "--lanes", "16"], ["axilregs", "--lanes"]),
])
def test_lanes_refused_where_it_means_nothing(argv, words, tmp_path, capsys):
    """--lanes picks the MMA4 core's multipliers: refused on the golden model (FP4 GEMMs
    too), on designs without an MMA4 core, for FP4 decoders, and outside 64/32/16."""
    argv = [_tile_file(tmp_path / "t.npz", 16) if a == "T" else str(tmp_path / "v") if a == "O" else a
            for a in argv]
    code, out, err = tcore(argv, capsys)
    assert code == 2 and all(w in err for w in words), (code, err)
    assert "mismatches" not in out and not (tmp_path / "v").exists()
