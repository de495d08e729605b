"""A user's two GRPO estimators: a correct one and one that subtracts the batch mean instead of
each group's (so its advantages do not sum to zero within a group)."""

import torch


def grpo(rewards: torch.Tensor) -> torch.Tensor:
    mean = rewards.mean(-1, keepdim=True)
    # one sample: std with Bessel's correction is 0/0; its advantage is 0 (the oracle's search
    # tries G = 1 and fails an estimator that returns NaN there)
    correction = 1 if rewards.shape[-1] > 1 else 0
    return (rewards - mean) / (rewards.std(-1, keepdim=True, correction=correction) + 1e-6)


def broken_grpo(rewards: torch.Tensor) -> torch.Tensor:
    return (rewards - rewards.mean()) / (rewards.std(-1, keepdim=True) + 1e-6)


def flat_grpo(
    rewards: torch.Tensor, index: object, valid: torch.Tensor | None = None
) -> torch.Tensor:
    """GRPO on flat rows: one group id per row (any ids), rows with valid False get 0 and are
    left out of their group's statistics."""
    keys = list(getattr(index, "tolist", lambda: index)())  # a list, or a numpy array's items
    out = torch.zeros_like(rewards)
    for key in dict.fromkeys(keys):
        rows = [i for i, k in enumerate(keys) if k == key and (valid is None or bool(valid[i]))]
        if len(rows) > 1:
            r = rewards[rows].double()
            out[rows] = ((r - r.mean()) / (r.std() + 1e-6)).to(rewards.dtype)
    return out


def token_rloo(rewards: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Token level: each response's RLOO advantage on its valid tokens, [B, G, T]."""
    g = rewards.shape[1]
    adv = rewards - (rewards.sum(1, keepdim=True) - rewards) / (g - 1)
    return adv.unsqueeze(-1) * mask
