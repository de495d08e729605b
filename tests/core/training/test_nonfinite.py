"""No silent NaN: a run whose weights or gradients go non-finite stops with a message naming the
step, keeps its last good checkpoint and exports nothing after it; rewards beyond float32's
range, and verifiers that raise ``SystemExit``, count as failed calls; Ctrl-C stops a run with
its last checkpoint whole."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from advest.training import rewards, scoring
from tests.core.training.test_resume import _args, _train, model  # noqa: F401  (the fixture)
from tests.core.training.test_training import TRAINER_WARNINGS

pytestmark = TRAINER_WARNINGS


def test_weights_made_nan_by_a_step_stop_the_run_keeping_the_last_good_checkpoint(
    model: str,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    real = torch.optim.AdamW.step
    calls = {"n": 0}

    def poisoned(self: torch.optim.AdamW, *a: Any, **kw: Any) -> Any:
        out = real(self, *a, **kw)
        calls["n"] += 1
        if calls["n"] == 5:  # rollout step 3's first optimiser step (two per step)
            with torch.no_grad():
                self.param_groups[0]["params"][0].fill_(float("nan"))
        return out

    monkeypatch.setattr(torch.optim.AdamW, "step", poisoned)
    assert _train(*_args(model, tmp_path), "--steps", "4", "--name", "nan") == 1
    err = capsys.readouterr().err
    assert "advest train: stopped: rollout step 3: the policy's weights became non-finite" in err
    assert "holds rollout step 2" in err and "lower --lr" in err
    ckpt = torch.load(tmp_path / "nan" / "checkpoints" / "last.ckpt", weights_only=False)
    assert ckpt["advest"]["rollout_step"] == 2
    assert all(bool(torch.isfinite(v).all()) for v in ckpt["state_dict"].values())
    from safetensors.torch import load_file

    exported = load_file(tmp_path / "nan" / "model" / "model.safetensors")  # step 2's export
    assert all(bool(torch.isfinite(v).all()) for v in exported.values())


def test_a_learning_rate_that_overflows_the_gradients_stops_the_run_in_words(
    model: str,  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """--lr 1e30 used to end in a traceback inside generate (NaN sampling probabilities)."""
    assert _train(*_args(model, tmp_path), "--steps", "4", "--name", "big", "--lr", "1e30") == 1
    err = capsys.readouterr().err
    assert "consecutive non-finite gradient norms at rollout step" in err
    assert "Traceback" not in err


def test_rewards_beyond_float32_and_non_finite_rewards_count_as_named_failures() -> None:
    values = iter([1e300, 1e39, -1e39, float("nan"), 3e38, 0.5])
    guarded = rewards.Guarded(lambda c, a: next(values), timeout_s=0)
    with pytest.warns(UserWarning) as caught:
        got = [guarded("c", "a") for _ in range(6)]
    assert got == [0.0, 0.0, 0.0, 0.0, 3e38, 0.5]
    assert guarded.failures == {"out of range": 3, "non-finite": 1}
    assert "reward returned 1e+300, beyond float32" in str(caught[0].message)
    scorer = scoring.Scorer(["exact", "digits"], [3e38, 3e38], workers=0)
    with pytest.warns(UserWarning, match="weighted total of the rewards returned 6e\\+38"):
        assert scorer.total([1.0, 1.0]) == 0.0


def _exits(completion: str, answer: str) -> float:
    raise SystemExit(4)


@pytest.mark.parametrize("workers", [0, 1])
def test_a_reward_raising_system_exit_is_a_failed_call_not_the_end_of_the_run(
    workers: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "exiting.py").write_text(
        "def reward(completion, answer):\n    raise SystemExit(4)\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    scorer = scoring.Scorer(["exiting:reward"], workers=workers, timeout_s=30)
    try:
        with pytest.warns(UserWarning, match=r"reward failed \(SystemExit\)"):
            assert scorer(["a", "b"], ["1", "2"]) == [[0.0], [0.0]]
    finally:
        scorer.close()
    assert scorer.failures == {"SystemExit": 2}
