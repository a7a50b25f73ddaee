"""A fused MaxSim kernel (Triton) over packed variable-length pages: no similarity matrix, no padding.

:func:`vdr.retrieve.maxsim.maxsim` on CUDA would otherwise materialise a float32 similarity matrix
``(query tokens, block tokens)`` per block and read it twice more (padding mask, max): that
traffic, not the FLOPs, bounds it. This kernel keeps each ``(query-token tile, page-token tile)``
product in registers, takes the running max over the page's real tokens and writes only the
``(query tokens, pages)`` maxima, as late-interaction engines do (ColBERT/PLAID's fused MaxSim;
Khattab & Zaharia 2020, SIGIR, "ColBERT: Efficient and Effective Passage Search via
Contextualized Late Interaction over BERT").

Layout: the pages of a launch are **packed**, back to back in one ``(total tokens, dim)`` tensor,
with int64 offsets ``(n_pages + 1,)`` (page ``j`` is rows ``offsets[j]:offsets[j + 1]``): the
layout of a page store's shards and of :class:`vdr.retrieve.maxsim.PackedPages`, so a launch
copies nothing (no ``pad_sequence``), and one launch scores every page of a block (up to
:data:`MAX_PAGES_PER_LAUNCH`). The grid is ``(query-row tiles, pages)``, query tiles varying
fastest, so the programs that read a page run together and its tokens come from L2 after the
first.

Arithmetic (``precision``, see :data:`PRECISIONS`):

* ``"exact"`` (default): float32 accumulation, products exact. Both sides of the same 16-bit
  dtype: ``tl.dot`` on tensor cores (a product of two bf16/fp16 values is exact in float32);
  anything else (float32 queries and float16 pages, vdr's own case): both widened to float32
  in registers and multiplied in IEEE float32 (``input_precision="ieee"``). Scores agree with the
  float32 reference path to float32 rounding of the sums (the summation order differs).
* ``"tf32"`` (opt-in): float32 operands rounded to TF32 (10-bit mantissa) by the tensor cores:
  faster on float32 inputs, relative error about 1e-3 per product.
* ``"bf16"`` (opt-in): both operands rounded to bfloat16 (8-bit mantissa), float32 accumulation;
  what fp16/bf16-only kernels compute.

Padding never floors a maximum: page rows past a page's length are masked to ``-inf`` before the
max (and never loaded), query rows past ``q_rows`` are never stored.
"""

from __future__ import annotations

import functools

import torch

#: Tile sizes and launch settings: query-token rows per program, page-token rows per loop step,
#: warps, software-pipelining stages (``benchmarks/gpu_check.py`` sweeps them).
CONFIG = {"bm": 64, "bn": 64, "num_warps": 4, "num_stages": 2}
#: The arithmetic variants (see the module docstring); only ``"exact"`` keeps scores within 1e-5
#: (relative) of the float32 reference.
PRECISIONS = ("exact", "tf32", "bf16")
#: Pages per launch at most (the grid's second axis; CUDA allows 65,535).
MAX_PAGES_PER_LAUNCH = 65_535
_HALF = (torch.float16, torch.bfloat16)
# kernel modes: 0 native 16-bit tensor-core dot, 1 float32 IEEE, 2 float32 TF32, 3 bfloat16
_NATIVE, _IEEE, _TF32, _BF16 = 0, 1, 2, 3


@functools.cache
def _kernel():
    """``(triton, kernel)``, or ``None`` when Triton is not importable."""
    try:
        import triton
        import triton.language as tl
    except Exception:  # noqa: BLE001 - no Triton: the reference path is used
        return None

    @triton.jit
    def packed_maxsim_kernel(Q, P, OFF, Out, q_rows, stride_qm, stride_pn, stride_om,
                             DIM: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, MODE: tl.constexpr):
        pid_m = tl.program_id(0)
        b = tl.program_id(1)
        offs_m = pid_m * BM + tl.arange(0, BM)
        offs_d = tl.arange(0, DIM)
        q = tl.load(Q + offs_m[:, None] * stride_qm + offs_d[None, :], mask=offs_m[:, None] < q_rows, other=0.0)
        if MODE == 1 or MODE == 2:
            q = q.to(tl.float32)
        start = tl.load(OFF + b)
        n = tl.load(OFF + b + 1) - start
        acc = tl.full((BM,), float("-inf"), tl.float32)
        for s in range(0, n, BN):  # the page's own length: no padded width
            offs_n = s + tl.arange(0, BN)
            live = offs_n < n
            p = tl.load(P + (start + offs_n)[:, None] * stride_pn + offs_d[None, :], mask=live[:, None], other=0.0)
            if MODE == 0:
                sc = tl.dot(q, tl.trans(p))  # (BM, BN) float32: 16-bit products are exact
            elif MODE == 1:
                sc = tl.dot(q, tl.trans(p.to(tl.float32)), input_precision="ieee")
            elif MODE == 2:
                sc = tl.dot(q, tl.trans(p.to(tl.float32)), input_precision="tf32")
            else:
                sc = tl.dot(q, tl.trans(p.to(tl.bfloat16)))
            sc = tl.where(live[None, :], sc, float("-inf"))
            acc = tl.maximum(acc, tl.max(sc, axis=1))
        tl.store(Out + offs_m * stride_om + b, acc, mask=offs_m < q_rows)

    return triton, packed_maxsim_kernel


def mode(q_dtype: torch.dtype, p_dtype: torch.dtype, precision: str = "exact") -> int:
    """The kernel's arithmetic for queries of ``q_dtype``, pages of ``p_dtype`` and ``precision``
    (see the module docstring): 0 native 16-bit, 1 IEEE float32, 2 TF32, 3 bfloat16.

    Raises:
        ValueError: an unknown precision or a non-float dtype.
    """
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    for dt in (q_dtype, p_dtype):
        if dt not in (*_HALF, torch.float32):
            raise ValueError(f"the fused kernel takes float16, bfloat16 or float32 vectors, got {dt}")
    if precision == "bf16":
        return _BF16
    if q_dtype == p_dtype and q_dtype in _HALF:
        return _NATIVE
    return _TF32 if precision == "tf32" else _IEEE


def available(device: torch.device, q_dtype: torch.dtype, p_dtype: torch.dtype, dim: int, precision: str = "exact") -> bool:
    """Whether :func:`packed_maxima` can score on ``device``: CUDA (or ``VDR_TRITON_INTERPRET=1`` with
    ``TRITON_INTERPRET=1``, Triton's CPU interpreter, for tests), Triton importable, float16 /
    bfloat16 / float32 vectors, ``dim`` a power of two >= 16; the interpreter has no bfloat16."""
    import os

    interp = os.environ.get("TRITON_INTERPRET") == "1" and os.environ.get("VDR_TRITON_INTERPRET") == "1"
    if not (device.type == "cuda" or interp):
        return False
    try:
        m = mode(q_dtype, p_dtype, precision)
    except ValueError:
        return False
    if interp and device.type != "cuda" and (m == _BF16 or torch.bfloat16 in (q_dtype, p_dtype)):
        return False
    if dim < 16 or dim & (dim - 1):
        return False
    return _kernel() is not None


def packed_maxima(Q: torch.Tensor, tokens: torch.Tensor, offsets: torch.Tensor, *, precision: str = "exact",
                  config: dict | None = None) -> torch.Tensor:
    """Max similarity of each query token over each packed page's tokens, fused, one launch per
    :data:`MAX_PAGES_PER_LAUNCH` pages.

    Args:
        Q: ``(q_rows, dim)`` query tokens (float16, bfloat16 or float32) on the scoring device.
        tokens: ``(total tokens, dim)`` pages back to back (float16, bfloat16 or float32), on
            ``Q``'s device, rows contiguous (row stride any, column stride 1).
        offsets: int64 ``(n_pages + 1,)`` on ``Q``'s device: page ``j`` is
            ``tokens[offsets[j]:offsets[j + 1]]``; non-decreasing, every page >= 1 token.
        precision: ``"exact"`` (default), ``"tf32"`` or ``"bf16"`` (see the module docstring).
        config: tile sizes and launch settings (default :data:`CONFIG`).

    Returns:
        float32 ``(q_rows, n_pages)`` on ``Q``'s device.

    Raises:
        ValueError: mismatching dims or devices, an unknown precision, a non-float dtype.
    """
    triton, kernel = _kernel()
    device, dim = Q.device, Q.shape[1]
    if tokens.ndim != 2 or tokens.shape[1] != dim or tokens.device != device or offsets.device != device:
        raise ValueError(f"pages {tuple(tokens.shape)} on {tokens.device} and offsets on {offsets.device} do not fit"
                         f" queries {tuple(Q.shape)} on {device}")
    m = mode(Q.dtype, tokens.dtype, precision)
    if m == _BF16 and Q.dtype != torch.bfloat16:
        Q = Q.to(torch.bfloat16)  # the queries are small; the pages are rounded in registers
    Q = Q.contiguous()
    if tokens.stride(1) != 1:
        tokens = tokens.contiguous()
    offsets = offsets.to(torch.int64)
    q_rows, n_pages = Q.shape[0], offsets.shape[0] - 1
    out = torch.empty((q_rows, n_pages), dtype=torch.float32, device=device)
    c = {**CONFIG, **(config or {})}
    for a in range(0, n_pages, MAX_PAGES_PER_LAUNCH):
        b = min(n_pages, a + MAX_PAGES_PER_LAUNCH)
        grid = (triton.cdiv(q_rows, c["bm"]), b - a)
        kernel[grid](Q, tokens, offsets[a:], out[:, a:], q_rows, Q.stride(0), tokens.stride(0), out.stride(0),
                     DIM=dim, BM=c["bm"], BN=c["bn"], MODE=m, num_warps=c["num_warps"], num_stages=c["num_stages"])
    return out


def block_maxima(Q16: torch.Tensor, rows: list[torch.Tensor], config: dict | None = None, *,
                 precision: str = "exact") -> torch.Tensor:
    """:func:`packed_maxima` of a list of pages (packed here, one copy; no padding).

    Args:
        Q16: ``(q_rows, dim)`` queries on the scoring device (float16, bfloat16 or float32).
        rows: ``nb`` page tensors ``(n_j >= 1, dim)`` of one dtype (any device).
        config: tile sizes and launch settings (default :data:`CONFIG`).
        precision: as :func:`packed_maxima`.

    Returns:
        float32 ``(q_rows, nb)`` on ``Q16``'s device.
    """
    device = Q16.device
    tokens = torch.cat([r.to(device) for r in rows])
    lengths = torch.tensor([0] + [r.shape[0] for r in rows], dtype=torch.int64)
    return packed_maxima(Q16, tokens, torch.cumsum(lengths, 0).to(device), precision=precision, config=config)
