"""Hostile input strategies: ties, binary rewards, all-equal groups, large offsets with tiny
spreads, extreme magnitudes, tiny and large groups."""

from __future__ import annotations

from fractions import Fraction

from hypothesis import strategies as st

Batch = list[list[Fraction]]


def _values(binary: bool) -> st.SearchStrategy[st.SearchStrategy[Fraction]]:
    """A strategy of value strategies: one kind of values per batch."""
    if binary:
        return st.just(st.sampled_from([Fraction(0), Fraction(1)]))
    small_ints = st.integers(-3, 3).map(Fraction)
    floats = st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False).map(Fraction)
    rationals = st.fractions(-10, 10, max_denominator=12)
    offset = st.tuples(
        st.sampled_from([1e3, -1e3, 1e6, 0.5]), st.sampled_from([1e-4, 1e-7, 1e-2])
    ).map(
        lambda base_spread: st.integers(0, 3).map(
            lambda j: Fraction(base_spread[0] + j * base_spread[1])
        )
    )
    return st.one_of(
        st.just(small_ints),
        st.just(st.sampled_from([Fraction(0), Fraction(1)])),
        st.just(floats),
        st.just(rationals),
        offset,
    )


@st.composite
def batches(
    draw: st.DrawFn,
    min_n: int,
    max_n: int,
    binary: bool = False,
    max_b: int = 3,
    min_b: int = 1,
    nonnegative: bool = False,
) -> Batch:
    """[B][G] exact rewards: one value kind per batch, sometimes an all-equal group;
    ``nonnegative``: every value replaced by its absolute value."""
    n = draw(st.integers(min_n, max_n))
    b = draw(st.integers(min_b, max(max_b, min_b)))
    values = draw(_values(binary))
    out = [draw(st.lists(values, min_size=n, max_size=n)) for _ in range(b)]
    if draw(st.booleans()) and not binary:
        out[0] = [out[0][0]] * n  # a constant group
    if nonnegative:
        out = [[abs(x) for x in group] for group in out]
    return out


def lengths_for(batch: Batch) -> st.SearchStrategy[list[list[int]]]:
    n = len(batch[0])
    return st.lists(
        st.lists(st.integers(1, 50), min_size=n, max_size=n),
        min_size=len(batch),
        max_size=len(batch),
    )
