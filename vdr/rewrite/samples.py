"""``vdr rewrite --samples N``: N rewrites per query in ONE file, the N-sample variant that
``vdr evaluate`` reports as one system (:mod:`vdr.experiment.samples`, issue 37.2).

Sample ``I`` (0-based, as ``--sample I``) is :func:`vdr.rewrite.rewrite` with ``sample=I`` (at
temperature > 0; with a ``seed``, requested with ``seed + I``), written to ``OUT.sample<I>.jsonl``
(with its own ``.failures.jsonl`` and ``.meta.json``). Every sample shares one cache (default
``OUT.cache.jsonl``; ``cache`` to give another), keyed by the sample index among the other
settings: a rerun costs nothing, and so does ``--samples N`` after ``--sample 0 .. N-1`` runs that
used the same ``--cache``. Then ``OUT`` is written::

    {"_id": "q1", "text": ["sample 0", "sample 1", ..., "sample N-1"]}

``text`` is a list on purpose: a vdr that predates samples refuses the file (``text`` must be a
string) instead of reading it as one rewrite. A query that failed in any sample is left out of
``OUT`` (``vdr evaluate`` then names it) unless ``fill_failed="original"`` stood in its original
text; ``OUT.failures.jsonl`` lists it with the reason of each failed sample.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..io.atomic import atomic_write
from .runner import RewriteOptions, RewriteReport, failures_file, rewrite

__all__ = ["rewrite_samples", "SamplesReport", "sample_path"]


@dataclass
class SamplesReport:
    """What :func:`rewrite_samples` did.

    Attributes:
        out: the samples file written.
        samples: one :class:`~vdr.rewrite.runner.RewriteReport` per sample, in index order.
        failed: ``{query_id: "sample I: reason; ..."}`` of the queries that failed in some sample.
        failures_path: ``OUT.failures.jsonl`` (``None`` when nothing failed).
    """

    out: Path
    samples: list[RewriteReport]
    failed: dict[str, str]
    failures_path: Path | None

    @property
    def ok(self) -> bool:
        """True when no query failed in any sample."""
        return not self.failed


def sample_path(out: str | Path, index: int) -> Path:
    """The file of sample ``index`` beside ``out`` (``rl.jsonl`` -> ``rl.sample0.jsonl``)."""
    out = Path(out)
    return out.with_name(f"{out.stem}.sample{index}{out.suffix or '.jsonl'}")


def rewrite_samples(queries, *, template: str | Path, out: str | Path, n: int, options: RewriteOptions | None = None,
                    **kwargs: Any) -> SamplesReport:
    """Write ``n`` rewrites per query of ``queries`` into one samples file (see the module docstring).

    Args:
        queries: a :class:`~vdr.types.QuerySet` or a BEIR ``queries.jsonl``.
        template: a shipped template name or a TOML file.
        out: the samples file to write.
        n: the number of samples N (>= 1; > 1 needs temperature > 0 and an endpoint).
        options, kwargs: as :func:`vdr.rewrite.rewrite` (``sample`` excepted: the index is each
            sample's); ``cache`` defaults to ``OUT.cache.jsonl``, shared by the samples.

    Returns:
        :class:`SamplesReport`.

    Raises:
        InputError: ``n`` not an integer >= 1, a ``sample`` keyword, and what :func:`vdr.rewrite.rewrite` raises.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise InputError(f"samples must be an integer >= 1, got {n!r}")
    if "sample" in kwargs or (options is not None and options.sample):
        raise InputError("give either --samples N (every index 0..N-1) or --sample I (one index), not both")
    out = Path(out)
    if kwargs.get("cache") is None and (options is None or options.cache is None):
        kwargs["cache"] = out.with_name(f"{out.stem}.cache.jsonl")
    reports = [rewrite(queries, template=template, out=sample_path(out, i), options=options, sample=i, **kwargs) for i in range(n)]
    texts = [_read(r.out) for r in reports]
    failed: dict[str, list[str]] = {}
    for i, r in enumerate(reports):
        for qid, reason in r.failed.items():
            failed.setdefault(qid, []).append(f"sample {i}: {reason}")
    ids = list(texts[0]) if texts else []
    with atomic_write(out) as f:
        for qid in ids:
            if all(qid in t for t in texts):
                f.write(json.dumps({"_id": qid, "text": [t[qid] for t in texts]}, ensure_ascii=False) + "\n")
    why = {q: "; ".join(v) for q, v in failed.items()}
    path = failures_file(out)
    if why:
        with atomic_write(path) as f:
            for qid, reason in why.items():
                f.write(json.dumps({"_id": qid, "reason": reason}, ensure_ascii=False) + "\n")
    else:
        path.unlink(missing_ok=True)
    return SamplesReport(out, reports, why, path if why else None)


def _read(path: Path) -> dict[str, str]:
    """``{id: text}`` of one sample's rewrite file (the runner wrote it: one object a line)."""
    with open(path, encoding="utf-8") as f:
        return {o["_id"]: o["text"] for o in (json.loads(line) for line in f if line.strip())}
