"""The slow tier of tests/core/experiments/test_bench_sort.py: the whole command, whose two
allocator modes run in child processes of their own."""

from __future__ import annotations

import pytest

from advest.experiments.cost import bench_sort


def test_the_command_runs_both_allocator_modes_side_by_side(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["--shape", "4", "16", "--k", "2", "--min-rounds", "1", "--max-rounds", "2"]
    assert bench_sort.main([*argv, "--threads", "1"]) == 0
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if line.startswith("general rewards"))
    assert header.split()[2:] == ["default", "retain"]
    for name in bench_sort.general_forms():
        assert any(line.startswith(name + " ") for line in out.splitlines()), name
    with pytest.raises(ValueError, match="modes must be among"):
        bench_sort.run((4, 16), 2, ("jemalloc",))
