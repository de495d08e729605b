"""The layout builds right from any checkout: a clone made without symlinks
(``core.symlinks=false``, the Windows default) gives a complete wheel and a complete sdist, and
the sdist installs and runs."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
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
    "advest/oracle/report.py",
    "advest/proofs/coq/Sorted.v",
    "advest/experiments/real.py",
    "advest/integrations/verl_plugin.py",
)


def _run(*argv: str, cwd: Path, **kw: object) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=600, **kw)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return done


@pytest.mark.slow
def test_a_checkout_without_symlinks_builds_a_complete_wheel_and_sdist(tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    _run("git", "clone", "-q", "-c", "core.symlinks=false", str(ROOT), str(clone), cwd=tmp_path)
    # the checkout really has no symlinks: advest/fast is a small text file naming ../fast
    assert (clone / "advest" / "fast").is_file() and not (clone / "advest" / "fast").is_symlink()
    dist = tmp_path / "dist"
    _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(dist), str(clone), cwd=tmp_path)  # fmt: skip
    sdist_code = f"from setuptools import build_meta as b; print(b.build_sdist({str(dist)!r}))"
    _run(sys.executable, "-c", sdist_code, cwd=clone)
    (wheel,) = dist.glob("advest-*.whl")
    (sdist,) = dist.glob("advest-*.tar.gz")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert set(MUST) <= names, sorted(set(MUST) - names)
    for pkg in PACKAGES:  # every module of every package, none lost
        for module in (ROOT / pkg).glob("*.py"):
            assert f"advest/{pkg}/{module.name}" in names, module
    with tarfile.open(sdist) as tar:
        inside = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    expected = ["tests/test_layout.py", "tests/checks.py", "docs/integrations.md", "CHANGELOG.md"]
    expected += ["proofs/coq/Sorted.v", "spec/maxk.md", "fast/calling.py"]
    for path in expected:
        assert path in inside, path
    # the sdist installs (built again, from its own files) and runs
    target = tmp_path / "site"
    _run(sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "-q",
         "--target", str(target), str(sdist), cwd=tmp_path)  # fmt: skip
    import torch

    site = str(Path(torch.__file__).parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(target), site])}
    smoke = (
        "import torch, advest; print(advest.__file__); "
        "print(advest.get('maxpo')(torch.tensor([[0.0, 1.0, 3.0, 2.0]]), 2).tolist()); "
        "from advest.cli import main; main(['list'])"
    )
    done = _run(sys.executable, "-S", "-c", smoke, cwd=tmp_path, env=env)
    first, adv, *listing = done.stdout.splitlines()
    assert first.startswith(str(target)), first
    assert sum(eval(adv)[0]) == pytest.approx(0.0, abs=1e-6) and any(eval(adv)[0])
    assert any(line.startswith("maxpo ") for line in listing)


def _contract_layers() -> list[str]:
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (layers,) = [c["layers"] for c in config["contracts"] if c["type"] == "layers"]
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
        f.write("\nimport advest.oracle.report  # planted\n")
    broken = lint()
    assert broken.returncode == 1
    assert "training imports only fast and spec BROKEN" in broken.stdout
    assert "advest.training.metrics -> advest.oracle.report" in broken.stdout
