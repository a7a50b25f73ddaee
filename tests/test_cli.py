"""The `vdr` command line, in-process (vdr.cli.main) and as installed console script / python -m vdr."""

from __future__ import annotations

import csv
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from vdr.cli import main

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "assets" / "sample"
QRELS = str(SAMPLE / "qrels.tsv")
RUN = str(SAMPLE / "run.trec")
# the sample run lacks q5 and ranks q6, which the qrels lack: named, never silent (issue 34.1)
SAMPLE_JOIN_WARNING = ("warning: 1 query ids of the run 'colqwen2.5-original' are not in the qrels: 'q6'; 1 query ids of the qrels are"
                       " not in the run 'colqwen2.5-original': 'q5'\n")
BIN = Path(sys.executable).parent

DEFAULT_FAMILIES = ("ndcg", "mrr", "recall", "precision", "hit", "map", "judged")
L2 = math.log2

# ---- the sample, by hand (trec_eval semantics) ---------------------------------------------
# run ranking per query (score desc, ties by corpus id desc):
#   q1: #13 (g1), #12 (g2), #2 (g0), #40 (unjudged)
#   q2: #31 (g2) and #30 tie at 17.5 -> "#31" > "#30" so #31 is rank 1; then #9
#   q3: #7, #8 (unjudged), #21 (g2), #20 (g1)        qrels also hold #22 (g1)
#   q4: #5 (g-1), #4 (g2), #1 (unjudged)
#   q5: not in the run -> 0;  q6: in the run, no qrels -> ignored
NDCG3_Q1 = (1 / L2(2) + 2 / L2(3) + 0) / (2 / L2(2) + 1 / L2(3))
NDCG3_Q2 = (2 / L2(2)) / (2 / L2(2))
NDCG3_Q3 = (0 + 0 + 2 / L2(4)) / (2 / L2(2) + 1 / L2(3) + 1 / L2(4))
NDCG3_Q4 = (0 + 2 / L2(3)) / (2 / L2(2))
NDCG3_Q5 = 0.0
NDCG3 = (NDCG3_Q1 + NDCG3_Q2 + NDCG3_Q3 + NDCG3_Q4 + NDCG3_Q5) / 5

MRR3 = (1 / 1 + 1 / 1 + 1 / 3 + 1 / 2 + 0) / 5
RECALL10 = (2 / 2 + 1 / 1 + 2 / 3 + 1 / 1 + 0) / 5
PRECISION5 = (2 / 5 + 1 / 5 + 2 / 5 + 1 / 5 + 0) / 5
HIT5 = (1 + 1 + 1 + 1 + 0) / 5
MAP10 = ((1 / 1 + 2 / 2) / 2 + (1 / 1) / 1 + (1 / 3 + 2 / 4) / 3 + (1 / 2) / 1 + 0) / 5
JUDGED3 = (3 / 3 + 1 / 3 + 1 / 3 + 2 / 3 + 0) / 5


def run_cli(capsys, *args: str) -> tuple[int, str, str]:
    rc = main(list(args))
    out = capsys.readouterr()
    return rc, out.out, out.err


# --------------------------------------------------------------------------------------------
# hand-computed values


def test_hand_values_are_what_they_say():
    # sanity for the constants themselves (no vdr code involved)
    assert NDCG3_Q1 == pytest.approx(0.859719, abs=1e-6)
    assert NDCG3_Q3 == pytest.approx(0.319394, abs=1e-6)
    assert NDCG3_Q4 == pytest.approx(0.630930, abs=1e-6)
    assert NDCG3 == pytest.approx(0.562009, abs=1e-6)


def test_metrics_json_on_sample(tmp_path, capsys):
    out_json = tmp_path / "res.json"
    rc, out, err = run_cli(capsys, "metrics", QRELS, RUN, "--json", str(out_json))
    assert rc == 0
    assert "Traceback" not in err
    data = json.loads(out_json.read_text())
    assert set(data) == {"aggregate", "per_query", "num_queries", "policy"}
    assert data["num_queries"] == 5
    agg = data["aggregate"]
    assert set(agg) == {f"{f}@{k}" for f in (*DEFAULT_FAMILIES, "ties") for k in (1, 3, 5, 10)}
    assert agg["ndcg@3"] == pytest.approx(NDCG3, abs=1e-12)
    assert agg["mrr@3"] == pytest.approx(MRR3, abs=1e-12)
    assert agg["recall@10"] == pytest.approx(RECALL10, abs=1e-12)
    assert agg["precision@5"] == pytest.approx(PRECISION5, abs=1e-12)
    assert agg["hit@5"] == pytest.approx(HIT5, abs=1e-12)
    assert agg["map@10"] == pytest.approx(MAP10, abs=1e-12)
    assert agg["judged@3"] == pytest.approx(JUDGED3, abs=1e-12)
    pq = data["per_query"]
    assert sorted(pq) == ["q1", "q2", "q3", "q4", "q5"]  # q6 (no qrels) ignored, q5 (no run) kept
    assert pq["q1"]["ndcg@3"] == pytest.approx(NDCG3_Q1, abs=1e-12)
    assert pq["q2"]["ndcg@3"] == pytest.approx(NDCG3_Q2, abs=1e-12)
    assert pq["q3"]["ndcg@3"] == pytest.approx(NDCG3_Q3, abs=1e-12)
    assert pq["q4"]["ndcg@3"] == pytest.approx(NDCG3_Q4, abs=1e-12)
    assert all(v == 0.0 for v in pq["q5"].values())
    assert pq["q2"]["ndcg@1"] == 1.0  # the tie at 17.5 goes to "#31" (corpus id descending)
    pol = data["policy"]
    assert pol["relevance_level"] == 1
    assert pol["queries_without_relevant"] == "zero"
    assert pol["num_queries_missing_from_run"] == 1
    assert pol["num_run_queries_without_qrels"] == 1
    assert pol["num_queries_averaged"] == 5
    # tied score groups: only q2's #31/#30 (17.5) tie, at ranks 1-2 -> one group in every top k >= 2
    assert pol["tied_groups"] == {"ties@1": 0, "ties@3": 1, "ties@5": 1, "ties@10": 1}
    assert pq["q2"]["ties@3"] == 1.0 and pq["q1"]["ties@3"] == 0.0 and agg["ties@3"] == pytest.approx(1 / 5)
    assert pol["queries_skipped_no_judgments"] == [] and pol["queries_all_unjudged"] == []
    assert f"wrote {out_json}" in out


def test_table_printed(capsys):
    rc, out, err = run_cli(capsys, "metrics", QRELS, RUN)
    assert rc == 0 and err == SAMPLE_JOIN_WARNING
    lines = out.splitlines()
    assert lines[0].split() == ["metric", "@1", "@3", "@5", "@10"]
    rows = {ln.split()[0]: ln.split()[1:] for ln in lines[1:8]}
    assert list(rows) == list(DEFAULT_FAMILIES)
    assert rows["ndcg"][1] == f"{NDCG3:.4f}" == "0.5620"
    assert rows["mrr"][1] == f"{MRR3:.4f}"
    assert rows["map"][3] == f"{MAP10:.4f}"
    assert rows["judged"][1] == f"{JUDGED3:.4f}"
    assert "5 queries averaged" in out
    assert "queries missing from the run scored 0: 1" in out
    assert "run queries without qrels ignored: 1" in out
    assert "tied score groups in the top k (total over the queries; per query in --json/--per-query): @1 0, @3 1, @5 1, @10 1" in out


def test_per_query_csv(tmp_path, capsys):
    p = tmp_path / "pq.csv"
    rc, out, _ = run_cli(capsys, "metrics", QRELS, RUN, "--k", "3,1", "--per-query", str(p))
    assert rc == 0 and f"wrote {p}" in out
    rows = list(csv.reader(p.open(newline="")))
    assert rows[0] == ["query-id"] + [f"{f}@{k}" for f in (*DEFAULT_FAMILIES, "ties") for k in (1, 3)]
    assert [r[0] for r in rows[1:]] == ["q1", "q2", "q3", "q4", "q5"]
    by_q = {r[0]: dict(zip(rows[0][1:], map(float, r[1:]))) for r in rows[1:]}
    assert by_q["q1"]["ndcg@3"] == pytest.approx(NDCG3_Q1, abs=1e-12)
    assert by_q["q3"]["mrr@3"] == pytest.approx(1 / 3, abs=1e-15)
    assert by_q["q4"]["mrr@1"] == 0.0 and by_q["q4"]["ndcg@1"] == 0.0  # rank 1 is the grade -1 page
    assert by_q["q5"] == {k: 0.0 for k in rows[0][1:]}
    assert by_q["q2"]["ties@3"] == 1.0 and by_q["q2"]["ties@1"] == 0.0


def test_explicit_metrics(tmp_path, capsys):
    p = tmp_path / "r.json"
    rc, out, _ = run_cli(capsys, "metrics", QRELS, RUN, "-m", "ndcg@3", "--metric", "mrr", "-m", "hole@3", "--json", str(p))
    assert rc == 0
    agg = json.loads(p.read_text())["aggregate"]
    assert list(agg) == ["ndcg@3", "mrr", "hole@3"]
    assert agg["ndcg@3"] == pytest.approx(NDCG3, abs=1e-12)
    assert agg["mrr"] == pytest.approx(MRR3, abs=1e-12)  # no relevant page below rank 3 that is first
    assert agg["hole@3"] == pytest.approx(1 - JUDGED3, abs=1e-12)
    assert out.splitlines()[0].split() == ["metric", "@3", "all"]


def test_relevance_level(tmp_path, capsys):
    p = tmp_path / "r.json"
    rc, _, _ = run_cli(capsys, "metrics", QRELS, RUN, "-m", "hit@1", "-m", "recall@10", "--relevance-level", "2", "--json", str(p))
    assert rc == 0
    data = json.loads(p.read_text())
    # grade >= 2: q1 #12 at rank 2; q2 #31 rank 1; q3 #21 rank 3; q4 #4 rank 2; q5 none retrieved
    assert data["aggregate"]["hit@1"] == pytest.approx((0 + 1 + 0 + 0 + 0) / 5)
    assert data["aggregate"]["recall@10"] == pytest.approx((1 + 1 + 1 + 1 + 0) / 5)
    assert data["policy"]["relevance_level"] == 2


def _trec_files(tmp_path: Path, qrels: str, run: str) -> tuple[str, str]:
    """Write ``qrels`` and ``run`` (TREC text) as tmp_path/q.trec and tmp_path/r.trec; their paths as strings."""
    q, r = tmp_path / "q.trec", tmp_path / "r.trec"
    q.write_text(qrels)
    r.write_text(run)
    return str(q), str(r)


def _no_rel_files(tmp_path: Path) -> tuple[str, str]:
    return _trec_files(tmp_path, "a 0 d1 1\nb 0 d2 0\nb 0 d3 -1\n", "a Q0 d1 1 1.0 t\nb Q0 d2 1 1.0 t\n")


def test_queries_without_relevant_zero_by_default(tmp_path, capsys):
    q, r = _no_rel_files(tmp_path)
    j = tmp_path / "o.json"
    rc, out, _ = run_cli(capsys, "metrics", q, r, "-m", "ndcg@3", "--json", str(j))
    assert rc == 0
    data = json.loads(j.read_text())
    assert data["num_queries"] == 2
    assert data["aggregate"]["ndcg@3"] == 0.5  # a: 1.0, b: 0 (no grade > 0)
    assert data["policy"]["queries_without_relevant"] == "zero"
    assert data["policy"]["num_queries_without_relevant"] == 1
    assert "queries without relevant pages (zero): 1" in out


def test_exclude_queries_without_relevant(tmp_path, capsys):
    q, r = _no_rel_files(tmp_path)
    j = tmp_path / "o.json"
    rc, out, _ = run_cli(capsys, "metrics", q, r, "-m", "ndcg@3", "--exclude-queries-without-relevant", "--json", str(j))
    assert rc == 0
    data = json.loads(j.read_text())
    assert data["num_queries"] == 1
    assert list(data["per_query"]) == ["a"]
    assert data["aggregate"]["ndcg@3"] == 1.0
    assert data["policy"]["queries_without_relevant"] == "exclude"
    assert "1 query averaged" in out


def test_json_and_run_formats_accepted(tmp_path, capsys):
    q = tmp_path / "q.json"
    q.write_text(json.dumps({"q1": {"a": 1, "b": 2}}))
    r = tmp_path / "r.json"
    r.write_text(json.dumps({"q1": {"b": 0.1, "a": 0.9}}))
    j = tmp_path / "o.json"
    rc, _, _ = run_cli(capsys, "metrics", str(q), str(r), "-m", "ndcg@2", "--json", str(j))
    assert rc == 0
    expected = (1 / L2(2) + 2 / L2(3)) / (2 / L2(2) + 1 / L2(3))
    assert json.loads(j.read_text())["aggregate"]["ndcg@2"] == pytest.approx(expected, abs=1e-12)


def test_unicode_and_special_ids_end_to_end(tmp_path, capsys):
    q = tmp_path / "q.tsv"
    q.write_text("query-id\tcorpus-id\tscore\nqé #1\tdoc%20a#p9\t1\nqé #1\tdoc%20a#p10\t2\n", encoding="utf-8")
    r = tmp_path / "r.json"
    r.write_text(json.dumps({"qé #1": {"doc%20a#p9": 1.0, "doc%20a#p10": 1.0}}, ensure_ascii=False), encoding="utf-8")
    j = tmp_path / "o.json"
    c = tmp_path / "o.csv"
    rc, _, _ = run_cli(capsys, "metrics", str(q), str(r), "-m", "ndcg@1", "--json", str(j), "--per-query", str(c))
    assert rc == 0
    # tie -> "p9" ranks before "p10"; grade 1 at rank 1 vs ideal grade 2
    assert json.loads(j.read_text(encoding="utf-8"))["per_query"] == {"qé #1": {"ndcg@1": 0.5}}
    assert list(csv.reader(c.open(encoding="utf-8", newline=""))) == [["query-id", "ndcg@1"], ["qé #1", "0.5"]]


def test_duplicate_run_lines_warn_on_stderr(tmp_path, capsys):
    q, r = _trec_files(tmp_path, "a 0 d1 1\n", "a Q0 d1 1 0.1 t\na Q0 d1 2 0.9 t\n")
    rc, out, err = run_cli(capsys, "metrics", q, r, "-m", "mrr")
    assert rc == 0
    assert "warning:" in err and "1 duplicate" in err
    assert "mrr" in out


# --------------------------------------------------------------------------------------------
# errors


def test_bad_file_exit_2_one_line(tmp_path, capsys):
    bad = tmp_path / "q.trec"
    bad.write_text("q1 0 d1 1\n\nq1 0 d2 1.5\n")
    rc, out, err = run_cli(capsys, "metrics", str(bad), RUN)
    assert rc == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"error: {bad}:3: ")
    assert "'d2'" in lines[0] and "Traceback" not in err


def test_bad_run_file_exit_2(tmp_path, capsys):
    bad = tmp_path / "r.trec"
    bad.write_text("q1 Q0 a 1 0.5 t\nq1 Q0 b 2 nan t\n")
    rc, _, err = run_cli(capsys, "metrics", QRELS, str(bad))
    assert rc == 2
    assert err.strip().splitlines() == [err.strip()]
    assert err.startswith(f"error: {bad}:2: ") and "'b'" in err


def test_missing_file_exit_2(tmp_path, capsys):
    rc, _, err = run_cli(capsys, "metrics", str(tmp_path / "nope.tsv"), RUN)
    assert rc == 2
    assert err.strip() == f"error: {tmp_path / 'nope.tsv'}: file not found"


def test_unknown_metric_exit_2(capsys):
    rc, out, err = run_cli(capsys, "metrics", QRELS, RUN, "-m", "ndcg@3", "-m", "bogus@3")
    assert rc == 2 and out == ""
    assert len(err.strip().splitlines()) == 1
    assert err.strip() == "error: unknown metric 'bogus@3'; every metric: vdr metrics --list-metrics"
    rc, out, err = run_cli(capsys, "metrics", QRELS, RUN, "--list-metrics")  # the command it names lists them
    assert rc == 0
    for name in ("ndcg", "mrr", "recall", "precision", "hit", "map", "judged", "hole"):
        assert name in out


@pytest.mark.parametrize(
    "args, needle",
    [(["--k", "0"], "cutoffs"), (["--k", "a,b"], "--k"), (["-m", "precision"], "cutoff"), (["-m", "ndcg@0"], "cutoff")],
)
def test_bad_cutoffs_exit_2(capsys, args, needle):
    rc, _, err = run_cli(capsys, "metrics", QRELS, RUN, *args)
    assert rc == 2 and err.startswith("error: ") and needle in err


def test_empty_qrels_exit_2(tmp_path, capsys):
    q = tmp_path / "q.trec"
    q.write_text("")
    rc, _, err = run_cli(capsys, "metrics", str(q), RUN)
    assert rc == 2 and "no queries to evaluate" in err


def test_help_exit_0(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "160")  # at 80 columns rich truncates the long --x/--no-x flag pairs
    rc, out, _ = run_cli(capsys, "metrics", "--help")
    assert rc == 0
    for opt in ("--k", "--metric", "--relevance-level", "--exclude-queries-without", "--json", "--per-query", "--allow-unjudged",
                "--list-metrics"):
        assert opt in out  # rich may truncate the longest option name to fit the terminal
    flat = " ".join(ln.strip(" │") for ln in out.splitlines())
    for pattern in ("ndcg[@k]", "mrr[@k]", "map[@k]", "ties@k"):  # the known metrics come from the registry
        assert pattern in flat


def test_list_metrics_prints_the_registry(capsys):
    from vdr.metrics import METRICS

    rc, out, _ = run_cli(capsys, "metrics", "--list-metrics")  # no QRELS/RUN needed
    assert rc == 0
    for fam in METRICS.values():
        assert f"{fam.pattern}  (also: " in out and fam.reference in out
    assert "hit@k  (also: hit_at_k, success@k, hit_rate@k)" in out


# --------------------------------------------------------------------------------------------
# the ecosystem's names, empty judgment sets, id mismatches (issues 14.4, 13.2, 13.3)


def test_ecosystem_metric_names(tmp_path, capsys):
    p = tmp_path / "r.json"
    names = ["P@5", "R@10", "RR@10", "AP", "Success@3", "ndcg_at_3", "recall_at_10", "hit_rate@5", "map@10", "Judged@3", "nDCG@3"]
    args = [x for n in names for x in ("-m", n)]
    rc, out, err = run_cli(capsys, "metrics", QRELS, RUN, *args, "--json", str(p))
    assert rc == 0 and err == SAMPLE_JOIN_WARNING
    agg = json.loads(p.read_text())["aggregate"]
    # canonical names only, the duplicates (ndcg_at_3 = nDCG@3, R@10 = recall_at_10) once
    assert list(agg) == ["precision@5", "recall@10", "mrr@10", "map", "hit@3", "ndcg@3", "hit@5", "map@10", "judged_ret@3"]  # Judged@3 is ir_measures' (issue 25.1)
    assert agg["ndcg@3"] == pytest.approx(NDCG3, abs=1e-12) and agg["precision@5"] == pytest.approx(PRECISION5, abs=1e-12)
    assert agg["recall@10"] == pytest.approx(RECALL10, abs=1e-12) and agg["map@10"] == pytest.approx(MAP10, abs=1e-12)
    assert agg["mrr@10"] == pytest.approx(MRR3, abs=1e-12)  # every first relevant page is within rank 3
    assert out.splitlines()[0].split()[0] == "metric" and "precision" in out and "P@5" not in out


def test_unknown_metric_did_you_mean_cli(capsys):
    rc, out, err = run_cli(capsys, "metrics", QRELS, RUN, "-m", "hits@10")
    assert rc == 2 and out == ""
    # one line: the closest spelling and where every metric is listed (no 700-character list)
    assert err.strip() == "error: unknown metric 'hits@10' (did you mean 'hit@10'?); every metric: vdr metrics --list-metrics"
    rc, out, err = run_cli(capsys, "metrics", QRELS, RUN, "-m", "ndcg3")  # glued cutoff: the name at that cutoff
    assert rc == 2 and err.strip() == "error: unknown metric 'ndcg3' (did you mean 'ndcg@3'?); every metric: vdr metrics --list-metrics"


def test_empty_judgment_set_cli(tmp_path, capsys):
    q = tmp_path / "qrels.json"
    q.write_text('{"q1": {"d1": 0, "d2": 1}, "q2": {}}')
    r = tmp_path / "run.trec"
    r.write_text("q1 Q0 d1 1 0.9 t\nq1 Q0 d2 2 0.8 t\n")
    j = tmp_path / "o.json"
    rc, out, err = run_cli(capsys, "metrics", str(q), str(r), "-m", "ndcg@3", "--json", str(j))
    assert rc == 0 and err == ""
    data = json.loads(j.read_text())
    assert data["num_queries"] == 1 and list(data["per_query"]) == ["q1"]
    assert round(data["aggregate"]["ndcg@3"], 4) == 0.6309 and data["aggregate"]["ndcg@3"] == pytest.approx(1 / L2(3), abs=1e-15)
    assert data["policy"]["queries_skipped_no_judgments"] == ["q2"]
    assert "1 query averaged" in out and "queries with an empty judgment set skipped (not averaged): 1 ('q2')" in out
    assert out.splitlines()[1].split() == ["ndcg", "0.6309"]


def _mismatch(tmp_path: Path) -> tuple[str, str]:
    return _trec_files(tmp_path, "q1 0 p01 1\n", "q1 Q0 p1 1 0.9 t\n")


def test_id_mismatch_exit_2(tmp_path, capsys):
    q, r = _mismatch(tmp_path)
    rc, out, err = run_cli(capsys, "metrics", q, r)
    assert rc == 2 and out == ""  # issue 34.1: p1 / p01 are a likely pair, named
    assert len(err.strip().splitlines()) == 1 and err.startswith("error: 1 corpus ids of the run 't' match corpus ids of the qrels")
    assert "'q1: p1' (run 't') ~ 'q1: p01' (qrels) [zero padding]" in err and "--allow-id-mismatch" in err
    q, r = _trec_files(tmp_path, "q1 0 doc-1 1\n", "q1 Q0 p1 1 0.9 t\n")  # no partner: the judged-overlap rule
    rc, out, err = run_cli(capsys, "metrics", q, r)
    assert rc == 2 and len(err.strip().splitlines()) == 1 and err.startswith("error: no retrieved page of any query")
    assert "run ids ['p1'], qrels ids ['doc-1']" in err and "--allow-unjudged" in err


def test_id_mismatch_allowed(tmp_path, capsys):
    q, r = _mismatch(tmp_path)
    j = tmp_path / "o.json"
    rc, out, err = run_cli(capsys, "metrics", q, r, "-m", "ndcg@3", "--allow-unjudged", "--allow-id-mismatch", "--json", str(j))
    assert rc == 0
    pair, err = err.strip().split("\n")
    assert pair.startswith("warning: 1 corpus ids of the run 't' match") and pair.endswith("(--allow-id-mismatch: evaluated as written)")
    assert err.strip() == ("warning: 1 of 1 queries of run 't' retrieved only pages without a qrels line ('q1'): they score 0 on every"
                           " metric; 0 queries retrieved a judged page where a random ranking of the same depth would give about 0.5:"
                           " the run's ids may differ in format from the qrels' for some pages")
    data = json.loads(j.read_text())
    assert data["aggregate"]["ndcg@3"] == 0.0 and data["policy"]["queries_all_unjudged"] == ["q1"]
    assert "queries whose retrieved pages all lack a qrels line: 1 ('q1')" in out


# --------------------------------------------------------------------------------------------
# real processes


def _env() -> dict:
    env = dict(os.environ)
    env.pop("PYTHONWARNINGS", None)
    return env


def test_console_script_subprocess(tmp_path):
    exe = BIN / "vdr"
    assert exe.exists()
    j = tmp_path / "o.json"
    p = subprocess.run([str(exe), "metrics", QRELS, RUN, "--json", str(j)], capture_output=True, text=True, cwd=tmp_path, env=_env(), timeout=600)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[0].split() == ["metric", "@1", "@3", "@5", "@10"]
    assert json.loads(j.read_text())["aggregate"]["ndcg@3"] == pytest.approx(NDCG3, abs=1e-12)
    bad = tmp_path / "bad.tsv"
    bad.write_text("q1\td1\t1\n")
    p = subprocess.run([str(exe), "metrics", str(bad), RUN], capture_output=True, text=True, env=_env(), timeout=600)
    assert p.returncode == 2
    assert "Traceback" not in p.stderr
    assert p.stderr.strip().splitlines() == [p.stderr.strip()]
    assert p.stderr.startswith(f"error: {bad}:1: ")


def test_python_m_vdr(tmp_path):
    p = subprocess.run(
        [sys.executable, "-m", "vdr", "metrics", QRELS, RUN, "-m", "ndcg@3", "-m", "map@10"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=_env(),
        timeout=60,
    )
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].split() == ["metric", "@3", "@10"]
    assert lines[1].split() == ["ndcg", f"{NDCG3:.4f}"]
    assert lines[2].split() == ["map", f"{MAP10:.4f}"]


def test_python_m_vdr_writes_and_exit_codes(tmp_path):
    """``python -m vdr`` goes through ``entry`` (gc frozen before shutdown): files written, statuses kept."""
    j = tmp_path / "o.json"
    p = subprocess.run([sys.executable, "-m", "vdr", "metrics", QRELS, RUN, "-m", "ndcg@3", "--json", str(j)],
                       capture_output=True, text=True, env=_env(), timeout=600)
    assert p.returncode == 0, p.stderr
    assert json.loads(j.read_text())["aggregate"]["ndcg@3"] == pytest.approx(NDCG3, abs=1e-12)
    bad = tmp_path / "bad.tsv"
    bad.write_text("q1\td1\t1\n")
    p = subprocess.run([sys.executable, "-m", "vdr", "metrics", str(bad), RUN], capture_output=True, text=True, env=_env(), timeout=600)
    assert (p.returncode, p.stderr.startswith(f"error: {bad}:1: ")) == (2, True)
    p = subprocess.run([sys.executable, "-m", "vdr", "metrics", QRELS], capture_output=True, text=True, env=_env(), timeout=600)
    assert p.returncode == 2 and "Traceback" not in p.stderr


@pytest.mark.parametrize("outcome", [0, 3, "raise"])
def test_entry_freezes_gc_on_every_exit_path(monkeypatch, outcome):
    import gc

    import vdr.cli.root as cli

    def fake_main():
        assert gc.isenabled()  # the command itself runs with the collector on
        if outcome == "raise":
            raise RuntimeError("boom")
        return outcome

    monkeypatch.setattr(cli, "main", fake_main)
    try:
        with pytest.raises(RuntimeError if outcome == "raise" else SystemExit) as e:
            cli.entry()
        assert (gc.isenabled(), gc.get_freeze_count() > 0) == (False, True)
        if outcome != "raise":
            assert e.value.code == outcome
    finally:
        gc.unfreeze()
        gc.enable()


# --------------------------------------------------------------------------------------------
# regressions: bugs found by adversarial testing, now fixed



@pytest.mark.parametrize("args", [["metrics"], ["metrics", QRELS, RUN, "--bogus"], ["metrics", QRELS, RUN, "--relevance-level", "x"]])
def test_usage_errors_exit_2_without_traceback(capsys, args):
    rc = main(args)
    assert rc == 2
    assert "Traceback" not in capsys.readouterr().err


def test_no_arguments_shows_help():
    p = subprocess.run([str(BIN / "vdr")], capture_output=True, text=True, env=_env(), timeout=600)
    assert "Traceback" not in p.stderr
    assert "metrics" in p.stdout + p.stderr


def test_unwritable_output_is_a_one_line_error(tmp_path, capsys):
    rc = main(["metrics", QRELS, RUN, "--json", str(tmp_path)])  # a folder where a file is expected
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("error: ") and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_swapped_arguments_get_a_hint(capsys):
    assert main(["metrics", RUN, QRELS]) == 2
    assert "swapped" in capsys.readouterr().err


def test_outputs_get_the_default_file_mode(tmp_path):
    old = os.umask(0o022)
    try:
        assert main(["metrics", QRELS, RUN, "--json", str(tmp_path / "m.json")]) == 0
    finally:
        os.umask(old)
    assert (tmp_path / "m.json").stat().st_mode & 0o777 == 0o644
