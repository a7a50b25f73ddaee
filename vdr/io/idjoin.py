"""Ids that half-join (issue 34.1): the one check of every place where a run meets qrels or queries.

``vdr metrics``, ``vdr compare``, ``vdr evaluate`` (its ``--run`` files and its query and rewrite
files against the qrels) and the rewards all call :func:`check_id_join`. It compares two id sets
(a run's query ids and the qrels', a run's corpus ids and the corpus'), and:

* counts and names every id of either side that the other side lacks;
* pairs an id of one side with one of the other when both have the same :func:`id_key`: equal
  after Unicode NFC, surrounding whitespace, letter case, zero padding of digit runs (``q1`` and
  ``q01``) and a known prefix (ConvSearch-R1's ``topiocqa-dev_``, ``QReCC-Test_``, ...;
  :data:`PREFIXES`);
* raises :class:`IdMismatchError` (an :class:`~vdr.errors.InputError`: exit 2 in the CLI) naming
  the pairs, unless ``allow_id_mismatch`` (``--allow-id-mismatch``);
* warns (:class:`IdJoinWarning`, a :class:`~vdr.errors.VdrWarning`) about the other non-joining ids;
* returns an :class:`IdJoin` whose :meth:`IdJoin.to_json` the caller records (``policy["id_join"]``).

>>> j = join_ids(["q1", "q2", "x"], ["q01", "q2"], what="query ids", left="run", right="qrels")
>>> j.only_left, j.only_right, j.pairs
(['q1', 'x'], ['q01'], [('q1', 'q01', 'zero padding')])
"""

from __future__ import annotations

import re
import unicodedata
import warnings
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InputError, VdrWarning

__all__ = ["PREFIXES", "IdJoin", "IdMismatchError", "IdJoinWarning", "id_key", "join_ids", "check_id_join", "SHOWN"]

#: how many ids of each kind a message names (results.json names up to :data:`RECORDED`)
SHOWN = 10
RECORDED = 1000
_DIGITS = re.compile(r"\d+")


class IdMismatchError(InputError):
    """Ids of a run and of the qrels (or queries, or corpus) that match only after normalisation."""


class IdJoinWarning(VdrWarning):
    """Ids of one side that the other side lacks, with no likely partner."""


#: ConvSearch-R1's id prefix of each (benchmark, split), exactly as its preprocessing writes it (re-exported as
#: :data:`vdr.io.turn_ids.PREFIXES`, whose id schemes use it; defined here so that the join check imports no reader)
PREFIXES: dict[tuple[str, str], str] = {
    ("topiocqa", "dev"): "topiocqa-dev",  # preprocess/topiocqa/preprocess.py: f"topiocqa-dev_{conv_id}_{turn_id}"
    ("topiocqa", "train"): "topiocqa-train",
    ("qrecc", "test"): "QReCC-Test",  # preprocess/qrecc/preprocess_v3.py: "{}_{}_{}".format("QReCC-Test", ...)
    ("qrecc", "train"): "QReCC-Train",
}


def _prefixes() -> tuple[str, ...]:
    return tuple(sorted({p.casefold() + "_" for p in PREFIXES.values()}, key=len, reverse=True))


def _strip_prefix(s: str) -> str:
    for p in _prefixes():
        if s.startswith(p):
            return s[len(p):]
    return s


# the normalisation steps, in order: (name in messages, function)
_STEPS = (
    ("Unicode NFC", lambda s: unicodedata.normalize("NFC", s)),
    ("surrounding whitespace", str.strip),
    ("letter case", str.casefold),
    ("known prefix", _strip_prefix),
    ("zero padding", lambda s: _DIGITS.sub(lambda m: str(int(m.group())), s)),
)


def id_key(s: str) -> str:
    """The form two ids must share to be a likely pair: NFC, stripped, casefolded, without a known
    prefix, digit runs without leading zeros.

    >>> id_key(" Q007 "), id_key("topiocqa-dev_12_3"), id_key("QReCC-Test_1_01")
    ('q7', '12_3', '1_1')
    """
    for _, f in _STEPS:
        s = f(s)
    return s


def _reason(a: str, b: str) -> str:
    """The normalisation steps that change ``a`` or ``b`` on the way to their common key, joined by ``+``."""
    names = []
    for name, f in _STEPS:
        na, nb = f(a), f(b)
        if na != a or nb != b:
            names.append(name)
        a, b = na, nb
    return " + ".join(names)


@dataclass(frozen=True)
class IdJoin:
    """How two id sets join.

    Attributes:
        what: the kind of id (``"query ids"``, ``"corpus ids"``).
        left, right: the names of the two sides (``"run 'bm25'"``, ``"qrels"``).
        only_left: ids of the left side that the right lacks, sorted (likely partners included).
        only_right: ids of the right side that the left lacks, sorted.
        pairs: ``(left id, right id, reason)``: the ids that match only after normalisation, the
            reason naming the steps (``"zero padding"``, ``"letter case + Unicode NFC"``).
    """

    what: str
    left: str
    right: str
    only_left: list[str] = field(default_factory=list)
    only_right: list[str] = field(default_factory=list)
    pairs: list[tuple[str, str, str]] = field(default_factory=list)

    def to_json(self) -> dict:
        """``{"num_only_in_<left>", "only_in_<left>" (first 1000), ..., "pairs": [[a, b, reason]]}``
        with the sides as ``left`` / ``right`` keys."""
        return {"left": self.left, "right": self.right,
                "num_only_left": len(self.only_left), "only_left": self.only_left[:RECORDED],
                "num_only_right": len(self.only_right), "only_right": self.only_right[:RECORDED],
                "num_pairs": len(self.pairs), "pairs": [list(p) for p in self.pairs[:RECORDED]]}

    def pairs_text(self) -> str:
        """The pairs as ``'q1' (run) = 'q01' (qrels) [zero padding]``, the first :data:`SHOWN`."""
        shown = "; ".join(f"{a!r} ({self.left}) ~ {b!r} ({self.right}) [{r}]" for a, b, r in self.pairs[:SHOWN])
        return shown + (f"; ... ({len(self.pairs) - SHOWN} more)" if len(self.pairs) > SHOWN else "")

    def unpaired_text(self) -> str:
        """The non-joining ids without a partner, per side, counted and named (first :data:`SHOWN`); ``""`` if none."""
        paired_l = {a for a, _, _ in self.pairs}
        paired_r = {b for _, b, _ in self.pairs}
        parts = []
        for ids, paired, side, other in ((self.only_left, paired_l, self.left, self.right),
                                         (self.only_right, paired_r, self.right, self.left)):
            rest = [i for i in ids if i not in paired]
            if rest:
                more = f", ... ({len(rest) - SHOWN} more)" if len(rest) > SHOWN else ""
                parts.append(f"{len(rest)} {self.what} of the {side} are not in the {other}: "
                             + ", ".join(repr(i) for i in rest[:SHOWN]) + more)
        return "; ".join(parts)


def join_ids(left_ids: Iterable[str], right_ids: Iterable[str], *, what: str, left: str, right: str,
             pair_only: Collection[str] | None = None) -> IdJoin:
    """Join two id sets (see the module docstring).

    Args:
        left_ids, right_ids: the ids of each side (any iterables of ``str``; duplicates ignored).
        what: the kind of id, in messages.
        left, right: the sides' names, in messages.
        pair_only: if given, only these left ids are looked at for a partner (a cheap bound for
            big sides); all are counted.

    Returns:
        :class:`IdJoin`.
    """
    ls, rs = set(left_ids), set(right_ids)
    only_l, only_r = sorted(ls - rs), sorted(rs - ls)
    pairs: list[tuple[str, str, str]] = []
    if only_l and only_r:
        by_key: dict[str, str] = {}
        for b in only_r:
            by_key.setdefault(id_key(b), b)
        look = only_l if pair_only is None else [a for a in only_l if a in pair_only]
        for a in look:
            b = by_key.get(id_key(a))
            if b is not None:
                pairs.append((a, b, _reason(a, b)))
    return IdJoin(what, left, right, only_l, only_r, pairs)


def check_id_join(join: IdJoin, *, allow_id_mismatch: bool = False, path: str | Path | None = None,
                  warn_unpaired: bool = True, stacklevel: int = 3) -> dict:
    """Stop on likely pairs, warn about the rest; the record for results.json.

    Args:
        join: :func:`join_ids`' answer.
        allow_id_mismatch: go on when pairs exist (they are warned about and recorded).
        path: the file named in the error (the qrels, the run).
        warn_unpaired: warn (:class:`IdJoinWarning`) about the non-joining ids without a partner.
        stacklevel: of the warnings.

    Returns:
        ``join.to_json()`` plus ``"allow_id_mismatch"``.

    Raises:
        IdMismatchError: pairs exist and not ``allow_id_mismatch``; the message names them.
    """
    if join.pairs:
        msg = (f"{len(join.pairs)} {join.what} of the {join.left} match {join.what} of the {join.right} only after"
               f" normalisation (case, zero padding, whitespace, NFC, a known prefix), so they do not join: {join.pairs_text()}")
        if not allow_id_mismatch:
            raise IdMismatchError(msg + "; write the ids the same way in both files, or pass --allow-id-mismatch"
                                        " (allow_id_mismatch=True) to evaluate them as written (unjoined)", path=path)
        warnings.warn(IdJoinWarning(msg + " (--allow-id-mismatch: evaluated as written)"), stacklevel=stacklevel)
    rest = join.unpaired_text()
    if rest and warn_unpaired:
        warnings.warn(IdJoinWarning(rest), stacklevel=stacklevel)
    return {**join.to_json(), "allow_id_mismatch": bool(allow_id_mismatch)}
