"""Readers and writers for qrels, runs and query sets in BEIR, TREC and pytrec_eval-JSON formats.

Formats (``format="auto"`` picks one from the file name and its first line):

* **TREC qrels**: ``query-id iteration corpus-id grade`` (4 whitespace-separated fields; the
  iteration column is ignored; ids cannot contain whitespace).
* **BEIR qrels**: tab-separated with the header ``query-id<TAB>corpus-id<TAB>score``; ids may
  contain spaces (not tabs).
* **TREC run**: ``query-id Q0 corpus-id rank score tag`` (6 fields). The rank column is ignored:
  scores decide the ranking (trec_eval does the same). Text after the tag is ignored with a
  warning, as trec_eval ignores it, provided the rank column holds an integer.
* **JSON** (``.json``): pytrec_eval's ``{"query-id": {"corpus-id": value}}``.
* **BEIR queries** (``.jsonl``): one object per line with ``_id`` and ``text`` and optionally
  ``history``: the earlier conversation turns, oldest first, as a list of strings (questions) or
  of turns ``{"question": ..., "answer": ...}``. Rewrite files may use ConvSearch-R1's spelling
  ``{"qid": ..., "rewrite": ...}`` instead of ``_id``/``text``.
* **TSV topics** (``.tsv``; pyserini / MS MARCO): ``qid<TAB>text`` per line.
* **Query fields** (``--group-by``): any other field of a BEIR queries line (``type``,
  ``language``, the scalars of BEIR's ``metadata`` object) is an attribute of the query
  (:func:`load_query_fields`); a TSV ``query-id<TAB>field<TAB>value`` gives them for any query set
  (:func:`load_query_groups`).

Every problem is reported as :class:`~vdr.errors.InputError` naming the file, the line and the id.
"""

from __future__ import annotations

import json
import logging
import math
import re
import unicodedata
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

from ..errors import AlignmentError, InputError, VdrWarning
from ..progress import counted
from ..types import Qrels, Query, QuerySet, Run, group_value, to_id
from ._lines import json_object, read_lines
from .atomic import atomic_write

__all__ = [
    "load_qrels",
    "load_run",
    "load_queries",
    "load_rewrites",
    "load_query_fields",
    "load_query_groups",
    "read_query_fields",
    "save_qrels",
    "save_run",
    "save_queries",
]

Format = Literal["auto", "trec", "beir", "json"]
_BEIR_HEADER = ("query-id", "corpus-id", "score")
_INT_RE = re.compile(r"[+-]?[0-9]+")
# what C's strtod reads as trec_eval does, ASCII only (Python's float() also takes '1_000' and non-ASCII digits)
_FLOAT_RE = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[+-]?(?:nan|inf|infinity)", re.IGNORECASE)


def _first_line(path: Path) -> str:
    for _, line in read_lines(path):
        if line.strip():
            return line
    return ""


def _qrels_format(path: Path, fmt: str) -> str:
    if fmt != "auto":
        if fmt not in ("trec", "beir", "json"):
            raise InputError(f"unknown qrels format {fmt!r}; use trec, beir, json or auto", path=path)
        return fmt
    if path.suffix.lower() == ".json":
        return "json"
    first = _first_line(path)
    if tuple(f.strip().lower() for f in first.split("\t")) == _BEIR_HEADER or path.suffix.lower() == ".tsv":
        return "beir"
    return "trec"


#: the grades vdr reads: 64-bit signed integers (issue 34.4); every gain is exact or scaled exactly over this range
GRADE_MIN, GRADE_MAX = -(2**63), 2**63 - 1


def grade_range_message(g: int, qid: str, did: str) -> str:
    """The one line refusing grade ``g`` of ``(qid, did)`` outside ``GRADE_MIN..GRADE_MAX``."""
    shown = str(g) if len(str(g)) <= 30 else f"{str(g)[:12]}...({len(str(g))} digits)"
    return (f"grade {shown} of query {qid!r}, corpus id {did!r} is outside the 64-bit range vdr reads grades in"
            f" ({GRADE_MIN}..{GRADE_MAX})")


def _parse_grade(text: str, path: Path, line: int, qid: str, did: str) -> int:
    t = text.strip()
    if _INT_RE.fullmatch(t):
        g = int(t)
        if not GRADE_MIN <= g <= GRADE_MAX:
            raise InputError(grade_range_message(g, qid, did), path=path, line=line, id=did)
        return g
    raise InputError(f"grade {text!r} of query {qid!r}, corpus id {did!r} is not an integer", path=path, line=line)


def _parse_score(text: str, path: Path, line: int, qid: str, did: str) -> float:
    try:
        if not _FLOAT_RE.fullmatch(text):
            raise ValueError(text)
        s = float(text)
    except ValueError:
        raise InputError(f"score {text!r} of query {qid!r}, corpus id {did!r} is not a number", path=path, line=line) from None
    if not math.isfinite(s):
        raise InputError(f"score {text!r} of query {qid!r}, corpus id {did!r} is not finite (NaN/inf are not allowed)", path=path, line=line)
    return s


def load_qrels(path: str | Path, format: Format = "auto") -> Qrels:
    """Read relevance judgments from a TREC, BEIR-TSV or JSON file.

    Args:
        path: the qrels file.
        format: ``"trec"``, ``"beir"``, ``"json"`` or ``"auto"`` (``.json`` -> JSON; a BEIR header
            line or a ``.tsv`` name -> BEIR; otherwise TREC).

    Returns:
        :class:`~vdr.types.Qrels` with string ids and ``int`` grades.

    Raises:
        InputError: missing file, bad encoding, a malformed line, a non-integer grade, or the same
            (query id, corpus id) pair twice (both lines are named).
    """
    path = Path(path)
    fmt = _qrels_format(path, format)
    if fmt == "json":
        return _load_json_table(path, "qrels", Qrels, path.name)
    fast = _plain_trec_qrels(path) if fmt == "trec" else None
    if fast is not None:
        return fast
    out: dict[str, dict[str, int]] = {}
    seen_at: dict[tuple[str, str], int] = {}
    header_done = fmt != "beir"
    comments: list[int] = []
    for no, line in read_lines(path):
        if not line.strip():
            continue
        if fmt == "trec" and line.startswith("#"):  # trec_eval 10: a line whose first character is '#' is a comment
            comments.append(no)
            continue
        if fmt == "beir":
            fields = line.split("\t")
            if not header_done:
                header_done = True
                if tuple(f.strip().lower() for f in fields) == _BEIR_HEADER:
                    continue
                raise InputError(
                    "BEIR qrels must start with the header 'query-id<TAB>corpus-id<TAB>score', got " + repr(line),
                    path=path,
                    line=no,
                )
            if len(fields) != 3:
                raise InputError(
                    f"expected 3 tab-separated fields 'query-id corpus-id score', got {len(fields)}: {line!r}", path=path, line=no
                )
            qid, did, grade = fields[0].strip(), fields[1].strip(), fields[2]
        else:
            fields = line.split()
            if len(fields) != 4:
                raise _trec_fields_error("qrels", fields, line, path, no)
            qid, did, grade = fields[0], fields[2], fields[3]
        if not qid or not did:
            raise InputError(f"empty query id or corpus id: {line!r}", path=path, line=no)
        g = _parse_grade(grade, path, no, qid, did)
        key = (qid, did)
        if key in seen_at:
            raise InputError(
                f"duplicate judgment of query {qid!r}, corpus id {did!r} (first on line {seen_at[key]})", path=path, line=no, id=did
            )
        seen_at[key] = no
        out.setdefault(qid, {})[did] = g
    if fmt == "beir" and not header_done:
        raise InputError("empty BEIR qrels file (no header)", path=path)
    _warn_comments(path, comments)
    q = Qrels.from_checked(out, name=path.name)
    q._comments = tuple(comments)
    return q


def _plain_trec_run(path: Path) -> Run | None:
    """The run of a plain TREC run file read in bulk, or ``None`` when any line needs the line-by-line reader.

    Plain (:func:`_plain_tokens`): ASCII, ``\\n`` line ends only, no line starting with ``#``, every
    non-blank line exactly 6 fields; and every score a finite number in the reader's syntax, no (query,
    corpus id) pair twice. Such a file gives exactly what the line-by-line reader gives (same ids, scores, tag
    of the last line), without its per-line checks, which find nothing to report in it; every other file --
    and every error, warning and message -- goes to that reader. What ``vdr metrics`` over many runs spends
    most of its time on.
    """
    tokens = _plain_tokens(path, 6)
    if tokens is None:
        return None
    texts = tokens[4::6]
    if "_" in "".join(texts):  # float() reads 1_000; the reader's syntax does not
        return None
    try:  # on ASCII fields without "_", float() accepts exactly the reader's syntax (_FLOAT_RE)
        scores = list(map(float, texts))
    except ValueError:
        return None
    if not all(map(math.isfinite, scores)):
        return None
    out = _group(tokens[0::6], tokens[2::6], scores)
    return None if out is None else Run.from_checked(out, name=tokens[-1])


def _plain_trec_qrels(path: Path) -> Qrels | None:
    """The qrels of a plain TREC qrels file read in bulk (as :func:`_plain_trec_run`: 4 fields a line, integer
    grades, no pair twice), or ``None`` when any line needs the line-by-line reader."""
    tokens = _plain_tokens(path, 4)
    if tokens is None:
        return None
    texts = tokens[3::4]
    if not all(map(_INT_RE.fullmatch, texts)):
        return None
    grades = list(map(int, texts))
    if any(not -(2**63) <= g < 2**63 for g in grades):
        return None  # the line-by-line reader names the file, line and ids of a grade outside int64
    out = _group(tokens[0::4], tokens[2::4], grades)
    return None if out is None else Qrels.from_checked(out, name=path.name)


def _plain_tokens(path: Path, width: int) -> list[str] | None:
    """The whitespace-separated fields of ``path`` when it is plain -- ASCII (an optional UTF-8 BOM skipped),
    ``\\n`` line ends only, no line starting with ``#``, every non-blank line exactly ``width`` fields
    separated by spaces and tabs, at least one line -- else ``None``."""
    try:
        data = path.read_bytes()
    except OSError:
        return None  # the line-by-line reader names the problem
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    if not data.isascii() or data.startswith(b"#") or b"\n#" in data or not _fields_per_line(data, width):
        return None
    return data.decode("ascii").split() or None


def _fields_per_line(data: bytes, width: int) -> bool:
    """Whether every line of ASCII ``data`` is blank or holds exactly ``width`` fields separated by spaces and
    tabs, with ``\\n`` line ends only (any other control byte, ``\\r`` included: ``False``)."""
    import numpy as np

    if not data:
        return False
    b = np.frombuffer(data, dtype=np.uint8)
    if np.any((b < 32) & (b != 9) & (b != 10)) or np.any(b == 127):
        return False
    ws = (b == 32) | (b == 9) | (b == 10)
    start = ~ws
    start[1:] &= ws[:-1]  # the first byte of each field
    line = np.searchsorted(np.flatnonzero(b == 10), np.flatnonzero(start))  # the line of each field
    counts = np.bincount(line)
    return bool(np.all((counts == width) | (counts == 0)))


def _block_starts(qids: list[str]) -> list[int]:
    """The positions where a new query id starts in ``qids``, then ``len(qids)``: ``[0, ..., len(qids)]``.
    Found with C-level list scans (``list.index``, ``list.count``) when each query's lines are adjacent (the
    usual file); otherwise with a Python loop over the ids."""
    cuts, at = [], 0
    for q in dict.fromkeys(qids):
        at = qids.index(q, at)
        cuts.append(at)
    cuts.append(len(qids))
    if all(qids[a:b].count(qids[a]) == b - a for a, b in zip(cuts[:-1], cuts[1:])):
        return cuts
    return [0, *[i for i, (a, b) in enumerate(zip(qids, qids[1:]), 1) if a != b], len(qids)]


def _group(qids: list[str], dids: list[str], values: list) -> dict[str, dict[str, object]] | None:
    """``{qid: {did: value}}`` from three parallel columns (a query's lines need not be adjacent), or ``None``
    when a (qid, did) pair occurs twice (the line-by-line readers report it)."""
    cuts = _block_starts(qids)
    out: dict[str, dict[str, object]] = {}
    for a, b in zip(cuts[:-1], cuts[1:]):
        row = dict(zip(dids[a:b], values[a:b]))
        if len(row) != b - a:
            return None
        old = out.get(qids[a])
        if old is None:
            out[qids[a]] = row
        elif old.keys() & row.keys():
            return None
        else:
            old.update(row)
    return out


def _check_run_fields(fields: list[str], line: str, path: Path, no: int) -> None:
    """Raise :class:`InputError` (file, line) unless ``fields`` form a TREC run line (6+ fields, int rank)."""
    if len(fields) < 6 or (len(fields) > 6 and not fields[3].lstrip("+-").isdigit()):
        raise _trec_fields_error("run", fields, line, path, no)


#: TREC line layouts: kind -> (field count, field names, hint when the count is off for another reason).
_TREC_LAYOUTS = {
    "qrels": (4, "query-id iteration corpus-id grade", "TREC ids cannot contain whitespace; use BEIR TSV qrels for such ids"),
    "run": (6, "query-id Q0 corpus-id rank score tag", "TREC ids cannot contain whitespace"),
}


def _trec_fields_error(kind: str, fields: list[str], line: str, path: Path, no: int) -> InputError:
    """The :class:`InputError` (file, line) for a TREC ``kind`` line ("qrels" or "run") with the wrong field count.

    The hint names swapped qrels and run arguments when the count is the other kind's.
    """
    want, layout, hint = _TREC_LAYOUTS[kind]
    other = "run" if kind == "qrels" else "qrels"
    if len(fields) == _TREC_LAYOUTS[other][0]:
        hint = f"this looks like a TREC {other} line: are the qrels and run arguments swapped?"
    return InputError(
        f"expected {want} whitespace-separated fields '{layout}', got {len(fields)}: {line!r} ({hint})", path=path, line=no
    )


def load_run(path: str | Path, format: Format = "auto") -> Run:
    """Read a run from a TREC run file (``qid Q0 docid rank score tag``) or a JSON file.

    The rank column is ignored; scores decide the ranking. A corpus id listed twice for the same
    query keeps its highest score, and a :class:`~vdr.errors.VdrWarning` states how many duplicates
    were dropped.

    Args:
        path: the run file.
        format: ``"trec"``, ``"json"`` or ``"auto"`` (``.json`` -> JSON, otherwise TREC).

    Returns:
        :class:`~vdr.types.Run` with string ids and ``float`` scores; ``run.name`` is the tag of
        the last line (TREC; as trec_eval's ``runid``) or the file name (JSON).

    Raises:
        InputError: missing file, bad encoding, a line without 6 fields, a score that is not a
            finite number (NaN/inf), naming file, line and ids.
    """
    path = Path(path)
    fmt = format
    if fmt == "auto":
        fmt = "json" if path.suffix.lower() == ".json" else "trec"
    if fmt == "json":
        return _load_json_table(path, "run", Run, path.stem)
    if fmt != "trec":
        raise InputError(f"unknown run format {fmt!r}; use trec, json or auto", path=path)
    fast = _plain_trec_run(path)
    if fast is not None:
        return fast
    out: dict[str, dict[str, float]] = {}
    tag: str | None = None
    dups = 0
    first_dup: tuple[int, str, str] | None = None
    trailing, trailing_first, comments = 0, None, []
    for no, line in read_lines(path):
        if line.startswith("#"):  # trec_eval 10: a line whose first character is '#' is a comment
            comments.append(no)
            continue
        fields = line.split()
        if not fields:
            continue
        _check_run_fields(fields, line, path, no)
        if len(fields) > 6:  # trec_eval ignores text after the tag; so do we, and say so once
            trailing += 1
            if trailing_first is None:
                trailing_first = no
        qid, _, did, _, score, t = fields[:6]
        s = _parse_score(score, path, no, qid, did)
        tag = t  # trec_eval keeps the tag of the LAST line (get_trec_results.c)
        row = out.get(qid)
        if row is None:
            out[qid] = row = {}
        old = row.get(did)
        if old is not None:
            dups += 1
            if first_dup is None:
                first_dup = (no, qid, did)
            if s <= old:
                continue
        row[did] = s
    if dups:
        no, qid, did = first_dup  # type: ignore[misc]
        warnings.warn(
            f"{path}: {dups} duplicate (query id, corpus id) line(s) in the run; kept the highest score of each"
            f" (first at line {no}: query {qid!r}, corpus id {did!r})",
            VdrWarning,
            stacklevel=2,
        )
    if trailing:
        warnings.warn(
            f"{path}: {trailing} line(s) have text after the 6th field (first at line {trailing_first}); ignored, as trec_eval does",
            VdrWarning,
            stacklevel=2,
        )
    _warn_comments(path, comments)
    run = Run.from_checked(out, name=tag)
    run._comments = tuple(comments)
    return run


def _warn_comments(path: Path, lines: list[int]) -> None:
    """Warn (:class:`~vdr.errors.VdrWarning`) about the comment lines a TREC file had, naming their
    numbers (the first 20) and showing none of the data they might hold; trec_eval 10 skips every
    line whose first character is ``#`` (``formats.c``: "Lines starting with '#' are ignored"),
    and so does vdr; a ``#`` later in a line (an id such as ``doc.pdf#3``) is an ordinary
    character. The count is recorded in the metrics' policy (``comment_lines``; issue 34.3)."""
    if lines:
        shown = ", ".join(map(str, lines[:20])) + (f", ... ({len(lines) - 20} more)" if len(lines) > 20 else "")
        msg = (f"{path}: skipped {len(lines)} comment line(s) starting with '#', as trec_eval does (line {shown});"
               " a data line whose query id starts with '#' is dropped too")
        logging.getLogger("vdr").info(msg)
        warnings.warn(msg, VdrWarning, stacklevel=3)


class _DuplicateKey(Exception):
    pass


def _load_json_table(path: Path, what: str, cls: type[Qrels] | type[Run], name: str) -> Qrels | Run:
    """``cls(data, name=name)`` from the JSON file ``path`` (see :func:`_load_json_mapping`); the
    :class:`InputError` of a bad value names the file."""
    data = _load_json_mapping(path, what)
    try:
        return cls(data, name=name)
    except InputError as e:
        raise InputError(str(e), path=path, id=e.id) from None


def _load_json_mapping(path: Path, what: str) -> Mapping:
    """Parse a pytrec_eval-style JSON file; a key repeated inside one object is an error for qrels,
    and keeps the highest score with a warning for runs (as for TREC files)."""
    text = "\n".join(line for _, line in read_lines(path))
    dups: list[str] = []

    def pairs_hook(pairs: list) -> dict:
        out: dict = {}
        for k, v in pairs:
            if k in out:
                if what != "run" or isinstance(v, dict) or isinstance(out[k], dict):
                    raise _DuplicateKey(k)
                dups.append(k)
                if isinstance(v, (int, float)) and isinstance(out[k], (int, float)) and v <= out[k]:
                    continue
            out[k] = v
        return out

    try:
        data = json.loads(text, object_pairs_hook=pairs_hook)
    except json.JSONDecodeError as e:
        raise InputError(f"invalid JSON ({e.msg}, column {e.colno})", path=path, line=e.lineno) from None
    except _DuplicateKey as e:
        raise InputError(f"key {e.args[0]!r} appears twice in one JSON object of the {what}", path=path, id=e.args[0]) from None
    if dups:
        warnings.warn(
            f"{path}: {len(dups)} duplicate corpus id(s) inside a query of the run; kept the highest score of each (first: {dups[0]!r})",
            VdrWarning,
            stacklevel=4,  # the caller of load_run (via _load_json_table)
        )
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise InputError(f"JSON {what} must be an object of objects: {{query-id: {{corpus-id: value}}}}", path=path)
    return data


_TOPICS_HEADERS = ({"qid", "query_id", "query-id", "_id", "id"}, {"text", "query", "title"})


def load_queries(path: str | Path, name: str = "original", format: Literal["auto", "jsonl", "tsv"] = "auto") -> QuerySet:
    """Read a query set: BEIR ``queries.jsonl`` or TSV topics (``qid<TAB>text``).

    * **jsonl** (BEIR): one JSON object per line with ``_id`` and ``text``; an optional ``history``
      field (list of strings, oldest turn first) holds the earlier turns of a conversational query.
    * **tsv** (pyserini / MS MARCO topics, e.g. ``queries.dev.tsv``): ``qid<TAB>text`` per line, no
      quoting (a ``"`` is an ordinary character); an optional header line ``qid<TAB>text`` (or
      ``query-id``/``_id``/``id`` with ``text``/``query``/``title``) is skipped.

    ``format="auto"`` reads ``.tsv``/``.txt``/``.topics`` files, and files whose first non-empty line
    does not start with ``{``, as TSV. Integer ids are converted with ``str(int)``.

    Args:
        path: the queries file.
        name: the variant name recorded in the returned set (``"original"`` by default).
        format: ``"auto"``, ``"jsonl"`` or ``"tsv"``.

    Raises:
        InputError: an empty file (no queries), invalid JSON, a line that is not an object, a
            missing/empty ``_id``, a missing, non-string or empty ``text``, a malformed ``history``,
            a TSV line without a tab, or an id given twice (both lines named).
    """
    path = Path(path)
    if format not in ("auto", "jsonl", "tsv"):
        raise InputError(f"unknown queries format {format!r}; choose auto, jsonl or tsv", path=path)
    if format == "auto":
        first = _first_line(path)
        tsv = path.suffix.lower() in (".tsv", ".txt", ".topics") or (first.strip() != "" and not first.lstrip().startswith("{"))
        format = "tsv" if tsv else "jsonl"
    queries: dict[str, Query] = {}
    lines: dict[str, int] = {}
    replaced: list[str] = []
    parse = _topics_line if format == "tsv" else _jsonl_query_line
    for no, line in read_lines(path):
        if not line.strip():
            continue
        parsed = parse(line, path, no, first=not lines)
        if parsed is None:
            continue
        qid, query = parsed
        if qid in queries:
            raise InputError(f"query id {qid!r} given twice (first on line {lines[qid]})", path=path, line=no, id=qid)
        fixed = _without_lone_surrogates(query)
        if fixed is not query:
            replaced.append(f"line {no} id {qid!r}")
        queries[qid] = fixed
        lines[qid] = no
    if not queries:
        raise InputError(f"no queries: the file is empty (expected {'qid<TAB>text lines' if format == 'tsv' else 'BEIR queries.jsonl lines'})", path=path)
    if replaced:
        warnings.warn(f"{path}: {counted(len(replaced), 'query')} {'holds' if len(replaced) == 1 else 'hold'} lone UTF-16 surrogates (legal in JSON, not encodable as UTF-8), replaced"
                      f" by U+FFFD as vdr serve and the rewards replace them: {', '.join(replaced[:5])}"
                      f"{' ...' if len(replaced) > 5 else ''}", VdrWarning, stacklevel=2)
    return QuerySet(queries, name=name, source=str(path), lines=lines)


#: Keys of a queries.jsonl line that are not query fields (the query itself).
_QUERY_KEYS = frozenset({"_id", "text", "history", "qid", "rewrite"})


def _field_value(value: object, keep: bool, path: Path, no: int, qid: str) -> str | tuple[str, ...] | None:
    """A query field's value as its canonical group (:func:`vdr.types.group_value`: NFC strings,
    numbers by value, a list as the tuple of its elements' groups); ``None`` for no value. A value
    that cannot be a key (an object, a nested list, NaN) is refused when the field is grouped by
    (``keep``), else left out."""
    try:
        return group_value(value)
    except InputError as e:
        if keep:
            raise InputError(f"{e}; it cannot name a group", path=path, line=no, id=qid) from None
        return None


def load_query_fields(path: str | Path, group_by: Sequence[str] = ()) -> dict[str, dict[str, str | tuple[str, ...]]]:
    """The attributes of each query of a BEIR ``queries.jsonl`` (``--group-by FIELD``): every field
    of a line other than ``_id``, ``text`` and ``history`` (``type``, ``language``, ``format``, ...)
    and the scalar entries of a ``metadata`` object (BEIR's place for them; a top-level field of the
    same name wins). Values become canonical group keys (:func:`vdr.types.group_keys`: strings
    NFC-normalised, numbers by value in JSON's integer spelling when integral, ``1`` and ``1.0``
    alike, booleans ``true``/``false``); a list becomes the tuple of its elements' keys (the query
    belongs to each of those groups: ViDoRe V3's ``query_types``); null and empty values are left
    out (the query has no value).

    Args:
        path: a queries file as :func:`load_queries` reads it; TSV topics have no fields (``{}``).
        group_by: the fields grouped by: a value of one of them that cannot be a key is refused.

    Returns:
        ``{query id: {field: value}}`` in file order, for the queries that have at least one field.

    Raises:
        InputError: as :func:`load_queries` (invalid JSON, a missing ``_id``; file and line named);
            a grouped field whose value is an object, a nested list or NaN (file, line, query id).
    """
    path = Path(path)
    first = _first_line(path)
    if path.suffix.lower() in (".tsv", ".txt", ".topics") or (first.strip() and not first.lstrip().startswith("{")):
        return {}
    out: dict[str, dict[str, str | tuple[str, ...]]] = {}
    for no, line in read_lines(path):
        if not line.strip():
            continue
        obj = json_object(line, path, no, "a JSON object with '_id' and 'text'")
        raw = obj.get("_id", obj.get("qid"))
        if raw is None:
            raise InputError("missing '_id'", path=path, line=no)
        qid = to_id(raw, what="query id", path=str(path), line=no)
        meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
        fields = {str(k): v for k, v in meta.items()}
        fields.update((k, v) for k, v in obj.items() if k not in _QUERY_KEYS and k != "metadata")
        kept = {k: x for k, x in ((k, _field_value(v, k in group_by, path, no, qid)) for k, v in fields.items()) if x is not None}
        if kept:
            out[qid] = kept
    return out


_GROUP_HEADER = (("query-id", "qid", "_id", "id", "query_id"), ("field",), ("value", "group"))


def load_query_groups(path: str | Path) -> dict[str, dict[str, str]]:
    """Query attributes from a TSV ``query-id<TAB>field<TAB>value`` (one line per query and field;
    an optional header ``query-id<TAB>field<TAB>value`` is skipped): ``vdr evaluate --groups``.

    Returns:
        ``{query id: {field: value}}`` in file order; values NFC-normalised (:func:`vdr.types.group_keys`).

    Raises:
        InputError: a line without exactly three tab-separated columns, an empty id, field or
            value, the same query and field given twice (both lines named); an empty file.
    """
    path = Path(path)
    out: dict[str, dict[str, str]] = {}
    where: dict[tuple[str, str], int] = {}
    for no, line in read_lines(path):
        if not line.strip():
            continue
        cols = line.split("\t")
        if len(cols) != 3:
            raise InputError(f"expected 'query-id<TAB>field<TAB>value' (3 tab-separated columns), got {len(cols)}", path=path, line=no)
        qid, name, value = (c.strip() for c in cols)
        value = unicodedata.normalize("NFC", value)  # one spelling per group (vdr.types.group_keys)
        if not where and not out and all(c.lower() in h for c, h in zip((qid, name, value), _GROUP_HEADER)):
            continue
        if not qid or not name or not value:
            raise InputError("empty query id, field or value", path=path, line=no, id=qid or None)
        if (qid, name) in where:
            raise InputError(f"field {name!r} of query {qid!r} given twice (first on line {where[qid, name]})", path=path, line=no, id=qid)
        where[qid, name] = no
        out.setdefault(qid, {})[name] = value
    if not out:
        raise InputError("no query fields: the file is empty (expected query-id<TAB>field<TAB>value lines)", path=path)
    return out


def read_query_fields(queries=(), groups: str | Path | None = None, group_by=()) -> dict[str, dict[str, str | tuple[str, ...]]]:
    """The attributes of the queries from every source, for ``--group-by``: the extra fields of
    each query file in ``queries`` (:func:`load_query_fields`; the first file that gives a query a
    field wins: the originals before the rewrites), then the TSV ``groups``
    (:func:`load_query_groups`), whose values win.

    Args:
        queries: query files (paths; ``None`` entries skipped).
        groups: a TSV ``query-id<TAB>field<TAB>value``, or ``None``.
        group_by: fields that must exist: each one has to be given to at least one query.

    Returns:
        ``{query id: {field: value}}``.

    Raises:
        InputError: a malformed file (file and line named); a field of ``group_by`` that no query
            has (the fields found are listed).
    """
    out: dict[str, dict[str, str | tuple[str, ...]]] = {}
    for path in (p for p in queries if p is not None):
        for q, f in load_query_fields(path, tuple(group_by)).items():
            have = out.setdefault(q, {})
            for k, v in f.items():
                have.setdefault(k, v)
    if groups is not None:
        for q, f in load_query_groups(groups).items():
            out.setdefault(q, {}).update(f)
    found = sorted({k for f in out.values() for k in f})
    for name in group_by:
        if name not in found:
            where = ", ".join(str(p) for p in [*(p for p in queries if p is not None), *([groups] if groups is not None else [])])
            head = (f"--group-by {name}: no query in {where} has a field {name!r}; " if where else
                    f"--group-by {name}: no queries file or --groups file was given to read the field {name!r} from; ")
            raise InputError(head
                             + (f"fields found: {', '.join(found)}" if found else
                                "the queries have no fields (add one to each queries.jsonl line, e.g. \"type\": \"visual\", or give"
                                " --groups FILE.tsv with query-id<TAB>field<TAB>value lines)"))
    return out


def _without_lone_surrogates(query: Query) -> Query:
    """``query`` with lone surrogates replaced in its text, history and answers
    (:func:`vdr.text.replace_lone_surrogates`); the same object when it holds none."""
    from ..text import replace_lone_surrogates

    parts = [query.text, *query.history, *query.answers]
    if all(p.isascii() for p in parts):
        return query
    fixed = [replace_lone_surrogates(p) for p in parts]
    if not any(n for _, n in fixed):
        return query
    texts = [t for t, _ in fixed]
    h = len(query.history)
    return Query(texts[0], tuple(texts[1:1 + h]), tuple(texts[1 + h:]))


def _check_query_text(text: object, path: Path, no: int, qid: str) -> str:
    if not isinstance(text, str):
        raise InputError(f"'text' must be a string, got {type(text).__name__}", path=path, line=no, id=qid)
    if not text.strip():
        raise InputError("empty query text", path=path, line=no, id=qid)
    return text


def _jsonl_query_line(line: str, path: Path, no: int, first: bool) -> tuple[str, Query]:
    """One BEIR ``queries.jsonl`` line -> ``(query id, Query)``."""
    obj = json_object(line, path, no, "a JSON object with '_id' and 'text'")
    if "_id" not in obj and "qid" in obj and "rewrite" in obj:  # ConvSearch-R1 rewrite files: {"qid", "rewrite"}
        obj = {"_id": obj["qid"], "text": obj["rewrite"]}
    if "_id" not in obj:
        raise InputError("missing '_id' (or the ConvSearch-R1 pair 'qid' + 'rewrite')", path=path, line=no)
    qid = to_id(obj["_id"], what="query id", path=str(path), line=no)
    if "text" not in obj:
        raise InputError("missing 'text'", path=path, line=no, id=qid)
    text = _check_query_text(obj["text"], path, no, qid)
    history, answers = _history(obj.get("history"), path, no, qid)
    return qid, Query(text, history, answers)


def _history(history: object, path: Path, no: int, qid: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``history`` of a queries.jsonl line -> ``(questions, answers)``: a list of strings (questions
    only) or a list of turns ``{"question": str, "answer": str}`` (all turns with answers)."""
    if history is None:
        return (), ()
    if isinstance(history, list) and all(isinstance(h, str) for h in history):
        return tuple(history), ()
    if isinstance(history, list) and all(
        isinstance(h, dict) and isinstance(h.get("question"), str) and isinstance(h.get("answer"), str) for h in history
    ):
        return tuple(h["question"] for h in history), tuple(h["answer"] for h in history)
    raise InputError(
        "'history' must be a list of strings or of turns {\"question\": str, \"answer\": str} (earlier turns, oldest first)",
        path=path, line=no, id=qid,
    )


def _topics_line(line: str, path: Path, no: int, first: bool) -> tuple[str, Query] | None:
    """One TSV topics line ``qid<TAB>text`` -> ``(query id, Query)``; ``None`` for a header line."""
    if "\t" not in line:
        raise InputError("expected 'qid<TAB>text' (no tab found)", path=path, line=no)
    qid, text = line.split("\t", 1)
    qid = qid.strip()
    if first and qid.lower() in _TOPICS_HEADERS[0] and text.strip().lower() in _TOPICS_HEADERS[1]:
        return None
    if not qid:
        raise InputError("empty query id", path=path, line=no)
    return qid, Query(_check_query_text(text.strip(), path, no, qid), ())


def load_rewrites(path: str | Path, originals: QuerySet, name: str) -> QuerySet:
    """Read a rewrite variant of ``originals`` and check that it has exactly the same query ids.

    Args:
        path: the variant's ``queries.jsonl`` (same format as :func:`load_queries`).
        originals: the original queries.
        name: the variant's name (for example ``"gpt-rewrite"``).

    Raises:
        AlignmentError: ids missing from the variant or extra in it; the message lists up to ten
            of each with the file and line where they are defined.
        InputError: as :func:`load_queries`.
    """
    variant = load_queries(path, name=name)
    missing = [q for q in originals.ids() if q not in variant.queries]
    extra = [q for q in variant.ids() if q not in originals.queries]
    if missing or extra:
        parts = []
        if missing:
            shown = ", ".join(f"{q!r} ({originals.where(q)})" for q in missing[:10])
            parts.append(f"{len(missing)} original query id(s) missing from the variant: {shown}{' ...' if len(missing) > 10 else ''}")
        if extra:
            shown = ", ".join(f"{q!r} ({variant.where(q)})" for q in extra[:10])
            parts.append(f"{len(extra)} id(s) not among the originals: {shown}{' ...' if len(extra) > 10 else ''}")
        if missing and extra:  # likely partners (issue 34.1; vdr.io.idjoin)
            from .idjoin import join_ids

            j = join_ids(extra, missing, what="query ids", left="variant", right="originals")
            if j.pairs:
                parts.append(f"{len(j.pairs)} of them match only after normalisation: {j.pairs_text()}")
        raise AlignmentError(f"rewrite variant {name!r} does not match the original queries: " + "; ".join(parts), path=path)
    return variant


def _check_trec_id(x: str, what: str) -> None:
    if not x or any(c.isspace() for c in x):
        raise InputError(f"{what} {x!r} contains whitespace (or is empty) and cannot be written to a TREC file; use BEIR TSV or JSON", id=x)


def save_qrels(qrels: Qrels, path: str | Path, format: Format = "auto") -> None:
    """Write ``qrels`` atomically as TREC, BEIR TSV or JSON (``auto``: by suffix; ``.tsv`` -> BEIR,
    ``.json`` -> JSON, otherwise TREC).

    Raises:
        InputError: an id with whitespace (TREC) or a tab/newline (BEIR) that the format cannot hold.
    """
    path = Path(path)
    fmt = format
    if fmt == "auto":
        fmt = {".json": "json", ".tsv": "beir"}.get(path.suffix.lower(), "trec")
    if fmt == "json":
        with atomic_write(path) as f:
            json.dump(qrels.to_dict(), f, ensure_ascii=False, indent=1)
            f.write("\n")
        return
    lines = []
    if fmt == "beir":
        lines.append("\t".join(_BEIR_HEADER))
    for q in qrels:
        for d, g in qrels[q].items():
            if fmt == "trec":
                _check_trec_id(q, "query id")
                _check_trec_id(d, "corpus id")
                lines.append(f"{q} 0 {d} {g}")
            else:
                for x in (q, d):
                    if any(c in x for c in "\t\r\n"):
                        raise InputError(f"id {x!r} contains a tab or newline and cannot be written to BEIR TSV", id=x)
                lines.append(f"{q}\t{d}\t{g}")
    with atomic_write(path) as f:
        f.write("\n".join(lines) + "\n")


def save_run(run: Run, path: str | Path, format: Format = "auto", tag: str | None = None) -> None:
    """Write ``run`` atomically as a TREC run (ranked, rank 1..n, trec_eval order) or JSON.

    Scores are written with ``repr`` so that reading the file back gives the same float64 values.

    Args:
        tag: the TREC run tag; defaults to ``run.name`` or ``"vdr"``.

    Raises:
        InputError: an id or tag with whitespace (TREC).
    """
    path = Path(path)
    fmt = format
    if fmt == "auto":
        fmt = "json" if path.suffix.lower() == ".json" else "trec"
    if fmt == "json":
        with atomic_write(path) as f:
            json.dump(run.to_dict(), f, ensure_ascii=False, indent=1)
            f.write("\n")
        return
    if tag is None:  # a default tag (from a file name, say) gets its whitespace replaced
        tag = re.sub(r"\s+", "_", run.name) if run.name else "vdr"
    _check_trec_id(tag, "run tag")
    with atomic_write(path) as f:
        for q in run:
            _check_trec_id(q, "query id")
            for rank, (d, s) in enumerate(run.ranked(q), start=1):
                _check_trec_id(d, "corpus id")
                f.write(f"{q} Q0 {d} {rank} {float(s)!r} {tag}\n")


def save_queries(queries: QuerySet, path: str | Path) -> None:
    """Write ``queries`` atomically as BEIR ``queries.jsonl`` (``history`` only when non-empty)."""
    with atomic_write(path) as f:
        for q, v in queries.items():
            obj: dict = {"_id": q, "text": v.text}
            if v.history:
                obj["history"] = [{"question": h, "answer": a} for h, a in v.turns()] if v.answers else list(v.history)
            f.write(json.dumps(obj, ensure_ascii=False) + "\n")
