"""Fast batched torch estimators: same names and semantics as ``reference/``, for CPU and GPU."""

from . import group, maxk, registry
from .admission import signal
from .flat import by_group

__all__ = ["by_group", "group", "maxk", "registry", "signal"]
