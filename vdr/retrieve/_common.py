"""Helpers shared by the text backends: input checks, trec_eval-order top-k, library versions."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ..errors import InputError
from ..types import to_id


def check_texts(texts: object, what: str, *, allow_empty: bool) -> dict[str, str]:
    """``{id: text}`` with string ids (see :func:`vdr.types.to_id`) and ``str`` texts.

    Raises:
        InputError: not a mapping, no entries, a bad id, a non-str text, a duplicate id after
            conversion, or (``allow_empty=False``) an empty / whitespace-only text.
    """
    if not isinstance(texts, Mapping):
        raise InputError(f"{what} must be a mapping {{id: text}}, got {type(texts).__name__}")
    if len(texts) == 0:
        raise InputError(f"no {what}")
    out: dict[str, str] = {}
    for key, text in texts.items():
        i = to_id(key, what=f"{what} id")
        if i in out:
            raise InputError(f"{what} id {i!r} appears twice after conversion to str", id=i)
        if not isinstance(text, str):
            raise InputError(f"{what} {i!r}: text must be a str, got {type(text).__name__}", id=i)
        if not allow_empty and not text.strip():
            raise InputError(f"{what} {i!r} is empty or whitespace-only", id=i)
        out[i] = text
    return out


def textless_reason(index_report: Mapping, backend: str, allowed: bool) -> str | None:
    """Why a text backend refuses its index: no page has text (pages without text among others are
    recorded in the index report, ``num_empty_pages``, and never ranked); ``None`` when it may run.
    The backend raises :class:`~vdr.retrieve.base.BackendUnavailable` with it.

    Args:
        index_report: the backend's ``report["index"]``: ``num_pages`` and ``num_pages_without_text``
            (empty or whitespace text; BM25 also counts pages left empty by its analyzer in
            ``num_empty_pages``, the semantic backend's ``num_empty_pages`` are text-less pages).
        backend: the backend's name (``lexical``, ``semantic``), for the message and the opt-in.
        allowed: the user asked for it explicitly (``--backend-option BACKEND.allow_no_text=true``).

    Returns:
        The reason when every page is empty and ``allowed`` is false (the run would score 0.0 on
        every query: ViDoRe V1/V2 images without ``--ocr``), naming the fixes; :func:`vdr.evaluate`
        reports the backend as skipped with it (an error when no backend runs at all).
    """
    n = int(index_report.get("num_pages") or 0)
    empty = int(index_report.get("num_pages_without_text", index_report.get("num_empty_pages")) or 0)
    if n and empty == n and not allowed:
        return (
            f"no page of the corpus has text ({n} pages): the {backend} backend would score 0.0 on every query. Ingest"
            " with `--ocr auto` (Tesseract), or use a copy of the dataset with page text (ViDoRe V3's markdown, MTEB's OCR"
            f" copies mteb/Vidore3*OCRRetrieval); to run anyway, pass --backend-option {backend}.allow_no_text=true")
    return None


def check_depth(value: object, what: str = "depth") -> int:
    """``value`` as a positive int (a retrieval depth, or the ``top``/``depth`` of a fusion).

    Raises:
        InputError: not a positive integer (the message names ``what``).
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or int(value) < 1:
        raise InputError(f"{what} must be a positive integer, got {value!r}")
    return int(value)


def id_order(ids: list[str]) -> np.ndarray:
    """Position of each id in ascending string order, int64 ``(len(ids),)`` (for trec_eval tie-breaks)."""
    pos = np.empty(len(ids), dtype=np.int64)
    pos[np.argsort(np.array(ids, dtype=object), kind="stable")] = np.arange(len(ids))
    return pos


def top_k(scores: np.ndarray, candidates: np.ndarray, order: np.ndarray, ids: list[str], depth: int) -> dict[str, float]:
    """The ``depth`` best ``candidates`` (indices into ``scores``) in trec_eval order: score
    descending, then corpus id descending, so the cut agrees with :meth:`vdr.types.Run.ranked`.

    Args:
        scores: one score per corpus page, float32 or float64, shape ``(n_pages,)``.
        candidates: int indices of the pages that may be returned.
        order: :func:`id_order` of ``ids``.
        ids: corpus ids, ``len(ids) == n_pages``.
        depth: pages kept.

    Returns:
        ``{corpus_id: float score}`` (Python floats; float32 values widen exactly), best first.
    """
    if candidates.shape[0] == 0:
        return {}
    s = scores[candidates].astype(np.float64)
    sel = np.lexsort((-order[candidates], -s))[:depth]
    return {ids[int(candidates[j])]: float(s[j]) for j in sel}


def version_of(dist: str) -> str | None:
    """Installed version of distribution ``dist``, or None."""
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None
