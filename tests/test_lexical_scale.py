"""Lexical backend at collection scale: streaming build, memory-mapped cache, fast search identical to
the former algorithm, presets, the Lucene-compatible analyzer and issue 18.1's empty-text statistics."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from vdr.errors import InputError
from vdr.retrieve._common import id_order, top_k
from vdr.retrieve.analyzers import LUCENE_ENGLISH_STOP_WORDS, LuceneEnglishAnalyzer
from vdr.retrieve.base import BuildContext
from vdr.retrieve.lexical import BM25_PRESETS, BM25Backend, build


class Passages:
    """A duck-typed passage corpus: streams ``(ids, texts)`` batches, counts the passes."""

    def __init__(self, texts: dict[str, str], fingerprint: str | None = "fp-1") -> None:
        self._texts = texts
        self.fingerprint = fingerprint
        self.passes: list[int] = []

    def iter_texts(self, batch_size: int = 8192):
        self.passes.append(batch_size)
        ids = list(self._texts)
        for a in range(0, len(ids), batch_size):
            chunk = ids[a : a + batch_size]
            yield chunk, [self._texts[i] for i in chunk]


def random_corpus(n: int, seed: int, vocab: int = 12) -> dict[str, str]:
    """Short passages over a tiny vocabulary: many equal scores; a few empty or stopword-only."""
    rng = np.random.default_rng(seed)
    words = [f"w{i}x" for i in range(vocab)]
    out = {}
    for i in range(n):
        k = int(rng.integers(0, 5))
        out[f"d{int(rng.integers(0, 10**6)):06d}-{i}"] = " ".join(rng.choice(words, k)) if k else ("the of" if i % 2 else "")
    return out


def old_search(bm: BM25Backend, texts: dict[str, str], queries: dict[str, str], depth: int) -> dict[str, list]:
    """The former algorithm: bm25s's own index over token-id lists, ``get_scores_from_ids``,
    ``np.unique`` of the concatenated postings, then a full lexsort (``top_k``)."""
    import bm25s

    ids = list(texts)
    docs = [bm.tokenize(t) for t in texts.values()]
    vocab = {t: i for i, t in enumerate(sorted({t for d in docs for t in d}))}
    c = bm.config
    r = bm25s.BM25(k1=c["k1"], b=c["b"], delta=c["delta"], method=c["method"], dtype="float32")
    r.index(([[vocab[t] for t in d] for d in docs], dict(vocab)), create_empty_token=False, show_progress=False)
    order = id_order(ids)
    out = {}
    for qid, q in queries.items():
        tids = [vocab[t] for t in bm.tokenize(q) if t in vocab]
        if not tids:
            out[qid] = []
            continue
        scores = r.get_scores_from_ids(tids)
        indptr, indices = r.scores["indptr"], r.scores["indices"]
        matched = np.unique(np.concatenate([indices[indptr[t] : indptr[t + 1]] for t in tids])).astype(np.int64)
        out[qid] = list(top_k(scores, matched, order, ids, depth).items())
    return out


@pytest.fixture(params=["numpy", "numba"])
def scorer(request, monkeypatch):
    """Run a test with the NumPy scorer, then with the numba one (skipped without numba)."""
    from vdr.retrieve import lexical

    if request.param == "numba":
        pytest.importorskip("numba")
        monkeypatch.setattr(lexical, "_KERNEL", [])
        assert lexical._numba_kernel() is not None
    else:
        monkeypatch.setattr(lexical, "_KERNEL", [None])
    return request.param


@pytest.mark.parametrize("method", ["lucene", "robertson", "atire", "bm25l", "bm25+"])
def test_fast_search_is_identical_to_the_former_algorithm_with_many_ties(method, scorer, tmp_path):
    texts = random_corpus(400, seed=3)
    rng = np.random.default_rng(7)
    words = [f"w{i}x" for i in range(14)]  # w12x, w13x: out of vocabulary
    queries = {f"q{i}": " ".join(rng.choice(words, int(rng.integers(1, 6)))) for i in range(60)}
    queries["stop"] = "the of and"
    bm = BM25Backend(method=method, cache_dir=tmp_path, batch_size=37)
    bm.index(texts)
    for depth in (1, 3, 10, 1000):
        new = bm.search(queries, depth)
        ref = old_search(bm, texts, queries, depth)
        for qid in queries:
            got = list(new[qid].items())
            assert got == ref[qid], (method, depth, qid)
            assert [np.float64(s).tobytes() for _, s in got] == [np.float64(s).tobytes() for _, s in ref[qid]]
    ties = [s for _, s in old_search(bm, texts, {"q": "w1x"}, 1000)["q"]]
    assert len(ties) > 2 * len(set(ties))  # the corpus really has many ties at every boundary
    reloaded = BM25Backend(method=method, cache_dir=tmp_path)
    reloaded.index(texts)
    assert reloaded.report["cache"]["hit"] is True
    assert reloaded.search(queries, 10) == bm.search(queries, 10)


def test_issue_18_1_empty_texts_out_of_n_and_avgdl_reload_identical(scorer, tmp_path):
    texts = {"1": "foo", "2": "dog", "3": "baz", "4": "quick god", "5": "quick fox", "6": "the of and"}
    bm = BM25Backend(analyzer="lucene", method="lucene", k1=1.5, b=0.75, cache_dir=tmp_path)
    bm.index(Passages(texts, fingerprint="c18"))
    idx = bm.report["index"]
    assert idx["num_docs"] == 5 and idx["avgdl"] == pytest.approx(7 / 5) and idx["num_empty_pages"] == 1 and idx["empty_pages"] == ["6"]
    expected = math.log(2.4) / (1 + 1.5 * (0.25 + 0.75 * 2 / 1.4))
    assert expected == pytest.approx(0.293570, abs=1e-6)
    run = bm.search({"q": "quick", "s": "the"}, depth=10)
    # tied in Lucene's BM25 (0.293570); then as Pyserini returns them (issue 24.2): by corpus id
    # ascending, scores rounded to 4 decimals, the second of the tie lowered by 1e-6 (Anserini's
    # ScoreTiesAdjusterReranker), so trec_eval keeps that order
    assert list(run["q"]) == ["4", "5"]
    assert run["q"]["4"] == pytest.approx(0.2936, abs=1e-7) and run["q"]["5"] == pytest.approx(0.2936 - 1e-6, abs=1e-7)
    assert run.ranked("q")[0][0] == "4"
    assert dict(run["s"]) == {}
    rep = bm.report["searches"]["original"]
    assert rep["num_queries_without_known_terms"] == 1 and rep["queries_without_known_terms"] == ["s"]
    again = BM25Backend(analyzer="lucene", k1=1.5, b=0.75, cache_dir=tmp_path)
    src = Passages(texts, fingerprint="c18")
    again.index(src)
    assert again.report["cache"]["hit"] is True and src.passes == []  # keyed by the fingerprint: no pass over the texts
    assert isinstance(again._retriever.scores["data"], np.memmap)
    assert again.search({"q": "quick", "s": "the"}, depth=10) == run
    # the default analyzer keeps bm25s's statistics (empty pages counted): N = 6, avgdl = 7/6
    d = BM25Backend(stopwords=["the", "of", "and"], stemmer=None, k1=1.5, b=0.75)
    d.index(texts)
    assert d.report["index"]["num_docs"] == 6
    n6 = math.log(1 + 4.5 / 2.5) / (1 + 1.5 * (0.25 + 0.75 * 2 / (7 / 6)))
    assert d.search({"q": "quick"}, 5)["q"]["4"] == pytest.approx(n6, rel=1e-6)


def test_streaming_build_equals_dict_build_and_counts_batches(tmp_path):
    texts = random_corpus(50, seed=1)
    src = Passages(texts, fingerprint=None)  # no fingerprint: one digest pass, then one build pass
    a = BM25Backend(batch_size=8, cache_dir=tmp_path)
    a.index(src)
    assert src.passes == [8, 8]
    b = BM25Backend()
    b.index(texts)
    q = {"x": "w1x w2x w2x", "y": "w5x"}
    assert a.search(q, 20) == b.search(q, 20)
    assert a.report["index"] == b.report["index"]
    c = BM25Backend(batch_size=8, cache_dir=tmp_path)  # same content, no fingerprint: digest hit
    c.index(Passages(texts, fingerprint=None))
    assert c.report["cache"]["hit"] is True and c.search(q, 20) == b.search(q, 20)
    dup = Passages({"a": "x", "b": "y", "c": "z"}, fingerprint="dup")
    dup._texts = None  # a stream that repeats an id in a later batch
    dup.iter_texts = lambda bs: iter([(["a", "b"], ["one", "two"]), (["a"], ["three"])])
    with pytest.raises(InputError, match="'a' appears twice"):
        BM25Backend().index(dup)
    with pytest.raises(InputError, match="'b': text must be a str"):
        BM25Backend().index({"a": "x", "b": 3})
    with pytest.raises(InputError, match="no corpus page"):
        BM25Backend().index(Passages({}, fingerprint=None))


def test_presets_recorded_and_overridable():
    assert {k: (v["k1"], v["b"]) for k, v in BM25_PRESETS.items()} == {"topiocqa": (0.9, 0.4), "qrecc": (0.82, 0.68), "msmarco": (0.82, 0.68)}
    t = BM25Backend(preset="topiocqa")
    assert (t.config["k1"], t.config["b"]) == (0.9, 0.4) and t.config["preset"]["name"] == "topiocqa" and t.config["preset"]["overridden"] == []
    o = BM25Backend(preset="qrecc", k1=1.2)
    assert (o.config["k1"], o.config["b"]) == (1.2, 0.68) and o.config["preset"]["overridden"] == ["k1"]
    d = BM25Backend()
    assert (d.config["k1"], d.config["b"], d.config["preset"]) == (1.5, 0.75, None)
    with pytest.raises(InputError, match="unknown BM25 preset"):
        BM25Backend(preset="trec")
    with pytest.raises(InputError, match="unknown BM25 analyzer"):
        BM25Backend(analyzer="whitespace")
    f = build(BuildContext(name="lexical", options={"preset": "msmarco", "analyzer": "lucene"}))
    assert (f.config["k1"], f.config["b"], f.config["analyzer"]) == (0.82, 0.68, "lucene")
    assert f.config["empty_pages_in_statistics"] is False and d.config["empty_pages_in_statistics"] is True


def test_lucene_english_analyzer_chain():
    a = LuceneEnglishAnalyzer()
    assert len(LUCENE_ENGLISH_STOP_WORDS) == 33
    assert a("The dog's quick JUMPS") == ["dog", "quick", "jump"]
    assert a("U.S.A. costs 1,000.50; a b") == ["u.s.a", "cost", "1,000.50", "b"]  # single letters kept, "a" a stopword
    assert a("generalization caresses ponies") == ["gener", "caress", "poni"]  # original Porter, not Snowball English
    assert a("東京 run") == ["東", "京", "run"]
    assert a("the of and") == [] and a("") == []
    bm = BM25Backend(analyzer="lucene")
    assert bm.tokenize("Running dogs") == ["run", "dog"] and bm.config["tokenizer"]["stopwords"] == "lucene_english"


def test_cli_bm25_preset_and_analyzer_recorded(tmp_path):
    import json

    from tiny_models import make_corpus

    import vdr
    from vdr.cli import main
    from vdr.corpus import Page, write_pages

    corpus = make_corpus(tmp_path / "corpus", [(56, 56), (56, 56), (56, 56)])
    texts = ["Quick brown foxes jumped", "The dog's dinner", "the of and"]
    pages = [Page(**{**p.__dict__, "text": t, "text_source": "pdf"}) for p, t in zip(vdr.Corpus.load(corpus).pages(), texts)]
    write_pages(corpus / "pages.jsonl", pages)
    ids = [p.corpus_id for p in pages]
    (tmp_path / "q.jsonl").write_text(json.dumps({"_id": "q1", "text": "fox jumping"}) + "\n" + json.dumps({"_id": "q2", "text": "dogs"}) + "\n")
    (tmp_path / "qrels.tsv").write_text(f"query-id\tcorpus-id\tscore\nq1\t{ids[0]}\t1\nq2\t{ids[1]}\t1\n")
    out = tmp_path / "r"
    rc = main(["evaluate", str(corpus), "--queries", str(tmp_path / "q.jsonl"), "--qrels", str(tmp_path / "qrels.tsv"), "--backend", "lexical",
               "--out", str(out), "--quiet", "--bm25-preset", "topiocqa", "--bm25-analyzer", "lucene"])
    assert rc == 0
    doc = json.loads((out / "results.json").read_text())
    text = json.dumps(doc)
    assert '"preset": {"name": "topiocqa"' in text and '"analyzer": "lucene"' in text
    per_query = (out / "per_query.csv").read_text()
    assert "q1" in per_query and "q2" in per_query


def test_concurrent_searches_equal_sequential_ones(scorer):
    from concurrent.futures import ThreadPoolExecutor

    texts = random_corpus(300, seed=5)
    bm = BM25Backend()
    bm.index(texts)
    rng = np.random.default_rng(2)
    batches = [{f"q{k}-{i}": " ".join(rng.choice([f"w{j}x" for j in range(12)], 4)) for i in range(40)} for k in range(8)]
    expected = [bm.search(b, 7) for b in batches]
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda b: bm.search(b, 7), batches))
    assert got == expected


def test_numba_loaded_only_once_enough_postings_were_scored_same_results(monkeypatch, tmp_path):
    pytest.importorskip("numba")
    from vdr.retrieve import lexical

    texts = random_corpus(200, seed=5)
    queries = {"a": "w1x w2x w3x", "b": "w4x", "c": "w5x w6x"}
    bm = BM25Backend(cache_dir=tmp_path)
    bm.index(texts)
    data, indices, indptr = bm._csc
    tids = [[bm._vocab[t] for t in bm._analyze(q)] for q in queries.values()]
    work = sum(int(indptr[t + 1] - indptr[t]) for ts in tids if len(ts) > 1 for t in ts)  # postings of multi-term queries
    monkeypatch.setattr(lexical, "_KERNEL", [])
    monkeypatch.setattr(lexical, "_WORK", [0])
    monkeypatch.setattr(lexical, "_JIT_MIN_POSTINGS", 2 * work)
    small = bm.search(queries, 50)
    assert lexical._KERNEL == [] and lexical._WORK == [work]  # NumPy scorer: numba not even looked up
    large = bm.search(queries, 50)  # the same again: 2 * work postings scored in this process
    assert len(lexical._KERNEL) == 1 and lexical._KERNEL[0] is not None  # loaded, and kept for the process
    assert lexical._WORK == [2 * work]
    assert large == small and large.to_dict() == small.to_dict()


def test_numba_kernel_without_a_writable_cache_folder_still_compiles(monkeypatch, tmp_path):
    numba = pytest.importorskip("numba")
    from numba.core import caching

    from vdr.retrieve import lexical

    cached = lexical._jit(numba)
    assert cached._cache.cache_path  # on-disk cache in use (in __pycache__ or the user cache folder)
    monkeypatch.setattr(numba.config, "CACHE_DIR", str(tmp_path / "nb"))  # NUMBA_CACHE_DIR (e.g. a read-only install)
    elsewhere = lexical._jit(numba)
    assert elsewhere._cache.cache_path.startswith(str(tmp_path / "nb"))
    elsewhere(np.ones(2, np.float32), np.arange(2, dtype=np.int32), np.array([0, 2], np.int64), np.array([0, 0], np.int64),
              np.zeros(2, np.float32), np.zeros(2, bool), np.empty(2, np.int64))
    assert any(p.suffix == ".nbi" for p in (tmp_path / "nb").rglob("*"))  # the machine code was saved there
    monkeypatch.setattr(numba.config, "CACHE_DIR", "")
    monkeypatch.setattr(caching.CacheImpl, "_locator_classes", [])  # read-only package, no home: numba refuses cache=True
    kernel = lexical._jit(numba)
    assert isinstance(kernel._cache, caching.NullCache)
    data = np.array([1.0, 2.0, 0.5, 4.0], dtype=np.float32)
    indices, indptr = np.array([0, 2, 2, 1], dtype=np.int32), np.array([0, 2, 4], dtype=np.int64)
    acc, seen, buf = np.zeros(3, np.float32), np.zeros(3, bool), np.empty(3, np.int64)
    cand, s = kernel(data, indices, indptr, np.array([0, 1], np.int64), acc, seen, buf)
    assert cand.tolist() == [0, 2, 1] and s.tolist() == [1.0, 2.5, 4.0]
    assert not acc.any() and not seen.any()


@pytest.mark.parametrize("method", ["lucene", "bm25l"])
def test_stored_index_reads_what_bm25s_load_reads(method, tmp_path):
    import bm25s

    from vdr.retrieve.lexical import _StoredIndex

    bm = BM25Backend(method=method, cache_dir=tmp_path)
    bm.index(random_corpus(120, seed=9))
    (folder,) = [p for p in (tmp_path / "lexical").iterdir() if p.is_dir()]
    ref = bm25s.BM25.load(str(folder), allow_pickle=False, mmap=True, show_progress=False)
    got = _StoredIndex(folder)
    assert got.vocab_dict == ref.vocab_dict and list(got.vocab_dict) == list(ref.vocab_dict)
    for k in ("data", "indices", "indptr"):
        assert isinstance(got.scores[k], np.memmap) and got.scores[k].dtype == ref.scores[k].dtype
        assert got.scores[k].tobytes() == ref.scores[k].tobytes()
    assert got.scores["num_docs"] == ref.scores["num_docs"] == 120
    if method == "bm25l":
        assert got.nonoccurrence_array.tobytes() == ref.nonoccurrence_array.tobytes()
    else:
        assert got.nonoccurrence_array is None and ref.nonoccurrence_array is None


def test_stopwords_are_bm25s_lists_and_a_cached_rerun_imports_neither_bm25s_nor_numba(tmp_path):
    import subprocess
    import sys

    import bm25s.stopwords

    from vdr.retrieve.lexical import STOPWORD_LANGUAGES, _bm25s_stopwords

    for name in STOPWORD_LANGUAGES.values():
        assert _bm25s_stopwords(name) == getattr(bm25s.stopwords, name)
    texts = random_corpus(50, seed=2)
    code = (
        "import json, sys; from vdr.retrieve.lexical import BM25Backend\n"
        f"bm = BM25Backend(cache_dir={str(tmp_path)!r}, stopwords='en'); bm.index(json.loads(sys.stdin.read()))\n"
        "r = bm.search({'a': 'w1x w2x the', 'b': 'w3x'}, 5)\n"
        "print(json.dumps([bm.report['cache']['hit'], r.to_dict(), 'bm25s' in sys.modules, 'numba' in sys.modules]))"
    )
    runs = [json.loads(subprocess.run([sys.executable, "-c", code], input=json.dumps(texts), capture_output=True, text=True,
                                      timeout=600, check=True).stdout) for _ in range(2)]
    assert runs[0][0] is False and runs[1][0] is True
    assert runs[1][1] == runs[0][1] and runs[0][1]["a"]
    assert runs[1][2:] == [False, False]  # the cached re-run: no bm25s, no numba
