"""Outcome-level group baselines, batched: GRPO, Dr. GRPO, RLOO, REINFORCE++, OPO, and the
shrinkage peers James–Stein (JSPO) and EBPO.

``rewards: [B, G]`` in, ``[B, G]`` out, same dtype and device. Stability rules (spec/group.md):
subtract the group minimum first (exact by Sterbenz for offset rewards; every estimator here is
shift-invariant), reduce in float64, two-pass variance, and decide constant groups on the raw
rewards (max == min), never by testing a float std against 0.
"""

from __future__ import annotations

import torch
from torch import Tensor

from advest.spec import bounds, scales
from advest.spec.claims import FLAT, IRRATIONAL, Claims, Variant
from advest.spec.conventions import Convention, check_convention, check_verl_whiten
from advest.spec.tolerances import CENTRED, pair

from . import _ranks
from ._checks import check_companion, check_ddof, check_lengths, check_rewards
from ._leave_out import mean_of_others, spread_of_others
from ._ranks import Group
from .registry import defined_in, register

VERL_WHITEN_EPS = 1e-8
"""verl 0.9.1's ``masked_whiten``: A = (x − mean)·rsqrt(var + 1e-8), the ε inside the root."""


def _centred(rewards: Tensor) -> Tensor:
    """r − group mean in float64, ``[B, G]``, computed after subtracting the group minimum."""
    x = rewards.to(torch.float64)
    x = x - x.amin(dim=-1, keepdim=True)
    return x - x.mean(dim=-1, keepdim=True)


def _constant(rewards: Tensor) -> Tensor:
    """``[B, 1]`` bool: the group's rewards are all equal."""
    return rewards.amax(dim=-1, keepdim=True) == rewards.amin(dim=-1, keepdim=True)


def _std(centred: Tensor, ddof: int, dim: int | None) -> Tensor:
    """Two-pass std of already-centred values (mean 0), over ``dim`` or over everything.

    Scaled by max|c| first so that subnormal or huge spreads do not under- or overflow the squares;
    the caller masks groups whose c is all zero (and G − ddof = 0, which gives inf here).
    """
    a = centred.abs()
    top = a.amax() if dim is None else a.amax(dim=dim, keepdim=True)
    unit = centred / torch.where(top > 0, top, 1.0)
    squares = (unit**2).sum() if dim is None else (unit**2).sum(dim=dim, keepdim=True)
    count = centred.numel() if dim is None else centred.shape[dim]
    return top * torch.sqrt(squares / max(count - ddof, 0))


def _batch_std(centred: Tensor, ddof: int, group: Group, top: Tensor | None = None) -> Tensor:
    """``_std(centred, ddof, dim=None)`` over every rank's values (mean 0 over all of them): max|c|
    (unless given as ``top``), then the scaled squares and the count all-reduced (float64)."""
    if group is None:
        return _std(centred, ddof, dim=None)
    if top is None:
        top = _ranks.maximum(centred.abs(), group)
    unit = centred / torch.where(top > 0, top, 1.0)
    squares, count = _ranks.sums((unit**2).sum(), centred.numel(), group=group)
    return top * torch.sqrt(squares / (count - ddof).clamp(min=0))


def _batch_mean(x: Tensor, group: Group) -> Tensor:
    """The mean of every rank's elements of ``x``: sum and count all-reduced (float64)."""
    if group is None:
        return x.mean()
    total, count = _ranks.sums(x.sum(), x.numel(), group=group)
    return total / count


def _whiten(c: Tensor, ddof: int, eps: float, group: Group) -> Tensor:
    """c/(std_ddof over every rank's c + ε), c of mean 0 over the batch (not re-centred); exact
    zeros when every c of every rank is 0. Float64 in and out."""
    if group is None:
        if not bool(c.any()):
            return torch.zeros_like(c)
        return c / (_std(c, ddof, dim=None) + eps)
    top = _ranks.maximum(c.abs(), group)
    if not bool(top > 0):
        return torch.zeros_like(c)
    return c / (_batch_std(c, ddof, group, top) + eps)


_BATCH = bounds.standardised_ddof0
"""Batch-whitened forms: a standardised value over the B·G rewards, either ddof."""


@register(
    tolerance=pair("group", CENTRED + "; two-pass std scaled by max|c|: a few ulps of |A|"),
    claims=Claims(scale_power=None, magnitude=bounds.standardised, **IRRATIONAL),
    variants=(
        Variant(
            {"ddof": 0},
            Claims(scale_power=None, magnitude=bounds.standardised_ddof0, **IRRATIONAL),
        ),
        # verl's G = 1 group gives r/(1 + ε): not zero, not centred, not shift-invariant at G = 1
        Variant(
            {"convention": "verl-0.9.1"},
            Claims(
                shift=None,
                scale_power=None,
                rational=False,
                magnitude=bounds.standardised_or_reward,
            ),
        ),
    ),
)
def grpo(
    rewards: Tensor, *, eps: float = 1e-6, ddof: int = 1, convention: Convention = "advest"
) -> Tensor:
    """(r − mean)/(std_ddof + ε) per group; constant groups (and G = 1) give exact zeros.

    ``convention="verl-0.9.1"``: a group of one sample (G = 1) gives r/(1 + ε) instead, as verl's
    ``compute_grpo_outcome_advantage`` does (mean 0, std 1), with 1 + ε rounded to float32 as
    verl's ``torch.tensor(1.0) + epsilon`` is.
    """
    check_rewards(rewards)
    d = check_ddof(ddof, "grpo")
    if check_convention(convention, "grpo") == "verl-0.9.1" and rewards.shape[1] == 1:
        e = _check_eps(eps, "grpo")
        one_plus_eps = torch.tensor(1.0, dtype=torch.float32, device=rewards.device) + e
        # verl divides a 0-dim score by this float32 0-dim tensor: the quotient is in the wider
        # of the two dtypes (float32 for bfloat16 scores), then stored back in the scores' dtype.
        wide = torch.promote_types(rewards.dtype, torch.float32)
        return (rewards.to(wide) / one_plus_eps).to(rewards.dtype)
    centred = _centred(rewards)
    constant = _constant(rewards)
    std = torch.where(constant, 1.0, _std(centred, d, dim=-1))
    return torch.where(constant, 0.0, centred / (std + eps)).to(rewards.dtype)


@register(
    tolerance=pair(
        "group",
        CENTRED + "; divided by the std of all B·G rewards (batch min subtracted, two-pass, "
        "scaled): a few ulps of |A_b|, so each group's own scale bounds it",
    ),
    claims=Claims(batch_coupled=True, scale_power=None, magnitude=_BATCH, **IRRATIONAL),
    variants=(
        Variant(
            {"eps": 0.0},
            Claims(batch_coupled=True, scale_power=0, magnitude=_BATCH, **IRRATIONAL),
        ),
    ),
)
def grpo_batch_std(
    rewards: Tensor, *, eps: float = 1e-6, ddof: int = 1, group: Group = None
) -> Tensor:
    """Group mean, batch std (LitePPO): (r − group mean)/(std_ddof of all B·G rewards + ε).

    The std is of the rewards themselves (between-group spread included), computed after
    subtracting the batch minimum, two-pass and scaled. An all-equal batch gives exact zeros;
    a constant group gives exact zeros. ``eps=1e-4`` reproduces TRL 1.16's
    ``scale_rewards="batch"``. ``group``: a process group whose ranks each hold some of the
    batch's groups; the std is then that of every rank's rewards (``fast._ranks``).
    """
    check_rewards(rewards)
    d = check_ddof(ddof, "grpo_batch_std")
    e = _check_eps(eps, "grpo_batch_std")
    if rewards.shape[0] == 0:
        raise ValueError("grpo_batch_std needs at least one group in rewards; got B=0")
    lo, hi = _ranks.extremes(rewards, group)  # float64, exact
    if bool(hi == lo):
        return torch.zeros_like(rewards)
    x = rewards.to(torch.float64)
    u = x - lo  # exact for offset rewards (Sterbenz); σ is shift-invariant
    m = hi - lo  # > 0: the batch is not all-equal; = max u, the subtraction being monotone
    v = u / m  # in units of the batch spread: the mean of B·G huge rewards cannot overflow
    mean = _batch_mean(v, group)
    # v spans [0, 1] exactly, so max|v − mean| is at an end, as amax finds it: one collective less
    top = None if group is None else torch.maximum(1 - mean, mean)
    sigma = m * _batch_std(v - mean, d, group, top)
    c = torch.where(_constant(rewards), 0.0, _centred(rewards))
    return (c / (sigma + e)).to(rewards.dtype)


@register(
    tolerance=pair("group", CENTRED),
    claims=Claims(pg_scale=scales.n_minus_one, magnitude=bounds.unit, **FLAT),
)
def dr_grpo(rewards: Tensor) -> Tensor:
    """r − group mean (Dr. GRPO, no std); G = 1 gives 0."""
    check_rewards(rewards)
    return _centred(rewards).to(rewards.dtype)


@register(
    tolerance=pair("group", CENTRED + "; times G/(G−1)"),
    claims=Claims(min_n=2, pg_scale=scales.n_scale, magnitude=bounds.unit, **FLAT),
)
def rloo(rewards: Tensor) -> Tensor:
    """r − mean of the others = G/(G−1)·(r − mean); needs G >= 2."""
    check_rewards(rewards)
    G = rewards.shape[1]
    if G < 2:
        raise ValueError(f"rloo needs groups of G >= 2 samples; got G={G}")
    return (G / (G - 1) * _centred(rewards)).to(rewards.dtype)


@register(
    tolerance=pair(
        "group",
        CENTRED + "; divided by the batch std (two-pass, scaled): relative error of |A_b| "
        "is a few ulps, so each group's own scale bounds it",
    ),
    claims=Claims(batch_coupled=True, scale_power=None, magnitude=_BATCH, **IRRATIONAL),
    variants=(
        Variant(
            {"ddof": 0},
            Claims(batch_coupled=True, scale_power=None, magnitude=_BATCH, **IRRATIONAL),
        ),
    ),
)
def reinforce_pp(
    rewards: Tensor,
    lengths: Tensor | None = None,
    *,
    eps: float = 1e-6,
    ddof: int = 1,
    convention: Convention = "advest",
    group: Group = None,
) -> Tensor:
    """REINFORCE++ (group baseline): c = r − group mean; c/(std_ddof over all B·G of c + ε).

    The mean of c is exactly 0, so there is no re-centring; all c = 0 gives exact zeros.

    ``convention="verl-0.9.1"`` reproduces verl's ``compute_reinforce_plus_plus_baseline_outcome_
    advantage``: c = r − group mean (c = r for G = 1), then whitened over the *tokens* of the
    batch (``masked_whiten``): each response counts ``lengths [B, G]`` times (required), m and v
    are the token-weighted mean and the variance with Bessel's correction over the token count
    L, A = (c − m)/sqrt(v + 1e-8). ``eps`` and ``ddof`` must keep their defaults there (verl
    hard-codes both; its own ``epsilon`` argument is unused).
    ``group``: a process group of ranks holding the batch's groups (``fast._ranks``).
    """
    check_rewards(rewards)
    d = check_ddof(ddof, "reinforce_pp")
    if rewards.shape[0] == 0:
        raise ValueError("reinforce_pp needs at least one group in rewards; got B=0")
    if check_convention(convention, "reinforce_pp") == "verl-0.9.1":
        check_verl_whiten("reinforce_pp", eps, d)
        return _reinforce_pp_verl(rewards, lengths, group)
    if lengths is not None:
        raise ValueError("reinforce_pp takes lengths only with convention='verl-0.9.1'")
    c = torch.where(_constant(rewards), 0.0, _centred(rewards))
    return _whiten(c, d, eps, group).to(rewards.dtype)


def _reinforce_pp_verl(rewards: Tensor, lengths: Tensor | None, group: Group) -> Tensor:
    """verl 0.9.1's REINFORCE++ baseline on ``[B, G]`` rewards and ``[B, G]`` token counts."""
    if lengths is None:
        raise ValueError(
            "reinforce_pp with convention='verl-0.9.1' whitens over tokens: pass lengths [B, G]"
        )
    check_companion(lengths, rewards, "lengths")
    check_lengths(lengths)
    G = rewards.shape[1]
    # verl's singleton group has mean 0; a constant group gives exact zeros (on the rewards).
    c = rewards.to(torch.float64) if G == 1 else _centred(rewards)
    c = torch.where(_constant(rewards) & (G > 1), 0.0, c)
    w = lengths.to(torch.float64)
    L, wc = _ranks.sums(w.sum(), (w * c).sum(), group=group)  # float64 already: exact copies
    if int(L) == 1:
        raise ValueError("reinforce_pp (verl-0.9.1) needs at least 2 tokens in the batch; got 1")
    m = wc / L
    x = c - m
    (spread,) = _ranks.sums((w * x * x).sum(), group=group)
    var = spread / (L - 1)
    return (x / torch.sqrt(var + VERL_WHITEN_EPS)).to(rewards.dtype)


@register(
    inputs=("rewards", "lengths"),
    tolerance=pair("group", CENTRED + "; the length-weighted mean has weights summing to 1"),
    claims=Claims(exact_zero_on_flat=True, magnitude=bounds.unit),
)
def opo(rewards: Tensor, lengths: Tensor) -> Tensor:
    """r − Σ_j l_j r_j / Σ_j l_j (OPO, self included). lengths: [B, G] valid tokens, each >= 1."""
    check_rewards(rewards)
    check_companion(lengths, rewards, "lengths")
    check_lengths(lengths)
    x = rewards.to(torch.float64)
    x = x - x.amin(dim=-1, keepdim=True)
    w = lengths.to(torch.float64)
    baseline = (w * x).sum(dim=-1, keepdim=True) / w.sum(dim=-1, keepdim=True)
    return (x - baseline).to(rewards.dtype)


def _check_eps(eps: object, name: str) -> float:
    if isinstance(eps, bool) or not isinstance(eps, int | float) or not 0 <= eps < float("inf"):
        raise ValueError(f"{name} needs a finite eps >= 0; got eps={eps!r}")
    return float(eps)


def _batch_units(rewards: Tensor, name: str, group: Group = None) -> tuple[Tensor, Tensor, int]:
    """``(u [B, G], m [], B_all)``: float64 rewards minus the batch minimum, divided by their
    maximum m, and the number of groups in the batch (over every rank of ``group``).

    Both peers are invariant to a shift of the whole batch, so the subtraction is free and exact
    for offset rewards (Sterbenz); working in units of m keeps every square in range for huge or
    subnormal spreads. m = 0 (an all-equal batch) is left to the caller.
    """
    check_rewards(rewards)
    B = sum(shape[0] for shape in _ranks.shapes(rewards, group, "rewards"))
    if B < 2:
        raise ValueError(f"{name} needs at least 2 groups (prompts) in rewards; got B={B}")
    lo, hi = _ranks.extremes(rewards, group)  # float64, exact
    x = rewards.to(torch.float64) - lo
    m = hi - lo  # = max of x: the subtraction is monotone
    return x / torch.where(m > 0, m, 1.0), m, B


@register(
    tolerance=pair(
        "batch", "works in units of the batch spread m (batch min subtracted): ulps of m"
    ),
    claims=Claims(min_n=2, min_b=2, batch_coupled=True, scale_power=None, magnitude=bounds.unit),
)
def james_stein(rewards: Tensor, *, eps: float = 1e-6, group: Group = None) -> Tensor:
    """James–Stein shrinkage baseline (JSPO): b = (1 − λ_p)·b_RLOO + λ_p·r̄_{−p}, A = r − b.

    λ_p = v²/(v² + s² + ε) from the other prompts only (spec/group.md). Needs B >= 2 and G >= 2.
    Computed as A = (1 − λ)·G/(G−1)·(r − μ_p) + λ·(r − r̄_{−p}), in units of the batch spread m;
    O(B·G) (leave-one-prompt-out sums by prefix and suffix sums). ``group``: a process group of
    ranks holding the batch's groups; each group's mean and variance (2 numbers) are gathered.
    """
    e = _check_eps(eps, "james_stein")
    u, m, _ = _batch_units(rewards, "james_stein", group)
    B, G = u.shape
    if G < 2:
        raise ValueError(f"james_stein needs groups of G >= 2 samples; got G={G}")
    if not bool(m > 0):
        return torch.zeros_like(rewards)
    # A constant group has mean exactly its value and variance exactly 0 (decided on the rewards):
    # then v² = 0 exactly when every other group is constant, and λ = 0 gives RLOO exactly.
    constant = _constant(rewards).squeeze(-1)  # [B]
    mu = torch.where(constant, u[:, 0], u.mean(dim=-1))  # [B]
    s2_within = ((u - mu.unsqueeze(-1)) ** 2).sum(dim=-1) / (G - 1)  # [B]
    s2_within = torch.where(constant, 0.0, s2_within)
    # every prompt's (μ, s²) in one process's order: the leave-one-out sums run over all of them
    stats, start = _ranks.gather(torch.stack([mu, s2_within], dim=1), group)  # [B_all, 2]
    mu_all, s2_all = stats.unbind(dim=1)  # [B_all] each
    mine = slice(start, start + B)
    v2 = (mean_of_others(s2_all) / G)[mine]  # [B]
    mu_bar_all = mean_of_others(mu_all)  # [B_all]: also r̄_{−p}, the groups being equal in size
    s2 = (spread_of_others(mu_all, mu_bar_all) / (mu_all.shape[0] - 1))[mine]  # [B]
    mu_bar = mu_bar_all[mine]
    # ε is in reward units²: in units of m it is ε/m² (inf for a subnormal m, giving λ = 0).
    denominator = v2 + s2 + (e / (m * m) if e > 0 else 0.0)
    lam = torch.where(denominator > 0, v2 / torch.where(denominator > 0, denominator, 1.0), 0.0)
    lam = lam.unsqueeze(-1)  # [B, 1]
    a = (1 - lam) * (G / (G - 1)) * (u - mu.unsqueeze(-1)) + lam * (u - mu_bar.unsqueeze(-1))
    return (a * m).to(rewards.dtype)


@register(
    tolerance=pair("batch", "works in units of the batch spread m, then batch-standardises"),
    claims=Claims(min_b=2, batch_coupled=True, scale_power=None, rational=False, magnitude=_BATCH),
    variants=(
        Variant(
            {"eps": 0.0},
            Claims(min_b=2, batch_coupled=True, scale_power=0, rational=False, magnitude=_BATCH),
        ),
    ),
)
def ebpo(rewards: Tensor, *, eps: float = 1e-6, group: Group = None) -> Tensor:
    """EBPO with fresh accumulators: V_q = (1 − S)μ_q + S μ_glob, S = (σ²/G)/(σ²/G + τ²), then
    the raw r − V batch-standardised, (raw − mean)/(std_ddof=1 + ε). Needs B >= 2.

    An all-equal batch gives exact zeros (decided on the rewards, not on a float σ²). ``group``: a
    process group of ranks holding the batch's groups; every sum and count is all-reduced.
    """
    e = _check_eps(eps, "ebpo")
    u, m, B = _batch_units(rewards, "ebpo", group)  # B: the groups of every rank
    G = u.shape[1]
    if not bool(m > 0):
        return torch.zeros_like(rewards)
    mu = u.mean(dim=-1, keepdim=True)  # [B_r, 1]
    mu_glob = _batch_mean(mu, group)  # the groups are equal in size
    spread, between = _ranks.sums(
        ((u - mu_glob) ** 2).sum(), ((mu - mu_glob) ** 2).sum(), group=group
    )
    sigma2, tau2 = spread / (B * G - 1), between / (B - 1)
    S = (sigma2 / G) / (sigma2 / G + tau2)
    raw = (u - mu) + S * (mu - mu_glob)  # = r − ((1 − S)μ_q + S μ_glob), in units of m
    centred = raw - _batch_mean(raw, group)
    (squares,) = _ranks.sums((centred**2).sum(), group=group)
    std = torch.sqrt(squares / (B * G - 1))
    # (m·c)/(m·std + ε) = c/(std + ε/m); ε/m stays finite for every normal or subnormal m. A
    # tensor numerator: torch computes `float / tensor` as float · (1/tensor), and 1/m overflows
    # to inf for a subnormal m (0 · inf = NaN with eps = 0; hypothesis found m = 2.2e-309).
    return (centred / (std + m.new_tensor(e) / m)).to(rewards.dtype)


__all__ = defined_in(__name__)  # every estimator registered above
