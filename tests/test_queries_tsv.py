"""Query files people have: TSV topics (pyserini / MS MARCO), empty files, empty query texts."""

from __future__ import annotations

import pytest

from vdr.errors import InputError
from vdr.io import load_queries, load_rewrites
from vdr.types import Query


def _write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


def test_tsv_topics_msmarco_style(tmp_path):
    p = _write(tmp_path / "queries.dev.tsv", '1048585\twhat is paula deen\'s brother\n2\t"quoted" stays as typed\n')
    qs = load_queries(p)
    assert list(qs.ids()) == ["1048585", "2"]
    assert qs["1048585"] == Query("what is paula deen's brother", ())
    assert qs["2"].text == '"quoted" stays as typed'  # no CSV unquoting of topics
    assert qs.where("2") == f"{p}:2"


def test_tsv_topics_header_and_autodetect_without_suffix(tmp_path):
    p = _write(tmp_path / "topics", "qid\ttext\nq1\tfirst query\n\nq2\tsecond\twith a tab\n")
    qs = load_queries(p)
    assert list(qs.ids()) == ["q1", "q2"]
    assert qs["q2"].text == "second\twith a tab"  # the text is everything after the first tab


def test_jsonl_still_read_as_beir(tmp_path):
    p = _write(tmp_path / "q.txt", '{"_id": "a", "text": "b"}\n')
    with pytest.raises(InputError, match="no tab"):
        load_queries(p)  # .txt is TSV topics ...
    assert load_queries(p, format="jsonl")["a"].text == "b"  # ... unless told otherwise


@pytest.mark.parametrize("name, body, line", [("q.tsv", "q1\tok\nq2\t  \n", 2), ("q.jsonl", '{"_id": "q1", "text": ""}\n', 1)])
def test_empty_query_text_names_file_and_line(tmp_path, name, body, line):
    p = _write(tmp_path / name, body)
    with pytest.raises(InputError) as ei:
        load_queries(p)
    assert f"{p}:{line}:" in str(ei.value) and "empty query text" in str(ei.value)


@pytest.mark.parametrize("name", ["q.tsv", "q.jsonl"])
def test_empty_queries_file_says_so(tmp_path, name):
    p = _write(tmp_path / name, "\n\n")
    with pytest.raises(InputError) as ei:
        load_queries(p)
    assert "no queries" in str(ei.value) and str(p) in str(ei.value)


def test_tsv_errors(tmp_path):
    with pytest.raises(InputError, match=r":2: expected 'qid<TAB>text'"):
        load_queries(_write(tmp_path / "a.tsv", "q1\tx\nq2 no tab\n"))
    with pytest.raises(InputError, match="given twice"):
        load_queries(_write(tmp_path / "b.tsv", "q1\tx\nq1\ty\n"))


def test_tsv_rewrite_variant_aligned_with_jsonl_originals(tmp_path):
    orig = load_queries(_write(tmp_path / "q.jsonl", '{"_id": "1", "text": "a"}\n{"_id": "2", "text": "b"}\n'))
    rw = load_rewrites(_write(tmp_path / "rw.tsv", "2\tB\n1\tA\n"), orig, "upper")
    assert rw["1"].text == "A" and rw["2"].text == "B" and rw.name == "upper"
