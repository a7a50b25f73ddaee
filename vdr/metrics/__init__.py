"""Metrics: a run and qrels -> per-query values and their means (trec_eval semantics).

:func:`metrics` (the ``vdr metrics`` verb) and :func:`evaluate_run` are the entry points; the
metric families, their aliases in other tools (ir_measures, MTEB, ranx, trec_eval) and their
definitions are declared once in :data:`METRICS` (:mod:`vdr.metrics.registry`; the kernels are in
:mod:`vdr.metrics.kernels`); cutoffs are parsed by :func:`parse_cutoffs` (defaults
:data:`METRICS_CUTOFFS`, :data:`EVALUATE_CUTOFFS`); what one evaluation computes, tabulates and
compares is a :class:`MetricPlan` (:mod:`vdr.metrics.plan`), parsed once;
:func:`check_judged_overlap` is the id-format rule; :mod:`vdr.metrics.trec_eval` prints trec_eval's own
output lines (``vdr metrics --format trec_eval``).

>>> from vdr.metrics import metrics
>>> res = metrics({"q1": {"p01": 1}}, {"q1": {"p01": 2.0, "p02": 1.0}}, metric_names=["RR", "P@2", "ndcg_at_2"])
>>> res.aggregate
{'mrr': 1.0, 'precision@2': 0.5, 'ndcg@2': 1.0}
"""

from .compute import MetricsOptions, MetricsResult, Ranked, check_judged_overlap, evaluate_run, metrics
from .plan import COMPARE_DEFAULTS, EVALUATE_DEFAULTS, METRICS_DEFAULTS, PROTOCOLS, Defaults, MetricPlan, Protocol
from .registry import (
    EVALUATE_CUTOFFS,
    METRICS,
    METRICS_CUTOFFS,
    PRIMARY_CUTOFF,
    ROLES,
    Family,
    Metric,
    alias_table,
    default_metrics,
    describe_metrics,
    diagnostic_metrics,
    known_metrics,
    parse_cutoffs,
    parse_metric,
    parse_metrics,
)

__all__ = [
    "METRICS",
    "METRICS_CUTOFFS",
    "EVALUATE_CUTOFFS",
    "PRIMARY_CUTOFF",
    "ROLES",
    "Family",
    "Metric",
    "MetricPlan",
    "Protocol",
    "PROTOCOLS",
    "Defaults",
    "METRICS_DEFAULTS",
    "EVALUATE_DEFAULTS",
    "COMPARE_DEFAULTS",
    "MetricsOptions",
    "MetricsResult",
    "Ranked",
    "alias_table",
    "check_judged_overlap",
    "default_metrics",
    "describe_metrics",
    "diagnostic_metrics",
    "evaluate_run",
    "known_metrics",
    "metrics",
    "parse_cutoffs",
    "parse_metric",
    "parse_metrics",
]
