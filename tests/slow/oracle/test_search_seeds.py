"""The slow tier of tests/core/oracle/test_search.py: its tests that take tens of seconds each
(the core session stays within its few minutes)."""

from __future__ import annotations

from tests.core.oracle import search_plants as plants
from tests.core.oracle.test_search import _rows


def test_the_same_budget_gives_the_same_findings_and_another_seed_may_differ() -> None:
    first = [f.__dict__ for f in _rows(plants.flat_mean_multiplied)]
    again = [f.__dict__ for f in _rows(plants.flat_mean_multiplied)]
    assert first == again
