"""The results artifact: what :func:`vdr.evaluate` returns and writes, and what reports, the judge
and notebooks read back (:meth:`Results.load`).

A results folder holds::

    RESULTS_DIR/results.json     schema_version, config, versions, variants (query texts), runs
                                 (aggregate + per query), comparisons
    RESULTS_DIR/per_query.csv    tidy: backend, variant, query_id, metric, value (one row each)
    RESULTS_DIR/runs/<backend>.<variant>.trec   one TREC run per backend x variant

Every file is written atomically (:mod:`vdr.io.atomic`); ``results.json`` holds no timestamps or
timings, so two evaluations with the same inputs write byte-identical files, and
``Results.load(d).save(d2)`` rewrites them byte for byte.

The summary table (rows backend x variant, the table metrics, the change of the primary metric
with its tests) is computed once into a :class:`Table` and rendered as plain text
(:meth:`Results.table`, what ``vdr evaluate`` prints), Markdown, LaTeX, HTML or a ``rich`` table.

Schema versions: ``2`` (this one) stores the evaluated query texts in ``variants`` and writes
``per_query.csv`` in long form; ``1`` (no ``schema_version`` key, vdr 0.1) is still read (query
texts then come from the query files named in its config, with a warning); anything else is
refused with an :class:`~vdr.errors.InputError` naming the file and both versions.
"""

from __future__ import annotations

import csv
import dataclasses
import html
import io
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .stats import Comparison, compare_variants, describe_test
from .corpus import Corpus, PassageCorpus, load_corpus
from .errors import InputError, VdrError
from .io.atomic import atomic_write
from .io.formats import load_qrels, load_queries, load_run, save_run
from .metrics import MetricsResult
from .metrics.registry import Metric, metric_label, parse_metric
from .types import ORIGINAL, Qrels, Query, QuerySet, Run, duplicate_texts

__all__ = ["Results", "RunResult", "Case", "Table", "SCHEMA_VERSION", "RESULTS_FILE", "PER_QUERY_FILE", "fmt_p", "json_safe"]

SCHEMA_VERSION = 2
"""Version of the ``results.json`` layout this vdr writes (``schema_version``)."""
READABLE_SCHEMAS = (1, 2)
RESULTS_FILE = "results.json"
PER_QUERY_FILE = "per_query.csv"
PER_QUERY_COLUMNS = ("backend", "variant", "query_id", "metric", "value")
CONCAT = "concat"


# --------------------------------------------------------------------------------------------
# the table model: computed once, rendered four ways


def fmt_p(p: float | None) -> str:
    """A p-value as the summary table prints it: 4 decimals, ``1.2e-05`` below 1e-4, ``n/a`` when
    undefined (``None`` or NaN, e.g. the t-test on identical values)."""
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return "n/a"
    return f"{p:.4f}" if p >= 1e-4 else f"{p:.1e}"


def fmt4(x: float | None) -> str | None:
    """A mean as the tables print it (4 decimals); ``None`` (a missing cell) for ``None``; ``n/a`` for NaN."""
    if x is None:
        return None
    return "n/a" if isinstance(x, float) and math.isnan(x) else f"{x:.4f}"


def html_escape(text: object) -> str:
    """HTML-escape ``text`` (quotes too). ``://`` is written ``&#58;//`` so that an HTML file holds no
    literal URL even when a query contains one (it still displays as typed)."""
    return html.escape(str(text), quote=True).replace("://", "&#58;//")


def md_escape(text: object) -> str:
    """Text for a Markdown table cell: HTML-escaped (Markdown renders raw HTML), pipes and
    backslashes escaped, line breaks as spaces."""
    t = html.escape(str(text), quote=False)
    return t.replace("\\", "\\\\").replace("|", "\\|").replace("\r", " ").replace("\n", " ")


_LATEX = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{", "}": r"\}",
          "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "<": r"\textless{}", ">": r"\textgreater{}"}


def latex_escape(text: object) -> str:
    """Text for LaTeX: the ten special characters and ``<``/``>`` escaped, line breaks as spaces."""
    return "".join(_LATEX.get(c, c) for c in str(text).replace("\r", " ").replace("\n", " "))


@dataclass(frozen=True)
class Table:
    """A table whose cells are computed once and rendered as text, Markdown, LaTeX, HTML or rich.

    Attributes:
        columns: header cells.
        rows: one tuple of formatted cells per row (``None`` = a missing value: blank in text,
            ``—`` in Markdown and HTML, ``---`` in LaTeX).
        notes: lines shown under the table (legend, skipped backends).
        row_classes: an HTML class per row (``"original"`` for the originals' rows), or empty.
        left: number of leading columns aligned left (the others are numbers, right-aligned).
    """

    columns: tuple[str, ...]
    rows: tuple[tuple[str | None, ...], ...]
    notes: tuple[str, ...] = ()
    row_classes: tuple[str, ...] = ()
    left: int = 2

    def _cells(self, missing: str) -> list[list[str]]:
        return [[missing if c is None else c for c in r] for r in self.rows]

    def to_text(self) -> str:
        """Fixed-width plain text: columns padded with two spaces between them, then the notes."""
        rows = self._cells("")
        widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(self.columns)]
        lines = ["  ".join(h.ljust(w) for h, w in zip(self.columns, widths))]
        lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
        return "\n".join([*lines, *self.notes])

    def to_markdown(self, notes: bool = True) -> str:
        """A GitHub-flavoured Markdown table (cells escaped), then the notes as paragraphs."""
        lines = ["| " + " | ".join(md_escape(h) for h in self.columns) + " |", "|" + "---|" * len(self.columns)]
        lines += ["| " + " | ".join(md_escape(c) for c in r) + " |" for r in self._cells("—")]
        if notes and self.notes:
            lines += ["", *(md_escape(n) + "  " for n in self.notes)]
        return "\n".join(lines)

    def to_latex(self, caption: str | None = None, label: str = "tab:vdr-summary") -> str:
        """A ``table`` float with a booktabs ``tabular`` (``\\usepackage{booktabs}``); the notes (or
        ``caption``) become the caption."""
        spec = "l" * self.left + "r" * (len(self.columns) - self.left)
        body = [" & ".join(latex_escape(c) for c in r) + r" \\" for r in self._cells("---")]
        cap = caption if caption is not None else " ".join(self.notes)
        return "\n".join([
            r"\begin{table}[t]", r"\centering", r"\small", rf"\begin{{tabular}}{{{spec}}}", r"\toprule",
            " & ".join(latex_escape(h) for h in self.columns) + r" \\", r"\midrule", *body, r"\bottomrule", r"\end{tabular}",
            *([rf"\caption{{{latex_escape(cap)}}}"] if cap else []), rf"\label{{{label}}}", r"\end{table}", "",
        ])

    def to_html(self, css_class: str = "summary", notes: bool = True) -> str:
        """An HTML ``<table>`` (class ``css_class`` unless empty; cells escaped), then the notes as
        ``<p class="note">``."""
        attr = f' class="{html_escape(css_class)}"' if css_class else ""
        out = [f"<table{attr}><thead><tr>" + "".join(f"<th>{html_escape(h)}</th>" for h in self.columns)
               + "</tr></thead><tbody>"]
        for i, r in enumerate(self._cells("—")):
            cls = self.row_classes[i] if i < len(self.row_classes) else ""
            out.append((f'<tr class="{html_escape(cls)}">' if cls else "<tr>") + "".join(f"<td>{html_escape(c)}</td>" for c in r) + "</tr>")
        out.append("</tbody></table>")
        if notes:
            out += [f'<p class="note">{html_escape(n)}</p>' for n in self.notes]
        return "".join(out)

    def to_rich(self):
        """A :class:`rich.table.Table` (for ``rich.print``/consoles), notes as its caption."""
        from rich.table import Table as RichTable

        t = RichTable(caption="\n".join(self.notes) or None, caption_justify="left")
        for i, h in enumerate(self.columns):
            t.add_column(h, justify="left" if i < self.left else "right", no_wrap=True)
        for r in self._cells(""):
            t.add_row(*r)
        return t


# --------------------------------------------------------------------------------------------
# records


@dataclass(frozen=True, eq=False)
class RunResult:
    """One backend x variant: its run file, its metrics and (when in memory) its ranking.

    Attributes:
        backend: ``"multimodal"``, ``"lexical"``, ``"semantic"``, ``"hybrid"`` or ``"macro"``.
        variant: ``"original"``, ``"concat"`` or a rewrite variant's name.
        run_file: path of the TREC run, relative to the results folder (``None`` for ``macro``).
        metrics: per-query values and their means (:class:`~vdr.metrics.MetricsResult`).
        ranking: the :class:`~vdr.types.Run` itself when it is in memory (``evaluate``), else
            ``None`` (read on demand from ``run_file`` by :meth:`Results.ranking`).

    Records compare by identity (their metrics hold arrays).
    """

    backend: str
    variant: str
    run_file: str | None
    metrics: MetricsResult = field(repr=False)
    ranking: Run | None = field(default=None, repr=False)


@dataclass(frozen=True)
class Case:
    """One query whose metric changed under a rewrite on one backend (see :meth:`Results.largest_changes`).

    Attributes:
        backend, variant, query_id: where.
        original, rewritten: the metric's per-query values (in [0, 1]).
        delta: ``rewritten - original``.
    """

    backend: str
    variant: str
    query_id: str
    original: float
    rewritten: float
    delta: float


def json_safe(obj):
    """``obj`` as strict-JSON types: NaN/inf -> ``None``, tuples -> lists, dataclasses -> dicts, paths
    and library objects (dtypes, devices) -> ``str``; used for every JSON document vdr writes."""
    if isinstance(obj, float):
        return None if math.isnan(obj) or math.isinf(obj) else obj
    if isinstance(obj, dict):
        return {str(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    if isinstance(obj, Path):
        return str(obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return json_safe(dataclasses.asdict(obj))
    if obj is None or isinstance(obj, (str, int, bool)):
        return obj
    return str(obj)  # dtypes, devices and other library objects: their readable name


def _length_stats(qs: QuerySet) -> dict:
    chars = [len(q.text) for q in qs.values()]
    toks = [len(q.text.split()) for q in qs.values()]

    def stats(xs: list[int]) -> dict:
        xs = sorted(xs)
        n = len(xs)
        return {"mean": sum(xs) / n, "median": (xs[(n - 1) // 2] + xs[n // 2]) / 2, "min": xs[0], "max": xs[-1]} if n else {}

    return {"num_queries": len(qs), "chars": stats(chars), "whitespace_tokens": stats(toks), "source": qs.source,
            "duplicate_texts": duplicate_texts(qs)}


def _nan_to_none(x):
    return None if isinstance(x, float) and math.isnan(x) else x


# --------------------------------------------------------------------------------------------
# the artifact


@dataclass(eq=False, repr=False)
class Results:
    """An evaluation's results: returned by :func:`vdr.evaluate`, written by :meth:`save`, read
    back by :meth:`load`.

    Attributes:
        config: every option of the evaluation (JSON-ready; ``table_metrics`` first is the primary).
        versions: library, model, dataset and corpus versions.
        runs: one :class:`RunResult` per backend x variant, backend-major.
        comparisons: ``[(backend, Comparison)]``: each rewrite variant against the originals on the
            same backend, per compared metric (Holm over the variants x metrics of a backend).
        skipped: backends that did not run, with the reason.
        variants: the query sets evaluated, ``{name: QuerySet}``, ``"original"`` first.
        backend_reports: per-backend index/search reports (JSON-ready).
        root: the results folder (``None`` before :meth:`save`).
        qrels: the qrels, or ``None`` when they could not be read back.
        corpus: the page corpus (page images), or ``None`` when it could not be read back.
        warnings: what :meth:`load` could not read (one line each).
    """

    config: dict
    versions: dict
    runs: list[RunResult]
    comparisons: list[tuple[str, Comparison]]
    skipped: dict[str, str] = field(default_factory=dict)
    variants: dict[str, QuerySet] = field(default_factory=dict)
    backend_reports: dict = field(default_factory=dict)
    root: Path | None = None
    qrels: Qrels | None = None
    corpus: Corpus | PassageCorpus | None = None
    warnings: list[str] = field(default_factory=list)
    _rankings: dict = field(default_factory=dict, init=False, repr=False, compare=False)
    _extra: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def __repr__(self) -> str:
        n_q = len(self.runs[0].metrics.query_ids) if self.runs else 0
        return (f"Results({len(self.runs)} runs; backends {', '.join(self.backends)}; variants {', '.join(self.variants)};"
                f" {n_q} queries; root {self.root})")

    # ---------------------------------------------------------------- names

    @property
    def table_metrics(self) -> list[str]:
        """The summary table's metric columns (``ndcg@3, mrr@3, recall@5, recall@10, hole@3`` by default)."""
        tm = self.config.get("table_metrics")
        return list(tm) if tm else [m for m in self.runs[0].metrics.values if not m.startswith("judged@")][:5]

    @property
    def primary(self) -> str:
        """The evaluation's primary metric (``"ndcg@3"`` by default): first of :attr:`table_metrics`."""
        return self.table_metrics[0]

    @property
    def metric_names(self) -> list[str]:
        """Every metric evaluated, in order."""
        return list(self.runs[0].metrics.values)

    @property
    def backends(self) -> list[str]:
        """Backends with runs, in order (``"macro"`` included when present)."""
        return list(dict.fromkeys(r.backend for r in self.runs))

    @property
    def baseline(self) -> str:
        """The variant the others are compared with: ``"original"``; for ``vdr compare`` results the
        baseline run's name (``config.baseline``)."""
        return str(self.config.get("baseline") or ORIGINAL)

    @property
    def is_run_comparison(self) -> bool:
        """Whether these are ``vdr compare`` results (runs of systems against a baseline run; one
        pseudo-backend ``runs``, one variant per run)."""
        return self.config.get("command") == "compare"

    @property
    def rewrite_variants(self) -> list[str]:
        """Every variant except the baseline (``"original"``; ``concat`` included), in order."""
        return [v for v in self.variants if v != self.baseline]

    @property
    def query_ids(self) -> list[str]:
        """The evaluated query set (the qrels' queries), in order."""
        return list(self.runs[0].metrics.query_ids)

    @property
    def relevance_level(self) -> int:
        """Minimum grade counted as relevant (``config.relevance_level``, default 1)."""
        return int(self.config.get("relevance_level", 1))

    def _where(self) -> str:
        return str(self.root / RESULTS_FILE) if self.root is not None else "these results"

    def check_metric(self, metric: str | Metric) -> str:
        """The canonical name of ``metric`` (any registry spelling: ``nDCG@5``, ``ndcg_at_5``, a
        :class:`~vdr.metrics.Metric`) when it was evaluated.

        Raises:
            InputError: it was not (the message lists the evaluated metrics).
        """
        values = self.runs[0].metrics.values
        if metric not in values:
            try:
                metric = str(parse_metric(metric))
            except InputError:
                pass
        if metric not in values:
            raise InputError(f"metric {str(metric)!r} was not evaluated in {self._where()}; evaluated: {', '.join(self.metric_names)}")
        return metric

    # ---------------------------------------------------------------- values

    def run(self, backend: str, variant: str) -> RunResult:
        """The :class:`RunResult` of ``backend`` x ``variant``.

        Raises:
            KeyError: no such run.
        """
        for r in self.runs:
            if r.backend == backend and r.variant == variant:
                return r
        raise KeyError(f"no run for backend {backend!r}, variant {variant!r} in {self._where()}")

    def has_run(self, backend: str, variant: str) -> bool:
        """Whether ``backend`` x ``variant`` was evaluated."""
        return any(r.backend == backend and r.variant == variant for r in self.runs)

    def aggregate(self, backend: str, variant: str) -> dict[str, float]:
        """Mean of every metric over the query set, ``{metric: value}``. Raises KeyError: no such run."""
        return self.run(backend, variant).metrics.aggregate

    def per_query(self, backend: str, variant: str) -> dict[str, dict[str, float]]:
        """``{query id: {metric: value}}`` (values in [0, 1]). Raises KeyError: no such run."""
        return self.run(backend, variant).metrics.per_query

    def values(self, backend: str, variant: str, metric: str) -> np.ndarray:
        """Per-query values of ``metric``: float64, shape ``(len(query_ids),)``, aligned with
        :attr:`query_ids` (NaN where undefined).

        Raises:
            KeyError: no such run or metric.
        """
        vals = self.run(backend, variant).metrics.values
        if metric not in vals:
            raise KeyError(f"metric {metric!r} was not evaluated (have: {', '.join(vals)})")
        return np.array(vals[metric], dtype=np.float64)

    def deltas(self, backend: str, variant: str, metric: str | None = None) -> dict[str, float]:
        """Per-query change ``rewritten - original`` of ``metric`` (default primary) on ``backend``:
        ``{query id: delta}`` in :attr:`query_ids` order, each in [-1, 1]. Raises KeyError."""
        metric = metric or self.primary
        d = self.values(backend, variant, metric) - self.values(backend, self.baseline, metric)
        return {q: float(x) for q, x in zip(self.query_ids, d)}

    def comparison(self, backend: str, variant: str, metric: str | None = None) -> Comparison | None:
        """``variant`` against the originals on ``backend`` for ``metric`` (default primary);
        ``None`` for the originals themselves or a backend without the variant. A metric that
        :func:`vdr.evaluate` did not compare is compared here (same seed and sizes; Holm over the
        variants of the backend for that metric).

        Raises:
            InputError: ``metric`` was not evaluated.
        """
        metric = metric or self.primary
        if variant == self.baseline:
            return None
        for b, c in self.comparisons if metric in self.compared_metrics else self._computed(metric):
            if b == backend and c.variant == variant and c.metric == metric:
                return c
        return None

    @property
    def compared_metrics(self) -> list[str]:
        """Metrics with stored comparisons, in order."""
        return list(dict.fromkeys(c.metric for _, c in self.comparisons))

    def _computed(self, metric: str) -> list[tuple[str, Comparison]]:
        if metric not in self._extra:
            self.check_metric(metric)
            by_backend = {b: {r.variant: r.metrics for r in self.runs if r.backend == b} for b in self.backends}
            by_backend = {b: v for b, v in by_backend.items() if self.baseline in v}
            cfg = self.config
            self._extra[metric] = compare_variants(by_backend, [metric], baseline=self.baseline,
                                                   n_permutations=int(cfg.get("n_permutations", 10_000)),
                                                   n_bootstrap=int(cfg.get("n_bootstrap", 10_000)), seed=int(cfg.get("seed", 0)))
        return self._extra[metric]

    def rows(self, primary: str | None = None) -> list[dict]:
        """The summary table as rows, one per backend x variant in :attr:`runs` order.

        Each row holds ``backend``, ``variant``, every table metric (mean, float), ``queries``
        (number averaged) and, for rewrite variants, the change of ``primary`` (default: the
        evaluation's): ``delta``, ``p_value`` (randomization test), ``p_value_holm``,
        ``p_value_ttest`` (``None`` when undefined), ``ci95`` (``(low, high)``), ``wins``, ``ties``,
        ``losses``; these are ``None`` for the originals.

        Raises:
            InputError: ``primary`` was not evaluated.
        """
        primary = self.check_metric(primary or self.primary)
        metrics = self._table_metrics(primary)
        out = []
        for r in self.runs:
            agg = r.metrics.aggregate
            row: dict = {"backend": r.backend, "variant": r.variant, **{m: agg[m] for m in metrics}, "queries": r.metrics.num_queries}
            c = self.comparison(r.backend, r.variant, primary) if r.variant != self.baseline else None
            for key in ("delta", "p_value", "p_value_holm", "p_value_ttest", "ci95", "wins", "ties", "losses"):
                row[key] = None if c is None else _nan_to_none(getattr(c, key))
            out.append(row)
        return out

    def _table_metrics(self, primary: str) -> list[str]:
        tm = self.table_metrics
        return tm if primary == tm[0] else [primary, *(m for m in tm if m != primary)]

    # ---------------------------------------------------------------- the table

    def summary_table(self, primary: str | None = None) -> Table:
        """The summary table (the one table model of vdr's results): rows backend x variant; the
        table metrics (``primary`` first, default the evaluation's), the number of queries and, for
        rewrite variants, the change of ``primary`` against the originals on the same backend with
        its tests; notes: skipped backends, the legend, the macro row.

        Raises:
            InputError: ``primary`` was not evaluated.
        """
        primary = self.check_metric(primary or self.primary)
        metrics = self._table_metrics(primary)
        head = ("backend", "variant", *map(metric_label, metrics), "queries", f"d {primary}", "p (perm)", "p (Holm)", "p (t)", "95% CI",
                "W/T/L")
        rows = []
        reused = self._reused_runs()
        for r in self.rows(primary):
            variant = f"{r['variant']} (same run)" if r["backend"] in reused and r["variant"] != self.baseline else r["variant"]
            cells = [r["backend"], variant, *(fmt4(r[m]) for m in metrics), str(r["queries"])]
            if r["delta"] is None:
                cells += [None] * 6
            else:
                lo, hi = r["ci95"]
                cells += [f"{r['delta']:+.4f}", fmt_p(r["p_value"]), fmt_p(r["p_value_holm"]), fmt_p(r["p_value_ttest"]),
                          f"[{lo:+.3f}, {hi:+.3f}]", f"{r['wins']}/{r['ties']}/{r['losses']}"]
            rows.append(tuple(cells))
        classes = tuple("original" if r.variant == self.baseline else "" for r in self.runs)
        if self.is_run_comparison:  # one pseudo-backend: a column per run name only
            head = ("run", *head[2:])
            rows = [r[1:] for r in rows]
        return Table(head, tuple(rows), tuple(self._notes(primary)), classes, left=1 if self.is_run_comparison else 2)

    def _notes(self, primary: str) -> list[str]:
        notes = [f"{b}: skipped: {reason}" for b, reason in self.skipped.items()]
        comps = self.comparisons if primary in self.compared_metrics else self._computed(primary)
        if comps:
            fam = comps[0][1].holm_family
            fam_metrics = list(dict.fromkeys(lab.rsplit(":", 1)[-1] for lab in fam))
            what = (f"d = run - baseline ({self.baseline}) on the same queries" if self.is_run_comparison
                    else "d = rewritten - original on the same backend and queries")
            family = (f"{len(fam)} tests (runs x {', '.join(fam_metrics)})" if self.is_run_comparison
                      else f"{len(fam)} tests (variants x {', '.join(fam_metrics)}) of each backend")
            tail = "" if self.is_run_comparison else f" Backends reported separately ({len({b for b, _ in comps})} compared)."
            notes.append(
                f"{what}; p (perm): two-sided paired randomization test"
                f" ({describe_test([c for _, c in comps])}); p (Holm): Holm-corrected over the"
                f" {family}; p (t): paired t-test; CI: bootstrap of the mean change.{tail}"
            )
        notes += [f"{b}: one run file for every variant (--run {b}:*=FILE; rows marked 'same run'): the system did not see the"
                  " rewrites, so its changes are 0 by construction." for b in self._reused_runs()]
        notes += self._policy_notes()
        for name, kept in (self.config.get("same_texts") or {}).items():
            notes.append(f"{name}: the same query texts as {kept} for every query; evaluated once (the {kept} rows),"
                         " counted once in the Holm family.")
        proto = self.config.get("protocol")
        if proto:
            notes.append(f"protocol {proto['name']}: {proto['description']}.")
        for m in (m for m in self._table_metrics(primary) if metric_label(m) != m):
            counts = sorted({int((~np.isnan(r.metrics.values[m])).sum()) for r in self.runs if m in r.metrics.values})
            n = self.runs[0].metrics.num_queries
            notes.append(f"{metric_label(m)}: averaged over the queries present in each run only"
                         f" ({'/'.join(map(str, counts))} of {n}), as the paper's released code does; not comparable with vdr's"
                         " cut-off metrics (queries missing from a run score 0 there); not tested for significance.")
        if any(r.backend == "macro" for r in self.runs):
            notes.append("macro: unweighted mean of the backends' per-query values (labelled; not a backend).")
        return notes

    def _reused_runs(self) -> list[str]:
        """The run-file backends given ONE file for every variant (``--run NAME:*=FILE``, issue 25.4)."""
        configs = self.config.get("backend_config") or {}
        return [b for b, c in configs.items() if isinstance(c, dict) and c.get("backend") == "run" and "*" in (c.get("files") or {})]

    def _policy_notes(self) -> list[str]:
        """The query-set policy, as ``vdr metrics`` states it (issue 25.5): how many queries each
        mean averages, how many count 0 (or are left out) because their qrels hold no relevant
        page, and how many retrieved only unjudged pages (sparse qrels; per run in results.json,
        ``runs[].policy``)."""
        pols = [r.metrics.policy for r in self.runs if r.backend != "macro" and r.metrics.policy]
        if not pols:
            return []
        p = pols[0]
        n_avg, no_rel = p.get("num_queries_averaged", self.runs[0].metrics.num_queries), p.get("num_queries_without_relevant", 0)
        how = ("count 0 in every mean (--queries-without-relevant zero; 'exclude' leaves them out)"
               if p.get("queries_without_relevant", "zero") == "zero" else "are left out (--queries-without-relevant exclude)")
        line = (f"query set: the qrels' queries, {n_avg} averaged; relevant = grade >= {p.get('relevance_level', 1)};"
                f" {no_rel} of them have no page of grade > 0 in the qrels and {how}")
        counts = [q.get("num_queries_all_unjudged", 0) for q in pols]
        if any(counts):
            line += (f"; queries whose retrieved pages all lack a qrels line (sparse qrels; they score 0):"
                     f" {min(counts)}-{max(counts)} per run" if min(counts) != max(counts) else
                     f"; queries whose retrieved pages all lack a qrels line (sparse qrels; they score 0): {counts[0]} per run")
        return [line + "."]

    def table(self, primary: str | None = None) -> str:
        """The summary table as plain text (what ``vdr evaluate`` prints); see :meth:`summary_table`."""
        return self.summary_table(primary).to_text()

    def to_markdown(self, primary: str | None = None) -> str:
        """The summary table as Markdown (missing cells ``—``), the notes below it."""
        return self.summary_table(primary).to_markdown()

    def to_latex(self, primary: str | None = None) -> str:
        """The summary table as a LaTeX ``table`` float (booktabs), the notes as its caption."""
        return self.summary_table(primary).to_latex()

    def to_html(self, primary: str | None = None) -> str:
        """The summary table as an HTML ``<table class="summary">`` (escaped), the notes below it."""
        return self.summary_table(primary).to_html()

    def _repr_html_(self) -> str:  # Jupyter shows the summary table
        return self.to_html()

    def __rich__(self):  # rich.print(results) shows the summary table
        return self.summary_table().to_rich()

    # ---------------------------------------------------------------- tidy per-query values

    def _long_rows(self):
        for r in self.runs:
            names = list(r.metrics.values)
            cols = [r.metrics.values[m].tolist() for m in names]
            for qi, q in enumerate(r.metrics.query_ids):
                for m, col in zip(names, cols):
                    yield r.backend, r.variant, q, m, col[qi]

    def to_pandas(self):
        """Per-query values as a tidy :class:`pandas.DataFrame`: one row per backend, variant,
        query and metric; columns ``backend, variant, query_id, metric`` (str) and ``value``
        (float64, NaN where undefined); rows in :attr:`runs` order, then query, then metric.

        Raises:
            ImportError: pandas is not installed (``pip install pandas``).
        """
        import pandas as pd

        df = pd.DataFrame.from_records(list(self._long_rows()), columns=list(PER_QUERY_COLUMNS))
        df["value"] = df["value"].astype("float64")
        return df

    def largest_changes(self, backend: str, variant: str | int | None = None, *, top: int = 5,
                        metric: str | None = None) -> tuple[list[Case], list[Case]]:
        """The ``top`` largest regressions and gains of ``metric`` (default primary) of ``variant``
        (default: every rewrite variant) against the baseline on ``backend``.

        ``res.largest_changes("lexical", "keywords")`` looks at one variant;
        ``res.largest_changes("lexical", top=3)`` at all of them (an int in second place is read as
        ``top``, as before ``variant`` existed).

        Returns:
            ``(regressions, gains)``: regressions have ``delta < 0``, most negative first; gains
            ``delta > 0``, largest first; ties broken by variant order, then query id order.

        Raises:
            KeyError: an unknown backend or variant (the known ones named). InputError: ``top`` is
                not a positive integer.
        """
        if isinstance(variant, int) and not isinstance(variant, bool):
            variant, top = None, variant
        if isinstance(top, bool) or not isinstance(top, int) or top < 1:
            raise InputError(f"top must be a positive integer, got {top!r}")
        if backend not in self.backends:
            raise KeyError(f"no backend {backend!r} in these results; known: {', '.join(self.backends)}")
        if variant is not None and variant not in self.rewrite_variants:
            raise KeyError(f"no rewrite variant {variant!r} in these results; known: {', '.join(self.rewrite_variants)}")
        metric = metric or self.primary
        cases = []
        a = self.values(backend, self.baseline, metric)
        for vi, v in enumerate(self.rewrite_variants):
            if not self.has_run(backend, v) or variant not in (None, v):
                continue
            b = self.values(backend, v, metric)
            for qi, q in enumerate(self.query_ids):
                d = float(b[qi] - a[qi])
                if not math.isnan(d) and d != 0.0:
                    cases.append((vi, qi, Case(backend, v, q, float(a[qi]), float(b[qi]), d)))
        reg = [c for _, _, c in sorted((x for x in cases if x[2].delta < 0), key=lambda x: (x[2].delta, x[0], x[1]))]
        gain = [c for _, _, c in sorted((x for x in cases if x[2].delta > 0), key=lambda x: (-x[2].delta, x[0], x[1]))]
        return reg[:top], gain[:top]

    # ---------------------------------------------------------------- rankings, qrels, pages

    def run_path(self, backend: str, variant: str) -> Path | None:
        """Path of the TREC run of ``backend`` x ``variant`` (``None`` for ``macro`` rows or before
        :meth:`save`). Raises KeyError: no such run."""
        rel = self.run(backend, variant).run_file
        return None if not rel or self.root is None else self.root / rel

    def ranking(self, backend: str, variant: str) -> Run:
        """The ranked pages of ``backend`` x ``variant`` (in memory, else read from its TREC file; cached).

        Raises:
            KeyError: no such run. InputError: no run file (``macro``), or it is missing or malformed.
        """
        r = self.run(backend, variant)
        if r.ranking is not None:
            return r.ranking
        key = (backend, variant)
        if key not in self._rankings:
            p = self.run_path(backend, variant)
            if p is None:
                raise InputError(f"backend {backend!r} has no run file (an average of other backends)")
            if not p.is_file():
                raise InputError("run file is missing", path=p)
            self._rankings[key] = load_run(p)
        return self._rankings[key]

    def ranked(self, backend: str, variant: str, query_id: str, k: int | None = 10) -> list[tuple[str, float]]:
        """The ``k`` best pages of one query, ``[(corpus id, score), ...]`` in trec_eval order (score
        descending, ties by corpus id descending); ``[]`` when the run retrieved nothing for it;
        all pages when ``k`` is ``None``. Raises as :meth:`ranking`."""
        run = self.ranking(backend, variant)
        if query_id not in run:
            return []
        r = run.ranked(query_id)
        return r if k is None else r[:k]

    def judgments(self, query_id: str) -> dict[str, int]:
        """Every judged page of ``query_id`` with its grade, highest grade first; ``{}`` when none
        or the qrels could not be read."""
        if self.qrels is None or query_id not in self.qrels:
            return {}
        return dict(sorted(self.qrels[query_id].items(), key=lambda kv: (-kv[1], kv[0])))

    def relevant(self, query_id: str) -> dict[str, int]:
        """Pages of ``query_id`` with grade >= :attr:`relevance_level`, highest grade first."""
        return {d: g for d, g in self.judgments(query_id).items() if g >= self.relevance_level}

    def grade(self, query_id: str, corpus_id: str) -> int | None:
        """The qrels grade of a page for a query; ``None`` when the page is unjudged."""
        return self.judgments(query_id).get(corpus_id)

    def page_image(self, corpus_id: str):
        """The page image as an RGB ``PIL.Image.Image``, or ``None`` when the corpus, the page or its
        image file is missing or unreadable (never raises for those)."""
        if self.corpus is None or self.corpus.kind != "page" or corpus_id not in self.corpus:
            return None
        try:
            return self.corpus.open_image(corpus_id)
        except (VdrError, OSError):
            return None

    # ---------------------------------------------------------------- save / load

    def to_dict(self) -> dict:
        """The ``results.json`` document (strict-JSON types; NaN as ``null``)."""
        return json_safe({
            "schema_version": SCHEMA_VERSION,
            "config": self.config,
            "versions": self.versions,
            "skipped": self.skipped,
            "backend_reports": self.backend_reports,
            "variants": {name: dict(_length_stats(qs), queries={q: {"text": x.text, "history": list(x.history),
                                                                         **({"answers": list(x.answers)} if x.answers else {})}
                                                                      for q, x in qs.items()})
                         for name, qs in self.variants.items()},
            "runs": [{"backend": r.backend, "variant": r.variant, "run_file": r.run_file, "num_queries": r.metrics.num_queries,
                      "policy": dict(r.metrics.policy), "aggregate": r.metrics.aggregate, "per_query": r.metrics.per_query}
                     for r in self.runs],
            "comparisons": [dict(c.to_dict(), backend=b) for b, c in self.comparisons],
        })

    def save(self, results_dir: str | Path) -> Path:
        """Write ``results.json``, ``per_query.csv`` (long form) and ``runs/<backend>.<variant>.trec``
        into ``results_dir``, each atomically. Runs already in ``results_dir`` (results loaded from
        there) are left as they are.

        Returns:
            ``results_dir`` as a :class:`~pathlib.Path`.

        Raises:
            InputError: a run that is neither in memory nor readable from :attr:`root`.
            OSError: the folder cannot be written.
        """
        out = Path(results_dir)
        same = self.root is not None and out.resolve() == Path(self.root).resolve()
        for r in self.runs:
            if r.run_file and not (same and r.ranking is None and (out / r.run_file).is_file()):
                save_run(self.ranking(r.backend, r.variant), out / r.run_file, tag=f"vdr-{r.backend}-{r.variant}")
        with atomic_write(out / RESULTS_FILE) as f:
            json.dump(self.to_dict(), f, indent=1, ensure_ascii=False, allow_nan=False)
            f.write("\n")
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(PER_QUERY_COLUMNS)
        for b, v, q, m, x in self._long_rows():
            w.writerow((b, v, q, m, "" if math.isnan(x) else repr(x)))
        with atomic_write(out / PER_QUERY_FILE) as f:
            f.write(buf.getvalue())
        return out

    @classmethod
    def load(cls, results_dir: str | Path) -> "Results":
        """Read a results folder written by :meth:`save` (``vdr evaluate --out RESULTS_DIR``).

        Paths recorded in ``results.json`` (corpus, qrels; for schema 1 also the query files) are
        looked up as written, then relative to the results folder and each folder above it. What
        cannot be found or read is listed in :attr:`warnings` and left ``None``: the corpus (no
        page images), the qrels (no relevance marks).

        Raises:
            InputError: the folder or its ``results.json`` is missing or not valid JSON, not a vdr
                results document, or of a schema version this vdr does not read (the message names
                the file, its version and the version this vdr writes).
        """
        root = Path(results_dir)
        path = root / RESULTS_FILE
        doc = _read_document(root, path)
        warnings: list[str] = []
        if doc.get("schema_version", 1) == 1:
            warnings.append(f"{path}: schema version 1 (this vdr writes {SCHEMA_VERSION}); query texts read from the query files")
            variants = _variants_v1(doc, root, warnings)
        else:
            variants = {name: QuerySet({q: Query(x["text"], tuple(x.get("history") or ()), tuple(x.get("answers") or ()))
                                        for q, x in (info.get("queries") or {}).items()},
                                       name=name, source=info.get("source"))
                        for name, info in (doc.get("variants") or {}).items()}
        runs = [RunResult(r["backend"], r["variant"], r.get("run_file"), _metrics_from_doc(r)) for r in doc["runs"]]
        comparisons = [(c["backend"], _comparison_from_doc(c, path)) for c in doc.get("comparisons") or []]
        config = doc.get("config") or {}
        rel = config.get(RELATIVE_INPUTS) or {}
        qrels = _optional(config.get("qrels"), root, "qrels file", load_qrels, "relevance marks not shown", warnings, rel.get("qrels"))
        corpus = (None if config.get("command") == "compare"  # runs compared on qrels alone: no corpus to show
                  else _optional(config.get("corpus_dir"), root, "corpus folder", load_corpus, "page images not shown", warnings,
                                 rel.get("corpus_dir")))
        return cls(config=config, versions=doc.get("versions") or {}, runs=runs, comparisons=comparisons,
                   skipped=dict(doc.get("skipped") or {}), variants=variants, backend_reports=doc.get("backend_reports") or {},
                   root=root, qrels=qrels, corpus=corpus, warnings=warnings)


# --------------------------------------------------------------------------------------------
# reading


def _read_document(root: Path, path: Path) -> dict:
    """``results.json`` parsed and checked (schema version, runs)."""
    if not path.is_file():
        raise InputError(f"not a results folder: {RESULTS_FILE} is missing (run `vdr evaluate --out ...` first)", path=root)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise InputError(f"invalid JSON ({e})", path=path) from None
    if not isinstance(doc, dict):
        raise InputError("not a vdr results document (no 'runs')", path=path)
    version = doc.get("schema_version", 1)
    if not isinstance(version, int) or isinstance(version, bool) or version not in READABLE_SCHEMAS:
        newer = isinstance(version, int) and version > SCHEMA_VERSION
        raise InputError(
            f"results schema version {version!r} {'is newer than' if newer else 'is not one of'} the versions this vdr reads"
            f" ({', '.join(map(str, READABLE_SCHEMAS))}; it writes {SCHEMA_VERSION}): "
            + ("upgrade vdr to read it" if newer else "re-run `vdr evaluate` to write it again"), path=path)
    if not isinstance(doc.get("runs"), list) or not doc["runs"]:
        raise InputError("not a vdr results document (no 'runs')", path=path)
    for i, r in enumerate(doc["runs"]):
        if not isinstance(r, dict) or not {"backend", "variant", "aggregate", "per_query"} <= set(r):
            raise InputError(f"run #{i + 1} lacks backend/variant/aggregate/per_query", path=path)
    return doc


def _metrics_from_doc(r: dict) -> MetricsResult:
    pq = r["per_query"]
    ids = tuple(pq)
    names = list(r["aggregate"]) or (list(pq[ids[0]]) if ids else [])
    vals = {m: np.array([np.nan if pq[q].get(m) is None else pq[q][m] for q in ids], dtype=np.float64) for m in names}
    return MetricsResult(ids, vals, dict(r.get("policy") or {}))


def _comparison_from_doc(c: dict, path: Path) -> Comparison:
    """A :class:`~vdr.stats.Comparison` from its ``to_dict`` form (``null`` p-values -> NaN)."""
    try:
        test = c.get("test") or {}
        num = lambda x: math.nan if x is None else float(x)  # noqa: E731
        return Comparison(
            metric=c["metric"], original=c["original"], rewritten=c["rewritten"], delta=c["delta"], p_value=num(c["p_value"]),
            p_value_ttest=num(c.get("p_value_ttest")), p_value_holm=num(c.get("p_value_holm")),
            holm_family=tuple(c.get("holm_family") or ()), ci95=tuple(c["ci95"]), wins=c["wins"], ties=c["ties"],
            losses=c["losses"], n_queries=c["n_queries"], variant=c.get("variant"),
            n_permutations=test.get("n_permutations", 10_000), exact=bool(test.get("exact", str(test.get("p_value", "")).startswith("exact"))),
            p_min=num(c.get("p_min")),
            n_bootstrap=test.get("n_bootstrap", 10_000), seed=test.get("seed", 0),
        )
    except (KeyError, TypeError, ValueError) as e:
        raise InputError(f"malformed comparison entry ({type(e).__name__}: {e})", path=path) from None


#: results.json ``config`` key of the input paths relative to the results folder (issue 26.9).
RELATIVE_INPUTS = "inputs_relative_to_results"


def relative_inputs(config: Mapping, results_dir: str | Path) -> dict:
    """The input paths of ``config`` (``corpus_dir``, ``queries``, ``qrels``, ``rewrites``, ``runs``)
    relative to ``results_dir`` (``os.path.relpath``; POSIX separators), recorded beside the
    absolute ones as ``config[RELATIVE_INPUTS]`` so that a results folder moved together with its
    inputs (another machine, another mount point) still finds them (:meth:`Results.load`,
    ``vdr report``). Paths on another drive (Windows) are left out."""
    import os

    base = Path(results_dir).resolve()

    def rel(p):
        if not isinstance(p, str) or not p:
            return None
        try:
            return Path(os.path.relpath(Path(p).resolve(), base)).as_posix()
        except ValueError:  # another drive
            return None

    out: dict = {}
    for key in ("corpus_dir", "queries", "qrels"):
        if rel(config.get(key)) is not None:
            out[key] = rel(config.get(key))
    for key in ("rewrites", "runs"):
        group = config.get(key)
        if isinstance(group, Mapping):
            sub = {n: rel(p) for n, p in group.items() if rel(p) is not None}
            if sub:
                out[key] = sub
    return out


def _resolve(path: str | None, root: Path, relative: str | None = None) -> Path | None:
    """First existing candidate for a path recorded in ``results.json``: as written (absolute, or
    relative to the current folder), then its recorded form relative to the results folder
    (:func:`relative_inputs`: the folder moved with its inputs), then the path relative to the
    results folder and each folder above it. ``None`` when ``path`` is empty or none exists."""
    if not path:
        return None
    p = Path(path)
    if relative:
        moved = (root / relative).resolve()
        if p.is_absolute() and not p.exists() and moved.exists():
            return moved
    if p.is_absolute():
        return p if p.exists() else None
    root = root.resolve()
    for c in [p, root / p, *(a / p for a in root.parents)]:
        if c.exists():
            return c
    return None


def _optional(recorded: str | None, root: Path, what: str, loader, consequence: str, warnings: list[str], relative: str | None = None):
    """``loader(path)`` of a recorded input, or ``None`` with a warning when it is gone or unreadable."""
    p = _resolve(recorded, root, relative)
    if p is None:
        warnings.append(f"{what} not found ({recorded}); {consequence}" if recorded else f"no {what} recorded; {consequence}")
        return None
    try:
        return loader(p)
    except (VdrError, OSError) as e:
        warnings.append(f"{what} cannot be read: {e}; {consequence}")
        return None


def _variants_v1(doc: dict, root: Path, warnings: list[str]) -> dict[str, QuerySet]:
    """Schema 1 stored no query texts: read them (with history) from the query files of the config."""
    config = doc.get("config") or {}
    info = doc.get("variants") or {}
    names = list(dict.fromkeys([ORIGINAL, *config.get("variants", []), *info, *(r["variant"] for r in doc["runs"])]))
    files: dict[str, QuerySet] = {}
    for v in (n for n in names if n != CONCAT):
        src = config.get("queries") if v == ORIGINAL else (config.get("rewrites") or {}).get(v, (info.get(v) or {}).get("source"))
        rel = config.get(RELATIVE_INPUTS) or {}
        moved = rel.get("queries") if v == ORIGINAL else (rel.get("rewrites") or {}).get(v)
        qs = _optional(src, root, f"query file of variant {v!r}", lambda p, v=v: load_queries(p, name=v), "its texts not shown", warnings,
                       moved)
        if qs is not None:
            files[v] = qs
    out = {}
    for v in names:
        if v == CONCAT and ORIGINAL in files:
            o = files[ORIGINAL]
            out[v] = QuerySet({q: Query(" ".join([*x.history, x.text])) for q, x in o.items()}, name=CONCAT, source=o.source)
        else:
            out[v] = files.get(v, QuerySet({}, name=v, source=(info.get(v) or {}).get("source")))
    return out
