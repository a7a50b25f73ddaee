"""The report: one self-contained HTML file and a Markdown summary of a results folder.

The page opens on what won: a table of contents, the verdicts (one sentence per backend x variant:
the change of the primary metric with its 95% CI and whether it is significant after Holm), the
summary table with the significant changes marked (symbol and colour) and, with ``--group-by``,
the change within each group of queries; the details follow (every pair of systems, metrics with
intervals, per-query changes, the largest regressions and gains with their pages, hole rates, the
inputs).

The HTML embeds every image as a ``data:`` URI (PNG plots; each distinct page thumbnail once, as
the JPEG background of a CSS class that every occurrence of the page uses), carries its CSS inline,
has no script and no external URL, and forbids any network load with a Content-Security-Policy
(``default-src 'none'; img-src data:; style-src 'unsafe-inline'``; ``img-src`` covers the CSS
backgrounds). A click on a page thumbnail opens the page full size: the page image file, copied
beside the report into ``<report name>_pages/`` (a link, so the HTML stays small; the thumbnails
work without that folder; the link is percent-encoded, :func:`relative_url`, so a report named
with ``#``, ``%``, ``?`` or a space still opens its pages). Passages (passage corpora) are shown as text. Every text that comes
from the user (query texts, history, page ids, paths, reasons) is HTML-escaped; a missing value is
shown as ``—``. Output is deterministic: no timestamps, seeded bootstrap and jitter. The results
are read only through :meth:`vdr.results.Results.load`.

For ``vdr compare`` results the report speaks of systems and their baseline and has no
rewrite-only section; their pages and query texts are shown when the corpus and the queries are
known (``vdr compare --corpus/--queries``, or ``vdr report --corpus/--queries``), page ids and
query ids only otherwise.
"""

from __future__ import annotations

import base64
import dataclasses
import inspect
import io
import json
import shutil
from urllib.parse import quote
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..stats import bootstrap_ci, format_alpha
from ..errors import InputError, VdrError
from ..io.atomic import write_text_atomic
from ..options import with_keywords
from ..results import MARK_SYMBOLS, Results, Table, fmt4, md_escape as _md
from ..results import html_escape as esc

__all__ = ["report", "ReportPaths", "ReportOptions", "bar_metrics", "hole_metric", "THUMB_WIDTH", "pages_dir_of",
           "relative_url"]

THUMB_WIDTH = 150
THUMB_MAX_HEIGHT = 220
MISSING = "—"


@dataclass(frozen=True)
class ReportPaths:
    """What :func:`report` wrote.

    Attributes:
        html: the self-contained HTML report.
        markdown: the Markdown summary beside it (same stem, ``.md``).
        missing_images: number of distinct pages whose image could not be shown (placeholders).
        warnings: everything that could not be read or shown, one line each.
        latex: the LaTeX summary table, when asked for.
        thumbnails: number of distinct page images embedded (each once).
        pages: the folder of the full-size page images beside the HTML (``None`` when no page
            image was shown).
    """

    html: Path
    markdown: Path
    missing_images: int = 0
    warnings: list[str] = field(default_factory=list)
    latex: Path | None = None
    thumbnails: int = 0
    pages: Path | None = None


@dataclass(frozen=True)
class ReportOptions:
    """Every option of :func:`report` (all but ``results_dir`` and ``out``), with its default.

    Attributes:
        top: number of regressions and of gains shown per backend.
        primary_metric: the metric of the verdicts, the change columns, the groups and the cases
            (default: the evaluation's, ``ndcg@3``; e.g. ``ndcg@5`` as ViDoRe, ``ndcg@10`` as BEIR).
        latex: also write the summary table (and, for ``vdr compare --pairs all``, ranx's table of
            every pair) as LaTeX ``table`` floats (booktabs) to this file.
        alpha: significance level of the verdicts and marks (default: the evaluation's, 0.05).
        group_by: query fields to break the comparisons down by (default: the evaluation's
            ``--group-by``); ``()`` for none.
        groups: a TSV ``query-id<TAB>field<TAB>value`` of query fields (they win over the
            stored fields and the queries file's).
        queries: a queries file: its texts are shown where the results hold none (``vdr compare``
            results), its extra fields can be grouped by.
        corpus: a corpus folder whose pages (or passages) are shown: for ``vdr compare`` results,
            or when the evaluation's corpus moved.
    """

    top: int = 5
    primary_metric: str | None = None
    latex: str | Path | None = None
    alpha: float | None = None
    group_by: Sequence[str] | None = None
    groups: str | Path | None = None
    queries: str | Path | None = None
    corpus: str | Path | None = None


def pages_dir_of(html: str | Path) -> Path:
    """The folder of the full-size page images of the report ``html``: ``<stem>_pages`` beside it
    (``report.html`` -> ``report_pages/``)."""
    html = Path(html)
    return html.with_name(html.stem + "_pages")


def relative_url(*segments: str) -> str:
    """A relative link to the file ``segments`` (folder names, then the file name) as a browser
    reads it: each segment percent-encoded as RFC 3986 requires of a path segment (UTF-8; ``#``,
    ``%``, ``?``, spaces and every other character outside the unreserved set escaped), joined by
    ``/``; the HTML attribute escaping comes on top (:func:`html_escape`).

    >>> relative_url("my report #2 (50% ?)_pages", "images/p-1.png")
    'my%20report%20%232%20%2850%25%20%3F%29_pages/images/p-1.png'
    >>> relative_url("résumé_pages", "a.png")
    'r%C3%A9sum%C3%A9_pages/a.png'
    """
    return "/".join(quote(part, safe="") for seg in segments for part in seg.split("/"))


def _show(x: object) -> str:
    """A value for display: ``—`` for ``None``."""
    return MISSING if x is None else str(x)


def _f4(x: float | None) -> str:
    v = fmt4(x)
    return MISSING if v is None else v


def _data_uri(data: bytes, mime: str) -> str:
    return f"data:{mime};base64," + base64.b64encode(data).decode("ascii")


def bar_metrics(res: Results, primary: str | None = None) -> list[str]:
    """The metrics of the per-backend bar charts: nDCG@3, MRR@3, Recall@10 when evaluated, else the
    table's first two metrics and recall at the largest cutoff; ``primary`` (when given and not one
    of them) replaces the first."""
    have = set(res.metric_names)
    wanted = ["ndcg@3", "mrr@3", "recall@10"]
    if all(m in have for m in wanted):
        out = wanted
    else:
        ks = [int(m.split("@")[1]) for m in have if m.startswith("recall@")]
        out = [m for m in res.table_metrics[:2] if m in have] + ([f"recall@{max(ks)}"] if ks else [])
    primary = primary or res.primary
    return out if primary in out else [primary, *out[1:]]


def hole_metric(res: Results) -> str | None:
    """The hole metric of the summary table (``hole@3``), or the smallest-cutoff one evaluated."""
    for m in res.table_metrics:
        if m.startswith("hole@"):
            return m
    have = [m for m in res.metric_names if m.startswith("hole@")]
    return min(have, key=lambda m: int(m.split("@")[1])) if have else None


# --------------------------------------------------------------------------------------------
# thumbnails


#: Characters of a passage shown in place of a page thumbnail (passage corpora; the box scrolls).
PASSAGE_CHARS = 1200


class _Thumbs:
    """Page thumbnails, each distinct page embedded once: a CSS class ``pgN`` per page whose
    background is the JPEG (data URI), used by every figure of that page; each shown page's image
    file is copied once into ``pages`` (the full-size view a click on the thumbnail opens); counts
    missing images. Without any known corpus (``vdr compare`` without ``--corpus``), pages are
    shown by their id only (no placeholder, nothing counted missing)."""

    def __init__(self, res: Results, pages: Path) -> None:
        self.res = res
        self.pages = pages
        self.classes: dict[str, str | None] = {}  # corpus id -> class name (None: image missing)
        self.files: dict[str, str] = {}  # corpus id -> the full-size file's name in `pages`
        self.rules: list[str] = []
        self.missing: set[str] = set()
        self.no_corpus = res.corpus is None and not res.config.get("corpus_dir")

    def cls(self, corpus_id: str) -> str | None:
        """The CSS class showing the page's thumbnail (made on first use), or ``None`` when its image is missing."""
        if corpus_id not in self.classes:
            im = self.res.page_image(corpus_id)
            if im is None:
                self.classes[corpus_id] = None
                self.missing.add(corpus_id)
            else:
                im.thumbnail((THUMB_WIDTH, THUMB_MAX_HEIGHT))
                buf = io.BytesIO()
                im.save(buf, format="JPEG", quality=80)
                name = f"pg{len(self.rules)}"
                height = max(1, round(THUMB_WIDTH * im.size[1] / im.size[0]))
                self.rules.append(f".{name}{{background-image:url({_data_uri(buf.getvalue(), 'image/jpeg')});height:{height}px}}")
                self.classes[corpus_id] = name
                self._copy_full(corpus_id)
        return self.classes[corpus_id]

    def _copy_full(self, corpus_id: str) -> None:
        """Copy the page's image file into :attr:`pages` (skipped when an identical copy is there)."""
        from ..corpus import image_name

        try:
            src = self.res.corpus.image_path(corpus_id)
        except (VdrError, KeyError, OSError):
            return
        name = Path(image_name(corpus_id, src.suffix.lower() or ".png")).name
        dst = self.pages / name
        try:
            if not (dst.is_file() and dst.stat().st_size == src.stat().st_size):
                self.pages.mkdir(parents=True, exist_ok=True)
                tmp = dst.with_name(dst.name + ".tmp")
                shutil.copyfile(src, tmp)
                tmp.replace(dst)
            self.files[corpus_id] = name
        except OSError:
            return

    def _passage(self, corpus_id: str) -> str | None:
        """The passage's title and text (passage corpora; up to :data:`PASSAGE_CHARS` characters),
        else ``None``; ``"(not in the collection)"`` for an absent judged passage, ``"(empty
        passage)"`` for an empty one."""
        corpus = self.res.corpus
        if corpus is None or corpus.kind != "passage":
            return None
        if corpus_id not in corpus:
            return "(not in the collection)"
        from ..corpus import passage_text

        text = passage_text(*corpus.passage(corpus_id))
        return (text[:PASSAGE_CHARS] + (" ..." if len(text) > PASSAGE_CHARS else "")) if text.strip() else "(empty passage)"

    def css(self) -> str:
        """One CSS rule per embedded page image."""
        return "\n".join(self.rules)

    def figure(self, corpus_id: str, caption: str, grade: int | None, relevance_level: int) -> str:
        """A ``<figure>``: the thumbnail (a link to the full-size page), the passage text, an id
        chip or a placeholder; the caption, the id and the relevance mark (frame colour)."""
        if grade is None:
            cls, mark = "unjudged", "unjudged"
        elif grade >= relevance_level:
            cls, mark = "relevant", f"relevant, grade {grade}"
        else:
            cls, mark = "nonrel", f"judged not relevant, grade {grade}"
        passage = self._passage(corpus_id)
        if passage is not None:
            pic = f'<div class="psg" role="note">{esc(passage)}</div>'
            cls += " text"
        elif self.no_corpus:
            pic = f'<div class="noimg" role="note">{esc(corpus_id)}</div>'
        else:
            name = self.cls(corpus_id)
            if name is None:
                pic = f'<div class="missing" role="img" aria-label="image missing">image missing<br>{esc(corpus_id)}</div>'
            else:
                pic = f'<div class="pg {name}" role="img" aria-label="{esc(corpus_id)}"></div>'
                if corpus_id in self.files:
                    href = relative_url(self.pages.name, self.files[corpus_id])
                    pic = f'<a class="full" href="{esc(href)}" target="_blank" title="open the page full size">{pic}</a>'
        return (f'<figure class="thumb {cls}">{pic}<figcaption>{caption}<br><span class="id">{esc(corpus_id)}</span>'
                f'<br><span class="mark">{esc(mark)}</span></figcaption></figure>')


# --------------------------------------------------------------------------------------------
# sections


CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:.8em auto;max-width:1320px;color:#222;padding:0 1em;line-height:1.35}
h1{font-size:1.35em;margin:.2em 0 .3em}h2{font-size:1.2em;border-bottom:2px solid #ddd;padding-bottom:.15em;margin:1.6em 0 .4em}
h3{font-size:1.05em;margin:1.1em 0 .3em}
nav.toc{font-size:.88em;margin:0 0 .5em;padding:.3em .5em;background:#f6f6f6;border-radius:4px}
nav.toc a{margin-right:1em;color:#0b5394;text-decoration:none}nav.toc a:hover{text-decoration:underline}
section.first h2{margin-top:.7em}
table{border-collapse:collapse;font-size:.84em;margin:.4em 0}th,td{border:1px solid #ccc;padding:.2em .45em;text-align:right}
th{background:#f3f3f3}td:first-child,td:nth-child(2),th:first-child,th:nth-child(2){text-align:left}
tr.original td{background:#fafafa}
td.gain{color:#0a6b2d;font-weight:700;background:#e6f4ea}td.loss{color:#b3261e;font-weight:700;background:#fce8e6}
ul.verdicts{margin:.2em 0 .4em;padding-left:1.3em;font-size:.93em}ul.verdicts li{margin:.05em 0}
div.notes{margin-top:.8em}
ul.verdicts li.gain{color:#0a6b2d;font-weight:600}ul.verdicts li.loss{color:#b3261e;font-weight:600}
.warn{background:#fff4e5;border:1px solid #f0a040;padding:.4em 1em;border-radius:4px}
.note{color:#555;font-size:.86em;margin:.25em 0}
details{margin:.4em 0}details>summary{cursor:pointer;color:#0b5394;font-size:.9em}
img.plot{max-width:100%;height:auto;display:block;margin:.5em 0}
.case{border:1px solid #ddd;border-radius:6px;padding:.6em 1em;margin:1em 0;background:#fdfdfd}
.case h4{margin:.2em 0 .5em}.q{margin:.2em 0}.q .lbl{display:inline-block;min-width:9em;font-weight:600}
.hist{color:#666;font-size:.9em;margin:.1em 0 .3em 9em}
.strips{display:flex;flex-wrap:wrap;align-items:flex-start;gap:.4em 1.6em;margin:.5em 0 .2em}
.strip{display:flex;flex-direction:column;gap:.2em}.strip .lbl{font-weight:600;font-size:.85em}
.figs{display:flex;flex-wrap:wrap;align-items:flex-start;gap:.4em}
figure.thumb{margin:0;width:156px;font-size:.72em;text-align:center;word-break:break-all}
figure.thumb.text{width:276px}
a.full{display:block;cursor:zoom-in}a.full:hover .pg{outline:2px solid #0b5394}
.pg{border:3px solid #bbb;display:block;width:150px;background-size:100% 100%;background-repeat:no-repeat}
figure.relevant .pg,figure.relevant .missing,figure.relevant .psg,figure.relevant .noimg{border-color:#1a9850}
figure.nonrel .pg,figure.nonrel .missing,figure.nonrel .psg,figure.nonrel .noimg{border-color:#d73027}
figure.unjudged .pg,figure.unjudged .missing,figure.unjudged .psg,figure.unjudged .noimg{border-style:dashed}
.psg{width:262px;max-height:13em;overflow:auto;border:3px solid #bbb;background:#fff;color:#222;font-size:1.25em;line-height:1.35;
 text-align:left;padding:.35em .5em;word-break:normal;overflow-wrap:anywhere;white-space:pre-wrap}
.noimg{width:144px;min-height:3em;border:3px solid #bbb;background:#f4f4f4;color:#333;display:flex;align-items:center;justify-content:center;
 padding:.2em;font-size:1.1em}
.missing{width:144px;height:100px;border:3px solid #bbb;background:repeating-linear-gradient(45deg,#eee,#eee 8px,#f8f8f8 8px,#f8f8f8 16px);
 display:flex;flex-direction:column;align-items:center;justify-content:center;color:#a00;font-weight:600;word-break:break-all}
.mark{color:#555}.id{color:#333}
"""


class _Words:
    """How the report names things: rewrite variants against the original queries (``vdr
    evaluate``), or systems against their baseline run (``vdr compare``)."""

    def __init__(self, res: Results) -> None:
        self.systems = res.is_run_comparison
        self.base = res.baseline
        self.who = "system" if self.systems else "rewrite variant"
        self.change = f"system - baseline ({res.baseline})" if self.systems else "rewritten - original"
        self.helped = "the system beat the baseline" if self.systems else "the rewrite helped"

    def panel(self, backend: str) -> str:
        """A plot panel's title: the backend, or the baseline the systems are compared with."""
        return f"against {self.base}" if self.systems else backend


def _bars_section(res: Results, primary: str, words: _Words) -> tuple[str, list[str]]:
    from .plots import metric_bars

    metrics = bar_metrics(res, primary)
    n_boot = int(res.config.get("n_bootstrap") or 10_000)
    seed = int(res.config.get("seed") or 0)
    parts = [
        f"<h2 id=\"metrics\">Metrics per {'system' if words.systems else 'backend'} with 95% bootstrap intervals</h2>",
        f'<p class="note">Bars: mean over the {len(res.query_ids)} queries; whiskers: 95% percentile bootstrap interval '
        f"of the mean ({n_boot} resamples of the queries, seed {seed}).</p>",
    ]
    rows = []
    for b in res.backends:
        vs = [v for v in res.variants if res.has_run(b, v)]
        means = np.zeros((len(vs), len(metrics)))
        ci = np.zeros((len(vs), len(metrics), 2))
        for i, v in enumerate(vs):
            for j, m in enumerate(metrics):
                x = res.values(b, v, m)
                x = x[~np.isnan(x)]
                means[i, j] = float(x.mean()) if len(x) else float("nan")
                ci[i, j] = bootstrap_ci(x, n_bootstrap=n_boot, seed=seed) if len(x) else (np.nan, np.nan)
            rows.append(((() if words.systems else (b,)) + (v, *(f"{means[i, j]:.4f} [{ci[i, j, 0]:.3f}, {ci[i, j, 1]:.3f}]"
                                                                    for j in range(len(metrics))))))
        png = metric_bars("systems" if words.systems else b, metrics, vs, means, ci)
        alt = f"{b}: " + "; ".join(f"{v} " + ", ".join(f"{m} {means[i, j]:.3f}" for j, m in enumerate(metrics)) for i, v in enumerate(vs))
        parts.append(("" if words.systems else f"<h3>{esc(b)}</h3>") + f'<img class="plot" src="{_data_uri(png, "image/png")}" alt="{esc(alt)}">')
    md = [f"## Metrics per {'system' if words.systems else 'backend'} (mean [95% bootstrap interval])", "",
          Table((*(("system",) if words.systems else ("backend", "variant")), *metrics), tuple(rows)).to_markdown(notes=False)]
    return "\n".join(parts), md


def _change_sections(res: Results, p: str, words: _Words) -> str:
    from .plots import delta_distribution, length_vs_delta

    if not res.rewrite_variants:
        return (f'<h2 id="changes">Per-query changes</h2><p class="note">No {words.who} to compare with {esc(words.base)}.</p>'
                + ("" if words.systems else '<h2 id="length">Rewrite length against change</h2><p class="note">No rewrite variants.</p>'))
    dist, scat, rows = [], [], []
    for b in res.backends:
        vs = [v for v in res.rewrite_variants if res.has_run(b, v)]
        if not vs:
            continue
        ds = [np.array(list(res.deltas(b, v, p).values())) for v in vs]
        dist.append((words.panel(b), vs, ds))
        lens, dd = [], []
        for v, d in zip(vs, ds):
            qs = res.variants.get(v, {})
            ln = np.array([len(qs[q].text.split()) if q in qs else np.nan for q in res.query_ids])
            ok = ~np.isnan(ln) & ~np.isnan(d)
            lens.append(ln[ok])
            dd.append(d[ok])
            d = d[~np.isnan(d)]
            rows.append(((() if words.systems else (b,)) + (v, f"{d.mean():+.4f}", f"{np.median(d):+.4f}", str(int((d > 0).sum())),
                         str(int((d == 0).sum())), str(int((d < 0).sum())))))
        scat.append((b, vs, lens, dd))
    who = "system" if words.systems else "variant"
    title = (f"Distribution of per-query changes against the baseline ({words.change})" if words.systems
             else "Distribution of per-query changes (rewritten - original)")
    out = [f'<h2 id="changes">{esc(title)}</h2>',
           f'<p class="note">Change in {esc(p)} per query, per {"" if words.systems else "backend and "}{words.who}; a box per {who} '
           f"(median, quartiles), every query a point. Points above 0 are queries where {words.helped}.</p>"]
    png = delta_distribution(p, dist)
    out.append(f'<img class="plot" src="{_data_uri(png, "image/png")}" alt="{esc("distribution of per-query changes in " + p)}">')
    head = (*(() if words.systems else ("backend",)), who, "mean change", "median", "wins", "ties", "losses")
    out.append(Table(head, tuple(rows), left=len(head) - 5).to_html(css_class=""))
    if not words.systems:  # the rewrite's own length: nothing of the kind for systems
        out.append('<h2 id="length">Rewrite length against change</h2>')
        out.append(f'<p class="note">x: the rewrite\'s length in whitespace tokens; y: its change in {esc(p)} against the original query.</p>')
        png = length_vs_delta(p, scat)
        out.append(f'<img class="plot" src="{_data_uri(png, "image/png")}" alt="{esc("rewrite length against change in " + p)}">')
    return "\n".join(out)


def _query_text(res: Results, variant: str, qid: str):
    """The query ``qid`` of ``variant``; for ``vdr compare`` results the one query text (stored with the baseline)."""
    q = res.variants.get(variant, {}).get(qid)
    if q is None and res.is_run_comparison:
        q = res.variants.get(res.baseline, {}).get(qid)
    return q


def _query_html(res: Results, variant: str, qid: str, label: str | None = None) -> str:
    q = _query_text(res, variant, qid)
    label = variant if label is None else label
    if q is None:
        return f'<div class="q"><span class="lbl">{esc(label)}</span> <em>(text not available)</em></div>'
    s = f'<div class="q"><span class="lbl">{esc(label)}</span> {esc(q.text)}</div>'
    if q.history:
        s += '<div class="hist">history: ' + " &#8594; ".join(f"&#8220;{esc(h)}&#8221;" for h in q.history) + "</div>"
    return s


def _strip(res: Results, thumbs: _Thumbs, label: str, b: str, v: str, qid: str, k: int = 3) -> str:
    try:
        ranked = res.ranked(b, v, qid, k)
    except Exception as e:  # missing/malformed run file: say so in place
        return f'<div class="strip"><span class="lbl">{esc(label)}</span><span class="warn">run not available: {esc(e)}</span></div>'
    figs = [thumbs.figure(pid, f"#{i + 1} &#183; score {s:.4g}", res.grade(qid, pid), res.relevance_level) for i, (pid, s) in enumerate(ranked)]
    if not figs:
        figs = ['<span class="note">no page retrieved</span>']
    return f'<div class="strip"><span class="lbl">{esc(label)}</span><div class="figs">{"".join(figs)}</div></div>'


def _case_html(res: Results, thumbs: _Thumbs, c, b: str, p: str, words: _Words) -> str:
    who = f"{c.variant} vs {res.baseline}" if words.systems else c.variant
    out = ['<div class="case">',
           f"<h4>{esc(c.query_id)} &#183; {esc(who)} &#183; {esc(p)} {c.original:.3f} &#8594; {c.rewritten:.3f} ({c.delta:+.3f})</h4>"]
    if words.systems:  # one query, run by every system
        if _query_text(res, res.baseline, c.query_id) is not None:
            out.append(_query_html(res, res.baseline, c.query_id, "query"))
    else:
        out += [_query_html(res, res.baseline, c.query_id), _query_html(res, c.variant, c.query_id)]
    # the two rankings and the relevant pages side by side (one row on a wide screen)
    out += ['<div class="strips">', _strip(res, thumbs, f"{res.baseline} top-3", b, res.baseline, c.query_id),
            _strip(res, thumbs, f"{c.variant} top-3", b, c.variant, c.query_id)]
    rel = res.relevant(c.query_id)
    if rel:
        figs = "".join(thumbs.figure(pid, f"grade {g}", g, res.relevance_level) for pid, g in rel.items())
    else:
        figs = '<span class="note">no relevant page in the qrels</span>' if res.qrels is not None else '<span class="note">qrels not available</span>'
    out += [f'<div class="strip"><span class="lbl">relevant pages</span><div class="figs">{figs}</div></div>', "</div></div>"]
    return "".join(out)


def _cases_section(res: Results, thumbs: _Thumbs, top: int, p: str, words: _Words) -> tuple[str, list[str]]:
    if words.systems:
        intro = (f"The {top} queries whose {esc(p)} dropped most against the baseline {esc(res.baseline)} and the {top} it rose most, "
                 "under any system. Each shows the query, the top-3 pages of the baseline and of the system, and the relevant pages "
                 "with their grade.")
        if thumbs.no_corpus:
            intro += " Pages are named by their id: give --corpus (to vdr compare or vdr report) to see them."
        if not any(len(qs) for qs in res.variants.values()):
            intro += " Query texts are not known: give --queries to see them."
    else:
        intro = (f"Per backend, the {top} queries whose {esc(p)} dropped most and the {top} it rose most under any rewrite. "
                 "Each shows the original query and the rewrite (with conversation history), the top-3 pages each retrieved, and the "
                 "relevant pages with their grade.")
    out = ['<h2 id="cases">Largest regressions and gains</h2>',
           f'<p class="note">{intro} Frames: green = relevant, red = judged not relevant, dashed = unjudged; '
           + ("a click on a page opens it full size.</p>" if not thumbs.no_corpus else "</p>")]
    md = [f"## Largest regressions and gains ({p})", ""]
    backends = [b for b in res.backends if res.has_run(b, res.baseline) and res.run_path(b, res.baseline) is not None]
    if not res.rewrite_variants:
        out.append(f'<p class="note">No {words.who} to compare.</p>')
        return "\n".join(out), md + [f"No {words.who} to compare.", ""]
    if res.qrels is None:
        out.append('<p class="warn">The qrels file could not be read: relevance marks and relevant pages are not shown.</p>')
    for b in backends:
        reg, gain = res.largest_changes(b, top=top, metric=p)
        name = words.panel(b)
        if not words.systems:
            out.append(f"<h3>{esc(b)}</h3>")
        for title, cases in (("regressions", reg), ("gains", gain)):
            out.append(f"<h4>{esc(name)}: largest {title}</h4>")
            md += [f"### {_md(name)}: largest {title}", ""]
            if not cases:
                out.append(f'<p class="note">No {title}.</p>')
                md += [f"No {title}.", ""]
                continue
            for c in cases:
                out.append(_case_html(res, thumbs, c, b, p, words))
                o = _query_text(res, res.baseline, c.query_id)
                r = _query_text(res, c.variant, c.query_id)
                if words.systems:
                    md.append(f"- `{_md(c.query_id)}` {_md(c.variant)} vs {_md(res.baseline)}: {c.original:.4f} -> {c.rewritten:.4f}"
                              f" ({c.delta:+.4f})" + (f"; query: \"{_md(o.text)}\"" if o else ""))
                else:
                    md.append(f"- `{_md(c.query_id)}` {_md(c.variant)}: {c.original:.4f} -> {c.rewritten:.4f} ({c.delta:+.4f}); "
                              f"original: \"{_md(o.text if o else MISSING)}\"; rewrite: \"{_md(r.text if r else MISSING)}\"")
            md.append("")
    return "\n".join(out), md


def _hole_section(res: Results, words: _Words) -> tuple[str, list[str]]:
    from .plots import hole_bars

    hm = hole_metric(res)
    if hm is None:
        return '<h2 id="holes">Unjudged pages</h2><p class="note">No hole@k metric in these results.</p>', []
    k = hm.split("@")[1]
    one, base = ("a system", f"the baseline {words.base}") if words.systems else ("a rewrite", "the originals")
    expl = (f"{hm} is the share of a query's top {k} pages that have no qrels line for that query (unjudged). Metrics count "
            f"an unjudged page as not relevant, so {one} that surfaces pages nobody judged is penalised by construction, "
            f"even when those pages answer the query. {one.capitalize()} with a higher hole rate than {base} may be better than its "
            "scores say; judge its new pages before concluding.")
    per = "system" if words.systems else "variant"
    variants = list(res.variants)
    rates = np.full((len(res.backends), len(variants)), np.nan)
    for i, b in enumerate(res.backends):
        for j, v in enumerate(variants):
            if res.has_run(b, v):
                rates[i, j] = res.aggregate(b, v).get(hm, np.nan)
    names = ["systems"] if words.systems else res.backends
    table = Table(("" if words.systems else "backend", *variants), tuple((n, *(fmt4(float(x)) for x in rates[i])) for i, n in enumerate(names)),
                  left=1)
    png = hole_bars(hm, names, variants, rates)
    html_ = (f'<h2 id="holes">{esc(hm)} rate per {per}</h2><p>{esc(expl)}</p>' + table.to_html(css_class="")
             + f'<img class="plot" src="{_data_uri(png, "image/png")}" alt="{esc(hm + " per backend and " + per)}">')
    return html_, [f"## {hm} rate per {per}", "", expl, "", table.to_markdown(notes=False), ""]


def _judge_section(root: Path) -> tuple[str, list[str]]:
    """RCP-nDCG beside nDCG and hole@k when ``vdr judge`` wrote ``judge/rcp.json``; else nothing."""
    path = Path(root) / "judge" / "rcp.json"
    if not path.is_file():
        return "", []
    from ..judge.run import rcp_table

    try:
        table = rcp_table(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError) as e:
        return f'<h2 id="rcp">Judge-calibrated nDCG</h2><p class="warn">{esc(path)} is unreadable: {esc(e)}</p>', []
    title = "Judge-calibrated nDCG (RCP-nDCG) beside qrels nDCG"
    return f'<h2 id="rcp">{esc(title)}</h2>' + table.to_html(css_class=""), [f"## {title}", "", table.to_markdown(), ""]


# --------------------------------------------------------------------------------------------
# the first screen: verdicts, summary, groups; every pair of systems


def _verdicts_section(res: Results, p: str, alpha: float, words: _Words) -> tuple[str, list[str]]:
    """One sentence per backend x variant (:meth:`Results.verdicts`), coloured by its outcome; with
    every pair compared, the significant pairs without the baseline (:meth:`Results.pair_verdicts`)."""
    items, md = [], []
    for r in res.runs:
        if r.variant == res.baseline:
            continue
        v = res.verdict(r.backend, r.variant, p, alpha)
        if v is None:
            continue
        c = res.comparison(r.backend, r.variant, p)
        o = c.outcome(alpha) if c is not None else "ns"
        sym = f"{MARK_SYMBOLS[o]} " if o in MARK_SYMBOLS else ""
        items.append(f'<li class="{o}">{sym}{esc(v)}</li>')
        md.append(f"- {sym}{_md(v)}")
    for v, o in res.pair_verdicts(p, alpha):  # vdr compare --pairs all: significant pairs without the baseline
        sym = f"{MARK_SYMBOLS[o]} " if o in MARK_SYMBOLS else ""
        items.append(f'<li class="{o}">{sym}{esc(v)}</li>')
        md.append(f"- {sym}{_md(v)}")
    if not items:
        note = f"No {words.who} to compare with {words.base}."
        return f'<h2 id="verdicts">Verdicts</h2><p class="note">{esc(note)}</p>', ["## Verdicts", "", note, ""]
    what = (f"each system against the baseline {words.base}" if words.systems
            else "each rewrite variant against the original queries on the same backend")
    head = (f'<h2 id="verdicts">Verdicts</h2><p class="note">The change of {esc(p)}, {esc(what)}, with its 95% bootstrap interval; '
            f"significant when the Holm-corrected p of the paired randomization test is at most {format_alpha(alpha)}.</p>")
    return head + '<ul class="verdicts">' + "".join(items) + "</ul>", ["## Verdicts", "", *md, ""]


def _groups_section(res: Results, fields: list[str], p: str, alpha: float, words: _Words) -> tuple[str, list[str]]:
    """A multilingual evaluation's languages (:func:`_languages_section`), then per ``--group-by``
    field: the change within each group at a glance (:meth:`Results.group_matrix`), every number
    below it (:meth:`Results.group_table`, folded)."""
    langs_html, langs_md = _languages_section(res, p)
    fields = [f for f in fields if res.group_rows(f, p, alpha)]  # no rewrite variant: nothing compared within groups
    if not fields:
        return langs_html, langs_md
    out = [langs_html, '<h2 id="groups">By query group</h2>']
    md = [*langs_md, "## By query group", ""]
    for f in fields:
        matrix, full = res.group_matrix(f, p, alpha), res.group_table(f, p, alpha)
        out += [f"<h3>by {esc(f)}</h3>", matrix.to_html(css_class="groups"),
                f"<details><summary>every group: n, means, change with 95% CI, tests, W/T/L ({esc(f)})</summary>",
                full.to_html(css_class=""), "</details>"]
        md += [f"### by {_md(f)}", "", matrix.to_markdown(), "", full.to_markdown(), ""]
    return "\n".join(out), md


def _languages_section(res: Results, p: str) -> tuple[str, list[str]]:
    """A multilingual evaluation (ViDoRe V3): each language's own query set and the mean over
    languages (MTEB's main score), on ``p`` and, when evaluated, nDCG@10 (:meth:`Results.language_table`)."""
    if not res.languages:
        return "", []
    out, md = ['<h2 id="languages">By language</h2>'], ["## By language", ""]
    for metric in dict.fromkeys([p, *(["ndcg@10"] if "ndcg@10" in res.metric_names else [])]):
        t = res.language_table(metric)
        out += [f"<h3>{esc(metric)}</h3>", t.to_html(css_class="languages")]
        md += [f"### {_md(metric)}", "", t.to_markdown(), ""]
    return "\n".join(out), md


def _served_section(res: Results) -> tuple[str, list[str]]:
    """Served systems against their exact backend (:attr:`Results.served_audit`, issue 36): the
    table of :meth:`Results.served_table` with the verdict lines, then whether each rewrite's gain
    survives (:meth:`Results.served_gains_table`, when there are rewrite variants)."""
    if not res.served_systems_audited():
        return "", []
    t, g = res.served_table(), res.served_gains_table()
    out = ['<h2 id="served">Served vs exact</h2>', t.to_html(css_class="served")]
    md = ["## Served vs exact", "", t.to_markdown(), ""]
    if g.rows:
        out += ["<h3>Do the rewrites' gains survive?</h3>", g.to_html(css_class="")]
        md += ["### Do the rewrites' gains survive?", "", g.to_markdown(), ""]
    return "\n".join(out), md


def _rerank_section(res: Results) -> tuple[str, list[str]]:
    """Reranked systems against their base (:attr:`Results.rerank_audit`, issue 37): whether each
    rewrite's gain holds before and after reranking (:meth:`Results.rerank_gains_table`, with the
    verdict lines)."""
    if not res.rerank_systems_audited():
        return "", []
    t = res.rerank_gains_table()
    return ('<h2 id="rerank">Reranked vs base</h2>' + t.to_html(css_class="served"),
            ["## Reranked vs base", "", t.to_markdown(), ""])


def _pairs_section(res: Results, p: str, alpha: float) -> tuple[str, list[str]]:
    """ranx's table of every pair of systems and the pairwise changes (``vdr compare --pairs all``)."""
    if not res.pairwise:
        return "", []
    t, pw = res.pairs_table(p, alpha), res.pairwise_table(p, alpha)
    html_ = ('<h2 id="pairs">Every pair of systems</h2>' + t.to_html(css_class="pairs")
             + f"<h3>Pairwise changes of {esc(p)}</h3>" + pw.to_html(css_class=""))
    return html_, ["## Every pair of systems", "", t.to_markdown(), "", f"### Pairwise changes of {_md(p)}", "", pw.to_markdown(), ""]


# --------------------------------------------------------------------------------------------
# the verb


_TOC = [("verdicts", "Verdicts"), ("summary", "Summary"), ("languages", "Languages"), ("groups", "Groups"), ("served", "Served vs exact"), ("rerank", "Reranked vs base"), ("pairs", "Every pair"), ("rcp", "Judge"),
        ("metrics", "Metrics"), ("changes", "Per-query changes"), ("length", "Rewrite length"), ("cases", "Regressions and gains"),
        ("holes", "Unjudged pages"), ("about", "Inputs")]


def _page(title: str, res: Results, thumbs: _Thumbs, warnings: list[str], first: list[str], body: list[str]) -> str:
    cfg = res.config
    meta = [("results", str(res.root)), ("corpus", _show(cfg.get("corpus_dir"))),
            ("queries", f"{len(res.query_ids)} ({_show(cfg.get('queries'))})"), ("qrels", _show(cfg.get("qrels"))),
            (("systems" if res.is_run_comparison else "variants"), ", ".join(res.variants)),
            *(() if res.is_run_comparison else (("backends", ", ".join(res.backends)),)),
            ("model", _show(cfg.get("model"))), ("seed", _show(cfg.get("seed")))]
    html_all = "\n".join([*first, *body])
    toc = [(i, t) for i, t in _TOC if f'id="{i}"' in html_all or i == "about"]
    head = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; img-src data:; style-src 'unsafe-inline'\">",
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{esc(title)}</title><style>{CSS}{thumbs.css()}</style></head><body>",
        f"<h1>{esc(title)}</h1>",
        '<nav class="toc">' + "".join(f'<a href="#{i}">{esc(t)}</a>' for i, t in toc) + "</nav>",
    ]
    if warnings:
        head.append(f'<div class="warn" id="warnings"><strong>{len(warnings)} warning(s)</strong><ul>'
                    + "".join(f"<li>{esc(w)}</li>" for w in warnings) + "</ul></div>")
    about = ('<h2 id="about">Inputs</h2><table class="meta">' + "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in meta)
             + "</table>")
    return "\n".join([*head, '<section class="first">', *first, "</section>", *body, about, "</body></html>", ""])


def _apply(res: Results, o: ReportOptions, warnings: list[str]) -> list[str]:
    """Apply ``--corpus``, ``--queries`` and ``--groups`` to the loaded results; returns the fields
    to group by (checked: each one is a field of some query)."""
    from ..io.formats import load_queries, read_query_fields
    from ..types import QuerySet

    if o.corpus is not None:
        from ..corpus import load_corpus

        res.corpus = load_corpus(o.corpus)
        res.config = dict(res.config, corpus_dir=str(Path(o.corpus).resolve()))
        warnings[:] = [w for w in warnings if not w.startswith(("corpus folder", "no corpus folder"))]
    if o.queries is not None:
        qs = load_queries(o.queries)
        if res.is_run_comparison or not len(res.variants.get(res.baseline, {})):
            res.variants[res.baseline] = QuerySet(dict(qs.items()), name=res.baseline, source=str(o.queries))
        res.config = dict(res.config, queries=str(Path(o.queries).resolve()))
    fields = res.group_fields if o.group_by is None else [o.group_by] if isinstance(o.group_by, str) else list(o.group_by)
    missing = [f for f in fields if not any(f in x for x in res.query_fields.values())]
    if o.queries is not None or o.groups is not None or missing:
        recorded = None
        if o.queries is None and missing and res.root is not None:
            from ..results import RELATIVE_INPUTS, _resolve

            recorded = _resolve(res.config.get("queries"), res.root, (res.config.get(RELATIVE_INPUTS) or {}).get("queries"))
        files = [o.queries if o.queries is not None else recorded]
        extra = read_query_fields(files, o.groups, missing if o.queries is None and o.groups is None else fields)
        merged = {q: dict(f) for q, f in res.query_fields.items()}
        for q, f in extra.items():
            merged.setdefault(q, {}).update(f)
        res.query_fields = merged
        res.group_comparisons = [g for g in res.group_comparisons if g.field not in {k for f in extra.values() for k in f}]
    return fields


def report(results_dir: str | Path, out: str | Path | None = None, *, options: ReportOptions | None = None, **kwargs: Any) -> ReportPaths:
    """Write an HTML report and a Markdown summary of a results folder written by :func:`vdr.evaluate`
    or :func:`vdr.compare`.

    The HTML (one file: images as data URIs, each page thumbnail embedded once, inline CSS, no
    script, no external URL) opens with a table of contents and a short first screen: the
    verdicts (one sentence per backend x variant: the change of the primary metric with its 95% CI,
    significant or not after Holm at ``alpha``), the summary table (significant changes marked
    with a symbol and a colour) and, with ``group_by``, the change within each group of queries.
    Below: the served systems against their exact backend (issue 36: change of the primary metric,
    overlap, RBO, storage and time ratios, whether each rewrite's gain survives); every pair of
    systems (``vdr compare --pairs all``); per backend, bars of nDCG@3, MRR@3
    and Recall@10 per variant with 95% bootstrap intervals; the distribution of per-query changes;
    rewrite length against change (rewrites only); the ``top`` largest regressions and gains per
    backend, each with the query, its rewrite and history, the top-3 retrieved pages of both and
    the relevant pages with their grade (a click on a page opens it full size: the image file,
    copied into ``<html stem>_pages/`` beside the report; passages shown as text); the hole@3 rate
    per variant with what it means; the inputs. The Markdown summary holds the verdicts, the
    tables and the regression/gain lists (no images).

    Missing page images (a moved corpus) or qrels never stop the report: a visible placeholder or
    note is shown and :attr:`ReportPaths.warnings` says what was missing.

    Args:
        results_dir: the folder holding ``results.json`` (``vdr evaluate --out``, ``vdr compare --out``).
        out: the HTML file to write (default ``RESULTS_DIR/report.html``); the Markdown summary
            goes beside it with the suffix ``.md``. Both are written atomically.
        options: a :class:`ReportOptions` (default: all defaults).
        **kwargs: any field of :class:`ReportOptions` (``top``, ``primary_metric``, ``latex``,
            ``alpha``, ``group_by``, ``groups``, ``queries``, ``corpus``); they override ``options``.

    Returns:
        :class:`ReportPaths`.

    Raises:
        InputError: ``results_dir`` is not a vdr results folder (or of an unreadable schema
            version), ``top`` < 0, ``primary_metric`` was not evaluated, ``alpha`` not in (0, 1),
            a ``group_by`` field no query has, an unreadable ``corpus``, ``queries`` or ``groups``.
        OSError: the output cannot be written.
        TypeError: an unknown keyword (named, with the known ones); ``results_dir`` or ``out`` not a
            path (:class:`~vdr.errors.ArgumentTypeError`, naming it).
    """
    o = with_keywords(ReportOptions, options, kwargs, "report")
    res, out, warnings, p, alpha, fields = _open_results(results_dir, out, o)
    summary = res.summary_table(p, alpha)
    md_path = out.with_suffix(".md")
    thumbs = _Thumbs(res, pages_dir_of(out))
    words = _Words(res)

    title = f"vdr {'compare' if words.systems else 'report'}: {res.root.name or res.root}"
    verdicts_html, verdicts_md = _verdicts_section(res, p, alpha, words)
    groups_html, groups_md = _groups_section(res, fields, p, alpha, words)
    pairs_html, pairs_md = _pairs_section(res, p, alpha)
    served_html, served_md = _served_section(res)
    rerank_html, rerank_md = _rerank_section(res)
    bars_html, bars_md = _bars_section(res, p, words)
    changes_html = _change_sections(res, p, words)
    cases_html, cases_md = _cases_section(res, thumbs, o.top, p, words)
    hole_html, hole_md = _hole_section(res, words)
    judge_html, judge_md = _judge_section(res.root)

    if thumbs.missing:
        where = res.corpus.root if res.corpus is not None else _show(res.config.get("corpus_dir"))
        warnings.append(f"{len(thumbs.missing)} page image(s) missing (corpus {where}); placeholders shown")
    notes = "".join(f'<p class="note">{esc(n)}</p>' for n in summary.notes)
    first = [verdicts_html, '<h2 id="summary">Summary</h2>', summary.to_html(verdicts=False, notes=False), groups_html,
             f'<div class="notes">{notes}</div>' if notes else ""]
    body = [served_html, rerank_html, pairs_html, judge_html, bars_html, changes_html, cases_html, hole_html]
    write_text_atomic(out, _page(title, res, thumbs, warnings, first, body))

    what = "systems" if words.systems else "variants"
    head = [f"# {title}", "", f"Results: `{_md(res.root)}`; corpus: `{_md(_show(res.config.get('corpus_dir')))}`; "
            f"{len(res.query_ids)} queries; {what}: {_md(', '.join(res.variants))}.", "", *verdicts_md,
            "## Summary", "", summary.to_markdown(verdicts=False), ""]
    _write_markdown(md_path, [head, groups_md, served_md, rerank_md, pairs_md, judge_md, bars_md, [""], hole_md, cases_md], warnings, out.name)
    latex_path = _write_latex(res, summary, o.latex, p, alpha)
    return ReportPaths(out, md_path, len(thumbs.missing), warnings, latex_path, len(thumbs.rules),
                       thumbs.pages if thumbs.files else None)


def _open_results(results_dir, out, o: ReportOptions):
    """What :func:`report` renders: ``(results, html path, warnings, primary metric, alpha, group
    fields)``, ``o`` applied (:func:`_apply`).

    Raises:
        InputError: a negative ``top``, a path of the wrong type, an unreadable results folder, an
            unknown primary metric.
    """
    from ..errors import check_path

    if o.top < 0:
        raise InputError(f"top must be >= 0, got {o.top}")
    out = check_path(out, "report", "out", optional=True)
    res = Results.load(check_path(results_dir, "report", "results_dir"))
    warnings = list(res.warnings)
    p = res.check_metric(o.primary_metric or res.primary)
    alpha = res.alpha if o.alpha is None else o.alpha
    fields = _apply(res, o, warnings)
    return res, Path(out) if out is not None else res.root / "report.html", warnings, p, alpha, fields


def _write_markdown(path: Path, parts: list[list[str]], warnings: list[str], html_name: str) -> None:
    """report.md: the sections' Markdown lines in order, the warnings, a pointer to the HTML."""
    md = [line for part in parts for line in part]
    if warnings:
        md += ["## Warnings", ""] + [f"- {_md(w)}" for w in warnings] + [""]
    md.append(f"Full report with plots and page thumbnails: `{html_name}`.")
    write_text_atomic(path, "\n".join(md) + "\n")


def _write_latex(res: Results, summary, latex, primary: str, alpha: float) -> Path | None:
    """``--latex FILE``: the summary table (and, with every pair compared, the pairs table) as LaTeX;
    the path written, or ``None`` when not asked."""
    if latex is None:
        return None
    tex = summary.to_latex()
    if res.pairwise:
        tex += "\n" + res.pairs_table(primary, alpha).to_latex(label="tab:vdr-pairs")
    write_text_atomic(Path(latex), tex)
    return Path(latex)


# help(report) and inspect.signature(report) list every option with its default
report.__signature__ = inspect.Signature(
    [inspect.Parameter("results_dir", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation="str | Path"),
     inspect.Parameter("out", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None, annotation="str | Path | None"),
     inspect.Parameter("options", inspect.Parameter.KEYWORD_ONLY, default=None, annotation="ReportOptions | None"),
     *(inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default, annotation=f.type)
       for f in dataclasses.fields(ReportOptions))],
    return_annotation="ReportPaths",
)
