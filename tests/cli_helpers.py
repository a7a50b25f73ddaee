"""Helpers shared by the command-line tests: run ``vdr`` in-process, snapshot a folder, hold a
results folder's lock from another process."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from vdr.cli import main


def cli(capsys, *args) -> tuple[int, str, str]:
    """``vdr ARGS`` through :func:`vdr.cli.main` (errors become exit status 2): ``(status, stdout, stderr)``."""
    rc = main([str(a) for a in args])
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (hidden ones too) with its bytes."""
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@contextmanager
def lock_held_elsewhere(lock_file: Path) -> Iterator[None]:
    """Another process holds ``lock_file`` (a ``filelock`` lock, as a running ``vdr evaluate``
    holds its results folder's) for the duration of the block."""
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, filelock; l = filelock.FileLock(sys.argv[1], timeout=0); l.acquire();"
         " print('locked', flush=True); sys.stdin.read()", str(lock_file)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        yield
    finally:
        holder.communicate("", timeout=30)
