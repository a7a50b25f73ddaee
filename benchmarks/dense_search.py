"""Dense exact search at collection scale, without a model: N random unit vectors (dimension 384)
written streaming into vdr's float16 store, then Q queries, top 100, by vdr's ExactSearcher.

Usage: python benchmarks/dense_search.py [N=1000000] [Q=2500] [ENGINE=auto] [FOLDER=/tmp/vdr-dense-bench]
Prints one JSON line: passages, queries, engine, write_s, search_s, queries_per_s,
dense_search_peak_rss_gib (process peak RSS, memory-mapped store pages included).
"""

from __future__ import annotations

import json
import resource
import shutil
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from vdr.retrieve.dense_store import ExactSearcher, VectorStore, VectorStoreWriter  # noqa: E402


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    nq = int(sys.argv[2]) if len(sys.argv) > 2 else 2500
    engine = sys.argv[3] if len(sys.argv) > 3 else "auto"
    folder = Path(sys.argv[4] if len(sys.argv) > 4 else "/tmp/vdr-dense-bench") / str(n)
    rng = np.random.default_rng(0)
    t = time.perf_counter()
    if VectorStore.open(folder) is None:
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        w = VectorStoreWriter(folder, 384)
        for s in range(0, n, 50_000):
            m = min(50_000, n - s)
            v = rng.standard_normal((m, 384), dtype=np.float32)
            v /= np.linalg.norm(v, axis=1, keepdims=True)
            w.add([f"p{i}" for i in range(s, s + m)], v, np.ones(m, dtype=np.int64))
        w.close({})
    write_s = time.perf_counter() - t
    q = rng.standard_normal((nq, 384), dtype=np.float32)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    searcher = ExactSearcher(VectorStore.open(folder), engine, resident_bytes=0)
    t = time.perf_counter()
    found = searcher.search(q, 100)
    dt = time.perf_counter() - t
    assert all(len(p) == 100 for p, _ in found)
    print(json.dumps({"passages": n, "queries": nq, "engine": searcher.engine, "write_s": round(write_s, 1),
                      "search_s": round(dt, 1), "queries_per_s": round(nq / dt, 1),
                      "dense_search_peak_rss_gib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 3)}))


if __name__ == "__main__":
    main()
