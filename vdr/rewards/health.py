"""Training health on the reward side: the signals of a collapsing GRPO run, per training step.

GRPO runs of query rewriters can collapse (ConvSearch-R1's users report the reward falling from
1.3 to 0 with gibberish after about 270 steps, BeastyZ/ConvSearch-R1#6; GRPO makes length free,
radixark/miles#1573). The reward side sees it first. :class:`TrainingHealth` is fed by every
reward path -- the TRL reward function and verl's ``compute_score`` of
:class:`~vdr.rewards.CompletionReward`, and the ``/reward`` and ``/retrieve`` requests of
``vdr serve`` -- and computes, per step (one batch of completions):

* ``zero_advantage_share``: the share of GRPO groups whose rewards are all equal (their
  group-normalised advantage is 0, so they give no gradient). A group is the completions of one
  query id within the step (or ``group_size`` consecutive completions when that is set); groups
  with fewer than 2 rewards (``None`` rewards, abstained, left out) are not counted. "Equal" is
  exact float equality (``==``), as the advantage ``r - mean(r)`` is exactly 0 only then.
  ``None`` when the step holds no group of size >= 2.
* ``length_words`` / ``length_chars``: the mean rewrite length in whitespace tokens
  (``len(rewrite.split())``) and in characters (of the stripped rewrite), over the completions with
  a rewrite (empty rewrites count 0; a completion whose pattern was not found has no rewrite and is
  left out). ``None`` when no completion of the step has a rewrite.
* ``length_drift``: ``mean(length_words of the last `window` steps) / mean(length_words of the
  first `baseline_steps` steps)`` (steps without a length are skipped in both); ``None`` until
  ``baseline_steps`` steps have a length, or when that baseline is 0. 1.0: no drift.
* ``format_break_share``: completions whose format is broken / completions. "Broken" is the rule
  of the format penalty, :meth:`vdr.llm.Extractor.extract`'s ``format_ok`` (without a format regex:
  the pattern was not found). The server sees rewrites, not completions: there a ``null`` rewrite
  is a format break (:class:`~vdr.rewards.RemoteScorer` sends ``null`` when no rewrite was found or
  the format penalty replaces the reward).
* ``empty_share``: completions whose rewrite was found but is empty or whitespace / completions.
* ``off_script_share``: completions whose non-empty rewrite is mostly in another Unicode script
  than the query / completions. A character's script is the first word of its Unicode name
  (``unicodedata.name``: ``LATIN``, ``CYRILLIC``, ``ARABIC``, ``HANGUL`` ...; ``FULLWIDTH`` /
  ``HALFWIDTH`` dropped; CJK ideographs, Hiragana and Katakana are one script, ``CJK``); only
  letters (``str.isalpha``) count, so digits, punctuation and spaces never do. The query's script is
  the script of most letters of the reference text (the query text when the adapter has it, else
  ``expected_script``); a rewrite is off-script when fewer than ``script_min_share`` (0.5) of its
  letters are in that script. A rewrite without letters is never off-script; when no reference
  script is known the rewrite is counted in ``script_unchecked`` (and not as off-script). This is
  a script check, not language identification (no maintained language detector is a dependency).

Thresholds (:class:`HealthOptions`; ``None`` disables one): when a step's value crosses one, a
:class:`~vdr.errors.VdrWarning` names the signal, the value, the threshold and the step -- once
per crossing: the warning is raised again only after the signal has come back within its bound.
The alerts are also kept in :meth:`TrainingHealth.snapshot`.
"""

from __future__ import annotations

import functools
import math
import threading
import unicodedata
import warnings
from collections import deque
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import ClassVar

from ..errors import InputError, VdrWarning
from ..retrieve.options import option, options_from

__all__ = ["HealthOptions", "TrainingHealth", "SIGNALS", "char_script", "dominant_script", "script_share"]

#: The per-step signals, in the order they are logged.
SIGNALS = ("zero_advantage_share", "length_words", "length_chars", "length_drift", "format_break_share", "empty_share",
           "off_script_share")

#: Completions per step when per-sample calls (verl's NaiveRewardManager) arrive without ``step_size``:
#: ConvSearch-R1's training batch (128 prompts x 8 rollouts).
DEFAULT_SAMPLE_STEP = 1024

#: (signal, option of its bound, "max" or "min").
_BOUNDS = (("zero_advantage_share", "zero_advantage_max", "max"), ("length_drift", "length_drift_max", "max"),
           ("length_drift", "length_drift_min", "min"), ("format_break_share", "format_break_max", "max"),
           ("empty_share", "empty_max", "max"), ("off_script_share", "off_script_max", "max"))

_HINTS = {
    "zero_advantage_share": "groups whose rollouts all got the same reward give GRPO no gradient (collapse or a saturated reward)",
    "length_drift": "the rewrite length drifts from the first steps (GRPO leaves length free)",
    "format_break_share": "completions break the format (the format penalty applies)",
    "empty_share": "rewrites are empty",
    "off_script_share": "rewrites are not in the query's script (gibberish or language drift)",
}

_SCRIPT_ALIASES = {"HIRAGANA": "CJK", "KATAKANA": "CJK"}


@dataclass(frozen=True)
class HealthOptions:
    """Settings of a :class:`TrainingHealth` (given as ``options`` or as keywords).

    Attributes:
        zero_advantage_max, length_drift_max, length_drift_min, format_break_max, empty_max,
            off_script_max: the thresholds (``None``: not checked); see the module docstring.
        baseline_steps: W, the first steps whose mean length is the drift's baseline.
        window: the last steps whose mean length is the drift's current value.
        group_size: GRPO group = this many consecutive completions (``None``: group by query id).
        step_size: close a step every this many completions (``None``: each batch call is a step,
            per-sample calls close one every :data:`DEFAULT_SAMPLE_STEP`).
        expected_script: the query script when no query text is given (``LATIN``, ``CJK``, ...).
        script_min_share: a rewrite with fewer of its letters in the query's script is off-script.
        history: steps kept in :meth:`TrainingHealth.snapshot` (older ones drop out; totals stay).
        warn: raise a :class:`~vdr.errors.VdrWarning` when a threshold is crossed.
    """

    label: ClassVar[str] = "TrainingHealth"

    zero_advantage_max: float | None = option(0.5, "Most groups with all rewards equal (share)")
    length_drift_max: float | None = option(2.0, "Largest length drift (rolling mean / first steps' mean)")
    length_drift_min: float | None = option(0.5, "Smallest length drift")
    format_break_max: float | None = option(0.1, "Most format breaks (share of completions)")
    empty_max: float | None = option(0.1, "Most empty rewrites (share of completions)")
    off_script_max: float | None = option(0.1, "Most off-script rewrites (share of completions)")
    baseline_steps: int = option(10, "Steps whose mean length is the drift baseline")
    window: int = option(5, "Last steps whose mean length is compared to the baseline")
    group_size: int | None = option(None, "GRPO group = this many consecutive completions (None: by query id)")
    step_size: int | None = option(None, "Completions per step (None: one step per batch call)")
    expected_script: str | None = option(None, "Query script when no query text is given (LATIN, CJK, CYRILLIC, ...)")
    script_min_share: float = option(0.5, "Least share of a rewrite's letters in the query's script")
    history: int = option(1000, "Steps kept in the snapshot")
    warn: bool = option(True, "Warn (VdrWarning) when a threshold is crossed")

    def __post_init__(self) -> None:
        for name in ("baseline_steps", "window", "history"):
            if getattr(self, name) < 1:
                raise InputError(f"TrainingHealth: {name} must be >= 1, got {getattr(self, name)!r}")
        for name in ("group_size", "step_size"):
            v = getattr(self, name)
            if v is not None and v < 1:
                raise InputError(f"TrainingHealth: {name} must be >= 1 or None, got {v!r}")
        for _, name, _ in _BOUNDS:
            v = getattr(self, name)
            if v is not None and not (math.isfinite(v) and v >= 0):
                raise InputError(f"TrainingHealth: threshold {name} must be a finite number >= 0 or None, got {v!r}")
        if not 0 < self.script_min_share <= 1:
            raise InputError(f"TrainingHealth: script_min_share must be in (0, 1], got {self.script_min_share!r}")


# --------------------------------------------------------------------------------------------
# scripts


@functools.lru_cache(maxsize=65536)
def char_script(ch: str) -> str | None:
    """The script of a letter: the first word of its Unicode name (``FULLWIDTH`` / ``HALFWIDTH``
    dropped; Hiragana and Katakana folded into ``CJK``); ``None`` for a character that is not a
    letter (``str.isalpha``) or has no name.

    >>> [char_script(c) for c in "aЖ中かa1"]
    ['LATIN', 'CYRILLIC', 'CJK', 'CJK', 'LATIN', None]
    """
    if not ch.isalpha():
        return None
    words = unicodedata.name(ch, "").split()
    if words and words[0] in ("FULLWIDTH", "HALFWIDTH"):
        words = words[1:]
    if not words:
        return None
    return _SCRIPT_ALIASES.get(words[0], words[0])


def _script_counts(text: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for ch in text:
        s = char_script(ch)
        if s is not None:
            counts[s] = counts.get(s, 0) + 1
    return counts


def dominant_script(text: str | None) -> str | None:
    """The script of most letters of ``text`` (ties: the one met first); ``None`` without letters.

    >>> dominant_script("Steuer 2023 Steuererklärung"), dominant_script("税 2023"), dominant_script("2023")
    ('LATIN', 'CJK', None)
    """
    counts = _script_counts(text or "")
    return max(counts, key=counts.__getitem__) if counts else None


def script_share(text: str, script: str) -> float | None:
    """The share of the letters of ``text`` in ``script``; ``None`` when ``text`` has no letters.

    >>> script_share("tax Налог", "LATIN")
    0.375
    """
    counts = _script_counts(text)
    total = sum(counts.values())
    return counts.get(script, 0) / total if total else None


# --------------------------------------------------------------------------------------------
# the tracker


@dataclass
class _Sample:
    query_id: str
    reward: float | None
    rewrite: str | None
    format_ok: bool
    reference: str | None


def _mean(xs: Sequence[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


class TrainingHealth:
    """Per-step training-health signals of the rewards of a GRPO run (see the module docstring for
    the definition of each signal, the thresholds and the warnings).

    Feed it with :meth:`record` (one call per batch of completions; the adapters of
    :class:`~vdr.rewards.CompletionReward` and ``vdr serve`` do); read it with :attr:`last` (the
    last step's signals) and :meth:`snapshot` (JSON-ready: history, totals, alerts). Thread-safe.

    Args:
        options: :class:`HealthOptions`, or its fields as keywords.

    Attributes:
        query_texts: ``{query id: original query text}`` or ``None``: the off-script reference that
            ``vdr serve --queries FILE`` gives the server's tracker (its requests carry no query text).

    Raises:
        InputError: a bad option (named with its value).

    >>> h = TrainingHealth(warn=False)
    >>> h.record(["q1", "q1", "q2", "q2"], [1.0, 1.0, 0.5, 0.0], ["a b", "a b c", "", None],
    ...          [True, True, True, False])["zero_advantage_share"]
    0.5
    """

    def __init__(self, options: HealthOptions | None = None, **kwargs) -> None:
        self.options: HealthOptions = options_from(HealthOptions, options, kwargs, backend="TrainingHealth")
        o = self.options
        self._lock = threading.Lock()
        self._pending: list[_Sample] = []
        self._history: deque = deque(maxlen=o.history)
        self._alerts: deque = deque(maxlen=o.history)
        self._baseline: list[float] = []
        self._recent: deque = deque(maxlen=o.window)
        self._crossed: dict[str, bool] = {}
        self.steps = 0
        self.query_texts: dict[str, str] | None = None
        self.last: dict | None = None
        self.totals = {"completions": 0, "groups": 0, "zero_advantage_groups": 0, "with_rewrite": 0, "format_breaks": 0,
                       "empty": 0, "off_script": 0, "script_unchecked": 0, "alerts": 0}

    def record(self, query_ids: Sequence[object], rewards: Sequence[float | None], rewrites: Sequence[str | None],
               format_ok: Sequence[bool] | None = None, references: Sequence[str | None] | None = None, *,
               whole_step: bool = True, label: object = None) -> dict | None:
        """Add one batch of completions; close the step(s) it completes.

        Args:
            query_ids: the query of each completion (its GRPO group without ``group_size``).
            rewards: each completion's reward (``None``: abstained, left out of the groups).
            rewrites: each extracted rewrite (``None``: no rewrite found).
            format_ok: each completion's format check (default: ``rewrite is not None``).
            references: each completion's query text (the off-script reference; ``None``:
                ``expected_script``).
            whole_step: the batch is one training step (TRL, verl's batch manager, one server
                request); ``False`` for per-sample calls (verl's NaiveRewardManager), which are buffered.
            label: the trainer's step number, kept in the step's record (``None``: not known).

        Returns:
            The signals of the last step closed by this call (the keys of a step record: ``step``, ``label``, the :data:`SIGNALS`, the counts and ``alerts``), or
            ``None`` when the step is still open.

        Raises:
            InputError: the sequences differ in length (every length named).
        """
        n = len(query_ids)
        ok = [rw is not None for rw in rewrites] if format_ok is None else list(format_ok)
        refs = [None] * n if references is None else list(references)
        if not (len(rewards) == len(rewrites) == len(ok) == len(refs) == n):
            raise InputError(f"TrainingHealth.record: {n} query ids, {len(rewards)} rewards, {len(rewrites)} rewrites, "
                             f"{len(ok)} format flags and {len(refs)} references: one of each per completion")
        samples = [_Sample(str(q), None if r is None else float(r), rw, bool(f), ref)
                   for q, r, rw, f, ref in zip(query_ids, rewards, rewrites, ok, refs)]
        size = self.options.step_size or (None if whole_step else DEFAULT_SAMPLE_STEP)
        closed = None
        with self._lock:
            self._pending.extend(samples)
            if size is None:
                closed = self._close(label)
            while size is not None and len(self._pending) >= size:
                closed = self._close(label, size)
        if closed is not None:
            self._warn(closed)
        return closed

    def end_step(self, label: object = None) -> dict | None:
        """Close the open step now (buffered per-sample completions); its signals, or ``None`` when
        nothing is buffered."""
        with self._lock:
            closed = self._close(label) if self._pending else None
        if closed is not None:
            self._warn(closed)
        return closed

    def _close(self, label: object, size: int | None = None) -> dict | None:
        """Close a step over the first ``size`` buffered samples (all by default); under the lock."""
        size = len(self._pending) if size is None else size
        batch, self._pending = self._pending[:size], self._pending[size:]
        if not batch:
            return None
        self.steps += 1
        sig = self._step_signals(batch)
        words = sig["length_words"]
        if words is not None:
            if len(self._baseline) < self.options.baseline_steps:
                self._baseline.append(words)
            self._recent.append(words)
        sig["length_drift"] = self._drift()
        out = {"step": self.steps, "label": label, **{k: sig[k] for k in SIGNALS}, **sig["counts"]}
        t = self.totals
        for k in ("completions", "groups", "zero_advantage_groups", "with_rewrite", "format_breaks", "empty", "off_script",
                  "script_unchecked"):
            t[k] += sig["counts"][k]
        out["alerts"] = self._check(out)
        t["alerts"] += len(out["alerts"])
        self._history.append(out)
        self.last = out
        return out

    def _drift(self) -> float | None:
        """Rolling mean length / baseline mean length (``None`` until the baseline is complete or when it is 0)."""
        if len(self._baseline) < self.options.baseline_steps or not self._recent:
            return None
        base = sum(self._baseline) / len(self._baseline)
        return None if base == 0 else (sum(self._recent) / len(self._recent)) / base

    def _step_signals(self, samples: Sequence[_Sample]) -> dict:
        """The signals of one step's samples, except ``length_drift`` (which needs the earlier steps):
        ``{signal: value or None, "counts": {"completions", "groups", "zero_advantage_groups",
        "with_rewrite", "format_breaks", "empty", "off_script", "script_unchecked"}}``."""
        n = len(samples)
        groups = self._groups(samples)
        sized = [g for g in groups if len(g) >= 2]
        equal = sum(all(r == g[0] for r in g) for g in sized)
        with_rw = [s.rewrite.strip() for s in samples if s.rewrite is not None]
        empty = sum(not rw for rw in with_rw)
        off, unchecked = self._off_script(samples)
        breaks = sum(not s.format_ok for s in samples)
        counts = {"completions": n, "groups": len(sized), "zero_advantage_groups": equal, "with_rewrite": len(with_rw),
                  "format_breaks": breaks, "empty": empty, "off_script": off, "script_unchecked": unchecked}
        return {"zero_advantage_share": equal / len(sized) if sized else None,
                "length_words": _mean([len(rw.split()) for rw in with_rw]), "length_chars": _mean([len(rw) for rw in with_rw]),
                "length_drift": None, "format_break_share": breaks / n if n else None,
                "empty_share": empty / n if n else None, "off_script_share": off / n if n else None, "counts": counts}

    def _groups(self, samples: Sequence[_Sample]) -> list[list[float]]:
        """The non-``None`` rewards of each GRPO group: ``group_size`` consecutive samples, else by query id."""
        size = self.options.group_size
        if size:
            chunks = [samples[i:i + size] for i in range(0, len(samples), size)]
        else:
            by_id: dict[str, list[_Sample]] = {}
            for s in samples:
                by_id.setdefault(s.query_id, []).append(s)
            chunks = list(by_id.values())
        return [[s.reward for s in c if s.reward is not None] for c in chunks]

    def _off_script(self, samples: Sequence[_Sample]) -> tuple[int, int]:
        """``(off-script rewrites, rewrites not checked for want of a reference script)``."""
        checks = [self.off_script(s.rewrite, s.reference) for s in samples]
        return sum(c is True for c in checks), sum(c is None for c in checks)

    def off_script(self, rewrite: str | None, reference: str | None) -> bool | None:
        """Whether ``rewrite`` is off-script against the query text ``reference`` (the module
        docstring's rule): ``False`` for no or an empty rewrite or one without letters; ``None``
        (not checked) when neither ``reference`` nor ``expected_script`` gives a script."""
        if rewrite is None or not rewrite.strip():
            return False
        expected = self.options.expected_script.upper() if self.options.expected_script else None
        script = dominant_script(reference) or expected
        if script is None:
            return None
        share = script_share(rewrite, script)
        return share is not None and share < self.options.script_min_share

    def flags(self, rewrite: str | None, format_ok: bool, reference: str | None = None) -> dict[str, bool]:
        """One completion's ``{"format_break", "empty", "off_script"}`` (the rules of the module
        docstring; ``off_script`` is ``False`` when not checked): a step's shares are their means."""
        return {"format_break": not format_ok, "empty": rewrite is not None and not rewrite.strip(),
                "off_script": bool(self.off_script(rewrite, reference))}

    def _check(self, step: dict) -> list[dict]:
        """The thresholds this step crosses anew (once per crossing); under the lock."""
        out = []
        for signal, name, kind in _BOUNDS:
            bound, value = getattr(self.options, name), step[signal]
            if bound is None or value is None:
                continue
            crossed = value > bound if kind == "max" else value < bound
            if crossed and not self._crossed.get(name):
                alert = {"step": step["step"], "label": step["label"], "signal": signal, "value": value, "threshold": name,
                         "bound": bound}
                out.append(alert)
                self._alerts.append(alert)
            self._crossed[name] = crossed
        return out

    def _warn(self, step: dict) -> None:
        if not self.options.warn:
            return
        for a in step["alerts"]:
            side = "above" if a["threshold"].endswith("_max") else "below"
            at = f"step {a['step']}" + (f" (trainer step {a['label']})" if a["label"] is not None else "")
            warnings.warn(f"training health: {a['signal']} = {a['value']:.4g} at {at} is {side} the threshold "
                          f"{a['threshold']} = {a['bound']:g}: {_HINTS[a['signal']]}", VdrWarning, stacklevel=3)

    def snapshot(self) -> dict:
        """JSON-ready state: ``{"steps", "last", "history" (the last ``history`` steps), "totals" (counts
        over every step, and their shares), "baseline_length_words", "alerts", "pending" (buffered
        completions), "options"}``."""
        with self._lock:
            t = dict(self.totals)
            n = t["completions"]
            shares = {"zero_advantage_share": t["zero_advantage_groups"] / t["groups"] if t["groups"] else None,
                      **{f"{k}_share": (t[c] / n if n else None) for k, c in (("format_break", "format_breaks"), ("empty", "empty"),
                                                                           ("off_script", "off_script"))}}
            base = sum(self._baseline) / len(self._baseline) if len(self._baseline) == self.options.baseline_steps else None
            return {"steps": self.steps, "last": self.last, "history": list(self._history), "totals": {**t, **shares},
                    "baseline_length_words": base, "alerts": list(self._alerts), "pending": len(self._pending),
                    "options": asdict(self.options)}
