"""``vdr serve``: the reward of RL training over HTTP, with the index and models kept warm.

FastAPI + uvicorn. Endpoints:

* ``POST /reward`` ``{"query_ids": [...], "rewrites": [...], "metric": "ndcg@3"}`` ->
  ``{"rewards": [...], "ranks": [...], "metric": ..., "counts": {"empty", "truncated", "cached"}}``
  (one value per position; ``ranks``: best gold rank, ``-1`` when not in the top ``depth``).
  Rewards are :class:`vdr.rewards.Rewarder` values: the metric code of ``vdr evaluate``.
* ``POST /retrieve``: ConvSearch-R1's retrieval-server request ``{"queries", "query_ids", "topk",
  "return_scores", "max_length"}`` -> ``{"result": [rank or -1, ...]}``, or with ``return_scores``
  ``{"result": [[rank, ...], [[score, ...], ...]]}`` (ranks, then each query's top-``topk`` scores),
  as their server answers; ``topk`` <= the server's depth; ``max_length`` tightens the query budget.
  "Gold" is any page with grade >= the relevance level. Results are per position: rollouts that
  share a query id each get their own rank.
* ``GET /health``: status, settings, counters, cache occupancy (no token needed; with the
  multimodal backend also ``query_cache``, its bounded query-vector cache:
  :meth:`~vdr.retrieve.multimodal.MultimodalBackend.query_cache_info`).
* ``GET /stats``: training health (:meth:`vdr.rewards.health.TrainingHealth.snapshot`; no token
  needed, no text in it): each ``/reward`` request is one step (a trainer's
  :class:`~vdr.rewards.RemoteScorer` sends its whole batch in one request), grouped by query id,
  rewards = the request's metric values, a ``null`` rewrite = a format break; each ``/retrieve``
  request is one step too, with the best gold rank (``-1`` beyond ``topk``) standing for the reward
  (ConvSearch-R1's reward is a function of that rank, so equal ranks mean equal rewards). The
  server has no query texts: the off-script share needs ``HealthOptions.expected_script``.

Behaviour (documented choices):

* **Batching**: requests are queued; every request queued when the worker thread is free (up to
  ``max_batch`` rewrites, after an optional ``batch_wait_ms``) is scored in ONE backend call on
  that worker thread -- never on the event loop, so ``/health`` answers while a batch is scored.
  With the default ``batch_wait_ms=0`` a lone request waits for nothing, and under load the
  requests that arrive during one batch form the next.
* **Bounds**: request bodies over ``max_body_bytes`` get 413 (checked on ``Content-Length`` and
  while reading a body without it); more than ``max_items`` rewrites get 413.
* **Errors**: malformed JSON or fields -> 400 ``{"error": message}``; unknown query ids -> 422
  ``{"error", "unknown_query_ids"}``; missing/wrong bearer token -> 401; a failed retrieval -> 500
  with the message and a ``request_id`` that the server log names too. No request can stop the server.
* **Isolation** (issue 26.4): when a batch of several requests fails, each request is scored
  alone, so only a request that fails by itself gets the error; the others get their rewards.
  Text with lone UTF-16 surrogates (``"\\ud83d"``: legal JSON, not UTF-8) is scored with each
  such code point replaced by U+FFFD (:func:`vdr.text.replace_lone_surrogates`, the rule
  ``load_queries`` applies to query files, so the reward equals the evaluation); ``/reward``
  counts them (``counts.replaced_text``) and names them (``replaced_text``: ``{index: code
  points replaced}``). Error answers escape non-ASCII, so quoting such text cannot fail.
* **Security**: binds to 127.0.0.1 unless ``--host`` says otherwise; with ``--token-env VAR`` the
  ``POST`` endpoints need ``Authorization: Bearer <value of VAR>`` (read from the environment, never
  written or logged).
"""

import asyncio
import hmac
import json
import logging
import os
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..retrieve.options import option, options_from
from .health import TrainingHealth
from .rewarder import RewardError, Rewarder, UnknownQueryError

__all__ = ["create_app", "serve", "ServeLimits", "ServeOptions"]

LOG = logging.getLogger("vdr.serve")


@dataclass(frozen=True)
class ServeLimits:
    """Request bounds and batching settings.

    Attributes:
        max_body_bytes: largest request body (bytes). max_items: most rewrites per request.
        batch_wait_ms: how long the batcher waits for more requests before scoring (milliseconds;
            default 0: no added latency -- requests that arrive while a batch is scored queue up
            and form the next batch, so batches grow with the load by themselves).
        max_batch: most rewrites scored in one backend call (a request larger than this is one batch).
    """

    max_body_bytes: int = 8 * 1024 * 1024
    max_items: int = 4096
    batch_wait_ms: float = 0.0
    max_batch: int = 1024


class _ApiError(Exception):
    def __init__(self, status: int, message: str, **extra) -> None:
        super().__init__(message)
        self.status, self.payload = status, {"error": message, **extra}


@dataclass
class _Job:
    ids: list[str]
    rewrites: list[str | None]
    metrics: list[str]
    max_query_tokens: int | None
    rows: bool
    future: asyncio.Future = field(repr=False)


class _Batcher:
    """Gathers queued jobs for a few ms, scores them in one call on a worker thread."""

    def __init__(self, rewarder: Rewarder, limits: ServeLimits) -> None:
        self.rewarder, self.limits = rewarder, limits
        self.queue: asyncio.Queue | None = None
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="vdr-reward")
        self.task: asyncio.Task | None = None

    def start(self) -> None:
        self.queue = asyncio.Queue()
        self.task = asyncio.get_running_loop().create_task(self._loop())

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            try:
                await self.task
            except asyncio.CancelledError:
                pass
        self.pool.shutdown(wait=False, cancel_futures=True)

    async def submit(self, job: _Job):
        await self.queue.put(job)
        return await job.future

    async def _gather(self) -> list[_Job]:
        """The next job, then (after ``batch_wait_ms``) every queued job up to ``max_batch`` rewrites."""
        jobs = [await self.queue.get()]
        size = len(jobs[0].ids)
        if self.limits.batch_wait_ms > 0:
            await asyncio.sleep(self.limits.batch_wait_ms / 1000.0)
        while size < self.limits.max_batch:
            try:
                job = self.queue.get_nowait()
            except asyncio.QueueEmpty:
                break
            jobs.append(job)
            size += len(job.ids)
        return jobs

    async def _loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            jobs = await self._gather()
            groups: dict[tuple, list[_Job]] = {}
            for j in jobs:
                groups.setdefault((j.max_query_tokens,), []).append(j)
            for (max_query_tokens,), group in groups.items():
                await self._score(loop, group, max_query_tokens)

    async def _score(self, loop, group: list["_Job"], max_query_tokens: int | None) -> None:
        """Score ``group`` in one backend call; when that fails and the group holds several
        requests, score each request alone, so that one request's bad input never fails another's
        (issue 26.4): only the requests that fail alone get the error."""
        try:
            results = await loop.run_in_executor(self.pool, _score_group, self.rewarder, group, max_query_tokens)
        except Exception as e:
            if len(group) > 1:
                for j in group:
                    await self._score(loop, [j], max_query_tokens)
                return
            if not group[0].future.done():
                group[0].future.set_exception(e)
            return
        for j, r in zip(group, results):
            if not j.future.done():
                j.future.set_result(r)


def _score_group(rewarder: Rewarder, jobs: list[_Job], max_query_tokens: int | None) -> list[dict]:
    """One ``Rewarder.evaluate`` call for every job; each job's slice of the results."""
    ids = [q for j in jobs for q in j.ids]
    rws = [r for j in jobs for r in j.rewrites]
    metrics = list(dict.fromkeys(m for j in jobs for m in j.metrics))
    batch = rewarder.evaluate(ids, rws, metrics, return_rows=any(j.rows for j in jobs),
                             max_query_tokens=max_query_tokens)
    out, start = [], 0
    for j in jobs:
        sl = slice(start, start + len(j.ids))
        start += len(j.ids)
        out.append({"values": {m: batch.values[m][sl] for m in j.metrics}, "ranks": batch.ranks[sl],
                    "empty": batch.empty[sl], "truncated": batch.truncated[sl], "cached": batch.cached[sl],
                    "rows": batch.rows[sl] if j.rows else None, "replaced": batch.replaced[sl]})
    return out


async def _read_json(request, limits: ServeLimits) -> dict:
    """The request body as a JSON object, bounded in size (413) and well-formed (400)."""
    length = request.headers.get("content-length")
    if length is not None and (not length.isdigit() or int(length) > limits.max_body_bytes):
        raise _ApiError(413, f"request body larger than {limits.max_body_bytes} bytes")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limits.max_body_bytes:
            raise _ApiError(413, f"request body larger than {limits.max_body_bytes} bytes")
        chunks.append(chunk)
    try:
        obj = json.loads(b"".join(chunks))
    except (ValueError, UnicodeDecodeError) as e:
        raise _ApiError(400, f"body is not valid JSON: {e}") from None
    if not isinstance(obj, dict):
        raise _ApiError(400, f"body must be a JSON object, got {type(obj).__name__}")
    return obj


def _list_field(obj: dict, key: str, limits: ServeLimits, *, kinds: tuple, what: str, nullable: bool = False) -> list:
    if key not in obj:
        raise _ApiError(400, f"missing field {key!r}")
    v = obj[key]
    if not isinstance(v, list):
        raise _ApiError(400, f"{key!r} must be a list, got {type(v).__name__}")
    if len(v) > limits.max_items:
        raise _ApiError(413, f"{key!r} has {len(v)} items; at most {limits.max_items} per request")
    for n, x in enumerate(v):
        if (x is None and not nullable) or (x is not None and (isinstance(x, bool) or not isinstance(x, kinds))):
            raise _ApiError(400, f"{key}[{n}] must be {what}, got {json.dumps(x)[:80]}")
    return v


def _opt_int(obj: dict, key: str, lo: int = 1) -> int | None:
    v = obj.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or v < lo:
        raise _ApiError(400, f"{key!r} must be an integer >= {lo} or null, got {json.dumps(v)[:80]}")
    return v


def _checked_ids(rewarder: Rewarder, raw: list) -> list[str]:
    ids = [q if isinstance(q, str) else str(q) for q in raw]
    if any(q == "" for q in ids):
        raise _ApiError(400, "query ids must be non-empty")
    try:
        return rewarder.check_ids(ids)
    except UnknownQueryError as e:
        raise _ApiError(422, str(e), unknown_query_ids=e.ids[:1000]) from None


def _metric(rewarder: Rewarder, obj: dict) -> str:
    m = obj.get("metric", rewarder.metric)
    if not isinstance(m, str):
        raise _ApiError(400, f"'metric' must be a string such as 'ndcg@3', got {json.dumps(m)[:80]}")
    try:
        return rewarder.check_metric(m)
    except InputError as e:
        raise _ApiError(400, str(e)) from None


async def _run(batcher: _Batcher, job: _Job) -> dict:
    try:
        return await batcher.submit(job)
    except UnknownQueryError as e:
        raise _ApiError(422, str(e), unknown_query_ids=e.ids[:1000]) from None
    except InputError as e:
        raise _ApiError(400, str(e)) from None
    except RewardError as e:  # a real server fault (the backend failed on this request alone): logged with an id
        rid = _request_id()
        LOG.error("request %s: %s", rid, e)
        raise _ApiError(500, str(e), request_id=rid) from None


def _request_id() -> str:
    """A short random id naming one failed request in the server log and in its 500 answer."""
    import uuid

    return uuid.uuid4().hex[:16]


def _error_response(payload: dict, status: int):
    """An error answer as JSON with non-ASCII escaped (``ensure_ascii``): a message that quotes a
    client's text with a lone surrogate stays valid UTF-8 instead of failing to encode (a 500)."""
    from fastapi.responses import Response

    return Response(json.dumps(payload), status_code=status, media_type="application/json")


def _reward_handler(rewarder: Rewarder, batcher: _Batcher, limits: ServeLimits, health: TrainingHealth,
                    texts: Mapping[str, str] | None = None):
    async def reward(request) -> dict:
        obj = await _read_json(request, limits)
        ids = _list_field(obj, "query_ids", limits, kinds=(str, int), what="a string or an integer")
        rws = _list_field(obj, "rewrites", limits, kinds=(str,), what="a string or null", nullable=True)
        if len(ids) != len(rws):
            raise _ApiError(400, f"{len(ids)} query_ids but {len(rws)} rewrites: one query id per rewrite")
        metric = _metric(rewarder, obj)
        ids = _checked_ids(rewarder, ids)
        r = await _run(batcher, _Job(ids, rws, [metric], None, False, asyncio.get_running_loop().create_future()))
        out = {"rewards": r["values"][metric], "ranks": r["ranks"], "metric": metric,
               "counts": {**{k: sum(r[k]) for k in ("empty", "truncated", "cached")}, "replaced_text": sum(1 for n in r["replaced"] if n)}}
        if any(r["replaced"]):  # lone UTF-16 surrogates scored as U+FFFD: which rewrites, how many code points
            out["replaced_text"] = {str(i): n for i, n in enumerate(r["replaced"]) if n}
        if ids:
            health.record(ids, out["rewards"], rws, references=_references(texts, ids))
        return out

    return reward


def _references(texts: Mapping[str, str] | None, ids: list[str]) -> list | None:
    """The original query text of each id (the off-script reference of training health), when known."""
    return None if not texts else [texts.get(i) for i in ids]


def _retrieve_handler(rewarder: Rewarder, batcher: _Batcher, limits: ServeLimits, health: TrainingHealth,
                      texts: Mapping[str, str] | None = None):
    async def retrieve(request) -> dict:
        obj = await _read_json(request, limits)
        qs = _list_field(obj, "queries", limits, kinds=(str,), what="a string")
        ids = _list_field(obj, "query_ids", limits, kinds=(str, int), what="a string or an integer")
        if len(ids) != len(qs):
            raise _ApiError(400, f"{len(qs)} queries but {len(ids)} query_ids: one query id per query")
        topk = _opt_int(obj, "topk") or rewarder.depth
        if topk > rewarder.depth:
            raise _ApiError(400, f"topk {topk} is larger than the server's retrieval depth {rewarder.depth} (vdr serve --depth)")
        scores = obj.get("return_scores", False)
        if not isinstance(scores, bool):
            raise _ApiError(400, f"'return_scores' must be true or false, got {json.dumps(scores)[:80]}")
        max_len = _opt_int(obj, "max_length")
        ids = _checked_ids(rewarder, ids)
        r = await _run(batcher, _Job(ids, qs, [rewarder.metric], max_len, scores, asyncio.get_running_loop().create_future()))
        ranks = [k if 0 < k <= topk else -1 for k in r["ranks"]]
        if ids:
            health.record(ids, ranks, qs, references=_references(texts, ids))
        if not scores:
            return {"result": ranks}
        return {"result": [ranks, [[s for _, s in row[:topk]] for row in r["rows"]]]}

    return retrieve


def create_app(rewarder: Rewarder, *, token: str | None = None, limits: ServeLimits | None = None, info: dict | None = None,
               health: TrainingHealth | None = None):
    """The FastAPI application serving ``rewarder`` (see the module docstring).

    Args:
        rewarder: the warm :class:`~vdr.rewards.Rewarder` (backend, qrels, metric, cache).
        token: bearer token required on ``POST`` endpoints (``None``: no authentication).
        limits: :class:`ServeLimits`.
        info: extra JSON-ready facts shown by ``/health`` (corpus size, qrels checks).
        health: the :class:`~vdr.rewards.health.TrainingHealth` of ``GET /stats`` (default: a new
            one with the default thresholds).

    Returns:
        A ``fastapi.FastAPI`` app (run it with uvicorn).
    """
    from fastapi import Depends, FastAPI, Request
    from fastapi.responses import JSONResponse

    limits = limits or ServeLimits()
    batcher = _Batcher(rewarder, limits)
    tracker = health if health is not None else TrainingHealth()

    @asynccontextmanager
    async def lifespan(app):
        batcher.start()
        yield
        await batcher.stop()

    app = FastAPI(title="vdr reward server", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)

    @app.exception_handler(_ApiError)
    async def api_error(request, exc: _ApiError):
        return _error_response(exc.payload, exc.status)

    @app.exception_handler(Exception)
    async def any_error(request, exc: Exception):
        rid = _request_id()
        LOG.error("request %s: internal error", rid, exc_info=(type(exc), exc, exc.__traceback__))
        return _error_response({"error": f"internal error: {type(exc).__name__}: {exc}", "request_id": rid}, 500)

    def auth(request: Request) -> None:
        if token is None:
            return
        got = request.headers.get("authorization", "")
        if not hmac.compare_digest(got.encode("utf-8", "replace"), f"Bearer {token}".encode("utf-8")):
            raise _ApiError(401, "missing or wrong bearer token (Authorization: Bearer ...)")

    texts = getattr(tracker, "query_texts", None)
    reward, retrieve = (_reward_handler(rewarder, batcher, limits, tracker, texts),
                        _retrieve_handler(rewarder, batcher, limits, tracker, texts))

    @app.post("/reward", dependencies=[Depends(auth)])
    async def reward_endpoint(request: Request):
        return JSONResponse(await reward(request))  # a Response: FastAPI's encoder pass over the lists is skipped

    @app.post("/retrieve", dependencies=[Depends(auth)])
    async def retrieve_endpoint(request: Request):
        return JSONResponse(await retrieve(request))

    @app.get("/health")
    async def health():
        return {"status": "ok", **rewarder.config(), "num_queries": len(rewarder.qrels), "stats": dict(rewarder.stats),
                "cache": rewarder.cache_info(), "limits": limits.__dict__, "auth": token is not None, **(info or {}),
                **({"query_cache": qc()} if callable(qc := getattr(rewarder.backend, "query_cache_info", None)) else {})}

    @app.get("/stats")
    async def stats():
        return JSONResponse(_json_safe(tracker.snapshot()))

    return app


def _json_safe(obj):
    """``obj`` with non-finite floats as ``None`` (strict JSON)."""
    if isinstance(obj, float):
        return obj if obj == obj and obj not in (float("inf"), float("-inf")) else None
    if isinstance(obj, dict):
        return {k: _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    return obj


def _load_corpus(corpus_dir):
    """The page or passage corpus in ``corpus_dir`` (:func:`vdr.corpus.load_corpus`)."""
    from ..corpus import load_corpus

    return load_corpus(corpus_dir)


@dataclass(frozen=True)
class ServeOptions:
    """Settings of :func:`serve` (given as ``options`` or as keywords).

    Attributes:
        backend: any registered backend (``lexical``, ``semantic``, ``hybrid``, ``multimodal`` (needs
            ``model``), ``pyserini``, or one added through the ``vdr.backends`` entry point); built by
            the registry exactly as ``vdr evaluate`` builds it. qrels: the qrels file (required).
        host, port: where to listen (default 127.0.0.1:8000; 0.0.0.0 exposes it to the network).
        token_env: name of the environment variable holding the bearer token (never written).
        metric, depth, max_query_tokens, keep, budget_preset, cache_size: see
            :class:`vdr.rewards.RewardOptions` (default: the backend's own query budget, as ``vdr evaluate``).
        limits: :class:`ServeLimits`. model, device: the semantic or ColPali-family model and its device.
        log_level: uvicorn's. backend_options: ``{backend: {option: value}}`` (:mod:`vdr.retrieve.options`).
        health: the settings of ``GET /stats`` (:class:`~vdr.rewards.health.HealthOptions` or a dict
            of its fields, e.g. ``{"expected_script": "LATIN", "zero_advantage_max": 0.6}``).
    """

    backend: str = option("lexical", "The backend")
    qrels: Path | None = option(None, "The qrels file (required)")
    host: str = option("127.0.0.1", "Address to listen on", scores=False)
    port: int = option(8000, "Port", scores=False)
    token_env: str | None = option(None, "Environment variable of the bearer token", scores=False)
    metric: str = option("ndcg@3", "Default reward metric")
    depth: int = option(100, "Pages retrieved per rewrite")
    max_query_tokens: int | None = option(None, "A tighter query budget (None: the backend's own, as vdr evaluate)")
    keep: str = option("tail", "With max_query_tokens: tail or head")
    budget_preset: str | None = option(None, "A named query budget, e.g. convsearch-train")
    cache_size: int = option(100_000, "LRU cache entries", scores=False)
    limits: Any = option(None, "ServeLimits", scores=False)
    model: str | None = option(None, "The semantic or multimodal model")
    device: str | None = option(None, "Device of the model", scores=False)
    log_level: str = option("warning", "uvicorn's log level", scores=False)
    backend_options: Mapping[str, Any] | None = option(None, "{backend: {option: value}}")
    health: Any = option(None, "HealthOptions (or a dict of them) of GET /stats", scores=False)
    queries: Path | None = option(None, "The original queries (queries.jsonl): their texts are the off-script reference of GET /stats",
                                  scores=False)


def serve(corpus_dir: str | Path, options: ServeOptions | None = None, *, ready=None, **kwargs: Any) -> None:
    """Load the corpus and qrels, build the backend once (the registry, as ``vdr evaluate``), and
    serve until interrupted.

    Args:
        corpus_dir: a corpus folder (pages, or passages when vdr reads passage corpora; text
            backends use the text, ``multimodal`` the page images).
        options: :class:`ServeOptions`, or its fields as keywords.
        ready: called with a one-line summary before serving starts (the CLI prints it).

    Raises:
        InputError: a bad corpus, qrels, backend, option or setting; a token variable that is unset or empty.
    """
    from ..io import load_qrels
    from .rewarder import build_backend

    o = options_from(ServeOptions, options, kwargs, backend=str(kwargs.get("backend", "lexical")))
    if o.qrels is None:
        raise InputError("vdr serve needs the qrels (--qrels)")
    token = None
    if o.token_env:
        token = os.environ.get(o.token_env)
        if not token:
            raise InputError(f"environment variable {o.token_env} (the bearer token) is not set or empty")
    corpus = _load_corpus(corpus_dir)
    qr = load_qrels(o.qrels)
    ids = set(corpus.ids())
    missing = sorted({d for q in qr for d in qr[q] if d not in ids})
    be = build_backend(o.backend, corpus, {"model": o.model, "device": o.device, "backend_options": o.backend_options,
                                           "budget_preset": o.budget_preset})
    rw = Rewarder(be, qr, metric=o.metric, depth=o.depth, max_query_tokens=o.max_query_tokens, keep=o.keep,
                  budget_preset=o.budget_preset, cache_size=o.cache_size, name=o.backend)
    info = {"num_pages": len(ids), "corpus_kind": corpus.kind, "num_judged_pages_missing_from_corpus": len(missing),
            "judged_pages_missing_from_corpus": missing[:20]}
    from .health import HealthOptions

    health = TrainingHealth(o.health) if isinstance(o.health, HealthOptions) else TrainingHealth(**dict(o.health or {}))
    if o.queries is not None:  # the off-script signal compares each rewrite with its query's script
        from ..io import load_queries

        health.query_texts = {qid: q.text for qid, q in load_queries(o.queries).items()}
    app = create_app(rw, token=token, limits=o.limits, info=info, health=health)
    if ready is not None:
        ready(f"vdr serve: {o.backend} over {len(ids)} pages, {len(qr)} queries, metric {rw.metric}, depth {o.depth};"
              f" listening on http://{o.host}:{o.port}{' (bearer token required)' if token else ''}")
    import uvicorn

    uvicorn.run(app, host=o.host, port=o.port, log_level=o.log_level)
