"""Text retrieval at collection scale (issue 15, Targets): vdr's BM25 vs Pyserini, and dense search memory.

Usage::

    python benchmarks/textscale.py                     # 1,000,000 passages (several minutes)
    python benchmarks/textscale.py --passages 100000   # smaller

What it does (fixed seed; the last line printed is ONE JSON object):

1. A synthetic collection: ``--passages`` passages of ~60 words (40-80, uniform) drawn from a
   50,000-word vocabulary with Zipf frequencies (exponent 1.0); the 33 most frequent words are
   Lucene's English stop set, the others are consonant-vowel pseudo-words that the Porter stemmer
   leaves alone. It is streamed (``iter_texts`` of the corpus contract), regenerated on demand in
   fixed chunks, never held in memory. ``--queries`` queries (default 2,500) of 3-5 content words.
2. vdr's BM25 (:class:`vdr.retrieve.lexical.BM25Backend`, k1 0.9 / b 0.4, the ``lucene`` analyzer
   when the backend has it) in a CHILD process: build time and peak RSS of the build
   (``ru_maxrss`` after ``index``), then queries/s for top 100.
3. When Pyserini + Java 21+ are present (:func:`vdr.retrieve.pyserini.unavailable_reason`), the same
   with :class:`vdr.retrieve.pyserini.PyseriniBackend` in another child process
   (``python -m pyserini.index.lucene`` on a JsonCollection, ``batch_search`` with 2 threads), and
   ``top100_overlap_vs_pyserini``: mean over queries of ``|A & B| / max(|A|, |B|)`` of the two
   top-100 sets (1 when both are empty), and ``top10_equal_share_vs_pyserini``: the share of
   queries whose first 10 ids are Pyserini's, in the same order (each run in its ranked order:
   score desc, then corpus id desc, as metrics see it).
4. Dense search memory: ``--passages`` x 384 float16 unit vectors in an on-disk ``.npy`` (memory
   mapped), exact inner-product search of the queries, top 100, in a child process: FAISS
   ``IndexFlatIP`` (float32 copy, added in chunks) when faiss is importable, else NumPy in chunks
   with a running top 100. Reports its peak RSS (``dense_search_peak_rss_gib``).

Both searches are timed after an untimed warm-up search of 50 queries (the JVM's JIT, caches).
Build times include generating the synthetic texts (both engines read the same stream); the
Pyserini build includes writing the JsonCollection and starting the indexer's JVM, not importing
Pyserini in the parent. The machine load (``os.getloadavg``) is recorded: on a shared machine the
timings vary.

Measured (2026-11-30, 2 shared CPU cores at load ~7, 23 GB RAM; BM25Backend of the ``lexical``
branch with ``analyzer="lucene"``; Pyserini 1.6.0 / Anserini 1.7.1 on Java 25, Python 3.11)::

    passages 1,000,000: bm25_build_s 377, bm25_build_peak_rss_gib 1.99, bm25_queries_per_s 90.6,
    pyserini_build_s 272, pyserini_queries_per_s 38.8, top100_overlap_vs_pyserini 0.980,
    dense_search_peak_rss_gib 2.27 (faiss IndexFlatIP, float32 copy; 125 s for 2,500 queries)
    passages 100,000:   bm25 45 s / 0.36 GiB / 466 q/s; pyserini 69 s / 41 q/s; overlap 0.984; dense 0.51 GiB

Measured (2026-12-01, same machine at load ~8; issue 24.2: the ``lucene`` analyzer token for token
as Lucene's, Lucene's BM25Similarity with the one-byte length norm, boosts for repeated terms,
float sums and Anserini's tie order; Pyserini 1.6.0 / Lucene 9.9.1 on Java 25; ``--passages 10000
--queries 1000 --no-dense``, the largest run that fits this shared machine's time limit)::

    passages 10,000: bm25 10.1 s / 0.15 GiB / 420 q/s; pyserini 44.8 s / 47.5 q/s;
    top100_overlap_vs_pyserini 1.0, top10_equal_share_vs_pyserini 1.0

The synthetic vocabulary hides the analyzer: its pseudo-words are consonant-vowel syllables of
``a o u`` (no ``e``, ``i``, ``y``, ``s``, no punctuation), so tokenization is whitespace splitting
and the only Porter rule that touches them (step 4's ``-ou`` when m > 1) is the same in every Porter
variant. The 2% gap of the 2026-11-30 run came from the scorer (exact vs one-byte lengths, float
sums, tie order); the analyzer's fidelity is measured by ``tests/test_lucene_analyzer.py`` against
Lucene's own output instead.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

#: Lucene's English stop set (``EnglishAnalyzer.ENGLISH_STOP_WORDS_SET``), the most frequent words here.
LUCENE_STOP = ("a an and are as at be but by for if in into is it no not of on or such that the their then "
               "there these they this to was will with").split()
VOCAB = 50_000
ZIPF = 1.0
CHUNK = 10_000  # passages generated per chunk (each chunk has its own seeded generator)
DEPTH = 100
K1, B = 0.9, 0.4


# --------------------------------------------------------------------------------------------- data


def vocabulary(seed: int) -> np.ndarray:
    """``VOCAB`` words, most frequent first: Lucene's stop set, then unique CV pseudo-words (object array)."""
    rng = np.random.default_rng([seed, 0])
    cons, vows = list("bdfgklmnprtvz"), list("aou")
    words, seen = list(LUCENE_STOP), set(LUCENE_STOP)
    while len(words) < VOCAB:
        n = int(rng.integers(2, 5))
        w = "".join(cons[int(rng.integers(len(cons)))] + vows[int(rng.integers(len(vows)))] for _ in range(n))
        if w not in seen:
            seen.add(w)
            words.append(w)
    return np.array(words, dtype=object)


def zipf_cdf() -> np.ndarray:
    """Cumulative Zipf probabilities of ranks 1..VOCAB, float64 ``(VOCAB,)``."""
    p = 1.0 / np.arange(1, VOCAB + 1) ** ZIPF
    return np.cumsum(p / p.sum())


class SyntheticCorpus:
    """A generated passage collection behind the streaming corpus contract (``iter_texts``,
    ``__len__``, ``fingerprint``); chunk ``c`` is regenerated from ``default_rng([seed, 1, c])``."""

    kind = "passage"

    def __init__(self, n: int, seed: int) -> None:
        self.n, self.seed = n, seed
        self.vocab, self.cdf = vocabulary(seed), zipf_cdf()
        self.fingerprint = hashlib.sha256(f"textscale:{n}:{seed}:{VOCAB}:{ZIPF}:{CHUNK}".encode()).hexdigest()

    def __len__(self) -> int:
        return self.n

    def chunk(self, c: int) -> tuple[list[str], list[str]]:
        """Ids ``p{index}`` and texts of passages ``c*CHUNK`` .. (at most CHUNK)."""
        start, stop = c * CHUNK, min(self.n, (c + 1) * CHUNK)
        rng = np.random.default_rng([self.seed, 1, c])
        lengths = rng.integers(40, 81, size=stop - start)
        words = self.vocab[np.searchsorted(self.cdf, rng.random(int(lengths.sum())))]
        ends = np.cumsum(lengths)
        texts = [" ".join(words[e - n : e]) for e, n in zip(ends, lengths)]
        return [f"p{i}" for i in range(start, stop)], texts

    def ids(self) -> list[str]:
        """Passage ids in order."""
        return [f"p{i}" for i in range(self.n)]

    def texts(self) -> dict[str, str]:
        """``{id: text}`` of every passage (what a backend without streaming reads; large)."""
        return {i: t for ids, texts in self.iter_texts() for i, t in zip(ids, texts)}

    def iter_texts(self, batch_size: int = 8192):
        """``(ids, texts)`` batches of at most ``batch_size`` passages, in id order."""
        ids: list[str] = []
        texts: list[str] = []
        for c in range((self.n + CHUNK - 1) // CHUNK):
            ci, ct = self.chunk(c)
            ids += ci
            texts += ct
            while len(ids) >= batch_size:
                yield ids[:batch_size], texts[:batch_size]
                ids, texts = ids[batch_size:], texts[batch_size:]
        if ids:
            yield ids, texts


def make_queries(n: int, seed: int) -> dict[str, str]:
    """``n`` queries of 3-5 content words (Zipf ranks above the stop set), ids ``q0`` ..."""
    vocab, cdf = vocabulary(seed), zipf_cdf()
    rng = np.random.default_rng([seed, 2])
    out = {}
    for i in range(n):
        ranks: list[int] = []
        k = int(rng.integers(3, 6))
        while len(ranks) < k:
            r = int(np.searchsorted(cdf, rng.random()))
            if r >= 100 and r not in ranks:
                ranks.append(r)
        out[f"q{i}"] = " ".join(vocab[ranks])
    return out


# --------------------------------------------------------------------------------------------- children


def _peak_rss_gib() -> float:
    """This process' peak resident set size (``ru_maxrss``, KiB on Linux) in GiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def _warmup(queries: dict[str, str]) -> dict[str, str]:
    """The first 50 queries under other ids: searched once, untimed, before the timed search (JIT, caches)."""
    return {f"warmup-{q}": t for q, t in list(queries.items())[:50]}


def child_bm25(args) -> dict:
    """Build vdr's BM25 and search; returns timings, peak RSS and the top-100 id lists."""
    from vdr.retrieve.lexical import BM25Backend

    backend = BM25Backend(k1=K1, b=B, analyzer="lucene")
    corpus, queries = SyntheticCorpus(args.passages, args.seed), make_queries(args.queries, args.seed)
    t0 = time.perf_counter()
    backend.index(corpus)
    build_s, build_rss = time.perf_counter() - t0, _peak_rss_gib()
    backend.search(_warmup(queries), DEPTH)
    t0 = time.perf_counter()
    run = backend.search(queries, DEPTH)
    search_s = time.perf_counter() - t0
    return {"build_s": build_s, "build_peak_rss_gib": build_rss, "queries_per_s": len(queries) / search_s,
            "analyzer": "lucene", "run": ranked_ids(run, queries)}


def ranked_ids(run, queries) -> dict[str, list[str]]:
    """``{query id: corpus ids in the run's ranked order}`` (score desc, corpus id desc: trec_eval's)."""
    return {q: [d for d, _ in run.ranked(q)] for q in queries}


def child_pyserini(args) -> dict:
    """Build the Lucene index with Pyserini and batch-search with 2 threads."""
    from vdr.retrieve import pyserini as ps

    ps._load_searcher_class()  # import Pyserini and start the JVM outside the timings
    backend = ps.PyseriniBackend(k1=K1, b=B, threads=2, index_threads=2)
    corpus, queries = SyntheticCorpus(args.passages, args.seed), make_queries(args.queries, args.seed)
    t0 = time.perf_counter()
    backend.index(corpus)
    build_s = time.perf_counter() - t0
    backend.search(_warmup(queries), DEPTH)
    t0 = time.perf_counter()
    run = backend.search(queries, DEPTH)
    search_s = time.perf_counter() - t0
    failed = backend.report["searches"]["original"]["num_failed"]
    backend.close()
    return {"build_s": build_s, "queries_per_s": len(queries) / search_s, "failed": failed,
            "indexer_peak_rss_gib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20,
            "run": ranked_ids(run, queries)}


def child_dense(args) -> dict:
    """Exact inner-product top 100 over ``passages`` x 384 float16 vectors memory-mapped from disk."""
    vecs = np.load(args.vectors, mmap_mode="r")
    rng = np.random.default_rng([args.seed, 4])
    q = rng.standard_normal((args.queries, vecs.shape[1])).astype(np.float32)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    step = 65_536
    t0 = time.perf_counter()
    try:
        import faiss

        index = faiss.IndexFlatIP(vecs.shape[1])
        for s in range(0, vecs.shape[0], step):
            index.add(np.ascontiguousarray(vecs[s : s + step], dtype=np.float32))
        _, ids = index.search(q, DEPTH)
        engine = f"faiss {faiss.__version__} IndexFlatIP (float32 copy)"
    except ImportError:
        best_s = np.full((len(q), 0), -np.inf, dtype=np.float32)
        best_i = np.zeros((len(q), 0), dtype=np.int64)
        for s in range(0, vecs.shape[0], step):
            sc = q @ np.asarray(vecs[s : s + step], dtype=np.float32).T
            cs, ci = np.concatenate([best_s, sc], 1), np.concatenate([best_i, np.broadcast_to(np.arange(s, s + sc.shape[1]), sc.shape)], 1)
            keep = np.argpartition(-cs, min(DEPTH, cs.shape[1] - 1), axis=1)[:, :DEPTH]
            best_s, best_i = np.take_along_axis(cs, keep, 1), np.take_along_axis(ci, keep, 1)
        ids, engine = best_i, "numpy chunked (float16 memmap, float32 blocks of 65,536)"
    return {"search_s": time.perf_counter() - t0, "peak_rss_gib": _peak_rss_gib(), "engine": engine, "shape": list(ids.shape)}


def write_vectors(path: Path, n: int, seed: int, dim: int = 384) -> None:
    """``n`` x ``dim`` float16 unit vectors into the ``.npy`` at ``path``, written in chunks."""
    arr = np.lib.format.open_memmap(path, mode="w+", dtype=np.float16, shape=(n, dim))
    for c, s in enumerate(range(0, n, 100_000)):
        v = np.random.default_rng([seed, 3, c]).standard_normal((min(100_000, n - s), dim)).astype(np.float32)
        arr[s : s + len(v)] = v / np.linalg.norm(v, axis=1, keepdims=True)
    arr.flush()
    del arr


# --------------------------------------------------------------------------------------------- parent

CHILDREN = {"bm25": child_bm25, "pyserini": child_pyserini, "dense": child_dense}


def run_child(kind: str, args, out: Path, extra: list[str] = ()) -> dict:
    """Run ``kind`` in a fresh Python process (its own peak RSS); its result comes back as JSON."""
    cmd = [sys.executable, __file__, "--child", kind, "--passages", str(args.passages), "--queries", str(args.queries),
           "--seed", str(args.seed), "--result", str(out), *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"textscale: the {kind} child failed (exit {proc.returncode}):\n{(proc.stdout + proc.stderr)[-3000:]}")
    return json.loads(out.read_text(encoding="utf-8"))


def overlap(a: dict[str, list[str]], b: dict[str, list[str]]) -> float:
    """Mean over queries of ``|A & B| / max(|A|, |B|)`` (1 when both are empty)."""
    vals = []
    for q in a:
        x, y = set(a[q]), set(b.get(q, ()))
        vals.append(1.0 if not x and not y else len(x & y) / max(len(x), len(y)))
    return float(np.mean(vals))


def top_equal_share(a: dict[str, list[str]], b: dict[str, list[str]], k: int = 10) -> float:
    """Share of the queries of ``a`` whose first ``k`` ids equal ``b``'s, in the same order."""
    return float(np.mean([a[q][:k] == b.get(q, [])[:k] for q in a]))


def main(argv: list[str] | None = None) -> dict:
    """Parse arguments; run the children; print and return the one-line JSON result."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--passages", type=int, default=1_000_000)
    ap.add_argument("--queries", type=int, default=2_500)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-pyserini", action="store_true", help="skip Pyserini even when it is installed")
    ap.add_argument("--no-dense", action="store_true", help="skip the dense search measurement")
    ap.add_argument("--child", choices=sorted(CHILDREN), help=argparse.SUPPRESS)
    ap.add_argument("--result", help=argparse.SUPPRESS)
    ap.add_argument("--vectors", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        res = CHILDREN[args.child](args)
        Path(args.result).write_text(json.dumps(res), encoding="utf-8")
        return res
    from vdr.retrieve.pyserini import unavailable_reason

    out: dict = {"benchmark": "textscale", "passages": args.passages, "queries": args.queries, "depth": DEPTH,
                 "k1": K1, "b": B, "cpus": os.cpu_count(), "load_avg_1m_start": round(os.getloadavg()[0], 2)}
    with tempfile.TemporaryDirectory(prefix="vdr-textscale-") as tmp:
        tmp = Path(tmp)
        bm = run_child("bm25", args, tmp / "bm25.json")
        out.update(bm25_build_s=round(bm["build_s"], 2), bm25_build_peak_rss_gib=round(bm["build_peak_rss_gib"], 3),
                   bm25_queries_per_s=round(bm["queries_per_s"], 1), bm25_analyzer=bm["analyzer"])
        reason = "skipped (--no-pyserini)" if args.no_pyserini else unavailable_reason()
        if reason is None:
            ps = run_child("pyserini", args, tmp / "pyserini.json")
            out.update(pyserini_build_s=round(ps["build_s"], 2), pyserini_queries_per_s=round(ps["queries_per_s"], 1),
                       pyserini_failed_queries=ps["failed"], pyserini_indexer_peak_rss_gib=round(ps["indexer_peak_rss_gib"], 3),
                       top100_overlap_vs_pyserini=round(overlap(bm["run"], ps["run"]), 4),
                       top10_equal_share_vs_pyserini=round(top_equal_share(bm["run"], ps["run"]), 4))
        else:
            out.update(pyserini_build_s=None, pyserini_queries_per_s=None, top100_overlap_vs_pyserini=None,
                       top10_equal_share_vs_pyserini=None, pyserini_skipped=reason)
        if not args.no_dense:
            write_vectors(tmp / "vectors.npy", args.passages, args.seed)
            dn = run_child("dense", args, tmp / "dense.json", ["--vectors", str(tmp / "vectors.npy")])
            out.update(dense_search_peak_rss_gib=round(dn["peak_rss_gib"], 3), dense_search_s=round(dn["search_s"], 2), dense_engine=dn["engine"])
    out["load_avg_1m_end"] = round(os.getloadavg()[0], 2)
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
