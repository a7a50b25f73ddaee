"""A tiny sentence-transformers model built locally (no network) for the dense-retrieval tests.

``build_tiny_st(folder)`` saves a real sentence-transformers model: a BERT with no transformer
layer (word embeddings + LayerNorm; position and token-type embeddings and the special tokens' embeddings zeroed), a word-level
tokenizer over :data:`WORDS` and mean pooling. Its embedding of a text is therefore a normalised
bag of words: a text that shares a word with the query scores higher, which makes retrieval
results predictable. The word ``poison`` has a NaN embedding (fault injection: a non-finite vector).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

WORDS = (
    "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau upsilon"
    " phi chi psi omega zebra lion tiger wolf fox dog cat bird fish river mountain city report revenue wind poison"
).split()
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def build_tiny_st(folder: str | Path, *, max_seq_length: int = 16, dim: int = 256, seed: int = 0) -> Path:
    """Save the tiny model into ``folder`` (created) and return it."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers import models as st_models
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    folder = Path(folder)
    hf = folder.parent / (folder.name + "-hf")
    vocab = {w: i for i, w in enumerate(SPECIALS + WORDS)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
                                   sep_token="[SEP]", mask_token="[MASK]", model_max_length=64)
    cfg = BertConfig(vocab_size=len(vocab), hidden_size=dim, num_hidden_layers=0, num_attention_heads=2, intermediate_size=dim,
                     max_position_embeddings=64)
    torch.manual_seed(seed)
    model = BertModel(cfg, add_pooling_layer=False)
    with torch.no_grad():
        emb = model.embeddings
        emb.word_embeddings.weight.normal_()
        for special in SPECIALS:  # zero vectors: after LayerNorm they add nothing, so a text is the bag of its words
            emb.word_embeddings.weight[vocab[special]] = 0.0
        emb.word_embeddings.weight[vocab["poison"]] = float("nan")
        emb.position_embeddings.weight.zero_()
        emb.token_type_embeddings.weight.zero_()
    model.save_pretrained(hf)
    fast.save_pretrained(hf)
    tr = st_models.Transformer(str(hf), max_seq_length=max_seq_length)
    SentenceTransformer(modules=[tr, st_models.Pooling(dim, "mean")], device="cpu").save(str(folder))
    return folder


@pytest.fixture(scope="session")
def tiny_st_dir(tmp_path_factory) -> str:
    """The tiny model of :func:`build_tiny_st`, built once per test session (its folder as a str)."""
    pytest.importorskip("sentence_transformers")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the transformers load report of the hand-built BERT
        return str(build_tiny_st(tmp_path_factory.mktemp("st") / "tiny"))
