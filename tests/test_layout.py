"""The package's shape, read from the sources with ``ast`` (like tests/test_imports.py): the stage
order (no module imports a later stage, at module level or inside a function), few top-level
modules, no function over 8 parameters, the default metric cutoffs and the query budget each
written in one place, and every test module in the tier table of tests/conftest.py.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from conftest import MODULE_TIERS, TEST_TIERS, TIERS, tier_of
from shared_data import REPO_ROOT
from test_imports import import_graph

PACKAGE = REPO_ROOT / "vdr"
TESTS = REPO_ROOT / "tests"


def _sources() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _rel(path: Path) -> str:
    return path.relative_to(REPO_ROOT).as_posix()


# ------------------------------------------------------------------------------------ stage order
#: vdr's units (a top-level module or package of vdr), bottom first: a unit may import only units
#: before it. The bottom: errors, types, the text rule, progress bars, torchrun helpers, the file
#: formats, the corpus (its protocol and file layout) and the LLM client. Then the stages in data
#: order (ingest -> encode -> retrieve -> metrics -> stats -> results, then judge, whose RCP-nDCG
#: the report renders, and the report). On top the composers: rewards (metric as reward), rewrite,
#: the experiment (vdr.evaluate), the MTEB integration, the public API ``vdr`` and the CLI.
STAGE_ORDER = (
    "errors", "types", "options", "text", "progress", "distributed", "io", "corpus", "llm",
    "ingest", "encode", "retrieve", "metrics", "stats", "results", "judge", "report",
    "rewards", "rewrite", "experiment", "integrations", "vdr", "cli", "__main__",
)


def unit_of(module: str) -> str:
    """``vdr.retrieve.maxsim`` -> ``retrieve``; ``vdr.corpus`` -> ``corpus``; ``vdr`` -> ``vdr``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def upward_imports(graph: dict[str, set[str]], order=STAGE_ORDER) -> list[str]:
    """``"a -> b"`` for every import of a module of unit ``a`` from a later unit ``b`` in ``order``."""
    rank = {u: n for n, u in enumerate(order)}
    return sorted(f"{m} -> {t}" for m, targets in graph.items() for t in targets
                  if rank[unit_of(t)] > rank[unit_of(m)])


def test_upward_import_finder():
    graph = {"vdr.corpus": {"vdr.errors", "vdr.ingest.passages"}, "vdr.ingest.pdf": {"vdr.corpus", "vdr.ingest"},
             "vdr.ingest": set(), "vdr.errors": set()}
    assert upward_imports(graph) == ["vdr.corpus -> vdr.ingest.passages"]
    assert unit_of("vdr") == "vdr" and unit_of("vdr.cli.common") == "cli"


def test_every_unit_has_a_place_in_the_stage_order():
    units = {unit_of(m) for m in import_graph(lazy=False)}
    assert not units - set(STAGE_ORDER), f"place these in STAGE_ORDER: {sorted(units - set(STAGE_ORDER))}"


_UPWARD_FIXED_ELSEWHERE: dict[str, str] = {}


@pytest.mark.parametrize("unit", [
    pytest.param(u, marks=pytest.mark.xfail(strict=True, reason=_UPWARD_FIXED_ELSEWHERE[u]))
    if u in _UPWARD_FIXED_ELSEWHERE else u for u in STAGE_ORDER])
def test_no_upward_import(unit):
    """No module of ``unit`` imports a later unit, at module level or inside a function (lazy)."""
    graph = import_graph(lazy=True)
    found = upward_imports({m: t for m, t in graph.items() if unit_of(m) == unit})
    assert not found, f"{len(found)} upward import(s):\n  " + "\n  ".join(found)


# ------------------------------------------------------------------------------ top-level modules
#: top-level modules that do not count against the limit
_BASE_MODULES = {"__init__", "__main__", "types", "errors"}
MAX_TOP_LEVEL_MODULES = 8


def test_few_top_level_modules():
    """At most 8 modules directly in ``vdr/`` besides ``__init__``, ``__main__``, ``types``, ``errors``:
    everything else lives in a stage folder."""
    top = sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem not in _BASE_MODULES)
    assert len(top) <= MAX_TOP_LEVEL_MODULES, f"{len(top)} top-level modules: {top}"


# ------------------------------------------------------------------------------------- parameters
MAX_PARAMETERS = 8


def _is_cli_command(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A typer command or callback (``@app.command(...)``, ``@app.callback()``): its parameters are
    the command line's options, generated from option records."""
    for d in fn.decorator_list:
        target = d.func if isinstance(d, ast.Call) else d
        if isinstance(target, ast.Attribute) and target.attr in ("command", "callback"):
            return True
    return False


def _is_kernel(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A Triton kernel (``@triton.jit``): its arguments are pointers, strides and compile-time
    constants, which Triton cannot take as a record."""
    return any(isinstance(d, ast.Attribute) and d.attr == "jit" for d in fn.decorator_list)


def parameter_counts(source: str, filename: str = "<src>") -> list[tuple[str, int, int]]:
    """``(qualified name, line, parameters)`` of every function and method of ``source``: positional,
    keyword-only and ``*args``/``**kwargs`` each count one; the first parameter of a method
    (``self``/``cls``, not of a ``@staticmethod``) does not. Typer commands and Triton kernels are
    left out."""
    out: list[tuple[str, int, int]] = []

    def visit(body, prefix: str, in_class: bool) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                visit(node.body, f"{prefix}{node.name}.", True)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = node.args
                n = len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs) + (a.vararg is not None) + (a.kwarg is not None)
                static = any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in node.decorator_list)
                if in_class and not static and (a.posonlyargs or a.args):
                    n -= 1
                if not (_is_cli_command(node) or _is_kernel(node)):
                    out.append((f"{prefix}{node.name}", node.lineno, n))
                visit(node.body, f"{prefix}{node.name}.", False)
            elif isinstance(node, (ast.If, ast.Try, ast.With, ast.For, ast.While)):
                for block in (node.body, getattr(node, "orelse", []), getattr(node, "finalbody", []),
                              *(h.body for h in getattr(node, "handlers", []))):
                    visit(block, prefix, in_class)

    visit(ast.parse(source, filename).body, "", False)
    return out


def test_parameter_counter():
    src = (
        "def f(a, b, /, c, *args, d, **kw): pass\n"
        "class C:\n"
        "    def m(self, a, b): pass\n"
        "    @staticmethod\n"
        "    def s(a, b): pass\n"
        "    @classmethod\n"
        "    def k(cls, *, a=1): pass\n"
        "@app.command('x')\n"
        "def cmd(a, b, c, d, e, f, g, h, i, j): pass\n"
        "def outer():\n"
        "    def inner(x): pass\n"
        "@triton.jit\n"
        "def kernel(a, b, c, d, e, f, g, h, i, j): pass\n"
    )
    assert parameter_counts(src) == [("f", 1, 6), ("C.m", 3, 2), ("C.s", 5, 2), ("C.k", 7, 1), ("outer", 10, 0),
                                     ("outer.inner", 11, 1)]


def functions_over_the_limit() -> list[str]:
    return [f"{_rel(p)}:{line} {name} ({n})" for p in _sources()
            for name, line, n in parameter_counts(p.read_text(encoding="utf-8"), str(p)) if n > MAX_PARAMETERS]


def test_no_function_takes_more_than_8_parameters():
    """Group more settings into an option record (a dataclass: its generated ``__init__`` is exempt,
    being no ``def`` in the source); typer commands are exempt."""
    over = functions_over_the_limit()
    assert not over, f"{len(over)} functions over {MAX_PARAMETERS} parameters:\n  " + "\n  ".join(over)


# ------------------------------------------------------------------- defaults written in one place
_CUTOFF_STRING = re.compile(r"\d+(,\d+){2,}")
#: names of default cutoffs: parameters, fields, constants, keyword arguments, CLI options
_CUTOFF_NAME = re.compile(r"^(k|ks|--k|k_values)$|cutoff|^default_k", re.I)
#: cutoff lists that are not vdr's defaults: MTEB's own k_values (vdr.integrations.mteb), recorded as MTEB's
_FOREIGN_CUTOFFS = {"DEFAULT_K_VALUES"}


def _is_cutoff_literal(node: ast.AST) -> bool:
    """``(3, 5, 10)``, ``[1, 3, 5, 10]``, ``"3,5,10"``: three or more increasing integers up to 1000."""
    if isinstance(node, (ast.Tuple, ast.List)):
        vals = [e.value for e in node.elts if isinstance(e, ast.Constant) and type(e.value) is int]
        return len(vals) == len(node.elts) >= 3 and vals == sorted(set(vals)) and vals[0] >= 1 and vals[-1] <= 1000
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and bool(_CUTOFF_STRING.fullmatch(node.value))


def _defaults(source: str, filename: str, names: re.Pattern, is_value, foreign=frozenset()) -> list[int]:
    """Lines of ``source`` where a value (``is_value``) is written as the default of something named
    by ``names``: a parameter default, an assigned constant or field, a keyword argument, or the
    first argument of a call that names it (``typer.Option(512, "--concat-max-tokens")``)."""
    lines = set()
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            a = node.args
            positional = a.posonlyargs + a.args
            pairs = list(zip(positional[len(positional) - len(a.defaults):], a.defaults)) + list(zip(a.kwonlyargs, a.kw_defaults))
            lines.update(d.lineno for arg, d in pairs if d is not None and names.search(arg.arg) and is_value(d))
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None and is_value(node.value):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            found = [t.id if isinstance(t, ast.Name) else getattr(t, "attr", "") for t in targets]
            if any(names.search(n) and n not in foreign for n in found):
                lines.add(node.lineno)
        elif isinstance(node, ast.Call):
            lines.update(k.value.lineno for k in node.keywords if k.arg and names.search(k.arg) and is_value(k.value))
            strings = [x.value for x in node.args[1:] if isinstance(x, ast.Constant) and isinstance(x.value, str)]
            if node.args and is_value(node.args[0]) and any(names.search(t) for t in strings):
                lines.add(node.lineno)
    return sorted(lines)


def cutoff_literals(source: str, filename: str = "<src>") -> list[int]:
    """Lines of ``source`` where a list of metric cutoffs (``(3, 5, 10)``, ``"1,3,5,10"``) is written as
    a default: of ``k``/``ks``/``cutoffs``/``--k``, of a ``DEFAULT_K...``/``...CUTOFFS`` constant."""
    return _defaults(source, filename, _CUTOFF_NAME, _is_cutoff_literal, _FOREIGN_CUTOFFS)


#: names of a query budget (in tokens or words): parameters, fields, constants, CLI options
_BUDGET_NAME = re.compile(r"budget|query_tokens|concat_max_tokens|max_words|max-words|concat-max-tokens", re.I)
_BUDGET_VALUES = {512, 1024}


def _int_in(node, values) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) is int and node.value in values


def budget_literals(source: str, filename: str = "<src>") -> list[int]:
    """Lines of ``source`` where 512 or 1024 is written as the default of a query budget (``budget``,
    ``max_query_tokens``, ``max_words``, ``--concat-max-tokens``...)."""
    return _defaults(source, filename, _BUDGET_NAME, lambda n: _int_in(n, _BUDGET_VALUES))


def test_default_detectors():
    src = (
        '"""Cutoffs "3,5,10" in a docstring, (1, 3, 5, 10) too."""\n'
        "DEFAULT_CUTOFFS = (3, 5, 10)\n"
        "def f(k='1,3,5,10', shape=(1, 3), budget=512, max_tokens=1024, n=512): pass\n"
        "DEFAULT_MAX_QUERY_TOKENS = 512\n"
        "opt = typer.Option(1024, '--max-words', help='x')\n"
        "other = typer.Option(1024, '--max-tokens', help='an answer')\n"
        "g(max_query_tokens=512, size=1024)\n"
        "class C:\n"
        "    max_words: int = 1024\n"
        "P = {'ks': [3, 10, 100]}\n"
        "DEFAULT_K_VALUES = (1, 3, 5, 10, 20, 100, 1000)\n"
        "o = typer.Option('3,5,10', '--k')\n"
        "fam = Family('ndcg', cutoffs=(1, 3, 5))\n"
    )
    assert cutoff_literals(src) == [2, 3, 12, 13]
    assert budget_literals(src) == [3, 4, 5, 7, 9]


def _sites(find) -> dict[str, list[int]]:
    found = {}
    for p in _sources():
        lines = find(p.read_text(encoding="utf-8"), str(p))
        if lines:
            found[_rel(p)] = lines
    return found


def _where(sites: dict[str, list[int]]) -> str:
    return "\n  ".join(f"{f}:{','.join(map(str, ls))}" for f, ls in sites.items())


def test_default_cutoffs_are_written_in_one_module_of_vdr_metrics():
    """The default metric cutoffs are declared once, by the metric families in ``vdr/metrics/``;
    every other default reads them from there."""
    sites = _sites(cutoff_literals)
    assert len(sites) == 1 and next(iter(sites)).startswith("vdr/metrics/"), \
        f"cutoff lists written in {len(sites)} modules:\n  {_where(sites)}"


def test_query_budget_is_written_in_one_module():
    """The query budget (ConvSearch-R1's 512 and its 1,024-word training preset) is written in one
    module; every parameter, field and CLI option default refers to it."""
    sites = _sites(budget_literals)
    assert len(sites) == 1, f"query budgets written in {len(sites)} modules:\n  {_where(sites)}"


# ------------------------------------------------------------------------------------ test tiers
def test_every_test_module_has_a_tier():
    """A new test file is given its tier in tests/conftest.py (MODULE_TIERS): else it would count as
    core whatever it needs."""
    modules = {p.stem for p in TESTS.glob("test_*.py")}
    assert not modules - set(MODULE_TIERS), f"add to MODULE_TIERS in tests/conftest.py: {sorted(modules - set(MODULE_TIERS))}"
    assert not set(MODULE_TIERS) - modules, f"no such test module: {sorted(set(MODULE_TIERS) - modules)}"
    assert set(MODULE_TIERS.values()) <= set(TIERS) and set(TEST_TIERS.values()) <= set(TIERS)
    assert {k.partition("::")[0] for k in TEST_TIERS} <= modules


def test_tier_is_the_most_expensive_that_applies():
    assert TIERS == ("core", "crosscheck", "model", "slow", "gpu")
    assert tier_of("test_types", "test_x") == "core"
    assert tier_of("test_types", "test_x", marks={"crosscheck", "parametrize"}) == "crosscheck"
    assert tier_of("test_types", "test_x", marks={"shared"}) == "crosscheck"
    assert tier_of("test_store", "test_x", fixtures=("tmp_path", "colqwen_dir")) == "model"
    assert tier_of("test_encoders", "test_x", marks={"slow"}) == "slow"
    assert tier_of("test_encoders", "test_x", marks={"gpu", "slow"}) == "gpu"
    assert tier_of("test_scoring", "test_equals_colpali_engine_where_padding_cannot_matter") == "model"
    assert tier_of("test_metrics", "test_dcg_golden") == "core"  # hand-computed goldens
    assert tier_of("test_new_file", "test_x") == "core"  # and test_every_test_module_has_a_tier fails
