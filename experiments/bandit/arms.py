"""The bandit experiment's arms (``experiments/bandit/``) and what it does with each, read from
each arm's registry entry (its family and ``Claims``), never from lists kept here."""

from __future__ import annotations

from advest.fast import registry

__all__ = ["ARMS", "binary_only", "harmonic", "normalised", "scaled"]

ARMS = (
    "ei", "maxpo", "canonical", "pkpo_sloo", "ei_l1o",
    "chen_passk", "bagirov_zscore", "grpo", "gdpo",
    "maxrl", "maxrl_unbiased",
)  # fmt: skip
"""The design's default arms (``--estimators``); what is done with each comes from its registry
entry (below), not from lists here."""


def harmonic(name: str) -> bool:
    """Compared with the MaxRL objective's gradient N Σ_{k=1}^{N} (1/k) ∇pass@k, not ∇max@K:
    the estimators of the maxrl family."""
    return registry.entry(name).family == "maxrl"


def binary_only(name: str) -> bool:
    """Runs on pass/fail rewards: its claims say 0/1 rewards only, or its objective (MaxRL's
    pass@k) is defined on pass/fail."""
    return registry.entry(name).claims.binary_only or harmonic(name)


def scaled(name: str) -> bool:
    """Has a scale the variance sweeps compare at: ``Claims.pg_scale`` (unbiased) or
    ``comparison_scale`` (biased, compared at the scale it would have)."""
    claims = registry.entry(name).claims
    return claims.pg_scale is not None or claims.comparison_scale is not None


def normalised(name: str) -> bool:
    """Not linear in the rewards (``Claims.scale_power`` other than 1: a std or a z-score divides),
    drawn dashed: its gradient's size is not comparable."""
    return registry.entry(name).claims.scale_power != 1 and not harmonic(name)
