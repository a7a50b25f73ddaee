"""The corpus contract: pages.jsonl records, validation errors with file and line, safe image paths."""

from __future__ import annotations

import json

import pytest

from vdr.corpus import Corpus, Page, image_name, page_id
from vdr.errors import InputError


def _rec(cid="a.pdf#1", **kw):
    r = {"corpus-id": cid, "source": "a.pdf", "page": 1, "width": 10, "height": 20, "dpi": 72.0,
         "image": image_name(cid), "text": "hello", "text_source": "pdf"}
    r.update(kw)
    return r


def _write(tmp_path, recs):
    (tmp_path / "pages.jsonl").write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in recs))
    return tmp_path


def test_round_trip_and_accessors(tmp_path):
    _write(tmp_path, [_rec("a.pdf#1"), _rec("a.pdf#2", page=2, text="", text_source="none")])
    c = Corpus.load(tmp_path)
    assert c.ids() == ["a.pdf#1", "a.pdf#2"] and len(c) == 2
    assert c["a.pdf#1"] == Page("a.pdf#1", "a.pdf", 1, 10, 20, 72.0, image_name("a.pdf#1"), "hello", "pdf")
    assert c.texts() == {"a.pdf#1": "hello", "a.pdf#2": ""}
    assert c.image_path("a.pdf#2") == (tmp_path / image_name("a.pdf#2")).resolve()
    assert Page.from_json(c["a.pdf#1"].to_json()) == c["a.pdf#1"]
    with pytest.raises(KeyError, match="not in the corpus"):
        c["nope"]


@pytest.mark.parametrize(
    "bad, words",
    [
        ("{not json", "invalid JSON"),
        (json.dumps(_rec(width=0)), "size must be positive"),
        (json.dumps({k: v for k, v in _rec().items() if k != "source"}), "missing field 'source'"),
        (json.dumps(_rec(page="1")), "wrong type"),
        (json.dumps(_rec(image="../../etc/passwd")), "unsafe image path"),
        (json.dumps(_rec(image="/abs/x.png")), "unsafe image path"),
        (json.dumps(_rec(text_source="magic")), "text_source"),
        (json.dumps(_rec("a.pdf#1")), "duplicate corpus id"),
    ],
)
def test_bad_lines_name_file_and_line(tmp_path, bad, words):
    _write(tmp_path, [_rec("a.pdf#1"), bad])
    with pytest.raises(InputError, match=words) as e:
        Corpus.load(tmp_path)
    assert e.value.line == 2 and e.value.path.endswith("pages.jsonl")


def test_missing_corpus_folder(tmp_path):
    with pytest.raises(InputError, match="pages.jsonl is missing"):
        Corpus.load(tmp_path)


def test_ids_and_image_names():
    assert page_id("reports/esg 2023.pdf", 12) == "reports/esg%202023.pdf#12"
    assert page_id("a%b\tc.pdf", 1) == "a%25b%09c.pdf#1"
    assert page_id("é ü.pdf", 2) == "é%20ü.pdf#2"
    for cid in ("../../x#1", "/etc/passwd", "..", "a/../../b", "\\\\server\\x", ""):
        name = image_name(cid)
        assert name.startswith("images/") and name.count("/") == 1 and ".." not in name.split("/")[1][:2]
    assert image_name("a b") != image_name("a_b")
    with pytest.raises(InputError):
        page_id("a.pdf", 0)


def test_image_sha256_round_trip_and_validation(tmp_path):
    h = "ab" * 32
    _write(tmp_path, [_rec("a.pdf#1", image_sha256=h), _rec("a.pdf#2", page=2), _rec("b.pdf#1", source="b.pdf", image_sha256=h)])
    c = Corpus.load(tmp_path)
    assert c["a.pdf#1"].image_sha256 == h and c["a.pdf#2"].image_sha256 is None  # older corpora: no hash
    assert Page.from_json(c["a.pdf#1"].to_json()) == c["a.pdf#1"]
    assert c.duplicate_images() == [["a.pdf#1", "b.pdf#1"]]
    _write(tmp_path, [_rec("a.pdf#1", image_sha256="xyz")])
    with pytest.raises(InputError, match="image_sha256"):
        Corpus.load(tmp_path)


def _report(tmp_path, report):
    (tmp_path / "ingest-report.json").write_text(json.dumps(report))
    return Corpus.load(tmp_path)


def test_unavailable_pages_and_reasons(tmp_path):
    _write(tmp_path, [_rec("a.pdf#1"), _rec("sub%20dir/p.pdf#1", source="sub dir/p.pdf")])
    docs = [
        {"source": "a.pdf", "status": "partial", "page_count": 3, "reason": "1 of 3 pages skipped",
         "page_issues": [{"page": 2, "reason": "extreme aspect ratio 288:1"}, {"page": 1, "reason": "OCR failed: x"}]},
        {"source": "broken.pdf", "status": "failed", "page_count": 0, "reason": "truncated PDF", "page_issues": []},
        {"source": "sub dir/p.pdf", "status": "partial", "page_count": 2, "reason": "r", "page_issues": [{"page": 2, "reason": "timed out"}]},
        {"source": "skipall.pdf", "status": "failed", "page_count": 2, "reason": "no page could be ingested", "page_issues": []},
    ]
    # an older report (no unavailable_pages): derived from the documents' page issues
    c = _report(tmp_path, {"kind": "pdf", "documents": docs})
    assert c.unavailable() == {"a.pdf#2": "extreme aspect ratio 288:1", "sub%20dir/p.pdf#2": "timed out"}
    assert c.unavailable_reason("a.pdf#2") == "extreme aspect ratio 288:1"
    assert c.unavailable_reason("a.pdf#1") is None  # a page of the corpus
    assert c.unavailable_reason("broken.pdf#7") == "broken.pdf: truncated PDF"  # never opened: any page
    assert c.unavailable_reason("skipall.pdf#2") == "skipall.pdf: no page could be ingested"
    assert c.unavailable_reason("skipall.pdf#3") is None  # beyond its page count
    for unknown in ("nosuch.pdf#1", "broken.pdf", "broken.pdf#0", "broken.pdf#x", "a.pdf#4"):
        assert c.unavailable_reason(unknown) is None, unknown
    # the listed form (written by every ingest path) wins
    c = _report(tmp_path, {"kind": "vidore", "unavailable_pages": [{"corpus-id": "7", "reason": "page too small"}]})
    assert c.unavailable() == {"7": "page too small"} and c.unavailable_reason("7") == "page too small"
    assert c.unavailable_reason("broken.pdf#1") is None  # documents are only read from PDF reports


# ------------------------------------------------------------------------- the corpus protocol
def _passage_corpus(tmp_path):
    from vdr.ingest.passages import ingest_passages

    d = tmp_path / "beir"
    d.mkdir()
    (d / "corpus.jsonl").write_text("\n".join(json.dumps(o) for o in [
        {"_id": "d1", "title": "Cats", "text": "cats purr"},
        {"_id": "d2", "title": "", "text": "dogs bark"},
        {"_id": "d3", "title": "", "text": ""},
    ]) + "\n")
    ingest_passages(d, tmp_path / "passages")
    return tmp_path / "passages"


def test_page_and_passage_corpora_satisfy_the_protocol(tmp_path):
    """Both kinds answer the same questions through :class:`CorpusLike`, and consumers branch on the
    typed ``kind`` (also the unit results count), never on a missing attribute."""
    from vdr.corpus import CorpusLike, PassageCorpus, load_corpus

    (tmp_path / "pages").mkdir()
    pages = load_corpus(_write(tmp_path / "pages", [_rec("a.pdf#1"), _rec("a.pdf#2", page=2, text="", text_source="none")]))
    passages = load_corpus(_passage_corpus(tmp_path))
    assert type(pages) is Corpus and type(passages) is PassageCorpus
    assert isinstance(pages, CorpusLike) and isinstance(passages, CorpusLike)
    assert not isinstance({"d1": "text"}, CorpusLike)  # a plain {id: text} mapping is not a corpus
    assert (pages.kind, passages.kind) == ("page", "passage")
    assert pages.root == tmp_path / "pages" and passages.root == tmp_path / "passages"
    assert pages.report == {} and passages.report["kind"] == "passage"
    expected = [
        (pages, ["a.pdf#1", "a.pdf#2"], {"a.pdf#1": "hello", "a.pdf#2": ""}),
        (passages, ["d1", "d2", "d3"], {"d1": "Cats cats purr", "d2": "dogs bark", "d3": ""}),
    ]
    for c, ids, texts in expected:
        assert c.ids() == ids and list(c) == ids and len(c) == len(ids)
        assert ids[0] in c and "absent" not in c
        assert c.texts() == texts
        assert list(c.iter_texts(batch_size=2)) == [(ids[i:i + 2], [texts[d] for d in ids[i:i + 2]]) for i in range(0, len(ids), 2)]
        assert c.unavailable_reason(ids[0]) is None


def test_the_corpus_module_owns_the_layout_names(tmp_path):
    """The passage ingest writes exactly the files whose names vdr.corpus defines (one definition)."""
    import importlib

    import vdr.corpus as C

    P = importlib.import_module("vdr.ingest.passages")  # `import vdr.ingest.x as P` meets the verb vdr.ingest

    names = ("MANIFEST_FILE", "PASSAGES_FILE", "IDS_FILE", "EMPTY_FILE", "OFFSETS_FILE")
    assert [getattr(C, n) for n in names] == ["corpus.json", "passages.jsonl", "ids.txt", "empty_ids.txt", "offsets.npy"]
    assert all(getattr(P, n) is getattr(C, n) for n in names)  # re-exported, not redefined
    root = _passage_corpus(tmp_path)
    assert sorted(p.name for p in root.iterdir()) == sorted(getattr(C, n) for n in names)
