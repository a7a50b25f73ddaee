"""Progress on stderr: a live bar for a long loop and one line per finished stage (rich).

Library code reports progress only when asked (``progress=True`` on the public functions, the
``progress`` flag of :class:`~vdr.retrieve.base.BuildContext`); ``vdr ... -q`` turns it off. The
live bar is drawn only on an interactive terminal and disappears when the loop ends; the stage
line that follows stays. In a log file (stderr not a terminal) a long loop writes a line at least
every :data:`LOG_EVERY_S` seconds, with done/total and the rate, then the stage line::

    encode pages (semantic): 2048/43000 pages (5%), 68.3 pages/s, 30 s
    index semantic: 43000 pages in 612.41 s (70.2 pages/s)

Importing this module does not import rich (only the functions do).
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import TextIO, TypeVar

T = TypeVar("T")

__all__ = ["progress_bar", "log_bar", "LogBar", "LOG_EVERY_S", "stage_line", "format_stage", "console_width", "fit_line", "counted", "MIN_RATE_SECONDS"]

#: Stages shorter than this get no rate (it would only measure the timer).
MIN_RATE_SECONDS = 0.01
#: Seconds between two progress lines of a long loop in a log (stderr not a terminal).
LOG_EVERY_S = 30.0


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
        ``advance(n)``: add ``n`` finished items (a float adds a part of an item). On a terminal
        the bar moves; in a log, a :class:`LogBar` line every :data:`LOG_EVERY_S` seconds.
    """
    if not enabled:
        yield lambda n=1: None
        return
    console = _console()
    if not console.is_terminal:
        log = LogBar(description, total, unit)
        yield log.update
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


class LogBar:
    """A progress counter for a log (stderr not a terminal): :meth:`update` writes
    ``"DESCRIPTION: DONE/TOTAL UNITs (P%), RATE UNITs/s, S s"`` on stderr when :data:`LOG_EVERY_S`
    seconds have passed since the start or the last line; nothing at the end (the stage line
    follows). Has the part of tqdm's interface vdr uses (``total``, ``update``, ``refresh``,
    ``close``), so it stands in for a tqdm bar (:func:`log_bar`).

    >>> import io, sys; err, sys.stderr = sys.stderr, io.StringIO()
    >>> bar = LogBar("ingest", 10, "page", every=0.0); bar.update(4); bar.update(1)
    >>> lines = sys.stderr.getvalue().splitlines(); sys.stderr = err
    >>> [ln.split(",")[0] for ln in lines]
    ['ingest: 4/10 pages (40%)', 'ingest: 5/10 pages (50%)']
    """

    def __init__(self, description: str, total: float = 0, unit: str = "item", *, every: float | None = None,
                 disable: bool = False) -> None:
        import time

        self.description, self.total, self.unit, self.disable = description, total, unit, disable
        self.every = LOG_EVERY_S if every is None else every
        self.n = 0.0
        self._clock = time.monotonic
        self._start = self._last = self._clock()

    def update(self, n: float = 1) -> None:
        """Count ``n`` more finished items; write a line when one is due."""
        self.n += n
        now = self._clock()
        if self.disable or now - self._last < self.every:
            return
        self._last = now
        took = now - self._start
        done = int(self.n)
        of = f"/{int(self.total)}" if self.total else ""
        pct = f" ({100 * self.n / self.total:.0f}%)" if self.total else ""
        rate = f", {self.n / took:.1f} {_plural(self.unit, 2)}/s" if took > 0 and took >= MIN_RATE_SECONDS else ""
        units = _plural(self.unit, int(self.total) if self.total else done)  # "1/4 pages", "1 page"
        print(f"{self.description}: {done}{of} {units}{pct}{rate}, {took:.0f} s", file=sys.stderr, flush=True)

    def wrap(self, iterable: Iterable[T]) -> Iterator[T]:
        """``iterable``'s items, counting each one when the caller has taken it (tqdm's iteration)."""
        for item in iterable:
            yield item
            self.update(1)

    def refresh(self) -> None:
        """tqdm's ``refresh``: nothing to redraw in a log."""

    def close(self) -> None:
        """tqdm's ``close``: nothing to close in a log."""


def log_bar(iterable: Iterable | None = None, *, total: float | None = None, unit: str = "item", desc: str = "",
            disable: bool = False, **tqdm_kwargs):
    """A tqdm bar on a terminal, a :class:`LogBar` otherwise (a log gets a line every
    :data:`LOG_EVERY_S` seconds, not tqdm's carriage-return redraws); ``disable``: neither writes.
    With ``iterable``, what to loop over (its items, counted as taken; ``total`` defaults to its
    ``len``), as ``tqdm(iterable)``. ``tqdm_kwargs`` go to tqdm (``dynamic_ncols``, ``smoothing``)."""
    if not disable and not _is_terminal(sys.stderr):
        if total is None:
            total = len(iterable) if hasattr(iterable, "__len__") else 0
        bar = LogBar(desc, total, unit)
        return bar if iterable is None else bar.wrap(iterable)
    from tqdm.auto import tqdm

    return tqdm(iterable, total=total, unit=unit, desc=desc, disable=disable, **tqdm_kwargs)


def _is_terminal(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


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
