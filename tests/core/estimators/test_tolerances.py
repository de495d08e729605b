"""The tolerances of spec/tolerances.py reject what they must: an all-zeros estimator, and an
estimator that loses the spread to the offset (no group shift), on the suite's own large-offset
inputs (1e6 + j·1e-7 in float64, 1e3 + j·2⁻¹² in float32). Under the old rule (tol · max|r|) both
passed for canonical, maxpo, ei, dr_grpo and rloo."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from fractions import Fraction
from typing import Any

import pytest
import torch

import advest.fast.group
import advest.fast.maxk
import advest.fast.maxrl  # noqa: F401  (binds the submodules patched below)
from advest import fast
from advest.fast import registry
from advest.oracle.reports.catalogue import CATALOGUE, Row
from advest.oracle.reports.catalogue import tolerance_entry as entry
from advest.spec.tolerances import output_floor
from tests.checks import assert_matches_reference, evaluate, rounded

Batch = list[list[Fraction]]

# Large offsets with tiny spreads (the second group differs: batch-coupled rows need B >= 2).
STEPS = [(0, 1, 3, 2, 1, 5), (4, 0, 0, 2, 6, 1)]
OFFSET = {
    torch.float64: (Fraction(10**6), Fraction(1e-7)),  # 1e-7 ≈ 860 ulps of 1e6
    torch.float32: (Fraction(1000), Fraction(1, 4096)),  # 4 ulps of 1e3 in float32
}
BINARY = [[Fraction(x) for x in (1, 0, 0, 1, 0, 0)], [Fraction(x) for x in (0, 1, 1, 1, 0, 0)]]
DTYPES = [torch.float64, torch.float32]


def large_offset_batch(row: Row, dtype: torch.dtype) -> Batch:
    """[B][6] rewards at a large offset with a spread of a few hundred (f64) or 4 (f32) ulps."""
    if row.binary_only:
        return BINARY
    base, step = OFFSET[dtype]
    batch = [[base + j * step for j in steps] for steps in STEPS]
    assert rounded(batch, dtype) == batch or dtype == torch.float64
    return rounded(batch, dtype)


def _rejected(row: Row, dtype: torch.dtype, batch: Batch, k: int) -> bool:
    lengths = [[1, 2, 3, 4, 5, 6]] * len(batch) if row.needs_lengths else None
    try:
        assert_matches_reference(row, dtype, batch, k, lengths)
    except AssertionError:
        return True
    return False


def _ks(row: Row) -> list[int]:
    return row.k_values(6)


def _nonzero_ks(row: Row, batch: Batch) -> list[int]:
    """The K at which the exact output on ``batch`` is not all zeros (else zeros are right)."""
    lengths = [[1, 2, 3, 4, 5, 6]] * len(batch) if row.needs_lengths else None
    return [
        k
        for k in _ks(row)
        if any(v != 0 for g in evaluate(row, "reference", batch, k, lengths) for v in g)
    ]


def _ids(row: Row) -> str:
    return row.id


def test_every_registered_estimator_has_a_justified_float64_and_float32_entry() -> None:
    for name in registry.names():
        for dtype in DTYPES:
            tol = entry(name, dtype)
            assert 0 < tol.rel < 1e-3 and len(tol.why) > 20, (name, dtype)
    with pytest.raises(
        KeyError, match=r"registry entry of 'maxpo' has no tolerance for torch.float16"
    ):
        entry("maxpo", torch.float16)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("row", CATALOGUE, ids=_ids)
def test_the_real_estimator_passes_on_large_offsets(row: Row, dtype: torch.dtype) -> None:
    """Control: the checks below fail because of the planted defects, not by construction."""
    batch = large_offset_batch(row, dtype)
    for k in _ks(row):
        assert not _rejected(row, dtype, batch, k), k


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("row", CATALOGUE, ids=_ids)
def test_an_all_zeros_estimator_is_rejected_on_large_offsets(row: Row, dtype: torch.dtype) -> None:
    def zeros(*args: Any, **kwargs: Any) -> torch.Tensor:
        # called as the registered function is, by keyword: rewards, or a multi-reward
        # estimator's reward_parts [B, G, R]
        given = kwargs.get("rewards", kwargs.get("reward_parts"))
        rewards = given if given is not None else args[0]
        return torch.zeros(rewards.shape[:2], dtype=rewards.dtype)

    batch = large_offset_batch(row, dtype)
    ks = _nonzero_ks(row, batch)
    assert ks, f"{row.id}: the exact output is all zeros at every K on {batch}"
    mutant = dataclasses.replace(row, fast=zeros)
    assert all(_rejected(mutant, dtype, batch, k) for k in ks), row.id


# --- no group shift: the fast code's own shift removed ------------------------------------------


def _maxk_estimate_without_shift(real: Callable[..., Any]) -> Callable[..., Any]:
    """fast.maxk.estimate whose estimators see the sorted rewards themselves (shift 0): every
    block is then formed at the offset, and the spread's digits go to rounding at 1e6."""

    def estimate(rewards: torch.Tensor, k: object, name: str, body: Any, **kw: Any) -> Any:
        def unshifted(g: Any) -> Any:
            return body(g._replace(x=g.x + g.shift, shift=torch.zeros_like(g.shift)))

        return real(rewards, k, name, unshifted, **kw)

    return estimate


def _centred_without_shift(widen: bool) -> Callable[[torch.Tensor], torch.Tensor]:
    """fast.group._centred without subtracting the group min first (and, if not ``widen``, in the
    input's dtype, as a naive float32 implementation does)."""

    def centred(rewards: torch.Tensor) -> torch.Tensor:
        x = rewards.to(torch.float64) if widen else rewards
        return (x - x.mean(dim=-1, keepdim=True)).to(torch.float64)

    return centred


def _batch_units_without_shift(widen: bool) -> Callable[[torch.Tensor, str, Any], Any]:
    """fast.group._batch_units without subtracting the batch min: units of max|r|, not of the
    batch spread (and, if not ``widen``, in the input's dtype); one process (no group)."""

    def units(rewards: torch.Tensor, name: str, group: Any = None) -> Any:
        x = rewards.to(torch.float64) if widen else rewards
        m = x.abs().amax()
        return x / m, m, rewards.shape[0]

    return units


def _opo_without_shift(rewards: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    x, w = rewards.to(torch.float64), lengths.to(torch.float64)
    return (x - (w * x).sum(-1, keepdim=True) / w.sum(-1, keepdim=True)).to(rewards.dtype)


def _p_normalised_without_shift(widen: bool) -> Callable[[torch.Tensor], torch.Tensor]:
    """fast.maxrl._p_normalised as (r − r̄)/r̄ at the offset (and, if not ``widen``, in the input's
    dtype): r − r̄ then loses the spread's digits to the offset's rounding."""

    def p_normalised(rewards: torch.Tensor) -> torch.Tensor:
        x = rewards.to(torch.float64) if widen else rewards
        r_bar = x.mean(dim=-1, keepdim=True)
        safe = torch.where(r_bar == 0, 1.0, r_bar)
        return torch.where(r_bar == 0, 0.0, (x - r_bar) / safe).to(torch.float64)

    return p_normalised


@contextmanager
def no_group_shift(row: Row, dtype: torch.dtype) -> Iterator[Row]:
    """The row with its fast path's group (or batch) shift removed."""
    with pytest.MonkeyPatch.context() as mp:
        if row.k_domain is not None:
            mp.setattr(fast.maxk, "estimate", _maxk_estimate_without_shift(fast.maxk.estimate))
        elif row.name in ("james_stein", "ebpo"):
            mp.setattr(
                fast.group, "_batch_units", _batch_units_without_shift(dtype == torch.float64)
            )
        elif row.name == "opo":
            row = dataclasses.replace(row, fast=_opo_without_shift)
        elif row.nonnegative:
            widen = dtype == torch.float64
            mp.setattr(fast.maxrl, "_p_normalised", _p_normalised_without_shift(widen))
        else:
            mp.setattr(fast.group, "_centred", _centred_without_shift(dtype == torch.float64))
        yield row


def _spread_sized(row: Row) -> bool:
    """The output does not move with the rewards' offset (shift 0 at K >= 2, or claimed 0): its
    size is the spread's, so the offset's rounding is a defect, not an ulp of the output."""
    return row.shift is None or all(row.shift(6, k) == 0 for k in _ks(row) if k >= 2)


# tang_passk has no shift to remove (an exact top-2 gap); chen_passk takes binary rewards only;
# maxrl_unbiased without baseline is N·r/S ≈ 1 at an offset: the rounding is an ulp of |A|.
NO_SHIFT_F64 = [
    r
    for r in CATALOGUE
    if _spread_sized(r)
    and not r.binary_only
    and r.name != "tang_passk"
    and r.options.get("baseline", True)
]
# gdpo widens its rewards to float64 before it calls grpo, as the maxk path does: the float32
# mutant computes in float64 there, and the float64 check above covers its missing shift.
NO_SHIFT_F32 = [
    r
    for r in CATALOGUE
    if r.k_domain is None and r.name not in ("opo", "gdpo") and r.options.get("baseline", True)
]


@pytest.mark.parametrize("row", NO_SHIFT_F64, ids=_ids)
def test_an_estimator_without_the_group_shift_is_rejected_at_1e6_in_float64(row: Row) -> None:
    """The digits of a spread of 1e-7 at 1e6 are lost when the offset is not removed first
    (canonical: relative error ~1e-2, rloo ~4e-4): rejected wherever the output is spread-sized.
    Where the output moves with the offset (pkpo_s, EI at K = 1) the same rounding is an ulp of
    the output, within tolerance, and the mutant is then harmless: those rows are not listed."""
    batch = large_offset_batch(row, torch.float64)
    ks = [k for k in _nonzero_ks(row, batch) if row.shift is None or row.shift(6, k) == 0]
    if row.k_domain is not None:
        ks = [k for k in ks if k >= 2] or ks
    assert ks
    with no_group_shift(row, torch.float64) as mutant:
        assert all(_rejected(mutant, torch.float64, batch, k) for k in ks), row.id


@pytest.mark.parametrize("row", NO_SHIFT_F32, ids=_ids)
def test_a_float32_group_baseline_without_shift_or_widening_is_rejected_at_1e3(row: Row) -> None:
    """1e3 + j·2⁻¹² in float32: the group mean taken in float32 at the offset is off by an ulp of
    1e3 (6e-5), a quarter of the spread. (Computed in float64, the missing shift costs ~1e-13
    there, below float32's own rounding: not a defect, and the maxk path always widens.)"""
    batch = large_offset_batch(row, torch.float32)
    with no_group_shift(row, torch.float32) as mutant:
        assert any(_rejected(mutant, torch.float32, batch, k) for k in _ks(row)), row.id


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16, torch.float16])
def test_the_absolute_floor_is_the_smallest_subnormal_of_the_dtype(dtype: torch.dtype) -> None:
    """Every bound carries ``output_floor``: the gap between 0 and the next number up."""
    zero = torch.zeros((), dtype=dtype)
    smallest = float(torch.nextafter(zero, torch.ones((), dtype=dtype)))
    assert output_floor(dtype) == smallest > 0
