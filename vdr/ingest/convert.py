"""``vdr convert``: public passage benchmarks -> vdr's layout (issue 15.2, issue 18.5, issue 24.1).

Each converter writes into ``OUT``::

    OUT/passages.jsonl, ids.txt, empty_ids.txt, corpus.json   the passage corpus (when a collection is given;
                                                               see vdr.ingest.passages)
    OUT/queries.jsonl      the original queries: the raw last turn, ``history`` = earlier turns
                           ``{"question", "answer"}``, oldest first (conversational sets)
    OUT/qrels.tsv          BEIR qrels
    OUT/variants/*.jsonl   built-in rewrite variants: ``concat-q`` (history questions + question; with
                           the default settings the same texts as ``vdr evaluate``'s built-in ``concat``
                           variant, so it is not suggested as ``--rewrites``), ``concat-qa`` (questions
                           and answers + question) and ``human`` (the dataset's own rewrite, QReCC)
    OUT/conversion.json    what the conversion did: counts, dropped turns, unmatched gold, the id
                           scheme, settings, the suggested ``vdr evaluate`` command

Query ids of TopiOCQA and QReCC (issue 24.1) are ConvSearch-R1's by default,
``topiocqa-dev_<Conversation_no>_<Turn_no>`` and ``QReCC-Test_<Conversation_no>_<Turn_no>``
(``topiocqa-train_``/``QReCC-Train_`` for the training splits), so that its eval files, qrels and
runs join as they are; ``id_scheme="conv_turn"`` writes ``<Conversation_no>_<Turn_no>``. The scheme
and the split are recorded in ``conversion.json`` (``id_scheme``); ``vdr evaluate`` maps files
written in the other scheme (:mod:`vdr.io.turn_ids`).

Rules (issue 18.5, issue 24.1):

* history comes from a record's ``Context`` (questions and answers alternating) when it has one,
  else from the earlier records of its conversation; a ``Context`` that disagrees with earlier
  records in the same file is warned about, naming the turns (:func:`build_queries`);
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
import shlex
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..corpus import MANIFEST_FILE, PAGES_FILE
from ..errors import InputError, VdrWarning
from ..io.atomic import write_text_atomic
from ..io.formats import load_qrels, load_queries, save_qrels, save_queries
from ..io.turn_ids import DEFAULT_ID_SCHEME, EVAL_SPLITS, PREFIXES, SPLITS, check_scheme, parse_turn_id, prefix_of, turn_id
from ..text import DEFAULT_MAX_QUERY_TOKENS, BudgetedQuery, budget_config, fit_query_budget
from ..types import Qrels, Query, QuerySet

__all__ = ["convert", "CONVERTERS", "EMPTY_ANSWER", "FIELDS", "ConcatSpec", "concat_text", "concat_query", "convert_topiocqa", "convert_qrecc",
           "convert_msmarco", "convert_beir"]

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

#: the fields of a dataset record, each with the names it goes by: the releases (TopiOCQA
#: ``topiocqa_dev.json``; QReCC ``qrecc_test.json``), SCAI-QReCC-21's turns files
#: (``Truth_answer``, ``Truth_rewrite``) and ConvSearch-R1's processed files (``data/topiocqa/dev.json``,
#: ``data/qrecc/test_v3.json``: ``question``, ``context``, ``conv_id``/``conv_no``, ...)
FIELDS: dict[str, tuple[str, ...]] = {
    "conversation": ("Conversation_no", "conv_id", "conv_no"),
    "turn": ("Turn_no", "turn_id", "turn_no"),
    "question": ("Question", "question"),
    "answer": ("Answer", "Truth_answer"),
    "rewrite": ("Rewrite", "Truth_rewrite", "truth_rewrite"),
    "context": ("Context", "context"),
}


@dataclass(frozen=True)
class Turn:
    """One conversation turn of a dataset file.

    Attributes:
        conv, turn: ``Conversation_no`` (digits, as text) and ``Turn_no``.
        question, answer: the turn's question and answer (``""`` when the record has none).
        rewrite: the human rewrite (QReCC), else ``None``.
        index: the record's 1-based index in the file.
        context: the record's ``Context`` as ``((question, answer), ...)`` of the earlier turns, oldest
            first; ``None`` when the record has no ``Context``.
    """

    conv: str
    turn: int
    question: str
    answer: str
    rewrite: str | None
    index: int
    context: tuple[tuple[str, str], ...] | None = None

    @property
    def key(self) -> str:
        """The join key ``{Conversation_no}_{Turn_no}`` (not the query id: :func:`vdr.io.turn_ids.turn_id`)."""
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


def _conv_turn(o: dict, path: Path, i: int) -> tuple[str, int, str | None]:
    """``(conversation, turn, ConvSearch-R1 prefix or None)`` of a gold or dataset entry: the
    conversation and turn fields (:data:`FIELDS`), else an id field ending in ``<conv>_<turn>``
    (``"topiocqa-dev_12_3"``, whose prefix is returned)."""
    if any(k in o for k in FIELDS["conversation"]):
        conv = str(_as_int(_key(o, FIELDS["conversation"], path, i, "conversation number"), path, i, "Conversation_no"))
        return conv, _as_int(_key(o, FIELDS["turn"], path, i, "turn number"), path, i, "Turn_no"), None
    for k in ("id", "qid", "sample_id"):
        m = _TRAILING_KEY.search(str(o.get(k, "")))
        if m:
            parsed = parse_turn_id(str(o[k]))
            return str(int(m.group(1))), int(m.group(2)), parsed.prefix if parsed else None
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


def _field(obj: dict, what: str, path: Path, i: int, required: bool = True) -> str | None:
    """The string value of field ``what`` (:data:`FIELDS`), ``None`` when absent and not required."""
    name = next((n for n in FIELDS[what] if n in obj), None)
    v = None if name is None else obj[name]
    if v is None and not required:
        return None
    if name is None:
        raise InputError(f"entry {i}: missing {what} ({' or '.join(FIELDS[what])})", path=path)
    if not isinstance(v, str):
        raise InputError(f"entry {i}: {name!r} must be a string, got {type(v).__name__}", path=path)
    return v


def _context(obj: dict, path: Path, i: int, qid: str) -> tuple[tuple[str, str], ...] | None:
    """The record's ``Context`` (questions and answers alternating, oldest first) as pairs, ``None``
    when the record has none.

    Raises:
        InputError: not a list of strings, or an odd number of them.
    """
    name = next((n for n in FIELDS["context"] if n in obj), None)
    if name is None or obj[name] is None:
        return None
    ctx = obj[name]
    if not isinstance(ctx, list) or not all(isinstance(x, str) for x in ctx):
        raise InputError(f"entry {i}: {name!r} must be a list of strings (questions and answers alternating)", path=path, id=qid)
    if len(ctx) % 2:
        raise InputError(f"entry {i}: {name!r} must alternate questions and answers (an even number of strings), got {len(ctx)}",
                         path=path, id=qid)
    return tuple((ctx[j], ctx[j + 1]) for j in range(0, len(ctx), 2))


def load_turns(path: str | Path) -> list[Turn]:
    """The turns of a TopiOCQA or QReCC dataset file, in file order: a JSON list (or JSON lines) of
    records with a conversation and turn number, ``Question``, optionally ``Answer``, ``Rewrite`` and
    ``Context`` (each under the names of :data:`FIELDS`).

    Raises:
        InputError: not a list of objects, a missing or mistyped field, a malformed ``Context``, a
            (conversation, turn) pair given twice (entry numbers named).
    """
    path = Path(path)
    data = _load_json(path)
    if not isinstance(data, list) or not all(isinstance(o, dict) for o in data):
        raise InputError("expected a JSON list of turn objects", path=path)
    turns: list[Turn] = []
    seen: dict[tuple[str, int], int] = {}
    for i, o in enumerate(data, start=1):
        conv, no, _ = _conv_turn(o, path, i)
        if (conv, no) in seen:
            raise InputError(f"entry {i}: conversation {conv} turn {no} given twice (first: entry {seen[conv, no]})", path=path, id=f"{conv}_{no}")
        seen[conv, no] = i
        answer = next((o[n] for n in FIELDS["answer"] if n in o), None)
        turns.append(Turn(conv, no, _field(o, "question", path, i), answer if isinstance(answer, str) else "",
                          _field(o, "rewrite", path, i, required=False), i, _context(o, path, i, f"{conv}_{no}")))
    return turns


def _agrees(earlier: Turn, context: tuple[tuple[str, str], ...]) -> bool:
    """Whether ``Context`` holds ``earlier``'s question and answer at its turn's place (turn n is the
    n-th pair; surrounding white space ignored)."""
    j = earlier.turn - 1
    return 0 <= j < len(context) and context[j][0].strip() == earlier.question.strip() and context[j][1].strip() == earlier.answer.strip()


def _bare_id(conv: str, turn: int) -> str:
    return f"{conv}_{turn}"


def build_queries(turns: Iterable[Turn], gold: Mapping[str, object], qid: Callable[[str, int], str] = _bare_id) -> tuple[dict[str, Query], dict]:
    """Conversational queries of the turns that have gold, each with its history (issue 24.1).

    History: the record's ``Context`` when it has one (questions and answers alternating, as the
    dataset gives it), else the earlier records of the same conversation in the file (gold or not).
    When a turn has a ``Context`` and earlier records of its conversation are in the file too, and
    some of them differ from ``Context`` (turn ``n`` is ``Context``'s ``n``-th pair), the turn is
    counted and listed (``history_disagreements``). A turn without ``Context`` whose earlier turns
    are not all in the file (turns are numbered from 1) is counted and listed too
    (``history_incomplete``). An empty answer becomes :data:`EMPTY_ANSWER` (counted).

    Args:
        turns: the dataset's turns (:func:`load_turns`).
        gold: the join keys ``{Conversation_no}_{Turn_no}`` that have gold.
        qid: the query id of ``(conversation, turn)`` (default ``{conv}_{turn}``).

    Returns:
        ``({query id: Query}, counts)``: counts ``turns``, ``queries``, ``dropped_without_gold`` (with
        the first ids listed), ``empty_answers_replaced``, ``history_from_context``,
        ``history_from_records``, ``history_disagreements`` and ``history_incomplete`` (``{"count",
        "examples"}``; a disagreement example is ``{"query", "turns"}``, the earlier turns that differ).
    """
    by_conv: dict[str, list[Turn]] = {}
    for t in turns:
        by_conv.setdefault(t.conv, []).append(t)
    out: dict[str, Query] = {}
    dropped: list[str] = []
    disagree: list[dict] = []
    incomplete: list[str] = []
    empty = from_context = 0
    for conv_turns in by_conv.values():
        conv_turns.sort(key=lambda t: t.turn)
        for j, t in enumerate(conv_turns):
            if t.key not in gold:
                dropped.append(qid(t.conv, t.turn))
                continue
            earlier = conv_turns[:j]
            if t.context is not None:
                pairs = list(t.context)
                from_context += 1
                differ = [e.turn for e in earlier if not _agrees(e, t.context)]
                if differ:
                    disagree.append({"query": qid(t.conv, t.turn), "turns": differ})
            else:
                pairs = [(e.question, e.answer) for e in earlier]
                if [e.turn for e in earlier] != list(range(1, t.turn)):
                    incomplete.append(qid(t.conv, t.turn))
            empty += sum(1 for _, a in pairs if not a.strip())
            out[qid(t.conv, t.turn)] = Query(t.question, tuple(q for q, _ in pairs), tuple(a if a.strip() else EMPTY_ANSWER for _, a in pairs))
    counts = {"turns": sum(len(v) for v in by_conv.values()), "queries": len(out), "dropped_without_gold": len(dropped),
              "dropped_examples": dropped[:LISTED], "empty_answers_replaced": empty, "empty_answer_placeholder": EMPTY_ANSWER,
              "history_from_context": from_context, "history_from_records": len(out) - from_context,
              "history_disagreements": {"count": len(disagree), "examples": disagree[:LISTED]},
              "history_incomplete": {"count": len(incomplete), "examples": incomplete[:LISTED]}}
    return out, counts


def _history_warnings(counts: dict, dataset: Path) -> None:
    """A :class:`~vdr.errors.VdrWarning` for the turns whose ``Context`` disagrees with the earlier
    records, and one for the turns whose history misses earlier turns (:func:`build_queries`)."""
    import warnings

    d, inc = counts["history_disagreements"], counts["history_incomplete"]
    if d["count"]:
        shown = ", ".join(f"{x['query']} (turn{'s' if len(x['turns']) > 1 else ''} {', '.join(map(str, x['turns'][:5]))})"
                          for x in d["examples"][:5])
        warnings.warn(f"{dataset}: {d['count']} turn(s) carry a Context that differs from the earlier records of their conversation"
                      f" in the file; their history is taken from Context (listed in {REPORT_FILE}): {shown}", VdrWarning, stacklevel=3)
    if inc["count"]:
        warnings.warn(f"{dataset}: {inc['count']} turn(s) have no Context and not all earlier turns of their conversation are in"
                      f" the file; their history holds the turns present only (listed in {REPORT_FILE}), e.g."
                      f" {', '.join(inc['examples'][:5])}", VdrWarning, stacklevel=3)


# --------------------------------------------------------------------------------------------- id scheme


def _split(benchmark: str, split: str | None, dataset: Path, prefixes: Iterable[str], gold_what: str) -> tuple[str, str]:
    """``(split, where it came from)``: ``--split``; else the ConvSearch-R1 prefix of the gold/qrels
    ids; else the dataset's file name (``train``, then the evaluation split's name in it); else the
    evaluation split (``dev`` for TopiOCQA, ``test`` for QReCC).

    Raises:
        InputError: an unknown split; prefixes of another benchmark or of several splits; a
            ``--split`` that the ids contradict.
    """
    known = {PREFIXES[benchmark, s]: s for s in SPLITS[benchmark]}
    prefixes = set(prefixes)
    other = sorted(p for p in prefixes if p not in known)
    if other:
        raise InputError(f"the {gold_what} ids carry ConvSearch-R1 prefixes of another benchmark ({', '.join(other)});"
                         f" this is vdr convert {benchmark}")
    implied = sorted({known[p] for p in prefixes})
    if len(implied) > 1:
        raise InputError(f"the {gold_what} ids mix ConvSearch-R1 splits ({', '.join(sorted(prefixes))}): convert one split at a time")
    if split is not None:
        if split not in SPLITS[benchmark]:
            raise InputError(f"unknown {benchmark} split {split!r}; known: {', '.join(SPLITS[benchmark])}")
        if implied and implied[0] != split:
            raise InputError(f"--split {split} but the {gold_what} ids are ConvSearch-R1's {PREFIXES[benchmark, implied[0]]}_...")
        return split, "--split"
    if implied:
        return implied[0], f"the {gold_what} ids' prefix"
    name = dataset.name.lower()
    if "train" in name:
        return "train", "the dataset file name"
    if EVAL_SPLITS[benchmark] in name:
        return EVAL_SPLITS[benchmark], "the dataset file name"
    return EVAL_SPLITS[benchmark], f"default (the evaluation split; --split {'|'.join(SPLITS[benchmark])} to choose)"


def _scheme_record(scheme: str, benchmark: str, split: str, split_from: str) -> dict:
    """``conversion.json``'s ``id_scheme``: the scheme, the id format, the split and where it came from."""
    prefix = prefix_of(benchmark, split)
    return {"scheme": scheme, "format": f"{prefix}_<Conversation_no>_<Turn_no>" if scheme == "convsearch" else "<Conversation_no>_<Turn_no>",
            "benchmark": benchmark, "split": split, "split_from": split_from, "convsearch_prefix": prefix,
            "source": "ConvSearch-R1 (BeastyZ/ConvSearch-R1) preprocess/topiocqa/preprocess.py, preprocess/qrecc/preprocess_v3.py",
            "mapping": "ids of the other scheme in --rewrites, --run and qrels files are mapped by vdr evaluate (vdr.io.turn_ids)"}


def _qid_function(scheme: str, benchmark: str, split: str) -> Callable[[str, int], str]:
    check_scheme(scheme)
    return lambda conv, turn: turn_id(conv, turn, scheme=scheme, benchmark=benchmark, split=split)


# --------------------------------------------------------------------------------------------- writing


def _corpus(collection: Path | None, out: Path, fmt: str) -> dict | None:
    if collection is None:
        return None
    from .passages import ingest_passages

    return ingest_passages(collection, out, format=fmt).manifest


#: ``vdr evaluate``'s built-in ``concat`` variant: history questions, oldest first, space-joined,
#: within the default budget (vdr.experiment.inputs.concat_variant)
_BUILTIN_CONCAT = ConcatSpec("concat", answers=False)


def _same_as_builtin_concat(queries: Mapping[str, Query], spec: ConcatSpec) -> bool:
    """Whether ``spec`` gives every query the text of ``vdr evaluate``'s built-in ``concat`` variant
    (then passing it as ``--rewrites`` would evaluate the same texts twice)."""
    return all(concat_query(q, spec).text == concat_query(q, _BUILTIN_CONCAT).text for q in queries.values())


def _evaluate_hint(out: Path, variants: dict, benchmark: str | None, corpus: bool = True) -> str:
    """The ``vdr evaluate`` command suggested in ``conversion.json`` and by the CLI, runnable as
    printed (paths shell-quoted): the corpus ``out`` (or, when no collection was converted,
    ``CORPUS_DIR`` with ``out``'s queries and qrels), the variants that differ from the built-in
    ones (a variant with the built-in ``concat``'s texts is left out) and ``--out OUT/results``.

    >>> _evaluate_hint(Path("data/msmarco"), {}, None)
    'vdr evaluate data/msmarco --backend lexical --out data/msmarco/results'
    """
    q = shlex.quote
    preset = f" --bm25-preset {benchmark} --bm25-analyzer lucene --protocol convsearch" if benchmark in SPLITS else ""
    passed = ["--rewrites " + q(f"{n}={v['file']}") for n, v in variants.items() if "same_texts_as" not in v]
    where = q(str(out)) if corpus else f"CORPUS_DIR --queries {q(str(out / 'queries.jsonl'))} --qrels {q(str(out / 'qrels.tsv'))}"
    return (f"vdr evaluate {where} --backend lexical{preset}" + "".join(f" {p}" for p in passed)
            + f" --out {q(str(out / 'results'))}")


def write_layout(out: Path, queries: dict[str, Query], qrels: Qrels, *, human: dict[str, str] | None,
                 specs: Sequence[ConcatSpec], report: dict) -> dict:
    """Write ``queries.jsonl``, ``qrels.tsv``, ``variants/*.jsonl`` and ``conversion.json`` (atomically).

    A concatenation whose texts equal ``vdr evaluate``'s built-in ``concat`` variant for every query
    (``concat-q`` with the default settings) is still written, marked ``same_texts_as: "concat"``
    in the report and left out of the suggested ``evaluate`` command (issue 24.5).

    Returns:
        the report, with ``variants`` (file and settings of each), budget counts and ``evaluate``
        (the suggested command) added.
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
            if _same_as_builtin_concat(queries, spec):
                variants[spec.name]["same_texts_as"] = "concat (vdr evaluate's built-in variant: not passed as --rewrites)"
    if human:
        path = out / VARIANTS_DIR / "human.jsonl"
        save_queries(QuerySet.from_texts(human, name="human"), path)
        variants["human"] = {"file": str(path), "source": "the dataset's human rewrite"}
    has_corpus = any((out / f).is_file() for f in (MANIFEST_FILE, PAGES_FILE))  # converted now, or ingested there before
    hint = _evaluate_hint(out, variants, report.get("benchmark"), corpus=has_corpus)
    report = dict(report, variants=variants, evaluate=hint)
    write_text_atomic(out / REPORT_FILE, json.dumps(report, indent=1, ensure_ascii=False) + "\n")
    return report


def _unmatched_warning(report: dict) -> None:
    n = report.get("gold_without_turn", {}).get("count", 0)
    if n:
        import warnings

        from ..progress import counted

        warnings.warn(f"{counted(n, 'gold entry', 'gold entries')} {'has' if n == 1 else 'have'} no dataset turn (listed in {REPORT_FILE}), e.g. "
                      f"{report['gold_without_turn']['examples'][:5]}", VdrWarning, stacklevel=3)


# --------------------------------------------------------------------------------------------- converters


@dataclass(frozen=True)
class _Gold:
    """Gold of a conversational benchmark keyed by join key ``{conv}_{turn}`` (ids that are no turn
    id stay under their own id and join nothing); ``prefixes``: ConvSearch-R1 prefixes seen."""

    judgments: dict[str, dict[str, int]]
    entries: int
    prefixes: frozenset
    multiple_positives: int = 0


def _looks_like_json(path: Path) -> bool:
    from ..io._lines import read_lines

    first = next((line for _, line in read_lines(path) if line.strip()), "")
    return first.lstrip()[:1] in ("[", "{")


def _gold_from_qrels(qrels: Qrels) -> _Gold:
    """TREC/JSON qrels (ConvSearch-R1's ``dev.trec`` / ``test.trec``, or ``<conv>_<turn>`` ids) keyed by join key."""
    out: dict[str, dict[str, int]] = {}
    prefixes = set()
    for q in qrels:
        k = parse_turn_id(q)
        if k is not None and k.prefix is not None:
            prefixes.add(k.prefix)
        key = q if k is None else f"{int(k.conv)}_{int(k.turn)}"
        out.setdefault(key, {}).update(qrels[q])
    return _Gold(out, len(qrels), frozenset(prefixes))


def _topiocqa_gold(path: Path) -> _Gold:
    """TopiOCQA's gold: the DPR retriever JSON (``positive_ctxs[].passage_id``; entries keyed by
    ``conv_id``/``Conversation_no`` and ``turn_id``/``Turn_no``, never by position), or TREC qrels
    (ConvSearch-R1's ``data/topiocqa/dev.trec``)."""
    if not _looks_like_json(path):
        return _gold_from_qrels(load_qrels(path, format="trec"))
    data = _load_json(path)
    if not isinstance(data, list) or not all(isinstance(o, dict) for o in data):
        raise InputError("expected a JSON list of gold objects (DPR format with positive_ctxs) or TREC qrels", path=path)
    gold: dict[str, dict[str, int]] = {}
    prefixes = set()
    multiple = 0
    for i, o in enumerate(data, start=1):
        conv, turn, prefix = _conv_turn(o, path, i)
        if prefix is not None:
            prefixes.add(prefix)
        ctxs = o.get("positive_ctxs") or []
        if not isinstance(ctxs, list):
            raise InputError(f"entry {i}: 'positive_ctxs' must be a list", path=path, id=f"{conv}_{turn}")
        ids = {}
        for c in ctxs:
            pid = c.get("passage_id") if isinstance(c, dict) else None
            if pid is None or isinstance(pid, bool) or not isinstance(pid, (str, int)) or str(pid).strip() == "":
                raise InputError(f"entry {i}: a positive context without 'passage_id'", path=path, id=f"{conv}_{turn}")
            ids[str(pid).strip()] = 1
        multiple += len(ids) > 1
        if ids:
            gold.setdefault(f"{conv}_{turn}", {}).update(ids)  # a repeated entry adds its passages (entries are counted)
    return _Gold(gold, len(data), frozenset(prefixes), multiple)


def _join_report(turns: list[Turn], gold_keys: Iterable[str], counts: dict, extra: dict, qid: Callable[[str, int], str]) -> dict:
    have = {t.key for t in turns}
    orphan = []
    for k in gold_keys:
        if k not in have:
            c, _, t = k.partition("_")
            orphan.append(qid(c, int(t)) if c.isdigit() and t.isdigit() else k)
    orphan.sort()
    return {**extra, "counts": counts, "gold_without_turn": {"count": len(orphan), "examples": orphan[:LISTED]}}


def convert_topiocqa(dataset: str | Path, gold: str | Path, out: str | Path, *, collection: str | Path | None = None,
                     collection_format: str = "tsv", specs: Sequence[ConcatSpec] | None = None, id_scheme: str = DEFAULT_ID_SCHEME,
                     split: str | None = None) -> dict:
    """TopiOCQA (dataset JSON + gold [+ ``full_wiki_segments.tsv``]) -> vdr's layout in ``out``.

    Args:
        dataset: the release's ``topiocqa_dev.json`` / ``topiocqa_train.json`` (or ConvSearch-R1's
            processed ``data/topiocqa/dev.json``); history from each record's ``Context``
            (:func:`build_queries`).
        gold: the DPR retriever JSON (``data/retriever/all_history/dev.json``: every
            ``positive_ctxs[].passage_id`` is relevant) or TREC qrels (ConvSearch-R1's ``dev.trec``).
        out: the folder to write.
        collection: the passage collection (omit to reuse a corpus ingested elsewhere).
        collection_format: its format (:func:`vdr.ingest.passages.ingest_passages`).
        specs: the concatenation variants (default :func:`default_specs`).
        id_scheme: ``"convsearch"`` (``topiocqa-dev_<conv>_<turn>``, ConvSearch-R1's) or
            ``"conv_turn"`` (``<conv>_<turn>``); recorded as ``id_scheme`` (:mod:`vdr.io.turn_ids`).
        split: ``"dev"`` or ``"train"`` (the id prefix); default: from the gold ids' prefix, else the
            dataset's file name, else ``dev`` (recorded with where it came from).

    Returns:
        the conversion report (also ``out/conversion.json``).

    Raises:
        InputError: malformed files (entry numbers named); no turn with gold; an unknown scheme or
            split, or one the gold ids contradict.
    """
    out, dataset = Path(out), Path(dataset)
    check_scheme(id_scheme)
    turns = load_turns(dataset)
    g = _topiocqa_gold(Path(gold))
    split, split_from = _split("topiocqa", split, dataset, g.prefixes, "gold")
    qid = _qid_function(id_scheme, "topiocqa", split)
    queries, counts = build_queries(turns, g.judgments, qid)
    if not queries:
        raise InputError("no dataset turn has a gold passage: are these files of the same split?", path=gold)
    by_key = {qid(t.conv, t.turn): t.key for t in turns}
    qrels = Qrels.from_checked({q: dict(g.judgments[by_key[q]]) for q in queries}, name="qrels.tsv")
    counts["gold_entries"] = g.entries
    counts["gold_entries_with_several_positives"] = g.multiple_positives
    manifest = _corpus(Path(collection) if collection else None, out, collection_format)
    report = _join_report(turns, g.judgments, counts, {"benchmark": "topiocqa", "dataset": str(dataset), "gold": str(gold),
                                                       "collection": None if manifest is None else manifest["source"],
                                                       "join": "(Conversation_no, Turn_no)",
                                                       "id_scheme": _scheme_record(id_scheme, "topiocqa", split, split_from)}, qid)
    report = write_layout(out, queries, qrels, human=None, specs=specs or default_specs(), report=report)
    _unmatched_warning(report)
    _history_warnings(counts, dataset)
    return report


def convert_qrecc(dataset: str | Path, qrels: str | Path, out: str | Path, *, collection: str | Path | None = None,
                  collection_format: str = "auto", specs: Sequence[ConcatSpec] | None = None, id_scheme: str = DEFAULT_ID_SCHEME,
                  split: str | None = None) -> dict:
    """QReCC (dataset JSON + qrels [+ collection]) -> vdr's layout in ``out``; the human rewrite
    becomes the ``human`` variant. A turn is kept when the qrels give it a passage with a positive grade.

    Args:
        dataset: ``qrecc_test.json`` (``Question``, ``Answer``, ``Rewrite``, ``Context``), the
            SCAI-QReCC-21 turns file ConvSearch-R1 reads (``scai-qrecc21-test-turns.json``:
            ``Truth_answer``, ``Truth_rewrite``, no ``Context``) or ConvSearch-R1's ``test_v3.json``;
            history from ``Context`` when the records have it, else from the earlier records.
        qrels: TREC (or JSON) qrels; query ids ``QReCC-Test_<conv>_<turn>`` (ConvSearch-R1's
            ``data/qrecc/test.trec``) or ``<conv>_<turn>``.
        out, collection, collection_format, specs: as :func:`convert_topiocqa`.
        id_scheme: ``"convsearch"`` (``QReCC-Test_<conv>_<turn>``) or ``"conv_turn"``.
        split: ``"test"`` or ``"train"``; default: from the qrels ids' prefix, else the dataset's
            file name, else ``test``.

    Raises:
        InputError: malformed files; no turn with gold; an unknown scheme or split.
    """
    out, dataset = Path(out), Path(dataset)
    check_scheme(id_scheme)
    turns = load_turns(dataset)
    g = _gold_from_qrels(load_qrels(qrels, format="json" if str(qrels).endswith(".json") else "trec"))
    split, split_from = _split("qrecc", split, dataset, g.prefixes, "qrels")
    qid = _qid_function(id_scheme, "qrecc", split)
    positive = {k: row for k, row in g.judgments.items() if any(v > 0 for v in row.values())}
    queries, counts = build_queries(turns, positive, qid)
    if not queries:
        raise InputError("no dataset turn has a positive qrels entry: are the query ids QReCC-Test_<conv>_<turn> or <conv>_<turn>?",
                         path=qrels)
    by_qid = {qid(t.conv, t.turn): t for t in turns}
    human = {q: (by_qid[q].rewrite or "").strip() for q in queries}
    missing_rewrite = [q for q, r in human.items() if not r]
    counts["human_rewrite_missing"] = len(missing_rewrite)
    human = {q: r or queries[q].text for q, r in human.items()}  # no rewrite: the raw question (counted above)
    manifest = _corpus(Path(collection) if collection else None, out, collection_format)
    report = _join_report(turns, positive, counts, {"benchmark": "qrecc", "dataset": str(dataset), "qrels": str(qrels),
                                                    "collection": None if manifest is None else manifest["source"],
                                                    "join": "(Conversation_no, Turn_no) of the qrels query ids",
                                                    "id_scheme": _scheme_record(id_scheme, "qrecc", split, split_from)}, qid)
    report = write_layout(out, queries, Qrels.from_checked({q: dict(positive[by_qid[q].key]) for q in queries}, name="qrels.tsv"),
                          human=human if any(by_qid[q].rewrite for q in queries) else None,
                          specs=specs or default_specs(), report=report)
    _unmatched_warning(report)
    _history_warnings(counts, dataset)
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


#: ``vdr convert NAME`` -> the function it calls.
CONVERTERS: dict[str, Callable[..., dict]] = {"topiocqa": convert_topiocqa, "qrecc": convert_qrecc, "msmarco": convert_msmarco,
                                               "beir": convert_beir}


def convert(benchmark: str, *args: Any, **kwargs: Any) -> dict:
    """``vdr convert BENCHMARK``: a public passage benchmark into vdr's layout (corpus,
    ``queries.jsonl``, ``qrels.tsv``, ``variants/``, ``conversion.json``); the other arguments are
    those of the benchmark's function:

    * ``"topiocqa"``: :func:`convert_topiocqa` ``(dataset, gold, out, *, collection=None, ...)``
    * ``"qrecc"``: :func:`convert_qrecc` ``(dataset, qrels, out, *, collection=None, ...)``
    * ``"msmarco"``: :func:`convert_msmarco` ``(queries, qrels, out, *, collection=None)``
    * ``"beir"``: :func:`convert_beir` ``(beir_dir, out, *, split="test")``

    >>> sorted(CONVERTERS)
    ['beir', 'msmarco', 'qrecc', 'topiocqa']

    Returns:
        the conversion report (also ``OUT/conversion.json``); ``report["evaluate"]``: the
        ``vdr evaluate`` command to run next.

    Raises:
        InputError: an unknown ``benchmark`` (the known ones named), or what that function raises.
    """
    fn = CONVERTERS.get(str(benchmark).lower())
    if fn is None:
        raise InputError(f"unknown benchmark {benchmark!r} for convert; choose from {', '.join(CONVERTERS)}")
    return fn(*args, **kwargs)
