"""The metric plan: what one evaluation computes, tabulates and compares, parsed once.

A :class:`MetricPlan` is built ONCE, by :meth:`MetricPlan.parse`, from what the user gave -- metric
names in any spelling of the registry (``nDCG@10``, ``ndcg_at_10``, ``P@5``, ``RR``), cutoffs ``k``
(``"10,3,5"``, ``3``, ``[3, 10]``), a primary metric and an evaluation protocol -- and then travels
as parsed, hashable :class:`~vdr.metrics.Metric` values through :func:`~vdr.metrics.evaluate_run`,
:func:`vdr.evaluate`, :func:`vdr.compare`, the rewards and the MTEB engine. Nothing downstream
parses a name or a cutoff again; the strings written to ``results.json`` (``config.metrics``,
``config.table_metrics``, ``ndcg@3`` keys) are the plan's metrics written with ``str``.

What a command computes when no metric is named is its :class:`Defaults` (:data:`METRICS_DEFAULTS`
for ``vdr metrics``, :data:`EVALUATE_DEFAULTS` for ``vdr evaluate``, :data:`COMPARE_DEFAULTS` for
``vdr compare``), built on the cutoffs declared once in the registry
(:data:`~vdr.metrics.registry.METRICS_CUTOFFS`, :data:`~vdr.metrics.registry.EVALUATE_CUTOFFS`).

>>> plan = MetricPlan.parse(k="10,3,5,3")
>>> plan.cutoffs, str(plan.primary), plan.table_names
((3, 5, 10), 'ndcg@3', ['ndcg@3', 'mrr@3', 'recall@5', 'recall@10', 'hole@3'])
>>> plan.compared_names
['ndcg@3', 'mrr@3', 'recall@5', 'recall@10']
>>> MetricPlan.parse(["nDCG@10", "RR"]) == MetricPlan.parse(["ndcg_at_10", "mrr"])
True
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..errors import InputError
from .registry import (
    DEFAULT_FAMILIES,
    EVALUATE_CUTOFFS,
    METRICS_CUTOFFS,
    PRIMARY_CUTOFF,
    SUMMARY_FAMILIES,
    Metric,
    parse_cutoffs,
    parse_metric,
    parse_metrics,
)

__all__ = [
    "MetricPlan",
    "Protocol",
    "PROTOCOLS",
    "Defaults",
    "METRICS_DEFAULTS",
    "EVALUATE_DEFAULTS",
    "COMPARE_DEFAULTS",
    "protocol_named",
]


# ------------------------------------------------------------------------------------------------ protocols


@dataclass(frozen=True)
class Protocol:
    """An evaluation protocol: the way a paper reports its numbers (``evaluate(protocol=...)``).

    Attributes:
        name: the protocol's name (``"convsearch"``).
        description: what it reports, with the source (recorded as ``config.protocol``).
        cutoffs: cutoffs added to the plan's.
        table: the summary table's metrics; the first is the primary one.
        extra: metrics computed and shown, labelled, but never compared (paper-compatible measures).
    """

    name: str
    description: str
    cutoffs: tuple[int, ...]
    table: tuple[Metric, ...]
    extra: tuple[Metric, ...] = ()

    def to_json(self) -> dict:
        """``{"name", "description"}``: how ``results.json`` records the protocol."""
        return {"name": self.name, "description": self.description}


#: Evaluation protocols (``evaluate(protocol=...)``, ``vdr evaluate --protocol``): cutoffs added,
#: the summary table's metrics (the first is the primary) and the extra, labelled metrics.
PROTOCOLS: dict[str, Protocol] = {
    p.name: p
    for p in (
        Protocol(
            "convsearch",
            "conversational search as ConvSearch-R1 (Zhu et al. 2025, arXiv 2505.15776) reports it: MRR@3, NDCG@3,"
            " R@10, R@100; beside them, labelled, rr_full: the full-list reciprocal rank averaged over the"
            " queries present in the run, which the released evaluation code (BeastyZ/ConvSearch-R1) calls MRR",
            (3, 10, 100),
            (Metric("mrr", 3), Metric("ndcg", 3), Metric("recall", 10), Metric("recall", 100), Metric("rr_full")),
            (Metric("rr_full"),),
        ),
    )
}


def protocol_named(name: str | Protocol | None) -> Protocol | None:
    """The protocol ``name`` (``None``: none, vdr's default table).

    Raises:
        InputError: an unknown protocol (the known ones are listed).

    >>> protocol_named("convsearch").cutoffs
    (3, 10, 100)
    """
    if name is None or isinstance(name, Protocol):
        return name
    if name not in PROTOCOLS:
        raise InputError(f"unknown protocol {name!r}; choose from {', '.join(PROTOCOLS)}")
    return PROTOCOLS[name]


# ------------------------------------------------------------------------------------------------ defaults


@dataclass(frozen=True)
class Defaults:
    """What a command computes when no metric is named.

    Attributes:
        cutoffs: the default cutoffs ``k`` (declared once in :mod:`vdr.metrics.registry`).
        families: the families computed at each cutoff.
        order: ``"cutoff"`` (``ndcg@3, mrr@3, ..., ndcg@5, ...``) or ``"family"`` (``ndcg@1,
            ndcg@3, ..., mrr@1, ...``): the order of the computed metrics (and of their columns).
        summary: the summary table is nDCG and MRR at the primary cutoff, recall at the other
            cutoffs, hole at the primary cutoff (``vdr evaluate``, ``vdr compare``); else the table
            is every computed metric (``vdr metrics``).
        recall_at_primary: with a single cutoff, the summary table shows recall at it
            (``vdr evaluate``); else it shows no recall (``vdr compare``).
    """

    cutoffs: tuple[int, ...]
    families: tuple[str, ...]
    order: str = "cutoff"
    summary: bool = True
    recall_at_primary: bool = True

    def metrics(self, ks: Sequence[int]) -> list[Metric]:
        """The default metrics at cutoffs ``ks`` (parsed), in :attr:`order`."""
        if self.order == "family":
            return [Metric(f, k) for f in self.families for k in ks]
        return [Metric(f, k) for k in ks for f in self.families]

    def table(self, ks: Sequence[int], computed: Sequence[Metric]) -> list[Metric]:
        """The default summary table at cutoffs ``ks`` (parsed); ``computed`` when not :attr:`summary`."""
        if not self.summary:
            return list(computed)
        k0 = PRIMARY_CUTOFF if PRIMARY_CUTOFF in ks else ks[0]
        rest = [k for k in ks if k != k0] or ([k0] if self.recall_at_primary else [])
        return [Metric("ndcg", k0), Metric("mrr", k0), *(Metric("recall", k) for k in rest), Metric("hole", k0)]


#: ``vdr metrics`` / :func:`vdr.metrics`: the default families and ``ties@k`` at 1, 3, 5, 10, family by family.
METRICS_DEFAULTS = Defaults(METRICS_CUTOFFS, (*DEFAULT_FAMILIES, "ties"), order="family", summary=False)
#: ``vdr evaluate`` / :func:`vdr.evaluate`: every family with hole and ties at 3, 5, 10; the summary table.
EVALUATE_DEFAULTS = Defaults(EVALUATE_CUTOFFS, SUMMARY_FAMILIES)
#: ``vdr compare`` / :func:`vdr.compare`: as ``vdr evaluate``; with one cutoff the table shows no recall.
COMPARE_DEFAULTS = Defaults(EVALUATE_CUTOFFS, SUMMARY_FAMILIES, recall_at_primary=False)


# ------------------------------------------------------------------------------------------------ the plan


@dataclass(frozen=True)
class MetricPlan:
    """What an evaluation computes, shows and compares: parsed, hashable :class:`Metric` values.

    Build one with :meth:`parse`; two plans are equal when they compute, show and compare the same
    metrics, whichever spellings they were parsed from.

    Attributes:
        cutoffs: the cutoffs ``k`` (sorted, distinct; a protocol's added) of the default families.
        metrics: every metric computed, in column order, distinct.
        table: the summary table's metrics; the first is the primary one.
        protocol: the evaluation protocol (:data:`PROTOCOLS`), or ``None``.
    """

    cutoffs: tuple[int, ...]
    metrics: tuple[Metric, ...]
    table: tuple[Metric, ...]
    protocol: Protocol | None = None

    @classmethod
    def parse(
        cls,
        metrics: Iterable[str | Metric] | None = None,
        *,
        k: str | int | Iterable[int] | None = None,
        primary: str | Metric | None = None,
        protocol: str | Protocol | None = None,
        defaults: Defaults = EVALUATE_DEFAULTS,
    ) -> "MetricPlan":
        """Parse what the user gave, once.

        Args:
            metrics: metric names in any accepted spelling (:func:`~vdr.metrics.parse_metric`;
                trec_eval's lists such as ``P.5,10`` name several, :func:`~vdr.metrics.parse_metrics`);
                they are computed and form the table, in the order given. ``None`` or empty:
                ``defaults``' families at the cutoffs.
            k: cutoffs (:func:`~vdr.metrics.parse_cutoffs`: ``"10,3,5"``, ``3``, ``[3, 10]``);
                default ``defaults.cutoffs``.
            primary: the primary metric (any spelling): first in the table (moved there when it
                is in it), computed even when the cutoffs lack its ``k``. Default: the table's first.
            protocol: a protocol name (:data:`PROTOCOLS`): its cutoffs are added, its table replaces
                the default one, its extra metrics are computed (shown, labelled, not compared).
            defaults: what the command computes without ``metrics`` (:data:`EVALUATE_DEFAULTS`,
                :data:`COMPARE_DEFAULTS`, :data:`METRICS_DEFAULTS`).

        Returns:
            the :class:`MetricPlan`.

        Raises:
            InputError: an unknown metric (with "did you mean"), a bad cutoff, an unknown protocol.

        >>> p = MetricPlan.parse(k=10, primary="RR@100")
        >>> str(p.primary), [str(m) for m in p.metrics][-2:], p.table_names
        ('mrr@100', ['ties@10', 'mrr@100'], ['mrr@100', 'ndcg@10', 'mrr@10', 'recall@10', 'hole@10'])
        """
        proto = protocol_named(protocol)
        ks = parse_cutoffs(defaults.cutoffs if k is None else k)
        if proto is not None:
            ks = sorted({*ks, *proto.cutoffs})
        given = parse_metrics(metrics or ())  # trec_eval's lists (P.5,10) expanded
        computed = given or defaults.metrics(ks)
        table = list(proto.table) if proto is not None else given or defaults.table(ks, computed)
        if proto is not None:  # its table and extra metrics are computed (the extra ones after the others)
            computed += [m for m in dict.fromkeys((*proto.table, *proto.extra)) if m not in computed]
        if primary is not None:
            p = parse_metric(primary)
            computed += [] if p in computed else [p]
            table = [p, *(m for m in table if m != p)]
        return cls(tuple(ks), tuple(computed), tuple(table), proto)

    def __post_init__(self) -> None:
        if not self.table:
            raise InputError("a metric plan needs at least one metric")

    # ------------------------------------------------------------------ parsed views

    @property
    def primary(self) -> Metric:
        """The primary metric: the table's first column, the change columns' and the report's headline."""
        return self.table[0]

    @property
    def compared(self) -> tuple[Metric, ...]:
        """The table's quality metrics, tested between variants or runs: the table without the
        diagnostics (``hole``, ``judged``, ``ties``) and the protocol's extra (labelled) metrics."""
        extra = self.protocol.extra if self.protocol is not None else ()
        return tuple(m for m in self.table if m.role == "quality" and m not in extra)

    @property
    def diagnostics(self) -> tuple[Metric, ...]:
        """The computed diagnostic metrics (role ``"diagnostic"``: ``judged``, ``hole``, ``ties``)."""
        return tuple(m for m in self.metrics if m.role == "diagnostic")

    # ------------------------------------------------------------------ as written in results.json

    @property
    def names(self) -> list[str]:
        """:attr:`metrics` as canonical names (``config.metrics``)."""
        return [str(m) for m in self.metrics]

    @property
    def table_names(self) -> list[str]:
        """:attr:`table` as canonical names (``config.table_metrics``)."""
        return [str(m) for m in self.table]

    @property
    def compared_names(self) -> list[str]:
        """:attr:`compared` as canonical names (``config.compared_metrics``)."""
        return [str(m) for m in self.compared]

    @property
    def primary_name(self) -> str:
        """:attr:`primary` as a canonical name (``config.primary_metric``)."""
        return str(self.primary)
