"""Lexical backend: BM25 over page text, scored by bm25s (Lù 2024, arXiv 2407.03618).

Tokenisation (done here, so that it is explicit and recorded): Unicode NFKC (:mod:`vdr.text`), lower-case, the bm25s / scikit-learn
token pattern ``(?u)\\b\\w\\w+\\b`` (words of 2+ word characters), stopwords removed (bm25s's lists),
then stemming with PyStemmer's Snowball stemmers when requested and installed.

Scoring is bm25s's eager sparse index. With the default ``method="lucene"`` (Lucene >= 8 BM25,
as catalogued by Kamphuis, de Vries, Boytsov & Lin 2020, "Which BM25 do you mean?", ECIR), a page
``D`` scores, for query tokens ``t`` (each occurrence in the query counts once more)::

    score(D, Q) = sum_t  idf(t) * tf(t, D) / (tf(t, D) + k1 * (1 - b + b * |D| / avgdl))
    idf(t)      = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))

with ``N`` pages (pages without any token included: they count in ``N`` and, with length 0, in
``avgdl``), in float32. Other ``method`` values: ``robertson``, ``atire``, ``bm25l``, ``bm25+``.

Ranking rules (documented choices):

* A page is ranked for a query only if it contains at least one of the query's tokens (as Lucene
  and Pyserini do). Pages with empty text therefore never appear in a ranking; they are counted in
  :attr:`BM25Backend.report` (``num_empty_pages``).
* A query none of whose tokens is in the index vocabulary (all out-of-vocabulary, all stopwords, or
  no token at all) gets an **empty ranking** (the query id is in the run with no pages, so every
  metric is 0 for it); such queries are counted and listed in ``BM25Backend.report["searches"]``.
* Order and the ``depth`` cut follow trec_eval: score descending, then corpus id descending.
* The index is cached on disk (``cache_dir/lexical/<fingerprint>/``), so a re-run loads it
  instead of tokenising and indexing every page again.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..errors import InputError
from ..text import TEXT_POLICY, normalize_text
from ..types import Run
from ._common import check_depth, check_texts, id_order, top_k, version_of
from .base import BuildContext, cache_path, content_digest, corpus_texts, fingerprint, new_report, query_texts, read_json, write_cache_dir

__all__ = ["BM25Backend", "STOPWORD_LANGUAGES", "BM25_METHODS", "TOKEN_PATTERN"]

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


def _resolve_stopwords(stopwords: object) -> tuple[frozenset[str], object]:
    """(set of lower-cased stopwords, what to record)."""
    if stopwords is None or stopwords is False:
        return frozenset(), None
    if isinstance(stopwords, str):
        code = _LANGUAGE_NAMES.get(stopwords.lower(), stopwords.lower())
        if code not in STOPWORD_LANGUAGES:
            raise InputError(f"unknown stopword language {stopwords!r}; known: {', '.join(STOPWORD_LANGUAGES)}, or None, or a list of words")
        import bm25s.stopwords

        return frozenset(w.lower() for w in getattr(bm25s.stopwords, STOPWORD_LANGUAGES[code])), code
    if isinstance(stopwords, (list, tuple, set, frozenset)) and all(isinstance(w, str) for w in stopwords):
        words = sorted({w.lower() for w in stopwords})
        return frozenset(words), words
    raise InputError(f"stopwords must be a language code, None or a list of str, got {stopwords!r}")


class BM25Backend:
    """BM25 retrieval over page text (bm25s): a :class:`~vdr.retrieve.base.Backend`.

    Args:
        k1: term-frequency saturation, >= 0 (default 1.5, bm25s's default).
        b: length normalisation in [0, 1] (default 0.75).
        method: bm25s variant, one of :data:`BM25_METHODS` (default ``"lucene"``).
        delta: the delta of ``bm25l`` / ``bm25+`` (ignored by the others; recorded anyway).
        stemmer: ``"auto"`` (default: PyStemmer's ``"english"`` when PyStemmer is installed, else no
            stemming), a PyStemmer language (``"english"``, ``"porter"``, ... ; needs PyStemmer), or
            ``None`` for no stemming. What was used is recorded in :attr:`config`.
        stopwords: a language code or name (``"en"``, ``"english"``, ``"de"``, ...; bm25s's lists),
            a list of words, or ``None`` (keep every token). Default ``"en"``.
        lower: lower-case before tokenising (default True).
        cache_dir: root of the index cache; the index is kept in
            ``cache_dir/lexical/<fingerprint>/`` (bm25s's own ``save`` format: ``.npy`` arrays written
            with ``allow_pickle=False`` and JSON, plus vdr's ``vdr-index.json``). The fingerprint
            covers the page ids and texts and every setting in :attr:`config` that changes scores.
            ``None``: no cache.
        name: the backend's name in results (default ``"lexical"``).

    Attributes:
        config: every parameter as used, tokenizer details and library versions (JSON-ready).
        report: ``page_forward_passes`` (always 0: no model), ``cache``, ``index``: ``num_pages``,
            ``num_empty_pages`` (pages without any token after tokenisation, never ranked),
            ``empty_pages`` (their ids, first 20), ``vocabulary_size``, ``avg_page_tokens``;
            ``searches``: per variant, see :meth:`search`.

    Raises:
        InputError: a parameter out of range, an unknown method, stopword language or stemmer
            language, or a stemmer language without PyStemmer.
    """

    def __init__(
        self,
        *,
        k1: float = 1.5,
        b: float = 0.75,
        method: str = "lucene",
        delta: float = 0.5,
        stemmer: str | None = "auto",
        stopwords: str | Sequence[str] | None = "en",
        lower: bool = True,
        cache_dir: str | Path | None = None,
        name: str = "lexical",
    ) -> None:
        for pname, v, lo, hi in (("k1", k1, 0.0, float("inf")), ("b", b, 0.0, 1.0), ("delta", delta, 0.0, float("inf"))):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not (lo <= float(v) <= hi):
                raise InputError(f"BM25 {pname} must be a number in [{lo}, {hi}], got {v!r}")
        if method not in BM25_METHODS:
            raise InputError(f"unknown BM25 method {method!r}; known: {', '.join(BM25_METHODS)}")
        self._stop, stop_record = _resolve_stopwords(stopwords)
        self._stem, stem_record = self._resolve_stemmer(stemmer)
        self._lower = bool(lower)
        self._split = re.compile(TOKEN_PATTERN).findall
        self.name = name
        self.cache_dir = None if cache_dir is None else Path(cache_dir)
        self.report: dict = new_report()
        self._retriever = None
        self._ids: list[str] | None = None
        self.config: dict = {
            "backend": "lexical",
            "scorer": "bm25s",
            "method": method,
            "formula": _FORMULAS[method],
            "k1": float(k1),
            "b": float(b),
            "delta": float(delta),
            "dtype": "float32",
            "tokenizer": {"text": TEXT_POLICY, "lower": self._lower, "token_pattern": TOKEN_PATTERN, "stopwords": stop_record, "num_stopwords": len(self._stop)},
            "stemmer": stem_record,
            "stemmer_requested": stemmer,
            "empty_pages": "never ranked (a page is ranked only when it contains a query token)",
            "queries_without_known_terms": "empty ranking",
            "tie_break": "score desc, corpus id desc (trec_eval)",
            "versions": {"bm25s": version_of("bm25s"), "PyStemmer": version_of("PyStemmer"), "numpy": np.__version__},
        }

    @staticmethod
    def _resolve_stemmer(stemmer: object):
        Stemmer = _pystemmer()
        if stemmer is None or stemmer is False:
            return None, None
        if stemmer == "auto":
            if Stemmer is None:
                return None, None
            stemmer = "english"
        if not isinstance(stemmer, str):
            raise InputError(f"stemmer must be 'auto', a PyStemmer language or None, got {stemmer!r}")
        if Stemmer is None:
            raise InputError(f"stemmer {stemmer!r} needs PyStemmer (pip install PyStemmer), or pass stemmer=None")
        if stemmer not in Stemmer.algorithms():
            raise InputError(f"unknown stemmer language {stemmer!r}; PyStemmer knows: {', '.join(Stemmer.algorithms())}")
        return Stemmer.Stemmer(stemmer).stemWords, stemmer

    def tokenize(self, text: str) -> list[str]:
        """The tokens BM25 sees for ``text``: Unicode-normalised (:func:`vdr.text.normalize_text`, NFKC),
        lower-cased (if ``lower``), split by :data:`TOKEN_PATTERN`, stopwords dropped, then stemmed
        (if a stemmer is used)."""
        text = normalize_text(text)
        if self._lower:
            text = text.lower()
        toks = [t for t in self._split(text) if t not in self._stop]
        if self._stem is not None and toks:
            toks = self._stem(toks)
        return toks

    # ------------------------------------------------------------------ index

    def index(self, corpus) -> None:
        """Build the BM25 index of ``corpus`` (a :class:`~vdr.corpus.Corpus`, or ``{corpus_id: text}``
        with str or integer ids and str texts; empty texts allowed, never ranked), or load it from
        the cache.

        Raises:
            InputError: an empty corpus, bad ids or non-str texts.
        """
        texts = check_texts(corpus_texts(corpus), "corpus page", allow_empty=True)
        key = fingerprint("lexical", _CACHE_FORMAT, self._scoring_settings(), content_digest(texts.items()))
        path = cache_path(self.cache_dir, "lexical", key)
        self.report = new_report()
        self.report["cache"] = {"hit": False if path is not None else None, "path": None if path is None else str(path)}
        if path is not None and self._load(path, list(texts)):
            self.report["cache"]["hit"] = True
            return
        self._build(texts)
        if path is not None:
            write_cache_dir(path, self._save)

    def _scoring_settings(self) -> dict:
        """The part of :attr:`config` that changes the index or the scores (cache key)."""
        c = self.config
        keys = ("method", "k1", "b", "delta", "dtype", "tokenizer", "stemmer")
        return {**{k: c[k] for k in keys}, "bm25s": c["versions"]["bm25s"], "PyStemmer": c["versions"]["PyStemmer"]}

    def _build(self, texts: dict[str, str]) -> None:
        import bm25s

        self._ids = list(texts)
        self._order = id_order(self._ids)
        docs = [self.tokenize(t) for t in texts.values()]
        vocab = sorted({tok for d in docs for tok in d})  # sorted: the index does not depend on hash order
        self._vocab = {tok: i for i, tok in enumerate(vocab)}
        self._retriever = None
        if vocab:
            c = self.config
            self._retriever = bm25s.BM25(k1=c["k1"], b=c["b"], delta=c["delta"], method=c["method"], dtype="float32")
            self._retriever.index(([[self._vocab[t] for t in d] for d in docs], dict(self._vocab)), create_empty_token=False, show_progress=False)
        empty = [i for i, d in zip(self._ids, docs) if not d]
        self.report["index"] = {
            "num_pages": len(self._ids),
            "num_empty_pages": len(empty),
            "empty_pages": empty[:20],
            "vocabulary_size": len(vocab),
            "avg_page_tokens": float(np.mean([len(d) for d in docs])),
        }

    def _save(self, folder: Path) -> None:
        """Write the index into ``folder`` (bm25s ``save`` with ``allow_pickle=False``, plus JSON)."""
        meta = {"format": _CACHE_FORMAT, "ids": self._ids, "vocab": list(self._vocab), "index": self.report["index"]}
        if self._retriever is not None:
            self._retriever.save(str(folder), allow_pickle=False, show_progress=False)
        (folder / _META).write_text(json.dumps(meta, ensure_ascii=False), encoding="utf-8")

    def _load(self, folder: Path, ids: list[str]) -> bool:
        """Load a cached index; ``False`` (a miss) when it is absent, incomplete or for other ids."""
        meta = read_json(folder / _META)
        if meta is None or meta.get("format") != _CACHE_FORMAT or meta.get("ids") != ids:
            return False
        retriever = None
        if meta["vocab"]:
            import bm25s

            try:
                retriever = bm25s.BM25.load(str(folder), allow_pickle=False, mmap=False, show_progress=False)
            except (OSError, ValueError, KeyError):
                return False
        self._ids, self._order = ids, id_order(ids)
        self._vocab = {tok: i for i, tok in enumerate(meta["vocab"])}
        self._retriever = retriever
        self.report["index"] = meta["index"]
        return True

    # ------------------------------------------------------------------ search

    def search(self, queries, depth: int = 100) -> Run:
        """Rank the corpus for each query; keep the ``depth`` best pages that contain a query token.

        Args:
            queries: a :class:`~vdr.types.QuerySet` (one variant) or ``{query_id: text}`` (non-empty
                texts; ids str or integers).
            depth: pages kept per query (>= 1).

        Returns:
            :class:`~vdr.types.Run` with every query id (possibly with an empty ranking); scores are
            the float32 BM25 scores widened to float. Deterministic. Records
            ``{"num_queries", "num_queries_without_known_terms", "queries_without_known_terms"
            (ids, first 50), "depth"}`` in ``report["searches"][variant]``.

        Raises:
            InputError: :meth:`index` was not called, no queries, a bad id, a non-str, empty or
                whitespace-only text, a bad ``depth``.
        """
        if self._ids is None:
            raise InputError("BM25Backend.search: call index(corpus) first")
        texts, variant = query_texts(queries)
        qs = check_texts(texts, "query", allow_empty=False)
        depth = check_depth(depth)
        out: dict[str, dict[str, float]] = {}
        no_terms: list[str] = []
        r = self._retriever
        for qid, text in qs.items():
            tids = [self._vocab[t] for t in self.tokenize(text) if t in self._vocab]
            if not tids or r is None:
                no_terms.append(qid)
                out[qid] = {}
                continue
            tarr = np.asarray(tids, dtype=np.int64)
            scores = r.get_scores_from_ids(tids)
            indptr, indices = r.scores["indptr"], r.scores["indices"]
            matched = np.unique(np.concatenate([indices[indptr[t] : indptr[t + 1]] for t in tarr])).astype(np.int64)
            out[qid] = top_k(scores, matched, self._order, self._ids, depth)
        self.report["searches"][variant] = {
            "num_queries": len(qs),
            "num_queries_without_known_terms": len(no_terms),
            "queries_without_known_terms": no_terms[:50],
            "depth": depth,
        }
        return Run._trusted(out, "bm25")

    def __repr__(self) -> str:
        n = self.report["index"].get("num_pages", 0)
        return f"BM25Backend({n} pages, method={self.config['method']!r}, k1={self.config['k1']}, b={self.config['b']})"


def build(ctx: BuildContext) -> BM25Backend:
    """Registry factory: ``BM25Backend(**ctx.options)`` with the experiment's cache folder.

    Raises:
        InputError: an unknown option or a bad value (see :class:`BM25Backend`).
    """
    opts = dict(ctx.options)
    allowed = {"k1", "b", "method", "delta", "stemmer", "stopwords", "lower"}
    unknown = sorted(set(opts) - allowed)
    if unknown:
        raise InputError(f"unknown BM25 option(s) {unknown}; known: {', '.join(sorted(allowed))}")
    return BM25Backend(**opts, cache_dir=ctx.cache_dir, name=ctx.name)


_CACHE_FORMAT = 1
_META = "vdr-index.json"


_FORMULAS = {
    "lucene": "sum_t ln(1 + (N - df + 0.5)/(df + 0.5)) * tf / (tf + k1 * (1 - b + b * dl/avgdl))",
    "robertson": "sum_t max(0, ln((N - df + 0.5)/(df + 0.5))) * tf / (tf + k1 * (1 - b + b * dl/avgdl))",
    "atire": "sum_t ln(N/df) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl/avgdl))",
    "bm25l": "sum_t ln((N + 1)/(df + 0.5)) * (k1 + 1)(c + delta) / (k1 + c + delta), c = tf / (1 - b + b * dl/avgdl)",
    "bm25+": "sum_t ln((N + 1)/df) * ((k1 + 1) tf / (k1 * (1 - b + b * dl/avgdl) + tf) + delta)",
}
