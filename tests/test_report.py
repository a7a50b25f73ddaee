"""vdr report: the self-contained HTML report (each page image embedded once), its Markdown and LaTeX summaries,
and the Results API it reads through (vdr.Results.load)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import types

import pytest

from report_fixtures import EVIL, EVIL_HISTORY, ROOT, copy_results  # noqa: F401

import vdr
from vdr.cli import main
from vdr.errors import InputError

SECTIONS = ["summary", "metrics", "changes", "length", "cases", "holes"]


@pytest.fixture(scope="module")
def built(lexical_results, tmp_path_factory):
    out = tmp_path_factory.mktemp("report-out") / "report.html"
    paths = vdr.report(lexical_results, out)
    return paths, paths.html.read_text(encoding="utf-8"), paths.markdown.read_text(encoding="utf-8")


def _doc(results_dir):
    return json.loads((results_dir / "results.json").read_text(encoding="utf-8"))


def test_import_vdr_does_not_import_matplotlib():
    code = "import sys, vdr; assert 'matplotlib' not in sys.modules; vdr.report; assert 'matplotlib' not in sys.modules; print('ok')"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                       env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"


def test_verbs_are_plain_functions_also_after_importing_the_subpackages():
    code = ("import vdr.report.render, vdr.judge.run, vdr.report.plots, types, vdr; from vdr.report import report; "
            "from vdr.judge import judge; from vdr.results import Results; "
            "assert isinstance(vdr.report, types.FunctionType) and vdr.report is report; "
            "assert isinstance(vdr.judge, types.FunctionType) and vdr.judge is judge; "
            "assert vdr.Results is Results; assert type(__import__('sys').modules['vdr.report']) is types.ModuleType; print('ok')")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                       env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"


def test_report_paths(built, lexical_results):
    paths, html, md = built
    assert isinstance(vdr.report, types.FunctionType) and vdr.report.__module__ == "vdr.report.render"
    assert paths.html.name == "report.html" and paths.markdown == paths.html.with_suffix(".md")
    assert paths.missing_images == 0 and paths.warnings == []
    # default output: inside the results folder; no temporary files left behind
    d = vdr.report(lexical_results)
    assert d.html == lexical_results / "report.html" and d.markdown == lexical_results / "report.md"
    assert not [p for p in lexical_results.iterdir() if p.name.endswith(".tmp")]


def test_html_has_every_section_and_only_data_images(built):
    _, html, _ = built
    assert html.startswith("<!DOCTYPE html>")
    for s in SECTIONS:
        assert f'id="{s}"' in html, s
    srcs = re.findall(r'<img [^>]*src="([^"]*)"', html)
    # 1 bar chart for the single backend, distribution, scatter, hole bars; page thumbnails are CSS classes
    assert len(srcs) == html.count("<img ") == 4 and all(s.startswith("data:image/png;base64,") for s in srcs)
    assert len(re.findall(r"data:[^;]+;base64", html)) == 4 + html.count("data:image/jpeg;base64,")
    assert "http://" not in html and "https://" not in html
    assert "<script" not in html.lower() and "<link" not in html.lower()
    assert "default-src 'none'" in html


def test_user_text_is_escaped(built):
    _, html, md = built
    assert EVIL not in html and "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in html
    assert "&lt;b&gt;bold&lt;/b&gt; &amp; co" in html  # the history turn
    assert "<script" not in md and "&lt;script>" in md
    from vdr.results import md_escape

    assert md_escape("relevant = grade >= 1 & <b>") == "relevant = grade >= 1 &amp; &lt;b>"
    assert md_escape("> quoted | a\\b") == "&gt; quoted \\| a\\\\b" and md_escape("  >x") == "  &gt;x"


def test_each_page_image_is_embedded_once(built):
    _, html, _ = built
    style = html.split("<style>", 1)[1].split("</style>", 1)[0]
    rules = dict(re.findall(r"\.(pg\d+)\{background-image:url\((data:image/jpeg;base64,[A-Za-z0-9+/=]+)\);height:\d+px\}", style))
    body = html.split("</head>", 1)[1]
    used = re.findall(r'<div class="pg (pg\d+)" role="img" aria-label="([^"]+)">', body)
    assert len(used) >= 20 and "data:image/jpeg" not in body  # thumbnails only in the stylesheet
    assert {c for c, _ in used} == set(rules)  # every class used, every used class defined
    assert len(set(rules.values())) == len(rules) == html.count("data:image/jpeg;base64,")  # each image once
    by_page: dict = {}
    for c, page in used:
        by_page.setdefault(page, set()).add(c)
    assert all(len(cs) == 1 for cs in by_page.values()) and len(by_page) == len(rules)  # one class per page
    assert len(used) > len(rules)  # pages shown several times, embedded once


def test_no_none_in_report(built, lexical_results):
    _, html, md = built
    text = re.sub(r"data:[^)\"]+", "", html)
    assert "None" not in text and "None" not in md  # the model is None here: shown as a dash
    assert "<th>model</th><td>—</td>" in html


def test_report_size_of_the_sample(built):
    paths, html, _ = built
    assert len(html.encode("utf-8")) <= 600_000, len(html.encode("utf-8"))


def test_largest_regression_is_the_script_rewrite(lexical_results):
    res = vdr.Results.load(lexical_results)
    reg, gain = res.largest_changes("lexical", top=5)
    assert len(reg) == 5 and len(gain) == 5
    assert all(c.delta < 0 for c in reg) and all(c.delta > 0 for c in gain)
    assert [c.delta for c in reg] == sorted(c.delta for c in reg)
    q01 = [c for c in reg if c.query_id == "q01" and c.variant == "evil"]
    assert q01 and q01[0].original == 1.0 and q01[0].rewritten == 0.0 and q01[0].delta == -1.0
    pq = res.per_query("lexical", "evil")
    assert pq["q01"]["ndcg@3"] == 0.0
    assert res.variants["evil"]["q01"].text == EVIL
    assert res.variants["evil"]["q01"].history == (EVIL_HISTORY,)
    assert res.variants["conversational"]["q01"].history  # conversational rewrites carry history


def test_largest_changes_of_one_variant(lexical_results):
    """``largest_changes(backend, variant)`` (issue 26.9: a raw TypeError before): one variant's
    changes, the same cases as the all-variant call filtered to it; bad names and ``top`` refused."""
    res = vdr.Results.load(lexical_results)
    reg_all, gain_all = res.largest_changes("lexical", top=1000)
    reg, gain = res.largest_changes("lexical", "evil", top=1000)
    assert reg == [c for c in reg_all if c.variant == "evil"] and gain == [c for c in gain_all if c.variant == "evil"]
    assert any(c.query_id == "q01" and c.delta == -1.0 for c in reg)
    assert res.largest_changes("lexical", 3) == res.largest_changes("lexical", top=3)  # the old positional top
    with pytest.raises(KeyError, match="no rewrite variant 'nope'.*evil"):
        res.largest_changes("lexical", "nope")
    with pytest.raises(KeyError, match="no backend 'bm99'"):
        res.largest_changes("bm99", "evil")
    with pytest.raises(vdr.InputError, match="top must be a positive integer"):
        res.largest_changes("lexical", "evil", top=0)


def test_markdown_table_matches_results_json(built, lexical_results):
    _, _, md = built
    doc = _doc(lexical_results)
    tm = doc["config"]["table_metrics"]
    lines = md.split("## Summary", 1)[1].split("\n\n", 2)[1].splitlines()  # the table: up to the first blank line
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    assert head[:2] == ["backend", "variant"] and head[2:2 + len(tm)] == tm
    rows = [[c.strip() for c in ln.strip().strip("|").split("|")] for ln in lines[2:] if ln.startswith("|")]
    assert len(rows) == len(doc["runs"]) == 3
    comps = {(c["backend"], c["variant"], c["metric"]): c for c in doc["comparisons"]}
    for row, run in zip(rows, doc["runs"]):
        assert row[:2] == [run["backend"], run["variant"]]
        for i, m in enumerate(tm):
            assert float(row[2 + i]) == pytest.approx(run["aggregate"][m], abs=5e-5)
            assert row[2 + i] == f"{run['aggregate'][m]:.4f}"
        assert int(row[2 + len(tm)]) == run["num_queries"] == 42
        c = comps.get((run["backend"], run["variant"], tm[0]))
        if c is None:
            assert row[3 + len(tm):] == ["—"] * 6
        else:
            assert row[3 + len(tm)] == f"{c['delta']:+.4f}"
            assert row[-1] == f"{c['wins']}/{c['ties']}/{c['losses']}"
    # the real numbers of the sample: lexical originals (see README / make demo)
    assert rows[0][2] == "0.6977" and rows[0][6] == "0.6587"
    assert rows[1][2] == "0.5782"  # conversational rewrites lose on BM25


def test_markdown_bootstrap_intervals_contain_means(built, lexical_results):
    _, _, md = built
    doc = _doc(lexical_results)
    sec = md.split("## Metrics per backend", 1)[1].split("\n## ", 1)[0]
    rows = [ln for ln in sec.splitlines() if ln.startswith("| lexical")]
    assert len(rows) == 3
    for ln, run in zip(rows, doc["runs"]):
        cells = [c.strip() for c in ln.strip("|").split("|")][2:]
        for cell, m in zip(cells, ["ndcg@3", "mrr@3", "recall@10"]):
            mean, lo, hi = map(float, re.match(r"([\d.]+) \[([\d.]+), ([\d.]+)\]", cell).groups())
            assert mean == pytest.approx(run["aggregate"][m], abs=5e-5)
            assert lo < mean < hi and hi - lo < 0.5


def test_hole_section(built, lexical_results):
    _, html, md = built
    doc = _doc(lexical_results)
    assert "penalised by construction" in html and "penalised by construction" in md
    sec = md.split("## hole@3 rate per variant", 1)[1]
    row = next(ln for ln in sec.splitlines() if ln.startswith("| lexical"))
    vals = [c.strip() for c in row.strip("|").split("|")][1:]
    assert vals == [f"{r['aggregate']['hole@3']:.4f}" for r in doc["runs"]]


def test_results_api(lexical_results):
    res = vdr.Results.load(lexical_results)
    assert res.backends == ["lexical"] and list(res.variants) == ["original", "conversational", "evil"]
    assert res.primary == "ndcg@3" and len(res.query_ids) == 42 and res.warnings == []
    assert res.skipped == {}  # only lexical was asked for
    rows = res.rows()
    assert rows[0]["ndcg@3"] == pytest.approx(0.6976705929194106) and rows[0]["delta"] is None
    assert rows[1]["delta"] == pytest.approx(rows[1]["ndcg@3"] - rows[0]["ndcg@3"])
    # ranked pages come from the TREC file, best first
    first = (lexical_results / "runs" / "lexical.original.trec").read_text().splitlines()[:3]
    top = res.ranked("lexical", "original", "q01", k=3)
    assert [p for p, _ in top] == [ln.split()[2] for ln in first]
    assert top[0][1] == pytest.approx(float(first[0].split()[4]))
    assert res.relevant("q01") == {"us-macro-report.pdf#3": 2, "us-macro-report.pdf#7": 1}
    assert res.grade("q01", "us-macro-report.pdf#1") is None
    d = res.deltas("lexical", "evil")
    assert d["q01"] == -1.0 and len(d) == 42
    im = res.page_image(top[0][0])
    assert im is not None and im.mode == "RGB" and im.size[0] > 100
    assert "| lexical | original | 0.6977" in res.to_markdown()
    assert res.table().splitlines()[1].split()[:3] == ["lexical", "original", "0.6977"]
    with pytest.raises(KeyError):
        res.ranked("semantic", "original", "q01")


def test_missing_images_give_placeholders(lexical_results, sample_corpus, tmp_path):
    # the corpus without its images/ folder
    moved = tmp_path / "corpus-noimages"
    moved.mkdir()
    shutil.copy(sample_corpus / "pages.jsonl", moved / "pages.jsonl")
    r = copy_results(lexical_results, tmp_path / "results", corpus_dir=moved)
    paths = vdr.report(r)
    html = paths.html.read_text(encoding="utf-8")
    n_missing = html.count('class="missing"')
    assert paths.missing_images > 0 and n_missing >= paths.missing_images
    assert "data:image/jpeg" not in html and html.count("data:image/png") == 4
    assert any(f"{paths.missing_images} page image(s) missing" in w for w in paths.warnings)
    assert "image missing" in html and 'id="warnings"' in html
    assert "page image(s) missing" in paths.markdown.read_text(encoding="utf-8")


def test_corpus_gone_and_qrels_gone(lexical_results, tmp_path):
    r = copy_results(lexical_results, tmp_path / "results", corpus_dir=tmp_path / "nowhere")
    doc = json.loads((r / "results.json").read_text())
    doc["config"]["qrels"] = str(tmp_path / "gone.tsv")
    doc["config"]["inputs_relative_to_results"]["qrels"] = "../gone.tsv"
    doc["skipped"] = {"multimodal": "no --model given <test>"}
    (r / "results.json").write_text(json.dumps(doc))
    (r / "per_query.csv").unlink()  # not needed: the texts are in results.json
    paths = vdr.report(r)
    html = paths.html.read_text(encoding="utf-8")
    assert any("corpus folder not found" in w for w in paths.warnings)
    assert any("qrels file not found" in w for w in paths.warnings)
    assert not any("per_query.csv" in w for w in paths.warnings) and len(paths.warnings) == 3  # + the missing images
    assert "qrels file could not be read" in html and "image missing" in html
    assert "multimodal: skipped: no --model given &lt;test&gt;" in html
    # texts still there (from results.json)
    assert "How much did US real GDP grow" in html


def test_missing_run_file_is_reported_in_place(lexical_results, tmp_path):
    r = copy_results(lexical_results, tmp_path / "results")
    (r / "runs" / "lexical.evil.trec").unlink()
    html = vdr.report(r).html.read_text(encoding="utf-8")
    assert "run not available" in html and "run file is missing" in html


def test_not_a_results_dir(tmp_path):
    with pytest.raises(InputError, match="results.json is missing"):
        vdr.report(tmp_path)
    (tmp_path / "results.json").write_text("{")
    with pytest.raises(InputError, match="invalid JSON"):
        vdr.Results.load(tmp_path)


def test_cli(lexical_results, tmp_path, capsys):
    out = tmp_path / "sub" / "r.html"
    assert main(["report", str(lexical_results), "--out", str(out), "--top", "2"]) == 0
    text = capsys.readouterr().out
    assert f"wrote {out}" in text and f"wrote {tmp_path / 'sub' / 'r.md'}" in text
    assert out.is_file() and (tmp_path / "sub" / "r.md").is_file()
    assert main(["report", str(tmp_path / "nothing")]) == 2
    err = capsys.readouterr().err
    assert err == f"error: {tmp_path / 'nothing'}: does not exist (run `vdr evaluate --out ...` first)\n"
    (tmp_path / "empty").mkdir()
    (tmp_path / "a.json").write_text("{}")
    assert main(["report", str(tmp_path / "empty")]) == 2 and "empty: not a results folder: results.json is missing" in capsys.readouterr().err
    assert main(["report", str(tmp_path / "a.json")]) == 2 and "a.json: a file, not a results folder" in capsys.readouterr().err
    doc = lexical_results / "results.json"  # what `vdr evaluate` prints last: its folder is meant
    assert main(["report", str(doc)]) == 2
    assert capsys.readouterr().err == f"error: {doc}: a file: give the results folder that holds it, {lexical_results}\n"
    assert main(["report", str(lexical_results / "per_query.csv")]) == 2
    assert f"a file: give the results folder that holds it, {lexical_results}" in capsys.readouterr().err


def test_cli_latex_and_primary_metric(lexical_results, tmp_path, capsys):
    tex = tmp_path / "summary.tex"
    args = ["report", str(lexical_results), "--out", str(tmp_path / "r.html"), "--latex", str(tex), "--primary-metric", "mrr@3"]
    assert main(args) == 0
    assert f"wrote {tex}" in capsys.readouterr().out
    doc = _doc(lexical_results)
    c = next(c for c in doc["comparisons"] if c["variant"] == "conversational" and c["metric"] == "mrr@3")
    agg = doc["runs"][1]["aggregate"]
    row = next(ln for ln in tex.read_text().splitlines() if ln.startswith("lexical & conversational &"))
    # the primary metric's column comes first, then the other table metrics; its change and W/T/L
    assert row.startswith(f"lexical & conversational & {agg['mrr@3']:.4f} & {agg['ndcg@3']:.4f} & ")
    assert f" & {c['delta']:+.4f} & " in row and row.endswith(f" & {c['wins']}/{c['ties']}/{c['losses']} \\\\")
    html = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert "<th>d mrr@3</th>" in html and "Change in mrr@3 per query" in html
    assert main(["report", str(lexical_results), "--out", str(tmp_path / "x.html"), "--primary-metric", "ndcg@7"]) == 2
    err = capsys.readouterr().err
    assert "metric 'ndcg@7' was not evaluated" in err and not (tmp_path / "x.html").exists()


# ------------------------------------------------------------------------------------------ issue 27: a report you can read


def test_first_screen_verdicts_summary_and_toc(built, lexical_results):
    paths, html, md = built
    res = vdr.Results.load(lexical_results)
    verdicts = res.verdicts()
    assert len(verdicts) == 2 and verdicts[0].startswith("conversational: ") and " nDCG@3 on lexical [95% CI " in verdicts[0]
    body = html.split("</style>", 1)[1]
    # the first screen: verdicts, then the summary table; the details below; the inputs last
    order = [body.index(f'id="{s}"') for s in ("verdicts", "summary", "metrics", "changes", "length", "cases", "holes", "about")]
    assert order == sorted(order)
    first = body.split('<section class="first">', 1)[1].split("</section>", 1)[0]
    for v in verdicts:
        assert esc_html(v) in first
    assert '<table class="summary">' in first
    toc = re.findall(r'<a href="#([a-z]+)">', body.split('<nav class="toc">', 1)[1].split("</nav>", 1)[0])
    assert toc == ["verdicts", "summary", "metrics", "changes", "length", "cases", "holes", "about"]
    assert all(f'id="{t}"' in body for t in toc)
    # report.md opens on the verdicts too
    head = md.split("## Summary", 1)[0]
    assert "## Verdicts" in head and all(f"- {v}" in head for v in verdicts)


def esc_html(text: str) -> str:
    import html as h

    return h.escape(text, quote=True)


def test_alpha_marks_significant_changes(lexical_results, tmp_path):
    """--alpha decides the verdicts and the marks: every change whose Holm p is <= alpha is marked
    (symbol and class) in the HTML, the Markdown and, as an arrow superscript, the LaTeX table."""
    doc = _doc(lexical_results)
    comps = [c for c in doc["comparisons"] if c["metric"] == "ndcg@3"]
    alpha = max(c["p_value_holm"] for c in comps) + 1e-9  # every change of ndcg@3 significant
    paths = vdr.report(lexical_results, tmp_path / "r.html", alpha=alpha, latex=tmp_path / "t.tex")
    html, md, tex = paths.html.read_text(encoding="utf-8"), paths.markdown.read_text(encoding="utf-8"), (tmp_path / "t.tex").read_text()
    for c in comps:
        kind, sym = ("gain", "\u25b2") if c["delta"] > 0 else ("loss", "\u25bc")
        assert f'<td class="{kind}">{c["delta"]:+.4f} {sym}</td>' in html
        assert f"significant {kind} after Holm" in html and f"| {c['delta']:+.4f} {sym} |" in md
        arrow = r"\textsuperscript{$\uparrow$}" if kind == "gain" else r"\textsuperscript{$\downarrow$}"
        run = next(r for r in doc["runs"] if r["variant"] == c["variant"])
        assert f"& {run['aggregate']['ndcg@3']:.4f}{arrow} &" in tex and f"& {c['delta']:+.4f}{arrow} &" in tex
    assert r"$\uparrow$/$\downarrow$: significantly higher/lower than the original queries" in tex
    # the default alpha (0.05): the sample's changes are not significant after Holm, nothing is marked
    plain = vdr.report(lexical_results, tmp_path / "p.html").html.read_text(encoding="utf-8")
    assert all(c["p_value_holm"] > 0.05 for c in comps) and 'class="gain"' not in plain and 'class="loss"' not in plain
    assert "not significant after Holm" in plain
    with pytest.raises(InputError, match="--alpha"):
        vdr.report(lexical_results, tmp_path / "x.html", alpha=1.5)


def test_pages_open_full_size(built, sample_corpus):
    """Every thumbnail is a link to the page's image file, copied beside the report (a click opens
    the page full size); the copy is the corpus' file, byte for byte."""
    paths, html, _ = built
    body = html.split("</style>", 1)[1]
    links = re.findall(r'<a class="full" href="report_pages/([^"]+)" target="_blank"[^>]*><div class="pg (pg\d+)" role="img" '
                       r'aria-label="([^"]+)"></div></a>', body)
    assert len(links) == body.count('<div class="pg ') > 20 and paths.pages == paths.html.parent / "report_pages"
    corpus = vdr.Corpus.load(sample_corpus)
    for name, _, page in links:
        assert (paths.pages / name).read_bytes() == corpus.image_path(page).read_bytes()
    assert sorted(p.name for p in paths.pages.iterdir()) == sorted({n for n, _, _ in links})


def test_report_groups_by_a_field_of_the_queries(lexical_results, tmp_path):
    """`vdr report --group-by type`: the sample's queries carry their type; the groups' changes in
    the first screen equal group_rows; n adds up to the query set."""
    res = vdr.Results.load(lexical_results)
    assert res.group_fields == []  # the evaluation did not group: the report reads the recorded queries file
    out = tmp_path / "g.html"
    assert main(["report", str(lexical_results), "--out", str(out), "--group-by", "type"]) == 0
    html = out.read_text(encoding="utf-8")
    first = html.split('<section class="first">', 1)[1].split("</section>", 1)[0]
    assert '<table class="groups">' in first and "<h3>by type</h3>" in first
    res.query_fields = {q["_id"]: {"type": q["type"]} for q in
                        (json.loads(x) for x in (ROOT / "assets" / "sample_corpus" / "queries.jsonl").read_text().splitlines())}
    rows = res.group_rows("type")
    # `none`: the sample's queries that no page answers (4 of 42, no qrels line of grade > 0): shown apart, not tested
    no_rel = [q for q in res.query_ids if not any(g >= 1 for g in res.qrels[q].values())] if res.qrels else []
    assert len(no_rel) == 4 and {res.query_fields[q]["type"] for q in no_rel} == {"none"}
    assert res.untested_groups("type") == {"none": 4}
    assert {r["group"] for r in rows} == {"extractive", "chart", "table", "paraphrase"}
    assert sum(r["n_queries"] for r in rows if r["variant"] == "conversational") == 42 - 4
    assert "Not compared: group none (4 queries): no query in it has a relevant page" in first
    for r in rows:
        assert f"<td>{r['group']}</td><td>{r['n_queries']}</td>" in first
        assert f"{r['delta']:+.3f}" in first
    md = out.with_suffix(".md").read_text(encoding="utf-8")
    assert "## By query group" in md and "| type | n | lexical: conversational | lexical: evil |" in md


def test_readme_shows_the_samples_verdicts_groups_and_pairs(sample_corpus, tmp_path):
    """The verdicts, group rows and every-pair tables of the bundled sample shown in the README and
    docs/evaluate.md (reading the results) are what vdr computes (its BM25 rows: the Holm families are
    per backend, so the lexical rows of `make demo` do not depend on the other backends)."""
    from vdr.experiment.evaluation import evaluate

    sample = ROOT / "assets" / "sample_corpus"
    text = "\n".join((ROOT / f).read_text(encoding="utf-8") for f in ("README.md", "docs/evaluate.md"))
    readme = text + "\n".join(" ".join(ln.split()) for ln in text.splitlines())  # column widths depend on the longest cell
    res = evaluate(sample_corpus, queries=sample / "queries.jsonl", qrels=sample / "qrels.tsv",
                   rewrites={"conversational": sample / "rewrites-conversational.jsonl", "keywords": sample / "rewrites-keywords.jsonl"},
                   out=tmp_path / "results", backends="lexical", group_by=["type"], progress=False)
    for v in res.verdicts():
        assert v in readme, v
    shown = [ln for ln in res.group_table("type").to_text().splitlines() if ln.split()[1:2] in (["extractive"], ["chart"], ["paraphrase"])]
    assert len(shown) == 6
    for line in shown:
        assert " ".join(line.split()) in readme, line
    runs = {n: tmp_path / "results" / "runs" / f"lexical.{v}.trec"
            for n, v in (("bm25", "original"), ("bm25-conversational", "conversational"), ("bm25-keywords", "keywords"))}
    cmp = vdr.compare(sample / "qrels.tsv", runs, pairs="all")
    for table in (cmp.pairs_table(), cmp.pairwise_table()):
        for line in table.to_text(verdicts=False).splitlines()[:-1]:
            assert " ".join(line.split()) in readme, line
    assert cmp.pairs_table().to_latex().count(r"0.7681$^{b}$\hphantom{$^{a}$}") == 1
