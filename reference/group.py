"""Outcome-level group baselines, exactly: GRPO, Dr. GRPO, RLOO, REINFORCE++, OPO.

One group (or, for ``reinforce_pp``, one batch of groups) of rewards in, one advantage per sample
out, in the input order. Conventions in ``spec/group.md``: std is the two-pass
sqrt(Σ(x − x̄)²/(n − ddof)); ε is added to the std; constant groups give exact zeros.

Sources: GRPO, arXiv:2402.03300 (§4.1.2); Dr. GRPO, arXiv:2503.20783 (§3.2); RLOO,
arXiv:2402.14740 (Eq. 3); REINFORCE++, arXiv:2501.03262 (§3, group-baseline variant);
OPO, arXiv:2505.23585 (Eq. 5).
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from reference._exact import Number, mean, std, to_fractions

__all__ = ["dr_grpo", "grpo", "opo", "reinforce_pp", "rloo"]

EPS = Fraction(1, 10**6)


def _centred(r: Sequence[Fraction]) -> list[Fraction]:
    mu = mean(r)
    return [x - mu for x in r]


def _check_ddof(ddof: int, name: str) -> None:
    if ddof not in (0, 1):
        raise ValueError(f"{name} needs ddof in (0, 1); got ddof={ddof!r}")


def grpo(rewards: Sequence[Number], *, eps: float = 1e-6, ddof: int = 1) -> list[Fraction]:
    """A_i = (r_i − mean r)/(std_ddof(r) + ε); a constant group (including G = 1) gives zeros.

    The std is irrational in general: exact up to its 60-digit square root. ``eps`` is converted
    exactly (1e-6 as a double).
    """
    _check_ddof(ddof, "grpo")
    r = to_fractions(rewards)
    if max(r) == min(r):
        return [Fraction(0)] * len(r)
    scale = std(r, ddof) + Fraction(eps)
    return [c / scale for c in _centred(r)]


def dr_grpo(rewards: Sequence[Number]) -> list[Fraction]:
    """A_i = r_i − mean r (Dr. GRPO: no std division). G = 1 gives 0."""
    return _centred(to_fractions(rewards))


def rloo(rewards: Sequence[Number]) -> list[Fraction]:
    """A_i = r_i − (1/(G−1)) Σ_{j≠i} r_j. Needs G >= 2."""
    r = to_fractions(rewards)
    g = len(r)
    if g < 2:
        raise ValueError(f"rloo needs a group of G >= 2 samples; got G={g}")
    return [r[i] - sum((r[j] for j in range(g) if j != i), Fraction(0)) / (g - 1) for i in range(g)]


def reinforce_pp(
    rewards: Sequence[Sequence[Number]], *, eps: float = 1e-6, ddof: int = 1
) -> list[list[Fraction]]:
    """REINFORCE++ with group baseline: c = r − group mean; A = c/(std_ddof(all c) + ε).

    ``rewards`` is a batch of groups ([B][G]); the std runs over all B·G centred values, whose mean
    is exactly 0 (no re-centring). All c = 0 (or B·G = 1) gives exact zeros.
    """
    _check_ddof(ddof, "reinforce_pp")
    if len(rewards) == 0:
        raise ValueError("reinforce_pp needs at least one group in rewards; got B=0")
    centred = [_centred(to_fractions(group)) for group in rewards]
    flat = [c for group in centred for c in group]
    if all(c == 0 for c in flat):
        return [[Fraction(0)] * len(group) for group in centred]
    scale = std(flat, ddof) + Fraction(eps)
    return [[c / scale for c in group] for group in centred]


def opo(rewards: Sequence[Number], lengths: Sequence[int]) -> list[Fraction]:
    """A_i = r_i − Σ_j l_j r_j / Σ_j l_j (OPO's length-weighted baseline, self included).

    ``lengths`` are the numbers of valid response tokens, each >= 1.
    """
    r = to_fractions(rewards)
    lengths_q = to_fractions(lengths, "lengths")
    if len(lengths_q) != len(r):
        raise ValueError(f"lengths has {len(lengths_q)} entries but rewards has {len(r)}")
    for i, length in enumerate(lengths_q):
        if length < 1:
            raise ValueError(f"lengths must be >= 1; group 0 has {length} at sample {i}")
    baseline = sum((n * x for n, x in zip(lengths_q, r, strict=True)), Fraction(0)) / sum(lengths_q)
    return [x - baseline for x in r]
