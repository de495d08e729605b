"""``advest bench estimators`` prints a general, a binary and a few-valued column for every
outcome estimator, with ratios to grpo and to a plain mean/std (numbers are never asserted)."""

from __future__ import annotations

import pytest

from advest.experiments.cost import bench


def test_bench_prints_every_estimator_on_general_binary_and_few_valued_input(
    capsys: pytest.CaptureFixture[str],
) -> None:
    times = bench.run(repeats=1, device="cpu", shapes=[(3, 8)])
    out = capsys.readouterr().out
    assert any(line.split() == list(bench.INPUTS) for line in out.splitlines())
    for name in [bench.PLAIN, *bench.outcome_names(), bench.DENSE, bench.LOOP]:
        assert any(line.startswith(name) for line in out.splitlines()), name
    assert set(times[(3, 8)]) == set(bench.INPUTS)
    for kind in bench.INPUTS:
        assert set(bench.outcome_names()) <= set(times[(3, 8)][kind])
        assert all(t > 0 for t in times[(3, 8)][kind].values())
    assert "binary: slowest max@K estimator" in out
