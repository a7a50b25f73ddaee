"""One prepared GPU check for vdr: encode throughput of a ColQwen2.5-sized model and MaxSim GFLOP/s.

Needs nothing from the network. Usage::

    python benchmarks/gpu_check.py                 # on a CUDA machine: full size, < 8 minutes
    python benchmarks/gpu_check.py --small         # tiny model and sizes (auto-selected without CUDA)

What it does:

1. Builds a **randomly initialised ColQwen2.5 with the real architecture and dimensions** of
   vidore/colqwen2.5-v0.2 (base Qwen2.5-VL-3B): text hidden 2048, 36 layers, 16 attention heads,
   2 KV heads, MLP 11008, vocabulary 151,936, M-RoPE sections (16, 24, 24), rope theta 1e6, tied
   embeddings; vision tower depth 32, hidden 1280, MLP 3420, 16 heads, patch 14, spatial merge 2,
   temporal patch 2, window 112, full attention in blocks 7/15/23/31, output 2048; ColQwen2.5
   projection to 128 dims (colpali-engine's ``ColQwen2_5.dim``). The weights are random, so the
   vectors mean nothing; the cost per page is the real one. The tokenizer is a small BPE trained
   here (only its special tokens matter for pages); the image processor is Qwen2-VL's with
   ColQwen2.5's default budget of 768 visual tokens per page.
2. Writes synthetic document pages (text lines, tables, a chart; A4 at 150 dpi) as PNG files and
   encodes them with vdr's own :meth:`vdr.encode.LateInteractionEncoder.iter_pages` at bf16,
   with DataLoader workers decoding and preprocessing images while the GPU runs. Reports pages/s,
   tokens/page, peak GPU memory (``torch.cuda.max_memory_allocated``) and the GPU utilisation of the
   encode loop (sampled every 0.2 s with ``torch.cuda.utilization`` when pynvml is there, else
   ``nvidia-smi --query-gpu=utilization.gpu``): a data pipeline that keeps up shows ~100%.
3. Scores synthetic multi-vectors (unit-norm, bf16) with :func:`vdr.retrieve.maxsim.maxsim` on the device
   and reports its GFLOP/s (2 x query tokens x page tokens x 128 per second) beside the device's
   measured matmul rates: bf16, fp32 without TF32, TF32, and the TF32 rate of one MaxSim block's own
   GEMM shape ``(query tokens, 128) x (128, block tokens)`` (what ``maxsim`` runs for 16-bit inputs).

The last line printed is one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from multiprocessing import Pool
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

QWEN_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
                 "<|image_pad|>", "<|video_pad|>", "<|vision_pad|>"]
SENTENCES = ["Describe the image.", "What is the revenue in 2023?", "Which page shows the carbon emissions?",
             "user assistant query document page table figure chart", "The quick brown fox jumps over the lazy dog."] * 4

# vidore/colqwen2.5-v0.2 = Qwen2.5-VL-3B-Instruct backbone + 128-dim projection
FULL_TEXT = dict(vocab_size=151936, hidden_size=2048, intermediate_size=11008, num_hidden_layers=36, num_attention_heads=16,
                 num_key_value_heads=2, max_position_embeddings=128000, rms_norm_eps=1e-6, tie_word_embeddings=True,
                 rope_scaling={"type": "mrope", "mrope_section": [16, 24, 24]},
                 rope_parameters={"rope_type": "default", "mrope_section": [16, 24, 24], "rope_theta": 1000000.0})
FULL_VISION = dict(depth=32, hidden_size=1280, intermediate_size=3420, num_heads=16, patch_size=14, spatial_merge_size=2,
                   temporal_patch_size=2, out_hidden_size=2048, window_size=112, fullatt_block_indexes=[7, 15, 23, 31],
                   in_channels=3, hidden_act="silu")
SMALL_TEXT = dict(vocab_size=151936, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=4096, tie_word_embeddings=True,
                  rope_scaling={"type": "mrope", "mrope_section": [2, 3, 3]},
                  rope_parameters={"rope_type": "default", "mrope_section": [2, 3, 3], "rope_theta": 10000.0})
SMALL_VISION = dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, patch_size=14, spatial_merge_size=2,
                    temporal_patch_size=2, out_hidden_size=64, window_size=56, fullatt_block_indexes=[1], in_channels=3)


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------------- the model
def build_processor(max_visual_tokens: int):
    """ColQwen2.5 processor: Qwen2-VL image processor (patch 14, merge 2) + a BPE tokenizer trained here."""
    from colpali_engine.models import ColQwen2_5_Processor
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import Qwen2TokenizerFast, Qwen2VLImageProcessor

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(SENTENCES, trainers.BpeTrainer(vocab_size=320, special_tokens=QWEN_SPECIALS, show_progress=False,
                                                           initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok = Qwen2TokenizerFast(tokenizer_object=bpe, eos_token="<|endoftext|>", pad_token="<|endoftext|>", unk_token=None,
                             bos_token=None)
    ip = Qwen2VLImageProcessor(min_pixels=4 * 28 * 28, max_pixels=max_visual_tokens * 28 * 28, patch_size=14, merge_size=2,
                               temporal_patch_size=2)
    try:
        from transformers import Qwen2VLVideoProcessor

        vp = Qwen2VLVideoProcessor()
    except Exception:  # pragma: no cover - older transformers
        vp = None
    return ColQwen2_5_Processor(image_processor=ip, tokenizer=tok, video_processor=vp)


def build_model(processor, small: bool, device: str, dtype: torch.dtype, attn: str):
    """A randomly initialised ColQwen2.5 (full size or tiny), created directly on ``device`` in ``dtype``."""
    from colpali_engine.models import ColQwen2_5
    from transformers import Qwen2_5_VLConfig

    tok = processor.tokenizer
    ids = {s: tok.convert_tokens_to_ids(s) for s in QWEN_SPECIALS}
    text = dict(SMALL_TEXT if small else FULL_TEXT, bos_token_id=ids["<|endoftext|>"], eos_token_id=ids["<|endoftext|>"])
    cfg = Qwen2_5_VLConfig(
        text_config=text, vision_config=dict(SMALL_VISION if small else FULL_VISION),
        image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"], vision_end_token_id=ids["<|vision_end|>"],
        tie_word_embeddings=True,
    )
    cfg._attn_implementation = attn
    for sub in ("text_config", "vision_config"):
        getattr(cfg, sub)._attn_implementation = attn
    old = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            torch.manual_seed(0)
            model = ColQwen2_5(cfg)
    finally:
        torch.set_default_dtype(old)
    return model.to(device=device, dtype=dtype).eval(), cfg


def describe_config(cfg, model) -> dict:
    """The dimensions that were built (read back from the config objects and the model)."""
    t, v = cfg.text_config, cfg.vision_config
    return {
        "text": {k: getattr(t, k, None) for k in ("hidden_size", "num_hidden_layers", "num_attention_heads",
                                                   "num_key_value_heads", "intermediate_size", "vocab_size")},
        "vision": {k: getattr(v, k, None) for k in ("depth", "hidden_size", "intermediate_size", "num_heads", "patch_size",
                                                     "spatial_merge_size", "out_hidden_size")},
        "dim": int(model.dim),
        "parameters": sum(p.numel() for p in model.parameters()),
    }


# ------------------------------------------------------------------------------ synthetic pages
def _page(args) -> str:
    """Draw one document-like page (title, text lines, a table, a bar chart) and save it as PNG."""
    import random

    from PIL import Image, ImageDraw

    i, folder, w, h = args
    rng = random.Random(i)
    img = Image.new("RGB", (w, h), "white")
    d = ImageDraw.Draw(img)
    m = w // 12
    y = m
    d.text((m, y), f"Annual report {2000 + i % 25} - section {i}", fill="black")
    y += h // 30
    words = "revenue emissions scope table figure growth margin energy water waste board audit risk".split()
    while y < h * 0.45:
        d.text((m, y), " ".join(rng.choice(words) for _ in range(rng.randint(6, 14))), fill=(30, 30, 30))
        y += max(12, h // 70)
    rows, cols = rng.randint(4, 9), rng.randint(3, 6)
    tw, th = w - 2 * m, int(h * 0.2)
    for r in range(rows + 1):
        d.line([(m, y + r * th // rows), (m + tw, y + r * th // rows)], fill="black")
    for c in range(cols + 1):
        d.line([(m + c * tw // cols, y), (m + c * tw // cols, y + th)], fill="black")
    for r in range(rows):
        for c in range(cols):
            d.text((m + c * tw // cols + 4, y + r * th // rows + 2), f"{rng.randint(0, 9999)}", fill="black")
    y += th + h // 30
    bw = (w - 2 * m) // 12
    for b in range(10):
        bh = rng.randint(h // 40, h // 6)
        d.rectangle([m + b * bw, y + h // 6 - bh, m + b * bw + bw - 6, y + h // 6],
                    fill=(rng.randint(0, 200), rng.randint(0, 200), rng.randint(100, 255)))
    path = os.path.join(folder, f"page-{i:04d}.png")
    img.save(path)
    return path


def make_pages(folder: Path, n_unique: int, size: tuple[int, int], workers: int) -> list[str]:
    """``n_unique`` synthetic page PNGs in ``folder`` (drawn in parallel)."""
    jobs = [(i, str(folder), size[0], size[1]) for i in range(n_unique)]
    if workers > 1:
        with Pool(workers) as pool:
            return pool.map(_page, jobs)
    return [_page(j) for j in jobs]


# ------------------------------------------------------------------------------- GPU utilisation
class UtilisationSampler:
    """Samples GPU utilisation (%) in a thread: ``torch.cuda.utilization`` (needs pynvml), else nvidia-smi."""

    def __init__(self, period: float = 0.2) -> None:
        self.period = period
        self.samples: list[float] = []
        self.source: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if not torch.cuda.is_available():
            return
        try:
            torch.cuda.utilization()
            self.source = "torch.cuda.utilization (pynvml)"
            self._read = lambda: float(torch.cuda.utilization())
        except Exception:
            gpu = (os.environ.get("CUDA_VISIBLE_DEVICES") or "0").split(",")[0].strip() or "0"
            cmd = ["nvidia-smi", f"--id={gpu}", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits"]
            try:
                float(subprocess.run(cmd, capture_output=True, text=True, timeout=10).stdout.split()[0])
                self.source = "nvidia-smi"
                self._read = lambda: float(subprocess.run(cmd, capture_output=True, text=True, timeout=10).stdout.split()[0])
            except Exception:
                self.source = None

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.samples.append(self._read())
            except Exception:
                pass
            self._stop.wait(self.period)

    def __enter__(self) -> "UtilisationSampler":
        if self.source is not None:
            self._thread = threading.Thread(target=self._loop, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=15)

    def summary(self) -> dict:
        """``{"source", "samples", "mean", "median", "p10"}`` (``None`` figures when nothing was sampled)."""
        s = sorted(self.samples)
        if not s:
            return {"source": self.source, "samples": 0, "mean": None, "median": None, "p10": None}
        return {"source": self.source, "samples": len(s), "mean": round(statistics.fmean(s), 1),
                "median": statistics.median(s), "p10": s[len(s) // 10]}


# --------------------------------------------------------------------------------------- timing
def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def matmul_tflops(m: int, n: int, k: int, dtype: torch.dtype, device: str, *, tf32: bool = False, seconds: float = 1.0) -> float:
    """Measured TFLOP/s of ``(m, k) @ (k, n)`` in ``dtype`` on ``device`` (TF32 on CUDA when ``tf32``)."""
    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    try:
        a = torch.randn(m, k, device=device).to(dtype)
        b = torch.randn(k, n, device=device).to(dtype)
        a @ b
        _sync(device)
        reps, t0 = 0, time.perf_counter()
        while True:
            a @ b
            reps += 1
            if reps % 4 == 0:
                _sync(device)
                if time.perf_counter() - t0 > seconds:
                    break
        _sync(device)
        return 2 * m * n * k * reps / (time.perf_counter() - t0) / 1e12
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old


def compare_colpali(device: str, small: bool, budget: int) -> dict:
    """vdr's :func:`~vdr.retrieve.maxsim.maxsim` vs colpali-engine's ``score_multi_vector`` (its padded 4-D
    einsum, default batch size 128) on the ViDoRe-V2 shape: bf16 ColQwen2.5 vectors, queries of
    20-40 tokens, pages of 700-800 tokens (ColQwen2.5's 768-visual-token budget with varying page
    aspect), 1,000 queries x 2,000 pages (small: 16 x 64), all already on ``device``. Best of 3 runs
    each; ``max_abs_diff`` compares the two score matrices (colpali-engine sums in bf16)."""
    try:
        from colpali_engine.utils.processing_utils import BaseVisualRetrieverProcessor
    except Exception as e:  # noqa: BLE001 - reported, not fatal
        return {"error": f"colpali-engine not importable: {type(e).__name__}: {e}"}
    from vdr.retrieve.maxsim import maxsim

    g = torch.Generator(device=device).manual_seed(1)
    gc = torch.Generator().manual_seed(1)
    nq, npg = (16, 64) if small else (1000, 2000)

    def unit(n):
        return torch.nn.functional.normalize(torch.randn(n, 128, device=device, generator=g), dim=-1).to(torch.bfloat16)

    qs = [unit(int(n)) for n in torch.randint(20, 41, (nq,), generator=gc)]
    ps = [unit(int(n)) for n in torch.randint(700, 801, (npg,), generator=gc)]

    def best(fn):
        times, res = [], None
        for _ in range(3):
            _sync(device)
            t0 = time.perf_counter()
            res = fn()
            _sync(device)
            times.append(time.perf_counter() - t0)
        return min(times), res

    fn_vdr = lambda: maxsim(qs, ps, device=device, budget_bytes=budget)  # noqa: E731
    fn_ce = lambda: BaseVisualRetrieverProcessor.score_multi_vector(qs, ps, batch_size=128, device=device)  # noqa: E731
    fn_vdr(), fn_ce()  # warm-up (compiles the fused kernel)
    t_vdr, s_vdr = best(fn_vdr)
    t_ce, s_ce = best(fn_ce)
    sweep = {}
    if device.startswith("cuda"):  # tile sizes of the fused kernel (vdr.retrieve.maxsim_gpu.CONFIG), same data
        import vdr.retrieve.maxsim_gpu as G

        default = dict(G.CONFIG)
        for bm, bn, w, st in [(64, 64, 4, 2), (128, 64, 8, 3), (128, 128, 8, 3), (64, 128, 4, 3), (128, 32, 4, 3),
                              (256, 64, 8, 3), (128, 64, 4, 4), (64, 32, 4, 3)]:
            G.CONFIG.update(bm=bm, bn=bn, num_warps=w, num_stages=st)
            try:
                fn_vdr()
                t, s_cfg = best(fn_vdr)
                sweep[f"{bm}x{bn}w{w}s{st}"] = [round(t, 4), float((torch.as_tensor(s_cfg).float().cpu() - torch.as_tensor(s_vdr).float().cpu()).abs().max())]
            except Exception as e:  # noqa: BLE001 - a config that does not compile is reported
                sweep[f"{bm}x{bn}w{w}s{st}"] = f"{type(e).__name__}: {str(e)[:80]}"
        G.CONFIG.clear()
        G.CONFIG.update(default)
    os.environ["VDR_MAXSIM_FUSED"] = "0"  # vdr's reference path (float32 similarity matrix per block)
    try:
        fn_vdr()
        t_ref, s_ref = best(fn_vdr)
    finally:
        os.environ.pop("VDR_MAXSIM_FUSED")
    s_ref = torch.as_tensor(s_ref).float().cpu()
    s_vdr = torch.as_tensor(s_vdr).float().cpu()
    s_ce = torch.as_tensor(s_ce).float().cpu()
    qtok = sum(q.shape[0] for q in qs)
    ptok = sum(p.shape[0] for p in ps)
    return {
        "queries": nq, "pages": npg, "query_tokens_mean": round(qtok / nq, 1), "page_tokens_mean": round(ptok / npg, 1),
        "vdr_s": round(t_vdr, 4), "colpali_engine_s": round(t_ce, 4), "speedup": round(t_ce / t_vdr, 2),
        "vdr_reference_path_s": round(t_ref, 4), "speedup_reference_path": round(t_ce / t_ref, 2),
        "fused_config_sweep_s": sweep,
        "max_abs_diff_vs_reference_path": float((torch.as_tensor(s_vdr).float().cpu() - s_ref).abs().max()),
        "vdr_gflops": round(2 * qtok * ptok * 128 / t_vdr / 1e9, 1),
        "max_abs_diff": round(float((s_vdr - s_ce).abs().max()), 4), "score_scale": round(float(s_vdr.abs().max()), 2),
        "top1_agreement": round(float((s_vdr.argmax(1) == s_ce.argmax(1)).float().mean()), 4),
    }


def main(argv: list[str] | None = None) -> dict:
    """Run the check; prints progress on stderr and the JSON line on stdout; returns the figures."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--small", action="store_true", help="tiny model and sizes (default when CUDA is not available)")
    ap.add_argument("--device", default=None, help="cuda or cpu (default: cuda when available)")
    ap.add_argument("--pages", type=int, default=None, help="pages to encode (full: 2048, small: 8)")
    ap.add_argument("--batch-size", type=int, default=None, help="pages per forward pass (full: 16, small: 4)")
    ap.add_argument("--workers", type=int, default=None, help="DataLoader workers (full: min(8, cpus), small: 1)")
    ap.add_argument("--encode-seconds", type=float, default=None, help="stop encoding after this long (full: 150)")
    ap.add_argument("--max-visual-tokens", type=int, default=None, help="visual tokens per page (full: 768, small: 16)")
    ap.add_argument("--maxsim-queries", type=int, default=None, help="queries of 24 tokens (full: 512, small: 16)")
    ap.add_argument("--maxsim-pages", type=int, default=None, help="pages (full: 10000, small: 200)")
    ap.add_argument("--maxsim-budget-mb", type=int, default=None, help="MaxSim block budget (full: 2048, small: 64)")
    ap.add_argument("--attn", default=None, help="attention implementation (default flash_attention_2 if installed, else sdpa)")
    args = ap.parse_args(argv)
    t_start = time.perf_counter()

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    small = args.small or not device.startswith("cuda")
    cuda = device.startswith("cuda")
    dtype = torch.bfloat16 if cuda else torch.float32
    pages = args.pages or (8 if small else 2048)
    batch = args.batch_size or (4 if small else 16)
    workers = args.workers if args.workers is not None else (1 if small else min(8, os.cpu_count() or 1))
    enc_seconds = args.encode_seconds or (60.0 if small else 150.0)
    vis_tokens = args.max_visual_tokens or (16 if small else 768)
    attn = args.attn
    if attn is None:
        attn = "sdpa"
        if cuda:
            from transformers.utils import is_flash_attn_2_available

            if is_flash_attn_2_available():
                attn = "flash_attention_2"
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = False
    out: dict = {"device": torch.cuda.get_device_name(0) if cuda else platform.processor() or platform.machine(),
                 "small": small, "torch": torch.__version__, "dtype": str(dtype).replace("torch.", ""), "attn": attn,
                 "cpus": os.cpu_count()}

    # 1. model
    from vdr.encode import LateInteractionEncoder, QueryTemplate

    t0 = time.perf_counter()
    processor = build_processor(vis_tokens)
    model, cfg = build_model(processor, small, device, dtype, attn)
    _sync(device)
    out["model"] = describe_config(cfg, model)
    out["model_build_s"] = round(time.perf_counter() - t0, 1)
    log(f"model: {out['model']['parameters'] / 1e9:.2f} B parameters, built in {out['model_build_s']} s on {device}")
    enc = LateInteractionEncoder(model, processor, device=device, dtype=dtype,
                                 query_template=QueryTemplate("Query: ", processor.query_augmentation_token, 10),
                                 settings={"format": 1, "model": "random ColQwen2.5", "classes": ["ColQwen2_5", "ColQwen2_5_Processor"]},
                                 pixel_budget=True)

    # 2. encode synthetic pages
    size = (420, 594) if small else (1240, 1754)  # A4 at 50 / 150 dpi
    with tempfile.TemporaryDirectory(prefix="vdr-gpu-check-") as tmp:
        t0 = time.perf_counter()
        uniq = make_pages(Path(tmp), min(pages, 8 if small else 64), size, max(1, min(8, os.cpu_count() or 1)))
        paths = [uniq[i % len(uniq)] for i in range(pages)]
        log(f"{len(uniq)} synthetic pages of {size[0]}x{size[1]} drawn in {time.perf_counter() - t0:.1f} s")
        warm = enc.encode_pages(paths[:batch], batch, num_workers=0)  # warm-up (kernels, allocator)
        out["tokens_per_page"] = int(warm[0].shape[0])
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        done, t0 = 0, time.perf_counter()
        with UtilisationSampler() as util:
            for bids, vecs in enc.iter_pages(paths, batch, num_workers=workers, progress=False):
                done += len(bids)
                if time.perf_counter() - t0 > enc_seconds:
                    break
            _sync(device)
            t_enc = time.perf_counter() - t0
    out["encode"] = {
        "pages": done, "seconds": round(t_enc, 2), "pages_per_s": round(done / t_enc, 2), "batch_size": batch,
        "workers": workers, "page_pixels": list(size), "max_visual_tokens": vis_tokens,
        "tokens_per_page": out.pop("tokens_per_page"),
        "peak_gpu_memory_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2) if cuda else None,
        "gpu_utilisation_pct": util.summary(),
    }
    log(f"encode: {out['encode']['pages_per_s']} pages/s, util {out['encode']['gpu_utilisation_pct']}")
    del model, enc
    if cuda:
        torch.cuda.empty_cache()

    # 3. MaxSim
    from vdr.retrieve.maxsim import _MIN_GEMM, _block_tokens, maxsim

    nq = args.maxsim_queries or (16 if small else 512)
    npg = args.maxsim_pages or (200 if small else 10_000)
    ptok = out["encode"]["tokens_per_page"]
    budget = (args.maxsim_budget_mb or (64 if small else 2048)) * 2**20
    g = torch.Generator(device=device).manual_seed(0)

    def unit(n):
        return torch.nn.functional.normalize(torch.randn(n, 128, device=device, generator=g), dim=-1).to(torch.bfloat16)

    qs = [unit(24) for _ in range(nq)]
    ps = [unit(ptok) for _ in range(npg)]
    maxsim(qs[:2], ps[:64], device=device, budget_bytes=budget)  # warm-up
    _sync(device)
    t0 = time.perf_counter()
    reps = 0
    while True:
        scores = maxsim(qs, ps, device=device, budget_bytes=budget)
        reps += 1
        if time.perf_counter() - t0 > (2.0 if small else 10.0) or reps >= 5:
            break
    _sync(device)
    t_ms = (time.perf_counter() - t0) / reps
    qtok = 24 * nq
    flops = 2 * qtok * ptok * npg * 128
    block = _block_tokens(qtok, budget)
    qrows = qtok + (-qtok % _MIN_GEMM)
    rates = {
        "bf16": matmul_tflops(*(3 * (1024 if small else 8192,)), torch.bfloat16, device),
        "fp32": matmul_tflops(*(3 * (1024 if small else 8192,)), torch.float32, device),
    }
    if cuda:
        rates["tf32"] = matmul_tflops(8192, 8192, 8192, torch.float32, device, tf32=True)
    rates["maxsim_block_shape"] = matmul_tflops(qrows, block, 128, torch.float32, device, tf32=cuda)
    gflops = flops / t_ms / 1e9
    out["maxsim"] = {
        "queries": nq, "query_tokens": 24, "pages": npg, "page_tokens": ptok, "input_dtype": "bfloat16",
        "budget_mb": budget // 2**20, "block_tokens": block, "seconds": round(t_ms, 3), "repeats": reps,
        "gflops": round(gflops, 1), "score_checksum": round(float(scores.sum()), 2),
        "matmul_tflops": {k: round(v, 2) for k, v in rates.items()},
        "fraction_of_block_shape_matmul": round(gflops / 1e3 / rates["maxsim_block_shape"], 3),
        "fraction_of_bf16_matmul": round(gflops / 1e3 / rates["bf16"], 3),
    }
    log(f"maxsim: {out['maxsim']['gflops']} GFLOP/s; matmul TFLOP/s {out['maxsim']['matmul_tflops']}")
    del qs, ps, scores
    out["vs_colpali_engine"] = compare_colpali(device, small, budget)
    log(f"vs colpali-engine: {out['vs_colpali_engine']}")
    out["total_seconds"] = round(time.perf_counter() - t_start, 1)
    print(json.dumps(out), flush=True)
    return out


if __name__ == "__main__":
    main()
