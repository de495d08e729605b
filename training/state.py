"""What a checkpoint carries beyond Lightning's own state: the rollout position, the counts of
skipped steps and reward failures, the estimator's state (KAE's history: under DDP the same on
every rank, updated from every rank's groups, so rank 0's is the whole) and every random
stream, so that a resumed run draws what the uninterrupted one drew; and how a resume's
``--lr`` replaces the checkpoint's."""

from __future__ import annotations

from typing import Any

import torch

from . import scale


def save(module: Any, checkpoint: dict[str, Any]) -> None:
    """The run's own state into Lightning's checkpoint dict (``checkpoint["advest"]``)."""
    import random

    import numpy as np

    checkpoint["advest"] = {
        "rollout_step": module.rollout_step,
        "bad_steps": module.bad_steps,
        "skipped_total": module.skipped_total,
        "reward_failures": dict(module.scorer.failures),
        "estimator": module.plan.instance.state_dict()
        if hasattr(module.plan.instance, "state_dict")
        else None,
        "rng": {
            "torch": torch.get_rng_state(),
            "python": random.getstate(),
            # plain types, so that torch.load(weights_only=True) can read it back
            "numpy": [
                v.tolist() if isinstance(v, np.ndarray) else v for v in np.random.get_state()
            ],
        },
    }
    scale.trim_checkpoint(module, checkpoint)


def apply_lr(checkpoint: dict[str, Any], lr: float) -> None:
    """A resume's --lr replaces the checkpoint's (the optimiser and scheduler states are
    restored from this dict after this hook), keeping the warm-up factor reached. Left alone
    when unchanged, so that a resume stays bit-identical to the uninterrupted run."""
    for opt in checkpoint.get("optimizer_states", []):
        for group in opt["param_groups"]:
            if group.get("initial_lr", lr) != lr:
                group["lr"] = lr * group["lr"] / group["initial_lr"]
                group["initial_lr"] = lr
    for sched in checkpoint.get("lr_schedulers", []):
        if "base_lrs" in sched:
            sched["base_lrs"] = [lr] * len(sched["base_lrs"])


def load(module: Any, checkpoint: dict[str, Any]) -> None:
    """``save``'s state back into ``module``, the settings checked and a new --lr applied."""
    import random

    import numpy as np

    scale.check_loaded(module, checkpoint)
    apply_lr(checkpoint, module.cfg.lr)
    state = checkpoint["advest"]
    module.rollout_step = int(state["rollout_step"])
    module.bad_steps = int(state["bad_steps"])
    module.skipped_total = int(state["skipped_total"])
    module.scorer.failures.update(state["reward_failures"])
    if state["estimator"] is not None:
        module.plan.instance.load_state_dict(state["estimator"])
    torch.set_rng_state(state["rng"]["torch"])
    random.setstate(state["rng"]["python"])
    kind, keys, pos, has_gauss, gauss = state["rng"]["numpy"]
    np.random.set_state((kind, np.array(keys, dtype=np.uint32), pos, has_gauss, gauss))
