"""A tiny sentence-transformers model built locally (no network) for the dense-retrieval tests.

``build_tiny_st(folder)`` saves a real sentence-transformers model: a BERT with no transformer
layer (word embeddings + LayerNorm; position and token-type embeddings and the special tokens' embeddings zeroed), a word-level
tokenizer over :data:`WORDS` and mean pooling. Its embedding of a text is therefore a normalised
bag of words: a text that shares a word with the query scores higher, which makes retrieval
results predictable. The word ``poison`` has a NaN embedding (fault injection: a non-finite vector).
``prompts`` / ``default_prompt_name`` are saved in ``config_sentence_transformers.json`` as a model
declares them; ``vectors`` (words' embeddings set by hand, new words added to the vocabulary) make
cases whose ranking a prompt decides.

``build_tiny_ance(folder)`` saves a tiny, randomly initialised ANCE checkpoint laid out as ANCE's
and Pyserini's are (``config.json`` naming ``RobertaDot_NLL_LN``, ``roberta.*`` +
``embeddingHead.*`` + ``norm.*`` weights, a byte-level BPE RoBERTa tokenizer trained here).
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


def build_tiny_st(folder: str | Path, *, max_seq_length: int = 16, dim: int = 256, seed: int = 0, prompts: dict | None = None,
                  default_prompt_name: str | None = None, vectors: dict | None = None, include_prompt: bool = True) -> Path:
    """Save the tiny model into ``folder`` (created) and return it.

    Args:
        prompts: ``{name: prompt}`` the model declares (sentence-transformers adds its own empty
            ``query`` / ``document`` entries unless given).
        default_prompt_name: the declared ``default_prompt_name`` (a key of ``prompts``).
        vectors: ``{word: dim floats}``: those words' embeddings, set after the random ones; words
            not in :data:`WORDS` are appended to the vocabulary (the other words keep their ids).
        include_prompt: the mean pooling's ``include_prompt`` (false: prompt tokens are not pooled).
    """
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers import models as st_models
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    folder = Path(folder)
    hf = folder.parent / (folder.name + "-hf")
    vocab = {w: i for i, w in enumerate(SPECIALS + WORDS + [w for w in vectors or {} if w not in WORDS])}
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
        for word, vec in (vectors or {}).items():
            emb.word_embeddings.weight[vocab[word]] = torch.tensor(vec, dtype=torch.float32)
    model.save_pretrained(hf)
    fast.save_pretrained(hf)
    tr = st_models.Transformer(str(hf), max_seq_length=max_seq_length)
    SentenceTransformer(modules=[tr, st_models.Pooling(dim, "mean", include_prompt=include_prompt)], device="cpu", prompts=prompts,
                        default_prompt_name=default_prompt_name).save(str(folder))
    return folder


ANCE_SENTENCES = [
    "What was the revenue of the wind division in 2021?",
    "The quick brown fox jumps over the lazy dog near the river.",
    "river mountain city report revenue wind alpha beta gamma",
    "Which city lies at the foot of the mountain?",
] * 4
ANCE_SPECIALS = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]  # RoBERTa's ids 0..4


def build_tiny_ance(folder: str | Path, *, hidden: int = 32, layers: int = 2, seed: int = 0, weights: str = "safetensors",
                    architecture: str = "RobertaDot_NLL_LN") -> Path:
    """Save a tiny, randomly initialised ANCE checkpoint into ``folder`` (created) and return it.

    RoBERTa (``hidden`` units, ``layers`` layers, 514 positions as RoBERTa-base) with the head ANCE
    adds: ``embeddingHead`` (``Linear(hidden, 768)``) and ``norm`` (``LayerNorm(768)``, random
    affine weights so that it is not the identity), saved under ANCE's names (``roberta.*``,
    ``embeddingHead.*``, ``norm.*``) in ``model.safetensors`` or ``pytorch_model.bin``
    (``weights``), with ``config.json`` naming ``architecture`` and a byte-level BPE tokenizer
    (``vocab.json``, ``merges.txt``, ``tokenizer.json``) trained here on a few sentences.
    """
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import RobertaConfig, RobertaModel, RobertaTokenizerFast

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=ANCE_SPECIALS, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    bpe.train_from_iterator(ANCE_SENTENCES, trainer)
    bpe.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0), trim_offsets=True, add_prefix_space=False)
    tok = RobertaTokenizerFast(tokenizer_object=bpe, bos_token="<s>", eos_token="</s>", sep_token="</s>", cls_token="<s>",
                               unk_token="<unk>", pad_token="<pad>", mask_token="<mask>", add_prefix_space=False)
    ids = tok("river")["input_ids"]
    if ids[0] != 0 or ids[-1] != 2 or len(ids) < 3 or len(tok) != bpe.get_vocab_size():  # <s> river </s>, every token
        raise RuntimeError(f"tiny ANCE tokenizer: unexpected ids {ids} / {len(tok)} tokens")
    tok.save_pretrained(folder)
    bpe.model.save(str(folder))  # vocab.json + merges.txt: what RoBERTa's slow tokenizer (Pyserini's) reads
    cfg = RobertaConfig(vocab_size=len(tok), hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=2,
                        intermediate_size=2 * hidden, max_position_embeddings=514, pad_token_id=1, bos_token_id=0, eos_token_id=2,
                        architectures=[architecture])
    torch.manual_seed(seed)
    roberta = RobertaModel(cfg, add_pooling_layer=False)
    head, norm = torch.nn.Linear(hidden, 768), torch.nn.LayerNorm(768)
    with torch.no_grad():
        norm.weight.normal_(1.0, 0.5)
        norm.bias.normal_(0.0, 0.5)
    state = {f"roberta.{k}": v for k, v in roberta.state_dict().items()}
    state.update({"embeddingHead.weight": head.weight, "embeddingHead.bias": head.bias, "norm.weight": norm.weight, "norm.bias": norm.bias})
    state = {k: v.detach().clone().contiguous() for k, v in state.items()}
    if weights == "safetensors":
        from safetensors.torch import save_file

        save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})
    else:
        torch.save(state, str(folder / "pytorch_model.bin"))
    cfg.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_st_dir(tmp_path_factory) -> str:
    """The tiny model of :func:`build_tiny_st`, built once per test session (its folder as a str)."""
    pytest.importorskip("sentence_transformers")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the transformers load report of the hand-built BERT
        return str(build_tiny_st(tmp_path_factory.mktemp("st") / "tiny"))
