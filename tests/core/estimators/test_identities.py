"""The identities of spec/maxk.md §Identities and spec/group.md §Relations: exact in the reference,
within tolerance in fast (float64)."""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from itertools import combinations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import advest.fast.group
import advest.fast.maxk  # noqa: F401  (binds the submodule used as fast.maxk)
import advest.reference.group as rg
import advest.reference.maxk as rm
from advest import fast
from advest.fast import maxk_dense
from advest.oracle.reports.catalogue import tolerance
from advest.reference._exact import mean
from advest.spec.tolerances import output_floor
from tests.strategies import batches

# Every test here runs on both max@K paths, forced (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("maxk_path")

Vec = list[Fraction]


def _fast(fn: Callable[..., torch.Tensor], r: Vec, *args: object, **kw: object) -> Vec:
    out = fn(torch.tensor([[float(x) for x in r]], dtype=torch.float64), *args, **kw)
    return [Fraction(v) for v in out[0].tolist()]


# spec/tolerances.py: every maxk and group estimator has rel = 1e-9 in float64, on the scale
# max(spread of the group, max |output|) — never max|r|, which would let a 1e6 offset hide errors.
REL = Fraction(tolerance("canonical", torch.float64))
FLOOR = Fraction(output_floor(torch.float64))


def _spread(r: Vec) -> Fraction:
    return max(r) - min(r)


def _mismatches(a: Vec, b: Vec, r: Vec, exact: bool) -> list[tuple[int, Fraction, Fraction]]:
    """(i, a_i, b_i) wherever a and b differ: at all in the reference, beyond 1e-9 of the
    group's scale (its spread or the outputs' size) in fast. A length mismatch is a mismatch."""
    if len(a) != len(b):
        return [(-1, Fraction(len(a)), Fraction(len(b)))]
    scale = max([_spread(r)] + [abs(x) for x in a + b])
    tol = Fraction(0) if exact else REL * scale + FLOOR
    return [(i, x, y) for i, (x, y) in enumerate(zip(a, b, strict=True)) if abs(x - y) > tol]


# --- independent float64 computations for the fast halves ---------------------------------------
# fast.maxk evaluates pkpo_s and bagirov_transform with the same form (m_plus), pkpo_sloo_minus_one
# as (K/N)·EI with EI's form, bagirov_centered from canonical's Δ, and fast.group.rloo from
# dr_grpo's centring: comparing those pairs compares one code path with itself. The fast halves
# below compare each fast estimator with an independent transcription of the other side instead.


def _row(r: Vec) -> torch.Tensor:
    return torch.tensor([[float(x) for x in r]], dtype=torch.float64)  # [1, G]


def _back(t: torch.Tensor) -> Vec:
    return [Fraction(v) for v in t[0].tolist()]


def _ei_independent(r: Vec, k: int) -> Vec:
    """EI by MaxPO Thm E.1 (fast.maxk_dense: dense gaps, no forms); r itself at K = 1."""
    return r if k == 1 else _back(maxk_dense.ei_dense(_row(r), k))


def _delta_independent(r: Vec, k: int) -> Vec:
    """Δ = EI − b (I3) by Thms E.1 and E.2 (dense); RLOO at K = 1 (I16), from its definition."""
    if k == 1:
        return _rloo_by_definition(r)
    t = _row(r)
    return _back(maxk_dense.ei_dense(t, k) - maxk_dense.l2o_dense(t, k))


def _bagirov_eq9_dense(r: Vec, k: int) -> Vec:
    """Bagirov Eq. 9 as a dense [G, G] matrix of integer binomials on the sorted rewards minus
    their max (the rows sum to C(N, K)·K/N, so the max comes back times K/N)."""
    n = len(r)
    rs, perm = torch.sort(_row(r)[0], stable=True)
    top = rs[-1]
    w = torch.zeros(n, n, dtype=torch.float64)
    for i in range(1, n + 1):
        w[i - 1, i - 1] = math.comb(i - 1, k - 1)
        for j in range(i + 1, n + 1):
            w[i - 1, j - 1] = math.comb(j - 2, k - 2) if k >= 2 else 0
    sorted_out = w @ (rs - top) / math.comb(n, k) + k / n * top
    return _back(torch.empty_like(sorted_out).scatter_(0, perm, sorted_out).unsqueeze(0))


def _pkpo_s_by_subsets(r: Vec, k: int) -> Vec:
    """PKPO s_i = (1/C(N,K)) Σ_{|I|=K, i ∈ I} max_I r, enumerating the subsets in torch."""
    n = len(r)
    x = _row(r)[0]
    subsets = torch.tensor(list(combinations(range(n), k)), dtype=torch.int64)  # [C, K]
    maxima = x[subsets].amax(dim=1, keepdim=True).expand(-1, k)  # [C, K]
    total = torch.zeros(n, dtype=torch.float64).index_add_(0, subsets.flatten(), maxima.flatten())
    return _back((total / math.comb(n, k)).unsqueeze(0))


def _rloo_by_definition(r: Vec) -> Vec:
    """r_i − mean of the others, as a leave-one-out sum (not G/(G−1)·(r − mean))."""
    x = _row(r)[0]
    x = x - x.min()
    others = (x.sum() - x) / (len(r) - 1)
    return _back((x - others).unsqueeze(0))


def _scaled(c: Fraction, v: Vec) -> Vec:
    return [c * x for x in v]


group_and_k = st.data()


def _draw(
    data: st.DataObject, min_n: int, max_n: int = 7, k_max_offset: int = 1
) -> tuple[Vec, int]:
    r = data.draw(batches(min_n, max_n, max_b=1))[0]
    return r, data.draw(st.integers(1, len(r) - k_max_offset))


IMPLS = pytest.mark.parametrize("exact", [True, False], ids=["reference", "fast64"])


def _impl(exact: bool, name: str) -> Callable[..., Vec]:
    if exact:
        fn: Callable[..., Vec] = getattr(rm, name, None) or getattr(rg, name)
        return fn
    torch_fn = getattr(fast.maxk, name, None) or getattr(fast.group, name)
    return lambda r, *a, **kw: _fast(torch_fn, r, *a, **kw)


@IMPLS
@given(data=group_and_k)
def test_maxpo_equals_canonical_with_constant_one(exact: bool, data: st.DataObject) -> None:
    """I3: EI − b = Δ."""
    r, k = _draw(data, 2)
    assert not _mismatches(_impl(exact, "maxpo")(r, k), _impl(exact, "canonical")(r, k), r, exact)


@IMPLS
@given(data=group_and_k)
def test_chen_raw_is_canonical_times_n_minus_k_over_n(exact: bool, data: st.DataObject) -> None:
    """I9: Chen raw = ((N−K)/N)·Δ (binary rewards)."""
    r = data.draw(batches(2, 8, binary=True, max_b=1))[0]
    n = len(r)
    k = data.draw(st.integers(1, n - 1))
    chen = _impl(exact, "chen_passk")(r, k, normalize=False)
    assert not _mismatches(
        chen, _scaled(Fraction(n - k, n), _impl(exact, "canonical")(r, k)), r, exact
    )


@IMPLS
@given(data=group_and_k)
def test_bagirov_centred_is_canonical_times_k_n_minus_k_over_n_squared(
    exact: bool, data: st.DataObject
) -> None:
    """I10."""
    r, k = _draw(data, 2)
    n = len(r)
    delta = _impl(exact, "canonical")(r, k) if exact else _delta_independent(r, k)
    want = _scaled(Fraction(k * (n - k), n * n), delta)
    assert not _mismatches(_impl(exact, "bagirov_centered")(r, k), want, r, exact)


@IMPLS
@given(data=group_and_k)
def test_pkpo_sloo_minus_one_is_k_over_n_times_ei(exact: bool, data: st.DataObject) -> None:
    """I7."""
    r, k = _draw(data, 1, k_max_offset=0)
    ei = _impl(exact, "ei")(r, k) if exact else _ei_independent(r, k)
    want = _scaled(Fraction(k, len(r)), ei)
    assert not _mismatches(_impl(exact, "pkpo_sloo_minus_one")(r, k), want, r, exact)


@IMPLS
@given(data=group_and_k)
def test_pkpo_s_equals_bagirov_transform(exact: bool, data: st.DataObject) -> None:
    """I6 (the two papers' weights are different-looking transcriptions of one transform)."""
    r, k = _draw(data, 1, k_max_offset=0)
    pkpo, bagirov = _impl(exact, "pkpo_s")(r, k), _impl(exact, "bagirov_transform")(r, k)
    if exact:
        assert not _mismatches(pkpo, bagirov, r, exact)
    else:  # each fast estimator against the other paper's formula, computed independently
        assert not _mismatches(pkpo, _bagirov_eq9_dense(r, k), r, exact)
        assert not _mismatches(bagirov, _pkpo_s_by_subsets(r, k), r, exact)


@IMPLS
@given(r=batches(2, 8, max_b=1).map(lambda b: b[0]))
def test_k_equal_one_reduces_the_family_to_rloo(exact: bool, r: Vec) -> None:
    """I16: EI = r; b = mean of the others; Δ = maxpo = ei_l1o = rloo; pkpo_s = sloo−1 = r/N."""
    f = lambda name: _impl(exact, name)  # noqa: E731
    n = len(r)
    assert not _mismatches(f("ei")(r, 1), r, r, exact)
    assert not _mismatches(f("l2o_baseline")(r, 1), [(sum(r) - x) / (n - 1) for x in r], r, exact)
    for name in ("canonical", "maxpo", "ei_l1o"):
        assert not _mismatches(f(name)(r, 1), f("rloo")(r), r, exact)
    for name in ("pkpo_s", "pkpo_sloo_minus_one"):
        assert not _mismatches(f(name)(r, 1), _scaled(Fraction(1, n), r), r, exact)


@IMPLS
@given(data=group_and_k)
def test_ei_and_l2o_baseline_are_bounded(exact: bool, data: st.DataObject) -> None:
    """P5 (K >= 2): 0 <= EI_i <= max r − min r and b_i >= 0."""
    r = data.draw(batches(3, 8, max_b=1))[0]
    k = data.draw(st.integers(2, len(r) - 1))
    tol = Fraction(0) if exact else REL * _spread(r) + FLOOR
    assert all(-tol <= e <= max(r) - min(r) + tol for e in _impl(exact, "ei")(r, k))
    assert all(b >= -tol for b in _impl(exact, "l2o_baseline")(r, k))


@IMPLS
@given(r=batches(2, 8, binary=True, max_b=1).map(lambda b: b[0]))
def test_normalised_chen_at_k1_is_grpo_with_population_std_and_no_eps(exact: bool, r: Vec) -> None:
    """P7."""
    chen = _impl(exact, "chen_passk")(r, 1)
    grpo = _impl(exact, "grpo")(r, ddof=0, eps=0.0)
    if exact:
        assert all(abs(a - b) < Fraction(1, 10**40) for a, b in zip(chen, grpo, strict=True))
    else:
        assert not _mismatches(chen, grpo, r, exact)


@given(data=group_and_k)
def test_building_block_identities_i1_i2_i5_i8_i13(data: st.DataObject) -> None:
    r, k = _draw(data, 2)
    n = len(r)
    m_plus, m_minus, comp = rm.m_plus(r, k), rm.m_minus(r, k), rm.comparator_max(r, k)
    m_hat = rm.m_hat(r, k)
    assert rm.ei(r, k) == [p - c for p, c in zip(m_plus, comp, strict=True)]  # I1
    assert rm.l2o_baseline(r, k) == [m - c for m, c in zip(m_minus, comp, strict=True)]  # I2
    for p, m in zip(m_plus, m_minus, strict=True):  # I5
        assert m_hat == Fraction(k, n) * p + Fraction(n - k, n) * m
    assert mean(m_plus) == m_hat
    delta = rm.canonical(r, k)
    assert delta == [Fraction(n, n - k) * (p - m_hat) for p in m_plus]
    sloo = rm.pkpo_sloo(r, k)  # I8
    assert sloo == [
        Fraction(k, n) * d - Fraction(k, n * (n - 1)) * m
        for d, m in zip(delta, m_minus, strict=True)
    ]
    assert sum(sloo) == -Fraction(k, n - 1) * m_hat
    m_hat_prev = rm.m_hat(r, k - 1) if k >= 2 else Fraction(0)  # I13 (M̂_0 := 0)
    assert mean(rm.ei(r, k)) == mean(rm.l2o_baseline(r, k)) == m_hat - m_hat_prev


@given(r=batches(2, 8, binary=True, max_b=1).map(lambda b: b[0]), data=group_and_k)
def test_pkpo_binary_form_and_chen_sigma(r: Vec, data: st.DataObject) -> None:
    """I11: s_i = K/N (correct) or (K/N)·ρ(N−1, c, K−1); I9: σ² = Var over K-subsets of max_T r."""
    n = len(r)
    k = data.draw(st.integers(1, n - 1))
    c = sum(1 for x in r if x == 1)

    def rho(m: int, correct: int, kk: int) -> Fraction:
        from advest.reference._exact import comb

        return 1 - Fraction(comb(m - correct, kk), comb(m, kk))

    s = rm.pkpo_s(r, k)
    for x, value in zip(r, s, strict=True):
        assert value == (Fraction(k, n) if x == 1 else Fraction(k, n) * rho(n - 1, c, k - 1))
    maxima = [max(r[j] for j in t) for t in combinations(range(n), k)]
    r_bar = mean(maxima)
    assert mean([(m - r_bar) ** 2 for m in maxima]) == r_bar * (1 - r_bar)


@given(r=batches(1, 8, max_b=1).map(lambda b: b[0]))
def test_k_equal_n_gives_the_gap_to_the_runner_up_on_a_unique_argmax(r: Vec) -> None:
    """I12, and tang_passk = ei(r, K = N) in both implementations."""
    n = len(r)
    ordered = sorted(r)
    gap = ordered[-1] - ordered[-2] if n >= 2 else ordered[-1]
    unique = n == 1 or ordered[-1] != ordered[-2]
    want = [gap if (x == ordered[-1] and unique) else Fraction(0) for x in r]
    assert rm.ei(r, n) == want == rm.tang_passk(r)
    assert not _mismatches(_fast(fast.maxk.tang_passk, r), want, r, exact=False)


@pytest.mark.parametrize("h", ["zero", "mean", "min", "sum_of_squares"])
@given(data=group_and_k)
def test_l2o_maps_any_comparator_only_baseline_to_canonical(h: str, data: st.DataObject) -> None:
    """I15 (MaxPO Prop. F.1): signal_i = avg_S[max(S ∪ {i}) − h(S)], then L2O, gives Δ exactly."""
    r, k = _draw(data, 2, max_n=6)
    n = len(r)

    def baseline(values: list[Fraction]) -> Fraction:
        if not values or h == "zero":
            return Fraction(0)
        return {
            "mean": mean(values),
            "min": min(values),
            "sum_of_squares": sum(x * x for x in values),
        }[h]

    def signal(j: int, pool: list[int]) -> Fraction:
        subsets = list(combinations(pool, k - 1))
        return mean(
            [max([r[j], *(r[t] for t in s)]) - baseline([r[t] for t in s]) for s in subsets]
        )

    others = lambda *ex: [t for t in range(n) if t not in ex]  # noqa: E731
    out = [
        signal(i, others(i)) - mean([signal(j, others(i, j)) for j in others(i)]) for i in range(n)
    ]
    assert out == rm.canonical(r, k)


@IMPLS
@given(r=batches(2, 8, max_b=1).map(lambda b: b[0]))
def test_group_baseline_relations(exact: bool, r: Vec) -> None:
    """rloo = G/(G−1)·dr_grpo; grpo = dr_grpo/(σ + ε); opo with equal lengths = dr_grpo;
    reinforce_pp with B = 1 = grpo."""
    f = lambda name: _impl(exact, name)  # noqa: E731
    g = len(r)
    dr = f("dr_grpo")(r)
    loo = f("rloo")(r) if exact else _rloo_by_definition(r)
    assert not _mismatches(loo, _scaled(Fraction(g, g - 1), dr), r, exact)
    assert not _mismatches(f("rloo")(r), _scaled(Fraction(g, g - 1), dr), r, exact)
    assert not _mismatches(
        f("opo")(r, [5] * g) if exact else _fast(fast.group.opo, r, torch.full((1, g), 5)),
        dr,
        r,
        exact,
    )
    grpo = f("grpo")(r)
    rpp = rg.reinforce_pp([r])[0] if exact else _fast(fast.group.reinforce_pp, r)
    assert not _mismatches(rpp, grpo, r, exact)
    if max(r) != min(r):
        sigma = sum((x - mean(r)) ** 2 for x in r) / (g - 1)
        for a, d in zip(grpo, dr, strict=True):
            # a (σ + ε) = d, with σ² known exactly: to 1e-9 of the group's largest |d|.
            scale = max(abs(float(x)) for x in dr)
            assert abs(float(a) * (float(sigma) ** 0.5 + 1e-6) - float(d)) <= 1e-9 * scale


@given(r=batches(2, 8, max_b=1).map(lambda b: b[0]).filter(lambda r: max(r) != min(r)))
def test_grpo_without_eps_meets_samuelson_bound(r: Vec) -> None:
    """With ε = 0 and ddof = 1: Σ A² = G − 1 and |A_i| <= (G−1)/√G."""
    g = len(r)
    a = rg.grpo(r, eps=0.0)
    assert abs(sum(x * x for x in a) - (g - 1)) < Fraction(1, 10**40)
    assert all(x * x * g <= (g - 1) ** 2 + Fraction(1, 10**40) for x in a)


@given(r=batches(1, 8, max_b=1).map(lambda b: b[0]), data=group_and_k)
def test_opo_baseline_is_length_weighted_centred(r: Vec, data: st.DataObject) -> None:
    lengths = data.draw(st.lists(st.integers(1, 9), min_size=len(r), max_size=len(r)))
    a = rg.opo(r, lengths)
    assert sum(n * x for n, x in zip(lengths, a, strict=True)) == 0


@given(batch=batches(1, 6, max_b=3))
def test_batch_std_grpo_divides_dr_grpo_by_the_batch_std(batch: list[Vec]) -> None:
    """grpo_batch_std = dr_grpo/(σ_B + ε), σ_B² the ddof-1 variance of all B·G rewards (exact,
    up to the reference's 60-digit root; fast to 1e-9 of each group's largest |dr_grpo|); B = 1
    gives grpo."""
    flat = [x for group in batch for x in group]
    exact = rg.grpo_batch_std(batch)
    fast_out = fast.group.grpo_batch_std(
        torch.tensor([[float(x) for x in g] for g in batch], dtype=torch.float64)
    ).tolist()
    if max(flat) == min(flat):
        assert all(x == 0 for g in exact for x in g) and all(x == 0 for g in fast_out for x in g)
        return
    variance = sum((x - mean(flat)) ** 2 for x in flat) / (len(flat) - 1)
    divisor = float(variance) ** 0.5 + 1e-6
    for group, a_exact, a_fast in zip(batch, exact, fast_out, strict=True):
        dr = rg.dr_grpo(group)
        scale = max([abs(float(d)) for d in dr] + [1e-300])
        for d, x, y in zip(dr, a_exact, a_fast, strict=True):
            assert abs(float(x) * divisor - float(d)) <= 1e-9 * scale
            assert abs(y * divisor - float(d)) <= 1e-9 * scale
    if len(batch) == 1:
        assert [float(x) for x in exact[0]] == pytest.approx([float(x) for x in rg.grpo(batch[0])])
