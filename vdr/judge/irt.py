"""Calibration of Stage A scores by one 2PL item-response model over all Stage B answers, and the
RCP-nDCG gain.

Source: RCP-nDCG paper (arXiv 2609.35739); reference documentation of cohere-ai/rcp-ndcg,
``docs/concepts/calibration.md`` and ``docs/concepts/metric.md``. For criterion ``c`` (discrimination
``gamma_c > 0``, difficulty ``beta_c``, shared by all queries) and query ``j`` (scale ``tau_j > 0``,
offset ``alpha_j``), a rubric answer of page ``i`` passes with probability::

    P(Y_ijc = 1) = sigmoid(gamma_c * (tau_j * theta_BT_i + alpha_j - beta_c))

with the Bradley-Terry scores ``theta_BT`` of Stage A held fixed. The calibrated ability is
``theta_ij = tau_j * theta_BT_i + alpha_j``; since ``tau_j > 0`` it keeps Stage A's order within the
query. Identification: ``sum_c gamma_c = C`` and ``mean_c beta_c = 0``; parameterised as
``tau = softplus(t)``, ``gamma = C * softmax(u)``, ``beta = v - mean(v)``. The MAP objective is::

    1/(N C) * [ sum_nc BCE_nc + sum_j ((tau_j - 1)^2 / (2 s_tau^2) + alpha_j^2 / (2 s_alpha^2)) ]
        + (lambda / 2) * sum_c (u_c^2 + v_c^2)

(``N`` rubric placements, each answering all ``C`` criteria; priors ``tau ~ N(1, 1)``,
``alpha ~ N(0, 2^2)``; ``lambda = 1e-4``), minimised with L-BFGS (<= 500 iterations) from
``tau = 1, alpha = 0`` and equal criteria. The gain is::

    g(theta) = sum_c gamma_c * sigmoid(gamma_c * (theta - beta_c)) / sum_c gamma_c   in (0, 1)

A page added after the fit is scored with every fitted parameter frozen: from its rubric answers
by the posterior mean (EAP) under a normal prior with the mean and standard deviation of the
calibration's abilities (reference ``score_documents``), or from Stage A windows against existing
pages by a conditional Bradley-Terry fit mapped through the query's ``tau_j, alpha_j`` (reference
``insert_documents``); see :meth:`Calibration.score_from_rubric` / :meth:`Calibration.score_from_windows`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit, log_expit, softmax

from .bradley_terry import fit_new_item

__all__ = ["Priors", "ItemParams", "Calibration", "RubricObservation", "fit_2pl", "gain", "pass_probabilities"]


@dataclass(frozen=True)
class Priors:
    """MAP settings of the 2PL fit (paper / reference defaults).

    Attributes:
        sigma_tau: prior sd of ``tau_j`` around 1. sigma_alpha: prior sd of ``alpha_j`` around 0.
        l2: ridge ``lambda`` on the criterion logits ``u``, ``v``. max_iter: L-BFGS limit.
    """

    sigma_tau: float = 1.0
    sigma_alpha: float = 2.0
    l2: float = 1e-4
    max_iter: int = 500


@dataclass(frozen=True)
class ItemParams:
    """Criterion parameters, shape ``(C,)`` each: discriminations ``gamma`` (> 0, sum ``C``) and
    difficulties ``beta`` (mean 0), in logits."""

    gamma: np.ndarray
    beta: np.ndarray

    def to_dict(self) -> dict:
        """``{"gamma": [...], "beta": [...]}`` as JSON floats."""
        return {"gamma": [float(x) for x in self.gamma], "beta": [float(x) for x in self.beta]}


def pass_probabilities(theta, items: ItemParams) -> np.ndarray:
    """``P_c(theta) = sigmoid(gamma_c (theta - beta_c))``; shape ``theta.shape + (C,)``."""
    t = np.asarray(theta, dtype=np.float64)[..., None]
    return expit(items.gamma * (t - items.beta))


def gain(theta, items: ItemParams) -> np.ndarray:
    """RCP-nDCG gain ``g(theta) = sum_c gamma_c sigmoid(gamma_c (theta - beta_c)) / sum_c gamma_c``.

    Args:
        theta: calibrated abilities (logits), any shape.
        items: the fitted criteria.

    Returns:
        float64 array of ``theta``'s shape, values in (0, 1), increasing in ``theta``.
    """
    return pass_probabilities(theta, items) @ items.gamma / items.gamma.sum()


@dataclass(frozen=True)
class RubricObservation:
    """One placement of a page in a Stage B window: its query index ``query`` (0..J-1), its Stage A
    score ``theta_bt`` and its answers ``y`` (length ``C``, each 0 or 1)."""

    query: int
    theta_bt: float
    y: tuple[int, ...]


def _unpack(x, J, C):
    t, a, u, v = x[:J], x[J:2 * J], x[2 * J:2 * J + C], x[2 * J + C:]
    return t, a, u, v


def _objective(x, q, th, Y, J, C, pr: Priors):
    N = Y.shape[0]
    t, a, u, v = _unpack(x, J, C)
    tau = np.logaddexp(0.0, t)
    s = softmax(u)
    gam = C * s
    beta = v - v.mean()
    A = tau[q] * th + a[q]                      # (N,)
    Z = gam[None, :] * (A[:, None] - beta[None, :])  # (N, C)
    nc = N * C
    bce = -(Y * log_expit(Z) + (1 - Y) * log_expit(-Z)).sum()
    prior = ((tau - 1.0) ** 2).sum() / (2 * pr.sigma_tau ** 2) + (a ** 2).sum() / (2 * pr.sigma_alpha ** 2)
    f = (bce + prior) / nc + 0.5 * pr.l2 * (np.dot(u, u) + np.dot(v, v))
    R = (expit(Z) - Y) / nc                     # dF/dZ
    gA = R @ gam                                 # (N,)
    g_tau = np.bincount(q, weights=gA * th, minlength=J) + (tau - 1.0) / (pr.sigma_tau ** 2 * nc)
    g_a = np.bincount(q, weights=gA, minlength=J) + a / (pr.sigma_alpha ** 2 * nc)
    g_t = g_tau * expit(t)
    g_gam = (R * (A[:, None] - beta[None, :])).sum(axis=0)
    g_beta = -(R * gam[None, :]).sum(axis=0)
    g_u = gam * g_gam - s * np.dot(gam, g_gam) + pr.l2 * u
    g_v = g_beta - g_beta.mean() + pr.l2 * v
    return f, np.concatenate([g_t, g_a, g_u, g_v])


def fit_2pl(
    query_index: np.ndarray,
    theta_bt: np.ndarray,
    answers: np.ndarray,
    n_queries: int,
    priors: Priors = Priors(),
) -> tuple[ItemParams, np.ndarray, np.ndarray, dict]:
    """MAP fit of the 2PL calibration model (module docstring).

    Args:
        query_index: int array ``(N,)``: the query (0..J-1) of each rubric placement.
        theta_bt: float array ``(N,)``: the Stage A score of the placement's page.
        answers: int/float array ``(N, C)`` of 0/1 answers.
        n_queries: ``J``. A query without placements keeps its prior mode (``tau = 1``, ``alpha = 0``).
        priors: :class:`Priors`.

    Returns:
        ``(items, tau, alpha, info)``: :class:`ItemParams`, float arrays ``(J,)``, and
        ``{"converged", "iterations", "objective", "message"}``.

    Raises:
        ValueError: shapes disagree, no placements, or answers other than 0/1.
    """
    q = np.asarray(query_index, dtype=np.int64)
    th = np.asarray(theta_bt, dtype=np.float64)
    Y = np.asarray(answers, dtype=np.float64)
    if Y.ndim != 2 or Y.shape[0] == 0 or q.shape != (Y.shape[0],) or th.shape != q.shape:
        raise ValueError(f"fit_2pl needs N >= 1 placements: query_index (N,), theta_bt (N,), answers (N, C); got {q.shape}, {th.shape}, {Y.shape}")
    if not np.all((Y == 0) | (Y == 1)):
        raise ValueError("rubric answers must be 0 or 1")
    if q.min() < 0 or q.max() >= n_queries:
        raise ValueError("query_index out of range")
    J, C = int(n_queries), Y.shape[1]
    x0 = np.concatenate([np.full(J, np.log(np.e - 1.0)), np.zeros(J), np.zeros(C), np.zeros(C)])
    res = minimize(_objective, x0, args=(q, th, Y, J, C, priors), jac=True, method="L-BFGS-B",
                   options={"maxiter": priors.max_iter, "gtol": 1e-9, "ftol": 1e-14})
    t, a, u, v = _unpack(res.x, J, C)
    items = ItemParams(gamma=C * softmax(u), beta=v - v.mean())
    info = {"converged": bool(res.success), "iterations": int(res.nit), "objective": float(res.fun), "message": str(res.message)}
    return items, np.logaddexp(0.0, t), a.copy(), info


@dataclass
class Calibration:
    """A fitted calibration: criteria, per-query transforms and the calibrated abilities.

    Attributes:
        items: the criteria (:class:`ItemParams`).
        tau, alpha: ``{query_id: value}``: the per-query scale (> 0) and offset.
        theta_bt: ``{query_id: {corpus_id: Stage A score}}`` (mean 0 within each query).
        info: fit diagnostics.
        added: ``{query_id: {corpus_id: how}}`` for pages scored after the fit (``"rubric"`` or
            ``"windows"``); their abilities are in :attr:`extra_theta`.
        extra_theta: ``{query_id: {corpus_id: calibrated ability}}`` of pages added after the fit.
    """

    items: ItemParams
    tau: dict[str, float]
    alpha: dict[str, float]
    theta_bt: dict[str, dict[str, float]]
    info: dict = field(default_factory=dict)
    added: dict[str, dict[str, str]] = field(default_factory=dict)
    extra_theta: dict[str, dict[str, float]] = field(default_factory=dict)

    def theta(self, query_id: str) -> dict[str, float]:
        """``{corpus_id: calibrated ability}`` of the query's calibrated pool (fitted + added pages).

        Raises:
            KeyError: the query was not calibrated.
        """
        tau, a = self.tau[query_id], self.alpha[query_id]
        out = {d: tau * t + a for d, t in self.theta_bt[query_id].items()}
        out.update(self.extra_theta.get(query_id, {}))
        return out

    def gains(self, query_id: str) -> dict[str, float]:
        """``{corpus_id: g(theta)}`` of the query's calibrated pool (see :func:`gain`)."""
        th = self.theta(query_id)
        ids = list(th)
        g = gain(np.array([th[d] for d in ids]), self.items) if ids else np.zeros(0)
        return {d: float(x) for d, x in zip(ids, g)}

    def score_from_rubric(self, query_id: str, corpus_id: str, answers: Sequence[Sequence[int]], *, grid: int = 801) -> float:
        """Score a page added after the fit from its own Stage B answers, all parameters frozen:
        the posterior mean of ``theta`` under ``N(m, s^2)`` (``m``, ``s``: mean and sd of the
        calibration's abilities) and the 2PL likelihood (reference ``score_documents``, fixed-item EAP).

        Args:
            query_id: a calibrated query. corpus_id: the new page.
            answers: one ``(C,)`` 0/1 vector per placement of the page.
            grid: quadrature points over ``m +- 8 s``.

        Returns:
            The calibrated ability (also stored in :attr:`extra_theta`; nothing else changes).

        Raises:
            KeyError: unknown query. ValueError: no answers, or answers of the wrong length.
        """
        if query_id not in self.tau:
            raise KeyError(f"query {query_id!r} is not calibrated")
        Y = np.asarray(answers, dtype=np.float64)
        if Y.ndim != 2 or Y.shape[0] == 0 or Y.shape[1] != len(self.items.gamma):
            raise ValueError(f"answers must be (n >= 1, {len(self.items.gamma)}) 0/1 values, got shape {Y.shape}")
        allth = np.array([v for q in self.tau for v in self.theta(q).values()])
        m = float(allth.mean()) if allth.size else 0.0
        s = float(allth.std()) if allth.size > 1 and allth.std() > 0 else 1.0
        t = np.linspace(m - 8 * s, m + 8 * s, grid)
        Z = self.items.gamma[None, :] * (t[:, None] - self.items.beta[None, :])   # (G, C)
        ll = (Y.sum(0)[None, :] * log_expit(Z) + (Y.shape[0] - Y.sum(0))[None, :] * log_expit(-Z)).sum(1)
        lp = ll - 0.5 * ((t - m) / s) ** 2
        w = np.exp(lp - lp.max())
        theta = float((w * t).sum() / w.sum())
        self.extra_theta.setdefault(query_id, {})[corpus_id] = theta
        self.added.setdefault(query_id, {})[corpus_id] = "rubric"
        return theta

    def score_from_windows(self, query_id: str, corpus_id: str, windows: Sequence[tuple[Sequence[str], Sequence[float]]]) -> float:
        """Score a page added after the fit from Stage A windows that show it beside pages of the
        query's fitted pool: conditional Bradley-Terry fit with every fitted score frozen, mapped by
        the query's ``theta = tau_j theta_BT + alpha_j`` (reference ``insert_documents``).

        Args:
            windows: ``[(corpus_ids, scores), ...]``; every other id must be in the fitted pool.

        Returns:
            The calibrated ability (stored in :attr:`extra_theta`).

        Raises:
            KeyError: unknown query or page. ValueError: no window pairs it with a fitted page.
        """
        fitted = self.theta_bt[query_id]
        ids = list(fitted)
        index = {d: n for n, d in enumerate(ids)}
        new = len(ids)
        conv = []
        for docs, scores in windows:
            idx = []
            for d in docs:
                if d == corpus_id:
                    idx.append(new)
                elif d in index:
                    idx.append(index[d])
                else:
                    raise KeyError(f"page {d!r} is not in the calibrated pool of query {query_id!r}")
            conv.append((idx, list(scores)))
        bt = fit_new_item(np.array([fitted[d] for d in ids]), conv, new)
        theta = self.tau[query_id] * bt + self.alpha[query_id]
        self.extra_theta.setdefault(query_id, {})[corpus_id] = float(theta)
        self.added.setdefault(query_id, {})[corpus_id] = "windows"
        return float(theta)

    def to_dict(self) -> dict:
        """JSON-ready: items, per-query tau/alpha, fit info and added pages."""
        return {
            "items": self.items.to_dict(),
            "queries": {q: {"tau": float(self.tau[q]), "alpha": float(self.alpha[q])} for q in self.tau},
            "fit": self.info,
            "added_pages": self.added,
        }


def calibrate(
    theta_bt: Mapping[str, Mapping[str, float]],
    rubric: Mapping[str, Sequence[tuple[str, Sequence[int]]]],
    priors: Priors = Priors(),
) -> Calibration:
    """Fit the calibration from Stage A scores and Stage B answers.

    Args:
        theta_bt: ``{query_id: {corpus_id: Stage A score}}``.
        rubric: ``{query_id: [(corpus_id, answers (C,)), ...]}``: one entry per placement.
        priors: :class:`Priors`.

    Returns:
        A :class:`Calibration` over the queries that have rubric answers (the others are listed in
        ``info["uncalibrated_queries"]`` and get no abilities, never raw Stage A scores).

    Raises:
        ValueError: no rubric answers at all; a placement of a page without a Stage A score.
    """
    qids = [q for q in theta_bt if rubric.get(q)]
    qi, th, Y = [], [], []
    for n, q in enumerate(qids):
        for d, y in rubric[q]:
            if d not in theta_bt[q]:
                raise ValueError(f"rubric answer for page {d!r} of query {q!r}, which has no Stage A score")
            qi.append(n), th.append(theta_bt[q][d]), Y.append(list(y))
    if not qi:
        raise ValueError("no rubric answers to calibrate on")
    items, tau, alpha, info = fit_2pl(np.array(qi), np.array(th), np.array(Y), len(qids), priors)
    info["uncalibrated_queries"] = [q for q in theta_bt if q not in set(qids)]
    info["placements"] = len(qi)
    info["priors"] = {"sigma_tau": priors.sigma_tau, "sigma_alpha": priors.sigma_alpha, "l2": priors.l2}
    return Calibration(
        items=items,
        tau={q: float(tau[n]) for n, q in enumerate(qids)},
        alpha={q: float(alpha[n]) for n, q in enumerate(qids)},
        theta_bt={q: dict(theta_bt[q]) for q in qids},
        info=info,
    )
