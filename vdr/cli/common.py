"""What every ``vdr`` command shares: ``-q/--quiet``, ``--log-level``, ``--version``, the choice
types, and how options are shown in ``--help``.

:func:`install` gives every command registered on the typer app ``-q/--quiet`` and ``--log-level``
(a command that declares ``quiet`` itself keeps its own, which should be :data:`OPTIONS` ``["quiet"]``),
runs it inside :func:`output` (logging and the third-party progress bars set accordingly) and hands
it choice values as plain ``str`` (the :class:`~enum.Enum` members typer parses them into).

In ``--help`` a choice is shown as ``[pdfium|poppler]`` and a flag shows no value type (typer >= 0.2x
prints ``<bool>`` after every flag, ``--help`` included, unless told otherwise).
"""

from __future__ import annotations

import functools
import inspect
import logging
import os
import sys
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import Enum
from typing import Any, Union, get_args, get_origin

import typer
import typer.core

__all__ = ["install", "output", "print_version", "OPTIONS", "LogLevel", "Group", "Command"]


def _choice(name: str, *values: str) -> type[Enum]:
    """A ``str`` Enum whose values are ``values``: typer accepts only these and lists them in ``--help``."""
    return Enum(name, {v: v for v in values}, type=str)


Rasterizer = _choice("Rasterizer", "pdfium", "poppler")
OcrMode = _choice("OcrMode", "auto", "always", "never")
Engine = _choice("Engine", "vdr", "mteb")
Bm25Preset = _choice("Bm25Preset", "topiocqa", "qrecc", "msmarco")
Bm25Analyzer = _choice("Bm25Analyzer", "default", "lucene")
HistoryOrder = _choice("HistoryOrder", "oldest-first", "newest-first")
Protocol = _choice("Protocol", "convsearch")
PassageFormat = _choice("PassageFormat", "auto", "beir", "tsv", "msmarco", "jsonl", "hf")
StoreDtype = _choice("StoreDtype", "float16", "float32")
ComputeDtype = _choice("ComputeDtype", "bfloat16", "float16", "float32")
AttnImplementation = _choice("AttnImplementation", "flash_attention_2", "sdpa", "eager")
Bm25Method = _choice("Bm25Method", "lucene", "robertson", "atire", "bm25l", "bm25+")
Modality = _choice("Modality", "image", "text")
ServeBackend = _choice("ServeBackend", "lexical", "semantic", "hybrid", "multimodal")
FillFailed = _choice("FillFailed", "original")
LogLevel = _choice("LogLevel", "debug", "info", "warning", "error")

#: The options every command gets.
OPTIONS: dict[str, Callable[[], Any]] = {
    "quiet": lambda: typer.Option(
        False, "--quiet/--no-quiet", "-q",
        help="No progress bars or stage lines (also silences transformers', sentence-transformers', MTEB's and the"
             " hub's bars and bm25s' log lines); warnings, errors and results are still printed.",
    ),
    "log_level": lambda: typer.Option(
        LogLevel.warning, "--log-level", case_sensitive=False,
        help="Lowest level of library log messages printed on stderr (bm25s, MTEB, transformers, ...); -q means error.",
    ),
}

#: Loggers of the libraries vdr drives; their level follows --log-level (bm25s forces its own logger
#: to DEBUG when imported, so its records are also filtered by level on the way out).
LIBRARY_LOGGERS = ("bm25s", "mteb", "sentence_transformers", "transformers", "datasets", "huggingface_hub", "filelock", "urllib3", "httpx")
#: Environment read by the libraries when they are imported (the command imports them after this is set).
QUIET_ENV = {"TQDM_DISABLE": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1", "HF_DATASETS_DISABLE_PROGRESS_BARS": "1"}


def print_version(value: bool) -> None:
    """``--version``: print ``vdr VERSION`` and exit 0."""
    if value:
        from .. import __version__

        typer.echo(f"vdr {__version__}")
        raise typer.Exit(0)


# ------------------------------------------------------------------------------------------ output


class _StderrHandler(logging.StreamHandler):
    """A handler on whatever ``sys.stderr`` is when a record is emitted (tests swap it)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self):  # type: ignore[override]
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:  # the base class assigns it; always use the current stderr
        pass


class _AtLeast(logging.Filter):
    """Drop records below ``level`` (a logger filter: it holds even after the library resets the level)."""

    def __init__(self, level: int) -> None:
        super().__init__()
        self.level = level

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= self.level


@contextmanager
def output(*, quiet: bool, log_level: str = "warning") -> Iterator[None]:
    """Run the block with vdr's output settings, restored afterwards.

    Library log records at ``log_level`` and above (``error`` with ``quiet``) go to stderr as
    ``LEVEL logger: message``; the loggers of :data:`LIBRARY_LOGGERS` are set to that level.
    ``TRANSFORMERS_VERBOSITY`` follows it; with ``quiet`` the variables of :data:`QUIET_ENV`
    (tqdm's, the hub's and datasets' bars) are set too, and transformers' and the hub's progress bars
    are turned off when those libraries are already imported.

    Raises:
        ValueError: an unknown ``log_level``.
    """
    name = "error" if quiet else str(log_level).lower()
    level = logging.getLevelName(name.upper())
    if not isinstance(level, int):
        raise ValueError(f"unknown log level {log_level!r}")
    env = dict(QUIET_ENV if quiet else {}, TRANSFORMERS_VERBOSITY=name)
    saved_env = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    root = logging.getLogger()
    handler, old_root = _StderrHandler(), root.level
    handler.setLevel(level)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    root.addHandler(handler)
    root.setLevel(level)
    loggers = {n: logging.getLogger(n) for n in LIBRARY_LOGGERS}
    saved_levels = {n: lg.level for n, lg in loggers.items()}
    flt = _AtLeast(level)
    for lg in loggers.values():
        lg.setLevel(level)
        lg.addFilter(flt)
    restore = _quiet_loaded_libraries(level, quiet)
    try:
        yield
    finally:
        restore()
        for n, lg in loggers.items():
            lg.removeFilter(flt)
            lg.setLevel(saved_levels[n])
        root.removeHandler(handler)
        root.setLevel(old_root)
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _quiet_loaded_libraries(level: int, quiet: bool) -> Callable[[], None]:
    """Apply ``level`` / ``quiet`` to transformers and huggingface_hub if already imported (they read
    the environment only at import); returns the function that restores what was changed."""
    undo: list[Callable[[], None]] = []
    if "transformers" in sys.modules:
        from transformers.utils import logging as hf_logging

        verbosity, bar = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
        hf_logging.set_verbosity(level)
        if quiet:
            hf_logging.disable_progress_bar()
        undo.append(lambda: (hf_logging.set_verbosity(verbosity), hf_logging.enable_progress_bar() if bar else None))
    if quiet and "huggingface_hub" in sys.modules:
        from huggingface_hub import utils as hub_utils

        if not hub_utils.are_progress_bars_disabled():
            hub_utils.disable_progress_bars()
            undo.append(hub_utils.enable_progress_bars)
    return lambda: [f() for f in reversed(undo)] and None


# ------------------------------------------------------------------------------------------ help


def _plain(annotation: Any) -> Any:
    """``Optional[X]`` -> ``X``."""
    if get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def tidy_help(param: inspect.Parameter) -> None:
    """Show a choice option's values as ``[a|b]`` and no value type after a flag (sets ``metavar``
    where the command did not)."""
    info = param.default
    if not isinstance(info, typer.models.OptionInfo) or info.metavar is not None:
        return
    ann = _plain(param.annotation)
    if ann is bool:
        info.metavar = ""
    elif isinstance(ann, type) and issubclass(ann, Enum):
        info.metavar = "[" + "|".join(str(m.value) for m in ann) + "]"


class _HelpFlag:
    """Mixin: the ``--help`` flag shows no value type (``<bool>`` in typer >= 0.2x)."""

    def get_help_option(self, ctx):  # noqa: D102 - click's
        opt = super().get_help_option(ctx)  # type: ignore[misc]
        if opt is not None and getattr(opt, "metavar", None) is None:
            opt.metavar = ""
        return opt


class Command(_HelpFlag, typer.core.TyperCommand):
    """A typer command whose ``--help`` flag shows no ``<bool>``."""


class Group(_HelpFlag, typer.core.TyperGroup):
    """The root group, whose ``--help`` flag shows no ``<bool>`` either."""


# ------------------------------------------------------------------------------------------ install


def _with_common_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """``func`` with ``quiet`` and ``log_level`` parameters added (where it has none), run inside
    :func:`output`, choice values passed as ``str``."""
    if getattr(func, "_vdr_common", False):
        return func
    sig = inspect.signature(func, eval_str=True)
    params = list(sig.parameters.values())
    own = {p.name for p in params}
    extra = [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=OPTIONS[n](), annotation=t)
             for n, t in (("quiet", bool), ("log_level", LogLevel)) if n not in own]
    for p in params + extra:
        tidy_help(p)

    @functools.wraps(func)
    def command(**kwargs: Any) -> Any:
        quiet = kwargs["quiet"] if "quiet" in own else kwargs.pop("quiet", False)
        level = kwargs["log_level"] if "log_level" in own else kwargs.pop("log_level", LogLevel.warning)
        kwargs = {k: v.value if isinstance(v, Enum) else v for k, v in kwargs.items()}
        with output(quiet=bool(quiet), log_level=getattr(level, "value", level)):
            return func(**kwargs)

    command.__signature__ = sig.replace(parameters=params + extra)  # type: ignore[attr-defined]
    command.__annotations__ = {p.name: p.annotation for p in params + extra}
    command._vdr_common = True  # type: ignore[attr-defined]
    return command


def install(app: typer.Typer) -> None:
    """Give every command registered on ``app`` the common options and help display (idempotent;
    :func:`vdr.cli.main` calls it again, so commands registered later get them too)."""
    for info in app.registered_commands:
        if info.callback is not None:
            info.callback = _with_common_options(info.callback)
        if info.cls in (None, typer.core.TyperCommand):
            info.cls = Command
    for group in app.registered_groups:  # sub-apps such as `vdr convert`
        if isinstance(group.cls, typer.models.DefaultPlaceholder) or group.cls in (None, typer.core.TyperGroup):
            group.cls = Group
        if group.typer_instance is not None:
            install(group.typer_instance)
    root = app.registered_callback
    if root is not None and root.callback is not None:
        for p in inspect.signature(root.callback, eval_str=True).parameters.values():
            tidy_help(p)

