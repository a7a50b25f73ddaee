"""Query-vector cache: one vector per (encoder settings, query text), kept on disk across runs.

A re-run of ``vdr evaluate`` with one more rewrite variant should encode only the texts it has
never seen: query texts repeat across runs (the original queries, earlier variants) and across
variants (a rewrite identical to its original). Vectors are therefore cached per TEXT, not per
list of texts, under a fingerprint of everything that changes a query vector (the caller's
``settings``: model weights, prompt, length limit, dtype, device type, library versions).

Layout (no pickle)::

    cache_dir/semantic-queries/<settings fingerprint>/<shard>/
        vectors.safetensors   embeddings float32 (n, dim), truncated uint8 (n,)
        texts.json            {"format": 1, "texts": [sha256 hex of each text, row order]}

Each call that encodes new texts adds one shard holding just those texts, written atomically
(:func:`vdr.retrieve.base.write_cache_dir`); two processes adding the same texts write the same
shard name and one copy is kept. A shard that is incomplete or unreadable counts as a miss (and is removed, then written again).

Vectors must not depend on which other texts are encoded with them (the semantic backend batches
only texts of equal token length, so this holds bitwise on CPU); a text's vector is then the
same whether it came from the cache or from the model.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from .base import cache_path, fingerprint, read_json, write_cache_dir

__all__ = ["cached_encode", "text_key", "KIND"]

KIND = "semantic-queries"
_FORMAT = 1
_VECTORS = "vectors.safetensors"
_TEXTS = "texts.json"


def text_key(text: str) -> str:
    """sha256 hex of ``text`` (UTF-8): a query's key inside one settings folder."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _index(folder: Path) -> dict[str, tuple[Path, int]]:
    """``{text key: (shard folder, row)}`` over the readable shards of ``folder``."""
    out: dict[str, tuple[Path, int]] = {}
    if not folder.is_dir():
        return out
    for shard in sorted(folder.iterdir()):
        if shard.name.startswith(".") or not shard.is_dir():
            continue
        meta = read_json(shard / _TEXTS)
        keys = meta.get("texts") if isinstance(meta, dict) and meta.get("format") == _FORMAT else None
        if isinstance(keys, list):
            for row, k in enumerate(keys):
                out.setdefault(k, (shard, row))
    return out


def _read_shard(shard: Path, n_keys: int) -> tuple[np.ndarray, np.ndarray] | None:
    """``(embeddings float32 (n, dim), truncated bool (n,))`` of a shard, or ``None`` if unusable."""
    try:
        from safetensors.numpy import load_file

        got = load_file(str(shard / _VECTORS))
        emb, trunc = got["embeddings"], got["truncated"].astype(bool)
    except Exception:  # OSError, KeyError, safetensors' own error on a damaged file: a miss
        return None
    if emb.dtype != np.float32 or emb.ndim != 2 or emb.shape[0] != n_keys or trunc.shape != (n_keys,):
        return None
    return emb, trunc


def _lookup(folder: Path, keys: list[str]) -> dict[str, tuple[np.ndarray, bool]]:
    """Cached ``{text key: (vector, truncated)}`` for those of ``keys`` that are in ``folder``."""
    index = _index(folder)
    by_shard: dict[Path, list[tuple[str, int]]] = {}
    for k in dict.fromkeys(keys):
        if k in index:
            shard, row = index[k]
            by_shard.setdefault(shard, []).append((k, row))
    found: dict[str, tuple[np.ndarray, bool]] = {}
    for shard, wanted in by_shard.items():
        meta = read_json(shard / _TEXTS) or {}
        got = _read_shard(shard, len(meta.get("texts", [])))
        if got is None:
            shutil.rmtree(shard, ignore_errors=True)  # damaged: dropped, so that it can be written again
            continue
        for k, row in wanted:
            found[k] = (got[0][row], bool(got[1][row]))
    return found


def _add_shard(folder: Path, keys: list[str], emb: np.ndarray, truncated: np.ndarray) -> None:
    def fill(d: Path) -> None:
        from safetensors.numpy import save_file

        save_file({"embeddings": np.ascontiguousarray(emb, dtype=np.float32), "truncated": truncated.astype(np.uint8)},
                  str(d / _VECTORS))
        (d / _TEXTS).write_text(json.dumps({"format": _FORMAT, "texts": keys}), encoding="utf-8")

    write_cache_dir(folder / fingerprint(_FORMAT, keys), fill)


def cached_encode(
    cache_dir: str | Path | None,
    settings: dict,
    texts: Sequence[str],
    encode: Callable[[list[str]], tuple[np.ndarray, np.ndarray]],
) -> tuple[np.ndarray, np.ndarray, bool | None, int]:
    """Vectors of ``texts``: cached ones read from disk, the others from ``encode`` (then cached).

    Args:
        cache_dir: root of the index cache, or ``None`` (no cache: ``encode(texts)``).
        settings: JSON-able description of everything that changes a vector (the folder key).
        texts: query texts as they are encoded (after normalisation; the prompt is in ``settings``).
        encode: ``texts -> (float32 (n, dim) vectors, bool (n,) truncated)``; called at most once,
            with the distinct texts not in the cache, in first-seen order.

    Returns:
        ``(vectors float32 (len(texts), dim), truncated bool (len(texts),), hit, n_encoded)``:
        ``hit`` is ``True`` when every text came from the cache, ``False`` when some were encoded,
        ``None`` without a cache; ``n_encoded`` is the number of texts passed to ``encode``.

    Raises:
        OSError: the cache folder cannot be written.
    """
    texts = list(texts)
    if cache_dir is None:
        emb, trunc = encode(texts)
        return emb, np.asarray(trunc, dtype=bool), None, len(texts)
    folder = cache_path(cache_dir, KIND, fingerprint(KIND, _FORMAT, settings))
    keys = [text_key(t) for t in texts]
    found = _lookup(folder, keys)
    missing = [k for k in dict.fromkeys(keys) if k not in found]
    if missing:
        wanted = set(missing)
        first = {k: t for k, t in zip(keys, texts) if k in wanted}
        new_texts = [first[k] for k in missing]
        emb, trunc = encode(new_texts)
        trunc = np.asarray(trunc, dtype=bool)
        _add_shard(folder, missing, emb, trunc)
        for k, v, t in zip(missing, emb, trunc):
            found[k] = (v, bool(t))
    if not texts:
        return np.zeros((0, 0), np.float32), np.zeros(0, bool), not missing, 0
    vectors = np.stack([found[k][0] for k in keys]).astype(np.float32, copy=False)
    truncated = np.array([found[k][1] for k in keys], dtype=bool)
    return vectors, truncated, not missing, len(missing)
