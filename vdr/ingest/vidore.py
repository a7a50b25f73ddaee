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

import hashlib
import json
import re
import time
import unicodedata
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
from ..types import Qrels, to_id
from .images import EXIF_TRANSFORMS, ImageProblem, decode_image, fit_budget, pixel_sha256, size_problem, to_rgb, upright
from .pdf import DEFAULT_MAX_PIXELS
from .pdfdir import available_cores, cli_field, duplicate_summary, write_report

__all__ = ["ingest_vidore", "VidoreOptions", "VidoreReport", "PINNED_REVISIONS", "LANGUAGE_ALIASES", "hub_unreachable"]

#: Dataset revisions MTEB's ViDoRe V2 tasks pin (Vidore2*Retrieval task metadata).
PINNED_REVISIONS: dict[str, str] = {
    "vidore/esg_reports_v2": "0542c0d03da0ec1c8cbc517c8d78e7e95c75d3d3",
    "vidore/economics_reports_v2": "b3e3a04b07fbbaffe79be49dabf92f691fbca252",
    "vidore/biomedical_lectures_v2": "a29202f0da409034d651614d87cd8938d254e2ea",
    "vidore/esg_reports_human_labeled_v2": "6d467dedb09a75144ede1421747e47cf036857dd",
}

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
#: How EXIF orientation is handled for dataset images (recorded in the report's ``exif_orientation``).
EXIF_POLICY = ("applied once to every image, whatever its column type (Image feature, {bytes, path} struct, binary,"
               " path), as datasets' Image feature and image viewers apply it; pages whose value is not 1 are listed")
_BEIR = ("corpus", "queries", "qrels")


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


def _default_cache() -> Path:
    import datasets

    return Path(datasets.config.HF_DATASETS_CACHE)


def _lang_values(language: str) -> set[str]:
    low = language.lower()
    for key, names in LANGUAGE_ALIASES.items():
        if low in {n.lower() for n in names}:
            return {n.lower() for n in names}
    return {low}


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

    def add(self, value, cid: str, source: str) -> Page | None:
        """Decode, turn upright (EXIF), check, convert, save and read one page; ``None`` (and a
        recorded reason) when skipped."""
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
            text, ts, decision = _page_text(rgb, self.ocr, self.ocr_lang, self.notes, cid)
            rel, w, h = _save_image(rgb, self.out_dir, cid)
            page = Page(cid, source, None, w, h, None, rel, text, ts, pixel_sha256(rgb))
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
        language: keep only queries in this language (``"english"``; ``"eng-Latn"``/``"en"``
            accepted); judgments of dropped queries are dropped and counted. ``None``: all.
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
    language: str | None = cli_field(None, "--language", str, "ViDoRe: keep only queries in this language (e.g. english).",
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
    attrs: dict[str, dict] = {}  # query attributes of a BEIR-layout dataset (type, format, ...): --group-by fields
    layout, queries, judgments, has_lang, fp_parts = _read_dataset(src, sink, o.progress, attrs)
    if sink.oriented:
        src.notes.append(f"{len(sink.oriented)} page image(s) turned upright by their EXIF orientation (listed in the report as"
                         " exif_orientation.applied)")
    if src.nfc_ids:
        src.notes.append(f"{len(src.nfc_ids)} image file name(s) are not in Unicode NFC: their page ids are written in NFC"
                         " (listed in the report as nfc_ids)")
    known = {u["corpus-id"] for u in sink.skipped} | {p.corpus_id for p in sink.pages}
    resolved, fingerprint, pages = src.finish(fp_parts, sink.pages)
    queries, kept = _filter(queries, judgments, language, has_lang, known, src)
    _warn_skipped(src.name, sink)
    qrels = Qrels(kept, name=src.name)
    _write_dataset(out_dir, pages, queries, qrels, attrs)
    per_lang = dict(sorted(Counter(lang for _, lang in queries.values()).items()))
    extra = {
        "split": split, "ocr": ocr, "max_pixels": max_pixels, "datasets_version": datasets.__version__,
        "ocr_threads": {"workers": 1, "omp_thread_limit_per_worker": None, "cores": available_cores()},
        "unavailable_pages": sink.skipped, "adapted_pages": sink.adapted, "duplicate_pages": duplicate_summary(pages),
        "exif_orientation": {"policy": EXIF_POLICY, "values": dict(sorted(sink.exif_values.items())), "applied": sink.oriented},
        "page_decisions": sink.decisions, "nfc_ids": src.nfc_ids,
    }
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


def _read_dataset(src: _Source, sink: _PageSink, progress: bool, attrs: dict | None = None):
    """Read the dataset in its layout (BEIR when it has the ``corpus``, ``queries`` and ``qrels``
    configs, else QA); pages go to ``sink``.

    Returns:
        ``(layout, queries, judgments, has_lang, fingerprint parts)``, see :func:`_read_beir`.

    Raises:
        InputError: as the readers do, or no page of the corpus could be ingested (the first
            three skipped pages and their reasons are named).
    """
    if set(_BEIR) <= set(src.configs):
        layout = "beir"
        queries, judgments, has_lang, fp_parts = _read_beir(src, sink, progress, attrs)
    else:
        layout = "qa"
        queries, judgments, has_lang, fp_parts = _read_qa(src, sink, progress)
    if not sink.pages:
        raise InputError(
            "no page of the corpus could be ingested: " + "; ".join(f"{u['corpus-id']}: {u['reason']}" for u in sink.skipped[:3]),
            path=src.name,
        )
    return layout, queries, judgments, has_lang, fp_parts


def _write_dataset(out_dir: Path, pages: list[Page], queries: dict, qrels: Qrels, attrs: dict | None = None) -> None:
    """Write ``pages.jsonl``, ``queries.jsonl`` (``{"_id", "text", "language"}`` lines, then the
    query's other attributes from ``attrs``: fields ``vdr evaluate --group-by`` reads) and
    ``qrels.tsv`` atomically, then delete images no page refers to."""
    write_pages(out_dir / PAGES_FILE, pages)
    attrs = attrs or {}
    with atomic_write(out_dir / "queries.jsonl") as f:
        for q, (text, lang) in queries.items():
            f.write(json.dumps({"_id": q, "text": text, "language": lang, **attrs.get(q, {})}, ensure_ascii=False) + "\n")
    save_qrels(qrels, out_dir / "qrels.tsv")
    _remove_orphans(out_dir, {p.image for p in pages})


class _Source:
    """Where the dataset comes from (hub name or local folder) and how its configs are loaded."""

    def __init__(self, dataset, revision, cache_dir, split) -> None:
        import datasets

        self.name, self.split, self.notes, self.nfc_ids = str(dataset), split, [], []
        self.local = Path(dataset).is_dir()
        if self.local:
            self.folder = Path(dataset).resolve()
            self.fingerprint = _content_fingerprint(self.folder)
            base = Path(cache_dir) if cache_dir else _default_cache()
            self.cache = str(base / "vdr-local" / self.fingerprint[:32])
            self.path, self.rev, self.resolved = str(self.folder), None, "local"
        else:
            self.folder, self.fingerprint, self.path = None, "", self.name
            self.rev = revision or PINNED_REVISIONS.get(self.name)
            if self.rev is None:
                self.notes.append(f"no pinned revision for {self.name!r}: loaded the default branch")
            self.cache = str(cache_dir) if cache_dir else None
            self.resolved = self.rev or "main"
            unreachable = hub_unreachable()
            if unreachable is not None:
                raise _hub_error(self.name, self.rev, f"the hub is unreachable: {unreachable}")
        try:
            self.configs = datasets.get_dataset_config_names(self.path, **({} if self.local else {"revision": self.rev}))
        except Exception as e:
            if self.local:
                raise InputError(f"not a dataset folder ({type(e).__name__}: {' '.join(str(e).split())[:300]})", path=self.path) from None
            raise _hub_error(self.name, self.rev, e) from None
        self.source = f"{self.name}@{self.resolved}"

    def load(self, config: str | None):
        """One config's split as a ``datasets.Dataset``.

        Raises:
            InputError: it cannot be loaded (the hub error says how to use a local folder).
        """
        import datasets

        try:
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


#: Columns of a queries config that are not attributes of the query.
_NOT_ATTRIBUTES = frozenset({"query-id", "query", "language", "_id", "text", "history", "image", "corpus-id"})


def _attribute(value: object) -> object | None:
    """A query attribute as JSON (a string, number, boolean or list of them), or ``None`` when it
    has none (null, an image, bytes, a nested record)."""
    if isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, list) and value and all(isinstance(v, (str, int, float, bool)) for v in value):
        return value
    return None


def _read_beir(src: _Source, sink: _PageSink, progress: bool, attrs: dict | None = None):
    """Pages, ``{qid: (text, language)}``, ``{qid: {cid: grade}}``, has_lang and fingerprints of a
    BEIR-layout dataset; every other column of the queries config (ViDoRe V3: the query's type,
    format, ...) goes to ``attrs`` (``{qid: {column: value}}``; values as :func:`_attribute` keeps
    them)."""
    from tqdm.auto import tqdm

    name = src.name
    corpus_ds, queries_ds, qrels_ds = src.load("corpus"), src.load("queries"), src.load("qrels")
    _need(corpus_ds, ("corpus-id", "image"), "corpus", name)
    _need(queries_ds, ("query-id", "query"), "queries", name)
    _need(qrels_ds, ("query-id", "corpus-id", "score"), "qrels", name)
    seen: set[str] = set()
    for i, row in enumerate(tqdm(_undecoded(corpus_ds), desc="pages", unit="page", disable=not progress)):
        cid = to_id(row["corpus-id"], what="corpus id", path=f"{name} corpus", line=i + 1)
        if cid in seen:
            raise InputError(f"duplicate corpus id {cid!r} in the corpus config (row {i + 1})", path=name, id=cid)
        seen.add(cid)
        sink.add(row["image"], cid, src.source)
    queries: dict[str, tuple[str, str]] = {}
    has_lang = "language" in queries_ds.column_names
    for i, row in enumerate(queries_ds):
        qid = to_id(row["query-id"], what="query id", path=f"{name} queries", line=i + 1)
        if qid in queries:
            raise InputError(f"duplicate query id {qid!r} in the queries config (row {i + 1})", path=name, id=qid)
        text = row["query"]
        if not isinstance(text, str):
            raise InputError(f"query {qid!r} is not a string ({type(text).__name__})", path=name, id=qid)
        queries[qid] = (text, str(row["language"]) if has_lang and row["language"] is not None else "unknown")
        if attrs is not None:
            kept = {str(k): _attribute(v) for k, v in row.items() if k not in _NOT_ATTRIBUTES}
            kept = {k: v for k, v in kept.items() if v is not None}
            if kept:
                attrs[qid] = kept
    return queries, _read_judgments(qrels_ds, name), has_lang, [corpus_ds._fingerprint, queries_ds._fingerprint, qrels_ds._fingerprint]


def _undecoded(ds, column: str = "image"):
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


def _read_judgments(qrels_ds, name: str) -> dict[str, dict[str, int]]:
    """``{qid: {cid: grade}}`` of the qrels config.

    Raises:
        InputError: the same (query id, corpus id) twice, whatever the grades (both rows named):
            the rule of the qrels file loaders (:func:`vdr.io.load_qrels`) for every qrels source.
    """
    judgments: dict[str, dict[str, int]] = {}
    rows: dict[tuple[str, str], int] = {}
    for i, row in enumerate(qrels_ds):
        qid = to_id(row["query-id"], what="query id", path=f"{name} qrels", line=i + 1)
        did = to_id(row["corpus-id"], what="corpus id", path=f"{name} qrels", line=i + 1)
        if (qid, did) in rows:
            first = rows[(qid, did)]
            raise InputError(
                f"duplicate judgment of query {qid!r}, corpus id {did!r} in the qrels config: rows {first} and {i + 1}"
                f" (grades {judgments[qid][did]!r} and {row['score']!r}); vdr rejects duplicate judgments from every"
                " qrels source rather than keep one silently",
                path=name,
                id=did,
            )
        rows[(qid, did)] = i + 1
        judgments.setdefault(qid, {})[did] = row["score"]
    return judgments


def _read_qa(src: _Source, sink: _PageSink, progress: bool):
    """The same as :func:`_read_beir` for a QA-layout (ViDoRe V1) dataset."""
    from tqdm.auto import tqdm

    cfg = src.configs[0] if src.configs else None
    ds = src.load(cfg)
    _need(ds, ("query", "image"), cfg or "default", src.name)
    has_fn = "image_filename" in ds.column_names
    has_lang = "language" in ds.column_names
    queries: dict[str, tuple[str, str]] = {}
    judgments: dict[str, dict[str, int]] = {}
    ids: dict[str, str] = {}
    raw_of: dict[str, str] = {}  # NFC file name -> the first name on a row that gave it
    for i, row in enumerate(tqdm(_undecoded(ds), desc="rows", unit="row", disable=not progress)):
        key = str(row["image_filename"]) if has_fn and row["image_filename"] else str(i)
        cid = ids.get(key)
        if cid is None:
            nfc = unicodedata.normalize("NFC", key)
            if raw_of.setdefault(nfc, key) != key:
                raise InputError(
                    f"two image file names differ only in Unicode normalisation: {raw_of[nfc]!r} ({ascii(raw_of[nfc])}) and"
                    f" {key!r} ({ascii(key)}, row {i + 1}); ids are written in NFC, so both would get the id {_encode_id(nfc)!r}",
                    path=src.name,
                )
            if nfc != key:
                src.nfc_ids.append({"image_filename": key, "id": _encode_id(nfc)})
            cid = ids[key] = _encode_id(nfc)
            sink.add(row["image"], cid, src.source)
        if row["query"] is not None:
            qid = str(i)
            queries[qid] = (str(row["query"]), str(row["language"]) if has_lang and row["language"] else "unknown")
            judgments[qid] = {cid: 1}
    return queries, judgments, has_lang, [ds._fingerprint]


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


def _encode_id(key: str) -> str:
    return "".join("".join(f"%{b:02X}" for b in c.encode("utf-8")) if (c == "%" or c.isspace()) else c for c in key)


def _need(ds, columns: tuple[str, ...], config: str, name: str) -> None:
    missing = [c for c in columns if c not in ds.column_names]
    if missing:
        raise InputError(f"config {config!r} lacks column(s) {missing}; it has {ds.column_names}", path=name)


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
