"""The slow tier of tests/core/experiments/test_bench.py: the tests of that file that run in
`nox -s slow` (its folder gives them the marker)."""

from __future__ import annotations

import pytest

from advest.experiments.cost import bench


def test_the_retain_allocator_mode_runs_and_is_reported() -> None:
    """``--malloc retain`` is process-wide, so it runs in a child process here."""
    import subprocess
    import sys

    code = (
        "from advest.experiments.cost import bench; "
        "bench.run(repeats=1, device='cpu', shapes=[(3, 8)], malloc='retain')"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "malloc=retain" in done.stdout.splitlines()[0]
    with pytest.raises(ValueError, match="malloc must be one of"):
        bench.run(repeats=1, device="cpu", shapes=[(3, 8)], malloc="jemalloc")
