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
computation runs in float64; the output is cast back. On CPU the groups go by chunks, each
chunk's intermediates in per-thread scratch buffers (``fast._scratch``): a call allocates only
its output at the batch's size, so its cost does not hang on the allocator's state.

Counting path (spec/maxk_paths.md §Counting path): when every group of the call has at most
``MAX_LEVELS`` distinct rewards (binary pass/fail, partial credit), nothing is sorted: the levels
and their counts (``fast._levels``) give each level's sorted block, and the same forms are
evaluated once per level, at the block's last position, from cumulated weight tables; the value
is then given to every sample of the level. ``path_for`` says which path a batch takes (the
tests force each in turn and run every check on both: tests/maxk_paths.py).

Groups where fewer than K samples lie strictly below the maximum have Δ ≡ 0 exactly; the
estimators built on Δ write exact zeros there, decided on the rewards, never on a float std.
"""

from __future__ import annotations

from dataclasses import replace

import torch
from torch import Tensor

from advest.spec import bounds, scales
from advest.spec.claims import FLAT, IRRATIONAL, Claims, Variant
from advest.spec.conventions import PasskConvention, check_passk_convention
from advest.spec.maxk_weights import (
    CHEN_FAIL_ALL,
    CHEN_FAIL_REST,
    chen_raw,
)
from advest.spec.tolerances import SHIFT_BACK, SHIFTED, ZSCORE, pair

from . import _levels
from ._checks import check_ddof, check_k, check_rewards, refuse_where
from ._maxk_core import MAX_LEVELS as MAX_LEVELS  # the paths' switches, public here
from ._maxk_core import (
    Out,
    _entry,
    _evaluate,
    _Groups,
    _k1_shift,
    _keep,
    _max_abs,
    _sample_sum,
    _sample_sum_of_squares,
    estimate,
)
from ._maxk_core import max_levels as max_levels
from ._maxk_core import path_for as path_for
from ._weights import ratio_at
from .registry import defined_in, register

SORTS = "B·G log G"
"""The cost of an estimator on the sorted path: one stable sort per group (general rewards; the
counting path of few levels is O(B·G))."""


@register(
    k_range="k<=n",
    cost=SORTS,
    tolerance=pair("group", SHIFT_BACK + " (K = 1: EI = r)"),
    claims=Claims(
        pg_scale=scales.n_over_k, shift=scales.only_at_k1(scales.one), magnitude=bounds.unit
    ),
)
def ei(rewards: Tensor, k: int) -> Tensor:
    """Expected improvement EI (MaxPO Eq. 5); r at K = 1. rewards: [B, G] -> [B, G]; 1 <= K <= G."""
    return estimate(rewards, k, "ei", lambda g: Out(_evaluate(g, "ei"), add=_k1_shift(g)))


@register(
    k_range="k<=n-1",
    cost=SORTS,
    tolerance=pair("group", SHIFT_BACK + " (K = 1: b = mean of the others)"),
    claims=Claims(shift=scales.only_at_k1(scales.one), monotone=False, magnitude=bounds.unit),
)
def l2o_baseline(rewards: Tensor, k: int) -> Tensor:
    """Leave-two-out baseline b = M⁻ − C (MaxPO Eq. 6). rewards: [B, G]; 1 <= K <= G−1."""
    return estimate(rewards, k, "l2o_baseline", lambda g: Out(_evaluate(g, "b"), _k1_shift(g)))


@register(
    k_range="k<=n-1",
    cost=SORTS,
    tolerance=pair("group", SHIFTED + " (form ei_minus_b; exact zeros on flat groups)"),
    claims=Claims(pg_scale=scales.n_over_k, magnitude=bounds.unit, **FLAT),
)
def maxpo(rewards: Tensor, k: int) -> Tensor:
    """MaxPO advantage EI − b (MaxPO Eq. 7), computed as EI and b. rewards: [B, G]; K <= G−1."""
    return estimate(rewards, k, "maxpo", lambda g: Out(_evaluate(g, "ei_minus_b"), mul=_keep(g)))


@register(
    k_range="k<=n-1",
    cost=SORTS,
    tolerance=pair("group", SHIFTED + " (form delta; exact zeros on flat groups)"),
    claims=Claims(pg_scale=scales.n_over_k, magnitude=bounds.unit, **FLAT),
)
def canonical(rewards: Tensor, k: int) -> Tensor:
    """Canonical centred advantage Δ = M⁺ − M⁻ (MaxPO Eq. 8). rewards: [B, G]; K <= G−1."""
    return estimate(rewards, k, "canonical", lambda g: Out(_evaluate(g, "delta"), mul=_keep(g)))


@register(
    k_range="k<=n",
    cost=SORTS,
    tolerance=pair("group", SHIFTED + "; the mean of EI is over G terms of size <= spread"),
    claims=Claims(min_n=2, centred=True, comparison_scale=scales.n_over_k, magnitude=bounds.unit),
)
def ei_l1o(rewards: Tensor, k: int) -> Tensor:
    """EI − mean of the others' full-batch EI = G/(G−1)(EI − mean EI); biased for K >= 2.

    rewards: [B, G] with G >= 2; 1 <= K <= G.
    """

    def body(g: _Groups) -> Out:
        e = _evaluate(g, "ei")
        return Out(e, add=-_sample_sum(e, g) / g.n, mul=g.n / (g.n - 1))

    return estimate(rewards, k, "ei_l1o", body, min_n=2)


@register(
    k_range="k=n",
    tolerance=pair("group", "top-2 gap of float64 values: exact; G = 1 returns r"),
    claims=Claims(pg_scale=scales.one, shift=scales.only_at_n1, magnitude=bounds.unit),
)
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


@register(
    k_range="k<=n",
    cost=SORTS,
    tolerance=pair("group", SHIFT_BACK + " ((K/G)·shift)"),
    claims=Claims(pg_scale=scales.one, shift=scales.k_over_n, magnitude=bounds.unit),
)
def pkpo_s(rewards: Tensor, k: int) -> Tensor:
    """PKPO s = (K/G)·M⁺ (PKPO Eqs. 19-21). rewards: [B, G]; 1 <= K <= G."""
    return estimate(rewards, k, "pkpo_s", lambda g: Out(_evaluate(g, "m_plus"), g.shift, g.k / g.n))


@register(
    k_range="k<=n-1",
    cost=SORTS,
    tolerance=pair("group", SHIFT_BACK + " ((K/G − K/(G−1))·shift)"),
    claims=Claims(
        pg_scale=scales.one, shift=scales.minus_k_over_n_n_minus_1, magnitude=bounds.unit
    ),
)
def pkpo_sloo(rewards: Tensor, k: int) -> Tensor:
    """PKPO sloo = (K/G)M⁺ − (K/(G−1))M⁻ (PKPO Eq. 29). rewards: [B, G]; 1 <= K <= G−1."""

    def body(g: _Groups) -> Out:
        G, K = g.n, g.k
        # M⁺ and M⁻ both move with the shift; their weights K/G, K/(G−1) differ: the last term
        return Out(_evaluate(g, "sloo"), add=(K / G - K / (G - 1)) * g.shift)

    return estimate(rewards, k, "pkpo_sloo", body)


@register(
    k_range="k<=n",
    cost=SORTS,
    tolerance=pair("group", SHIFT_BACK + " (K = 1 only: shift/G)"),
    claims=Claims(
        pg_scale=scales.one, shift=scales.only_at_k1(scales.k_over_n), magnitude=bounds.unit
    ),
)
def pkpo_sloo_minus_one(rewards: Tensor, k: int) -> Tensor:
    """PKPO Eq. 33 = (K/G)·EI; r/G at K = 1. rewards: [B, G]; 1 <= K <= G."""
    return estimate(
        rewards,
        k,
        "pkpo_sloo_minus_one",
        lambda g: Out(_evaluate(g, "ei"), _k1_shift(g), g.k / g.n),
    )


PASSK_TRAINING_EPS = 1e-6
"""RUCAIBox/Passk_Training code/passk_adv.py (commit 00474d7): A/(σ + 1e-6)."""


_CHEN = Claims(
    binary_only=True,
    shift=None,
    scale_power=None,
    magnitude=bounds.standardised_ddof0,
    **IRRATIONAL,
)
"""Chen's pass@K advantage (0/1 rewards only): normalised by the group's std; the raw form
(``normalize=False``) is unbiased for (N − K)/K · ∇pass@K."""


@register(
    k_range="k<=n-1",
    tolerance=pair(
        "group", "binary rewards: lgamma ratios of counts, ~|lgamma|·ε relative to |A| (<= 1)"
    ),
    claims=_CHEN,
    variants=(
        Variant(
            {"normalize": False}, replace(_CHEN, pg_scale=scales.n_minus_k_over_k, rational=True)
        ),
        Variant({"convention": "passk_training@00474d7"}, _CHEN),
    ),
)
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
    K = check_k(k, G, "chen_passk", k_max=_entry("chen_passk").k_max(G))
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


@register(
    k_range="k<=n",
    cost=SORTS,
    tolerance=pair("group", SHIFT_BACK + " ((K/G)·shift)"),
    claims=Claims(pg_scale=scales.one, shift=scales.k_over_n, magnitude=bounds.unit),
)
def bagirov_transform(rewards: Tensor, k: int) -> Tensor:
    """Bagirov Eq. 9 all-subsets transform (sorted weights C(q−1, K−1), C(q−2, K−2) over
    C(G, K)), = (K/G)·M⁺ = PKPO's s (I6). rewards: [B, G]; 1 <= K <= G."""
    # Eq. 9's own sorted weights (they total K/G, so the shift comes back scaled by K/G)
    return estimate(
        rewards, k, "bagirov_transform", lambda g: Out(_evaluate(g, "bagirov"), g.k / g.n * g.shift)
    )


@register(
    k_range="k<=n-1",
    cost=SORTS,
    tolerance=pair("group", SHIFTED + "; times K(G−K)/G² (<= 1/4)"),
    claims=Claims(pg_scale=scales.n_minus_k_over_n, magnitude=bounds.unit, **FLAT),
)
def bagirov_centered(rewards: Tensor, k: int) -> Tensor:
    """Mean-centred Bagirov transform = K(G−K)/G²·Δ. rewards: [B, G]; 1 <= K <= G−1."""

    def body(g: _Groups) -> Out:
        return Out(_evaluate(g, "delta"), mul=g.k * (g.n - g.k) / g.n**2 * _keep(g))

    return estimate(rewards, k, "bagirov_centered", body)


@register(
    k_range="k<=n-1",
    cost=SORTS,
    tolerance=pair("group", ZSCORE),
    claims=Claims(scale_power=0, magnitude=bounds.standardised, **IRRATIONAL),
    variants=(
        Variant(
            {"ddof": 0}, Claims(scale_power=0, magnitude=bounds.standardised_ddof0, **IRRATIONAL)
        ),
    ),
)
def bagirov_zscore(rewards: Tensor, k: int, *, ddof: int = 1) -> Tensor:
    """Bagirov "BoN mean": Δ/std_ddof(Δ), no ε; exact zeros on flat groups. K <= G−1."""
    d = check_ddof(ddof, "bagirov_zscore")

    def body(g: _Groups) -> Out:
        delta = _evaluate(g, "delta")  # [R, S]
        # z is scale-free: dividing by max|Δ| first keeps the squares from under- or overflowing.
        # Σ Δ = 0 exactly (I4), so the std needs no mean pass: std_ddof = ||Δ|| / sqrt(G − ddof).
        # Flat groups get top = 0 and a zero multiplier, and so does a non-flat group whose Δ
        # underflowed to 0 in float64: exact zeros, no 0/0. (A padded level repeats the top
        # level's value, so max|Δ| over slots is max|Δ| over samples.)
        top = _max_abs(delta) * _keep(g)  # [R, 1]
        flat = top == 0
        unit = delta.div_(torch.where(flat, 1.0, top))  # delta is this body's own temporary
        std = torch.sqrt(_sample_sum_of_squares(unit, g)) / (g.n - d) ** 0.5
        return Out(unit, mul=torch.where(flat, 0.0, 1 / std))

    return estimate(rewards, k, "bagirov_zscore", body)


__all__ = defined_in(__name__)  # every estimator registered above
