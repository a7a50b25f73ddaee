"""Canonical group keys (issue 34 item 9, issue 33 item 4): NFC and NFD spellings of one word are
one group, JSON ``1`` and ``1.0`` are one group, a list value puts its query in each of its groups
(ViDoRe V3's ``query_types``; the footnote says the groups overlap and the Holm family counts each
group's test), a value that cannot be a key (an object) is refused naming file, line and query.

Expected p-values are exact (the two-sided sign-flip test enumerated here over all 2^n sign
vectors with :class:`fractions.Fraction`) and Holm's step-down is written out by hand.
"""

from __future__ import annotations

import itertools
import json
import unicodedata
from fractions import Fraction

import numpy as np
import pytest

import vdr
from cli_helpers import cli
from vdr.errors import InputError
from vdr.io import load_query_fields, read_query_fields
from vdr.metrics import MetricsResult
from vdr.results import Results
from vdr.stats import MISSING_GROUP, compare_groups, group_order, query_groups
from vdr.types import ORIGINAL, Qrels, Run, group_keys

NFC = unicodedata.normalize("NFC", "caf\u00e9")
NFD = unicodedata.normalize("NFD", "caf\u00e9")


def exact_p(d: list[int]) -> Fraction:
    obs = abs(sum(d))
    return Fraction(sum(1 for s in itertools.product((1, -1), repeat=len(d)) if abs(sum(a * b for a, b in zip(s, d))) >= obs),
                    2 ** len(d))


def test_group_keys_matrix():
    assert NFC != NFD and group_keys(NFC) == group_keys(NFD) == ("caf\u00e9",)
    assert group_keys(1) == group_keys(1.0) == group_keys(np.int64(1)) == group_keys(np.float32(1.0)) == ("1",)
    assert group_keys(1.5) == ("1.5",) and group_keys(-0.0) == ("0",) and group_keys(2 ** 70) == (str(2 ** 70),)
    assert group_keys(True) == ("true",) and group_keys(True) != group_keys(1)  # JSON's true is not the number 1
    assert group_keys(["multi-hop", "numerical", "multi-hop"]) == ("multi-hop", "numerical")
    assert group_keys([NFD, NFC, 1, 1.0]) == ("caf\u00e9", "1")
    assert group_keys(None) == group_keys("  ") == group_keys([]) == group_keys([None, ""]) == ()
    for bad, what in (({"a": 1}, "dict"), ([["a"]], "list"), (float("nan"), "finite"), ([{"a": 1}], "dict"), (b"x", "bytes")):
        with pytest.raises(InputError, match=what):
            group_keys(bad)


def _queries(tmp_path, rows: list[dict]):
    p = tmp_path / "queries.jsonl"
    p.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return p


def test_reading_canonical_values_and_refusing_a_dict(tmp_path):
    p = _queries(tmp_path, [
        {"_id": "q1", "text": "a", "lang": NFC, "level": 1, "query_types": ["multi-hop", "numerical"]},
        {"_id": "q2", "text": "b", "lang": NFD, "level": 1.0, "query_types": ["numerical"]},
        {"_id": "q3", "text": "c", "lang": NFC, "level": 2, "query_types": [], "extra": {"nested": True}},
    ])
    fields = load_query_fields(p)
    assert fields == {"q1": {"lang": "caf\u00e9", "level": "1", "query_types": ("multi-hop", "numerical")},
                      "q2": {"lang": "caf\u00e9", "level": "1", "query_types": "numerical"},
                      "q3": {"lang": "caf\u00e9", "level": "2"}}  # an empty list is no value; an ungrouped dict is left out
    assert read_query_fields([p], None, ["lang", "level", "query_types"]) == fields
    with pytest.raises(InputError) as e:
        read_query_fields([p], None, ["extra"])
    assert str(e.value).startswith(f"{p}:3: ") and "'q3'" in str(e.value) and "dict" in str(e.value)
    g = tmp_path / "groups.tsv"
    g.write_text(f"q1\tlang\t{NFD}\nq2\tlang\t{NFC}\n", encoding="utf-8")
    assert {q: f["lang"] for q, f in read_query_fields([], g, ["lang"]).items()} == {"q1": "caf\u00e9", "q2": "caf\u00e9"}


IDS = ("q1", "q2", "q3", "q4", "q5", "q6")
# differences (variant - original), all +1 or -1 so that each group's exact p is easy to enumerate
D = {"q1": 1, "q2": 1, "q3": 1, "q4": 1, "q5": -1, "q6": 1}
TYPES = {"q1": ["multi-hop", "numerical"], "q2": ["multi-hop"], "q3": ["numerical", "multi-hop"], "q4": "multi-hop",
         "q5": ["numerical"], "q6": None}


def test_overlapping_groups_membership_tests_and_holm():
    member = query_groups(IDS, TYPES)
    assert member == {"q1": ("multi-hop", "numerical"), "q2": ("multi-hop",), "q3": ("numerical", "multi-hop"),
                      "q4": ("multi-hop",), "q5": ("numerical",), "q6": (MISSING_GROUP,)}
    assert group_order(IDS, TYPES) == ["multi-hop", "numerical", MISSING_GROUP]
    base = np.zeros(len(IDS))
    var = np.array([float(D[q]) for q in IDS])
    out = compare_groups({"runs": {ORIGINAL: MetricsResult(IDS, {"p@1": base}, {}), "sys": MetricsResult(IDS, {"p@1": var}, {})}},
                         {"query_types": TYPES}, "p@1", n_bootstrap=200)
    got = {g.group: g.comparison for g in out}
    assert list(got) == ["multi-hop", "numerical", MISSING_GROUP]
    groups = {"multi-hop": ["q1", "q2", "q3", "q4"], "numerical": ["q1", "q3", "q5"], MISSING_GROUP: ["q6"]}
    raw = {k: exact_p([D[q] for q in qs]) for k, qs in groups.items()}
    assert raw == {"multi-hop": Fraction(2, 16), "numerical": Fraction(8, 8), MISSING_GROUP: Fraction(2, 2)}
    for k, qs in groups.items():
        assert got[k].n_queries == len(qs) and got[k].p_value == float(raw[k])
        assert got[k].delta == pytest.approx(sum(D[q] for q in qs) / len(qs))
    # Holm over the 3 group tests (each group counted once, q1 and q3 in two of them): sorted 1/8, 1, 1
    # -> 3 x 1/8 = 3/8, then max(3/8, 2 x 1) -> 1, 1
    assert [got[k].p_value_holm for k in groups] == [3 / 8, 1.0, 1.0]
    assert len(got["multi-hop"].holm_family) == 3


def test_numbers_by_value_make_one_group():
    vals = {"q1": 1, "q2": 1.0, "q3": "1", "q4": 2, "q5": 2.0, "q6": NFD}
    assert group_order(IDS, vals) == ["1", "2", "caf\u00e9"]
    with pytest.raises(InputError, match="query 'q2'.*dict"):
        group_order(IDS, {"q1": "a", "q2": {"x": 1}})


QRELS = {f"q{i}": {f"d{i}": 1} for i in range(1, 7)}


def test_compare_group_by_list_field_cli(tmp_path, capsys):
    """``vdr compare --group-by query_types`` on a queries file whose field is a list, in ViDoRe V3's
    spelling: every group's n, the overlap footnote, the family size, and results.json."""
    q = _queries(tmp_path, [{"_id": k, "text": f"text {k}", "query_types": v, "lang": NFC if k < "q4" else NFD}
                            for k, v in TYPES.items()])
    qrels = tmp_path / "qrels.tsv"
    qrels.write_text("query-id\tcorpus-id\tscore\n" + "".join(f"{k}\t{d}\t1\n" for k, v in QRELS.items() for d in v), encoding="utf-8")
    base = tmp_path / "base.trec"
    # P@1: the baseline finds the relevant page first only for q5, the system for every query but q5: d as in D
    base.write_text("".join(f"{k} Q0 x{k} 1 2.0 base\n{k} Q0 d{k[1:]} 2 1.0 base\n" if D[k] > 0 else f"{k} Q0 d{k[1:]} 1 2.0 base\n"
                            for k in QRELS), encoding="utf-8")
    sys_ = tmp_path / "sys.trec"
    sys_.write_text("".join(f"{k} Q0 d{k[1:]} 1 2.0 sys\n" if D[k] > 0 else f"{k} Q0 x{k} 1 2.0 sys\n" for k in QRELS), encoding="utf-8")
    out = tmp_path / "cmp"
    rc, stdout, err = cli(capsys, "compare", qrels, base, sys_, "-m", "P@1", "--queries", q, "--group-by", "query_types",
                          "--group-by", "lang", "--out", out, "--no-report")
    assert rc == 0, err
    res = Results.load(out)
    rows = {r["group"]: r for r in res.group_rows("query_types")}
    assert {k: r["n_queries"] for k, r in rows.items()} == {"multi-hop": 4, "numerical": 3, MISSING_GROUP: 1}
    assert res.values("runs", "sys", "precision@1").tolist() == [1.0, 1.0, 1.0, 1.0, 0.0, 1.0]
    assert res.values("runs", "base", "precision@1").tolist() == [0.0, 0.0, 0.0, 0.0, 1.0, 0.0]
    assert [rows[k]["p_value"] for k in ("multi-hop", "numerical", MISSING_GROUP)] == [2 / 16, 1.0, 1.0]
    assert [rows[k]["p_value_holm"] for k in ("multi-hop", "numerical", MISSING_GROUP)] == [3 / 8, 1.0, 1.0]
    assert [r["n_queries"] for r in res.group_rows("lang")] == [6]  # NFC and NFD spellings: one group of 6
    notes = res.group_table("query_types").notes
    assert ("The groups overlap: 2 of 6 queries have several values of 'query_types' (a list) and count in each of their groups;"
            " the groups' sizes add up to more than the queries, and Holm counts each group's test.") in notes
    assert "Holm-corrected over the 3 tests (groups x systems)" in notes[0]
    assert not any("overlap" in n for n in res.group_table("lang").notes)
    doc = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert doc["query_fields"]["q1"]["query_types"] == ["multi-hop", "numerical"] and doc["query_fields"]["q4"]["lang"] == "caf\u00e9"
    assert res.query_fields["q1"]["query_types"] == ("multi-hop", "numerical")
    df = res.to_pandas()
    assert df.loc[df.query_id == "q1", "query_types"].iloc[0] == ["multi-hop", "numerical"]
    bad = _queries(tmp_path, [{"_id": "q1", "text": "a", "query_types": {"kind": "x"}}])
    rc, _, err = cli(capsys, "compare", qrels, base, sys_, "--queries", bad, "--group-by", "query_types")
    assert rc == 2 and f"{bad}:1: " in err and "'q1'" in err and "dict" in err and "Traceback" not in err


def test_api_compare_accepts_raw_values():
    qrels = Qrels(QRELS)
    runs = {"base": Run({k: {f"x{k}": 2.0, f"d{k[1:]}": 1.0} if D[k] > 0 else {f"d{k[1:]}": 2.0} for k in QRELS}),
            "sys": Run({k: ({f"d{k[1:]}": 2.0} if D[k] > 0 else {f"x{k}": 2.0}) for k in QRELS})}
    res = vdr.compare(qrels, runs, metrics=["P@1"])
    res.query_fields = {q: {"query_types": v} for q, v in TYPES.items() if v is not None}
    rows = res.group_rows("query_types")
    assert [(r["group"], r["n_queries"], r["delta"]) for r in rows] == [("multi-hop", 4, 1.0), ("numerical", 3, 1 / 3),
                                                                        (MISSING_GROUP, 1, 1.0)]
