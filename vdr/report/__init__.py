"""Reports of a results folder written by :func:`vdr.evaluate`.

::

    import vdr
    paths = vdr.report("out/demo/results")        # report.html + report.md (vdr.report.render.report)
    res = vdr.Results.load("out/demo/results")    # for notebooks: res.table(), res.to_pandas(), ...

The verb ``vdr.report`` is the function :func:`vdr.report.render.report`; this package holds its
modules (:mod:`~vdr.report.render`, :mod:`~vdr.report.plots`). Importing the package imports
nothing (``from vdr.report import report`` loads :mod:`~vdr.report.render` on first use), and
matplotlib is imported only when a report is drawn.
"""

from __future__ import annotations

__all__ = ["report", "ReportPaths", "ReportOptions"]


def __getattr__(name: str):
    """``report`` and ``ReportPaths`` from :mod:`vdr.report.render`, imported on first use."""
    if name in __all__:
        from . import render

        return getattr(render, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
