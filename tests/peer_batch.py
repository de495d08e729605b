"""One outcome-reward batch as verl and SkyRL hand it to an estimator, for the tests that run in
their environments (tests/verl/, tests/skyrl/): B prompts × G responses in shuffled order."""

from __future__ import annotations

import torch


def shuffled(
    B: int, G: int, T: int, seed: int, binary: bool = False
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(token_level_rewards [bs, T], response_mask [bs, T], rewards [B, G], perm [bs])``:
    row j of the batch is sample ``perm[j]`` of the flattened ``rewards`` (prompt
    ``perm[j] // G``), its reward at its last valid token; rewards are 0/1 (``binary``) or five
    levels in [0, 1]; response lengths are 1..T."""
    gen = torch.Generator().manual_seed(seed)
    levels = 2 if binary else 5
    rewards = torch.randint(0, levels, (B, G), generator=gen).float() / (levels - 1)  # [B, G]
    perm = torch.randperm(B * G, generator=gen)
    lengths = torch.randint(1, T + 1, (B * G,), generator=gen)
    mask = (torch.arange(T) < lengths[:, None]).to(torch.int64)  # [bs, T]
    tlr = torch.zeros(B * G, T)
    tlr[torch.arange(B * G), lengths - 1] = rewards.reshape(-1)[perm]
    return tlr, mask, rewards, perm
