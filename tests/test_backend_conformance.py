"""Backend conformance (issue 23, items 2 and 3): every registered backend is built by ONE registry
function, and the reward IS the evaluation metric -- the same rewrites fed through ``vdr.evaluate``,
``Rewarder.evaluate`` and ``POST /reward`` of ``vdr serve``'s app give EQUAL per-query values:
texts longer than every budget (704 words, informative words first, then filler), texts with
history, non-ASCII texts, and empty texts (0 everywhere a reward takes them).

Also: a toy backend added as one file plus an entry point works in evaluate, compare, serve and the
rewards; ``vdr serve --backend semantic --backend-option semantic.model=DIR`` builds (no traceback);
a bad option is refused once, naming the backend, the key, the type and the allowed keys."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass

import pytest

import vdr
from vdr.errors import InputError
from vdr.experiment.evaluation import evaluate
from vdr.retrieve import base
from vdr.retrieve.base import Backend, BuildContext, check_backend_options, create_backend
from vdr.retrieve.budget import DEFAULT_MAX_QUERY_TOKENS, cut_words
from vdr.retrieve.options import BUILTIN_OPTIONS, CLI_ALIASES, option
from vdr.rewards import Rewarder, build_backend

TEXTS = [
    "Quarterly revenue of the company grew by 12 percent in 2023, driven by cloud services.",
    "Our cats and dogs: a guide to caring for household pets and animal health.",
    "Carbon emissions fell as the factory switched to wind and solar electricity.",
    "The football team won the championship after a penalty shootout in the final.",
    "Rainfall and temperature records for the spring season across the region. Café naïve données 気温 記録.",
    "",
]
QUERIES = {"q1": "company revenue growth", "q2": "pets and animal care", "q3": "wind solar emissions", "q4": "football championship"}
KEYWORDS = {"q1": "revenue cloud", "q2": "dogs cats", "q3": "carbon factory", "q4": "football final"}
QRELS = {"q1": {"doc.pdf#1": 1}, "q2": {"doc.pdf#2": 2}, "q3": {"doc.pdf#3": 1, "doc.pdf#5": 1}, "q4": {"doc.pdf#4": 1}}
FILLER = "lorem"  # a word in no page
METRICS = ["ndcg@3", "recall@5", "mrr@10"]


def _long(text: str, words: int = 704) -> str:
    """``text`` (the informative words) first, then filler up to ``words`` words: longer than every
    budget (512 tokens), so the tail cut keeps only filler."""
    return " ".join([*text.split(), *[FILLER] * (words - len(text.split()))])


#: variant -> {query id: (text, history)}: every kind of rewrite the reward path meets.
VARIANTS = {
    "long": {q: (_long(t), []) for q, t in KEYWORDS.items()},
    "history": {"q1": ("and the cloud part", ["company revenue growth"]), "q2": ("what about dogs", ["pets and animal care"]),
                "q3": ("the factory change", ["wind solar emissions"]), "q4": ("who won the final", ["football"])},
    "nonascii": {"q1": "revenue café cloud", "q2": "chiens dogs naïve", "q3": "carbon 工場 factory", "q4": "気温 記録 rainfall"},
    "tailkept": {q: (_long(FILLER, 700) + " " + t, []) for q, t in KEYWORDS.items()},  # history-then-question: the question survives
}
VARIANTS["nonascii"] = {q: (t, []) for q, t in VARIANTS["nonascii"].items()}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """A 6-page corpus (random images, texts above), queries, qrels and one rewrite file per variant."""
    from tiny_models import make_text_inputs

    root = tmp_path_factory.mktemp("conformance")
    sizes = [(56, 56), (84, 56), (56, 84), (56, 56), (84, 84), (56, 56)]
    d = make_text_inputs(root, sizes, TEXTS, QUERIES, KEYWORDS, QRELS)
    for name, rows in VARIANTS.items():
        (root / f"{name}.jsonl").write_text("".join(json.dumps({"_id": q, "text": t, **({"history": h} if h else {})},
                                                               ensure_ascii=False) + "\n" for q, (t, h) in rows.items()),
                                            encoding="utf-8")
    d["rewrites"] = {name: str(root / f"{name}.jsonl") for name in VARIANTS}
    return d


# ------------------------------------------------------------------------------------------ a toy backend


@dataclass(frozen=True)
class ToyOptions:
    """The toy backend's options, declared once (the registry checks them)."""

    weight: float = option(1.0, "Score of one shared word")
    max_query_tokens: int | None = option(DEFAULT_MAX_QUERY_TOKENS, "Query budget (vdr.retrieve.budget)")


class Toy:
    """A backend in one file: word overlap between query and page text, within the one query budget."""

    def __init__(self, ctx: BuildContext) -> None:
        assert isinstance(ctx.options, ToyOptions)  # checked by the registry
        self.name, self.opts = ctx.name, ctx.options
        self.config = {"backend": "toy", "weight": self.opts.weight,
                       "query_budget": {"max_query_tokens": self.opts.max_query_tokens}}
        self.report = base.new_report()
        self.pages: dict[str, set[str]] = {}

    def index(self, corpus) -> None:
        self.pages = {i: set(t.lower().split()) for i, t in base.corpus_texts(corpus).items()}
        self.report["index"] = {"num_pages": len(self.pages)}

    def search(self, queries, depth):
        texts, variant = base.query_texts(queries)
        out = {}
        for q, t in texts.items():
            words = set(cut_words(t, self.opts.max_query_tokens)[0].lower().split())
            scores = {p: self.opts.weight * len(words & ws) for p, ws in self.pages.items() if words & ws}
            out[q] = dict(sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:depth])
        self.report["searches"][variant] = {"num_queries": len(texts)}
        return vdr.Run(out)


def toy_build(ctx: BuildContext) -> Toy:
    """The toy's factory (what its entry point names)."""
    return Toy(ctx)


toy_build.Options = ToyOptions


class _EntryPoint:
    def __init__(self, name, factory) -> None:
        self.name, self.value, self._factory = name, f"toy_pkg:{name}", factory

    def load(self):
        return self._factory


@pytest.fixture
def toy(monkeypatch):
    monkeypatch.setattr(base, "_entry_points", lambda: [_EntryPoint("toy", toy_build)])


# ------------------------------------------------------------------------------------------ the backends


def _pyserini_ready() -> str | None:
    """Why pyserini cannot run here (``None``: it can): the backend's own check, which also finds a
    Java 21+ installed beside an older default one (``/usr/lib/jvm``)."""
    from vdr.retrieve.pyserini import unavailable_reason

    return unavailable_reason()


def _setup(name: str, request, tmp_path) -> tuple[dict, dict]:
    """``(evaluate keywords, build_backend options)`` of backend ``name``: the same backend, built
    by the same registry function with the same options."""
    if name == "pyserini":
        why = _pyserini_ready()
        if why:
            pytest.skip(why)
    if name == "toy":
        request.getfixturevalue("toy")
        return {"backends": "toy"}, {}
    if name in ("semantic", "hybrid"):
        model = str(request.getfixturevalue("tiny_st_dir"))
        opts = {"semantic": {"model": model}}
        return ({"backends": "lexical,semantic,hybrid" if name == "hybrid" else "semantic", "backend_options": opts, "device": "cpu"},
                {"device": "cpu", "backend_options": opts})
    if name == "multimodal":
        model = str(request.getfixturevalue("colqwen_dir"))
        store = tmp_path / "store"
        return ({"backends": "multimodal", "model": model, "device": "cpu", "store": store},
                {"model": model, "device": "cpu", "store": store})
    return {"backends": name}, {}


BACKENDS = ["lexical", pytest.param("semantic", marks=pytest.mark.model), pytest.param("hybrid", marks=pytest.mark.model),
            pytest.param("multimodal", marks=pytest.mark.model), "toy", pytest.param("pyserini", marks=pytest.mark.slow)]


@pytest.mark.parametrize("name", BACKENDS)
def test_reward_equals_evaluation(name, data, tmp_path, request):
    """The per-query values of ``vdr evaluate``, ``Rewarder`` and ``POST /reward`` are EQUAL for
    every variant, long rewrites included; empty rewrites score 0 in the reward path."""
    from fastapi.testclient import TestClient

    from vdr.rewards.serve import create_app

    ev, opts = _setup(name, request, tmp_path)
    # the multimodal backend refuses a query over its model's token limit (vdr never truncates one), in both paths
    variants = [v for v in VARIANTS if name != "multimodal" or v not in ("long", "tailkept")]
    rewrites = {v: data["rewrites"][v] for v in variants}
    res = evaluate(data["corpus"], queries=data["queries"], qrels=data["qrels"], rewrites=rewrites, out=tmp_path / "r",
                   n_permutations=50, n_bootstrap=50, progress=False, concat=False, **ev)
    corpus = vdr.corpus.load_corpus(data["corpus"])
    backend = build_backend(name, corpus, opts)
    _conforms(backend, res, name)
    rw = Rewarder(backend, vdr.load_qrels(data["qrels"]), name=name)
    ids = sorted(QUERIES)
    with TestClient(create_app(rw)) as client:
        for variant in ["original", *variants]:
            per_query = res.run(name, variant).metrics.per_query
            texts = [QUERIES[q] if variant == "original" else VARIANTS[variant][q][0] for q in ids]
            batch = rw.evaluate(ids, texts, METRICS)
            for m in METRICS:
                want = [per_query[q][m] for q in ids]
                assert batch.values[m] == want, (variant, m)
                got = client.post("/reward", json={"query_ids": ids, "rewrites": texts, "metric": m})
                assert got.status_code == 200, got.text
                assert got.json()["rewards"] == want, (variant, m)
        # the long rewrites: informative words first, so the budget of the BM25-like backends leaves only filler
        if name in ("lexical", "toy", "pyserini"):
            assert all(res.run(name, "long").metrics.per_query[q]["ndcg@3"] == 0.0 for q in ids)
            assert rw.evaluate(ids, [VARIANTS["long"][q][0] for q in ids]).truncated == [True] * 4
            assert any(res.run(name, "tailkept").metrics.per_query[q]["ndcg@3"] > 0 for q in ids)
        empty = client.post("/reward", json={"query_ids": ids[:2], "rewrites": ["", None], "metric": "ndcg@3"}).json()
        assert empty["rewards"] == [0.0, 0.0] and empty["counts"]["empty"] == 2
    assert rw.evaluate(ids[:2], ["   ", None]).rewards == [0.0, 0.0]
    if name == "multimodal":
        from vdr.rewards import RewardError

        with pytest.raises(RewardError, match="does not truncate queries"):
            rw.score(ids[:1], [VARIANTS["long"]["q1"][0]])


def _conforms(backend, res, name: str) -> None:
    """The backend of the reward path: the protocol (index, search, config, report) and the same
    scoring config as ``vdr evaluate``'s."""
    assert isinstance(backend, Backend) and isinstance(backend.name, str)
    json.dumps(backend.config), json.dumps(backend.report)
    assert set(backend.report) >= {"page_forward_passes", "cache", "index", "searches"}
    run = backend.search(vdr.QuerySet.from_texts(KEYWORDS, name="kw"), 3)
    assert isinstance(run, vdr.Run) and set(run) == set(KEYWORDS) and all(len(run[q]) <= 3 for q in run)
    assert "kw" in backend.report["searches"]
    ev = res.config["backend_config"][name]
    skip = {"store", "cache", "path", "fused", "device"}
    same = {k: v for k, v in backend.config.items() if k not in skip and not isinstance(v, dict)}
    assert same == {k: v for k, v in ev.items() if k in same}
    if "query_budget" in ev:
        assert backend.config["query_budget"] == ev["query_budget"]


# ------------------------------------------------------------------------------------------ one construction path


@pytest.mark.model  # loads every factory (mteb's imports mteb)
def test_every_builtin_declares_its_options_once():
    for name, cls in BUILTIN_OPTIONS.items():
        assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen
        for f in dataclasses.fields(cls):
            assert f.metadata["help"] and isinstance(f.metadata["scores"], bool), (name, f.name)
        factory = base.backend_factory(name) if name != "mteb" or _has("mteb") else None
        if factory is not None:
            assert factory.Options is cls
    for param, (backend, key, flag) in CLI_ALIASES.items():
        assert key in {f.name for f in dataclasses.fields(BUILTIN_OPTIONS[backend])} and flag.startswith("--")


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def test_a_bad_option_is_refused_once_with_everything_named():
    with pytest.raises(InputError) as e:
        check_backend_options("lexical", {"k3": 1})
    msg = str(e.value)
    assert "backend 'lexical'" in msg and "['k3']" in msg and "k1 (float | null)" in msg and "max_query_tokens (int | null)" in msg
    with pytest.raises(InputError, match=r"backend 'semantic': option batch_size='x' must be int"):
        check_backend_options("semantic", {"batch_size": "x"}, strings=True)
    with pytest.raises(InputError, match=r"option normalize=3 must be bool"):
        create_backend("semantic", {"normalize": 3})
    # CLI strings are converted by the field's type
    got = check_backend_options("lexical", {"k1": "0.9", "max_query_tokens": "null", "stopwords": '["a"]', "lower": "false"}, strings=True)
    assert (got.k1, got.max_query_tokens, got.stopwords, got.lower) == (0.9, None, ["a"], False)
    assert check_backend_options("hybrid", {"rrf_k": "10"}, strings=True).rrf_k == 10.0


def test_the_query_budget_is_one_rule():
    text = " ".join(f"w{i}" for i in range(700))
    lexical = base.create_backend("lexical", {})
    assert lexical.config["query_budget"]["max_query_tokens"] == DEFAULT_MAX_QUERY_TOKENS == 512
    assert cut_words(text, 512)[0] == " ".join(f"w{i}" for i in range(188, 700))
    long = " ".join(f"w{i}" for i in range(1100))
    pages = {"d1": "w1099 w1050", "d2": "w0"}
    rw = Rewarder(build_backend("lexical", pages), {"q": {"d2": 1}})
    assert rw.config()["backend_query_budget"] == 512 and rw.config()["query_budget"]["preset"] == "evaluate"
    assert rw.evaluate(["q"], [text]).truncated == [True]
    # ConvSearch-R1's training cut: a named, recorded preset (never the default), that also lifts the BM25 budget
    train = Rewarder(build_backend("lexical", pages, {"budget_preset": "convsearch-train"}), {"q": {"d2": 1}},
                     budget_preset="convsearch-train")
    assert train.config()["query_budget"]["preset"] == "convsearch-train" and train.config()["query_budget"]["max_query_tokens"] == 1024
    assert train.backend_budget == 1024 and train.score(["q"], [long]) == [1.0]  # the head (w0 ... w1023) is kept
    assert rw.score(["q"], [long]) == [0.0]  # the evaluation budget: the last 512 tokens
    with pytest.raises(InputError, match="unknown query budget preset"):
        Rewarder(build_backend("lexical", {"d1": "a"}), {"q": {"d1": 1}}, budget_preset="nope")


def test_toy_backend_in_evaluate_compare_serve_and_rewards(data, tmp_path, toy, monkeypatch):
    """One file plus an entry point: evaluate, compare (its runs), serve and the rewards all find it."""
    import uvicorn
    from fastapi.testclient import TestClient

    from vdr.experiment.compare_runs import compare_runs
    from vdr.rewards.serve import serve

    res = evaluate(data["corpus"], queries=data["queries"], qrels=data["qrels"], out=tmp_path / "r", backends="toy,lexical",
                   backend_options={"toy": {"weight": 2.0}}, n_permutations=50, n_bootstrap=50, progress=False)
    assert res.config["backend_config"]["toy"]["weight"] == 2.0
    cmp = compare_runs(data["qrels"], {"toy": tmp_path / "r" / "runs" / "toy.original.trec",
                                       "lexical": tmp_path / "r" / "runs" / "lexical.original.trec"}, n_permutations=50, n_bootstrap=50)
    assert "toy" in cmp.table()
    apps = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: apps.append(app))
    serve(data["corpus"], backend="toy", qrels=data["qrels"], backend_options={"toy": {"weight": 2.0}})
    ids = sorted(QUERIES)
    with TestClient(apps[0]) as client:
        got = client.post("/reward", json={"query_ids": ids, "rewrites": [KEYWORDS[q] for q in ids]}).json()["rewards"]
    rw = Rewarder(build_backend("toy", vdr.corpus.load_corpus(data["corpus"]), {"backend_options": {"toy": {"weight": 2.0}}}),
                  vdr.load_qrels(data["qrels"]))
    assert rw.score(ids, [QUERIES[q] for q in ids]) == [res.run("toy", "original").metrics.per_query[q]["ndcg@3"] for q in ids]
    assert got == rw.score(ids, [KEYWORDS[q] for q in ids])
    with pytest.raises(InputError, match=r"backend 'toy': unknown toy option\(s\) \['wieght'\]"):
        serve(data["corpus"], backend="toy", qrels=data["qrels"], backend_options={"toy": {"wieght": 2.0}})


@pytest.mark.model
def test_serve_semantic_model_option_through_the_cli(data, tiny_st_dir, monkeypatch, capsys):
    """``vdr serve CORPUS --backend semantic --backend-option semantic.model=DIR`` builds the
    backend (it stopped with a TypeError traceback when the model came twice)."""
    import uvicorn

    from vdr.cli import main

    apps = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: apps.append(app))
    rc = main(["serve", str(data["corpus"]), "--qrels", str(data["qrels"]), "--backend", "semantic", "--device", "cpu",
               "--backend-option", f"semantic.model={tiny_st_dir}", "-q"])
    err = capsys.readouterr().err
    assert rc == 0 and "Traceback" not in err, err
    assert len(apps) == 1
    rc = main(["serve", str(data["corpus"]), "--qrels", str(data["qrels"]), "--backend", "semantic",
               "--backend-option", "semantic.batch_size=many", "-q"])
    err = capsys.readouterr().err
    assert rc == 2 and "batch_size='many' must be int" in err and "Traceback" not in err


# ------------------------------------------------------------------------------------------ reward-server isolation

#: rewrites with lone UTF-16 surrogates (legal JSON, not UTF-8): a high one, a low one, reversed, alone
BAD_TEXTS = ["revenue \ud83d cloud", "\udc00dogs cats", "carbon \ude00\ud83d factory", "\ud800"]


def _post_raw(url: str, body: dict):
    import httpx

    # json.dumps escapes the surrogates ("\ud83d"): what a client's JSON library sends
    return httpx.post(url + "/reward", content=json.dumps(body).encode("ascii"), headers={"content-type": "application/json"},
                      timeout=120)


@pytest.mark.parametrize("name", BACKENDS)
def test_one_requests_bad_text_never_fails_another(name, data, tmp_path, request):
    """Issue 26.4, for every backend: concurrent clients, some of whose rewrites hold lone
    surrogates, batched together: every request gets 200; a bad text is scored as its U+FFFD form
    (the reward ``load_queries`` + ``vdr evaluate`` give the same text) and named per reward."""
    from concurrent.futures import ThreadPoolExecutor

    from rewards_fixtures import running
    from vdr.rewards.serve import ServeLimits, create_app
    from vdr.text import replace_lone_surrogates

    _, opts = _setup(name, request, tmp_path)
    backend = build_backend(name, vdr.corpus.load_corpus(data["corpus"]), opts)
    rw = Rewarder(backend, vdr.load_qrels(data["qrels"]), name=name)
    ids = sorted(QUERIES)
    good = [{"query_ids": ids, "rewrites": [KEYWORDS[q] for q in ids]} for _ in range(6)]
    bad = [{"query_ids": ids, "rewrites": [BAD_TEXTS[(i + j) % 4] for j in range(4)]} for i in range(4)]
    bodies = [b for pair in zip(good, bad) for b in pair] + good[4:]
    with running(create_app(rw, limits=ServeLimits(batch_wait_ms=50.0))) as url:
        with ThreadPoolExecutor(8) as ex:
            answers = list(ex.map(lambda b: _post_raw(url, b), bodies))
    server_batches = rw.stats["batches"]
    assert [a.status_code for a in answers] == [200] * len(bodies), [a.text for a in answers if a.status_code != 200]
    for body, a in zip(bodies, answers):
        fixed = [replace_lone_surrogates(t)[0] for t in body["rewrites"]]
        assert a.json()["rewards"] == rw.evaluate(body["query_ids"], fixed).rewards
        n_bad = [replace_lone_surrogates(t)[1] for t in body["rewrites"]]
        assert a.json()["counts"]["replaced_text"] == sum(1 for n in n_bad if n)
        assert a.json().get("replaced_text", {}) == {str(i): n for i, n in enumerate(n_bad) if n}
    assert server_batches < len(bodies)  # the requests were batched together


def test_a_failing_request_is_isolated_with_a_request_id(data, caplog):
    """A backend that fails on one request's text: only that request gets the 500 (with a
    ``request_id`` the log names); the others, batched with it, get their rewards."""
    from concurrent.futures import ThreadPoolExecutor

    from rewards_fixtures import running
    from vdr.rewards.serve import ServeLimits, create_app

    backend = build_backend("lexical", vdr.corpus.load_corpus(data["corpus"]))

    class Picky:
        name, config, report = "picky", backend.config, backend.report

        def search(self, queries, depth):
            if any("explode" in t for t in base.query_texts(queries)[0].values()):
                raise RuntimeError("cannot encode this text")
            return backend.search(queries, depth)

    rw = Rewarder(Picky(), vdr.load_qrels(data["qrels"]))
    ids = sorted(QUERIES)
    bodies = [{"query_ids": ids, "rewrites": [KEYWORDS[q] + f" {i}" for q in ids]} for i in range(7)]
    bodies.insert(3, {"query_ids": ids[:1], "rewrites": ["explode now"]})
    with running(create_app(rw, limits=ServeLimits(batch_wait_ms=80.0))) as url:
        with ThreadPoolExecutor(8) as ex:
            answers = list(ex.map(lambda b: _post_raw(url, b), bodies))
    codes = [a.status_code for a in answers]
    assert codes == [200, 200, 200, 500, 200, 200, 200, 200]
    err = answers[3].json()
    assert "cannot encode this text" in err["error"] and len(err["request_id"]) == 16
    assert err["request_id"] in caplog.text
    for body, a in zip(bodies, answers):
        if a.status_code == 200:
            assert a.json()["rewards"] == Rewarder(backend, vdr.load_qrels(data["qrels"])).evaluate(body["query_ids"], body["rewrites"]).rewards


def test_query_files_replace_lone_surrogates_like_the_rewards(tmp_path):
    """The same U+FFFD rule in query files (so that evaluate and the reward see one text), with a
    warning naming the lines; an unknown query id with a surrogate gets a readable 422."""
    from fastapi.testclient import TestClient

    from vdr.rewards.serve import create_app

    p = tmp_path / "q.jsonl"
    p.write_text(json.dumps({"_id": "q1", "text": "a \ud83d b", "history": ["x \udc00"]}) + "\n"
                 + json.dumps({"_id": "q2", "text": "plain"}) + "\n", encoding="ascii")
    with pytest.warns(vdr.errors.VdrWarning, match=r"1 query holds lone UTF-16 surrogates .* line 1 id 'q1'"):
        qs = vdr.load_queries(p)
    assert qs["q1"].text == "a \ufffd b" and qs["q1"].history == ("x \ufffd",) and qs["q2"].text == "plain"
    rw = Rewarder(build_backend("lexical", {"d1": "alpha", "d2": "beta"}), {"q1": {"d1": 1}})
    with TestClient(create_app(rw)) as client:
        r = client.post("/reward", content=json.dumps({"query_ids": ["q\ud83d"], "rewrites": ["alpha"]}).encode("ascii"),
                        headers={"content-type": "application/json"})
    assert r.status_code == 422 and r.json()["unknown_query_ids"] == ["q\ud83d"]
