"""verl's ``verl.plugins`` entry point: importing this module registers advest's estimators
(``advest_<name>``) in verl's registry.

verl 0.9 loads every ``verl.plugins`` entry point at ``import verl``, in every process that
imports it: the driver, the ``TaskRunner`` Ray actor that calls ``compute_advantage``, and the
workers. Registering from the driver alone is not enough, because the actors are fresh
interpreters. verl swallows a plugin's exception at debug level, so a failure here is logged as
a warning instead: a run that names ``advest_*`` then fails with verl's "Unknown advantage
estimator" and this warning above it. With ``ADVEST_VERL_VERBOSE=1`` each process that
registers says so in one line (Ray prefixes it with the actor's name).
"""

from __future__ import annotations

import logging
import os

try:
    from .verl import _ADAPTERS, register

    register()
    if os.environ.get("ADVEST_VERL_VERBOSE"):  # a line per process, to see where it ran
        n, pid = len(_ADAPTERS), os.getpid()
        print(f"advest: {n} estimators registered in verl (pid {pid})", flush=True)
except Exception as error:  # verl would hide it: say it where the user looks
    logging.getLogger("advest").warning(
        "advest's verl plugin could not register its estimators: %s: %s",
        type(error).__name__,
        error,
    )
