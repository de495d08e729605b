"""The checks that run before any model is loaded, on the settings of ``training.settings``
(re-exported here: ``RLConfig``, ``ConfigError``)."""

from __future__ import annotations

import math
from dataclasses import fields, replace
from typing import Any

from . import dynamic, models, tasks
from .paths import _fits, check_model, check_out, check_weights, has_chat_template
from .rewards import RewardSpecError
from .rollout import Plan, dry_run, plan
from .scoring import Scorer
from .settings import ConfigError, RLConfig

__all__ = ["ConfigError", "RLConfig", "validate"]


def _positive(cfg: RLConfig, names: list[str]) -> None:
    for name in names:
        if getattr(cfg, name) < 1:
            raise ConfigError(f"--{name} must be at least 1; got {getattr(cfg, name)}")


RANGES: dict[str, tuple[str, str]] = {
    "lr": (">0", "a learning rate of 0 trains nothing; e.g. --lr 1e-6 for a real model"),
    "weight_decay": (">=0", "AdamW decay is a fraction; 0 turns it off"),
    "kl_coef": (">=0", "a negative coefficient would reward moving away; 0 turns KL off"),
    "max_grad_norm": (">0", "0 would zero every update; use e.g. 1.0"),
    "warmup_steps": (">=0", "0 means no warm-up"),
    "reward_timeout": (">0", "seconds per verifier call, e.g. 5"),
    "eval_prompts": (">=0", "0 skips the held-out evaluation"),
    "checkpoint_every": (">=0", "0 checkpoints only at the end"),
    "train_pool": (">=0", "0 means an endless stream of prompts"),
    "clip_high": (">=0", "the ratio is clipped to [1 - clip_low, 1 + clip_high]"),
}
"""Bounds checked before anything loads: flag → (bound, what to do instead)."""


def _ranges(cfg: RLConfig) -> None:
    for name, (bound, hint) in RANGES.items():
        value = getattr(cfg, name)
        if value is None:  # a default filled in later (config.sized)
            continue
        ok = value > 0 if bound == ">0" else value >= 0
        if not ok or value != value:
            word = "greater than 0" if bound == ">0" else "at least 0"
            raise ConfigError(f"--{name} must be {word}; got {value} ({hint})")


def check_sampling(temperature: float, top_p: float) -> None:
    """The sampling settings ``advest train``, ``eval`` and ``experiment values`` share, checked
    the same way in all three. Raises ``ConfigError`` naming the flag."""
    if not 0 < temperature < math.inf:
        raise ConfigError(
            f"--temperature must be greater than 0 and finite; got {temperature} (e.g. 1)"
        )
    if not 0 < top_p <= 1:
        raise ConfigError(f"--top_p must lie in (0, 1]; got {top_p}")


def scorer(cfg: RLConfig) -> Scorer:
    """The run's reward: every --reward resolved (user modules imported), weighted; what
    ``validate`` checks is what the run then uses. Raises ``ConfigError`` naming the flag."""
    return build_scorer(
        cfg.reward, cfg.reward_weights, cfg.reward_timeout, cfg.reward_workers,
        threshold=cfg.reward_threshold, failed=cfg.failed_reward,
    )  # fmt: skip


REWARD_SETTINGS = ("reward", "reward_weights", "reward_timeout", "reward_workers")
"""The settings that define a run's reward, shared by ``advest train``, ``eval`` and
``experiment values``."""

SAMPLING_SETTINGS = ("max_new_tokens", "temperature", "top_p", "generator")
"""How completions are sampled: shared by ``advest train``, ``eval`` and ``experiment values``."""

PROMPT_SETTINGS = ("data_options", "data_size", "chat_template", "system_prompt")
"""How the prompts are drawn and rendered (``--data`` itself means held-out prompts in ``eval``,
so each command words its own)."""


def build_scorer(
    reward: str | list[str],
    weights: list[float] | None,
    timeout_s: float,
    workers: int,
    *,
    threshold: float | None = None,
    failed: float | None = 0.0,
) -> Scorer:
    """A ``Scorer`` from the --reward, --reward_weights, --reward_timeout and --reward_workers
    settings (``advest train``, ``eval`` and ``experiment values`` share them) and a run's
    --reward_threshold and --failed_reward (``failed``; None: NaN, the reward never arrived).
    Raises ``ConfigError`` naming the flag."""
    names = [reward] if isinstance(reward, str) else list(reward)
    if not names:
        raise ConfigError("--reward is empty: name at least one verifier (e.g. --reward exact)")
    if weights is not None and len(weights) != len(names):
        raise ConfigError(
            f"--reward_weights gives {len(weights)} weights for the {len(names)} rewards of "
            f"--reward {' '.join(names)}; give one weight per reward, in the same order"
        )
    if weights is not None and not all(w == w and abs(w) != float("inf") for w in weights):
        raise ConfigError(f"--reward_weights must be finite; got {weights}")
    if len(set(names)) < len(names):
        raise ConfigError(f"--reward names a verifier twice: {' '.join(names)}")
    if not timeout_s > 0:
        raise ConfigError(f"--reward_timeout must be greater than 0; got {timeout_s}")
    if workers < 0:
        raise ConfigError(f"--reward_workers must be at least 0; got {workers} (0: in-process)")
    if threshold is not None and not math.isfinite(threshold):
        raise ConfigError(f"--reward_threshold must be a finite number; got {threshold} (e.g. 1)")
    try:
        return Scorer(
            names, weights, timeout_s=timeout_s, workers=workers, threshold=threshold, failed=failed
        )
    except RewardSpecError as error:
        raise ConfigError(f"--reward: {error}") from None


def check_finite(cfg: RLConfig) -> None:
    """Every number of ``cfg`` that is a float (in lists and ``estimator_options`` too) is
    finite: ``--lr 1e999`` or a YAML ``.inf`` would otherwise train NaN weights."""
    values: list[tuple[str, Any]] = [(f"--{f.name}", getattr(cfg, f.name)) for f in fields(cfg)]
    values += [(f"--estimator_options {k}", v) for k, v in cfg.estimator_options.items()]
    for flag, value in values:
        for v in value if isinstance(value, list) else [value]:
            if isinstance(v, float) and not math.isfinite(v):
                raise ConfigError(f"{flag} must be a finite number; got {value}")


EMBEDDED_EVAL = (128, 16)
"""Held-out prompts × samples on the embedded tiny model: its evaluation takes seconds."""


def sized(cfg: RLConfig) -> RLConfig:
    """``cfg`` with the held-out evaluation's size filled in where the user left it out.

    The embedded model gets ``EMBEDDED_EVAL``. A real model's evaluation is sized to the run: it
    samples, before and after, at most half as many completions as training draws (steps ×
    prompts_per_step × group_size), with min(16, group_size) samples per prompt and 1 to 128
    prompts, so that a short run spends most of its time training. (Measured on 2 cores for
    SmolLM2-135M: the former 128 × 16 default took 14 of a one-step run's 14 minutes.) Given
    values are kept as they are."""
    if cfg.eval_prompts is not None and cfg.eval_samples is not None:
        return cfg
    if cfg.model is None:
        prompts, samples = EMBEDDED_EVAL
    else:
        samples = min(16, cfg.group_size) if cfg.eval_samples is None else cfg.eval_samples
        budget = cfg.steps * cfg.prompts_per_step * cfg.group_size // 2  # completions per eval
        prompts = max(1, min(128, budget // max(samples, 1)))
    return replace(
        cfg,
        eval_prompts=prompts if cfg.eval_prompts is None else cfg.eval_prompts,
        eval_samples=samples if cfg.eval_samples is None else cfg.eval_samples,
    )


def eval_sizes(cfg: RLConfig) -> tuple[int, int]:
    """(held-out prompts, samples per prompt) of ``cfg``, sized where left out (``sized``)."""
    full = sized(cfg)
    assert full.eval_prompts is not None and full.eval_samples is not None  # sized fills both
    return full.eval_prompts, full.eval_samples


def validate(cfg: RLConfig) -> None:
    """Every check that needs no model: fails fast with what to change."""
    cfg = sized(cfg)
    check_finite(cfg)
    _positive(cfg, ["steps", "prompts_per_step", "group_size", "max_new_tokens", "ppo_epochs"])
    _positive(cfg, ["turns"])
    _positive(cfg, ["minibatches", "micro_batches", "k", "max_bad_steps"])
    if cfg.max_prompt_tokens is not None and cfg.max_prompt_tokens < 1:
        raise ConfigError(f"--max_prompt_tokens must be at least 1; got {cfg.max_prompt_tokens}")
    _ranges(cfg)
    held_prompts, held_samples = eval_sizes(cfg)
    if held_prompts > 0 and held_samples < 1:
        raise ConfigError(
            f"--eval_samples must be at least 1 when --eval_prompts > 0; got {cfg.eval_samples} "
            "(or set --eval_prompts 0 / --no_eval to skip the evaluation)"
        )
    sequences = cfg.prompts_per_step * cfg.group_size
    if sequences % (cfg.minibatches * cfg.micro_batches):
        raise ConfigError(
            f"prompts_per_step × group_size = {sequences} sequences do not split into "
            f"minibatches × micro_batches = {cfg.minibatches * cfg.micro_batches} equal parts"
        )
    if not 0 <= cfg.clip_low < 1:
        raise ConfigError(f"--clip_low must lie in [0, 1); got {cfg.clip_low}")
    check_sampling(cfg.temperature, cfg.top_p)
    dynamic.check(cfg)
    scorer(cfg)
    check_out(cfg.out)
    context: int | None
    if cfg.model is None:
        from .embedded import CONTEXT

        context = CONTEXT
        _fits(cfg.max_new_tokens, CONTEXT)
    else:
        context = check_model(cfg.model, cfg.max_new_tokens)
    check_task(
        cfg.data, cfg.data_options, cfg.data_size, cfg.reward,
        held=held_prompts if cfg.eval_data is None else 0,
        seed=cfg.seed if cfg.data_seed is None else cfg.data_seed,
    )  # fmt: skip
    if cfg.data_seed is not None and not tasks.is_task(cfg.data):
        raise ConfigError("--data_seed draws a reasoning-gym task's rows; give --data "
                          "reasoning_gym:TASK, or leave --data_seed out")  # fmt: skip
    if cfg.data is not None and not tasks.is_task(cfg.data):
        _check_data(cfg)
    _check_held_out(cfg)
    if cfg.max_prompt_tokens is not None and context is not None:
        budget = cfg.max_prompt_tokens + cfg.max_new_tokens
        if budget > context:
            raise ConfigError(
                f"--max_prompt_tokens {cfg.max_prompt_tokens} + --max_new_tokens "
                f"{cfg.max_new_tokens} = {budget} exceeds the model's context of {context} "
                "tokens; lower --max_prompt_tokens (longer prompts are dropped)"
            )
    _check_estimator(cfg)
    _check_scale(cfg)
    if cfg.model is not None and not models.is_gguf(cfg.model):  # last: reads weight headers
        check_weights(cfg.model)


def check_task(
    data: str | None,
    options: dict[str, Any],
    size: int,
    reward: str | list[str],
    *,
    held: int = 0,
    seed: int = 0,
) -> None:
    """A reasoning-gym ``--data`` (task, options, size), and ``--reward reasoning_gym`` only with
    one. With ``held`` > 0, the ``held`` held-out rows for ``seed`` must exist beside the
    training rows (they are drawn here: cheap next to loading a model). Raises ``ConfigError``
    naming the flag."""
    from .data import DataError

    rewards = [reward] if isinstance(reward, str) else list(reward)
    if "reasoning_gym" in rewards and not tasks.is_task(data):
        raise ConfigError(
            "--reward reasoning_gym scores the rows of a reasoning-gym task; give --data "
            "reasoning_gym:TASK (e.g. reasoning_gym:chain_sum), or another --reward"
        )
    if options and not tasks.is_task(data):
        raise ConfigError("--data_options sets a reasoning-gym task's settings; give --data "
                          "reasoning_gym:TASK")  # fmt: skip
    if tasks.is_task(data):
        assert data is not None
        try:
            tasks.check(data, options, size)
            if held:
                train = tasks.rows(data, options, size, seed)
                tasks.held_out_rows(data, options, held, seed, train)
        except DataError as error:
            raise ConfigError(str(error)) from None


def _check_data(cfg: RLConfig) -> None:
    from .data import DataError, read_rows

    assert cfg.data is not None
    try:
        rows = read_rows(cfg.data)
    except DataError as error:
        raise ConfigError(str(error)) from None
    chat = [i for i, r in enumerate(rows) if not isinstance(r.prompt, str)]
    template = cfg.chat_template and cfg.model is not None and has_chat_template(cfg.model)
    if chat and not template:
        why = (
            "--no_chat_template is set"
            if not cfg.chat_template
            else "the embedded model has none"
            if cfg.model is None
            else f"{cfg.model} has no chat template"
        )
        raise ConfigError(
            f"--data {cfg.data}: {len(chat)} rows give chat messages (the first is row "
            f"{chat[0] + 1}) but {why}; give text prompts or a model whose tokenizer has a "
            "chat template"
        )


def _check_held_out(cfg: RLConfig) -> None:
    """The held-out split: a fraction in [0, 1) of --data, or a file, not both."""
    from .data import DataError, read_rows

    if cfg.eval_every < 0:
        raise ConfigError(
            f"--eval_every must be at least 0; got {cfg.eval_every} (0: before/after)"
        )
    if not 0 <= cfg.eval_fraction < 1:
        raise ConfigError(
            f"--eval_fraction must lie in [0, 1); got {cfg.eval_fraction} (e.g. 0.1 holds out "
            "a tenth of --data)"
        )
    if cfg.eval_fraction > 0 and cfg.embedded_task:
        raise ConfigError("--eval_fraction splits --data; give --data (or use --eval_data)")
    if cfg.eval_fraction > 0 and tasks.is_task(cfg.data):
        raise ConfigError(
            "--eval_fraction splits a data file; a reasoning-gym task's held-out prompts are "
            "drawn with a disjoint seed (their number is --eval_prompts)"
        )
    if cfg.eval_fraction > 0 and cfg.eval_data is not None:
        raise ConfigError(
            "--eval_fraction and --eval_data both name a held-out set; give one of them"
        )
    if cfg.eval_data is not None:
        try:
            read_rows(cfg.eval_data, flag="--eval_data")
        except DataError as error:
            raise ConfigError(str(error)) from None
    if cfg.eval_fraction > 0:
        assert cfg.data is not None
        n = len(read_rows(cfg.data))
        held = round(n * cfg.eval_fraction)
        if held == 0 or held == n:
            raise ConfigError(
                f"--eval_fraction {cfg.eval_fraction} of the {n} rows of --data {cfg.data} "
                f"holds out {held}; both splits need at least one row"
            )


def estimator_plan(cfg: RLConfig) -> Plan:
    """The run's estimator resolved once (``rollout.plan``): the trainer builds its plan here
    and ``validate`` dry-runs one built the same way. Raises ``ConfigError`` naming the flag."""
    try:
        return plan(cfg.estimator, cfg.base_estimator, cfg.estimator_options, k=cfg.k)
    except KeyError as error:
        raise ConfigError(f"--estimator: {error.args[0]}") from None
    except (ValueError, TypeError) as error:  # a stateful estimator's constructor refused
        raise _refused(cfg, error) from None


def _refused(cfg: RLConfig, error: Exception) -> ConfigError:
    return ConfigError(
        f"estimator {cfg.estimator!r} refuses group_size={cfg.group_size}, k={cfg.k}, "
        f"options={cfg.estimator_options}: {error}. Change --group_size, --k or --estimator."
    )


def _check_estimator(cfg: RLConfig) -> None:
    """Dry-run the estimator on a rollout of the configured shape: whatever it would refuse at
    step 1 (K too large for G, G = 1 with leave-one-out, bad options) is refused now. The plan
    is a fresh one (a stateful estimator's instance), so no state leaks into the run."""
    trial = estimator_plan(cfg)
    try:
        dry_run(trial, cfg.prompts_per_step, cfg.group_size)
    except (ValueError, TypeError) as error:
        raise _refused(cfg, error) from None
    if cfg.group_size == 1 and _learns_nothing_alone(cfg):
        raise ConfigError(
            f"--estimator {cfg.estimator} gives a group of one sample a zero advantage whatever "
            "its reward, so with --group_size 1 the run learns nothing; use --group_size 2 or more"
        )


def _learns_nothing_alone(cfg: RLConfig) -> bool:
    """Whether the estimator's advantages are all zero on groups of one sample with distinct,
    non-zero rewards (a group baseline at G = 1 is the sample itself)."""
    import dataclasses

    import torch

    from .rollout import synthetic

    B = 4
    rewards = torch.arange(1.0, B + 1).view(B, 1)  # [B, 1]
    one = dataclasses.replace(
        synthetic(B, 1, T=4), rewards=rewards, reward_parts=rewards.unsqueeze(-1)
    )
    return not bool(estimator_plan(cfg).advantages(one).any())


def _check_scale(cfg: RLConfig) -> None:
    if cfg.lora_r < 0 or (cfg.lora_r > 0 and cfg.lora_alpha <= 0):
        raise ConfigError(f"need lora_r ≥ 0 and lora_alpha > 0; got {cfg.lora_r}, {cfg.lora_alpha}")
    if not 0 <= cfg.lora_dropout < 1:
        raise ConfigError(f"need 0 ≤ lora_dropout < 1; got {cfg.lora_dropout}")
    if cfg.generator not in ("generate", "continuous"):
        raise ConfigError(f"--generator {cfg.generator!r}: choose generate or continuous")
    if cfg.dtype not in ("float32", "bfloat16", "float16"):
        raise ConfigError(f"--dtype {cfg.dtype!r}: choose float32, bfloat16 or float16")
    if cfg.lora_r > 0 and not cfg.lora_target_modules:
        raise ConfigError("--lora_target_modules is empty: name the modules that get adapters")
