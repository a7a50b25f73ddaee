"""Progress on stderr: a live bar for a long loop and one line per finished stage (rich).

Library code reports progress only when asked (``progress=True`` on the public functions, the
``progress`` flag of :class:`~vdr.retrieve.base.BuildContext`); ``vdr ... -q`` turns it off. The
live bar is drawn only on an interactive terminal and disappears when the loop ends; the stage
line that follows stays, so a log file (stderr not a terminal) holds exactly one line per stage::

    index semantic: 43 pages in 12.41 s (3.5 pages/s)

Importing this module does not import rich (only the functions do).
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO

__all__ = ["progress_bar", "stage_line", "format_stage", "console_width", "fit_line", "counted", "MIN_RATE_SECONDS"]

#: Stages shorter than this get no rate (it would only measure the timer).
MIN_RATE_SECONDS = 0.01


def console_width(stream: TextIO | None = None) -> int | None:
    """The width printed text should fit: ``COLUMNS`` when set to a positive integer, else the
    terminal's width when ``stream`` (default: the current ``sys.stdout``) is a terminal, else
    ``None`` (a pipe or a log file: no limit, whole lines).
    """
    env = os.environ.get("COLUMNS", "").strip()
    if env.isdigit() and int(env) > 0:
        return int(env)
    stream = sys.stdout if stream is None else stream
    try:
        if stream.isatty():
            return shutil.get_terminal_size().columns
    except (AttributeError, ValueError, OSError):  # a closed or replaced stream
        pass
    return None


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


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and ``noun`` in agreement: ``"1 turn"``, ``"2 turns"``, ``"0 queries"`` (a noun in ``y``
    takes ``ies``; ``plural`` for any other irregular one).

    >>> counted(1, "turn"), counted(2, "turn"), counted(0, "query"), counted(1, "query"), counted(3, "PDF")
    ('1 turn', '2 turns', '0 queries', '1 query', '3 PDFs')
    """
    return f"{n} {noun if n == 1 else plural or _plural(noun, n)}"


def _plural(unit: str, n: int) -> str:
    if n == 1:
        return unit
    return unit[:-1] + "ies" if unit.endswith("y") else unit + "s"


def stage_line(name: str, seconds: float, count: int | None = None, unit: str | None = None, note: str = "", *,
               enabled: bool = True) -> None:
    """Print :func:`format_stage` on stderr (nothing when ``enabled`` is False)."""
    if enabled:
        _console().print(fit_line(format_stage(name, seconds, count, unit, note), console_width(sys.stderr)), markup=False,
                         soft_wrap=True)


def fit_line(text: str, width: int | None) -> str:
    """``text`` wrapped at ``width`` (continuation lines indented by two spaces; words and paths
    never broken), unchanged when ``width`` is ``None``.

    >>> print(fit_line("load: 43 pages in 0.23 s; variants original, keywords", 30))
    load: 43 pages in 0.23 s;
      variants original, keywords
    """
    if width is None:
        return text
    import textwrap

    return "\n".join(textwrap.fill(line, width, subsequent_indent="  ", break_long_words=False, break_on_hyphens=False)
                     for line in text.splitlines() or [""])
