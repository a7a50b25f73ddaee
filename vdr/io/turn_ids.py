"""Query ids of conversation turns: ConvSearch-R1's scheme, vdr's ``<conv>_<turn>``, and the one
mapping between them (issue 24.1).

Two schemes name the turn ``Turn_no`` of conversation ``Conversation_no``:

* ``convsearch`` (``vdr convert``'s default): ``<prefix>_<conv>_<turn>``, the ids ConvSearch-R1's
  preprocessing writes into its eval files (``{"qid", ...}``), its TREC qrels and so its runs
  (BeastyZ/ConvSearch-R1 ``preprocess/topiocqa/preprocess.py``, ``preprocess/qrecc/preprocess_v3.py``).
  The prefix names benchmark and split, with ConvSearch-R1's casing (:data:`PREFIXES`):
  ``topiocqa-dev``, ``topiocqa-train``, ``QReCC-Test``, ``QReCC-Train``.
* ``conv_turn``: ``<conv>_<turn>`` (``vdr convert`` before issue 24; ``--id-scheme conv_turn``).

**How vdr knows the scheme of a query set: from the shape of its ids**, nothing else. An id
``<prefix>_<digits>_<digits>`` with a prefix of :data:`PREFIXES` is ConvSearch-R1's; an id
``<digits>_<digits>`` is ``conv_turn``; any other id is no turn id and is never mapped. The shape
is all that every reader sees (a run file is read against the query set alone), and it holds for
query sets that ``vdr convert`` did not write; ``conversion.json`` records the scheme a conversion
used (``id_scheme``), for the reader of that folder.

The mapping (:func:`map_turn_ids`) is applied by every reader of evaluation inputs -- the qrels and
``--rewrites`` files (:mod:`vdr.experiment.inputs`) and ``--run`` files
(:mod:`vdr.retrieve.runfile`) -- to the ids of a file that are NOT ids of the query set:

* a ``<conv>_<turn>`` id maps to the query id ``<prefix>_<conv>_<turn>`` when exactly one prefix
  gives a query id;
* a ``<prefix>_<conv>_<turn>`` id maps to the query id ``<conv>_<turn>``;
* every other id is left as it is (the reader's own rule for unknown ids applies).

It is an :class:`~vdr.errors.InputError`, naming the ids, when the mapping is ambiguous: one id
that would map to several query ids (one conversation turn under several prefixes in the query
set), several ids of the file that land on one query id (``1_1`` and ``topiocqa-dev_1_1`` both
given), or ids of more than one prefix mapped onto ``<conv>_<turn>`` query ids (whose split the ids
do not say). Every mapping is counted and recorded (:meth:`IdMapping.to_json`).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple, TypeVar

from ..errors import AlignmentError, InputError, VdrWarning
from ..types import Qrels, QuerySet, Run
from .idjoin import PREFIXES  # ConvSearch-R1's prefix of each (benchmark, split); defined there, the join check strips them

__all__ = ["ID_SCHEMES", "DEFAULT_ID_SCHEME", "PREFIXES", "SPLITS", "EVAL_SPLITS", "TurnKey", "IdMapping", "check_scheme",
           "prefix_of", "turn_id", "parse_turn_id", "map_turn_ids", "remap_qrels", "remap_run", "remap_queries",
           "load_rewrites_mapped", "mapping_note"]

#: the id schemes of ``vdr convert topiocqa|qrecc --id-scheme``
ID_SCHEMES = ("convsearch", "conv_turn")
DEFAULT_ID_SCHEME = "convsearch"
#: the splits of each benchmark, and the one evaluated by default
SPLITS = {"topiocqa": ("dev", "train"), "qrecc": ("test", "train")}
EVAL_SPLITS = {"topiocqa": "dev", "qrecc": "test"}
_PREFIXED = re.compile(r"^(" + "|".join(map(re.escape, PREFIXES.values())) + r")_(\d+)_(\d+)$")
_BARE = re.compile(r"^(\d+)_(\d+)$")
_EXAMPLES = 5
_Table = TypeVar("_Table", Qrels, Run)


class TurnKey(NamedTuple):
    """A parsed turn id: ``prefix`` (``None`` for ``<conv>_<turn>``), conversation and turn digits."""

    prefix: str | None
    conv: str
    turn: str


def check_scheme(scheme: str) -> str:
    """``scheme`` when it is one of :data:`ID_SCHEMES`.

    Raises:
        InputError: otherwise.
    """
    if scheme not in ID_SCHEMES:
        raise InputError(f"unknown id scheme {scheme!r}; known: {', '.join(ID_SCHEMES)}")
    return scheme


def prefix_of(benchmark: str, split: str) -> str:
    """ConvSearch-R1's id prefix of ``benchmark``'s ``split`` (``("qrecc", "test")`` -> ``"QReCC-Test"``).

    Raises:
        InputError: an unknown benchmark or split.
    """
    if (benchmark, split) not in PREFIXES:
        known = ", ".join(f"{b} {s}" for b, s in PREFIXES)
        raise InputError(f"no ConvSearch-R1 id prefix for {benchmark} split {split!r}; known: {known}")
    return PREFIXES[benchmark, split]


def turn_id(conv: str, turn: int | str, *, scheme: str, benchmark: str, split: str) -> str:
    """The query id of turn ``turn`` of conversation ``conv`` under ``scheme``.

    >>> turn_id("12", 3, scheme="convsearch", benchmark="topiocqa", split="dev")
    'topiocqa-dev_12_3'
    >>> turn_id("12", 3, scheme="conv_turn", benchmark="qrecc", split="test")
    '12_3'

    Raises:
        InputError: an unknown scheme, benchmark or split.
    """
    check_scheme(scheme)
    prefix = prefix_of(benchmark, split)
    return f"{prefix}_{conv}_{turn}" if scheme == "convsearch" else f"{conv}_{turn}"


def parse_turn_id(qid: str) -> TurnKey | None:
    """The parts of a turn id of either scheme, ``None`` for any other id.

    >>> parse_turn_id("QReCC-Test_7_2")
    TurnKey(prefix='QReCC-Test', conv='7', turn='2')
    >>> parse_turn_id("7_2")
    TurnKey(prefix=None, conv='7', turn='2')
    >>> parse_turn_id("qrecc-test_7_2") is None  # ConvSearch-R1's casing only
    True
    """
    m = _PREFIXED.match(qid)
    if m:
        return TurnKey(m.group(1), m.group(2), m.group(3))
    m = _BARE.match(qid)
    return TurnKey(None, m.group(1), m.group(2)) if m else None


@dataclass(frozen=True)
class IdMapping:
    """The ids of one file mapped onto the query set's scheme.

    Attributes:
        what: the file, as named in messages (``"qrels"``, ``"rewrite variant 'human'"``, ...).
        mapped: ``{id in the file: query id}``, in file order.
        prefixes: the ConvSearch-R1 prefixes involved (of the file's ids or of the query ids).
        not_mapped: the number of the file's ids that are neither query ids nor mapped.
    """

    what: str
    mapped: dict[str, str] = field(default_factory=dict)
    prefixes: tuple[str, ...] = ()
    not_mapped: int = 0

    def __bool__(self) -> bool:
        return bool(self.mapped)

    def to_json(self) -> dict:
        """``{"file", "num_mapped", "from", "to", "prefixes", "examples", "num_not_mapped"}``:
        ``from``/``to`` the schemes (``"convsearch"``/``"conv_turn"``, both listed when the file
        mixes them), ``examples`` the first five ``{file id: query id}``."""
        src = sorted({"conv_turn" if parse_turn_id(f).prefix is None else "convsearch" for f in self.mapped})  # type: ignore[union-attr]
        return {"file": self.what, "num_mapped": len(self.mapped), "from": src,
                "to": sorted({"convsearch" if s == "conv_turn" else "conv_turn" for s in src}), "prefixes": list(self.prefixes),
                "examples": dict(list(self.mapped.items())[:_EXAMPLES]), "num_not_mapped": self.not_mapped}


def _shown(pairs: list[str], n: int = 10) -> str:
    return "; ".join(pairs[:n]) + (f"; ... ({len(pairs)} in all)" if len(pairs) > n else "")


def map_turn_ids(ids: Iterable[str], targets: Collection[str], *, what: str, path: str | Path | None = None) -> IdMapping:
    """Map the turn ids of a file that are not query ids onto the query ids (the rules of this
    module's docstring).

    Args:
        ids: the file's ids (query ids of qrels, rewrites or a run), in file order.
        targets: the query ids of the query set.
        what: the file, for messages and the record (``"qrels"``, ``"run 'bm25'"``).
        path: the file, for error messages.

    Returns:
        the :class:`IdMapping` (empty -- false -- when no id needed or found a mapping).

    Raises:
        InputError: an ambiguous mapping, naming the ids: one id onto several query ids, several
            ids onto one query id, or ids of several prefixes onto ``<conv>_<turn>`` query ids.
    """
    tset = targets if isinstance(targets, (set, frozenset, Mapping)) else set(targets)
    ids = list(dict.fromkeys(ids))
    foreign = [f for f in ids if f not in tset]
    if not foreign:
        return IdMapping(what)
    bare: dict[tuple[str, str], str] = {}
    prefixed: dict[tuple[str, str], list[str]] = {}
    for t in tset:
        k = parse_turn_id(t)
        if k is not None:
            if k.prefix is None:
                bare[k.conv, k.turn] = t
            else:
                prefixed.setdefault((k.conv, k.turn), []).append(t)
    mapped: dict[str, str] = {}
    several: list[str] = []
    prefixes: set[str] = set()
    onto_bare: dict[str, list[str]] = {}
    for f in foreign:
        k = parse_turn_id(f)
        if k is None:
            continue
        if k.prefix is None:
            cands = sorted(prefixed.get((k.conv, k.turn), ()))
            if len(cands) > 1:
                several.append(f"{f!r} -> {cands}")
            elif cands:
                mapped[f] = cands[0]
                prefixes.add(parse_turn_id(cands[0]).prefix)  # type: ignore[union-attr,arg-type]
        elif (k.conv, k.turn) in bare:
            mapped[f] = bare[k.conv, k.turn]
            prefixes.add(k.prefix)
            onto_bare.setdefault(k.prefix, []).append(f)
    where = {"path": path} if path is not None else {}
    if several:
        raise InputError(f"{what}: ambiguous id mapping, {len(several)} id(s) match more than one query id: {_shown(several)}",
                         **where)
    if len(onto_bare) > 1:
        shown = "; ".join(f"{p}: {', '.join(map(repr, fs[:3]))}" for p, fs in sorted(onto_bare.items()))
        raise InputError(f"{what}: ambiguous id mapping, ids of {len(onto_bare)} ConvSearch-R1 splits ({', '.join(sorted(onto_bare))})"
                         f" map onto the <conv>_<turn> query ids, which do not say their split: {shown}", **where)
    landing: dict[str, list[str]] = {}
    for f in ids:
        t = f if f in tset else mapped.get(f)
        if t is not None:
            landing.setdefault(t, []).append(f)
    clash = [f"{t!r} <- {fs}" for t, fs in landing.items() if len(fs) > 1]
    if clash:
        raise InputError(f"{what}: ambiguous id mapping, {len(clash)} query id(s) are given by more than one id of the file:"
                         f" {_shown(clash)}", **where)
    return IdMapping(what, mapped, tuple(sorted(prefixes)), len(foreign) - len(mapped))


def remap_qrels(qrels: Qrels, targets: Collection[str], *, what: str = "qrels", path: str | Path | None = None) -> tuple[Qrels, IdMapping]:
    """``qrels`` with its query ids mapped onto ``targets`` (:func:`map_turn_ids`); the same object
    when nothing maps.

    Raises:
        InputError: an ambiguous mapping.
    """
    return _remap_table(qrels, Qrels, targets, what, path)


def remap_run(run: Run, targets: Collection[str], *, what: str, path: str | Path | None = None) -> tuple[Run, IdMapping]:
    """``run`` with its query ids mapped onto ``targets`` (:func:`map_turn_ids`); the same object
    when nothing maps.

    Raises:
        InputError: an ambiguous mapping.
    """
    return _remap_table(run, Run, targets, what, path)


def _remap_table(table: _Table, cls: type[_Table], targets: Collection[str], what: str,
                 path: str | Path | None) -> tuple[_Table, IdMapping]:
    """:func:`remap_qrels` / :func:`remap_run`: ``table`` rebuilt as ``cls`` with its query ids mapped."""
    m = map_turn_ids(table, targets, what=what, path=path)
    if not m:
        return table, m
    return cls.from_checked({m.mapped.get(q, q): dict(table[q]) for q in table}, name=table.name), m


def remap_queries(queries: QuerySet, targets: Collection[str], *, what: str) -> tuple[QuerySet, IdMapping]:
    """``queries`` (a rewrite file) with its ids mapped onto ``targets`` (:func:`map_turn_ids`),
    file and line numbers kept for messages; the same object when nothing maps.

    Raises:
        InputError: an ambiguous mapping.
    """
    m = map_turn_ids(queries.ids(), targets, what=what, path=queries.source)
    if not m:
        return queries, m
    return QuerySet({m.mapped.get(q, q): v for q, v in queries.items()}, name=queries.name, source=queries.source,
                    lines={m.mapped.get(q, q): n for q, n in queries.lines.items()}), m


def load_rewrites_mapped(path: str | Path, originals: QuerySet, name: str) -> tuple[QuerySet | None, IdMapping | None]:
    """A rewrite file whose ids use the other scheme, mapped onto the originals' ids (the caller
    reads it with :func:`vdr.io.formats.load_rewrites` first and comes here when the ids differ).

    The ids are checked by :func:`~vdr.io.formats.load_rewrites` against the originals named as the
    file names them (so its messages name the file's ids and lines), then renamed; a
    :class:`~vdr.errors.VdrWarning` counts them (:func:`mapping_note`).

    Returns:
        ``(variant, mapping)``, or ``(None, None)`` when no id of the file maps.

    Raises:
        AlignmentError: the ids still differ after the mapping.
        InputError: an ambiguous mapping; a malformed file.
    """
    from .formats import load_queries, load_rewrites

    what = f"rewrite variant {name!r}"
    m = map_turn_ids(load_queries(path, name=name).ids(), originals.queries, what=what, path=path)
    if not m:
        return None, None
    back = {t: f for f, t in m.mapped.items()}
    as_file = QuerySet({back.get(q, q): v for q, v in originals.items()}, name=originals.name, source=originals.source,
                       lines={back.get(q, q): n for q, n in originals.lines.items()})
    try:
        variant = load_rewrites(path, as_file, name=name)
    except AlignmentError as e:
        raise AlignmentError(f"{e} (after mapping {len(m.mapped)} id(s) of the other turn-id scheme onto the query ids,"
                             " vdr.io.turn_ids)", path=path) from None
    mapping_note(m, stacklevel=4)
    return remap_queries(variant, originals.queries, what=what)[0], m


def mapping_note(m: IdMapping, *, stacklevel: int = 3) -> None:
    """A :class:`~vdr.errors.VdrWarning` that counts the ids of a file mapped onto the query ids."""
    import warnings

    rec = m.to_json()
    ex = ", ".join(f"{a} -> {b}" for a, b in list(rec["examples"].items())[:3])
    warnings.warn(f"{m.what}: {rec['num_mapped']} query id(s) mapped from the {'/'.join(rec['from'])} id scheme onto the query"
                  f" set's ({ex}; recorded as id_mapping)", VdrWarning, stacklevel=stacklevel)
