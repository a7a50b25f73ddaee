"""Retrieval backends. Each returns a :class:`vdr.types.Run` and exposes a ``config`` dict (every
parameter plus library versions) for ``results.json``.

* :mod:`vdr.backends.lexical`: :class:`~vdr.backends.lexical.BM25Backend` (bm25s).
* :mod:`vdr.backends.semantic`: :class:`~vdr.backends.semantic.DenseBackend` (sentence-transformers).
* :mod:`vdr.backends.hybrid`: :func:`~vdr.backends.hybrid.reciprocal_rank_fusion` and
  :class:`~vdr.backends.hybrid.HybridBackend`.

Nothing heavy is imported here: import the submodule you need (torch loads only with ``semantic``).
"""
