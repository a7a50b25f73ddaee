"""``vdr rewrite``: one rewrite variant of a query set, with a cache and a list of failures.

Every query is either rewritten or listed as failed with its reason -- never silently missing:

* ``OUT`` (BEIR ``queries.jsonl``: ``_id``, ``text``) holds the rewrites in the input order;
  failed ids are left out (``vdr evaluate`` then names them: a rewrite file must hold every id),
  or, with ``fill_failed="original"``, written with the original text (and still listed as failed).
* ``OUT`` with suffix ``.failures.jsonl`` lists ``{"_id", "reason"}`` per failed query (removed
  when a run has no failure); ``.meta.json`` records template, model, settings and counts.
* Cache (JSONL, :class:`vdr.llm.AnswerCache`, the judge's cache too): keyed by (model, template name
  and version, history word budget, query text, history); only successful rewrites are cached, so
  a rerun retries exactly the failed queries.

Failed ids and ``vdr evaluate`` (the policy): a rewrite variant must hold every query id, so the
query set of every variant -- and the paired comparison -- is the same; failed ids are never
dropped from the comparison. By default ``OUT`` lacks them and ``vdr evaluate`` refuses the
variant with an :class:`~vdr.errors.AlignmentError` that counts them and names the failures file
(rerun ``vdr rewrite``: only the failed queries are asked again). With ``--fill-failed original``
a failed query is evaluated with its original text (its rewrite gains exactly 0 over the
original: a conservative choice), and ``vdr evaluate`` warns how many ids of the variant stand in
this way, naming the failures file (:func:`read_failures`).

Failures: HTTP errors and timeouts after the retries; the per-query ``deadline`` (seconds, retries
and backoff included) passing; an answer cut by the token limit (``finish_reason: "length"``, e.g. a
reasoning model still thinking: "length: no final answer"); an empty answer; an answer without
the template's tags; the call budget running out.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import json
import math
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..options import with_keywords
from ..io import load_queries
from ..io.atomic import atomic_write, write_text_atomic
from ..llm import LLM_FIELDS, AnswerCache, AnswerTruncated, BudgetExhausted, LLMError, LLMSettings, split_keywords
from ..types import Query, QuerySet
from .templates import Template, load_template

__all__ = ["rewrite", "RewriteOptions", "RewriteReport", "check_time_limit", "failures_file", "read_failures", "CACHE_FORMAT",
           "REWRITE_LLM"]

CACHE_FORMAT = "vdr-rewrite-1"

REWRITE_LLM = LLMSettings(timeout=30.0, max_retries=2, backoff=1.0, max_tokens=1024, concurrency=4)
"""``vdr rewrite``'s endpoint defaults (give ``endpoint`` and ``model``, or ``local``)."""


@dataclass(frozen=True)
class _Item:
    query_id: str

    def describe(self) -> str:
        return f"query {self.query_id!r} (rewrite)"


@dataclass
class RewriteReport:
    """What :func:`rewrite` did.

    Attributes:
        total, rewritten (new answers), cached (from the cache): counts.
        failed: ``{query_id: reason}`` in input order.
        history_cut: queries whose history was shortened by the word budget.
        out, failures_path, meta_path: files written (``failures_path`` None when nothing failed).
        settings: template, model and settings (JSON-ready).
    """

    total: int
    rewritten: int
    cached: int
    failed: dict[str, str]
    history_cut: int
    out: Path
    failures_path: Path | None
    meta_path: Path
    settings: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when no query failed."""
        return not self.failed

    def to_json(self) -> dict:
        """The ``.meta.json`` document: counts, failed ids, files and settings."""
        return {"total": self.total, "rewritten": self.rewritten, "cached": self.cached, "failed": len(self.failed),
                "failed_ids": list(self.failed), "history_cut": self.history_cut, "out": str(self.out),
                "failures": None if self.failures_path is None else str(self.failures_path), **self.settings}


def check_time_limit(value: object, what: str) -> float:
    """``value`` as seconds > 0.

    Raises:
        InputError: ``None``/``"none"``/``"null"`` (waiting forever is refused), not a finite
            number, or <= 0.
    """
    if value is None or (isinstance(value, str) and value.strip().lower() in ("none", "null", "")):
        raise InputError(f"{what} must be a number of seconds; 'none' (wait forever) is refused")
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise InputError(f"{what} must be a number of seconds, got {value!r}") from None
    if isinstance(value, bool) or not math.isfinite(v) or v <= 0:
        raise InputError(f"{what} must be a finite number of seconds > 0, got {value!r}")
    return v


def _cache_key(model: str, tpl: Template, budget: int | None, q: Query) -> str:
    ident = [CACHE_FORMAT, model, tpl.name, tpl.version, budget, q.text, list(q.history)]
    return hashlib.sha256(json.dumps(ident, ensure_ascii=False).encode("utf-8")).hexdigest()


def _one(gen, tpl: Template, item: _Item, messages: list[dict], deadline_s: float) -> tuple[tuple[str, str] | None, str | None]:
    """``((rewrite, raw answer), None)`` or ``(None, reason)``; never raises."""
    try:
        raw = gen.ask(item, messages, deadline=time.monotonic() + deadline_s)
    except AnswerTruncated:
        return None, "length: no final answer (the answer reached the token limit)"
    except BudgetExhausted as e:
        return None, f"budget exhausted: {e}"
    except LLMError as e:
        return None, str(e)
    except Exception as e:  # an unexpected client failure is a failed query, never a missing one
        return None, f"{type(e).__name__}: {e}"
    if raw is None or not raw.strip():
        return None, "empty answer (no content)"
    rw, _ = tpl.extractor().extract(raw)
    if rw is None:
        return None, f"no rewrite in the answer (template extract {tpl.extract!r}); answer starts {raw[:120]!r}"
    rw = " ".join(rw.split())
    if not rw:
        return None, "empty rewrite"
    return (rw, raw), None


def _paths(out: Path) -> tuple[Path, Path, Path]:
    """``(failures, meta, default cache)`` paths beside ``out`` (``rw.jsonl`` -> ``rw.failures.jsonl`` ...)."""
    base = out.with_suffix("") if out.suffix else out
    return tuple(base.with_name(base.name + s) for s in (".failures.jsonl", ".meta.json", ".cache.jsonl"))


def failures_file(rewrite_path: str | Path) -> Path:
    """The failures file ``vdr rewrite`` writes beside ``rewrite_path`` (``rw.jsonl`` -> ``rw.failures.jsonl``)."""
    return _paths(Path(rewrite_path))[0]


def read_failures(rewrite_path: str | Path) -> dict[str, str]:
    """``{query_id: reason}`` from the failures file beside ``rewrite_path`` (``{}`` when there is none).

    Raises:
        InputError: a line of that file that is not a JSON object with a string ``_id`` (file and line named).
    """
    path = failures_file(rewrite_path)
    if not path.is_file():
        return {}
    out: dict[str, str] = {}
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except ValueError:
                rec = None
            if not isinstance(rec, dict) or not isinstance(rec.get("_id"), str):
                raise InputError("not a failure record {\"_id\": ..., \"reason\": ...}", path=path, line=n)
            out[rec["_id"]] = str(rec.get("reason", ""))
    return out


def _write(out: Path, queries: QuerySet, results: dict[str, str], failed: dict[str, str], fill_failed: str | None) -> Path | None:
    failures_path = _paths(out)[0]
    with atomic_write(out) as f:
        for qid, q in queries.items():
            text = results.get(qid, q.text if fill_failed == "original" and qid in failed else None)
            if text is not None:
                f.write(json.dumps({"_id": qid, "text": text}, ensure_ascii=False) + "\n")
    if failed:
        with atomic_write(failures_path) as f:
            for qid, reason in failed.items():
                f.write(json.dumps({"_id": qid, "reason": reason}, ensure_ascii=False) + "\n")
        return failures_path
    failures_path.unlink(missing_ok=True)
    return None


@dataclass(frozen=True)
class RewriteOptions:
    """Every option of :func:`rewrite` (all but ``queries``, ``template`` and ``out``), with its default.

    ``vdr.rewrite.rewrite(queries, template=..., out=..., endpoint=..., model=...)`` builds one from
    its keywords; ``options=RewriteOptions(...)`` starts from a given one (the keywords override it).

    Attributes:
        llm: the endpoint settings (:class:`~vdr.llm.LLMSettings`, default :data:`REWRITE_LLM`); as
            keywords of :func:`rewrite`: ``endpoint``, ``model`` (an OpenAI-compatible base URL and
            model name), ``api_key``, ``concurrency``, ``budget``, ``timeout`` (seconds per HTTP
            attempt; ``None`` refused), ``max_retries``, ``backoff``, ``temperature``, ``max_tokens``
            (also the ``local`` model's ``max_new_tokens``), ``json_mode``.
        local: a transformers causal-LM folder instead of an endpoint.
        cache: JSONL cache (default beside ``out``: ``OUT.cache.jsonl``).
        deadline: seconds per query, retries and backoff included (``None`` refused).
        max_history_words: history word budget (oldest turns dropped first; ``None``: no budget).
        fill_failed: ``None`` (leave failed ids out) or ``"original"`` (write the original text).
        device: device of ``local`` (default: CUDA when available).
        trust_remote_code: allow the ``local`` checkpoint's own code.
    """

    llm: LLMSettings = REWRITE_LLM
    local: str | Path | None = None
    cache: str | Path | None = None
    deadline: float = 120.0
    max_history_words: int | None = 2000
    fill_failed: str | None = None
    device: str | None = None
    trust_remote_code: bool = False




def _options(options: RewriteOptions | None, kwargs: dict[str, Any]) -> RewriteOptions:
    """``options`` (default :class:`RewriteOptions`) with the keywords of :func:`rewrite` applied.

    Raises:
        TypeError: a keyword that is neither a :class:`RewriteOptions` field nor an endpoint setting.
    """
    llm, rest = split_keywords(kwargs)
    opts = with_keywords(RewriteOptions, options, rest, "rewrite", tuple(LLM_FIELDS))
    return dataclasses.replace(opts, llm=dataclasses.replace(opts.llm, **llm)) if llm else opts


def _generator(o: RewriteOptions):
    from .generate import LocalGenerator, endpoint_generator

    if o.local is not None:
        if o.llm.endpoint:
            raise InputError("give either --endpoint (with --model) or --local MODEL_DIR, not both")
        return LocalGenerator(o.local, device=o.device, max_new_tokens=o.llm.max_tokens, budget=o.llm.budget,
                              trust_remote_code=o.trust_remote_code)
    return endpoint_generator(o.llm)


def rewrite(queries: QuerySet | str | Path, *, template: str | Path, out: str | Path, options: RewriteOptions | None = None,
            **kwargs: Any) -> RewriteReport:
    """Rewrite every query of ``queries`` with ``template`` (see the module docstring).

    Args:
        queries: a :class:`~vdr.types.QuerySet` or a BEIR ``queries.jsonl`` (``history`` optional).
        template: a shipped template name or a TOML file (:func:`~vdr.rewrite.templates.load_template`).
        out: the rewrite file to write.
        options: a :class:`RewriteOptions` (default: all defaults).
        **kwargs: any field of :class:`RewriteOptions` (``local``, ``cache``, ``deadline``,
            ``max_history_words``, ``fill_failed``, ``device``, ``trust_remote_code``) or endpoint
            setting (``endpoint``, ``model``, ``api_key``, ``concurrency``, ``budget``, ``timeout``,
            ``max_retries``, ``backoff``, ``temperature``, ``max_tokens``, ``json_mode``): documented
            there, with their defaults; they override ``options``.

    Returns:
        :class:`RewriteReport` (``report.ok`` is False when any query failed).

    Raises:
        InputError: bad queries file, template or settings (a ``None`` timeout or deadline refused).
        TypeError: a keyword that is not an option (named, with the known ones).
    """
    o = _options(options, kwargs)
    timeout, deadline = check_time_limit(o.llm.timeout, "timeout"), check_time_limit(o.deadline, "deadline")
    o = dataclasses.replace(o, llm=dataclasses.replace(o.llm, timeout=timeout), deadline=deadline)
    if o.fill_failed not in (None, "original"):
        raise InputError(f"fill_failed must be None or 'original', got {o.fill_failed!r}")
    qs = queries if isinstance(queries, QuerySet) else load_queries(queries)
    tpl = load_template(template)
    out = Path(out)
    gen = _generator(o)
    return _run(qs, tpl, out, gen, o)


# help(rewrite) and inspect.signature(rewrite) list every option with its default
rewrite.__signature__ = inspect.Signature(
    [inspect.Parameter("queries", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation="QuerySet | str | Path"),
     inspect.Parameter("template", inspect.Parameter.KEYWORD_ONLY, annotation="str | Path"),
     inspect.Parameter("out", inspect.Parameter.KEYWORD_ONLY, annotation="str | Path"),
     inspect.Parameter("options", inspect.Parameter.KEYWORD_ONLY, default=None, annotation="RewriteOptions | None"),
     *(inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=getattr(REWRITE_LLM, f.name), annotation=f.type)
       for f in dataclasses.fields(LLMSettings)),
     *(inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default, annotation=f.type)
       for f in dataclasses.fields(RewriteOptions) if f.name != "llm")],
    return_annotation="RewriteReport",
)


def _run(qs: QuerySet, tpl: Template, out: Path, gen, o: RewriteOptions) -> RewriteReport:
    """Ask ``gen`` for every query not in the cache, write ``out``, the failures and the meta file."""
    max_history_words = o.max_history_words
    store = AnswerCache(o.cache if o.cache is not None else _paths(out)[2])
    results: dict[str, str] = {}
    todo, history_cut, cached = [], 0, 0
    for qid, q in qs.items():
        msgs, dropped = tpl.messages(q, max_history_words)
        history_cut += dropped > 0
        key = _cache_key(gen.model, tpl, max_history_words, q)
        rec = store.get(key)
        if rec is not None:
            results[qid], cached = rec["rewrite"], cached + 1
        else:
            todo.append((qid, key, msgs))
    failed: dict[str, str] = {}

    def work(entry):
        qid, key, msgs = entry
        got, reason = _one(gen, tpl, _Item(qid), msgs, o.deadline)
        if got is not None:
            store.put({"key": key, "model": gen.model, "template": tpl.name, "template_version": tpl.version,
                       "query_id": qid, "rewrite": got[0], "raw": got[1]})
        return qid, got, reason

    with ThreadPoolExecutor(max_workers=max(1, int(getattr(gen, "concurrency", 1)))) as ex:
        for qid, got, reason in ex.map(work, todo):
            if got is None:
                failed[qid] = reason
            else:
                results[qid] = got[0]
    failed = {q: failed[q] for q in qs.ids() if q in failed}
    failures_path = _write(out, qs, results, failed, o.fill_failed)
    settings = {"template": tpl.to_json(), "model": gen.model, "deadline_s": o.deadline, "timeout_s": o.llm.timeout,
                "max_history_words": max_history_words, "fill_failed": o.fill_failed, "cache": str(store.path)}
    meta_path = _paths(out)[1]
    report = RewriteReport(len(qs), len(todo) - len(failed), cached, failed, history_cut, out, failures_path, meta_path, settings)
    write_text_atomic(meta_path, json.dumps(report.to_json(), indent=1, ensure_ascii=False) + "\n")
    return report
