"""Judge-calibrated evaluation: RCP-nDCG beside qrels-based nDCG (``vdr judge``).

Pages that no qrels line judges count as irrelevant in nDCG, so a rewrite that retrieves new,
useful pages is penalised (``hole@k`` shows how often). RCP-nDCG (Rubric-Calibrated Preferences;
arXiv 2609.35739, reference code and documentation cohere-ai/rcp-ndcg) replaces the missing labels
with calibrated judgments of an LLM/VLM judge:

1. **Pool** per query: the union of the top ``k`` pages of every backend x variant run of
   ``results.json`` plus every qrels-judged page of the query (:func:`~vdr.judge.rcp.build_pools`).
2. **Stage A** (:mod:`vdr.judge.schedule`, :mod:`vdr.judge.bradley_terry`): the judge scores windows
   of pages on -5..+5; each window is also sent reversed; a Bradley-Terry fit of the soft pairwise
   preferences (weight ``2/w``, ridge 1e-4) orders each pool.
3. **Stage B**: five yes/no criteria per page, asked in windows (:mod:`vdr.judge.prompts`).
4. **Calibration** (:mod:`vdr.judge.irt`): one 2PL model over all rubric answers maps every query's
   Stage A scores onto one scale; gain ``g(theta)`` in (0, 1).
5. **RCP-nDCG@k** (:func:`~vdr.judge.rcp.rcp_ndcg`) per backend x variant, with the paired comparison
   original vs rewritten (:mod:`vdr.compare`).

:func:`judge` (:mod:`vdr.judge.run`; also ``vdr.judge(...)``) reads the results with
:meth:`vdr.results.Results.load` and writes ``RESULTS_DIR/judge/rcp.json``, ``RESULTS_DIR/judge/gains.tsv`` (query-id,
corpus-id, theta, gain, judged-grade) and keeps the answer cache in ``RESULTS_DIR/judge/cache.jsonl``.
"""

from __future__ import annotations

import importlib

#: public name -> the module of this package that defines it (imported on first use, so that
#: importing the package, which ``import vdr`` does, costs nothing).
_EXPORTS = {
    "judge": "run", "JudgeResult": "run", "rcp_table": "run", "ENDPOINT_ENV": "run",
    "JudgeClient": "client", "JudgeCache": "client", "CorpusPages": "client", "TextPages": "client", "Window": "client",
    "JudgeError": "client", "JudgeConfigError": "client", "JudgeOutputError": "client", "JudgeCallError": "client",
    "BudgetExhausted": "client",
    "Schedule": "schedule",
    "Priors": "irt", "Calibration": "irt", "ItemParams": "irt", "calibrate": "irt", "fit_2pl": "irt", "gain": "irt",
    "build_pools": "rcp", "judge_pools": "rcp", "rcp_ndcg": "rcp",
    "PROMPT_VERSION": "prompts",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str):
    """The names of :data:`__all__`, from their module (e.g. ``vdr.judge.judge`` is :func:`vdr.judge.run.judge`)."""
    if name in _EXPORTS:
        return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
