"""The published layouts of the ViDoRe datasets, recognised by their configs and columns.

Each reader turns one layout into the same record (:class:`DatasetRead`): pages (given to a page
sink), queries with their language and attributes, graded judgments, and what stays beside them
(V3's bounding boxes and document metadata). The sources of each schema are named beside the
reader that relies on them:

* ``qa`` -- ViDoRe V1 QA (``vidore/docvqa_test_subsampled``, ...): one config whose rows hold
  ``query`` (may be null), ``image``, ``image_filename`` (and ``answer``, ...). Source: the
  dataset cards, and illuin-tech/vidore-benchmark ``ViDoReEvaluatorQA``
  (``src/vidore_benchmark/evaluation/vidore_evaluators/vidore_evaluator_qa.py``: ``query``,
  ``image``, ``image_filename`` columns; null queries skipped; ``_deduplicate_queries``).
* ``beir`` -- ViDoRe V1 ``_beir`` copies and V2 (``vidore/esg_reports_v2``,
  ``mteb/arxivqa_test_subsampled_beir``): configs ``corpus`` (``corpus-id`` int64, ``image``),
  ``queries`` (``query-id`` int64, ``query``, V2: ``language``), ``qrels`` (``query-id``,
  ``corpus-id``, ``score`` int64, float64 on some V1 copies). Source: the cards'
  ``dataset_info`` (e.g. ``vidore/shiftproject_test_beir``) and mteb 2.26's loaders
  (``mteb/tasks/retrieval/eng/vidore_bench_retrieval.py``, ``.../multilingual/vidore2_bench_retrieval.py``).
* ``v3`` -- ViDoRe V3 as published (``vidore/vidore_v3_*``): configs ``corpus`` (``corpus_id``
  int64, ``image``, ``doc_id``, ``markdown``, ``page_number_in_doc``), ``documents_metadata``
  (``file_name``, ``doc_id``, ``url``, ``doc_type``, ``doc_language``, ``doc_year``,
  ``visual_types`` list, ``page_number``, ``license``), ``queries`` (``query_id`` int64,
  ``query``, ``language``, ``query_types`` list, ``query_format``, ``content_type`` list,
  ``raw_answers`` list, ``query_generator``, ``query_generation_pipeline``, ``source_type``,
  ``query_type_for_generation``, ``answer``), ``qrels`` (``query_id``, ``corpus_id``, ``score``
  int64, ``content_type`` list, ``bounding_boxes`` list of ``{annotator, x1, x2, y1, y2}``).
  Source: the dataset card of ``vidore/vidore_v3_pharmaceuticals`` (``dataset_info``) and the
  public loading script that declares the same ``Features`` for ``vidore/vidore_v3_industrial``.
* ``mteb`` -- MTEB's copies: ``vidore/vidore_v3_*_mteb_format`` (configs ``<language>-corpus``
  (``image``, ``id`` string such as ``corpus-test-0``), ``<language>-queries`` (``language``,
  ``id``, ``text``), ``<language>-qrels`` (``query-id``, ``corpus-id`` strings, ``score``)),
  the OCR copies ``mteb/Vidore3*OCRRetrieval`` (the ``.v2`` tasks: ``text`` beside ``image`` in the
  corpus), MTEB's V2 copies (``mteb/Vidore2*Retrieval``: ``text`` null) and any BEIR-style MTEB
  dataset (configs ``corpus``, ``queries`` or ``query``, ``default`` or ``qrels``; ``id`` or
  ``_id``). Source: the cards of ``vidore/vidore_v3_computer_science_mteb_format`` and
  ``mteb/Vidore3ComputerScienceOCRRetrieval``, and mteb 2.26's ``RetrievalDatasetLoader``
  (``mteb/abstasks/retrieval_dataset_loaders.py``: ``f"{subset}-corpus"``, ``"query"`` config,
  ``"default"``/``"qrels"``, ``_id`` renamed ``id``, scores cast to int32).
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass, field

from ..errors import InputError
from ..types import to_id

__all__ = ["LAYOUTS", "DatasetRead", "detect_layout", "read_layout"]

#: The layouts vdr reads, with what each needs (the error for an unknown layout lists them).
LAYOUTS: dict[str, str] = {
    "qa": "ViDoRe V1 QA: one config with columns query, image (and image_filename)",
    "beir": "ViDoRe V1 _beir / V2: configs corpus (corpus-id, image), queries (query-id, query[, language]),"
            " qrels (query-id, corpus-id, score)",
    "v3": "ViDoRe V3: configs corpus (corpus_id, image, markdown, doc_id, page_number_in_doc), queries (query_id,"
          " query, language, query_types, ...), qrels (query_id, corpus_id, score[, bounding_boxes])"
          "[, documents_metadata]",
    "mteb": "MTEB copies: configs <subset>-corpus/-queries/-qrels, or corpus, queries|query, default|qrels;"
            " columns id|_id, image[, text] / id|_id, text / query-id, corpus-id, score",
}

#: Query columns that are answers, not attributes to group by (V3 card: ``answer``, ``raw_answers``;
#: mteb's V3 loader also lists ``written_answers``).
_ANSWER_COLUMNS = frozenset({"answer", "raw_answers", "written_answers", "query_generation_pipeline"})
#: Columns that are ids, texts or images (never attributes).
_NOT_ATTRIBUTES = frozenset({"query-id", "query_id", "query", "language", "_id", "id", "text", "history", "image",
                             "corpus-id", "corpus_id", "modality"})


@dataclass
class DatasetRead:
    """What a layout reader read (pages went to the sink).

    Attributes:
        layout: a key of :data:`LAYOUTS`.
        queries: ``{query id: (text, language)}`` (``"unknown"`` without a language).
        judgments: ``{query id: {corpus id: grade}}``, grades as ``int``.
        has_lang: whether queries carry a language.
        fp_parts: the loaded datasets' ``datasets`` fingerprints (for hub sources).
        attrs: ``{query id: {column: value}}``: the queries' other columns (V3: ``query_types``,
            ``content_type`` lists, ``query_format``, ``source_type``, ...), ``--group-by`` fields.
        boxes: V3's ``bounding_boxes`` and ``content_type`` per judgment
            (``[{"query-id", "corpus-id", "content_type", "bounding_boxes"}]``).
        page_meta: per page ``{"corpus-id", "doc_id", "page_number_in_doc", "document": {...}}``
            (V3: the page's row of ``documents_metadata``).
        counts: layout-specific counts recorded in the report (QA: null and repeated queries).
        notes: what is worth knowing.
    """

    layout: str
    queries: dict = field(default_factory=dict)
    judgments: dict = field(default_factory=dict)
    has_lang: bool = False
    fp_parts: list = field(default_factory=list)
    attrs: dict = field(default_factory=dict)
    boxes: list = field(default_factory=list)
    page_meta: list = field(default_factory=list)
    counts: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)


def encode_id(key: str) -> str:
    """A page id from an image file name: ``%`` and whitespace percent-encoded (UTF-8 bytes), as
    :func:`vdr.corpus.page_id` writes PDF page ids."""
    return "".join("".join(f"%{b:02X}" for b in c.encode("utf-8")) if (c == "%" or c.isspace()) else c for c in key)


def undecoded(ds, column: str = "image"):
    """``ds`` with its ``Image`` column left undecoded (``{bytes, path}`` structs), so that every
    image, whatever its column type, is decoded by :func:`~vdr.ingest.images.decode_image` and
    turned upright by :func:`~vdr.ingest.images.upright` (its EXIF orientation known and recorded);
    ``datasets``' own decoding would apply the orientation and drop the tag. Other column types
    are returned as they are."""
    import datasets

    feature = ds.features.get(column)
    if isinstance(feature, datasets.Image) and feature.decode:
        return ds.cast_column(column, datasets.Image(decode=False))
    return ds


def _layout_error(src, why: str) -> InputError:
    described = "; ".join(f"{k}: {v}" for k, v in LAYOUTS.items())
    seen = ", ".join(f"{c!r} ({', '.join(src.columns(c))})" for c in src.configs[:8])
    return InputError(f"not a ViDoRe layout vdr knows ({why}). The dataset has config(s) {seen or 'none'}."
                      f" Layouts vdr reads: {described}", path=src.name)


def mteb_subsets(configs) -> list[str]:
    """The subsets of an MTEB-format dataset: ``X`` for every ``X-corpus`` config, in order."""
    return [c[: -len("-corpus")] for c in configs if c.endswith("-corpus")]


def detect_layout(src) -> str:
    """The layout of ``src`` (a :class:`vdr.ingest.vidore._Source`), from its configs and columns.

    Raises:
        InputError: no known layout fits; the message lists the layouts vdr reads and what each
            needs, and the dataset's configs with their columns.
    """
    configs = set(src.configs)
    if mteb_subsets(src.configs):
        return "mteb"
    if "corpus" in configs:
        cols = set(src.columns("corpus"))
        if "corpus_id" in cols:
            return "v3"
        if "corpus-id" in cols:
            return "beir"
        if cols & {"id", "_id"}:
            return "mteb"
        raise _layout_error(src, "config 'corpus' has no corpus_id, corpus-id, id or _id column")
    first = src.configs[0] if src.configs else None
    cols = set(src.columns(first))
    if {"query", "image"} <= cols:
        return "qa"
    raise _layout_error(src, f"config {first!r} has no query and image columns")


def read_layout(layout: str, src, sink, progress: bool) -> DatasetRead:
    """Read ``src`` in ``layout``; pages go to ``sink`` (:class:`vdr.ingest.vidore._PageSink`).

    Raises:
        InputError: a missing column (named with its config), a duplicate id or judgment, an id
            or grade of the wrong type.
    """
    return {"qa": _read_qa, "beir": _read_beir, "v3": _read_v3, "mteb": _read_mteb}[layout](src, sink, progress)


def need(src, config: str | None, columns: tuple[str, ...]) -> None:
    """Raise when ``config`` lacks one of ``columns`` (naming them and the columns it has)."""
    have = src.columns(config)
    missing = [c for c in columns if c not in have]
    if missing:
        raise InputError(f"config {config or 'default'!r} lacks column(s) {missing}; it has {have}", path=src.name)


def _grade(value, where: str, src, qid: str) -> int:
    """A judgment's grade as ``int`` (a float grade must be whole: V1 copies store 1.0)."""
    if isinstance(value, bool) or value is None:
        raise InputError(f"{where}: grade {value!r} is not a number", path=src.name, id=qid)
    if isinstance(value, float):
        if not value.is_integer():
            raise InputError(f"{where}: grade {value!r} is not a whole number", path=src.name, id=qid)
        return int(value)
    if isinstance(value, int):
        return value
    raise InputError(f"{where}: grade {value!r} is not a number ({type(value).__name__})", path=src.name, id=qid)


def _attribute(value: object) -> object | None:
    """A query attribute as JSON (a string, number, boolean or non-empty list of them), else ``None``."""
    if isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, list) and value and all(isinstance(v, (str, int, float, bool)) for v in value):
        return value
    return None


def _attributes(row: dict) -> dict:
    kept = {str(k): _attribute(v) for k, v in row.items() if k not in _NOT_ATTRIBUTES and k not in _ANSWER_COLUMNS}
    return {k: v for k, v in kept.items() if v is not None}


def _judgments(src, config: str, qcol: str, ccol: str, out: DatasetRead, qid_map=None) -> None:
    """Judgments of a qrels config into ``out.judgments`` (and V3's boxes into ``out.boxes``).

    Raises:
        InputError: the same (query id, corpus id) twice with different grades (both rows named);
            the same pair with the same grade in one config. Rows repeated across MTEB subsets
            with the same grade are one judgment.
    """
    ds = src.load(config)
    need(src, config, (qcol, ccol, "score"))
    rows: dict[tuple[str, str], int] = {}
    has_boxes = "bounding_boxes" in ds.column_names
    for i, row in enumerate(ds):
        where = f"config {config!r} row {i + 1}"
        qid = to_id(row[qcol], what="query id", path=f"{src.name} {config}", line=i + 1)
        if qid_map is not None:
            qid = qid_map(qid)
        cid = to_id(row[ccol], what="corpus id", path=f"{src.name} {config}", line=i + 1)
        grade = _grade(row["score"], where, src, qid)
        old = out.judgments.get(qid, {}).get(cid)
        if (qid, cid) in rows or (old is not None and old != grade):
            where = (f"in the {config} config: rows {rows[(qid, cid)]} and {i + 1}" if (qid, cid) in rows
                     else f"in config {config!r} row {i + 1} and an earlier subset")
            raise InputError(
                f"duplicate judgment of query {qid!r}, corpus id {cid!r} {where} (grades {old!r} and {grade!r});"
                " vdr rejects duplicate judgments from every qrels source rather than keep one silently",
                path=src.name, id=cid)
        rows[(qid, cid)] = i + 1
        out.judgments.setdefault(qid, {})[cid] = grade
        if has_boxes:
            boxes = [dict(b) for b in row["bounding_boxes"] or ()]
            out.boxes.append({"query-id": qid, "corpus-id": cid, "content_type": list(row.get("content_type") or ()),
                              "bounding_boxes": boxes})
    out.fp_parts.append(ds._fingerprint)


def _pages(src, config: str, idcol: str, sink, progress: bool, text: tuple, out: DatasetRead, meta=None) -> set[str]:
    """The pages of a corpus config into ``sink``; their ids (checked unique).

    ``text`` is ``(column or None, text_source)``: the page text's column and what it is called."""
    from ..progress import log_bar

    ds = src.load(config)
    seen: set[str] = set()
    for i, row in enumerate(log_bar(undecoded(ds), desc="pages", unit="page", disable=not progress)):
        cid = to_id(row[idcol], what="corpus id", path=f"{src.name} {config}", line=i + 1)
        if cid in seen:
            raise InputError(f"duplicate corpus id {cid!r} in config {config!r} (row {i + 1})", path=src.name, id=cid)
        seen.add(cid)
        value = row.get(text[0]) if text[0] else None
        sink.add(row["image"], cid, src.source, text=(value if isinstance(value, str) else None, text[1]))
        if meta is not None:
            meta(cid, row)
    out.fp_parts.append(ds._fingerprint)
    return seen


def _queries(src, config: str, idcol: str, textcol: str, out: DatasetRead, default_lang: str = "unknown",
             qid_map=None) -> None:
    """Queries of a queries config into ``out`` (id, text, language, attributes)."""
    ds = src.load(config)
    need(src, config, (idcol, textcol))
    has_lang = "language" in ds.column_names
    out.has_lang = out.has_lang or has_lang or default_lang != "unknown"
    for i, row in enumerate(ds):
        qid = to_id(row[idcol], what="query id", path=f"{src.name} {config}", line=i + 1)
        if qid_map is not None:
            qid = qid_map(qid)
        if qid in out.queries:
            raise InputError(f"duplicate query id {qid!r} in config {config!r} (row {i + 1})", path=src.name, id=qid)
        text = row[textcol]
        if not isinstance(text, str):
            raise InputError(f"query {qid!r} is not a string ({type(text).__name__}; config {config!r} row {i + 1})",
                             path=src.name, id=qid)
        lang = row["language"] if has_lang and row["language"] else default_lang
        out.queries[qid] = (text, str(lang))
        kept = _attributes(row)
        if kept:
            out.attrs[qid] = kept
    out.fp_parts.append(ds._fingerprint)


def _read_beir(src, sink, progress: bool) -> DatasetRead:
    """V1 ``_beir`` copies and V2 (schema: see the module docstring, ``beir``)."""
    out = DatasetRead("beir")
    need(src, "corpus", ("corpus-id", "image"))
    need(src, "queries", ("query-id", "query"))
    need(src, "qrels", ("query-id", "corpus-id", "score"))
    text_col = "text" if "text" in src.columns("corpus") else None
    _pages(src, "corpus", "corpus-id", sink, progress, (text_col, "dataset"), out)
    _queries(src, "queries", "query-id", "query", out)
    _judgments(src, "qrels", "query-id", "corpus-id", out)
    return out


def _read_v3(src, sink, progress: bool) -> DatasetRead:
    """ViDoRe V3 as published (schema: see the module docstring, ``v3``): ``markdown`` is the page
    text (``text_source`` ``"markdown"``), ``documents_metadata`` goes with the pages, and
    ``bounding_boxes`` with the judgments."""
    out = DatasetRead("v3")
    need(src, "corpus", ("corpus_id", "image"))
    need(src, "queries", ("query_id", "query"))
    need(src, "qrels", ("query_id", "corpus_id", "score"))
    docs: dict[str, dict] = {}
    if "documents_metadata" in src.configs:
        for row in src.load("documents_metadata"):
            if row.get("doc_id") is not None:
                docs[str(row["doc_id"])] = {k: v for k, v in row.items() if k != "doc_id"}

    def meta(cid: str, row: dict) -> None:
        doc = row.get("doc_id")
        out.page_meta.append({"corpus-id": cid, "doc_id": doc, "page_number_in_doc": row.get("page_number_in_doc"),
                              "document": docs.get(str(doc), {}) if doc is not None else {}})

    text_col = "markdown" if "markdown" in src.columns("corpus") else None
    _pages(src, "corpus", "corpus_id", sink, progress, (text_col, "markdown"), out, meta)
    _queries(src, "queries", "query_id", "query", out)
    _judgments(src, "qrels", "query_id", "corpus_id", out)
    if docs:
        out.counts["documents"] = len(docs)
    return out


def _mteb_configs(src) -> list[tuple[str, str, str, str]]:
    """``[(subset, corpus config, queries config, qrels config)]`` of an MTEB-format dataset
    (mteb 2.26 ``RetrievalDatasetLoader``: ``f"{subset}-corpus"``; without subsets ``corpus``,
    ``query`` when present else ``queries``, ``default`` when present else ``qrels``)."""
    configs = set(src.configs)
    subsets = mteb_subsets(src.configs)
    if not subsets:
        queries = "query" if "query" in configs else "queries"
        qrels = "default" if "default" in configs else "qrels"
        for c in (queries, qrels):
            if c not in configs:
                raise _layout_error(src, f"an MTEB-format dataset without subsets needs a {c!r} config")
        return [("", "corpus", queries, qrels)]
    out = []
    for s in subsets:
        for c in (f"{s}-queries", f"{s}-qrels"):
            if c not in configs:
                raise _layout_error(src, f"subset {s!r} has {s}-corpus but no {c!r} config")
        out.append((s, f"{s}-corpus", f"{s}-queries", f"{s}-qrels"))
    return out


def _id_column(src, config: str) -> str:
    cols = src.columns(config)
    for c in ("id", "_id"):
        if c in cols:
            return c
    raise InputError(f"config {config!r} has no id or _id column; it has {cols}", path=src.name)


def _read_mteb(src, sink, progress: bool) -> DatasetRead:
    """MTEB's copies (schema: see the module docstring, ``mteb``). Each subset is a language (its
    queries' ``language`` column when present, else the subset's name) over one corpus: the first
    subset's corpus is ingested, and every other subset's corpus must hold the same ids. Query ids
    that repeat across subsets are made unique as ``<subset>:<id>`` (recorded)."""
    out = DatasetRead("mteb")
    groups = _mteb_configs(src)
    first_corpus = groups[0][1]
    need(src, first_corpus, ("image",))
    idcol = _id_column(src, first_corpus)
    text_col = "text" if "text" in src.columns(first_corpus) else None
    ids = _pages(src, first_corpus, idcol, sink, progress, (text_col, "dataset"), out)
    for _, corpus, _, _ in groups[1:]:
        other = {str(x) for x in src.load(corpus).select_columns([_id_column(src, corpus)])[_id_column(src, corpus)]}
        if other != ids:
            raise InputError(f"config {corpus!r} holds other pages than {first_corpus!r} ({len(other - ids)} ids only in"
                             f" {corpus!r}, {len(ids - other)} only in {first_corpus!r}); vdr reads one corpus per dataset",
                             path=src.name)
    seen: dict[str, str] = {}
    clash = False
    for subset, _, queries, _ in groups:
        qcol = _id_column(src, queries)
        for q in src.load(queries).select_columns([qcol])[qcol]:
            clash = clash or seen.setdefault(str(q), subset) != subset
    for subset, _, queries, qrels in groups:
        qmap = (lambda q, s=subset: f"{s}:{q}") if clash else None
        _queries(src, queries, _id_column(src, queries), "text", out, default_lang=subset or "unknown", qid_map=qmap)
        _judgments(src, qrels, "query-id", "corpus-id", out, qid_map=qmap)
    if clash:
        out.notes.append("query ids repeat across subsets: each is written as '<subset>:<id>'")
    out.counts["subsets"] = [g[0] for g in groups if g[0]]
    return out


def _read_qa(src, sink, progress: bool) -> DatasetRead:
    """ViDoRe V1 QA (schema: see the module docstring, ``qa``).

    Each distinct image is a page (id: ``image_filename``, whitespace and ``%`` percent-encoded,
    NFC; else the row index). A row whose query is null is skipped and counted. A query text that
    repeats on several rows is ONE query (id: the index of its first row), judged relevant
    (grade 1) to each distinct page of its rows -- vidore-benchmark deduplicates the queries the
    same way (``_deduplicate_queries``) and MTEB's ``_beir`` copies hold one query per text; the
    counts go to the report (``qa_queries``).
    """
    from ..progress import log_bar

    out = DatasetRead("qa")
    cfg = src.configs[0] if src.configs else None
    need(src, cfg, ("query", "image"))
    ds = src.load(cfg)
    has_fn = "image_filename" in ds.column_names
    out.has_lang = "language" in ds.column_names
    ids: dict[str, str] = {}
    raw_of: dict[str, str] = {}  # NFC file name -> the first name on a row that gave it
    first_row: dict[str, str] = {}  # query text -> its query id
    null_rows = repeated_rows = 0
    for i, row in enumerate(log_bar(undecoded(ds), desc="rows", unit="row", disable=not progress)):
        key = str(row["image_filename"]) if has_fn and row["image_filename"] else str(i)
        cid = ids.get(key)
        if cid is None:
            nfc = unicodedata.normalize("NFC", key)
            if raw_of.setdefault(nfc, key) != key:
                raise InputError(
                    f"two image file names differ only in Unicode normalisation: {raw_of[nfc]!r} ({ascii(raw_of[nfc])}) and"
                    f" {key!r} ({ascii(key)}, row {i + 1}); ids are written in NFC, so both would get the id {encode_id(nfc)!r}",
                    path=src.name,
                )
            if nfc != key:
                src.nfc_ids.append({"image_filename": key, "id": encode_id(nfc)})
            cid = ids[key] = encode_id(nfc)
            sink.add(row["image"], cid, src.source)
        text = row["query"]
        if text is None:
            null_rows += 1
            continue
        text = str(text)
        qid = first_row.get(text)
        if qid is None:
            qid = first_row[text] = str(i)
            out.queries[qid] = (text, str(row["language"]) if out.has_lang and row["language"] else "unknown")
        else:
            repeated_rows += 1
        out.judgments.setdefault(qid, {})[cid] = 1
    several = sum(len(d) > 1 for d in out.judgments.values())
    out.counts["qa_queries"] = {
        "rows_with_null_query": null_rows, "rows_repeating_a_query": repeated_rows, "queries": len(out.queries),
        "queries_judged_on_several_pages": several,
        "rule": "a repeated query text is one query (id: its first row) judged relevant (grade 1) to each distinct"
                " page of its rows; null queries are skipped",
    }
    if null_rows:
        out.notes.append(f"{null_rows} row(s) with a null query skipped (their pages stay in the corpus)")
    if repeated_rows:
        out.notes.append(f"{repeated_rows} row(s) repeat an earlier query text: counted as one query judged on each of"
                         f" its pages ({several} queries judged on several pages), as vidore-benchmark and MTEB count them")
    out.fp_parts.append(ds._fingerprint)
    return out
