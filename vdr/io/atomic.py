"""Atomic file writes: a reader sees the old file or the complete new one, never a partial one."""

from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Iterator

__all__ = ["atomic_write", "write_text_atomic", "write_bytes_atomic"]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextmanager
def atomic_write(path: str | Path, mode: str = "w", encoding: str | None = "utf-8") -> Iterator[IO]:
    """Open a temporary file beside ``path``; on success fsync it and ``os.replace`` it onto ``path``.

    Args:
        path: destination file; its parent folder is created when missing.
        mode: ``"w"`` (text, default) or ``"wb"`` (bytes).
        encoding: text encoding for ``"w"`` (ignored for ``"wb"``).

    Raises:
        ValueError: ``mode`` is not ``"w"`` or ``"wb"``.
        OSError: the folder cannot be created or written. On any error the destination is left
            untouched and the temporary file is removed.
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_write mode must be 'w' or 'wb', not {mode!r}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        if mode == "wb":
            f = os.fdopen(fd, "wb")
        else:
            f = os.fdopen(fd, "w", encoding=encoding, newline="")
        with f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp creates 0600; give the usual default mode
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def write_text_atomic(path: str | Path, text: str, encoding: str = "utf-8") -> None:
    """Write ``text`` to ``path`` atomically (see :func:`atomic_write`)."""
    with atomic_write(path, "w", encoding=encoding) as f:
        f.write(text)


def write_bytes_atomic(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (see :func:`atomic_write`)."""
    with atomic_write(path, "wb") as f:
        f.write(data)
