"""What the semantic backend needs of its model without torch: a cached model spec and an ONNX query encoder.

A re-run of ``vdr evaluate`` whose page vectors are cached has only new query texts to embed.
Loading the model's Python stack for that (torch, transformers, sentence-transformers: about
10 s of imports on a 2-core CPU, more than the rest of the run) would make the re-run cost most
of the first run. Two cache entries avoid it:

* **Model spec** (:func:`write_spec`, :func:`read_spec`; ``cache_dir/semantic-model/<key>/``):
  what the backend reads from a loaded sentence-transformers model (``max_seq_length``, special
  tokens, position limit, dimension, dtype, device, the module pipeline, the prompts it declares
  and whether its pooling includes prompt tokens) plus its fast tokenizer
  as ``tokenizer.json``. It is written the first time the model is loaded; the key covers the
  model id, the sha256 of the weights file, the device, the versions of sentence-transformers,
  transformers and torch, and the prompts ``config_sentence_transformers.json`` declares (when it
  declares any), so any change there means a new spec. The tokenizer is kept only when
  it gives the same token ids as the model's own tokenizer on probe texts (``light``).
* **ONNX query encoder** (:func:`export_onnx`, :class:`OnnxTextEncoder`;
  ``semantic-onnx/<key>/`` in the user's cache folder, :func:`user_cache_dir`): the model's
  transformer exported once per model (not per corpus: every corpus evaluated with the same model,
  device and library versions shares one export, ``key`` naming those and the weights' sha256) with
  ``torch.onnx.export`` (opset 17, dynamic batch and sequence axes) and run by ONNX Runtime on
  CPU, followed by the model's own pooling (mean, CLS or max token) and, when the pipeline has a
  ``Normalize`` module, L2 normalisation, in NumPy float32. Only plain pipelines are exported
  (``Transformer`` -> ``Pooling`` -> optional ``Normalize``, no lower-casing in Python, every token
  pooled), and ANCE's (``Transformer`` -> first-token ``Pooling`` -> ``Dense`` without activation ->
  ``LayerNorm``, :mod:`vdr.retrieve.ance`), whose head is part of the exported graph; the
  export is checked against the model on probe texts (largest absolute difference recorded,
  at most :data:`MAX_EXPORT_DIFF`) and a failed check is recorded, so every later run makes the
  same choice. Texts are batched only with texts of the same token length, as in the torch path:
  no padding, so a vector does not depend on the other texts.

Every file is JSON, ``tokenizer.json`` (Hugging Face ``tokenizers``) or ONNX protobuf: no pickle.

Where the export goes (the semantic backend's ``onnx_cache`` option): ``"user"`` (default) the
user's cache folder (:func:`user_cache_dir`: ``$VDR_CACHE``, else ``$XDG_CACHE_HOME/vdr``, else
``~/.cache/vdr``), so that a first run on a new corpus finds the export a run on another corpus
made (for all-MiniLM-L6-v2 about 87 MB, reported as ``report["query_encoder"]["bytes"]``);
``"corpus"`` the index cache beside the corpus (``CORPUS/.vdr-cache/semantic-onnx/``, vdr <= 0.x's
place), or a folder. A user cache that cannot be written falls back to a temporary folder.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ._common import version_of
from .base import read_json, write_cache_dir

__all__ = ["SPEC_KIND", "ONNX_KIND", "CACHE_ENV", "user_cache_dir", "MAX_EXPORT_DIFF", "PROBE_TEXTS", "onnx_missing", "pipeline_of", "write_spec", "read_spec",
           "light_tokenizer", "LightTokenizer", "export_onnx", "read_export", "OnnxTextEncoder"]

SPEC_KIND = "semantic-model"
ONNX_KIND = "semantic-onnx"
SPEC_FORMAT = 2  # 2: the model's prompts and include_prompt
ONNX_FORMAT = 1
OPSET = 17
#: Largest absolute difference allowed between the ONNX export's vectors and the model's on the probe texts.
MAX_EXPORT_DIFF = 1e-4
#: Texts the tokenizer and the export are checked on (mixed case, punctuation, digits, accents, CJK).
PROBE_TEXTS = (
    "What was the revenue of the wind division in 2021?",
    "river mountain city",
    "Résumé of the Müller-Lyer illusion — naïve café prices: 12.5% (approx.)",
    "東京の人口は？ population of Tokyo",
    "a",
    "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau",
)
_POOLINGS = ("mean", "cls", "max")
#: Environment variable naming vdr's user cache folder (model-level entries shared by every corpus).
CACHE_ENV = "VDR_CACHE"


def user_cache_dir() -> Path:
    """vdr's per-user cache folder: ``$VDR_CACHE`` when set, else ``$XDG_CACHE_HOME/vdr`` (the XDG
    base directory specification; a relative ``XDG_CACHE_HOME`` is ignored, as the specification
    says), else ``~/.cache/vdr``. The folder is not created here."""
    own = os.environ.get(CACHE_ENV, "").strip()
    if own:
        return Path(own).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "vdr"
    return Path.home() / ".cache" / "vdr"


def onnx_missing() -> str | None:
    """Why the ONNX query encoder cannot be used here (``None``: ``onnxruntime`` and ``onnx`` are installed)."""
    from importlib.util import find_spec

    missing = [m for m in ("onnxruntime", "onnx") if find_spec(m) is None]
    return f"{' and '.join(missing)} not installed" if missing else None


def pipeline_of(st_model) -> dict | str:
    """The module pipeline of a loaded sentence-transformers model, or why it cannot be exported.

    Returns:
        ``{"pooling": "mean"|"cls"|"max", "normalize": bool, "inputs": [tokenizer output names the
        transformer takes]}`` (plus ``"head": "dense_layernorm"`` for ANCE's pipeline: CLS pooling,
        then ``Dense`` without activation and ``LayerNorm``, computed inside the exported graph), or
        a str reason (another module, pooling mode, activation or lower-casing).
    """
    import inspect

    names = [type(m).__name__ for m in st_model]
    head = names[2:] == ["Dense", "LayerNorm"]
    if names[:2] != ["Transformer", "Pooling"] or (names[2:] not in ([], ["Normalize"]) and not head):
        return f"modules {names} (only Transformer -> Pooling -> optional Normalize, or ANCE's -> Dense -> LayerNorm, is exported)"
    if head:
        dense = st_model[2]
        if type(dense.activation_function).__name__ != "Identity" or getattr(dense, "use_residual", False) or dense.linear.bias is None:
            return f"a Dense module with {type(dense.activation_function).__name__} activation (only ANCE's linear head is exported)"
    tr, pool = st_model[0], st_model[1]
    if getattr(tr, "do_lower_case", False):
        return "the Transformer module lower-cases texts in Python"
    cfg = pool.get_config_dict()
    mode = cfg.get("pooling_mode")
    if not isinstance(mode, str):  # sentence-transformers < 5: one flag per mode
        on = [m for m, flag in (("cls", "pooling_mode_cls_token"), ("mean", "pooling_mode_mean_tokens"),
                                ("max", "pooling_mode_max_tokens")) if cfg.get(flag)]
        others = [k for k, v in cfg.items() if k.startswith("pooling_mode_") and v and k not in
                  ("pooling_mode_cls_token", "pooling_mode_mean_tokens", "pooling_mode_max_tokens")]
        mode = on[0] if len(on) == 1 and not others else f"{on + others}"
    if mode not in _POOLINGS or cfg.get("include_prompt", True) is not True:
        return f"pooling {mode!r} (only {', '.join(_POOLINGS)} over every token is exported)"
    if head and mode != "cls":
        return f"pooling {mode!r} before a Dense head (only ANCE's first-token pooling is exported)"
    sample = st_model.tokenizer(["river"], return_tensors="pt")
    params = inspect.signature(tr.auto_model.forward).parameters
    inputs = [n for n in ("input_ids", "attention_mask", "token_type_ids") if n in sample and n in params]
    if "input_ids" not in inputs:
        return "the transformer does not take input_ids"
    out = {"pooling": mode, "normalize": names[2:] == ["Normalize"], "inputs": inputs}
    return dict(out, head="dense_layernorm") if head else out


# ------------------------------------------------------------------------------------------- spec


def write_spec(folder: Path, spec: dict, light: "LightTokenizer | None") -> dict:
    """Write the model spec entry ``folder`` (atomically) and return the spec as written.

    Args:
        folder: ``cache_dir/semantic-model/<key>``.
        spec: JSON-able facts of the loaded model (see the module docstring).
        light: the model's tokenizer as :func:`light_tokenizer` gives it (saved as ``tokenizer.json``),
            or ``None`` (no fast tokenizer that matches the model's: ``spec["light"]`` is false).
    """
    spec = dict(spec, format=SPEC_FORMAT, light=light is not None)

    def fill(d: Path) -> None:
        if light is not None:
            (d / "tokenizer.json").write_text(light.to_str(), encoding="utf-8")
        (d / "spec.json").write_text(json.dumps(spec, indent=1, sort_keys=True), encoding="utf-8")

    write_cache_dir(folder, fill)
    return spec


def read_spec(folder: Path | None) -> tuple[dict, "LightTokenizer"] | None:
    """``(spec, tokenizer)`` of a model spec entry usable without the model, or ``None`` (missing,
    unreadable, another format, or a tokenizer that could not stand in for the model's)."""
    if folder is None:
        return None
    spec = read_json(folder / "spec.json")
    if not isinstance(spec, dict) or spec.get("format") != SPEC_FORMAT or spec.get("light") is not True:
        return None
    try:
        tok = LightTokenizer.from_str((folder / "tokenizer.json").read_text(encoding="utf-8"))
    except Exception:  # OSError, a damaged file (tokenizers' own error): a miss
        return None
    return spec, tok


def light_tokenizer(hf_tokenizer) -> "LightTokenizer | None":
    """The backend of a Hugging Face fast tokenizer as a :class:`LightTokenizer`, when it gives the
    same token ids as the tokenizer itself on :data:`PROBE_TEXTS`; else ``None``."""
    backend = getattr(hf_tokenizer, "backend_tokenizer", None) if getattr(hf_tokenizer, "is_fast", False) else None
    if backend is None:
        return None
    light = LightTokenizer.from_str(backend.to_str())
    want = hf_tokenizer(list(PROBE_TEXTS), add_special_tokens=True, truncation=False, verbose=False)["input_ids"]
    return light if light.ids(list(PROBE_TEXTS)) == [list(x) for x in want] else None


class LightTokenizer:
    """A Hugging Face ``tokenizers`` tokenizer (the Rust backend of a fast tokenizer), without
    truncation or padding: token counts and ids as the model's tokenizer gives them."""

    def __init__(self, backend) -> None:
        self._tok = backend
        self._tok.no_truncation()
        self._tok.no_padding()

    @classmethod
    def from_str(cls, text: str) -> "LightTokenizer":
        """From the JSON of ``tokenizer.json``."""
        from tokenizers import Tokenizer

        return cls(Tokenizer.from_str(text))

    def to_str(self) -> str:
        """The ``tokenizer.json`` text (truncation and padding off)."""
        return self._tok.to_str()

    def ids(self, texts: list[str], *, special: bool = True) -> list[list[int]]:
        """Token ids of each text (special tokens added when ``special``), untruncated."""
        return [e.ids for e in self._tok.encode_batch(list(texts), add_special_tokens=special)]

    def lengths(self, texts: list[str], *, special: bool = True) -> np.ndarray:
        """Token count of each text, int64 ``(n,)``."""
        return np.array([len(e.ids) for e in self._tok.encode_batch(list(texts), add_special_tokens=special)], dtype=np.int64)

    def encode(self, texts: list[str], max_length: int) -> list:
        """``tokenizers.Encoding`` of each text with special tokens, cut at ``max_length`` tokens
        (the tail is dropped, special tokens kept: Hugging Face's ``truncation=True``)."""
        self._tok.enable_truncation(max_length)
        try:
            return self._tok.encode_batch(list(texts), add_special_tokens=True)
        finally:
            self._tok.no_truncation()


# ------------------------------------------------------------------------------------------- ONNX


def _pool(hidden: np.ndarray, pooling: str, normalize: bool) -> np.ndarray:
    """``(b, L, H)`` token embeddings (no padding) -> ``(b, H)`` float32 sentence embeddings."""
    if pooling == "mean":
        out = hidden.sum(axis=1, dtype=np.float32) / np.float32(hidden.shape[1])
    elif pooling == "cls":
        out = hidden[:, 0]
    else:
        out = hidden.max(axis=1)
    out = np.ascontiguousarray(out, dtype=np.float32)
    if normalize:  # torch.nn.functional.normalize: x / max(||x||, 1e-12)
        out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), np.float32(1e-12))
    return out


def export_onnx(st_model, folder: Path, tokenizer: "LightTokenizer", *, keep: list | None = None) -> dict:
    """Export the transformer of ``st_model`` into the cache entry ``folder`` and check it, through
    ``tokenizer`` (the model's, see :func:`light_tokenizer`) as queries will be encoded.

    Writes ``model.onnx`` (when the pipeline can be exported and the check passes) and
    ``export.json``: ``{"ok", "reason", "pipeline", "max_abs_diff", "opset", "versions", "bytes"}``
    (``bytes``: the size of ``model.onnx``, checked on every read). The
    check embeds :data:`PROBE_TEXTS` one by one with the model (torch) and with ONNX Runtime.
    ``keep``: a list that receives the checked :class:`OnnxTextEncoder` (its ONNX Runtime session
    holds the model in memory), so that the caller need not load it a second time.

    Returns:
        The ``export.json`` record.

    Raises:
        OSError: the cache folder cannot be written.
    """
    pipeline = pipeline_of(st_model)
    record = {"format": ONNX_FORMAT, "ok": False, "reason": None, "pipeline": pipeline if isinstance(pipeline, dict) else None,
              "max_abs_diff": None, "opset": OPSET, "versions": _versions()}
    if isinstance(pipeline, str):
        record["reason"] = pipeline

    def fill(d: Path) -> None:
        if record["pipeline"] is not None:
            try:
                _export(st_model, pipeline, d / "model.onnx")
                enc = OnnxTextEncoder(d, pipeline, tokenizer)
                diff = _check(st_model, pipeline, enc)
                record.update(max_abs_diff=diff, ok=diff <= MAX_EXPORT_DIFF,
                              reason=None if diff <= MAX_EXPORT_DIFF else f"export differs from the model by {diff:.3g}")
                if record["ok"] and keep is not None:
                    keep.append(enc)
            except Exception as e:  # the exporter or ONNX Runtime refused this model: recorded, torch is used
                record["reason"] = f"export failed: {type(e).__name__}: {str(e)[:300]}"
            if not record["ok"]:
                (d / "model.onnx").unlink(missing_ok=True)
            else:
                record["bytes"] = (d / "model.onnx").stat().st_size
        (d / "export.json").write_text(json.dumps(record, indent=1), encoding="utf-8")

    write_cache_dir(folder, fill)
    return read_export(folder) or record


def read_export(folder: Path | None) -> dict | None:
    """The ``export.json`` record of an ONNX cache entry (``None`` when missing, unreadable, or
    when its ``model.onnx`` is missing or not the size recorded at export)."""
    rec = None if folder is None else read_json(folder / "export.json")
    if not isinstance(rec, dict) or rec.get("format") != ONNX_FORMAT:
        return None
    if rec.get("ok"):
        f = folder / "model.onnx"
        if not f.is_file() or f.stat().st_size != rec.get("bytes"):  # missing or truncated: a miss
            return None
    return rec


def _versions() -> dict:
    return {d: version_of(d) for d in ("torch", "onnx", "onnxruntime")}


def _export(st_model, pipeline: dict, path: Path) -> None:
    """``torch.onnx.export`` of the transformer: inputs ``pipeline["inputs"]``, output the token embeddings."""
    import warnings

    import torch

    names = pipeline["inputs"]
    hf = st_model[0].auto_model
    head = (st_model[2].linear, st_model[3].norm) if pipeline.get("head") == "dense_layernorm" else None

    class Tokens(torch.nn.Module):
        """Token embeddings ``(b, L, H)``, or with ANCE's head the sentence embeddings ``(b, D)``."""

        def __init__(self) -> None:
            super().__init__()
            self.model = hf
            self.head = None if head is None else torch.nn.ModuleList(head)

        def forward(self, *args):
            hidden = self.model(**dict(zip(names, args))).last_hidden_state
            if self.head is None:
                return hidden
            return self.head[1](self.head[0](hidden[:, 0]))

    sample = st_model.tokenizer(["river mountain city report", "wind revenue alpha beta"], padding=True, return_tensors="pt")
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # the exporter's tracer and deprecation warnings
        output = "token_embeddings" if head is None else "sentence_embedding"
        axes = {n: {0: "batch", 1: "sequence"} for n in [*names, "token_embeddings"]}
        axes[output] = axes.get(output, {0: "batch"})
        torch.onnx.export(Tokens().eval(), tuple(sample[n].to(hf.device) for n in names), str(path), dynamo=False,
                          input_names=names, output_names=[output], opset_version=OPSET,
                          dynamic_axes={n: a for n, a in axes.items() if n in (*names, output)})


def _check(st_model, pipeline: dict, enc: "OnnxTextEncoder") -> float:
    """Largest absolute difference between the model's and the export's (``enc``) vectors of :data:`PROBE_TEXTS`."""
    worst = 0.0
    for t in PROBE_TEXTS:  # one by one: no padding on either side; no prompt (not the model's default one either)
        ref = st_model.encode([t], prompt="", convert_to_numpy=True, normalize_embeddings=False, show_progress_bar=False)[0]
        got = enc.encode([t], st_model.max_seq_length, batch_size=1)[0]
        worst = max(worst, float(np.abs(ref.astype(np.float64) - got).max()))
    return worst


class OnnxTextEncoder:
    """Sentence embeddings from an exported transformer with ONNX Runtime (CPU) and NumPy pooling.

    Args:
        folder: the ONNX cache entry (``model.onnx``).
        pipeline: ``{"pooling", "normalize", "inputs"}`` (see :func:`pipeline_of`).
        tokenizer: the model's tokenizer (:func:`light_tokenizer`).
        threads: ONNX Runtime intra-op threads (``None``: ONNX Runtime's default, one per core).
    """

    def __init__(self, folder: Path, pipeline: dict, tokenizer: "LightTokenizer", *, threads: int | None = None) -> None:
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.log_severity_level = 3
        if threads:
            opts.intra_op_num_threads = int(threads)
        self._session = ort.InferenceSession(str(Path(folder) / "model.onnx"), opts, providers=["CPUExecutionProvider"])
        self.pipeline, self._tok = pipeline, tokenizer
        self._inputs = [i.name for i in self._session.get_inputs()]  # the exporter drops inputs the graph never reads
        self.runtime = f"onnxruntime {ort.__version__}"

    def encode(self, texts: Sequence[str], max_length: int, *, batch_size: int = 32) -> np.ndarray:
        """Embed ``texts`` (each cut at ``max_length`` tokens, special tokens included).

        Returns:
            float32 ``(n, dim)`` (unit rows when the pipeline normalises).
        """
        texts = list(texts)
        feats = [(e.ids, e.type_ids) for e in self._tok.encode(texts, max_length)]
        lens = np.array([len(ids) for ids, _ in feats], dtype=np.int64)
        out: np.ndarray | None = None
        for L in np.unique(lens):
            idx = np.nonzero(lens == L)[0]
            for s in range(0, len(idx), batch_size):
                chunk = idx[s : s + batch_size]
                ids = np.array([feats[i][0] for i in chunk], dtype=np.int64)
                arrays = {"input_ids": ids, "attention_mask": np.ones_like(ids),
                          "token_type_ids": np.array([feats[i][1] for i in chunk], dtype=np.int64)}
                hidden = self._session.run(None, {n: arrays[n] for n in self._inputs})[0]
                if self.pipeline.get("head"):  # the graph ends with the head: (b, D) sentence embeddings
                    vecs = np.ascontiguousarray(hidden, dtype=np.float32)
                else:
                    vecs = _pool(hidden, self.pipeline["pooling"], self.pipeline["normalize"])
                if out is None:
                    out = np.zeros((len(texts), vecs.shape[1]), dtype=np.float32)
                out[chunk] = vecs
        return np.zeros((0, 0), np.float32) if out is None else out
