"""GDPO (group reward-decoupled normalisation), batched: each reward normalised within its group,
the normalised rewards summed with weights, the sum whitened over the batch.

``reward_parts: [B, G, R]`` (each of R reward functions' own scores) and ``reward_weights: [R]``
in, ``[B, G]`` out, in the dtype and on the device of ``reward_parts``. Conventions in
``spec/gdpo.md``. Stability: every reward column goes through ``fast.group.grpo`` (group minimum
subtracted, float64, two-pass std, constant groups decided on the rewards), and the weighted sum
and the batch std are float64. The batch mean of the sum is 0 in exact arithmetic (each group's
normalised rewards sum to 0), so advest's whitening does not subtract it: subtracting its
rounding noise would move the exact zeros of constant groups.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from advest.spec import bounds
from advest.spec.claims import IRRATIONAL, Claims, Variant
from advest.spec.conventions import Convention, check_convention
from advest.spec.tolerances import pair

from . import _ranks
from ._checks import check_companion, check_ddof, check_finite, check_lengths
from ._ranks import Group
from .group import VERL_WHITEN_EPS, _check_eps, _whiten, grpo
from .registry import defined_in, register


def _check_parts(reward_parts: object) -> Tensor:
    if not isinstance(reward_parts, Tensor):
        raise TypeError(
            f"reward_parts must be a torch.Tensor of shape [B, G, R]; got {type(reward_parts)}"
        )
    if not reward_parts.is_floating_point():
        raise TypeError(f"reward_parts must be a floating-point tensor; got {reward_parts.dtype}")
    if reward_parts.dim() != 3:
        raise ValueError(
            f"reward_parts must have shape [B, G, R]; got shape {tuple(reward_parts.shape)}"
        )
    B, G, R = reward_parts.shape
    if B == 0:  # the batch-level normalisation has no batch to pool (as the reference)
        raise ValueError("reward_parts needs at least one group; got B=0")
    if G == 0 or R == 0:
        raise ValueError(
            f"reward_parts has shape {tuple(reward_parts.shape)}: each group needs >= 1 sample "
            "and each sample >= 1 reward"
        )
    check_finite(reward_parts, "reward_parts")
    return reward_parts


def _check_weights(weights: Tensor | Sequence[float] | None, R: int, like: Tensor) -> Tensor:
    """``[R]`` float64 on ``like``'s device; None means every weight 1."""
    if weights is None:
        return torch.ones(R, dtype=torch.float64, device=like.device)
    if isinstance(weights, Tensor):
        w = weights.detach().to(device=like.device, dtype=torch.float64)
    else:
        try:
            w = torch.tensor([float(x) for x in weights], dtype=torch.float64, device=like.device)
        except (TypeError, ValueError):
            raise TypeError(f"reward_weights must be R numbers; got {weights!r}") from None
    if w.shape != (R,):
        raise ValueError(
            f"reward_weights has shape {tuple(w.shape)}; reward_parts has R = {R} rewards, so "
            f"give one weight per reward, shape ({R},)"
        )
    if not bool(torch.isfinite(w).all()):
        j = int((~torch.isfinite(w)).nonzero()[0])
        raise ValueError(f"reward_weights has a non-finite value at reward {j} ({w[j].item()})")
    return w


def _normalised_sum(parts: Tensor, w: Tensor, eps: float, ddof: int, conv: Convention) -> Tensor:
    """Σ_j w_j·grpo(r^(j)) in float64, ``[B, G]``: each reward column normalised in its group."""
    B, G, R = parts.shape
    columns = parts.to(torch.float64).permute(0, 2, 1).reshape(B * R, G)  # [B·R, G]
    n = grpo(columns, eps=eps, ddof=ddof, convention=conv).view(B, R, G)  # [B, R, G]
    return torch.einsum("brg,r->bg", n, w)


def _whiten_tokens(s: Tensor, lengths: Tensor, group: Group) -> Tensor:
    """verl 0.9.1's ``masked_whiten`` of s broadcast to ``lengths`` tokens per sample:
    (s − m)/sqrt(v + 1e-8), m and v the token-weighted mean and variance (Bessel over tokens),
    over the tokens of every rank of ``group``."""
    w = lengths.to(torch.float64)
    L, ws = _ranks.sums(w.sum(), (w * s).sum(), group=group)  # float64 already: exact copies
    if float(L) == 1:
        raise ValueError("gdpo (verl-0.9.1) needs at least 2 tokens in the batch; got 1")
    x = s - ws / L
    M = x.abs().amax() if group is None else _ranks.maximum(x.abs(), group)
    if not bool(M > 0):
        return torch.zeros_like(s)
    u = x / M  # in units of the largest |x|: the squares neither overflow nor underflow
    (squares,) = _ranks.sums((w * u * u).sum(), group=group)
    var = squares / (L - 1)
    return u / torch.sqrt(var + VERL_WHITEN_EPS / (M * M))


_WHITENED = bounds.standardised_ddof0
"""The weighted sum is whitened over the batch: a standardised value of B·G numbers."""


@register(
    kind="multi_reward",
    inputs=("reward_parts", "reward_weights", "lengths"),
    # dimensionless like MaxRL, so the scale is the output's own size. Each reward column is a
    # `grpo` z-score (a few ulps of |n|); with one reward, A_b = w·n_b/σ_s, a few ulps of |A_b|.
    # Several rewards can cancel in the weighted sum, which this per-group output scale does not
    # cover: tests/core/estimators/test_gdpo.py bounds those by the condition number.
    tolerance=pair(
        "output",
        "grpo z-scores of each reward (float64), weighted sum, divided by the two-pass batch std "
        "of the sum: a few ulps of max|A_b| for one reward",
    ),
    # with one reward (R = 1, weight 1), as the shared property tests see it: shift-invariant per
    # group; ε in both standard deviations breaks exact scale invariance, which ε = 0 restores
    claims=Claims(batch_coupled=True, scale_power=None, magnitude=_WHITENED, **IRRATIONAL),
    variants=(
        Variant(
            {"ddof": 0},
            Claims(batch_coupled=True, scale_power=None, magnitude=_WHITENED, **IRRATIONAL),
        ),
        Variant(
            {"eps": 0.0},
            Claims(batch_coupled=True, scale_power=0, magnitude=_WHITENED, **IRRATIONAL),
        ),
    ),
)
def gdpo(
    reward_parts: Tensor,
    reward_weights: Tensor | Sequence[float] | None = None,
    lengths: Tensor | None = None,
    *,
    eps: float = 1e-6,
    ddof: int = 1,
    convention: Convention = "advest",
    group: Group = None,
) -> Tensor:
    """GDPO: n^(j) = (r^(j) − group mean)/(group std_ddof + ε) for each reward j, s = Σ_j w_j
    n^(j), then A = s/(std_ddof of the B·G values of s + ε). ``[B, G, R]``, ``[R]`` -> ``[B, G]``.

    Constant groups of a reward (and G = 1) contribute exact zeros; a batch whose s is all zero
    gives exact zeros. ``reward_weights`` None means all 1. ``lengths [B, G]`` (valid tokens,
    >= 1) is read only by ``convention="verl-0.9.1"``, which reproduces verl's
    ``compute_gdpo_outcome_advantage``: a group of one sample keeps r/(1 + ε), and s is whitened
    over the batch's *tokens* (``masked_whiten``: token-weighted mean subtracted, Bessel over
    tokens, ε = 1e-8 inside the root); ``ddof`` must be 1 there. ``group``: a process group
    whose ranks each hold some of the batch's groups; the whitening is then over all of them.
    """
    parts = _check_parts(reward_parts)
    R = parts.shape[2]
    w = _check_weights(reward_weights, R, parts)
    conv = check_convention(convention, "gdpo")
    e = _check_eps(eps, "gdpo")
    d = check_ddof(ddof, "gdpo")
    if lengths is not None:
        check_companion(lengths, parts[..., 0], "lengths")
        check_lengths(lengths)
    if conv == "verl-0.9.1" and (d != 1 or lengths is None):
        raise ValueError(
            "gdpo with convention='verl-0.9.1' normalises with ddof = 1 and whitens over tokens: "
            f"pass lengths [B, G] and keep ddof=1; got ddof={ddof!r}, lengths "
            f"{'missing' if lengths is None else 'given'}"
        )
    s = _normalised_sum(parts, w, e, d, conv)  # [B, G] float64
    if conv == "verl-0.9.1":
        assert lengths is not None
        return _whiten_tokens(s, lengths, group).to(parts.dtype)
    return _whiten(s, d, e, group).to(parts.dtype)


__all__ = defined_in(__name__)  # every estimator registered above
