"""Data model: Qrels, Run, Query, QuerySet and id conversion."""

from __future__ import annotations

from types import MappingProxyType

import numpy as np
import pytest

from vdr import InputError, Qrels, Query, QuerySet, Run
from vdr.types import to_id

# --------------------------------------------------------------------------------------------
# ids


@pytest.mark.parametrize(
    "value, expected",
    [
        ("01", "01"),
        ("1", "1"),
        (1, "1"),
        (0, "0"),
        (-3, "-3"),
        (10**30, "1" + "0" * 30),
        (np.int64(7), "7"),
        (np.int32(-2), "-2"),
        (np.uint8(255), "255"),
        (np.uint64(2**64 - 1), "18446744073709551615"),
        ("a b#%é", "a b#%é"),
    ],
)
def test_to_id_accepts_str_and_integers(value, expected):
    out = to_id(value)
    assert out == expected
    assert type(out) is str


@pytest.mark.parametrize("value", [1.0, 1.5, np.float64(1.0), True, False, np.bool_(True), None, b"1", [1], ""])
def test_to_id_rejects_other_types(value):
    with pytest.raises(InputError):
        to_id(value)


def test_to_id_float_message_explains_conversion():
    with pytest.raises(InputError) as ei:
        to_id(1.0, what="query id")
    msg = str(ei.value)
    assert "query id" in msg and "float" in msg and "'1.0'" in msg


def test_ids_01_and_1_are_distinct():
    q = Qrels({"01": {"d": 1}, "1": {"d": 2}})
    assert set(q) == {"01", "1"}
    assert q["01"]["d"] == 1 and q["1"]["d"] == 2
    assert 1 not in q  # no implicit int lookup
    r = Run({"01": {"d": 1.0}, "1": {"d": 2.0}})
    assert r["01"]["d"] == 1.0 and r["1"]["d"] == 2.0


def test_int_and_numpy_ids_are_converted():
    q = Qrels({1: {np.int64(2): 1, 3: 0}, np.int32(5): {"x": 2}})
    assert q.to_dict() == {"1": {"2": 1, "3": 0}, "5": {"x": 2}}
    assert all(type(k) is str for k in q)
    assert all(type(d) is str for k in q for d in q[k])
    r = Run({np.int64(7): {np.int16(3): 0.5}, 8: {9: 1.0}})
    assert r.to_dict() == {"7": {"3": 0.5}, "8": {"9": 1.0}}
    qs = QuerySet({np.int64(4): "four", 5: Query("five")})
    assert list(qs) == ["4", "5"]
    assert qs["4"] == Query("four")


@pytest.mark.parametrize("bad", [1.0, True, None, b"q1", 2.5, np.float32(3)])
@pytest.mark.parametrize("cls", [Qrels, Run])
def test_bad_query_id_types_rejected(cls, bad):
    with pytest.raises(InputError):
        cls({bad: {"d": 1}})


@pytest.mark.parametrize("bad", [1.0, True, None, b"d", ""])
@pytest.mark.parametrize("cls", [Qrels, Run])
def test_bad_corpus_id_types_rejected(cls, bad):
    with pytest.raises(InputError):
        cls({"q": {bad: 1}})


@pytest.mark.parametrize("cls", [Qrels, Run])
def test_ids_colliding_after_conversion_rejected(cls):
    with pytest.raises(InputError, match="twice"):
        cls({1: {"d": 1}, "1": {"d": 1}})
    with pytest.raises(InputError, match="twice"):
        cls({"q": {1: 1, "1": 1}})


def test_queryset_bad_id_rejected():
    with pytest.raises(InputError):
        QuerySet({1.0: "x"})
    with pytest.raises(InputError):
        QuerySet({None: "x"})


# --------------------------------------------------------------------------------------------
# grades


def test_grades_integers_and_integral_floats():
    q = Qrels({"q": {"a": 2, "b": 0, "c": -1, "d": 2.0, "e": np.int64(3), "f": np.float64(-2.0), "g": np.int8(1)}})
    assert q.to_dict() == {"q": {"a": 2, "b": 0, "c": -1, "d": 2, "e": 3, "f": -2, "g": 1}}
    assert all(type(g) is int for g in q["q"].values())


@pytest.mark.parametrize("bad", [1.5, -0.5, float("nan"), float("inf"), "1", None, True, np.bool_(False), np.float64(2.5), [1]])
def test_bad_grades_rejected_naming_ids(bad):
    with pytest.raises(InputError) as ei:
        Qrels({"query-7": {"page-9": bad}})
    msg = str(ei.value)
    assert "'query-7'" in msg and "'page-9'" in msg


# --------------------------------------------------------------------------------------------
# scores


def test_scores_accept_real_numbers():
    r = Run({"q": {"a": 1, "b": 0.5, "c": np.float32(0.25), "d": np.float64(-3.0), "e": np.int64(4), "f": -0.0}})
    assert {d: float(s) for d, s in r["q"].items()} == {"a": 1.0, "b": 0.5, "c": 0.25, "d": -3.0, "e": 4.0, "f": 0.0}


@pytest.mark.parametrize(
    "bad",
    [float("nan"), float("inf"), float("-inf"), np.float64("nan"), np.float32("inf"), "0.5", True, np.bool_(True), None, [0.5]],
)
def test_bad_scores_rejected_naming_ids(bad):
    with pytest.raises(InputError) as ei:
        Run({"qX": {"ok": 1.0, "docY": bad}})
    msg = str(ei.value)
    assert "'qX'" in msg and "'docY'" in msg
    assert ei.value.id == "docY"


def test_nan_among_many_numpy_scores_is_found():
    scores = {f"d{i}": float(i) for i in range(1000)}
    scores["d500"] = float("nan")
    with pytest.raises(InputError, match="'d500'"):
        Run({"q": scores})


# --------------------------------------------------------------------------------------------
# read-only behaviour


def test_qrels_read_only():
    q = Qrels({"q": {"d": 1}})
    with pytest.raises(TypeError):
        q["q2"] = {"d": 1}  # type: ignore[index]
    with pytest.raises(TypeError):
        q["q"]["d"] = 5  # type: ignore[index]
    with pytest.raises(TypeError):
        del q["q"]  # type: ignore[attr-defined]
    with pytest.raises(AttributeError):
        q.new_attribute = 1  # type: ignore[attr-defined]
    assert isinstance(q["q"], MappingProxyType)
    assert q.to_dict() == {"q": {"d": 1}}


def test_run_read_only():
    r = Run({"q": {"d": 1.0}})
    with pytest.raises(TypeError):
        r["q"]["d"] = 2.0  # type: ignore[index]
    with pytest.raises(TypeError):
        r["q"] = {}  # type: ignore[index]
    assert r["q"]["d"] == 1.0


def test_input_dict_mutation_does_not_leak_in():
    src = {"q": {"d": 1}}
    q = Qrels(src)
    src["q"]["d"] = 9
    src["q2"] = {"x": 1}
    assert q.to_dict() == {"q": {"d": 1}}
    rsrc = {"q": {"d": 1.0}}
    r = Run(rsrc)
    rsrc["q"]["d"] = 7.0
    assert r["q"]["d"] == 1.0


def test_to_dict_is_a_deep_copy():
    q = Qrels({"q": {"d": 1}})
    d = q.to_dict()
    d["q"]["d"] = 99
    d["q"]["new"] = 1
    d["other"] = {}
    assert q.to_dict() == {"q": {"d": 1}}
    r = Run({"q": {"d": 0.5}})
    rd = r.to_dict()
    rd["q"]["d"] = -1.0
    assert r["q"]["d"] == 0.5
    assert type(rd) is dict and type(rd["q"]) is dict


def test_queryset_read_only():
    qs = QuerySet.from_texts({"q1": "hello"})
    with pytest.raises(TypeError):
        qs.queries["q2"] = Query("x")  # type: ignore[index]
    with pytest.raises(AttributeError):
        qs.name = "other"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        qs["q1"].text = "changed"  # type: ignore[misc]
    assert qs["q1"].text == "hello"


def test_equality_and_hash():
    assert Qrels({"q": {"d": 1}}) == Qrels({"q": {"d": 1}}, name="other")
    assert Qrels({"q": {"d": 1}}) != Qrels({"q": {"d": 2}})
    assert Run({"q": {"d": 1.0}}) == Run({"q": {"d": 1}})
    # a Qrels never equals a Run, even with the same content
    assert Qrels({"q": {"d": 1}}) != Run({"q": {"d": 1}})
    with pytest.raises(TypeError):
        hash(Qrels({}))
    with pytest.raises(TypeError):
        hash(Run({}))


def test_len_iter_num_entries_repr():
    q = Qrels({"a": {"x": 1, "y": 0}, "b": {"z": -1}}, name="f.tsv")
    assert len(q) == 2 and list(q) == ["a", "b"] and q.num_entries() == 3
    assert repr(q) == "Qrels(2 queries, 3 judgments, 'f.tsv')"
    r = Run({"a": {"x": 1.0}}, name="tag")
    assert repr(r) == "Run(1 queries, 1 scored pages, 'tag')"
    assert "a" in r and "b" not in r
    assert Qrels({}).num_entries() == 0 and len(Run({})) == 0


# --------------------------------------------------------------------------------------------
# ranking


def test_ranked_score_descending():
    r = Run({"q": {"a": 0.1, "b": 0.9, "c": 0.5, "d": -1.0}})
    assert r.ranked("q") == [("b", 0.9), ("c", 0.5), ("a", 0.1), ("d", -1.0)]


def test_ranked_ties_by_corpus_id_descending_byte_order():
    r = Run({"q": {"p10": 1.0, "p9": 1.0, "p1": 1.0, "p2": 2.0}})
    assert [d for d, _ in r.ranked("q")] == ["p2", "p9", "p10", "p1"]


def test_ranked_ties_non_ascii_utf8_byte_order():
    ids = ["z", "é", "\uffff", "\U00010000", "Z", "a#1", "a%20"]
    r = Run({"q": {d: 3.0 for d in ids}})
    got = [d for d, _ in r.ranked("q")]
    assert got == sorted(ids, key=lambda s: s.encode("utf-8"), reverse=True)
    assert got == ["\U00010000", "\uffff", "é", "z", "a%20", "a#1", "Z"]


def test_ranked_negative_zero_ties_with_zero():
    r = Run({"q": {"a": -0.0, "b": 0.0}})
    assert [d for d, _ in r.ranked("q")] == ["b", "a"]


def test_ranked_missing_query_raises_keyerror():
    with pytest.raises(KeyError):
        Run({"q": {"a": 1.0}}).ranked("nope")


def test_top_k():
    r = Run({"q1": {"a": 3.0, "b": 2.0, "c": 2.0, "d": 1.0}, "q2": {"x": 1.0}}, name="t")
    t = r.top_k(2)
    assert isinstance(t, Run)
    assert t.name == "t"
    assert t.to_dict() == {"q1": {"a": 3.0, "c": 2.0}, "q2": {"x": 1.0}}
    assert t.ranked("q1") == [("a", 3.0), ("c", 2.0)]
    assert r.top_k(10) == r
    assert r.num_entries() == 5  # the original is untouched
    with pytest.raises(ValueError):
        r.top_k(0)


# --------------------------------------------------------------------------------------------
# QuerySet


def test_queryset_basics():
    qs = QuerySet(
        {"q2": "second", "q1": Query("first", ("turn a", "turn b"))}, name="rw", source="x.jsonl", lines={"q2": 1, "q1": 2}
    )
    assert list(qs.ids()) == ["q2", "q1"]  # file order kept
    assert qs.texts() == {"q2": "second", "q1": "first"}
    assert qs["q1"].history == ("turn a", "turn b")
    assert qs["q2"].history == ()
    assert qs.where("q1") == "x.jsonl:2"
    assert qs.where("unknown") == "x.jsonl"
    assert len(qs) == 2 and "q1" in qs
    mem = QuerySet.from_texts({1: "one"}, name="v")
    assert mem.where("1") == "<v queries>"
    assert mem.name == "v" and mem["1"] == Query("one")


def test_queryset_rejects_non_query_values():
    with pytest.raises(InputError, match="'q1'"):
        QuerySet({"q1": 5})
    with pytest.raises(InputError):
        QuerySet({"q1": None})


def test_queryset_equality():
    a = QuerySet.from_texts({"q": "t"})
    b = QuerySet({"q": Query("t")})
    assert a == b
    assert a != QuerySet.from_texts({"q": "u"})


# --------------------------------------------------------------------------------------------
# regressions: bugs found by adversarial testing, now fixed


def test_huge_int_score_is_input_error():
    with pytest.raises(InputError, match="'d'"):
        Run({"q": {"d": 10**400}})


def test_ranked_compares_scores_as_float64():
    # 2**53 and 2**53 + 1 are the same float64, so the corpus-id tie-break must decide: "b" > "a"
    r = Run({"q": {"a": 2**53 + 1, "b": 2**53}})
    assert [d for d, _ in r.ranked("q")] == ["b", "a"]


def test_query_validates_and_freezes_history():
    q = Query("x", ["a", "b"])
    assert q.history == ("a", "b") and hash(q)
    with pytest.raises(InputError, match="text must be a str"):
        Query(5)
    with pytest.raises(InputError, match="history"):
        Query("x", [1])


def test_name_is_read_only():
    r = Run({"q": {"d": 1.0}}, name="tag")
    with pytest.raises(AttributeError):
        r.name = "other"
    assert r.name == "tag"


# ------------------------------------------------------------------- public fast constructors
VALID_RUN = {"q1": {"p9": 2.5, "p10": 2.5, "p2": -1.0}, "q2": {"a": 0.0}, "q3": {}}
VALID_QRELS = {"q1": {"p9": 2, "p10": 0, "p2": -1}, "q2": {"a": 1}}


def test_from_checked_equals_the_checked_constructor_on_valid_input():
    run, fast = Run(VALID_RUN, name="bm25"), Run.from_checked({q: dict(d) for q, d in VALID_RUN.items()}, "bm25")
    assert fast == run and fast.name == run.name == "bm25" and fast.to_dict() == run.to_dict()
    assert [fast.ranked(q) for q in fast] == [run.ranked(q) for q in run]
    assert fast.ranked("q1") == [("p9", 2.5), ("p10", 2.5), ("p2", -1.0)]  # tie: byte order descending
    assert fast.top_k(1) == run.top_k(1) == Run({"q1": {"p9": 2.5}, "q2": {"a": 0.0}, "q3": {}})
    qrels, qfast = Qrels(VALID_QRELS, name="qrels.tsv"), Qrels.from_checked({q: dict(d) for q, d in VALID_QRELS.items()}, "qrels.tsv")
    assert qfast == qrels and qfast.name == "qrels.tsv" and qfast.num_entries() == qrels.num_entries() == 4
    assert isinstance(qfast["q1"], MappingProxyType)  # read-only like the checked one


def test_from_checked_adopts_without_copy_and_checks_scores_lazily():
    data = {"q1": {"p1": float("nan")}}
    run = Run.from_checked(data)  # no check at construction: the fast path of backends and readers
    assert run._data is data
    with pytest.raises(InputError, match=r"'q1'.*'p1'.*finite"):
        run.columns()  # every metric reads the columns: a bad score is still named there


def test_columns_match_between_paths_and_are_read_only():
    checked, fast = Run(VALID_RUN).columns(), Run.from_checked(VALID_RUN).columns()
    flat, starts, pos = fast
    assert flat.dtype == np.float64 and flat.tolist() == [2.5, 2.5, -1.0, 0.0]
    assert starts.tolist() == [0, 3, 4] and pos == {"q1": 0, "q2": 1, "q3": 2}
    assert checked[0].tolist() == flat.tolist() and checked[1].tolist() == starts.tolist() and checked[2] == pos
    run = Run(VALID_RUN)
    assert run.columns() is run.columns()  # cached
    with pytest.raises(ValueError):
        flat[0] = 99.0  # shared by every caller: read-only


def test_columns_of_other_real_number_types():
    from fractions import Fraction

    flat, starts, _ = Run({"q1": {"a": Fraction(1, 4), "b": np.float32(0.5)}}).columns()
    assert flat.tolist() == [0.25, 0.5] and starts.tolist() == [0]


def test_duplicate_texts_counts_repeated_texts():
    from vdr.types import duplicate_texts

    qs = QuerySet.from_texts({"q1": "tax", "q2": "rent", "q3": "tax", "q4": "rent", "q5": "tax", "q6": "solo"})
    assert duplicate_texts(qs) == {"count": 3, "examples": [{"text": "tax", "ids": ["q1", "q3", "q5"]},
                                                             {"text": "rent", "ids": ["q2", "q4"]}]}
    assert duplicate_texts(qs, examples=1)["examples"] == [{"text": "tax", "ids": ["q1", "q3", "q5"]}]
    assert duplicate_texts(QuerySet.from_texts({"q1": "a"})) == {"count": 0, "examples": []}
