"""One OpenAI-compatible chat client for ``vdr judge`` and ``vdr rewrite``, and the reading of an
answer: the endpoint settings (:class:`LLMSettings`), the client (:class:`ChatClient`: retries with
exponential backoff, a per-request deadline, a call budget, the concurrency its callers use), an
append-only JSONL answer cache (:class:`AnswerCache`) and the extraction of a rewrite from a
completion (:class:`Extractor`, shared with the rewards of :mod:`vdr.rewards`).

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
import json
import os
import random
import re
import threading
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from .errors import InputError, VdrError, VdrWarning

__all__ = [
    "LLMSettings",
    "ChatClient",
    "AnswerCache",
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
        max_retries: retries of a failed request (timeout, connection error, HTTP 429 or >= 500),
            with exponential backoff ``backoff * 2**attempt`` seconds (+ up to 10% jitter).
        backoff: the first backoff, seconds.
        temperature: sampling temperature.
        max_tokens: token limit of an answer (an answer cut by it is :class:`AnswerTruncated`).
        json_mode: send ``response_format={"type": "json_object"}``.
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


# ---------------------------------------------------------------------------------------- client


@dataclass
class CallStats:
    """Counters of one client: HTTP attempts made, answers from cache, new answers, retries."""

    calls: int = 0
    cached: int = 0
    answered: int = 0
    retries: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def to_dict(self) -> dict:
        """``{"calls", "cached", "answered", "retries"}``."""
        return {"calls": self.calls, "cached": self.cached, "answered": self.answered, "retries": self.retries}


class ChatClient:
    """Send chat requests to an OpenAI-compatible endpoint, with retries, a deadline and a call budget.

    Args:
        settings: the endpoint and sampling settings (:class:`LLMSettings`).
        label: what the endpoint serves, for error messages (``"judge endpoint http://...: HTTP 500"``).

    Attributes:
        settings: as given. endpoint: the base URL without credentials (:func:`redact_url`).
        model, concurrency, budget, timeout, max_retries, backoff, temperature, max_tokens,
        json_mode: the settings' values (normalised to int/float/bool).
        stats: :class:`CallStats`.

    Raises:
        LLMConfigError: no endpoint or model, concurrency < 1, max_retries < 0 or budget < 0.
    """

    def __init__(self, settings: LLMSettings, *, label: str = "LLM") -> None:
        s = settings
        if not s.endpoint:
            raise LLMConfigError(f"no {label} endpoint: give an OpenAI-compatible base URL such as http://localhost:8000/v1")
        if not s.model:
            raise LLMConfigError(f"no {label} model: give the model name the endpoint serves")
        if s.concurrency < 1 or s.max_retries < 0 or (s.budget is not None and s.budget < 0):
            raise LLMConfigError("concurrency must be >= 1, max_retries >= 0 and budget >= 0")
        import openai

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
        self.stats = CallStats()
        self._openai = openai
        self._client = openai.OpenAI(base_url=s.endpoint, api_key=key, max_retries=0, timeout=self.timeout)

    def config(self) -> dict:
        """JSON-ready settings (no key; the endpoint without credentials)."""
        return {"endpoint": self.endpoint, "model": self.model, "temperature": self.temperature, "max_tokens": self.max_tokens,
                "json_mode": self.json_mode, "timeout_s": self.timeout, "max_retries": self.max_retries,
                "concurrency": self.concurrency, "budget": self.budget}

    def _hide(self, text: str) -> str:
        return text.replace(self._secret, "***") if self._secret and self._secret != "EMPTY" else text

    def _reserve_call(self) -> None:
        with self.stats.lock:
            if self.budget is not None and self.stats.calls >= self.budget:
                raise BudgetExhausted(f"the call budget of {self.budget} {self.label} calls is spent")
            self.stats.calls += 1

    def ask(self, item, messages: list[dict], *, deadline: float | None = None) -> str | None:
        """Send one chat request with retries; the answer's content (``None`` when it has none).

        Args:
            item: what is asked (anything with ``describe()``: a judge window, a rewrite item).
            messages: the chat messages (``[{"role": ..., "content": ...}, ...]``).
            deadline: ``time.monotonic()`` by which this request, retries and backoff included, must
                end (each attempt's timeout is cut to the time left); ``None``: only the per-attempt
                timeout and the retry count bound it.

        Raises:
            LLMCallError: every attempt failed, or the deadline passed. BudgetExhausted: no call left.
            AnswerTruncated: ``finish_reason == "length"``. LLMOutputError: no choices.
        """
        o = self._openai
        kwargs = dict(model=self.model, messages=messages, temperature=self.temperature, max_tokens=self.max_tokens)
        if self.json_mode:
            kwargs["response_format"] = {"type": "json_object"}
        attempt = 0
        last_failure: str | None = None
        where = f"{self.label} endpoint {self.endpoint}"
        while True:
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise LLMCallError(self._hide(f"endpoint {self.endpoint}: deadline passed for {item.describe()}"
                                                  f" after {attempt} attempt(s){': ' + last_failure if last_failure else ''}"))
                kwargs["timeout"] = min(self.timeout, left)
            try:
                self._reserve_call()
            except BudgetExhausted:
                if last_failure is None:
                    raise
                # the budget ran out while retrying a failing endpoint: the failure is the cause, not the budget
                raise LLMCallError(self._hide(f"{last_failure} (the call budget of {self.budget} ran out while retrying)")) from None
            try:
                resp = self._client.chat.completions.create(**kwargs)
            except (o.APITimeoutError, o.APIConnectionError, o.RateLimitError, o.InternalServerError) as e:
                status = getattr(e, "status_code", None)
                what = "timed out" if isinstance(e, o.APITimeoutError) else (f"HTTP {status}" if status else f"connection failed ({type(e).__name__})")
                last_failure = f"{where}: {what} for {item.describe()} after {attempt + 1} attempt(s): {e}"
                if attempt >= self.max_retries:
                    raise LLMCallError(self._hide(last_failure)) from None
                with self.stats.lock:
                    self.stats.retries += 1
                pause = self.backoff * (2 ** attempt) * (1.0 + 0.1 * random.random())
                time.sleep(pause if deadline is None else max(0.0, min(pause, deadline - time.monotonic())))
                attempt += 1
                continue
            except o.APIStatusError as e:
                raise LLMCallError(self._hide(f"{where}: HTTP {e.status_code} for {item.describe()}: {e}")) from None
            choice = resp.choices[0] if resp.choices else None
            if choice is None:
                raise LLMOutputError(f"{self.label} answer for {item.describe()} is not valid: no choices in the response")
            if choice.finish_reason == "length":
                raise AnswerTruncated(f"{self.label} answer for {item.describe()} is not valid: truncated at max_tokens={self.max_tokens}")
            return choice.message.content


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
