"""Tiny local ViDoRe datasets in each published layout, as `hf download REPO --repo-type dataset
--local-dir DIR` leaves them (a README.md with `configs`, one parquet file per config and split),
or as `save_to_disk` writes them. Columns, dtypes and config names follow the public sources named
on each builder; nothing here is invented.
"""

from __future__ import annotations

from pathlib import Path

#: V3's six query languages (mteb 2.26 ``vidore3_bench_retrieval._LANGS``: the subset names).
V3_LANGUAGES = ("english", "french", "spanish", "german", "italian", "portuguese")


def _readme(configs, title: str) -> str:
    lines = ["---", "configs:"]
    for c in configs:
        lines += [f"- config_name: {c}", "  data_files:", "  - split: test", f"    path: {c}/test-*"]
    return "\n".join(lines + ["---", f"# {title} (test fixture)", ""])


def _image(color, size=(60, 80), mode="RGB"):
    from PIL import Image

    return Image.new(mode, size, color)


def _write(root: Path, tables: dict, title: str) -> Path:
    """Each ``{config: Dataset}`` as ``config/test-00000-of-00001.parquet`` plus the README."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "README.md").write_text(_readme(list(tables), title))
    for config, ds in tables.items():
        (root / config).mkdir(exist_ok=True)
        ds.to_parquet(str(root / config / "test-00000-of-00001.parquet"))
    return root


def make_v2(root: Path, *, n_pages: int = 3) -> Path:
    """ViDoRe V2 (``vidore/esg_reports_v2``; mteb 2.26 ``vidore2_bench_retrieval._load_data``):
    configs corpus (``corpus-id`` int64, ``image``, ``doc-id``), queries (``query-id`` int64,
    ``query``, ``language`` english/french/...), qrels (``query-id``, ``corpus-id``, ``score`` int64)."""
    from datasets import Dataset, Features, Image, Value

    corpus = Dataset.from_dict(
        {"corpus-id": list(range(n_pages)), "image": [_image((40 * i, 0, 0), (60 + i, 80)) for i in range(n_pages)], "doc-id": ["d"] * n_pages},
        features=Features({"corpus-id": Value("int64"), "image": Image(), "doc-id": Value("string")}),
    )
    queries = Dataset.from_dict(
        {
            "query-id": [0, 1, 2, 3],
            "query": ["what is red", "quel est rouge", "which page", "quelle page"],
            "language": ["english", "french", "english", "french"],
        },
        features=Features({"query-id": Value("int64"), "query": Value("string"), "language": Value("string")}),
    )
    qrels = Dataset.from_dict(
        {"query-id": [0, 1, 2, 3, 2], "corpus-id": [0, 0, 1, 1, 2], "score": [1, 1, 2, 2, 1]},
        features=Features({"query-id": Value("int64"), "corpus-id": Value("int64"), "score": Value("int64")}),
    )
    return _write(root, {"corpus": corpus, "queries": queries, "qrels": qrels}, "ViDoRe V2 layout")


def make_v1_beir(root: Path) -> Path:
    """ViDoRe V1's BEIR copies (card of ``vidore/shiftproject_test_beir``, loaded by mteb 2.26's
    ``vidore_bench_retrieval._load_data`` from ``mteb/shiftproject_test_beir``): corpus
    (``corpus-id`` int64, ``image``), queries (``query-id`` int64, ``query``), qrels (``query-id``,
    ``corpus-id`` int64, ``score`` float64 on that card)."""
    from datasets import Dataset, Features, Image, Value

    corpus = Dataset.from_dict({"corpus-id": [0, 1, 2], "image": [_image(c) for c in ("white", "gray", "black")]},
                               features=Features({"corpus-id": Value("int64"), "image": Image()}))
    queries = Dataset.from_dict({"query-id": [0, 1], "query": ["first question", "second question"]},
                                features=Features({"query-id": Value("int64"), "query": Value("string")}))
    qrels = Dataset.from_dict({"query-id": [0, 1], "corpus-id": [2, 0], "score": [1.0, 1.0]},
                              features=Features({"query-id": Value("int64"), "corpus-id": Value("int64"), "score": Value("float64")}))
    return _write(root, {"corpus": corpus, "queries": queries, "qrels": qrels}, "ViDoRe V1 BEIR layout")


def make_v1(root: Path) -> Path:
    """ViDoRe V1 QA (``vidore/docvqa_test_subsampled``; vidore-benchmark ``ViDoReEvaluatorQA``):
    one config of rows ``query`` (null on some), ``image``, ``image_filename``, ``answer``; the
    query ``q one`` repeats on two rows with two pages."""
    from datasets import Dataset, Features, Image, Value

    root.mkdir(parents=True, exist_ok=True)
    (root / "data").mkdir(exist_ok=True)
    ds = Dataset.from_dict(
        {
            "query": ["q one", None, "q three", "q one"],
            "image": [_image("white"), _image("gray", mode="L"), _image("white"), _image("black")],
            "image_filename": ["docs/a page.png", "docs/b.png", "docs/a page.png", "docs/c.png"],
            "answer": ["x", None, "z", "x"],
        },
        features=Features({"query": Value("string"), "image": Image(), "image_filename": Value("string"), "answer": Value("string")}),
    )
    ds.to_parquet(str(root / "data" / "test-00000-of-00001.parquet"))
    return root


#: The V3 fixture's content: 3 pages, 2 queries asked in each of the 6 languages (ids 0..11:
#: query ``i`` in language ``j`` has id ``2 * j + i``), graded judgments (0..2 as V3's cards).
V3_PAGES = ("Annual revenue grew to 12 million euros.", "The pump must be primed before fueling.",
            "Table of hydraulic pressure per stage.")
V3_BASE_QUERIES = ("revenue growth in euros", "how to prime the pump")
V3_JUDGMENTS = ({0: 2, 2: 1}, {1: 2})  # per base query: {corpus id: grade}
V3_TYPES = (["numerical", "extractive"], ["instruction"])


def _v3_query_rows():
    rows = []
    for j, lang in enumerate(V3_LANGUAGES):
        for i, text in enumerate(V3_BASE_QUERIES):
            rows.append((2 * j + i, f"{text} [{lang}]" if lang != "english" else text, lang, i))
    return rows


def make_v3(root: Path) -> Path:
    """ViDoRe V3 as published (card of ``vidore/vidore_v3_pharmaceuticals``, ``dataset_info``):
    configs corpus (``corpus_id`` int64, ``image``, ``doc_id``, ``markdown``, ``page_number_in_doc``
    int64), documents_metadata (``file_name``, ``doc_id``, ``url``, ``doc_type``, ``doc_language``,
    ``doc_year`` strings, ``visual_types`` list, ``page_number`` int64, ``license``), queries
    (``query_id`` int64, ``query``, ``language``, ``query_types`` list, ``query_format``,
    ``content_type`` list, ``raw_answers`` list, ``query_generator``, ``query_generation_pipeline``,
    ``source_type``, ``query_type_for_generation``, ``answer``), qrels (``query_id``,
    ``corpus_id``, ``score`` int64, ``content_type`` list, ``bounding_boxes`` list of
    ``{annotator, x1, x2, y1, y2}`` int64)."""
    from datasets import Dataset, Features, Image, List, Value

    corpus = Dataset.from_dict(
        {"corpus_id": [0, 1, 2], "image": [_image(c) for c in ("white", "gray", "black")], "doc_id": ["docA", "docA", "docB"],
         "markdown": list(V3_PAGES), "page_number_in_doc": [1, 2, 1]},
        features=Features({"corpus_id": Value("int64"), "image": Image(), "doc_id": Value("string"),
                           "markdown": Value("string"), "page_number_in_doc": Value("int64")}))
    docs = Dataset.from_dict(
        {"file_name": ["a.pdf", "b.pdf"], "doc_id": ["docA", "docB"], "url": ["https://a", "https://b"],
         "doc_type": ["report", "manual"], "doc_language": ["english", "english"], "doc_year": ["2023", "2021"],
         "visual_types": [["table"], []], "page_number": [2, 1], "license": ["cc-by-4.0", "cc-by-4.0"]},
        features=Features({"file_name": Value("string"), "doc_id": Value("string"), "url": Value("string"),
                           "doc_type": Value("string"), "doc_language": Value("string"), "doc_year": Value("string"),
                           "visual_types": List(Value("string")), "page_number": Value("int64"), "license": Value("string")}))
    rows = _v3_query_rows()
    qfeat = {"query_id": Value("int64"), "query": Value("string"), "language": Value("string"),
             "query_types": List(Value("string")), "query_format": Value("string"), "content_type": List(Value("string")),
             "raw_answers": List(Value("string")), "query_generator": Value("string"),
             "query_generation_pipeline": Value("string"), "source_type": Value("string"),
             "query_type_for_generation": Value("string"), "answer": Value("string")}
    queries = Dataset.from_dict(
        {"query_id": [r[0] for r in rows], "query": [r[1] for r in rows], "language": [r[2] for r in rows],
         "query_types": [V3_TYPES[r[3]] for r in rows], "query_format": ["question"] * len(rows),
         "content_type": [["text"] if r[3] else ["table", "text"] for r in rows], "raw_answers": [["a"]] * len(rows),
         "query_generator": ["human"] * len(rows), "query_generation_pipeline": ["p"] * len(rows),
         "source_type": ["single-page" if r[3] else "multi-page" for r in rows], "query_type_for_generation": ["t"] * len(rows),
         "answer": ["an answer"] * len(rows)}, features=Features(qfeat))
    q, c, g, boxes = [], [], [], []
    for qid, _, _, base in rows:
        for cid, grade in V3_JUDGMENTS[base].items():
            q.append(qid), c.append(cid), g.append(grade)
            boxes.append([{"annotator": 1, "x1": 1, "x2": 30, "y1": 2, "y2": 40}])
    qrels = Dataset.from_dict(
        {"query_id": q, "corpus_id": c, "score": g, "content_type": [["text"]] * len(q), "bounding_boxes": boxes},
        features=Features({"query_id": Value("int64"), "corpus_id": Value("int64"), "score": Value("int64"),
                           "content_type": List(Value("string")),
                           "bounding_boxes": List({k: Value("int64") for k in ("annotator", "x1", "x2", "y1", "y2")})}))
    return _write(root, {"corpus": corpus, "documents_metadata": docs, "queries": queries, "qrels": qrels}, "ViDoRe V3 layout")


def make_v3_mteb(root: Path, *, ocr: bool = False) -> Path:
    """MTEB's copy of a V3 task (card of ``vidore/vidore_v3_computer_science_mteb_format``): per
    language, configs ``<language>-corpus`` (``image``, ``id`` string ``corpus-test-N``),
    ``<language>-queries`` (``language``, ``id``, ``text``), ``<language>-qrels`` (``query-id``,
    ``corpus-id`` strings, ``score`` int64). With ``ocr``: the OCR copy (card of
    ``mteb/Vidore3ComputerScienceOCRRetrieval``, the ``.v2`` tasks): ``text`` beside ``image``."""
    from datasets import Dataset, Features, Image, Value

    tables = {}
    rows = _v3_query_rows()
    for lang in V3_LANGUAGES:
        cols = {"image": [_image(c) for c in ("white", "gray", "black")], "id": [f"corpus-test-{i}" for i in range(3)]}
        feats = {"image": Image(), "id": Value("string")}
        if ocr:
            cols["text"], feats["text"] = list(V3_PAGES), Value("string")
        tables[f"{lang}-corpus"] = Dataset.from_dict(cols, features=Features(feats))
        mine = [r for r in rows if r[2] == lang]
        tables[f"{lang}-queries"] = Dataset.from_dict(
            {"language": [lang] * len(mine), "id": [f"query-test-{r[0]}" for r in mine], "text": [r[1] for r in mine]},
            features=Features({"language": Value("string"), "id": Value("string"), "text": Value("string")}))
        q, c, g = [], [], []
        for qid, _, _, base in mine:
            for cid, grade in V3_JUDGMENTS[base].items():
                q.append(f"query-test-{qid}"), c.append(f"corpus-test-{cid}"), g.append(grade)
        tables[f"{lang}-qrels"] = Dataset.from_dict({"query-id": q, "corpus-id": c, "score": g},
                                                   features=Features({"query-id": Value("string"), "corpus-id": Value("string"),
                                                                      "score": Value("int64")}))
    return _write(root, tables, "ViDoRe V3 MTEB layout" + (" (OCR copy)" if ocr else ""))


def save_to_disk_copy(src: Path, dst: Path, *, per_config: bool) -> Path:
    """The hub-snapshot fixture ``src`` re-saved with ``save_to_disk``: one DatasetDict whose keys
    are the configs, or (``per_config``) one saved DatasetDict (split ``test``) per config folder."""
    import datasets

    configs = datasets.get_dataset_config_names(str(src))
    loaded = {c: datasets.load_dataset(str(src), c, split="test", cache_dir=str(dst) + ".cache") for c in configs}
    if per_config:
        for c, ds in loaded.items():
            datasets.DatasetDict({"test": ds}).save_to_disk(str(dst / c))
    else:
        datasets.DatasetDict(loaded).save_to_disk(str(dst))
    return dst


#: The README of a V1/V2 BEIR-layout snapshot (configs corpus, queries, qrels).
V2_README = _readme(("corpus", "queries", "qrels"), "ViDoRe V2 layout")
