"""Encode stage: page images and queries -> multi-vectors, kept in a page store.

* :mod:`vdr.encode.settings`: :class:`EncoderSettings`, every encoder option in one frozen record.
* :mod:`vdr.encode.colpali`: :class:`LateInteractionEncoder` (colpali-engine models).
* :mod:`vdr.encode.store`: :class:`EmbeddingStore`, page vectors on disk keyed by page fingerprint.
* :mod:`vdr.encode.embed`: :func:`embed` fills a store; :class:`EmbedReport` says what it did.

This package only re-exports. The settings, store and embed modules import no torch;
:class:`LateInteractionEncoder` and :class:`QueryTemplate` are imported on first use (they import
torch), so that ``import vdr`` stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .embed import EmbedReport, embed, page_content_hash  # binds the function over the submodule name
from .settings import DEFAULT_QUERY_PREFIX, N_AUGMENTATION_TOKENS, EncoderSettings
from .store import EmbeddingStore

if TYPE_CHECKING:  # pragma: no cover
    from .colpali import LateInteractionEncoder, QueryTemplate

__all__ = ["embed", "EmbedReport", "EncoderSettings", "EmbeddingStore", "LateInteractionEncoder", "QueryTemplate",
           "DEFAULT_QUERY_PREFIX", "N_AUGMENTATION_TOKENS", "page_content_hash"]

_LAZY = {"LateInteractionEncoder", "QueryTemplate"}


def __getattr__(name: str):
    """``LateInteractionEncoder`` and ``QueryTemplate``, imported from :mod:`vdr.encode.colpali` on first use."""
    if name in _LAZY:
        from . import colpali

        return getattr(colpali, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | _LAZY)
