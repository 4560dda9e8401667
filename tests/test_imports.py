"""The project's import graph: no module of golden/, host/, numerics/, rtl/, sim/ or tb/ reaches itself
through imports (those inside functions count too), the packages depend on one another one
way only, and the RTL never imports the golden model."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("golden", "host", "numerics", "rtl", "sim", "tb")

#: Edges left out of the cycle check, each with its reason.  golden.mma.mma and golden.matmul
#: hand dask arrays to golden.distributed, which maps the serial functions over the blocks.
DISPATCH = {("golden.mma", "golden.distributed"), ("golden.floats", "golden.distributed")}


def modules() -> dict:
    """Module name -> file, for every module of the packages."""
    found = {}
    for pkg in PACKAGES:
        for f in sorted((ROOT / pkg).rglob("*.py")):
            parts = f.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = f
    return found


def import_graph() -> dict:
    """Module -> the project's modules it imports: ``from p import x`` counts as an import of
    ``p.x`` where that is a module, else of ``p``; ``import p.q`` of ``p.q``."""
    mods = modules()

    def known(name):
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for mod, path in mods.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                names = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base
                         for a in node.names]
            else:
                continue
            targets |= {t for t in map(known, names) if t and t != mod}
        graph[mod] = targets
    return graph


def cycles(graph: dict) -> list:
    """The strongly connected components of more than one node (Tarjan), each sorted."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while not comp or comp[-1] != v:
                comp.append(stack.pop())
                on_stack.discard(comp[-1])
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_graph_sees_the_imports():
    g = import_graph()
    assert "sim.commands.gemm" in g["sim.commands"] and "sim.jobs" in g["sim.commands.gemm"]
    assert "golden.distributed" in g["golden.mma"]          # an import inside a function
    assert "sim.runner" in g["sim.gemm"]                     # a relative import


def test_no_module_imports_itself_round_about():
    g = import_graph()
    for a, b in DISPATCH:
        assert b in g[a], f"{a} no longer imports {b}: drop the entry from DISPATCH"
        g[a] = g[a] - {b}
    assert cycles(g) == []


def test_packages_depend_one_way():
    deps = {}
    for mod, targets in import_graph().items():
        for t in targets:
            if t.split(".")[0] != mod.split(".")[0]:
                deps.setdefault(mod.split(".")[0], set()).add(t.split(".")[0])
    for pkg in PACKAGES:
        deps.setdefault(pkg, set())
    assert cycles(deps) == [], deps


def test_rtl_never_imports_the_golden_model():
    for mod, targets in import_graph().items():
        if mod.split(".")[0] == "rtl":
            assert not [t for t in targets if t.split(".")[0] == "golden"], mod


def test_only_the_prover_reaches_into_the_benches():
    """tb/ holds benches (and the formal harnesses sim.formal hands to the prover); what a
    host writes and reads lives in host/, which sim/ and the benches share."""
    for mod, targets in import_graph().items():
        if mod.split(".")[0] not in ("tb",) and mod != "sim.formal":
            assert not [t for t in targets if t.split(".")[0] == "tb"], mod


def test_every_bench_starts_from_tb_common():
    """Clock, reset, pauses and stream handshakes are written once (tb/common.py)."""
    g = import_graph()
    benches = [m for m in g if m.startswith("tb.") and m.endswith("_bench")]
    assert len(benches) >= 8
    for mod in benches:
        uses = g[mod] | set().union(*(g[t] for t in g[mod] if t.startswith("tb.")))
        assert "tb.common" in uses, mod


def test_cycles_are_found():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
