"""advest is citable: LICENSE, CITATION.cff and the README's BibTeX agree with the package, and
the shipped documents point only at things a reader can follow."""

from __future__ import annotations

import datetime
import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).parents[3]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]

# Pointers into material that is not shipped: the internal copies of the papers ("seed 002",
# "seed `003_…`"), the internal notes ("shared/notes/…", "notes §3.2") and issue numbers.
POINTERS = re.compile(
    r"seeds? `?0\d|seed §|seed's|shared/(notes|seeds)|\bnotes §|notes'|\bissue #?\d",
    re.IGNORECASE,
)


def _shipped() -> list[Path]:
    files = [ROOT / "README.md", ROOT / "CHANGELOG.md", ROOT / "CITATION.cff", ROOT / "mkdocs.yml"]
    files += sorted((ROOT / "spec").glob("*.md"))
    # text only: the docs also hold generated plots (docs/*.png)
    files += sorted(f for f in (ROOT / "docs").rglob("*.*") if f.suffix != ".png")
    links = sorted(p.name for p in (ROOT / "advest").iterdir() if p.is_symlink())
    for package in ["advest", *links]:
        files += sorted((ROOT / package).rglob("*.py"))
    return files


def test_citation_cff_parses_and_its_version_is_the_packages() -> None:
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert cff["cff-version"] == "1.2.0"
    assert str(cff["version"]) == PYPROJECT["version"]
    assert cff["license"] == PYPROJECT["license"]["text"] == "Apache-2.0"
    assert cff["authors"] and all(a.get("name") or a.get("family-names") for a in cff["authors"])
    assert cff["title"] and cff["message"] and cff["type"] == "software"
    datetime.date.fromisoformat(cff["date-released"])  # a quoted YYYY-MM-DD, as CFF requires


def test_readme_bibtex_matches_citation_cff() -> None:
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    block = re.search(r"```bibtex\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)
    assert block is not None, "README.md has no BibTeX block"
    fields = dict(re.findall(r"^\s*(\w+)\s*=\s*\{+(.*?)\}+,?$", block.group(1), flags=re.M))
    assert fields["version"] == PYPROJECT["version"]
    assert fields["title"] == cff["title"]
    assert fields["date"] == cff["date-released"]


def test_license_is_the_apache_2_text() -> None:
    text = (ROOT / "LICENSE").read_text()
    assert text.lstrip().startswith("Apache License\n                           Version 2.0")
    assert "END OF TERMS AND CONDITIONS" in text and len(text) > 11_000


def test_changelog_starts_at_the_package_version_with_an_unreleased_section() -> None:
    text = (ROOT / "CHANGELOG.md").read_text()
    versions = re.findall(r"^## \[([^\]]+)\]", text, flags=re.M)
    assert versions[0] == "Unreleased"
    assert versions[1] == PYPROJECT["version"]
    assert versions[-1] == "0.2.0"


def test_shipped_documents_point_only_at_what_a_reader_can_follow() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in _shipped()
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if POINTERS.search(line)
    ]
    assert not found, "pointers a reader cannot follow:\n" + "\n".join(found)
