"""vdr.rewards.rewarder: rewards are evaluate_run's per-query values; rank incentive; extraction; adapters."""

import json
import math

import numpy as np
import pytest

from rewards_fixtures import make_passages, write_corpus
from vdr.errors import InputError
from vdr.metrics import evaluate_run
from vdr.rewards.rewarder import (
    CompletionReward,
    Extractor,
    RankIncentive,
    Rewarder,
    RewardError,
    UnknownQueryError,
    build_backend,
    cut_words,
    parse_reward_metric,
)

METRICS = ["ndcg@3", "ndcg@10", "hit@1", "hit@5", "mrr@10", "recall@10", "rank_incentive"]


@pytest.fixture(scope="module")
def world():
    texts, queries, qrels = make_passages()
    backend = build_backend("lexical", texts)
    return texts, queries, qrels, backend


def rewarder(world, **kw):
    texts, queries, qrels, backend = world
    return Rewarder(backend, qrels, name="lexical", **kw)


REWRITES = {
    "q0": "volcano lava eruption",  # on topic
    "q1": "violin",
    "q2": "tell me about it",  # no topic term
    "q3": "bitcoin ledger mining blockchain",
    "q4": "pharaoh glacier",  # half off topic
    "q5": "the of and",  # stopwords only: empty ranking
    "q6": "telescope",
    "q7": "harvest grain wheat farmer",
}


# ------------------------------------------------------------------ rank incentive


def test_rank_incentive_goldens():
    f = RankIncentive()
    # 2 - (r - 1)/9 on [1, 10]; 10/9 - r/90 on (10, 100]; 0 beyond or not retrieved
    assert f(1) == 2.0
    assert f(4) == pytest.approx(2 - 3 / 9, abs=1e-15)
    assert f(10) == pytest.approx(1.0, abs=1e-15)
    assert f(11) == pytest.approx(10 / 9 - 11 / 90, abs=1e-15)
    assert f(55) == pytest.approx(0.5, abs=1e-15)
    assert f(100) == pytest.approx(0.0, abs=1e-15)
    assert f(101) == 0.0 and f(-1) == 0.0 and f(0) == 0.0
    g = RankIncentive(((1, 1.0), (5, 0.0)))
    assert g(3) == 0.5 and g(6) == 0.0 and g.max_rank == 5
    with pytest.raises(InputError):
        RankIncentive(((5, 1.0), (1, 0.0)))
    with pytest.raises(InputError):
        RankIncentive(((1, float("nan")), (5, 0.0)))


def test_parse_reward_metric():
    assert parse_reward_metric("rank_incentive") == "rank_incentive"
    assert str(parse_reward_metric("NDCG@3")) == "ndcg@3"
    with pytest.raises(InputError, match="rank_incentive"):
        parse_reward_metric("ndgc@3")


def test_cut_words_keeps_the_tail_by_default():
    text = " ".join(f"w{i}" for i in range(10))
    assert cut_words(text, 3) == ("w7 w8 w9", True)
    assert cut_words(text, 3, keep="head") == ("w0 w1 w2", True)
    assert cut_words(text, 10) == (text, False)
    assert cut_words(text, None) == (text, False)


# ------------------------------------------------------------------ reward == evaluate


def test_reward_equals_evaluate_run_per_query(world):
    texts, queries, qrels, backend = world
    rw = rewarder(world)
    ids = list(REWRITES)
    batch = rw.evaluate(ids, [REWRITES[q] for q in ids], METRICS)
    # the path of `vdr evaluate`: one run of the rewrite variant, keyed by query id, then evaluate_run
    run = backend.search(REWRITES, 100)
    res = evaluate_run(qrels, run, [m for m in METRICS if m != "rank_incentive"]).per_query
    for n, q in enumerate(ids):
        for m in METRICS:
            if m == "rank_incentive":
                continue
            assert batch.values[m][n] == res[q][m], (q, m)
        ranked = [d for d, _ in run.ranked(q)]
        gold = [i + 1 for i, d in enumerate(ranked) if qrels[q].get(d, 0) >= 1]
        assert batch.ranks[n] == (gold[0] if gold else -1)
        assert batch.values["rank_incentive"][n] == RankIncentive()(batch.ranks[n])
    # the values are not trivial: some hit, some miss
    assert 0 < sum(batch.values["ndcg@3"]) < len(ids)
    assert batch.values["ndcg@3"][ids.index("q5")] == 0.0 and batch.ranks[ids.index("q5")] == -1


def test_rollouts_of_one_query_are_scored_per_position(world):
    texts, queries, qrels, backend = world
    rw = rewarder(world)
    rollouts = ["volcano lava", "glacier ice", "", "magma eruption volcano", "volcano lava"]
    got = rw.evaluate(["q0"] * len(rollouts), rollouts, ["ndcg@3", "mrr@10"])
    for n, text in enumerate(rollouts):
        if not text:
            assert got.values["ndcg@3"][n] == 0.0 and got.empty[n]
            continue
        alone = evaluate_run({"q0": qrels["q0"]}, backend.search({"q0": text}, 100), ["ndcg@3", "mrr@10"], allow_unjudged=True).per_query["q0"]
        assert got.values["ndcg@3"][n] == alone["ndcg@3"]
        assert got.values["mrr@10"][n] == alone["mrr@10"]
    assert got.values["ndcg@3"][0] == got.values["ndcg@3"][4] > got.values["ndcg@3"][1]
    assert rw.stats["searched"] == 3  # the duplicate and the empty rewrite are not searched


def _evaluate_rewrites(world, tmp_path, backend: str, **options):
    """Write ``world`` as a corpus folder and :data:`REWRITES` as variant ``rw``, and ``vdr.evaluate``
    them with ``backend`` at k = 3, 10; (the corpus folder, the evaluation result)."""
    import vdr

    texts, queries, qrels, _lexical = world
    corpus = write_corpus(tmp_path / "corpus", texts, queries, qrels)
    with open(tmp_path / "rw.jsonl", "w") as f:
        for q, t in REWRITES.items():
            f.write(json.dumps({"_id": q, "text": t}) + "\n")
    res = vdr.evaluate(corpus, queries=corpus / "queries.jsonl", qrels=corpus / "qrels.tsv", rewrites={"rw": tmp_path / "rw.jsonl"},
                       out=tmp_path / "res", backends=backend, k=[3, 10], progress=False, n_permutations=200, n_bootstrap=200,
                       **options)
    return corpus, res


def _assert_rewards_equal_evaluate(rw, per_query) -> None:
    """``rw``'s rewards of :data:`REWRITES` equal evaluate's per-query values, exactly, on three metrics."""
    ids = list(REWRITES)
    for m in ("ndcg@3", "ndcg@10", "recall@10"):
        assert rw.score(ids, [REWRITES[q] for q in ids], m) == [per_query[q][m] for q in ids], m


def test_reward_equals_vdr_evaluate_end_to_end(world, tmp_path):
    import vdr

    corpus, res = _evaluate_rewrites(world, tmp_path, "lexical")
    rw = Rewarder(build_backend("lexical", vdr.Corpus.load(corpus).texts()), vdr.load_qrels(corpus / "qrels.tsv"))
    _assert_rewards_equal_evaluate(rw, res.run("lexical", "rw").metrics.per_query)


@pytest.mark.model
def test_semantic_reward_equals_vdr_evaluate_whatever_the_cache(world, tmp_path):
    """evaluate keeps a cache (CORPUS/.vdr-cache), the reward server has none: both embed queries
    with the same runtime (vdr.retrieve.semantic query_runtime), so the values are equal exactly."""
    import vdr

    corpus, res = _evaluate_rewrites(world, tmp_path, "semantic", device="cpu")
    backend = build_backend("semantic", vdr.Corpus.load(corpus).texts(), {"device": "cpu"})
    assert backend.cache_dir is None
    assert backend.config["query_runtime"] == res.config["backend_config"]["semantic"]["query_runtime"]
    rw = Rewarder(backend, vdr.load_qrels(corpus / "qrels.tsv"), name="semantic")
    _assert_rewards_equal_evaluate(rw, res.run("semantic", "rw").metrics.per_query)


# ------------------------------------------------------------------ edge cases


def test_empty_and_overlong_rewrites_are_handled_and_counted(world):
    rw = rewarder(world, max_query_tokens=20)
    noise = " ".join(["qwxz"] * 30)  # a word in no passage
    texts = [None, "   ", noise + " volcano lava eruption", "volcano lava eruption " + noise]
    got = rw.evaluate(["q0"] * 4, texts)
    assert got.empty == [True, True, False, False]
    assert got.truncated == [False, False, True, True]
    assert rw.stats["empty"] == 2 and rw.stats["truncated"] == 2
    # the cut keeps the last 20 words: the question at the end survives, at the start it is lost
    tail = rw.score(["q0"], [" ".join((noise + " volcano lava eruption").split()[-20:])])[0]
    assert got.rewards[2] == tail > 0.0
    assert got.rewards[3] == 0.0
    head = rewarder(world, max_query_tokens=20, keep="head")
    assert head.score(["q0"], ["volcano lava eruption " + noise])[0] > 0.0


def test_bad_input_is_refused(world):
    rw = rewarder(world)
    with pytest.raises(UnknownQueryError) as e:
        rw.score(["q0", "nope", "q1", "nope2"], ["a", "b", "c", "d"])
    assert e.value.ids == ["nope", "nope2"] and "'nope'" in str(e.value)
    for asked, reason in (("q01", "zero padding"), ("Q3", "letter case"), (" q4", "surrounding whitespace")):  # issue 34.1
        with pytest.raises(UnknownQueryError, match=rf"1 match a qrels query id only after normalisation: '{asked}' \(request\)"
                                                    rf" ~ '{asked.strip().lower().replace('q0', 'q')}' \(qrels\) \[{reason}\]"):
            rw.score(["q0", asked], ["a", "b"])
    with pytest.raises(InputError, match="2 query ids but 1 rewrites"):
        rw.score(["q0", "q1"], ["a"])
    with pytest.raises(InputError, match="string or null"):
        rw.score(["q0"], [3])
    with pytest.raises(InputError, match="depth >= 200"):
        rw.score(["q0"], ["a"], "ndcg@200")
    with pytest.raises(InputError, match="depth >= 100"):
        rewarder(world, depth=50, metric="rank_incentive")
    with pytest.raises(InputError):
        rewarder(world, keep="middle")


def test_lru_cache_is_bounded_and_hit(world):
    rw = rewarder(world, cache_size=2)
    first = rw.evaluate(["q0", "q1"], ["volcano", "violin"])
    again = rw.evaluate(["q0", "q1"], ["volcano", "violin"])
    assert first.rewards == again.rewards and again.cached == [True, True] and rw.stats["cache_hits"] == 2
    rw.score(["q2"], ["glacier"])  # evicts (q0, volcano), the least recently used
    assert rw.cache_info() == {"entries": 2, "max_entries": 2}
    assert rw.evaluate(["q0"], ["volcano"]).cached == [False]
    off = rewarder(world, cache_size=0)
    off.score(["q0"], ["volcano"])
    assert off.evaluate(["q0"], ["volcano"]).cached == [False] and off.cache_info()["entries"] == 0


def test_failed_retrieval_names_the_query_ids(world):
    class Broken:
        def search(self, texts, k):
            raise RuntimeError("index gone")

    rw = Rewarder(Broken(), world[2])
    with pytest.raises(RewardError, match=r"'q1'.*index gone"):
        rw.score(["q1"], ["violin"])
    assert rw.stats["failed_batches"] == 1


# ------------------------------------------------------------------ extraction


@pytest.mark.parametrize(
    "pattern, text, want",
    [
        ("plain", "  a query \n", "a query"),
        ("plain", "<think>hmm</think>\nthe query", "the query"),
        ("plain", "<think>still thinking", None),
        ("rewrite", "<think>x</think>\n<rewrite> q one </rewrite>", "q one"),
        ("rewrite", "<rewrite>first</rewrite><rewrite>second</rewrite>", "first"),
        ("rewrite", "no tags", None),
        ("answer", "blah <answer>\nmulti\nline</answer>", "multi\nline"),
        (r"QUERY: (.*)", "notes\nQUERY: the q", "the q"),
        (r"<q>(?P<rewrite>.*?)</q>(x)", "<q>named</q>x", "named"),
    ],
)
def test_extractor_patterns(pattern, text, want):
    assert Extractor(pattern).extract(text)[0] == want


def test_extractor_convsearch_format():
    ex = Extractor("rewrite", r"^<think>.*?</think>\n<rewrite>.*?</rewrite>$")
    assert ex.extract("<think>a\nb</think>\n<rewrite>q</rewrite>") == ("q", True)
    assert ex.extract("<think>a</think><rewrite>q</rewrite>") == ("q", False)  # no newline between the blocks
    assert ex.extract("<rewrite>q</rewrite>") == ("q", False)
    with pytest.raises(InputError, match="group"):
        Extractor("no group")
    with pytest.raises(InputError, match="not a valid"):
        Extractor("(unclosed")


# ------------------------------------------------------------------ adapters


def test_trl_adapter_strings_and_messages_agree(world):
    rw = rewarder(world)
    reward = CompletionReward(rw, metric="ndcg@3")
    assert reward.__name__ == "vdr_ndcg@3"
    comps = ["volcano lava", "violin symphony", "  "]
    ids = ["q0", "q1", "q1"]
    a = reward(prompts=["p"] * 3, completions=comps, query_id=ids, completion_ids=[[1]] * 3, trainer_state=object(), other=[1, 2, 3])
    b = reward(prompts=["p"] * 3, completions=[[{"role": "assistant", "content": c}] for c in comps], query_id=ids)
    c = reward(prompts=["p"] * 3, completions=[[{"role": "assistant", "content": [{"type": "text", "text": x}]}] for x in comps], query_id=ids)
    assert a == b == c == rw.score(ids, [t.strip() for t in comps])
    assert all(isinstance(x, float) for x in a) and a[2] == 0.0
    assert reward.stats["empty"] == 3  # one empty completion per call


def test_trl_adapter_contract_errors(world):
    reward = CompletionReward(rewarder(world))
    with pytest.raises(RewardError, match=r"no query-id column 'query_id'.*\['completion_ids', 'qid'\]"):
        reward(prompts=["p"], completions=["x"], qid=["q0"], completion_ids=[[1]])
    with pytest.raises(RewardError, match="3 completions but 2 query ids"):
        reward(prompts=["p"] * 3, completions=["a", "b", "c"], query_id=["q0", "q1"])
    with pytest.raises(UnknownQueryError):
        reward(prompts=["p"], completions=["a"], query_id=["zzz"])
    with pytest.raises(RewardError, match="completion 0"):
        reward(prompts=["p"], completions=[42], query_id=["q0"])


def test_convsearch_preset_penalty_replaces_the_reward(world):
    rw = rewarder(world)
    reward = CompletionReward(rw, preset="convsearch-r1")
    good = "<think>about volcanoes</think>\n<rewrite>volcano lava eruption</rewrite>"
    broken = "<think>about volcanoes</think> <rewrite>volcano lava eruption</rewrite>"
    out = reward(completions=[good, broken, "no tags at all"], query_id=["q0"] * 3)
    want = RankIncentive()(rw.evaluate(["q0"], ["volcano lava eruption"]).ranks[0])
    assert out == [want, -0.1, -0.1] and want > 1.0
    assert reward.stats["format_broken"] == 2 and reward.stats["not_extracted"] == 1
    add = CompletionReward(rw, preset="convsearch-r1", penalty_mode="add")
    assert add(completions=[broken], query_id=["q0"]) == [pytest.approx(want - 0.1, abs=1e-15)]
    rlqr = CompletionReward(rw, preset="rl-qr")
    assert rlqr(completions=["<answer>volcano lava</answer>", "volcano lava"], query_id=["q0", "q0"]) == [rw.score(["q0"], ["volcano lava"])[0], -0.1]


def test_verl_signature_matches_trl(world):
    rw = rewarder(world)
    reward = CompletionReward(rw, preset="convsearch-r1")
    comps = ["<think>t</think>\n<rewrite>violin symphony</rewrite>", "<think>t</think>\n<rewrite>lava</rewrite>"]
    ids = ["q1", "q0"]
    trl = reward(prompts=["p", "p"], completions=comps, query_id=ids)
    one = [reward.compute_score("convsearch", c, "unused", extra_info={"query_id": q, "index": 3}) for c, q in zip(comps, ids)]
    batch = reward.compute_score(["convsearch"] * 2, comps, ["g", "g"], [{"query_id": q} for q in ids])
    assert trl == one == batch and isinstance(one[0], float)
    by_gt = CompletionReward(rw, preset="convsearch-r1", verl_id="ground_truth")
    assert by_gt.compute_score("d", comps[0], "q1") == trl[0]
    with pytest.raises(RewardError, match=r"extra_info has no 'query_id' key \(got \['index'\]\)"):
        reward.compute_score("d", comps[0], "g", extra_info={"index": 1})


def test_abstain_is_explicit_and_counted_and_nan_is_refused(world):
    class Flaky:
        metric = "ndcg@3"

        def score(self, ids, rewrites, metric=None):
            if "q3" in ids:
                raise RewardError("retrieval failed for query id(s) 'q3'")
            return [0.5] * len(ids)

    strict = CompletionReward(Flaky())
    with pytest.raises(RewardError, match="'q3'"):
        strict(completions=["a", "b"], query_id=["q1", "q3"])
    lenient = CompletionReward(Flaky(), abstain=True)
    assert lenient(completions=["a", "b", "c"], query_id=["q1", "q3", "q2"]) == [0.5, None, 0.5]
    assert lenient.stats["abstained"] == 1

    class NaN:
        def score(self, ids, rewrites, metric=None):
            return [math.nan] * len(ids)

    with pytest.raises(RewardError, match="not finite"):
        CompletionReward(NaN())(completions=["a"], query_id=["q1"])

    class One:  # a broken scorer answering one value for the batch: TRL would broadcast it (all advantages 0)
        def score(self, ids, rewrites, metric=None):
            return [1.0]

    with pytest.raises(RewardError, match="returned 1 rewards for 3 completions"):
        CompletionReward(One())(completions=["a", "b", "c"], query_id=["q1", "q2", "q3"])
    with pytest.raises(RewardError, match="returned 1 rewards for 2 completions"):
        CompletionReward(One(), abstain=True).compute_score(["d", "d"], ["a", "b"], ["g", "g"], [{"query_id": "q1"}] * 2)


def test_rewards_are_deterministic_numpy_free_floats(world):
    rw = rewarder(world)
    out = rw.score(list(REWRITES), list(REWRITES.values()), "rank_incentive")
    assert all(type(x) is float for x in out) and np.isfinite(out).all()


@pytest.mark.slow
@pytest.mark.parametrize("name", ["semantic", "hybrid"])
def test_dense_and_hybrid_rewards_equal_evaluate_run(world, name):
    from vdr.retrieve.hybrid import HybridBackend
    from vdr.retrieve.semantic import DenseBackend

    texts, queries, qrels, lexical = world
    backend = build_backend(name, texts, {"device": "cpu"})
    rw = Rewarder(backend, qrels, name=name)
    ids = list(REWRITES)
    got = rw.evaluate(ids, [REWRITES[q] for q in ids], ["ndcg@3", "recall@10"])
    dense = DenseBackend(device="cpu")
    dense.index(texts)
    runs = [dense.search(REWRITES, 100)]
    if name == "hybrid":  # as `vdr evaluate` fuses: RRF of the backends' runs, top depth
        runs = [HybridBackend(rrf_k=60, top=100).fuse([lexical.search(REWRITES, 100), runs[0]], names=["lexical", "semantic"])]
    res = evaluate_run(qrels, runs[0], ["ndcg@3", "recall@10"]).per_query
    assert got.values["ndcg@3"] == [res[q]["ndcg@3"] for q in ids]
    assert got.values["recall@10"] == [res[q]["recall@10"] for q in ids]
    assert rw.config()["backend_config"]["backend"] == name


def test_multimodal_rewards_equal_evaluate_run(colqwen_dir, tmp_path):
    """The multimodal backend (tiny ColQwen2.5) through vdr.rewards.rewarder: per position, the value of
    evaluate_run on that rewrite's own search; the backend's query-vector memo stays bounded."""
    from tiny_models import make_corpus

    import vdr.rewards.rewarder as R
    from vdr.corpus import Corpus
    from vdr.types import QuerySet

    corpus = Corpus.load(make_corpus(tmp_path / "c", [(56, 56), (84, 56), (56, 84), (112, 56), (56, 112), (84, 84)]))
    backend = build_backend("multimodal", corpus, {"model": str(colqwen_dir), "device": "cpu", "store": tmp_path / "store"})
    ids = corpus.ids()
    qrels = {"a": {ids[0]: 2, ids[3]: 1}, "b": {ids[5]: 1, ids[1]: 0}}
    rw = Rewarder(backend, qrels, depth=6, name="multimodal")
    qids = ["a", "a", "b", "b", "a"]
    rewrites = ["revenue table 2023", "carbon emissions of the company", "revenue table 2023", "the quick brown fox", ""]
    got = rw.evaluate(qids, rewrites, ["ndcg@3", "recall@5", "mrr"])
    for n, (q, text) in enumerate(zip(qids, rewrites)):
        if not text:
            assert got.values["ndcg@3"][n] == 0.0 and got.ranks[n] == -1
            continue
        run = backend.search(QuerySet.from_texts({"x": text}), 6)
        want = evaluate_run({"x": qrels[q]}, run, ["ndcg@3", "recall@5", "mrr"], allow_unjudged=True).per_query["x"]
        for m in ("ndcg@3", "recall@5", "mrr"):
            assert got.values[m][n] == want[m], (n, m)
        gold = [i + 1 for i, (d, _) in enumerate(run.ranked("x")) if qrels[q].get(d, 0) >= 1]
        assert got.ranks[n] == gold[0]  # 6 pages, depth 6: a relevant page is always ranked
    assert got.values["ndcg@3"][0] != got.values["ndcg@3"][2]  # same text, other query id: other qrels
    # the query-vector cache is the backend's public, LRU-bounded one (default R.MAX_QUERY_MEMO texts)
    assert backend.query_cache_info() == {"entries": 3, "max_entries": R.MAX_QUERY_MEMO, "eviction": "lru"}
    small = build_backend("multimodal", corpus, {"model": str(colqwen_dir), "device": "cpu", "store": tmp_path / "store",
                                                 "query_cache_size": 3})
    Rewarder(small, qrels, depth=6, name="multimodal").score(["a"] * 5, [f"page {i}" for i in range(5)])
    assert list(small._query_vecs) == ["page 2", "page 3", "page 4"]  # the 3 most recent texts kept
    again = QuerySet.from_texts({"x": "page 4"}, name="again")
    assert small.search(again, 6).ranked("x") == backend.search(again, 6).ranked("x")
    assert small.report["searches"]["again"]["query_texts_encoded"] == 0  # a cached text is not encoded again
