"""Passage collections in every format -> PassageCorpus (issue 15.1, issue 18.2)."""

from __future__ import annotations

import csv
import io
import json

import pytest

from vdr.corpus import Corpus, PassageCorpus, load_corpus, passage_text
from vdr.errors import InputError
from vdr.ingest.passages import detect_format, ingest_passages
from vdr.retrieve.base import corpus_texts, iter_corpus_texts


def _write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


# --------------------------------------------------------------------------------------------- 18.2 quoting

MSMARCO = 'p1\tfirst passage\np2\t"an unclosed quote starts this one\np3\tthird passage\np4\tfourth "quoted" words\n'


def test_python_csv_loses_msmarco_passages(tmp_path):
    """The failure being guarded against: csv's default quoting returns 2 rows for 4 lines."""
    rows = list(csv.reader(io.StringIO(MSMARCO), delimiter="\t"))
    assert len(rows) == 2


def test_msmarco_unclosed_quote_keeps_every_line(tmp_path):
    src = _write(tmp_path / "collection.tsv", MSMARCO)
    assert detect_format(src) == "msmarco"
    rep = ingest_passages(src, tmp_path / "c")
    assert rep.manifest["quoting"] == "none" and rep.manifest["format"] == "msmarco"
    assert rep.manifest["counts"] == {"passages": 4, "data_lines": 4, "header_lines": 0, "empty": 0}
    c = load_corpus(tmp_path / "c")
    assert isinstance(c, PassageCorpus) and c.kind == "passage"
    assert c.texts() == {
        "p1": "first passage",
        "p2": '"an unclosed quote starts this one',
        "p3": "third passage",
        "p4": 'fourth "quoted" words',
    }


DPR = (
    "id\ttext\ttitle\n"
    '1\t"Aaron ( or ; ""Aharon"") is a prophet"\tAaron [SEP] Introduction\n'
    "2\tplain text, no quotes\tMoses\n"
    '3\t\t""\n'
)


def test_dpr_tsv_is_csv_unquoted(tmp_path):
    src = _write(tmp_path / "full_wiki_segments.tsv", DPR)
    assert detect_format(src) == "tsv"
    rep = ingest_passages(src, tmp_path / "c")
    m = rep.manifest
    assert m["quoting"] == "csv" and m["counts"] == {"passages": 3, "data_lines": 3, "header_lines": 1, "empty": 1}
    assert m["empty"] == ["3"]
    c = PassageCorpus.load(tmp_path / "c")
    stored = list(c.iter_passages())
    assert stored[0] == ("1", "Aaron [SEP] Introduction", 'Aaron ( or ; "Aharon") is a prophet')
    assert c.texts()["1"] == 'Aaron Introduction Aaron ( or ; "Aharon") is a prophet'
    assert c.texts()["3"] == ""
    assert c.empty_ids() == {"3"}


def test_dpr_tsv_unclosed_quote_is_an_error_on_its_line(tmp_path):
    src = _write(tmp_path / "w.tsv", 'id\ttext\ttitle\n1\tok\tT\n2\t"never closed\tT\n3\tok\tT\n')
    with pytest.raises(InputError) as e:
        ingest_passages(src, tmp_path / "c")
    assert e.value.line == 3 and "unclosed quote" in str(e.value)
    assert not (tmp_path / "c" / "passages.jsonl").exists()


def test_tsv_field_count_mismatch(tmp_path):
    src = _write(tmp_path / "w.tsv", "id\ttext\ttitle\n1\tonly two\n")
    with pytest.raises(InputError, match="expected 3 tab-separated fields") as e:
        ingest_passages(src, tmp_path / "c")
    assert e.value.line == 2


def test_passage_text():
    assert passage_text("Aaron [SEP] Introduction", "x") == "Aaron Introduction x"
    assert passage_text("", "x") == "x" and passage_text("T", "") == "T" and passage_text("", "") == ""


# --------------------------------------------------------------------------------------------- other formats


def test_beir_corpus(tmp_path):
    d = tmp_path / "beir"
    d.mkdir()
    _write(d / "corpus.jsonl", "\n".join(json.dumps(o) for o in [
        {"_id": "d1", "title": "Cats", "text": "cats purr", "metadata": {}},
        {"_id": 7, "title": "", "text": "dogs bark"},
        {"_id": "d3", "text": ""},
    ]) + "\n")
    assert detect_format(d) == "beir"
    rep = ingest_passages(d, tmp_path / "c")
    assert rep.manifest["format"] == "beir" and rep.manifest["counts"]["empty"] == 1
    c = load_corpus(tmp_path / "c")
    assert c.ids() == ["d1", "7", "d3"] and len(c) == 3 and "7" in c and 7 not in c
    assert c.texts() == {"d1": "Cats cats purr", "7": "dogs bark", "d3": ""}


def test_pyserini_jsonl_folder(tmp_path):
    d = tmp_path / "coll"
    d.mkdir()
    _write(d / "b.jsonl", json.dumps({"id": "x3", "contents": "third"}) + "\n")
    _write(d / "a.jsonl", json.dumps({"id": "x1", "contents": "first"}) + "\n" + json.dumps({"id": "x2", "contents": "second"}) + "\n")
    assert detect_format(d) == "jsonl"
    ingest_passages(d, tmp_path / "c")
    c = load_corpus(tmp_path / "c")
    assert c.ids() == ["x1", "x2", "x3"]
    assert list(c.iter_texts(2)) == [(["x1", "x2"], ["first", "second"]), (["x3"], ["third"])]
    # single file
    ingest_passages(d / "a.jsonl", tmp_path / "c2", format="jsonl")
    assert load_corpus(tmp_path / "c2").ids() == ["x1", "x2"]


def test_hf_dataset_folder_and_parquet(tmp_path):
    datasets = pytest.importorskip("datasets")
    ds = datasets.Dataset.from_dict({"id": ["h1", "h2", "h3"], "title": ["A", "", "C"], "text": ["alpha", "beta", ""]})
    ds.save_to_disk(str(tmp_path / "ds"))
    assert detect_format(tmp_path / "ds") == "hf"
    rep = ingest_passages(tmp_path / "ds", tmp_path / "c")
    assert rep.manifest["quoting"] == "arrow" and rep.passages == 3
    assert load_corpus(tmp_path / "c").texts() == {"h1": "A alpha", "h2": "beta", "h3": "C"}
    ds.to_parquet(str(tmp_path / "p.parquet"))
    ingest_passages(tmp_path / "p.parquet", tmp_path / "c2")
    c2 = load_corpus(tmp_path / "c2")
    assert c2.texts() == {"h1": "A alpha", "h2": "beta", "h3": "C"}
    assert c2.fingerprint == load_corpus(tmp_path / "c").fingerprint  # same content, same digest


# --------------------------------------------------------------------------------------------- errors, contract


def test_duplicate_id_names_file_line_and_id(tmp_path):
    src = _write(tmp_path / "collection.tsv", "a\tone\nb\ttwo\nc\tthree\nb\tfour\n")
    with pytest.raises(InputError) as e:
        ingest_passages(src, tmp_path / "c")
    assert e.value.id == "b" and e.value.line == 4 and "first in" in str(e.value) and "line 2" in str(e.value)
    assert str(src) in str(e.value)


def test_blank_line_and_missing_tab_are_errors(tmp_path):
    src = _write(tmp_path / "collection.tsv", "a\tone\n\nc\tthree\n")
    with pytest.raises(InputError, match="blank line") as e:
        ingest_passages(src, tmp_path / "c", format="msmarco")
    assert e.value.line == 2


def test_empty_passages_counted_and_first_20_listed(tmp_path):
    lines = [f"p{i}\t{'' if i % 2 else 'word'}" for i in range(50)]
    src = _write(tmp_path / "collection.tsv", "\n".join(lines) + "\n")
    m = ingest_passages(src, tmp_path / "c").manifest
    assert m["counts"]["empty"] == 25 and m["empty"] == [f"p{i}" for i in range(1, 40, 2)]
    assert load_corpus(tmp_path / "c").empty_ids() == {f"p{i}" for i in range(1, 50, 2)}


def test_fingerprint_changes_with_content(tmp_path):
    a = ingest_passages(_write(tmp_path / "a.tsv", "p\tone\n"), tmp_path / "a").manifest["fingerprint"]
    b = ingest_passages(_write(tmp_path / "b.tsv", "p\ttwo\n"), tmp_path / "b").manifest["fingerprint"]
    assert a.startswith("sha256:") and a != b
    assert PassageCorpus.load(tmp_path / "a").fingerprint == a


def test_backend_helpers_read_a_passage_corpus(tmp_path):
    ingest_passages(_write(tmp_path / "c.tsv", "p1\tone\np2\ttwo\np3\tthree\n"), tmp_path / "c")
    c = load_corpus(tmp_path / "c")
    assert corpus_texts(c) == {"p1": "one", "p2": "two", "p3": "three"}
    assert list(iter_corpus_texts(c, 2)) == [(["p1", "p2"], ["one", "two"]), (["p3"], ["three"])]
    assert c.unavailable_reason("zz") is None and c.report["counts"]["passages"] == 3


def test_page_corpus_kind_and_load_corpus_dispatch(tmp_path):
    (tmp_path / "pages.jsonl").write_text("", encoding="utf-8")
    c = load_corpus(tmp_path)
    assert isinstance(c, Corpus) and c.kind == "page"
    with pytest.raises(InputError, match="not a passage corpus"):
        PassageCorpus.load(tmp_path)


def test_cli_ingest_passages(tmp_path):
    from typer.testing import CliRunner

    from vdr.cli import app

    src = _write(tmp_path / "collection.tsv", MSMARCO)
    r = CliRunner().invoke(app, ["ingest", "--passages", str(src), "--format", "msmarco", "--out", str(tmp_path / "c")])
    assert r.exit_code == 0, r.output
    assert "4 passages" in r.output and "quoting none" in r.output
    assert len(load_corpus(tmp_path / "c")) == 4


def test_changed_passages_file_is_detected(tmp_path):
    ingest_passages(_write(tmp_path / "c.tsv", "p1\tone\n"), tmp_path / "c")
    with open(tmp_path / "c" / "passages.jsonl", "a", encoding="utf-8") as f:
        f.write('{"id": "p2", "title": "", "text": "two"}\n')
    with pytest.raises(InputError, match="changed since ingest"):
        load_corpus(tmp_path / "c")


def test_passage_random_access(tmp_path):
    ingest_passages(_write(tmp_path / "c.tsv", "p1\tone\np2\ttwo \u00e9\u2028x\np3\tthree\n"), tmp_path / "c")
    c = load_corpus(tmp_path / "c")
    assert c.passage("p2") == ("", "two \u00e9\u2028x") and c.passage("p3") == ("", "three")
    with pytest.raises(KeyError):
        c.passage("p4")


def test_pandas_default_quoting_loses_msmarco_passages():
    pd = pytest.importorskip("pandas")
    df = pd.read_csv(io.StringIO(MSMARCO), sep="\t", header=None)
    assert len(df) < 4  # the failure ingest_passages guards against (4 lines -> fewer rows)


def test_tsv_header_in_another_order_and_without_title(tmp_path):
    ingest_passages(_write(tmp_path / "a.tsv", 'id\ttitle\ttext\nx\tT [SEP] S\t"a ""b"""\n'), tmp_path / "a")
    assert load_corpus(tmp_path / "a").texts() == {"x": 'T S a "b"'}
    ingest_passages(_write(tmp_path / "b.tsv", "id\ttext\ny\tplain\n"), tmp_path / "b")
    assert load_corpus(tmp_path / "b").texts() == {"y": "plain"}


def test_hf_duplicate_ids_and_unknown_format(tmp_path):
    datasets = pytest.importorskip("datasets")
    datasets.Dataset.from_dict({"_id": ["a", "b", "a"], "text": ["1", "2", "3"]}).save_to_disk(str(tmp_path / "ds"))
    with pytest.raises(InputError, match="duplicate passage id") as e:
        ingest_passages(tmp_path / "ds", tmp_path / "c")
    assert e.value.id == "a" and e.value.line == 3
    with pytest.raises(InputError, match="unknown collection format 'csv'"):
        ingest_passages(tmp_path / "ds", tmp_path / "c", format="csv")
