"""The main job: original vs rewritten queries on the multimodal, lexical, semantic and hybrid backends.

:func:`evaluate` runs every backend for every query variant over one page corpus, evaluates each
run with trec_eval-exact metrics on the same query set (the qrels'), compares every rewrite variant
with the originals on the same backend (paired randomization test, paired t-test, bootstrap CI,
win/tie/loss, Holm over all variants x metrics of a backend), and returns and writes a
:class:`vdr.results.Results` (``results.json``, the tidy ``per_query.csv``, one TREC run per
backend x variant in ``runs/``; see :mod:`vdr.results`), plus ``timing.json``.

Under ``torchrun`` (see :mod:`vdr.distributed`) every rank runs the multimodal backend's heavy
parts: page embedding (pages sharded across ranks), query encoding (distinct query texts in whole
batches per rank, gathered on every rank) and MaxSim (pages partitioned, per-query top-k merged on
rank 0). Rank 0 alone then runs the other backends, the metrics and comparisons and writes every
output; the other ranks return ``None``. ``results.json`` is byte-identical to a single process' on
the CPU.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Mapping, Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from .corpus import PAGES_FILE, Corpus
from .errors import InputError, VdrError
from .metrics import MetricsResult, check_judged_overlap, evaluate_run
from .io.atomic import write_text_atomic
from .io.formats import load_qrels, load_queries, load_rewrites
from .results import Results, RunResult
from .types import ORIGINAL, Query, QuerySet, Run

__all__ = ["evaluate", "BACKENDS", "build_variants", "check_inputs"]

BACKENDS = ("multimodal", "lexical", "semantic", "hybrid")
#: How the multimodal backend runs: vdr's own store + MaxSim, or through MTEB (``vdr[mteb]``).
ENGINES = ("vdr", "mteb")
CONCAT = "concat"
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def _check_name(name: str, what: str) -> str:
    if not _NAME_RE.match(name) or name in (ORIGINAL, CONCAT):
        raise InputError(
            f"{what} name {name!r} must be letters, digits, '_', '.', '-' (it names files) and not {ORIGINAL!r} or {CONCAT!r}"
        )
    return name


def build_variants(originals: QuerySet, rewrites: Mapping[str, str | Path], *, concat: bool | None = None) -> dict[str, QuerySet]:
    """The query variants to evaluate: the originals, each rewrite file, and the ``concat`` baseline.

    Args:
        originals: the original queries (``history`` holds earlier conversation turns, if any).
        rewrites: ``{variant name: queries.jsonl path}``; ids must match the originals exactly.
        concat: add the ``concat`` variant (history turns and the query joined with spaces, the
            baseline that rewriting must beat); default: when any original query has history.

    Returns:
        ``{"original": ..., [ "concat": ...], name: ...}`` in that order.

    Raises:
        AlignmentError: a rewrite file's ids differ from the originals'.
        InputError: a bad variant name, or an empty or whitespace-only rewrite (file, line, id).
    """
    out: dict[str, QuerySet] = {ORIGINAL: originals}
    has_history = any(q.history for q in originals.values())
    if concat if concat is not None else has_history:
        out[CONCAT] = QuerySet(
            {qid: Query(" ".join([*q.history, q.text])) for qid, q in originals.items()}, name=CONCAT, source=originals.source
        )
    for name, path in rewrites.items():
        _check_name(name, "rewrite variant")
        variant = load_rewrites(path, originals, name=name)
        for qid, q in variant.items():
            if not q.text.strip():
                raise InputError("empty or whitespace-only rewrite", path=path, line=variant.lines.get(qid), id=qid)
        out[name] = variant
    return out


def check_inputs(corpus: Corpus, queries: QuerySet, qrels, qrels_path: str | Path) -> dict[str, str]:
    """The checks every evaluation makes before running a backend.

    A judged page that ingest skipped or failed to render (:meth:`vdr.corpus.Corpus.unavailable_reason`)
    stays relevant but unretrievable: it counts in IDCG and recall denominators, so a failure
    lowers scores instead of vanishing; a :class:`~vdr.errors.VdrWarning` lists such pages with
    the reason recorded by ingest.

    Returns:
        ``{corpus id: ingest reason}`` of the judged pages that are not in the corpus.

    Raises:
        InputError: the corpus has no pages; a qrels query id has no query text; a qrels corpus id
            belongs to no ingested document (the qrels file is named).
    """
    if len(corpus) == 0:
        raise InputError("the corpus holds no pages", path=Path(corpus.root) / PAGES_FILE)
    check_judged_overlap(qrels, corpus.ids(), qrels_path=qrels_path)  # no qrels id is a page: an id-format mismatch
    unknown_q = [q for q in qrels if q not in queries]
    if unknown_q:
        raise InputError(f"{len(unknown_q)} qrels query id(s) have no query text, e.g. {unknown_q[:10]}", path=qrels_path)
    missing = {d: corpus.unavailable_reason(d) for d in sorted({d for q in qrels for d in qrels[q] if d not in corpus})}
    unknown = [d for d, reason in missing.items() if reason is None]
    if unknown:
        raise InputError(
            f"{len(unknown)} corpus id(s) in the qrels are not pages of the corpus, e.g. {unknown[:10]}"
            " (page ids are '<relative pdf path>#<page>', with spaces as %20)",
            path=qrels_path,
        )
    if missing:
        import warnings

        from .errors import VdrWarning

        warnings.warn(
            f"{qrels_path}: {len(missing)} judged page(s) were not ingested and stay relevant but unretrievable"
            " (they count in IDCG and recall): " + "; ".join(f"{d}: {r}" for d, r in list(missing.items())[:10])
            + (" ..." if len(missing) > 10 else ""),
            VdrWarning,
            stacklevel=2,
        )
    return missing


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


def evaluate(
    corpus_dir: str | Path | None = None,
    *,
    queries: str | Path | None = None,
    qrels: str | Path | None = None,
    rewrites: Mapping[str, str | Path] | None = None,
    out: str | Path,
    backends: str | Sequence[str] = ("multimodal", "lexical", "semantic", "hybrid"),
    model: str | None = None,
    encoder=None,
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
) -> Results | None:
    """Evaluate original vs rewritten queries on each backend over one page corpus.

    Args:
        corpus_dir: a corpus folder written by :func:`vdr.ingest` (``pages.jsonl`` + ``images/``).
        queries: BEIR ``queries.jsonl`` of the original queries (``history`` optional); default
            ``corpus_dir/queries.jsonl`` when it exists (ViDoRe corpora).
        qrels: qrels file (BEIR TSV, TREC or JSON); default ``corpus_dir/qrels.tsv`` when it exists.
        rewrites: ``{variant name: queries.jsonl}``; each must have exactly the originals' ids.
        out: the results folder.
        backends: any of ``multimodal, lexical, semantic, hybrid`` (comma-separated or a list).
            ``hybrid`` is reciprocal rank fusion (k = ``rrf_k``) of the other backends that ran.
        model: ColPali-family model (hub name or local path) for ``multimodal``; without one, or
            when it cannot be loaded, the backend is reported as skipped with the reason. A
            shorthand for ``encoder=EncoderSettings(model, batch_size=..., device=...,
            trust_remote_code=...)``.
        encoder: every option of the multimodal encoder
            (:class:`~vdr.encode.settings.EncoderSettings`, the same object ``vdr embed`` uses, so
            the store written by ``embed`` with the same settings is found and reused); replaces
            ``model``, ``batch_size`` and ``trust_remote_code``.
        k: cutoffs of the metrics (default 3, 5, 10); nDCG@3 is the primary metric.
        seed: seed of the randomization test and the bootstrap.
        depth: pages retrieved per query and written to each run.
        vidore: a ViDoRe dataset (hub name or local folder) used instead of ``corpus_dir``/
            ``queries``/``qrels``; it is ingested into ``out/corpus`` first.
        store: embedding store folder for ``multimodal`` (default ``corpus_dir/embeddings``); page
            embeddings are computed once per model and corpus and reused.
        batch_size, device, trust_remote_code: for the multimodal encoder when ``encoder`` is not
            given (``device`` is also the semantic backend's).
        semantic_model: sentence-transformers name or path (default: offline all-MiniLM-L6-v2).
        bm25: BM25 parameters (``k1``, ``b``, ``method``, ``stemmer``, ``stopwords``).
        concat: add the history-concatenation baseline (default: when queries carry history).
        macro_average: add a labelled ``macro`` row per variant (mean over the backends that ran).
        relevance_level: minimum grade counted as relevant for the binary metrics.
        n_permutations, n_bootstrap: sizes of the randomization test and the bootstrap.
        engine: ``"vdr"`` (default) runs the multimodal backend with vdr's store and streaming
            MaxSim; ``"mteb"`` runs it through ``mteb.evaluate`` (one MTEB task per variant, see
            :mod:`vdr.integrations.mteb`), stores MTEB's TaskResult JSON in ``out/mteb/`` and
            evaluates MTEB's runs here like any other. The other backends are not affected.

    Returns:
        :class:`~vdr.results.Results` (also written to ``out`` by :meth:`~vdr.results.Results.save`); under torchrun, on rank 0 only
        (``None`` on the other ranks, which only compute).

    Raises:
        InputError: missing or malformed inputs (file, line and id named), unknown backends, bad
            variant names, misaligned or empty rewrites.
    """
    from . import distributed as D
    from .compare import compare_variants
    from .metrics import parse_cutoffs

    out = Path(out)
    progress = progress and D.is_main()
    ks = parse_cutoffs(k)
    wanted = _parse_list(backends, "--backend")
    unknown = [b for b in wanted if b not in BACKENDS]
    if unknown:
        raise InputError(f"unknown backend(s) {unknown}; choose from {', '.join(BACKENDS)}")
    if depth < max(ks):
        raise InputError(f"depth {depth} is smaller than the largest cutoff {max(ks)}")
    if engine not in ENGINES:
        raise InputError(f"unknown engine {engine!r}; choose from {', '.join(ENGINES)}")
    encoder = _encoder_settings(encoder, model, batch_size=batch_size, device=device, trust_remote_code=trust_remote_code)
    model = None if encoder is None else encoder.model

    vidore_info = None
    if vidore is not None:
        if corpus_dir is not None:
            raise InputError("give either a corpus folder or --vidore, not both")
        from .ingest import ingest_vidore

        corpus_dir = out / "corpus"
        vidore_info = D.run_on_main(ingest_vidore, vidore, corpus_dir, revision=vidore_revision, language=vidore_language,
                                    progress=progress)
    if corpus_dir is None:
        raise InputError("no corpus: give CORPUS_DIR or --vidore DATASET")
    corpus_dir = Path(corpus_dir)
    corpus = Corpus.load(corpus_dir)
    queries = Path(queries) if queries is not None else corpus_dir / "queries.jsonl"
    qrels_path = Path(qrels) if qrels is not None else corpus_dir / "qrels.tsv"
    originals = load_queries(queries)
    qrels_obj = load_qrels(qrels_path)
    check_inputs(corpus, originals, qrels_obj, qrels_path)
    variants = build_variants(originals, dict(rewrites or {}), concat=concat)
    texts = corpus.texts()

    metric_names = []
    for kk in ks:
        metric_names += [f"ndcg@{kk}", f"mrr@{kk}", f"recall@{kk}", f"precision@{kk}", f"hit@{kk}", f"map@{kk}", f"judged@{kk}", f"hole@{kk}", f"ties@{kk}"]
    table_metrics = _table_metrics(ks)
    compared_metrics = [m for m in table_metrics if not m.startswith("hole@")]

    runs_by_backend: dict[str, dict[str, Run]] = {}
    skipped: dict[str, str] = {}
    reports: dict[str, dict] = {}
    configs: dict[str, dict] = {}
    timings: dict[str, float] = {}

    if "multimodal" in wanted:
        t0 = time.perf_counter()
        if model is None:
            skipped["multimodal"] = "no --model given (a ColPali-family checkpoint: hub name or local path)"
        else:
            try:
                if engine == "mteb":  # MTEB runs its own loop: rank 0 alone under torchrun
                    runs, cfg, rep = (None, None, None) if not D.is_main() else _mteb_multimodal_runs(
                        corpus_dir, variants, qrels_obj, encoder, out, depth, ks, progress=progress,
                    )
                else:
                    runs, cfg, rep = _multimodal_runs(corpus_dir, corpus, variants, encoder, store, depth, progress=progress)
                if runs is not None:
                    runs_by_backend["multimodal"], configs["multimodal"], reports["multimodal"] = runs, cfg, rep
            except VdrError as e:
                skipped["multimodal"] = f"model {model!r} could not be used: {e}"
        timings["multimodal"] = time.perf_counter() - t0
    if not D.is_main():
        return None  # other ranks only compute (the multimodal backend); rank 0 writes everything

    def text_backend(name: str, backend) -> None:
        t0 = time.perf_counter()
        runs_by_backend[name] = {}
        searches = {}
        for vname, qs in variants.items():
            runs_by_backend[name][vname] = backend.search(qs.texts(), k=depth)
            searches[vname] = getattr(backend, "last_search", None)
        configs[name], reports[name] = backend.config, {"index": backend.report, "searches": searches}
        timings[name] = time.perf_counter() - t0

    if "lexical" in wanted:
        from .retrieve.lexical import BM25Backend

        text_backend("lexical", BM25Backend(texts, **dict(bm25 or {})))
    if "semantic" in wanted:
        from .retrieve.semantic import DenseBackend

        text_backend("semantic", DenseBackend(semantic_model, device=device).index(texts))
    if "hybrid" in wanted:
        from .retrieve.hybrid import HybridBackend

        ran = [b for b in ("multimodal", "lexical", "semantic") if b in runs_by_backend]
        if len(ran) < 2:
            skipped["hybrid"] = f"needs at least two backends that ran, got {ran or 'none'}"
        else:
            hb = HybridBackend(rrf_k, top=depth)
            runs_by_backend["hybrid"] = {name: hb.fuse([runs_by_backend[b][name] for b in ran], names=ran) for name in variants}
            configs["hybrid"] = dict(hb.config, fused_backends=ran)

    run_results: list[RunResult] = []
    for b in BACKENDS:
        for name in variants:
            if b not in runs_by_backend:
                continue
            run = runs_by_backend[b][name]
            res = evaluate_run(qrels_obj, run, metric_names, relevance_level=relevance_level, allow_unjudged=True)
            run_results.append(RunResult(b, name, f"runs/{b}.{name}.trec", res, ranking=run))
    if not run_results:
        raise InputError("no backend ran: " + "; ".join(f"{b}: {r}" for b, r in skipped.items()))

    ran_backends = [b for b in BACKENDS if b in runs_by_backend]
    if macro_average and len(ran_backends) > 1:
        for name in variants:
            parts = [r.metrics for r in run_results if r.variant == name and r.backend in ran_backends]
            vals = {m: sum(p.values[m] for p in parts) / len(parts) for m in metric_names}
            pol = dict(parts[0].policy, macro_average_of=ran_backends)
            run_results.append(RunResult("macro", name, None, MetricsResult(parts[0].query_ids, vals, pol)))

    compared = [*ran_backends, *(["macro"] if macro_average and len(ran_backends) > 1 else [])]
    comparisons = compare_variants({b: {r.variant: r.metrics for r in run_results if r.backend == b} for b in compared},
                                   compared_metrics, n_permutations=n_permutations, n_bootstrap=n_bootstrap, seed=seed)

    config = {
        "corpus_dir": str(corpus_dir.resolve()),
        "queries": str(queries.resolve()),
        "qrels": str(qrels_path.resolve()),
        "rewrites": {n: str(Path(p).resolve()) for n, p in (rewrites or {}).items()},
        "variants": list(variants),
        "backends": wanted,
        "model": model,
        "encoder": None if encoder is None else encoder.to_json(),
        "engine": engine,
        "k": ks,
        "depth": depth,
        "seed": seed,
        "relevance_level": relevance_level,
        "n_permutations": n_permutations,
        "n_bootstrap": n_bootstrap,
        "metrics": metric_names,
        "table_metrics": table_metrics,
        "compared_metrics": compared_metrics,
        "macro_average": macro_average,
        "vidore": vidore,
        "backend_config": configs,
    }
    versions = _versions(["vdr", "colpali-engine", "transformers", "torch", "datasets", "bm25s", "sentence-transformers", "numpy", "scipy"])
    versions["corpus_fingerprint"] = "sha256:" + _file_sha256(corpus_dir / PAGES_FILE)
    versions["qrels_sha256"] = _file_sha256(qrels_path)
    if "multimodal" in configs:
        versions["model"] = {k2: configs["multimodal"].get(k2) for k2 in ("model", "revision", "fingerprint")}
    if vidore_info is not None:
        versions["dataset"] = {"name": vidore, "revision": getattr(vidore_info, "revision", None)}

    results = Results(config=config, versions=versions, runs=run_results, comparisons=comparisons, skipped=skipped,
                      variants=variants, backend_reports=reports, root=out, qrels=qrels_obj, corpus=corpus)
    results.save(out)
    write_text_atomic(out / "timing.json", json.dumps({b: round(t, 3) for b, t in timings.items()}, indent=1) + "\n")
    return results


def _encoder_settings(encoder, model, *, batch_size: int, device: str | None, trust_remote_code: bool):
    """The multimodal encoder's :class:`~vdr.encode.settings.EncoderSettings` (``None``: no model).

    Raises:
        InputError: ``encoder`` is not EncoderSettings, or ``model`` names another model.
    """
    from .encode.settings import EncoderSettings

    if encoder is None:
        return None if model is None else EncoderSettings(model, batch_size=batch_size, device=device,
                                                           trust_remote_code=trust_remote_code)
    if not isinstance(encoder, EncoderSettings):
        raise InputError(f"encoder must be EncoderSettings, got {type(encoder).__name__}")
    if model is not None and str(model) != encoder.model:
        raise InputError(f"model {str(model)!r} differs from the encoder settings' model {encoder.model!r}; give one")
    return encoder


def _multimodal_runs(corpus_dir, corpus, variants, settings, store, depth, *, progress):
    """Embed the pages once (reusing vectors already in the store), encode each distinct query text
    once across all variants, and score with streaming MaxSim top-k.

    Args:
        settings: the :class:`~vdr.encode.settings.EncoderSettings` (batch sizes, device, query
            template, resolution, stored dtype ...).

    Returns:
        ``({variant: Run}, config, report)``; ``(None, None, None)`` on ranks other than 0 under torchrun.

    Raises:
        VdrError: the model cannot be loaded (missing weights, offline hub name, ...) or a store error.
    """
    from . import distributed as D
    from .encode import embed
    from .encode.colpali import LateInteractionEncoder
    from .encode.store import EmbeddingStore

    enc = LateInteractionEncoder.from_settings(settings.replace(device=D.device_for_rank(settings.device)))
    store_dir = Path(store) if store is not None else Path(corpus_dir) / "embeddings"
    rep = embed(corpus_dir, enc, store_dir, progress=progress)
    st = EmbeddingStore.open(rep.store)
    texts = list(dict.fromkeys(q.text for qs in variants.values() for q in qs.values()))
    qbs = settings.queries_per_batch
    # under torchrun: whole batches per rank (the batches a single process forms), gathered everywhere
    parts = D.all_gather_object(enc.encode_queries(D.shard_batches(texts, qbs), batch_size=qbs, progress=progress))
    embs = [e for part in parts for e in part]
    device = settings.device
    score_device = D.device_for_rank(device) if device and device.startswith("cuda") else None
    top = D.sharded_maxsim_topk(embs, st, min(depth, len(st)), device=score_device)
    if top is None:  # not rank 0
        return None, None, None
    by_text = {t: dict(zip(ids, scores)) for t, ids, scores in zip(texts, top.ids, top.scores.tolist())}
    runs = {name: Run._trusted({qid: dict(by_text[q.text]) for qid, q in qs.items()}, name=f"multimodal-{name}") for name, qs in variants.items()}
    config = dict(enc.describe(), batch_size=settings.batch_size,
                  store=str(rep.store), stored_dtype=rep.dtype)
    report = {
        "pages": rep.pages, "encoded": rep.encoded, "reused": rep.reused, "copied": rep.copied,
        "duplicate_pages": rep.duplicates, "removed": rep.removed,
        "tokens_per_page": rep.tokens_per_page, "batch_size_final": rep.batch_size_final,
        "distinct_query_texts_encoded": len(texts),
    }
    return runs, config, report


def _mteb_multimodal_runs(corpus_dir, variants, qrels, settings, out, depth, ks, *, progress):
    """``engine="mteb"``: the multimodal runs from ``mteb.evaluate`` (TaskResult JSON in ``out/mteb/``).

    Returns and raises as :func:`vdr.integrations.mteb.mteb_multimodal_runs`; a missing mteb
    installation is reported as a :class:`~vdr.errors.VdrError` (the backend is then skipped).
    """
    try:
        from .integrations.mteb import mteb_multimodal_runs
    except ImportError as e:
        raise VdrError(str(e)) from None
    return mteb_multimodal_runs(corpus_dir, variants, qrels, settings, Path(out) / "mteb", depth, ks=ks, progress=progress)
