"""GDPO (Group reward-Decoupled normalisation Policy Optimization), exactly.

A batch of groups, each sample scored by R reward functions, in; one advantage per sample out,
in the input order. Conventions in ``spec/gdpo.md``: each reward is normalised within its group
as GRPO normalises (std with ``ddof``, ε added to the std, a constant group gives zeros), the
normalised rewards are summed with the weights w_j, and the sum is whitened over the B·G samples
of the batch, (s − mean)/(std_ddof + ε). The two standard deviations are the one inexact step
(60-digit square roots, ``_exact.sqrt``); everything else is rational.

Source: Shih-Yang Liu et al., *GDPO: Group reward-Decoupled Normalization Policy Optimization for
Multi-reward RL Optimization*, arXiv:2601.05242: the per-reward group normalisation, the
weighted sum, and the batch-wise normalisation of the summed advantage.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from advest.spec.conventions import Convention

from . import group
from ._exact import Number, mean, public, sqrt, std, to_fractions, to_lengths
from .group import VERL_WHITEN_EPS, _check_eps

Parts = Sequence[Sequence[Sequence[Number]]]
"""``[B][G][R]``: R reward scores per sample, G samples per group, B groups."""


def _parts(reward_parts: Parts) -> list[list[list[Fraction]]]:
    """The batch as exact rationals, checked rectangular: B >= 1, G >= 1, R >= 1."""
    if isinstance(reward_parts, str | bytes) or not isinstance(reward_parts, Sequence):
        raise TypeError(f"reward_parts must be [B][G][R] numbers; got {type(reward_parts)}")
    if len(reward_parts) == 0:
        raise ValueError("reward_parts needs at least one group; got B=0")
    out = [[to_fractions(sample, "reward_parts") for sample in g] for g in reward_parts]
    G, R = len(out[0]), len(out[0][0]) if out[0] else 0
    if G == 0:
        raise ValueError("reward_parts has an empty group; a group needs at least 1 sample")
    for b, g in enumerate(out):
        if len(g) != G or any(len(sample) != R for sample in g):
            raise ValueError(
                f"reward_parts group {b} is not [G={G}][R={R}] like group 0: every group needs "
                "the same number of samples, every sample the same number of rewards"
            )
    return out


def normalised_sum(
    reward_parts: Parts,
    reward_weights: Sequence[Number] | None = None,
    *,
    eps: float = 1e-6,
    ddof: int = 1,
    convention: Convention = "advest",
) -> list[list[Fraction]]:
    """s_bi = Σ_j w_j n^(j)_bi with n^(j)_b = GRPO of reward j in group b (arXiv:2601.05242,
    the decoupled group-wise normalisation and the weighted aggregation), ``[B][G]``."""
    parts = _parts(reward_parts)
    R = len(parts[0][0])
    w = (
        [Fraction(1)] * R
        if reward_weights is None
        else to_fractions(reward_weights, "reward_weights")
    )
    if len(w) != R:
        raise ValueError(
            f"reward_weights has {len(w)} entries; reward_parts has R = {R} rewards, so give one "
            "weight per reward"
        )
    s: list[list[Fraction]] = []
    for g in parts:
        n = [group.grpo([sample[j] for sample in g], eps=eps, ddof=ddof, convention=convention)
             for j in range(R)]  # fmt: skip
        s.append([sum((w[j] * n[j][i] for j in range(R)), Fraction(0)) for i in range(len(g))])
    return s


def gdpo(
    reward_parts: Parts,
    reward_weights: Sequence[Number] | None = None,
    lengths: Sequence[Sequence[int]] | None = None,
    *,
    eps: float = 1e-6,
    ddof: int = 1,
    convention: Convention = "advest",
) -> list[list[Fraction]]:
    """A_bi = (s_bi − mean s)/(std_ddof(s) + ε) over the B·G samples, s = ``normalised_sum``.

    The mean is exactly 0 (each group's normalised rewards sum to 0). An all-zero s gives exact
    zeros. ``convention="verl-0.9.1"`` (verl/trainer/ppo/core_algos.py,
    compute_gdpo_outcome_advantage, and verl/utils/torch_functional.py, masked_whiten): a group
    of one sample keeps r/(1 + ε) (``group.grpo``'s verl convention), and s is whitened over the
    L = Σ l_i tokens of ``lengths`` (required, each >= 1): m = Σ l_i s_i / L,
    v = Σ l_i (s_i − m)²/(L − 1), A_i = (s_i − m)/sqrt(v + 1e-8); ``ddof`` must be 1.
    """
    eps_q = _check_eps(eps, "gdpo")
    if convention == "verl-0.9.1" and (ddof != 1 or lengths is None):
        raise ValueError(
            "gdpo with convention='verl-0.9.1' normalises with ddof = 1 and whitens over tokens: "
            f"pass lengths [B][G] and keep ddof=1; got ddof={ddof!r}"
        )
    s = normalised_sum(reward_parts, reward_weights, eps=eps, ddof=ddof, convention=convention)
    if convention == "verl-0.9.1":
        assert lengths is not None
        return _whiten_tokens(s, lengths)
    flat = [x for g in s for x in g]
    if all(x == 0 for x in flat):
        return [[Fraction(0)] * len(g) for g in s]
    mu, sigma = mean(flat), std(flat, ddof)
    return [[(x - mu) / (sigma + eps_q) for x in g] for g in s]


def _whiten_tokens(
    s: list[list[Fraction]], lengths: Sequence[Sequence[int]]
) -> list[list[Fraction]]:
    ells = to_lengths(lengths, s, "[B][G] of reward_parts' groups")
    pairs = [
        (l_i, s_i) for lg, sg in zip(ells, s, strict=True) for l_i, s_i in zip(lg, sg, strict=True)
    ]
    L = sum((l_i for l_i, _ in pairs), Fraction(0))
    if L == 1:
        raise ValueError("gdpo (verl-0.9.1) needs at least 2 tokens in the batch; got 1")
    m = sum((l_i * s_i for l_i, s_i in pairs), Fraction(0)) / L
    v = sum((l_i * (s_i - m) ** 2 for l_i, s_i in pairs), Fraction(0)) / (L - 1)
    scale = sqrt(v + VERL_WHITEN_EPS)
    return [[(s_i - m) / scale for s_i in g] for g in s]


__all__ = public(globals())  # every public function and class above
