"""Served systems against exact MaxSim (issue 36, item 3): does a compressed index or a search engine
rank like the exact backend, does it lose quality, and do the rewrites' gains survive it?

A *served system* S is a backend whose ``config["backend_config"][S]`` holds a ``served`` mapping
(``{"exact": E, "system", "kind": "compression" | "engine", "parameters", "source"}``): it ranks the
same queries from the page vectors of the exact backend ``E`` (``multimodal``: ColPali MaxSim) after
compression or through an engine. :func:`served_audit` compares every S with its E, both as they
ran in one evaluation (rankings and trec_eval-exact per-query metrics of :class:`~vdr.results.Results`):

1. Agreement of the rankings, per query of the ``original`` variant:
   ``overlap@k = |top_k(S) ∩ top_k(E)| / k`` for k = 10 and the primary metric's cutoff. The
   denominator is always ``k``, as most papers write it: a query for which a system retrieved
   fewer than k pages scores below 1 even when both lists agree (nothing is extrapolated).
   Rank-biased overlap, :func:`rbo` with p = 0.9: the extrapolated ``RBO_ext`` of Webber, Moffat
   & Zobel (2010, ACM TOIS 28(4), eq. 32) over the two rankings to their common depth (the
   evaluation's ``depth``; both are searched to it). Rankings are vdr's trec_eval order (score
   descending, then page id descending: :meth:`vdr.types.Run.ranked`).
2. The change of the primary metric: per query ``m(S, original, q) - m(E, original, q)``; its mean,
   95% percentile-bootstrap CI, two-sided paired randomization (sign-flip) p and W/T/L
   (:func:`vdr.stats.compare_arrays`, with the evaluation's ``seed``, ``n_permutations`` and
   ``n_bootstrap``).
3. Whether each rewrite's gain survives: per rewrite variant v and query,
   ``gain_E(q) = m(E, v, q) - m(E, original, q)`` and ``gain_S(q)`` alike; the paired test of
   ``d(q) = gain_S(q) - gain_E(q)`` and a verdict (:func:`gain_verdict`).
4. Storage per page (``bytes_per_page`` of S's and E's backend config) and time per query
   (``score_seconds`` over ``num_queries`` of the backend reports' ``searches``, summed over the
   variants both report; query encoding excluded), with the ratios S / E.
5. Every p-value of the audit (each system's change test and its gain-difference tests, all
   systems) forms ONE Holm family (:func:`vdr.stats.holm`): ``p_value_holm`` beside ``p_value``; a
   difference is significant when ``p_value_holm <= alpha`` (the evaluation's ``alpha``).

Queries: the evaluated query set (the qrels'); a query whose metric is undefined (NaN) in one of
the runs a test pairs is left out of that test (``n_queries`` says how many were paired). A served
system that cannot be audited (its exact backend did not run, no ``original`` run) is listed with
the reason (``skipped``), never dropped.

Reranked systems (issue 37, item 3: ``vdr evaluate --rerank MODEL``) are audited against their base
the same way by :func:`rerank_audit` (results.json ``rerank_audit``, its own Holm family): a backend
whose config holds a ``rerank`` mapping is compared with ``rerank["base"]``. Its entries carry
``"relation": "rerank"`` and ``"reference"`` (the base); the keys keep the served audit's names, so
there ``exact*`` is the base (before reranking) and ``served*`` the reranked system (after):
``gain_exact`` is the rewrite's gain before reranking, ``gain_served`` after, and the verdict says
whether the gain holds (``survives``) after reranking.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import InputError
from ..metrics.registry import parse_metric
from ..results import Results, json_safe, metric_title
from ..stats import ALPHA, Comparison, compare_arrays, describe_test, format_alpha, format_p, holm, outcome
from ..types import ORIGINAL

__all__ = ["served_audit", "served_systems", "rerank_audit", "reranked_systems", "RERANK_AUDIT_KEY", "overlap_at", "rbo", "gain_verdict", "GAIN_VERDICTS", "RBO_P", "OVERLAP_K",
           "AUDIT_KEY"]

#: The persistence of :func:`rbo` in the audit (the expected depth a user looks at is 1 / (1 - p) = 10).
RBO_P = 0.9
#: The fixed overlap cutoff of the audit (the primary metric's cutoff is added).
OVERLAP_K = 10
#: The results.json key (and :attr:`vdr.results.Results.served_audit`).
AUDIT_KEY = "served_audit"
#: The results.json key of the reranked systems' audit (and :attr:`vdr.results.Results.rerank_audit`).
RERANK_AUDIT_KEY = "rerank_audit"
#: The verdicts of :func:`gain_verdict`, with their rule.
GAIN_VERDICTS = {
    "survives": "the served gain has the exact gain's sign (or the exact gain is 0) and their difference is not significant",
    "shrinks": "same sign, the difference is significant and the served gain is smaller in magnitude",
    "grows": "same sign (or an exact gain of 0), the difference is significant and the served gain is larger in magnitude",
    "lost": "the exact gain is non-zero and the served gain is 0, or of the opposite sign without a significant difference",
    "reversed": "the two gains have opposite signs (both non-zero) and the difference is significant",
}


def served_systems(config: Mapping[str, Any]) -> dict[str, dict]:
    """The served systems of an evaluation: ``{backend: served mapping}`` for every backend whose
    ``config["backend_config"][backend]`` holds a ``served`` mapping (its exact reference is
    ``served["exact"]``), in backend-config order; ``{}`` when none."""
    out = {}
    for name, bc in (config.get("backend_config") or {}).items():
        served = bc.get("served") if isinstance(bc, Mapping) else None
        if isinstance(served, Mapping):
            out[str(name)] = dict(served)
    return out


def reranked_systems(config: Mapping[str, Any]) -> dict[str, dict]:
    """The reranked systems of an evaluation, as :func:`served_systems` gives served ones:
    ``{backend: {"exact": base, "kind": "rerank", "parameters": {model, kind, library, depth}}}``
    for every backend whose ``backend_config`` holds a ``rerank`` mapping; ``{}`` when none."""
    out = {}
    for name, bc in (config.get("backend_config") or {}).items():
        rr = bc.get("rerank") if isinstance(bc, Mapping) else None
        if isinstance(rr, Mapping):
            params = {k: rr.get(k) for k in ("model", "kind", "library", "depth")}
            out[str(name)] = {"exact": rr.get("base"), "kind": "rerank", "parameters": params}
    return out


def overlap_at(a: Sequence[str], b: Sequence[str], k: int) -> float:
    """``|a[:k] ∩ b[:k]| / k``: the share of the top k two rankings have in common.

    The denominator is ``k`` even when a ranking holds fewer than k items (a system that retrieved
    fewer pages scores below 1), as most papers define overlap@k.

    Args:
        a, b: ranked item ids, best first (no repeats).
        k: the cutoff, >= 1.

    Raises:
        InputError: ``k`` < 1.

    >>> overlap_at(["a", "b", "c"], ["b", "a", "d"], 2), overlap_at(["a"], ["a"], 10)
    (1.0, 0.1)
    """
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise InputError(f"overlap cutoff k must be an integer >= 1, got {k!r}")
    return len(set(a[:k]) & set(b[:k])) / k


def rbo(a: Sequence[str], b: Sequence[str], p: float = RBO_P, depth: int | None = None) -> float:
    """Extrapolated rank-biased overlap ``RBO_ext`` of two rankings (Webber, Moffat & Zobel 2010, "A
    similarity measure for indefinite rankings", ACM TOIS 28(4), eq. 32).

    With S the shorter list (length s), L the longer (length l), ``X_d`` the size of the overlap of
    their prefixes of depth d (for d > s: of all of S with L's prefix of depth d)::

        RBO_ext = (1-p)/p * [ sum_{d=1..l} X_d/d * p^d + sum_{d=s+1..l} X_s (d-s) / (s d) * p^d ]
                  + [ (X_l - X_s)/l + X_s/s ] * p^l

    For lists of equal length k it is eq. 30, ``X_k/k p^k + (1-p)/p sum_{d=1..k} X_d/d p^d``:
    identical lists give 1, disjoint lists 0. Two empty lists give 1 (they agree), one empty list 0.

    Args:
        a, b: ranked item ids, best first (no repeats).
        p: persistence in (0, 1) (0.9: the top 10 carry 86% of the weight).
        depth: cut both rankings to this depth first (their common depth); ``None``: as given.

    Returns:
        A float in [0, 1].

    Raises:
        InputError: ``p`` not in (0, 1), a ``depth`` < 1, or an item repeated in one ranking.

    >>> round(rbo(list("abcde"), list("bcdae"), 0.9), 4)
    0.828
    """
    if not 0 < p < 1:
        raise InputError(f"RBO persistence p must lie in (0, 1), got {p!r}")
    if depth is not None:
        if depth < 1:
            raise InputError(f"RBO depth must be >= 1, got {depth!r}")
        a, b = a[:depth], b[:depth]
    for x in (a, b):
        if len(set(x)) != len(x):
            raise InputError("a ranking lists an item twice; RBO needs rankings without repeats")
    if not a or not b:
        return 1.0 if not a and not b else 0.0
    short, long_ = (a, b) if len(a) <= len(b) else (b, a)
    s, n = len(short), len(long_)
    seen_s: set = set()
    seen_l: set = set()
    x = 0  # X_d, updated item by item
    total = 0.0
    for d in range(1, n + 1):
        new_l = long_[d - 1]
        if d <= s:
            new_s = short[d - 1]
            x += (new_s == new_l) + (new_s in seen_l) + (new_l in seen_s)
            seen_s.add(new_s)
            if d == s:
                x_s = x
        else:
            x += new_l in seen_s
        seen_l.add(new_l)
        total += x / d * p ** d
        if d > s:
            total += x_s * (d - s) / (s * d) * p ** d
    value = (1 - p) / p * total + ((x - x_s) / n + x_s / s) * p ** n
    return min(1.0, max(0.0, value))


def gain_verdict(gain_exact: float, gain_served: float, p_value_holm: float | None, alpha: float = ALPHA) -> str:
    """Whether a rewrite's gain measured on the exact backend survives on a served system.

    With ``sig`` = the difference ``gain_served - gain_exact`` is significant (``p_value_holm <=
    alpha``; a NaN or ``None`` p and a zero difference are never significant) and the signs of the
    two mean gains (0 counts as its own sign):

    * ``"reversed"``: opposite signs (both non-zero) and ``sig``;
    * ``"lost"``: the exact gain is non-zero and the served gain is 0, or of the opposite sign
      without ``sig`` (the direction is not kept, though the data cannot tell the two apart);
    * ``"survives"``: same sign (or an exact gain of 0) and not ``sig``;
    * ``"shrinks"`` / ``"grows"``: same sign (or an exact gain of 0) and ``sig``; the served gain
      smaller / larger in magnitude.

    Raises:
        InputError: ``alpha`` not in (0, 1).

    >>> gain_verdict(0.07, 0.05, 0.45), gain_verdict(0.07, 0.01, 0.01), gain_verdict(0.07, -0.02, 0.01)
    ('survives', 'shrinks', 'reversed')
    >>> gain_verdict(0.07, -0.01, 0.30), gain_verdict(0.0, 0.05, 0.01), gain_verdict(0.07, 0.0, 0.2)
    ('lost', 'grows', 'lost')
    """
    diff = gain_served - gain_exact
    sig = outcome(diff, math.nan if p_value_holm is None else p_value_holm, alpha) != "ns"
    se, ss = np.sign(gain_exact), np.sign(gain_served)
    if se != 0 and ss == -se:
        return "reversed" if sig else "lost"
    if se != 0 and ss == 0:
        return "lost"
    if not sig:
        return "survives"
    return "shrinks" if abs(gain_served) < abs(gain_exact) else "grows"


# --------------------------------------------------------------------------------------------- the audit


def served_audit(res: Results) -> dict:
    """The audit of every served system of ``res`` against its exact backend (see the module
    docstring): what results.json holds under ``served_audit``.

    Args:
        res: an evaluation's results with their rankings (in memory, or readable run files) and
            ``config`` (``backend_config``, ``seed``, ``n_permutations``, ``n_bootstrap``, ``alpha``,
            ``depth``), ``backend_reports`` (``searches``: ``score_seconds``, ``num_queries``).

    Returns:
        ``{}`` when no backend is served; else ``{"metric", "overlap_k", "rbo_p", "alpha", "test",
        "verdict_rules", "systems": [...]}`` (strict-JSON types: NaN as ``None``), one entry per
        served system in backend-config order (:func:`_system` for its keys; ``{"system", "exact",
        "kind", "skipped": reason}`` when it cannot be audited). Every entry's ``p_value_holm``
        (the change's and each gain difference's) is adjusted over one family of every test.

    Raises:
        InputError: bad ``seed`` / counts in ``config`` (as :func:`vdr.stats.compare_arrays`).
    """
    return _audit(res, served_systems(res.config), "served")


def rerank_audit(res: Results) -> dict:
    """The audit of every reranked system of ``res`` against its base backend (see the module
    docstring): what results.json holds under ``rerank_audit``, as :func:`served_audit` (one Holm
    family over every test of the reranked systems); each entry adds ``relation`` (``"rerank"``) and
    ``reference`` (the base). ``{}`` when no backend is reranked.

    Raises:
        InputError: bad ``seed`` / counts in ``config``.
    """
    return _audit(res, reranked_systems(res.config), "rerank")


def _audit(res: Results, systems: Mapping[str, Mapping], relation: str) -> dict:
    """:func:`served_audit` (``relation="served"``) or :func:`rerank_audit` (``"rerank"``) of ``systems``."""
    if not systems:
        return {}
    metric = res.primary
    cut = parse_metric(metric).k
    ks = sorted({OVERLAP_K, *([cut] if cut else [])})
    cfg = res.config
    stats = {"n_permutations": int(cfg.get("n_permutations") or 10_000), "n_bootstrap": int(cfg.get("n_bootstrap") or 10_000),
             "seed": int(cfg.get("seed") or 0)}
    alpha = float(cfg.get("alpha") or ALPHA)
    entries, tests = [], []
    for name, served in systems.items():
        entry, comps = _system(res, name, served, metric, ks, stats)
        entries.append(entry)
        tests += comps
    labels = _adjust(entries, tests)
    for e in entries:
        if "skipped" not in e:
            for g in (g for g in e["gains"] if "skipped" not in g):
                g["verdict"] = gain_verdict(g["gain_exact"], g["gain_served"], g["p_value_holm"], alpha)
            e["outcome"] = outcome(e["delta"], e["p_value_holm"], alpha)
            e["verdict"] = _sentence(e, metric, alpha, relation)
        if relation == "rerank":
            e.update(relation="rerank", reference=e.get("exact"))
    test = {"p_value": "two-sided paired randomization (sign-flip) test (exact enumeration when n <= 16 and 2^n <= n_permutations)",
            "description": describe_test([c for _, c in tests]) if tests else "",
            "ci95": "percentile bootstrap of the mean difference", "p_value_holm": "Holm-Bonferroni step-down over holm_family:"
            f" every test of the audit, all {'reranked' if relation == 'rerank' else 'served'} systems (Holm 1979)", "holm_family": labels, **stats,
            "overlap": ("|top_k(reranked) ∩ top_k(base)|" if relation == "rerank" else "|top_k(served) ∩ top_k(exact)|")
            + " / k on the original queries; the denominator is k even when fewer pages"
            " were retrieved", "rbo": f"RBO_ext (Webber, Moffat & Zobel 2010, TOIS, eq. 32), p = {RBO_P}, over both rankings to"
            f" depth {cfg.get('depth')}, trec_eval order"}
    return json_safe({"metric": metric, "overlap_k": ks, "rbo_p": RBO_P, "alpha": alpha, "test": test,
                      "verdict_rules": dict(GAIN_VERDICTS), "systems": entries})


def _adjust(entries: list[dict], tests: list[tuple[dict, Comparison]]) -> list[str]:
    """Holm over every test of the audit (one family): each test's entry (a system entry or a gain
    entry) gets ``p_value_holm``; returns the family's labels in order."""
    adj = holm([c.p_value for _, c in tests])
    for (target, _), a in zip(tests, adj):
        target["p_value_holm"] = float(a)
    return [target["label"] for target, _ in tests]


def _skip(name: str, served: Mapping, reason: str) -> dict:
    return {"system": name, "exact": served.get("exact"), "kind": served.get("kind"), "skipped": reason}


def _system(res: Results, name: str, served: Mapping, metric: str, ks: list[int], stats: dict) -> tuple[dict, list]:
    """One served system's entry and its tests ``[(entry it belongs to, Comparison)]`` (the change
    first, then a gain difference per rewrite variant). Keys: ``system, exact, kind, parameters,
    served_value, exact_value, delta, ci95, p_value, (p_value_holm), wins, ties, losses, n_queries,
    overlap@k..., rbo, bytes_per_page, exact_bytes_per_page, storage_ratio, ms_per_query,
    exact_ms_per_query, time_ratio, gains, per_query`` (then ``outcome``, ``verdict``)."""
    exact = served.get("exact")
    why = _missing(res, name, exact)
    if why:
        return _skip(name, served, why), []
    qids, e_vals, s_vals = _paired(res, [(exact, ORIGINAL), (name, ORIGINAL)], metric)
    if not qids:
        return _skip(name, served, f"no query has a defined {metric} on both {name} and {exact}"), []
    c = compare_arrays(e_vals, s_vals, metric, variant=name, **stats)
    entry: dict[str, Any] = {"system": name, "exact": exact, "kind": served.get("kind"), "parameters": served.get("parameters"),
                             "label": f"{name}:{metric}", "served_value": c.rewritten, "exact_value": c.original,
                             "delta": c.delta, "ci95": list(c.ci95), "p_value": c.p_value, "p_value_holm": None,
                             "wins": c.wins, "ties": c.ties, "losses": c.losses, "n_queries": c.n_queries}
    agree = _agreement(res, name, exact, ks)
    for key in [*(f"overlap@{k}" for k in ks), "rbo"]:
        xs = [v[key] for v in agree.values()]
        entry[key] = math.fsum(xs) / len(xs) if xs else None
    entry.update(_costs(res, name, exact))
    tests: list = [(entry, c)]
    entry["gains"] = []
    for v in [v for v in res.rewrite_variants if res.has_run(exact, v) or res.has_run(name, v)]:
        g, cv = _gain(res, name, exact, v, metric, stats)
        entry["gains"].append(g)
        if cv is not None:
            tests.append((g, cv))
    deltas = dict(zip(qids, (s_vals - e_vals).tolist()))
    entry["per_query"] = {q: {"delta": deltas.get(q), **a} for q, a in agree.items()}
    return entry, tests


def _missing(res: Results, name: str, exact: object) -> str:
    """Why served system ``name`` cannot be audited against ``exact``, or ``""``."""
    if not isinstance(exact, str) or not exact:
        return f"its served config names no exact backend (served.exact = {exact!r})"
    if exact == name:
        return "its served config names itself as the exact backend"
    if exact not in res.backends:
        why = res.skipped.get(exact)
        return f"its exact backend {exact} did not run" + (f": {why}" if why else " (not among the evaluated backends)")
    for b in (exact, name):
        if not res.has_run(b, ORIGINAL):
            return f"{b} has no run of the {ORIGINAL} queries"
    return ""


def _paired(res: Results, runs: Sequence[tuple[str, str]], metric: str) -> tuple[list[str], np.ndarray, np.ndarray]:
    """The queries of ``runs[0]`` whose ``metric`` is defined (finite) in every run of ``runs``, and
    the values of the first and second run on them, float64 arrays of shape ``(n,)``. With four runs
    ``[(E, v), (S, v), (E, o), (S, o)]`` the arrays are the gains ``run0 - run2`` and ``run1 - run3``."""
    per = [dict(zip(res.run(b, v).metrics.query_ids, res.run(b, v).metrics.values[metric].tolist())) for b, v in runs]
    qids = [q for q in per[0] if all(q in p and p[q] is not None and math.isfinite(p[q]) for p in per)]
    col = [np.array([p[q] for q in qids], dtype=np.float64) for p in per]
    if len(runs) == 4:
        return qids, col[0] - col[2], col[1] - col[3]
    return qids, col[0], col[1]


def _agreement(res: Results, name: str, exact: str, ks: list[int]) -> dict[str, dict[str, float]]:
    """Per query of the evaluated set (the exact backend's ``original`` run's queries, in order):
    ``{"overlap@k": ..., "rbo": ...}`` of the served and exact rankings of the ``original`` queries."""
    depth = res.config.get("depth")
    depth = int(depth) if isinstance(depth, int) and not isinstance(depth, bool) and depth >= 1 else None
    out = {}
    for q in res.run(exact, ORIGINAL).metrics.query_ids:
        e = [d for d, _ in res.ranked(exact, ORIGINAL, q, k=None)]
        s = [d for d, _ in res.ranked(name, ORIGINAL, q, k=None)]
        out[q] = {**{f"overlap@{k}": overlap_at(s, e, k) for k in ks}, "rbo": rbo(s, e, RBO_P, depth)}
    return out


def _gain(res: Results, name: str, exact: str, variant: str, metric: str, stats: dict) -> tuple[dict, Comparison | None]:
    """Variant ``variant``'s gain over ``original`` on the exact and served backends, and the paired
    test of their difference; ``({"variant", "skipped": reason}, None)`` when one backend has no run
    of the variant or no query has the metric defined in all four runs."""
    lacking = [b for b in (exact, name) if not res.has_run(b, variant)]
    if lacking:
        return {"variant": variant, "skipped": f"{lacking[0]} has no run of variant {variant}"}, None
    qids, ge, gs = _paired(res, [(exact, variant), (name, variant), (exact, ORIGINAL), (name, ORIGINAL)], metric)
    if not qids:
        return {"variant": variant, "skipped": f"no query has a defined {metric} in the four runs"}, None
    c = compare_arrays(ge, gs, metric, variant=f"{name}:{variant}", **stats)
    g = {"variant": variant, "label": f"{name}:{variant}:gain:{metric}", "gain_exact": c.original, "gain_served": c.rewritten,
         "difference": c.delta, "ci95": list(c.ci95), "p_value": c.p_value, "p_value_holm": None, "wins": c.wins, "ties": c.ties, "losses": c.losses,
         "n_queries": c.n_queries}
    return g, c


def _costs(res: Results, name: str, exact: str) -> dict:
    """Storage per page and time per query of the served and exact backends, and the ratios
    served / exact (``None`` where a value is not recorded, or the exact one is 0)."""
    bc = res.config.get("backend_config") or {}
    bs, be = (_number((bc.get(b) or {}).get("bytes_per_page")) for b in (name, exact))
    rs, re_ = ((res.backend_reports.get(b) or {}).get("searches") or {} for b in (name, exact))
    both = [v for v in rs if v in re_ and all(_number((x.get(v) or {}).get("score_seconds")) is not None for x in (rs, re_))]
    ts, te = (_ms_per_query(x, both) for x in (rs, re_))
    return {"bytes_per_page": bs, "exact_bytes_per_page": be, "storage_ratio": _ratio(bs, be),
            "ms_per_query": ts, "exact_ms_per_query": te, "time_ratio": _ratio(ts, te), "timed_variants": both}


def _number(x: object) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) else None


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _ms_per_query(searches: Mapping, variants: list[str]) -> float | None:
    """``1000 * sum(score_seconds) / sum(num_queries)`` over ``variants`` (``None``: no query)."""
    n = sum(int(searches[v].get("num_queries") or 0) for v in variants)
    return 1000.0 * math.fsum(float(searches[v]["score_seconds"]) for v in variants) / n if n else None


def _sentence(e: dict, metric: str, alpha: float, relation: str = "served") -> str:
    """The entry's verdict line: ``"multimodal-binary: -0.021 nDCG@3 vs exact multimodal [95% CI
    -0.040, -0.003], significant loss after Holm (p 0.012, α 0.05); rewrite keywords: gain +0.070 -> +0.050
    (survives: difference -0.020 not significant, p 0.45)"``."""
    lo, hi = e["ci95"]
    status = {"gain": "significant gain", "loss": "significant loss", "ns": "not significant"}[e["outcome"]]
    a = format_alpha(alpha)
    ref = "base" if relation == "rerank" else "exact"
    text = (f"{e['system']}: {e['delta']:+.3f} {metric_title(metric)} vs {ref} {e['exact']} [95% CI {lo:+.3f}, {hi:+.3f}],"
            f" {status} after Holm (p {format_p(e['p_value_holm'], alpha, 'sentence')}, \u03b1 {a})")
    for g in e["gains"]:
        if "skipped" in g:
            text += f"; rewrite {g['variant']}: not compared ({g['skipped']})"
            continue
        sig = outcome(g["difference"], g["p_value_holm"], alpha) != "ns"
        pair = (f"{g['gain_exact']:+.3f} before reranking, {g['gain_served']:+.3f} after" if relation == "rerank"
                else f"{g['gain_exact']:+.3f} -> {g['gain_served']:+.3f}")
        text += (f"; rewrite {g['variant']}: gain {pair} ({g['verdict']}: difference"
                 f" {g['difference']:+.3f} {'significant' if sig else 'not significant'},"
                 f" p {format_p(g['p_value_holm'], alpha, 'sentence')})")
    return text
