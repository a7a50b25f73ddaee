"""Query rewriting with an LLM: ``vdr rewrite`` produces a rewrite variant of a query set.

* :mod:`vdr.rewrite.templates`: versioned prompt templates (shipped: ``conversational``,
  ``convsearch-r1``, ``rl-qr``; user TOML files).
* :mod:`vdr.rewrite.generate`: an OpenAI-compatible endpoint through the one client of
  :mod:`vdr.llm` (the judge's too), or a local transformers causal LM.
* :mod:`vdr.rewrite.runner`: :func:`rewrite`, with the JSONL cache and the failures file.
* :mod:`vdr.rewrite.samples`: :func:`rewrite_samples` (``--samples N``): N rewrites per query in one file.

Nothing heavy is imported here (transformers loads only with ``--local``).
"""

from .runner import RewriteOptions, RewriteReport, rewrite
from .samples import SamplesReport, rewrite_samples
from .templates import Template, builtin_templates, load_template

__all__ = ["rewrite", "rewrite_samples", "SamplesReport", "RewriteOptions", "RewriteReport", "Template", "load_template", "builtin_templates"]
