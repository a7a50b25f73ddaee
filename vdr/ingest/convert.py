"""``vdr convert``: public passage benchmarks -> vdr's layout (issue 15.2, issue 18.5).

Each converter writes into ``OUT``::

    OUT/passages.jsonl, ids.txt, empty_ids.txt, corpus.json   the passage corpus (when a collection is given;
                                                               see vdr.ingest.passages)
    OUT/queries.jsonl      the original queries: the raw last turn, ``history`` = earlier turns
                           ``{"question", "answer"}``, oldest first (conversational sets)
    OUT/qrels.tsv          BEIR qrels
    OUT/variants/*.jsonl   built-in rewrite variants (give them to ``vdr evaluate --rewrites NAME=FILE``):
                           ``concat-q`` (history questions + question), ``concat-qa`` (questions and
                           answers + question) and ``human`` (the dataset's own rewrite, QReCC)
    OUT/conversion.json    what the conversion did: counts, dropped turns, unmatched gold, settings

Query ids of TopiOCQA and QReCC are ``{Conversation_no}_{Turn_no}`` (ConvSearch-R1's convention).

Rules (issue 18.5):

* a turn without a gold passage is dropped from the query set and counted, but it stays in the
  history of the later turns of its conversation;
* an empty answer in the history is replaced by :data:`EMPTY_ANSWER` (counted);
* TopiOCQA's dataset and gold files are joined on ``(Conversation_no, Turn_no)``, never by
  position; gold entries without a dataset turn are listed in the report.

The history budget is vdr's ONE query budget, :func:`vdr.retrieve.budget.fit_query_budget` (the
rule the lexical backends apply to every query text): whitespace tokens, the OLDEST history tokens
dropped first (whole turns, then the leading words of the oldest turn kept), the current question
always kept (a question alone over budget keeps its last tokens, counted). The rule and the counts
are recorded per variant in ``conversion.json``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path


from ..errors import InputError, VdrWarning
from ..io.atomic import write_text_atomic
from ..io.formats import load_qrels, load_queries, save_qrels, save_queries
from ..text import DEFAULT_MAX_QUERY_TOKENS, BudgetedQuery, budget_config, fit_query_budget
from ..types import Qrels, Query, QuerySet

__all__ = ["EMPTY_ANSWER", "ConcatSpec", "concat_text", "concat_query", "convert_topiocqa", "convert_qrecc", "convert_msmarco",
           "convert_beir"]

#: Placeholder for an empty answer in a conversation's history (the turn stays, its answer is marked).
EMPTY_ANSWER = "[no answer]"
VARIANTS_DIR = "variants"
REPORT_FILE = "conversion.json"
LISTED = 20


# --------------------------------------------------------------------------------------------- history


@dataclass(frozen=True)
class ConcatSpec:
    """How a history-concatenation variant is built (recorded in ``conversion.json``).

    Attributes:
        name: the variant's name (its file is ``variants/<name>.jsonl``).
        answers: include each earlier turn's answer after its question.
        order: ``"oldest-first"`` (h1 .. hn, question) or ``"newest-first"`` (question, hn .. h1).
        separator: joins the pieces (question, answer, turns).
        budget: whitespace-token budget (:func:`vdr.retrieve.budget.fit_query_budget`), ``None`` for none.
    """

    name: str
    answers: bool
    order: str = "oldest-first"
    separator: str = " "
    budget: int | None = DEFAULT_MAX_QUERY_TOKENS

    def __post_init__(self) -> None:
        if self.order not in ("oldest-first", "newest-first"):
            raise InputError(f"history order must be oldest-first or newest-first, got {self.order!r}")
        if self.budget is not None and self.budget < 1:
            raise InputError(f"history budget must be >= 1 token, got {self.budget}")


def concat_query(q: Query, spec: ConcatSpec) -> BudgetedQuery:
    """The concatenated query of ``q`` under ``spec``, through the shared budget
    (:func:`vdr.retrieve.budget.fit_query_budget`: one history piece per earlier turn, the question
    kept, the oldest tokens dropped first).

    Raises:
        InputError: a non-str question or history piece (from the budget function).
    """
    pieces = [spec.separator.join((h, a)) if spec.answers and a is not None else h for h, a in q.turns()]
    order = "history_first" if spec.order == "oldest-first" else "question_first"
    return fit_query_budget(q.text, pieces, spec.budget, order=order, separator=spec.separator)


def concat_text(q: Query, spec: ConcatSpec) -> tuple[str, int]:
    """The concatenated query of ``q`` under ``spec``: ``(text, history turns dropped by the budget,
    wholly or in part)`` (:func:`concat_query`)."""
    b = concat_query(q, spec)
    return b.text, b.dropped_turns


def default_specs(order: str = "oldest-first", separator: str = " ", budget: int | None = DEFAULT_MAX_QUERY_TOKENS) -> list[ConcatSpec]:
    """The two built-in concatenations: ``concat-q`` (questions) and ``concat-qa`` (with answers)."""
    return [ConcatSpec("concat-q", False, order, separator, budget), ConcatSpec("concat-qa", True, order, separator, budget)]


# --------------------------------------------------------------------------------------------- conversations


@dataclass(frozen=True)
class Turn:
    """One conversation turn of a dataset file (``line``: its 1-based index in the JSON list)."""

    conv: str
    turn: int
    question: str
    answer: str
    rewrite: str | None
    index: int

    @property
    def qid(self) -> str:
        """``{Conversation_no}_{Turn_no}``."""
        return f"{self.conv}_{self.turn}"


def _load_json(path: Path) -> object:
    """A JSON document, or a JSON-lines file as a list of its objects."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError("file not found", path=path) from None
    except UnicodeDecodeError as e:
        raise InputError(f"not valid UTF-8 ({e})", path=path) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        if not text.lstrip().startswith("{"):
            raise InputError(f"invalid JSON ({e})", path=path) from None
    out = []
    for no, line in enumerate(text.splitlines(), start=1):  # JSON lines
        if line.strip():
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise InputError(f"invalid JSON ({e.msg}, column {e.colno})", path=path, line=no) from None
    return out


_TRAILING_KEY = re.compile(r"(\d+)[_-](\d+)$")


def _conv_turn(o: dict, path: Path, i: int) -> tuple[str, int]:
    """``(conversation, turn)`` of a gold or dataset entry: ``Conversation_no``/``conv_id`` and
    ``Turn_no``/``turn_id``, else an id field ending in ``<conv>_<turn>`` (``"topiocqa-dev_12_3"``)."""
    if any(k in o for k in ("Conversation_no", "conv_id")):
        conv = str(_as_int(_key(o, ("Conversation_no", "conv_id"), path, i, "conversation number"), path, i, "Conversation_no"))
        return conv, _as_int(_key(o, ("Turn_no", "turn_id"), path, i, "turn number"), path, i, "Turn_no")
    for k in ("id", "qid", "sample_id"):
        m = _TRAILING_KEY.search(str(o.get(k, "")))
        if m:
            return str(int(m.group(1))), int(m.group(2))
    raise InputError(f"entry {i}: missing conversation number (Conversation_no or conv_id, or an id ending in <conv>_<turn>)", path=path)


def _key(obj: dict, names: Sequence[str], path: Path, i: int, what: str) -> object:
    for n in names:
        if n in obj:
            return obj[n]
    raise InputError(f"entry {i}: missing {what} ({' or '.join(names)})", path=path)


def _as_int(value: object, path: Path, i: int, what: str) -> int:
    try:
        if isinstance(value, bool):
            raise ValueError
        return int(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise InputError(f"entry {i}: {what} must be an integer, got {value!r}", path=path) from None


def _str(obj: dict, key: str, path: Path, i: int, required: bool = True) -> str | None:
    v = obj.get(key)
    if v is None and not required:
        return None
    if not isinstance(v, str):
        raise InputError(f"entry {i}: {key!r} must be a string, got {type(v).__name__}", path=path)
    return v


def load_turns(path: str | Path) -> list[Turn]:
    """The turns of a TopiOCQA or QReCC dataset JSON file (a list of objects with ``Conversation_no``,
    ``Turn_no``, ``Question``, ``Answer`` and, for QReCC, ``Rewrite``), in file order.

    Raises:
        InputError: not a list of objects, a missing or mistyped field, a (conversation, turn) pair
            given twice (entry numbers named).
    """
    path = Path(path)
    data = _load_json(path)
    if not isinstance(data, list) or not all(isinstance(o, dict) for o in data):
        raise InputError("expected a JSON list of turn objects", path=path)
    turns: list[Turn] = []
    seen: dict[tuple[str, int], int] = {}
    for i, o in enumerate(data, start=1):
        conv, no = _conv_turn(o, path, i)
        if (conv, no) in seen:
            raise InputError(f"entry {i}: conversation {conv} turn {no} given twice (first: entry {seen[conv, no]})", path=path, id=f"{conv}_{no}")
        seen[conv, no] = i
        answer = o.get("Answer")
        turns.append(Turn(conv, no, _str(o, "Question", path, i), answer if isinstance(answer, str) else "",
                          _str(o, "Rewrite", path, i, required=False), i))
    return turns


def build_queries(turns: Iterable[Turn], gold: dict[str, dict[str, int]]) -> tuple[dict[str, Query], dict]:
    """Conversational queries of the turns that have gold, each with its conversation's earlier
    turns (gold or not) as history.

    Returns:
        ``({query id: Query}, counts)``: counts ``turns``, ``queries``, ``dropped_without_gold``
        (with the first ids listed) and ``empty_answers_replaced``.
    """
    by_conv: dict[str, list[Turn]] = {}
    for t in turns:
        by_conv.setdefault(t.conv, []).append(t)
    out: dict[str, Query] = {}
    dropped: list[str] = []
    empty = 0
    for conv_turns in by_conv.values():
        conv_turns.sort(key=lambda t: t.turn)
        for j, t in enumerate(conv_turns):
            if t.qid not in gold:
                dropped.append(t.qid)
                continue
            earlier = conv_turns[:j]
            empty += sum(1 for e in earlier if not e.answer.strip())
            out[t.qid] = Query(t.question, tuple(e.question for e in earlier),
                               tuple(e.answer if e.answer.strip() else EMPTY_ANSWER for e in earlier))
    counts = {"turns": sum(len(v) for v in by_conv.values()), "queries": len(out), "dropped_without_gold": len(dropped),
              "dropped_examples": dropped[:LISTED], "empty_answers_replaced": empty, "empty_answer_placeholder": EMPTY_ANSWER}
    return out, counts


# --------------------------------------------------------------------------------------------- writing


def _corpus(collection: Path | None, out: Path, fmt: str) -> dict | None:
    if collection is None:
        return None
    from .passages import ingest_passages

    return ingest_passages(collection, out, format=fmt).manifest


def write_layout(out: Path, queries: dict[str, Query], qrels: Qrels, *, human: dict[str, str] | None,
                 specs: Sequence[ConcatSpec], report: dict) -> dict:
    """Write ``queries.jsonl``, ``qrels.tsv``, ``variants/*.jsonl`` and ``conversion.json`` (atomically).

    Returns:
        the report, with ``variants`` (file and settings of each) and budget counts added.
    """
    out.mkdir(parents=True, exist_ok=True)
    save_queries(QuerySet(queries), out / "queries.jsonl")
    save_qrels(qrels, out / "qrels.tsv")
    variants: dict[str, dict] = {}
    if any(q.history for q in queries.values()):
        for spec in specs:
            texts, cut, q_cut, dropped = {}, 0, 0, 0
            for qid, q in queries.items():
                b = concat_query(q, spec)
                texts[qid] = b.text
                cut, q_cut, dropped = cut + (b.dropped_turns > 0), q_cut + b.question_cut, dropped + b.dropped_tokens
            path = out / VARIANTS_DIR / f"{spec.name}.jsonl"
            save_queries(QuerySet.from_texts(texts, name=spec.name), path)
            variants[spec.name] = {"file": str(path), "answers": spec.answers, "order": spec.order, "separator": spec.separator,
                                   "budget_tokens": spec.budget, "budget_unit": "whitespace tokens",
                                   "budget": budget_config(spec.budget), "queries_with_history_cut": cut,
                                   "questions_cut": q_cut, "tokens_dropped": dropped}
    if human:
        path = out / VARIANTS_DIR / "human.jsonl"
        save_queries(QuerySet.from_texts(human, name="human"), path)
        variants["human"] = {"file": str(path), "source": "the dataset's human rewrite"}
    report = dict(report, variants=variants,
                  evaluate=f"vdr evaluate {out} --backend lexical " + " ".join(f"--rewrites {n}={v['file']}" for n, v in variants.items()))
    write_text_atomic(out / REPORT_FILE, json.dumps(report, indent=1, ensure_ascii=False) + "\n")
    return report


def _unmatched_warning(report: dict) -> None:
    n = report.get("gold_without_turn", {}).get("count", 0)
    if n:
        import warnings

        warnings.warn(f"{n} gold entries have no dataset turn (listed in {REPORT_FILE}), e.g. "
                      f"{report['gold_without_turn']['examples'][:5]}", VdrWarning, stacklevel=3)


# --------------------------------------------------------------------------------------------- converters


def _topiocqa_gold(path: Path) -> tuple[dict[tuple[str, int], dict[str, int]], int]:
    """TopiOCQA/DPR gold file -> ``({(conv, turn): {passage id: 1}}, entries)``; entries keyed by
    ``conv_id``/``Conversation_no`` and ``turn_id``/``Turn_no`` (never by position)."""
    data = _load_json(path)
    if not isinstance(data, list) or not all(isinstance(o, dict) for o in data):
        raise InputError("expected a JSON list of gold objects (DPR format with positive_ctxs)", path=path)
    gold: dict[tuple[str, int], dict[str, int]] = {}
    for i, o in enumerate(data, start=1):
        conv, turn = _conv_turn(o, path, i)
        ctxs = o.get("positive_ctxs") or []
        if not isinstance(ctxs, list):
            raise InputError(f"entry {i}: 'positive_ctxs' must be a list", path=path, id=f"{conv}_{turn}")
        ids = {}
        for c in ctxs:
            pid = c.get("passage_id") if isinstance(c, dict) else None
            if pid is None or isinstance(pid, bool) or not isinstance(pid, (str, int)) or str(pid).strip() == "":
                raise InputError(f"entry {i}: a positive context without 'passage_id'", path=path, id=f"{conv}_{turn}")
            ids[str(pid).strip()] = 1
        if ids:
            gold.setdefault((conv, turn), {}).update(ids)  # a repeated entry adds its passages (entries are counted)
    return gold, len(data)


def _join_report(turns: list[Turn], gold_keys: Iterable[str], counts: dict, extra: dict) -> dict:
    have = {t.qid for t in turns}
    orphan = sorted(k for k in gold_keys if k not in have)
    return {**extra, "counts": counts, "gold_without_turn": {"count": len(orphan), "examples": orphan[:LISTED]}}


def convert_topiocqa(dataset: str | Path, gold: str | Path, out: str | Path, *, collection: str | Path | None = None,
                     collection_format: str = "tsv", specs: Sequence[ConcatSpec] | None = None) -> dict:
    """TopiOCQA (dataset JSON + DPR gold JSON [+ ``full_wiki_segments.tsv``]) -> vdr's layout in ``out``.

    Returns:
        the conversion report (also ``out/conversion.json``).

    Raises:
        InputError: malformed files (entry numbers named); no turn with gold.
    """
    out = Path(out)
    turns = load_turns(dataset)
    gold_map, n_gold = _topiocqa_gold(Path(gold))
    by_qid = {f"{c}_{t}": ids for (c, t), ids in gold_map.items()}
    queries, counts = build_queries(turns, by_qid)
    if not queries:
        raise InputError("no dataset turn has a gold passage: are these files of the same split?", path=gold)
    qrels = Qrels.from_checked({q: dict(by_qid[q]) for q in queries}, name="qrels.tsv")
    counts["gold_entries"] = n_gold
    manifest = _corpus(Path(collection) if collection else None, out, collection_format)
    report = _join_report(turns, by_qid, counts, {"benchmark": "topiocqa", "dataset": str(dataset), "gold": str(gold),
                                                  "collection": None if manifest is None else manifest["source"],
                                                  "join": "(Conversation_no, Turn_no)"})
    report = write_layout(out, queries, qrels, human=None, specs=specs or default_specs(), report=report)
    _unmatched_warning(report)
    return report


def convert_qrecc(dataset: str | Path, qrels: str | Path, out: str | Path, *, collection: str | Path | None = None,
                  collection_format: str = "auto", specs: Sequence[ConcatSpec] | None = None) -> dict:
    """QReCC (dataset JSON + TREC qrels [+ collection]) -> vdr's layout in ``out``; the human
    ``Rewrite`` becomes the ``human`` variant. A turn is kept when the qrels give it a passage with
    a positive grade.

    Raises:
        InputError: malformed files; no turn with gold.
    """
    out = Path(out)
    turns = load_turns(dataset)
    qrels_in = load_qrels(qrels, format="json" if str(qrels).endswith(".json") else "trec")
    positive = {q: dict(qrels_in[q]) for q in qrels_in if any(g > 0 for g in qrels_in[q].values())}
    queries, counts = build_queries(turns, positive)
    if not queries:
        raise InputError("no dataset turn has a positive qrels entry: are the query ids {Conversation_no}_{Turn_no}?", path=qrels)
    by_qid = {t.qid: t for t in turns}
    human = {q: (by_qid[q].rewrite or "").strip() for q in queries}
    missing_rewrite = [q for q, r in human.items() if not r]
    counts["human_rewrite_missing"] = len(missing_rewrite)
    human = {q: r or queries[q].text for q, r in human.items()}  # no rewrite: the raw question (counted above)
    manifest = _corpus(Path(collection) if collection else None, out, collection_format)
    report = _join_report(turns, positive, counts, {"benchmark": "qrecc", "dataset": str(dataset), "qrels": str(qrels),
                                                    "collection": None if manifest is None else manifest["source"],
                                                    "join": "query id {Conversation_no}_{Turn_no}"})
    report = write_layout(out, queries, Qrels.from_checked({q: positive[q] for q in queries}, name="qrels.tsv"),
                          human=human if any(by_qid[q].rewrite for q in queries) else None,
                          specs=specs or default_specs(), report=report)
    _unmatched_warning(report)
    return report


def _filter_queries(originals: QuerySet, qrels: Qrels, what: str, path) -> tuple[dict[str, Query], dict]:
    kept = {q: originals[q] for q in originals.ids() if q in qrels}
    no_text = [q for q in qrels if q not in originals]
    if no_text:
        raise InputError(f"{len(no_text)} qrels query id(s) have no query text, e.g. {no_text[:10]}", path=path)
    dropped = [q for q in originals.ids() if q not in qrels]
    return kept, {"queries": len(kept), "dropped_without_qrels": len(dropped), "dropped_examples": dropped[:LISTED], "source": what}


def _qrels_any(path: Path) -> Qrels:
    """Qrels in BEIR TSV (header), TREC (4 fields, MS MARCO's tab-separated ``qrels.dev.tsv``) or JSON."""
    from ..io._lines import read_lines

    first = next((line for _, line in read_lines(path) if line.strip()), "")
    fmt = "json" if path.suffix.lower() == ".json" else "trec" if len(first.split()) == 4 else "beir"
    return load_qrels(path, format=fmt)


def convert_msmarco(queries: str | Path, qrels: str | Path, out: str | Path, *, collection: str | Path | None = None) -> dict:
    """MS MARCO (``collection.tsv`` + ``queries.*.tsv`` + qrels) -> vdr's layout; only queries with
    qrels are kept (the others counted).

    Raises:
        InputError: malformed files; a qrels query without text.
    """
    out = Path(out)
    q = load_queries(queries, format="tsv")
    qr = _qrels_any(Path(qrels))
    kept, counts = _filter_queries(q, qr, str(queries), qrels)
    manifest = _corpus(Path(collection) if collection else None, out, "msmarco")
    report = {"benchmark": "msmarco", "queries": str(queries), "qrels": str(qrels), "counts": counts,
              "collection": None if manifest is None else manifest["source"]}
    return write_layout(out, kept, Qrels.from_checked({k: dict(qr[k]) for k in kept}, name="qrels.tsv"), human=None, specs=(), report=report)


def convert_beir(beir_dir: str | Path, out: str | Path, *, split: str = "test", corpus: bool = True) -> dict:
    """A BEIR dataset folder (``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv``) -> vdr's layout.

    Raises:
        InputError: missing or malformed files.
    """
    d, out = Path(beir_dir), Path(out)
    qrels_path = d / "qrels" / f"{split}.tsv"
    qr = load_qrels(qrels_path, format="beir")
    q = load_queries(d / "queries.jsonl", format="jsonl")
    kept, counts = _filter_queries(q, qr, str(d / "queries.jsonl"), qrels_path)
    manifest = _corpus(d / "corpus.jsonl" if corpus else None, out, "beir")
    report = {"benchmark": "beir", "split": split, "counts": counts, "collection": None if manifest is None else manifest["source"]}
    return write_layout(out, kept, Qrels.from_checked({k: dict(qr[k]) for k in kept}, name="qrels.tsv"), human=None, specs=(), report=report)
