"""``vdr serve``: retrieval metrics as RL rewards over HTTP (:mod:`vdr.rewards.serve`)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from . import common
from .params import (
    BACKEND_OPTION_HELP, parse_backend_options,
)


@common.command("serve")
def serve_command(
    corpus_dir: Path = typer.Argument(..., help="Corpus folder (pages or passages); text backends use the text, multimodal the page images."),
    backend: str = typer.Option("lexical", "--backend", rich_help_panel=common.PANEL_BACKENDS, help="lexical (BM25), semantic (sentence-transformers), hybrid (RRF of both), multimodal (--model: a ColPali-family model over the page images), pyserini, or any registered backend: built as vdr evaluate builds it."),
    qrels: Path = typer.Option(..., "--qrels", rich_help_panel=common.PANEL_INPUTS, help="Qrels (BEIR TSV, TREC or JSON): the query ids that can be rewarded."),
    host: str = typer.Option("127.0.0.1", "--host", rich_help_panel=common.PANEL_SERVER, help="Address to listen on (0.0.0.0 exposes the server to the network)."),
    port: int = typer.Option(8000, "--port", rich_help_panel=common.PANEL_SERVER, help="Port to listen on."),
    token_env: Optional[str] = typer.Option(None, "--token-env", rich_help_panel=common.PANEL_SERVER, help="Environment variable holding a bearer token that POST requests must send (never written)."),
    metric: str = typer.Option("ndcg@3", "--metric", rich_help_panel=common.PANEL_REWARD, help="Default reward metric: any vdr metric (ndcg@3, hit@5, mrr@10, recall@10 ...) or rank_incentive."),
    depth: int = typer.Option(100, "--depth", rich_help_panel=common.PANEL_REWARD, help="Pages retrieved per rewrite (>= every metric cutoff)."),
    max_query_tokens: Optional[int] = typer.Option(
        None, "--max-query-tokens", "--max-words", rich_help_panel=common.PANEL_REWARD,
        help="A tighter query budget in whitespace tokens (oldest words dropped first; default: the backend's own, as vdr evaluate: 512 for BM25)."),
    budget_preset: Optional[str] = typer.Option(
        None, "--budget-preset", rich_help_panel=common.PANEL_REWARD,
        help="A named query budget instead: convsearch-train (ConvSearch-R1's training cut, the first 1,024 words; recorded)."),
    cache_size: int = typer.Option(100_000, "--cache-size", rich_help_panel=common.PANEL_SERVER, help="LRU cache entries of (backend, query id, rewrite) rankings."),
    batch_wait_ms: float = typer.Option(0.0, "--batch-wait-ms", rich_help_panel=common.PANEL_SERVER, help="Extra wait (ms) for more requests before scoring a batch (0: requests arriving during a batch form the next one)."),
    max_items: int = typer.Option(4096, "--max-items", rich_help_panel=common.PANEL_SERVER, help="Most rewrites per request."),
    max_body_mb: float = typer.Option(8.0, "--max-body-mb", rich_help_panel=common.PANEL_SERVER, help="Largest request body in MiB."),
    model: Optional[str] = typer.Option(None, "--model", rich_help_panel=common.PANEL_BACKENDS, help="Semantic backend model (default all-MiniLM-L6-v2, offline), or the multimodal backend's ColPali-family model."),
    device: Optional[str] = typer.Option(None, "--device", rich_help_panel=common.PANEL_BACKENDS, help="Device of the semantic model (cpu, cuda)."),
    backend_option: Optional[list[str]] = typer.Option(
        None, "--backend-option", rich_help_panel=common.PANEL_BACKENDS, help=BACKEND_OPTION_HELP),
    queries: Optional[Path] = typer.Option(
        None, "--queries", rich_help_panel=common.PANEL_REWARD,
        help="The original queries (queries.jsonl): GET /stats compares each rewrite's script with its query's (off-script share)."),
    health_option: Optional[list[str]] = typer.Option(
        None, "--health-option", rich_help_panel=common.PANEL_REWARD,
        help="A training-health setting of GET /stats, KEY=VALUE (repeatable): zero_advantage_max, length_drift_max,"
             " length_drift_min, format_break_max, empty_max, off_script_max, baseline_steps, window, group_size,"
             " expected_script ... (null turns a threshold off)."),
    serve_as: Optional[str] = typer.Option(
        None, "--serve-as", rich_help_panel=common.PANEL_BACKENDS,
        help="Reward through a served system of the multimodal backend (binary, int8, pool:3, muvera, qdrant ...: as vdr evaluate"
             " --serve-as), so a rewriter trains against the index it will meet; the reward equals that system's evaluation."),
    rerank: Optional[str] = typer.Option(
        None, "--rerank", rich_help_panel=common.PANEL_BACKENDS,
        help="Reward through --backend's run reranked by this model (a cross-encoder or a multimodal reranker, as vdr evaluate"
             " --rerank); the reward equals the evaluation of BACKEND+rerank."),
    rerank_depth: int = typer.Option(100, "--rerank-depth", rich_help_panel=common.PANEL_BACKENDS, help="Pages reranked per rewrite."),
) -> None:
    """Serve retrieval metrics as RL rewards over HTTP: POST /reward, POST /retrieve (ConvSearch-R1), GET /health."""
    from ..rewards.serve import ServeLimits, serve

    parts = "lexical,semantic,hybrid" if backend == "hybrid" else str(backend)
    options = parse_backend_options(backend_option, parts)
    if serve_as is not None:
        if backend != "multimodal":
            raise typer.BadParameter(f"--serve-as serves the multimodal backend's page vectors; got --backend {backend}", param_hint="--serve-as")
        options = {**(options or {}), "served": {"system": serve_as}}
        backend = "served"
    if rerank is not None:
        options = {**(options or {}), "rerank": {**(options or {}).get("rerank", {}), "model": rerank, "base": backend,
                                                 "depth": rerank_depth}}
        backend = "rerank"

    health = _health_options(health_option)
    limits = ServeLimits(max_body_bytes=int(max_body_mb * 1024 * 1024), max_items=max_items, batch_wait_ms=batch_wait_ms)
    serve(corpus_dir, backend=backend, qrels=qrels, host=host, port=port, token_env=token_env, metric=metric, depth=depth,
          max_query_tokens=max_query_tokens, budget_preset=budget_preset, cache_size=cache_size, limits=limits, model=model, device=device,
          backend_options=options or None, health=health, queries=queries, ready=lambda line: typer.echo(line, err=True))


def _health_options(items: list[str] | None):
    """``--health-option KEY=VALUE`` -> :class:`~vdr.rewards.health.HealthOptions` (values read by the
    fields' types; ``null`` turns a threshold off).

    Raises:
        InputError: an item without ``=``, an unknown key or a bad value (named).
    """
    from ..errors import InputError
    from ..retrieve.options import check_options
    from ..rewards.health import HealthOptions

    values = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise InputError(f"--health-option takes KEY=VALUE, got {item!r}")
        values[key.strip()] = value
    return check_options(HealthOptions, values, backend="--health-option", strings=True)
