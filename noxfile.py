"""The test command, in tiers: ``nox`` runs every session (the README's test command and CI's);
``nox -s core`` is the loop to run while working (a few minutes on 2 cores).

A test's tier is the folder it stands in: tests/core/ (no marker), tests/slow/, tests/coq/,
tests/docs/, and the side environments' tests/verl/, tests/skyrl/, tests/trl_oldest/.
tests/conftest.py gives each test its folder's marker, and each pytest session selects its tests
by the marker named as the session (``pytest -m coq``); ``core`` runs what no tier marks. So a
missing ``coqc``, documentation tool or side environment fails its own session and no other, and
every test runs in exactly one session (tests/core/meta/test_tiers.py checks the folders, the
markers and the sessions against each other, and that no file writes a tier marker itself).

The main-environment sessions run with ``venv_backend="none"``, in the environment the README's
install line builds (``pip install -e ".[test,docs,trl]"``): a nox venv per session would
install torch and the test tools five more times. The side environments are nox venvs, one
per peer (tests/venvs.py): verl pins its own transformers, the oldest TRL is a second version
of one, and SkyRL needs Python 3.12.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import nox

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))  # nox loads this file by path; tests/venvs.py holds the records

from tests.venvs import SIDE, Venv  # noqa: E402

# a session whose interpreter is missing (Python 3.12 for SkyRL) fails; nox would skip it
nox.options.error_on_missing_interpreters = True

MAIN_TIERS = ("coq", "docs", "slow")
"""The pytest markers of the main environment's sessions beyond ``core``."""
TIERS = MAIN_TIERS + tuple(venv.session for venv in SIDE)
"""Every marker that takes a test out of ``core``: one session each."""

# torch first, pinned: for the package's own requirement (torch>=2.4) pip would pick PyPI's
# newest, a CUDA build of several GB; this pin is the CPU build where one is reachable.
TORCH = "torch==2.13.0"


@nox.session(venv_backend="none")
def lint(session: nox.Session) -> None:
    """Lint, format, ``mypy --strict``, the import contract (pyproject.toml) and the size bounds
    (scripts/bounds.py: ruff has no rule on a module's or a function's length in lines)."""
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("mypy")
    session.run("lint-imports")
    session.run("python", "scripts/bounds.py")


@nox.session(venv_backend="none")
def core(session: nox.Session) -> None:
    """Everything no tier marks: the estimators, spec doctests, CLI, the fast training tests.

    In one worker per core (pytest-xdist): on 2 cores 2 min 16 s instead of 3 min 53 s, and a
    CI machine took over 5 minutes in one process."""
    session.run("pytest", "-n", "auto", "-m", f"not ({' or '.join(TIERS)})", *session.posargs)


def _marked(name: str, doc: str, workers: tuple[str, ...] = ()) -> None:
    """A main-environment session that runs the tests marked ``name`` (``workers``: pytest-xdist's
    flags, where the tier's tests are independent and each long)."""

    def run(session: nox.Session) -> None:
        session.run("pytest", *workers, "-m", name, *session.posargs)

    run.__doc__ = doc
    nox.session(venv_backend="none", name=name)(run)


# coq: each test compiles the development (about a minute) in its own copy; slow: each test is a
# run of its own. One worker per core takes each tier from about 5.5 and 7.5 minutes in one
# process towards half that on 2 cores (the whole of CI is to stay under 25 minutes).
_marked("coq", "The Coq proofs (coqc + MathComp from apt-get) and what runs them.", ("-n", "auto"))
_marked("docs", "The documentation site, built in strict mode.")
_marked("slow", "Real training runs, real-model tests, packaging builds.", ("-n", "auto"))


def _interpreter(version: str) -> str:
    """pyenv's build of ``version`` where pyenv has one (its ``python3.12`` shim answers only
    under ``PYENV_VERSION``, so nox would not find it), else the version for nox to find."""
    pyenv = shutil.which("pyenv")
    if pyenv:
        found = subprocess.run([pyenv, "prefix", version], capture_output=True, text=True)
        if found.returncode == 0:
            return str(Path(found.stdout.strip()) / "bin" / f"python{version}")
    return version


def _side(venv: Venv) -> None:
    """The session that builds ``venv`` and runs its test files with its interpreter."""

    def run(session: nox.Session) -> None:
        # In CI (``CI`` set) pip keeps no cache and the environment goes once its tests pass:
        # SkyRL's (a CUDA torch, 5.6 GB) came after verl's (2.1 GB) and the oldest TRL's
        # (1.6 GB) and once ran a CI disk out of space ("No space left on device").
        # PIP_NO_COMPILE: pip byte-compiles every installed file (torch's and ray's thousands);
        # the tests import a fraction of them, which Python compiles as it loads them
        ci = bool(os.environ.get("CI"))
        no_cache = {"PIP_NO_CACHE_DIR": "1", "PIP_NO_COMPILE": "1"} if ci else {}
        session.install(TORCH, env=no_cache)
        session.install("-e", f".[{venv.extra}]", env=no_cache)
        python = str(Path(session.bin) / "python")
        env = {venv.variable: python}
        session.run("python", "-m", "pytest", *venv.tests, *session.posargs, env=env)
        if ci:
            shutil.rmtree(session.virtualenv.location)

    run.__doc__ = f"advest inside its peer, in .nox/{venv.session} (the [{venv.extra}] extra)."
    python = _interpreter(venv.python) if venv.python else None
    # `python -m venv`, whose pip (ensurepip's: 23.2.1 with Python 3.11.7 and 3.12.1) resolves
    # verl's hydra-core 1.3 beside advest's math-verify[antlr4_13_2]; pip 26, which virtualenv
    # seeds, backtracks to hydra-core 0.11.3 and omegaconf 1.4.1, which verl cannot import.
    nox.session(python=python, name=venv.session, venv_backend="venv")(run)


for _venv in SIDE:
    _side(_venv)
