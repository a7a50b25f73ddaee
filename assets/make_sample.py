#!/usr/bin/env python3
"""Generate vdr's bundled sample corpus (``assets/sample_corpus/``) from real public data.

Data: statistical datasets that ship inside the ``statsmodels`` wheel (no download): US
macroeconomic quarterly data 1959-2009 (``macrodata``), the Longley data 1947-1962, the Grunfeld
investment panel 1935-1954, Nile river flow 1871-1970, yearly sunspot numbers 1700-2008, weekly
Mauna Loa CO2 1958-2001, El Nino sea surface temperatures 1950-2010 and US state crime statistics.

Writes, deterministically:

* ``pdfs/*.pdf``: four "in-house" documents made with matplotlib (Agg/PDF backend, DejaVu Sans,
  TrueType text so every page has a text layer): a two-column macro report with charts and
  tables, a 16:9 slide deck, an environment factbook and a state crime statistics brief.
* ``queries.jsonl`` (BEIR ``_id``/``text``, plus each query's ``type``, a field to group by:
  ``vdr evaluate --group-by type``), ``qrels.tsv`` (BEIR TSV; 2 = the page answers,
  1 = partially relevant, 0 = judged not relevant), ``rewrites-conversational.jsonl``
  (underspecified follow-up with ``history``) and ``rewrites-keywords.jsonl``.
* ``manifest.json``: documents with their page counts and page titles, and every query's type
  (``extractive``, ``chart``, ``table``, ``paraphrase``, ``none``) and expected answer string
  (present in the text layer of each grade-2 page; used by ``tests/test_sample_assets.py``).

Queries of type ``none`` have no relevant page; each gets exactly one grade-0 qrels line (a
topically close page) so that vdr evaluates them and they count as 0 (or are left out with
``--exclude-queries-without-relevant``).

Usage: ``python assets/make_sample.py [--out DIR] [--no-pdfs]``.  Needs ``matplotlib`` and
``statsmodels`` (the ``sample`` extra).
"""

from __future__ import annotations

import argparse
import json
import math
import textwrap
import time
from pathlib import Path

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib import font_manager  # noqa: E402
from matplotlib.backends.backend_pdf import PdfPages  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE / "sample_corpus"

RC = {
    "font.family": "DejaVu Sans",
    "font.size": 10,
    "pdf.fonttype": 42,  # TrueType: extractable text layer
    "pdf.compression": 9,
    "svg.hashsalt": "vdr-sample",
    "axes.unicode_minus": False,  # ASCII hyphen-minus, so "-3.2%" matches in the text layer
    "axes.spines.top": False,
    "axes.spines.right": False,
    "path.simplify": True,
    "text.parse_math": False,  # "$" is a dollar sign, not mathtext
}
PDF_METADATA = {
    "Creator": "vdr assets/make_sample.py",
    "Producer": "matplotlib",
    "CreationDate": None,
    "ModDate": None,
}
LETTER = (8.5, 11.0)
SLIDE = (13.333, 7.5)
BLUE, ORANGE, GREEN, RED, GREY = "#1f4e79", "#d9822b", "#3a7d44", "#b03a2e", "#666666"


def _pin_fonts() -> None:
    """Use only the DejaVu fonts bundled with matplotlib (not whatever the system has)."""
    data = str(Path(matplotlib.get_data_path()).resolve())
    fm = font_manager.fontManager
    fm.ttflist = [f for f in fm.ttflist if str(Path(f.fname).resolve()).startswith(data)]
    _clear_font_cache()


def _clear_font_cache() -> None:
    cached = getattr(font_manager, "_findfont_cached", None)  # matplotlib >= 3.6
    if cached is not None and hasattr(cached, "cache_clear"):
        cached.cache_clear()


# --------------------------------------------------------------------------------------------
# data
# --------------------------------------------------------------------------------------------


def load_data() -> dict:
    from statsmodels import datasets as ds

    d = {}
    m = ds.macrodata.load_pandas().data.copy()
    m["year"] = m["year"].astype(int)
    m["quarter"] = m["quarter"].astype(int)
    d["macro"] = m
    d["longley"] = ds.longley.load_pandas().data.copy()
    g = ds.grunfeld.load_pandas().data.copy()
    g["year"] = g["year"].astype(int)
    d["grunfeld"] = g
    d["nile"] = ds.nile.load_pandas().data.copy()
    d["sunspots"] = ds.sunspots.load_pandas().data.copy()
    d["co2"] = ds.co2.load_pandas().data.copy()
    e = ds.elnino.load_pandas().data.copy()
    e["YEAR"] = e["YEAR"].astype(int)
    d["elnino"] = e
    d["crime"] = ds.statecrime.load_pandas().data.copy()
    return d


def pct(x: float, sign: bool = False) -> str:
    """Percentage with one decimal; ASCII minus."""
    x = round(float(x), 1) + 0.0  # no "-0.0"
    return f"{x:+.1f}%" if sign else f"{x:.1f}%"


def num(x: float, nd: int = 1) -> str:
    return f"{float(x):,.{nd}f}"


# --------------------------------------------------------------------------------------------
# page layout helpers
# --------------------------------------------------------------------------------------------


class Doc:
    """A PDF being written; remembers which page holds what (``key -> page number``)."""

    def __init__(self, path: Path, name: str, title: str):
        self.path, self.name, self.title = path, name, title
        self._tmp = path.with_name(path.name + ".part")  # renamed into place when complete
        self.pdf = PdfPages(self._tmp, metadata={**PDF_METADATA, "Title": title})
        self.pages: list[str] = []
        self.keys: dict[str, int] = {}

    def add(self, fig, key: str, title: str) -> None:
        n = len(self.pages) + 1
        fig.text(0.5, 0.018, f"{self.title}  |  page {n}", ha="center", fontsize=7, color=GREY)
        self.pdf.savefig(fig)
        plt.close(fig)
        self.pages.append(title)
        assert key not in self.keys, key
        self.keys[key] = n

    def close(self) -> None:
        self.pdf.close()
        self._tmp.replace(self.path)


def header(fig, title: str, subtitle: str | None = None, size: float = 17) -> None:
    fig.text(0.07, 0.945, title, fontsize=size, weight="bold", color=BLUE, va="top")
    if subtitle:
        fig.text(0.07, 0.905, subtitle, fontsize=10, color=GREY, va="top")
    fig.add_artist(Line2D([0.07, 0.93], [0.89, 0.89], color=BLUE, lw=1.2))


def columns(fig, paragraphs: list[str], *, ncols: int = 2, top: float = 0.87, bottom: float = 0.07,
            left: float = 0.07, right: float = 0.93, gap: float = 0.04, fontsize: float = 9.5,
            width_chars: int | None = None) -> None:
    """Flow wrapped paragraphs into ``ncols`` text columns (each line a real text object)."""
    colw = (right - left - gap * (ncols - 1)) / ncols
    if width_chars is None:  # DejaVu Sans averages ~0.55 em per character
        width_chars = int(colw * fig.get_figwidth() * 72 / (fontsize * 0.56))
    line_h = fontsize * 1.45 / 72 / fig.get_figheight()
    per_col = int((top - bottom) / line_h)
    lines: list[str] = []
    for p in paragraphs:
        if p.startswith("## "):
            lines += ["\0" + p[3:], ""]
            continue
        lines += textwrap.wrap(p, width_chars) + [""]
    while lines and lines[-1] == "":
        lines.pop()
    if len(lines) > per_col * ncols:
        raise ValueError(f"text overflows {ncols} columns: {len(lines)} lines > {per_col * ncols}")
    for i, line in enumerate(lines):
        c, r = divmod(i, per_col)
        if not line:
            continue
        x = left + c * (colw + gap)
        y = top - r * line_h
        if line.startswith("\0"):
            fig.text(x, y, line[1:], fontsize=fontsize + 1.5, weight="bold", color=BLUE, va="top")
        else:
            fig.text(x, y, line, fontsize=fontsize, va="top")


def table(fig, headers: list[str], rows: list[list[str]], *, top: float, left: float = 0.07,
          right: float = 0.93, row_h: float = 0.0215, fontsize: float = 8.5, widths=None) -> float:
    """Draw a ruled table of text cells; returns the y below it."""
    n = len(headers)
    widths = widths or [1] * n
    tot = sum(widths)
    xs = [left]
    for w in widths:
        xs.append(xs[-1] + (right - left) * w / tot)
    y = top
    hh = row_h * (1 + 0.8 * max(h.count("\n") for h in headers))
    fig.add_artist(Rectangle((left, y - hh), right - left, hh, color="#dce6f1", lw=0))
    for i, h in enumerate(headers):
        ha, x = ("left", xs[i] + 0.006) if i == 0 else ("right", xs[i + 1] - 0.006)
        fig.text(x, y - hh / 2, h, fontsize=fontsize, weight="bold", va="center", ha=ha,
                 multialignment=ha, linespacing=1.1)
    y -= hh
    fig.add_artist(Line2D([left, right], [y, y], color=BLUE, lw=0.8))
    for r, row in enumerate(rows):
        if r % 2:
            fig.add_artist(Rectangle((left, y - row_h), right - left, row_h, color="#f3f3f3", lw=0))
        for i, cell in enumerate(row):
            ha, x = ("left", xs[i] + 0.006) if i == 0 else ("right", xs[i + 1] - 0.006)
            fig.text(x, y - row_h / 2, cell, fontsize=fontsize, va="center", ha=ha)
        y -= row_h
    fig.add_artist(Line2D([left, right], [y, y], color=BLUE, lw=0.8))
    return y


def chart_page(title: str, subtitle: str, size=LETTER, rect=(0.1, 0.12, 0.84, 0.7)):
    fig = plt.figure(figsize=size)
    header(fig, title, subtitle)
    ax = fig.add_axes(rect)
    ax.grid(axis="y", color="#dddddd", lw=0.6)
    ax.set_axisbelow(True)
    return fig, ax


def note(fig, text: str, y: float = 0.07, size: float = 8) -> None:
    fig.text(0.07, y, text, fontsize=size, color=GREY, style="italic")


# --------------------------------------------------------------------------------------------
# document 1: US macro report
# --------------------------------------------------------------------------------------------

DECADES = [(1960, 1969, "The 1960s"), (1970, 1979, "The 1970s"), (1980, 1989, "The 1980s"),
           (1990, 1999, "The 1990s"), (2000, 2009, "The 2000s")]


def macro_annual(m):
    full = m.groupby("year").filter(lambda g: len(g) == 4)
    a = full.groupby("year").agg(
        realgdp=("realgdp", "mean"), realcons=("realcons", "mean"), realinv=("realinv", "mean"),
        realgovt=("realgovt", "mean"), unemp=("unemp", "mean"), tbilrate=("tbilrate", "mean"),
        pop=("pop", "last"), m1=("m1", "last"), cpi=("cpi", "last"))
    # growth of annual averages (%), inflation = Q4/Q4 change of the CPI (%)
    a["gdp_g"] = a["realgdp"].pct_change() * 100
    a["cons_g"] = a["realcons"].pct_change() * 100
    a["inv_g"] = a["realinv"].pct_change() * 100
    a["govt_g"] = a["realgovt"].pct_change() * 100
    a["infl"] = a["cpi"].pct_change() * 100
    return a


def make_macro(out: Path, data: dict, facts: dict) -> Doc:
    m = data["macro"]
    a = macro_annual(m)
    m = m.assign(label=m["year"].astype(str) + "Q" + m["quarter"].astype(str))
    p09 = m[m["year"] == 2009]
    g09 = (p09["realgdp"].mean() / m[(m["year"] == 2008) & (m["quarter"] <= 3)]["realgdp"].mean() - 1) * 100
    doc = Doc(out / "us-macro-report.pdf", "us-macro-report.pdf", "US Macroeconomic Review 1959-2009")

    # p1 title + executive summary
    fig = plt.figure(figsize=LETTER)
    fig.text(0.07, 0.9, "US Macroeconomic Review", fontsize=28, weight="bold", color=BLUE)
    fig.text(0.07, 0.86, "Half a century of output, prices and jobs, 1959-2009", fontsize=14, color=GREY)
    fig.add_artist(Line2D([0.07, 0.93], [0.845, 0.845], color=BLUE, lw=2))
    first, last = m.iloc[0], m.iloc[-1]
    cum = (last["realgdp"] / first["realgdp"] - 1) * 100
    yrs = (len(m) - 1) / 4
    cagr = ((last["realgdp"] / first["realgdp"]) ** (1 / yrs) - 1) * 100
    neg = [int(y) for y in a.index if a.loc[y, "gdp_g"] < 0]
    paras = [
        "## Executive summary",
        f"Between the first quarter of 1959 and the third quarter of 2009 US real gross domestic "
        f"product rose from ${num(first['realgdp'], 0)} billion to ${num(last['realgdp'], 0)} billion "
        f"(chained 2005 dollars, seasonally adjusted annual rate), an increase of {pct(cum)} or "
        f"{pct(cagr)} a year on average.",
        f"Annual average output fell in only {len(neg)} calendar years of the period: "
        + ", ".join(map(str, neg)) + ". "
        f"In the first three quarters of 2009 real GDP was {pct(abs(g09))} "
        f"{'below' if g09 < 0 else 'above'} the same quarters of 2008, the sharpest contraction "
        f"in this record.",
        "This review walks through each decade in turn, then presents charts of growth, "
        "unemployment, prices, interest rates and investment, and closes with statistical tables "
        "and a short appendix on the Longley employment data of 1947-1962.",
        "## Contents",
        "Decade reviews: the 1960s, 1970s, 1980s, 1990s and 2000s (pages 2-6). Charts: real GDP "
        "growth, the unemployment rate, inflation and the Treasury bill rate, and real private "
        "investment (pages 7-10). Tables of annual averages (pages 11-12). Appendix: Longley data "
        "(page 13). Data notes (page 14).",
    ]
    columns(fig, paras, ncols=1, top=0.8, fontsize=11)
    doc.add(fig, "title", "US Macroeconomic Review: executive summary")
    facts["macro_neg_years"] = neg
    facts["macro_g09"] = g09

    # p2-6 decade narratives
    for y0, y1, name in DECADES:
        fig = plt.figure(figsize=LETTER)
        header(fig, name, f"US Macroeconomic Review: output and spending, {y0}-{min(y1, 2009)}")
        years = [y for y in range(y0, y1 + 1) if y in a.index]
        g = a.loc[years, "gdp_g"]
        best, worst = int(g.idxmax()), int(g.idxmin())
        paras = [
            f"Over the {name[4:]} annual average real GDP grew by {pct(g.mean())} a year. "
            f"The strongest year was {best}, when real GDP grew by {pct(g[best])}; the weakest was "
            f"{worst}, with {'a decline of ' + pct(-g[worst]) if g[worst] < 0 else 'growth of only ' + pct(g[worst])}.",
        ]
        for y in years:
            r = a.loc[y]
            verb = "grew by" if r["gdp_g"] >= 0 else "fell by"
            cverb = "rose" if r["cons_g"] >= 0 else "fell"
            gverb = "rose" if r["govt_g"] >= 0 else "fell"
            paras.append(
                f"In {y}, US real GDP {verb} {pct(abs(r['gdp_g']))} to an annual average of "
                f"${num(r['realgdp'], 0)} billion. Real personal consumption {cverb} "
                f"{pct(abs(r['cons_g']))} to ${num(r['realcons'], 0)} billion, and real federal "
                f"spending {gverb} {pct(abs(r['govt_g']))}.")
            facts[f"gdp_g_{y}"] = r["gdp_g"]
        if y1 == 2009:
            paras.append(
                f"In 2009 (first three quarters), real GDP averaged ${num(p09['realgdp'].mean(), 0)} "
                f"billion, {pct(abs(g09))} {'below' if g09 < 0 else 'above'} the same period of 2008.")
        paras.append("Unemployment, prices and interest rates for these years are shown in the "
                     "charts and statistical tables that follow.")
        columns(fig, paras, fontsize=9.5)
        doc.add(fig, f"decade{y0}", f"{name}: output and spending")
        facts[f"best_{y0}"], facts[f"worst_{y0}"] = best, worst

    # p7 GDP growth bars (no value labels: the narrative has the numbers)
    fig, ax = chart_page("Real GDP growth", "Annual average real GDP, % change on previous year, 1960-2008")
    g = a["gdp_g"].dropna()
    ax.bar(g.index, g.values, color=[BLUE if v >= 0 else RED for v in g.values], width=0.75)
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xlabel("Year")
    ax.set_ylabel("Real GDP growth (%)")
    ax.set_title("US real GDP growth, % per year", loc="left", fontsize=11)
    note(fig, "Source: statsmodels macrodata (US BEA/BLS/Federal Reserve quarterly series).")
    doc.add(fig, "chart_gdp", "Chart: real GDP growth")

    # p8 unemployment with cycle peaks labelled (chart-only facts)
    fig, ax = chart_page("Unemployment rate", "Quarterly, seasonally adjusted, %, 1959Q1-2009Q3")
    x = m["year"] + (m["quarter"] - 1) / 4
    ax.plot(x, m["unemp"], color=BLUE, lw=1.6)
    windows = [(1959, 1965), (1966, 1972), (1973, 1978), (1979, 1986), (1987, 1996), (1997, 2005), (2006, 2009)]
    peaks = {}
    for w0, w1 in windows:
        sub = m[(m["year"] >= w0) & (m["year"] <= w1)]
        i = sub["unemp"].idxmax()
        r = m.loc[i]
        peaks[(w0, w1)] = (r["unemp"], r["label"])
        xi = r["year"] + (r["quarter"] - 1) / 4
        ax.plot([xi], [r["unemp"]], "o", color=RED, ms=4)
        ax.annotate(f"{pct(r['unemp'])} ({r['label']})", (xi, r["unemp"]), xytext=(0, 7),
                    textcoords="offset points", ha="center", fontsize=8, color=RED)
    ax.set_ylim(0, 12)
    ax.set_xlabel("Year")
    ax.set_ylabel("Unemployment rate (%)")
    ax.set_title("Civilian unemployment rate with cyclical peaks", loc="left", fontsize=11)
    doc.add(fig, "chart_unemp", "Chart: unemployment rate")
    facts["unemp_peaks"] = peaks

    # p9 inflation and T-bill rate, peaks labelled
    fig, ax = chart_page("Inflation and interest rates", "CPI inflation (annualised quarterly, %) and 3-month Treasury bill rate (%)")
    ax.plot(x, m["infl"], color=ORANGE, lw=1.2, label="CPI inflation, annualised quarterly rate")
    ax.plot(x, m["tbilrate"], color=BLUE, lw=1.6, label="3-month Treasury bill rate")
    it = m["tbilrate"].idxmax()
    ii = m["infl"].idxmax()
    for i, col, c, off in ((it, "tbilrate", BLUE, (25, 8)), (ii, "infl", ORANGE, (-130, 8))):
        r = m.loc[i]
        xi = r["year"] + (r["quarter"] - 1) / 4
        ax.annotate(f"peak {pct(r[col])} ({r['label']})", (xi, r[col]), xytext=off,
                    textcoords="offset points", fontsize=8.5, color=c, weight="bold",
                    arrowprops=dict(arrowstyle="-", color=c, lw=0.6))
    ax.set_ylim(m["infl"].min() - 1, max(m["infl"].max(), m["tbilrate"].max()) + 3)
    ax.axhline(0, color="black", lw=0.6)
    ax.legend(loc="lower left", frameon=False, fontsize=8.5)
    ax.set_xlabel("Year")
    ax.set_ylabel("Percent")
    doc.add(fig, "chart_rates", "Chart: inflation and Treasury bill rate")
    facts["tbill_peak"] = (m.loc[it, "tbilrate"], m.loc[it, "label"])
    facts["infl_peak"] = (m.loc[ii, "infl"], m.loc[ii, "label"])

    # p10 investment growth, every bar labelled (chart-only facts)
    fig, ax = chart_page("Real private investment", "Gross private domestic investment, annual average, % change, 1960-2008",
                         rect=(0.08, 0.1, 0.88, 0.74))
    ig = a["inv_g"].dropna()
    ax.bar(ig.index, ig.values, color=[GREEN if v >= 0 else RED for v in ig.values], width=0.75)
    for yv, v in ig.items():
        ax.text(yv, v + (0.6 if v >= 0 else -0.6), pct(v, sign=True), rotation=90, fontsize=6.5,
                ha="center", va="bottom" if v >= 0 else "top")
    ax.axhline(0, color="black", lw=0.8)
    ax.set_ylim(ig.min() - 9, ig.max() + 9)
    ax.set_xlabel("Year")
    ax.set_ylabel("Change in real investment (%)")
    ax.set_title("Investment is the most cyclical part of GDP", loc="left", fontsize=11)
    doc.add(fig, "chart_inv", "Chart: real private investment growth")
    facts["inv_g"] = ig.to_dict()

    # p11-12 tables (table-only facts)
    hdr = ["Year", "Unemployment\nrate (%)", "CPI inflation\nQ4/Q4 (%)", "3-month\nT-bill (%)",
           "Population\n(millions)", "M1 money\nstock ($bn)"]
    for key, ys in (("table1", range(1959, 1984)), ("table2", range(1984, 2009))):
        fig = plt.figure(figsize=LETTER)
        header(fig, f"Statistical table: {ys[0]}-{ys[-1]}", "Annual averages of quarterly data (population and M1: fourth quarter)")
        rows = []
        for y in ys:
            r = a.loc[y]
            rows.append([str(y), num(r["unemp"]), "" if math.isnan(r["infl"]) else num(r["infl"]),
                         num(r["tbilrate"], 2), num(r["pop"], 1), num(r["m1"], 1)])
        yb = table(fig, hdr, rows, top=0.86, widths=[0.7, 1.2, 1.5, 1.2, 1.3, 1.3], row_h=0.028, fontsize=9)
        note(fig, "Inflation: change of the end-of-year consumer price index. Unemployment, Treasury bill rate: annual averages.", y=yb - 0.03)
        doc.add(fig, key, f"Statistical table {ys[0]}-{ys[-1]}")
    facts["annual"] = a

    # p13 Longley appendix
    lg = data["longley"]
    fig = plt.figure(figsize=LETTER)
    header(fig, "Appendix: the Longley data, 1947-1962", "US employment and output series used in Longley (1967)")
    rows = [[str(int(r.YEAR)), num(r.TOTEMP, 0), num(r.GNP, 0), num(r.GNPDEFL, 1), num(r.UNEMP, 0),
             num(r.ARMED, 0), num(r.POP, 0)] for r in lg.itertuples()]
    yb = table(fig, ["Year", "Total\nemployment", "GNP", "GNP\ndeflator", "Unemployed", "Armed\nforces",
                     "Population\n14+"], rows, top=0.86, row_h=0.03, fontsize=9)
    columns(fig, ["Employment, unemployed, armed forces and population are in thousands; GNP in "
                  "millions of current dollars; the GNP deflator has 1954 = 100. The data are a "
                  "classic test of numerical accuracy for least squares software because the "
                  "regressors are nearly collinear."], ncols=1, top=yb - 0.03, fontsize=9)
    doc.add(fig, "longley", "Appendix: Longley data")

    # p14 data notes
    fig = plt.figure(figsize=LETTER)
    header(fig, "Data notes", "Definitions and sources")
    columns(fig, [
        "## Sources",
        "All series come from the US macroeconomic dataset distributed with the statsmodels "
        "Python package, compiled from the Bureau of Economic Analysis, the Bureau of Labor "
        "Statistics and the Federal Reserve. The data are quarterly from 1959Q1 to 2009Q3 "
        "(203 observations).",
        "## Definitions",
        "Real GDP, real personal consumption, real gross private domestic investment and real "
        "federal consumption expenditures and gross investment are in billions of chained 2005 "
        "dollars at seasonally adjusted annual rates.",
        "The consumer price index is for all urban consumers, all items, with base period "
        "1982-84 = 100, seasonally adjusted, end of quarter. M1 is the end-of-quarter nominal "
        "money stock. The Treasury bill rate is the quarterly average of the monthly 3-month "
        "secondary market rate. The unemployment rate is seasonally adjusted. Population is the "
        "total population of all ages including armed forces overseas, in millions.",
        "## Methods",
        "Annual figures are averages of the four quarters of a calendar year; growth rates compare "
        "annual averages. Years with fewer than four quarters (2009) are excluded from the tables. "
        "Annual inflation is the change of the end-of-year price index.",
    ])
    doc.add(fig, "notes", "Data notes")
    doc.close()
    return doc


# --------------------------------------------------------------------------------------------
# document 2: Grunfeld slide deck (16:9)
# --------------------------------------------------------------------------------------------


def slide(title: str, subtitle: str | None = None):
    fig = plt.figure(figsize=SLIDE)
    fig.add_artist(Rectangle((0, 0.86), 1, 0.14, color=BLUE, lw=0))
    fig.text(0.04, 0.93, title, fontsize=26, weight="bold", color="white", va="center")
    if subtitle:
        fig.text(0.04, 0.81, subtitle, fontsize=13, color=GREY, va="center")
    return fig


def make_deck(out: Path, data: dict, facts: dict) -> Doc:
    g = data["grunfeld"]
    firms = list(dict.fromkeys(g["firm"]))
    doc = Doc(out / "grunfeld-investment-deck.pdf", "grunfeld-investment-deck.pdf", "Corporate Investment 1935-1954")

    fig = plt.figure(figsize=SLIDE)
    fig.add_artist(Rectangle((0, 0), 1, 1, color=BLUE, lw=0))
    fig.text(0.06, 0.6, "Corporate Investment 1935-1954", fontsize=40, weight="bold", color="white")
    fig.text(0.06, 0.5, "Eleven US manufacturing firms: gross investment, market value and capital stock",
             fontsize=18, color="white")
    fig.text(0.06, 0.2, "Strategy review deck  |  Source: Grunfeld (1958) panel data", fontsize=13, color="#c8d6e5")
    doc.add(fig, "title", "Title slide")

    tot = g.groupby("firm")["invest"].sum().reindex(firms).sort_values()
    fig = slide("Who invested most?", "Total gross investment 1935-1954, millions of 1947 dollars")
    ax = fig.add_axes((0.22, 0.08, 0.72, 0.68))
    ax.barh(tot.index, tot.values, color=BLUE)
    for i, v in enumerate(tot.values):
        ax.text(v + tot.max() * 0.01, i, num(v, 0), va="center", fontsize=11)
    ax.set_xlabel("Total gross investment 1935-1954 ($ million)")
    ax.set_xlim(0, tot.max() * 1.15)
    ax.tick_params(labelsize=12)
    doc.add(fig, "overview", "Total investment by firm")
    facts["grunfeld_total"] = tot

    for f in firms:
        s = g[g["firm"] == f].set_index("year")
        fig = slide(f"{f}: gross investment", "Gross investment by year, 1935-1954, $ million (1947 dollars)")
        ax = fig.add_axes((0.07, 0.1, 0.6, 0.62))
        ax.plot(s.index, s["invest"], "-o", color=BLUE, ms=4, lw=2)
        ax.grid(axis="y", color="#dddddd", lw=0.6)
        pk = int(s["invest"].idxmax())
        for y in sorted({1935, pk, 1954}):
            off, ha = {1935: ((8, -16), "left"), 1954: ((10, -4), "left")}.get(y, ((0, 10), "center"))
            if y == pk:
                off, ha = (0, 10), "center" if y != 1954 else "right"
            ax.annotate(f"{y}: {num(s.loc[y, 'invest'])}", (y, s.loc[y, "invest"]), xytext=off,
                        textcoords="offset points", ha=ha, fontsize=11, color=RED, weight="bold")
        ax.set_ylim(0, s["invest"].max() * 1.2)
        ax.set_xlim(1934, 1958)
        ax.set_xticks(range(1935, 1955, 3))
        ax.set_xlabel("Year")
        ax.set_ylabel("Gross investment ($ million)")
        v0, v1 = s.loc[1935, "value"], s.loc[1954, "value"]
        c0, c1 = s.loc[1935, "capital"], s.loc[1954, "capital"]
        fig.text(0.72, 0.7, "Key figures", fontsize=18, weight="bold", color=BLUE)
        lines = [f"Market value 1935: ${num(v0)} million", f"Market value 1954: ${num(v1)} million",
                 f"Capital stock 1935: ${num(c0)} million", f"Capital stock 1954: ${num(c1)} million"]
        for i, t in enumerate(lines):
            fig.text(0.72, 0.62 - i * 0.07, t, fontsize=13)
        doc.add(fig, f"firm:{f}", f"{f}: gross investment")
        facts[f"firm:{f}"] = {"peak_year": pk, "peak": s.loc[pk, "invest"], "i1954": s.loc[1954, "invest"],
                              "v1935": v0, "v1954": v1}

    inv = g.pivot(index="year", columns="firm", values="invest")[firms]
    cut38 = [f for f in firms if inv.loc[1938, f] < inv.loc[1937, f]]
    growth = (inv.loc[1950:1954].mean() / inv.loc[1935:1939].mean()).sort_values()
    fast = growth.index[-1]
    fig = slide("Takeaways")
    bullets = [
        f"The 1938 recession: {len(cut38)} of {len(firms)} firms cut gross investment in 1938 "
        f"compared with 1937 ({', '.join(cut38)}).",
        f"Fastest growth: {fast} raised its average yearly investment {growth[fast]:.1f}-fold "
        f"between 1935-1939 and 1950-1954.",
        f"Slowest growth: {growth.index[0]} ({growth.iloc[0]:.1f}-fold over the same periods).",
        "Investment tracks the market value of the firm and its existing capital stock, the two "
        "regressors of the Grunfeld investment equation.",
    ]
    y = 0.72
    for b in bullets:
        wrapped = textwrap.wrap(b, 95)
        fig.text(0.05, y, "\u2022", fontsize=16, va="top")
        fig.text(0.075, y, "\n".join(wrapped), fontsize=16, va="top", linespacing=1.35)
        y -= 0.075 * len(wrapped) + 0.05
    doc.add(fig, "takeaways", "Takeaways")
    facts["cut38"], facts["fastest"], facts["fast_x"] = cut38, fast, growth[fast]
    doc.close()
    return doc


# --------------------------------------------------------------------------------------------
# document 3: environment factbook
# --------------------------------------------------------------------------------------------

MONTHS = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"]


def make_env(out: Path, data: dict, facts: dict) -> Doc:
    doc = Doc(out / "environment-factbook.pdf", "environment-factbook.pdf", "Environment Factbook")
    nile, sun, co2, eln = data["nile"], data["sunspots"], data["co2"], data["elnino"]

    fig = plt.figure(figsize=LETTER)
    fig.text(0.07, 0.9, "Environment Factbook", fontsize=28, weight="bold", color=GREEN)
    fig.text(0.07, 0.86, "Rivers, the Sun, the atmosphere and the Pacific in long time series", fontsize=14, color=GREY)
    fig.add_artist(Line2D([0.07, 0.93], [0.845, 0.845], color=GREEN, lw=2))
    columns(fig, [
        "## About this factbook",
        "Four long environmental records, each a classic of time-series analysis: the annual "
        "flow of the Nile at Aswan (1871-1970), the yearly sunspot number (1700-2008), weekly "
        "carbon dioxide measured at Mauna Loa, Hawaii (1958-2001) and monthly sea surface "
        "temperatures of the eastern equatorial Pacific that track El Nino (1950-2010).",
        "## Contents",
        "Nile river flow: narrative (page 2) and chart (page 3). Sunspots: chart of the solar "
        "cycle (page 4). Atmospheric CO2: chart of annual means (page 5) and seasonal table "
        "(page 6). El Nino sea surface temperatures: monthly tables (pages 7-8) and a chart of "
        "annual means (page 9). Sources (page 10).",
    ], ncols=1, top=0.8, fontsize=11)
    doc.add(fig, "title", "Environment Factbook: contents")

    n = nile.set_index(nile["year"].astype(int))["volume"]
    pre, post = n.loc[:1898].mean(), n.loc[1899:].mean()
    lo, hi = int(n.idxmin()), int(n.idxmax())
    fig = plt.figure(figsize=LETTER)
    header(fig, "The Nile at Aswan", "Annual flow volume, 1871-1970, in 100 million cubic metres")
    columns(fig, [
        f"The Nile carried on average {num(n.mean(), 0)} hundred million cubic metres (10^8 m^3) of "
        f"water past Aswan each year between 1871 and 1970. The record is famous for an abrupt "
        f"shift in level around 1898: the mean annual flow was {num(pre, 0)} in 1871-1898 and "
        f"only {num(post, 0)} in 1899-1970, a drop of {pct((1 - post / pre) * 100)}.",
        f"The lowest annual flow of the century was recorded in {lo}, at {num(n[lo], 0)}; the "
        f"highest was in {hi}, at {num(n[hi], 0)}. After the shift the river never again "
        f"reached the volumes of the wet years of the 1870s.",
        "Explanations of the change point include the start of construction of the first Aswan "
        "dam and a change in monsoon rainfall over the Ethiopian highlands. The series is a "
        "standard test case for structural break and state space models.",
        "## Reading the chart",
        "The chart on the next page shows each year's flow together with the two period means.",
    ], fontsize=10)
    doc.add(fig, "nile_text", "The Nile at Aswan (narrative)")
    facts.update(nile_mean=n.mean(), nile_pre=pre, nile_post=post, nile_lo=lo, nile_hi=hi, nile_lo_v=n[lo])

    fig, ax = chart_page("Nile flow, 1871-1970", "Annual volume at Aswan, 10^8 cubic metres")
    ax.plot(n.index, n.values, color=BLUE, lw=1.4, label="Annual flow")
    ax.hlines([pre, post], [1871, 1899], [1898, 1970], color=RED, lw=2, label="Period mean")
    ax.axvline(1898.5, color=GREY, ls="--", lw=1)
    ax.set_xlabel("Year")
    ax.set_ylabel("Flow volume (10^8 m^3)")
    ax.legend(frameon=False, loc="upper right")
    doc.add(fig, "nile_chart", "Chart: Nile flow")

    s = sun.set_index(sun["YEAR"].astype(int))["SUNACTIVITY"]
    peaks = [int(y) for y in s.index if s[y] == s.loc[max(y - 5, s.index[0]):y + 5].max() and s[y] > 40]
    fig, ax = chart_page("Sunspots and the solar cycle", "Yearly mean sunspot number, 1700-2008",
                         rect=(0.08, 0.12, 0.88, 0.7))
    ax.plot(s.index, s.values, color=ORANGE, lw=1.1)
    for y in peaks:
        ax.text(y, s[y] + 4, f"{y}: {num(s[y])}", rotation=90, fontsize=6.5, ha="center", va="bottom")
    ax.set_ylim(0, s.max() * 1.35)
    ax.set_xlabel("Year")
    ax.set_ylabel("Sunspot number")
    ax.set_title("Cycle maxima labelled with year and sunspot number", loc="left", fontsize=11)
    doc.add(fig, "sun_chart", "Chart: sunspots")
    facts["sun"], facts["sun_peaks"] = s, peaks

    c = co2.copy()
    c.index = c.index.year
    c = c["co2"].dropna()
    grp = c.groupby(level=0)
    years = [y for y in sorted(set(c.index)) if 1959 <= y <= 2001]
    ann = grp.mean().loc[years]
    fig, ax = chart_page("Carbon dioxide at Mauna Loa", "Annual mean CO2 concentration, parts per million (ppm)")
    ax.plot(ann.index, ann.values, "-o", color=GREEN, ms=3)
    lab = [y for y in years if y % 5 == 0]
    for y in lab:
        ax.annotate(f"{y}: {num(ann[y])} ppm", (y, ann[y]), xytext=(-8, 10), textcoords="offset points",
                    fontsize=8.5, ha="right", color=GREEN)
    ax.set_xlabel("Year")
    ax.set_ylabel("CO2 (ppm)")
    ax.set_xlim(1955, 2003)
    doc.add(fig, "co2_chart", "Chart: CO2 annual means")
    facts["co2_ann"] = ann

    fig = plt.figure(figsize=LETTER)
    header(fig, "CO2 seasonal cycle by year", "Mauna Loa weekly CO2 (ppm): highest and lowest week and their difference")
    rows = []
    seas = {}
    for y in years:
        v = c.loc[[y]]
        seas[y] = (v.max(), v.min(), v.max() - v.min())
        rows.append([str(y), num(v.max()), num(v.min()), num(v.max() - v.min()), str(len(v))])
    yb = table(fig, ["Year", "Highest week\n(ppm)", "Lowest week\n(ppm)", "Seasonal\namplitude (ppm)",
                     "Weeks\nmeasured"], rows, top=0.87, row_h=0.0175, fontsize=8.2)
    note(fig, "Weeks with missing measurements are left out.", y=yb - 0.02)
    doc.add(fig, "co2_table", "Table: CO2 seasonal cycle")
    facts["co2_seas"] = seas

    e = eln.set_index("YEAR")
    for key, ys in (("elnino1", range(1950, 1981)), ("elnino2", range(1981, 2011))):
        fig = plt.figure(figsize=LETTER)
        header(fig, f"El Nino sea surface temperatures, {ys[0]}-{ys[-1]}",
               "Monthly mean sea surface temperature (degrees C), eastern equatorial Pacific")
        rows = [[str(y)] + [f"{e.loc[y, mo]:.2f}" for mo in MONTHS] for y in ys]
        table(fig, ["Year"] + [mo.title() for mo in MONTHS], rows, top=0.87, row_h=0.0245, fontsize=8,
              widths=[1.2] + [1] * 12)
        doc.add(fig, key, f"Table: El Nino SST {ys[0]}-{ys[-1]}")
    facts["elnino"] = e

    am = e[MONTHS].mean(axis=1)
    top5 = am.sort_values(ascending=False).index[:5]
    fig, ax = chart_page("El Nino: annual mean temperature", "Mean of the twelve monthly sea surface temperatures, degrees C")
    ax.bar(am.index, am.values - am.mean(), bottom=am.mean(), color=[RED if v > am.mean() else BLUE for v in am.values])
    for y in top5:
        ax.annotate(f"{y}: {am[y]:.2f} C", (y, am[y]), xytext=(0, 6), textcoords="offset points",
                    ha="center", fontsize=8.5, color=RED, rotation=90, va="bottom")
    ax.set_ylim(am.min() - 0.6, am.max() + 1.4)
    ax.set_xlabel("Year")
    ax.set_ylabel("Annual mean SST (degrees C)")
    ax.set_title("The five warmest years are labelled", loc="left", fontsize=11)
    doc.add(fig, "elnino_chart", "Chart: El Nino annual mean")
    facts["elnino_top"] = (int(top5[0]), am[top5[0]])

    fig = plt.figure(figsize=LETTER)
    header(fig, "Sources", "Where the data come from")
    columns(fig, [
        "Nile: Cobb (1978) and Durbin and Koopman (2001), annual flow volume at Aswan. "
        "Sunspots: yearly sunspot number from the Royal Observatory of Belgium (SIDC). "
        "CO2: weekly in situ measurements at Mauna Loa Observatory, Scripps Institution of "
        "Oceanography. El Nino: monthly sea surface temperatures of the Nino 1+2 region from the "
        "NOAA Climate Prediction Center.",
        "All four series are distributed as datasets with the statsmodels Python package.",
    ], ncols=1, fontsize=10)
    doc.add(fig, "sources", "Sources")
    doc.close()
    return doc


# --------------------------------------------------------------------------------------------
# document 4: state crime brief
# --------------------------------------------------------------------------------------------

REGIONS = {
    "Northeast": "Connecticut Maine Massachusetts New_Hampshire Rhode_Island Vermont New_Jersey New_York Pennsylvania",
    "Midwest": "Illinois Indiana Michigan Ohio Wisconsin Iowa Kansas Minnesota Missouri Nebraska North_Dakota South_Dakota",
    "South": "Delaware District_of_Columbia Florida Georgia Maryland North_Carolina South_Carolina Virginia "
             "West_Virginia Alabama Kentucky Mississippi Tennessee Arkansas Louisiana Oklahoma Texas",
    "West": "Arizona Colorado Idaho Montana Nevada New_Mexico Utah Wyoming Alaska California Hawaii Oregon Washington",
}


def make_crime(out: Path, data: dict, facts: dict) -> Doc:
    cr = data["crime"].copy()
    cr.index = [str(s).strip().replace("_", " ") for s in cr.index]
    region = {s.replace("_", " "): r for r, ss in REGIONS.items() for s in ss.split()}
    assert set(region) == set(cr.index), set(cr.index) ^ set(region)
    cr["region"] = [region[s] for s in cr.index]
    doc = Doc(out / "state-crime-brief.pdf", "state-crime-brief.pdf", "State Crime Statistics Brief")

    hi, lo = cr["violent"].idxmax(), cr["violent"].idxmin()
    mhi = cr["murder"].idxmax()
    fig = plt.figure(figsize=LETTER)
    header(fig, "State Crime Statistics Brief", "Violent crime, murder and social indicators for the 50 states and DC", size=20)
    columns(fig, [
        "## Summary",
        f"Violent crime rates differ more than tenfold across the United States. The District of "
        f"Columbia is an outlier among the 51 jurisdictions: {hi} had the highest violent crime "
        f"rate, {num(cr.loc[hi, 'violent'])} offences per 100,000 residents, and also the highest "
        f"murder rate, {num(cr.loc[mhi, 'murder'])} per 100,000. The lowest violent crime rate was "
        f"in {lo}, at {num(cr.loc[lo, 'violent'])} per 100,000.",
        f"The median state recorded {num(cr['violent'].median())} violent crimes per 100,000 "
        f"residents. Poverty, the share of single-parent households, high school graduation and "
        f"urbanisation are reported alongside the crime rates.",
        "## Contents",
        "State table (pages 2-3), violent crime and poverty (page 4), violent crime by Census "
        "region (page 5).",
        "## Definitions",
        "Violent crime: murder, forcible rape, robbery and aggravated assault per 100,000 "
        "population. Murder: murders and non-negligent manslaughter per 100,000. High school "
        "graduates, poverty, single-parent households, white population and urban population "
        "are percentages.",
    ])
    doc.add(fig, "intro", "Summary")
    facts.update(crime_hi=hi, crime_lo=lo, crime=cr)

    states = sorted(cr.index)
    hdr = ["State", "Violent\ncrime", "Murder", "HS\ngraduates %", "Poverty %", "Single\nparent %",
           "White %", "Urban %"]
    for key, part in (("table1", states[:26]), ("table2", states[26:])):
        fig = plt.figure(figsize=LETTER)
        header(fig, f"State table: {part[0]} to {part[-1]}", "Rates per 100,000 population; indicators in percent")
        rows = [[s, num(cr.loc[s, "violent"]), num(cr.loc[s, "murder"]), num(cr.loc[s, "hs_grad"]),
                 num(cr.loc[s, "poverty"]), num(cr.loc[s, "single"]), num(cr.loc[s, "white"]),
                 num(cr.loc[s, "urban"], 2)] for s in part]
        table(fig, hdr, rows, top=0.86, row_h=0.029, fontsize=8.8, widths=[2.0, 1.2, 0.9, 1.3, 1.1, 1.3, 1, 1])
        doc.add(fig, key, f"State table {part[0]}-{part[-1]}")
        for s in part:
            facts[f"state_page:{s}"] = key

    fig, ax = chart_page("Violent crime and poverty", "Each point is a state; line: least squares fit")
    x, y = cr["poverty"].values, cr["violent"].values
    b, a0 = np.polyfit(x, y, 1)
    r = float(np.corrcoef(x, y)[0, 1])
    ax.scatter(x, y, color=BLUE, s=18)
    xx = np.linspace(x.min(), x.max(), 2)
    ax.plot(xx, a0 + b * xx, color=RED, lw=1.5, label=f"fit: slope {b:.1f} per point of poverty, correlation r = {r:.2f}")
    for s in (hi, lo, mhi, cr["poverty"].idxmax(), cr["poverty"].idxmin()):
        ax.annotate(s, (cr.loc[s, "poverty"], cr.loc[s, "violent"]), xytext=(5, 3), textcoords="offset points", fontsize=8)
    ax.legend(frameon=False, loc="upper left")
    ax.set_xlabel("Population below the poverty line (%)")
    ax.set_ylabel("Violent crimes per 100,000")
    doc.add(fig, "scatter", "Chart: violent crime vs poverty")
    facts["crime_r"] = r

    reg = cr.groupby("region")["violent"].mean().reindex(list(REGIONS))
    fig, ax = chart_page("Violent crime by Census region", "Unweighted mean of state violent crime rates per 100,000")
    ax.bar(reg.index, reg.values, color=[BLUE, GREEN, RED, ORANGE])
    for i, v in enumerate(reg.values):
        ax.text(i, v + 8, num(v), ha="center", fontsize=12, weight="bold")
    ax.set_ylim(0, reg.max() * 1.2)
    ax.set_ylabel("Violent crimes per 100,000 (mean of states)")
    ax.set_xlabel("Census region")
    doc.add(fig, "regions", "Chart: violent crime by region")
    facts["crime_regions"] = reg
    doc.close()
    return doc


# --------------------------------------------------------------------------------------------
# queries
# --------------------------------------------------------------------------------------------


def build_queries(docs: dict[str, Doc], f: dict) -> list[dict]:
    """Each query: id, type, text, conv (history, text), kw, rel {(doc, key): grade}, answer."""
    M, D, E, C = "macro", "deck", "env", "crime"
    a = f["annual"]
    qs: list[dict] = []

    def q(typ, text, conv_hist, conv_text, kw, rel, answer):
        qs.append(dict(type=typ, text=text, history=conv_hist, conv=conv_text, kw=kw, rel=rel, answer=answer))

    macro_h = ["I'm reading the US macroeconomic review covering 1959 to 2009."]
    # --- extractive: the words of the query are on the page
    for y in (1970, 1984, 2001):
        g = f[f"gdp_g_{y}"]
        dec = f"decade{y // 10 * 10}"
        q("extractive", f"How much did US real GDP grow in {y}?", macro_h,
          f"and how much did real GDP {'grow' if g >= 0 else 'change'} in {y}?",
          f"US real GDP growth {y}", {(M, dec): 2, (M, "chart_gdp"): 1}, pct(abs(g)))
    b90 = f["best_1990"]
    q("extractive", "Which year of the 1990s was the strongest for US real GDP growth?", macro_h,
      "which year was the strongest in the nineties?", "strongest year real GDP 1990s",
      {(M, "decade1990"): 2, (M, "chart_gdp"): 1}, str(b90))
    w70 = f["worst_1970"]
    q("extractive", "What was the weakest year for US real GDP in the 1970s?", macro_h,
      "what about the weakest year of the seventies?", "weakest year real GDP 1970s",
      {(M, "decade1970"): 2, (M, "chart_gdp"): 1}, str(w70))
    q("extractive", "What is the base period of the consumer price index in the macro data?", macro_h,
      "what base period does its price index use?", "consumer price index base period 1982-84",
      {(M, "notes"): 2}, "1982-84 = 100")
    q("extractive", f"Nile annual flow at Aswan before and after 1898", ["Tell me about the Nile river flow record."],
      "did the flow change around 1898?", "Nile flow shift 1898 Aswan mean",
      {(E, "nile_text"): 2, (E, "nile_chart"): 1}, num(f["nile_post"], 0))
    q("extractive", "In which year was the lowest annual flow of the Nile recorded?",
      ["Tell me about the Nile river flow record."], "which year had the lowest flow?",
      "Nile lowest annual flow year", {(E, "nile_text"): 2, (E, "nile_chart"): 1}, str(f["nile_lo"]))
    hi = f["crime_hi"]
    q("extractive", "Which state had the highest violent crime rate?", ["I have questions about US state crime statistics."],
      "which one had the highest violent crime rate?", "highest violent crime rate state",
      {(C, "intro"): 2, (C, "scatter"): 1, (C, f["state_page:" + hi]): 1}, hi)
    gm = f["firm:General Motors"]
    q("extractive", "What was the market value of General Motors in 1954?", ["Let's look at the corporate investment deck."],
      "what was GM's market value at the end of the period?", "General Motors market value 1954",
      {(D, "firm:General Motors"): 2}, num(gm["v1954"]))
    q("extractive", "Which firms cut gross investment in the 1938 recession?", ["Let's look at the corporate investment deck."],
      "which of them cut spending in 1938?", "firms cut gross investment 1938 recession",
      {(D, "takeaways"): 2}, f"{len(f['cut38'])} of 11 firms")

    # --- chart-only: the answer is printed only inside a chart
    v, lab = f["unemp_peaks"][(1979, 1986)]
    q("chart", "What was the peak US unemployment rate in the early 1980s?", macro_h,
      "how high did unemployment get in the early eighties?", "peak unemployment rate early 1980s",
      {(M, "chart_unemp"): 2, (M, "table1"): 1}, f"{pct(v)} ({lab})")
    v, lab = f["tbill_peak"]
    q("chart", "When did the 3-month Treasury bill rate reach its highest level?", macro_h,
      "when were T-bill rates at their highest?", "3-month Treasury bill rate peak",
      {(M, "chart_rates"): 2, (M, "table1"): 1}, f"peak {pct(v)} ({lab})")
    for y in (1975, 1982):
        v = f["inv_g"][y]
        q("chart", f"By how much did real private investment change in {y}?", macro_h,
          f"and investment in {y}?", f"real private investment change {y}",
          {(M, "chart_inv"): 2}, pct(v, sign=True))
    ibm = f["firm:IBM"]
    q("chart", "How much gross investment did IBM make in 1954?", ["Let's look at the corporate investment deck."],
      "how much did IBM invest in the last year?", "IBM gross investment 1954",
      {(D, "firm:IBM"): 2}, f"1954: {num(ibm['i1954'])}")
    ch = f["firm:Chrysler"]
    q("chart", "In which year did Chrysler's gross investment peak?", ["Let's look at the corporate investment deck."],
      "when did Chrysler's investment peak?", "Chrysler peak investment year",
      {(D, "firm:Chrysler"): 2}, f"{ch['peak_year']}: {num(ch['peak'])}")
    tot = f["grunfeld_total"]
    q("chart", "Which firm had the largest total gross investment from 1935 to 1954?",
      ["Let's look at the corporate investment deck."], "which company invested the most in total?",
      "largest total gross investment firm 1935-1954", {(D, "overview"): 2}, num(tot.iloc[-1], 0))
    s = f["sun"]
    q("chart", "What was the sunspot number at the 1957 solar maximum?", ["I'm interested in the sunspot record."],
      "what was the number at the 1957 maximum?", "sunspot number 1957 maximum",
      {(E, "sun_chart"): 2}, f"1957: {num(s[1957])}")
    ann = f["co2_ann"]
    q("chart", "What was the annual mean CO2 concentration at Mauna Loa in 1980?",
      ["I'm looking at the Mauna Loa carbon dioxide measurements."], "what was the annual mean in 1980?",
      "Mauna Loa CO2 annual mean 1980 ppm", {(E, "co2_chart"): 2, (E, "co2_table"): 1}, f"1980: {num(ann[1980])} ppm")
    reg = f["crime_regions"]
    q("chart", "What is the average violent crime rate of states in the South census region?",
      ["I have questions about US state crime statistics."], "and what is the average for the South?",
      "South census region average violent crime rate", {(C, "regions"): 2}, num(reg["South"]))
    ey, ev = f["elnino_top"]
    q("chart", "Which year had the warmest annual mean El Nino sea surface temperature?",
      ["Tell me about the El Nino sea surface temperature data."], "which year was warmest on average?",
      "warmest year El Nino annual mean sea surface temperature", {(E, "elnino_chart"): 2}, f"{ey}: {ev:.2f} C")

    # --- table-only: the answer is a table cell
    for y, col, what, wk in ((1975, "unemp", "the average US unemployment rate", "US unemployment rate 1975"),
                             (1980, "infl", "the US CPI inflation rate", "US CPI inflation 1980")):
        chart = "chart_unemp" if col == "unemp" else "chart_rates"
        q("table", f"What was {what} in {y}?", macro_h,
          f"and what was the {'unemployment' if col == 'unemp' else 'inflation'} rate in {y}?", wk,
          {(M, "table1"): 2, (M, chart): 1}, num(a.loc[y, col]))
    q("table", "What was the US population at the end of 1990?", macro_h, "how many people lived in the US in 1990?",
      "US population 1990 millions", {(M, "table2"): 2}, num(a.loc[1990, "pop"]))
    q("table", "How large was the M1 money stock at the end of 2000?", macro_h, "and the money stock in 2000?",
      "M1 money stock 2000", {(M, "table2"): 2}, num(a.loc[2000, "m1"]))
    lg = {int(r.YEAR): r for r in f["_longley"].itertuples()}
    q("table", "What was total employment in the Longley data for 1955?", macro_h,
      "what does the Longley appendix say about employment in 1955?", "Longley total employment 1955",
      {(M, "longley"): 2}, num(lg[1955].TOTEMP, 0))
    cr = f["crime"]
    q("table", "What is the murder rate in Louisiana?", ["I have questions about US state crime statistics."],
      "what's the murder rate in Louisiana?", "Louisiana murder rate", {(C, f["state_page:Louisiana"]): 2},
      num(cr.loc["Louisiana", "murder"]))
    q("table", "What percentage of Texas residents are high school graduates?",
      ["I have questions about US state crime statistics."], "and the graduation rate in Texas?",
      "Texas high school graduates percent", {(C, f["state_page:Texas"]): 2}, num(cr.loc["Texas", "hs_grad"]))
    e = f["elnino"]
    q("table", "What was the El Nino sea surface temperature in December 1997?",
      ["Tell me about the El Nino sea surface temperature data."], "what was it in December 1997?",
      "El Nino sea surface temperature December 1997", {(E, "elnino2"): 2, (E, "elnino_chart"): 1},
      f"{e.loc[1997, 'DEC']:.2f}")
    se = f["co2_seas"][1990]
    q("table", "What was the seasonal amplitude of CO2 at Mauna Loa in 1990?",
      ["I'm looking at the Mauna Loa carbon dioxide measurements."], "how big was the seasonal swing in 1990?",
      "CO2 seasonal amplitude 1990 Mauna Loa", {(E, "co2_table"): 2}, num(se[2]))

    # --- paraphrased: different words from the page
    g09 = f["macro_g09"]
    q("paraphrase", "How badly did the American economy shrink during the Great Recession of 2009?", macro_h,
      "how bad was the downturn in 2009?", "2009 recession US output decline",
      {(M, "decade2000"): 2, (M, "title"): 2}, pct(abs(g09)))
    v, lab = f["unemp_peaks"][(1973, 1978)]
    q("paraphrase", "When were American jobless numbers at their worst in the mid-seventies?", macro_h,
      "when was joblessness worst in the seventies?", "US jobless peak mid 1970s",
      {(M, "chart_unemp"): 2, (M, "table1"): 1}, f"{pct(v)} ({lab})")
    q("paraphrase", "How much water does the Nile carry past Aswan in a typical year?",
      ["Tell me about the Nile river flow record."], "how much does it carry in a typical year?",
      "Nile average annual flow volume", {(E, "nile_text"): 2, (E, "nile_chart"): 1}, num(f["nile_mean"], 0))
    q("paraphrase", "Which company expanded its spending on plant and equipment the most between the late 1930s and early 1950s?",
      ["Let's look at the corporate investment deck."], "which company expanded its capital spending the most?",
      "fastest growth gross investment firm 1935-1939 1950-1954", {(D, "takeaways"): 2}, f["fastest"])
    q("paraphrase", "Is there a relationship between how poor a state is and its level of violence?",
      ["I have questions about US state crime statistics."], "is being poorer linked to more violence there?",
      "poverty violent crime correlation states", {(C, "scatter"): 2, (C, "intro"): 1}, f"r = {f['crime_r']:.2f}")
    top = max(f["sun_peaks"], key=lambda y: s[y])
    q("paraphrase", "When was the Sun most active in the last three centuries?", ["I'm interested in the sunspot record."],
      "when was it most active?", "maximum solar activity year sunspot number",
      {(E, "sun_chart"): 2}, f"{top}: {num(s[top])}")
    q("paraphrase", "How fast were consumer prices rising in the US in 1979?", macro_h,
      "how fast were prices going up in 1979?", "US CPI inflation 1979",
      {(M, "table1"): 2, (M, "chart_rates"): 1}, num(a.loc[1979, "infl"]))

    # --- no relevant page (one grade-0 judgement on a topically close page)
    q("none", "What was the yen to US dollar exchange rate in 1985?", macro_h, "and the yen exchange rate in 1985?",
      "yen dollar exchange rate 1985", {(M, "table2"): 0}, None)
    q("none", "What was the Arctic sea ice extent in September 2007?",
      ["I'm looking at the Mauna Loa carbon dioxide measurements."], "what about Arctic sea ice in September 2007?",
      "Arctic sea ice extent September 2007", {(E, "co2_chart"): 0}, None)
    q("none", "How much did Ford Motor Company invest in 1940?", ["Let's look at the corporate investment deck."],
      "how much did Ford invest in 1940?", "Ford Motor Company investment 1940", {(D, "overview"): 0}, None)
    q("none", "What is the violent crime rate in Toronto, Canada?", ["I have questions about US state crime statistics."],
      "what about Toronto?", "Toronto Canada violent crime rate", {(C, "table2"): 0}, None)

    for i, x in enumerate(qs, 1):
        x["_id"] = f"q{i:02d}"
        x["rel"] = {f"{docs[d].name}#{docs[d].keys[k]}": g for (d, k), g in x["rel"].items()}
    return qs


# --------------------------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------------------------


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".part")
    tmp.write_text(text, encoding="utf-8", newline="\n")
    tmp.replace(path)


def jsonl(rows: list[dict]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


def generate(out: Path = DEFAULT_OUT, *, pdfs: bool = True) -> dict:
    """Write the sample corpus under ``out``; returns the manifest. With ``pdfs=False`` the PDFs
    are written to a scratch folder inside ``out`` and removed (page numbers still computed)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    pdf_dir = out / "pdfs" if pdfs else out / ".pdfs-scratch"
    pdf_dir.mkdir(parents=True, exist_ok=True)
    data = load_data()
    facts: dict = {"_longley": data["longley"]}
    saved_fonts = list(font_manager.fontManager.ttflist)
    try:
        with matplotlib.rc_context(RC):
            _pin_fonts()
            docs = {
                "macro": make_macro(pdf_dir, data, facts),
                "deck": make_deck(pdf_dir, data, facts),
                "env": make_env(pdf_dir, data, facts),
                "crime": make_crime(pdf_dir, data, facts),
            }
    finally:  # leave the caller's font list as it was
        font_manager.fontManager.ttflist = saved_fonts
        _clear_font_cache()
    qs = build_queries(docs, facts)
    if not pdfs:
        for d in docs.values():
            d.path.unlink()
        pdf_dir.rmdir()

    _write(out / "queries.jsonl", jsonl([{"_id": x["_id"], "text": x["text"], "type": x["type"]} for x in qs]))
    _write(out / "rewrites-conversational.jsonl",
           jsonl([{"_id": x["_id"], "text": x["conv"], "history": x["history"]} for x in qs]))
    _write(out / "rewrites-keywords.jsonl", jsonl([{"_id": x["_id"], "text": x["kw"]} for x in qs]))
    lines = ["query-id\tcorpus-id\tscore"]
    for x in qs:
        lines += [f"{x['_id']}\t{pid}\t{g}" for pid, g in x["rel"].items()]
    _write(out / "qrels.tsv", "\n".join(lines) + "\n")
    manifest = {
        "generator": "assets/make_sample.py",
        "data": "statsmodels.datasets: macrodata, longley, grunfeld, nile, sunspots, co2, elnino, statecrime",
        "documents": [{"file": d.name, "title": d.title, "pages": len(d.pages), "page_titles": d.pages}
                      for d in docs.values()],
        "total_pages": sum(len(d.pages) for d in docs.values()),
        "none_queries": "one grade-0 qrels line each (evaluated; count as 0 unless excluded)",
        "queries": [{"_id": x["_id"], "type": x["type"], "answer": x["answer"]} for x in qs],
    }
    _write(out / "manifest.json", json.dumps(manifest, ensure_ascii=False, indent=1) + "\n")
    return manifest


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder (default: assets/sample_corpus)")
    ap.add_argument("--no-pdfs", action="store_true", help="write only queries, qrels, rewrites and manifest")
    args = ap.parse_args()
    t = time.perf_counter()
    man = generate(args.out, pdfs=not args.no_pdfs)
    types: dict[str, int] = {}
    for x in man["queries"]:
        types[x["type"]] = types.get(x["type"], 0) + 1
    print(f"{len(man['documents'])} PDFs, {man['total_pages']} pages, {len(man['queries'])} queries {types} "
          f"-> {args.out} ({time.perf_counter() - t:.1f}s)")


if __name__ == "__main__":
    main()
