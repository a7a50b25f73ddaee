"""Tiny, randomly initialised colpali-engine checkpoints built locally (no network) for tests.

``build_colqwen2_5(folder)`` and ``build_colpali(folder)`` save a real colpali-engine model
(``ColQwen2_5`` / ``ColPali``) and its processor with a tokenizer trained here on a few sentences.
``make_corpus(folder, sizes)`` writes a corpus folder of random RGB PNG pages.

Import the fixtures into a test module with ``from tiny_models import colqwen_dir, colpali_dir``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

SENTENCES = [
    "Describe the image.",
    "What is the revenue in 2023?",
    "Which page shows the carbon emissions of the company?",
    "user assistant query document page table figure chart",
    "The quick brown fox jumps over the lazy dog.",
] * 4

QWEN_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
                 "<|image_pad|>", "<|video_pad|>", "<|vision_pad|>"]
# Qwen2-VL processor settings of the tiny model: patch 14, merge 2 -> one image token per 28x28.
QWEN_MIN_PIXELS = 28 * 28 * 4
QWEN_MAX_PIXELS = 28 * 28 * 16


def _bpe(specials: list[str], unk: str | None = None):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token=unk))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=320, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(SENTENCES, trainer)
    return tok


def build_colqwen2_5(folder: str | Path, seed: int = 0) -> Path:
    """Save a tiny ColQwen2.5 (hidden 64, 2 layers, vision depth 1, patch 14) + processor to ``folder``."""
    import torch
    from colpali_engine.models import ColQwen2_5, ColQwen2_5_Processor
    from transformers import Qwen2_5_VLConfig, Qwen2TokenizerFast, Qwen2VLImageProcessor

    folder = Path(folder)
    tok = Qwen2TokenizerFast(tokenizer_object=_bpe(QWEN_SPECIALS), eos_token="<|endoftext|>", pad_token="<|endoftext|>",
                             unk_token=None, bos_token=None)
    ip = Qwen2VLImageProcessor(min_pixels=QWEN_MIN_PIXELS, max_pixels=QWEN_MAX_PIXELS, patch_size=14, merge_size=2,
                               temporal_patch_size=2)
    try:
        from transformers import Qwen2VLVideoProcessor

        vp = Qwen2VLVideoProcessor()
    except Exception:  # pragma: no cover - older transformers
        vp = None
    proc = ColQwen2_5_Processor(image_processor=ip, tokenizer=tok, video_processor=vp)
    ids = {s: tok.convert_tokens_to_ids(s) for s in QWEN_SPECIALS}
    rope = {"rope_type": "default", "mrope_section": [2, 3, 3], "rope_theta": 10000.0}
    cfg = Qwen2_5_VLConfig(
        text_config=dict(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                         rope_scaling={"type": "mrope", "mrope_section": [2, 3, 3]}, rope_parameters=rope,
                         tie_word_embeddings=False, bos_token_id=ids["<|endoftext|>"], eos_token_id=ids["<|endoftext|>"]),
        vision_config=dict(depth=1, hidden_size=32, intermediate_size=64, num_heads=2, patch_size=14,
                           spatial_merge_size=2, temporal_patch_size=2, out_hidden_size=64, window_size=56,
                           fullatt_block_indexes=[0], in_channels=3),
        image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"], vision_end_token_id=ids["<|vision_end|>"],
    )
    torch.manual_seed(seed)
    model = ColQwen2_5(cfg).eval()
    model.save_pretrained(folder)
    proc.save_pretrained(folder)
    return folder


def build_colpali(folder: str | Path, seed: int = 0) -> Path:
    """Save a tiny ColPali (Gemma hidden 64, 2 layers; SigLIP 28x28, patch 14 -> 4 image tokens) + processor."""
    import torch
    from colpali_engine.models import ColPali, ColPaliProcessor
    from transformers import GemmaTokenizerFast, PaliGemmaConfig, SiglipImageProcessor

    folder = Path(folder)
    specials = ["<pad>", "<eos>", "<bos>", "<unk>", "<image>"]
    tok = GemmaTokenizerFast(tokenizer_object=_bpe(specials, unk="<unk>"), bos_token="<bos>", eos_token="<eos>",
                             pad_token="<pad>", unk_token="<unk>", additional_special_tokens=["<image>"])
    ip = SiglipImageProcessor(size={"height": 28, "width": 28})
    ip.image_seq_length = 4
    proc = ColPaliProcessor(image_processor=ip, tokenizer=tok)
    V = len(tok)
    cfg = PaliGemmaConfig(
        text_config=dict(model_type="gemma", vocab_size=V, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=1, head_dim=16, max_position_embeddings=512,
                         pad_token_id=0, bos_token_id=2, eos_token_id=1),
        vision_config=dict(model_type="siglip_vision_model", hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                           num_attention_heads=2, image_size=28, patch_size=14, projection_dim=64),
        image_token_index=tok.convert_tokens_to_ids("<image>"), projection_dim=64, hidden_size=64, vocab_size=V,
        pad_token_id=0,
    )
    torch.manual_seed(seed)
    model = ColPali(cfg).eval()
    model.save_pretrained(folder)
    proc.save_pretrained(folder)
    return folder


def random_image(w: int, h: int, seed: int):
    from PIL import Image

    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8), "RGB")


def make_corpus(folder: str | Path, sizes: list[tuple[int, int]], seed: int = 0) -> Path:
    """A corpus folder with one random PNG page per ``(width, height)`` in ``sizes`` (ids ``doc.pdf#1``...)."""
    from vdr.corpus import Page, image_name, write_pages

    folder = Path(folder)
    pages = []
    for i, (w, h) in enumerate(sizes):
        cid = f"doc.pdf#{i + 1}"
        rel = image_name(cid)
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        random_image(w, h, seed + i).save(folder / rel)
        pages.append(Page(cid, "doc.pdf", i + 1, w, h, 72.0, rel))
    write_pages(folder / "pages.jsonl", pages)
    return folder


def make_text_inputs(root: Path, sizes: list[tuple[int, int]], texts: list[str], queries: dict, keywords: dict,
                     qrels: dict) -> dict[str, Path]:
    """Under ``root``: a corpus of random pages (:func:`make_corpus`) whose page ``i`` has text
    ``texts[i]`` (``""``: no text layer), ``queries.jsonl``, a ``kw.jsonl`` rewrite and BEIR
    ``qrels.tsv`` (``{query: {page: grade}}``). Returns their paths (``root``, ``corpus``,
    ``queries``, ``kw``, ``qrels``)."""
    import vdr
    from vdr.corpus import Page, write_pages

    corpus = make_corpus(root / "corpus", sizes)
    pages = [Page(**{**p.__dict__, "text": t, "text_source": "pdf" if t else "none"}) for p, t in zip(vdr.Corpus.load(corpus).pages(), texts)]
    write_pages(corpus / "pages.jsonl", pages)
    (root / "queries.jsonl").write_text("".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in queries.items()))
    (root / "kw.jsonl").write_text("".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in keywords.items()))
    (root / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(
        f"{q}\t{d}\t{g}\n" for q, ds in qrels.items() for d, g in ds.items()))
    return {"root": root, "corpus": corpus, "queries": root / "queries.jsonl", "kw": root / "kw.jsonl", "qrels": root / "qrels.tsv"}


@pytest.fixture(scope="session")
def colqwen_dir(tmp_path_factory) -> Path:
    return build_colqwen2_5(tmp_path_factory.mktemp("models") / "tiny-colqwen2.5")


@pytest.fixture(scope="session")
def colpali_dir(tmp_path_factory) -> Path:
    return build_colpali(tmp_path_factory.mktemp("models") / "tiny-colpali")


@pytest.fixture(scope="session")
def colqwen(colqwen_dir):
    from vdr.encode import LateInteractionEncoder

    return LateInteractionEncoder.load(colqwen_dir, device="cpu")


def config_of(folder: Path) -> dict:
    return json.loads((Path(folder) / "config.json").read_text())
