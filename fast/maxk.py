"""max@K / pass@K advantage estimators, batched: O(G log G) per group, one stable sort.

Notation: ``rewards: [B, G]`` (B prompts, G samples each; the papers' N is G), comparator size K.
Every estimator returns ``[B, G]`` in the input's dtype and device, in the original sample order.

Algorithm (spec/maxk.md §Algorithm): sort each group once (stable) and subtract the group
maximum: every block moves by a known amount, so this is exact in real arithmetic, removes offset
cancellation, and keeps the gaps to the top values (what the blocks are made of) exact even when a
distant minimum would round them together. Each estimator is then one linear form of
``spec.maxk_weights.FORMS`` (weights in float64 from log-gamma, cached per (G, K)), evaluated with
one cumsum and one matrix-vector product, and scattered back. The whole computation runs in
float64; the output is cast back.

Groups where fewer than K samples lie strictly below the maximum have Δ ≡ 0 exactly; the
estimators built on Δ write exact zeros there, decided on the rewards, never on a float std.
"""

from __future__ import annotations

import functools
from typing import Literal, NamedTuple

import torch
from torch import Tensor

from advest.fast._checks import check_ddof, check_k, check_rewards
from advest.fast._weights import WEIGHT_NAMES, ratio_at, weights
from advest.fast.registry import register
from advest.spec.maxk_weights import (
    CHEN_FAIL_ALL,
    CHEN_FAIL_REST,
    FORMS,
    chen_raw,
    evaluate,
    form_rows,
)

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


class _Sorted(NamedTuple):
    x: Tensor  # [B, G] float64: sorted rewards minus the group maximum (all <= 0)
    perm: Tensor  # [B, G] int64: sorted position -> original index
    shift: Tensor  # [B, 1] float64: the group maximum
    k: int


def _sort(rewards: Tensor, k: object, name: str, *, k_max_offset: int) -> _Sorted:
    check_rewards(rewards)
    G = rewards.shape[1]
    kk = check_k(k, G, name, k_max=G - k_max_offset)
    rs, perm = torch.sort(rewards, dim=-1, stable=True)  # [B, G]; widening keeps the order
    rs = rs.to(torch.float64)
    shift = rs[:, -1:]  # [B, 1]
    return _Sorted(rs - shift, perm, shift, kk)


def _unsort(values: Tensor, s: _Sorted, like: Tensor) -> Tensor:
    """Scatter ``values: [B, G]`` from sorted back to original order, cast like ``like``."""
    return torch.empty_like(values).scatter_(-1, s.perm, values).to(like.dtype)


@functools.lru_cache(maxsize=512)
def _coefficients_cached(
    forms: tuple[str, ...], G: int, K: int, device: torch.device
) -> tuple[Tensor, Tensor, Tensor]:
    """The forms of ``spec.maxk_weights.FORMS`` as float64 ``[S, G]``, ``[S, G]``, ``[G, S]``:
    own − below, below − above, above (weights by log-gamma, see fast._weights)."""
    table = weights(G, K, device)._asdict()
    rows = [form_rows(FORMS[f], G, K, lambda w: table[WEIGHT_NAMES[w]], float) for f in forms]
    diag, step, above = (torch.stack([r[i] for r in rows]) for i in range(3))
    return diag, step, above.T.contiguous()


@torch.compiler.disable  # type: ignore[untyped-decorator]
def _coefficients(
    forms: tuple[str, ...], G: int, K: int, device: torch.device
) -> tuple[Tensor, Tensor, Tensor]:
    return _coefficients_cached(forms, G, K, device)


def _evaluate(s: _Sorted, *forms: str) -> list[Tensor]:
    """Each form at every sorted position, ``[B, G]`` each, from one cumsum and one matmul:

        out = (own − below) ⊙ x + cumsum((below − above) ⊙ x) + Σ_q above_q x_q.

    The running sums stay within a small multiple of max|x| (x <= 0 after the shift; the weights
    are probabilities: Σ_{q<p} γ_q = α_p <= 1, β and μhi each total 1, Σ_{q<=p} μlo_q <= G/(G−K)),
    so rounding costs a few ulps of G·max|x| at worst, far inside the 1e-9 contract.
    """
    G = s.x.shape[1]
    diag, step, above = _coefficients(forms, G, s.k, s.x.device)
    out = evaluate(diag, step, above, s.x, lambda v: torch.cumsum(v, dim=-1))  # [B, S, G]
    return list(out.unbind(1))


def _k1_shift(s: _Sorted) -> Tensor | float:
    """EI and b move with a reward shift only at K = 1 (max(∅) = 0 makes EI = r there)."""
    return s.shift if s.k == 1 else 0.0


def _flat(s: _Sorted) -> Tensor:
    """``[B, 1]`` bool: fewer than K samples lie strictly below the group max, so Δ ≡ 0.

    On a sorted row that is: the K-th smallest value already equals the max.
    """
    return s.x[:, s.k - 1 : s.k] == s.x[:, -1:]


def _delta(s: _Sorted) -> Tensor:
    """Δ = M⁺ − M⁻ on sorted positions, with exact zeros on flat groups."""
    (delta,) = _evaluate(s, "delta")
    return torch.where(_flat(s), 0.0, delta)


@register("ei", "maxk", needs_k=True, k_range="k<=n")
def ei(rewards: Tensor, k: int) -> Tensor:
    """Expected improvement EI (MaxPO Eq. 5); r at K = 1. rewards: [B, G] -> [B, G]; 1 <= K <= G."""
    s = _sort(rewards, k, "ei", k_max_offset=0)
    (e,) = _evaluate(s, "ei")
    return _unsort(e + _k1_shift(s), s, rewards)


@register("l2o_baseline", "maxk", needs_k=True, k_range="k<=n-1")
def l2o_baseline(rewards: Tensor, k: int) -> Tensor:
    """Leave-two-out baseline b = M⁻ − C (MaxPO Eq. 6). rewards: [B, G]; 1 <= K <= G−1."""
    s = _sort(rewards, k, "l2o_baseline", k_max_offset=1)
    (b,) = _evaluate(s, "b")
    return _unsort(b + _k1_shift(s), s, rewards)


@register("maxpo", "maxk", needs_k=True, k_range="k<=n-1")
def maxpo(rewards: Tensor, k: int) -> Tensor:
    """MaxPO advantage EI − b (MaxPO Eq. 7), computed as EI and b. rewards: [B, G]; K <= G−1."""
    s = _sort(rewards, k, "maxpo", k_max_offset=1)
    (ei_minus_b,) = _evaluate(s, "ei_minus_b")
    return _unsort(torch.where(_flat(s), 0.0, ei_minus_b), s, rewards)


@register("canonical", "maxk", needs_k=True, k_range="k<=n-1")
def canonical(rewards: Tensor, k: int) -> Tensor:
    """Canonical centred advantage Δ = M⁺ − M⁻ (MaxPO Eq. 8). rewards: [B, G]; K <= G−1."""
    s = _sort(rewards, k, "canonical", k_max_offset=1)
    return _unsort(_delta(s), s, rewards)


@register("ei_l1o", "maxk", needs_k=True, k_range="k<=n")
def ei_l1o(rewards: Tensor, k: int) -> Tensor:
    """EI − mean of the others' full-batch EI = G/(G−1)(EI − mean EI); biased for K >= 2.

    rewards: [B, G] with G >= 2; 1 <= K <= G.
    """
    s = _sort(rewards, k, "ei_l1o", k_max_offset=0)
    G = rewards.shape[1]
    if G < 2:
        raise ValueError(f"ei_l1o needs N >= 2; got K={k}, N={G}")
    (e,) = _evaluate(s, "ei")
    return _unsort(G / (G - 1) * (e - e.mean(dim=-1, keepdim=True)), s, rewards)


@register("tang_passk", "maxk", needs_k=False, k_range="k=n")
def tang_passk(rewards: Tensor) -> Tensor:
    """Tang et al.: EI at K = G, i.e. r_max − r_second on a unique arg-max, 0 elsewhere.

    rewards: [B, G] -> [B, G]; G = 1 gives r. No sort: one top-2 per group.
    """
    check_rewards(rewards)
    r = rewards.to(torch.float64)
    if r.shape[1] == 1:
        return rewards.clone()
    top, index = r.topk(2, dim=-1)  # [B, 2]
    gap = top[:, :1] - top[:, 1:]  # [B, 1]; 0 when the max is tied
    return torch.zeros_like(r).scatter_(-1, index[:, :1], gap).to(rewards.dtype)


@register("pkpo_s", "maxk", needs_k=True, k_range="k<=n")
def pkpo_s(rewards: Tensor, k: int) -> Tensor:
    """PKPO s = (K/G)·M⁺ (PKPO Eqs. 19-21). rewards: [B, G]; 1 <= K <= G."""
    s = _sort(rewards, k, "pkpo_s", k_max_offset=0)
    (m_plus,) = _evaluate(s, "m_plus")
    return _unsort(s.k / rewards.shape[1] * (m_plus + s.shift), s, rewards)


@register("pkpo_sloo", "maxk", needs_k=True, k_range="k<=n-1")
def pkpo_sloo(rewards: Tensor, k: int) -> Tensor:
    """PKPO sloo = (K/G)M⁺ − (K/(G−1))M⁻ (PKPO Eq. 29). rewards: [B, G]; 1 <= K <= G−1."""
    s = _sort(rewards, k, "pkpo_sloo", k_max_offset=1)
    G, K = rewards.shape[1], s.k
    (sloo,) = _evaluate(s, "sloo")
    # M⁺ and M⁻ both move with the shift; their weights K/G and K/(G−1) differ, hence the last term.
    value = sloo + (K / G - K / (G - 1)) * s.shift
    return _unsort(value, s, rewards)


@register("pkpo_sloo_minus_one", "maxk", needs_k=True, k_range="k<=n")
def pkpo_sloo_minus_one(rewards: Tensor, k: int) -> Tensor:
    """PKPO Eq. 33 = (K/G)·EI; r/G at K = 1. rewards: [B, G]; 1 <= K <= G."""
    s = _sort(rewards, k, "pkpo_sloo_minus_one", k_max_offset=0)
    (e,) = _evaluate(s, "ei")
    return _unsort(s.k / rewards.shape[1] * (e + _k1_shift(s)), s, rewards)


PasskConvention = Literal["advest", "passk_training@00474d7"]
"""``chen_passk``'s conventions: advest's (σ, no ε) or the paper code's (spec/maxk.md)."""

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
    """
    if convention not in ("advest", "passk_training@00474d7"):
        raise ValueError(
            "chen_passk needs convention in ('advest', 'passk_training@00474d7'); "
            f"got convention={convention!r}"
        )
    if convention != "advest" and not normalize:
        raise ValueError(f"chen_passk with convention={convention!r} always normalizes")
    eps = PASSK_TRAINING_EPS if convention != "advest" else 0.0
    check_rewards(rewards)
    G = rewards.shape[1]
    K = check_k(k, G, "chen_passk", k_max=G - 1)
    correct, incorrect = rewards == 1, rewards == 0
    not_binary = ~(correct | incorrect)
    if bool(not_binary.any()):
        group, sample = not_binary.nonzero()[0].tolist()
        raise ValueError(
            f"chen_passk needs binary rewards (exactly 0 or 1); group {group} has "
            f"{rewards[group, sample].item()} at sample {sample}"
        )
    n_neg = incorrect.sum(dim=-1, keepdim=True).to(torch.float64)  # [B, 1]
    fail_all = ratio_at(CHEN_FAIL_ALL, n_neg, G, K)  # 1 − R̄
    fail_rest = ratio_at(CHEN_FAIL_REST, n_neg, G, K)
    raw: Tensor = chen_raw(correct.to(torch.float64), fail_all, fail_rest)  # [B, G]
    if normalize:
        degenerate = (n_neg < K) | (n_neg == G)  # R̄ = 1 or R̄ = 0
        sigma = torch.sqrt(fail_all * (1 - fail_all))
        # (the paper code's σ + ε is ε at R̄ ∈ {0, 1}, where its numerators are exactly 0 too)
        raw = torch.where(degenerate, 0.0, raw / torch.where(degenerate, 1.0, sigma + eps))
    return raw.to(rewards.dtype)


@register("bagirov_transform", "maxk", needs_k=True, k_range="k<=n")
def bagirov_transform(rewards: Tensor, k: int) -> Tensor:
    """Bagirov Eq. 9 all-subsets transform (sorted weights C(q−1, K−1), C(q−2, K−2) over
    C(G, K)), = (K/G)·M⁺ = PKPO's s (I6). rewards: [B, G]; 1 <= K <= G."""
    s = _sort(rewards, k, "bagirov_transform", k_max_offset=0)
    (transform,) = _evaluate(s, "bagirov")  # Eq. 9's sorted weights; they total K/G
    return _unsort(transform + s.k / rewards.shape[1] * s.shift, s, rewards)


@register("bagirov_centered", "maxk", needs_k=True, k_range="k<=n-1")
def bagirov_centered(rewards: Tensor, k: int) -> Tensor:
    """Mean-centred Bagirov transform = K(G−K)/G²·Δ. rewards: [B, G]; 1 <= K <= G−1."""
    s = _sort(rewards, k, "bagirov_centered", k_max_offset=1)
    G = rewards.shape[1]
    return _unsort(s.k * (G - s.k) / G**2 * _delta(s), s, rewards)


@register("bagirov_zscore", "maxk", needs_k=True, k_range="k<=n-1")
def bagirov_zscore(rewards: Tensor, k: int, *, ddof: int = 1) -> Tensor:
    """Bagirov "BoN mean": Δ/std_ddof(Δ), no ε; exact zeros on flat groups. K <= G−1."""
    d = check_ddof(ddof, "bagirov_zscore")
    s = _sort(rewards, k, "bagirov_zscore", k_max_offset=1)
    flat = _flat(s)  # [B, 1]
    (delta,) = _evaluate(s, "delta")  # [B, G]
    # z is scale-free: dividing by max|Δ| first keeps the squares from under- or overflowing.
    # Σ Δ = 0 exactly (I4), so the std needs no mean pass: std_ddof = ||Δ|| / sqrt(G − ddof).
    # (A non-flat group whose Δ underflowed to 0 in float64 counts as flat: no 0/0.)
    top = delta.abs().amax(dim=-1, keepdim=True)
    flat = flat | (top == 0)
    unit = delta / torch.where(flat, 1.0, top)
    std = torch.linalg.vector_norm(unit, dim=-1, keepdim=True) / (rewards.shape[1] - d) ** 0.5
    z = torch.where(flat, 0.0, unit / torch.where(flat, 1.0, std))
    return _unsort(z, s, rewards)
