"""ANCE checkpoints in the semantic backend: RoBERTa, first token, a linear projection, LayerNorm.

ANCE (Xiong et al. 2021, "Approximate Nearest Neighbor Negative Contrastive Learning for Dense
Text Retrieval", ICLR) embeds a query or a passage alike as

    ``v = LayerNorm(W h_0 + b)``

where ``h_0`` is RoBERTa's last hidden state of the first token (``<s>``), ``W`` (``768 x
hidden``) and ``b`` the checkpoint's ``embeddingHead`` and ``LayerNorm`` its ``norm`` (elementwise
affine, eps 1e-5); relevance is the inner product of the two vectors, which are not normalised.
This is the recipe of Pyserini's ``AnceEncoder`` (``pyserini/encode/_ance.py``:
``norm(embeddingHead(last_hidden_state[:, 0, :]))``, searched with a FAISS inner-product index) and
of ConvSearch-R1's dense retrieval (``ANCE.query_emb`` in its ``index/dense/models.py``). Their
checkpoints (ANCE's own ``RobertaDot_NLL_LN``, Pyserini's ``AnceEncoder``) hold the RoBERTa weights
under ``roberta.*`` and the head as ``embeddingHead.{weight,bias}`` and ``norm.{weight,bias}``.

Defaults the semantic backend takes for ANCE (:class:`vdr.retrieve.semantic.DenseBackend`):
queries are cut at :data:`QUERY_MAX_LENGTH` = 64 tokens (Pyserini's ``AnceQueryEncoder``, ANCE's
and ConvSearch-R1's ``max_query_length``) and passages at :data:`PASSAGE_MAX_LENGTH` = 384
(ConvSearch-R1's ``max_doc_length``, "consistent with Dialog inpainter"), special tokens included;
no L2 normalisation (inner product). Texts are tokenised by the checkpoint's own tokenizer as it is,
as ConvSearch-R1 does (its ``RobertaTokenizer.from_pretrained(path, do_lower_case=True)`` does not
lower-case under transformers 4.50). Pyserini's ``AnceQueryEncoder`` sets ``do_lower_case`` on its
tokenizer, which transformers 4.x's slow tokenizers honour: it lower-cases queries (not passages),
so its query vectors are vdr's of the lower-cased query (tests/test_ance.py checks both against
Pyserini 1.6.0's recorded vectors). Pyserini 1.6.0's ``AnceEncoder`` cannot be loaded under
transformers 5 (``all_tied_weights_keys``); vdr's loader can.

:func:`load_ance` builds a sentence-transformers model of the modules ``Transformer`` (the RoBERTa
encoder) -> ``Pooling`` (first token) -> ``Dense`` (identity activation) -> ``LayerNorm`` holding the
checkpoint's weights, so the semantic backend encodes, batches, caches and exports it (ONNX query
encoder) as any other model.
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path

from ..errors import InputError

__all__ = ["OPT_IN", "ANCE_ARCHITECTURES", "QUERY_MAX_LENGTH", "PASSAGE_MAX_LENGTH", "RECIPE", "ance_reason", "load_ance"]

#: ``config.json`` ``architectures`` entries of ANCE checkpoints: ANCE's training code, Pyserini's encoder.
ANCE_ARCHITECTURES = ("RobertaDot_NLL_LN", "AnceEncoder")
QUERY_MAX_LENGTH = 64
PASSAGE_MAX_LENGTH = 384
#: How a vector is made (recorded in the backend's config).
RECIPE = ("ance: RoBERTa last hidden state of the first token -> embeddingHead (linear) -> norm (LayerNorm);"
          " inner product (Xiong et al. 2021; Pyserini's AnceEncoder)")
#: The option that lets the semantic backend read pickle weights, as the CLI user types it.
OPT_IN = "--backend-option semantic.allow_pickle_weights=true"
_HEAD = ("embeddingHead.weight", "embeddingHead.bias", "norm.weight", "norm.bias")


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _safetensors_keys(path: Path) -> set[str]:
    """The tensor names of a safetensors file, read from its header only (empty on any error)."""
    try:
        with path.open("rb") as f:
            n = int.from_bytes(f.read(8), "little")
            header = json.loads(f.read(n)) if 0 < n < 100_000_000 else {}
    except (OSError, ValueError):
        return set()
    return {k for k in header if k != "__metadata__"} if isinstance(header, dict) else set()


def ance_reason(folder: Path) -> str | None:
    """Why the model folder ``folder`` is an ANCE checkpoint, or ``None`` when it is not one.

    A folder with ``modules.json`` is a sentence-transformers model (never ANCE here). Otherwise it
    is ANCE when its ``config.json`` names an architecture of :data:`ANCE_ARCHITECTURES`, or when it
    is a RoBERTa whose ``model.safetensors`` holds ``embeddingHead`` and ``norm`` weights.
    """
    folder = Path(folder)
    if (folder / "modules.json").is_file():
        return None
    cfg = _read_json(folder / "config.json")
    named = [a for a in cfg.get("architectures") or [] if a in ANCE_ARCHITECTURES]
    if named:
        return f"config.json architectures names {named[0]}"
    if cfg.get("model_type") == "roberta" and set(_HEAD) <= _safetensors_keys(folder / "model.safetensors"):
        return "a RoBERTa checkpoint with embeddingHead and norm weights"
    return None


def _head_weights(folder: Path, allow_pickle: bool = False) -> dict:
    """``{name: float32 tensor}`` of the head (:data:`_HEAD`) from the checkpoint in ``folder``
    (``model.safetensors``; ``pytorch_model.bin`` only with ``allow_pickle``, read by
    :func:`vdr.io.weights.load_state_dict`).

    Raises:
        InputError: no weights file, a pickle without ``allow_pickle``, or weights without the head's tensors.
    """
    import torch

    from ..io.weights import load_state_dict

    st, pt = folder / "model.safetensors", folder / "pytorch_model.bin"
    if st.is_file():
        from safetensors import safe_open

        with safe_open(str(st), framework="pt") as h:
            got = {k: h.get_tensor(k) for k in _HEAD if k in set(h.keys())}
        where = st
    elif pt.is_file():
        state = load_state_dict(pt, allow_pickle=allow_pickle, what="ANCE checkpoint", opt_in=OPT_IN)
        got = {k: state[k] for k in _HEAD if k in state}
        where = pt
    else:
        raise InputError(f"ANCE checkpoint {folder}: no model.safetensors or pytorch_model.bin")
    missing = [k for k in _HEAD if k not in got]
    if missing:
        raise InputError(f"ANCE checkpoint {where}: no {', '.join(missing)} (not an ANCE checkpoint? pass semantic.architecture=sentence-transformers)")
    return {k: v.detach().to(torch.float32) for k, v in got.items()}


def _modules():
    """``(Transformer, Pooling, Dense, LayerNorm)`` of sentence-transformers (6.x path, else ``models``)."""
    try:
        from sentence_transformers.sentence_transformer.modules import Dense, LayerNorm, Pooling, Transformer
    except ImportError:  # sentence-transformers < 6
        from sentence_transformers.models import Dense, LayerNorm, Pooling, Transformer
    return Transformer, Pooling, Dense, LayerNorm


def load_ance(load_from: str, device: str | None = None, allow_pickle_weights: bool = False):
    """A ``SentenceTransformer`` computing the ANCE vector (module docstring) of the checkpoint ``load_from``.

    Args:
        load_from: a local ANCE checkpoint folder (``config.json``, the weights, the tokenizer), or a
            Hugging Face model name (downloaded by transformers as usual).
        device: torch device (``None``: sentence-transformers' choice).
        allow_pickle_weights: read ``pytorch_model.bin`` (a pickle; :mod:`vdr.io.weights`) when the
            checkpoint has no ``model.safetensors``; only for checkpoints from a source you trust.

    Returns:
        ``SentenceTransformer`` of ``Transformer`` (``max_seq_length``: the longest input RoBERTa's
        position embeddings allow) -> ``Pooling("cls")`` -> ``Dense`` (``W``, ``b``, identity) ->
        ``LayerNorm`` (the checkpoint's ``norm``); its ``encode`` gives float32 ``(n, 768)`` vectors.

    Raises:
        InputError: the head's weights are missing, or the weights are a pickle without
            ``allow_pickle_weights`` (the encoder's own loading errors propagate).
    """
    import torch
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as hf_logging

    from ..io.weights import check_weights, loader_kwargs

    Transformer, Pooling, Dense, LayerNorm = _modules()
    folder = Path(load_from)
    if not folder.is_dir():
        from huggingface_hub import snapshot_download

        folder = Path(snapshot_download(str(load_from)))
    check_weights(folder, allow_pickle=allow_pickle_weights, what="ANCE checkpoint", opt_in=OPT_IN)
    head = _head_weights(folder, allow_pickle_weights)
    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # the head's weights are "unused" by RobertaModel: expected, read here
    try:
        # sentence-transformers >= 6 names the transformers keywords model_kwargs, earlier ones model_args
        name = "model_kwargs" if "model_kwargs" in inspect.signature(Transformer).parameters else "model_args"
        tr = Transformer(str(folder), **{name: loader_kwargs(allow_pickle_weights)})
    finally:
        hf_logging.set_verbosity(level)
    cfg = tr.auto_model.config
    limit = int(cfg.max_position_embeddings) - int(cfg.pad_token_id if cfg.pad_token_id is not None else 1) - 1
    tr.max_seq_length = limit
    hidden = int(cfg.hidden_size)
    out, inp = head["embeddingHead.weight"].shape
    if inp != hidden or tuple(head["norm.weight"].shape) != (out,):
        raise InputError(f"ANCE checkpoint {folder}: embeddingHead {tuple(head['embeddingHead.weight'].shape)} and norm"
                         f" {tuple(head['norm.weight'].shape)} do not fit hidden size {hidden}")
    pool = Pooling(hidden, "cls")
    dense = Dense(hidden, out, bias=True, activation_function=torch.nn.Identity(), init_weight=head["embeddingHead.weight"].clone(),
                  init_bias=head["embeddingHead.bias"].clone())
    norm = LayerNorm(out)
    with torch.no_grad():
        norm.norm.weight.copy_(head["norm.weight"])
        norm.norm.bias.copy_(head["norm.bias"])
    model = SentenceTransformer(modules=[tr, pool, dense, norm], device=device)
    return model
