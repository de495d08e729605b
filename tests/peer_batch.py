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


def multi_turn() -> tuple[torch.Tensor, torch.Tensor, list[str]]:
    """``(token_level_rewards [5, 6], response_mask [5, 6], uids)`` of a multi-turn agent loop:
    the mask is 0 on tool output, a step reward sits on a turn's last token, one reward on a
    tool-output token, uids ragged ("a" twice, "b" three times) and interleaved."""
    mask = torch.tensor([[1, 1, 0, 0, 1, 1], [1, 1, 1, 0, 0, 0], [1, 0, 0, 0, 0, 0],
                         [1, 0, 1, 0, 1, 0], [1, 1, 1, 1, 0, 0]])  # fmt: skip
    tlr = torch.zeros(mask.shape)
    for row, t, r in ((0, 1, 0.5), (0, 5, 1.0), (1, 2, 1.0), (3, 2, 0.25), (3, 4, 1.0)):
        tlr[row, t] = r
    return tlr, mask, ["b", "a", "b", "a", "b"]


def turn_rloo_by_uid(tlr: torch.Tensor, mask: torch.Tensor, uids: list[str]) -> torch.Tensor:
    """``[bs, T]``: advest's turn_rloo on each uid's rows (their turns from the mask), in the
    rows' order: what a peer's call must give."""
    from advest.fast import episode

    turn_rewards, turn_ids = episode.turns_from_tokens(tlr, mask)
    out = torch.zeros(mask.shape)
    for uid in sorted(set(uids)):
        rows = [i for i, u in enumerate(uids) if u == uid]
        out[rows] = episode.turn_rloo(turn_rewards[rows][None], turn_ids[rows][None])[0].float()
    return out
