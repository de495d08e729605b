"""MaxRL (Maximum Likelihood Reinforcement Learning), batched: the trainers' p-normalised form
and advest's unbiased form.

``rewards: [B, G]`` (non-negative) in, ``[B, G]`` out, same dtype and device. Stability rules
(spec/maxrl.md): the numerator r − r̄ is formed after subtracting the group minimum (exact by
Sterbenz for offset rewards), everything is in units of the group maximum m (no overflow for
huge rewards, no underflow for subnormal ones), reductions are float64, and the degenerate cases
(r̄ = 0, all-equal groups, a lone success) are decided on the rewards, never on a float.
"""

from __future__ import annotations

import torch
from torch import Tensor

from advest.spec import bounds
from advest.spec.claims import FLAT, Claims, Variant
from advest.spec.conventions import SKYRL_MAXRL_EPS, MaxrlConvention, check_maxrl_convention
from advest.spec.tolerances import pair

from ._checks import check_rewards, refuse_where
from .registry import defined_in, register


def _check_nonnegative(rewards: Tensor, name: str) -> None:
    why = "p-normalisation divides by the mean reward"
    refuse_where(rewards < 0, rewards, f"{name} needs non-negative rewards ({why})")


def _deviation(x: Tensor) -> tuple[Tensor, Tensor]:
    """(r − r̄ in units of the group maximum m, m), for float64 ``x: [B, G]`` of non-negative
    rewards: the numerator is formed after subtracting the group minimum (exact by Sterbenz for
    offset rewards), each entry rounded once; a constant group gives exact zeros."""
    top = x.amax(dim=-1, keepdim=True)  # [B, 1]
    low = x.amin(dim=-1, keepdim=True)
    m = torch.where(top > 0, top, 1.0)
    d = (x - low) / m  # [B, G]
    return d - d.mean(dim=-1, keepdim=True), m


def _p_normalised(rewards: Tensor) -> Tensor:
    """(r − r̄)/r̄ in float64, ``[B, G]``; exact zeros where the group is constant (r̄ = 0
    included, the rewards being non-negative)."""
    x = rewards.to(torch.float64)
    constant = x.amax(dim=-1, keepdim=True) == x.amin(dim=-1, keepdim=True)  # [B, 1]
    c, m = _deviation(x)
    r_bar = (x / m).mean(dim=-1, keepdim=True)  # r̄/m in (0, 1] for a non-constant group
    return torch.where(constant, 0.0, c / torch.where(constant, 1.0, r_bar))


@register(
    # dimensionless outputs (scale-invariant): the scale is the output's own size, not the spread
    # in reward units (at 1e6 + j·1e-7 the spread, 6e-7, is 10⁶ times |A| ~ 3e-13, and a bound on
    # it would accept a formula that loses the offset)
    tolerance=pair(
        "output", "(r − min)/max − mean, divided by mean(r/max), in float64: a few G·ulps of max|A|"
    ),
    # MaxRL targets Σ_k (1/k)·∇pass@k, not a max@K or the mean reward: no pg_scale; its exact
    # expectations are checked in tests/core/estimators/test_maxrl.py
    claims=Claims(
        nonnegative=True, shift=None, scale_power=0, magnitude=bounds.n_minus_one, **FLAT
    ),
)
def maxrl(rewards: Tensor, *, convention: MaxrlConvention = "advest") -> Tensor:
    """p-normalised MaxRL: (r − r̄)/r̄ per group, 0 where r̄ = 0. Rewards must be >= 0.

    Pass/fail rewards: N·r_i/K − 1 with K successes (K > 0). In expectation N·Σ_{k=1}^{N−1}
    (1/k)·∇pass@k, not the paper's N·Σ_{k=1}^{N} (spec/maxrl.md). ``convention="skyrl-0.4.0"``:
    SkyRL's (r − r̄)/(r̄ + 1e-6), and A = r for a group of one.
    """
    conv = check_maxrl_convention(convention)
    check_rewards(rewards)
    _check_nonnegative(rewards, "maxrl")
    if conv == "skyrl-0.4.0":
        return _skyrl(rewards).to(rewards.dtype)
    return _p_normalised(rewards).to(rewards.dtype)


def _skyrl(rewards: Tensor) -> Tensor:
    """SkyRL 0.4.0's (r − r̄)/(r̄ + ε) in float64, ``[B, G]``; r itself for G = 1."""
    x = rewards.to(torch.float64)
    if x.shape[1] == 1:
        return x
    # ε is not scale-free, so the quotient is formed in reward units
    c, m = _deviation(x)
    c = c * m  # r − r̄, exact zeros for a constant group
    return c / (x.mean(dim=-1, keepdim=True) + SKYRL_MAXRL_EPS)


_UNBIASED = Claims(nonnegative=True, shift=None, scale_power=0, magnitude=bounds.n_scale)


@register(
    tolerance=pair(
        "output", "the p-normalised value plus an exact 0/1 decided on the rewards: ulps of max|A|"
    ),
    claims=_UNBIASED,
    variants=(Variant({"baseline": False}, _UNBIASED),),
)
def maxrl_unbiased(rewards: Tensor, *, baseline: bool = True) -> Tensor:
    """N·r_i/S − [S_{−i} > 0] per group (S = Σ r, S_{−i} = S − r_i), 0 where S = 0.

    Equal to the p-normalised form except on a group's one positive sample, which gets N instead
    of N − 1. ``baseline=False``: N·r_i/S alone (the paper's estimator times N), which is the
    p-normalised form plus 1 wherever S > 0.
    """
    check_rewards(rewards)
    _check_nonnegative(rewards, "maxrl_unbiased")
    if not isinstance(baseline, bool):
        raise TypeError(f"maxrl_unbiased needs baseline True or False; got {baseline!r}")
    a = _p_normalised(rewards)
    positive = rewards > 0
    if baseline:
        # N·r_i/S − 1 is the p-normalised value; without the baseline, the lone positive sample
        # (S_{−i} = 0) has N·r_i/S = N exactly.
        lone = positive & (positive.sum(dim=-1, keepdim=True) == 1)
        a = a + lone.to(torch.float64)
    else:
        a = a + positive.any(dim=-1, keepdim=True).to(torch.float64)
    return a.to(rewards.dtype)


__all__ = defined_in(__name__)  # every estimator registered above
