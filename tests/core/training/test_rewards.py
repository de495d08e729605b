"""Rewards as users write them: ``module:function`` verifiers from the working directory, several
with weights (each logged beside the total), bad names refused before any model loads, and the
worker pool in which one hanging call costs its own timeout and no more. Also: the estimator is
resolved once per run, and evaluation samples and scores as training does."""

from __future__ import annotations

import csv
import textwrap
import time
from pathlib import Path
from typing import Any

import lightning as L
import pytest

from advest import cli
from advest.fast import registry
from advest.parsing import gather_lists
from advest.training import scoring
from tests.core.training.test_training import TRAINER_WARNINGS, _cfg, _train, model_path

__all__ = ["model_path"]  # the module-scoped fixture, shared with test_training

pytestmark = TRAINER_WARNINGS

USER_REWARDS = """
    import os
    import time


    def length(completion: str, answer: str) -> float:
        return float(len(completion.strip()))


    def hang(completion: str, answer: str) -> float:
        if completion == "hang":
            while True:
                time.sleep(1)
        return 1.0


    def die(completion: str, answer: str) -> float:
        if completion == "die":
            os._exit(3)
        return 1.0


    CONSTANT = 3
"""


def _user_module(folder: Path, name: str) -> str:
    """Write the verifiers above as ``folder/name.py`` (a fresh name per test: imports are
    cached by name)."""
    (folder / f"{name}.py").write_text(textwrap.dedent(USER_REWARDS))
    return name


def _rows(folder: Path) -> list[dict[str, str]]:
    with (folder / "metrics.csv").open() as f:
        return list(csv.DictReader(f))


# ----------------------------------------------------------------------------- user rewards
@pytest.mark.parametrize("workers", [0, 2])
def test_a_user_reward_from_the_working_directory_is_logged_beside_the_weighted_total(
    model_path: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: int
) -> None:
    mod = _user_module(tmp_path, f"user_rewards_total_{workers}")
    monkeypatch.chdir(tmp_path)  # importable from the working directory, nowhere else
    cfg = _cfg(
        model_path,
        tmp_path,
        reward=["digits", f"{mod}:length"],
        reward_weights=[1.0, 0.1],
        reward_workers=workers,
    )
    _train(cfg, "user")
    rows = _rows(tmp_path / "user")
    assert len(rows) == 2
    for row in rows:
        digits, length = float(row["reward/digits"]), float(row[f"reward/{mod}:length"])
        assert length > 0  # the user's function was called, not a built-in
        assert float(row["reward"]) == pytest.approx(1.0 * digits + 0.1 * length, rel=1e-5)
        assert float(row["reward_failures"]) == 0


def test_pass_at_k_is_decided_by_the_first_reward_not_by_a_bonus(
    model_path: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bonus that is always positive (length) makes every total > 0; pass@1 must still be
    the verifier's (exact) success rate."""
    mod = _user_module(tmp_path, "user_rewards_pass")
    monkeypatch.chdir(tmp_path)
    cfg = _cfg(model_path, tmp_path, reward=["exact", f"{mod}:length"], reward_weights=[1.0, 0.1])
    _train(cfg, "pass")
    rows = _rows(tmp_path / "pass")
    for row in rows:
        assert float(row["pass@1"]) == float(row["reward/exact"])  # 0/1 scores: their mean
    assert any(float(row["pass@1"]) < 1 for row in rows)  # the bonus alone would give 1.0


def test_several_rewards_and_weights_parse_as_space_separated_lists() -> None:
    from advest.training.command import parser

    argv = ["--reward", "math", "mymod:format", "--reward_weights", "1.0", "0.1", "--steps", "2"]
    ns = parser().parse_args(gather_lists(argv))
    assert (ns.reward, ns.reward_weights, ns.steps) == (["math", "mymod:format"], [1.0, 0.1], 2)
    ns = parser().parse_args(gather_lists(["--reward", "math", "--reward_weights", "2"]))
    assert (ns.reward, ns.reward_weights) == ("math", [2.0])
    ns = parser().parse_args(gather_lists(["--reward=math", "--reward_weights=2"]))
    assert (ns.reward, ns.reward_weights) == ("math", [2.0])
    ns = parser().parse_args(gather_lists(["--reward", "[exact, digits]", "--reward_weights", "1"]))
    assert (ns.reward, ns.reward_weights) == (["exact", "digits"], [1.0])


@pytest.mark.parametrize(
    ("reward", "says"),
    [
        (["nope"], "--reward: unknown reward 'nope'"),
        (["no_such_module_xyz:f"], "no module 'no_such_module_xyz' importable from"),
        (["{mod}:missing"], "has no 'missing'"),
        (["{mod}:CONSTANT"], "is a int, not a function"),
        ([":length"], "is not module:function"),
        (["{mod}:"], "is not module:function"),
        (["digits", "digits"], "--reward names a verifier twice"),
        (["digits", "{mod}:length", "--reward_weights", "1"], "--reward_weights gives 1 weights"),
        (["exact", "--reward_workers", "-1"], "--reward_workers must be at least 0"),
    ],
)
def test_a_bad_reward_is_refused_before_the_model_loads_naming_the_flag(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    no_model_loading: None,
    reward: list[str],
    says: str,
) -> None:
    mod = _user_module(tmp_path, "user_rewards_bad")
    monkeypatch.chdir(tmp_path)
    argv = ["train", "--reward", *[r.format(mod=mod) for r in reward], "--out", str(tmp_path)]
    assert cli.main(argv) == 2
    out, err = capsys.readouterr()
    assert says.format(mod=mod) in err and "--reward" in err
    assert "error" not in out


# ----------------------------------------------------------------------------- the worker pool
def test_a_hanging_verifier_costs_its_timeout_scores_zero_and_is_counted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mod = _user_module(tmp_path, "user_rewards_hang")
    monkeypatch.chdir(tmp_path)
    scorer = scoring.Scorer([f"{mod}:hang"], timeout_s=1.0, workers=2)
    texts = ["a", "b", "hang", "c", "d", "e", "f", "g"]
    assert scorer(texts[:2], ["x"] * 2) == [[1.0], [1.0]]  # the workers are up
    pool = scorer._pool
    assert pool is not None
    hung = list(pool.workers)
    start = time.perf_counter()
    with pytest.warns(UserWarning, match="timeout"):
        scores = scorer(texts, ["x"] * 8)
    elapsed = time.perf_counter() - start
    assert scores == [[0.0] if t == "hang" else [1.0] for t in texts]
    assert 1.0 <= elapsed < 2.5  # the hanging call's timeout, and the rest beside it
    assert scorer.failures == {"timeout": 1}
    assert pool.replaced == 1
    killed = [w for w in hung if w not in pool.workers]
    assert len(killed) == 1 and killed[0].process.poll() is not None  # killed, not leaked
    assert scorer(["a", "hang"], ["x", "x"]) == [[1.0], [0.0]]  # the replacement works
    assert scorer.failures == {"timeout": 2}
    workers = list(pool.workers)
    scorer.close()
    assert all(w.process.poll() is not None for w in workers)


def test_a_verifier_that_kills_its_worker_scores_zero_and_the_worker_is_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mod = _user_module(tmp_path, "user_rewards_die")
    monkeypatch.chdir(tmp_path)
    scorer = scoring.Scorer([f"{mod}:die", "exact"], [1.0, 2.0], timeout_s=5.0, workers=1)
    with pytest.warns(UserWarning, match="crash"):
        parts = scorer(["die", "x", "y"], ["x", "x", "x"])
    assert parts == [[0.0, 0.0], [1.0, 1.0], [1.0, 0.0]]
    assert [scorer.total(p) for p in parts] == [0.0, 3.0, 1.0]
    assert scorer.failures == {"crash": 1}
    scorer.close()


def test_in_process_and_pooled_scores_are_equal(tmp_path: Path) -> None:
    texts, answers = ["12", "13", " 12", "x", "", "121"], ["12"] * 6
    inline = scoring.Scorer(["exact", "digits"], [1.0, 0.5], workers=0)
    pooled = scoring.Scorer(["exact", "digits"], [1.0, 0.5], workers=2)
    assert inline(texts, answers) == pooled(texts, answers)
    pooled.close()


# ----------------------------------------------------------------------------- one path
class PlanIds(L.Callback):
    def __init__(self) -> None:
        self.ids: list[int] = []

    def on_train_batch_end(self, trainer: L.Trainer, module: Any, *args: Any) -> None:
        self.ids.append(id(module.plan))


def test_the_estimator_is_resolved_once_per_run_not_per_step(
    model_path: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lookups: list[str] = []
    entry = registry.entry

    def counted(name: str) -> registry.Entry:
        lookups.append(name)
        return entry(name)

    monkeypatch.setattr(registry, "entry", counted)
    counts = []
    for steps in (1, 3):
        lookups.clear()
        seen = PlanIds()
        cfg = _cfg(model_path, tmp_path, estimator="covariance_weights", steps=steps)
        _train(cfg, f"plan{steps}", callbacks=[seen])
        counts.append(len(lookups))
        assert len(seen.ids) == steps and len(set(seen.ids)) == 1  # one plan for every step
    assert counts[0] == counts[1] > 0  # validation and the run's plan; no lookup per step


def test_eval_samples_and_scores_with_the_run_settings(
    model_path: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``advest eval`` passes --top_p, --temperature and the weighted user rewards to the one
    sample-and-score function training uses (it used to ignore top_p)."""
    from advest.training import evaluate, sampling

    mod = _user_module(tmp_path, "user_rewards_eval")
    monkeypatch.chdir(tmp_path)
    seen: list[Any] = []

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append((args[5], args[6]))  # sampling, scorer
        return sampling.sample_and_score(*args, **kwargs)

    monkeypatch.setattr(evaluate, "sample_and_score", spy)
    argv = [
        "--model", model_path, "--prompts", "2", "--samples", "2", "--max_new_tokens", "3",
        "--top_p", "0.5", "--temperature", "0.7", "--reward", "exact", f"{mod}:length",
        "--reward_weights", "1", "0", "--reward_workers", "0", "--out", str(tmp_path),
    ]  # fmt: skip
    assert evaluate.main(argv) == 0
    (s, scorer), *_ = seen
    assert (s.top_p, s.temperature, s.group_size, s.max_new_tokens) == (0.5, 0.7, 2, 3)
    assert scorer.specs == ["exact", f"{mod}:length"] and scorer.weights == [1.0, 0.0]


@pytest.mark.parametrize("command", [["eval"], ["experiment", "values"]])
def test_eval_and_values_refuse_a_bad_reward_naming_the_flag(
    command: list[str], capsys: pytest.CaptureFixture[str], no_model_loading: None
) -> None:
    assert cli.main([*command, "--reward", "exact", "no_such_module_xyz:f"]) == 2
    assert "--reward: 'no_such_module_xyz:f': no module" in capsys.readouterr().err
