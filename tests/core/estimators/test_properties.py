"""Every property a catalogue row claims, checked on the exact reference (with equality) and on
the fast version (within tolerance): one check function per property, from ``tests/checks.py``."""

from __future__ import annotations

from fractions import Fraction

import pytest
import torch
from hypothesis import assume, given
from hypothesis import strategies as st

from advest.oracle.reports.catalogue import CATALOGUE, Row
from tests import checks
from tests.strategies import batches, lengths_for

# Every test here runs on both max@K paths, forced (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("maxk_path")

IMPLS = ["reference", torch.float64]


def _rows(predicate: str) -> list[Row]:
    return [row for row in CATALOGUE if getattr(row, predicate)]


def _min_n(row: Row) -> int:
    return max(row.min_n, 2 if row.k_domain == "k<=n-1" else 1)


def _draw(row: Row, data: st.DataObject, max_n: int = 7) -> tuple[list[list[Fraction]], int]:
    batch = data.draw(
        batches(
            _min_n(row),
            max_n,
            binary=row.binary_only,
            max_b=2,
            min_b=row.min_b,
            nonnegative=row.nonnegative,
        )
    )
    return batch, data.draw(st.sampled_from(row.k_values(len(batch[0]))))


def _ids(row: Row) -> str:
    return row.id


@pytest.mark.parametrize("impl", IMPLS, ids=str)
@pytest.mark.parametrize("row", [r for r in CATALOGUE if r.shift is not None], ids=_ids)
@given(data=st.data(), c=st.fractions(-100, 100, max_denominator=8))
def test_shifting_rewards_moves_outputs_as_claimed(
    row: Row, impl: object, data: st.DataObject, c: Fraction
) -> None:
    batch, k = _draw(row, data)
    lengths = data.draw(lengths_for(batch)) if row.needs_lengths else None
    moved = [[x + c for x in group] for group in batch]
    assume(checks.representable(batch, impl) and checks.representable(moved, impl))  # type: ignore[arg-type]
    checks.assert_shift(row, impl, batch, k, c, lengths)  # type: ignore[arg-type]


@pytest.mark.parametrize("impl", IMPLS, ids=str)
@pytest.mark.parametrize("row", [r for r in CATALOGUE if r.scale_power is not None], ids=_ids)
@given(
    data=st.data(),
    a=st.one_of(
        st.integers(-4, 4).map(lambda j: Fraction(2) ** j),
        st.fractions(Fraction(1, 16), 16, max_denominator=16).filter(bool),
    ),
)
def test_scaling_rewards_scales_outputs_as_claimed(
    row: Row, impl: object, data: st.DataObject, a: Fraction
) -> None:
    batch, k = _draw(row, data)
    lengths = data.draw(lengths_for(batch)) if row.needs_lengths else None
    scaled = [[a * x for x in group] for group in batch]
    assume(checks.representable(batch, impl) and checks.representable(scaled, impl))  # type: ignore[arg-type]
    checks.assert_scaling(row, impl, batch, k, a, lengths)  # type: ignore[arg-type]


@pytest.mark.parametrize("impl", IMPLS, ids=str)
@pytest.mark.parametrize("row", CATALOGUE, ids=_ids)
@given(data=st.data())
def test_outputs_are_permutation_equivariant(row: Row, impl: object, data: st.DataObject) -> None:
    batch, k = _draw(row, data)
    lengths = data.draw(lengths_for(batch)) if row.needs_lengths else None
    perm = data.draw(st.permutations(range(len(batch[0]))))
    checks.assert_permutation_equivariant(row, impl, batch, k, list(perm), lengths)  # type: ignore[arg-type]


@pytest.mark.parametrize("impl", IMPLS, ids=str)
@pytest.mark.parametrize("row", _rows("centred"), ids=_ids)
@given(data=st.data())
def test_centred_estimators_sum_to_zero_in_every_group(
    row: Row, impl: object, data: st.DataObject
) -> None:
    batch, k = _draw(row, data)
    checks.assert_centred(row, impl, batch, k)  # type: ignore[arg-type]


@pytest.mark.parametrize("impl", IMPLS, ids=str)
@pytest.mark.parametrize("row", CATALOGUE, ids=_ids)
@given(data=st.data())
def test_ties_get_equal_outputs_and_order_is_kept(
    row: Row, impl: object, data: st.DataObject
) -> None:
    batch, k = _draw(row, data)
    lengths = [[3] * len(batch[0]) for _ in batch] if row.needs_lengths else None
    checks.assert_ties_and_monotone(row, impl, batch, k, lengths)  # type: ignore[arg-type]


@pytest.mark.parametrize("impl", IMPLS, ids=str)
@pytest.mark.parametrize("row", _rows("exact_zero_on_flat"), ids=_ids)
@given(data=st.data())
def test_degenerate_groups_give_exact_zeros(row: Row, impl: object, data: st.DataObject) -> None:
    """§3.1: fewer than K samples strictly below the max (e.g. an all-equal group, or a binary
    group with fewer than K failures) gives exact zeros, also in float64 with offsets."""
    n = data.draw(st.integers(_min_n(row), 8))
    k = data.draw(st.sampled_from(row.k_values(n)))
    k_flat = k if row.k_domain is not None else 1
    below = data.draw(st.integers(0, k_flat - 1))
    top = data.draw(st.sampled_from([Fraction(1), Fraction(1000.0001), Fraction(-3, 7)]))
    low = Fraction(0) if row.binary_only else top - data.draw(st.sampled_from([1, Fraction(1, 3)]))
    top = Fraction(1) if row.binary_only else top
    if row.nonnegative:  # the same shapes of group, moved to non-negative rewards
        top, low = top + 1, max(low + 1, Fraction(0))
    group = [low] * below + [top] * (n - below)
    perm = data.draw(st.permutations(range(n)))
    checks.assert_exact_zero_on_flat(row, impl, [[group[j] for j in perm]], k)  # type: ignore[arg-type]


@pytest.mark.parametrize("row", [r for r in CATALOGUE if r.shift is not None], ids=_ids)
def test_fast_is_accurate_with_large_offsets_and_tiny_spreads(row: Row) -> None:
    """The peer-code failure of §9 (r = [1000, 1000.0001], one-pass variance with a floor)."""
    batch = [[Fraction(1000.0), Fraction(1000.0001), Fraction(1000.0), Fraction(1000.0001)]]
    batch += [[Fraction(1000.0001), Fraction(1000.0), Fraction(1000.0001), Fraction(1000.0001)]] * (
        row.min_b - 1
    )
    lengths = [[1, 2, 3, 4]] if row.needs_lengths else None
    for k in row.k_values(4):
        checks.assert_matches_reference(row, torch.float64, batch, k, lengths)
