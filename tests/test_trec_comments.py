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
