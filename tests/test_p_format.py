"""A p-value is never rounded across alpha (issue 34 item 8): the verdict sentence, the tables'
p columns and the marks all decide as ``p <= alpha`` decides.

Expected p-values are exact: the two-sided sign-flip test over all ``2^n`` sign vectors of small
integer differences (enumerated here with :class:`fractions.Fraction`, independently of vdr), so
0.046875 = 6/128 and 0.0546875 = 14/256 are the exact values the issue names.
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import pytest

import vdr
from vdr.errors import InputError
from vdr.results import fmt_p, fmt_p_short
from vdr.stats import format_alpha, format_p
from vdr.types import Qrels, Run

# P@10 differences in tenths, one per query (found by enumeration; exact p named beside each)
D_GAIN = [-2, 3, 5, 5, 2, 5, 4]  # exact p 6/128 = 0.046875
D_NS = [-2, 5, -1, 3, 4, 3, 3, 4]  # exact p 14/256 = 0.0546875


def exact_p(d: list[int]) -> Fraction:
    """Two-sided exact sign-flip p of integer differences: share of the 2^n sign vectors whose
    |sum| reaches the observed |sum| (exact integers, no tolerance needed)."""
    obs = abs(sum(d))
    hits = sum(1 for s in itertools.product((1, -1), repeat=len(d)) if abs(sum(a * b for a, b in zip(s, d))) >= obs)
    return Fraction(hits, 2 ** len(d))


def _runs(d: list[int]) -> tuple[Qrels, dict[str, Run]]:
    """Per query ten relevant pages r0..r9 and ten others; the baseline ranks 5 relevant pages in
    its top 10, the system 5 + d (so P@10 differs by d/10)."""
    qrels = Qrels({f"q{i}": {f"r{j}": 1 for j in range(10)} for i in range(len(d))})

    def top10(n_rel: int) -> dict[str, float]:
        docs = [f"r{j}" for j in range(n_rel)] + [f"n{j}" for j in range(10 - n_rel)]
        return {doc: float(20 - r) for r, doc in enumerate(docs)}

    base = Run({f"q{i}": top10(5) for i in range(len(d))})
    system = Run({f"q{i}": top10(5 + x) for i, x in enumerate(d)})
    return qrels, {"base": base, "system": system}


def _compare(d: list[int], alpha: float = 0.05) -> vdr.Results:
    qrels, runs = _runs(d)
    return vdr.compare(qrels, runs, metrics=["P@10"], alpha=alpha)


def test_exact_p_values_of_the_fixtures():
    assert exact_p(D_GAIN) == Fraction(6, 128) and float(exact_p(D_GAIN)) == 0.046875
    assert exact_p(D_NS) == Fraction(14, 256) and float(exact_p(D_NS)) == 0.0546875


@pytest.mark.parametrize(("d", "p", "status", "shown"), [
    (D_GAIN, 0.046875, "significant gain", "0.047"),
    (D_NS, 0.0546875, "not significant", "0.055"),
])
def test_verdict_sentence_prints_the_digits_that_decide(d, p, status, shown):
    res = _compare(d)
    c = res.comparison("runs", "system")
    assert c.p_value == p and c.p_value_holm == p  # one test in the family: Holm leaves it
    assert c.outcome(0.05) == ("gain" if status == "significant gain" else "ns")
    assert c.delta == pytest.approx(sum(d) / 10 / len(d), abs=1e-15)
    lo, hi = c.ci95
    assert res.verdicts() == [f"system vs base (baseline): {c.delta:+.3f} P@10 [95% CI {lo:+.3f}, {hi:+.3f}], {status} after Holm"
                              f" (p {shown}, \u03b1 0.05)"]


@pytest.mark.parametrize(("d", "alpha", "cell", "marked"), [
    (D_GAIN, 0.05, "0.0469", True),
    (D_NS, 0.05, "0.0547", False),
    (D_GAIN, 0.0469, "0.04688", True),  # 4 decimals would print alpha itself: one more digit decides
    (D_NS, 0.0547, "0.05469", True),
    (D_GAIN, 0.046875, "0.046875", True),  # p == alpha exactly: significant (p <= alpha), printed equal to alpha
])
def test_table_cell_and_mark_agree(d, alpha, cell, marked):
    res = _compare(d, alpha)
    t = res.summary_table(alpha=alpha)
    row = t.rows[1]
    i = t.columns.index("p (Holm)")
    p = res.comparison("runs", "system").p_value_holm
    assert row[i] == cell == format_p(p, alpha)
    assert bool(t.marks[1][t.columns.index("d precision@10")]) == marked == (p <= alpha)
    assert (float(cell) <= float(format_alpha(alpha))) == marked


@pytest.mark.parametrize(("p", "alpha", "style", "text"), [
    (0.046875, 0.05, "sentence", "0.047"),
    (0.0546875, 0.05, "sentence", "0.055"),
    (0.05, 0.05, "sentence", "0.05"),  # equal: significant, and printed equal
    (0.0004, 0.05, "sentence", "< 0.001"),
    (0.0004, 0.0001, "sentence", "4.0e-04"),  # "< 0.001" would not decide against alpha 1e-4
    (0.000104, 0.0001, "sentence", "1.04e-04"),
    (0.45, 0.05, "sentence", "0.45"),
    (0.0032, 0.05, "sentence", "0.003"),
    (0.050004, 0.05, "table", "0.050004"),
    (0.049996, 0.05, "table", "0.049996"),
    (0.04999, 0.05, "table", "0.04999"),
    (1.04e-5, 1e-5, "table", "1.04e-05"),
    (4e-5, None, "table", "4.0e-05"),
    (0.0, None, "table", "0.0e+00"),  # a t-test p that underflows to 0
    (0.0, 1e-5, "table", "0.0e+00"),
    (0.1251, 0.125, "sentence", "0.13"),  # 2 decimals already decide
    (0.1251, 0.126, "sentence", "0.125"),  # 0.13 would read as above alpha
    (float("nan"), 0.05, "table", "n/a"),
    (None, 0.05, "sentence", "n/a"),
])
def test_format_p_matrix(p, alpha, style, text):
    assert format_p(p, alpha, style) == text
    if alpha is not None and p is not None and p == p and not text.startswith("<"):
        printed = float(text)  # the printed value decides as the exact p does
        assert (printed <= alpha) == (p <= alpha) and (printed == alpha) == (p == alpha)


def test_adjacent_floats_around_alpha_are_told_apart():
    import math

    above, below = math.nextafter(0.05, 1.0), math.nextafter(0.05, 0.0)
    assert float(format_p(above, 0.05)) > 0.05 and float(format_p(below, 0.05, "sentence")) < 0.05
    assert float(format_p(above, 0.05)) == above


def test_helpers_and_errors():
    assert fmt_p(0.046875) == "0.0469" and fmt_p_short(0.046875, 0.05) == "0.047"
    assert format_alpha(0.05) == "0.05" and format_alpha(0.0123456789) == "0.0123456789"
    with pytest.raises(InputError, match="alpha"):
        format_p(0.5, 1.5)
    with pytest.raises(InputError, match="style"):
        format_p(0.5, 0.05, "prose")
