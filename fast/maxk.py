"""max@K / pass@K advantage estimators, batched: a counting path for few-valued rewards, and
O(G log G) per group with one stable sort otherwise.

Notation: ``rewards: [B, G]`` (B prompts, G samples each; the papers' N is G), comparator size K.
Every estimator returns ``[B, G]`` in the input's dtype and device, in the original sample order.

Algorithm (spec/maxk.md §Algorithm): sort each group once (stable) and subtract the group
maximum: every block moves by a known amount, so this is exact in real arithmetic, removes offset
cancellation, and keeps the gaps to the top values (what the blocks are made of) exact even when a
distant minimum would round them together. Each estimator is then one linear form of
``spec.maxk_weights.FORMS`` (weights in float64 from log-gamma, cached per (G, K)), evaluated with
one cumsum (and, where the form has one, a matrix-vector product), and scattered back. The whole
computation runs in float64; the output is cast back.

Counting path (spec/maxk_paths.md §Counting path): when every group of the call has at most
``MAX_LEVELS`` distinct rewards (binary pass/fail, partial credit), nothing is sorted: the levels
and their counts (``fast._levels``) give each level's sorted block, and the same forms are
evaluated once per level, at the block's last position, from cumulated weight tables; the value
is then given to every sample of the level. ``forced_path`` pins either path (tests run every
check on both).

Groups where fewer than K samples lie strictly below the maximum have Δ ≡ 0 exactly; the
estimators built on Δ write exact zeros there, decided on the rewards, never on a float std.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Literal, NamedTuple

import torch
from torch import Tensor

from advest.spec.conventions import PasskConvention, check_passk_convention
from advest.spec.maxk_weights import (
    CHEN_FAIL_ALL,
    CHEN_FAIL_REST,
    FORMS,
    chen_raw,
    evaluate,
    form_rows,
)

from . import _levels
from ._checks import check_ddof, check_k, check_rewards, refuse_where
from ._weights import WEIGHT_NAMES, ratio_at, weights
from .registry import register

__all__ = [
    "bagirov_centered",
    "bagirov_transform",
    "bagirov_zscore",
    "canonical",
    "chen_passk",
    "ei",
    "ei_l1o",
    "l2o_baseline",
    "maxpo",
    "pkpo_s",
    "pkpo_sloo",
    "pkpo_sloo_minus_one",
    "tang_passk",
]


Path = Literal["auto", "sorted", "counts"]
PATHS: tuple[Path, ...] = ("auto", "sorted", "counts")
MAX_LEVELS = 8
"""``auto`` takes the counting path when every group of the call has at most
``min(MAX_LEVELS, G // 8)`` distinct rewards (spec/maxk_paths.md §Counting path). Each level costs
about four passes over ``[B, G]`` and the path has a fixed cost in small ops; one sort costs
about as much as 15–25 passes at G = 64 on CPU, but only a few at G = 8, where sorting wins."""


def max_levels(G: int) -> int:
    """The most distinct rewards per group for which ``auto`` counts instead of sorting."""
    return min(MAX_LEVELS, G // 8)


_PATH: ContextVar[Path] = ContextVar("advest.fast.maxk.path", default="auto")


@contextlib.contextmanager
def forced_path(path: Path) -> Iterator[None]:
    """Run every max@K estimator of this module on one path inside the block: ``"sorted"`` (one
    sort per group), ``"counts"`` (counts per distinct reward, any number of levels) or
    ``"auto"`` (the default: counts when every group has at most ``max_levels(G)`` levels).
    Both paths meet the same contract; the tests run every check on each, forced. Forced
    counts still sorts float64 rewards beyond ±4.5e307 (``fast._levels.find``)."""
    if path not in PATHS:
        raise ValueError(f"path must be one of {PATHS}; got {path!r}")
    token = _PATH.set(path)
    try:
        yield
    finally:
        _PATH.reset(token)


def path_for(rewards: Tensor) -> Literal["sorted", "counts"]:
    """The path the max@K estimators take on ``rewards: [B, G]`` here (forced or decided)."""
    path = _PATH.get()
    if path == "sorted":
        return "sorted"
    return "sorted" if _find_levels(rewards, path) is None else "counts"


class _Groups(NamedTuple):
    """The groups as S ascending slots: S = G sorted positions, or L distinct levels."""

    x: Tensor  # [B, S] float64: slot value minus the group maximum (all <= 0)
    shift: Tensor  # [B, 1] float64: the group maximum
    k: int
    n: int  # G
    perm: Tensor | None  # sorted path: [B, G] int64, sorted position -> original index
    levels: _levels.Levels | None  # counting path


def _prepare(rewards: Tensor, k: object, name: str, *, k_max_offset: int) -> _Groups:
    check_rewards(rewards)
    G = rewards.shape[1]
    kk = check_k(k, G, name, k_max=G - k_max_offset)
    path = _PATH.get()
    levels = _find_levels(rewards, path) if path != "sorted" else None
    if levels is not None:
        x = levels.values.to(torch.float64)  # [B, L]
        shift = x[:, -1:]
        return _Groups(x - shift, shift, kk, G, None, levels)
    rs, perm = _sort(rewards)
    shift = rs[:, -1:].to(torch.float64)  # [B, 1]
    return _Groups(torch.sub(rs, shift), shift, kk, G, perm, None)  # float64 by promotion


def _find_levels(rewards: Tensor, path: Path) -> _levels.Levels | None:
    if path == "counts":
        return _levels.find(rewards, None)
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


@register("ei", "maxk", needs_k=True, k_range="k<=n")
def ei(rewards: Tensor, k: int) -> Tensor:
    """Expected improvement EI (MaxPO Eq. 5); r at K = 1. rewards: [B, G] -> [B, G]; 1 <= K <= G."""
    g = _prepare(rewards, k, "ei", k_max_offset=0)
    return _expand(_evaluate(g, "ei"), g, rewards, add=_k1_shift(g))


@register("l2o_baseline", "maxk", needs_k=True, k_range="k<=n-1")
def l2o_baseline(rewards: Tensor, k: int) -> Tensor:
    """Leave-two-out baseline b = M⁻ − C (MaxPO Eq. 6). rewards: [B, G]; 1 <= K <= G−1."""
    g = _prepare(rewards, k, "l2o_baseline", k_max_offset=1)
    return _expand(_evaluate(g, "b"), g, rewards, add=_k1_shift(g))


@register("maxpo", "maxk", needs_k=True, k_range="k<=n-1")
def maxpo(rewards: Tensor, k: int) -> Tensor:
    """MaxPO advantage EI − b (MaxPO Eq. 7), computed as EI and b. rewards: [B, G]; K <= G−1."""
    g = _prepare(rewards, k, "maxpo", k_max_offset=1)
    return _expand(_evaluate(g, "ei_minus_b"), g, rewards, mul=_keep(g))


@register("canonical", "maxk", needs_k=True, k_range="k<=n-1")
def canonical(rewards: Tensor, k: int) -> Tensor:
    """Canonical centred advantage Δ = M⁺ − M⁻ (MaxPO Eq. 8). rewards: [B, G]; K <= G−1."""
    g = _prepare(rewards, k, "canonical", k_max_offset=1)
    return _expand(_evaluate(g, "delta"), g, rewards, mul=_keep(g))


@register("ei_l1o", "maxk", needs_k=True, k_range="k<=n")
def ei_l1o(rewards: Tensor, k: int) -> Tensor:
    """EI − mean of the others' full-batch EI = G/(G−1)(EI − mean EI); biased for K >= 2.

    rewards: [B, G] with G >= 2; 1 <= K <= G.
    """
    g = _prepare(rewards, k, "ei_l1o", k_max_offset=0)
    G = rewards.shape[1]
    if G < 2:
        raise ValueError(f"ei_l1o needs N >= 2; got K={k}, N={G}")
    e = _evaluate(g, "ei")
    return _expand(e, g, rewards, add=-_sample_sum(e, g) / G, mul=G / (G - 1))


@register("tang_passk", "maxk", needs_k=False, k_range="k=n")
def tang_passk(rewards: Tensor) -> Tensor:
    """Tang et al.: EI at K = G, i.e. r_max − r_second on a unique arg-max, 0 elsewhere.

    rewards: [B, G] -> [B, G]; G = 1 gives r. No sort: the max, its count and the runner-up.
    """
    check_rewards(rewards)
    if rewards.shape[1] == 1:
        return rewards.clone()
    r = rewards.to(_levels.work_dtype(rewards.dtype))
    top = r.amax(dim=-1, keepdim=True)  # [B, 1]
    at_top = torch.eq(r, top, out=torch.empty_like(r))  # [B, G]: 1.0 on the max, else 0.0
    # The max's samples become the minimum (an exact blend), so the next max is the runner-up.
    lo = r.amin(dim=-1, keepdim=True)
    second = torch.addcmul(lo * at_top, r, 1 - at_top).amax(dim=-1, keepdim=True)
    unique = at_top.sum(dim=-1, keepdim=True) == 1  # [B, 1]
    gap = torch.where(unique, top.to(torch.float64) - second.to(torch.float64), 0.0)
    return (at_top * gap.to(rewards.dtype).to(r.dtype)).to(rewards.dtype)


@register("pkpo_s", "maxk", needs_k=True, k_range="k<=n")
def pkpo_s(rewards: Tensor, k: int) -> Tensor:
    """PKPO s = (K/G)·M⁺ (PKPO Eqs. 19-21). rewards: [B, G]; 1 <= K <= G."""
    g = _prepare(rewards, k, "pkpo_s", k_max_offset=0)
    return _expand(_evaluate(g, "m_plus"), g, rewards, add=g.shift, mul=g.k / g.n)


@register("pkpo_sloo", "maxk", needs_k=True, k_range="k<=n-1")
def pkpo_sloo(rewards: Tensor, k: int) -> Tensor:
    """PKPO sloo = (K/G)M⁺ − (K/(G−1))M⁻ (PKPO Eq. 29). rewards: [B, G]; 1 <= K <= G−1."""
    g = _prepare(rewards, k, "pkpo_sloo", k_max_offset=1)
    G, K = g.n, g.k
    # M⁺ and M⁻ both move with the shift; their weights K/G and K/(G−1) differ, hence the last term.
    return _expand(_evaluate(g, "sloo"), g, rewards, add=(K / G - K / (G - 1)) * g.shift)


@register("pkpo_sloo_minus_one", "maxk", needs_k=True, k_range="k<=n")
def pkpo_sloo_minus_one(rewards: Tensor, k: int) -> Tensor:
    """PKPO Eq. 33 = (K/G)·EI; r/G at K = 1. rewards: [B, G]; 1 <= K <= G."""
    g = _prepare(rewards, k, "pkpo_sloo_minus_one", k_max_offset=0)
    return _expand(_evaluate(g, "ei"), g, rewards, add=_k1_shift(g), mul=g.k / g.n)


PASSK_TRAINING_EPS = 1e-6
"""RUCAIBox/Passk_Training code/passk_adv.py (commit 00474d7): A/(σ + 1e-6)."""


@register("chen_passk", "maxk", needs_k=True, k_range="k<=n-1")
def chen_passk(
    rewards: Tensor, k: int, *, normalize: bool = True, convention: PasskConvention = "advest"
) -> Tensor:
    """Chen et al.'s analytical pass@K advantage; binary rewards. rewards: [B, G]; K <= G−1.

    1 − R̄ = C(N_neg, K)/C(G, K); correct: 1 − R̄; incorrect: 1 − R̄ − C(N_neg−1, K−1)/C(G−1, K−1).
    ``normalize`` divides by sqrt(R̄(1 − R̄)) without ε; exact zeros when R̄ ∈ {0, 1} (on counts).
    ``convention="passk_training@00474d7"`` divides by σ + 1e-6, as the paper's code does
    (RUCAIBox/Passk_Training, code/passk_adv.py at commit 00474d7); needs ``normalize``.
    Counting only: two values per group, blended back exactly by the 0/1 rewards themselves; the
    two ratios and the raw form are the ones the proofs use (``spec.maxk_weights``).
    """
    check_passk_convention(convention, normalize)
    eps = PASSK_TRAINING_EPS if convention != "advest" else 0.0
    check_rewards(rewards)
    G = rewards.shape[1]
    K = check_k(k, G, "chen_passk", k_max=G - 1)
    r = rewards.to(_levels.work_dtype(rewards.dtype))
    # r(1 − r) is 0 exactly for r ∈ {0, 1} and never rounds to 0 otherwise (one factor is >= 1/2
    # in magnitude or the other is exact by Sterbenz), so one arithmetic pass screens the batch.
    if bool((r * (1 - r)).any()):
        not_binary = (rewards != 0) & (rewards != 1)
        refuse_where(not_binary, rewards, "chen_passk needs binary rewards (exactly 0 or 1)")
    n_neg = G - r.sum(dim=-1, keepdim=True).to(torch.float64)  # [B, 1]; exact counts
    fail_all = ratio_at(CHEN_FAIL_ALL, n_neg, G, K)  # 1 − R̄
    fail_rest = ratio_at(CHEN_FAIL_REST, n_neg, G, K)
    correct, incorrect = chen_raw(1.0, fail_all, fail_rest), chen_raw(0.0, fail_all, fail_rest)
    if normalize:
        degenerate = (n_neg < K) | (n_neg == G)  # R̄ = 1 or R̄ = 0
        # (the paper code's σ + ε is ε at R̄ ∈ {0, 1}, where its numerators are exactly 0 too)
        sigma = torch.where(degenerate, 1.0, torch.sqrt(fail_all * (1 - fail_all)) + eps)
        keep = (~degenerate).to(torch.float64)
        correct, incorrect = correct / sigma * keep, incorrect / sigma * keep
    a_correct, a_incorrect = (v.to(rewards.dtype).to(r.dtype) for v in (correct, incorrect))
    return torch.addcmul(a_incorrect * (1 - r), a_correct, r).to(rewards.dtype)


@register("bagirov_transform", "maxk", needs_k=True, k_range="k<=n")
def bagirov_transform(rewards: Tensor, k: int) -> Tensor:
    """Bagirov Eq. 9 all-subsets transform (sorted weights C(q−1, K−1), C(q−2, K−2) over
    C(G, K)), = (K/G)·M⁺ = PKPO's s (I6). rewards: [B, G]; 1 <= K <= G."""
    g = _prepare(rewards, k, "bagirov_transform", k_max_offset=0)
    # Eq. 9's own sorted weights (they total K/G, so the shift comes back scaled by K/G)
    return _expand(_evaluate(g, "bagirov"), g, rewards, add=g.k / g.n * g.shift)


@register("bagirov_centered", "maxk", needs_k=True, k_range="k<=n-1")
def bagirov_centered(rewards: Tensor, k: int) -> Tensor:
    """Mean-centred Bagirov transform = K(G−K)/G²·Δ. rewards: [B, G]; 1 <= K <= G−1."""
    g = _prepare(rewards, k, "bagirov_centered", k_max_offset=1)
    return _expand(_evaluate(g, "delta"), g, rewards, mul=g.k * (g.n - g.k) / g.n**2 * _keep(g))


@register("bagirov_zscore", "maxk", needs_k=True, k_range="k<=n-1")
def bagirov_zscore(rewards: Tensor, k: int, *, ddof: int = 1) -> Tensor:
    """Bagirov "BoN mean": Δ/std_ddof(Δ), no ε; exact zeros on flat groups. K <= G−1."""
    d = check_ddof(ddof, "bagirov_zscore")
    g = _prepare(rewards, k, "bagirov_zscore", k_max_offset=1)
    delta = _evaluate(g, "delta")  # [B, S]
    # z is scale-free: dividing by max|Δ| first keeps the squares from under- or overflowing.
    # Σ Δ = 0 exactly (I4), so the std needs no mean pass: std_ddof = ||Δ|| / sqrt(G − ddof).
    # Flat groups get top = 0 and a zero multiplier, and so does a non-flat group whose Δ
    # underflowed to 0 in float64: exact zeros, no 0/0. (A padded level repeats the top level's
    # value, so max|Δ| over slots is max|Δ| over samples.)
    top = delta.abs().amax(dim=-1, keepdim=True) * _keep(g)  # [B, 1]
    flat = top == 0
    unit = delta / torch.where(flat, 1.0, top)
    std = torch.sqrt(_sample_sum(unit * unit, g)) / (g.n - d) ** 0.5
    return _expand(unit, g, rewards, mul=torch.where(flat, 0.0, 1 / std))
