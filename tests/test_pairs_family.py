"""``vdr compare --pairs all`` (issue 34 item 12): significant results among any pair are in the
verdicts, and one family definition gives one Holm p per test, the same in every table, with the
family stated once.

Ten queries, one relevant page each; P@1 is 1 when a system ranks it first. ``base`` finds it for
q01-q05, ``x`` for all ten, ``y`` for none. Exact sign-flip p-values (all 2^n sign vectors,
computed here by enumeration): x vs base, 5 wins of 10 -> 2/2^5 = 1/16; y vs base, 5 losses -> 1/16;
y vs x, 10 losses -> 2/2^10 = 1/512. Holm over the 3 pair tests, checked against statsmodels'
``multipletests(method="holm")``: 3/512, then max(3/512, 2 x 1/16) = 1/8, then max(1/8, 1/16) = 1/8.
So only y vs x is significant at 0.05: before, it was in the third table only.
"""

from __future__ import annotations

import itertools
import json
from fractions import Fraction

import pytest

import vdr
from cli_helpers import cli
from vdr.results import Results

IDS = [f"q{i:02d}" for i in range(1, 11)]
FOUND = {"base": IDS[:5], "x": IDS, "y": []}


def _files(tmp_path):
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("".join(f"{q} 0 rel-{q} 1\n{q} 0 junk-{q} 0\n" for q in IDS), encoding="utf-8")
    runs = {}
    for name, found in FOUND.items():
        runs[name] = tmp_path / f"{name}.trec"
        runs[name].write_text("".join(f"{q} Q0 {'rel-' if q in found else 'junk-'}{q} 1 1.0 {name}\n" for q in IDS), encoding="utf-8")
    return qrels, runs


def _exact_p(d: list[int]) -> Fraction:
    obs = abs(sum(d))
    return Fraction(sum(1 for s in itertools.product((1, -1), repeat=len(d)) if abs(sum(a * b for a, b in zip(s, d))) >= obs),
                    2 ** len(d))


def _d(a: str, b: str) -> list[int]:
    """Per-query P@1 of ``b`` minus ``a``."""
    return [int(q in FOUND[b]) - int(q in FOUND[a]) for q in IDS]


def test_one_family_one_holm_p_and_the_pair_verdict(tmp_path, capsys):
    qrels, runs = _files(tmp_path)
    out = tmp_path / "cmp"
    rc, stdout, err = cli(capsys, "compare", qrels, *(f"{n}={p}" for n, p in runs.items()), "-m", "P@1", "--pairs", "all",
                          "--out", out)
    assert rc == 0, err
    res = Results.load(out)
    raw = {(v, b): _exact_p(_d(b, v)) for b, v in (("base", "x"), ("base", "y"), ("x", "y"))}
    assert raw == {("x", "base"): Fraction(1, 16), ("y", "base"): Fraction(1, 16), ("y", "x"): Fraction(1, 512)}
    pytest.importorskip("statsmodels")
    from statsmodels.stats.multitest import multipletests

    keys = list(raw)
    holm = dict(zip(keys, multipletests([float(raw[k]) for k in keys], method="holm")[1]))
    assert holm == pytest.approx({("x", "base"): 1 / 8, ("y", "base"): 1 / 8, ("y", "x"): 3 / 512}, abs=1e-15)
    pairs = {(c.variant, c.baseline): c for c in res.pairwise}
    assert {k: c.p_value for k, c in pairs.items()} == {k: float(v) for k, v in raw.items()}
    assert {k: c.p_value_holm for k, c in pairs.items()} == pytest.approx(holm, abs=1e-15)
    # the tests against the baseline are pairs of the same family: the same p, the same family, in results.json too
    for _, c in res.comparisons:
        pc = pairs[c.variant, "base"]
        assert (c.p_value, c.p_value_holm, c.holm_family) == (pc.p_value, pc.p_value_holm, pc.holm_family)
    doc = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert {c["variant"]: c["p_value_holm"] for c in doc["comparisons"]} == {"x": 0.125, "y": 0.125}
    # the verdicts: each system against the baseline, then the significant pair without it
    verdicts = res.verdicts()
    assert verdicts[0].startswith("x vs base (baseline): +0.500 P@1 [95% CI ") and "not significant after Holm (p 0.12," in verdicts[0]  # 0.125, half-even
    assert verdicts[2] == ("y vs x: -1.000 P@1 [95% CI -1.000, -1.000], significant loss after Holm (p 0.006, \u03b1 0.05)")
    assert len(verdicts) == 3
    assert verdicts[2] in stdout
    # one Holm p per test in every table, the family stated once
    summary = res.summary_table()
    pw = res.pairwise_table()
    h_sum = {r[0]: r[summary.columns.index("p (Holm)")] for r in summary.rows if r[0] != "base"}
    h_pw = {(r[0], r[1]): r[pw.columns.index("p (Holm)")] for r in pw.rows}
    assert h_sum == {"x": "0.1250", "y": "0.1250"} and h_pw == {("x", "base"): "0.1250", ("y", "base"): "0.1250", ("y", "x"): "0.0059"}
    family = "Holm-corrected over the 3 tests of one family: every pair of the 3 systems (3 pairs, the baseline's included) x precision@1"
    assert stdout.count(family) == 1 and stdout.count("tests of one family") == 1
    assert res.pairs_table().sups[1][2] == "c"  # x (b) is significantly better than y (c)
    html = (out / "report.html").read_text(encoding="utf-8")
    assert '<li class="loss">\u25bc y vs x: -1.000 P@1 [95% CI -1.000, -1.000], significant loss after Holm (p 0.006, \u03b1 0.05)</li>' in html
    assert html.count("tests of one family") == 1


def test_without_pairs_the_family_is_the_baseline_tests(tmp_path):
    qrels, runs = _files(tmp_path)
    res = vdr.compare(qrels, runs, metrics=["P@1"])
    assert res.pairwise == [] and [c.holm_family for _, c in res.comparisons] == [("x:precision@1", "y:precision@1")] * 2
    assert [c.p_value_holm for _, c in res.comparisons] == [0.125, 0.125]  # Holm of 1/16, 1/16 over 2 tests
    assert res.pair_verdicts() == [] and len(res.verdicts()) == 2


def test_no_significant_pair_is_counted_in_one_sentence(tmp_path):
    qrels, runs = _files(tmp_path)
    res = vdr.compare(qrels, runs, metrics=["P@1"], pairs="all", alpha=0.001)
    assert res.pair_verdicts() == [("1 pair of systems without the baseline: not significant after Holm (\u03b1 0.001; every pair:"
                                    " the pairwise table)", "ns")]
