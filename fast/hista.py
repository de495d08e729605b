"""Hista: hidden-state value estimation, batched and chunked.

Notation: ``hidden: [B, G, T, D]`` (last-layer hidden states at the response tokens, any float
dtype; padding may hold garbage) or a ``Pooled`` from ``pool_hidden``; ``mask: [B, G, T]`` (valid
response tokens; the response-relative position of a token is the number of valid tokens before
it, so left padding and holes are fine); ``rewards: [B, G]`` (the returns). Output ``[B, G, T]``:
A_{i,t} = R_i − V̂_i(⌊t/w⌋) at valid tokens, 0 at padding. Definitions: spec/hista.md.

Pipeline, with M = ⌈max L/w⌉ blocks and N = G·M:

1. ``pool_hidden``: block means ``[B, G, M, D]`` in float32 (float64 for float64 input),
   ``chunk_bytes`` of working memory at a time; a plain reshape-and-sum, deterministic, so equal
   prefixes pool to bit-equal blocks.
2. ``_row_minima``: per group, centre the blocks on their mean (exact by translation invariance;
   removes the large common component of anisotropic hidden states), find each block's nearest
   block of every rollout from ‖x‖² + ‖y‖² − 2x·y (batched matmul over row chunks), then recompute
   the distance to that nearest block directly as ‖x − y‖ (so equal blocks are at distance exactly
   0 and the chosen distance carries no cancellation error). ``[B, G, M, G]``.
3. Prefix sums over blocks give MD(P^i_{1:k}, P^j) for every k; then d/k, the midpoint median over
   the finite d of j ≠ i, the softmax and V̂_i(k), all in float64 on ``[B, G, M, G]``.
4. Expand to tokens with k(t) = ⌊t/w⌋.

Memory beyond the inputs: the pooled blocks (B·G·M·D floats), one working chunk of at most about
``chunk_bytes`` (at least one rollout or one row of blocks) and O(B·G²·M) float64;
``memory_plan`` computes it for given sizes. The chunk loops are the only Python loops (over
memory chunks, not over groups or tokens: with the default budget and moderate sizes there is one
iteration).
"""

from __future__ import annotations

import math
from typing import NamedTuple, NoReturn

import torch
from torch import Tensor

from advest.spec.claims import Variant
from advest.spec.tolerances import pair

from ._checks import check_rewards
from ._hista_memory import CHUNK_BYTES as CHUNK_BYTES  # the budget's default, public here
from ._hista_memory import _compute_dtype, _distance_chunks, _pool_rows
from ._hista_memory import memory_plan as memory_plan
from .registry import defined_in, register


class Pooled(NamedTuple):
    """Pre-pooled hidden states: block means of windows of ``w`` valid response tokens."""

    blocks: Tensor  # [B, G, M, D]: block b of rollout i at [i, b]; rows past ⌈L_i/w⌉ are ignored
    w: int


def _check_w(w: object) -> int:
    if isinstance(w, bool) or not isinstance(w, int) or w < 1:
        raise ValueError(f"hista needs an integer block width w >= 1; got w={w!r}")
    return w


def _as_bool_mask(mask: object, shape: tuple[int, ...], device: torch.device) -> Tensor:
    if not isinstance(mask, Tensor):
        raise TypeError(f"mask must be a torch.Tensor of shape {shape}; got {type(mask)}")
    if tuple(mask.shape) != shape:
        raise ValueError(f"mask must have shape {shape}; got {tuple(mask.shape)}")
    if mask.device != device:
        raise ValueError(f"mask is on {mask.device} but hidden is on {device}")
    if mask.dtype != torch.bool:
        if mask.is_complex() or bool(((mask != 0) & (mask != 1)).any()):
            raise ValueError("mask must be boolean or hold only 0 and 1")
        mask = mask != 0
    return mask


def _where(row: int, lead: tuple[int, ...]) -> str:
    """'group b (sample g' for a flattened row of [B, G, ...] (or the index for other layouts)."""
    if len(lead) == 2:
        return f"group {row // lead[1]} (sample {row % lead[1]}"
    index = []
    for size in reversed(lead):
        index.append(row % size)
        row //= size
    return f"row ({', '.join(map(str, reversed(index)))}"  # the caller adds ", token t)"


def pool_hidden(
    hidden: Tensor, mask: Tensor, w: int = 16, *, chunk_bytes: int = CHUNK_BYTES
) -> Pooled:
    """Mean-pool windows of ``w`` valid tokens: ``hidden [..., T, D]``, ``mask [..., T]`` ->
    ``Pooled(blocks [..., M, D], w)`` with M = ⌈max L/w⌉ (L = valid tokens per row), the final
    partial block included and empty blocks 0. Call it inside the no-grad forward pass, per
    micro-batch, and keep only the blocks (never ``output_hidden_states=True``).

    Raises ``ValueError`` naming the group, sample and token of a non-finite valid hidden state.
    """
    w = _check_w(w)
    if not isinstance(hidden, Tensor) or not hidden.is_floating_point():
        raise TypeError("hidden must be a floating-point torch.Tensor of shape [B, G, T, D]")
    if hidden.dim() < 2 or hidden.shape[-1] < 1:
        raise ValueError(f"hidden must have shape [..., T, D] with D >= 1; got {hidden.shape}")
    *lead, T, D = hidden.shape
    valid = _as_bool_mask(mask, (*lead, T), hidden.device).reshape(-1, T)  # [R, T]
    h = hidden.detach().reshape(-1, T, D)  # [R, T, D]; a view for contiguous input
    rows = h.shape[0]
    lengths = valid.sum(dim=1)  # [R]
    m = -(-int(lengths.max()) // w) if rows else 0
    dtype = _compute_dtype(hidden.dtype)
    blocks = torch.zeros(rows, m, D, dtype=dtype, device=hidden.device)  # [R, M, D]
    if m == 0:
        return Pooled(blocks.reshape(*lead, 0, D), w)
    positions = torch.arange(T, device=hidden.device)
    prefix = bool((valid == (positions < lengths[:, None])).all())  # right-padded: no gather
    elt = torch.finfo(dtype).bits // 8
    gather_elt = 0 if prefix else torch.finfo(hidden.dtype).bits // 8
    step = _pool_rows(m, w, T, D, elt, gather_elt, chunk_bytes)
    n = min(T, m * w)
    counts = (lengths[:, None] - torch.arange(m, device=hidden.device) * w).clamp(0, w)  # [R, M]
    for r0 in range(0, rows, step):
        chunk, ok = h[r0 : r0 + step], valid[r0 : r0 + step]
        if not prefix:  # move each row's valid tokens to the front, in order
            order = torch.argsort((~ok).to(torch.int8), dim=1, stable=True)  # [c, T]
            chunk = chunk[torch.arange(chunk.shape[0], device=h.device)[:, None], order]
            ok = positions < lengths[r0 : r0 + step, None]
        buf = torch.zeros(chunk.shape[0], m * w, D, dtype=dtype, device=h.device)
        buf[:, :n] = chunk[:, :n]
        buf[:, :n].masked_fill_(~ok[:, :n, None], 0.0)  # padding may hold NaN: zero it first
        sums = buf.view(-1, m, w, D).sum(dim=2)  # [c, M, D]
        blocks[r0 : r0 + step] = sums / counts[r0 : r0 + step, :, None].clamp(min=1)
        del buf, sums  # free this chunk before the next one is allocated
        if not bool(torch.isfinite(blocks[r0 : r0 + step]).all()):
            _raise_non_finite(h, valid, blocks, r0, tuple(lead))
    return Pooled(blocks.reshape(*lead, m, D), w)


def _raise_non_finite(
    h: Tensor, valid: Tensor, blocks: Tensor, r0: int, lead: tuple[int, ...]
) -> NoReturn:
    """Name the first valid token whose hidden state is NaN or infinite (or report overflow)."""
    bad_rows = (~torch.isfinite(blocks[r0:])).flatten(1).any(dim=1).nonzero()
    row = r0 + int(bad_rows[0])
    tokens = (valid[row] & ~torch.isfinite(h[row]).all(dim=-1)).nonzero()
    if tokens.numel() == 0:
        raise ValueError(f"hidden overflows {blocks.dtype} when pooled in {_where(row, lead)})")
    raise ValueError(
        f"hidden has a non-finite value in {_where(row, lead)}, token {int(tokens[0])})"
    )


def _row_minima(blocks: Tensor, present: Tensor, chunk_bytes: int) -> Tensor:
    """r[b, i, β, j] = min over rollout j's blocks y of ‖P^i_β − y‖ (+∞ if j has none).

    blocks: [B, G, M, D]; present: [B, G, M] bool (block exists) -> [B, G, M, G] (blocks' dtype).
    """
    B, G, M, D = blocks.shape
    N = G * M
    elt = torch.finfo(blocks.dtype).bits // 8
    groups, rows = _distance_chunks(B, N, G, D, elt, chunk_bytes)
    out = torch.empty(B, N, G, dtype=blocks.dtype, device=blocks.device)  # [B, N(i, β), G(j)]
    flat_present = present.reshape(B, N)
    for b0 in range(0, B, groups):
        x = blocks[b0 : b0 + groups].reshape(-1, N, D)  # [bs, N, D]
        ok = flat_present[b0 : b0 + groups]  # [bs, N]
        weight = ok.to(x.dtype)[:, None, :] / ok.sum(dim=1)[:, None, None]  # [bs, 1, N]
        xc = x - torch.bmm(weight, x)  # [bs, N, D]: centred on the group's mean block
        sq = torch.linalg.vector_norm(xc, dim=-1).square()  # [bs, N]
        first = torch.arange(G, device=x.device) * M  # [G]: flat index of rollout j's block 0
        batch = torch.arange(xc.shape[0], device=x.device)[:, None, None]
        for i0 in range(0, N, rows):
            xi = xc[:, i0 : i0 + rows]  # [bs, r, D]
            sq_dist = sq[:, i0 : i0 + rows, None] + sq[:, None, :]  # [bs, r, N]
            sq_dist.baddbmm_(xi, xc.transpose(1, 2), alpha=-2)
            sq_dist.masked_fill_(~ok[:, None, :], torch.inf)
            nearest, index = sq_dist.view(*sq_dist.shape[:2], G, M).min(dim=-1)  # [bs, r, G]
            y = xc[batch, first + index]  # [bs, r, G, D]
            y.sub_(xi[:, :, None, :])
            dist = torch.linalg.vector_norm(y, dim=-1)  # direct ‖x − y‖: 0 for equal blocks
            out[b0 : b0 + groups, i0 : i0 + rows] = torch.where(nearest == torch.inf, nearest, dist)
            del sq_dist, nearest, index, y, dist  # free before the next row chunk
        del xc, sq
    return out.view(B, G, M, G)


def _weighted_values(d: Tensor, finite: Tensor, rewards: Tensor, tau_scale: float) -> Tensor:
    """V̂ = Σ_j w_j R_j with w = softmax(−d/τ) over the finite d, τ = tau_scale·median (midpoint);
    uniform over the finite d when τ = 0, over all other rollouts when none is finite.

    d, finite: [B, G, K, G] (float64, bool; finite excludes j = i); rewards: [B, G] float64 ->
    [B, G, K]. The returns enter as R_j − c_i with c_i = min_{j≠i} R_j, so that a constant group
    gives V̂ = c exactly and V̂ stays inside [min, max] of the other returns under rounding.
    """
    G = rewards.shape[1]
    others = ~torch.eye(G, dtype=torch.bool, device=d.device)  # [G(i), G(j)]
    inf = torch.tensor(torch.inf, dtype=d.dtype, device=d.device)
    base = torch.where(others, rewards[:, None, :], inf).amin(dim=-1)  # [B, G]: c_i
    excess = (rewards[:, None, :] - base[:, :, None])[:, :, None, :]  # [B, G, 1, G]: R_j − c_i
    n_finite = finite.sum(dim=-1, keepdim=True)  # [B, G, K, 1]
    ordered = torch.where(finite, d, inf).sort(dim=-1).values
    lo = ((n_finite - 1) // 2).clamp(min=0)
    median = (ordered.gather(-1, lo) + ordered.gather(-1, n_finite // 2)) / 2  # [B, G, K, 1]
    tau = tau_scale * median
    nearest = ordered[..., :1]
    logits = -(torch.where(finite, d, nearest) - nearest) / torch.where(tau > 0, tau, 1.0)
    e = torch.where(tau > 0, torch.exp(logits), 1.0)
    e = torch.where(n_finite > 0, torch.where(finite, e, 0.0), others[None, :, None, :].to(d))
    return base[:, :, None] + (e * excess).sum(dim=-1) / e.sum(dim=-1)


def _state_values(
    blocks: Tensor, lengths: Tensor, rewards: Tensor, w: int, tau_scale: float, chunk_bytes: int
) -> Tensor:
    """V̂_i(k) for k = 0..M: ``[B, G, M + 1]`` float64 (k beyond rollout i's complete blocks is
    never read). blocks: [B, G, M, D]; lengths: [B, G] valid tokens; rewards: [B, G] float64."""
    B, G, M, _ = blocks.shape
    n_blocks = -(-lengths // w)  # [B, G]: ⌈L/w⌉, the partial block included
    present = torch.arange(M, device=blocks.device) < n_blocks[..., None]  # [B, G, M]
    r = _row_minima(blocks, present, chunk_bytes).to(torch.float64)  # [B, G, M, G]
    k = torch.arange(1, M + 1, dtype=torch.float64, device=blocks.device)
    d = r.cumsum(dim=2) / k[:, None]  # d_ij(k) = MD(P^i_{1:k}, P^j)/k, [B, G, M, G]
    others = ~torch.eye(G, dtype=torch.bool, device=blocks.device)
    finite = others[None, :, None, :] & (n_blocks > 0)[:, None, None, :] & torch.isfinite(d)
    value = _weighted_values(d, finite, rewards, tau_scale)  # [B, G, M]
    loo = _weighted_values(  # k = 0: uniform over all j ≠ i, the leave-one-out mean
        torch.zeros(B, G, 1, G, dtype=torch.float64, device=blocks.device),
        others[None, :, None, :].expand(B, G, 1, G),
        rewards,
        tau_scale,
    )
    return torch.cat([loo, value], dim=2)


def _check_tau(tau_scale: object) -> float:
    if (
        isinstance(tau_scale, bool)
        or not isinstance(tau_scale, int | float)
        or not math.isfinite(tau_scale)
        or tau_scale <= 0
    ):
        raise ValueError(f"hista needs a finite tau_scale > 0; got tau_scale={tau_scale!r}")
    return float(tau_scale)


def _pooled_input(
    hidden: Tensor | Pooled, valid: Tensor, lengths: Tensor, w: int | None, chunk_bytes: int
) -> tuple[Tensor, int]:
    """The blocks [B, G, M, D] and w, from raw hidden states or a checked ``Pooled``."""
    B, G, _ = valid.shape
    if isinstance(hidden, Pooled):
        blocks, pooled_w = hidden
        if w is not None and w != pooled_w:
            raise ValueError(f"hidden was pooled with w={pooled_w} but w={w} was passed")
        w = _check_w(pooled_w)
        need = -(-int(lengths.max()) // w)
        if not isinstance(blocks, Tensor) or not blocks.is_floating_point():
            raise TypeError("Pooled.blocks must be a floating-point tensor [B, G, M, D]")
        if blocks.dim() != 4 or blocks.shape[:2] != (B, G) or blocks.shape[2] < need:
            raise ValueError(
                f"Pooled.blocks must have shape [B, G, M, D] with [B, G] = {(B, G)} and "
                f"M >= {need} (the mask's longest rollout); got {tuple(blocks.shape)}"
            )
        if blocks.device != valid.device:
            raise ValueError(f"Pooled.blocks is on {blocks.device} but mask is on {valid.device}")
        blocks = blocks[:, :, :need].detach().to(_compute_dtype(blocks.dtype))
        present = torch.arange(need, device=blocks.device) < (-(-lengths // w))[..., None]
        bad = present & ~torch.isfinite(blocks).all(dim=-1)
        if bool(bad.any()):
            b, g, m = bad.nonzero()[0].tolist()
            raise ValueError(
                f"Pooled.blocks has a non-finite value in group {b} (sample {g}, block {m})"
            )
        return blocks, w
    if not isinstance(hidden, Tensor) or not hidden.is_floating_point():
        raise TypeError("hidden must be a floating-point tensor [B, G, T, D] or a Pooled")
    if hidden.dim() != 4 or hidden.shape[:3] != valid.shape:
        raise ValueError(
            f"hidden must have shape [B, G, T, D] with [B, G, T] = {tuple(valid.shape)}; "
            f"got {tuple(hidden.shape)}"
        )
    w = _check_w(16 if w is None else w)
    return pool_hidden(hidden, valid, w, chunk_bytes=chunk_bytes).blocks, w


@register(
    kind="token",
    extends="rloo",
    inputs=("hidden", "mask", "rewards"),
    # the nearest-block search compares every pair of a group's G·⌈T/w⌉ blocks, D each; the
    # median over the other rollouts sorts G distances for each of the G·⌈T/w⌉ prefixes
    cost="B·G²·T²·D + B·G²·T log G",
    # w = 1: a baseline at every token (the default window spans a short response whole)
    variants=(Variant({"w": 1}),),
    tolerance=pair(
        "output", "softmax-weighted rewards after centring the hidden states: ulps of max|A|"
    ),
)
def hista(
    hidden: Tensor | Pooled,
    mask: Tensor,
    rewards: Tensor,
    *,
    w: int | None = None,
    tau_scale: float = 1.0,
    chunk_bytes: int = CHUNK_BYTES,
) -> Tensor:
    """A_{i,t} = R_i − V̂_i(⌊t/w⌋) per valid token, 0 at padding; no std normalisation. Detached.

    hidden: [B, G, T, D] or ``Pooled`` (blocks [B, G, M, D]); mask: [B, G, T]; rewards: [B, G]
    (the returns) -> [B, G, T] in rewards' dtype. ``w`` defaults to 16 (or the ``Pooled``'s w);
    ``chunk_bytes`` bounds the working memory of one chunk.
    """
    check_rewards(rewards)
    B, G = rewards.shape
    if G < 2:
        raise ValueError(f"hista needs G >= 2 (there are no other rollouts); got G={G}")
    tau = _check_tau(tau_scale)
    if isinstance(w, bool) or not (w is None or isinstance(w, int)):
        raise ValueError(f"hista needs an integer block width w >= 1; got w={w!r}")
    if w is not None:
        _check_w(w)
    device = hidden.blocks.device if isinstance(hidden, Pooled) else _device(hidden)
    if rewards.device != device:
        raise ValueError(f"rewards is on {rewards.device} but hidden is on {device}")
    if not isinstance(mask, Tensor) or mask.dim() != 3 or mask.shape[:2] != (B, G):
        got = tuple(mask.shape) if isinstance(mask, Tensor) else type(mask)
        raise ValueError(f"mask must have shape [B, G, T] with [B, G] = {(B, G)}; got {got}")
    valid = _as_bool_mask(mask, (B, G, mask.shape[2]), device)
    lengths = valid.sum(dim=-1)  # [B, G]
    empty = lengths.sum(dim=1) == 0
    if bool(empty.any()):
        raise ValueError(f"mask leaves group {int(empty.nonzero()[0])} without valid tokens")
    blocks, w = _pooled_input(hidden, valid, lengths, w, chunk_bytes)
    values = _state_values(blocks, lengths, rewards.to(torch.float64), w, tau, chunk_bytes)
    position = valid.cumsum(dim=-1) - 1  # response-relative position of each valid token
    k = (position.clamp(min=0) // w).clamp(max=values.shape[2] - 1)  # [B, G, T]
    baseline = values.gather(2, k)
    adv = torch.where(valid, rewards.to(torch.float64)[..., None] - baseline, 0.0)
    return adv.to(rewards.dtype)


def _device(hidden: object) -> torch.device:
    if not isinstance(hidden, Tensor):
        raise TypeError(
            f"hidden must be a torch.Tensor [B, G, T, D] or a Pooled; got {type(hidden)}"
        )
    return hidden.device


__all__ = defined_in(__name__)  # every estimator registered above
