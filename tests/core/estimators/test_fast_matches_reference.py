"""fast == exact reference, for every catalogue row, on hostile inputs and in every dtype."""

from __future__ import annotations

from fractions import Fraction

import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st

from advest.oracle.reports.catalogue import CATALOGUE, Row
from advest.reference import maxk_closed
from advest.spec.tolerances import output_floor
from tests.checks import assert_close, assert_matches_reference, bound, evaluate
from tests.strategies import Batch, batches, lengths_for

# Every test here runs on both max@K paths, forced (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("maxk_path")

DTYPES = [torch.float64, torch.float32]


def _min_n(row: Row) -> int:
    return max(row.min_n, 2 if row.k_domain == "k<=n-1" else 1)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("row", CATALOGUE, ids=lambda r: r.id)
@given(data=st.data())
def test_fast_equals_reference_on_hostile_groups(
    row: Row, dtype: torch.dtype, data: st.DataObject
) -> None:
    batch = data.draw(
        batches(
            _min_n(row), 8, binary=row.binary_only, min_b=row.min_b, nonnegative=row.nonnegative
        )
    )
    k = data.draw(st.sampled_from(row.k_values(len(batch[0]))))
    lengths = data.draw(lengths_for(batch)) if row.needs_lengths else None
    assert_matches_reference(row, dtype, batch, k, lengths)


def _multisets(n: int, levels: int) -> list[list[Fraction]]:
    """Every non-decreasing vector of length n over {0..levels-1}."""
    if n == 0:
        return [[]]
    return [
        [*rest, Fraction(top)]
        for top in range(levels)
        for rest in _multisets(n - 1, levels)
        if not rest or rest[-1] <= top
    ]


@pytest.mark.parametrize("row", CATALOGUE, ids=lambda r: r.id)
def test_fast_equals_reference_exhaustively_on_small_integer_domains(row: Row) -> None:
    """Every multiset of {0, 1, 2} (binary rows: {0, 1}) with G = 1..9 (8 for the costliest
    brute forces), every K, shuffled once so the sort is exercised."""
    levels = 2 if row.binary_only else 3
    max_n = 8 if row.name in ("pkpo_sloo", "l2o_baseline", "maxpo") else 9
    gen = torch.Generator().manual_seed(0)
    for n in range(_min_n(row), max_n + 1):
        groups = _multisets(n, levels)
        perm = torch.randperm(n, generator=gen).tolist()
        batch = [[g[j] for j in perm] for g in groups]
        lengths = [[1 + (j % 3) for j in range(n)] for _ in batch] if row.needs_lengths else None
        for k in row.k_values(n):
            assert_matches_reference(row, torch.float64, batch, k, lengths)


LARGE = [(64, 2), (64, 33), (64, 63), (256, 17), (256, 255), (1024, 2), (1024, 512), (1024, 1023)]


@pytest.mark.parametrize(("n", "k"), LARGE)
def test_fast_building_blocks_match_exact_closed_form_up_to_g_1024(n: int, k: int) -> None:
    """Large groups: the brute force is exponential, so compare with the exact rational closed
    form (itself checked against the brute force below). Rewards include ties and an offset."""
    gen = torch.Generator().manual_seed(n + k)
    r = torch.randint(0, 50, (n,), generator=gen).double() / 7 + 100.0
    blocks = maxk_closed.blocks(r.tolist(), k)
    names = {"ei": blocks.ei, "l2o_baseline": blocks.l2o_baseline, "canonical": blocks.canonical}
    names["maxpo"] = blocks.canonical
    names["pkpo_s"] = [Fraction(k, n) * m for m in blocks.m_plus]
    names["pkpo_sloo"] = [
        Fraction(k, n) * p - Fraction(k, n - 1) * m
        for p, m in zip(blocks.m_plus, blocks.m_minus, strict=True)
    ]
    for row in CATALOGUE:
        if row.name in names:
            batch = [[Fraction(x) for x in r.tolist()]]
            got = evaluate(row, torch.float64, batch, k)
            allowed = bound(row, torch.float64, batch, [names[row.name]])
            assert_close(row, got, [names[row.name]], allowed, f"G={n}")


@given(batch=batches(1, 8, max_b=1), data=st.data())
@example(batch=[[Fraction(0), Fraction(0), Fraction(1)]], data=None)
def test_exact_closed_form_equals_subset_definition(
    batch: Batch, data: st.DataObject | None
) -> None:
    """reference.maxk_closed (the sorted prefix/suffix forms) == reference.maxk (enumeration)."""
    import advest.reference.maxk as brute

    r = batch[0]
    n = len(r)
    ks = list(range(1, n + 1)) if data is None else [data.draw(st.integers(1, n))]
    for k in ks:
        blocks = maxk_closed.blocks(r, k)
        assert blocks.ei == brute.ei(r, k)
        assert blocks.m_plus == brute.m_plus(r, k)
        assert blocks.comparator == brute.comparator_max(r, k)
        assert blocks.m_hat == brute.m_hat(r, k)
        if k <= n - 1:
            assert blocks.m_minus == brute.m_minus(r, k)
            assert blocks.l2o_baseline == brute.l2o_baseline(r, k)


@given(batch=batches(3, 8), data=st.data())
def test_dense_seed_forms_equal_the_reference(batch: Batch, data: st.DataObject) -> None:
    """MaxPO Thms E.1/E.2 (fast/maxk_dense.py) == brute force, ties included (K >= 2)."""
    import advest.reference.maxk as brute
    from advest.fast import maxk_dense

    n = len(batch[0])
    k = data.draw(st.integers(2, n - 1))
    r = torch.tensor([[float(x) for x in g] for g in batch], dtype=torch.float64)
    exact = [[Fraction(float(x)) for x in g] for g in batch]
    for fn, ref in ((maxk_dense.ei_dense, brute.ei), (maxk_dense.l2o_dense, brute.l2o_baseline)):
        got = fn(r, k).tolist()
        for g_got, g in zip(got, exact, strict=True):
            want = ref(g, k)
            # spec/tolerances.py's rule for ei: 1e-9 of max(spread, max |output|), not of max|r|
            scale = max([max(g) - min(g)] + [abs(b) for b in want])
            assert all(
                abs(Fraction(a) - b) <= Fraction(1e-9) * scale + Fraction(output_floor(r.dtype))
                for a, b in zip(g_got, want, strict=True)
            )


@given(
    n=st.integers(10, 1024),
    data=st.data(),
    dtype=st.sampled_from([torch.float64, torch.float32]),
)
def test_fast_matches_exact_closed_form_on_sampled_large_groups(
    n: int, data: st.DataObject, dtype: torch.dtype
) -> None:
    """G sampled up to 1024, K anywhere in its domain, integer ties plus an offset, in float64
    and float32 against the exact rational closed form, within spec/tolerances.py's bound."""
    k = data.draw(st.integers(1, n - 1))
    seed = data.draw(st.integers(0, 2**16))
    gen = torch.Generator().manual_seed(seed)
    r = (torch.randint(0, 9, (1, n), generator=gen).double() / 4 - 50).to(dtype)
    exact_in = [Fraction(x) for x in r[0].double().tolist()]
    blocks = maxk_closed.blocks(exact_in, k)
    for row in CATALOGUE:
        want = {"canonical": blocks.canonical, "ei": blocks.ei, "l2o_baseline": blocks.l2o_baseline}
        if row.name in want:
            got = evaluate(row, dtype, [exact_in], k)
            allowed = bound(row, dtype, [exact_in], [want[row.name]])
            assert_close(row, got, [want[row.name]], allowed, f"G={n}, K={k}, {dtype}")
