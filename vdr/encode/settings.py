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

This module imports neither torch nor transformers.

>>> s = EncoderSettings("vidore/colqwen2.5-v0.2", max_pixels=28 * 28 * 768, query_prefix="")
>>> EncoderSettings.from_json(s.to_json()) == s
True
>>> s.page_options()["max_pixels"], s.query_options()
(602112, {'query_prefix': '', 'n_augmentation': 10})
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from ..errors import InputError

__all__ = ["EncoderSettings", "DEFAULT_QUERY_PREFIX", "N_AUGMENTATION_TOKENS", "STORE_DTYPES", "COMPUTE_DTYPES"]

#: The query prefix MTEB's ColPali/ColQwen/ColSmol evaluations use (and colpali-engine < 0.3.13's
#: default). Numbers are comparable with the MTEB/ViDoRe leaderboards only with this prefix.
DEFAULT_QUERY_PREFIX = "Query: "
#: Number of query-augmentation tokens appended to every query (colpali-engine's default).
N_AUGMENTATION_TOKENS = 10
#: Dtypes page vectors can be stored in.
STORE_DTYPES = ("float16", "float32")
#: Accepted compute dtype names -> canonical name.
COMPUTE_DTYPES = {"bfloat16": "bfloat16", "bf16": "bfloat16", "float16": "float16", "fp16": "float16",
                  "float32": "float32", "fp32": "float32"}


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


@dataclass(frozen=True)
class EncoderSettings:
    """Every option of a late-interaction (ColPali-family) encoder, validated on construction.

    Attributes:
        model: hub repository id (``"vidore/colqwen2.5-v0.2"``) or local checkpoint folder (a
            :class:`~pathlib.Path` is stored as ``str``). Page field.
        revision: hub revision (branch, tag or commit); ``None``: the default branch. Page field
            (the resolved commit and the weights' sha256 are keyed, not this string).
        compute_dtype: dtype the model runs in: ``"bfloat16"``, ``"float16"`` or ``"float32"``
            (``bf16``/``fp16``/``fp32`` accepted and normalised); ``None``: bfloat16 on CUDA,
            float32 on the CPU. Page field (CLI ``--model-dtype``).
        min_pixels, max_pixels: image-area budget in pixels of the Qwen-family processors (each
            page is resized so that its area lies in ``[min_pixels, max_pixels]``; one image token
            per 28 x 28 pixels); ``None``: the checkpoint's. Fixed-resolution families (ColPali,
            ColSmol, ...) refuse them. Page fields.
        store_dtype: dtype of the stored page vectors, ``"float16"`` (default) or ``"float32"``.
            Page field (a second key component of the store; CLI ``--dtype``).
        query_prefix: text put before every query (default ``"Query: "``, MTEB's). Query field.
        n_augmentation: query-augmentation tokens appended to every query (default 10). Query field.
        device: ``"cuda"``, ``"cuda:N"``, ``"cpu"``; ``None``: CUDA when available (under torchrun
            ``cuda:LOCAL_RANK``). Run field.
        attn_implementation: ``"flash_attention_2"``, ``"sdpa"``, ``"eager"``; ``None``:
            flash-attention 2 on CUDA when installed, else sdpa. Run field (recorded in results).
        trust_remote_code: allow the checkpoint's own Python code (off unless asked). Run field.
        batch_size: pages per forward pass (>= 1, default 8; halved on CUDA out-of-memory). Run field.
        query_batch_size: queries per forward pass (>= 1); ``None``: ``4 * batch_size``. Run field.
        num_workers: DataLoader worker processes preparing page images (>= 0); ``None``: 2 on
            CUDA, 0 on the CPU. Run field.
        shard_pages: pages per committed store shard, the unit of resumption (>= 1, default 256).
            Run field.

    Raises:
        InputError: a value of the wrong type or out of range (the field is named).
    """

    model: str
    revision: str | None = None
    compute_dtype: str | None = None
    min_pixels: int | None = None
    max_pixels: int | None = None
    store_dtype: str = "float16"
    query_prefix: str = DEFAULT_QUERY_PREFIX
    n_augmentation: int = N_AUGMENTATION_TOKENS
    device: str | None = None
    attn_implementation: str | None = None
    trust_remote_code: bool = False
    batch_size: int = 8
    query_batch_size: int | None = None
    num_workers: int | None = None
    shard_pages: int = 256

    #: Fields that change page vectors (with the checkpoint's files): they key the page store.
    PAGE_FIELDS: ClassVar[tuple[str, ...]] = ("model", "revision", "compute_dtype", "min_pixels", "max_pixels", "store_dtype")
    #: Fields that change query vectors only (the query template).
    QUERY_FIELDS: ClassVar[tuple[str, ...]] = ("query_prefix", "n_augmentation")
    #: Fields that change neither (speed, placement, permissions).
    RUN_FIELDS: ClassVar[tuple[str, ...]] = ("device", "attn_implementation", "trust_remote_code", "batch_size",
                                             "query_batch_size", "num_workers", "shard_pages")

    def __post_init__(self) -> None:
        if isinstance(self.model, Path):
            object.__setattr__(self, "model", str(self.model))
        if not isinstance(self.model, str) or not self.model.strip():
            raise InputError(f"encoder setting model: a hub name or a checkpoint folder is needed, got {self.model!r}")
        for name in ("revision", "device", "attn_implementation"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, str) or not v):
                raise InputError(f"encoder setting {name}: a non-empty string or None, got {v!r}")
        if self.compute_dtype is not None:
            canon = COMPUTE_DTYPES.get(str(self.compute_dtype).removeprefix("torch."))
            if canon is None:
                raise InputError(f"encoder setting compute_dtype: {self.compute_dtype!r} is not one of"
                                 f" bfloat16, float16, float32")
            object.__setattr__(self, "compute_dtype", canon)
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
        optional = ("query_batch_size", "num_workers", "min_pixels", "max_pixels")
        for name, low in lows.items():
            v = getattr(self, name)
            if v is None and name in optional:
                continue
            if not _is_int(v) or v < low:
                raise InputError(f"encoder setting {name} must be an integer >= {low}, got {v!r}")
        if self.min_pixels is not None and self.max_pixels is not None and self.min_pixels > self.max_pixels:
            raise InputError(f"encoder settings: min_pixels {self.min_pixels} is larger than max_pixels {self.max_pixels}")

    # ------------------------------------------------------------------ views
    @property
    def queries_per_batch(self) -> int:
        """Queries per forward pass: :attr:`query_batch_size`, or ``4 * batch_size`` when unset."""
        return self.query_batch_size if self.query_batch_size is not None else 4 * self.batch_size

    def page_options(self) -> dict:
        """The page fields (``{name: value}``): what, with the checkpoint's files, keys page vectors."""
        return {f: getattr(self, f) for f in self.PAGE_FIELDS}

    def query_options(self) -> dict:
        """The query fields (``{name: value}``): the query template's settings."""
        return {f: getattr(self, f) for f in self.QUERY_FIELDS}

    def replace(self, **changes: Any) -> "EncoderSettings":
        """A copy with ``changes`` applied (validated like the constructor).

        Raises:
            InputError: an unknown field name or an invalid value.
        """
        unknown = sorted(set(changes) - {f.name for f in dataclasses.fields(self)})
        if unknown:
            raise InputError(f"unknown encoder setting(s) {unknown}")
        return dataclasses.replace(self, **changes)

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
