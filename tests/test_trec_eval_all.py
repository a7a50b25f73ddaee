"""Issue 25.3: trec_eval 10's whole ``-m all_trec``, checked against trec_eval's own test outputs
(``../shared/trec_eval_ref``: trec_eval 10.0, commit f4253652, folder ``test/``): every value of
``out.test.aq``, ``.aqc``, ``.aqcM`` and ``.aql`` within 5e-5 (trec_eval prints 4 decimals), and
``vdr metrics ... -m all_trec --format trec_eval -Q`` printing the same lines as trec_eval.

How the lines are compared: both outputs are split into ``(measure, query, value)`` lines; the
sequence of ``(measure, query)`` keys must be the same, in the same order (vdr prints trec_eval's
order), each value equal -- numbers within 5e-5 (counts and strings exactly) -- and the padded
name column byte-identical."""

from __future__ import annotations

import json
import warnings

import pytest
from cli_helpers import cli
from shared_data import shared_path

import vdr
from vdr.metrics import evaluate_run
from vdr.metrics.registry import TREC_NICKNAMES
from vdr.metrics.trec_eval import relstrings, trec_eval_name

SHARED = shared_path("trec_eval_ref")
TOL = 5e-5

# expected output, qrels, run, -l, -M, relstring length (the commands are in ../shared/trec_eval_ref/README.md)
CASES = [
    ("out.test.aq", "qrels.test", "results.test", 1, None, 10),
    ("out.test.aqc", "qrels.test", "results.trunc", 1, None, 10),
    ("out.test.aqcM", "qrels.test", "results.trunc", 1, 100, 10),
    ("out.test.aql", "qrels.rel_level", "results.test", 2, None, 20),
]
# the same runs through the command line: trec_eval's flags as vdr metrics spells them
CLI_ARGS = {
    "out.test.aq": [],
    "out.test.aqc": ["-c"],
    "out.test.aqcM": ["-c", "-M", "100"],
    "out.test.aql": ["-l", "2", "-m", "relstring.20"],
}


def _lines(text: str) -> list[tuple[str, str, str]]:
    """``(padded measure column, query, value)`` per line of trec_eval's output."""
    out = []
    for line in text.splitlines():
        name, q, v = line.split("\t")
        out.append((name, q, v))
    return out


def _load_run(name: str, depth: int | None) -> vdr.Run:
    with warnings.catch_warnings():  # results.trunc has text after the tag on some lines (ignored, as trec_eval does)
        warnings.simplefilter("ignore")
        run = vdr.load_run(SHARED / name)
    return run if depth is None else run.top_k(depth)


def _same_value(want: str, got: str) -> bool:
    if want.startswith("'") or not want.replace(".", "", 1).lstrip("-").isdigit():
        return want == got  # relstring, runid
    if "." not in want:
        return got == want  # counts print as integers
    return abs(float(want) - float(got)) <= TOL


@pytest.mark.crosscheck
@pytest.mark.shared("trec_eval_ref")
@pytest.mark.parametrize("expected, qrels_file, run_file, level, depth, rel_len", CASES)
def test_every_value_of_all_trec(expected, qrels_file, run_file, level, depth, rel_len):
    ref = _lines((SHARED / expected).read_text())
    qrels, run = vdr.load_qrels(SHARED / qrels_file), _load_run(run_file, depth)
    res = evaluate_run(qrels, run, ["all_trec"], relevance_level=level)  # -c: every qrels query (302 is missing from results.trunc)
    ours = {}
    for n, v in res.values.items():
        name = trec_eval_name(n)[1]
        ours.update({(name, q): float(x) for q, x in zip(res.query_ids, v)})
        ours[(name, "all")] = res.aggregate[n]
    rel = relstrings(qrels, run, res.query_ids, rel_len)
    checked, measures = 0, set()
    for col, q, v in ref:
        m = col.strip()
        measures.add(m)
        if m == "runid":
            assert q == "all" and v == run.name == "STANDARD"
        elif m.startswith("relstring"):
            assert m == ("relstring" if rel_len == 10 else f"relstring_{rel_len}") and v == f"'{rel[q]}'", (m, q)
        else:
            assert ours[(m, q)] == pytest.approx(float(v), abs=TOL), (expected, m, q)
        checked += 1
    assert checked == len(ref) == 387  # 95 measures x (3 queries + all), relstring x 3, runid, num_q, gm_map, gm_bpref
    # every metric of vdr's all_trec is one of trec_eval's measures in the file, and every numeric one is covered
    assert {trec_eval_name(m)[1] for m in TREC_NICKNAMES["all_trec"]} == measures - {"runid", "relstring", "relstring_20"}
    assert len(measures) == 100


@pytest.mark.crosscheck
@pytest.mark.shared("trec_eval_ref")
@pytest.mark.parametrize("expected, qrels_file, run_file, level, depth, rel_len", CASES)
def test_format_trec_eval_prints_trec_evals_lines(capsys, expected, qrels_file, run_file, level, depth, rel_len):
    rc, out, err = cli(capsys, "metrics", SHARED / qrels_file, SHARED / run_file, "-m", "all_trec", "--format", "trec_eval",
                       "-Q", *CLI_ARGS[expected])
    assert rc == 0, err
    want, got = _lines((SHARED / expected).read_text()), _lines(out)
    assert [(n, q) for n, q, _ in got] == [(n, q) for n, q, _ in want]  # names padded as trec_eval, same order
    bad = [(n.strip(), q, w, g) for (n, q, w), (_, _, g) in zip(want, got) if not _same_value(w, g)]
    assert not bad, bad[:5]
    assert len(got) == 387


@pytest.mark.crosscheck
@pytest.mark.shared("trec_eval_ref")
def test_without_c_the_queries_of_both_files_are_averaged(capsys):
    """trec_eval's -c: without it, the queries of both the qrels and the run (trec_eval's help); the
    `all` line then averages 301 and 303 of results.trunc, each value as in out.test.aqc's per-query lines."""
    rc, out, _ = cli(capsys, "metrics", SHARED / "qrels.test", SHARED / "results.trunc", "-m", "all_trec", "--format", "trec_eval")
    assert rc == 0
    got = {n.strip(): v for n, q, v in _lines(out)}
    ref = {(n.strip(), q): v for n, q, v in _lines((SHARED / "out.test.aqc").read_text())}
    assert got["num_q"] == "2" and got["num_ret"] == str(int(ref[("num_ret", "301")]) + int(ref[("num_ret", "303")]))
    for m in ("map", "P_10", "ndcg", "Rndcg", "set_F", "rbp", "unj_20", "Rprec_mult_0.60"):
        assert float(got[m]) == pytest.approx((float(ref[(m, "301")]) + float(ref[(m, "303")])) / 2, abs=1e-4), m
    # with -c the missing query 302 counts 0: the all line of out.test.aqc
    rc, out, _ = cli(capsys, "metrics", SHARED / "qrels.test", SHARED / "results.trunc", "-m", "map", "-m", "gm_map",
                     "--format", "trec_eval", "-c")
    got = {n.strip(): v for n, q, v in _lines(out)}
    assert got["map"] == ref[("map", "all")] and got["gm_map"] == ref[("gm_map", "all")]


@pytest.mark.crosscheck
@pytest.mark.shared("trec_eval_ref")
def test_all_trec_in_the_table_and_json(capsys, tmp_path):
    """-m all_trec in vdr's own table and JSON: the same numbers under vdr's names (runid and relstring,
    not numbers, only in --format trec_eval)."""
    rc, out, _ = cli(capsys, "metrics", SHARED / "qrels.test", SHARED / "results.test", "-m", "all_trec", "--json",
                     tmp_path / "r.json")
    assert rc == 0
    data = json.loads((tmp_path / "r.json").read_text())
    agg = data["aggregate"]
    assert len(agg) == 98 and agg["num_q"] == 3 and agg["rbp_graded"] == pytest.approx(0.3234, abs=TOL)
    assert agg["gm_map"] == pytest.approx(0.1051, abs=TOL) and agg["rprec_mult_0.20"] == pytest.approx(0.3445, abs=TOL)
    assert "rbp_graded" in out and "num_q 3" in out
    rc, _, err = cli(capsys, "metrics", SHARED / "qrels.test", SHARED / "results.test", "-m", "relstring")
    assert rc == 2 and "--format trec_eval" in err
