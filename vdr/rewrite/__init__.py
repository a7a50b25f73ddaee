"""Query rewriting with an LLM: ``vdr rewrite`` produces a rewrite variant of a query set.

* :mod:`vdr.rewrite.templates`: versioned prompt templates (shipped: ``conversational``,
  ``convsearch-r1``, ``rl-qr``; user TOML files).
* :mod:`vdr.rewrite.generate`: an OpenAI-compatible endpoint through the judge's client, or a local
  transformers causal LM.
* :mod:`vdr.rewrite.runner`: :func:`rewrite`, with the JSONL cache and the failures file.

Nothing heavy is imported here (transformers loads only with ``--local``).
"""

from .runner import RewriteReport, rewrite
from .templates import Template, builtin_templates, load_template

__all__ = ["rewrite", "RewriteReport", "Template", "load_template", "builtin_templates"]
