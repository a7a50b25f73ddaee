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

__all__ = ["ANALYZERS", "LUCENE_ENGLISH_STOP_WORDS", "LUCENE_TOKEN_PATTERN", "LuceneEnglishAnalyzer"]

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


class LuceneEnglishAnalyzer:
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
            import Stemmer  # PyStemmer
        except ImportError:  # pragma: no cover - PyStemmer is a dependency
            from ..errors import InputError

            raise InputError("the lucene analyzer needs PyStemmer (pip install PyStemmer)") from None
        self._split = re.compile(LUCENE_TOKEN_PATTERN).findall
        self._stem = Stemmer.Stemmer("porter").stemWords
        self.config = {
            "analyzer": "lucene",
            "chain": ["StandardTokenizer (regex)", "EnglishPossessiveFilter", "LowerCaseFilter", "StopFilter", "PorterStemFilter"],
            "token_pattern": LUCENE_TOKEN_PATTERN,
            "unicode_normalization": None,
            "lower": True,
            "stopwords": "lucene_english",
            "num_stopwords": len(LUCENE_ENGLISH_STOP_WORDS),
            "stemmer": "porter",
        }

    def __call__(self, text: str) -> list[str]:
        """The terms of ``text`` (a list of str, possibly empty), e.g. ``"The dog's quick jumps"``
        -> ``["dog", "quick", "jump"]``."""
        stop = LUCENE_ENGLISH_STOP_WORDS
        toks = [t[:-2] if t.endswith(_POSSESSIVE) else t for t in self._split(text)]
        toks = [t for t in (t.lower() for t in toks) if t and t not in stop]
        return self._stem(toks) if toks else toks
