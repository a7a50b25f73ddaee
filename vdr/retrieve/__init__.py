"""Retrieval backends. Each returns a :class:`vdr.types.Run` and exposes a ``config`` dict (every
parameter plus library versions) for ``results.json``.

* :mod:`vdr.retrieve.lexical`: :class:`~vdr.retrieve.lexical.BM25Backend` (bm25s).
* :mod:`vdr.retrieve.semantic`: :class:`~vdr.retrieve.semantic.DenseBackend` (sentence-transformers).
* :mod:`vdr.retrieve.hybrid`: :func:`~vdr.retrieve.hybrid.reciprocal_rank_fusion` and
  :class:`~vdr.retrieve.hybrid.HybridBackend`.

Nothing heavy is imported here: import the submodule you need (torch loads only with ``semantic``).
"""
