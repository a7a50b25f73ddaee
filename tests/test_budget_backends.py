"""One query budget, applied identically by the bm25s ``lexical`` and the ``pyserini`` backends
(issue 18.3): the same long conversational query is cut to the same text, the question survives,
and the budget is recorded in both backends' config and search report."""

from __future__ import annotations

import pytest

from vdr.errors import InputError
from vdr.retrieve.budget import budget_config
from vdr.retrieve.lexical import BM25Backend, build
from vdr.retrieve.pyserini import PyseriniBackend

CORPUS = {"p1": "the war ended in 1945", "p2": "who won the world cup", "p3": "history of the olympic games"}
QUESTION = "when the war ended"
LONG = " ".join(f"h{i}" for i in range(600)) + " " + QUESTION  # 604 whitespace tokens, history first


class _FakeSearcher:
    """Stands in for Pyserini's LuceneSearcher: records the texts it is asked to search."""

    def __init__(self):
        self.seen: dict[str, str] = {}

    def batch_search(self, texts, qids, k, threads):
        self.seen.update(zip(qids, texts))
        return {q: [] for q in qids}

    def search(self, text, k):  # pragma: no cover - batch_search answers every query here
        return []


def _lexical_seen(backend: BM25Backend) -> list[str]:
    """Wrap the analyzer so that the texts the backend actually analyses (= searches) are recorded."""
    seen: list[str] = []
    inner = backend._analyze

    def analyze(text):
        seen.append(text)
        return inner(text)

    backend._analyze = analyze
    return seen


@pytest.mark.parametrize("budget", [512, 10])
def test_same_cut_in_both_backends(budget):
    lex = BM25Backend(stemmer=None, max_query_tokens=budget)
    lex.index(CORPUS)
    seen_lex = _lexical_seen(lex)
    run = lex.search({"q1": LONG, "q2": QUESTION}, depth=3)
    ps = PyseriniBackend(max_query_tokens=budget)
    ps._searcher = _FakeSearcher()
    ps.search({"q1": LONG, "q2": QUESTION}, depth=3)
    seen_ps = ps._searcher.seen
    assert seen_lex == [seen_ps["q1"], seen_ps["q2"]]
    assert seen_ps["q1"].split() == LONG.split()[-budget:]
    assert seen_ps["q1"].endswith(QUESTION) and seen_ps["q2"] == QUESTION  # the question survives
    stats_lex, stats_ps = lex.report["searches"]["original"], ps.report["searches"]["original"]
    keys = ("max_query_tokens", "num_queries_cut", "queries_cut", "num_tokens_dropped")
    assert {k: stats_lex[k] for k in keys} == {k: stats_ps[k] for k in keys} == {
        "max_query_tokens": budget, "num_queries_cut": 1, "queries_cut": ["q1"], "num_tokens_dropped": 604 - budget}
    assert lex.config["query_budget"] == ps.config["query_budget"] == budget_config(budget)
    assert list(run["q1"])[0] == "p1"  # the kept question still finds the war passage


def test_budget_changes_the_lexical_ranking_as_the_cut_text():
    lex = BM25Backend(stemmer=None, max_query_tokens=4)
    lex.index(CORPUS)
    cut = lex.search({"q": "olympic games history " + QUESTION}, depth=3)
    ref = BM25Backend(stemmer=None, max_query_tokens=None)
    ref.index(CORPUS)
    assert cut.to_dict() == ref.search({"q": QUESTION}, depth=3).to_dict()  # the history words are gone
    full = ref.search({"q": "olympic games history " + QUESTION}, depth=3)
    assert "p3" in full["q"] and "p3" not in cut["q"]
    assert ref.report["searches"]["original"]["num_queries_cut"] == 0 and ref.config["query_budget"]["max_query_tokens"] is None


def test_short_queries_unchanged_and_default_512():
    a, b = BM25Backend(stemmer=None), BM25Backend(stemmer=None, max_query_tokens=None)
    assert a.config["query_budget"]["max_query_tokens"] == 512
    a.index(CORPUS)
    b.index(CORPUS)
    qs = {"q1": QUESTION, "q2": "olympic  games"}
    assert a.search(qs, depth=3).to_dict() == b.search(qs, depth=3).to_dict()
    assert a.report["searches"]["original"]["num_queries_cut"] == 0


def test_registry_option_and_bad_value():
    from vdr.retrieve.base import BuildContext

    assert build(BuildContext(name="lexical", options={"max_query_tokens": None})).max_query_tokens is None
    assert build(BuildContext(name="lexical", options={"max_query_tokens": 64})).config["query_budget"]["max_query_tokens"] == 64
    with pytest.raises(InputError, match="max_query_tokens"):
        BM25Backend(max_query_tokens=0)


def test_builtin_concat_variant_uses_the_shared_budget():
    from vdr.ingest.convert import ConcatSpec, concat_text
    from vdr.experiment.inputs import CONCAT, build_variants, concat_variant
    from vdr.types import Query, QuerySet

    history = (" ".join(f"old{i}" for i in range(400)), " ".join(f"new{i}" for i in range(200)))
    qs = QuerySet({"a": Query("where is it", history), "b": Query("short one", ("first turn",))})
    variant, record = concat_variant(qs)  # default 512
    toks = variant["a"].text.split()
    assert len(toks) == 512 and toks[-3:] == ["where", "is", "it"] and toks[0] == "old91"  # oldest 91 tokens dropped
    assert variant["b"].text == "first turn short one"  # within budget: the plain space-joined text
    assert record == {**budget_config(512), "num_queries_cut": 1, "queries_cut": ["a"], "num_tokens_dropped": 91, "num_questions_cut": 0}
    assert build_variants(qs, {})[CONCAT].texts() == variant.texts() and variant.name == CONCAT
    # the same text as vdr convert's concat-q (questions only, oldest first, space-separated, same budget)
    for qid in ("a", "b"):
        assert concat_text(qs[qid], ConcatSpec("concat-q", answers=False))[0] == variant[qid].text
    off, rec = concat_variant(qs, None)
    assert off["a"].text == " ".join([*history, "where is it"]) and rec["num_queries_cut"] == 0 and rec["max_query_tokens"] is None
