"""Errors and warnings raised by vdr.

Every error about user input names the file, the 1-based line and the offending id when they
are known, so that a user can fix the input without reading a traceback.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["VdrError", "InputError", "ArgumentTypeError", "check_path", "wrong_type", "AlignmentError", "ModelLoadError", "StoreError", "VdrWarning"]


class VdrError(Exception):
    """Base class of every error vdr raises on purpose."""


class InputError(VdrError, ValueError):
    """Bad user input: a malformed file, line, id or value.

    Attributes:
        path: the file concerned, or ``None`` for in-memory input.
        line: 1-based line number in ``path``, or ``None``.
        id: the query or corpus id concerned, or ``None``.
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | Path | None = None,
        line: int | None = None,
        id: str | None = None,
    ) -> None:
        self.path = None if path is None else str(path)
        self.line = line
        self.id = id
        where = ""
        if self.path is not None:
            where = self.path + (f":{line}" if line is not None else "")
        elif line is not None:
            where = f"line {line}"
        prefix = f"{where}: " if where else ""
        suffix = f" (id {id!r})" if id is not None and repr(id) not in message else ""
        super().__init__(f"{prefix}{message}{suffix}")


class ArgumentTypeError(InputError, TypeError):
    """An argument of a public function has the wrong type (a path where a loaded corpus is
    expected, ...): the message names the function, the argument, what it takes and what it got.
    Both an :class:`InputError` (the CLI prints it as one line) and a :class:`TypeError`."""


def wrong_type(function: str, argument: str, takes: str, value: object, hint: str = "") -> ArgumentTypeError:
    """The :class:`ArgumentTypeError` of ``function(argument=value)``.

    >>> str(wrong_type("build_backend", "corpus", "a Corpus", "corpus", "load a folder with vdr.load_corpus(path)"))
    "build_backend(corpus=...) takes a Corpus, not str 'corpus'; load a folder with vdr.load_corpus(path)"
    """
    shown = repr(value)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    return ArgumentTypeError(f"{function}({argument}=...) takes {takes}, not {type(value).__name__} {shown}" + (f"; {hint}" if hint else ""))


def check_path(value: object, function: str, argument: str, *, optional: bool = False) -> Path | None:
    """``value`` as a :class:`~pathlib.Path` (``None`` stays ``None`` when ``optional``).

    >>> check_path("runs/bm25.trec", "vdr.report", "results_dir")
    PosixPath('runs/bm25.trec')

    Raises:
        ArgumentTypeError: ``value`` is not a ``str`` or ``os.PathLike`` (a loaded object where its
            folder is expected: the message says to pass the folder, e.g. ``corpus.root``).
    """
    import os

    if value is None and optional:
        return None
    if isinstance(value, (str, os.PathLike)):
        return Path(value)
    root = getattr(value, "root", None)
    hint = f"pass its folder, {argument}={str(root)!r}" if isinstance(root, (str, os.PathLike)) else ""
    raise wrong_type(function, argument, "a folder or file path (str or pathlib.Path)" + (" or None" if optional else ""), value, hint)


class AlignmentError(InputError):
    """A rewrite variant's query ids do not match the original queries' ids."""


class ModelLoadError(VdrError):
    """A model checkpoint cannot be loaded as a late-interaction encoder: unknown family, weights
    missing or newly initialised, or a hub name that cannot be fetched (offline)."""


class StoreError(VdrError):
    """An embedding store is unusable: missing, written by another encoder or format, locked by
    another writer, or its files disagree with its index."""


class VdrWarning(UserWarning):
    """Recoverable input problems (for example duplicate corpus ids in a run)."""
