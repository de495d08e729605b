"""max@K / pass@K advantage estimators, exactly, by enumeration over subsets.

Notation (``spec/maxk.md``): one group of N rewards r_1..r_N, comparator size K, O_i = {1..N}\\{i}.
"avg over S ⊂ X, |S| = m" is the uniform average over all C(|X|, m) subsets. max(∅) := 0, which
makes every estimator reduce to its REINFORCE / RLOO limit at K = 1.

Sources: MaxPO, arXiv:2606.06080 (Eqs. 5-8); PKPO, arXiv:2505.15201 v4 (Eqs. 19-21, 27-29, 33);
Chen et al., arXiv:2508.10751 (Eqs. 14-15); Bagirov et al., arXiv:2510.23393 (Eq. 9, App. A);
Tang et al., arXiv:2503.19595.

Every function takes one group (ints, floats or Fractions; floats are converted exactly) and
returns a ``list[Fraction]`` in the original sample order. Brute force: use N <= 12.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from fractions import Fraction
from itertools import combinations

from advest.spec.conventions import check_passk_convention

from ._exact import Number, check_k, comb, mean, public, sqrt, std, to_fractions


def _max(values: Iterable[Fraction]) -> Fraction:
    """max with the convention max(∅) = 0."""
    return max(values, default=Fraction(0))


def _avg(
    r: Sequence[Fraction], pool: Iterable[int], size: int, f: Callable[[list[Fraction]], Fraction]
) -> Fraction:
    """avg over S ⊂ pool, |S| = size, of f([r_j for j in S])."""
    return mean([f([r[j] for j in s]) for s in combinations(pool, size)])


def _without(n: int, *removed: int) -> list[int]:
    return [j for j in range(n) if j not in removed]


def _group(rewards: Sequence[Number], k: int, name: str, *, k_max_offset: int) -> list[Fraction]:
    r = to_fractions(rewards)
    check_k(k, len(r), name, k_max=len(r) - k_max_offset)
    return r


# --- building blocks (spec/maxk.md §1) -----------------------------------------------------------


def m_plus(rewards: Sequence[Number], k: int) -> list[Fraction]:
    """M⁺_i = avg over S ⊂ O_i, |S| = K−1, of max(r_i, max_S r). Domain 1 <= K <= N."""
    r = _group(rewards, k, "m_plus", k_max_offset=0)
    n = len(r)

    def with_target(x: Fraction) -> Callable[[list[Fraction]], Fraction]:
        return lambda s: _max([x, *s])

    return [_avg(r, _without(n, i), k - 1, with_target(x)) for i, x in enumerate(r)]


def m_minus(rewards: Sequence[Number], k: int) -> list[Fraction]:
    """M⁻_i = avg over T ⊂ O_i, |T| = K, of max_T r (leave-one-out max@K). Domain 1 <= K <= N−1."""
    r = _group(rewards, k, "m_minus", k_max_offset=1)
    return [_avg(r, _without(len(r), i), k, _max) for i in range(len(r))]


def comparator_max(rewards: Sequence[Number], k: int) -> list[Fraction]:
    """C_i = avg over S ⊂ O_i, |S| = K−1, of max_S r (0 at K = 1). Domain 1 <= K <= N."""
    r = _group(rewards, k, "comparator_max", k_max_offset=0)
    return [_avg(r, _without(len(r), i), k - 1, _max) for i in range(len(r))]


def m_hat(rewards: Sequence[Number], k: int) -> Fraction:
    """M̂_K = avg over T ⊂ {1..N}, |T| = K, of max_T r: the unbiased max@K estimate (PKPO ρ)."""
    r = _group(rewards, k, "m_hat", k_max_offset=0)
    return _avg(r, range(len(r)), k, _max)


# --- MaxPO (arXiv:2606.06080) --------------------------------------------------------------------


def _ei_on(r: Sequence[Fraction], j: int, pool: list[int], k: int) -> Fraction:
    """avg over S ⊂ pool, |S| = K−1, of max(r_j, max_S r) − max_S r  (Eq. 5)."""
    return _avg(r, pool, k - 1, lambda s: _max([r[j], *s]) - _max(s))


def ei(rewards: Sequence[Number], k: int) -> list[Fraction]:
    """Expected improvement EI_i (MaxPO Eq. 5); equals r_i at K = 1. Domain 1 <= K <= N.

    >>> ei([3, 1, 4, 1, 5], 2)
    [Fraction(1, 1), Fraction(0, 1), Fraction(7, 4), Fraction(0, 1), Fraction(11, 4)]
    """
    r = _group(rewards, k, "ei", k_max_offset=0)
    return [_ei_on(r, i, _without(len(r), i), k) for i in range(len(r))]


def l2o_baseline(rewards: Sequence[Number], k: int) -> list[Fraction]:
    """Leave-two-out baseline b_i = (1/(N−1)) Σ_{j≠i} EI_j^(−i) (MaxPO Eq. 6). Domain 1 <= K <= N−1.

    EI_j^(−i) is the EI of j on the pool without i, with comparators of the same size K−1.
    """
    r = _group(rewards, k, "l2o_baseline", k_max_offset=1)
    n = len(r)
    return [
        sum((_ei_on(r, j, _without(n, i, j), k) for j in _without(n, i)), Fraction(0)) / (n - 1)
        for i in range(n)
    ]


def maxpo(rewards: Sequence[Number], k: int) -> list[Fraction]:
    """MaxPO advantage EI_i − b_i (MaxPO Eq. 7, Alg. 1). Domain 1 <= K <= N−1."""
    _group(rewards, k, "maxpo", k_max_offset=1)
    return [e - b for e, b in zip(ei(rewards, k), l2o_baseline(rewards, k), strict=True)]


def canonical(rewards: Sequence[Number], k: int) -> list[Fraction]:
    """Canonical centred advantage Δ_i = M⁺_i − M⁻_i (MaxPO Eq. 8). Domain 1 <= K <= N−1."""
    _group(rewards, k, "canonical", k_max_offset=1)
    return [p - m for p, m in zip(m_plus(rewards, k), m_minus(rewards, k), strict=True)]


def ei_l1o(rewards: Sequence[Number], k: int) -> list[Fraction]:
    """EI_i − (1/(N−1)) Σ_{j≠i} EI_j with full-batch EIs: biased for K >= 2 (MaxPO §5.1).

    Domain N >= 2, 1 <= K <= N.
    """
    r = _group(rewards, k, "ei_l1o", k_max_offset=0)
    if len(r) < 2:
        raise ValueError(f"ei_l1o needs N >= 2; got K={k}, N={len(r)}")
    e = ei(r, k)
    n = len(r)
    return [e[i] - sum((e[j] for j in _without(n, i)), Fraction(0)) / (n - 1) for i in range(n)]


def tang_passk(rewards: Sequence[Number]) -> list[Fraction]:
    """Tang et al. (arXiv:2503.19595): EI at K = N, i.e. PKPO Eq. 33 with K = N. Domain N >= 1."""
    r = to_fractions(rewards)
    return ei(r, len(r))


# --- PKPO (arXiv:2505.15201 v4) ------------------------------------------------------------------


def _s(r: Sequence[Fraction], j: int, k: int, pool: list[int]) -> Fraction:
    """S(j, K, X) = (1/C(|X|,K)) Σ_{I ⊂ X, |I| = K, j ∈ I} max_I r  (PKPO Eq. 28)."""
    total = sum((_max([r[t] for t in s]) for s in combinations(pool, k) if j in s), Fraction(0))
    return total / comb(len(pool), k)


def pkpo_s(rewards: Sequence[Number], k: int) -> list[Fraction]:
    """s_i = (1/C(N,K)) Σ_{|I|=K, i ∈ I} max_I r (PKPO Eqs. 19-21, 27). Domain 1 <= K <= N."""
    r = _group(rewards, k, "pkpo_s", k_max_offset=0)
    return [_s(r, i, k, list(range(len(r)))) for i in range(len(r))]


def pkpo_sloo(rewards: Sequence[Number], k: int) -> list[Fraction]:
    """sloo_i = S(i, K, [N]) − (1/(N−1)) Σ_{j≠i} S(j, K, [N]\\{i}) (PKPO Eq. 29). K <= N−1."""
    r = _group(rewards, k, "pkpo_sloo", k_max_offset=1)
    n = len(r)
    everyone = list(range(n))
    return [
        _s(r, i, k, everyone)
        - sum((_s(r, j, k, _without(n, i)) for j in _without(n, i)), Fraction(0)) / (n - 1)
        for i in range(n)
    ]


def pkpo_sloo_minus_one(rewards: Sequence[Number], k: int) -> list[Fraction]:
    """(1/C(N,K)) Σ_{|I|=K, i ∈ I} [max_I r − max_{I\\{i}} r] (PKPO Eq. 33). Domain 1 <= K <= N.

    At K = 1 this is r_i / N (max(∅) = 0), not PKPO's listing, which divides by K−1.
    """
    r = _group(rewards, k, "pkpo_sloo_minus_one", k_max_offset=0)
    n = len(r)
    return [
        sum(
            (
                _max([r[t] for t in s]) - _max([r[t] for t in s if t != i])
                for s in combinations(range(n), k)
                if i in s
            ),
            Fraction(0),
        )
        / comb(n, k)
        for i in range(n)
    ]


# --- Chen et al. (arXiv:2508.10751) --------------------------------------------------------------


def chen_passk(
    rewards: Sequence[Number], k: int, *, normalize: bool = True, convention: str = "advest"
) -> list[Fraction]:
    """Chen et al.'s analytical pass@K advantage (Eqs. 14-15); binary rewards only. K <= N−1.

    R̄ = 1 − C(N_neg, K)/C(N, K); correct: 1 − R̄; incorrect: 1 − R̄ − C(N_neg−1, K−1)/C(N−1, K−1).
    ``normalize`` divides by σ = sqrt(R̄(1 − R̄)) (no ε) and gives exact zeros when R̄ ∈ {0, 1}.
    σ is irrational in general: the result is then exact up to the 60-digit square root.
    ``convention="passk_training@00474d7"``: divides by σ + 1e-6 (the double, exactly), as
    RUCAIBox/Passk_Training code/passk_adv.py (commit 00474d7) ``calc_adv`` does.
    """
    check_passk_convention(convention, normalize)
    eps = Fraction(1e-6) if convention != "advest" else Fraction(0)
    r = _group(rewards, k, "chen_passk", k_max_offset=1)
    for i, value in enumerate(r):
        if value not in (0, 1):
            raise ValueError(
                "chen_passk needs binary rewards (exactly 0 or 1); "
                f"group 0 has {value} at sample {i}"
            )
    n = len(r)
    n_neg = sum(1 for value in r if value == 0)
    r_bar = 1 - Fraction(comb(n_neg, k), comb(n, k))
    raw = [
        1 - r_bar
        if value == 1
        else 1 - r_bar - Fraction(comb(n_neg - 1, k - 1), comb(n - 1, k - 1))
        for value in r
    ]
    if not normalize:
        return raw
    if r_bar in (0, 1):
        return [Fraction(0)] * n
    sigma = sqrt(r_bar * (1 - r_bar))
    return [a / (sigma + eps) for a in raw]


# --- Bagirov et al. (arXiv:2510.23393) -----------------------------------------------------------


def bagirov_transform(rewards: Sequence[Number], k: int) -> list[Fraction]:
    """All-subsets transform r̃ (Bagirov Eq. 9): sorted ascending, 1-based positions,

    r̃_i = Σ_j w_ij r_(j) / C(N, K), w_ii = C(i−1, K−1), w_ij = C(j−2, K−2) for j > i, else 0.
    Ties are broken by one stable sort. Domain 1 <= K <= N.
    """
    r = _group(rewards, k, "bagirov_transform", k_max_offset=0)
    n = len(r)
    order = sorted(range(n), key=lambda t: r[t])  # stable
    out = [Fraction(0)] * n
    for i in range(1, n + 1):
        total = Fraction(comb(i - 1, k - 1)) * r[order[i - 1]]
        total += sum(
            (comb(j - 2, k - 2) * r[order[j - 1]] for j in range(i + 1, n + 1)), Fraction(0)
        )
        out[order[i - 1]] = total / comb(n, k)
    return out


def bagirov_centered(rewards: Sequence[Number], k: int) -> list[Fraction]:
    """r̃_i − mean_j r̃_j (Bagirov Eq. 9, mean-centred). Domain 1 <= K <= N−1."""
    _group(rewards, k, "bagirov_centered", k_max_offset=1)
    transform = bagirov_transform(rewards, k)
    centre = mean(transform)
    return [t - centre for t in transform]


def bagirov_zscore(rewards: Sequence[Number], k: int, *, ddof: int = 1) -> list[Fraction]:
    """Bagirov's "BoN mean" (App. A): (r̃ − mean r̃)/std_ddof(r̃), no ε; exact zeros if r̃ is flat.

    Irrational in general: exact up to the 60-digit square root. Domain 1 <= K <= N−1.
    """
    if ddof not in (0, 1):
        raise ValueError(f"bagirov_zscore needs ddof in (0, 1); got ddof={ddof!r}")
    _group(rewards, k, "bagirov_zscore", k_max_offset=1)
    centred = bagirov_centered(rewards, k)
    if all(c == 0 for c in centred):
        return centred
    scale = std(centred, ddof)
    return [c / scale for c in centred]


__all__ = public(globals())  # every public function and class above
