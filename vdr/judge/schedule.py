"""Window schedules of Stage A (tournament) and Stage B (rubric).

Source: reference documentation of cohere-ai/rcp-ndcg, ``docs/concepts/tournament.md`` and
``docs/concepts/rubric.md`` (RCP-nDCG paper, arXiv 2609.35739). Counts are in placements per page:
a phase with ``p`` placements asks ``round(p * n / w)`` windows (ties to even) of ``w = min(window, n)``
pages of a pool of ``n``, so calls scale with the pool. Defaults are the paper's:

* Stage A random: ``53 * 10 / 150`` placements, balanced (each window takes the pages shown least
  often so far, random tie-breaks), display order shuffled.
* Stage A stratified: 1.8 placements; windows of pages adjacent in a preliminary Bradley-Terry
  order (fitted on the random windows), so pages of similar quality meet.
* every Stage A window is also sent reversed (``reverse=True``), cancelling position bias.
* Stage B: ``max(ceil(n / w), round(p * n / w))`` balanced random windows with ``p = 100 * 10 / 150``,
  not reversed.
* window sizes: text 10 (Stage A) / 10 (Stage B); image 5 / 8.

Deviations from the reference: no adaptive Stage A phase (its windows of uncertain adjacent pairs,
7 batches with refits); Stage B windows are all balanced random (the reference makes half of them
stratified by a preliminary Rasch fit); stratified windows take a contiguous block of the
preliminary order around evenly spaced ranks (with jitter) rather than tiers. Every query draws
from its own random stream seeded by ``(seed, query id)``, so the windows, hence the cache keys,
are the same on a rerun.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

import numpy as np

__all__ = ["Schedule", "query_rng", "balanced_windows", "stratified_windows", "n_windows"]


@dataclass(frozen=True)
class Schedule:
    """Window counts and sizes (see the module docstring).

    Attributes:
        window: Stage A window size. random_placements, stratified_placements: Stage A placements
            per page. reverse: send each Stage A window also reversed. rubric_window: Stage B window
            size. rubric_placements: Stage B placements per page. seed: base seed.
    """

    window: int = 10
    random_placements: float = 53 * 10 / 150
    stratified_placements: float = 1.8
    reverse: bool = True
    rubric_window: int = 10
    rubric_placements: float = 100 * 10 / 150
    seed: int = 42

    @classmethod
    def for_modality(cls, modality: str, **overrides) -> "Schedule":
        """Paper defaults for ``"text"`` (windows 10/10) or ``"image"`` (5/8), with overrides."""
        base = {"window": 5, "rubric_window": 8} if modality == "image" else {}
        base.update(overrides)
        return cls(**base)

    def to_dict(self) -> dict:
        """Every field by name (JSON-ready: ints, floats, bools)."""
        return dict(self.__dict__)


def query_rng(seed: int, query_id: str, stream: str) -> np.random.Generator:
    """The random stream of one query and purpose (stable across runs and platforms)."""
    h = int.from_bytes(hashlib.sha256(f"{query_id}\x00{stream}".encode("utf-8")).digest()[:8], "little")
    return np.random.default_rng([int(seed), h])


def n_windows(placements: float, n: int, w: int) -> int:
    """``round(placements * n / w)`` (ties to even), at least 1 when ``n >= 2``."""
    if n < 2:
        return 0
    return max(1, round(placements * n / w))


def balanced_windows(n: int, w: int, count: int, rng: np.random.Generator, shown: np.ndarray | None = None) -> list[list[int]]:
    """``count`` windows of ``w`` distinct items of ``0..n-1``, each taking the items shown least
    often so far (random tie-breaks), in shuffled display order. ``shown`` (``(n,)`` int) is updated."""
    shown = np.zeros(n, dtype=np.int64) if shown is None else shown
    out = []
    for _ in range(count):
        key = shown + rng.random(n)  # fractional part breaks ties at random
        pick = np.argsort(key, kind="stable")[:w]
        rng.shuffle(pick)
        shown[pick] += 1
        out.append([int(x) for x in pick])
    return out


def stratified_windows(theta: np.ndarray, w: int, count: int, rng: np.random.Generator) -> list[list[int]]:
    """``count`` windows of ``w`` items adjacent in the order of ``theta`` (descending), centred on
    evenly spaced ranks with jitter, in shuffled display order."""
    n = theta.shape[0]
    order = np.argsort(-theta, kind="stable")
    out = []
    for k in range(count):
        centre = (k + 0.5) * n / count + rng.uniform(-0.5, 0.5) * n / max(count, 1)
        start = int(min(max(round(centre - w / 2), 0), n - w))
        pick = order[start:start + w].copy()
        rng.shuffle(pick)
        out.append([int(x) for x in pick])
    return out


def rubric_count(placements: float, n: int, w: int) -> int:
    """Stage B windows: ``max(ceil(n / w), round(placements * n / w))`` (0 for an empty pool)."""
    if n == 0:
        return 0
    return max(math.ceil(n / w), round(placements * n / w))
