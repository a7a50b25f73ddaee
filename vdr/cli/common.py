"""What every ``vdr`` command shares: ``-q/--quiet``, ``-v/--verbose``, ``--log-level``, ``--version``,
the choice types, how options are shown in ``--help``, and how tables are printed (:func:`table_text`:
fitted to the terminal unless ``--wide``).

:func:`install` gives every command registered on the typer app ``-q/--quiet``, ``-v/--verbose`` and ``--log-level``
(a command that declares ``quiet`` itself keeps its own, which should be :data:`OPTIONS` ``["quiet"]``),
runs it inside :func:`output` (logging and the third-party progress bars set accordingly) and hands
it choice values as plain ``str`` (the :class:`~enum.Enum` members typer parses them into).

In ``--help`` a choice is shown as ``[pdfium|poppler]`` and a flag shows no value type (typer >= 0.2x
prints ``<bool>`` after every flag, ``--help`` included, unless told otherwise). :class:`Command` and
:class:`Group` draw ``--help`` with :func:`render_help`: one panel per ``rich_help_panel`` (the
``PANEL_*`` names, in :data:`PANEL_ORDER`; the common options last, under "Options"), and nothing
truncated at any width (typer's table cuts long option names and defaults with an ellipsis).
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

__all__ = ["install", "output", "print_version", "render_help", "OPTIONS", "PANEL_ORDER", "LogLevel", "Group", "Command"]


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
    "verbose": lambda: typer.Option(
        False, "--verbose/--no-verbose", "-v",
        help="Also show the libraries' own progress bars (transformers' 'Loading weights', the hub's downloads, datasets');"
             " by default only vdr's progress is shown.",
    ),
}

#: Loggers of the libraries vdr drives; their level follows --log-level (bm25s forces its own logger
#: to DEBUG when imported, so its records are also filtered by level on the way out).
LIBRARY_LOGGERS = ("bm25s", "mteb", "sentence_transformers", "transformers", "datasets", "huggingface_hub", "filelock", "urllib3", "httpx")
#: Environment read by the libraries when they are imported (the command imports them after this is set).
QUIET_ENV = {"TQDM_DISABLE": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1", "HF_DATASETS_DISABLE_PROGRESS_BARS": "1"}
#: Without -v: the libraries' own bars off (transformers' follow the hub's), vdr's own bars (tqdm, rich) kept.
LIBRARY_BARS_ENV = {"HF_HUB_DISABLE_PROGRESS_BARS": "1", "HF_DATASETS_DISABLE_PROGRESS_BARS": "1"}


def wide_option() -> Any:
    """``--wide``: print each table whole, however wide (default: fit the terminal, :func:`table_text`)."""
    return typer.Option(False, "--wide/--fit", rich_help_panel=PANEL_RUN,
                        help="Print each table whole, one line per row, however wide (default: fit COLUMNS, the terminal's width,"
                             " splitting wide tables in two and wrapping the notes).")


def table_text(table: Any, *, wide: bool = False, verdicts: bool = True) -> str:
    """``table`` (a :class:`vdr.results.Table`) as the commands print it: fitted to the terminal's
    width (:func:`vdr.progress.console_width`; none in a pipe without ``COLUMNS``) unless ``wide``,
    saying that ``--wide`` prints one table when it was split."""
    from ..progress import console_width

    return table.to_text(verdicts=verdicts, width=None if wide else console_width(), more="--wide prints one table")


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
def output(*, quiet: bool, log_level: str = "warning", verbose: bool = False) -> Iterator[None]:
    """Run the block with vdr's output settings, restored afterwards.

    Library log records at ``log_level`` and above (``error`` with ``quiet``) go to stderr as
    ``LEVEL logger: message``; the loggers of :data:`LIBRARY_LOGGERS` are set to that level.
    ``TRANSFORMERS_VERBOSITY`` follows it; with ``quiet`` the variables of :data:`QUIET_ENV`
    (tqdm's, the hub's and datasets' bars) are set too; without ``quiet`` or ``verbose`` those of
    :data:`LIBRARY_BARS_ENV` (the libraries' bars only). Transformers', the hub's and datasets'
    progress bars are turned off likewise when those libraries are already imported.

    Raises:
        ValueError: an unknown ``log_level``.
    """
    name = "error" if quiet else str(log_level).lower()
    level = logging.getLevelName(name.upper())
    if not isinstance(level, int):
        raise ValueError(f"unknown log level {log_level!r}")
    bars_off = quiet or not verbose
    env = dict(QUIET_ENV if quiet else LIBRARY_BARS_ENV if bars_off else {}, TRANSFORMERS_VERBOSITY=name)
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
    restore = _quiet_loaded_libraries(level, bars_off)
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
    """Apply ``level`` / ``quiet`` (their progress bars off) to transformers, huggingface_hub and
    datasets if already imported (they read the environment only at import); returns the function
    that restores what was changed."""
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
    if quiet and "datasets" in sys.modules:
        import datasets

        if datasets.is_progress_bar_enabled():
            datasets.disable_progress_bars()
            undo.append(datasets.enable_progress_bars)
    return lambda: [f() for f in reversed(undo)] and None


# ------------------------------------------------------------------------------------------ help


# Panels of ``--help``, in the order they are shown: a parameter's ``rich_help_panel`` names one of
# them; panels not listed here come after the listed ones, and the common options (no panel) last.
PANEL_ARGUMENTS = "Arguments"
PANEL_INPUTS = "Inputs"
PANEL_BACKENDS = "Backends"
PANEL_ENCODER = "Multimodal encoder"
PANEL_TEXT = "Text backends (lexical, semantic, hybrid)"
PANEL_RENDERING = "PDF rendering"
PANEL_LLM = "Language model"
PANEL_REQUESTS = "Requests"
PANEL_SERVER = "Server"
PANEL_REWARD = "Reward"
PANEL_STATS = "Metrics and statistics"
PANEL_RUN = "Run settings"
PANEL_OPTIONS = "Options"
PANEL_COMMANDS = "Commands"
PANEL_ORDER = (
    PANEL_ARGUMENTS, PANEL_INPUTS, PANEL_BACKENDS, PANEL_ENCODER, PANEL_TEXT, PANEL_RENDERING, PANEL_LLM, PANEL_REQUESTS,
    PANEL_SERVER, PANEL_REWARD, PANEL_STATS, PANEL_RUN,
)
#: Narrowest help column beside the option names; when narrower, help texts go below the names.
HELP_BESIDE_MIN = 50
#: Longest option name column beside which the help is placed (longer names get a line of their own).
NAME_COLUMN_MAX = 40
#: Narrowest name column worth placing help beside.
NAME_COLUMN_MIN = 12
#: Indentation of the help text below an option name.
HELP_INDENT = 4

_STYLE_OPTION, _STYLE_NEGATIVE, _STYLE_METAVAR = "bold cyan", "bold magenta", "bold yellow"
_STYLE_EXTRA, _STYLE_REQUIRED, _STYLE_BORDER, _STYLE_USAGE = "dim", "dim red", "dim", "bold"


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


def _is_argument(param: Any) -> bool:
    return getattr(param, "param_type_name", "") == "argument"


def param_names(param: Any) -> str:
    """An option's names as shown in ``--help``: short names first, then long ones, then after
    `` / `` the negative side of a flag pair (``-q, --quiet / --no-quiet``); an argument's name
    (its metavar, else its parameter name; ``...`` when it takes several values)."""
    if _is_argument(param):
        name = param.metavar or param.name or ""
        return name + ("..." if param.metavar is None and param.nargs != 1 else "")
    first = sorted(param.opts, key=lambda o: o.startswith("--"))
    names = ", ".join(first)
    return names + (" / " + ", ".join(param.secondary_opts) if param.secondary_opts else "")


def param_type(param: Any, ctx: Any) -> str:
    """The value shown after the names: the metavar (``[a|b]`` for choices), else typer's type
    (``<path>``, ``<int>``); ``""`` for a flag."""
    if getattr(param, "is_flag", False) or getattr(param, "count", False):
        return ""
    if not _is_argument(param) and param.metavar is not None:
        return str(param.metavar)
    shown = getattr(param, "display_type_rich", None)
    if callable(shown):
        return str(shown(ctx=ctx) or "")
    try:  # a plain click parameter
        return str(param.make_metavar(ctx))
    except TypeError:  # pragma: no cover - click < 8.2: no ctx argument
        return str(param.make_metavar())


def _value_text(param: Any, value: Any) -> str:
    """How typer shows a default value: an Enum's value, a list's items, the active side of a flag pair."""
    if isinstance(value, (list, tuple)):
        parts = [_value_text(param, v) for v in value]
        return ", ".join(parts) if any(parts) else ""
    if isinstance(value, Enum):
        return str(value.value)
    if inspect.isfunction(value):
        return "(dynamic)"
    if getattr(param, "is_bool_flag", False) and not _is_argument(param):
        if param.secondary_opts:
            side = param.opts if value else param.secondary_opts
            return side[0].lstrip("-/+") if side else str(value)
        if not value:
            return ""
    return str(value)


def param_default(param: Any, ctx: Any) -> str | None:
    """The ``[default: ...]`` text of a parameter, or None when none is shown (no default, a flag
    off by default, ``show_default=False``). The value is read as typer does (not called when it is
    a factory)."""
    show = getattr(param, "show_default", None)
    if isinstance(show, str):
        return f"({show})"
    if not (show if show is not None else ctx.show_default):
        return None
    resilient = ctx.resilient_parsing
    ctx.resilient_parsing = True
    try:
        value = param.get_default(ctx, call=False)
    finally:
        ctx.resilient_parsing = resilient
    if value is None:
        return None
    return _value_text(param, value) or None


def _extras(param: Any, ctx: Any) -> list[str]:
    """``[env var: X]``, ``[x>=0]``, ``[default: ...]``, ``[required]`` of a parameter."""
    out = []
    envvar = getattr(param, "envvar", None)
    if envvar and getattr(param, "show_envvar", False):
        out.append("[env var: " + (envvar if isinstance(envvar, str) else ", ".join(envvar)) + "]")
    describe = getattr(param, "_get_number_range_help_str", None)  # typer's range text (x>=0)
    number_range = describe() if callable(describe) else None
    if number_range:
        out.append(f"[{number_range}]")
    default = param_default(param, ctx)
    if default is not None:
        out.append(f"[default: {default}]")
    if param.required:
        out.append("[required]")
    return out


def _paragraphs(text: str) -> str:
    """Help text as typer reads it: indentation removed, text after ``\\f`` dropped, single line
    breaks joined (a paragraph starting with ``\\b`` keeps them), paragraphs on lines of their own."""
    text = inspect.cleandoc(text).partition("\f")[0]
    paras = [p.strip("\b\n") if p.startswith("\b") else p.replace("\n", " ").strip() for p in text.split("\n\n")]
    return "\n".join(p for p in paras if p)


def _rich_text(text: str, markup: bool, style: str = ""):
    """``text`` as a rich Text: read as rich markup when ``markup`` (so ``\\[`` shows ``[``); as
    plain text when it is not valid markup."""
    from rich.errors import MarkupError
    from rich.text import Text

    if markup:
        try:
            return Text.from_markup(text, style=style)
        except MarkupError:
            pass
    return Text(text, style=style)


def _option_rows(params: list[Any], ctx: Any, markup: bool) -> list[tuple[Any, Any, list[Any]]]:
    """(names line, help text, ``[...]`` extras) rich Texts of ``params``."""
    from rich.text import Text

    rows = []
    for param in params:
        head = Text()
        names = param_names(param)
        if _is_argument(param):
            head.append(names, style=_STYLE_OPTION)
        else:
            first, _, negative = names.partition(" / ")
            head.append(first, style=_STYLE_OPTION)
            if negative:
                head.append(" / ")
                head.append(negative, style=_STYLE_NEGATIVE)
        shown = param_type(param, ctx)
        if shown:
            head.append(" ")
            head.append(shown, style=_STYLE_METAVAR)
        body = _rich_text(_paragraphs(getattr(param, "help", None) or ""), markup)
        extras = [Text(e, style=_STYLE_REQUIRED if e == "[required]" else _STYLE_EXTRA) for e in _extras(param, ctx)]
        rows.append((head, body, extras))
    return rows


def _wrap(console: Any, text: Any, width: int) -> list[Any]:
    """``text`` wrapped at spaces to ``width`` cells (a word longer than that is folded, never cut)."""
    if not text.plain:
        return []
    lines = text.wrap(console, max(width, 1), overflow="fold")
    for line in lines:
        line.end = "\n"
    return list(lines)


def _flow(console: Any, body: Any, extras: list[Any], width: int) -> list[Any]:
    """``body`` wrapped to ``width`` cells, then each of ``extras`` (``[default: a b]``) kept whole
    on one line: after the last line when it fits there, else on a line of its own."""
    lines = _wrap(console, body, width)
    for extra in extras:
        if lines and lines[-1].cell_len + 2 + extra.cell_len <= width:
            lines[-1].append("  ")
            lines[-1].append_text(extra)
        elif extra.cell_len <= width:
            lines.append(extra.copy())
        else:
            lines += _wrap(console, extra, width)
    return lines


def _layout(console: Any, rows: list[tuple[Any, Any, list[Any]]], inner: int, name_col: int | None) -> list[Any]:
    """Lines of a panel of ``inner`` cells: each row's names, then its help text and extras indented
    below (``name_col`` None) or beside the names in a column starting at ``name_col + 2`` (below
    them when the names are longer than ``name_col``)."""
    from rich.text import Text

    out: list[Any] = []
    for head, body, extras in rows:
        indent = HELP_INDENT if name_col is None else name_col + 2
        body_lines = _flow(console, body, extras, inner - indent)
        if name_col is not None and head.cell_len <= name_col and body_lines:
            first = head.copy()
            first.append(" " * (indent - head.cell_len))
            out.append(first + body_lines.pop(0))
        else:
            out += _wrap(console, head, inner)
        out += [Text(" " * indent) + line for line in body_lines]
    return out


def _panel(console: Any, title: str, lines: list[Any]) -> None:
    from rich.console import Group as RichGroup
    from rich.panel import Panel
    from rich.text import Text

    console.print(Panel(RichGroup(*lines), title=Text(title), title_align="left", border_style=_STYLE_BORDER,
                        padding=(0, 1), expand=True))


def _panels(params: list[Any]) -> list[tuple[str, list[Any]]]:
    """``params`` (hidden ones left out) by panel, panels in :data:`PANEL_ORDER`, then any other
    panel in order of first use, then :data:`PANEL_OPTIONS` (the options given no panel)."""
    by_panel: dict[str, list[Any]] = {}
    for param in params:
        if getattr(param, "hidden", False):
            continue
        default = PANEL_ARGUMENTS if _is_argument(param) else PANEL_OPTIONS
        by_panel.setdefault(getattr(param, "rich_help_panel", None) or default, []).append(param)
    seen = list(by_panel)

    def rank(name: str) -> tuple[int, int]:
        if name == PANEL_OPTIONS:
            return (2, 0)
        return (0, PANEL_ORDER.index(name)) if name in PANEL_ORDER else (1, seen.index(name))

    return [(name, by_panel[name]) for name in sorted(by_panel, key=rank)]


def _command_rows(group: Any, ctx: Any, markup: bool) -> list[tuple[str, list[tuple[Any, Any, list[Any]]]]]:
    """A group's visible sub-commands by panel: (name, first paragraph of its help) rows."""
    from rich.text import Text

    by_panel: dict[str, list[tuple[Any, Any, list[Any]]]] = {}
    for name in group.list_commands(ctx):
        cmd = group.get_command(ctx, name)
        if cmd is None or cmd.hidden:
            continue
        first = inspect.cleandoc(cmd.short_help or cmd.help or "").partition("\f")[0].split("\n\n")[0]
        row = (Text(cmd.name or name, style=_STYLE_OPTION), _rich_text(first.replace("\n", " ").strip(), markup), [])
        by_panel.setdefault(getattr(cmd, "rich_help_panel", None) or PANEL_COMMANDS, []).append(row)
    return sorted(by_panel.items(), key=lambda item: item[0] != PANEL_COMMANDS)


def help_console():
    """The rich console ``--help`` prints on: stdout, colours only on a terminal (``NO_COLOR``
    honoured by rich; ``FORCE_COLOR``, ``PY_COLORS`` or ``GITHUB_ACTIONS`` force them, as in
    typer), width from ``COLUMNS`` or the terminal (``TERMINAL_WIDTH`` caps it, as in typer)."""
    from rich.console import Console

    force = True if any(os.getenv(v) for v in ("GITHUB_ACTIONS", "FORCE_COLOR", "PY_COLORS")) else None
    if os.getenv("_TYPER_FORCE_DISABLE_TERMINAL"):
        force = False
    width = os.getenv("TERMINAL_WIDTH", "")
    return Console(force_terminal=force, width=int(width) if width.isdigit() else None, highlight=False)


def render_help(command: Any, ctx: Any, console: Any) -> None:
    """Print ``command``'s ``--help`` on ``console``: usage, help text, then one panel per
    ``rich_help_panel`` (:func:`_panels` order), and a group's sub-commands.

    Nothing is cut: option names, value types, choices and each ``[default: ...]`` wrap at spaces
    within the console width (a ``[...]`` is kept on one line when it fits). A help text stands
    beside the names, in a column after the longest name of at most :data:`NAME_COLUMN_MAX` cells,
    when that column leaves :data:`HELP_BESIDE_MIN` cells for it (the column is shared by all
    panels; longer names get a line of their own); narrower, it goes below the names, indented by
    :data:`HELP_INDENT`. Help texts are rich markup (``\\[`` for ``[``) when the command's
    ``rich_markup_mode`` is ``rich``, and plain text when they are not valid markup.
    """
    from rich.padding import Padding
    from rich.text import Text

    markup = getattr(command, "rich_markup_mode", None) == "rich"
    width = console.width
    inner = max(width - 4, 10)  # panel border and padding
    console.print(Padding(Text(command.get_usage(ctx), style=_STYLE_USAGE), 1))
    if command.help:
        console.print(Padding(_rich_text(_paragraphs(command.help), markup), (0, 1, 1, 1)))
    panels = [(name, _option_rows(params, ctx, markup)) for name, params in _panels(command.get_params(ctx))]
    cap = min(NAME_COLUMN_MAX, inner - 2 - HELP_BESIDE_MIN)
    fitting = [h.cell_len for _, rows in panels for h, _, _ in rows if h.cell_len <= cap]
    name_col = max(fitting) if cap >= NAME_COLUMN_MIN and fitting else None
    for name, rows in panels:
        if rows:
            _panel(console, name, _layout(console, rows, inner, name_col))
    if hasattr(command, "list_commands"):  # a group: its sub-commands
        groups = _command_rows(command, ctx, markup)
        longest = max((h.cell_len for _, rows in groups for h, _, _ in rows), default=0)
        col = longest if inner - longest - 2 >= 20 else None
        for name, rows in groups:
            _panel(console, name, _layout(console, rows, inner, col))
    if command.epilog:
        console.print(Padding(_rich_text(_paragraphs(command.epilog), markup), 1))


class _VdrHelp:
    """Mixin of vdr's commands and groups: ``--help`` drawn by :func:`render_help` (panels by
    group, nothing truncated), and the ``--help`` flag shows no value type (``<bool>`` in typer >= 0.2x)."""

    def get_help_option(self, ctx):  # noqa: D102 - click's
        opt = super().get_help_option(ctx)  # type: ignore[misc]
        if opt is not None and getattr(opt, "metavar", None) is None:
            opt.metavar = ""
        return opt

    def format_help(self, ctx, formatter) -> None:  # noqa: D102 - click's
        if getattr(self, "rich_markup_mode", None) is None:  # typer without rich: click's plain help
            return super().format_help(ctx, formatter)  # type: ignore[misc]
        try:
            console = help_console()
        except ImportError:  # pragma: no cover - rich not installed
            return super().format_help(ctx, formatter)  # type: ignore[misc]
        render_help(self, ctx, console)
        return None


class Command(_VdrHelp, typer.core.TyperCommand):
    """A typer command whose ``--help`` shows options in panels by group, uncut (:func:`render_help`)."""


class Group(_VdrHelp, typer.core.TyperGroup):
    """A typer group (the root ``vdr``, ``vdr convert``) with the same ``--help`` display."""


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
             for n, t in (("quiet", bool), ("log_level", LogLevel), ("verbose", bool)) if n not in own]
    for p in params + extra:
        tidy_help(p)

    @functools.wraps(func)
    def command(**kwargs: Any) -> Any:
        quiet = kwargs["quiet"] if "quiet" in own else kwargs.pop("quiet", False)
        level = kwargs["log_level"] if "log_level" in own else kwargs.pop("log_level", LogLevel.warning)
        verbose = kwargs["verbose"] if "verbose" in own else kwargs.pop("verbose", False)
        kwargs = {k: v.value if isinstance(v, Enum) else v for k, v in kwargs.items()}
        with output(quiet=bool(quiet), log_level=getattr(level, "value", level), verbose=bool(verbose)):
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



#: ``[(name, function)]`` of every command module's commands, in registration order (:func:`command`);
#: :mod:`vdr.cli.root` adds them to the app.
COMMANDS: list[tuple[str, Callable[..., Any]]] = []


def command(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: declare ``function`` as the command ``vdr NAME`` (registered on the app by
    :mod:`vdr.cli.root`, in the order the command modules are imported); returns it unchanged."""

    def declare(function: Callable[..., Any]) -> Callable[..., Any]:
        COMMANDS.append((name, function))
        return function

    return declare
