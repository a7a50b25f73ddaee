"""Paired comparison of a rewrite variant against the original queries, on the same backend.

For each metric, the two inputs are per-query values over the *same* queries in the *same* order
(two :class:`~vdr.metrics.MetricsResult` objects, or two aligned arrays). The per-query
differences ``d = rewritten - original`` (float64, shape ``(n_queries,)``) are summarised by:

* ``delta``: the mean difference ``mean(d)`` (= mean(rewritten) - mean(original)).
* ``p_value``: two-sided paired **randomization test** (sign-flip permutation test). Under the null
  hypothesis that the variant labels are exchangeable within each query, every ``d_i`` is equally
  likely to carry either sign; the p-value is the share of the ``2^n`` sign assignments whose mean
  difference is at least as extreme as the observed one. Monte-Carlo estimate with ``B`` random
  sign vectors: ``p = (1 + #{|mean(s * d)| >= |mean(d)|}) / (1 + B)`` (the ``+1`` counts the observed
  assignment, so the estimate is never 0 and the test is exact-level valid; Phipson & Smyth 2010).
  The **exact** test enumerates all ``2^n`` sign vectors and returns ``#{|mean(s * d)| >= |mean(d)|} / 2^n``;
  it is used automatically when ``n <= 16`` and ``2^n <= B`` (then enumeration is no more work than
  sampling, and a Monte-Carlo estimate would hide the test's granularity), or on request
  (``exact=True``). ``p_min`` records the smallest p-value the test can give: exact,
  ``2 / 2^m`` with ``m`` the queries whose difference is non-zero (the observed signs and their
  mirror always count; a zero difference is unchanged by its flip), e.g. 0.25 with 3 queries;
  Monte Carlo, ``1 / (1 + B)``. Sources: Fisher 1935 (The Design of Experiments, §21);
  Smucker, Allan & Carterette 2007, "A comparison of statistical significance tests for information
  retrieval evaluation", CIKM (recommends the randomization test for IR).
* ``p_value_ttest``: paired Student t-test, :func:`scipy.stats.ttest_rel` (two-sided).
* ``ci95``: 95% percentile-bootstrap confidence interval of ``mean(d)`` (queries resampled with
  replacement; Efron & Tibshirani 1993, An Introduction to the Bootstrap, ch. 13).
* ``wins``/``ties``/``losses``: queries where rewritten > / == / < original (exact float equality).
* ``p_value_holm``: Holm–Bonferroni step-down adjustment of the randomization p-values over a
  labelled family of tests (Holm 1979, "A simple sequentially rejective multiple test procedure",
  Scand. J. Statist. 6:65-70); ``holm_family`` names every test of the family.

Randomness: one :class:`numpy.random.Generator` per test, seeded from ``seed`` through
:class:`numpy.random.SeedSequence` (separate streams for permutations and bootstrap), so the same
seed and inputs always give the same p-value and interval, whatever else runs. Every metric of one
call uses the same sign vectors and resamples (common random numbers).

Floating point: sign-flipped sums are computed in a different order from the observed sum, so a
permutation counts as "at least as extreme" when ``|sum(s * d)| >= |sum(d)| - tol`` with
``tol = 1e-9 * sum(|d|)``; otherwise the identity assignment itself could be missed by rounding.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from decimal import ROUND_HALF_EVEN, Decimal

import numpy as np

from .errors import AlignmentError, InputError
from .types import ORIGINAL, group_keys

__all__ = [
    "Comparison",
    "compare",
    "compare_arrays",
    "randomization_test",
    "paired_ttest",
    "bootstrap_ci",
    "holm",
    "holm_adjust",
    "use_exact",
    "smallest_p",
    "describe_test",
    "compare_variants",
    "compare_pairs",
    "adopt_pair_family",
    "holm_per_metric",
    "check_family",
    "FAMILIES",
    "compare_groups",
    "untested_groups",
    "GroupComparison",
    "group_order",
    "query_groups",
    "overlapping",
    "MISSING_GROUP",
    "check_alpha",
    "outcome",
    "format_p",
    "format_alpha",
    "ALPHA",
    "MAX_EXACT_QUERIES",
]

ALPHA = 0.05
"""Default significance level of vdr's verdicts and marks (Holm-adjusted p <= ``ALPHA``)."""


def outcome(delta: float, p_value_holm: float, alpha: float = ALPHA) -> str:
    """``"gain"``, ``"loss"`` or ``"ns"``: whether a change is significant at ``alpha`` after Holm
    (``p_value_holm <= alpha``; a NaN p is never significant) and its direction.

    Raises:
        InputError: ``alpha`` not in (0, 1).

    >>> outcome(0.07, 0.01), outcome(-0.07, 0.049), outcome(0.07, 0.28), outcome(0.0, 0.0)
    ('gain', 'loss', 'ns', 'ns')
    """
    check_alpha(alpha)
    if p_value_holm is None or math.isnan(p_value_holm) or p_value_holm > alpha or delta == 0:
        return "ns"
    return "gain" if delta > 0 else "loss"


def format_alpha(alpha: float) -> str:
    """``alpha`` as every sentence and note prints it: the shortest ``%g`` form that reads back as
    the same float (``0.05``), else Python's ``repr``.

    >>> format_alpha(0.05), format_alpha(0.0123456789)
    ('0.05', '0.0123456789')
    """
    short = f"{float(alpha):g}"
    return short if float(short) == float(alpha) else repr(float(alpha))


#: below this p a sentence says ``p < 0.001`` (when ``alpha`` is at least this, so that it decides)
P_FLOOR = Decimal("0.001")


def _p_text(p: float, decimals: int | None, sig: int) -> tuple[str, Decimal]:
    """``p`` rounded half-even from its exact binary value: to ``decimals`` places (fixed point),
    or to ``sig`` significant digits (scientific, ``decimals=None``); the text and its value."""
    exact = Decimal(p)
    if decimals is not None:
        r = exact.quantize(Decimal(1).scaleb(-decimals), rounding=ROUND_HALF_EVEN)
        return f"{r:.{decimals}f}", r
    if p == 0:
        return f"{0:.{sig - 1}e}", Decimal(0)
    text = f"{exact:.{sig - 1}e}"  # Decimal's own formatting rounds half-even from the exact value
    mantissa, _, exponent = text.partition("e")
    return f"{mantissa}e{int(exponent):+03d}", Decimal(text)


def format_p(p: float | None, alpha: float | None = None, style: str = "table") -> str:
    """A p-value as vdr prints it, never rounded across ``alpha``.

    ``style="table"``: 4 decimals (``0.0469``), ``1.2e-05`` below 1e-4; ``style="sentence"``: 2
    decimals from 0.01 (``0.45``), 3 from 0.001 (``0.003``), ``< 0.001`` below (scientific,
    ``1.2e-05``, when ``alpha`` is below 0.001). With ``alpha``, digits are added until the printed
    value lies on the same side of ``alpha`` (as :func:`format_alpha` prints it) as the exact p, and
    equals it only when p equals ``alpha`` exactly: a reader comparing the two numbers reaches the
    verdict of :func:`outcome` (``p <= alpha``). ``n/a`` when undefined (``None`` or NaN, e.g. the
    t-test on identical values).

    >>> format_p(0.046875, 0.05, "sentence"), format_p(0.0546875, 0.05, "sentence")
    ('0.047', '0.055')
    >>> format_p(0.0004, 0.05, "sentence"), format_p(0.05, 0.05, "sentence"), format_p(0.050004, 0.05)
    ('< 0.001', '0.05', '0.050004')

    Raises:
        InputError: ``alpha`` not in (0, 1); ``style`` unknown.
    """
    if style not in ("table", "sentence"):
        raise InputError(f"p-value style must be 'table' or 'sentence', got {style!r}")
    if p is None or (isinstance(p, (float, np.floating)) and math.isnan(p)):
        return "n/a"
    p = float(p)
    a = None if alpha is None else Decimal(format_alpha(check_alpha(alpha)))
    if style == "sentence" and p < P_FLOOR and (a is None or a >= P_FLOOR):
        return f"< {P_FLOOR}"
    if style == "table":
        decimals = 4 if p >= 1e-4 else None
    else:
        decimals = 2 if p >= 0.01 else 3 if p >= 0.001 else None
    sig = 2
    for _ in range(40):  # 17 significant digits always decide; the bound only guards the loop
        text, value = _p_text(p, decimals, sig)
        if a is None or (value > a) == (p > alpha) and (value < a) == (p < alpha):
            return text
        decimals, sig = (None if decimals is None else decimals + 1), sig + 1
    return repr(p)


def check_alpha(alpha: object) -> float:
    """``alpha`` as a float in (0, 1). Raises InputError otherwise (``--alpha`` names the option)."""
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float, np.floating)) or not 0 < float(alpha) < 1:
        raise InputError(f"--alpha (significance level) must be a number in (0, 1), got {alpha!r}")
    return float(alpha)

MAX_EXACT_QUERIES = 16
"""Largest number of queries for which the exact test enumerates all ``2^n`` sign vectors."""


def use_exact(n_queries: int, n_permutations: int, exact: bool | None = None) -> bool:
    """Whether the randomization test enumerates all ``2^n`` sign vectors.

    ``exact=None`` (the default everywhere): exact when ``n <= 16`` and ``2^n <= n_permutations``;
    ``True``/``False`` force it (``True`` with ``n > 16`` is refused by the callers).

    >>> use_exact(3, 10_000), use_exact(14, 10_000), use_exact(16, 100_000), use_exact(3, 10_000, exact=False)
    (True, False, True, False)
    """
    if exact is not None:
        return bool(exact)
    return n_queries <= MAX_EXACT_QUERIES and (1 << n_queries) <= n_permutations


def smallest_p(differences: object, n_permutations: int, exact: bool) -> float:
    """The smallest p-value the randomization test can return on ``differences`` (shape ``(n,)``):
    exact, ``2 / 2^m`` with ``m`` the non-zero differences (1.0 when every difference is 0);
    Monte Carlo, ``1 / (1 + n_permutations)``.

    >>> smallest_p([0.1, 0.2, 0.3], 10_000, exact=True), smallest_p([0.1, 0.0, 0.3], 10_000, exact=True)
    (0.25, 0.5)
    >>> smallest_p([0.1, 0.2, 0.3], 9_999, exact=False)
    0.0001
    """
    if not exact:
        return 1.0 / (1 + int(n_permutations))
    m = int(np.count_nonzero(np.asarray(differences, dtype=np.float64)))
    return 1.0 if m == 0 else 2.0 / float(1 << m)

_REL_TOL = 1e-9
_BLOCK_ELEMENTS = 1 << 22  # sign / index matrix elements per vectorised block (~4M)


@dataclass(frozen=True)
class Comparison:
    """One metric of one rewrite variant against the originals on the same backend.

    Attributes:
        metric: metric name (``"ndcg@3"``).
        original: mean of the original queries' values.
        rewritten: mean of the rewritten queries' values.
        delta: ``rewritten - original`` (mean paired difference).
        p_value: two-sided paired randomization test p-value (see the module docstring).
        p_value_ttest: two-sided paired t-test p-value (:func:`paired_ttest`; NaN when undefined).
        p_value_holm: ``p_value`` after Holm–Bonferroni adjustment over ``holm_family``.
        holm_family: labels of every test in the Holm family (``"variant:metric"``, or ``"metric"``
            without a variant), in the order they were adjusted together.
        ci95: ``(low, high)`` 95% percentile-bootstrap interval of ``delta``.
        wins: queries with rewritten > original. ties: equal values. losses: rewritten < original.
        n_queries: number of paired queries.
        variant: name of the rewrite variant, if given.
        n_permutations: random sign vectors used (``2^n`` when ``exact``).
        exact: whether ``p_value`` came from full enumeration.
        p_min: the smallest p-value the test could have given on these data (:func:`smallest_p`);
            a p-value equal to it is the strongest evidence the design allows.
        n_bootstrap: bootstrap resamples.
        seed: the seed of the random streams.
        baseline: for a pair of systems (:func:`compare_pairs`), the system ``variant`` is
            compared with (``delta = variant - baseline``); ``None`` otherwise (the baseline is
            the originals, or the one named by the caller).
    """

    metric: str
    original: float
    rewritten: float
    delta: float
    p_value: float
    p_value_ttest: float
    p_value_holm: float
    holm_family: tuple[str, ...]
    ci95: tuple[float, float]
    wins: int
    ties: int
    losses: int
    n_queries: int
    variant: str | None = None
    n_permutations: int = 10_000
    exact: bool = False
    n_bootstrap: int = 10_000
    seed: int = 0
    p_min: float = math.nan
    baseline: str | None = None

    @property
    def label(self) -> str:
        """``"variant:metric"`` (or ``"metric"``; ``"variant-baseline:metric"`` for a pair of
        :func:`compare_pairs`): this test's name inside a Holm family."""
        name = self.variant if self.baseline is None or self.variant is None else f"{self.variant}-{self.baseline}"
        return self.metric if name is None else f"{name}:{self.metric}"

    def outcome(self, alpha: float = ALPHA) -> str:
        """``"gain"`` / ``"loss"``: significant at ``alpha`` after Holm (``p_value_holm <= alpha``),
        in the direction of ``delta``; ``"ns"``: not significant (:func:`outcome`)."""
        return outcome(self.delta, self.p_value_holm, alpha)

    def to_dict(self) -> dict:
        """Plain JSON-ready dict (``ci95`` as a 2-list, ``holm_family`` as a list; NaN p-values,
        e.g. the t-test on one query, become ``None`` so that the output is strict JSON)."""

        def num(x: float) -> float | None:
            return None if isinstance(x, float) and math.isnan(x) else x

        return {
            "variant": self.variant,
            "metric": self.metric,
            "original": self.original,
            "rewritten": self.rewritten,
            "delta": self.delta,
            "p_value": self.p_value,
            "p_value_ttest": num(self.p_value_ttest),
            "p_value_holm": num(self.p_value_holm),
            "holm_family": list(self.holm_family),
            "ci95": list(self.ci95),
            "wins": self.wins,
            "ties": self.ties,
            "losses": self.losses,
            "n_queries": self.n_queries,
            "p_min": num(self.p_min),
            **({"baseline": self.baseline} if self.baseline is not None else {}),
            "test": {
                "p_value": ("exact" if self.exact else "monte-carlo") + " two-sided paired randomization (sign-flip) test",
                "exact": self.exact,
                "n_permutations": self.n_permutations,
                "p_min": "smallest attainable p: exact 2 / 2^(queries with a non-zero difference); monte-carlo 1 / (1 + n_permutations)",
                "p_value_ttest": "two-sided paired t-test (scipy.stats.ttest_rel)",
                "ci95": "percentile bootstrap of the mean difference",
                "n_bootstrap": self.n_bootstrap,
                "p_value_holm": "Holm-Bonferroni step-down over holm_family (Holm 1979)",
                "seed": self.seed,
            },
        }


# --------------------------------------------------------------------------------------------
# input checks


def _check_seed(seed: object) -> int:
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)) or int(seed) < 0:
        raise InputError(f"seed must be a non-negative integer, got {seed!r}")
    return int(seed)


def _check_count(value: object, what: str) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or int(value) < 1:
        raise InputError(f"{what} must be a positive integer, got {value!r}")
    return int(value)


def _as_values(x: object, what: str) -> np.ndarray:
    try:
        a = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise InputError(f"{what} must be a 1-D array of numbers: {e}") from None
    if a.ndim != 1:
        raise InputError(f"{what} must be 1-D (one value per query), got shape {a.shape}")
    if not np.isfinite(a).all():
        bad = int(np.nonzero(~np.isfinite(a))[0][0])
        raise InputError(f"{what} holds a non-finite value at position {bad}: {a[bad]!r}")
    return a


def _differences(original: object, rewritten: object) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    a = _as_values(original, "original")
    b = _as_values(rewritten, "rewritten")
    if a.shape != b.shape:
        raise AlignmentError(f"original and rewritten must hold one value per query each; got {a.shape[0]} and {b.shape[0]} values")
    if a.shape[0] == 0:
        raise InputError("no queries to compare")
    return a, b, b - a


def _streams(seed: int) -> tuple[np.random.Generator, np.random.Generator]:
    perm, boot = np.random.SeedSequence(seed).spawn(2)
    return np.random.default_rng(perm), np.random.default_rng(boot)


# --------------------------------------------------------------------------------------------
# tests


def randomization_test(
    differences: object,
    *,
    n_permutations: int = 10_000,
    seed: int | np.random.Generator = 0,
    exact: bool | None = None,
) -> float:
    """Two-sided paired randomization (sign-flip) test of ``mean(differences) == 0``.

    Args:
        differences: per-query paired differences ``rewritten - original``, shape ``(n,)``, finite.
        n_permutations: random sign vectors ``B`` (ignored when ``exact``).
        seed: non-negative int (or a ready :class:`numpy.random.Generator`).
        exact: enumerate all ``2^n`` sign vectors instead of sampling (``n <= 16``); ``None``
            (default): exactly when :func:`use_exact` says so (``n <= 16`` and ``2^n <= B``).

    Returns:
        Monte-Carlo: ``(1 + #{|sum(s * d)| >= |sum(d)|}) / (1 + B)`` in ``(0, 1]``; exact:
        ``#{...} / 2^n`` (includes the identity and its mirror). 1.0 when every difference is 0.

    Raises:
        InputError: empty or non-finite input, a bad count or seed, ``exact`` with ``n > 16``.

    Sources: Fisher 1935; Smucker, Allan & Carterette 2007 (CIKM); Phipson & Smyth 2010 for the
    ``+1`` correction of Monte-Carlo p-values.

    >>> randomization_test([0.1, 0.2, 0.3])  # exact: 2 of the 8 sign vectors reach |sum| 0.6
    0.25
    """
    d = _as_values(differences, "differences")
    n = d.shape[0]
    if n == 0:
        raise InputError("no queries to compare")
    B = _check_count(n_permutations, "n_permutations")
    exact = use_exact(n, B, exact)
    abs_sum = float(np.abs(d).sum())
    if abs_sum == 0.0:
        return 1.0
    observed = abs(float(d.sum()))
    threshold = observed - _REL_TOL * abs_sum
    if exact:
        if n > MAX_EXACT_QUERIES:
            raise InputError(f"exact enumeration needs n <= {MAX_EXACT_QUERIES} queries (2^n sign vectors), got {n}")
        codes = np.arange(1 << n, dtype=np.int64)[:, None]
        signs = 1.0 - 2.0 * ((codes >> np.arange(n, dtype=np.int64)) & 1)  # (2^n, n) of +-1
        hits = int(np.count_nonzero(np.abs(signs @ d) >= threshold))
        return hits / float(1 << n)
    rng = seed if isinstance(seed, np.random.Generator) else _streams(_check_seed(seed))[0]
    block = max(1, min(B, _BLOCK_ELEMENTS // n))
    hits = 0
    done = 0
    while done < B:
        m = min(block, B - done)
        bits = rng.integers(0, 2, size=(m, n), dtype=np.int8)
        sums = (1.0 - 2.0 * bits) @ d
        hits += int(np.count_nonzero(np.abs(sums) >= threshold))
        done += m
    return (1 + hits) / (1 + B)


def paired_ttest(original: object, rewritten: object) -> float:
    """Two-sided paired t-test p-value, :func:`scipy.stats.ttest_rel` (``rewritten`` vs ``original``).

    Degenerate cases (scipy would return NaN or warn), handled explicitly:

    * every difference is 0: ``1.0`` (no evidence of any change);
    * every difference is the same non-zero value (zero variance): ``0.0``, the limit of
      ``t -> +-inf`` that scipy reports;
    * fewer than 2 queries: NaN (the t statistic is undefined).

    Args:
        original, rewritten: per-query values, float, shape ``(n,)`` each, aligned.

    Raises:
        InputError / AlignmentError: non-finite values, different lengths, no queries.
    """
    a, b, d = _differences(original, rewritten)
    if np.all(d == 0):
        return 1.0
    if d.shape[0] < 2:
        return math.nan
    if np.all(d == d[0]):
        return 0.0
    from scipy import stats

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # precision-loss notes on nearly equal data
        return float(stats.ttest_rel(b, a).pvalue)


def bootstrap_ci(
    differences: object,
    *,
    n_bootstrap: int = 10_000,
    confidence: float = 0.95,
    seed: int | np.random.Generator = 0,
) -> tuple[float, float]:
    """Percentile-bootstrap confidence interval of the mean of ``differences``.

    Draws ``n_bootstrap`` resamples of the ``n`` queries with replacement, takes each resample's mean
    and returns the ``(1 - confidence) / 2`` and ``(1 + confidence) / 2`` quantiles (linear
    interpolation, :func:`numpy.quantile`). Vectorised in blocks of resamples.

    Args:
        differences: per-query paired differences, shape ``(n,)``, finite.
        n_bootstrap: number of resamples.
        confidence: coverage in (0, 1).
        seed: non-negative int (or a ready :class:`numpy.random.Generator`).

    Returns:
        ``(low, high)`` floats; ``(c, c)`` when every difference equals ``c`` (no resampling).

    Raises:
        InputError: empty or non-finite input, bad counts, confidence or seed.

    Source: Efron & Tibshirani 1993, An Introduction to the Bootstrap, ch. 13 (percentile interval).
    """
    d = _as_values(differences, "differences")
    n = d.shape[0]
    if n == 0:
        raise InputError("no queries to compare")
    B = _check_count(n_bootstrap, "n_bootstrap")
    if not (isinstance(confidence, (float, int)) and 0 < confidence < 1):
        raise InputError(f"confidence must be in (0, 1), got {confidence!r}")
    rng = seed if isinstance(seed, np.random.Generator) else _streams(_check_seed(seed))[1]
    if np.all(d == d[0]):
        return float(d[0]), float(d[0])
    block = max(1, min(B, _BLOCK_ELEMENTS // n))
    means = np.empty(B, dtype=np.float64)
    done = 0
    while done < B:
        m = min(block, B - done)
        idx = rng.integers(0, n, size=(m, n))
        means[done : done + m] = d[idx].mean(axis=1)
        done += m
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(means, [alpha, 1.0 - alpha])
    return float(low), float(high)


# --------------------------------------------------------------------------------------------
# multiple testing


def holm(p_values: Sequence[float] | np.ndarray) -> np.ndarray:
    """Holm–Bonferroni step-down adjusted p-values, in the input order.

    With the ``m`` p-values sorted ascending ``p_(1) <= ... <= p_(m)``:
    ``adj_(i) = max_{j <= i} min(1, (m - j + 1) * p_(j))``. Rejecting ``adj <= alpha`` controls the
    family-wise error rate at ``alpha`` (Holm 1979, Scand. J. Statist. 6:65-70). NaN p-values are
    left NaN and are not counted in ``m``. Ties keep input order (stable sort).

    Args:
        p_values: the family's raw p-values, each in [0, 1] or NaN.

    Returns:
        float64 array of the same length.

    Raises:
        InputError: a value outside [0, 1] or a non-1-D input.
    """
    p = np.asarray(p_values, dtype=np.float64)
    if p.ndim != 1:
        raise InputError(f"p_values must be 1-D, got shape {p.shape}")
    ok = ~np.isnan(p)
    if np.any((p[ok] < 0) | (p[ok] > 1)):
        raise InputError("p-values must lie in [0, 1]")
    out = np.full(p.shape, np.nan)
    idx = np.nonzero(ok)[0]
    m = idx.shape[0]
    if m == 0:
        return out
    order = idx[np.argsort(p[idx], kind="stable")]
    stepped = np.minimum(1.0, (m - np.arange(m)) * p[order])
    out[order] = np.maximum.accumulate(stepped)
    return out


def holm_adjust(comparisons: Sequence[Comparison]) -> list[Comparison]:
    """Re-adjust ``p_value_holm`` of ``comparisons`` as one Holm family (e.g. every variant x metric
    of one backend). Returns new :class:`Comparison` objects (same order) whose ``holm_family`` lists
    every test's :attr:`Comparison.label`.

    Raises:
        InputError: two comparisons with the same label (the family would be ambiguous).
    """
    comps = list(comparisons)
    labels = tuple(c.label for c in comps)
    if len(set(labels)) != len(labels):
        dup = next(lab for lab in labels if labels.count(lab) > 1)
        raise InputError(f"two comparisons share the label {dup!r}; give each rewrite variant a distinct name")
    adj = holm([c.p_value for c in comps])
    return [replace(c, p_value_holm=float(a), holm_family=labels) for c, a in zip(comps, adj)]


# --------------------------------------------------------------------------------------------
# comparisons


def compare_arrays(
    original: object,
    rewritten: object,
    metric: str = "metric",
    *,
    variant: str | None = None,
    n_permutations: int = 10_000,
    n_bootstrap: int = 10_000,
    seed: int = 0,
    exact: bool | None = None,
) -> Comparison:
    """Compare two aligned per-query arrays of one metric (the family is this single test, so
    ``p_value_holm == p_value``; use :func:`holm_adjust` to adjust over several).

    Args:
        original, rewritten: per-query values, shape ``(n,)`` each, same queries in the same order.
        metric: the metric's name (a label only).
        variant: the rewrite variant's name (a label only).
        n_permutations, n_bootstrap, seed, exact: see :func:`randomization_test` / :func:`bootstrap_ci`.

    Raises:
        InputError: non-finite values, no queries, bad counts or seed; AlignmentError: lengths differ.
    """
    seed = _check_seed(seed)
    n_permutations = _check_count(n_permutations, "n_permutations")
    n_bootstrap = _check_count(n_bootstrap, "n_bootstrap")
    a, b, d = _differences(original, rewritten)
    n = d.shape[0]
    exact = use_exact(n, n_permutations, exact)
    if exact and n > MAX_EXACT_QUERIES:
        raise InputError(f"exact enumeration needs n <= {MAX_EXACT_QUERIES} queries (2^n sign vectors), got {n}")
    perm_rng, boot_rng = _streams(seed)
    p = randomization_test(d, n_permutations=n_permutations, seed=perm_rng, exact=exact)
    low, high = bootstrap_ci(d, n_bootstrap=n_bootstrap, seed=boot_rng)
    c = Comparison(
        metric=str(metric),
        original=float(a.mean()),
        rewritten=float(b.mean()),
        delta=float(d.mean()),
        p_value=float(p),
        p_value_ttest=paired_ttest(a, b),
        p_value_holm=float(p),
        holm_family=(),
        ci95=(low, high),
        wins=int(np.count_nonzero(d > 0)),
        ties=int(np.count_nonzero(d == 0)),
        losses=int(np.count_nonzero(d < 0)),
        n_queries=n,
        variant=variant,
        n_permutations=(1 << n) if exact else n_permutations,
        exact=exact,
        n_bootstrap=n_bootstrap,
        seed=seed,
        p_min=smallest_p(d, n_permutations, exact),
    )
    return replace(c, holm_family=(c.label,))


def _aligned_values(result: object, what: str) -> tuple[tuple[str, ...], Mapping[str, np.ndarray]]:
    ids = getattr(result, "query_ids", None)
    values = getattr(result, "values", None)
    if ids is None or not isinstance(values, Mapping):
        raise InputError(f"{what} must be a vdr MetricsResult (query_ids and values), got {type(result).__name__}")
    return tuple(ids), values


def compare(
    original: object,
    rewritten: object,
    metrics: Sequence[str] | None = None,
    *,
    variant: str | None = None,
    n_permutations: int = 10_000,
    n_bootstrap: int = 10_000,
    seed: int = 0,
    exact: bool | None = None,
) -> list[Comparison]:
    """Compare a rewrite variant's per-query metrics against the originals' (same backend).

    Each metric gets :func:`compare_arrays`; then the randomization p-values of all ``metrics`` of
    this call are Holm-adjusted as one family (``holm_family`` = their labels). To adjust over
    several variants at once, concatenate the lists and pass them to :func:`holm_adjust`.

    Args:
        original, rewritten: :class:`~vdr.metrics.MetricsResult` of the original queries and of
            the variant, evaluated against the same qrels (``query_ids`` must match exactly, in order).
        metrics: metric names to compare; default: every metric of ``original`` (in its order).
        variant: the variant's name, used in the labels (``"keywords:ndcg@3"``).
        n_permutations: random sign vectors of the randomization test (default 10,000).
        n_bootstrap: bootstrap resamples (default 10,000).
        seed: seed of the random streams (same seed, same results).
        exact: enumerate all ``2^n`` sign vectors (``n <= 16``) instead of sampling; ``None``
            (default): when ``n <= 16`` and ``2^n <= n_permutations`` (:func:`use_exact`).

    Returns:
        One :class:`Comparison` per metric, in ``metrics`` order.

    Raises:
        AlignmentError: the query ids differ (message names the first mismatch).
        InputError: a metric missing from either result, an empty metric list, bad counts or seed.
    """
    ids_a, vals_a = _aligned_values(original, "original")
    ids_b, vals_b = _aligned_values(rewritten, "rewritten")
    if ids_a != ids_b:
        only_a = sorted(set(ids_a) - set(ids_b))
        only_b = sorted(set(ids_b) - set(ids_a))
        if only_a or only_b:
            raise AlignmentError(
                f"the two results cover different queries: {len(only_a)} only in original"
                f" (first {only_a[:3]}), {len(only_b)} only in rewritten (first {only_b[:3]})"
            )
        i = next(i for i, (x, y) in enumerate(zip(ids_a, ids_b)) if x != y)
        raise AlignmentError(f"the two results list the same queries in a different order (position {i}: {ids_a[i]!r} vs {ids_b[i]!r})")
    names = list(vals_a) if metrics is None else [str(m) for m in metrics]
    if not names:
        raise InputError("no metrics to compare")
    if len(set(names)) != len(names):
        raise InputError(f"metric listed twice: {names}")
    for m in names:
        for what, vals in (("original", vals_a), ("rewritten", vals_b)):
            if m not in vals:
                raise InputError(f"metric {m!r} is missing from the {what} result (it has: {', '.join(vals)})")
    comps = [
        compare_arrays(
            vals_a[m],
            vals_b[m],
            m,
            variant=variant,
            n_permutations=n_permutations,
            n_bootstrap=n_bootstrap,
            seed=seed,
            exact=exact,
        )
        for m in names
    ]
    return holm_adjust(comps)


def describe_test(comparisons: Sequence[Comparison]) -> str:
    """The randomization test behind ``comparisons`` in one phrase, for table footers: exact or
    Monte Carlo, the number of sign assignments and the smallest attainable p (:attr:`Comparison.p_min`;
    a range when it differs between comparisons, which happens when some queries do not change).

    >>> describe_test([compare_arrays([0.0, 0.0, 0.0], [0.1, 0.2, 0.3])])
    'exact test over all 2^3 = 8 sign assignments; smallest attainable p 0.25'
    >>> describe_test([compare_arrays(np.zeros(20), np.linspace(0, 1, 20), n_permutations=999, seed=7)])
    '999 random sign assignments, seed 7; smallest attainable p 0.001'
    """
    comps = list(comparisons)
    parts = []
    for exact in (True, False):
        group = [c for c in comps if c.exact == exact]
        if not group:
            continue
        lo, hi = min(c.p_min for c in group), max(c.p_min for c in group)
        floor = f"{lo:.4g}" if lo == hi else f"{lo:.4g} to {hi:.4g} (queries that do not change cannot flip)"
        if exact:
            ns = sorted({c.n_queries for c in group})
            n = "/".join(map(str, ns))
            count = "/".join(str(1 << x) for x in ns)
            parts.append(f"exact test over all 2^{n} = {count} sign assignments; smallest attainable p {floor}")
        else:
            b = "/".join(str(x) for x in sorted({c.n_permutations for c in group}))
            seeds = "/".join(str(x) for x in sorted({c.seed for c in group}))
            parts.append(f"{b} random sign assignments, seed {seeds}; smallest attainable p {floor}")
    return "; ".join(parts)


def compare_variants(
    results: Mapping[str, Mapping[str, object]],
    metrics: Sequence[str],
    *,
    baseline: str = ORIGINAL,
    n_permutations: int = 10_000,
    n_bootstrap: int = 10_000,
    seed: int = 0,
) -> list[tuple[str, Comparison]]:
    """Every variant against ``baseline`` on each backend, Holm-adjusted per backend: the one
    comparison loop of vdr (``vdr evaluate`` and ``vdr judge`` both use it).

    For each backend (in ``results`` order), each variant other than ``baseline`` (in order) is
    compared with :func:`compare` on ``metrics``; then the randomization p-values of all
    variants x metrics of that backend are Holm-adjusted as one family (:func:`holm_adjust`).

    Args:
        results: ``{backend: {variant: MetricsResult}}``; every backend holds ``baseline``.
        metrics: metric names to compare.
        baseline: the variant the others are compared with (default ``"original"``).
        n_permutations, n_bootstrap, seed: see :func:`compare`.

    Returns:
        ``[(backend, Comparison), ...]``: backends in order, within a backend variant-major then
        ``metrics`` order; backends with only the baseline contribute nothing.

    Raises:
        InputError: a backend without the ``baseline`` variant; see also :func:`compare`.
    """
    out: list[tuple[str, Comparison]] = []
    for backend, by_variant in results.items():
        if baseline not in by_variant:
            raise InputError(f"backend {backend!r} has no {baseline!r} run to compare the variants with")
        comps: list[Comparison] = []
        for variant, result in by_variant.items():
            if variant != baseline:
                comps += compare(by_variant[baseline], result, metrics, variant=variant,
                                 n_permutations=n_permutations, n_bootstrap=n_bootstrap, seed=seed)
        if comps:
            out += [(backend, c) for c in holm_adjust(comps)]
    return out


def compare_pairs(
    results: Mapping[str, object],
    metrics: Sequence[str],
    *,
    n_permutations: int = 10_000,
    n_bootstrap: int = 10_000,
    seed: int = 0,
) -> list[Comparison]:
    """Every pair of systems (ranx's comparison matrix; ``vdr compare --pairs all``).

    For the systems in ``results`` order ``s_1, ..., s_m``, each pair ``i < j`` is compared with
    :func:`compare` (``variant = s_j``, ``baseline = s_i``, so ``delta = mean(s_j) - mean(s_i)``) on
    every metric; then the randomization p-values of all ``m (m - 1) / 2`` pairs x metrics are
    Holm-adjusted as one family (:func:`holm_adjust`; labels ``"s_j-s_i:metric"``; ``vdr compare``'s
    default then re-adjusts each metric's pairs as its own family, :func:`holm_per_metric`). The
    change of the reversed pair is ``-delta`` with the same p-values and the wins and losses swapped.

    Args:
        results: ``{system name: MetricsResult}`` over the same queries in the same order.
        metrics: metric names to compare.
        n_permutations, n_bootstrap, seed: see :func:`compare`.

    Returns:
        One :class:`Comparison` per pair and metric, pair-major (``(s_1, s_2), (s_1, s_3), ...,
        (s_2, s_3), ...``), then ``metrics`` order; ``[]`` with fewer than two systems.

    Raises:
        AlignmentError / InputError: as :func:`compare` (names listed twice included).
    """
    names = list(results)
    comps: list[Comparison] = []
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            comps += [replace(c, baseline=a) for c in compare(results[a], results[b], metrics, variant=b,
                                                               n_permutations=n_permutations, n_bootstrap=n_bootstrap, seed=seed)]
    return holm_adjust(comps) if comps else []


#: The Holm families of ``vdr compare`` (``--family``): ``"primary"`` (default), one family per
#: compared metric (the primary metric's over the comparisons made is the one the verdicts read);
#: ``"all"``, one family over the comparisons x every compared metric.
FAMILIES = ("primary", "all")


def check_family(family: object) -> str:
    """``family`` if it is one of :data:`FAMILIES`; otherwise InputError naming ``--family``."""
    if family not in FAMILIES:
        raise InputError(f"--family must be 'primary' (Holm over the comparisons made, one family per metric) or 'all'"
                         f" (one family over the comparisons x every compared metric), got {family!r}")
    return str(family)


def holm_per_metric(comparisons: Sequence[Comparison]) -> list[Comparison]:
    """``comparisons`` (same order) with each metric's tests Holm-adjusted as one family
    (:func:`holm_adjust` over the comparisons of that metric; ``holm_family`` lists them): the
    default family of ``vdr compare`` (``--family primary``). Holm 1979 within each family.

    >>> cs = [compare_arrays([0.0] * 3, [1.0] * 3, m, variant=v) for v in ("x", "y") for m in ("a", "b")]
    >>> [c.holm_family for c in holm_per_metric(cs)][:2]
    [('x:a', 'y:a'), ('x:b', 'y:b')]
    """
    comps = list(comparisons)
    by_metric: dict[str, list[int]] = {}
    for i, c in enumerate(comps):
        by_metric.setdefault(c.metric, []).append(i)
    out = list(comps)
    for idx in by_metric.values():
        for i, c in zip(idx, holm_adjust([comps[i] for i in idx])):
            out[i] = c
    return out


def adopt_pair_family(comparisons: Sequence[tuple[str, Comparison]], pairwise: Sequence[Comparison],
                      baseline: str) -> list[tuple[str, Comparison]]:
    """``comparisons`` (each system against ``baseline``, :func:`compare_variants`) with the p-values of the same test in the
    family of every pair (:func:`compare_pairs`): one family definition, one Holm p per test, so a
    pair shows the same ``p_value_holm`` in every table. The test of a pair is the same in both
    lists (same per-query values, same seed); its randomization p-value is two-sided, so the
    direction of the pair does not change it.

    Raises:
        InputError: a comparison whose pair and metric are not in ``pairwise``.
    """
    by_pair = {(frozenset((c.variant, c.baseline)), c.metric): c for c in pairwise}
    out = []
    for backend, c in comparisons:
        pc = by_pair.get((frozenset((c.variant, baseline)), c.metric))
        if pc is None:
            raise InputError(f"{c.variant} vs {baseline} on {c.metric} is not among the pairwise comparisons")
        out.append((backend, replace(c, p_value=pc.p_value, p_value_holm=pc.p_value_holm, holm_family=pc.holm_family)))
    return out


#: The group of queries that lack a value of the grouping field.
MISSING_GROUP = "(missing)"


@dataclass(frozen=True)
class GroupComparison:
    """One rewrite variant (or system) against the baseline within one group of queries.

    Attributes:
        backend: the backend (``"runs"`` for ``vdr compare``).
        field: the grouping field (``"type"``, ``"language"``, ...).
        group: the field's value shared by the group's queries (:data:`MISSING_GROUP` for the
            queries without one).
        comparison: the paired comparison on the group's queries only (``n_queries`` = the
            group's size; ``original`` / ``rewritten`` = the baseline's and the variant's means
            within the group); ``p_value_holm`` is adjusted over every group x variant of the same
            backend and field (:func:`compare_groups`).
    """

    backend: str
    field: str
    group: str
    comparison: Comparison

    def to_dict(self) -> dict:
        """:meth:`Comparison.to_dict` plus ``backend``, ``field`` and ``group``."""
        return dict(self.comparison.to_dict(), backend=self.backend, field=self.field, group=self.group)


def query_groups(query_ids: Sequence[str], values: Mapping[str, object]) -> dict[str, tuple[str, ...]]:
    """``{query id: its groups}`` along ``query_ids``: the canonical keys of its value
    (:func:`vdr.types.group_keys`: NFC strings, numbers by value, a list's elements, so one query
    can be in several groups), ``(MISSING_GROUP,)`` when it has no value.

    >>> query_groups(["q1", "q2", "q3"], {"q1": ["a", "b"], "q2": 1.0})
    {'q1': ('a', 'b'), 'q2': ('1',), 'q3': ('(missing)',)}

    Raises:
        InputError: a value that cannot be a key (an object, a nested list, NaN), naming the query.
    """
    out = {}
    for q in query_ids:
        try:
            keys = group_keys(values.get(q))
        except InputError as e:
            raise InputError(f"query {q!r}: {e}", id=q) from None
        out[q] = keys or (MISSING_GROUP,)
    return out


def group_order(query_ids: Sequence[str], values: Mapping[str, object]) -> list[str]:
    """The groups of ``values`` (``{query id: value}``; a list value puts its query in each of
    its elements' groups, :func:`query_groups`) met along ``query_ids``, in order of first
    appearance; :data:`MISSING_GROUP` last when some query has no value.

    >>> group_order(["q1", "q2", "q3", "q4"], {"q1": "visual", "q2": ["text", "visual"], "q3": "visual"})
    ['visual', 'text', '(missing)']

    Raises:
        InputError: as :func:`query_groups`.
    """
    seen = dict.fromkeys(k for keys in query_groups(query_ids, values).values() for k in keys if k != MISSING_GROUP)
    return [*seen, *([MISSING_GROUP] if any(not group_keys(values.get(q)) for q in query_ids) else [])]


def overlapping(query_ids: Sequence[str], values: Mapping[str, object]) -> int:
    """How many of ``query_ids`` belong to more than one group of ``values`` (:func:`query_groups`)."""
    return sum(1 for keys in query_groups(query_ids, values).values() if len(keys) > 1)


def untested_groups(query_ids: Sequence[str], values: Mapping[str, object], no_relevant: Collection[str]) -> dict[str, int]:
    """``{group: size}`` of the groups of ``values`` (:func:`query_groups` along ``query_ids``) in which
    no query has a relevant page (every query id in ``no_relevant``): :func:`compare_groups` does not
    compare them, and tables show them apart.

    >>> untested_groups(["q1", "q2", "q3"], {"q1": "a", "q2": "none", "q3": "none"}, {"q2", "q3"})
    {'none': 2}

    Raises:
        InputError: as :func:`query_groups`.
    """
    no_rel = set(no_relevant)
    if not no_rel:
        return {}
    member = query_groups(query_ids, values)
    out = {}
    for group in group_order(query_ids, values):
        qs = [q for q in query_ids if group in member[q]]
        if qs and all(q in no_rel for q in qs):
            out[group] = len(qs)
    return out


def compare_groups(
    results: Mapping[str, Mapping[str, object]],
    groups: Mapping[str, Mapping[str, str]],
    metric: str,
    *,
    baseline: str = ORIGINAL,
    n_permutations: int = 10_000,
    n_bootstrap: int = 10_000,
    seed: int = 0,
    no_relevant: Collection[str] = (),
) -> list[GroupComparison]:
    """Each variant against ``baseline`` within each group of queries (``--group-by FIELD``).

    For each backend and field, the queries are split by the field's canonical value
    (:func:`group_order`, :func:`vdr.types.group_keys`: NFC strings, numbers by value; a query whose
    value is a list is in the group of each element, so groups can overlap; queries without a
    value form :data:`MISSING_GROUP`); within each group every variant is
    compared with the baseline on ``metric`` (:func:`compare_arrays` on the group's queries: paired
    randomization test, t-test, bootstrap CI, W/T/L); then the randomization p-values of all groups
    x variants of that backend and field are Holm-adjusted as one family (labels
    ``"field=group/variant:metric"``). A query whose value of ``metric`` is NaN in either run is
    left out of its group's test. A group made only of ``no_relevant`` queries (no page is
    relevant to any of them: every ranking scores 0 or NaN there by definition) is not compared and
    stays out of the family (:func:`untested_groups` names those groups).

    Args:
        results: ``{backend: {variant: MetricsResult}}``; every backend holds ``baseline``.
        groups: ``{field: {query id: value}}``: a string, number, boolean or a list of them.
        metric: the metric compared (the primary metric).
        no_relevant: ids of the queries without a relevant page in the qrels.
        baseline, n_permutations, n_bootstrap, seed: see :func:`compare_variants`.

    Returns:
        :class:`GroupComparison` records: backend, then field, then group, then variant order.

    Raises:
        InputError: a backend without ``baseline``, a metric missing from a result, a value that
            cannot be a key (named with its query, :func:`query_groups`).
    """
    out: list[GroupComparison] = []
    for backend, by_variant in results.items():
        if baseline not in by_variant:
            raise InputError(f"backend {backend!r} has no {baseline!r} run to compare the variants with")
        ids, base_vals = _aligned_values(by_variant[baseline], baseline)
        if metric not in base_vals:
            raise InputError(f"metric {metric!r} is missing from the {baseline!r} result of backend {backend!r}")
        for field_name, values in groups.items():
            family: list[GroupComparison] = []
            member = query_groups(ids, values)
            skip = untested_groups(ids, values, no_relevant)
            for group in (g for g in group_order(ids, values) if g not in skip):
                idx = np.array([i for i, q in enumerate(ids) if group in member[q]], dtype=np.int64)
                for variant, result in by_variant.items():
                    if variant == baseline:
                        continue
                    vids, vals = _aligned_values(result, variant)
                    if vids != ids:
                        raise AlignmentError(f"backend {backend!r}: {variant!r} and {baseline!r} list different queries")
                    if metric not in vals:
                        raise InputError(f"metric {metric!r} is missing from the {variant!r} result of backend {backend!r}")
                    a = np.asarray(base_vals[metric], dtype=np.float64)[idx]
                    b = np.asarray(vals[metric], dtype=np.float64)[idx]
                    ok = ~(np.isnan(a) | np.isnan(b))
                    if not ok.any():
                        continue
                    c = compare_arrays(a[ok], b[ok], metric, variant=variant, n_permutations=n_permutations,
                                       n_bootstrap=n_bootstrap, seed=seed)
                    family.append(GroupComparison(backend, field_name, group, c))
            labels = tuple(f"{g.field}={g.group}/{g.comparison.label}" for g in family)
            adj = holm([g.comparison.p_value for g in family]) if family else []
            out += [replace(g, comparison=replace(g.comparison, p_value_holm=float(p), holm_family=labels)) for g, p in zip(family, adj)]
    return out
