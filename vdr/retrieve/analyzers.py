"""Text analyzers of the lexical backend: text -> the list of terms BM25 indexes.

Two analyzers (:data:`ANALYZERS`):

* ``"default"``: vdr's own (Unicode NFKC, lower-case, the bm25s / scikit-learn token pattern
  ``(?u)\\b\\w\\w+\\b``, a stopword list, an optional PyStemmer stemmer); built by
  :class:`vdr.retrieve.lexical.BM25Backend` from its ``stopwords`` / ``stemmer`` / ``lower`` options.
* ``"lucene"``: :class:`LuceneEnglishAnalyzer`, the chain of Lucene's ``EnglishAnalyzer`` (and
  Pyserini's ``DefaultEnglishAnalyzer``), so that BM25 scores approach Pyserini's.
"""

from __future__ import annotations

import re

__all__ = ["ANALYZERS", "Analyzer", "LUCENE_ENGLISH_STOP_WORDS", "LUCENE_TOKEN_PATTERN", "LuceneEnglishAnalyzer"]

ANALYZERS = ("default", "lucene")

#: Lucene's ``EnglishAnalyzer.ENGLISH_STOP_WORDS_SET`` (33 words).
LUCENE_ENGLISH_STOP_WORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then there these they this to was will with".split()
)

# Hiragana and CJK ideographs: one token per character (as Lucene's StandardTokenizer emits them).
_IDEO = "\u3040-\u309f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_W = rf"[^\W{_IDEO}]"  # a word character (letter, digit, underscore) that is not ideographic
_LETTER = rf"[^\W\d_{_IDEO}]"
#: The StandardTokenizer-like split (Unicode UAX #29 word boundaries, simplified): runs of letters,
#: digits and underscores; letters joined across ``'`` ``’`` ``.`` ``:`` ``·`` (``don't``,
#: ``U.S.A``), digits joined across ``.`` ``,`` ``;`` ``'`` ``’`` (``3.14``, ``1,000``); every
#: Hiragana / CJK ideograph is a token of its own.
LUCENE_TOKEN_PATTERN = rf"[{_IDEO}]|{_W}+(?:(?:(?<={_LETTER})['\u2019.:\u00b7](?={_LETTER})|(?<=\d)[.,;'\u2019](?=\d)){_W}+)*"
_POSSESSIVE = ("'s", "'S", "\u2019s", "\u2019S", "\uff07s", "\uff07S")


class Analyzer:
    """text -> terms, in two steps: :meth:`split` (text -> surface tokens, normalised and
    lower-cased) and :meth:`term` (one surface token -> its term, or ``""`` for a stopword), so
    that indexing can memoise the second step per distinct surface token.

    Args:
        split: ``text -> list[str]``.
        stopwords: set of (lower-cased) surface tokens dropped.
        stemmer: a PyStemmer language or ``None`` (no stemming).
        config: what the analyzer does (JSON-ready; part of the index cache key).
        max_memo: distinct surface tokens remembered (the memo is cleared when full).

    PyStemmer's own cache (10,000 words by default) thrashes on a large vocabulary (on a Zipf
    vocabulary of 50,000 words stemming was 10x slower than without it): it is turned off, and each
    distinct token is stemmed once through the memo.
    """

    def __init__(self, split, stopwords: frozenset[str], stemmer: str | None, config: dict, max_memo: int = 2_000_000) -> None:
        self.split = split
        self.config = config
        self._stop = stopwords
        self._stem_one = None
        if stemmer is not None:
            import Stemmer  # PyStemmer

            st = Stemmer.Stemmer(stemmer)
            st.maxCacheSize = 0
            self._stem_one = st.stemWord
        self._memo: dict[str, str] = {}
        self._max_memo = max_memo

    def term(self, token: str) -> str:
        """The term of surface token ``token`` (``""``: a stopword, not indexed)."""
        t = self._memo.get(token)
        if t is None:
            t = "" if token in self._stop else token if self._stem_one is None else self._stem_one(token)
            if len(self._memo) >= self._max_memo:
                self._memo.clear()
            self._memo[token] = t
        return t

    def __call__(self, text: str) -> list[str]:
        """The terms of ``text`` (list of str, possibly empty)."""
        term = self.term
        return [t for t in map(term, self.split(text)) if t]


class LuceneEnglishAnalyzer(Analyzer):
    """Lucene's English analysis chain, in Lucene's order:

    1. ``StandardTokenizer`` (Unicode word boundaries; approximated by :data:`LUCENE_TOKEN_PATTERN`;
       no Unicode normalisation, as Lucene; single-character tokens kept);
    2. ``EnglishPossessiveFilter`` (a trailing ``'s`` / ``’s`` is removed);
    3. ``LowerCaseFilter``;
    4. ``StopFilter`` with :data:`LUCENE_ENGLISH_STOP_WORDS`;
    5. ``PorterStemFilter`` (the original Porter stemmer: PyStemmer's ``"porter"``, not Snowball
       English).

    Known differences from Lucene: the tokenizer is a regular expression, not the full UAX #29
    state machine (rare scripts, emoji, tokens over 255 characters are not split), and
    lower-casing is Python's ``str.lower``.

    Attributes:
        config: what the analyzer does (JSON-ready; part of the index cache key).

    Raises:
        InputError: PyStemmer is not installed (``pip install PyStemmer``).
    """

    name = "lucene"

    def __init__(self) -> None:
        try:
            import Stemmer  # noqa: F401  (PyStemmer)
        except ImportError:  # pragma: no cover - PyStemmer is a dependency
            from ..errors import InputError

            raise InputError("the lucene analyzer needs PyStemmer (pip install PyStemmer)") from None
        find = re.compile(LUCENE_TOKEN_PATTERN).findall

        def split(text: str) -> list[str]:
            return [(t[:-2] if t.endswith(_POSSESSIVE) else t).lower() for t in find(text)]

        config = {
            "analyzer": "lucene",
            "chain": ["StandardTokenizer (regex)", "EnglishPossessiveFilter", "LowerCaseFilter", "StopFilter", "PorterStemFilter"],
            "token_pattern": LUCENE_TOKEN_PATTERN,
            "unicode_normalization": None,
            "lower": True,
            "stopwords": "lucene_english",
            "num_stopwords": len(LUCENE_ENGLISH_STOP_WORDS),
            "stemmer": "porter",
        }
        super().__init__(split, LUCENE_ENGLISH_STOP_WORDS, "porter", config)
