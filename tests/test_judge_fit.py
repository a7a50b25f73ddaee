"""Unit tests of the Bradley-Terry and 2PL fits (vdr.judge) on small hand-checked cases."""

import math

import numpy as np
import pytest
from scipy.optimize import brentq, check_grad
from scipy.special import expit

from vdr.judge import bradley_terry as bt
from vdr.judge import irt


def test_window_pairs_weights_and_soft_preferences():
    i, j, p, w = bt.window_pairs([4, 7, 9], [2.0, 0.0, -1.0])
    assert list(zip(i, j)) == [(4, 7), (4, 9), (7, 9)]
    np.testing.assert_allclose(p, expit([2.0, 3.0, 1.0]))
    np.testing.assert_allclose(w, [2 / 3] * 3)
    with pytest.raises(ValueError):
        bt.window_pairs([1, 1], [0.0, 1.0])


def test_two_items_hand_checked():
    # one pair, p = sigmoid(1); stationarity: sigmoid(d) - sigmoid(1) + l2 * d / 2 = 0 (theta = +-d/2)
    d = brentq(lambda d: expit(d) - expit(1.0) + 1e-4 * d / 2, 0, 2)
    assert d == pytest.approx(1 - 5e-5 / (expit(1) * (1 - expit(1))), abs=1e-7)  # first-order: 0.999746
    theta = bt.fit_windows(2, [([0, 1], [1.0, 0.0])])
    np.testing.assert_allclose(theta, [d / 2, -d / 2], atol=1e-6)


def test_consistent_scores_recovered_and_reversal_is_symmetric():
    s = np.array([2.0, 0.5, -0.5, -2.0])
    th = bt.fit_windows(4, [([0, 1, 2, 3], s), ([3, 2, 1, 0], s[::-1])])
    np.testing.assert_allclose(th, s - s.mean(), rtol=5e-3)  # exact up to the ridge shrinkage (~0.25%)
    # pure position bias (same scores by position) shown forward and reversed cancels exactly
    bias = [1.0, 0.3, -0.3, -1.0]
    th = bt.fit_windows(4, [([0, 1, 2, 3], bias), ([3, 2, 1, 0], bias)])
    np.testing.assert_allclose(th, 0, atol=1e-6)


def test_bt_gradient_and_choix_crosscheck():
    rng = np.random.default_rng(1)
    i, j = rng.integers(0, 5, 40), rng.integers(0, 5, 40)
    keep = i != j
    i, j = i[keep], j[keep]
    p, w = np.ones(i.shape), np.ones(i.shape)
    f = lambda t: bt._objective(t, i, j, p, w, float(w.sum()), 1e-2)  # noqa: E731
    assert check_grad(lambda t: f(t)[0], lambda t: f(t)[1], rng.normal(size=5)) < 1e-5
    choix = pytest.importorskip("choix")
    # hard wins: mine = mean CE + (l2/2)|t|^2  ==  (sum CE + (N l2 / 2)|t|^2) / N  -> choix alpha = N l2 / 2
    ours = bt.fit_pairs(5, i, j, p, w, l2=1e-2)
    ref = choix.opt_pairwise(5, list(zip(i.tolist(), j.tolist())), alpha=len(i) * 1e-2 / 2, method="BFGS", tol=1e-10)
    np.testing.assert_allclose(ours, ref - ref.mean(), atol=1e-4)


def test_fit_new_item_frozen():
    fixed = np.array([1.0, 0.0, -1.0])
    # the new item (index 3) scores exactly like item 1 in every window -> theta ~ 0
    wins = [([3, 0, 1, 2], [0.0, 1.0, 0.0, -1.0]), ([2, 1, 0, 3], [-1.0, 0.0, 1.0, 0.0])]
    assert bt.fit_new_item(fixed, wins, 3) == pytest.approx(0.0, abs=1e-3)


def test_gain_hand_checked():
    items = irt.ItemParams(np.array([1.0, 1.0]), np.array([-1.0, 1.0]))
    assert irt.gain(0.0, items) == pytest.approx(0.5)
    assert irt.gain(1.0, items) == pytest.approx((expit(2.0) + 0.5) / 2)
    items2 = irt.ItemParams(np.array([2.0, 0.5]), np.array([0.0, 0.0]))
    assert irt.gain(1.0, items2) == pytest.approx((2 * expit(2.0) + 0.5 * expit(0.5)) / 2.5)
    g = irt.gain(np.linspace(-6, 6, 50), items2)
    assert np.all(np.diff(g) > 0) and g.min() > 0 and g.max() < 1


def test_2pl_gradient():
    rng = np.random.default_rng(0)
    J, C, N = 3, 5, 40
    q, th = rng.integers(0, J, N), rng.normal(size=N)
    Y = (rng.random((N, C)) < 0.5).astype(float)
    f = lambda x: irt._objective(x, q, th, Y, J, C, irt.Priors())  # noqa: E731
    assert check_grad(lambda x: f(x)[0], lambda x: f(x)[1], rng.normal(size=2 * J + 2 * C)) < 1e-6


def test_2pl_one_criterion_hand_checked():
    # C = 1 fixes gamma = 1, beta = 0. One query, one page with theta_BT = 0 passing 3 of 4 times:
    # tau does not touch the likelihood -> tau = 1 (prior mode); alpha solves
    # 4 sigmoid(a) - 3 + a / sigma_alpha^2 = 0 (the prior enters the 1/(N C)-scaled objective once).
    items, tau, alpha, info = irt.fit_2pl(np.zeros(4, int), np.zeros(4), np.array([[1], [1], [1], [0]]), 1)
    a = brentq(lambda a: 4 * expit(a) - 3 + a / 4.0, -5, 5)
    assert items.gamma[0] == pytest.approx(1.0) and items.beta[0] == pytest.approx(0.0)
    assert tau[0] == pytest.approx(1.0, abs=1e-5)
    assert alpha[0] == pytest.approx(a, abs=1e-5)
    assert a < math.log(3)  # shrunk toward 0 from the MLE logit(3/4)


def test_2pl_recovers_offsets_and_keeps_order():
    rng = np.random.default_rng(3)
    J, P = 4, 30
    gamma, beta = np.array([1.2, 1.0, 0.8, 1.0, 1.0]), np.array([-1.0, -0.5, 0.0, 0.5, 1.0])
    offs, taus = np.array([-1.5, -0.5, 0.5, 1.5]), np.array([0.8, 1.0, 1.3, 1.0])
    qi, th, Y = [], [], []
    bts = rng.normal(size=(J, P))
    for j in range(J):
        for _ in range(5):
            for d in range(P):
                t = taus[j] * bts[j, d] + offs[j]
                qi.append(j), th.append(bts[j, d]), Y.append((rng.random(5) < expit(gamma * (t - beta))).astype(int))
    items, tau, alpha, info = irt.fit_2pl(np.array(qi), np.array(th), np.array(Y), J)
    assert info["converged"]
    assert np.all(tau > 0) and items.gamma.sum() == pytest.approx(5.0) and items.beta.mean() == pytest.approx(0.0, abs=1e-9)
    assert np.corrcoef(alpha, offs)[0, 1] > 0.98
    np.testing.assert_allclose(alpha - alpha.mean(), offs - offs.mean(), atol=0.35)


def test_calibration_scores_a_new_page_without_refitting():
    theta_bt = {"a": {"x": 1.0, "y": 0.0, "z": -1.0}, "b": {"u": 0.5, "v": -0.5}}
    rubric = {"a": [("x", (1, 1, 1, 1, 0)), ("y", (1, 1, 0, 0, 0)), ("z", (0, 0, 0, 0, 0))] * 3,
              "b": [("u", (1, 1, 1, 0, 0)), ("v", (1, 0, 0, 0, 0))] * 3}
    cal = irt.calibrate(theta_bt, rubric)
    before = {q: cal.theta(q) for q in ("a", "b")}
    strong = cal.score_from_rubric("a", "new", [(1, 1, 1, 1, 1)] * 3)
    weak = cal.score_from_rubric("b", "new2", [(0, 0, 0, 0, 0)] * 3)
    assert strong > before["a"]["y"] > weak
    assert cal.added == {"a": {"new": "rubric"}, "b": {"new2": "rubric"}}
    for q in ("a", "b"):  # nothing fitted moved
        for d, t in before[q].items():
            assert cal.theta(q)[d] == t
    t = cal.score_from_windows("a", "w", [(["w", "x", "y", "z"], [0.0, 1.0, 0.0, -1.0]), (["z", "y", "x", "w"], [-1.0, 0.0, 1.0, 0.0])])
    assert t == pytest.approx(cal.theta("a")["y"], abs=0.05)
