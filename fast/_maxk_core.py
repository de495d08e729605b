"""The machinery of ``fast.maxk`` (spec/maxk.md §Algorithm, spec/maxk_paths.md §Counting
path): the two paths (one stable sort, or counts of few levels), the group shift, the cached
weight coefficients, and the evaluation of one linear form of ``spec.maxk_weights.FORMS``.
``fast/maxk.py`` holds the registered estimators, each a few lines over these.

Notation: ``rewards: [B, G]`` (B prompts, G samples each), comparator size K.
"""

from __future__ import annotations

import functools
from typing import Literal, NamedTuple

import torch
from torch import Tensor

from advest.spec.maxk_weights import FORMS, evaluate, form_rows

from . import _levels
from ._checks import check_k, check_rewards
from ._weights import WEIGHT_NAMES, weights
from .registry import _REGISTRY, Entry


def _entry(name: str) -> Entry:
    # at call time the estimator is registered (its module's decorators ran on import)
    return _REGISTRY[name]


MAX_LEVELS = 8
"""``auto`` takes the counting path when every group of the call has at most
``min(MAX_LEVELS, G // 8)`` distinct rewards (spec/maxk_paths.md §Counting path). Each level costs
about four passes over ``[B, G]`` and the path has a fixed cost in small ops; one sort costs
about as much as 15–25 passes at G = 64 on CPU, but only a few at G = 8, where sorting wins."""


def max_levels(G: int) -> int:
    """The most distinct rewards per group for which ``auto`` counts instead of sorting."""
    return min(MAX_LEVELS, G // 8)


def path_for(rewards: Tensor) -> Literal["sorted", "counts"]:
    """The path the max@K estimators take on ``rewards: [B, G]``: counts when every group has at
    most ``max_levels(G)`` distinct rewards, else the sort."""
    return "sorted" if _find_levels(rewards) is None else "counts"


class _Groups(NamedTuple):
    """The groups as S ascending slots: S = G sorted positions, or L distinct levels."""

    x: Tensor  # [B, S] float64: slot value minus the group maximum (all <= 0)
    shift: Tensor  # [B, 1] float64: the group maximum
    k: int
    n: int  # G
    perm: Tensor | None  # sorted path: [B, G] int64, sorted position -> original index
    levels: _levels.Levels | None  # counting path


def _prepare(rewards: Tensor, k: object, name: str) -> _Groups:
    check_rewards(rewards)
    G = rewards.shape[1]
    kk = check_k(k, G, name, k_max=_entry(name).k_max(G))  # the domain its registry entry declares
    levels = _find_levels(rewards)
    if levels is not None:
        x = levels.values.to(torch.float64)  # [B, L]
        shift = x[:, -1:]
        return _Groups(x - shift, shift, kk, G, None, levels)
    rs, perm = _sort(rewards)
    shift = rs[:, -1:].to(torch.float64)  # [B, 1]
    return _Groups(torch.sub(rs, shift), shift, kk, G, perm, None)  # float64 by promotion


def _find_levels(rewards: Tensor) -> _levels.Levels | None:
    """The levels of every group when the counting path is taken, else None (sort). The tests
    force either path by replacing this one function (tests/maxk_paths.py)."""
    limit = max_levels(rewards.shape[1])
    if limit < 2:
        return None
    # auto: general rewards fail on the first group at the cost of one tiny call, before any pass
    # over the whole batch (a first group with few levels and a later one with many only wastes
    # the passes; the result is the same either way).
    if rewards.shape[0] > 1 and torch.unique(rewards[0]).numel() > limit:
        return None
    return _levels.find(rewards, limit)


_KEY_DTYPES = {16: torch.int16, 32: torch.int32, 64: torch.int64}


def _sort(rewards: Tensor) -> tuple[Tensor, Tensor]:
    """Each group sorted ascending, ``([B, G] values, [B, G] int64 perm)``.

    Sorts integer keys with the float order: the CPU sort compares integers about 1.4× faster
    than floats, whose comparator must place NaN. Non-negative floats already order as their bit
    patterns (−0.0 is the smallest key and ties +0.0); otherwise the magnitude bits of negatives
    are flipped, an involution, so the sorted keys map straight back to the values (no gather).
    The order within a tie is immaterial (tied samples have the same exact value at any of their
    positions), so the sort need not be stable.
    """
    bits = torch.finfo(rewards.dtype).bits
    key = rewards.view(_KEY_DTYPES[bits])
    if rewards.numel() and bool(rewards.amin() >= 0):
        sorted_key, perm = torch.sort(key, dim=-1)
        return sorted_key.view(rewards.dtype), perm
    sorted_key, perm = torch.sort(_flip(key, bits), dim=-1)
    return _flip(sorted_key, bits).view(rewards.dtype), perm


def _flip(bits: Tensor, width: int) -> Tensor:
    """The order-preserving map between IEEE bit patterns and signed integers (its own inverse)."""
    return bits ^ ((bits >> (width - 1)) & ((1 << (width - 1)) - 1))


def _expand(
    values: Tensor,
    g: _Groups,
    like: Tensor,
    *,
    add: Tensor | float | None = None,
    mul: Tensor | float | None = None,
) -> Tensor:
    """``(values + add)·mul``, ``values: [B, S]`` per slot and ``add``, ``mul`` per group, as
    ``[B, G]`` per sample in original order, cast like ``like``. The last operation writes the
    output dtype directly (one rounding, no separate cast pass)."""
    if add is not None:
        values = values + add
    out = torch.empty(values.shape, dtype=like.dtype, device=like.device)
    if mul is None:
        out.copy_(values)
    else:
        torch.mul(values, mul, out=out)
    if g.levels is not None:
        return _levels.expand(out, g.levels, g.n)
    assert g.perm is not None
    return torch.empty_like(out).scatter_(-1, g.perm, out)


def _sample_sum(values: Tensor, g: _Groups) -> Tensor:
    """``[B, S]`` → ``[B, 1]``: the sum over the group's samples (a level counts its samples)."""
    if g.levels is None:
        return values.sum(dim=-1, keepdim=True)
    end = g.levels.end
    count = torch.diff(end, dim=-1, prepend=torch.zeros_like(end[:, :1]))  # [B, L]
    return (values * count).sum(dim=-1, keepdim=True)


class _Coefs(NamedTuple):
    """One form of ``spec.maxk_weights.FORMS`` as float64 tables over positions q = 1..G."""

    diag: Tensor  # [G]: own − below
    step: Tensor  # [G]: below − above
    above: Tensor  # [G]
    has_above: bool  # False: the Σ above·x term is identically 0 and skipped
    # The counting path's table, column j = 0..G: (diag_j (0 at j = 0), Σ_{q<=j} step_q,
    # Σ_{q<=j} above_q): one gather at the levels' block ends gives all three.
    at_end: Tensor  # [3, G + 1]


@functools.lru_cache(maxsize=512)
def _coefficients_cached(form: str, G: int, K: int, device: torch.device) -> _Coefs:
    """The form's weights by log-gamma (see fast._weights), combined once per (G, K) by the
    shared ``spec.maxk_weights.form_rows`` (the proofs combine the same table the same way)."""
    table = weights(G, K, device)._asdict()
    diag, step, above = form_rows(FORMS[form], G, K, lambda w: table[WEIGHT_NAMES[w]], float)
    at_end = torch.stack([diag, step.cumsum(0), above.cumsum(0)])  # [3, G]
    at_end = torch.cat([torch.zeros_like(at_end[:, :1]), at_end], dim=1)  # [3, G + 1]
    return _Coefs(diag, step, above, bool(FORMS[form][2]), at_end)


@torch.compiler.disable  # type: ignore[untyped-decorator]
def _coefficients(form: str, G: int, K: int, device: torch.device) -> _Coefs:
    return _coefficients_cached(form, G, K, device)


def _evaluate(g: _Groups, form: str) -> Tensor:
    """The form at every slot, ``[B, S]``:

        sorted position p:  (own − below)_p x_p + Σ_{q<=p} (below − above)_q x_q + Σ_q above_q x_q;
        level l (samples at positions s_l + 1..e_l):  the same at p = e_l, where the sums over a
        level's block are one difference of the cumulated tables times the level's value.

    Tied samples get the same value at any position of their block (the definitions are
    permutation-invariant), so the level's last position stands for all of them. The running
    sums stay within a small multiple of max|x| (x <= 0 after the shift; the weights are
    probabilities: Σ_{q<p} γ_q = α_p <= 1, β and μhi each total 1, Σ_{q<p} μlo_q <= 1 for p < G,
    and the top position, which carries the large μlo_G, has x = 0), so rounding costs a few
    ulps of G·max|x| at worst, far inside the 1e-9 contract.
    """
    c = _coefficients(form, g.n, g.k, g.x.device)
    x = g.x
    if g.levels is None:  # the one evaluation the proofs check (spec.maxk_weights.evaluate)
        out: Tensor = evaluate(
            c.diag[None], c.step[None], c.above[:, None], x, lambda v: torch.cumsum(v, dim=-1)
        )[..., 0, :]  # [B, 1, G] -> [B, G]
        return out
    end = g.levels.end  # [B, L]
    table = c.at_end[:, torch.cat([torch.zeros_like(end[:, :1]), end], dim=1)]  # [3, B, L + 1]
    # A level's block sums: the cumulated tables at its end minus at the previous level's end.
    out = table[0, :, 1:] * x + torch.cumsum((table[1, :, 1:] - table[1, :, :-1]) * x, dim=-1)
    if c.has_above:
        out = out + ((table[2, :, 1:] - table[2, :, :-1]) * x).sum(dim=-1, keepdim=True)
    return out


def _k1_shift(g: _Groups) -> Tensor | None:
    """EI and b move with a reward shift only at K = 1 (max(∅) = 0 makes EI = r there)."""
    return g.shift if g.k == 1 else None


def _keep(g: _Groups) -> Tensor:
    """``[B, 1]`` float64: 0 where fewer than K samples lie strictly below the group max (Δ ≡ 0
    there), else 1; multiplying by it writes exact zeros (a [B, G] ``torch.where`` costs ~20×
    more on CPU). Decided on the rewards: on a sorted row the K-th smallest equals the max; on
    levels, the samples below the max are those up to the last level below it."""
    if g.levels is None:
        below = g.x[:, g.k - 1 : g.k] < 0
    else:
        below_max = torch.where(g.x < 0, g.levels.end, 0).amax(dim=-1, keepdim=True)
        below = below_max >= g.k
    return below.to(torch.float64)
