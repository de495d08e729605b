"""fast estimators run under torch.compile (CPU, inductor) and agree with eager mode."""

from __future__ import annotations

import torch

import advest.fast.group
import advest.fast.maxk  # noqa: F401  (binds the submodule used as fast.maxk)
from advest import fast


def test_grpo_compiles_and_matches_eager() -> None:
    torch._dynamo.reset()
    compiled = torch.compile(fast.group.grpo)
    rewards = torch.randn(16, 8, generator=torch.Generator().manual_seed(1))
    rewards[0] = 1.0  # a constant group: exact zeros in both
    torch.testing.assert_close(compiled(rewards), fast.group.grpo(rewards), rtol=0, atol=0)
