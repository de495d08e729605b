"""Fast batched torch estimators: same names and semantics as ``reference/``, for CPU and GPU."""

from . import group, maxk, registry

__all__ = ["group", "maxk", "registry"]
