"""ViDoRe ingestion through datasets.load_dataset on tiny local folders with the hub schema (offline)."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("datasets")

from vdr.corpus import Corpus  # noqa: E402
from vdr.errors import InputError  # noqa: E402
from vdr.ingest.vidore import PINNED_REVISIONS, ingest_vidore  # noqa: E402
from vdr.io import load_qrels, load_queries  # noqa: E402

from vidore_fixture import make_v1, make_v2  # noqa: E402


@pytest.fixture()
def v2(tmp_path):
    return make_v2(tmp_path / "esg_reports_v2")


def test_v2_english_filter(v2, tmp_path):
    r = ingest_vidore(v2, tmp_path / "out", language="english", cache_dir=tmp_path / "cache", progress=False)
    assert (r.layout, r.revision, r.pages, r.queries, r.qrels) == ("beir", "local", 3, 2, 3)
    assert dict(r.queries_per_language) == {"english": 2}
    corpus = Corpus.load(tmp_path / "out")
    assert corpus.ids() == ["0", "1", "2"]
    assert [(p.width, p.height) for p in corpus.pages()] == [(60, 80), (61, 80), (62, 80)]
    assert corpus.open_image("1").getpixel((0, 0)) == (40, 0, 0)
    qs = load_queries(tmp_path / "out" / "queries.jsonl")
    assert {q: v.text for q, v in qs.items()} == {"0": "what is red", "2": "which page"}
    assert load_qrels(tmp_path / "out" / "qrels.tsv").to_dict() == {"0": {"0": 1}, "2": {"1": 2, "2": 1}}
    assert corpus.report["fingerprint"] == r.fingerprint and corpus.report["dataset"] == str(v2)


def test_v2_all_languages_and_aliases(v2, tmp_path):
    r = ingest_vidore(v2, tmp_path / "all", cache_dir=tmp_path / "cache", progress=False)
    assert dict(r.queries_per_language) == {"english": 2, "french": 2} and r.queries == 4 and r.qrels == 5
    r = ingest_vidore(v2, tmp_path / "fr", language="fra-Latn", cache_dir=tmp_path / "cache", progress=False)
    assert dict(r.queries_per_language) == {"french": 2}
    with pytest.raises(InputError, match=r"no query in language 'klingon'.*english \(2\), french \(2\)"):
        ingest_vidore(v2, tmp_path / "x", language="klingon", cache_dir=tmp_path / "cache", progress=False)


def test_changed_local_file_is_detected_not_served_stale(v2, tmp_path):
    from datasets import Dataset

    r1 = ingest_vidore(v2, tmp_path / "a", cache_dir=tmp_path / "cache", progress=False)
    f = v2 / "queries" / "test-00000-of-00001.parquet"
    st = os.stat(f)
    Dataset.from_dict({"query-id": [0, 1, 2, 3], "query": ["CHANGED", "b", "c", "d"], "language": ["english"] * 4}).to_parquet(str(f))
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))  # same mtime: only the content tells
    r2 = ingest_vidore(v2, tmp_path / "b", cache_dir=tmp_path / "cache", progress=False)
    assert r2.fingerprint != r1.fingerprint
    assert load_queries(tmp_path / "b" / "queries.jsonl")["0"].text == "CHANGED"


def test_v1_qa_layout(tmp_path):
    root = make_v1(tmp_path / "docvqa_test_subsampled")
    r = ingest_vidore(root, tmp_path / "out", cache_dir=tmp_path / "cache", progress=False)
    assert (r.layout, r.pages, r.queries, r.qrels) == ("qa", 2, 2, 2)
    corpus = Corpus.load(tmp_path / "out")
    assert corpus.ids() == ["docs/a%20page.png", "docs/b.png"]
    assert corpus.open_image("docs/b.png").mode == "RGB"
    assert load_qrels(tmp_path / "out" / "qrels.tsv").to_dict() == {"0": {"docs/a%20page.png": 1}, "2": {"docs/a%20page.png": 1}}


def test_unreachable_hub_names_dataset_and_local_path(tmp_path, monkeypatch):
    import datasets
    import huggingface_hub.constants as hc

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True, raising=False)
    monkeypatch.setattr(hc, "HF_HUB_OFFLINE", True, raising=False)
    with pytest.raises(InputError) as e:
        ingest_vidore("vidore/esg_reports_v2", tmp_path / "out", cache_dir=tmp_path / "cache", progress=False)
    msg = str(e.value)
    assert "vidore/esg_reports_v2" in msg and PINNED_REVISIONS["vidore/esg_reports_v2"] in msg
    assert "--local-dir" in msg and "vdr ingest --vidore DIR" in msg


def test_pinned_revisions_are_full_shas():
    assert set(PINNED_REVISIONS) == {
        "vidore/esg_reports_v2", "vidore/economics_reports_v2", "vidore/biomedical_lectures_v2", "vidore/esg_reports_human_labeled_v2",
    }
    assert all(len(v) == 40 and int(v, 16) >= 0 for v in PINNED_REVISIONS.values())
    assert PINNED_REVISIONS["vidore/economics_reports_v2"].startswith("b3e3a04b")
