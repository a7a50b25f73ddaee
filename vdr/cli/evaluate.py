"""Commands of the evaluation stage: ``vdr metrics``, ``vdr evaluate``, ``vdr compare``, ``vdr report``,
``vdr mteb-task``; each calls the Python function of the same name and prints."""

from __future__ import annotations

import dataclasses
import gc
from enum import Enum
from pathlib import Path
from typing import Any, Callable, Optional

import typer

from . import common
from .common import (
    Bm25Analyzer, Bm25Method, Bm25Preset, Engine, Protocol,
)
from ..text import DEFAULT_MAX_QUERY_TOKENS
from ..metrics.registry import EVALUATE_CUTOFFS, METRICS_CUTOFFS
from .params import (
    BACKEND_OPTION_HELP, ENCODER_PARAMS, cutoffs_text, encoder_settings_from_options, list_metrics,
    metric_help, on_interrupt, parse_backend_options, parse_rewrites, parse_variant_runs, signature_from,
)


# ---------------------------------------------------------------------------------- evaluation options
# Options of `vdr evaluate` that map onto arguments of vdr.evaluate() (the BM25 ones onto its `bm25`
# dict); _evaluation_kwargs turns their values into those arguments. None: the API's default.
_PANEL_STATS, _PANEL_TEXT = common.PANEL_STATS, common.PANEL_TEXT
Pairs = common._choice("Pairs", "baseline", "all")
Family = common._choice("Family", "primary", "all")


_EVALUATION_OPTIONS = {
    "relevance_level": lambda: typer.Option(
        1, "--relevance-level", min=0, rich_help_panel=_PANEL_STATS,
        help="Minimum grade counted as relevant by the binary metrics (recall, precision, hit, MRR, MAP); nDCG uses the grades.",
    ),
    "exclude_no_relevant": lambda: typer.Option(
        False, "--exclude-queries-without-relevant/--keep-all-queries", rich_help_panel=_PANEL_STATS,
        help="Leave out of every mean and test the queries whose qrels hold no grade > 0 (default: keep them, scoring 0).",
    ),
    "permutations": lambda: typer.Option(
        10_000, "--permutations", min=1, rich_help_panel=_PANEL_STATS, help="Random sign assignments of the paired randomization test.",
    ),
    "bootstrap": lambda: typer.Option(
        10_000, "--bootstrap", min=1, rich_help_panel=_PANEL_STATS, help="Resamples of the bootstrap confidence interval of the mean change.",
    ),
    "concat": lambda: typer.Option(
        None, "--concat/--no-concat", rich_help_panel=common.PANEL_INPUTS, help="Add the history-concatenation baseline variant, or not (default: when the queries carry history).",
    ),
    "concat_max_tokens": lambda: typer.Option(
        DEFAULT_MAX_QUERY_TOKENS, "--concat-max-tokens", min=0,
        rich_help_panel=common.PANEL_INPUTS, help="Whitespace-token budget of the concat variant: the oldest history goes first, the question stays (0: none).",
    ),
    "vidore_revision": lambda: typer.Option(None, "--vidore-revision", rich_help_panel=common.PANEL_INPUTS, help="With --vidore: dataset revision (default: MTEB's pinned commit)."),
    "vidore_language": lambda: typer.Option(None, "--vidore-language", "--language", rich_help_panel=common.PANEL_INPUTS, help="With --vidore: keep only queries in these languages (e.g. english, or english,french; default: every language, each its own query set)."),
    # the convenience flags: aliases of backend options (vdr.retrieve.options.CLI_ALIASES), help from the option's field
    "semantic_model": lambda: _alias_option("semantic_model"),
    "rrf_k": lambda: _alias_option("rrf_k", _alias_field("rrf_k").default, min=0.0),
    "bm25_k1": lambda: _alias_option("bm25_k1", min=0.0),
    "bm25_b": lambda: _alias_option("bm25_b", min=0.0, max=1.0),
    "bm25_method": lambda: _alias_option("bm25_method"),
    "bm25_delta": lambda: _alias_option("bm25_delta"),
    "bm25_stemmer": lambda: _alias_option("bm25_stemmer"),
    "bm25_stopwords": lambda: _alias_option("bm25_stopwords"),
    "bm25_lower": lambda: _alias_option("bm25_lower", flag="--bm25-lower/--bm25-no-lower"),
    "bm25_preset": lambda: _alias_option("bm25_preset"),
    "bm25_analyzer": lambda: _alias_option("bm25_analyzer"),
}


def _alias_field(param: str):
    """The options-dataclass field a convenience flag is an alias of."""
    import dataclasses

    from ..retrieve.options import BUILTIN_OPTIONS, CLI_ALIASES

    backend, key, _ = CLI_ALIASES[param]
    return next(f for f in dataclasses.fields(BUILTIN_OPTIONS[backend]) if f.name == key)


def _alias_option(param: str, default: Any = None, *, flag: str | None = None, **extra: Any):
    """The typer option of convenience flag ``param`` (``--bm25-k1`` is ``--backend-option
    lexical.k1``): its help text and default come from the backend's options dataclass."""
    from ..retrieve.options import CLI_ALIASES

    backend, key, name = CLI_ALIASES[param]
    help_text = f"{_alias_field(param).metadata['help']} (= --backend-option {backend}.{key}=VALUE)."
    return typer.Option(default, flag or name, rich_help_panel=_PANEL_TEXT, help=help_text, **extra)


_BM25_KEYS = ("k1", "b", "method", "delta", "stemmer", "stopwords", "lower", "preset", "analyzer")


def _evaluation_kwargs(values: dict) -> dict:
    """The :data:`_EVALUATION_OPTIONS` values of ``vdr evaluate`` (``values``: the command's
    parameters by name) as keyword arguments of :func:`vdr.evaluate`: ``bm25`` holds only the BM25
    parameters given (``none`` for stemmer or stopwords means ``None``), or is ``None``."""
    bm25 = {key: values[f"bm25_{key}"] for key in _BM25_KEYS if values[f"bm25_{key}"] is not None}
    for key in ("stemmer", "stopwords"):
        if isinstance(bm25.get(key), str) and bm25[key].lower() == "none":
            bm25[key] = None
    return {
        "relevance_level": values["relevance_level"],
        "queries_without_relevant": "exclude" if values["exclude_no_relevant"] else "zero",
        "n_permutations": values["permutations"],
        "n_bootstrap": values["bootstrap"],
        "concat": values["concat"],
        "concat_max_tokens": values["concat_max_tokens"] or None,
        "vidore_revision": values["vidore_revision"],
        "vidore_language": values["vidore_language"],
        "semantic_model": values["semantic_model"],
        "rrf_k": values["rrf_k"],
        "bm25": bm25 or None,
    }


ID_HELP = ("Evaluate ids that match the qrels' only after normalisation (q1 vs q01, case, whitespace, NFC, a known prefix)"
           " as written (by default an error naming the pairs).")
_MetricsFormat = Enum("MetricsFormat", {"table": "table", "trec_eval": "trec_eval"}, type=str)


@common.command("metrics")
def metrics_command(
    qrels: Path = typer.Argument(..., help="Qrels file: TREC (qid 0 docid grade), BEIR TSV (query-id/corpus-id/score header) or JSON."),
    run: list[Path] = typer.Argument(..., help="Run file(s): TREC (qid Q0 docid rank score tag) or JSON; several runs"
                                     " are evaluated one after the other against the qrels, read once."),
    k: str = typer.Option(cutoffs_text(METRICS_CUTOFFS), "--k", rich_help_panel=common.PANEL_STATS, help="Comma-separated cutoffs for the default metric families and ties@k."),
    metric: Optional[list[str]] = typer.Option(None, "--metric", "-m", rich_help_panel=common.PANEL_STATS, help=metric_help()),
    relevance_level: int = typer.Option(1, "--relevance-level", "-l", rich_help_panel=common.PANEL_STATS, help="Minimum grade counted as relevant (binary metrics; trec_eval -l)."),
    exclude_no_relevant: bool = typer.Option(
        False, "--exclude-queries-without-relevant/--keep-all-queries",
        rich_help_panel=common.PANEL_STATS, help="Leave out queries whose qrels hold no grade > 0 (default: they count as 0).",
    ),
    complete: Optional[bool] = typer.Option(
        None, "--complete/--run-queries-only", "-c", rich_help_panel=common.PANEL_STATS,
        help="-c: average over every qrels query, a query missing from the run scoring 0 (trec_eval -c; the default of"
             " the table). --run-queries-only: only the queries of both the qrels and the run (trec_eval without -c; the"
             " default of --format trec_eval).",
    ),
    depth: Optional[int] = typer.Option(
        None, "--depth", "-M", min=1, rich_help_panel=common.PANEL_STATS,
        help="Evaluate only each query's N best pages, the rest of the run discarded (trec_eval -M N).",
    ),
    allow_unjudged: bool = typer.Option(
        False, "--allow-unjudged/--refuse-unjudged",
        rich_help_panel=common.PANEL_STATS, help="Score a run even when none of its retrieved pages has a qrels line (by default an error: an id-format mismatch).",
    ),
    allow_id_mismatch: bool = typer.Option(False, "--allow-id-mismatch/--refuse-id-mismatch", rich_help_panel=common.PANEL_STATS, help=ID_HELP),
    fmt: _MetricsFormat = typer.Option(
        "table", "--format", rich_help_panel=common.PANEL_RUN,
        help="table: vdr's table; trec_eval: trec_eval's own lines, measure<TAB>query|all<TAB>value (without -m: trec_eval's"
             " official measures; -m all_trec: all of trec_eval's).",
    ),
    each_query: bool = typer.Option(
        False, "--each-query/--no-each-query", "-Q", rich_help_panel=common.PANEL_RUN,
        help="With --format trec_eval: each query's lines before the 'all' lines (trec_eval -q; -q is --quiet).",
    ),
    json_out: Optional[Path] = typer.Option(None, "--json", rich_help_panel=common.PANEL_RUN, help="Write aggregate, per-query values and policy as JSON."),
    per_query: Optional[Path] = typer.Option(None, "--per-query", rich_help_panel=common.PANEL_RUN, help="Write per-query values as CSV."),
    list_metrics: bool = typer.Option(
        False, "--list-metrics", callback=list_metrics, is_eager=True, rich_help_panel=common.PANEL_STATS, help="List the metrics, their aliases and definitions, and exit."
    ),
) -> None:
    """Evaluate a run against qrels and print a table (trec_eval semantics; see vdr.metrics)."""
    from .. import distributed as D
    from ..errors import InputError
    from ..metrics.trec_eval import split_trec_names

    if not D.is_main():
        return
    trec = fmt == _MetricsFormat.trec_eval
    names, extras = split_trec_names(metric or ())
    if not trec and (each_query or len(names) < len(metric or ())):  # runid, relstring named
        raise InputError("--each-query, runid and relstring are trec_eval's output: give --format trec_eval"
                         " (per-query values of the table: --per-query FILE.csv)")
    if trec and not metric:
        names, extras = split_trec_names(["official"])
    only_extras = trec and bool(metric) and not names  # -m runid, -m relstring.N: only what was asked
    if complete is None:
        complete = not trec  # trec_eval averages over the queries of both files unless -c
    if len(run) > 1 and (json_out is not None or per_query is not None):
        raise InputError(f"--json and --per-query write one run's values; {len(run)} runs were given: evaluate them one"
                         " at a time to write files")
    _check_outputs({"--json": json_out, "--per-query": per_query}, (qrels, *run))
    options = dict(k=k, metric_names=["num_q"] if only_extras else (names or None), relevance_level=relevance_level,
                   queries_without_relevant="exclude" if exclude_no_relevant else "zero",
                   queries_missing_from_run="zero" if complete else "exclude", depth=depth, allow_unjudged=allow_unjudged,
                   allow_id_mismatch=allow_id_mismatch,
                   json_path=json_out, per_query_path=per_query)
    _evaluate_runs(qrels, run, options, _Printing(trec, extras, each_query, only_extras))
    for p in (json_out, per_query):
        if p is not None:
            typer.echo(f"wrote {p}", err=trec)


@dataclasses.dataclass(frozen=True)
class _Printing:
    """How ``vdr metrics`` prints: ``trec`` (trec_eval's lines), its non-numeric measures (``extras``: a
    :class:`~vdr.metrics.trec_eval.TrecExtras`), ``each_query`` (trec_eval -q) and ``only_extras`` (only
    runid / relstring were asked: no metric line is printed)."""

    trec: bool
    extras: Any
    each_query: bool
    only_extras: bool


def _evaluate_runs(qrels: Path, runs: list[Path], options: dict, printing: _Printing) -> None:
    """Evaluate each run of ``runs`` against ``qrels`` (read once) with :func:`vdr.metrics.metrics`'s keyword
    ``options`` and print each result in turn (trec_eval's lines run after run, as trec_eval called once per run;
    the table headed by the run's path when there are several).

    Raises:
        InputError: from reading the files or evaluating (naming the file)."""
    from ..io.formats import load_qrels, load_run
    from ..metrics import metrics

    if (printing.trec and options["queries_missing_from_run"] == "zero" and options["relevance_level"] != 1
            and any(n.family == "num_rel" for n in _parsed(options["metric_names"]))):
        typer.echo(f"note: num_rel's 'all' line is the sum of the queries' num_rel at -l {options['relevance_level']};"
                   " trec_eval -c prints the qrels' pages of grade > 0 there, ignoring -l", err=True)
    gc.disable()  # millions of ids and scores, no reference cycles: the cyclic collector would only rescan them
    try:
        qrels_data = load_qrels(qrels)
        for path in runs:
            run_data = load_run(path)
            res = metrics(qrels_data, run_data, **options)
            if printing.only_extras:
                res = dataclasses.replace(res, values={})
            if len(runs) > 1 and not printing.trec:
                typer.echo(f"{path}:")
            _print_metrics(res, printing.trec, (qrels_data, run_data, path), printing.extras,
                           each_query=printing.each_query, depth=options["depth"])
            del run_data, res
    finally:
        gc.enable()


def _parsed(names: list) -> list:
    """The metrics ``names`` (``-m`` values without runid/relstring) stand for; ``[]`` when none parse
    (the evaluation reports the error)."""
    from ..errors import InputError
    from ..metrics.registry import parse_metrics

    try:
        return parse_metrics(names) if names else []
    except InputError:
        return []


def _check_outputs(outputs: dict, inputs: tuple) -> None:
    """``vdr metrics``' output files are neither a folder nor one of its inputs (``--json RUN``
    would replace the run file).

    Raises:
        InputError: naming the option and the path.
    """
    from ..errors import InputError

    given = {Path(p).resolve() for p in inputs}
    for flag, path in outputs.items():
        if path is None:
            continue
        if Path(path).is_dir():
            raise InputError(f"{flag} {path} is a folder; give a file name", path=path)
        if Path(path).resolve() in given:
            raise InputError(f"{flag} {path} is an input of this command (the qrels or the run): it would be overwritten;"
                             " give another file name", path=path)


def _print_metrics(res, trec: bool, inputs: tuple, extras, *, each_query: bool, depth: int | None) -> None:
    """``vdr metrics``' output: vdr's table, or trec_eval's lines (``--format trec_eval``);
    ``inputs``: ``(qrels, run, run path)``."""
    from ..metrics.trec_eval import format_trec_eval, relstrings

    if not trec:
        typer.echo(res.table())
        return
    qrels_data, run_data, run = inputs
    shown = run_data if depth is None else run_data.top_k(depth)
    rel = relstrings(qrels_data, shown, res.query_ids, extras.relstring) if extras.relstring is not None and each_query else None
    text = format_trec_eval(res, per_query=each_query, runid=(run_data.name or run.name) if extras.runid else None,
                            relstring=rel, relstring_name=extras.relstring_name)
    if text:  # trec_eval prints nothing for -m relstring.N without -q
        typer.echo(text)


# ---------------------------------------------------------------------------------- verdicts and groups
# Options shared by `vdr evaluate`, `vdr compare` and `vdr report` (issue 27): the significance level of the
# verdicts and marks, and the query groups.
_STORY_OPTIONS = {
    "alpha": lambda: typer.Option(
        0.05, "--alpha", min=0.0, max=1.0, rich_help_panel=_PANEL_STATS,
        help="Significance level of the verdicts and of the marks in the tables: a change is significant when its Holm-adjusted p <= alpha."),
    "group_by": lambda: typer.Option(
        None, "--group-by", rich_help_panel=_PANEL_STATS,
        help="Break the comparisons down by a query field (repeatable): an extra JSON field of the queries file (type, language, ...)"
             " or a field of --groups. Per group: n, means, the change with its 95% CI and paired test, Holm over groups x variants."),
    "groups": lambda: typer.Option(
        None, "--groups", rich_help_panel=common.PANEL_INPUTS, help="Query fields for --group-by from a TSV: query-id<TAB>field<TAB>value lines."),
}


def _echo_groups(res, fields, wide: bool = False) -> None:
    """Print the table per language of a multilingual evaluation (MTEB's mean over languages), then
    the breakdown of each ``--group-by`` field, under the summary table (fitted to the terminal
    unless ``wide``)."""
    if res.languages:
        for metric in dict.fromkeys([res.primary, *(["ndcg@10"] if "ndcg@10" in res.metric_names else [])]):
            typer.echo("")
            what = "MTEB's main score of ViDoRe V3, " if metric == "ndcg@10" else ""
            typer.echo(f"{metric} by language ({what}each language its own query set):")
            typer.echo(common.table_text(res.language_table(metric), wide=wide))
    for f in fields or ():
        table = res.group_table(f)
        if not table.rows:  # no rewrite variant: nothing is compared within the groups
            continue
        typer.echo("")
        typer.echo(f"by {f}:")
        typer.echo(common.table_text(table, wide=wide))


def _echo_per_backend(res) -> None:
    """One line per per-backend variant (``--rewrites NAME@BACKEND=FILE``): which file fed which backend."""
    for variant, rec in (res.config.get("per_backend_variants") or {}).items():
        fed = ", ".join(f"{b} <- {Path(f).name if f else 'no file: no run'}" for b, f in (rec.get("fed") or {}).items())
        typer.echo(f"per-backend variant {variant}: {fed}")


def _echo_served(res, wide: bool = False) -> None:
    """Print the served systems against their exact backend (issue 36: :meth:`Results.served_table`
    with its verdict lines, then :meth:`Results.served_gains_table`) when the evaluation has any."""
    if not res.served_systems_audited():
        return
    typer.echo("")
    typer.echo("served vs exact (original queries):")
    typer.echo(common.table_text(res.served_table(), wide=wide))
    gains = res.served_gains_table()
    if gains.rows:
        typer.echo("")
        typer.echo("do the rewrites' gains survive?")
        typer.echo(common.table_text(gains, wide=wide))


def _echo_reranked(res, wide: bool = False) -> None:
    """Print whether each rewrite's gain holds before and after reranking (issue 37:
    :meth:`Results.rerank_gains_table` with its verdict lines) when some system was reranked."""
    if not res.rerank_systems_audited():
        return
    typer.echo("")
    typer.echo("reranked vs base: do the rewrites' gains hold after reranking?")
    typer.echo(common.table_text(res.rerank_gains_table(), wide=wide))


def _rerank_options(items: list[str] | None) -> dict:
    """``--rerank-option KEY=VALUE`` items -> ``{KEY: VALUE}`` converted by the field types of
    :class:`~vdr.retrieve.options.RerankOptions` (an unknown key or a bad value named)."""
    from ..errors import InputError
    from ..retrieve.options import RerankOptions, check_options

    raw: dict[str, str] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InputError(f"--rerank-option takes KEY=VALUE (e.g. batch_size=8), got {item!r}")
        raw[key.strip()] = value
    checked = check_options(RerankOptions, raw, backend="rerank", strings=True)
    return {k: getattr(checked, k) for k in raw}


# ---------------------------------------------------------------------------------- evaluate
# Every parameter of `vdr evaluate`, in --help order: (name, annotation, option factory). The command's
# signature is built from it by signature_from (typer reads inspect.signature, hence __signature__).
_EVALUATE_PARAMS: list[tuple[str, Any, Callable[[], Any]]] = [
    ("corpus_dir", Optional[Path], lambda: typer.Argument(None, help="Corpus folder from `vdr ingest` (omit with --vidore).")),
    ("queries", Optional[Path], lambda: typer.Option(
        None, "--queries", rich_help_panel=common.PANEL_INPUTS, help="Original queries (BEIR queries.jsonl; `history` optional); default CORPUS_DIR/queries.jsonl.")),
    ("qrels", Optional[Path], lambda: typer.Option(None, "--qrels", rich_help_panel=common.PANEL_INPUTS, help="Qrels (BEIR TSV, TREC or JSON); default CORPUS_DIR/qrels.tsv.")),
    ("rewrites", Optional[list[str]], lambda: typer.Option(None, "--rewrites", rich_help_panel=common.PANEL_INPUTS, help="A rewrite variant NAME=FILE (repeatable).")),
    ("backend", str, lambda: typer.Option("multimodal,lexical,semantic,hybrid", "--backend", rich_help_panel=common.PANEL_BACKENDS, help="Comma-separated backends.")),
    ("serve_as", Optional[list[str]], lambda: typer.Option(
        None, "--serve-as", rich_help_panel=common.PANEL_BACKENDS,
        help="A served system of the multimodal backend, audited against exact MaxSim (repeatable): pool:3, int8, binary,"
             " fp16, bf16, muvera, qdrant, lancedb or plaid, with key=value parameters (binary:hamming=elasticsearch,"
             " qdrant:prefetch=mean,candidates=100); NAME=SPEC names it.")),
    ("rerank", Optional[str], lambda: typer.Option(
        None, "--rerank", rich_help_panel=common.PANEL_BACKENDS,
        help="Rerank each backend's top --rerank-depth pages with this model (hub name or folder): a text cross-encoder"
             " (sentence-transformers CrossEncoder) or a multimodal reranker that reads the page image (rerankers MonoVLMRanker,"
             " MonoQwen2-VL); each reranked run is a system of its own, BASE+rerank, audited against its base.")),
    ("rerank_depth", int, lambda: typer.Option(
        100, "--rerank-depth", rich_help_panel=common.PANEL_BACKENDS, help="Pages of the base's run reranked per query (pages below are dropped).")),
    ("rerank_backends", Optional[str], lambda: typer.Option(
        None, "--rerank-backends", rich_help_panel=common.PANEL_BACKENDS,
        help="Comma-separated bases to rerank (default every backend but the served systems).")),
    ("rerank_option", Optional[list[str]], lambda: typer.Option(
        None, "--rerank-option", rich_help_panel=common.PANEL_BACKENDS,
        help="A reranker option KEY=VALUE (repeatable): kind (auto, text, multimodal), library, max_length, batch_size, dtype,"
             " processor, revision, trust_remote_code.")),
    ("model", Optional[str], lambda: typer.Option(
        None, "--model", rich_help_panel=common.PANEL_ENCODER, help="ColPali-family model (hub name or local path) for the multimodal backend.")),
    ("k", str, lambda: typer.Option(cutoffs_text(EVALUATE_CUTOFFS), "--k", rich_help_panel=common.PANEL_STATS, help="Metric cutoffs; nDCG@3 is the primary metric.")),
    ("seed", int, lambda: typer.Option(0, "--seed", rich_help_panel=common.PANEL_RUN, help="Seed of the randomization test and the bootstrap.")),
    ("out", Path, lambda: typer.Option(
        ..., "--out", "-o", rich_help_panel=common.PANEL_RUN, help="Results folder (results.json, per_query.csv, runs/, report.html, report.md).")),
    ("write_report", bool, lambda: typer.Option(
        True, "--report/--no-report", rich_help_panel=common.PANEL_RUN,
        help="Write the HTML report and its Markdown summary (report.html, report.md) beside results.json (--no-report: do not;"
             " `vdr report RESULTS_DIR` renders them later).")),
    ("vidore", Optional[str], lambda: typer.Option(
        None, "--vidore", rich_help_panel=common.PANEL_INPUTS, help="A ViDoRe dataset instead of CORPUS_DIR: a hub name (vidore/vidore_v3_hr), an MTEB task (Vidore3HrRetrieval, pinned as MTEB"
             " pins it), an MTEB benchmark (ViDoRe(v3): every public task, a row per task and their mean) or a local folder.")),
    ("store", Optional[Path], lambda: typer.Option(None, "--store", rich_help_panel=common.PANEL_ENCODER, help="Embedding store folder (default CORPUS_DIR/embeddings).")),
    *ENCODER_PARAMS,
    ("depth", int, lambda: typer.Option(100, "--depth", rich_help_panel=common.PANEL_RUN, help="Pages retrieved per query.")),
    ("macro_average", bool, lambda: typer.Option(
        False, "--macro-average/--no-macro-average", rich_help_panel=common.PANEL_STATS, help="Add a labelled macro-average row across backends.")),
    ("quiet", bool, common.OPTIONS["quiet"]),
    ("wide", bool, common.wide_option),
    ("engine", Engine, lambda: typer.Option(
        Engine.vdr, "--engine",
        rich_help_panel=common.PANEL_BACKENDS, help="Multimodal backend engine: vdr (store + MaxSim) or mteb (mteb.evaluate; TaskResult JSON in RESULTS_DIR/mteb/).")),
    ("cache_dir", Optional[Path], lambda: typer.Option(
        None, "--cache-dir", rich_help_panel=common.PANEL_BACKENDS, help="Index cache of the text backends (default CORPUS_DIR/.vdr-cache).")),
    ("use_cache", bool, lambda: typer.Option(
        True, "--cache/--no-cache", rich_help_panel=common.PANEL_BACKENDS, help="--no-cache: build the BM25 index and semantic page vectors afresh, keep nothing.")),
    ("profile", bool, lambda: typer.Option(
        False, "--profile/--no-profile", rich_help_panel=common.PANEL_RUN, help="Print where the time went (RESULTS_DIR/timing.json, per stage).")),
    *((name, ann, _EVALUATION_OPTIONS[name]) for name, ann in (
        ("relevance_level", int), ("exclude_no_relevant", bool), ("permutations", int), ("bootstrap", int),
        ("concat", Optional[bool]), ("concat_max_tokens", int), ("vidore_revision", Optional[str]),
        ("vidore_language", Optional[str]), ("semantic_model", Optional[str]), ("rrf_k", float),
        ("bm25_k1", Optional[float]), ("bm25_b", Optional[float]), ("bm25_method", Optional[Bm25Method]),
        ("bm25_delta", Optional[float]), ("bm25_stemmer", Optional[str]), ("bm25_stopwords", Optional[str]),
        ("bm25_lower", Optional[bool]), ("bm25_preset", Optional[Bm25Preset]), ("bm25_analyzer", Optional[Bm25Analyzer]),
    )),
    ("backend_option", Optional[list[str]], lambda: typer.Option(None, "--backend-option", rich_help_panel=common.PANEL_BACKENDS, help=BACKEND_OPTION_HELP)),
    ("run", Optional[list[str]], lambda: typer.Option(
        None, "--run", rich_help_panel=common.PANEL_INPUTS, help="A run of another system (TREC or JSON; repeatable), evaluated as backend NAME: NAME=FILE (its run of the original queries),"
        " NAME:VARIANT=FILE (its run of a rewrite variant: one per variant), or NAME:*=FILE (one file reused for every variant,"
        " marked in the table).")),
    ("primary_metric", Optional[str], lambda: typer.Option(
        None, "--primary-metric",
        rich_help_panel=common.PANEL_STATS, help="Table's first column and the metric of the change columns (default ndcg@3; e.g. nDCG@5, nDCG@10, RR@3).")),
    ("overwrite", bool, lambda: typer.Option(
        False, "--overwrite/--no-overwrite",
        rich_help_panel=common.PANEL_RUN, help="Replace another experiment's results in --out, or results of this one that the run"
        " would drop (backend x variant runs, --group-by breakdowns), and write beside files vdr did not write (never deleted);"
        " all are refused otherwise.")),
    ("protocol", Optional[Protocol], lambda: typer.Option(
        None, "--protocol",
        rich_help_panel=common.PANEL_STATS, help="convsearch: MRR@3, NDCG@3, R@10, R@100 and, labelled, ConvSearch-R1's paper-compatible rr_full.")),
    ("group_by", Optional[list[str]], _STORY_OPTIONS["group_by"]),
    ("groups", Optional[Path], _STORY_OPTIONS["groups"]),
    ("alpha", float, _STORY_OPTIONS["alpha"]),
    ("allow_id_mismatch", bool, lambda: typer.Option(
        False, "--allow-id-mismatch/--refuse-id-mismatch", rich_help_panel=common.PANEL_INPUTS,
        help="Evaluate query ids (queries, qrels, --run files) that match only after normalisation (q1 vs q01, case, whitespace,"
             " NFC, a known prefix) as written (by default an error naming the pairs).")),
    ("drop_missing_judged", bool, lambda: typer.Option(
        False, "--drop-missing-judged/--keep-missing-judged",
        rich_help_panel=common.PANEL_INPUTS, help="Passage corpora: drop judgments of passages absent from the collection or empty (default: kept in the"
             " denominators, as trec_eval, and reported).")),
]


@common.command("evaluate")
@on_interrupt
@signature_from(_EVALUATE_PARAMS)
def evaluate_command(**o: Any) -> None:
    """Evaluate original vs rewritten queries per backend (see vdr.evaluate)."""
    import json

    from ..experiment.evaluation import evaluate, stage_lines

    out = o["out"]
    api = _evaluation_kwargs(o)  # the _EVALUATION_OPTIONS as evaluate() arguments
    rw = parse_rewrites(o["rewrites"])
    backend_options = parse_backend_options(o["backend_option"], o["backend"])
    settings = encoder_settings_from_options(o["model"], o)
    kw = dict(
        queries=o["queries"],
        qrels=o["qrels"],
        rewrites=rw,
        out=out,
        backends=o["backend"],
        serve_as=tuple(o["serve_as"] or ()),
        rerank=o["rerank"],
        rerank_depth=o["rerank_depth"],
        rerank_backends=o["rerank_backends"],
        rerank_options=_rerank_options(o["rerank_option"]) or None,
        encoder=settings,
        k=o["k"],
        seed=o["seed"],
        vidore=o["vidore"],
        store=o["store"],
        device=o["device"],
        depth=o["depth"],
        macro_average=o["macro_average"],
        progress=not o["quiet"],
        engine=o["engine"],
        cache_dir=o["cache_dir"] if o["use_cache"] else False,
        runs=parse_variant_runs(o["run"]),
        primary_metric=o["primary_metric"],
        overwrite=o["overwrite"],
        drop_missing_judged=o["drop_missing_judged"],
        allow_id_mismatch=o["allow_id_mismatch"],
        protocol=o["protocol"],
        backend_options=backend_options or None,
        group_by=tuple(o["group_by"] or ()),
        groups=o["groups"],
        alpha=o["alpha"],
        report=o["write_report"],
        **api,
    )
    if _run_benchmark(o, kw):
        return
    res = evaluate(o["corpus_dir"], **kw)
    if res is None:  # torchrun: not rank 0
        return
    typer.echo(common.table_text(res.summary_table(), wide=o["wide"]))
    _echo_groups(res, res.group_fields, o["wide"])
    _echo_served(res, o["wide"])
    _echo_reranked(res, o["wide"])
    _echo_per_backend(res)
    main_metric = res.backend_reports.get("multimodal", {}).get("main_metric")
    if main_metric:  # --engine mteb: MTEB's own headline number
        values = ", ".join(f"{v} {x:.4f}" for v, x in main_metric["values"].items())
        typer.echo(f"MTEB main metric {main_metric['name']} ({main_metric['source']}): {values}")
    if o["profile"]:
        typer.echo("time per stage:")
        for line in stage_lines(json.loads((out / "timing.json").read_text(encoding="utf-8"))):
            typer.echo("  " + line)
    typer.echo(f"results: {out / 'results.json'}")
    if (out / "report.html").is_file():  # written by this run (also a report the folder held, rewritten; issue 34.2)
        typer.echo(f"report: {out / 'report.html'}")
        typer.echo(f"summary: {out / 'report.md'}")


def _run_benchmark(o: dict, kw: dict) -> bool:
    """``--vidore 'ViDoRe(v3)'`` (an MTEB benchmark): every public task evaluated, a row per task and
    their mean printed (:func:`vdr.experiment.benchmark.evaluate_benchmark`); ``False`` otherwise."""
    from ..errors import InputError
    from ..ingest.vidore import VIDORE_BENCHMARKS

    if o["vidore"] not in VIDORE_BENCHMARKS:
        return False
    from ..experiment.benchmark import BENCHMARK_FILE, evaluate_benchmark

    if o["corpus_dir"] is not None:
        raise InputError("give either a corpus folder or --vidore, not both")
    rest = {k: v for k, v in kw.items() if k not in ("vidore", "vidore_revision")}
    bench = evaluate_benchmark(o["vidore"], **rest)
    typer.echo(common.table_text(bench.table(), wide=o["wide"]))
    reports = ", with its report.html" if kw.get("report") else ""
    typer.echo(f"results: {Path(o['out']) / BENCHMARK_FILE} (each task's folder beside it{reports})")
    return True


@common.command("compare")
@on_interrupt
def compare_command(
    qrels: Path = typer.Argument(..., help="Qrels file: TREC (qid 0 docid grade), BEIR TSV or JSON."),
    runs: list[str] = typer.Argument(..., help="Run files (TREC or JSON), each FILE (named by its file name without the extension: runs/bm25.trec -> bm25) or NAME=FILE; two or more."),
    baseline: Optional[str] = typer.Option(None, "--baseline", rich_help_panel=common.PANEL_INPUTS, help="The run the others are compared with (default: the first)."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", rich_help_panel=common.PANEL_RUN, help="Results folder to write (results.json, per_query.csv, runs/, report.html)."),
    overwrite: bool = typer.Option(False, "--overwrite/--no-overwrite", rich_help_panel=common.PANEL_RUN, help="Replace another experiment's results in --out; write beside files vdr did not write (never deleted)."),
    primary_metric: Optional[str] = typer.Option(
        None, "--primary-metric", rich_help_panel=common.PANEL_STATS, help="Table's first column and the metric of the change columns (default ndcg@3, or the first --metric)."),
    metric: Optional[list[str]] = typer.Option(None, "--metric", "--metrics", "-m", rich_help_panel=common.PANEL_STATS, help=metric_help()),
    k: str = typer.Option(cutoffs_text(EVALUATE_CUTOFFS), "--k", rich_help_panel=common.PANEL_STATS, help="Cutoffs of the default metrics (without --metric)."),
    relevance_level: int = typer.Option(1, "--relevance-level", rich_help_panel=common.PANEL_STATS, help="Minimum grade counted as relevant (binary metrics)."),
    exclude_no_relevant: bool = typer.Option(
        False, "--exclude-queries-without-relevant/--keep-all-queries", rich_help_panel=common.PANEL_STATS, help="Leave out queries whose qrels hold no grade > 0 (default: they count as 0)."),
    allow_unjudged: bool = typer.Option(
        False, "--allow-unjudged/--refuse-unjudged", rich_help_panel=common.PANEL_STATS, help="Score a run none of whose retrieved pages has a qrels line (by default an error: an id mismatch)."),
    allow_id_mismatch: bool = typer.Option(False, "--allow-id-mismatch/--refuse-id-mismatch", rich_help_panel=common.PANEL_STATS, help=ID_HELP),
    seed: int = typer.Option(0, "--seed", rich_help_panel=common.PANEL_RUN, help="Seed of the randomization test and the bootstrap."),
    n_permutations: int = typer.Option(10_000, "--permutations", rich_help_panel=common.PANEL_STATS, help="Random sign assignments of the randomization test (exact for <= 16 queries)."),
    n_bootstrap: int = typer.Option(10_000, "--bootstrap", rich_help_panel=common.PANEL_STATS, help="Bootstrap resamples of the 95% CI."),
    write_report: bool = typer.Option(True, "--report/--no-report", rich_help_panel=common.PANEL_RUN, help="With --out, write report.html / report.md (--no-report: do not)."),
    pairs: Pairs = typer.Option(
        Pairs.baseline, "--pairs", rich_help_panel=common.PANEL_STATS,
        help="baseline: each run against the baseline; all: also every pair of runs (ranx's matrix: mean change, paired test, Holm over all pairs, W/T/L)."),
    family: Family = typer.Option(
        Family.primary, "--family", rich_help_panel=common.PANEL_STATS,
        help="Holm family. primary: the comparisons made (each run vs the baseline; with --pairs all every pair), one family per metric, so the verdicts' primary metric is corrected over those tests only; all: one family over the comparisons x every compared metric."),
    alpha: float = _STORY_OPTIONS["alpha"](),
    group_by: Optional[list[str]] = _STORY_OPTIONS["group_by"](),
    groups: Optional[Path] = _STORY_OPTIONS["groups"](),
    queries: Optional[Path] = typer.Option(
        None, "--queries", rich_help_panel=common.PANEL_INPUTS, help="The queries (BEIR queries.jsonl or TSV topics): their texts in the report, their fields for --group-by."),
    corpus: Optional[Path] = typer.Option(
        None, "--corpus", rich_help_panel=common.PANEL_INPUTS, help="The corpus folder the runs searched (vdr ingest): its pages in the report."),
    wide: bool = common.wide_option(),
) -> None:
    """Compare runs of several systems with a baseline run (paired randomization test, t-test, bootstrap CI,
    Holm, W/T/L), ranx-style; --pairs all compares every pair; see vdr.compare."""
    from ..experiment.compare_runs import compare_runs, parse_run_items

    res = compare_runs(
        qrels, parse_run_items(runs), baseline=baseline, metrics=metric or None, primary_metric=primary_metric, k=k,
        relevance_level=relevance_level, queries_without_relevant="exclude" if exclude_no_relevant else "zero",
        allow_unjudged=allow_unjudged, allow_id_mismatch=allow_id_mismatch, n_permutations=n_permutations, n_bootstrap=n_bootstrap, seed=seed, out=out,
        overwrite=overwrite, report=write_report, pairs=str(getattr(pairs, "value", pairs)), family=str(getattr(family, "value", family)), alpha=alpha,
        group_by=tuple(group_by or ()), groups=groups, queries=queries, corpus_dir=corpus,
    )
    typer.echo(common.table_text(res.summary_table(), wide=wide))
    if res.pairwise:
        typer.echo("")
        typer.echo("every pair (ranx's table):")
        typer.echo(common.table_text(res.pairs_table(), wide=wide))
        typer.echo("")
        typer.echo(common.table_text(res.pairwise_table(), wide=wide))
    _echo_groups(res, group_by, wide)
    if out is not None:
        typer.echo(f"results: {out / 'results.json'}" + ("" if not write_report else f"; report: {out / 'report.html'}"))


@common.command("report")
def report_command(
    results_dir: Path = typer.Argument(..., help="Results folder written by `vdr evaluate --out`."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="HTML file to write (default RESULTS_DIR/report.html); the Markdown summary goes beside it (.md)."),
    top: int = typer.Option(5, "--top", help="Largest regressions and gains shown per backend."),
    primary_metric: Optional[str] = typer.Option(
        None, "--primary-metric", help="Metric of the change columns, changes and cases (default: the evaluation's, ndcg@3; e.g. ndcg@5, ndcg@10, mrr@3)."
    ),
    latex: Optional[Path] = typer.Option(None, "--latex", help="Also write the summary table as a LaTeX table (booktabs) to this file."),
    alpha: Optional[float] = typer.Option(
        None, "--alpha", min=0.0, max=1.0, help="Significance level of the verdicts and marks (default: the evaluation's, 0.05)."),
    group_by: Optional[list[str]] = typer.Option(
        None, "--group-by", help="Break the comparisons down by a query field (repeatable; default: the evaluation's --group-by)."),
    groups: Optional[Path] = _STORY_OPTIONS["groups"](),
    queries: Optional[Path] = typer.Option(
        None, "--queries", help="A queries file: its texts shown (vdr compare results, or a moved file), its fields for --group-by."),
    corpus: Optional[Path] = typer.Option(
        None, "--corpus", help="The corpus folder: its pages shown (vdr compare results, or a moved corpus)."),
) -> None:
    """Write a self-contained HTML report and a Markdown summary of a results folder (see vdr.report)."""
    from ..report.render import report

    paths = report(results_dir, out, top=top, primary_metric=primary_metric, latex=latex, alpha=alpha, group_by=tuple(group_by or ()) or None,
                   groups=groups, queries=queries, corpus=corpus)
    for w in paths.warnings:
        typer.echo(f"warning: {w}", err=True)
    for p in (paths.html, paths.markdown, paths.latex):
        if p is not None:
            typer.echo(f"wrote {p}")
    if paths.pages is not None:
        typer.echo(f"wrote {paths.pages}/ (the page images a click on a thumbnail opens full size)")


@common.command("mteb-task")
def mteb_task_command(
    corpus_dir: Path = typer.Argument(..., help="Corpus folder (pages.jsonl + images/), as written by `vdr ingest`."),
    name: str = typer.Option(..., "--name", help="MTEB task name of the originals; a rewrite variant V becomes task NAME-V."),
    queries: Optional[Path] = typer.Option(None, "--queries", help="Original queries (BEIR queries.jsonl); default CORPUS_DIR/queries.jsonl."),
    qrels: Optional[Path] = typer.Option(None, "--qrels", help="Qrels (BEIR TSV, TREC or JSON); default CORPUS_DIR/qrels.tsv."),
    rewrites: Optional[list[str]] = typer.Option(None, "--rewrites", help="A rewrite variant NAME=FILE (repeatable); each becomes its own task."),
    main_score: str = typer.Option("ndcg_at_3", "--main-score", help="MTEB main score key (ndcg_at_3, ndcg_at_5, mrr_at_10, recall_at_5 ...)."),
    language: Optional[list[str]] = typer.Option(None, "--language", help="Task language(s) as ISO 639-3 + script (default eng-Latn; repeatable)."),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="Write the module here (default: print it)."),
) -> None:
    """Write a Python module that registers the corpus (and each rewrite variant) as MTEB retrieval tasks."""
    from ..integrations.mteb import write_task_module

    rw = parse_rewrites(rewrites)
    src = write_task_module(corpus_dir, name=name, queries=queries, qrels=qrels, rewrites=rw, main_score=main_score,
                            languages=language or ["eng-Latn"], out=out)
    if out is None:
        typer.echo(src, nl=False)
    else:
        typer.echo(f"wrote {out}: import it to register the MTEB task(s)")
