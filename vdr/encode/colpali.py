"""Late-interaction (ColPali-family) encoders built on colpali-engine.

:class:`LateInteractionEncoder` loads any checkpoint that the installed colpali-engine can run
(ColPali, ColQwen2, ColQwen2.5, ColQwen3, ColQwen3.5, ColQwen2.5-Omni, ColIdefics3/ColSmol,
ColModernVBert, ColGemma3) by hub name or local folder, from one
:class:`~vdr.encode.settings.EncoderSettings`. The model and processor classes are chosen from the
checkpoint's ``config.json`` (``architectures`` first, then ``model_type``); the user never names a
class.

Every setting that changes vectors is explicit and recorded in :attr:`LateInteractionEncoder.settings`
and in two fingerprints:

* :attr:`~LateInteractionEncoder.page_fingerprint` (keys the page store): the exact checkpoint files
  and weights, revision, classes, the image resolution (min/max pixels for the Qwen families,
  checked page by page against the number of image tokens the processor produced), the padding
  side, the compute dtype and the colpali-engine version;
* :attr:`~LateInteractionEncoder.query_fingerprint`: the page fingerprint plus the query template
  (:class:`QueryTemplate`): ``prefix + text + augmentation_token * n_augmentation``, tokenised by
  the processor's ``process_texts`` without truncation. colpali-engine's ``process_queries`` hides
  both parts (its default prefix changed from ``"Query: "`` to ``""`` in 0.3.13); vdr never calls it.

A new query template therefore changes the query fingerprint only: stored page vectors are reused.

Output vectors are ``float32`` CPU tensors of shape ``(n_tokens, dim)``, one per input, with padding
removed by the attention mask (never by token id: the query-augmentation tokens of ColPali/ColQwen
are often the pad token, and they are real tokens).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from ..io.digest import file_sha256
from ..errors import InputError, ModelLoadError
from .settings import DEFAULT_QUERY_PREFIX, N_AUGMENTATION_TOKENS, EncoderSettings, fingerprints

__all__ = [
    "LateInteractionEncoder",
    "QueryTemplate",
    "DEFAULT_QUERY_PREFIX",
    "N_AUGMENTATION_TOKENS",
    "FAMILIES",
    "SETTINGS_FORMAT",
    "resolve_family",
]

#: Version of the :attr:`LateInteractionEncoder.settings` record. 2: the query template is keyed
#: apart from the page settings (format 1 keyed both together, so a new query prefix re-encoded pages).
SETTINGS_FORMAT = 2

#: model_type -> (colpali-engine model class, processor class, family uses min/max pixels)
FAMILIES: dict[str, tuple[str, str, bool]] = {
    "paligemma": ("ColPali", "ColPaliProcessor", False),
    "qwen2_vl": ("ColQwen2", "ColQwen2Processor", True),
    "qwen2_5_vl": ("ColQwen2_5", "ColQwen2_5_Processor", True),
    "qwen3_vl": ("ColQwen3", "ColQwen3Processor", True),
    "qwen3_5": ("ColQwen3_5", "ColQwen3_5Processor", True),
    "qwen2_5_omni_thinker": ("ColQwen2_5Omni", "ColQwen2_5OmniProcessor", True),
    "idefics3": ("ColIdefics3", "ColIdefics3Processor", False),
    "modernvbert": ("ColModernVBert", "ColModernVBertProcessor", False),
    "gemma3": ("ColGemma3", "ColGemmaProcessor3", False),
}
_BY_CLASS = {m: (m, p, px) for m, p, px in FAMILIES.values()}

_CONFIG_FILES = (
    "config.json",
    "adapter_config.json",
    "processor_config.json",
    "preprocessor_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "chat_template.json",
    "chat_template.jinja",
    "vocab.json",
    "merges.txt",
    "tokenizer.model",
    "generation_config.json",
    "video_preprocessor_config.json",
)
_FULL_HASH_LIMIT = 2 * 1024**3  # weights up to 2 GiB are hashed in full; larger: header + size + mtime


@dataclass(frozen=True)
class QueryTemplate:
    """How a query text becomes the model's input text: ``prefix + text + augmentation_token * n_augmentation``.

    Attributes:
        prefix: prepended to every query (default ``"Query: "``, MTEB's choice).
        augmentation_token: the model's query-augmentation token (the processor's
            ``query_augmentation_token``: ``<|endoftext|>`` for ColQwen, the pad token for ColPali,
            ``<end_of_utterance>`` for ColSmol/ColModernVBert).
        n_augmentation: how many augmentation tokens are appended (default 10).

    >>> QueryTemplate("Query: ", "<pad>", 2).render("revenue 2023")
    'Query: revenue 2023<pad><pad>'
    """

    prefix: str
    augmentation_token: str
    n_augmentation: int = N_AUGMENTATION_TOKENS

    def render(self, text: str) -> str:
        """The exact string handed to the processor for ``text``."""
        return self.prefix + text + self.augmentation_token * self.n_augmentation

    def to_json(self) -> dict:
        """``{"prefix", "augmentation_token", "n_augmentation"}``."""
        return asdict(self)


def resolve_family(config: dict) -> tuple[str, str, bool]:
    """Choose ``(model class name, processor class name, uses_pixel_budget)`` from a ``config.json`` dict.

    ``architectures`` naming a colpali-engine late-interaction class wins; otherwise ``model_type``
    decides (a backbone checkpoint of a known family is loaded with that family's Col* class, which
    then fails the missing-weights check unless it carries the projection).

    Raises:
        ModelLoadError: no known late-interaction family matches.
    """
    for arch in config.get("architectures") or []:
        if arch in _BY_CLASS:
            return _BY_CLASS[arch]
    mt = config.get("model_type")
    if mt in FAMILIES:
        return FAMILIES[mt]
    raise ModelLoadError(
        f"not a late-interaction checkpoint colpali-engine can run: architectures={config.get('architectures')!r},"
        f" model_type={mt!r}; known model types: {', '.join(sorted(FAMILIES))}"
    )


def _offline() -> bool:
    v = os.environ.get("HF_HUB_OFFLINE", "") or os.environ.get("TRANSFORMERS_OFFLINE", "")
    if v.strip().lower() in ("1", "true", "yes", "on"):
        return True
    try:
        from huggingface_hub import constants

        return bool(constants.HF_HUB_OFFLINE)
    except Exception:  # pragma: no cover
        return False


def _looks_like_path(s: str) -> bool:
    return s.startswith(("/", "./", "../", "~")) or os.sep in s.replace("/", "", 1) or s.count("/") > 1 or s.startswith(".")


def _resolve_checkpoint(name_or_path: str | Path, revision: str | None) -> tuple[Path, dict]:
    """Local folder of the checkpoint and a description ``{"source", "repo", "revision"}``."""
    p = Path(name_or_path).expanduser()
    if p.is_dir():
        return p.resolve(), {"source": "local", "repo": None, "revision": None}
    s = str(name_or_path)
    if p.exists() or _looks_like_path(s):
        raise ModelLoadError(f"model folder {s!r} does not exist (give a local checkpoint folder or a hub name like vidore/colqwen2.5-v0.2)")
    from huggingface_hub import snapshot_download

    offline = _offline()
    try:
        local = snapshot_download(
            s,
            revision=revision,
            local_files_only=offline,
            allow_patterns=["*.json", "*.safetensors", "*.txt", "*.model", "*.jinja", "*.py"],
        )
    except Exception as e:  # offline, unknown repo, gated, network down
        how = (
            f"download it on a connected machine (`hf download {s} --local-dir DIR`) and pass the folder"
            f" (--model DIR), or fill the Hugging Face cache there and keep HF_HUB_OFFLINE=1"
        )
        state = "offline mode (HF_HUB_OFFLINE=1) and it is not in the local cache" if offline else f"{type(e).__name__}: {e}"
        raise ModelLoadError(f"cannot load model {s!r} from the Hugging Face hub: {state}; {how}") from None
    lp = Path(local)
    return lp, {"source": "hub", "repo": s, "revision": lp.name}




def _weights_digest(folder: Path) -> dict[str, str]:
    """Digest of every ``*.safetensors`` file: its HF-cache blob name (the content's sha256) when the
    file is a cache symlink, the full sha256 when the weights total <= 2 GiB, else the safetensors
    header + size + mtime."""
    files = sorted(folder.glob("*.safetensors"))
    total = sum(f.stat().st_size for f in files)
    out: dict[str, str] = {}
    for f in files:
        real = Path(os.path.realpath(f))
        if f.is_symlink() and real.parent.name == "blobs" and len(real.name) == 64:
            out[f.name] = "blob:" + real.name
        elif total <= _FULL_HASH_LIMIT:
            out[f.name] = "sha256:" + file_sha256(f)
        else:
            st = f.stat()
            with open(f, "rb") as fh:
                n = int.from_bytes(fh.read(8), "little")
                head = fh.read(min(n, 100 << 20))
            out[f.name] = f"header:{hashlib.sha256(head).hexdigest()}:{st.st_size}:{st.st_mtime_ns}"
    return out


def _torch_dtype(dtype: str | torch.dtype | None, device: str) -> torch.dtype:
    if dtype is None:
        return torch.bfloat16 if device.startswith("cuda") else torch.float32
    if isinstance(dtype, torch.dtype):
        return dtype
    names = {"bfloat16": torch.bfloat16, "bf16": torch.bfloat16, "float16": torch.float16, "fp16": torch.float16,
             "float32": torch.float32, "fp32": torch.float32}
    if dtype not in names:
        raise InputError(f"unknown dtype {dtype!r}; use one of bfloat16, float16, float32")
    return names[dtype]


def _dtype_name(dt: torch.dtype) -> str:
    return str(dt).removeprefix("torch.")


def _read_config(local: Path) -> dict:
    """The checkpoint's ``config.json`` (an adapter's: its base model's).

    Raises:
        ModelLoadError: no config, or an adapter without a base model.
    """
    cfg_path = local / "config.json"
    adapter = local / "adapter_config.json"
    if cfg_path.is_file():
        return json.loads(cfg_path.read_text(encoding="utf-8"))
    if adapter.is_file():
        base = json.loads(adapter.read_text(encoding="utf-8")).get("base_model_name_or_path")
        if not base:
            raise ModelLoadError(f"{adapter}: adapter without base_model_name_or_path")
        base_dir, _ = _resolve_checkpoint(base, None)
        return json.loads((base_dir / "config.json").read_text(encoding="utf-8"))
    raise ModelLoadError(f"{local}: no config.json (not a transformers checkpoint)")


def _load_model(model_cls, local: Path, name: str, device: str, tdtype: torch.dtype, settings: EncoderSettings):
    """``(model on device in eval mode, attention implementation used)``; refuses newly initialised weights.

    Raises:
        ModelLoadError: weights that cannot be loaded, or missing/unexpected/mismatched keys.
    """
    attn = settings.attn_implementation
    if attn is None:
        attn = "sdpa"
        if device.startswith("cuda"):
            from transformers.utils import is_flash_attn_2_available

            if is_flash_attn_2_available():
                attn = "flash_attention_2"
    kw: dict[str, Any] = dict(dtype=tdtype, output_loading_info=True, use_safetensors=True)
    if settings.trust_remote_code:
        kw["trust_remote_code"] = True
    model_name = model_cls.__name__
    try:
        try:
            model, info = model_cls.from_pretrained(str(local), attn_implementation=attn, **kw)
        except ValueError as e:
            if "attn" not in str(e).lower() and "sdpa" not in str(e).lower():
                raise
            model, info = model_cls.from_pretrained(str(local), attn_implementation="eager", **kw)
    except (OSError, ValueError, RuntimeError) as e:
        raise ModelLoadError(f"cannot load {model_name} weights from {name}: {e}") from None
    bad = {k: sorted(info.get(k) or []) for k in ("missing_keys", "unexpected_keys", "mismatched_keys")}
    bad = {k: v for k, v in bad.items() if v}
    if bad or info.get("error_msgs"):
        detail = "; ".join(f"{k.replace('_', ' ')} ({len(v)}): {', '.join(map(str, v[:5]))}{' ...' if len(v) > 5 else ''}"
                           for k, v in bad.items())
        raise ModelLoadError(
            f"{name}: {model_name} would run with newly initialised weights ({detail or info.get('error_msgs')});"
            " refusing to encode with random parameters"
        )
    _materialise_or_fail(model, name, model_name)
    model = model.to(device).eval()
    return model, getattr(model.config, "_attn_implementation", attn)


def _is_oom(e: BaseException) -> bool:
    oom = getattr(torch.cuda, "OutOfMemoryError", None)
    return (oom is not None and isinstance(e, oom)) or "out of memory" in str(e).lower() and isinstance(e, RuntimeError)


class LateInteractionEncoder:
    """A loaded colpali-engine late-interaction model and its processor.

    Build it with :meth:`load` / :meth:`from_settings` (an :class:`EncoderSettings`).

    Attributes:
        model: the colpali-engine model (eval mode) on :attr:`device`.
        processor: the colpali-engine processor, with the resolution budget applied.
        device: ``"cuda"``, ``"cuda:1"``, ``"cpu"`` ...
        dtype: the compute dtype of the model.
        query_template: the explicit :class:`QueryTemplate`.
        encoder_settings: the :class:`EncoderSettings` it was loaded with (run options such as
            ``batch_size`` included; :func:`vdr.encode.embed` uses them).
        settings: JSON-able record of everything that determines the vectors (model files,
            revision, classes, resolution, padding side, compute dtype, colpali-engine version,
            ``query_template``; ``format`` :data:`SETTINGS_FORMAT`).
        page_fingerprint: sha256 hex of :attr:`settings` without ``query_template``: identifies
            page vectors and keys the embedding store.
        query_fingerprint: sha256 hex of the page fingerprint and the query template: identifies
            query vectors (recorded in results).
        fingerprint: the whole encoder's fingerprint (= :attr:`query_fingerprint`, which covers
            the page settings too); the MTEB model revision.
        max_query_tokens: longest query (in tokens, augmentation included) encoded so far.
        page_tokens: ``(min, max)`` tokens per page seen so far, or ``None``.
    """

    def __init__(self, model, processor, *, device: str, dtype: torch.dtype, query_template: QueryTemplate,
                 settings: dict, pixel_budget: bool, encoder_settings: EncoderSettings | None = None) -> None:
        self.model = model
        self.processor = processor
        self.device = device
        self.dtype = dtype
        self.query_template = query_template
        self.settings = {**settings, "query_template": query_template.to_json()}
        self.page_fingerprint, self.query_fingerprint = fingerprints(self.settings)
        self.fingerprint = self.query_fingerprint
        if encoder_settings is None:
            encoder_settings = EncoderSettings.from_options(
                str(settings.get("model") or "in-memory model"), device=str(device), compute_dtype=_dtype_name(dtype),
                query_prefix=query_template.prefix, n_augmentation=query_template.n_augmentation)
        self.encoder_settings = encoder_settings
        self._pixel_budget = pixel_budget
        self._batch_cap: int | None = None
        self._prefix_token_types = settings.get("classes", [""])[0] == "ColPali"
        self.max_query_tokens = 0
        self.page_tokens: tuple[int, int] | None = None
        self.pipeline_stats = None  # PipelineStats of the last iter_pages
        self.batch_size_source: str | None = None  # how iter_pages chose its batch size
        self.dim = int(getattr(model, "dim", 0)) or None

    # ------------------------------------------------------------------ loading
    @classmethod
    def load(cls, model: "str | Path | EncoderSettings", **options: Any) -> "LateInteractionEncoder":
        """Load a checkpoint (hub name or local folder) with the colpali-engine classes its config names.

        Either pass an :class:`EncoderSettings` alone (``load(settings)``, the same as
        :meth:`from_settings`), or a model name with keyword options, the :class:`EncoderSettings`
        fields (built by :meth:`EncoderSettings.from_options`).

        Args:
            model: an :class:`EncoderSettings`, a local checkpoint folder or a hub repository id.
            options: :class:`EncoderSettings` fields, e.g. ``device`` (``"cuda"``, ``"cuda:N"``,
                ``"cpu"``; default CUDA when available), ``compute_dtype`` (the dtype the model runs
                in, a name or a ``torch.dtype``; default bfloat16 on CUDA, float32 on CPU),
                ``trust_remote_code``, ``attn_implementation`` (default flash-attention 2 on CUDA
                when installed, else sdpa; eager when sdpa is unsupported), ``query_prefix``
                (default ``"Query: "``, MTEB's), ``n_augmentation`` (default 10), ``min_pixels`` /
                ``max_pixels`` (resolution budget of the Qwen families), ``revision``. ``dtype`` is
                the deprecated spelling of ``compute_dtype`` here (:class:`DeprecationWarning`).

        Raises:
            ModelLoadError: see :meth:`from_settings`.
            InputError: keyword options given together with an :class:`EncoderSettings`; unknown
                options; invalid values.
        """
        given = sorted(k for k, v in options.items() if v is not None)
        if isinstance(model, EncoderSettings) and given:
            raise InputError(f"give either EncoderSettings or keyword options, not both (got {', '.join(given)})")
        return cls.from_settings(EncoderSettings.from_options(model, dtype_means="compute_dtype", **options))

    @classmethod
    def from_settings(cls, settings: EncoderSettings) -> "LateInteractionEncoder":
        """Load the checkpoint ``settings.model`` with every option of ``settings``.

        Raises:
            ModelLoadError: unknown family, missing/unexpected/mismatched weights (newly initialised
                parameters), a hub name that cannot be fetched (offline: names the model and how to
                pass a local folder), or ``.bin``-only (pickle) weights.
            InputError: min/max pixels given for a fixed-resolution family, or inconsistent values.
        """
        import colpali_engine.models as cem
        from importlib.metadata import version

        if not isinstance(settings, EncoderSettings):
            raise InputError(f"from_settings needs EncoderSettings, got {type(settings).__name__}")
        name = settings.model
        device = settings.device or ("cuda" if torch.cuda.is_available() else "cpu")
        tdtype = _torch_dtype(settings.compute_dtype, device)
        local, src = _resolve_checkpoint(name, settings.revision)
        model_name, proc_name, pixel_budget = resolve_family(_read_config(local))
        if not (any(local.glob("*.safetensors"))):
            raise ModelLoadError(f"{name}: no *.safetensors weights in {local} (vdr never loads pickle .bin weights)")
        model, attn = _load_model(getattr(cem, model_name), local, name, device, tdtype, settings)
        pkw: dict[str, Any] = {"trust_remote_code": True} if settings.trust_remote_code else {}
        try:
            processor = getattr(cem, proc_name).from_pretrained(str(local), **pkw)
        except (OSError, ValueError, TypeError) as e:
            raise ModelLoadError(f"cannot load {proc_name} from {name}: {e}") from None

        resolution = _apply_resolution(processor, pixel_budget, settings.min_pixels, settings.max_pixels, model_name)
        # Batch-size invariance: the Qwen families derive positions from the attention mask, so
        # colpali-engine's left padding is harmless there; the others (PaliGemma, Idefics3, Gemma3,
        # ModernVBert) number positions 0..L-1 whatever the mask, so left padding would shift a short
        # input's positions by its batch's padding. Right padding leaves every real token where an
        # unbatched run puts it.
        padding_side = "left" if pixel_budget else "right"
        processor.tokenizer.padding_side = padding_side
        aug = processor.query_augmentation_token
        if not isinstance(aug, str) or not aug:
            raise ModelLoadError(f"{proc_name} has no query augmentation token")
        template = QueryTemplate(settings.query_prefix, aug, settings.n_augmentation)
        record = {
            "format": SETTINGS_FORMAT,
            "model": src["repo"],
            "revision": src["revision"],
            "classes": [model_name, proc_name],
            "colpali_engine": version("colpali-engine"),
            "files": {f: file_sha256(local / f) for f in _CONFIG_FILES if (local / f).is_file()},
            "weights": _weights_digest(local),
            "resolution": resolution,
            "padding_side": padding_side,
            "compute_dtype": _dtype_name(tdtype),
        }
        enc = cls(model, processor, device=device, dtype=tdtype, query_template=template, settings=record,
                  pixel_budget=pixel_budget, encoder_settings=settings)
        enc.name_or_path = str(name)
        enc.attn_implementation = attn
        return enc

    def with_query_template(self, query_prefix: str | None = None, n_augmentation: int | None = None) -> "LateInteractionEncoder":
        """The same loaded model with another query template (no reload): same :attr:`page_fingerprint`,
        a new :attr:`query_fingerprint`. ``None`` keeps the current value.

        Raises:
            InputError: a non-string prefix or a negative ``n_augmentation``.
        """
        es = self.encoder_settings.replace(
            query_prefix=self.query_template.prefix if query_prefix is None else query_prefix,
            n_augmentation=self.query_template.n_augmentation if n_augmentation is None else n_augmentation)
        template = QueryTemplate(es.query_prefix, self.query_template.augmentation_token, es.n_augmentation)
        enc = type(self)(self.model, self.processor, device=self.device, dtype=self.dtype, query_template=template,
                         settings=self.settings, pixel_budget=self._pixel_budget, encoder_settings=es)
        for attr in ("name_or_path", "attn_implementation"):
            if hasattr(self, attr):
                setattr(enc, attr, getattr(self, attr))
        return enc

    # ------------------------------------------------------------------ helpers
    def page_settings(self) -> dict:
        """:attr:`settings` without the query template: what determines page vectors."""
        return {k: v for k, v in self.settings.items() if k != "query_template"}

    def describe(self) -> dict:
        """Settings plus run facts (device, attention implementation, name given, the three
        fingerprints) as a JSON-able dict."""
        return {**self.settings, "name_or_path": getattr(self, "name_or_path", None), "device": self.device,
                "attn_implementation": getattr(self, "attn_implementation", None), "fingerprint": self.fingerprint,
                "page_fingerprint": self.page_fingerprint, "query_fingerprint": self.query_fingerprint}

    def describe_pages(self) -> dict:
        """:meth:`page_settings` plus run facts and the page fingerprint (what a page store records)."""
        return {**self.page_settings(), "name_or_path": getattr(self, "name_or_path", None), "device": self.device,
                "attn_implementation": getattr(self, "attn_implementation", None),
                "page_fingerprint": self.page_fingerprint}

    def query_limit(self) -> int | None:
        """Longest accepted query in tokens (the tokenizer's ``model_max_length`` or the text config's
        ``max_position_embeddings``), or ``None`` when unknown."""
        tok = self.processor.tokenizer
        lim = getattr(tok, "model_max_length", None)
        if isinstance(lim, int) and 0 < lim < 10**7:
            return lim
        cfg = self.model.config
        for c in (getattr(cfg, "text_config", None), cfg):
            v = getattr(c, "max_position_embeddings", None) if c is not None else None
            if isinstance(v, int) and v > 0:
                return v
        return None

    def expected_image_tokens(self, width: int, height: int) -> int | None:
        """Image tokens the processor must produce for a ``width`` x ``height`` page under the
        configured pixel budget (Qwen families), or ``None`` for fixed-resolution families."""
        if not self._pixel_budget:
            return None
        from transformers.models.qwen2_vl.image_processing_qwen2_vl import smart_resize

        ip = self.processor.image_processor
        patch, merge = ip.patch_size, ip.merge_size
        h, w = smart_resize(height, width, factor=patch * merge, min_pixels=ip.size["shortest_edge"],
                            max_pixels=ip.size["longest_edge"])
        return (h // patch) * (w // patch) // (merge * merge)

    def _inputs(self, batch) -> dict:
        """``batch`` on :attr:`device`, floating tensors in the compute dtype."""
        inputs = {}
        for k, v in batch.items():
            if isinstance(v, torch.Tensor):
                v = v.to(self.device)
                if v.is_floating_point():
                    v = v.to(self.dtype)
            inputs[k] = v
        return inputs

    @torch.inference_mode()
    def _forward_device(self, inputs: dict) -> list[torch.Tensor]:
        """The model on ``inputs`` (already on the device): one ``(n_tokens, dim)`` tensor per input,
        on the device in the compute dtype, padding removed by the attention mask."""
        if self._prefix_token_types and "token_type_ids" not in inputs:
            # PaliGemma: without token_type_ids, transformers 5 builds a mask under which a query's
            # vectors depend on the other queries of its batch; all-zero token types give the
            # prefix (bidirectional, padding-masked) attention ColPali was trained and evaluated with.
            inputs = dict(inputs, token_type_ids=torch.zeros_like(inputs["input_ids"]))
        out = self.model(**inputs)  # (batch, seq, dim), padding positions zeroed by the model
        mask = inputs["attention_mask"].bool()
        return [out[i][mask[i]] for i in range(out.shape[0])]

    def _forward(self, batch) -> list[torch.Tensor]:
        """:meth:`_forward_device` of a host batch: float32 CPU tensors."""
        return [v.float().cpu() for v in self._forward_device(self._inputs(batch))]

    def _forward_backoff(self, batch, rebuild: Callable[[int, int], Any], n: int) -> list[torch.Tensor]:
        """Run ``batch`` (n items); on CUDA OOM halve the batch size (remembered) and rebuild sub-batches."""
        if self._batch_cap is None or n <= self._batch_cap:
            try:
                return self._forward(batch)
            except RuntimeError as e:
                if not _is_oom(e):
                    raise
                if n <= 1:
                    raise
                self._batch_cap = max(1, n // 2)
                if torch.cuda.is_available():
                    torch.cuda.empty_cache()
        out: list[torch.Tensor] = []
        start = 0
        while start < n:
            size = min(self._batch_cap or n, n - start)
            try:
                out.extend(self._forward(rebuild(start, start + size)))
                start += size
            except RuntimeError as e:
                if not _is_oom(e) or size <= 1:
                    raise
                self._batch_cap = max(1, size // 2)
                if torch.cuda.is_available():
                    torch.cuda.empty_cache()
        return out

    def _after_oom(self, batch, rebuild: Callable[[int, int], Any], n: int, error: BaseException | None) -> list[torch.Tensor]:
        """The page pipeline's fallback: after an out-of-memory ``error`` on ``n`` pages, halve the
        batch size (remembered) and run ``batch`` in sub-batches; without an error (a batch above
        the remembered size) just the sub-batches. Float32 CPU tensors.

        Raises:
            the ``error`` itself when ``n`` is 1 (nothing left to halve).
        """
        if error is not None:
            if n <= 1:
                raise error
            half = max(1, n // 2)
            self._batch_cap = half if self._batch_cap is None else min(self._batch_cap, half)
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        return self._forward_backoff(batch, rebuild, n)

    @property
    def batch_cap(self) -> int | None:
        """The batch size that out-of-memory back-off settled on (``None``: never backed off)."""
        return self._batch_cap

    # ------------------------------------------------------------------ queries
    def encode_queries(self, texts: Sequence[str], batch_size: int = 32, *, ids: Sequence[str] | None = None,
                       progress: bool = False) -> list[torch.Tensor]:
        """Encode query texts with the explicit :attr:`query_template`.

        Args:
            texts: query texts (before the template).
            batch_size: queries per forward pass (halved on CUDA out-of-memory).
            ids: optional query ids, used in error messages.
            progress: show a tqdm bar.

        Returns:
            One ``float32`` CPU tensor per query, shape ``(n_tokens, dim)``: every real token
            (prefix, text, augmentation tokens, special tokens), padding removed by the attention mask.

        Raises:
            InputError: a non-string query, or a query longer than the model's limit (never truncated).
        """
        texts = list(texts)
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise InputError(f"query {i} is not a string ({type(t).__name__})", id=None if ids is None else ids[i])
        if batch_size < 1:
            raise InputError(f"batch_size must be >= 1, got {batch_size}")
        rendered = [self.query_template.render(t) for t in texts]
        limit = self.query_limit()
        from ..progress import log_bar

        if not rendered:
            return []
        lengths = self.processor.process_texts(rendered)["attention_mask"].sum(dim=1).tolist()
        for i, n in enumerate(lengths):
            if limit is not None and n > limit:
                raise InputError(f"query {i} has {n} tokens (template included), more than the model's"
                                 f" limit of {limit}; vdr does not truncate queries", id=None if ids is None else ids[i])
            self.max_query_tokens = max(self.max_query_tokens, int(n))
        # batches hold queries of one token length only: no padding, so a query's vectors do not
        # depend on the other queries or on the batch size
        order = sorted(range(len(rendered)), key=lambda i: (lengths[i], i))
        batches: list[list[int]] = []
        for i in order:
            if batches and len(batches[-1]) < batch_size and lengths[batches[-1][0]] == lengths[i]:
                batches[-1].append(i)
            else:
                batches.append([i])
        out: list[torch.Tensor | None] = [None] * len(rendered)
        bar = log_bar(total=len(texts), unit="query", desc="Encoding queries", disable=not progress)
        for idx in batches:
            chunk = [rendered[i] for i in idx]
            batch = self.processor.process_texts(chunk)
            vecs = self._forward_backoff(batch, lambda a, b, c=chunk: self.processor.process_texts(c[a:b]), len(chunk))
            for i, v in zip(idx, vecs):
                out[i] = v
            bar.update(len(chunk))
        bar.close()
        return out

    # ------------------------------------------------------------------ pages
    def page_token_count(self, width: int, height: int):
        """The bucket of a ``width`` x ``height`` page (pages of one bucket get the same number of
        tokens, so they batch without padding): its image-token count under the pixel budget (Qwen
        families); 0 for ColPali (every page resized to one square); the size ``(width, height)``
        for the other families (their image splitting depends on it)."""
        n = self.expected_image_tokens(width, height)
        if n is not None:
            return int(n)
        return 0 if self._prefix_token_types else (int(width), int(height))

    def page_cost(self, width: int, height: int) -> tuple[int, int]:
        """A sort key for the page that costs the most memory: ``(image tokens or 0, pixels)``."""
        n = self.expected_image_tokens(width, height)
        return (0 if n is None else int(n), int(width) * int(height))

    def auto_batch_size(self, probe) -> int:
        """Pages per forward pass chosen from free memory on CUDA: one forward pass of ``probe`` (a
        PIL image of the largest bucket) measures a page's peak memory, and
        :func:`~vdr.encode.pipeline.batch_size_from_memory` divides the free memory (the device's
        free memory plus what PyTorch's allocator holds unused) by it. Elsewhere
        :data:`~vdr.encode.pipeline.DEFAULT_BATCH_SIZE`. Recorded in :attr:`batch_size_source`."""
        from .pipeline import DEFAULT_BATCH_SIZE, batch_size_from_memory

        if not (str(self.device).startswith("cuda") and torch.cuda.is_available()):
            self.batch_size_source = f"default {DEFAULT_BATCH_SIZE} (no CUDA)"
            return DEFAULT_BATCH_SIZE
        dev = torch.device(self.device)
        batch = self.processor.process_images([probe])
        torch.cuda.synchronize(dev)
        base = torch.cuda.memory_allocated(dev)
        torch.cuda.reset_peak_memory_stats(dev)
        self._forward(batch)
        torch.cuda.synchronize(dev)
        per_page = torch.cuda.max_memory_allocated(dev) - base
        free, _total = torch.cuda.mem_get_info(dev)
        free += torch.cuda.memory_reserved(dev) - torch.cuda.memory_allocated(dev)
        n = batch_size_from_memory(free, per_page)
        self.batch_size_source = f"free memory: {free / 2**30:.1f} GiB free, {per_page / 2**20:.0f} MiB per page -> {n}"
        return n

    def _check_budget(self, bids, sizes, batch) -> None:
        """A batch whose image-token counts differ from the pixel budget's is an error (the
        processor ignored the settings)."""
        image_token_id = getattr(self.processor, "image_token_id", None)
        if not (self._pixel_budget and image_token_id is not None):
            return
        counts = (batch["input_ids"] == image_token_id).sum(dim=1).tolist()
        for pid_, (w, h), c in zip(bids, sizes, counts):
            exp = self.expected_image_tokens(w, h)
            if exp is not None and c != exp:
                raise InputError(f"page of {w}x{h} pixels got {c} image tokens, but the pixel budget"
                                 f" {self.settings['resolution']} gives {exp}", id=pid_)

    def iter_pages(self, pages, batch_size: int | None = 8, *, ids: Sequence[str] | None = None, num_workers: int = 0,
                   progress: bool = True) -> Iterator[tuple[list[str], list[torch.Tensor]]]:
        """Encode pages through :class:`~vdr.encode.pipeline.PagePipeline`: yields ``(page ids,
        vectors)`` in input order (a window of pages at a time).

        Pages with the same image-token count (:meth:`page_token_count`, from the page size alone)
        are batched together within windows of ``batch_size * BUCKET_BATCHES`` pages, so no batch
        holds padding and a page's vectors do not depend on the batch (bit for bit on the CPU).
        Preprocessing runs in ``num_workers`` processes into pinned memory on CUDA, copies to and
        from the device overlap the forward passes (CUDA streams); :attr:`pipeline_stats` says how
        the last call went.

        Args:
            pages: a :class:`~vdr.corpus.Corpus` (all pages, or those in ``ids``), or a sequence of
                PIL images / image paths.
            batch_size: pages per forward pass (halved, and kept halved, on CUDA out-of-memory);
                ``None``: :meth:`auto_batch_size` (free memory on CUDA, 8 elsewhere).
            ids: with a corpus, the page ids to encode (default: all, in corpus order); with a
                sequence, labels for the pages (default ``"0"``, ``"1"``, ...).
            num_workers: worker processes that open and preprocess images while the model runs
                (0: in the calling process).
            progress: tqdm bar with pages/s.

        Yields:
            ``(ids, vectors)``: each vector a ``float32`` CPU tensor ``(n_tokens, dim)``, padding removed
            by the attention mask.

        Raises:
            InputError: unreadable image (naming file and id); a page whose image-token count does
                not match the configured pixel budget (the processor ignored the settings).
        """
        from ..corpus import Corpus
        from .pipeline import PagePipeline

        if batch_size is not None and batch_size < 1:
            raise InputError(f"batch_size must be >= 1, got {batch_size}")
        if isinstance(pages, Corpus):
            pid = list(ids) if ids is not None else pages.ids()
            opener = _CorpusOpener(pages, pid)
            sizes = [(pages[i].width, pages[i].height) for i in pid]
        else:
            seq = list(pages)
            pid = [str(x) for x in ids] if ids is not None else [str(i) for i in range(len(seq))]
            if len(pid) != len(seq):
                raise InputError(f"{len(pid)} ids for {len(seq)} pages")
            opener = _SeqOpener(seq, pid)
            sizes = [opener.size(i) for i in range(len(seq))]
        counts = [self.page_token_count(w, h) for w, h in sizes]
        if batch_size is None:
            biggest = max(range(len(sizes)), key=lambda i: self.page_cost(*sizes[i])) if sizes else None
            batch_size = self.auto_batch_size(opener(biggest)) if biggest is not None else 1
        else:
            self.batch_size_source = "given"
        pipe = PagePipeline(self.processor, self._forward_device, device=str(self.device), batch_size=batch_size,
                            num_workers=num_workers, dtype=self.dtype)
        pipe.check, pipe.fallback, pipe.cap = self._check_budget, self._after_oom, lambda: self._batch_cap
        self.pipeline_stats = pipe.stats
        from ..progress import log_bar

        bar = log_bar(total=len(pid), unit="page", desc="Encoding pages", disable=not progress, smoothing=0.1)
        for bids, vecs in pipe.run(opener, pid, counts, progress=bar.update):
            self.pipeline_stats = pipe.stats
            for v in vecs:
                n = int(v.shape[0])
                self.page_tokens = (n, n) if self.page_tokens is None else (min(self.page_tokens[0], n), max(self.page_tokens[1], n))
            yield list(bids), vecs
        self.pipeline_stats = pipe.stats
        bar.close()

    def encode_pages(self, pages, batch_size: int | None = 8, *, ids: Sequence[str] | None = None, num_workers: int = 0,
                     progress: bool = False) -> list[torch.Tensor]:
        """Encode page images; see :meth:`iter_pages` for the arguments and errors.

        Returns:
            One ``float32`` CPU tensor per page, shape ``(n_tokens, dim)`` (all real tokens: image
            tokens and the visual prompt's text tokens), in input order.
        """
        out: list[torch.Tensor] = []
        for _, vecs in self.iter_pages(pages, batch_size, ids=ids, num_workers=num_workers, progress=progress):
            out.extend(vecs)
        return out

    def __repr__(self) -> str:
        return (f"LateInteractionEncoder({self.settings['classes'][0]}, {getattr(self, 'name_or_path', '?')!r},"
                f" device={self.device!r}, dtype={_dtype_name(self.dtype)}, fingerprint={self.fingerprint[:12]})")


class _CorpusOpener:
    def __init__(self, corpus, ids: list[str]) -> None:
        self.corpus = corpus
        self.ids = ids

    def __call__(self, i: int):
        return self.corpus.open_image(self.ids[i])


class _SeqOpener:
    def __init__(self, seq: list, ids: list[str]) -> None:
        self.seq = seq
        self.ids = ids

    def __call__(self, i: int):
        x = self.seq[i]
        if isinstance(x, (str, Path)):
            from PIL import Image, UnidentifiedImageError

            try:
                with Image.open(x) as im:
                    return im.convert("RGB")
            except (OSError, UnidentifiedImageError) as e:
                raise InputError(f"cannot read page image ({e})", path=x, id=self.ids[i]) from None
        return x.convert("RGB")

    def size(self, i: int) -> tuple[int, int]:
        """``(width, height)`` of item ``i`` (an image file's header only)."""
        x = self.seq[i]
        if isinstance(x, (str, Path)):
            from PIL import Image, UnidentifiedImageError

            try:
                with Image.open(x) as im:
                    return im.size
            except (OSError, UnidentifiedImageError) as e:
                raise InputError(f"cannot read page image ({e})", path=x, id=self.ids[i]) from None
        return x.size


def _materialise_or_fail(model, name_or_path, model_name: str) -> None:
    """Fail on parameters left on the meta device (never loaded), except a language-model head that
    retrieval does not use (ColPali ignores ``lm_head`` on load): it is tied to the input embeddings,
    as the backbone's ``tie_word_embeddings`` intends."""
    import itertools

    meta = [(n, t) for n, t in itertools.chain(model.named_parameters(), model.named_buffers()) if t.is_meta]
    if not meta:
        return
    emb = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
    rest = []
    for n, t in meta:
        parts = n.split(".")
        if len(parts) >= 2 and parts[-2] == "lm_head" and parts[-1] == "weight" and emb is not None \
                and tuple(emb.weight.shape) == tuple(t.shape) and not emb.weight.is_meta:
            mod = model.get_submodule(".".join(parts[:-1]))
            mod.weight = emb.weight
        else:
            rest.append(n)
    if rest:
        raise ModelLoadError(f"{name_or_path}: {model_name} has parameters that were never loaded ({len(rest)}):"
                             f" {', '.join(rest[:5])}{' ...' if len(rest) > 5 else ''}")


def _apply_resolution(processor, pixel_budget: bool, min_pixels: int | None, max_pixels: int | None, family: str) -> dict:
    """Set min/max pixels on a Qwen-family image processor; return the effective resolution record."""
    ip = processor.image_processor
    if not pixel_budget:
        if min_pixels is not None or max_pixels is not None:
            raise InputError(f"{family} does not take min/max pixels (its processor sets the resolution: {dict(ip.size)})")
        rec = {"size": {k: v for k, v in dict(ip.size).items()}}
        for k in ("image_seq_length", "do_image_splitting", "max_image_size"):
            v = getattr(ip, k, None) if hasattr(ip, k) else getattr(processor, k, None)
            if v is not None:
                rec[k] = v if isinstance(v, (int, bool, str, float)) else dict(v)
        return rec
    size = dict(ip.size)
    lo = min_pixels if min_pixels is not None else size.get("shortest_edge")
    hi = max_pixels if max_pixels is not None else size.get("longest_edge")
    if lo is None or hi is None or lo < 1 or hi < lo:
        raise InputError(f"invalid pixel budget: min_pixels={lo}, max_pixels={hi} (need 1 <= min <= max)")
    ip.size = {**{k: v for k, v in size.items() if k not in ("shortest_edge", "longest_edge", "min_pixels", "max_pixels")},
               "shortest_edge": int(lo), "longest_edge": int(hi)}
    for attr, v in (("min_pixels", lo), ("max_pixels", hi)):
        if hasattr(ip, attr):
            setattr(ip, attr, int(v))
    unit = ip.patch_size * ip.merge_size
    return {"min_pixels": int(lo), "max_pixels": int(hi), "patch_size": int(ip.patch_size), "merge_size": int(ip.merge_size),
            "max_image_tokens": int(hi) // (unit * unit), "min_image_tokens": math.ceil(int(lo) / (unit * unit))}
