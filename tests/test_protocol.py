"""The conversational protocol (issue 15.5): ``--protocol convsearch`` shows MRR@3, NDCG@3, R@10,
R@100 and, labelled, ConvSearch-R1's paper-compatible ``rr_full`` (full-list reciprocal rank over
the queries present in the run); the measure is checked by hand and against pytrec_eval used the
way the released ConvSearch-R1 evaluation code uses it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from test_backends import data  # noqa: F401  (fixture: a 6-page corpus, queries, qrels)
from vdr.errors import InputError
from vdr.experiment.evaluation import evaluate
from vdr.metrics import evaluate_run
from vdr.metrics.registry import METRICS, describe_metrics, metric_label, parse_metric
from vdr.results import Results

QRELS = {
    "q1": {"d1": 1},
    "q2": {"d2": 1, "d3": 0},
    "q3": {"d4": 2},
    "q4": {"d5": 1},  # absent from the run
    "q5": {"d6": 0},  # no relevant passage: RR 0, counted by pytrec_eval too
}
RUN = {
    "q1": {"d9": 0.9, "d1": 0.8},  # rank 2: 1/2
    "q2": {"d3": 0.9, "d8": 0.8, "d7": 0.7, "d2": 0.6},  # rank 4: 1/4 (0 at @3)
    "q3": {"d4": 0.5},  # rank 1: 1
    "q5": {"d6": 0.5},  # 0
    "q6": {"d1": 0.4},  # not in the qrels: ignored by both
}


def test_rr_full_by_hand_and_against_mrr():
    res = evaluate_run(QRELS, RUN, ["rr_full", "mrr", "mrr@3"])
    assert res.aggregate["rr_full"] == pytest.approx((0.5 + 0.25 + 1 + 0) / 4)  # 0.4375: over the 4 queries in the run
    assert res.aggregate["mrr"] == pytest.approx((0.5 + 0.25 + 1 + 0 + 0) / 5)  # 0.35: q4 scores 0 (trec_eval -c)
    assert res.aggregate["mrr@3"] == pytest.approx((0.5 + 0 + 1 + 0 + 0) / 5)  # 0.3: what the paper's tables name MRR@3
    pq = res.per_query
    assert math.isnan(pq["q4"]["rr_full"]) and pq["q4"]["mrr"] == 0.0 and pq["q2"]["rr_full"] == 0.25
    assert evaluate_run(QRELS, RUN, ["rr_full@3"]).aggregate["rr_full@3"] == pytest.approx(1.5 / 4)
    text = res.table()
    assert "rr_full (paper-compatible: ConvSearch-R1 code)" in text and "averaged over the 4 of 5 queries present in the run" in text


def test_rr_full_equals_the_convsearch_r1_evaluation_code():
    pytrec_eval = pytest.importorskip("pytrec_eval")
    # as print_trec_res: qrels binarised at rel_threshold 1, recip_rank, np.average over evaluate(runs).values()
    binary = {q: {d: int(g >= 1) for d, g in docs.items()} for q, docs in QRELS.items()}
    rank_scores = {q: {d: 200 - i - 1 for i, d in enumerate(sorted(docs, key=lambda d: -docs[d]))} for q, docs in RUN.items()}
    got = pytrec_eval.RelevanceEvaluator(binary, {"recip_rank"}).evaluate(rank_scores)
    paper = float(np.average([v["recip_rank"] for v in got.values()]))
    assert paper == pytest.approx(evaluate_run(QRELS, RUN, ["rr_full"]).aggregate["rr_full"], abs=1e-12)


def test_registry_entry():
    f = METRICS["rr_full"]
    assert f.kind == "run_mean" and not f.needs_k and "BeastyZ/ConvSearch-R1" in f.reference
    assert str(parse_metric("RR_FULL")) == "rr_full" and str(parse_metric("rr_full@10")) == "rr_full@10"
    assert metric_label("rr_full") == "rr_full (paper-compatible: ConvSearch-R1 code)" and metric_label("mrr@3") == "mrr@3"
    assert "present in the run only" in describe_metrics()


def test_evaluate_with_the_convsearch_protocol(data, tmp_path):  # noqa: F811
    ext = tmp_path / "ext.trec"  # q1: relevant at rank 1; q2: at rank 2; q3, q4: absent
    ext.write_text("q1 Q0 doc.pdf#1 1 2.0 ext\nq1 Q0 doc.pdf#3 2 1.0 ext\nq2 Q0 doc.pdf#4 1 3.0 ext\nq2 Q0 doc.pdf#2 2 2.5 ext\n")
    with pytest.warns(Warning):
        res = evaluate(data["corpus"], queries=data["queries"], qrels=data["qrels"], rewrites={"kw": data["kw"]}, out=tmp_path / "r",
                       backends="lexical", runs={"ext": ext}, n_permutations=200, n_bootstrap=200, progress=False,
                       protocol="convsearch")
    assert res.table_metrics == ["mrr@3", "ndcg@3", "recall@10", "recall@100", "rr_full"] and res.primary == "mrr@3"
    assert res.config["k"] == [3, 5, 10, 100] and res.config["protocol"]["name"] == "convsearch"
    assert "rr_full" not in res.config["compared_metrics"] and res.config["compared_metrics"][0] == "mrr@3"
    agg = res.aggregate("ext", "original")
    assert agg["rr_full"] == pytest.approx((1 + 0.5) / 2) and agg["mrr@3"] == pytest.approx((1 + 0.5) / 4)
    table = res.table()
    head = table.splitlines()[0]
    assert head.index("mrr@3") < head.index("ndcg@3") < head.index("recall@10") < head.index("recall@100")
    assert head.index("recall@100") < head.index("rr_full") and "paper-compatible" not in head  # short header
    assert "rr_full (paper-compatible: ConvSearch-R1 code): averaged over" in table  # the long name in the notes
    assert "protocol convsearch" in table and "present in each run only" in table
    back = Results.load(tmp_path / "r")  # NaN per-query values survive the strict-JSON round trip
    assert back.aggregate("ext", "original")["rr_full"] == pytest.approx(0.75) and back.table_metrics == res.table_metrics
    from vdr.report.render import report

    paths = report(tmp_path / "r")  # vdr report shows the protocol's table, labelled column included
    html_text = paths.html.read_text(encoding="utf-8")
    assert '<th title="rr_full (paper-compatible: ConvSearch-R1 code)">rr_full</th>' in html_text  # short header, long title
    assert "rr_full (paper-compatible: ConvSearch-R1 code)" in paths.markdown.read_text(encoding="utf-8")
    with pytest.raises(InputError, match="unknown protocol 'trec'; choose from convsearch"):
        evaluate(data["corpus"], queries=data["queries"], qrels=data["qrels"], out=tmp_path / "x", backends="lexical",
                 progress=False, protocol="trec")
    with pytest.raises(InputError, match="depth 50 is smaller than the largest cutoff 100"):
        evaluate(data["corpus"], queries=data["queries"], qrels=data["qrels"], out=tmp_path / "y", backends="lexical",
                 progress=False, protocol="convsearch", depth=50)


def test_cli_protocol_option(data, tmp_path, capsys):  # noqa: F811
    from vdr.cli import main

    rc = main(["evaluate", str(data["corpus"]), "--queries", str(data["queries"]), "--qrels", str(data["qrels"]),
               "--backend", "lexical", "--out", str(tmp_path / "c"), "--quiet", "--protocol", "convsearch"])
    out = capsys.readouterr().out
    assert rc == 0 and "rr_full (paper-compatible: ConvSearch-R1 code)" in out and "protocol convsearch" in out
