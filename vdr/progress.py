"""Progress on stderr: a live bar for a long loop and one line per finished stage (rich).

Library code reports progress only when asked (``progress=True`` on the public functions, the
``progress`` flag of :class:`~vdr.retrieve.base.BuildContext`); ``vdr ... -q`` turns it off. The
live bar is drawn only on an interactive terminal and disappears when the loop ends; the stage
line that follows stays, so a log file (stderr not a terminal) holds exactly one line per stage::

    index semantic: 43 pages in 12.41 s (3.5 pages/s)

Importing this module does not import rich (only the functions do).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["progress_bar", "stage_line", "format_stage", "MIN_RATE_SECONDS"]

#: Stages shorter than this get no rate (it would only measure the timer).
MIN_RATE_SECONDS = 0.01


def _console():
    """A rich console on the *current* ``sys.stderr`` (created per call, so redirection is honoured)."""
    from rich.console import Console

    return Console(stderr=True, highlight=False)


@contextmanager
def progress_bar(description: str, total: int, unit: str, *, enabled: bool = True) -> Iterator[Callable[[int], None]]:
    """A live bar ``description [bar] done/total unit  rate  elapsed`` while the block runs.

    Args:
        description: what is counted, e.g. ``"encode pages (semantic)"``.
        total: number of items (>= 0).
        unit: the item's name, singular (``"page"``, ``"query"``).
        enabled: ``False`` (or stderr not a terminal): no output at all.

    Yields:
        ``advance(n)``: add ``n`` finished items (a no-op when nothing is drawn).
    """
    if not enabled:
        yield lambda n=1: None
        return
    console = _console()
    if not console.is_terminal:
        yield lambda n=1: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn(_plural(unit, 2)),
               TaskProgressColumn(), TextColumn("{task.fields[rate]}"), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task(description, total=total, rate="")

        def advance(n: int = 1) -> None:
            bar.advance(task, n)
            speed = bar.tasks[task].speed
            if speed:
                bar.update(task, rate=f"{speed:.1f} {unit}s/s")

        yield advance


def format_stage(name: str, seconds: float, count: int | None = None, unit: str | None = None, note: str = "") -> str:
    """``"NAME: COUNT UNITs in S s (RATE UNITs/s)NOTE"`` (count only when ``count`` is given, rate
    only then and when the stage took at least :data:`MIN_RATE_SECONDS`).

    >>> format_stage("search lexical/kw", 0.5, 42, "query")
    'search lexical/kw: 42 queries in 0.50 s (84.0 queries/s)'
    >>> format_stage("statistics", 0.25)
    'statistics: 0.25 s'
    """
    if count is None:
        return f"{name}: {seconds:.2f} s{note}"
    units = _plural(unit or "item", count)
    rate = f" ({count / seconds:.1f} {_plural(unit or 'item', 2)}/s)" if seconds >= MIN_RATE_SECONDS and count else ""
    return f"{name}: {count} {units} in {seconds:.2f} s{rate}{note}"


def _plural(unit: str, n: int) -> str:
    if n == 1:
        return unit
    return unit[:-1] + "ies" if unit.endswith("y") else unit + "s"


def stage_line(name: str, seconds: float, count: int | None = None, unit: str | None = None, note: str = "", *,
               enabled: bool = True) -> None:
    """Print :func:`format_stage` on stderr (nothing when ``enabled`` is False)."""
    if enabled:
        _console().print(format_stage(name, seconds, count, unit, note), markup=False, soft_wrap=True)
