"""A user's two GRPO estimators: a correct one and one that subtracts the batch mean instead of
each group's (so its advantages do not sum to zero within a group)."""

import torch


def grpo(rewards: torch.Tensor) -> torch.Tensor:
    mean = rewards.mean(-1, keepdim=True)
    return (rewards - mean) / (rewards.std(-1, keepdim=True) + 1e-6)


def broken_grpo(rewards: torch.Tensor) -> torch.Tensor:
    return (rewards - rewards.mean()) / (rewards.std(-1, keepdim=True) + 1e-6)
