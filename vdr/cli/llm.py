"""Commands that call a language model: ``vdr judge`` (RCP-nDCG) and ``vdr rewrite``."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from . import common
from ..progress import counted
from .common import (
    FillFailed, Modality,
)


@common.command("judge")
def judge_command(
    results_dir: Path = typer.Argument(..., help="Results folder written by `vdr evaluate` (results.json, runs/)."),
    endpoint: Optional[str] = typer.Option(None, "--endpoint", rich_help_panel=common.PANEL_LLM, help="OpenAI-compatible base URL, e.g. http://localhost:8000/v1 (default $VDR_JUDGE_ENDPOINT)."),
    judge_model: Optional[str] = typer.Option(None, "--judge-model", rich_help_panel=common.PANEL_LLM, help="Judge model name served by the endpoint."),
    modality: Modality = typer.Option(Modality.image, "--modality", rich_help_panel=common.PANEL_LLM, help="image (page PNGs, a vision judge) or text (page text)."),
    budget: Optional[int] = typer.Option(None, "--budget", rich_help_panel=common.PANEL_REQUESTS, help="Most judge calls to make (cached answers are free); stops cleanly when spent."),
    k: int = typer.Option(3, "--k", rich_help_panel=common.PANEL_STATS, help="Cutoff of RCP-nDCG@k and depth of the pools."),
    concurrency: int = typer.Option(4, "--concurrency", rich_help_panel=common.PANEL_REQUESTS, help="Parallel requests."),
    cache: Optional[Path] = typer.Option(None, "--cache", rich_help_panel=common.PANEL_REQUESTS, help="JSONL answer cache (default RESULTS_DIR/judge/cache.jsonl)."),
    timeout: float = typer.Option(120.0, "--timeout", rich_help_panel=common.PANEL_REQUESTS, help="Seconds per request."),
    max_retries: int = typer.Option(4, "--max-retries", rich_help_panel=common.PANEL_REQUESTS, help="Retries of a failed request (timeouts, HTTP 429 and 5xx): after the wait the endpoint asks for (Retry-After, x-ratelimit-reset-*), else exponential backoff with jitter."),
    json_mode: bool = typer.Option(False, "--json-mode/--no-json-mode", rich_help_panel=common.PANEL_LLM, help="Ask the endpoint for JSON output (response_format json_object)."),
    max_tokens: int = typer.Option(2048, "--max-tokens", rich_help_panel=common.PANEL_LLM, help="Token limit of an answer; an answer cut by it is a failed judgement."),
    temperature: float = typer.Option(0.0, "--temperature", rich_help_panel=common.PANEL_LLM, help="Sampling temperature (part of the cache key)."),
    top_p: Optional[float] = typer.Option(None, "--top-p", rich_help_panel=common.PANEL_LLM, help="Nucleus sampling mass in (0, 1] (default: not sent)."),
    seed: Optional[int] = typer.Option(None, "--seed", rich_help_panel=common.PANEL_LLM, help="Sampling seed sent to the endpoint (default: not sent)."),
    stop: Optional[list[str]] = typer.Option(None, "--stop", rich_help_panel=common.PANEL_LLM, help="A stop sequence (repeatable; default: none)."),
    quiet: bool = common.OPTIONS["quiet"](),
) -> None:
    """Judge-calibrated RCP-nDCG@k beside nDCG@k and hole@k (see vdr.judge). The API key is read from
    $VDR_JUDGE_API_KEY or $OPENAI_API_KEY and never written."""
    from ..judge.run import judge

    res = judge(results_dir, endpoint=endpoint, judge_model=judge_model, modality=modality, budget=budget, k=k,
                concurrency=concurrency, cache=cache, timeout=timeout, max_retries=max_retries, json_mode=json_mode,
                max_tokens=max_tokens, temperature=temperature, top_p=top_p, seed=seed, stop=tuple(stop) if stop else None,
                progress=not quiet)
    typer.echo(res.table())
    typer.echo(f"results: {res.out_dir / 'rcp.json'}; gains: {res.out_dir / 'gains.tsv'}")


@common.command("rewrite")
def rewrite_command(
    queries: Path = typer.Argument(..., help="Queries to rewrite (BEIR queries.jsonl; `history` = earlier turns, oldest first)."),
    template: str = typer.Option("conversational", "--template", rich_help_panel=common.PANEL_LLM, help="Shipped template (conversational, convsearch-r1, rl-qr) or a TOML file."),
    out: Path = typer.Option(..., "--out", "-o", rich_help_panel=common.PANEL_RUN, help="Rewrite file to write (queries.jsonl); failures go to OUT.failures.jsonl."),
    endpoint: Optional[str] = typer.Option(None, "--endpoint", rich_help_panel=common.PANEL_LLM, help="OpenAI-compatible base URL, e.g. http://localhost:8000/v1."),
    model: Optional[str] = typer.Option(None, "--model", rich_help_panel=common.PANEL_LLM, help="Model name served by the endpoint."),
    local: Optional[Path] = typer.Option(None, "--local", rich_help_panel=common.PANEL_LLM, help="A local transformers causal-LM folder instead of an endpoint."),
    cache: Optional[Path] = typer.Option(None, "--cache", rich_help_panel=common.PANEL_REQUESTS, help="JSONL cache of rewrites (default OUT.cache.jsonl beside OUT)."),
    concurrency: int = typer.Option(4, "--concurrency", rich_help_panel=common.PANEL_REQUESTS, help="Parallel requests."),
    budget: Optional[int] = typer.Option(None, "--budget", rich_help_panel=common.PANEL_REQUESTS, help="Most calls to make (cached rewrites are free)."),
    timeout: str = typer.Option("30", "--timeout", rich_help_panel=common.PANEL_REQUESTS, help="Seconds per HTTP attempt ('none' is refused)."),
    deadline: str = typer.Option("120", "--deadline", rich_help_panel=common.PANEL_REQUESTS, help="Seconds per query, retries and backoff included."),
    max_retries: int = typer.Option(2, "--max-retries", rich_help_panel=common.PANEL_REQUESTS, help="Retries of a failed request (timeouts, HTTP 429 and 5xx): after the wait the endpoint asks for (Retry-After, x-ratelimit-reset-*), else exponential backoff with jitter."),
    max_tokens: int = typer.Option(1024, "--max-tokens", rich_help_panel=common.PANEL_LLM, help="Token limit of an answer; an answer cut by it is a failed query."),
    temperature: float = typer.Option(0.0, "--temperature", rich_help_panel=common.PANEL_LLM, help="Sampling temperature."),
    top_p: Optional[float] = typer.Option(None, "--top-p", rich_help_panel=common.PANEL_LLM, help="Nucleus sampling mass in (0, 1] (default: not sent)."),
    seed: Optional[int] = typer.Option(None, "--seed", rich_help_panel=common.PANEL_LLM, help="Sampling seed sent to the endpoint (sample I asks with SEED + I; default: not sent)."),
    stop: Optional[list[str]] = typer.Option(None, "--stop", rich_help_panel=common.PANEL_LLM, help="A stop sequence (repeatable; default: none)."),
    sample: int = typer.Option(0, "--sample", rich_help_panel=common.PANEL_LLM, help="Index of this sample among several rewrites per query (needs --temperature > 0); each index is its own variant and cache key."),
    samples: Optional[int] = typer.Option(None, "--samples", rich_help_panel=common.PANEL_LLM, help="Write N rewrites per query into OUT as one N-sample variant ({\"_id\", \"text\": [N texts]}; vdr evaluate reports it as one system: mean with its spread, RRF fusion, oracle best-of-N). Samples 0..N-1 go to OUT.sample<I>.jsonl and share one cache (default OUT.cache.jsonl; --sample I runs with the same --cache are reused). N > 1 needs --temperature > 0."),
    max_history_words: int = typer.Option(2000, "--max-history-words", rich_help_panel=common.PANEL_LLM, help="History word budget (oldest turns dropped first, the question always kept)."),
    fill_failed: Optional[FillFailed] = typer.Option(None, "--fill-failed", rich_help_panel=common.PANEL_RUN, help="'original': write failed ids with their original text (still listed as failed; vdr evaluate counts them). Default: leave them out (vdr evaluate then refuses the variant, naming the failures file)."),
    device: Optional[str] = typer.Option(None, "--device", rich_help_panel=common.PANEL_LLM, help="Device of --local (cpu, cuda)."),
    trust_remote_code: bool = typer.Option(False, "--trust-remote-code/--no-trust-remote-code", rich_help_panel=common.PANEL_LLM, help="Allow the --local checkpoint's own code."),
    allow_pickle_weights: bool = typer.Option(False, "--allow-pickle-weights/--no-allow-pickle-weights", rich_help_panel=common.PANEL_LLM, help="Read the --local checkpoint's pytorch_model.bin (a pickle) when it has no *.safetensors; only for a checkpoint you trust."),
    quiet: bool = common.OPTIONS["quiet"](),
) -> None:
    """Write a rewrite variant of QUERIES with an LLM (OpenAI-compatible endpoint or local model). The API key is read
    from $VDR_JUDGE_API_KEY or $OPENAI_API_KEY and never written. Exits 1 when any query failed (all listed)."""
    from ..rewrite import rewrite

    if samples is not None:
        return _rewrite_samples_command(queries, template=template, out=out, n=samples, sample=sample, endpoint=endpoint, model=model,
                                        local=local, cache=cache, concurrency=concurrency, budget=budget, timeout=timeout,
                                        deadline=deadline, max_retries=max_retries, max_tokens=max_tokens, temperature=temperature,
                                        max_history_words=max_history_words, fill_failed=fill_failed, device=device,
                                        trust_remote_code=trust_remote_code, top_p=top_p, seed=seed,
                                        allow_pickle_weights=allow_pickle_weights, stop=tuple(stop) if stop else None,
                                        progress=not quiet)
    r = rewrite(queries, template=template, out=out, endpoint=endpoint, model=model, local=local, cache=cache,
                concurrency=concurrency, budget=budget, timeout=timeout, deadline=deadline, max_retries=max_retries,
                max_tokens=max_tokens, temperature=temperature, max_history_words=max_history_words,
                fill_failed=fill_failed, device=device, trust_remote_code=trust_remote_code, top_p=top_p, seed=seed,
                allow_pickle_weights=allow_pickle_weights,
                stop=tuple(stop) if stop else None, sample=sample, progress=not quiet)
    t, g = r.settings["template"], r.settings["generation"]
    sampled = f", temperature {g['temperature']:g}" if g.get("temperature") else ""
    sampled += f", sample {g['sample']}" if g.get("sample") else ""
    typer.echo(f"{counted(r.total, 'query')}: {r.rewritten} rewritten, {r.cached} from cache, {len(r.failed)} failed"
               f" (template {t['name']} {t['version']}, model {r.settings['model']}{sampled}) -> {r.out}")
    if r.history_cut:
        typer.echo(f"note: {counted(r.history_cut, 'query')} had their history shortened to {max_history_words} words (oldest turns first)")
    c = r.calls
    if c.get("retries"):
        limited = f", {counted(c['rate_limited'], 'HTTP 429 answer')}" if c.get("rate_limited") else ""
        typer.echo(f"note: {counted(c['retries'], 'retry')} ({c.get('waited_s', 0.0):.1f} s waited,"
                   f" {counted(c.get('server_waits', 0), 'wait')} asked by"
                   f" the endpoint{limited}); counts in {r.meta_path}")
    if c.get("thinking_dropped"):
        typer.echo(f"note: {counted(c['content_parts'], 'answer')} came as content parts;"
                   f" {counted(c['thinking_dropped'], 'thinking part')} dropped")
    if r.settings.get("cache_older_entries") and not r.cached:
        typer.echo(f"note: the cache holds {counted(r.settings['cache_older_entries'], 'entry')} of an older format (keyed without the"
                   " generation settings); they are not reused")
    if r.failed:
        for qid, reason in list(r.failed.items())[:20]:
            typer.echo(f"failed: {qid}: {reason}", err=True)
        more = f" ({len(r.failed) - 20} more)" if len(r.failed) > 20 else ""
        typer.echo(f"{counted(len(r.failed), 'failed query', 'failed queries')}{more} listed in {r.failures_path};"
                   " rerun to retry them (successes are cached)", err=True)
        raise typer.Exit(code=1)


def _rewrite_samples_command(queries: Path, *, out: Path, n: int, sample: int, **kwargs) -> None:
    """``vdr rewrite --samples N`` (:func:`vdr.rewrite.rewrite_samples`): one line per sample, the
    failures on stderr; exit 1 when a query failed in some sample."""
    from ..errors import InputError
    from ..rewrite import rewrite_samples

    if sample:
        raise InputError("give either --samples N (every index 0..N-1) or --sample I (one index), not both")
    r = rewrite_samples(queries, out=out, n=n, **kwargs)
    for i, s in enumerate(r.samples):
        typer.echo(f"sample {i}: {counted(s.total, 'query')}: {s.rewritten} rewritten, {s.cached} from cache, {len(s.failed)} failed"
                   f" -> {s.out}")
    typer.echo(f"{counted(n, 'sample')} per query -> {r.out}")
    if r.failed:
        for qid, reason in list(r.failed.items())[:20]:
            typer.echo(f"failed: {qid}: {reason}", err=True)
        typer.echo(f"{counted(len(r.failed), 'failed query', 'failed queries')} listed in {r.failures_path}; rerun to retry them"
                   " (successes are cached)", err=True)
        raise typer.Exit(code=1)
