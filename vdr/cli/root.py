"""The ``vdr`` application: the root group, its entry points (:func:`main`, :func:`entry`) and the
registration of every command module (one module per command group: :mod:`.evaluate`, :mod:`.ingest`,
:mod:`.llm`, :mod:`.serve`).

Errors vdr raises on purpose (:class:`~vdr.errors.VdrError`) are printed as one line naming the
file, line and id, and the command exits with status 2; no traceback.

Under ``torchrun -m vdr ...`` (``WORLD_SIZE`` > 1) :func:`main` joins the process group first
(:func:`vdr.distributed.init`). ``embed`` and ``evaluate`` run on every rank (work sharded, see
:mod:`vdr.distributed`); only rank 0 prints and writes outputs. ``metrics`` and ``ingest`` run on rank
0 alone while the other ranks wait.
"""

from __future__ import annotations

import sys
import warnings

import typer

from . import common
from ..errors import VdrError, VdrWarning


def _click_errors() -> tuple[type[Exception], ...]:
    """Usage-error classes: typer >= 0.26 vendors click as ``typer._click``; older typer uses ``click``."""
    found: list[type[Exception]] = []
    try:
        from typer._click.exceptions import ClickException as vendored

        found.append(vendored)
    except ImportError:  # pragma: no cover - depends on the installed typer
        pass
    try:
        from click.exceptions import ClickException

        found.append(ClickException)
    except ImportError:  # pragma: no cover - click is optional with a vendoring typer
        pass
    return tuple(found)


_CLICK_ERRORS = _click_errors()


app = typer.Typer(
    name="vdr",
    help="Visual-document retrieval evaluation: original vs rewritten queries, trec_eval-exact metrics.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    cls=common.Group,
)


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=common.print_version, is_eager=True, help="Print vdr's version and exit."),
) -> None:
    """vdr: visual-document retrieval evaluation. Every command takes -q/--quiet, -v/--verbose and --log-level."""


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    from ..progress import console_width, fit_line

    prefix = "warning" if issubclass(category, VdrWarning) else category.__name__
    print(fit_line(f"{prefix}: {message}", console_width(sys.stderr)), file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point; returns the exit status (2 on a :class:`VdrError`)."""
    from .. import distributed as D

    common.install(app)  # -q/--quiet, --log-level on every command, also on commands registered late
    old = warnings.showwarning
    warnings.showwarning = _show_warning
    ok = False
    try:
        D.init()  # torchrun: join the process group (no-op otherwise)
        rc = app(args=argv, prog_name="vdr", standalone_mode=False)
        ok = True
        return rc if isinstance(rc, int) else 0  # click returns typer.Exit's code here
    except D.RankFailed:  # rank 0 failed first and prints the error itself
        return 2
    except VdrError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # cannot read or write a file (permissions, a folder where a file is expected, ...)
        where = f"{e.filename}: " if e.filename else ""
        print(f"error: {where}{e.strerror or e}", file=sys.stderr)
        return 2
    except typer.Exit as e:
        return e.exit_code
    except typer.Abort:
        print("aborted", file=sys.stderr)
        return 1
    except _CLICK_ERRORS as e:  # usage errors: missing argument, unknown option, bad value
        e.show()
        return e.exit_code
    finally:
        warnings.showwarning = old
        if ok:
            D.shutdown()  # final barrier: no rank leaves while rank 0 still writes
        elif D.launched_by_torchrun():
            _destroy_group()


def _destroy_group() -> None:
    """Leave the process group without a barrier (after an error: the other ranks may never arrive)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def entry() -> None:
    """Process entry point (the ``vdr`` console script, ``python -m vdr``): :func:`main`, then exit
    with its status (``SystemExit``); an unexpected exception propagates (traceback, status 1).

    Use :func:`main` to call the command line in-process: this function changes the process's
    garbage collector on the way out (:func:`_quick_teardown`).
    """
    try:
        rc = main()
    finally:
        _quick_teardown()
    sys.exit(rc)


def _quick_teardown() -> None:
    """Make interpreter shutdown cheap: :func:`gc.disable` then :func:`gc.freeze`.

    Called once the command has finished and written its outputs, on every exit path (status 0,
    a handled error, an unexpected exception). After the heavy imports of some commands (torch,
    torch._dynamo, scikit-learn, numba) Python's shutdown spends 1-2.5 s in cyclic garbage
    collections over millions of module-level objects that die with the process anyway (measured:
    a 1.76 s teardown drops to 0.5 s). Freezing moves every live object to the permanent
    generation, which no collection scans; disabling stops the collections that shutdown's
    deallocations would trigger. Everything else runs as usual: ``atexit`` handlers (the process
    group, temporary folders, loggers), buffered streams flushed and closed, modules cleared,
    reference-count finalisers; objects in reference cycles are not collected (the OS frees them).
    No ``os._exit``.
    """
    import gc

    gc.disable()
    gc.freeze()


def _register() -> None:
    """Add every command of the command modules to :data:`app`, in ``vdr --help`` order, then the
    ``vdr convert`` group."""
    from . import evaluate, ingest, llm, serve  # noqa: F401  (importing a module declares its commands)

    order = ["metrics", "ingest", "evaluate", "compare", "report", "mteb-task", "embed", "judge", "serve", "rewrite"]
    declared = dict(common.COMMANDS)
    for name in order + [n for n in declared if n not in order]:
        app.command(name)(declared[name])
    app.add_typer(ingest.convert_app, name="convert")


_register()
common.install(app)

if __name__ == "__main__":  # python -m vdr.cli.root
    entry()
