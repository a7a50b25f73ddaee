"""The metric registry: every metric family declared once, with the names other tools use for it.

A family is one :class:`Family` row of :data:`METRICS`: its canonical name, whether it needs a
cutoff ``k``, its role (quality or diagnostic), its definition, its trec_eval / ir_measures
equivalent, the reference it follows, the spellings of other tools that mean the same measure
(ir_measures, MTEB, ranx, trec_eval) and its kernel (:mod:`vdr.metrics.kernels`). The default
cutoffs are declared here once (:data:`METRICS_CUTOFFS`, :data:`EVALUATE_CUTOFFS`); what a command
computes from them is a :class:`~vdr.metrics.plan.MetricPlan`. :func:`~vdr.metrics.evaluate_run`
dispatches through this table, the CLI help and the "unknown metric" error are built from it, and
:func:`parse_cutoffs` is the one parser of cutoffs.

Accepted spellings (case-insensitive), all mapped to vdr's canonical ``family@k``:

* ``family@k`` (vdr, ranx: ``ndcg@10``, ``hit_rate@3``; ir_measures: ``nDCG@10``, ``P@5``, ``RR@10``);
* ``family_at_k`` (MTEB: ``ndcg_at_10``, ``recall_at_100``);
* ``family_k`` / ``family.k`` (trec_eval / pytrec_eval: ``ndcg_cut_10``, ``P.5``, ``success_3``);
* ``family`` without a cutoff for the families that accept the whole list (``mrr``, ``RR``, ``AP``).

>>> str(parse_metric("nDCG@10")), str(parse_metric("ndcg_at_10")), str(parse_metric("P@5"))
('ndcg@10', 'ndcg@10', 'precision@5')
>>> [str(parse_metric(n)) for n in ("RR", "RR@10", "AP@10", "Success@3", "hit_rate@3", "recall_at_100")]
['mrr', 'mrr@10', 'map@10', 'hit@3', 'hit@3', 'recall@100']
>>> parse_cutoffs("10, 3,5,3")
[3, 5, 10]
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..errors import InputError
from . import kernels as K

if TYPE_CHECKING:  # the evaluation context; imported for annotations only (no cycle at runtime)
    from .compute import Ranked

__all__ = [
    "Family",
    "METRICS",
    "ROLES",
    "METRICS_CUTOFFS",
    "EVALUATE_CUTOFFS",
    "PRIMARY_CUTOFF",
    "Metric",
    "parse_metric",
    "parse_cutoffs",
    "default_metrics",
    "diagnostic_metrics",
    "known_metrics",
    "alias_table",
    "describe_metrics",
    "metric_label",
]


#: The roles of a metric family: ``"quality"`` (compared between systems) or ``"diagnostic"``
#: (judgment coverage and score ties: reported beside the quality metrics, never tested).
ROLES = ("quality", "diagnostic")

#: The default cutoffs of ``vdr metrics``, :func:`vdr.metrics` and :func:`~vdr.metrics.evaluate_run`
#: (:func:`default_metrics`) when no metric is named.
METRICS_CUTOFFS: tuple[int, ...] = (1, 3, 5, 10)
#: The default cutoffs of ``vdr evaluate`` / :func:`vdr.evaluate` and ``vdr compare`` /
#: :func:`vdr.compare` (and the MTEB engine ``evaluate`` builds).
EVALUATE_CUTOFFS: tuple[int, ...] = (3, 5, 10)
#: The cutoff of the summary table's headline metrics (``ndcg@3``, ``mrr@3``, ``hole@3``) when the
#: cutoffs include it (else the smallest cutoff).
PRIMARY_CUTOFF = 3


@dataclass(frozen=True)
class Family:
    """One metric family of the registry.

    Attributes:
        name: canonical name (``"ndcg"``); output always uses it (``ndcg@3``).
        needs_k: a cutoff is required (``ndcg@k``); otherwise ``@k`` is optional (``mrr``, ``mrr@3``).
        definition: the formula in words.
        trec_eval: the trec_eval measure computing the same value, or ``None``.
        ir_measures: the ir_measures name of the same measure, or ``None``.
        reference: where the definition comes from.
        aliases: other tools' spellings of the family, lowercase, without the cutoff (``"p"``,
            ``"success"``, ``"hit_rate"``); see the module docstring for the cutoff syntax.
        compute: the family's kernel (:mod:`vdr.metrics.kernels`): ``compute(ctx, k) -> float64
            array (n_queries,)`` on a :class:`~vdr.metrics.compute.Ranked`.
        kind: ``"mean"`` (a per-query value in [0, 1], averaged), ``"count"`` (a per-query count;
            the aggregate is its mean and :attr:`MetricsResult.policy` holds the total) or
            ``"run_mean"`` (a per-query value, NaN for the queries absent from the run, averaged
            over the queries present in the run only; a paper-compatible measure).
        label: how tables head the family when it is not vdr's standard measure
            (``"rr_full (paper-compatible: ConvSearch-R1 code)"``); ``None``: its name.
        role: ``"quality"`` (a measure of the ranking, compared between systems and variants by
            ``vdr evaluate`` and ``vdr compare``) or ``"diagnostic"`` (a property of the judgments or
            the scores -- ``judged``, ``hole``, ``ties`` -- shown, never tested); see :data:`ROLES`.

    Raises:
        ValueError: an unknown ``kind`` or ``role`` (a registry bug, caught at import).
    """

    name: str
    needs_k: bool
    definition: str
    trec_eval: str | None
    ir_measures: str | None
    reference: str
    aliases: tuple[str, ...]
    compute: Callable[["Ranked", int | None], np.ndarray]
    kind: str = "mean"
    label: str | None = None
    role: str = "quality"

    def __post_init__(self) -> None:
        if self.kind not in ("mean", "count", "run_mean"):
            raise ValueError(f"metric family {self.name!r}: unknown kind {self.kind!r}")
        if self.role not in ROLES:
            raise ValueError(f"metric family {self.name!r}: unknown role {self.role!r}; choose from {', '.join(ROLES)}")

    @property
    def diagnostic(self) -> bool:
        """Whether the family is a diagnostic (shown, never compared): ``judged``, ``hole``, ``ties``."""
        return self.role == "diagnostic"

    @property
    def pattern(self) -> str:
        """``"ndcg@k"`` or ``"mrr[@k]"``: how the family is written."""
        return f"{self.name}@k" if self.needs_k else f"{self.name}[@k]"


# ------------------------------------------------------------------------------------------------
# the table

METRICS: dict[str, Family] = {
    f.name: f
    for f in (
        Family(
            "ndcg", True,
            "DCG@k / IDCG@k; DCG@k = sum_{rank r <= k} g_r / log2(r + 1), g = grade if grade > 0 else 0;"
            " IDCG@k from ALL the query's qrels grades > 0, sorted descending, cut at k; 0 when IDCG is 0",
            "ndcg_cut_k", "nDCG@k", "Jarvelin & Kekalainen 2002 (linear gain, as trec_eval ndcg_cut)",
            ("ndcg_cut",), K.ndcg,
        ),
        Family(
            "ndcg_exp", True, "as ndcg@k with exponential gain g = 2^grade - 1 (grade > 0)",
            None, "nDCG(gain=...)@k", "Burges et al. 2005 (RankNet); opt-in, not trec_eval's default",
            ("ndcg_burges",), K.ndcg_exp,
        ),
        Family(
            "ndcg_run", True,
            "as ndcg@k but IDCG@k formed from the retrieved top-k gains only, sorted descending;"
            " inflates scores when relevant pages are missed",
            None, None, "NDCG@3 recipe used for query-rewriting evaluation after Cha et al. 2025 (arXiv 2507.23242); opt-in",
            (), K.ndcg_run,
        ),
        Family(
            "mrr", False, "1 / rank of the first relevant page within the top k (whole list without @k), else 0",
            "recip_rank (-M k for @k)", "RR@k", "Voorhees 1999 (TREC-8 QA); trec_eval recip_rank",
            ("rr", "recip_rank"), K.mrr,
        ),
        Family(
            "rr_full", False,
            "1 / rank of the first relevant page in the whole ranking (no cutoff; top k with @k), averaged over the"
            " queries that have a ranking in the run ONLY (a query missing from the run is left out, not scored 0):"
            " what ConvSearch-R1's released evaluation code reports as 'MRR'. Not MRR@3; shown beside it, labelled",
            None, None,
            "paper-compatible: BeastyZ/ConvSearch-R1 evaluation code (src/eval/get_metrics_using_*.py, print_trec_res:"
            " pytrec_eval recip_rank averaged over the queries in the run); Zhu et al. 2025, arXiv 2505.15776",
            (), K.rr_full, kind="run_mean", label="rr_full (paper-compatible: ConvSearch-R1 code)",
        ),
        Family(
            "recall", True, "relevant pages in the top k / all relevant pages of the query (0 if none)",
            "recall_k", "R@k", "trec_eval recall_k", ("r",), K.recall,
        ),
        Family(
            "precision", True, "relevant pages in the top k / k (fewer than k retrieved still divides by k)",
            "P_k", "P@k", "trec_eval P_k", ("p",), K.precision,
        ),
        Family(
            "hit", True, "1 if any relevant page is in the top k, else 0",
            "success_k", "Success@k", "trec_eval success_k", ("success", "hit_rate"), K.hit,
        ),
        Family(
            "map", False,
            "sum over relevant pages at rank r <= k of (relevant in top r) / r, divided by all relevant pages of the query",
            "map_cut_k (map without @k)", "AP@k", "TREC average precision (Harman 1993); trec_eval map / map_cut_k",
            ("ap", "map_cut"), K.average_precision,
        ),
        Family(
            "judged", True, "pages in the top k that have any qrels line for the query (any grade) / k",
            None, "Judged@k", "ir_measures Judged@k (MacAvaney, Macdonald & Ounis 2022, ECIR)", (), K.judged, role="diagnostic",
        ),
        Family(
            "hole", True, "1 - judged@k: share of the top k without a qrels line",
            None, None, "MTEB hole@k (per-query qrels)", (), K.hole, role="diagnostic",
        ),
        Family(
            "ties", True,
            "number of tied score groups in the top k: groups of >= 2 pages of the top k (trec_eval order)"
            " with exactly equal scores; their order comes from the corpus-id tie-break, not the system",
            None, None, "Lin & Yang 2019, 'The Impact of Score Ties on Repeatability in Document Ranking' (SIGIR)",
            (), K.ties, role="diagnostic", kind="count",
        ),
    )
}

DEFAULT_FAMILIES = ("ndcg", "mrr", "recall", "precision", "hit", "map", "judged")
"""The metrics computed at each cutoff when none are named (:func:`default_metrics`)."""
SUMMARY_FAMILIES = (*DEFAULT_FAMILIES, "hole", "ties")
"""The metrics ``vdr evaluate`` and ``vdr compare`` compute at each cutoff (a summary table and its diagnostics)."""


def _build_aliases(families: Iterable[Family]) -> dict[str, str]:
    out: dict[str, str] = {}
    for f in families:
        for a in (f.name, *f.aliases):
            if out.setdefault(a, f.name) != f.name:  # pragma: no cover - a registry bug, caught at import
                raise RuntimeError(f"metric alias {a!r} is declared for both {out[a]!r} and {f.name!r}")
    return out


_ALIASES = _build_aliases(METRICS.values())

# base (lazy, so "ndcg_at_10" splits at "_at_" and "ndcg_cut_10" at the last "_"), then the cutoff
_NAME_RE = re.compile(r"^([a-z][a-z0-9_\-]*?)(?:(?:@|_at_|_|\.)(\d+))?$")


def alias_table() -> dict[str, str]:
    """``{accepted base spelling: canonical family}``, e.g. ``{"p": "precision", "rr": "mrr", ...}``.

    >>> alias_table()["hit_rate"], alias_table()["success"], alias_table()["ndcg_cut"]
    ('hit', 'hit', 'ndcg')
    """
    return dict(_ALIASES)


def metric_label(name: str) -> str:
    """The column heading of metric ``name`` (canonical): its family's label when it has one
    (paper-compatible measures), else ``name`` itself.

    >>> metric_label("rr_full"), metric_label("ndcg@3")
    ('rr_full (paper-compatible: ConvSearch-R1 code)', 'ndcg@3')
    """
    fam, _, k = name.partition("@")
    f = METRICS.get(fam)
    if f is None or f.label is None:
        return name
    return f.label if not k else f.label.replace(f.name, name, 1)


def known_metrics() -> str:
    """The known families as one line, e.g. ``"ndcg@k, ..., mrr[@k], ..."`` (for help and errors)."""
    return ", ".join(f.pattern for f in METRICS.values())


@dataclass(frozen=True, order=True)
class Metric:
    """A parsed metric name: ``family`` (a key of :data:`METRICS`) and cutoff ``k`` (``None`` = whole list).

    >>> str(Metric("ndcg", 3)), str(Metric("mrr"))
    ('ndcg@3', 'mrr')
    """

    family: str
    k: int | None = None

    def __str__(self) -> str:
        return self.family if self.k is None else f"{self.family}@{self.k}"

    @property
    def spec(self) -> Family:
        """The family's registry row (:data:`METRICS`).

        Raises:
            KeyError: ``family`` is not a registry family (a :class:`Metric` built by hand).
        """
        return METRICS[self.family]

    @property
    def role(self) -> str:
        """The family's role: ``"quality"`` or ``"diagnostic"`` (:data:`ROLES`).

        >>> Metric("hole", 3).role, parse_metric("nDCG@3").role
        ('diagnostic', 'quality')
        """
        return self.spec.role


def _did_you_mean(base: str, k: str | None) -> str:
    close = difflib.get_close_matches(base, list(_ALIASES), n=6, cutoff=0.6)
    fams = list(dict.fromkeys(_ALIASES[c] for c in close))[:3]
    if not fams:
        return ""
    names = [f"{f}@{k}" if k else (f"{f}@10" if METRICS[f].needs_k else f) for f in fams]
    return f" (did you mean {' or '.join(repr(n) for n in names)}?)"


def parse_metric(name: str | Metric) -> Metric:
    """Parse a metric name in vdr's, ir_measures', MTEB's, ranx's or trec_eval's spelling.

    Returns:
        the canonical :class:`Metric` (``"P@5"`` -> ``Metric("precision", 5)``).

    Raises:
        InputError: an unknown family (with "did you mean ..." when a known name is close, and the
            list of known metrics), a missing cutoff where one is required, a cutoff < 1.

    >>> parse_metric("precision_at_5") == parse_metric("P@5") == Metric("precision", 5)
    True
    >>> parse_metric("ndgc@10")
    Traceback (most recent call last):
    ...
    vdr.errors.InputError: unknown metric 'ndgc@10' (did you mean 'ndcg@10'?); known metrics: ndcg@k, ndcg_exp@k, ndcg_run@k, mrr[@k], rr_full[@k], recall@k, precision@k, hit@k, map[@k], judged@k, hole@k, ties@k
    """
    if isinstance(name, Metric):
        return name
    if not isinstance(name, str):
        raise InputError(f"a metric name must be a string like 'ndcg@10', got {type(name).__name__} {name!r}")
    m = _NAME_RE.match(name.strip().lower())
    if not m or m.group(1) not in _ALIASES:
        hint = _did_you_mean(m.group(1), m.group(2)) if m else ""
        raise InputError(f"unknown metric {name!r}{hint}; known metrics: {known_metrics()}")
    fam, k = _ALIASES[m.group(1)], m.group(2)
    if k is None and METRICS[fam].needs_k:
        raise InputError(f"metric {name!r} needs a cutoff, e.g. {fam}@10")
    if k is not None and int(k) < 1:
        raise InputError(f"metric {name!r}: the cutoff must be >= 1")
    return Metric(fam, None if k is None else int(k))


def parse_cutoffs(k: str | int | Iterable[int], *, single: bool = False) -> list[int]:
    """Parse metric cutoffs: ``"1,3,5,10"``, ``3`` or ``[10, 3]`` -> sorted distinct ``[1, 3, 5, 10]``.

    The one parser of ``k`` (a metric cutoff only; the retrieval depth is ``depth``). Used by
    ``vdr metrics``, ``vdr evaluate`` and ``vdr judge`` alike.

    Args:
        k: a comma-separated string, an integer, or an iterable of integers.
        single: exactly one cutoff is expected (``vdr judge``).

    Returns:
        sorted distinct ``int`` cutoffs, each >= 1.

    Raises:
        InputError: a non-integer (``"a,b"``, ``2.5``, ``True``), a cutoff < 1, no cutoff, or more
            than one with ``single``.

    >>> parse_cutoffs(10), parse_cutoffs([5, 1]), parse_cutoffs("3", single=True)
    ([10], [1, 5], [3])
    """
    if isinstance(k, str):
        try:
            ks = [int(x) for x in k.replace(" ", "").split(",") if x]
        except ValueError:
            raise InputError(f"cutoffs (--k) must be comma-separated integers like 1,3,5,10, got {k!r}") from None
    else:
        items = [k] if isinstance(k, (int, np.integer)) else list(k)
        bad = [x for x in items if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer))]
        if bad:
            raise InputError(f"cutoffs (--k) must be integers, got {bad[0]!r}")
        ks = [int(x) for x in items]
    if not ks or any(x < 1 for x in ks):
        raise InputError(f"cutoffs (--k) must be integers >= 1, got {k!r}")
    out = sorted(dict.fromkeys(ks))
    if single and len(out) != 1:
        raise InputError(f"one cutoff k expected, got {k!r}")
    return out


def default_metrics(ks: str | int | Iterable[int] = METRICS_CUTOFFS) -> list[Metric]:
    """The standard set: ndcg, mrr, recall, precision, hit, map and judged at each cutoff in ``ks``.

    >>> [str(m) for m in default_metrics([3])]
    ['ndcg@3', 'mrr@3', 'recall@3', 'precision@3', 'hit@3', 'map@3', 'judged@3']
    """
    return [Metric(f, k) for f in DEFAULT_FAMILIES for k in parse_cutoffs(ks)]


def diagnostic_metrics(ks: str | int | Iterable[int] = METRICS_CUTOFFS) -> list[Metric]:
    """The diagnostics ``vdr metrics`` adds to the default set: ``ties@k`` at each cutoff.

    >>> [str(m) for m in diagnostic_metrics("3,1")]
    ['ties@1', 'ties@3']
    """
    return [Metric("ties", k) for k in parse_cutoffs(ks)]


def describe_metrics() -> str:
    """The registry as text (``vdr metrics --list-metrics``): per family its pattern, the other
    spellings accepted, the definition, the trec_eval and ir_measures equivalents and the reference.

    >>> print(describe_metrics().splitlines()[0])
    ndcg@k  (also: ndcg_at_k, ndcg_cut@k)
    """
    blocks = []
    for f in METRICS.values():
        also = [f"{f.name}_at_k"] + [s for a in f.aliases for s in ((f"{a}@k",) if f.needs_k else (a, f"{a}@k"))]
        blocks.append(
            f"{f.pattern}  (also: {', '.join(also)})\n"
            f"    {f.definition}\n"
            f"    trec_eval: {f.trec_eval or '-'}; ir_measures: {f.ir_measures or '-'}; reference: {f.reference}"
            + ("; a count per query (aggregate: mean; total in the policy)" if f.kind == "count" else "")
            + ("; averaged over the queries present in the run only (paper-compatible)" if f.kind == "run_mean" else "")
        )
    return "\n".join(blocks) + (
        "\nNames are case-insensitive (nDCG@10 = ndcg@10); NAME_k and NAME.k (trec_eval, pytrec_eval) and NAME_at_k"
        " (MTEB) are accepted for every name; the output always uses the first name of the row."
    )
