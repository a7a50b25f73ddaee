"""A results folder keeps what it holds (issue 34.2): a new `vdr evaluate --out` into a folder of the
same experiment that would drop a backend x variant run or a --group-by breakdown stops (exit 2)
before any search, naming what would be lost, unless --overwrite; a report made before the new run
is rewritten. Lexical backend and run files only (no model)."""

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


@pytest.mark.parametrize("first, second, lost", [
    (["--rewrites", "kw={kw}"], [], "1 run(s) backend/variant lexical/kw"),
    (["--backend", "lexical", "--run", "ext={run}"], [], "1 run(s) backend/variant ext/original"),
    (["--group-by", "kind", "--groups", "{groups}"], [], "the --group-by breakdown(s) kind"),
])
def test_a_run_that_would_drop_results_stops_before_any_search(corpus, tmp_path, capsys, monkeypatch, first, second, lost):
    run = tmp_path / "ext.trec"
    run.write_text("".join(f"q{t} Q0 t{t}-p0 1 2.0 ext\n" for t in range(8)), encoding="utf-8")
    fill = lambda args: [a.format(kw=corpus / "kw.jsonl", run=run, groups=corpus / "groups.tsv") for a in args]  # noqa: E731
    out = tmp_path / "res"
    rc, _, err = cli(capsys, "evaluate", corpus, *FAST, *fill(first), "--out", out)
    assert rc == 0, err
    before = snapshot(out)
    with monkeypatch.context() as m:
        _no_search(m)
        rc, _, err = cli(capsys, "evaluate", corpus, *FAST, *fill(second), "--out", out)
    assert rc == 2 and "this run would drop results the folder holds: " + lost in err and "--overwrite" in err
    assert err.count("\n") == 1 and snapshot(out) == before  # nothing changed, not even a lock file left behind
    with pytest.raises(vdr.InputError, match="would drop results"):  # the Python API says the same
        vdr.evaluate(corpus, out=out, backends="lexical", progress=False, cache_dir=False, n_permutations=200, n_bootstrap=200)
    rc, _, err = cli(capsys, "evaluate", corpus, *FAST, *fill(second), "--out", out, "--overwrite")
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
