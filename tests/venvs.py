"""The second environments some integration tests run in, one record each: a peer that pins
its own dependencies (verl's transformers) or a second version of one (the oldest TRL) gets a
venv of its own, built by the README's test command with the extra of the same name. A test that
needs one fails, with the command that builds it, when it is missing: nothing is skipped."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Venv:
    folder: str
    """The venv's folder in the repository root (ignored by git)."""
    extra: str
    """The pyproject extra it installs (``pip install -e ".[extra]"``)."""
    variable: str
    """An environment variable naming another interpreter to use instead."""
    pyenv: str | None = None
    """The pyenv Python that builds it, where the peer needs another Python than 3.11."""

    @property
    def build(self) -> str:
        """The README's commands that build it (torch first: the CPU build)."""
        pip = f"{self.folder}/bin/pip"
        # python3.12 (pyenv's shim), not python: a 3.11 venv on PATH would shadow `python`
        minor = ".".join(self.pyenv.split(".")[:2]) if self.pyenv else ""
        python = f"PYENV_VERSION={self.pyenv} python{minor}" if self.pyenv else "python"
        return (
            f"{python} -m venv {self.folder} && {pip} install torch==2.13.0 && "
            f'{pip} install -e ".[{self.extra}]"'
        )

    def python(self) -> Path:
        """Its interpreter; fails the test, with the build command, when it is missing."""
        python = Path(os.environ.get(self.variable, ROOT / self.folder / "bin" / "python"))
        assert python.exists(), f"no {self.extra} environment at {python}; build it: {self.build}"
        return python

    def run(self, args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
        """``python args`` in the repository root, importing this checkout's advest."""
        return subprocess.run(
            [str(self.python()), *args],
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
        (tests/test_trl.py)."""
        flags = ["-p", "no:warnings"] if quiet_warnings else []
        run = self.run(["-m", "pytest", "-q", *flags, "-p", "no:cacheprovider", *files], timeout)
        print(run.stdout[-300:], file=sys.stderr)
        return run


VERL = Venv(".venv-verl", "verl", "ADVEST_VERL_PYTHON")
TRL_OLDEST = Venv(".venv-trl-oldest", "trl-oldest", "ADVEST_TRL_OLDEST_PYTHON")
SKYRL = Venv(".venv-skyrl", "skyrl", "ADVEST_SKYRL_PYTHON", pyenv="3.12.1")
