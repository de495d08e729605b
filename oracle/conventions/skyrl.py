"""SkyRL's estimators inside ``advest check`` (tested against SkyRL 0.4.0): ``skyrl:NAME`` is
SkyRL's registered estimator ``NAME`` reached as its trainer reaches it, through
``compute_advantages_and_returns`` (``skyrl/backends/skyrl_train/utils/ppo_utils.py``) with a
default ``AlgorithmConfig``, in SkyRL's convention (``--convention skyrl``). The other direction,
advest's estimators inside SkyRL, is ``advest.integrations.skyrl``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from torch import Tensor


def dispatched(name: str) -> Callable[..., Any]:
    """SkyRL's ``name`` through ``compute_advantages_and_returns``, with the keywords SkyRL's
    trainer passes (``grpo_norm_by_std``, ``gamma`` = 1, ``lambd``, ``values``)."""
    try:
        from skyrl.backends.skyrl_train.utils.ppo_utils import compute_advantages_and_returns
        from skyrl.train.config import AlgorithmConfig
    except ImportError as error:
        raise ImportError(
            f"skyrl:{name} needs SkyRL (pip install 'advest[skyrl]', Python >= 3.12): {error}"
        ) from None

    def through_compute_advantages_and_returns(
        token_level_rewards: Tensor,
        response_mask: Tensor,
        index: Any,
        values: Tensor,
        grpo_norm_by_std: bool,
        lambd: float,
    ) -> tuple[Tensor, Tensor]:
        out: tuple[Tensor, Tensor] = compute_advantages_and_returns(
            token_level_rewards=token_level_rewards,
            response_mask=response_mask,
            index=np.asarray(index, dtype=object),
            adv_estimator=name,
            config=AlgorithmConfig(),
            values=values,
            grpo_norm_by_std=grpo_norm_by_std,
            gamma=1.0,
            lambd=lambd,
        )
        return out

    through_compute_advantages_and_returns.__name__ = f"compute_advantages_and_returns[{name}]"
    return through_compute_advantages_and_returns
