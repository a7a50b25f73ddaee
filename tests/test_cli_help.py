"""``--help`` of every command (issue 23, item 4): options in panels by group, in a fixed order, and
nothing cut at 80 columns -- every option name (short, long, both sides of a flag pair), value type,
choice list, ``[default: ...]`` and help text shown whole, no line wider than the terminal, no ``…``.

Fast: no model, no input files; the help is rendered in-process (:func:`vdr.cli.main`)
with ``COLUMNS`` set, output captured (not a terminal, so no colours)."""

from __future__ import annotations

import re
from enum import Enum

import pytest
import typer
import typer.main
from rich.text import Text
from typer.testing import CliRunner

from vdr.cli import common
from vdr.cli import app, main

WIDTHS = (80, 120)
COLOR_ENV = ("FORCE_COLOR", "PY_COLORS", "GITHUB_ACTIONS", "TERMINAL_WIDTH", "NO_COLOR", "_TYPER_FORCE_DISABLE_TERMINAL")
EVALUATE_PANELS = [
    "Arguments", "Inputs", "Backends", "Multimodal encoder", "Text backends (lexical, semantic, hybrid)",
    "Metrics and statistics", "Run settings", "Options",
]
COMMON = {"quiet", "log_level", "verbose", "help"}  # the options every command shares, shown last under "Options"


def _all_commands() -> dict[str, object]:
    """``{"args before --help": click command}``: the root group, every command, every group and its
    sub-commands (``convert topiocqa``)."""
    common.install(app)
    root = typer.main.get_command(app)
    out = {"": root}

    def walk(prefix: str, group) -> None:
        for name, cmd in group.commands.items():
            path = f"{prefix} {name}".strip()
            out[path] = cmd
            if hasattr(cmd, "commands"):
                walk(path, cmd)

    walk("", root)
    return out


COMMANDS = _all_commands()


@pytest.fixture
def columns(monkeypatch):
    """``help_at(args, width)``: the ``--help`` output of ``vdr ARGS`` at ``width`` columns."""
    for name in COLOR_ENV:
        monkeypatch.delenv(name, raising=False)

    def help_at(args: str, width: int, capsys) -> str:
        monkeypatch.setenv("COLUMNS", str(width))
        assert main([*args.split(), "--help"]) == 0, args
        out = capsys.readouterr().out
        assert out.strip(), args
        return out

    return help_at


def _flat(out: str) -> str:
    """The help with panel borders removed and all whitespace runs made one space."""
    text = re.sub(r"[│╭╮╰╯─]", " ", out)
    return " ".join(text.split())


def _token(name: str, out: str) -> bool:
    """``name`` appears whole: not as a piece of a longer option name."""
    return re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", out) is not None


def _expected_default(param) -> str | None:
    """The default ``--help`` must show, worked out from the click parameter (None: none shown)."""
    if isinstance(param.show_default, str):
        return f"({param.show_default})"
    if param.show_default is False:
        return None
    value = param.default
    if value is None or callable(value):
        return None
    if getattr(param, "is_bool_flag", False) and getattr(param, "secondary_opts", None):
        return (param.opts if value else param.secondary_opts)[0].lstrip("-")
    if isinstance(value, bool) and getattr(param, "is_flag", False) and not value:
        return None
    if isinstance(value, Enum):
        return str(value.value)
    if isinstance(value, (list, tuple)):
        return ", ".join(str(getattr(v, "value", v)) for v in value) or None
    return str(value)


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("args", sorted(COMMANDS))
def test_help_shows_every_name_default_and_help_uncut(args, width, columns, capsys):
    out = columns(args, width, capsys)
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= width, [line for line in lines if len(line) > width]
    assert "…" not in out
    assert "\x1b[" not in out  # captured output is not a terminal: no colour codes
    flat = _flat(out)
    cmd = COMMANDS[args]
    for param in cmd.params:
        if getattr(param, "hidden", False):
            continue
        if param.param_type_name == "argument":
            assert _token(param.metavar or param.name, out), (args, param.name)
        for name in [*param.opts, *param.secondary_opts]:
            assert _token(name, out), (args, name)
        default = _expected_default(param)
        if default is not None:
            assert f"[default: {default}]" in out, (args, param.name, default)
        if param.required:
            assert "[required]" in out, (args, param.name)
        metavar = getattr(param, "metavar", None)
        if metavar:  # choices of an Enum option: [a|b|c], whole
            assert metavar in out, (args, param.name, metavar)
        if param.help:  # the help text whole, markup read (\[ shows [)
            assert " ".join(Text.from_markup(param.help).plain.split()) in flat, (args, param.name)
    for sub in getattr(cmd, "commands", {}).values():  # a group lists its commands with their help
        assert _token(sub.name, out), (args, sub.name)
        first = (sub.help or "").split("\n\n")[0]
        assert " ".join(first.split()) in flat, (args, sub.name)


@pytest.mark.parametrize("width", WIDTHS)
def test_evaluate_panels_in_fixed_order(width, columns, capsys):
    out = columns("evaluate", width, capsys)
    titles = re.findall(r"^╭─ (.+?) ─", out, flags=re.M)
    assert titles == EVALUATE_PANELS
    assert EVALUATE_PANELS[:-1] == [p for p in common.PANEL_ORDER if p in EVALUATE_PANELS]
    loose = [p.name for p in COMMANDS["evaluate"].params if not getattr(p, "rich_help_panel", None)
             and p.param_type_name == "option" and p.name not in COMMON]
    assert loose == [], f"give these evaluate options a rich_help_panel: {loose}"


def test_every_command_with_panels_keeps_common_options_last(columns, capsys):
    for args in ("metrics", "ingest", "embed", "judge", "serve", "rewrite", "compare"):
        out = columns(args, 80, capsys)
        titles = re.findall(r"^╭─ (.+?) ─", out, flags=re.M)
        assert titles[0] == "Arguments" and titles[-1] == "Options" and len(titles) >= 4, (args, titles)
        order = [common.PANEL_ORDER.index(t) for t in titles[:-1]]
        assert order == sorted(order), (args, titles)
        options_panel = out[out.index("╭─ Options ─"):]
        assert "--quiet" in options_panel and "--log-level" in options_panel and "--help" in options_panel
        loose = [p.name for p in COMMANDS[args].params if not getattr(p, "rich_help_panel", None)
                 and p.param_type_name == "option" and p.name not in COMMON]
        assert loose == [], (args, loose)


def test_evaluate_help_is_compact(columns, capsys):
    """Measured: 385 lines at 80 columns before panels and wrapping (typer's table), 176 after."""
    n80 = len(columns("evaluate", 80, capsys).splitlines())
    n120 = len(columns("evaluate", 120, capsys).splitlines())
    options = sum(1 for p in COMMANDS["evaluate"].params if not getattr(p, "hidden", False))
    assert n120 < n80 < 4 * options
    assert n120 < 3 * options


def test_option_names_wider_than_the_help_column_get_a_line_of_their_own(columns, capsys):
    out = columns("evaluate", 80, capsys)
    row = next(line for line in out.splitlines() if "--exclude-queries-without-relevant" in line)
    assert row.strip("│ ") == "--exclude-queries-without-relevant / --keep-all-queries"
    row = next(line for line in out.splitlines() if "--k <str>" in line)
    assert "Metric cutoffs" in row  # a short name has its help beside it


def test_metric_help_markup_is_read_not_shown(columns, capsys):
    flat = _flat(columns("metrics", 80, capsys))
    assert "mrr[@k]" in flat and "map[@k]" in flat and "\\[" not in flat


def test_colours_on_a_terminal_do_not_change_the_layout(columns, capsys, monkeypatch):
    plain = columns("judge", 80, capsys)
    monkeypatch.setenv("FORCE_COLOR", "1")
    coloured = columns("judge", 80, capsys)
    assert "\x1b[" in coloured
    assert re.sub(r"\x1b\[[0-9;]*m", "", coloured) == plain
    monkeypatch.setenv("NO_COLOR", "1")
    no_color = columns("judge", 80, capsys)
    assert re.sub(r"\x1b\[[0-9;]*m", "", no_color) == plain
    assert not re.search(r"\x1b\[[0-9;]*3[0-9]m", no_color)  # no foreground colour


class Colour(str, Enum):
    red = "red"
    green = "green"


def test_any_typer_app_with_vdr_classes(monkeypatch):
    """The renderer on a fresh app: unknown panels after the known ones, invalid markup shown as
    text, a long default kept whole, choices in full, a name longer than the panel folded, not cut."""
    probe = typer.Typer(cls=common.Group, add_completion=False)

    @probe.command(cls=common.Command)
    def go(
        colour: Colour = typer.Option(Colour.green, "--colour", "-c", metavar="[red|green]", help="A [/oops] colour.",
                                      rich_help_panel="Zebra"),
        path: str = typer.Option("a b c " * 20, "--path", help="Long default.", rich_help_panel=common.PANEL_INPUTS),
        flag: bool = typer.Option(True, "--flag/--no-flag", help="On by default."),
        very: int = typer.Option(1, "--" + "x" * 90, help="A name wider than the panel."),
    ) -> None:
        """Probe."""

    @probe.command(cls=common.Command)
    def other() -> None:
        """Other."""

    for name in COLOR_ENV:
        monkeypatch.delenv(name, raising=False)
    result = CliRunner().invoke(probe, ["go", "--help"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    out = result.output
    assert max(len(line) for line in out.splitlines()) <= 80 and "…" not in out
    assert re.findall(r"^╭─ (.+?) ─", out, flags=re.M) == ["Inputs", "Zebra", "Options"]
    assert "A [/oops] colour." in out and "-c, --colour [red|green]" in out and "[default: green]" in out
    assert "[default: flag]" in out and "--flag / --no-flag" in out
    assert " ".join(("[default: " + "a b c " * 20 + "]").split()) in _flat(out)  # wrapped at spaces, all there
    folded = "".join(line.strip("│ ") for line in out.splitlines() if "xxxx" in line)
    assert folded == "--" + "x" * 90 + " <int>"  # folded over two lines, every character kept
    assert "A name wider than the panel.  [default: 1]" in out
