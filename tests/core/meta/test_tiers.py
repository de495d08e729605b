"""The test command's tiers (noxfile.py): one nox session per pytest marker, ``core`` for the
unmarked rest, so that every test runs in exactly one session and ``nox`` with no arguments
runs them all."""

from __future__ import annotations

import inspect
import re
import tomllib
from pathlib import Path

import nox
import pytest

import noxfile
from tests.venvs import SIDE, Venv

ROOT = Path(__file__).parents[3]


def _markers() -> set[str]:
    ini = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    return {line.split(":", 1)[0] for line in ini["markers"]}


def test_each_marker_is_a_session_and_each_session_beyond_core_and_lint_a_marker() -> None:
    sessions = set(nox.registry.get())
    assert set(noxfile.TIERS) == _markers()
    assert sessions == {"lint", "core", *noxfile.TIERS}


def test_nox_with_no_arguments_runs_every_session() -> None:
    assert nox.options.sessions is None and nox.options.keywords is None
    assert nox.options.tags is None
    assert all(func.default for func in nox.registry.get().values())


def test_core_deselects_every_tier() -> None:
    """A missing coqc, docs tool or side environment must not fail ``core``."""
    source = inspect.getsource(noxfile.core)
    assert "not ({' or '.join(TIERS)})" in source


def test_the_lint_session_runs_every_gate() -> None:
    source = inspect.getsource(noxfile.lint)
    gates = ('"ruff", "check"', '"ruff", "format", "--check"', '"mypy"', '"lint-imports"')
    for gate in (*gates, '"scripts/bounds.py"'):
        assert gate in source, gate


TESTS = ROOT / "tests"
FOLDERS = {"core", *noxfile.TIERS}
"""A test file's first folder under tests/ is its tier: ``core`` or a session's marker."""


def _test_files() -> list[Path]:
    return sorted(p for p in TESTS.rglob("test_*.py") if "user_project" not in p.parts)


def test_every_test_file_stands_in_a_tier_folder() -> None:
    for path in _test_files():
        parts = path.relative_to(TESTS).parts
        assert len(parts) > 1 and parts[0] in FOLDERS, path


def test_no_file_marks_a_tier_itself() -> None:
    """The folder is the one source of truth: a slow marker written in a file under tests/core/
    would take it out of core while it stands there."""
    spelled = re.compile(r"pytest\.mark\.(" + "|".join(noxfile.TIERS) + r")\b")
    assert spelled.search("@pytest.mark." + "slow\n")  # the pattern finds what it looks for
    for path in _test_files():
        assert not spelled.search(path.read_text()), path


@pytest.mark.parametrize("venv", SIDE, ids=[venv.session for venv in SIDE])
def test_each_side_environment_is_built_by_its_session_and_its_tests_stand_in_its_folder(
    venv: Venv,
) -> None:
    assert venv.session in nox.registry.get()
    assert venv.build == f"nox -s {venv.session}"
    for file in venv.tests:
        assert Path(file).parts[:2] == ("tests", venv.session), file
