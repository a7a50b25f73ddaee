"""Unicode normalisation of page text and query text (one policy for every backend).

Text reaches vdr from PDF text layers (pdfium or poppler), Tesseract, datasets and query files, and
the same word can arrive as different code points: the ligature ``"ﬁ"`` (U+FB01) or ``"fi"``; a
precomposed ``"é"`` (U+00E9) or ``"e"`` + combining acute (U+0301); full-width ``"Ａ"`` or ``"A"``.
:func:`normalize_text` maps them to one form so that a query typed ``"financial"`` or ``"résumé"``
matches the page, whichever rasterizer or dataset produced it.

Policy (:data:`TEXT_POLICY`, recorded by the backends):

* **Unicode**: NFKC (compatibility decomposition, then canonical composition): ligatures are split
  (``"ﬁ"`` -> ``"fi"``), decomposed accents are composed (``"e\\u0301"`` -> ``"é"``), full-width and
  other compatibility forms become their plain characters (``"²"`` -> ``"2"``, ``"Ａ"`` -> ``"A"``).
* **Invisible characters**: the soft hyphen U+00AD (a hyphenation hint, never shown unless a line
  breaks there) is removed, so ``"infor\\u00admation"`` is one word.
* **Case**: kept here. The lexical backend lower-cases tokens (its ``lower`` option, default on);
  the semantic backend gives the model the cased text (its tokenizer decides).
* **Accents**: kept. ``"résumé"`` and ``"resume"`` stay different words (accents distinguish words in
  French, Spanish, German, ...); only the *encoding* of an accent is normalised.

Applied to page text at ingest (both rasterizers, OCR, datasets) and again where texts enter the
lexical and semantic backends (pages and queries alike), so corpora ingested before this policy are
normalised too. The function is idempotent.
"""

from __future__ import annotations

import unicodedata

__all__ = ["normalize_text", "TEXT_POLICY", "UNICODE_FORM"]

#: The Unicode normalisation form applied to every page and query text.
UNICODE_FORM = "NFKC"
#: The policy as recorded in backend configurations.
TEXT_POLICY = {
    "unicode": UNICODE_FORM,
    "removed": ["U+00AD soft hyphen"],
    "case": "kept (the lexical backend lower-cases tokens when lower=True)",
    "accents": "kept (composed by NFKC, never stripped)",
}

_REMOVE = dict.fromkeys(map(ord, "\u00ad"))


def normalize_text(text: str) -> str:
    """``text`` in NFKC with soft hyphens removed (case and accents kept; see the module docstring).

    Args:
        text: any ``str``.

    Returns:
        The normalised ``str`` (``normalize_text(normalize_text(t)) == normalize_text(t)``).

    Raises:
        TypeError: ``text`` is not a ``str``.

    >>> normalize_text("\\ufb01nancial")
    'financial'
    >>> normalize_text("Re\\u0301sume\\u0301") == "Résumé"
    True
    >>> normalize_text("infor\\u00admation")
    'information'
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    if text.isascii():
        return text
    return unicodedata.normalize(UNICODE_FORM, text.translate(_REMOVE))
