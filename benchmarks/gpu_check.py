"""One prepared GPU check for vdr: encode throughput of a ColQwen2.5-sized model and MaxSim GFLOP/s.

Needs nothing from the network. Usage::

    python benchmarks/gpu_check.py                 # on a CUDA machine: full size, < 8 minutes
    python benchmarks/gpu_check.py --small         # tiny model and sizes (auto-selected without CUDA)
    python benchmarks/gpu_check.py --dry-run       # no model: the MaxSim comparison at small sizes (CPU-safe)
    python benchmarks/gpu_check.py --peer-path wheels/flash_maxsim --peer-path wheels/lik   # unpacked peer wheels

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
   Pages go through vdr's :class:`vdr.encode.pipeline.PagePipeline` (workers into pinned memory,
   copies overlapped on a CUDA stream, equal image-token buckets); ``encode.pipeline`` has its
   figures (``wait_s``: the loop waiting for preprocessed pages).
   The warm-up batch runs under ``torch.utils.flop_counter.FlopCounterMode``: ``flops_per_page``,
   hence ``model_tflops_per_s`` and ``mfu_vs_bf16_matmul`` (model-FLOPs utilisation: that rate over
   the bf16 matmul rate measured in step 3). Then colpali-engine's documented loop (its README:
   ``process_images`` -> ``.to(device)`` -> ``model(**batch)``, 2 pages per batch, in one thread)
   runs on the same model and pages: ``colpali_readme_loop``, ``vs_colpali_readme_loop`` (vdr's
   pages/s over it) and ``vectors_vs_readme_loop`` (its first pages' vectors against vdr's:
   largest difference, over the largest magnitude, and the smallest per-token cosine).
3. Scores synthetic multi-vectors (unit-norm, bf16) with :func:`vdr.retrieve.maxsim.maxsim` on the device
   and reports its GFLOP/s (2 x query tokens x page tokens x 128 per second) beside the device's
   measured matmul rates: bf16, fp32 without TF32, TF32, and the TF32 rate of one MaxSim block's own
   GEMM shape ``(query tokens, 128) x (128, block tokens)`` (what ``maxsim`` runs for 16-bit inputs).

4. Compares MaxSim paths (:func:`compare_maxsim`) on the ViDoRe-V2 shape and issue 28's shape:
   vdr's exact fused kernel over a list and over :class:`vdr.retrieve.maxsim.PackedPages`, its
   device top-k, the reference path, float32 queries with float16 pages (vdr's own case; default
   route and the fused IEEE kernel), the opt-in TF32 / bfloat16 variants, colpali-engine's
   ``score_multi_vector`` (``COLPALI_SCORES_BACKEND=torch``, recorded) and, when importable,
   ``flash-maxsim`` and ``late-interaction-kernels`` (their absence is reported): seconds, each
   path's largest absolute and relative difference from the float32 reference, speed-up over
   colpali-engine and ratio to the faster peer; then sweeps the fused kernel's tile sizes.

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
    """A time-stamped progress line on stderr."""
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


#: MaxSim comparison shapes: (queries, query tokens lo-hi, pages, page tokens lo-hi). ViDoRe V2
#: (327 queries of 20-40 tokens, 1,538 pages of 700-1,100 tokens) and issue 28's H200 measurement
#: (1,000 x 20-40 against 2,000 x 700-800); small: a few of each, for CPUs and --dry-run.
MAXSIM_SHAPES = {"vidore_v2": (327, (20, 40), 1538, (700, 1100)), "issue_shape": (1000, (20, 40), 2000, (700, 800))}
MAXSIM_SHAPES_SMALL = {"vidore_v2": (6, (20, 40), 12, (70, 110)), "issue_shape": (8, (20, 40), 16, (70, 80))}
#: What colpali-engine's score_multi_vector is pinned to: its own einsum (colpali-engine >= 0.3.17
#: would otherwise switch to late-interaction-kernels on recent GPUs, COLPALI_SCORES_BACKEND=auto).
COLPALI_BACKEND = "torch"


def peers() -> dict:
    """The published fused MaxSim kernels: ``{pip name: version or None (not installed) and why}``."""
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for dist, module in (("flash-maxsim", "flash_maxsim"), ("late-interaction-kernels", "late_interaction_kernels"),
                         ("colpali-engine", "colpali_engine")):
        try:
            v = version(dist)
            __import__(module)
            out[dist] = {"version": v, "available": True}
        except PackageNotFoundError:
            out[dist] = {"version": None, "available": False, "why": "not installed (pip install " + dist + ")"}
        except Exception as e:  # noqa: BLE001 - installed but not importable here (no Triton, no CUDA)
            out[dist] = {"version": None, "available": False, "why": f"{type(e).__name__}: {str(e)[:120]}"}
    return out


def _inputs(device: str, shape: tuple, seed: int):
    """float16 unit vectors (vdr's stored dtype, flash-maxsim's own) of ``shape`` on ``device``, and
    their float32 originals (the queries the encoder gives vdr)."""
    nq, (qa, qb), npg, (pa, pb) = shape
    g = torch.Generator().manual_seed(seed)
    unit = lambda n: torch.nn.functional.normalize(torch.randn(n, 128, generator=g), dim=-1)  # noqa: E731
    q32 = [unit(int(n)) for n in torch.randint(qa, qb + 1, (nq,), generator=g)]
    p32 = [unit(int(n)) for n in torch.randint(pa, pb + 1, (npg,), generator=g)]
    return ([q.to(device) for q in q32], [q.half().to(device) for q in q32], [p.half().to(device) for p in p32])


def _timed(fn, device: str, repeats: int = 3):
    """``(best seconds of repeats after one warm-up, the last result)``."""
    res = fn()
    _sync(device)
    best = float("inf")
    for _ in range(repeats):
        _sync(device)
        t0 = time.perf_counter()
        res = fn()
        _sync(device)
        best = min(best, time.perf_counter() - t0)
    return best, res


def _diff(scores, ref: torch.Tensor) -> dict:
    """Largest absolute and relative difference of ``scores`` from the float32 reference."""
    s = torch.as_tensor(scores).float().cpu()
    d = (s - ref).abs()
    return {"max_abs_diff": float(d.max()), "max_rel_diff": float((d / ref.abs().clamp_min(1e-12)).max()),
            "top1_agreement": round(float((s.argmax(1) == ref.argmax(1)).float().mean()), 4)}


def _env(name: str, value: str | None):
    """A context that sets (or removes, for ``None``) one environment variable."""
    from contextlib import contextmanager

    @contextmanager
    def ctx():
        old = os.environ.get(name)
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
        try:
            yield
        finally:
            if old is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = old

    return ctx()


def maxsim_paths(device: str, q32, q16, p16, budget: int) -> dict:
    """Every MaxSim path to time on one shape: ``{name: (callable, inputs note)}``; the float16
    inputs are those of the peers, the float32 queries with float16 pages are vdr's own case."""
    from vdr.retrieve.maxsim import PackedPages, maxsim, maxsim_topk

    packed = PackedPages.pack(p16, device=device)
    paths = {
        "vdr_exact": lambda: maxsim(q16, p16, device=device, budget_bytes=budget),
        "vdr_exact_packed": lambda: maxsim(q16, packed, device=device, budget_bytes=budget),
        "vdr_topk100_packed": lambda: maxsim_topk(q16, packed, min(100, len(p16)), device=device, budget_bytes=budget),
        "vdr_reference_path": lambda: _with_env("VDR_MAXSIM_FUSED", "0", maxsim, q16, p16, device=device, budget_bytes=budget),
        "vdr_fp32_queries": lambda: maxsim(q32, p16, device=device, budget_bytes=budget),
        "vdr_fp32_queries_fused": lambda: _with_env("VDR_MAXSIM_FUSED", "all", maxsim, q32, p16, device=device, budget_bytes=budget),
        "vdr_tf32_variant": lambda: maxsim(q32, p16, device=device, budget_bytes=budget, precision="tf32"),
        "vdr_bf16_variant": lambda: maxsim(q16, p16, device=device, budget_bytes=budget, precision="bf16"),
    }
    try:
        from colpali_engine.utils.processing_utils import BaseVisualRetrieverProcessor

        paths["colpali_engine"] = lambda: _with_env("COLPALI_SCORES_BACKEND", COLPALI_BACKEND, BaseVisualRetrieverProcessor.score_multi_vector,
                                                    q16, p16, batch_size=128, device=device)
    except Exception as e:  # noqa: BLE001 - reported
        paths["colpali_engine"] = f"not importable: {type(e).__name__}: {e}"
    if device.startswith("cuda"):
        paths.update(_peer_paths(device, q16, p16))
    else:
        paths["flash_maxsim"] = paths["late_interaction_kernels"] = "not timed: needs CUDA"
    return paths


def _with_env(name: str, value: str, fn, *args, **kwargs):
    with _env(name, value):
        return fn(*args, **kwargs)


def _peer_paths(device: str, q16, p16) -> dict:
    """flash-maxsim (``flash_maxsim_batched``: padded queries and pages with their lengths, float16)
    and late-interaction-kernels (``maxsim_varlen``: packed queries and pages, float16) on inputs
    laid out for them once, outside the timing; a string where the package is missing."""
    out: dict = {}
    q_len = torch.tensor([q.shape[0] for q in q16], dtype=torch.int32, device=device)
    d_len = torch.tensor([p.shape[0] for p in p16], dtype=torch.int32, device=device)
    try:
        from flash_maxsim import flash_maxsim_batched

        Qp = torch.nn.utils.rnn.pad_sequence(q16, batch_first=True)
        Dp = torch.nn.utils.rnn.pad_sequence(p16, batch_first=True)
        out["flash_maxsim"] = lambda: flash_maxsim_batched(Qp, Dp, doc_lengths=d_len, shared_docs=True, query_lengths=q_len)
    except ImportError as e:
        out["flash_maxsim"] = f"not installed ({e})"
    try:
        from late_interaction_kernels import maxsim_varlen

        Qv, Dv = torch.cat(q16), torch.cat(p16)
        cu_q = torch.nn.functional.pad(torch.cumsum(q_len, 0), (1, 0)).to(torch.int32)
        cu_d = torch.nn.functional.pad(torch.cumsum(d_len, 0), (1, 0)).to(torch.int32)
        mq, md = int(q_len.max()), int(d_len.max())
        out["late_interaction_kernels"] = lambda: maxsim_varlen(Qv, Dv, cu_q, cu_d, mq, md)
    except ImportError as e:
        out["late_interaction_kernels"] = f"not installed ({e})"
    return out


def compare_maxsim(device: str, small: bool, budget: int, *, repeats: int = 3) -> dict:
    """vdr's MaxSim paths against the published fused kernels and colpali-engine on the ViDoRe-V2
    shape and issue 28's shape (see :data:`MAXSIM_SHAPES`), in one run, on ``device``.

    Every path scores the same float16 unit vectors (the float32 queries too for vdr's own case),
    already on the device; time = best of ``repeats`` after a warm-up (Triton compiles). Each path's
    scores are compared with the float32 reference (vdr's reference path on float32 copies, TF32
    off): ``max_abs_diff``, ``max_rel_diff`` (goal for vdr's exact paths: <= 1e-5), top-1 agreement.
    ``speedup_vs_colpali_engine`` and ``vs_fastest_peer`` (the faster of flash-maxsim and
    late-interaction-kernels: time ratio peer / path, >= 0.9 is the goal for ``vdr_exact_packed``).
    colpali-engine runs with ``COLPALI_SCORES_BACKEND`` pinned to :data:`COLPALI_BACKEND` (recorded).
    """
    from vdr.retrieve.maxsim import TopK, maxsim

    out: dict = {"peers": peers(), "colpali_scores_backend": COLPALI_BACKEND, "device": device}
    old_tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        for seed, (k, shape) in enumerate((MAXSIM_SHAPES_SMALL if small else MAXSIM_SHAPES).items()):
            q32, q16, p16 = _inputs(device, shape, seed=seed)
            with _env("VDR_MAXSIM_FUSED", "0"):
                ref16 = maxsim([q.float() for q in q16], [p.float() for p in p16], device=device, budget_bytes=budget)
                ref32 = maxsim(q32, [p.float() for p in p16], device=device, budget_bytes=budget)
            res: dict = {"queries": shape[0], "pages": shape[2], "query_tokens": sum(q.shape[0] for q in q16),
                         "page_tokens": sum(p.shape[0] for p in p16), "paths": {}}
            for name, fn in maxsim_paths(device, q32, q16, p16, budget).items():
                if isinstance(fn, str):
                    res["paths"][name] = {"skipped": fn}
                    continue
                try:
                    t, scores = _timed(fn, device, repeats)
                except Exception as e:  # noqa: BLE001 - a path that fails is reported, the others go on
                    res["paths"][name] = {"error": f"{type(e).__name__}: {str(e)[:200]}"}
                    continue
                ref = ref32 if name.startswith(("vdr_fp32", "vdr_tf32")) else ref16
                if isinstance(scores, TopK):  # top-k: compare the kept scores with the reference's at those pages
                    diff = _diff(scores.scores, ref.gather(1, scores.indices))
                else:
                    diff = _diff(scores, ref)
                res["paths"][name] = {"seconds": round(t, 5), **diff,
                                      "gflops": round(2 * res["query_tokens"] * res["page_tokens"] * 128 / t / 1e9, 1)}
            _ratios(res["paths"])
            out[k] = res
            log(f"maxsim {k}: " + ", ".join(f"{n} {p.get('seconds', p.get('skipped') or p.get('error'))}" for n, p in res["paths"].items()))
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old_tf32
    return out


def _ratios(paths: dict) -> None:
    """Add ``speedup_vs_colpali_engine`` and ``vs_fastest_peer`` to every timed path."""
    ce = paths.get("colpali_engine", {}).get("seconds")
    peer_times = [paths[p]["seconds"] for p in ("flash_maxsim", "late_interaction_kernels") if "seconds" in paths.get(p, {})]
    fastest = min(peer_times) if peer_times else None
    for p in paths.values():
        if "seconds" in p:
            p["speedup_vs_colpali_engine"] = round(ce / p["seconds"], 3) if ce else None
            p["vs_fastest_peer"] = round(fastest / p["seconds"], 3) if fastest else None


def sweep_fused_config(device: str, budget: int) -> dict:
    """Tile sizes of the fused kernel (:data:`vdr.retrieve.maxsim_gpu.CONFIG`) on the issue's shape,
    packed float16 pages: ``{"BMxBNwWsS": [seconds, max abs diff from the default config]}``."""
    import vdr.retrieve.maxsim_gpu as G
    from vdr.retrieve.maxsim import PackedPages, maxsim

    q32, q16, p16 = _inputs(device, MAXSIM_SHAPES["issue_shape"], seed=7)
    packed = PackedPages.pack(p16, device=device)
    default = dict(G.CONFIG)
    _t, base = _timed(lambda: maxsim(q16, packed, device=device, budget_bytes=budget), device, 1)
    sweep = {}
    try:
        for bm, bn, w, st in [(64, 64, 4, 2), (128, 64, 8, 3), (128, 128, 8, 3), (64, 128, 4, 3), (128, 32, 4, 3),
                              (256, 64, 8, 3), (128, 64, 4, 4), (64, 32, 4, 3)]:
            G.CONFIG.update(bm=bm, bn=bn, num_warps=w, num_stages=st)
            key = f"{bm}x{bn}w{w}s{st}"
            try:
                t, s_cfg = _timed(lambda: maxsim(q16, packed, device=device, budget_bytes=budget), device, 2)
                sweep[key] = [round(t, 5), float((s_cfg - base).abs().max())]
            except Exception as e:  # noqa: BLE001 - a config that does not compile is reported
                sweep[key] = f"{type(e).__name__}: {str(e)[:80]}"
    finally:
        G.CONFIG.clear()
        G.CONFIG.update(default)
    return sweep


def dry_run(device: str) -> dict:
    """``--dry-run``: the MaxSim comparison at small sizes on ``device`` (every vdr path, colpali-engine;
    the peer kernels only on CUDA) and the peers' presence; one JSON line, no model."""
    t0 = time.perf_counter()
    out = {"dry_run": True, "device": device, "torch": torch.__version__, "cpus": os.cpu_count(),
           "maxsim_compare": compare_maxsim(device, True, 64 * 2**20, repeats=1)}
    out["total_seconds"] = round(time.perf_counter() - t0, 1)
    print(json.dumps(out), flush=True)
    return out


def count_flops(fn, *args, **kwargs) -> tuple[object, int]:
    """``(fn(*args, **kwargs), FLOPs)``: the floating-point operations of the call as counted by
    ``torch.utils.flop_counter.FlopCounterMode`` (matmuls, convolutions and SDPA attention; a
    flash-attn kernel, a custom op, counts 0, which leaves out about 4% of ColQwen2.5's page cost)."""
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        out = fn(*args, **kwargs)
    return out, int(counter.get_total_flops())


def readme_loop(model, processor, paths: list[str], batch_size: int, device: str, seconds: float) -> dict:
    """colpali-engine's documented encode loop (its README): ``processor.process_images(images)``,
    ``.to(model.device)``, ``model(**batch)`` under ``torch.no_grad()``, batch after batch in this
    thread, ``batch_size`` pages at a time (the README's example passes 2 images).

    Returns:
        ``{"pages", "seconds", "pages_per_s", "batch_size", "first_batch"}``: ``first_batch`` the
        real-token vectors (float32 CPU ``(n_tokens, dim)``, attention mask 1) of the first batch's pages.
    """
    from PIL import Image

    done, first, t0 = 0, None, time.perf_counter()
    for i in range(0, len(paths), batch_size):
        images = [Image.open(p).convert("RGB") for p in paths[i:i + batch_size]]
        batch = processor.process_images(images).to(device)
        with torch.no_grad():
            emb = model(**batch)
        if first is None:
            mask = batch["attention_mask"].bool()
            first = [emb[j][mask[j]].float().cpu() for j in range(len(images))]
        done += len(images)
        if time.perf_counter() - t0 > seconds:
            break
    _sync(device)
    took = time.perf_counter() - t0
    return {"pages": done, "seconds": round(took, 2), "pages_per_s": round(done / took, 4), "batch_size": batch_size,
            "first_batch": first}


def vector_agreement(ours: list, theirs: list) -> dict:
    """How close two lists of per-page vectors ``(n_tokens, dim)`` are: same token counts, largest
    absolute difference, that difference over the largest magnitude (bf16's unit roundoff is
    2**-8 = 0.0039), and the smallest per-token cosine similarity."""
    same = [a.shape == b.shape for a, b in zip(ours, theirs)]
    if not all(same):
        return {"same_token_counts": False, "shapes": [[list(a.shape), list(b.shape)] for a, b in zip(ours, theirs)]}
    diff = max(float((a - b).abs().max()) for a, b in zip(ours, theirs))
    scale = max(float(b.abs().max()) for b in theirs)
    cos = min(float(torch.nn.functional.cosine_similarity(a, b, dim=-1).min()) for a, b in zip(ours, theirs))
    return {"same_token_counts": True, "pages": len(ours), "max_abs_diff": diff, "max_diff_over_max_abs": round(diff / scale, 6),
            "min_token_cosine": round(cos, 6)}


def _encode_rates(e: dict, bf16_tflops: float) -> None:
    """Add ``model_tflops_per_s`` and ``mfu_vs_bf16_matmul`` (model-FLOPs utilisation) to the encode figures ``e``."""
    tflops = e["flops_per_page"] * e["pages_per_s"] / 1e12
    e["model_tflops_per_s"] = float(f"{tflops:.4g}")
    e["bf16_matmul_tflops"] = float(f"{bf16_tflops:.4g}")
    e["mfu_vs_bf16_matmul"] = float(f"{tflops / bf16_tflops:.4g}")
    log(f"encode: {e['model_tflops_per_s']} TFLOP/s, MFU {e['mfu_vs_bf16_matmul']} of the measured bf16 matmul rate")


def main(argv: list[str] | None = None) -> dict:
    """Run the check; prints progress on stderr and the JSON line on stdout; returns the figures."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--small", action="store_true", help="tiny model and sizes (default when CUDA is not available)")
    ap.add_argument("--device", default=None, help="cuda or cpu (default: cuda when available)")
    ap.add_argument("--pages", type=int, default=None, help="pages to encode (full: 2048, small: 8)")
    ap.add_argument("--batch-size", type=int, default=None, help="pages per forward pass (full: 16, small: 4)")
    ap.add_argument("--workers", type=int, default=None, help="DataLoader workers (full: min(8, cpus), small: 1)")
    ap.add_argument("--encode-seconds", type=float, default=None, help="stop encoding after this long (full: 150)")
    ap.add_argument("--readme-seconds", type=float, default=None,
                    help="stop colpali-engine's README loop after this long (full: 45, small: 20)")
    ap.add_argument("--readme-batch-size", type=int, default=2, help="pages per batch of the README loop (its example: 2)")
    ap.add_argument("--encode-only", action="store_true", help="stop after the encode figures (no MaxSim sections)")
    ap.add_argument("--max-visual-tokens", type=int, default=None, help="visual tokens per page (full: 768, small: 16)")
    ap.add_argument("--maxsim-queries", type=int, default=None, help="queries of 24 tokens (full: 512, small: 16)")
    ap.add_argument("--maxsim-pages", type=int, default=None, help="pages (full: 10000, small: 200)")
    ap.add_argument("--maxsim-budget-mb", type=int, default=None, help="MaxSim block budget (full: 2048, small: 64)")
    ap.add_argument("--attn", default=None, help="attention implementation (default flash_attention_2 if installed, else sdpa)")
    ap.add_argument("--peer-path", action="append", default=[],
                    help="a folder put first on sys.path (repeatable): unpacked wheels of flash-maxsim /"
                         " late-interaction-kernels on a machine without a package index")
    ap.add_argument("--dry-run", action="store_true",
                    help="no model, no encoding: the MaxSim comparison at small sizes on this device (CPU-safe), and"
                         " which peer kernels are installed")
    args = ap.parse_args(argv)
    for folder in reversed(args.peer_path):
        sys.path.insert(0, str(Path(folder).resolve()))
    if args.dry_run:
        return dry_run(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
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
        warm, flops = count_flops(enc.encode_pages, paths[:batch], batch, num_workers=0)  # the warm-up too
        out["tokens_per_page"] = int(warm[0].shape[0])
        flops_per_page = flops / len(warm)
        log(f"{flops_per_page / 1e12:.2f} TFLOP per page (FlopCounterMode)")
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
        readme = readme_loop(model, processor, paths, args.readme_batch_size, device,
                             args.readme_seconds or (20.0 if small else 45.0))
    agreement = vector_agreement(warm[:len(readme["first_batch"])], readme.pop("first_batch"))
    log(f"colpali-engine README loop: {readme['pages_per_s']} pages/s; vectors {agreement}")
    out["encode"] = {
        "pages": done, "seconds": round(t_enc, 2), "pages_per_s": round(done / t_enc, 4), "batch_size": batch,
        "workers": workers, "page_pixels": list(size), "max_visual_tokens": vis_tokens,
        "tokens_per_page": out.pop("tokens_per_page"),
        "peak_gpu_memory_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2) if cuda else None,
        "gpu_utilisation_pct": util.summary(),
        "pipeline": enc.pipeline_stats.to_json() if enc.pipeline_stats is not None else None,
        "flops_per_page": flops_per_page,
        "colpali_readme_loop": readme,
        "vs_colpali_readme_loop": round(done / t_enc / readme["pages_per_s"], 3),
        "vectors_vs_readme_loop": agreement,
    }
    log(f"encode: {out['encode']['pages_per_s']} pages/s, util {out['encode']['gpu_utilisation_pct']}")
    del model, enc
    if cuda:
        torch.cuda.empty_cache()

    if args.encode_only:  # the encode figures alone, against this device's bf16 matmul rate
        _encode_rates(out["encode"], matmul_tflops(*(3 * (1024 if small else 8192,)), torch.bfloat16, device))
        out["total_seconds"] = round(time.perf_counter() - t_start, 1)
        print(json.dumps(out), flush=True)
        return out

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
    _encode_rates(out["encode"], rates["bf16"])
    del qs, ps, scores
    out["maxsim_compare"] = compare_maxsim(device, small, budget)
    if cuda:
        out["fused_config_sweep_s"] = sweep_fused_config(device, budget)
    out["total_seconds"] = round(time.perf_counter() - t_start, 1)
    print(json.dumps(out), flush=True)
    return out


if __name__ == "__main__":
    main()
