"""The shared query token budget (issue 18.3): the question is kept, the oldest history goes first,
the budget is recorded, and the result is deterministic."""

from __future__ import annotations

import pytest

from vdr.errors import InputError
from vdr.retrieve.budget import DEFAULT_MAX_QUERY_TOKENS, apply_budget, budget_config, fit_query_budget


def _words(prefix: str, n: int) -> str:
    return " ".join(f"{prefix}{i}" for i in range(n))


def test_default_is_convsearch_512():
    assert DEFAULT_MAX_QUERY_TOKENS == 512
    assert budget_config(512)["max_query_tokens"] == 512
    assert budget_config(None)["max_query_tokens"] is None


def test_within_budget_text_unchanged():
    b = fit_query_budget("who  won?", ["first turn", "second turn"], 10)
    assert b.text == "first turn second turn who  won?"  # joined, nothing cut, spacing of the question kept
    assert (b.n_tokens, b.original_tokens, b.dropped_tokens, b.dropped_turns, b.question_cut, b.cut) == (6, 6, 0, 0, False, False)


def test_oldest_history_dropped_first_question_kept():
    history = [_words("old", 300), _words("mid", 200), _words("new", 100)]  # 600 history tokens
    question = "what did he say about the war"  # 7 tokens
    b = fit_query_budget(question, history, 512)
    toks = b.text.split()
    assert len(toks) == 512 == b.n_tokens
    assert toks[-7:] == question.split()  # the question is whole, at the end
    assert toks[:505] == [f"old{i}" for i in range(95, 300)] + [f"mid{i}" for i in range(200)] + [f"new{i}" for i in range(100)]
    assert b.original_tokens == 607 and b.dropped_tokens == 95
    assert b.dropped_turns == 1  # the oldest turn, cut in part
    assert not b.question_cut


def test_whole_old_turns_dropped():
    b = fit_query_budget("q1 q2", ["a1 a2 a3", "b1 b2 b3", "c1"], 4)
    assert b.text == "b3 c1 q1 q2"
    assert b.dropped_turns == 2 and b.dropped_tokens == 5


def test_head_cut_would_lose_the_question():
    history = [_words("h", 1000)]
    b = fit_query_budget("where is it", history, 512)
    head = " ".join((history[0] + " where is it").split()[:512])
    assert "where is it" not in head  # the rule ConvSearch-R1's head cut would give
    assert b.text.endswith("where is it")


def test_question_alone_over_budget_keeps_its_last_tokens():
    b = fit_query_budget(_words("q", 600), ["some history"], 512)
    assert b.text.split() == [f"q{i}" for i in range(88, 600)]
    assert b.question_cut and b.dropped_tokens == 90 and b.dropped_turns == 1


def test_question_first_order():
    b = fit_query_budget("q", ["a1 a2", "b1 b2"], 4, order="question_first", separator=" | ")
    assert b.text == "q | b1 b2 | a2"  # newest turn next to the question; the oldest token dropped


def test_flat_text_is_a_tail_cut_and_equals_structured():
    history, question = ["x1 x2 x3", "y1 y2"], "z1 z2"
    flat = fit_query_budget(" ".join([*history, question]), (), 5)
    structured = fit_query_budget(question, history, 5)
    assert flat.text == structured.text == "x3 y1 y2 z1 z2"


def test_apply_budget_counts_and_records():
    texts = {"a": "short query", "b": _words("w", 20), "c": _words("v", 11)}
    out, stats = apply_budget(texts, 10)
    assert out["a"] == "short query"
    assert out["b"] == " ".join(f"w{i}" for i in range(10, 20))
    assert out["c"] == " ".join(f"v{i}" for i in range(1, 11))
    assert stats == {"max_query_tokens": 10, "num_queries_cut": 2, "queries_cut": ["b", "c"], "num_tokens_dropped": 11}
    out2, stats2 = apply_budget(texts, 10)
    assert out2 == out and stats2 == stats  # deterministic
    assert apply_budget(texts, None) == (texts, {"max_query_tokens": None, "num_queries_cut": 0, "queries_cut": [], "num_tokens_dropped": 0})


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "512"])
def test_bad_budget_is_an_input_error(bad):
    with pytest.raises(InputError, match="max_query_tokens"):
        fit_query_budget("q", (), bad)


def test_bad_inputs():
    with pytest.raises(InputError, match="order"):
        fit_query_budget("q", (), 5, order="newest")
    with pytest.raises(InputError, match="history"):
        fit_query_budget("q", "a history string", 5)
    with pytest.raises(InputError, match="question"):
        fit_query_budget(None, (), 5)  # type: ignore[arg-type]
