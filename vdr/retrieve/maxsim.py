"""The score stage for late interaction: exact, fast, memory-bounded MaxSim.

MaxSim (ColBERT, Khattab & Zaharia 2020; ColPali, Faysse et al. 2024) scores a query with tokens
``q_1..q_n`` against a page with tokens ``p_1..p_m`` as ``sum_i max_j <q_i, p_j>``.

How vdr computes it:

* **Exact masking**: only a page's real tokens take part in the max. Padding is never scored as a
  zero vector (colpali-engine's ``score_multi_vector`` pads pages with zeros, so a query token whose
  similarities to all real tokens of a page are negative takes 0 from the padding, and a page's score
  then depends on the batch it was scored in). Here padded rows are set to -inf before the max.
* **fp32 accumulation**: inputs in float16/bfloat16 are widened to float32 before the matmul; the
  similarities and the sum are float32 (bf16 sums would turn distinct scores into ties).
  On CUDA, when both sides are 16-bit, TF32 matmul is allowed: fp16/bf16 values are exact in TF32,
  so the products and the fp32 accumulation are unchanged.
* **Batch invariance**: a page's score does not depend on the other pages or the block size: each
  page is scored by the same float32 matmul over its own rows, the max is exact, and each query's
  sum runs over its own tokens only (``torch.segment_reduce``). Both GEMM sides are padded to at
  least 64 rows so that the BLAS never switches to its thin-matrix kernels, whose summation order
  differs. Tests check bit-identity on the CPU; on CUDA, cuBLAS may pick other algorithms for other
  shapes, so scores there agree to float32 rounding of the dot products.
* **CUDA, 16-bit vectors on both sides** (the usual ColPali/ColQwen store): a fused Triton kernel
  (:mod:`vdr.retrieve.maxsim_gpu`) keeps each tile of similarities in registers and writes only the maxima,
  so no similarity matrix reaches GPU memory; products of 16-bit values accumulated in float32 as
  above, agreeing with the float32 path to float32 rounding (H200, ViDoRe-V2 shape: 4.8e-6 apart,
  2.8x colpali-engine's ``score_multi_vector``). ``VDR_MAXSIM_FUSED=0`` selects the reference path.
* **Speed and memory**: pages are taken in order of length and cut into blocks whose *padded*
  working set fits ``budget_bytes`` (:func:`_plan_blocks`): a block of ``nb`` pages padded to its
  longest page ``L`` costs ``nb * L`` GEMM columns, each holding a float32 similarity per query token,
  a float32 page row and the row as read, so one long page never pads many short ones (a block grows
  only while ``nb * L`` stays within the budget), and a page too long for the budget on its own is
  scored alone in chunks of rows whose maxima are combined by an exact ``max``. Queries are
  concatenated into one matrix, so each block is one large GEMM ``(query tokens, dim) x (dim, nb * L)``.
  Peak memory is the queries plus one block, within ``budget_bytes`` whatever the length distribution
  (plus, for a page longer than the budget, that page's own rows); pages can stream from an on-disk
  :class:`~vdr.encode.store.EmbeddingStore` block by block.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
import torch

from ..errors import InputError

__all__ = ["maxsim", "maxsim_topk", "merge_topk", "SubsetSource", "TopK", "PageSource"]

DEFAULT_BUDGET_BYTES = 256 * 2**20
# BLAS libraries switch to other kernels (another summation order) for very thin matrices; padding
# both GEMM sides to at least this many rows (zeros, masked or dropped) keeps every dot product on
# the same kernel, so scores are bit-identical whatever the batch (checked in the tests).
_MIN_GEMM = 64
_STORE_WINDOW = 4096  # pages of a store sorted by length together


@runtime_checkable
class PageSource(Protocol):
    """What :func:`maxsim` needs from an on-disk store of page multi-vectors."""

    def ids(self) -> list[str]:
        """Page ids in store order."""

    def lengths(self) -> Sequence[int]:
        """Token count of each page, aligned with :meth:`ids`."""

    def iter_blocks(self, max_tokens: int, ids: Sequence[str] | None = None) -> Iterator[tuple[list[str], torch.Tensor, torch.Tensor]]:
        """Yield ``(page_ids, tokens (sum of lengths, dim), lengths (n,))`` in the order of ``ids``."""


@dataclass(frozen=True)
class TopK:
    """The best ``k`` pages of each query.

    Attributes:
        scores: float32 ``(n_queries, k)``, best first.
        indices: int64 ``(n_queries, k)``: positions in the page list (or store order).
        ids: page ids ``[n_queries][k]`` when the pages came with ids (a store), else ``None``.
    """

    scores: torch.Tensor
    indices: torch.Tensor
    ids: list[list[str]] | None = None


def _as_tensor(x, what: str, i: int) -> torch.Tensor:
    t = torch.as_tensor(x) if not isinstance(x, torch.Tensor) else x
    if t.ndim != 2 or t.shape[0] < 1:
        raise InputError(f"{what} {i} must have shape (n_tokens >= 1, dim), got {tuple(t.shape)}")
    if not t.is_floating_point():
        raise InputError(f"{what} {i} must be a float tensor, got {t.dtype}")
    return t


def _queries_matrix(queries, device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.dtype]:
    qs = [_as_tensor(q, "query", i) for i, q in enumerate(queries)]
    if not qs:
        raise InputError("no queries to score")
    dims = {q.shape[1] for q in qs}
    if len(dims) != 1:
        raise InputError(f"queries have different embedding dims: {sorted(dims)}")
    dtype = qs[0].dtype
    n = sum(q.shape[0] for q in qs)
    pad = -n % _MIN_GEMM
    Q = torch.cat([q.to(device=device, dtype=torch.float32) for q in qs] + [torch.zeros((pad, qs[0].shape[1]), device=device)])
    # one extra segment holds the zero padding rows; its sum is dropped
    lens = torch.tensor([q.shape[0] for q in qs] + [pad], dtype=torch.int64, device=device)
    return Q, lens, dtype


@contextmanager
def _tf32(enabled: bool):
    if not enabled:
        yield
        return
    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old


def _block_cost(n_pages: int, width: int, q_rows: int, dim: int) -> int:
    """Bytes a block of ``n_pages`` pages padded to ``width`` rows each holds while it is scored.

    ``q_rows`` is the padded number of query tokens. Counted per padded column (``n_pages * width``):
    the float32 similarities ``(q_rows, columns)``, the float32 page copy ``(columns, dim)``, the page
    rows as read (at most float32 again) and the one-byte padding mask; per page: the float32 maxima
    ``(q_rows, n_pages)`` and their per-query sums (at most as large).
    """
    return n_pages * width * (4 * q_rows + 8 * dim + 1) + n_pages * 8 * q_rows


def _width(n_pages: int, longest: int) -> int:
    """Row width a block is padded to: its longest page, and at least ``_MIN_GEMM`` GEMM columns."""
    return max(longest, -(-_MIN_GEMM // n_pages))


def _plan_blocks(lengths: Sequence[int], budget_bytes: int, q_rows: int, dim: int) -> list[tuple[int, int, int]]:
    """Cut pages (in scoring order) into blocks whose padded working set fits ``budget_bytes``.

    Args:
        lengths: tokens per page, in the order the pages are scored (sorted by length, so that the
            pages of a block have similar lengths and padding stays small).
        budget_bytes: bound on :func:`_block_cost` of every block.
        q_rows: query tokens, padded to a multiple of ``_MIN_GEMM``.
        dim: embedding dim.

    Returns:
        ``(start, end, width)`` per block: pages ``start..end-1`` are scored together, each padded to
        ``width`` rows. Consecutive pages are added while the cost of the padded block stays within the
        budget, so one long page never pads many short ones. A page whose own block exceeds the budget
        is scored alone in chunks of ``width`` < its length rows (sub-blocked); the chunk width is never
        below ``_MIN_GEMM``, so a budget below ``_block_cost(1, _MIN_GEMM, ...)`` is exceeded by that
        minimal block only.
    """
    per_col = 4 * q_rows + 8 * dim + 1
    chunk = max(_MIN_GEMM, (budget_bytes - 8 * q_rows) // per_col)
    plan = []
    n, i = len(lengths), 0
    while i < n:
        longest = int(lengths[i])
        if _block_cost(1, _width(1, longest), q_rows, dim) > budget_bytes:
            # alone; in chunks of `chunk` rows when it is longer than that
            plan.append((i, i + 1, chunk if longest > chunk else _width(1, longest)))
            i += 1
            continue
        j = i + 1
        while j < n:
            grown = max(longest, int(lengths[j]))
            if _block_cost(j - i + 1, _width(j - i + 1, grown), q_rows, dim) > budget_bytes:
                break
            longest, j = grown, j + 1
        plan.append((i, j, _width(j - i, longest)))
        i = j
    return plan


def _block_maxima(Q: torch.Tensor, rows: list[torch.Tensor], width: int, tf32: bool) -> torch.Tensor:
    """Max similarity of each query token over each row set's real rows.

    Args:
        Q: float32 ``(q_rows, dim)`` queries on the scoring device.
        rows: ``nb`` tensors ``(n_j <= width, dim)`` (pages or chunks of one page), any float dtype.
        width: rows each set is padded to (zeros, masked to -inf before the max).
        tf32: allow TF32 matmul (CUDA, 16-bit inputs on both sides).

    Returns:
        float32 ``(q_rows, nb)``.
    """
    nb, dim, device = len(rows), Q.shape[1], Q.device
    lens = [r.shape[0] for r in rows]
    P = torch.zeros((nb, width, dim), dtype=torch.float32, device=device)
    for k, r in enumerate(rows):
        P[k, : r.shape[0]] = r.to(device=device, dtype=torch.float32)
    with _tf32(tf32):
        S = Q @ P.view(nb * width, dim).T  # (q_rows, nb * width), float32
    del P
    S = S.view(-1, nb, width)
    if min(lens) < width:  # padded rows never win the max
        pad = torch.arange(width, device=device)[None, :] >= torch.tensor(lens, device=device)[:, None]
        S.masked_fill_(pad[None], -math.inf)
    return S.amax(dim=2)


def _fused(device: torch.device, q_dtype: torch.dtype, block: list[torch.Tensor], dim: int) -> bool:
    """Whether this block is scored by the fused kernel of :mod:`vdr.retrieve.maxsim_gpu` (CUDA, Triton,
    every page of the block in the queries' 16-bit dtype; ``VDR_MAXSIM_FUSED=0`` turns it off)."""
    import os

    if os.environ.get("VDR_MAXSIM_FUSED", "1") == "0":
        return False
    if device.type != "cuda" and not _interpret():
        return False
    if any(b.dtype != q_dtype for b in block):
        return False
    from .maxsim_gpu import available

    return available(device, q_dtype, block[0].dtype, dim)


def _interpret() -> bool:
    """``VDR_TRITON_INTERPRET=1`` with ``TRITON_INTERPRET=1``: the fused kernel runs in Triton's CPU
    interpreter (tests only)."""
    import os

    return os.environ.get("VDR_TRITON_INTERPRET") == "1" and os.environ.get("TRITON_INTERPRET") == "1"


def _source_blocks(pages, order: np.ndarray, lengths: np.ndarray, plan):
    """Read each planned block from a :class:`PageSource`: ``(positions, [page tensors])``."""
    ids = list(pages.ids())
    for start, end, _w in plan:
        idx = order[start:end]
        want = [ids[k] for k in idx]
        got, parts = [], []
        for bids, tokens, blens in pages.iter_blocks(max(1, int(lengths[idx].sum())), want):
            got += bids
            parts += list(torch.split(tokens, blens.tolist()))
        if got != want:
            raise InputError("page source: iter_blocks returned other pages than asked for")
        yield idx, parts


def _score_blocks(queries, pages, budget_bytes, device):
    """Yield ``(page_indices (nb,), scores float32 (n_queries, nb))`` block by block, as planned by
    :func:`_plan_blocks`."""
    device = torch.device(device) if device is not None else torch.device("cpu")
    Q, q_lens, q_dtype = _queries_matrix(queries, device)
    half = (torch.float16, torch.bfloat16)
    plan_rows = Q.shape[0]
    if q_dtype in half and _fused(device, q_dtype, [Q[:0].to(q_dtype)], Q.shape[1]):
        # the fused kernel holds no (query tokens x block tokens) matrix, only the 16-bit padded pages
        # and the float32 (query tokens x pages) maxima: planned with an eighth of the query rows, the
        # cost still counts both (width >= 8: width * q_rows / 2 + q_rows >= 4 * q_rows per page)
        plan_rows = max(_MIN_GEMM, -(-Q.shape[0] // 8))
    if isinstance(pages, PageSource) and not isinstance(pages, (list, tuple)):
        lengths = np.asarray(pages.lengths(), dtype=np.int64)
        if len(pages.ids()) != len(lengths):
            raise InputError("page source: ids() and lengths() differ in length")
        # sort by length only within windows of store order: little padding, and reads stay local on disk
        window = np.arange(len(lengths)) // _STORE_WINDOW
        order = np.lexsort((lengths, window))
        plan = _plan_blocks(lengths[order], budget_bytes, plan_rows, Q.shape[1])
        blocks = _source_blocks(pages, order, lengths, plan)
    else:
        plist = [_as_tensor(p, "page", i) for i, p in enumerate(pages)]
        if not plist:
            raise InputError("no pages to score")
        lengths = np.fromiter((p.shape[0] for p in plist), dtype=np.int64, count=len(plist))
        order = np.argsort(lengths, kind="stable")
        plan = _plan_blocks(lengths[order], budget_bytes, plan_rows, Q.shape[1])
        blocks = ((order[s:e], [plist[k] for k in order[s:e]]) for s, e, _w in plan)

    dim = Q.shape[1]
    Q16 = None  # the fused CUDA kernel (vdr.retrieve.maxsim_gpu) for 16-bit vectors on both sides
    for (idx, block), (_s, _e, width) in zip(blocks, plan):
        if any(b.shape[1] != dim for b in block):
            raise InputError(f"page embedding dim differs from the queries' dim {dim}")
        tf32 = device.type == "cuda" and q_dtype in half and block[0].dtype in half
        if _fused(device, q_dtype, block, dim):
            Q16 = Q.to(q_dtype) if Q16 is None else Q16  # exact: Q holds q_dtype values
            from .maxsim_gpu import block_maxima

            M = block_maxima(Q16, block)
        elif len(block) == 1 and block[0].shape[0] > width:  # one page over the budget: max over its chunks
            page = block[0]
            M = None
            for c in range(0, page.shape[0], width):
                part = page[c:c + width]
                m = _block_maxima(Q, [part], max(part.shape[0], _MIN_GEMM), tf32)
                M = m if M is None else torch.maximum(M, m)
        else:
            M = _block_maxima(Q, block, width, tf32)  # (q_rows, nb)
        yield idx, torch.segment_reduce(M, "sum", lengths=q_lens, axis=0)[: len(q_lens) - 1]  # (n_queries, nb)
        del M, block


def _block_tokens(n_query_tokens: int, budget_bytes: int, dim: int = 128) -> int:
    """Padded page tokens (GEMM columns) of the widest block :func:`_plan_blocks` allows for
    ``n_query_tokens`` query tokens (one block of single-token pages)."""
    q_rows = n_query_tokens + (-n_query_tokens % _MIN_GEMM)
    return max(_MIN_GEMM, (budget_bytes - 8 * q_rows) // (12 * q_rows + 8 * dim + 1))


def maxsim(
    queries: Sequence[torch.Tensor | np.ndarray],
    pages: Sequence[torch.Tensor | np.ndarray] | PageSource,
    *,
    device: str | torch.device | None = None,
    budget_bytes: int = DEFAULT_BUDGET_BYTES,
) -> torch.Tensor:
    """MaxSim scores of every query against every page.

    Args:
        queries: ``n_queries`` tensors (or arrays) of shape ``(n_tokens_i, dim)``, real tokens only
            (padding already removed by the attention mask); any float dtype.
        pages: ``n_pages`` tensors of shape ``(n_tokens_j, dim)``, or a :class:`PageSource` such as
            :class:`vdr.encode.store.EmbeddingStore`, read block by block.
        device: where to compute (``"cuda"``, ``"cpu"``; default CPU). Inputs are moved there.
        budget_bytes: bound in bytes on the working set of one block (:func:`_block_cost`: float32
            similarities ``(query tokens, padded block tokens)``, the padded float32 page copy and
            the rows as read); padding counts, so the bound holds whatever the page lengths. Never
            below one page scored ``_MIN_GEMM`` rows at a time.

    Returns:
        float32 tensor ``(n_queries, n_pages)`` on the CPU; column ``j`` is page ``j`` (store order
        for a store).

    Raises:
        InputError: no queries or pages, a tensor that is not ``(n >= 1, dim)`` floats, or
            mismatching dims.
    """
    n_pages = len(pages.ids()) if isinstance(pages, PageSource) and not isinstance(pages, (list, tuple)) else len(pages)
    out = torch.empty((len(queries), n_pages), dtype=torch.float32)
    for idx, scores in _score_blocks(queries, pages, budget_bytes, device):
        out[:, torch.from_numpy(idx)] = scores.cpu()
    return out


def maxsim_topk(
    queries: Sequence[torch.Tensor | np.ndarray],
    pages: Sequence[torch.Tensor | np.ndarray] | PageSource,
    k: int,
    *,
    device: str | torch.device | None = None,
    budget_bytes: int = DEFAULT_BUDGET_BYTES,
) -> TopK:
    """The ``k`` best pages of each query by MaxSim, keeping only ``O(n_queries * k)`` scores.

    Ties at equal scores are resolved as trec_eval ranks them (page id descending) when the pages
    come from a store with ids, else by page position ascending; the result does not depend on
    ``budget_bytes``.

    Args:
        k: pages to keep per query (``min(k, n_pages)`` are returned).
        queries, pages, device, budget_bytes: as :func:`maxsim`.

    Returns:
        :class:`TopK` with float32 scores ``(n_queries, k)`` best first, their int64 page positions,
        and page ids when the source has ids.

    Raises:
        InputError: ``k`` < 1, or as :func:`maxsim`.
    """
    if k < 1:
        raise InputError(f"k must be >= 1, got {k}")
    is_source = isinstance(pages, PageSource) and not isinstance(pages, (list, tuple))
    ids = list(pages.ids()) if is_source else None
    n_pages = len(ids) if ids is not None else len(pages)
    # secondary key for ties: smaller is better
    if ids is not None:
        tie_key = torch.empty(n_pages, dtype=torch.int64)
        tie_key[torch.as_tensor(sorted(range(n_pages), key=lambda j: ids[j], reverse=True))] = torch.arange(n_pages)
    else:
        tie_key = torch.arange(n_pages)
    nq = len(queries)
    best_s = torch.empty((nq, 0), dtype=torch.float32)
    best_i = torch.empty((nq, 0), dtype=torch.int64)
    for idx, scores in _score_blocks(queries, pages, budget_bytes, device):
        cand_s = torch.cat([best_s, scores.cpu()], dim=1)
        cand_i = torch.cat([best_i, torch.from_numpy(idx).expand(nq, -1)], dim=1)
        # order by (score desc, tie key asc): stable sort by key, then stable sort by score
        o = torch.argsort(tie_key[cand_i], dim=1, stable=True)
        cand_s, cand_i = cand_s.gather(1, o), cand_i.gather(1, o)
        o = torch.argsort(cand_s, dim=1, descending=True, stable=True)[:, :k]
        best_s, best_i = cand_s.gather(1, o), cand_i.gather(1, o)
    return TopK(best_s, best_i, None if ids is None else [[ids[j] for j in row] for row in best_i.tolist()])


class SubsetSource:
    """A :class:`PageSource` over some pages of another source (one rank's part of a store).

    Args:
        source: the full source (e.g. an :class:`~vdr.encode.store.EmbeddingStore`).
        ids: the pages to expose, in this order (each must be in ``source``).
    """

    def __init__(self, source: PageSource, ids: Sequence[str]) -> None:
        self.source = source
        self._ids = list(ids)
        length = dict(zip(source.ids(), source.lengths()))
        try:
            self._lengths = [int(length[p]) for p in self._ids]
        except KeyError as e:
            raise InputError(f"page {e.args[0]!r} is not in the page source") from None

    def ids(self) -> list[str]:
        """The subset's page ids."""
        return list(self._ids)

    def lengths(self) -> list[int]:
        """Tokens per page, aligned with :meth:`ids`."""
        return list(self._lengths)

    def iter_blocks(self, max_tokens: int, ids: Sequence[str] | None = None):
        """Blocks of the underlying source (default: this subset's pages)."""
        return self.source.iter_blocks(max_tokens, self._ids if ids is None else ids)


def merge_topk(parts: Sequence[TopK], k: int, *, id_order: Sequence[str] | None = None) -> TopK:
    """Merge per-part top-k lists (each over a disjoint set of pages, with ids) into the global top ``k``.

    The order is :func:`maxsim_topk`'s for sources with ids: score descending, then page id descending
    (trec_eval's tie rule). Because that is a total order, the global top ``k`` lies within the union of
    the parts' top ``k`` lists, so the merge gives exactly the top-k of scoring all pages at once
    (given the same scores; on the CPU they are bit-identical whatever the block).

    Args:
        parts: :class:`TopK` results with ``ids``, the same queries in the same order.
        k: pages to keep per query.
        id_order: the full source's ids (store order); when given, ``indices`` of the result are
            positions in it, else positions are taken from the parts as they are.

    Returns:
        :class:`TopK` with float32 scores, int64 indices and ids.

    Raises:
        InputError: no parts, parts without ids, or different numbers of queries.
    """
    parts = [p for p in parts if p is not None]
    if not parts:
        raise InputError("nothing to merge")
    if any(p.ids is None for p in parts):
        raise InputError("merge_topk needs page ids in every part")
    nq = parts[0].scores.shape[0]
    if any(p.scores.shape[0] != nq for p in parts):
        raise InputError("parts score different numbers of queries")
    pos = {pid: j for j, pid in enumerate(id_order)} if id_order is not None else None
    rows_s, rows_i, rows_id = [], [], []
    for q in range(nq):
        cand = []
        for p in parts:
            cand += zip(p.scores[q].tolist(), p.indices[q].tolist(), p.ids[q])
        cand.sort(key=lambda c: c[2], reverse=True)  # ties: page id descending ...
        cand.sort(key=lambda c: c[0], reverse=True)  # ... under score descending (stable)
        cand = cand[:k]
        rows_s.append([c[0] for c in cand])
        rows_i.append([pos[c[2]] if pos is not None else c[1] for c in cand])
        rows_id.append([c[2] for c in cand])
    width = max((len(r) for r in rows_s), default=0)
    if any(len(r) != width for r in rows_s):
        raise InputError("parts hold different numbers of pages per query")
    return TopK(torch.tensor(rows_s, dtype=torch.float32).reshape(nq, width),
                torch.tensor(rows_i, dtype=torch.int64).reshape(nq, width), rows_id)
