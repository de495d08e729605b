"""The slow tier of tests/core/estimators/test_compile.py: the tests of that file that run in
`nox -s slow` (its folder gives them the marker)."""

from __future__ import annotations

import torch

from advest import fast


def test_canonical_compiles_and_matches_eager() -> None:
    torch._dynamo.reset()
    compiled = torch.compile(fast.maxk.canonical)
    rewards = torch.randn(16, 8, generator=torch.Generator().manual_seed(0))
    for k in (1, 3, 7):
        torch.testing.assert_close(compiled(rewards, k), fast.maxk.canonical(rewards, k))
