"""Dynamic sampling (``--filter_groups``, DAPO arXiv 2503.14476 §3.2): a step keeps drawing
prompts until it has ``prompts_per_step`` groups with signal, at most ``--filter_max_draws``
draws, then trains on them.

Which group has signal is the estimator's own rule (``advest.fast.signal``), not "the rewards
are all equal": continuous rewards, near-ties and max@K's subsets are judged as the estimator
judges them, and a group left too small by absent rewards has none. When the cap is reached the
step is filled with groups without signal, in the order drawn, so every step has the same shape.

Notation: ``B`` prompts per step, ``G`` samples per prompt, ``S = B·G`` sequences, ``P`` the
left-padded prompt width, ``T`` the response budget.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Protocol

import torch
from torch import Tensor

from advest.fast import absent, calling, signal
from advest.fast.shaping import Shaping, shaping

from .data import Item, PromptSource
from .sampling import Scored
from .settings import ConfigError, RLConfig

REFILL = 1 << 40
"""Where the prompts drawn beyond a step's own come from in the prompt stream: far past any
step's, so a refill never takes a prompt a later step will draw, and the same for every run of
the same seed (a resumed run draws what the uninterrupted one drew)."""


class Sampler(Protocol):
    """What dynamic sampling reads of the LightningModule."""

    cfg: RLConfig
    plan: calling.Plan
    shaping: Shaping | None
    source: PromptSource
    tokenizer: Any

    def sample(self, items: list[Item]) -> Scored: ...


def shaping_of(cfg: RLConfig) -> Shaping | None:
    """The run's --shaping with its options (None: none); refused naming the flag."""
    if cfg.shaping is None:
        return None
    try:
        return shaping(cfg.shaping, **cfg.shaping_options)
    except (KeyError, ValueError) as error:
        raise ConfigError(f"--shaping: {str(error).strip(chr(34))}") from None


def check(cfg: RLConfig) -> None:
    """What the trainer does around the estimator: --shaping names a shaping and its options;
    --filter_groups judges groups before the forward pass, on rewards (and lengths) alone, and
    on one turn."""
    shaping_of(cfg)
    if not cfg.filter_groups:
        return
    if cfg.filter_max_draws < 1:
        raise ConfigError(f"--filter_max_draws must be at least 1; got {cfg.filter_max_draws}")
    if cfg.turns > 1:
        raise ConfigError("--filter_groups draws one-turn groups; leave it out with --turns > 1")
    plan = calling.plan(cfg.estimator, cfg.base_estimator, cfg.estimator_options, k=cfg.k)
    other = sorted(plan.fields - {"rewards", "k", "lengths"})
    if other:
        raise ConfigError(
            f"--filter_groups judges a group by its rewards before the forward pass; "
            f"{cfg.estimator} also reads {', '.join(other)}; choose an estimator of rewards"
        )


def has_signal(
    plan: calling.Plan, rewards: Tensor, mask: Tensor, shaped: Shaping | None = None
) -> Tensor:
    """``[B]`` bool: whether each group of ``rewards [B, G]`` (NaN: absent), shaped by
    ``shaped``, gets advantages that are not all zero from ``plan``; ``mask [B, G, T]`` gives
    the lengths it (or the shaping) may read."""
    B, G = rewards.shape
    valid, _ = absent.admit(plan, torch.isfinite(rewards).cpu())
    if not bool(valid.any()):
        return torch.zeros(B, dtype=torch.bool)
    fields: dict[str, Any] = {}
    if plan.needs("lengths") or shaped is not None:
        fields["lengths"] = mask.sum(-1).reshape(-1).cpu()
    index = torch.arange(B).repeat_interleave(G)  # [S]
    flat = rewards.reshape(-1).cpu()
    keep = valid.reshape(-1)
    rows = signal(plan, flat, index, valid=keep, nonfinite="mask", shaping=shaped, **fields)
    return rows.view(B, G)[:, 0]


def draw(m: Sampler, step: int, rank: int, world: int, items: list[Item]) -> tuple[
    list[Item], Scored, dict[str, float]
]:  # fmt: skip
    """The step's ``items`` sampled and scored, then more prompts until ``B = len(items)``
    groups have signal or ``--filter_max_draws`` draws are spent: the B groups kept (with
    signal first, in the order drawn) and the step's counts (``drawn_prompts``, ``draws``,
    ``filled_without_signal``)."""
    B, cap = len(items), m.cfg.filter_max_draws
    kept: list[tuple[Item, Scored, int]] = []  # (prompt, its draw, its group in the draw)
    spare: list[tuple[Item, Scored, int]] = []
    draws, seconds = 0, [0.0, 0.0]  # every draw's generation and reward time
    while True:
        scored = m.sample(items)
        seconds = [seconds[0] + scored.generate_s, seconds[1] + scored.reward_s]
        G = scored.rewards.shape[1]
        mask = scored.mask.reshape(len(items), G, -1)
        good = has_signal(m.plan, scored.rewards, mask, m.shaping)
        for b, item in enumerate(items):
            (kept if bool(good[b]) else spare).append((item, scored, b))
        draws += 1
        if len(kept) >= B or draws >= cap:
            break
        start = REFILL + ((step * world + rank) * cap + draws) * B
        items = [m.source.item(start + i) for i in range(B)]
    chosen = (kept + spare)[:B]
    counts = {
        "drawn_prompts": float(draws * B),
        "draws": float(draws),
        "filled_without_signal": float(max(B - len(kept), 0)),
    }
    merged = replace(
        merge(chosen, m.tokenizer.pad_token_id), generate_s=seconds[0], reward_s=seconds[1]
    )
    return [c[0] for c in chosen], merged, counts


def merge(groups: list[tuple[Item, Scored, int]], pad_id: int) -> Scored:
    """One ``Scored`` of the chosen groups (each: its item, its draw and its group there), the
    prompts left-padded to the widest draw's ``P`` (positions come from the attention mask, so
    extra left padding changes nothing); the times are the caller's to fill."""
    P = max(s.prompt_mask.shape[1] for _, s, _ in groups)
    seqs, prompt_masks, masks, texts, rewards, parts, truncated = [], [], [], [], [], [], []
    for _, s, b in groups:
        G = s.rewards.shape[1]
        rows = slice(b * G, (b + 1) * G)  # the group's S rows
        extra = P - s.prompt_mask.shape[1]
        seqs.append(torch.nn.functional.pad(s.sequences[rows], (extra, 0), value=pad_id))
        prompt_masks.append(torch.nn.functional.pad(s.prompt_mask[rows], (extra, 0), value=0))
        masks.append(s.mask[rows])
        texts.extend(s.texts[rows])
        rewards.append(s.rewards[b])
        parts.append(s.parts[b])
        truncated.append(s.truncated[rows])
    return Scored(
        torch.cat(seqs),
        torch.cat(prompt_masks),
        torch.cat(masks),
        texts,
        torch.stack(rewards),
        torch.stack(parts),
        torch.cat(truncated),
        generate_s=0.0,
        reward_s=0.0,
    )
