"""advest inside TRL's ``GRPOTrainer`` (tested with TRL 0.29.1 and 1.16.0, the ends of ``[trl]``).

Usage::

    from .trl import AdvestGRPOConfig, AdvestGRPOTrainer

    args = AdvestGRPOConfig(output_dir="out", num_generations=8, advest_estimator="maxpo",
                            advest_k=4)
    trainer = AdvestGRPOTrainer(model="Qwen/Qwen2-0.5B-Instruct", reward_funcs=[my_reward],
                                args=args, train_dataset=dataset)
    trainer.train()

Every sequence-level advest estimator can be named (families ``maxk`` and ``group``, and the
history estimator ``kae``); K is the setting ``advest_k`` (``--advest_k`` on TRL's command line,
which parses config dataclasses). ``advest_shaping`` names a reward shaping applied to each group's
rewards by the completions' lengths (completion-mask sums) before the estimator (``fast.shaping``:
``gr3``, ``overlong``, ``length_penalty``, ``efficiency``), with ``advest_shaping_options`` (a dict,
or its JSON on the command line). TRL's ``scale_rewards`` is honoured where it has a meaning:
with ``advest_estimator="grpo"`` it picks the GRPO variant (``"group"``: ``grpo``, ``"none"``:
``dr_grpo``, ``"batch"``: ``grpo_batch_std``); any other estimator decides the whole advantage,
and a ``scale_rewards`` other than the default ``"group"`` is refused with a message.

Where the hook sits, and why. TRL computes GRPO's advantages inline, in the middle of the ~600
lines of ``GRPOTrainer._generate_and_score_completions``; there is no method that computes only the
advantage. Copying that method would break with every TRL release, so this subclass wraps two
narrow contracts instead:

* ``_calculate_rewards(...)`` returns the rewards of every reward function for every completion,
  gathered over processes, ``[N, F]`` (N = B·G over all processes). The wrapper keeps that
  return value and passes it on unchanged.
* ``_generate_and_score_completions(inputs)`` returns a dict whose ``"advantages"`` entry,
  ``[n]`` (this process's completions, groups of G contiguous), is what the loss reads. The
  wrapper calls it, then replaces that one entry by advest's advantages of the same rewards,
  sliced to the process exactly as TRL slices its own.

Both names are private, but their contracts (one return value, one dict key) have held since
TRL 0.19, the first release with ``_calculate_rewards``, while the code around them is rewritten
often; the test
(``tests/core/training/test_trl.py``) trains two steps and compares what reached the loss, so a TRL
release that moves either point fails it instead of silently training with TRL's formula.

The rewards advest receives are TRL's weighted sum over reward functions (``reward_weights``,
NaN from a function that returned None counted as 0, as TRL's ``sum_then_normalize`` does), viewed
as ``[B, G]``. Refused with a ``ValueError``: ``multi_objective_aggregation="normalize_then_sum"``
(its per-function z-scores are TRL's own advantage convention, not rewards), a completion for
which every reward function returned None (advest has no convention for a missing reward), token
level estimators (TRL gives the estimator no token ids, log-probs or hidden states at this point).
``kae`` gets a stable id per distinct prompt (in order of first appearance); its history lives
in the trainer and is saved in, and restored from, each checkpoint (``advest_<name>.pt``, under
the estimator's own name).

Evaluation (``eval_strategy`` other than ``"no"``) samples ``num_generations_eval`` completions
per prompt: the estimator is dry-run at that group size too, so a K that does not fit it is
refused when the trainer is built, not at the first evaluation; and evaluation computes a
stateful estimator's advantages on a copy of its state, so evaluation prompts never enter the
KAE history that training reads.
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor
from trl.trainer.grpo_config import GRPOConfig
from trl.trainer.grpo_trainer import GRPOTrainer

from advest.fast import calling, registry
from advest.fast.shaping import Transform

from . import peers

__all__ = ["AdvestGRPOConfig", "AdvestGRPOTrainer", "advantage_fn"]

STATE_FILE = "advest_{}.pt"
"""A stateful estimator's checkpoint file, by its registry name (``advest_kae.pt``)."""


@dataclass
class AdvestGRPOConfig(GRPOConfig):
    """``GRPOConfig`` plus the advest estimator that replaces GRPO's advantage."""

    advest_estimator: str = field(
        default="grpo",
        metadata={"help": "advest estimator by registry name (maxk, group, or kae)."},
    )
    advest_k: int | None = field(
        default=None,
        metadata={
            "help": "K of a max@K / pass@K estimator (required by those, refused by others)."
        },
    )
    advest_shaping: str | None = field(
        default=None,
        metadata={
            "help": "reward shaping by completion length before the estimator: gr3, overlong, "
            "length_penalty or efficiency (none by default)."
        },
    )
    advest_shaping_options: dict[str, Any] | str | None = field(
        default=None,
        metadata={"help": "options of advest_shaping, as a dict or JSON: '{\"alpha\": 0.5}'."},
    )


class Advantage:
    """One advest estimator resolved once per run (``fast.calling.plan``): ``rewards [B, G]``
    (+ ``lengths [B, G]`` for OPO, ``prompt_ids [B]`` for kae) -> advantages ``[B, G]``; with
    ``shaping`` (``fast.shaping``), of the rewards shaped by the lengths."""

    def __init__(
        self, name: str, k: int | None, group_size: int, shaping: Transform | None = None
    ) -> None:
        entry = registry.entry(name)
        reason = peers.TRL.why_not(name)
        if reason:
            extra = {
                "token": "; use a sequence-level one (this one is token level)",
                "multi_reward": ": this adapter passes advest the weighted sum only. TRL's own "
                'multi_objective_aggregation="normalize_then_sum" is advest\'s gdpo with '
                "eps=1e-4 (spec/gdpo.md, tested)",
            }.get(entry.kind, "")
            raise ValueError(f"advest_estimator={name!r} {reason}{extra}")
        if entry.needs_k and k is None:
            raise ValueError(f"advest_estimator={name!r} is a max@K estimator: set advest_k")
        if not entry.needs_k and k is not None:
            raise ValueError(f"advest_k={k} is set but advest_estimator={name!r} takes no K")
        self.name, self.entry, self.k, self.shaping = name, entry, k, shaping
        self.plan = calling.plan(name, k=k)
        if not entry.stateful:
            # Fail at construction, with the estimator's own message, if K does not fit G.
            zeros = torch.zeros(2, group_size)
            self(zeros, torch.ones(2, group_size, dtype=torch.int64), torch.arange(2))

    @property
    def state(self) -> Any:
        """A stateful estimator's instance (its history), else None."""
        return self.plan.instance if self.entry.stateful else None

    def fresh(self) -> Advantage:
        """The same estimator on a copy of its state: for evaluation, which must not move it."""
        import copy

        twin = copy.copy(self)
        twin.plan = self.plan.fresh()
        return twin

    def __call__(self, rewards: Tensor, lengths: Tensor, prompt_ids: Tensor) -> Tensor:
        """rewards, lengths: ``[B, G]``; prompt_ids: ``[B]`` -> ``[B, G]``."""
        if self.shaping is not None:  # each group's rewards by its lengths, before the baseline
            rewards = self.shaping(rewards, lengths)
        source = {"rewards": rewards, "lengths": lengths, "prompt_ids": prompt_ids}
        return self.plan.per_sample(source)


def with_scale_rewards(name: str, scale_rewards: Any) -> str:
    """The estimator TRL's ``scale_rewards`` asks for, with ``advest_estimator=name``: a GRPO
    variant for ``"grpo"``; any other estimator only with the default ``"group"`` (it decides its
    own scale, so another value is refused rather than ignored; ``peers.with_std``)."""
    option = f"scale_rewards={scale_rewards!r}"
    return peers.with_std(name, scale_rewards, option, f"advest_estimator={name!r}")


def advantage_fn(
    name: str, k: int | None, group_size: int, shaping: Transform | None = None
) -> Advantage:
    """The callable ``AdvestGRPOTrainer`` uses, for use outside TRL (e.g. to compare)."""
    return Advantage(name, k, group_size, shaping)


def shaping_of(config: AdvestGRPOConfig, name: str) -> Transform | None:
    """``advest_shaping`` with ``advest_shaping_options`` (a dict or its JSON), refused naming
    the setting (``peers.shaped``)."""
    options = config.advest_shaping_options
    if isinstance(options, str):
        try:
            options = json.loads(options)
        except json.JSONDecodeError as error:
            raise ValueError(f"advest_shaping_options is not JSON: {error}") from None
    keys = ("advest_shaping", "advest_shaping_options")
    return peers.shaped(config.advest_shaping, options, keys, name)


class AdvestGRPOTrainer(GRPOTrainer):
    """``GRPOTrainer`` whose advantages are advest's ``args.advest_estimator`` (module docstring).

    Takes the arguments of ``GRPOTrainer``; ``args`` must be an ``AdvestGRPOConfig``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        config = self.args
        if not isinstance(config, AdvestGRPOConfig):
            raise TypeError(
                f"AdvestGRPOTrainer needs args=AdvestGRPOConfig(...); got {type(config).__name__}"
            )
        aggregation = getattr(self, "multi_objective_aggregation", "sum_then_normalize")
        if aggregation != "sum_then_normalize":
            raise ValueError(
                f"multi_objective_aggregation={aggregation!r}: advest's estimators take one reward "
                "per completion; use 'sum_then_normalize' (the weighted sum of the reward funcs)"
            )
        G = self.num_generations  # GRPOConfig's __post_init__ has filled it in
        assert G is not None
        name = with_scale_rewards(config.advest_estimator, config.scale_rewards)
        shaping = shaping_of(config, name)
        self.advest = Advantage(name, config.advest_k, G, shaping)
        G_eval = getattr(self, "num_generations_eval", None) or G
        if config.eval_strategy != "no" and G_eval != G:
            try:  # the estimator's own domain check at the evaluation group size
                Advantage(name, config.advest_k, G_eval, shaping)
            except ValueError as error:
                raise ValueError(
                    f"num_generations_eval={G_eval}: {error}; raise num_generations_eval or "
                    "lower advest_k"
                ) from None
        self.advest_prompt_ids: dict[str, int] = {}
        self._advest_rewards: Tensor | None = None

    def _calculate_rewards(self, *args: Any, **kwargs: Any) -> Tensor:
        rewards_per_func: Tensor = super()._calculate_rewards(*args, **kwargs)
        self._advest_rewards = rewards_per_func  # [N, F], gathered over processes
        return rewards_per_func

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        from accelerate.utils import gather, gather_object

        self._advest_rewards = None
        output: dict[str, Any] = super()._generate_and_score_completions(inputs)
        per_func = self._advest_rewards
        if per_func is None:
            raise RuntimeError(
                "TRL did not call _calculate_rewards in _generate_and_score_completions: this TRL "
                "version moved the hook advest relies on (tested with TRL 1.16)"
            )
        G = self.num_generations if self.model.training else self.num_generations_eval
        N = per_func.shape[0]  # B·G over all processes
        unscorable = torch.isnan(per_func).all(dim=1)
        if bool(unscorable.any()):
            i = int(unscorable.nonzero()[0])
            raise ValueError(
                f"completion {i} (group {i // G}) has no reward: every reward function returned "
                "None, and advest's estimators need a reward for every completion"
            )
        weights = self.reward_weights.to(per_func.device)  # [F]
        rewards = (per_func * weights.unsqueeze(0)).nansum(dim=1).view(N // G, G)  # [B, G]
        mask: Tensor = output["completion_mask"]  # [n, T] on this process
        lengths = gather(mask.sum(dim=1)).view(N // G, G)  # [B, G]
        prompts = gather_object([json.dumps(x.get("prompt"), sort_keys=True) for x in inputs])
        ids = [self.advest_prompt_ids.setdefault(p, len(self.advest_prompt_ids)) for p in prompts]
        prompt_ids = torch.tensor(ids[::G], dtype=torch.int64, device=rewards.device)  # [B]
        # evaluation works on a copy of a stateful estimator's history: training alone moves it
        estimator = self.advest if self.model.training else self.advest.fresh()
        adv = estimator(rewards, lengths, prompt_ids).reshape(-1)  # [N]
        local: Tensor = output["advantages"]  # [n]
        n = local.shape[0]
        start = self.accelerator.process_index * n
        output["advantages"] = adv[start : start + n].to(local.dtype).to(local.device)
        logged = getattr(self, "_logs", {}).get("advantages")
        if isinstance(logged, deque) and len(logged) >= N:
            # The completions table logged TRL's advantages: show the ones that were used.
            for j, value in enumerate(adv.tolist()):
                logged[len(logged) - N + j] = value
        return output

    def _save_checkpoint(self, model: Any, trial: Any) -> None:
        super()._save_checkpoint(model, trial)  # type: ignore[no-untyped-call]
        if self.advest.state is not None and self.args.should_save:
            folder = self._advest_checkpoint_folder(trial)
            state = {
                self.advest.name: self.advest.state.state_dict(),
                "prompts": self.advest_prompt_ids,
            }
            torch.save(state, folder / STATE_FILE.format(self.advest.name))

    def _load_from_checkpoint(self, resume_from_checkpoint: str, model: Any = None) -> None:
        super()._load_from_checkpoint(resume_from_checkpoint, model)
        path = Path(resume_from_checkpoint) / STATE_FILE.format(self.advest.name)
        if self.advest.state is not None and path.exists():
            state = torch.load(path, weights_only=True)
            self.advest.state.load_state_dict(state[self.advest.name])
            self.advest_prompt_ids = dict(state["prompts"])

    def _advest_checkpoint_folder(self, trial: Any) -> Path:
        from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

        run_dir = self._get_output_dir(trial=trial)
        return Path(run_dir) / f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"
