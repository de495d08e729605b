"""Every registered estimator on one batch sharded over 3 gloo processes equals one process
holding the batch (tests/core/estimators/test_ranks.py runs 2; tests/ranks_batch.py)."""

from __future__ import annotations

from typing import Any

import pytest

from advest.fast import registry
from tests import ranks_batch


@pytest.fixture(scope="module")
def ranks(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    return ranks_batch.launch(3, tmp_path_factory.mktemp("world3"))


@pytest.mark.parametrize("name", registry.names())
def test_advantages_on_three_ranks_equal_one_process_holding_the_batch(
    name: str, ranks: list[dict[str, Any]]
) -> None:
    expected = ranks_batch.one_process(registry.entry(name))
    plain = [rank["plain"] for rank in ranks]
    assert ranks_batch.problems(name, 3, plain, expected) == []
