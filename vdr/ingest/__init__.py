"""Ingestion: a folder of PDFs or a ViDoRe dataset becomes one page corpus (see :mod:`vdr.corpus`).

* :func:`ingest` (alias of :func:`ingest_pdfs`): PDFs -> ``pages.jsonl`` + ``images/`` + report.
* :func:`ingest_vidore`: a ViDoRe dataset -> the same layout plus ``queries.jsonl`` and ``qrels.tsv``.
* :func:`ingest_passages`: a text-passage collection -> a passage corpus (:mod:`vdr.ingest.passages`).
* :func:`vdr.ingest.pdf.rasterize`: render one PDF's pages in memory.
* :mod:`vdr.ingest.images`: the page checks, image decoding, EXIF orientation and RGB conversion every path shares.
* :mod:`vdr.ingest.ocr`: when ``--ocr auto`` reads a page (thin text layers) and how a page is turned upright before OCR.
"""

from .passages import PassageIngestReport, ingest_passages
from .pdfdir import DocumentReport, IngestOptions, IngestReport, ingest_pdfs
from .vidore import VidoreOptions, VidoreReport, ingest_vidore, pinned_revisions

__all__ = ["ingest", "ingest_pdfs", "ingest_vidore", "ingest_passages", "PassageIngestReport", "IngestOptions", "IngestReport", "DocumentReport", "VidoreOptions", "VidoreReport", "pinned_revisions"]


def ingest(pdf_dir, out, *, options: IngestOptions | None = None, **kwargs) -> IngestReport:
    """Ingest every PDF under ``pdf_dir`` into the corpus folder ``out``; see :func:`ingest_pdfs`
    (``options``: an :class:`IngestOptions`; ``kwargs``: its fields)."""
    from ..errors import check_path

    return ingest_pdfs(check_path(pdf_dir, "ingest", "pdf_dir"), check_path(out, "ingest", "out"), options=options, **kwargs)
