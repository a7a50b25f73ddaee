"""Strict line reading shared by the file readers: UTF-8 (an optional BOM is skipped), CRLF tolerated,
and a decoding error reported with the file and line number."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

from ..errors import InputError


def json_object(line: str, path: str | Path, no: int, what: str = "a JSON object") -> dict:
    """Line ``no`` of a JSON-lines file parsed as one JSON object.

    Raises:
        InputError: invalid JSON (message and column named) or not an object ("each line must be
            ``what``"), naming ``path`` and the line.
    """
    import json

    try:
        obj = json.loads(line)
    except json.JSONDecodeError as e:
        raise InputError(f"invalid JSON ({e.msg}, column {e.colno})", path=path, line=no) from None
    if not isinstance(obj, dict):
        raise InputError(f"each line must be {what}", path=path, line=no)
    return obj


def read_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, line)`` for every line of ``path`` (1-based; newline stripped).

    Raises:
        InputError: the file is missing, is a folder, or is not valid UTF-8 (the line is named).
    """
    path = Path(path)
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        raise InputError("file not found", path=path) from None
    except IsADirectoryError:
        raise InputError("is a folder, expected a file", path=path) from None
    with f:
        for no, bline in enumerate(f, start=1):
            if no == 1:
                if bline.startswith(b"\xef\xbb\xbf"):
                    bline = bline[3:]
                elif bline[:2] in (b"\xff\xfe", b"\xfe\xff"):
                    raise InputError("file is UTF-16 encoded; vdr reads UTF-8 only (re-save it as UTF-8)", path=path, line=1)
            bline = bline.rstrip(b"\r\n")
            if b"\x00" in bline:
                raise InputError(
                    "NUL bytes in the line: the file is probably UTF-16/UTF-32 without a byte-order mark; vdr reads UTF-8 only",
                    path=path,
                    line=no,
                )
            try:
                yield no, bline.decode("utf-8")
            except UnicodeDecodeError as e:
                raise InputError(
                    f"not valid UTF-8 (byte {bline[e.start]:#04x} at column {e.start + 1}); vdr reads UTF-8 files only",
                    path=path,
                    line=no,
                ) from None
