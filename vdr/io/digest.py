"""File digests: the one SHA-256 of a file's bytes that results, caches and ingest reports record."""

from __future__ import annotations

import hashlib
from pathlib import Path


def file_sha256(path: str | Path, *, block: int = 1 << 20) -> str:
    """Hex SHA-256 of the bytes of ``path``, read in ``block``-byte blocks (default 1 MiB).

    Raises:
        OSError: the file cannot be read.
    """
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(block), b""):
            h.update(chunk)
    return h.hexdigest()
