"""Issue 13 item 1: judged pages that ingest failed or skipped stay relevant but unretrievable.

A PDF that failed ingest, or a page skipped for its aspect ratio, counts in IDCG and in the recall
denominator (a failure lowers the scores instead of vanishing); `vdr evaluate` warns and lists
them with the reason ingest recorded. An id of no ingested document stays an error (exit 2).
"""

from __future__ import annotations

import json
import math

import pytest

pytest.importorskip("pikepdf")

import pdf_factory as pf  # noqa: E402

from vdr.cli import main  # noqa: E402
from vdr.ingest import ingest_pdfs  # noqa: E402


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("item1")
    pf.text_pdf(root / "in" / "good.pdf", ["alpha report", "beta summary"])
    pf.truncated_pdf(root / "in" / "bad.pdf")
    pf.text_pdf(root / "in" / "mixed.pdf", ["gamma page", "strip"], size=[(595, 842), (14400, 50)])
    ingest_pdfs(root / "in", root / "corpus", dpi=36, ocr="never", workers=1, progress=False)
    (root / "queries.jsonl").write_text('{"_id": "q1", "text": "alpha"}\n{"_id": "q2", "text": "gamma"}\n')
    return root


def _evaluate(root, qrels_lines, capsys):
    (root / "qrels.txt").write_text("".join(f"{q} 0 {d} {g}\n" for q, d, g in qrels_lines))
    out = root / f"res{len(list(root.glob('res*')))}"
    code = main(["evaluate", str(root / "corpus"), "--queries", str(root / "queries.jsonl"), "--qrels", str(root / "qrels.txt"),
                 "--backend", "lexical", "--out", str(out)])
    return code, out, capsys.readouterr()


def test_failed_and_skipped_judged_pages_count_and_are_listed(corpus_dir, capsys):
    qrels = [("q1", "good.pdf#1", 1), ("q1", "bad.pdf#1", 1), ("q2", "mixed.pdf#1", 1), ("q2", "mixed.pdf#2", 1)]
    code, out, io = _evaluate(corpus_dir, qrels, capsys)
    assert code == 0, io.err
    assert "2 judged page(s) were not ingested and stay relevant but unretrievable" in io.err
    assert "bad.pdf#1: bad.pdf: truncated PDF (no %%EOF marker at the end of the file)" in io.err
    assert "mixed.pdf#2: extreme aspect ratio 288:1 (models accept at most 200:1)" in io.err
    res = json.loads((out / "results.json").read_text())
    (run,) = [r for r in res["runs"] if r["backend"] == "lexical" and r["variant"] == "original"]
    # each query: its one retrievable relevant page at rank 1, one unretrievable relevant page
    ndcg = 1 / (1 + 1 / math.log2(3))  # 0.6131
    assert run["aggregate"]["ndcg@3"] == pytest.approx(ndcg)  # the same for q1 and q2
    assert run["aggregate"]["recall@5"] == pytest.approx(0.5)  # 1 of 2 relevant pages each
    assert run["num_queries"] == 2


def test_an_id_of_no_ingested_document_stays_an_error(corpus_dir, capsys):
    for bad in ("nosuch.pdf#1", "good.pdf#3", "mixed.pdf#3"):
        code, _, io = _evaluate(corpus_dir, [("q1", "good.pdf#1", 1), ("q1", bad, 1)], capsys)
        assert code == 2 and "are not pages of the corpus" in io.err and bad in io.err, (bad, io.err)
