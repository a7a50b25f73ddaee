"""Where the optional shared test material lives: ``../shared`` beside the repository.

A checkout that has it (CI does) runs every test; a fresh clone without it skips, with the reason,
only the tests marked ``@pytest.mark.shared(...)``. The folder holds material that cannot be
generated here:

* ``pdfs/`` -- real-world PDFs (encrypted, rotated, CMYK, broken, a huge scan) for the ingest tests;
* ``trec_eval_ref/`` -- trec_eval's own test qrels, runs and expected outputs (metric conformance).

Mark a test with the sub-folder it reads; it is skipped when that folder is absent::

    from shared_data import shared_path

    @pytest.mark.shared("trec_eval_ref")
    def test_conformance():
        ref = shared_path("trec_eval_ref") / "out.test.aq"

The skip itself is added in ``conftest.py`` (``pytest_collection_modifyitems``). ``VDR_SHARED`` overrides the
location (a folder with the same layout).
"""

from __future__ import annotations

import os
from pathlib import Path

#: The repository root (the folder holding ``pyproject.toml`` and ``tests/``).
REPO_ROOT = Path(__file__).resolve().parents[1]
#: ``../shared`` relative to the repository root, or ``$VDR_SHARED`` when set.
SHARED = Path(os.environ["VDR_SHARED"]).resolve() if os.environ.get("VDR_SHARED") else REPO_ROOT.parent / "shared"
#: What each sub-folder holds, for the skip reason.
CONTENTS = {
    "pdfs": "real-world PDFs for the ingest tests",
    "trec_eval_ref": "trec_eval's test qrels, runs and expected outputs",
}


def shared_path(*parts: str) -> Path:
    """``SHARED / parts...`` (existence is not checked: mark the test ``shared`` to skip without it)."""
    return SHARED.joinpath(*parts)


def missing_reason(*parts: str) -> str | None:
    """``None`` when ``SHARED / parts...`` exists, otherwise the skip reason naming the path looked at.

    With no ``parts`` the shared folder itself is checked.
    """
    p = shared_path(*parts)
    if p.exists():
        return None
    what = CONTENTS.get(parts[0], "shared test material") if parts else "shared test material"
    return f"needs ../shared/{'/'.join(parts)} ({what}): not found at {p} (set VDR_SHARED to its location)"
