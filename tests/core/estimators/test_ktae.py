"""KTAE: worked vectors, fast == reference, spec/ktae.md's properties, exact Fisher p, bad input."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from advest.fast.ktae import _fisher_strength
from advest.fast.ktae import ktae as fast_ktae
from advest.reference._exact import comb
from advest.reference.ktae import TIE, fisher_p, key_token_values
from advest.reference.ktae import ktae as ref_ktae

Rollouts = list[list[int]]
VEC_A: tuple[Rollouts, list[int]] = (
    [[1, 2, 3], [1, 2, 4], [1, 2, 5], [1, 6, 5], [1, 6, 7]],
    [1, 1, 0, 0, 0],
)
VEC_B: tuple[Rollouts, list[int]] = ([[5, 7, 9], [5, 7, 8], [5, 6, 8], [5, 6, 6]], [1, 1, 0, 0])


def _pack(
    groups: list[tuple[Rollouts, list[float]]], t: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    b, g = len(groups), len(groups[0][0])
    ids = torch.full((b, g, t), 999, dtype=torch.long)  # padding ids that must not matter
    mask = torch.zeros((b, g, t), dtype=torch.bool)
    for i, (rollouts, _) in enumerate(groups):
        for j, o in enumerate(rollouts):
            ids[i, j, : len(o)] = torch.tensor(o, dtype=torch.long)
            mask[i, j, : len(o)] = True
    rewards = torch.tensor([r for _, r in groups], dtype=torch.float64)
    return ids, mask, rewards


def _valid(out: torch.Tensor, rollouts: Rollouts) -> list[list[float]]:
    return [out[j, : len(o)].tolist() for j, o in enumerate(rollouts)]


@pytest.mark.parametrize(
    ("vec", "tf", "want"),
    [
        (VEC_A, True, {1: 0, 2: 0.689502, 3: 1, 4: 1, 5: -1, 6: -1, 7: -1}),
        (
            VEC_A,
            False,
            {1: 0, 2: 0.204682, 3: 0.150289, 4: 0.150289, 5: -0.204682, 6: -0.204682, 7: -0.026298},
        ),
        (VEC_B, True, {5: 0, 6: -1, 7: 1, 8: 0, 9: 1}),
        (VEC_B, False, {5: 0, 6: -0.532994, 7: 0.532994, 8: 0, 9: 0.061043}),
    ],
)
def test_worked_vectors(vec: tuple[Rollouts, list[int]], tf: bool, want: dict[int, float]) -> None:
    rollouts, rewards = vec
    kappa = key_token_values(rollouts, rewards, tf=tf)
    assert {v: round(k, 6) for v, k in kappa.items()} == pytest.approx(want, abs=1e-6)
    ids, mask, r = _pack([(rollouts, [float(x) for x in rewards])], 3)
    got = _valid(fast_ktae(ids, mask, r, tf=tf)[0], rollouts)
    for row_got, row_ref in zip(got, ref_ktae(rollouts, rewards, tf=tf), strict=True):
        assert row_got == pytest.approx(row_ref, abs=1e-12)


def test_vector_a_advantages_and_fisher_values() -> None:
    adv = ref_ktae(*VEC_A)
    assert [round(x, 6) for x in adv[0]] == [1.095443, 1.784945, 2.095443]
    assert [round(x, 6) for x in adv[2]] == [-0.730295, -0.040793, -1.730295]
    assert fisher_p(2, 1, 0, 2) == Fraction(2, 5) and fisher_p(0, 1, 2, 2) == 1
    assert fisher_p(9, 1, 2, 8) == Fraction(23, 4199)  # 0.0055: both tied tails kept
    for table in ((2, 2, 2, 2), (4, 4, 4, 4), (3, 5, 3, 5), (1, 0, 1, 2), (0, 1, 2, 2)):
        assert fisher_p(*table) == 1, table


def _exact_p_values(n: int) -> dict[tuple[int, int, int, int], Fraction]:
    """reference.ktae.fisher_p of every 2×2 table of n rollouts with both sides non-empty, in one
    pass per margin (r1, c1): the same rule on integer numerators of the hypergeometric
    probabilities (prob(k) <= prob(a)·(1 + TIE)), so that G = 64 (47,905 tables) costs ~1 s.
    ``test_per_margin_p_values_equal_fisher_p`` ties it to fisher_p."""
    out: dict[tuple[int, int, int, int], Fraction] = {}
    for r1 in range(n + 1):
        for c1 in range(1, n):
            ks = range(max(0, r1 + c1 - n), min(r1, c1) + 1)
            nums = [comb(c1, k) * comb(n - c1, r1 - k) for k in ks]
            for a, num_a in zip(ks, nums, strict=True):
                limit = num_a * (1 + TIE)
                included = [x for x in nums if x <= limit]
                p = (
                    Fraction(1)
                    if len(included) == len(nums)
                    else Fraction(sum(included), comb(n, r1))
                )
                out[(a, r1 - a, c1 - a, n - r1 - c1 + a)] = p
    return out


# 1e-3 instead of 1e-7 as the tie tolerance changes these tables' p first (and only at G >= 63).
TIE_SENSITIVE_64 = [(3, 13, 21, 27), (0, 26, 29, 9), (9, 29, 26, 0), (27, 21, 13, 3)]


def test_per_margin_p_values_equal_fisher_p() -> None:
    exact = _exact_p_values(64)
    gen = torch.Generator().manual_seed(0)
    tables = list(exact)
    sample = [tables[i] for i in torch.randint(len(tables), (150,), generator=gen).tolist()]
    assert all(t in exact for t in TIE_SENSITIVE_64)
    for table in sample + TIE_SENSITIVE_64:
        assert exact[table] == fisher_p(*table), table


@pytest.mark.parametrize("n", [2, 5, 9, 16, 33, 64])
def test_fast_fisher_strength_matches_the_exact_p_value_on_every_table(n: int) -> None:
    """Every 2×2 table with n rollouts (G up to 64, where a tie tolerance of 1e-3 instead of
    1e-7 first changes p): float64 log-space Fisher with the 1e-7 tie rule gives the exact
    rational p-value's strength (and 0 exactly where p = 1)."""
    exact = _exact_p_values(n)
    tables = list(exact)
    a, b, c, _ = (torch.tensor(x) for x in zip(*tables, strict=True))
    got = _fisher_strength(a, b, a + c, n).tolist()
    for table, value in zip(tables, got, strict=True):
        p = exact[table]
        want = 0.0 if p == 1 else math.exp(-2 * float(p))
        assert value == pytest.approx(want, abs=1e-12), (table, p)
        assert (value == 0) == (want == 0), table


@st.composite
def groups(draw: st.DrawFn, g_max: int = 6, t_max: int = 6) -> tuple[Rollouts, list[float]]:
    g = draw(st.integers(1, g_max))
    vocab = draw(st.integers(1, 8))
    rollouts = [draw(st.lists(st.integers(0, vocab), min_size=0, max_size=t_max)) for _ in range(g)]
    rewards = draw(st.lists(st.sampled_from([0.0, 1.0, -1.0, 0.5]), min_size=g, max_size=g))
    return rollouts, rewards


@given(
    first=groups(),
    second=groups(),
    tf=st.booleans(),
    special=st.sets(st.integers(0, 8), max_size=2),
)
def test_fast_equals_reference_and_groups_are_isolated(
    first: tuple[Rollouts, list[float]],
    second: tuple[Rollouts, list[float]],
    tf: bool,
    special: set[int],
) -> None:
    g = len(first[0])
    second = ((second[0] * g)[:g], (second[1] * g)[:g])
    ids, mask, r = _pack([first, second], 6)
    out = fast_ktae(ids, mask, r, tf=tf, special_ids=special)
    for i, (rollouts, rewards) in enumerate((first, second)):
        want = ref_ktae(rollouts, rewards, tf=tf, special_ids=special)
        for row_got, row_ref in zip(_valid(out[i], rollouts), want, strict=True):
            assert row_got == pytest.approx(row_ref, abs=1e-9)
    assert bool((out[~mask] == 0).all())  # padding


@pytest.mark.parametrize("rewards", [[1.0, 0.0, 0.0], [0.0, 1.0, 1.0]], ids=["correct", "wrong"])
def test_a_side_of_one_token_in_all_gets_its_frequencies_from_that_one_token(
    rewards: list[float],
) -> None:
    """One side's responses hold one token in all (l_t or l_f = 1): its frequencies are
    count / 1, the smallest length the clamps in fast's term-frequency part leave alone (a
    clamp to 2 there went unseen by the random groups, whose sides hold more tokens)."""
    rollouts = [[3], [3, 4, 5], [4, 4]]
    ids, mask, r = _pack([(rollouts, rewards)], 3)
    got = _valid(fast_ktae(ids, mask, r, tf=True)[0], rollouts)
    want = ref_ktae(rollouts, rewards, tf=True)
    for row_got, row_ref in zip(got, want, strict=True):
        assert row_got == pytest.approx(row_ref, abs=1e-9)


@given(grp=groups())
def test_swapping_correct_and_incorrect_negates_every_advantage(
    grp: tuple[Rollouts, list[float]],
) -> None:
    rollouts, rewards = grp
    binary = [1.0 if x > 0 else 0.0 for x in rewards]
    flipped = [1.0 - x for x in binary]
    a, b = ref_ktae(rollouts, binary), ref_ktae(rollouts, flipped)
    for ra, rb in zip(a, b, strict=True):
        assert ra == pytest.approx([-x for x in rb], abs=1e-9)


@given(grp=groups(), data=st.data())
def test_permuting_rollouts_and_positions_permutes_advantages(
    grp: tuple[Rollouts, list[float]], data: st.DataObject
) -> None:
    rollouts, rewards = grp
    perm = data.draw(st.permutations(range(len(rollouts))))
    shuffled = [list(reversed(rollouts[j])) for j in perm]
    a = ref_ktae(rollouts, rewards)
    b = ref_ktae(shuffled, [rewards[j] for j in perm])
    for i, j in enumerate(perm):
        assert b[i] == pytest.approx(list(reversed(a[j])), abs=1e-12)


@given(grp=groups())
def test_bounds_and_token_id_tying(grp: tuple[Rollouts, list[float]]) -> None:
    rollouts, rewards = grp
    kappa = key_token_values(rollouts, rewards)
    assert all(-1 <= k <= 1 for k in kappa.values())
    adv = ref_ktae(rollouts, rewards)
    from advest.reference.group import grpo

    base = [float(x) for x in grpo(rewards)]
    for o, row, g in zip(rollouts, adv, base, strict=True):
        for v, x in zip(o, row, strict=True):
            assert x == pytest.approx(g + kappa[v], abs=1e-12)  # one κ per id, every position


def test_reduction_to_grpo_when_no_token_discriminates() -> None:
    rollouts = [[3, 4, 4], [4, 3], [3, 3, 4, 4]]
    ids, mask, r = _pack([(rollouts, [1.0, 0.0, 1.0])], 4)
    from advest.fast.group import grpo

    out = fast_ktae(ids, mask, r)
    base = grpo(r)[0]
    for j, o in enumerate(rollouts):
        assert out[0, j, : len(o)].tolist() == [float(base[j])] * len(o)  # exact


def test_degenerate_groups_special_ids_and_padding_give_zero() -> None:
    ids, mask, r = _pack([([[1, 2], [2, 3]], [1.0, 1.0]), ([[1, 2], [2, 3]], [0.0, 0.0])], 3)
    assert bool((fast_ktae(ids, mask, r) == 0).all())
    ids, mask, r = _pack([([[1, 2, 3], [1, 4]], [1.0, 0.0])], 3)
    out = fast_ktae(ids, mask, r, special_ids={3, 4})
    from advest.fast.group import grpo

    base = grpo(r)[0]
    assert float(out[0, 0, 2]) == float(base[0]) and float(out[0, 1, 1]) == float(base[1])
    assert float(out[0, 1, 2]) == 0.0  # padding


def test_direction_sign_follows_the_side_a_token_appears_on() -> None:
    kappa = key_token_values([[1, 7], [1, 7], [1, 8], [1, 8]], [1, 1, 0, 0], tf=False)
    assert kappa[7] > 0 > kappa[8] and kappa[1] == 0


def test_bad_input_raises_clear_errors() -> None:
    ids = torch.zeros(2, 3, 4, dtype=torch.long)
    mask = torch.ones(2, 3, 4, dtype=torch.bool)
    r = torch.zeros(2, 3)
    with pytest.raises(TypeError, match="token_ids must be an integer tensor"):
        fast_ktae(ids.float(), mask, r)
    with pytest.raises(ValueError, match="token_ids must have shape"):
        fast_ktae(ids[:, :2], mask[:, :2], r)
    with pytest.raises(ValueError, match="mask must have the shape"):
        fast_ktae(ids, mask[..., :2], r)
    bad = ids.clone()
    bad[1, 0, 0] = -5
    with pytest.raises(ValueError, match="negative id at a valid position in group 1"):
        fast_ktae(bad, mask, r)
    with pytest.raises(ValueError, match="rewards has a non-finite value in group 1"):
        fast_ktae(ids, mask, torch.tensor([[0.0, 1, 0], [float("nan"), 0, 1]]))
    with pytest.raises(ValueError, match="token_ids has 2 rollouts but rewards has 3"):
        ref_ktae([[1], [2]], [1, 0, 0])


def test_hypergeometric_probabilities_sum_to_one() -> None:
    n, r1, c1 = 7, 3, 4
    total = sum(Fraction(comb(c1, k) * comb(n - c1, r1 - k), comb(n, r1)) for k in range(0, 4))
    assert total == 1
