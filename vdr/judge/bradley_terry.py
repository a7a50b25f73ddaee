"""Bradley-Terry fit of soft pairwise preferences from scored windows (Stage A of RCP-nDCG).

Source: RCP-nDCG paper (arXiv 2609.35739) and the reference documentation of cohere-ai/rcp-ndcg,
``docs/concepts/tournament.md``: the judge gives every document of a window of ``w`` documents a
score ``s_i`` in [-5, +5]; only the soft preferences ``p_ii' = sigmoid(s_i - s_i')`` of the
``w (w - 1) / 2`` pairs are kept, each with weight ``2 / w`` (the ``w`` scores fix only ``w - 1``
differences). The model ``P(i preferred to i') = sigmoid(theta_i - theta_i')`` is fitted by
minimising the weighted mean cross-entropy between the soft and the predicted preferences plus a
ridge penalty ``(l2 / 2) * sum(theta**2)`` (``l2 = 1e-4``; the reference says "a ridge penalty of
1e-4"; vdr uses the ``lambda / 2`` convention of its calibration page) with L-BFGS (at most 250
iterations). The scores are returned centred (mean 0 within the query): they are identified only
up to an additive constant.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit, log_expit

__all__ = ["BT_L2", "BT_MAX_ITER", "window_pairs", "fit_pairs", "fit_windows", "fit_new_item"]

BT_L2 = 1e-4
"""Ridge strength of the Bradley-Terry scores (paper / reference default)."""

BT_MAX_ITER = 250
"""L-BFGS iteration limit (reference default)."""


def window_pairs(items: Sequence[int], scores: Sequence[float]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The soft pairs of one scored window.

    Args:
        items: item indices shown in the window, length ``w >= 2``, distinct.
        scores: the judge's score of each, same order, finite.

    Returns:
        ``(i, j, p, weight)``: int64 arrays ``i``, ``j`` and float64 arrays of shape
        ``(w (w - 1) / 2,)``: ``p = sigmoid(s_i - s_j)``, ``weight = 2 / w``.

    Raises:
        ValueError: fewer than two items, a repeated item, mismatched lengths or a non-finite score.
    """
    idx = np.asarray(items, dtype=np.int64)
    s = np.asarray(scores, dtype=np.float64)
    w = idx.shape[0]
    if w < 2 or s.shape != (w,):
        raise ValueError(f"a window needs >= 2 items with one score each, got {w} items and {s.shape[0]} scores")
    if len(set(idx.tolist())) != w:
        raise ValueError("a window shows an item twice")
    if not np.all(np.isfinite(s)):
        raise ValueError("non-finite score in a window")
    a, b = np.triu_indices(w, k=1)
    return idx[a], idx[b], expit(s[a] - s[b]), np.full(a.shape[0], 2.0 / w)


def _objective(theta, i, j, p, wt, wsum, l2):
    d = theta[i] - theta[j]
    # cross-entropy of soft target p against sigmoid(d): -(p log s(d) + (1-p) log s(-d))
    ce = -(p * log_expit(d) + (1.0 - p) * log_expit(-d))
    f = float(np.dot(wt, ce)) / wsum + 0.5 * l2 * float(np.dot(theta, theta))
    r = wt * (expit(d) - p) / wsum
    g = l2 * theta
    np.add.at(g, i, r)
    np.subtract.at(g, j, r)
    return f, g


def fit_pairs(
    n_items: int,
    i: np.ndarray,
    j: np.ndarray,
    p: np.ndarray,
    weight: np.ndarray,
    *,
    l2: float = BT_L2,
    max_iter: int = BT_MAX_ITER,
) -> np.ndarray:
    """Fit Bradley-Terry scores to weighted soft pairwise preferences.

    Minimises ``sum(weight * CE(p, sigmoid(theta_i - theta_j))) / sum(weight) + (l2/2) |theta|^2``.

    Args:
        n_items: number of items ``n``.
        i, j: int arrays, shape ``(m,)``: the pairs.
        p: float array ``(m,)`` in [0, 1]: the soft preference of ``i`` over ``j``.
        weight: float array ``(m,)``, > 0.
        l2: ridge strength (> 0 keeps items without comparisons at 0 and the fit unique).
        max_iter: L-BFGS iteration limit.

    Returns:
        float64 array ``(n,)`` of scores (logits), centred to mean 0. All zeros when ``m == 0``.
    """
    theta0 = np.zeros(n_items)
    if len(i) == 0 or n_items < 2:
        return theta0
    i = np.asarray(i, dtype=np.int64)
    j = np.asarray(j, dtype=np.int64)
    p = np.asarray(p, dtype=np.float64)
    wt = np.asarray(weight, dtype=np.float64)
    res = minimize(_objective, theta0, args=(i, j, p, wt, float(wt.sum()), float(l2)), jac=True,
                   method="L-BFGS-B", options={"maxiter": int(max_iter), "gtol": 1e-10, "ftol": 1e-15})
    theta = res.x
    return theta - theta.mean()


def fit_windows(
    n_items: int,
    windows: Sequence[tuple[Sequence[int], Sequence[float]]],
    *,
    l2: float = BT_L2,
    max_iter: int = BT_MAX_ITER,
) -> np.ndarray:
    """Fit Bradley-Terry scores to scored windows (see the module docstring).

    Args:
        n_items: number of items of the query's pool.
        windows: ``[(items, scores), ...]``; each window's items (indices into the pool) and the
            judge's scores in the same order. A window shown twice (forward and reversed) is simply
            two windows.

    Returns:
        float64 array ``(n_items,)``, mean 0.
    """
    parts = [window_pairs(it, sc) for it, sc in windows if len(it) >= 2]
    if not parts:
        return np.zeros(n_items)
    i, j, p, w = (np.concatenate(x) for x in zip(*parts))
    return fit_pairs(n_items, i, j, p, w, l2=l2, max_iter=max_iter)


def fit_new_item(
    theta_fixed: np.ndarray,
    windows: Sequence[tuple[Sequence[int], Sequence[float]]],
    new: int,
    *,
    l2: float = BT_L2,
) -> float:
    """Conditional fit of one new item's Bradley-Terry score with every other score held fixed
    (reference ``insert_documents``, ``docs/concepts/primitives.md``: "estimated from its own
    comparisons with every existing ability held fixed").

    Args:
        theta_fixed: float array ``(n,)``: the fitted scores of the existing items (index ``new``
            is ignored).
        windows: scored windows (as :func:`fit_windows`); only pairs involving ``new`` count.
        new: index of the new item (may equal ``n`` - then ``theta_fixed`` is extended).
        l2: ridge on the new score.

    Returns:
        The new item's score on the same (un-centred) scale as ``theta_fixed``.

    Raises:
        ValueError: no window pairs the new item with an existing one.
    """
    theta = np.append(np.asarray(theta_fixed, dtype=np.float64), 0.0) if new >= len(theta_fixed) else np.array(theta_fixed, dtype=np.float64)
    others, ps, ws = [], [], []
    for it, sc in windows:
        if new not in list(it) or len(it) < 2:
            continue
        i, j, p, w = window_pairs(it, sc)
        for a, b, pp, ww in zip(i, j, p, w):
            if a == new:
                others.append(b), ps.append(pp), ws.append(ww)
            elif b == new:
                others.append(a), ps.append(1.0 - pp), ws.append(ww)
    if not others:
        raise ValueError("no window compares the new item with an existing one")
    o = theta[np.asarray(others)]
    p = np.asarray(ps)
    w = np.asarray(ws)

    def f(x):
        d = x[0] - o
        val = -(w * (p * log_expit(d) + (1 - p) * log_expit(-d))).sum() / w.sum() + 0.5 * l2 * x[0] ** 2
        grad = (w * (expit(d) - p)).sum() / w.sum() + l2 * x[0]
        return val, np.array([grad])

    res = minimize(f, np.array([float(np.mean(o))]), jac=True, method="L-BFGS-B", options={"gtol": 1e-10})
    return float(res.x[0])
