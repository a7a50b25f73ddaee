"""ViDoRe ingestion through datasets.load_dataset on tiny local folders with the hub schema (offline)."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("datasets")

from vdr.corpus import Corpus  # noqa: E402
from vdr.errors import InputError  # noqa: E402
from vdr.ingest.vidore import ingest_vidore, pinned_revisions  # noqa: E402
from vdr.io import load_qrels, load_queries  # noqa: E402

import vidore_fixture as vf  # noqa: E402
from vidore_fixture import make_v1, make_v1_beir, make_v2, make_v3, make_v3_mteb, save_to_disk_copy  # noqa: E402


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


def test_v1_qa_layout_counts_a_repeated_query_once_judged_on_each_page(tmp_path):
    """V1 QA rows: a null query is skipped and counted; 'q one' on rows 0 and 3 (two pages) is ONE
    query (id 0, its first row) judged on both pages, as vidore-benchmark deduplicates queries."""
    root = make_v1(tmp_path / "docvqa_test_subsampled")
    r = ingest_vidore(root, tmp_path / "out", cache_dir=tmp_path / "cache", progress=False)
    assert (r.layout, r.pages, r.queries, r.qrels) == ("qa", 3, 2, 3)
    corpus = Corpus.load(tmp_path / "out")
    assert corpus.ids() == ["docs/a%20page.png", "docs/b.png", "docs/c.png"]
    assert corpus.open_image("docs/b.png").mode == "RGB"
    assert {q: v.text for q, v in load_queries(tmp_path / "out" / "queries.jsonl").items()} == {"0": "q one", "2": "q three"}
    assert load_qrels(tmp_path / "out" / "qrels.tsv").to_dict() == {
        "0": {"docs/a%20page.png": 1, "docs/c.png": 1}, "2": {"docs/a%20page.png": 1}}
    counts = r.extra["qa_queries"]
    assert (counts["rows_with_null_query"], counts["rows_repeating_a_query"], counts["queries_judged_on_several_pages"]) == (1, 1, 1)
    assert any("repeat an earlier query text" in n for n in r.notes)


def test_v1_beir_copy_float_grades_become_integers(tmp_path):
    root = make_v1_beir(tmp_path / "shiftproject_test_beir")
    r = ingest_vidore(root, tmp_path / "out", cache_dir=tmp_path / "cache", progress=False)
    assert (r.layout, r.pages, r.queries, r.qrels) == ("beir", 3, 2, 2)
    assert load_qrels(tmp_path / "out" / "qrels.tsv").to_dict() == {"0": {"2": 1}, "1": {"0": 1}}
    assert r.extra["text_sources"] == {"none": 3} and any("no page has text" in n for n in r.notes)


def _v3_expected_queries():
    return {str(qid): text for qid, text, _, _ in vf._v3_query_rows()}


def test_v3_raw_layout_keeps_markdown_grades_types_boxes_and_documents(tmp_path):
    import json

    from vdr.io import load_query_fields

    root = make_v3(tmp_path / "vidore_v3_pharmaceuticals")
    r = ingest_vidore(root, tmp_path / "out", cache_dir=tmp_path / "cache", progress=False)
    assert (r.layout, r.pages, r.queries, r.qrels) == ("v3", 3, 12, 18)
    assert dict(r.queries_per_language) == {lang: 2 for lang in vf.V3_LANGUAGES}
    corpus = Corpus.load(tmp_path / "out")
    assert [(p.text, p.text_source) for p in corpus.pages()] == [(t, "markdown") for t in vf.V3_PAGES]
    assert r.extra["text_sources"] == {"markdown": 3} and r.extra["graded_qrels"] == [1, 2]
    assert {q: v.text for q, v in load_queries(tmp_path / "out" / "queries.jsonl").items()} == _v3_expected_queries()
    qrels = load_qrels(tmp_path / "out" / "qrels.tsv").to_dict()
    assert qrels["0"] == {"0": 2, "2": 1} and qrels["11"] == {"1": 2} and len(qrels) == 12
    fields = load_query_fields(tmp_path / "out" / "queries.jsonl")
    assert fields["0"]["language"] == "english" and fields["3"]["language"] == "french"
    assert fields["0"]["query_types"] == ("numerical", "extractive")  # a list: the query is in each of its groups
    assert fields["1"]["source_type"] == "single-page" and "answer" not in fields["0"] and "raw_answers" not in fields["0"]
    boxes = [json.loads(x) for x in (tmp_path / "out" / "qrels_boxes.jsonl").read_text().splitlines()]
    assert len(boxes) == 18 and boxes[0] == {"query-id": "0", "corpus-id": "0", "content_type": ["text"],
                                             "bounding_boxes": [{"annotator": 1, "x1": 1, "x2": 30, "y1": 2, "y2": 40}]}
    meta = [json.loads(x) for x in (tmp_path / "out" / "page_metadata.jsonl").read_text().splitlines()]
    assert [(m["corpus-id"], m["doc_id"], m["page_number_in_doc"], m["document"]["doc_type"]) for m in meta] == [
        ("0", "docA", 1, "report"), ("1", "docA", 2, "report"), ("2", "docB", 1, "manual")]
    assert meta[0]["document"]["doc_year"] == "2023" and meta[0]["document"]["visual_types"] == ["table"]


@pytest.mark.parametrize("ocr", [False, True], ids=["mteb_format", "ocr_copy"])
def test_v3_mteb_copies_one_corpus_six_languages(tmp_path, ocr):
    root = make_v3_mteb(tmp_path / "vidore_v3_hr_mteb_format", ocr=ocr)
    r = ingest_vidore(root, tmp_path / "out", cache_dir=tmp_path / "cache", progress=False)
    assert (r.layout, r.pages, r.queries, r.qrels) == ("mteb", 3, 12, 18)
    assert r.extra["subsets"] == list(vf.V3_LANGUAGES)
    corpus = Corpus.load(tmp_path / "out")
    assert corpus.ids() == ["corpus-test-0", "corpus-test-1", "corpus-test-2"]
    assert [p.text_source for p in corpus.pages()] == (["dataset"] * 3 if ocr else ["none"] * 3)
    assert [p.text for p in corpus.pages()] == (list(vf.V3_PAGES) if ocr else [""] * 3)
    qs = load_queries(tmp_path / "out" / "queries.jsonl")
    assert {q: v.text for q, v in qs.items()} == {f"query-test-{k}": t for k, t in _v3_expected_queries().items()}
    assert load_qrels(tmp_path / "out" / "qrels.tsv").to_dict()["query-test-2"] == {"corpus-test-0": 2, "corpus-test-2": 1}
    r = ingest_vidore(root, tmp_path / "some", language="english,german", cache_dir=tmp_path / "cache", progress=False)
    assert dict(r.queries_per_language) == {"english": 2, "german": 2} and r.qrels == 6


@pytest.mark.parametrize("per_config", [False, True], ids=["datasetdict", "folder_per_config"])
def test_save_to_disk_folders_are_read(tmp_path, per_config):
    snap = make_v3(tmp_path / "v3") if per_config else make_v3_mteb(tmp_path / "v3m")
    saved = save_to_disk_copy(snap, tmp_path / "saved", per_config=per_config)
    r = ingest_vidore(saved, tmp_path / "out", cache_dir=tmp_path / "cache", progress=False)
    assert (r.layout, r.pages, r.queries, r.qrels) == ("v3" if per_config else "mteb", 3, 12, 18)


def test_an_unknown_layout_lists_the_layouts_vdr_reads(tmp_path):
    from datasets import Dataset

    root = tmp_path / "odd"
    (root / "data").mkdir(parents=True)
    Dataset.from_dict({"question": ["a"], "picture": ["b"]}).to_parquet(str(root / "data" / "test-00000-of-00001.parquet"))
    with pytest.raises(InputError) as e:
        ingest_vidore(root, tmp_path / "out", cache_dir=tmp_path / "cache", progress=False)
    msg = str(e.value)
    assert "not a ViDoRe layout vdr knows" in msg
    assert all(k in msg for k in ("V1 QA", "V1 _beir / V2", "ViDoRe V3", "MTEB copies", "corpus_id", "question, picture"))


def test_unreachable_hub_names_dataset_and_local_path(tmp_path, monkeypatch):
    import datasets
    import huggingface_hub.constants as hc

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True, raising=False)
    monkeypatch.setattr(hc, "HF_HUB_OFFLINE", True, raising=False)
    with pytest.raises(InputError) as e:
        ingest_vidore("vidore/esg_reports_v2", tmp_path / "out", cache_dir=tmp_path / "cache", progress=False)
    msg = str(e.value)
    assert "vidore/esg_reports_v2" in msg and pinned_revisions()["vidore/esg_reports_v2"] in msg
    assert "--local-dir" in msg and "vdr ingest --vidore DIR" in msg


def test_pinned_revisions_come_from_the_installed_mteb():
    """Every MTEB ViDoRe task (V1, V2, V3 and V3's OCR .v2 tasks) pins a full commit, read from
    mteb's own task metadata; task and benchmark names resolve to their datasets."""
    mteb = pytest.importorskip("mteb")
    from vdr.ingest.vidore import benchmark_tasks, mteb_vidore_tasks, resolve_name

    tasks = mteb_vidore_tasks()
    for name in ("VidoreDocVQARetrieval", "Vidore2ESGReportsRetrieval", "Vidore3HrRetrieval", "Vidore3HrRetrieval.v2"):
        md = mteb.get_task(name).metadata
        assert (tasks[name].dataset, tasks[name].revision, tasks[name].main_score) == (
            md.dataset["path"], md.dataset["revision"], md.main_score)
    pins = pinned_revisions()
    assert all(len(v) == 40 and int(v, 16) >= 0 for v in pins.values())
    assert pins["vidore/economics_reports_v2"].startswith("b3e3a04b")
    assert resolve_name("Vidore3HrRetrieval") == "vidore/vidore_v3_hr_mteb_format"
    assert resolve_name("Vidore3HrRetrieval.v2") == "mteb/Vidore3HrOCRRetrieval"
    assert resolve_name("vidore/vidore_v3_hr") == "vidore/vidore_v3_hr"
    v3 = [t.name for t in benchmark_tasks("ViDoRe(v3)")]
    assert v3 == [t.metadata.name for t in mteb.get_benchmark("ViDoRe(v3)").tasks if t.metadata.is_public]
    assert len(v3) == 8 and "Vidore3HrRetrieval" in v3



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


def test_mteb_query_ids_repeated_across_subsets_are_made_unique(tmp_path):
    """Two subsets whose queries share ids (q0, q1 in both): each becomes '<subset>:<id>' (recorded),
    and each subset's qrels follow its own queries."""
    from datasets import Dataset, Features, Image, Value

    tables = {}
    for lang, text in (("english", "red page"), ("french", "page rouge")):
        tables[f"{lang}-corpus"] = Dataset.from_dict({"id": ["c0", "c1"], "image": [vf._image("white"), vf._image("red")]},
                                                     features=Features({"id": Value("string"), "image": Image()}))
        tables[f"{lang}-queries"] = Dataset.from_dict({"id": ["q0", "q1"], "text": [text, text + " 2"], "language": [lang] * 2})
        tables[f"{lang}-qrels"] = Dataset.from_dict({"query-id": ["q0", "q1"], "corpus-id": ["c1", "c0" if lang == "english" else "c1"],
                                                     "score": [1, 1]})
    root = vf._write(tmp_path / "clash", tables, "clash")
    r = ingest_vidore(root, tmp_path / "out", cache_dir=tmp_path / "cache", progress=False)
    assert r.queries == 4 and any("<subset>:<id>" in n for n in r.notes)
    assert load_qrels(tmp_path / "out" / "qrels.tsv").to_dict() == {
        "english:q0": {"c1": 1}, "english:q1": {"c0": 1}, "french:q0": {"c1": 1}, "french:q1": {"c1": 1}}
    assert load_queries(tmp_path / "out" / "queries.jsonl")["french:q0"].text == "page rouge"
