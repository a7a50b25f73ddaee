"""Issue 35, the first ten minutes: tables that fit the terminal (35.5), one Python function per
command (35.6), messages (35.8; more in test_metrics, test_convert, test_query_groups) and
progress that moves (35.4)."""

from __future__ import annotations

import os
import re
import sys

import pytest

import vdr
from cli_helpers import cli
from shared_data import REPO_ROOT
from vdr.cli.common import output
from vdr.errors import ArgumentTypeError, InputError
from vdr.results import Results, Table

SAMPLE = REPO_ROOT / "assets" / "sample_corpus"


@pytest.fixture(scope="module")
def sample_corpus(tmp_path_factory):
    """The bundled sample's PDFs ingested (the Makefile's demo, first step)."""
    from vdr.cli import main

    out = tmp_path_factory.mktemp("sample") / "corpus"
    assert main(["ingest", str(SAMPLE / "pdfs"), "--out", str(out), "-q"]) == 0
    return out


def _evaluate(capsys, corpus, out, *extra):
    """``vdr evaluate`` as the demo runs it: the sample's queries, qrels, two rewrite files, by type."""
    return cli(capsys, "evaluate", corpus, "--queries", SAMPLE / "queries.jsonl", "--qrels", SAMPLE / "qrels.tsv",
               "--rewrites", f"conversational={SAMPLE / 'rewrites-conversational.jsonl'}",
               "--rewrites", f"keywords={SAMPLE / 'rewrites-keywords.jsonl'}", "--group-by", "type", "--out", out, *extra)


def _cells(line: str) -> list[str]:
    return re.split(r" {2,}", line.strip())


# ------------------------------------------------------------------------------------------ 35.5


def test_evaluate_at_100_columns_prints_no_line_over_100(sample_corpus, tmp_path, capsys, monkeypatch):
    """The issue's "done when", on the text backends that run offline without a model download."""
    monkeypatch.setenv("COLUMNS", "100")
    rc, out, err = _evaluate(capsys, sample_corpus, tmp_path / "r", "--backend", "lexical")
    assert rc == 0, err
    assert [ln for ln in (out + err).splitlines() if len(ln) > 100] == []
    assert out.count("(split into 2 tables to fit 100 columns; --wide prints one table)") == 2  # summary and by type
    heads = [_cells(ln) for ln in out.splitlines() if ln.startswith("backend  ")]
    # the summary: the means first, then the change of the primary metric with its tests, each led by backend, variant
    assert heads[0] == ["backend", "variant", "ndcg@3", "mrr@3", "recall@5", "recall@10", "hole@3", "queries"]
    assert heads[1] == ["backend", "variant", "d ndcg@3", "p (perm)", "p (Holm)", "p (t)", "95% CI", "W/T/L"]
    # by type: the group's keys (backend, type, n, variant) repeated, the change and its tests kept together
    assert heads[2] == ["backend", "type", "n", "variant", "original ndcg@3", "variant ndcg@3"]
    assert heads[3] == ["backend", "type", "n", "variant", "d ndcg@3", "95% CI", "p (perm)", "p (Holm)", "W/T/L"]
    # the same rows, values unchanged by the split
    res = Results.load(tmp_path / "r")
    kw = next(r for r in res.rows() if r["variant"] == "keywords")
    assert f"lexical  keywords        {kw['ndcg@3']:.4f}  {kw['mrr@3']:.4f}" in out
    assert f"lexical  keywords        {kw['delta']:+.4f}   " in out
    # footnotes wrapped to the width, continuation lines indented
    assert "\n  test (10000 random sign assignments" in out or "\n  (10000 random sign assignments" in out
    # a Table prints as the CLI prints it (at the same COLUMNS; its last line names --wide where the CLI has it)
    for table in (res.summary_table(), res.group_table("type")):
        assert str(table) == repr(table) and str(table).split("\n(split into")[0] in out
    # --wide: one table, one line per row and note, however wide
    rc, wide, _ = _evaluate(capsys, sample_corpus, tmp_path / "w", "--backend", "lexical", "--wide")
    assert rc == 0 and "split into" not in wide
    assert _cells(wide.splitlines()[0]) == [*heads[0], *heads[1][2:]] and len(wide.splitlines()[0]) > 100


@pytest.mark.model
def test_evaluate_on_every_offline_backend_at_100_columns(sample_corpus, tmp_path, capsys, monkeypatch):
    """The issue's command as written (the default backends: lexical, semantic with MiniLM, hybrid;
    multimodal skipped without --model): no line over 100 characters, on stdout or stderr (stage
    lines and warnings wrapped; transformers' "Loading weights" bar off without -v)."""
    monkeypatch.setenv("COLUMNS", "100")
    rc, out, err = _evaluate(capsys, sample_corpus, tmp_path / "r")
    assert rc == 0, err
    assert [ln for ln in (out + err).splitlines() if len(ln) > 100] == []
    assert "Loading weights" not in err and "\r" not in err
    assert "semantic  keywords" in out and "hybrid    keywords" in out


def _table() -> Table:
    return Table(("backend", "variant", "ndcg@3", "d ndcg@3", "p (perm)"),
                 (("lexical", "original", "0.6977", None, None), ("lexical", "keywords", "0.7681", "+0.0704", "n/a")),
                 notes=("d = rewritten - original on the same backend and queries",), sections=(3,),
                 titles=("", "", "nDCG at 3 (linear gain)", "", ""))


def test_table_splits_at_the_width_repeating_the_key_columns():
    t = _table()
    assert t.to_text() == (
        "backend  variant   ndcg@3  d ndcg@3  p (perm)\n"
        "lexical  original  0.6977\n"
        "lexical  keywords  0.7681  +0.0704   n/a\n"
        "d = rewritten - original on the same backend and queries")
    # 37 columns: the key columns, then ndcg@3; the section from "d ndcg@3" on moves to a second table whole
    assert t.to_text(width=37) == (
        "backend  variant   ndcg@3\n"
        "lexical  original  0.6977\n"
        "lexical  keywords  0.7681\n"
        "\n"
        "backend  variant   d ndcg@3  p (perm)\n"
        "lexical  original\n"
        "lexical  keywords  +0.0704   n/a\n"
        "(split into 2 tables to fit 37\n"
        "  columns; a wider COLUMNS (or\n"
        "  Table.to_text(width=None)) prints\n"
        "  one table)\n"
        "d = rewritten - original on the same\n"
        "  backend and queries")
    assert max(len(ln) for ln in t.to_text(width=37).splitlines()) <= 37
    # narrower than the section: column by column
    assert [ln for ln in t.to_text(width=30, more="--wide").splitlines() if ln.startswith("backend")] == [
        "backend  variant   ndcg@3", "backend  variant   d ndcg@3", "backend  variant   p (perm)"]
    assert t.to_text(width=100) == t.to_text()  # it fits: unchanged


def test_table_prints_as_the_cli_and_converts_to_pandas(monkeypatch):
    t = _table()
    assert str(t) == repr(t) == t.to_text()  # no COLUMNS, not a terminal: whole lines
    monkeypatch.setenv("COLUMNS", "37")
    assert str(t) == repr(t) == t.to_text(width=37)
    df = t.to_pandas()
    assert list(df.columns) == ["backend", "variant", "ndcg@3", "d ndcg@3", "p (perm)"]
    assert df["backend"].tolist() == ["lexical", "lexical"] and df["ndcg@3"].tolist() == [0.6977, 0.7681]
    assert str(df["ndcg@3"].dtype) == "float64" and df["d ndcg@3"].isna().tolist() == [True, False]
    assert df["d ndcg@3"][1] == 0.0704 and df["p (perm)"].isna().all()  # n/a is missing
    assert df.loc[df["variant"] == "keywords", "ndcg@3"].item() == 0.7681  # it can be sliced


def test_html_headers_are_short_with_the_long_name_as_title():
    html = _table().to_html()
    assert '<th title="nDCG at 3 (linear gain)">ndcg@3</th>' in html and "<th>backend</th>" in html


# ------------------------------------------------------------------------------------------ 35.6


def test_every_command_has_its_function_in_dir_vdr():
    names = ["ingest", "evaluate", "compare", "report", "metrics", "convert", "serve", "rewrite", "judge", "mteb_task", "embed",
             "Results", "Table"]
    assert [n for n in names if n not in dir(vdr) or n not in vdr.__all__] == []
    from vdr.experiment.compare_runs import compare_runs
    from vdr.ingest.convert import convert
    from vdr.integrations.mteb import write_task_module
    from vdr.rewards.serve import serve
    from vdr.rewrite.runner import rewrite

    assert (vdr.serve, vdr.convert, vdr.rewrite, vdr.mteb_task, vdr.compare) == (serve, convert, rewrite, write_task_module, compare_runs)
    assert vdr.Results is Results and vdr.Table is Table


def test_import_vdr_and_dir_import_no_model_library():
    import subprocess

    code = ("import sys, vdr; names = dir(vdr); import vdr.rewrite.runner;"
            " heavy = sorted({'torch', 'transformers', 'matplotlib'} & set(sys.modules));"
            " assert not heavy, heavy; assert callable(vdr.rewrite) and 'serve' in names; print('ok')")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                       env={**os.environ, "PYTHONPATH": str(REPO_ROOT)}, cwd=REPO_ROOT)
    assert p.stdout.strip() == "ok", p.stderr[-2000:]


def test_convert_dispatches_by_benchmark_name(tmp_path):
    with pytest.raises(InputError, match="^unknown benchmark 'trec-cast' for convert; choose from topiocqa, qrecc, msmarco, beir$"):
        vdr.convert("trec-cast", tmp_path)


def test_a_path_given_as_the_corpus_names_the_argument_and_what_it_takes():
    from vdr.retrieve.base import create_backend
    from vdr.rewards.rewarder import build_backend

    with pytest.raises(ArgumentTypeError) as e:
        build_backend("lexical", "corpus")
    assert str(e.value) == ("build_backend(corpus=...) takes a loaded corpus (vdr.Corpus, vdr.PassageCorpus) or a {corpus_id: text}"
                            " dict, not str 'corpus'; a corpus folder is loaded with vdr.load_corpus('corpus')")
    assert isinstance(e.value, TypeError) and isinstance(e.value, InputError)  # the CLI prints it as one line
    with pytest.raises(ArgumentTypeError, match=r"^build_backend\(options=\.\.\.\) takes a dict"):
        build_backend("lexical", {"p1": "alpha beta"}, ["k1=0.9"])
    with pytest.raises(ArgumentTypeError, match=r"^Backend\.index\(corpus=\.\.\.\) takes a loaded corpus .* not list \['a', 'b'\]$"):
        create_backend("lexical").index(["a", "b"])
    run = build_backend("lexical", {"p1": "alpha beta", "p2": "gamma"}).search(vdr.QuerySet.from_texts({"q": "gamma"}), 1)
    assert list(run["q"]) == ["p2"]  # a {corpus_id: text} dict is taken


def test_the_verbs_name_an_argument_of_the_wrong_type(tmp_path):
    corpus = {"p1": "alpha"}
    with pytest.raises(ArgumentTypeError, match=r"^metrics\(qrels=\.\.\.\) takes a Qrels, a file path or a \{query_id: "
                                                r"\{doc_id: grade\}\} dict, not int 5$"):
        vdr.metrics(5, {"q1": {"p1": 1.0}})
    with pytest.raises(ArgumentTypeError, match=r"^metrics\(run=\.\.\.\) takes a Run, .* not list \['p1'\]$"):
        vdr.metrics({"q1": {"p1": 1}}, ["p1"])
    with pytest.raises(ArgumentTypeError, match=r"^report\(results_dir=\.\.\.\) takes a folder or file path \(str or pathlib.Path\)"):
        vdr.report(5)
    with pytest.raises(ArgumentTypeError, match=r"^ingest\(out=\.\.\.\) takes a folder or file path"):
        vdr.ingest(tmp_path, corpus)
    pages = tmp_path / "c"
    pages.mkdir()
    (pages / "pages.jsonl").write_text("", encoding="utf-8")

    class Loaded:  # a loaded corpus where its folder is expected: the message names the folder to give
        root = pages

    with pytest.raises(ArgumentTypeError) as e:
        vdr.evaluate(Loaded(), out=tmp_path / "r")
    assert str(e.value).endswith(f"; pass its folder, corpus_dir={str(pages)!r}")
    assert not (tmp_path / "r").exists()  # refused before any work


# ------------------------------------------------------------------------------------------ 35.4


def test_library_bars_are_off_unless_verbose(monkeypatch):
    for k in ("HF_HUB_DISABLE_PROGRESS_BARS", "HF_DATASETS_DISABLE_PROGRESS_BARS", "TQDM_DISABLE"):
        monkeypatch.delenv(k, raising=False)
    with output(quiet=False):  # the default: the libraries' bars off, vdr's own (tqdm, rich) kept
        assert os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] == "1" and os.environ["HF_DATASETS_DISABLE_PROGRESS_BARS"] == "1"
        assert "TQDM_DISABLE" not in os.environ
    with output(quiet=False, verbose=True):  # -v: every bar
        assert "HF_HUB_DISABLE_PROGRESS_BARS" not in os.environ and "TQDM_DISABLE" not in os.environ
    assert "HF_HUB_DISABLE_PROGRESS_BARS" not in os.environ  # restored


def test_verbose_flag_on_every_command(capsys):
    rc, out, _ = cli(capsys, "metrics", REPO_ROOT / "assets" / "sample" / "qrels.tsv", REPO_ROOT / "assets" / "sample" / "run.trec", "-v")
    assert rc == 0 and out.startswith("metric")
    rc, out, _ = cli(capsys, "report", "--help")
    assert rc == 0 and "-v, --verbose" in out


def test_a_log_gets_a_progress_line_with_done_total_and_rate(monkeypatch, capsys):
    from vdr import progress

    monkeypatch.setattr(progress, "LOG_EVERY_S", 0.0)
    monkeypatch.setattr(progress, "MIN_RATE_SECONDS", 1e-12)  # a rate however fast the loop
    with progress.progress_bar("encode pages (semantic)", 4, "page") as advance:  # stderr is not a terminal here
        advance(1)
        advance(0.5)
        advance(2.5)
    lines = capsys.readouterr().err.splitlines()
    assert [ln.split(",")[0] for ln in lines] == ["encode pages (semantic): 1/4 pages (25%)", "encode pages (semantic): 1/4 pages (38%)",
                                                  "encode pages (semantic): 4/4 pages (100%)"]
    assert all(re.search(r", \d+\.\d pages/s, \d+ s$", ln) for ln in lines), lines
    monkeypatch.setattr(progress, "LOG_EVERY_S", 3600.0)
    with progress.progress_bar("search", 4, "query") as advance:
        advance(4)
    assert capsys.readouterr().err == ""  # within the interval: nothing (the stage line follows)


def test_the_semantic_bar_moves_after_each_model_batch(tiny_st_dir, monkeypatch, capsys):
    """Issue 35.4: the bar advanced once per corpus batch (4,096 texts): now after every model batch."""
    from vdr import progress
    from vdr.retrieve.semantic import DenseBackend

    monkeypatch.setattr(progress, "LOG_EVERY_S", 0.0)
    b = DenseBackend(str(tiny_st_dir), device="cpu", batch_size=2, progress=True)
    b.index({f"p{i}": w for i, w in enumerate(["alpha beta", "gamma", "delta epsilon", "zeta", "", "eta theta"])})
    done = [ln.split(":")[1].split()[0] for ln in capsys.readouterr().err.splitlines() if ln.startswith("encode pages")]
    assert done[-1] == "6/6" and len(done) >= 4  # the empty page at once, then one line per batch of 2 texts


def test_log_bar_wraps_an_iterable_as_tqdm_does(monkeypatch, capsys):
    """ViDoRe ingest loops over a dataset through ``log_bar(iterable)``: in a log, lines instead of tqdm's redraws."""
    from vdr import progress

    monkeypatch.setattr(progress, "LOG_EVERY_S", 0.0)
    assert list(progress.log_bar(["a", "b", "c"], desc="rows", unit="row")) == ["a", "b", "c"]
    assert [ln.split(",")[0] for ln in capsys.readouterr().err.splitlines()] == [
        "rows: 1/3 rows (33%)", "rows: 2/3 rows (67%)", "rows: 3/3 rows (100%)"]
    assert list(progress.log_bar(iter("xy"), desc="rows", unit="row", disable=True)) == ["x", "y"]
    assert capsys.readouterr().err == ""
