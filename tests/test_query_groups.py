"""Breakdown by query group (issue 27.2): query fields read from queries.jsonl (extra JSON fields,
BEIR ``metadata``) and from a TSV ``query-id<TAB>field<TAB>value``; the per-group comparison
(:func:`vdr.stats.compare_groups`: n, means, change with CI, exact paired test, Holm over groups x
variants) checked against hand computation; the same numbers in results.json, ``to_pandas`` and
the tables; ``vdr evaluate --group-by`` end to end on a tiny corpus."""

from __future__ import annotations

import json

import numpy as np
import pytest

import vdr
from cli_helpers import cli
from vdr.errors import InputError
from vdr.io import load_query_fields, load_query_groups, read_query_fields
from vdr.metrics import MetricsResult
from vdr.results import Results, RunResult
from vdr.stats import MISSING_GROUP, compare_groups, group_order
from vdr.types import ORIGINAL, Query, QuerySet

# ------------------------------------------------------------------------------------------ reading the fields


def test_fields_of_a_queries_file(tmp_path):
    p = tmp_path / "q.jsonl"
    p.write_text("\n".join([
        json.dumps({"_id": "q1", "text": "a", "type": "visual", "language": "en", "hops": 2, "multi": True}),
        json.dumps({"_id": 2, "text": "b", "history": ["x"], "type": "extractive", "metadata": {"source": "web", "type": "ignored"}}),
        json.dumps({"_id": "q3", "text": "c", "type": None, "tags": ["chart", "table"], "nested": {"a": 1}, "empty": ""}),
        json.dumps({"_id": "q4", "text": "d"}),
    ]) + "\n", encoding="utf-8")
    assert load_query_fields(p) == {
        "q1": {"type": "visual", "language": "en", "hops": "2", "multi": "true"},  # numbers and booleans in JSON spelling
        "2": {"source": "web", "type": "extractive"},  # BEIR's metadata object; a top-level field wins
        "q3": {"tags": ("chart", "table")},  # a list: one group per element; null, nested and empty values are no value
    }
    assert vdr.load_queries(p)["q1"].text == "a"  # the query itself is read as before
    tsv = tmp_path / "topics.tsv"
    tsv.write_text("q1\tsolar panels\n", encoding="utf-8")
    assert load_query_fields(tsv) == {}  # TSV topics have no fields


def test_fields_from_a_tsv_win_and_missing_fields_are_refused(tmp_path):
    q = tmp_path / "q.jsonl"
    q.write_text(json.dumps({"_id": "q1", "text": "a", "type": "visual"}) + "\n" + json.dumps({"_id": "q2", "text": "b"}) + "\n")
    g = tmp_path / "groups.tsv"
    g.write_text("query-id\tfield\tvalue\nq2\ttype\ttextual\nq1\tdomain\tfinance\nq1\ttype\tchart\n", encoding="utf-8")
    assert load_query_groups(g) == {"q2": {"type": "textual"}, "q1": {"domain": "finance", "type": "chart"}}
    assert read_query_fields([q], g, ["type", "domain"]) == {"q1": {"type": "chart", "domain": "finance"}, "q2": {"type": "textual"}}
    with pytest.raises(InputError, match=r"--group-by lang: no query in .*q.jsonl has a field 'lang'; fields found: type"):
        read_query_fields([q], None, ["lang"])
    with pytest.raises(InputError, match=r"^--group-by lang: no queries file or --groups file was given to read the field 'lang'"
                                         r" from; the queries have no fields"):  # not "in no query file"
        read_query_fields([], None, ["lang"])
    bad = tmp_path / "bad.tsv"
    for text, msg in (("q1\ttype\n", r"\(3 tab-separated columns\), got 2"), ("q1\ttype\ta\nq1\ttype\tb\n", "given twice \\(first on line 1\\)"),
                      ("q1\t\tx\n", "empty query id, field or value"), ("\n", "no query fields")):
        bad.write_text(text, encoding="utf-8")
        with pytest.raises(InputError, match=msg):
            load_query_groups(bad)


# ------------------------------------------------------------------------------------------ the comparison


IDS = ("q1", "q2", "q3", "q4", "q5", "q6", "q7", "q8")
# group A = q1..q5 (each +1: d = 1), group B = q6, q7 (d = -1 and 0), q8 has no type (d = 0)
BASE = np.array([0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.5, 0.25])
VAR = np.array([1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.5, 0.25])
TYPES = {"q1": "A", "q2": "A", "q3": "A", "q4": "A", "q5": "A", "q6": "B", "q7": "B"}


def _metrics(values: np.ndarray) -> MetricsResult:
    return MetricsResult(IDS, {"ndcg@3": values}, {})


def test_compare_groups_hand_computed():
    assert group_order(IDS, TYPES) == ["A", "B", MISSING_GROUP]
    out = compare_groups({"lexical": {ORIGINAL: _metrics(BASE), "kw": _metrics(VAR)}}, {"type": TYPES}, "ndcg@3", n_bootstrap=500)
    assert [(g.backend, g.field, g.group, g.comparison.variant) for g in out] == [
        ("lexical", "type", "A", "kw"), ("lexical", "type", "B", "kw"), ("lexical", "type", MISSING_GROUP, "kw")]
    a, b, m = (g.comparison for g in out)
    # A: 5 queries, every difference +1: exact test, 2 of the 2^5 sign vectors reach |sum| 5 -> p = 2/32
    assert (a.n_queries, a.original, a.rewritten, a.delta, a.ci95, (a.wins, a.ties, a.losses)) == (5, 0.0, 1.0, 1.0, (1.0, 1.0), (5, 0, 0))
    assert a.exact and a.p_value == 2 / 32 and a.p_min == 2 / 32
    # B: differences -1 and 0: every sign vector reaches |sum| 1 -> p = 1; means 0.75 -> 0.25
    assert (b.n_queries, b.original, b.rewritten, b.delta, (b.wins, b.ties, b.losses), b.p_value) == (2, 0.75, 0.25, -0.5, (0, 1, 1), 1.0)
    assert (m.n_queries, m.delta, m.p_value) == (1, 0.0, 1.0)  # the query without a type: its own group
    # Holm over the 3 groups x 1 variant: sorted 1/16, 1, 1 -> 3/16, max(3/16, 2 x 1) = 1, 1
    assert [c.p_value_holm for c in (a, b, m)] == [3 / 16, 1.0, 1.0]
    assert a.holm_family == ("type=A/kw:ndcg@3", "type=B/kw:ndcg@3", f"type={MISSING_GROUP}/kw:ndcg@3")


def _results(root=None) -> Results:
    runs = [RunResult("lexical", ORIGINAL, None, _metrics(BASE)), RunResult("lexical", "kw", None, _metrics(VAR))]
    comps = vdr.stats.compare_variants({"lexical": {r.variant: r.metrics for r in runs}}, ["ndcg@3"], n_bootstrap=500)
    variants = {ORIGINAL: QuerySet({q: Query(f"text {q}") for q in IDS}), "kw": QuerySet({q: Query(f"kw {q}") for q in IDS}, name="kw")}
    return Results(config={"table_metrics": ["ndcg@3"], "compared_metrics": ["ndcg@3"], "n_bootstrap": 500, "group_by": ["type"]},
                   versions={}, runs=runs, comparisons=comps, variants=variants, root=root,
                   query_fields={q: {"type": t, "lang": "en"} for q, t in TYPES.items()})


def test_group_table_rows_pandas_and_round_trip(tmp_path):
    res = _results()
    rows = res.group_rows("type")
    assert [(r["group"], r["n_queries"], r["baseline_mean"], r["mean"], r["delta"], r["p_value"], r["p_value_holm"], r["outcome"])
            for r in rows] == [("A", 5, 0.0, 1.0, 1.0, 2 / 32, 3 / 16, "ns"), ("B", 2, 0.75, 0.25, -0.5, 1.0, 1.0, "ns"),
                               (MISSING_GROUP, 1, 0.25, 0.25, 0.0, 1.0, 1.0, "ns")]
    assert res.group_rows("type", alpha=0.2)[0]["outcome"] == "gain"  # 3/16 <= 0.2
    text = res.group_table("type", alpha=0.2).to_text().splitlines()
    assert text[0].split() == ["backend", "type", "n", "variant", "original", "ndcg@3", "variant", "ndcg@3", "d", "ndcg@3", "95%", "CI",
                               "p", "(perm)", "p", "(Holm)", "W/T/L"]
    assert text[1].split() == ["lexical", "A", "5", "kw", "0.0000", "1.0000", "+1.0000", "\u25b2", "[+1.000,", "+1.000]", "0.0625",
                               "0.1875", "5/0/0"]
    assert "1 queries have no 'type': group (missing)." in text
    matrix = res.group_matrix("type", alpha=0.2)
    assert matrix.columns == ("type", "n", "lexical: kw") and matrix.rows[0] == ("A", "5", "+1.000") and matrix.marks[0][2] == "gain"
    html = res.group_table("type", alpha=0.2).to_html()
    assert '<td class="gain">+1.0000 \u25b2</td>' in html
    df = res.to_pandas()
    assert list(df.columns) == ["backend", "variant", "query_id", "metric", "value", "type"]
    assert df.loc[df.query_id == "q8", "type"].unique().tolist() == [MISSING_GROUP]
    assert df.groupby(["variant", "type"])["value"].mean()["kw"].to_dict() == {"A": 1.0, "B": 0.25, MISSING_GROUP: 0.25}
    g = res.to_pandas("groups")
    assert g[["group", "n_queries", "delta"]].values.tolist() == [["A", 5, 1.0], ["B", 2, -0.5], [MISSING_GROUP, 1, 0.0]]
    with pytest.raises(InputError, match="choose 'per_query', 'groups', 'languages', 'pairs', 'served' or 'samples'"):
        res.to_pandas("nope")
    # results.json holds the fields and the comparisons; they read back equal; another field is computed on demand
    out = tmp_path / "r"
    res.save(out)
    doc = json.loads((out / "results.json").read_text())
    assert doc["query_fields"]["q1"] == {"type": "A", "lang": "en"} and len(doc["groups"]) == 3
    assert doc["groups"][0]["group"] == "A" and doc["groups"][0]["p_value_holm"] == 3 / 16 and doc["groups"][0]["field"] == "type"
    back = Results.load(out)
    assert [g.to_dict() for g in back.group_comparisons] == [g.to_dict() for g in res.grouped("type")]
    assert back.group_table("type").to_text() == res.group_table("type").to_text()
    back.save(tmp_path / "again")  # loaded results rewrite results.json byte for byte, groups included
    assert (tmp_path / "again" / "results.json").read_bytes() == (out / "results.json").read_bytes()
    assert [g.group for g in back.grouped("lang")] == ["en", MISSING_GROUP]
    with pytest.raises(InputError, match="no evaluated query has a field 'format'; the queries' fields are: lang, type"):
        back.grouped("format")


# ------------------------------------------------------------------------------------------ vdr evaluate --group-by


TEXTS = ["Annual report: company revenue grew 12 percent, driven by cloud services.",
         "Pets and animal care: dogs, cats and veterinary clinics.",
         "Renewable energy: wind and solar capacity cut carbon emissions.",
         "Revenue of the cloud division and its growth outlook."]
QUERIES = {"q1": "company revenue growth", "q2": "pets and animal care", "q3": "wind solar emissions", "q4": "cloud division outlook"}
KEYWORDS = {"q1": "revenue cloud", "q2": "dogs cats", "q3": "carbon factory", "q4": "division"}
QRELS = {"q1": {"doc.pdf#1": 1}, "q2": {"doc.pdf#2": 2}, "q3": {"doc.pdf#3": 1}, "q4": {"doc.pdf#4": 1}}


def test_evaluate_group_by_cli(tmp_path, capsys):
    from tiny_models import make_text_inputs

    d = make_text_inputs(tmp_path, [(28, 28)] * 4, TEXTS, QUERIES, KEYWORDS, QRELS)
    lines = [json.loads(x) for x in d["queries"].read_text().splitlines()]
    d["queries"].write_text("".join(json.dumps(dict(x, kind="topic" if x["_id"] < "q3" else "lookup")) + "\n" for x in lines))
    groups = tmp_path / "groups.tsv"
    groups.write_text("q1\tdomain\tfinance\nq4\tdomain\tfinance\nq2\tdomain\tnature\nq3\tdomain\tnature\n")
    out = tmp_path / "results"
    rc, stdout, err = cli(capsys, "evaluate", d["corpus"], "--queries", d["queries"], "--qrels", d["qrels"], "--rewrites", f"kw={d['kw']}",
                          "--backend", "lexical", "--group-by", "kind", "--group-by", "domain", "--groups", groups, "--alpha", "0.1",
                          "--permutations", "200", "--bootstrap", "200", "-q", "--out", out)
    assert rc == 0, err
    res = Results.load(out)
    assert res.config["group_by"] == ["kind", "domain"] and res.config["alpha"] == 0.1 and res.alpha == 0.1
    assert res.config["groups"] == str(groups.resolve())
    assert {g.field for g in res.group_comparisons} == {"kind", "domain"}
    for f, expect in (("kind", {"topic": ["q1", "q2"], "lookup": ["q3", "q4"]}), ("domain", {"finance": ["q1", "q4"], "nature": ["q2", "q3"]})):
        assert f"by {f}:" in stdout
        for g in res.grouped(f):
            ids = expect[g.group]
            idx = [res.query_ids.index(q) for q in ids]
            base, kw = res.values("lexical", ORIGINAL, "ndcg@3")[idx], res.values("lexical", "kw", "ndcg@3")[idx]
            assert g.comparison.n_queries == len(ids) and g.comparison.original == pytest.approx(base.mean())
            assert g.comparison.delta == pytest.approx((kw - base).mean())
    assert "(p " in stdout and "\u03b1 0.1)" in stdout  # the verdict under the table, at the given alpha
    rc, _, err = cli(capsys, "evaluate", d["corpus"], "--queries", d["queries"], "--qrels", d["qrels"], "--backend", "lexical",
                     "--group-by", "language", "-q", "--out", tmp_path / "r2")
    assert rc == 2 and "--group-by language: no query in " in err and "has a field 'language'" in err and "fields found: kind" in err
    assert not (tmp_path / "r2" / "results.json").exists()
    # the report groups by another field on demand, from the recorded queries file
    paths = vdr.report(out, tmp_path / "rep.html", group_by=["kind"])
    html = paths.html.read_text(encoding="utf-8")
    assert '<h2 id="groups">By query group</h2>' in html and "<h3>by kind</h3>" in html and "by domain" not in html
