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
refused with an :class:`~vdr.errors.InputError` naming the file and both versions. Optional
top-level keys added within version 2 (``per_language``, ``pairwise``, ``served_audit``: the served
systems against exact MaxSim, :mod:`vdr.experiment.audit`) are written only when they hold
something; a reader that does not know one ignores it, so they need no new version.
"""

from __future__ import annotations

import csv
import dataclasses
import html
import io
import json
import math
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .stats import (MISSING_GROUP, ALPHA, Comparison, GroupComparison, check_alpha, compare_groups, compare_variants, describe_test,
                    format_alpha, format_p, query_groups, untested_groups)
from .corpus import Corpus, PassageCorpus, load_corpus
from .errors import InputError, VdrError
from .io.atomic import atomic_write
from .io.formats import load_qrels, load_queries, load_run, save_run
from .io.outdir import not_a_results_folder
from .metrics import MetricsResult
from .metrics.registry import Metric, metric_label, parse_metric
from .types import ORIGINAL, Qrels, Query, QuerySet, Run, duplicate_texts

__all__ = ["Results", "RunResult", "Case", "Table", "SCHEMA_VERSION", "RESULTS_FILE", "PER_QUERY_FILE", "fmt_p", "json_safe",
           "MARK_SYMBOLS", "metric_title"]

SCHEMA_VERSION = 2
"""Version of the ``results.json`` layout this vdr writes (``schema_version``)."""
READABLE_SCHEMAS = (1, 2)
RESULTS_FILE = "results.json"
PER_QUERY_FILE = "per_query.csv"
PER_QUERY_COLUMNS = ("backend", "variant", "query_id", "metric", "value")
#: The ``language`` of :meth:`Results.language_rows`' mean over languages (MTEB's main score).
MEAN_OVER_LANGUAGES = "mean over languages"
CONCAT = "concat"


# --------------------------------------------------------------------------------------------
# the table model: computed once, rendered four ways


def _frame_value(value: object) -> object:
    """A query field's value in :meth:`Results.to_pandas`: a string, or a list when the query is in
    several groups (``df.explode(field)`` gives one row per group)."""
    return list(value) if isinstance(value, tuple) else value


def _overlap_note(field_name: str, member: Mapping[str, tuple[str, ...]]) -> str:
    """The footnote saying that groups overlap (queries whose value is a list), or ``""``."""
    multi = sum(1 for keys in member.values() if len(keys) > 1)
    if not multi:
        return ""
    return (f"The groups overlap: {multi} of {len(member)} queries have several values of {field_name!r} (a list) and count in"
            " each of their groups; the groups' sizes add up to more than the queries, and Holm counts each group's test.")


def fmt_p(p: float | None, alpha: float | None = None) -> str:
    """A p-value as the tables print it: 4 decimals, ``1.2e-05`` below 1e-4, ``n/a`` when undefined
    (``None`` or NaN, e.g. the t-test on identical values); with ``alpha``, as many more digits as
    it takes to stay on the side of ``alpha`` the exact p is on (:func:`vdr.stats.format_p`).

    >>> fmt_p(0.046875), fmt_p(0.050004, 0.05), fmt_p(4e-05)
    ('0.0469', '0.050004', '4.0e-05')
    """
    return format_p(p, alpha, "table")


def holm_reason(c: Comparison, alpha: float) -> str:
    """The tail of a verdict after "... after Holm": `` (p 0.45, α 0.05)``; when the correction
    alone makes the change not significant (unadjusted randomization p <= ``alpha`` < Holm p: its
    95% CI, which is not corrected, usually excludes 0), it names the correction and the unadjusted
    p, `` over 8 tests (p 0.20; unadjusted p 0.026, α 0.05)`` (Holm 1979: the smallest of ``N``
    p-values is multiplied by ``N``)."""
    a = format_alpha(alpha)
    p_holm = fmt_p_short(c.p_value_holm, alpha)
    if holm_decided(c, alpha):
        return f" over {len(c.holm_family)} tests (p {p_holm}; unadjusted p {fmt_p_short(c.p_value, alpha)}, \u03b1 {a})"
    return f" (p {p_holm}, \u03b1 {a})"


def holm_decided(c: Comparison, alpha: float) -> bool:
    """Whether Holm's correction alone makes ``c`` not significant at ``alpha``: a change whose
    unadjusted randomization p is at most ``alpha`` and whose Holm p is above it."""
    return c.outcome(alpha) == "ns" and c.delta != 0 and c.p_value <= alpha and len(c.holm_family) > 1


def holm_decided_note(comparisons: Sequence[Comparison], alpha: float) -> str:
    """A table's note on its rows that Holm's correction alone makes not significant
    (:func:`holm_decided`; ``""`` when none): their p (perm) is at most ``alpha``, and the 95% CI
    (not corrected) often excludes 0; the correction over ``N`` tests (Holm 1979) is the reason."""
    hits = [c for c in comparisons if holm_decided(c, alpha)]
    if not hits:
        return ""
    sizes = "/".join(map(str, sorted({len(c.holm_family) for c in hits})))
    n = len(hits)
    return (f"{n} change{'s' if n > 1 else ''} with p (perm) <= {format_alpha(alpha)} {'are' if n > 1 else 'is'} not significant"
            f" after Holm over {sizes} tests: the correction, not the data, decides {'them' if n > 1 else 'it'} (the 95% CI is"
            " not corrected).")


def fmt_p_short(p: float | None, alpha: float | None = None) -> str:
    """A p-value in a sentence: 2 decimals from 0.01 (``0.45``), 3 from 0.001, else ``< 0.001``;
    ``n/a`` when undefined; with ``alpha``, never rounded across it (``0.047`` for 0.046875 at
    alpha 0.05, not ``0.05``; :func:`vdr.stats.format_p`).

    >>> fmt_p_short(0.4515), fmt_p_short(0.0032), fmt_p_short(4e-05), fmt_p_short(float("nan"))
    ('0.45', '0.003', '< 0.001', 'n/a')
    >>> fmt_p_short(0.046875, 0.05), fmt_p_short(0.0546875, 0.05)
    ('0.047', '0.055')
    """
    return format_p(p, alpha, "sentence")


_TITLES = {"ndcg": "nDCG", "mrr": "MRR", "map": "MAP", "recall": "Recall", "precision": "P", "hit": "Hit", "rr": "RR"}


def metric_title(name: str) -> str:
    """A metric's name as papers write it (``ndcg@3`` -> ``nDCG@3``, ``mrr@3`` -> ``MRR@3``); other
    names as :func:`~vdr.metrics.registry.metric_label` gives them.

    >>> metric_title("ndcg@3"), metric_title("recall@10"), metric_title("hole@3")
    ('nDCG@3', 'Recall@10', 'hole@3')
    """
    fam, at, k = name.partition("@")
    return _TITLES[fam] + at + k if fam in _TITLES else metric_label(name)


_SUPER = dict(zip("abcdefghijklmnoprstuvwxyz", "ᵃᵇᶜᵈᵉᶠᵍʰⁱʲᵏˡᵐⁿᵒᵖʳˢᵗᵘᵛʷˣʸᶻ"))


def _superscript(text: str) -> str:
    """Letters as Unicode superscripts (``"ab"`` -> ``"ᵃᵇ"``); ``^text`` when one has none (``q``)."""
    return "".join(_SUPER[c] for c in text) if all(c in _SUPER for c in text) else "^" + text


def _ranx_latex_sup(won: list[str], others: list[str]) -> str:
    """ranx's LaTeX superscript of a value, as ranx 0.3 writes it: the letters it beats as
    ``$^{ab}$``, the other systems' letters as ``\\hphantom{$^{cd}$}`` (invisible, so that the column
    stays aligned), empty superscripts ``$^{}$`` removed."""
    return (f"$^{{{''.join(won)}}}$" + rf"\hphantom{{$^{{{''.join(others)}}}$}}").replace("$^{}$", "")


def _names_order(letter: Mapping[str, str]):
    """Sort key of system letters in their table order (``a`` < ... < ``z`` < ``aa``)."""
    order = {v: i for i, v in enumerate(letter.values())}
    return lambda x: order[x]


def _letter(i: int) -> str:
    """ranx's system labels: ``a`` ... ``z``, then ``aa``, ``ab``, ..."""
    return chr(97 + i) if i < 26 else _letter(i // 26 - 1) + chr(97 + i % 26)


def _times(x: float | None) -> str | None:
    """A ratio as the served table prints it (``0.0312x``; 4 significant digits); ``None`` when unknown."""
    return None if x is None else f"{x:.4g}x"


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
    """Text for a Markdown table cell or line: ``&`` and ``<`` HTML-escaped (Markdown renders raw
    HTML; no tag or entity survives), ``>`` only where it would start a block quote (``>=`` reads
    as typed elsewhere), pipes and backslashes escaped, line breaks as spaces."""
    t = str(text).replace("&", "&amp;").replace("<", "&lt;")
    t = t.replace("\\", "\\\\").replace("|", "\\|").replace("\r", " ").replace("\n", " ")
    body = t.lstrip(" ")
    return t[:len(t) - len(body)] + "&gt;" + body[1:] if body.startswith(">") else t


_LATEX = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{", "}": r"\}",
          "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "<": r"\textless{}", ">": r"\textgreater{}"}


def latex_escape(text: object) -> str:
    """Text for LaTeX: the ten special characters and ``<``/``>`` escaped, line breaks as spaces."""
    return "".join(_LATEX.get(c, c) for c in str(text).replace("\r", " ").replace("\n", " "))


def _number(cell: str | None) -> float | None:
    """``cell`` as a float (``"+0.0704"`` -> 0.0704, ``"n/a"`` -> NaN), or ``None`` when it is no number."""
    if cell is None:
        return None
    if cell == "n/a":
        return math.nan
    try:
        return float(cell)
    except ValueError:
        return None


#: The symbol of a significant gain / loss in every rendering of a table (readable in grey-scale;
#: HTML adds a colour, LaTeX writes an arrow superscript).
MARK_SYMBOLS = {"gain": "\u25b2", "loss": "\u25bc"}
_LATEX_MARKS = {"gain": r"\textsuperscript{$\uparrow$}", "loss": r"\textsuperscript{$\downarrow$}"}


#: What the plain text of a table split to fit the width says, unless told otherwise
#: (:meth:`Table.to_text`'s ``more``).
MORE_COLUMNS = "a wider COLUMNS (or Table.to_text(width=None)) prints one table"


@dataclass(frozen=True, repr=False)
class Table:
    """A table whose cells are computed once and rendered as text, Markdown, LaTeX, HTML or rich.

    ``print(table)`` (and the REPL's echo, ``repr``) shows what ``vdr`` prints: :meth:`to_text` at
    the terminal's width (``COLUMNS``); Jupyter shows :meth:`to_html`; :meth:`to_pandas` gives the
    cells as a DataFrame to slice.

    Attributes:
        columns: header cells.
        rows: one tuple of formatted cells per row (``None`` = a missing value: blank in text,
            ``—`` in Markdown and HTML, ``---`` in LaTeX).
        notes: lines shown under the table (legend, skipped backends).
        row_classes: an HTML class per row (``"original"`` for the originals' rows), or empty.
        left: number of leading columns aligned left (the others are numbers, right-aligned).
        marks: per row, per cell ``""``, ``"gain"`` or ``"loss"`` (a significant change): the cell
            gets the symbol of :data:`MARK_SYMBOLS` (text, Markdown, HTML, rich), an HTML class of
            the same name (coloured by the report), an arrow superscript in LaTeX; or empty.
        sups: per row, per cell a superscript (ranx's letters of the systems a value is
            significantly better than): ``^ab`` in text, ``<sup>`` in Markdown and HTML,
            ``\textsuperscript`` in LaTeX; or empty.
        latex_sups: per row, per cell a raw-LaTeX superscript written only by :meth:`to_latex`
            (the ranx-style marks of the summary table's means); or empty.
        verdicts: sentences shown right under the table, before the notes (one per comparison:
            :meth:`Results.verdicts`); not in the LaTeX caption.
        latex_legend: raw LaTeX put first in the caption (what the superscripts mean) when some
            cell is marked.
        titles: per column its long name (``rr_full (paper-compatible: ConvSearch-R1 code)``), or
            ``""``: the HTML header's ``title`` (the header cell itself stays short); or empty.
        keys: the leading columns that name a row, repeated in each part when :meth:`to_text`
            splits a table to fit a width (``0``: :attr:`left`).
        sections: indices of the columns that start a group of columns kept together in one part
            when :meth:`to_text` splits the table (the change of the primary metric and its tests),
            as far as the width allows; or empty.
    """

    columns: tuple[str, ...]
    rows: tuple[tuple[str | None, ...], ...]
    notes: tuple[str, ...] = ()
    row_classes: tuple[str, ...] = ()
    left: int = 2
    marks: tuple[tuple[str, ...], ...] = ()
    sups: tuple[tuple[str, ...], ...] = ()
    latex_sups: tuple[tuple[str, ...], ...] = ()
    verdicts: tuple[str, ...] = ()
    latex_legend: str = ""
    titles: tuple[str, ...] = ()
    keys: int = 0
    sections: tuple[int, ...] = ()

    def __str__(self) -> str:
        from .progress import console_width

        return self.to_text(width=console_width())

    __repr__ = __str__

    def _repr_html_(self) -> str:  # Jupyter
        return self.to_html()

    def _cells(self, missing: str) -> list[list[str]]:
        return [[missing if c is None else c for c in r] for r in self.rows]

    def _at(self, table: tuple[tuple[str, ...], ...], i: int, j: int) -> str:
        return table[i][j] if i < len(table) and j < len(table[i]) else ""

    def _plain(self, i: int, j: int, cell: str, sup_fmt: str | None) -> str:
        """``cell`` with its superscript (``sup_fmt`` formats it; ``None``: Unicode superscript
        letters, as ranx prints them) and its mark symbol appended."""
        sup, mark = self._at(self.sups, i, j), self._at(self.marks, i, j)
        sup = (_superscript(sup) if sup_fmt is None else sup_fmt.format(sup)) if sup else ""
        return cell + sup + (" " + MARK_SYMBOLS[mark] if mark in MARK_SYMBOLS else "")

    def to_text(self, verdicts: bool = True, width: int | None = None, more: str = MORE_COLUMNS) -> str:
        """Fixed-width plain text: columns padded with two spaces between them (no trailing
        blanks), then the verdicts and the notes.

        Args:
            verdicts: print :attr:`verdicts` under the table.
            width: the longest line wanted (a terminal's ``COLUMNS``), or ``None``: one table, one
                line per verdict and note. A table wider than ``width`` is split into parts that
                fit, each repeating the :attr:`keys` columns (secondary columns go to the later
                parts), followed by a line saying so and ``more`` (how to see one table); verdicts
                and notes are wrapped (continuation lines indented by two spaces). A line can
                still be longer when the key columns and one other column, or one word, are.
            more: how to see every column in one table, e.g. ``"--wide prints one table"``.
        """
        rows = [[self._plain(i, j, c, None) for j, c in enumerate(r)] for i, r in enumerate(self._cells(""))]
        widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(self.columns)]
        parts = self._parts(widths, width)
        blocks = []
        for cols in parts:
            lines = ["  ".join(self.columns[j].ljust(widths[j]) for j in cols).rstrip()]
            lines += ["  ".join(r[j].ljust(widths[j]) for j in cols).rstrip() for r in rows]
            blocks.append("\n".join(lines))
        foot = [*(self.verdicts if verdicts else ()), *self.notes]
        if len(parts) > 1:
            foot.insert(0, f"(split into {len(parts)} tables to fit {width} columns; {more})")
        if width is not None:
            foot = [textwrap.fill(x, width, subsequent_indent="  ", break_long_words=False, break_on_hyphens=False)
                    for x in foot]
        return "\n".join(["\n\n".join(blocks), *foot])

    def _parts(self, widths: list[int], width: int | None) -> list[list[int]]:
        """The column indices of each part of the text table: every column in one part when it
        fits ``width`` (or ``width`` is ``None``), else the key columns then as many of the others,
        in order, as fit (at least one each), a section (:attr:`sections`) starting a new part
        when it does not fit in the current one."""
        n = len(self.columns)
        if width is None or sum(widths) + 2 * (n - 1) <= width:
            return [list(range(n))]
        keys = min(self.keys or self.left, n)
        base = sum(widths[:keys]) + 2 * keys
        starts = sorted({keys, *(j for j in self.sections if keys < j < n)})
        parts: list[list[int]] = []
        current: list[int] = []
        for a, b in zip(starts, [*starts[1:], n]):
            section = list(range(a, b))
            if current and base + sum(widths[j] + 2 for j in current + section) - 2 > width:
                parts.append(current)
                current = []
            for j in section:  # column by column: a section wider than the width is split too
                if current and base + sum(widths[i] + 2 for i in current) + widths[j] > width:
                    parts.append(current)
                    current = []
                current.append(j)
        parts.append(current)
        return [list(range(keys)) + p for p in parts]

    def to_pandas(self):
        """The cells as a :class:`pandas.DataFrame`: one column per header (:attr:`columns`), one
        row per row; a column whose every cell is a number (``0.6977``, ``+0.0704``, ``1.2e-05``)
        or missing (``None``, ``n/a``) becomes float64 (missing: NaN), the others stay strings
        (``None`` where missing). Marks and superscripts are left out (they are in the tests'
        columns: ``p (Holm)``).

        Raises:
            ImportError: pandas is not installed.
        """
        import pandas as pd

        data = {}
        for j, h in enumerate(self.columns):
            col = [r[j] if j < len(r) else None for r in self.rows]
            nums = [_number(c) for c in col]
            data[h] = (pd.Series(nums, dtype="float64") if all(x is not None or c in (None, "n/a") for x, c in zip(nums, col))
                       else pd.Series(col, dtype="object"))
        return pd.DataFrame(data)

    def to_markdown(self, notes: bool = True, verdicts: bool = True) -> str:
        """A GitHub-flavoured Markdown table (cells escaped), then the verdicts as a list and the
        notes as paragraphs."""
        lines = ["| " + " | ".join(md_escape(h) for h in self.columns) + " |", "|" + "---|" * len(self.columns)]
        lines += ["| " + " | ".join(self._plain(i, j, md_escape(c), "<sup>{}</sup>") for j, c in enumerate(r)) + " |"
                  for i, r in enumerate(self._cells("—"))]
        if verdicts and self.verdicts:
            lines += ["", *(f"- {md_escape(v)}" for v in self.verdicts)]
        if notes and self.notes:
            lines += ["", *(md_escape(n) + "  " for n in self.notes)]
        return "\n".join(lines)

    def to_latex(self, caption: str | None = None, label: str = "tab:vdr-summary") -> str:
        """A ``table`` float with a booktabs ``tabular`` (``\\usepackage{booktabs}``); the notes (or
        ``caption``) become the caption, after :attr:`latex_legend`. Superscripts (:attr:`sups`,
        :attr:`latex_sups`) and marks (arrows) follow their cells."""
        spec = "l" * self.left + "r" * (len(self.columns) - self.left)

        def cell(i: int, j: int, c: str) -> str:
            sup, raw, mark = self._at(self.sups, i, j), self._at(self.latex_sups, i, j), self._at(self.marks, i, j)
            if raw:  # the raw LaTeX superscript replaces the plain one
                sup = ""
            return (latex_escape(c) + (rf"\textsuperscript{{{latex_escape(sup)}}}" if sup else "") + raw
                    + _LATEX_MARKS.get(mark, ""))

        body = [" & ".join(cell(i, j, c) for j, c in enumerate(r)) + r" \\" for i, r in enumerate(self._cells("---"))]
        cap = caption if caption is not None else " ".join(self.notes)
        marked = any(x for t in (self.sups, self.latex_sups, self.marks) for row in t for x in row)
        cap = " ".join(x for x in (self.latex_legend if marked else "", latex_escape(cap) if cap else "") if x)
        return "\n".join([
            r"\begin{table}[t]", r"\centering", r"\small", rf"\begin{{tabular}}{{{spec}}}", r"\toprule",
            " & ".join(latex_escape(h) for h in self.columns) + r" \\", r"\midrule", *body, r"\bottomrule", r"\end{tabular}",
            *([rf"\caption{{{cap}}}"] if cap else []), rf"\label{{{label}}}", r"\end{table}", "",
        ])

    def to_html(self, css_class: str = "summary", notes: bool = True, verdicts: bool = True) -> str:
        """An HTML ``<table>`` (class ``css_class`` unless empty; cells escaped; a marked cell has
        the class ``gain`` or ``loss``), then the verdicts as ``<ul class="verdicts">`` and the
        notes as ``<p class="note">``."""
        attr = f' class="{html_escape(css_class)}"' if css_class else ""
        ths = []
        for j, h in enumerate(self.columns):
            title = self.titles[j] if j < len(self.titles) else ""
            ths.append(f'<th title="{html_escape(title)}">' if title and title != h else "<th>")
            ths[-1] += f"{html_escape(h)}</th>"
        out = [f"<table{attr}><thead><tr>" + "".join(ths) + "</tr></thead><tbody>"]
        for i, r in enumerate(self._cells("—")):
            cls = self.row_classes[i] if i < len(self.row_classes) else ""
            tds = []
            for j, c in enumerate(r):
                mark = self._at(self.marks, i, j)
                td = f'<td class="{mark}">' if mark in MARK_SYMBOLS else "<td>"
                tds.append(td + self._plain(i, j, html_escape(c), "<sup>{}</sup>") + "</td>")
            out.append((f'<tr class="{html_escape(cls)}">' if cls else "<tr>") + "".join(tds) + "</tr>")
        out.append("</tbody></table>")
        if verdicts and self.verdicts:
            out.append('<ul class="verdicts">' + "".join(f"<li>{html_escape(v)}</li>" for v in self.verdicts) + "</ul>")
        if notes:
            out += [f'<p class="note">{html_escape(n)}</p>' for n in self.notes]
        return "".join(out)

    def to_rich(self):
        """A :class:`rich.table.Table` (for ``rich.print``/consoles), verdicts and notes as its caption."""
        from rich.table import Table as RichTable

        t = RichTable(caption="\n".join([*self.verdicts, *self.notes]) or None, caption_justify="left")
        for i, h in enumerate(self.columns):
            t.add_column(h, justify="left" if i < self.left else "right", no_wrap=True)
        for i, r in enumerate(self._cells("")):
            t.add_row(*(self._plain(i, j, c, None) for j, c in enumerate(r)))
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
        query_fields: the queries' attributes, ``{query id: {field: value}}`` (extra fields of the
            query files, a ``--groups`` TSV): what ``--group-by FIELD`` splits the queries by. A
            value is a canonical group key (:func:`vdr.types.group_value`), or a tuple of them
            when the query's field is a list (the query is in each of those groups).
        group_comparisons: the per-group comparisons of the fields of ``config.group_by`` on the
            primary metric (:func:`vdr.stats.compare_groups`), as computed by :meth:`grouped`.
        pairwise: every pair of systems (``vdr compare --pairs all``, :func:`vdr.stats.compare_pairs`);
            empty otherwise.
        served_audit: the served systems against their exact backend (results.json
            ``served_audit``, computed by :func:`vdr.experiment.audit.served_audit`; its rows:
            :meth:`served_rows`); ``{}`` when no served system ran.
        rerank_audit: the reranked systems against their base (results.json ``rerank_audit``,
            :func:`vdr.experiment.audit.rerank_audit`; :meth:`rerank_verdicts`,
            :meth:`rerank_gains_table`); ``{}`` when no system was reranked.
        samples: the N-sample rewrite variants (results.json ``samples``, :mod:`vdr.experiment.samples`):
            ``{variant: {"n", "members", "mean", "rrf", "best", "rrf_k", "backends": {backend: {"spread":
            {metric: {"per_sample", "mean", "sd", "ci95"}}, "disagreement": {...}, "run_files"}}, ...}}``;
            ``{}`` when there is none.
        sample_runs: the hidden member runs (``NAME.s1 .. NAME.sN``) of the N-sample variants, one
            :class:`RunResult` each (results.json ``sample_runs``; ``to_pandas("samples")``).
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
    query_fields: dict[str, dict[str, str]] = field(default_factory=dict)
    group_comparisons: list[GroupComparison] = field(default_factory=list)
    pairwise: list[Comparison] = field(default_factory=list)
    served_audit: dict = field(default_factory=dict)
    rerank_audit: dict = field(default_factory=dict)
    samples: dict = field(default_factory=dict)
    sample_runs: list[RunResult] = field(default_factory=list)
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

    @property
    def alpha(self) -> float:
        """Significance level of the verdicts and marks (``config.alpha``, default 0.05): a change is
        significant when its Holm-adjusted p-value is at most ``alpha``."""
        return float(self.config.get("alpha") or ALPHA)

    def _alpha(self, alpha: float | None) -> float:
        return self.alpha if alpha is None else check_alpha(alpha)

    @property
    def group_fields(self) -> list[str]:
        """The query fields of the evaluation's ``--group-by`` (``config.group_by``), in order."""
        return list(self.config.get("group_by") or [])

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
            by_backend = {b: {r.variant: r.metrics for r in self.runs if r.backend == b and r.variant not in self.oracle_variants}
                          for b in self.backends}
            by_backend = {b: v for b, v in by_backend.items() if self.baseline in v}
            cfg = self.config
            self._extra[metric] = compare_variants(by_backend, [metric], baseline=self.baseline,
                                                   n_permutations=int(cfg.get("n_permutations", 10_000)),
                                                   n_bootstrap=int(cfg.get("n_bootstrap", 10_000)), seed=int(cfg.get("seed", 0)))
        return self._extra[metric]

    @property
    def oracle_variants(self) -> set[str]:
        """The oracle best-of-N rows of the N-sample variants (:attr:`samples`): never tested, no verdict."""
        return {str(rec.get("best")) for rec in self.samples.values()}

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

    def summary_table(self, primary: str | None = None, alpha: float | None = None) -> Table:
        """The summary table (the one table model of vdr's results): rows backend x variant; the
        table metrics (``primary`` first, default the evaluation's), the number of queries and, for
        rewrite variants, the change of ``primary`` against the originals on the same backend with
        its tests; under it the verdicts (:meth:`verdicts`); notes: skipped backends, the legend,
        the macro row.

        A change significant at ``alpha`` (default :attr:`alpha`) after Holm is marked (``▲`` gain,
        ``▼`` loss; coloured in HTML); in LaTeX every compared metric's mean carries an arrow
        superscript when that metric's change is significant (ranx's style of marking the values).

        Raises:
            InputError: ``primary`` was not evaluated; ``alpha`` not in (0, 1).
        """
        primary = self.check_metric(primary or self.primary)
        alpha = self._alpha(alpha)
        metrics = self._table_metrics(primary)
        compared = set(self.compared_metrics)
        head = ("backend", "variant", *metrics, "queries", f"d {primary}", "p (perm)", "p (Holm)", "p (t)", "95% CI", "W/T/L")
        titles = ("", "", *(metric_label(m) if metric_label(m) != m else "" for m in metrics), *[""] * 7)
        rows, marks, sups = [], [], []
        reused = self._reused_runs()
        for r in self.rows(primary):
            variant = f"{r['variant']} (same run)" if r["backend"] in reused and r["variant"] != self.baseline else r["variant"]
            if self.samples:
                variant = _sample_label(self.samples, r["backend"], variant, primary)
            cells = [r["backend"], variant, *(fmt4(r[m]) for m in metrics), str(r["queries"])]
            mark = [""] * (len(cells) + 6)
            sup = [""] * (len(cells) + 6)
            if r["delta"] is None:
                cells += [None] * 6
            else:
                lo, hi = r["ci95"]
                cells += [f"{r['delta']:+.4f}", fmt_p(r["p_value"], alpha), fmt_p(r["p_value_holm"], alpha), fmt_p(r["p_value_ttest"], alpha),
                          f"[{lo:+.3f}, {hi:+.3f}]", f"{r['wins']}/{r['ties']}/{r['losses']}"]
                c = self.comparison(r["backend"], r["variant"], primary)
                mark[len(metrics) + 3] = "" if c is None else c.outcome(alpha).replace("ns", "")
                for j, m in enumerate(metrics):
                    cm = self.comparison(r["backend"], r["variant"], m) if m in compared or m == primary else None
                    o = "ns" if cm is None else cm.outcome(alpha)
                    sup[2 + j] = {"gain": r"\textsuperscript{$\uparrow$}", "loss": r"\textsuperscript{$\downarrow$}"}.get(o, "")
            rows.append(tuple(cells))
            marks.append(tuple(mark))
            sups.append(tuple(sup))
        classes = tuple("original" if r.variant == self.baseline else "" for r in self.runs)
        if self.is_run_comparison:  # one pseudo-backend: a column per run name only
            head, titles = ("run", *head[2:]), ("", *titles[2:])
            rows, marks, sups = [r[1:] for r in rows], [m[1:] for m in marks], [x[1:] for x in sups]
        than = "the baseline run" if self.is_run_comparison else "the original queries on the same backend"
        legend = (rf"$\uparrow$/$\downarrow$: significantly higher/lower than {than} after Holm's correction"
                  rf" ($\alpha = {format_alpha(alpha)}$, paired randomization test).")
        notes = [f"{MARK_SYMBOLS['gain']}/{MARK_SYMBOLS['loss']}: significant gain/loss after Holm (alpha {format_alpha(alpha)})."
                 if any(m for row in marks for m in row) else "", *self._notes(primary),
                 holm_decided_note([c for r in self.runs if (c := self.comparison(r.backend, r.variant, primary))], alpha)]
        return Table(head, tuple(rows), tuple(n for n in notes if n), classes, left=1 if self.is_run_comparison else 2,
                     marks=tuple(marks), latex_sups=tuple(sups), verdicts=tuple(self.verdicts(primary, alpha)), latex_legend=legend,
                     titles=titles, sections=(head.index(f"d {primary}"),))

    # ---------------------------------------------------------------- verdicts

    def verdict(self, backend: str, variant: str, primary: str | None = None, alpha: float | None = None) -> str | None:
        """One sentence on ``variant`` against the baseline on ``backend``: the change of ``primary``
        with its 95% bootstrap CI and whether it is significant at ``alpha`` after Holm, e.g.
        ``"keywords: +0.070 nDCG@3 on lexical [95% CI -0.003, +0.154], not significant after Holm
        (p 0.45, α 0.05)"``; for ``vdr compare`` results ``"dense vs bm25 (baseline): ..."``.
        ``None`` for the baseline itself or a variant without a comparison.

        Raises:
            InputError: ``primary`` was not evaluated; ``alpha`` not in (0, 1).
        """
        primary = self.check_metric(primary or self.primary)
        alpha = self._alpha(alpha)
        c = self.comparison(backend, variant, primary)
        if c is None:
            return None
        status = {"gain": "significant gain", "loss": "significant loss", "ns": "not significant"}[c.outcome(alpha)]
        lo, hi = c.ci95
        same = " (same run: 0 by construction)" if backend in self._reused_runs() else ""
        who = f"{variant} vs {self.baseline} (baseline)" if self.is_run_comparison else f"{variant}{same}"
        where = "" if self.is_run_comparison else f" on {backend}"
        return (f"{who}: {c.delta:+.3f} {metric_title(primary)}{where} [95% CI {lo:+.3f}, {hi:+.3f}], {status} after Holm"
                f"{holm_reason(c, alpha)}")

    def verdicts(self, primary: str | None = None, alpha: float | None = None) -> list[str]:
        """:meth:`verdict` of every backend x variant other than the baseline, in :attr:`runs` order;
        with every pair compared (``vdr compare --pairs all``), then :meth:`pair_verdicts`."""
        out = [self.verdict(r.backend, r.variant, primary, alpha) for r in self.runs if r.variant != self.baseline]
        return [v for v in out if v] + [v for v, _ in self.pair_verdicts(primary, alpha)]

    # ---------------------------------------------------------------- groups of queries

    def groups(self, field_name: str) -> dict[str, str | tuple[str, ...]]:
        """``{query id: value}`` of one query field (:attr:`query_fields`) over the evaluated
        queries that have it (a tuple: the query is in several groups, :func:`vdr.stats.query_groups`).

        Raises:
            InputError: no evaluated query has the field (the fields that exist are named).
        """
        ids = self.query_ids
        out = {q: self.query_fields[q][field_name] for q in ids if field_name in self.query_fields.get(q, {})}
        if not out:
            have = sorted({f for q in ids for f in self.query_fields.get(q, {})})
            raise InputError(f"--group-by {field_name}: no evaluated query has a field {field_name!r}; "
                             + (f"the queries' fields are: {', '.join(have)}" if have else
                                "the queries have no fields (add them to the queries file, e.g. \"type\": \"visual\", or give"
                                " --groups FILE.tsv with query-id<TAB>field<TAB>value lines)"))
        return out

    def grouped(self, field_name: str, primary: str | None = None) -> list[GroupComparison]:
        """Each variant against the baseline within each group of ``field_name`` on every backend,
        on ``primary`` (default the evaluation's): :func:`vdr.stats.compare_groups` with the
        evaluation's seed and sizes (Holm over groups x variants of a backend); the stored ones
        when ``results.json`` holds them, else computed (and kept).

        Raises:
            InputError: see :meth:`groups`; ``primary`` was not evaluated.
        """
        primary = self.check_metric(primary or self.primary)
        stored = [g for g in self.group_comparisons if g.field == field_name and g.comparison.metric == primary]
        if stored:
            return stored
        key = ("groups", field_name, primary)
        if key not in self._extra:
            values = self.groups(field_name)
            by_backend = {b: {r.variant: r.metrics for r in self.runs if r.backend == b and r.variant not in self.oracle_variants}
                          for b in self.backends}
            by_backend = {b: v for b, v in by_backend.items() if self.baseline in v and len(v) > 1}
            cfg = self.config
            self._extra[key] = compare_groups(by_backend, {field_name: values}, primary, baseline=self.baseline,
                                              n_permutations=int(cfg.get("n_permutations", 10_000)),
                                              n_bootstrap=int(cfg.get("n_bootstrap", 10_000)), seed=int(cfg.get("seed", 0)),
                                              no_relevant=self.queries_without_relevant())
        return self._extra[key]

    def queries_without_relevant(self) -> list[str]:
        """The evaluated queries with no relevant page (grade >= :attr:`relevance_level`) in the
        qrels, in order; ``[]`` when the qrels are not available (results loaded without them)."""
        if self.qrels is None:
            return []
        return [q for q in self.query_ids if not self.relevant(q)]

    def untested_groups(self, field_name: str) -> dict[str, int]:
        """``{group: size}`` of the groups of ``field_name`` in which no query has a relevant page:
        not compared, out of the Holm family (:func:`vdr.stats.untested_groups`), shown apart in
        one line (:meth:`untested_note`)."""
        values = {q: self.query_fields.get(q, {}).get(field_name) for q in self.query_ids}
        return untested_groups(self.query_ids, values, self.queries_without_relevant())

    def untested_note(self, field_name: str) -> str:
        """One line naming the groups of :meth:`untested_groups` and their sizes (``""`` when none),
        e.g. ``"Not compared: group none (4 queries): no query in it has a relevant page, so every run
        scores 0 there; left out of the Holm family."``."""
        skip = self.untested_groups(field_name)
        if not skip:
            return ""
        names = ", ".join(f"{g} ({n} quer{'y' if n == 1 else 'ies'})" for g, n in skip.items())
        return (f"Not compared: group{'s' if len(skip) > 1 else ''} {names}: no query in {'them' if len(skip) > 1 else 'it'}"
                " has a relevant page, so every run scores 0 there; left out of the Holm family.")

    def group_rows(self, field_name: str, primary: str | None = None, alpha: float | None = None) -> list[dict]:
        """:meth:`grouped` as rows: ``backend, field, group, variant, metric, n_queries,
        baseline_mean, mean, delta, ci_low, ci_high, p_value, p_value_holm, p_value_ttest, wins,
        ties, losses, outcome`` (``"gain"``/``"loss"``/``"ns"`` at ``alpha``; p-values ``None``
        when undefined)."""
        alpha = self._alpha(alpha)
        out = []
        for g in self.grouped(field_name, primary):
            c = g.comparison
            out.append({"backend": g.backend, "field": g.field, "group": g.group, "variant": c.variant, "metric": c.metric,
                        "n_queries": c.n_queries, "baseline_mean": c.original, "mean": c.rewritten, "delta": c.delta,
                        "ci_low": c.ci95[0], "ci_high": c.ci95[1], "p_value": _nan_to_none(c.p_value),
                        "p_value_holm": _nan_to_none(c.p_value_holm), "p_value_ttest": _nan_to_none(c.p_value_ttest),
                        "wins": c.wins, "ties": c.ties, "losses": c.losses, "outcome": c.outcome(alpha)})
        return out

    def group_table(self, field_name: str, primary: str | None = None, alpha: float | None = None) -> Table:
        """The breakdown by one query field: a row per backend x group x variant with the group's
        size, the baseline's and the variant's mean of ``primary``, the change with its 95% CI, the
        paired tests (Holm over the groups x variants of a backend) and W/T/L; significant changes
        marked as in :meth:`summary_table`.

        Raises:
            InputError: see :meth:`grouped`.
        """
        primary = self.check_metric(primary or self.primary)
        alpha = self._alpha(alpha)
        rows, marks = [], []
        run_cmp = self.is_run_comparison
        for r in self.group_rows(field_name, primary, alpha):
            cells = ([] if run_cmp else [r["backend"]]) + [r["group"], str(r["n_queries"]), r["variant"], fmt4(r["baseline_mean"]),
                                                          fmt4(r["mean"]), f"{r['delta']:+.4f}", f"[{r['ci_low']:+.3f}, {r['ci_high']:+.3f}]",
                                                          fmt_p(r["p_value"], alpha), fmt_p(r["p_value_holm"], alpha),
                                                          f"{r['wins']}/{r['ties']}/{r['losses']}"]
            rows.append(tuple(cells))
            mark = [""] * len(cells)
            mark[len(cells) - 5] = r["outcome"].replace("ns", "")
            marks.append(tuple(mark))
        who = "system" if run_cmp else "variant"
        head = (*(() if run_cmp else ("backend",)), field_name, "n", who, f"{self.baseline} {primary}", f"{who} {primary}",
                f"d {primary}", "95% CI", "p (perm)", "p (Holm)", "W/T/L")
        values = {q: self.query_fields.get(q, {}).get(field_name) for q in self.query_ids}
        member = query_groups(self.query_ids, values)
        n_missing = sum(1 for keys in member.values() if keys == (MISSING_GROUP,))
        fams = {len(g.comparison.holm_family) for g in self.grouped(field_name, primary)}
        size = "/".join(map(str, sorted(fams)))
        fam = f"the {size} test{'' if fams == {1} else 's'} (groups x {who}s" + (")" if run_cmp else ") of each backend")
        notes = [f"Queries grouped by their field {field_name!r}; within each group, d = {who} - {self.baseline} on the group's"
                 f" queries; p (perm): paired randomization test; p (Holm): Holm-corrected over {fam}"
                 f"; {MARK_SYMBOLS['gain']}/{MARK_SYMBOLS['loss']}: significant"
                 f" gain/loss (alpha {format_alpha(alpha)}). Small groups can rarely reach significance (an exact test over n queries"
                 " cannot give p below 2/2^n)."]
        notes += [_overlap_note(field_name, member), self.untested_note(field_name),
                  holm_decided_note([g.comparison for g in self.grouped(field_name, primary)], alpha)]
        if n_missing:
            notes.append(f"{n_missing} queries have no {field_name!r}: group (missing).")
        notes = [n for n in notes if n]
        return Table(head, tuple(rows), tuple(notes), left=3 if not run_cmp else 2, marks=tuple(marks), keys=4 if not run_cmp else 3,
                     sections=(head.index(f"d {primary}"),))

    def group_matrix(self, field_name: str, primary: str | None = None, alpha: float | None = None) -> Table:
        """The breakdown by one query field at a glance: a row per group (with its size), a column
        per backend x variant holding the change of ``primary`` within the group (marked when
        significant after Holm, as in :meth:`group_table`)."""
        alpha = self._alpha(alpha)
        rows = self.group_rows(field_name, primary, alpha)
        cols = list(dict.fromkeys((r["backend"], r["variant"]) for r in rows))
        groups = list(dict.fromkeys(r["group"] for r in rows))
        n = {r["group"]: r["n_queries"] for r in rows}
        at = {(r["group"], r["backend"], r["variant"]): r for r in rows}
        cells, marks = [], []
        for g in groups:
            row, mark = [g, str(n[g])], ["", ""]
            for b, v in cols:
                r = at.get((g, b, v))
                row.append(None if r is None else f"{r['delta']:+.3f}")
                mark.append("" if r is None else r["outcome"].replace("ns", ""))
            cells.append(tuple(row))
            marks.append(tuple(mark))
        head = (field_name, "n", *(v if self.is_run_comparison else f"{b}: {v}" for b, v in cols))
        primary = self.check_metric(primary or self.primary)
        member = query_groups(self.query_ids, {q: self.query_fields.get(q, {}).get(field_name) for q in self.query_ids})
        notes = (f"Change in {primary} against {self.baseline} within each group;"
                 f" {MARK_SYMBOLS['gain']}/{MARK_SYMBOLS['loss']}: significant after Holm (alpha {format_alpha(alpha)}).",
                 _overlap_note(field_name, member), self.untested_note(field_name))
        return Table(head, tuple(cells), tuple(n for n in notes if n), left=1, marks=tuple(marks))

    # ---------------------------------------------------------------- query languages (MTEB's subsets)

    @property
    def languages(self) -> list[str]:
        """The query languages of a multilingual evaluation (``config.languages.values``: ViDoRe V2/V3,
        whose queries span two or more languages), in order; ``[]`` otherwise."""
        return list((self.config.get("languages") or {}).get("values") or [])

    def language_rows(self, metric: str | None = None) -> list[dict]:
        """Per backend x variant: each language's own query set and mean of ``metric`` (default the
        primary), then the mean over languages, as MTEB scores a multilingual task (its main score
        is the mean of the per-subset scores, ``TaskResult.get_score``).

        Returns:
            ``[{"backend", "variant", "metric", "language", "n_queries", "mean"}]``; the mean over
            languages has ``language`` :data:`MEAN_OVER_LANGUAGES` and ``n_queries`` the pooled
            count. Undefined values (NaN) are left out of a mean, as in the summary table.
        """
        metric = self.check_metric(metric or self.primary)
        lang = {q: self.query_fields.get(q, {}).get("language") for q in self.query_ids}
        out = []
        for r in self.runs:
            vals = dict(zip(r.metrics.query_ids, r.metrics.values[metric].tolist()))
            means = []
            for language in self.languages:
                xs = [v for q, v in vals.items() if lang.get(q) == language and not math.isnan(v)]
                mean = math.fsum(xs) / len(xs) if xs else None
                means.append(mean)
                out.append({"backend": r.backend, "variant": r.variant, "metric": metric, "language": language,
                            "n_queries": len(xs), "mean": mean})
            defined = [m for m in means if m is not None]
            out.append({"backend": r.backend, "variant": r.variant, "metric": metric, "language": MEAN_OVER_LANGUAGES,
                        "n_queries": sum(1 for q in vals if lang.get(q) in self.languages),
                        "mean": math.fsum(defined) / len(defined) if defined else None})
        return out

    def language_table(self, metric: str | None = None) -> Table:
        """A row per backend x variant, a column per language (that language's queries alone) and
        the mean over languages (MTEB's main score of a multilingual task): :meth:`language_rows`.

        Raises:
            InputError: the evaluation is not multilingual (:attr:`languages` is empty), or
                ``metric`` was not evaluated.
        """
        if not self.languages:
            raise InputError(f"{self._where()}: the queries are in one language; a table per language needs two or more")
        rows = self.language_rows(metric)
        metric = rows[0]["metric"]
        at = {(r["backend"], r["variant"], r["language"]): r for r in rows}
        cols = [*self.languages, MEAN_OVER_LANGUAGES]
        cells = []
        for b, v in dict.fromkeys((r["backend"], r["variant"]) for r in rows):
            cells.append((b, v, *(fmt4(at[(b, v, c)]["mean"]) for c in cols)))
        n = {c: at[(rows[0]["backend"], rows[0]["variant"], c)]["n_queries"] for c in self.languages}
        head = ("backend", "variant", *(f"{c} (n={n[c]})" for c in self.languages), "mean over languages")
        notes = (f"{metric} per query language: each language is its own query set over the same corpus (its queries' mean);"
                 " the last column is their unweighted mean, MTEB's main score of a multilingual task."
                 " Per-language changes with their tests: the breakdown by language.",)
        return Table(head, tuple(cells), notes, left=2)

    # ---------------------------------------------------------------- served systems against exact MaxSim

    def served_systems_audited(self) -> list[dict]:
        """The entries of :attr:`served_audit` (``systems``), audited and skipped, in order."""
        return list((self.served_audit or {}).get("systems") or [])

    def served_rows(self) -> list[dict]:
        """One row per served system of :attr:`served_audit` (what ``to_pandas("served")`` holds):
        ``system, exact, kind, metric, served_value, exact_value, delta, ci_low, ci_high, p_value,
        p_value_holm, wins, ties, losses, n_queries``, ``overlap@k`` per audited cutoff, ``rbo,
        bytes_per_page, exact_bytes_per_page, storage_ratio, ms_per_query, exact_ms_per_query,
        time_ratio, verdict, skipped`` (the reason, or ``None``), then per rewrite variant ``v``:
        ``gain_exact:v, gain_served:v, gain_difference:v, gain_p_value_holm:v, gain_verdict:v``.
        ``None`` where a value is not recorded (a skipped system holds only its names and reason)."""
        audit = self.served_audit or {}
        ks = [f"overlap@{k}" for k in audit.get("overlap_k") or ()]
        keys = ["served_value", "exact_value", "delta", "p_value", "p_value_holm", "wins", "ties", "losses", "n_queries", *ks, "rbo",
                "bytes_per_page", "exact_bytes_per_page", "storage_ratio", "ms_per_query", "exact_ms_per_query", "time_ratio"]
        out = []
        for e in self.served_systems_audited():
            ci = e.get("ci95") or (None, None)
            row = {"system": e.get("system"), "exact": e.get("exact"), "kind": e.get("kind"), "metric": audit.get("metric"),
                   **{k: e.get(k) for k in keys[:3]}, "ci_low": ci[0], "ci_high": ci[1], **{k: e.get(k) for k in keys[3:]},
                   "verdict": e.get("verdict"), "skipped": e.get("skipped")}
            for g in e.get("gains") or ():  # a gain not compared: None, its reason in the verdict
                for k in ("gain_exact", "gain_served", "difference", "p_value_holm", "verdict"):
                    row[f"{k if k.startswith('gain') else 'gain_' + k}:{g['variant']}"] = g.get(k)
            out.append(row)
        return out

    def served_table(self) -> Table:
        """The served systems against their exact backend (:attr:`served_audit`): a row per system,
        the primary metric's change against exact with its 95% CI, Holm p and W/T/L, the rankings'
        overlap and RBO on the original queries, and the storage and time ratios served / exact; the
        verdict lines under it (:meth:`served_verdicts`). A change significant after Holm at the
        audit's ``alpha`` is marked. Empty (no row) when no served system ran."""
        audit = self.served_audit or {}
        metric, alpha = audit.get("metric") or self.primary, float(audit.get("alpha") or self.alpha)
        ks = [f"overlap@{k}" for k in audit.get("overlap_k") or ()]
        head = ("system", "exact", f"d {metric}", "95% CI", "p (Holm)", "W/T/L", *ks, "RBO", "storage ratio", "time ratio")
        rows, marks = [], []
        for e in self.served_systems_audited():
            if e.get("skipped"):  # the reason: its verdict line
                rows.append((str(e.get("system")), str(e.get("exact")), *[None] * (len(head) - 2)))
                marks.append(("",) * len(head))
                continue
            lo, hi = e["ci95"]
            rows.append((e["system"], e["exact"], f"{e['delta']:+.4f}", f"[{lo:+.3f}, {hi:+.3f}]", fmt_p(e["p_value_holm"], alpha),
                         f"{e['wins']}/{e['ties']}/{e['losses']}", *(fmt4(e.get(k)) for k in ks), fmt4(e.get("rbo")),
                         _times(e.get("storage_ratio")), _times(e.get("time_ratio"))))
            marks.append(("", "", e.get("outcome", "ns").replace("ns", ""), *[""] * (len(head) - 3)))
        rbo_p = audit.get("rbo_p")
        notes = (f"Served system minus its exact backend on the original queries: per-query change of {metric} (W/T/L: served"
                 f" higher/equal/lower), 95% bootstrap CI, paired randomization test, Holm over every test of the audit (alpha"
                 f" {format_alpha(alpha)}); overlap@k = |top k of both| / k (k even when fewer pages were retrieved); RBO: rank-biased"
                 f" overlap RBO_ext, p = {rbo_p} (Webber et al. 2010, eq. 32); ratios: bytes per page and ms per query (ranking"
                 " only, query encoding excluded), served / exact.",)
        return Table(head, tuple(rows), notes, left=2, marks=tuple(marks), verdicts=tuple(self.served_verdicts()))

    def served_gains_table(self) -> Table:
        """Whether each rewrite's gain on the exact backend survives on each served system: a row per
        system x rewrite variant, the mean gain over the original queries on exact and on served,
        their difference with its 95% CI and Holm p, the verdict (``survives``, ``shrinks``,
        ``grows``, ``lost``, ``reversed``: the rules in the notes)."""
        audit = self.served_audit or {}
        alpha = float(audit.get("alpha") or self.alpha)
        head = ("system", "variant", "gain exact", "gain served", "difference", "95% CI", "p (Holm)", "verdict")
        rows = []
        for e in self.served_systems_audited():
            for g in e.get("gains") or ():
                if g.get("skipped"):
                    rows.append((e["system"], g["variant"], *[None] * 5, f"not compared: {g['skipped']}"))
                    continue
                lo, hi = g["ci95"]
                rows.append((e["system"], g["variant"], f"{g['gain_exact']:+.4f}", f"{g['gain_served']:+.4f}",
                             f"{g['difference']:+.4f}", f"[{lo:+.3f}, {hi:+.3f}]", fmt_p(g["p_value_holm"], alpha), g.get("verdict")))
        rules = audit.get("verdict_rules") or {}
        notes = (f"Gain: the variant's {audit.get('metric')} minus the original queries' on the same backend (mean over queries);"
                 f" difference: served gain minus exact gain, paired test, Holm over every test of the audit (alpha"
                 f" {format_alpha(alpha)}).", *(f"{k}: {v}." for k, v in rules.items()))
        return Table(head, tuple(rows), notes, left=2)

    def served_verdicts(self) -> list[str]:
        """One line per served system of :attr:`served_audit`: its change against exact and each
        rewrite's gain on both (e.g. ``"multimodal-binary: -0.021 nDCG@3 vs exact multimodal [95% CI
        -0.040, -0.003], ...; rewrite keywords: gain +0.070 -> +0.050 (survives: ...)"``), or why it was not
        audited."""
        return [e["verdict"] if e.get("verdict") else f"{e.get('system')}: not audited ({e.get('skipped')})"
                for e in self.served_systems_audited()]

    # ---------------------------------------------------------------- reranked systems against their base

    def rerank_systems_audited(self) -> list[dict]:
        """The entries of :attr:`rerank_audit` (``systems``), audited and skipped, in order."""
        return list((self.rerank_audit or {}).get("systems") or [])

    def rerank_verdicts(self) -> list[str]:
        """One line per reranked system of :attr:`rerank_audit`: its change against its base and each
        rewrite's gain before and after reranking (e.g. ``"lexical+rerank: +0.012 nDCG@3 vs base
        lexical [...]; rewrite keywords: gain +0.070 before reranking, +0.050 after (survives: ...)"``),
        or why it was not audited."""
        return [e["verdict"] if e.get("verdict") else f"{e.get('system')}: not audited ({e.get('skipped')})"
                for e in self.rerank_systems_audited()]

    def rerank_gains_table(self) -> Table:
        """Whether each rewrite's gain holds after reranking: a row per reranked system x rewrite
        variant, the mean gain over the original queries on the base and on the reranked system,
        their difference with its 95% CI and Holm p (one family: every test of the rerank audit) and
        the verdict (the rules in the notes); the verdict lines under it. Empty when nothing was reranked."""
        audit = self.rerank_audit or {}
        alpha = float(audit.get("alpha") or self.alpha)
        head = ("system", "base", "variant", "gain before", "gain after", "difference", "95% CI", "p (Holm)", "verdict")
        rows = []
        for e in self.rerank_systems_audited():
            for g in e.get("gains") or ():
                if g.get("skipped"):
                    rows.append((e["system"], e.get("exact"), g["variant"], *[None] * 5, f"not compared: {g['skipped']}"))
                    continue
                lo, hi = g["ci95"]
                rows.append((e["system"], e.get("exact"), g["variant"], f"{g['gain_exact']:+.4f}", f"{g['gain_served']:+.4f}",
                             f"{g['difference']:+.4f}", f"[{lo:+.3f}, {hi:+.3f}]", fmt_p(g["p_value_holm"], alpha), g.get("verdict")))
        words = (("the exact gain's sign", "the sign of the gain before reranking"), ("an exact gain", "a gain before reranking"),
                 ("the exact gain", "the gain before reranking"), ("served gain", "gain after reranking"))
        rules = {}
        for k, v in (audit.get("verdict_rules") or {}).items():
            for a, b in words:
                v = v.replace(a, b)
            rules[k] = v
        notes = (f"Gain: the variant's {audit.get('metric')} minus the original queries' on the same system (mean over queries);"
                 f" before: the base backend, after: its top pages reranked; difference: after minus before, paired test, Holm"
                 f" over every test of the rerank audit (alpha {format_alpha(alpha)}).", *(f"{k}: {v}." for k, v in rules.items()))
        return Table(head, tuple(rows), notes, left=2, verdicts=tuple(self.rerank_verdicts()))

    # ---------------------------------------------------------------- every pair of systems

    def pairs_table(self, primary: str | None = None, alpha: float | None = None) -> Table:
        """ranx's comparison table of :attr:`pairwise` (``vdr compare --pairs all``): a row per
        system labelled ``a``, ``b``, ... ; per compared table metric its mean, with the letters of
        the systems it is significantly better than (Holm p at ``alpha``, in the family of :meth:`family_line`)
        as a superscript; W/T/L against the baseline's row is in :meth:`pairwise_table`.

        Raises:
            InputError: no pairwise comparisons (``--pairs all`` was not asked for).
        """
        if not self.pairwise:
            raise InputError("these results hold no comparison of every pair of systems (run `vdr compare --pairs all`)")
        primary = self.check_metric(primary or self.primary)
        alpha = self._alpha(alpha)
        pair_metrics = list(dict.fromkeys(c.metric for c in self.pairwise))
        metrics = [m for m in self._table_metrics(primary) if m in pair_metrics]
        names = [r.variant for r in self.runs if r.backend == self.runs[0].backend]
        letter = {n: _letter(i) for i, n in enumerate(names)}
        beats: dict[tuple[str, str], list[str]] = {}
        for c in self.pairwise:
            o = c.outcome(alpha)
            if o == "gain":
                beats.setdefault((c.variant, c.metric), []).append(c.baseline)
            elif o == "loss":
                beats.setdefault((c.baseline, c.metric), []).append(c.variant)
        rows, sups, latex = [], [], []
        for n in names:
            agg = self.run(self.runs[0].backend, n).metrics.aggregate
            rows.append((letter[n], n, *(fmt4(agg[m]) for m in metrics)))
            won = [sorted((letter[x] for x in beats.get((n, m), [])), key=_names_order(letter)) for m in metrics]
            sups.append(("", "", *("".join(w) for w in won)))
            # ranx's LaTeX: the letters as a math superscript, the others as an invisible phantom (columns stay aligned)
            latex.append(("", "", *(_ranx_latex_sup(w, [letter[x] for x in names if x != n and letter[x] not in w]) for w in won)))
        note = (f"Superscripts: the systems (by letter) that a system is significantly better than on that metric: two-sided paired"
                f" randomization test ({describe_test(self.pairwise)}), Holm-corrected p (the family under the summary table)"
                f" <= alpha {format_alpha(alpha)}.")
        return Table(("#", "run", *metrics), tuple(rows), (note,), left=2, sups=tuple(sups), latex_sups=tuple(latex), latex_legend="",
                     titles=("", "", *(metric_label(m) if metric_label(m) != m else "" for m in metrics)))

    def pairwise_table(self, primary: str | None = None, alpha: float | None = None) -> Table:
        """Every pair of systems on ``primary``: a row per pair (``run`` - ``vs``, in the order of
        :attr:`pairwise`) with the mean change, its 95% CI, the paired tests (Holm: the family of
        :meth:`family_line`) and W/T/L of ``run`` against ``vs``; significant changes marked.

        Raises:
            InputError: no pairwise comparisons; ``primary`` was not compared pairwise.
        """
        if not self.pairwise:
            raise InputError("these results hold no comparison of every pair of systems (run `vdr compare --pairs all`)")
        primary = self.check_metric(primary or self.primary)
        alpha = self._alpha(alpha)
        comps = [c for c in self.pairwise if c.metric == primary]
        if not comps:
            raise InputError(f"{primary} was not compared pairwise; compared: {', '.join(dict.fromkeys(c.metric for c in self.pairwise))}")
        rows, marks = [], []
        for c in comps:
            lo, hi = c.ci95
            rows.append((c.variant, c.baseline, fmt4(c.rewritten), fmt4(c.original), f"{c.delta:+.4f}", f"[{lo:+.3f}, {hi:+.3f}]",
                         fmt_p(c.p_value, alpha), fmt_p(c.p_value_holm, alpha), fmt_p(c.p_value_ttest, alpha), f"{c.wins}/{c.ties}/{c.losses}"))
            marks.append(("", "", "", "", c.outcome(alpha).replace("ns", ""), "", "", "", "", ""))
        return Table(("run", "vs", primary, f"vs {primary}", f"d {primary}", "95% CI", "p (perm)", "p (Holm)", "p (t)", "W/T/L"),
                     tuple(rows), (f"d = run - vs on the same queries; W/T/L: queries where run is better/equal/worse;"
                                   f" p (Holm): the one family under the summary table (the same p as there);"
                                   f" {MARK_SYMBOLS['gain']}/{MARK_SYMBOLS['loss']}: significant after Holm"
                                   f" (alpha {format_alpha(alpha)}).",), left=2, marks=tuple(marks))

    def family_line(self, primary: str | None = None) -> str:
        """The Holm family of ``primary``'s comparisons (default the primary metric) in words, as the
        note under the summary table states it once (``"p (Holm): Holm-corrected over the ..."``):
        its size and what it spans (variants or runs, every pair with ``--pairs all``, the metrics),
        and, when it spans one metric of several compared, that every other metric has its own
        (``vdr compare --family all``: one over them all). ``""`` without comparisons.

        Raises:
            InputError: ``primary`` was not evaluated.
        """
        primary = self.check_metric(primary or self.primary)
        comps = self.comparisons if primary in self.compared_metrics else self._computed(primary)
        if not comps:
            return ""
        fam = next((c.holm_family for _, c in comps if c.metric == primary), comps[0][1].holm_family)
        fam_metrics = list(dict.fromkeys(lab.rsplit(":", 1)[-1] for lab in fam))
        others = [m for m in self.compared_metrics if m not in fam_metrics]
        per_metric = all(len({lab.rsplit(":", 1)[-1] for lab in c.holm_family}) == 1 for _, c in self.comparisons)
        tail = ""
        if others and per_metric:
            tail = f"; each other metric ({', '.join(others)}) its own family" + (
                " (--family all: one over every metric)" if self.is_run_comparison else "")
        tests = f"{len(fam)} test{'' if len(fam) == 1 else 's'}"
        pair_fam = next((c.holm_family for c in self.pairwise if c.metric == primary), None)
        if self.pairwise and fam == pair_fam:
            n = len(self.names_compared_pairwise())
            return (f"{tests} of one family: every pair of the {n} systems ({n * (n - 1) // 2} pairs, the baseline's"
                    f" included) x {', '.join(fam_metrics)}; each test has this one Holm p in every table{tail}")
        if self.is_run_comparison:
            return f"{tests} (runs x {', '.join(fam_metrics)}){tail}"
        return f"{tests} (variants x {', '.join(fam_metrics)}) of each backend{tail}"

    def names_compared_pairwise(self) -> list[str]:
        """The systems of :attr:`pairwise`, in the order they were compared (empty without pairs)."""
        return list(dict.fromkeys(n for c in self.pairwise for n in (c.baseline, c.variant)))

    def pair_verdicts(self, primary: str | None = None, alpha: float | None = None) -> list[tuple[str, str]]:
        """``(sentence, outcome)`` for each pair of systems without the baseline whose change of
        ``primary`` is significant at ``alpha`` after Holm (``vdr compare --pairs all``; the pairs
        with the baseline are :meth:`verdict`'s), e.g. ``("keywords vs conversational: +0.119
        nDCG@3 [95% CI +0.02, +0.22], significant gain after Holm (p 0.026, α 0.05)", "gain")``;
        then one sentence counting the other pairs (outcome ``"ns"``). Empty without pairs.

        Raises:
            InputError: ``primary`` was not evaluated; ``alpha`` not in (0, 1).
        """
        primary = self.check_metric(primary or self.primary)
        alpha = self._alpha(alpha)
        pairs = [c for c in self.pairwise if c.metric == primary and self.baseline not in (c.variant, c.baseline)]
        if not pairs:
            return []
        out = []
        for c in pairs:
            o = c.outcome(alpha)
            if o == "ns":
                continue
            lo, hi = c.ci95
            out.append((f"{c.variant} vs {c.baseline}: {c.delta:+.3f} {metric_title(primary)} [95% CI {lo:+.3f}, {hi:+.3f}],"
                        f" significant {o} after Holm (p {fmt_p_short(c.p_value_holm, alpha)}, \u03b1 {format_alpha(alpha)})", o))
        rest = len(pairs) - len(out)
        if rest:
            out.append((f"{rest} {'other ' if out else ''}pair{'s' if rest > 1 else ''} of systems without the baseline:"
                        f" not significant after Holm (\u03b1 {format_alpha(alpha)}; every pair: the pairwise table)", "ns"))
        return out

    def _notes(self, primary: str) -> list[str]:
        notes = [f"{b}: skipped: {reason}" for b, reason in self.skipped.items()]
        comps = self.comparisons if primary in self.compared_metrics else self._computed(primary)
        if comps:
            what = (f"d = run - baseline ({self.baseline}) on the same queries" if self.is_run_comparison
                    else "d = rewritten - original on the same backend and queries")
            family = self.family_line(primary)
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
        if self.samples:
            notes += _sample_notes(self.samples, primary, metric_title)
        if any(r.backend == "macro" for r in self.runs):
            notes.append("macro: unweighted mean of the backends' per-query values (labelled; not a backend).")
        gain = self.config.get("graded_gain")
        if gain and gain["metric"] == primary:
            per_backend: dict[str, list[str]] = {}
            for k, v in gain["values"].items():
                b, _, variant = k.partition("/")
                per_backend.setdefault(b, []).append(f"{variant} {fmt4(v[gain['exp_metric']])}")
            shown = "; ".join(f"{b}: {', '.join(xs)}" for b, xs in per_backend.items())
            notes.append(f"graded qrels: {primary} uses linear gain (trec_eval, MTEB); with exponential gain 2^grade - 1 (some model"
                         f" cards) {gain['exp_metric']} differs by up to {gain['max_difference']:.4f}: {shown}.")
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
        how = ("count 0 in every mean (--exclude-queries-without-relevant leaves them out)"
               if p.get("queries_without_relevant", "zero") == "zero" else "are left out (--exclude-queries-without-relevant)")
        line = (f"query set: the qrels' queries, {n_avg} averaged; relevant = grade >= {p.get('relevance_level', 1)};"
                f" {no_rel} of the qrels' queries have no page of grade > 0 and {how}")
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

    def _sample_rows(self):
        member = {m: (name, i + 1) for name, rec in self.samples.items() for i, m in enumerate(rec.get("members") or ())}
        for r in self.sample_runs:
            name, i = member.get(r.variant, (r.variant, 0))
            for m, col in r.metrics.values.items():
                for q, x in zip(r.metrics.query_ids, col.tolist()):
                    yield r.backend, name, i, q, m, x

    def to_pandas(self, what: str = "per_query"):
        """A tidy :class:`pandas.DataFrame`.

        * ``"per_query"`` (default): per-query values, one row per backend, variant, query and
          metric; columns ``backend, variant, query_id, metric`` (str) and ``value`` (float64, NaN
          where undefined), then one column per field of ``--group-by`` (:attr:`group_fields`: the
          query's value, ``(missing)`` when it has none); rows in :attr:`runs` order, then query,
          then metric.
        * ``"groups"``: :meth:`group_rows` of every field of :attr:`group_fields`.
        * ``"languages"``: :meth:`language_rows` on the primary metric (multilingual evaluations).
        * ``"served"``: :meth:`served_rows`, one row per served system (:attr:`served_audit`).
        * ``"samples"``: the per-sample values of the N-sample variants (:attr:`sample_runs`): columns
          ``backend, variant`` (the N-sample variant), ``sample`` (1-based), ``query_id, metric, value``.
        * ``"pairs"``: every pair of systems (:attr:`pairwise`), one row per pair and metric:
          ``run, vs, metric, mean, vs_mean, delta, ci_low, ci_high, p_value, p_value_holm,
          p_value_ttest, wins, ties, losses, outcome``.

        Raises:
            ImportError: pandas is not installed (``pip install pandas``).
            InputError: an unknown ``what``.
        """
        import pandas as pd

        if what == "groups":
            return pd.DataFrame.from_records([r for f in self.group_fields for r in self.group_rows(f)])
        if what == "languages":
            return pd.DataFrame.from_records(self.language_rows())
        if what == "served":
            return pd.DataFrame.from_records(self.served_rows())
        if what == "samples":
            return pd.DataFrame.from_records(list(self._sample_rows()), columns=["backend", "variant", "sample", "query_id", "metric", "value"])
        if what == "pairs":
            return pd.DataFrame.from_records([
                {"run": c.variant, "vs": c.baseline, "metric": c.metric, "mean": c.rewritten, "vs_mean": c.original, "delta": c.delta,
                 "ci_low": c.ci95[0], "ci_high": c.ci95[1], "p_value": c.p_value, "p_value_holm": c.p_value_holm,
                 "p_value_ttest": c.p_value_ttest, "wins": c.wins, "ties": c.ties, "losses": c.losses, "outcome": c.outcome(self.alpha)}
                for c in self.pairwise])
        if what != "per_query":
            raise InputError(f"to_pandas({what!r}): choose 'per_query', 'groups', 'languages', 'pairs', 'served' or 'samples'")
        df = pd.DataFrame.from_records(list(self._long_rows()), columns=list(PER_QUERY_COLUMNS))
        df["value"] = df["value"].astype("float64")
        for f in self.group_fields:
            df[f] = df["query_id"].map(lambda q, f=f: _frame_value(self.query_fields.get(q, {}).get(f, MISSING_GROUP)))
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
            "backend_reports": _without_timings(self.backend_reports),
            "variants": {name: dict(_length_stats(qs), queries={q: {"text": x.text, "history": list(x.history),
                                                                         **({"answers": list(x.answers)} if x.answers else {})}
                                                                      for q, x in qs.items()})
                         for name, qs in self.variants.items()},
            "runs": [_run_entry(r) for r in self.runs],
            "comparisons": [dict(c.to_dict(), backend=b) for b, c in self.comparisons],
            **({"query_fields": self.query_fields} if self.query_fields else {}),
            **({"groups": [g.to_dict() for f in self.group_fields for g in self.grouped(f)]} if self.group_fields else {}),
            **({"pairwise": [c.to_dict() for c in self.pairwise]} if self.pairwise else {}),
            **({"per_language": self.language_rows()} if self.languages else {}),
            **({"served_audit": self.served_audit} if self.served_audit else {}),
            **({"rerank_audit": self.rerank_audit} if self.rerank_audit else {}),
            **({"samples": self.samples} if self.samples else {}),
            **({"sample_runs": [_run_entry(r) for r in self.sample_runs]} if self.sample_runs else {}),
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
        for r in self.sample_runs:  # the members of N-sample variants (in memory, else read from this folder)
            if r.run_file and not (same and r.ranking is None and (out / r.run_file).is_file()):
                if r.ranking is None and (self.root is None or not (Path(self.root) / r.run_file).is_file()):
                    raise InputError(f"the run of sample {r.variant} on {r.backend} is neither in memory nor in {self.root}")
                ranking = r.ranking if r.ranking is not None else load_run(Path(self.root) / r.run_file)
                save_run(ranking, out / r.run_file, tag=f"vdr-{r.backend}-{r.variant}")
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
        groups = [GroupComparison(g["backend"], g["field"], g["group"], _comparison_from_doc(g, path)) for g in doc.get("groups") or []]
        pairwise = [_comparison_from_doc(c, path) for c in doc.get("pairwise") or []]
        fields = {str(q): {str(k): tuple(map(str, v)) if isinstance(v, list) else str(v) for k, v in f.items()}
                  for q, f in (doc.get("query_fields") or {}).items()}
        config = doc.get("config") or {}
        rel = config.get(RELATIVE_INPUTS) or {}
        qrels = _optional(config.get("qrels"), root, "qrels file", load_qrels, "relevance marks not shown", warnings, rel.get("qrels"))
        corpus = (None if config.get("command") == "compare" and not config.get("corpus_dir")  # runs compared on qrels alone
                  else _optional(config.get("corpus_dir"), root, "corpus folder", load_corpus, "page images not shown", warnings,
                                 rel.get("corpus_dir")))
        return cls(config=config, versions=doc.get("versions") or {}, runs=runs, comparisons=comparisons,
                   skipped=dict(doc.get("skipped") or {}), variants=variants, backend_reports=doc.get("backend_reports") or {},
                   root=root, qrels=qrels, corpus=corpus, warnings=warnings, query_fields=fields, group_comparisons=groups,
                   pairwise=pairwise, served_audit=dict(doc.get("served_audit") or {}),
                   rerank_audit=dict(doc.get("rerank_audit") or {}), samples=dict(doc.get("samples") or {}),
                   sample_runs=[RunResult(r["backend"], r["variant"], r.get("run_file"), _metrics_from_doc(r))
                                for r in doc.get("sample_runs") or []])


# --------------------------------------------------------------------------------------------
# reading


def _read_document(root: Path, path: Path) -> dict:
    """``results.json`` parsed and checked (schema version, runs)."""
    if not path.is_file():
        raise not_a_results_folder(root)
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


# --------------------------------------------------------------------------------------------
# N-sample variants (issue 37.2; computed by vdr.experiment.samples)

def _rows_of(samples: Mapping) -> dict[str, tuple[str, dict]]:
    """``{row name: (kind, record)}`` of results.json ``samples``; kind ``mean``, ``rrf`` or ``best``."""
    out: dict[str, tuple[str, dict]] = {}
    for rec in samples.values():
        for kind in ("mean", "rrf", "best"):
            out[str(rec[kind])] = (kind, rec)
    return out


def _sample_label(samples: Mapping, backend: str, variant: str, primary: str) -> str:
    """The table's label of ``variant`` (results.json ``samples`` records, :mod:`vdr.experiment.samples`): the mean row with its
    spread on ``primary`` (``rl (mean of 3, sd 0.0141)``), the fused row, the oracle row; other
    variants unchanged."""
    kind, rec = _rows_of(samples).get(variant, (None, None))
    if kind is None:
        return variant
    if kind == "rrf":
        return f"{variant} (RRF of {rec['n']} samples)"
    if kind == "best":
        return f"{variant} (oracle upper bound, not tested)"
    s = ((rec.get("backends") or {}).get(backend) or {}).get("spread", {}).get(primary)
    sd = "" if s is None or s.get("sd") is None else f", sd {s['sd']:.4f}"
    return f"{variant} (mean of {rec['n']} samples{sd})"


def _sample_notes(samples: Mapping, primary: str, title=str) -> list[str]:
    """One note per N-sample variant: per backend the per-sample means of ``primary``, their mean,
    sd and 95% t-interval, and the share of queries whose samples disagree on hit@k; what the three
    rows are."""
    notes = []
    for name, rec in samples.items():
        parts = []
        for b, br in (rec.get("backends") or {}).items():
            s, d = br["spread"].get(primary), br.get("disagreement") or {}
            if s is None:
                continue
            ci = "" if s.get("ci95") is None else f", 95% t-interval [{s['ci95'][0]:.4f}, {s['ci95'][1]:.4f}]"
            sd = "" if s.get("sd") is None else f" ± {s['sd']:.4f} (sd)"
            parts.append(f"{b}: per sample {', '.join(f'{x:.4f}' for x in s['per_sample'])}; {s['mean']:.4f}{sd}{ci};"
                         f" samples disagree on {d.get('metric')} for {d.get('share', 0.0):.0%} of the queries"
                         f" ({d.get('queries', 0)} of {d.get('num_queries', 0)})")
        notes.append(f"{name}: {rec['n']} samples per query ({title(primary)}: " + "; ".join(parts) + f"). {rec['mean']}: per query the"
                     f" mean over the samples, tested (one test per metric); {rec['rrf']}: reciprocal rank fusion (k {rec['rrf_k']:g})"
                     f" of the sample runs, tested; {rec['best']}: oracle upper bound (per query the sample best on {title(primary)}),"
                     " never tested nor in a verdict.")
    return notes


def _run_entry(r: RunResult) -> dict:
    """One entry of results.json ``runs`` (or ``sample_runs``)."""
    return {"backend": r.backend, "variant": r.variant, "run_file": r.run_file, "num_queries": r.metrics.num_queries,
            "policy": dict(r.metrics.policy), "aggregate": r.metrics.aggregate, "per_query": r.metrics.per_query}


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
            n_bootstrap=test.get("n_bootstrap", 10_000), seed=test.get("seed", 0), baseline=c.get("baseline"),
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


#: Wall-clock measurements in the backends' reports: kept in memory (the served and rerank audits'
#: time columns come from them) and out of results.json, whose bytes must not depend on the machine's
#: load (a torchrun run writes the single process' results.json byte for byte; docs/scaling.md).
TIMING_KEYS = frozenset({"score_seconds", "rerank_seconds", "ms_per_query", "seconds"})


def _without_timings(node: object) -> object:
    """``node`` (a backend report) without the :data:`TIMING_KEYS` at any depth."""
    if isinstance(node, Mapping):
        return {k: _without_timings(v) for k, v in node.items() if k not in TIMING_KEYS}
    return node


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
