"""Stage 1 of an evaluation: load and check the inputs (corpus, queries, qrels, rewrite variants).

:func:`load_inputs` reads everything once into :class:`Inputs`; every later stage (the backends,
the MTEB engine, the metrics) works on these objects and never reads the files again.
"""

from __future__ import annotations

import dataclasses
import re
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..corpus import PAGES_FILE, Corpus, PassageCorpus, id_normalisation_hint, load_corpus
from ..errors import AlignmentError, InputError, VdrWarning
from ..metrics import check_judged_overlap
from ..io.formats import load_qrels, load_queries, load_rewrites
from ..io.turn_ids import IdMapping, load_rewrites_mapped, mapping_note, remap_qrels
from ..retrieve.budget import DEFAULT_MAX_QUERY_TOKENS, budget_config, check_max_tokens, fit_query_budget
from ..types import ORIGINAL, Qrels, Query, QuerySet, duplicate_texts
from .samples import is_samples_file

__all__ = ["InputSettings", "Inputs", "load_inputs", "build_variants", "concat_variant", "check_inputs", "duplicate_texts", "same_text_variants", "ORIGINAL", "CONCAT"]

CONCAT = "concat"
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


@dataclass(frozen=True)
class InputSettings:
    """What is evaluated (group ``inputs`` of :class:`EvaluateOptions`).

    Attributes:
        queries: BEIR ``queries.jsonl`` of the original queries (``history`` optional); default
            ``corpus_dir/queries.jsonl`` when it exists (ViDoRe corpora).
        qrels: qrels file (BEIR TSV, TREC or JSON); default ``corpus_dir/qrels.tsv`` when it exists.
        rewrites: ``{variant name: queries.jsonl}``; each must have exactly the originals' ids.
        runs: runs of other systems, evaluated and compared as backends named ``name``:
            ``{name: {variant: run file}}`` (TREC or JSON; one file per variant, issue 25.4), or
            ``{name: run file}`` (the run of the ``original`` queries only), or
            ``{name: {"*": run file}}`` (one file reused for every variant, on explicit request:
            marked in the table, its changes are 0 by construction).
        vidore: a ViDoRe dataset (hub name or local folder) used instead of ``corpus_dir``/
            ``queries``/``qrels``; it is ingested into ``out/corpus`` first.
        vidore_revision, vidore_language: with ``vidore``: the dataset revision (default: MTEB's
            pinned commit) and the one query language kept.
        concat: add the history-concatenation baseline (default: when queries carry history).
        concat_max_tokens: the ``concat`` variant's query budget in whitespace tokens (default
            :data:`vdr.retrieve.budget.DEFAULT_MAX_QUERY_TOKENS`, ConvSearch-R1's evaluation cut; the
            oldest history dropped first, the question kept: :func:`vdr.experiment.inputs.concat_variant`);
            ``None``: none. Recorded as ``config.concat``.
        drop_missing_judged: passage corpora: remove the judgments of judged passages that are absent
            from the collection or empty (labelled in ``config.judged_passages``). Default
            ``False``: they stay relevant-but-unretrievable and count in IDCG and recall, as in
            trec_eval, and are reported.
        allow_id_mismatch: evaluate query ids (of the queries, the qrels, ``--run`` files) that match
            the other file's only after normalisation (``q1`` / ``q01``, case, whitespace, NFC, a
            known prefix; :mod:`vdr.io.idjoin`) as written; default ``False``: an error naming the pairs.
    """

    queries: str | Path | None = None
    qrels: str | Path | None = None
    rewrites: Mapping[str, str | Path] | None = None
    runs: Mapping[str, str | Path | Mapping[str, str | Path]] | None = None
    vidore: str | None = None
    vidore_revision: str | None = None
    vidore_language: str | None = None
    concat: bool | None = None
    concat_max_tokens: int | None = DEFAULT_MAX_QUERY_TOKENS
    drop_missing_judged: bool = False
    allow_id_mismatch: bool = False


@dataclass(frozen=True)
class Inputs:
    """Everything an evaluation reads, loaded and checked.

    Attributes:
        corpus: the page corpus or the passage corpus.
        corpus_dir: its folder.
        queries_path, qrels_path: the files the originals and the qrels were read from.
        qrels: the judgments (they define the query set).
        variants: ``{"original": ..., ["concat": ...], rewrite name: ...}`` (see :func:`build_variants`).
        vidore_info: what :func:`vdr.ingest.ingest_vidore` reported when a ViDoRe dataset was
            ingested on the fly, else ``None``.
        judged: passage corpora only: the judged passages missing from the collection or empty
            (counts, first 20 ids) and the policy (kept, or dropped by ``drop_missing_judged``);
            recorded in ``results.json`` under ``config.judged_passages``.
        concat: the ``concat`` variant's query budget and cut counts (:func:`concat_variant`),
            recorded under ``config.concat``; empty when there is no ``concat`` variant.
        same_texts: ``{name: kept name}`` of the variants left out of ``variants`` because their
            texts equal an earlier variant's for every query (:func:`same_text_variants`; e.g. a
            ``concat-q`` file beside the built-in ``concat``); recorded as ``config.same_texts``.
        id_mapping: the files whose query ids were mapped onto the query set's id scheme
            (ConvSearch-R1's ``<prefix>_<conv>_<turn>`` <-> ``<conv>_<turn>``, :mod:`vdr.io.turn_ids`):
            ``{"qrels": record, "rewrites": {name: record}}`` (:meth:`~vdr.io.turn_ids.IdMapping.to_json`),
            recorded under ``config.id_mapping``; empty when nothing was mapped.
        id_join: ``{"queries_qrels": record}``: how the query ids of the queries file and of the qrels
            join (:func:`vdr.io.idjoin.check_id_join`), recorded under ``config.id_join``.
        samples: ``{name: SampleVariant}``: the N-sample rewrite variants (a file whose ``text`` is a
            list, :mod:`vdr.experiment.samples`); their hidden members ``NAME.s1 .. NAME.sN`` are in
            ``variants`` (searched like any variant), ``NAME`` itself is not.
        per_backend: per-backend variants (``--rewrites NAME@BACKEND=FILE``, issue 37.1): ``{variant:
            {backend: QuerySet, ["*": the NAME=FILE queries, for the backends without a file of
            their own]}}``; ``variants[name]`` is then the ``*`` queries or, without them, the first
            backend's (what tables show as the variant's texts).
        per_backend_files: ``{variant: {backend or "*": file}}`` of :attr:`per_backend`.
    """

    corpus: Corpus
    corpus_dir: Path
    queries_path: Path
    qrels_path: Path
    qrels: Qrels
    variants: dict[str, QuerySet]
    vidore_info: Any = None
    judged: dict = field(default_factory=dict)
    concat: dict = field(default_factory=dict)
    same_texts: dict = field(default_factory=dict)
    id_mapping: dict = field(default_factory=dict)
    id_join: dict = field(default_factory=dict)
    per_backend: dict = field(default_factory=dict)
    per_backend_files: dict = field(default_factory=dict)
    samples: dict = field(default_factory=dict)


def split_backend_rewrites(rewrites: Mapping[str, str | Path]) -> tuple[dict[str, str | Path], dict[str, dict[str, str | Path]]]:
    """Split ``--rewrites`` into plain variants ``{name: file}`` and per-backend ones ``{name: {backend:
    file}}`` (``NAME@BACKEND=FILE``: the file feeds that backend only, issue 37.1). A per-backend
    variant may also have a plain ``NAME=FILE``: it feeds the backends without a file of their own
    (returned under the backend key ``"*"``).

    Raises:
        InputError: an empty name or backend, or a bad variant name.
    """
    plain: dict[str, str | Path] = {}
    per: dict[str, dict[str, str | Path]] = {}
    for key, path in rewrites.items():
        name, at, backend = str(key).partition("@")
        if at and (not name or not backend):
            raise InputError(f"--rewrites {key}={path}: a per-backend variant is NAME@BACKEND=FILE (e.g. rlqr@lexical=FILE)")
        if at:
            per.setdefault(check_name(name, "rewrite variant"), {})[backend] = path
        else:
            plain[name] = path
    for name in per:
        if name in plain:
            per[name]["*"] = plain.pop(name)
    return plain, per


def _per_backend_variants(originals: QuerySet, per: Mapping[str, Mapping[str, str | Path]]) -> tuple[dict, dict]:
    """Load every file of the per-backend variants: ``({variant: {backend: QuerySet}}, {name@backend:
    id-mapping record})`` (each file checked as a plain variant is: ids, empty rewrites)."""
    out: dict[str, dict[str, QuerySet]] = {}
    mappings: dict[str, dict] = {}
    for name, files in per.items():
        for backend, path in files.items():
            loaded, mapping = _rewrite_variants(originals, {name: path})
            out.setdefault(name, {})[backend] = loaded[name]
            if mapping:
                mappings[f"{name}@{backend}"] = mapping[name]
    return out, mappings


def same_text_variants(variants: Mapping[str, QuerySet]) -> dict[str, str]:
    """The variants whose query texts equal an earlier variant's for EVERY query id (history not
    compared: backends search the text), so that they are evaluated once (issue 24.5): two names
    for the same texts would give identical rows and enlarge the Holm family with duplicate tests.

    Args:
        variants: ``{name: QuerySet}`` in evaluation order (``original`` first, then ``concat``,
            then the rewrite files as given); the first name of each group is kept.

    Returns:
        ``{later name: kept name}`` (empty when all variants differ somewhere).
    """
    first: dict[tuple, str] = {}
    out: dict[str, str] = {}
    for name, qs in variants.items():
        key = tuple(sorted((qid, q.text) for qid, q in qs.items()))
        if key in first:
            out[name] = first[key]
        else:
            first[key] = name
    return out


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


def concat_variant(originals: QuerySet, max_tokens: int | None = DEFAULT_MAX_QUERY_TOKENS) -> tuple[QuerySet, dict]:
    """The ``concat`` baseline: each query's history turns (oldest first) and the query joined with
    spaces, within the shared query budget (:func:`vdr.retrieve.budget.fit_query_budget`: the
    OLDEST history tokens dropped first, the question kept; the same rule as ``vdr convert``'s
    ``concat-q`` and the lexical backends). Within budget the text is the plain space-joined one.

    Args:
        originals: the original queries.
        max_tokens: budget in whitespace tokens (default 512, ConvSearch-R1's); ``None``: none.

    Returns:
        ``(the variant, record)``: record = :func:`~vdr.retrieve.budget.budget_config` plus
        ``num_queries_cut``, ``queries_cut`` (first 50 ids), ``num_tokens_dropped``,
        ``num_questions_cut``.

    Raises:
        InputError: a bad ``max_tokens``.
    """
    max_tokens = check_max_tokens(max_tokens)
    queries, cut, dropped, q_cut = {}, [], 0, 0
    for qid, q in originals.items():
        b = fit_query_budget(q.text, q.history, max_tokens)
        queries[qid] = Query(b.text)
        if b.cut:
            cut.append(qid)
            dropped, q_cut = dropped + b.dropped_tokens, q_cut + b.question_cut
    record = {**budget_config(max_tokens), "num_queries_cut": len(cut), "queries_cut": cut[:50], "num_tokens_dropped": dropped,
              "num_questions_cut": q_cut}
    return QuerySet(queries, name=CONCAT, source=originals.source), record


def build_variants(originals: QuerySet, rewrites: Mapping[str, str | Path], *, concat: bool | None = None,
                   concat_max_tokens: int | None = DEFAULT_MAX_QUERY_TOKENS) -> dict[str, QuerySet]:
    """The query variants to evaluate: the originals, each rewrite file, and the ``concat`` baseline.

    Args:
        originals: the original queries (``history`` holds earlier conversation turns, if any).
        rewrites: ``{variant name: queries.jsonl path}``; ids must match the originals exactly.
        concat: add the ``concat`` variant (:func:`concat_variant`: history turns and the query
            joined with spaces, the baseline that rewriting must beat); default: when any original
            query has history.
        concat_max_tokens: the ``concat`` variant's query budget (default 512; ``None``: none).

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
        out[CONCAT] = concat_variant(originals, concat_max_tokens)[0]
    out.update(_rewrite_variants(originals, rewrites)[0])
    return out


def _rewrite_variants(originals: QuerySet, rewrites: Mapping[str, str | Path]) -> tuple[dict[str, QuerySet], dict[str, dict]]:
    """The rewrite variants of :func:`build_variants`, and the id mapping of each file whose ids were
    mapped (``{name: record}``, :meth:`vdr.io.turn_ids.IdMapping.to_json`)."""
    out: dict[str, QuerySet] = {}
    mappings: dict[str, dict] = {}
    for name, path in rewrites.items():
        check_name(name, "rewrite variant")
        variant, mapping = _load_variant(path, originals, name)
        for qid, q in variant.items():
            if not q.text.strip():
                raise InputError("empty or whitespace-only rewrite", path=path, line=variant.lines.get(qid), id=qid)
        out[name] = variant
        if mapping:
            mappings[name] = mapping.to_json()
    return out, mappings


def _load_variant(path: str | Path, originals: QuerySet, name: str) -> tuple[QuerySet, IdMapping | None]:
    """:func:`load_rewrites`, aware of the failures file ``vdr rewrite`` writes beside a variant, and
    of files whose ids use the other turn-id scheme (mapped: :mod:`vdr.io.turn_ids`)."""
    from ..rewrite.runner import failures_file, read_failures

    failed = read_failures(path)
    mapping = None
    try:
        variant = load_rewrites(path, originals, name=name)
    except AlignmentError as e:
        variant, mapping = load_rewrites_mapped(path, originals, name)
        if variant is None:
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
    return variant, mapping


def check_inputs(corpus: Corpus | PassageCorpus, queries: QuerySet, qrels, qrels_path: str | Path) -> dict[str, str]:
    """The checks every evaluation makes before running a backend.

    A judged page that ingest skipped or failed to render (:meth:`vdr.corpus.Corpus.unavailable_reason`)
    stays relevant but unretrievable: it counts in IDCG and recall denominators, so a failure
    lowers scores instead of vanishing; a :class:`~vdr.errors.VdrWarning` lists such pages with
    the reason recorded by ingest.

    With a passage corpus, a judged passage absent from the collection (or empty) is not an error:
    it stays in the qrels and is reported (:func:`judged_problems`, issue 18.7).

    Returns:
        ``{corpus id: ingest reason}`` of the judged pages (passages) that are not in the corpus.

    Raises:
        InputError: the corpus has no pages; a qrels query id has no query text; a qrels corpus id
            belongs to no ingested document (the qrels file is named; page corpora only).
    """
    if len(corpus) == 0:
        raise InputError("the corpus holds no pages", path=Path(corpus.root) / PAGES_FILE)
    check_judged_overlap(qrels, corpus.ids(), qrels_path=qrels_path)  # no qrels id is a page: an id-format mismatch
    unknown_q = [q for q in qrels if q not in queries]
    if unknown_q:
        raise InputError(f"{len(unknown_q)} qrels query id(s) have no query text, e.g. {unknown_q[:10]}", path=qrels_path)
    if corpus.kind == "passage":
        return {d: "not in the passage collection" for d in judged_problems(corpus, qrels, qrels_path, warn=False)["missing"]}
    missing = {d: corpus.unavailable_reason(d) for d in sorted({d for q in qrels for d in qrels[q] if d not in corpus})}
    unknown = [d for d, reason in missing.items() if reason is None]
    if unknown:
        hint = id_normalisation_hint(unknown, corpus.ids())
        raise InputError(
            f"{len(unknown)} corpus id(s) in the qrels are not pages of the corpus, e.g. {unknown[:10]}"
            " (page ids are '<relative pdf path>#<page>', with spaces as %20)" + (f"; {hint}" if hint else ""),
            path=qrels_path,
        )
    if missing:
        import warnings

        from ..errors import VdrWarning

        warnings.warn(
            f"{qrels_path}: {len(missing)} judged page(s) were not ingested and stay relevant but unretrievable"
            " (they count in IDCG and recall): " + "; ".join(f"{d}: {r}" for d, r in list(missing.items())[:10])
            + (" ..." if len(missing) > 10 else ""),
            VdrWarning,
            stacklevel=2,
        )
    return missing


def judged_problems(corpus: PassageCorpus, qrels: Qrels, qrels_path: str | Path, *, warn: bool = True) -> dict:
    """Judged passages (any grade) absent from the collection or empty (issue 18.7).

    They stay in the qrels, so they count in IDCG and recall denominators exactly as trec_eval
    counts them; a :class:`~vdr.errors.VdrWarning` names them (first 10 of each).

    Returns:
        ``{"missing": [ids], "empty": [ids], "judgments_missing": n, "judgments_empty": n}`` (ids
        sorted; the counts are (query, passage) pairs).
    """
    judged = {d for q in qrels for d in qrels[q]}
    missing_set = {d for d in judged if d not in corpus}
    empty_set = corpus.empty_ids()
    missing, empty = sorted(missing_set), sorted(d for d in judged if d in empty_set)
    out = {"missing": missing, "empty": empty,
           "judgments_missing": sum(1 for q in qrels for d in qrels[q] if d in missing_set),
           "judgments_empty": sum(1 for q in qrels for d in qrels[q] if d in empty_set)}
    if warn and (missing or empty):
        import warnings

        from ..errors import VdrWarning

        parts = [f"{len(ids)} judged passage(s) {what}, e.g. {ids[:10]}" for ids, what in
                 ((missing, "are not in the collection (unretrievable)"), (empty, "are empty (no text to match)")) if ids]
        warnings.warn(f"{qrels_path}: " + "; ".join(parts) + " -- they stay in the qrels and count in IDCG and recall, as in"
                      " trec_eval (--drop-missing-judged removes them)", VdrWarning, stacklevel=3)
    return out


def drop_judged(qrels: Qrels, ids: set[str]) -> tuple[Qrels, dict]:
    """``qrels`` without the judgments of ``ids`` (the labelled, non-default ``--drop-missing-judged``);
    a query left with no judgment leaves the query set.

    Returns:
        ``(new qrels, {"judgments_dropped": n, "queries_dropped": [ids]})``.
    """
    kept: dict[str, dict[str, int]] = {}
    n = 0
    for q in qrels:
        row = {d: g for d, g in qrels[q].items() if d not in ids}
        n += len(qrels[q]) - len(row)
        if row:
            kept[q] = row
    return Qrels.from_checked(kept, name=qrels.name), {"judgments_dropped": n, "queries_dropped": [q for q in qrels if q not in kept]}


def load_inputs(corpus_dir: str | Path | None, *, options: InputSettings | None = None, vidore_dir: Path | None = None,
                progress: bool = False, **keywords) -> Inputs:
    """Read and check the corpus, queries, qrels and rewrite variants (a ViDoRe dataset is first
    ingested into ``vidore_dir`` -- on rank 0 only under torchrun).

    Args:
        corpus_dir: the corpus folder (``None`` with ``vidore``).
        options: the :class:`InputSettings` (queries, qrels, rewrites, vidore, concat, ...);
            ``keywords`` override its fields (``load_inputs(dir, queries=..., qrels=...)``).
        vidore_dir: where a ViDoRe dataset is ingested.
        progress: show progress bars.

    Raises:
        InputError: both or neither of a corpus and a ViDoRe dataset; missing or malformed files
            (file, line and id named); the checks of :func:`check_inputs` and :func:`build_variants`.
        TypeError: a keyword that is no field of :class:`InputSettings`.

    With a passage corpus, judged passages missing from the collection or empty are reported
    (``Inputs.judged``, a warning) and kept; ``drop_missing_judged=True`` (labelled, non-default)
    removes their judgments instead, and queries left without judgments.
    """
    o = dataclasses.replace(options or InputSettings(), **keywords)
    queries, qrels, rewrites, concat, vidore = o.queries, o.qrels, dict(o.rewrites or {}), o.concat, o.vidore
    vidore_revision, vidore_language = o.vidore_revision, o.vidore_language
    drop_missing_judged, concat_max_tokens = o.drop_missing_judged, o.concat_max_tokens
    from .. import distributed as D

    vidore_info = None
    if vidore is not None:
        if corpus_dir is not None:
            raise InputError("give either a corpus folder or --vidore, not both")
        from ..ingest import ingest_vidore

        corpus_dir = vidore_dir
        vidore_info = D.run_on_main(ingest_vidore, vidore, corpus_dir, revision=vidore_revision, language=vidore_language,
                                    progress=progress)
    if corpus_dir is None:
        raise InputError("no corpus: give CORPUS_DIR or --vidore DATASET")
    corpus_dir = Path(corpus_dir)
    corpus = load_corpus(corpus_dir)
    queries_path = _default_file(queries, corpus_dir, "queries.jsonl", "--queries")
    qrels_path = _default_file(qrels, corpus_dir, "qrels.tsv", "--qrels")
    originals = load_queries(queries_path)
    loaded = load_qrels(qrels_path)
    qrels_obj, qrels_mapping = remap_qrels(loaded, originals.queries, path=qrels_path)
    qrels_obj._comments = loaded.comment_lines  # counted in the metrics' policy (issue 34.3)
    if qrels_mapping:
        mapping_note(qrels_mapping)
    id_join = join_queries_qrels(originals, qrels_obj, qrels_path, allow_id_mismatch=o.allow_id_mismatch)
    check_inputs(corpus, originals, qrels_obj, qrels_path)
    qrels_obj, judged = _judged_passages(corpus, qrels_obj, qrels_path, drop_missing_judged)
    variants = build_variants(originals, {}, concat=concat, concat_max_tokens=concat_max_tokens)
    plain, per_files = split_backend_rewrites(dict(rewrites))
    sampled = {n: p for n, p in plain.items() if is_samples_file(p)}  # N samples per query (issue 37.2)
    rewritten, rewrite_mappings = _rewrite_variants(originals, {n: p for n, p in plain.items() if n not in sampled})
    variants.update(rewritten)
    concat_record = concat_variant(originals, concat_max_tokens)[1] if CONCAT in variants else {}
    same = same_text_variants(variants)
    variants = {n: qs for n, qs in variants.items() if n not in same}
    variants, samples = _with_samples(variants, originals, sampled, list(plain))
    per_backend, per_mappings = _per_backend_variants(originals, per_files)
    rewrite_mappings.update(per_mappings)
    for name, by_backend in per_backend.items():  # never collapsed into another variant: their texts differ per backend
        if name in variants or name in samples:
            raise InputError(f"--rewrites {name}@...: the name {name!r} is taken by another variant")
        variants[name] = by_backend.get("*", next(iter(by_backend.values())))
    id_mapping = {**({"qrels": qrels_mapping.to_json()} if qrels_mapping else {}), **({"rewrites": rewrite_mappings} if rewrite_mappings else {})}
    return Inputs(corpus, corpus_dir, queries_path, qrels_path, qrels_obj, variants, vidore_info, judged, concat_record, same, id_mapping,
                  {"queries_qrels": id_join}, per_backend, {n: {b: str(p) for b, p in f.items()} for n, f in per_files.items()},
                  samples=samples)


def _with_samples(variants: dict[str, QuerySet], originals: QuerySet, files: Mapping[str, str | Path],
                  order: list[str]) -> tuple[dict[str, QuerySet], dict]:
    """``variants`` with the members of the N-sample variants of ``files`` (:mod:`vdr.experiment.samples`)
    where their names stand in ``order`` (the ``rewrites`` order), and their records. Members are never
    collapsed by :func:`same_text_variants` (identical samples are N samples).

    Raises:
        InputError: see :func:`vdr.experiment.samples.load_sample_variants`; a bad name.
    """
    from .samples import load_sample_variants

    if not files:
        return variants, {}
    for name in files:
        check_name(name, "rewrite variant")
    members, samples = load_sample_variants(originals, files, taken=list(variants))
    out = {n: qs for n, qs in variants.items() if n not in order}
    for name in order:
        if name in samples:
            out.update({m: members[m] for m in samples[name].members})
        elif name in variants:
            out[name] = variants[name]
    return out, samples


def _judged_passages(corpus, qrels_obj: Qrels, qrels_path: Path, drop_missing_judged: bool) -> tuple[Qrels, dict]:
    """Passage corpora: the judged passages missing from the collection or empty (reported, or
    dropped with ``drop_missing_judged``); ``(qrels, record for config.judged_passages)``.

    Raises:
        InputError: ``drop_missing_judged`` on a page corpus, or leaving no judged query.
    """
    judged: dict = {}
    if corpus.kind == "passage":
        judged = judged_problems(corpus, qrels_obj, qrels_path, warn=not drop_missing_judged)
        judged = {"policy": "dropped (--drop-missing-judged)" if drop_missing_judged else "kept in denominators (as trec_eval)",
                  "missing_count": len(judged["missing"]), "missing": judged["missing"][:20], "empty_count": len(judged["empty"]),
                  "empty": judged["empty"][:20], "judgments_missing": judged["judgments_missing"],
                  "judgments_empty": judged["judgments_empty"], "_ids": set(judged["missing"]) | set(judged["empty"])}
        if drop_missing_judged:
            qrels_obj, dropped = drop_judged(qrels_obj, judged["_ids"])
            if not len(qrels_obj):
                raise InputError("--drop-missing-judged left no judged query", path=qrels_path)
            judged.update(dropped)
            if dropped["judgments_dropped"]:
                import warnings

                from ..errors import VdrWarning

                warnings.warn(f"{qrels_path}: --drop-missing-judged removed {dropped['judgments_dropped']} judgment(s) of"
                              f" {judged['missing_count']} missing and {judged['empty_count']} empty passage(s) and"
                              f" {len(dropped['queries_dropped'])} query(ies) left without judgments (not trec_eval's"
                              " denominators)", VdrWarning, stacklevel=3)
        judged.pop("_ids")
    elif drop_missing_judged:
        raise InputError("--drop-missing-judged applies to passage corpora only (page corpora keep failed pages as unretrievable)")
    return qrels_obj, judged


def _default_file(given, corpus_dir: Path, name: str, flag: str) -> Path:
    """The file given, or ``corpus_dir/name`` when it exists (issue 34.13).

    Raises:
        InputError: no file given and none in the corpus folder: names the option and where vdr looked.
    """
    if given is not None:
        return Path(given)
    path = corpus_dir / name
    if not path.exists():
        raise InputError(f"{flag} is missing: give {flag} FILE (vdr looked for {name} in the corpus folder {corpus_dir}"
                         " and found none)")
    return path


def join_queries_qrels(queries: QuerySet, qrels: Qrels, qrels_path: str | Path, *, allow_id_mismatch: bool = False) -> dict:
    """How the query ids of the queries file and of the qrels join (:mod:`vdr.io.idjoin`):
    qrels ids without a query text that match a query id only after normalisation stop the
    evaluation (unless ``allow_id_mismatch``); queries without judgments are warned about (they
    are searched but never averaged).

    Returns:
        the record for ``config.id_mapping.id_join.queries_qrels``.

    Raises:
        IdMismatchError: likely pairs (named), unless ``allow_id_mismatch``.
    """
    from ..io.idjoin import check_id_join, join_ids

    j = join_ids(queries.ids(), (q for q in qrels if len(qrels[q])), what="query ids", left="queries", right="qrels")
    return check_id_join(j, allow_id_mismatch=allow_id_mismatch, path=qrels_path, stacklevel=4)
