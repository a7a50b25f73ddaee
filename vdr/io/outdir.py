"""A results folder written safely: locked, checked before any work, replaced as a whole.

``vdr evaluate --out DIR`` and ``vdr compare --out DIR`` write through :class:`ResultsFolder`:

1. :meth:`ResultsFolder.open` (before any work): ``DIR`` must be a folder that can be created or
   written (a file, or a parent that is a file or not writable, is an :class:`~vdr.errors.InputError`
   naming the path); the lock ``DIR/.vdr.lock`` is taken with :mod:`filelock` without waiting (a
   second run into the same folder fails at once, naming the folder and the lock file); a folder
   holding the results of a *different* experiment (another command, corpus, queries, qrels or
   ViDoRe dataset, read from its ``results.json``), or files vdr does not write, is refused unless
   ``overwrite``.
2. The run writes its results into :attr:`ResultsFolder.staging` (``DIR/.vdr-new-*``).
3. :meth:`ResultsFolder.commit` replaces the folder's vdr content with the staged one: every
   earlier entry vdr writes (:data:`KNOWN_ENTRIES`: stale ``runs/*.trec``, ``report.html``,
   ``report.md``, ``judge/`` ...) is moved aside and deleted, except the paths listed in ``keep``
   (e.g. ``corpus`` ingested by ``--vidore`` in this run, the judge's answer cache). A file vdr did
   not write is never deleted: with ``overwrite`` the results are written beside it. Ctrl-C during
   the commit is held back until it is done.
4. :meth:`ResultsFolder.close` (also on errors and Ctrl-C) removes what was staged and releases the
   lock: a run that did not reach :meth:`commit` leaves the folder as it was (a folder it had to
   create is removed again when still empty).

:func:`locked` takes the same lock for a command that adds to an existing results folder in place
(``vdr judge`` writing ``judge/``): while it runs no other vdr run can write the folder, and it
fails at once while another holds it.

The folder itself is never renamed (a symlinked ``--out``, its permissions and a shell inside it
stay valid), and the staging folder lives inside it, on the same file system.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Mapping

from ..errors import InputError

__all__ = ["ResultsFolder", "locked", "LOCK_FILE", "KNOWN_ENTRIES", "identity_of", "entries_holding", "not_a_results_folder"]

LOCK_FILE = ".vdr.lock"
_STAGING = ".vdr-new-"
_TRASH = ".vdr-old-"
#: Entries vdr writes into a results folder (anything else is a user's file: refused without ``overwrite``).
KNOWN_ENTRIES = frozenset({"results.json", "per_query.csv", "runs", "timing.json", "report.html", "report.md", "judge", "mteb",
                           "corpus", "report_pages"})
_IDENTITY_KEYS = ("command", "corpus_dir", "queries", "qrels", "vidore")


def identity_of(config: Mapping) -> dict:
    """What makes two results the same experiment, from a ``results.json`` config: the command
    (``evaluate`` when not recorded), the corpus folder, the queries and qrels files and the ViDoRe
    dataset (the options, backends and runs may change between re-runs)."""
    out = {k: config.get(k) for k in _IDENTITY_KEYS}
    out["command"] = out["command"] or "evaluate"
    if out["command"] == "compare":  # runs compared on the qrels: the corpus and queries of `vdr compare` are only shown
        out["corpus_dir"] = out["queries"] = None
    return out


def _ours(name: str) -> bool:
    return name == LOCK_FILE or name.startswith((_STAGING, _TRASH))


@contextmanager
def _sigint_deferred() -> Iterator[None]:
    """Hold back SIGINT (Ctrl-C) while the block runs; re-raise KeyboardInterrupt after it when one came."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    got: list[int] = []
    old = signal.signal(signal.SIGINT, lambda s, f: got.append(s))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)
    if got:
        raise KeyboardInterrupt


class ResultsFolder:
    """A results folder taken for one run (see the module docstring for the protocol).

    Args:
        path: the results folder (``--out``).
        identity: this run's :func:`identity_of` (compared with the folder's ``results.json``).
        overwrite: replace another experiment's results; write beside files vdr did not write (never deleted).
        keep: paths relative to ``path`` carried over into the new content when they exist
            (``"corpus"``, ``"judge/cache.jsonl"``).
        inputs: the run's input files and folders; those inside ``path`` (e.g. ``--out`` holding
            the corpus) are kept as well (their top-level entry) and never count as foreign files.

    Use::

        folder = ResultsFolder(out, identity=...).open()   # before any work; raises InputError
        with folder:                                         # closes (unlocks, cleans) in any case
            ... write into folder.staging ...
            folder.commit()
    """

    def __init__(self, path: str | Path, *, identity: Mapping | None = None, overwrite: bool = False,
                 keep: tuple[str, ...] = (), inputs=()) -> None:
        self.path = Path(path)
        self.identity = None if identity is None else identity_of(identity)
        self.overwrite = overwrite
        self.keep = tuple(keep) + entries_holding(self.path, inputs)
        here = self.path.resolve()
        self._input_is_out = next((str(p) for p in inputs if p is not None and Path(p).resolve() == here), None)
        # an input folder holding --out (CORPUS/images): --overwrite must never delete that input's files
        self._inside_input = next((str(p) for p in inputs if p is not None and Path(p).is_dir() and Path(p).resolve() in here.parents),
                                  None)
        self.lock_path = self.path / LOCK_FILE
        self._lock = None
        self._created = False
        self._staging: Path | None = None
        self._committed = False

    # ------------------------------------------------------------------ open

    def open(self) -> "ResultsFolder":
        """Check the folder can be written, take its lock, check what it holds; nothing else runs.

        Returns:
            ``self``.

        Raises:
            InputError: ``path`` is one of ``inputs`` (the corpus folder itself), or lies inside an input
                folder and holds files vdr did not write (even with ``overwrite``); ``path`` is a file;
                a parent is a file or cannot be written; the lock is held
                by another run; the folder holds another experiment's results or files vdr did not
                write (without ``overwrite``). Nothing is left behind.
        """
        self._create()
        if self._input_is_out is not None:  # replacing the folder's content would delete that input (a corpus!)
            raise InputError(f"the results folder (--out) is an input of this run ({self._input_is_out}): writing the results"
                             f" would replace its files; choose another --out, e.g. {self.path.with_name(self.path.name + '-results')}",
                             path=self.path)
        try:
            self._take_lock()
            self._check_content()
        except BaseException:
            self.close()
            raise
        return self

    def _create(self) -> None:
        p = self.path
        if p.exists() and not p.is_dir():
            raise InputError("the results folder (--out) is a file, not a folder; choose a folder", path=p)
        if not p.exists():
            anc = p.absolute().parent
            while not anc.exists():
                anc = anc.parent
            if not anc.is_dir():
                raise InputError(f"cannot create the results folder (--out): {anc} is a file", path=p)
            if not os.access(anc, os.W_OK | os.X_OK):
                raise InputError(f"cannot create the results folder (--out): {anc} is not writable", path=p)
            try:
                p.mkdir(parents=True)
                self._created = True
            except FileExistsError:  # another run created it meanwhile: the lock decides
                pass
            except OSError as e:
                raise InputError(f"cannot create the results folder (--out): {e.strerror or e}", path=p) from None
        if not os.access(p, os.W_OK | os.X_OK):
            raise InputError("the results folder (--out) is not writable", path=p)

    def _take_lock(self) -> None:
        self._lock_was_there = self.lock_path.exists()
        self._lock = _acquire(self.path, "wait for it to finish or choose another --out")
        for e in self.path.iterdir():  # leftovers of a run that was killed (we hold the lock: nobody else writes)
            if e.name.startswith((_STAGING, _TRASH)):
                shutil.rmtree(e, ignore_errors=True)

    def _check_content(self) -> None:
        entries = sorted(e.name for e in self.path.iterdir() if not _ours(e.name))
        if not entries or (self.overwrite and self._inside_input is None):
            return
        kept = {Path(k).parts[0] for k in self.keep if Path(k).parts}
        foreign = [n for n in entries if n not in KNOWN_ENTRIES and n not in kept]
        named = f"{', '.join(foreign[:5])}{' ...' if len(foreign) > 5 else ''}"
        if foreign and self._inside_input is not None:  # even with --overwrite: they are the input's files
            raise InputError(f"the results folder (--out) lies inside an input of this run ({self._inside_input}) and holds"
                             f" files vdr did not write ({named}): writing the results would delete them from that input,"
                             " --overwrite or not; choose another --out", path=self.path)
        if foreign:
            raise InputError(f"the results folder holds files vdr did not write ({named}); give --overwrite to write the"
                             " results beside them (they are kept) or choose another --out", path=self.path)
        if self.overwrite:
            return
        old = self._old_identity()
        if old is not None and self.identity is not None and old != self.identity:
            diff = "; ".join(f"{k}: {old[k]} -> {self.identity[k]}" for k in _IDENTITY_KEYS if old[k] != self.identity[k])
            raise InputError(f"the results folder holds the results of a different experiment ({diff}); give --overwrite"
                             " to replace them or choose another --out", path=self.path)

    def _old_identity(self) -> dict | None:
        f = self.path / "results.json"
        if not f.is_file():
            return None
        try:
            doc = json.loads(f.read_text(encoding="utf-8"))
            config = doc.get("config") if isinstance(doc, dict) else None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            config = None
        if not isinstance(config, dict):
            raise InputError("the results folder holds a results.json vdr cannot read; give --overwrite to replace it",
                             path=f)
        return identity_of(config)

    # ------------------------------------------------------------------ write

    @property
    def staging(self) -> Path:
        """The folder to write this run's results into (created on first use, inside :attr:`path`)."""
        if self._lock is None:
            raise RuntimeError("ResultsFolder.open() was not called")
        if self._staging is None:
            self._staging = Path(tempfile.mkdtemp(prefix=_STAGING, dir=self.path))
            os.chmod(self._staging, 0o777 & ~_umask())
        return self._staging

    def commit(self) -> Path:
        """Replace the folder's content by the staged content (entries listed in ``keep`` carried
        over); Ctrl-C is held back until it is done.

        Returns:
            :attr:`path`.

        Raises:
            OSError: an entry cannot be moved (what was moved is moved back).
        """
        new = self.staging
        self._committed = True
        with _sigint_deferred():
            trash = Path(tempfile.mkdtemp(prefix=_TRASH, dir=self.path))
            moved: list[str] = []
            placed: list[str] = []
            try:
                for e in sorted(self.path.iterdir()):  # vdr's own entries; a file vdr did not write is never deleted
                    if not _ours(e.name) and (e.name in KNOWN_ENTRIES or (new / e.name).exists()):
                        os.replace(e, trash / e.name)
                        moved.append(e.name)
                for e in sorted(new.iterdir()):
                    os.replace(e, self.path / e.name)
                    placed.append(e.name)
            except BaseException:
                for n in placed:
                    os.replace(self.path / n, new / n)
                for n in moved:
                    os.replace(trash / n, self.path / n)
                raise
            for rel in self.keep:
                src, dst = trash / rel, self.path / rel
                if (src.exists() or src.is_symlink()) and not (dst.exists() or dst.is_symlink()):
                    dst.parent.mkdir(parents=True, exist_ok=True)
                    os.replace(src, dst)
            shutil.rmtree(trash, ignore_errors=True)
            shutil.rmtree(new, ignore_errors=True)
            self._staging = None
        return self.path

    # ------------------------------------------------------------------ close

    def close(self) -> None:
        """Remove what was staged and not committed, release the lock; a folder :meth:`open`
        created is removed again when nothing else was put in it. Never raises for those."""
        if self._staging is not None:
            shutil.rmtree(self._staging, ignore_errors=True)
            self._staging = None
        if self._lock is not None:
            self._lock.release()
            self._lock = None
            if not self._created and not self._committed and not getattr(self, "_lock_was_there", True):
                try:  # a refused or failed run leaves the folder as it found it (no stray lock file)
                    self.lock_path.unlink()
                except OSError:
                    pass
            if self._created:
                try:
                    left = [e.name for e in self.path.iterdir()]
                    if left == [LOCK_FILE]:
                        self.lock_path.unlink()
                        self.path.rmdir()
                except OSError:
                    pass
        elif self._created:
            try:
                self.path.rmdir()
            except OSError:
                pass
        self._created = False

    def __enter__(self) -> "ResultsFolder":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _acquire(folder: Path, hint: str):
    """Take ``folder/.vdr.lock`` without waiting; the held :class:`filelock.FileLock`.

    Raises:
        InputError: another run holds it (naming the folder and the lock file, then ``hint``); the
            lock file cannot be created.
    """
    from filelock import FileLock, Timeout

    lock_path = folder / LOCK_FILE
    lock = FileLock(str(lock_path), timeout=0)
    try:
        lock.acquire()
    except Timeout:
        raise InputError(f"the results folder {folder} is in use by another vdr run (lock file {lock_path} is"
                         f" held); {hint}") from None
    except OSError as e:
        raise InputError(f"cannot lock the results folder: {e.strerror or e}", path=lock_path) from None
    return lock


@contextmanager
def locked(folder: str | Path) -> Iterator[Path]:
    """Hold the lock of an existing results folder while the block writes into it (``vdr judge``
    adding ``judge/``): the lock :class:`ResultsFolder` takes, taken the same way, without waiting,
    so a ``vdr evaluate``/``vdr compare``/``vdr judge`` writing the same folder fails at once and
    this one fails at once while another runs. Yields ``Path(folder)``; released on any exit.

    Raises:
        InputError: ``folder`` holds no ``results.json``; the lock is held by another vdr run
            (the message names the folder and the lock file); the lock file cannot be created.
    """
    folder = Path(folder)
    if not (folder / "results.json").is_file():  # no lock file left in a folder that is not one
        raise not_a_results_folder(folder)
    lock = _acquire(folder, "wait for it to finish")
    try:
        yield folder
    finally:
        lock.release()


def entries_holding(folder: str | Path, paths) -> tuple[str, ...]:
    """The names of the top-level entries of ``folder`` that hold one of ``paths`` (``None`` items
    skipped): inputs that lie inside an output folder (kept across a replace; never counted as
    the folder's content by ``vdr ingest``'s check)."""
    root = Path(folder).resolve()
    out = []
    for p in paths:
        if p is None:
            continue
        try:
            rel = Path(p).resolve().relative_to(root)
        except ValueError:
            continue
        if rel.parts:
            out.append(rel.parts[0])
    return tuple(dict.fromkeys(out))


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def not_a_results_folder(folder: Path) -> InputError:
    """The error for ``folder`` read as a results folder without ``results.json``: it does not
    exist, is a file, or holds no ``results.json`` (the message says which)."""
    folder = Path(folder)
    if folder.is_file() and (folder.parent / "results.json").is_file():  # results.json, per_query.csv, ...
        return InputError(f"a file: give the results folder that holds it, {folder.parent}", path=folder)
    if not folder.exists():
        why = "does not exist"
    elif not folder.is_dir():
        why = "a file, not a results folder"
    else:
        why = "not a results folder: results.json is missing"
    return InputError(f"{why} (run `vdr evaluate --out ...` first)", path=folder)
