"""advest's pytest plugin, registered through the ``pytest11`` entry point: the fixture
``advest_oracle`` is ``assert_estimator``, so a test reads
``advest_oracle(my_grpo, expect={"centred": "yes"})`` with no import."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from .testing import assert_estimator


@pytest.fixture
def advest_oracle() -> Callable[..., Any]:
    """``advest.testing.assert_estimator``: run the oracle on an estimator, fail on a verdict
    that differs from ``expect``."""
    return assert_estimator
