"""Text analyzers of the lexical backend: text -> the list of terms BM25 indexes.

Two analyzers (:data:`ANALYZERS`):

* ``"default"``: vdr's own (Unicode NFKC, lower-case, the bm25s / scikit-learn token pattern
  ``(?u)\\b\\w\\w+\\b``, a stopword list, an optional PyStemmer stemmer); built by
  :class:`vdr.retrieve.lexical.BM25Backend` from its ``stopwords`` / ``stemmer`` / ``lower`` options.
* ``"lucene"``: :class:`LuceneEnglishAnalyzer`, the chain of Lucene's ``EnglishAnalyzer`` (and of
  Anserini's ``DefaultEnglishAnalyzer``, which Pyserini's BM25 indexes use), token for token:
  tested against Lucene 9.9.1 itself (``tests/data/lucene_9.9.1_english.json.gz``, written by
  ``tests/make_lucene_fixture.py``).
"""

from __future__ import annotations

import re
from bisect import bisect_right

from . import _lucene_tables

__all__ = ["ANALYZERS", "Analyzer", "LUCENE_ENGLISH_STOP_WORDS", "LUCENE_MAX_TOKEN_LENGTH", "LuceneEnglishAnalyzer",
           "LuceneStandardTokenizer", "lucene_lower", "porter_stem"]

ANALYZERS = ("default", "lucene")

#: Lucene's ``EnglishAnalyzer.ENGLISH_STOP_WORDS_SET`` (33 words).
LUCENE_ENGLISH_STOP_WORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then there these they this to was will with".split()
)
#: ``StandardTokenizer``'s default maximum token length, in UTF-16 code units: a longer word is cut
#: into pieces of at most this length (the scanner's buffer holds no more).
LUCENE_MAX_TOKEN_LENGTH = 255
_POSSESSIVE_QUOTES = "'\u2019\uff07"  # EnglishPossessiveFilter: ' ’ ＇ before a final s / S


class Analyzer:
    """text -> terms, in two steps: :meth:`split` (text -> surface tokens) and :meth:`term` (one
    surface token -> its term, or ``""`` when it is not indexed), so that indexing can memoise the
    second step per distinct surface token.

    Args:
        split: ``text -> list[str]``.
        stopwords: set of surface tokens dropped.
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

    def _compute(self, token: str) -> str:
        """The term of ``token`` (not memoised): ``""`` for a stopword, else the stem."""
        return "" if token in self._stop else token if self._stem_one is None else self._stem_one(token)

    def term(self, token: str) -> str:
        """The term of surface token ``token`` (``""``: not indexed, e.g. a stopword)."""
        t = self._memo.get(token)
        if t is None:
            t = self._compute(token)
            if len(self._memo) >= self._max_memo:
                self._memo.clear()
            self._memo[token] = t
        return t

    def __call__(self, text: str) -> list[str]:
        """The terms of ``text`` (list of str, possibly empty)."""
        term = self.term
        return [t for t in map(term, self.split(text)) if t]


# --------------------------------------------------------------------------------------------- tokenizer


def _class_ranges() -> dict[str, list[tuple[int, int]]]:
    """:data:`vdr.retrieve._lucene_tables.CLASSES` parsed: ``{name: [(first, last), ...]}``."""
    out = {}
    for name, body in _lucene_tables.CLASSES.items():
        rs = []
        for item in body.split():
            a, _, b = item.partition("-")
            rs.append((int(a, 16), int(b or a, 16)))
        out[name] = rs
    return out


_CLASS_RANGES = _class_ranges()


def _cc(*names: str, wide: bool | None = None) -> str:
    """The code points of classes ``names`` as the body of a regular-expression character class
    (``wide``: only those above U+FFFF (True), only those up to it (False), all (None))."""
    rs = [(lo, hi) for n in names for lo, hi in _CLASS_RANGES[n]]
    if wide is not None:
        rs = [(max(lo, 0x10000), hi) for lo, hi in rs if hi > 0xFFFF] if wide else [(lo, min(hi, 0xFFFF)) for lo, hi in rs if lo <= 0xFFFF]
    return "".join(_esc(lo) if lo == hi else f"{_esc(lo)}-{_esc(hi)}" for lo, hi in rs)


def _set(*names: str) -> str:
    """A regular expression for one character of classes ``names``: ``re`` tests a set of code
    points up to U+FFFF with a bitmap but a set reaching beyond with a list of ranges, one by one,
    so the two parts are two sets."""
    bmp, wide = _cc(*names, wide=False), _cc(*names, wide=True)
    return f"(?:[{bmp}]|[{wide}])" if bmp and wide else f"[{bmp or wide}]"


def _esc(cp: int) -> str:
    return f"\\u{cp:04x}" if cp <= 0xFFFF else f"\\U{cp:08x}"


# Lucene's scanner reads UTF-16: a code point above U+FFFF is two units of the 255
def _units(ch: str) -> int:
    return 2 if ch > "\uffff" else 1


#: the emoji rule of ``StandardTokenizerImpl.jflex`` (UTS #51 emoji sequences) as a small NFA,
#: state -> ((classes, next state), ...); :data:`_EMOJI_ACCEPT`: the accepting states. Classes: Z zero-width
#: joiner, C emoji character, M emoji modifier, V U+FE0F, T tag, U cancel tag, K keycap base, Q
#: U+20E3, R regional indicator, X any other Extend / Format character but U+FE0E. ``S`` (Extend
#: without the selectors) = Z M T U Q X; ``E`` (all Extend) = S, V and U+FE0E (W).
#:   emoji := eseq ((Z eseq)* | T+ U) | K S* V? Q S* | R E* R E*
#:   eseq  := Z* C S* V? | M S*
#: JFlex puts Emoji_Modifier_Base in one class with the other emoji characters (a modifier is
#: Extend, so "C S*" covers "base modifier"): no state of its own.
_S = "ZMTUQX"
_EMOJI_NFA = {
    "start": (("Z", "fz"), ("C", "fc"), ("M", "fm"), ("K", "k0"), ("R", "r1")),
    "fz": (("Z", "fz"), ("C", "fc")),  # the first eseq (tags may follow it)
    "fc": ((_S, "fc"), ("V", "fv"), ("Z", "sep"), ("T", "bt")),
    "fv": (("Z", "sep"), ("T", "bt")),
    "fm": ((_S, "fm"), ("Z", "sep"), ("T", "bt")),
    "sep": (("Z", "az"), ("C", "ac"), ("M", "am")),  # after a joiner: the next eseq
    "az": (("Z", "az"), ("C", "ac")),
    "ac": ((_S, "ac"), ("V", "av"), ("Z", "sep")),
    "av": (("Z", "sep"),),
    "am": ((_S, "am"), ("Z", "sep")),
    "bt": (("T", "bt"), ("U", "bend")),
    "bend": (),
    "k0": ((_S, "k0"), ("V", "kv"), ("Q", "kq")),
    "kv": (("Q", "kq"),),
    "kq": ((_S, "kq"),),
    "r1": ((_S + "VW", "r1"), ("R", "r2")),
    "r2": ((_S + "VW", "r2"),),
}
_EMOJI_ACCEPT = frozenset({"fc", "fv", "fm", "ac", "av", "am", "bend", "kq", "r2"})
_EMOJI_CLASSES = {"ZWJ": "Z", "Emoji": "C", "ALetter_Emoji": "C", "Emoji_Modifier": "M", "VS16": "V", "VS15": "W",
                  "Tag_Spec": "T", "Tag_Term": "U", "Numeric_KeyCap_Base": "K", "KeyCap_Base_Symbol": "K", "KeyCap": "Q",
                  "Regional_Indicator": "R", "Extend": "X", "Complex_Context_Extend": "X"}
#: the classes a rule can start with (the others are only taken inside a token)
_STARTS = ("ALetter", "Hangul", "ALetter_Emoji", "Hebrew_Letter", "Numeric", "Numeric_KeyCap_Base", "KeyCap_Base_Symbol", "Katakana",
           "ExtendNumLet", "Complex_Context", "Complex_Context_Extend", "Han", "Hiragana", "ZWJ", "Emoji", "Emoji_Modifier",
           "Regional_Indicator")


class LuceneStandardTokenizer:
    """Lucene's ``StandardTokenizer`` (``org.apache.lucene.analysis.standard``, Lucene 9.9.1): the
    word-break rules of Unicode Standard Annex #29 as Lucene's JFlex grammar
    (``StandardTokenizerImpl.jflex``) states them, longest match first, with its character classes
    (Unicode 9.0 word-break properties, Unicode 11.0 emoji data: :mod:`vdr.retrieve._lucene_tables`,
    read from Lucene's own tables). Tokens are:

    * words and numbers: letters (Latin, Greek, Cyrillic, Arabic, Hangul, ...), digits and
      ``ExtendNumLet`` (``_``) joined, letters also across one ``MidLetter`` / ``MidNumLet`` /
      ``'`` (``don't``, ``U.S.A``, ``c:a``), digits across one ``MidNum`` / ``MidNumLet`` / ``'``
      (``1,000.50``); runs of Katakana; Hebrew letters with the ``'`` and ``"`` rules; combining
      marks and format characters stay with the character before them;
    * one token per Han ideograph and per Hiragana character; a run of South-East Asian script
      (Thai, Lao, Myanmar, Khmer) as one token;
    * emoji sequences (presentation and modifier sequences, ZWJ sequences, flags, keycaps, tags);
    * anything else (spaces, punctuation, symbols) is skipped;
    * at most :data:`LUCENE_MAX_TOKEN_LENGTH` UTF-16 code units per token (Lucene's scanner buffer):
      a longer word gives the longest token within its first 255 units, then scanning goes on
      right after it.

    Text without any of the rarer classes (combining marks, emoji, Hebrew, Katakana, South-East
    Asian scripts, characters beyond U+FFFF) is split by one regular expression (fast). Each
    whitespace-separated chunk holding a rarer character is scanned token by token: the longest of
    the emoji rule (:data:`_EMOJI_NFA`) and the other rules (one regular expression whose greedy
    match is the longest), within the 255-unit window.

    Call it: ``text -> list[str]`` (the tokens, original case). :meth:`spans` gives their
    ``(start, end)`` code-point offsets.
    """

    def __init__(self) -> None:
        def bmp(*names):  # the fast pattern never sees a character above U+FFFF
            return _cc(*names, wide=False)

        L, D, E = bmp("ALetter", "Hangul"), bmp("Numeric", "Numeric_KeyCap_Base"), bmp("ExtendNumLet")
        ML, MN = bmp("MidLetter", "MidNumLet", "Single_Quote"), bmp("MidNum", "MidNumLet", "Single_Quote")
        # the whole grammar for text of plain letters, digits, ExtendNumLet, Mid* characters, Han and
        # Hiragana (each one token) and characters no rule takes: the runs of letters, digits and
        # ExtendNumLet joined by single Mid* characters between two letters or two digits
        mid = bmp("MidLetter", "MidNum", "MidNumLet", "Single_Quote")
        self._fast = re.compile(f"[{bmp('Han', 'Hiragana')}]|[{L}{D}{E}]+(?:[{mid}](?:(?<=[{L}][{ML}])(?=[{L}])|(?<=[{D}][{MN}])(?=[{D}]))[{L}{D}{E}]+)*")
        self._fast_findall = self._fast.findall
        rare = bmp("Emoji", "ALetter_Emoji", "Extend", "Complex_Context", "Complex_Context_Extend", "ZWJ", "KeyCap", "VS15", "VS16",
                   "Emoji_Modifier", "Tag_Spec", "Tag_Term", "Hebrew_Letter", "Katakana", "Regional_Indicator")
        self._rare = re.compile(f"[{rare}]|[\\U00010000-\\U0010ffff]")
        self._enl = re.compile(f"[{E}]")
        self._enl_chars = "".join(chr(c) for lo, hi in _CLASS_RANGES["ExtendNumLet"] for c in range(lo, hi + 1))
        # whitespace no rule takes: no token crosses it (U+202F NARROW NO-BREAK SPACE is ExtendNumLet)
        taken = [(lo, hi) for rs in _CLASS_RANGES.values() for lo, hi in rs]
        ws = "".join(ch for ch in map(chr, range(0x3001)) if ch.isspace() and not any(lo <= ord(ch) <= hi for lo, hi in taken))
        self._chunks = re.compile(f"[^{re.escape(ws)}]+")
        self._full = None  # the full grammar, built on first use (:meth:`_grammar`)

    def _grammar(self):
        """``(rules, starts, los, classes)``: the non-emoji rules of ``StandardTokenizerImpl.jflex``
        as one pattern (word / number, South-East Asian run, Han, Hiragana; its greedy match is the
        longest: the rules start with different classes, and a Hebrew letter followed by ``'`` or
        ``"`` + Hebrew letter, where not after a MidLetter, is left to the Hebrew rule, which takes
        more), the characters that start any rule, and the emoji classes (:data:`_EMOJI_CLASSES`) as
        sorted ``(first, last, class)`` ranges with their firsts."""
        if self._full is None:
            ex = f"{_set('Extend', 'Complex_Context_Extend', 'ZWJ', 'KeyCap', 'VS15', 'VS16', 'Emoji_Modifier', 'Tag_Spec', 'Tag_Term')}*"

            def x(*names):  # a character of the classes, then its Extend / Format / ZWJ characters (UAX #29 WB4)
                return f"(?:{_set(*names)}{ex})"

            heb, num, kat, enl = x("Hebrew_Letter"), x("Numeric", "Numeric_KeyCap_Base"), x("Katakana"), x("ExtendNumLet")
            heb_rule = f"(?:{heb}(?:{x('Single_Quote')}|{x('Double_Quote')}{heb}))"
            ahl = x("ALetter", "Hebrew_Letter", "Hangul", "ALetter_Emoji")
            midl, midn = x("MidLetter", "MidNumLet", "Single_Quote"), x("MidNum", "MidNumLet", "Single_Quote")
            # letters joined directly or by ExtendNumLet; a Hebrew letter that starts the Hebrew rule is
            # left to it (it takes the ' or " too); after a MidLetter any letter continues the word
            letters = f"{ahl}(?:{enl}*(?!{heb_rule}){ahl}|{midl}{ahl})*"
            seg = f"(?:{kat}(?:{enl}*{kat})*|(?:{heb_rule}|{num}(?:(?:{enl}*|{midn}){num})*|{letters})+)"
            word = f"{enl}*{seg}(?:{enl}+{seg})*{enl}*"
            sea = f"(?:{_set('Complex_Context', 'Complex_Context_Extend')}{ex})+"
            rules = re.compile(f"{word}|{sea}|{x('Han')}|{x('Hiragana')}")
            starts = re.compile(_set(*_STARTS))
            cps = sorted((lo, hi, letter) for name, letter in _EMOJI_CLASSES.items() for lo, hi in _CLASS_RANGES[name])
            self._full = (rules, starts, [lo for lo, _, _ in cps], cps)
        return self._full

    def __call__(self, text: str) -> list[str]:
        """The tokens of ``text`` (list of str, original case, in order)."""
        if self._rare.search(text) is None:
            toks = self._fast_findall(text)
            if not toks or max(map(len, toks)) <= LUCENE_MAX_TOKEN_LENGTH:
                if self._enl.search(text) is None:
                    return toks
                enl = self._enl_chars
                return [t for t in toks if t.strip(enl)]  # a run of ExtendNumLet alone is no token
        return [text[a:b] for a, b in self.spans(text)]

    def spans(self, text: str) -> list[tuple[int, int]]:
        """``(start, end)`` code-point offsets of the tokens of ``text``, in order."""
        out: list[tuple[int, int]] = []
        if self._rare.search(text) is None:
            self._scan_fast(text, 0, len(text), out)
            return out
        fast_from = 0  # chunks without a rare character are split in one go, up to the next rare one
        for m in self._chunks.finditer(text):
            a, b = m.span()
            if self._rare.search(text, a, b) is not None:
                if fast_from < a:
                    self._scan_fast(text, fast_from, a, out)
                self._scan_full(text, a, b, out)
                fast_from = b
        if fast_from < len(text):
            self._scan_fast(text, fast_from, len(text), out)
        return out

    def _scan_fast(self, text: str, start: int, end: int, out: list) -> None:
        """Token spans of ``text[start:end]`` (no rare character, so one code point is one UTF-16
        unit) by the fast pattern; a run of ExtendNumLet alone is no token; a token over 255
        characters is cut to the longest match within its first 255 (then scanning goes on)."""
        pos, enl, fast = start, self._enl_chars, self._fast
        while pos < end:
            restart = None
            for m in fast.finditer(text, pos, end):
                a, b = m.span()
                if b - a > LUCENE_MAX_TOKEN_LENGTH:
                    restart = fast.match(text, a, a + LUCENE_MAX_TOKEN_LENGTH).end()
                    if text[a:restart].strip(enl):
                        out.append((a, restart))
                    else:  # only ExtendNumLet within the window: no token starts here; try the next character
                        restart = a + 1
                    break
                if text[a] not in enl or text[a:b].strip(enl):
                    out.append((a, b))
            if restart is None:
                return
            pos = restart

    def _scan_full(self, text: str, start: int, end: int, out: list) -> None:
        """Token spans of ``text[start:end]`` by the full grammar: at each character that can start
        a rule, the longest of the emoji rule and the other rules within the 255-unit window."""
        rules, starts, los, cps = self._grammar()
        pos = start
        while True:
            m = starts.search(text, pos, end)
            if m is None:
                return
            p = m.start()
            stop = min(end, p + LUCENE_MAX_TOKEN_LENGTH)  # the window: 255 UTF-16 units from p
            if stop - p > LUCENE_MAX_TOKEN_LENGTH // 2 and max(text[p:stop]) > "\uffff":
                stop, units = p, 0
                while stop < end and units + _units(text[stop]) <= LUCENE_MAX_TOKEN_LENGTH:
                    units += _units(text[stop])
                    stop += 1
            r = rules.match(text, p, stop)
            best = r.end() if r is not None else p
            e = self._emoji(text, p, stop, los, cps)
            if e >= best and e > p:
                best = e
            if best > p:
                out.append((p, best))
                pos = best
            else:
                pos = p + 1

    @staticmethod
    def _emoji(text: str, start: int, stop: int, los: list, cps: list) -> int:
        """End of the longest emoji-rule match at ``start`` within ``text[:stop]`` (``start``: none)."""
        states, best = {"start"}, start
        i = start
        while states and i < stop:
            cp = ord(text[i])
            k = bisect_right(los, cp) - 1
            cls = cps[k][2] if k >= 0 and cps[k][1] >= cp else None
            if cls is None:
                return best
            states = {target for st in states for classes, target in _EMOJI_NFA[st] if cls in classes}
            i += 1
            if not states.isdisjoint(_EMOJI_ACCEPT):
                best = i
        return best


# --------------------------------------------------------------------------------------------- filters


_LOWER_TABLE = {cp: chr(lo) for cp, lo in _lucene_tables.LOWER_CASE.items()}


def lucene_lower(token: str) -> str:
    """``LowerCaseFilter``: each code point through Java's ``Character.toLowerCase`` (the simple,
    context-free mapping: ``Σ`` -> ``σ`` even at the end of a word, ``İ`` -> ``i``), not Python's
    ``str.lower`` (full mappings, final sigma)."""
    if token.isascii():
        return token.lower()
    token = token.translate(_LOWER_TABLE)
    if "\u03a3" not in token:  # str.lower's only context-dependent rule is the final sigma
        return token.lower()
    return "".join(ch.lower() for ch in token)


class _Porter:
    """Lucene's ``PorterStemmer`` (``org.apache.lucene.analysis.en``), which follows Martin Porter's
    C implementation of his algorithm (Porter 1980, "An algorithm for suffix stripping", Program
    14(3)) with its departures from the paper: ``-bli`` -> ``-ble`` (the paper: ``-abli`` ->
    ``-able``), ``-logi`` -> ``-log``, and words of at most two characters are left alone. Works on
    UTF-16 code units as Lucene does (see :func:`porter_stem`). Notation as in the paper: ``m`` is
    the number of vowel-consonant sequences of the stem, ``*v*`` a vowel in it, ``*d`` a double
    consonant at its end, ``*o`` consonant-vowel-consonant at its end (last not w, x, y)."""

    __slots__ = ("b", "k", "j")

    def __init__(self, word: str) -> None:
        self.b = list(word)
        self.k = len(word) - 1  # last character of the current word
        self.j = 0  # last character of the stem before the suffix found by _ends

    def _cons(self, i: int) -> bool:
        ch = self.b[i]
        if ch in "aeiou":
            return False
        if ch == "y":
            return i == 0 or not self._cons(i - 1)
        return True

    def _next(self, i: int, cons: bool) -> int:
        """The first index from ``i`` up to ``j`` of a consonant (``cons``) or a vowel; -1 if none."""
        while i <= self.j:
            if self._cons(i) == cons:
                return i
            i += 1
        return -1

    def _m(self) -> int:
        """Vowel-consonant sequences in ``b[0..j]``."""
        n, i = 0, self._next(0, False)  # the leading consonants do not count
        while i >= 0:
            i = self._next(i + 1, True)  # the end of a vowel run
            if i < 0:
                break
            n += 1
            i = self._next(i + 1, False)
        return n

    def _vowel_in_stem(self) -> bool:
        return any(not self._cons(i) for i in range(self.j + 1))

    def _double_c(self, j: int) -> bool:
        return j >= 1 and self.b[j] == self.b[j - 1] and self._cons(j)

    def _cvc(self, i: int) -> bool:
        if i < 2 or not self._cons(i) or self._cons(i - 1) or not self._cons(i - 2):
            return False
        return self.b[i] not in "wxy"

    def _ends(self, s: str) -> bool:
        n = len(s)
        if n > self.k + 1 or "".join(self.b[self.k - n + 1 : self.k + 1]) != s:
            return False
        self.j = self.k - n
        return True

    def _set_to(self, s: str) -> None:
        self.b[self.j + 1 :] = s
        self.k = self.j + len(s)

    def _r(self, s: str) -> None:
        if self._m() > 0:
            self._set_to(s)

    def _step1(self) -> None:  # plurals and -ed / -ing (the paper's step 1a, 1b)
        b = self.b
        if b[self.k] == "s":
            if self._ends("sses"):
                self.k -= 2
            elif self._ends("ies"):
                self._set_to("i")
            elif b[self.k - 1] != "s":
                self.k -= 1
            del b[self.k + 1 :]
        if self._ends("eed"):
            if self._m() > 0:
                self.k -= 1
                del b[self.k + 1 :]
        elif (self._ends("ed") or self._ends("ing")) and self._vowel_in_stem():
            self.k = self.j
            del b[self.k + 1 :]
            if self._ends("at"):
                self._set_to("ate")
            elif self._ends("bl"):
                self._set_to("ble")
            elif self._ends("iz"):
                self._set_to("ize")
            elif self._double_c(self.k):
                if b[self.k] not in "lsz":
                    self.k -= 1
                    del b[self.k + 1 :]
            elif self._m_of_word() == 1 and self._cvc(self.k):
                self.j = self.k
                self._set_to("e")

    def _m_of_word(self) -> int:
        self.j = self.k
        return self._m()

    def _step2(self) -> None:  # (*v*) y -> i (the paper's step 1c)
        if self._ends("y") and self._vowel_in_stem():
            self.b[self.k] = "i"

    _STEP3 = {  # the paper's step 2, by the next-to-last character; the first suffix found decides
        "a": (("ational", "ate"), ("tional", "tion")),
        "c": (("enci", "ence"), ("anci", "ance")),
        "e": (("izer", "ize"),),
        "l": (("bli", "ble"), ("alli", "al"), ("entli", "ent"), ("eli", "e"), ("ousli", "ous")),
        "o": (("ization", "ize"), ("ation", "ate"), ("ator", "ate")),
        "s": (("alism", "al"), ("iveness", "ive"), ("fulness", "ful"), ("ousness", "ous")),
        "t": (("aliti", "al"), ("iviti", "ive"), ("biliti", "ble")),
        "g": (("logi", "log"),),
    }
    _STEP4 = {  # the paper's step 3, by the last character
        "e": (("icate", "ic"), ("ative", ""), ("alize", "al")),
        "i": (("iciti", "ic"),),
        "l": (("ical", "ic"), ("ful", "")),
        "s": (("ness", ""),),
    }
    _STEP5 = {  # the paper's step 4: suffixes removed when m > 1, by the next-to-last character
        "a": ("al",), "c": ("ance", "ence"), "e": ("er",), "i": ("ic",), "l": ("able", "ible"),
        "n": ("ant", "ement", "ment", "ent"), "o": ("ion", "ou"), "s": ("ism",), "t": ("ate", "iti"),
        "u": ("ous",), "v": ("ive",), "z": ("ize",),
    }  # fmt: skip

    def _rules(self, table: dict, key: str) -> None:
        for suffix, repl in table.get(key, ()):
            if self._ends(suffix):
                self._r(repl)
                return

    def _step5(self) -> None:
        for suffix in self._STEP5.get(self.b[self.k - 1], ()):
            if self._ends(suffix):
                if suffix == "ion" and not (self.j >= 0 and self.b[self.j] in "st"):
                    continue  # -ion only after s or t; then -ou is tried
                if self._m() > 1:
                    self.k = self.j
                    del self.b[self.k + 1 :]
                return

    def _step6(self) -> None:  # the paper's step 5: final -e, then -ll (m still counted over the word with its e)
        self.j = self.k
        if self.b[self.k] == "e":
            a = self._m()
            if a > 1 or (a == 1 and not self._cvc(self.k - 1)):
                self.k -= 1
        if self.b[self.k] == "l" and self._double_c(self.k) and self._m() > 1:
            self.k -= 1
        del self.b[self.k + 1 :]

    def stem(self) -> str:
        if self.k > 1:
            self._step1()
            self._step2()
            if self.k > 0:
                self._rules(self._STEP3, self.b[self.k - 1])
            self._rules(self._STEP4, self.b[self.k])
            if self.k > 0:
                self._step5()
            self._step6()
        return "".join(self.b[: self.k + 1])


def porter_stem(word: str) -> str:
    """Lucene's ``PorterStemFilter`` on one lower-case token (see :class:`_Porter`): ``sociology``
    -> ``sociolog``, ``responsibly`` -> ``respons``, ``us`` -> ``us``. Any character other than
    ``a e i o u`` (and ``y`` after a vowel) counts as a consonant; a character above U+FFFF counts as
    its two UTF-16 code units, as in Java."""
    if word.isascii():
        return _Porter(word).stem()
    if max(word) <= "\uffff":
        return _Porter(word).stem()
    out = _Porter(_to_utf16_units(word)).stem()  # Java sees surrogate pairs: stem those, then join them again
    return out.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def _to_utf16_units(s: str) -> str:
    """``s`` with every code point above U+FFFF written as its two surrogate code units."""
    out = []
    for ch in s:
        cp = ord(ch)
        if cp > 0xFFFF:
            cp -= 0x10000
            out.append(chr(0xD800 + (cp >> 10)))
            out.append(chr(0xDC00 + (cp & 0x3FF)))
        else:
            out.append(ch)
    return "".join(out)


class LuceneEnglishAnalyzer(Analyzer):
    """Lucene's English analysis chain, in Lucene's order (Anserini's ``DefaultEnglishAnalyzer``
    with the Porter stemmer, which Pyserini's BM25 indexes and queries use; Lucene's
    ``EnglishAnalyzer`` without a stem-exclusion set):

    1. ``StandardTokenizer`` (:class:`LuceneStandardTokenizer`; no Unicode normalisation, single
       characters kept, tokens over 255 UTF-16 code units cut);
    2. ``EnglishPossessiveFilter`` (a final ``'s``, ``’s`` or ``＇s``, any case of ``s``, removed);
    3. ``LowerCaseFilter`` (:func:`lucene_lower`);
    4. ``StopFilter`` with :data:`LUCENE_ENGLISH_STOP_WORDS`;
    5. ``PorterStemFilter`` (:func:`porter_stem`).

    Equal to Lucene 9.9.1 on every token of the reference list in
    ``tests/data/lucene_9.9.1_english.json.gz`` (the sample's pages, generated text with numbers,
    hyphens, apostrophes, possessives, accents, URLs, e-mails, many scripts and emoji, 44,000 words,
    and every code point in 25 contexts). The tokenizer's split is :attr:`split`; the rest runs per
    distinct token (:meth:`term`, memoised).

    Attributes:
        config: what the analyzer does (JSON-ready; part of the index cache key).
    """

    name = "lucene"

    def __init__(self) -> None:
        self.tokenizer = LuceneStandardTokenizer()
        config = {
            "analyzer": "lucene",
            "chain": ["StandardTokenizer", "EnglishPossessiveFilter", "LowerCaseFilter", "StopFilter", "PorterStemFilter"],
            "lucene_version": _lucene_tables.LUCENE_VERSION,
            "tokenizer": f"StandardTokenizer of Lucene {_lucene_tables.LUCENE_VERSION} (UAX #29, Unicode 9.0 classes; "
                         f"max token length {LUCENE_MAX_TOKEN_LENGTH})",
            "unicode_normalization": None,
            "lower": "Character.toLowerCase per code point",
            "stopwords": "lucene_english",
            "num_stopwords": len(LUCENE_ENGLISH_STOP_WORDS),
            "stemmer": "porter (Lucene PorterStemmer: Porter's C version)",
        }
        super().__init__(self.tokenizer, LUCENE_ENGLISH_STOP_WORDS, None, config)

    def _compute(self, token: str) -> str:
        """The term of one ``StandardTokenizer`` token: possessive, lower case, stopword, stem."""
        if len(token) >= 2 and token[-1] in "sS" and token[-2] in _POSSESSIVE_QUOTES:
            token = token[:-2]
        token = lucene_lower(token)
        if token in LUCENE_ENGLISH_STOP_WORDS:
            return ""
        return porter_stem(token)
