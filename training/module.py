"""The RL LightningModule: rollout → rewards → advantages (any registered estimator, by name) →
several epochs of the clipped policy-gradient loss against the rollout log-probs.

Manual optimisation, because one training step holds several optimiser steps. Everything random
in a step is seeded from (seed, step, rank), so a resumed run draws what the uninterrupted one
drew.
"""

from __future__ import annotations

import math
import time
from typing import Any

import lightning as L
import torch
from torch import Tensor
from torch.utils.data import DataLoader

from advest.fast import absent
from advest.fast.detokenize import texts_and_offsets

from . import dynamic, generation, logs, metrics, scale, state, updates
from .config import RLConfig, estimator_plan, eval_sizes, scorer
from .data import FromStep, Item, PromptSource, Steps
from .episodes import feedback_text, sample_episodes
from .policy import load_policy, load_tokenizer, rollout_forward
from .prompts import drop_long, encode
from .rollout import Rollout
from .sampling import Scored, sample_and_score
from .updates import NonFiniteLoss, NonFiniteWeights, RunStopped

__all__ = ["NonFiniteLoss", "NonFiniteWeights", "RLModule", "RunStopped"]


class RLModule(L.LightningModule):
    def __init__(self, cfg: RLConfig, model_path: str) -> None:
        super().__init__()
        self.cfg, self.model_path = cfg, model_path
        self.automatic_optimization = False
        self.source = PromptSource(
            cfg.data,
            cfg.seed,
            pool=cfg.train_pool,
            held_out=cfg.eval_fraction,
            task_options=cfg.data_options,
            task_size=cfg.data_size,
            task_held=eval_sizes(cfg)[0] if cfg.eval_data is None else 0,
            task_seed=cfg.data_seed,
        )
        self.scorer = scorer(cfg)
        self.scorer.start()  # the reward workers import the verifiers while the model loads
        self.plan = estimator_plan(cfg)  # resolved once: every step calls this plan
        self.shaping = dynamic.shaping_of(cfg)  # the rewards' transform before the estimator
        self.sampling = generation.Sampling(
            cfg.group_size, cfg.max_new_tokens, cfg.temperature, cfg.top_p
        )
        # pass@K at the run's K where it is defined for G samples (K is ignored by estimators
        # without one, so any K may be configured with them), else pass@G
        self.k_big = cfg.k if 1 < cfg.k <= cfg.group_size else cfg.group_size
        self.shown = ("reward", "pass@1", f"pass@{self.k_big}")
        """The step's values on the progress bar (``logs.step_bar``)."""
        self.rollout_step = 0  # the data position: rollout steps completed
        self.bad_steps = 0  # consecutive steps skipped for a non-finite loss
        self.skipped_total = 0
        dtype = scale.torch_dtype(cfg.dtype)
        self.warned_truncation = False
        self.tokenizer = load_tokenizer(model_path)
        self.drop_long_prompts()  # before the weights load: a budget no prompt fits is refused
        self.policy, self.tokenizer = load_policy(model_path, dtype)
        self.policy.config.use_cache = True
        self.policy = scale.prepare(self.policy, cfg)  # gradient checkpointing, LoRA
        self.generator = generation.get(cfg.generator)
        self.ref: Any = None
        if cfg.kl_coef != 0.0:
            ref = scale.reference(cfg, self.policy, lambda: load_policy(model_path, dtype)[0])
            # not a registered submodule: kept out of checkpoints, DDP and the optimiser
            object.__setattr__(self, "ref", ref)

    @property
    def one_pass(self) -> bool:
        """One optimiser step per rollout, with an estimator that reads no log-probs or hidden
        states: the rollout's log-probs are the update's own forward pass (detached), as in
        TRL with ``num_iterations = 1``, and the separate rollout pass is skipped (a sixth of a
        LoRA step for SmolLM2 on CPU). The ratio is then exactly 1, and the loss and gradient
        are the ones the separate pass gives."""
        cfg = self.cfg
        reads = ("logprobs", "hidden", "sum_pi_squared")
        return cfg.ppo_epochs * cfg.minibatches == 1 and not any(map(self.plan.needs, reads))

    def drop_long_prompts(self) -> None:
        """``prompts.drop_long`` on the run's --data rows (before the weights load)."""
        if self.source.rows is not None:
            self.source.rows = drop_long(
                self.source.rows, self.tokenizer, self.cfg, self.model_path
            )

    def setup(self, stage: str) -> None:
        # Under DDP each rank samples prompts_per_step of the step's world · prompts_per_step
        # prompts (``data.PromptSource.batch``). An estimator whose statistics span the batch or
        # that keeps a history gets the process group, so that its advantages are those of one
        # process holding the global batch; a group-local one gets none and pays for none.
        if self.trainer.world_size > 1 and torch.distributed.is_initialized():
            self.plan = self.plan.over(torch.distributed.group.WORLD)

    def on_fit_start(self) -> None:
        if self.ref is not None:
            self.ref.to(self.device)

    # ----------------------------------------------------------------- data and optimiser
    def train_dataloader(self) -> DataLoader[int]:
        sampler = FromStep(self.cfg.steps, lambda: self.rollout_step)
        return DataLoader(Steps(self.cfg.steps), sampler=sampler, batch_size=None)

    def configure_optimizers(self) -> Any:
        params = list(scale.trainable(self.policy))
        # On CPU torch defaults to its per-tensor Python loop (foreach and fused are chosen only
        # for CUDA): 12 s of a 39 s step for SmolLM2-135M on 2 cores. The fused kernel computes
        # the same AdamW update in one pass over each tensor.
        fused = bool(params) and all(p.device.type == "cpu" for p in params)
        opt = torch.optim.AdamW(
            params, lr=self.cfg.lr, weight_decay=self.cfg.weight_decay, fused=fused or None
        )
        warm = max(self.cfg.warmup_steps, 0)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / (warm + 1)))
        return [opt], [sched]

    # ----------------------------------------------------------------- one rollout step
    def training_step(self, step: Any, batch_idx: int) -> None:
        step = int(step)
        cfg = self.cfg
        seed = hash((cfg.seed, step, self.global_rank)) % 2**62
        items = self.source.batch(
            step, self.global_rank, self.trainer.world_size, cfg.prompts_per_step
        )
        torch.manual_seed(seed)
        drawn: dict[str, float] = {}
        if cfg.filter_groups:  # more prompts until the step's groups carry signal
            world = self.trainer.world_size
            items, scored, drawn = dynamic.draw(self, step, self.global_rank, world, items)
        else:
            scored = self.sample(items)
        t0 = time.perf_counter()
        rollout = self.forward(items, scored)
        times = {
            "time/generate": scored.generate_s,
            "time/reward": scored.reward_s,
            "time/forward": time.perf_counter() - t0,
        }
        t0 = time.perf_counter()
        adv, counts = self.advantages(rollout)  # [B, G, T]
        times["time/advantage"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        update = self.update(rollout, adv, seed)
        times["time/update"] = time.perf_counter() - t0
        self.rollout_step = step + 1
        self.scheduler_step()
        self.log_step(rollout, adv, {**update, **counts, **drawn}, times)

    def advantages(self, rollout: Rollout) -> tuple[Tensor, dict[str, float]]:
        """``[B, G, T]`` advantages, and the step's counts of samples whose reward never
        arrived (NaN, unless --failed_reward scores them) and of groups dropped for it. Such a
        sample is absent: its group is estimated without it and it leaves the loss; a group
        left with fewer samples than the estimator needs is dropped whole (``fast.absent``).
        --shaping transforms each group's rewards by its lengths before the estimator."""
        arrived = torch.isfinite(rollout.rewards)  # [B, G]
        valid, dropped = absent.admit(self.plan, arrived)
        rollout.mask = rollout.mask & valid.unsqueeze(-1)  # absent samples leave the loss
        adv = absent.advantages(self.plan, rollout, valid, self.shaping)
        counts = {"absent_samples": float((~arrived).sum()), "dropped_groups": float(dropped.sum())}
        return adv, counts

    def scheduler_step(self) -> None:
        sched = self.lr_schedulers()
        if sched is not None:
            sched.step()  # type: ignore[union-attr]

    def sample(self, items: list[Item]) -> Scored:
        """``cfg.group_size`` completions of each item's prompt, sampled by the run's engine and
        scored by its rewards: the sample-and-score path evaluation shares."""
        tok, cfg = self.tokenizer, self.cfg
        ids, attn = encode(
            tok, [i.prompt for i in items], chat_template=cfg.chat_template,
            system_prompt=cfg.system_prompt,
        )  # fmt: skip
        self.policy.eval()
        if cfg.turns > 1:  # multi-turn episodes: feedback and another turn after a wrong answer
            feedback = [feedback_text(i.prompt, cfg.embedded_task) for i in items]
            return sample_episodes(
                self.policy, tok, ids.to(self.device), attn.to(self.device),
                [i.answer for i in items], self.sampling, self.scorer, turns=cfg.turns,
                feedback=feedback, engine=self.engine, step_reward=cfg.step_reward,
            )  # fmt: skip
        return sample_and_score(
            self.policy,
            tok,
            ids.to(self.device),
            attn.to(self.device),
            [i.answer for i in items],
            self.sampling,
            self.scorer,
            engine=self.engine,
        )

    def engine(self, model: Any, tokenizer: Any, enc: dict[str, Tensor], s: Any) -> Tensor:
        """The configured generation engine, on the full (unsharded) parameters."""
        with scale.full_parameters(self), scale.merged_adapters(self, model):
            out: Tensor = self.generator(model, tokenizer, enc, s)
        return out

    @torch.no_grad()
    def forward(self, items: list[Item], scored: Scored) -> Rollout:
        """The rollout forward pass over scored samples (no rewards computed here): log-probs,
        entropy and (when the estimator reads them) hidden states of the policy, the reference
        model's log-probs when KL is on, and texts with token offsets when the estimator reads
        them."""
        cfg, tok = self.cfg, self.tokenizer
        sequences, prompt_mask, mask = scored.sequences, scored.prompt_mask, scored.mask
        B, G, T = len(items), cfg.group_size, mask.shape[-1]  # T: the response width
        self.policy.eval()
        t, n = cfg.temperature, cfg.minibatches * cfg.micro_batches
        if self.one_pass:  # filled in by the update's forward pass (``update``)
            nan = torch.full(mask.shape, math.nan, dtype=torch.float32, device=mask.device)
            logp, ent, hidden, squares = nan, nan.clone(), None, None
        else:
            logp, ent, hidden, squares = rollout_forward(
                self.policy,
                sequences,
                prompt_mask,
                mask,
                hidden=self.plan.needs("hidden"),
                sum_pi_squared=self.plan.needs("sum_pi_squared"),
                temperature=t,
                chunks=n,
                attend=scored.attend,
            )
        ref_logp = None
        if self.ref is not None:
            ref_logp, _, _, _ = rollout_forward(
                self.ref, sequences, prompt_mask, mask, hidden=False, temperature=t, chunks=n,
                attend=scored.attend,
            )  # fmt: skip
        token_ids, tmask = scored.responses.reshape(B, G, T), mask.reshape(B, G, T)
        grouped = [scored.texts[b * G : (b + 1) * G] for b in range(B)]
        offsets = torch.zeros(0)
        if self.plan.needs("offsets"):  # texts aligned with per-token character spans
            grouped, offsets = texts_and_offsets(token_ids, tmask, tok)
        self.note_truncation(scored.truncated, cfg.max_new_tokens)
        return Rollout(
            prompt_ids=torch.tensor([i.prompt_id for i in items], device=self.device),
            token_ids=token_ids,
            mask=tmask,
            rewards=scored.rewards,
            logprobs=logp.reshape(B, G, T),
            texts=grouped,
            offsets=offsets,
            hidden=hidden.reshape(B, G, T, -1).float() if hidden is not None else None,
            sum_pi_squared=None if squares is None else squares.reshape(B, G, T),
            reward_parts=scored.parts,
            reward_weights=torch.tensor(
                self.scorer.weights, dtype=torch.float64, device=self.device
            ),
            sequences=sequences,
            prompt_mask=prompt_mask,
            entropy=ent.reshape(B, G, T),
            ref_logprobs=None if ref_logp is None else ref_logp.reshape(B, G, T),
            truncated=scored.truncated.reshape(B, G),
            attend=None if scored.attend is None else scored.attend.reshape(B, G, T),
            episode_rewards=scored.turn_rewards,
            episode_turn_ids=None if scored.turn_ids is None else scored.turn_ids.reshape(B, G, T),
        )

    def note_truncation(self, truncated: Tensor, T: int) -> None:
        """Printed once, not warned: a run with a tiny budget on purpose is not an error."""
        share = float(truncated.float().mean())
        if share > 0.5 and not self.warned_truncation:
            self.warned_truncation = True
            logs.say(
                f"note: {share:.0%} of the completions at rollout step {self.rollout_step} hit "
                f"--max_new_tokens {T} without EOS; raise --max_new_tokens, or leave them out "
                "of the loss with --mask_truncated"
            )

    # ----------------------------------------------------------------- optimisation
    def update(self, rollout: Rollout, adv: Tensor, seed: int) -> dict[str, float]:
        """``ppo_epochs × minibatches`` optimiser steps on the rollout (``updates.ppo_update``)."""
        return updates.ppo_update(self, rollout, adv, seed)

    # ----------------------------------------------------------------- metrics and state
    def log_step(
        self, rollout: Rollout, adv: Tensor, update: dict[str, float], times: dict[str, float]
    ) -> None:
        values = {
            **metrics.step_row(rollout, adv, self.scorer.specs, self.k_big),
            "reward_failures": float(sum(self.scorer.failures.values())),
            "skipped_steps": float(self.skipped_total),
            "rollout_step": float(self.rollout_step),
            **update,
            **times,
        }
        values = {k: v for k, v in values.items() if math.isfinite(v)}
        bar = set(self.shown)
        self.log_dict(
            {k: v for k, v in values.items() if k in bar}, prog_bar=True, logger=False, on_step=True
        )
        # The row goes to the loggers here, inside the step, so it is on disk before the
        # checkpoint callback (on_train_batch_end) writes last.ckpt. Lightning logs self.log
        # values only after that hook: a kill between the two lost the step's row for good,
        # and the resumed metrics.csv missed it. A kill after the row and before the checkpoint
        # is harmless: the resumed run rewrites that step and MetricsCSV drops the stale row.
        for logger in self.loggers:
            logger.log_metrics(values, step=self.rollout_step)

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        state.save(self, checkpoint)

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        state.load(self, checkpoint)
