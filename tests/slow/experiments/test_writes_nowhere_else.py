"""An installed advest writes only under the folder its user works in: the wheel, built from this
checkout and installed into a fresh venv, runs every ``advest experiment`` command (each at its
``--quick`` or smallest settings, on a tiny embedded model) from an empty folder, with
``ADVEST_HOME`` inside it, and afterwards no file outside that folder has appeared, gone or
changed: not in the copy of the repository the wheel was built from, not in the venv (the
installed package among it), not in ``HOME``."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from advest.cli import EXPERIMENTS
from tests.core.oracle.test_testing import installed_wheel

MODEL = "from advest.training.embedded import EmbeddedSpec, build; print(build(EmbeddedSpec(" \
    "hidden_size=32, layers=1, heads=2, warm_start_steps=30), verbose=False))"  # fmt: skip
"""Builds the tiny model into ``ADVEST_HOME`` (inside the folder) and prints its path."""


def commands(model: str) -> dict[str, list[str]]:
    """Each experiment's smallest run, every output at its default place (under the folder).
    ``real`` needs its real model (the tiny one cannot hold a reasoning-gym prompt), so one arm
    and seed, one step of one prompt and one held-out prompt × 2 samples of 4 tokens (about a
    minute; ``--quick``'s two arms and steps took over eight on two busy cores); ``cost`` two
    estimators at the sizes that only run the code (``--quick`` measures every one)."""
    tiny = ["--model", model]
    return {
        "bandit": ["--quick"],
        "compare": ["--quick", *tiny],
        "values": ["--quick", *tiny],
        "real": ["--arms", "grpo", "--seeds", "1", "--steps", "1", "--prompts", "1",
                 "--tokens", "4", "--eval_prompts", "1", "--samples", "2"],
        "grid": ["--quick", *tiny],
        "turns": ["--quick", *tiny],
        "cost": ["--scale", "tiny", "--only", "grpo", "maxpo"],
    }  # fmt: skip


def snapshot(folders: list[Path], outside: Path) -> dict[str, tuple[int, int]]:
    """path → (size, mtime in ns) of every file and link under ``folders``, ``outside`` left
    out."""
    found = {}
    for folder in folders:
        for path in [folder, *folder.rglob("*")]:
            if path == outside or outside in path.parents:
                continue
            st = path.lstat()
            found[str(path)] = (st.st_size if not path.is_dir() else 0, st.st_mtime_ns)
    return found


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_every_experiment_writes_only_under_the_folder_it_runs_in(tmp_path: Path) -> None:
    venv, home, work = tmp_path / "venv", tmp_path / "home", tmp_path / "work"
    python = installed_wheel(tmp_path)
    home.mkdir()
    work.mkdir()
    # a user's shell in an empty folder: no PYTHONPATH into this checkout, HOME of its own, the
    # model cache pointed inside the folder; so is matplotlib's, which matplotlib itself writes
    # (its font list, in HOME's .cache and .config) the first time any program imports it
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env |= {"HOME": str(home), "ADVEST_HOME": str(work / "advest_home"),
            "MPLCONFIGDIR": str(work / "matplotlib"), "CUDA_VISIBLE_DEVICES": "",
            "OMP_NUM_THREADS": "1"}  # fmt: skip
    model = subprocess.run([python, "-c", MODEL], cwd=work, env=env, capture_output=True,
                           text=True, check=True).stdout.strip()  # fmt: skip
    before = snapshot([tmp_path], work)
    every = commands(model)
    assert list(every) == [e.name for e in EXPERIMENTS]  # a new experiment is run here too
    advest = str(venv / "bin" / "advest")
    for name, flags in every.items():
        done = subprocess.run([advest, "experiment", name, *flags], cwd=work, env=env,
                              capture_output=True, text=True, timeout=600)  # fmt: skip
        assert done.returncode == 0, f"{name}: {done.stdout[-2000:]}{done.stderr[-3000:]}"
        assert any(work.iterdir()), name
    after = snapshot([tmp_path], work)
    changed = sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))
    assert changed == []
    where = [python, "-c", "import advest; print(advest.__file__)"]
    installed = subprocess.run(where, cwd=work, env=env, capture_output=True, text=True)
    assert installed.stdout.startswith(str(venv)), installed.stdout  # the wheel's, not ours
