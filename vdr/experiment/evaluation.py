"""The main job: original vs rewritten queries on every backend, composed from the stages.

:func:`evaluate` reads as the data flow::

    load inputs (vdr.experiment.inputs)  ->  build backends (vdr.retrieve registry)  ->  index each backend
    ->  search every variant  ->  metrics (vdr.metrics)  ->  statistics (vdr.stats)  ->  results

It runs every backend for every query variant over one page corpus, evaluates each run with
trec_eval-exact metrics on the same query set (the qrels'), compares every rewrite variant with the
originals on the same backend (paired randomization test, paired t-test, bootstrap CI,
win/tie/loss, Holm over all variants x metrics of a backend), and writes::

    RESULTS_DIR/results.json     config, versions, backend reports, runs (aggregate + per query), comparisons
    RESULTS_DIR/per_query.csv    query id, text and length of each variant, every metric per run
    RESULTS_DIR/runs/<backend>.<variant>.trec   one TREC run per backend x variant
    RESULTS_DIR/timing.json      seconds per stage (load, build (model loading) and index (page
                                 encoding) per backend, search (query encoding included) per
                                 backend x variant, hybrid included, metrics, statistics, results,
                                 write) and the total (>= their sum)

With ``progress`` each stage prints one line on stderr when it ends (count and rate where it
counts pages or queries, see :mod:`vdr.progress`); long loops show a live bar on a terminal.

The folder is taken before any work (writable, locked against a second run, no other experiment's
results in it unless ``overwrite``); the results are staged and replace its content at the end, so
stale files of earlier runs go and an interrupted run leaves it unchanged (:mod:`vdr.io.outdir`).
All files are written atomically. ``results.json`` holds no timestamps or timings; two runs with
the same inputs write the same file except for the backend reports' cache facts
(``backend_reports.<backend>.cache`` and ``page_forward_passes``: a re-run loads indexes instead
of building them).

Under ``torchrun`` (see :mod:`vdr.distributed`) every rank runs the multimodal backend (vdr
engine): page embedding (pages sharded across ranks), query encoding (distinct query texts in
whole batches per rank, gathered on every rank) and MaxSim (pages partitioned, per-query top-k
merged on rank 0). Rank 0 alone then runs the other backends, the metrics and comparisons and
writes every output; the other ranks return ``None``. ``results.json`` is byte-identical to a
single process' on the CPU.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import math
import time
import warnings
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from ..io.digest import file_sha256
from ..options import Grouped, keyword_signature, with_keywords
from ..corpus import PAGES_FILE
from ..errors import InputError, VdrWarning
from ..progress import counted
from .inputs import ORIGINAL, InputSettings, Inputs, build_variants, check_inputs, check_name, duplicate_texts, load_inputs
from .samples import derived_names, fold_samples, oracle_variants, reported_variants
from ..io.atomic import write_text_atomic
from ..metrics import EVALUATE_CUTOFFS, MetricPlan, MetricsResult, evaluate_run
from ..metrics.plan import EVALUATE_DEFAULTS
from ..metrics.plan import PROTOCOLS as _PROTOCOLS
from ..results import RELATIVE_INPUTS, Results, RunResult, relative_inputs
from ..retrieve.base import Backend, BackendUnavailable, available_backends, create_backend
from ..types import QuerySet, Run

__all__ = ["evaluate", "BACKENDS", "ENGINES", "build_variants", "check_inputs"]

#: The default backends, in the order results list them (other backends follow in the order given).
BACKENDS = ("multimodal", "lexical", "semantic", "hybrid")
#: How the multimodal backend runs: vdr's own store + MaxSim, or through MTEB (``vdr[mteb]``).
ENGINES = ("vdr", "mteb")
#: The cache folder inside the corpus folder (``evaluate(cache_dir=None)``).
CACHE_DIR_NAME = ".vdr-cache"
_VERSIONED = ["vdr", "colpali-engine", "transformers", "torch", "datasets", "bm25s", "sentence-transformers", "numpy", "scipy"]


# --------------------------------------------------------------------------------------------- plan


@dataclass(frozen=True)
class _Plan:
    """The checked options: the metric plan (cutoffs, metrics, table, compared) and the backends wanted."""

    metrics: MetricPlan
    wanted: list[str]
    served: Mapping[str, Any] = field(default_factory=dict)  # --serve-as: {name: ServedSpec}
    reranked: Mapping[str, str] = field(default_factory=dict)  # --rerank: {name: base}

    @property
    def ks(self) -> list[int]:
        """The cutoffs (sorted, distinct)."""
        return list(self.metrics.cutoffs)

    @property
    def metric_names(self) -> list[str]:
        """Every metric computed, canonical names (``config.metrics``)."""
        return self.metrics.names

    @property
    def table_metrics(self) -> list[str]:
        """The summary table's metrics, the primary first (``config.table_metrics``)."""
        return self.metrics.table_names

    @property
    def compared_metrics(self) -> list[str]:
        """The metrics tested between variants (``config.compared_metrics``)."""
        return self.metrics.compared_names


def _versions(names: Sequence[str]) -> dict:
    out = {}
    for n in names:
        try:
            out[n] = version(n)
        except PackageNotFoundError:
            out[n] = None
    return out




def _parse_list(value: str | Sequence, what: str) -> list[str]:
    items = [x.strip() for x in value.split(",")] if isinstance(value, str) else [str(x).strip() for x in value]
    items = [x for x in items if x]
    if not items:
        raise InputError(f"{what}: nothing given")
    return items


#: Evaluation protocols (``evaluate(protocol=...)``, ``vdr evaluate --protocol``); declared in
#: :mod:`vdr.metrics.plan` (:data:`vdr.metrics.PROTOCOLS`).
PROTOCOLS = _PROTOCOLS


def _plan(k, backends, depth: int, engine: str, runs: Mapping, primary_metric: str | None = None,
          queries_without_relevant: str = "zero", protocol: str | None = None) -> _Plan:
    """Check the options that need no file.

    Raises:
        InputError: an unknown backend or engine, a depth below the largest cutoff, a bad run name,
            an unknown primary metric or protocol, a ``queries_without_relevant`` other than
            ``"zero"`` or ``"exclude"``.
    """
    if queries_without_relevant not in ("zero", "exclude"):
        raise InputError(f"queries_without_relevant must be 'zero' or 'exclude', got {queries_without_relevant!r}")
    metrics = MetricPlan.parse(k=k, primary=primary_metric, protocol=protocol, defaults=EVALUATE_DEFAULTS)
    ks = metrics.cutoffs
    wanted = _parse_list(backends, "--backend")
    known = available_backends()
    unknown = [b for b in wanted if b not in known]
    if unknown:
        raise InputError(f"unknown backend(s) {unknown}; choose from {', '.join(known)}")
    if depth < max(ks):
        raise InputError(f"depth {depth} is smaller than the largest cutoff {max(ks)}")
    if engine not in ENGINES:
        raise InputError(f"unknown engine {engine!r}; choose from {', '.join(ENGINES)}")
    for name in runs:
        check_name(name, "run")
        if name in known:
            raise InputError(f"run name {name!r} is a backend's name; choose another")
    return _Plan(metrics, wanted + [n for n in runs if n not in wanted])


def _with_served(plan: _Plan, serve_as, runs: Mapping, engine: str = "vdr") -> _Plan:
    """``plan`` with the ``--serve-as`` systems (:func:`vdr.retrieve.served.parse_serve_as`) added to
    the backends wanted, after the others (they serve the ``multimodal`` backend's page vectors).

    Raises:
        InputError: a bad spec; a served name that is a backend's or a run's; served systems
            without the multimodal backend.
    """
    from ..retrieve.served import parse_serve_as

    specs = parse_serve_as(list(serve_as or ()))
    if not specs:
        return plan
    if "multimodal" not in plan.wanted:
        raise InputError(f"--serve-as {specs[0].text}: served systems serve the multimodal backend's page vectors;"
                         " add multimodal to --backend")
    if engine != "vdr":
        raise InputError(f"--serve-as {specs[0].text}: served systems read vdr's page store and query vectors; --engine {engine}"
                         " runs the multimodal backend through MTEB: use --engine vdr")
    taken = set(plan.wanted) | set(runs) | set(available_backends())
    for s in specs:
        if s.name in taken:
            raise InputError(f"--serve-as {s.text}: the name {s.name!r} is taken by a backend or run; give another: NAME={s.text}")
    return dataclasses.replace(plan, wanted=plan.wanted + [s.name for s in specs], served={s.name: s for s in specs})


def _with_reranked(plan: _Plan, o: "EvaluateOptions") -> _Plan:
    """``plan`` with one reranked system ``<base>+rerank`` per base (``o.rerank_backends``, default
    every backend wanted but the served systems) added after the others, when ``o.rerank`` names a
    reranker (:mod:`vdr.retrieve.rerank`).

    Raises:
        InputError: a base that is not wanted; a reranked name taken by a backend or run; a bad depth.
    """
    from ..retrieve._common import check_depth
    from ..retrieve.rerank import rerank_name

    if not o.rerank:
        return plan
    check_depth(o.rerank_depth, "--rerank-depth")
    given = _parse_list(o.rerank_backends, "--rerank-backends") if o.rerank_backends else None
    bases = given or [b for b in plan.wanted if b not in plan.served]
    missing = [b for b in bases if b not in plan.wanted]
    if missing:
        raise InputError(f"--rerank-backends {','.join(bases)}: {', '.join(missing)} not among the backends ({', '.join(plan.wanted)})")
    taken = set(plan.wanted) | set(available_backends())
    names = {rerank_name(b): b for b in bases}
    clash = [n for n in names if n in taken]
    if clash:
        raise InputError(f"--rerank: the reranked system's name {clash[0]!r} is taken by a backend or run")
    return dataclasses.replace(plan, wanted=plan.wanted + list(names), reranked=names)


# --------------------------------------------------------------------------------------------- backends


@dataclass(frozen=True)
class _Spec:
    """One backend to build: its name in results, its registry factory and its options."""

    name: str
    factory: str
    options: dict


def _specs(plan: _Plan, inputs: Inputs, o: "EvaluateOptions", *, encoder, runs, out: Path) -> list[_Spec]:
    """The backends to build, in build order: every backend but ``hybrid`` (defaults first, in
    :data:`BACKENDS` order, then the others as given), then ``hybrid`` (it fuses what was built).
    Each spec's options are the mapping the registry checks (:func:`vdr.retrieve.base.create_backend`):
    the dedicated options of ``o`` (``bm25``, ``semantic_model``, ``rrf_k``, ``store``: aliases of
    backend options, :data:`vdr.retrieve.options.CLI_ALIASES`), then ``o.backend_options`` (which win)."""
    defaults: dict[str, dict] = {
        "multimodal": {"encoder": encoder if encoder is not None else {}, "store": o.store},
        "lexical": dict(o.bm25 or {}),
        "semantic": {"model": o.semantic_model} if o.semantic_model is not None else {},
        "hybrid": {"rrf_k": o.rrf_k},
    }
    backend_options = o.backend_options
    if o.engine == "mteb":
        defaults["multimodal"].update(qrels=inputs.qrels, out_dir=out / "mteb", ks=plan.ks, dataset=o.vidore)
    specs = []
    for name in plan.wanted:
        factory = ("run" if name in runs else "served" if name in plan.served else "rerank" if name in plan.reranked
                   else "mteb" if name == "multimodal" and o.engine == "mteb" else name)
        opts = ({"path": _variant_files(name, runs[name], inputs), "allow_id_mismatch": o.allow_id_mismatch} if name in runs
                else {"system": plan.served[name].text} if name in plan.served
                else {**dict(o.rerank_options or {}), "model": o.rerank, "base": plan.reranked[name], "depth": o.rerank_depth}
                if name in plan.reranked else dict(defaults.get(name, {})))
        opts.update(dict((backend_options or {}).get(name, {})))
        specs.append(_Spec(name, factory, opts))
    order = {b: i for i, b in enumerate(BACKENDS)}
    return sorted(specs, key=lambda s: (s.factory == "rerank", s.factory == "hybrid", s.factory == "served", order.get(s.name, len(order))))


def _variant_files(name: str, given, inputs: Inputs) -> dict[str, str | Path]:
    """``{variant: run file}`` of run backend ``name`` (issue 25.4): a single file is the run of the
    ``original`` queries; ``{"*": file}`` reuses one file for every variant; a variant collapsed into
    another by :func:`~vdr.experiment.inputs.same_text_variants` stands for the kept one.

    Raises:
        InputError: a variant that is not evaluated (the known ones named), or two files for one
            variant through a collapsed name.
    """
    files = {ORIGINAL: given} if isinstance(given, (str, Path)) else dict(given)
    out: dict[str, str | Path] = {}
    for variant, path in files.items():
        kept = inputs.same_texts.get(variant, variant)
        if kept != "*" and kept not in inputs.variants:
            raise InputError(f"--run {name}:{variant}: no variant {variant!r} is evaluated; the variants are"
                             f" {', '.join(inputs.variants)} (or * for one file reused for every variant)")
        if kept in out:
            raise InputError(f"--run {name}: two run files for variant {kept!r} ({out[kept]} and {path}; {variant!r} has the same texts)")
        out[kept] = path
    if "*" not in out and ORIGINAL not in out:
        raise InputError(f"--run {name}: no run of the original queries, the baseline its variants are compared with;"
                         f" add --run {name}=FILE (or {name}:*=FILE for one file reused for every variant)")
    return out


def _runs_variant(spec: "_Spec", variant: str) -> bool:
    """Whether backend ``spec`` has a run of ``variant`` (a run-file backend may hold only some)."""
    files = spec.options.get("path") if spec.factory == "run" else None
    return not isinstance(files, Mapping) or "*" in files or variant in files


class _Memo:
    """A backend whose :meth:`index` runs once and whose searches are kept, so that ``hybrid``
    fuses the runs already computed instead of searching again (a :class:`Backend` itself)."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.name = backend.name
        self._indexed: object = None
        self._runs: dict[tuple[int, int], tuple[QuerySet, Run]] = {}

    @property
    def config(self) -> dict:
        return self.backend.config

    @property
    def report(self) -> dict:
        return self.backend.report

    def index(self, corpus) -> None:
        if self._indexed is not corpus:
            self.backend.index(corpus)
            self._indexed = corpus

    def search(self, queries: QuerySet, depth: int) -> Run:
        key = (id(queries), depth)
        if key not in self._runs:
            self._runs[key] = (queries, self.backend.search(queries, depth))
        return self._runs[key][1]


def _collective(spec: _Spec) -> bool:
    """Whether every torchrun rank runs this backend (the multimodal backend with vdr's engine)."""
    return spec.factory == "multimodal"


def _run_backend(spec: _Spec, context: dict, inputs: Inputs, depth: int, timer: "_Timer") -> tuple[_Memo, dict[str, Run]]:
    """Build (through the registry, :func:`vdr.retrieve.base.create_backend`: the path of the rewards
    and ``vdr serve`` too), index and search one backend over every variant; ``context``: the other
    :class:`~vdr.retrieve.base.BuildContext` fields.

    Raises:
        BackendUnavailable: the backend cannot run (the caller records it as skipped).
    """
    with timer.stage("build", spec.name):  # model loading
        backend = _Memo(create_backend(spec.name, spec.options, factory=spec.factory, **context))
    unit = inputs.corpus.kind
    with timer.stage("index", spec.name, count=len(inputs.corpus), unit=unit) as st:  # page encoding
        backend.index(inputs.corpus)
        st.note = _cache_note(backend.report)
    runs = {}
    for variant, queries in inputs.variants.items():
        if variant in inputs.per_backend:  # a per-backend variant: this backend's own file, else the NAME=FILE one
            queries = _backend_queries(inputs.per_backend[variant], spec)
        if queries is None or not _runs_variant(spec, variant):
            continue
        with timer.stage("search", spec.name, variant, count=len(queries), unit="query"):  # query encoding included
            runs[variant] = backend.search(queries, depth)
    return backend, runs


def _feeding_backend(spec: "_Spec") -> str:
    """The backend whose per-backend rewrites feed ``spec``: a served system's exact backend, a reranked
    system's base, else itself."""
    if spec.factory == "served":
        return str(spec.options.get("exact") or "multimodal")
    return str(spec.options.get("base") or spec.name) if spec.factory == "rerank" else spec.name


def _backend_queries(by_backend: Mapping[str, QuerySet], spec: "_Spec") -> QuerySet | None:
    """The queries of a per-backend variant that ``spec`` searches: its own file's, else the ``*``
    (``NAME=FILE``) ones, else ``None`` (no run of the variant on this backend; recorded in
    ``config.per_backend_variants``)."""
    return by_backend.get(_feeding_backend(spec), by_backend.get("*"))


def _per_backend_config(inputs: Inputs, specs: list["_Spec"], runs: Mapping[str, Mapping[str, Run]]) -> dict:
    """``config.per_backend_variants``: per variant, its files (``{backend or "*": file}``) and which file
    fed which backend (``fed``; ``None``: the backend has no run of the variant)."""
    out = {}
    for variant, files in inputs.per_backend_files.items():
        fed = {}
        for spec in specs:
            if spec.name in runs:
                src = _feeding_backend(spec)
                fed[spec.name] = files.get(src, files.get("*")) if variant in runs[spec.name] else None
        out[variant] = {"files": dict(files), "fed": fed}
    return {"per_backend_variants": out} if out else {}


def _check_per_backend(inputs: Inputs, plan: "_Plan") -> None:
    """Refuse a per-backend variant naming a backend that does not run; warn, naming them, about the
    backends that will have no run of it (no file of their own and no ``NAME=FILE``).

    Raises:
        InputError: ``NAME@BACKEND`` with a backend that is not among those wanted.
    """
    for variant, files in inputs.per_backend_files.items():
        unknown = [b for b in files if b != "*" and b not in plan.wanted]
        if unknown:
            raise InputError(f"--rewrites {variant}@{unknown[0]}: no backend {unknown[0]!r} runs; the backends are"
                             f" {', '.join(plan.wanted)}")
        if "*" not in files:
            fed = set(files) | ({b for b in plan.served} if "multimodal" in files else set())
            fed |= {name for name, base in plan.reranked.items() if base in fed}
            left = [b for b in plan.wanted if b not in fed]
            if left:
                warnings.warn(f"per-backend variant {variant!r} has no file for {', '.join(left)} (and no {variant}=FILE for"
                              " the others): those backends have no run of it", VdrWarning, stacklevel=3)


def _cache_note(report: Mapping) -> str:
    """``" (loaded from the cache)"`` when a backend's report says its index came from the cache."""
    cache = report.get("cache") if isinstance(report, Mapping) else None
    return " (loaded from the cache)" if isinstance(cache, Mapping) and cache.get("hit") else ""


def _run_backends(specs: list[_Spec], inputs: Inputs, *, depth: int, cache_dir: Path | None, device, progress: bool,
                  timer: "_Timer") -> tuple[dict[str, _Memo], dict[str, dict[str, Run]], dict[str, str]]:
    """Every backend over every variant. Returns ``(backends, {backend: {variant: run}}, skipped)``;
    under torchrun the ranks other than 0 run only the collective backends."""
    from .. import distributed as D

    built: dict[str, _Memo] = {}
    runs: dict[str, dict[str, Run]] = {}
    skipped: dict[str, str] = {}
    for spec in specs:
        if not D.is_main() and not _collective(spec):
            continue
        context = {"cache_dir": cache_dir, "corpus_dir": inputs.corpus_dir, "device": device, "progress": progress, "built": dict(built)}
        try:
            built[spec.name], runs[spec.name] = _run_backend(spec, context, inputs, depth, timer)
        except BackendUnavailable as e:
            skipped[spec.name] = str(e)
    return built, runs, skipped


# --------------------------------------------------------------------------------------------- metrics, statistics


def _metrics(runs: dict[str, dict[str, Run]], order: list[str], inputs: Inputs, plan: _Plan,
             settings: MetricSettings, run_names: Collection[str] = (), allow_id_mismatch: bool = False) -> list[RunResult]:
    """Evaluate each run (named ``backend/variant`` in its warnings); add the labelled macro rows when
    ``settings.macro_average``. ``settings.queries_without_relevant``: ``"zero"`` or ``"exclude"``
    (see :func:`vdr.metrics.evaluate_run`). The query ids' join is recorded in each run's policy; it
    was warned about once, queries against qrels in :func:`~vdr.experiment.inputs.load_inputs` and
    run files against queries by the run backend (:mod:`vdr.retrieve.runfile`)."""
    from ..io.idjoin import IdJoinWarning

    results: list[RunResult] = []
    for b in order:
        for name, run in runs[b].items():
            # the id-format rule ran on the corpus in check_inputs: a backend that finds nothing judged is scored, not
            # refused; a run file of another system gets vdr metrics' and vdr compare's check (issue 25.4)
            run = run.renamed(f"{b}/{name}")
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", IdJoinWarning)
                    res = evaluate_run(inputs.qrels, run, plan.metrics, relevance_level=settings.relevance_level,
                                       allow_unjudged=b not in run_names, queries_without_relevant=settings.queries_without_relevant,
                                       allow_id_mismatch=allow_id_mismatch)
            except InputError as e:
                raise InputError(f"--run {b} (variant {name}): {e}") from None
            results.append(RunResult(b, name, f"runs/{b}.{name}.trec", res, ranking=run))
    # the macro row averages backends with every variant; a served system (--serve-as) is its exact backend again, a
    # reranked one (--rerank) its base's pages again: left out
    full = [b for b in order if set(runs[b]) == set(inputs.variants) and b not in plan.served and b not in plan.reranked]
    if settings.macro_average and len(full) > 1:
        order = full
        for name in inputs.variants:
            parts = [r.metrics for r in results if r.variant == name and r.backend in order]
            vals = {m: sum(p.values[m] for p in parts) / len(parts) for m in plan.metric_names}
            pol = dict(parts[0].policy, macro_average_of=order)
            results.append(RunResult("macro", name, None, MetricsResult(parts[0].query_ids, vals, pol)))
    return results


def _statistics(results: list[RunResult], plan: _Plan, settings: StatisticsSettings, exclude: Collection[str] = ()) -> list:
    """Each rewrite variant against the originals, per backend (and macro) and compared metric;
    Holm over all variants x metrics of a backend (:func:`vdr.stats.compare_variants`). The variants
    of ``exclude`` (the oracle best-of-N rows) are not tested and are in no family."""
    from ..stats import compare_variants

    by_backend: dict[str, dict[str, MetricsResult]] = {}
    for r in results:
        if r.variant not in exclude:
            by_backend.setdefault(r.backend, {})[r.variant] = r.metrics
    return compare_variants(by_backend, plan.compared_metrics, n_permutations=settings.n_permutations,
                            n_bootstrap=settings.n_bootstrap, seed=settings.seed)


# --------------------------------------------------------------------------------------------- config, timing


def _config(inputs: Inputs, plan: _Plan, backends: dict[str, _Memo], o: "EvaluateOptions", *, encoder, cache_dir) -> dict:
    """results.json's ``config``: the inputs, the settings of ``o`` that were used and each backend's
    config (the schema of results.json; every key kept across versions)."""
    return {
        "protocol": None if plan.metrics.protocol is None else plan.metrics.protocol.to_json(),
        "corpus_dir": str(inputs.corpus_dir.resolve()),
        "corpus_kind": inputs.corpus.kind,
        "queries": str(inputs.queries_path.resolve()),
        "qrels": str(inputs.qrels_path.resolve()),
        "rewrites": {n: str(Path(p).resolve()) for n, p in (o.rewrites or {}).items()},
        "variants": list(inputs.variants),
        "backends": plan.wanted,
        **({"serve_as": [s.text if s.name == _default_name(s) else f"{s.name}={s.text}" for s in plan.served.values()]}
           if plan.served else {}),
        **({"rerank": {"model": str(o.rerank), "depth": o.rerank_depth, "backends": list(plan.reranked.values()),
                       "options": dict(o.rerank_options or {})}} if plan.reranked else {}),
        "model": None if encoder is None else encoder.model,
        "encoder": None if encoder is None else encoder.to_json(),
        "engine": o.engine,
        "k": plan.ks,
        "depth": o.depth,
        "seed": o.seed,
        "relevance_level": o.relevance_level,
        "queries_without_relevant": o.queries_without_relevant,
        "n_permutations": o.n_permutations,
        "n_bootstrap": o.n_bootstrap,
        "metrics": plan.metric_names,
        "table_metrics": plan.table_metrics,
        "primary_metric": plan.table_metrics[0],
        "compared_metrics": plan.compared_metrics,
        "macro_average": o.macro_average,
        "vidore": o.vidore,
        "cache_dir": None if cache_dir is None else str(Path(cache_dir).resolve()),
        "backend_config": {b: m.config for b, m in backends.items()},
        **({"judged_passages": inputs.judged} if inputs.judged else {}),
        **({"concat": inputs.concat} if inputs.concat else {}),
        **({"same_texts": inputs.same_texts} if inputs.same_texts else {}),
        **({"id_mapping": inputs.id_mapping} if inputs.id_mapping else {}),
        **({"id_join": inputs.id_join} if inputs.id_join else {}),
        "alpha": o.alpha,
        **({"group_by": _group_by(o)} if _group_by(o) else {}),
        **({"groups": str(Path(o.groups).resolve())} if o.groups is not None else {}),
    }


def _versions_of(inputs: Inputs, configs: dict, vidore) -> dict:
    versions = _versions(_VERSIONED)
    fp = inputs.corpus.fingerprint if inputs.corpus.kind == "passage" else None
    versions["corpus_fingerprint"] = fp or "sha256:" + file_sha256(inputs.corpus_dir / PAGES_FILE)
    versions["qrels_sha256"] = file_sha256(inputs.qrels_path)
    if "multimodal" in configs:
        versions["model"] = {k: configs["multimodal"].get(k) for k in ("model", "revision", "fingerprint")}
    if inputs.vidore_info is not None:
        versions["dataset"] = {"name": vidore, "revision": getattr(inputs.vidore_info, "revision", None)}
    return versions


class _Stage:
    """What a running stage reports for its progress line: ``count`` items of ``unit``, a ``note``."""

    def __init__(self, count: int | None, unit: str | None) -> None:
        self.count, self.unit, self.note = count, unit, ""


class _Timer:
    """Wall-clock seconds per stage, nested by name: ``{"load": s, "build": {backend: s}, "index":
    {backend: s}, "search": {backend: {variant: s}}, "metrics": s, "statistics": s, "results": s,
    "write": s, "total": s}``. The stages do not overlap, so ``total`` >= their sum (the rest is
    option checking). With ``progress``, each finished stage prints one line on stderr
    (:func:`vdr.progress.stage_line`: seconds, and count and rate when the stage counts items)."""

    def __init__(self, progress: bool = False) -> None:
        self.t0 = time.perf_counter()
        self.seconds: dict[str, Any] = {}
        self.progress = progress

    @contextmanager
    def stage(self, *path: str, count: int | None = None, unit: str | None = None) -> Iterator[_Stage]:
        """Time the block as stage ``path`` (e.g. ``("search", "lexical", "kw")``); the block may set
        the yielded stage's ``count``, ``unit`` and ``note`` for the progress line."""
        st = _Stage(count, unit)
        t = time.perf_counter()
        ok = False
        try:
            yield st
            ok = True
        finally:
            dt = time.perf_counter() - t
            node = self.seconds
            for p in path[:-1]:
                node = node.setdefault(p, {})
            node[path[-1]] = node.get(path[-1], 0.0) + dt
            if ok and self.progress:
                from ..progress import stage_line

                stage_line(" ".join([path[0], "/".join(path[1:])]).strip(), dt, st.count, st.unit, st.note)

    def write(self, path: Path) -> None:
        """Add ``total`` and write ``timing.json`` atomically: stages rounded down and the total up
        to 0.1 ms, so that ``total`` >= the sum of the stages holds in the file too."""
        total = time.perf_counter() - self.t0

        def floor(node):
            return {k: floor(v) if isinstance(v, dict) else math.floor(v * 1e4) / 1e4 for k, v in node.items()}

        self.seconds = dict(floor(self.seconds), total=math.ceil(total * 1e4) / 1e4)
        write_text_atomic(path, json.dumps(self.seconds, indent=1) + "\n")
        if self.progress:
            from ..progress import stage_line

            stage_line("total", total)


def stage_lines(timing: Mapping[str, Any]) -> list[str]:
    """``timing.json`` as aligned lines ``stage  seconds  share of total``, nested stages as
    ``search/lexical/original`` (what ``vdr evaluate --profile`` prints)."""
    flat: list[tuple[str, float]] = []

    def walk(prefix: str, node) -> None:
        for k, v in node.items():
            if isinstance(v, Mapping):
                walk(f"{prefix}{k}/", v)
            else:
                flat.append((prefix + k, float(v)))

    walk("", timing)
    total = float(timing.get("total") or 0.0) or 1.0
    width = max((len(n) for n, _ in flat), default=5)
    return [f"{n:<{width}}  {v:9.3f} s  {100 * v / total:5.1f}%" for n, v in flat]


# --------------------------------------------------------------------------------------------- evaluate


@dataclass(frozen=True)
class RetrievalSettings:
    """Which backends run and how (group ``retrieval`` of :class:`EvaluateOptions`).

    Attributes:
        backends: backend names (comma-separated or a list): the built-in ``multimodal, lexical,
            semantic, hybrid`` or any registered one (entry-point group ``vdr.backends``, see
            :mod:`vdr.retrieve.base`). ``hybrid`` is reciprocal rank fusion (constant ``rrf_k``) of
            the other built-in backends that ran.
        backend_options: ``{backend: {option: value}}`` for any backend (the one general spelling,
            checked against the backend's options record; they override the dedicated settings
            below, which are aliases of backend options; a third-party backend gets its options
            only from here).
        depth: pages retrieved per query and written to each run.
        engine: ``"vdr"`` (default) runs the multimodal backend with vdr's store and streaming
            MaxSim; ``"mteb"`` runs it through ``mteb.evaluate``
            (:class:`vdr.integrations.mteb.MtebBackend`: one MTEB task per variant over the inputs
            loaded here and the same page store), stores MTEB's TaskResult JSON in ``out/mteb/``
            and evaluates MTEB's runs here like any other. The other backends are not affected.
        cache_dir: root of the backends' index cache (BM25 index, semantic page vectors); default
            ``corpus_dir/.vdr-cache``; ``False``: no cache (the multimodal backend always uses its
            page store).
        device: ``"cuda"``, ``"cpu"``, ... for the model backends (default: they decide).
        model: ColPali-family model (hub name or local path) for ``multimodal``; without one, or
            when it cannot be loaded, the backend is reported as skipped with the reason.
        encoder: every option of the multimodal encoder
            (:class:`~vdr.encode.settings.EncoderSettings`, the same object ``vdr embed`` uses, so
            the store written by ``embed`` with the same settings is found and reused); replaces
            ``model``, ``batch_size`` and ``trust_remote_code``.
        batch_size, trust_remote_code: for the multimodal encoder (without ``encoder``); a
            ``batch_size`` of ``None`` (default) is chosen from free memory on CUDA, 8 on the CPU
            (:attr:`~vdr.encode.settings.EncoderSettings.batch_size`).
        store: embedding store folder for ``multimodal`` (default ``corpus_dir/embeddings``); page
            embeddings are computed once per model and corpus and reused.
        semantic_model: sentence-transformers name or path (default: offline all-MiniLM-L6-v2).
        bm25: BM25 parameters (``k1``, ``b``, ``method``, ``stemmer``, ``stopwords``, ...).
        rrf_k: the RRF constant of ``hybrid`` (default 60).
        serve_as: served systems (issue 36): each the ``multimodal`` backend's page vectors compressed
            (``pool:3``, ``int8``, ``binary``, ``fp16``, ``bf16``, ``muvera``) or searched by an engine
            (``qdrant``, ``lancedb``, ``plaid``), a backend of its own (``multimodal-binary``) audited
            against exact MaxSim (:mod:`vdr.retrieve.served`, :mod:`vdr.experiment.audit`).
        rerank: a reranker (hub name or folder; issue 37): each base backend's top ``rerank_depth``
            pages re-scored by it, a system of its own (``lexical+rerank``) audited against its base
            (:mod:`vdr.retrieve.rerank`, :func:`vdr.experiment.audit.rerank_audit`). Pages below the
            depth are dropped. ``None``: no reranking.
        rerank_depth: pages of the base's run re-scored per query (default 100).
        rerank_backends: the bases (comma-separated or a list; default every backend wanted but the
            served systems, ``hybrid`` included).
        rerank_options: the other options of the reranker
            (:class:`~vdr.retrieve.options.RerankOptions`: ``kind``, ``library``, ``max_length``,
            ``batch_size``, ``dtype``, ...), for every reranked system.
    """

    backends: str | Sequence[str] = ("multimodal", "lexical", "semantic", "hybrid")
    backend_options: Mapping[str, Mapping[str, Any]] | None = None
    depth: int = 100
    engine: str = "vdr"
    cache_dir: str | Path | bool | None = None
    device: str | None = None
    model: str | None = None
    encoder: Any = None
    batch_size: int | None = None  # EncoderSettings: from free memory on CUDA, 8 on CPU
    trust_remote_code: bool = False
    store: str | Path | None = None
    semantic_model: str | None = None
    bm25: Mapping | None = None
    rrf_k: int = 60
    serve_as: Sequence[str] = ()
    rerank: str | Path | None = None
    rerank_depth: int = 100
    rerank_backends: str | Sequence[str] | None = None
    rerank_options: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class MetricSettings:
    """What is measured (group ``metrics`` of :class:`EvaluateOptions`; parsed once into a
    :class:`~vdr.metrics.plan.MetricPlan`).

    Attributes:
        k: cutoffs of the metrics (default :data:`vdr.metrics.EVALUATE_CUTOFFS`); nDCG@3 is the
            primary metric.
        primary_metric: the metric of the table's first column, the change columns and the report's
            headline (default ``ndcg@3``; any registry name or alias, e.g. ``nDCG@10``, ``RR@10``);
            evaluated and compared even when ``k`` lacks its cutoff; recorded as
            ``config.primary_metric``.
        protocol: ``"convsearch"`` (:data:`vdr.metrics.plan.PROTOCOLS`): cutoffs 3, 10, 100 are
            added and the summary table shows MRR@3 (primary), NDCG@3, R@10, R@100 and, labelled,
            the paper-compatible ``rr_full`` (not compared). ``None``: vdr's default table (nDCG@3
            primary). Needs ``depth >= 100``.
        relevance_level: minimum grade counted as relevant for the binary metrics.
        queries_without_relevant: ``"zero"`` (default: a query whose qrels hold no grade > 0 counts
            as 0 on every metric) or ``"exclude"`` (left out of every mean and test); see
            :func:`vdr.metrics.evaluate_run`.
        macro_average: add a labelled ``macro`` row per variant (mean over the backends that ran).
    """

    k: str | Sequence[int] = EVALUATE_CUTOFFS
    primary_metric: str | None = None
    protocol: str | None = None
    relevance_level: int = 1
    queries_without_relevant: str = "zero"
    macro_average: bool = False


@dataclass(frozen=True)
class StatisticsSettings:
    """The paired tests (group ``statistics`` of :class:`EvaluateOptions`; :mod:`vdr.stats`).

    Attributes:
        seed: seed of the randomization test and the bootstrap.
        n_permutations, n_bootstrap: sizes of the randomization test and the bootstrap.
        alpha: significance level of the verdicts and marks (a change is significant when its
            Holm-adjusted p-value is at most ``alpha``; default 0.05); recorded as ``config.alpha``.
        group_by: query fields (``type``, ``language``, ...) to break the comparisons down by
            (:func:`vdr.stats.compare_groups`; Holm over groups x variants of a backend): extra
            JSON fields of the query files, or of ``groups``; recorded as ``config.group_by``.
        groups: a TSV ``query-id<TAB>field<TAB>value`` of query fields (they win over the query
            files' fields).
    """

    seed: int = 0
    n_permutations: int = 10_000
    n_bootstrap: int = 10_000
    alpha: float = 0.05
    group_by: Sequence[str] = ()
    groups: str | Path | None = None


@dataclass(frozen=True)
class RunSettings:
    """How this run behaves (group ``run`` of :class:`EvaluateOptions`).

    Attributes:
        progress: show progress bars.
        overwrite: replace the results of another experiment (another corpus, queries, qrels or
            dataset) in ``out``, or results of this experiment that the run would drop (a backend x
            variant run or a ``--group-by`` breakdown the folder holds and this run does not write
            again; issue 34.2), and write beside files vdr did not write (never deleted); without
            it all are refused before any search. The folder is locked for the run (a second run
            into it fails at once); results are staged and replace the folder's vdr entries at the
            end (stale runs and reports of earlier runs removed), so an interrupted run leaves it
            unchanged (:mod:`vdr.io.outdir`).
        report: also write the HTML report and its Markdown summary (``report.html``,
            ``report.md``: :func:`vdr.report`) into ``out`` once the results are written. Off by
            default in Python (the :class:`~vdr.results.Results` are in hand; ``vdr.report(out)``
            renders them later, a few seconds); ``vdr evaluate`` turns it on (``--no-report``: off).
            A report the folder already held is rewritten either way, never left stale (issue 34.2).
    """

    progress: bool = True
    overwrite: bool = False
    report: bool = False


@dataclass(frozen=True, init=False)
class EvaluateOptions(Grouped):
    """Every option of :func:`evaluate` (all but ``corpus_dir`` and ``out``), in five groups:
    :class:`InputSettings` (``inputs``), :class:`RetrievalSettings` (``retrieval``),
    :class:`MetricSettings` (``metrics``), :class:`StatisticsSettings` (``statistics``) and
    :class:`RunSettings` (``run``). Each setting also has one flat name (:mod:`vdr.options`):
    ``EvaluateOptions(k=(3, 10), backends="lexical")``, ``opts.k``, ``opts.replace(seed=1)``.

    ``vdr.evaluate(corpus_dir, out=..., k=(3, 10))`` builds one from its keywords;
    ``vdr.evaluate(corpus_dir, out=..., options=EvaluateOptions(...), k=...)`` starts from a given
    one (the keywords override its settings).

    Raises:
        TypeError: an unknown keyword (named, with the known ones).
    """

    inputs: InputSettings = field(default_factory=InputSettings)
    retrieval: RetrievalSettings = field(default_factory=RetrievalSettings)
    metrics: MetricSettings = field(default_factory=MetricSettings)
    statistics: StatisticsSettings = field(default_factory=StatisticsSettings)
    run: RunSettings = field(default_factory=RunSettings)


def evaluate(corpus_dir: str | Path | None = None, *, out: str | Path, options: EvaluateOptions | None = None,
             **kwargs: Any) -> Results | None:
    """Evaluate original vs rewritten queries on each backend over one page or passage corpus.

    Args:
        corpus_dir: a corpus folder written by :func:`vdr.ingest` (``pages.jsonl`` + ``images/``),
            or a passage corpus (``vdr ingest --passages``, ``vdr convert``; see
            :func:`vdr.corpus.load_corpus`); the multimodal backend is skipped on passages.
        out: the results folder.
        options: an :class:`EvaluateOptions` (default: all defaults).
        **kwargs: any setting of :class:`EvaluateOptions` by its flat name (``queries``, ``qrels``,
            ``rewrites``, ``backends``, ``k``, ``depth``, ``vidore``, ``protocol``, ...: documented
            in its groups, with their defaults) or a whole group (``metrics=MetricSettings(...)``);
            they override ``options``' settings.

    Returns:
        :class:`~vdr.results.Results` (also written to ``out``); under torchrun, on rank 0 only
        (``None`` on the other ranks, which only compute).

    Raises:
        InputError: missing or malformed inputs (file, line and id named), unknown backends, bad
            variant names, misaligned or empty rewrites, no backend that could run, a bad
            ``queries_without_relevant``; an ``out`` that cannot be written, is locked by another
            run or holds another experiment (see ``overwrite``).
        TypeError: a keyword that is not an :class:`EvaluateOptions` setting (named, with the known ones).
    """
    opts = with_keywords(EvaluateOptions, options, kwargs, "evaluate")
    from ..errors import check_path

    return _evaluate(check_path(corpus_dir, "evaluate", "corpus_dir", optional=True), check_path(out, "evaluate", "out"), opts)


# help(evaluate) and inspect.signature(evaluate) list every option with its default
evaluate.__signature__ = keyword_signature(
    EvaluateOptions,
    [inspect.Parameter("corpus_dir", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None, annotation="str | Path | None"),
     inspect.Parameter("out", inspect.Parameter.KEYWORD_ONLY, annotation="str | Path")],
    "Results | None",
)


def _evaluate(corpus_dir, out: Path, o: EvaluateOptions) -> Results | None:
    """:func:`evaluate` with its options gathered: the stages, from the folder lock to the written results."""
    from .. import distributed as D

    progress = o.progress and D.is_main()
    timer = _Timer(progress)
    _with_reranked(_with_served(_plan(o.k, o.backends, o.depth, o.engine, dict(o.runs or {}), o.primary_metric,
                                      o.queries_without_relevant, o.protocol), o.serve_as, dict(o.runs or {}), o.engine), o)
    folder = _open_folder(out, corpus_dir, o.queries, o.qrels, o.vidore, engine=o.engine, overwrite=o.overwrite,  # before any work
                          inputs=[o.store, o.cache_dir, *(o.rewrites or {}).values(), *_run_files(o.runs)])
    o, kept = (o, []) if folder is None or o.overwrite else _keep_held(out, o)  # the folder's other runs join this one
    runs = dict(o.runs or {})
    plan = _with_reranked(_with_served(_plan(o.k, o.backends, o.depth, o.engine, runs, o.primary_metric, o.queries_without_relevant,
                                             o.protocol), o.serve_as, runs, o.engine), o)
    with folder if folder is not None else nullcontext():
        with timer.stage("load", unit="page") as st:
            inputs = load_inputs(corpus_dir, options=o.inputs, vidore_dir=out / "corpus", progress=progress)
            st.count, st.note = len(inputs.corpus), f"; {len(inputs.qrels)} judged queries, variants {', '.join(inputs.variants)}"
            st.unit = inputs.corpus.kind
            fields = _query_fields(inputs, o)  # --group-by: a missing field fails here, before any search
        held = _held(out) if folder is not None else None  # what the folder holds now (we hold its lock)
        planned = {(b, v) for b in [*plan.wanted, "macro"] for v in [*inputs.variants, *derived_names(inputs.samples)]}  # a superset
        group_by = _language_config(fields, inputs.qrels, _group_by(o)).get("group_by", _group_by(o))
        _check_nothing_lost(out, held, planned, group_by, o.overwrite)  # before any search
        cache = None if o.cache_dir is False else Path(o.cache_dir) if o.cache_dir not in (None, True) else inputs.corpus_dir / CACHE_DIR_NAME
        encoder = _encoder_settings(o.encoder, o.model, batch_size=o.batch_size, device=o.device, trust_remote_code=o.trust_remote_code)
        specs = _specs(plan, inputs, o, encoder=encoder, runs=runs, out=out)
        _check_per_backend(inputs, plan)
        built, run_map, skipped = _run_backends(specs, inputs, depth=o.depth, cache_dir=cache, device=o.device, progress=progress,
                                                timer=timer)
        if folder is None:
            return None  # other ranks only compute (the multimodal backend); rank 0 writes everything
        order = [s for s in sorted(run_map, key=_result_order(plan.wanted))]
        folded, comparisons = _score(run_map, order, inputs, plan, skipped, timer, o)
        run_results, variants = folded.runs, reported_variants(inputs.variants, inputs.samples)
        ran = {b: built[b] for b in order}
        with timer.stage("results"):  # config, versions (file hashes), the Results object
            config = _config(inputs, plan, ran, o, encoder=encoder, cache_dir=cache)
            config["variants"] = list(variants)
            config[RELATIVE_INPUTS] = relative_inputs(config, out)
            config.update(_language_config(fields, inputs.qrels, config.get("group_by") or []))
            config.update(_graded_gain(run_results, inputs.qrels, o.metrics, config["primary_metric"]))
            config.update(_per_backend_config(inputs, specs, run_map))
        _warn_duplicates(inputs.variants)
        _check_nothing_lost(out, held, {(r.backend, r.variant) for r in run_results}, group_by, o.overwrite)
        if kept:
            config["kept_from_folder"] = kept
        results = Results(
            config=config, versions=_versions_of(inputs, config["backend_config"], o.vidore), runs=run_results,
            comparisons=comparisons, skipped=skipped, variants=variants,
            backend_reports={b: m.report for b, m in ran.items()}, root=out, qrels=inputs.qrels, corpus=inputs.corpus,
            query_fields=fields, samples=folded.record, sample_runs=folded.sample_runs,
        )
        _audit(results, timer)
        _write(results, folder, timer)
        _write_report(out, held, o.report)  # under the folder's lock
    return results


def _run_files(runs) -> list:
    """Every file of ``--run`` options (``{name: file}`` or ``{name: {variant: file}}``)."""
    return [f for v in (runs or {}).values() for f in (v.values() if isinstance(v, Mapping) else [v])]


def _keep_held(out: Path, o: "EvaluateOptions") -> tuple["EvaluateOptions", list[str]]:
    """``o`` extended by what the results folder ``out`` holds of the same experiment and this run does
    not name: its backends, rewrite variants (their recorded files), ``--run`` files and ``--group-by``
    fields. They are evaluated again with this run, so the folder's statistics, groups and report
    cover everything it then holds; what this run names replaces the folder's. Inputs whose files
    are gone are left out (:func:`_check_nothing_lost` then names what would be lost).

    Returns:
        ``(options, ["what was kept", ...])``; ``(o, [])`` when the folder holds no results.
    """
    try:
        cfg = json.loads((out / "results.json").read_text(encoding="utf-8")).get("config") or {}
    except (OSError, ValueError, AttributeError):
        return o, []
    kept: list[str] = []
    rewrites = dict(o.rewrites or {})
    for name, path in (cfg.get("rewrites") or {}).items():
        if name not in rewrites and Path(path).is_file():
            rewrites[name] = path
            kept.append(f"variant {name} ({path})")
    runs = dict(o.runs or {})
    for name, bc in (cfg.get("backend_config") or {}).items():
        files = (bc or {}).get("files") if isinstance(bc, Mapping) and bc.get("backend") == "run" else None
        if files and name not in runs and all(Path(f).is_file() for f in files.values()):
            runs[name] = dict(files)
            kept.append(f"run {name}")
    wanted = _parse_list(o.backends, "--backend")
    backends = wanted + [b for b in cfg.get("backends") or () if b not in wanted and b not in runs and b in available_backends()]
    kept += [f"backend {b}" for b in backends[len(wanted):]]
    serve_as, named = list(o.serve_as or ()), {s.name for s in _parse_served(o.serve_as)}
    for text in cfg.get("serve_as") or ():
        spec = _parse_served([text])
        if spec and spec[0].name not in named:
            serve_as.append(text)
            kept.append(f"served system {spec[0].name}")
    rerank = cfg.get("rerank") if not o.rerank and isinstance(cfg.get("rerank"), Mapping) else None
    if rerank and rerank.get("model"):
        kept.append(f"reranked systems ({rerank['model']})")
    groups, held_groups = o.groups, cfg.get("groups")
    gone = o.groups is None and bool(held_groups) and not Path(held_groups).is_file()  # its fields cannot be read again
    group_by = _group_by(o) + [g for g in cfg.get("group_by") or () if g not in _group_by(o) and g != "language" and not gone]
    kept += [f"--group-by {g}" for g in group_by[len(_group_by(o)):]]
    if groups is None and held_groups and not gone and len(group_by) > len(_group_by(o)):
        groups = held_groups
    if not kept:
        return o, []
    warnings.warn(f"{out}: kept what the folder holds (evaluated again with this run): {', '.join(kept)}; --overwrite"
                  " replaces the folder's results instead", VdrWarning, stacklevel=3)
    more = ({"rerank": rerank["model"], "rerank_depth": int(rerank.get("depth") or 100), "rerank_options": rerank.get("options") or None,
             "rerank_backends": [b for b in rerank.get("backends") or () if b in backends] or None} if rerank and rerank.get("model") else {})
    return (o.replace(rewrites=rewrites or None, runs=runs or None, backends=backends, group_by=tuple(group_by), groups=groups,
                      serve_as=tuple(serve_as), **more), kept)


def _parse_served(texts) -> list:
    """:func:`vdr.retrieve.served.parse_serve_as`, or ``[]`` for a spec this version cannot read."""
    from ..retrieve.served import parse_serve_as

    try:
        return parse_serve_as(list(texts or ()))
    except InputError:
        return []


def _default_name(spec) -> str:
    """The name ``--serve-as`` gives ``spec`` when it names none."""
    from ..retrieve.served import parse_serve_as

    return parse_serve_as([spec.text])[0].name


def _held(out: Path) -> dict | None:
    """What the results folder ``out`` holds (issue 34.2): ``{"runs": {(backend, variant)}, "group_by":
    [field], "report": bool}`` read from its ``results.json``; ``None`` when it holds none (or one
    vdr cannot read: :class:`~vdr.io.outdir.ResultsFolder` refused it already unless ``overwrite``)."""
    f = out / "results.json"
    try:
        doc = json.loads(f.read_text(encoding="utf-8"))
        runs = {(str(r["backend"]), str(r["variant"])) for r in doc["runs"]}
        group_by = [str(g) for g in (doc.get("config") or {}).get("group_by") or ()]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return {"runs": runs, "group_by": group_by, "report": (out / "report.html").is_file()}


def _check_nothing_lost(out: Path, held: dict | None, written: set, group_by: Sequence[str], overwrite: bool) -> None:
    """Refuse a run that would drop results the folder holds (issue 34.2): a backend x variant run or
    a ``--group-by`` breakdown of the folder that this run does not write again.

    Args:
        out: the results folder; held: :func:`_held`'s answer; written: the ``(backend, variant)``
            runs this run writes (or a superset, before the search); group_by: this run's fields;
        overwrite: replace whatever the folder holds.

    Raises:
        InputError: naming every run and breakdown that would be lost, with the two ways out.
    """
    if held is None or overwrite:
        return
    runs = sorted(held["runs"] - set(written))
    groups = [g for g in held["group_by"] if g not in set(group_by)]
    if not runs and not groups:
        return
    lost = ([f"{len(runs)} run(s) backend/variant " + ", ".join(f"{b}/{v}" for b, v in runs)] if runs else []) + (
        [f"the --group-by breakdown(s) {', '.join(groups)}"] if groups else [])
    raise InputError("this run would drop results the folder holds: " + "; ".join(lost) + ". Evaluate them again"
                     " (the same --backend, --run, --rewrites and --group-by as before, plus the new ones) or give"
                     " --overwrite to replace the folder's results, or choose another --out", path=out)


def _write_report(out: Path, held: dict | None, wanted: bool) -> None:
    """Write ``report.html`` and ``report.md`` (and the report's pages: :func:`vdr.report`) when
    ``wanted`` (``vdr evaluate``, ``report=True``), or when the folder held a report before this run:
    a report made before it would describe other results (issue 34.2). What the report could not show,
    and a failure, are warnings (the latter naming the command that rebuilds it), never silent."""
    if not wanted and not (held and held["report"]):
        return
    from ..report.render import report

    try:
        paths = report(out)
    except Exception as e:  # the results are written; the report is secondary, but never silently stale
        what = "the report of the earlier run was removed (it described other results) and" if held and held["report"] else "the report"
        warnings.warn(f"{out}: {what} could not be written ({e}); run `vdr report {out}`", VdrWarning, stacklevel=3)
        return
    for w in paths.warnings:
        warnings.warn(f"report: {w}", VdrWarning, stacklevel=3)


def _query_fields(inputs: Inputs, o: "EvaluateOptions") -> dict[str, dict[str, str]]:
    """The queries' attributes (extra fields of the originals' file, then of the rewrite files,
    then ``o.groups``): :func:`vdr.io.formats.read_query_fields`, checked against ``o.group_by``."""
    from ..io.formats import read_query_fields
    from ..stats import check_alpha

    check_alpha(o.alpha)
    files = [inputs.queries_path, *(o.rewrites or {}).values()]
    return read_query_fields(files, o.groups, _group_by(o))


#: The difference of mean nDCG@k (linear gain) and ndcg_exp@k (exponential gain) above which a note says so.
GAIN_NOTE_THRESHOLD = 0.005


def _graded_gain(run_results: list[RunResult], qrels, settings: MetricSettings, primary: str) -> dict:
    """``{"graded_gain": {...}}`` when the qrels are graded (a grade above 1: ViDoRe V3) and, for some
    run, the exponential gain's nDCG (``ndcg_exp@k``: g = 2^grade - 1, as some model cards use)
    differs from the primary linear-gain nDCG@k (trec_eval's ``ndcg_cut``, MTEB's ``ndcg_at_k``) by
    more than :data:`GAIN_NOTE_THRESHOLD`; else ``{}``. Only for a primary ``ndcg@k``."""
    if not primary.startswith("ndcg@") or max((g for d in qrels.values() for g in d.values()), default=0) <= 1:
        return {}
    exp = "ndcg_exp@" + primary.split("@", 1)[1]
    values, worst = {}, 0.0
    for r in run_results:
        if r.ranking is None:
            continue
        with warnings.catch_warnings():  # a second look at runs already scored (and warned about) above
            warnings.simplefilter("ignore")
            res = evaluate_run(qrels, r.ranking, [primary, exp], relevance_level=settings.relevance_level, allow_unjudged=True,
                               allow_id_mismatch=True, queries_without_relevant=settings.queries_without_relevant)
        lin, ex = res.aggregate[primary], res.aggregate[exp]
        values[f"{r.backend}/{r.variant}"] = {primary: lin, exp: ex}
        worst = max(worst, abs(ex - lin))
    if worst <= GAIN_NOTE_THRESHOLD:
        return {}
    return {"graded_gain": {"metric": primary, "exp_metric": exp, "max_difference": worst, "threshold": GAIN_NOTE_THRESHOLD,
                            "values": values}}


def _language_config(fields: dict, qrels, group_by: list[str]) -> dict:
    """``{"languages": {...}, "group_by": [..., "language"]}`` when the judged queries span two or
    more languages (their ``language`` field: ViDoRe V2/V3, MTEB's multilingual copies), else ``{}``.

    Each language is then its own query set, as MTEB scores a multilingual task: a breakdown by
    ``language`` (added to ``group_by`` when absent) and :meth:`vdr.results.Results.language_table`
    with the mean over languages."""
    langs = list(dict.fromkeys(str(fields[q]["language"]) for q in qrels
                               if "language" in fields.get(q, {})))
    if len(langs) < 2:
        return {}
    return {"languages": {"values": langs, "policy": "each language is its own query set over the same corpus; the mean over"
                          " languages (unweighted) is MTEB's main score"},
            "group_by": group_by if "language" in group_by else [*group_by, "language"]}


def _group_by(o: "EvaluateOptions") -> list[str]:
    return [o.group_by] if isinstance(o.group_by, str) else list(o.group_by or ())


def _score(run_map, order, inputs, plan, skipped, timer: "_Timer", o: "EvaluateOptions"):
    """The metrics of every run, then the paired comparisons (stages ``metrics`` and ``statistics``).

    Raises:
        InputError: no backend ran (each skipped backend's reason named).
    """
    with timer.stage("metrics", unit="run") as st:
        run_results = _metrics(run_map, order, inputs, plan, o.metrics, run_names=set(o.runs or {}), allow_id_mismatch=o.allow_id_mismatch)
        st.count = len(run_results)
    if not run_results:
        raise InputError("no backend ran: " + "; ".join(f"{b}: {r}" for b, r in skipped.items()))
    folded = _fold_samples(run_results, inputs, plan, o)
    with timer.stage("statistics", unit="comparison") as st:
        comparisons = _statistics(folded.runs, plan, o.statistics, exclude=oracle_variants(inputs.samples))
        st.count = len(comparisons)
    return folded, comparisons


def _fold_samples(run_results: list[RunResult], inputs: Inputs, plan: _Plan, o: "EvaluateOptions"):
    """The N-sample variants' rows (mean, RRF, oracle best-of-N) in place of their members' runs
    (:func:`vdr.experiment.samples.fold_samples`); the fused runs scored as every run is."""
    from ..io.idjoin import IdJoinWarning

    def score(b: str, run: Run, metrics) -> MetricsResult:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", IdJoinWarning)
            return evaluate_run(inputs.qrels, run.renamed(f"{b}/{run.name}"), plan.metrics if metrics is None else metrics,
                                relevance_level=o.relevance_level, allow_unjudged=True,
                                queries_without_relevant=o.queries_without_relevant, allow_id_mismatch=o.allow_id_mismatch)

    primary = plan.table_metrics[0]
    k = int(primary.split("@", 1)[1]) if "@" in primary and primary.split("@", 1)[1].isdigit() else min(plan.ks)
    return fold_samples(run_results, inputs.samples, score, primary=primary, hit_metric=f"hit@{k}", depth=o.depth)


def _audit(results: Results, timer: "_Timer") -> None:
    """The served systems against their exact backend and the reranked systems against their base
    (stage ``audit``, only when some backend is served or reranked):
    :func:`vdr.experiment.audit.served_audit` into ``results.served_audit``,
    :func:`~vdr.experiment.audit.rerank_audit` into ``results.rerank_audit``."""
    from .audit import rerank_audit, reranked_systems, served_audit, served_systems

    if served_systems(results.config):
        with timer.stage("audit", unit="system") as st:
            results.served_audit = served_audit(results)
            st.count = len(results.served_audit.get("systems") or ())
    if reranked_systems(results.config):
        with timer.stage("rerank_audit", unit="system") as st:
            results.rerank_audit = rerank_audit(results)
            st.count = len(results.rerank_audit.get("systems") or ())


def _write(results: Results, folder, timer: "_Timer") -> None:
    """Stage ``results`` and ``timing.json`` in the results folder, then replace its content with them."""
    with timer.stage("write"):
        results.save(folder.staging)
    timer.write(folder.staging / "timing.json")
    folder.commit()


def _open_folder(out: Path, corpus_dir, queries, qrels, vidore, *, engine: str, overwrite: bool, inputs=()):
    """Take the results folder (:class:`~vdr.io.outdir.ResultsFolder`) on rank 0, before any work:
    writable, locked, holding no other experiment's results (unless ``overwrite``). ``None`` on the
    other ranks of a torchrun job (an error on rank 0 stops them too). ``inputs`` inside ``out``
    (a corpus in the results folder) are kept when its content is replaced.

    Raises:
        InputError: see :meth:`ResultsFolder.open <vdr.io.outdir.ResultsFolder.open>`.
    """
    from .. import distributed as D
    from ..io.outdir import ResultsFolder

    corpus = out / "corpus" if vidore is not None else Path(corpus_dir) if corpus_dir is not None else None
    path = lambda given, default: str(Path(given).resolve()) if given is not None else (  # noqa: E731
        str((corpus / default).resolve()) if corpus is not None else None)
    identity = {"command": "evaluate", "corpus_dir": None if corpus is None else str(corpus.resolve()),
                "queries": path(queries, "queries.jsonl"), "qrels": path(qrels, "qrels.tsv"), "vidore": vidore}
    keep = ("judge/cache.jsonl", *(("corpus",) if vidore is not None else ()), *(("mteb",) if engine == "mteb" else ()))
    inputs = [corpus_dir, queries, qrels, *(p for x in inputs for p in (x.values() if isinstance(x, Mapping) else [x]))]
    inputs = [p for p in inputs if isinstance(p, (str, Path))]
    taken: list = []
    D.run_on_main(lambda: taken.append(ResultsFolder(out, identity=identity, overwrite=overwrite, keep=keep, inputs=inputs).open()))
    return taken[0] if taken else None


def _result_order(wanted: list[str]):
    """Sort key of backends in results: :data:`BACKENDS` order, then the others as given."""
    order = {b: i for i, b in enumerate(BACKENDS)}
    return lambda b: (order.get(b, len(order)), wanted.index(b) if b in wanted else len(wanted))


def _warn_duplicates(variants: Mapping[str, QuerySet]) -> None:
    """Warn about query texts repeated under several ids of one variant (also in results.json)."""
    for name, qs in variants.items():
        d = duplicate_texts(qs)
        if d["count"]:
            ex = d["examples"][0]
            warnings.warn(f"variant {name!r}: {counted(d['count'], 'query')} {'repeats' if d['count'] == 1 else 'repeat'} the text of"
                          " another query of the variant,"
                          f" e.g. {ex['ids']} share {ex['text'][:60]!r}", VdrWarning, stacklevel=3)


def _encoder_settings(encoder, model, *, batch_size: int | None, device: str | None, trust_remote_code: bool):
    """The multimodal encoder's :class:`~vdr.encode.settings.EncoderSettings` (``None``: no model),
    built by :meth:`~vdr.encode.settings.EncoderSettings.from_options`.

    Raises:
        InputError: ``encoder`` is not EncoderSettings, or ``model`` names another model.
    """
    from ..encode.settings import EncoderSettings

    if encoder is None:
        return None if model is None else EncoderSettings.from_options(
            model, batch_size=batch_size, device=device, trust_remote_code=trust_remote_code)
    if not isinstance(encoder, EncoderSettings):
        raise InputError(f"encoder must be EncoderSettings, got {type(encoder).__name__}")
    if model is not None and str(model) != encoder.model:
        raise InputError(f"model {str(model)!r} differs from the encoder settings' model {encoder.model!r}; give one")
    return encoder
