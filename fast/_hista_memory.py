"""How much working memory ``fast.hista`` takes: its chunk rules (``_pool_rows``,
``_distance_chunks``), shared by the estimator and by ``memory_plan``, which predicts the peak
from them (scripts/hista_memory.py measures it on a GPU)."""

from __future__ import annotations

import torch

CHUNK_BYTES = 1 << 27
"""Default working-memory budget per chunk (128 MiB)."""


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype == torch.float64 else torch.float32


def _pool_rows(m: int, w: int, t: int, d: int, elt: int, gather_elt: int, budget: int) -> int:
    """Rollouts pooled per chunk: a float buffer [c, M·w, D] plus, for masks that are not a prefix,
    a gathered copy [c, T, D] in the input dtype."""
    per_row = m * w * d * elt + t * d * gather_elt
    return max(1, budget // max(per_row, 1))


def _distance_chunks(b: int, n: int, g: int, d: int, elt: int, budget: int) -> tuple[int, int]:
    """(groups, rows) per distance chunk: half the budget for the centred blocks of the groups
    [groups, N, D], half for one row chunk's Gram slice [groups, rows, N] and gathered nearest
    blocks [groups, rows, G, D] (plus their int64 indices)."""
    groups = max(1, min(b, (budget // 2) // max(n * d * elt, 1)))
    per_row = groups * ((n + g * d) * elt + 2 * g * 8)
    rows = max(1, min(n, (budget // 2) // max(per_row, 1)))
    return groups, rows


def memory_plan(
    B: int,
    G: int,
    T: int,
    D: int,
    *,
    w: int = 16,
    dtype: torch.dtype = torch.bfloat16,
    chunk_bytes: int = CHUNK_BYTES,
) -> dict[str, int]:
    """Bytes ``hista`` allocates beyond its inputs for full-length, right-padded rollouts, from
    the same chunk rules the code uses. Keys: the live tensors of each stage and ``peak``.

    blocks [B, G, M, D] live throughout; the pooling chunk, the distance chunk and the float64
    ``[B, G, M, G]`` stage follow one another; the token stage holds a few ``[B, G, T]`` tensors.
    """
    M = -(-T // w)
    N = G * M
    elt = torch.finfo(_compute_dtype(dtype)).bits // 8
    c = min(B * G, _pool_rows(M, w, T, D, elt, 0, chunk_bytes))
    groups, rows = _distance_chunks(B, N, G, D, elt, chunk_bytes)
    plan = {
        "blocks": B * G * M * D * elt,
        # buffer [c, M·w, D], its block sums and their means [c, M, D]
        "pool_chunk": c * M * w * D * elt + 2 * c * M * D * elt,
        # centred blocks [bs, N, D]; Gram slice [bs, r, N]; nearest blocks [bs, r, G, D];
        # minima, indices and distances [bs, r, G]; the row minima of every group [B, N, G]
        "distance_chunk": groups * N * D * elt
        + groups * rows * (N + G * D) * elt
        + groups * rows * G * (3 * elt + 8)
        + B * N * G * elt,
        # about a dozen float64 / int64 [B, G, M, G] tensors (row minima, prefix sums, sort)
        "values": 12 * B * G * M * G * 8,
        # positions, block index, baseline and advantages [B, G, T]
        "tokens": 4 * B * G * T * 8,
    }
    plan["peak"] = plan["blocks"] + max(
        plan["pool_chunk"], plan["distance_chunk"], plan["values"], plan["tokens"]
    )
    return plan
