"""Issue 25 items 1 and 3: aliases mean what the named tool computes (ir_measures' Judged@k, MTEB's
hole_at_k) and trec_eval's / ir_measures' other measures (ndcg, Rprec, bpref, infAP, iprec_at_recall,
11pt_avg, num_*, ERR@k, RBP, parameterised names, trec_eval's lists), with hand goldens and cross-checks."""

from __future__ import annotations

import collections
import json
import math
import random
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from shared_data import shared_path

import vdr
from vdr.errors import InputError
from vdr.metrics import MetricPlan, describe_metrics, evaluate_run, parse_metric, parse_metrics
from vdr.metrics.registry import Metric

FIXTURE = Path(__file__).parent / "data" / "ir_measures_0.4.3.json"


def ev(qrels, run, names, **kw):
    kw.setdefault("allow_unjudged", True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return evaluate_run(qrels, run, names, **kw)


# ------------------------------------------------------------------------------------------------ names


@pytest.mark.parametrize("name, canonical", [
    ("Judged@10", "judged_ret@10"), ("judged@10", "judged@10"), ("hole_at_3", "hole_corpus@3"), ("hole@3", "hole@3"),
    ("P(rel=2)@5", "precision(rel=2)@5"), ("RR(rel=2)", "mrr(rel=2)"), ("AP(rel=2)@100", "map(rel=2)@100"),
    ("nDCG(dcg=exp-log2)@10", "ndcg_exp@10"), ("nDCG(dcg='exp-log2')@10", "ndcg_exp@10"), ("nDCG(dcg=log2)@10", "ndcg@10"),
    ("RBP(p=0.8)", "rbp"), ("RBP", "rbp"), ("RBP(rel=2,p=0.9)", "rbp(rel=2,p=0.9)"), ("ERR@10", "err@10"), ("nDCG", "ndcg"),
    ("ndcg", "ndcg"), ("Rprec", "rprec"), ("Bpref", "bpref"), ("infAP", "infap"), ("iprec_at_recall_0.10", "iprec_at_recall_0.10"),
    ("11pt_avg", "11pt_avg"), ("NumRet", "num_ret"), ("NumRel", "num_rel"), ("NumRelRet", "num_rel_ret"),
    ("NumRet(rel=1)", "num_rel_ret(rel=1)"),
])
def test_names_parse_and_round_trip(name, canonical):
    m = parse_metric(name)
    assert str(m) == canonical and parse_metric(str(m)) == m


def test_trec_eval_lists_expand_into_several_metrics():
    assert [str(m) for m in parse_metrics(["P.5,10", "ndcg_cut.5,10", "P@5"])] == ["precision@5", "precision@10", "ndcg@5", "ndcg@10"]
    plan = MetricPlan.parse(["P.5,10", "ndcg_cut.5,10"])
    assert plan.names == ["precision@5", "precision@10", "ndcg@5", "ndcg@10"] and plan.primary_name == "precision@5"
    r = ev({"q": {"a": 1}}, {"q": {"a": 1.0}}, ["P.1,2"])
    assert r.aggregate == {"precision@1": 1.0, "precision@2": 0.5}
    with pytest.raises(InputError, match="several metrics"):
        parse_metric("P.5,10")


def test_did_you_mean_only_close_existing_names():
    for typo, want in [("bpreff", "'bpref'"), ("rprek", "'rprec'"), ("ndcgg@10", "'ndcg@10'")]:
        with pytest.raises(InputError, match="did you mean") as e:
            parse_metric(typo)
        assert want in str(e.value)
    with pytest.raises(InputError) as e:
        parse_metric("errr@10")
    assert "'err@10'" in str(e.value) and "mrr" not in str(e.value).split("every metric")[0]
    with pytest.raises(InputError, match="parameter 'gain=2' is not accepted; precision accepts: rel="):
        parse_metric("P(gain=2)@5")
    with pytest.raises(InputError, match="recall level"):
        parse_metric("iprec_at_recall@3")


def test_list_metrics_shows_how_the_aliases_differ():
    text = describe_metrics()
    assert "Judged@k (ir_measures, capital J)" in text and "min(k, retrieved)" in text
    assert "hole_at_k (MTEB)" in text and "NO query's qrels hold" in text
    assert "aggregate: SUM over the queries" in text


# ------------------------------------------------------------------------------------------------ hand goldens

# one query, qrels a:2 b:0 c:1 d:1 u:-1 (pooled, unjudged); R = 3 relevant (a, c, d), N = 1 non-relevant (b)
QRELS = {"q": {"a": 2, "b": 0, "c": 1, "d": 1, "u": -1}, "o": {"x": 1}}
# ranking: b(0) x(unjudged here, judged by o) a(2) u(-1) c(1) y(unjudged anywhere); d never retrieved
RUN = {"q": {"b": 6.0, "x": 5.0, "a": 4.0, "u": 3.0, "c": 2.0, "y": 1.0}, "o": {"x": 1.0}}


def test_hand_goldens():
    names = ["rprec", "bpref", "infap", "ndcg", "num_ret", "num_rel", "num_rel_ret", "err@3", "rbp", "rbp(p=0.5)", "judged@10",
             "judged_ret@10", "hole@10", "hole_corpus@10", "iprec_at_recall_0.00", "iprec_at_recall_0.50",
             "iprec_at_recall_1.00", "11pt_avg", "precision(rel=2)@3", "mrr(rel=2)"]
    r = ev(QRELS, RUN, names)
    v = r.per_query["q"]
    # Rprec: R = 3, top 3 = b x a -> 1 relevant
    assert v["rprec"] == pytest.approx(1 / 3)
    # bpref: a has n = 1 nonrel above (b): 1 - min(1,3)/min(1,3) = 0; c: n = 1 -> 0; over R = 3
    assert v["bpref"] == pytest.approx((0 + 0) / 3)
    # infAP: a at rank 3 (j=2): judged above = b (x has no qrels line for q) -> 1/3 + (2/3)*(1/2)*((0+e)/(0+1+2e));
    # c at rank 5 (j=4): judged above = b, a, u -> 1/5 + (4/5)*(3/4)*((1+e)/(1+1+2e))
    e = 1e-5
    assert v["infap"] == pytest.approx((1 / 3 + (2 / 3) * (1 / 2) * (e / (1 + 2 * e)) + 1 / 5 + (4 / 5) * (3 / 4) * ((1 + e) / (2 + 2 * e))) / 3)
    # ndcg (whole list): gains a 2 at rank 3, c 1 at rank 5; ideal 2, 1, 1
    L2 = math.log2
    assert v["ndcg"] == pytest.approx((2 / L2(4) + 1 / L2(6)) / (2 / L2(2) + 1 / L2(3) + 1 / L2(4)))
    assert (v["num_ret"], v["num_rel"], v["num_rel_ret"]) == (6.0, 3.0, 2.0)
    # ERR@3: only a (grade 2) in the top 3: R = 3/16 at rank 3
    assert v["err@3"] == pytest.approx((3 / 16) / 3)
    # RBP, p = 0.8: relevant at ranks 3 and 5
    assert v["rbp"] == pytest.approx(0.2 * (0.8 ** 2 + 0.8 ** 4)) and v["rbp(p=0.5)"] == pytest.approx(0.5 * (0.5 ** 2 + 0.5 ** 4))
    # judged: b a u c of 6 retrieved -> 4/10 (vdr) vs 4/6 (ir_measures); holes: 6/10 (vdr, empty slots count) vs
    # MTEB: only y is in no qrels (x is judged for o) -> 1/10
    assert (v["judged@10"], v["judged_ret@10"]) == (pytest.approx(4 / 10), pytest.approx(4 / 6))
    assert (v["hole@10"], v["hole_corpus@10"]) == (pytest.approx(6 / 10), pytest.approx(1 / 10))
    # interpolated precision: relevant at ranks 3 (1/3) and 5 (2/5); recall 1.0 needs 3 retrieved -> 0
    assert v["iprec_at_recall_0.00"] == pytest.approx(2 / 5) and v["iprec_at_recall_0.50"] == pytest.approx(2 / 5)
    assert v["iprec_at_recall_1.00"] == 0.0
    # 11 levels: round(l * 3) = 0,0,1,1,1,2,2,2,2,3,3 -> 2/5 for the first 9, 0 for the last 2
    assert v["11pt_avg"] == pytest.approx(9 * (2 / 5) / 11)
    assert v["precision(rel=2)@3"] == pytest.approx(1 / 3) and v["mrr(rel=2)"] == pytest.approx(1 / 3)
    # counts are summed in the aggregate (trec_eval's all line): q 6 + o 1 retrieved
    assert r.aggregate["num_ret"] == 7.0 and r.aggregate["num_rel"] == 4.0 and r.aggregate["rprec"] == pytest.approx((1 / 3 + 1) / 2)
    assert "counts, summed over the queries" in r.table()


def test_err_refuses_grades_above_4():
    with pytest.raises(InputError, match="grades 0..4"):
        ev({"q": {"a": 5}}, {"q": {"a": 1.0}}, ["ERR@10"])


# ------------------------------------------------------------------------------------------------ MTEB's own hole


def test_hole_at_k_is_mtebs_hole():
    retrieval_metrics = pytest.importorskip("mteb._evaluators.retrieval_metrics")
    rng = random.Random(7)
    qrels = {f"q{i}": {f"d{j}": rng.choice([0, 1, 2]) for j in rng.sample(range(40), rng.randint(1, 6))} for i in range(20)}
    run = {q: {f"d{j}": float(rng.randint(0, 5)) for j in rng.sample(range(40), rng.randint(1, 12))} for q in qrels}
    ks = [1, 3, 5, 10]
    ref = retrieval_metrics.hole(qrels, run, ks)
    ours = ev(qrels, run, [f"hole_at_{k}" for k in ks])
    for k in ks:
        np.testing.assert_allclose([ours.per_query[q][f"hole_corpus@{k}"] for q in run], ref[f"Hole_at_{k}"], atol=1e-12)
    # the example of the issue: vdr's hole counts empty slots and uses the query's own qrels
    r = ev({"q1": {"a": 1}, "q2": {"b": 1}}, {"q1": {"a": 2.0, "b": 1.0}}, ["hole@2", "hole_at_2", "hole@4", "hole_at_4"])
    assert r.per_query["q1"] == {"hole@2": 0.5, "hole_corpus@2": 0.0, "hole@4": 0.75, "hole_corpus@4": 0.0}


# ------------------------------------------------------------------------------------------------ ir_measures

IRM = {"Judged@5": "Judged@5", "Judged@20": "Judged@20", "ERR@5": "ERR@5", "ERR@10": "ERR@10", "ERR@20": "ERR@20",
       "RBP(rel=1)": "RBP(rel=1)", "RBP(rel=2,p=0.9)": "RBP(rel=2,p=0.9)", "P(rel=2)@5": "P(rel=2)@5", "RR(rel=2)": "RR(rel=2)",
       "AP(rel=2)@100": "AP(rel=2)@100", "nDCG(dcg='exp-log2')@10": "nDCG(dcg='exp-log2')@10", "nDCG": "nDCG",
       "Rprec": "Rprec", "Bpref": "Bpref", "infAP": "infAP", "NumRet": "NumRet", "NumRel": "NumRel",
       "NumRet(rel=1)": "NumRet(rel=1)", "NumRet(rel=2)": "NumRet(rel=2)"}


def _check_against(values: dict, qrels: dict, run: dict, tol: float, ties: bool) -> int:
    ours = ev(qrels, run, list(values))
    checked = 0
    for name, per_q in values.items():
        col = str(parse_metric(name))
        if name.startswith(("Judged", "RBP")) and ties:
            continue  # ir_measures' Judged (and cwl_eval's RBP) break ties by id ascending, vdr (trec_eval) descending
        for q, want in per_q.items():
            if q not in run:  # ir_measures fills such queries with 0; vdr scores them as trec_eval -c (num_rel kept)
                continue
            # gdeval prints 5 decimals (ERR), the provider of nDCG(dcg='exp-log2') 4
            tol_m = 1e-5 if name.startswith("ERR") else 5e-5 if "dcg=" in name else tol
            assert ours.per_query[q][col] == pytest.approx(want, abs=tol_m), (name, q)
            checked += 1
    return checked


def test_against_recorded_ir_measures_values():
    """Values ir_measures 0.4.3 computed (tests/make_ir_measures_fixture.py), checked without ir_measures."""
    data = json.loads(FIXTURE.read_text())
    assert data["ir_measures"] == "0.4.3"
    checked = sum(_check_against(c["values"], c["qrels"], c["run"], 1e-9, c["ties"]) for c in data["cases"])
    assert checked > 500


def test_against_ir_measures_itself():
    """ir_measures 0.4.x itself, run in a child process: it drives pytrec_eval's C evaluators, and
    pytrec_eval-terrier 0.5.11 can crash or hang a LATER evaluator of the same process after it
    (seen: test_against_pytrec_eval[1-2] hung after this test when both ran in one process)."""
    pytest.importorskip("ir_measures")
    data = json.loads(FIXTURE.read_text())
    names = [n for n in IRM if not n.startswith("ERR") and not n.startswith("RBP")]  # gdeval needs perl, RBP cwl_eval
    code = ("import json, sys, ir_measures\n"
            "data, names = json.load(sys.stdin)\n"
            "out = []\n"
            "for c in data['cases']:\n"
            "    vals = {}\n"
            "    for m in ir_measures.iter_calc([ir_measures.parse_measure(n) for n in names], c['qrels'], c['run']):\n"
            "        vals.setdefault(str(m.measure), {})[m.query_id] = m.value\n"
            "    out.append(vals)\n"
            "print(json.dumps(out))\n")
    p = subprocess.run([sys.executable, "-c", code], input=json.dumps([data, names]), capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    for c, vals in zip(data["cases"], json.loads(p.stdout)):
        assert _check_against(vals, c["qrels"], c["run"], 1e-9, c["ties"]) > 100


# ------------------------------------------------------------------------------------------------ pytrec_eval, random runs with ties


def _pytrec_eval_in_child(qrels: dict, run: dict, level: int, measures: tuple[str, ...] = (
        "Rprec", "bpref", "infAP", "ndcg", "num_ret", "num_rel", "num_rel_ret", "iprec_at_recall", "11pt_avg")) -> dict:
    """pytrec_eval's per-query values of the new measures, computed in a child process with one
    evaluator per measure: pytrec_eval-terrier 0.5.11 crashed (SIGSEGV) on seed 2, level 1 with the
    measures in one evaluator, and hung when earlier evaluators of the same process had run; each
    measure alone, in a fresh process, gives trec_eval's values."""
    code = ("import json, sys, pytrec_eval\n"
            "qrels, run, level, measures = json.load(sys.stdin)\n"
            "ref = {}\n"
            "for m in measures:\n"
            "    for q, vals in pytrec_eval.RelevanceEvaluator(qrels, {m}, relevance_level=level).evaluate(run).items():\n"
            "        ref.setdefault(q, {}).update(vals)\n"
            "print(json.dumps(ref))\n")
    def child(ms: list[str], timeout: float):
        return subprocess.run([sys.executable, "-c", code], input=json.dumps([qrels, run, level, ms]), capture_output=True, text=True,
                              timeout=timeout)

    try:  # one child for every measure: the fast path
        p = child(list(measures), 120)
        if p.returncode == 0:
            fast = json.loads(p.stdout)
            # under load the fast path once exited 0 with num_ret 0 for a query that retrieved 6 pages: trusted only when sane
            if all(q in fast and ("num_ret" not in measures or fast[q].get("num_ret") == len(run[q])) for q in run):
                return fast
    except subprocess.TimeoutExpired:  # pytrec_eval-terrier hung after an earlier evaluator of the process
        pass
    ref: dict = {}
    for m in measures:  # one fresh child per measure, as the docstring says gives trec_eval's values
        p = child([m], 600)
        assert p.returncode == 0, p.stderr[-2000:]
        for q, vals in json.loads(p.stdout).items():
            ref.setdefault(q, {}).update(vals)
    return ref


def _random_case(seed: int) -> tuple[dict, dict]:
    """Graded qrels with negative grades and runs with many ties, ids that sort differently as bytes and numbers."""
    rng = random.Random(seed)
    ids = [f"p{i}" for i in range(30)] + ["p9", "10", "9", "b b"]
    qrels, run = {}, {}
    for i in range(15):
        q = f"q{i}"
        qrels[q] = {d: rng.choice([-1, 0, 0, 1, 1, 2, 3]) for d in rng.sample(ids, rng.randint(1, 12))}
        if rng.random() < 0.9:
            run[q] = {d: rng.choice([0.0, 0.5, 1.0, 2.0, -1.5]) for d in rng.sample(ids, rng.randint(1, 25))}
    return qrels, run


@pytest.mark.crosscheck
@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("level", [1, 2])
def test_against_pytrec_eval(seed, level):
    pytest.importorskip("pytrec_eval")
    qrels, run = _random_case(seed)
    pairs = {"Rprec": "rprec", "bpref": "bpref", "infAP": "infap", "ndcg": "ndcg", "num_ret": "num_ret", "num_rel": "num_rel",
             "num_rel_ret": "num_rel_ret", "11pt_avg": "11pt_avg",
             **{f"iprec_at_recall_{x / 10:.2f}": f"iprec_at_recall_{x / 10:.2f}" for x in range(11)}}
    ref = _pytrec_eval_in_child(qrels, run, level)
    ours = ev(qrels, run, list(pairs.values()), relevance_level=level)
    for q in run:
        # pytrec_eval-terrier 0.5.11 turns a recall level into a count as trec_eval 9 did, (long)(l * R + 0.9);
        # trec_eval 10 (and vdr) round, lround(l * R): compare only the levels where the two agree
        R = sum(g >= level for g in qrels[q].values())
        differ = {f"iprec_at_recall_{x / 10:.2f}" for x in range(11) if int(x / 10 * R + 0.9) != math.floor(x / 10 * R + 0.5)}
        for theirs, mine in pairs.items():
            if theirs in differ or (theirs == "11pt_avg" and differ):
                continue
            assert ours.per_query[q][mine] == pytest.approx(ref[q][theirs], abs=1e-9), (q, theirs)


# the rest of all_trec that pytrec_eval-terrier 0.5.11 computes (trec_eval 9.0.8's code; rbp, rbp_resid and unj came in 10)
REST = ("ndcg_rel", "Rndcg", "G", "binG", "set_P", "set_recall", "set_relative_P", "set_map", "set_F", "utility", "relative_P",
        "success", "Rprec_mult", "num_nonrel_judged_ret", "gm_map", "gm_bpref", "map_cut")


@pytest.mark.crosscheck
@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("level", [1, 2])
def test_rest_of_all_trec_against_pytrec_eval(seed, level):
    pytest.importorskip("pytrec_eval")
    qrels, run = _random_case(100 + seed)
    ref = _pytrec_eval_in_child(qrels, run, level, REST)
    names = [n for n in parse_metrics("all_trec") if n.family in (
        "ndcg_rel", "rndcg", "g", "bing", "set_p", "set_recall", "set_relative_p", "set_map", "set_f", "utility", "relative_p", "hit",
        "rprec_mult", "num_nonrel_judged_ret", "gm_map", "gm_bpref", "map")]
    from vdr.metrics.trec_eval import trec_eval_name

    ours = ev(qrels, run, names, relevance_level=level)
    checked = 0
    for q in run:
        for m in names:
            theirs = trec_eval_name(m)[1]
            if theirs == "map":
                continue
            got = ours.per_query[q][str(m)]
            if m.family in ("gm_map", "gm_bpref"):  # pytrec_eval gives each query's log(max(value, 1e-5))
                got = math.log(max(got, 1e-5))
            assert got == pytest.approx(ref[q][theirs], abs=1e-9), (q, theirs)
            checked += 1
    assert checked == 44 * len(run)  # 44 measures per query (map is checked above)


# ------------------------------------------------------------------------------------------------ trec_eval's own test outputs

TREC_MEASURES = {"Rprec": "rprec", "bpref": "bpref", "infAP": "infap", "11pt_avg": "11pt_avg", "ndcg": "ndcg", "num_ret": "num_ret",
                 "num_rel": "num_rel", "num_rel_ret": "num_rel_ret",
                 **{f"iprec_at_recall_{i / 10:.2f}": f"iprec_at_recall_{i / 10:.2f}" for i in range(11)}}


@pytest.mark.crosscheck
@pytest.mark.shared("trec_eval_ref")
@pytest.mark.parametrize("expected, qrels_file, run_file, level, depth", [
    ("out.test.aq", "qrels.test", "results.test", 1, None),
    ("out.test.aqc", "qrels.test", "results.trunc", 1, None),
    ("out.test.aqcM", "qrels.test", "results.trunc", 1, 100),
    ("out.test.aql", "qrels.rel_level", "results.test", 2, None),
])
def test_trec_eval_conformance_of_the_new_measures(expected, qrels_file, run_file, level, depth):
    shared = shared_path("trec_eval_ref")
    ref = collections.defaultdict(dict)
    for line in (shared / expected).read_text().splitlines():
        m, q, v = line.split()
        ref[m][q] = v
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = vdr.load_run(shared / run_file)
    if depth:
        run = run.top_k(depth)
    res = evaluate_run(vdr.load_qrels(shared / qrels_file), run, list(TREC_MEASURES.values()), relevance_level=level)
    checked = 0
    for m, ours in TREC_MEASURES.items():
        for q, v in ref[m].items():
            got = res.aggregate[ours] if q == "all" else res.per_query[q][ours]
            assert got == pytest.approx(float(v), abs=5e-5), (m, q)
            checked += 1
    assert checked >= 19 * 4


# ------------------------------------------------------------------------------------------------ the rest of all_trec (hand goldens)


def test_hand_goldens_of_the_rest_of_all_trec():
    """QRELS/RUN above: q ranks b(0) x(-) a(2) u(-1) c(1) y(-), d (grade 1) not retrieved; R = 3 (a, c, d), the
    ideal gains 2, 1, 1; 6 pages retrieved. o ranks x (grade 1) first."""
    names = ["ndcg_rel", "rndcg", "g", "bing", "rbp_graded", "rbp_graded(p=0.5)", "rbp_resid", "unj@5", "unj@10", "relative_p@2",
             "relative_p@5", "rprec_mult_0.20", "rprec_mult_1.00", "rprec_mult_1.40", "rprec_mult_2.00", "set_p", "set_recall",
             "set_relative_p", "set_map", "set_f", "utility", "num_nonrel_judged_ret", "num_q", "gm_map", "gm_bpref", "bing(rel=2)"]
    r = ev(QRELS, RUN, names)
    v = r.per_query["q"]
    L2 = math.log2
    idcg = 2 / L2(2) + 1 / L2(3) + 1 / L2(4)  # IDCG@3 = IDCG of the whole list
    dcg = 2 / L2(4) + 1 / L2(6)  # a at 3, c at 5
    # ndcg_rel: a at rank 3: DCG@3 / IDCG@3; c at rank 5: DCG@5 / IDCG@3; d not retrieved: DCG / IDCG; over 3
    assert v["ndcg_rel"] == pytest.approx((2 / L2(4) / idcg + dcg / idcg + dcg / idcg) / 3)
    # Rndcg: the ideal gain drops after rank 1 (grade 2) and rank 3 (grade 1): nDCG@1 = 0, nDCG@3 = 1 / idcg; and 6 retrieved
    # > 3 + 1, so the whole list's nDCG too
    assert v["rndcg"] == pytest.approx((0 + (2 / L2(4)) / idcg + dcg / idcg) / 3)
    # G: a (gain 2) at rank 3: C = 2 + 1 + 1, S = 2 -> 2 / log2(2 + 4 - 2); c (gain 1) at rank 5: C = 4 + 2 (two ranks past the
    # ideal list, max(0, 1) each), S = 3 -> 1 / log2(2 + 6 - 3); over the total gain 4
    assert v["g"] == pytest.approx((2 / L2(4) + 1 / L2(5)) / 4)
    # binG: a at rank 3 with 2 non-relevant pages above, c at rank 5 with 3: 1/log2(2 + n); over R = 3
    assert v["bing"] == pytest.approx((1 / L2(4) + 1 / L2(5)) / 3)
    assert v["bing(rel=2)"] == pytest.approx(1 / L2(4) / 1)  # only a is relevant at level 2 (R = 1)
    # trec_eval's rbp: gains scaled by the highest grade (2): a 2/2 at rank 3, c 1/2 at rank 5; p = 0.9
    assert v["rbp_graded"] == pytest.approx(0.1 * (1.0 * 0.9 ** 2 + 0.5 * 0.9 ** 4))
    assert v["rbp_graded(p=0.5)"] == pytest.approx(0.5 * (1.0 * 0.5 ** 2 + 0.5 * 0.5 ** 4))
    # rbp_resid: p^6 + (1 - p) * (x at 2, u at 4, y at 6: p^1 + p^3 + p^5)
    assert v["rbp_resid"] == pytest.approx(0.9 ** 6 + 0.1 * (0.9 + 0.9 ** 3 + 0.9 ** 5))
    # unjudged: x, u in the top 5; x, u, y in the top 10 (the 4 empty slots are not unjudged)
    assert (v["unj@5"], v["unj@10"]) == (pytest.approx(2 / 5), pytest.approx(3 / 10))
    assert (v["relative_p@2"], v["relative_p@5"]) == (0.0, pytest.approx(2 / 3))  # 2 relevant in the top 5 / min(5, 3)
    # Rprec_mult: c = floor(X * 3 + 0.9): 1 (P@1 = 0), 3 (1/3), 5 (2/5), 6 (2/6)
    assert (v["rprec_mult_0.20"], v["rprec_mult_1.00"], v["rprec_mult_1.40"], v["rprec_mult_2.00"]) == (
        0.0, pytest.approx(1 / 3), pytest.approx(2 / 5), pytest.approx(2 / 6))
    # the set measures: 2 relevant of 6 retrieved, R = 3
    assert v["set_p"] == pytest.approx(2 / 6) and v["set_recall"] == pytest.approx(2 / 3) and v["set_relative_p"] == pytest.approx(2 / 3)
    assert v["set_map"] == pytest.approx(2 * 2 / (6 * 3)) and v["set_f"] == pytest.approx(2 * (2 / 6) * (2 / 3) / (2 / 6 + 2 / 3))
    assert v["utility"] == 2 - 4 and v["num_nonrel_judged_ret"] == 1.0  # b (grade 0); u's -1 is not judged
    # num_q sums to the queries; gm_map is the geometric mean of AP: q (1/3 + 2/5) / 3, o 1
    ap_q = (1 / 3 + 2 / 5) / 3
    assert r.aggregate["num_q"] == 2.0 and v["gm_map"] == pytest.approx(ap_q)
    assert r.aggregate["gm_map"] == pytest.approx(math.sqrt(ap_q * 1.0))
    # a query scoring 0 enters the geometric mean as 1e-5 (trec_eval's MIN_GEO_MEAN)
    z = ev({"a": {"d": 1}, "b": {"e": 1}}, {"a": {"d": 1.0}, "b": {"f": 1.0}}, ["gm_map", "gm_bpref"])
    assert z.aggregate["gm_map"] == pytest.approx(math.sqrt(1.0 * 1e-5)) and z.aggregate["gm_bpref"] == pytest.approx(math.sqrt(1e-5))


def test_trec_eval_names_nicknames_and_bare_names():
    assert [str(m) for m in parse_metrics(["P", "success"])] == [f"precision@{k}" for k in (5, 10, 15, 20, 30, 100, 200, 500, 1000)] + [
        "hit@1", "hit@5", "hit@10"]
    assert [str(m) for m in parse_metrics("Rprec_mult")][::9] == ["rprec_mult_0.20", "rprec_mult_2.00"]
    assert [str(m) for m in parse_metrics("unj")] == ["unj@5", "unj@10", "unj@20"]
    assert [str(m) for m in parse_metrics("set")] == ["num_q", "num_ret", "num_rel", "num_rel_ret", "utility", "set_p", "set_relative_p",
                                                       "set_recall", "set_map", "set_f"]
    assert len(parse_metrics("official")) == 9 + 11 + 9 and len(parse_metrics("all_trec")) == 98
    for name, canonical in [("Rprec_mult_0.20", "rprec_mult_0.20"), ("relative_P_10", "relative_p@10"), ("set_F", "set_f"),
                            ("SetP(relative=True)", "set_relative_p"), ("SetF(beta=1)", "set_f"), ("NumQ", "num_q"),
                            ("binG", "bing"), ("G", "g"), ("Rndcg", "rndcg"), ("unj_5", "unj@5"), ("SetAP", "set_map")]:
        assert str(parse_metric(name)) == canonical, name
    with pytest.raises(InputError, match="needs a cutoff.*P_5 .* P_1000|needs a cutoff.*precision@5 ... precision@1000"):
        parse_metric("P")
    with pytest.raises(InputError, match="names several metrics"):
        parse_metric("ndcg_cut")  # trec_eval's -m ndcg_cut is the nine default cutoffs, not the whole-list ndcg
    with pytest.raises(InputError, match="multiple of R"):
        parse_metric("Rprec_mult@3")
    # set_F's parameter is beta in trec_eval (set_F.2) and ir_measures (SetF(beta=2)), never a cutoff
    assert parse_metric("SetF(beta=0.5)") == parse_metric("set_F.0.5") == Metric("set_f", p=0.5)
    assert parse_metric("set_F_2") == Metric("set_f", p=2.0) and parse_metric("set_f@2") == Metric("set_f", 2)
    with pytest.raises(InputError, match="beta must be >= 0"):
        parse_metric("SetF(beta=-1)")


def test_format_trec_eval_names_order_and_formats():
    from vdr.metrics.trec_eval import format_trec_eval, relstrings, split_trec_names

    names, extras = split_trec_names(["judged@2", "RBP", "rbp_graded", "map", "num_ret", "gm_map", "relstring.3"])
    assert names == ["judged@2", "RBP", "rbp_graded", "map", "num_ret", "gm_map"] and (extras.runid, extras.relstring) == (False, 3)
    res = ev(QRELS, RUN, names)
    rel = relstrings(QRELS, RUN, res.query_ids, extras.relstring)
    assert rel == {"o": "1", "q": "0-2"}
    text = format_trec_eval(res, per_query=True, runid="sys1", relstring=rel, relstring_name=extras.relstring_name)
    lines = text.splitlines()
    # per query (sorted ids): trec_eval's order (num_ret, map, relstring ... rbp), gm_map only in `all`, vdr-only names last
    assert [ln.split("\t")[0].strip() for ln in lines[:6]] == ["num_ret", "map", "relstring_3", "rbp", "judged@2", "rbp(p=0.8)"]
    assert lines[0] == f"{'num_ret':<22}\to\t1" and lines[2] == f"{'relstring_3':<22}\to\t'1'"
    assert lines[12] == f"{'runid':<22}\tall\tsys1" and lines[13] == f"{'num_ret':<22}\tall\t7"
    assert lines[15] == f"{'gm_map':<22}\tall\t{res.aggregate['gm_map']:6.4f}" and len(lines) == 12 + 1 + 6


def test_queries_missing_from_run_and_depth():
    qrels = {"q1": {"a": 1}, "q2": {"b": 1}, "q3": {"c": 1}}
    run = {"q1": {"x": 3.0, "a": 2.0}, "q2": {"b": 1.0}}
    full = ev(qrels, run, ["P@2", "num_q"])
    both = ev(qrels, run, ["P@2", "num_q"], queries_missing_from_run="exclude")
    assert full.num_queries == 3 and full.aggregate["precision@2"] == pytest.approx((0.5 + 0.5 + 0) / 3)
    assert both.query_ids == ("q1", "q2") and both.aggregate == {"precision@2": 0.5, "num_q": 2.0}
    assert both.policy["num_queries_missing_from_run"] == 1 and "without -c" in both.policy["missing_run_queries"]
    assert "queries missing from the run left out: 1" in both.table()
    with pytest.raises(InputError, match="no query of the qrels is ranked"):
        ev({"q3": {"c": 1}}, run, ["P@2"], queries_missing_from_run="exclude")
    # depth (trec_eval -M): the rest of each ranking is discarded first
    cut = vdr.metrics(qrels, run, metric_names=["num_ret", "set_p", "mrr"], depth=1)  # q1's top 1 is x: counted, no warning
    assert cut.policy["queries_all_unjudged"] == ["q1"]  # sparse, not an id mismatch (issue 25.5)
    assert cut.aggregate["num_ret"] == 2.0 and cut.per_query["q1"]["mrr"] == 0.0 and cut.policy["depth"] == 1
    with pytest.raises(InputError, match="depth"):
        vdr.metrics(qrels, run, metric_names=["P@2"], depth=0)
