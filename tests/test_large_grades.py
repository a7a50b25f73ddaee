"""Large grades (issue 34.4): nDCG's exponential gain 2^g - 1 is computed exactly for any grade
vdr reads (scaled per query by a power of two, which cancels in the ratio), never NaN; a grade
outside the 64-bit range is refused with one line naming file, line and ids, never a traceback."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

import vdr
from cli_helpers import cli
from vdr.errors import InputError
from vdr.metrics import evaluate_run

RUN = {"q1": {"b": 3.0, "a": 2.0, "c": 1.0}}  # ranks: b 1, a 2, c 3


def _exact_ndcg_exp(ga: int, gb: int, gc: int) -> float:
    """DCG/IDCG@3 of the ranking b, a, c with gains 2^g - 1 in exact rational arithmetic, every gain
    divided by 2^top (top = the highest grade; the factor cancels in the ratio); the discounts
    1/log2(r + 1) are the float64 values both sides use. Past 2000 bits a term 2^(g - top) or
    2^-top is dropped: it changes the ratio by less than 2^-2000 relative, far below float64's 2^-53."""
    d = [Fraction(1), Fraction(1 / math.log2(3)), Fraction(1 / math.log2(4))]
    top = max(ga, gb, gc)

    def pow2(e: int) -> Fraction:
        return Fraction(2) ** e if e > -2000 else Fraction(0)

    gain = {k: pow2(g - top) - pow2(-top) for k, g in (("a", ga), ("b", gb), ("c", gc))}
    dcg = gain["b"] * d[0] + gain["a"] * d[1] + gain["c"] * d[2]
    ideal = sorted(gain.values(), reverse=True)
    return float(dcg / sum(g * w for g, w in zip(ideal, d)))


@pytest.mark.parametrize("ga, gb, gc", [(3, 2, 1), (10, 9, 1), (60, 59, 1), (1023, 1022, 1), (1100, 1099, 1), (5000, 4000, 3),
                                        (2**40, 2**40 - 1, 1), (2**62, 2**62 - 1, 1), (2**63 - 1, 2**63 - 2, 1)])
def test_exponential_gain_is_exact_for_any_grade(ga, gb, gc):
    r = evaluate_run({"q1": {"a": ga, "b": gb, "c": gc}}, RUN, ["ndcg_exp@3", "ndcg_exp", "ndcg@3"])
    v = r.aggregate["ndcg_exp@3"]
    assert math.isfinite(v) and v == pytest.approx(_exact_ndcg_exp(ga, gb, gc), rel=1e-14)
    assert r.aggregate["ndcg_exp"] == v and math.isfinite(r.aggregate["ndcg@3"])


def test_small_grades_unchanged_bit_for_bit():
    """Below 1024 the scaled gains are the unscaled ones times a power of two: the same bits."""
    for ga, gb in ((2, 1), (3, 3), (7, 0)):
        qrels = {"q1": {"a": ga, "b": gb, "c": 1}}
        got = evaluate_run(qrels, RUN, ["ndcg_exp@3"]).aggregate["ndcg_exp@3"]
        g = {d: 2.0 ** v - 1.0 for d, v in qrels["q1"].items()}
        dcg = g["b"] / math.log2(2) + g["a"] / math.log2(3) + g["c"] / math.log2(4)
        ideal = sorted(g.values(), reverse=True)
        assert got == pytest.approx(dcg / sum(x / math.log2(i + 2) for i, x in enumerate(ideal)), rel=1e-15)


@pytest.mark.parametrize("grade", [2**63, 2**64, -(2**63) - 1, 10**30])
def test_grade_past_int64_is_one_line(tmp_path, capsys, grade):
    q, r = tmp_path / "q.txt", tmp_path / "r.trec"
    q.write_text(f"q1 0 b 1\nq1 0 a {grade}\n")
    r.write_text("q1 Q0 a 1 2.0 t\n")
    rc, out, err = cli(capsys, "metrics", q, r, "-m", "ndcg_exp@3")
    assert rc == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert f"{q}:2: grade" in err and "corpus id 'a' is outside the 64-bit range" in err
    with pytest.raises(InputError, match="outside the 64-bit range"):  # in-memory qrels too
        evaluate_run({"q1": {"a": grade}}, {"q1": {"a": 1.0}}, ["ndcg_exp@3"])


def test_large_grade_cli_table_and_json(tmp_path, capsys):
    import json

    q, r = tmp_path / "q.txt", tmp_path / "r.trec"
    q.write_text("q1 0 a 5000\nq1 0 b 4000\nq1 0 c 3\n")
    r.write_text("q1 Q0 b 1 3.0 t\nq1 Q0 a 2 2.0 t\nq1 Q0 c 3 1.0 t\n")
    rc, out, err = cli(capsys, "metrics", q, r, "-m", "ndcg_exp@3", "--json", tmp_path / "m.json")
    assert rc == 0 and "nan" not in out.lower()
    v = json.loads((tmp_path / "m.json").read_text())["aggregate"]["ndcg_exp@3"]
    assert v == pytest.approx(_exact_ndcg_exp(5000, 4000, 3), rel=1e-14) and f"{v:.4f}" in out
    assert vdr.load_qrels(q).to_dict()["q1"]["a"] == 5000
