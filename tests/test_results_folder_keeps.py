"""A results folder keeps what it holds: a new `vdr evaluate --out` into a folder of the same
experiment adds or replaces its own runs and evaluates the folder's others again with it (from their
recorded files), so statistics, groups and the report cover everything the folder holds; a held run
or breakdown whose input is gone stops the run (exit 2) before any search, naming what would be
lost, unless --overwrite; a report made before the new run is rewritten. Lexical backend and run
files only (no model)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import vdr
from cli_helpers import cli, snapshot
from rewards_fixtures import make_passages, write_corpus

FAST = ["--backend", "lexical", "-q", "--no-cache", "--permutations", "200", "--bootstrap", "200"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    texts, queries, qrels = make_passages(n_per_topic=4)
    folder = write_corpus(tmp_path_factory.mktemp("corpus"), texts, queries, qrels)
    with open(folder / "kw.jsonl", "w", encoding="utf-8") as f:
        for q, t in queries.items():
            f.write(json.dumps({"_id": q, "text": t.split()[-1], "kind": "a" if q < "q4" else "b"}) + "\n")
    with open(folder / "groups.tsv", "w", encoding="utf-8") as f:
        f.writelines(f"{q}\tkind\t{'a' if q < 'q4' else 'b'}\n" for q in queries)
    return folder


def _no_search(monkeypatch):
    import vdr.experiment.evaluation as E

    def boom(*a, **k):
        raise AssertionError("a search started before the folder's content was checked")

    monkeypatch.setattr(E, "_run_backends", boom)


CASES = [
    (["--rewrites", "kw={kw}"], "lexical/kw", "variant kw", "kw"),
    (["--backend", "lexical", "--run", "ext={run}"], "ext/original", "run ext", "run"),
    (["--group-by", "kind", "--groups", "{groups}"], None, "--group-by kind", "groups"),
]


def _inputs(corpus, tmp_path):
    """Copies of the rewrite, run and groups files (so that a test can delete one)."""
    run = tmp_path / "ext.trec"
    run.write_text("".join(f"q{t} Q0 t{t}-p0 1 2.0 ext\n" for t in range(8)), encoding="utf-8")
    files = {"kw": tmp_path / "kw.jsonl", "run": run, "groups": tmp_path / "groups.tsv"}
    files["kw"].write_bytes((corpus / "kw.jsonl").read_bytes())
    files["groups"].write_bytes((corpus / "groups.tsv").read_bytes())
    return files


@pytest.mark.parametrize("first, run_kept, kept, _", CASES)
def test_a_narrower_run_keeps_what_the_folder_holds(corpus, tmp_path, capsys, first, run_kept, kept, _):
    """Run again with fewer variants, run files or groups: the folder's others are evaluated again with
    it (from their recorded files), named in a warning and in config.kept_from_folder; the kept run's
    values are the first run's."""
    files = _inputs(corpus, tmp_path)
    out = tmp_path / "res"
    rc, _, err = cli(capsys, "evaluate", corpus, *FAST, *[a.format(**files) for a in first], "--out", out)
    assert rc == 0, err
    before = json.loads((out / "results.json").read_text())
    rc, _, err = cli(capsys, "evaluate", corpus, *FAST, "--out", out)
    assert rc == 0, err
    assert "kept what the folder holds" in err and kept in err
    doc = json.loads((out / "results.json").read_text())
    assert [k.split(" (")[0] for k in doc["config"]["kept_from_folder"]] == [kept]
    assert sorted((r["backend"], r["variant"]) for r in doc["runs"]) == sorted((r["backend"], r["variant"]) for r in before["runs"])
    assert doc.get("config", {}).get("group_by") == before.get("config", {}).get("group_by")
    if run_kept is not None:
        b, v = run_kept.split("/")
        old = next(r for r in before["runs"] if (r["backend"], r["variant"]) == (b, v))
        new = next(r for r in doc["runs"] if (r["backend"], r["variant"]) == (b, v))
        assert new["aggregate"] == old["aggregate"]


@pytest.mark.parametrize("first, run_kept, kept, gone", CASES)
def test_a_run_that_would_drop_results_stops_before_any_search(corpus, tmp_path, capsys, monkeypatch, first, run_kept, kept, gone):
    """A held input whose file is gone cannot be evaluated again: the run stops before any search,
    naming what would be lost, the folder unchanged; --overwrite replaces the folder's results."""
    files = _inputs(corpus, tmp_path)
    out = tmp_path / "res"
    rc, _, err = cli(capsys, "evaluate", corpus, *FAST, *[a.format(**files) for a in first], "--out", out)
    assert rc == 0, err
    files[gone].unlink()
    before = snapshot(out)
    lost = f"1 run(s) backend/variant {run_kept}" if run_kept else "the --group-by breakdown(s) kind"
    with monkeypatch.context() as m:
        _no_search(m)
        rc, _, err = cli(capsys, "evaluate", corpus, *FAST, "--out", out)
    assert rc == 2 and "this run would drop results the folder holds: " + lost in err and "--overwrite" in err
    assert snapshot(out) == before  # nothing changed, not even a lock file left behind
    with pytest.raises(vdr.InputError, match="would drop results"):  # the Python API says the same
        vdr.evaluate(corpus, out=out, backends="lexical", progress=False, cache_dir=False, n_permutations=200, n_bootstrap=200)
    rc, _, err = cli(capsys, "evaluate", corpus, *FAST, "--out", out, "--overwrite")
    assert rc == 0, err


def test_adding_a_variant_keeps_everything_and_rewrites_the_report(corpus, tmp_path, capsys):
    out = tmp_path / "res"
    assert cli(capsys, "evaluate", corpus, *FAST, "--out", out)[0] == 0
    assert cli(capsys, "report", out)[0] == 0
    old_md = (out / "report.md").read_text()
    rc, _, err = cli(capsys, "evaluate", corpus, *FAST, "--rewrites", f"kw={corpus / 'kw.jsonl'}", "--out", out)
    assert rc == 0, err
    doc = json.loads((out / "results.json").read_text())
    assert sorted((r["backend"], r["variant"]) for r in doc["runs"]) == [("lexical", "kw"), ("lexical", "original")]
    new_md = (out / "report.md").read_text()
    assert new_md != old_md and "kw" in new_md  # the report made before the run was rewritten over what the folder holds
