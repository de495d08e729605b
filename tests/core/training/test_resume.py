"""Resume means continue: real tiny runs, finished and then extended with more ``--steps``,
compared with the uninterrupted run; a complete run, a changed setting and a reused ``--name``
are refused in words and leave the run folder byte for byte as it was."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest
import torch

from advest.training.embedded import EmbeddedSpec, build
from tests.core.training.test_training import TRAINER_WARNINGS, _max_diff, _metrics, _params

pytestmark = TRAINER_WARNINGS

TINY = EmbeddedSpec(hidden_size=32, layers=1, heads=2, warm_start_steps=0)


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> str:
    home = tmp_path_factory.mktemp("advest_home")
    old = os.environ.get("ADVEST_HOME")
    os.environ["ADVEST_HOME"] = str(home)
    try:
        return str(build(TINY, verbose=False))
    finally:
        os.environ.pop("ADVEST_HOME") if old is None else os.environ.update(ADVEST_HOME=old)


def _args(model: str, out: Path) -> list[str]:
    return [
        "--model", model, "--prompts_per_step", "2", "--group_size", "2", "--max_new_tokens",
        "3", "--eval_prompts", "0", "--checkpoint_every", "2", "--out", str(out), "--reward",
        "digits", "--estimator", "grpo", "--reward_workers", "0", "--lr", "1e-3",
        "--trainer.enable_progress_bar", "false",
    ]  # fmt: skip


def _train(*argv: str) -> int:
    from advest.training.command import main

    return main(list(argv))


def _snapshot(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` with its content hash and modification time."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        + str(p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_a_finished_run_extended_with_more_steps_equals_the_uninterrupted_run(
    model: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _train(*_args(model, tmp_path), "--steps", "4", "--name", "straight") == 0
    assert _train(*_args(model, tmp_path), "--steps", "2", "--name", "extended") == 0
    # only --out, --name and the new total: every other setting is the run's own
    base = ["--out", str(tmp_path), "--name", "extended", "--resume"]
    capsys.readouterr()
    assert _train(*base, "--steps", "4") == 0
    assert "resume: --steps 2 -> 4 from step 2" in capsys.readouterr().out
    assert _max_diff(_params(tmp_path / "extended"), _params(tmp_path / "straight")) == 0.0
    assert _metrics(tmp_path / "extended") == _metrics(tmp_path / "straight")
    saved = json.loads((tmp_path / "extended" / "config.json").read_text())
    assert saved["rl"]["steps"] == 4
    assert saved["resumed"] == [{"at_step": 2, "changed": {"steps": {"was": 2, "now": 4}}}]
    # a complete run: the same or fewer steps are refused, and nothing in the folder changes
    before = _snapshot(tmp_path / "extended")
    for steps in ("4", "3"):
        assert _train(*base, "--steps", steps) == 2
        err = capsys.readouterr().err
        assert "is complete at step 4" in err and "pass --steps M > 4 --resume" in err
    assert _snapshot(tmp_path / "extended") == before


def test_a_resume_applies_and_records_a_new_learning_rate_and_refuses_other_changes(
    model: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _train(*_args(model, tmp_path), "--steps", "2", "--name", "run") == 0
    base = ["--out", str(tmp_path), "--name", "run", "--resume", "--steps", "3"]
    before = _snapshot(tmp_path / "run")
    capsys.readouterr()
    assert _train(*base, "--group_size", "4", "--estimator", "rloo") == 2
    err = capsys.readouterr().err
    assert "--group_size 4 (the run has 2)" in err and "--estimator 'rloo'" in err
    assert _snapshot(tmp_path / "run") == before
    assert _train(*base, "--lr", "2e-3") == 0
    assert "resume: --lr 0.001 -> 0.002 from step 2" in capsys.readouterr().out
    ckpt = torch.load(tmp_path / "run" / "checkpoints" / "last.ckpt", weights_only=False)
    assert ckpt["optimizer_states"][0]["param_groups"][0]["lr"] == 2e-3
    assert ckpt["lr_schedulers"][0]["base_lrs"] == [2e-3]
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    assert saved["rl"]["lr"] == 2e-3
    assert saved["resumed"][-1]["changed"]["lr"] == {"was": 1e-3, "now": 2e-3}


def test_a_reused_name_or_a_path_as_name_is_refused_and_touches_nothing(
    model: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("a user's file")
    (tmp_path / "out").mkdir()
    before = _snapshot(tmp_path)
    for name, says in [
        ("../mine", "must be a plain folder name"),
        ("..", "must be a plain folder name"),
        (str(tmp_path / "mine"), "must be a plain folder name"),
        ("a/b", "must be a plain folder name"),
    ]:
        assert _train(*_args(model, tmp_path / "out"), "--steps", "1", "--name", name) == 2
        assert says in capsys.readouterr().err
    assert _train(*_args(model, tmp_path), "--steps", "1", "--name", "mine") == 2
    assert "already holds files; continue that run with --resume" in capsys.readouterr().err
    assert _snapshot(tmp_path) == before


def test_an_export_replaces_model_in_one_step_with_no_moment_without_it(
    model: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from types import SimpleNamespace

    from advest.training import scale
    from advest.training.module import load_policy

    policy, tokenizer = load_policy(model)
    module = SimpleNamespace(policy=policy, tokenizer=tokenizer)
    scale.export(module, tmp_path, "merged")
    (tmp_path / "model" / "adapter_config.json").write_text("{}")  # stale: must not survive
    real = Path.rename

    def rename(self: Path, target: Any) -> Any:
        assert self.name != "model", "model/ was moved away: a moment without it"
        return real(self, target)

    monkeypatch.setattr(Path, "rename", rename)
    with torch.no_grad():
        next(policy.parameters()).add_(1.0)
    scale.export(module, tmp_path, "merged")
    assert not (tmp_path / "model" / "adapter_config.json").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]  # no temporary left
    again, _ = load_policy(str(tmp_path / "model"))
    assert torch.equal(next(again.parameters()), next(policy.parameters()))
