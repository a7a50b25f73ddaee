"""vdr — visual-document retrieval evaluation: original vs rewritten queries, trec_eval-exact metrics.

Public API (verbs and types only; nothing runs at import time)::

    import vdr
    qrels = vdr.load_qrels("qrels.tsv")
    run = vdr.load_run("run.trec")
    result = vdr.metrics(qrels, run, k=[1, 3, 5, 10])
    result.aggregate["ndcg@3"]
"""

from .corpus import Corpus, Page
from .errors import AlignmentError, InputError, ModelLoadError, StoreError, VdrError, VdrWarning
from .metrics import Metric, MetricsResult, evaluate_run, metrics, parse_metric
from .ingest import IngestReport, VidoreReport, ingest, ingest_vidore
from .io import load_qrels, load_queries, load_rewrites, load_run, save_qrels, save_queries, save_run
from .encode.store import EmbeddingStore
from .types import Qrels, Query, QuerySet, Run

__version__ = "0.1.0"

_LAZY = {"embed": "embed", "EmbedReport": "EmbedReport", "LateInteractionEncoder": "LateInteractionEncoder"}


def __getattr__(name: str):
    """``vdr.evaluate`` (the main job), ``vdr.judge`` (RCP-nDCG), ``vdr.embed``, ``vdr.EmbedReport``,
    ``vdr.LateInteractionEncoder``: imported on first use, so
    that ``import vdr`` does not import torch; ``vdr.report`` (the callable :mod:`vdr.report`
    package: ``vdr.report(results_dir)`` writes a report, ``vdr.report.load_results`` loads one)
    likewise, so that ``import vdr`` does not import matplotlib."""
    if name == "report":
        import importlib

        return importlib.import_module(".report", __name__)
    if name == "evaluate":
        from .experiment import evaluate

        return evaluate
    if name == "judge":  # the callable vdr.judge package: vdr.judge(results_dir, ...) runs the judge
        import importlib

        return importlib.import_module(".judge", __name__)
    if name in _LAZY:
        from . import encode

        return getattr(encode, _LAZY[name])
    raise AttributeError(f"module 'vdr' has no attribute {name!r}")


__all__ = [
    "Qrels",
    "Run",
    "Query",
    "QuerySet",
    "Metric",
    "MetricsResult",
    "metrics",
    "ingest",
    "ingest_vidore",
    "IngestReport",
    "VidoreReport",
    "embed",
    "evaluate",
    "judge",
    "EmbedReport",
    "EmbeddingStore",
    "LateInteractionEncoder",
    "Corpus",
    "Page",
    "evaluate_run",
    "report",
    "parse_metric",
    "load_qrels",
    "load_run",
    "load_queries",
    "load_rewrites",
    "save_qrels",
    "save_run",
    "save_queries",
    "VdrError",
    "InputError",
    "AlignmentError",
    "ModelLoadError",
    "StoreError",
    "VdrWarning",
]
