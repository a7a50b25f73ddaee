"""The bundled sample corpus (assets/sample_corpus/, made by assets/make_sample.py).

Checks that the committed PDFs ingest to the pages the generator reports, that qrels, queries and
rewrite variants agree with each other and with the page ids, that every expected answer is in the
text layer of each page judged to answer it, and that re-running the generator reproduces the
committed files.
"""

from __future__ import annotations

import csv
import importlib.util
import json
import re
from pathlib import Path

import pytest

import vdr
from vdr.ingest import ingest_pdfs

ROOT = Path(__file__).resolve().parents[1]
ASSETS = ROOT / "assets"
SAMPLE = ASSETS / "sample_corpus"
PDFS = SAMPLE / "pdfs"
TEXT_FILES = ["queries.jsonl", "qrels.tsv", "rewrites-conversational.jsonl", "rewrites-keywords.jsonl", "manifest.json"]
VARIANTS = {"conversational": "rewrites-conversational.jsonl", "keywords": "rewrites-keywords.jsonl"}
STOP = set(
    "a an and are at be by did does do for from had has have how in into is it its of on or per the"
    " their there this to was were what when where which who why with year years much many".split()
)


def _norm(s: str) -> str:
    return " ".join(s.split())


def _qrels() -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    with open(SAMPLE / "qrels.tsv", encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f, delimiter="\t"))
    assert rows[0] == ["query-id", "corpus-id", "score"]
    for q, d, g in rows[1:]:
        assert d not in out.setdefault(q, {}), (q, d)
        out[q][d] = int(g)
    return out


@pytest.fixture(scope="module")
def manifest() -> dict:
    return json.loads((SAMPLE / "manifest.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> dict[str, str]:
    """Ingest the committed PDFs once: {corpus id: text layer}."""
    out = tmp_path_factory.mktemp("sample-corpus")
    report = ingest_pdfs(PDFS, out, dpi=72, ocr="never", workers=2, progress=False)
    assert report.ok, [d.to_json() for d in report.documents if d.status != "ok"]
    texts = {}
    with open(out / "pages.jsonl", encoding="utf-8") as f:
        for line in f:
            obj = json.loads(line)
            assert obj["text_source"] == "pdf", obj["corpus-id"]
            texts[obj["corpus-id"]] = obj["text"]
    assert len(texts) == report.pages
    return texts


def test_page_count_matches_generator(pages, manifest):
    assert 30 <= len(pages) <= 60
    assert len(pages) == manifest["total_pages"] == sum(d["pages"] for d in manifest["documents"])
    for d in manifest["documents"]:
        assert " " not in d["file"]
        assert sum(1 for p in pages if p.startswith(d["file"] + "#")) == d["pages"]
    total = sum(p.stat().st_size for p in PDFS.glob("*.pdf"))
    assert total < 3 * 1024 * 1024
    assert all(t.strip() for t in pages.values()), "every page has a text layer"


def test_qrels_ids_exist(pages):
    qrels = _qrels()
    queries = vdr.load_queries(SAMPLE / "queries.jsonl")
    assert len(queries.ids()) >= 30
    for q, docs in qrels.items():
        assert q in queries.queries, q
        for d, g in docs.items():
            assert d in pages, (q, d)
            assert g in (0, 1, 2), (q, d, g)
    # every query is judged (queries without a relevant page carry one grade-0 line)
    assert set(qrels) == set(queries.ids())


def test_rewrite_variants_align():
    originals = vdr.load_queries(SAMPLE / "queries.jsonl")
    for name, file in VARIANTS.items():
        variant = vdr.load_rewrites(SAMPLE / file, originals, name=name)
        assert variant.ids() == originals.ids()
        for qid in variant.ids():
            q = variant.queries[qid]
            assert q.text.strip(), (name, qid)
            assert q.text != originals.queries[qid].text, (name, qid)
    conv = vdr.load_queries(SAMPLE / VARIANTS["conversational"])
    assert all(conv.queries[q].history and all(h.strip() for h in conv.queries[q].history) for q in conv.ids())


def test_query_types(manifest):
    qrels = _qrels()
    types: dict[str, int] = {}
    for q in manifest["queries"]:
        types[q["type"]] = types.get(q["type"], 0) + 1
        grades = qrels[q["_id"]].values()
        if q["type"] == "none":
            assert q["answer"] is None and set(grades) == {0}, q
        else:
            assert q["answer"] and 2 in grades, q
    assert set(types) == {"extractive", "chart", "table", "paraphrase", "none"}
    assert types["none"] >= 3 and min(types.values()) >= 3, types
    # queries.jsonl carries the same type as a field to group by (vdr evaluate --group-by type; issue 27.2)
    fields = vdr.io.load_query_fields(SAMPLE / "queries.jsonl")
    assert fields == {q["_id"]: {"type": q["type"]} for q in manifest["queries"]}


def test_answers_in_text_layer(pages, manifest):
    """The expected answer is on every grade-2 page; chart answers on no unjudged page."""
    qrels = _qrels()
    texts = {d: _norm(t) for d, t in pages.items()}
    for q in manifest["queries"]:
        if q["answer"] is None:
            continue
        ans = _norm(q["answer"])
        for d, g in qrels[q["_id"]].items():
            if g == 2:
                assert ans in texts[d], (q["_id"], d, ans)
        if q["type"] == "chart":
            pat = re.compile(r"(?<![\d.])" + re.escape(ans) + r"(?!\d)")
            where = {d for d, t in texts.items() if pat.search(t)}
            assert where <= {d for d, g in qrels[q["_id"]].items() if g > 0}, (q["_id"], where)


def test_extractive_queries_share_words_with_page(pages, manifest):
    qrels = _qrels()
    queries = vdr.load_queries(SAMPLE / "queries.jsonl")
    for q in manifest["queries"]:
        if q["type"] != "extractive":
            continue
        words = {w for w in re.findall(r"[a-z0-9]+", queries.queries[q["_id"]].text.lower()) if w not in STOP and len(w) > 2}
        for d, g in qrels[q["_id"]].items():
            if g == 2:
                page_words = set(re.findall(r"[a-z0-9]+", pages[d].lower()))
                assert len(words & page_words) >= 2, (q["_id"], d, words)


def _load_generator():
    pytest.importorskip("matplotlib")
    pytest.importorskip("statsmodels")
    spec = importlib.util.spec_from_file_location("vdr_make_sample", ASSETS / "make_sample.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _pdf_texts(pdf: Path) -> list[str]:
    import pypdfium2 as pdfium

    doc = pdfium.PdfDocument(pdf)
    try:
        return [_norm(doc[i].get_textpage().get_text_bounded()) for i in range(len(doc))]
    finally:
        doc.close()


@pytest.mark.slow  # regenerates the 4 sample PDFs with matplotlib
def test_generator_reproduces_committed_files(tmp_path):
    gen = _load_generator()
    gen.generate(tmp_path)
    for name in TEXT_FILES:
        assert (tmp_path / name).read_bytes() == (SAMPLE / name).read_bytes(), name
    # the PDFs: same files with the same text layer page by page (the bytes are identical with
    # the same matplotlib version, but may differ across versions)
    new = sorted((tmp_path / "pdfs").glob("*.pdf"))
    assert [p.name for p in new] == sorted(p.name for p in PDFS.glob("*.pdf"))
    for pdf in new:
        assert _pdf_texts(pdf) == _pdf_texts(PDFS / pdf.name), pdf.name
