"""The second environments some integration tests run in, one record each: a peer that pins
its own dependencies (verl's transformers) or a second version of one (the oldest TRL) gets a
venv of its own, which the nox session of the same name builds (``noxfile.py``: torch first,
then the extra of the same name) and then runs the record's test files with its interpreter
named in ``variable``. A test that needs one fails, with the command that builds it, when it is
missing: nothing is skipped, and only that session's tests need it (``nox -s core`` deselects
them by their marker, which is the session's name)."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Venv:
    session: str
    """The nox session that builds it and runs its tests; also the tests' pytest marker."""
    extra: str
    """The pyproject extra it installs (``pip install -e ".[extra]"``)."""
    variable: str
    """The environment variable naming its interpreter (the nox session sets it)."""
    tests: tuple[str, ...]
    """The test files that run in it (each marks itself with ``session``)."""
    python: str | None = None
    """The Python version it needs, where the peer needs another than the main environment's."""

    @property
    def build(self) -> str:
        """The command that builds it and runs its tests."""
        return f"nox -s {self.session}"

    @property
    def folder(self) -> Path:
        """Where nox builds it: ``.nox/<session>`` (ignored by git)."""
        return ROOT / ".nox" / self.session

    def python_path(self) -> Path:
        """Its interpreter; fails the test, with the build command, when it is missing."""
        python = Path(os.environ.get(self.variable, self.folder / "bin" / "python"))
        assert python.exists(), f"no {self.extra} environment at {python}; build it: {self.build}"
        return python

    def run(self, args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
        """``python args`` in the repository root, importing this checkout's advest."""
        return subprocess.run(
            [str(self.python_path()), *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )

    def pytest(
        self, files: list[str], timeout: float, quiet_warnings: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """Run test files there and return the run; the calling test asserts that it passed
        with nothing skipped. ``quiet_warnings`` turns pytest's warnings plugin off: verl and
        SkyRL warn on import (ray's deprecated state API, optional engines), which is not
        advest's; a file that marks tests with ``filterwarnings`` needs the plugin
        (tests/core/training/test_trl.py)."""
        flags = ["-p", "no:warnings"] if quiet_warnings else []
        run = self.run(["-m", "pytest", "-q", *flags, "-p", "no:cacheprovider", *files], timeout)
        print(run.stdout[-300:], file=sys.stderr)
        return run


VERL = Venv("verl", "verl", "ADVEST_VERL_PYTHON", ("tests/verl/test_verl.py",))
TRL_OLDEST = Venv(
    "trl_oldest",
    "trl-oldest",
    "ADVEST_TRL_OLDEST_PYTHON",
    ("tests/trl_oldest/test_trl_versions.py",),
)
SKYRL = Venv("skyrl", "skyrl", "ADVEST_SKYRL_PYTHON", ("tests/skyrl/test_skyrl.py",), python="3.12")
SIDE = (VERL, TRL_OLDEST, SKYRL)
