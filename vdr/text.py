"""Unicode normalisation of page text and query text (one policy for every backend), and the ONE
query-budget rule (whitespace tokens; see the section below) of the backends, rewards and variants.

Text reaches vdr from PDF text layers (pdfium or poppler), Tesseract, datasets and query files, and
the same word can arrive as different code points: the ligature ``"ﬁ"`` (U+FB01) or ``"fi"``; a
precomposed ``"é"`` (U+00E9) or ``"e"`` + combining acute (U+0301); full-width ``"Ａ"`` or ``"A"``.
:func:`normalize_text` maps them to one form so that a query typed ``"financial"`` or ``"résumé"``
matches the page, whichever rasterizer or dataset produced it.

Policy (:data:`TEXT_POLICY`, recorded by the backends):

* **Unicode**: NFKC (compatibility decomposition, then canonical composition): ligatures are split
  (``"ﬁ"`` -> ``"fi"``), decomposed accents are composed (``"e\\u0301"`` -> ``"é"``), full-width and
  other compatibility forms become their plain characters (``"²"`` -> ``"2"``, ``"Ａ"`` -> ``"A"``).
* **Invisible characters**: the soft hyphen U+00AD (a hyphenation hint, never shown unless a line
  breaks there) is removed, so ``"infor\\u00admation"`` is one word.
* **Case**: kept here. The lexical backend lower-cases tokens (its ``lower`` option, default on);
  the semantic backend gives the model the cased text (its tokenizer decides).
* **Accents**: kept. ``"résumé"`` and ``"resume"`` stay different words (accents distinguish words in
  French, Spanish, German, ...); only the *encoding* of an accent is normalised.

Applied to page text at ingest (both rasterizers, OCR, datasets) and again where texts enter the
lexical and semantic backends (pages and queries alike), so corpora ingested before this policy are
normalised too. The function is idempotent.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .errors import InputError

__all__ = ["normalize_text", "replace_lone_surrogates", "REPLACEMENT_CHARACTER", "TEXT_POLICY", "UNICODE_FORM", "DEFAULT_MAX_QUERY_TOKENS", "BudgetedQuery", "fit_query_budget", "apply_budget", "budget_config", "check_max_tokens", "cut_words", "QueryBudget", "BUDGET_PRESETS", "query_budget"]

#: The Unicode normalisation form applied to every page and query text.
UNICODE_FORM = "NFKC"
#: The policy as recorded in backend configurations.
TEXT_POLICY = {
    "unicode": UNICODE_FORM,
    "removed": ["U+00AD soft hyphen"],
    "case": "kept (the lexical backend lower-cases tokens when lower=True)",
    "accents": "kept (composed by NFKC, never stripped)",
}

_REMOVE = dict.fromkeys(map(ord, "\u00ad"))


#: What a lone UTF-16 surrogate in a text becomes (U+FFFD, as a UTF-8 decoder's ``errors="replace"``).
REPLACEMENT_CHARACTER = "\ufffd"
_SURROGATES = None


def replace_lone_surrogates(text: str) -> tuple[str, int]:
    """``text`` with every lone UTF-16 surrogate (U+D800..U+DFFF: legal in JSON as ``"\\ud83d"``,
    not encodable as UTF-8, refused by tokenizers) replaced by :data:`REPLACEMENT_CHARACTER`, and
    how many were replaced. A Python ``str`` decoded from valid JSON holds a surrogate only when it
    is unpaired (a pair decodes to its one code point), so every such code point is lone.

    The one place this policy lives (issue 26.4): query files (:func:`vdr.io.formats.load_queries`),
    rewards (:class:`vdr.rewards.rewarder.Rewarder`) and ``vdr serve`` apply it identically, so a
    reward stays equal to the evaluation of the same text.

    >>> replace_lone_surrogates("ok \\ud83d")[1], replace_lone_surrogates("fine")
    (1, ('fine', 0))
    """
    global _SURROGATES
    if text.isascii():
        return text, 0
    if _SURROGATES is None:
        import re

        _SURROGATES = re.compile("[\ud800-\udfff]")
    out, n = _SURROGATES.subn(REPLACEMENT_CHARACTER, text)
    return out, n


def normalize_text(text: str) -> str:
    """``text`` in NFKC with soft hyphens removed (case and accents kept; see the module docstring).

    Args:
        text: any ``str``.

    Returns:
        The normalised ``str`` (``normalize_text(normalize_text(t)) == normalize_text(t)``).

    Raises:
        TypeError: ``text`` is not a ``str``.

    >>> normalize_text("\\ufb01nancial")
    'financial'
    >>> normalize_text("Re\\u0301sume\\u0301") == "Résumé"
    True
    >>> normalize_text("infor\\u00admation")
    'information'
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    if text.isascii():
        return text
    return unicodedata.normalize(UNICODE_FORM, text.translate(_REMOVE))


# --------------------------------------------------------------------------------------------- the query budget
# One query token budget for every lexical backend (issue 18, item 3).
#
# Concatenated conversational history grows with every turn; Lucene refuses a query of more than
# 1,024 clauses (``maxClauseCount``: Pyserini throws, and in batch mode the query silently vanishes
# from the run), and ConvSearch-R1 (Zhu et al. 2025, arXiv 2505.15776) cuts queries to 512
# whitespace tokens. vdr applies ONE rule, the same in the bm25s ``lexical`` backend, the
# ``pyserini`` backend and the conversational variant builder:
#
# * **Tokens** are whitespace-separated words (``str.split()``), as in ConvSearch-R1; the default
#   budget is :data:`DEFAULT_MAX_QUERY_TOKENS` = 512.
# * **The current question is always kept.** The budget is spent on the question first; the history
#   gets what is left, and its OLDEST tokens are dropped first (whole turns, then the leading words of
#   the oldest turn kept). A head cut to the first N tokens -- which loses the question at the end of a
#   history-then-question concatenation -- is never used.
# * **A question alone longer than the budget** keeps its LAST ``max_tokens`` tokens
#   (``question_cut=True``, counted): a budget is a budget, and the end of a question (or of a flat
#   history-then-question text) is its newest part.
# * **Flat texts** (a variant's query text without structured history, e.g. the ``concat`` variant
#   built as history then question) go through the same function with ``history=()``: the tail cut of
#   a chronological concatenation is exactly "drop the oldest history first".
# * **Within budget the text is returned unchanged**; a cut text is the kept tokens joined by single
#   spaces (then history and question joined by ``separator``).
#
# The reward path uses the SAME rule and the SAME default: :func:`cut_words` is this tail cut on a
# flat text, and the rewards add no cut of their own unless a named, recorded preset asks
# (:data:`BUDGET_PRESETS`: ``"convsearch-train"``, ConvSearch-R1's training-time cut of 1,024 words
# keeping the first words, while its evaluation cuts at 512), so a reward equals ``vdr evaluate``'s
# value by construction.
#
# Backends record :func:`budget_config` in their ``config`` and count cut queries in their
# ``report`` (:func:`apply_budget` returns the per-query records). A query that still fails in the
# engine (e.g. a budget configured above Lucene's clause limit) is a counted failure with an empty
# ranking, never missing from the run: see :class:`vdr.retrieve.pyserini.PyseriniBackend`.

#: Default query budget in whitespace tokens (ConvSearch-R1's cut; below Lucene's 1,024 clauses).
DEFAULT_MAX_QUERY_TOKENS = 512

_ORDERS = ("history_first", "question_first")


@dataclass(frozen=True)
class BudgetedQuery:
    """A query text after the budget.

    Attributes:
        text: the text to search (unchanged when nothing was cut).
        n_tokens: whitespace tokens in ``text``.
        original_tokens: whitespace tokens of question + history before the cut.
        dropped_tokens: ``original_tokens - n_tokens`` (tokens removed, oldest first).
        dropped_turns: history turns removed entirely or in part.
        question_cut: the question alone was over budget and lost its leading tokens.
    """

    text: str
    n_tokens: int
    original_tokens: int
    dropped_tokens: int
    dropped_turns: int
    question_cut: bool

    @property
    def cut(self) -> bool:
        """Whether anything was removed."""
        return self.dropped_tokens > 0


def check_max_tokens(max_tokens: object) -> int | None:
    """``max_tokens`` as a positive int, or ``None`` (no budget).

    Raises:
        InputError: not ``None`` and not a positive integer.
    """
    if max_tokens is None:
        return None
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise InputError(f"max_query_tokens must be a positive integer or None, got {max_tokens!r}")
    return max_tokens


def fit_query_budget(
    question: str,
    history: Sequence[str] = (),
    max_tokens: int | None = DEFAULT_MAX_QUERY_TOKENS,
    *,
    order: str = "history_first",
    separator: str = " ",
) -> BudgetedQuery:
    """Join ``history`` and ``question`` within ``max_tokens`` whitespace tokens (module docstring).

    Args:
        question: the current question (kept; only its leading tokens go when it alone is over
            budget).
        history: earlier turns, OLDEST FIRST (as :attr:`vdr.types.Query.history`); empty turns
            are skipped.
        max_tokens: the budget (``None``: no budget, the texts are only joined).
        order: ``"history_first"`` (chronological: oldest turn ... newest turn, question) or
            ``"question_first"`` (question, then the turns NEWEST first, as some rewriters' inputs).
        separator: between the question and the turns and between turns.

    Returns:
        :class:`BudgetedQuery`. Deterministic; the same inputs give the same text.

    Raises:
        InputError: a non-str question or turn, a bad ``max_tokens`` or ``order``.

    >>> fit_query_budget("who won", ["a b c", "d e"], 4).text
    'd e who won'
    >>> fit_query_budget("who won", ["a b c", "d e"], 5).text
    'c d e who won'
    >>> fit_query_budget("one two three", (), 2).text
    'two three'
    """
    max_tokens = check_max_tokens(max_tokens)
    if order not in _ORDERS:
        raise InputError(f"order must be one of {_ORDERS}, got {order!r}")
    if not isinstance(question, str) or isinstance(history, str) or not all(isinstance(t, str) for t in history):
        raise InputError("fit_query_budget: question must be a str and history a sequence of str (oldest first)")
    turns = [t for t in history if t.strip()]
    q_tokens = question.split()
    t_tokens = [t.split() for t in turns]
    total = len(q_tokens) + sum(map(len, t_tokens))
    if max_tokens is None or total <= max_tokens:
        text = _join(question, turns, order, separator)
        return BudgetedQuery(text, total, total, 0, 0, False)
    question_cut = len(q_tokens) > max_tokens
    kept_q = q_tokens[-max_tokens:] if question_cut else q_tokens
    room = max_tokens - len(kept_q)
    kept: list[str] = []  # newest first while filling
    dropped_turns = 0
    for toks in reversed(t_tokens):
        if room >= len(toks):
            kept.append(" ".join(toks))
            room -= len(toks)
        else:
            if room > 0:
                kept.append(" ".join(toks[-room:]))
            room = 0
            dropped_turns += 1
    kept.reverse()
    text = _join(" ".join(kept_q), kept, order, separator)
    n = len(kept_q) + sum(len(k.split()) for k in kept)
    return BudgetedQuery(text, n, total, total - n, dropped_turns, question_cut)


def _join(question: str, turns: list[str], order: str, separator: str) -> str:
    """``turns`` (oldest first) and ``question`` in ``order``."""
    if order == "history_first":
        parts = [*turns, question]
    else:
        parts = [question, *reversed(turns)]
    return separator.join(p for p in parts if p)


def apply_budget(texts: Mapping[str, str], max_tokens: int | None) -> tuple[dict[str, str], dict]:
    """Apply the budget to flat query texts ``{query_id: text}`` (``history=()``: a tail cut).

    Returns:
        ``({query_id: text within budget}, stats)`` with stats ``{"max_query_tokens",
        "num_queries_cut", "queries_cut" (ids, first 50), "num_tokens_dropped"}`` -- what a
        backend stores in its search report.
    """
    out: dict[str, str] = {}
    cut: list[str] = []
    dropped = 0
    for qid, text in texts.items():
        b = fit_query_budget(text, (), max_tokens)
        out[qid] = b.text
        if b.cut:
            cut.append(qid)
            dropped += b.dropped_tokens
    stats = {"max_query_tokens": max_tokens, "num_queries_cut": len(cut), "queries_cut": cut[:50], "num_tokens_dropped": dropped}
    return out, stats


def budget_config(max_tokens: int | None) -> dict:
    """What a backend records in ``config["query_budget"]`` (the budget changes scores)."""
    return {
        "max_query_tokens": max_tokens,
        "tokens": "whitespace-separated (str.split)",
        "rule": "question kept; oldest history tokens dropped first; a flat text keeps its last tokens",
        "source": "ConvSearch-R1 512-token query cut (arXiv 2505.15776), as a tail cut (vdr issue 18.3)",
    }


def cut_words(text: str, max_tokens: int | None, keep: str = "tail") -> tuple[str, bool]:
    """The budget on one flat text: ``(text, False)`` within ``max_tokens`` whitespace tokens, else
    ``(the kept tokens joined by spaces, True)``. ``keep="tail"`` is :func:`fit_query_budget` with
    no history (the rule of every backend: the oldest words go first); ``keep="head"`` keeps the
    first tokens (ConvSearch-R1's training server; only through the ``convsearch-train`` preset).

    >>> cut_words("a b c d", 2)
    ('c d', True)
    >>> cut_words("a b c d", 2, keep="head")
    ('a b', True)

    Raises:
        InputError: a bad ``max_tokens`` or ``keep``.
    """
    max_tokens = check_max_tokens(max_tokens)
    if keep not in ("tail", "head"):
        raise InputError(f"keep must be 'tail' (drop the oldest words first) or 'head', got {keep!r}")
    if max_tokens is None:
        return text, False
    words = text.split()
    if len(words) <= max_tokens:  # within budget: the text as given (what fit_query_budget returns too)
        return text, False
    if keep == "tail":
        b = fit_query_budget(text, (), max_tokens)
        return b.text, b.cut
    return " ".join(words[:max_tokens]), True


@dataclass(frozen=True)
class QueryBudget:
    """A named query budget of the reward path (:data:`BUDGET_PRESETS`).

    Attributes:
        name: the preset's name (recorded in the reward config).
        max_query_tokens: whitespace tokens kept (``None``: the backend's own budget only).
        keep: ``"tail"`` (the one rule) or ``"head"``.
        source: where the numbers come from.
    """

    name: str
    max_query_tokens: int | None
    keep: str = "tail"
    source: str = ""

    def to_json(self) -> dict:
        """The budget as recorded in configs."""
        return {"preset": self.name, "max_query_tokens": self.max_query_tokens, "keep": self.keep, "source": self.source}


#: Named budgets of the reward path. ``"evaluate"`` (the default) adds nothing to the backend's own
#: budget (:data:`DEFAULT_MAX_QUERY_TOKENS` for the BM25 backends), so rewards equal ``vdr evaluate``.
BUDGET_PRESETS: dict[str, QueryBudget] = {
    "evaluate": QueryBudget("evaluate", None, "tail", "the backend's own budget, as vdr evaluate (no extra cut)"),
    "convsearch-train": QueryBudget(
        "convsearch-train", 1024, "head",
        "ConvSearch-R1 (arXiv 2505.15776; BeastyZ/ConvSearch-R1) training-time retrieval server: the first 1,024 words"
        " (Lucene's clause limit), while its evaluation cuts at 512; the BM25 backends' budget is raised to 1,024 to match"),
}


def query_budget(preset: str | None) -> QueryBudget:
    """The preset ``preset`` (``None``: ``"evaluate"``).

    Raises:
        InputError: an unknown preset (the known ones are listed).
    """
    name = "evaluate" if preset is None else preset
    if name not in BUDGET_PRESETS:
        raise InputError(f"unknown query budget preset {name!r}; known: {', '.join(BUDGET_PRESETS)}")
    return BUDGET_PRESETS[name]
