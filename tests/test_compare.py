"""Statistics of vdr.compare: hand-computed randomization p-values (exact enumeration), Monte-Carlo
vs exact, Holm against a hand-worked example, t-test against scipy, bootstrap reproducibility."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from vdr.stats import (
    Comparison,
    bootstrap_ci,
    compare,
    compare_arrays,
    describe_test,
    holm,
    holm_adjust,
    paired_ttest,
    randomization_test,
    smallest_p,
    use_exact,
)
from vdr.errors import AlignmentError, InputError
from vdr.metrics import MetricsResult


def result(ids, **values):
    return MetricsResult(tuple(ids), {m: np.asarray(v, dtype=np.float64) for m, v in values.items()})


# ---------------------------------------------------------------- randomization test


def test_exact_three_queries_hand_computed():
    # d = (1, 2, 3): the 8 sign-flipped sums are +-6, +-4, +-2, 0, 0; |sum| >= 6 for 2 of them
    assert randomization_test([1.0, 2.0, 3.0], exact=True) == pytest.approx(2 / 8)
    # d = (1, 1, -1): every sign-flipped sum is odd (+-1 or +-3), so |sum| >= 1 always -> p = 1
    assert randomization_test([1.0, 1.0, -1.0], exact=True) == 1.0
    # d = (0.5, 0.25, 0.25, 0.1): the observed |sum| 1.1 is reached only by all-same signs -> 2/16
    assert randomization_test([0.5, 0.25, 0.25, 0.1], exact=True) == pytest.approx(2 / 16)


def test_small_samples_use_the_exact_test_by_default():
    """Issue 14.7: n <= 16 queries and 2^n <= permutations -> exact sign-flip test, p_min recorded."""
    # d = (0.1, 0.2, 0.3): sign-flipped sums +-0.6, +-0.4, +-0.2, 0, 0 -> |sum| >= 0.6 for 2 of 8
    c = compare_arrays([0.0, 0.0, 0.0], [0.1, 0.2, 0.3], "ndcg@3")
    assert c.exact and c.n_permutations == 8 and c.p_value == 0.25 and c.p_min == 0.25
    d = c.to_dict()
    assert d["p_min"] == 0.25 and d["test"]["exact"] is True and d["test"]["n_permutations"] == 8
    assert d["test"]["p_value"].startswith("exact")
    # d = (1, 1, 1, -1): s1+s2+s3 in {3, 1, -1, -3} (1, 3, 3, 1 ways) minus s4 = +-1; |sum| >= 2 in
    # 1 + 1 + 3 + 3 + 1 + 1 = 10 of the 16 assignments
    assert randomization_test([1.0, 1.0, 1.0, -1.0]) == 10 / 16
    # a query that does not change cannot flip: d = (0.2, 0, 0.1) -> |+-0.2 +-0.1| = 0.3 in 2 of 4, twice
    z = compare_arrays([0.5, 0.5, 0.5], [0.7, 0.5, 0.6])
    assert z.p_value == 0.5 and z.p_min == 0.5 and (z.wins, z.ties, z.losses) == (2, 1, 0)
    # the same seed gives the same answer; the exact p does not depend on the seed at all
    assert compare_arrays([0.0] * 3, [0.1, 0.2, 0.3], seed=9).p_value == 0.25
    # the switch: 2^n <= n_permutations and n <= 16
    assert use_exact(14, 10_000) is False and use_exact(14, 16_384) is True and use_exact(17, 10**9) is False
    mc = compare_arrays(np.zeros(14), np.linspace(0.1, 1.0, 14), n_permutations=999)
    assert not mc.exact and mc.n_permutations == 999 and mc.p_min == 1 / 1000 and mc.p_value >= mc.p_min  # exact p: 2 / 2^14
    assert smallest_p([0.0, 0.0], 10, exact=True) == 1.0


def test_describe_test_for_table_footers():
    three = compare_arrays([0.0] * 3, [0.1, 0.2, 0.3], "ndcg@3", variant="kw")
    assert describe_test([three]) == "exact test over all 2^3 = 8 sign assignments; smallest attainable p 0.25"
    tie = compare_arrays([0.5] * 3, [0.7, 0.5, 0.6], "mrr@3", variant="kw")
    assert describe_test([three, tie]) == (
        "exact test over all 2^3 = 8 sign assignments; smallest attainable p 0.25 to 0.5 (queries that do not change cannot flip)"
    )
    mc = compare_arrays(np.zeros(20), np.linspace(0, 1, 20), n_permutations=999, seed=7)
    assert describe_test([mc]) == "999 random sign assignments, seed 7; smallest attainable p 0.001"


def brute_force(d):
    obs = abs(sum(d))
    hits = sum(abs(sum(s * x for s, x in zip(signs, d))) >= obs - 1e-12 for signs in itertools.product((1, -1), repeat=len(d)))
    return hits / 2 ** len(d)


@pytest.mark.parametrize("seed", range(5))
def test_exact_matches_brute_force_and_monte_carlo_close(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(4, 11))
    d = np.round(rng.normal(0.05, 0.2, n), 3)  # rounded: many exactly tied sums, the float tolerance matters
    exact = randomization_test(d, exact=True)
    assert exact == pytest.approx(brute_force(d.tolist()), abs=1e-15)
    mc = randomization_test(d, n_permutations=20_000, seed=seed, exact=False)
    # Monte-Carlo standard error sqrt(p(1-p)/B) <= 0.0036; 5 SE
    assert abs(mc - exact) < 0.018


def test_monte_carlo_formula_and_seed():
    d = np.array([0.3, 0.1, 0.2, 0.4, 0.25, 0.15, 0.05, 0.35, 0.2, 0.1, 0.3, 0.22])  # all positive: p tiny
    p = randomization_test(d, n_permutations=999, seed=1)
    # exact p = 2 / 4096; with 999 draws the count is almost surely 0 or 1 -> p in {1/1000, 2/1000, ...}
    assert p == pytest.approx(round(p * 1000) / 1000)
    assert p >= 1 / 1000
    assert randomization_test(d, n_permutations=999, seed=1) == p  # same seed, same p
    ds = np.random.default_rng(3).normal(0, 1, 40)
    a = randomization_test(ds, n_permutations=5000, seed=7)
    assert a == randomization_test(ds, n_permutations=5000, seed=7)
    assert a != randomization_test(ds, n_permutations=5000, seed=8)


def test_identity_permutation_counted_despite_rounding():
    # sums of 0.1-style values differ in the last bit depending on order; the observed assignment
    # (and its mirror) must still count -> exact p >= 2 / 2^n
    d = [0.1, 0.2, 0.3, 0.7, 0.1, 0.9]
    assert randomization_test(d, exact=True) == pytest.approx(2 / 64)


def test_large_n_many_blocks():
    d = np.random.default_rng(0).normal(0.0, 1.0, 3000)
    p = randomization_test(d, n_permutations=3000, seed=0)
    assert 0 < p <= 1


# ---------------------------------------------------------------- t-test, bootstrap


def test_ttest_matches_scipy():
    rng = np.random.default_rng(1)
    a = rng.random(30)
    b = a + rng.normal(0.02, 0.1, 30)
    assert paired_ttest(a, b) == pytest.approx(stats.ttest_rel(b, a).pvalue, rel=1e-12)


def test_ttest_degenerate_cases():
    assert paired_ttest([0.1, 0.5], [0.1, 0.5]) == 1.0
    assert paired_ttest([0.0, 0.5, 0.25], [0.25, 0.75, 0.5]) == 0.0  # exactly constant difference 0.25
    assert math.isnan(paired_ttest([0.1], [0.3]))
    one = compare_arrays([0.1], [0.3], "m", n_permutations=10, n_bootstrap=10)
    assert math.isnan(one.p_value_ttest) and one.to_dict()["p_value_ttest"] is None


def test_bootstrap_ci_contains_mean_and_is_reproducible():
    rng = np.random.default_rng(2)
    d = rng.normal(0.05, 0.2, 50)
    lo, hi = bootstrap_ci(d, n_bootstrap=4000, seed=3)
    assert lo < d.mean() < hi
    assert (lo, hi) == bootstrap_ci(d, n_bootstrap=4000, seed=3)
    assert (lo, hi) != bootstrap_ci(d, n_bootstrap=4000, seed=4)
    # roughly the normal-theory interval
    se = d.std(ddof=1) / math.sqrt(len(d))
    assert lo == pytest.approx(d.mean() - 1.96 * se, abs=0.6 * se)
    assert hi == pytest.approx(d.mean() + 1.96 * se, abs=0.6 * se)
    assert bootstrap_ci([0.2, 0.2, 0.2]) == (0.2, 0.2)


# ---------------------------------------------------------------- Holm


def test_holm_hand_computed():
    # sorted: 0.005*4=0.02, 0.01*3=0.03, 0.03*2=0.06, 0.04*1=0.04 -> monotone 0.06
    adj = holm([0.01, 0.04, 0.03, 0.005])
    np.testing.assert_allclose(adj, [0.03, 0.06, 0.06, 0.02], rtol=1e-12)
    np.testing.assert_allclose(holm([0.5, 0.9]), [1.0, 1.0])
    np.testing.assert_allclose(holm([0.2]), [0.2])
    out = holm([0.01, float("nan"), 0.02])
    assert math.isnan(out[1]) and out[0] == pytest.approx(0.02) and out[2] == pytest.approx(0.02)
    with pytest.raises(InputError):
        holm([1.5])


def test_holm_adjust_labels_family():
    a = compare_arrays([0.1, 0.2, 0.3], [0.2, 0.4, 0.5], "ndcg@3", variant="kw", exact=True)
    b = compare_arrays([0.1, 0.2, 0.3], [0.1, 0.3, 0.2], "ndcg@3", variant="conv", exact=True)
    assert a.holm_family == ("kw:ndcg@3",) and a.p_value_holm == a.p_value
    fam = holm_adjust([a, b])
    assert fam[0].holm_family == fam[1].holm_family == ("kw:ndcg@3", "conv:ndcg@3")
    np.testing.assert_allclose([c.p_value_holm for c in fam], holm([a.p_value, b.p_value]))
    with pytest.raises(InputError, match="share the label"):
        holm_adjust([a, a])


# ---------------------------------------------------------------- compare()


def test_identical_inputs():
    r = result(["q1", "q2", "q3"], **{"ndcg@3": [0.2, 0.5, 1.0], "mrr@3": [1.0, 0.5, 0.0]})
    for c in compare(r, r, n_permutations=500, n_bootstrap=500):
        assert c.p_value == 1.0 and c.p_value_ttest == 1.0 and c.p_value_holm == 1.0
        assert c.delta == 0.0 and c.ci95 == (0.0, 0.0)
        assert (c.wins, c.ties, c.losses) == (0, 3, 0)
        assert c.n_queries == 3


def test_compare_fields_and_family():
    ids = [f"q{i}" for i in range(8)]
    orig = result(ids, **{"ndcg@3": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8], "recall@5": [0, 1, 0, 1, 0, 1, 0, 1]})
    new = result(ids, **{"ndcg@3": [0.3, 0.2, 0.5, 0.6, 0.4, 0.9, 0.7, 1.0], "recall@5": [1, 1, 0, 1, 1, 1, 0, 1]})
    cs = compare(orig, new, ["ndcg@3", "recall@5"], variant="kw", exact=True, n_bootstrap=2000, seed=5)
    c = cs[0]
    assert isinstance(c, Comparison)
    assert c.metric == "ndcg@3" and c.variant == "kw" and c.exact and c.n_permutations == 256
    assert c.original == pytest.approx(0.45) and c.rewritten == pytest.approx(0.575)
    assert c.delta == pytest.approx(0.125)
    assert (c.wins, c.ties, c.losses) == (5, 2, 1)
    assert c.p_value_ttest == pytest.approx(stats.ttest_rel(new.values["ndcg@3"], orig.values["ndcg@3"]).pvalue)
    assert c.ci95[0] <= c.delta <= c.ci95[1]
    assert c.holm_family == ("kw:ndcg@3", "kw:recall@5")
    np.testing.assert_allclose([x.p_value_holm for x in cs], holm([x.p_value for x in cs]))
    d = c.to_dict()
    assert d["ci95"] == list(c.ci95) and d["holm_family"] == ["kw:ndcg@3", "kw:recall@5"]
    # reproducible by seed
    again = compare(orig, new, ["ndcg@3", "recall@5"], variant="kw", exact=True, n_bootstrap=2000, seed=5)
    assert again == cs
    mc = compare(orig, new, ["ndcg@3"], n_permutations=20_000, seed=1, exact=False)[0]
    assert abs(mc.p_value - c.p_value) < 0.02 and not mc.exact and mc.p_min == 1 / 20_001


def test_alignment_and_input_errors():
    a = result(["q1", "q2"], m=[0.1, 0.2])
    with pytest.raises(AlignmentError, match="different order"):
        compare(a, result(["q2", "q1"], m=[0.1, 0.2]))
    with pytest.raises(AlignmentError, match="only in original"):
        compare(a, result(["q1", "q3"], m=[0.1, 0.2]))
    with pytest.raises(InputError, match="missing"):
        compare(a, a, ["ndcg@3"])
    with pytest.raises(AlignmentError):
        compare_arrays([0.1, 0.2], [0.1])
    with pytest.raises(InputError, match="non-finite"):
        compare_arrays([0.1, float("nan")], [0.1, 0.2])
    with pytest.raises(InputError, match="exact"):
        compare_arrays(np.zeros(17), np.ones(17), exact=True)
    with pytest.raises(InputError, match="seed"):
        compare_arrays([0.1], [0.2], seed=-1)
    with pytest.raises(InputError, match="n_permutations"):
        compare_arrays([0.1], [0.2], n_permutations=0)
    with pytest.raises(InputError, match="no queries"):
        compare_arrays([], [])
    with pytest.raises(InputError, match="MetricsResult"):
        compare({"q": 1}, a)
