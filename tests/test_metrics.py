"""Metric tests: hand-computed goldens (edge-case matrix), pytrec_eval cross-checks on random graded
runs with ties and negative grades, and trec_eval's own expected outputs (conformance)."""

from __future__ import annotations

import collections
import math
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from shared_data import shared_path

import vdr
from vdr.errors import InputError
from vdr.metrics import METRICS, Metric, default_metrics, evaluate_run, parse_metric

SHARED = shared_path("trec_eval_ref")
L2 = math.log2


def ev(qrels, run, names, **kw):
    return evaluate_run(qrels, run, names, **kw)


# ---------------------------------------------------------------- hand-computed goldens


def test_ndcg_linear_gain_ideal_from_all_qrels():
    qrels = {"q": {"a": 2, "b": 1, "c": 0, "d": 2, "e": -1}}
    run = {"q": {"b": 0.9, "x": 0.8, "a": 0.7, "e": 0.6}}
    # ranks: b=1 (gain 1), x=2 (unjudged), a=3 (gain 2), e=4 (grade -1 -> gain 0)
    dcg3 = 1 / L2(2) + 0 + 2 / L2(4)
    idcg3 = 2 / L2(2) + 2 / L2(3) + 1 / L2(4)  # from ALL positive grades (d is never retrieved)
    r = ev(qrels, run, ["ndcg@3", "ndcg@1", "ndcg_exp@3", "ndcg_run@3"])
    pq = r.per_query["q"]
    assert pq["ndcg@3"] == pytest.approx(dcg3 / idcg3, abs=1e-12)
    assert pq["ndcg@1"] == pytest.approx((1 / L2(2)) / (2 / L2(2)), abs=1e-12)
    exp_dcg = (2**1 - 1) / L2(2) + (2**2 - 1) / L2(4)
    exp_idcg = 3 / L2(2) + 3 / L2(3) + 1 / L2(4)
    assert pq["ndcg_exp@3"] == pytest.approx(exp_dcg / exp_idcg, abs=1e-12)
    # ideal formed from the retrieved top-3 gains only: [2, 1] sorted -> 2/log2(2) + 1/log2(3)
    assert pq["ndcg_run@3"] == pytest.approx(dcg3 / (2 / L2(2) + 1 / L2(3)), abs=1e-12)


def test_binary_metrics_and_relevance_level():
    qrels = {"q": {"a": 2, "b": 1, "c": 0, "d": 2}}
    run = {"q": {"c": 5.0, "b": 4.0, "a": 3.0, "z": 2.0, "d": 1.0}}
    r = ev(qrels, run, ["recall@3", "precision@3", "hit@1", "hit@3", "mrr@1", "mrr@3", "mrr", "map@3", "map", "judged@3", "hole@3", "judged@10"])
    pq = r.per_query["q"]
    assert pq["recall@3"] == pytest.approx(2 / 3)
    assert pq["precision@3"] == pytest.approx(2 / 3)
    assert pq["hit@1"] == 0.0 and pq["hit@3"] == 1.0
    assert pq["mrr@1"] == 0.0 and pq["mrr@3"] == pytest.approx(1 / 2) and pq["mrr"] == pytest.approx(1 / 2)
    assert pq["map@3"] == pytest.approx((1 / 2 + 2 / 3) / 3)
    assert pq["map"] == pytest.approx((1 / 2 + 2 / 3 + 3 / 5) / 3)
    assert pq["judged@3"] == pytest.approx(3 / 3) and pq["hole@3"] == pytest.approx(0.0)
    assert pq["judged@10"] == pytest.approx(4 / 10)  # divides by k even when fewer are retrieved
    r2 = ev(qrels, run, ["recall@3", "mrr@3", "ndcg@3"], relevance_level=2)
    pq2 = r2.per_query["q"]
    assert pq2["recall@3"] == pytest.approx(1 / 2)  # only a (rank 3) of {a, d}
    assert pq2["mrr@3"] == pytest.approx(1 / 3)
    # nDCG uses the grades, not the relevance level
    dcg = 1 / L2(3) + 2 / L2(4)
    idcg = 2 / L2(2) + 2 / L2(3) + 1 / L2(4)
    assert pq2["ndcg@3"] == pytest.approx(dcg / idcg, abs=1e-12)


def test_ties_broken_by_corpus_id_descending_bytewise():
    qrels = {"q": {"p10": 1}}
    run = {"q": {"p9": 1.0, "p10": 1.0}}  # "p9" > "p10" bytewise -> p9 ranks first
    assert ev(qrels, run, ["mrr"]).per_query["q"]["mrr"] == pytest.approx(1 / 2)
    qrels = {"q": {"p9": 1}}
    assert ev(qrels, run, ["mrr"]).per_query["q"]["mrr"] == 1.0
    # non-ASCII: UTF-8 byte order == code point order; "é" (0xC3 0xA9) > "z"
    run = {"q": {"z": 0.5, "é": 0.5, "a": 0.5}}
    assert [d for d, _ in vdr.Run(run).ranked("q")] == ["é", "z", "a"]
    assert ev({"q": {"a": 1}}, run, ["mrr"]).per_query["q"]["mrr"] == pytest.approx(1 / 3)


def test_many_ties_rank_exactly():
    docs = [f"d{i}" for i in range(50)]
    run = {"q": {d: 0.0 for d in docs}}
    order = sorted(docs, reverse=True)
    for target in ("d0", "d7", "d49", "d5"):
        r = ev({"q": {target: 1}}, run, ["mrr"])
        assert r.per_query["q"]["mrr"] == pytest.approx(1 / (order.index(target) + 1))


def test_fewer_than_k_retrieved_and_k_above_relevant():
    qrels = {"q": {"a": 1, "b": 1}}
    run = {"q": {"a": 2.0}}
    pq = ev(qrels, run, ["precision@10", "recall@10", "ndcg@10", "hit@10"]).per_query["q"]
    assert pq["precision@10"] == pytest.approx(1 / 10)
    assert pq["recall@10"] == pytest.approx(1 / 2)
    assert pq["ndcg@10"] == pytest.approx(1.0 / (1 + 1 / L2(3)))
    assert pq["hit@10"] == 1.0


def test_query_set_policies():
    qrels = {"q1": {"a": 1}, "q2": {"b": 0, "c": -1}, "q3": {"d": 2}}
    run = {"q1": {"a": 1.0}, "q2": {"b": 1.0}, "q9": {"z": 1.0}}  # q3 missing, q9 has no qrels
    r = ev(qrels, run, ["ndcg@3", "judged@3"])
    assert r.query_ids == ("q1", "q2", "q3")
    assert r.aggregate["ndcg@3"] == pytest.approx((1 + 0 + 0) / 3)
    assert r.per_query["q3"] == {"ndcg@3": 0.0, "judged@3": 0.0}
    assert r.per_query["q2"]["judged@3"] == pytest.approx(1 / 3)
    p = r.policy
    assert (p["num_queries_missing_from_run"], p["num_run_queries_without_qrels"], p["num_queries_without_relevant"]) == (1, 1, 1)
    assert p["queries_without_relevant"] == "zero" and p["num_queries_averaged"] == 3
    rx = ev(qrels, run, ["ndcg@3"], queries_without_relevant="exclude")
    assert rx.query_ids == ("q1", "q3") and rx.aggregate["ndcg@3"] == pytest.approx(0.5)
    assert rx.policy["num_queries_without_relevant"] == 1 and rx.policy["num_queries_averaged"] == 2


def test_rewrite_variant_uses_the_same_query_set():
    qrels = {"q1": {"a": 1}, "q2": {"b": 1}}
    orig = {"q1": {"a": 1.0}}
    rewr = {"q2": {"b": 1.0}, "q1": {"x": 1.0}}
    a, b = ev(qrels, orig, ["ndcg@3"]), ev(qrels, rewr, ["ndcg@3"])
    assert a.query_ids == b.query_ids == ("q1", "q2")
    assert a.aggregate["ndcg@3"] == b.aggregate["ndcg@3"] == 0.5


def test_id_type_mixups_are_strings():
    # "01" and "1" are different ids; an int id 1 becomes "1"
    qrels = vdr.Qrels({1: {"01": 1}})
    assert list(qrels) == ["1"]
    run = {"1": {"1": 3.0, "01": 2.0}}
    assert ev(qrels, run, ["mrr"]).per_query["1"]["mrr"] == pytest.approx(1 / 2)
    run_np = {np.int64(1): {"01": np.float32(2.0)}}
    assert ev(qrels, run_np, ["mrr"]).per_query["1"]["mrr"] == 1.0
    with pytest.raises(InputError, match="float"):
        vdr.Qrels({1.0: {"a": 1}})


def test_registry_parse_and_errors():
    assert parse_metric("nDCG@3") == Metric("ndcg", 3)
    assert str(parse_metric("mrr")) == "mrr"
    assert {m.family for m in default_metrics()} == {"ndcg", "mrr", "recall", "precision", "hit", "map", "judged"}
    with pytest.raises(InputError, match="known metrics"):
        parse_metric("bleu@3")
    with pytest.raises(InputError, match="needs a cutoff"):
        parse_metric("ndcg")
    with pytest.raises(InputError, match=">= 1"):
        parse_metric("ndcg@0")
    with pytest.raises(InputError, match="no queries"):
        ev({}, {"q": {"a": 1.0}}, ["ndcg@3"])
    # every registered family is computed
    names = [f"{f}@5" for f in METRICS] + ["mrr", "map"]
    r = ev({"q": {"a": 1}}, {"q": {"a": 1.0}}, names)
    assert set(r.aggregate) == set(names)


def test_metrics_function_writes_json_and_csv(tmp_path):
    res = vdr.metrics(
        {"q": {"a": 1}}, {"q": {"a": 1.0, "b": 2.0}}, k="1,3", json_path=tmp_path / "m.json", per_query_path=tmp_path / "pq.csv"
    )
    import json

    data = json.loads((tmp_path / "m.json").read_text())
    assert set(data) == {"aggregate", "per_query", "num_queries", "policy"}
    assert data["aggregate"]["mrr@3"] == 0.5 and data["per_query"]["q"]["ndcg@1"] == 0.0 and data["num_queries"] == 1
    rows = (tmp_path / "pq.csv").read_text().splitlines()
    assert rows[0].split(",")[:3] == ["query-id", "ndcg@1", "ndcg@3"] and rows[1].startswith("q,0.0,")
    assert res.aggregate["ndcg@3"] == pytest.approx(1 / L2(3))


# ---------------------------------------------------------------- pytrec_eval cross-check

pytrec_eval = pytest.importorskip("pytrec_eval")

IDS = ["p1", "p9", "p10", "p2", "P1", "a", "b b", "d_3", "é", "10", "9"]


@st.composite
def qrels_and_run(draw):
    nq = draw(st.integers(1, 6))
    qrels, run = {}, {}
    for i in range(nq):
        q = f"q{i}"
        judged = draw(st.lists(st.sampled_from(IDS), unique=True, max_size=8))
        if judged or draw(st.booleans()):
            qrels[q] = {d: draw(st.sampled_from([-1, 0, 0, 1, 1, 2, 3])) for d in judged} or {"p1": 0}
        if draw(st.integers(0, 5)) > 0:
            docs = draw(st.lists(st.sampled_from(IDS), unique=True, min_size=1, max_size=11))
            # few distinct scores: many ties
            run[q] = {d: draw(st.sampled_from([0.0, 0.5, 1.0, 1.5, -2.25, 3.0])) for d in docs}
    if not qrels:
        qrels["q0"] = {"p1": 1}
    return qrels, run


PYTREC = {
    "ndcg@{k}": "ndcg_cut_{k}",
    "precision@{k}": "P_{k}",
    "recall@{k}": "recall_{k}",
    "hit@{k}": "success_{k}",
    "map@{k}": "map_cut_{k}",
}


@pytest.mark.crosscheck
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(qrels_and_run(), st.sampled_from([1, 2, 3]), st.sampled_from([1, 2]))
def test_against_pytrec_eval(data, k, level):
    qrels, run = data
    ours = ev(qrels, run, [t.format(k=k) for t in PYTREC] + ["mrr", "map", f"mrr@{k}"], relevance_level=level)
    measures = {f"ndcg_cut.{k}", f"P.{k}", f"recall.{k}", f"success.{k}", f"map_cut.{k}", "recip_rank", "map"}
    ref = pytrec_eval.RelevanceEvaluator(qrels, measures, relevance_level=level).evaluate(run)
    top = vdr.Run(run).top_k(k).to_dict() if run else {}
    ref_k = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}, relevance_level=level).evaluate(top)
    pq = ours.per_query
    for q in qrels:
        if q not in run:  # pytrec_eval leaves such queries out; vdr scores them 0 (trec_eval -c)
            assert all(v == 0.0 for v in pq[q].values())
            continue
        for ours_name, ref_name in PYTREC.items():
            assert pq[q][ours_name.format(k=k)] == pytest.approx(ref[q][ref_name.format(k=k)], abs=1e-12), (q, ours_name)
        assert pq[q]["mrr"] == pytest.approx(ref[q]["recip_rank"], abs=1e-12)
        assert pq[q]["map"] == pytest.approx(ref[q]["map"], abs=1e-12)
        assert pq[q][f"mrr@{k}"] == pytest.approx(ref_k[q]["recip_rank"], abs=1e-12)


# ---------------------------------------------------------------- trec_eval conformance

TREC_NAMES = {"ndcg_cut_": "ndcg@", "P_": "precision@", "recall_": "recall@", "success_": "hit@", "map_cut_": "map@"}


def _read_ref(name):
    out = collections.defaultdict(dict)
    for line in (SHARED / name).read_text().splitlines():
        m, q, v = line.split()
        out[m][q] = v
    return out


@pytest.mark.crosscheck
@pytest.mark.shared("trec_eval_ref")
@pytest.mark.parametrize(
    "expected, qrels_file, run_file, level, depth",
    [
        ("out.test.aq", "qrels.test", "results.test", 1, None),
        ("out.test.aqc", "qrels.test", "results.trunc", 1, None),
        ("out.test.aqcM", "qrels.test", "results.trunc", 1, 100),
        ("out.test.aql", "qrels.rel_level", "results.test", 2, None),
    ],
)
def test_trec_eval_conformance(expected, qrels_file, run_file, level, depth):
    ref = _read_ref(expected)
    pairs = []
    for m in ref:
        for pre, ours in TREC_NAMES.items():
            if m.startswith(pre) and m[len(pre):].isdigit():
                pairs.append((m, ours + m[len(pre):]))
        if m in ("recip_rank", "map"):
            pairs.append((m, {"recip_rank": "mrr", "map": "map"}[m]))
    assert len(pairs) >= 40
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run = vdr.load_run(SHARED / run_file)
    # results.trunc has junk after the tag on some lines: ignored with a warning, as trec_eval does
    assert bool(caught) == (run_file == "results.trunc")
    if depth:
        run = run.top_k(depth)
    res = evaluate_run(vdr.load_qrels(SHARED / qrels_file), run, [o for _, o in pairs], relevance_level=level)
    assert str(res.num_queries) == ref["num_q"]["all"]
    pq, agg = res.per_query, res.aggregate
    checked = 0
    for m, ours in pairs:
        for q, v in ref[m].items():
            got = agg[ours] if q == "all" else pq[q][ours]
            assert got == pytest.approx(float(v), abs=5e-5), (m, q)
            checked += 1
    assert checked >= 4 * len(pairs)

