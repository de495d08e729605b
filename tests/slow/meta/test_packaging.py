"""The slow tier of tests/core/meta/test_packaging.py: the tests of that file that run in
`nox -s slow` (its folder gives them the marker)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from tests.core.meta.test_packaging import ROOT, _readme_python_example


def test_the_wheel_installs_as_users_do_beside_their_own_spec_fast_and_training(
    tmp_path: Path,
) -> None:
    """Build the wheel, install it non-editable into a fresh target, and run the README's
    example and ``advest --help`` from a folder holding the user's own packages named like
    ours."""
    # Build from a copy: setuptools writes build/ and *.egg-info/ beside the sources.
    source = tmp_path / "source"
    skip = shutil.ignore_patterns(
        ".git", "build", "runs", ".venv*", ".nox", "*.egg-info", "__pycache__"
    )
    shutil.copytree(ROOT, source, symlinks=True, ignore=skip)
    dist = tmp_path / "dist"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(dist),
            str(source),
        ],
        check=True,
        capture_output=True,
        timeout=600,
    )
    (wheel,) = dist.glob("advest-*.whl")
    with zipfile.ZipFile(wheel) as z:
        tops = {n.split("/", 1)[0] for n in z.namelist() if not n.startswith("advest-")}
        names = z.namelist()
    assert tops == {"advest"}, tops
    for must in ("advest/py.typed", "advest/spec/maxk.md", "advest/spec/golden/maxk.json"):
        assert must in names, must
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--target", str(target), str(wheel)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    user = tmp_path / "user"
    for pkg in ("spec", "fast", "training", "reference", "proofs"):
        (user / pkg).mkdir(parents=True)
        (user / pkg / "__init__.py").write_text(f"raise ImportError('the user\\'s own {pkg}')\n")
    # The installed wheel first, then the shared site-packages for torch & co.; never this
    # repository (the editable install's finder is left out by -S plus an explicit path).
    import torch

    site = str(Path(torch.__file__).parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(target), site])}
    example = _readme_python_example()
    code = "import sys; sys.path.insert(0, '');\n" + example
    done = subprocess.run(
        [sys.executable, "-S", "-c", code],
        cwd=user,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    check = "import advest; print(advest.__file__, advest.__version__)"
    done = subprocess.run(
        [sys.executable, "-S", "-c", check], cwd=user, env=env, capture_output=True, text=True
    )
    assert done.stdout.startswith(str(target)), done.stdout + done.stderr
    cli = subprocess.run(
        [
            sys.executable,
            "-S",
            "-c",
            "import sys; from advest.cli import main; sys.exit(main(['--help']))",
        ],
        cwd=user,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert cli.returncode == 0, cli.stderr
    assert "train" in cli.stdout
