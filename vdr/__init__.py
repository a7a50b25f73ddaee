"""vdr — visual-document retrieval evaluation: original vs rewritten queries, trec_eval-exact metrics.

Public API (verbs and types only; nothing runs at import time)::

    import vdr
    qrels = vdr.load_qrels("qrels.tsv")
    run = vdr.load_run("run.trec")
    result = vdr.metrics(qrels, run, k=[1, 3, 5, 10])
    result.aggregate["ndcg@3"]
"""

from .corpus import Corpus, Page, PassageCorpus, load_corpus
from .errors import AlignmentError, InputError, ModelLoadError, StoreError, VdrError, VdrWarning
from .metrics import Metric, MetricsResult, evaluate_run, metrics, parse_metric
from .ingest import IngestReport, VidoreReport, ingest, ingest_passages, ingest_vidore
from .io import load_qrels, load_queries, load_rewrites, load_run, save_qrels, save_queries, save_run
from .encode.store import EmbeddingStore
from .types import Qrels, Query, QuerySet, Run
from . import compare, judge, report  # two light packages and the statistics module, see below

# Importing a submodule binds it as an attribute of its parent: ``vdr.report`` would be the
# package. The verbs ``vdr.report``, ``vdr.judge`` and ``vdr.compare`` share those names, so the
# modules (light: no model library) are imported here, once, and their attributes dropped: the names
# then resolve through __getattr__ below to the functions, also after ``import vdr.report.render``
# or ``from vdr.compare import compare_variants`` (which keep reading the modules).
del compare, judge, report

__version__ = "0.1.0"

_LAZY = {"embed": "embed", "EmbedReport": "EmbedReport", "LateInteractionEncoder": "LateInteractionEncoder"}


def __getattr__(name: str):
    """``vdr.evaluate`` (the main job; its options: ``vdr.EvaluateOptions``), ``vdr.compare`` (runs of several systems against a baseline run,
    :func:`vdr.compare_runs.compare_runs`; the statistics stay in the module ``vdr.compare``), ``vdr.judge`` (RCP-nDCG, :func:`vdr.judge.run.judge`),
    ``vdr.embed``, ``vdr.EmbedReport``, ``vdr.LateInteractionEncoder``: imported on first use, so
    that ``import vdr`` does not import torch; ``vdr.report`` (:func:`vdr.report.render.report`,
    writes a report) and ``vdr.Results`` (:class:`vdr.results.Results`; ``vdr.Results.load(dir)``
    reads one) likewise, so that ``import vdr`` does not import matplotlib."""
    if name == "report":
        from .report.render import report

        return report
    if name == "Results":
        from .results import Results

        return Results
    if name == "compare":
        from .compare_runs import compare_runs

        return compare_runs
    if name == "evaluate":
        from .experiment import evaluate

        return evaluate
    if name == "EvaluateOptions":
        from .experiment import EvaluateOptions

        return EvaluateOptions
    if name == "judge":
        from .judge.run import judge

        return judge
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
    "EvaluateOptions",
    "compare",
    "judge",
    "EmbedReport",
    "EmbeddingStore",
    "LateInteractionEncoder",
    "Corpus",
    "Page",
    "PassageCorpus",
    "load_corpus",
    "ingest_passages",
    "evaluate_run",
    "report",
    "Results",
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
