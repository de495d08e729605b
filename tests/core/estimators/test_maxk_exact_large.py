"""Every max@K estimator against an exact value at group sizes up to 1024.

The subset definitions (``reference.maxk``) are exponential, so beyond G = 9 the exact values
come from ``exact_outputs`` below: an O(G) transcription of spec/maxk.md's definitions in integer
arithmetic, written apart from ``fast/`` and from ``spec.maxk_weights`` (its weights are
binomials counted here, not read from the shared table), and itself checked against the subset
definitions for every N <= 7 and every K. ``fast/`` (float64, both max@K paths) must then be
within spec/tolerances.py's bound of it, whose scale is the group's spread (never max|r|), and
each case is checked to have teeth: an all-zeros output would break the bound.

How each exact value follows from the definitions, for a group sorted ascending (one stable
sort, positions p = 1..N, x the sorted values; the others of p, in order, are y_1..y_{N−1}):

* the max of a uniform m-subset of the others sits at y_t with probability
  C(t−1, m−1)/C(N−1, m), so C_p (m = K−1), M⁻_p (m = K) and M⁺_p (its max with x_p; x_p itself
  at K = 1) are one prefix and one suffix sum each, and EI = M⁺ − C;
* l2o_baseline = M⁻ − C (I2), canonical = M⁺ − M⁻, maxpo = EI − b (Eq. 7), ei_l1o = EI_i minus
  the mean of the other EIs;
* pkpo_s = C(N−1, K−1)/C(N, K)·M⁺ (every K-set holding i is i with a (K−1)-set of the others),
  pkpo_sloo = pkpo_s − K/(N−1)·M⁻ (Σ_{j∈X} S(j, K, X) = K·M̂_K(X)), pkpo_sloo_minus_one =
  (K/N)·EI (the same count);
* tang_passk: the gap to the runner-up on a unique arg-max; bagirov_transform: Eq. 9 as
  written, by a suffix sum; bagirov_centered and bagirov_zscore: its definitions from there;
  chen_passk: ``reference.maxk.chen_passk``, which is O(N) already.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from fractions import Fraction

import pytest
import torch

import advest.reference.maxk as rm
from advest.fast import registry
from advest.oracle.reports.catalogue import CATALOGUE, Row
from advest.oracle.reports.catalogue import tolerance_entry as entry
from advest.reference._exact import std
from advest.spec.tolerances import output_floor
from tests.maxk_paths import Path, forced_path

MAXK_ROWS = [row for row in CATALOGUE if row.k_domain is not None]
SIZES = [16, 64, 65, 128, 257, 1024]


def _comb(n: int, k: int) -> int:
    return math.comb(n, k) if 0 <= k <= n else 0


def _expected_max_of_others(X: Sequence[int], m: int) -> tuple[list[int], list[int]]:
    """The expected max of a uniform m-subset of the others of each sample, times C(N−1, m), as
    two sums. For the sample at 0-based sorted position p the others, in order, are y_t
    (1-based t = 1..N−1): y_t = X[t−1] for t <= p, X[t] for t > p; the max sits at y_t with
    probability c_t/C(N−1, m), c_t = C(t−1, m−1). Returns (Σ_{t<=p} c_t y_t, Σ_{t>p} c_t y_t)
    for every p. m >= 1."""
    n = len(X)
    c = [_comb(t - 1, m - 1) for t in range(1, n)]  # t = 1..N−1
    below, running = [], 0
    for p in range(n):
        below.append(running)
        if p < n - 1:
            running += c[p] * X[p]  # X[p] is y_{p+1} for every later position
    above, running = [0] * n, 0
    for p in range(n - 1, -1, -1):
        above[p] = running
        if p >= 1:
            running += c[p - 1] * X[p]  # X[p] is y_p for every earlier position
    return below, above


def exact_outputs(rewards: Sequence[Fraction], k: int) -> dict[str, list[Fraction]]:
    """Every max@K estimator of one group, exactly, in the original order (see the module
    docstring for the derivation). Keys: the estimator names; those needing K <= N−1 only then,
    and ``tang_passk`` only at K = N. ``chen_passk`` is not here (binary rewards only)."""
    n = len(rewards)
    order = sorted(range(n), key=lambda t: rewards[t])  # stable
    d = math.lcm(*(x.denominator for x in rewards))
    X = [int(rewards[t] * d) for t in order]  # the sorted rewards times d, as integers

    def back(values: Sequence[Fraction]) -> list[Fraction]:
        out = [Fraction(0)] * n
        for p, t in enumerate(order):
            out[t] = values[p]
        return out

    if k == 1:  # max(∅) = 0: M⁺ = x, C = 0
        m_plus = [Fraction(x, d) for x in X]
        comparator = [Fraction(0)] * n
    else:
        below, above = _expected_max_of_others(X, k - 1)
        c_count = _comb(n - 1, k - 1) * d
        # M⁺: the others below p lose to x_p; their total probability is Σ_{t<p} c_t
        weight_below = [_comb(p, k - 1) for p in range(n)]  # Σ_{t<=p} C(t−1, K−2) (hockey stick)
        m_plus = [Fraction(weight_below[p] * X[p] + above[p], c_count) for p in range(n)]
        comparator = [Fraction(below[p] + above[p], c_count) for p in range(n)]
    out: dict[str, list[Fraction]] = {}
    ei = [a - c for a, c in zip(m_plus, comparator, strict=True)]
    out["ei"] = back(ei)
    out["pkpo_s"] = back([Fraction(k, n) * a for a in m_plus])
    out["pkpo_sloo_minus_one"] = back([Fraction(k, n) * e for e in ei])
    if n >= 2:
        total = sum(ei, Fraction(0))
        out["ei_l1o"] = back([e - (total - e) / (n - 1) for e in ei])
    if k <= n - 1:
        below, above = _expected_max_of_others(X, k)
        m_minus = [Fraction(below[p] + above[p], _comb(n - 1, k) * d) for p in range(n)]
        b = [m - c for m, c in zip(m_minus, comparator, strict=True)]
        out["l2o_baseline"] = back(b)
        out["canonical"] = back([a - m for a, m in zip(m_plus, m_minus, strict=True)])
        out["maxpo"] = back([e - bb for e, bb in zip(ei, b, strict=True)])
        out["pkpo_sloo"] = back(
            [
                Fraction(k, n) * a - Fraction(k, n - 1) * m
                for a, m in zip(m_plus, m_minus, strict=True)
            ]
        )
    if k == n:
        top = Fraction(X[-1], d)
        unique = n == 1 or X[-2] < X[-1]
        gap = (top if n == 1 else top - Fraction(X[-2], d)) if unique else Fraction(0)
        out["tang_passk"] = back([Fraction(0)] * (n - 1) + [gap])
    out.update(_bagirov(X, d, k, back))
    return out


def _bagirov(
    X: Sequence[int], d: int, k: int, back: Callable[[Sequence[Fraction]], list[Fraction]]
) -> dict[str, list[Fraction]]:
    """Bagirov Eq. 9 as written (1-based i, j): r̃_(i) = [C(i−1, K−1) r_(i) + Σ_{j>i} C(j−2, K−2)
    r_(j)] / C(N, K); then the mean-centred and z-scored forms (std without ε; zeros if flat)."""
    n = len(X)
    suffix, running = [0] * (n + 2), 0
    for j in range(n, 0, -1):
        suffix[j] = running  # Σ_{j' > j}
        running += _comb(j - 2, k - 2) * X[j - 1]
    den = _comb(n, k) * d
    transform = [Fraction(_comb(i - 1, k - 1) * X[i - 1] + suffix[i], den) for i in range(1, n + 1)]
    out = {"bagirov_transform": back(transform)}
    if k <= n - 1:
        centre = sum(transform, Fraction(0)) / n
        centred = [t - centre for t in transform]
        out["bagirov_centered"] = back(centred)
        for ddof in (0, 1):
            flat = all(c == 0 for c in centred)
            scale = Fraction(1) if flat else std(centred, ddof)
            out[f"bagirov_zscore[ddof={ddof}]"] = back([c / scale for c in centred])
    return out


def _key(row: Row) -> str:
    """The key of ``exact_outputs`` for a row: bagirov_zscore carries its ddof (default 1)."""
    if row.name == "bagirov_zscore":
        return f"bagirov_zscore[ddof={row.options.get('ddof', 1)}]"
    return row.name


def _as_fractions(rewards: torch.Tensor) -> list[list[Fraction]]:
    return [[Fraction(x) for x in group] for group in rewards.tolist()]


def _general_batch(G: int) -> torch.Tensor:
    """``[4, G]`` float64: ties with an offset (values /7: not dyadic), quarters of both signs
    with a unique top, 2²⁰ + a spread of 4·2⁻²⁰ on five levels (a spread 10¹¹ below max|r|: a
    bound on max|r| would accept anything), and binary."""
    gen = torch.Generator().manual_seed(G)
    ties = torch.randint(0, 50, (G,), generator=gen).double() / 7 + 100
    signs = torch.randint(-20, 20, (G,), generator=gen).double() / 4
    signs[int(torch.randint(0, G, (1,), generator=gen))] = 5.5
    offset = 2.0**20 + torch.randint(0, 5, (G,), generator=gen).double() * 2.0**-20
    binary = (torch.rand(G, generator=gen) < 0.7).double()
    return torch.stack([ties, signs, offset, binary])


def _binary_batch(G: int, k: int) -> torch.Tensor:
    """``[3, G]``: one correct sample, exactly K failures (the fewest that leave Δ ≠ 0), and
    random; each shuffled."""
    gen = torch.Generator().manual_seed(G + k)
    rows = [
        torch.arange(G) < 1,
        torch.arange(G) >= min(k, G - 1),
        torch.rand(G, generator=gen) < 0.5,
    ]
    return torch.stack([r[torch.randperm(G, generator=gen)] for r in rows]).double()


def _ks(G: int) -> list[int]:
    return sorted({1, 2, 3, G // 2, G - 1, G})


def _check(row: Row, rewards: torch.Tensor, exact: list[list[Fraction]], k: int) -> None:
    """fast (float64, each path where the estimator sorts) within spec/tolerances.py's bound of
    the exact values, and an all-zeros output outside it."""
    want = torch.tensor([[float(x) for x in group] for group in exact], dtype=torch.float64)
    tol = entry(row.name, torch.float64)
    assert tol.scale == "group", row.id  # spread and output size, never max|r|
    spread = rewards.amax(1) - rewards.amin(1)  # rounded at most once: an ulp of the spread
    scale = torch.maximum(spread, want.abs().amax(1))  # [B]
    # (converting the exact values to float costs half an ulp of |A|, far inside 1e-9·scale)
    allowed = tol.rel * scale + output_floor(torch.float64)  # [B]
    where = f"{row.id} G={rewards.shape[1]} K={k}"
    assert bool((want.abs().amax(1) > allowed).any()), f"{where}: all zeros would pass"
    sorts = row.name not in ("chen_passk", "tang_passk")
    paths: tuple[Path, ...] = ("sorted", "counts") if sorts else ("sorted",)
    for path in paths:
        with forced_path(path):
            got = row.call_fast(rewards, k, None)
        err = (got - want).abs().amax(1)  # [B]
        assert bool((err <= allowed).all()), (
            f"{where} {path}: |error|/scale {(err / scale).tolist()}"
        )


@pytest.mark.parametrize("G", SIZES)
def test_every_maxk_estimator_matches_its_exact_value_up_to_g_1024(G: int) -> None:
    """All 13 max@K estimators (every catalogue variant), K in {1, 2, 3, G/2, G−1, G} where
    valid, on both max@K paths, in float64 against the exact value."""
    general = _general_batch(G)
    exact_in = _as_fractions(general)
    for k in _ks(G):
        exact = [exact_outputs(group, k) for group in exact_in]
        for row in MAXK_ROWS:
            if k not in row.k_values(G):
                continue
            if row.binary_only:
                binary = _binary_batch(G, k)
                chen = [rm.chen_passk(group, k, **row.options) for group in _as_fractions(binary)]
                _check(row, binary, chen, k)
            else:
                _check(row, general, [values[_key(row)] for values in exact], k)


def test_every_registered_maxk_estimator_has_an_exact_value() -> None:
    names = {n for n in registry.names() if registry.entry(n).k_range is not None}
    assert len(names) == 13
    assert {row.name for row in MAXK_ROWS} == names
    covered = set(exact_outputs([Fraction(1), Fraction(2), Fraction(0)], 2))
    covered |= set(exact_outputs([Fraction(1), Fraction(2), Fraction(0)], 3))
    assert {_key(row) for row in MAXK_ROWS if row.name != "chen_passk"} <= covered


def _small_groups(n: int) -> list[list[Fraction]]:
    f = Fraction
    j = list(range(n))
    return [
        [f(0)] * n,
        [f(7, 3)] * n,
        [f(int(i == n // 2)) for i in j],
        [f(5) if i % 3 == 0 else f(i, 4) for i in j],
        [f(-7) if i % 2 else f(i + 1, 3) for i in j],
        [f((-1) ** i * (i + 1), i + 2) for i in j],
        [f(10**6) + f(i % 3, 10**7) for i in j],
        [f((i * 7) % 4, 2) - 1 for i in j],
    ]


@pytest.mark.parametrize("n", range(1, 8))
def test_the_exact_values_equal_the_subset_definitions(n: int) -> None:
    """``exact_outputs`` == ``reference.maxk`` on hostile groups, N <= 7, every K: exactly,
    and for the z-scores (a 60-digit square root each) within 1e-40."""
    for r in _small_groups(n):
        for k in range(1, n + 1):
            for key, got in exact_outputs(r, k).items():
                if key == "tang_passk":
                    assert got == rm.tang_passk(r), (r, k)
                elif key.startswith("bagirov_zscore"):
                    want = rm.bagirov_zscore(r, k, ddof=int(key[-2]))
                    close = zip(got, want, strict=True)
                    assert all(abs(a - b) < Fraction(1, 10**40) for a, b in close), key
                else:
                    assert got == getattr(rm, key)(r, k), (key, r, k)
