"""One OpenAI-compatible chat client for ``vdr judge`` and ``vdr rewrite``, and the reading of an
answer: the endpoint settings (:class:`LLMSettings`), the client (:class:`ChatClient`: retries with
exponential backoff, a per-request deadline, a call budget, the concurrency its callers use), an
append-only JSONL answer cache (:class:`AnswerCache`), the reading of an answer's content
(:func:`read_content`: a string, or a list of text and thinking parts) and the extraction of a
rewrite from a completion (:class:`Extractor`, shared with the rewards of :mod:`vdr.rewards`).

Retries are the ``openai`` client's own (``max_retries``: timeouts, connection errors, HTTP 408,
409, 429 and >= 500); vdr decides only how long it waits before each one (:func:`retry_wait`):
the wait the endpoint asks for (``retry-after-ms``, ``Retry-After`` in seconds or as an HTTP date,
or, on a spent rate limit, ``x-ratelimit-reset-requests`` / ``-tokens`` such as ``"1s"`` or
``"6m0s"``), else an exponential backoff with jitter. A server wait longer than
:data:`MAX_SERVER_WAIT` fails the request at once (saying so), as does a wait that would pass the
request's deadline or a retry the call budget cannot pay for. Every retry, wait and HTTP 429 is
counted in :class:`CallStats`.

Any server speaking ``POST {base_url}/chat/completions`` works (vLLM, Ollama, llama.cpp server,
hosted APIs), through the official ``openai`` client (imported when a client is built, so that
importing this module costs nothing). The API key is never written to a cache, to results or to
an error message: :class:`LLMSettings` hides it from ``repr`` and :meth:`ChatClient.config`, and
every error message passes through the client's redaction.

:mod:`vdr.judge` (prompts, windows, the parsing of judgements) and :mod:`vdr.rewrite` (templates,
the rewrite runner) build on this module; this module imports neither.
"""

from __future__ import annotations

import dataclasses
import email.utils
import json
import math
import os
import random
import re
import sys
import threading
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timezone
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from .errors import InputError, VdrError, VdrWarning

__all__ = [
    "LLMSettings",
    "ChatClient",
    "AnswerCache",
    "Answer",
    "CallStats",
    "Extractor",
    "LLMError",
    "LLMConfigError",
    "LLMOutputError",
    "AnswerTruncated",
    "LLMCallError",
    "BudgetExhausted",
    "redact_url",
    "settings_from",
    "split_keywords",
    "read_content",
    "retry_wait",
    "server_wait",
    "parse_duration",
    "MAX_SERVER_WAIT",
    "MAX_BACKOFF",
    "API_KEY_ENV",
    "CONVSEARCH_FORMAT",
]

API_KEY_ENV = ("VDR_JUDGE_API_KEY", "OPENAI_API_KEY")
"""Environment variables read, in order, when no API key is given."""


# ---------------------------------------------------------------------------------------- errors


class LLMError(VdrError):
    """Base class of the errors of an LLM endpoint (``vdr.judge.JudgeError`` is this class)."""


class LLMConfigError(LLMError):
    """The client is not configured (no endpoint, no model, a bad count)."""


class LLMOutputError(LLMError):
    """An answer is not what the prompt asks for; the message names the item asked."""


class AnswerTruncated(LLMOutputError):
    """The answer stopped at the token limit (``finish_reason == "length"``): no final answer."""


class LLMCallError(LLMError):
    """The endpoint failed (HTTP error, timeout, connection) after every retry, or the deadline passed."""


class BudgetExhausted(LLMError):
    """The call budget is spent."""


# -------------------------------------------------------------------------------------- settings


@dataclass(frozen=True)
class LLMSettings:
    """Endpoint and sampling settings of an OpenAI-compatible chat client (shared by judge and rewrite).

    Each command has its own defaults (:data:`vdr.judge.run.JUDGE_LLM`,
    :data:`vdr.rewrite.runner.REWRITE_LLM`); the defaults here are the judge's.

    Attributes:
        endpoint: base URL (``http://localhost:8000/v1``); required by :class:`ChatClient`.
        model: the model name the endpoint serves; required by :class:`ChatClient`.
        api_key: the key; ``None``: the first of ``$VDR_JUDGE_API_KEY``, ``$OPENAI_API_KEY`` that is
            set, else ``"EMPTY"`` (local servers). Never written anywhere (hidden from ``repr``).
        concurrency: threads issuing requests (>= 1).
        budget: most HTTP attempts the client may make (``None``: unlimited); retries count.
        timeout: seconds per HTTP attempt.
        max_retries: retries of a failed request (timeout, connection error, HTTP 408, 409, 429 or
            >= 500), made by the ``openai`` client; before each, the wait the endpoint asks for
            (``Retry-After``, ``retry-after-ms``, ``x-ratelimit-reset-*``; see :func:`server_wait`),
            else ``backoff * 2**retry`` seconds (at most :data:`MAX_BACKOFF`) less up to 25% jitter.
        backoff: the first backoff, seconds.
        temperature: sampling temperature (>= 0).
        max_tokens: token limit of an answer (an answer cut by it is :class:`AnswerTruncated`).
        json_mode: send ``response_format={"type": "json_object"}``.
        top_p: nucleus sampling mass in (0, 1]; ``None``: not sent (the server's default).
        seed: sampling seed sent to the endpoint; ``None``: not sent.
        stop: stop sequences (non-empty strings); ``None``: not sent.
    """

    endpoint: str | None = None
    model: str | None = None
    api_key: str | None = field(default=None, repr=False)
    concurrency: int = 4
    budget: int | None = None
    timeout: float = 120.0
    max_retries: int = 4
    backoff: float = 1.0
    temperature: float = 0.0
    max_tokens: int = 2048
    json_mode: bool = False
    top_p: float | None = None
    seed: int | None = None
    stop: tuple[str, ...] | None = None


LLM_FIELDS = tuple(f.name for f in dataclasses.fields(LLMSettings))


def settings_from(base: LLMSettings, values: Mapping[str, Any], *, what: str) -> LLMSettings:
    """``base`` with the fields named in ``values`` replaced (:func:`dataclasses.replace`).

    Raises:
        TypeError: a key that is not a field of :class:`LLMSettings` (named, with the known ones;
            ``what`` names the caller, e.g. ``"JudgeClient()"``).
    """
    unknown = sorted(set(values) - set(LLM_FIELDS))
    if unknown:
        raise TypeError(f"{what} got unknown option(s) {', '.join(map(repr, unknown))}; known: {', '.join(LLM_FIELDS)}")
    return dataclasses.replace(base, **values) if values else base


def split_keywords(kwargs: Mapping[str, Any], aliases: Mapping[str, str] | None = None) -> tuple[dict, dict]:
    """Split a command's keyword arguments into :class:`LLMSettings` values and the others.

    Args:
        kwargs: the keywords (e.g. of ``vdr.judge(...)``).
        aliases: ``{keyword: LLMSettings field}`` for a command's own spelling (the judge's
            ``judge_model`` is ``model``); a field that has an alias is only reachable through it.

    Returns:
        ``(settings values by field name, the other keywords)``.

    >>> split_keywords({"judge_model": "m", "timeout": 5, "k": 3}, {"judge_model": "model"})
    ({'model': 'm', 'timeout': 5}, {'k': 3})
    """
    aliases = dict(aliases or {})
    hidden = set(aliases.values())
    llm, rest = {}, {}
    for key, value in kwargs.items():
        if key in aliases:
            llm[aliases[key]] = value
        elif key in LLM_FIELDS and key not in hidden:
            llm[key] = value
        else:
            rest[key] = value
    return llm, rest


def redact_url(url: str) -> str:
    """``url`` without user info and query string (credentials never reach results).

    >>> redact_url("https://user:pw@api.example.com:8443/v1?key=secret")
    'https://api.example.com:8443/v1'
    """
    p = urlsplit(url)
    host = p.hostname or ""
    if p.port:
        host += f":{p.port}"
    return urlunsplit((p.scheme, host, p.path, "", ""))


# ----------------------------------------------------------------------------------------- cache


class AnswerCache:
    """Append-only JSONL cache of answers: one JSON object per line (never pickle), each with a
    ``"key"``; appended, flushed and fsynced as each answer arrives, so an interrupted or failed
    run keeps every answer it got. A torn last line (a crash mid-write) is ignored with a warning.

    Args:
        path: the JSONL file (created on first write), or ``None`` for an in-memory cache.

    Raises:
        InputError: a malformed line other than a torn last line.
    """

    def __init__(self, path: str | Path | None) -> None:
        self.path = None if path is None else Path(path)
        self._data: dict[str, dict] = {}
        self._lock = threading.Lock()
        if self.path is not None and self.path.is_file():
            lines = self.path.read_text(encoding="utf-8").split("\n")
            last = max((n for n, ln in enumerate(lines) if ln.strip()), default=-1)
            for n, ln in enumerate(lines):
                if not ln.strip():
                    continue
                try:
                    rec = json.loads(ln)
                    self._data[rec["key"]] = rec
                except (json.JSONDecodeError, KeyError, TypeError):
                    if n == last:
                        warnings.warn(f"{self.path}:{n + 1}: ignoring a torn last cache line", VdrWarning, stacklevel=2)
                        continue
                    raise InputError("malformed judge cache line", path=self.path, line=n + 1) from None

    def __len__(self) -> int:
        return len(self._data)

    def records(self) -> list[dict]:
        """Every record, in the order first stored (a key stored twice: its last record)."""
        with self._lock:
            return list(self._data.values())

    def get(self, key: str) -> dict | None:
        """The record stored under ``key``, or ``None``."""
        with self._lock:
            return self._data.get(key)

    def put(self, record: dict) -> None:
        """Store ``record`` (must hold ``"key"``) and append it durably to the file."""
        line = json.dumps(record, ensure_ascii=False, allow_nan=False)
        with self._lock:
            self._data[record["key"]] = record
            if self.path is None:
                return
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(line + "\n")
                f.flush()
                os.fsync(f.fileno())


# ------------------------------------------------------------------------------- retries, waits

MAX_SERVER_WAIT = 120.0
"""Longest wait (seconds) the endpoint may ask for: a longer one fails the request at once, with the
wait in the message (the ``openai`` client's limit for ``Retry-After`` too; a rerun resumes)."""

MAX_BACKOFF = 60.0
"""Longest backoff (seconds) before a retry when the endpoint asks for no wait."""

_DURATION_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "\u00b5s": 1e-6, "ns": 1e-9}
_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|\u00b5s|ms|h|m|s)")


def parse_duration(text: str) -> float | None:
    """Seconds of a reset duration as rate-limit headers write it, or ``None`` when it is not one.

    Accepted: Go's duration text (OpenAI's ``x-ratelimit-reset-*``: ``"1s"``, ``"6m0s"``,
    ``"20ms"``, ``"1h2m3.5s"``) and a plain number of seconds (``"1.5"``); negative, infinite
    or malformed values give ``None``.

    >>> parse_duration("6m0s"), parse_duration("20ms"), parse_duration("1.5"), parse_duration("soon")
    (360.0, 0.02, 1.5, None)
    """
    t = text.strip()
    try:
        v = float(t)
    except ValueError:
        v = None
    if v is not None:
        return v if math.isfinite(v) and v >= 0 else None
    pos, total = 0, 0.0
    for m in _DURATION.finditer(t):
        if m.start() != pos:
            return None
        total += float(m.group(1)) * _DURATION_UNITS[m.group(2)]
        pos = m.end()
    return total if 0 < pos == len(t) else None


def _is_zero(value: str | None) -> bool:
    try:
        return value is not None and float(value) == 0
    except ValueError:
        return False


def server_wait(headers: Mapping[str, str] | None, now: float | None = None) -> tuple[float, str] | None:
    """The wait an endpoint asks for before the next request: ``(seconds, header)``, or ``None``.

    In this order, the first usable one: ``retry-after-ms`` (milliseconds), ``Retry-After`` as
    seconds or as an HTTP date (RFC 9110 section 10.2.3; a date in the past is a wait of 0), then
    the longest of ``x-ratelimit-reset-requests`` / ``x-ratelimit-reset-tokens``
    (:func:`parse_duration`) whose limit is spent: its ``x-ratelimit-remaining-*`` is 0 or absent
    (the reset of a limit that is not spent says nothing about this failure).

    Args:
        headers: response headers (any mapping; names are compared case-insensitively).
        now: the current time as a Unix timestamp, for HTTP dates (default :func:`time.time`).

    >>> server_wait({"Retry-After": "2"}), server_wait({"retry-after-ms": "250"})
    ((2.0, 'Retry-After'), (0.25, 'retry-after-ms'))
    >>> server_wait({"Retry-After": "Wed, 21 Oct 2015 07:28:10 GMT"}, now=1445412480.0)
    (10.0, 'Retry-After (HTTP date)')
    >>> server_wait({"x-ratelimit-reset-requests": "6m0s", "x-ratelimit-remaining-requests": "0"})
    (360.0, 'x-ratelimit-reset-requests')
    """
    h = {str(k).lower(): str(v) for k, v in (headers or {}).items()}
    ms = h.get("retry-after-ms")
    if ms is not None:
        try:
            v = float(ms)
            if math.isfinite(v) and v >= 0:
                return v / 1000.0, "retry-after-ms"
        except ValueError:
            pass
    ra = h.get("retry-after")
    if ra is not None:
        try:
            v = float(ra)
            if math.isfinite(v) and v >= 0:
                return v, "Retry-After"
        except ValueError:
            try:
                when = email.utils.parsedate_to_datetime(ra.strip())
            except (TypeError, ValueError, IndexError, OverflowError):
                when = None
            if when is not None:  # a date without a zone (asctime's form) is UTC (RFC 9110)
                stamp = (when if when.tzinfo is not None else when.replace(tzinfo=timezone.utc)).timestamp()
                return max(0.0, stamp - (time.time() if now is None else now)), "Retry-After (HTTP date)"
    resets = []
    for kind in ("requests", "tokens"):
        value = h.get(f"x-ratelimit-reset-{kind}")
        remaining = h.get(f"x-ratelimit-remaining-{kind}")
        if value is None or (remaining is not None and not _is_zero(remaining)):
            continue
        d = parse_duration(value)
        if d is not None:
            resets.append((d, f"x-ratelimit-reset-{kind}"))
    return max(resets) if resets else None


def retry_wait(headers: Mapping[str, str] | None, retry: int, backoff: float) -> tuple[float, str | None]:
    """Seconds to wait before retry number ``retry`` (0 for the first) and the header that set it.

    The endpoint's wait when it asks for one (:func:`server_wait`), else the backoff of the
    ``openai`` client's shape with vdr's base: ``min(backoff * 2**retry, MAX_BACKOFF) * (1 - 0.25 U)``,
    ``U`` uniform in [0, 1) (jitter spreads the retries of concurrent requests).

    Returns:
        ``(seconds, header name or None for the backoff)``.
    """
    asked = server_wait(headers)
    if asked is not None:
        return asked
    return min(backoff * (2.0 ** min(retry, 64)), MAX_BACKOFF) * (1.0 - 0.25 * random.random()), None


class _GiveUp(Exception):
    """Raised inside the ``openai`` client's retry loop to stop retrying (deadline, budget, a long wait)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _failure_of(exc: BaseException | None) -> str:
    """A failed HTTP attempt in words: ``"HTTP 429"``, ``"timed out"``, ``"connection failed (ConnectError)"``."""
    if exc is None:
        return "failed"
    status = getattr(exc, "status_code", None)  # openai's APIStatusError
    if status is None:  # httpx's HTTPStatusError (the client retries inside its except clause)
        status = getattr(getattr(exc, "response", None), "status_code", None)
    if status is not None:
        return f"HTTP {status}"
    name = type(exc).__name__
    return "timed out" if "Timeout" in name else f"connection failed ({name})"


_OPENAI_CLASS: type | None = None


def _openai_class() -> type:
    """``openai.OpenAI`` whose wait before each retry is asked of its ChatClient (built on first use)."""
    global _OPENAI_CLASS
    if _OPENAI_CLASS is None:
        import openai

        class _RetryHooked(openai.OpenAI):
            """The ``openai`` client with its own retry loop; only the wait before a retry is vdr's."""

            _vdr_before_retry = None

            def _calculate_retry_timeout(self, remaining_retries, options, response_headers=None):
                # the one place the openai client asks how long to wait before a retry (openai >= 1.0)
                return self._vdr_before_retry(options, response_headers)

        _OPENAI_CLASS = _RetryHooked
    return _OPENAI_CLASS


# ------------------------------------------------------------------------------------- answers

_TEXT_PARTS = ("text", "output_text")
_THINKING_PARTS = ("thinking", "reasoning", "redacted_thinking", "reasoning_content")


def read_content(content: object) -> tuple[str | None, int, int]:
    """The text of a chat answer's ``message.content``: ``(text, parts, thinking parts dropped)``.

    ``content`` is a string (``parts`` 0), ``None`` (no content), or a list of content parts
    (reasoning models behind OpenAI-compatible servers, e.g. Mistral Magistral:
    ``[{"type": "thinking", "thinking": [...]}, {"type": "text", "text": "..."}]``; OpenAI:
    ``[{"type": "text", "text": "..."}]``): the text parts (``text``, ``output_text``, or a plain
    string) are joined in order, the thinking parts (``thinking``, ``reasoning``,
    ``redacted_thinking``) are dropped and counted. A single part object counts as a list of one.

    Raises:
        ValueError: a content that cannot be read, with the reason: another type, a part of another
            type (an image, audio), a text part without a string ``text``, or a refusal part.

    >>> read_content([{"type": "thinking", "thinking": [{"type": "text", "text": "hm"}]}, {"type": "text", "text": "a b"}])
    ('a b', 2, 1)
    """
    if content is None or isinstance(content, str):
        return content, 0, 0
    if isinstance(content, dict):
        content = [content]
    if not isinstance(content, (list, tuple)):
        raise ValueError(f"the content is a {type(content).__name__}, neither text nor a list of parts")
    texts: list[str] = []
    thinking = 0
    for i, part in enumerate(content):
        if isinstance(part, str):
            texts.append(part)
            continue
        if hasattr(part, "model_dump"):
            part = part.model_dump()
        if not isinstance(part, dict):
            raise ValueError(f"content part {i} is a {type(part).__name__}, not an object")
        kind = part.get("type")
        if kind in _THINKING_PARTS:
            thinking += 1
        elif kind in _TEXT_PARTS or (kind is None and "text" in part):
            if not isinstance(part.get("text"), str):
                raise ValueError(f"content part {i} (type {kind!r}) has no string 'text'")
            texts.append(part["text"])
        elif kind == "refusal":
            raise ValueError(f"the model refused: {str(part.get('refusal'))[:200]!r}")
        else:
            raise ValueError(f"content part {i} has type {kind!r}, neither text ({', '.join(_TEXT_PARTS)}) nor thinking"
                             f" ({', '.join(_THINKING_PARTS[:3])})")
    return "".join(texts), len(content), thinking


@dataclass(frozen=True)
class Answer:
    """A chat answer as read by :meth:`ChatClient.answer`.

    Attributes:
        text: the answer's text (the text parts joined when the content was a list of parts);
            ``None`` when the message had no content.
        parts: number of content parts (0: the content was a plain string or absent).
        thinking_dropped: thinking parts dropped from the content.
        reasoning_dropped: the message carried its reasoning apart (``reasoning_content`` or
            ``reasoning``), which is not part of the answer.
    """

    text: str | None
    parts: int = 0
    thinking_dropped: int = 0
    reasoning_dropped: bool = False

    def notes(self) -> dict:
        """What was left out of the content, JSON-ready (``{}`` for a plain string answer)."""
        out: dict = {}
        if self.parts:
            out["content_parts"] = self.parts
        if self.thinking_dropped:
            out["thinking_parts_dropped"] = self.thinking_dropped
        if self.reasoning_dropped:
            out["reasoning_dropped"] = True
        return out


# ---------------------------------------------------------------------------------------- client


@dataclass
class CallStats:
    """Counters of one client.

    Attributes:
        calls: HTTP attempts made (first attempts and retries). cached: answers from a cache.
        answered: new answers. retries: retries made (each after a wait).
        waited_s: seconds waited before the retries, in all. server_waits: waits the endpoint asked
            for (``Retry-After``, ``retry-after-ms``, ``x-ratelimit-reset-*``); the others are backoff.
        rate_limited: HTTP 429 answers received.
        content_parts: answers whose content was a list of parts. thinking_dropped: thinking parts
            dropped from them. reasoning_dropped: answers that carried a separate reasoning field.
    """

    calls: int = 0
    cached: int = 0
    answered: int = 0
    retries: int = 0
    waited_s: float = 0.0
    server_waits: int = 0
    rate_limited: int = 0
    content_parts: int = 0
    thinking_dropped: int = 0
    reasoning_dropped: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def to_dict(self) -> dict:
        """Every counter by name (``waited_s`` rounded to milliseconds)."""
        return {f.name: (round(getattr(self, f.name), 3) if f.name == "waited_s" else getattr(self, f.name))
                for f in dataclasses.fields(self) if f.name != "lock"}


@dataclass
class _Call:
    """The request a thread is making (for the retry hook): what is asked, its deadline, its attempts."""

    item: Any
    deadline: float | None
    attempts: int = 1
    last_failure: str | None = None


class ChatClient:
    """Send chat requests to an OpenAI-compatible endpoint, with retries, a deadline and a call budget.

    Args:
        settings: the endpoint and sampling settings (:class:`LLMSettings`).
        label: what the endpoint serves, for error messages (``"judge endpoint http://...: HTTP 500"``).

    Attributes:
        settings: as given. endpoint: the base URL without credentials (:func:`redact_url`).
        model, concurrency, budget, timeout, max_retries, backoff, temperature, max_tokens,
        json_mode, top_p, seed, stop: the settings' values (normalised to int/float/bool/tuple).
        stats: :class:`CallStats`.

    Raises:
        LLMConfigError: no endpoint or model, concurrency < 1, max_retries < 0, budget < 0,
            temperature < 0, top_p outside (0, 1], a seed that is not an integer, an empty stop sequence.
    """

    def __init__(self, settings: LLMSettings, *, label: str = "LLM") -> None:
        s = settings
        if not s.endpoint:
            raise LLMConfigError(f"no {label} endpoint: give an OpenAI-compatible base URL such as http://localhost:8000/v1")
        if not s.model:
            raise LLMConfigError(f"no {label} model: give the model name the endpoint serves")
        if s.concurrency < 1 or s.max_retries < 0 or (s.budget is not None and s.budget < 0):
            raise LLMConfigError("concurrency must be >= 1, max_retries >= 0 and budget >= 0")
        self.stop = _check_sampling(s)
        key = s.api_key or next((os.environ[v] for v in API_KEY_ENV if os.environ.get(v)), None) or "EMPTY"
        self._secret = key
        self.settings = s
        self.label = label
        self.endpoint = redact_url(s.endpoint)
        self.model = s.model
        self.concurrency = int(s.concurrency)
        self.budget = s.budget
        self.timeout = float(s.timeout)
        self.max_retries = int(s.max_retries)
        self.backoff = float(s.backoff)
        self.temperature = float(s.temperature)
        self.max_tokens = int(s.max_tokens)
        self.json_mode = bool(s.json_mode)
        self.top_p = None if s.top_p is None else float(s.top_p)
        self.seed = None if s.seed is None else int(s.seed)
        self.stats = CallStats()
        self._local = threading.local()
        self._failing: str | None = None  # the last endpoint failure, until an answer arrives
        import openai

        self._openai = openai
        self._client = _openai_class()(base_url=s.endpoint, api_key=key, max_retries=self.max_retries, timeout=self.timeout)
        self._client._vdr_before_retry = self._before_retry

    def config(self) -> dict:
        """JSON-ready settings (no key; the endpoint without credentials)."""
        return {"endpoint": self.endpoint, "model": self.model, "temperature": self.temperature, "max_tokens": self.max_tokens,
                "json_mode": self.json_mode, "timeout_s": self.timeout, "max_retries": self.max_retries,
                "concurrency": self.concurrency, "budget": self.budget, "top_p": self.top_p, "seed": self.seed,
                "stop": None if self.stop is None else list(self.stop)}

    def _hide(self, text: str) -> str:
        return text.replace(self._secret, "***") if self._secret and self._secret != "EMPTY" else text

    def _take_call(self) -> bool:
        """Count one HTTP attempt; False when the budget is spent."""
        with self.stats.lock:
            if self.budget is not None and self.stats.calls >= self.budget:
                return False
            self.stats.calls += 1
            return True

    def _before_retry(self, options, headers) -> float:
        """The ``openai`` client is about to retry this thread's request: decide the wait, or give up.

        Called inside the client's ``except`` clause of the failed attempt (``sys.exc_info()`` is
        that failure). Raises :class:`_GiveUp` when the endpoint asks for more than
        :data:`MAX_SERVER_WAIT`, when the wait would pass the deadline, or when the budget is spent.
        """
        call: _Call | None = getattr(self._local, "call", None)
        failure = _failure_of(sys.exc_info()[1])
        if call is None:  # not a request of ours (cannot happen through ask/answer): the default backoff
            return retry_wait(headers, 0, self.backoff)[0]
        call.last_failure = failure
        self._failing = failure
        with self.stats.lock:
            self.stats.rate_limited += failure == "HTTP 429"
        wait, source = retry_wait(headers, call.attempts - 1, self.backoff)
        if source is not None and wait > MAX_SERVER_WAIT:
            raise _GiveUp(f"the endpoint asks to wait {wait:.0f} s ({source}), more than the {MAX_SERVER_WAIT:.0f} s vdr waits;"
                          " rerun later")
        if call.deadline is not None:
            left = call.deadline - time.monotonic()
            if wait >= left:
                raise _GiveUp(f"deadline passed: the next retry would start in {wait:.2f} s"
                              f"{' (' + source + ')' if source else ''}, {max(left, 0.0):.2f} s before the deadline")
            # the next attempt may not outlast the deadline (the client copies these options per attempt)
            options.timeout = min(self.timeout, left - wait)
        if not self._take_call():
            raise _GiveUp(f"the call budget of {self.budget} ran out while retrying")
        with self.stats.lock:
            self.stats.retries += 1
            self.stats.waited_s += wait
            self.stats.server_waits += source is not None
        call.attempts += 1
        return wait

    def _request(self, messages: list[dict]) -> dict:
        kwargs = dict(model=self.model, messages=messages, temperature=self.temperature, max_tokens=self.max_tokens)
        if self.json_mode:
            kwargs["response_format"] = {"type": "json_object"}
        if self.top_p is not None:
            kwargs["top_p"] = self.top_p
        if self.seed is not None:
            kwargs["seed"] = self.seed
        if self.stop is not None:
            kwargs["stop"] = list(self.stop)
        return kwargs

    def ask(self, item, messages: list[dict], *, deadline: float | None = None) -> str | None:
        """:meth:`answer`'s text (``None`` when the answer has no content); same arguments and errors."""
        return self.answer(item, messages, deadline=deadline).text

    def answer(self, item, messages: list[dict], *, deadline: float | None = None) -> Answer:
        """Send one chat request, retried by the ``openai`` client; the answer read by :func:`read_content`.

        Args:
            item: what is asked (anything with ``describe()``: a judge window, a rewrite item).
            messages: the chat messages (``[{"role": ..., "content": ...}, ...]``).
            deadline: ``time.monotonic()`` by which this request, retries and waits included, must
                end (each attempt's timeout is cut to the time left; a wait that would pass it ends
                the request); ``None``: only the per-attempt timeout and the retry count bound it.

        Raises:
            LLMCallError: every attempt failed, the deadline passed, the endpoint asked for a wait
                longer than :data:`MAX_SERVER_WAIT`, or the budget ran out while retrying (the
                endpoint's failure is the cause named); also when the budget is spent and the last
                call of this client failed. BudgetExhausted: no call left.
            AnswerTruncated: ``finish_reason == "length"``. LLMOutputError: no choices, or a
                content that cannot be read (:func:`read_content`; the reason named).
        """
        o = self._openai
        kwargs = self._request(messages)
        where = f"{self.label} endpoint {self.endpoint}"
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise LLMCallError(self._hide(f"{where}: deadline passed for {item.describe()} before the first attempt"))
            kwargs["timeout"] = min(self.timeout, left)
        if not self._take_call():
            failing = self._failing
            if failing is not None:  # the endpoint is failing: that is the cause, not the budget
                raise LLMCallError(self._hide(f"{where}: {failing}; the call budget of {self.budget} {self.label} calls ran out"
                                              f" while the endpoint failed ({item.describe()} was not asked)"))
            raise BudgetExhausted(f"the call budget of {self.budget} {self.label} calls is spent")
        call = _Call(item, deadline)
        self._local.call = call
        try:
            resp = self._client.chat.completions.create(**kwargs)
        except _GiveUp as e:
            self._failing = call.last_failure
            raise LLMCallError(self._hide(f"{where}: {call.last_failure} for {item.describe()} after {call.attempts} attempt(s);"
                                          f" {e.reason}")) from None
        except o.APIConnectionError as e:  # APITimeoutError is one
            what = "timed out" if isinstance(e, o.APITimeoutError) else f"connection failed ({type(e.__cause__ or e).__name__})"
            self._failing = what
            raise LLMCallError(self._hide(f"{where}: {what} for {item.describe()} after {call.attempts} attempt(s): {e}")) from None
        except o.APIStatusError as e:
            note = ""
            if e.status_code == 429:
                with self.stats.lock:
                    self.stats.rate_limited += 1
                asked = server_wait(e.response.headers)
                if asked is not None and asked[0] > MAX_SERVER_WAIT:
                    note = f" (the endpoint asks to wait {asked[0]:.0f} s ({asked[1]}), more than the {MAX_SERVER_WAIT:.0f} s vdr waits; rerun later)"
            self._failing = f"HTTP {e.status_code}"
            raise LLMCallError(self._hide(f"{where}: HTTP {e.status_code} for {item.describe()} after {call.attempts} attempt(s):"
                                          f" {e}{note}")) from None
        finally:
            self._local.call = None
        self._failing = None
        choice = resp.choices[0] if resp.choices else None
        if choice is None:
            raise LLMOutputError(f"{self.label} answer for {item.describe()} is not valid: no choices in the response")
        if choice.finish_reason == "length":
            raise AnswerTruncated(f"{self.label} answer for {item.describe()} is not valid: truncated at max_tokens={self.max_tokens}")
        msg = choice.message
        extra = getattr(msg, "model_extra", None) or {}
        reasoning = bool(getattr(msg, "reasoning_content", None) or extra.get("reasoning_content") or extra.get("reasoning"))
        try:
            text, parts, thinking = read_content(msg.content)
        except ValueError as e:
            raise LLMOutputError(f"{self.label} answer for {item.describe()} cannot be read: {e}") from None
        with self.stats.lock:
            self.stats.content_parts += parts > 0
            self.stats.thinking_dropped += thinking
            self.stats.reasoning_dropped += reasoning
        return Answer(text, parts, thinking, reasoning)


def _check_sampling(s: LLMSettings) -> tuple[str, ...] | None:
    """Check temperature, top_p, seed and stop of ``s``; the stop sequences as a tuple.

    Raises:
        LLMConfigError: temperature < 0 (or not a number), top_p outside (0, 1], a seed that is not
            an integer, a stop sequence that is not a non-empty string.
    """
    try:
        t = float(s.temperature)
        p = None if s.top_p is None else float(s.top_p)
    except (TypeError, ValueError):
        raise LLMConfigError(f"temperature and top_p must be numbers, got {s.temperature!r} and {s.top_p!r}") from None
    if not math.isfinite(t) or t < 0:
        raise LLMConfigError(f"temperature must be >= 0, got {s.temperature!r}")
    if p is not None and not (0 < p <= 1):
        raise LLMConfigError(f"top_p must be in (0, 1], got {s.top_p!r}")
    if s.seed is not None and (isinstance(s.seed, bool) or not isinstance(s.seed, int)):
        raise LLMConfigError(f"seed must be an integer, got {s.seed!r}")
    if s.stop is None:
        return None
    stop = (s.stop,) if isinstance(s.stop, str) else tuple(s.stop)
    if not stop or not all(isinstance(x, str) and x for x in stop):
        raise LLMConfigError(f"stop must be one or more non-empty strings, got {s.stop!r}")
    return stop


# ----------------------------------------------------------------------------------- extraction

_TAG = {"rewrite": r"<rewrite>(.*?)</rewrite>", "answer": r"<answer>(.*?)</answer>"}
CONVSEARCH_FORMAT = r"^<think>.*?</think>\n<rewrite>.*?</rewrite>$"
"""ConvSearch-R1's format (BeastyZ/ConvSearch-R1): exactly ``<think>...</think>\\n<rewrite>...</rewrite>``."""


@dataclass(frozen=True)
class Extractor:
    """Extract the rewrite from a completion and check its format.

    Args:
        pattern: ``"plain"`` (the whole completion, stripped), ``"rewrite"`` (the first
            ``<rewrite>...</rewrite>``), ``"answer"`` (the first ``<answer>...</answer>``), or a
            regular expression with one group (or a group named ``rewrite``); searched with DOTALL.
        format_regex: the completion must match it (``re.match`` with DOTALL | MULTILINE) for the
            format to be correct; ``None``: the format is correct when the pattern is found.

    Raises:
        InputError: a regex that does not compile or has no group.

    >>> Extractor("rewrite").extract("<think>hm</think>\\n<rewrite> tax 2023 </rewrite>")
    ('tax 2023', True)
    """

    pattern: str = "plain"
    format_regex: str | None = None

    def __post_init__(self) -> None:
        if self.pattern not in ("plain", *_TAG):
            try:
                rx = re.compile(self.pattern, re.DOTALL)
            except re.error as e:
                raise InputError(f"rewrite pattern {self.pattern!r} is not a valid regular expression: {e}") from None
            if rx.groups < 1:
                raise InputError(f"rewrite pattern {self.pattern!r} needs a group around the rewrite, e.g. <q>(.*?)</q>")
        if self.format_regex is not None:
            try:
                re.compile(self.format_regex)
            except re.error as e:
                raise InputError(f"format regex {self.format_regex!r} is not valid: {e}") from None

    def extract(self, completion: str) -> tuple[str | None, bool]:
        """``(rewrite or None when the pattern is absent, format_ok)``; the rewrite is stripped.

        ``"plain"`` of a reasoning model's answer: the text after the last ``</think>``; a
        ``<think>`` that is never closed (the token budget ended while thinking) gives ``None``.
        """
        if self.pattern == "plain":
            head, sep, tail = completion.rpartition("</think>")
            rewrite: str | None = (tail if sep else completion).strip()
            if not sep and "<think>" in completion:
                rewrite = None
        else:
            m = re.search(_TAG.get(self.pattern, self.pattern), completion, re.DOTALL)
            rewrite = None
            if m is not None:
                g = m.group("rewrite") if "rewrite" in m.re.groupindex else m.group(1)
                rewrite = (g or "").strip()
        if self.format_regex is None:
            ok = rewrite is not None
        else:
            ok = re.match(self.format_regex, completion, re.DOTALL | re.MULTILINE) is not None
        return rewrite, ok
