"""The layout builds right from any checkout: a clone made without symlinks
(``core.symlinks=false``, the Windows default) gives a complete wheel and a complete sdist, and
the sdist installs and runs."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
LAYERED = sorted(p.name for p in (ROOT / "advest").iterdir() if p.is_symlink())
"""The top-level package folders, as the advest/ links name them."""
PACKAGES = (
    "fast", "reference", "spec", "oracle", "proofs", "training", "integrations", "experiments"
)  # fmt: skip
MUST = (
    "advest/__init__.py",
    "advest/py.typed",
    "advest/fast/calling.py",
    "advest/reference/maxk.py",
    "advest/spec/maxk.md",
    "advest/spec/golden/maxk.json",
    "advest/oracle/reports/report.py",
    "advest/proofs/coq/Sorted.v",
    "advest/experiments/real/__init__.py",
    "advest/experiments/grid/report.py",
    "advest/integrations/verl_plugin.py",
)


def _run(*argv: str, cwd: Path, **kw: object) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=600, **kw)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return done


def _contract_layers() -> list[str]:
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    # the packages' layers (the oracle's rooms are a second layers contract, inside advest.oracle)
    (layers,) = [
        c["layers"]
        for c in config["contracts"]
        if c["type"] == "layers" and c["containers"] == ["advest"]
    ]
    return [str(x) for x in layers]


def test_the_architecture_page_draws_the_import_contract() -> None:
    """docs/architecture.md's layer drawing is the contract's layers, top to bottom."""
    page = (ROOT / "docs" / "architecture.md").read_text()
    block = page.split("```layers\n", 1)[1].split("```", 1)[0]
    drawn = [line.split("  ")[0].strip() for line in block.splitlines() if line.strip()]
    assert drawn == _contract_layers()


def test_every_file_on_the_rollout_path_exists() -> None:
    page = (ROOT / "docs" / "architecture.md").read_text()
    table = page.split("## One rollout", 1)[1]
    for row in table.splitlines():
        if not row.startswith("| ") or row.startswith("| hop") or row.startswith("|---"):
            continue
        folder = ""
        for name in re.findall(r"`([\w/]+\.py)`", row.rsplit("|", 2)[1]):
            folder = name.rsplit("/", 1)[0] if "/" in name else folder
            path = ROOT / (name if "/" in name else f"{folder}/{name}")
            assert path.exists(), (name, row)


def test_a_reversed_import_fails_the_contract(tmp_path: Path) -> None:
    """Planted: spec/ importing training/ breaks the layers contract (lint-imports exits 1)."""
    for name in ("pyproject.toml", "advest", *LAYERED):
        source = ROOT / name
        if source.is_dir() and not source.is_symlink():
            shutil.copytree(source, tmp_path / name, symlinks=True)
        elif source.is_symlink():
            (tmp_path / name).symlink_to(os.readlink(source))
        else:
            shutil.copy2(source, tmp_path / name)

    def lint() -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "PYTHONPATH": str(tmp_path)}
        exe = Path(sys.executable).parent / "lint-imports"
        return subprocess.run(
            [str(exe)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
        )

    assert lint().returncode == 0  # control: the copy as it is keeps every contract
    hyperparams = tmp_path / "spec" / "hyperparams.py"
    kept = hyperparams.read_text()
    hyperparams.write_text(kept + "\nimport advest.cli  # planted\n")
    broken = lint()
    assert broken.returncode == 1
    assert "advest.spec.hyperparams -> advest.cli" in broken.stdout
    # Planted: the trainer importing the oracle (below it in the layers, so only the second
    # contract, training imports only fast and spec, can catch it).
    hyperparams.write_text(kept)
    with (tmp_path / "training" / "metrics.py").open("a") as f:
        f.write("\nimport advest.oracle.reports.report  # planted\n")
    broken = lint()
    assert broken.returncode == 1
    assert "training imports only fast and spec BROKEN" in broken.stdout
    assert "advest.training.metrics -> advest.oracle.reports.report" in broken.stdout


def test_spec_imports_only_the_standard_library_and_torch_in_tolerances() -> None:
    """docs/architecture.md: spec/ imports nothing of advest beyond itself and, outside the
    standard library, only torch, in spec/tolerances.py alone."""
    import ast

    outside: dict[str, set[str]] = {}
    for path in sorted((ROOT / "spec").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                tops = {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                tops = {node.module.split(".")[0]}
            else:
                continue
            extra = {t for t in tops if t not in sys.stdlib_module_names and t != "__future__"}
            if extra:
                outside.setdefault(path.name, set()).update(extra)
    assert outside == {"tolerances.py": {"torch"}}


def test_no_experiment_finds_a_repository_from_its_own_file() -> None:
    """An installed advest writes only where its user points: what writes the repository's
    pages takes the repository's path (``scripts/``), so no experiment derives one from where
    its own file lies (``Path(__file__)...parents``), which installed is site-packages."""
    found = [
        p.relative_to(ROOT).as_posix()
        for p in sorted((ROOT / "experiments").rglob("*.py"))
        if re.search(r"Path\(__file__\)[^\n]*parents", p.read_text())
    ]
    assert found == []


def test_the_architecture_page_quotes_imports_that_exist() -> None:
    """Each "`from … import …` in `file`" on the page is a line of that file (as written there,
    or the start of a longer import list)."""
    page = (ROOT / "docs" / "architecture.md").read_text()
    quoted = re.findall(r"`(from [^`]+ import [^`]+)` in `([\w/]+\.py)`", " ".join(page.split()))
    assert len(quoted) >= 2
    for statement, file in quoted:
        lines = [line.strip() for line in (ROOT / file).read_text().splitlines()]
        assert any(line.startswith(statement) for line in lines), (statement, file)


def test_the_readme_names_every_installed_package() -> None:
    text = " ".join((ROOT / "README.md").read_text().split())
    sentence = text.split("Everything installs under one name, `advest`:", 1)[1].split(". ")[0]
    for package in LAYERED:
        assert f"`advest.{package}`" in sentence, package


def test_every_path_the_architecture_page_names_exists() -> None:
    page = (ROOT / "docs" / "architecture.md").read_text()
    named = set(re.findall(r"`((?:[\w.-]+/)+[\w.-]+\.\w+)`", page))
    assert len(named) > 10
    assert sorted(p for p in named if not (ROOT / p).exists()) == []


def test_the_build_lists_every_subpackage() -> None:
    """setuptools installs only the packages pyproject names: a subpackage left out of the list
    (oracle/search/ was) builds a wheel whose imports fail."""
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    listed = set(config["tool"]["setuptools"]["packages"])
    found = {"advest"}
    for pkg in PACKAGES:
        for init in (ROOT / pkg).rglob("__init__.py"):
            found.add(".".join(("advest", *init.parent.relative_to(ROOT).parts)))
    assert found == listed, (sorted(found - listed), sorted(listed - found))
