"""A user's test suite: the ``advest_oracle`` fixture comes from advest's pytest11 plugin."""

from typing import Any

import estimators

EXPECT = {"centred": "yes", "couples groups": "no", "finite output": "yes"}


def test_grpo_is_centred(advest_oracle: Any) -> None:
    advest_oracle(estimators.grpo, expect=EXPECT, ns=[2, 8])


def test_broken_grpo_is_centred(advest_oracle: Any) -> None:
    advest_oracle(estimators.broken_grpo, expect=EXPECT, ns=[2, 8])


def test_flat_grpo_on_trainers_rows(advest_oracle: Any) -> None:
    expect = {"ids relabelled": "yes", "ragged groups": "yes", "masked rows": "yes"}
    advest_oracle(estimators.flat_grpo, convention="flat", expect=expect, ns=[2, 4])


def test_token_rloo_is_unbiased(advest_oracle: Any) -> None:
    advest_oracle(estimators.token_rloo, family="token", expect={"unbiased": "yes"})
