"""The report: one self-contained HTML file and a Markdown summary of a results folder.

The HTML embeds every image as a ``data:`` URI (PNG plots; each distinct page thumbnail once, as
the JPEG background of a CSS class that every occurrence of the page uses), carries its CSS inline,
has no script and no external URL, and forbids any network load with a Content-Security-Policy
(``default-src 'none'; img-src data:; style-src 'unsafe-inline'``; ``img-src`` covers the CSS
backgrounds). Every text that comes from the user (query texts, history, page ids, paths, reasons)
is HTML-escaped; a missing value is shown as ``—``. Output is deterministic: no timestamps, seeded
bootstrap and jitter. The results are read only through :meth:`vdr.results.Results.load`.
"""

from __future__ import annotations

import base64
import io
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..stats import bootstrap_ci
from ..errors import InputError
from ..io.atomic import write_text_atomic
from ..results import Results, Table, fmt4, md_escape as _md
from ..results import html_escape as esc

__all__ = ["report", "ReportPaths", "bar_metrics", "hole_metric", "THUMB_WIDTH"]

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
    """

    html: Path
    markdown: Path
    missing_images: int = 0
    warnings: list[str] = field(default_factory=list)
    latex: Path | None = None
    thumbnails: int = 0


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


#: Characters of a passage shown in place of a page thumbnail (passage corpora).
PASSAGE_CHARS = 300


class _Thumbs:
    """Page thumbnails, each distinct page embedded once: a CSS class ``pgN`` per page whose
    background is the JPEG (data URI), used by every figure of that page; counts missing images."""

    def __init__(self, res: Results) -> None:
        self.res = res
        self.classes: dict[str, str | None] = {}  # corpus id -> class name (None: image missing)
        self.rules: list[str] = []
        self.missing: set[str] = set()

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
        return self.classes[corpus_id]

    def _passage(self, corpus_id: str) -> str | None:
        """The first :data:`PASSAGE_CHARS` characters of a passage (passage corpora), else ``None``;
        ``"(not in the collection)"`` for an absent judged passage, ``"(empty passage)"`` for an empty one."""
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
        """A ``<figure>``: the thumbnail (or a placeholder), the caption, the id and the relevance mark (frame colour)."""
        if grade is None:
            cls, mark = "unjudged", "unjudged"
        elif grade >= relevance_level:
            cls, mark = "relevant", f"relevant, grade {grade}"
        else:
            cls, mark = "nonrel", f"judged not relevant, grade {grade}"
        passage = self._passage(corpus_id)
        name = None if passage is not None else self.cls(corpus_id)
        if passage is not None:
            pic = f'<div class="missing psg" role="note">{esc(passage)}</div>'
        elif name is None:
            pic = f'<div class="missing" role="img" aria-label="image missing">image missing<br>{esc(corpus_id)}</div>'
        else:
            pic = f'<div class="pg {name}" role="img" aria-label="{esc(corpus_id)}"></div>'
        return (f'<figure class="thumb {cls}">{pic}<figcaption>{caption}<br><span class="id">{esc(corpus_id)}</span>'
                f'<br><span class="mark">{esc(mark)}</span></figcaption></figure>')


# --------------------------------------------------------------------------------------------
# sections


CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;margin:1.5em auto;max-width:1250px;color:#222;padding:0 1em}
h1{font-size:1.6em}h2{border-bottom:2px solid #ddd;padding-bottom:.2em;margin-top:2em}h3{margin-top:1.4em}
table{border-collapse:collapse;font-size:.86em;margin:.6em 0}th,td{border:1px solid #ccc;padding:.25em .5em;text-align:right}
th{background:#f3f3f3}td:first-child,td:nth-child(2),th:first-child,th:nth-child(2){text-align:left}
tr.original td{background:#fafafa}
.warn{background:#fff4e5;border:1px solid #f0a040;padding:.5em 1em;border-radius:4px}
.note{color:#555;font-size:.92em}
img.plot{max-width:100%;height:auto;display:block;margin:.5em 0}
.case{border:1px solid #ddd;border-radius:6px;padding:.6em 1em;margin:1em 0;background:#fdfdfd}
.case h4{margin:.2em 0 .5em}.q{margin:.2em 0}.q .lbl{display:inline-block;min-width:9em;font-weight:600}
.hist{color:#666;font-size:.9em;margin:.1em 0 .3em 9em}
.strip{display:flex;flex-wrap:wrap;align-items:flex-start;gap:.5em;margin:.4em 0}
.strip .lbl{width:9em;font-weight:600;font-size:.9em}
figure.thumb{margin:0;width:156px;font-size:.72em;text-align:center;word-break:break-all}
.pg{border:3px solid #bbb;display:block;width:150px;background-size:100% 100%;background-repeat:no-repeat}
figure.relevant .pg,figure.relevant .missing{border-color:#1a9850}figure.nonrel .pg,figure.nonrel .missing{border-color:#d73027}
figure.unjudged .pg,figure.unjudged .missing{border-style:dashed}
.psg{background:#fff !important;font-size:.75em;text-align:left;overflow:auto;padding:.3em}
.missing{width:144px;height:100px;border:3px solid #bbb;background:repeating-linear-gradient(45deg,#eee,#eee 8px,#f8f8f8 8px,#f8f8f8 16px);
 display:flex;flex-direction:column;align-items:center;justify-content:center;color:#a00;font-weight:600;word-break:break-all}
.mark{color:#555}.id{color:#333}
"""


def _bars_section(res: Results, primary: str) -> tuple[str, list[str]]:
    from .plots import metric_bars

    metrics = bar_metrics(res, primary)
    n_boot = int(res.config.get("n_bootstrap") or 10_000)
    seed = int(res.config.get("seed") or 0)
    parts = [
        "<h2 id=\"metrics\">Metrics per backend with 95% bootstrap intervals</h2>",
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
            rows.append((b, v, *(f"{means[i, j]:.4f} [{ci[i, j, 0]:.3f}, {ci[i, j, 1]:.3f}]" for j in range(len(metrics)))))
        png = metric_bars(b, metrics, vs, means, ci)
        alt = f"{b}: " + "; ".join(f"{v} " + ", ".join(f"{m} {means[i, j]:.3f}" for j, m in enumerate(metrics)) for i, v in enumerate(vs))
        parts.append(f'<h3>{esc(b)}</h3><img class="plot" src="{_data_uri(png, "image/png")}" alt="{esc(alt)}">')
    md = ["## Metrics per backend (mean [95% bootstrap interval])", "",
          Table(("backend", "variant", *metrics), tuple(rows)).to_markdown(notes=False)]
    return "\n".join(parts), md


def _change_sections(res: Results, p: str) -> str:
    from .plots import delta_distribution, length_vs_delta

    if not res.rewrite_variants:
        return ('<h2 id="changes">Per-query changes</h2><p class="note">No rewrite variants were evaluated: nothing to compare.</p>'
                '<h2 id="length">Rewrite length against change</h2><p class="note">No rewrite variants.</p>')
    dist, scat, rows = [], [], []
    for b in res.backends:
        vs = [v for v in res.rewrite_variants if res.has_run(b, v)]
        if not vs:
            continue
        ds = [np.array(list(res.deltas(b, v, p).values())) for v in vs]
        dist.append((b, vs, ds))
        lens, dd = [], []
        for v, d in zip(vs, ds):
            qs = res.variants.get(v, {})
            ln = np.array([len(qs[q].text.split()) if q in qs else np.nan for q in res.query_ids])
            ok = ~np.isnan(ln) & ~np.isnan(d)
            lens.append(ln[ok])
            dd.append(d[ok])
            d = d[~np.isnan(d)]
            rows.append((b, v, f"{d.mean():+.4f}", f"{np.median(d):+.4f}", str(int((d > 0).sum())), str(int((d == 0).sum())),
                         str(int((d < 0).sum()))))
        scat.append((b, vs, lens, dd))
    out = ['<h2 id="changes">Distribution of per-query changes (rewritten - original)</h2>',
           f'<p class="note">Change in {esc(p)} per query, per backend and rewrite variant; a box per variant '
           "(median, quartiles), every query a point. Points above 0 are queries the rewrite helped.</p>"]
    png = delta_distribution(p, dist)
    out.append(f'<img class="plot" src="{_data_uri(png, "image/png")}" alt="{esc("distribution of per-query changes in " + p)}">')
    out.append(Table(("backend", "variant", "mean change", "median", "wins", "ties", "losses"), tuple(rows)).to_html(css_class=""))
    out.append('<h2 id="length">Rewrite length against change</h2>')
    out.append(f'<p class="note">x: the rewrite\'s length in whitespace tokens; y: its change in {esc(p)} against the original query.</p>')
    png = length_vs_delta(p, scat)
    out.append(f'<img class="plot" src="{_data_uri(png, "image/png")}" alt="{esc("rewrite length against change in " + p)}">')
    return "\n".join(out)


def _query_html(res: Results, variant: str, qid: str) -> str:
    q = res.variants.get(variant, {}).get(qid)
    if q is None:
        return f'<div class="q"><span class="lbl">{esc(variant)}</span> <em>(text not available)</em></div>'
    s = f'<div class="q"><span class="lbl">{esc(variant)}</span> {esc(q.text)}</div>'
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
    return f'<div class="strip"><span class="lbl">{esc(label)}</span>{"".join(figs)}</div>'


def _case_html(res: Results, thumbs: _Thumbs, c, b: str, p: str) -> str:
    out = ['<div class="case">',
           f"<h4>{esc(c.query_id)} &#183; {esc(c.variant)} &#183; {esc(p)} {c.original:.3f} &#8594; {c.rewritten:.3f} ({c.delta:+.3f})</h4>",
           _query_html(res, res.baseline, c.query_id), _query_html(res, c.variant, c.query_id),
           _strip(res, thumbs, f"{res.baseline} top-3", b, res.baseline, c.query_id),
           _strip(res, thumbs, f"{c.variant} top-3", b, c.variant, c.query_id)]
    rel = res.relevant(c.query_id)
    if rel:
        figs = "".join(thumbs.figure(pid, f"grade {g}", g, res.relevance_level) for pid, g in rel.items())
    else:
        figs = '<span class="note">no relevant page in the qrels</span>' if res.qrels is not None else '<span class="note">qrels not available</span>'
    out += [f'<div class="strip"><span class="lbl">relevant pages</span>{figs}</div>', "</div>"]
    return "".join(out)


def _cases_section(res: Results, thumbs: _Thumbs, top: int, p: str) -> tuple[str, list[str]]:
    out = ['<h2 id="cases">Largest regressions and gains</h2>',
           f'<p class="note">Per backend, the {top} queries whose {esc(p)} dropped most and the {top} it rose most under any rewrite. '
           "Each shows the original query and the rewrite (with conversation history), the top-3 pages each retrieved, and the "
           "relevant pages with their grade. Frames: green = relevant, red = judged not relevant, dashed = unjudged.</p>"]
    md = [f"## Largest regressions and gains ({p})", ""]
    backends = [b for b in res.backends if res.has_run(b, res.baseline) and res.run_path(b, res.baseline) is not None]
    if not res.rewrite_variants:
        out.append('<p class="note">No rewrite variants were evaluated.</p>')
        return "\n".join(out), md + ["No rewrite variants were evaluated.", ""]
    if res.qrels is None:
        out.append('<p class="warn">The qrels file could not be read: relevance marks and relevant pages are not shown.</p>')
    for b in backends:
        reg, gain = res.largest_changes(b, top=top, metric=p)
        out.append(f"<h3>{esc(b)}</h3>")
        for title, cases in (("regressions", reg), ("gains", gain)):
            out.append(f"<h4>{esc(b)}: largest {title}</h4>")
            md += [f"### {_md(b)}: largest {title}", ""]
            if not cases:
                out.append(f'<p class="note">No {title}.</p>')
                md += [f"No {title}.", ""]
                continue
            for c in cases:
                out.append(_case_html(res, thumbs, c, b, p))
                o = res.variants.get(res.baseline, {}).get(c.query_id)
                r = res.variants.get(c.variant, {}).get(c.query_id)
                md.append(f"- `{_md(c.query_id)}` {_md(c.variant)}: {c.original:.4f} -> {c.rewritten:.4f} ({c.delta:+.4f}); "
                          f"original: \"{_md(o.text if o else MISSING)}\"; rewrite: \"{_md(r.text if r else MISSING)}\"")
            md.append("")
    return "\n".join(out), md


def _hole_section(res: Results) -> tuple[str, list[str]]:
    from .plots import hole_bars

    hm = hole_metric(res)
    if hm is None:
        return '<h2 id="holes">Unjudged pages</h2><p class="note">No hole@k metric in these results.</p>', []
    k = hm.split("@")[1]
    expl = (f"{hm} is the share of a query's top {k} pages that have no qrels line for that query (unjudged). Metrics count "
            "an unjudged page as not relevant, so a rewrite that surfaces pages nobody judged is penalised by construction, "
            "even when those pages answer the query. A rewrite with a higher hole rate than the originals may be better than its "
            "scores say; judge its new pages before concluding.")
    variants = list(res.variants)
    rates = np.full((len(res.backends), len(variants)), np.nan)
    for i, b in enumerate(res.backends):
        for j, v in enumerate(variants):
            if res.has_run(b, v):
                rates[i, j] = res.aggregate(b, v).get(hm, np.nan)
    table = Table(("backend", *variants), tuple((b, *(fmt4(float(x)) for x in rates[i])) for i, b in enumerate(res.backends)), left=1)
    png = hole_bars(hm, res.backends, variants, rates)
    html_ = (f'<h2 id="holes">{esc(hm)} rate per variant</h2><p>{esc(expl)}</p>' + table.to_html(css_class="")
             + f'<img class="plot" src="{_data_uri(png, "image/png")}" alt="{esc(hm + " per backend and variant")}">')
    return html_, [f"## {hm} rate per variant", "", expl, "", table.to_markdown(notes=False), ""]


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
# the verb


def _page(title: str, res: Results, thumbs: _Thumbs, warnings: list[str], body: list[str]) -> str:
    cfg = res.config
    meta = [("results", str(res.root)), ("corpus", _show(cfg.get("corpus_dir"))),
            ("queries", f"{len(res.query_ids)} ({_show(cfg.get('queries'))})"), ("qrels", _show(cfg.get("qrels"))),
            ("variants", ", ".join(res.variants)), ("backends", ", ".join(res.backends)), ("model", _show(cfg.get("model"))),
            ("seed", _show(cfg.get("seed")))]
    head = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; img-src data:; style-src 'unsafe-inline'\">",
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{esc(title)}</title><style>{CSS}{thumbs.css()}</style></head><body>",
        f"<h1>{esc(title)}</h1>",
        "<table class=\"meta\">" + "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in meta) + "</table>",
    ]
    if warnings:
        head.append(f'<div class="warn" id="warnings"><strong>{len(warnings)} warning(s)</strong><ul>'
                    + "".join(f"<li>{esc(w)}</li>" for w in warnings) + "</ul></div>")
    return "\n".join([*head, *body, "</body></html>", ""])


def report(results_dir: str | Path, out: str | Path | None = None, *, top: int = 5, primary_metric: str | None = None,
           latex: str | Path | None = None) -> ReportPaths:
    """Write an HTML report and a Markdown summary of a results folder written by :func:`vdr.evaluate`.

    The HTML (one file: images as data URIs, each page thumbnail embedded once, inline CSS, no
    script, no external URL) holds the summary table; per backend, bars of nDCG@3, MRR@3 and
    Recall@10 per variant with 95% bootstrap intervals; the distribution of per-query changes
    (rewritten - original) per backend; rewrite length against change; the ``top`` largest
    regressions and gains per backend, each with the query, its rewrite and history, thumbnails of
    the top-3 retrieved pages of both and of the relevant pages with their grade; and the hole@3
    rate per variant with what it means. The Markdown summary holds the tables and the
    regression/gain lists (no images).

    Missing page images (a moved corpus) or qrels never stop the report: a visible placeholder or
    note is shown and :attr:`ReportPaths.warnings` says what was missing.

    Args:
        results_dir: the folder holding ``results.json`` (``vdr evaluate --out``).
        out: the HTML file to write (default ``RESULTS_DIR/report.html``); the Markdown summary
            goes beside it with the suffix ``.md``. Both are written atomically.
        top: number of regressions and of gains shown per backend.
        primary_metric: the metric of the table's change columns, the changes and the cases
            (default: the evaluation's, ``ndcg@3``; e.g. ``ndcg@5`` as ViDoRe, ``ndcg@10`` as BEIR).
        latex: also write the summary table as a LaTeX ``table`` float (booktabs) to this file.

    Returns:
        :class:`ReportPaths`.

    Raises:
        InputError: ``results_dir`` is not a vdr results folder (or of an unreadable schema
            version), ``top`` < 0, or ``primary_metric`` was not evaluated.
        OSError: the output cannot be written.
    """
    if top < 0:
        raise InputError(f"top must be >= 0, got {top}")
    res = Results.load(results_dir)
    p = res.check_metric(primary_metric or res.primary)
    summary = res.summary_table(p)
    out = Path(out) if out is not None else res.root / "report.html"
    md_path = out.with_suffix(".md")
    thumbs = _Thumbs(res)

    title = f"vdr report: {res.root.name or res.root}"
    bars_html, bars_md = _bars_section(res, p)
    changes_html = _change_sections(res, p)
    cases_html, cases_md = _cases_section(res, thumbs, top, p)
    hole_html, hole_md = _hole_section(res)
    judge_html, judge_md = _judge_section(res.root)

    warnings = list(res.warnings)
    if thumbs.missing:
        where = res.corpus.root if res.corpus is not None else _show(res.config.get("corpus_dir"))
        warnings.append(f"{len(thumbs.missing)} page image(s) missing (corpus {where}); placeholders shown")
    body = ['<h2 id="summary">Summary</h2>', summary.to_html(), judge_html, bars_html, changes_html, cases_html, hole_html]
    write_text_atomic(out, _page(title, res, thumbs, warnings, body))

    md = [f"# {title}", "", f"Results: `{_md(res.root)}`; corpus: `{_md(_show(res.config.get('corpus_dir')))}`; "
          f"{len(res.query_ids)} queries; variants: {_md(', '.join(res.variants))}.", "", "## Summary", "", summary.to_markdown(), ""]
    md += judge_md + bars_md + [""] + hole_md + cases_md
    if warnings:
        md += ["## Warnings", ""] + [f"- {_md(w)}" for w in warnings] + [""]
    md.append(f"Full report with plots and page thumbnails: `{out.name}`.")
    write_text_atomic(md_path, "\n".join(md) + "\n")
    latex_path = None
    if latex is not None:
        latex_path = Path(latex)
        write_text_atomic(latex_path, summary.to_latex())
    return ReportPaths(out, md_path, len(thumbs.missing), warnings, latex_path, len(thumbs.rules))
