"""``vdr compare QRELS RUN...`` and ``vdr.compare(qrels, runs, baseline=...)`` (issue 14.2): two
hand-written TREC runs, values checked against hand computation and pytrec_eval, the exact paired
randomization test enumerated here independently, the API equal to the CLI, ``vdr report`` on the
folder, and ``vdr.compare`` callable while ``vdr.compare``'s statistics stay importable."""

from __future__ import annotations

import itertools
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import vdr
from cli_helpers import cli
from shared_data import REPO_ROOT
from vdr.stats import compare_variants, holm  # the module's names keep working
from vdr.results import Results

QRELS = "q1 0 d1 1\nq1 0 d2 0\nq2 0 d3 2\nq2 0 d4 1\nq3 0 d5 1\nq4 0 d6 1\n"
RUN_A = ("q1 Q0 d2 1 3.0 a\nq1 Q0 d1 2 2.0 a\nq2 Q0 d4 1 3.0 a\nq2 Q0 d3 2 2.0 a\n"
         "q3 Q0 d9 1 1.0 a\nq4 Q0 d6 1 1.0 a\n")
RUN_B = ("q1 Q0 d1 1 3.0 b\nq1 Q0 d2 2 2.0 b\nq2 Q0 d3 1 3.0 b\nq2 Q0 d4 2 2.0 b\n"
         "q3 Q0 d5 1 1.0 b\nq4 Q0 d7 1 2.0 b\nq4 Q0 d6 2 1.0 b\n")
L3 = math.log2(3)
# nDCG@3 (trec_eval: gain = grade, discount log2(rank + 1)):
#   A: q1 d1 at rank 2 -> (1/L3)/1; q2 d4(1) then d3(2) -> (1 + 2/L3)/(2 + 1/L3); q3 nothing relevant -> 0; q4 1
#   B: q1 1; q2 ideal order -> 1; q3 1; q4 d6 at rank 2 -> 1/L3
NDCG_A = [1 / L3, (1 + 2 / L3) / (2 + 1 / L3), 0.0, 1.0]
NDCG_B = [1.0, 1.0, 1.0, 1 / L3]
RR_A, RR_B = [0.5, 1.0, 0.0, 1.0], [1.0, 1.0, 1.0, 0.5]  # reciprocal rank of the first grade >= 1
P1_A, P1_B = [0.0, 1.0, 0.0, 1.0], [1.0, 1.0, 1.0, 0.0]


@pytest.fixture()
def files(tmp_path) -> dict[str, Path]:
    out = {}
    for name, text in (("qrels.txt", QRELS), ("a.trec", RUN_A), ("b.trec", RUN_B)):
        out[name] = tmp_path / name
        out[name].write_text(text, encoding="utf-8")
    return out


def exact_p(d: list[float]) -> float:
    """Two-sided exact sign-flip p-value by enumerating all 2^n sign vectors (independent of vdr.compare)."""
    obs = abs(sum(d))
    hits = sum(1 for s in itertools.product((1, -1), repeat=len(d)) if abs(sum(x * y for x, y in zip(s, d))) >= obs - 1e-12)
    return hits / 2 ** len(d)


def test_compare_cli_values_hand_computed_and_pytrec_eval(files, tmp_path, capsys):
    out = tmp_path / "cmp"
    rc, stdout, err = cli(capsys, "compare", files["qrels.txt"], f"bm25={files['a.trec']}", files["b.trec"], "--baseline", "bm25",
                          "-m", "nDCG@3", "-m", "RR", "-m", "P@1", "--out", out, "--no-report")
    assert rc == 0, err
    res = Results.load(out)
    assert [r.variant for r in res.runs] == ["bm25", "b"] and res.baseline == "bm25" and res.primary == "ndcg@3"
    qids = res.query_ids
    assert qids == ["q1", "q2", "q3", "q4"]
    for name, ndcg, rr, p1 in (("bm25", NDCG_A, RR_A, P1_A), ("b", NDCG_B, RR_B, P1_B)):
        assert res.values("runs", name, "ndcg@3") == pytest.approx(ndcg, abs=1e-12)
        assert res.values("runs", name, "mrr") == pytest.approx(rr, abs=1e-12)
        assert res.values("runs", name, "precision@1") == pytest.approx(p1, abs=1e-12)
    # the same per-query values from pytrec_eval on the same files
    pytrec_eval = pytest.importorskip("pytrec_eval")
    qrels = {}
    for q, _, d, g in (line.split() for line in QRELS.splitlines()):
        qrels.setdefault(q, {})[d] = int(g)
    ev = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut_3", "recip_rank", "P_1"})
    for name, text in (("bm25", RUN_A), ("b", RUN_B)):
        run = {}
        for q, _, d, _, s, _ in (line.split() for line in text.splitlines()):
            run.setdefault(q, {})[d] = float(s)
        ref = ev.evaluate(run)
        for q in qids:
            got = res.per_query("runs", name)[q]
            if q in ref:
                assert got["ndcg@3"] == pytest.approx(ref[q]["ndcg_cut_3"], abs=1e-12)
                assert got["mrr"] == pytest.approx(ref[q]["recip_rank"], abs=1e-12)
                assert got["precision@1"] == pytest.approx(ref[q]["P_1"], abs=1e-12)
    # the comparison: b - bm25, exact test over 2^4 sign vectors, Holm over the 3 metrics
    c = res.comparison("runs", "b", "ndcg@3")
    d = [y - x for x, y in zip(NDCG_A, NDCG_B)]
    assert c.delta == pytest.approx(np.mean(d), abs=1e-12) and (c.wins, c.ties, c.losses) == (3, 0, 1)
    assert c.exact and c.p_value == pytest.approx(exact_p(d), abs=1e-12) == 0.5  # 8 of 16 sign vectors: with s3 = +1, |1 + a(s1 - s4) + b s2| >= 1 + b for s1 - s4 in {0 (s2 = +1), 2}
    ps = [res.comparison("runs", "b", m).p_value for m in ("ndcg@3", "mrr", "precision@1")]
    assert [res.comparison("runs", "b", m).p_value_holm for m in ("ndcg@3", "mrr", "precision@1")] == pytest.approx(list(holm(ps)))
    assert ps[1] == pytest.approx(exact_p([y - x for x, y in zip(RR_A, RR_B)]), abs=1e-12)
    # the printed table: a run column, the primary metric first, the baseline's change cells empty
    lines = stdout.splitlines()
    assert lines[0].split()[:5] == ["run", "ndcg@3", "mrr", "precision@1", "queries"]
    assert lines[1].split() == ["bm25", f"{np.mean(NDCG_A):.4f}", "0.6250", "0.5000", "4"]
    assert lines[2].split()[:7] == ["b", f"{np.mean(NDCG_B):.4f}", "0.8750", "0.7500", "4", f"{np.mean(d):+.4f}", "0.5000"]
    assert "3/0/1" in lines[2] and "d = run - baseline (bm25) on the same queries" in stdout
    assert sorted(p.name for p in out.iterdir() if p.name != ".vdr.lock") == ["per_query.csv", "results.json", "runs"]
    assert sorted(p.name for p in (out / "runs").iterdir()) == ["b.trec", "bm25.trec"]
    doc = json.loads((out / "results.json").read_text())
    assert doc["config"]["command"] == "compare" and doc["config"]["primary_metric"] == "ndcg@3"
    assert doc["config"]["runs"] == {"bm25": str(files["a.trec"].resolve()), "b": str(files["b.trec"].resolve())}


def test_api_equals_cli_and_accepts_objects(files, tmp_path, capsys):
    out = tmp_path / "cmp"
    rc, stdout, err = cli(capsys, "compare", files["qrels.txt"], files["a.trec"], files["b.trec"], "--primary-metric", "nDCG@5",
                          "--out", out, "--no-report", "--permutations", "500", "--bootstrap", "300", "--seed", "4")
    assert rc == 0, err
    api = vdr.compare(files["qrels.txt"], [files["a.trec"], files["b.trec"]], primary_metric="nDCG@5", n_permutations=500,
                      n_bootstrap=300, seed=4)
    assert isinstance(api, Results) and api.root is None and api.baseline == "a"
    loaded = Results.load(out)
    written = loaded.to_dict()  # the written results also record their inputs relative to the folder (issue 26.9)
    assert written["config"].pop("inputs_relative_to_results") == {"qrels": "../qrels.txt", "runs": {"a": "../a.trec", "b": "../b.trec"}}
    assert json.dumps(api.to_dict(), sort_keys=True) == json.dumps(written, sort_keys=True)
    assert api.table() == loaded.table() == stdout.rstrip("\n").rsplit("\nresults:", 1)[0]
    assert api.primary == "ndcg@5" and api.table_metrics[0] == "ndcg@5"
    # Qrels / Run objects (and dicts) give the same values
    objs = vdr.compare(vdr.load_qrels(files["qrels.txt"]), {"a": vdr.load_run(files["a.trec"]), "b": vdr.load_run(files["b.trec"])},
                       baseline="a", primary_metric="ndcg@5", n_permutations=500, n_bootstrap=300, seed=4)
    assert objs.config["qrels"] is None and objs.config["runs"] == {"a": None, "b": None}
    assert [c.to_dict() for _, c in objs.comparisons] == [c.to_dict() for _, c in api.comparisons]
    assert objs.table() == api.table()


def test_report_works_on_compare_results(files, tmp_path, capsys):
    out = tmp_path / "cmp"
    rc, stdout, err = cli(capsys, "compare", files["qrels.txt"], files["a.trec"], files["b.trec"], "--out", out)
    assert rc == 0, err
    assert stdout.rstrip().endswith(f"results: {out / 'results.json'}; report: {out / 'report.html'}")
    md = (out / "report.md").read_text()
    assert "| run | ndcg@3 |" in md and "d = run - baseline (a)" in md
    (out / "report.html").unlink()
    rc, stdout, err = cli(capsys, "report", out)
    assert rc == 0, err
    assert (out / "report.html").is_file() and "corpus folder" not in err


def test_vdr_compare_is_callable_and_the_module_still_imports():
    import vdr.experiment.compare_runs

    assert vdr.compare is vdr.experiment.compare_runs.compare_runs and callable(vdr.compare)
    assert type(sys.modules["vdr.compare"]).__name__ == "module" and sys.modules["vdr.compare"].compare_variants is compare_variants
    code = ("import sys, types; from vdr.stats import compare_variants, Comparison; import vdr.stats; import vdr; "
            "from vdr import compare; assert compare is vdr.compare and isinstance(compare, types.FunctionType); "
            "assert compare.__name__ == 'compare_runs'; assert isinstance(sys.modules['vdr.compare'], types.ModuleType); "
            "assert 'matplotlib' not in sys.modules and 'torch' not in sys.modules; print('ok')")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT,
                       env={"PYTHONPATH": str(REPO_ROOT), "PATH": "/usr/bin:/bin"}, timeout=120)
    assert p.returncode == 0 and p.stdout.strip() == "ok", p.stderr[-2000:]


def test_errors(files, tmp_path, capsys):
    q, a, b = files["qrels.txt"], files["a.trec"], files["b.trec"]
    cases = [
        ((q, a), "compare needs at least two runs (a baseline and a system), got 1"),
        ((q, a, b, "--baseline", "c"), "baseline 'c' is not one of the runs (a, b)"),
        ((q, a, f"a={b}"), "run name 'a' given twice"),
        ((q, a, f"original={b}"), "run name 'original' must be letters"),
        ((q, a, b, "-m", "ndgc@3"), "did you mean 'ndcg@3'"),
        ((q, a, tmp_path / "missing.trec"), "missing.trec"),
        ((q, a, b, "--out", q), "the results folder (--out) is a file"),
    ]
    for args, msg in cases:
        rc, _, err = cli(capsys, "compare", *args)
        assert rc == 2 and msg in err and err.count("\n") == 1, (args, err)
    other = tmp_path / "other.txt"
    other.write_text("q9 0 x 1\n")
    rc, _, err = cli(capsys, "compare", other, a, b)  # an id mismatch is an error, not a table of zeros
    assert rc == 2 and "error:" in err


def test_compare_out_refuses_another_experiment(files, tmp_path, capsys):
    out = tmp_path / "cmp"
    assert cli(capsys, "compare", files["qrels.txt"], files["a.trec"], files["b.trec"], "--out", out, "--no-report")[0] == 0
    q2 = tmp_path / "q2.txt"
    q2.write_text(QRELS)
    rc, _, err = cli(capsys, "compare", q2, files["a.trec"], files["b.trec"], "--out", out, "--no-report")
    assert rc == 2 and "results of a different experiment (qrels:" in err
    rc, _, err = cli(capsys, "compare", q2, files["a.trec"], f"c={files['b.trec']}", "--out", out, "--no-report", "--overwrite")
    assert rc == 0, err
    assert sorted(p.name for p in (out / "runs").iterdir()) == ["a.trec", "c.trec"]  # b.trec of the earlier run removed


def test_a_failing_run_is_named_with_its_file(files, tmp_path, capsys):
    """A run whose query ids match no qrels query, or whose pages have no qrels line, is an error
    naming the run's name AND its file (which of several runs is wrong)."""
    q, a = files["qrels.txt"], files["a.trec"]
    other_q = tmp_path / "sys" / "bad_queries.trec"
    other_q.parent.mkdir()
    other_q.write_text("x1 Q0 d1 1 2.0 c\nx2 Q0 d3 1 1.0 c\n", encoding="utf-8")
    rc, _, err = cli(capsys, "compare", q, a, f"mine={other_q}")
    err = [ln for ln in err.splitlines() if not ln.startswith("warning: ")]  # run 'a' leaves q3 unjudged: a warning
    assert rc == 2 and len(err) == 1, err
    err = err[0]
    assert err.startswith(f"error: {other_q.resolve()}: run 'mine': the run retrieves no page for any of the 4 qrels queries"), err
    assert "run query ids ['x1', 'x2']" in err
    other_d = tmp_path / "bad_docs.trec"  # right queries, no judged page: an id mismatch
    other_d.write_text("q1 Q0 D-1 1 2.0 c\nq2 Q0 D-3 1 1.0 c\n", encoding="utf-8")
    rc, _, err = cli(capsys, "compare", q, other_d, a)  # the failing run is the baseline, named by its file stem
    assert rc == 2 and err.count("\n") == 1 and err.startswith(f"error: {other_d.resolve()}: run 'bad_docs': no retrieved page of any query"), err
    with pytest.raises(vdr.InputError) as e:  # in-memory runs: the name, no path
        vdr.compare(q, {"a": a, "mem": {"x1": {"d1": 1.0}}})
    assert str(e.value).startswith("run 'mem': the run retrieves no page") and e.value.path is None
