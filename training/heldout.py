"""Held-out pass@k inside a run: before training, every ``--eval_every`` rollout steps, and
after, as a Lightning callback, so that it runs where the weights are (after the strategy has
set up, before it tears down).

Every rank samples its share of the prompts (``items[rank::world]``, padded to the same number
of prompts, so that every rank calls the generation engine equally often: under FSDP each call
gathers the shards, a collective) and rank 0 gathers the counts. One process evaluates all the
prompts itself.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import lightning as L

from .config import eval_sizes
from .evaluate import curve_of, pass_counts
from .logs import say
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
        self.curves["before"] = curve_of(self.before, eval_sizes(self.cfg)[1])
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
        clock = Clock(label, trainer.is_global_zero)
        turns = self.cfg.turns if label in ("before", "after") else 1
        got, last = shared_counts(trainer, module, self.items, self.cfg, clock, turns=turns)
        self.curves[label] = curve_of(got, eval_sizes(self.cfg)[1])
        if label in ("before", "after"):
            self.counts[label] = got
        named = f"{label}, {turns} turns"
        if turns > 1:  # the same episodes after their last turn
            self.curves[named], self.counts[named] = curve_of(last, eval_sizes(self.cfg)[1]), last
        if trainer.is_global_zero:
            after = label == "after"  # aligned under "before"
            said = f"{label}: " + (" " if after else "") + brief(self.curves[label])
            tail = f"  (estimator {self.cfg.estimator})" if after else ""
            say(f"held-out {said}{tail}")
            if turns > 1:
                say(f"held-out {named}: {brief(self.curves[named])}")


class Clock:
    """The held-out evaluation's own progress: a line "held-out before: 8/16 prompts sampled,
    1 min 40 s so far, about 1 min 40 s left" at most every ``EVERY`` seconds (none for an
    evaluation shorter than that, the embedded model's). Lines, not a second bar: the run's log
    keeps one bar, and a line reads the same in a terminal and in a log file."""

    EVERY = 15.0

    def __init__(self, label: str, speaks: bool) -> None:
        self.label, self.speaks = label, speaks
        self.start = self.last = time.monotonic()

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if not self.speaks or done >= total or now - self.last < self.EVERY:
            return
        self.last = now
        spent = now - self.start
        left = spent / done * (total - done)
        say(f"held-out {self.label}: {done}/{total} prompts sampled, {duration(spent)} so far, "
            f"about {duration(left)} left")  # fmt: skip


def duration(seconds: float) -> str:
    """4 s, 1 min 40 s, 1 h 5 min."""
    s = round(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    return f"{s // 3600} h {s % 3600 // 60} min"


def shared_counts(
    trainer: L.Trainer,
    module: Any,
    items: list[Any],
    cfg: RLConfig,
    progress: Callable[[int, int], None] | None = None,
    turns: int = 1,
) -> tuple[list[int], list[int]]:
    """Passes per prompt of ``items`` (in their order), each rank sampling ``items[rank::world]``
    padded by repeating its last prompt (the padding's counts are dropped): after the first
    turn, and after the last of episodes of up to ``turns`` turns (the same list for one)."""
    world, rank = trainer.world_size, trainer.global_rank
    share = -(-len(items) // world)
    mine = items[rank::world]
    padded = mine + [mine[-1] if mine else items[0]] * (share - len(mine))
    opening: list[int] = []
    got = pass_counts(
        module.policy,
        module.tokenizer,
        padded,
        samples=eval_sizes(cfg)[1],
        max_new_tokens=cfg.max_new_tokens,
        temperature=cfg.temperature,
        top_p=cfg.top_p,
        scorer=module.scorer,
        chat_template=cfg.chat_template,
        system_prompt=cfg.system_prompt,
        seed=cfg.seed + 1234 + rank,
        engine=module.engine,  # --generator, on gathered FSDP shards, LoRA merged
        progress=None
        if progress is None
        else lambda d, t: progress(min(d * world, len(items)), len(items)),
        turns=turns,
        embedded=cfg.embedded_task,
        first=opening,
    )[: len(mine)]
    opening = opening[: len(mine)]
    if world == 1:
        return opening, got
    return _gathered(opening, len(items), world), _gathered(got, len(items), world)


def _gathered(got: list[int], total: int, world: int) -> list[int]:
    """Every rank's ``items[rank::world]`` counts, in the items' order."""
    import torch.distributed as dist

    parts: list[list[int] | None] = [None] * world
    dist.all_gather_object(parts, got)
    out = [0] * total
    for r, part in enumerate(parts):
        assert part is not None  # every rank sent its share
        out[r::world] = part
    return out


def brief(curve: dict[int, float]) -> str:
    ks = [k for k in (1, 2, 4, 8, 16, 32, 64) if k in curve]
    return "  ".join(f"pass@{k}={curve[k]:.3f}" for k in ks)
