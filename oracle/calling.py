"""Deprecated alias of ``advest.oracle.conventions.harness`` (renamed: ``advest.fast.calling``
is how a trainer calls a registered estimator; this module was how the oracle calls a user's
callable).
Every name still resolves here, with a ``DeprecationWarning``, until the next release."""

from __future__ import annotations

import warnings
from typing import Any

from .conventions import harness


def __getattr__(name: str) -> Any:
    value = getattr(harness, name)  # AttributeError for a name that never existed
    warnings.warn(
        f"advest.oracle.calling.{name} is deprecated: import it from "
        "advest.oracle.conventions.harness",
        DeprecationWarning,
        stacklevel=2,
    )
    return value
