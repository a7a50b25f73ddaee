"""vdr's import hygiene: ``import vdr`` stays light and silent, the import graph has no cycle, and no
module rewrites ``sys.modules``.

The import graph is read from the sources (``ast`` over ``vdr/**/*.py``), not by importing them.
Module-level imports (including those under ``if``/``try`` at module level, but not under
``if TYPE_CHECKING:``) run at import time; imports inside functions run on first use (lazy). The
stages depend on each other top-down, so neither kind may close a cycle; the import-time graph is
checked on its own as well, because a cycle there can break ``import`` itself.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from shared_data import REPO_ROOT

PACKAGE = REPO_ROOT / "vdr"
HEAVY = ("torch", "transformers", "mteb", "matplotlib")


# ------------------------------------------------------------------------------------ import vdr
def test_import_vdr_is_light_and_silent():
    """``import vdr`` imports none of torch, transformers, mteb, matplotlib and emits no warning."""
    code = (
        "import sys, vdr\n"
        f"heavy = sorted(set({HEAVY!r}) & set(sys.modules))\n"
        "assert not heavy, f'import vdr imported {heavy}'\n"
        "print('ok')\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    env.pop("PYTHONWARNINGS", None)
    p = subprocess.run([sys.executable, "-W", "error", "-c", code], capture_output=True, text=True, cwd=REPO_ROOT,
                       env=env, timeout=600)
    assert p.returncode == 0 and p.stdout.strip() == "ok", p.stderr[-3000:]
    assert p.stderr == "", p.stderr[-3000:]


# ----------------------------------------------------------------------------------- import graph
def _modules() -> dict[str, tuple[Path, bool]]:
    """``{dotted name: (file, is package)}`` for every module of vdr."""
    out = {}
    for f in sorted(PACKAGE.rglob("*.py")):
        parts = list(f.relative_to(REPO_ROOT).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_pkg else parts)] = (f, is_pkg)
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _import_nodes(body: list[ast.stmt], lazy: bool):
    """The import statements that run when ``body`` runs (``lazy``: also those in function bodies)."""
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If):
            if not _is_type_checking(node.test):
                yield from _import_nodes(node.body, lazy)
            yield from _import_nodes(node.orelse, lazy)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if lazy:
                yield from _import_nodes(node.body, lazy)
        elif isinstance(node, ast.Try) or (sys.version_info >= (3, 11) and isinstance(node, ast.TryStar)):
            for block in (node.body, node.orelse, node.finalbody, *(h.body for h in node.handlers)):
                yield from _import_nodes(block, lazy)
        elif isinstance(node, (ast.ClassDef, ast.With, ast.AsyncWith, ast.For, ast.While)):
            yield from _import_nodes(node.body, lazy)
            yield from _import_nodes(getattr(node, "orelse", []), lazy)
        elif isinstance(node, ast.Match):
            for case in node.cases:
                yield from _import_nodes(case.body, lazy)


def import_graph(lazy: bool, packages: bool = False) -> dict[str, set[str]]:
    """``{module: {vdr modules it imports}}``; ``from pkg import name`` counts ``pkg.name`` when that
    is a module, else ``pkg``. ``lazy``: include the imports inside functions. ``packages``: an
    import of ``a.b.c`` also runs the ``__init__`` of ``a.b`` (when the importer is not inside it:
    then it has run already), so it counts as an edge too."""
    mods = _modules()
    graph: dict[str, set[str]] = {}
    for name, (path, is_pkg) in mods.items():
        here = name.split(".") if is_pkg else name.split(".")[:-1]  # the package relative imports start from
        edges: set[str] = set()
        for node in _import_nodes(ast.parse(path.read_text(encoding="utf-8"), str(path)).body, lazy):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    target = alias.name
                    while target and target not in mods:
                        target = target.rpartition(".")[0]
                    if target:
                        edges.add(target)
                continue
            if node.level:
                base = ".".join(here[: len(here) - node.level + 1] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for alias in node.names:
                if f"{base}.{alias.name}" in mods:
                    edges.add(f"{base}.{alias.name}")
                elif base in mods:
                    edges.add(base)
        if packages:
            for target in list(edges):
                parent = target.rpartition(".")[0]
                while parent and parent in mods and not (name == parent or name.startswith(parent + ".")):
                    edges.add(parent)
                    parent = parent.rpartition(".")[0]
        edges.discard(name)
        graph[name] = edges
    return graph


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (``[a, b, ..., a]``) per strongly connected component of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's algorithm (the graph has ~50 nodes: recursion is fine)
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
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                components.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return [_cycle_in(graph, comp) for comp in components]


def _cycle_in(graph: dict[str, set[str]], comp: list[str]) -> list[str]:
    """A shortest cycle through the first module of a strongly connected component (BFS)."""
    start, members = comp[0], set(comp)
    parent = {start: None}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(graph[v] & members):
            if w == start:
                path = [v]
                while parent[path[-1]] is not None:
                    path.append(parent[path[-1]])
                return [start, *reversed(path[:-1]), start] if len(path) > 1 else [start, v, start]
            if w not in parent:
                parent[w] = v
                queue.append(w)
    raise AssertionError(f"no cycle through {start} in {comp}")  # pragma: no cover - a component has one


def _explain(cycles: list[list[str]]) -> str:
    return "import cycles:\n" + "\n".join("  " + " -> ".join(c) for c in cycles)


def test_cycle_finder_sees_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e2"}, "e2": {"e"}}
    assert find_cycles(graph) == [["a", "b", "c", "a"], ["e", "e2", "e"]]
    assert find_cycles({"a": {"b"}, "b": set()}) == []


def test_import_graph_reads_relative_and_lazy_imports():
    eager, lazy = import_graph(lazy=False), import_graph(lazy=True)
    assert "vdr.errors" in eager["vdr.corpus"]  # from .errors import InputError
    assert "vdr.io.formats" in eager["vdr.experiment.inputs"]  # from .io.formats import ...
    assert eager["vdr.corpus"] <= lazy["vdr.corpus"]
    assert any(lazy[m] - eager[m] for m in eager)  # function-level imports exist and are seen


def test_no_import_cycle_at_import_time():
    """Module-level imports only: a cycle here can make ``import`` fail half-way."""
    cycles = find_cycles(import_graph(lazy=False))
    assert not cycles, _explain(cycles)


def test_no_import_cycle_through_package_inits():
    """Importing ``vdr.cli.common`` runs ``vdr/cli/__init__.py`` first: a cycle through a package's
    ``__init__`` makes ``import vdr.ingest.convert`` fail in a fresh interpreter."""
    cycles = find_cycles(import_graph(lazy=True, packages=True))
    assert not cycles, _explain(cycles)


def test_package_init_edges():
    graph = import_graph(lazy=True, packages=True)
    assert {"vdr.retrieve.base", "vdr.retrieve"} <= graph["vdr.experiment.evaluation"]  # vdr.retrieve's __init__ runs too
    assert not {m for m in graph["vdr.ingest.convert"] if m.startswith("vdr.cli")}  # the stage imports no CLI
    assert "vdr.retrieve" not in graph["vdr.retrieve.lexical"]  # its own package has run already


def test_no_import_cycle_including_function_level_imports():
    """The stages depend top-down: a lazy import back up the data flow is a design cycle too."""
    cycles = find_cycles(import_graph(lazy=True))
    assert not cycles, _explain(cycles)


# ----------------------------------------------------------------------------------- sys.modules
_MUTATORS = {"__setitem__", "__delitem__", "pop", "popitem", "setdefault", "update", "clear"}


def _is_sys_modules(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "modules" and isinstance(node.value, ast.Name) \
        and node.value.id == "sys"


def sys_modules_mutations(source: str, filename: str = "<src>") -> list[int]:
    """Line numbers where ``source`` assigns into or through ``sys.modules`` (``sys.modules[x] = m``,
    ``sys.modules[x].__class__ = C``, ``del sys.modules[x]``, ``sys.modules.pop(...)``...)."""
    lines = []
    for node in ast.walk(ast.parse(source, filename)):
        targets: list[ast.AST] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = node.targets
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _MUTATORS \
                and _is_sys_modules(node.func.value):
            lines.append(node.lineno)
        if any(_is_sys_modules(n) for t in targets for n in ast.walk(t)):
            lines.append(node.lineno)
    return sorted(lines)


def test_sys_modules_detector():
    assert sys_modules_mutations("import sys\nsys.modules[__name__].__class__ = C\n") == [2]
    assert sys_modules_mutations("import sys\nsys.modules['x'] = m\ndel sys.modules['y']\nsys.modules.pop('z')\n") == [2, 3, 4]
    assert sys_modules_mutations("import sys\nm = sys.modules['x']\nok = 'x' in sys.modules\n") == []


def test_no_module_mutates_sys_modules():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for line in sys_modules_mutations(path.read_text(encoding="utf-8"), str(path)):
            found.append(f"{path.relative_to(REPO_ROOT)}:{line}")
    assert not found, "sys.modules is mutated at: " + ", ".join(found)


# ------------------------------------------------------------------------- the layers of issue 23
def _reaches(graph: dict[str, set[str]], prefix: str, targets: tuple[str, ...]) -> dict[str, list[str]]:
    """``{module under prefix: [vdr modules of targets it imports directly]}`` (empty lists left out)."""
    hit = lambda m: any(m == t or m.startswith(t + ".") for t in targets)  # noqa: E731
    return {m: sorted(filter(hit, deps)) for m, deps in sorted(graph.items())
            if (m == prefix or m.startswith(prefix + ".")) and any(map(hit, deps))}


def test_rewrite_imports_neither_judge_nor_rewards():
    """Judge and rewrite share one LLM client (``vdr.llm``); ``vdr.rewrite`` imports neither
    ``vdr.judge`` nor ``vdr.rewards``, not even inside a function."""
    graph = import_graph(lazy=True)
    assert {"vdr.llm"} <= set().union(*(graph[m] for m in graph if m.startswith("vdr.rewrite")))
    assert "vdr.llm" in graph["vdr.judge.client"] and "vdr.llm" in graph["vdr.rewards.rewarder"]
    assert _reaches(graph, "vdr.rewrite", ("vdr.judge", "vdr.rewards")) == {}


def test_bottom_modules_import_no_stage():
    """``vdr.llm``, ``vdr.corpus`` and ``vdr.types`` sit below every stage: the corpus owns its file
    layout names (no import of ``vdr.ingest``), the results take ``duplicate_texts`` from the types
    (no import of ``vdr.experiment``), and the LLM client imports neither judge, rewrite nor rewards."""
    graph = import_graph(lazy=True)
    stages = ("vdr.ingest", "vdr.encode", "vdr.retrieve", "vdr.metrics", "vdr.stats", "vdr.results", "vdr.report",
              "vdr.experiment", "vdr.rewards", "vdr.judge", "vdr.rewrite", "vdr.cli", "vdr.integrations")
    for low in ("vdr.llm", "vdr.corpus", "vdr.types"):
        assert _reaches(graph, low, stages) == {}, low
    assert _reaches(graph, "vdr.results", ("vdr.experiment", "vdr.report", "vdr.cli")) == {}


# ------------------------------------------------------------------------------ moved module paths
_MOVED_CHECK = r'''
import importlib, json, sys, warnings
import vdr
from vdr import MOVED_MODULES

out = {"raised": {}, "warned": {}, "differ": {}}
for old in MOVED_MODULES:  # -W error: the old path stops with the DeprecationWarning naming the new one
    try:
        importlib.import_module(old)
        out["raised"][old] = None
    except DeprecationWarning as e:
        out["raised"][old] = str(e)
    except ImportError as e:
        out["raised"][old] = f"ImportError: {e}"
    sys.modules.pop(old, None)
for old, new in MOVED_MODULES.items():  # warnings recorded: the old path is the new module's namespace
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        try:
            mod = importlib.import_module(old)
        except ImportError as e:
            out["warned"][old] = f"ImportError: {e}"
            continue
    out["warned"][old] = [f"{x.category.__name__}: {x.message}" for x in w]
    target = importlib.import_module(new)
    names = [n for n in vars(target) if n not in ("__name__", "__spec__", "__loader__", "__package__", "__path__")]
    out["differ"][old] = sorted(n for n in names if getattr(mod, n, object()) is not getattr(target, n))
print(json.dumps(out))
'''


def _run_python(code: str, *flags: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    env.pop("PYTHONWARNINGS", None)
    return subprocess.run([sys.executable, *flags, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT, env=env,
                          timeout=300)


@pytest.fixture(scope="module")
def moved():
    """What a fresh ``python -W error`` sees of each old path (``_MOVED_CHECK``)."""
    p = _run_python(_MOVED_CHECK, "-W", "error")
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout)




def _check_moved(out: dict, old: str, new: str) -> None:
    expected = None if old == "vdr.compare" else f"{old} moved to {new}; the old path goes in the next release"
    assert out["raised"][old] == expected, (old, out["raised"][old])
    assert out["warned"][old] == ([] if old == "vdr.compare" else [f"DeprecationWarning: {expected}"]), old
    assert out["differ"][old] == [], (old, out["differ"][old])


def test_moved_module_paths_warn_and_expose_the_new_modules_objects(moved):
    """Every old path of ``vdr.MOVED_MODULES`` imports for one release: under ``-W error`` it stops
    with a DeprecationWarning naming the new path (``vdr.compare``, the verb's name, stays silent),
    and it holds the very objects of the new module."""
    from vdr import MOVED_MODULES

    for old, new in MOVED_MODULES.items():
        _check_moved(moved, old, new)
    assert set(MOVED_MODULES) >= {"vdr.scoring", "vdr.scoring_gpu", "vdr.inputs", "vdr.compare_runs", "vdr.convert",
                                  "vdr.serve", "vdr.compare"}


def test_python_W_error_import_vdr_scoring_names_the_new_path():
    p = _run_python("import vdr.scoring", "-W", "error")
    assert p.returncode == 1
    assert "DeprecationWarning: vdr.scoring moved to vdr.retrieve.maxsim" in p.stderr, p.stderr[-3000:]


def test_vdr_compare_stays_the_verb_after_importing_the_statistics_path():
    """``from vdr.compare import compare_variants`` (the statistics' old path, now :mod:`vdr.stats`)
    leaves ``vdr.compare`` the function :func:`vdr.experiment.compare_runs.compare_runs`; importing
    ``vdr.report.render`` and ``vdr.judge.run`` leaves ``vdr.report`` and ``vdr.judge`` the verbs."""
    code = (
        "import vdr\n"
        "from vdr.compare import compare_variants\n"
        "import vdr.compare\n"
        "import vdr.stats, vdr.experiment.compare_runs as cr\n"
        "assert compare_variants is vdr.stats.compare_variants\n"
        "assert vdr.compare is cr.compare_runs, vdr.compare\n"
        "import importlib, vdr.report.render, vdr.judge.run\n"  # the verbs report and judge likewise
        "assert vdr.report is importlib.import_module('vdr.report.render').report, vdr.report\n"
        "assert vdr.judge is importlib.import_module('vdr.judge.run').judge, vdr.judge\n"
        "print('ok')\n"
    )
    p = _run_python(code, "-W", "error")
    assert p.returncode == 0 and p.stdout.strip() == "ok", p.stderr[-3000:]
