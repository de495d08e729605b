"""The shrinkage peers `james_stein` (JSPO) and `ebpo` (shared/notes/kae_cov.md §4): worked
batches, the notes' properties and limits, and bad input. The shared catalogue tests cover
fast == reference, shift, ties, monotonicity and permutations."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import advest.fast.group as fg
import advest.reference.group as rg
from advest.reference._exact import mean
from tests.strategies import Batch, batches

WORKED = [[1, 0], [1, 1], [0, 0]]


def _t(batch: list[list[int]] | Batch) -> torch.Tensor:
    return torch.tensor([[float(x) for x in g] for g in batch], dtype=torch.float64)


def _loo_mean(batch: Batch, p: int) -> Fraction:
    return mean([x for q, g in enumerate(batch) if q != p for x in g])


def _rloo_baseline(group: list[Fraction], j: int) -> Fraction:
    return (sum(group, Fraction(0)) - group[j]) / (len(group) - 1)


def test_james_stein_worked_batch_is_exact() -> None:
    """By hand: λ = (0, 2/3, 2/3) with ε = 0; prompt 0's others are flat, so it gets RLOO."""
    want = [[1, -1], [Fraction(1, 2)] * 2, [Fraction(-1, 2)] * 2]
    assert rg.james_stein(WORKED, eps=0.0) == want
    assert fg.james_stein(_t(WORKED), eps=0.0).tolist() == [[1.0, -1.0], [0.5, 0.5], [-0.5, -0.5]]
    lam = Fraction(1, 8) / (Fraction(3, 16) + Fraction(1e-6))  # ε = 1e-6 as a double
    b1 = (1 - lam) * 1 + lam * Fraction(1, 4)
    assert rg.james_stein(WORKED)[1] == [1 - b1, 1 - b1]
    assert fg.james_stein(_t(WORKED))[1].tolist() == pytest.approx([float(1 - b1)] * 2, abs=1e-15)


def test_james_stein_is_accurate_for_an_offset_prompt_beside_three_near_zero() -> None:
    """The input ``advest check``'s search shrank (seed 1, 150 inputs): prompt 3 at 2^20, the
    others near 0. Its leave-one-out spread lost 4 to 6 digits, under the 6-digit bound for
    summing directly: 2e-11 relative in float64, beyond the oracle's rounding allowance, so
    permuting a group's samples moved its advantages (fast/_leave_out.py)."""
    batch = [
        [-3.0] * 6 + [1.0],
        [1000.0] * 7,
        [1024.0] + [0.0] * 6,
        [1048576.0] * 3 + [1049602.0, 1048579.0, 1048579.0, 1048582.0],
    ]
    want = torch.tensor(
        [[float(x) for x in row] for row in rg.james_stein(batch)], dtype=torch.float64
    )
    perm = [0, 1, 2, 4, 3, 5, 6]
    got = fg.james_stein(torch.tensor(batch, dtype=torch.float64))
    moved = fg.james_stein(torch.tensor(batch, dtype=torch.float64)[:, perm])
    bound = 1e-12 * float(want.abs().max())  # 2e-11 relative before
    assert float((got - want).abs().max()) <= bound
    assert float((moved - got[:, perm]).abs().max()) <= bound


@given(batch=batches(2, 6, min_b=2, max_b=4))
def test_james_stein_baseline_is_a_shrinkage_between_rloo_and_the_other_prompts_mean(
    batch: Batch,
) -> None:
    """b_pj = (1 − λ_p) b_RLOO + λ_p r̄_{−p} with one λ_p ∈ [0, 1) per prompt."""
    out = rg.james_stein(batch)
    for p, (group, a) in enumerate(zip(batch, out, strict=True)):
        r_bar = _loo_mean(batch, p)
        lams = set()
        for j, (x, aj) in enumerate(zip(group, a, strict=True)):
            b, b_rloo = x - aj, _rloo_baseline(group, j)
            if r_bar != b_rloo:
                lams.add((b - b_rloo) / (r_bar - b_rloo))
            else:
                assert b == b_rloo
        assert len(lams) <= 1, lams
        assert all(0 <= lam < 1 for lam in lams), lams


def test_james_stein_is_accurate_for_a_prompt_far_from_others_that_agree() -> None:
    """Prompt 0 lies 1e8 from three that nearly agree (to 5e-9 of the spread): its
    Σ (μ_q − μ̄_{−0})² by Σd² − (B−1)·d̄² cancels every digit in float64, so fast sums that
    row directly; within the catalogue's 1e-9 of the batch spread of the reference."""
    batch = [[1e8, 1e8 + 1.0], [0.0, 0.0], [0.0, 0.0], [0.0, 1.0]]
    want = rg.james_stein(batch, eps=0.0)
    got = fg.james_stein(torch.tensor(batch, dtype=torch.float64), eps=0.0).tolist()
    for row_got, row_want in zip(got, want, strict=True):
        assert row_got == pytest.approx([float(w) for w in row_want], abs=1e-9 * (1e8 + 1))


@given(batch=batches(2, 6, min_b=2, max_b=4))
def test_james_stein_reduces_to_rloo_when_the_other_prompts_are_flat(batch: Batch) -> None:
    """v² = 0 ⇒ λ = 0: every prompt but the first flat gives the first one RLOO exactly."""
    flat = [batch[0]] + [[g[0]] * len(g) for g in batch[1:]]
    want = rg.rloo(flat[0])
    assert rg.james_stein(flat)[0] == want
    got = fg.james_stein(_t(flat))[0].tolist()
    # spec/tolerances.py: james_stein is accurate to 1e-9 of the batch spread (or max |A|)
    values = [x for g in flat for x in g]
    scale = max([max(values) - min(values)] + [abs(w) for w in want])
    assert got == pytest.approx([float(w) for w in want], abs=1e-9 * float(scale) + 1e-300)


@given(batch=batches(2, 6, min_b=2, max_b=2))
def test_james_stein_reduces_to_the_other_prompts_mean_when_their_means_agree(
    batch: Batch,
) -> None:
    """ε = 0 and s² = 0 (B = 2: one other prompt) with v² > 0 ⇒ λ = 1: b = r̄_{−p} exactly."""
    out = rg.james_stein(batch, eps=0.0)
    for p in range(2):
        other = batch[1 - p]
        if max(other) == min(other):
            continue  # v² = 0: the RLOO limit instead
        assert out[p] == [x - mean(other) for x in batch[p]]
    # and with the default ε, a large spread pushes λ towards 1
    big = [[0, 10**6, 10**6], [10**6, 0, 0]]
    ideal = [-(10**6) / 3, 2 * 10**6 / 3, 2 * 10**6 / 3]
    assert [float(x) for x in rg.james_stein(big)[0]] == pytest.approx(ideal, rel=1e-12)
    assert fg.james_stein(_t(big))[0].tolist() == pytest.approx(ideal, rel=1e-12)


@given(batch=batches(2, 6, min_b=2, max_b=3), data=st.data())
def test_james_stein_baseline_never_uses_the_own_reward(batch: Batch, data: st.DataObject) -> None:
    p = data.draw(st.integers(0, len(batch) - 1))
    j = data.draw(st.integers(0, len(batch[0]) - 1))
    new = data.draw(st.fractions(-10, 10, max_denominator=7))
    moved = [list(g) for g in batch]
    moved[p][j] = new
    base = batch[p][j] - rg.james_stein(batch)[p][j]
    assert new - rg.james_stein(moved)[p][j] == base


@given(batch=batches(2, 6, min_b=2, max_b=4))
def test_james_stein_group_sums_follow_the_shrinkage_identity(batch: Batch) -> None:
    """Σ_j A_pj = λ_p m (μ_p − r̄_{−p}): not centred unless λ_p = 0 or μ_p = r̄_{−p}."""
    out = rg.james_stein(batch)
    m = len(batch[0])
    for p, (group, a) in enumerate(zip(batch, out, strict=True)):
        gap = mean(group) - _loo_mean(batch, p)
        total = sum(a, Fraction(0))
        if gap == 0:
            assert total == 0
        else:
            lam = total / (m * gap)
            assert 0 <= lam < 1


@given(
    batch=batches(2, 6, min_b=2, max_b=3),
    a=st.fractions(Fraction(1, 16), 16, max_denominator=16),
)
def test_james_stein_without_eps_is_positively_homogeneous(batch: Batch, a: Fraction) -> None:
    scaled = [[a * x for x in g] for g in batch]
    out = rg.james_stein(batch, eps=0.0)
    assert rg.james_stein(scaled, eps=0.0) == [[a * x for x in g] for g in out]


def test_james_stein_fast_without_eps_is_homogeneous_on_integer_batches() -> None:
    gen = torch.Generator().manual_seed(0)
    r = torch.randint(0, 5, (6, 4), generator=gen).double()
    base = fg.james_stein(r, eps=0.0)
    torch.testing.assert_close(fg.james_stein(3.5 * r, eps=0.0), 3.5 * base, rtol=1e-12, atol=0)
    exact = rg.james_stein([[int(x) for x in g] for g in r.tolist()], eps=0.0)
    torch.testing.assert_close(base, _t(exact), rtol=1e-12, atol=1e-12)


def test_ebpo_worked_batch_is_exact() -> None:
    """σ² = 3/10, τ² = 1/4 ⇒ S = 3/8; raw A = [[1/2, −1/2], [3/16]*2, [−3/16]*2], std² = 41/320."""
    assert rg.ebpo_shrinkage(WORKED) == (Fraction(3, 8), Fraction(1, 2))
    raw = [[0.5, -0.5], [3 / 16] * 2, [-3 / 16] * 2]
    want = [[x / (math.sqrt(41 / 320) + 1e-6) for x in g] for g in raw]
    for got in ([[float(x) for x in g] for g in rg.ebpo(WORKED)], fg.ebpo(_t(WORKED)).tolist()):
        for g_got, g_want in zip(got, want, strict=True):
            assert g_got == pytest.approx(g_want, rel=1e-14)


@given(batch=batches(1, 6, min_b=2, max_b=4), c=st.fractions(-100, 100, max_denominator=8))
def test_ebpo_shrinkage_lies_in_the_unit_interval_and_ignores_shifts(
    batch: Batch, c: Fraction
) -> None:
    s, mu_glob = rg.ebpo_shrinkage(batch)
    moved = [[x + c for x in g] for g in batch]
    s_moved, mu_moved = rg.ebpo_shrinkage(moved)
    assert s_moved == s and mu_moved == mu_glob + c
    if s is None:
        assert all(x == batch[0][0] for g in batch for x in g)
        return
    assert 0 <= s <= 1
    means = [mean(g) for g in batch]
    assert (s == 1) == (max(means) == min(means))  # τ² = 0 ⇔ full shrinkage to μ_glob


def test_ebpo_all_fail_group_gets_a_negative_advantage() -> None:
    """The notes: raw A = −S·μ_glob < 0 for an all-fail group, where GRPO gives 0."""
    batch = [[1, 0, 1, 1], [1, 1, 0, 1], [0, 0, 0, 0]]
    s, mu_glob = rg.ebpo_shrinkage(batch)
    assert s is not None and 0 < s < 1
    out = rg.ebpo(batch, eps=0.0)
    # raw A of the first group differs by 1 between its samples: that fixes the batch scale
    scale = 1 / (out[0][0] - out[0][1])
    assert [x * scale for x in out[2]] == pytest.approx([float(-s * mu_glob)] * 4, rel=1e-40)
    assert all(x < 0 for x in fg.ebpo(_t(batch))[2].tolist())
    assert fg.grpo(_t(batch))[2].tolist() == [0.0] * 4


@given(batch=batches(1, 6, min_b=2, max_b=4))
def test_ebpo_is_standardised_over_the_batch(batch: Batch) -> None:
    out = rg.ebpo(batch, eps=0.0)
    flat = [x for g in out for x in g]
    assert sum(flat, Fraction(0)) == 0
    if any(x != 0 for x in flat):
        assert abs(sum(x * x for x in flat) - (len(flat) - 1)) < Fraction(1, 10**40)


@pytest.mark.parametrize("name", ["james_stein", "ebpo"])
def test_all_equal_batches_give_exact_zeros(name: str) -> None:
    for value in (0.0, 1000.0001, -3 / 7):
        batch = [[value] * 3] * 4
        assert getattr(rg, name)(batch) == [[0] * 3] * 4
        for dtype in (torch.float32, torch.float64):
            out = getattr(fg, name)(torch.full((4, 3), value, dtype=dtype))
            assert out.dtype == dtype and out.tolist() == [[0.0] * 3] * 4


@pytest.mark.parametrize("name", ["james_stein", "ebpo"])
def test_shrinkage_peers_reject_bad_input(name: str) -> None:
    ref, fst = getattr(rg, name), getattr(fg, name)
    few = rf"{name} needs at least 2 groups \(prompts\) in rewards; got B=1"
    with pytest.raises(ValueError, match=few):
        ref([[0, 1, 1]])
    with pytest.raises(ValueError, match=few):
        fst(torch.tensor([[0.0, 1.0, 1.0]]))
    with pytest.raises(ValueError, match="got B=0"):
        fst(torch.zeros(0, 3))
    with pytest.raises(ValueError, match=r"non-finite value in group 1 \(nan at sample \[2\]\)"):
        fst(torch.tensor([[0.0, 1.0, 1.0], [0.0, 1.0, math.nan]]))
    with pytest.raises(ValueError, match="rewards has a non-finite value"):
        ref([[0, 1, 1], [0, 1, math.nan]])
    with pytest.raises(ValueError, match="rewards group 1 has 2 samples but group 0 has 3"):
        ref([[0, 1, 1], [0, 1]])
    with pytest.raises(ValueError, match="rewards group 1 has 3 samples but group 0 has 2"):
        ref([[0, 1], [0, 1, 1]])
    for eps in (-1.0, math.inf, math.nan):
        with pytest.raises(ValueError, match=f"{name} needs a finite eps >= 0"):
            ref([[0, 1], [1, 1]], eps=eps)
        with pytest.raises(ValueError, match=f"{name} needs a finite eps >= 0"):
            fst(torch.tensor([[0.0, 1.0], [1.0, 1.0]]), eps=eps)


def test_james_stein_needs_two_samples_per_prompt() -> None:
    with pytest.raises(ValueError, match="james_stein needs groups of G >= 2 samples; got G=1"):
        rg.james_stein([[1], [0]])
    with pytest.raises(ValueError, match="james_stein needs groups of G >= 2 samples; got G=1"):
        fg.james_stein(torch.tensor([[1.0], [0.0]]))
    # EBPO is defined for G = 1 (τ² is then the variance of the rewards themselves: S = 1/2)
    assert rg.ebpo_shrinkage([[1], [0]])[0] == Fraction(1, 2)


@pytest.mark.parametrize("eps", [0.0, 1e-6])
def test_ebpo_on_a_subnormal_spread_is_finite_and_standardised(eps: float) -> None:
    # hypothesis found [[0], [2.2e-309]] with eps = 0 gave NaN: float / tensor is computed as
    # float · (1 / tensor), and 1 / 2.2e-309 overflows.
    rewards = torch.tensor([[0.0], [2.2e-309]], dtype=torch.float64)
    out = fg.ebpo(rewards, eps=eps)
    assert torch.isfinite(out).all()
    if eps == 0.0:  # the same as at any normal scale: ±1/√2
        assert torch.allclose(out, fg.ebpo(rewards * 1e300, eps=0.0), rtol=1e-12, atol=0)
        assert out[1, 0] > 0.7
