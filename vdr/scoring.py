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
* **Speed and memory**: pages are taken in order of length and grouped into blocks of at most
  ``block_tokens`` tokens, so padding stays small (one very long page never pads the others);
  queries are concatenated into one matrix, so each block is one large GEMM
  ``(query tokens, dim) x (dim, block tokens)``. Peak memory is about
  ``4 * query_tokens * block_tokens`` bytes plus one block of pages; pages can stream from an
  on-disk :class:`~vdr.encode.store.EmbeddingStore` block by block.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
import torch

from .errors import InputError

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


def _blocks_from_list(pages, order: np.ndarray, lengths: np.ndarray, block_tokens: int):
    i = 0
    n = len(order)
    while i < n:
        j, tok = i, 0
        while j < n and (j == i or tok + lengths[order[j]] <= block_tokens):
            tok += int(lengths[order[j]])
            j += 1
        idx = order[i:j]
        yield idx, [pages[k] for k in idx]
        i = j


def _score_blocks(queries, pages, block_tokens, device):
    """Yield ``(page_indices (nb,), scores float32 (n_queries, nb))`` block by block."""
    device = torch.device(device) if device is not None else torch.device("cpu")
    Q, q_lens, q_dtype = _queries_matrix(queries, device)
    half = (torch.float16, torch.bfloat16)
    if isinstance(pages, PageSource) and not isinstance(pages, (list, tuple)):
        ids = list(pages.ids())
        lengths = np.asarray(pages.lengths(), dtype=np.int64)
        if len(ids) != len(lengths):
            raise InputError("page source: ids() and lengths() differ in length")
        # sort by length only within windows of store order: little padding, and reads stay local on disk
        window = np.arange(len(lengths)) // _STORE_WINDOW
        order = np.lexsort((lengths, window))
        pos = {pid: k for k, pid in enumerate(ids)}

        def blocks():
            for bids, tokens, blens in pages.iter_blocks(block_tokens, [ids[k] for k in order]):
                idx = np.fromiter((pos[b] for b in bids), dtype=np.int64, count=len(bids))
                yield idx, torch.split(tokens, blens.tolist())

    else:
        plist = [_as_tensor(p, "page", i) for i, p in enumerate(pages)]
        if not plist:
            raise InputError("no pages to score")
        lengths = np.fromiter((p.shape[0] for p in plist), dtype=np.int64, count=len(plist))
        order = np.argsort(lengths, kind="stable")

        def blocks():
            yield from _blocks_from_list(plist, order, lengths, block_tokens)

    dim = Q.shape[1]
    for idx, block in blocks():
        nb = len(block)
        blens = [b.shape[0] for b in block]
        if any(b.shape[1] != dim for b in block):
            raise InputError(f"page embedding dim differs from the queries' dim {dim}")
        Lmax = max(max(blens), -(-_MIN_GEMM // nb))  # at least _MIN_GEMM columns in the GEMM
        P = torch.zeros((nb, Lmax, dim), dtype=torch.float32, device=device)
        for r, b in enumerate(block):
            P[r, : b.shape[0]] = b.to(device=device, dtype=torch.float32)
        with _tf32(device.type == "cuda" and q_dtype in half and block[0].dtype in half):
            S = Q @ P.view(nb * Lmax, dim).T  # (query tokens, nb * Lmax), float32
        S = S.view(-1, nb, Lmax)
        if min(blens) < Lmax:  # padded rows never win the max
            pad = torch.arange(Lmax, device=device)[None, :] >= torch.tensor(blens, device=device)[:, None]
            S.masked_fill_(pad[None], -math.inf)
        M = S.amax(dim=2)  # (query tokens, nb)
        del S, P  # free this block's similarities before the next block is read: peak = one block
        yield idx, torch.segment_reduce(M, "sum", lengths=q_lens, axis=0)[: len(q_lens) - 1]  # (n_queries, nb)
        del M, block


def _block_tokens(n_query_tokens: int, budget_bytes: int, dim: int = 128) -> int:
    """Page tokens per block so that the float32 similarity block ``(query tokens, block tokens)``
    plus the block's page vectors (float32 copy and the stored 16-bit rows) fit ``budget_bytes``."""
    per_token = 4 * (n_query_tokens + _MIN_GEMM) + 6 * dim
    return max(1, int(budget_bytes // per_token))


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
        budget_bytes: bound on the similarity block ``(query tokens, block tokens)`` in bytes
            (float32); sets how many page tokens are scored at once.

    Returns:
        float32 tensor ``(n_queries, n_pages)`` on the CPU; column ``j`` is page ``j`` (store order
        for a store).

    Raises:
        InputError: no queries or pages, a tensor that is not ``(n >= 1, dim)`` floats, or
            mismatching dims.
    """
    n_pages = len(pages.ids()) if isinstance(pages, PageSource) and not isinstance(pages, (list, tuple)) else len(pages)
    out = torch.empty((len(queries), n_pages), dtype=torch.float32)
    n_qtok = sum(int(_as_tensor(q, "query", i).shape[0]) for i, q in enumerate(queries))
    for idx, scores in _score_blocks(queries, pages, _block_tokens(n_qtok, budget_bytes), device):
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
    n_qtok = sum(int(_as_tensor(q, "query", i).shape[0]) for i, q in enumerate(queries))
    for idx, scores in _score_blocks(queries, pages, _block_tokens(n_qtok, budget_bytes), device):
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
