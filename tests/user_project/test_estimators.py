"""A user's test suite: the ``advest_oracle`` fixture comes from advest's pytest11 plugin."""

from typing import Any

import estimators

EXPECT = {"centred": "yes", "couples groups": "no", "finite output": "yes"}


def test_grpo_is_centred(advest_oracle: Any) -> None:
    advest_oracle(estimators.grpo, expect=EXPECT, ns=[2, 8])


def test_broken_grpo_is_centred(advest_oracle: Any) -> None:
    advest_oracle(estimators.broken_grpo, expect=EXPECT, ns=[2, 8])
