"""The bench runner and the memory hooks cannot pass by accident: a named test that did not
run, a skipped test or an empty results file fails; an X or Z in a memory dump fails with its
address; a lost ``done`` fails within a clock budget instead of hanging."""

import subprocess

import numpy as np
import pytest

from tcore.rtl.designs import preset
from tcore.sim.runner import SimError, _failures, run_bench, top_ports, zero_init_loops
from tcore.tb.memh import read_memh, write_memh


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
        run_bench("verilator", "fp4dec", "tcore.tb.fp4_bench", "no_such_test_name", params={"lanes": 16},
                  quiet=True)


def test_run_bench_with_one_wrong_name_of_several_fails():
    with pytest.raises(SimError, match="decode_exhaustiv \\(did not run\\)"):
        run_bench("verilator", "fp4dec", "tcore.tb.fp4_bench", ["decode_exhaustive", "decode_exhaustiv"],
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
        run_bench("verilator", "gemm", "tcore.tb.gemm_bench", "random_gemms",
                  params=preset("lint", "gemm").params,
                  options={"clock_budget": 100}, quiet=True)


def test_amaranth_gemm_fails_on_a_lost_done(monkeypatch):
    from tcore.host import images
    from tcore.numerics import Op
    from tcore.sim.run import Operands, RunError, run
    monkeypatch.setattr(images, "clock_budget", lambda *args, **kw: 20)
    a = np.full((16, 16), 0x3C00, np.uint16)
    with pytest.raises(RunError, match="done did not rise within 20 clocks"):
        run(preset("lint", "gemm"), Op.parse("fp16->fp32"), Operands(a, a), "amaranth")


def test_build_root_outside_a_checkout_is_a_user_cache(tmp_path, monkeypatch):
    """A plain pip install (no pyproject.toml beside the package) builds in the user's cache,
    not in site-packages; TCORE_BUILD wins over both."""
    from tcore.sim import runner
    monkeypatch.delenv("TCORE_BUILD", raising=False)
    assert runner.build_root() == runner.ROOT / "build"          # this checkout
    monkeypatch.setattr(runner, "ROOT", tmp_path / "site-packages")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert runner.build_root() == tmp_path / "cache" / "tcore"
    monkeypatch.setenv("TCORE_BUILD", str(tmp_path / "mine"))
    assert runner.build_root() == tmp_path / "mine"


def test_keep_waves_never_overwrites(tmp_path, monkeypatch):
    from tcore.sim import runner
    monkeypatch.setenv("TCORE_BUILD", str(tmp_path))
    kept = []
    for i in range(3):
        src = tmp_path / "bdir" / "dump.fst"
        src.parent.mkdir(exist_ok=True)
        src.write_bytes(bytes([i]) * 10)
        kept.append(runner.keep_waves(src, "gemm-16x16x16 seed1"))
        assert not src.exists()
    assert [p.name for p in kept] == ["gemm-16x16x16_seed1.fst", "gemm-16x16x16_seed1-2.fst",
                                      "gemm-16x16x16_seed1-3.fst"]
    assert [p.read_bytes()[0] for p in kept] == [0, 1, 2]
    assert runner.keep_waves(tmp_path / "none.vcd", "x") is None


def test_build_progress_counts_objects(tmp_path):
    """The C++ progress line counts the objects of Verilator's make lists that this build
    wrote, out of all of them."""
    import time

    from tcore.sim.runner import _CompileWatch
    (tmp_path / "Vtop_classes.mk").write_text(
        "VM_CLASSES_FAST += \\\n  Vtop_a \\\n  Vtop_b \\\n\nVM_GLOBAL_FAST += \\\n  verilated \\\n\n")
    (tmp_path / "Vtop.mk").write_text("VM_USER_CLASSES = \\\n  verilator \\\n\n"
                                      "VM_USER_DIR = \\\n  . \\\n\n")
    w = _CompileWatch("verilator", tmp_path, "x", print)
    assert w._objects() == (0, 4)
    (tmp_path / "Vtop_a.o").write_text("")
    (tmp_path / "verilator.o").write_text("")
    old = tmp_path / "Vtop_b.o"
    old.write_text("")
    t = time.time() - 3600
    import os
    os.utime(old, (t, t))            # left by an earlier build: not this build's work
    assert w._objects() == (2, 4)


def test_build_prints_its_phases(tmp_path, monkeypatch):
    """A build that does work says so, phase by phase, on its ``say`` callable and in the
    journal ``builds.log``; an up-to-date build says nothing."""
    from tcore.sim.runner import build
    monkeypatch.setenv("TCORE_BUILD", str(tmp_path))
    lines = []
    build("icarus", "axilregs", say=lines.append)
    assert lines[0] == "axilregs: elaborating (Amaranth -> Verilog) ..."
    assert lines[1].startswith("axilregs: elaborated in ") and lines[1].endswith(" s"), lines
    journal = (tmp_path / "builds.log").read_text().splitlines()
    assert [j.split("] ", 1)[1] for j in journal] == lines     # every phase, in order, stamped
    lines.clear()
    build("icarus", "axilregs", say=lines.append)
    assert lines == []
    assert len((tmp_path / "builds.log").read_text().splitlines()) == len(journal)


def test_handover_round_trip_and_missing_parameter(tmp_path):
    """The one hand-over: what run_bench saves is what a bench reads; a build parameter the
    design was not built with is an error naming it, never a copied default."""
    from tcore.host.handover import Handover
    h = Handover(design="wmma", params={"mem_words": 32768}, job="j.npz",
                 options={"seed": 5, "resp_stall": 0.25})
    h.save(tmp_path / "h.json")
    back = Handover.load(tmp_path / "h.json")
    assert back == h and back.param("mem_words") == 32768 and back.option("seed") == 5
    assert back.option("stall", 0.0) == 0.0
    with pytest.raises(KeyError, match="no build field 'warps'"):
        back.param("warps")


def test_benches_read_no_tcore_environment():
    """Benches take parameters from the hand-over only: no TCORE_* variable is read in tb/
    (the memory hooks' plusargs are the Verilog's, passed on the simulator's command line)."""
    import re
    from pathlib import Path
    tb = Path(__file__).resolve().parent.parent / "tb"
    for f in sorted(tb.glob("*.py")):
        text = f.read_text()
        assert not re.search(r"os\.environ|getenv", text.replace('os.environ.get(ENV)', '')), f.name


_PIECES = """module pieces(a, b, y, z);
  input [3:0] a;
  input [3:0] b;
  output [11:0] y;
  wire [11:0] y;
  wire [7:0] \\w.x ;
  output [3:0] z;
  wire [3:0] z;
  assign y[11:8] = a ^ b;
  assign y[3:0] = a;
  assign \\w.x [7:4] = b;
  assign \\w.x [3] = a[0];
  assign z[3:0] = a;
  assign z[1] = b[0];
endmodule
"""


def test_merge_part_assigns_makes_one_concatenation_per_wire():
    from tcore.sim.runner import merge_part_assigns
    text = merge_part_assigns(_PIECES)
    # y: two pieces and the gap between them undriven (z), as before.
    assert "  assign y = { a ^ b, 4'bz, a };" in text
    assert "  assign \\w.x  = { b, a[0], 3'bz };" in text
    # z has overlapping pieces (two drivers of bit 1): left alone.
    assert "  assign z[3:0] = a;" in text and "  assign z[1] = b[0];" in text
    assert "y[" not in text and "\\w.x [" not in text


def test_merged_wires_simulate_the_same_on_icarus(tmp_path):
    from tcore.sim.runner import merge_part_assigns
    tb = """module tb;
  reg [3:0] a, b; wire [11:0] y; wire [3:0] z; integer i;
  pieces dut(.a(a), .b(b), .y(y), .z(z));
  initial for (i = 0; i < 256; i = i + 1) begin
    {a, b} = i; #1 $display("%b %b %b", y, dut.\\w.x , z);
  end
endmodule
"""
    outs = []
    for name, text in (("orig", _PIECES), ("merged", merge_part_assigns(_PIECES))):
        (tmp_path / f"{name}.v").write_text(text + tb)
        subprocess.run(["iverilog", "-o", str(tmp_path / name), str(tmp_path / f"{name}.v")],
                       check=True)
        outs.append(subprocess.run(["vvp", "-n", str(tmp_path / name)], check=True,
                                   capture_output=True, text=True).stdout)
    assert outs[0].count("\n") == 256 and "z" in outs[0] and outs[0] == outs[1]


_TOY = """\
module toy(clk);
  input clk;
  \\toy.inner  inner (
    .clk(clk)
  );
  initial begin
    #2 tcore_dump_lo = 32'd1; tcore_dump_hi = 32'd2;
    #1 tcore_dump = 1'b1;
    #1 $finish;
  end
endmodule

module \\toy.inner (clk);
  input clk;
  reg [7:0] mem [3:0];
endmodule
"""


def test_memory_hooks_reach_a_memory_inside_an_instance(tmp_path):
    """The hooks go into the module that holds the memory at the path (``inner.mem``), their
    controls stay the top's: a file loaded at start is dumped back from the instance."""
    import shutil
    from tcore.sim.runner import add_memory_hooks
    text = add_memory_hooks(_TOY, "inner.mem")
    top, inner = text.split("module \\toy.inner")
    assert "reg tcore_dump = 1'b0;" in top and "$readmemh" not in top
    assert "posedge toy.tcore_dump" in inner and "$writememh(tcore_memh_out, mem," in inner
    assert add_memory_hooks(_TOY, "inner.other") == _TOY          # no such memory: unchanged
    with pytest.raises(SimError, match="no instance outer in module toy"):
        add_memory_hooks(_TOY, "outer.mem")
    if shutil.which("iverilog") is None:
        pytest.fail("iverilog not installed (apt-get install iverilog)")
    src, exe = tmp_path / "toy.v", tmp_path / "toy.vvp"
    src.write_text(text)
    (tmp_path / "in.memh").write_text("11\n22\n33\n44\n")
    subprocess.run(["iverilog", "-o", str(exe), "-s", "toy", str(src)], check=True)
    subprocess.run(["vvp", "-n", str(exe), f"+TCORE_MEMH_IN={tmp_path / 'in.memh'}",
                    f"+TCORE_MEMH_OUT={tmp_path / 'out.memh'}"], check=True, capture_output=True)
    lines = (tmp_path / "out.memh").read_text().splitlines()
    assert [w for line in lines for w in line.split("//")[0].split()] == ["22", "33"]


def test_top_ports_are_the_module_header_names():
    # Only these (and the hooks' controls) are public to the benches on Verilator.
    text = ("module other(a);\nendmodule\n"
            "module mma4(i__valid, o__ready,\n  clk, \\rst , o__payload);\n  input clk;\nendmodule\n")
    assert top_ports(text, "mma4") == ["i__valid", "o__ready", "clk", "rst", "o__payload"]
    assert top_ports(text, "other") == ["a"]
    with pytest.raises(SimError, match="no module gemm"):
        top_ports(text, "gemm")


def test_zero_init_loops_replaces_only_whole_zero_blocks(tmp_path):
    words = "".join(f"    mem[{n}] = 16'h0000;\n" for n in range(4))
    text = f"  reg [15:0] mem [3:0];\n  initial begin\n{words}  end\n"
    assert zero_init_loops(text) == (
        "  reg [15:0] mem [3:0];\n  integer tcore_zero_mem;\n  initial begin\n"
        "    for (tcore_zero_mem = 0; tcore_zero_mem <= 3; tcore_zero_mem = tcore_zero_mem + 1)"
        " mem[tcore_zero_mem] = 0;\n  end\n")
    nonzero = text.replace("mem[2] = 16'h0000", "mem[2] = 16'h0001")
    assert zero_init_loops(nonzero) == nonzero
    short = text.replace("    mem[3] = 16'h0000;\n", "")
    assert zero_init_loops(short) == short
    # Icarus leaves a memory without initial values X: the loop must write every word.
    tb = ("module tb;\n" + text + "  initial begin #1 $display(\"%h %h %h\", mem[0], mem[2], mem[3]);"
          " end\nendmodule\n")
    src = tmp_path / "tb.v"
    for t in (tb, zero_init_loops(tb)):
        src.write_text(t)
        subprocess.run(["iverilog", "-o", str(tmp_path / "tb"), str(src)], check=True)
        out = subprocess.run(["vvp", "-n", str(tmp_path / "tb")], check=True, capture_output=True,
                             text=True).stdout
        assert out.split() == ["0000"] * 3, out
