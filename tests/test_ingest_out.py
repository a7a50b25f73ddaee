"""``vdr ingest --out DIR`` (vdr.ingest.target): a results folder or another non-empty folder is
refused (the folder named, nothing written) unless --overwrite; a corpus folder of the same kind is
re-ingested as before (PDFs resume); a corpus of the other kind is always refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_helpers import cli, snapshot
from vdr.corpus import load_corpus

MSMARCO = "p1\tsolar panels\np2\triver floods\np3\tbank rates\n"


@pytest.fixture()
def collection(tmp_path) -> Path:
    p = tmp_path / "collection.tsv"
    p.write_text(MSMARCO, encoding="utf-8")
    return p


def passages(capsys, src, out, *extra):
    return cli(capsys, "ingest", "--passages", src, "--format", "msmarco", "--out", out, *extra)


@pytest.fixture()
def results_dir(tmp_path, capsys) -> Path:
    """A real results folder written by `vdr compare` (results.json, per_query.csv, runs/)."""
    (tmp_path / "qrels.txt").write_text("q1 0 d1 1\nq2 0 d2 1\n", encoding="utf-8")
    (tmp_path / "a.trec").write_text("q1 Q0 d1 1 2.0 a\nq2 Q0 d2 1 1.0 a\n", encoding="utf-8")
    (tmp_path / "b.trec").write_text("q1 Q0 d2 1 2.0 b\nq2 Q0 d2 1 1.0 b\n", encoding="utf-8")
    out = tmp_path / "res"
    rc, _, err = cli(capsys, "compare", tmp_path / "qrels.txt", tmp_path / "a.trec", tmp_path / "b.trec", "--out", out, "--no-report")
    assert rc == 0, err
    return out


def test_a_results_folder_is_refused_unless_overwrite(results_dir, collection, capsys):
    before = snapshot(results_dir)
    assert "results.json" in before
    rc, _, err = passages(capsys, collection, results_dir)
    assert rc == 2 and err.count("\n") == 1
    assert err.startswith(f"error: {results_dir}: the folder is a vdr results folder (results.json, written by vdr evaluate"
                          " / vdr compare), not a corpus folder; choose another --out, or give --overwrite"), err
    assert snapshot(results_dir) == before  # nothing written
    rc, out, err = passages(capsys, collection, results_dir, "--overwrite")
    assert rc == 0, err
    assert "3 passages" in out and len(load_corpus(results_dir)) == 3
    after = snapshot(results_dir)
    assert {k: v for k, v in after.items() if k in before} == before  # the results stay, untouched


def test_a_non_empty_other_folder_is_refused_and_inputs_inside_do_not_count(tmp_path, collection, capsys):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    (out / "data").mkdir()
    rc, _, err = passages(capsys, collection, out)
    assert rc == 2 and err == (f"error: {out}: the folder is not empty and not a passage corpus folder (it holds data, notes.txt);"
                               " choose another --out, or give --overwrite to write the corpus into it anyway (the other files stay)\n")
    assert sorted(p.name for p in out.iterdir()) == ["data", "notes.txt"]
    # the collection inside --out is an input, not foreign content
    inside = tmp_path / "own"
    inside.mkdir()
    src = inside / "collection.tsv"
    src.write_text(MSMARCO, encoding="utf-8")
    assert passages(capsys, src, inside)[0] == 0 and len(load_corpus(inside)) == 3
    f = tmp_path / "file"
    f.write_text("x")
    rc, _, err = passages(capsys, collection, f, "--overwrite")
    assert rc == 2 and err == f"error: {f}: the corpus folder (--out) is a file, not a folder\n"


def test_same_kind_corpus_is_reingested_other_kind_always_refused(tmp_path, collection, capsys):
    out = tmp_path / "c"
    assert passages(capsys, collection, out)[0] == 0
    (out / "README").write_text("my notes")  # a corpus folder's other files do not block a re-ingest
    collection.write_text(MSMARCO + "p4\twheat harvest\n", encoding="utf-8")
    rc, o, err = passages(capsys, collection, out)
    assert rc == 0, err
    assert "4 passages" in o and load_corpus(out).ids() == ["p1", "p2", "p3", "p4"]
    page = tmp_path / "pages"
    page.mkdir()
    (page / "pages.jsonl").write_text("")
    for extra in ((), ("--overwrite",)):
        rc, _, err = passages(capsys, collection, page, *extra)
        assert rc == 2 and err == f"error: {page}: the folder holds a page corpus; ingest the passage corpus into another --out\n"
    assert sorted(p.name for p in page.iterdir()) == ["pages.jsonl"]


def test_pdf_ingest_resumes_in_its_corpus_and_refuses_a_results_folder(tmp_path, results_dir, capsys):
    pf = pytest.importorskip("pdf_factory")
    pf.text_pdf(tmp_path / "in" / "a.pdf", ["first page", "second page"])
    args = [tmp_path / "in", "--dpi", "36", "--ocr", "never", "-q", "--workers", "1"]
    out = tmp_path / "corpus"
    (out / "images").mkdir(parents=True)  # what an ingest stopped before pages.jsonl leaves: still a corpus folder
    rc, o, err = cli(capsys, "ingest", *args, "--out", out)
    assert rc == 0 and "1 PDF: 1 ok" in o and "2 pages" in o, err
    rc, o, err = cli(capsys, "ingest", *args, "--out", out)  # resume: the unchanged PDF is reused
    assert rc == 0 and "1 unchanged since the last run" in o, err
    assert json.loads((out / "ingest-report.json").read_text())["pages"] == 2
    before = snapshot(results_dir)
    rc, _, err = cli(capsys, "ingest", *args, "--out", results_dir)
    assert rc == 2 and f"{results_dir}: the folder is a vdr results folder" in err
    assert snapshot(results_dir) == before
