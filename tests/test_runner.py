"""The bench runner and the memory hooks cannot pass by accident: a named test that did not
run, a skipped test or an empty results file fails; an X or Z in a memory dump fails with its
address; a lost ``done`` fails within a clock budget instead of hanging."""

import numpy as np
import pytest

from sim.gemm import gemm_params
from sim.runner import SimError, _failures, run_bench
from tb.memh import read_memh, write_memh


def _xml(tmp_path, body):
    p = tmp_path / "results.xml"
    p.write_text(f'<?xml version="1.0" ?><testsuites>{body}</testsuites>')
    return p


def test_results_with_no_test_fail(tmp_path):
    empty = _xml(tmp_path, "")
    assert _failures(empty) == ["(no test ran)"]
    assert _failures(empty, ["decode_exhaustive"]) == ["decode_exhaustive (did not run)"]


def test_results_count_every_named_test(tmp_path):
    xml = _xml(tmp_path, '<testsuite name="all"><testcase name="a"/><testcase name="b">'
                         '<skipped/></testcase><testcase name="c"><failure/></testcase>'
                         '<testcase name="d"/><testcase name="d"/></testsuite>')
    assert _failures(xml, ["a"]) == ["b", "c"]
    assert _failures(xml, ["a", "e"]) == ["b", "c", "e (did not run)"]
    assert _failures(xml, ["d"]) == ["b", "c", "d (ran 2 times)"]
    ok = _xml(tmp_path, '<testsuite name="all"><testcase name="a"/></testsuite>')
    assert _failures(ok, ["a"]) == [] and _failures(ok) == []


def test_missing_results_fail(tmp_path):
    assert _failures(tmp_path / "nothing.xml", ["a"]) == ["(no results: the simulator did not finish)"]


def test_run_bench_with_a_wrong_test_name_fails():
    """The bite: a renamed or misspelt cocotb test used to leave an empty <testsuites/> and pass."""
    with pytest.raises(SimError, match="no_such_test_name \\(did not run\\)"):
        run_bench("verilator", "fp4dec", "tb.fp4_bench", "no_such_test_name", params={"lanes": 16},
                  quiet=True)


def test_run_bench_with_one_wrong_name_of_several_fails():
    with pytest.raises(SimError, match="decode_exhaustiv \\(did not run\\)"):
        run_bench("verilator", "fp4dec", "tb.fp4_bench", ["decode_exhaustive", "decode_exhaustiv"],
                  params={"lanes": 16}, quiet=True)


@pytest.mark.parametrize("digit", ["x", "X", "z", "Z"])
def test_memory_dump_with_x_or_z_fails_with_its_address(tmp_path, digit):
    """The bite: an X digit used to read as 0, so an X where +0 is expected passed."""
    path = tmp_path / "dump.memh"
    write_memh(path, np.zeros(64, np.uint8))
    lines = path.read_text().splitlines()
    lines[2] = lines[2][:31] + digit
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(AssertionError, match=r"X or Z in 1 of 4 words: word 102 \("):
        read_memh(path, 4, base=100)


def test_memory_dump_round_trip(tmp_path):
    img = np.random.default_rng(0).integers(0, 256, 256, dtype=np.uint8)
    write_memh(tmp_path / "m.memh", img)
    assert np.array_equal(read_memh(tmp_path / "m.memh", 16), img)
    with pytest.raises(AssertionError, match="has 16 words, expected 17"):
        read_memh(tmp_path / "m.memh", 17)


def test_gemm_bench_fails_on_a_lost_done():
    """A budget smaller than any GEMM needs stands in for a done that never rises: the bench
    fails, naming what it waited for, instead of waiting forever."""
    with pytest.raises(SimError, match="random_gemms.*done did not rise within 100 clocks"):
        run_bench("verilator", "gemm", "tb.gemm_bench", "random_gemms",
                  params=gemm_params(1),
                  env={"TCORE_CLOCK_BUDGET": "100"}, quiet=True)


def test_amaranth_gemm_fails_on_a_lost_done(monkeypatch):
    from sim.gemm import run_gemm
    monkeypatch.setenv("TCORE_CLOCK_BUDGET", "20")
    a = np.full((16, 16), 0x3C00, np.uint16)
    with pytest.raises(SimError, match="done did not rise within 20 clocks"):
        run_gemm("amaranth", a, a)
