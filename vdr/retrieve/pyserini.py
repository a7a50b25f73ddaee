"""The ``pyserini`` lexical backend: BM25 through Pyserini / Anserini (Lucene), for parity with
published numbers (Lin et al. 2021, "Pyserini", SIGIR; ConvSearch-R1, arXiv 2505.15776).

Optional: ``pip install 'vdr[pyserini]'`` and a Java 21+ runtime (Anserini 1.x needs Java 21).
Nothing here imports Pyserini or starts a JVM before :meth:`PyseriniBackend.index`; ``import vdr``
never does. Without Pyserini or Java 21+ the backend raises
:class:`~vdr.retrieve.base.BackendUnavailable` (reported as skipped) naming what is missing; see
:func:`unavailable_reason`.

Two ways to get an index:

* ``index_dir=PATH``: search an EXISTING Lucene index -- e.g. Pyserini's prebuilt TopiOCQA or QReCC
  indexes -- as it is (no corpus pass; the corpus size is compared with the index's document count
  and a difference is reported).
* otherwise the corpus is written as a Pyserini ``JsonCollection`` (``{"id", "contents"}`` lines,
  streamed through :func:`~vdr.retrieve.base.iter_corpus_texts`, sharded so that indexing uses
  several threads) and indexed by ``python -m pyserini.index.lucene`` (Lucene's English analyzer:
  Porter stemmer and Lucene's stop set by default). With a cache folder the index is kept in
  ``cache_dir/pyserini/<fingerprint>/`` (corpus content + analyzer + Pyserini version) and reused.

Search: ``LuceneSearcher.batch_search`` with ``threads`` threads and BM25 ``k1``/``b``
(:data:`PRESETS`: ``topiocqa`` 0.9/0.4 and ``qrecc`` 0.82/0.68 as ConvSearch-R1; ``msmarco``
0.82/0.68 as Anserini's tuned MS MARCO passage run; default Pyserini's 0.9/0.4). Every query first
goes through the shared query budget (:mod:`vdr.retrieve.budget`, 512 whitespace tokens by default,
oldest tokens dropped first). A query the engine still fails on (Lucene's ``maxClauseCount`` of
1,024 with a budget set above it, say) is searched once more alone; if it fails again it is a
COUNTED failure (``report["searches"][variant]["failed"]``, id and Java message) with an empty
ranking -- never missing from the run, which batch mode would otherwise do silently.

Scores are Pyserini's hit scores as it returns them, widened to float: Anserini's searcher ranks
by BM25 score, then by collection docid ascending (its ``BREAK_SCORE_TIES_BY_DOCID`` sort), and its
``ScoreTiesAdjusterReranker`` rounds each score to 4 decimals and subtracts 1e-6 per place among
equal rounded scores, so that tied documents keep that docid order in every tool that sorts by
score (seen with Pyserini 1.6.0: three documents of BM25 0.3891 return 0.3891, 0.389099 and
0.389098, docids ascending). The ``depth`` cut therefore keeps the smallest docids of a tie.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..errors import InputError, VdrError
from ..types import Run, to_id
from ._common import check_depth, check_texts, version_of
from .base import BackendUnavailable, BuildContext, cache_path, content_digest, fingerprint, iter_corpus_texts, new_report, read_json, search_inputs, write_cache_dir
from .options import PyseriniOptions, options_from
from .budget import apply_budget, budget_config, check_max_tokens

__all__ = ["PyseriniBackend", "PRESETS", "MIN_JAVA", "find_java", "unavailable_reason", "build"]

#: Named BM25 parameter sets ``(k1, b)``: ConvSearch-R1's TopiOCQA and QReCC settings, Anserini's
#: tuned MS MARCO passage setting, and Pyserini's own default.
PRESETS: dict[str, tuple[float, float]] = {
    "topiocqa": (0.9, 0.4),
    "qrecc": (0.82, 0.68),
    "msmarco": (0.82, 0.68),
    "pyserini": (0.9, 0.4),
}
#: Oldest Java major version Anserini 1.x (Pyserini >= 1) runs on.
MIN_JAVA = 21
#: Where JDKs are looked for when neither ``JAVA_HOME`` nor the ``java`` on ``PATH`` is new enough.
JVM_DIRS = (Path("/usr/lib/jvm"), Path("/usr/local/lib/jvm"), Path("/opt/java"))
_STEMMERS = ("porter", "krovetz", "none")
_CACHE_FORMAT = 1
_META = "vdr-pyserini.json"
_SHARD = 100_000  # passages per JsonCollection file (Anserini indexes one file per thread)


# --------------------------------------------------------------------------------------------- Java


def _java_major(home: Path) -> int | None:
    """Major version of the JDK/JRE in ``home`` (its ``release`` file, else ``bin/java -version``)."""
    if not (home / "bin" / "java").is_file():
        return None
    try:
        text = (home / "release").read_text(encoding="utf-8", errors="replace")
        m = re.search(r'JAVA_VERSION="(\d+)(?:\.(\d+))?', text)
    except OSError:
        try:
            text = subprocess.run([str(home / "bin" / "java"), "-version"], capture_output=True, text=True, timeout=30).stderr
        except (OSError, subprocess.SubprocessError):
            return None
        m = re.search(r'version "(\d+)(?:\.(\d+))?', text)
    if not m:
        return None
    major = int(m.group(1))
    return int(m.group(2) or 0) if major == 1 else major  # "1.8" -> 8


def find_java(min_major: int = MIN_JAVA) -> tuple[Path, int] | None:
    """A Java home of version >= ``min_major``: ``$JAVA_HOME``, then the ``java`` on ``PATH``, then
    the newest JDK under :data:`JVM_DIRS` (e.g. ``/usr/lib/jvm/temurin-25-jdk-amd64`` beside a
    default Java 17).

    Returns:
        ``(java_home, major_version)``, or ``None`` when no Java that new is found.
    """
    candidates: list[Path] = []
    if os.environ.get("JAVA_HOME"):
        candidates.append(Path(os.environ["JAVA_HOME"]))
    on_path = shutil.which("java")
    if on_path:
        candidates.append(Path(os.path.realpath(on_path)).parent.parent)
    found = []
    for root in JVM_DIRS:
        if root.is_dir():
            for home in sorted(root.iterdir()):
                if home.is_dir() and not home.is_symlink():
                    found.append(home)
    for home in candidates:
        major = _java_major(home)
        if major is not None and major >= min_major:
            return home, major
    best = max(((m, h) for h in found if (m := _java_major(h)) is not None), default=None, key=lambda x: x[0])
    return (best[1], best[0]) if best and best[0] >= min_major else None


def unavailable_reason() -> str | None:
    """Why the backend cannot run here (Pyserini, pyjnius or Java 21+ missing), or ``None``.

    Cheap: nothing is imported and no JVM is started.
    """
    missing = [m for m in ("pyserini", "jnius") if importlib.util.find_spec(m) is None]
    if missing:
        return f"the pyserini backend needs {' and '.join(missing)}: pip install 'vdr[pyserini]'"
    if find_java() is None:
        return (f"the pyserini backend needs Java {MIN_JAVA}+ (Anserini 1.x); none found in JAVA_HOME, on PATH "
                f"or under {', '.join(map(str, JVM_DIRS))}: install a JDK {MIN_JAVA}+ and set JAVA_HOME")
    return None


def _java_env() -> dict[str, str]:
    """The environment for the JVM: ``JAVA_HOME`` and ``PATH`` pointing at a Java 21+."""
    home, _ = find_java()  # type: ignore[misc]  (checked by unavailable_reason)
    env = dict(os.environ)
    env["JAVA_HOME"] = str(home)
    env["PATH"] = str(home / "bin") + os.pathsep + env.get("PATH", "")
    return env


@contextmanager
def _pyserini_import_env():
    """Pyserini 1.x creates an OpenAI client when ``pyserini.encode`` is imported (its dense encoders),
    which recent ``openai`` versions refuse without an API key. Set a placeholder key for the import
    only (never used: vdr makes no OpenAI call through Pyserini) and restore the environment."""
    unset = "OPENAI_API_KEY" not in os.environ
    if unset:
        os.environ["OPENAI_API_KEY"] = "unused-placeholder-for-pyserini-import"
    try:
        yield
    finally:
        if unset:
            os.environ.pop("OPENAI_API_KEY", None)


def _load_searcher_class():
    """``pyserini.search.lucene.LuceneSearcher``, with the JVM pointed at a Java 21+.

    Raises:
        BackendUnavailable: Pyserini, pyjnius or Java 21+ is missing, or Pyserini cannot be imported.
    """
    reason = unavailable_reason()
    if reason:
        raise BackendUnavailable(reason)
    env = _java_env()
    if "jnius" not in sys.modules:  # the JVM starts on jnius' import: JAVA_HOME must be set before
        os.environ["JAVA_HOME"] = env["JAVA_HOME"]
        os.environ["PATH"] = env["PATH"]
    try:
        with _pyserini_import_env():
            from pyserini.search.lucene import LuceneSearcher
    except Exception as e:  # a broken install or a JVM that will not start: say what
        raise BackendUnavailable(f"the pyserini backend cannot load Pyserini: {type(e).__name__}: {e}") from None
    return LuceneSearcher


# --------------------------------------------------------------------------------------------- backend


class PyseriniBackend:
    """BM25 through Pyserini's ``LuceneSearcher``: a :class:`~vdr.retrieve.base.Backend`.

    Args (the fields of :class:`~vdr.retrieve.options.PyseriniOptions`, given as ``options`` or as
    keywords, plus ``cache_dir`` and ``name``):
        index_dir: an existing Lucene index (e.g. Pyserini's prebuilt TopiOCQA / QReCC indexes);
            ``None`` (default): build one from the corpus in :meth:`index`.
        preset: a name in :data:`PRESETS` (``topiocqa``, ``qrecc``, ``msmarco``, ``pyserini``);
            exclusive with ``k1``/``b``.
        k1: BM25 term-frequency saturation, >= 0 (default 0.9, Pyserini's).
        b: BM25 length normalisation in [0, 1] (default 0.4, Pyserini's).
        threads: ``batch_search`` threads (default 2).
        max_query_tokens: the shared query budget in whitespace tokens (default 512; ``None``: none).
        stemmer: analyzer stemmer, ``"porter"`` (default, Lucene's English analyzer), ``"krovetz"``
            or ``"none"``; used to build the index and to analyze queries (so it must match an
            existing index).
        keep_stopwords: keep Lucene's English stopwords (default False).
        index_threads: threads of ``pyserini.index.lucene`` (default: CPU count, at most 8).
        cache_dir: root of the index cache (``cache_dir/pyserini/<fingerprint>/``); ``None``: the
            built index lives in a temporary folder removed with the backend.
        name: the backend's name in results (default ``"pyserini"``).

    Attributes:
        config: parameters, analyzer, query budget, Pyserini / Java versions (JSON-ready).
        report: ``page_forward_passes`` 0, ``cache``, ``index`` (``num_docs`` in the Lucene index,
            ``num_corpus``, ``num_empty`` passages written, ``build_s``), ``searches`` per variant
            (see :meth:`search`).

    Raises:
        InputError: an unknown preset, preset together with ``k1``/``b``, a value out of range, an
            unknown stemmer, or an ``index_dir`` that is not a Lucene index.
    """

    def __init__(self, options: PyseriniOptions | None = None, *, cache_dir: str | Path | None = None, name: str = "pyserini",
                 **kwargs: Any) -> None:
        o = options_from(PyseriniOptions, options, kwargs, backend=name)
        self.options = o
        index_dir, preset, k1, b, threads = o.index_dir, o.preset, o.k1, o.b, o.threads
        max_query_tokens, stemmer, keep_stopwords, index_threads = o.max_query_tokens, o.stemmer, o.keep_stopwords, o.index_threads
        k1, b = _parameters(preset, k1, b)
        if stemmer not in _STEMMERS:
            raise InputError(f"unknown pyserini stemmer {stemmer!r}; known: {', '.join(_STEMMERS)}")
        self.threads = check_depth(threads, "threads")
        self.index_threads = check_depth(index_threads or min(8, os.cpu_count() or 1), "index_threads")
        self.max_query_tokens = check_max_tokens(max_query_tokens)
        self.index_dir = None if index_dir is None else _check_index_dir(Path(index_dir))
        self.stemmer, self.keep_stopwords = stemmer, bool(keep_stopwords)
        self.cache_dir = None if cache_dir is None else Path(cache_dir)
        self.name = name
        self.report: dict = new_report()
        self._searcher = None
        self._tmp: tempfile.TemporaryDirectory | None = None
        self.config: dict = {
            "backend": "pyserini",
            "scorer": "Lucene BM25 (Anserini LuceneSearcher)",
            "preset": preset,
            "k1": k1,
            "b": b,
            "index_dir": None if self.index_dir is None else str(self.index_dir),
            "analyzer": {"language": "en", "stemmer": stemmer, "stopwords": "kept" if self.keep_stopwords else "Lucene English stop set removed"},
            "query_budget": budget_config(self.max_query_tokens),
            "threads": self.threads,
            "failed_queries": "searched again alone; a second failure is counted with an empty ranking",
            "tie_break": "Anserini's: score, then docid ascending; scores rounded to 4 decimals, ties spread by 1e-6",
            "versions": {"pyserini": version_of("pyserini"), "pyjnius": version_of("pyjnius"), "java": None},
        }

    # ------------------------------------------------------------------ index

    def index(self, corpus=None) -> None:
        """Open ``index_dir``, or build (or load from the cache) the index of ``corpus``.

        Args:
            corpus: a page or passage corpus (read through :func:`iter_corpus_texts`) or
                ``{id: text}``; may be ``None`` with ``index_dir``.

        Raises:
            BackendUnavailable: Pyserini, pyjnius or Java 21+ missing.
            InputError: no corpus and no ``index_dir``; bad ids or texts in a mapping corpus.
            VdrError: ``pyserini.index.lucene`` failed (its output tail is in the message).
        """
        Searcher = _load_searcher_class()
        self.config["versions"]["java"] = find_java()[1]  # type: ignore[index]
        if self.index_dir is not None:
            folder, stats = self.index_dir, {"source": "existing index"}
        elif corpus is None:
            raise InputError("PyseriniBackend.index: give a corpus, or index_dir= an existing Lucene index")
        else:
            folder, stats = self._built_index(corpus)
        try:
            searcher = Searcher(str(folder))
            searcher.set_bm25(self.config["k1"], self.config["b"])
            if self.stemmer != "porter" or self.keep_stopwords:
                from pyserini.analysis import get_lucene_analyzer

                searcher.set_analyzer(get_lucene_analyzer(stemmer=self.stemmer, stopwords=not self.keep_stopwords))
        except Exception as e:  # a Java exception: a folder Lucene cannot read
            raise InputError(f"{folder}: Lucene cannot open the index: {type(e).__name__}: {e}", path=folder) from None
        self._searcher = searcher
        stats["num_docs"] = int(searcher.num_docs)
        n = len(corpus) if corpus is not None and hasattr(corpus, "__len__") else None
        stats["num_corpus"] = n
        if n is not None and n != stats["num_docs"] and self.index_dir is not None:
            stats["warning"] = f"the index holds {stats['num_docs']} documents, the corpus {n}"
        self.report["index"] = stats

    def _built_index(self, corpus) -> tuple[Path, dict]:
        """The folder of the index built from ``corpus`` (cache hit, or built now) and its stats."""
        if isinstance(corpus, Mapping) and not hasattr(corpus, "iter_texts"):  # {id: text}, not a Corpus of pages
            corpus = check_texts(corpus, "corpus", allow_empty=True)
        fp = getattr(corpus, "fingerprint", None) or content_digest(
            (i, t) for ids, texts in iter_corpus_texts(corpus) for i, t in zip(ids, texts))
        key = fingerprint("pyserini", _CACHE_FORMAT, fp, self.stemmer, self.keep_stopwords, self.config["versions"]["pyserini"])
        final = cache_path(self.cache_dir, "pyserini", key)
        if final is not None:
            meta = read_json(final / _META)
            if meta is not None and meta.get("format") == _CACHE_FORMAT:
                self.report["cache"] = {"hit": True, "path": str(final)}
                return final, meta["stats"]
        stats: dict = {}
        fill = lambda folder: self._build(corpus, folder, stats)  # noqa: E731
        if final is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="vdr-pyserini-")
            folder = Path(self._tmp.name)
            fill(folder)
        else:
            folder = write_cache_dir(final, fill)
        self.report["cache"] = {"hit": False if final is not None else None, "path": None if final is None else str(final)}
        return folder, stats

    def _build(self, corpus, folder: Path, stats: dict) -> None:
        """Write the JsonCollection shards and run ``python -m pyserini.index.lucene`` into ``folder``."""
        t0 = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="vdr-jsoncollection-") as src:
            n, empty = write_json_collection(corpus, Path(src))
            cmd = [sys.executable, "-m", "pyserini.index.lucene", "--collection", "JsonCollection", "--input", src,
                   "--index", str(folder), "--generator", "DefaultLuceneDocumentGenerator",
                   "--threads", str(self.index_threads), "--stemmer", self.stemmer]
            if self.keep_stopwords:
                cmd.append("--keepStopwords")
            run_indexer(cmd)
        stats.update({"source": "built by pyserini.index.lucene", "num_written": n, "num_empty": empty,
                      "build_s": round(time.perf_counter() - t0, 3)})
        (folder / _META).write_text(json.dumps({"format": _CACHE_FORMAT, "stats": stats}), encoding="utf-8")

    # ------------------------------------------------------------------ search

    def search(self, queries, depth: int = 100) -> Run:
        """The ``depth`` best passages of every query (``batch_search``, ``threads`` threads).

        Args:
            queries: a :class:`~vdr.types.QuerySet` (one variant) or ``{query_id: text}``
                (non-empty texts).
            depth: hits per query (>= 1).

        Returns:
            :class:`~vdr.types.Run` with EVERY query id: a failed query and a query without hits
            have an empty ranking. Records in ``report["searches"][variant]``: ``num_queries``,
            ``depth``, the budget stats (:func:`~vdr.retrieve.budget.apply_budget`),
            ``num_failed`` and ``failed`` (``{id: Java message}``, first 50), ``num_queries_without_hits``
            and ``queries_without_hits`` (first 50).

        Raises:
            InputError: :meth:`index` was not called, bad queries or ``depth``.
        """
        if self._searcher is None:
            raise InputError("PyseriniBackend.search: call index(corpus) first")
        qs, variant, depth = search_inputs(queries, depth)
        fitted, budget = apply_budget(qs, self.max_query_tokens)
        hits = self._batch(fitted, depth)
        failed: dict[str, str] = {}
        for qid in [q for q in fitted if q not in hits]:  # batch mode drops a query that throws
            try:
                hits[qid] = self._searcher.search(fitted[qid], k=depth)
            except Exception as e:  # the Java exception (e.g. TooManyClauses): counted, empty ranking
                failed[qid] = _first_line(e)
                hits[qid] = []
        out = {qid: _ranking(hits[qid]) for qid in fitted}
        no_hits = [q for q in fitted if not out[q] and q not in failed]
        self.report["searches"][variant] = {
            "num_queries": len(fitted), "depth": depth, **budget,
            "num_failed": len(failed), "failed": dict(list(failed.items())[:50]),
            "num_queries_without_hits": len(no_hits), "queries_without_hits": no_hits[:50],
        }
        return Run.from_checked(out, self.name)

    def _batch(self, fitted: dict[str, str], depth: int) -> dict:
        """``batch_search`` of every query; ``{}`` when the whole batch throws (each is retried alone)."""
        try:
            res = self._searcher.batch_search(list(fitted.values()), list(fitted), k=depth, threads=self.threads)
        except Exception:  # noqa: BLE001 - a Java exception in the batch: every query is retried alone
            return {}
        return {str(q): h for q, h in res.items()}

    def close(self) -> None:
        """Close the searcher and remove a temporary index."""
        if self._searcher is not None:
            try:
                self._searcher.close()
            except Exception:  # noqa: BLE001 - closing twice or a JVM already gone
                pass
            self._searcher = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __repr__(self) -> str:
        return f"PyseriniBackend(k1={self.config['k1']}, b={self.config['b']}, index={self.config['index_dir'] or 'built'})"


def _first_line(e: Exception) -> str:
    """A Java exception's message without its stack trace (at most 300 characters)."""
    lines = [ln for ln in str(e).splitlines() if ln.strip()]
    msg = lines[0] if lines else type(e).__name__
    return msg.replace("JVM exception occurred: ", "")[:300]


def _ranking(hits) -> dict[str, float]:
    """``{docid: score}`` of Pyserini hits (its scores, see the module docstring, widened to float; first hit wins a dup)."""
    out: dict[str, float] = {}
    for h in hits:
        out.setdefault(str(h.docid), float(h.score))
    return out


def _parameters(preset: str | None, k1: float | None, b: float | None) -> tuple[float, float]:
    """``(k1, b)`` from a preset or the explicit values (Pyserini's 0.9 / 0.4 by default).

    Raises:
        InputError: an unknown preset, a preset with ``k1``/``b``, a value out of range.
    """
    if preset is not None:
        if preset not in PRESETS:
            raise InputError(f"unknown BM25 preset {preset!r}; known: {', '.join(PRESETS)}")
        if k1 is not None or b is not None:
            raise InputError(f"give either preset={preset!r} or k1/b, not both")
        return PRESETS[preset]
    k1 = 0.9 if k1 is None else k1
    b = 0.4 if b is None else b
    for pname, v, hi in (("k1", k1, float("inf")), ("b", b, 1.0)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not (0.0 <= float(v) <= hi):
            raise InputError(f"BM25 {pname} must be a number in [0, {hi}], got {v!r}")
    return float(k1), float(b)


def _check_index_dir(path: Path) -> Path:
    """``path`` if it looks like a Lucene index (a ``segments_N`` file).

    Raises:
        InputError: missing folder, or no ``segments_*`` file in it.
    """
    if not path.is_dir():
        raise InputError(f"{path}: no such index folder", path=path)
    if not any(p.name.startswith("segments_") for p in path.iterdir()):
        raise InputError(f"{path}: not a Lucene index (no segments_N file)", path=path)
    return path.resolve()


def write_json_collection(corpus, folder: Path, shard: int = _SHARD) -> tuple[int, int]:
    """Write ``corpus`` as Pyserini ``JsonCollection`` shards ``folder/docs-NNNNN.jsonl`` of at
    most ``shard`` lines ``{"id", "contents"}`` (streamed, never the whole corpus in memory).

    Returns:
        ``(passages written, passages with empty or whitespace-only text)``; Anserini skips the
        empty ones (they could never match a query).

    Raises:
        InputError: an id that is not a str or integer.
    """
    n = empty = 0
    fh = None
    try:
        for ids, texts in iter_corpus_texts(corpus):
            for i, t in zip(ids, texts):
                if n % shard == 0:
                    if fh is not None:
                        fh.close()
                    fh = open(folder / f"docs-{n // shard:05d}.jsonl", "w", encoding="utf-8")
                fh.write(json.dumps({"id": to_id(i, what="corpus id"), "contents": t}, ensure_ascii=False) + "\n")
                n += 1
                empty += not t.strip()
    finally:
        if fh is not None:
            fh.close()
    return n, empty


def run_indexer(cmd: list[str]) -> None:
    """Run ``python -m pyserini.index.lucene ...`` with a Java 21+ (output kept for errors).

    Raises:
        VdrError: a non-zero exit (the last 2,000 characters of its output in the message).
    """
    env = _java_env()
    spec = importlib.util.find_spec("pyserini")
    if spec is not None and spec.origin:  # the child finds Pyserini where this process does
        root = str(Path(spec.origin).parent.parent)
        env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("OPENAI_API_KEY", "unused-placeholder-for-pyserini-import")
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr)[-2000:]
        raise VdrError(f"pyserini.index.lucene failed (exit {proc.returncode}): {tail}")


def build(ctx: BuildContext) -> PyseriniBackend:
    """Registry factory: ``PyseriniBackend(ctx.options)`` (checked :class:`PyseriniOptions`) with the
    experiment's cache folder.

    Raises:
        InputError: a bad value.
    """
    return PyseriniBackend(ctx.options, cache_dir=ctx.cache_dir, name=ctx.name)


build.Options = PyseriniOptions
