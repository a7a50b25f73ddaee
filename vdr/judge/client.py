"""Judge client: the judge's use of the one OpenAI-compatible client of :mod:`vdr.llm` (the
``openai`` client's retries after the wait the endpoint asks for -- ``Retry-After``,
``x-ratelimit-reset-*`` -- or a jittered exponential backoff, a thread concurrency limit, a call
budget), with the judge's prompts,
strict JSON parsing of the judgements and a resumable on-disk cache.

Pages go to an image judge as PNG data URLs (``image_url`` content parts) and to a text judge as
page text.

Cache (:class:`vdr.llm.AnswerCache`): one JSON object per line in a JSONL file (never pickle),
appended, flushed and fsynced as each answer arrives, so an interrupted or failed run keeps every
answer it got. The key is the sha256 of ``(judge model, PROMPT_VERSION, stage, modality, query id,
sha256(query text), content hash of each page in window order)``, plus the sampling settings that
differ from the defaults (``temperature`` other than 0, ``top_p``, ``seed``, ``stop``; absent from
the key at their defaults, so caches written before they were keyed stay valid): a rerun with the
same judge, prompts, sampling, pages and windows makes no call, and any change (another model, an
edited page, another order, another temperature) asks again.

Answers given as a list of content parts (reasoning models: thinking and text parts) are read by
:func:`vdr.llm.read_content`: the text parts are judged, the thinking parts dropped and counted
(``CallStats.thinking_dropped``; ``"content"`` in the cache record). A window whose answer cannot
be read or parsed is a failure with its reason in :attr:`JudgeClient.failures` (``vdr judge``
writes them to ``RESULTS_DIR/judge/failures.jsonl``). A torn last line (a crash mid-write) is ignored with a warning. The API key is
never written to the cache, to results or to error messages.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ..errors import InputError
from ..llm import (
    API_KEY_ENV,
    AnswerCache,
    AnswerTruncated,
    BudgetExhausted,
    CallStats,  # noqa: F401 - re-exported: vdr.judge.client.CallStats, its name before vdr.llm
    ChatClient,
    LLMCallError,
    LLMConfigError,
    LLMError,
    LLMOutputError,
    LLMSettings,
    read_content,
    redact_url,
    settings_from,
)
from .prompts import (
    CRITERIA,
    PROMPT_VERSION,
    RUBRIC_SYSTEM,
    SCORE_MAX,
    SCORE_MIN,
    TOURNAMENT_SYSTEM,
    rubric_instructions,
    tournament_instructions,
)

__all__ = [
    "JudgeError",
    "JudgeConfigError",
    "JudgeOutputError",
    "AnswerTruncated",
    "JudgeCallError",
    "BudgetExhausted",
    "Window",
    "PageSource",
    "CorpusPages",
    "TextPages",
    "JudgeCache",
    "JudgeClient",
    "parse_answer",
    "redact_url",
    "API_KEY_ENV",
]

JudgeError = LLMError
"""Base class of judge errors (:class:`vdr.llm.LLMError`: the judge and rewrite share the client)."""
JudgeConfigError = LLMConfigError
"""The judge is not configured (no endpoint, no model, bad option)."""
JudgeOutputError = LLMOutputError
"""A judge answer is not the JSON object the prompt asks for; names the query and window."""
JudgeCallError = LLMCallError
"""The endpoint failed (HTTP error, timeout, connection) after every retry; names the window."""
JudgeCache = AnswerCache
"""The append-only JSONL answer cache (:class:`vdr.llm.AnswerCache`)."""


@dataclass(frozen=True)
class Window:
    """One judge request: ``pages`` of query ``query_id`` in display order.

    Attributes:
        query_id: the query. stage: ``"tournament"`` or ``"rubric"``.
        phase: ``"random"`` or ``"stratified"``. index: the window's number within query/stage/phase.
        pages: corpus ids in display order (labels ``doc_1`` .. ``doc_w``).
        reversed: whether this is the reversed copy of a window.
    """

    query_id: str
    stage: str
    phase: str
    index: int
    pages: tuple[str, ...]
    reversed: bool = False

    def describe(self) -> str:
        """The window in words, for error messages: query id, stage, phase, index, reversed or not."""
        return f"query {self.query_id!r}, {self.stage} {self.phase} window {self.index}{' (reversed)' if self.reversed else ''}"


class PageSource(Protocol):
    """What the client needs of a page: a content hash and the payload for a modality."""

    def content(self, corpus_id: str, modality: str) -> tuple[str, str]:
        """``(content_hash, payload)``: payload is page text (``"text"``) or a PNG data URL (``"image"``)."""


class TextPages:
    """In-memory page texts (``{corpus_id: text}``); text modality only.

    Args:
        texts: page texts. max_chars: texts are cut to this many characters (recorded in the hash).
    """

    def __init__(self, texts: Mapping[str, str], max_chars: int = 4000) -> None:
        self.texts = dict(texts)
        self.max_chars = int(max_chars)

    def content(self, corpus_id: str, modality: str) -> tuple[str, str]:
        """``(content_hash, text)`` of a page, its text cut to ``max_chars``.

        Raises:
            JudgeConfigError: ``modality`` is not ``"text"``.
            KeyError: an unknown ``corpus_id``.
        """
        if modality != "text":
            raise JudgeConfigError("TextPages holds page texts only; use modality 'text'")
        t = self.texts[corpus_id][: self.max_chars]
        return "sha256:" + hashlib.sha256(t.encode("utf-8")).hexdigest(), t


class CorpusPages:
    """Pages of a :class:`vdr.Corpus`: text cut to ``max_chars``, or the page PNG as a data URL.

    Hashes are computed once per page and kept (thread-safe).
    """

    def __init__(self, corpus, max_chars: int = 4000) -> None:
        self.corpus = corpus
        self.max_chars = int(max_chars)
        self._memo: dict[tuple[str, str], tuple[str, str]] = {}
        self._lock = threading.Lock()

    def content(self, corpus_id: str, modality: str) -> tuple[str, str]:
        """``(content_hash, payload)`` of a page (memoised): its text cut to ``max_chars`` for ``"text"``, its PNG as a data URL otherwise."""
        key = (corpus_id, modality)
        with self._lock:
            if key in self._memo:
                return self._memo[key]
        if modality == "text":
            t = self.corpus[corpus_id].text[: self.max_chars]
            out = ("sha256:" + hashlib.sha256(t.encode("utf-8")).hexdigest(), t)
        else:
            path = self.corpus.image_path(corpus_id)
            try:
                data = path.read_bytes()
            except OSError as e:
                raise InputError(f"cannot read page image ({e.strerror})", path=path, id=corpus_id) from None
            out = ("sha256:" + hashlib.sha256(data).hexdigest(), "data:image/png;base64," + base64.b64encode(data).decode("ascii"))
        with self._lock:
            self._memo[key] = out
        return out


def _reject_duplicates(pairs):
    d = {}
    for k, v in pairs:
        if k in d:
            raise ValueError(f"key {k!r} appears twice")
        d[k] = v
    return d


_THINK_OPEN, _THINK_CLOSE = "<think>", "</think>"


def strip_wrappers(text: str) -> str:
    r"""The answer without a leading reasoning block and without one enclosing Markdown code fence.

    Removed, in this order: a leading ``<think>...</think>`` block (also when the chat template
    already opened it, i.e. the answer starts with the reasoning and has a single ``</think>``);
    then one code fence around the whole rest (`````json`` or ````` ... `````). Nothing else is
    forgiven: text before or after the JSON stays and makes it invalid.

    >>> strip_wrappers('<think>the first page is better</think>\n```json\n{"scores": {}}\n```')
    '{"scores": {}}'
    >>> strip_wrappers('reasoning without the opening tag</think>{"a": 1}')
    '{"a": 1}'

    Raises:
        ValueError: an unterminated ``<think>`` block or code fence.
    """
    s = text.strip()
    if s.startswith(_THINK_OPEN):
        end = s.find(_THINK_CLOSE)
        if end < 0:
            raise ValueError("unterminated <think> block (no </think>)")
        s = s[end + len(_THINK_CLOSE):].strip()
    elif s.count(_THINK_CLOSE) == 1 and _THINK_OPEN not in s:
        s = s[s.find(_THINK_CLOSE) + len(_THINK_CLOSE):].strip()
    if s.startswith("```"):
        nl = s.find("\n")
        if nl < 0 or not s.endswith("```") or len(s) < nl + 4:
            raise ValueError("unterminated code fence")
        s = s[nl + 1: -3].strip()
    return s


def parse_answer(text: str | list | None, stage: str, labels: Sequence[str]) -> list:
    """Strictly parse a judge answer.

    ``text`` is the answer's content: a string, or a list of content parts whose text parts are
    read and thinking parts dropped (:func:`vdr.llm.read_content`).

    Open reasoning models often answer ``<think>...</think>`` before the JSON, or wrap the JSON in a
    Markdown code fence; both wrappers are removed first (:func:`strip_wrappers`), then strict JSON
    is required. Accepts one JSON object with exactly the key
    ``"scores"`` (tournament: ``{label: number in [-5, 5]}``) or ``"answers"`` (rubric:
    ``{label: {"C1": 0|1, ..., "C5": 0|1}}``), covering exactly ``labels``. Booleans are not numbers
    here; the strings ``"0"``/``"1"`` are accepted as rubric answers.

    Returns:
        tournament: list of float scores in label order; rubric: list of ``C``-tuples of int.

    Raises:
        ValueError: with the reason (the caller adds query and window): also a content that cannot
            be read (:func:`vdr.llm.read_content`).
    """
    if text is not None and not isinstance(text, str):
        text = read_content(text)[0]
    if text is None:
        raise ValueError("empty answer (no message content)")
    s = strip_wrappers(text)
    try:
        obj = json.loads(s, object_pairs_hook=_reject_duplicates)
    except json.JSONDecodeError as e:
        raise ValueError(f"not JSON ({e.msg} at char {e.pos})") from None
    key = "scores" if stage == "tournament" else "answers"
    if not isinstance(obj, dict) or set(obj) != {key}:
        raise ValueError(f"expected an object with the single key {key!r}, got {sorted(obj) if isinstance(obj, dict) else type(obj).__name__}")
    inner = obj[key]
    if not isinstance(inner, dict):
        raise ValueError(f"{key!r} must be an object")
    missing = [lab for lab in labels if lab not in inner]
    extra = [k for k in inner if k not in set(labels)]
    if missing or extra:
        raise ValueError(f"documents missing {missing} / unknown {extra}")
    out = []
    for lab in labels:
        v = inner[lab]
        if stage == "tournament":
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise ValueError(f"score of {lab} is not a finite number: {v!r}")
            if not SCORE_MIN <= v <= SCORE_MAX:
                raise ValueError(f"score of {lab} is outside [{SCORE_MIN:g}, {SCORE_MAX:g}]: {v!r}")
            out.append(float(v))
        else:
            crit = [c for c, _, _ in CRITERIA]
            if not isinstance(v, dict) or set(v) != set(crit):
                raise ValueError(f"answers of {lab} must have exactly the keys {crit}")
            row = []
            for c in crit:
                a = v[c]
                if isinstance(a, bool) or a not in (0, 1, "0", "1"):
                    raise ValueError(f"{lab}.{c} must be 0 or 1, got {a!r}")
                row.append(int(a))
            out.append(tuple(row))
    return out


class JudgeClient(ChatClient):
    """Ask an OpenAI-compatible chat-completions endpoint to judge windows (a :class:`vdr.llm.ChatClient`).

    Args:
        endpoint: base URL (``http://localhost:8000/v1``). Required: there is no default endpoint.
        model: the judge model name sent to the endpoint.
        modality: ``"text"`` (page text) or ``"image"`` (page PNGs as data URLs).
        cache: a :class:`JudgeCache`, a JSONL path, or ``None`` (in memory).
        settings: the other endpoint settings (:class:`vdr.llm.LLMSettings`; default: its defaults,
            the judge's); its ``endpoint`` and ``model`` are replaced by the arguments.
        **llm: any other field of :class:`~vdr.llm.LLMSettings`, overriding ``settings``: ``api_key``
            (default ``$VDR_JUDGE_API_KEY``, then ``$OPENAI_API_KEY``, else ``"EMPTY"``; never
            written anywhere), ``concurrency``, ``budget`` (most HTTP attempts; retries count),
            ``timeout`` (seconds per request), ``max_retries`` (timeout, connection error, HTTP 429
            or >= 500; exponential backoff ``backoff * 2**attempt`` + jitter), ``backoff``,
            ``temperature``, ``max_tokens``, ``json_mode`` (``response_format=json_object``),
            ``top_p``, ``seed``, ``stop``.

    Attributes:
        failures: one record per window that failed in :meth:`judge` (``query_id``, ``stage``,
            ``phase``, ``window``, ``reversed``, ``pages``, ``reason``), in the order they failed.

    Raises:
        JudgeConfigError: no endpoint or model, bad modality or counts.
        TypeError: a keyword that is not a field of :class:`~vdr.llm.LLMSettings`.
    """

    def __init__(self, endpoint: str | None, model: str | None, *, modality: str = "image",
                 cache: JudgeCache | str | Path | None = None, settings: LLMSettings | None = None, **llm) -> None:
        if not endpoint:
            raise JudgeConfigError(
                "no judge endpoint: give --endpoint URL (an OpenAI-compatible base URL such as http://localhost:8000/v1)"
                " or set VDR_JUDGE_ENDPOINT; no RCP-nDCG was computed"
            )
        if not model:
            raise JudgeConfigError("no judge model: give --judge-model NAME (the model name the endpoint serves)")
        if modality not in ("text", "image"):
            raise JudgeConfigError(f"modality must be 'text' or 'image', got {modality!r}")
        base = settings_from(settings or LLMSettings(), llm, what="JudgeClient()")
        super().__init__(settings_from(base, {"endpoint": endpoint, "model": model}, what="JudgeClient()"), label="judge")
        self.modality = modality
        self.cache = cache if isinstance(cache, AnswerCache) else AnswerCache(cache)
        self.failures: list[dict] = []
        self._failures_lock = threading.Lock()
        #: Show progress on stderr (:func:`vdr.progress.progress_bar`: a bar on a terminal, a line
        #: every 30 s in a log) while windows are judged.
        self.progress = False

    def config(self) -> dict:
        """JSON-ready settings (no key; the endpoint without credentials)."""
        return {"endpoint": self.endpoint, "model": self.model, "modality": self.modality, "prompt_version": PROMPT_VERSION,
                "temperature": self.temperature, "max_tokens": self.max_tokens, "json_mode": self.json_mode,
                "timeout_s": self.timeout, "max_retries": self.max_retries, "concurrency": self.concurrency, "budget": self.budget,
                "top_p": self.top_p, "seed": self.seed, "stop": None if self.stop is None else list(self.stop)}

    def cache_key(self, window: Window, query: str, hashes: Sequence[str]) -> str:
        """The cache key of a window's answer (see the module docstring)."""
        ident: list = [self.model, PROMPT_VERSION, window.stage, self.modality, window.query_id,
                       hashlib.sha256(query.encode("utf-8")).hexdigest(), list(hashes)]
        sampling = {name: value for name, value, default in (
            ("temperature", self.temperature, 0.0), ("top_p", self.top_p, None), ("seed", self.seed, None),
            ("stop", None if self.stop is None else list(self.stop), None)) if value != default}
        if sampling:  # only settings off their defaults: the keys of default runs are those of earlier vdr versions
            ident.append(sampling)
        return hashlib.sha256(json.dumps(ident, ensure_ascii=False).encode("utf-8")).hexdigest()

    def _messages(self, window: Window, query: str, payloads: Sequence[str]) -> list[dict]:
        labels = [f"doc_{n + 1}" for n in range(len(window.pages))]
        if window.stage == "tournament":
            system, instr = TOURNAMENT_SYSTEM, tournament_instructions(query, labels, self.modality)
        else:
            system, instr = RUBRIC_SYSTEM, rubric_instructions(query, labels, self.modality)
        if self.modality == "text":
            body = instr + "\n\n" + "\n\n".join(f"[{lab}]\n{p}" for lab, p in zip(labels, payloads))
            user: object = body
        else:
            parts: list[dict] = [{"type": "text", "text": instr}]
            for lab, url in zip(labels, payloads):
                parts.append({"type": "text", "text": f"[{lab}]"})
                parts.append({"type": "image_url", "image_url": {"url": url}})
            user = parts
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    def _failed(self, w: Window, error: BaseException) -> None:
        """Record a failed window in :attr:`failures` (thread-safe)."""
        reason = self._hide(str(error)) if isinstance(error, JudgeError) else f"{type(error).__name__}: {error}"
        with self._failures_lock:
            self.failures.append({"query_id": w.query_id, "stage": w.stage, "phase": w.phase, "window": w.index,
                                  "reversed": w.reversed, "pages": list(w.pages), "reason": reason})

    def judge(self, windows: Sequence[Window], queries: Mapping[str, str], pages: PageSource) -> list[list]:
        """Judge every window (cached answers are reused; new ones are cached as they arrive).

        Args:
            windows: the windows. queries: ``{query_id: text}``. pages: the page source.

        Returns:
            One parsed answer per window, same order (see :func:`parse_answer`).

        Raises:
            JudgeOutputError, JudgeCallError, BudgetExhausted: the first failure; requests in flight
                finish and are cached, queued ones are not sent; the message says how many answers
                are cached so a rerun resumes.
        """
        results: list = [None] * len(windows)
        todo = []
        for n, w in enumerate(windows):
            hashes_payloads = [pages.content(p, self.modality) for p in w.pages]
            key = self.cache_key(w, queries[w.query_id], [h for h, _ in hashes_payloads])
            rec = self.cache.get(key)
            if rec is not None:
                results[n] = [tuple(x) if isinstance(x, list) else x for x in rec["answer"]]
                with self.stats.lock:
                    self.stats.cached += 1
            else:
                todo.append((n, w, key, hashes_payloads))
        if not todo:
            return results
        stop = threading.Event()

        def work(item):
            n, w, key, hp = item
            if stop.is_set():
                return
            try:
                got = self.answer(w, self._messages(w, queries[w.query_id], [p for _, p in hp]))
                raw = got.text
                labels = [f"doc_{i + 1}" for i in range(len(w.pages))]
                try:
                    ans = parse_answer(raw, w.stage, labels)
                except ValueError as e:
                    dropped = f" ({got.thinking_dropped} thinking part(s) dropped)" if got.thinking_dropped else ""
                    raise JudgeOutputError(f"judge answer for {w.describe()} is not valid: {e}{dropped};"
                                           f" answer starts {(raw or '')[:200]!r}") from None
            except BaseException as e:
                stop.set()
                self._failed(w, e)
                raise
            rec = {"key": key, "model": self.model, "prompt_version": PROMPT_VERSION, "stage": w.stage,
                   "modality": self.modality, "query_id": w.query_id, "pages": list(w.pages),
                   "hashes": [h for h, _ in hp], "answer": [list(a) if isinstance(a, tuple) else a for a in ans], "raw": raw}
            if got.notes():
                rec["content"] = got.notes()
            self.cache.put(rec)
            with self.stats.lock:
                self.stats.answered += 1
            results[n] = ans
            advance(1)

        from ..progress import progress_bar

        stage = f"judge {windows[0].stage} windows" if len({w.stage for w in windows}) == 1 else "judge windows"
        with progress_bar(stage, len(todo), "window", enabled=self.progress) as advance, \
                ThreadPoolExecutor(max_workers=self.concurrency) as ex:
            futs = [ex.submit(work, it) for it in todo]
            wait(futs, return_when=FIRST_EXCEPTION)
            if any(f.done() and not f.cancelled() and f.exception() is not None for f in futs):
                stop.set()
                for f in futs:
                    f.cancel()
        # every request in flight has ended: an endpoint failure among them is the cause, before a
        # budget that ran out meanwhile (threads that found it spent while others were retrying)
        errs = [f.exception() for f in futs if not f.cancelled() and f.exception() is not None]
        if errs:
            missing = sum(r is None for r in results)
            first = next((e for e in errs if not isinstance(e, BudgetExhausted)), errs[0])
            msg = f"{first} ({len(self.cache)} answers cached, {missing} of {len(windows)} windows unanswered; rerun to resume)"
            raise type(first)(self._hide(msg)) if isinstance(first, JudgeError) else first
        return results
