"""MaxSim speed and memory: vdr.retrieve.maxsim against colpali-engine's ``score_multi_vector``, same run.

Usage::

    python benchmarks/maxsim.py                 # ViDoRe-V2-shaped workload + 100,000-page streaming case
    python benchmarks/maxsim.py --quick         # small sizes (smoke test)
    python benchmarks/maxsim.py --stream-pages 0   # skip the streaming case

1. In memory, ViDoRe-V2-shaped: 327 queries of 20-30 tokens, 1,538 pages of 600-1,030 tokens,
   dim 128, L2-normalised float32, CPU. Timed: ``vdr.retrieve.maxsim.maxsim`` and colpali-engine's
   ``BaseVisualRetrieverProcessor.score_multi_vector`` (default batch size 128) on the same lists;
   the max abs difference of their scores is printed (padding cannot matter here: the pages'
   maxima are positive with random normalised vectors far more often than not, so the scores agree
   to float32 rounding). Achieved GFLOP/s = 2 * query tokens * page tokens * dim / seconds, beside a
   plain float32 matmul's GFLOP/s measured on the same machine in the same run with the shape of one
   vdr block ``(query tokens, 128) x (128, block tokens)``.
2. Streaming: ``--stream-pages`` pages (default 100,000) of ``--stream-tokens`` tokens (default
   256) are written to an on-disk :class:`vdr.encode.store.EmbeddingStore` (float16 safetensors shards),
   then a fresh process scores ``--stream-queries`` queries against the store with
   :func:`vdr.retrieve.maxsim.maxsim_topk` (k=100) and reports its peak RSS (VmHWM) and pages/s.
3. Long tail (issue 17): one page of 8,192 tokens among 1,999 pages of 40 tokens (dim 128, float32,
   45 MB of page vectors) scored by ``--longtail-queries`` queries of 20-30 tokens with
   ``budget_bytes`` = ``--longtail-budget-mib`` (default: the library default) in a fresh process;
   reports its peak RSS (VmHWM) beside its RSS just before scoring (interpreter, torch and the data),
   so ``longtail_peak_rss_mib - longtail_before_rss_mib`` is what scoring added, to compare with
   ``longtail_budget_mib``. ``longtail_unplanned_block_mib`` is what the previous plan (blocks cut by
   real tokens, padded to their longest page) would have allocated for its largest block (computed,
   not run: it does not fit in memory).

The last line printed is one JSON object with every figure. Targets (issue 4): >= 4x colpali-engine,
>= 70% of the matmul rate, peak RSS <= 3 GB in the streaming case; (issue 17) long-tail peak RSS
within the budget above the RSS before scoring.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vdr.retrieve.maxsim import _MIN_GEMM, DEFAULT_BUDGET_BYTES, _block_tokens, maxsim, maxsim_topk  # noqa: E402


def workload(n_q, q_tok, n_p, p_tok, dim=128, seed=0):
    g = torch.Generator().manual_seed(seed)
    norm = lambda x: torch.nn.functional.normalize(x, dim=-1)  # noqa: E731
    qs = [norm(torch.randn(int(n), dim, generator=g)) for n in torch.randint(q_tok[0], q_tok[1] + 1, (n_q,), generator=g)]
    ps = [norm(torch.randn(int(n), dim, generator=g)) for n in torch.randint(p_tok[0], p_tok[1] + 1, (n_p,), generator=g)]
    return qs, ps


def matmul_gflops(m, n, k=128, repeat=5):
    a, b = torch.randn(m, k), torch.randn(k, n)
    a @ b
    t = time.perf_counter()
    for _ in range(repeat):
        a @ b
    return 2 * m * n * k * repeat / (time.perf_counter() - t) / 1e9


def _peak_rss_bytes() -> int:
    """This process's peak RSS. VmHWM belongs to the address space, which execve replaces; getrusage's
    ru_maxrss survives execve and would report the parent's peak (inherited through fork) instead."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def stream_child(store_dir: str, n_queries: int, q_tokens: int) -> None:
    from vdr.encode.store import EmbeddingStore

    qs, _ = workload(n_queries, (q_tokens, q_tokens), 0, (1, 1))
    st = EmbeddingStore.open(store_dir)
    t = time.perf_counter()
    top = maxsim_topk(qs, st, 100)
    dt = time.perf_counter() - t
    rss = _peak_rss_bytes()
    print(json.dumps({"seconds": dt, "pages": len(st), "peak_rss_bytes": rss, "top_shape": list(top.scores.shape)}))


def _rss_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def longtail_pages(dim: int = 128) -> list[torch.Tensor]:
    """1,999 pages of 40 tokens and one of 8,192 (in the middle), L2-normalised float32."""
    g = torch.Generator().manual_seed(2)
    norm = lambda x: torch.nn.functional.normalize(x, dim=-1)  # noqa: E731
    pages = [norm(torch.randn(40, dim, generator=g)) for _ in range(1999)]
    pages.insert(1000, norm(torch.randn(8192, dim, generator=g)))
    return pages


def unplanned_block_bytes(lengths, n_query_tokens: int, budget_bytes: int, dim: int = 128) -> int:
    """Largest block of the previous plan: pages sorted by length, cut every ``budget // per_token``
    real tokens, each block padded to its longest page; float32 similarities plus padded pages."""
    q_rows = n_query_tokens + (-n_query_tokens % _MIN_GEMM)
    cap = max(1, budget_bytes // (4 * q_rows + 6 * dim))
    worst, block, tok = 0, [], 0
    for n in sorted(lengths) + [None]:
        if n is None or (block and tok + n > cap):
            cols = len(block) * max(block)
            worst = max(worst, cols * (4 * q_rows + 4 * dim))
            block, tok = [], 0
        if n is not None:
            block.append(n)
            tok += n
    return worst


def longtail_child(n_queries: int, budget_mib: int) -> None:
    qs, _ = workload(n_queries, (20, 30), 0, (1, 1))
    pages = longtail_pages()
    before = _rss_bytes()
    t = time.perf_counter()
    scores = maxsim(qs, pages, budget_bytes=budget_mib * 2**20)
    dt = time.perf_counter() - t
    print(json.dumps({"seconds": dt, "before_rss_bytes": before, "peak_rss_bytes": _peak_rss_bytes(),
                      "query_tokens": sum(q.shape[0] for q in qs), "shape": list(scores.shape)}))


def build_store(store_dir: Path, n_pages: int, tokens: int, dim: int = 128) -> float:
    from vdr.encode.store import EmbeddingStore

    st = EmbeddingStore.open_for_writing(store_dir, encoder_fingerprint="benchmark-random", encoder_settings={"model": "random"}, dim=dim)
    g = torch.Generator().manual_seed(1)
    t = time.perf_counter()
    for i in range(n_pages):
        st.add(f"doc{i // 100}.pdf#{i % 100 + 1}", f"h{i}", torch.randn(tokens, dim, generator=g, dtype=torch.float32).half())
        if st.pending >= 2048:
            st.commit()
    st.close()
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--stream-pages", type=int, default=100_000)
    ap.add_argument("--stream-tokens", type=int, default=256)
    ap.add_argument("--stream-queries", type=int, default=8)
    ap.add_argument("--store-dir", type=Path, default=None, help="where the streaming store goes (default: a temp folder)")
    ap.add_argument("--longtail-queries", type=int, default=16, help="queries in the long-tail case (0: skip it)")
    ap.add_argument("--longtail-budget-mib", type=int, default=DEFAULT_BUDGET_BYTES // 2**20)
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    ap.add_argument("--longtail-child", nargs=2, type=int, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        stream_child(a.child[0], int(a.child[1]), int(a.child[2]))
        return
    if a.longtail_child:
        longtail_child(*a.longtail_child)
        return
    torch.manual_seed(0)
    n_q, n_p = (40, 120) if a.quick else (327, 1538)
    qs, ps = workload(n_q, (20, 30), n_p, (600, 1030))
    q_tok = sum(q.shape[0] for q in qs)
    p_tok = sum(p.shape[0] for p in ps)
    flops = 2 * q_tok * p_tok * 128
    print(f"workload: {n_q} queries ({q_tok} tokens), {n_p} pages ({p_tok} tokens), dim 128, float32, {torch.get_num_threads()} threads")

    maxsim(qs[:4], ps[:4])  # warm-up
    t = time.perf_counter()
    ours = maxsim(qs, ps)
    vdr_s = time.perf_counter() - t
    from colpali_engine.utils.processing_utils import BaseVisualRetrieverProcessor

    t = time.perf_counter()
    ref = BaseVisualRetrieverProcessor.score_multi_vector(qs, ps, device="cpu")
    colpali_s = time.perf_counter() - t
    diff = float((ours - ref).abs().max())
    q_pad = q_tok + (-q_tok % _MIN_GEMM)
    block = _block_tokens(q_tok, DEFAULT_BUDGET_BYTES)
    mm = matmul_gflops(q_pad, block)
    vdr_gf = flops / vdr_s / 1e9
    print(f"vdr maxsim {vdr_s:.2f} s ({vdr_gf:.1f} GFLOP/s); colpali-engine score_multi_vector {colpali_s:.2f} s;"
          f" matmul {mm:.1f} GFLOP/s; max |diff| {diff:.2e}")
    out = {
        "benchmark": "maxsim",
        "queries": n_q, "pages": n_p, "query_tokens": q_tok, "page_tokens": p_tok, "threads": torch.get_num_threads(),
        "vdr_s": round(vdr_s, 3), "colpali_engine_s": round(colpali_s, 3), "speedup_vs_colpali_engine": round(colpali_s / vdr_s, 2),
        "vdr_gflops": round(vdr_gf, 1), "matmul_gflops": round(mm, 1), "fraction_of_matmul": round(vdr_gf / mm, 3),
        "max_abs_diff_vs_colpali_engine": diff,
    }
    if a.stream_pages:
        n_pages = 2000 if a.quick else a.stream_pages
        with tempfile.TemporaryDirectory(dir=a.store_dir) as tmp:
            store_dir = Path(tmp) / "store"
            build_s = build_store(store_dir, n_pages, a.stream_tokens)
            size = sum(f.stat().st_size for f in store_dir.rglob("*") if f.is_file())
            r = subprocess.run([sys.executable, __file__, "--child", str(store_dir), str(a.stream_queries), "25"],
                               capture_output=True, text=True, check=True)
            child = json.loads(r.stdout.strip().splitlines()[-1])
        print(f"streaming: {n_pages} pages x {a.stream_tokens} tokens ({size / 2**30:.2f} GiB on disk, written in {build_s:.1f} s),"
              f" {a.stream_queries} queries: {child['seconds']:.1f} s, {n_pages / child['seconds']:.0f} pages/s,"
              f" peak RSS {child['peak_rss_bytes'] / 2**30:.2f} GiB")
        out.update({
            "stream_pages": n_pages, "stream_tokens_per_page": a.stream_tokens, "stream_queries": a.stream_queries,
            "stream_store_bytes": size, "stream_s": round(child["seconds"], 2),
            "stream_pages_per_s": round(n_pages / child["seconds"], 1), "stream_peak_rss_bytes": child["peak_rss_bytes"],
            "stream_peak_rss_gib": round(child["peak_rss_bytes"] / 2**30, 3),
        })
    if a.longtail_queries:
        out.update(run_longtail(a.longtail_queries, a.longtail_budget_mib))
    print(json.dumps(out))


def run_longtail(n_queries: int, budget_mib: int) -> dict:
    """The long-tail case in a fresh process; returns its ``longtail_*`` figures."""
    r = subprocess.run([sys.executable, __file__, "--longtail-child", str(n_queries), str(budget_mib)],
                       capture_output=True, text=True, check=True)
    child = json.loads(r.stdout.strip().splitlines()[-1])
    mib = lambda b: round(b / 2**20, 1)  # noqa: E731
    unplanned = unplanned_block_bytes([40] * 1999 + [8192], child["query_tokens"], budget_mib * 2**20)
    print(f"long tail: 1 page of 8,192 tokens + 1,999 of 40, {n_queries} queries, budget {budget_mib} MiB:"
          f" {child['seconds']:.2f} s, RSS {mib(child['before_rss_bytes'])} MiB before scoring, peak {mib(child['peak_rss_bytes'])} MiB"
          f" (the previous plan's largest block: {unplanned / 2**30:.1f} GiB)")
    return {
        "longtail_queries": n_queries, "longtail_pages": 2000, "longtail_s": round(child["seconds"], 3),
        "longtail_budget_mib": budget_mib, "longtail_before_rss_mib": mib(child["before_rss_bytes"]),
        "longtail_peak_rss_mib": mib(child["peak_rss_bytes"]),
        "longtail_scoring_rss_mib": mib(child["peak_rss_bytes"] - child["before_rss_bytes"]),
        "longtail_unplanned_block_mib": mib(unplanned),
    }


if __name__ == "__main__":
    main()
