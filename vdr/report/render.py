"""The report: one self-contained HTML file and a Markdown summary of a results folder.

The HTML embeds every image as a ``data:`` URI (PNG plots, JPEG page thumbnails), carries its CSS
inline, has no script and no external URL, and forbids any network load with a
Content-Security-Policy (``default-src 'none'``). Every text that comes from the user (query texts,
history, page ids, paths, reasons) is HTML-escaped. Output is deterministic: no timestamps, seeded
bootstrap and jitter.
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..compare import bootstrap_ci
from ..io.atomic import write_text_atomic
from .data import ORIGINAL, Results, fmt_p, load_results

__all__ = ["report", "ReportPaths", "table_markdown", "table_html", "bar_metrics", "largest_changes", "Case"]

THUMB_WIDTH = 150
THUMB_MAX_HEIGHT = 220


@dataclass(frozen=True)
class ReportPaths:
    """What :func:`report` wrote.

    Attributes:
        html: the self-contained HTML report.
        markdown: the Markdown summary beside it (same stem, ``.md``).
        missing_images: number of distinct pages whose image could not be shown (placeholders).
        warnings: everything that could not be read or shown, one line each.
    """

    html: Path
    markdown: Path
    missing_images: int = 0
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Case:
    """One query whose primary metric changed most under a rewrite on one backend.

    Attributes:
        backend, variant, query_id: where.
        original, rewritten: the primary metric's per-query values (in [0, 1]).
        delta: ``rewritten - original``.
    """

    backend: str
    variant: str
    query_id: str
    original: float
    rewritten: float
    delta: float


# --------------------------------------------------------------------------------------------
# helpers


def esc(text: object) -> str:
    """HTML-escape ``text`` (quotes too). ``://`` is written ``&#58;//`` so that the file holds no
    literal URL even when a query contains one (it still displays as typed)."""
    return html.escape(str(text), quote=True).replace("://", "&#58;//")


def _md(text: object) -> str:
    """Text for a Markdown table cell or list item: HTML-escaped (Markdown renders raw HTML), pipes
    escaped, line breaks as spaces."""
    t = html.escape(str(text), quote=False)
    return t.replace("\\", "\\\\").replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def _f4(x: float | None) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.4f}"


def _data_uri(data: bytes, mime: str) -> str:
    return f"data:{mime};base64," + base64.b64encode(data).decode("ascii")


def bar_metrics(res: Results) -> list[str]:
    """The metrics of the per-backend bar charts: nDCG@3, MRR@3, Recall@10 when evaluated, else the
    table's first two metrics and recall at the largest cutoff."""
    wanted = ["ndcg@3", "mrr@3", "recall@10"]
    have = set(res.document["runs"][0]["aggregate"])
    if all(m in have for m in wanted):
        return wanted
    ks = [int(m.split("@")[1]) for m in have if m.startswith("recall@")]
    out = [m for m in res.table_metrics[:2] if m in have]
    if ks:
        out.append(f"recall@{max(ks)}")
    return out or [res.primary]


def hole_metric(res: Results) -> str | None:
    """The hole metric of the summary table (``hole@3``), or the smallest-cutoff one evaluated."""
    for m in res.table_metrics:
        if m.startswith("hole@"):
            return m
    have = [m for m in res.document["runs"][0]["aggregate"] if m.startswith("hole@")]
    return min(have, key=lambda m: int(m.split("@")[1])) if have else None


def largest_changes(res: Results, backend: str, top: int = 5, metric: str | None = None) -> tuple[list[Case], list[Case]]:
    """The ``top`` largest regressions and gains of ``metric`` (default primary) over every rewrite
    variant on ``backend``.

    Returns:
        ``(regressions, gains)``: regressions have ``delta < 0``, most negative first; gains
        ``delta > 0``, largest first; ties broken by variant order, then query id.
    """
    metric = metric or res.primary
    cases = []
    a = res.values(backend, ORIGINAL, metric)
    for vi, v in enumerate(res.rewrite_variants):
        try:
            b = res.values(backend, v, metric)
        except KeyError:
            continue
        for qi, q in enumerate(res.query_ids):
            d = float(b[qi] - a[qi])
            if not math.isnan(d) and d != 0.0:
                cases.append((vi, qi, Case(backend, v, q, float(a[qi]), float(b[qi]), d)))
    reg = [c for _, _, c in sorted((x for x in cases if x[2].delta < 0), key=lambda x: (x[2].delta, x[0], x[1]))]
    gain = [c for _, _, c in sorted((x for x in cases if x[2].delta > 0), key=lambda x: (-x[2].delta, x[0], x[1]))]
    return reg[:top], gain[:top]


def _table_cells(res: Results) -> tuple[list[str], list[list[str]]]:
    p = res.primary
    head = ["backend", "variant", *res.table_metrics, "queries", f"d {p}", "p (perm)", "p (Holm)", "p (t)", "95% CI", "W/T/L"]
    rows = []
    for r in res.rows():
        cells = [r["backend"], r["variant"], *(_f4(r[m]) for m in res.table_metrics), str(r["queries"])]
        if r["delta"] is None:
            cells += [""] * 6
        else:
            ci = r["ci95"]
            cells += [
                f"{r['delta']:+.4f}",
                fmt_p(r["p_value"]),
                fmt_p(r["p_value_holm"]),
                fmt_p(r["p_value_ttest"]),
                f"[{ci[0]:+.3f}, {ci[1]:+.3f}]" if ci else "",
                f"{r['wins']}/{r['ties']}/{r['losses']}",
            ]
        rows.append(cells)
    return head, rows


def table_markdown(res: Results) -> str:
    """The summary table as a Markdown table: rows backend x variant, the table metrics (4 decimals,
    exactly as ``vdr evaluate`` prints them), the number of queries, and for rewrites the change of
    the primary metric with its p-values, bootstrap interval and win/tie/loss counts."""
    head, rows = _table_cells(res)
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(_md(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def table_html(res: Results) -> str:
    """The summary table as an HTML ``<table>`` (escaped; numbers right-aligned)."""
    head, rows = _table_cells(res)
    out = ['<table class="summary"><thead><tr>' + "".join(f"<th>{esc(h)}</th>" for h in head) + "</tr></thead><tbody>"]
    for row in rows:
        cls = ' class="original"' if row[1] == ORIGINAL else ""
        out.append(f"<tr{cls}>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)


# --------------------------------------------------------------------------------------------
# thumbnails


class _Thumbs:
    """Page thumbnails as data URIs, cached per corpus id; counts pages whose image is missing."""

    def __init__(self, res: Results) -> None:
        self.res = res
        self.cache: dict[str, str | None] = {}
        self.missing: set[str] = set()

    def uri(self, corpus_id: str) -> str | None:
        if corpus_id not in self.cache:
            im = self.res.page_image(corpus_id)
            if im is None:
                self.cache[corpus_id] = None
                self.missing.add(corpus_id)
            else:
                im.thumbnail((THUMB_WIDTH, THUMB_MAX_HEIGHT))
                buf = io.BytesIO()
                im.save(buf, format="JPEG", quality=80)
                self.cache[corpus_id] = _data_uri(buf.getvalue(), "image/jpeg")
        return self.cache[corpus_id]

    def figure(self, corpus_id: str, caption: str, grade: int | None, relevance_level: int) -> str:
        if grade is None:
            cls, mark = "unjudged", "unjudged"
        elif grade >= relevance_level:
            cls, mark = "relevant", f"relevant, grade {grade}"
        else:
            cls, mark = "nonrel", f"judged not relevant, grade {grade}"
        uri = self.uri(corpus_id)
        if uri is None:
            pic = f'<div class="missing" role="img" aria-label="image missing">image missing<br>{esc(corpus_id)}</div>'
        else:
            pic = f'<img src="{uri}" alt="{esc(corpus_id)}" width="{THUMB_WIDTH}">'
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
figure.thumb img{border:3px solid #bbb;display:block;width:150px;height:auto}
figure.relevant img,figure.relevant .missing{border-color:#1a9850}figure.nonrel img,figure.nonrel .missing{border-color:#d73027}
figure.unjudged img,figure.unjudged .missing{border-style:dashed}
.missing{width:144px;height:100px;border:3px solid #bbb;background:repeating-linear-gradient(45deg,#eee,#eee 8px,#f8f8f8 8px,#f8f8f8 16px);
 display:flex;flex-direction:column;align-items:center;justify-content:center;color:#a00;font-weight:600;word-break:break-all}
.mark{color:#555}.id{color:#333}
"""


def _bars_section(res: Results) -> tuple[str, list[str]]:
    from .plots import metric_bars

    metrics = bar_metrics(res)
    n_boot = int(res.config.get("n_bootstrap") or 10_000)
    seed = int(res.config.get("seed") or 0)
    parts = [
        "<h2 id=\"metrics\">Metrics per backend with 95% bootstrap intervals</h2>",
        f'<p class="note">Bars: mean over the {len(res.query_ids)} queries; whiskers: 95% percentile bootstrap interval '
        f"of the mean ({n_boot} resamples of the queries, seed {seed}).</p>",
    ]
    md = ["## Metrics per backend (mean [95% bootstrap interval])", ""]
    md.append("| backend | variant | " + " | ".join(metrics) + " |")
    md.append("|" + "---|" * (len(metrics) + 2))
    for b in res.backends:
        vs = [v for v in res.variants if _has_run(res, b, v)]
        means = np.zeros((len(vs), len(metrics)))
        ci = np.zeros((len(vs), len(metrics), 2))
        for i, v in enumerate(vs):
            cells = []
            for j, m in enumerate(metrics):
                x = res.values(b, v, m)
                x = x[~np.isnan(x)]
                means[i, j] = float(x.mean()) if len(x) else float("nan")
                ci[i, j] = bootstrap_ci(x, n_bootstrap=n_boot, seed=seed) if len(x) else (np.nan, np.nan)
                cells.append(f"{means[i, j]:.4f} [{ci[i, j, 0]:.3f}, {ci[i, j, 1]:.3f}]")
            md.append(f"| {_md(b)} | {_md(v)} | " + " | ".join(cells) + " |")
        png = metric_bars(b, metrics, vs, means, ci)
        alt = f"{b}: " + "; ".join(f"{v} " + ", ".join(f"{m} {means[i, j]:.3f}" for j, m in enumerate(metrics)) for i, v in enumerate(vs))
        parts.append(f'<h3>{esc(b)}</h3><img class="plot" src="{_data_uri(png, "image/png")}" alt="{esc(alt)}">')
    return "\n".join(parts), md


def _has_run(res: Results, b: str, v: str) -> bool:
    try:
        res.aggregate(b, v)
        return True
    except KeyError:
        return False


def _change_sections(res: Results) -> str:
    from .plots import delta_distribution, length_vs_delta

    p = res.primary
    rws = res.rewrite_variants
    if not rws:
        return ('<h2 id="changes">Per-query changes</h2><p class="note">No rewrite variants were evaluated: nothing to compare.</p>'
                '<h2 id="length">Rewrite length against change</h2><p class="note">No rewrite variants.</p>')
    dist, scat = [], []
    for b in res.backends:
        vs = [v for v in rws if _has_run(res, b, v)]
        if not vs:
            continue
        ds = [np.array(list(res.deltas(b, v).values())) for v in vs]
        dist.append((b, vs, ds))
        lens, dd = [], []
        for v, d in zip(vs, ds):
            ln = np.array([len(res.queries.get(v, {})[q].text.split()) if q in res.queries.get(v, {}) else np.nan for q in res.query_ids])
            ok = ~np.isnan(ln) & ~np.isnan(d)
            lens.append(ln[ok])
            dd.append(d[ok])
        scat.append((b, vs, lens, dd))
    out = ['<h2 id="changes">Distribution of per-query changes (rewritten - original)</h2>',
           f'<p class="note">Change in {esc(p)} per query, per backend and rewrite variant; a box per variant '
           "(median, quartiles), every query a point. Points above 0 are queries the rewrite helped.</p>"]
    png = delta_distribution(p, dist)
    out.append(f'<img class="plot" src="{_data_uri(png, "image/png")}" alt="{esc("distribution of per-query changes in " + p)}">')
    out.append('<table><thead><tr><th>backend</th><th>variant</th><th>mean change</th><th>median</th><th>wins</th><th>ties</th><th>losses</th></tr></thead><tbody>')
    for b, vs, ds in dist:
        for v, d in zip(vs, ds):
            d = d[~np.isnan(d)]
            out.append(f"<tr><td>{esc(b)}</td><td>{esc(v)}</td><td>{d.mean():+.4f}</td><td>{np.median(d):+.4f}</td>"
                       f"<td>{int((d > 0).sum())}</td><td>{int((d == 0).sum())}</td><td>{int((d < 0).sum())}</td></tr>")
    out.append("</tbody></table>")
    out.append('<h2 id="length">Rewrite length against change</h2>')
    out.append(f'<p class="note">x: the rewrite\'s length in whitespace tokens; y: its change in {esc(p)} against the original query.</p>')
    png = length_vs_delta(p, scat)
    out.append(f'<img class="plot" src="{_data_uri(png, "image/png")}" alt="{esc("rewrite length against change in " + p)}">')
    return "\n".join(out)


def _query_html(res: Results, variant: str, qid: str) -> str:
    q = res.queries.get(variant, {}).get(qid)
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


def _cases_section(res: Results, thumbs: _Thumbs, top: int) -> tuple[str, list[str]]:
    p = res.primary
    out = ['<h2 id="cases">Largest regressions and gains</h2>',
           f'<p class="note">Per backend, the {top} queries whose {esc(p)} dropped most and the {top} it rose most under any rewrite. '
           "Each shows the original query and the rewrite (with conversation history), the top-3 pages each retrieved, and the "
           "relevant pages with their grade. Frames: green = relevant, red = judged not relevant, dashed = unjudged.</p>"]
    md = [f"## Largest regressions and gains ({p})", ""]
    backends = [b for b in res.backends if _has_run(res, b, ORIGINAL) and res.run_path(b, ORIGINAL) is not None]
    if not res.rewrite_variants:
        out.append('<p class="note">No rewrite variants were evaluated.</p>')
        return "\n".join(out), md + ["No rewrite variants were evaluated.", ""]
    if res.qrels is None:
        out.append('<p class="warn">The qrels file could not be read: relevance marks and relevant pages are not shown.</p>')
    for b in backends:
        reg, gain = largest_changes(res, b, top)
        out.append(f"<h3>{esc(b)}</h3>")
        for title, cases in (("regressions", reg), ("gains", gain)):
            out.append(f"<h4>{esc(b)}: largest {title}</h4>")
            md.append(f"### {_md(b)}: largest {title}")
            md.append("")
            if not cases:
                out.append(f'<p class="note">No {title}.</p>')
                md += [f"No {title}.", ""]
                continue
            for c in cases:
                out.append('<div class="case">')
                out.append(f"<h4>{esc(c.query_id)} &#183; {esc(c.variant)} &#183; {esc(p)} {c.original:.3f} &#8594; {c.rewritten:.3f} "
                           f"({c.delta:+.3f})</h4>")
                out.append(_query_html(res, ORIGINAL, c.query_id))
                out.append(_query_html(res, c.variant, c.query_id))
                out.append(_strip(res, thumbs, "original top-3", b, ORIGINAL, c.query_id))
                out.append(_strip(res, thumbs, f"{c.variant} top-3", b, c.variant, c.query_id))
                rel = res.relevant(c.query_id)
                if rel:
                    figs = "".join(thumbs.figure(pid, f"grade {g}", g, res.relevance_level) for pid, g in rel.items())
                else:
                    figs = '<span class="note">no relevant page in the qrels</span>' if res.qrels is not None else '<span class="note">qrels not available</span>'
                out.append(f'<div class="strip"><span class="lbl">relevant pages</span>{figs}</div>')
                out.append("</div>")
                o = res.queries.get(ORIGINAL, {}).get(c.query_id)
                r = res.queries.get(c.variant, {}).get(c.query_id)
                md.append(f"- `{_md(c.query_id)}` {_md(c.variant)}: {c.original:.4f} -> {c.rewritten:.4f} ({c.delta:+.4f}); "
                          f"original: \"{_md(o.text if o else '?')}\"; rewrite: \"{_md(r.text if r else '?')}\"")
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
    variants = res.variants
    rates = np.full((len(res.backends), len(variants)), np.nan)
    for i, b in enumerate(res.backends):
        for j, v in enumerate(variants):
            if _has_run(res, b, v):
                rates[i, j] = res.aggregate(b, v).get(hm, np.nan)
    head = "".join(f"<th>{esc(v)}</th>" for v in variants)
    rows = "".join(
        f"<tr><td>{esc(b)}</td>" + "".join(f"<td>{_f4(x)}</td>" for x in rates[i]) + "</tr>" for i, b in enumerate(res.backends)
    )
    png = hole_bars(hm, res.backends, variants, rates)
    html_ = (f'<h2 id="holes">{esc(hm)} rate per variant</h2><p>{esc(expl)}</p>'
             f'<table><thead><tr><th>backend</th>{head}</tr></thead><tbody>{rows}</tbody></table>'
             f'<img class="plot" src="{_data_uri(png, "image/png")}" alt="{esc(hm + " per backend and variant")}">')
    md = [f"## {hm} rate per variant", "", expl, "", "| backend | " + " | ".join(_md(v) for v in variants) + " |",
          "|" + "---|" * (len(variants) + 1)]
    md += [f"| {_md(b)} | " + " | ".join(_f4(x) for x in rates[i]) + " |" for i, b in enumerate(res.backends)]
    return html_, md + [""]


# --------------------------------------------------------------------------------------------
# the verb


def _judge_section(root: Path) -> tuple[str, list[str]]:
    """RCP-nDCG beside nDCG and hole@k when ``vdr judge`` wrote ``judge/rcp.json``; else nothing."""
    path = Path(root) / "judge" / "rcp.json"
    if not path.is_file():
        return "", []
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        k = int(doc["k"])
        rows = doc["runs"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        return f'<h2 id="rcp">Judge-calibrated nDCG</h2><p class="warn">{esc(path)} is unreadable: {esc(e)}</p>', []
    comp = {(c.get("backend"), c.get("variant")): c for c in doc.get("comparisons", [])}
    head = ["backend", "variant", f"RCP-nDCG@{k}", f"nDCG@{k}", f"hole@{k}", f"d RCP-nDCG@{k}", "p (perm)", "p (Holm)", "outside pool"]
    body = []
    for r in rows:
        c = comp.get((r.get("backend"), r.get("variant")))
        body.append([r.get("backend"), r.get("variant"), _f4(r.get(f"rcp_ndcg@{k}")), _f4(r.get(f"ndcg@{k}")), _f4(r.get(f"hole@{k}")),
                     "" if c is None else f"{c['delta']:+.4f}", "" if c is None else _f4(c.get("p_value")),
                     "" if c is None else _f4(c.get("p_value_holm")), str(r.get("outside_pool", ""))])
    judge = doc.get("judge", {})
    note = (f"RCP-nDCG@{k} (Rubric-Calibrated Preferences; arXiv 2609.35739) replaces missing labels with calibrated judgments of"
            f" {judge.get('model')} ({judge.get('modality')}), prompts {doc.get('prompt_version')}; pages outside the calibrated"
            " pool gain 0 and are counted. qrels-based nDCG penalises unjudged pages by construction (see hole@k).")
    html_ = (f'<h2 id="rcp">Judge-calibrated nDCG (RCP-nDCG) beside qrels nDCG</h2><p class="note">{esc(note)}</p><table><tr>'
             + "".join(f"<th>{esc(h)}</th>" for h in head) + "</tr>"
             + "".join("<tr>" + "".join(f"<td>{esc(x)}</td>" for x in row) + "</tr>" for row in body) + "</table>")
    md = ["## Judge-calibrated nDCG (RCP-nDCG) beside qrels nDCG", "", _md(note), "", "| " + " | ".join(head) + " |",
          "|" + "---|" * len(head)] + ["| " + " | ".join(_md(x) for x in row) + " |" for row in body] + [""]
    return html_, md


def report(results_dir: str | Path, out: str | Path | None = None, *, top: int = 5) -> ReportPaths:
    """Write an HTML report and a Markdown summary of a results folder written by :func:`vdr.evaluate`.

    The HTML (one file: images as data URIs, inline CSS, no script, no external URL) holds the
    summary table; per backend, bars of nDCG@3, MRR@3 and Recall@10 per variant with 95% bootstrap
    intervals; the distribution of per-query changes (rewritten - original) per backend; rewrite
    length against change; the ``top`` largest regressions and gains per backend, each with the
    query, its rewrite and history, thumbnails of the top-3 retrieved pages of both and of the
    relevant pages with their grade; and the hole@3 rate per variant with what it means. The
    Markdown summary holds the tables and the regression/gain lists (no images).

    Missing page images (a moved corpus), qrels or query files never stop the report: a visible
    placeholder or note is shown and :attr:`ReportPaths.warnings` says what was missing.

    Args:
        results_dir: the folder holding ``results.json`` (``vdr evaluate --out``).
        out: the HTML file to write (default ``RESULTS_DIR/report.html``); the Markdown summary
            goes beside it with the suffix ``.md``. Both are written atomically.
        top: number of regressions and of gains shown per backend.

    Returns:
        :class:`ReportPaths`.

    Raises:
        InputError: ``results_dir`` is not a vdr results folder, or ``top`` < 0.
        OSError: the output cannot be written.
    """
    from ..errors import InputError

    if top < 0:
        raise InputError(f"top must be >= 0, got {top}")
    res = load_results(results_dir)
    out = Path(out) if out is not None else res.root / "report.html"
    md_path = out.with_suffix(".md")
    thumbs = _Thumbs(res)

    title = f"vdr report: {res.root.name or res.root}"
    bars_html, bars_md = _bars_section(res)
    changes_html = _change_sections(res)
    cases_html, cases_md = _cases_section(res, thumbs, top)
    hole_html, hole_md = _hole_section(res)

    warnings = list(res.warnings)
    if thumbs.missing:
        where = res.corpus.root if res.corpus is not None else res.config.get("corpus_dir")
        warnings.append(f"{len(thumbs.missing)} page image(s) missing (corpus {where}); placeholders shown")

    cfg = res.config
    meta = [
        ("results", str(res.root)),
        ("corpus", str(cfg.get("corpus_dir"))),
        ("queries", f"{len(res.query_ids)} ({cfg.get('queries')})"),
        ("qrels", str(cfg.get("qrels"))),
        ("variants", ", ".join(res.variants)),
        ("backends", ", ".join(res.backends)),
        ("model", str(cfg.get("model"))),
        ("seed", str(cfg.get("seed"))),
    ]
    head = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; img-src data:; style-src 'unsafe-inline'\">",
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{esc(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{esc(title)}</h1>",
        "<table class=\"meta\">" + "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in meta) + "</table>",
    ]
    if res.skipped:
        head.append("<p><strong>Skipped backends:</strong></p><ul>" + "".join(
            f"<li>{esc(b)}: {esc(r)}</li>" for b, r in res.skipped.items()) + "</ul>")
    if warnings:
        head.append(f'<div class="warn" id="warnings"><strong>{len(warnings)} warning(s)</strong><ul>'
                    + "".join(f"<li>{esc(w)}</li>" for w in warnings) + "</ul></div>")
    summary = [
        '<h2 id="summary">Summary</h2>',
        table_html(res),
        f'<p class="note">d = rewritten - original in {esc(res.primary)} on the same backend and queries; p (perm): paired '
        "randomization test; p (Holm): Holm-corrected over each backend's tests; p (t): paired t-test; 95% CI: bootstrap "
        "interval of the change; W/T/L: queries won, tied, lost.</p>",
    ]
    judge_html, judge_md = _judge_section(res.root)
    body = [*head, *summary, judge_html, bars_html, changes_html, cases_html, hole_html, "</body></html>", ""]
    write_text_atomic(out, "\n".join(body))

    md = [f"# {title}", "", f"Results: `{_md(res.root)}`; corpus: `{_md(cfg.get('corpus_dir'))}`; "
          f"{len(res.query_ids)} queries; variants: {_md(', '.join(res.variants))}.", "", "## Summary", "", table_markdown(res), ""]
    for b, r in res.skipped.items():
        md.append(f"- {_md(b)}: skipped: {_md(r)}")
    if res.skipped:
        md.append("")
    md += judge_md + bars_md + [""] + hole_md + cases_md
    if warnings:
        md += ["## Warnings", ""] + [f"- {_md(w)}" for w in warnings] + [""]
    md.append(f"Full report with plots and page thumbnails: `{out.name}`.")
    write_text_atomic(md_path, "\n".join(md) + "\n")
    return ReportPaths(out, md_path, len(thumbs.missing), warnings)
