"""advest: verified advantage estimators for reinforcement learning of large language models.

Every estimator is implemented twice: exactly in :mod:`advest.reference` (Fractions, subset
enumeration) and batched in :mod:`advest.fast` (torch, CPU and GPU). The entry points below reach
the fast versions by name; importing :mod:`advest` loads neither the exact references nor the
test catalogue.

>>> import torch, advest
>>> rewards = torch.tensor([[0.0, 1.0, 1.0, 1.0]], dtype=torch.float64)  # [B=1, G=4]
>>> advest.get("rloo")(rewards).tolist()  # r_i minus the mean of the other three
[[-1.0, 0.3333333333333333, 0.3333333333333333, 0.3333333333333333]]
>>> advest.entry("maxpo").family, "maxpo" in advest.names()
('maxk', True)
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from . import _moved
from .fast.registry import Entry, entry, get, names

_moved.install()  # the modules 0.2.0 shipped under other names import, with a warning

try:
    __version__ = version("advest")
except PackageNotFoundError:  # a source tree on sys.path without an install
    __version__ = "0.0.0+unknown"

__all__ = ["Entry", "__version__", "entry", "get", "names"]
