"""Ingestion: PDFs or a ViDoRe dataset become one page corpus (see :mod:`vdr.corpus`)."""

from .pdfdir import IngestReport, ingest_pdfs

__all__ = ["ingest", "ingest_pdfs", "IngestReport"]

ingest = ingest_pdfs
