"""advest inside verl (tested against verl 0.9.1); verl's estimators inside ``advest check`` are
``advest.oracle.conventions.verl``.

verl's advantage-estimator convention (``verl/trainer/ppo/core_algos.py``)::

    fn(token_level_rewards [bs, T], response_mask [bs, T], index [bs] (uids), config=AlgoConfig,
       **kwargs) -> (advantages [bs, T], returns [bs, T])

with the outcome reward at the last valid token, and the samples of one prompt sharing a uid in
``index``, in any order. ``register()`` adds every sequence-level advest estimator to verl's
registry as ``advest_<name>``, and the multi-turn (episode) ones, whose turns come from the
response mask's runs of 1s (tool output is 0 there). The config passed at call time holds
advest's settings (``OPTIONS``): ``algorithm.advest_k``, and ``algorithm.advest_shaping`` with
``algorithm.advest_shaping_options``, a reward shaping (``fast.shaping``) applied to each group's
summed rewards by the response lengths before a sequence-level estimator.

Not registered, and why: verl's ``compute_advantage`` passes an estimator only
``token_level_rewards``, ``response_mask``, ``index``, ``config`` (and ``reward_baselines``);
token ids, log-probs, hidden states and decoded texts never reach it (only ``gdpo`` is handed the
batch), so ``ktae`` (token ids), ``covariance_weights`` (log-probs), ``hista`` (hidden states)
and ``numca`` (texts and offsets) cannot be fed; ``kae`` needs a stable id per prompt across
steps, and verl's uids are fresh ``uuid4`` strings every step. ``gdpo`` needs each reward's own
score, which ``compute_advantage`` hands only to the estimator named ``gdpo`` (verl's own, which
verl refuses to replace): registered under another name it would silently be GDPO of the summed
reward. ``optimal_token_baseline`` likewise needs log-probs and Σπ², which
``compute_advantage`` passes only to verl's own two token baselines (advest's equals verl's,
tests/verl/check_otb.py). ``gdpo`` below is advest's GDPO with the signature and config keys of
verl's function, for code that calls an estimator itself.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor

from advest.fast import calling, registry
from advest.fast.flat import groups, located
from advest.fast.shaping import Transform

from . import peers

SKIPPED: dict[str, str] = peers.VERL.cannot_run()
"""advest's estimators verl cannot run, each with the reason (the one rule of
``integrations.peers``)."""


def _k(config: Any, default: int | None, name: str) -> int | None:
    how = "set algorithm.advest_k in verl's config, or call advest.integrations.verl.register(k=K)"
    return peers.k_for(name, peers.setting(config, "advest_k"), default, how)


SHAPING_KEYS = ("algorithm.advest_shaping", "algorithm.advest_shaping_options")
"""verl's settings of the reward shaping before an ``advest_*`` estimator (``fast.shaping``)."""


def shaping_setting(name: str, config: Any) -> Transform | None:
    """The shaping ``algorithm.advest_shaping`` names, with ``algorithm.advest_shaping_options``
    (None: none), for ``advest_<name>``; refused naming the key (``peers.shaped``)."""
    chosen = peers.setting(config, "advest_shaping")
    return peers.shaped(chosen, peers.setting(config, "advest_shaping_options"), SHAPING_KEYS, name)


def with_std_setting(name: str, config: Any) -> str:
    """verl's ``algorithm.norm_adv_by_std_in_grpo`` where it has a meaning: with
    ``advest_grpo``, False is Dr. GRPO's r − group mean (``dr_grpo``). Every other estimator
    decides its own scale, so False is refused rather than ignored (``peers.with_std``)."""
    norm = peers.setting(config, "norm_adv_by_std_in_grpo", True)
    option = f"algorithm.norm_adv_by_std_in_grpo={norm}"
    return peers.with_std(name, bool(norm), option, f"advest_{name}")


def adapter(name: str, k: int | None = None) -> Callable[..., tuple[Tensor, Tensor]]:
    """advest's ``name`` with verl's calling convention: a sequence-level estimator on each
    response's summed reward, or an episode estimator on a multi-turn row's turns (the response
    mask's runs of 1s; ``peers.per_token``). The config passed at call time may name a reward
    shaping (``algorithm.advest_shaping``, ``shaping_setting``), applied before the estimator."""
    reason = peers.VERL.why_not(name)
    if reason:
        raise ValueError(f"advest_{name} cannot run inside verl: {reason}")

    # verl's compute_advantage passes keywords this estimator has no use for
    # (reward_baselines, future additions); accepting **kwargs is verl's own convention.
    def advantage(
        token_level_rewards: Tensor,
        response_mask: Tensor,
        index: Sequence[Any] | np.ndarray,
        config: Any = None,
        **kwargs: Any,
    ) -> tuple[Tensor, Tensor]:
        K = _k(config, k if k is not None else _DEFAULT_K.get("k"), name)
        estimator = calling.plan(with_std_setting(name, config), k=K)
        shaping = shaping_setting(name, config)
        batch = (token_level_rewards, response_mask, index)
        out = peers.per_token(estimator, *batch, "verl", shaping=shaping)
        return out, out

    advantage.__name__ = f"advest_{name}"
    advantage.__doc__ = f"advest's {name} in verl's advantage-estimator convention."
    return advantage


_ADAPTERS: dict[str, Callable[..., tuple[Tensor, Tensor]]] = {}
_DEFAULT_K: dict[str, int] = {}
"""``register(k=K)``'s K, read by every registered adapter at call time."""


def register(k: int | None = None) -> dict[str, str]:
    """Add every advest estimator verl can feed to its registry as ``advest_<name>``.

    Idempotent: the same function is registered for each name whatever ``k``, and ``k`` (when
    given) sets the default K of the max@K estimators, which ``algorithm.advest_k`` in the
    config passed to the estimator overrides. The ``verl.plugins`` entry point
    (``advest.integrations.verl_plugin``) calls this in every process that imports verl.
    Returns the estimators *not* registered, each with the reason."""
    from verl.trainer.ppo.core_algos import register_adv_est

    if k is not None:
        _DEFAULT_K["k"] = int(k)
    for name in registry.names():
        if name in SKIPPED:
            continue
        if name not in _ADAPTERS:
            _ADAPTERS[name] = adapter(name)
        register_adv_est(f"advest_{name}")(_ADAPTERS[name])
    return dict(SKIPPED)


OPTIONS = ("advest_k", "advest_shaping", "advest_shaping_options")
"""The ``algorithm.advest_*`` keys the adapters read (added with Hydra's ``+``)."""


def check_config(config: Any) -> None:
    """Refuse, before any worker starts, what an ``advest_*`` estimator would refuse at its first
    step. ``config`` is verl's whole trainer config (``main_ppo``'s Hydra config).

    It dry-runs the adapter verl would call on a batch of the configured shape
    (``data.train_batch_size`` prompts × ``actor_rollout_ref.rollout.n`` samples, distinct
    rewards), the way ``advest train`` checks its own settings: K outside the estimator's range
    for G, ``norm_adv_by_std_in_grpo`` where it has no meaning, a name advest does not have, a
    shaping or shaping option advest does not have (or a shaping before an episode estimator).
    An ``algorithm.advest_*`` key that no adapter reads (a typo) is refused too. Estimators
    not named ``advest_*`` are verl's business and pass untouched, except that a shaping set
    for one is refused: verl's own estimators never read it."""
    algorithm = peers.setting(config, "algorithm", None)
    name = str(peers.setting(algorithm, "adv_estimator", ""))
    keys = [str(key) for key in (algorithm.keys() if hasattr(algorithm, "keys") else ())]
    unknown = [key for key in keys if key.startswith("advest_") and key not in OPTIONS]
    if unknown:
        raise ValueError(
            f"algorithm.{unknown[0]} is not an advest setting; advest reads {', '.join(OPTIONS)}"
        )
    if not name.startswith("advest_"):
        _no_shaping_for_verls_own(algorithm, name)
        return
    own = name.removeprefix("advest_")
    if own not in registry.names():
        raise ValueError(
            f"algorithm.adv_estimator={name}: advest has no estimator {own!r} (`advest list` "
            "names them)"
        )
    try:
        advantage = _ADAPTERS.get(own) or adapter(own)
    except ValueError as error:
        raise ValueError(f"algorithm.adv_estimator={name}: {error}") from None
    shaping_setting(own, algorithm)  # refused naming its key, before the dry run
    rollout = peers.setting(peers.setting(config, "actor_rollout_ref", None), "rollout", None)
    G = int(peers.setting(rollout, "n", 1))
    B = max(1, int(peers.setting(peers.setting(config, "data", None), "train_batch_size", 1)))
    # [B·G, 1]: 0/1 rewards that vary inside every group, as `advest train`'s own dry run
    rewards = (torch.arange(G).repeat(B) % 2).to(torch.float32).reshape(B * G, 1)
    index = np.repeat(np.arange(B), G)  # verl's uids: the G samples of a prompt share one
    try:
        advantage(rewards, torch.ones_like(rewards), index, config=algorithm)
    except (ValueError, TypeError) as error:
        settings = f"actor_rollout_ref.rollout.n={G}"
        if "k" in registry.entry(own).inputs:
            settings += f", algorithm.advest_k={peers.setting(algorithm, 'advest_k', None)}"
        if peers.setting(algorithm, "advest_shaping"):
            settings += f", {SHAPING_KEYS[0]}={peers.setting(algorithm, 'advest_shaping')}"
        raise ValueError(f"algorithm.adv_estimator={name} ({settings}): {error}") from None


def _no_shaping_for_verls_own(algorithm: Any, name: str) -> None:
    """A shaping set for verl's own estimator ``name`` would be silently ignored: refused."""
    if peers.setting(algorithm, "advest_shaping") or peers.setting(
        algorithm, "advest_shaping_options"
    ):
        raise ValueError(
            f"{SHAPING_KEYS[0]} shapes the rewards of advest's estimators; "
            f"algorithm.adv_estimator={name} is verl's own, which never reads it. Use an "
            "advest_* estimator, or leave the shaping unset"
        )


def _gdpo_keys(
    config: Any, norm_adv_by_std_in_grpo: bool, non_tensor_batch: dict[str, Any] | None
) -> list[str]:
    """The reward keys of verl's GDPO config, refused where verl would fall back silently."""
    keys = peers.setting(config, "gdpo_reward_keys", None)
    if not keys or non_tensor_batch is None:
        raise ValueError(
            "advest's gdpo reads each reward's own score: set algorithm.gdpo_reward_keys to the "
            "keys your reward function returns and pass non_tensor_batch (verl's own gdpo would "
            "fall back to the summed reward, which is GDPO of one reward)"
        )
    if not norm_adv_by_std_in_grpo or not peers.setting(config, "norm_adv_by_std_in_grpo", True):
        raise ValueError(
            "algorithm.norm_adv_by_std_in_grpo=False has no meaning for advest's gdpo: the group "
            "std of each reward is GDPO's normalisation"
        )
    missing = [k for k in keys if k not in non_tensor_batch]
    if missing:
        raise ValueError(f"gdpo reward keys {missing} are not in non_tensor_batch")
    return list(keys)


def gdpo(
    token_level_rewards: Tensor,
    response_mask: Tensor,
    index: Sequence[Any] | np.ndarray,
    epsilon: float = 1e-6,
    norm_adv_by_std_in_grpo: bool = True,
    config: Any = None,
    non_tensor_batch: dict[str, Any] | None = None,
    batch: Any = None,
    **kwargs: Any,
) -> tuple[Tensor, Tensor]:
    """advest's ``gdpo`` with ``convention="verl-0.9.1"``, called as verl 0.9.1 calls its
    ``compute_gdpo_outcome_advantage``: each reward's score is ``non_tensor_batch[key]`` for the
    keys ``config.gdpo_reward_keys``, the weights are ``config.gdpo_reward_weights`` (default all
    1), the samples of a prompt share a uid in ``index``, and the sum is whitened over the tokens
    of ``response_mask [bs, T]``. Returns (advantages, returns), both ``[bs, T]``.

    Refused with a ``ValueError`` where verl would fall back silently or advest has no
    convention: no reward keys or no ``non_tensor_batch`` (verl would then normalise the summed
    reward alone), ``norm_adv_by_std_in_grpo=False``, prompts with different numbers of
    samples. ``batch`` (verl's prompts and attention mask, used to place each score on the last
    valid token) is not needed: the score is the sample's."""
    keys = _gdpo_keys(config, norm_adv_by_std_in_grpo, non_tensor_batch)
    assert non_tensor_batch is not None  # _gdpo_keys refuses a batch without it
    weights = peers.setting(config, "gdpo_reward_weights", None)
    device = token_level_rewards.device
    scores = torch.stack(
        [torch.as_tensor(np.asarray(non_tensor_batch[k], dtype=np.float64)) for k in keys], -1
    ).to(device)  # [bs, R]
    lengths = response_mask.sum(dim=-1)  # [bs]
    (order, uids), *others = groups(index)  # [B, G]
    if others:
        sizes = sorted({order.shape[1], *(o.shape[1] for o, _ in others)})
        raise ValueError(f"advest's gdpo needs every prompt to have as many samples; got {sizes}")
    estimator = calling.plan("gdpo", options={"convention": "verl-0.9.1", "eps": epsilon})
    source = {
        "reward_parts": scores[order],  # [B, G, R]
        "reward_weights": None if weights is None else [float(w) for w in weights],
        "lengths": lengths[order],  # [B, G]
    }
    try:
        adv = estimator.per_sample(source)  # [B, G]
    except (ValueError, TypeError) as error:
        raise located(error, order, uids, "verl batch", "uid") from None
    per_sample = token_level_rewards.new_zeros(token_level_rewards.shape[0])
    per_sample[order.reshape(-1)] = adv.reshape(-1).to(per_sample.dtype)
    out = per_sample.unsqueeze(-1) * response_mask  # [bs, T]
    return out, out
