"""vdr rewrite against a simulated OpenAI-compatible server (tests/judge_sim.py) and a tiny local LM."""

import json
import re
import time

import pytest

from judge_sim import SimJudge
from rewards_fixtures import build_tiny_causal_lm
from vdr.cli import main
from vdr.errors import InputError
from vdr.io import load_queries
from vdr.rewrite import load_template, rewrite
from vdr.rewrite.templates import NO_HISTORY, render_history


class SimRewriter(SimJudge):
    """Answers rewrite prompts: ``<question> standalone`` in the template's tags; magic words in
    the question trigger the faults of reasoning models and broken servers."""

    def __init__(self):
        super().__init__({})
        self.prompts = []

    def answer(self, req, body):
        user = req["messages"][-1]["content"]
        self.prompts.append(user)
        q = re.search(r"(?:Current question|Question): (.*)", user).group(1)
        if "LENGTH" in q:
            return "<think>still thinking about the", "length"
        if "REASONONLY" in q:  # the budget ended while reasoning: empty content, tokens spent as reasoning
            return "", "length"
        if "EMPTY" in q:
            return "", "stop"
        if "THINKONLY" in q:
            return "<think>I never finish"
        if "NOTAG" in q:
            return "I will not use tags"
        if "<rewrite>" in user:
            return f"<think>resolve it</think>\n<rewrite>{q} standalone</rewrite>"
        if "<answer>" in user:
            return f"<answer>{q} standalone</answer>"
        return f"<think>hmm</think>\n{q} standalone\n"


@pytest.fixture
def sim():
    s = SimRewriter()
    yield s
    s.close()


def write_queries(path, items):
    with open(path, "w") as f:
        for qid, text, hist in items:
            f.write(json.dumps({"_id": qid, "text": text, "history": hist}) + "\n")
    return path


QUERIES = [
    ("c1_1", "who wrote hamlet", []),
    ("c1_2", "where was he born", ["who wrote hamlet", "William Shakespeare"]),
    ("c2_1", "what is a glacier", []),
]


def read_jsonl(path):
    return [json.loads(line) for line in open(path)]


def run(sim, tmp_path, **kw):
    kw.setdefault("template", "conversational")
    return rewrite(tmp_path / "q.jsonl", out=tmp_path / "rw.jsonl", endpoint=sim.url, model="sim-model",
                   timeout=kw.pop("timeout", 10), backoff=0.01, **kw)


@pytest.mark.parametrize("template", ["conversational", "convsearch-r1", "rl-qr"])
def test_rewrites_every_query_and_caches(sim, tmp_path, template):
    write_queries(tmp_path / "q.jsonl", QUERIES)
    r = run(sim, tmp_path, template=template)
    assert r.ok and r.total == 3 and r.rewritten == 3 and r.cached == 0
    assert read_jsonl(tmp_path / "rw.jsonl") == [{"_id": q, "text": f"{t} standalone"} for q, t, _ in QUERIES]
    assert not (tmp_path / "rw.failures.jsonl").exists()
    meta = json.loads((tmp_path / "rw.meta.json").read_text())
    assert meta["template"]["version"] == load_template(template).version and meta["model"] == "sim-model"
    # the prompt carries the history (oldest first) and the question
    p = next(p for p in sim.prompts if "where was he born" in p)
    assert "1. who wrote hamlet\n2. William Shakespeare" in p
    assert NO_HISTORY in next(p for p in sim.prompts if "what is a glacier" in p)
    hits = sim.hits
    again = run(sim, tmp_path, template=template)
    assert again.cached == 3 and again.rewritten == 0 and sim.hits == hits
    # another model, or another template version, asks again
    other = rewrite(tmp_path / "q.jsonl", out=tmp_path / "rw2.jsonl", endpoint=sim.url, model="other", template=template,
                    cache=tmp_path / "rw.cache.jsonl")
    assert other.cached == 0 and other.rewritten == 3
    rewritten = load_queries(tmp_path / "rw.jsonl")
    assert list(rewritten.ids()) == [q for q, _, _ in QUERIES]


def test_reasoning_and_broken_answers_are_listed_failures(sim, tmp_path):
    items = QUERIES + [("x_len", "LENGTH please", []), ("x_empty", "EMPTY please", []),
                       ("x_think", "THINKONLY please", []), ("x_notag", "NOTAG please", []), ("x_reason", "REASONONLY please", [])]
    write_queries(tmp_path / "q.jsonl", items)
    r = run(sim, tmp_path, template="convsearch-r1")
    assert not r.ok and r.rewritten == 3
    assert list(r.failed) == ["x_len", "x_empty", "x_think", "x_notag", "x_reason"]
    assert r.failed["x_len"].startswith("length: no final answer")
    assert r.failed["x_reason"].startswith("length: no final answer")  # not "empty answer", not a rewrite
    assert "empty answer" in r.failed["x_empty"]
    assert "no rewrite in the answer" in r.failed["x_think"] and "no rewrite in the answer" in r.failed["x_notag"]
    fails = read_jsonl(tmp_path / "rw.failures.jsonl")
    assert [f["_id"] for f in fails] == list(r.failed)
    assert [x["_id"] for x in read_jsonl(tmp_path / "rw.jsonl")] == ["c1_1", "c1_2", "c2_1"]
    # failures are never cached: a rerun asks exactly the failed queries again
    hits = sim.hits
    again = run(sim, tmp_path, template="convsearch-r1")
    assert again.cached == 3 and sim.hits - hits == 5
    # plain template: text after </think>; an unterminated <think> is no final answer
    plain = rewrite(tmp_path / "q.jsonl", out=tmp_path / "plain.jsonl", endpoint=sim.url, model="sim-model", template="conversational")
    assert "x_think" in plain.failed and read_jsonl(tmp_path / "plain.jsonl")[0]["text"] == "who wrote hamlet standalone"
    filled = run(sim, tmp_path, template="convsearch-r1", fill_failed="original")
    texts = {x["_id"]: x["text"] for x in read_jsonl(tmp_path / "rw.jsonl")}
    assert texts["x_len"] == "LENGTH please" and not filled.ok


def test_http_errors_and_deadline_bound_the_time(sim, tmp_path):
    write_queries(tmp_path / "q.jsonl", QUERIES[:2])
    sim.mode = "http500"
    r = run(sim, tmp_path, max_retries=2)
    assert set(r.failed) == {"c1_1", "c1_2"} and "HTTP 500" in r.failed["c1_1"]
    assert sim.hits == 2 * 3  # 1 + 2 retries each
    sim.mode = "slow"  # answers after 1.5 s: every attempt times out
    t0 = time.monotonic()
    r = run(sim, tmp_path, timeout=0.3, max_retries=13, deadline=0.8, concurrency=2)
    elapsed = time.monotonic() - t0
    assert set(r.failed) == {"c1_1", "c1_2"} and all("deadline" in v or "timed out" in v for v in r.failed.values())
    # quiet: ~1 s; without the deadline: 14 attempts x 0.3 s + 0.01 x (2^13 - 1) s of backoff per query, > 80 s
    assert elapsed < 15, elapsed
    sim.mode = "ok"
    assert run(sim, tmp_path).ok  # the timed-out queries were not cached


def test_time_limits_none_refused_and_budget(sim, tmp_path):
    write_queries(tmp_path / "q.jsonl", QUERIES)
    for bad in (None, "none", "null", 0, -1, float("inf")):
        with pytest.raises(InputError, match="timeout"):
            run(sim, tmp_path, timeout=bad)
    with pytest.raises(InputError, match="deadline"):
        run(sim, tmp_path, deadline=None)
    r = run(sim, tmp_path, budget=2, concurrency=1)
    assert r.rewritten == 2 and list(r.failed) == ["c2_1"] and "budget" in r.failed["c2_1"]


def test_history_budget_drops_the_oldest_turns(sim, tmp_path):
    hist = [f"turn{i} " + "word " * 9 for i in range(10)]  # 10 words each
    write_queries(tmp_path / "q.jsonl", [("long", "and the last one", hist)])
    r = run(sim, tmp_path, max_history_words=25)
    assert r.ok and r.history_cut == 1
    p = sim.prompts[-1]
    assert "turn8" in p and "turn9" in p and "turn7" not in p and "turn0" not in p
    assert "Current question: and the last one" in p
    assert render_history(("a b c d",), 2) == ("1. c d", 1)
    assert render_history((), 5) == (NO_HISTORY, 0)


def test_user_template_file(sim, tmp_path):
    t = tmp_path / "mine.toml"
    t.write_text('name = "mine"\nversion = "mine-3"\nextract = "QUERY: (.*)"\nuser = "Q: ${question} {literal braces}"\n')
    with pytest.raises(InputError, match="question"):
        (tmp_path / "bad.toml").write_text('name = "b"\nversion = "1"\nuser = "no placeholder"\n')
        load_template(tmp_path / "bad.toml")
    with pytest.raises(InputError, match="unknown template"):
        load_template("nonexistent-template")
    tpl = load_template(t)
    assert tpl.version == "mine-3" and tpl.source == str(t)
    msgs, _ = tpl.messages(load_queries(write_queries(tmp_path / "q.jsonl", QUERIES[:1]))["c1_1"])
    assert msgs == [{"role": "user", "content": "Q: who wrote hamlet {literal braces}"}]


def test_cli_rewrite_exit_codes(sim, tmp_path, capsys):
    write_queries(tmp_path / "q.jsonl", QUERIES + [("x_len", "LENGTH", [])])
    args = ["rewrite", str(tmp_path / "q.jsonl"), "--endpoint", sim.url, "--model", "m", "--out", str(tmp_path / "o.jsonl")]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert "failed: x_len: length: no final answer" in err and "o.failures.jsonl" in err
    assert main(args + ["--timeout", "none"]) == 2
    assert "refused" in capsys.readouterr().err
    write_queries(tmp_path / "q.jsonl", QUERIES)
    assert main(args) == 0
    assert "3 queries: 0 rewritten, 3 from cache, 0 failed" in capsys.readouterr().out
    assert not (tmp_path / "o.failures.jsonl").exists()


@pytest.mark.slow
def test_local_model_every_query_rewritten_or_failed(tmp_path):
    folder = build_tiny_causal_lm(tmp_path / "lm")
    write_queries(tmp_path / "q.jsonl", QUERIES)
    r = rewrite(tmp_path / "q.jsonl", out=tmp_path / "rw.jsonl", local=folder, template="conversational", max_tokens=6, device="cpu")
    assert r.rewritten + len(r.failed) == 3 and r.settings["model"].startswith("local:lm@")
    written = [x["_id"] for x in read_jsonl(tmp_path / "rw.jsonl")]
    failed = [x["_id"] for x in read_jsonl(tmp_path / "rw.failures.jsonl")] if r.failed else []
    assert sorted(written + failed) == sorted(q for q, _, _ in QUERIES)
    assert all(v.startswith("length: no final answer") or "empty" in v for v in r.failed.values())
    with pytest.raises(InputError, match="either --endpoint"):
        rewrite(tmp_path / "q.jsonl", out=tmp_path / "x.jsonl", local=folder, endpoint="http://127.0.0.1:9/v1", template="conversational")
    import torch
    from safetensors.torch import load_file

    pickled = tmp_path / "lm-bin"  # the same weights as a pickle: refused unless --allow-pickle-weights
    __import__("shutil").copytree(folder, pickled)
    torch.save(load_file(str(pickled / "model.safetensors")), str(pickled / "pytorch_model.bin"))
    (pickled / "model.safetensors").unlink()
    with pytest.raises(InputError, match=r"--local model .*lm-bin: its weights are pytorch_model\.bin, a pickle.*--allow-pickle-weights"):
        rewrite(tmp_path / "q.jsonl", out=tmp_path / "p.jsonl", local=pickled, template="conversational", max_tokens=6, device="cpu")
    again = rewrite(tmp_path / "q.jsonl", out=tmp_path / "p.jsonl", local=pickled, template="conversational", max_tokens=6, device="cpu",
                    allow_pickle_weights=True)
    assert read_jsonl(tmp_path / "p.jsonl") == read_jsonl(tmp_path / "rw.jsonl") and again.failed == r.failed


def test_evaluate_policy_for_failed_rewrites(sim, tmp_path):
    """Failed ids are never dropped from the comparison: left out, `vdr evaluate` refuses the variant
    naming the failures file; filled with the original text, they are evaluated as the original and counted."""
    import vdr
    from rewards_fixtures import make_passages, write_corpus
    from vdr.errors import AlignmentError, VdrWarning

    texts, queries, qrels = make_passages()
    queries = dict(queries, q3="LENGTH tell me about the bitcoin")  # the simulated model never finishes this one
    corpus = write_corpus(tmp_path / "corpus", texts, queries, qrels)
    r = rewrite(corpus / "queries.jsonl", out=tmp_path / "rw.jsonl", endpoint=sim.url, model="m", template="conversational", backoff=0.01)
    assert list(r.failed) == ["q3"]
    kw = dict(queries=corpus / "queries.jsonl", qrels=corpus / "qrels.tsv", backends="lexical", k=[3, 10], progress=False,
              n_permutations=100, n_bootstrap=100)
    with pytest.raises(AlignmentError, match=r"1 of the missing ids failed in `vdr rewrite` \(reasons in .*rw\.failures\.jsonl\).*--fill-failed original"):
        vdr.evaluate(corpus, rewrites={"rw": tmp_path / "rw.jsonl"}, out=tmp_path / "res0", **kw)
    filled = rewrite(corpus / "queries.jsonl", out=tmp_path / "rw.jsonl", endpoint=sim.url, model="m", template="conversational",
                     backoff=0.01, fill_failed="original")
    assert list(filled.failed) == ["q3"] and filled.cached == 7
    with pytest.warns(VdrWarning, match=r"'rw': 1 of 8 queries failed in `vdr rewrite` and are evaluated with their original text"):
        res = vdr.evaluate(corpus, rewrites={"rw": tmp_path / "rw.jsonl"}, out=tmp_path / "res1", **kw)
    orig, rw = res.run("lexical", "original").metrics.per_query, res.run("lexical", "rw").metrics.per_query
    assert set(rw) == set(orig) == set(qrels)  # the same query set: nothing excluded
    assert rw["q3"] == orig["q3"]  # the stand-in scores exactly as the original
    written = {x["_id"]: x["text"] for x in read_jsonl(tmp_path / "rw.jsonl")}
    assert written == {q: (t if q == "q3" else f"{t} standalone") for q, t in queries.items()}  # the others are real rewrites


# ------------------------------------------------------------------ option record and the LLM client
def test_options_record_equals_keywords_and_keywords_override_it(sim, tmp_path):
    """``rewrite(..., options=RewriteOptions(...))`` is the keyword call; keywords override its fields."""
    from vdr.llm import LLMSettings
    from vdr.rewrite import RewriteOptions

    write_queries(tmp_path / "q.jsonl", QUERIES + [("x_len", "LENGTH please", [])])
    by_kw = run(sim, tmp_path, max_history_words=1, fill_failed="original")
    opts = RewriteOptions(llm=LLMSettings(endpoint=sim.url, model="sim-model", timeout=10, backoff=0.01), max_history_words=1)
    by_opts = rewrite(tmp_path / "q.jsonl", template="conversational", out=tmp_path / "rw2.jsonl", options=opts,
                      cache=tmp_path / "fresh.jsonl", fill_failed="original")
    assert read_jsonl(tmp_path / "rw2.jsonl") == read_jsonl(tmp_path / "rw.jsonl")
    assert (by_opts.rewritten, by_opts.failed, by_opts.history_cut) == (by_kw.rewritten, by_kw.failed, by_kw.history_cut) == (
        3, {"x_len": "length: no final answer (the answer reached the token limit)"}, 1)
    assert by_opts.settings["max_history_words"] == 1 and by_opts.settings["timeout_s"] == 10.0
    assert by_opts.settings["fill_failed"] == "original" and opts.fill_failed is None  # the record is not changed
    with pytest.raises(TypeError, match="unknown option.*'judge_model'"):
        rewrite(tmp_path / "q.jsonl", template="conversational", out=tmp_path / "x.jsonl", judge_model="m")


def test_rewrite_uses_the_shared_llm_client(sim, tmp_path):
    """The endpoint generator is vdr.llm's ChatClient (the judge's client class too), labelled for
    rewriting in its error messages."""
    from vdr.judge.client import JudgeClient
    from vdr.llm import ChatClient, LLMSettings
    from vdr.rewrite.generate import endpoint_generator

    gen = endpoint_generator(LLMSettings(endpoint=sim.url, model="m", api_key="sk-x", max_tokens=64))
    assert type(gen) is ChatClient and issubclass(JudgeClient, ChatClient) and JudgeClient.ask is ChatClient.ask
    assert (gen.model, gen.max_tokens, gen.label) == ("m", 64, "rewrite") and "sk-x" not in repr(gen.settings)
    with pytest.raises(InputError, match="no model"):
        endpoint_generator(LLMSettings(endpoint=sim.url))
    write_queries(tmp_path / "q.jsonl", QUERIES[:1])
    sim.mode = "http500"
    r = run(sim, tmp_path, max_retries=0)
    assert r.failed["c1_1"].startswith(f"rewrite endpoint {sim.url}: HTTP 500 for query 'c1_1' (rewrite) after 1 attempt(s)")
    sim.mode = "ok"


def test_rewrite_progress_in_a_log(sim, tmp_path, monkeypatch, capsys):
    """Issue 35.4: rewrite shows its progress (stderr not a terminal: a line per interval, here 0 s)."""
    from vdr import progress

    monkeypatch.setattr(progress, "LOG_EVERY_S", 0.0)
    write_queries(tmp_path / "q.jsonl", QUERIES)
    assert run(sim, tmp_path, progress=True).rewritten == 3
    lines = [ln.split(",")[0] for ln in capsys.readouterr().err.splitlines()]
    assert lines == ["rewrite: 1/3 queries (33%)", "rewrite: 2/3 queries (67%)", "rewrite: 3/3 queries (100%)"]
    assert run(sim, tmp_path).cached == 3 and capsys.readouterr().err == ""  # progress off by default; cached: nothing to show
