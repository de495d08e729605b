"""The pass/fail reward (``--reward_threshold``) and the shared rows (``--data_seed``) that the
pass/fail grid needs: chen_passk, which refuses graded rewards, trains on a graded verifier
turned pass/fail; seeds with one ``--data_seed`` share their rows and their held-out set."""

from __future__ import annotations

import csv
import dataclasses
from pathlib import Path
from typing import Any

import pytest

from advest.training.config import ConfigError, build_scorer, validate
from advest.training.data import PromptSource
from advest.training.embedded import EmbeddedSpec, build
from advest.training.scoring import Scorer
from advest.training.settings import RLConfig

pytestmark = pytest.mark.filterwarnings(
    "ignore::DeprecationWarning",
    "ignore::UserWarning",
    "ignore::FutureWarning",
    "ignore::lightning.fabric.utilities.warnings.PossibleUserWarning",
)

TINY = EmbeddedSpec(hidden_size=32, layers=1, heads=2, warm_start_steps=30)
PRODUCTS = {"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 1}


@pytest.fixture(scope="module")
def model_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ADVEST_HOME", str(tmp_path_factory.mktemp("home")))
        return str(build(TINY, verbose=False))


def test_a_threshold_turns_the_total_pass_fail_and_keeps_the_parts() -> None:
    graded = Scorer(["digits"], workers=0)
    passfail = Scorer(["digits"], workers=0, threshold=1.0)
    parts = passfail(["12", "13", "1"], ["12", "12", "12"])
    assert parts == graded(["12", "13", "1"], ["12", "12", "12"])  # the verifier's own scores
    assert [graded.total(p) for p in parts] == [1.0, 0.25, 0.25]
    assert [passfail.total(p) for p in parts] == [1.0, 0.0, 0.0]
    assert Scorer(["digits"], threshold=0.25).total([0.25]) == 1.0  # at least the threshold


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_a_threshold_that_is_not_finite_is_refused_naming_the_flag(bad: float) -> None:
    with pytest.raises(ConfigError, match="--reward_threshold"):
        build_scorer("digits", None, 5.0, 0, threshold=bad)


def test_data_seed_is_refused_without_a_reasoning_gym_task(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--data_seed"):
        validate(RLConfig(data_seed=3, out=str(tmp_path)))


def test_one_data_seed_gives_every_seed_the_same_rows_and_held_out_set() -> None:
    def source(seed: int, data_seed: int | None) -> PromptSource:
        return PromptSource("reasoning_gym:products", seed, task_options=PRODUCTS,
                            task_size=16, task_held=32, task_seed=data_seed)  # fmt: skip

    a, b = source(1, 0), source(2, 0)
    assert a.rows == b.rows and a.held == b.held
    assert {r.prompt for r in a.rows}.isdisjoint({r.prompt for r in a.held})
    assert [a.item(i).prompt for i in range(16)] != [b.item(i).prompt for i in range(16)]
    c, d = source(1, None), source(2, None)  # the default: each seed draws its own
    assert c.held != d.held


def _run(model_path: str, out: Path, **over: object) -> list[dict[str, str]]:
    from advest.training.train import train

    cfg = RLConfig(model=model_path, steps=3, prompts_per_step=4, group_size=4,
                   max_new_tokens=4, eval_prompts=0, checkpoint_every=0, out=str(out),
                   lr=1e-3, reward="digits", reward_workers=0, estimator="chen_passk",
                   k=2)  # fmt: skip
    folder = train(dataclasses.replace(cfg, **over), {"enable_progress_bar": False},
                   name="chen", evaluate=False)  # fmt: skip
    return list(csv.DictReader((folder / "metrics.csv").read_text().splitlines()))


def test_chen_passk_trains_on_a_graded_verifier_turned_pass_fail(
    model_path: str, tmp_path: Path
) -> None:
    rows = _run(model_path, tmp_path / "a", reward_threshold=1.0)
    steps = [r for r in rows if r.get("reward")]
    assert len(steps) == 3
    # the total is pass/fail: each step's mean reward is its pass@1 (passes are full credit)
    assert all(float(r["reward"]) == pytest.approx(float(r["pass@1"])) for r in steps)
    assert all(float(r["skipped_steps"]) == 0 for r in steps)


def test_without_the_threshold_chen_passk_refuses_the_graded_reward(
    model_path: str, tmp_path: Path
) -> None:
    with pytest.raises(Exception, match="binary"):
        _run(model_path, tmp_path / "b")


def _weights(model_path: str, out: Path, **over: object) -> dict[str, Any]:
    import torch

    from advest.training.train import train

    cfg = RLConfig(model=model_path, steps=3, prompts_per_step=4, group_size=4,
                   max_new_tokens=4, eval_prompts=0, checkpoint_every=0, out=str(out),
                   lr=1e-3, reward="digits", reward_workers=0, estimator="rloo")  # fmt: skip
    folder = train(dataclasses.replace(cfg, **over), {"enable_progress_bar": False},
                   name="scale", evaluate=False)  # fmt: skip
    state = torch.load(folder / "checkpoints" / "last.ckpt", weights_only=False)["state_dict"]
    return {k: v for k, v in state.items() if k.startswith("policy.")}


def test_a_constant_factor_on_the_advantages_leaves_the_unclipped_update_unchanged(
    model_path: str, tmp_path: Path
) -> None:
    """What the grid's one learning rate rests on: with AdamW and clipping off, rewards × 3 (so
    rloo's advantages × 3) train the same weights (to 1% of the distance moved: ε = 1e-8 is
    not negligible for the few weights whose gradients are near it), while a learning rate × 3,
    the step that plain SGD would take, does not."""
    from advest.training.policy import load_policy

    def trained(weight: float, lr: float = 1e-3) -> dict[str, Any]:
        return _weights(model_path, tmp_path / f"{weight}-{lr}", reward_weights=[weight],
                        max_grad_norm=1e9, lr=lr)  # fmt: skip

    def distance(a: dict[str, Any], b: dict[str, Any]) -> float:
        return float(sum(float((a[k] - b[k]).square().sum()) for k in a) ** 0.5)

    one = trained(1.0)
    start = {f"policy.{k}": v for k, v in load_policy(model_path)[0].state_dict().items()}
    moved = distance(one, start)
    assert moved > 0.01
    assert distance(one, trained(3.0)) < 0.01 * moved
    assert distance(one, trained(1.0, lr=3e-3)) > 0.3 * moved
