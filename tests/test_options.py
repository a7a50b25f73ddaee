"""Option records (vdr.options, issue 23.4): settings grouped, one flat name per setting, one rule
for keywords (with_keywords) shared by evaluate, compare, metrics, judge, rewrite and ingest."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

import vdr
from vdr.experiment.evaluation import EvaluateOptions, MetricSettings, RetrievalSettings, StatisticsSettings
from vdr.experiment.inputs import InputSettings
from vdr.options import with_keywords


def test_evaluate_options_are_grouped_with_flat_names():
    o = EvaluateOptions(backends="lexical", k=(3, 10), seed=7, queries="q.jsonl")
    assert [f.name for f in dataclasses.fields(o)] == ["inputs", "retrieval", "metrics", "statistics", "run"]
    assert o.retrieval == RetrievalSettings(backends="lexical")
    assert o.metrics == MetricSettings(k=(3, 10)) and o.statistics == StatisticsSettings(seed=7)
    assert o.inputs == InputSettings(queries="q.jsonl")
    assert (o.k, o.backends, o.seed, o.queries, o.depth) == ((3, 10), "lexical", 7, "q.jsonl", 100)  # flat reads
    assert o.replace(depth=5).retrieval.depth == 5 and o.depth == 100  # frozen: replace makes a copy
    assert dataclasses.replace(o, seed=1).statistics.seed == 1 and dataclasses.replace(o, seed=1).k == (3, 10)
    g = EvaluateOptions(metrics=MetricSettings(k=(1,), macro_average=True), k=(5,))  # a group, then a flat override
    assert g.metrics == MetricSettings(k=(5,), macro_average=True)
    assert EvaluateOptions() == EvaluateOptions.of(None) and EvaluateOptions(seed=0) == EvaluateOptions()
    # every setting of 0.1's flat EvaluateOptions kept its name (35), plus alpha, group_by and groups (issue 27),
    # allow_id_mismatch (issue 34.1) and report (issue 35.3)
    # and rerank, rerank_depth, rerank_backends, rerank_options (issue 37.3)
    assert len(EvaluateOptions.flat_fields()) == 45 and "report" in EvaluateOptions.flat_fields()
    assert EvaluateOptions.flat_fields()["rerank"] == "retrieval"
    assert EvaluateOptions.flat_fields()["serve_as"] == "retrieval"  # issue 36


def test_unknown_keywords_are_named_once_by_one_rule():
    with pytest.raises(TypeError, match=r"evaluate\(\) got unknown option\(s\) 'kk'; known: queries, qrels, .*seed"):
        vdr.evaluate("corpus", out="r", kk=3)
    with pytest.raises(TypeError, match=r"compare\(\) got unknown option\(s\) 'basline'; known: .*baseline"):
        vdr.compare({"q": {"d": 1}}, {"a": {"q": {"d": 1.0}}}, basline="a")
    with pytest.raises(TypeError, match=r"evaluate\(\): options must be EvaluateOptions, got dict"):
        with_keywords(EvaluateOptions, {"k": 3}, {}, "evaluate")
    with pytest.raises(TypeError, match=r"EvaluateOptions\(\) got unknown option\(s\) 'nope'"):
        EvaluateOptions(nope=1)


def test_with_keywords_on_plain_records():
    @dataclasses.dataclass(frozen=True)
    class R:
        a: int = 1
        b: str = "x"

    assert with_keywords(R, None, {"a": 2}, "f") == R(2, "x")
    base = R(3, "y")
    assert with_keywords(R, base, {}, "f") is base and with_keywords(R, base, {"b": "z"}, "f") == R(3, "z")
    with pytest.raises(TypeError, match=r"f\(\) got unknown option\(s\) 'c', 'd'; known: a, b, extra"):
        with_keywords(R, None, {"c": 1, "d": 2}, "f", ("extra",))


def test_evaluate_signature_lists_every_setting_with_its_default():
    params = inspect.signature(vdr.evaluate).parameters
    assert list(params)[:3] == ["corpus_dir", "out", "options"]
    flat = EvaluateOptions().flat()
    assert {n: p.default for n, p in params.items() if n in flat} == flat
    assert params["depth"].default == 100 and params["k"].default == (3, 5, 10) and params["concat_max_tokens"].default == 512
