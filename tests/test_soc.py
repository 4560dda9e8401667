"""The ``soc`` design under cocotbext-axi: GEMMs bit-exact against the golden model through the
AXI4-Lite registers and the AXI4 master, bad configurations, SLVERR and DECERR, soft reset; the
silicon GEMM captures through it (``tcore verify --through soc``); and its plain Verilog
testbench (``make soc-demo``), run by Icarus with no cocotb."""

import pytest

from tcore.golden.silicon import load
from tcore.sim.cli import main
from tcore.sim.runner import run_bench

from .conftest import SILICON

TESTS = ["gemms", "bad_configs", "read_error", "write_error", "decode_errors", "soft_reset"]


def test_soc_bench_verilator():
    run_bench("verilator", "soc", "tcore.tb.soc_bench", TESTS, params={}, quiet=True)


# Two warps: Icarus in make test (a build of seconds; 16-lane warps, elaborated and simulated
# in about two thirds of the time of 64-lane ones, 100 s against 150 s: the warps' sharing
# does not depend on the core's size), Verilator's minutes-long build of 64-lane warps under slow.
@pytest.mark.parametrize("sim", ["icarus", pytest.param("verilator", marks=pytest.mark.slow)])
def test_soc_bench_two_warps(sim):
    """Two warps share the AXI4 master: GEMMs bit-exact (tiles claimed as warps become free),
    a failed read stops both warps with no partial tile, a soft reset stops both."""
    cases = "32x48x32:fp16->fp32:c,48x16x32:bf16->fp32:0,16x16x16:fp16->fp16:c"
    run_bench(sim, "soc", "tcore.tb.soc_bench", ["gemms", "read_error", "soft_reset"],
              params={"warps": 2, **({"lanes": 16} if sim == "icarus" else {})},
              options={"cases": cases if sim == "verilator" else "32x32x16:fp16->fp32:c"},
              quiet=True)


def test_verify_through_soc_every_low_precision_kind(capsys):
    """Captured tiles of every TF32, FP8 and INT8 kernel, each tile a GEMM of its own through
    the AXI block (B^T in memory for these kinds): bit-exact."""
    low = SILICON / "lowprec"
    files = [low / "h200_fp8_bits.npz", low / "h200_int8_extreme.npz", low / "h200_tf32_special.npz"]
    code = main(["verify", *map(str, files), "--backend", "verilator", "--through", "soc",
                 "--tiles", "3"])
    out = capsys.readouterr().out.strip().splitlines()
    assert code == 0, out
    kernels = {line.split()[1] for line in out[:-1]}
    assert kernels == {"e4m3_f32", "e5m2_f32", "e4m3_e5m2_f32", "e4m3_f16", "s8_s32", "s8_s32_sat",
                       "u8_s8_s32", "tf32_f32"}
    assert out[-1] == f"checked {8 * 3 * 256} mismatches 0"


def test_soc_bench_icarus():
    run_bench("icarus", "soc", "tcore.tb.soc_bench", ["gemms", "bad_configs", "decode_errors"],
              params={}, options={"cases": "16x16x32:fp16->fp32:c"}, quiet=True)


@pytest.mark.slow
@pytest.mark.parametrize("width", [32, 64])
def test_soc_narrow_data_bus(width):
    run_bench("verilator", "soc", "tcore.tb.soc_bench", ["gemms"], params={"data_width": width},
              options={"cases": "16x32x32:fp16->fp32:c,32x16x16:bf16->fp32:0"}, quiet=True)


@pytest.mark.parametrize("name", ["h200_matmulT_normal_64x64x64.npz",
                                  pytest.param("h200_matmulT_wide_64x128x48.npz", marks=pytest.mark.slow),
                                  pytest.param("h200_matmulT_normal_128x256x64.npz", marks=pytest.mark.slow),
                                  pytest.param("h200_matmulT_uniform_32x2048x32.npz", marks=pytest.mark.slow)])
def test_silicon_gemm_through_soc(name, capsys):
    """Every output of a captured matmulT GEMM, A and B (and C) in the AXI memory, equals the
    H200's: each FP16/BF16 kernel of the file."""
    code = main(["verify", str(SILICON / name), "--backend", "verilator", "--through", "soc"])
    out = capsys.readouterr().out.strip().splitlines()
    m, n = load(SILICON / name)["d_f16_f32"].shape
    assert code == 0 and out[-1] == f"checked {3 * m * n} mismatches 0", out[-4:]
    assert sum(" clk" in line for line in out[:-1]) == 3


@pytest.mark.slow
def test_silicon_gemm_through_soc_with_two_warps(capsys):
    name = "h200_matmulT_normal_64x64x64.npz"
    code = main(["verify", str(SILICON / name), "--backend", "verilator", "--through", "soc",
                 "--warps", "2"])
    out = capsys.readouterr().out.strip().splitlines()
    assert code == 0 and out[-1] == f"checked {3 * 64 * 64} mismatches 0", out[-4:]


def test_verify_through_soc_refuses_what_it_cannot_run(capsys):
    assert main(["verify", str(SILICON / "h200_matmulT_normal_64x64x64.npz"), "--backend",
                 "verilator", "--warps", "2"]) == 2
    assert "--warps is for --through gemm or soc" in capsys.readouterr().err
    assert main(["verify", str(SILICON / "h200_matmulT_normal_64x64x64.npz"), "--backend",
                 "verilator", "--through", "soc", "--warps", "9"]) == 2
    assert "--warps must be 1 to 8" in capsys.readouterr().err
    assert main(["verify", str(SILICON / "h200_matmulT_normal_64x64x64.npz"), "--backend",
                 "amaranth", "--through", "soc"]) == 2
    assert "icarus or verilator" in capsys.readouterr().err


def test_verilog_of_soc_comes_with_a_plain_testbench(tmp_path, capsys):
    assert main(["verilog", "--design", "soc", "--data-width", "64", "-o", str(tmp_path)]) == 0
    tb = (tmp_path / "tb_soc.v").read_text()
    assert "module tb_soc;" in tb and "localparam DW = 64" in tb and "cocotb" not in tb
    assert "data_width=64" in capsys.readouterr().out
    assert main(["verilog", "--design", "gemm", "--data-width", "64", "-o", str(tmp_path)]) == 2
    assert "no --data-width parameter" in capsys.readouterr().err


@pytest.mark.parametrize("m, n, k, fmt", [(16, 32, 32, "fp16"),
                                         pytest.param(32, 48, 32, "fp16", marks=pytest.mark.slow),
                                         pytest.param(16, 32, 48, "bf16", marks=pytest.mark.slow)])
def test_soc_demo_on_icarus(tmp_path, m, n, k, fmt):
    """make soc-demo's testbench, plain Verilog on Icarus (no cocotb): D bit-exact."""
    from tcore.sim.soc_demo import run_demo
    r = run_demo(tmp_path, sim="icarus", m=m, n=n, k=k, fmt=fmt, log=lambda line: None)
    assert r["error"] == 0 and r["mismatches"] == 0, r
    assert (tmp_path / "d.hex").exists()


@pytest.mark.slow
def test_soc_demo_on_verilator(tmp_path):
    """The same plain testbench under Verilator's --binary --timing (a few minutes to build)."""
    from tcore.sim.soc_demo import run_demo
    r = run_demo(tmp_path, sim="verilator", m=32, n=32, k=32, fmt="bf16", log=lambda line: None)
    assert r["error"] == 0 and r["mismatches"] == 0, r


def test_soc_demo_refuses_bad_sizes(tmp_path):
    from tcore.sim.soc_demo import DemoError, run_demo
    with pytest.raises(DemoError, match="multiple of 16"):
        run_demo(tmp_path, m=24, n=16, k=16)
    with pytest.raises(DemoError, match="does not fit"):
        run_demo(tmp_path, m=1024, n=1024, k=1024)


@pytest.mark.slow
def test_silicon_gemm_through_soc_with_16_lane_core(capsys):
    """The soc block built with 16-lane warps (an mma_sync four times as long): every output of
    a captured GEMM still equals the H200's."""
    name = "h200_matmulT_normal_64x64x64.npz"
    code = main(["verify", str(SILICON / name), "--backend", "verilator", "--through", "soc",
                 "--lanes", "16", "--kernel", "f16_f32"])
    out = capsys.readouterr().out.strip().splitlines()
    assert code == 0 and out[-1] == "checked 4096 mismatches 0", out[-4:]
