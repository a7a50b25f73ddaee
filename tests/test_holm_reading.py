"""Statistics as read (issue 35 item 7).

* A verdict that Holm's correction alone makes "not significant" (unadjusted p <= alpha < Holm p;
  its uncorrected 95% CI excludes 0) names the correction: "not significant after Holm over N tests
  (p ...; unadjusted p ..., α ...)"; a note under the table counts such rows.
* A group in which no query has a relevant page is not tested, is left out of the Holm family and is
  named in one line under the group table.

Data: six queries with one relevant page each. ``base`` ranks it second, ``x`` first, so the
per-query change is the same positive number on every query, for P@1 (1) and nDCG@10
(1 - 1/log2(3)). The exact sign-flip test (2^6 sign vectors, enumerated here) gives 2/2^6 = 1/32
for both metrics. Holm over the two metrics (Holm 1979: the k-th smallest of N p-values is
multiplied by N - k + 1, then made monotone): max(2 x 1/32, 1 x 1/32) = 1/16 > 0.05.
"""

from __future__ import annotations

import itertools
from fractions import Fraction
from types import SimpleNamespace

import numpy as np
import pytest

import vdr
from vdr.results import holm_decided_note, holm_reason
from vdr.stats import compare_arrays, compare_groups, holm_adjust, untested_groups

IDS = [f"q{i}" for i in range(1, 9)]
NONE = ("q7", "q8")  # no relevant page


def _holm(ps: list[Fraction]) -> list[Fraction]:
    """Holm's step-down adjustment in exact arithmetic (Holm 1979)."""
    order = sorted(range(len(ps)), key=lambda i: ps[i])
    out, running = [Fraction(0)] * len(ps), Fraction(0)
    for k, i in enumerate(order):
        running = max(running, min(Fraction(1), (len(ps) - k) * ps[i]))
        out[i] = running
    return out


def _exact_p(d: list[float]) -> Fraction:
    obs = abs(sum(d))
    hits = sum(1 for s in itertools.product((1, -1), repeat=len(d)) if abs(sum(a * b for a, b in zip(s, d))) >= obs - 1e-12)
    return Fraction(hits, 2 ** len(d))


def test_the_verdict_names_the_correction_when_it_alone_decides():
    d = [1.0] * 6
    p = _exact_p(d)
    assert p == Fraction(1, 32)
    adj = _holm([p, p])
    assert adj == [Fraction(1, 16)] * 2
    comps = holm_adjust([compare_arrays(np.zeros(6), np.ones(6), "p@1", variant="x"),
                         compare_arrays(np.zeros(6), np.full(6, 0.5), "ndcg@10", variant="x")])
    assert [c.p_value for c in comps] == [float(p)] * 2 and [c.p_value_holm for c in comps] == [float(a) for a in adj]
    # 1/32 <= 0.05 < 1/16: the correction over the 2 tests decides; the CI [+1, +1] excludes 0
    assert comps[0].ci95 == (1.0, 1.0)
    assert holm_reason(comps[0], 0.05) == " over 2 tests (p 0.06; unadjusted p 0.03, \u03b1 0.05)"
    assert holm_decided_note(comps, 0.05) == ("2 changes with p (perm) <= 0.05 are not significant after Holm over 2 tests:"
                                              " the correction, not the data, decides them (the 95% CI is not corrected).")
    # at alpha 0.1 both are significant; at 0.01 the unadjusted test alone already says no: no reason added
    assert holm_reason(comps[0], 0.1) == " (p 0.06, \u03b1 0.1)" and holm_decided_note(comps, 0.1) == ""
    assert holm_reason(comps[0], 0.01) == " (p 0.06, \u03b1 0.01)" and holm_decided_note(comps, 0.01) == ""


def _compare(tmp_path, **kw):
    """base ranks the relevant page second, x first; q7 and q8 (type "none") have no relevant page."""
    qrels = {q: ({f"rel-{q}": 1, f"junk-{q}": 0} if q not in NONE else {f"junk-{q}": 0}) for q in IDS}
    runs = {"base": {q: {f"junk-{q}": 2.0, f"rel-{q}": 1.0} for q in IDS},
            "x": {q: {f"rel-{q}": 2.0, f"junk-{q}": 1.0} for q in IDS}}
    groups = tmp_path / "groups.tsv"
    groups.write_text("".join(f"{q}\ttype\t{'none' if q in NONE else 'a' if q in ('q1', 'q2', 'q3') else 'b'}\n" for q in IDS),
                      encoding="utf-8")
    return vdr.compare(qrels, runs, groups=groups, group_by=["type"], **kw)


def test_groups_without_a_relevant_page_are_apart_and_out_of_the_family(tmp_path):
    res = _compare(tmp_path, metrics=["P@1"])
    assert res.queries_without_relevant() == ["q7", "q8"]
    assert res.untested_groups("type") == {"none": 2}
    grouped = res.grouped("type")
    assert [g.group for g in grouped] == ["a", "b"]
    # within a: 3 queries each +1 -> exact p 2/2^3 = 1/4; b likewise; Holm over these 2 tests only (1/2 each)
    ps = [_exact_p([1.0] * 3), _exact_p([1.0] * 3)]
    assert ps == [Fraction(1, 4)] * 2 and _holm(ps) == [Fraction(1, 2)] * 2
    assert [g.comparison.p_value for g in grouped] == [float(x) for x in ps]
    assert [g.comparison.p_value_holm for g in grouped] == [float(x) for x in _holm(ps)]
    assert all(g.comparison.holm_family == ("type=a/x:precision@1", "type=b/x:precision@1") for g in grouped)
    text = res.group_table("type").to_text()
    assert not [ln for ln in text.splitlines() if ln.startswith("none ")]
    assert ("Not compared: group none (2 queries): no query in it has a relevant page, so every run scores 0 there;"
            " left out of the Holm family.") in text
    assert "Not compared: group none (2 queries)" in res.group_matrix("type").to_text()


def test_untested_groups_and_compare_groups_without_a_list():
    values = {"q1": "a", "q2": ["a", "none"], "q3": "none", "q4": "none"}
    # q2 has a relevant page: group none holds q2, so it is tested; with q2 also lacking one, none is apart
    assert untested_groups(["q1", "q2", "q3", "q4"], values, {"q3", "q4"}) == {}
    assert untested_groups(["q1", "q2", "q3", "q4"], values, {"q2", "q3", "q4"}) == {"none": 3}
    assert untested_groups(["q1", "q2"], values, ()) == {}
    ids = ("q1", "q2", "q3", "q4")
    res = {"b": {"original": SimpleNamespace(query_ids=ids, values={"m": np.array([0.0, 0.0, 0.0, 0.0])}),
                 "v": SimpleNamespace(query_ids=ids, values={"m": np.array([1.0, 1.0, 0.0, 0.0])})}}
    out = compare_groups(res, {"t": values}, "m", no_relevant={"q2", "q3", "q4"})
    assert [g.group for g in out] == ["a"] and out[0].comparison.holm_family == ("t=a/v:m",)
    assert [g.group for g in compare_groups(res, {"t": values}, "m")] == ["a", "none"]



def test_compare_default_family_is_the_primary_metric_over_the_comparisons_made(tmp_path):
    """x vs base on P@1 and nDCG@10: the same exact p 2/2^6 = 1/32 for both (6 queries gain, the 2
    without a relevant page do not change and cannot flip). The default family (the primary metric
    over the comparisons made) holds 1 test, so Holm p = 1/32 <= 0.05: a significant gain; with
    ``family="all"`` it holds 2 (Holm p 1/16 > 0.05) and the verdict names the correction."""
    p = _exact_p([1.0] * 6 + [0.0] * 2)
    assert p == Fraction(1, 32)
    res = _compare(tmp_path, metrics=["P@1", "nDCG@10"])
    c = res.comparison("runs", "x")
    assert res.config["family"] == "primary" and c.holm_family == ("x:precision@1",) and c.p_value == c.p_value_holm == float(p)
    assert res.comparison("runs", "x", "ndcg@10").holm_family == ("x:ndcg@10",)
    v = res.verdicts()
    assert len(v) == 1 and v[0].startswith("x vs base (baseline): +0.750 P@1 [95% CI ")
    assert v[0].endswith(", significant gain after Holm (p 0.03, \u03b1 0.05)")
    assert ("p (Holm): Holm-corrected over the 1 test (runs x precision@1); each other metric (ndcg@10) its own family"
            " (--family all: one over every metric)") in res.table()
    every = _compare(tmp_path, metrics=["P@1", "nDCG@10"], family="all")
    ce = every.comparison("runs", "x")
    assert ce.holm_family == ("x:precision@1", "x:ndcg@10") and ce.p_value_holm == float(_holm([p, p])[0]) == 1 / 16
    assert every.verdicts()[0].endswith(", not significant after Holm over 2 tests (p 0.06; unadjusted p 0.03, \u03b1 0.05)")
    assert "p (Holm): Holm-corrected over the 2 tests (runs x precision@1, ndcg@10);" in every.table()
    with pytest.raises(vdr.InputError, match="--family must be 'primary'"):
        _compare(tmp_path, family="every")


def test_cli_family_flag(tmp_path, capsys):
    """``vdr compare --family all`` equals ``vdr.compare(family="all")``; an unknown value is a usage error."""
    from cli_helpers import cli

    qrels = tmp_path / "qrels.txt"
    qrels.write_text("".join(f"{q} 0 rel-{q} 1\n{q} 0 junk-{q} 0\n" for q in IDS[:6]), encoding="utf-8")
    for name, first in (("base", "junk"), ("x", "rel")):
        other = "rel" if first == "junk" else "junk"
        (tmp_path / f"{name}.trec").write_text("".join(f"{q} Q0 {first}-{q} 1 2.0 {name}\n{q} Q0 {other}-{q} 2 1.0 {name}\n"
                                                       for q in IDS[:6]), encoding="utf-8")
    runs = [tmp_path / "base.trec", tmp_path / "x.trec"]
    rc, out, err = cli(capsys, "compare", qrels, *runs, "-m", "P@1", "-m", "nDCG@10", "--family", "all")
    assert rc == 0, err
    assert "x vs base (baseline): +1.000 P@1 [95% CI +1.000, +1.000], not significant after Holm over 2 tests" \
           " (p 0.06; unadjusted p 0.03, \u03b1 0.05)" in out
    rc, out, err = cli(capsys, "compare", qrels, *runs, "-m", "P@1", "-m", "nDCG@10")
    assert rc == 0 and "significant gain after Holm (p 0.03, \u03b1 0.05)" in out
    rc, _, err = cli(capsys, "compare", qrels, *runs, "--family", "some")
    assert rc == 2 and "some" in err
