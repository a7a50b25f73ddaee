"""Reports and exploration of a results folder written by :func:`vdr.evaluate`.

::

    import vdr
    paths = vdr.report("out/demo/results")            # report.html + report.md
    res = vdr.report.load_results("out/demo/results")  # for notebooks
    res.rows()                                         # the summary table as dicts
    res.ranked("lexical", "keywords", "q17", k=3)      # [(corpus id, score), ...]

This module is callable: ``vdr.report(...)`` is :func:`report`, and ``vdr.report.load_results``,
``vdr.report.Results`` ... are its helpers (the package and the verb share the name ``report``).
matplotlib is imported only when a report is drawn.
"""

from __future__ import annotations

import sys
import types

from .data import Results, load_results
from .render import Case, ReportPaths, bar_metrics, largest_changes, report, table_html, table_markdown

__all__ = ["report", "ReportPaths", "load_results", "Results", "Case", "largest_changes", "table_markdown", "table_html",
           "bar_metrics"]


class _CallableModule(types.ModuleType):
    """``vdr.report`` both as a package and as the verb: calling the module calls :func:`report`."""

    def __call__(self, results_dir, out=None, **kwargs) -> ReportPaths:
        """Same as :func:`report`."""
        return report(results_dir, out, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
