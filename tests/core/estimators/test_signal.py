"""``fast.signal``: a group has no signal exactly when the estimator's exact reference gives it all
zeros (binary and three-valued groups, every non-coupled sequence estimator), continuous near-ties
included; rows behind the mask, and absent rows, are never read."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import pytest
import torch

from advest.fast import calling, registry, signal
from advest.oracle.reports.catalogue import reference_of

K = 2
G = 4
PLAIN = [
    e
    for e in registry.entries()
    if e.kind == "sequence" and not e.claims.batch_coupled and set(e.inputs) <= {"rewards", "k"}
]


def _exact_nonzero(entry: registry.Entry, group: tuple[float, ...]) -> bool:
    exact = reference_of(entry)
    values = [Fraction(x) for x in group]
    out = exact(values, K) if entry.needs_k else exact(values)
    return any(a != 0 for a in out)


@pytest.mark.parametrize("entry", PLAIN, ids=lambda e: e.name)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_a_group_has_signal_exactly_when_the_exact_reference_is_not_all_zero(
    entry: registry.Entry, dtype: torch.dtype
) -> None:
    values = [0.0, 1.0] if entry.claims.binary_only else [0.0, 0.5, 1.0]
    batch = list(itertools.product(values, repeat=G))  # every binary or three-valued group
    rewards = torch.tensor(batch, dtype=dtype).reshape(-1)  # [N]
    index = torch.arange(len(batch)).repeat_interleave(G)
    got = signal(entry.name, rewards, index, k=K).view(len(batch), G)
    assert bool((got == got[:, :1]).all())  # one answer per group
    want = [_exact_nonzero(entry, group) for group in batch]
    assert got[:, 0].tolist() == want


def test_a_continuous_near_tie_is_signal_and_an_exact_tie_is_not() -> None:
    base = 1e3
    near = [base, base + 2**-12, base, base]  # representable in float32: a real spread
    rewards = torch.tensor(near + [base] * 4, dtype=torch.float32)
    got = signal("grpo", rewards, [0] * 4 + [1] * 4)
    assert got.tolist() == [True] * 4 + [False] * 4


def test_masked_and_absent_rows_are_not_read_and_have_no_signal() -> None:
    rewards = torch.tensor([1.0, 1.0, math.nan, 0.0, 1.0, 7.0])
    valid = torch.tensor([True, True, True, True, True, False])
    got = signal(calling.plan("grpo"), rewards, [0, 0, 0, 1, 1, 1], valid=valid, nonfinite="mask")
    assert got.tolist() == [False, False, False, True, True, False]
