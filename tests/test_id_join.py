"""Ids that half-join (issue 34.1): every place where a run meets qrels or queries names the ids
that do not join and their likely partners (vdr.io.idjoin); pairs stop the command (exit 2)
unless --allow-id-mismatch; results.json records the join and never contradicts itself."""

from __future__ import annotations

import json
import unicodedata
import warnings
from pathlib import Path

import pytest

import vdr
from cli_helpers import cli
from rewards_fixtures import make_passages, write_corpus
from vdr.errors import InputError
from vdr.metrics import evaluate_run
from vdr.io.idjoin import IdJoinWarning, IdMismatchError, id_key, join_ids

FAST = ["--backend", "lexical", "-q", "--no-cache"]


# ------------------------------------------------------------------------------------------ the key


@pytest.mark.parametrize("a, b, reason", [
    ("q1", "q01", "zero padding"),
    ("Q7", "q7", "letter case"),
    (" q3 ", "q3", "surrounding whitespace"),
    (unicodedata.normalize("NFD", "résumé#1"), "résumé#1", "Unicode NFC"),
    ("topiocqa-dev_12_3", "12_3", "known prefix"),
    ("QReCC-Test_1_01", "qrecc-test_1_1", "letter case + known prefix + zero padding"),
])
def test_pairs_and_their_reasons(a, b, reason):
    j = join_ids([a, "same"], [b, "same"], what="query ids", left="run", right="qrels")
    assert j.pairs == [(a, b, reason)] and j.only_left == [a] and j.only_right == [b]
    assert id_key(a) == id_key(b)


@pytest.mark.parametrize("a, b", [("q1", "q10"), ("1", "q1"), ("doc-a", "a"), ("q1", "q1x")])
def test_ids_that_differ_otherwise_are_not_paired(a, b):
    j = join_ids([a], [b], what="query ids", left="run", right="qrels")
    assert j.pairs == [] and j.only_left == [a] and j.only_right == [b]
    assert "1 query ids of the run are not in the qrels" in j.unpaired_text()


# ------------------------------------------------------------------------------------------ evaluate_run


def _padded(n: int, n_bad: int):
    """qrels ``q01..qNN`` (``d<i>`` grade 1, ``x<i>`` grade 0); a run ranking d before x, its first
    ``n_bad`` query ids without the zero padding, plus a query ``zz`` the qrels lack."""
    qs = [f"q{i:02d}" for i in range(1, n + 1)]
    qrels = {q: {f"d{q[1:]}": 1, f"x{q[1:]}": 0} for q in qs}
    run = {(f"q{int(q[1:])}" if i < n_bad else q): {f"d{q[1:]}": 2.0, f"x{q[1:]}": 1.0} for i, q in enumerate(qs)}
    run["zz"] = {"d01": 1.0}
    return qrels, run


@pytest.mark.parametrize("n, n_bad", [(12, 3), (42, 9), (5, 1)])
def test_padding_pairs_stop_and_are_named(n, n_bad):
    qrels, run = _padded(n, n_bad)
    with pytest.raises(IdMismatchError, match=rf"{n_bad} query ids of the run match query ids of the qrels only after normalisation"
                       r".*'q1' \(run\) ~ 'q01' \(qrels\) \[zero padding\].*--allow-id-mismatch"):
        evaluate_run(qrels, run, ["ndcg@3"])


@pytest.mark.parametrize("n, n_bad", [(12, 3), (42, 9), (5, 1)])
def test_allowed_pairs_are_evaluated_as_written_and_recorded(n, n_bad):
    """The values are pytrec_eval's on the ids as written; the missing queries score 0 (trec_eval -c):
    the mean is (n - n_bad) / n exactly, and the policy counts and names them."""
    pytrec_eval = pytest.importorskip("pytrec_eval")
    qrels, run = _padded(n, n_bad)
    with pytest.warns(IdJoinWarning) as rec:
        r = evaluate_run(qrels, run, ["ndcg@3"], allow_id_mismatch=True)
    msgs = [str(w.message) for w in rec]
    assert any("evaluated as written" in m for m in msgs) and any("'zz'" in m for m in msgs)
    ref = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut_3"}).evaluate(run)
    assert r.aggregate["ndcg@3"] == pytest.approx(sum(v["ndcg_cut_3"] for q, v in ref.items() if q in qrels) / n, abs=1e-12)
    assert r.aggregate["ndcg@3"] == pytest.approx((n - n_bad) / n, abs=1e-12)
    p = r.policy
    assert p["num_queries_missing_from_run"] == n_bad and p["queries_missing_from_run"] == [f"q{i:02d}" for i in range(1, n_bad + 1)]
    j = p["id_join"]["query_ids"]
    assert j["num_pairs"] == n_bad and j["num_only_right"] == n_bad and j["num_only_left"] == n_bad + 1
    assert j["allow_id_mismatch"] is True and p["allow_id_mismatch"] is True


def test_an_empty_ranking_counts_as_missing():
    r = evaluate_run({"q1": {"a": 1}, "q2": {"b": 1}}, {"q1": {"a": 1.0}, "q2": {}}, ["ndcg@3"])
    assert r.policy["num_queries_missing_from_run"] == 1 and r.policy["queries_missing_from_run"] == ["q2"]
    assert r.aggregate["ndcg@3"] == 0.5


def test_a_run_that_joins_is_silent():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = evaluate_run({"q1": {"a": 1}}, {"q1": {"a": 1.0}}, ["ndcg@3"])
    assert r.policy["id_join"]["query_ids"]["num_only_left"] == 0 and r.policy["id_join"]["query_ids"]["num_pairs"] == 0


# ------------------------------------------------------------------------------------------ CLI: metrics, compare


def _files(tmp_path: Path, n: int = 12, n_bad: int = 3) -> tuple[Path, Path, Path]:
    qrels, run = _padded(n, n_bad)
    qp, rp, r2 = tmp_path / "qrels.trec", tmp_path / "run.trec", tmp_path / "other.trec"
    qp.write_text("".join(f"{q} 0 {d} {g}\n" for q, docs in qrels.items() for d, g in docs.items()), encoding="utf-8")
    rp.write_text("".join(f"{q} Q0 {d} {i + 1} {s} r\n" for q, docs in run.items() for i, (d, s) in enumerate(docs.items())),
                  encoding="utf-8")
    r2.write_text("".join(f"{q} Q0 {d} {i + 1} {s} o\n" for q, docs in qrels.items() for i, (d, s) in enumerate(docs.items())),
                  encoding="utf-8")
    return qp, rp, r2


def test_metrics_cli_stops_then_allows(tmp_path, capsys):
    qp, rp, _ = _files(tmp_path)
    rc, out, err = cli(capsys, "metrics", qp, rp, "-m", "ndcg@3")
    assert rc == 2 and "'q1' (run 'r') ~ 'q01' (qrels) [zero padding]" in err and "Traceback" not in err
    rc, out, err = cli(capsys, "metrics", qp, rp, "-m", "ndcg@3", "--allow-id-mismatch", "--json", tmp_path / "m.json")
    assert rc == 0 and "0.7500" in out and "evaluated as written" in err and "'zz'" in err
    pol = json.loads((tmp_path / "m.json").read_text())["policy"]
    assert pol["num_queries_missing_from_run"] == 3 and pol["id_join"]["query_ids"]["num_pairs"] == 3


def test_compare_cli_stops_then_allows(tmp_path, capsys):
    qp, rp, r2 = _files(tmp_path)
    rc, out, err = cli(capsys, "compare", qp, f"base={r2}", f"padded={rp}", "--permutations", "100", "--bootstrap", "100")
    assert rc == 2 and "run 'padded'" in err and "[zero padding]" in err and "--allow-id-mismatch" in err
    rc, out, err = cli(capsys, "compare", qp, f"base={r2}", f"padded={rp}", "--permutations", "100", "--bootstrap", "100",
                       "--allow-id-mismatch")
    assert rc == 0 and "evaluated as written" in err
    res = vdr.compare(qp, {"base": r2, "padded": rp}, n_permutations=100, n_bootstrap=100, allow_id_mismatch=True)
    assert res.runs[1].metrics.aggregate["ndcg@3"] == pytest.approx(9 / 12, abs=1e-12)


# ------------------------------------------------------------------------------------------ CLI: evaluate


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    texts, queries, qrels = make_passages(n_per_topic=4)
    return write_corpus(tmp_path_factory.mktemp("corpus"), texts, queries, qrels)


def _run_file(folder: Path, pad: set[str]) -> Path:
    """A run ranking each query's grade-2 passage first; the query ids in ``pad`` zero-padded."""
    p = folder / "ext.trec"
    p.write_text("".join(f"{'q0' + str(t) if f'q{t}' in pad else f'q{t}'} Q0 t{t}-p0 1 2.0 ext\n" for t in range(8)), encoding="utf-8")
    return p


def test_evaluate_run_file_pairs_stop(corpus, tmp_path, capsys):
    run = _run_file(tmp_path, {"q1", "q2"})
    rc, _, err = cli(capsys, "evaluate", corpus, *FAST, "--run", f"ext={run}", "--out", tmp_path / "res")
    assert rc == 2 and "'q01' (run file of 'ext') ~ 'q1' (queries) [zero padding]" in err and "Traceback" not in err


def test_evaluate_run_file_allowed_policy_agrees_with_backend_report(corpus, tmp_path, capsys):
    run = _run_file(tmp_path, {"q1", "q2"})
    out = tmp_path / "res"
    rc, _, err = cli(capsys, "evaluate", corpus, *FAST, "--run", f"ext={run}", "--out", out, "--allow-id-mismatch")
    assert rc == 0, err
    assert "evaluated as written" in err
    doc = json.loads((out / "results.json").read_text())
    text = json.dumps(doc)
    assert '"num_queries_missing_from_run": 2' in text
    search = doc["backend_reports"]["ext"]["searches"]["original"]
    assert search["num_queries_missing"] == 2 and search["id_join"]["num_pairs"] == 2


def test_evaluate_queries_and_qrels_pairs_stop(tmp_path, capsys):
    texts, queries, qrels = make_passages(n_per_topic=4)
    qrels = {("Q" + q[1:] if q in ("q1", "q3") else q): d for q, d in qrels.items()}
    folder = write_corpus(tmp_path / "c", texts, queries, qrels)
    rc, _, err = cli(capsys, "evaluate", folder, *FAST, "--out", tmp_path / "res")
    assert rc == 2 and "'q1' (queries) ~ 'Q1' (qrels) [letter case]" in err and "qrels.tsv" in err
    with pytest.raises(InputError, match="2 query ids of the queries match"):
        vdr.evaluate(folder, out=tmp_path / "res2", backends="lexical", progress=False, cache_dir=False)


# ------------------------------------------------------------------------------------------ issue 34.13


@pytest.mark.parametrize("missing, flag", [("qrels.tsv", "--qrels"), ("queries.jsonl", "--queries")])
def test_a_missing_default_file_names_the_option_and_where_vdr_looked(tmp_path, capsys, missing, flag):
    texts, queries, qrels = make_passages(n_per_topic=4)
    folder = write_corpus(tmp_path / "c", texts, queries, qrels)
    for name in ("qrels.tsv", "queries.jsonl"):
        (tmp_path / name).write_bytes((folder / name).read_bytes())
    (folder / missing).unlink()
    given = ["--queries", tmp_path / "queries.jsonl"] if missing == "qrels.tsv" else ["--qrels", tmp_path / "qrels.tsv"]
    rc, _, err = cli(capsys, "evaluate", folder, *FAST, *given, "--out", tmp_path / "res")
    assert rc == 2 and err.count("\n") == 1 and "file not found" not in err
    assert f"error: {flag} is missing: give {flag} FILE (vdr looked for {missing} in the corpus folder {folder} and found none)" in err
    given_too = ["--queries", tmp_path / "queries.jsonl", "--qrels", tmp_path / "qrels.tsv"]
    rc, _, err = cli(capsys, "evaluate", folder, *FAST, *given_too, "--out", tmp_path / "res")
    assert rc == 0, err


@pytest.mark.parametrize("rename, reason", [(lambda q: "q0" + q[1:], "zero padding"), (lambda q: q.upper(), "letter case"),
                                            (lambda q: q + " ", "surrounding whitespace")])
def test_rewrites_name_their_likely_partners(corpus, tmp_path, capsys, rename, reason):
    """A rewrite file must hold the originals' ids exactly (AlignmentError); the ids that match only
    after normalisation are named with their partner."""
    from vdr.io.formats import load_queries, load_rewrites

    originals = load_queries(corpus / "queries.jsonl")
    p = tmp_path / "rw.jsonl"
    p.write_text("".join(json.dumps({"_id": rename(q) if q in ("q1", "q2") else q, "text": "x"}) + "\n" for q in originals.ids()))
    with pytest.raises(InputError, match=rf"2 of them match only after normalisation: '{rename('q1')}' \(variant\) ~ 'q1'"
                                         rf" \(originals\) \[{reason}\]"):
        load_rewrites(p, originals, "rw")
    rc, _, err = cli(capsys, "evaluate", corpus, *FAST, "--rewrites", f"rw={p}", "--out", tmp_path / "res")
    assert rc == 2 and f"[{reason}]" in err and "Traceback" not in err
