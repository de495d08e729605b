"""The slow tier of tests/core/estimators/test_compile.py: the tests of that file that run in
`nox -s slow` (its folder gives them the marker)."""

from __future__ import annotations

import torch

import advest.fast.gdpo  # noqa: F401  (binds fast.gdpo, and fast.group, which it imports)
from advest import fast


def test_canonical_compiles_and_matches_eager() -> None:
    torch._dynamo.reset()
    compiled = torch.compile(fast.maxk.canonical)
    rewards = torch.randn(16, 8, generator=torch.Generator().manual_seed(0))
    for k in (1, 3, 7):
        torch.testing.assert_close(compiled(rewards, k), fast.maxk.canonical(rewards, k))


def test_the_estimators_that_take_a_process_group_compile_without_one() -> None:
    """With no group (one process) the batch statistics are plain reductions: nothing from
    torch.distributed is traced, and the compiled call equals the eager one (issue 55)."""
    rewards = torch.randint(0, 5, (12, 6), generator=torch.Generator().manual_seed(2)) / 4.0
    # grpo_batch_std's extremes and mean, james_stein's gathered statistics; gdpo below shares
    # reinforce_pp's whitening (a compile is about 20 s on 2 cores: one per code path)
    for fn in (fast.group.grpo_batch_std, fast.group.james_stein):
        torch._dynamo.reset()
        torch.testing.assert_close(torch.compile(fn)(rewards), fn(rewards), rtol=0, atol=1e-12)
    parts = torch.stack([rewards, rewards.flip(0)], -1)  # [B, G, 2]
    torch._dynamo.reset()
    compiled = torch.compile(fast.gdpo.gdpo)
    torch.testing.assert_close(compiled(parts, [1.0, 0.5]), fast.gdpo.gdpo(parts, [1.0, 0.5]))
