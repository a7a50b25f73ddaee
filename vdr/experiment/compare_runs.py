"""Runs of several systems against a baseline run on the same qrels (``vdr compare``, ``vdr.compare``):
the ranx-style comparison, with vdr's trec_eval-exact metrics and paired tests.

Every run is evaluated on the qrels' query set (a query a run lacks scores 0, as in trec_eval with
``-c``); every run other than the baseline is compared with the baseline on the compared metrics
by :func:`vdr.stats.compare_variants`: paired randomization test (exact over all ``2^n`` sign
assignments for ``n <= 16`` queries), paired t-test, 95% bootstrap CI of the mean change,
wins/ties/losses, Holm over the runs, one family per metric (``family="all"``: one family over runs x
metrics). With ``pairs="all"`` every pair of runs is also compared (ranx's matrix,
:func:`vdr.stats.compare_pairs`: Holm over all pairs, one family per metric or, ``family="all"``, one
over pairs x metrics; those against the baseline included: one Holm p per test in every table); with
``group_by`` each run is compared with the baseline within each group of queries
(:func:`vdr.stats.compare_groups`). The outcome is a :class:`~vdr.results.Results`
(one pseudo-backend ``runs``, one variant per run, the baseline first) written like
``vdr evaluate``'s (``results.json``, ``per_query.csv``, ``runs/<name>.trec``), so ``vdr report``
and :meth:`Results.load <vdr.results.Results.load>` read it.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from ..io.digest import file_sha256
from ..options import with_keywords
from ..stats import adopt_pair_family, check_alpha, check_family, compare_pairs, compare_variants, holm_per_metric
from ..errors import InputError
from .inputs import check_name
from ..io.formats import load_qrels, load_queries, load_run, read_query_fields
from ..metrics import EVALUATE_CUTOFFS, MetricPlan, evaluate_run
from ..metrics.plan import COMPARE_DEFAULTS
from ..results import RELATIVE_INPUTS, Results, RunResult, relative_inputs
from ..types import Qrels, QuerySet, Run

__all__ = ["compare_runs", "CompareOptions", "parse_run_items", "RUNS_BACKEND"]

#: The pseudo-backend name of a run comparison's rows in :class:`~vdr.results.Results`.
RUNS_BACKEND = "runs"


def parse_run_items(items: Sequence[str], option: str = "RUN") -> dict[str, str]:
    """``["bm25.trec", "dense=runs/d.trec"]`` -> ``{"bm25": "bm25.trec", "dense": "runs/d.trec"}``:
    ``NAME=FILE``, or ``FILE`` named by its file name without the last suffix.

    Raises:
        InputError: an empty item or name, a name given twice, a name that cannot name files.
    """
    out: dict[str, str] = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or "/" in name or "\\" in name:
            name, path = Path(item).stem, item
        if not name or not path:
            raise InputError(f"{option} takes FILE or NAME=FILE, got {item!r}")
        check_name(name, "run")
        if name in out:
            raise InputError(f"run name {name!r} given twice ({out[name]} and {path}); name them with NAME=FILE")
        out[name] = path
    return out


def _named_runs(runs) -> dict[str, tuple[Run, str | None]]:
    """``{name: (Run, source path or None)}`` from a mapping or a sequence of paths / named Runs."""
    if isinstance(runs, Mapping):
        items = {str(n): r for n, r in runs.items()}
    elif isinstance(runs, (str, Path, Run)):
        raise InputError("runs must be several runs: {name: run file or Run} or a list of run files")
    else:
        items = {}
        for r in runs:
            name = r.name if isinstance(r, Run) else Path(r).stem
            if not name:
                raise InputError("a Run in a list needs a name (Run(..., name=...)); or pass {name: run}")
            if name in items:
                raise InputError(f"run name {name!r} given twice; pass {{name: run}} to name them")
            items[name] = r
    out = {}
    for name, r in items.items():
        check_name(name, "run")
        out[name] = (r, None) if isinstance(r, Run) else (Run(r), None) if isinstance(r, Mapping) else (load_run(r), str(Path(r).resolve()))
    return out




def _versions(qrels_path: str | None, runs: Mapping[str, tuple[Run, str | None]]) -> dict:
    out = {}
    for n in ("vdr", "numpy", "scipy"):
        try:
            out[n] = version(n)
        except PackageNotFoundError:
            out[n] = None
    out["qrels_sha256"] = None if qrels_path is None else file_sha256(qrels_path)
    out["runs_sha256"] = {n: None if p is None else file_sha256(p) for n, (_, p) in runs.items()}
    return out


@dataclass(frozen=True)
class CompareOptions:
    """Every option of :func:`compare_runs` (all but ``qrels`` and ``runs``), with its default.

    ``vdr.compare(qrels, runs, baseline="bm25", k=(3, 10))`` builds one from its keywords;
    ``vdr.compare(qrels, runs, options=CompareOptions(...), seed=1)`` starts from a given one (the
    keywords override its fields, :func:`dataclasses.replace`).

    Attributes:
        baseline: the run the others are compared with (default: the first).
        metrics: metric names in any accepted spelling (``nDCG@10``, ``P@5``, ``RR@10``, ``ndcg_at_10``);
            default: vdr's families at the cutoffs ``k`` (table: nDCG, MRR and hole at 3, recall;
            :data:`vdr.metrics.plan.COMPARE_DEFAULTS`).
        primary_metric: the table's first column and the metric of its change columns (default
            ``ndcg@3``, or the first of ``metrics``); added to the evaluated metrics when missing.
        k: cutoffs of the default metrics (default :data:`vdr.metrics.EVALUATE_CUTOFFS`, 3, 5, 10).
        relevance_level, queries_without_relevant, allow_unjudged, allow_id_mismatch: see
            :func:`vdr.metrics.evaluate_run`.
        n_permutations, n_bootstrap, seed: see :func:`vdr.stats.compare_variants`.
        out: a results folder to write (``results.json``, ``per_query.csv``, ``runs/<name>.trec``,
            with ``report`` also ``report.html`` and ``report.md``); taken before any work like
            ``vdr evaluate --out`` (locked; another experiment's results refused unless
            ``overwrite``; replaced as a whole, :mod:`vdr.io.outdir`).
        overwrite: replace another experiment's results in ``out``; write beside files vdr did not write (never deleted).
        report: with ``out``, also write the HTML/Markdown report (:func:`vdr.report`).
        pairs: ``"baseline"`` (default: each run against the baseline) or ``"all"``: also every
            pair of runs (ranx's comparison matrix; :meth:`Results.pairs_table
            <vdr.results.Results.pairs_table>`).
        family: the Holm families: ``"primary"`` (default) one per compared metric, so the primary
            metric's family is the comparisons made on it (each run against the baseline, or with
            ``pairs="all"`` every pair); ``"all"`` one family over the comparisons x every compared
            metric. Each test has one Holm p, the same in every table (:func:`vdr.stats.holm_per_metric`).
        alpha: significance level of the verdicts and marks (default 0.05; Holm-adjusted p).
        group_by: query fields to break the comparison down by (``type``, ``language``): read
            from ``queries`` (extra JSON fields) or ``groups``.
        groups: a TSV ``query-id<TAB>field<TAB>value`` of query fields.
        queries: the queries file (BEIR ``queries.jsonl`` or TSV topics): its texts are shown in
            the report, its extra fields can be grouped by.
        corpus_dir: the corpus folder the runs searched (``vdr ingest``): the report shows its
            pages (or passages).
    """

    baseline: str | None = None
    metrics: Sequence[str] | None = None
    primary_metric: str | None = None
    k: str | Sequence[int] = EVALUATE_CUTOFFS
    relevance_level: int = 1
    queries_without_relevant: str = "zero"
    allow_unjudged: bool = False
    allow_id_mismatch: bool = False
    n_permutations: int = 10_000
    n_bootstrap: int = 10_000
    seed: int = 0
    out: str | Path | None = None
    overwrite: bool = False
    report: bool = True
    pairs: str = "baseline"
    family: str = "primary"
    alpha: float = 0.05
    group_by: Sequence[str] = ()
    groups: str | Path | None = None
    queries: str | Path | None = None
    corpus_dir: str | Path | None = None




def compare_runs(
    qrels: str | Path | Qrels | Mapping,
    runs: Mapping[str, str | Path | Run | Mapping] | Sequence[str | Path | Run],
    *,
    options: CompareOptions | None = None,
    **kwargs: Any,
) -> Results:
    """Compare runs of several systems with a baseline run on the same qrels (``vdr.compare``).

    Args:
        qrels: a qrels file (TREC, BEIR TSV or JSON), :class:`~vdr.types.Qrels` or ``{qid: {docid: grade}}``.
        runs: ``{name: run file (TREC or JSON) | Run | {qid: {docid: score}}}``, or a list of run
            files (named by their file name without suffix) or named :class:`~vdr.types.Run`\\ s;
            at least two. Names are letters, digits, ``_ . -`` (they name files).
        options: a :class:`CompareOptions` (default: all defaults).
        **kwargs: any field of :class:`CompareOptions` (``baseline``, ``metrics``,
            ``primary_metric``, ``k``, ``relevance_level``, ``queries_without_relevant``,
            ``allow_unjudged``, ``allow_id_mismatch``, ``n_permutations``, ``n_bootstrap``, ``seed``, ``out``,
            ``overwrite``, ``report``, ``pairs``, ``family``, ``alpha``, ``group_by``, ``groups``, ``queries``,
            ``corpus_dir``: documented there, with their defaults); they override ``options``'
            fields.

    Returns:
        :class:`~vdr.results.Results`: rows ``runs`` x run name (baseline first), comparisons of
        every other run against the baseline; ``root`` is ``out`` (or ``None``).

    Raises:
        InputError: fewer than two runs, an unknown baseline, bad names, missing or malformed files
            (file, line and id named), unknown metrics, no judged page in a run (an id mismatch;
            unless ``allow_unjudged``), an ``out`` that cannot be taken. An error evaluating one
            run names that run and its file (``PATH: run 'NAME': ...``; no path for in-memory runs).
        TypeError: a keyword that is not a :class:`CompareOptions` field (named, with the known ones).
    """
    from ..io.outdir import ResultsFolder

    o = with_keywords(CompareOptions, options, kwargs, "compare")
    qrels_path = str(Path(qrels).resolve()) if isinstance(qrels, (str, Path)) else None
    folder = None
    if o.out is not None:  # before any work
        files = [qrels_path, *(r for r in (runs.values() if isinstance(runs, Mapping) else runs) if isinstance(r, (str, Path))),
                 *(p for p in (o.queries, o.groups, o.corpus_dir) if p is not None)]
        folder = ResultsFolder(o.out, identity={"command": "compare", "qrels": qrels_path}, overwrite=o.overwrite, inputs=files).open()
    try:
        res = _compare(qrels, runs, qrels_path, o)
        if folder is not None:
            res.config[RELATIVE_INPUTS] = relative_inputs(res.config, o.out)
            res.save(folder.staging)
            folder.commit()
            res.root = Path(o.out)
            if o.report:
                from ..report.render import report as write_report

                write_report(o.out)
    finally:
        if folder is not None:
            folder.close()
    return res


# help(compare_runs) and inspect.signature(compare_runs) list every option with its default
compare_runs.__signature__ = inspect.Signature(
    [inspect.Parameter("qrels", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation="str | Path | Qrels | Mapping"),
     inspect.Parameter("runs", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                       annotation="Mapping[str, str | Path | Run | Mapping] | Sequence[str | Path | Run]"),
     inspect.Parameter("options", inspect.Parameter.KEYWORD_ONLY, default=None, annotation="CompareOptions | None"),
     *(inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default, annotation=f.type)
       for f in dataclasses.fields(CompareOptions))],
    return_annotation="Results",
)


def _compare(qrels, runs, qrels_path: str | None, o: CompareOptions) -> Results:
    """:func:`compare_runs` without the folder: read, evaluate, compare."""
    plan = MetricPlan.parse(o.metrics, k=o.k, primary=o.primary_metric, defaults=COMPARE_DEFAULTS)
    if o.pairs not in ("baseline", "all"):
        raise InputError(f"--pairs must be 'baseline' (each run against the baseline) or 'all' (every pair), got {o.pairs!r}")
    alpha = check_alpha(o.alpha)
    family = check_family(o.family)
    group_by = [o.group_by] if isinstance(o.group_by, str) else list(o.group_by or ())
    fields = read_query_fields([o.queries], o.groups, group_by)
    texts = load_queries(o.queries) if o.queries is not None else None
    corpus = None
    if o.corpus_dir is not None:
        from ..corpus import load_corpus

        corpus = load_corpus(o.corpus_dir)
    named = _named_runs(runs)
    if len(named) < 2:
        raise InputError(f"compare needs at least two runs (a baseline and a system), got {len(named)}")
    baseline = next(iter(named)) if o.baseline is None else str(o.baseline)
    if baseline not in named:
        raise InputError(f"baseline {baseline!r} is not one of the runs ({', '.join(named)})")
    q = load_qrels(qrels) if qrels_path is not None else qrels if isinstance(qrels, Qrels) else Qrels(qrels)
    order = [baseline, *(n for n in named if n != baseline)]
    results = []
    for n in order:
        run = named[n][0].renamed(n)
        try:
            m = evaluate_run(q, run, plan, relevance_level=o.relevance_level, queries_without_relevant=o.queries_without_relevant,
                             allow_unjudged=o.allow_unjudged, allow_id_mismatch=o.allow_id_mismatch)
        except InputError as e:  # name the run and its file: "which of my runs?" (the message alone names neither)
            raise InputError(f"run {n!r}: {e}", path=named[n][1], id=e.id) from None
        results.append(RunResult(RUNS_BACKEND, n, f"runs/{n}.trec", m, ranking=run))
    by_name = {r.variant: r.metrics for r in results}
    comparisons = compare_variants({RUNS_BACKEND: by_name}, plan.compared_names, baseline=baseline,
                                   n_permutations=o.n_permutations, n_bootstrap=o.n_bootstrap, seed=o.seed)
    pairwise = (compare_pairs(by_name, plan.compared_names, n_permutations=o.n_permutations, n_bootstrap=o.n_bootstrap, seed=o.seed)
                if o.pairs == "all" else [])
    if family == "primary":  # one family per metric: the primary's over the comparisons made is the verdicts'
        comparisons = list(zip([b for b, _ in comparisons], holm_per_metric([c for _, c in comparisons])))
        pairwise = holm_per_metric(pairwise)
    if pairwise:  # one family: the tests against the baseline are pairs too, with the one Holm p of every pair
        comparisons = adopt_pair_family(comparisons, pairwise, baseline)
    config = {
        "command": "compare", "qrels": qrels_path, "runs": {n: named[n][1] for n in order}, "baseline": baseline,
        "variants": order, "backends": [RUNS_BACKEND], "k": list(plan.cutoffs), "seed": o.seed, "relevance_level": o.relevance_level,
        "queries_without_relevant": o.queries_without_relevant, "n_permutations": o.n_permutations, "n_bootstrap": o.n_bootstrap,
        "metrics": plan.names, "table_metrics": plan.table_names, "compared_metrics": plan.compared_names,
        "primary_metric": plan.primary_name, "pairs": o.pairs, "family": family, "alpha": alpha,
        **({"group_by": group_by} if group_by else {}),
        **({"groups": str(Path(o.groups).resolve())} if o.groups is not None else {}),
        **({"queries": str(Path(o.queries).resolve())} if o.queries is not None else {}),
        **({"corpus_dir": str(Path(o.corpus_dir).resolve()), "corpus_kind": corpus.kind} if corpus is not None else {}),
    }
    # the systems ran the same queries: their texts (when given) are stored once, with the baseline
    variants = {n: QuerySet(dict(texts.items()) if texts is not None and n == baseline else {}, name=n, source=named[n][1])
                for n in order}
    return Results(config=config, versions=_versions(qrels_path, named), runs=results, comparisons=comparisons,
                   variants=variants, qrels=q, corpus=corpus, query_fields=fields, pairwise=pairwise)
