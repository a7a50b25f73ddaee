"""Versioned judge prompts (Stage A tournament, Stage B rubric) for RCP-nDCG.

The prompts follow the RCP-nDCG paper (Rubric-Calibrated Preferences, arXiv 2609.35739) and the
reference documentation of cohere-ai/rcp-ndcg (``docs/concepts/tournament.md``,
``docs/concepts/rubric.md``): Stage A asks for one relevance score per document on a -5..+5 logit
scale; Stage B asks the five binary criteria C1..C5 for each document of a window. The wording is
vdr's own. Documents are shown under neutral labels ``doc_1`` .. ``doc_w`` (never their corpus ids,
whose file names could sway a judge), in the window's order.

:data:`PROMPT_VERSION` is part of every cache key and of ``rcp.json``: change it whenever a prompt
text, the answer schema or the page rendering changes, so that old answers are never reused for a
different question.
"""

from __future__ import annotations

import hashlib

__all__ = [
    "PROMPT_VERSION",
    "CRITERIA",
    "SCORE_MIN",
    "SCORE_MAX",
    "TOURNAMENT_SYSTEM",
    "RUBRIC_SYSTEM",
    "tournament_instructions",
    "rubric_instructions",
    "prompts_fingerprint",
]

PROMPT_VERSION = "vdr-rcp-1"
"""Version of the prompts, answer schemas and page rendering below."""

SCORE_MIN, SCORE_MAX = -5.0, 5.0
"""Stage A score range (a logit scale), inclusive."""

CRITERIA: tuple[tuple[str, str, str], ...] = (
    ("C1", "Topical Relevance", "Is its topic clearly related to the query's information need?"),
    ("C2", "Information Utility", "Does it contain specific, useful information to address the query?"),
    ("C3", "Entity/Detail Match", "Does it name and discuss the particular entity or detail in the query?"),
    ("C4", "Direct Answer", "Does it explicitly and directly answer the query's primary question?"),
    ("C5", "Thorough Treatment", "Does it treat the topic in depth rather than superficially?"),
)
"""The five Stage B criteria ``(id, name, question)`` of the paper (reference ``docs/concepts/rubric.md``)."""

TOURNAMENT_SYSTEM = (
    "You are a careful relevance assessor for a document retrieval benchmark. "
    "You answer with one JSON object and nothing else."
)

RUBRIC_SYSTEM = TOURNAMENT_SYSTEM


def tournament_instructions(query: str, labels: list[str], modality: str) -> str:
    """Stage A instructions for one window.

    Args:
        query: the information need (with earlier conversation turns, when any, already prepended).
        labels: the window's document labels in display order (``["doc_1", ...]``).
        modality: ``"text"`` (pages given as text) or ``"image"`` (pages given as images).

    Returns:
        The instruction text; the pages follow it in the same user message.
    """
    what = "page images" if modality == "image" else "page texts"
    keys = ", ".join(f'"{lab}": <score>' for lab in labels)
    return (
        "TASK: tournament\n"
        f"Query: {query}\n\n"
        f"Below are {len(labels)} document {what}, labelled {labels[0]} to {labels[-1]}. "
        "Judge how relevant each document is to the query, comparing the documents with each other. "
        f"Give every document one score from {SCORE_MIN:+.0f} (clearly irrelevant) to {SCORE_MAX:+.0f} "
        "(clearly relevant and answers the query); treat the scale as log-odds: a difference of 1 means "
        "the higher one is about e times as likely to be the more useful document. The order in which "
        "the documents are shown means nothing.\n"
        f'Answer with exactly this JSON object and no other text: {{"scores": {{{keys}}}}}'
    )


def rubric_instructions(query: str, labels: list[str], modality: str) -> str:
    """Stage B instructions for one window: five yes/no criteria per document (1 = yes, 0 = no).

    Args: as :func:`tournament_instructions`.
    """
    what = "page images" if modality == "image" else "page texts"
    crit = "\n".join(f"{cid} ({name}): {q}" for cid, name, q in CRITERIA)
    one = ", ".join(f'"{cid}": 0 or 1' for cid, _, _ in CRITERIA)
    keys = ", ".join(f'"{lab}": {{{one}}}' for lab in labels)
    return (
        "TASK: rubric\n"
        f"Query: {query}\n\n"
        f"Below are {len(labels)} document {what}, labelled {labels[0]} to {labels[-1]}. "
        "Rate each document on its own, against this absolute standard (not against the other documents):\n"
        f"{crit}\n"
        f'Answer with exactly this JSON object and no other text: {{"answers": {{{keys}}}}}'
    )


def prompts_fingerprint() -> str:
    """sha256 of the prompt texts (rendered for a fixed dummy window), recorded beside
    :data:`PROMPT_VERSION` so that an edit without a version bump is visible in ``rcp.json``."""
    h = hashlib.sha256()
    for m in ("text", "image"):
        h.update(TOURNAMENT_SYSTEM.encode() + tournament_instructions("Q", ["doc_1", "doc_2"], m).encode())
        h.update(RUBRIC_SYSTEM.encode() + rubric_instructions("Q", ["doc_1", "doc_2"], m).encode())
    return "sha256:" + h.hexdigest()
