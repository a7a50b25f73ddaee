"""The ``vdr`` command line (typer): one module per command group, options generated from the
option records of the API (:mod:`vdr.cli.commands`), and the shared output/option handling
(:mod:`vdr.cli.common`)."""

from .commands import app, entry, main

__all__ = ["app", "entry", "main"]
