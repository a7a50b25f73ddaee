"""The data contracts that pass between vdr's stages: :class:`Qrels`, :class:`Run`, :class:`QuerySet`.

Ids are always ``str``: ``"01"`` and ``"1"`` are different ids. Python ``int`` and NumPy integer
scalars (as they come out of ``datasets`` columns) are converted explicitly with ``str(int(x))``;
any other id type (float, bool, bytes, None, ...) is rejected with an :class:`~vdr.errors.InputError`,
because ``str(1.0) == "1.0"`` would silently never match ``"1"``.

The classes are read-only mappings (``qrels["q1"]["p3"] -> 2``) so they can be handed to code that
expects pytrec_eval-style dicts; they are never mutated after construction.
"""

from __future__ import annotations

import math
import numbers
import unicodedata
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from itertools import chain
from types import MappingProxyType

import numpy as np

from .errors import InputError

__all__ = ["Qrels", "Run", "Query", "QuerySet", "to_id", "duplicate_texts", "ORIGINAL", "group_keys", "group_value"]

ORIGINAL = "original"
"""Name of the original queries' variant (the baseline every rewrite variant is compared with)."""


def to_id(value: object, *, what: str = "id", path: str | None = None, line: int | None = None) -> str:
    """Return ``value`` as a string id.

    ``str`` is returned unchanged; ``int`` and NumPy integers become ``str(int(value))``.

    Raises:
        InputError: ``value`` is a bool, float, bytes, None or any other type, or an empty string.
    """
    if isinstance(value, str):
        if value == "":
            raise InputError(f"empty {what}", path=path, line=line)
        return value
    if isinstance(value, (bool, np.bool_)):
        raise InputError(f"{what} must be a string or an integer, got bool {value!r}", path=path, line=line)
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    raise InputError(
        f"{what} must be a string or an integer, got {type(value).__name__} {value!r}"
        " (convert it explicitly: str(1.0) would be '1.0', not '1')",
        path=path,
        line=line,
    )


_SCORE_TYPES = {float, int, np.float64, np.float32, np.float16, np.int64, np.int32}


def _scalar_key(value: object) -> str | None:
    """One scalar query-field value as a canonical group key (:func:`group_keys`); ``None`` for no
    value (null, a blank string). Raises InputError for a value that cannot be a key."""
    if isinstance(value, np.generic):
        value = value.item()
    if value is None:
        return None
    if isinstance(value, str):
        text = unicodedata.normalize("NFC", value)
        return text if text.strip() else None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InputError(f"a group value must be finite, got {value!r}")
        return str(int(value)) if value.is_integer() else repr(value)
    raise InputError(f"a group value must be a string, a number, a boolean or a list of them, got {type(value).__name__} {value!r}")


def group_keys(value: object) -> tuple[str, ...]:
    """The canonical groups (``--group-by``) of one query's field value, in order, without repeats.

    Strings are NFC-normalised (Unicode's canonical composition: ``"e\\u0301"`` and ``"\\u00e9"``
    are one key); numbers are keyed by value in JSON's integer spelling when integral (``1``,
    ``1.0`` -> ``"1"``; ``1.5`` -> ``"1.5"``); booleans ``"true"``/``"false"``; a list puts the
    query in the group of each element (ViDoRe V3's ``query_types: ["multi-hop", "numerical"]``,
    so groups can overlap). Null, blank strings and empty lists are no value: ``()``.

    >>> group_keys("cafe\\u0301") == group_keys("caf\\u00e9"), group_keys(1.0), group_keys(["b", "a", "b"]), group_keys(None)
    (True, ('1',), ('b', 'a'), ())

    Raises:
        InputError: a value that cannot be a key: an object (dict), a list inside a list, NaN or
            infinity, any other type (the caller adds file, line and query id).
    """
    if isinstance(value, (list, tuple)):
        keys = []
        for v in value:
            if isinstance(v, (list, tuple, dict)):
                raise InputError(f"a group value's list must hold strings, numbers or booleans, got {type(v).__name__} {v!r}")
            keys.append(_scalar_key(v))
        return tuple(dict.fromkeys(k for k in keys if k is not None))
    key = _scalar_key(value)
    return () if key is None else (key,)


def group_value(value: object) -> str | tuple[str, ...] | None:
    """A query field's value as stored (:attr:`vdr.results.Results.query_fields`): its one
    canonical key (:func:`group_keys`) as a string, several keys as a tuple, ``None`` for no value.

    >>> group_value(2.0), group_value(["multi-hop", "numerical"]), group_value(["x"]), group_value("")
    ('2', ('multi-hop', 'numerical'), 'x', None)

    Raises:
        InputError: as :func:`group_keys`.
    """
    keys = group_keys(value)
    return None if not keys else keys[0] if len(keys) == 1 else keys


def _all_str_ids(ids: Iterable) -> bool:
    """True when every id is a non-empty ``str`` (checked at C speed: ``str.join`` rejects non-str)."""
    try:
        "".join(ids)
    except TypeError:
        return False
    return "" not in ids


def _to_grade(value: object, qid: str, did: str) -> int:
    if isinstance(value, (bool, np.bool_)):
        raise InputError(f"grade of query {qid!r}, corpus id {did!r} must be an integer, got bool {value!r}")
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, numbers.Real) and math.isfinite(float(value)) and float(value).is_integer():
        return int(value)
    raise InputError(f"grade of query {qid!r}, corpus id {did!r} must be an integer, got {value!r}")


class _IdMapping(Mapping):
    """Read-only ``{str id: read-only {str id: value}}`` mapping shared by Qrels and Run."""

    __slots__ = ("_data", "_name", "_comments")

    @property
    def name(self) -> str | None:
        """Optional label: the run tag, or the file the qrels came from."""
        return self._name

    @property
    def comment_lines(self) -> tuple[int, ...]:
        """The 1-based numbers of the lines of the TREC file this was read from that were skipped
        as comments (first character ``#``, as trec_eval 10); ``()`` for other sources. The metrics
        record their count in the policy (issue 34.3)."""
        return getattr(self, "_comments", ())

    def __getitem__(self, key: str) -> Mapping:
        return MappingProxyType(self._data[key])

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def to_dict(self) -> dict:
        """A deep copy as plain ``dict[str, dict[str, value]]`` (pytrec_eval's format)."""
        return {q: dict(d) for q, d in self._data.items()}

    def __eq__(self, other: object) -> bool:
        if isinstance(other, _IdMapping):
            return type(self) is type(other) and self._data == other._data
        return NotImplemented

    def __hash__(self) -> int:  # mappings with value semantics are unhashable
        raise TypeError(f"unhashable type: {type(self).__name__}")

    def num_entries(self) -> int:
        """Total number of (query id, corpus id) pairs."""
        return sum(len(d) for d in self._data.values())


class Qrels(_IdMapping):
    """Relevance judgments: query id -> corpus id -> integer grade.

    Grades are Python ``int``; negative grades are allowed (trec_eval treats them as judged,
    non-relevant); a grade of 0 is judged non-relevant. A query with at least one line is part of
    the evaluated query set, even when none of its grades is positive.

    Args:
        data: ``{query_id: {corpus_id: grade}}``. Ids may be ``str`` or integers (converted with
            :func:`to_id`); grades must be integers (integral floats such as ``2.0`` are accepted).
        name: optional label (for example the file it came from).

    Raises:
        InputError: an id of the wrong type, or a grade that is not an integer.
    """

    __slots__ = ()

    def __init__(self, data: Mapping[object, Mapping[object, object]], *, name: str | None = None) -> None:
        out: dict[str, dict[str, int]] = {}
        for q, docs in data.items():
            qid = q if type(q) is str and q else to_id(q, what="query id")
            if qid in out:
                raise InputError(f"query id {qid!r} appears twice after conversion to str", id=qid)
            if _all_str_ids(docs) and set(map(type, docs.values())) <= {int}:
                out[qid] = dict(docs)
                continue
            row: dict[str, int] = {}
            for d, g in docs.items():
                did = to_id(d, what="corpus id")
                if did in row:
                    raise InputError(f"corpus id {did!r} appears twice in query {qid!r} after conversion to str", id=did)
                row[did] = g if type(g) is int else _to_grade(g, qid, did)
            out[qid] = row
        self._data = out
        self._name = name

    @classmethod
    def from_checked(cls, data: dict[str, dict[str, int]], name: str | None = None) -> "Qrels":
        """Wrap ``data`` that the caller has already built with the right types, without a check
        and without a copy: the fast constructor of vdr's own readers and stages.

        Not checked (what :class:`Qrels` ``(data)`` checks): that every id is a non-empty ``str``
        and every grade an ``int``; duplicate ids after conversion cannot occur in a ``dict`` of
        ``str`` keys. ``data`` is adopted, not copied: the caller must not change it afterwards.

        Safe when the ids come from text files or other vdr objects (already ``str``) and the
        grades from ``int(...)``. Given other types, the metrics would silently miss the ids
        (``1 != "1"``): use ``Qrels(data)`` for anything a user passes in.

        >>> Qrels.from_checked({"q1": {"p1": 1}}) == Qrels({"q1": {"p1": 1}})
        True
        """
        obj = cls.__new__(cls)
        obj._data = data
        obj._name = name
        return obj

    def __repr__(self) -> str:
        return f"Qrels({len(self)} queries, {self.num_entries()} judgments{', ' + repr(self.name) if self.name else ''})"


class Run(_IdMapping):
    """A ranked retrieval result: query id -> corpus id -> float score (higher is better).

    Ranks are derived from scores only: score descending (float64), ties broken by corpus id
    descending in byte order, exactly as trec_eval sorts (so ``"p9"`` ranks before ``"p10"``).

    Args:
        data: ``{query_id: {corpus_id: score}}``; ids may be ``str`` or integers (see :func:`to_id`),
            scores any real number that is finite.
        name: the run tag (TREC run files' last column), optional.

    Raises:
        InputError: an id of the wrong type, or a score that is not a finite real number
            (NaN and +-inf are rejected, naming the query and corpus id).
    """

    __slots__ = ("_cols",)

    def __init__(self, data: Mapping[object, Mapping[object, object]], *, name: str | None = None) -> None:
        out: dict[str, dict[str, float]] = {}
        for q, docs in data.items():
            qid = q if type(q) is str and q else to_id(q, what="query id")
            if qid in out:
                raise InputError(f"query id {qid!r} appears twice after conversion to str", id=qid)
            if _all_str_ids(docs):
                row = dict(docs)
            else:
                row = {}
                for d, s in docs.items():
                    did = to_id(d, what="corpus id")
                    if did in row:
                        raise InputError(f"corpus id {did!r} appears twice in query {qid!r} after conversion to str", id=did)
                    row[did] = s
            out[qid] = row
        self._data = out
        self._name = name
        self._cols = None
        self.columns()  # validates every score

    @classmethod
    def from_checked(cls, data: dict[str, dict[str, float]], name: str | None = None) -> "Run":
        """Wrap ``data`` that the caller has already built with the right types, without a check
        and without a copy: the fast constructor of vdr's backends and readers (a search over a
        large corpus returns millions of scores).

        Not checked at construction (what :class:`Run` ``(data)`` checks at once): that every id is
        a non-empty ``str`` and every score a finite real number. The scores are still checked,
        lazily, by :meth:`columns`, which every metric calls: a NaN or infinite score raises
        :class:`~vdr.errors.InputError` there, naming the query and corpus id. ``data`` is adopted,
        not copied: the caller must not change it afterwards.

        Safe when the ids come from a corpus, a query set or a run file (already ``str``) and the
        scores from a model or a float parser. Use ``Run(data)`` for anything a user passes in.

        >>> Run.from_checked({"q1": {"p1": 0.5}}, "bm25") == Run({"q1": {"p1": 0.5}}, name="bm25")
        True
        """
        obj = cls.__new__(cls)
        obj._data = data
        obj._name = name
        obj._cols = None
        return obj

    def renamed(self, name: str | None) -> "Run":
        """The same run (the rankings are shared, not copied) under another ``name``, the name that
        warnings and errors about the run use (e.g. ``"lexical/keywords"``)."""
        out = Run.from_checked(self._data, name=name)
        out._comments = self.comment_lines
        return out

    def columns(self) -> tuple[np.ndarray, np.ndarray, dict[str, int]]:
        """All scores as one float64 array in query order, each query's start offset, and each query's
        position: ``(flat (n_entries,), starts (n_queries,), {query_id: position})``, the columnar
        form the metric kernels read. Computed once and cached; the arrays are read-only (shared by
        every caller), ``flat[starts[i] : starts[i] + len(row i)]`` holds query ``i``'s scores in
        the run's insertion order (not ranked).

        >>> flat, starts, pos = Run({"q1": {"a": 1, "b": 2}, "q2": {"c": 0.5}}).columns()
        >>> flat.tolist(), starts.tolist(), pos
        ([1.0, 2.0, 0.5], [0, 2], {'q1': 0, 'q2': 1})

        Raises:
            InputError: a score that is not a finite real number (naming query and corpus id).
        """
        if self._cols is not None:
            return self._cols
        rows = self._data.values()
        lens = np.fromiter(map(len, rows), dtype=np.int64, count=len(self._data))
        total = int(lens.sum())
        flat = None
        if set(map(type, chain.from_iterable(r.values() for r in rows))) <= _SCORE_TYPES:
            try:
                flat = np.fromiter(chain.from_iterable(r.values() for r in rows), dtype=np.float64, count=total)
            except OverflowError:
                flat = None
        if flat is None or not np.isfinite(flat).all():
            for qid, row in self._data.items():
                for did, s in row.items():
                    try:
                        ok = isinstance(s, numbers.Real) and not isinstance(s, (bool, np.bool_)) and math.isfinite(float(s))
                    except OverflowError:
                        ok = False
                    if not ok:
                        raise InputError(f"score of query {qid!r}, corpus id {did!r} must be a finite number, got {s!r}", id=did)
        if flat is None:  # every score is a finite real number of another type (e.g. fractions.Fraction)
            flat = np.array([float(s) for r in rows for s in r.values()], dtype=np.float64)
        starts = np.cumsum(lens) - lens
        flat.flags.writeable = False
        starts.flags.writeable = False
        self._cols = (flat, starts, {q: i for i, q in enumerate(self._data)})
        return self._cols

    def ranked(self, query_id: str) -> list[tuple[str, float]]:
        """The ranking of one query: ``[(corpus_id, score), ...]`` best first (trec_eval order).

        Raises:
            KeyError: ``query_id`` is not in the run.
        """
        return sorted(self._data[query_id].items(), key=lambda kv: (float(kv[1]), kv[0]), reverse=True)

    def top_k(self, k: int) -> "Run":
        """A new run keeping each query's ``k`` best corpus ids (trec_eval ``-M k``).

        Raises:
            ValueError: ``k`` < 1.
        """
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        out = Run.from_checked({q: dict(self.ranked(q)[:k]) for q in self._data}, self.name)
        out._comments = self.comment_lines
        return out

    def __repr__(self) -> str:
        return f"Run({len(self)} queries, {self.num_entries()} scored pages{', ' + repr(self.name) if self.name else ''})"


@dataclass(frozen=True)
class Query:
    """One query: its text and, for conversational queries, the earlier turns.

    Attributes:
        text: the query text as it will be encoded.
        history: earlier conversation turns (their questions), oldest first (empty for
            single-turn queries).
        answers: the answers of the earlier turns, aligned with ``history`` (same length), or
            empty when the answers are not known.
    """

    text: str
    history: tuple[str, ...] = ()
    answers: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise InputError(f"query text must be a str, got {type(self.text).__name__}")
        for name in ("history", "answers"):
            value = getattr(self, name)
            seq = tuple(value) if not isinstance(value, str) else None
            if seq is None or not all(isinstance(h, str) for h in seq):
                raise InputError(f"query {name} must be a sequence of str (earlier turns, oldest first)")
            object.__setattr__(self, name, seq)
        if self.answers and len(self.answers) != len(self.history):
            raise InputError(f"query answers ({len(self.answers)}) must align with the history ({len(self.history)} turns)")

    def turns(self) -> list[tuple[str, str | None]]:
        """``[(question, answer or None), ...]`` of the earlier turns, oldest first."""
        return [(q, self.answers[i] if self.answers else None) for i, q in enumerate(self.history)]


@dataclass(frozen=True)
class QuerySet(Mapping):
    """Queries of one variant: query id -> :class:`Query`.

    The original queries are one variant (``name="original"``); each rewrite is another
    ``QuerySet`` with exactly the same ids (see :func:`vdr.io.load_rewrites`).

    Attributes:
        queries: ``{query_id: Query}`` in file order.
        name: variant name (``"original"``, or the name given to a rewrite).
        source: the file it was read from, if any.
        lines: 1-based line number of each id in ``source`` (for error messages).
    """

    queries: Mapping[str, Query]
    name: str = ORIGINAL
    source: str | None = None
    lines: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        fixed: dict[str, Query] = {}
        for q, v in self.queries.items():
            qid = to_id(q, what="query id")
            if isinstance(v, str):
                v = Query(v)
            elif not isinstance(v, Query):
                raise InputError(f"query {qid!r} must be a str or a vdr.Query, got {type(v).__name__}", path=self.source, id=qid)
            fixed[qid] = v
        object.__setattr__(self, "queries", MappingProxyType(fixed))
        object.__setattr__(self, "lines", MappingProxyType(dict(self.lines)))

    @classmethod
    def from_texts(cls, texts: Mapping[object, str], name: str = ORIGINAL) -> "QuerySet":
        """Build a query set from ``{query_id: text}``."""
        return cls({q: Query(t) for q, t in texts.items()}, name=name)

    def __getitem__(self, key: str) -> Query:
        return self.queries[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.queries)

    def __len__(self) -> int:
        return len(self.queries)

    def texts(self) -> dict[str, str]:
        """``{query_id: text}``."""
        return {q: v.text for q, v in self.queries.items()}

    def where(self, query_id: str) -> str:
        """``"file:line"`` of ``query_id`` when known, for error messages."""
        src = self.source or f"<{self.name} queries>"
        line = self.lines.get(query_id)
        return f"{src}:{line}" if line else src

    def ids(self) -> Iterable[str]:
        """Query ids in file order."""
        return self.queries.keys()


def duplicate_texts(queries: QuerySet, *, examples: int = 5) -> dict:
    """Query texts that occur under more than one id in one variant (usually a copy-paste slip in a
    rewrite file; such queries get identical rankings).

    Returns:
        ``{"count": number of ids whose text an earlier id already has, "examples": [{"text",
        "ids"}] (first ``examples`` texts)}``.

    >>> duplicate_texts(QuerySet.from_texts({"q1": "tax", "q2": "rent", "q3": "tax"}))
    {'count': 1, 'examples': [{'text': 'tax', 'ids': ['q1', 'q3']}]}
    """
    by_text: dict[str, list[str]] = {}
    for qid, q in queries.items():
        by_text.setdefault(q.text, []).append(qid)
    dups = [(t, ids) for t, ids in by_text.items() if len(ids) > 1]
    return {"count": sum(len(ids) - 1 for _, ids in dups), "examples": [{"text": t, "ids": ids} for t, ids in dups[:examples]]}
