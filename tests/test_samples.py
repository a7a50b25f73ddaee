"""N samples of a rewriter as one system (issue 37.2): the mean row with its spread, RRF fusion of
the sample runs (= ranx's), the oracle best-of-N (never tested), the disagreement share, and
``vdr rewrite --samples N``. Lexical backend on the bundled sample."""

import json

import numpy as np
import pytest

from report_fixtures import SAMPLE
from vdr.errors import AlignmentError, InputError
from vdr.experiment.samples import fuse_samples, is_samples_file, load_sample_variant, spread
from vdr.io import load_queries
from vdr.results import Results
from vdr.types import Run


def _texts(name):
    return {json.loads(x)["_id"]: json.loads(x)["text"] for x in (SAMPLE / f"rewrites-{name}.jsonl").read_text().splitlines()}


def _write_samples(path, per_query):
    path.write_text("".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in per_query.items()), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def results(sample_corpus, tmp_path_factory):
    """keywords; ``same``: 3 identical samples of the keyword rewrites; ``rl``: keywords,
    conversational and keywords without their first word."""
    from vdr.experiment.evaluation import evaluate

    d = tmp_path_factory.mktemp("samples")
    kw, cv = _texts("keywords"), _texts("conversational")
    same = _write_samples(d / "same.jsonl", {q: [t, t, t] for q, t in kw.items()})
    rl = _write_samples(d / "rl.jsonl", {q: [t, cv[q], " ".join(t.split()[1:]) or t] for q, t in kw.items()})
    res = evaluate(sample_corpus, queries=SAMPLE / "queries.jsonl", qrels=SAMPLE / "qrels.tsv", out=d / "out", backends="lexical",
                   rewrites={"keywords": SAMPLE / "rewrites-keywords.jsonl", "same": same, "rl": rl}, progress=False,
                   n_permutations=2000, n_bootstrap=2000)
    return res, d


def test_identical_samples_give_the_single_sample_result(results):
    res, _ = results
    kw, same = res.run("lexical", "keywords"), res.run("lexical", "same")
    for m in kw.metrics.values:
        np.testing.assert_array_equal(same.metrics.values[m], kw.metrics.values[m])
        np.testing.assert_array_equal(res.run("lexical", "same.best-of-3").metrics.values[m], kw.metrics.values[m])
    c_kw, c_same = res.comparison("lexical", "keywords"), res.comparison("lexical", "same")
    assert (c_same.delta, c_same.p_value, c_same.ci95, c_same.wins, c_same.losses) == (c_kw.delta, c_kw.p_value, c_kw.ci95, c_kw.wins,
                                                                                       c_kw.losses)
    rec = res.samples["same"]["backends"]["lexical"]
    s = rec["spread"]["ndcg@3"]
    assert s["sd"] == 0.0 and s["ci95"] == [s["mean"], s["mean"]] and s["per_sample"] == [kw.metrics.aggregate["ndcg@3"]] * 3
    assert rec["disagreement"]["share"] == 0.0 and rec["disagreement"]["queries"] == 0
    fused, single = res.ranking("lexical", "same.rrf"), res.ranking("lexical", "keywords")
    assert all([d for d, _ in fused.ranked(q)] == [d for d, _ in single.ranked(q)] for q in single)
    for m in (m for m in kw.metrics.values if not m.startswith("ties@")):  # the single run's ranking: its metrics (not its ties)
        np.testing.assert_array_equal(res.run("lexical", "same.rrf").metrics.values[m], kw.metrics.values[m])


def test_mean_row_is_the_mean_of_the_samples_and_the_oracle_their_best(results):
    res, _ = results
    df = res.to_pandas("samples")
    rl = df[(df.variant == "rl") & (df.backend == "lexical")]
    assert sorted(rl["sample"].unique()) == [1, 2, 3]
    for m in ("ndcg@3", "recall@10"):
        wide = rl[rl.metric == m].pivot(index="query_id", columns="sample", values="value").loc[res.query_ids]
        np.testing.assert_allclose(res.values("lexical", "rl", m), wide.mean(axis=1).to_numpy(), rtol=0, atol=1e-15)
        best = wide.to_numpy()[np.arange(len(wide)), wide[[1, 2, 3]].to_numpy().argmax(axis=1) if m == "ndcg@3" else
                               rl[rl.metric == "ndcg@3"].pivot(index="query_id", columns="sample", values="value").loc[res.query_ids]
                               .to_numpy().argmax(axis=1)]
        np.testing.assert_array_equal(res.values("lexical", "rl.best-of-3", m), best)
    s = res.samples["rl"]["backends"]["lexical"]["spread"]["ndcg@3"]
    per = rl[rl.metric == "ndcg@3"].groupby("sample")["value"].mean().tolist()
    np.testing.assert_allclose(s["per_sample"], per)
    assert s["sd"] > 0 and s["ci95"][0] < s["mean"] < s["ci95"][1]
    d = res.samples["rl"]["backends"]["lexical"]["disagreement"]
    assert d["metric"] == "hit@3" and 0 < d["queries"] < d["num_queries"] == len(res.query_ids)


def test_holm_family_one_test_per_reported_system_oracle_never_tested(results):
    res, _ = results
    fam = res.comparison("lexical", "rl").holm_family
    systems = sorted({lab.split(":")[0] for lab in fam})
    assert systems == ["keywords", "rl", "rl.rrf", "same", "same.rrf"]
    assert len(fam) == len(systems) * len(res.compared_metrics)
    assert res.comparison("lexical", "rl.best-of-3") is None and "rl.best-of-3" not in "".join(res.comparison("lexical", "rl", "hit@3").holm_family)
    assert not any("best-of" in v for v in res.verdicts()) and not any(".s1" in lab for lab in fam)
    table = res.table()
    assert "rl (mean of 3 samples, sd " in table and "rl.best-of-3 (oracle upper bound, not tested)" in table
    assert "samples disagree on hit@3" in table and "rl.s1" not in table


def test_results_json_round_trip_and_run_files(results):
    res, d = results
    doc = json.loads((d / "out" / "results.json").read_text())
    assert doc["samples"]["rl"]["n"] == 3 and doc["samples"]["rl"]["members"] == ["rl.s1", "rl.s2", "rl.s3"]
    assert {r["variant"] for r in doc["sample_runs"]} == {f"{v}.s{i}" for v in ("rl", "same") for i in (1, 2, 3)}
    assert [r["variant"] for r in doc["runs"]] == ["original", "keywords", "same", "same.rrf", "same.best-of-3", "rl", "rl.rrf",
                                                   "rl.best-of-3"]
    assert (d / "out" / "runs" / "lexical.rl.s2.trec").is_file() and (d / "out" / "runs" / "lexical.rl.rrf.trec").is_file()
    back = Results.load(d / "out")
    assert back.samples == json.loads(json.dumps(res.samples)) and len(back.sample_runs) == 6
    assert back.table() == res.table()
    back.save(d / "copy")
    assert (d / "copy" / "runs" / "lexical.rl.s3.trec").read_text() == (d / "out" / "runs" / "lexical.rl.s3.trec").read_text()


def test_rrf_fusion_equals_ranx(results):
    """ranx.fuse(method="rrf") with its defaults (k 60, 1-based ranks): the same scores and order.
    ranx orders TIED scores by numba's (unstable) argsort, vdr by trec_eval's rule; RRF reads ranks
    only, so the sample runs are given to both as their trec_eval ranks (score -rank, no ties)."""
    ranx = pytest.importorskip("ranx")
    res, _ = results
    members = [r.ranking for r in res.sample_runs if r.variant.startswith("rl.s")]
    by_rank = [Run({q: {d: -float(i) for i, (d, _) in enumerate(r.ranked(q))} for q in r}) for r in members]
    ours = fuse_samples(members)
    assert {q: dict(ours[q]) for q in ours} == {q: dict(x) for q, x in fuse_samples(by_rank).items()}  # ranks are all RRF reads
    theirs = ranx.fuse([ranx.Run({q: dict(r[q]) for q in r}) for r in by_rank], method="rrf").to_dict()
    assert set(theirs) == set(ours)
    for q in ours:
        assert set(theirs[q]) == set(ours[q])
        assert all(abs(theirs[q][x] - ours[q][x]) < 1e-15 for x in ours[q])
        assert [x for x, _ in Run({q: dict(theirs[q])}).ranked(q)] == [x for x, _ in ours.ranked(q)]
    stored = res.ranking("lexical", "rl.rrf")
    assert all(stored.ranked(q) == ours.ranked(q)[:100] for q in stored)


def test_samples_files_are_checked_loudly(tmp_path):
    orig = load_queries(SAMPLE / "queries.jsonl")
    ids = list(orig.ids())
    good = {q: ["a b", "c d"] for q in ids}
    assert is_samples_file(_write_samples(tmp_path / "ok.jsonl", good))
    assert not is_samples_file(SAMPLE / "rewrites-keywords.jsonl")
    sets = load_sample_variant(tmp_path / "ok.jsonl", orig, "rl")
    assert [s.name for s in sets] == ["rl.s1", "rl.s2"] and sets[1][ids[0]].text == "c d"
    bad = dict(good, **{ids[3]: ["only one"]})
    with pytest.raises(InputError, match=r"1 samples where the first line has 2") as e:
        load_sample_variant(_write_samples(tmp_path / "n.jsonl", bad), orig, "rl")
    assert e.value.line == 4 and ids[3] in str(e.value)
    with pytest.raises(InputError, match="sample 2 is empty"):
        load_sample_variant(_write_samples(tmp_path / "e.jsonl", dict(good, **{ids[0]: ["x", " "]})), orig, "rl")
    with pytest.raises(AlignmentError, match="1 original id"):
        load_sample_variant(_write_samples(tmp_path / "m.jsonl", {q: good[q] for q in ids[1:]}), orig, "rl")
    with pytest.raises(InputError, match="must be a string|non-string|text"):  # an older reader refuses the file loudly
        load_queries(tmp_path / "ok.jsonl")
    assert spread([0.5]) == {"per_sample": [0.5], "mean": 0.5, "sd": None, "ci95": None}


def test_name_clash_refused(sample_corpus, tmp_path):
    from vdr.experiment.inputs import load_inputs

    kw = _texts("keywords")
    f = _write_samples(tmp_path / "rl.jsonl", {q: [t, t] for q, t in kw.items()})
    with pytest.raises(InputError, match=r"rl\.rrf"):
        load_inputs(sample_corpus, queries=SAMPLE / "queries.jsonl", qrels=SAMPLE / "qrels.tsv",
                    rewrites={"rl.rrf": SAMPLE / "rewrites-keywords.jsonl", "rl": f})
    inputs = load_inputs(sample_corpus, queries=SAMPLE / "queries.jsonl", qrels=SAMPLE / "qrels.tsv",
                         rewrites={"rl": f, "kw": SAMPLE / "rewrites-keywords.jsonl"})
    assert list(inputs.variants) == ["original", "rl.s1", "rl.s2", "kw"] and inputs.samples["rl"].n == 2


def test_rewrite_samples_writes_one_list_file_and_reuses_the_cache(tmp_path):
    from judge_sim import SimJudge  # noqa: F401
    from test_rewrite import QUERIES, SimRewriter, write_queries
    from vdr.cli import main
    from vdr.rewrite import rewrite, rewrite_samples

    sim = SimRewriter()
    try:
        write_queries(tmp_path / "q.jsonl", QUERIES)
        common = dict(template="conversational", endpoint=sim.url, model="m", temperature=0.7, timeout=10, backoff=0.01,
                      cache=tmp_path / "c.jsonl")
        for i in range(2):  # --sample 0, --sample 1 first
            assert rewrite(tmp_path / "q.jsonl", out=tmp_path / f"one{i}.jsonl", sample=i, **common).ok
        hits = sim.hits
        r = rewrite_samples(tmp_path / "q.jsonl", out=tmp_path / "rl.jsonl", n=3, **common)
        assert r.ok and [s.cached for s in r.samples] == [3, 3, 0] and sim.hits == hits + 3
        lines = [json.loads(x) for x in (tmp_path / "rl.jsonl").read_text().splitlines()]
        assert lines == [{"_id": q, "text": [f"{t} standalone"] * 3} for q, t, _ in QUERIES]
        assert (tmp_path / "rl.sample2.jsonl").is_file() and is_samples_file(tmp_path / "rl.jsonl")
        args = ["rewrite", str(tmp_path / "q.jsonl"), "--endpoint", sim.url, "--model", "m", "--temperature", "0.7",
                "--cache", str(tmp_path / "c.jsonl"), "--out", str(tmp_path / "cli.jsonl")]
        assert main(args + ["--samples", "3"]) == 0 and sim.hits == hits + 3  # all cached
        assert (tmp_path / "cli.jsonl").read_text() == (tmp_path / "rl.jsonl").read_text()
        assert main(args + ["--samples", "2", "--sample", "1"]) == 2
        with pytest.raises(InputError, match="temperature"):
            rewrite_samples(tmp_path / "q.jsonl", out=tmp_path / "t0.jsonl", n=2, **dict(common, temperature=0.0))
    finally:
        sim.close()
