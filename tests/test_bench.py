"""``advest bench estimators`` prints a general, a binary and a few-valued column for every
outcome estimator, with ratios to grpo and to a plain mean/std (numbers are never asserted)."""

from __future__ import annotations

import pytest

from advest.oracle import bench


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


@pytest.mark.slow  # a benchmark run in a child process: tens of seconds on 2 cores
def test_the_retain_allocator_mode_runs_and_is_reported() -> None:
    """``--malloc retain`` is process-wide, so it runs in a child process here."""
    import subprocess
    import sys

    code = (
        "from advest.oracle import bench; "
        "bench.run(repeats=1, device='cpu', shapes=[(3, 8)], malloc='retain')"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "malloc=retain" in done.stdout.splitlines()[0]
    with pytest.raises(ValueError, match="malloc must be one of"):
        bench.run(repeats=1, device="cpu", shapes=[(3, 8)], malloc="jemalloc")
