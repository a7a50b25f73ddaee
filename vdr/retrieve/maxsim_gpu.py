"""A fused MaxSim kernel for CUDA (Triton): the similarities of a block never reach GPU memory.

:func:`vdr.retrieve.maxsim.maxsim` on CUDA with 16-bit vectors on both sides (the usual ColPali /
ColQwen store) would otherwise materialise a float32 similarity matrix ``(query tokens, block
tokens)`` per block and read it twice more (padding mask, max): that traffic, not the FLOPs,
bounds it. This kernel keeps each ``(query-token tile, page-token tile)`` product in registers,
takes the running max over the page's real tokens and writes only ``(query tokens, pages)``
maxima, as late-interaction engines do (ColBERT/PLAID's fused MaxSim; Khattab & Zaharia 2020,
SIGIR, "ColBERT: Efficient and Effective Passage Search via Contextualized Late Interaction over
BERT").

Arithmetic: bf16/fp16 products accumulated in float32 by ``tl.dot`` (tensor cores), the max exact;
scores agree with the float32 path to float32 rounding of the dot products (summation order inside
a dot product differs). Used only when Triton imports and the device is CUDA; everything else uses
the reference path of :mod:`vdr.retrieve.maxsim`.
"""

from __future__ import annotations

import functools

import torch

#: Tile sizes and launch settings: query-token rows per program, page-token rows per loop step,
#: warps, software-pipelining stages (``benchmarks/gpu_check.py`` sweeps them).
CONFIG = {"bm": 64, "bn": 64, "num_warps": 4, "num_stages": 2}


@functools.cache
def _kernel():
    """The compiled Triton kernel, or ``None`` when Triton is not importable."""
    try:
        import triton
        import triton.language as tl
    except Exception:  # noqa: BLE001 - no Triton: the reference path is used
        return None

    @triton.jit
    def maxsim_kernel(Q, P, L, Out, q_rows, width, stride_qm, stride_pb, stride_pn, stride_om,
                      DIM: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
        pid_m = tl.program_id(0)
        b = tl.program_id(1)
        offs_m = pid_m * BM + tl.arange(0, BM)
        offs_d = tl.arange(0, DIM)
        q = tl.load(Q + offs_m[:, None] * stride_qm + offs_d[None, :], mask=offs_m[:, None] < q_rows, other=0.0)
        n = tl.load(L + b)
        acc = tl.full((BM,), float("-inf"), tl.float32)
        for start in range(0, width, BN):  # the block's padded width; rows past n are masked
            offs_n = start + tl.arange(0, BN)
            p = tl.load(P + b * stride_pb + offs_n[:, None] * stride_pn + offs_d[None, :], mask=offs_n[:, None] < n, other=0.0)
            s = tl.dot(q, tl.trans(p))  # (BM, BN) float32
            s = tl.where(offs_n[None, :] < n, s, float("-inf"))
            acc = tl.maximum(acc, tl.max(s, axis=1))
        tl.store(Out + offs_m * stride_om + b, acc, mask=offs_m < q_rows)

    return triton, maxsim_kernel


def available(device: torch.device, q_dtype: torch.dtype, p_dtype: torch.dtype, dim: int) -> bool:
    """Whether :func:`block_maxima` can score on ``device``: CUDA (or ``VDR_TRITON_INTERPRET=1``
    for tests), Triton importable, both sides the same 16-bit dtype, ``dim`` a power of two >= 16."""
    import os

    interp = os.environ.get("TRITON_INTERPRET") == "1" and os.environ.get("VDR_TRITON_INTERPRET") == "1"
    if not (device.type == "cuda" or interp):
        return False
    if q_dtype != p_dtype or q_dtype not in (torch.float16, torch.bfloat16):
        return False
    if dim < 16 or dim & (dim - 1):
        return False
    return _kernel() is not None


def block_maxima(Q16: torch.Tensor, rows: list[torch.Tensor], config: dict | None = None) -> torch.Tensor:
    """Max similarity of each query token over each page's rows, fused (no similarity matrix).

    Args:
        Q16: ``(q_rows, dim)`` queries, the pages' 16-bit dtype, on the scoring device.
        rows: ``nb`` page tensors ``(n_j, dim)`` of that dtype (any device; ``n_j >= 1``).
        config: tile sizes and launch settings (default :data:`CONFIG`).

    Returns:
        float32 ``(q_rows, nb)`` on ``Q16``'s device.
    """
    triton, kernel = _kernel()
    device, dim = Q16.device, Q16.shape[1]
    same = all(r.device == device for r in rows)
    P = torch.nn.utils.rnn.pad_sequence(rows if same else [r.cpu() for r in rows], batch_first=True).to(device)
    lens = torch.tensor([r.shape[0] for r in rows], dtype=torch.int32, device=device)
    q_rows, nb = Q16.shape[0], len(rows)
    out = torch.empty((q_rows, nb), dtype=torch.float32, device=device)
    Q16 = Q16.contiguous()
    P = P.contiguous()
    c = {**CONFIG, **(config or {})}
    grid = (triton.cdiv(q_rows, c["bm"]), nb)
    kernel[grid](Q16, P, lens, out, q_rows, P.shape[1], Q16.stride(0), P.stride(0), P.stride(1), out.stride(0),
                 DIM=dim, BM=c["bm"], BN=c["bn"], num_warps=c["num_warps"], num_stages=c["num_stages"])
    return out
