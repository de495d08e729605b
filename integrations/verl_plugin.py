"""verl's ``verl.plugins`` entry point: importing this module registers advest's estimators
(``advest_<name>``) in verl's registry, and has verl's config check also check advest's settings.

verl 0.9 loads every ``verl.plugins`` entry point at ``import verl``, in every process that
imports it: the driver, the ``TaskRunner`` Ray actor that calls ``compute_advantage``, and the
workers. Registering from the driver alone is not enough, because the actors are fresh
interpreters. verl swallows a plugin's exception at debug level, so a failure here is logged as
a warning instead: a run that names ``advest_*`` then fails with verl's "Unknown advantage
estimator" and this warning above it. With ``ADVEST_VERL_VERBOSE=1`` each process that
registers says so in one line (Ray prefixes it with the actor's name).

verl offers a plug-in no hook when the config is read, and calls an estimator only at the first
training step, after the model, the workers and the rollout engine have started. So the plug-in
wraps ``verl.utils.config.validate_config``, which ``main_ppo`` calls on the driver before Ray
starts (its ``from verl.utils.config import validate_config`` runs after ``import verl``, so it
binds the wrapped function): advest's settings are then refused with verl's own config errors.
"""

from __future__ import annotations

import functools
import logging
import os
from typing import Any


def _check_when_the_config_is_read() -> None:
    import verl.utils.config as verl_config

    original = verl_config.validate_config
    if getattr(original, "advest", False):  # this process already wrapped it
        return

    @functools.wraps(original)
    def validate_config(config: Any, *args: Any, **kwargs: Any) -> Any:
        check_config(config)
        return original(config, *args, **kwargs)

    validate_config.advest = True  # type: ignore[attr-defined]
    verl_config.validate_config = validate_config


try:
    from .verl import _ADAPTERS, check_config, register

    register()
    _check_when_the_config_is_read()
    if os.environ.get("ADVEST_VERL_VERBOSE"):  # a line per process, to see where it ran
        n, pid = len(_ADAPTERS), os.getpid()
        print(f"advest: {n} estimators registered in verl (pid {pid})", flush=True)
except Exception as error:  # verl would hide it: say it where the user looks
    logging.getLogger("advest").warning(
        "advest's verl plugin could not register its estimators: %s: %s",
        type(error).__name__,
        error,
    )
