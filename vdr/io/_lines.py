"""Strict line reading shared by the file readers: UTF-8 (an optional BOM is skipped), CRLF tolerated,
a CR-only line end (classic Mac OS, some spreadsheet exports) read as a line break and warned about
(issue 34.3), and a decoding error reported with the file and line number."""

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
    """Yield ``(line_number, line)`` for every line of ``path`` (1-based; line end stripped).

    Line ends are LF, CRLF or a lone CR (one that no LF follows): a file saved with CR-only line
    ends is read line by line, as a text editor shows it, and a :class:`~vdr.errors.VdrWarning`
    says how many such line ends there were and where the first was.

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
    no, lone_cr, first_cr = 0, 0, None
    with f:
        for raw in f:
            if no == 0:
                raw = _skip_bom(raw, path)
            if raw.endswith(b"\n"):
                raw = raw[:-2] if raw.endswith(b"\r\n") else raw[:-1]
            parts = raw.split(b"\r")
            if len(parts) > 1:
                lone_cr += len(parts) - 1
                first_cr = first_cr or no + 1
                if parts[-1] == b"":  # the file ends with a lone CR: no empty line after it
                    parts.pop()
            for bline in parts:
                no += 1
                yield no, _decode(bline, path, no)
    if lone_cr:
        import warnings

        from ..errors import VdrWarning

        warnings.warn(f"{path}: {lone_cr} line end(s) are a lone CR (classic Mac OS), the first ending line {first_cr}:"
                      " read as line breaks", VdrWarning, stacklevel=3)


def _skip_bom(raw: bytes, path: Path) -> bytes:
    """The first line without its UTF-8 byte-order mark.

    Raises:
        InputError: a UTF-16 byte-order mark.
    """
    if raw.startswith(b"\xef\xbb\xbf"):
        return raw[3:]
    if raw[:2] in (b"\xff\xfe", b"\xfe\xff"):
        raise InputError("file is UTF-16 encoded; vdr reads UTF-8 only (re-save it as UTF-8)", path=path, line=1)
    return raw


def _decode(bline: bytes, path: Path, no: int) -> str:
    """Line ``no`` decoded as UTF-8.

    Raises:
        InputError: NUL bytes (UTF-16/32 without a byte-order mark) or invalid UTF-8, naming the line and column.
    """
    if b"\x00" in bline:
        raise InputError(
            "NUL bytes in the line: the file is probably UTF-16/UTF-32 without a byte-order mark; vdr reads UTF-8 only",
            path=path,
            line=no,
        )
    try:
        return bline.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(
            f"not valid UTF-8 (byte {bline[e.start]:#04x} at column {e.start + 1}); vdr reads UTF-8 files only",
            path=path,
            line=no,
        ) from None
