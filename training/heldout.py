"""Held-out pass@k inside a run: before training, every ``--eval_every`` rollout steps, and
after, as a Lightning callback, so that it runs where the weights are (after the strategy has
set up, before it tears down).

Every rank samples its share of the prompts (``items[rank::world]``, padded to the same number
of prompts, so that every rank calls the generation engine equally often: under FSDP each call
gathers the shards, a collective) and rank 0 gathers the counts. One process evaluates all the
prompts itself.
"""

from __future__ import annotations

import sys
from typing import Any

import lightning as L

from .evaluate import curve_of, pass_counts
from .settings import RLConfig


class HeldOut(L.Callback):
    """Fills ``curves`` (``"before"``, ``"step N"``, ``"after"``: pass@k for k = 1..samples)
    and ``counts`` (``"before"`` and ``"after"``: passes per prompt). ``before``: the starting
    weights' counts measured by an earlier run with the same settings and seed (an experiment's
    other arms), used instead of measuring them again."""

    def __init__(
        self,
        items: list[Any],
        cfg: RLConfig,
        curves: dict[str, dict[int, float]],
        counts: dict[str, list[int]],
        before: list[int] | None = None,
    ) -> None:
        self.items, self.cfg, self.curves, self.counts = items, cfg, curves, counts
        self.before = before

    def on_train_start(self, trainer: L.Trainer, module: L.LightningModule) -> None:
        if self.before is None:
            self.measure(trainer, module, "before")
            return
        self.counts["before"] = list(self.before)
        self.curves["before"] = curve_of(self.before, self.cfg.eval_samples)
        if trainer.is_global_zero:
            said = brief(self.curves["before"])
            say(f"held-out before: {said} (measured by an earlier run)")

    def on_train_batch_end(self, trainer: L.Trainer, module: L.LightningModule, *args: Any) -> None:
        step = int(getattr(module, "rollout_step", 0))
        if self.cfg.eval_every and step % self.cfg.eval_every == 0 and step != self.cfg.steps:
            self.measure(trainer, module, f"step {step}")  # the last step is the "after" curve

    def on_train_end(self, trainer: L.Trainer, module: L.LightningModule) -> None:
        self.measure(trainer, module, "after")

    def measure(self, trainer: L.Trainer, module: Any, label: str) -> None:
        got = shared_counts(trainer, module, self.items, self.cfg)
        self.curves[label] = curve_of(got, self.cfg.eval_samples)
        if label in ("before", "after"):
            self.counts[label] = got
        if trainer.is_global_zero:
            after = label == "after"  # aligned under "before"
            said = f"{label}: " + (" " if after else "") + brief(self.curves[label])
            tail = f"  (estimator {self.cfg.estimator})" if after else ""
            say(f"held-out {said}{tail}")


def shared_counts(trainer: L.Trainer, module: Any, items: list[Any], cfg: RLConfig) -> list[int]:
    """Passes per prompt of ``items`` (in their order), each rank sampling ``items[rank::world]``
    padded by repeating its last prompt (the padding's counts are dropped)."""
    world, rank = trainer.world_size, trainer.global_rank
    share = -(-len(items) // world)
    mine = items[rank::world]
    padded = mine + [mine[-1] if mine else items[0]] * (share - len(mine))
    got = pass_counts(
        module.policy,
        module.tokenizer,
        padded,
        samples=cfg.eval_samples,
        max_new_tokens=cfg.max_new_tokens,
        temperature=cfg.temperature,
        top_p=cfg.top_p,
        scorer=module.scorer,
        chat_template=cfg.chat_template,
        system_prompt=cfg.system_prompt,
        seed=cfg.seed + 1234 + rank,
        engine=module.engine,  # --generator, on gathered FSDP shards, LoRA merged
    )[: len(mine)]
    if world == 1:
        return got
    import torch.distributed as dist

    parts: list[list[int] | None] = [None] * world
    dist.all_gather_object(parts, got)
    out = [0] * len(items)
    for r, part in enumerate(parts):
        assert part is not None  # every rank sent its share
        out[r::world] = part
    return out


def say(line: str) -> None:
    """A line above the run's progress bar, which is still open in ``on_train_end`` (a plain
    print would land on the bar's own line)."""
    from tqdm import tqdm

    tqdm.write(line)
    sys.stdout.flush()


def brief(curve: dict[int, float]) -> str:
    ks = [k for k in (1, 2, 4, 8, 16, 32, 64) if k in curve]
    return "  ".join(f"pass@{k}={curve[k]:.3f}" for k in ks)
