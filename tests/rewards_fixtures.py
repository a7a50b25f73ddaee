"""Fixtures of the rewards / serve / rewrite tests: a small passage corpus with topical queries,
a tiny randomly initialised causal LM, and a uvicorn server running in a thread on a free port."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from pathlib import Path

import numpy as np

TOPICS = [
    ["volcano", "lava", "eruption", "magma"],
    ["orchestra", "violin", "symphony", "conductor"],
    ["glacier", "ice", "melting", "arctic"],
    ["bitcoin", "blockchain", "ledger", "mining"],
    ["pyramid", "pharaoh", "egypt", "tomb"],
    ["vaccine", "immune", "antibody", "virus"],
    ["telescope", "galaxy", "nebula", "astronomer"],
    ["wheat", "harvest", "farmer", "grain"],
]
FILLER = ["report", "people", "city", "water", "history", "system", "study", "market", "energy", "world",
          "language", "river", "school", "paper", "design", "plant", "music", "story", "light", "animal"]


def make_passages(n_per_topic: int = 6, seed: int = 0) -> tuple[dict[str, str], dict[str, str], dict[str, dict[str, int]]]:
    """``(texts, queries, qrels)``: ``len(TOPICS) * n_per_topic`` passages; query ``q<t>`` asks about
    topic ``t``; its first passage has grade 2, the next two grade 1, one other-topic passage grade 0."""
    rng = np.random.default_rng(seed)
    texts, qrels, queries = {}, {}, {}
    for t, words in enumerate(TOPICS):
        for i in range(n_per_topic):
            k = int(rng.integers(1, 4))
            body = list(rng.choice(FILLER, 14)) + list(rng.choice(words, k)) + (words[:2] if i == 0 else [])
            rng.shuffle(body)
            texts[f"t{t}-p{i}"] = " ".join(body)
        qrels[f"q{t}"] = {f"t{t}-p0": 2, f"t{t}-p1": 1, f"t{t}-p2": 1, f"t{(t + 1) % len(TOPICS)}-p3": 0}
        queries[f"q{t}"] = f"tell me about the {words[0]}"
    return texts, queries, qrels


def write_corpus(folder: Path, texts: dict[str, str], queries: dict[str, str], qrels: dict[str, dict[str, int]],
                 history: dict[str, list[str]] | None = None) -> Path:
    """A corpus folder (``pages.jsonl``; page images are never read by text backends), plus
    ``queries.jsonl`` and ``qrels.tsv``."""
    from vdr.corpus import Page, image_name, write_pages

    folder.mkdir(parents=True, exist_ok=True)
    write_pages(folder / "pages.jsonl", [Page(cid, "passages", None, 1, 1, None, image_name(cid), t, "pdf") for cid, t in texts.items()])
    with open(folder / "queries.jsonl", "w", encoding="utf-8") as f:
        for q, t in queries.items():
            rec = {"_id": q, "text": t}
            if history and history.get(q):
                rec["history"] = history[q]
            f.write(json.dumps(rec) + "\n")
    with open(folder / "qrels.tsv", "w", encoding="utf-8") as f:
        f.write("query-id\tcorpus-id\tscore\n")
        for q, docs in qrels.items():
            for d, g in docs.items():
                f.write(f"{q}\t{d}\t{g}\n")
    return folder


def build_tiny_causal_lm(folder: Path, seed: int = 0) -> Path:
    """Save a tiny randomly initialised Qwen2 causal LM (hidden 32, 2 layers) and a BPE tokenizer."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM, Qwen2TokenizerFast

    from tiny_models import _bpe

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tok = Qwen2TokenizerFast(tokenizer_object=_bpe(specials), eos_token="<|endoftext|>", pad_token="<|endoftext|>",
                             unk_token=None, bos_token=None)
    eos = tok.convert_tokens_to_ids("<|endoftext|>")
    cfg = Qwen2Config(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, max_position_embeddings=512, tie_word_embeddings=True,
                      bos_token_id=eos, eos_token_id=eos, pad_token_id=eos)
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(cfg).eval()
    model.generation_config.pad_token_id = eos
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@contextlib.contextmanager
def running(app):
    """Serve ``app`` with uvicorn on 127.0.0.1:<free port> in a thread; yields the base URL."""
    import uvicorn

    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=free_port(), log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    t0 = time.monotonic()
    while not server.started:
        if not thread.is_alive() or time.monotonic() - t0 > 30:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{server.config.port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
