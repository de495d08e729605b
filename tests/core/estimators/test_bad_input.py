"""Bad input gets a clear error naming the argument and the offending group; reference and fast
raise the same exception type; no output is ever a silent NaN."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
import torch

import advest.fast.group
import advest.fast.maxk  # noqa: F401  (binds the submodule used as fast.maxk)
from advest import fast
from advest.oracle.reports.catalogue import CATALOGUE, Row
from advest.reference import group as reference_group


def _ref(row: Row, group: list[object], k: int) -> object:
    return row.call_reference([group], k, [[1] * len(group)] if row.needs_lengths else None)  # type: ignore[list-item]


def _fast(row: Row, rewards: torch.Tensor, k: int) -> object:
    lengths = torch.ones(rewards.shape, dtype=torch.long) if row.needs_lengths else None
    return row.call_fast(rewards, k, lengths)


def _k(row: Row, n: int) -> int:
    return row.k_values(n)[0]


@pytest.mark.parametrize("row", CATALOGUE, ids=lambda r: r.id)
@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_rewards_raise_value_error_naming_the_group(row: Row, bad: float) -> None:
    good = [0.0, 1.0, 1.0, 0.0]
    rewards = torch.tensor([good, good, [0.0, bad, 1.0, 0.0]], dtype=torch.float64)
    with pytest.raises(
        ValueError,
        match=r"rewards has a non-finite value in group 2 \((nan|inf|-inf) at sample \[1\]\)",
    ):
        _fast(row, rewards, _k(row, 4))
    with pytest.raises(ValueError, match="rewards has a non-finite value"):
        _ref(row, [0.0, bad, 1.0, 0.0], _k(row, 4))


@pytest.mark.parametrize("row", CATALOGUE, ids=lambda r: r.id)
def test_empty_groups_raise_value_error(row: Row) -> None:
    with pytest.raises(ValueError, match="empty group"):
        _fast(row, torch.zeros(3, 0), 1)
    if not row.batch_coupled:
        with pytest.raises(ValueError, match="empty group"):
            _ref(row, [], 1)


@pytest.mark.parametrize("row", CATALOGUE, ids=lambda r: r.id)
def test_a_batch_of_no_groups_is_refused_by_name_or_gives_no_advantages(row: Row) -> None:
    """An estimator whose groups' outputs depend on each other (``batch_coupled``: it pools over
    groups) has no value for a batch of none and refuses it by name; every other maps no groups
    to no advantages."""
    rewards, k = torch.zeros(0, 4, dtype=torch.float64), _k(row, 4)
    if row.batch_coupled:
        with pytest.raises(ValueError, match=r"needs at least (one group|2 groups).*; got B=0"):
            _fast(row, rewards, k)
        with pytest.raises(ValueError, match=r"needs at least (one group|2 groups).*; got B=0"):
            row.call_reference([], k, [] if row.needs_lengths else None)
    else:
        out = _fast(row, rewards, k)
        assert isinstance(out, torch.Tensor) and out.shape == (0, 4) and out.dtype == rewards.dtype
        assert row.call_reference([], k, [] if row.needs_lengths else None) == []


@pytest.mark.parametrize("row", CATALOGUE, ids=lambda r: r.id)
@pytest.mark.parametrize("shape", [(4,), (2, 3, 4), ()])
def test_wrong_rank_raises_value_error(row: Row, shape: tuple[int, ...]) -> None:
    with pytest.raises(ValueError, match=r"rewards must have shape \[B, G\]"):
        _fast(row, torch.zeros(shape), 1)


@pytest.mark.parametrize("row", CATALOGUE, ids=lambda r: r.id)
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.bool])
def test_non_float_dtypes_raise_type_error(row: Row, dtype: torch.dtype) -> None:
    with pytest.raises(TypeError, match="rewards must be a floating-point tensor"):
        _fast(row, torch.zeros(2, 4, dtype=dtype), _k(row, 4))
    if not row.batch_coupled:
        with pytest.raises(TypeError, match=r"rewards\[0\] must be an int, float or Fraction"):
            _ref(row, ["1", 0, 0, 1], _k(row, 4))


def _k_rows() -> list[Row]:
    return [row for row in CATALOGUE if row.k_domain in ("k<=n", "k<=n-1")]


@pytest.mark.parametrize("row", _k_rows(), ids=lambda r: r.id)
@pytest.mark.parametrize("k_kind", ["zero", "too_big", "not_int", "bool"])
def test_k_outside_the_domain_raises_value_error_naming_k_and_n(row: Row, k_kind: str) -> None:
    n = 4
    top = n if row.k_domain == "k<=n" else n - 1
    k: object = {"zero": 0, "too_big": top + 1, "not_int": 1.5, "bool": True}[k_kind]
    bound = "N" if row.k_domain == "k<=n" else "N-1"
    message = rf"{row.name} needs 1 <= K <= {bound}; got K={k!r}, N={n}"
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        _fast(row, torch.tensor([[0.0, 1.0, 1.0, 0.0]]), k)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        _ref(row, [0, 1, 1, 0], k)  # type: ignore[arg-type]


def test_maxpo_needs_a_group_larger_than_k() -> None:
    with pytest.raises(ValueError, match=r"maxpo needs 1 <= K <= N-1; got K=4, N=4"):
        fast.maxk.maxpo(torch.rand(8, 4), 4)


def test_chen_passk_rejects_non_binary_rewards_naming_group_and_sample() -> None:
    rewards = torch.tensor([[0.0, 1.0, 0.0], [1.0, 0.5, 0.0]])
    with pytest.raises(
        ValueError, match=r"binary rewards \(exactly 0 or 1\); group 1 has 0.5 at sample 1"
    ):
        fast.maxk.chen_passk(rewards, 1)
    # every reward above 1 (no 0 or 1 anywhere in the batch): still screened and refused
    with pytest.raises(ValueError, match=r"binary rewards \(exactly 0 or 1\); group 0 has 2"):
        fast.maxk.chen_passk(torch.tensor([[2.0, 3.0, 2.0]]), 1)
    import advest.reference.maxk as reference_maxk

    with pytest.raises(ValueError, match=r"binary rewards .* has 1/2 at sample 1"):
        reference_maxk.chen_passk([Fraction(1), Fraction(1, 2), Fraction(0)], 1)


def test_singleton_groups_follow_the_pinned_conventions() -> None:
    one = torch.tensor([[3.0], [-1.0]])
    assert fast.group.grpo(one).tolist() == [[0.0], [0.0]]
    assert fast.group.dr_grpo(one).tolist() == [[0.0], [0.0]]
    assert fast.group.opo(one, torch.ones(2, 1)).tolist() == [[0.0], [0.0]]
    assert fast.maxk.tang_passk(one).tolist() == [[3.0], [-1.0]]
    with pytest.raises(ValueError, match="rloo needs groups of G >= 2 samples; got G=1"):
        fast.group.rloo(one)
    with pytest.raises(ValueError, match="ei_l1o needs N >= 2"):
        fast.maxk.ei_l1o(one, 1)


def test_lengths_must_match_rewards_in_shape_device_and_be_positive() -> None:
    rewards = torch.rand(2, 3)
    with pytest.raises(ValueError, match=r"lengths has shape \(2, 4\) but rewards has \(2, 3\)"):
        fast.group.opo(rewards, torch.ones(2, 4))
    with pytest.raises(ValueError, match="lengths must be >= 1; group 1 has 0 at sample 2"):
        fast.group.opo(rewards, torch.tensor([[1, 1, 1], [1, 1, 0]]))
    with pytest.raises(TypeError, match=r"lengths must be a torch\.Tensor"):
        fast.group.opo(rewards, [[1, 1, 1], [1, 1, 1]])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="lengths has a non-finite value in group 0"):
        fast.group.opo(rewards, torch.tensor([[1.0, math.nan, 1.0], [1.0, 1.0, 1.0]]))
    for n in (2, 4):  # the reference: fewer or more lengths than rewards
        with pytest.raises(ValueError, match=f"lengths has {n} entries but rewards has 3"):
            reference_group.opo([0, 1, 1], [1] * n)
    if torch.cuda.is_available():
        with pytest.raises(ValueError, match="lengths is on cuda"):
            fast.group.opo(rewards, torch.ones(2, 3, device="cuda"))


@pytest.mark.parametrize("row", [r for r in CATALOGUE if r.nonnegative], ids=lambda r: r.id)
def test_negative_rewards_are_refused_naming_group_and_sample(row: Row) -> None:
    message = rf"{row.name} needs non-negative rewards .*; group 1 has -0.5 at sample 2"
    with pytest.raises(ValueError, match=message):
        _fast(row, torch.tensor([[0.0, 1.0, 1.0], [1.0, 0.0, -0.5]]), 1)
    with pytest.raises(ValueError, match=rf"{row.name} needs non-negative rewards .* -1/2 at"):
        _ref(row, [Fraction(1), Fraction(0), Fraction(-1, 2)], 1)


def test_ddof_other_than_zero_or_one_is_rejected() -> None:
    with pytest.raises(ValueError, match="grpo needs ddof in"):
        fast.group.grpo(torch.rand(2, 3), ddof=2)
    with pytest.raises(ValueError, match="bagirov_zscore needs ddof in"):
        fast.maxk.bagirov_zscore(torch.rand(2, 3), 1, ddof=-1)


@pytest.mark.parametrize("row", CATALOGUE, ids=lambda r: r.id)
def test_extreme_but_finite_rewards_give_finite_outputs(row: Row) -> None:
    """No silent NaN or inf: huge, subnormal and mixed-sign magnitudes in float32 and float64."""
    for dtype in (torch.float32, torch.float64):
        info = torch.finfo(dtype)
        values = (
            [[0.0, 1.0, 1.0, 0.0]]
            if row.binary_only
            else [
                [info.max / 8, -info.max / 8, 0.0, 1.0],
                [info.tiny / 4, 0.0, info.tiny, 0.0],
                [1e30, 1e30, 1e30, 1e30],
            ]
        )
        if row.nonnegative:
            values = [[abs(v) for v in group] for group in values]
        out = _fast(row, torch.tensor(values, dtype=dtype), _k(row, 4))
        assert isinstance(out, torch.Tensor) and bool(torch.isfinite(out).all()), (dtype, out)
