"""The audit of served systems against exact MaxSim (issue 36, item 3; :mod:`vdr.experiment.audit`):
overlap@k and RBO_ext checked against hand computations, the change of the primary metric and the
rewrites' gains on a tiny hand-built evaluation (every number worked out below), the gain verdict
rules, one Holm family over every test, storage and time ratios, a served system whose exact
backend did not run, the round trip through results.json, ``to_pandas("served")``, the report's
section and, end to end, ``vdr.evaluate`` with a registered served backend (BM25 with swapped pages).
No model.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

import vdr
from vdr.errors import InputError
from vdr.experiment.audit import GAIN_VERDICTS, gain_verdict, overlap_at, rbo, served_audit, served_systems
from vdr.metrics import evaluate_run
from vdr.results import Results, RunResult
from vdr.stats import compare_arrays, holm
from vdr.types import ORIGINAL, Qrels, QuerySet, Run

L = 1 / math.log2(3)  # nDCG@3 of a query whose one relevant page is at rank 2 (rank 1: 1.0)


# ------------------------------------------------------------------------------------------------ overlap, RBO


def test_overlap_denominator_is_k():
    assert overlap_at(list("abc"), list("cba"), 3) == 1.0
    assert overlap_at(list("abcd"), list("bxay"), 2) == 0.5  # {a, b} vs {b, x}
    assert overlap_at(list("abcde"), list("abcde"), 10) == 0.5  # 5 pages retrieved: 5 / 10, not 5 / 5
    assert overlap_at([], [], 3) == 0.0
    with pytest.raises(InputError, match="k must be"):
        overlap_at(["a"], ["a"], 0)


def test_rbo_hand_computed():
    assert rbo(list("abcdefgh"), list("abcdefgh")) == pytest.approx(1.0)
    assert rbo(list("abc"), list("xyz")) == 0.0
    assert rbo([], []) == 1.0 and rbo(["a"], []) == 0.0
    # abcde vs bcdae, p = 0.9 (eq. 30, lists of equal length 5):
    #   X_1 = 0 ({a}∩{b}), X_2 = 1 (b), X_3 = 2 (b, c), X_4 = 4, X_5 = 5
    #   (1-p)/p * (0*0.9 + 1/2*0.81 + 2/3*0.729 + 4/4*0.6561 + 5/5*0.59049) + 5/5*0.9^5
    #   = (0.1/0.9) * (0.405 + 0.486 + 0.6561 + 0.59049) + 0.59049 = 0.23751 + 0.59049 = 0.828
    assert rbo(list("abcde"), list("bcdae"), 0.9) == pytest.approx(0.828, abs=1e-12)
    # the first two swapped: X_1 = 0, X_d = d after: 1 - (1-p)/p * p = p
    assert rbo(list("bacdefg"), list("abcdefg"), 0.9) == pytest.approx(0.9)
    # uneven lists (eq. 32), S = ab (s = 2), L = acde (l = 4), p = 0.5:
    #   X_1 = 1, X_2 = 1 ({a,b}∩{a,c}), X_3 = 1, X_4 = 1 (S all of {a,b} against L's prefixes): X_s = 1, X_l = 1
    #   sum_{d=1..4} X_d/d p^d = 0.5 + 0.125 + 0.125/3 + 0.0625/4 = 0.682291666...
    #   sum_{d=3..4} X_s (d-s)/(s d) p^d = 1*1/6*0.125 + 1*2/8*0.0625 = 0.0208333 + 0.015625 = 0.0364583...
    #   (1-p)/p = 1: 0.71875 + ((X_l - X_s)/l + X_s/s) p^4 = 0.71875 + 0.5 * 0.0625 = 0.75
    assert rbo(list("ab"), list("acde"), 0.5) == pytest.approx(0.75)
    assert rbo(list("acde"), list("ab"), 0.5) == pytest.approx(0.75)  # symmetric
    # S's items all found in L: extrapolated as full agreement
    assert rbo(list("ab"), list("abcd"), 0.9) == pytest.approx(1.0)
    assert rbo(list("abcxyz"), list("abcdef"), 0.9, depth=3) == pytest.approx(1.0)  # cut to the common depth
    with pytest.raises(InputError, match="persistence"):
        rbo(["a"], ["a"], 1.0)
    with pytest.raises(InputError, match="twice"):
        rbo(["a", "a"], ["a"])


def test_gain_verdict_rules():
    assert set(GAIN_VERDICTS) == {"survives", "shrinks", "grows", "lost", "reversed"}
    assert gain_verdict(0.07, 0.05, 0.45) == "survives"  # same sign, not significant
    assert gain_verdict(-0.03, -0.01, 0.9) == "survives"
    assert gain_verdict(0.0, 0.0, None) == "survives"
    assert gain_verdict(0.07, 0.01, 0.01) == "shrinks"
    assert gain_verdict(0.07, 0.12, 0.01) == "grows"
    assert gain_verdict(0.0, -0.05, 0.01) == "grows"  # no exact gain, a significant served change
    assert gain_verdict(0.07, -0.02, 0.01) == "reversed"
    assert gain_verdict(0.07, -0.02, 0.30) == "lost"  # the direction is not kept, the difference not significant
    assert gain_verdict(0.07, 0.0, 0.20) == "lost"
    assert gain_verdict(0.07, 0.01, 0.05) == "shrinks"  # p_holm == alpha is significant (p <= alpha)
    assert gain_verdict(0.07, 0.01, 0.05, alpha=0.01) == "survives"
    assert gain_verdict(0.07, 0.01, float("nan")) == "survives"


# ------------------------------------------------------------------------------------------------ a hand-built evaluation

QRELS = Qrels({"q1": {"a": 1}, "q2": {"b": 1}, "q3": {"c": 1}, "q4": {"d": 1}})


def _run(rankings: dict[str, str]) -> Run:
    """``{"q1": "abcde"}`` -> q1 ranks a, b, c, d, e (scores 5..1)."""
    return Run({q: {p: float(len(r) - i) for i, p in enumerate(r)} for q, r in rankings.items()})


EXACT = {  # nDCG@3 (one relevant page): rank 1 -> 1, rank 2 -> L
    ORIGINAL: {"q1": "abcde", "q2": "bacde", "q3": "cabde", "q4": "adbce"},  # 1, 1, 1, L
    "keywords": {"q1": "abcde", "q2": "bacde", "q3": "cabde", "q4": "dabce"},  # 1, 1, 1, 1: gains 0, 0, 0, 1-L
}
BINARY = {  # the first two pages swapped for q1, q2 and q4 of the originals
    ORIGINAL: {"q1": "bacde", "q2": "abcde", "q3": "cabde", "q4": "dabce"},  # L, L, 1, 1: deltas L-1, L-1, 0, 1-L
    "keywords": {"q1": "abcde", "q2": "bacde", "q3": "cabde", "q4": "dabce"},  # 1, 1, 1, 1: gains 1-L, 1-L, 0, 0
}
STATS = {"n_permutations": 1000, "n_bootstrap": 1000, "seed": 5}


def _config(**extra) -> dict:
    served = {"exact": "multimodal", "system": "binary", "kind": "compression", "parameters": {"bits": 1}, "source": "test"}
    return {"table_metrics": ["ndcg@3", "mrr@3"], "compared_metrics": ["ndcg@3"], "relevance_level": 1, "alpha": 0.05,
            "depth": 5, **STATS, "variants": [ORIGINAL, "keywords"],
            "backend_config": {"multimodal": {"backend": "multimodal", "bytes_per_page": 65536.0},
                               "multimodal-binary": {"backend": "multimodal-binary", "served": served, "bytes_per_page": 2048.0},
                               "multimodal-pool3": {"backend": "multimodal-pool3", "bytes_per_page": 21845.0,
                                                    "served": dict(served, system="pool3", parameters={"factor": 3})},
                               "multimodal-qdrant": {"backend": "multimodal-qdrant", "bytes_per_page": 70000.0,
                                                     "served": dict(served, exact="multimodal-fp16", system="qdrant", kind="engine")}},
            **extra}


def _searches(seconds: float) -> dict:
    return {"searches": {v: {"num_queries": 4, "score_seconds": seconds} for v in (ORIGINAL, "keywords")}}


def _results(root: Path | None = None) -> Results:
    runs = []
    for backend, rankings in (("multimodal", EXACT), ("multimodal-binary", BINARY), ("multimodal-pool3", EXACT)):
        for v, r in rankings.items():
            run = _run(r)
            runs.append(RunResult(backend, v, f"runs/{backend}.{v}.trec", evaluate_run(QRELS, run, ["ndcg@3", "mrr@3"]), ranking=run))
    variants = {v: QuerySet.from_texts({q: f"{v} {q}" for q in QRELS}, name=v) for v in (ORIGINAL, "keywords")}
    reports = {"multimodal": _searches(0.4), "multimodal-binary": _searches(0.02),
               "multimodal-pool3": {"searches": {ORIGINAL: {"num_queries": 4}}}}
    return Results(config=_config(), versions={"vdr": "test"}, runs=runs, comparisons=[], variants=variants,
                   skipped={"multimodal-fp16": "no --model given"}, backend_reports=reports, qrels=QRELS, root=root)


@pytest.fixture(scope="module")
def audited() -> Results:
    res = _results()
    res.served_audit = served_audit(res)
    return res


def test_served_systems_read_from_the_backend_config():
    assert list(served_systems(_config())) == ["multimodal-binary", "multimodal-pool3", "multimodal-qdrant"]
    assert served_systems({"backend_config": {"lexical": {"backend": "lexical"}}}) == {}
    assert served_audit(Results(config={"table_metrics": ["ndcg@3"]}, versions={}, runs=_results().runs[:1], comparisons=[])) == {}


def test_change_of_the_primary_metric_hand_computed(audited):
    audit = audited.served_audit
    assert audit["metric"] == "ndcg@3" and audit["overlap_k"] == [3, 10] and audit["rbo_p"] == 0.9 and audit["alpha"] == 0.05
    b = audit["systems"][0]
    assert (b["system"], b["exact"], b["kind"], b["parameters"]) == ("multimodal-binary", "multimodal", "compression", {"bits": 1})
    # exact 1, 1, 1, L (mean (3 + L)/4); binary L, L, 1, 1 (mean (2 + 2L)/4); deltas L-1, L-1, 0, 1-L
    assert b["exact_value"] == pytest.approx((3 + L) / 4) and b["served_value"] == pytest.approx((2 + 2 * L) / 4)
    assert b["delta"] == pytest.approx((L - 1) / 4)
    assert (b["wins"], b["ties"], b["losses"], b["n_queries"]) == (1, 1, 2, 4)
    # exact test, 2^4 sign vectors: |±c ±c ±c| (c = 1-L; q3 is 0) is never below |-c| = the observed sum: p = 1
    assert b["p_value"] == 1.0
    ref = compare_arrays([1, 1, 1, L], [L, L, 1, 1], "ndcg@3", **STATS)
    assert b["ci95"] == list(ref.ci95) and ref.ci95[0] <= b["delta"] <= ref.ci95[1]
    pq = b["per_query"]
    assert [pq[q]["delta"] for q in ("q1", "q2", "q3", "q4")] == pytest.approx([L - 1, L - 1, 0, 1 - L])
    assert list(pq["q1"]) == ["delta", "overlap@3", "overlap@10", "rbo"]


def test_overlap_and_rbo_per_query(audited):
    b = audited.served_audit["systems"][0]
    pq = b["per_query"]
    # the same three pages in the top 3 for every query; 5 pages retrieved: overlap@10 = 5/10
    assert {q: v["overlap@3"] for q, v in pq.items()} == {q: 1.0 for q in QRELS}
    assert {q: v["overlap@10"] for q, v in pq.items()} == {q: 0.5 for q in QRELS}
    # q1, q2, q4: the first two swapped -> RBO_ext = p = 0.9; q3 identical -> 1
    assert [pq[q]["rbo"] for q in ("q1", "q2", "q3", "q4")] == pytest.approx([0.9, 0.9, 1.0, 0.9])
    assert b["overlap@3"] == 1.0 and b["overlap@10"] == 0.5 and b["rbo"] == pytest.approx(0.925)


def test_gains_hand_computed_and_verdict(audited):
    b = audited.served_audit["systems"][0]
    (g,) = b["gains"]
    # exact gains 0, 0, 0, 1-L; binary gains 1-L, 1-L, 0, 0; d = 1-L, 1-L, 0, -(1-L)
    assert g["variant"] == "keywords"
    assert g["gain_exact"] == pytest.approx((1 - L) / 4) and g["gain_served"] == pytest.approx((1 - L) / 2)
    assert g["difference"] == pytest.approx((1 - L) / 4)
    assert (g["wins"], g["ties"], g["losses"]) == (2, 1, 1) and g["p_value"] == 1.0
    assert g["verdict"] == "survives"  # same sign, p_holm 1
    ref = compare_arrays([0, 0, 0, 1 - L], [1 - L, 1 - L, 0, 0], **STATS)
    assert g["ci95"] == list(ref.ci95)
    lo, hi = b["ci95"]
    assert b["outcome"] == "ns"
    assert b["verdict"] == (f"multimodal-binary: -0.092 nDCG@3 vs exact multimodal [95% CI {lo:+.3f}, {hi:+.3f}], not significant"
                            " after Holm (p 1.00, \u03b1 0.05); rewrite keywords: gain +0.092 -> +0.185 (survives: difference +0.092 not"
                            " significant, p 1.00)")


def test_identical_system_and_storage_and_time(audited):
    systems = audited.served_audit["systems"]
    b, pool = systems[0], systems[1]
    assert b["bytes_per_page"] == 2048.0 and b["exact_bytes_per_page"] == 65536.0 and b["storage_ratio"] == 1 / 32
    # exact: (0.4 + 0.4) s over 8 queries = 100 ms; binary: 0.04 s / 8 = 5 ms
    assert b["exact_ms_per_query"] == pytest.approx(100.0) and b["ms_per_query"] == pytest.approx(5.0)
    assert b["time_ratio"] == pytest.approx(0.05)
    # pool3 ranks exactly as exact: no change, full agreement; no score_seconds recorded: no time
    assert pool["delta"] == 0.0 and pool["p_value"] == 1.0 and (pool["wins"], pool["ties"], pool["losses"]) == (0, 4, 0)
    assert pool["rbo"] == 1.0 and pool["overlap@3"] == 1.0 and pool["gains"][0]["verdict"] == "survives"
    assert pool["storage_ratio"] == pytest.approx(21845 / 65536)
    assert pool["ms_per_query"] is None and pool["time_ratio"] is None


def test_missing_exact_backend_is_listed_with_the_reason(audited):
    q = audited.served_audit["systems"][2]
    assert q == {"system": "multimodal-qdrant", "exact": "multimodal-fp16", "kind": "engine",
                 "skipped": "its exact backend multimodal-fp16 did not run: no --model given"}
    assert "multimodal-qdrant: not audited (its exact backend multimodal-fp16 did not run: no --model given)" in audited.served_verdicts()


def test_one_holm_family_over_every_test(audited):
    audit = audited.served_audit
    # binary: change + keywords' gain; pool3: change + keywords' gain; qdrant skipped: 4 tests
    assert audit["test"]["holm_family"] == ["multimodal-binary:ndcg@3", "multimodal-binary:keywords:gain:ndcg@3",
                                            "multimodal-pool3:ndcg@3", "multimodal-pool3:keywords:gain:ndcg@3"]
    tests = [e for s in audit["systems"] if "skipped" not in s for e in (s, *s["gains"])]
    assert [t["p_value_holm"] for t in tests] == holm([t["p_value"] for t in tests]).tolist()
    assert audit["test"]["seed"] == 5 and audit["test"]["n_permutations"] == 1000


def test_significant_loss_and_holm_decides():
    """Nine queries that all lose a rank under the served system: exact p = 2 / 2^9 (512 <= 1000
    sign vectors: enumerated); a second served system identical to exact adds one test of p = 1 to
    the family (no rewrite variant), so Holm doubles the first p."""
    qrels = Qrels({f"q{i}": {"a": 1} for i in range(9)})
    exact, served = _run({q: "abc" for q in qrels}), _run({q: "bac" for q in qrels})
    runs = [RunResult(b, ORIGINAL, None, evaluate_run(qrels, r, ["ndcg@3"]), ranking=r)
            for b, r in (("multimodal", exact), ("multimodal-binary", served), ("multimodal-pool3", exact))]
    cfg = _config(table_metrics=["ndcg@3"], variants=[ORIGINAL])
    del cfg["backend_config"]["multimodal-qdrant"]
    res = Results(config=cfg, versions={}, runs=runs, comparisons=[], variants={ORIGINAL: QuerySet.from_texts(
        {q: q for q in qrels}, name=ORIGINAL)})
    audit = served_audit(res)
    b = audit["systems"][0]
    assert b["p_value"] == pytest.approx(2 / 2 ** 9) and b["p_value_holm"] == pytest.approx(2 * 2 / 2 ** 9)
    assert audit["systems"][1]["p_value_holm"] == 1.0 and len(audit["test"]["holm_family"]) == 2
    assert b["delta"] == pytest.approx(L - 1) and b["ci95"] == pytest.approx([L - 1, L - 1]) and b["outcome"] == "loss"
    assert b["gains"] == [] and b["verdict"] == ("multimodal-binary: -0.369 nDCG@3 vs exact multimodal [95% CI -0.369,"
                                                        " -0.369], significant loss after Holm (p 0.008, \u03b1 0.05)")


# ------------------------------------------------------------------------------------------------ results.json, pandas, report


def test_round_trip_pandas_and_report(audited, tmp_path):
    out = tmp_path / "results"
    audited.save(out)
    doc = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert doc["served_audit"] == audited.served_audit and doc["schema_version"] == 2
    back = Results.load(out)
    assert back.served_audit == audited.served_audit
    before = (out / "results.json").read_bytes()
    back.save(out)
    assert (out / "results.json").read_bytes() == before
    assert "served_audit" not in _results().to_dict()  # absent when not computed

    df = back.to_pandas("served")
    assert list(df["system"]) == ["multimodal-binary", "multimodal-pool3", "multimodal-qdrant"]
    row = df.iloc[0]
    assert row["storage_ratio"] == 1 / 32 and row["time_ratio"] == pytest.approx(0.05) and row["rbo"] == pytest.approx(0.925)
    assert row["gain_verdict:keywords"] == "survives" and row["gain_exact:keywords"] == pytest.approx((1 - L) / 4)
    assert df.iloc[2]["skipped"].startswith("its exact backend multimodal-fp16 did not run")

    text = back.served_table().to_text()
    binary = next(line for line in text.splitlines() if line.startswith("multimodal-binary "))
    assert binary.split() == ["multimodal-binary", "multimodal", "-0.0923", *binary.split()[3:5], "1.0000", "1/1/2", "1.0000", "0.5000",
                              "0.9250", "0.03125x", "0.05x"]
    assert "multimodal-qdrant: not audited" in text
    gains = back.served_gains_table()
    assert [r[:2] + r[-1:] for r in gains.rows] == [("multimodal-binary", "keywords", "survives"),
                                                      ("multimodal-pool3", "keywords", "survives")]

    paths = vdr.report(out)
    html, md = paths.html.read_text(encoding="utf-8"), paths.markdown.read_text(encoding="utf-8")
    assert '<h2 id="served">Served vs exact</h2>' in html and 'href="#served"' in html
    assert html.index('id="summary"') < html.index('id="served"')
    assert "## Served vs exact" in md and "### Do the rewrites' gains survive?" in md and "survives" in md
    assert "rewrite keywords: gain +0.092 -&gt; +0.185" in html


def test_no_served_system_no_section(tmp_path):
    res = _results()
    res.config["backend_config"] = {"multimodal": {"backend": "multimodal"}}
    assert served_audit(res) == {}
    res.save(tmp_path / "r")
    assert "served_audit" not in json.loads((tmp_path / "r" / "results.json").read_text(encoding="utf-8"))
    assert Results.load(tmp_path / "r").served_audit == {} and Results.load(tmp_path / "r").to_pandas("served").empty
    from vdr.report.render import _served_section

    assert _served_section(Results.load(tmp_path / "r")) == ("", [])  # no section, no table-of-contents entry


# ------------------------------------------------------------------------------------------------ end to end


class _SwappedBM25:
    """A served system for the test: BM25 (the ``lexical`` backend built before it) with the first
    two pages of every other query swapped; 8 bytes per page; its ranking time recorded."""

    def __init__(self, ctx) -> None:
        self.name, self.exact = ctx.name, ctx.built["lexical"]
        self.config = {"backend": "swapped", "bytes_per_page": 8.0,
                       "served": {"exact": "lexical", "system": "swapped", "kind": "compression", "parameters": {}, "source": "test"}}
        from vdr.retrieve.base import new_report

        self.report = new_report()

    def index(self, corpus) -> None:
        self.exact.index(corpus)

    def search(self, queries, depth):
        run = self.exact.search(queries, depth)
        out = {}
        for i, q in enumerate(sorted(run)):
            ranked = run.ranked(q)
            if i % 2 == 0 and len(ranked) > 1:
                (a, sa), (b, sb) = ranked[:2]
                ranked = [(a, sb), (b, sa), *ranked[2:]]
            out[q] = dict(ranked)
        self.report["searches"][queries.name] = {"num_queries": len(queries), "score_seconds": 0.001}
        return Run(out)


def test_evaluate_end_to_end_with_a_registered_served_backend(tmp_path, monkeypatch):
    from rewards_fixtures import make_passages, write_corpus
    from vdr.retrieve import base

    monkeypatch.setitem(base._REGISTERED, "swapped", _SwappedBM25)
    texts, queries, qrels = make_passages(n_per_topic=4)
    corpus = write_corpus(tmp_path / "corpus", texts, queries, qrels)
    kw = tmp_path / "kw.jsonl"
    kw.write_text("".join(json.dumps({"_id": q, "text": t.split()[-1]}) + "\n" for q, t in queries.items()), encoding="utf-8")
    out = tmp_path / "r"
    res = vdr.evaluate(corpus, out=out, backends="lexical,swapped", rewrites={"kw": kw}, progress=False, cache_dir=False,
                       n_permutations=200, n_bootstrap=200)
    (s,) = res.served_audit["systems"]
    assert s["system"] == "swapped" and s["exact"] == "lexical" and s["bytes_per_page"] == 8.0
    assert s["exact_bytes_per_page"] is None and s["storage_ratio"] is None and s["time_ratio"] is None  # lexical records neither
    top3 = {q: (res.ranked("lexical", ORIGINAL, q, 3), res.ranked("swapped", ORIGINAL, q, 3)) for q in qrels}
    assert s["overlap@3"] == pytest.approx(sum(len({d for d, _ in a} & {d for d, _ in b}) / 3 for a, b in top3.values()) / len(qrels))
    assert s["rbo"] < 1.0 and [g["variant"] for g in s["gains"]] == ["kw"]
    assert s["n_queries"] == len(qrels) and set(s["per_query"]) == set(qrels)
    assert json.loads((out / "results.json").read_text(encoding="utf-8"))["served_audit"] == res.served_audit
    assert "audit" in json.loads((out / "timing.json").read_text(encoding="utf-8"))
    assert Results.load(out).served_verdicts() == res.served_verdicts() == [s["verdict"]]


def test_cli_prints_the_served_tables(audited, capsys):
    from vdr.cli.evaluate import _echo_served

    _echo_served(audited, wide=True)
    printed = capsys.readouterr().out
    assert "served vs exact (original queries):" in printed and "do the rewrites' gains survive?" in printed
    assert "multimodal-binary: -0.092 nDCG@3 vs exact multimodal" in printed and "survives" in printed
    _echo_served(_results(), wide=True)  # no audit: nothing printed
    assert capsys.readouterr().out == ""


def test_a_variant_the_served_system_did_not_run_is_listed():
    import pandas as pd

    res = _results()
    res.runs = [r for r in res.runs if (r.backend, r.variant) != ("multimodal-binary", "keywords")]
    audit = served_audit(res)
    b = audit["systems"][0]
    assert b["gains"] == [{"variant": "keywords", "skipped": "multimodal-binary has no run of variant keywords"}]
    assert b["verdict"].endswith("; rewrite keywords: not compared (multimodal-binary has no run of variant keywords)")
    assert audit["test"]["holm_family"] == ["multimodal-binary:ndcg@3", "multimodal-pool3:ndcg@3", "multimodal-pool3:keywords:gain:ndcg@3"]
    res.served_audit = audit
    assert res.served_gains_table().rows[0] == ("multimodal-binary", "keywords", None, None, None, None, None,
                                                "not compared: multimodal-binary has no run of variant keywords")
    assert pd.isna(res.to_pandas("served").iloc[0]["gain_verdict:keywords"])
