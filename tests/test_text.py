"""Unicode policy (vdr.text): NFKC for page text and queries alike, in the lexical and semantic backends."""

from __future__ import annotations

import unicodedata

import numpy as np
import pytest

from vdr.retrieve.lexical import BM25Backend
from vdr.text import TEXT_POLICY, normalize_text

LIGATURE = "\ufb01nancial"  # "ﬁnancial"
DECOMPOSED = "Re\u0301sume\u0301"  # "Résumé" with combining accents


def test_normalize_text_values():
    assert normalize_text(LIGATURE) == "financial"
    assert normalize_text(DECOMPOSED) == "R\u00e9sum\u00e9" and len(normalize_text(DECOMPOSED)) == 6
    assert normalize_text("infor\u00admation") == "information"  # soft hyphen removed
    assert normalize_text("\uff21\uff22 x\u00b2") == "AB x2"  # full-width letters, superscript
    assert normalize_text("R\u00e9sum\u00e9 Stra\u00dfe") == "R\u00e9sum\u00e9 Stra\u00dfe"  # case and accents kept
    assert normalize_text("plain ascii") == "plain ascii"
    for t in (LIGATURE, DECOMPOSED, "e\u0301\u0301\ufb03 \u00ad"):
        assert normalize_text(normalize_text(t)) == normalize_text(t)
        assert unicodedata.is_normalized("NFKC", normalize_text(t))
    with pytest.raises(TypeError):
        normalize_text(None)
    assert TEXT_POLICY["unicode"] == "NFKC"



def _bm25(texts, **options):
    bm = BM25Backend(**options)
    bm.index(texts)
    return bm


def test_lexical_matches_ligatures_and_decomposed_accents_both_ways():
    pages = {"lig": f"the {LIGATURE} statements", "acc": f"my {DECOMPOSED} online", "other": "nothing relevant here"}
    bm = _bm25(pages, stemmer=None)
    run = bm.search({"q1": "financial", "q2": "r\u00e9sum\u00e9", "q3": "R\u00c9SUM\u00c9"}, 3).to_dict()
    assert list(run["q1"]) == ["lig"] and list(run["q2"]) == ["acc"] and list(run["q3"]) == ["acc"]
    # the other way round: typed with a ligature / decomposed accents, pages in plain form
    bm2 = _bm25({"lig": "the financial statements", "acc": "my r\u00e9sum\u00e9 online", "other": "nothing relevant here"}, stemmer=None)
    run2 = bm2.search({"q1": LIGATURE, "q2": DECOMPOSED}, 3).to_dict()
    assert list(run2["q1"]) == ["lig"] and list(run2["q2"]) == ["acc"]
    assert run["q1"]["lig"] == pytest.approx(run2["q1"]["lig"])  # same tokens, same scores
    assert bm.tokenize(LIGATURE + " " + DECOMPOSED) == ["financial", "r\u00e9sum\u00e9"]
    assert bm.config["tokenizer"]["text"] == TEXT_POLICY


def test_accents_are_kept_not_stripped():
    bm = _bm25({"fr": "un r\u00e9sum\u00e9", "en": "a resume"}, stemmer=None, stopwords=None)
    assert list(bm.search({"q": "r\u00e9sum\u00e9"}, 5).to_dict()["q"]) == ["fr"]


@pytest.fixture(scope="module")
def dense():
    pytest.importorskip("sentence_transformers")
    from vdr.retrieve.semantic import DenseBackend

    return DenseBackend(device="cpu", batch_size=4)


def test_semantic_sees_the_same_text_for_every_encoding(dense):
    dense.index({"a": f"{LIGATURE} report of {DECOMPOSED}", "b": "a page about gardening and flowers"})
    composed = dense.page_embeddings[0].copy()
    dense.index({"a": "financial report of R\u00e9sum\u00e9", "b": "a page about gardening and flowers"})
    assert np.array_equal(dense.page_embeddings[0], composed)  # the page vector does not depend on the encoding
    r1 = dense.search({"q": f"{LIGATURE} {DECOMPOSED}"}, 2).to_dict()["q"]
    r2 = dense.search({"q": "financial R\u00e9sum\u00e9"}, 2).to_dict()["q"]
    assert list(r1) == list(r2) == ["a", "b"] and r1 == pytest.approx(r2, abs=0)
    assert dense.config["text"] == TEXT_POLICY
