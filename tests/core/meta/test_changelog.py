"""The CHANGELOG: its Unreleased section names paths that exist (a file that moved is cited where
it is now), and its Deprecated entries name the version that removes them."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

GONE = {"spec/checks.py", "spec/oracle.py", "docs/real_passk.png", "docs/results/real.json"}
"""Paths the Unreleased section names as what was moved or removed."""


def _unreleased() -> str:
    text = (ROOT / "CHANGELOG.md").read_text()
    return text.split("## [Unreleased]", 1)[1].split("\n## [", 1)[0]


def paths(section: str) -> set[str]:
    """The repository paths a section quotes: ``dir/file.ext`` or ``dir/``."""
    return set(re.findall(r"`((?:[\w.-]+/)+(?:[\w.-]+\.\w+)?)`", section))


def stale(section: str) -> list[str]:
    return sorted(p for p in paths(section) - GONE if not (ROOT / p).exists())


def test_every_path_in_the_unreleased_section_exists() -> None:
    assert len(paths(_unreleased())) > 20
    assert stale(_unreleased()) == []
    assert paths(_unreleased()) >= GONE, "a path no longer named there leaves GONE"


def test_a_planted_stale_path_is_found() -> None:
    assert stale("- moved to `tests/test_gone.py` and `fast/`; `x.py` alone") == [
        "tests/test_gone.py"
    ]


def test_each_deprecation_names_the_version_that_removes_it() -> None:
    section = _unreleased().split("### Deprecated\n", 1)[1].split("\n### ", 1)[0]
    assert re.search(r"removed in \d+\.\d+\.\d+", section)
