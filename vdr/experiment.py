"""The main job: original vs rewritten queries on every backend, composed from the stages.

:func:`evaluate` reads as the data flow::

    load inputs (vdr.inputs)  ->  build backends (vdr.retrieve registry)  ->  index each backend
    ->  search every variant  ->  metrics (vdr.metrics)  ->  compare (vdr.compare)  ->  results

It runs every backend for every query variant over one page corpus, evaluates each run with
trec_eval-exact metrics on the same query set (the qrels'), compares every rewrite variant with the
originals on the same backend (paired randomization test, paired t-test, bootstrap CI,
win/tie/loss, Holm over all variants x metrics of a backend), and writes::

    RESULTS_DIR/results.json     config, versions, backend reports, runs (aggregate + per query), comparisons
    RESULTS_DIR/per_query.csv    query id, text and length of each variant, every metric per run
    RESULTS_DIR/runs/<backend>.<variant>.trec   one TREC run per backend x variant
    RESULTS_DIR/timing.json      seconds per stage (load, index per backend, search per backend x
                                 variant, metrics, statistics, write, total)

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

import csv
import dataclasses
import hashlib
import io
import json
import math
import time
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from .corpus import PAGES_FILE
from .errors import InputError, VdrWarning
from .inputs import CONCAT, ORIGINAL, Inputs, build_variants, check_inputs, check_name, duplicate_texts, load_inputs
from .io.atomic import atomic_write, write_text_atomic
from .io.formats import save_run
from .metrics import MetricsResult, evaluate_run
from .retrieve.base import Backend, BackendUnavailable, BuildContext, available_backends, backend_factory
from .types import QuerySet, Run

__all__ = ["evaluate", "EvaluationResults", "RunResult", "BACKENDS", "ENGINES", "build_variants", "check_inputs"]

#: The default backends, in the order results list them (other backends follow in the order given).
BACKENDS = ("multimodal", "lexical", "semantic", "hybrid")
#: How the multimodal backend runs: vdr's own store + MaxSim, or through MTEB (``vdr[mteb]``).
ENGINES = ("vdr", "mteb")
#: The cache folder inside the corpus folder (``evaluate(cache_dir=None)``).
CACHE_DIR_NAME = ".vdr-cache"
_VERSIONED = ["vdr", "colpali-engine", "transformers", "torch", "datasets", "bm25s", "sentence-transformers", "numpy", "scipy"]


@dataclass(frozen=True)
class RunResult:
    """One backend x variant: its run file and its metrics.

    Attributes:
        backend: ``"multimodal"``, ``"lexical"``, ``"semantic"``, ``"hybrid"`` or ``"macro"``.
        variant: ``"original"``, ``"concat"`` or a rewrite variant's name.
        run_file: path of the TREC run, relative to the results folder (``None`` for ``macro``).
        metrics: per-query values and their means (:class:`~vdr.metrics.MetricsResult`).
    """

    backend: str
    variant: str
    run_file: str | None
    metrics: MetricsResult


@dataclass(frozen=True)
class EvaluationResults:
    """What :func:`evaluate` returns and writes.

    Attributes:
        out_dir: the results folder.
        config: every option as used (JSON-ready).
        versions: library, model, dataset and corpus versions (JSON-ready).
        runs: one :class:`RunResult` per backend x variant, backends in :data:`BACKENDS` order.
        comparisons: :class:`~vdr.compare.Comparison` of each rewrite variant against the originals
            per backend and metric.
        skipped: backends that did not run, with the reason.
        variants: the query sets evaluated, by name.
        table_metrics: metric names shown in :meth:`table`.
    """

    out_dir: Path
    config: dict
    versions: dict
    runs: list[RunResult]
    comparisons: list
    skipped: dict[str, str]
    variants: dict[str, QuerySet]
    table_metrics: list[str]
    backend_reports: dict = field(default_factory=dict)

    def run(self, backend: str, variant: str) -> RunResult:
        """The :class:`RunResult` of ``backend`` x ``variant``.

        Raises:
            KeyError: no such run.
        """
        for r in self.runs:
            if r.backend == backend and r.variant == variant:
                return r
        raise KeyError(f"no run for backend {backend!r}, variant {variant!r}")

    def to_dict(self) -> dict:
        """The ``results.json`` document."""
        return {
            "config": self.config,
            "versions": self.versions,
            "skipped": self.skipped,
            "backend_reports": self.backend_reports,
            "variants": {name: _length_stats(qs) for name, qs in self.variants.items()},
            "runs": [
                {
                    "backend": r.backend,
                    "variant": r.variant,
                    "run_file": r.run_file,
                    "num_queries": r.metrics.num_queries,
                    "policy": dict(r.metrics.policy),
                    "aggregate": r.metrics.aggregate,
                    "per_query": r.metrics.per_query,
                }
                for r in self.runs
            ],
            "comparisons": [dict(c.to_dict(), backend=b) for b, c in self.comparisons],
        }

    def table(self) -> str:
        """The summary table: rows backend x variant; the table metrics, the number of queries and,
        for rewrite variants, the change against the originals on the same backend."""
        primary = self.table_metrics[0]
        comp = {(b, c.variant, c.metric): c for b, c in self.comparisons}
        head = ["backend", "variant"] + self.table_metrics + ["queries", f"d {primary}", "p (perm)", "p (Holm)", "p (t)", "95% CI", "W/T/L"]
        rows = []
        for r in self.runs:
            agg = r.metrics.aggregate
            row = [r.backend, r.variant] + [f"{agg[m]:.4f}" for m in self.table_metrics] + [str(r.metrics.num_queries)]
            c = comp.get((r.backend, r.variant, primary))
            if c is None:
                row += [""] * 6
            else:
                row += [
                    f"{c.delta:+.4f}",
                    _fmt_p(c.p_value),
                    _fmt_p(c.p_value_holm),
                    _fmt_p(c.p_value_ttest),
                    f"[{c.ci95[0]:+.3f}, {c.ci95[1]:+.3f}]",
                    f"{c.wins}/{c.ties}/{c.losses}",
                ]
            rows.append(row)
        widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(head)]
        lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths))]
        lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
        for b, reason in self.skipped.items():
            lines.append(f"{b}: skipped: {reason}")
        n_tests = {b for b, _ in self.comparisons}
        if self.comparisons:
            fam = len(self.comparisons[0][1].holm_family)
            lines.append(
                f"d = rewritten - original on the same backend and queries; p (perm): two-sided paired randomization test"
                f" ({self.config['n_permutations']} permutations, seed {self.config['seed']}); p (Holm): Holm-corrected over the"
                f" {fam} tests (variants x {', '.join(self.config['compared_metrics'])}) of each backend; p (t): paired t-test;"
                f" CI: bootstrap of the mean change. Backends reported separately ({len(n_tests)} compared)."
            )
        if any(r.backend == "macro" for r in self.runs):
            lines.append("macro: unweighted mean of the backends' per-query values (labelled; not a backend).")
        return "\n".join(lines)


def _fmt_p(p: float) -> str:
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return "n/a"
    return f"{p:.4f}" if p >= 1e-4 else f"{p:.1e}"


def _length_stats(qs: QuerySet) -> dict:
    chars = [len(q.text) for q in qs.values()]
    toks = [len(q.text.split()) for q in qs.values()]

    def stats(xs: list[int]) -> dict:
        xs = sorted(xs)
        n = len(xs)
        return {"mean": sum(xs) / n, "median": (xs[(n - 1) // 2] + xs[n // 2]) / 2, "min": xs[0], "max": xs[-1]} if n else {}

    return {"num_queries": len(qs), "chars": stats(chars), "whitespace_tokens": stats(toks), "source": qs.source,
            "duplicate_texts": duplicate_texts(qs)}


# --------------------------------------------------------------------------------------------- plan


@dataclass(frozen=True)
class _Plan:
    """The checked options: cutoffs, backends wanted and the metric names they imply."""

    ks: list[int]
    wanted: list[str]
    metric_names: list[str]
    table_metrics: list[str]
    compared_metrics: list[str]


def _versions(names: Sequence[str]) -> dict:
    out = {}
    for n in names:
        try:
            out[n] = version(n)
        except PackageNotFoundError:
            out[n] = None
    return out


def _file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _parse_list(value: str | Sequence, what: str) -> list[str]:
    items = [x.strip() for x in value.split(",")] if isinstance(value, str) else [str(x).strip() for x in value]
    items = [x for x in items if x]
    if not items:
        raise InputError(f"{what}: nothing given")
    return items


def _table_metrics(ks: list[int]) -> list[str]:
    k0 = 3 if 3 in ks else ks[0]
    rest = [k for k in ks if k != k0] or [k0]
    return [f"ndcg@{k0}", f"mrr@{k0}"] + [f"recall@{k}" for k in rest] + [f"hole@{k0}"]


def _plan(k, backends, depth: int, engine: str, runs: Mapping) -> _Plan:
    """Check the options that need no file.

    Raises:
        InputError: an unknown backend or engine, a depth below the largest cutoff, a bad run name.
    """
    from .metrics.compute import _parse_ks

    ks = _parse_ks(k)
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
    metric_names = []
    for kk in ks:
        metric_names += [f"ndcg@{kk}", f"mrr@{kk}", f"recall@{kk}", f"precision@{kk}", f"hit@{kk}", f"map@{kk}", f"judged@{kk}", f"hole@{kk}"]
    table = _table_metrics(ks)
    return _Plan(ks, wanted + [n for n in runs if n not in wanted], metric_names, table, [m for m in table if not m.startswith("hole@")])


# --------------------------------------------------------------------------------------------- backends


@dataclass(frozen=True)
class _Spec:
    """One backend to build: its name in results, its registry factory and its options."""

    name: str
    factory: str
    options: dict


def _specs(plan: _Plan, inputs: Inputs, *, model, store, batch_size, device, trust_remote_code, engine, semantic_model,
           bm25, rrf_k, runs, backend_options, out: Path, vidore) -> list[_Spec]:
    """The backends to build, in build order: every backend but ``hybrid`` (defaults first, in
    :data:`BACKENDS` order, then the others as given), then ``hybrid`` (it fuses what was built)."""
    defaults: dict[str, dict] = {
        "multimodal": {"encoder": {"model": model, "device": device, "batch_size": batch_size, "trust_remote_code": trust_remote_code},
                       "store": store},
        "lexical": dict(bm25 or {}),
        "semantic": {"model": semantic_model} if semantic_model is not None else {},
        "hybrid": {"rrf_k": rrf_k},
    }
    if engine == "mteb":
        defaults["multimodal"].update(qrels=inputs.qrels, out_dir=out / "mteb", ks=plan.ks, dataset=vidore)
    specs = []
    for name in plan.wanted:
        factory = "run" if name in runs else "mteb" if name == "multimodal" and engine == "mteb" else name
        opts = {"path": runs[name]} if name in runs else dict(defaults.get(name, {}))
        opts.update(dict((backend_options or {}).get(name, {})))
        specs.append(_Spec(name, factory, opts))
    order = {b: i for i, b in enumerate(BACKENDS)}
    return sorted(specs, key=lambda s: (s.factory == "hybrid", order.get(s.name, len(order))))


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


def _run_backend(spec: _Spec, ctx: BuildContext, inputs: Inputs, depth: int, timer: "_Timer") -> tuple[_Memo, dict[str, Run]]:
    """Build, index and search one backend over every variant.

    Raises:
        BackendUnavailable: the backend cannot run (the caller records it as skipped).
    """
    with timer.stage("index", spec.name):  # building (model loading) included
        backend = _Memo(backend_factory(spec.factory)(ctx))
        backend.index(inputs.corpus)
    runs = {}
    for variant, queries in inputs.variants.items():
        with timer.stage("search", spec.name, variant):
            runs[variant] = backend.search(queries, depth)
    return backend, runs


def _run_backends(specs: list[_Spec], inputs: Inputs, *, depth: int, cache_dir: Path | None, device, progress: bool,
                  timer: "_Timer") -> tuple[dict[str, _Memo], dict[str, dict[str, Run]], dict[str, str]]:
    """Every backend over every variant. Returns ``(backends, {backend: {variant: run}}, skipped)``;
    under torchrun the ranks other than 0 run only the collective backends."""
    from . import distributed as D

    built: dict[str, _Memo] = {}
    runs: dict[str, dict[str, Run]] = {}
    skipped: dict[str, str] = {}
    for spec in specs:
        if not D.is_main() and not _collective(spec):
            continue
        ctx = BuildContext(name=spec.name, options=spec.options, cache_dir=cache_dir, corpus_dir=inputs.corpus_dir,
                           device=device, progress=progress, built=dict(built))
        try:
            built[spec.name], runs[spec.name] = _run_backend(spec, ctx, inputs, depth, timer)
        except BackendUnavailable as e:
            skipped[spec.name] = str(e)
    return built, runs, skipped


# --------------------------------------------------------------------------------------------- metrics, statistics


def _metrics(runs: dict[str, dict[str, Run]], order: list[str], inputs: Inputs, plan: _Plan, out: Path, *,
             relevance_level: int, macro_average: bool) -> list[RunResult]:
    """Write each run file and evaluate it; add the labelled macro rows when asked."""
    results: list[RunResult] = []
    for b in order:
        for name, run in runs[b].items():
            rel = f"runs/{b}.{name}.trec"
            save_run(run, out / rel, tag=f"vdr-{b}-{name}")
            results.append(RunResult(b, name, rel, evaluate_run(inputs.qrels, run, plan.metric_names, relevance_level=relevance_level)))
    if macro_average and len(order) > 1:
        for name in inputs.variants:
            parts = [r.metrics for r in results if r.variant == name and r.backend in order]
            vals = {m: sum(p.values[m] for p in parts) / len(parts) for m in plan.metric_names}
            pol = dict(parts[0].policy, macro_average_of=order)
            results.append(RunResult("macro", name, None, MetricsResult(parts[0].query_ids, vals, pol)))
    return results


def _statistics(results: list[RunResult], variants: Sequence[str], plan: _Plan, *, n_permutations: int, n_bootstrap: int,
                seed: int) -> list:
    """Each rewrite variant against the originals, per backend (and macro) and compared metric;
    Holm over all variants x metrics of a backend."""
    from .compare import compare, holm_adjust

    comparisons = []
    for b in dict.fromkeys(r.backend for r in results):
        base = next(r for r in results if r.backend == b and r.variant == ORIGINAL)
        comps = []
        for name in variants:
            if name == ORIGINAL:
                continue
            other = next(r for r in results if r.backend == b and r.variant == name)
            comps += compare(base.metrics, other.metrics, plan.compared_metrics, variant=name,
                             n_permutations=n_permutations, n_bootstrap=n_bootstrap, seed=seed)
        if comps:
            comparisons += [(b, c) for c in holm_adjust(comps)]
    return comparisons


# --------------------------------------------------------------------------------------------- config, timing


def _config(inputs: Inputs, plan: _Plan, backends: dict[str, _Memo], *, rewrites, model, engine, depth, seed, relevance_level,
            n_permutations, n_bootstrap, macro_average, vidore, cache_dir) -> dict:
    return {
        "corpus_dir": str(inputs.corpus_dir.resolve()),
        "queries": str(inputs.queries_path.resolve()),
        "qrels": str(inputs.qrels_path.resolve()),
        "rewrites": {n: str(Path(p).resolve()) for n, p in (rewrites or {}).items()},
        "variants": list(inputs.variants),
        "backends": plan.wanted,
        "model": model,
        "engine": engine,
        "k": plan.ks,
        "depth": depth,
        "seed": seed,
        "relevance_level": relevance_level,
        "n_permutations": n_permutations,
        "n_bootstrap": n_bootstrap,
        "metrics": plan.metric_names,
        "table_metrics": plan.table_metrics,
        "compared_metrics": plan.compared_metrics,
        "macro_average": macro_average,
        "vidore": vidore,
        "cache_dir": None if cache_dir is None else str(Path(cache_dir).resolve()),
        "backend_config": {b: m.config for b, m in backends.items()},
    }


def _versions_of(inputs: Inputs, configs: dict, vidore) -> dict:
    versions = _versions(_VERSIONED)
    versions["corpus_fingerprint"] = "sha256:" + _file_sha256(inputs.corpus_dir / PAGES_FILE)
    versions["qrels_sha256"] = _file_sha256(inputs.qrels_path)
    if "multimodal" in configs:
        versions["model"] = {k: configs["multimodal"].get(k) for k in ("model", "revision", "fingerprint")}
    if inputs.vidore_info is not None:
        versions["dataset"] = {"name": vidore, "revision": getattr(inputs.vidore_info, "revision", None)}
    return versions


class _Timer:
    """Wall-clock seconds per stage, nested by name: ``{"load": s, "index": {backend: s}, "search":
    {backend: {variant: s}}, "metrics": s, "statistics": s, "write": s, "total": s}``."""

    def __init__(self) -> None:
        self.t0 = time.perf_counter()
        self.seconds: dict[str, Any] = {}

    @contextmanager
    def stage(self, *path: str) -> Iterator[None]:
        t = time.perf_counter()
        try:
            yield
        finally:
            node = self.seconds
            for p in path[:-1]:
                node = node.setdefault(p, {})
            node[path[-1]] = round(node.get(path[-1], 0.0) + time.perf_counter() - t, 4)

    def write(self, path: Path) -> None:
        """Add ``total`` and write ``timing.json`` atomically."""
        self.seconds["total"] = round(time.perf_counter() - self.t0, 4)
        write_text_atomic(path, json.dumps(self.seconds, indent=1) + "\n")


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
    return [f"{n.ljust(width)}  {v:9.3f} s  {100 * v / total:5.1f}%" for n, v in flat]


# --------------------------------------------------------------------------------------------- evaluate


def evaluate(
    corpus_dir: str | Path | None = None,
    *,
    queries: str | Path | None = None,
    qrels: str | Path | None = None,
    rewrites: Mapping[str, str | Path] | None = None,
    out: str | Path,
    backends: str | Sequence[str] = ("multimodal", "lexical", "semantic", "hybrid"),
    model: str | None = None,
    k: str | Sequence[int] = (3, 5, 10),
    seed: int = 0,
    depth: int = 100,
    vidore: str | None = None,
    vidore_revision: str | None = None,
    vidore_language: str | None = None,
    store: str | Path | None = None,
    batch_size: int = 8,
    device: str | None = None,
    trust_remote_code: bool = False,
    semantic_model: str | None = None,
    bm25: Mapping | None = None,
    rrf_k: int = 60,
    concat: bool | None = None,
    macro_average: bool = False,
    relevance_level: int = 1,
    n_permutations: int = 10_000,
    n_bootstrap: int = 10_000,
    progress: bool = True,
    engine: str = "vdr",
    cache_dir: str | Path | bool | None = None,
    runs: Mapping[str, str | Path | Mapping[str, str | Path]] | None = None,
    backend_options: Mapping[str, Mapping[str, Any]] | None = None,
) -> EvaluationResults | None:
    """Evaluate original vs rewritten queries on each backend over one page corpus.

    Args:
        corpus_dir: a corpus folder written by :func:`vdr.ingest` (``pages.jsonl`` + ``images/``).
        queries: BEIR ``queries.jsonl`` of the original queries (``history`` optional); default
            ``corpus_dir/queries.jsonl`` when it exists (ViDoRe corpora).
        qrels: qrels file (BEIR TSV, TREC or JSON); default ``corpus_dir/qrels.tsv`` when it exists.
        rewrites: ``{variant name: queries.jsonl}``; each must have exactly the originals' ids.
        out: the results folder.
        backends: backend names (comma-separated or a list): the built-in ``multimodal, lexical,
            semantic, hybrid`` or any registered one (entry-point group ``vdr.backends``, see
            :mod:`vdr.retrieve.base`). ``hybrid`` is reciprocal rank fusion (constant ``rrf_k``) of
            the other built-in backends that ran.
        model: ColPali-family model (hub name or local path) for ``multimodal``; without one, or
            when it cannot be loaded, the backend is reported as skipped with the reason.
        k: cutoffs of the metrics (default 3, 5, 10); nDCG@3 is the primary metric.
        seed: seed of the randomization test and the bootstrap.
        depth: pages retrieved per query and written to each run.
        vidore: a ViDoRe dataset (hub name or local folder) used instead of ``corpus_dir``/
            ``queries``/``qrels``; it is ingested into ``out/corpus`` first.
        store: embedding store folder for ``multimodal`` (default ``corpus_dir/embeddings``); page
            embeddings are computed once per model and corpus and reused.
        batch_size, device, trust_remote_code: for the multimodal encoder (``device`` also for the
            semantic backend).
        semantic_model: sentence-transformers name or path (default: offline all-MiniLM-L6-v2).
        bm25: BM25 parameters (``k1``, ``b``, ``method``, ``stemmer``, ``stopwords``).
        rrf_k: the RRF constant of ``hybrid`` (default 60).
        concat: add the history-concatenation baseline (default: when queries carry history).
        macro_average: add a labelled ``macro`` row per variant (mean over the backends that ran).
        relevance_level: minimum grade counted as relevant for the binary metrics.
        n_permutations, n_bootstrap: sizes of the randomization test and the bootstrap.
        engine: ``"vdr"`` (default) runs the multimodal backend with vdr's store and streaming
            MaxSim; ``"mteb"`` runs it through ``mteb.evaluate``
            (:class:`vdr.integrations.mteb.MtebBackend`: one MTEB task per variant over the inputs
            loaded here and the same page store), stores MTEB's TaskResult JSON in ``out/mteb/``
            and evaluates MTEB's runs here like any other. The other backends are not affected.
        cache_dir: root of the backends' index cache (BM25 index, semantic page vectors); default
            ``corpus_dir/.vdr-cache``; ``False``: no cache (the multimodal backend always uses its
            page store).
        runs: ``{name: run file}`` (TREC or JSON, or ``{variant: run file}``): runs of other systems
            evaluated and compared as backends named ``name``.
        backend_options: ``{backend: {option: value}}`` for any backend's factory (they override the
            options above; a third-party backend gets its options only from here).

    Returns:
        :class:`EvaluationResults` (also written to ``out``); under torchrun, on rank 0 only
        (``None`` on the other ranks, which only compute).

    Raises:
        InputError: missing or malformed inputs (file, line and id named), unknown backends, bad
            variant names, misaligned or empty rewrites, no backend that could run.
    """
    from . import distributed as D

    timer = _Timer()
    out = Path(out)
    progress = progress and D.is_main()
    runs = dict(runs or {})
    plan = _plan(k, backends, depth, engine, runs)
    with timer.stage("load"):
        inputs = load_inputs(corpus_dir, queries=queries, qrels=qrels, rewrites=dict(rewrites or {}), concat=concat,
                             vidore=vidore, vidore_dir=out / "corpus", vidore_revision=vidore_revision,
                             vidore_language=vidore_language, progress=progress)
    cache = None if cache_dir is False else Path(cache_dir) if cache_dir not in (None, True) else inputs.corpus_dir / CACHE_DIR_NAME
    specs = _specs(plan, inputs, model=model, store=store, batch_size=batch_size, device=device,
                   trust_remote_code=trust_remote_code, engine=engine, semantic_model=semantic_model, bm25=bm25,
                   rrf_k=rrf_k, runs=runs, backend_options=backend_options, out=out, vidore=vidore)
    built, run_map, skipped = _run_backends(specs, inputs, depth=depth, cache_dir=cache, device=device, progress=progress,
                                            timer=timer)
    if not D.is_main():
        return None  # other ranks only compute (the multimodal backend); rank 0 writes everything
    order = [s for s in sorted(run_map, key=_result_order(plan.wanted))]
    with timer.stage("metrics"):
        run_results = _metrics(run_map, order, inputs, plan, out, relevance_level=relevance_level, macro_average=macro_average)
    if not run_results:
        raise InputError("no backend ran: " + "; ".join(f"{b}: {r}" for b, r in skipped.items()))
    with timer.stage("statistics"):
        comparisons = _statistics(run_results, list(inputs.variants), plan, n_permutations=n_permutations,
                                  n_bootstrap=n_bootstrap, seed=seed)
    ran = {b: built[b] for b in order}
    config = _config(inputs, plan, ran, rewrites=rewrites, model=model, engine=engine, depth=depth, seed=seed,
                     relevance_level=relevance_level, n_permutations=n_permutations, n_bootstrap=n_bootstrap,
                     macro_average=macro_average, vidore=vidore, cache_dir=cache)
    _warn_duplicates(inputs.variants)
    results = EvaluationResults(
        out_dir=out, config=config, versions=_versions_of(inputs, config["backend_config"], vidore), runs=run_results,
        comparisons=comparisons, skipped=skipped, variants=inputs.variants, table_metrics=plan.table_metrics,
        backend_reports={b: m.report for b, m in ran.items()},
    )
    with timer.stage("write"):
        _write(results, out, plan.metric_names)
    timer.write(out / "timing.json")
    return results


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
            warnings.warn(f"variant {name!r}: {d['count']} queries repeat the text of another query of the variant,"
                          f" e.g. {ex['ids']} share {ex['text'][:60]!r}", VdrWarning, stacklevel=3)


def _write(results: EvaluationResults, out: Path, metric_names: list[str]) -> None:
    """Write ``results.json`` and ``per_query.csv`` atomically (the run files are written by the
    metrics stage)."""
    with atomic_write(out / "results.json") as f:
        json.dump(_json_safe(results.to_dict()), f, indent=1, ensure_ascii=False, sort_keys=False, allow_nan=False)
        f.write("\n")
    _write_per_query_csv(out / "per_query.csv", results, metric_names)


def _json_safe(obj):
    if isinstance(obj, float):
        return None if math.isnan(obj) or math.isinf(obj) else obj
    if isinstance(obj, dict):
        return {str(k): _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    if isinstance(obj, Path):
        return str(obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return _json_safe(dataclasses.asdict(obj))
    if obj is None or isinstance(obj, (str, int, bool)):
        return obj
    return str(obj)  # dtypes, devices and other library objects: their readable name


def _write_per_query_csv(path: Path, results: EvaluationResults, metric_names: list[str]) -> None:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    names = list(results.variants)
    runs = results.runs
    head = ["query-id"]
    head += [f"text[{n}]" for n in names]
    head += [f"chars[{n}]" for n in names] + [f"tokens[{n}]" for n in names]
    head += [f"{r.backend}/{r.variant}/{m}" for r in runs for m in metric_names]
    w.writerow(head)
    per = [r.metrics.per_query for r in runs]
    for qid in runs[0].metrics.query_ids:
        row = [qid]
        row += [results.variants[n][qid].text if qid in results.variants[n] else "" for n in names]
        row += [len(results.variants[n][qid].text) if qid in results.variants[n] else "" for n in names]
        row += [len(results.variants[n][qid].text.split()) if qid in results.variants[n] else "" for n in names]
        row += [repr(p[qid][m]) for p in per for m in metric_names]
        w.writerow(row)
    with atomic_write(path) as f:
        f.write(buf.getvalue())


