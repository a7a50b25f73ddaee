"""notebooks/explore.ipynb runs without errors on the bundled sample (nbclient), with and without a
ColPali-family model (a tiny local ColQwen2.5 from tiny_models.py exercises the similarity-map cell)."""

from __future__ import annotations

import os

import pytest

from report_fixtures import ROOT, SAMPLE  # noqa: F401

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOK = ROOT / "notebooks" / "explore.ipynb"


@pytest.fixture(scope="module")
def sample_results(sample_corpus, tmp_path_factory):
    """The sample evaluated with the lexical and semantic backends (and their hybrid)."""
    from vdr.experiment.evaluation import evaluate

    out = tmp_path_factory.mktemp("nb-results") / "results"
    evaluate(sample_corpus, queries=SAMPLE / "queries.jsonl", qrels=SAMPLE / "qrels.tsv",
             rewrites={"conversational": SAMPLE / "rewrites-conversational.jsonl", "keywords": SAMPLE / "rewrites-keywords.jsonl"},
             out=out, backends="lexical,semantic,hybrid", progress=False, n_permutations=1000, n_bootstrap=1000)
    return out


def _run(monkeypatch, results, model=None) -> list:
    monkeypatch.setenv("VDR_RESULTS", str(results))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    if model is None:
        monkeypatch.delenv("VDR_MODEL", raising=False)
    else:
        monkeypatch.setenv("VDR_MODEL", str(model))
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbclient.NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()
    return [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]


def _text(outputs) -> str:
    return "".join(o.get("text", "") for o in outputs if o.output_type == "stream")


def _images(outputs) -> int:
    return sum("image/png" in o.get("data", {}) for o in outputs)


@pytest.mark.model  # the sample is evaluated with the semantic backend (sentence-transformers)
def test_notebook_without_model(sample_results, monkeypatch):
    outs = _run(monkeypatch, sample_results)
    assert not [o for o in outs if o.output_type == "error"]
    text = _text(outs)
    assert "42 queries; backends lexical, semantic, hybrid; variants original, conversational, keywords" in text
    assert "warning:" not in text
    assert "VDR_MODEL is not set" in text and "similarity map skipped" in text
    # the table, then the largest lexical regression (q10: conversational drops nDCG@3 from 1 to 0)
    html = "".join(o.get("data", {}).get("text/html", "") for o in outs)
    assert "<table" in html and "0.6977" in html
    assert "10206 per-query values; mean ndcg@3 per variant and backend:" in text  # 9 runs x 42 queries x 27 metrics (ties@k included)
    assert "query q10" in text and "lexical / conversational  ndcg@3 0.000" in text
    assert "judged pages: {'grunfeld-investment-deck.pdf#3': 2}" in text
    assert _images(outs) == 3 + 1  # one grid per backend + the relevant pages


@pytest.mark.slow
def test_notebook_similarity_map(sample_results, colqwen_dir, monkeypatch):  # noqa: F811
    outs = _run(monkeypatch, sample_results, model=colqwen_dir)
    assert not [o for o in outs if o.output_type == "error"]
    text = _text(outs)
    assert "VDR_MODEL is not set" not in text
    assert "page grunfeld-investment-deck.pdf#3, query q10 (original): token #" in text
    assert _images(outs) == 3 + 1 + 1  # + the similarity map
