"""The project's import graph: every module lives in the one ``tcore`` namespace (``tcore.golden``,
``tcore.rtl``, ...) and imports the others only through it; no module reaches itself through
imports (those inside functions count too), the packages depend on one another one way only,
and the RTL never imports the golden model."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: The source folders at the repository's root, each a subpackage of ``tcore``.
PACKAGES = ("golden", "host", "numerics", "rtl", "sim", "tb")
TOP = {"tcore", *PACKAGES}



def modules() -> dict:
    """Module name (``tcore.<package>...``) -> file, for every module of the packages and of
    ``tcore/`` itself."""
    found = {}
    for pkg in ("tcore", *PACKAGES):
        for f in sorted((ROOT / pkg).rglob("*.py")):
            parts = f.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts if pkg == "tcore" else ("tcore",) + parts)] = f
    return found


def package(mod: str) -> str:
    """The subpackage a module belongs to: ``golden`` for ``tcore.golden.mma``, ``tcore`` for
    ``tcore.torch``."""
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in PACKAGES else "tcore"


def imported_names(path: Path, mod: str, mods: dict):
    """Each import statement of a file as ``(module, names)``, relative imports resolved."""
    pkg = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, []
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = pkg.split(".")[:len(pkg.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            yield base, [a.name for a in node.names]


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
        targets = set()
        for base, names in imported_names(path, mod, mods):
            full = [f"{base}.{n}" if f"{base}.{n}" in mods else base for n in names] or [base]
            targets |= {t for t in map(known, full) if t and t != mod}
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
    assert "tcore.sim.commands.gemm" in g["tcore.sim.commands"] and "tcore.sim.jobs" in g["tcore.sim.commands.gemm"]
    assert "tcore.golden.distributed" in g["tcore.golden.mma"]          # an import inside a function
    assert "tcore.sim.runner" in g["tcore.sim.gemm"]                     # a relative import


def test_no_module_imports_itself_round_about():
    assert cycles(import_graph()) == []


def test_every_import_goes_through_the_one_namespace():
    """``import golden`` would load a second copy of a module under another name (and collide
    with a user's own ``sim`` or ``tb``): the project's modules import each other as
    ``tcore.<package>`` or relatively."""
    mods = modules()
    for mod, path in mods.items():
        for base, _ in imported_names(path, mod, mods):
            assert base.split(".")[0] not in PACKAGES, f"{mod} imports {base}"


def test_no_module_imports_another_packages_private_names():
    mods = modules()
    for mod, path in mods.items():
        for base, names in imported_names(path, mod, mods):
            if base.split(".")[0] == "tcore" and package(base) != package(mod):
                private = [n for n in names if n.startswith("_") and not n.startswith("__")]
                assert not private, f"{mod} imports {private} from {base}"


def test_packages_depend_one_way():
    deps = {}
    for mod, targets in import_graph().items():
        for t in targets:
            if package(t) != package(mod) and t != "tcore":
                deps.setdefault(package(mod), set()).add(package(t))
    for pkg in PACKAGES:
        deps.setdefault(pkg, set())
    assert cycles(deps) == [], deps


def test_rtl_never_imports_the_golden_model():
    for mod, targets in import_graph().items():
        if package(mod) == "rtl":
            assert not [t for t in targets if package(t) == "golden"], mod


def test_only_the_prover_reaches_into_the_benches():
    """tb/ holds benches (and the formal harnesses sim.formal hands to the prover); what a
    host writes and reads lives in host/, which sim/ and the benches share."""
    for mod, targets in import_graph().items():
        if package(mod) != "tb" and mod != "tcore.sim.formal":
            assert not [t for t in targets if package(t) == "tb"], mod


def test_every_bench_starts_from_tb_common():
    """Clock, reset, pauses and stream handshakes are written once (tb/common.py)."""
    g = import_graph()
    benches = [m for m in g if m.startswith("tcore.tb.") and m.endswith("_bench")]
    assert len(benches) >= 8
    for mod in benches:
        uses = g[mod] | set().union(*(g[t] for t in g[mod] if t.startswith("tcore.tb.")))
        assert "tcore.tb.common" in uses, mod


def test_cycles_are_found():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_wheel_holds_only_the_tcore_namespace(tmp_path):
    """``pip wheel . --no-deps`` (the repository's folders copied aside, so the build leaves no
    trace in the checkout): one top-level package, ``tcore``, with every source folder inside
    it; installed from the wheel alone, ``from tcore.numerics import Op`` works."""
    import shutil
    import subprocess
    import sys
    import zipfile
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, src / name)
    for pkg in ("tcore", *PACKAGES):
        shutil.copytree(ROOT / pkg, src / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(src), "--no-deps",
                    "--no-build-isolation", "-q", "-w", str(tmp_path / "dist")], check=True,
                   capture_output=True)
    wheel, = (tmp_path / "dist").glob("tcore-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names} == {"tcore", wheel.name.split("-py3")[0] + ".dist-info"}
    for pkg in PACKAGES:
        assert f"tcore/{pkg}/__init__.py" in names, pkg
    assert "tcore/rtl/lint/waivers.vlt" in names and "tcore/torch.py" in names
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    code = ("import tcore, tcore.numerics as n; from tcore.numerics import Op; "
            "assert str(Op.parse('e4m3.e5m2->fp16')) == 'e4m3.e5m2->fp16'; "
            "assert n.__file__.startswith(tcore.__path__[0]); print(len(tcore.__path__))")
    out = subprocess.run([sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(site)!r}); {code}"],
                         cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "1", out.stderr
