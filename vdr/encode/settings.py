"""One object for every option of the late-interaction encoder: :class:`EncoderSettings`.

The same frozen record configures ``vdr embed``, ``vdr evaluate``'s multimodal backend, the MTEB
model wrapper (:class:`vdr.integrations.mteb.VdrColPaliModel`) and the torchrun path, so a store
written by ``vdr embed`` with non-default options is found by ``vdr evaluate`` given the same options.

The fields fall into three groups (:attr:`EncoderSettings.PAGE_FIELDS`, ``QUERY_FIELDS``,
``RUN_FIELDS``):

* **page fields** change page vectors and key the embedding store (together with the checkpoint's
  file and weight hashes the encoder computes when it loads, see
  :attr:`vdr.encode.LateInteractionEncoder.page_fingerprint`);
* **query fields** (the query template) change query vectors only: they are keyed separately
  (:attr:`~vdr.encode.LateInteractionEncoder.query_fingerprint`), so a new query prefix re-encodes
  the queries and reuses every stored page vector;
* **run fields** (device, batch sizes, workers, attention kernel, ...) change how fast vectors are
  computed, not what they are (up to floating-point rounding of another kernel or device; recorded,
  not keyed).

The same fields also give the command-line options (:meth:`EncoderSettings.cli_fields`: flag
names, type, default and help from each field's metadata; ``vdr embed`` and ``vdr evaluate`` build
their encoder options from them), the API keywords (:meth:`EncoderSettings.from_options`, the one
path that turns keywords, a mapping, a model name or existing settings into settings) and the
fingerprint helpers that key the embedding store (:func:`fingerprints`, :func:`store_key`).

Two dtypes, two fields: :attr:`~EncoderSettings.store_dtype` is what the page store keeps
(``float16``/``float32``), :attr:`~EncoderSettings.compute_dtype` what the model runs in
(``bfloat16``/``float16``/``float32``/``auto``). The old ``dtype`` keyword and the CLI's ``--dtype``
still work for one release (a :class:`DeprecationWarning`), meaning what they meant where they
were given: the stored dtype on the CLI and in backend option mappings, the compute dtype in
:meth:`vdr.encode.LateInteractionEncoder.load` and the MTEB wrapper.

This module imports neither torch nor transformers.

>>> s = EncoderSettings("vidore/colqwen2.5-v0.2", max_pixels=28 * 28 * 768, query_prefix="")
>>> EncoderSettings.from_json(s.to_json()) == s
True
>>> s.page_options()["max_pixels"], s.query_options()
(602112, {'query_prefix': '', 'n_augmentation': 10})
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, ClassVar

from ..errors import InputError

__all__ = ["EncoderSettings", "DEFAULT_QUERY_PREFIX", "N_AUGMENTATION_TOKENS", "STORE_DTYPES", "COMPUTE_DTYPES",
           "COMPUTE_DTYPE_CHOICES", "fingerprints", "store_key"]

#: The query prefix MTEB's ColPali/ColQwen/ColSmol evaluations use (and colpali-engine < 0.3.13's
#: default). Numbers are comparable with the MTEB/ViDoRe leaderboards only with this prefix.
DEFAULT_QUERY_PREFIX = "Query: "
#: Number of query-augmentation tokens appended to every query (colpali-engine's default).
N_AUGMENTATION_TOKENS = 10
#: Dtypes page vectors can be stored in.
STORE_DTYPES = ("float16", "float32")
#: Accepted compute dtype names -> canonical name (``auto`` -> ``None``: bfloat16 on CUDA, float32 on the CPU).
COMPUTE_DTYPES = {"bfloat16": "bfloat16", "bf16": "bfloat16", "float16": "float16", "fp16": "float16",
                  "float32": "float32", "fp32": "float32", "auto": None}
#: The compute dtypes the command line offers.
COMPUTE_DTYPE_CHOICES = ("bfloat16", "float16", "float32", "auto")
#: Attention kernels the command line offers.
ATTN_CHOICES = ("flash_attention_2", "sdpa", "eager")
#: Pages per forward pass when ``batch_size`` is unset and no GPU memory figure chooses it (the
#: value of :data:`vdr.encode.pipeline.DEFAULT_BATCH_SIZE`; this module imports no torch).
DEFAULT_BATCH_SIZE = 8


def _opt(default: Any, help: str, *, flags: tuple[str, ...], type: type, choices: tuple[str, ...] | None = None,
         negative: str | None = None, panel: str = "encoder") -> Any:
    """A dataclass field whose metadata describes its command-line option.

    ``flags``: option names (the first is shown first in ``--help``); ``type``: ``str``, ``int`` or
    ``bool`` (an optional value when the default is ``None``); ``choices``: the allowed values;
    ``negative``: the ``--no-...`` flag of a bool; ``panel``: the ``--help`` group (``"encoder"``,
    ``"run"``).
    """
    return field(default=default, metadata={"help": help, "flags": flags, "type": type, "choices": choices,
                                            "negative": negative, "panel": panel})


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode("utf-8")).hexdigest()


def fingerprints(record: Mapping) -> tuple[str, str]:
    """``(page fingerprint, query fingerprint)`` of an encoder settings record (sha256 hex each).

    The page fingerprint hashes the record without ``query_template`` (JSON, sorted keys, UTF-8);
    the query fingerprint hashes ``{"page_fingerprint", "query_template"}``. The record is
    :attr:`vdr.encode.LateInteractionEncoder.settings` (checkpoint files and weights, classes,
    resolution, padding side, compute dtype, colpali-engine version, query template).
    """
    page = {k: v for k, v in record.items() if k != "query_template"}
    page_fp = _digest(page)
    return page_fp, _digest({"page_fingerprint": page_fp, "query_template": record.get("query_template")})


def store_key(page_fingerprint: str, store_dtype: str) -> str:
    """sha256 hex of ``{"encoder": page_fingerprint, "dtype": store_dtype}`` (JSON, sorted keys): the
    embedding store's folder key (:func:`vdr.encode.store.store_key` checks the dtype first)."""
    return _digest({"encoder": page_fingerprint, "dtype": store_dtype})


@dataclass(frozen=True)
class EncoderSettings:
    """Every option of a late-interaction (ColPali-family) encoder, validated on construction.

    Build it with the constructor (field names only) or :meth:`from_options` (also a mapping, a
    model name, existing settings plus changes, and the deprecated ``dtype`` keyword).

    Attributes:
        model: hub repository id (``"vidore/colqwen2.5-v0.2"``) or local checkpoint folder (a
            :class:`~pathlib.Path` is stored as ``str``). Page field.
        revision: hub revision (branch, tag or commit); ``None``: the default branch. Page field
            (the resolved commit and the weights' sha256 are keyed, not this string).
        compute_dtype: dtype the model runs in: ``"bfloat16"``, ``"float16"`` or ``"float32"``
            (``bf16``/``fp16``/``fp32`` and ``torch.float16`` accepted and normalised);
            ``None`` or ``"auto"``: bfloat16 on CUDA, float32 on the CPU. Page field (the resolved
            dtype is keyed; CLI ``--model-dtype``).
        min_pixels, max_pixels: image-area budget in pixels of the Qwen-family processors (each
            page is resized so that its area lies in ``[min_pixels, max_pixels]``; one image token
            per 28 x 28 pixels); ``None``: the checkpoint's. Fixed-resolution families (ColPali,
            ColSmol, ...) refuse them. Page fields.
        store_dtype: dtype of the stored page vectors, ``"float16"`` (default) or ``"float32"``.
            Page field (a second key component of the store; CLI ``--store-dtype``, deprecated
            alias ``--dtype``).
        query_prefix: text put before every query (default ``"Query: "``, MTEB's). Query field.
        n_augmentation: query-augmentation tokens appended to every query (default 10). Query field.
        device: ``"cuda"``, ``"cuda:N"``, ``"cpu"``; ``None``: CUDA when available (under torchrun
            ``cuda:LOCAL_RANK``). Run field.
        attn_implementation: ``"flash_attention_2"``, ``"sdpa"``, ``"eager"``; ``None``:
            flash-attention 2 on CUDA when installed, else sdpa. Run field (recorded in results).
        trust_remote_code: allow the checkpoint's own Python code (off unless asked). Run field.
        batch_size: pages per forward pass (>= 1; halved on CUDA out-of-memory); ``None``
            (default): chosen from free memory on CUDA (a probe forward pass measures one page,
            :func:`vdr.encode.pipeline.batch_size_from_memory`), 8 elsewhere
            (:data:`vdr.encode.pipeline.DEFAULT_BATCH_SIZE`; :attr:`pages_per_batch`). Run field.
        query_batch_size: queries per forward pass (>= 1); ``None``: ``4 * pages_per_batch``. Run field.
        num_workers: DataLoader worker processes preparing page images (>= 0); ``None``: on CUDA one
            per CPU core but one, at most 8, 0 on the CPU (:func:`vdr.encode.pipeline.default_workers`).
            Run field.
        shard_pages: pages per committed store shard, the unit of resumption (>= 1, default 256).
            Run field.

    Raises:
        InputError: a value of the wrong type or out of range (the field is named).
    """

    model: str = _opt(dataclasses.MISSING, "Hub name (e.g. vidore/colqwen2.5-v0.2) or local checkpoint folder.", flags=("--model",), type=str)
    revision: str | None = _opt(None, "Model hub revision (branch, tag or commit).", flags=("--revision",), type=str)
    compute_dtype: str | None = _opt(
        None, "Compute dtype (default bfloat16 on CUDA, float32 on CPU).",
        flags=("--model-dtype",), type=str, choices=COMPUTE_DTYPE_CHOICES)
    min_pixels: int | None = _opt(None, "Qwen families: minimum image area in pixels.", flags=("--min-pixels",), type=int)
    max_pixels: int | None = _opt(None, "Qwen families: maximum image area in pixels.", flags=("--max-pixels",), type=int)
    store_dtype: str = _opt("float16", "Stored page-vector dtype.", flags=("--store-dtype",), type=str, choices=STORE_DTYPES)
    query_prefix: str = _opt(DEFAULT_QUERY_PREFIX, "Text before every query (keyed with the query template, not the page store).",
                             flags=("--query-prefix",), type=str)
    n_augmentation: int = _opt(N_AUGMENTATION_TOKENS, "Query-augmentation tokens appended to every query.",
                               flags=("--augmentation-tokens",), type=int)
    device: str | None = _opt(None, "cuda, cuda:N or cpu (default: cuda when available).", flags=("--device",), type=str, panel="run")
    attn_implementation: str | None = _opt(
        None, "Attention kernels (default: flash-attention 2 on CUDA when installed, else sdpa).",
        flags=("--attn-implementation",), type=str, choices=ATTN_CHOICES)
    trust_remote_code: bool = _opt(False, "Allow the checkpoint's own Python code (only for checkpoints you trust).",
                                   flags=("--trust-remote-code",), negative="--no-trust-remote-code", type=bool)
    batch_size: int | None = _opt(None, "Pages per forward pass (default: from free memory on CUDA, 8 on CPU; halved on CUDA"
                                  " out-of-memory).", flags=("--batch-size",), type=int)
    query_batch_size: int | None = _opt(None, "Queries per forward pass (default 4 x --batch-size, 32 without it).",
                                        flags=("--query-batch-size",), type=int)
    num_workers: int | None = _opt(None, "Processes preparing page images (default: CPU cores - 1, at most 8, on CUDA;"
                                   " 0 on CPU).", flags=("--workers",), type=int)
    shard_pages: int = _opt(256, "Pages per committed store shard (the unit of resumption).", flags=("--shard-pages",), type=int)

    #: Fields that change page vectors (with the checkpoint's files): they key the page store.
    PAGE_FIELDS: ClassVar[tuple[str, ...]] = ("model", "revision", "compute_dtype", "min_pixels", "max_pixels", "store_dtype")
    #: Fields that change query vectors only (the query template).
    QUERY_FIELDS: ClassVar[tuple[str, ...]] = ("query_prefix", "n_augmentation")
    #: Fields that change neither (speed, placement, permissions).
    RUN_FIELDS: ClassVar[tuple[str, ...]] = ("device", "attn_implementation", "trust_remote_code", "batch_size",
                                             "query_batch_size", "num_workers", "shard_pages")
    #: Other keyword spellings :meth:`from_options` accepts (alias -> field).
    ALIASES: ClassVar[dict[str, str]] = {"model_dtype": "compute_dtype"}
    #: Deprecated keyword (one release): ``dtype``; its field depends on where it is given
    #: (``from_options(dtype_means=...)``): the stored dtype on the CLI (``--dtype``) and in backend
    #: option mappings, the compute dtype in ``LateInteractionEncoder.load`` and the MTEB wrapper.
    DEPRECATED: ClassVar[tuple[str, ...]] = ("dtype",)

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):  # command-line choices (str Enums) -> their plain values
            v = getattr(self, f.name)
            if isinstance(v, Enum):
                object.__setattr__(self, f.name, v.value)
        if isinstance(self.model, Path):
            object.__setattr__(self, "model", str(self.model))
        if not isinstance(self.model, str) or not self.model.strip():
            raise InputError(f"encoder setting model: a hub name or a checkpoint folder is needed, got {self.model!r}")
        for name in ("revision", "device", "attn_implementation"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, str) or not v):
                raise InputError(f"encoder setting {name}: a non-empty string or None, got {v!r}")
        if self.compute_dtype is not None:
            name = str(self.compute_dtype).removeprefix("torch.")
            if name not in COMPUTE_DTYPES:
                raise InputError(f"encoder setting compute_dtype: {self.compute_dtype!r} is not one of"
                                 f" bfloat16, float16, float32, auto")
            object.__setattr__(self, "compute_dtype", COMPUTE_DTYPES[name])
        if self.store_dtype not in STORE_DTYPES:
            raise InputError(f"encoder setting store_dtype: stored dtype must be float16 or float32, got {self.store_dtype!r}")
        if not isinstance(self.query_prefix, str):
            raise InputError(f"encoder setting query_prefix: a string, got {self.query_prefix!r}")
        if not isinstance(self.trust_remote_code, bool):
            raise InputError(f"encoder setting trust_remote_code: true or false, got {self.trust_remote_code!r}")
        self._check_ints()

    def _check_ints(self) -> None:
        lows = {"n_augmentation": 0, "batch_size": 1, "shard_pages": 1, "query_batch_size": 1, "num_workers": 0,
                "min_pixels": 1, "max_pixels": 1}
        optional = ("batch_size", "query_batch_size", "num_workers", "min_pixels", "max_pixels")
        for name, low in lows.items():
            v = getattr(self, name)
            if v is None and name in optional:
                continue
            if not _is_int(v) or v < low:
                raise InputError(f"encoder setting {name} must be an integer >= {low}, got {v!r}")
        if self.min_pixels is not None and self.max_pixels is not None and self.min_pixels > self.max_pixels:
            raise InputError(f"encoder settings: min_pixels {self.min_pixels} is larger than max_pixels {self.max_pixels}")

    # ------------------------------------------------------------------ the one construction path
    @classmethod
    def keywords(cls) -> tuple[str, ...]:
        """Every keyword :meth:`from_options` takes: the field names, then :attr:`ALIASES` and the
        deprecated ``dtype``."""
        return (*(f.name for f in dataclasses.fields(cls)), *cls.ALIASES, *cls.DEPRECATED)

    @classmethod
    def from_options(cls, model: Any = None, /, *, dtype_means: str = "store_dtype", **options: Any) -> "EncoderSettings":
        """Settings from any of the spellings vdr accepts; every place that builds encoder settings
        from user options goes through here.

        Args:
            model: an :class:`EncoderSettings` (``options`` then change its fields), a mapping of
                options (merged under ``options``; may hold ``model``), a model name or folder, or
                ``None`` (then ``options`` must hold ``model``).
            dtype_means: the field the deprecated ``dtype`` keyword sets: ``"store_dtype"`` (the
                CLI's ``--dtype``, backend option mappings) or ``"compute_dtype"``
                (``LateInteractionEncoder.load``, the MTEB wrapper).
            options: field names (:meth:`keywords`); ``model_dtype`` = ``compute_dtype``; ``dtype``
                (deprecated, :class:`DeprecationWarning`). A ``None`` value means "the default"
                (with ``model`` settings: "keep the current value").

        Returns:
            A validated :class:`EncoderSettings`.

        Raises:
            InputError: an unknown keyword (the known ones listed), no model, ``dtype`` together
                with a different value of the field it stands for, or an invalid value.
        """
        base = model if isinstance(model, cls) else None
        if isinstance(model, Mapping):
            options = {**model, **options}
        elif base is None and model is not None:
            if options.get("model") is not None and str(options["model"]) != str(model):
                raise InputError(f"encoder settings: model given twice ({str(model)!r} and {str(options['model'])!r})")
            options["model"] = model
        given = {k: v for k, v in options.items() if v is not None}
        unknown = sorted(set(given) - set(cls.keywords()))
        if unknown:
            raise InputError(f"unknown encoder option(s) {unknown}; known: {', '.join(cls.keywords())}")
        fields = {cls.ALIASES.get(k, k): v for k, v in given.items() if k not in cls.DEPRECATED}
        if "dtype" in given:
            cls._deprecated_dtype(given["dtype"], dtype_means, fields)
        if base is not None:
            return base.replace(**fields)
        if "model" not in fields:
            raise InputError("encoder settings: no model (a hub name or a checkpoint folder) given")
        return cls(**fields)

    @classmethod
    def _deprecated_dtype(cls, value: Any, means: str, fields: dict) -> None:
        """Map the deprecated ``dtype`` keyword onto ``means`` in ``fields`` (with a DeprecationWarning)."""
        if means not in ("store_dtype", "compute_dtype"):
            raise ValueError(f"dtype_means must be store_dtype or compute_dtype, got {means!r}")
        flag = {"store_dtype": "--store-dtype", "compute_dtype": "--model-dtype"}[means]
        warnings.warn(f"the encoder option 'dtype' is deprecated and will be removed in the next release: here it is the"
                      f" {'stored page-vector' if means == 'store_dtype' else 'compute'} dtype; use '{means}' ({flag})",
                      DeprecationWarning, stacklevel=3)
        value = value.value if isinstance(value, Enum) else value
        if means in fields and fields[means] != value:
            raise InputError(f"encoder options: dtype={value!r} (deprecated, = {means}) and {means}={fields[means]!r} differ; give {means} only")
        fields[means] = value

    # ------------------------------------------------------------------ command line
    @classmethod
    def cli_fields(cls) -> list[dataclasses.Field]:
        """The fields that are command-line options (all but ``model``, which each command
        declares itself), in ``--help`` order. Each field's ``metadata`` holds ``flags`` (option
        names), ``type`` (``str``/``int``/``bool``), ``choices`` (or ``None``), ``negative`` (a bool's
        ``--no-`` flag) and ``help``; the default is the field's."""
        order = ("batch_size", "device", "store_dtype", "compute_dtype", "trust_remote_code", "revision", "query_prefix",
                 "n_augmentation", "min_pixels", "max_pixels", "attn_implementation", "num_workers", "query_batch_size",
                 "shard_pages")
        by_name = {f.name: f for f in dataclasses.fields(cls)}
        return [by_name[n] for n in order]

    def cli_args(self) -> list[str]:
        """These settings as command-line arguments (``["--model", ..., "--batch-size", "3", ...]``):
        the model and every option whose value differs from its default. ``vdr embed``/``vdr evaluate``
        given them build settings equal to ``self``."""
        args = ["--model", self.model]
        for f in self.cli_fields():
            v = getattr(self, f.name)
            if v == f.default:
                continue
            if f.metadata["type"] is bool:
                args.append(f.metadata["flags"][0] if v else f.metadata["negative"])
            else:
                args += [f.metadata["flags"][0], str(v)]
        return args

    # ------------------------------------------------------------------ views
    @property
    def pages_per_batch(self) -> int:
        """Pages per forward pass where no memory figure chooses it: :attr:`batch_size`, or 8
        (:data:`vdr.encode.pipeline.DEFAULT_BATCH_SIZE`) when unset."""
        return self.batch_size if self.batch_size is not None else DEFAULT_BATCH_SIZE

    @property
    def queries_per_batch(self) -> int:
        """Queries per forward pass: :attr:`query_batch_size`, or ``4 * pages_per_batch`` when unset."""
        return self.query_batch_size if self.query_batch_size is not None else 4 * self.pages_per_batch

    def page_options(self) -> dict:
        """The page fields (``{name: value}``): what, with the checkpoint's files, keys page vectors."""
        return {f: getattr(self, f) for f in self.PAGE_FIELDS}

    def query_options(self) -> dict:
        """The query fields (``{name: value}``): the query template's settings."""
        return {f: getattr(self, f) for f in self.QUERY_FIELDS}

    def store_key(self, page_fingerprint: str) -> str:
        """The embedding store's folder key of vectors of the encoder with ``page_fingerprint``
        stored in :attr:`store_dtype` (:func:`store_key`)."""
        return store_key(page_fingerprint, self.store_dtype)

    def replace(self, **changes: Any) -> "EncoderSettings":
        """A copy with ``changes`` applied (validated like the constructor).

        Raises:
            InputError: an unknown field name or an invalid value.
        """
        unknown = sorted(set(changes) - {f.name for f in dataclasses.fields(self)})
        if unknown:
            raise InputError(f"unknown encoder setting(s) {unknown}")
        return dataclasses.replace(self, **changes)

    def for_this_rank(self) -> "EncoderSettings":
        """These settings with this process's device under torchrun (``cuda:LOCAL_RANK`` unless a
        device was given; :func:`vdr.distributed.device_for_rank`); unchanged otherwise."""
        from .. import distributed as D

        device = D.device_for_rank(self.device)
        return self if device == self.device else self.replace(device=device)

    # ------------------------------------------------------------------ JSON
    def to_json(self) -> dict:
        """Every field as a JSON-able dict (``{"model": ..., "revision": ..., ...}``, field order)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: "dict | str") -> "EncoderSettings":
        """Build settings from :meth:`to_json`'s dict (or its JSON text); missing optional fields
        take their defaults.

        Raises:
            InputError: not an object, unknown keys (named), no ``model``, or invalid values.
        """
        if isinstance(data, str):
            try:
                data = json.loads(data)
            except ValueError as e:
                raise InputError(f"encoder settings: not JSON ({e})") from None
        if not isinstance(data, dict):
            raise InputError(f"encoder settings: a JSON object is needed, got {type(data).__name__}")
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise InputError(f"encoder settings: unknown key(s) {unknown}; known: {', '.join(sorted(names))}")
        if "model" not in data:
            raise InputError("encoder settings: no 'model'")
        return cls(**data)
