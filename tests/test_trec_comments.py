"""trec_eval 10's input rule (issue 25.2): a qrels or run line whose FIRST character is ``#`` is a
comment, skipped and counted (trec_eval's own test file ``qrels.test.with-comments`` has one); a
``#`` anywhere else is an ordinary character of an id (``doc.pdf#3``)."""

from __future__ import annotations

import logging

import pytest

import vdr
from vdr.errors import InputError

QRELS = "q1 0 a.pdf#1 1\nq1 0 a.pdf#2 0\nq2 0 b.pdf#1 2\n"
RUN = "q1 Q0 a.pdf#1 1 3.5 sys\nq1 Q0 a.pdf#2 2 1.0 sys\nq2 Q0 b.pdf#1 1 2.0 sys\nq2 Q0 a.pdf#1 2 0.5 sys\n"


@pytest.mark.parametrize("comments", [
    "# trec_eval test qrels, with a comment line\n",
    "#\n#another\n",
    "#q9 0 x 1\n",  # a commented-out judgment is not read
])
def test_qrels_comment_lines_are_skipped_and_counted(tmp_path, caplog, comments):
    plain, commented = tmp_path / "plain.txt", tmp_path / "commented.txt"
    plain.write_text(QRELS)
    lines = QRELS.splitlines(keepends=True)
    commented.write_text(comments + lines[0] + comments + "".join(lines[1:]) + comments)
    with caplog.at_level(logging.INFO, logger="vdr"):
        got = vdr.load_qrels(commented)
    assert got.to_dict() == vdr.load_qrels(plain).to_dict() == {"q1": {"a.pdf#1": 1, "a.pdf#2": 0}, "q2": {"b.pdf#1": 2}}
    n = 3 * comments.count("\n")
    assert f"skipped {n} comment line(s)" in caplog.text


def test_run_comment_lines_are_skipped_and_metrics_unchanged(tmp_path, caplog):
    (tmp_path / "qrels.txt").write_text(QRELS)
    (tmp_path / "plain.trec").write_text(RUN)
    (tmp_path / "commented.trec").write_text("# run written by a tool that comments\n" + RUN.replace("\nq2", "\n#q2 Q0 zz 9 9.9 sys\nq2", 1))
    with caplog.at_level(logging.INFO, logger="vdr"):
        run = vdr.load_run(tmp_path / "commented.trec")
    assert "skipped 2 comment line(s)" in caplog.text
    assert run.to_dict() == vdr.load_run(tmp_path / "plain.trec").to_dict()
    assert "zz" not in {d for docs in run.to_dict().values() for d in docs}
    qrels = vdr.load_qrels(tmp_path / "qrels.txt")
    a, b = vdr.metrics(qrels, run, metric_names=["ndcg@3"]), vdr.metrics(qrels, vdr.load_run(tmp_path / "plain.trec"), metric_names=["ndcg@3"])
    assert a.aggregate["ndcg@3"] == b.aggregate["ndcg@3"] == pytest.approx(1.0)


def test_hash_inside_a_line_is_not_a_comment(tmp_path):
    """Only column 0 counts: a line with leading blanks then '#' is parsed (and refused when malformed),
    and '#' inside ids keeps working."""
    p = tmp_path / "qrels.txt"
    p.write_text("q#1 0 doc#1 1\n")
    assert vdr.load_qrels(p).to_dict() == {"q#1": {"doc#1": 1}}
    p.write_text("q1 0 d1 1\n  # not a comment in trec_eval\n")
    with pytest.raises(InputError, match=":2: expected 4"):
        vdr.load_qrels(p)


# ---------------------------------------------------------------- issue 34.3: visible, counted, CR-only line ends


@pytest.mark.parametrize("text, lines", [
    ("#q1 Q0 a.pdf#1 1 3.5 sys\n" + RUN, [1]),
    (RUN.replace("q2 Q0 b.pdf#1", "#q2 Q0 b.pdf#1"), [3]),
    ("# header\n" + RUN + "#tail\n#\n", [1, 6, 7]),
])
def test_dropped_hash_lines_warn_with_line_numbers_and_count_in_the_policy(tmp_path, text, lines):
    (tmp_path / "qrels.txt").write_text(QRELS)
    (tmp_path / "run.trec").write_text(text)
    with pytest.warns(vdr.errors.VdrWarning, match=rf"skipped {len(lines)} comment line\(s\) .*\(line {', '.join(map(str, lines))}\)"):
        run = vdr.load_run(tmp_path / "run.trec")
    assert run.comment_lines == tuple(lines) and run.renamed("x").comment_lines == tuple(lines) and run.top_k(1).comment_lines == tuple(lines)
    pol = vdr.metrics(vdr.load_qrels(tmp_path / "qrels.txt"), run, metric_names=["ndcg@3"]).policy["comment_lines"]
    assert pol["run"] == len(lines) and pol["run_lines"] == lines and pol["qrels"] == 0


def test_hash_lines_of_qrels_counted_in_cli_json_and_visible(tmp_path, capsys):
    from cli_helpers import cli

    (tmp_path / "qrels.txt").write_text("#q0 0 a.pdf#1 1\n" + QRELS)
    (tmp_path / "run.trec").write_text(RUN)
    rc, out, err = cli(capsys, "metrics", tmp_path / "qrels.txt", tmp_path / "run.trec", "-m", "ndcg@3", "--json", tmp_path / "m.json")
    assert rc == 0 and "skipped 1 comment line(s)" in err and "(line 1)" in err
    import json

    assert json.loads((tmp_path / "m.json").read_text())["policy"]["comment_lines"]["qrels_lines"] == [1]


@pytest.mark.parametrize("sep", ["\r", "\r\n", "\n"])
def test_cr_only_line_ends_are_line_breaks(tmp_path, sep):
    """A run saved with CR-only line ends (MarkPflug/Sylvan#198) is read record by record: the values
    equal the LF file's, pytrec_eval's on the same records (ndcg@3 of q1 = 1, q2 = 1, q3 = 0 here)."""
    pytrec_eval = pytest.importorskip("pytrec_eval")
    qrels = {"q1": {"a": 2, "b": 1}, "q2": {"c": 1}, "q3": {"d": 1}}
    run = {"q1": {"a": 3.0, "b": 2.0}, "q2": {"c": 1.0}, "q3": {"x": 1.0}}
    (tmp_path / "q.txt").write_bytes(sep.join(f"{q} 0 {d} {g}" for q, ds in qrels.items() for d, g in ds.items()).encode() + sep.encode())
    (tmp_path / "r.trec").write_bytes(sep.join(f"{q} Q0 {d} 1 {s} t" for q, ds in run.items() for d, s in ds.items()).encode())
    import warnings

    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        got_q, got_r = vdr.load_qrels(tmp_path / "q.txt"), vdr.load_run(tmp_path / "r.trec")
    assert got_q.to_dict() == qrels and got_r.to_dict() == run
    cr = [str(x.message) for x in w if "lone CR" in str(x.message)]
    assert cr == ([f"{tmp_path / 'q.txt'}: 4 line end(s) are a lone CR (classic Mac OS), the first ending line 1: read as line breaks",
                   f"{tmp_path / 'r.trec'}: 3 line end(s) are a lone CR (classic Mac OS), the first ending line 1: read as line breaks"]
                  if sep == "\r" else [])
    ref = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut_3"}).evaluate(run)
    res = vdr.metrics(got_q, got_r, metric_names=["ndcg@3"])
    assert res.aggregate["ndcg@3"] == pytest.approx(sum(v["ndcg_cut_3"] for v in ref.values()) / 3, abs=1e-12) == pytest.approx(2 / 3)


def test_cr_only_queries_jsonl(tmp_path):
    p = tmp_path / "queries.jsonl"
    p.write_bytes(b'{"_id": "q1", "text": "a"}\r{"_id": "q2", "text": "b"}\r')
    with pytest.warns(vdr.errors.VdrWarning, match="2 line end"):
        qs = vdr.load_queries(p)
    assert list(qs.ids()) == ["q1", "q2"]
