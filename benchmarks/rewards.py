"""Speed of rewards through vdr.rewards.rewarder and through ``vdr serve`` (lexical backend by default).

Run it directly (needs the ``serve`` extra: fastapi, uvicorn, httpx; and psutil)::

    python benchmarks/rewards.py                  # 100,000 passages, 32 clients for 60 s
    python benchmarks/rewards.py --quick          # 5,000 passages, 8 clients for 5 s (smoke test)
    python benchmarks/rewards.py --passages 20000 --duration 30 --clients 16 --seed 1
    python benchmarks/rewards.py --load-seconds 10 --no-dense --no-multimodal        # during development

Data (deterministic, seeded NumPy): ``--passages`` passages of 50-70 words drawn from a Zipf
distribution (exponent 1.1) over a 50,000-word vocabulary whose most frequent words are the
lexical backend's English stopwords (as in real text) and the rest synthetic words (``w123``).
5,000 queries each judge one passage grade 2 and another grade 1. A rewrite of a query is 4-10
words sampled from its grade-2 passage plus 0-2 random vocabulary words, so rewards vary.

What is measured (``time.perf_counter``):

* ``rewards_per_s``: batches of 256 distinct rewrites through ``Rewarder.evaluate`` (cache off),
  ``--batches`` of them after one warm-up batch; ``search_share`` is the part spent inside the
  backend's ``search`` (the rest: word budget, run building, ``evaluate_run``).
* ``p50_ms_64`` / ``p95_ms_64``: latency of ``POST /reward`` with 64 new rewrites, one request at a
  time, 50 requests, against a ``vdr serve`` app in a separate process (forked after indexing).
  ``server_search_ms_64``: the mean time of those requests spent inside the backend's ``search``
  (read from the server's ``/health`` counters): the rest is HTTP, JSON, batching and metrics.
* load: ``--clients`` threads post 64-rewrite requests for ``--load-seconds`` seconds (rewrites drawn
  from a pool of 8,192, so the LRU cache hits part of them); ``load_errors`` counts non-200 answers
  and transport errors; ``load_rss_growth_mib`` is the server's RSS after minus before the load;
  the server's cache holds at most ``--cache-size`` rankings.
* ``dense_rewards_per_s``: as ``rewards_per_s`` with the semantic backend over the first
  ``--dense-passages`` passages, with a tiny sentence-transformers model the script builds
  (a 1-layer BERT, hidden 64, word-level tokenizer over the benchmark vocabulary, mean pooling; random
  weights, so only the speed means anything); ``dense_index_s`` is its encoding time. Both model
  figures run on CPU with ``--torch-threads`` threads (default 1, recorded as ``torch_threads``).
* ``multimodal_rewards_per_s``: the multimodal backend (a tiny random ColQwen2.5 built by the script,
  the one the tests build: hidden 64, 2 layers) over ``--multimodal-pages`` random page images,
  batches of 64 rewrites; ``multimodal_index_s`` is the page encoding time. CPU, float32.

The machine may be shared: ``cpu_count`` and the 1-minute load average at the start are printed.
The last line printed is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

VOCAB = 50_000
N_QUERIES = 5_000


def make_data(n_passages: int, seed: int):
    """``(texts, qrels, gold_words, vocab)``; ``gold_words[q]`` = content words of q's grade-2 passage."""
    import bm25s.stopwords

    rng = np.random.default_rng(seed)
    stop = sorted(set(bm25s.stopwords.STOPWORDS_EN))
    vocab = np.array(stop + [f"w{i}" for i in range(VOCAB - len(stop))], dtype=object)
    lens = rng.integers(50, 71, size=n_passages)
    ranks = rng.zipf(1.1, size=int(lens.sum()))
    ranks = np.where(ranks > VOCAB, rng.integers(1, VOCAB + 1, size=ranks.shape), ranks) - 1
    words = vocab[ranks]
    ends = np.cumsum(lens)
    texts = {f"p{i}": " ".join(words[e - n:e]) for i, (e, n) in enumerate(zip(ends, lens))}
    stopset = set(stop)
    qrels, gold = {}, {}
    for q in range(N_QUERIES):
        a, b = rng.choice(n_passages, 2, replace=False)
        qrels[f"q{q}"] = {f"p{a}": 2, f"p{b}": 1}
        gold[f"q{q}"] = [w for w in texts[f"p{a}"].split() if w not in stopset]
    return texts, qrels, gold, vocab


def make_rewrites(n: int, gold: dict, vocab: np.ndarray, rng) -> tuple[list[str], list[str]]:
    qids = [f"q{i}" for i in rng.integers(0, N_QUERIES, size=n)]
    out = []
    for q in qids:
        g = gold[q]
        words = list(rng.choice(g, min(len(g), int(rng.integers(4, 11))), replace=False)) if g else []
        words += list(vocab[rng.integers(0, VOCAB, size=int(rng.integers(0, 3)))])
        out.append(" ".join(words) or "empty")
    return qids, out


def bench_rewarder(backend, qrels, gold, vocab, batches: int, seed: int) -> dict:
    from vdr.rewards.rewarder import Rewarder

    rng = np.random.default_rng(seed + 1)
    rw = Rewarder(backend, qrels, cache_size=0)
    rw.score(*make_rewrites(256, gold, vocab, rng))  # warm-up
    rw.stats.update(search_s=0.0, metric_s=0.0)
    data = [make_rewrites(256, gold, vocab, rng) for _ in range(batches)]
    t0 = time.perf_counter()
    for ids, texts in data:
        rw.score(ids, texts)
    dt = time.perf_counter() - t0
    return {"rewards_per_s": round(256 * batches / dt, 1), "search_share": round(rw.stats["search_s"] / dt, 3),
            "metric_ms_per_256": round(1000 * rw.stats["metric_s"] / batches, 2)}


def build_tiny_st(folder: Path, vocab: np.ndarray, *, dim: int = 64, layers: int = 1, max_seq_length: int = 128) -> Path:
    """Save a tiny randomly initialised sentence-transformers model (BERT + mean pooling) whose
    word-level tokenizer knows every benchmark word; returns ``folder``."""
    import torch
    from sentence_transformers import SentenceTransformer
    try:
        from sentence_transformers.sentence_transformer import modules as st_models
    except ImportError:  # sentence-transformers < 5.2
        from sentence_transformers import models as st_models
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    words = {w: i for i, w in enumerate(specials + sorted(set(vocab.tolist())))}
    tok = Tokenizer(models.WordLevel(words, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                                   sep_token="[SEP]", mask_token="[MASK]", model_max_length=max_seq_length)
    cfg = BertConfig(vocab_size=len(words), hidden_size=dim, num_hidden_layers=layers, num_attention_heads=2,
                     intermediate_size=2 * dim, max_position_embeddings=max_seq_length)
    torch.manual_seed(0)
    hf = folder.parent / (folder.name + "-hf")
    BertModel(cfg, add_pooling_layer=False).save_pretrained(hf)
    fast.save_pretrained(hf)
    tr = st_models.Transformer(str(hf), max_seq_length=max_seq_length)
    SentenceTransformer(modules=[tr, st_models.Pooling(dim, "mean")], device="cpu").save(str(folder))
    return folder


def bench_dense(texts: dict, qrels: dict, gold, vocab, n_passages: int, batches: int, seed: int, work: Path) -> dict:
    """``dense_rewards_per_s`` over the first ``n_passages`` passages (qrels restricted to them)."""
    from vdr.rewards.rewarder import build_backend

    keep = dict(list(texts.items())[:n_passages])
    model = build_tiny_st(work / "tiny-st", vocab)
    t0 = time.perf_counter()
    backend = build_backend("semantic", keep, {"model": str(model), "device": "cpu"})
    index_s = time.perf_counter() - t0
    res = bench_rewarder(backend, qrels, gold, vocab, batches, seed)
    return {"dense_passages": len(keep), "dense_index_s": round(index_s, 1), "dense_rewards_per_s": res["rewards_per_s"],
            "dense_search_share": res["search_share"]}


def bench_multimodal(n_pages: int, batches: int, seed: int, work: Path) -> dict:
    """``multimodal_rewards_per_s``: a tiny ColQwen2.5 over ``n_pages`` random page images."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from tiny_models import build_colqwen2_5, make_corpus

    from vdr.corpus import Corpus
    from vdr.rewards.rewarder import Rewarder, build_backend

    rng = np.random.default_rng(seed + 3)
    sizes = [(int(w), int(h)) for w, h in rng.integers(56, 113, size=(n_pages, 2))]
    corpus = Corpus.load(make_corpus(work / "pages", sizes, seed=seed))
    model = build_colqwen2_5(work / "tiny-colqwen2.5")
    t0 = time.perf_counter()
    backend = build_backend("multimodal", corpus, {"model": str(model), "device": "cpu", "store": work / "store"})
    index_s = time.perf_counter() - t0
    ids = corpus.ids()
    qrels = {f"m{q}": {ids[int(a)]: 2, ids[int(b)]: 1} for q, (a, b) in enumerate(rng.integers(0, len(ids), size=(500, 2))) if a != b}
    words = ["revenue", "carbon", "emissions", "table", "figure", "chart", "page", "company", "document", "query"]
    qids = list(qrels)

    def batch(n: int):
        return ([qids[int(i)] for i in rng.integers(0, len(qids), n)],
                [" ".join(rng.choice(words, int(rng.integers(3, 9)))) + f" {int(rng.integers(1_000_000))}" for _ in range(n)])

    rw = Rewarder(backend, qrels, cache_size=0)
    rw.score(*batch(64))  # warm-up
    data = [batch(64) for _ in range(batches)]
    t0 = time.perf_counter()
    for q, t in data:
        rw.score(q, t)
    dt = time.perf_counter() - t0
    return {"multimodal_pages": len(ids), "multimodal_index_s": round(index_s, 1), "multimodal_rewards_per_s": round(64 * batches / dt, 1)}


def _serve(backend, qrels, port: int, cache_size: int) -> None:  # runs in the forked server process
    import uvicorn

    from vdr.rewards.rewarder import Rewarder
    from vdr.rewards.serve import create_app

    app = create_app(Rewarder(backend, qrels, cache_size=cache_size))
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="error")


def _latencies(url: str, gold, vocab, n: int, rng) -> list[float]:
    import httpx

    out = []
    with httpx.Client(timeout=300) as c:
        for _ in range(n):
            ids, texts = make_rewrites(64, gold, vocab, rng)
            t0 = time.perf_counter()
            r = c.post(url + "/reward", json={"query_ids": ids, "rewrites": texts})
            out.append(1000 * (time.perf_counter() - t0))
            r.raise_for_status()
    return out


def _load(url: str, pool: tuple[list, list], clients: int, duration: float, seed: int) -> dict:
    import httpx

    stop = time.monotonic() + duration
    counts = {"requests": 0, "errors": 0, "rewrites": 0}
    lat: list[float] = []
    lock = threading.Lock()
    first_error: list[str] = []

    def client(k: int) -> None:
        rng = np.random.default_rng(seed + 100 + k)
        with httpx.Client(timeout=600) as c:
            while time.monotonic() < stop:
                idx = rng.integers(0, len(pool[0]), size=64)
                body = {"query_ids": [pool[0][i] for i in idx], "rewrites": [pool[1][i] for i in idx]}
                t0 = time.perf_counter()
                try:
                    ok = c.post(url + "/reward", json=body).status_code == 200
                    err = None if ok else "non-200"
                except httpx.HTTPError as e:
                    ok, err = False, f"{type(e).__name__}: {e}"
                with lock:
                    counts["requests"] += 1
                    counts["errors"] += not ok
                    counts["rewrites"] += 64 * ok
                    lat.append(1000 * (time.perf_counter() - t0))
                    if err and not first_error:
                        first_error.append(err)

    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    dt = time.perf_counter() - t0
    return {"load_requests": counts["requests"], "load_errors": counts["errors"], "load_rewrites_per_s": round(counts["rewrites"] / dt, 1),
            "load_p95_ms": round(float(np.percentile(lat, 95)), 1) if lat else None, "load_first_error": first_error[0] if first_error else None}


def bench_server(backend, qrels, gold, vocab, args) -> dict:
    import httpx
    import psutil

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from rewards_fixtures import free_port

    port = free_port()
    proc = mp.get_context("fork").Process(target=_serve, args=(backend, qrels, port, args.cache_size), daemon=True)
    proc.start()
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        rng = np.random.default_rng(args.seed + 2)
        _latencies(url, gold, vocab, 3, rng)  # warm-up
        search0 = httpx.get(url + "/health", timeout=60).json()["stats"]["search_s"]
        lat = _latencies(url, gold, vocab, args.latency_requests, rng)
        search1 = httpx.get(url + "/health", timeout=60).json()["stats"]["search_s"]
        ps = psutil.Process(proc.pid)
        rss0 = ps.memory_info().rss
        pool = make_rewrites(8192, gold, vocab, rng)
        load = _load(url, pool, args.clients, args.duration, args.seed)
        rss1 = ps.memory_info().rss
        health = httpx.get(url + "/health", timeout=60).json()
    finally:
        proc.terminate()
        proc.join(30)
    return {"p50_ms_64": round(float(np.percentile(lat, 50)), 1), "p95_ms_64": round(float(np.percentile(lat, 95)), 1),
            "server_search_ms_64": round(1000 * (search1 - search0) / len(lat), 1),
            "load_clients": args.clients, "load_seconds": args.duration, **load,
            "load_rss_growth_mib": round((rss1 - rss0) / 2**20, 1), "server_rss_mib": round(rss1 / 2**20, 1),
            "cache_entries": health["cache"]["entries"], "cache_size": args.cache_size}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--passages", type=int, default=100_000)
    ap.add_argument("--batches", type=int, default=4, help="timed batches of 256 rewrites")
    ap.add_argument("--latency-requests", type=int, default=50)
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--load-seconds", "--duration", dest="duration", type=float, default=60.0, help="length of the load test")
    ap.add_argument("--dense-passages", type=int, default=10_000, help="passages of the dense figure (tiny model, CPU)")
    ap.add_argument("--multimodal-pages", type=int, default=64, help="page images of the multimodal figure (tiny ColQwen2.5, CPU)")
    ap.add_argument("--torch-threads", type=int, default=1,
                    help="torch CPU threads of the dense and multimodal figures (1: on a small shared machine more threads contend)")
    ap.add_argument("--no-dense", action="store_true", help="skip the dense figure")
    ap.add_argument("--no-multimodal", action="store_true", help="skip the multimodal figure")
    ap.add_argument("--cache-size", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--backend", default="lexical", help="lexical (default), semantic (all-MiniLM-L6-v2) or hybrid")
    ap.add_argument("--quick", action="store_true", help="5,000 passages, 8 clients for 5 s, small dense and multimodal corpora")
    args = ap.parse_args()
    if args.quick:
        args.passages, args.clients, args.duration, args.batches, args.latency_requests = 5_000, 8, 5.0, 2, 10
        args.dense_passages, args.multimodal_pages = 2_000, 16
    from vdr.rewards.rewarder import build_backend

    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    load_avg = os.getloadavg()[0]
    t0 = time.perf_counter()
    texts, qrels, gold, vocab = make_data(args.passages, args.seed)
    gen_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    backend = build_backend(args.backend, texts)
    index_s = time.perf_counter() - t0
    res = {"benchmark": "rewards", "backend": args.backend, "passages": args.passages, "queries": N_QUERIES, "seed": args.seed,
           "data_s": round(gen_s, 1), "index_s": round(index_s, 1)}
    res.update(bench_rewarder(backend, qrels, gold, vocab, args.batches, args.seed))
    res.update(bench_server(backend, qrels, gold, vocab, args))
    if not (args.no_dense and args.no_multimodal):
        import torch

        torch.set_num_threads(args.torch_threads)
        res["torch_threads"] = torch.get_num_threads()
    with tempfile.TemporaryDirectory(prefix="vdr-bench-rewards-") as work:
        if not args.no_dense:
            res.update(bench_dense(texts, qrels, gold, vocab, args.dense_passages, max(1, args.batches // 2), args.seed, Path(work)))
        if not args.no_multimodal:
            res.update(bench_multimodal(args.multimodal_pages, args.batches, args.seed, Path(work)))
    res.update({"cpu_count": os.cpu_count(), "load_avg_1min_at_start": round(load_avg, 2)})
    print(json.dumps(res))


if __name__ == "__main__":
    main()
