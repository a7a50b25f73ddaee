"""The metric plan (issue 23.1): parsed once from names, aliases, cutoffs, a primary metric and a
protocol into hashable :class:`~vdr.metrics.Metric` values; family roles; the default cutoffs
declared once in the registry and read by every command."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

import vdr
from vdr.errors import InputError
from vdr.metrics import (
    COMPARE_DEFAULTS,
    EVALUATE_CUTOFFS,
    EVALUATE_DEFAULTS,
    METRICS,
    METRICS_CUTOFFS,
    METRICS_DEFAULTS,
    PROTOCOLS,
    ROLES,
    Metric,
    MetricPlan,
    evaluate_run,
)


def names(ms) -> list[str]:
    return [str(m) for m in ms]


# ------------------------------------------------------------------------------------------------ parsing


def test_aliases_parse_to_the_same_metrics_and_equal_plans():
    a = MetricPlan.parse(["nDCG@10", "RR", "P@5", "Success@3", "AP@10"])
    b = MetricPlan.parse(["ndcg_at_10", "recip_rank", "precision_5", "hit_rate@3", "map_cut.10"])
    c = MetricPlan.parse([Metric("ndcg", 10), Metric("mrr"), Metric("precision", 5), Metric("hit", 3), Metric("map", 10)])
    assert a == b == c and hash(a) == hash(b) == hash(c)
    assert names(a.metrics) == ["ndcg@10", "mrr", "precision@5", "hit@3", "map@10"]
    assert a.table == a.metrics and a.primary == Metric("ndcg", 10)
    # duplicates in two spellings are computed once, in first-seen order
    assert names(MetricPlan.parse(["P@5", "precision_at_5", "nDCG@3"]).metrics) == ["precision@5", "ndcg@3"]


def test_cutoffs_given_as_a_string_with_repeats():
    p = MetricPlan.parse(k="10,3,5,3")
    assert p.cutoffs == (3, 5, 10)
    assert p == MetricPlan.parse(k=[5, 10, 3]) == MetricPlan.parse(k=(3, 5, 10)) == MetricPlan.parse()
    # vdr evaluate's default metrics: nine families per cutoff, cutoff by cutoff
    fams = ["ndcg", "mrr", "recall", "precision", "hit", "map", "judged", "hole", "ties"]
    assert names(p.metrics) == [f"{f}@{k}" for k in (3, 5, 10) for f in fams]
    assert names(p.table) == ["ndcg@3", "mrr@3", "recall@5", "recall@10", "hole@3"]
    assert MetricPlan.parse(k=4).cutoffs == (4,) and MetricPlan.parse(k="7").cutoffs == (7,)


@pytest.mark.parametrize("bad, needle", [("a,b", "comma-separated"), ("0", ">= 1"), ([2.5], "integers"), ("", ">= 1")])
def test_bad_cutoffs_are_refused(bad, needle):
    with pytest.raises(InputError, match=needle):
        MetricPlan.parse(k=bad)


def test_unknown_names_are_refused_with_a_suggestion():
    with pytest.raises(InputError, match=r"unknown metric 'ndgc@10' \(did you mean 'ndcg@10'\?\)"):
        MetricPlan.parse(["ndgc@10"])
    with pytest.raises(InputError, match="unknown metric"):
        MetricPlan.parse(k=3, primary="nope@3")
    with pytest.raises(InputError, match="unknown protocol 'trec'; choose from convsearch"):
        MetricPlan.parse(protocol="trec")


def test_default_cutoffs_per_command():
    assert EVALUATE_DEFAULTS.cutoffs == COMPARE_DEFAULTS.cutoffs == EVALUATE_CUTOFFS == (3, 5, 10)
    assert METRICS_DEFAULTS.cutoffs == METRICS_CUTOFFS == (1, 3, 5, 10)
    m = MetricPlan.parse(defaults=METRICS_DEFAULTS)
    assert m.cutoffs == (1, 3, 5, 10)
    # vdr metrics: family by family, then ties (the order of its JSON and table)
    fams = ["ndcg", "mrr", "recall", "precision", "hit", "map", "judged", "ties"]
    assert names(m.metrics) == [f"{f}@{k}" for f in fams for k in (1, 3, 5, 10)]
    assert names(m.metrics) == names(vdr.metrics({"q": {"a": 1}}, {"q": {"a": 1.0}}).values)


def test_single_cutoff_table_evaluate_vs_compare():
    # vdr evaluate shows recall at the only cutoff; vdr compare shows none (their behaviour before the plan)
    assert names(MetricPlan.parse(k=3).table) == ["ndcg@3", "mrr@3", "recall@3", "hole@3"]
    assert names(MetricPlan.parse(k=3, defaults=COMPARE_DEFAULTS).table) == ["ndcg@3", "mrr@3", "hole@3"]
    # without 3 among the cutoffs, the smallest heads the table
    assert names(MetricPlan.parse(k="5,10").table) == ["ndcg@5", "mrr@5", "recall@10", "hole@5"]


# ------------------------------------------------------------------------------------------------ primary, protocol, roles


def test_primary_metric_promotion():
    # already computed: moved to the front of the table, not computed twice
    p = MetricPlan.parse(k="3,5,10", primary="RR@5")
    assert p.primary == Metric("mrr", 5) and p.primary_name == "mrr@5"
    assert names(p.table) == ["mrr@5", "ndcg@3", "mrr@3", "recall@5", "recall@10", "hole@3"]
    assert names(p.metrics).count("mrr@5") == 1 and len(p.metrics) == 27
    # in the table already: moved first
    assert names(MetricPlan.parse(primary="recall_at_10").table) == ["recall@10", "ndcg@3", "mrr@3", "recall@5", "hole@3"]
    # outside the cutoffs: computed too, last
    q = MetricPlan.parse(k=3, primary="nDCG@100")
    assert names(q.metrics)[-1] == "ndcg@100" and q.primary == Metric("ndcg", 100) and "ndcg@100" in q.compared_names
    # with explicit metrics: the first is primary unless one is named
    assert MetricPlan.parse(["P@5", "nDCG@3"]).primary == Metric("precision", 5)
    assert names(MetricPlan.parse(["P@5", "nDCG@3"], primary="ndcg_cut_3").table) == ["ndcg@3", "precision@5"]


def test_protocol_convsearch():
    p = MetricPlan.parse(protocol="convsearch")
    assert p.protocol is PROTOCOLS["convsearch"] and p.cutoffs == (3, 5, 10, 100)
    assert names(p.table) == ["mrr@3", "ndcg@3", "recall@10", "recall@100", "rr_full"]
    assert p.primary_name == "mrr@3"
    assert names(p.metrics)[-1] == "rr_full" and len(p.metrics) == 4 * 9 + 1
    # rr_full is shown, labelled, never compared (paper-compatible)
    assert p.compared_names == ["mrr@3", "ndcg@3", "recall@10", "recall@100"]
    assert p.protocol.to_json()["name"] == "convsearch" and "ConvSearch-R1" in p.protocol.to_json()["description"]
    assert MetricPlan.parse(k=10, protocol="convsearch").cutoffs == (3, 10, 100)
    r = MetricPlan.parse(protocol="convsearch", primary="nDCG@3")
    assert names(r.table)[:2] == ["ndcg@3", "mrr@3"] and r.compared_names[0] == "ndcg@3"


def test_roles_quality_and_diagnostic():
    assert ROLES == ("quality", "diagnostic")
    assert {f.name for f in METRICS.values() if f.role == "diagnostic"} == {"judged", "judged_ret", "hole", "hole_corpus", "ties", "num_ret", "num_rel", "num_rel_ret",
                                                                                    "num_nonrel_judged_ret", "num_q", "unj", "rbp_resid"}
    assert all(f.role in ROLES for f in METRICS.values())
    p = MetricPlan.parse(k=3)
    assert names(p.diagnostics) == ["judged@3", "hole@3", "ties@3"]
    assert p.compared_names == ["ndcg@3", "mrr@3", "recall@3"]  # hole@3 is in the table, not compared
    q = MetricPlan.parse(["nDCG@3", "hole@3", "judged@5", "RR"])
    assert q.compared_names == ["ndcg@3", "mrr"] and names(q.diagnostics) == ["hole@3", "judged@5"]
    assert Metric("ties", 3).role == "diagnostic" and Metric("rr_full").role == "quality"
    with pytest.raises(ValueError, match="unknown role"):
        dataclasses.replace(METRICS["ndcg"], role="other")


def test_plans_are_hashable_frozen_and_equal_across_spellings():
    a = MetricPlan.parse(k="10,3,5,3", primary="nDCG@10", protocol="convsearch")
    b = MetricPlan.parse(k=[3, 5, 10], primary="ndcg_cut_10", protocol=PROTOCOLS["convsearch"])
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert a != MetricPlan.parse(k="10,3,5", primary="ndcg@5", protocol="convsearch")
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.cutoffs = (1,)
    assert isinstance(a.metrics, tuple) and isinstance(a.table, tuple) and isinstance(a.cutoffs, tuple)


def test_evaluate_run_takes_the_plan_as_parsed():
    qrels, run = {"q1": {"d1": 1, "d2": 2}, "q2": {"d3": 1}}, {"q1": {"d2": 2.0, "d1": 1.0}, "q2": {"d9": 1.0, "d3": 0.5}}
    plan = MetricPlan.parse(["nDCG@2", "RR", "hole@1"])
    by_plan, by_names = evaluate_run(qrels, run, plan), evaluate_run(qrels, run, ["ndcg_at_2", "recip_rank", "hole@1"])
    assert list(by_plan.values) == ["ndcg@2", "mrr", "hole@1"] == list(by_names.values)
    assert by_plan.aggregate == by_names.aggregate
    # mrr: q1 1/1, q2 1/2 -> 0.75; hole@1: q1 0 (d2 judged), q2 1 (d9 unjudged) -> 0.5
    assert by_plan.aggregate["mrr"] == 0.75 and by_plan.aggregate["hole@1"] == 0.5
    assert vdr.metrics(qrels, run, metric_names=plan).aggregate == by_plan.aggregate


# ------------------------------------------------------------------------------------------------ defaults read once


def test_every_default_cutoff_reads_the_registry_constant():
    from vdr.cli import evaluate as commands
    from vdr.experiment.compare_runs import CompareOptions, compare_runs
    from vdr.experiment.evaluation import EvaluateOptions, evaluate
    from vdr.integrations.mteb import MtebBackend
    from vdr.metrics import metrics
    from vdr.metrics.registry import default_metrics, diagnostic_metrics

    assert EvaluateOptions().k is EVALUATE_CUTOFFS and inspect.signature(evaluate).parameters["k"].default is EVALUATE_CUTOFFS
    assert CompareOptions().k is EVALUATE_CUTOFFS and inspect.signature(compare_runs).parameters["k"].default is EVALUATE_CUTOFFS
    assert inspect.signature(MtebBackend.__init__).parameters["ks"].default is EVALUATE_CUTOFFS
    assert inspect.signature(metrics).parameters["k"].default is METRICS_CUTOFFS
    assert inspect.signature(default_metrics).parameters["ks"].default is METRICS_CUTOFFS
    assert inspect.signature(diagnostic_metrics).parameters["ks"].default is METRICS_CUTOFFS
    # the CLI's --k defaults are the same constants, written as the option spells them
    cli = {name: p.default.default for name, p in inspect.signature(commands.metrics_command).parameters.items()
           if hasattr(p.default, "default")}
    assert cli["k"] == "1,3,5,10" == ",".join(map(str, METRICS_CUTOFFS))
    cmp_k = inspect.signature(commands.compare_command).parameters["k"].default.default
    assert cmp_k == "3,5,10" == ",".join(map(str, EVALUATE_CUTOFFS))
    ev_k = next(factory() for name, _, factory in commands._EVALUATE_PARAMS if name == "k").default
    assert ev_k == cmp_k
    # no other copy of the default cutoffs in the package's code (tuples, lists, "1,3,5,10" strings)
    assert _literal_cutoffs() == ["metrics/registry.py: (1, 3, 5, 10)", "metrics/registry.py: (3, 5, 10)"]


def _literal_cutoffs() -> list[str]:
    """Every literal ``(1, 3, 5, 10)`` / ``[3, 5, 10]`` / ``"3,5,10"`` ... in vdr's code (docstrings aside)."""
    import ast
    import pathlib

    wanted = {(1, 3, 5, 10), (3, 5, 10)}
    root = pathlib.Path(vdr.__file__).parent
    hits = []
    for f in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.Tuple, ast.List)) and all(isinstance(e, ast.Constant) for e in node.elts):
                value = tuple(e.value for e in node.elts)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.replace(",", "").isdigit():
                value = tuple(int(x) for x in node.value.split(",") if x)
            else:
                continue
            if value in wanted:
                hits.append(f"{f.relative_to(root).as_posix()}: {value}")
    return hits


@pytest.mark.filterwarnings("ignore::vdr.errors.VdrWarning")  # each run retrieves only unjudged pages for one query
def test_compare_keeps_its_keywords_and_refuses_unknown_ones():
    from vdr.experiment.compare_runs import CompareOptions

    qrels = {"q1": {"d1": 1}, "q2": {"d2": 1}}
    runs = {"a": {"q1": {"d1": 1.0}, "q2": {"d9": 1.0}}, "b": {"q1": {"d9": 1.0}, "q2": {"d2": 1.0}}}
    res = vdr.compare(qrels, runs, baseline="b", primary_metric="RR@5", k="5", n_permutations=100, n_bootstrap=100)
    assert res.config["k"] == [5] and res.primary == "mrr@5" and res.config["compared_metrics"] == ["mrr@5", "ndcg@5"]
    assert res.config["table_metrics"] == ["mrr@5", "ndcg@5", "hole@5"]
    again = vdr.compare(qrels, runs, options=CompareOptions(baseline="b", primary_metric="mrr@5", k=(5,)), n_permutations=100,
                        n_bootstrap=100)
    assert again.config == res.config
    # Results read a user-given name in any spelling, parsed once to the canonical one
    assert res.check_metric("RR@5") == "mrr@5" == res.check_metric(Metric("mrr", 5)) and res.check_metric("ndcg_at_5") == "ndcg@5"
    assert res.summary_table("nDCG@5").columns[:2] == ("run", "ndcg@5") and "d ndcg@5" in res.summary_table("nDCG@5").columns
    with pytest.raises(InputError, match="metric 'ndcg@10' was not evaluated"):
        res.check_metric("nDCG@10")
    with pytest.raises(TypeError, match="unknown option.*'depth'"):
        vdr.compare(qrels, runs, depth=10)
    params = inspect.signature(vdr.compare).parameters
    assert list(params)[:3] == ["qrels", "runs", "options"] and params["seed"].default == 0
    assert [f.name for f in dataclasses.fields(CompareOptions)] == list(params)[3:]


def test_metrics_keeps_its_keywords_and_refuses_unknown_ones(tmp_path):
    from vdr.metrics import MetricsOptions

    qrels, run = {"q1": {"a": 1}, "q2": {"b": 0}}, {"q1": {"a": 1.0, "b": 2.0}, "q2": {"b": 1.0}}
    res = vdr.metrics(qrels, run, "1,2", None, relevance_level=1, queries_without_relevant="exclude", json_path=tmp_path / "m.json")
    # q2 has no grade > 0: excluded; q1: a at rank 2 -> precision@1 0, precision@2 1/2
    assert res.query_ids == ("q1",) and res.aggregate["precision@1"] == 0.0 and res.aggregate["precision@2"] == 0.5
    assert (tmp_path / "m.json").exists()
    same = vdr.metrics(qrels, run, k=[2, 1], options=MetricsOptions(queries_without_relevant="exclude"))
    assert same.aggregate == res.aggregate
    with pytest.raises(TypeError, match="unknown option.*'relevance'"):
        vdr.metrics(qrels, run, relevance=2)
    params = inspect.signature(vdr.metrics).parameters
    assert list(params) == ["qrels", "run", "k", "metric_names", "options", *(f.name for f in dataclasses.fields(MetricsOptions))]
