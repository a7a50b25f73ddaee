"""An MTEB ViDoRe benchmark in one command: every public task of ``ViDoRe(v3)`` (or ``ViDoRe(v1)``,
``ViDoRe(v2)``, ``ViDoRe(v1&v2)``) evaluated as :func:`vdr.evaluate` evaluates one dataset, then a
row per task and their mean, as MTEB's benchmark tables show them.

Each task is ingested from its dataset at the revision MTEB pins and evaluated into
``OUT/<task>/`` (a complete results folder of its own); ``OUT/benchmark.json`` holds the table.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..io.atomic import atomic_write

__all__ = ["BenchmarkResults", "evaluate_benchmark", "BENCHMARK_FILE"]

#: The benchmark table of :func:`evaluate_benchmark`, in its ``out`` folder.
BENCHMARK_FILE = "benchmark.json"


def _metric_of(main_score: str) -> str:
    """vdr's name of an MTEB main score (``ndcg_at_10`` -> ``ndcg@10``)."""
    name, _, k = main_score.rpartition("_at_")
    return f"{name}@{k}" if name and k.isdigit() else main_score


@dataclass
class BenchmarkResults:
    """What :func:`evaluate_benchmark` measured.

    Attributes:
        name: the benchmark (``ViDoRe(v3)``).
        rows: ``[{"task", "dataset", "revision", "metric", "backend", "variant", "score",
            "languages"}]``: a task's main score (MTEB's ``main_score``, e.g. nDCG@10) for each
            backend x variant; for a multilingual task the mean over its languages (MTEB's main
            score), else the mean over its queries.
        results: ``{task: Results}`` of each task's evaluation.
    """

    name: str
    rows: list[dict] = field(default_factory=list)
    results: dict = field(default_factory=dict)

    def means(self) -> list[dict]:
        """Per backend x variant, the unweighted mean over tasks of their scores
        (``[{"backend", "variant", "metric", "score", "tasks"}]``); the metric is named when all
        tasks share it, else ``"main score"``."""
        out = []
        for b, v in dict.fromkeys((r["backend"], r["variant"]) for r in self.rows):
            mine = [r for r in self.rows if (r["backend"], r["variant"]) == (b, v) and r["score"] is not None]
            metrics = {r["metric"] for r in mine}
            out.append({"backend": b, "variant": v, "metric": metrics.pop() if len(metrics) == 1 else "main score",
                        "score": math.fsum(r["score"] for r in mine) / len(mine) if mine else None, "tasks": len(mine)})
        return out

    def table(self):
        """A :class:`vdr.results.Table`: a row per task x backend x variant, then the means."""
        from ..results import Table, fmt4

        rows = [(r["task"], r["backend"], r["variant"], r["metric"], fmt4(r["score"])) for r in self.rows]
        rows += [(f"mean over {m['tasks']} tasks", m["backend"], m["variant"], m["metric"], fmt4(m["score"])) for m in self.means()]
        notes = (f"{self.name}: each task's main score as MTEB reports it (a multilingual task: the mean over its languages,"
                 " each language its own query set); the last rows: the unweighted mean over tasks.",)
        return Table(("task", "backend", "variant", "metric", "score"), tuple(rows), notes, left=4)

    def to_dict(self) -> dict:
        """``{"benchmark", "rows", "means"}`` (JSON-ready)."""
        return {"benchmark": self.name, "rows": self.rows, "means": self.means()}


def evaluate_benchmark(name: str, *, out: str | Path, tasks=None, **kwargs: Any) -> BenchmarkResults:
    """Evaluate every public task of an MTEB ViDoRe benchmark.

    Args:
        name: ``ViDoRe(v1)``, ``ViDoRe(v2)``, ``ViDoRe(v3)`` or ``ViDoRe(v1&v2)``
            (:data:`vdr.ingest.vidore.VIDORE_BENCHMARKS`).
        out: the folder: ``OUT/<task>/`` per task (a results folder), ``OUT/benchmark.json``.
        tasks: the :class:`~vdr.ingest.vidore.MtebVidoreTask` list to run (default: the
            benchmark's public tasks from the installed mteb, :func:`vdr.ingest.vidore.benchmark_tasks`);
            a task's ``dataset`` may be a local folder.
        **kwargs: :func:`vdr.evaluate`'s options (backends, model, rewrites, k, ...); each task's
            main-score cutoff is added to ``k``.

    Returns:
        :class:`BenchmarkResults`.

    Raises:
        InputError: an unknown benchmark, mteb missing, or what :func:`vdr.evaluate` raises for a
            task (the task is named).
    """
    from ..ingest.vidore import benchmark_tasks
    from .evaluation import evaluate

    if "vidore" in kwargs or "vidore_revision" in kwargs:
        raise InputError("evaluate_benchmark runs its tasks' datasets: give no vidore or vidore_revision")
    tasks = benchmark_tasks(name) if tasks is None else list(tasks)
    if not tasks:
        raise InputError(f"benchmark {name!r} has no public task in the installed mteb")
    out = Path(out)
    bench = BenchmarkResults(name)
    for task in tasks:
        metric = _metric_of(task.main_score)
        ks = sorted({*_cutoffs(kwargs.get("k")), int(metric.rsplit("@", 1)[1])}) if "@" in metric else kwargs.get("k")
        try:
            res = evaluate(None, out=out / _folder(task.name), vidore=task.dataset, vidore_revision=task.revision,
                           **{**kwargs, **({"k": tuple(ks)} if ks else {})})
        except InputError as e:
            raise InputError(f"{name} task {task.name} ({task.dataset}): {e}") from None
        bench.results[task.name] = res
        bench.rows += _task_rows(task, metric, res)
    with atomic_write(out / BENCHMARK_FILE) as f:
        json.dump(bench.to_dict(), f, indent=1, ensure_ascii=False, allow_nan=False)
        f.write("\n")
    return bench


def _cutoffs(k) -> list[int]:
    from ..metrics.registry import EVALUATE_CUTOFFS, parse_cutoffs

    return list(parse_cutoffs(k)) if k is not None else list(EVALUATE_CUTOFFS)


def _folder(task_name: str) -> str:
    """A task's results folder name (task names are ``[A-Za-z0-9.]``; anything else is replaced)."""
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in task_name)


def _task_rows(task, metric: str, res) -> list[dict]:
    """A task's main score per backend x variant (mean over languages when multilingual)."""
    from ..results import MEAN_OVER_LANGUAGES

    rows = []
    if res.languages:
        at = {(r["backend"], r["variant"]): r["mean"] for r in res.language_rows(metric) if r["language"] == MEAN_OVER_LANGUAGES}
    else:
        at = {(r.backend, r.variant): r.metrics.aggregate.get(metric) for r in res.runs}
    for (b, v), score in at.items():
        rows.append({"task": task.name, "dataset": task.dataset, "revision": task.revision, "metric": metric, "backend": b,
                     "variant": v, "score": None if score is None or math.isnan(score) else float(score),
                     "languages": res.languages})
    return rows
