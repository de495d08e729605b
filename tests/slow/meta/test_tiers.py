"""The slow tier of tests/core/meta/test_tiers.py: its tests that take tens of seconds each
(the core session stays within its few minutes)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.core.meta.test_tiers import TESTS


def test_a_files_folder_gives_its_tests_the_tier_marker(tmp_path: Path) -> None:
    """Planted: one test in tests/core/, one in tests/slow/, under this conftest: ``-m slow``
    selects the second only, ``-m "not slow"`` the first only."""
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    slow: slow\n")
    # tests/ with its helper modules (the conftest imports some), without any test folder
    shutil.copytree(TESTS, tmp_path / "tests", ignore=lambda d, names: [
        n for n in names if (Path(d) / n).is_dir() or not n.endswith(".py")
    ])  # fmt: skip
    for tier in ("core", "slow"):
        folder = tmp_path / "tests" / tier
        folder.mkdir(exist_ok=True)
        (folder / "__init__.py").write_text("")
        (folder / f"test_{tier}_one.py").write_text("def test_it() -> None:\n    pass\n")

    def run(marker: str) -> str:
        argv = [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "-m", marker]
        done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout[-2000:]
        return done.stdout

    # two pytest runs (each imports the conftest's torch: ~10 s); -v names the tests that ran
    slow, core = run("slow"), run("not slow")
    assert "1 passed, 1 deselected" in slow and "1 passed, 1 deselected" in core
    assert "test_slow_one.py::test_it PASSED" in slow and "test_core_one.py" not in slow
    assert "test_core_one.py::test_it PASSED" in core and "test_slow_one.py" not in core
