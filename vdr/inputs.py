"""Stage 1 of an evaluation: load and check the inputs (corpus, queries, qrels, rewrite variants).

:func:`load_inputs` reads everything once into :class:`Inputs`; every later stage (the backends,
the MTEB engine, the metrics) works on these objects and never reads the files again.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .corpus import PAGES_FILE, Corpus
from .errors import AlignmentError, InputError, VdrWarning
from .metrics import check_judged_overlap
from .io.formats import load_qrels, load_queries, load_rewrites
from .types import ORIGINAL, Qrels, Query, QuerySet

__all__ = ["Inputs", "load_inputs", "build_variants", "check_inputs", "duplicate_texts", "ORIGINAL", "CONCAT"]

CONCAT = "concat"
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


@dataclass(frozen=True)
class Inputs:
    """Everything an evaluation reads, loaded and checked.

    Attributes:
        corpus: the page corpus.
        corpus_dir: its folder.
        queries_path, qrels_path: the files the originals and the qrels were read from.
        qrels: the judgments (they define the query set).
        variants: ``{"original": ..., ["concat": ...], rewrite name: ...}`` (see :func:`build_variants`).
        vidore_info: what :func:`vdr.ingest.ingest_vidore` reported when a ViDoRe dataset was
            ingested on the fly, else ``None``.
    """

    corpus: Corpus
    corpus_dir: Path
    queries_path: Path
    qrels_path: Path
    qrels: Qrels
    variants: dict[str, QuerySet]
    vidore_info: Any = None


def check_name(name: str, what: str) -> str:
    """``name`` when it can name files and is not reserved (``original``, ``concat``).

    Raises:
        InputError: otherwise.
    """
    if not _NAME_RE.match(name) or name in (ORIGINAL, CONCAT):
        raise InputError(
            f"{what} name {name!r} must be letters, digits, '_', '.', '-' (it names files) and not {ORIGINAL!r} or {CONCAT!r}"
        )
    return name


def build_variants(originals: QuerySet, rewrites: Mapping[str, str | Path], *, concat: bool | None = None) -> dict[str, QuerySet]:
    """The query variants to evaluate: the originals, each rewrite file, and the ``concat`` baseline.

    Args:
        originals: the original queries (``history`` holds earlier conversation turns, if any).
        rewrites: ``{variant name: queries.jsonl path}``; ids must match the originals exactly.
        concat: add the ``concat`` variant (history turns and the query joined with spaces, the
            baseline that rewriting must beat); default: when any original query has history.

    Returns:
        ``{"original": ..., [ "concat": ...], name: ...}`` in that order.

    Failed rewrites (the policy of :mod:`vdr.rewrite.runner`): a variant must hold every id; when
    ``vdr rewrite`` left failed ids out, the error counts them and names its failures file; ids
    written with their original text (``--fill-failed original``) are evaluated as such, with a
    :class:`~vdr.errors.VdrWarning` that counts them.

    Raises:
        AlignmentError: a rewrite file's ids differ from the originals'.
        InputError: a bad variant name, or an empty or whitespace-only rewrite (file, line, id).
    """
    out: dict[str, QuerySet] = {ORIGINAL: originals}
    has_history = any(q.history for q in originals.values())
    if concat if concat is not None else has_history:
        out[CONCAT] = QuerySet(
            {qid: Query(" ".join([*q.history, q.text])) for qid, q in originals.items()}, name=CONCAT, source=originals.source
        )
    for name, path in rewrites.items():
        check_name(name, "rewrite variant")
        variant = _load_variant(path, originals, name)
        for qid, q in variant.items():
            if not q.text.strip():
                raise InputError("empty or whitespace-only rewrite", path=path, line=variant.lines.get(qid), id=qid)
        out[name] = variant
    return out


def _load_variant(path: str | Path, originals: QuerySet, name: str) -> QuerySet:
    """:func:`load_rewrites`, aware of the failures file ``vdr rewrite`` writes beside a variant."""
    from .rewrite.runner import failures_file, read_failures

    failed = read_failures(path)
    try:
        variant = load_rewrites(path, originals, name=name)
    except AlignmentError as e:
        gone = [q for q in originals.ids() if q in failed]
        if not gone:
            raise
        raise AlignmentError(f"{e}; {len(gone)} of the missing ids failed in `vdr rewrite` (reasons in {failures_file(path)}):"
                             " rerun `vdr rewrite` to retry them, or write them with their original text"
                             " (`vdr rewrite --fill-failed original`)") from None
    filled = [q for q in variant.ids() if q in failed]
    if filled:
        warnings.warn(f"rewrite variant {name!r}: {len(filled)} of {len(variant)} queries failed in `vdr rewrite` and are evaluated"
                      f" with their original text (listed in {failures_file(path)}), e.g. {filled[:5]}", VdrWarning, stacklevel=3)
    return variant


def check_inputs(corpus: Corpus, queries: QuerySet, qrels, qrels_path: str | Path) -> dict[str, str]:
    """The checks every evaluation makes before running a backend.

    A judged page that ingest skipped or failed to render (:meth:`vdr.corpus.Corpus.unavailable_reason`)
    stays relevant but unretrievable: it counts in IDCG and recall denominators, so a failure
    lowers scores instead of vanishing; a :class:`~vdr.errors.VdrWarning` lists such pages with
    the reason recorded by ingest.

    Returns:
        ``{corpus id: ingest reason}`` of the judged pages that are not in the corpus.

    Raises:
        InputError: the corpus has no pages; a qrels query id has no query text; a qrels corpus id
            belongs to no ingested document (the qrels file is named).
    """
    if len(corpus) == 0:
        raise InputError("the corpus holds no pages", path=Path(corpus.root) / PAGES_FILE)
    check_judged_overlap(qrels, corpus.ids(), qrels_path=qrels_path)  # no qrels id is a page: an id-format mismatch
    unknown_q = [q for q in qrels if q not in queries]
    if unknown_q:
        raise InputError(f"{len(unknown_q)} qrels query id(s) have no query text, e.g. {unknown_q[:10]}", path=qrels_path)
    missing = {d: corpus.unavailable_reason(d) for d in sorted({d for q in qrels for d in qrels[q] if d not in corpus})}
    unknown = [d for d, reason in missing.items() if reason is None]
    if unknown:
        raise InputError(
            f"{len(unknown)} corpus id(s) in the qrels are not pages of the corpus, e.g. {unknown[:10]}"
            " (page ids are '<relative pdf path>#<page>', with spaces as %20)",
            path=qrels_path,
        )
    if missing:
        import warnings

        from .errors import VdrWarning

        warnings.warn(
            f"{qrels_path}: {len(missing)} judged page(s) were not ingested and stay relevant but unretrievable"
            " (they count in IDCG and recall): " + "; ".join(f"{d}: {r}" for d, r in list(missing.items())[:10])
            + (" ..." if len(missing) > 10 else ""),
            VdrWarning,
            stacklevel=2,
        )
    return missing


def duplicate_texts(queries: QuerySet, *, examples: int = 5) -> dict:
    """Query texts that occur under more than one id in one variant (usually a copy-paste slip in a
    rewrite file; such queries get identical rankings).

    Returns:
        ``{"count": number of ids whose text an earlier id already has, "examples": [{"text",
        "ids"}] (first ``examples`` texts)}``.
    """
    by_text: dict[str, list[str]] = {}
    for qid, q in queries.items():
        by_text.setdefault(q.text, []).append(qid)
    dups = [(t, ids) for t, ids in by_text.items() if len(ids) > 1]
    return {"count": sum(len(ids) - 1 for _, ids in dups), "examples": [{"text": t, "ids": ids} for t, ids in dups[:examples]]}


def load_inputs(
    corpus_dir: str | Path | None,
    *,
    queries: str | Path | None,
    qrels: str | Path | None,
    rewrites: Mapping[str, str | Path],
    concat: bool | None,
    vidore: str | None = None,
    vidore_dir: Path | None = None,
    vidore_revision: str | None = None,
    vidore_language: str | None = None,
    progress: bool = False,
) -> Inputs:
    """Read and check the corpus, queries, qrels and rewrite variants (a ViDoRe dataset is first
    ingested into ``vidore_dir`` -- on rank 0 only under torchrun).

    Raises:
        InputError: both or neither of a corpus and a ViDoRe dataset; missing or malformed files
            (file, line and id named); the checks of :func:`check_inputs` and :func:`build_variants`.
    """
    from . import distributed as D

    vidore_info = None
    if vidore is not None:
        if corpus_dir is not None:
            raise InputError("give either a corpus folder or --vidore, not both")
        from .ingest import ingest_vidore

        corpus_dir = vidore_dir
        vidore_info = D.run_on_main(ingest_vidore, vidore, corpus_dir, revision=vidore_revision, language=vidore_language,
                                    progress=progress)
    if corpus_dir is None:
        raise InputError("no corpus: give CORPUS_DIR or --vidore DATASET")
    corpus_dir = Path(corpus_dir)
    corpus = Corpus.load(corpus_dir)
    queries_path = Path(queries) if queries is not None else corpus_dir / "queries.jsonl"
    qrels_path = Path(qrels) if qrels is not None else corpus_dir / "qrels.tsv"
    originals = load_queries(queries_path)
    qrels_obj = load_qrels(qrels_path)
    check_inputs(corpus, originals, qrels_obj, qrels_path)
    variants = build_variants(originals, dict(rewrites), concat=concat)
    return Inputs(corpus, corpus_dir, queries_path, qrels_path, qrels_obj, variants, vidore_info)
