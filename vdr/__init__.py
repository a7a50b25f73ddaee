"""vdr — visual-document retrieval evaluation: original vs rewritten queries, trec_eval-exact metrics.

Public API (verbs and types only; nothing runs at import time)::

    import vdr
    qrels = vdr.load_qrels("qrels.tsv")
    run = vdr.load_run("run.trec")
    result = vdr.metrics(qrels, run, k=[1, 3, 5, 10])
    result.aggregate["ndcg@3"]

Every command of the CLI is a thin layer over one function here: ``vdr metrics`` ->
:func:`vdr.metrics`, ``ingest`` -> :func:`vdr.ingest` (:func:`vdr.ingest_vidore`,
:func:`vdr.ingest_passages`), ``evaluate`` -> :func:`vdr.evaluate`, ``compare`` ->
:func:`vdr.compare`, ``report`` -> :func:`vdr.report`, ``embed`` -> :func:`vdr.embed`, ``judge`` ->
:func:`vdr.judge`, ``rewrite`` -> :func:`vdr.rewrite`, ``serve`` -> :func:`vdr.serve`, ``convert
NAME`` -> :func:`vdr.convert`, ``mteb-task`` -> :func:`vdr.mteb_task`. Results come back as
:class:`vdr.Results`, whose tables (:class:`vdr.Table`) print as the CLI prints them.
"""

from .corpus import Corpus, Page, PassageCorpus, load_corpus
from .errors import AlignmentError, ArgumentTypeError, InputError, ModelLoadError, StoreError, VdrError, VdrWarning
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

from . import compare, judge, report, rewrite  # light packages and the statistics module's old path

# Importing a submodule binds it as an attribute of its parent: ``vdr.report`` would be the
# package. The verbs ``vdr.report``, ``vdr.judge``, ``vdr.rewrite`` and ``vdr.compare`` share those
# names, so the modules (light: no model library) are imported here, once, and their attributes
# dropped: the names then resolve through __getattr__ below to the functions, also after ``import
# vdr.report.render`` or ``from vdr.compare import compare_variants`` (which keep reading the
# statistics, vdr.stats). ``vdr.serve`` and ``vdr.convert`` are verbs too; their old module paths
# (``import vdr.serve``, deprecated) would rebind the name to the module in that process.
del compare, judge, report, rewrite

__version__ = "0.1.0"

#: The names imported on first use (``name: (module, attribute)``), so that ``import vdr`` imports
#: neither torch nor matplotlib: one verb per command of the CLI (``vdr evaluate`` calls
#: ``vdr.evaluate``, ``vdr mteb-task`` calls ``vdr.mteb_task``, ...) and the types they return.
_LAZY = {
    "evaluate": ("vdr.experiment.evaluation", "evaluate"),
    "EvaluateOptions": ("vdr.experiment.evaluation", "EvaluateOptions"),
    "compare": ("vdr.experiment.compare_runs", "compare_runs"),
    "report": ("vdr.report.render", "report"),
    "Results": ("vdr.results", "Results"),
    "Table": ("vdr.results", "Table"),
    "judge": ("vdr.judge.run", "judge"),
    "rewrite": ("vdr.rewrite.runner", "rewrite"),
    "serve": ("vdr.rewards.serve", "serve"),
    "convert": ("vdr.ingest.convert", "convert"),
    "mteb_task": ("vdr.integrations.mteb", "write_task_module"),
    "embed": ("vdr.encode", "embed"),
    "EmbedReport": ("vdr.encode", "EmbedReport"),
    "LateInteractionEncoder": ("vdr.encode", "LateInteractionEncoder"),
}


def __getattr__(name: str):
    """The names of :data:`_LAZY`, imported on first use: ``vdr.evaluate`` (the main job; its
    options: ``vdr.EvaluateOptions``), ``vdr.compare`` (runs of several systems against a baseline
    run, :func:`vdr.experiment.compare_runs.compare_runs`; the statistics are in :mod:`vdr.stats`),
    ``vdr.report`` (:func:`vdr.report.render.report`, writes a report), ``vdr.Results``
    (``vdr.Results.load(dir)`` reads one) and ``vdr.Table`` (what its tables return),
    ``vdr.judge`` (RCP-nDCG, :func:`vdr.judge.run.judge`), ``vdr.rewrite``
    (:func:`vdr.rewrite.runner.rewrite`), ``vdr.serve`` (:func:`vdr.rewards.serve.serve`, the reward
    server), ``vdr.convert`` (:func:`vdr.ingest.convert.convert`: TopiOCQA, QReCC, MS MARCO, BEIR),
    ``vdr.mteb_task`` (:func:`vdr.integrations.mteb.write_task_module`), ``vdr.embed``,
    ``vdr.EmbedReport``, ``vdr.LateInteractionEncoder``: so that ``import vdr`` imports neither
    torch nor matplotlib."""
    if name in _LAZY:
        module, attr = _LAZY[name]
        return getattr(_importlib.import_module(module), attr)
    raise AttributeError(f"module 'vdr' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The module's names and the lazy ones (:data:`_LAZY`), so that ``dir(vdr)`` and tab completion show every verb."""
    return sorted(set(globals()) | set(_LAZY))


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
    "rewrite",
    "serve",
    "convert",
    "mteb_task",
    "Table",
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
    "ArgumentTypeError",
    "AlignmentError",
    "ModelLoadError",
    "StoreError",
    "VdrWarning",
]
