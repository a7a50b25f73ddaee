"""vdr.judge against a local simulated judge (real openai client, HTTP on 127.0.0.1)."""

import numpy as np
import pytest
from scipy.stats import kendalltau

from judge_sim import SimJudge, dead_endpoint
from vdr.judge import (
    BudgetExhausted,
    JudgeCache,
    JudgeCallError,
    JudgeClient,
    JudgeConfigError,
    JudgeOutputError,
    Schedule,
    TextPages,
    judge_pools,
)

QUERIES = [f"q{j}" for j in range(6)]
OFFSETS = dict(zip(QUERIES, [-2.0, -1.0, 0.0, 1.0, 2.0, 0.5]))
SCALES = dict(zip(QUERIES, [0.7, 1.0, 1.3, 1.5, 0.9, 1.1]))
POOL = 20


def world(seed=0, zero=False):
    rng = np.random.default_rng(seed)
    pools = {q: [f"{q}-p{i}" for i in range(POOL)] for q in QUERIES}
    latent = {(q, d): (0.0 if zero else float(rng.normal(0, 1.2))) for q in QUERIES for d in pools[q]}
    texts = {d: f"page-id: {d}\nSome page text." for q in QUERIES for d in pools[q]}
    queries = {q: f"{q} what does the report say?" for q in QUERIES}
    return pools, latent, TextPages(texts), queries


@pytest.fixture
def sim_factory():
    made = []

    def make(latent, **kw):
        s = SimJudge(latent, **kw)
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()


def client(sim, **kw):
    kw.setdefault("concurrency", 4)
    return JudgeClient(sim.url, "sim-judge", modality="text", backoff=0.01, timeout=10, **kw)


def test_recovers_order_and_cross_query_offsets(sim_factory, tmp_path):
    pools, latent, pages, queries = world()
    sim = sim_factory(latent, offsets=OFFSETS, scale=SCALES, noise=0.5, bias=0.5)
    cal, det = judge_pools(pools, queries, pages, client(sim, cache=tmp_path / "c.jsonl"))
    # within-query order: Kendall tau of Stage A scores vs latent relevance, every query > 0.75
    taus = [kendalltau([det["theta_bt"][q][d] for d in pools[q]], [latent[(q, d)] for d in pools[q]])[0] for q in QUERIES]
    assert min(taus) > 0.75, taus
    # calibration keeps the order (tau_j > 0) and recovers the known offsets across queries
    assert all(t > 0 for t in cal.tau.values())
    est = [np.mean(list(cal.theta(q).values())) for q in QUERIES]
    true = [OFFSETS[q] + np.mean([latent[(q, d)] for d in pools[q]]) for q in QUERIES]
    assert np.corrcoef(est, true)[0, 1] > 0.95, (est, true)
    # all pages on one scale: pooled correlation of calibrated ability with the global latent
    th = [cal.theta(q)[d] for q in QUERIES for d in pools[q]]
    glob = [latent[(q, d)] + OFFSETS[q] for q in QUERIES for d in pools[q]]
    assert np.corrcoef(th, glob)[0, 1] > 0.9
    # the raw Stage A scores alone have no cross-query information (mean 0 per query)
    assert max(abs(np.mean(list(det["theta_bt"][q].values()))) for q in QUERIES) < 1e-9
    # window counts as scheduled: 20 pages, w=10 -> 7 random + 4 stratified (each x2), 13 rubric
    assert det["windows"] == {"tournament.random": 6 * 14, "rubric.random": 6 * 13, "tournament.stratified": 6 * 8}
    assert sim.hits == 6 * (14 + 13 + 8)


def test_reversed_windows_cancel_position_bias(sim_factory):
    pools, latent, pages, queries = world(zero=True)
    sim = sim_factory(latent, noise=0.0, bias=2.0)  # every page equal: any spread is position bias
    _, with_rev = judge_pools(pools, queries, pages, client(sim))
    _, without = judge_pools(pools, queries, pages, client(sim), Schedule.for_modality("text", reverse=False))
    spread = lambda det: max(abs(v) for q in QUERIES for v in det["theta_bt"][q].values())  # noqa: E731
    assert spread(with_rev) < 1e-3
    assert spread(without) > 0.3
    # with real relevance, noise and a strong bias, reversal gives a better order
    pools, latent, pages, queries = world(seed=5)
    sim = sim_factory(latent, noise=0.3, bias=2.5)
    kt = {}
    for name, sch in (("rev", None), ("norev", Schedule.for_modality("text", reverse=False))):
        _, det = judge_pools(pools, queries, pages, client(sim), sch)
        kt[name] = np.mean([kendalltau([det["theta_bt"][q][d] for d in pools[q]], [latent[(q, d)] for d in pools[q]])[0] for q in QUERIES])
    assert kt["rev"] > 0.8 and kt["rev"] > kt["norev"], kt


def test_cache_makes_rerun_free(sim_factory, tmp_path):
    pools, latent, pages, queries = world()
    pools = {q: pools[q] for q in QUERIES[:2]}
    sim = sim_factory(latent, offsets=OFFSETS, noise=0.5)
    cal1, _ = judge_pools(pools, queries, pages, client(sim, cache=tmp_path / "c.jsonl"))
    hits = sim.hits
    c2 = client(sim, cache=tmp_path / "c.jsonl")
    cal2, _ = judge_pools(pools, queries, pages, c2)
    assert sim.hits == hits and c2.stats.calls == 0 and c2.stats.cached == hits
    assert cal1.theta("q0") == cal2.theta("q0")
    # another judge model or an edited page asks again
    c3 = JudgeClient(sim.url, "other-judge", modality="text", cache=tmp_path / "c.jsonl")
    judge_pools({"q0": pools["q0"]}, queries, pages, c3)
    assert c3.stats.calls > 0


@pytest.mark.parametrize("mode,error,needle", [
    ("malformed", JudgeOutputError, "not valid: not JSON"),
    ("http500", JudgeCallError, "HTTP 500"),
    ("slow", JudgeCallError, "timed out"),
])
def test_failures_are_clear_and_lose_nothing(sim_factory, tmp_path, mode, error, needle):
    pools, latent, pages, queries = world()
    pools = {"q0": pools["q0"]}
    sim = sim_factory(latent, noise=0.5)
    sim.mode, sim.ok_first = mode, 5
    c = JudgeClient(sim.url, "sim-judge", modality="text", cache=tmp_path / "c.jsonl", concurrency=1,
                    backoff=0.01, max_retries=1, timeout=0.5, api_key="sk-SECRET-abc")
    with pytest.raises(error) as ei:
        judge_pools(pools, queries, pages, c)
    msg = str(ei.value)
    assert needle in msg and "query 'q0'" in msg and "window" in msg and "rerun to resume" in msg
    assert "sk-SECRET-abc" not in msg
    assert len(JudgeCache(tmp_path / "c.jsonl")) == 5  # the five good answers are kept
    sim.mode = "ok"
    hits = sim.hits
    c2 = client(sim, cache=tmp_path / "c.jsonl")
    judge_pools(pools, queries, pages, c2)
    assert c2.stats.cached == 5 and c2.stats.answered == sim.hits - hits


def test_budget_stops_cleanly_then_resumes(sim_factory, tmp_path):
    pools, latent, pages, queries = world()
    pools = {"q1": pools["q1"]}
    sim = sim_factory(latent, noise=0.5)
    with pytest.raises(BudgetExhausted, match="budget of 7"):
        judge_pools(pools, queries, pages, client(sim, cache=tmp_path / "c.jsonl", budget=7, concurrency=2))
    assert sim.hits == 7 and len(JudgeCache(tmp_path / "c.jsonl")) == 7
    c = client(sim, cache=tmp_path / "c.jsonl")
    judge_pools(pools, queries, pages, c)
    assert c.stats.cached == 7 and sim.hits == 7 + c.stats.calls


def test_no_endpoint_is_a_clear_error():
    with pytest.raises(JudgeConfigError, match="no judge endpoint.*no RCP-nDCG was computed"):
        JudgeClient(None, "m")
    with pytest.raises(JudgeConfigError, match="no judge model"):
        JudgeClient("http://127.0.0.1:9/v1", None)


def test_budget_spent_on_retries_reports_the_endpoint_failure(tmp_path):
    # a dead endpoint with a small budget: the connection failure is the cause, not "rerun to resume"
    from vdr.judge.client import JudgeCallError

    pools, latent, pages, queries = world()
    c = JudgeClient(dead_endpoint(), "m", modality="text", api_key="k", cache=tmp_path / "c.jsonl",
                    budget=2, max_retries=5, backoff=0.001, timeout=2, concurrency=1)
    with pytest.raises(JudgeCallError, match=r"connection failed.*ran out while retrying"):
        judge_pools({"q1": pools["q1"]}, queries, pages, c)
