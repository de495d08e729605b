"""advest inside SkyRL's trainer (tested against ``skyrl`` 0.4.0, the package that now holds
skyrl-train as ``skyrl.backends.skyrl_train`` and ``skyrl.train``).

SkyRL's advantage-estimator convention (``skyrl/backends/skyrl_train/utils/ppo_utils.py``)::

    fn(token_level_rewards [bs, T], response_mask [bs, T], index [bs] (uids), values,
       grpo_norm_by_std, gamma, lambd, config=AlgorithmConfig) -> (advantages [bs, T],
       returns [bs, T])

all passed by keyword from ``compute_advantages_and_returns``, with the outcome reward at the
last valid token and the samples of one prompt sharing a uid in ``index``, in any order.

SkyRL's ``AdvantageEstimatorRegistry`` lives in each process; ``sync_registries()`` (which
SkyRL's ``initialize_ray`` calls right after ``ray.init``) pickles every function registered in
the driver into a named Ray actor, and a worker's ``AdvantageEstimatorRegistry.get(name)``
unpickles what it lacks. So ``register()`` must run in the driver before ``initialize_ray``;
the workers then import this module when they unpickle an estimator, and need advest installed
but no code of the user's. Each registered estimator is an ``Estimator``, a frozen dataclass
pickled by reference to this module, which carries its name and the K and reward shaping given
to ``register``.

Registered: every stateless advest estimator whose inputs SkyRL passes (rewards, response
lengths, K), as ``advest_<name>``. The rest, with the reason, are ``register()``'s return value.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from torch import Tensor

from advest.fast import calling, registry
from advest.fast.shaping import Transform

from . import peers


def skipped() -> dict[str, str]:
    """advest's estimators that SkyRL cannot run, each with the reason (the one rule of
    ``integrations.peers``)."""
    return peers.SKYRL.cannot_run()


@dataclass(frozen=True)
class Estimator:
    """advest's ``name`` in SkyRL's advantage-estimator convention; ``k`` is the K of a max@K
    estimator unless the algorithm config passed at call time has an ``advest_k``; ``shaping``
    (a ``fast.shaping`` name) and ``shaping_options`` (its options, as sorted items: hashable
    and picklable) shape the rewards before the estimator, unless the config has an
    ``advest_shaping`` (``advest_shaping_options``)."""

    name: str
    k: int | None = None
    shaping: str | None = None
    shaping_options: tuple[tuple[str, float], ...] = ()

    # SkyRL passes values, gamma, lambd and any later additions to every estimator by keyword:
    # accepting **kwargs is SkyRL's own convention.
    def __call__(
        self,
        token_level_rewards: Tensor,
        response_mask: Tensor,
        index: Sequence[Any] | np.ndarray,
        grpo_norm_by_std: bool = True,
        config: Any = None,
        **kwargs: Any,
    ) -> tuple[Tensor, Tensor]:
        """(advantages, returns), both ``[bs, T]``: one advantage per response, on its valid
        tokens (zero on padding), the same tensor twice as in SkyRL's outcome estimators."""
        estimator = calling.plan(self._with_std(grpo_norm_by_std), k=self._k(config))
        batch = (token_level_rewards, response_mask, index)
        out = peers.per_token(estimator, *batch, "SkyRL", shaping=self._shaping(config))
        return out, out

    def _shaping(self, config: Any) -> Transform | None:
        """The config's ``advest_shaping`` (``advest_shaping_options``) where it has one, else
        ``register``'s; refused naming where it was set."""
        chosen = peers.setting(config, "advest_shaping")
        options = peers.setting(config, "advest_shaping_options")
        keys = ("trainer.algorithm.advest_shaping", "trainer.algorithm.advest_shaping_options")
        if chosen is None and self.shaping is not None:
            chosen, keys = self.shaping, ("register(shaping=...)", keys[1])
        if options is None and self.shaping_options:
            options, keys = dict(self.shaping_options), (keys[0], "register(shaping_options=...)")
        return peers.shaped(chosen, options, keys, self.name)

    def _k(self, config: Any) -> int | None:
        how = (
            "call advest.integrations.skyrl.register(k=K) before initialize_ray, or give "
            "trainer.algorithm an advest_k field"
        )
        return peers.k_for(self.name, peers.setting(config, "advest_k"), self.k, how)

    def _with_std(self, grpo_norm_by_std: bool) -> str:
        """SkyRL's ``trainer.algorithm.grpo_norm_by_std`` where it has a meaning: with
        ``advest_grpo``, false is Dr. GRPO's r − group mean (``dr_grpo``), as in SkyRL's grpo.
        Every other estimator decides its own scale, so false is refused, not ignored."""
        option = f"trainer.algorithm.grpo_norm_by_std={str(bool(grpo_norm_by_std)).lower()}"
        return peers.with_std(self.name, bool(grpo_norm_by_std), option, f"advest_{self.name}")


def register(
    k: int | None = None,
    shaping: str | None = None,
    shaping_options: Mapping[str, float] | None = None,
) -> dict[str, str]:
    """Add advest's estimators to SkyRL's ``AdvantageEstimatorRegistry`` as ``advest_<name>``.

    Call it in the driver before SkyRL's ``initialize_ray`` (whose ``sync_registries`` hands
    them to every Ray worker) and before ``validate_cfg`` (which checks the configured name).
    ``k`` is the K of the max@K estimators (a config field ``advest_k`` overrides it at call
    time). ``shaping`` names a reward shaping (``fast.shaping``: gr3, overlong, length_penalty,
    efficiency) applied before every sequence-level estimator, with ``shaping_options`` (a
    config field ``advest_shaping``, ``advest_shaping_options``, overrides each); an unknown
    name or option is refused here, and an episode estimator refuses a shaping at its call.
    Idempotent: a name already registered with the same ``Estimator`` is left alone; one
    registered with another K or shaping is replaced. Returns the estimators not registered,
    each with the reason."""
    keys = ("register(shaping=...)", "register(shaping_options=...)")
    peers.shaped(shaping, shaping_options, keys)  # refused here, not in a Ray worker
    from skyrl.backends.skyrl_train.utils.ppo_utils import AdvantageEstimatorRegistry

    options = tuple(sorted((str(o), v) for o, v in (shaping_options or {}).items()))
    not_registered = skipped()
    present = set(AdvantageEstimatorRegistry.list_available())
    for name in registry.names():
        if name in not_registered:
            continue
        k_ = int(k) if k is not None and "k" in registry.entry(name).inputs else None
        estimator, key = Estimator(name, k_, shaping, options), f"advest_{name}"
        if key in present:
            if AdvantageEstimatorRegistry.get(key) == estimator:
                continue
            AdvantageEstimatorRegistry.unregister(key)
        AdvantageEstimatorRegistry.register(key, estimator)
    return not_registered
