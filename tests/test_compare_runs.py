"""``vdr compare QRELS RUN...`` and ``vdr.compare(qrels, runs, baseline=...)`` (issue 14.2): two
hand-written TREC runs, values checked against hand computation and pytrec_eval, the exact paired
randomization test enumerated here independently, the API equal to the CLI, ``vdr report`` on the
folder, and ``vdr.compare`` callable while ``vdr.compare``'s statistics stay importable."""

from __future__ import annotations

import itertools
import re
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


def holm_formula(ps: list[float]) -> list[float]:
    """Holm 1979, written out: the k-th smallest of N p-values times N - k + 1 (k from 1), capped at 1,
    made non-decreasing along that order (independent of vdr.stats.holm)."""
    order = sorted(range(len(ps)), key=lambda i: ps[i])
    out, running = [0.0] * len(ps), 0.0
    for k, i in enumerate(order):
        running = max(running, min(1.0, (len(ps) - k) * ps[i]))
        out[i] = running
    return out


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
    # the comparison: b - bm25, exact test over 2^4 sign vectors; Holm: the default family is each metric's
    # comparisons made (one run against the baseline: 1 test, Holm p = p); --family all: one over the 3 metrics
    c = res.comparison("runs", "b", "ndcg@3")
    d = [y - x for x, y in zip(NDCG_A, NDCG_B)]
    assert c.delta == pytest.approx(np.mean(d), abs=1e-12) and (c.wins, c.ties, c.losses) == (3, 0, 1)
    assert c.exact and c.p_value == pytest.approx(exact_p(d), abs=1e-12) == 0.5  # 8 of 16 sign vectors: with s3 = +1, |1 + a(s1 - s4) + b s2| >= 1 + b for s1 - s4 in {0 (s2 = +1), 2}
    ps = [res.comparison("runs", "b", m).p_value for m in ("ndcg@3", "mrr", "precision@1")]
    assert [res.comparison("runs", "b", m).p_value_holm for m in ("ndcg@3", "mrr", "precision@1")] == pytest.approx(ps)
    assert res.config["family"] == "primary" and c.holm_family == ("b:ndcg@3",)
    assert "p (Holm): Holm-corrected over the 1 test (runs x ndcg@3); each other metric (mrr, precision@1) its own family" in stdout
    every = vdr.compare(files["qrels.txt"], {"bm25": files["a.trec"], "b": files["b.trec"]}, metrics=["nDCG@3", "RR", "P@1"],
                        family="all")
    assert [every.comparison("runs", "b", m).p_value for m in ("ndcg@3", "mrr", "precision@1")] == ps
    assert [every.comparison("runs", "b", m).p_value_holm for m in ("ndcg@3", "mrr", "precision@1")] == pytest.approx(holm_formula(ps))
    assert list(holm(ps)) == pytest.approx(holm_formula(ps))
    assert every.comparison("runs", "b").holm_family == ("b:ndcg@3", "b:mrr", "b:precision@1")
    assert "Holm-corrected over the 3 tests (runs x ndcg@3, mrr, precision@1);" in every.table()
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
                       env={"PYTHONPATH": str(REPO_ROOT), "PATH": "/usr/bin:/bin"}, timeout=600)
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
    assert err.startswith("warning: 2 query ids of the qrels are not in the run 'bad_docs': 'q3', 'q4'\n")  # issue 34.1
    err = err.split("\n", 1)[1]
    assert rc == 2 and err.count("\n") == 1 and err.startswith(f"error: {other_d.resolve()}: run 'bad_docs': no retrieved page of any query"), err
    with pytest.raises(vdr.InputError) as e:  # in-memory runs: the name, no path
        vdr.compare(q, {"a": a, "mem": {"x1": {"d1": 1.0}}})
    assert str(e.value).startswith("run 'mem': the run retrieves no page") and e.value.path is None


# ------------------------------------------------------------------------------------------ every pair (issue 27.3)

# 20 queries, one relevant page each (binary): A finds it at rank 1 for all; B for q01-q10; C never; D for q01-q08, q11, q12
PAIR_IDS = [f"q{i:02d}" for i in range(1, 21)]
PAIR_FOUND = {"A": PAIR_IDS, "B": PAIR_IDS[:10], "C": [], "D": PAIR_IDS[:8] + PAIR_IDS[10:12]}


def _pair_files(tmp_path) -> tuple[Path, dict[str, Path]]:
    qrels = tmp_path / "pairs.qrels"
    qrels.write_text("".join(f"{q} 0 rel-{q} 1\n{q} 0 junk-{q} 0\n" for q in PAIR_IDS), encoding="utf-8")
    runs = {}
    for name, found in PAIR_FOUND.items():
        runs[name] = tmp_path / f"{name}.trec"
        runs[name].write_text("".join(f"{q} Q0 {'rel-' + q if q in found else 'junk-' + q} 1 1.0 {name}\n" for q in PAIR_IDS),
                              encoding="utf-8")
    return qrels, runs


def test_pairs_all_hand_computed(tmp_path, capsys):
    qrels, runs = _pair_files(tmp_path)
    out = tmp_path / "cmp"
    rc, stdout, err = cli(capsys, "compare", qrels, *(f"{n}={p}" for n, p in runs.items()), "-m", "ndcg@3", "-m", "mrr@3",
                          "--pairs", "all", "--out", out, "--no-report")
    assert rc == 0, err
    res = Results.load(out)
    assert res.config["pairs"] == "all" and len(res.pairwise) == 6 * 2  # C(4, 2) pairs x 2 metrics
    pairs = {(c.variant, c.baseline, c.metric): c for c in res.pairwise}
    assert [(c.variant, c.baseline) for c in res.pairwise if c.metric == "ndcg@3"] == [
        ("B", "A"), ("C", "A"), ("D", "A"), ("C", "B"), ("D", "B"), ("D", "C")]
    means = {n: len(f) / 20 for n, f in PAIR_FOUND.items()}  # nDCG@3 = RR@3 = 1 when found at rank 1, else 0
    for (v, b, m), c in pairs.items():
        assert c.rewritten == means[v] and c.original == means[b] and c.delta == pytest.approx(means[v] - means[b], abs=1e-12)
        wins = len(set(PAIR_FOUND[v]) - set(PAIR_FOUND[b]))
        losses = len(set(PAIR_FOUND[b]) - set(PAIR_FOUND[v]))
        assert (c.wins, c.ties, c.losses) == (wins, 20 - wins - losses, losses)
        # the default family (--family primary): each metric's 6 pair tests, one family per metric
        assert c.holm_family == tuple(x.label for x in res.pairwise if x.metric == m)
    for m in ("ndcg@3", "mrr@3"):
        fam = [c for c in res.pairwise if c.metric == m]
        assert holm_formula([c.p_value for c in fam]) == pytest.approx([c.p_value_holm for c in fam])
    every = vdr.compare(qrels, runs, metrics=["ndcg@3", "mrr@3"], pairs="all", family="all")  # one family of the 12 tests
    assert [c.p_value for c in every.pairwise] == [c.p_value for c in res.pairwise]
    assert all(c.holm_family == tuple(x.label for x in every.pairwise) for c in every.pairwise)
    assert holm_formula([c.p_value for c in every.pairwise]) == pytest.approx([c.p_value_holm for c in every.pairwise])
    res.save(tmp_path / "again")  # the pairs are in results.json and read back as they were
    assert (tmp_path / "again" / "results.json").read_bytes() == (out / "results.json").read_bytes()
    # B and D: two wins, two losses -> no evidence; every other pair differs on >= 10 queries all one way -> significant
    assert pairs["D", "B", "ndcg@3"].outcome() == "ns" and pairs["D", "B", "ndcg@3"].delta == 0
    assert all(c.outcome() == ("gain" if c.delta > 0 else "loss") for c in res.pairwise if {c.variant, c.baseline} != {"B", "D"})
    # ranx's table: the letters of the systems a system is significantly better than
    t = res.pairs_table()
    assert t.columns == ("#", "run", "ndcg@3", "mrr@3")
    assert [r[:3] for r in t.rows] == [("a", "A", "1.0000"), ("b", "B", "0.5000"), ("c", "C", "0.0000"), ("d", "D", "0.5000")]
    assert [s[2] for s in t.sups] == ["bcd", "c", "", "c"]
    assert "every pair (ranx's table):" in stdout and "1.0000\u1d47\u1d9c\u1d48" in stdout  # 1.0000ᵇᶜᵈ as ranx prints it
    tex = t.to_latex(label="tab:pairs")
    assert r"a & A & 1.0000$^{bcd}$\hphantom{} & 1.0000$^{bcd}$\hphantom{} \\" in tex and r"c & C & 0.0000\hphantom{$^{abd}$} &" in tex
    assert r"b & B & 0.5000$^{c}$\hphantom{$^{ad}$} &" in tex
    md = t.to_markdown()
    assert "| a | A | 1.0000<sup>bcd</sup> | 1.0000<sup>bcd</sup> |" in md
    pw = res.pairwise_table("ndcg@3").to_text().splitlines()
    assert pw[0].split()[:4] == ["run", "vs", "ndcg@3", "vs"] and pw[1].split()[:5] == ["B", "A", "0.5000", "1.0000", "-0.5000"]
    assert "\u25bc" in pw[1] and pw[1].rstrip().endswith("0/10/10")
    df = res.to_pandas("pairs")
    assert df.shape == (12, 15) and df.loc[(df.run == "D") & (df.vs == "B") & (df.metric == "ndcg@3"), "outcome"].item() == "ns"
    # the default stays each run against the baseline only
    default = vdr.compare(qrels, runs, metrics=["ndcg@3"])
    assert default.pairwise == [] and default.config["pairs"] == "baseline"
    with pytest.raises(vdr.InputError, match="run `vdr compare --pairs all`"):
        default.pairs_table()
    rc, _, err = cli(capsys, "compare", qrels, *runs.values(), "--pairs", "some")
    assert rc == 2 and "some" in err


def test_pairs_all_against_ranx(tmp_path):
    """ranx's own compare on the same runs: the same means, W/T/L and superscript letters (its
    Fisher test, 2000 permutations, no multiple-testing correction, p <= 0.05; vdr's: Holm over
    the 12 tests; the pairs are chosen so that both decide alike), and its LaTeX superscripts."""
    ranx = pytest.importorskip("ranx")
    qrels, runs = _pair_files(tmp_path)
    res = vdr.compare(qrels, runs, metrics=["ndcg@3", "mrr@3"], pairs="all")
    rq = ranx.Qrels({q: {f"rel-{q}": 1, f"junk-{q}": 0} for q in PAIR_IDS})
    rruns = [ranx.Run({q: {("rel-" if q in f else "junk-") + q: 1.0} for q in PAIR_IDS}, name=n) for n, f in PAIR_FOUND.items()]
    rep = ranx.compare(rq, rruns, metrics=["ndcg@3", "mrr@3"], stat_test="fisher", max_p=0.05, n_permutations=2000)
    for c in res.pairwise:
        assert c.rewritten == pytest.approx(rep.results[c.variant][c.metric], abs=1e-12)
        wtl = rep.win_tie_loss[(c.variant, c.baseline)][c.metric]
        assert (c.wins, c.ties, c.losses) == (wtl["W"], wtl["T"], wtl["L"])
    t = res.pairs_table()
    for i, name in enumerate(PAIR_FOUND):
        for j, m in enumerate(["ndcg@3", "mrr@3"]):
            assert t.sups[i][2 + j] == rep.get_superscript_for_latex(name, m), (name, m)
            expect = f"$^{{{rep.get_superscript_for_latex(name, m)}}}$\\hphantom{{$^{{{rep.get_phantoms_for_latex(name, m)}}}$}}"
            assert t.latex_sups[i][2 + j] == expect.replace("$^{}$", ""), (name, m)  # ranx's own clean-up


def test_compare_report_speaks_of_systems(files, sample_corpus, tmp_path, capsys):
    """The compare report (issue 27.4): systems and baseline, no rewrite section, no broken image
    without a corpus; pages and query texts with --corpus/--queries (on compare and on report)."""
    out = tmp_path / "cmp"
    rc, _, err = cli(capsys, "compare", files["qrels.txt"], files["a.trec"], files["b.trec"], "--out", out)
    assert rc == 0, err
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "rewrite" not in html.lower().replace("the rewrite helped", "") and "rewritten - original" not in html
    assert 'id="length"' not in html and "image missing" not in html and "text not available" not in html
    assert html.count('class="noimg"') > 0 and "give --corpus" in html and "give --queries" in html
    assert "<li class=\"ns\">b vs a (baseline): " in html and "Distribution of per-query changes against the baseline" in html
    # the sample's qrels and two of its runs, with the corpus and the queries: pages and texts shown, opened full size
    sample = REPO_ROOT / "assets" / "sample_corpus"
    ids = [json.loads(x)["_id"] for x in (sample / "queries.jsonl").read_text().splitlines()]
    pages = sorted(json.loads(x)["corpus-id"] for x in (sample_corpus / "pages.jsonl").read_text().splitlines())
    a, b = tmp_path / "s1.trec", tmp_path / "s2.trec"
    best = {}
    for q, d, g in (x.split("\t") for x in (sample / "qrels.tsv").read_text().splitlines()[1:]):
        best.setdefault(q, d)  # each query's first judged page (grade 2 where it has one)
    a.write_text("".join(f"{q} Q0 {best[q]} 1 2.0 s1\n" for q in ids))
    b.write_text("".join(f"{q} Q0 {pages[(i * 7) % len(pages)]} 1 2.0 s2\n" for i, q in enumerate(ids)))
    out2 = tmp_path / "cmp2"
    rc, _, err = cli(capsys, "compare", sample / "qrels.tsv", a, b, "--allow-unjudged", "--queries", sample / "queries.jsonl",
                     "--corpus", sample_corpus, "--group-by", "type", "--out", out2)
    assert rc == 0, err
    html = (out2 / "report.html").read_text(encoding="utf-8")
    assert "What is the base period of the consumer price index" in html and "noimg" not in html.split("</style>")[1] and "image missing" not in html
    links = re.findall(r'<a class="full" href="report_pages/([^"]+)"', html)
    assert links and all((out2 / "report_pages" / f).is_file() for f in links)
    assert "<h3>by type</h3>" in html
    res = Results.load(out2)
    assert res.corpus is not None and res.warnings == [] and res.variants["s1"]["q01"].text.startswith("How much")
    # vdr report --corpus/--queries on the first folder: the same, after the fact
    rc, _, err = cli(capsys, "report", out, "--corpus", sample_corpus)  # the tiny runs' pages are not in the sample corpus
    assert rc == 0 and "page image(s) missing" in err
