"""The corpus folder ``vdr ingest --out DIR`` writes into: checked before any work.

``DIR`` may be missing, empty, or a corpus folder of the same kind (``pages.jsonl`` or
``ingest-report.json``; ``corpus.json`` or ``passages.jsonl``), whatever else it holds:
re-ingesting into it reuses what is unchanged (PDFs resume, a passage corpus is rewritten). Anything else is refused with an
:class:`~vdr.errors.InputError` naming the folder, unless ``overwrite``:

* a results folder (``results.json``, written by ``vdr evaluate`` / ``vdr compare``): a corpus
  is never mixed into it silently;
* a corpus of the other kind (a page corpus when ingesting passages, or the reverse): refused
  even with ``overwrite``, since both layouts in one folder make a corpus of neither;
* any other non-empty folder (files ingest does not write).

A folder holding only what this kind of ingest writes (e.g. ``images/`` of an ingest that was
stopped before writing ``pages.jsonl``) counts as a corpus folder. ``overwrite`` writes the corpus
into the folder anyway: the corpus files are (re)written, the folder's other entries are left in
place (nothing else is deleted). Inputs inside ``DIR`` (a PDF folder under it) never count.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import InputError

__all__ = ["check_corpus_out", "CORPUS_ENTRIES"]

#: What each kind of ingest writes at the top of its corpus folder (``embeddings``: the multimodal
#: store's default place), and the files that mark a finished corpus of that kind.
CORPUS_ENTRIES = {
    "page": frozenset({"pages.jsonl", "ingest-report.json", "images", "queries.jsonl", "qrels.tsv", "embeddings"}),
    "passage": frozenset({"passages.jsonl", "corpus.json", "ids.txt", "empty_ids.txt", "offsets.npy"}),
}
_MARKERS = {"page": ("pages.jsonl", "ingest-report.json"), "passage": ("corpus.json", "passages.jsonl")}


def _entries(out: Path, inputs) -> list[str]:
    """Top-level entries of ``out`` except temporary files of atomic writes and ``inputs`` inside it."""
    from ..io.outdir import entries_holding

    skip = set(entries_holding(out, inputs))
    return sorted(e.name for e in out.iterdir()
                  if e.name not in skip and not (e.name.startswith(".") and e.name.endswith(".tmp")))


def check_corpus_out(out: str | Path, kind: str, *, overwrite: bool = False, inputs=()) -> None:
    """Refuse a corpus folder ``out`` that ``vdr ingest`` must not write into (module docstring).

    Args:
        out: the corpus folder (``--out``); may be missing.
        kind: ``"page"`` (PDFs, ViDoRe) or ``"passage"`` (``--passages``).
        overwrite: write into a results folder or a non-empty folder anyway (``--overwrite``).
        inputs: input files or folders (may lie inside ``out``; never counted as its content).

    Raises:
        InputError: ``out`` is a file; ``out`` holds results, the other kind of corpus, or files
            ingest does not write (naming the folder and up to five entries).
    """
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise InputError("the corpus folder (--out) is a file, not a folder", path=out)
    if not out.is_dir():
        return
    names = _entries(out, inputs)
    other = "passage" if kind == "page" else "page"
    if not any(n in names for n in _MARKERS[kind]) and any(n in names for n in _MARKERS[other]):
        raise InputError(f"the folder holds a {other} corpus; ingest the {kind} corpus into another --out", path=out)
    if overwrite:
        return
    if "results.json" in names:
        raise InputError("the folder is a vdr results folder (results.json, written by vdr evaluate / vdr compare), not a"
                         " corpus folder; choose another --out, or give --overwrite to write the corpus into it anyway", path=out)
    if any(n in names for n in _MARKERS[kind]):
        return  # a corpus folder of this kind (its other files, e.g. caches, are its owner's business)
    foreign = [n for n in names if n not in CORPUS_ENTRIES[kind]]
    if foreign:
        raise InputError(f"the folder is not empty and not a {kind} corpus folder (it holds {', '.join(foreign[:5])}"
                         f"{' ...' if len(foreign) > 5 else ''}); choose another --out, or give --overwrite to write the"
                         " corpus into it anyway (the other files stay)", path=out)
