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


def test_query_attributes_are_kept_as_group_fields(v2, tmp_path):
    """ViDoRe V2/V3 queries carry attributes (language, type, format, ...): every other column of
    the queries config is written to queries.jsonl, where --group-by reads it (issue 27.2); nulls
    and empty lists are no value, a list puts the query in the group of each element (issue 34.9)."""
    from datasets import Dataset

    from vdr.io import load_query_fields

    f = v2 / "queries" / "test-00000-of-00001.parquet"
    Dataset.from_dict({
        "query-id": [0, 1, 2, 3], "query": ["what is red", "quel est rouge", "which page", "quelle page"],
        "language": ["english", "french", "english", "french"], "query_type": ["extractive", "visual", "extractive", None],
        "query_format": ["question", "keyword", "question", "question"], "content_type": [["table", "text"], ["chart"], [], ["text"]],
    }).to_parquet(str(f))
    ingest_vidore(v2, tmp_path / "out", cache_dir=tmp_path / "cache", progress=False)
    assert load_query_fields(tmp_path / "out" / "queries.jsonl") == {
        "0": {"language": "english", "query_type": "extractive", "query_format": "question", "content_type": ("table", "text")},
        "1": {"language": "french", "query_type": "visual", "query_format": "keyword", "content_type": "chart"},
        "2": {"language": "english", "query_type": "extractive", "query_format": "question"},
        "3": {"language": "french", "query_format": "question", "content_type": "text"},
    }
    assert load_queries(tmp_path / "out" / "queries.jsonl")["1"].text == "quel est rouge"


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


# ---------------------------------------------------------------- robustness (issue 13, items 1, 5, 6, 7)


def _png(im) -> bytes:
    import io

    buf = io.BytesIO()
    im.save(buf, "PNG")
    return buf.getvalue()


def _arrow_v2(root, images, *, qrels=None, image_type="struct"):
    """A BEIR-layout dataset written with plain pyarrow (no `datasets` Image feature metadata):
    the image column is a struct {bytes, path} or raw binary. ``images``: {corpus id: PIL image};
    qrels rows ``(query-id, corpus-id, score)``; queries q0..q1."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from vidore_fixture import V2_README

    root.mkdir(parents=True)
    (root / "README.md").write_text(V2_README)
    for sub in ("corpus", "queries", "qrels"):
        (root / sub).mkdir()
    blobs = [_png(im) for im in images.values()]
    if image_type == "struct":
        col = pa.array([{"bytes": b, "path": None} for b in blobs], pa.struct([("bytes", pa.binary()), ("path", pa.string())]))
    else:
        col = pa.array(blobs, pa.binary())
    pq.write_table(pa.table({"corpus-id": list(images), "image": col}), root / "corpus" / "test-00000-of-00001.parquet")
    pq.write_table(pa.table({"query-id": ["q0", "q1"], "query": ["first page", "second page"]}), root / "queries" / "test-00000-of-00001.parquet")
    rows = qrels or [("q0", list(images)[0], 1), ("q1", list(images)[-1], 1)]
    pq.write_table(
        pa.table({"query-id": [r[0] for r in rows], "corpus-id": [r[1] for r in rows], "score": pa.array([r[2] for r in rows], pa.int64())}),
        root / "qrels" / "test-00000-of-00001.parquet",
    )
    return root


@pytest.mark.parametrize("image_type", ["struct", "binary"])
def test_plain_pyarrow_image_columns_are_decoded(tmp_path, image_type):
    # item 6: struct {bytes, path} or raw binary image columns decode like datasets' Image feature
    from PIL import Image

    images = {"p0": Image.new("RGB", (60, 80), (200, 10, 10)), "p1": Image.new("L", (70, 90), 77)}
    root = _arrow_v2(tmp_path / "ds", images, image_type=image_type)
    r = ingest_vidore(root, tmp_path / "out", cache_dir=tmp_path / "cache", progress=False)
    corpus = Corpus.load(tmp_path / "out")
    assert (r.pages, corpus.ids()) == (2, ["p0", "p1"])
    assert corpus.open_image("p0").getpixel((5, 5)) == (200, 10, 10) and corpus.open_image("p1").getpixel((5, 5)) == (77, 77, 77)
    assert corpus["p1"].width == 70 and corpus["p1"].image_sha256 is not None


def test_sixteen_bit_page_keeps_256_gray_levels(tmp_path):
    # item 6: an I;16 page used to come out with 2 gray levels
    import numpy as np
    from PIL import Image

    ramp = (np.tile(np.arange(256, dtype=np.uint16), (40, 1)) * 257)
    root = _arrow_v2(tmp_path / "ds", {"g16": Image.fromarray(ramp), "p1": Image.new("RGB", (60, 60), "white")})
    ingest_vidore(root, tmp_path / "out", cache_dir=tmp_path / "cache", progress=False)
    g = np.asarray(Corpus.load(tmp_path / "out").open_image("g16"))[..., 0]
    assert sorted(set(g.ravel().tolist())) == list(range(256))


def test_page_the_processor_would_reject_is_skipped_not_fatal(tmp_path):
    # item 5: a 70 x 14,400 px page (aspect 206 > 200) and a 20 px page are skipped with a reason;
    # the run goes on; their judgments stay in the qrels (relevant but unretrievable, item 1)
    from PIL import Image

    from vdr.experiment.evaluation import check_inputs

    images = {
        "ok": Image.new("RGB", (60, 80), "white"),
        "strip": Image.new("RGB", (70, 14400), "white"),
        "tiny": Image.new("RGB", (20, 300), "white"),
        "big": Image.new("RGB", (4000, 3000), "white"),
    }
    qrels = [("q0", "ok", 1), ("q0", "strip", 2), ("q1", "tiny", 1), ("q1", "big", 1)]
    root = _arrow_v2(tmp_path / "ds", images, qrels=qrels)
    with pytest.warns(Warning, match="2 page\\(s\\) skipped"):
        r = ingest_vidore(root, tmp_path / "out", max_pixels=1_000_000, cache_dir=tmp_path / "cache", progress=False)
    corpus = Corpus.load(tmp_path / "out")
    assert corpus.ids() == ["ok", "big"] and r.pages == 2 and r.qrels == 4
    strip = "extreme aspect ratio 206:1 (models accept at most 200:1)"
    tiny = "page too small: 20 px on its short side (models need >= 28 px)"
    assert corpus.unavailable() == {"strip": strip, "tiny": tiny}
    assert corpus.report["adapted_pages"] == [
        {"corpus-id": "big", "reason": "downscaled from 4000 x 3000 to 1154 x 866 px to fit the pixel budget of 1000000 px"}
    ]
    assert (corpus["big"].width, corpus["big"].height) == (1154, 866)
    qs, qr = load_queries(tmp_path / "out" / "queries.jsonl"), load_qrels(tmp_path / "out" / "qrels.tsv")
    with pytest.warns(Warning, match="2 judged page\\(s\\) were not ingested and stay relevant but unretrievable"):
        missing = check_inputs(corpus, qs, qr, tmp_path / "out" / "qrels.tsv")
    assert missing == {"strip": strip, "tiny": tiny}


def test_undecodable_page_is_skipped_and_no_page_at_all_is_an_error(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq
    from PIL import Image

    root = _arrow_v2(tmp_path / "ds", {"a": Image.new("RGB", (60, 80)), "b": Image.new("RGB", (60, 80))}, image_type="binary")
    t = pq.read_table(root / "corpus" / "test-00000-of-00001.parquet")
    col = pa.array([t.column("image")[0].as_py(), b"garbage"], pa.binary())
    pq.write_table(t.set_column(1, "image", col), root / "corpus" / "test-00000-of-00001.parquet")
    with pytest.warns(Warning, match="skipped"):
        ingest_vidore(root, tmp_path / "out", cache_dir=tmp_path / "cache", progress=False)
    c = Corpus.load(tmp_path / "out")
    assert c.ids() == ["a"] and c.unavailable_reason("b").startswith("cannot decode image from 7 bytes")
    pq.write_table(t.set_column(1, "image", pa.array([b"x", b"y"], pa.binary())), root / "corpus" / "test-00000-of-00001.parquet")
    with pytest.raises(InputError, match="no page of the corpus could be ingested: a: cannot decode"):
        ingest_vidore(root, tmp_path / "out2", cache_dir=tmp_path / "cache", progress=False)


@pytest.mark.parametrize("grades", [(2, 0), (1, 1)])
def test_duplicate_judgments_are_rejected_like_the_file_loaders(tmp_path, grades):
    # item 7: same (query, corpus id) twice: an error naming both rows, never "keep the last"
    from PIL import Image

    qrels = [("q0", "p0", grades[0]), ("q1", "p1", 1), ("q0", "p0", grades[1])]
    root = _arrow_v2(tmp_path / "ds", {"p0": Image.new("RGB", (60, 80)), "p1": Image.new("RGB", (60, 80))}, qrels=qrels)
    with pytest.raises(InputError, match=rf"duplicate judgment of query 'q0', corpus id 'p0' in the qrels config: rows 1 and 3 \(grades {grades[0]} and {grades[1]}\)"):
        ingest_vidore(root, tmp_path / "out", cache_dir=tmp_path / "cache", progress=False)
    (tmp_path / "dup.tsv").write_text("query-id\tcorpus-id\tscore\nq0\tp0\t2\nq0\tp0\t0\n")
    with pytest.raises(InputError, match="duplicate judgment of query 'q0', corpus id 'p0'"):
        load_qrels(tmp_path / "dup.tsv")  # the file loaders' rule, the same


def test_vidore_report_records_duplicates_and_ocr_threads(v2, tmp_path):
    from vdr.ingest.pdfdir import available_cores

    ingest_vidore(v2, tmp_path / "out", cache_dir=tmp_path / "cache", progress=False)
    rep = Corpus.load(tmp_path / "out").report
    assert rep["duplicate_pages"] == {"num_groups": 0, "num_pages": 0, "groups": []}
    assert rep["ocr_threads"] == {"workers": 1, "omp_thread_limit_per_worker": None, "cores": available_cores()}
    assert rep["unavailable_pages"] == [] and rep["adapted_pages"] == []


def test_vidore_duplicate_page_images_are_reported(tmp_path):
    # item 11: two corpus ids with the same pixels (whatever their encoding) form one group
    from PIL import Image

    same = Image.new("RGB", (60, 80), (9, 9, 9))
    images = {"a": same, "b": Image.new("RGB", (60, 80), "white"), "c": same.convert("L").convert("RGB")}
    root = _arrow_v2(tmp_path / "ds", images)
    with pytest.warns(Warning, match="duplicate image"):
        ingest_vidore(root, tmp_path / "out", cache_dir=tmp_path / "cache", progress=False)
    c = Corpus.load(tmp_path / "out")
    assert c.duplicate_images() == [["a", "c"]]
    assert c.report["duplicate_pages"] == {"num_groups": 1, "num_pages": 2, "groups": [["a", "c"]]}
