"""``vdr rewrite``: one rewrite variant of a query set, with a cache and a list of failures.

Every query is either rewritten or listed as failed with its reason -- never silently missing:

* ``OUT`` (BEIR ``queries.jsonl``: ``_id``, ``text``) holds the rewrites in the input order;
  failed ids are left out (``vdr evaluate`` then names them: a rewrite file must hold every id),
  or, with ``fill_failed="original"``, written with the original text (and still listed as failed).
* ``OUT`` with suffix ``.failures.jsonl`` lists ``{"_id", "reason"}`` per failed query (removed
  when a run has no failure); ``.meta.json`` records the template (name, version, source, its text's
  sha256 and system prompt), every generation setting (``generation``: endpoint, model, temperature,
  top_p, max_tokens, seed, stop, json_mode, sample), the calls (retries, waits, HTTP 429 answers,
  thinking parts dropped) and the counts.
* Cache (JSONL, :class:`vdr.llm.AnswerCache`, the judge's cache too): keyed by every setting that
  changes the output -- the endpoint (without credentials), the model, temperature, top_p,
  max_tokens, seed, stop, json_mode, the template (name, version and its whole text: system
  prompt, user text, extract pattern), the prompt as sent (query text and history after the word
  budget) and the sample index; only successful rewrites are cached, so a rerun retries exactly
  the failed queries. Another temperature, endpoint or template text is a miss (asked again), never
  a hit. Caches of earlier vdr versions (format ``vdr-rewrite-1``, keyed without the generation
  settings) are never reused: their entries stay in the file, are ignored, and are counted in the
  meta file (``cache_older_entries``).
* Samples: ``sample`` (``--sample I``, default 0) is the index of one of several rewrites per
  query at temperature > 0; each index is its own variant (its own ``OUT``) and its own cache key,
  so ``--sample 0``, ``--sample 1``, ... give independent samples and each rerun is free. With a
  ``seed``, sample ``I`` is requested with seed ``seed + I`` (recorded as ``request_seed``). At
  temperature 0 (greedy, one answer) an index other than 0 is refused.
* Answers given as a list of content parts (reasoning models: thinking and text parts) are read by
  :func:`vdr.llm.read_content`: the text parts make the answer, the thinking parts are dropped,
  counted in the meta file and noted in the cache record; a content that cannot be read (another
  part type, a refusal) is a failed query with the reason.
* Rate limits: the client honours the endpoint's ``Retry-After`` / ``retry-after-ms`` /
  ``x-ratelimit-reset-*`` (see :mod:`vdr.llm`); every retry and wait is counted in the meta file.

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
reasoning model still thinking: "length: no final answer"); an empty answer (or one holding only
thinking parts); a content that cannot be read; an answer without the template's tags; the call
budget running out.
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
from ..llm import LLM_FIELDS, Answer, AnswerCache, AnswerTruncated, BudgetExhausted, LLMError, LLMSettings, split_keywords
from ..types import QuerySet
from .templates import Template, load_template

__all__ = ["rewrite", "RewriteOptions", "RewriteReport", "check_time_limit", "failures_file", "read_failures", "CACHE_FORMAT",
           "REWRITE_LLM"]

CACHE_FORMAT = "vdr-rewrite-2"
"""Format of the cache records (``"format"`` of each record): ``vdr-rewrite-2`` keys hold every
generation setting; ``vdr-rewrite-1`` records (no ``"format"``) are never reused."""

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
        settings: template, model and settings (JSON-ready; ``settings["generation"]``: every
            setting that changes the output, the cache key's).
        calls: the client's counters (:class:`vdr.llm.CallStats`: calls, retries, ``waited_s``,
            ``rate_limited``, ``thinking_dropped``, ...; the local model: ``calls`` only).
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
    calls: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when no query failed."""
        return not self.failed

    def to_json(self) -> dict:
        """The ``.meta.json`` document: counts, failed ids, files and settings."""
        return {"total": self.total, "rewritten": self.rewritten, "cached": self.cached, "failed": len(self.failed),
                "failed_ids": list(self.failed), "history_cut": self.history_cut, "out": str(self.out),
                "failures": None if self.failures_path is None else str(self.failures_path), **self.settings,
                "calls": self.calls}


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


def _template_identity(tpl: Template) -> dict:
    """What of a template changes the output: name, version and its whole text (with its sha256)."""
    text = {"system": tpl.system, "user": tpl.user, "extract": tpl.extract}
    digest = hashlib.sha256(json.dumps(text, ensure_ascii=False, sort_keys=True).encode("utf-8")).hexdigest()
    return {"name": tpl.name, "version": tpl.version, **text, "sha256": digest}


def _generation(gen, o: RewriteOptions) -> dict:
    """Every setting of ``gen`` that changes a rewrite, JSON-ready (the cache key's and the meta file's)."""
    if getattr(gen, "endpoint", None) is None:  # the local model: greedy decoding
        return {"endpoint": None, "model": gen.model, "decoding": "greedy", "max_tokens": int(o.llm.max_tokens), "sample": o.sample}
    return {"endpoint": gen.endpoint.rstrip("/"), "model": gen.model, "temperature": gen.temperature, "top_p": gen.top_p,
            "max_tokens": gen.max_tokens, "seed": o.llm.seed, "request_seed": gen.seed,
            "stop": None if gen.stop is None else list(gen.stop), "json_mode": gen.json_mode, "sample": o.sample}


def _cache_key(generation: dict, template: dict, messages: list[dict]) -> str:
    """sha256 of (format, generation settings, template identity, the messages as sent)."""
    ident = [CACHE_FORMAT, generation, template, messages]
    return hashlib.sha256(json.dumps(ident, ensure_ascii=False, sort_keys=True).encode("utf-8")).hexdigest()


def _one(gen, tpl: Template, item: _Item, messages: list[dict], deadline_s: float) -> tuple[tuple[str, str, dict] | None, str | None]:
    """``((rewrite, raw answer, content notes), None)`` or ``(None, reason)``; never raises."""
    try:
        got: Answer = gen.answer(item, messages, deadline=time.monotonic() + deadline_s)
    except AnswerTruncated:
        return None, "length: no final answer (the answer reached the token limit)"
    except BudgetExhausted as e:
        return None, f"budget exhausted: {e}"
    except LLMError as e:
        return None, str(e)
    except Exception as e:  # an unexpected client failure is a failed query, never a missing one
        return None, f"{type(e).__name__}: {e}"
    raw = got.text
    if raw is None or not raw.strip():
        if got.thinking_dropped:
            return None, f"empty answer: no text part, only {got.thinking_dropped} thinking part(s) (dropped)"
        return None, "empty answer (no content)"
    rw, _ = tpl.extractor().extract(raw)
    if rw is None:
        return None, f"no rewrite in the answer (template extract {tpl.extract!r}); answer starts {raw[:120]!r}"
    rw = " ".join(rw.split())
    if not rw:
        return None, "empty rewrite"
    return (rw, raw, got.notes()), None


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
        allow_pickle_weights: read the ``local`` checkpoint's ``pytorch_model.bin`` (a pickle) when it
            has no ``*.safetensors`` (:mod:`vdr.io.weights`).
        sample: index of this sample among several rewrites per query (>= 0; > 0 needs
            temperature > 0 and an endpoint); part of the cache key; with a ``seed``, the request's
            seed is ``seed + sample``.
        progress: show the rewritten queries on stderr (a bar on a terminal, a line every 30 s
            in a log).
    """

    llm: LLMSettings = REWRITE_LLM
    local: str | Path | None = None
    cache: str | Path | None = None
    deadline: float = 120.0
    max_history_words: int | None = 2000
    fill_failed: str | None = None
    device: str | None = None
    trust_remote_code: bool = False
    allow_pickle_weights: bool = False
    sample: int = 0
    progress: bool = False


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
        if o.sample:
            raise InputError("--sample needs an endpoint sampling at temperature > 0: --local decodes greedily (one answer)")
        return LocalGenerator(o.local, device=o.device, max_new_tokens=o.llm.max_tokens, budget=o.llm.budget,
                              trust_remote_code=o.trust_remote_code, allow_pickle_weights=o.allow_pickle_weights)
    llm = o.llm
    if o.sample and llm.seed is not None and not isinstance(llm.seed, bool) and isinstance(llm.seed, int):
        llm = dataclasses.replace(llm, seed=llm.seed + o.sample)  # each sample its own reproducible seed
    return endpoint_generator(llm)


def _check_sample(o: RewriteOptions) -> None:
    """Raise :class:`InputError` for a sample index that is not an integer >= 0, or > 0 at temperature 0."""
    if isinstance(o.sample, bool) or not isinstance(o.sample, int) or o.sample < 0:
        raise InputError(f"sample must be an integer >= 0, got {o.sample!r}")
    if o.sample and o.local is None and not float(o.llm.temperature) > 0:
        raise InputError(f"sample {o.sample} at temperature {o.llm.temperature}: greedy decoding has one answer;"
                         " give --temperature > 0 to draw several samples")


def rewrite(queries: QuerySet | str | Path, *, template: str | Path, out: str | Path, options: RewriteOptions | None = None,
            **kwargs: Any) -> RewriteReport:
    """Rewrite every query of ``queries`` with ``template`` (see the module docstring).

    Args:
        queries: a :class:`~vdr.types.QuerySet` or a BEIR ``queries.jsonl`` (``history`` optional).
        template: a shipped template name or a TOML file (:func:`~vdr.rewrite.templates.load_template`).
        out: the rewrite file to write.
        options: a :class:`RewriteOptions` (default: all defaults).
        **kwargs: any field of :class:`RewriteOptions` (``local``, ``cache``, ``deadline``,
            ``max_history_words``, ``fill_failed``, ``device``, ``trust_remote_code``, ``sample``) or
            endpoint setting (``endpoint``, ``model``, ``api_key``, ``concurrency``, ``budget``,
            ``timeout``, ``max_retries``, ``backoff``, ``temperature``, ``max_tokens``, ``json_mode``,
            ``top_p``, ``seed``, ``stop``): documented there, with their defaults; they override
            ``options``.

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
    _check_sample(o)
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
    generation, template = _generation(gen, o), _template_identity(tpl)
    results: dict[str, str] = {}
    todo, history_cut, cached = [], 0, 0
    for qid, q in qs.items():
        msgs, dropped = tpl.messages(q, max_history_words)
        history_cut += dropped > 0
        key = _cache_key(generation, template, msgs)
        rec = store.get(key)
        if rec is not None:
            results[qid], cached = rec["rewrite"], cached + 1
        else:
            todo.append((qid, key, msgs))
    failed: dict[str, str] = {}
    stats = getattr(gen, "stats", None)  # the endpoint client's CallStats (the local model has none)
    if stats is not None:
        with stats.lock:
            stats.cached += cached

    def work(entry):
        qid, key, msgs = entry
        got, reason = _one(gen, tpl, _Item(qid), msgs, o.deadline)
        if got is not None:
            rec = {"key": key, "format": CACHE_FORMAT, "model": gen.model, "template": tpl.name, "template_version": tpl.version,
                   "sample": o.sample, "query_id": qid, "rewrite": got[0], "raw": got[1]}
            if got[2]:
                rec["content"] = got[2]
            store.put(rec)
            if stats is not None:
                with stats.lock:
                    stats.answered += 1
        return qid, got, reason

    from ..progress import progress_bar

    with progress_bar("rewrite", len(todo), "query", enabled=o.progress) as advance, \
            ThreadPoolExecutor(max_workers=max(1, int(getattr(gen, "concurrency", 1)))) as ex:
        for qid, got, reason in ex.map(work, todo):
            if got is None:
                failed[qid] = reason
            else:
                results[qid] = got[0]
            advance(1)
    failed = {q: failed[q] for q in qs.ids() if q in failed}
    failures_path = _write(out, qs, results, failed, o.fill_failed)
    older = sum(rec.get("format") != CACHE_FORMAT for rec in store.records())
    settings = {"template": {**tpl.to_json(), "sha256": template["sha256"], "system": tpl.system}, "model": gen.model,
                "generation": generation, "deadline_s": o.deadline, "timeout_s": o.llm.timeout,
                "max_history_words": max_history_words, "fill_failed": o.fill_failed, "cache": str(store.path),
                "cache_format": CACHE_FORMAT, "cache_older_entries": older}
    calls = stats.to_dict() if stats is not None else {"calls": int(getattr(gen, "calls", 0))}
    meta_path = _paths(out)[1]
    report = RewriteReport(len(qs), len(todo) - len(failed), cached, failed, history_cut, out, failures_path, meta_path, settings,
                           calls)
    write_text_atomic(meta_path, json.dumps(report.to_json(), indent=1, ensure_ascii=False) + "\n")
    return report
