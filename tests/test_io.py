"""File formats: BEIR, TREC, pytrec_eval JSON, queries.jsonl, rewrites alignment and atomic writes."""

from __future__ import annotations

import json
import os
import re
import warnings
from pathlib import Path

import pytest

from vdr import AlignmentError, InputError, Qrels, Query, QuerySet, Run, VdrWarning
from vdr.io import (
    atomic_write,
    load_qrels,
    load_queries,
    load_rewrites,
    load_run,
    save_qrels,
    save_queries,
    save_run,
    write_bytes_atomic,
    write_text_atomic,
)

ASSETS = Path(__file__).resolve().parent.parent / "assets" / "sample"

QRELS = Qrels(
    {
        "q1": {"p9": 2, "p10": 1, "p1": 0},
        "01": {"doc#1": -1, "doc%20x": 3},
        "1": {"é-page": 1, "\U0001f600": 2},
    }
)
RUN = Run(
    {
        "q1": {"p9": 0.1 + 0.2, "p10": 1e-300, "p1": -5e-324, "p2": 1.7976931348623157e308},
        "01": {"doc#1": 0.3, "doc%20x": 0.3, "x": -0.0},
        "1": {"é-page": 123456789.123456789, "\U0001f600": 2.5},
    }
)


def write(path: Path, text: str | bytes) -> Path:
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_bytes(text.encode("utf-8"))
    return path


def err(fn, *args, **kw) -> InputError:
    with pytest.raises(InputError) as ei:
        fn(*args, **kw)
    return ei.value


# --------------------------------------------------------------------------------------------
# round trips


@pytest.mark.parametrize("name, fmt", [("q.txt", "auto"), ("q.tsv", "auto"), ("q.json", "auto"), ("q.qrels", "trec"), ("x.dat", "beir"), ("y", "json")])
def test_qrels_round_trip(tmp_path, name, fmt):
    p = tmp_path / name
    save_qrels(QRELS, p, format=fmt)
    back = load_qrels(p, format=fmt)
    assert back == QRELS
    assert back.to_dict() == QRELS.to_dict()
    assert all(type(g) is int for q in back for g in back[q].values())


def test_qrels_written_formats(tmp_path):
    q = Qrels({"q1": {"d1": 2, "d2": -1}})
    save_qrels(q, tmp_path / "a.trec")
    assert (tmp_path / "a.trec").read_text() == "q1 0 d1 2\nq1 0 d2 -1\n"
    save_qrels(q, tmp_path / "a.tsv")
    assert (tmp_path / "a.tsv").read_text() == "query-id\tcorpus-id\tscore\nq1\td1\t2\nq1\td2\t-1\n"
    save_qrels(q, tmp_path / "a.json")
    assert json.loads((tmp_path / "a.json").read_text()) == {"q1": {"d1": 2, "d2": -1}}


@pytest.mark.parametrize("name, fmt", [("r.trec", "auto"), ("r.json", "auto"), ("r.txt", "trec"), ("r", "json")])
def test_run_round_trip_exact_float64(tmp_path, name, fmt):
    p = tmp_path / name
    save_run(RUN, p, format=fmt, tag="mytag")
    back = load_run(p, format=fmt)
    assert back == RUN
    for q in RUN:
        for d, s in RUN[q].items():
            assert back[q][d] == s
            assert float(back[q][d]).hex() == float(s).hex()  # bit-exact, sign of -0.0 included
    assert back["q1"]["p9"] == 0.30000000000000004
    assert back["q1"]["p10"] == 1e-300
    assert back["q1"]["p1"] == -5e-324


def test_run_trec_written_ranked_with_tag(tmp_path):
    r = Run({"q": {"p10": 1.0, "p9": 1.0, "top": 2.0}}, name="sys")
    save_run(r, tmp_path / "r.trec")
    lines = (tmp_path / "r.trec").read_text().splitlines()
    assert lines == ["q Q0 top 1 2.0 sys", "q Q0 p9 2 1.0 sys", "q Q0 p10 3 1.0 sys"]
    save_run(r, tmp_path / "r2.trec", tag="other")
    assert (tmp_path / "r2.trec").read_text().splitlines()[0].endswith(" other")
    save_run(Run({"q": {"a": 1.0}}), tmp_path / "r3.trec")
    assert (tmp_path / "r3.trec").read_text() == "q Q0 a 1 1.0 vdr\n"
    assert load_run(tmp_path / "r.trec").name == "sys"


def test_queries_round_trip(tmp_path):
    qs = QuerySet({"q1": Query("plain"), "2": Query('quote " and \\ and é \u2028 x', ("earlier", "turn")), "01": "zero-one"})
    p = tmp_path / "queries.jsonl"
    save_queries(qs, p)
    back = load_queries(p)
    assert back.texts() == qs.texts()
    assert dict(back.queries) == dict(qs.queries)
    assert back["2"].history == ("earlier", "turn")
    assert list(back.ids()) == ["q1", "2", "01"]
    assert dict(back.lines) == {"q1": 1, "2": 2, "01": 3}
    assert back.source == str(p)
    lines = p.read_text(encoding="utf-8").split("\n")[:-1]  # U+2028 is written raw; not a line break for vdr
    assert json.loads(lines[0]) == {"_id": "q1", "text": "plain"}  # no empty history written
    assert len(lines) == 3


def test_sample_assets_load():
    q = load_qrels(ASSETS / "qrels.tsv")
    assert q["q4"].get("economics%20outlook.pdf#5") == -1
    assert q.num_entries() == 11 and len(q) == 5
    r = load_run(ASSETS / "run.trec")
    assert r.name == "colqwen2.5-original"
    assert r["q2"]["esg-report-2023.pdf#31"] == 17.5
    assert [d for d, _ in r.ranked("q2")][:2] == ["esg-report-2023.pdf#31", "esg-report-2023.pdf#30"]
    orig = load_queries(ASSETS / "queries.jsonl")
    rw = load_rewrites(ASSETS / "rewrites-expanded.jsonl", orig, "expanded")
    assert list(rw.ids()) == list(orig.ids())
    assert rw.name == "expanded" and orig.name == "original"


# --------------------------------------------------------------------------------------------
# format detection


def test_qrels_autodetect(tmp_path):
    beir_txt = write(tmp_path / "qrels.txt", "query-id\tcorpus-id\tscore\nq1\td 1\t2\n")
    assert load_qrels(beir_txt).to_dict() == {"q1": {"d 1": 2}}  # header decides; spaces allowed in BEIR ids
    beir_upper = write(tmp_path / "h.txt", "Query-ID\tCorpus-ID\tScore\nq1\td1\t1\n")
    assert load_qrels(beir_upper).to_dict() == {"q1": {"d1": 1}}
    trec = write(tmp_path / "qrels", "q1 0 d1 1\nq1 Q0 d2 0\n")
    assert load_qrels(trec).to_dict() == {"q1": {"d1": 1, "d2": 0}}
    js = write(tmp_path / "q.JSON", '{"q1": {"d1": 1}}')
    assert load_qrels(js).to_dict() == {"q1": {"d1": 1}}
    blank_first = write(tmp_path / "b.txt", "\n\n  \nquery-id\tcorpus-id\tscore\nq\td\t1\n")
    assert load_qrels(blank_first).to_dict() == {"q": {"d": 1}}


def test_run_autodetect(tmp_path):
    js = write(tmp_path / "r.json", '{"q1": {"d1": 0.5, "d2": 1}}')
    r = load_run(js)
    assert r.to_dict() == {"q1": {"d1": 0.5, "d2": 1}}
    assert r.name == "r"
    trec = write(tmp_path / "r.anything", "q1 Q0 d1 1 0.5 t\n")
    assert load_run(trec).to_dict() == {"q1": {"d1": 0.5}}


def test_unknown_format_rejected(tmp_path):
    p = write(tmp_path / "x.txt", "q1 0 d1 1\n")
    assert "csv" in str(err(load_qrels, p, format="csv"))
    assert "csv" in str(err(load_run, p, format="csv"))


# --------------------------------------------------------------------------------------------
# encodings and line handling


def test_bom_accepted(tmp_path):
    p = write(tmp_path / "q.tsv", b"\xef\xbb\xbfquery-id\tcorpus-id\tscore\nq1\td1\t1\n")
    assert load_qrels(p).to_dict() == {"q1": {"d1": 1}}
    p2 = write(tmp_path / "r.trec", b"\xef\xbb\xbfq1 Q0 d1 1 0.5 t\n")
    assert load_run(p2).to_dict() == {"q1": {"d1": 0.5}}
    p3 = write(tmp_path / "q.jsonl", b'\xef\xbb\xbf{"_id": "a", "text": "b"}\n')
    assert load_queries(p3).texts() == {"a": "b"}
    p4 = write(tmp_path / "r.json", b'\xef\xbb\xbf{"q": {"d": 1.5}}')
    assert load_run(p4).to_dict() == {"q": {"d": 1.5}}


def test_crlf_and_blank_lines(tmp_path):
    p = write(tmp_path / "q.tsv", b"query-id\tcorpus-id\tscore\r\n\r\nq1\td1\t1\r\n   \r\nq1\td2\t2\r\n")
    assert load_qrels(p).to_dict() == {"q1": {"d1": 1, "d2": 2}}
    p2 = write(tmp_path / "q.trec", b"q1 0 d1 1\r\n\r\n\tq1 0 d2 2\r\n")
    assert load_qrels(p2).to_dict() == {"q1": {"d1": 1, "d2": 2}}
    p3 = write(tmp_path / "r.trec", b"\r\nq1 Q0 d1 1 0.5 t\r\n\r\nq1 Q0 d2 2 0.25 t")  # no final newline
    assert load_run(p3).to_dict() == {"q1": {"d1": 0.5, "d2": 0.25}}
    p4 = write(tmp_path / "q.jsonl", b'\r\n{"_id": "a", "text": "b"}\r\n\r\n{"_id": "c", "text": "d"}\r\n')
    qs = load_queries(p4)
    assert qs.texts() == {"a": "b", "c": "d"}
    assert dict(qs.lines) == {"a": 2, "c": 4}


def test_blank_line_numbers_still_counted(tmp_path):
    p = write(tmp_path / "q.trec", "q1 0 d1 1\n\n\nq1 0 d2 x\n")
    e = err(load_qrels, p)
    assert e.line == 4
    assert f"{p}:4:" in str(e)


def test_invalid_utf8_names_line(tmp_path):
    p = write(tmp_path / "q.trec", "q1 0 d1 1\n".encode() + "q1 0 caf\xe9 1\n".encode("latin-1"))
    e = err(load_qrels, p)
    assert e.line == 2 and e.path == str(p)
    assert f"{p}:2:" in str(e) and "UTF-8" in str(e) and "0xe9" in str(e)
    pr = write(tmp_path / "r.trec", "q1 Q0 d1 1 0.5 t\nq1 Q0 d2 2 0.4 t\n".encode() + "q1 Q0 \xfc 3 0.3 t\n".encode("latin-1"))
    e = err(load_run, pr)
    assert e.line == 3 and f"{pr}:3:" in str(e)
    pq = write(tmp_path / "q.jsonl", '{"_id": "a", "text": "\xe9"}\n'.encode("latin-1"))
    e = err(load_queries, pq)
    assert e.line == 1 and "UTF-8" in str(e)


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be"])
def test_utf16_with_bom_rejected(tmp_path, encoding):
    text = "q1 0 d1 1\n"
    data = text.encode(encoding)
    if encoding == "utf-16-be":
        data = b"\xfe\xff" + data
    p = write(tmp_path / "q.trec", data)
    e = err(load_qrels, p)
    assert "UTF-16" in str(e) and e.line == 1 and str(p) in str(e)
    pr = write(tmp_path / "r.trec", ("q1 Q0 d1 1 0.5 t\n").encode("utf-16"))
    assert "UTF-16" in str(err(load_run, pr))


def test_missing_file_and_folder(tmp_path):
    missing = tmp_path / "nope.tsv"
    for fn in (load_qrels, load_run, load_queries):
        e = err(fn, missing)
        assert str(missing) in str(e) and "not found" in str(e)
    for fn in (load_qrels, load_run, load_queries):
        e = err(fn, tmp_path)
        assert "folder" in str(e)
    e = err(load_qrels, tmp_path / "nope.json")
    assert "not found" in str(e)


def test_empty_files(tmp_path):
    assert len(load_qrels(write(tmp_path / "q.trec", ""))) == 0
    r = load_run(write(tmp_path / "r.trec", "\n\n"))
    assert len(r) == 0 and r.name is None
    e = err(load_queries, write(tmp_path / "q.jsonl", ""))
    assert "no queries" in str(e) and str(tmp_path / "q.jsonl") in str(e)
    e = err(load_qrels, write(tmp_path / "q.tsv", ""))
    assert "header" in str(e)


# --------------------------------------------------------------------------------------------
# qrels errors


def test_beir_without_header(tmp_path):
    p = write(tmp_path / "q.tsv", "q1\td1\t1\n")
    e = err(load_qrels, p)
    assert e.line == 1 and "header" in str(e) and f"{p}:1:" in str(e)
    p2 = write(tmp_path / "q2.tsv", "query-id\tcorpus-id\n")
    assert err(load_qrels, p2).line == 1


@pytest.mark.parametrize(
    "body, line",
    [
        ("query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\n", 3),
        ("query-id\tcorpus-id\tscore\nq1\td1\t1\textra\n", 2),
        ("query-id\tcorpus-id\tscore\nq1 d1 1\n", 2),
        ("query-id\tcorpus-id\tscore\n\td1\t1\n", 2),
        ("query-id\tcorpus-id\tscore\nq1\t \t1\n", 2),
    ],
)
def test_beir_malformed_lines(tmp_path, body, line):
    p = write(tmp_path / "q.tsv", body)
    e = err(load_qrels, p)
    assert e.line == line and f"{p}:{line}:" in str(e)


@pytest.mark.parametrize(
    "bad_line, nfields",
    [("q1 0 d2", 3), ("q1 0 d2 1 extra", 5), ("q1 0 my doc 1", 5), ("q1", 1)],
)
def test_trec_qrels_wrong_field_count(tmp_path, bad_line, nfields):
    p = write(tmp_path / "q.trec", f"q1 0 d1 1\n{bad_line}\n")
    e = err(load_qrels, p)
    assert e.line == 2 and f"{p}:2:" in str(e)
    assert f"got {nfields}" in str(e)




@pytest.mark.parametrize(
    "grade", ["1.5", "x", "1.0", "", "1e0", "\u0663", "1 2", "+-1", "--1"]
)
def test_non_integer_grades(tmp_path, grade):
    p = write(tmp_path / "q.tsv", f"query-id\tcorpus-id\tscore\nq1\td1\t1\nquery-9\tpage-7\t{grade}\n")
    e = err(load_qrels, p)
    assert e.line == 3 and f"{p}:3:" in str(e)
    assert "'query-9'" in str(e) and "'page-7'" in str(e)
    assert "integer" in str(e)


@pytest.mark.parametrize("grade", ["1.5", "x", "two"])
def test_non_integer_grades_trec(tmp_path, grade):
    p = write(tmp_path / "q.trec", f"q1 0 d1 1\nq2 0 d9 {grade}\n")
    e = err(load_qrels, p)
    assert e.line == 2 and "'d9'" in str(e) and "'q2'" in str(e) and repr(grade) in str(e)


def test_signed_and_negative_grades(tmp_path):
    p = write(tmp_path / "q.trec", "q 0 a -1\nq 0 b +2\nq 0 c 0\nq 0 d -0\nq 0 e 007\n")
    assert load_qrels(p).to_dict() == {"q": {"a": -1, "b": 2, "c": 0, "d": 0, "e": 7}}


def test_duplicate_qrels_lines_name_both(tmp_path):
    p = write(tmp_path / "q.trec", "q1 0 d1 1\nq1 0 d2 1\n\nq1 0 d1 1\n")
    e = err(load_qrels, p)
    assert e.line == 4 and "line 1" in str(e) and f"{p}:4:" in str(e) and "'d1'" in str(e)
    p2 = write(tmp_path / "q.tsv", "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td1\t0\nq1\td1\t2\n")
    e = err(load_qrels, p2)
    assert e.line == 4 and "line 2" in str(e)
    # same corpus id under another query is not a duplicate
    assert load_qrels(write(tmp_path / "ok.trec", "q1 0 d 1\nq2 0 d 1\n")).num_entries() == 2


def test_trec_qrels_iteration_column_ignored_and_ids_kept_as_strings(tmp_path):
    p = write(tmp_path / "q.trec", "01 0 007 1\n1 Q0 7 2\n")
    q = load_qrels(p)
    assert q.to_dict() == {"01": {"007": 1}, "1": {"7": 2}}


def test_beir_ids_with_spaces_and_special_chars(tmp_path):
    p = write(tmp_path / "q.tsv", "query-id\tcorpus-id\tscore\nmy q\tdoc #1 %20 é\t1\n")
    assert load_qrels(p).to_dict() == {"my q": {"doc #1 %20 é": 1}}


def test_json_qrels_errors(tmp_path):
    p = write(tmp_path / "q.json", '{"q1": {"d1": 1},\n "q2": {"d2": 1.5}}')
    e = err(load_qrels, p)
    assert str(p) in str(e) and "'q2'" in str(e) and "'d2'" in str(e)
    p2 = write(tmp_path / "bad.json", '{"q1": {"d1": 1},\n\n "q2": }')
    e = err(load_qrels, p2)
    assert e.line == 3 and f"{p2}:3:" in str(e) and "invalid JSON" in str(e)
    p3 = write(tmp_path / "list.json", "[1, 2]")
    assert "object" in str(err(load_qrels, p3))
    p4 = write(tmp_path / "flat.json", '{"q1": 1}')
    assert "object" in str(err(load_qrels, p4))


# --------------------------------------------------------------------------------------------
# run errors and warnings


@pytest.mark.parametrize("score", ["nan", "NaN", "inf", "-inf", "Infinity", "1e400"])
def test_run_nonfinite_scores(tmp_path, score):
    p = write(tmp_path / "r.trec", f"q1 Q0 d1 1 0.5 t\nq7 Q0 doc-x 2 {score} t\n")
    e = err(load_run, p)
    assert e.line == 2 and f"{p}:2:" in str(e) and "'q7'" in str(e) and "'doc-x'" in str(e)
    assert "finite" in str(e)


@pytest.mark.parametrize("score", ["abc", "0.5.1", "", "0x10"])
def test_run_non_numeric_scores(tmp_path, score):
    line = f"q1 Q0 d1 1 {score} t" if score else "q1 Q0 d1 1 t"
    p = write(tmp_path / "r.trec", line + "\n")
    e = err(load_run, p)
    assert e.line == 1 and str(p) in str(e)


@pytest.mark.parametrize("bad", ["q1 Q0 d1 1 0.5", "q1 Q0 d1", "q1"])
def test_run_too_few_fields(tmp_path, bad):
    p = write(tmp_path / "r.trec", f"q1 Q0 d0 1 0.9 t\n\n{bad}\n")
    e = err(load_run, p)
    assert e.line == 3 and f"{p}:3:" in str(e) and "6" in str(e)


def test_run_rank_column_ignored(tmp_path):
    p = write(tmp_path / "r.trec", "q1 Q0 low 1 0.1 t\nq1 Q0 high 2 0.9 t\nq1 Q0 mid 99 0.5 t\nq1 Q0 x rank 0.3 t\n")
    r = load_run(p)
    assert [d for d, _ in r.ranked("q1")] == ["high", "mid", "x", "low"]


def test_run_scores_exact(tmp_path):
    p = write(tmp_path / "r.trec", "q Q0 a 1 0.30000000000000004 t\nq Q0 b 2 1e-300 t\nq Q0 c 3 -1.5E+2 t\nq Q0 d 4 7 t\n")
    r = load_run(p)
    assert r["q"]["a"] == 0.1 + 0.2
    assert r["q"]["b"] == 1e-300
    assert r["q"]["c"] == -150.0
    assert r["q"]["d"] == 7.0 and type(r["q"]["d"]) is float


def test_run_duplicates_keep_highest_and_warn(tmp_path):
    p = write(
        tmp_path / "r.trec",
        "q1 Q0 a 1 0.5 t\nq1 Q0 b 2 0.4 t\nq1 Q0 a 3 0.9 t\nq1 Q0 a 4 0.1 t\nq2 Q0 a 1 0.2 t\nq2 Q0 b 1 0.3 t\nq2 Q0 b 2 0.1 t\n",
    )
    with pytest.warns(VdrWarning) as rec:
        r = load_run(p)
    assert r.to_dict() == {"q1": {"a": 0.9, "b": 0.4}, "q2": {"a": 0.2, "b": 0.3}}
    msgs = [str(w.message) for w in rec if issubclass(w.category, VdrWarning)]
    assert len(msgs) == 1
    assert "3 duplicate" in msgs[0] and "line 3" in msgs[0] and str(p) in msgs[0]


def test_run_no_warning_without_duplicates(tmp_path):
    p = write(tmp_path / "r.trec", "q1 Q0 a 1 0.5 t\nq2 Q0 a 1 0.5 t\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = load_run(p)
    assert r.num_entries() == 2


def test_run_trailing_text_ignored_with_warning(tmp_path):
    p = write(tmp_path / "r.trec", "q1 Q0 a 1 0.5 tag\nq1 Q0 b 2 0.4 tag # a comment\nq1 Q0 c 3 0.3 tag more text\n")
    with pytest.warns(VdrWarning, match=r"2 line\(s\).*first at line 2") as rec:
        r = load_run(p)
    assert len([w for w in rec if issubclass(w.category, VdrWarning)]) == 1
    assert r.to_dict() == {"q1": {"a": 0.5, "b": 0.4, "c": 0.3}}
    assert r.name == "tag"


@pytest.mark.parametrize("line", ["q1 Q0 my doc 1 0.5 tag", "q1 Q0 doc x 1 0.5 tag", "my q Q0 doc 1 0.5 tag"])
def test_run_whitespace_id_shifting_rank_is_error(tmp_path, line):
    p = write(tmp_path / "r.trec", f"q1 Q0 ok 1 0.9 tag\n{line}\n")
    e = err(load_run, p)
    assert e.line == 2 and f"{p}:2:" in str(e) and "whitespace" in str(e)


def test_run_json_errors(tmp_path):
    p = write(tmp_path / "r.json", '{"q1": {"d1": NaN}}')
    e = err(load_run, p)
    assert str(p) in str(e) and "'q1'" in str(e) and "'d1'" in str(e)
    p2 = write(tmp_path / "r2.json", '{"q1": {"d1": "0.5"}}')
    assert "'d1'" in str(err(load_run, p2))
    p3 = write(tmp_path / "r3.json", '{"q1": {"d1": 1e999}}')
    assert "finite" in str(err(load_run, p3))


def test_unicode_and_special_ids_in_trec(tmp_path):
    p = write(tmp_path / "r.trec", "q#1 Q0 %20é\U0001f600 1 1.0 t\nq#1 Q0 a#b 2 1.0 t\n")
    r = load_run(p)
    assert [d for d, _ in r.ranked("q#1")] == ["a#b", "%20é\U0001f600"]  # tie: b"a" (0x61) > b"%" (0x25)
    assert set(r["q#1"]) == {"%20é\U0001f600", "a#b"}


def test_huge_ids_round_trip(tmp_path):
    big_q = "q" * 100_000
    big_d = "d" + "9" * 200_000
    q = Qrels({big_q: {big_d: 1}})
    save_qrels(q, tmp_path / "q.trec")
    assert load_qrels(tmp_path / "q.trec") == q
    r = Run({big_q: {big_d: 0.5}})
    save_run(r, tmp_path / "r.trec")
    assert load_run(tmp_path / "r.trec") == r


# --------------------------------------------------------------------------------------------
# writing ids the format cannot hold


@pytest.mark.parametrize("bad", ["a b", "a\tb", "a\nb", "a\u00a0b", "a\u2003b"])
def test_trec_write_rejects_whitespace_ids(tmp_path, bad):
    for obj, saver in ((Qrels({"q": {bad: 1}}), save_qrels), (Run({"q": {bad: 1.0}}), save_run)):
        dest = tmp_path / "out.trec"
        e = err(saver, obj, dest)
        assert repr(bad) in str(e) and e.id == bad
        assert not dest.exists()
        assert list(tmp_path.iterdir()) == []
    e = err(save_run, Run({bad: {"d": 1.0}}), tmp_path / "o.trec")
    assert repr(bad) in str(e)
    e = err(save_run, Run({"q": {"d": 1.0}}), tmp_path / "o.trec", tag=bad)
    assert "tag" in str(e)


def test_trec_write_whitespace_does_not_clobber_existing(tmp_path):
    dest = tmp_path / "out.trec"
    dest.write_text("previous\n")
    err(save_run, Run({"q": {"good": 2.0, "bad id": 1.0}}), dest)
    assert dest.read_text() == "previous\n"
    err(save_qrels, Qrels({"q": {"good": 2, "bad id": 1}}), dest)
    assert dest.read_text() == "previous\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.trec"]


def test_beir_write_rejects_tabs_but_allows_spaces(tmp_path):
    e = err(save_qrels, Qrels({"q": {"a\tb": 1}}), tmp_path / "q.tsv")
    assert repr("a\tb") in str(e)
    save_qrels(Qrels({"q x": {"a b": 1}}), tmp_path / "ok.tsv")
    assert load_qrels(tmp_path / "ok.tsv").to_dict() == {"q x": {"a b": 1}}
    # JSON holds anything
    q = Qrels({"q\tx": {"a\nb": 1}})
    save_qrels(q, tmp_path / "any.json")
    assert load_qrels(tmp_path / "any.json") == q


# --------------------------------------------------------------------------------------------
# queries.jsonl


def test_queries_int_id_and_history(tmp_path):
    p = write(
        tmp_path / "q.jsonl",
        '{"_id": 1, "text": "one"}\n{"_id": "01", "text": "zero one", "history": ["hi", "there"]}\n'
        '{"_id": "x", "text": "x?", "history": null, "extra": 5}\n',
    )
    qs = load_queries(p, name="orig2")
    assert list(qs.ids()) == ["1", "01", "x"]
    assert qs["01"] == Query("zero one", ("hi", "there"))
    assert qs["x"] == Query("x?", ())
    assert qs.name == "orig2"
    assert qs.where("01") == f"{p}:2"


@pytest.mark.parametrize(
    "body, line, needle",
    [
        ('{"text": "a"}', 1, "_id"),
        ('{"_id": "a"}', 1, "text"),
        ('{"_id": "a", "text": 5}', 1, "text"),
        ('{"_id": "a", "text": "  "}', 1, "empty query text"),
        ('[{"_id": "a", "text": "b"}]', 1, "object"),
        ('"just a string"', 1, "object"),
        ("not json", 1, "invalid JSON"),
        ('{"_id": 1.0, "text": "a"}', 1, "float"),
        ('{"_id": true, "text": "a"}', 1, "bool"),
        ('{"_id": null, "text": "a"}', 1, "query id"),
        ('{"_id": "", "text": "a"}', 1, "empty"),
        ('{"_id": "a", "text": "b", "history": "x"}', 1, "history"),
        ('{"_id": "a", "text": "b", "history": [1]}', 1, "history"),
    ],
)
def test_queries_errors(tmp_path, body, line, needle):
    p = write(tmp_path / "q.jsonl", '{"_id": "ok", "text": "fine"}\n\n' + body + "\n")
    e = err(load_queries, p)
    assert e.line == line + 2
    assert f"{p}:{line + 2}:" in str(e)
    assert needle in str(e)


def test_queries_duplicate_ids_name_both_lines(tmp_path):
    p = write(tmp_path / "q.jsonl", '{"_id": "a", "text": "x"}\n{"_id": "b", "text": "y"}\n{"_id": "a", "text": "z"}\n')
    e = err(load_queries, p)
    assert e.line == 3 and "line 1" in str(e) and "'a'" in str(e)
    p2 = write(tmp_path / "q2.jsonl", '{"_id": 7, "text": "x"}\n{"_id": "7", "text": "y"}\n')
    e = err(load_queries, p2)
    assert e.line == 2 and "line 1" in str(e)


# --------------------------------------------------------------------------------------------
# rewrites alignment


def _qfile(path: Path, ids) -> Path:
    return write(path, "".join(json.dumps({"_id": i, "text": f"t{i}"}) + "\n" for i in ids))


def test_rewrites_aligned_any_order(tmp_path):
    orig = load_queries(_qfile(tmp_path / "o.jsonl", ["a", "b", "c"]))
    rw = load_rewrites(_qfile(tmp_path / "v.jsonl", ["c", "a", "b"]), orig, "shuffled")
    assert set(rw) == {"a", "b", "c"} and rw.name == "shuffled"
    assert rw.source == str(tmp_path / "v.jsonl")


def test_rewrites_missing_and_extra(tmp_path):
    o = _qfile(tmp_path / "o.jsonl", ["a", "b", "c"])
    v = _qfile(tmp_path / "v.jsonl", ["a", "z", "c"])
    orig = load_queries(o)
    with pytest.raises(AlignmentError) as ei:
        load_rewrites(v, orig, "rw")
    msg = str(ei.value)
    assert isinstance(ei.value, InputError)
    assert "1 original query id(s) missing" in msg and f"'b' ({o}:2)" in msg
    assert "1 id(s) not among the originals" in msg and f"'z' ({v}:2)" in msg
    assert "'rw'" in msg and str(v) in msg


def test_rewrites_lists_at_most_ten(tmp_path):
    o = _qfile(tmp_path / "o.jsonl", [f"q{i}" for i in range(15)])
    v = _qfile(tmp_path / "v.jsonl", [f"q{i}" for i in range(13, 40)])
    orig = load_queries(o)
    with pytest.raises(AlignmentError) as ei:
        load_rewrites(v, orig, "rw")
    msg = str(ei.value)
    assert "13 original query id(s) missing" in msg
    assert "25 id(s) not among the originals" in msg
    missing_part, extra_part = msg.split("; ")
    assert re.findall(r"'(q\d+)' \(", missing_part) == [f"q{i}" for i in range(10)]
    assert re.findall(r"'(q\d+)' \(", extra_part) == [f"q{i}" for i in range(15, 25)]
    assert f"'q9' ({o}:10)" in missing_part and f"'q15' ({v}:3)" in extra_part
    assert "'q10'" not in missing_part and "'q25'" not in extra_part
    assert missing_part.endswith("...") and extra_part.endswith("...")


def test_rewrites_only_missing_no_ellipsis(tmp_path):
    orig = load_queries(_qfile(tmp_path / "o.jsonl", ["a", "b"]))
    with pytest.raises(AlignmentError) as ei:
        load_rewrites(_qfile(tmp_path / "v.jsonl", ["a"]), orig, "rw")
    msg = str(ei.value)
    assert "1 original query id(s) missing" in msg and "not among" not in msg and "..." not in msg


def test_rewrites_int_vs_str_ids_align(tmp_path):
    orig = load_queries(write(tmp_path / "o.jsonl", '{"_id": 1, "text": "a"}\n'))
    rw = load_rewrites(write(tmp_path / "v.jsonl", '{"_id": "1", "text": "b"}\n'), orig, "rw")
    assert rw.texts() == {"1": "b"}
    with pytest.raises(AlignmentError):
        load_rewrites(write(tmp_path / "v2.jsonl", '{"_id": "01", "text": "b"}\n'), orig, "rw")


def test_rewrites_against_in_memory_originals(tmp_path):
    orig = QuerySet.from_texts({"a": "x", "b": "y"})
    with pytest.raises(AlignmentError, match=r"'b' \(<original queries>\)"):
        load_rewrites(_qfile(tmp_path / "v.jsonl", ["a"]), orig, "rw")


# --------------------------------------------------------------------------------------------
# atomic writes


def test_atomic_write_success_and_no_temp(tmp_path):
    dest = tmp_path / "sub" / "deeper" / "f.txt"
    with atomic_write(dest) as f:
        f.write("héllo\n")
        assert not dest.exists()  # nothing visible until the context exits
    assert dest.read_bytes() == "héllo\n".encode()
    assert os.listdir(dest.parent) == ["f.txt"]
    write_bytes_atomic(dest, b"\x00\x01")
    assert dest.read_bytes() == b"\x00\x01"
    write_text_atomic(dest, "a\r\nb\n")
    assert dest.read_bytes() == b"a\r\nb\n"  # newline="" keeps text exactly
    assert os.listdir(dest.parent) == ["f.txt"]


def test_atomic_write_failure_keeps_destination(tmp_path):
    dest = tmp_path / "f.txt"
    dest.write_text("old content\n")
    with pytest.raises(RuntimeError, match="boom"):
        with atomic_write(dest) as f:
            f.write("partial new content")
            f.flush()
            raise RuntimeError("boom")
    assert dest.read_text() == "old content\n"
    assert os.listdir(tmp_path) == ["f.txt"]


def test_atomic_write_failure_without_existing_destination(tmp_path):
    dest = tmp_path / "new.bin"
    with pytest.raises(KeyboardInterrupt):
        with atomic_write(dest, "wb") as f:
            f.write(b"x" * 10_000)
            raise KeyboardInterrupt
    assert os.listdir(tmp_path) == []


def test_atomic_write_bad_mode(tmp_path):
    with pytest.raises(ValueError):
        with atomic_write(tmp_path / "x", "a"):
            pass
    assert os.listdir(tmp_path) == []


def test_save_run_failure_midway_keeps_old_file(tmp_path):
    dest = tmp_path / "r.trec"
    dest.write_text("old\n")
    # the bad id sorts last, so earlier lines were already written to the temp file
    run = Run({"q1": {"a": 3.0, "b": 2.0}, "q2": {"c d": 1.0}})
    err(save_run, run, dest)
    assert dest.read_text() == "old\n"
    assert os.listdir(tmp_path) == ["r.trec"]


# --------------------------------------------------------------------------------------------
# regressions: bugs found by adversarial testing, now fixed


def test_json_qrels_duplicate_keys_rejected(tmp_path):
    p = write(tmp_path / "q.json", '{"q1": {"d1": 1, "d1": 2}}')
    e = err(load_qrels, p)
    assert "'d1'" in str(e)


@pytest.mark.parametrize("score", ["1_000", "\uff11.\uff15"])
def test_run_score_python_only_syntax_rejected(tmp_path, score):
    p = write(tmp_path / "r.trec", f"q1 Q0 d1 1 {score} t\n")
    err(load_run, p)


def test_utf16_without_bom_names_encoding(tmp_path):
    p = write(tmp_path / "q.trec", "q1 0 d1 1\n".encode("utf-16-le"))
    e = err(load_qrels, p)
    assert "UTF-16" in str(e) or "NUL" in str(e) or "encoding" in str(e)


def test_json_run_named_with_space_saves_as_trec(tmp_path):
    p = write(tmp_path / "my run.json", '{"q1": {"d1": 1.5, "d1": 2.5}}')
    with pytest.warns(VdrWarning, match="1 duplicate"):
        run = load_run(p)
    assert run.to_dict() == {"q1": {"d1": 2.5}}
    save_run(run, tmp_path / "x.trec")
    assert (tmp_path / "x.trec").read_text() == "q1 Q0 d1 1 2.5 my_run\n"
