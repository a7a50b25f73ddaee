"""Session fixtures shared by every test module (built once per test session), and the test tiers.

Markers (declared in pyproject.toml, ``--strict-markers``):

* ``shared("SUBFOLDER")`` -- reads ``../shared/SUBFOLDER`` (see :mod:`shared_data`); skipped, with
  the path looked at, when it is absent (a skip mark added at collection).
* ``model`` -- builds or loads a torch model (a tiny ColQwen2.5/ColPali, sentence-transformers'
  MiniLM) or imports a model library (colpali-engine, sentence-transformers, mteb). Added here to
  every test that uses a :mod:`tiny_models` fixture; ``make test-fast`` deselects it (and ``slow``).

Nothing is written inside the repository: the session fails (an error at teardown naming the files)
when the repository tree gained files during the run.
"""

from __future__ import annotations

import os
import tempfile

import pytest
from hypothesis.configuration import set_hypothesis_home_dir

from report_fixtures import lexical_results, sample_corpus  # noqa: F401
from shared_data import REPO_ROOT, missing_reason
from tiny_models import colpali_dir, colqwen, colqwen_dir  # noqa: F401
from tiny_st import tiny_st_dir  # noqa: F401

# hypothesis keeps its example database and caches in ./.hypothesis by default: inside the repository
_HYPOTHESIS_HOME = tempfile.TemporaryDirectory(prefix="vdr-hypothesis-")  # removed at exit
set_hypothesis_home_dir(_HYPOTHESIS_HOME.name)

#: fixtures that build or load a torch model: a test using any of them is marked ``model``
MODEL_FIXTURES = frozenset({"colqwen", "colqwen_dir", "colpali_dir", "tiny_st_dir"})


def pytest_collection_modifyitems(config, items):
    for item in items:
        if MODEL_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.model)
        for mark in item.iter_markers("shared"):
            reason = missing_reason(*mark.args)
            if reason:
                item.add_marker(pytest.mark.skip(reason=reason))


# ------------------------------------------------------------------ nothing written into the repository
#: written by Python and pytest themselves, not by tests
_OWN = {"__pycache__", ".pytest_cache", ".git", ".venv"}


def _repo_files() -> set[str]:
    found = set()
    for dirpath, dirnames, filenames in os.walk(REPO_ROOT):
        dirnames[:] = [d for d in dirnames if d not in _OWN and not d.endswith(".egg-info")]
        rel = os.path.relpath(dirpath, REPO_ROOT)
        found.update(os.path.normpath(os.path.join(rel, f)) for f in filenames)
        if not filenames and not dirnames:
            found.add(rel + os.sep)  # an empty folder counts too
    return found


@pytest.fixture(scope="session", autouse=True)
def repository_stays_clean():
    """Fail the session when a test wrote files into the repository (tests use ``tmp_path``)."""
    before = _repo_files()
    yield
    new = sorted(_repo_files() - before)
    if new:
        shown = "\n  ".join(new[:20]) + (f"\n  ... and {len(new) - 20} more" if len(new) > 20 else "")
        pytest.fail(f"the tests wrote {len(new)} file(s) into the repository {REPO_ROOT} (use tmp_path):\n  {shown}",
                    pytrace=False)
