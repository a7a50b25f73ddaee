"""Bridges between vdr and other evaluation frameworks.

* :mod:`vdr.integrations.mteb`: vdr corpora as MTEB 2.x retrieval tasks, vdr's ColPali-family
  encoders as an MTEB model, and MTEB runs inside ``vdr evaluate --engine mteb``.

Nothing here is imported by ``import vdr``; each integration imports its framework on use.
"""
