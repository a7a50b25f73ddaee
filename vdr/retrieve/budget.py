"""The query budget, ONE rule for every backend, the rewards and the conversational variants: it
lives in :mod:`vdr.text` (the bottom layer, so that ingest, retrieve, rewards and rewrite import it
without importing each other); this module re-exports it under its established path."""

from ..text import (  # noqa: F401
    DEFAULT_MAX_QUERY_TOKENS,
    BudgetedQuery,
    fit_query_budget,
    apply_budget,
    budget_config,
    check_max_tokens,
    cut_words,
    QueryBudget,
    BUDGET_PRESETS,
    query_budget,
)

__all__ = ["DEFAULT_MAX_QUERY_TOKENS", "BudgetedQuery", "fit_query_budget", "apply_budget", "budget_config", "check_max_tokens", "cut_words", "QueryBudget", "BUDGET_PRESETS", "query_budget"]
