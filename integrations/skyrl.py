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
pickled by reference to this module, which carries its name and the K given to ``register``.

Registered: every stateless advest estimator whose inputs SkyRL passes (rewards, response
lengths, K), as ``advest_<name>``. The rest, with the reason, are ``register()``'s return value.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from torch import Tensor

from advest.fast import calling, registry

from . import peers


def skipped() -> dict[str, str]:
    """advest's estimators that SkyRL cannot run, each with the reason (the one rule of
    ``integrations.peers``)."""
    return peers.SKYRL.cannot_run()


@dataclass(frozen=True)
class Estimator:
    """advest's ``name`` in SkyRL's advantage-estimator convention; ``k`` is the K of a max@K
    estimator unless the algorithm config passed at call time has an ``advest_k``."""

    name: str
    k: int | None = None

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
        out = peers.per_token(estimator, token_level_rewards, response_mask, index, "SkyRL")
        return out, out

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


def register(k: int | None = None) -> dict[str, str]:
    """Add advest's estimators to SkyRL's ``AdvantageEstimatorRegistry`` as ``advest_<name>``.

    Call it in the driver before SkyRL's ``initialize_ray`` (whose ``sync_registries`` hands
    them to every Ray worker) and before ``validate_cfg`` (which checks the configured name).
    ``k`` is the K of the max@K estimators (a config field ``advest_k`` overrides it at call
    time). Idempotent: a name already registered with the same ``Estimator`` is left alone; one
    registered with another K is replaced. Returns the estimators not registered, each with the
    reason."""
    from skyrl.backends.skyrl_train.utils.ppo_utils import AdvantageEstimatorRegistry

    not_registered = skipped()
    present = set(AdvantageEstimatorRegistry.list_available())
    for name in registry.names():
        if name in not_registered:
            continue
        k_ = int(k) if k is not None and "k" in registry.entry(name).inputs else None
        estimator, key = Estimator(name, k_), f"advest_{name}"
        if key in present:
            if AdvantageEstimatorRegistry.get(key) == estimator:
                continue
            AdvantageEstimatorRegistry.unregister(key)
        AdvantageEstimatorRegistry.register(key, estimator)
    return not_registered
