"""A rollout batch and the one generic call of any registered estimator.

The trainer holds no per-estimator code: each registry entry names the rollout fields it
consumes (``fast.registry.INPUTS``); ``advantages`` builds those fields, calls the estimator and
brings its output to ``[B, G, T]``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from advest.fast import registry

if TYPE_CHECKING:
    from advest.training.config import RLConfig


@dataclass
class Rollout:
    """B prompts × G samples × T response tokens of one rollout step on one process."""

    prompt_ids: Tensor  # [B] int64
    token_ids: Tensor  # [B, G, T] int64, pad after EOS
    mask: Tensor  # [B, G, T] bool, response tokens up to and including EOS
    rewards: Tensor  # [B, G] float32
    logprobs: Tensor  # [B, G, T] float32, rollout policy (at the sampling temperature)
    texts: list[list[str]]  # [B][G]
    offsets: Tensor  # [B, G, T, 2] int64
    hidden: Tensor | None = None  # [B, G, T, D], only when an estimator asks for it
    k: int = 1

    @property
    def lengths(self) -> Tensor:
        return self.mask.sum(-1)


def needs(cfg: RLConfig, field: str) -> bool:
    """Whether the configured estimator (or its base) consumes ``field``."""
    names = {cfg.estimator} | (
        {cfg.base_estimator} if "advantages" in registry.entry(cfg.estimator).inputs else set()
    )
    return any(field in registry.entry(n).inputs for n in names)


def make_estimator(cfg: RLConfig) -> Any:
    """The callable for the configured estimator: stateful ones are constructed once per run."""
    entry = registry.entry(cfg.estimator)
    if entry.stateful:
        return entry.fn(**cfg.estimator_options)
    return entry.fn


def call(name: str, fn: Any, rollout: Rollout, options: dict[str, Any], base: Tensor | None) -> Any:
    """``fn`` (registered as ``name``, or an instance of it when stateful) on the rollout fields
    it declares; ``base`` fills ``advantages`` for reweighters."""
    entry = registry.entry(name)
    fields = {"lengths": rollout.lengths, "advantages": base}
    args = {i: fields[i] if i in fields else getattr(rollout, i) for i in entry.inputs}
    return fn(**args) if entry.stateful else fn(**args, **options)


def advantages(cfg: RLConfig, estimator: Any, rollout: Rollout) -> Tensor:
    """``[B, G, T]`` float32 advantages of the rollout, zero at padding."""
    base = None
    if "advantages" in registry.entry(cfg.estimator).inputs:
        base = _value(call(cfg.base_estimator, registry.get(cfg.base_estimator), rollout, {}, None))
    out = call(cfg.estimator, estimator, rollout, cfg.estimator_options, base)
    return _to_tokens(out, rollout)


def _value(out: Any) -> Tensor:
    """An estimator's advantages: the output itself, or its ``advantages`` (reweighters)."""
    value: Tensor = out.advantages if hasattr(out, "advantages") else out
    return value


def _to_tokens(out: Any, rollout: Rollout) -> Tensor:
    value = _value(out)
    B, G, T = rollout.mask.shape
    if value.shape == (B, G):
        value = value.unsqueeze(-1).expand(B, G, T)
    if value.shape != (B, G, T):
        raise ValueError(
            f"estimator output has shape {tuple(value.shape)}; want [B, G] or [B, G, T]"
        )
    return (value * rollout.mask).to(torch.float32)


def synthetic(B: int, G: int, T: int, D: int = 8, k: int = 1, seed: int = 0) -> Rollout:
    """A rollout with every field filled, for dry runs and benchmarks: character-level responses
    of digits and operators (so Numca finds numbers and KTAE sees a realistic vocabulary), one
    character per token, and 0/1 rewards that vary inside every group."""
    gen = torch.Generator().manual_seed(seed)
    alphabet = "0123456789+= "
    chars = torch.randint(len(alphabet), (B, G, T), generator=gen)
    texts = [["".join(alphabet[int(c)] for c in chars[b, g]) for g in range(G)] for b in range(B)]
    starts = torch.arange(T)
    return Rollout(
        prompt_ids=torch.arange(B),
        token_ids=chars + 3,
        mask=torch.ones(B, G, T, dtype=torch.bool),
        rewards=(torch.arange(G).repeat(B, 1) % 2).float(),
        logprobs=-torch.rand(B, G, T, generator=gen) * 3,
        texts=texts,
        offsets=torch.stack([starts, starts + 1], -1).expand(B, G, T, 2).contiguous(),
        hidden=torch.randn(B, G, T, D, generator=gen),
        k=k,
    )


def dry_run(cfg: RLConfig) -> None:
    """Call the configured estimator once on a synthetic rollout (a fresh instance when it is
    stateful, so no state leaks into the run)."""
    rollout = synthetic(cfg.prompts_per_step, cfg.group_size, T=4, k=cfg.k)
    advantages(cfg, make_estimator(cfg), rollout)
