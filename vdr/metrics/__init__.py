"""Metrics: a run and qrels -> per-query values and their means (trec_eval semantics).

:func:`metrics` (the ``vdr metrics`` verb) and :func:`evaluate_run` are the entry points; the
metric families are declared in :data:`METRICS`.
"""

from .compute import METRICS, Metric, MetricsResult, default_metrics, evaluate_run, metrics, parse_metric

__all__ = ["METRICS", "Metric", "MetricsResult", "default_metrics", "evaluate_run", "metrics", "parse_metric"]
