"""Retrieval metrics as rewards for RL training of query rewriters (GRPO with TRL or verl).

Both RL papers vdr serves train a rewriter whose reward IS the retrieval metric: RL-QR (Cha et al.
2025, arXiv 2507.23242) rewards nDCG@3 from the target retriever; ConvSearch-R1 (Zhu et al. 2025,
arXiv 2505.15776; code BeastyZ/ConvSearch-R1) rewards the rank of the best gold passage. Here the
reward of a rewrite of query ``q`` is computed by the SAME code as ``vdr evaluate``: the rewrites
are searched by a retrieval backend, the rankings become a :class:`~vdr.types.Run` and
:func:`vdr.metrics.evaluate_run` gives the per-rewrite value (one run entry per rewrite, so the
GRPO rollouts of one prompt, which share a query id, never overwrite each other).

Metrics (:func:`parse_reward_metric`): every metric of :mod:`vdr.metrics` (``ndcg@3`` -- the
default --, ``hit@k``, ``mrr@k``, ``recall@k``, ...) and ``rank_incentive`` (:class:`RankIncentive`,
ConvSearch-R1's piecewise-linear map of the best gold rank ``r``: ``2 - (r - 1)/9`` for
``1 <= r <= 10``, ``10/9 - r/90`` for ``10 < r <= 100``, ``0`` otherwise; breakpoints configurable).
The best gold rank is read from ``evaluate_run``'s ``mrr`` (whole ranking): ``r = 1 / mrr``; ``-1``
when no page with grade >= ``relevance_level`` is in the top ``depth``.

Rewrites (documented choices, counted in :attr:`Rewarder.stats`):

* **Empty** (``None``, ``""`` or whitespace only): never sent to the backend; an empty ranking, so
  every metric is 0 (as a retriever returning nothing). Counted as ``empty``.
* **Over-long**: the query budget of ``vdr evaluate`` (:mod:`vdr.retrieve.budget`, ONE rule): the
  backend's own ``max_query_tokens`` (512 whitespace tokens for the BM25 backends, the LAST tokens
  kept: the oldest words are dropped first, so a history-then-question rewrite keeps its question),
  applied here with the same function so that it is counted (``truncated``) and cached. No other
  cut by default, so a reward IS the evaluation value; ``max_query_tokens`` tightens it and the
  named preset ``budget_preset="convsearch-train"`` (ConvSearch-R1's training cut: the first 1,024
  words) replaces it, recorded in :meth:`Rewarder.config`.
* **Cache**: an LRU cache of rankings keyed by (backend name, query id, rewrite after the cut),
  bounded in entries (``cache_size``); identical rewrites in one batch are searched once.

Adapters: :class:`CompletionReward` turns completions into rewards -- a TRL ``GRPOTrainer`` reward
function (``reward(prompts, completions, **kwargs)``), verl's ``compute_score(data_source,
solution_str, ground_truth, extra_info=None)`` -- extracting the rewrite by pattern
(:class:`Extractor`: ``<rewrite>``, ``<answer>``, plain text or a regex) with a format penalty.
It scores through a :class:`Rewarder` (in process) or a :class:`RemoteScorer` (``vdr serve``).

The backend is called in ONE place, :func:`_search`, and built by the registry's
:func:`vdr.retrieve.base.create_backend` (through :func:`build_backend`), as in ``vdr evaluate``.
"""

from __future__ import annotations

import warnings

import json
import math
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from typing import Any, ClassVar

import numpy as np

from ..errors import InputError, VdrError, VdrWarning
from ..llm import CONVSEARCH_FORMAT, Extractor
from ..metrics import Metric, evaluate_run, parse_metric
from ..retrieve.budget import BUDGET_PRESETS, QueryBudget, check_max_tokens, cut_words, query_budget
from ..text import replace_lone_surrogates
from .health import HealthOptions, TrainingHealth
from ..retrieve.options import option, options_from
from ..types import QuerySet, Qrels, Run, to_id

__all__ = [
    "RankIncentive",
    "RewardError",
    "UnknownQueryError",
    "RewardBatch",
    "Rewarder",
    "Extractor",
    "CompletionReward",
    "RemoteScorer",
    "PRESETS",
    "parse_reward_metric",
    "cut_words",
    "build_backend",
    "TEXT_BACKENDS",
    "BACKENDS",
    "RANK_INCENTIVE",
    "RewardOptions",
    "CompletionOptions",
    "BUDGET_PRESETS",
]

RANK_INCENTIVE = "rank_incentive"


class RewardError(VdrError):
    """A reward could not be computed (a failed retrieval, a bad adapter input); names the query id."""


class UnknownQueryError(InputError):
    """Query ids without qrels. Attributes: ``ids`` (all of them, in input order, deduplicated)."""

    def __init__(self, ids: Sequence[str], hint: str = "") -> None:
        self.ids = list(dict.fromkeys(ids))
        shown = ", ".join(repr(i) for i in self.ids[:20])
        more = f" (and {len(self.ids) - 20} more)" if len(self.ids) > 20 else ""
        super().__init__(f"{len(self.ids)} unknown query id(s) (not in the qrels): {shown}{more}" + (f"; {hint}" if hint else ""))


# --------------------------------------------------------------------------------------------
# metrics


@dataclass(frozen=True)
class RankIncentive:
    """ConvSearch-R1's rank incentive (Zhu et al. 2025, arXiv 2505.15776, rank-incentive reward shaping):
    piecewise-linear in the best gold rank ``r`` through the ``points`` ``(rank, reward)``, 0 outside.

    Default points ``((1, 2.0), (10, 1.0), (100, 0.0))``: ``2 - (r - 1)/9`` for ``1 <= r <= 10``,
    ``10/9 - r/90`` for ``10 < r <= 100``, ``0`` for ``r > 100`` or not retrieved (``r = -1``).

    >>> f = RankIncentive()
    >>> [round(f(r), 6) for r in (1, 5, 10, 11, 55, 100, 101, -1)]
    [2.0, 1.555556, 1.0, 0.988889, 0.5, 0.0, 0.0, 0.0]

    Raises:
        InputError: fewer than two points, ranks not strictly increasing integers >= 1, or a
            reward that is not finite.
    """

    points: tuple[tuple[int, float], ...] = ((1, 2.0), (10, 1.0), (100, 0.0))

    def __post_init__(self) -> None:
        pts = tuple((int(r), float(v)) for r, v in self.points)
        if len(pts) < 2 or any(r < 1 for r, _ in pts) or any(b[0] <= a[0] for a, b in zip(pts, pts[1:])):
            raise InputError(f"rank incentive points must be >= 2 (rank, reward) pairs with strictly increasing ranks >= 1, got {self.points!r}")
        if not all(math.isfinite(v) for _, v in pts):
            raise InputError(f"rank incentive rewards must be finite, got {self.points!r}")
        object.__setattr__(self, "points", pts)

    @property
    def max_rank(self) -> int:
        """The last breakpoint's rank: the retrieval depth the incentive needs."""
        return self.points[-1][0]

    def values(self, ranks: np.ndarray) -> np.ndarray:
        """Rewards of int ranks ``(n,)`` (``-1``: not retrieved) as float64 ``(n,)``."""
        r = np.asarray(ranks, dtype=np.float64)
        xs = [float(p[0]) for p in self.points]
        ys = [p[1] for p in self.points]
        inside = (r >= xs[0]) & (r <= xs[-1])
        return np.where(inside, np.interp(r, xs, ys), 0.0)

    def __call__(self, rank: int) -> float:
        """The reward of one rank (``-1``: not retrieved), as :meth:`values` gives it."""
        return float(self.values(np.array([rank]))[0])


#: The metric the best gold rank is read from: ``r = 1 / mrr`` (whole ranking).
_BEST_RANK = Metric("mrr")


def parse_reward_metric(name: str | Metric) -> Metric | str:
    """``"rank_incentive"`` or a parsed :class:`vdr.metrics.Metric` (``"ndcg@3"`` ...).

    Raises:
        InputError: an unknown metric name (the message lists the known ones).
    """
    if isinstance(name, str) and name.strip().lower() == RANK_INCENTIVE:
        return RANK_INCENTIVE
    if not isinstance(name, (str, Metric)):
        raise InputError(f"metric must be a string such as 'ndcg@3' or {RANK_INCENTIVE!r}, got {type(name).__name__}")
    try:
        return parse_metric(name)
    except InputError as e:
        raise InputError(f"{e}; or {RANK_INCENTIVE!r} (ConvSearch-R1)") from None


# --------------------------------------------------------------------------------------------
# backend adapter: the only code that builds or calls a retrieval backend

TEXT_BACKENDS = ("lexical", "semantic", "hybrid")
BACKENDS = (*TEXT_BACKENDS, "multimodal")
#: Query texts whose vectors the multimodal reward backend keeps (its ``query_cache_size``, LRU;
#: in a reward server nearly every rewrite is a new text, so the bound keeps the memory bounded).
#: ``options["query_cache_size"]`` of :func:`build_backend` overrides it.
MAX_QUERY_MEMO = 4096


def _reward_backend_options(opts: Mapping) -> dict[str, dict]:
    """``{backend: {option: value}}`` from :func:`build_backend`'s legacy keys (``bm25``, ``model``,
    ``device``, ``rrf_k``, ``store``, ``query_cache_size``), the budget preset and ``backend_options``
    (which win)."""
    model = opts.get("model")
    out: dict[str, dict] = {
        "lexical": dict(opts.get("bm25") or {}),
        "semantic": {} if model is None else {"model": model},
        "hybrid": {} if opts.get("rrf_k") is None else {"rrf_k": opts["rrf_k"]},
        "multimodal": {"encoder": {"model": model, "device": opts.get("device")}, "store": opts.get("store"),
                       "query_cache_size": opts.get("query_cache_size", MAX_QUERY_MEMO)},
    }
    preset = query_budget(opts.get("budget_preset"))
    if preset.max_query_tokens is not None:  # the backend must not cut below the preset's budget
        for b in ("lexical", "pyserini"):
            out.setdefault(b, {}).setdefault("max_query_tokens", preset.max_query_tokens)
    for b, extra in dict(opts.get("backend_options") or {}).items():
        out[b] = {**out.get(b, {}), **dict(extra)}
    return out


def build_backend(name: str, corpus, options: Mapping | None = None, *, index: bool = True):
    """Build the backend ``name`` over ``corpus`` (loaded once, kept warm) through the registry
    (:func:`vdr.retrieve.base.create_backend`): the same construction, options and query budget as
    ``vdr evaluate``; any registered backend (entry point ``vdr.backends``) works.

    Args:
        name: ``"lexical"`` (BM25, bm25s), ``"semantic"`` (sentence-transformers), ``"hybrid"``
            (reciprocal rank fusion of the backends in its ``fuse`` option, default lexical and
            semantic), ``"multimodal"`` (a ColPali-family model over the page images; needs a page
            :class:`~vdr.corpus.Corpus` and ``options["model"]``), ``"served"`` (a served system of the
            multimodal backend, ``backend_options={"served": {"system": "binary"}}``: the reward is the
            metric of the run that system gives, as ``vdr evaluate --serve-as binary`` evaluates it),
            ``"rerank"`` (a base backend's run re-scored by a reranker,
            ``backend_options={"rerank": {"model": ..., "base": "lexical", "depth": 100}}``: the reward
            is the metric of the reranked run, as ``vdr evaluate --rerank MODEL`` evaluates it),
            ``"pyserini"`` or any registered name.
        corpus: what the backend indexes (the :class:`~vdr.retrieve.base.Backend` protocol): a
            page ``Corpus``, a passage corpus, or ``{corpus_id: text}`` for the text backends.
        options: ``{"backend_options": {backend: {option: value}}, "model": ..., "device": ...,
            "bm25": {...}, "rrf_k": 60, "store": ..., "query_cache_size": ..., "budget_preset": ...}``
            (``backend_options``: the options of :mod:`vdr.retrieve.options`, as ``vdr serve
            --backend-option BACKEND.KEY=VALUE`` gives them; they win over the other keys;
            ``model``: the semantic or multimodal model; ``store``, ``query_cache_size``: the
            multimodal backend's (default :data:`MAX_QUERY_MEMO`); ``budget_preset``: see
            :data:`vdr.retrieve.budget.BUDGET_PRESETS`).
        index: index ``corpus`` now (``False``: the caller indexes).

    Raises:
        InputError: an unknown backend name or a bad option (named once, by the registry), or what
            the backend raises for bad texts.
        ArgumentTypeError: ``name``, ``corpus`` or ``options`` of the wrong type (a folder path
            given as ``corpus``: load it with :func:`vdr.load_corpus`).
        BackendUnavailable: ``multimodal`` without a model, or a model that cannot be loaded.
    """
    from ..retrieve.base import BackendUnavailable, check_backend_options, check_corpus, create_backend
    from ..retrieve.hybrid import DEFAULT_FUSED
    from ..errors import wrong_type

    if not isinstance(name, str):
        raise wrong_type("build_backend", "name", "a backend name (lexical, semantic, hybrid, multimodal, ...)", name)
    check_corpus(corpus, "build_backend")
    if options is not None and not isinstance(options, Mapping):
        raise wrong_type("build_backend", "options", "a dict such as {'model': ..., 'backend_options': {...}}", options)
    opts = dict(options or {})
    per = _reward_backend_options(opts)
    context = {"device": opts.get("device")}
    built = {}
    if name == "hybrid":
        fuse = check_backend_options("hybrid", per.get("hybrid")).fuse
        for n in fuse or DEFAULT_FUSED:  # as vdr evaluate: by default the fused backends that can run
            try:
                built[n] = create_backend(n, per.get(n), **context)
            except BackendUnavailable:
                if fuse is not None:
                    raise
    if name == "served":  # a served system (issue 36) ranks from the multimodal backend's page store
        exact = check_backend_options("served", per.get("served")).exact
        built[exact] = create_backend(exact, per.get(exact), **context)
    if name == "rerank":  # a reranked system (issue 37): the base first, then its run re-scored by the reranker
        base = check_backend_options("rerank", per.get("rerank")).base
        built[base] = build_backend(base, corpus, options, index=False)
    backend = create_backend(name, per.get(name), built=built, **context)
    if index:
        backend.index(corpus)
    return backend


def _search(backend, texts: dict[str, str], depth: int) -> Run:
    """The ONE call into a backend (the :class:`~vdr.retrieve.base.Backend` protocol): rank the
    corpus for ``{key: text}`` (non-empty texts), keeping ``depth`` pages per key in trec_eval order."""
    return backend.search(QuerySet.from_texts(texts, name="rewards"), depth)


def backend_config(backend) -> dict:
    """The backend's ``config`` dict (JSON-ready), ``{}`` when it has none."""
    return dict(getattr(backend, "config", {}) or {})


# --------------------------------------------------------------------------------------------
# the scorer


@dataclass(frozen=True)
class RewardBatch:
    """Rewards of one batch of rewrites, in input order.

    Attributes:
        metric: the primary metric's name. rewards: its value per rewrite (float).
        values: ``{metric name: [value per rewrite]}`` for every metric asked.
        ranks: best gold rank per rewrite (1-based; ``-1``: not in the top ``depth``).
        empty, truncated, cached: per-rewrite flags (see the module docstring).
        rows: per rewrite, the ranking ``[(corpus_id, score), ...]`` best first (only when asked).
        replaced: per rewrite, how many lone UTF-16 surrogates were replaced by U+FFFD before
            searching (:func:`vdr.text.replace_lone_surrogates`, as ``load_queries`` does; 0: none).
    """

    metric: str
    rewards: list[float]
    values: dict[str, list[float]]
    ranks: list[int]
    empty: list[bool]
    truncated: list[bool]
    cached: list[bool]
    rows: list[list[tuple[str, float]]] | None = None
    replaced: list[int] | None = None


@dataclass(frozen=True)
class RewardOptions:
    """Settings of a :class:`Rewarder` (given as ``options`` or as keywords)."""

    label: ClassVar[str] = "Rewarder"

    metric: str = option("ndcg@3", "Default metric (see parse_reward_metric)")
    depth: int = option(100, "Pages retrieved per rewrite; every metric cutoff must be <= depth")
    max_query_tokens: int | None = option(None, "A tighter query budget in whitespace tokens (None: the backend's own, as vdr evaluate)")
    keep: str = option("tail", "With max_query_tokens: tail (the one rule: oldest words dropped first) or head")
    budget_preset: str | None = option(None, "A named query budget (vdr.retrieve.budget.BUDGET_PRESETS), e.g. convsearch-train")
    relevance_level: int = option(1, "Minimum grade counted as relevant (binary metrics, ranks)")
    cache_size: int = option(10_000, "LRU cache entries (0: no cache)", scores=False)
    name: str = option("backend", "The backend's name (part of the cache key and of config())", scores=False)
    rank_incentive: Any = option(None, "The RankIncentive used for rank_incentive (default RankIncentive())")


class Rewarder:
    """Rewards of rewrites of known queries from one retrieval backend and the qrels.

    Args:
        backend: a retrieval backend (:func:`build_backend`, or any object with the Backend protocol's
            ``search(queries, depth) -> Run``).
        qrels: :class:`~vdr.types.Qrels` (or a dict): the query ids that can be rewarded.
        options: :class:`RewardOptions`; or its fields as keywords: ``metric`` (default
            ``"ndcg@3"``, see :func:`parse_reward_metric`), ``depth`` (pages retrieved per rewrite,
            default 100; every metric cutoff and the rank incentive's last breakpoint must be <=
            ``depth``), ``max_query_tokens`` and ``keep`` (a tighter budget, see
            :func:`~vdr.retrieve.budget.cut_words`), ``budget_preset`` (a named budget, e.g.
            ``"convsearch-train"``; ``None``: the backend's own budget, as ``vdr evaluate``),
            ``relevance_level``, ``cache_size`` (LRU entries, 0: none), ``name`` (the backend's
            name: part of the cache key and of :meth:`config`), ``rank_incentive``.

    The query budget: the backend's own (its ``config["query_budget"]``, the BM25 backends' 512
    tokens) is applied here with the backend's function (so cut rewrites are counted and cached
    under the text searched); the text the backend sees is the text ``vdr evaluate``'s backend
    would search, so a reward equals the evaluation value.

    Attributes:
        stats: counters ``rewrites``, ``empty``, ``truncated``, ``cache_hits``, ``searched``
            (distinct texts sent to the backend), ``batches``, ``failed_batches``; seconds spent in
            the backend (``search_s``) and in the metric code (``metric_s``).

    Raises:
        InputError: a bad metric, depth, budget, keep rule, preset or cache size.
    """

    def __init__(self, backend, qrels, options: RewardOptions | None = None, **kwargs: Any) -> None:
        o = options_from(RewardOptions, options, kwargs, backend=str(kwargs.get("name", getattr(options, "name", "backend"))))
        self.options = o
        self.backend = backend
        self.qrels = qrels if isinstance(qrels, Qrels) else Qrels(qrels)
        self.name = str(o.name)
        self.incentive = o.rank_incentive or RankIncentive()
        depth, cache_size = o.depth, o.cache_size
        if depth < 1 or cache_size < 0:
            raise InputError(f"depth must be >= 1 and cache_size >= 0, got depth={depth}, cache_size={cache_size}")
        preset = query_budget(o.budget_preset)
        if o.budget_preset is not None and o.max_query_tokens is not None:
            raise InputError("give max_query_tokens or budget_preset, not both")
        mqt = check_max_tokens(o.max_query_tokens) if o.budget_preset is None else preset.max_query_tokens
        keep = o.keep if o.budget_preset is None else preset.keep
        if keep not in ("tail", "head"):
            raise InputError(f"keep must be 'tail' (drop the oldest words first) or 'head', got {keep!r}")
        self.budget: QueryBudget = QueryBudget(preset.name if o.budget_preset else "custom" if mqt else "evaluate", mqt, keep,
                                               preset.source if o.budget_preset else "")
        self.backend_budget = check_max_tokens(dict(backend_config(backend).get("query_budget") or {}).get("max_query_tokens"))
        self.depth, self.max_query_tokens, self.keep = int(depth), mqt, keep
        self.relevance_level, self.cache_size = int(o.relevance_level), int(cache_size)
        self.metric = self.check_metric(o.metric)
        self._cache: OrderedDict = OrderedDict()
        self._lock = threading.Lock()
        self.stats = {"rewrites": 0, "empty": 0, "truncated": 0, "replaced_text": 0, "cache_hits": 0, "searched": 0, "batches": 0, "failed_batches": 0,
                      "search_s": 0.0, "metric_s": 0.0}

    def check_metric(self, metric: str | Metric) -> str:
        """The canonical name of ``metric`` after checking it fits ``depth``.

        Raises:
            InputError: unknown metric, or a cutoff (rank incentive: last breakpoint) > ``depth``.
        """
        return str(self._parsed_metric(metric))

    def _parsed_metric(self, metric: str | Metric) -> Metric | str:
        """``metric`` parsed (:func:`parse_reward_metric`) and checked against ``depth``.

        Raises:
            InputError: see :meth:`check_metric`.
        """
        m = parse_reward_metric(metric)
        need = self.incentive.max_rank if m == RANK_INCENTIVE else m.k
        if need is not None and need > self.depth:
            raise InputError(f"metric {m} needs retrieval depth >= {need}, but depth is {self.depth}")
        return m

    def config(self) -> dict:
        """Every setting that changes a reward (JSON-ready)."""
        return {"backend": self.name, "backend_config": backend_config(self.backend), "metric": self.metric, "depth": self.depth,
                "max_query_tokens": self.max_query_tokens, "keep": self.keep, "query_budget": self.budget.to_json(),
                "backend_query_budget": self.backend_budget, "relevance_level": self.relevance_level,
                "rank_incentive": [list(p) for p in self.incentive.points], "cache_size": self.cache_size,
                "metric_code": "vdr.metrics.evaluate_run (one run entry per rewrite)"}

    def check_ids(self, query_ids: Sequence[object]) -> list[str]:
        """Query ids as strings.

        Raises:
            InputError: an id that is not a str or an integer.
            UnknownQueryError: ids without qrels (all of them listed).
        """
        ids = [q if type(q) is str else to_id(q, what="query id") for q in query_ids]
        unknown = [q for q in ids if q not in self.qrels]
        if unknown:
            from ..io.idjoin import join_ids

            j = join_ids(unknown, (q for q in self.qrels if q not in set(unknown)), what="query ids", left="request", right="qrels")
            hint = f"{len(j.pairs)} match a qrels query id only after normalisation: {j.pairs_text()}" if j.pairs else ""
            raise UnknownQueryError(unknown, hint)
        return ids

    def score(self, query_ids: Sequence[object], rewrites: Sequence[str | None], metric: str | None = None) -> list[float]:
        """One reward per rewrite (the plain adapter): ``evaluate(...).rewards``.

        Raises:
            InputError, UnknownQueryError, RewardError: see :meth:`evaluate`.
        """
        return self.evaluate(query_ids, rewrites, [metric or self.metric]).rewards

    def evaluate(self, query_ids: Sequence[object], rewrites: Sequence[str | None], metrics: Sequence[str] | None = None,
                 *, return_rows: bool = False, max_query_tokens: int | None = None) -> RewardBatch:
        """Search every rewrite and evaluate it against its query's qrels with ``evaluate_run``.

        Args:
            query_ids: the query each rewrite rewrites (repeats allowed: GRPO rollouts).
            rewrites: the rewrite texts (``None`` or whitespace-only: empty, see the module doc).
            metrics: metric names (default ``[self.metric]``); the first is the primary one.
            return_rows: also return each ranking (:attr:`RewardBatch.rows`).
            max_query_tokens: a tighter budget for this call (never looser than the rewarder's).

        Returns:
            :class:`RewardBatch`.

        Raises:
            InputError: lengths differ, a rewrite that is not a str or None, a bad metric.
            UnknownQueryError: ids without qrels.
            RewardError: the backend failed (the message names the query ids of the batch).
        """
        if len(query_ids) != len(rewrites):
            raise InputError(f"{len(query_ids)} query ids but {len(rewrites)} rewrites: one query id per rewrite")
        parsed = list(dict.fromkeys(self._parsed_metric(m) for m in (metrics or [self.metric])))
        ids = self.check_ids(query_ids)
        mine = self.max_query_tokens
        budget = mine if max_query_tokens is None else (max_query_tokens if mine is None else min(max_query_tokens, mine))
        texts, empty, truncated, replaced = self._prepare(rewrites, budget)
        with self._lock:
            rows, cached = self._rows(ids, texts)
            self.stats["rewrites"] += len(ids)
            self.stats["empty"] += sum(empty)
            self.stats["truncated"] += sum(truncated)
            self.stats["replaced_text"] += sum(1 for n in replaced if n)
            self.stats["batches"] += 1
        t0 = time.perf_counter()
        values, ranks = self._values(ids, rows, parsed)
        self.stats["metric_s"] += time.perf_counter() - t0
        out_rows = [Run.from_checked({"r": r}).ranked("r") for r in rows] if return_rows else None
        primary = str(parsed[0])
        return RewardBatch(primary, values[primary], values, ranks, empty, truncated, cached, out_rows, replaced)

    def _prepare(self, rewrites: Sequence[str | None], budget: int | None) -> tuple[list[str | None], list[bool], list[bool], list[int]]:
        texts: list[str | None] = []
        empty, truncated, replaced = [], [], []
        for n, t in enumerate(rewrites):
            if t is not None and not isinstance(t, str):
                raise InputError(f"rewrite {n} must be a string or null, got {type(t).__name__}")
            if t is not None and not t.isascii():
                t, bad = replace_lone_surrogates(t)
                replaced.append(bad)
            else:
                replaced.append(0)
            if t is None or not t.strip():
                texts.append(None)
                empty.append(True)
                truncated.append(False)
                continue
            t, cut = cut_words(t, budget, self.keep)
            t, cut_here = cut_words(t, self.backend_budget, "tail")  # what the backend itself would search
            cut = cut or cut_here
            texts.append(t)
            empty.append(False)
            truncated.append(cut)
        return texts, empty, truncated, replaced

    def _rows(self, ids: list[str], texts: list[str | None]) -> tuple[list[dict[str, float]], list[bool]]:
        """Each rewrite's ranking, from the cache or one backend call for the distinct new texts."""
        rows: list[dict | None] = [None] * len(ids)
        cached = [False] * len(ids)
        todo: dict[str, list[int]] = {}
        for n, (q, t) in enumerate(zip(ids, texts)):
            if t is None:
                rows[n] = {}
                continue
            hit = self._cache.get((self.name, q, t)) if self.cache_size else None
            if hit is not None:
                self._cache.move_to_end((self.name, q, t))
                rows[n], cached[n] = dict(zip(hit[0], hit[1].tolist())), True
            else:
                todo.setdefault(t, []).append(n)
        self.stats["cache_hits"] += sum(cached)
        if todo:
            keys = {f"r{j}": t for j, t in enumerate(todo)}
            t0 = time.perf_counter()
            try:
                run = _search(self.backend, keys, self.depth)
            except Exception as e:
                self.stats["failed_batches"] += 1
                qs = sorted({ids[n] for ns in todo.values() for n in ns})
                raise RewardError(f"retrieval failed for query id(s) {', '.join(map(repr, qs[:20]))}: {type(e).__name__}: {e}") from e
            self.stats["searched"] += len(keys)
            self.stats["search_s"] += time.perf_counter() - t0
            data = run._data if isinstance(run, Run) else run
            for key, t in keys.items():
                row = data.get(key) or {}  # not re-sorted: evaluate_run ranks it; rows are sorted only when returned
                for n in todo[t]:
                    rows[n] = row
                    self._remember(ids[n], t, row)
        return rows, cached

    def _remember(self, qid: str, text: str, row: dict[str, float]) -> None:
        """Keep ``row`` under (backend, query id, text), compactly: a tuple of the corpus ids (the
        backend's own str objects, not copies) and a float64 array of the scores (about 1.7 KB per
        entry at depth 100)."""
        if not self.cache_size:
            return
        key = (self.name, qid, text)
        self._cache[key] = (tuple(row), np.fromiter(row.values(), dtype=np.float64, count=len(row)))
        self._cache.move_to_end(key)
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)

    def _values(self, ids: list[str], rows: list[dict], metrics: list[Metric | str]) -> tuple[dict[str, list[float]], list[int]]:
        """``evaluate_run`` over one run entry per rewrite (key = its position) -> values (keyed by
        canonical name) and ranks; ``metrics`` parsed (:meth:`_parsed_metric`)."""
        keys = [str(n) for n in range(len(ids))]
        qd = self.qrels
        # rows come from backend runs (validated str ids, finite float scores) or the cache built from them
        pos_qrels = Qrels.from_checked({k: qd._data[q] for k, q in zip(keys, ids)})
        pos_run = Run.from_checked(dict(zip(keys, rows)))
        asked = [m for m in metrics if isinstance(m, Metric)]
        # a rewrite that retrieves no judged page earns 0: expected in training, neither an id-format error nor a warning
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", VdrWarning)
            res = evaluate_run(pos_qrels, pos_run, [*asked, _BEST_RANK], relevance_level=self.relevance_level, allow_unjudged=True,
                               allow_id_mismatch=True)  # ids are positions here; the request's ids were joined in check_ids
        order = np.array([int(k) for k in res.query_ids], dtype=np.int64)
        cols: dict[str, np.ndarray] = {}
        for m, v in res.values.items():
            col = np.empty(len(ids), dtype=np.float64)
            col[order] = v
            cols[m] = col
        mrr = cols[str(_BEST_RANK)]
        ranks = np.where(mrr > 0, np.rint(1.0 / np.where(mrr > 0, mrr, 1.0)), -1).astype(np.int64)
        out: dict[str, list[float]] = {}
        for m in metrics:
            v = self.incentive.values(ranks) if m == RANK_INCENTIVE else cols[str(m)]
            out[str(m)] = [float(x) for x in v]
        return out, ranks.tolist()

    def cache_info(self) -> dict:
        """``{"entries", "max_entries"}`` of the LRU cache."""
        return {"entries": len(self._cache), "max_entries": self.cache_size}


# --------------------------------------------------------------------------------------------
# extraction from completions

PRESETS: dict[str, dict] = {
    "plain": {"pattern": "plain", "format_regex": None, "format_penalty": 0.0, "penalty_mode": "add", "metric": None},
    # ConvSearch-R1 (BeastyZ/ConvSearch-R1, verl reward rewrite_r1): -0.1 replaces the rank reward
    # when the completion is not exactly <think>...</think>\n<rewrite>...</rewrite>.
    "convsearch-r1": {"pattern": "rewrite", "format_regex": CONVSEARCH_FORMAT, "format_penalty": -0.1,
                      "penalty_mode": "replace", "metric": RANK_INCENTIVE},
    # RL-QR (arXiv 2507.23242): nDCG@3, rewrite inside <answer>...</answer>; the penalty value is
    # vdr's default (the paper names a format penalty without a value we could confirm).
    "rl-qr": {"pattern": "answer", "format_regex": None, "format_penalty": -0.1, "penalty_mode": "replace", "metric": "ndcg@3"},
}
"""Extraction and format-penalty settings of the papers (see :class:`CompletionReward`)."""


def _completion_text(completion: object, n: int) -> str:
    """The text of completion ``n``: a str, or (conversational data) the last message's content."""
    if isinstance(completion, str):
        return completion
    msg = completion[-1] if isinstance(completion, list) and completion else completion
    if isinstance(msg, dict) and "content" in msg:
        content = msg["content"]
        if isinstance(content, str):
            return content
        if isinstance(content, list):  # content parts: [{"type": "text", "text": ...}, ...]
            return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type", "text") == "text")
        if content is None:
            return ""
    raise RewardError(f"completion {n} must be a string or a list of messages with 'content', got {type(completion).__name__}")


@dataclass(frozen=True)
class CompletionOptions:
    """Settings of a :class:`CompletionReward` (given as ``options`` or as keywords)."""

    label: ClassVar[str] = "CompletionReward"

    preset: str = option("plain", "plain, convsearch-r1 or rl-qr (PRESETS); the other fields override it")
    pattern: str | None = option(None, "See Extractor (default: the preset's)")
    format_regex: str | bool | None = option(False, "See Extractor (False: the preset's; None: none)")
    format_penalty: float | None = option(None, "The format penalty, e.g. -0.1 (default: the preset's)")
    penalty_mode: str | None = option(None, "replace or add (default: the preset's)")
    metric: str | None = option(None, "The metric (default: the preset's, else the scorer's)")
    query_id_key: str = option("query_id", "The dataset column / extra_info key of the query id")
    verl_id: str = option("extra_info", "Where verl passes the query id: extra_info or ground_truth")
    abstain: bool = option(False, "Return None for a completion whose retrieval failed instead of raising")
    name: str | None = option(None, "__name__ (TRL logs rewards under it); default vdr_<metric>", scores=False)
    health: Any = option(None, "A TrainingHealth fed by every call (None: a default one; a HealthOptions or dict: one with"
                               " these settings; False: none)", scores=False)
    query_text_key: str = option("query_text", "The dataset column / extra_info key of the query text (the off-script"
                                               " reference; TRL falls back to the prompt)", scores=False)
    verl_dict: bool = option(False, "compute_score returns {'score': reward, vdr_* health signals} (verl's reward_extra_info)",
                             scores=False)


class CompletionReward:
    """Completions -> rewards: the TRL reward function, verl's ``compute_score`` and a plain call.

    TRL (``GRPOTrainer(reward_funcs=[reward])``): ``reward(prompts, completions, **kwargs)``; the
    query ids come from the dataset column ``query_id_key`` (TRL passes every dataset column as a
    keyword argument, one value per completion); unknown keyword arguments (``completion_ids``,
    ``trainer_state``, ...) are accepted; completions may be strings or message lists. Returns exactly
    one finite float per completion (never NaN; ``None`` only with ``abstain=True``, counted).

    verl: ``reward.compute_score(data_source, solution_str, ground_truth, extra_info=None)`` with the
    query id in ``extra_info[query_id_key]`` (or in ``ground_truth`` with ``verl_id="ground_truth"``);
    lists for the four arguments (verl's batch reward manager) give a list.

    Reward of a completion: the metric of its extracted rewrite (a missing or empty rewrite
    scores 0); when the format is broken, ``penalty_mode="replace"`` gives ``format_penalty``
    instead (ConvSearch-R1) and ``"add"`` adds it.

    Args (``scorer``, then :class:`CompletionOptions` as ``options`` or as keywords):
        scorer: a :class:`Rewarder` (in process) or :class:`RemoteScorer` (``vdr serve``): anything
            with ``score(query_ids, rewrites, metric) -> list[float]``.
        preset: ``"plain"``, ``"convsearch-r1"`` or ``"rl-qr"`` (:data:`PRESETS`); the other
            arguments override it.
        pattern, format_regex: see :class:`Extractor`. format_penalty: a float (e.g. ``-0.1``).
        penalty_mode: ``"replace"`` or ``"add"``. metric: the metric (default: the preset's, else
            the scorer's). query_id_key: the dataset column / ``extra_info`` key of the query id.
        abstain: return ``None`` for a completion whose retrieval failed instead of raising.
        name: ``__name__`` (TRL logs rewards under it); default ``"vdr_<metric>"``.
        health: the :class:`~vdr.rewards.health.TrainingHealth` every call feeds (``None``: a new
            one with the default thresholds; a :class:`~vdr.rewards.health.HealthOptions` or a dict:
            a new one with these settings; ``False``: none). A TRL call, a verl call with lists
            and a plain :meth:`score_completions` call are one step each; verl's per-completion
            calls are buffered (``HealthOptions.step_size``).
        query_text_key: the dataset column (TRL) / ``extra_info`` key (verl) of the query text,
            the reference of the off-script check (TRL falls back to the prompt's last message).
        verl_dict: :meth:`compute_score` returns ``{"score": reward, "vdr_...": ...}`` (verl keeps
            the other keys in its ``reward_extra_info``) instead of a float.

    Health reporting: TRL gets each signal through the ``log_metric`` callable it passes to reward
    functions (``vdr/zero_advantage_share``, ``vdr/length_words``, ``vdr/length_chars``,
    ``vdr/length_drift``, ``vdr/format_break_share``, ``vdr/empty_share``,
    ``vdr/off_script_share``; a signal without a value this step is not logged) and a per-completion
    column ``vdr_health`` (``format_break``, ``empty``, ``off_script`` joined by ``+``, or ``""``) through
    ``log_extra``; verl through the dict of ``verl_dict``.

    Attributes:
        stats: ``completions``, ``format_broken``, ``not_extracted``, ``empty``, ``abstained``.
        health: the :class:`~vdr.rewards.health.TrainingHealth` (or ``None``).

    Raises:
        InputError: an unknown preset or penalty mode, a bad pattern or penalty.
    """

    def __init__(self, scorer, options: CompletionOptions | None = None, **kwargs: Any) -> None:
        o = options_from(CompletionOptions, options, kwargs, backend="CompletionReward")
        preset, pattern, format_regex, format_penalty, penalty_mode = o.preset, o.pattern, o.format_regex, o.format_penalty, o.penalty_mode
        metric, query_id_key, verl_id, abstain, name = o.metric, o.query_id_key, o.verl_id, o.abstain, o.name
        if preset not in PRESETS:
            raise InputError(f"unknown reward preset {preset!r}; known: {', '.join(PRESETS)}")
        base = PRESETS[preset]
        self.scorer = scorer
        self.extractor = Extractor(pattern or base["pattern"], base["format_regex"] if format_regex is False else format_regex)
        self.format_penalty = float(base["format_penalty"] if format_penalty is None else format_penalty)
        self.penalty_mode = penalty_mode or base["penalty_mode"]
        if self.penalty_mode not in ("replace", "add") or not math.isfinite(self.format_penalty):
            raise InputError(f"penalty_mode must be 'replace' or 'add' and format_penalty finite, got {self.penalty_mode!r}, {self.format_penalty!r}")
        if verl_id not in ("extra_info", "ground_truth"):
            raise InputError(f"verl_id must be 'extra_info' or 'ground_truth', got {verl_id!r}")
        self.metric = metric or base["metric"] or getattr(scorer, "metric", None)
        self.query_id_key, self.verl_id, self.abstain = query_id_key, verl_id, bool(abstain)
        self.__name__ = name or f"vdr_{self.metric or 'reward'}"
        self.health = _health_tracker(o.health)
        self.query_text_key, self.verl_dict = o.query_text_key, bool(o.verl_dict)
        if self.verl_dict and self.health is None:
            raise InputError("verl_dict=True returns the health signals: it needs health (not False)")
        self.stats = {"completions": 0, "format_broken": 0, "not_extracted": 0, "empty": 0, "abstained": 0}
        self._last = dict.fromkeys(self.stats, 0)

    def config(self) -> dict:
        """Extraction and penalty settings (JSON-ready)."""
        return {"pattern": self.extractor.pattern, "format_regex": self.extractor.format_regex, "format_penalty": self.format_penalty,
                "penalty_mode": self.penalty_mode, "metric": self.metric, "query_id_key": self.query_id_key, "abstain": self.abstain}

    def __call__(self, prompts=None, completions=None, **kwargs) -> list[float | None]:
        """TRL reward function: one reward per completion (see the class docstring).

        Raises:
            RewardError: no completions, no query-id column (the received keyword arguments are
                listed), a count mismatch (expected and received counts named), a failed retrieval.
            UnknownQueryError: query ids without qrels.
        """
        if completions is None:
            raise RewardError("the reward function got no 'completions'")
        ids = kwargs.get(self.query_id_key)
        if ids is None:
            raise RewardError(f"no query-id column {self.query_id_key!r} among the keyword arguments received:"
                              f" {sorted(kwargs)}; add a {self.query_id_key!r} column to the dataset (or set query_id_key)")
        if len(ids) != len(completions):
            raise RewardError(f"expected one query id per completion: {len(completions)} completions but {len(ids)} query ids")
        rewards, got = self._score(ids, completions)
        log = kwargs.get("log_metric")
        if callable(log) and completions:
            for key in ("format_broken", "empty"):
                log(f"vdr/{key}_fraction", self._last[key] / len(completions))
        if self.health is not None and completions:
            texts = kwargs.get(self.query_text_key)
            refs = list(texts) if texts is not None and len(texts) == len(completions) else _prompt_texts(prompts, len(completions))
            step = getattr(kwargs.get("trainer_state"), "global_step", None)
            signals = self.health.record(ids, rewards, [rw for rw, _ in got], [ok for _, ok in got], refs,
                                         label=step if isinstance(step, int) else None)
            _log_health(signals, self.health, got, refs, log, kwargs.get("log_extra"))
        return rewards

    def compute_score(self, data_source, solution_str, ground_truth, extra_info=None, **kwargs):
        """verl's reward signature (one completion -> float; lists -> list); other keyword
        arguments (newer verl versions pass more) are accepted and ignored.

        Raises:
            RewardError: no query id in ``extra_info`` (its keys listed), a failed retrieval.
        """
        batch = isinstance(solution_str, list)
        sols = solution_str if batch else [solution_str]
        gts = ground_truth if batch else [ground_truth]
        infos = (extra_info if extra_info is not None else [None] * len(sols)) if batch else [extra_info]
        if len(gts) != len(sols) or len(infos) != len(sols):
            raise RewardError(f"expected one ground_truth and extra_info per solution: {len(sols)} solutions, {len(gts)} ground truths, {len(infos)} extra_info")
        ids = [self._verl_query_id(gt, info) for gt, info in zip(gts, infos)]
        out, got = self._score(ids, sols)
        if self.health is not None:
            refs = [info.get(self.query_text_key) if isinstance(info, Mapping) else None for info in infos]
            refs = [r if isinstance(r, str) else None for r in refs]
            self.health.record(ids, out, [rw for rw, _ in got], [ok for _, ok in got], refs, whole_step=batch)
            if self.verl_dict:
                out = _verl_dicts(out, got, refs, self.health)
        return out if batch else out[0]

    def _verl_query_id(self, ground_truth, extra_info):
        if self.verl_id == "ground_truth":
            return ground_truth
        if not isinstance(extra_info, Mapping) or self.query_id_key not in extra_info:
            keys = sorted(extra_info) if isinstance(extra_info, Mapping) else type(extra_info).__name__
            raise RewardError(f"no query id: extra_info has no {self.query_id_key!r} key (got {keys}); put the query id"
                              f" in extra_info[{self.query_id_key!r}] when preparing the verl dataset")
        return extra_info[self.query_id_key]

    def score_completions(self, query_ids: Sequence[object], completions: Sequence[object]) -> list[float | None]:
        """One reward per completion (the plain adapter over completions); one step of :attr:`health`.

        Raises:
            RewardError: a count mismatch, a completion of a bad type, a failed retrieval (unless
                ``abstain``), a non-finite reward.
            UnknownQueryError: query ids without qrels.
        """
        out, got = self._score(query_ids, completions)
        if self.health is not None and out:
            self.health.record(query_ids, out, [rw for rw, _ in got], [ok for _, ok in got])
        return out

    def _score(self, query_ids: Sequence[object], completions: Sequence[object]) -> tuple[list[float | None], list[tuple[str | None, bool]]]:
        """The rewards and each completion's ``(rewrite, format_ok)``; see :meth:`score_completions`."""
        if len(query_ids) != len(completions):
            raise RewardError(f"expected one query id per completion: {len(completions)} completions but {len(query_ids)} query ids")
        got = [self.extractor.extract(_completion_text(c, n)) for n, c in enumerate(completions)]
        send = [rw if (ok or self.penalty_mode == "add") else None for rw, ok in got]
        metric = self._metric_values(list(query_ids), send)
        out: list[float | None] = []
        for (rw, ok), v in zip(got, metric):
            if v is None:
                out.append(None)
            elif ok:
                out.append(v)
            else:
                out.append(self.format_penalty if self.penalty_mode == "replace" else v + self.format_penalty)
        if any(v is not None and not math.isfinite(v) for v in out):
            raise RewardError("a reward is not finite (NaN or infinite); refusing to return it")
        self._last = {"format_broken": sum(not ok for _, ok in got), "not_extracted": sum(rw is None for rw, _ in got),
                      "empty": sum(rw is not None and not rw for rw, _ in got), "abstained": sum(v is None for v in out)}
        self.stats["completions"] += len(out)
        for k, v in self._last.items():
            self.stats[k] += v
        return out, got

    def _metric_values(self, ids: list, rewrites: list[str | None]) -> list[float | None]:
        """The scorer's values; on a failed retrieval with ``abstain``, ``None`` for the failing ids."""
        try:
            values = self.scorer.score(ids, rewrites, self.metric)
        except RewardError:
            if not self.abstain:
                raise
            values = None
        if values is not None:
            if len(values) != len(ids):  # a broken scorer (or server): never broadcast, never truncate
                raise RewardError(f"the scorer returned {len(values)} rewards for {len(ids)} completions")
            return [float(v) for v in values]
        out: list[float | None] = []
        for q, rw in zip(ids, rewrites):  # locate the failing ones
            try:
                got = self.scorer.score([q], [rw], self.metric)
            except RewardError:
                out.append(None)
                continue
            if len(got) != 1:
                raise RewardError(f"the scorer returned {len(got)} rewards for 1 completion (query id {q!r})")
            out.append(float(got[0]))
        return out


def _health_tracker(health: Any) -> TrainingHealth | None:
    """The :class:`TrainingHealth` of ``CompletionOptions.health``.

    Raises:
        InputError: a value that is none of None, False, a TrainingHealth, a HealthOptions or a dict.
    """
    if health is False:
        return None
    if health is None:
        return TrainingHealth()
    if isinstance(health, TrainingHealth):
        return health
    if isinstance(health, (HealthOptions, Mapping)):
        return TrainingHealth(health) if isinstance(health, HealthOptions) else TrainingHealth(**dict(health))
    raise InputError(f"health must be None, False, a TrainingHealth, a HealthOptions or a dict, got {type(health).__name__}")


def _prompt_texts(prompts: object, n: int) -> list[str | None]:
    """Each prompt's text (conversational prompts: the last message's content); ``None`` each when absent."""
    if not isinstance(prompts, (list, tuple)) or len(prompts) != n:
        return [None] * n
    out: list[str | None] = []
    for k, p in enumerate(prompts):
        try:
            out.append(_completion_text(p, k))
        except RewardError:
            out.append(None)
    return out


def _flags(got: list[tuple[str | None, bool]], refs: Sequence[str | None], health: TrainingHealth) -> list[str]:
    """Each completion's health flags (:meth:`TrainingHealth.flags`) as one string for TRL's
    completions table: ``"format_break"``, ``"empty"``, ``"off_script"`` joined by ``+``, or ``""``."""
    return ["+".join(k for k, v in health.flags(rw, ok, ref).items() if v) for (rw, ok), ref in zip(got, refs)]


def _log_health(signals: dict | None, health: TrainingHealth, got, refs, log_metric, log_extra) -> None:
    """TRL: each signal of the closed step through ``log_metric`` (``vdr/<signal>``), each
    completion's flag through ``log_extra`` (column ``vdr_health``)."""
    if signals is not None and callable(log_metric):
        for key in ("zero_advantage_share", "length_words", "length_chars", "length_drift", "format_break_share", "empty_share",
                    "off_script_share"):
            if signals[key] is not None:
                log_metric(f"vdr/{key}", float(signals[key]))
    if callable(log_extra):
        log_extra("vdr_health", _flags(got, refs, health))


def _verl_dicts(rewards: list, got, refs, health: TrainingHealth) -> list[dict]:
    """verl's ``{"score": reward, ...}`` per completion: its own flags (``vdr_format_break``,
    ``vdr_empty``, ``vdr_off_script``: 0.0 or 1.0; ``vdr_rewrite_words``: NaN without a rewrite) --
    their batch means are the step's shares -- and the last closed step's ``vdr_zero_advantage_share``
    and ``vdr_length_drift`` (NaN while unknown). Every dict has the same keys (verl stacks them)."""
    last = health.last or {}
    nan = float("nan")
    step = {f"vdr_{k}": (nan if last.get(k) is None else float(last[k])) for k in ("zero_advantage_share", "length_drift")}
    out = []
    for r, (rw, ok), ref in zip(rewards, got, refs):
        f = health.flags(rw, ok, ref)
        out.append({"score": r, **{f"vdr_{k}": float(v) for k, v in f.items()},
                    "vdr_rewrite_words": nan if rw is None else float(len(rw.split())), **step})
    return out


class RemoteScorer:
    """Score rewrites through a ``vdr serve`` server (``POST /reward``): the scorer of a trainer
    that runs in another process or machine than the retrieval index.

    Args:
        url: the server's base URL (``http://127.0.0.1:8000``).
        metric: default metric (default: the server's).
        token: a bearer token; default the value of the environment variable ``token_env``
            (if given). Never logged.
        timeout: seconds per request.

    Raises:
        InputError: an empty URL or a named token variable that is unset.
    """

    def __init__(self, url: str, *, metric: str | None = None, token: str | None = None, token_env: str | None = None,
                 timeout: float = 300.0) -> None:
        if not url:
            raise InputError("RemoteScorer needs the server URL, e.g. http://127.0.0.1:8000")
        if token is None and token_env:
            token = os.environ.get(token_env)
            if not token:
                raise InputError(f"environment variable {token_env} (the bearer token) is not set")
        self.url, self.metric, self._token, self.timeout = url.rstrip("/"), metric, token, float(timeout)

    def score(self, query_ids: Sequence[object], rewrites: Sequence[str | None], metric: str | None = None) -> list[float]:
        """``POST /reward``; the ``rewards`` of the answer.

        Raises:
            UnknownQueryError: the server answered 422 with unknown query ids.
            RewardError: any other failure (HTTP status and the server's message named).
        """
        import urllib.error
        import urllib.request

        body = {"query_ids": [q if isinstance(q, str) else to_id(q, what="query id") for q in query_ids], "rewrites": list(rewrites)}
        if metric or self.metric:
            body["metric"] = metric or self.metric
        req = urllib.request.Request(self.url + "/reward", data=json.dumps(body).encode("utf-8"), method="POST",
                                     headers={"Content-Type": "application/json"})
        if self._token:
            req.add_header("Authorization", f"Bearer {self._token}")
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(req, timeout=self.timeout) as resp:
                return [float(x) for x in json.loads(resp.read())["rewards"]]
        except urllib.error.HTTPError as e:
            try:
                detail = json.loads(e.read())
            except (ValueError, OSError):
                detail = {}
            if e.code == 422 and detail.get("unknown_query_ids"):
                raise UnknownQueryError(detail["unknown_query_ids"]) from None
            raise RewardError(f"reward server {self.url}: HTTP {e.code}: {detail.get('error', e.reason)}") from None
        except (urllib.error.URLError, OSError, ValueError, KeyError) as e:
            raise RewardError(f"reward server {self.url}: {type(e).__name__}: {e}") from None
