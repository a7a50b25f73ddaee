"""Retrieval backends: each implements :class:`vdr.retrieve.base.Backend` (``index(corpus)``,
``search(queries, depth) -> Run``, ``config``, ``report``) and is built through the registry
(:func:`vdr.retrieve.base.backend_factory`; entry-point group ``vdr.backends``).

* :mod:`vdr.retrieve.base`: the protocol, the registry and the on-disk index cache.
* :mod:`vdr.retrieve.multimodal`: :class:`~vdr.retrieve.multimodal.MultimodalBackend` (colpali-engine
  encoder, page store, streaming MaxSim).
* :mod:`vdr.retrieve.lexical`: :class:`~vdr.retrieve.lexical.BM25Backend` (bm25s).
* :mod:`vdr.retrieve.semantic`: :class:`~vdr.retrieve.semantic.DenseBackend` (sentence-transformers).
* :mod:`vdr.retrieve.hybrid`: :func:`~vdr.retrieve.hybrid.reciprocal_rank_fusion` and
  :class:`~vdr.retrieve.hybrid.HybridBackend`.
* :mod:`vdr.retrieve.runfile`: :class:`~vdr.retrieve.runfile.RunFileBackend` (a user's TREC/JSON run).

Nothing heavy is imported here: import the submodule you need (torch loads only with ``semantic``
and ``multimodal``).
"""
