"""Outcome-level group baselines, exactly: GRPO, Dr. GRPO, RLOO, REINFORCE++, OPO, and the
shrinkage peers James–Stein (JSPO) and EBPO.

One group (or, for ``reinforce_pp``, ``james_stein`` and ``ebpo``, one batch of groups) of
rewards in, one advantage per sample out, in the input order. Conventions in ``spec/group.md``:
std is the two-pass sqrt(Σ(x − x̄)²/(n − ddof)); ε is added to the std; constant groups give
exact zeros.

Sources: GRPO, arXiv:2402.03300 (§4.1.2); Dr. GRPO, arXiv:2503.20783 (§3.2); RLOO,
arXiv:2402.14740 (Eq. 3); REINFORCE++, arXiv:2501.03262 (§3, group-baseline variant);
OPO, arXiv:2505.23585 (Eq. 5); James–Stein shrinkage (JSPO), arXiv:2511.03710 (official code
guanning03/JSPO-Official); EBPO, arXiv:2602.05165 (Algorithm 1). Full citations: spec/group.md.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from fractions import Fraction

from advest.spec.conventions import Convention, check_convention, check_verl_whiten

from ._exact import Number, mean, public, sqrt, std, to_fractions, to_lengths

EPS = Fraction(1, 10**6)

VERL_WHITEN_EPS = Fraction(1e-8)
"""verl 0.9.1's ``masked_whiten``: (x − mean)·rsqrt(var + 1e-8), the double 1e-8 exactly."""


def _float32(x: float) -> Fraction:
    """The float32 nearest to the double x, exactly."""
    return Fraction(struct.unpack("f", struct.pack("f", x))[0])


def _centred(r: Sequence[Fraction]) -> list[Fraction]:
    mu = mean(r)
    return [x - mu for x in r]


def _check_ddof(ddof: int, name: str) -> None:
    if ddof not in (0, 1):
        raise ValueError(f"{name} needs ddof in (0, 1); got ddof={ddof!r}")


def grpo(
    rewards: Sequence[Number],
    *,
    eps: float = 1e-6,
    ddof: int = 1,
    convention: Convention = "advest",
) -> list[Fraction]:
    """A_i = (r_i − mean r)/(std_ddof(r) + ε); a constant group (including G = 1) gives zeros.

    The std is irrational in general: exact up to its 60-digit square root. ``eps`` is converted
    exactly (1e-6 as a double).

    ``convention="verl-0.9.1"`` (verl/trainer/ppo/core_algos.py, compute_grpo_outcome_advantage):
    a group of one sample takes mean 0 and std 1, A = r/(1 + ε), where verl forms 1 + ε in
    float32 (``torch.tensor(1.0) + epsilon``): the float32 nearest to 1 + float32(ε).
    """
    _check_ddof(ddof, "grpo")
    check_convention(convention, "grpo")
    r = to_fractions(rewards)
    if convention == "verl-0.9.1" and len(r) == 1:
        one_plus_eps = _float32(1.0 + float(_float32(eps)))
        return [r[0] / one_plus_eps]
    if max(r) == min(r):
        return [Fraction(0)] * len(r)
    scale = std(r, ddof) + Fraction(eps)
    return [c / scale for c in _centred(r)]


def grpo_batch_std(
    rewards: Sequence[Sequence[Number]], *, eps: float = 1e-6, ddof: int = 1
) -> list[list[Fraction]]:
    """Group mean, batch std (LitePPO, arXiv:2508.08221): A_bi = (r_bi − mean r_b)/(σ + ε),
    σ = std_ddof of all B·G rewards of the batch (the rewards themselves, not their residuals).

    ``rewards`` is a batch of groups (``[B][G]``). An all-equal batch (including B·G = 1) gives
    exact zeros; so does every constant group. ε is added to σ, converted exactly.
    """
    _check_ddof(ddof, "grpo_batch_std")
    eps_q = _check_eps(eps, "grpo_batch_std")
    if len(rewards) == 0:
        raise ValueError("grpo_batch_std needs at least one group in rewards; got B=0")
    groups = [to_fractions(group) for group in rewards]
    for b, group in enumerate(groups):
        if len(group) != len(groups[0]):
            raise ValueError(
                f"rewards group {b} has {len(group)} samples but group 0 has {len(groups[0])}"
            )
    flat = [x for group in groups for x in group]
    if max(flat) == min(flat):
        return [[Fraction(0)] * len(group) for group in groups]
    scale = std(flat, ddof) + eps_q
    return [[c / scale for c in _centred(group)] for group in groups]


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
    rewards: Sequence[Sequence[Number]],
    lengths: Sequence[Sequence[int]] | None = None,
    *,
    eps: float = 1e-6,
    ddof: int = 1,
    convention: Convention = "advest",
) -> list[list[Fraction]]:
    """REINFORCE++ with group baseline: c = r − group mean; A = c/(std_ddof(all c) + ε).

    ``rewards`` is a batch of groups (``[B][G]``); the std runs over all B·G centred values,
    whose mean is exactly 0 (no re-centring). All c = 0 (or B·G = 1) gives exact zeros.

    ``convention="verl-0.9.1"`` (verl/trainer/ppo/core_algos.py,
    compute_reinforce_plus_plus_baseline_outcome_advantage, and verl/utils/torch_functional.py,
    masked_whiten): c_i = r_i − group mean (c_i = r_i in a group of one), broadcast to the l_i
    tokens of response i (``lengths``, required), then whitened over all L = Σ l_i tokens:
    m = Σ l_i c_i / L, v = Σ l_i (c_i − m)² / (L − 1), A_i = (c_i − m)/sqrt(v + 1e-8).
    """
    _check_ddof(ddof, "reinforce_pp")
    check_convention(convention, "reinforce_pp")
    if len(rewards) == 0:
        raise ValueError("reinforce_pp needs at least one group in rewards; got B=0")
    if convention == "verl-0.9.1":
        check_verl_whiten("reinforce_pp", eps, ddof)
        return _reinforce_pp_verl(rewards, lengths)
    if lengths is not None:
        raise ValueError("reinforce_pp takes lengths only with convention='verl-0.9.1'")
    centred = [_centred(to_fractions(group)) for group in rewards]
    flat = [c for group in centred for c in group]
    if all(c == 0 for c in flat):
        return [[Fraction(0)] * len(group) for group in centred]
    scale = std(flat, ddof) + Fraction(eps)
    return [[c / scale for c in group] for group in centred]


def _reinforce_pp_verl(
    rewards: Sequence[Sequence[Number]], lengths: Sequence[Sequence[int]] | None
) -> list[list[Fraction]]:
    if lengths is None:
        raise ValueError(
            "reinforce_pp with convention='verl-0.9.1' whitens over tokens: pass lengths [B][G]"
        )
    groups = [to_fractions(group) for group in rewards]
    ells = to_lengths(lengths, groups, "of rewards ([B][G])")
    c = [g if len(g) == 1 else _centred(g) for g in groups]
    total = sum((l_i for group in ells for l_i in group), Fraction(0))
    if total == 1:
        raise ValueError("reinforce_pp (verl-0.9.1) needs at least 2 tokens in the batch; got 1")
    pairs = [
        (l_i, c_i) for lg, cg in zip(ells, c, strict=True) for l_i, c_i in zip(lg, cg, strict=True)
    ]
    m = sum((l_i * c_i for l_i, c_i in pairs), Fraction(0)) / total
    v = sum((l_i * (c_i - m) ** 2 for l_i, c_i in pairs), Fraction(0)) / (total - 1)
    scale = sqrt(v + VERL_WHITEN_EPS)
    return [[(c_i - m) / scale for c_i in group] for group in c]


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


def _check_eps(eps: float, name: str) -> Fraction:
    if isinstance(eps, bool) or not isinstance(eps, int | float) or not 0 <= eps < float("inf"):
        raise ValueError(f"{name} needs a finite eps >= 0; got eps={eps!r}")
    return Fraction(eps)


def _batch(rewards: Sequence[Sequence[Number]], name: str) -> list[list[Fraction]]:
    """``rewards`` (``[B][G]``) as exact rationals; every group is checked before B is, so a NaN is
    reported as such even in a batch that is also too small."""
    r = [to_fractions(group) for group in rewards]
    if len(r) < 2:
        raise ValueError(f"{name} needs at least 2 groups (prompts) in rewards; got B={len(r)}")
    for b, group in enumerate(r):
        if len(group) != len(r[0]):
            raise ValueError(
                f"rewards group {b} has {len(group)} samples but group 0 has {len(r[0])}"
            )
    return r


def james_stein(rewards: Sequence[Sequence[Number]], *, eps: float = 1e-6) -> list[list[Fraction]]:
    """James–Stein shrinkage baseline (JSPO, arXiv:2511.03710), literally:

    b_RLOO,pj = (Σ_k r_pk − r_pj)/(m − 1); r̄_{−p} = mean of all rewards of the other prompts;
    from the other prompts only: v² = mean_{p′≠p} s²_{p′}/m (s² the ddof-1 within-prompt
    variance), s² = mean_{p′≠p}(μ_{p′} − mean_{p″≠p} μ_{p″})², λ_p = v²/(v² + s² + ε);
    b_pj = (1 − λ_p)·b_RLOO,pj + λ_p·r̄_{−p}; A = r − b. Needs B >= 2 and G >= 2. With ε = 0 a
    zero denominator (v² = s² = 0) gives λ = 0, the value every ε > 0 gives there.
    """
    eps_q = _check_eps(eps, "james_stein")
    r = _batch(rewards, "james_stein")
    B, m = len(r), len(r[0])
    if m < 2:
        raise ValueError(f"james_stein needs groups of G >= 2 samples; got G={m}")
    mu = [mean(group) for group in r]
    s2_within = [sum(((x - mu[q]) ** 2 for x in r[q]), Fraction(0)) / (m - 1) for q in range(B)]
    out = []
    for p in range(B):
        others = [q for q in range(B) if q != p]
        v2 = mean([s2_within[q] / m for q in others])
        mu_bar = mean([mu[q] for q in others])
        s2 = mean([(mu[q] - mu_bar) ** 2 for q in others])
        denominator = v2 + s2 + eps_q
        lam = v2 / denominator if denominator else Fraction(0)
        r_bar = mean([x for q in others for x in r[q]])
        total = sum(r[p], Fraction(0))
        b_rloo = [(total - x) / (m - 1) for x in r[p]]
        out.append([x - ((1 - lam) * b + lam * r_bar) for x, b in zip(r[p], b_rloo, strict=True)])
    return out


class _Welford:
    """Welford's running count, mean and sum of squared deviations (EBPO's accumulators)."""

    def __init__(self) -> None:
        self.n, self.mean, self.m2 = 0, Fraction(0), Fraction(0)

    def add(self, x: Fraction) -> None:
        self.n += 1
        delta = x - self.mean
        self.mean += delta / self.n
        self.m2 += delta * (x - self.mean)

    def var(self) -> Fraction:
        """The sample variance M2/(n − 1) (ddof = 1)."""
        return self.m2 / (self.n - 1)


def ebpo_shrinkage(rewards: Sequence[Sequence[Number]]) -> tuple[Fraction | None, Fraction]:
    """EBPO's (S, μ_glob) for one batch with fresh Welford accumulators (Algorithm 1): S =
    (σ²/G)/(σ²/G + τ²) ∈ [0, 1], σ² = var(W_r), τ² = var(W_μ), ddof 1. S is None (0/0) for an
    all-equal batch."""
    r = _batch(rewards, "ebpo")
    G = len(r[0])
    w_r, w_mu = _Welford(), _Welford()
    for group in r:
        for x in group:
            w_r.add(x)
        w_mu.add(mean(group))
    sigma2, tau2 = w_r.var(), w_mu.var()
    if sigma2 == 0:
        return None, w_r.mean
    return (sigma2 / G) / (sigma2 / G + tau2), w_r.mean


def ebpo(rewards: Sequence[Sequence[Number]], *, eps: float = 1e-6) -> list[list[Fraction]]:
    """EBPO's empirical-Bayes shrinkage baseline (arXiv:2602.05165, Algorithm 1), for
    accumulators that start empty (one call = the first step; advest keeps no state here).

    The batch is first added to W_r (every reward) and W_μ (every group mean); μ_glob = mean(W_r),
    σ² = var(W_r), τ² = var(W_μ) (both ddof 1); S = (σ²/G)/(σ²/G + τ²);
    V_q = (1 − S)μ_q + S μ_glob; raw A = r − V_q; A = (raw − mean_B)/(std_B,ddof=1 + ε).
    Needs B >= 2 (τ² is a variance over groups). An all-equal batch gives exact zeros (there
    S = 0/0, but raw A = 0 for any S).
    """
    eps_q = _check_eps(eps, "ebpo")
    r = _batch(rewards, "ebpo")
    G = len(r[0])
    S, mu_glob = ebpo_shrinkage(r)
    if S is None:
        return [[Fraction(0)] * G for _ in r]
    raw = [[x - ((1 - S) * mean(group) + S * mu_glob) for x in group] for group in r]
    flat = [a for group in raw for a in group]
    centre = mean(flat)
    scale = std(flat, 1) + eps_q
    return [[(a - centre) / scale for a in group] for group in raw]


__all__ = public(globals())  # every public function and class above
