"""vdr serve: real HTTP against uvicorn on 127.0.0.1 (free port), with httpx."""

import json
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="vdr serve needs fastapi + uvicorn (pip install 'vdr[serve]')")
httpx = pytest.importorskip("httpx")

from rewards_fixtures import free_port, make_passages, running, write_corpus  # noqa: E402
from vdr.rewards.rewarder import build_backend, CompletionReward, RemoteScorer, Rewarder, RewardError, UnknownQueryError  # noqa: E402
from vdr.rewards.serve import ServeLimits, create_app  # noqa: E402

TOKEN = "s3cret-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def world():
    texts, queries, qrels = make_passages()
    return texts, queries, qrels, build_backend("lexical", texts)


@pytest.fixture(scope="module")
def server(world):
    texts, queries, qrels, backend = world
    rw = Rewarder(backend, qrels, name="lexical", cache_size=1000)
    app = create_app(rw, token=TOKEN, limits=ServeLimits(max_body_bytes=20_000, max_items=64, batch_wait_ms=5.0))
    with running(app) as url:
        yield url, rw


def post(url, path, body, headers=AUTH, **kw):
    return httpx.post(url + path, json=body, headers=headers, timeout=30, **kw)


def test_reward_values_and_health(server, world):
    url, rw = server
    ids, rws = ["q0", "q1", "q0", "q2"], ["volcano lava", "violin", "", "ice glacier arctic"]
    r = post(url, "/reward", {"query_ids": ids, "rewrites": rws, "metric": "ndcg@3"})
    assert r.status_code == 200, r.text
    local = Rewarder(world[3], world[2])
    want = local.evaluate(ids, rws, ["ndcg@3"])
    assert r.json()["rewards"] == want.rewards and r.json()["ranks"] == want.ranks
    assert r.json()["counts"]["empty"] == 1
    ri = post(url, "/reward", {"query_ids": ids, "rewrites": rws, "metric": "rank_incentive"}).json()
    assert ri["rewards"] == local.score(ids, rws, "rank_incentive") and ri["metric"] == "rank_incentive"
    h = httpx.get(url + "/health").json()
    assert h["status"] == "ok" and h["metric"] == "ndcg@3" and h["num_queries"] == len(world[2]) and h["auth"] is True
    assert TOKEN not in json.dumps(h)


def test_cache_hits_are_reported(server):
    url, rw = server
    body = {"query_ids": ["q3", "q4"], "rewrites": ["bitcoin ledger zeta", "pharaoh tomb zeta"]}
    first = post(url, "/reward", body).json()
    second = post(url, "/reward", body).json()
    assert first["counts"]["cached"] == 0 and second["counts"]["cached"] == 2
    assert first["rewards"] == second["rewards"]


@pytest.mark.parametrize(
    "raw, status, message",
    [
        (b"{not json", 400, "not valid JSON"),
        (b"[1, 2]", 400, "must be a JSON object"),
        (b'{"rewrites": ["a"]}', 400, "missing field 'query_ids'"),
        (b'{"query_ids": "q0", "rewrites": ["a"]}', 400, "'query_ids' must be a list"),
        (b'{"query_ids": ["q0"], "rewrites": [5]}', 400, "rewrites[0] must be a string or null"),
        (b'{"query_ids": [true], "rewrites": ["a"]}', 400, "query_ids[0] must be a string or an integer"),
        (b'{"query_ids": ["q0", "q1"], "rewrites": ["a"]}', 400, "2 query_ids but 1 rewrites"),
        (b'{"query_ids": ["q0"], "rewrites": ["a"], "metric": "ndgc@3"}', 400, "unknown metric"),
        (b'{"query_ids": ["q0"], "rewrites": ["a"], "metric": "ndcg@500"}', 400, "depth >= 500"),
        (b'{"query_ids": ["q0", "zz9", "q1"], "rewrites": ["a", "b", "c"]}', 422, "'zz9'"),
    ],
)
def test_malformed_requests_get_clear_errors(server, raw, status, message):
    url, _ = server
    r = httpx.post(url + "/reward", content=raw, headers={**AUTH, "Content-Type": "application/json"})
    assert r.status_code == status, r.text
    assert message in r.json()["error"]
    if status == 422:
        assert r.json()["unknown_query_ids"] == ["zz9"]
    assert httpx.get(url + "/health").status_code == 200  # still alive


def test_bodies_and_batches_are_bounded(server):
    url, _ = server
    big = {"query_ids": ["q0"], "rewrites": ["x" * 30_000]}
    r = post(url, "/reward", big)
    assert r.status_code == 413 and "20000 bytes" in r.json()["error"]

    def chunks():  # no Content-Length: chunked transfer
        for _ in range(30):
            yield b"x" * 1000

    r = httpx.post(url + "/reward", content=chunks(), headers=AUTH)
    assert r.status_code == 413
    r = post(url, "/reward", {"query_ids": ["q0"] * 65, "rewrites": ["a"] * 65})
    assert r.status_code == 413 and "at most 64" in r.json()["error"]
    assert httpx.get(url + "/health").status_code == 200


def test_bearer_token(server):
    url, _ = server
    body = {"query_ids": ["q0"], "rewrites": ["volcano"]}
    assert post(url, "/reward", body, headers={}).status_code == 401
    assert post(url, "/reward", body, headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert post(url, "/retrieve", {"queries": ["a"], "query_ids": ["q0"]}, headers={}).status_code == 401
    assert post(url, "/reward", body).status_code == 200


def test_retrieve_is_convsearch_compatible_and_per_position(server, world):
    url, _ = server
    qs = ["volcano lava eruption", "glacier", "", "magma"]
    ids = ["q0", "q0", "q0", "q0"]  # GRPO rollouts share the query id
    r = post(url, "/retrieve", {"queries": qs, "query_ids": ids, "topk": 100, "return_scores": False})
    assert r.status_code == 200, r.text
    local = Rewarder(world[3], world[2]).evaluate(ids, qs)
    assert r.json() == {"result": local.ranks}
    assert r.json()["result"][0] != r.json()["result"][1]
    r = post(url, "/retrieve", {"queries": qs, "query_ids": ids, "topk": 2, "return_scores": True}).json()
    ranks, scores = r["result"]
    assert ranks == [k if 0 < k <= 2 else -1 for k in local.ranks]
    assert [len(s) for s in scores] == [min(2, n) for n in (len(world[3].search({"x": q}, 100)["x"]) if q else 0 for q in qs)]
    assert all(a >= b for s in scores for a, b in zip(s, s[1:]))
    bad = post(url, "/retrieve", {"queries": ["a"], "query_ids": ["q0"], "topk": 1000})
    assert bad.status_code == 400 and "depth 100" in bad.json()["error"]
    unknown = post(url, "/retrieve", {"queries": ["a"], "query_ids": ["nope"]})
    assert unknown.status_code == 422 and unknown.json()["unknown_query_ids"] == ["nope"]
    long = " ".join(["qwxz"] * 50) + " volcano lava eruption"
    cut = post(url, "/retrieve", {"queries": [long], "query_ids": ["q0"], "max_length": 3}).json()["result"]
    assert cut == [local.ranks[0]]  # the last 3 words survive the budget


def test_concurrent_clients_are_batched(server, world):
    url, rw = server
    local = Rewarder(world[3], world[2])
    bodies = [{"query_ids": [f"q{i % 8}", f"q{(i + 3) % 8}"], "rewrites": [f"volcano violin {i}", f"glacier {i} wheat"]} for i in range(32)]
    before = rw.stats["batches"]
    with ThreadPoolExecutor(16) as ex:
        rs = list(ex.map(lambda b: post(url, "/reward", b), bodies))
    assert all(r.status_code == 200 for r in rs)
    want = local.score([q for b in bodies for q in b["query_ids"]], [t for b in bodies for t in b["rewrites"]])
    assert [x for r in rs for x in r.json()["rewards"]] == want
    assert rw.stats["batches"] - before < len(bodies)  # requests were gathered into fewer backend calls


def test_health_answers_while_a_batch_is_scored(world):
    texts, queries, qrels, backend = world

    searching, release = threading.Event(), threading.Event()

    class Slow:
        def search(self, texts, depth):
            searching.set()
            release.wait(60)  # until /health has answered: a loop stuck behind the search would never answer it
            return backend.search(texts, depth)

    app = create_app(Rewarder(Slow(), qrels), limits=ServeLimits(batch_wait_ms=1.0))
    with running(app) as url:
        t = threading.Thread(target=lambda: post(url, "/reward", {"query_ids": ["q0"], "rewrites": ["volcano"]}, headers={}))
        t.start()
        try:
            assert searching.wait(30)
            # answered while the search is still blocked (quiet: milliseconds; the timeout only catches a hang)
            assert httpx.get(url + "/health", timeout=20).status_code == 200 and not release.is_set()
        finally:
            release.set()
            t.join()


def test_failed_retrieval_is_a_500_not_a_crash(world):
    class Broken:
        calls = 0

        def search(self, texts, depth):
            Broken.calls += 1
            if Broken.calls == 1:
                raise RuntimeError("disk on fire")
            return world[3].search(texts, depth)

    app = create_app(Rewarder(Broken(), world[2]))
    with running(app) as url:
        r = post(url, "/reward", {"query_ids": ["q0"], "rewrites": ["volcano"]}, headers={})
        assert r.status_code == 500 and "disk on fire" in r.json()["error"] and "'q0'" in r.json()["error"]
        assert post(url, "/reward", {"query_ids": ["q0"], "rewrites": ["volcano"]}, headers={}).status_code == 200


def test_remote_scorer_and_adapter_through_the_server(server, world):
    url, _ = server
    remote = RemoteScorer(url, token=TOKEN)
    local = Rewarder(world[3], world[2])
    ids, rws = ["q5", "q6", "q5"], ["vaccine virus", "galaxy", "immune antibody"]
    assert remote.score(ids, rws) == local.score(ids, rws)
    reward = CompletionReward(remote, preset="convsearch-r1")
    comps = [f"<think>t</think>\n<rewrite>{x}</rewrite>" for x in rws]
    assert reward(completions=comps, query_id=ids) == local.score(ids, rws, "rank_incentive")
    with pytest.raises(UnknownQueryError) as e:
        remote.score(["nope"], ["x"])
    assert e.value.ids == ["nope"]
    with pytest.raises(RewardError, match="HTTP 401"):
        RemoteScorer(url).score(["q0"], ["x"])


@pytest.mark.slow
def test_cli_serve_subprocess(tmp_path, world):
    texts, queries, qrels, _ = world
    corpus = write_corpus(tmp_path / "corpus", texts, queries, qrels)
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]), "VDR_TEST_TOKEN": TOKEN}
    cmd = [sys.executable, "-m", "vdr", "serve", str(corpus), "--backend", "lexical", "--qrels", str(corpus / "qrels.tsv"),
           "--port", str(port), "--token-env", "VDR_TEST_TOKEN", "--metric", "hit@5"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(600):
            try:
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
            if proc.poll() is not None:
                pytest.fail(f"vdr serve exited: {proc.stderr.read()}")
        r = post(url, "/reward", {"query_ids": ["q0", "q1"], "rewrites": ["volcano lava", "glacier"]})
        assert r.status_code == 200 and r.json()["metric"] == "hit@5"
        assert r.json()["rewards"] == Rewarder(build_backend("lexical", texts), qrels).score(["q0", "q1"], ["volcano lava", "glacier"], "hit@5")
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=30)
    assert TOKEN not in out + err
    assert "listening on http://127.0.0.1" in err
    env.pop("VDR_TEST_TOKEN")
    bad = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert bad.returncode == 2 and "VDR_TEST_TOKEN" in bad.stderr
