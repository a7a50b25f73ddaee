"""Tiny, randomly initialised rerankers built locally (no network) for the rerank tests.

``build_tiny_cross_encoder(folder)`` saves a one-label BERT sequence classifier (a cross-encoder as
sentence-transformers' ``CrossEncoder`` and rerankers' ``TransformerRanker`` load it) with the
word-level tokenizer of :mod:`tiny_st` (pairs as ``[CLS] a [SEP] b [SEP]``).

``build_tiny_monovlm(folder)`` saves a tiny Qwen2-VL causal LM (as MonoQwen2-VL is) and its
processor (the BPE tokenizer of :mod:`tiny_models` with ``True`` / ``False`` tokens and a chat
template, Qwen2-VL's image processor), which rerankers' ``MonoVLMRanker`` loads.

Their scores are meaningless (random weights); only their plumbing is tested.
"""

from __future__ import annotations

from pathlib import Path

import pytest

CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for c in message['content'] %}{% if c['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif c['type'] == 'text' %}{{ c['text'] }}{% endif %}{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def build_tiny_cross_encoder(folder: str | Path, *, hidden: int = 32, layers: int = 1, seed: int = 0) -> Path:
    """Save a tiny one-label BERT cross-encoder + tokenizer into ``folder`` and return it."""
    import torch
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
    from transformers import BertConfig, BertForSequenceClassification, PreTrainedTokenizerFast

    from tiny_st import SPECIALS, WORDS

    folder = Path(folder)
    vocab = {w: i for i, w in enumerate(SPECIALS + [w for w in WORDS if w != "poison"] + ["page", "text", "query", "the", "of"])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
                                                       special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                                   sep_token="[SEP]", mask_token="[MASK]", model_max_length=128)
    cfg = BertConfig(vocab_size=len(vocab), hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=2,
                     intermediate_size=2 * hidden, max_position_embeddings=128, num_labels=1)
    torch.manual_seed(seed)
    model = BertForSequenceClassification(cfg).eval()
    model.save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder


def build_tiny_monovlm(folder: str | Path, seed: int = 0) -> Path:
    """Save a tiny Qwen2-VL (hidden 64, 2 layers, vision depth 1, patch 14) + processor into ``folder``."""
    import torch
    from transformers import (Qwen2TokenizerFast, Qwen2VLConfig, Qwen2VLForConditionalGeneration, Qwen2VLImageProcessor,
                              Qwen2VLProcessor)

    from tiny_models import QWEN_MAX_PIXELS, QWEN_MIN_PIXELS, QWEN_SPECIALS, _bpe

    folder = Path(folder)
    tok = Qwen2TokenizerFast(tokenizer_object=_bpe(QWEN_SPECIALS + ["True", "False"]), eos_token="<|endoftext|>",
                             pad_token="<|endoftext|>", unk_token=None, bos_token=None)
    ip = Qwen2VLImageProcessor(min_pixels=QWEN_MIN_PIXELS, max_pixels=QWEN_MAX_PIXELS, patch_size=14, merge_size=2, temporal_patch_size=2)
    try:
        from transformers import Qwen2VLVideoProcessor

        extra = {"video_processor": Qwen2VLVideoProcessor()}
    except Exception:  # pragma: no cover - older transformers
        extra = {}
    proc = Qwen2VLProcessor(image_processor=ip, tokenizer=tok, chat_template=CHAT_TEMPLATE, **extra)
    ids = {s: tok.convert_tokens_to_ids(s) for s in QWEN_SPECIALS}
    rope = {"rope_type": "default", "mrope_section": [2, 3, 3], "rope_theta": 10000.0}
    cfg = Qwen2VLConfig(
        text_config=dict(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, max_position_embeddings=512, rope_scaling={"type": "mrope", "mrope_section": [2, 3, 3]},
                         rope_parameters=rope, tie_word_embeddings=False, bos_token_id=ids["<|endoftext|>"],
                         eos_token_id=ids["<|endoftext|>"]),
        vision_config=dict(depth=1, embed_dim=32, hidden_size=64, num_heads=2, patch_size=14, spatial_merge_size=2,
                           temporal_patch_size=2, in_channels=3, mlp_ratio=2),
        image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"], vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"])
    torch.manual_seed(seed)
    model = Qwen2VLForConditionalGeneration(cfg).eval()
    model.save_pretrained(folder)
    proc.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def cross_encoder_dir(tmp_path_factory) -> Path:
    """The tiny cross-encoder of :func:`build_tiny_cross_encoder`, built once per session."""
    pytest.importorskip("sentence_transformers")
    return build_tiny_cross_encoder(tmp_path_factory.mktemp("rerank") / "tiny-cross-encoder")


@pytest.fixture(scope="session")
def monovlm_dir(tmp_path_factory) -> Path:
    """The tiny MonoQwen2-VL-like model of :func:`build_tiny_monovlm`, built once per session."""
    pytest.importorskip("rerankers")
    return build_tiny_monovlm(tmp_path_factory.mktemp("rerank") / "tiny-monovlm")
