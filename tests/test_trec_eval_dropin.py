"""Issue 34, items 10 and 11: vdr as a drop-in for trec_eval and ir_measures.

Every expected line below was printed by trec_eval 10.0 itself (built from github.com/usnistgov/trec_eval,
commit f4253652, ``make``; the command is written beside each case), or computed by ir_measures 0.4.3 --
never derived from their documentation. The small inputs are built here; the larger ones are trec_eval's
own test inputs in ``../shared/trec_eval_ref`` (those tests skip when it is absent).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from cli_helpers import cli
from shared_data import shared_path

from vdr.errors import InputError
from vdr.io.formats import load_qrels, load_run
from vdr.metrics import evaluate_run, parse_metric, parse_metrics
from vdr.metrics.registry import Metric

SHARED = shared_path("trec_eval_ref")


def _write(tmp_path: Path, qrels: list[str], run: list[str]) -> tuple[Path, Path]:
    q, r = tmp_path / "qrels.txt", tmp_path / "run.txt"
    q.write_text("\n".join(qrels) + "\n")
    r.write_text("\n".join(run) + "\n")
    return q, r


def _half_way_files(tmp_path: Path) -> tuple[Path, Path]:
    """3 queries, one relevant page each at rank 2, 20 and 32 of 40: every interpolated precision of a query
    is 1/rank, and their mean (1/2 + 1/20 + 1/32) / 3 = 0.19375 sits on a 5th-decimal tie."""
    qrels, run = [], []
    for q, r in (("q1", 2), ("q2", 20), ("q3", 32)):
        qrels += [f"{q} 0 rel{q} 1", f"{q} 0 non{q} 0"]
        run += [f"{q} Q0 {'rel' + q if i == r else f'd{i}'} {i} {100 - i} half" for i in range(1, 41)]
    return _write(tmp_path, qrels, run)


# set precision a/b per query (a relevant among b retrieved): the mean 0.20875 is a 5th-decimal tie that a
# pairwise sum (numpy's mean) rounds up and trec_eval's query-by-query sum rounds down
TIE_SET_P = [(2, 5), (3, 8), (3, 125), (6, 80), (0, 20), (0, 160), (3, 80), (2, 2), (2, 125), (4, 25)]


def _tie_files(tmp_path: Path) -> tuple[Path, Path]:
    qrels, run = [], []
    for i, (a, b) in enumerate(TIE_SET_P):
        q = f"q{i:02d}"
        qrels.append(f"{q} 0 missing 1")
        qrels += [f"{q} 0 d{j} 1" for j in range(a)]
        run += [f"{q} Q0 d{j} {j + 1} {1000 - j} tie" for j in range(b)]
    return _write(tmp_path, qrels, run)


def _trec(capsys, *args) -> list[str]:
    code, out, err = cli(capsys, "metrics", *map(str, args), "--format", "trec_eval")
    assert code == 0, err
    return out.splitlines()


def test_iprec_half_way_points_as_trec_eval(tmp_path, capsys):
    """Item 10: trec_eval -m iprec_at_recall.0.5 -m 11pt_avg -m map QRELS RUN prints 0.1938 three times; the
    running maximum's float offset used to make 1/2 a hair smaller and print 0.1937."""
    q, r = _half_way_files(tmp_path)
    assert _trec(capsys, q, r, "-m", "iprec_at_recall.0.5", "-m", "11pt_avg", "-m", "map") == [
        "map                   \tall\t0.1938",
        "iprec_at_recall_0.50  \tall\t0.1938",
        "11pt_avg              \tall\t0.1938",
    ]
    res = evaluate_run(load_qrels(q), load_run(r), ["iprec_at_recall_0.00", "iprec_at_recall_1.00"])
    # each query's value is exactly 1/rank (no offset left in it)
    assert res.values["iprec_at_recall_0.00"].tolist() == [1 / 2, 1 / 20, 1 / 32]
    assert res.values["iprec_at_recall_1.00"].tolist() == [1 / 2, 1 / 20, 1 / 32]


def test_all_line_adds_queries_in_order(tmp_path, capsys):
    """Item 11: trec_eval -m set_P QRELS RUN prints 0.2087 (numpy's pairwise mean gives 0.20875000000000005)."""
    q, r = _tie_files(tmp_path)
    assert _trec(capsys, q, r, "-m", "set_P") == ["set_P                 \tall\t0.2087"]
    res = evaluate_run(load_qrels(q), load_run(r), ["set_p"])
    acc = 0.0
    for a, b in TIE_SET_P:
        acc += a / b
    assert res.aggregate["set_p"] == acc / len(TIE_SET_P) == 0.20875


def test_set_f_parameter_is_beta(tmp_path, capsys):
    """Item 11: set_F.x is trec_eval's beta, (x + 1) P R / (x P + R), as ir_measures' SetF(beta=x).
    trec_eval -m set_F.2 / -m set_F.0.5 / -m set_F QRELS RUN (one call each) printed these."""
    q, r = _tie_files(tmp_path)
    assert _trec(capsys, q, r, "-m", "set_F.2") == ["set_F_2               \tall\t0.2608"]
    assert _trec(capsys, q, r, "-m", "set_F.0.5") == ["set_F_0.5             \tall\t0.2209"]
    assert _trec(capsys, q, r, "-m", "set_F") == ["set_F                 \tall\t0.2354"]
    assert _trec(capsys, q, r, "-m", "SetF(beta=2)") == ["set_F_2               \tall\t0.2608"]
    # the formula on one query: 2 relevant retrieved of 5, 3 relevant in all: P = 0.4, R = 2/3
    one = evaluate_run({"q": {"a": 1, "b": 1, "c": 1}}, {"q": {"a": 5.0, "b": 4.0, "x": 3.0, "y": 2.0, "z": 1.0}},
                       ["set_F.2", "set_f", "set_f@2"])
    P, R = 0.4, 2 / 3
    assert one.aggregate["set_f(beta=2)"] == pytest.approx(3 * P * R / (2 * P + R))
    assert one.aggregate["set_f"] == pytest.approx(2 * P * R / (P + R))
    # vdr's own set_f@2 is a cutoff: the top 2 (a, b: both relevant) give P = 1, R = 2/3, F1 = 0.8
    assert one.aggregate["set_f@2"] == pytest.approx(2 * 1.0 * (2 / 3) / (1.0 + 2 / 3)) == pytest.approx(0.8)


@pytest.mark.skipif(SHARED is None, reason="../shared/trec_eval_ref (trec_eval's test inputs) is absent")
@pytest.mark.parametrize("spelling, expected", [
    # trec_eval 10.0: trec_eval -m SPELLING qrels.test results.test
    ("set_F.2", ["set_F_2               \tall\t0.1447"]),
    ("set_F.0.5", ["set_F_0.5             \tall\t0.1045"]),
    ("iprec_at_recall..25", ["iprec_at_recall_0.25  \tall\t0.3018"]),
    ("Rprec_mult.2", ["Rprec_mult_2.00       \tall\t0.1369"]),
    ("ndcg_cut.23.4", ["ndcg_cut_23           \tall\t0.3429"]),
    ("P.5.5", ["P_5                   \tall\t0.2667"]),
    ("rbp.p=0.95", ["rbp_p=0.95            \tall\t0.3202"]),
    ("P.10,5", ["P_5                   \tall\t0.2667", "P_10                  \tall\t0.3000"]),
    ("iprec_at_recall.0.5", ["iprec_at_recall_0.50  \tall\t0.2184"]),
    ("Rprec_mult.0.5,1.5", ["Rprec_mult_0.50       \tall\t0.2983", "Rprec_mult_1.50       \tall\t0.1568"]),
    ("success.1,5", ["success_1             \tall\t0.3333", "success_5             \tall\t0.3333"]),
    # ir_measures 0.4.3 spellings of the same measures (ir_measures.calc_aggregate gave the same values)
    ("SetF(beta=2)", ["set_F_2               \tall\t0.1447"]),
    ("SetF(beta=0.5)", ["set_F_0.5             \tall\t0.1045"]),
    ("IPrec@0.5", ["iprec_at_recall_0.50  \tall\t0.2184"]),
    ("P_5,10", ["P_5                   \tall\t0.2667", "P_10                  \tall\t0.3000"]),
    ("P(cutoff=5)", ["P_5                   \tall\t0.2667"]),
])
def test_trec_eval_and_ir_measures_spellings(capsys, spelling, expected):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert _trec(capsys, SHARED / "qrels.test", SHARED / "results.test", "-m", spelling) == expected


def test_spellings_parse_to_their_tools_meaning():
    want = {
        "IPrec@0.5": [Metric("iprec_at_recall", p=0.5)], "IPrec(rel=2)@0.25": [Metric("iprec_at_recall", rel=2, p=0.25)],
        "SetRelP": [Metric("set_relative_p")], "Judged": [Metric("judged_ret")], "Judged@10": [Metric("judged_ret", 10)],
        "nDCG(cutoff=10)": [Metric("ndcg", 10)], "P(rel=2,cutoff=5)": [Metric("precision", 5, rel=2)],
        "nDCG(judged_only=False)@10": [Metric("ndcg", 10)], "RBP(p=0.9)": [Metric("rbp", p=0.9)],
        "rbp.p=0.95": [Metric("rbp_graded", p=0.95)], "rbp_resid.p=0.5": [Metric("rbp_resid", p=0.5)],
        "Rprec_mult.2": [Metric("rprec_mult", p=2.0)], "set_F_2": [Metric("set_f", p=2.0)],
        "ndcg_cut_5,10": [Metric("ndcg", 5), Metric("ndcg", 10)], "recall.100,10": [Metric("recall", 10), Metric("recall", 100)],
    }
    for name, metrics in want.items():
        assert parse_metrics(name) == metrics, name


@pytest.mark.parametrize("name, message", [
    ("map.5", "takes no parameter"),  # trec_eval prints map and ignores .5; vdr refuses rather than guess
    ("ndcg.5", "takes no parameter"),  # trec_eval: malformed pair parameters
    ("P.5,5", "duplicate"),  # trec_eval: duplicate cutoffs detected
    ("P.abc", "is not a cutoff"),  # trec_eval: Negative cutoff detected
    ("rbp.0.5", "takes p=X"),  # trec_eval: malformed pair parameters
    ("set_F.1,2", "one parameter, beta"),
    ("SetF(beta=-1)", "beta must be >= 0"),
    ("P(cutoff=5)@10", "cutoff twice"),
    ("nDCG(judged_only=True)@10", "judged_only=True"),
    ("P(gains=2)@5", "not accepted"),
    ("iprec_at_recall.1.5", "recall level must be in"),
])
def test_unknown_parameters_are_refused(name, message):
    with pytest.raises(InputError, match=message):
        parse_metrics(name)


def test_set_f_name_round_trips():
    assert str(parse_metric("set_F.0.5")) == "set_f(beta=0.5)" and parse_metric("set_f(beta=0.5)") == Metric("set_f", p=0.5)
    assert parse_metric("SetF(beta=1)") == parse_metric("set_F.1") == Metric("set_f")


def test_runid_is_the_last_lines_tag(tmp_path, capsys):
    """trec_eval -m runid -m P.1 QRELS RUN prints 'runid all second' (the tag of the run's last line)."""
    q, r = _write(tmp_path, ["q1 0 a 1", "q2 0 b 1"], ["q1 Q0 a 1 2.0 first", "q2 Q0 b 1 2.0 second"])
    assert _trec(capsys, q, r, "-m", "runid", "-m", "P.1") == ["runid                 \tall\tsecond",
                                                             "P_1                   \tall\t1.0000"]


def test_cutoffs_print_sorted(tmp_path, capsys):
    """trec_eval sorts a measure's cutoffs (-m P.10,5 prints P_5 then P_10, above). Given two -m for one measure,
    trec_eval 10.0 keeps the first only (-m P.10 -m ndcg_cut.3 -m P.5 prints P_10 and ndcg_cut_3); vdr prints
    every cutoff asked for, sorted (a deliberate difference: nothing asked for is dropped)."""
    q, r = _write(tmp_path, ["q1 0 a 1"], ["q1 Q0 a 1 2.0 t"])
    names = [ln.split("\t")[0].strip() for ln in _trec(capsys, q, r, "-m", "P.10", "-m", "ndcg_cut.3", "-m", "P.5")]
    assert names == ["P_5", "P_10", "ndcg_cut_3"]


def test_runid_and_relstring_print_only_what_was_asked(tmp_path, capsys):
    """trec_eval -m runid (with or without -q) prints the runid line alone; -q -m relstring.2 only the relstring lines;
    -m relstring.2 without -q prints nothing (trec_eval 10.0, on these files)."""
    q, r = _write(tmp_path, ["q1 0 a 1", "q1 0 b 0", "q2 0 c 2"],
                  ["q1 Q0 a 1 3.0 sys", "q1 Q0 x 2 2.0 sys", "q1 Q0 b 3 1.0 sys", "q2 Q0 c 1 1.0 sys"])
    assert _trec(capsys, q, r, "-m", "runid") == ["runid                 \tall\tsys"]
    assert _trec(capsys, q, r, "-m", "runid", "-Q") == ["runid                 \tall\tsys"]
    assert _trec(capsys, q, r, "-m", "relstring.2", "-Q") == ["relstring_2           \tq1\t'1-'",
                                                              "relstring_2           \tq2\t'2'"]
    assert _trec(capsys, q, r, "-m", "relstring.2") == []


@pytest.mark.skipif(SHARED is None, reason="../shared/trec_eval_ref (trec_eval's test inputs) is absent")
def test_relstring_alone_on_trec_eval_inputs(capsys):
    """trec_eval -q -m relstring.5 qrels.test results.test (trec_eval 10.0)."""
    assert _trec(capsys, SHARED / "qrels.test", SHARED / "results.test", "-m", "relstring.5", "-Q") == [
        "relstring_5           \t301\t'00000'", "relstring_5           \t302\t'11011'", "relstring_5           \t303\t'00000'"]


def test_several_runs_in_one_call(tmp_path, capsys):
    q, r1 = _write(tmp_path, ["q1 0 a 1", "q2 0 b 1"], ["q1 Q0 a 1 2.0 one", "q2 Q0 x 1 2.0 one"])
    r2 = tmp_path / "run2.txt"
    r2.write_text("q1 Q0 a 1 2.0 two\nq2 Q0 b 1 2.0 two\n")
    both = _trec(capsys, q, r1, r2, "-m", "runid", "-m", "P.1", "-Q")
    assert both == _trec(capsys, q, r1, "-m", "runid", "-m", "P.1", "-Q") + _trec(capsys, q, r2, "-m", "runid", "-m", "P.1", "-Q")
    assert both[2:4] == ["runid                 \tall\tone", "P_1                   \tall\t0.5000"]
    assert both[-2:] == ["runid                 \tall\ttwo", "P_1                   \tall\t1.0000"]
    code, out, _ = cli(capsys, "metrics", q, r1, r2, "-m", "P@1")
    assert code == 0 and out.index(f"{r1}:") < out.index("0.5000") < out.index(f"{r2}:") < out.index("1.0000")
    code, _, err = cli(capsys, "metrics", q, r1, r2, "--json", tmp_path / "out.json")
    assert code == 2 and "2 runs were given" in err and not (tmp_path / "out.json").exists()


@pytest.mark.skipif(SHARED is None, reason="../shared/trec_eval_ref (trec_eval's test inputs) is absent")
def test_num_rel_with_c_and_l_says_how_it_differs(capsys):
    """trec_eval -c -l 2 -m num_rel qrels.rel_level results.test prints 559 (the qrels' grades > 0, -l ignored);
    trec_eval -l 2 -m num_rel prints 97. vdr prints 97 (the sum of its per-query lines) and says why on stderr."""
    code, out, err = cli(capsys, "metrics", SHARED / "qrels.rel_level", SHARED / "results.test", "-c", "-l", "2",
                         "-m", "num_rel", "--format", "trec_eval")
    assert code == 0 and out.splitlines() == ["num_rel               \tall\t97"]
    assert "trec_eval -c prints the qrels' pages of grade > 0 there, ignoring -l" in err


@pytest.mark.parametrize("text", [
    "q1 Q0 a 1 2.5 t1\nq1 Q0 b 2 1.5 t1\nq2 Q0 a 1 0.5 t2\n",  # plain: read in bulk
    "q1 Q0 a 1 2.5 t1\n\nq2\tQ0  a 1 -3e-2 t2\nq1 Q0 b 2 1 t3",  # blank line, tab, double space, no final newline
    "q1 Q0 a 1 2.5 t1\nq2 Q0 a 1 0.5 t2\nq1 Q0 b 2 1.5 t1\n",  # a query's lines apart
    "q1 Q0 a 1 2.5 t1\r\nq1 Q0 b 2 1.5 t1\r\n",  # CRLF: the line-by-line reader
    "\ufeffq1 Q0 a 1 2.5 t1\n",  # BOM
    "q1 Q0 a 1 2.5 t1\nq1 Q0 a 2 3.5 t1\n",  # duplicate pair: the line-by-line reader keeps 3.5 and warns
    "# comment\nq1 Q0 a 1 2.5 t1\n",  # a comment line: the line-by-line reader
    "q1 Q0 é 1 2.5 t1\n",  # non-ASCII id
    "q1 Q0 a 1 1_0 t1\n",  # a score float() reads but the reader refuses
])
def test_bulk_run_reader_gives_what_the_line_reader_gives(tmp_path, text, monkeypatch):
    from vdr.io import formats

    path = tmp_path / "run.txt"
    path.write_text(text, encoding="utf-8")

    def read():
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            try:
                run = formats.load_run(path)
            except InputError as e:
                return ("error", str(e)), [str(x.message) for x in w]
        return ({q: dict(run[q]) for q in run}, run.name), [str(x.message) for x in w]

    bulk = read()
    monkeypatch.setattr(formats, "_plain_trec_run", lambda p: None)
    assert bulk == read()


def test_bulk_reader_values(tmp_path):
    from vdr.io import formats

    path = tmp_path / "run.txt"
    path.write_text("q1 Q0 a 1 2.5 t1\n\nq2\tQ0  a 1 -3e-2 t2\nq1 Q0 b 2 1 t3")
    run = formats._plain_trec_run(path)
    assert {q: dict(run[q]) for q in run} == {"q1": {"a": 2.5, "b": 1.0}, "q2": {"a": -0.03}} and run.name == "t3"
    path.write_text("q1 Q0 a 1 2.5 t1\nq1 Q0 a 1 3.5\n")  # 5 fields on a line
    assert formats._plain_trec_run(path) is None
    path.write_text("q1 0 a 1\nq1 0 b 0\nq2 0 c 2\n")
    qrels = formats._plain_trec_qrels(path)
    assert {q: dict(qrels[q]) for q in qrels} == {"q1": {"a": 1, "b": 0}, "q2": {"c": 2}} and qrels == formats.load_qrels(path)
    path.write_text("q1 0 a 1\nq1 0 a 2\n")  # a duplicate judgment: the line reader refuses it, naming both lines
    assert formats._plain_trec_qrels(path) is None
    with pytest.raises(InputError, match="duplicate judgment"):
        formats.load_qrels(path)


@pytest.mark.crosscheck
@pytest.mark.skipif(SHARED is None, reason="../shared/trec_eval_ref (trec_eval's test inputs) is absent")
def test_ir_measures_spellings_against_ir_measures():
    """ir_measures' own values (ir_measures.calc_aggregate; 0.4.3 gave IPrec@0.5 0.21843, SetRelP 0.59971,
    Judged 0.492, SetF(beta=2.0) 0.14472) equal vdr's for the same spellings, on trec_eval's test inputs."""
    ir_measures = pytest.importorskip("ir_measures")
    names = ["IPrec@0.5", "SetRelP", "Judged", "Judged@10", "P(rel=1)@5", "SetF(beta=2.0)", "P(cutoff=5)"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        qrels = list(ir_measures.read_trec_qrels(str(SHARED / "qrels.test")))
        run = list(ir_measures.read_trec_run(str(SHARED / "results.test")))
        agg = ir_measures.calc_aggregate([ir_measures.parse_measure(n) for n in names], qrels, run)
        res = evaluate_run(load_qrels(SHARED / "qrels.test"), load_run(SHARED / "results.test"), names,
                           queries_missing_from_run="exclude")
    for n in names:
        assert res.aggregate[str(parse_metric(n))] == pytest.approx(agg[ir_measures.parse_measure(n)], abs=1e-12), n
    assert res.aggregate["judged_ret"] == pytest.approx(0.492) and res.aggregate["set_f(beta=2)"] == pytest.approx(0.1447165, abs=1e-6)
