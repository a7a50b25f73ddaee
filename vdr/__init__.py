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
import importlib as _importlib
import importlib.abc as _importlib_abc
import importlib.util as _importlib_util
import sys as _sys
import warnings as _warnings

#: Module paths of 0.1 that moved in 0.2 -> where they live now. ``import vdr.scoring`` and the like
#: keep working for one release (a DeprecationWarning names the new path); ``vdr.compare`` is the
#: verb, and its old module path (the statistics, now :mod:`vdr.stats`) is read without a warning.
MOVED_MODULES = {
    "vdr.compare": "vdr.stats",
    "vdr.scoring": "vdr.retrieve.maxsim",
    "vdr.scoring_gpu": "vdr.retrieve.maxsim_gpu",
    "vdr.inputs": "vdr.experiment.inputs",
    "vdr.compare_runs": "vdr.experiment.compare_runs",
    "vdr.convert": "vdr.ingest.convert",
    "vdr.serve": "vdr.rewards.serve",
}


class _MovedModuleFinder(_importlib_abc.MetaPathFinder, _importlib_abc.Loader):
    """Answers only for the names of :data:`MOVED_MODULES`: the old name becomes a module holding
    the new module's public and private names (a read-only view: patch the new module instead)."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname in MOVED_MODULES:
            return _importlib_util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec):
        return None

    def exec_module(self, module) -> None:
        new = MOVED_MODULES[module.__name__]
        if module.__name__ != "vdr.compare":
            _warnings.warn(f"{module.__name__} moved to {new}; the old path goes in the next release",
                           DeprecationWarning, stacklevel=2)
        target = _importlib.import_module(new)
        module.__dict__.update({k: v for k, v in vars(target).items()
                                if k not in ("__name__", "__spec__", "__loader__", "__package__", "__path__")})


if not any(isinstance(f, _MovedModuleFinder) for f in _sys.meta_path):
    _sys.meta_path.append(_MovedModuleFinder())

from . import compare, judge, report  # two light packages and the statistics module's old path

# Importing a submodule binds it as an attribute of its parent: ``vdr.report`` would be the
# package. The verbs ``vdr.report``, ``vdr.judge`` and ``vdr.compare`` share those names, so the
# modules (light: no model library) are imported here, once, and their attributes dropped: the names
# then resolve through __getattr__ below to the functions, also after ``import vdr.report.render``
# or ``from vdr.compare import compare_variants`` (which keep reading the statistics, vdr.stats).
del compare, judge, report

__version__ = "0.1.0"

_LAZY = {"embed": "embed", "EmbedReport": "EmbedReport", "LateInteractionEncoder": "LateInteractionEncoder"}


def __getattr__(name: str):
    """``vdr.evaluate`` (the main job; its options: ``vdr.EvaluateOptions``), ``vdr.compare`` (runs of several systems against a baseline run,
    :func:`vdr.experiment.compare_runs.compare_runs`; the statistics are in :mod:`vdr.stats`), ``vdr.judge`` (RCP-nDCG, :func:`vdr.judge.run.judge`),
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
        from .experiment.compare_runs import compare_runs

        return compare_runs
    if name == "evaluate":
        from .experiment.evaluation import evaluate

        return evaluate
    if name == "EvaluateOptions":
        from .experiment.evaluation import EvaluateOptions

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
