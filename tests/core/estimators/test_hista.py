"""Hista: the worked example, fast == reference, spec/hista.md's properties, bad input."""

from __future__ import annotations

import math
import re
from fractions import Fraction
from itertools import product
from pathlib import Path

import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st

from advest.fast import registry
from advest.fast.hista import (
    CHUNK_BYTES,
    Pooled,
    _distance_chunks,
    _pool_rows,
    memory_plan,
    pool_hidden,
)
from advest.fast.hista import hista as fast_hista
from advest.oracle.reports.catalogue import tolerance
from advest.reference.hista import _weights, block_distances, min_distance, pool, state_values
from advest.reference.hista import hista as ref_hista

ROOT = Path(__file__).resolve().parents[3]

Rollouts = list[list[list[float]]]  # [G][L_i][d]
Group = tuple[Rollouts, list[float]]

EXAMPLE: Group = (
    [
        [[0, 0], [2, 0], [4, 0], [4, 2], [9, 9]],
        [[1, 0], [1, 0], [4, 1], [4, 1]],
        [[1, 2], [1, 2], [7, 1], [7, 1], [0, 0]],
        [[5, 0], [5, 0]],
    ],
    [1, 1, 0, 0],
)


def _pack(
    groups: list[Group], t: int | None = None, dtype: torch.dtype = torch.float64
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Ragged groups (same G and d) -> hidden [B, G, T, D] (NaN padding), mask, rewards."""
    b, g = len(groups), len(groups[0][0])
    d = next(len(v) for rollouts, _ in groups for h in rollouts for v in h)
    t = t or max(len(h) for rollouts, _ in groups for h in rollouts)
    hidden = torch.full((b, g, t, d), math.nan, dtype=torch.float64)
    mask = torch.zeros(b, g, t, dtype=torch.bool)
    for i, (rollouts, _) in enumerate(groups):
        for j, h in enumerate(rollouts):
            if h:
                hidden[i, j, : len(h)] = torch.tensor(h, dtype=torch.float64)
            mask[i, j, : len(h)] = True
    rewards = torch.tensor([[float(x) for x in r] for _, r in groups], dtype=torch.float64)
    return hidden.to(dtype), mask, rewards


def _valid(out: torch.Tensor, rollouts: Rollouts) -> list[list[float]]:
    return [out[j, : len(h)].tolist() for j, h in enumerate(rollouts)]


def _close(got: list[list[float]], want: list[list[Fraction]], tol: float) -> None:
    for row_got, row_want in zip(got, want, strict=True):
        assert len(row_got) == len(row_want)
        for x, y in zip(row_got, row_want, strict=True):
            assert abs(x - float(y)) <= tol, (got, [[float(v) for v in r] for r in want])


@st.composite
def groups(draw: st.DrawFn, g_min: int = 2, g_max: int = 5, t_max: int = 7) -> Group:
    """One group: G rollouts of 0..t_max tokens (not all empty) in d <= 3 dimensions, values on
    a coarse grid (ties, duplicate blocks), sometimes sharing a prefix (distances exactly 0)."""
    g = draw(st.integers(g_min, g_max))
    d = draw(st.integers(1, 3))
    value = st.sampled_from([-2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 3.0])
    vector = st.lists(value, min_size=d, max_size=d)
    rollouts = [draw(st.lists(vector, max_size=t_max)) for _ in range(g)]
    if all(not h for h in rollouts):
        rollouts[0] = [draw(vector)]
    if draw(st.booleans()):  # rollout 1 copies a prefix of rollout 0
        rollouts[1] = rollouts[0][: draw(st.integers(0, t_max))] + rollouts[1]
    rewards = draw(st.lists(st.sampled_from([0.0, 1.0, -1.0, 0.5, 2.0]), min_size=g, max_size=g))
    return rollouts, rewards


def _values(group: Group, w: int, tau_scale: float = 1.0) -> list[list[float]]:
    """Fast V̂ = R − A per valid token of one group (float64)."""
    hidden, mask, rewards = _pack([group])
    adv = fast_hista(hidden, mask, rewards, w=w, tau_scale=tau_scale)[0]
    return [[r - a for a in row] for r, row in zip(group[1], _valid(adv, group[0]), strict=True)]


# ------------------------------------------------------------------------------------------------
# worked example and fast == reference


def test_worked_example_of_the_notes() -> None:
    rollouts, rewards = EXAMPLE
    assert block_distances(rollouts, 0, 1, w=2) == [0, 1, 4]
    d2 = block_distances(rollouts, 0, 2, w=2)
    assert d2[:2] == [0, 2] and float(d2[2]) == pytest.approx((4 + math.sqrt(2)) / 2, abs=1e-15)
    v = state_values(rollouts, rewards, w=2)[0]
    assert v[:2] == [Fraction(1, 3)] * 2  # k = 0: the LOO mean, exactly
    k1 = 1 / (1 + math.exp(-1) + math.exp(-4))
    k2 = 1 / (1 + math.exp(-1) + math.exp(-(4 + math.sqrt(2)) / 4))
    assert [round(float(x), 6) for x in v] == [0.333333, 0.333333, 0.721399, 0.721399, 0.61493]
    assert float(v[2]) == pytest.approx(k1, abs=1e-15) and float(v[4]) == pytest.approx(
        k2, abs=1e-15
    )
    for tau_scale, want in ((0.5, 0.880537), (2.0, 0.574097)):
        assert (
            round(float(state_values(rollouts, rewards, w=2, tau_scale=tau_scale)[0][2]), 6) == want
        )
    adv = ref_hista(rollouts, rewards, w=2)[0]
    assert [round(float(x), 6) for x in adv] == [0.666667, 0.666667, 0.278601, 0.278601, 0.38507]
    hidden, mask, r = _pack([EXAMPLE])
    for tau_scale in (0.5, 1.0, 2.0):
        got = _valid(fast_hista(hidden, mask, r, w=2, tau_scale=tau_scale)[0], rollouts)
        _close(got, ref_hista(rollouts, rewards, w=2, tau_scale=tau_scale), 1e-12)


@given(first=groups(), second=groups(), w=st.integers(1, 3), tau=st.sampled_from([0.5, 1.0, 3.0]))
@example(first=EXAMPLE, second=EXAMPLE, w=2, tau=1.0)
def test_fast_equals_reference_and_groups_are_isolated(
    first: Group, second: Group, w: int, tau: float
) -> None:
    g, d = len(first[0]), len(next(v for h in first[0] for v in h))
    pad = [[[0.25] * d]]
    rollouts = [[v[:d] + [0.0] * (d - len(v)) for v in h] for h in second[0]]
    rollouts = (rollouts + pad * g)[:g]  # the same G and d as the first group
    if not any(rollouts):
        rollouts[0] = pad[0]
    second = (rollouts, (second[1] * g)[:g])
    hidden, mask, rewards = _pack([first, second])
    out = fast_hista(hidden, mask, rewards, w=w, tau_scale=tau)  # NaN padding must not matter
    for i, (rs, r) in enumerate((first, second)):
        want = ref_hista(rs, r, w=w, tau_scale=tau)
        # spec/tolerances.py: the group's scale, max(spread of R, max |A|), never max|R|
        scale = max([max(r) - min(r)] + [abs(float(x)) for row in want for x in row])
        _close(_valid(out[i], rs), want, tolerance("hista", torch.float64) * scale + 1e-300)
    assert bool((out[~mask] == 0).all())


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_float32_distances_match_float64_on_anisotropic_hidden_states(dtype: torch.dtype) -> None:
    """Hidden states with a large common component (as in LLMs): centring keeps the float32
    matmul distances accurate; float32/bf16 input agrees with float64 on the same values."""
    gen = torch.Generator().manual_seed(0)
    B, G, T, D = 3, 6, 40, 32
    hidden = (torch.randn(B, G, T, D, generator=gen) + 50.0 * torch.randn(D, generator=gen)).to(
        dtype
    )
    mask = torch.rand(B, G, T, generator=gen) < 0.9
    rewards = torch.rand(B, G, generator=gen, dtype=torch.float64)
    low = fast_hista(hidden, mask, rewards, w=4)
    high = fast_hista(hidden.to(torch.float64), mask, rewards, w=4)
    torch.testing.assert_close(low, high, rtol=0, atol=tolerance("hista", torch.float32))


def test_chunking_and_pre_pooled_blocks_do_not_change_the_result() -> None:
    gen = torch.Generator().manual_seed(1)
    hidden = torch.randn(3, 5, 23, 7, generator=gen, dtype=torch.float64)
    mask = torch.rand(3, 5, 23, generator=gen) < 0.8
    rewards = torch.randn(3, 5, generator=gen, dtype=torch.float64)
    whole = fast_hista(hidden, mask, rewards, w=3)
    for chunk_bytes in (1, 5000):  # one rollout / one row of blocks per chunk, and in between
        torch.testing.assert_close(
            fast_hista(hidden, mask, rewards, w=3, chunk_bytes=chunk_bytes),
            whole,
            rtol=1e-13,
            atol=1e-13,
        )
    pooled = pool_hidden(hidden, mask, 3)
    assert torch.equal(fast_hista(pooled, mask, rewards), whole)
    assert torch.equal(pool_hidden(hidden, mask, 3, chunk_bytes=1).blocks, pooled.blocks)


@given(group=groups(), w=st.integers(1, 4), data=st.data())
def test_pooling_matches_the_reference_wherever_the_padding_sits(
    group: Group, w: int, data: st.DataObject
) -> None:
    """Block means of the valid tokens in order, the partial block included; left padding and
    holes in the mask give the same blocks as right padding."""
    rollouts, _ = group
    hidden, mask, _ = _pack([group])
    t = hidden.shape[2]
    shift = data.draw(st.integers(0, 3))
    moved = torch.full(
        (1, len(rollouts), t + shift, hidden.shape[3]), math.nan, dtype=torch.float64
    )
    moved_mask = torch.zeros(1, len(rollouts), t + shift, dtype=torch.bool)
    for j, h in enumerate(rollouts):  # valid tokens at increasing, gappy positions
        positions = sorted(data.draw(st.permutations(range(t + shift)))[: len(h)])
        for p, v in zip(positions, h, strict=True):
            moved[0, j, p] = torch.tensor(v, dtype=torch.float64)
            moved_mask[0, j, p] = True
    for blocks in (pool_hidden(hidden, mask, w).blocks, pool_hidden(moved, moved_mask, w).blocks):
        for j, h in enumerate(rollouts):
            want = pool([[Fraction(x) for x in v] for v in h], w)
            got = blocks[0, j, : len(want)].flatten().tolist()
            assert got == pytest.approx([float(x) for b in want for x in b], abs=1e-15)
            assert bool((blocks[0, j, len(want) :] == 0).all())
    a = fast_hista(hidden, mask, torch.zeros(1, len(rollouts), dtype=torch.float64) + 1, w=w)
    assert a.shape == hidden.shape[:3]


# ------------------------------------------------------------------------------------------------
# properties


@given(group=groups(), w=st.integers(1, 3))
def test_first_window_gets_the_leave_one_out_mean_and_values_are_piecewise_constant(
    group: Group, w: int
) -> None:
    rollouts, rewards = group
    g = len(rewards)
    exact = state_values(rollouts, rewards, w=w)
    fast = _values(group, w)
    for i, (row, row_fast) in enumerate(zip(exact, fast, strict=True)):
        loo = sum((Fraction(rewards[j]) for j in range(g) if j != i), Fraction(0)) / (g - 1)
        assert row[:w] == [loo] * len(row[:w])
        for t in range(len(row)):
            assert row[t] == row[t - t % w]  # V̂ changes only at multiples of w
            assert row_fast[t] == row_fast[t - t % w]


@given(
    axes=st.lists(st.tuples(st.integers(0, 2), st.sampled_from([-1, 1])), min_size=2, max_size=5),
    rewards=st.lists(st.sampled_from([0, 1, 3, -2]), min_size=6, max_size=6),
    w=st.integers(1, 3),
)
def test_equal_distances_give_the_leave_one_out_mean(
    axes: list[tuple[int, int]], rewards: list[int], w: int
) -> None:
    """Rollout 0 sits at the origin, every other rollout at a unit vector ±e_a: all d_0j(k) = 1,
    so the weights are uniform and V̂_0 is exactly the leave-one-out mean."""
    g = len(axes) + 1
    rollouts: Rollouts = [[[0.0, 0.0, 0.0]] * (3 * w)]
    for axis, sign in axes:
        u = [0.0, 0.0, 0.0]
        u[axis] = float(sign)
        rollouts.append([u] * (2 * w))
    r = [float(x) for x in rewards[:g]]
    loo = sum((Fraction(x) for x in r[1:]), Fraction(0)) / (g - 1)
    assert state_values(rollouts, r, w=w)[0] == [loo] * (3 * w)
    assert _values((rollouts, r), w)[0] == pytest.approx([float(loo)] * (3 * w), abs=1e-15)


def test_a_zero_median_distance_gives_uniform_weights() -> None:
    """Rollouts 0, 1, 2 share their first block (distance exactly 0, in fast too) and rollout 3
    is far: for rollout 0 at k = 1 the median of (0, 0, 10) is 0, so the weights are uniform."""
    shared = [[1.0, 2.0], [3.0, -1.0]]
    rollouts = [[*shared, [5.0, 5.0]], [*shared, [0.0, 7.0]], shared, [[11.0, 2.0], [13.0, -1.0]]]
    rewards = [1.0, 1.0, 1.0, 0.0]
    assert block_distances(rollouts, 0, 1, w=2) == [0, 0, 10]
    loo = Fraction(2, 3)
    assert state_values(rollouts, rewards, w=2)[0] == [loo] * 3
    assert _values((rollouts, rewards), 2)[0] == [pytest.approx(2 / 3, abs=1e-15)] * 3


@given(group=groups(), c=st.sampled_from([0.0, 1.0, -3.5, 1e6 + 0.25]))
def test_constant_returns_give_zero_advantages_exactly(group: Group, c: float) -> None:
    rollouts, rewards = group
    flat = [c] * len(rewards)
    assert all(x == 0 for row in ref_hista(rollouts, flat, w=2) for x in row)
    hidden, mask, r = _pack([(rollouts, flat)])
    assert bool((fast_hista(hidden, mask, r, w=2) == 0).all())


@given(group=groups(), w=st.integers(1, 3), tau=st.sampled_from([0.3, 1.0]))
@example(
    group=(
        [[], [[-2.0, -2.0]], [[-2.0, -2.0]] * 2 + [[3.0, -2.0], [-2.0, -2.0]], [], [[1.0, -2.0]]],
        [-1.0, 0.5, 0.0, 0.0, 0.5],
    ),
    w=1,
    tau=0.3,
)
def test_baseline_lies_between_the_other_returns(group: Group, w: int, tau: float) -> None:
    rollouts, rewards = group
    exact = state_values(rollouts, rewards, w=w, tau_scale=tau)
    fast = _values(group, w, tau)
    # the exact V̂ is a convex combination of the other returns and stays inside them; fast's is
    # a float one, recovered as R − A, so it may pass them by a few ulps of the returns' size
    # (found: 0.5000000000000002 against a largest other return of 0.5)
    slack = 4 * len(rewards) * 2**-52 * max(abs(x) for x in rewards)
    for i in range(len(rewards)):
        others = [Fraction(x) for j, x in enumerate(rewards) if j != i]
        assert all(min(others) <= v <= max(others) for v in exact[i])
        assert all(float(min(others)) - slack <= v <= float(max(others)) + slack for v in fast[i])


@given(group=groups(), new=st.sampled_from([-7.0, 0.0, 100.0]), data=st.data())
def test_own_return_does_not_enter_the_baseline(
    group: Group, new: float, data: st.DataObject
) -> None:
    rollouts, rewards = group
    i = data.draw(st.integers(0, len(rewards) - 1))
    changed = [new if j == i else x for j, x in enumerate(rewards)]
    assert state_values(rollouts, changed, w=2)[i] == state_values(rollouts, rewards, w=2)[i]
    assert _values((rollouts, changed), 2)[i] == pytest.approx(_values(group, 2)[i], abs=1e-12)


@given(group=groups(), w=st.integers(1, 3), data=st.data())
def test_baseline_is_causal(group: Group, w: int, data: st.DataObject) -> None:
    """V̂ at token t of rollout i ignores rollout i's hidden states at positions >= w·⌊t/w⌋."""
    rollouts, rewards = group
    i = data.draw(st.integers(0, len(rewards) - 1))
    if not rollouts[i]:
        return
    t = data.draw(st.integers(0, len(rollouts[i]) - 1))
    cut = w * (t // w)
    noise = st.lists(
        st.sampled_from([-9.0, 4.0, 0.5]),
        min_size=len(rollouts[i][0]),
        max_size=len(rollouts[i][0]),
    )
    perturbed = [list(h) for h in rollouts]
    perturbed[i] = rollouts[i][:cut] + [data.draw(noise) for _ in rollouts[i][cut:]]
    assert state_values(perturbed, rewards, w=w)[i][t] == state_values(rollouts, rewards, w=w)[i][t]
    assert _values((perturbed, rewards), w)[i][t] == pytest.approx(
        _values(group, w)[i][t], abs=1e-12
    )


@given(group=groups(), data=st.data())
def test_permuting_rollouts_permutes_the_advantages(group: Group, data: st.DataObject) -> None:
    rollouts, rewards = group
    perm = data.draw(st.permutations(range(len(rewards))))
    a = _values(group, 2)
    b = _values(([rollouts[j] for j in perm], [rewards[j] for j in perm]), 2)
    for i, j in enumerate(perm):
        assert b[i] == pytest.approx(a[j], abs=1e-12)
    exact = state_values(rollouts, rewards, w=2)
    exact_perm = state_values([rollouts[j] for j in perm], [rewards[j] for j in perm], w=2)
    assert all(exact_perm[i] == exact[j] for i, j in enumerate(perm))


@given(
    group=groups(),
    perm=st.permutations(range(3)),
    signs=st.lists(st.sampled_from([-1, 1]), min_size=3, max_size=3),
    shift=st.lists(st.integers(-5, 5), min_size=3, max_size=3),
    scale=st.sampled_from([Fraction(1, 3), Fraction(2), Fraction(7, 2)]),
)
def test_similarity_transforms_of_the_hidden_states_leave_the_baseline_unchanged(
    group: Group, perm: list[int], signs: list[int], shift: list[int], scale: Fraction
) -> None:
    """A common rotation/reflection (signed coordinate permutation), translation and positive
    scaling: exact in the reference up to its 60-digit square roots; a random rotation in fast."""
    rollouts, rewards = group
    d = len(next(v for h in rollouts for v in h))
    p = [x for x in perm if x < d]

    def move(v: list[float]) -> list[Fraction]:
        return [scale * signs[a] * Fraction(v[p[a]]) + shift[a] for a in range(d)]

    moved = [[move(v) for v in h] for h in rollouts]
    for got, want in zip(
        state_values(moved, rewards, w=2), state_values(rollouts, rewards, w=2), strict=True
    ):
        assert all(abs(x - y) < Fraction(1, 10**40) for x, y in zip(got, want, strict=True))
    hidden, mask, r = _pack([group])
    q, _ = torch.linalg.qr(
        torch.randn(d, d, dtype=torch.float64, generator=torch.Generator().manual_seed(d))
    )
    rotated = 2.5 * hidden @ q + 3.0
    torch.testing.assert_close(
        fast_hista(rotated, mask, r, w=2), fast_hista(hidden, mask, r, w=2), rtol=0, atol=1e-9
    )


@given(
    d=st.lists(
        st.one_of(st.none(), st.fractions(0, 10, max_denominator=7)), min_size=1, max_size=6
    ),
    k=st.integers(1, 9),
    tau=st.sampled_from([Fraction(1, 2), Fraction(1)]),
)
def test_weights_ignore_a_common_scale_of_the_distances_so_the_one_over_k_is_cosmetic(
    d: list[Fraction | None], k: int, tau: Fraction
) -> None:
    scaled = [None if x is None else x * k for x in d]
    assert _weights(scaled, tau) == _weights(d, tau)
    weights = _weights(d, tau)
    assert sum(weights) == 1 and all(
        x == 0
        for x, y in zip(weights, d, strict=True)
        if y is None and any(v is not None for v in d)
    )


def test_temperature_limits_give_the_leave_one_out_mean_and_the_nearest_return() -> None:
    rollouts, rewards = EXAMPLE
    hidden, mask, r = _pack([EXAMPLE])
    hot = state_values(rollouts, rewards, w=2, tau_scale=1e9)[0]
    assert float(hot[2]) == pytest.approx(1 / 3, abs=1e-8)
    cold = state_values(rollouts, rewards, w=2, tau_scale=1e-3)[0]  # nearest: rollout 2 (d = 0)
    assert float(cold[2]) == pytest.approx(1.0, abs=1e-12) and float(cold[4]) == pytest.approx(
        1.0, abs=1e-12
    )
    assert float(
        r[0, 0] - fast_hista(hidden, mask, r, w=2, tau_scale=1e9)[0, 0, 2]
    ) == pytest.approx(1 / 3, abs=1e-8)
    assert float(
        r[0, 0] - fast_hista(hidden, mask, r, w=2, tau_scale=1e-3)[0, 0, 2]
    ) == pytest.approx(1.0, abs=1e-12)
    # tied nearest rollouts: their mean
    tied2 = ([[[0.0], [0.0]], [[1.0]], [[-1.0]], [[5.0]]], [0.0, 1.0, 0.0, 7.0])
    assert float(state_values(*tied2, w=1, tau_scale=1e-4)[0][1]) == pytest.approx(0.5, abs=1e-12)


Matrix = list[list[Fraction]]
rows = st.lists(
    st.lists(st.integers(-3, 3).map(Fraction), min_size=2, max_size=2), min_size=1, max_size=4
)


@given(x1=rows, x2=rows, extra=rows)
def test_min_distance_properties(x1: Matrix, x2: Matrix, extra: Matrix) -> None:
    assert min_distance(x1, x1) == 0 and min_distance(x1, x2) >= 0
    assert (min_distance(x1, x2) == 0) == all(x in x2 for x in x1)
    assert min_distance(x1, x2 + extra) <= min_distance(x1, x2)  # non-increasing in X₂'s rows
    assert min_distance(x1 + extra, x2) == min_distance(x1, x2) + min_distance(extra, x2)
    assert min_distance(x1, list(reversed(x2))) == min_distance(x1, x2)
    if len(x1) == len(x2):
        aligned = sum((min_distance([a], [b]) for a, b in zip(x1, x2, strict=True)), Fraction(0))
        assert min_distance(x1, x2) <= aligned
    one, two = (
        [[Fraction(0), Fraction(0)]],
        [[Fraction(0), Fraction(0)], [Fraction(3), Fraction(4)]],
    )
    assert min_distance(one, two) == 0 and min_distance(two, one) == 5  # asymmetric


@given(group=groups(g_min=2, g_max=2), w=st.integers(1, 3))
def test_two_rollouts_reduce_to_rloo_exactly(group: Group, w: int) -> None:
    rollouts, rewards = group
    hidden, mask, r = _pack([group])
    out = fast_hista(hidden, mask, r, w=w)[0]
    for i, h in enumerate(rollouts):
        want = rewards[i] - rewards[1 - i]
        assert out[i, : len(h)].tolist() == [want] * len(h)
        assert ref_hista(rollouts, rewards, w=w)[i] == [Fraction(want)] * len(h)


def test_short_and_empty_rollouts() -> None:
    """L_i < w: the LOO mean on every token; a rollout without tokens has d = +∞ (weight 0 for
    k >= 1) but counts in the k = 0 LOO mean; when no other rollout has blocks, the LOO mean."""
    rollouts: Rollouts = [[[0.0]] * 4, [[0.0]] * 2, [], [[1.0]] * 3]
    rewards = [0.0, 1.0, 100.0, 0.0]
    hidden, mask, r = _pack([(rollouts, rewards)])
    out = fast_hista(hidden, mask, r, w=2)[0]
    v = state_values(rollouts, rewards, w=2)
    assert v[0][:2] == [Fraction(101, 3)] * 2
    assert float(v[0][2]) == pytest.approx(1 / (1 + math.exp(-2)), abs=1e-15)  # d = (0, ∞, 1)
    assert v[3] == [Fraction(101, 3)] * 2 + [v[3][2]] and v[3][2] < 1
    _close(_valid(out, rollouts), ref_hista(rollouts, rewards, w=2), 1e-12)
    alone = ([[[0.0]] * 3, [], []], [1.0, 2.0, 4.0])
    assert state_values(*alone, w=1)[0] == [Fraction(3)] * 3
    hidden, mask, r = _pack([alone])
    assert fast_hista(hidden, mask, r, w=1)[0, 0].tolist() == [-2.0] * 3


# The exact bandit: G = 3 i.i.d. rollouts of two binary tokens, w = 1. P(a0 = 1) = p,
# P(a1 = 1 | a0) = q[a0]; hidden states h_0 = (a0, 0), h_1 = (a0, a0 + 2·a1) depend on tokens <= t.
P, Q = Fraction(1, 3), (Fraction(1, 4), Fraction(2, 3))


def _score(a: int, prob: Fraction) -> Fraction:
    """∂/∂prob log Bernoulli(a; prob)."""
    return a / prob - (1 - a) / (1 - prob)


def _bandit() -> list[tuple[Fraction, list[tuple[int, int]]]]:
    outcomes = list(product((0, 1), repeat=2))
    out = []
    for joint in product(outcomes, repeat=3):
        prob = Fraction(1)
        for a0, a1 in joint:
            prob *= (P if a0 else 1 - P) * (Q[a0] if a1 else 1 - Q[a0])
        out.append((prob, list(joint)))
    return out


def _gradient_terms(
    values: list[list[Fraction]], joint: list[tuple[int, int]], t0_k: int
) -> list[Fraction]:
    """Σ_t score_t · V̂_0(t) for rollout 0, per parameter (p, q0, q1); t0_k picks the baseline of
    token 0 (0: the causal k(0) = 0; 1: the non-causal state that already contains h_0)."""
    a0, a1 = joint[0]
    v0, v1 = values[0][t0_k], values[0][1]
    grad = [_score(a0, P) * v0, Fraction(0), Fraction(0)]
    grad[1 + a0] += _score(a1, Q[a0]) * v1
    return grad


def test_baseline_is_unbiased_on_an_exact_bandit() -> None:
    """E[Σ_t ∇log π(a_t|s_t) · V̂_0(k(t))] = 0 exactly (enumerating all 64 joint outcomes), in
    the reference and in fast; a non-causal state (k = ⌊t/w⌋ + 1) would be biased."""
    bias, mutant, fast_bias = (
        [Fraction(0)] * 3,
        [Fraction(0)] * 3,
        torch.zeros(3, dtype=torch.float64),
    )
    groups_ = []
    for prob, joint in _bandit():
        rollouts = [[[float(a0), 0.0], [float(a0), float(a0 + 2 * a1)]] for a0, a1 in joint]
        rewards = [float(a1 + a0 * a1) for a0, a1 in joint]
        values = state_values(rollouts, rewards, w=1)
        for acc, k in ((bias, 0), (mutant, 1)):
            for c, term in enumerate(_gradient_terms(values, joint, k)):
                acc[c] += prob * term
        groups_.append((rollouts, rewards))
    assert all(abs(x) < Fraction(1, 10**40) for x in bias), [float(x) for x in bias]
    assert abs(float(mutant[0])) > 1e-3
    hidden, mask, r = _pack(groups_)
    v = r[..., None] - fast_hista(hidden, mask, r, w=1)  # [64, 3, 2]
    for (prob, joint), vals in zip(_bandit(), v, strict=True):
        terms = _gradient_terms([[Fraction(x) for x in vals[0].tolist()]], joint, 0)
        fast_bias += float(prob) * torch.tensor([float(x) for x in terms], dtype=torch.float64)
    assert float(fast_bias.abs().max()) < 1e-13


# ------------------------------------------------------------------------------------------------
# registry, memory plan, bad input


def test_registry_entry_names_its_inputs_and_calls_generically() -> None:
    entry = registry.entry("hista")
    assert entry.kind == "token" and entry.inputs == ("hidden", "mask", "rewards")
    hidden, mask, rewards = _pack([EXAMPLE])
    rollout = {"hidden": hidden, "mask": mask, "rewards": rewards}
    out = entry.fn(**{n: rollout[n] for n in entry.inputs})
    assert out.shape == mask.shape and out.dtype == torch.float64


@pytest.mark.parametrize(
    ("b", "g", "t", "d"), [(8, 16, 4096, 2048), (2, 4, 100, 16), (1, 64, 16384, 4096)]
)
def test_chunks_stay_within_the_budget_and_the_plan_counts_them(
    b: int, g: int, t: int, d: int
) -> None:
    m = -(-t // 16)
    rows = _pool_rows(m, 16, t, d, 4, 0, CHUNK_BYTES)
    assert rows == 1 or rows * m * 16 * d * 4 <= CHUNK_BYTES
    groups, row_chunk = _distance_chunks(b, g * m, g, d, 4, CHUNK_BYTES)
    assert groups == 1 or groups * g * m * d * 4 <= CHUNK_BYTES // 2
    assert row_chunk == 1 or groups * row_chunk * (g * m + g * d) * 4 <= CHUNK_BYTES // 2
    # and as large as the budget allows: one more rollout, group or row would not fit
    assert rows * m * 16 * d * 4 <= CHUNK_BYTES < (rows + 1) * m * 16 * d * 4 or rows == 1
    assert groups == b or (groups + 1) * g * m * d * 4 > CHUNK_BYTES // 2
    per_row = groups * ((g * m + g * d) * 4 + 2 * g * 8)
    assert row_chunk == g * m or (row_chunk + 1) * per_row > CHUNK_BYTES // 2
    plan = memory_plan(b, g, t, d)
    assert plan["blocks"] == b * g * m * d * 4
    assert plan["peak"] == plan["blocks"] + max(
        v for k, v in plan.items() if k not in ("blocks", "peak")
    )


def test_the_plan_of_a_small_case_counts_every_tensor_each_stage_allocates() -> None:
    """A worked example, tensor by tensor from ``fast/hista.py``: B = 3, G = 2, T = 8, D = 4,
    w = 4 in float32 (4 bytes), so M = 2 blocks per rollout, N = G·M = 4, and the default
    budget takes every group and every row in one chunk."""
    plan = memory_plan(3, 2, 8, 4, w=4, dtype=torch.float32)
    assert plan["blocks"] == 3 * 2 * 2 * 4 * 4  # blocks [B, G, M, D]
    # pooling, all 6 rollouts at once: buffer [6, M·w, D], block sums and means [6, M, D]
    assert plan["pool_chunk"] == 6 * 8 * 4 * 4 + 2 * 6 * 2 * 4 * 4
    assert plan["distance_chunk"] == (
        3 * 4 * 4 * 4  # centred blocks [B, N, D]
        + 3 * 4 * 4 * 4  # Gram slice [B, N, N]
        + 3 * 4 * 2 * 4 * 4  # nearest blocks [B, N, G, D]
        + 3 * 4 * 2 * (3 * 4 + 8)  # minima, distances, ... [B, N, G] and their int64 indices
        + 3 * 4 * 2 * 4  # the row minima of every group [B, N, G]
    )
    assert plan["values"] == 12 * 3 * 2 * 2 * 2 * 8  # a dozen float64 [B, G, M, G]
    assert plan["tokens"] == 4 * 3 * 2 * 8 * 8  # four float64 / int64 [B, G, T]
    assert plan["peak"] == plan["blocks"] + plan["values"]  # the largest stage here
    empty = memory_plan(3, 2, 0, 4, w=4, dtype=torch.float32)  # responses of no tokens
    assert empty["blocks"] == empty["pool_chunk"] == empty["values"] == empty["tokens"] == 0


def test_bad_input_raises_clear_errors() -> None:
    hidden, mask, r = _pack([EXAMPLE, EXAMPLE])
    bad = hidden.clone()
    bad[1, 2, 3, 0] = math.nan
    with pytest.raises(
        ValueError, match=r"hidden has a non-finite value in group 1 \(sample 2, token 3\)"
    ):
        fast_hista(bad, mask, r, w=2)
    bad[1, 2, 3, 0] = math.inf
    with pytest.raises(ValueError, match=r"non-finite value in group 1 \(sample 2, token 3\)"):
        fast_hista(bad, mask, r, w=2)
    empty = mask.clone()
    empty[1] = False
    with pytest.raises(ValueError, match="mask leaves group 1 without valid tokens"):
        fast_hista(hidden, empty, r, w=2)
    with pytest.raises(ValueError, match="G >= 2"):
        fast_hista(hidden[:, :1], mask[:, :1], r[:, :1])
    with pytest.raises(ValueError, match=r"rewards has a non-finite value in group 0"):
        fast_hista(
            hidden, mask, torch.tensor([[1.0, math.nan, 0, 0], [0.0, 0, 0, 0]], dtype=torch.float64)
        )
    for w in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="block width w >= 1"):
            fast_hista(hidden, mask, r, w=w)  # type: ignore[arg-type]
    for tau in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(ValueError, match="finite tau_scale > 0"):
            fast_hista(hidden, mask, r, tau_scale=tau)
    b, g = r.shape  # the message names the shape it got, or the type of a mask not a tensor
    with pytest.raises(ValueError, match=rf"\[B, G\] = \({b}, {g}\); got \({b}, 3, \d+\)"):
        fast_hista(hidden, mask[:, :3], r)
    with pytest.raises(ValueError, match=r"mask must have shape .*; got <class 'list'>"):
        fast_hista(hidden, mask.tolist(), r)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"hidden must have shape \[B, G, T, D\]"):
        fast_hista(hidden[:, :, :4], mask, r)
    with pytest.raises(TypeError, match="floating-point"):
        fast_hista(hidden.long(), mask, r)
    for scale in (2.0, 0.5, -1.0):  # above 1, between 0 and 1, below 0
        with pytest.raises(ValueError, match="mask must be boolean or hold only 0 and 1"):
            fast_hista(hidden, mask.double() * scale, r)
    pooled = pool_hidden(hidden, mask, 2)
    with pytest.raises(ValueError, match="pooled with w=2 but w=3"):
        fast_hista(pooled, mask, r, w=3)
    with pytest.raises(ValueError, match="M >= 3"):
        fast_hista(Pooled(pooled.blocks[:, :, :2], 2), mask, r)
    for fewer in (pooled.blocks[:1], pooled.blocks[:, :3]):  # fewer groups, fewer samples
        with pytest.raises(ValueError, match=r"with \[B, G\] = \(2, 4\) and M >= 3"):
            fast_hista(Pooled(fewer, 2), mask, r)
    nan_blocks = pooled.blocks.clone()
    nan_blocks[0, 3, 0, 1] = math.nan
    with pytest.raises(
        ValueError, match=r"Pooled.blocks has a non-finite value in group 0 \(sample 3, block 0\)"
    ):
        fast_hista(Pooled(nan_blocks, 2), mask, r)
    nan_blocks[0, 3, 0, 1] = 0.0
    nan_blocks[0, 3, 2, 1] = math.nan  # a block past the rollout's end is ignored
    assert bool(torch.isfinite(fast_hista(Pooled(nan_blocks, 2), mask, r)).all())
    # the reference
    with pytest.raises(
        ValueError, match=r"hidden has a non-finite value in group 0 \(sample 1, token 0\)"
    ):
        ref_hista([[[0.0]], [[math.nan]]], [1, 0], w=1)
    with pytest.raises(ValueError, match="G >= 2"):
        ref_hista([[[0.0]]], [1], w=1)
    with pytest.raises(ValueError, match="hidden has 2 rollouts but rewards has 3"):
        ref_hista([[[0.0]], [[1.0]]], [1, 0, 1])
    with pytest.raises(ValueError, match="hidden has 3 rollouts but rewards has 2"):
        ref_hista([[[0.0]], [[1.0]], [[2.0]]], [1, 0])  # a rollout with no reward, too
    with pytest.raises(ValueError, match="without valid tokens"):
        ref_hista([[], []], [1, 0])
    with pytest.raises(ValueError, match="block width w >= 1"):
        ref_hista([[[0.0]], [[1.0]]], [1, 0], w=0)
    with pytest.raises(ValueError, match="finite tau_scale > 0"):
        ref_hista([[[0.0]], [[1.0]]], [1, 0], tau_scale=0.0)
    with pytest.raises(ValueError, match="one dimension"):
        ref_hista([[[0.0]], [[1.0, 2.0]]], [1, 0])


@pytest.mark.parametrize("gather_elt", [0, 2, 4])
def test_a_chunk_is_the_most_rollouts_whose_buffers_fit_the_budget(gather_elt: int) -> None:
    """Each pooled rollout holds a float32 buffer [M·w, D] and, when the mask is not a prefix, a
    gathered copy [T, D] in the input dtype: a chunk takes as many as fit, and no more."""
    m, w, t, d, budget = 4, 16, 64, 8, 40_000
    per_row = m * w * d * 4 + t * d * gather_elt
    rows = _pool_rows(m, w, t, d, 4, gather_elt, budget)
    assert rows * per_row <= budget < (rows + 1) * per_row


def test_a_distance_chunk_counts_each_rows_int64_indices() -> None:
    """A row of a distance chunk holds its Gram slice [N] and nearest blocks [G, D] in the
    compute dtype, plus 16 bytes per nearest block for their int64 indices (the rule's
    2·G·8): with D = 1 that is most of a row, so 10 rows' worth of budget fits exactly 10."""
    b, n, g, d, elt = 1, 64, 64, 1, 4
    per_row = (n + g * d) * elt + 2 * g * 8  # 1536 bytes
    groups, rows = _distance_chunks(b, n, g, d, elt, 2 * 10 * per_row)  # half for the rows
    assert (groups, rows) == (1, 10)


def test_the_default_chunk_budget_is_the_one_the_spec_states() -> None:
    """spec/hista.md gives fast's ``chunk_bytes`` default in MiB; both entry points take it."""
    import inspect

    stated = re.search(r"`chunk_bytes` \((\d+) MiB", (ROOT / "spec" / "hista.md").read_text())
    assert stated, "spec/hista.md no longer states the chunk budget"
    assert int(stated.group(1)) << 20 == CHUNK_BYTES
    for entry in (fast_hista, pool_hidden):
        assert inspect.signature(entry).parameters["chunk_bytes"].default == CHUNK_BYTES


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32, torch.float64])
def test_pool_hidden_budgets_a_gathered_copy_in_the_input_dtype_only_for_holed_masks(
    dtype: torch.dtype, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The chunk rule's inputs as ``pool_hidden`` passes them: the float buffer's element size
    (float32, or float64 for float64 states) and, for a mask that is not a prefix (left
    padding), the gathered copy's, that of the hidden states' own dtype; 0 for right padding."""
    import advest.fast.hista as fast_module

    seen: list[tuple[int, int]] = []

    def spy(m: int, w: int, t: int, d: int, elt: int, gather_elt: int, budget: int) -> int:
        seen.append((elt, gather_elt))
        return _pool_rows(m, w, t, d, elt, gather_elt, budget)

    monkeypatch.setattr(fast_module, "_pool_rows", spy)
    hidden = torch.ones(1, 2, 5, 3, dtype=dtype)
    right = torch.tensor([[[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]]], dtype=torch.bool)
    pool_hidden(hidden, right, 2)
    pool_hidden(hidden, right.flip(-1), 2)  # left padding: not a prefix
    size = torch.finfo(dtype).bits // 8
    elt = 8 if dtype == torch.float64 else 4
    assert seen == [(elt, 0), (elt, size)]


def test_pooling_takes_any_leading_shape_a_single_rollout_included() -> None:
    """``pool_hidden`` pools ``[..., T, D]``: one rollout's ``[T, D]`` pools to the same blocks
    as it does inside a batch (which pads to the batch's block count with empty, zero blocks)."""
    gen = torch.Generator().manual_seed(5)
    hidden = torch.randn(2, 3, 5, 4, generator=gen, dtype=torch.float64)
    mask = torch.rand(2, 3, 5, generator=gen) > 0.3
    batch = pool_hidden(hidden, mask, 2).blocks  # [2, 3, M, 4]
    for b, g in product(range(2), range(3)):
        alone = pool_hidden(hidden[b, g], mask[b, g], 2).blocks  # [M_bg, 4]
        m = alone.shape[0]
        assert torch.equal(alone, batch[b, g, :m]) and not bool(batch[b, g, m:].any())
    with pytest.raises(ValueError, match=r"hidden must have shape \[\.\.\., T, D\]"):
        pool_hidden(hidden[0, 0, 0], mask[0, 0], 2)
    with pytest.raises(ValueError, match=r"D >= 1; got torch.Size\(\[2, 3, 5, 0\]\)"):
        pool_hidden(hidden[..., :0], mask, 2)  # no hidden dimensions


@pytest.mark.parametrize("where", [(1, 2, 3), (0, 1, 2), (1, 0, 0)])
def test_a_non_finite_state_in_another_layout_is_named_by_its_full_index(
    where: tuple[int, int, int],
) -> None:
    """``pool_hidden`` names a bad state of a ``[B, G, ...]`` batch by group and sample; of any
    other leading shape (here ``[2, 3, 4, T, D]``) by its index, which must be the right one."""
    gen = torch.Generator().manual_seed(6)
    hidden = torch.randn(2, 3, 4, 5, 2, generator=gen, dtype=torch.float64)
    mask = torch.ones(2, 3, 4, 5, dtype=torch.bool)
    hidden[(*where, 1, 0)] = math.nan
    named = ", ".join(map(str, where))
    with pytest.raises(ValueError, match=re.escape(f"in row ({named}, token 1)")):
        pool_hidden(hidden, mask, 2)


def test_the_block_width_defaults_to_16() -> None:
    """``w`` left out is 16 (spec/hista.md), for hidden states and for blocks pooled with it."""
    gen = torch.Generator().manual_seed(7)
    hidden = torch.randn(2, 3, 40, 4, generator=gen, dtype=torch.float64)
    mask = torch.ones(2, 3, 40, dtype=torch.bool)
    r = torch.tensor([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0]], dtype=torch.float64)
    default = fast_hista(hidden, mask, r)
    assert torch.equal(default, fast_hista(hidden, mask, r, w=16))
    assert not torch.equal(default, fast_hista(hidden, mask, r, w=15))
    assert torch.equal(fast_hista(pool_hidden(hidden, mask), mask, r), default)


def test_pooling_rollouts_without_valid_tokens_gives_no_blocks() -> None:
    """M = ceil(max L / w) = 0 when no row has a valid token (and for an empty batch)."""
    hidden = torch.randn(2, 3, 5, 4, dtype=torch.float64)
    assert pool_hidden(hidden, torch.zeros(2, 3, 5, dtype=torch.bool), 2).blocks.shape == (
        2,
        3,
        0,
        4,
    )
    empty = pool_hidden(hidden[:0], torch.zeros(0, 3, 5, dtype=torch.bool), 2)
    assert empty.blocks.shape == (0, 3, 0, 4) and empty.w == 2


def test_the_first_bad_rollout_is_named_and_an_overflow_is_told_from_a_non_finite_state() -> None:
    hidden, mask, r = _pack([EXAMPLE, EXAMPLE])
    bad = hidden.clone()
    bad[0, 3, 1, 0] = math.nan  # the first bad rollout (flattened order) ...
    bad[1, 2, 3, 0] = math.nan  # ... and a later one
    with pytest.raises(ValueError, match=r"non-finite value in group 0 \(sample 3, token 1\)"):
        fast_hista(bad, mask, r, w=2)
    big = hidden.float().clone()
    big[1, 0, :2, 0] = 3e38  # finite, but the block sum overflows float32
    with pytest.raises(
        ValueError, match=r"hidden overflows torch.float32 when pooled in group 1 \(sample 0\)"
    ):
        pool_hidden(big, mask, 2)
