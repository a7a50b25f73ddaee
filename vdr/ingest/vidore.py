"""ViDoRe benchmark datasets (Hugging Face ``datasets``) into the corpus layout plus BEIR queries/qrels.

Two layouts are read through the same ``datasets.load_dataset(path, config, split=...)`` call,
whether ``path`` is a hub name or a local folder laid out like the hub repository:

* BEIR layout (ViDoRe V2 and V3): configs ``corpus`` (``corpus-id``, ``image``), ``queries``
  (``query-id``, ``query``, optional ``language``) and ``qrels`` (``query-id``, ``corpus-id``,
  ``score``).
* QA layout (ViDoRe V1): one config whose rows hold ``query`` (may be null) and ``image`` (and
  usually ``image_filename``); each distinct image is a corpus page (id: ``image_filename``,
  whitespace/``%`` percent-encoded, else the row index) and each row with a query is a query
  (id: the row index) judged relevant (grade 1) to its own image.

See :func:`ingest_vidore`.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import time
import warnings
from collections import Counter
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from collections.abc import Mapping

from ..corpus import PAGES_FILE, REPORT_FILE, Page, image_name, write_pages
from ..errors import InputError, VdrError, VdrWarning
from ..options import with_keywords
from ..io.atomic import atomic_write
from ..io.formats import save_qrels
from ..types import Qrels
from .images import EXIF_TRANSFORMS, ImageProblem, decode_image, fit_budget, pixel_sha256, size_problem, to_rgb, upright
from .pdf import DEFAULT_MAX_PIXELS
from .pdfdir import available_cores, cli_field, duplicate_summary, write_report
from .vidore_layouts import DatasetRead, detect_layout, read_layout

__all__ = ["ingest_vidore", "VidoreOptions", "VidoreReport", "LANGUAGE_ALIASES", "hub_unreachable", "MtebVidoreTask",
           "mteb_vidore_tasks", "pinned_revisions", "resolve_name", "benchmark_tasks", "VIDORE_BENCHMARKS",
           "BOXES_FILE", "PAGE_METADATA_FILE"]

#: MTEB benchmarks made of ViDoRe tasks (``mteb.get_benchmark(name)``), the names ``--vidore`` accepts.
VIDORE_BENCHMARKS = ("ViDoRe(v1)", "ViDoRe(v2)", "ViDoRe(v3)", "ViDoRe(v1&v2)")


@dataclass(frozen=True)
class MtebVidoreTask:
    """One MTEB ViDoRe task, as the installed mteb's task metadata gives it.

    Attributes:
        name: the task name (``Vidore3HrRetrieval``, ``Vidore3HrRetrieval.v2``).
        dataset: its dataset (``vidore/vidore_v3_hr_mteb_format``, ``mteb/Vidore3HrOCRRetrieval``).
        revision: the commit MTEB pins.
        main_score: MTEB's main score (``ndcg_at_10`` for V3, ``ndcg_at_5`` for V1/V2).
        is_public: whether the data is public (MTEB's ``ViDoRe(v3)`` lists private tasks too).
    """

    name: str
    dataset: str
    revision: str
    main_score: str
    is_public: bool


@functools.lru_cache(maxsize=1)
def mteb_vidore_tasks() -> dict[str, MtebVidoreTask]:
    """Every ViDoRe retrieval task of the installed mteb (``{task name: MtebVidoreTask}``), read from
    its task metadata (``TaskMetadata.dataset``: ``path`` and ``revision``); ``{}`` without mteb.

    Tasks are those whose name starts with ``Vidore`` (V1, V2, V3 and V3's OCR ``.v2`` tasks) and
    whose type is a retrieval one (the ``...Reranking`` tasks are left out). Read once per process
    (importing mteb takes seconds); do not mutate the returned mapping."""
    try:
        import mteb
    except ImportError:
        return {}
    out: dict[str, MtebVidoreTask] = {}
    for task in mteb.get_tasks(exclude_superseded=False, exclude_private=False):
        md = task.metadata
        if not md.name.startswith("Vidore") or "Reranking" in md.name or not md.dataset.get("path"):
            continue
        out[md.name] = MtebVidoreTask(md.name, md.dataset["path"], md.dataset.get("revision"), md.main_score,
                                      bool(md.is_public))
    return out


def pinned_revisions() -> dict[str, str]:
    """``{dataset: revision}``: the commits MTEB's ViDoRe tasks pin (:func:`mteb_vidore_tasks`)."""
    return {t.dataset: t.revision for t in mteb_vidore_tasks().values() if t.revision}


def resolve_name(name: str) -> str:
    """The dataset of an MTEB ViDoRe task name (``Vidore3HrRetrieval`` -> its dataset), else ``name``."""
    task = mteb_vidore_tasks().get(name)
    return task.dataset if task is not None else name


def benchmark_tasks(name: str) -> list[MtebVidoreTask]:
    """The public tasks of an MTEB ViDoRe benchmark (``ViDoRe(v3)``), in the benchmark's order.

    Raises:
        InputError: mteb is not installed, or ``name`` is no benchmark of it.
    """
    try:
        import mteb
    except ImportError:
        raise InputError(f"{name!r} is an MTEB benchmark: install mteb (pip install 'vdr[mteb]') to resolve it") from None
    try:
        bench = mteb.get_benchmark(name)
    except Exception as e:
        raise InputError(f"unknown MTEB benchmark {name!r} ({' '.join(str(e).split())[:200]}); ViDoRe's are"
                         f" {', '.join(VIDORE_BENCHMARKS)}") from None
    known = mteb_vidore_tasks()
    return [known[t.metadata.name] for t in bench.tasks if t.metadata.name in known and known[t.metadata.name].is_public]


def __getattr__(name: str):
    if name == "PINNED_REVISIONS":  # the pre-mteb-metadata constant, now read from mteb
        return pinned_revisions()
    raise AttributeError(name)


#: Accepted spellings of the ``language`` column's values (ViDoRe V2 uses the English names).
LANGUAGE_ALIASES: dict[str, tuple[str, ...]] = {
    "english": ("english", "eng-Latn", "en"),
    "french": ("french", "fra-Latn", "fr"),
    "spanish": ("spanish", "spa-Latn", "es"),
    "german": ("german", "deu-Latn", "de"),
    "italian": ("italian", "ita-Latn", "it"),
    "portuguese": ("portuguese", "por-Latn", "pt"),
}

_SHA = re.compile(r"^[0-9a-f]{40}$")
#: V3's bounding boxes of the judgments, one JSON object per judgment, beside ``qrels.tsv``.
BOXES_FILE = "qrels_boxes.jsonl"
#: V3's document of each page (doc_id, page_number_in_doc, the documents_metadata row), beside ``pages.jsonl``.
PAGE_METADATA_FILE = "page_metadata.jsonl"
#: How EXIF orientation is handled for dataset images (recorded in the report's ``exif_orientation``).
EXIF_POLICY = ("applied once to every image, whatever its column type (Image feature, {bytes, path} struct, binary,"
               " path), as datasets' Image feature and image viewers apply it; pages whose value is not 1 are listed")


@dataclass(frozen=True)
class VidoreReport:
    """What :func:`ingest_vidore` did (also written to ``CORPUS_DIR/ingest-report.json``).

    Attributes:
        dataset: the name or local folder given.
        revision: the resolved commit (hub), or ``"local"``.
        fingerprint: hex SHA-256 of the data files' contents (local) or of the loaded datasets'
            ``datasets`` fingerprints plus the revision (hub).
        layout: ``"beir"`` (V2/V3) or ``"qa"`` (V1).
        language: the language filter, or ``None`` (all languages).
        pages: corpus pages written.
        queries: queries written (pooled over languages).
        queries_per_language: ``{language: count}`` (``{"unknown": n}`` without a language column).
        qrels: judgments written.
        notes: anything worth knowing (dropped judgments of filtered queries, skipped pages, ...).
        extra: also written to the report: ``unavailable_pages`` (``[{"corpus-id", "reason"}]``:
            pages skipped by the page checks), ``adapted_pages`` (downscaled to the pixel budget),
            ``duplicate_pages`` (equal pixels), ``ocr_threads``, ``split``, ``ocr``, ``max_pixels``.
    """

    corpus_dir: Path
    dataset: str
    revision: str
    fingerprint: str
    layout: str
    language: str | None
    pages: int
    queries: int
    queries_per_language: Mapping[str, int]
    qrels: int
    notes: tuple[str, ...] = ()
    seconds: float = 0.0
    extra: Mapping = field(default_factory=dict)

    def to_json(self) -> dict:
        """The report as written to ``ingest.json`` (``kind: "vidore"``, dataset, revision, fingerprint, layout, pages...)."""
        return {
            "kind": "vidore",
            "dataset": self.dataset,
            "revision": self.revision,
            "fingerprint": self.fingerprint,
            "layout": self.layout,
            "language": self.language,
            "pages": self.pages,
            "queries": {"pooled": self.queries, "per_language": dict(self.queries_per_language)},
            "qrels": self.qrels,
            "notes": list(self.notes),
            "seconds": round(self.seconds, 3),
            **dict(self.extra),
        }


#: Seconds the hub probe (:func:`hub_unreachable`) waits for name resolution and a TCP connection.
HUB_PROBE_TIMEOUT = 3.0


def hub_unreachable(timeout: float = HUB_PROBE_TIMEOUT) -> str | None:
    """Why the Hugging Face hub cannot be reached, or ``None`` when it can be tried.

    ``None`` at once in offline mode (``HF_HUB_OFFLINE=1`` or ``HF_DATASETS_OFFLINE=1``:
    ``datasets`` then reads its cache only, without network calls). Otherwise one TCP connection
    is opened to the hub endpoint's host and port (``HF_ENDPOINT``, default
    ``https://huggingface.co``), or to the HTTPS proxy when one is set for it (``HTTPS_PROXY``,
    ``ALL_PROXY``; ``NO_PROXY`` honoured), in a background thread given ``timeout`` seconds in all
    (name resolution included), so an offline machine is told in at most ``timeout`` seconds instead
    of after the hub client's retries (~25-35 s).

    Returns:
        ``None``, or ``"<host>:<port>: <error>"`` / ``"<host>:<port>: no answer within T s"``
        (`` (the proxy)`` after the port when a proxy was tried).
    """
    import socket
    import threading
    import urllib.parse
    import urllib.request

    import datasets
    from huggingface_hub import constants

    if getattr(datasets.config, "HF_HUB_OFFLINE", False) or getattr(constants, "HF_HUB_OFFLINE", False):
        return None
    url = urllib.parse.urlsplit(str(constants.ENDPOINT))
    host, port, what = url.hostname or "huggingface.co", url.port or (80 if url.scheme == "http" else 443), ""
    proxies = urllib.request.getproxies()
    proxy = proxies.get(url.scheme or "https") or proxies.get("all")
    if proxy and not urllib.request.proxy_bypass(host):
        p = urllib.parse.urlsplit(proxy if "://" in proxy else f"http://{proxy}")
        host, port, what = p.hostname or host, p.port or (443 if p.scheme == "https" else 1080 if p.scheme.startswith("socks") else 80), " (the proxy)"
    result: dict = {}

    def connect() -> None:
        try:
            with socket.create_connection((host, port), timeout=timeout):
                result["ok"] = True
        except Exception as e:  # any failure of the probe is its answer (never an exception in a stray thread)
            result["error"] = f"{type(e).__name__}: {' '.join(str(e).split())[:200]}"

    t = threading.Thread(target=connect, name="vdr-hub-probe", daemon=True)
    t.start()
    t.join(timeout)
    if result.get("ok"):
        return None
    return f"{host}:{port}{what}: {result.get('error') or f'no answer within {timeout:g} s'}"


def _hub_error(dataset: str, revision: str | None, e: BaseException | str) -> InputError:
    rev = f" --revision {revision}" if revision else ""
    why = e if isinstance(e, str) else f"{type(e).__name__}: {' '.join(str(e).split())[:300]}"
    cached = (" If the dataset is already in the datasets cache, set HF_HUB_OFFLINE=1 to load it from there."
              if isinstance(e, str) else "")
    return InputError(
        f"could not load ViDoRe dataset {dataset!r}{' at revision ' + revision if revision else ''} from the Hugging Face hub"
        f" ({why}).{cached} Without network access, download it on a machine"
        f" that has it (`hf download {dataset} --repo-type dataset{rev} --local-dir DIR`) and pass the folder instead:"
        f" `vdr ingest --vidore DIR --out CORPUS_DIR` (Python: ingest_vidore('DIR', ...))"
    )


def _content_fingerprint(folder: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(folder.rglob("*")):
        rel = p.relative_to(folder).as_posix()
        if not p.is_file() or any(part.startswith(".") for part in Path(rel).parts):
            continue
        h.update(rel.encode("utf-8") + b"\0")
        with open(p, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        h.update(b"\0")
    return h.hexdigest()


def _is_saved(folder: Path) -> bool:
    return (folder / "dataset_dict.json").is_file() or (folder / "state.json").is_file()


def _disk_configs(folder: Path) -> dict | None:
    """The configs of a ``save_to_disk`` folder, ``{config: folder}``, or ``None`` when it is not one.

    Three forms (``datasets.Dataset.save_to_disk`` / ``DatasetDict.save_to_disk``): a DatasetDict
    whose keys are the configs (``corpus``, ``queries``, ``qrels``; or MTEB's ``english-corpus``,
    ...), a DatasetDict or Dataset of one config (its keys are splits: V1 QA), or a folder holding
    one saved folder per config. The config ``None`` stands for the single one."""
    if (folder / "dataset_dict.json").is_file():
        keys = json.loads((folder / "dataset_dict.json").read_text(encoding="utf-8")).get("splits", [])
        if any(k in ("corpus", "queries", "qrels") or k.endswith("-corpus") for k in keys):
            return {k: folder / k for k in keys}
        return {None: folder}
    if (folder / "state.json").is_file():
        return {None: folder}
    subs = {p.name: p for p in sorted(folder.iterdir()) if p.is_dir() and _is_saved(p)}
    return subs or None


def _load_from_disk(folder: Path, split: str):
    """A saved Dataset, or ``split`` of a saved DatasetDict (its only split when it has one)."""
    import datasets

    ds = datasets.load_from_disk(str(folder))
    if isinstance(ds, datasets.DatasetDict):
        if split in ds:
            return ds[split]
        if len(ds) == 1:
            return next(iter(ds.values()))
        raise InputError(f"split {split!r} not found; the saved folder has {sorted(ds)} (give --split)", path=folder)
    return ds


def _default_cache() -> Path:
    import datasets

    return Path(datasets.config.HF_DATASETS_CACHE)


def _lang_values(language: str) -> set[str]:
    """Every accepted spelling of the comma-separated languages in ``language`` (lower case)."""
    out: set[str] = set()
    for one in (x.strip().lower() for x in language.split(",") if x.strip()):
        names = next(({n.lower() for n in ns} for ns in LANGUAGE_ALIASES.values() if one in {n.lower() for n in ns}), {one})
        out |= names
    return out


def _page_text(im, ocr: str, lang: str, notes: list[str], cid: str) -> tuple[str, str, dict]:
    """(text, text_source, decision) of one page image; raises :class:`ImageProblem` when
    ``ocr="always"`` fails. A dataset image has no text layer, so ``auto`` OCRs it as ``always``
    does; the decision records the orientation detected before OCR (:func:`vdr.ingest.ocr.read_page`)."""
    if ocr == "never":
        return "", "none", {"corpus-id": cid, "ocr": False, "reason": "--ocr never"}
    from .ocr import read_page
    from .pdf import _clean

    decision: dict = {"corpus-id": cid, "ocr": True, "reason": "--ocr always" if ocr == "always" else "no text layer (dataset image)"}
    try:
        raw, orientation = read_page(im, lang)
        text = _clean(raw)
    except Exception as e:
        if ocr == "always":
            raise ImageProblem(f"OCR failed: {type(e).__name__}: {' '.join(str(e).split())[:200]}") from None
        notes.append(f"OCR failed on {cid!r}: {type(e).__name__}")
        return "", "none", {**decision, "text": f"OCR failed: {type(e).__name__}"}
    decision.update(orientation=orientation, text="OCR text" if text else "OCR read nothing")
    return (text, "ocr", decision) if text else ("", "none", decision)


def _save_image(im, out_dir: Path, cid: str) -> tuple[str, int, int]:
    rel = image_name(cid)
    with atomic_write(out_dir / rel, "wb") as f:
        im.save(f, format="PNG", compress_level=1)
    return rel, im.width, im.height


class _PageSink:
    """Turns dataset image values into corpus pages with the checks of :mod:`vdr.ingest.images`;
    a page that fails them is recorded in :attr:`skipped` (never raised), an adapted one in
    :attr:`adapted`."""

    def __init__(self, out_dir: Path, ocr: str, ocr_lang: str, max_pixels: int, base: Path | None, notes: list[str]) -> None:
        self.out_dir, self.ocr, self.ocr_lang, self.max_pixels, self.base, self.notes = out_dir, ocr, ocr_lang, max_pixels, base, notes
        self.pages: list[Page] = []
        self.skipped: list[dict] = []
        self.adapted: list[dict] = []
        self.oriented: list[dict] = []
        self.decisions: list[dict] = []
        self.exif_values: Counter = Counter()

    def add(self, value, cid: str, source: str, text: tuple = (None, "dataset")) -> Page | None:
        """Decode, turn upright (EXIF), check, convert, save and read one page; ``None`` (and a
        recorded reason) when skipped.

        ``text`` is ``(the dataset's page text or None, its text_source)`` (V3 ``markdown``, the
        OCR copies' ``text``): it is the page's text unless ``ocr="always"``; a page without it
        is OCRed under ``ocr="auto"``."""
        opened = []
        try:
            im = decode_image(value, base=self.base)
            opened.append(im)
            im, exif = upright(im)
            opened.append(im)
            self.exif_values[str(exif)] += 1
            if exif is not None and exif != 1:
                self.oriented.append({"corpus-id": cid, "exif_orientation": exif, "applied": EXIF_TRANSFORMS[exif]})
            problem = size_problem(im.width, im.height)
            if problem is not None:
                raise ImageProblem(problem)
            rgb = to_rgb(im)
            opened.append(rgb)
            rgb, note = fit_budget(rgb, self.max_pixels)
            opened.append(rgb)
            if text[0] is not None and text[0].strip() and self.ocr != "always":
                page_text, ts, decision = text[0], text[1], {"corpus-id": cid, "ocr": False, "reason": f"dataset text ({text[1]})"}
            else:
                page_text, ts, decision = _page_text(rgb, self.ocr, self.ocr_lang, self.notes, cid)
            rel, w, h = _save_image(rgb, self.out_dir, cid)
            page = Page(cid, source, None, w, h, None, rel, page_text, ts, pixel_sha256(rgb))
        except ImageProblem as e:
            self.skipped.append({"corpus-id": cid, "reason": str(e)})
            return None
        finally:
            for im in {id(x): x for x in opened}.values():
                im.close()
        if note:
            self.adapted.append({"corpus-id": cid, "reason": note})
        if self.ocr != "never":
            self.decisions.append(decision)
        self.pages.append(page)
        return page


@dataclass(frozen=True)
class VidoreOptions:
    """Every option of :func:`ingest_vidore` (all but ``dataset`` and ``out``), with its default.

    ``vdr.ingest_vidore(dataset, out, language="english")`` builds one from its keywords;
    ``options=VidoreOptions(...)`` starts from a given one (the keywords override its fields).

    Attributes:
        revision: hub commit/branch; default: the MTEB-pinned commit for known datasets
            (:data:`PINNED_REVISIONS`), else the default branch. Ignored for local folders.
        language: keep only queries in these languages (comma-separated: ``"english"``,
            ``"english,french"``; ``"eng-Latn"``/``"en"`` accepted); judgments of dropped queries are
            dropped and counted. ``None``: all (each language is its own query set in
            ``vdr evaluate``).
        split: dataset split.
        ocr: ``"never"`` (default), ``"auto"``/``"always"``: Tesseract text for each page
            (``"always"``: a page whose OCR fails is skipped with the reason).
        ocr_lang: Tesseract language(s).
        max_pixels: pixel budget per page (width x height); larger images are downscaled.
        cache_dir: ``datasets`` cache; for local folders a sub-folder keyed by the files'
            content hash is used, so a changed file is never served stale.
        progress: progress bar on stderr.

    ``revision``, ``language`` and ``split`` are ``vdr ingest --vidore``'s options
    (:func:`vdr.ingest.pdfdir.cli_field`); its ``--ocr`` is shared with the PDF path.
    """

    revision: str | None = cli_field(None, "--revision", str, "ViDoRe dataset revision (default: MTEB's pinned commit).",
                                        panel="inputs")
    language: str | None = cli_field(None, "--language", str, "ViDoRe: keep only queries in these languages (e.g. english or english,french).",
                                        panel="inputs")
    split: str = cli_field("test", "--split", str, "ViDoRe dataset split.", panel="inputs")
    ocr: str = "never"
    ocr_lang: str = "eng"
    max_pixels: int = DEFAULT_MAX_PIXELS
    cache_dir: str | Path | None = None
    progress: bool = True

    @classmethod
    def cli_fields(cls) -> list:
        """The fields that are ``vdr ingest --vidore`` options (``revision``, ``language``, ``split``)."""
        return [f for f in fields(cls) if f.metadata]


def ingest_vidore(dataset: str | Path, out: str | Path, *, options: VidoreOptions | None = None, **kwargs) -> VidoreReport:
    """Load a ViDoRe dataset and write it as a corpus plus ``queries.jsonl`` and ``qrels.tsv``.

    Every page image goes through the checks of every ingest path (:mod:`vdr.ingest.images`):
    image values are decoded as ``datasets.Image`` does (PIL image, ``{bytes, path}`` struct, raw
    bytes, path), converted to RGB (tonal range kept, alpha on white), skipped with a reason when
    undecodable, of aspect ratio above 200:1 or with a side below 28 px, and downscaled to
    ``max_pixels`` (recorded). Skipped pages are listed in the report (``unavailable_pages``); the
    judgments naming them are kept, so they count as relevant but unretrievable.

    Args:
        dataset: hub name (``"vidore/esg_reports_v2"``) or a local folder laid out like the hub
            repository (``README.md`` with ``configs``, parquet files per config).
        out: the corpus folder: ``pages.jsonl``, ``images/``, ``queries.jsonl`` (BEIR, plus a
            ``language`` field), ``qrels.tsv`` (BEIR TSV), ``ingest-report.json``.
        options: a :class:`VidoreOptions` to start from (default: its defaults).
        **kwargs: any field of :class:`VidoreOptions` (``revision``, ``language``, ``split``,
            ``ocr``, ``ocr_lang``, ``max_pixels``, ``cache_dir``, ``progress``); they override
            ``options``' fields.

    Returns:
        :class:`VidoreReport` (name, resolved revision, content fingerprint, per-language counts,
        skipped/adapted/duplicate pages).

    Raises:
        InputError: the hub is unreachable or the dataset unknown (the message says how to pass a
            local folder), missing configs/columns, a language with no queries (the available
            ones are listed), duplicate ids, a duplicate judgment (both rows named, as the qrels
            file loaders do), ids of the wrong type, or no usable page at all.
        TypeError: an unknown keyword.
    """
    import datasets

    o = _options(options, kwargs)
    t0 = time.perf_counter()
    out_dir = Path(out)
    src = _Source(dataset, o.revision, o.cache_dir, o.split)
    out_dir.mkdir(parents=True, exist_ok=True)
    sink = _PageSink(out_dir, o.ocr, o.ocr_lang, o.max_pixels, src.folder, src.notes)
    language, split, ocr, max_pixels = o.language, o.split, o.ocr, o.max_pixels
    read = _read_dataset(src, sink, o.progress)
    src.notes.extend(read.notes)
    if sink.oriented:
        src.notes.append(f"{len(sink.oriented)} page image(s) turned upright by their EXIF orientation (listed in the report as"
                         " exif_orientation.applied)")
    if src.nfc_ids:
        src.notes.append(f"{len(src.nfc_ids)} image file name(s) are not in Unicode NFC: their page ids are written in NFC"
                         " (listed in the report as nfc_ids)")
    known = {u["corpus-id"] for u in sink.skipped} | {p.corpus_id for p in sink.pages}
    resolved, fingerprint, pages = src.finish(read.fp_parts, sink.pages)
    queries, kept = _filter(read.queries, read.judgments, language, read.has_lang, known, src)
    _warn_skipped(src.name, sink)
    qrels = Qrels(kept, name=src.name)
    _write_dataset(out_dir, pages, queries, qrels, read)
    per_lang = dict(sorted(Counter(lang for _, lang in queries.values()).items()))
    text_sources = dict(sorted(Counter(p.text_source if p.text.strip() else "none" for p in pages).items()))
    if text_sources.get("none") == len(pages):
        src.notes.append("no page has text: the lexical and semantic backends refuse this corpus unless asked explicitly"
                         " (ingest with --ocr auto, or use a copy of the dataset with page text: ViDoRe V3, MTEB's OCR copies)")
    extra = {
        "split": split, "ocr": ocr, "max_pixels": max_pixels, "datasets_version": datasets.__version__,
        "ocr_threads": {"workers": 1, "omp_thread_limit_per_worker": None, "cores": available_cores()},
        "unavailable_pages": sink.skipped, "adapted_pages": sink.adapted, "duplicate_pages": duplicate_summary(pages),
        "exif_orientation": {"policy": EXIF_POLICY, "values": dict(sorted(sink.exif_values.items())), "applied": sink.oriented},
        "page_decisions": sink.decisions, "nfc_ids": src.nfc_ids, "text_sources": text_sources,
        "graded_qrels": sorted({g for d in kept.values() for g in d.values()}),
        **read.counts,
    }
    layout = read.layout
    report = VidoreReport(
        out_dir, src.name, resolved, fingerprint, layout, language, len(pages), len(queries), per_lang,
        qrels.num_entries(), tuple(src.notes), time.perf_counter() - t0, extra,
    )
    write_report(out_dir, report.to_json())
    return report


def _options(options: VidoreOptions | None, kwargs: dict) -> VidoreOptions:
    """``options`` (default: all defaults) with ``kwargs`` applied.

    Raises:
        TypeError: a keyword that is no field of :class:`VidoreOptions` (named, with the known
            ones), or ``options`` of another type.
    """
    return with_keywords(VidoreOptions, options, kwargs, "ingest_vidore")


def _read_dataset(src: _Source, sink: _PageSink, progress: bool) -> DatasetRead:
    """Read the dataset in the layout its configs and columns show
    (:func:`vdr.ingest.vidore_layouts.detect_layout`); pages go to ``sink``.

    Raises:
        InputError: as the readers do, no layout fits (the layouts vdr reads are listed), or no
            page of the corpus could be ingested (the first three skipped pages are named).
    """
    read = read_layout(detect_layout(src), src, sink, progress)
    if not sink.pages:
        raise InputError(
            "no page of the corpus could be ingested: " + "; ".join(f"{u['corpus-id']}: {u['reason']}" for u in sink.skipped[:3]),
            path=src.name,
        )
    return read


def _write_dataset(out_dir: Path, pages: list[Page], queries: dict, qrels: Qrels, read: DatasetRead) -> None:
    """Write ``pages.jsonl``, ``queries.jsonl`` (``{"_id", "text", "language"}`` lines, then the
    query's other attributes from ``read.attrs``: fields ``vdr evaluate --group-by`` reads),
    ``qrels.tsv``, and V3's ``qrels_boxes.jsonl`` (:data:`BOXES_FILE`, the judgments' bounding
    boxes) and ``page_metadata.jsonl`` (:data:`PAGE_METADATA_FILE`: document id, page number in
    the document and the document's metadata) atomically, then delete images no page refers to."""
    write_pages(out_dir / PAGES_FILE, pages)
    attrs = read.attrs
    kept = {p.corpus_id for p in pages}
    for name, rows in ((BOXES_FILE, [b for b in read.boxes if b["query-id"] in queries]),
                       (PAGE_METADATA_FILE, [m for m in read.page_meta if m["corpus-id"] in kept])):
        if rows:
            with atomic_write(out_dir / name) as f:
                f.writelines(json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in rows)
        elif (out_dir / name).is_file():
            (out_dir / name).unlink()
    with atomic_write(out_dir / "queries.jsonl") as f:
        for q, (text, lang) in queries.items():
            f.write(json.dumps({"_id": q, "text": text, "language": lang, **attrs.get(q, {})}, ensure_ascii=False) + "\n")
    save_qrels(qrels, out_dir / "qrels.tsv")
    _remove_orphans(out_dir, {p.image for p in pages})


class _Source:
    """Where the dataset comes from (hub name, hub snapshot folder, or ``save_to_disk`` folder) and
    how its configs are loaded (each once; :meth:`load` caches)."""

    def __init__(self, dataset, revision, cache_dir, split) -> None:
        import datasets

        self.name, self.split, self.notes, self.nfc_ids = str(dataset), split, [], []
        self.local = Path(dataset).is_dir()
        self._loaded: dict = {}
        self.disk: dict | None = None  # config -> save_to_disk folder
        if self.local:
            self.folder = Path(dataset).resolve()
            self.fingerprint = _content_fingerprint(self.folder)
            base = Path(cache_dir) if cache_dir else _default_cache()
            self.cache = str(base / "vdr-local" / self.fingerprint[:32])
            self.path, self.rev, self.resolved = str(self.folder), None, "local"
            self.disk = _disk_configs(self.folder)
        else:
            self.folder, self.fingerprint, self.path = None, "", self.name
            self.name = resolve_name(self.name)
            self.path = self.name
            self.rev = revision or pinned_revisions().get(self.name)
            if self.rev is None:
                self.notes.append(f"no pinned revision for {self.name!r}: loaded the default branch")
            self.cache = str(cache_dir) if cache_dir else None
            self.resolved = self.rev or "main"
            unreachable = hub_unreachable()
            if unreachable is not None:
                raise _hub_error(self.name, self.rev, f"the hub is unreachable: {unreachable}")
        if self.disk is not None:
            self.configs = list(self.disk)
        else:
            try:
                self.configs = datasets.get_dataset_config_names(self.path, **({} if self.local else {"revision": self.rev}))
            except Exception as e:
                if self.local:
                    raise InputError(
                        f"not a dataset folder ({type(e).__name__}: {' '.join(str(e).split())[:300]}). vdr reads a hub"
                        " snapshot (`hf download REPO --repo-type dataset --local-dir DIR`: a README.md with `configs` and"
                        " parquet files) or a `save_to_disk` folder (a DatasetDict, or one folder per config)",
                        path=self.path) from None
                raise _hub_error(self.name, self.rev, e) from None
        self.source = f"{self.name}@{self.resolved}"

    def columns(self, config: str | None) -> list[str]:
        """The column names of ``config`` (loading it once)."""
        return list(self.load(config).column_names)

    def load(self, config: str | None):
        """One config's split as a ``datasets.Dataset`` (loaded once).

        Raises:
            InputError: it cannot be loaded (the hub error says how to use a local folder).
        """
        if config not in self._loaded:
            self._loaded[config] = self._load(config)
        return self._loaded[config]

    def _load(self, config: str | None):
        import datasets

        try:
            if self.disk is not None:
                return _load_from_disk(self.disk[config], self.split)
            return datasets.load_dataset(self.path, config, split=self.split, revision=self.rev, cache_dir=self.cache)
        except (VdrError, KeyboardInterrupt):
            raise
        except Exception as e:
            if self.local:
                raise InputError(
                    f"cannot load config {config!r}, split {self.split!r} of the local dataset"
                    f" ({type(e).__name__}: {' '.join(str(e).split())[:300]})",
                    path=self.path,
                ) from None
            raise _hub_error(self.name, self.rev, e) from None

    def finish(self, fp_parts: list, pages: list[Page]) -> tuple[str, str, list[Page]]:
        """(resolved revision, fingerprint, pages with their final ``source``)."""
        if self.local:
            return self.resolved, self.fingerprint, pages
        resolved = _resolve_revision(self.name, self.rev) or self.resolved
        fingerprint = hashlib.sha256(json.dumps([self.name, resolved, *fp_parts]).encode()).hexdigest()
        source = f"{self.name}@{resolved}"
        return resolved, fingerprint, [replace(p, source=source) for p in pages]


def _filter(queries, judgments, language, has_lang, known: set[str], src: _Source):
    """Apply the language filter; (queries kept, their judgments). Notes what was dropped."""
    name, notes = src.name, src.notes
    all_langs = Counter(lang for _, lang in queries.values())
    if language is not None:
        if not has_lang:
            notes.append(f"the dataset has no language column: language filter {language!r} not applied, all queries kept")
        else:
            wanted = _lang_values(language)
            queries = {q: v for q, v in queries.items() if v[1].lower() in wanted}
            if not queries:
                raise InputError(
                    f"no query in language {language!r}; the dataset's languages are: "
                    + ", ".join(f"{k} ({v})" for k, v in sorted(all_langs.items())),
                    path=name,
                )
    kept = {q: d for q, d in judgments.items() if q in queries}
    dropped = sum(len(d) for q, d in judgments.items() if q not in queries)
    if dropped:
        notes.append(f"{dropped} judgments of queries outside the language filter dropped")
    unknown = sorted({d for ds_ in kept.values() for d in ds_ if d not in known})
    if unknown:
        warnings.warn(f"{name}: {len(unknown)} judged corpus ids are not in the corpus (e.g. {unknown[:3]})", VdrWarning, stacklevel=3)
        notes.append(f"{len(unknown)} judged corpus ids are not in the corpus")
    no_judg = [q for q in queries if q not in kept]
    if no_judg:
        notes.append(f"{len(no_judg)} queries have no judgment (they are outside the evaluated set, which the qrels define)")
    return queries, kept


def _warn_skipped(name: str, sink: _PageSink) -> None:
    for what, items in (("skipped (not in the corpus; judgments naming them stay relevant)", sink.skipped),
                        ("adapted", sink.adapted)):
        if items:
            sink.notes.append(f"{len(items)} page(s) {what}")
    if sink.skipped:
        warnings.warn(
            f"{name}: {len(sink.skipped)} page(s) skipped (listed in {REPORT_FILE} as unavailable_pages), e.g. "
            + "; ".join(f"{u['corpus-id']}: {u['reason']}" for u in sink.skipped[:3]),
            VdrWarning,
            stacklevel=3,
        )


def _resolve_revision(name: str, rev: str | None) -> str | None:
    if rev and _SHA.match(rev):
        return rev
    try:
        from huggingface_hub import HfApi

        return HfApi().dataset_info(name, revision=rev).sha
    except Exception:
        return None


def _remove_orphans(out_dir: Path, keep: set[str]) -> None:
    img = out_dir / "images"
    for p in img.glob("*.png") if img.is_dir() else ():
        if f"images/{p.name}" not in keep:
            p.unlink()
