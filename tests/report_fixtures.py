"""Session fixtures for the report tests: the bundled sample ingested once, and results folders.

Import into a test module with ``from report_fixtures import sample_corpus, lexical_results``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "assets" / "sample_corpus"
EVIL = '<script>alert("x")</script>'
EVIL_HISTORY = "<b>bold</b> & co"


@pytest.fixture(scope="session")
def sample_corpus(tmp_path_factory) -> Path:
    """The bundled sample's 4 PDFs ingested into a corpus folder (43 pages)."""
    import vdr

    out = tmp_path_factory.mktemp("report-corpus") / "corpus"
    vdr.ingest(SAMPLE / "pdfs", out, progress=False)
    return out


@pytest.fixture(scope="session")
def lexical_results(sample_corpus, tmp_path_factory) -> Path:
    """A results folder with only the lexical backend and two rewrite variants: ``conversational``
    and ``evil`` (the keyword rewrites, except q01's, which is a ``<script>`` tag with an HTML
    history turn: BM25 finds nothing for it, so q01 drops from nDCG@3 1.0 to 0.0)."""
    from vdr.experiment.evaluation import evaluate

    d = tmp_path_factory.mktemp("report-lexical")
    lines = []
    for line in (SAMPLE / "rewrites-keywords.jsonl").read_text(encoding="utf-8").splitlines():
        obj = json.loads(line)
        if obj["_id"] == "q01":
            obj = {"_id": "q01", "text": EVIL, "history": [EVIL_HISTORY]}
        lines.append(json.dumps(obj))
    evil = d / "rewrites-evil.jsonl"
    evil.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = d / "results"
    evaluate(sample_corpus, queries=SAMPLE / "queries.jsonl", qrels=SAMPLE / "qrels.tsv",
             rewrites={"conversational": SAMPLE / "rewrites-conversational.jsonl", "evil": evil},
             out=out, backends="lexical", progress=False, n_permutations=2000, n_bootstrap=2000)
    return out


def copy_results(src: Path, dst: Path, corpus_dir: str | Path | None = None) -> Path:
    """Copy a results folder; optionally point its ``config.corpus_dir`` elsewhere."""
    shutil.copytree(src, dst)
    if corpus_dir is not None:
        p = dst / "results.json"
        doc = json.loads(p.read_text(encoding="utf-8"))
        doc["config"]["corpus_dir"] = str(corpus_dir)
        doc["config"].get("inputs_relative_to_results", {}).pop("corpus_dir", None)  # the copy's corpus is elsewhere
        p.write_text(json.dumps(doc), encoding="utf-8")
    return dst
