"""The ``vdr`` command line: argument parsing and printing only; each command calls the Python
function of the same name (``vdr metrics`` -> :func:`vdr.metrics`).

Errors vdr raises on purpose (:class:`~vdr.errors.VdrError`) are printed as one line naming the
file, line and id, and the command exits with status 2; no traceback.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from typing import Optional

import typer

from .errors import VdrError, VdrWarning

try:  # typer >= 0.26 vendors click as typer._click; older typer uses the click package
    from typer._click.exceptions import ClickException as _VendoredClickException
except ImportError:  # pragma: no cover - depends on the installed typer
    _VendoredClickException = None
import click

_CLICK_ERRORS = tuple(c for c in (_VendoredClickException, click.ClickException) if c is not None)

app = typer.Typer(
    name="vdr",
    help="Visual-document retrieval evaluation: original vs rewritten queries, trec_eval-exact metrics.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _root() -> None:
    """vdr: visual-document retrieval evaluation."""


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    prefix = "warning" if issubclass(category, VdrWarning) else category.__name__
    print(f"{prefix}: {message}", file=sys.stderr)


@app.command("metrics")
def metrics_command(
    qrels: Path = typer.Argument(..., help="Qrels file: TREC (qid 0 docid grade), BEIR TSV (query-id/corpus-id/score header) or JSON."),
    run: Path = typer.Argument(..., help="Run file: TREC (qid Q0 docid rank score tag) or JSON."),
    k: str = typer.Option("1,3,5,10", "--k", help="Comma-separated cutoffs for the default metric families."),
    metric: Optional[list[str]] = typer.Option(
        None, "--metric", "-m", help="Explicit metric (repeatable), e.g. -m ndcg@3 -m hole@3 -m mrr; overrides --k."
    ),
    relevance_level: int = typer.Option(1, "--relevance-level", help="Minimum grade counted as relevant (binary metrics)."),
    exclude_no_relevant: bool = typer.Option(
        False, "--exclude-queries-without-relevant", help="Leave out queries whose qrels hold no grade > 0 (default: they count as 0)."
    ),
    json_out: Optional[Path] = typer.Option(None, "--json", help="Write aggregate, per-query values and policy as JSON."),
    per_query: Optional[Path] = typer.Option(None, "--per-query", help="Write per-query values as CSV."),
) -> None:
    """Evaluate a run against qrels and print a table (trec_eval semantics; see vdr.metrics)."""
    from .evaluation import metrics

    res = metrics(
        qrels,
        run,
        k=k,
        metric_names=metric or None,
        relevance_level=relevance_level,
        queries_without_relevant="exclude" if exclude_no_relevant else "zero",
        json_path=json_out,
        per_query_path=per_query,
    )
    typer.echo(res.table())
    for p in (json_out, per_query):
        if p is not None:
            typer.echo(f"wrote {p}")


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point; returns the exit status (2 on a :class:`VdrError`)."""
    old = warnings.showwarning
    warnings.showwarning = _show_warning
    try:
        app(args=argv, prog_name="vdr", standalone_mode=False)
        return 0
    except VdrError as e:
        print(f"error: {e}", file=sys.stderr)
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


if __name__ == "__main__":  # python -m vdr.cli
    sys.exit(main())
