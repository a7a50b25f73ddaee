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
  2.8x colpali-engine's ``score_multi_vector``, measured with the padded layout of the previous
  kernel). The kernel reads pages **packed** (back to back, with offsets: a page store's shards,
  :class:`PackedPages`), so a launch copies no padding, and one launch scores a whole block of pages
  (:func:`_plan_packed`: the pages' 16-bit tokens plus the float32 maxima within ``budget_bytes``,
  in source order). ``VDR_MAXSIM_FUSED=0`` selects the reference path; ``VDR_MAXSIM_FUSED=all``
  also sends other dtype pairs through the kernel (float32 queries with float16 pages, vdr's own
  case: IEEE float32 products in registers; off by default until measured faster on a GPU than
  the float32 GEMMs of the reference path).
* **Precision variants** (``precision=``, opt-in): ``"exact"`` (default) as above; ``"tf32"`` rounds
  both sides to TF32 (10-bit mantissa) and ``"bf16"`` to bfloat16 before the float32-accumulated
  products, what TF32 / fp16 kernels compute. On the reference path the rounding is applied to the
  vectors explicitly (:func:`round_to`), so the variants give the same scores on every device up to
  float32 summation order. Only ``"exact"`` stays within 1e-5 (relative) of the float32 reference.
* **Non-finite vectors are refused** on every path (reference, fused kernel; lists, packed pages,
  page sources): a query or page vector holding NaN or infinity is an :class:`~vdr.errors.InputError`
  naming the query (by position) or the page (by id, else position) and the token, before it is
  scored, and a score that overflows float32 is refused naming its query and page. A NaN score
  would sort first on one path (``torch.sort`` puts NaN above every number) while the fused kernel's
  ``max`` drops it, so the two paths could not agree; on the inputs they accept they agree to
  float32 rounding.
* **Top-k on the device**: :func:`maxsim_topk` keeps its running ``(queries, k)`` lists where the
  scores are computed; only the final lists cross to the CPU.
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

__all__ = ["maxsim", "maxsim_topk", "merge_topk", "SubsetSource", "TopK", "PageSource", "PackedPages", "PRECISIONS",
           "round_to"]

#: MaxSim arithmetic variants: ``"exact"`` (default; float32 products and sums), ``"tf32"`` and
#: ``"bf16"`` (opt-in: both sides rounded to TF32 / bfloat16 first, float32 accumulation).
PRECISIONS = ("exact", "tf32", "bf16")

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


def round_to(x: torch.Tensor, precision: str) -> torch.Tensor:
    """``x`` as the ``precision`` variant's products see it, in float32: unchanged for ``"exact"``,
    rounded to bfloat16 (nearest even) for ``"bf16"``, to TF32 (10 explicit mantissa bits, nearest,
    ties away from zero as CUDA's ``cvt.rna.tf32.f32``) for ``"tf32"``.

    >>> round_to(torch.tensor([1.0 + 2**-9, 1.0 + 2**-12]), "tf32").tolist()
    [1.001953125, 1.0]

    Raises:
        InputError: an unknown precision.
    """
    if precision not in PRECISIONS:
        raise InputError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    x = x.to(torch.float32)
    if precision == "bf16":
        return x.to(torch.bfloat16).to(torch.float32)
    if precision == "tf32":
        bits = x.contiguous().view(torch.int32)
        return ((bits + 0x1000) & ~0x1FFF).view(torch.float32)
    return x


class PackedPages:
    """Pages back to back in one tensor, with offsets: the packed layout the fused kernel reads
    (:mod:`vdr.retrieve.maxsim_gpu`) without copying or padding. Build it once (on the GPU) and
    score it against many query sets (every variant, every training step).

    Args:
        tokens: ``(total tokens, dim)`` float tensor, pages back to back.
        offsets: int ``(n_pages + 1,)``, ``offsets[0] == 0``, ``offsets[-1] == total tokens``,
            every page >= 1 token (page ``j`` is ``tokens[offsets[j]:offsets[j + 1]]``); any device.
        ids: page ids (a page store's order), or ``None`` (pages are known by position; ties are
            then broken by position, as for a list).

    It is a :class:`PageSource` (``ids``, ``lengths``, ``iter_blocks``; ids ``"0"``, ``"1"``, ...
    when none were given).

    Raises:
        InputError: shapes, dtypes or offsets that do not describe pages of >= 1 token.
    """

    def __init__(self, tokens: torch.Tensor, offsets, ids=None) -> None:
        if not isinstance(tokens, torch.Tensor) or tokens.ndim != 2 or not tokens.is_floating_point():
            raise InputError(f"packed pages: tokens must be a 2-D float tensor, got {getattr(tokens, 'shape', tokens)!r}")
        off = torch.as_tensor(offsets).to("cpu", torch.int64)
        lengths = off[1:] - off[:-1] if off.ndim == 1 and off.numel() >= 2 else None
        if lengths is None or int(off[0]) != 0 or int(off[-1]) != tokens.shape[0] or bool((lengths < 1).any()):
            raise InputError(f"packed pages: offsets must start at 0, end at {tokens.shape[0]} and grow by >= 1 per page")
        if ids is not None and len(ids) != len(lengths):
            raise InputError(f"packed pages: {len(ids)} ids for {len(lengths)} pages")
        self.tokens = tokens
        self.offsets = off.to(tokens.device)
        self.page_ids = None if ids is None else [str(i) for i in ids]
        self._off = off.numpy()
        self._lengths = lengths.numpy()

    @classmethod
    def pack(cls, pages, *, ids=None, device=None, dtype: torch.dtype | None = None) -> "PackedPages":
        """Pack ``pages`` (a sequence of ``(n_j, dim)`` tensors or arrays, or a :class:`PageSource`
        such as an :class:`~vdr.encode.store.EmbeddingStore`, read whole) onto ``device`` in
        ``dtype`` (default: the pages' own). A source's ids are kept; ``ids`` names a sequence's pages.

        Raises:
            InputError: no pages, a page that is not ``(n >= 1, dim)`` floats, mismatching dims.
        """
        if _is_source(pages):
            src_ids = list(pages.ids())
            parts = [t for _b, t, _l in pages.iter_blocks(max(1, int(sum(pages.lengths()))), src_ids)]
            lengths = [int(n) for n in pages.lengths()]
            ids = src_ids if ids is None else ids
        else:
            parts = [_as_tensor(p, "page", i) for i, p in enumerate(pages)]
            lengths = [p.shape[0] for p in parts]
        if not parts:
            raise InputError("no pages to pack")
        if len({p.shape[1] for p in parts}) != 1:
            raise InputError(f"pages have different embedding dims: {sorted({p.shape[1] for p in parts})}")
        dtype = dtype or parts[0].dtype
        tokens = torch.cat([p.to(device=device or p.device, dtype=dtype) for p in parts])
        return cls(tokens, np.concatenate([[0], np.cumsum(lengths)]), ids)

    def __len__(self) -> int:
        return len(self._lengths)

    def ids(self) -> list[str]:
        """Page ids (``"0"``, ``"1"``, ... when none were given)."""
        return list(self.page_ids) if self.page_ids is not None else [str(i) for i in range(len(self))]

    def lengths(self) -> np.ndarray:
        """Tokens per page, int64 ``(n_pages,)``."""
        return self._lengths

    def block(self, start: int, end: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Pages ``start..end-1`` as ``(tokens view, int64 offsets from 0 on the tokens' device)``: no copy."""
        a, b = int(self._off[start]), int(self._off[end])
        return self.tokens[a:b], self.offsets[start:end + 1] - a

    def iter_blocks(self, max_tokens: int, ids: Sequence[str] | None = None):
        """:meth:`PageSource.iter_blocks`: consecutive pages are views of :attr:`tokens` (others are copied)."""
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
        pos = {p: j for j, p in enumerate(self.ids())}
        try:
            order = list(range(len(self))) if ids is None else [pos[str(i)] for i in ids]
        except KeyError as e:
            raise KeyError(f"page {e.args[0]!r} is not among the packed pages") from None
        names = self.ids()
        start = 0
        while start < len(order):
            end, total = start + 1, int(self._lengths[order[start]])
            while end < len(order) and total + int(self._lengths[order[end]]) <= max_tokens:
                total += int(self._lengths[order[end]])
                end += 1
            run = order[start:end]
            if run == list(range(run[0], run[0] + len(run))):
                tokens, _ = self.block(run[0], run[-1] + 1)
            else:
                tokens = torch.cat([self.block(j, j + 1)[0] for j in run])
            yield [names[j] for j in run], tokens, torch.as_tensor(self._lengths[run], dtype=torch.int64)
            start = end


def _is_source(pages) -> bool:
    return isinstance(pages, PageSource) and not isinstance(pages, (list, tuple))


def _named_ids(pages) -> list[str] | None:
    """The page ids that break ties (a store's, named packed pages'), or ``None`` (by position)."""
    if isinstance(pages, PackedPages):
        return pages.page_ids
    return list(pages.ids()) if _is_source(pages) else None


def _as_tensor(x, what: str, i: int) -> torch.Tensor:
    t = torch.as_tensor(x) if not isinstance(x, torch.Tensor) else x
    if t.ndim != 2 or t.shape[0] < 1:
        raise InputError(f"{what} {i} must have shape (n_tokens >= 1, dim), got {tuple(t.shape)}")
    if not t.is_floating_point():
        raise InputError(f"{what} {i} must be a float tensor, got {t.dtype}")
    return t


def _first_nonfinite(tokens: torch.Tensor) -> int | None:
    """The first row of ``tokens`` ``(n, dim)`` holding a NaN or an infinity, or ``None``."""
    bad = ~torch.isfinite(tokens).all(dim=1)
    if not bool(bad.any()):
        return None
    return int(bad.nonzero()[0, 0])


def _refuse_nonfinite(what: str, row: int, *, page_id: str | None = None) -> None:
    """Raise the InputError of a non-finite query or page vector (``what``: ``"query 3"``, ``"page 7"``)."""
    name = what if page_id is None else f"{what} (id {page_id!r})"
    raise InputError(f"MaxSim: {name} holds a non-finite value (NaN or infinity) in token {row}: its scores would be"
                     " arbitrary (a NaN sorts first on one path and is dropped by the fused kernel's max); re-encode it",
                     id=page_id)


def _check_pages(block: Sequence[torch.Tensor], positions, ids: list[str] | None) -> None:
    """Refuse the first page of ``block`` (at ``positions`` of the page list) holding a non-finite value."""
    for t, j in zip(block, positions):
        row = _first_nonfinite(t)
        if row is not None:
            _refuse_nonfinite(f"page {int(j)}", row, page_id=None if ids is None else ids[int(j)])


def _check_packed(tokens: torch.Tensor, offs: torch.Tensor, positions, ids: list[str] | None) -> None:
    """:func:`_check_pages` for packed pages (one pass over the block's tokens)."""
    row = _first_nonfinite(tokens)
    if row is None:
        return
    k = int(torch.searchsorted(offs.cpu(), torch.tensor([row]), right=True)[0]) - 1
    j = int(positions[k])
    _refuse_nonfinite(f"page {j}", row - int(offs[k]), page_id=None if ids is None else ids[j])


def _check_scores(scores: torch.Tensor, positions, ids: list[str] | None) -> torch.Tensor:
    """``scores`` ``(n_queries, nb)``, refused when one is not finite (finite vectors whose products
    or sums overflow float32), naming the query and the page."""
    bad = ~torch.isfinite(scores)
    if bool(bad.any()):
        i, k = (int(x) for x in bad.nonzero()[0])
        j = int(positions[k])
        page = f"page {j}" + ("" if ids is None else f" (id {ids[j]!r})")
        raise InputError(f"MaxSim of query {i} with {page} is {float(scores[i, k])} (the products or their sum overflow float32):"
                         " the vectors are not embeddings of a normal scale", id=None if ids is None else ids[j])
    return scores


def _queries_matrix(queries, device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.dtype]:
    qs = [_as_tensor(q, "query", i) for i, q in enumerate(queries)]
    for i, q in enumerate(qs):
        row = _first_nonfinite(q)
        if row is not None:
            _refuse_nonfinite(f"query {i}", row)
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
        tf32: allow TF32 matmul (CUDA, 16-bit inputs on both sides: exact there).

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


def _fused(device: torch.device, q_dtype: torch.dtype, block: list[torch.Tensor], dim: int, precision: str = "exact") -> bool:
    """Whether pages of the dtype of ``block`` (every page the same) are scored by the fused kernel
    of :mod:`vdr.retrieve.maxsim_gpu`: CUDA with Triton (or its interpreter in tests), and
    ``VDR_MAXSIM_FUSED`` not ``0``. By default the kernel takes 16-bit vectors of one dtype on both
    sides and the opt-in variants; ``VDR_MAXSIM_FUSED=all`` sends every dtype pair through it."""
    import os

    env = os.environ.get("VDR_MAXSIM_FUSED", "1")
    if env == "0":
        return False
    if device.type != "cuda" and not _interpret():
        return False
    p_dtype = block[0].dtype
    if any(b.dtype != p_dtype for b in block):
        return False
    if precision == "exact" and env != "all" and not (p_dtype == q_dtype and q_dtype in (torch.float16, torch.bfloat16)):
        return False
    from .maxsim_gpu import available

    return available(device, q_dtype, p_dtype, dim, precision)


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


def _plan_packed(lengths: Sequence[int], budget_bytes: int, q_rows: int, dim: int, itemsize: int) -> list[tuple[int, int]]:
    """Cut pages (in source order) into blocks for the fused kernel: ``(start, end)`` each.

    A block of ``nb`` pages with ``t`` tokens holds its packed tokens (``t * dim * itemsize`` bytes,
    when they are copied to the device) and the float32 maxima ``(q_rows, nb)`` with their
    per-query sums (at most as large): ``t * dim * itemsize + 8 * q_rows * nb`` bytes, kept within
    ``budget_bytes``; at most :data:`vdr.retrieve.maxsim_gpu.MAX_PAGES_PER_LAUNCH` pages (one launch);
    a page alone over the budget forms its own block.
    """
    from .maxsim_gpu import MAX_PAGES_PER_LAUNCH

    plan, n, i = [], len(lengths), 0
    while i < n:
        j, cost = i + 1, int(lengths[i]) * dim * itemsize + 8 * q_rows
        while j < n and j - i < MAX_PAGES_PER_LAUNCH:
            more = int(lengths[j]) * dim * itemsize + 8 * q_rows
            if cost + more > budget_bytes:
                break
            cost, j = cost + more, j + 1
        plan.append((i, j))
        i = j
    return plan


def _packed_blocks(pages, device: torch.device, budget_bytes: int, q_rows: int, dim: int):
    """``(positions, packed tokens on device, int64 offsets on device)`` per planned block, pages in
    source order: views of :class:`PackedPages` (a copy only to move them to ``device``), a page
    source's blocks as read, a list's pages concatenated (one copy per block, no padding)."""
    if isinstance(pages, PackedPages):
        plan = _plan_packed(pages.lengths(), budget_bytes, q_rows, dim, pages.tokens.element_size())
        for s, e in plan:
            tokens, offs = pages.block(s, e)
            yield np.arange(s, e), tokens.to(device, non_blocking=True), offs.to(device)
        return
    if _is_source(pages):
        ids, lengths = list(pages.ids()), np.asarray(pages.lengths(), dtype=np.int64)
        if len(ids) != len(lengths):
            raise InputError("page source: ids() and lengths() differ in length")
        itemsize = 2  # a page store keeps float16 (float32 stores are planned at half the tokens: still bounded below)
        for s, e in _plan_packed(lengths, budget_bytes, q_rows, dim, itemsize):
            got, parts, lens = [], [], []
            for bids, tokens, blens in pages.iter_blocks(max(1, int(lengths[s:e].sum())), ids[s:e]):
                got += bids
                parts.append(tokens)
                lens.append(blens)
            if got != ids[s:e]:
                raise InputError("page source: iter_blocks returned other pages than asked for")
            tokens = parts[0] if len(parts) == 1 else torch.cat(parts)
            offs = torch.cumsum(torch.cat([torch.zeros(1, dtype=torch.int64), *lens]), 0)
            yield np.arange(s, e), tokens.to(device), offs.to(device)
        return
    lengths = np.fromiter((p.shape[0] for p in pages), dtype=np.int64, count=len(pages))
    for s, e in _plan_packed(lengths, budget_bytes, q_rows, dim, pages[0].element_size()):
        tokens = torch.cat([p.to(device) for p in pages[s:e]])
        offs = torch.cumsum(torch.from_numpy(np.concatenate([[0], lengths[s:e]])), 0)
        yield np.arange(s, e), tokens, offs.to(device)


def _page_dtype(pages) -> torch.dtype | None:
    """The one dtype of every page (``None``: mixed dtypes, or a source that does not say)."""
    if isinstance(pages, PackedPages):
        return pages.tokens.dtype
    if _is_source(pages):
        return getattr(pages, "dtype", None)
    dtypes = {p.dtype for p in pages}
    return dtypes.pop() if len(dtypes) == 1 else None


def _score_blocks(queries, pages, budget_bytes, device, precision: str = "exact"):
    """Yield ``(page_indices (nb,), scores float32 (n_queries, nb) on the scoring device)`` block by
    block: packed blocks through the fused kernel where :func:`_fused` says so, else as planned by
    :func:`_plan_blocks`."""
    if precision not in PRECISIONS:
        raise InputError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    device = torch.device(device) if device is not None else torch.device("cpu")
    Q, q_lens, q_dtype = _queries_matrix(queries, device)
    source = _is_source(pages)
    if not source:
        pages = [_as_tensor(p, "page", i) for i, p in enumerate(pages)]
        if not pages:
            raise InputError("no pages to score")
    dim = Q.shape[1]
    p_dtype = _page_dtype(pages)
    if p_dtype is not None and _fused(device, q_dtype, [torch.empty(0, dim, dtype=p_dtype)], dim, precision):
        yield from _score_packed(Q, q_lens, q_dtype, pages, budget_bytes, precision)
        return
    if precision != "exact":
        Q = round_to(Q, precision)
    half = (torch.float16, torch.bfloat16)
    if source:
        lengths = np.asarray(pages.lengths(), dtype=np.int64)
        if len(pages.ids()) != len(lengths):
            raise InputError("page source: ids() and lengths() differ in length")
        # sort by length only within windows of store order: little padding, and reads stay local on disk
        window = np.arange(len(lengths)) // _STORE_WINDOW
        order = np.lexsort((lengths, window))
        plan = _plan_blocks(lengths[order], budget_bytes, Q.shape[0], dim)
        blocks = _source_blocks(pages, order, lengths, plan)
    else:
        lengths = np.fromiter((p.shape[0] for p in pages), dtype=np.int64, count=len(pages))
        order = np.argsort(lengths, kind="stable")
        plan = _plan_blocks(lengths[order], budget_bytes, Q.shape[0], dim)
        blocks = ((order[s:e], [pages[k] for k in order[s:e]]) for s, e, _w in plan)

    ids = _named_ids(pages)
    for (idx, block), (_s, _e, width) in zip(blocks, plan):
        if any(b.shape[1] != dim for b in block):
            raise InputError(f"page embedding dim differs from the queries' dim {dim}")
        _check_pages(block, idx, ids)
        tf32 = device.type == "cuda" and q_dtype in half and block[0].dtype in half and precision == "exact"
        if _fused(device, q_dtype, block, dim, precision):  # a source that did not name its dtype
            from .maxsim_gpu import block_maxima

            M = block_maxima(_kernel_queries(Q, q_dtype, block[0].dtype, precision), block, precision=precision)
            yield idx, _check_scores(torch.segment_reduce(M, "sum", lengths=q_lens, axis=0)[: len(q_lens) - 1], idx, ids)
            continue
        if precision != "exact":  # the variant's rounding, explicit (float32 copies: counted as "rows as read")
            block = [round_to(b, precision) for b in block]
        if len(block) == 1 and block[0].shape[0] > width:  # one page over the budget: max over its chunks
            page = block[0]
            M = None
            for c in range(0, page.shape[0], width):
                part = page[c:c + width]
                m = _block_maxima(Q, [part], max(part.shape[0], _MIN_GEMM), tf32)
                M = m if M is None else torch.maximum(M, m)
        else:
            M = _block_maxima(Q, block, width, tf32)  # (q_rows, nb)
        yield idx, _check_scores(torch.segment_reduce(M, "sum", lengths=q_lens, axis=0)[: len(q_lens) - 1], idx, ids)  # (n_queries, nb)
        del M, block


def _kernel_queries(Q: torch.Tensor, q_dtype: torch.dtype, p_dtype: torch.dtype, precision: str) -> torch.Tensor:
    """The query matrix as the fused kernel takes it: in the pages' 16-bit dtype when both sides
    share it (exact: ``Q`` holds ``q_dtype`` values), else float32."""
    from .maxsim_gpu import mode

    return Q.to(q_dtype) if mode(q_dtype, p_dtype, precision) == 0 else Q


def _score_packed(Q, q_lens, q_dtype, pages, budget_bytes, precision):
    """The fused kernel's blocks (see :func:`_score_blocks`): one launch per block of packed pages."""
    from .maxsim_gpu import packed_maxima

    dim, Qk, ids = Q.shape[1], None, _named_ids(pages)
    # planned with the query rows the maxima hold (q_rows x pages float32), not a similarity matrix
    for idx, tokens, offs in _packed_blocks(pages, Q.device, budget_bytes, Q.shape[0], dim):
        if tokens.shape[1] != dim:
            raise InputError(f"page embedding dim {tokens.shape[1]} differs from the queries' dim {dim}")
        _check_packed(tokens, offs, idx, ids)
        Qk = _kernel_queries(Q, q_dtype, tokens.dtype, precision) if Qk is None else Qk
        M = packed_maxima(Qk, tokens, offs, precision=precision)
        yield idx, _check_scores(torch.segment_reduce(M, "sum", lengths=q_lens, axis=0)[: len(q_lens) - 1], idx, ids)
        del M, tokens


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
    precision: str = "exact",
) -> torch.Tensor:
    """MaxSim scores of every query against every page.

    Args:
        queries: ``n_queries`` tensors (or arrays) of shape ``(n_tokens_i, dim)``, real tokens only
            (padding already removed by the attention mask); any float dtype.
        pages: ``n_pages`` tensors of shape ``(n_tokens_j, dim)``, :class:`PackedPages`, or a
            :class:`PageSource` such as :class:`vdr.encode.store.EmbeddingStore`, read block by block.
        device: where to compute (``"cuda"``, ``"cpu"``; default CPU). Inputs are moved there.
        budget_bytes: bound in bytes on the working set of one block (:func:`_block_cost`: float32
            similarities ``(query tokens, padded block tokens)``, the padded float32 page copy and
            the rows as read; for the fused kernel :func:`_plan_packed`); padding counts, so the
            bound holds whatever the page lengths. Never below one page scored ``_MIN_GEMM`` rows
            at a time.
        precision: ``"exact"`` (default), or the opt-in ``"tf32"`` / ``"bf16"`` variants (both sides
            rounded first, see :func:`round_to`).

    Returns:
        float32 tensor ``(n_queries, n_pages)`` on the CPU; column ``j`` is page ``j`` (store order
        for a store).

    Raises:
        InputError: no queries or pages, a tensor that is not ``(n >= 1, dim)`` floats,
            mismatching dims, an unknown precision; a query or page vector holding NaN or
            infinity (the query's position, the page's id or position and the token named), a
            score that overflows float32 (query and page named).
    """
    n_pages = len(pages.ids()) if _is_source(pages) else len(pages)
    out = torch.empty((len(queries), n_pages), dtype=torch.float32)
    for idx, scores in _score_blocks(queries, pages, budget_bytes, device, precision):
        out[:, torch.from_numpy(idx)] = scores.cpu()
    return out


def maxsim_topk(
    queries: Sequence[torch.Tensor | np.ndarray],
    pages: Sequence[torch.Tensor | np.ndarray] | PageSource,
    k: int,
    *,
    device: str | torch.device | None = None,
    budget_bytes: int = DEFAULT_BUDGET_BYTES,
    precision: str = "exact",
) -> TopK:
    """The ``k`` best pages of each query by MaxSim, keeping only ``O(n_queries * k)`` scores, on
    the scoring device (only the final lists are copied to the CPU).

    Ties at equal scores are resolved as trec_eval ranks them (page id descending) when the pages
    come with ids (a store, :class:`PackedPages` with ids), else by page position ascending; the
    result does not depend on ``budget_bytes``.

    Args:
        k: pages to keep per query (``min(k, n_pages)`` are returned).
        queries, pages, device, budget_bytes, precision: as :func:`maxsim`.

    Returns:
        :class:`TopK` with float32 scores ``(n_queries, k)`` best first, their int64 page positions,
        and page ids when the source has ids.

    Raises:
        InputError: ``k`` < 1, or as :func:`maxsim`.
    """
    if k < 1:
        raise InputError(f"k must be >= 1, got {k}")
    ids = _named_ids(pages)
    n_pages = len(pages.ids()) if _is_source(pages) else len(pages)
    dev = torch.device(device) if device is not None else torch.device("cpu")
    # secondary key for ties: smaller is better
    if ids is not None:
        tie_key = torch.empty(n_pages, dtype=torch.int64)
        tie_key[torch.as_tensor(sorted(range(n_pages), key=lambda j: ids[j], reverse=True))] = torch.arange(n_pages)
    else:
        tie_key = torch.arange(n_pages)
    tie_key = tie_key.to(dev)
    nq = len(queries)
    best_s = torch.empty((nq, 0), dtype=torch.float32, device=dev)
    best_i = torch.empty((nq, 0), dtype=torch.int64, device=dev)
    for idx, scores in _score_blocks(queries, pages, budget_bytes, dev, precision):
        cand_s = torch.cat([best_s, scores.to(dev)], dim=1)
        cand_i = torch.cat([best_i, torch.from_numpy(idx).to(dev).expand(nq, -1)], dim=1)
        # order by (score desc, tie key asc): stable sort by key, then stable sort by score
        o = torch.argsort(tie_key[cand_i], dim=1, stable=True)
        cand_s, cand_i = cand_s.gather(1, o), cand_i.gather(1, o)
        o = torch.argsort(cand_s, dim=1, descending=True, stable=True)[:, :k]
        best_s, best_i = cand_s.gather(1, o), cand_i.gather(1, o)
    best_s, best_i = best_s.cpu(), best_i.cpu()
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

    @property
    def dtype(self):
        """The underlying source's stored dtype (``None`` when it does not say)."""
        return getattr(self.source, "dtype", None)

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
