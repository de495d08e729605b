"""The slow tier of tests/core/meta/test_layout.py: the tests of that file that run in
`nox -s slow` (its folder gives them the marker)."""

from __future__ import annotations

import os
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from tests.core.meta.test_layout import MUST, PACKAGES, ROOT, _run


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
        for module in (ROOT / pkg).rglob("*.py"):  # subpackages too (oracle/search/)
            assert f"advest/{module.relative_to(ROOT).as_posix()}" in names, module
    with tarfile.open(sdist) as tar:
        inside = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    expected = [
        "tests/core/meta/test_layout.py",
        "tests/checks.py",
        "docs/integrations.md",
        "CHANGELOG.md",
    ]
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
