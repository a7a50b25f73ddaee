"""The results folder of ``vdr evaluate --out`` (issue 14.1; vdr.io.outdir): locked against a
second run, checked before any work, another experiment refused unless --overwrite, stale files of
earlier runs removed, Ctrl-C leaves it unchanged (exit 130); plus ``--run NAME=FILE`` (14.2) and
``--primary-metric`` (14.3) on evaluate. Lexical backend and run files only (no model)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

import vdr
from cli_helpers import cli, lock_held_elsewhere, snapshot
from rewards_fixtures import make_passages, write_corpus
from vdr.cli import app
from vdr.io.outdir import LOCK_FILE, ResultsFolder

FAST = ["--backend", "lexical", "-q", "--no-cache", "--no-report"]  # the report: test_evaluate_writes_its_report


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    texts, queries, qrels = make_passages(n_per_topic=4)
    return write_corpus(tmp_path_factory.mktemp("corpus"), texts, queries, qrels)


@pytest.fixture(scope="module")
def ext_run(tmp_path_factory) -> Path:
    """A TREC run of 'another system': for every query, its grade-2 passage first, then a grade-0 one."""
    p = tmp_path_factory.mktemp("ext") / "other.trec"
    lines = [f"q{t} Q0 t{t}-p0 1 2.0 other\nq{t} Q0 t{(t + 1) % 8}-p3 2 1.0 other\n" for t in range(8)]
    p.write_text("".join(lines), encoding="utf-8")
    return p


def no_work(monkeypatch):
    """Make any evaluation work fail loudly: the checks must come first."""
    import vdr.experiment.evaluation as E

    def boom(*a, **k):
        raise AssertionError("work started before the results folder was checked")

    monkeypatch.setattr(E, "load_inputs", boom)


# ------------------------------------------------------------------------------------------------ lock


def test_second_run_into_a_locked_folder_fails_fast(corpus, tmp_path, capsys, monkeypatch):
    out = tmp_path / "res"
    out.mkdir()
    with lock_held_elsewhere(out / LOCK_FILE):  # as a running `vdr evaluate` holds it
        no_work(monkeypatch)
        rc, _, err = cli(capsys, "evaluate", corpus, *FAST, "--out", out)  # fails at once: no_work proves nothing ran
        assert rc == 2 and err.count("\n") == 1
        assert f"results folder {out} is in use by another vdr run (lock file {out / LOCK_FILE} is held)" in err
        assert sorted(p.name for p in out.iterdir()) == [LOCK_FILE]  # nothing written
    monkeypatch.undo()
    rc, _, err = cli(capsys, "evaluate", corpus, *FAST, "--out", out)  # the lock is free again
    assert rc == 0, err
    assert (out / "results.json").is_file()


def test_lock_in_process_and_released_on_error(corpus, tmp_path):
    out = tmp_path / "res"
    with ResultsFolder(out, identity={"command": "evaluate"}).open():
        with pytest.raises(vdr.InputError, match="in use by another vdr run"):
            vdr.evaluate(corpus, out=out, backends="lexical", progress=False, cache_dir=False)
    with pytest.raises(vdr.InputError):  # fails after taking the lock: the lock is released
        vdr.evaluate(corpus, out=out, backends="lexical", progress=False, cache_dir=False, rewrites={"bad": tmp_path / "no.jsonl"})
    ResultsFolder(out).open().close()  # free again
    assert not out.exists()  # a folder created for a failed run is removed again


# ------------------------------------------------------------------------------------------------ checks before any work


def test_out_is_a_file_fails_before_any_work(corpus, tmp_path, capsys, monkeypatch):
    no_work(monkeypatch)
    f = tmp_path / "results.txt"
    f.write_text("x")
    rc, _, err = cli(capsys, "evaluate", corpus, *FAST, "--out", f)
    assert rc == 2 and err == f"error: {f}: the results folder (--out) is a file, not a folder; choose a folder\n"
    rc, _, err = cli(capsys, "evaluate", corpus, *FAST, "--out", f / "sub")
    assert rc == 2 and err == f"error: {f / 'sub'}: cannot create the results folder (--out): {f} is a file\n"
    assert f.read_text() == "x"


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_unwritable_parent_fails_before_any_work(corpus, tmp_path, capsys, monkeypatch):
    no_work(monkeypatch)
    ro = tmp_path / "ro"
    ro.mkdir(mode=0o500)
    rc, _, err = cli(capsys, "evaluate", corpus, *FAST, "--out", ro / "res")
    assert rc == 2 and f"cannot create the results folder (--out): {ro} is not writable" in err


# ------------------------------------------------------------------------------------------------ the report


def test_evaluate_writes_its_report(corpus, tmp_path, capsys):
    """Issue 35.3: ``vdr evaluate`` writes report.html and report.md beside results.json and prints
    their paths; ``--no-report`` writes none (a report the folder held is rewritten, never stale:
    issue 34.2); ``vdr report`` renders it later; ``vdr.evaluate(report=True)`` is the same from
    Python (off by default)."""
    out = tmp_path / "res"
    quick = [x for x in FAST if x != "--no-report"]
    rc, stdout, err = cli(capsys, "evaluate", corpus, *quick, "--out", out)
    assert rc == 0, err
    assert {"report.html", "report.md", "results.json"} <= set(snapshot(out))
    assert f"report: {out / 'report.html'}\nsummary: {out / 'report.md'}" in stdout
    assert "<html" in (out / "report.html").read_text(encoding="utf-8") and (out / "report.md").read_text(encoding="utf-8").startswith("# ")
    (out / "report.md").write_text("old")
    rc, stdout, err = cli(capsys, "evaluate", corpus, *FAST, "--out", out)  # --no-report: the folder's report is rewritten
    assert rc == 0, err
    assert (out / "report.md").read_text(encoding="utf-8") != "old" and f"report: {out / 'report.html'}" in stdout
    fresh = tmp_path / "fresh"
    rc, stdout, err = cli(capsys, "evaluate", corpus, *FAST, "--out", fresh)
    assert rc == 0, err
    assert not {"report.html", "report.md"} & set(snapshot(fresh)) and "report:" not in stdout
    rc, stdout, err = cli(capsys, "report", out)
    assert rc == 0 and (out / "report.html").is_file() and f"wrote {out / 'report.md'}" in stdout, err
    py = tmp_path / "py"
    vdr.evaluate(corpus, out=py, backends="lexical", progress=False, cache_dir=False)
    assert not (py / "report.html").exists()
    vdr.evaluate(corpus, out=py, backends="lexical", progress=False, cache_dir=False, report=True)
    assert (py / "report.html").is_file() and (py / "report.md").is_file()


# ------------------------------------------------------------------------------------------------ stale files, overwrite


def test_rerun_removes_stale_files_of_earlier_runs(corpus, ext_run, tmp_path, capsys):
    out = tmp_path / "res"
    rc, _, err = cli(capsys, "evaluate", corpus, *FAST, "--run", f"other={ext_run}", "--out", out)
    assert rc == 0, err
    assert sorted(p.name for p in (out / "runs").iterdir()) == ["lexical.original.trec", "other.original.trec"]
    for name, text in {"report.html": "old", "report.md": "old", "judge/rcp.json": "{}", "judge/cache.jsonl": "{}\n"}.items():
        (out / name).parent.mkdir(exist_ok=True)
        (out / name).write_text(text)
    rc, _, err = cli(capsys, "evaluate", corpus, *FAST, "--out", out)  # same experiment, fewer backends: the folder's run is kept
    assert rc == 0 and "kept what the folder holds" in err and "run other" in err
    assert sorted(p.name for p in (out / "runs").iterdir()) == ["lexical.original.trec", "other.original.trec"]
    rc, _, err = cli(capsys, "evaluate", corpus, *FAST, "--out", out, "--overwrite")
    assert rc == 0, err
    files = sorted(snapshot(out))
    assert files == [LOCK_FILE, "judge/cache.jsonl", "per_query.csv", "report.html", "report.md", "results.json",
                     "runs/lexical.original.trec", "timing.json"]
    doc = json.loads((out / "results.json").read_text())
    assert [r["backend"] for r in doc["runs"]] == ["lexical"]
    assert (out / "judge/cache.jsonl").read_text() == "{}\n"  # the judge's answer cache is kept
    assert (out / "report.html").read_text() != "old" and "other" not in (out / "report.md").read_text()  # rewritten


def test_other_experiment_refused_unless_overwrite(corpus, tmp_path, capsys, monkeypatch):
    out = tmp_path / "res"
    assert cli(capsys, "evaluate", corpus, *FAST, "--out", out)[0] == 0
    qrels2 = tmp_path / "qrels2.tsv"
    qrels2.write_bytes((corpus / "qrels.tsv").read_bytes())
    before = snapshot(out)
    with monkeypatch.context() as m:
        no_work(m)
        rc, _, err = cli(capsys, "evaluate", corpus, *FAST, "--qrels", qrels2, "--out", out)
    assert rc == 2
    assert (f"{out}: the results folder holds the results of a different experiment (qrels: {(corpus / 'qrels.tsv').resolve()}"
            f" -> {qrels2.resolve()}); give --overwrite") in err
    assert snapshot(out) == before
    rc, _, err = cli(capsys, "evaluate", corpus, *FAST, "--qrels", qrels2, "--out", out, "--overwrite")
    assert rc == 0, err
    assert json.loads((out / "results.json").read_text())["config"]["qrels"] == str(qrels2.resolve())


def test_folder_with_other_files_refused_unless_overwrite(corpus, tmp_path, capsys):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("my notes")
    rc, _, err = cli(capsys, "evaluate", corpus, *FAST, "--out", out)
    assert rc == 2 and "holds files vdr did not write (notes.txt); give --overwrite to write the results beside them" in err
    assert (out / "notes.txt").read_text() == "my notes"
    (out / "data").mkdir()
    (out / "data" / "x.bin").write_bytes(b"keep me")
    for _ in range(2):  # --overwrite writes beside the user's files, never deletes them (a second run too)
        assert cli(capsys, "evaluate", corpus, *FAST, "--out", out, "--overwrite")[0] == 0
        assert (out / "notes.txt").read_text() == "my notes" and (out / "data" / "x.bin").read_bytes() == b"keep me"
        assert (out / "results.json").is_file()
    empty = tmp_path / "empty"
    empty.mkdir()
    assert cli(capsys, "evaluate", corpus, *FAST, "--out", empty)[0] == 0  # an empty folder is fine


# ------------------------------------------------------------------------------------------------ Ctrl-C


@pytest.mark.parametrize("where", ["statistics", "save"])
def test_interrupt_leaves_the_folder_unchanged_exit_130(corpus, ext_run, tmp_path, capsys, monkeypatch, where):
    import vdr.experiment.evaluation as E
    from vdr.results import Results

    out = tmp_path / "res"
    assert cli(capsys, "evaluate", corpus, *FAST, "--run", f"other={ext_run}", "--out", out)[0] == 0
    (out / "report.html").write_text("old report")
    before = snapshot(out)

    def interrupt(*a, **k):
        raise KeyboardInterrupt

    if where == "statistics":
        monkeypatch.setattr(E, "_statistics", interrupt)
    else:  # half of the new results already written (into the staging folder)
        real = Results.save

        def save_then_interrupt(self, d):
            real(self, d)
            raise KeyboardInterrupt

        monkeypatch.setattr(Results, "save", save_then_interrupt)
    res = CliRunner().invoke(app, ["evaluate", str(corpus), *FAST, "--run", f"other={ext_run}", "--out", str(out)])  # nothing dropped
    assert res.exit_code == 130
    assert res.stderr == f"interrupted; {out} unchanged\n"
    assert snapshot(out) == before
    # a folder that did not exist before does not exist after
    fresh = tmp_path / "fresh"
    res = CliRunner().invoke(app, ["evaluate", str(corpus), *FAST, "--out", str(fresh)])
    assert res.exit_code == 130 and not fresh.exists()
    # and main() (the console script) exits 130 with the same line
    rc, _, err = cli(capsys, "evaluate", corpus, *FAST, "--run", f"other={ext_run}", "--out", out)
    assert rc == 130 and err == f"interrupted; {out} unchanged\n"


# ------------------------------------------------------------------------------------------------ --run, --primary-metric


def test_external_run_and_primary_metric(corpus, ext_run, tmp_path, capsys):
    out = tmp_path / "res"
    kw = tmp_path / "kw.jsonl"
    kw.write_text("".join(json.dumps({"_id": q["_id"], "text": q["text"] + " facts"}) + "\n"
                          for q in map(json.loads, (corpus / "queries.jsonl").read_text().splitlines())))
    rc, stdout, err = cli(capsys, "evaluate", corpus, *FAST, "--run", f"other={ext_run}", "--k", "3,5", "--rewrites", f"kw={kw}",
                          "--primary-metric", "RR@10", "--out", out)
    assert rc == 0, err
    res = vdr.Results.load(out)
    assert res.config["primary_metric"] == "mrr@10" == res.primary and res.table_metrics[0] == "mrr@10"
    assert "mrr@10" in res.metric_names and "mrr@10" in res.compared_metrics
    head = stdout.splitlines()[0].split()
    assert head[:3] == ["backend", "variant", "mrr@10"] and "d" in head and "mrr@10" in head[head.index("d") + 1]
    # the external run: the grade-2 passage first for every query -> RR 1, nDCG@3 = 2 / IDCG(2, 1, 1)
    idcg = 2 + 1 / 1.584962500721156 + 1 / 2
    assert res.aggregate("other", "original")["mrr@10"] == 1.0
    assert res.aggregate("other", "original")["ndcg@3"] == pytest.approx(2 / idcg, abs=1e-12)
    assert res.config["backend_config"]["other"]["files"] == {"original": str(ext_run.resolve())}
    assert [r.variant for r in res.runs if r.backend == "other"] == ["original"]  # NAME=FILE: the originals' run only
    for bad, msg in (("lexical=" + str(ext_run), "is a backend's name"), ("original=" + str(ext_run), "must be letters")):
        rc, _, err = cli(capsys, "evaluate", corpus, *FAST, "--run", bad, "--out", tmp_path / "x")
        assert rc == 2 and msg in err
    rc, _, err = cli(capsys, "evaluate", corpus, *FAST, "--primary-metric", "ndgc@3", "--out", tmp_path / "x")
    assert rc == 2 and "did you mean 'ndcg@3'" in err


def test_external_runs_per_variant(corpus, ext_run, tmp_path, capsys):
    """Issue 25.4: one run per variant (NAME:VARIANT=FILE); one file for every variant only on
    request (NAME:*=FILE), marked; a run whose ids match no qrels id is refused as by vdr metrics."""
    kw = tmp_path / "kw.jsonl"
    kw.write_text("".join(json.dumps({"_id": q["_id"], "text": q["text"] + " facts"}) + "\n"
                          for q in map(json.loads, (corpus / "queries.jsonl").read_text().splitlines())))
    # the kw run: the grade-0 passage first, the grade-2 one second, for every query
    kw_run = tmp_path / "other-kw.trec"
    kw_run.write_text("".join(f"q{t} Q0 t{(t + 1) % 8}-p3 1 2.0 o\nq{t} Q0 t{t}-p0 2 1.0 o\n" for t in range(8)))
    out = tmp_path / "per"
    rc, stdout, err = cli(capsys, "evaluate", corpus, *FAST, "--rewrites", f"kw={kw}", "--run", f"other={ext_run}",
                          "--run", f"other:kw={kw_run}", "--primary-metric", "RR@10", "--out", out)
    assert rc == 0, err
    res = vdr.Results.load(out)
    assert res.aggregate("other", "original")["mrr@10"] == 1.0 and res.aggregate("other", "kw")["mrr@10"] == 0.5
    c = res.comparison("other", "kw")
    assert c.delta == -0.5 and (c.wins, c.ties, c.losses) == (0, 0, 8)
    assert "same run" not in stdout
    out2 = tmp_path / "reused"
    rc, stdout, err = cli(capsys, "evaluate", corpus, *FAST, "--rewrites", f"kw={kw}", "--run", f"other:*={ext_run}", "--out", out2)
    assert rc == 0, err
    row = next(line for line in stdout.splitlines() if line.startswith("other") and "kw" in line)
    assert "kw (same run)" in row and "+0.0000" in row
    assert "other: one run file for every variant (--run other:*=FILE; rows marked 'same run')" in stdout
    # a run with other query ids: refused with the file named, as vdr metrics and vdr compare refuse it
    bad = tmp_path / "badids.trec"
    bad.write_text("".join(f"query{t} Q0 t{t}-p0 1 2.0 o\n" for t in range(8)))
    rc, _, err = cli(capsys, "evaluate", corpus, *FAST, "--run", f"other={bad}", "--out", tmp_path / "x")
    assert rc == 2 and "--run other (variant original): the run retrieves no page for any of the 8 qrels queries" in err
    for item, msg in ((f"other:nope={ext_run}", "no variant 'nope' is evaluated; the variants are original, kw"),
                      (f"other:kw={ext_run}", "no run of the original queries, the baseline its variants are compared with")):
        rc, _, err = cli(capsys, "evaluate", corpus, *FAST, "--rewrites", f"kw={kw}", "--run", item, "--out", tmp_path / "y",
                         "--overwrite")
        assert rc == 2 and msg in err
    rc, _, err = cli(capsys, "evaluate", corpus, *FAST, "--run", f"other:*={ext_run}", "--run", f"other:kw={kw_run}", "--out", tmp_path / "z")
    assert rc == 2 and "give either NAME:*=FILE (one file for every variant) or one file per variant" in err


def test_inputs_inside_the_results_folder_are_kept(tmp_path, capsys):
    out = tmp_path / "work"
    texts, queries, qrels = make_passages(n_per_topic=4)
    corpus = write_corpus(out / "mycorpus", texts, queries, qrels)
    (out / "runs").mkdir()
    rc, _, err = cli(capsys, "evaluate", corpus, *FAST, "--out", out)  # the corpus is not a foreign file
    assert rc == 0, err
    rc, _, err = cli(capsys, "evaluate", corpus, *FAST, "--out", out)  # and survives a re-run
    assert rc == 0, err
    assert (corpus / "pages.jsonl").is_file() and (out / "results.json").is_file()
    assert sorted(p.name for p in out.iterdir()) == [LOCK_FILE, "mycorpus", "per_query.csv", "results.json", "runs", "timing.json"]


def test_results_folder_api_keep_and_staging(tmp_path):
    out = tmp_path / "res"
    out.mkdir()
    for rel, text in {"results.json": '{"config": {"vidore": "ds", "corpus_dir": "c"}}', "corpus/pages.jsonl": "pages",
                      "runs/old.trec": "old", "judge/rcp.json": "{}", "judge/cache.jsonl": "cache"}.items():
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text(text)
    with pytest.raises(vdr.InputError, match=r"different experiment \(corpus_dir: c -> d\)"):
        ResultsFolder(out, identity={"vidore": "ds", "corpus_dir": "d"}).open()
    with ResultsFolder(out, identity={"vidore": "ds", "corpus_dir": "c"}, keep=("corpus", "judge/cache.jsonl")).open() as f:
        (f.staging / "runs").mkdir()
        (f.staging / "runs" / "new.trec").write_text("new")
        (f.staging / "results.json").write_text("{}")
        assert f.staging.parent == out and f.staging.name.startswith(".vdr-new-")
        f.commit()
    assert snapshot(out) == {LOCK_FILE: b"", "corpus/pages.jsonl": b"pages", "judge/cache.jsonl": b"cache", "results.json": b"{}",
                             "runs/new.trec": b"new"}


def test_a_moved_results_folder_finds_its_inputs(tmp_path, capsys):
    """Issue 26.9: results.json records the inputs relative to the results folder too; a project
    folder moved elsewhere (another machine) still loads its corpus, qrels and runs, and the
    report shows them."""
    import shutil

    proj = tmp_path / "proj"
    texts, queries, qrels = make_passages(n_per_topic=4)
    corpus = write_corpus(proj / "data" / "corpus", texts, queries, qrels)
    kw = proj / "data" / "kw.jsonl"
    kw.write_text("".join(json.dumps({"_id": q, "text": t + " facts"}) + "\n" for q, t in queries.items()))
    rc, _, err = cli(capsys, "evaluate", corpus, *FAST, "--rewrites", f"kw={kw}", "--out", proj / "results")
    assert rc == 0, err
    doc = json.loads((proj / "results" / "results.json").read_text())
    assert doc["config"]["inputs_relative_to_results"] == {
        "corpus_dir": "../data/corpus", "queries": "../data/corpus/queries.jsonl", "qrels": "../data/corpus/qrels.tsv",
        "rewrites": {"kw": "../data/kw.jsonl"}}
    assert doc["config"]["corpus_dir"] == str(corpus.resolve())
    moved = tmp_path / "elsewhere" / "copy"
    shutil.move(str(proj), str(moved))
    assert not corpus.exists()
    res = vdr.Results.load(moved / "results")
    assert res.warnings == [] and res.corpus is not None and res.qrels is not None
    assert Path(res.corpus.root).resolve() == (moved / "data" / "corpus").resolve() and len(res.corpus) == len(texts)
    rc, _, err = cli(capsys, "report", moved / "results")
    assert rc == 0 and "not found" not in err, err
    # compare: the run files and the qrels, relative too
    rc, _, err = cli(capsys, "compare", moved / "data" / "corpus" / "qrels.tsv",
                     moved / "results" / "runs" / "lexical.original.trec", f"kw={moved / 'results' / 'runs' / 'lexical.kw.trec'}",
                     "--out", moved / "cmp")
    assert rc == 0, err
    rel = json.loads((moved / "cmp" / "results.json").read_text())["config"]["inputs_relative_to_results"]
    assert rel == {"qrels": "../data/corpus/qrels.tsv", "runs": {"lexical.original": "../results/runs/lexical.original.trec",
                                                                  "kw": "../results/runs/lexical.kw.trec"}}


@pytest.mark.parametrize("overwrite", [[], ["--overwrite"]])
def test_the_corpus_folder_itself_is_never_the_results_folder(tmp_path, capsys, overwrite):
    """--out CORPUS (with or without --overwrite) would replace the corpus' files with results:
    refused before anything is written, the corpus untouched."""
    texts, queries, qrels = make_passages(n_per_topic=4)
    corpus = write_corpus(tmp_path / "corpus", texts, queries, qrels)
    before = snapshot(corpus)
    for out in (corpus, Path(str(corpus) + "/"), corpus / ".." / "corpus"):
        rc, _, err = cli(capsys, "evaluate", corpus, *FAST, *overwrite, "--out", out)
        assert rc == 2 and "the results folder (--out) is an input of this run" in err and "choose another --out" in err
        assert "e.g. " in err and err.split("e.g. ")[1].split()[0].endswith("corpus-results")  # beside the corpus, not in it
    assert snapshot(corpus) == before


def test_a_results_folder_inside_the_corpus_never_deletes_its_files(tmp_path, capsys):
    """--out CORPUS/images --overwrite would replace the page images with results: refused, the
    images untouched; a new folder inside the corpus (CORPUS/results) is fine, and so is a rerun into it."""
    texts, queries, qrels = make_passages(n_per_topic=4)
    corpus = write_corpus(tmp_path / "corpus", texts, queries, qrels)
    (corpus / "images").mkdir()
    (corpus / "images" / "p1.png").write_bytes(b"a page")
    before = snapshot(corpus)
    for overwrite in ([], ["--overwrite"]):
        rc, _, err = cli(capsys, "evaluate", corpus, *FAST, *overwrite, "--out", corpus / "images")
        assert rc == 2 and "lies inside an input of this run" in err and "p1.png" in err and "--overwrite or not" in err, err
    assert snapshot(corpus) == before
    for overwrite in ([], ["--overwrite"]):
        rc, _, err = cli(capsys, "evaluate", corpus, *FAST, *overwrite, "--out", corpus / "results")
        assert rc == 0, err
    assert (corpus / "images" / "p1.png").read_bytes() == b"a page" and (corpus / "results" / "results.json").is_file()


def test_metrics_outputs_never_replace_an_input_and_a_refused_run_leaves_no_lock(tmp_path, capsys, ext_run, corpus):
    """``vdr metrics --json RUN`` replaced the run file with JSON: refused, as a folder given as a
    file is; a refused ``vdr evaluate`` leaves the folder as it found it (no stray .vdr.lock)."""
    import shutil

    run = tmp_path / "run.trec"
    shutil.copy(ext_run, run)
    qrels = corpus / "qrels.tsv"
    before = run.read_bytes()
    for flag, path, msg in (("--json", run, "is an input of this command"), ("--per-query", qrels, "is an input of this command"),
                            ("--json", tmp_path, "is a folder; give a file name")):
        rc, _, err = cli(capsys, "metrics", qrels, run, flag, path)
        assert rc == 2 and f"{flag} {path} {msg}" in err, err
    assert run.read_bytes() == before and (corpus / "qrels.tsv").read_text().startswith("query-id")
    user = tmp_path / "mine"
    user.mkdir()
    (user / "notes.txt").write_text("mine")
    rc, _, err = cli(capsys, "evaluate", corpus, *FAST, "--out", user)
    assert rc == 2 and "files vdr did not write" in err
    assert sorted(p.name for p in user.iterdir()) == ["notes.txt"]  # no .vdr.lock left behind
