"""trec_eval's own output: ``measure<TAB>query|all<TAB>value`` lines, as trec_eval 10 prints them.

``vdr metrics QRELS RUN -m all_trec --format trec_eval`` prints what ``trec_eval -m all_trec QRELS RUN``
prints (``--each-query``: ``-q``; ``-c``, ``-M``, ``-l`` as in trec_eval): the measures in trec_eval's
order (the order of ``te_trec_measures`` in trec_eval's ``measures.c``), each query's lines first
(queries sorted as trec_eval sorts them, by id), then the ``all`` lines; names padded as trec_eval's
``printf("%-22s\\t%s\\t%6.4f\\n", ...)``, counts (``num_ret``, ``num_q``, ...) as ``%ld``.

vdr's metrics are named as trec_eval names the same measure (``precision@5`` -> ``P_5``,
``ndcg@10`` -> ``ndcg_cut_10``, ``rbp_graded`` -> ``rbp``); a metric trec_eval lacks keeps vdr's
name (``judged@10``; vdr's binary ``rbp``, ir_measures' RBP, is written ``rbp(p=0.8)`` so that it is
not read as trec_eval's ``rbp``). trec_eval's two measures that are not numbers are produced here:
``runid`` (the run's tag, in the ``all`` block) and ``relstring`` (each query's first N grades as
characters, in the query blocks; ``relstring.N`` names its length).

>>> from vdr.metrics import evaluate_run
>>> res = evaluate_run({"q1": {"a": 1, "b": 0}}, {"q1": {"a": 2.0, "b": 1.0}}, ["P.1,2", "num_ret", "judged@2"])
>>> for line in format_trec_eval(res, runid="demo").splitlines():
...     print(line.split("\\t"))
['runid                 ', 'all', 'demo']
['num_ret               ', 'all', '2']
['P_1                   ', 'all', '1.0000']
['P_2                   ', 'all', '0.5000']
['judged@2              ', 'all', '1.0000']
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import InputError
from ..types import Run
from .compute import MetricsResult
from .registry import METRICS, Metric, parse_metric

__all__ = ["TREC_ORDER", "TrecExtras", "split_trec_names", "trec_eval_name", "relstrings", "format_trec_eval"]

#: trec_eval 10's measures in the order it prints them (``te_trec_measures``, ``measures.c``), by
#: the root of their names (``P`` for ``P_5``); those of ``-m all_trec`` and the ones between them.
TREC_ORDER: tuple[str, ...] = (
    "runid", "num_q", "num_ret", "num_rel", "num_rel_ret", "map", "gm_map", "Rprec", "bpref", "recip_rank",
    "iprec_at_recall", "P", "relstring", "recall", "infAP", "gm_bpref", "Rprec_mult", "utility", "11pt_avg", "binG", "G",
    "dcg", "ideal_dcg", "ndcg", "ndcg_rel", "Rndcg", "ndcg_cut", "map_cut", "relative_P", "success", "set_P",
    "set_relative_P", "set_recall", "set_map", "set_F", "num_nonrel_judged_ret", "rbp", "rbp_resid", "unj",
)
_RANK = {name: i for i, name in enumerate(TREC_ORDER)}
# vdr family -> trec_eval's name of it without a cutoff / the root of its names with one (NAME_k)
_WHOLE = {
    "ndcg": "ndcg", "mrr": "recip_rank", "map": "map", "rprec": "Rprec", "bpref": "bpref", "infap": "infAP",
    "11pt_avg": "11pt_avg", "num_ret": "num_ret", "num_rel": "num_rel", "num_rel_ret": "num_rel_ret", "ndcg_rel": "ndcg_rel",
    "rndcg": "Rndcg", "g": "G", "bing": "binG", "rbp_graded": "rbp", "rbp_resid": "rbp_resid", "set_p": "set_P",
    "set_recall": "set_recall", "set_relative_p": "set_relative_P", "set_map": "set_map", "set_f": "set_F",
    "utility": "utility", "num_nonrel_judged_ret": "num_nonrel_judged_ret", "num_q": "num_q", "gm_map": "gm_map",
    "gm_bpref": "gm_bpref",
}
_CUT = {"ndcg": "ndcg_cut", "map": "map_cut", "precision": "P", "recall": "recall", "hit": "success", "relative_p": "relative_P",
        "unj": "unj"}
_LEVEL = {"iprec_at_recall": "iprec_at_recall", "rprec_mult": "Rprec_mult"}
# families whose real parameter trec_eval appends to the name as given (set_F_2, rbp_p=0.95)
_PARAM_NAME = {"set_f": "", "rbp_graded": "p=", "rbp_resid": "p="}
# printed in the `all` block only (trec_eval's print_single_meas_empty)
_SUMMARY_ONLY = ("num_q", "gm_map", "gm_bpref")
#: trec_eval's default length of ``relstring``.
RELSTRING_LEN = 10


def trec_eval_name(m: Metric | str) -> tuple[int, str]:
    """trec_eval's name of metric ``m`` and the rank of its measure in trec_eval's output order
    (:data:`TREC_ORDER`); a metric trec_eval does not compute keeps vdr's name (ranked after them).

    >>> [trec_eval_name(n)[1] for n in ("precision@5", "ndcg", "ndcg@10", "rbp_graded", "rprec_mult_0.20", "rbp", "hit@3")]
    ['P_5', 'ndcg', 'ndcg_cut_10', 'rbp', 'Rprec_mult_0.20', 'rbp(p=0.8)', 'success_3']
    >>> [trec_eval_name(n)[1] for n in ("set_F.2", "set_F.0.5", "rbp.p=0.95")]
    ['set_F_2', 'set_F_0.5', 'rbp_p=0.95']
    """
    m = parse_metric(m)
    if m.rel is None:
        root = None
        if m.family in _LEVEL:
            root = _LEVEL[m.family]
            name = f"{root}_{m.p:.2f}"
        elif m.k is None and m.p is None and m.family in _WHOLE:
            root = name = _WHOLE[m.family]
        elif m.k is None and m.family in _PARAM_NAME:  # set_F.2 -> set_F_2, rbp.p=0.95 -> rbp_p=0.95
            root = _WHOLE[m.family]
            name = f"{root}_{_PARAM_NAME[m.family]}{m.p:g}"
        elif m.k is not None and m.p is None and m.family in _CUT:
            root = _CUT[m.family]
            name = f"{root}_{m.k}"
        if root is not None:
            return _RANK[root], name
    name = str(m)
    if m.family == "rbp" and m.p is None:  # vdr's rbp (ir_measures' RBP) is not trec_eval's rbp
        name = "rbp(p=0.8)" if m.k is None else f"rbp(p=0.8)@{m.k}"
    return len(TREC_ORDER), name


@dataclass(frozen=True)
class TrecExtras:
    """trec_eval's measures that are not numbers, when asked for.

    Attributes:
        runid: print the ``runid`` line (the run's tag) in the ``all`` block.
        relstring: the length of ``relstring`` (each query's first N grades as characters), or ``None``.
        relstring_name: its printed name: ``relstring`` (the default length 10) or ``relstring_N``.
    """

    runid: bool = False
    relstring: int | None = None
    relstring_name: str = "relstring"


def split_trec_names(names: Iterable[str | Metric] | None) -> tuple[list[str | Metric], TrecExtras]:
    """Take trec_eval's non-numeric measures out of metric names: ``runid``, ``relstring`` and
    ``relstring.N`` (length N), and the ones the nicknames ``all_trec`` (both) and ``official``,
    ``set`` (``runid``) include. The nicknames stay in the names (they also name metrics).

    Returns:
        ``(the other names, in order, and the TrecExtras asked for)``.

    Raises:
        InputError: a relstring length that is not an integer >= 0.

    >>> split_trec_names(["all_trec", "relstring.20", "P@5"])
    (['all_trec', 'P@5'], TrecExtras(runid=True, relstring=20, relstring_name='relstring_20'))
    """
    rest: list[str | Metric] = []
    runid, length, rname = False, None, "relstring"
    for n in names or ():
        key = n.strip().lower() if isinstance(n, str) else None
        if key == "runid":
            runid = True
            continue
        if key is not None and (key == "relstring" or key.startswith("relstring.")):
            text = n.strip()[len("relstring."):] if "." in key else ""
            if text and not text.isdigit():
                raise InputError(f"metric {n!r}: relstring's length must be an integer >= 0, e.g. relstring.20")
            length, rname = (int(text), f"relstring_{text}") if text else (RELSTRING_LEN, "relstring")
            continue
        if key in ("all_trec", "official", "set"):
            runid = True
            if key == "all_trec" and length is None:
                length = RELSTRING_LEN
        rest.append(n)
    return rest, TrecExtras(runid, length, rname)


def relstrings(qrels: Mapping[str, Mapping[str, int]], run: Mapping[str, Mapping[str, float]], query_ids: Sequence[str],
               length: int) -> dict[str, str]:
    """trec_eval's ``relstring``: per query, one character per page of its first ``length`` retrieved
    (trec_eval order: score descending, corpus id descending): the grade ``0`` ... ``9``, ``>`` above
    9, ``-`` for a page without a qrels line for the query, ``.`` for a negative grade (pooled but
    unjudged); ``''`` for a query the run does not rank (``m_relstring.c``).

    Args:
        qrels: ``{query_id: {corpus_id: grade}}`` (a :class:`~vdr.types.Qrels` or a dict).
        run: ``{query_id: {corpus_id: score}}`` (a :class:`~vdr.types.Run` or a dict), already cut
            at trec_eval's ``-M`` when one is given.
        query_ids: the queries, in order.
        length: the number of pages shown (trec_eval's default is 10).

    Returns:
        ``{query_id: string}``.

    >>> relstrings({"q": {"a": 2, "c": -1, "d": 12}}, {"q": {"a": 3.0, "b": 2.0, "c": 1.0, "d": 1.0}}, ["q"], 10)
    {'q': '2->.'}
    """
    run = run if isinstance(run, Run) else Run(run)
    flat, starts, pos = run.columns()
    out = {}
    for q in query_ids:
        i = pos.get(q)
        if i is None or length <= 0:
            out[q] = ""
            continue
        ids = list(run[q])
        scores = flat[starts[i]: starts[i] + len(ids)]
        if len(ids) > length:  # only the pages scoring at least the length-th best score can be shown
            keep = np.nonzero(scores >= np.partition(scores, len(ids) - length)[len(ids) - length])[0].tolist()
            cand = list(zip(scores[keep].tolist(), [ids[j] for j in keep]))
        else:
            cand = list(zip(scores.tolist(), ids))
        cand.sort(reverse=True)  # score descending, then corpus id descending: trec_eval's order
        judged = qrels[q] if q in qrels else {}
        out[q] = "".join([_rel_char(judged.get(d)) for _, d in cand[:length]])
    return out


def _rel_char(grade: int | None) -> str:
    if grade is None:
        return "-"
    if grade < 0:
        return "."
    return ">" if grade > 9 else str(grade)


def _trec_sort_key(col: tuple) -> tuple:
    """``((rank, name), i, metric)`` -> its place in trec_eval's output: the measure's rank, then within a
    trec_eval measure its cutoff or level (trec_eval sorts them: ``-m P.10 -m P.5`` prints P_5 first),
    then the order given (vdr's own metrics keep it)."""
    (rank, _), i, name = col
    m = parse_metric(name)
    param = m.k if m.k is not None else (m.p if m.family in _LEVEL else 0.0)
    return rank, float(param) if rank < len(TREC_ORDER) else 0.0, i


def _texts(values: np.ndarray, kind: str) -> list[str]:
    """Per-query ``values`` as trec_eval prints them (:func:`_value`), all at once."""
    if kind == "sum":
        return [str(int(v)) for v in values.tolist()]
    return [f"{v:6.4f}" for v in values.tolist()]


def _value(v: float, kind: str) -> str:
    """A value as trec_eval prints it: ``%ld`` for counts (kind ``sum``), else ``%6.4f``."""
    return str(int(v)) if kind == "sum" else f"{v:6.4f}"


def format_trec_eval(
    res: MetricsResult,
    *,
    per_query: bool = False,
    runid: str | None = None,
    relstring: Mapping[str, str] | None = None,
    relstring_name: str = "relstring",
) -> str:
    """``res`` as trec_eval's output lines (no trailing newline).

    Args:
        res: the evaluation (:func:`~vdr.metrics.evaluate_run`).
        per_query: also print each query's lines before the ``all`` block (trec_eval ``-q``).
        runid: the ``runid`` line's value (the run's tag); ``None``: no ``runid`` line.
        relstring: ``{query_id: string}`` (:func:`relstrings`), printed in the query blocks; ``None``: none.
        relstring_name: the name it is printed under (``relstring``, or ``relstring_N`` for a length N).

    Returns:
        the lines, ``f"{name:<22}\\t{query_or_all}\\t{value}"``, in trec_eval's order: per query (sorted
        ids) its measures, then ``all``; gm_map, gm_bpref and num_q only in ``all``, relstring only per query.
    """
    cols = sorted(((trec_eval_name(n), i, n) for i, n in enumerate(res.values)), key=_trec_sort_key)
    kinds = {n: METRICS[parse_metric(n).family].kind for n in res.values}
    lines = []
    rel_rank = _RANK["relstring"]
    if per_query:
        # per measure, parsed once: its padded name, whether it comes after relstring, its values as text
        shown = [(f"{name:<22}", rank > rel_rank, _texts(res.values[n], kinds[n])) for (rank, name), _, n in cols
                 if parse_metric(n).family not in _SUMMARY_ONLY]
        after = next((i for i, c in enumerate(shown) if c[1]), len(shown))
        rel_name = f"{relstring_name:<22}"
        for qi, q in enumerate(res.query_ids):
            lines += [f"{name}\t{q}\t{vals[qi]}" for name, _, vals in shown[:after]]
            if relstring is not None:
                lines.append(f"{rel_name}\t{q}\t'{relstring.get(q, '')}'")
            lines += [f"{name}\t{q}\t{vals[qi]}" for name, _, vals in shown[after:]]
    if runid is not None:
        lines.append(f"{'runid':<22}\tall\t{runid}")
    agg = res.aggregate
    for (_, name), _, n in cols:
        lines.append(f"{name:<22}\tall\t{_value(agg[n], kinds[n])}")
    return "\n".join(lines)
