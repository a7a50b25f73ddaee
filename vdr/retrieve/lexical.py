"""Lexical backend: BM25 over page or passage text, scored by bm25s (Lù 2024, arXiv 2407.03618).

Analysis (done here, so that it is explicit and recorded; :mod:`vdr.retrieve.analyzers`):

* ``analyzer="default"``: Unicode NFKC (:mod:`vdr.text`), lower-case, the bm25s / scikit-learn token
  pattern ``(?u)\\b\\w\\w+\\b`` (words of 2+ word characters), stopwords removed (bm25s's lists),
  then stemming with PyStemmer's Snowball stemmers when requested and installed.
* ``analyzer="lucene"``: Lucene's ``EnglishAnalyzer`` chain token for token (StandardTokenizer,
  English possessive removal, lower-case, Lucene's 33 English stopwords, Lucene's Porter stemmer;
  :class:`~vdr.retrieve.analyzers.LuceneEnglishAnalyzer`), as Pyserini indexes English text.

Scoring is bm25s's eager sparse index. With the default ``method="lucene"`` (Lucene >= 8 BM25,
as catalogued by Kamphuis, de Vries, Boytsov & Lin 2020, "Which BM25 do you mean?", ECIR), a page
``D`` scores, for query tokens ``t``::

    score(D, Q) = sum_t  idf(t) * tf(t, D) / (tf(t, D) + k1 * (1 - b + b * |D| / avgdl))
    idf(t)      = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))

* with the ``default`` analyzer: bm25s's arithmetic (float64, rounded to float32 per posting;
  the terms added in float32 in query order, each occurrence of a query term once more), ``|D|``
  exact, ``N`` and ``avgdl`` over all pages (empty pages count in ``N`` and, with length 0, in
  ``avgdl``, as bm25s does); ties: score desc, corpus id desc (trec_eval).
* with the ``lucene`` analyzer (and ``method="lucene"``): Lucene 9's ``BM25Similarity`` as Pyserini runs it, so that scores
  and rankings are Pyserini's (:func:`lucene_bm25_matrix`): ``|D|`` is the one-byte length norm
  (``SmallFloat.intToByte4`` decoded: :func:`lucene_length_norm`; exact up to 39, then 4
  significant bits), ``N`` and ``avgdl`` are ``docCount`` and ``sumTotalTermFreq / docCount`` over
  the passages that have at least one term, every step in float32 as Lucene computes it
  (``weight - weight / (1 + tf * cache[norm])``); a query term repeated ``c`` times is one clause
  with boost ``c`` (Anserini's ``BagOfWordsQueryGenerator``: ``weight = c * idf``); the clause
  scores are added in float64 and rounded to float32 (Lucene's disjunction scorers). The ``depth``
  cut breaks ties by corpus id ascending (Anserini's ``BREAK_SCORE_TIES_BY_DOCID``), then the kept
  scores go through Anserini's ``ScoreTiesAdjusterReranker`` (:func:`anserini_tie_adjust`: rounded
  to 4 decimals, a score within 1e-4 of the one above it lowered by 1e-6 per tied position), as
  every Pyserini ``LuceneSearcher`` search does; so the run's trec_eval order is Pyserini's.

Other ``method`` values (bm25s's arithmetic, exact lengths, with either analyzer): ``robertson``,
``atire``, ``bm25l``, ``bm25+``.

Parameter presets (``preset=``, :data:`BM25_PRESETS`): ``topiocqa`` k1=0.9, b=0.4 and ``qrecc``
k1=0.82, b=0.68 (ConvSearch-R1's Pyserini settings), ``msmarco`` k1=0.82, b=0.68 (Anserini /
Pyserini's tuned MS MARCO passage values).

Ranking rules (documented choices):

* A page is ranked for a query only if it contains at least one of the query's terms (as Lucene
  and Pyserini do). Pages without terms therefore never appear in a ranking; they are counted in
  :attr:`BM25Backend.report` (``num_empty_pages``).
* A query none of whose terms is in the index vocabulary (all out-of-vocabulary, all stopwords, or
  no term at all) gets an **empty ranking** (the query id is in the run with no pages, so every
  metric is 0 for it); such queries are counted and listed in ``BM25Backend.report["searches"]``.
* Order and the ``depth`` cut follow trec_eval: score descending, then corpus id descending
  (``lucene`` analyzer with ``method="lucene"``: Anserini's cut and scores, see above).

Scale: the index is built streaming (:func:`vdr.retrieve.base.iter_corpus_texts`, batch by batch
into token-id arrays; never all texts in memory), its CSC score matrix computed with NumPy from
the token ids with bm25s's own formulas, saved in bm25s's format (``bm25s.BM25.load`` reads it)
and memory-mapped when loaded (``cache_dir/lexical/<fingerprint>/``; read with NumPy, see
:class:`_StoredIndex`), so a re-run, another query variant or another process
reuses it. Search scores a query from the postings of its terms only (no sort of the collection),
with a numba-compiled loop when numba is importable and the search is large enough to repay loading
it (``VDR_NUMBA=0`` turns it off; compiled once and kept in numba's on-disk cache, see :func:`_jit`
and ``BM25Backend._scorer``) and NumPy otherwise: both add the float32 scores term by term in query
order, as bm25s does, so scores and rankings are identical either way.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import math
import os
import re
import sys
import threading
from typing import Any
from pathlib import Path

import numpy as np

from ..errors import InputError
from ..text import TEXT_POLICY, normalize_text
from ..types import Run, to_id
from ._common import textless_reason, check_depth, id_order, version_of
from .analyzers import ANALYZERS, Analyzer, LuceneEnglishAnalyzer
from .base import BackendUnavailable, BuildContext, cache_path, content_digest, fingerprint, iter_corpus_texts, new_report, read_json, search_inputs, write_cache_dir
from .budget import apply_budget, budget_config, check_max_tokens
from .options import LexicalOptions, options_from

__all__ = ["BM25Backend", "BM25_PRESETS", "STOPWORD_LANGUAGES", "BM25_METHODS", "TOKEN_PATTERN", "anserini_tie_adjust", "bm25_matrix",
           "lucene_bm25_matrix", "lucene_decoded_length", "lucene_idf", "lucene_length_norm", "lucene_norm_inverse", "lucene_term_scores",
           "top_depth"]

TOKEN_PATTERN = r"(?u)\b\w\w+\b"
BM25_METHODS = ("lucene", "robertson", "atire", "bm25l", "bm25+")

# language code -> bm25s.stopwords constant (bm25s's own lists, from NLTK / stopwords-iso)
STOPWORD_LANGUAGES = {
    "en": "STOPWORDS_EN",
    "en_plus": "STOPWORDS_EN_PLUS",
    "de": "STOPWORDS_GERMAN",
    "nl": "STOPWORDS_DUTCH",
    "fr": "STOPWORDS_FRENCH",
    "es": "STOPWORDS_SPANISH",
    "pt": "STOPWORDS_PORTUGUESE",
    "it": "STOPWORDS_ITALIAN",
    "ru": "STOPWORDS_RUSSIAN",
    "sv": "STOPWORDS_SWEDISH",
    "no": "STOPWORDS_NORWEGIAN",
    "zh": "STOPWORDS_CHINESE",
    "tr": "STOPWORDS_TURKISH",
    "ko": "STOPWORDS_KOREAN",
    "da": "STOPWORDS_DANISH",
}
_LANGUAGE_NAMES = {
    "english": "en", "german": "de", "dutch": "nl", "french": "fr", "spanish": "es", "portuguese": "pt",
    "italian": "it", "russian": "ru", "swedish": "sv", "norwegian": "no", "chinese": "zh", "turkish": "tr",
    "korean": "ko", "danish": "da",
}  # fmt: skip


def _pystemmer():
    try:
        import Stemmer  # PyStemmer
    except ImportError:
        return None
    return Stemmer


def _bm25s_stopwords(name: str) -> tuple[str, ...]:
    """bm25s's stopword list ``name`` (a tuple in the data-only module ``bm25s/stopwords.py``).

    The module file is executed on its own when the ``bm25s`` package is not imported yet:
    ``import bm25s.stopwords`` would run ``bm25s/__init__``, which imports numba, scipy.sparse and
    tqdm (about half a second), and a re-run with a cached index needs nothing else from bm25s.
    """
    mod = sys.modules.get("bm25s.stopwords")
    if mod is None:
        spec = importlib.util.find_spec("bm25s")  # locates the package without importing it
        origin = Path(spec.origin).with_name("stopwords.py") if spec is not None and spec.origin else None
        if origin is None or not origin.is_file():  # pragma: no cover - an unusual bm25s install
            import bm25s.stopwords as mod
        else:
            spec = importlib.util.spec_from_file_location("_vdr_bm25s_stopwords", origin)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
    return getattr(mod, name)


def _resolve_stopwords(stopwords: object) -> tuple[frozenset[str], object]:
    """(set of lower-cased stopwords, what to record)."""
    if stopwords is None or stopwords is False:
        return frozenset(), None
    if isinstance(stopwords, str):
        code = _LANGUAGE_NAMES.get(stopwords.lower(), stopwords.lower())
        if code not in STOPWORD_LANGUAGES:
            raise InputError(f"unknown stopword language {stopwords!r}; known: {', '.join(STOPWORD_LANGUAGES)}, or None, or a list of words")
        return frozenset(w.lower() for w in _bm25s_stopwords(STOPWORD_LANGUAGES[code])), code
    if isinstance(stopwords, (list, tuple, set, frozenset)) and all(isinstance(w, str) for w in stopwords):
        words = sorted({w.lower() for w in stopwords})
        return frozenset(words), words
    raise InputError(f"stopwords must be a language code, None or a list of str, got {stopwords!r}")


BM25_PRESETS: dict[str, dict] = {
    "topiocqa": {"k1": 0.9, "b": 0.4, "source": "ConvSearch-R1 (Zhu et al. 2025, arXiv 2505.15776): Pyserini BM25 on TopiOCQA"},
    "qrecc": {"k1": 0.82, "b": 0.68, "source": "ConvSearch-R1 (Zhu et al. 2025, arXiv 2505.15776): Pyserini BM25 on QReCC"},
    "msmarco": {"k1": 0.82, "b": 0.68, "source": "Anserini / Pyserini tuned BM25 for MS MARCO passage (experiments-msmarco-passage)"},
}
"""Published BM25 parameters by name (``BM25Backend(preset=...)``, ``vdr evaluate --bm25-preset``)."""


def _resolve_params(k1, b, delta, method, preset) -> tuple[float, float, dict | None]:
    """``(k1, b, preset record)``: explicit values win over the preset (and are listed as overrides).

    Raises:
        InputError: an unknown preset or method, a value out of range.
    """
    record = None
    if preset is not None:
        if preset not in BM25_PRESETS:
            raise InputError(f"unknown BM25 preset {preset!r}; known: {', '.join(BM25_PRESETS)}")
        p = BM25_PRESETS[preset]
        record = {"name": preset, "k1": p["k1"], "b": p["b"], "source": p["source"],
                  "overridden": [n for n, v in (("k1", k1), ("b", b)) if v is not None]}
        k1 = p["k1"] if k1 is None else k1
        b = p["b"] if b is None else b
    k1 = 1.5 if k1 is None else k1
    b = 0.75 if b is None else b
    for pname, v, lo, hi in (("k1", k1, 0.0, float("inf")), ("b", b, 0.0, 1.0), ("delta", delta, 0.0, float("inf"))):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not (lo <= float(v) <= hi):
            raise InputError(f"BM25 {pname} must be a number in [{lo}, {hi}], got {v!r}")
    if method not in BM25_METHODS:
        raise InputError(f"unknown BM25 method {method!r}; known: {', '.join(BM25_METHODS)}")
    return float(k1), float(b), record


class BM25Backend:
    """BM25 retrieval over page or passage text (bm25s): a :class:`~vdr.retrieve.base.Backend`.

    Args (the fields of :class:`~vdr.retrieve.options.LexicalOptions`, given as ``options`` or as
    keywords, plus ``cache_dir`` and ``name``):
        k1: term-frequency saturation, >= 0 (default: the preset's, else 1.5, bm25s's default).
        b: length normalisation in [0, 1] (default: the preset's, else 0.75).
        method: bm25s variant, one of :data:`BM25_METHODS` (default ``"lucene"``).
        delta: the delta of ``bm25l`` / ``bm25+`` (ignored by the others; recorded anyway).
        stemmer: (``default`` analyzer) ``"auto"`` (default: PyStemmer's ``"english"`` when
            PyStemmer is installed, else no stemming), a PyStemmer language (``"english"``,
            ``"porter"``, ...), or ``None``. What was used is recorded in :attr:`config`.
        stopwords: (``default`` analyzer) a language code or name (``"en"``, ``"english"``, ``"de"``,
            ...; bm25s's lists), a list of words, or ``None`` (keep every token). Default ``"en"``.
        lower: (``default`` analyzer) lower-case before tokenising (default True).
        analyzer: ``"default"`` or ``"lucene"`` (:class:`~vdr.retrieve.analyzers.LuceneEnglishAnalyzer`;
            ``stemmer``, ``stopwords`` and ``lower`` are then not used, and passages without terms
            are left out of ``N`` and ``avgdl`` as Lucene does; with ``method="lucene"`` the scores,
            the cut and the ties are Lucene's and Anserini's, as Pyserini gives them: see the module
            docstring).
        preset: ``None`` or a name in :data:`BM25_PRESETS` (``topiocqa``, ``qrecc``, ``msmarco``):
            its ``k1`` and ``b`` (explicit ``k1`` / ``b`` win, recorded as overrides).
        cache_dir: root of the index cache; the index is kept in ``cache_dir/lexical/<fingerprint>/``
            (bm25s's ``save`` format: ``.npy`` arrays written with ``allow_pickle=False`` and JSON,
            plus vdr's ``vdr-index.json`` and ``order.npy``) and memory-mapped when loaded. The
            fingerprint covers the collection (its ``fingerprint`` attribute when it has one, else
            the sha256 of its ids and texts) and every setting in :attr:`config` that changes scores.
            ``None``: no cache.
        name: the backend's name in results (default ``"lexical"``).
        batch_size: texts analysed per batch while indexing (default 8192).
        max_query_tokens: the shared query budget in whitespace tokens (:mod:`vdr.retrieve.budget`,
            the same rule as the ``pyserini`` backend: a query over budget keeps its LAST tokens,
            i.e. the oldest history goes first and the question stays); default 512 (ConvSearch-R1's
            cut); ``None``: no budget. Queries within budget are searched unchanged.

    Attributes:
        config: every parameter as used, analyzer details and library versions (JSON-ready).
        report: ``page_forward_passes`` (always 0: no model), ``cache``, ``index``: ``num_pages``,
            ``num_empty_pages`` (pages without any term, never ranked), ``empty_pages`` (their ids,
            first 20), ``vocabulary_size``, ``avg_page_tokens`` (over all pages), ``num_docs`` (the
            ``N`` of the formula) and ``avgdl``; ``searches``: per variant, see :meth:`search`.

    Raises:
        InputError: a parameter out of range, an unknown method, preset, analyzer, stopword
            language or stemmer language, or a stemmer language without PyStemmer.
    """

    def __init__(self, options: LexicalOptions | None = None, *, cache_dir: str | Path | None = None, name: str = "lexical",
                 **kwargs: Any) -> None:
        o = options_from(LexicalOptions, options, kwargs, backend=name)
        self.options = o
        k1, b, method, delta, stemmer, stopwords, lower, analyzer, preset = (
            o.k1, o.b, o.method, o.delta, o.stemmer, o.stopwords, o.lower, o.analyzer, o.preset)
        batch_size, max_query_tokens = o.batch_size, o.max_query_tokens
        k1, b, preset_record = _resolve_params(k1, b, delta, method, preset)
        self.max_query_tokens = check_max_tokens(max_query_tokens)
        if analyzer not in ANALYZERS:
            raise InputError(f"unknown BM25 analyzer {analyzer!r}; known: {', '.join(ANALYZERS)}")
        self.name = name
        self.cache_dir = None if cache_dir is None else Path(cache_dir)
        self.report: dict = new_report()
        self._batch_size = check_depth(batch_size, "batch_size")
        self._ids: list[str] | None = None
        self._retriever = None
        if analyzer == "lucene":
            self._analyze = LuceneEnglishAnalyzer()
            stem_record = self._analyze.config["stemmer"]
        else:
            stop, stop_record = _resolve_stopwords(stopwords)
            stem_record = self._resolve_stemmer(stemmer)
            find, low = re.compile(TOKEN_PATTERN).findall, bool(lower)

            def split(text: str) -> list[str]:
                text = normalize_text(text)
                return find(text.lower() if low else text)

            self._analyze = Analyzer(split, stop, stem_record, {"text": TEXT_POLICY, "lower": low, "token_pattern": TOKEN_PATTERN,
                                                                "stopwords": stop_record, "num_stopwords": len(stop)})
        tokenizer = self._analyze.config
        self._exclude_empty = analyzer == "lucene"
        self._lucene = analyzer == "lucene" and method == "lucene"  # Lucene's BM25Similarity, as Pyserini
        self._lucene_arrays: tuple | None = None
        self.config: dict = {
            "backend": "lexical",
            "scorer": "lucene BM25Similarity (emulated)" if self._lucene else "bm25s",
            "method": method,
            "formula": _LUCENE_FORMULA if self._lucene else _FORMULAS[method],
            "k1": k1,
            "b": b,
            "delta": float(delta),
            "preset": preset_record,
            "dtype": "float32",
            "analyzer": analyzer,
            "tokenizer": tokenizer,
            "stemmer": stem_record,
            "stemmer_requested": stemmer if analyzer == "default" else None,
            "empty_pages": "never ranked (a page is ranked only when it contains a query term)",
            "empty_pages_in_statistics": not self._exclude_empty,
            "queries_without_known_terms": "empty ranking",
            "query_budget": budget_config(self.max_query_tokens),
            "length_norm": _LUCENE_NORM if self._lucene else "exact",
            "query_terms": ("a repeated term is one clause boosted by its count (Anserini BagOfWordsQueryGenerator)"
                            if self._lucene else "each occurrence adds the term's score once more"),
            "score_sum": ("per-clause float32 scores added in float64, rounded to float32 (Lucene)" if self._lucene
                          else "float32, term by term in query order (bm25s)"),
            "tie_break": _LUCENE_TIES if self._lucene else "score desc, corpus id desc (trec_eval)",
            "versions": {"bm25s": version_of("bm25s"), "PyStemmer": version_of("PyStemmer"), "numpy": np.__version__},
        }

    @staticmethod
    def _resolve_stemmer(stemmer: object) -> str | None:
        """The PyStemmer language to use (``None``: no stemming)."""
        Stemmer = _pystemmer()
        if stemmer is None or stemmer is False:
            return None
        if stemmer == "auto":
            return None if Stemmer is None else "english"
        if not isinstance(stemmer, str):
            raise InputError(f"stemmer must be 'auto', a PyStemmer language or None, got {stemmer!r}")
        if Stemmer is None:
            raise InputError(f"stemmer {stemmer!r} needs PyStemmer (pip install PyStemmer), or pass stemmer=None")
        if stemmer not in Stemmer.algorithms():
            raise InputError(f"unknown stemmer language {stemmer!r}; PyStemmer knows: {', '.join(Stemmer.algorithms())}")
        return stemmer

    def tokenize(self, text: str) -> list[str]:
        """The terms BM25 sees for ``text`` (list of str). ``default`` analyzer: Unicode-normalised
        (:func:`vdr.text.normalize_text`, NFKC), lower-cased (if ``lower``), split by
        :data:`TOKEN_PATTERN`, stopwords dropped, then stemmed (if a stemmer is used); ``lucene``
        analyzer: see :class:`~vdr.retrieve.analyzers.LuceneEnglishAnalyzer`."""
        return self._analyze(text)

    # ------------------------------------------------------------------ index

    def index(self, corpus) -> None:
        """Build the BM25 index of ``corpus``, streaming, or load it (memory-mapped) from the cache.

        Args:
            corpus: a page :class:`~vdr.corpus.Corpus`, a passage corpus (anything with
                ``iter_texts(batch_size)``; its ``fingerprint`` attribute, when present, keys the
                cache without reading the texts), or ``{corpus_id: text}`` with str or integer ids
                and str texts. Empty texts are allowed (never ranked).

        Raises:
            InputError: an empty corpus, a bad or duplicate id, a non-str text.
        """
        self._index(corpus)
        why = textless_reason(self.report.get("index") or {}, "lexical", self.options.allow_no_text)
        if why is not None:
            raise BackendUnavailable(why)

    def _index(self, corpus) -> None:
        """:meth:`index` without the check of page text."""
        self.report = new_report()
        fp = getattr(corpus, "fingerprint", None)
        content = ["collection", fp] if isinstance(fp, str) and fp else ["digest", self._digest(corpus)]
        key = fingerprint("lexical", _CACHE_FORMAT, self._scoring_settings(), content)
        path = cache_path(self.cache_dir, "lexical", key)
        self.report["cache"] = {"hit": False if path is not None else None, "path": None if path is None else str(path)}
        if path is not None and self._load(path):
            self.report["cache"]["hit"] = True
            return
        self._build(corpus)
        if path is not None:
            write_cache_dir(path, self._save)
            built = (self._ids, self._order, self._retriever, self._vocab, self.report["index"])
            if not self._load(path):  # a damaged entry another process keeps: use the index built here
                self._set_index(*built[:4])
            self.report["index"] = built[4]

    def _scoring_settings(self) -> dict:
        """The part of :attr:`config` that changes the index or the scores (cache key)."""
        c = self.config
        keys = ("method", "k1", "b", "delta", "dtype", "analyzer", "tokenizer", "stemmer", "empty_pages_in_statistics", "scorer",
                "length_norm")
        return {**{k: c[k] for k in keys}, "bm25s": c["versions"]["bm25s"], "PyStemmer": c["versions"]["PyStemmer"]}

    def _batches(self, corpus, seen: set | None):
        """Checked ``(ids, texts)`` batches of ``corpus`` (ids as str; ``seen`` catches duplicates)."""
        for ids, texts in iter_corpus_texts(corpus, self._batch_size):
            out = []
            for key, text in zip(ids, texts):
                i = to_id(key, what="corpus page id")
                if not isinstance(text, str):
                    raise InputError(f"corpus page {i!r}: text must be a str, got {type(text).__name__}", id=i)
                if seen is not None:
                    if i in seen:
                        raise InputError(f"corpus page id {i!r} appears twice after conversion to str", id=i)
                    seen.add(i)
                out.append(i)
            yield out, texts

    def _digest(self, corpus) -> str:
        """sha256 of the corpus' ``(id, text)`` pairs, streamed (:func:`~vdr.retrieve.base.content_digest`)."""
        return content_digest(pair for ids, texts in self._batches(corpus, None) for pair in zip(ids, texts))

    def _build(self, corpus) -> None:
        """Analyse the corpus batch by batch into token ids, then compute the BM25 matrix."""
        import bm25s

        vocab: dict[str, int] = {}
        ids: list[str] = []
        chunks: list[np.ndarray] = []
        lens: list[np.ndarray] = []
        split, term = self._analyze.split, self._analyze.term
        tid: dict[str, int] = {}  # surface token -> term id (-1: a stopword); a memo, cleared when large
        blank = 0  # pages whose text is empty or whitespace (textless_reason)
        for bids, texts in self._batches(corpus, set()):
            flat: list[int] = []
            blens = np.empty(len(bids), dtype=np.int64)
            for j, text in enumerate(texts):
                n0 = len(flat)
                blank += not text.strip()
                for w in split(text):
                    i = tid.get(w)
                    if i is None:
                        if len(tid) >= _MAX_MEMO:
                            tid.clear()
                        t = term(w)
                        i = tid[w] = vocab.setdefault(t, len(vocab)) if t else -1
                    if i >= 0:
                        flat.append(i)
                blens[j] = len(flat) - n0
            ids += bids
            chunks.append(np.asarray(flat, dtype=np.int32))
            lens.append(blens)
        if not ids:
            raise InputError("no corpus page")
        dl = np.concatenate(lens)
        tokens = np.concatenate(chunks)
        del chunks
        c = self.config
        retriever, stats = None, {"num_docs": int((dl > 0).sum()) if self._exclude_empty else len(ids), "avgdl": None}
        lucene = None
        if vocab:
            if self._lucene:
                data, indices, indptr, tf, norms, stats = lucene_bm25_matrix(tokens, dl, len(vocab), k1=c["k1"], b=c["b"])
                nonocc, lucene = None, (tf, norms)
            else:
                data, indices, indptr, nonocc, stats = bm25_matrix(tokens, dl, len(vocab), method=c["method"], k1=c["k1"], b=c["b"],
                                                                   delta=c["delta"], exclude_empty=self._exclude_empty)
            retriever = bm25s.BM25(k1=c["k1"], b=c["b"], delta=c["delta"], method=c["method"], dtype="float32", backend="numpy")
            retriever.scores = {"data": data, "indices": indices, "indptr": indptr, "num_docs": len(ids)}
            retriever.vocab_dict = vocab
            retriever.nonoccurrence_array = nonocc
        del tokens
        self._set_index(ids, id_order(ids), retriever, vocab, lucene, stats)
        empty = np.flatnonzero(dl == 0)
        self.report["index"] = {
            "num_pages": len(ids),
            "num_empty_pages": int(empty.size),
            "num_pages_without_text": blank,
            "empty_pages": [ids[int(i)] for i in empty[:20]],
            "vocabulary_size": len(vocab),
            "avg_page_tokens": float(dl.mean()),
            **stats,
        }

    def _set_index(self, ids: list[str], order: np.ndarray, retriever, vocab: dict[str, int], lucene=None, stats=None) -> None:
        """Adopt an index: ids, their trec_eval order, the CSC matrix (``retriever``), the vocabulary;
        ``lucene``: ``(tf, norms)`` of the Lucene scorer with ``stats`` (``num_docs``, ``avgdl``)."""
        self._ids, self._order, self._retriever, self._vocab = ids, order, retriever, vocab
        self._local = threading.local()
        self._lucene_arrays = None
        if retriever is not None:
            s = retriever.scores  # plain ndarray views of the memory maps (no np.memmap per-slice overhead)
            self._csc = (np.asarray(s["data"]), np.asarray(s["indices"]), np.array(s["indptr"], dtype=np.int64))
            self._nonocc = retriever.nonoccurrence_array
            if lucene is not None:  # what a boosted (repeated) query term needs: tf, norms, idf's N, the norm cache
                tf, norms = (np.asarray(a) for a in lucene)
                self._lucene_arrays = (tf, norms, int(stats["num_docs"]), lucene_norm_inverse(self.config["k1"], self.config["b"], stats["avgdl"]))

    def _save(self, folder: Path) -> None:
        """Write the index into ``folder`` (bm25s ``save`` with ``allow_pickle=False``, plus JSON and ``order.npy``)."""
        meta = {"format": _CACHE_FORMAT, "ids": self._ids, "index": self.report["index"], "config": self._scoring_settings()}
        if self._retriever is not None:
            self._retriever.save(str(folder), allow_pickle=False, show_progress=False)
        if self._lucene_arrays is not None:
            np.save(folder / _LUCENE_TF, self._lucene_arrays[0], allow_pickle=False)
            np.save(folder / _LUCENE_NORMS, self._lucene_arrays[1], allow_pickle=False)
        np.save(folder / _ORDER, self._order, allow_pickle=False)
        (folder / _META).write_text(json.dumps(meta, ensure_ascii=False), encoding="utf-8")

    def _load(self, folder: Path) -> bool:
        """Load a cached index, memory-mapped; ``False`` (a miss) when it is absent or incomplete."""
        meta = read_json(folder / _META)
        if meta is None or meta.get("format") != _CACHE_FORMAT or not isinstance(meta.get("ids"), list):
            return False
        retriever = lucene = None
        try:
            order = np.load(folder / _ORDER, allow_pickle=False)
            if meta["index"]["vocabulary_size"]:
                retriever = _StoredIndex(folder)
                if self._lucene:
                    lucene = tuple(np.load(folder / f, allow_pickle=False, mmap_mode="r") for f in (_LUCENE_TF, _LUCENE_NORMS))
        except (OSError, ValueError, KeyError, TypeError):
            return False
        if order.shape != (len(meta["ids"]),):
            return False
        self._set_index(meta["ids"], order, retriever, {} if retriever is None else retriever.vocab_dict, lucene, meta["index"])
        self.report["index"] = meta["index"]
        return True

    # ------------------------------------------------------------------ search

    def search(self, queries, depth: int = 100) -> Run:
        """Rank the corpus for each query; keep the ``depth`` best pages that contain a query term.

        Args:
            queries: a :class:`~vdr.types.QuerySet` (one variant) or ``{query_id: text}`` (non-empty
                texts; ids str or integers). Identical texts are analysed and ranked once.
            depth: pages kept per query (>= 1).

        Returns:
            :class:`~vdr.types.Run` with every query id (possibly with an empty ranking); scores are
            the float32 BM25 scores widened to float. Deterministic. Every text first goes through
            the query budget (:func:`~vdr.retrieve.budget.apply_budget`, as the ``pyserini``
            backend). Records ``{"num_queries", "num_queries_without_known_terms",
            "queries_without_known_terms" (ids, first 50), "depth"}`` and the budget stats
            (``max_query_tokens``, ``num_queries_cut``, ``queries_cut``, ``num_tokens_dropped``) in
            ``report["searches"][variant]``.

        Raises:
            InputError: :meth:`index` was not called, no queries, a bad id, a non-str, empty or
                whitespace-only text, a bad ``depth``.
        """
        if self._ids is None:
            raise InputError("BM25Backend.search: call index(corpus) first")
        qs, variant, depth = search_inputs(queries, depth)
        fitted, budget = apply_budget(qs, self.max_query_tokens)
        out: dict[str, dict[str, float]] = {}
        no_terms: list[str] = []
        vocab = self._vocab
        terms: dict[str, list[int]] = {}  # each distinct text -> its known term ids, in query order
        for text in fitted.values():
            if text not in terms:
                terms[text] = [vocab[t] for t in self._analyze(text) if t in vocab] if self._retriever is not None else []
        kernel = self._scorer(terms.values())
        done: dict[str, dict[str, float] | None] = {}
        for qid, text in fitted.items():
            if text not in done:
                tids = terms[text]
                done[text] = self._rank(tids, depth, kernel) if tids else None
                ranking = done[text]
            else:  # the same text again: an equal, separate ranking
                ranking = None if done[text] is None else dict(done[text])
            if ranking is None:
                no_terms.append(qid)
            out[qid] = {} if ranking is None else ranking
        self.report["searches"][variant] = {
            "num_queries": len(qs),
            "num_queries_without_known_terms": len(no_terms),
            "queries_without_known_terms": no_terms[:50],
            "depth": depth,
            **budget,
        }
        return Run.from_checked(out, "bm25")

    def _scorer(self, term_lists):
        """The numba kernel (:func:`_numba_kernel`) when it pays for itself here, else ``None`` (NumPy).

        Loading numba and its compiled kernel costs about a second per process even from numba's
        disk cache; the kernel saves about 80 ns per posting over the NumPy scorer. So it is
        loaded once the searches of this process have scored ``_JIT_MIN_POSTINGS`` postings in
        all (in queries of two or more terms; one-term queries need no accumulation): one large
        search, or the many batches of a long-running reward server. It is then kept for the
        process. Both scorers give bit-identical scores, so the choice never changes a result.
        """
        if _KERNEL:
            return _KERNEL[0]
        multi = [t for t in term_lists if len(t) > 1]
        if not multi:
            return None
        indptr = self._csc[2]
        flat = np.fromiter(itertools.chain.from_iterable(multi), dtype=np.int64)
        _WORK[0] += int((indptr[flat + 1] - indptr[flat]).sum())
        return _numba_kernel() if _WORK[0] >= _JIT_MIN_POSTINGS else None

    def _rank(self, tids: list[int], depth: int, kernel=None) -> dict[str, float]:
        """The ``depth`` best pages for query term ids ``tids`` (non-empty, in query order), scored
        by ``kernel`` (see :meth:`_scorer`; ``None``: NumPy).

        Scores are accumulated in float32 term by term in query order, as bm25s's
        ``get_scores_from_ids`` does (so every score is bit-identical to bm25s's); only the pages
        in the postings of the terms are touched (the candidates: the distinct pages of their
        postings, found by a sort of the postings, not of the collection).
        """
        if self._lucene:
            return self._rank_lucene(tids, depth, kernel)
        data, indices, indptr = self._csc
        tarr = np.asarray(tids, dtype=np.int64)
        starts, ends = indptr[tarr].tolist(), indptr[tarr + 1].tolist()
        if len(tids) == 1:
            cand = indices[starts[0] : ends[0]].astype(np.int64)
            s = data[starts[0] : ends[0]] + np.float32(0.0)  # a copy; -0.0 -> 0.0 as bm25s's zeros + x
        elif kernel is not None:
            acc, seen, buf = self._buffers()
            cand, s = kernel(data, indices, indptr, tarr, acc, seen, buf)
        else:
            cand, s = self._accumulate(starts, ends)
        if self._nonocc is not None:  # bm25l / bm25+: the non-occurrence part, added as bm25s does
            s = s + self._nonocc[np.asarray(tids, dtype=np.int32)].sum()
        return top_depth(s, cand, self._order, self._ids, depth)

    def _rank_lucene(self, tids: list[int], depth: int, kernel=None) -> dict[str, float]:
        """Lucene's ranking (``method="lucene"`` with the ``lucene`` analyzer): the distinct terms of
        ``tids``, each boosted by its count; clause scores (float32) added in float64 and rounded to
        float32; the cut by score desc, corpus id asc; then :func:`anserini_tie_adjust`."""
        counts: dict[int, int] = {}
        for t in tids:
            counts[t] = counts.get(t, 0) + 1
        data, indices, indptr = self._csc
        uniq = list(counts)
        boosted = {t: self._boosted_scores(t, c) for t, c in counts.items() if c != 1}
        if len(uniq) == 1:
            t = uniq[0]
            cand = indices[indptr[t] : indptr[t + 1]].astype(np.int64)
            s = boosted[t] if t in boosted else data[indptr[t] : indptr[t + 1]] + np.float32(0.0)
        elif kernel is not None and not boosted:
            acc, seen, buf = self._buffers()
            cand, s = kernel(data, indices, indptr, np.asarray(uniq, dtype=np.int64), acc, seen, buf)
        else:
            tarr = np.asarray(uniq, dtype=np.int64)
            cand, s = self._accumulate(indptr[tarr].tolist(), indptr[tarr + 1].tolist(), [boosted.get(t) for t in uniq])
            s = s.astype(np.float32)  # the float64 sum rounded to float32, as Lucene's (float) cast
        ranking = top_depth(s, cand, self._order, self._ids, depth, ids_ascending=True)
        return dict(zip(ranking, anserini_tie_adjust(list(ranking.values()))))

    def _boosted_scores(self, t: int, count: int) -> np.ndarray:
        """Lucene's float32 scores of term ``t`` in its postings as a clause boosted by ``count``:
        ``w - w / (1 + tf * cache[norm])``, ``w = count * idf`` (float32 throughout)."""
        tf, norms, n_docs, inverse = self._lucene_arrays
        _, indices, indptr = self._csc
        a, b = int(indptr[t]), int(indptr[t + 1])
        w = np.float32(count) * lucene_idf(np.array([b - a]), n_docs)[0]
        return lucene_term_scores(w, tf[a:b], inverse[norms[indices[a:b]]])

    def _accumulate(self, starts: list[int], ends: list[int], values: list | None = None) -> tuple[np.ndarray, np.ndarray]:
        """NumPy scoring of the postings ``[starts[i], ends[i])`` in query order: ``(candidate pages
        int64, their scores)``; the candidates are the distinct pages of the postings. The scores
        are added in the accumulator's dtype (float32, as bm25s; float64 for the Lucene scorer);
        ``values[i]``, when given and not ``None``, replaces the stored scores of term ``i``."""
        data, indices, _ = self._csc
        acc = self._buffers()[0]
        try:
            parts = []
            for i, (a, b) in enumerate(zip(starts, ends)):
                docs = indices[a:b]
                v = values[i] if values is not None and values[i] is not None else data[a:b]
                np.add.at(acc, docs, v)  # term by term in query order, as bm25s
                parts.append(docs)
            cat = np.concatenate(parts)
            cat.sort()  # the distinct pages of the postings (np.unique is 20x slower here on NumPy 2.x)
            keep = np.empty(cat.shape[0], dtype=bool)
            keep[0] = True
            np.not_equal(cat[1:], cat[:-1], out=keep[1:])
            cand = cat[keep].astype(np.int64)
            s = acc[cand]
            acc[cand] = 0.0  # the buffer is all zeros again
        except BaseException:  # interrupted: drop the buffers, they may not be all zeros
            self._local.buf = None
            raise
        return cand, s

    def _buffers(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """This thread's score accumulator (float32 zeros; float64 for the Lucene scorer), page flags
        (bool, False) and candidate buffer (int64), ``(n_pages,)`` each, kept between queries (thread-local: searches may run in
        several threads; the scorers return them to zeros / False)."""
        n = len(self._ids)
        buf = getattr(self._local, "buf", None)
        if buf is None or buf[0].shape[0] != n:
            dtype = np.float64 if self._lucene else np.float32  # Lucene adds the clause scores in double
            buf = self._local.buf = (np.zeros(n, dtype=dtype), np.zeros(n, dtype=bool), np.empty(n, dtype=np.int64))
        return buf

    def __repr__(self) -> str:
        n = self.report["index"].get("num_pages", 0)
        return f"BM25Backend({n} pages, method={self.config['method']!r}, k1={self.config['k1']}, b={self.config['b']})"


class _StoredIndex:
    """An index saved by ``bm25s.BM25.save`` read back with NumPy, as ``bm25s.BM25.load(folder,
    mmap=True, allow_pickle=False)`` reads it, without importing bm25s (numba, scipy.sparse and
    tqdm: about half a second per process). Holds the attributes of ``bm25s.BM25`` vdr uses.

    Attributes:
        scores: ``{"data": float32 (nnz,), "indices": int32 (nnz,), "indptr": int64 (n_terms + 1,)``
            (memory-mapped, read-only), ``"num_docs": int}``: the CSC score matrix.
        vocab_dict: ``{term: term id}``.
        nonoccurrence_array: float32 ``(n_terms,)`` for ``bm25l`` / ``bm25+``, else ``None``.

    Raises:
        OSError / ValueError / KeyError: a missing or damaged file (the caller treats it as a miss).
    """

    _FILES = {"data": "data.csc.index.npy", "indices": "indices.csc.index.npy", "indptr": "indptr.csc.index.npy"}

    def __init__(self, folder: Path) -> None:
        params = json.loads((folder / "params.index.json").read_text(encoding="utf-8"))
        self.vocab_dict: dict[str, int] = json.loads((folder / "vocab.index.json").read_text(encoding="utf-8"))
        self.scores = {k: np.load(folder / f, allow_pickle=False, mmap_mode="r") for k, f in self._FILES.items()}
        self.scores["num_docs"] = params.get("num_docs")
        nonocc = folder / "nonoccurrence_array.index.npy"
        self.nonoccurrence_array = np.load(nonocc, allow_pickle=False) if params["method"] in ("bm25l", "bm25+") else None


_KERNEL: list = []  # [compiled kernel or None], filled on first use
_JIT_MIN_POSTINGS = 10_000_000  # postings scored in a process from which numba is worth loading (BM25Backend._scorer)
_WORK = [0]  # postings scored by multi-term queries in this process so far


def _numba_kernel():
    """The numba-compiled scorer when numba is installed (and ``VDR_NUMBA`` is not ``0``), else
    ``None`` (the NumPy path). Both add float32 scores term by term in query order: same values."""
    if not _KERNEL:
        kernel = None
        if os.environ.get("VDR_NUMBA", "1") != "0":
            try:
                import numba
            except ImportError:
                numba = None
            if numba is not None:
                kernel = _jit(numba)
        _KERNEL.append(kernel)
    return _KERNEL[0]


def _jit(numba):
    """:func:`_score_postings` compiled with numba's on-disk cache (``cache=True``): the machine code
    is saved once and loaded by later processes instead of compiled again (the first call then
    takes about 0.5 s instead of about 1 s). numba keeps it in ``NUMBA_CACHE_DIR`` when that is
    set, else in ``__pycache__`` next to this file, or, where that is read-only, in the user cache
    folder (``~/.cache/numba``); it recompiles when this file changes. Without any writable folder
    numba refuses to cache: compiled per process then."""
    try:
        return numba.njit(nogil=True, cache=True)(_score_postings)
    except RuntimeError:  # "cannot cache function ...: no locator available"
        return numba.njit(nogil=True, cache=False)(_score_postings)


def _score_postings(data, indices, indptr, tids, acc, seen, buf):
    """Scores of the pages in the postings of ``tids`` (numba-compiled; plain Python otherwise).

    Args:
        data, indices, indptr: the CSC score matrix (float32, int32, int64).
        tids: int64 ``(n_terms,)`` query term ids in query order.
        acc, seen, buf: float32 zeros, bool False and int64 scratch, ``(n_pages,)`` each; ``acc`` and
            ``seen`` are all zeros / False again on return.

    Returns:
        ``(candidates int64 (m,), scores float32 (m,))``, candidates in first-seen order.
    """
    n = 0
    for k in range(tids.shape[0]):
        t = tids[k]
        for j in range(indptr[t], indptr[t + 1]):
            d = indices[j]
            if not seen[d]:
                seen[d] = True
                buf[n] = d
                n += 1
            acc[d] += data[j]
    cand = buf[:n].copy()
    s = np.empty(n, dtype=np.float32)
    for i in range(n):
        d = cand[i]
        s[i] = acc[d]
        acc[d] = 0.0
        seen[d] = False
    return cand, s


def top_depth(scores: np.ndarray, candidates: np.ndarray, order: np.ndarray, ids: list[str], depth: int, *,
              ids_ascending: bool = False) -> dict[str, float]:
    """The ``depth`` best of ``candidates`` in trec_eval order (score descending, then corpus id
    descending); the same result as :func:`vdr.retrieve._common.top_k` on these candidates.
    ``ids_ascending``: ties by corpus id ascending instead (Anserini's ``BREAK_SCORE_TIES_BY_DOCID``
    sort: score, then the ``id`` field's bytes).

    ``np.argpartition``-style preselection: only the candidates scoring at least the
    ``depth``-th best score (ties at that boundary all kept) are sorted.

    Args:
        scores: float32 or float64 ``(n_candidates,)``, the score of each candidate.
        candidates: int ``(n_candidates,)``, page positions (distinct).
        order: :func:`~vdr.retrieve._common.id_order` of ``ids``, int64 ``(n_pages,)``.
        ids: corpus ids. depth: pages kept (>= 1).

    Returns:
        ``{corpus_id: float score}`` best first.
    """
    m = scores.shape[0]
    if m == 0:
        return {}
    if m > depth:
        kth = np.partition(scores, m - depth)[m - depth]
        keep = np.flatnonzero(scores >= kth)
        scores, candidates = scores[keep], candidates[keep]
    s = scores.astype(np.float64)
    sel = np.lexsort((order[candidates] if ids_ascending else -order[candidates], -s))[:depth]
    return {ids[c]: v for c, v in zip(candidates[sel].tolist(), s[sel].tolist())}


def bm25_matrix(tokens: np.ndarray, lengths: np.ndarray, n_vocab: int, *, method: str, k1: float, b: float, delta: float,
                exclude_empty: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None, dict]:
    """bm25s's eager BM25 score matrix, computed with NumPy from a flat token-id array.

    The values are those of ``bm25s.BM25.index`` (same formulas: bm25s's own idf and tf-component
    functions, same float64 arithmetic and float32 rounding), without its per-document Python loop.

    Args:
        tokens: int32 ``(total_tokens,)``, the token ids of every page one after the other.
        lengths: int64 ``(n_pages,)``, tokens per page (0 for a page without terms).
        n_vocab: vocabulary size (every id in ``tokens`` is below it; every id occurs).
        method, k1, b, delta: the BM25 variant and parameters (see :class:`BM25Backend`).
        exclude_empty: leave pages without terms out of ``N`` and ``avgdl`` (Lucene's statistics).

    Returns:
        ``(data float32 (nnz,), indices int32 (nnz,), indptr int64 (n_vocab + 1,),
        nonoccurrence float32 (n_vocab,) or None, {"num_docs": N, "avgdl": avgdl})``: the CSC matrix
        (pages x terms, column ``t`` = the pages containing term ``t``, ascending).
    """
    from bm25s.scoring import _select_idf_scorer, _select_tfc_scorer

    term, indices, tf, df, indptr = _postings(tokens, lengths, n_vocab)
    used = lengths[lengths > 0] if exclude_empty else lengths
    n_docs, avgdl = int(used.shape[0]), used.mean()  # np.float64, as bm25s's ``np.array(lens).mean()``
    idf_fn, tfc_fn = _select_idf_scorer(method), _select_tfc_scorer(method)
    dfs, inverse = np.unique(df, return_inverse=True)  # idf with bm25s's scalar function, once per df value
    idf = np.array([idf_fn(int(d), N=n_docs) for d in dfs], dtype=np.float32)[inverse]
    nonocc = None
    if method in ("bm25l", "bm25+"):
        tfc0 = tfc_fn(tf_array=0, l_d=avgdl, l_avg=avgdl, k1=k1, b=b, delta=delta)
        nonocc = np.array([idf_fn(int(d), N=n_docs) * tfc0 for d in dfs], dtype=np.float32)[inverse]
    data = np.empty(tf.shape[0], dtype=np.float32)
    step = 1 << 22
    for a in range(0, tf.shape[0], step):  # bounded float64 temporaries
        sl = slice(a, a + step)
        tfc = tfc_fn(tf_array=tf[sl].astype(np.float32), l_d=lengths[indices[sl]], l_avg=avgdl, k1=k1, b=b, delta=delta)
        sc = idf[term[sl]] * tfc
        if nonocc is not None:
            sc -= nonocc[term[sl]]
        data[sl] = sc
    return data, indices, indptr, nonocc, {"num_docs": n_docs, "avgdl": float(avgdl)}


def _postings(tokens: np.ndarray, lengths: np.ndarray, n_vocab: int) -> tuple[np.ndarray, ...]:
    """The postings of a flat token-id array in CSC order (by term, then page): ``(term int32
    (nnz,), page int32 (nnz,), tf int64 (nnz,), df int64 (n_vocab,), indptr int64 (n_vocab + 1,))``."""
    n_pages = lengths.shape[0]
    key = (tokens.astype(np.int64) << 32) | np.repeat(np.arange(n_pages, dtype=np.int64), lengths)
    key.sort()  # by (term, page): CSC order (np.unique(return_counts=True) is far slower on NumPy 2.x)
    first = np.flatnonzero(np.concatenate(([True], key[1:] != key[:-1])))
    tf = np.diff(np.append(first, key.shape[0]))
    key = key[first]
    term = (key >> 32).astype(np.int32)
    indices = (key & 0xFFFFFFFF).astype(np.int32)
    del key
    df = np.bincount(term, minlength=n_vocab)
    indptr = np.zeros(n_vocab + 1, dtype=np.int64)
    np.cumsum(df, out=indptr[1:])
    return term, indices, tf, df, indptr


# ------------------------------------------------------------------------------ Lucene's BM25Similarity

#: ``SmallFloat``'s values stored as themselves: ``255 - longToInt4(Integer.MAX_VALUE)`` = 255 - 231
_NUM_FREE_VALUES = 24


def lucene_length_norm(lengths: np.ndarray) -> np.ndarray:
    """Lucene's one-byte document length norm, ``SmallFloat.intToByte4(length)`` (Lucene 9
    ``BM25Similarity.computeNorm``; the length is the number of indexed terms).

    Lengths 0..23 are stored as themselves; a longer length ``n`` as 24 + ``longToInt4(n - 24)``:
    its 4 most significant bits (3 stored, the leading 1 implicit) and the shift. So a decoded
    length (:func:`lucene_decoded_length`) is exact up to 39, then rounded down to a multiple of 2
    (up to 55), 4 (87), 8 (151), 16 (279), ...

    Args:
        lengths: int array (any shape), every value in ``[0, 2**31)``.

    Returns:
        uint8 array of the same shape.
    """
    n = np.asarray(lengths, dtype=np.int64)
    i = np.maximum(n - _NUM_FREE_VALUES, 0)
    bits = np.where(i > 0, np.frexp(i.astype(np.float64))[1], 0)  # 64 - numberOfLeadingZeros(i), exact below 2**53
    shift = np.maximum(bits - 4, 0)
    normal = ((i >> shift) & 0x07) | ((shift + 1) << 3)
    enc = np.where(bits < 4, i, normal)
    return np.where(n < _NUM_FREE_VALUES, n, _NUM_FREE_VALUES + enc).astype(np.uint8)


def lucene_decoded_length(norms: np.ndarray) -> np.ndarray:
    """The length Lucene's BM25 uses for a norm byte, ``SmallFloat.byte4ToInt`` (Lucene 9
    ``BM25Similarity.LENGTH_TABLE``): int64 array of the shape of ``norms`` (uint8)."""
    b = np.asarray(norms, dtype=np.int64)
    e = np.maximum(b - _NUM_FREE_VALUES, 0)
    shift = (e >> 3) - 1
    decoded = np.where(shift < 0, e & 0x07, ((e & 0x07) | 0x08) << np.maximum(shift, 0))
    return np.where(b < _NUM_FREE_VALUES, b, np.minimum(_NUM_FREE_VALUES + decoded, 2**31 - 1))


def lucene_idf(df: np.ndarray, n_docs: int) -> np.ndarray:
    """Lucene's BM25 idf, ``(float) Math.log(1 + (docCount - docFreq + 0.5) / (docFreq + 0.5))``:
    float32 array of the shape of ``df`` (ints), computed in float64, as Java's doubles."""
    d = np.asarray(df, dtype=np.float64)
    return np.log(1.0 + (n_docs - d + 0.5) / (d + 0.5)).astype(np.float32)


def lucene_norm_inverse(k1: float, b: float, avgdl: float) -> np.ndarray:
    """``BM25Similarity``'s per-query cache, float32 ``(256,)``: for norm byte ``i``,
    ``1 / (k1 * ((1 - b) + b * LENGTH_TABLE[i] / avgdl))`` in float32, operation by operation as
    Java evaluates it (``k1``, ``b``, ``avgdl`` are Java floats)."""
    k1f, bf, avg = np.float32(k1), np.float32(b), np.float32(avgdl)
    length = lucene_decoded_length(np.arange(256)).astype(np.float32)
    with np.errstate(divide="ignore"):
        return np.float32(1.0) / (k1f * ((np.float32(1.0) - bf) + bf * length / avg))


def lucene_term_scores(weight, tf: np.ndarray, inverse: np.ndarray) -> np.ndarray:
    """``BM25Scorer.score``: ``weight - weight / (1 + tf * inverse)`` in float32 (Lucene 9 rewrites
    ``tf / (tf + norm)`` that way), with ``weight = boost * idf`` (one float32, or one per
    posting). ``tf`` ints and ``inverse`` float32, same shape; float32 of that shape returned."""
    w = np.asarray(weight, dtype=np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        return w - w / (np.float32(1.0) + tf.astype(np.float32) * inverse)


def lucene_bm25_matrix(tokens: np.ndarray, lengths: np.ndarray, n_vocab: int, *, k1: float, b: float) -> tuple:
    """The score matrix of Lucene 9's ``BM25Similarity`` (as Pyserini / Anserini search), each
    posting's float32 score as one clause of boost 1.

    Statistics as Lucene's: ``N`` = ``docCount`` (pages with at least one term), ``avgdl`` =
    ``(float) (sumTotalTermFreq / docCount)`` (exact lengths), each page's length through the
    one-byte norm (:func:`lucene_length_norm`); scores by :func:`lucene_idf`,
    :func:`lucene_norm_inverse` and :func:`lucene_term_scores`.

    Args:
        tokens: int32 ``(total_tokens,)``, the token ids of every page one after the other.
        lengths: int64 ``(n_pages,)``, tokens per page (0 for a page without terms).
        n_vocab: vocabulary size. k1, b: BM25 parameters (used as Java floats).

    Returns:
        ``(data float32 (nnz,), indices int32 (nnz,), indptr int64 (n_vocab + 1,), tf (nnz,) as the
        smallest unsigned int type that holds it, norms uint8 (n_pages,), {"num_docs", "avgdl",
        "sum_total_term_freq", "length_norm"})``: the CSC matrix as :func:`bm25_matrix` returns it,
        and what scoring a boosted clause needs.

    Raises:
        InputError: no page has a term.
    """
    term, indices, tf, df, indptr = _postings(tokens, lengths, n_vocab)
    n_docs, total = int((lengths > 0).sum()), int(lengths.sum())
    if n_docs == 0:
        raise InputError("no page has a term")
    avgdl = np.float32(total / n_docs)  # (float) (sumTotalTermFreq / (double) docCount)
    norms = lucene_length_norm(lengths)
    inverse = lucene_norm_inverse(k1, b, avgdl)
    dfs, inv_df = np.unique(df, return_inverse=True)
    idf = lucene_idf(dfs, n_docs)[inv_df]
    data = np.empty(tf.shape[0], dtype=np.float32)
    step = 1 << 22
    for a in range(0, tf.shape[0], step):  # bounded temporaries
        sl = slice(a, a + step)
        data[sl] = lucene_term_scores(idf[term[sl]], tf[sl], inverse[norms[indices[sl]]])  # boost 1: weight = idf
    top = int(tf.max()) if tf.shape[0] else 0
    small = np.uint8 if top <= 0xFF else np.uint16 if top <= 0xFFFF else np.uint32
    stats = {"num_docs": n_docs, "avgdl": float(avgdl), "sum_total_term_freq": total, "length_norm": _LUCENE_NORM}
    return data, indices, indptr, tf.astype(small), norms, stats


def anserini_tie_adjust(scores: list[float]) -> list[float]:
    """Anserini's ``ScoreTiesAdjusterReranker``, which every Pyserini ``LuceneSearcher`` search runs
    on its hits (score desc, then id asc): each score is rounded to 4 decimals
    (``(float) (Math.round(score * 10000.0) / 10000.0)``); a score at most ``1e-4f`` below the
    (adjusted) one before it is the ``d``-th of a run of ties and is lowered by ``1e-6f * d``, so
    that the order survives a trec_eval sort by score. Float32 arithmetic as Java's.

    Args:
        scores: the hits' float32 scores (as Python floats), best first.

    Returns:
        The adjusted scores (float32 values as Python floats), same length and order.
    """
    out: list[float] = []
    prev = np.float32(0.0)
    dup = 0
    step, gap = np.float32(1e-6), np.float32(1e-4)
    for i, x in enumerate(scores):
        r = np.float32(math.floor(float(x) * 10000.0 + 0.5) / 10000.0)  # Java Math.round: floor(x + 0.5)
        if i == 0 or prev - r > gap:
            dup = 0
        else:
            dup += 1
            r = r - step * np.float32(dup)
        out.append(float(r))
        prev = r
    return out


def build(ctx: BuildContext) -> BM25Backend:
    """Registry factory: ``BM25Backend(ctx.options)`` (checked :class:`LexicalOptions`) with the
    experiment's cache folder.

    Raises:
        InputError: a bad value (see :class:`BM25Backend`).
    """
    return BM25Backend(ctx.options, cache_dir=ctx.cache_dir, name=ctx.name)


build.Options = LexicalOptions


_CACHE_FORMAT = 4  # 4: the index report counts pages without text (num_pages_without_text); 3: the lucene analyzer is Lucene's token for token, and Lucene's BM25 scorer
_META = "vdr-index.json"
_ORDER = "order.npy"
_LUCENE_TF = "lucene_tf.npy"
_LUCENE_NORMS = "lucene_norms.npy"
_LUCENE_NORM = "lucene one-byte norm (SmallFloat.intToByte4 / byte4ToInt of the number of terms)"
_LUCENE_FORMULA = ("sum_t float(c * idf) - float(c * idf) / (1 + tf * cache[norm]), idf = float(ln(1 + (N - df + 0.5)/(df + 0.5))), "
                   "cache[i] = 1 / (k1 * ((1 - b) + b * byte4ToInt(i) / avgdl)); c: the term's count in the query; float32 "
                   "(Lucene 9 BM25Similarity), clauses added in float64")
_LUCENE_TIES = ("depth cut: score desc, corpus id asc (Anserini BREAK_SCORE_TIES_BY_DOCID); then Anserini's "
                "ScoreTiesAdjusterReranker: scores rounded to 4 decimals, a score within 1e-4 of the one above lowered by 1e-6 "
                "per tied position; the run is in that order (score desc, corpus id desc for any tie left)")
_MAX_MEMO = 4_000_000


_FORMULAS = {
    "lucene": "sum_t ln(1 + (N - df + 0.5)/(df + 0.5)) * tf / (tf + k1 * (1 - b + b * dl/avgdl))",
    "robertson": "sum_t max(0, ln((N - df + 0.5)/(df + 0.5))) * tf / (tf + k1 * (1 - b + b * dl/avgdl))",
    "atire": "sum_t ln(N/df) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl/avgdl))",
    "bm25l": "sum_t ln((N + 1)/(df + 0.5)) * (k1 + 1)(c + delta) / (k1 + c + delta), c = tf / (1 - b + b * dl/avgdl)",
    "bm25+": "sum_t ln((N + 1)/df) * ((k1 + 1) tf / (k1 * (1 - b + b * dl/avgdl) + tf) + delta)",
}
