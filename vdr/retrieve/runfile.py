"""Run-file backend: a run computed elsewhere (a TREC or pytrec_eval-JSON file), evaluated like any backend.

One file serves every query variant (a system that does not see the rewrites), or one file per
variant (``{"original": a.trec, "keywords": b.trec}``). :meth:`RunFileBackend.search` returns the
queries of the variant asked for, each cut to ``depth`` pages in trec_eval order; a query of the
variant that the file does not hold gets an empty ranking (counted, listed, and scored 0 by the
metrics), and run queries outside the variant are ignored (counted).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ..io.digest import file_sha256
from ..io.turn_ids import mapping_note, remap_run
from ..errors import InputError
from ..types import QuerySet, Run
from ._common import check_depth
from .options import RunOptions, check_options
from .base import BuildContext, new_report

__all__ = ["RunFileBackend", "build"]


class RunFileBackend:
    """A user's run file as a :class:`~vdr.retrieve.base.Backend`.

    Args:
        name: the backend's name in results (letters, digits, ``_ . -``: it names files).
        allow_id_mismatch: search query ids of the file that match the query set's only after
            normalisation (``q1`` / ``q01``; :mod:`vdr.io.idjoin`) as written; default ``False``:
            :meth:`search` raises naming the pairs.
        path: a TREC (``qid Q0 docid rank score tag``) or JSON (``{qid: {docid: score}}``) run, or
            ``{variant: path}`` with one run per query variant.

    Attributes:
        config: ``{"backend": "run", "files": {variant or "*": absolute path}, "sha256": {...}}``.
        report: ``page_forward_passes`` 0; ``index``: per file the number of queries and scored
            pages and the corpus ids not in the corpus (count, first 10); ``searches``: per variant
            ``{"num_queries", "num_queries_missing" (count), "queries_missing" (first 20),
            "num_run_queries_ignored", "depth", "id_join"}`` (the join of the file's query ids with
            the variant's, :func:`vdr.io.idjoin.check_id_join`), and ``id_mapping`` when the file's query ids use the
            other turn-id scheme and were mapped onto the variant's (:mod:`vdr.io.turn_ids`).

    Raises:
        InputError: a malformed or missing file (file, line and id named; raised by :meth:`index`).
    """

    def __init__(self, name: str, path: str | Path | Mapping[str, str | Path], *, allow_id_mismatch: bool = False) -> None:
        self.name = name
        self.allow_id_mismatch = bool(allow_id_mismatch)
        files = {"*": path} if isinstance(path, (str, Path)) else dict(path)
        if not files:
            raise InputError(f"run backend {name!r}: no run file given")
        self._files = {v: Path(p) for v, p in files.items()}
        self._runs: dict[str, Run] | None = None
        self._noted: set[str] = set()
        self.report: dict = new_report()
        self.config: dict = {"backend": "run", "files": {v: str(p.resolve()) for v, p in self._files.items()}, "sha256": {}}

    def index(self, corpus) -> None:
        """Read the run file(s); count corpus ids that are not pages of ``corpus`` (they stay in the
        run, as unjudged pages do).

        Raises:
            InputError: a missing or malformed run file.
        """
        from ..io.formats import load_run

        self._runs = {v: load_run(p) for v, p in self._files.items()}
        self.config["sha256"] = {v: file_sha256(p) for v, p in self._files.items()}
        info = {}
        for v, run in self._runs.items():
            unknown = sorted({d for q in run for d in run[q] if d not in corpus}) if corpus is not None else []
            info[v] = {"num_queries": len(run), "num_scored_pages": run.num_entries(), "num_unknown_pages": len(unknown),
                       "unknown_pages": unknown[:10]}
        self.report["index"] = info

    def search(self, queries: QuerySet, depth: int) -> Run:
        """The run of ``queries``' variant restricted to its query ids, each cut to ``depth`` pages.

        Raises:
            InputError: :meth:`index` was not called; no run file for this variant; bad ``depth``.
            IdMismatchError: query ids of the file that match the variant's only after normalisation
                (unless ``allow_id_mismatch``).
        """
        if self._runs is None:
            raise InputError(f"run backend {self.name!r}: call index(corpus) first")
        depth = check_depth(depth)
        variant = queries.name if isinstance(queries, QuerySet) else "original"
        key = variant if variant in self._runs else "*"
        run = self._runs.get(key)
        if run is None:
            raise InputError(f"run backend {self.name!r} has no run file for variant {variant!r}; it has {sorted(self._runs)}")
        run, mapping = remap_run(run, queries, what=f"run {self.name!r}", path=self._files[key])  # ids of the other turn-id scheme
        if mapping and key not in self._noted:
            self._noted.add(key)
            mapping_note(mapping)
        qids = list(queries)
        join = _join(run, qids, self, key)
        missing = [q for q in qids if q not in run or not len(run[q])]
        out = {q: dict(run.ranked(q)[:depth]) if q in run else {} for q in qids}
        self.report["searches"][variant] = {
            "num_queries": len(qids), "num_queries_missing": len(missing), "queries_missing": missing[:20],
            "num_run_queries_ignored": sum(1 for q in run if q not in queries), "depth": depth, "id_join": join,
            **({"id_mapping": mapping.to_json()} if mapping else {}),
        }
        res = Run.from_checked(out, self.name)
        res._comments = self._runs[key].comment_lines  # counted in the metrics' policy (issue 34.3)
        return res




def _join(run: Run, qids: list[str], backend: RunFileBackend, key: str) -> dict:
    """:func:`vdr.io.idjoin.check_id_join` of the run file's query ids (with a ranking) and the
    variant's query ids: pairs stop the evaluation unless ``backend.allow_id_mismatch``; the other
    non-joining ids are warned about. Returns the record."""
    from ..io.idjoin import check_id_join, join_ids

    j = join_ids((q for q in run if len(run[q])), qids, what="query ids", left=f"run file of {backend.name!r}", right="queries")
    return check_id_join(j, allow_id_mismatch=backend.allow_id_mismatch, path=backend._files[key], stacklevel=5)


def build(ctx: BuildContext) -> RunFileBackend:
    """Registry factory: option ``path`` (a run file, or ``{variant: run file}``;
    :class:`~vdr.retrieve.options.RunOptions`).

    Raises:
        InputError: no ``path`` option.
    """
    o = check_options(RunOptions, ctx.options, backend=ctx.name)
    if o.path is None:
        raise InputError(f"run backend {ctx.name!r} needs the option path (a run file or {{variant: run file}})")
    return RunFileBackend(ctx.name, o.path, allow_id_mismatch=o.allow_id_mismatch)


build.Options = RunOptions
