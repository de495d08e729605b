"""The slow tier of tests/core/oracle/test_grouped.py: its tests that take tens of seconds each
(the core session stays within its few minutes)."""

from __future__ import annotations

import pytest
from torch import Tensor

from advest.testing import EstimatorMismatch, assert_estimator
from tests.core.oracle.test_grouped import bugs


def test_assert_estimator_takes_the_flat_convention_and_the_token_family() -> None:
    assert_estimator(bugs.nemo_3837_fixed, convention="flat", expect={"masked rows": "yes"}, ns=[2])
    with pytest.raises(EstimatorMismatch, match="masked rows"):
        assert_estimator(
            bugs.nemo_3837_buggy, convention="flat", expect={"masked rows": "yes"}, ns=[2]
        )
    from advest.fast.hista import hista

    def token(rewards: Tensor, mask: Tensor) -> Tensor:  # a prefix-free baseline: RLOO per token
        g = rewards.shape[1]
        adv = rewards - (rewards.sum(1, keepdim=True) - rewards) / (g - 1)
        return adv.unsqueeze(-1).expand(mask.shape) * mask

    assert hista is not None
    assert_estimator(token, family="token", expect={"unbiased": "yes"})
