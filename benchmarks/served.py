"""Served systems against exact MaxSim at ViDoRe V2's shape (issue 36): storage, time per query, overlap@10.

Usage::

    python benchmarks/served.py            # ViDoRe-V2-shaped: 327 queries, 1,538 pages of 600-1,030 tokens, dim 128
    python benchmarks/served.py --quick    # small sizes (smoke test)

Synthetic vectors (L2-normalised, float16 page store written with vdr's own EmbeddingStore): each query
is a noisy copy of some tokens of one page, so the exact ranking has structure to keep or lose. Every
system runs through :class:`vdr.retrieve.served.ServedBackend` over that store, as ``vdr evaluate
--serve-as`` runs it, and is timed by its own ``score_seconds`` (ranking only; query encoding is not
part of a served system). The reference, measured in the same run on the same pages and queries, is
exact streaming MaxSim (:func:`vdr.retrieve.maxsim.maxsim_topk`, the multimodal backend's scorer).

Token pooling (colpali-engine's hierarchical clustering costs about a second per 800-token page on
2 cores) and the engines (Qdrant's local mode takes vectors as Python lists) run on the first
``--subset-pages`` pages; their exact reference is then re-measured on that subset, and ``pages``
says which. One JSON line per system: ``storage_ratio`` (bytes per page / exact's), ``time_ratio``
(ms per query / exact's), ``overlap@10`` (mean |top10 served ∩ top10 exact| / 10), ``top1_agreement``
(share of queries whose first page is exact's first: with random pages only the source page stands
out, the other nine of exact's top 10 are near-ties of noise), ``index_seconds``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vdr.encode.store import EmbeddingStore  # noqa: E402
from vdr.retrieve.maxsim import maxsim_topk  # noqa: E402
from vdr.retrieve.multimodal import store_bytes_per_page  # noqa: E402
from vdr.retrieve.served import ServedBackend, parse_serve_as  # noqa: E402
from vdr.types import QuerySet  # noqa: E402

SYSTEMS = ["fp16", "bf16", "int8", "binary", "binary:hamming=elasticsearch", "muvera", "pool:3", "qdrant", "lancedb", "plaid"]
SUBSET = {"pool", "qdrant", "lancedb", "plaid"}


def workload(n_q, q_tok, n_p, p_tok, dim=128, seed=0):
    """Pages of random unit tokens; each query a noisy copy of ``q_tok`` tokens of one page."""
    g = torch.Generator().manual_seed(seed)
    norm = lambda x: torch.nn.functional.normalize(x, dim=-1)  # noqa: E731
    pages = [norm(torch.randn(int(n), dim, generator=g)) for n in torch.randint(p_tok[0], p_tok[1] + 1, (n_p,), generator=g)]
    queries = []
    for i, n in enumerate(torch.randint(q_tok[0], q_tok[1] + 1, (n_q,), generator=g).tolist()):
        src = pages[i * 7 % n_p]
        rows = src[torch.randint(0, src.shape[0], (n,), generator=g)]
        queries.append(norm(rows + 0.8 * torch.randn(n, dim, generator=g) / dim ** 0.5))
    return queries, pages


def write_store(folder: Path, pages) -> EmbeddingStore:
    st = EmbeddingStore.open_for_writing(folder, encoder_fingerprint="bench", encoder_settings={}, dtype="float16", dim=pages[0].shape[1])
    for i, p in enumerate(pages):
        st.add(f"p{i:05d}", f"h{i}", p.to(torch.float16))
    st.commit()
    st.close()
    return EmbeddingStore.open(folder, "bench")


class _Exact:
    """The exact backend's part a served system uses: the store and the query vectors."""

    name = "multimodal"

    def __init__(self, store, vectors):
        self.store, self._vectors = store, vectors

    def index(self, corpus) -> None:
        pass

    def _query_vectors(self, texts):
        return [self._vectors[t] for t in texts], 0


class _Subset:
    """The first pages of a store (ids, lengths, get, iter_blocks ...), for the slow systems."""

    def __init__(self, store, n):
        self._s, self._ids = store, store.ids()[:n]
        self.dim, self.dtype, self.encoder_fingerprint = store.dim, store.dtype, store.encoder_fingerprint

    def ids(self):
        return list(self._ids)

    def lengths(self):
        return [self._s.length(p) for p in self._ids]

    def get(self, pid):
        return self._s.get(pid)

    def content_hash(self, pid):
        return self._s.content_hash(pid)

    def iter_blocks(self, max_tokens, ids=None):
        return self._s.iter_blocks(max_tokens, self._ids if ids is None else ids)

    def __len__(self):
        return len(self._ids)


def exact_top(store, qvecs, k):
    t = time.perf_counter()
    top = maxsim_topk(qvecs, store, k)
    return top.ids, time.perf_counter() - t


def run_system(text, store, qvecs, queries, exact_ids, exact_seconds, exact_bytes):
    spec = parse_serve_as([text])[0]
    b = ServedBackend(_Exact(store, {q.text: v for q, v in zip(queries.values(), qvecs)}), spec)
    t = time.perf_counter()
    try:
        b.index(None)
    except Exception as e:  # a library that cannot run here: named, the others go on
        return {"system": spec.name, "skipped": f"{type(e).__name__}: {e}"}
    index_seconds = time.perf_counter() - t
    run = b.search(queries, 100)
    seconds = b.report["searches"][queries.name]["score_seconds"]
    overlap = [len({d for d, _ in run.ranked(q)[:10]} & set(ids[:10])) / 10 for q, ids in zip(queries, exact_ids)]
    top1 = [bool(run.ranked(q)) and run.ranked(q)[0][0] == ids[0] for q, ids in zip(queries, exact_ids)]
    n = len(queries)
    bpp = b.config.get("bytes_per_page")
    return {"system": spec.name, "pages": len(store.ids()), "queries": n,
            "bytes_per_page": bpp, "exact_bytes_per_page": exact_bytes, "storage_ratio": None if bpp is None else bpp / exact_bytes,
            "ms_per_query": 1000 * seconds / n, "exact_ms_per_query": 1000 * exact_seconds / n, "time_ratio": seconds / exact_seconds,
            "overlap@10": sum(overlap) / n, "top1_agreement": sum(top1) / n, "index_seconds": round(index_seconds, 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (smoke test)")
    ap.add_argument("--subset-pages", type=int, default=256, help="pages for pooling and the engines")
    ap.add_argument("--systems", default=",".join(SYSTEMS), help="comma-separated --serve-as specs")
    a = ap.parse_args()
    n_q, q_tok, n_p, p_tok = (12, (20, 30), 40, (60, 100)) if a.quick else (327, (20, 30), 1538, (600, 1030))
    qvecs, pages = workload(n_q, q_tok, n_p, p_tok)
    queries = QuerySet.from_texts({f"q{i}": f"query {i}" for i in range(n_q)}, name="original")
    with tempfile.TemporaryDirectory() as tmp:
        store = write_store(Path(tmp) / "store", pages)
        stores = {"full": store, "subset": _Subset(store, min(a.subset_pages, n_p))}
        refs = {}
        for text in a.systems.split(","):
            label = "subset" if text.split(":")[0] in SUBSET else "full"
            if label not in refs:  # the exact reference, measured once per page set
                st = stores[label]
                ids, secs = exact_top(st, qvecs, 100)
                refs[label] = (ids, secs, store_bytes_per_page(st))
            line = run_system(text, stores[label], qvecs, queries, *refs[label])
            print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
