"""The ``vdr`` command line (typer): :mod:`.root` (the root group, :func:`main`, :func:`entry`), one
module per command group (:mod:`.evaluate`: metrics, evaluate, compare, report, mteb-task;
:mod:`.ingest`: ingest, embed, convert; :mod:`.llm`: judge, rewrite; :mod:`.serve`: serve), the
shared parameters (:mod:`.params`: encoder options generated from the option records, parsers)
and the shared output/option handling and help renderer (:mod:`.common`)."""

from .root import app, entry, main

__all__ = ["app", "entry", "main"]
