"""The ``>>>`` examples in vdr's docstrings run as doctests.

Only the modules whose source holds ``>>>`` are imported (importing every module would import torch
and mteb for nothing); each must run at least one example, so an example that doctest cannot find
(outside a docstring, say) fails here too.
"""

from __future__ import annotations

import doctest
import importlib
import io
from pathlib import Path

import pytest

from shared_data import REPO_ROOT

PACKAGE = REPO_ROOT / "vdr"
#: modules that import a model library (marked ``model``: mteb imports torch, transformers, datasets)
MODEL_LIBRARY = {"vdr.integrations.mteb"}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO_ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules_with_examples() -> list[str]:
    """Dotted names of the vdr modules whose source contains ``>>>``, sorted."""
    return sorted(_module_name(p) for p in PACKAGE.rglob("*.py") if ">>>" in p.read_text(encoding="utf-8"))


def test_examples_are_found():
    names = modules_with_examples()
    assert {"vdr.corpus", "vdr.ingest.pdf"} <= set(names), names


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.model) if n in MODEL_LIBRARY else n for n in modules_with_examples()]
)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    out = io.StringIO()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    tests = doctest.DocTestFinder().find(module, name)
    for t in sorted(tests, key=lambda t: t.name):
        runner.run(t, out=out.write)
    res = runner.summarize(verbose=False)
    assert res.attempted > 0, f"{name} has '>>>' but doctest found no example in its docstrings"
    assert res.failed == 0, out.getvalue()
