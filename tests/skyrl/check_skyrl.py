"""Run inside an environment with SkyRL (``tests/skyrl/test_skyrl.py`` builds it and runs this file
with pytest there): advest's estimators through SkyRL's own ``compute_advantages_and_returns`` (the
function SkyRL's trainer calls), its config and its validation, and in SkyRL's process layout: a
driver that registers, SkyRL's ``initialize_ray``, and a Ray worker that never imports advest."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch
from skyrl.backends.skyrl_train.utils import ppo_utils
from skyrl.train.config import AlgorithmConfig, SkyRLTrainConfig, make_config
from skyrl.train.utils.utils import validate_cfg

from advest.fast import by_group, registry, shaping
from advest.integrations import skyrl as integration
from tests.peer_batch import multi_turn, shuffled, turn_rloo_by_uid

SKIPPED = {"ktae", "covariance_weights", "hista", "numca", "kae", "gdpo", "optimal_token_baseline"}
NAMES = sorted(n for n in set(registry.names()) - SKIPPED if registry.entry(n).kind != "episode")
"""The sequence-level estimators SkyRL runs (the episode ones: the multi-turn test below)."""


def _batch(
    B: int, G: int, T: int, seed: int, binary: bool = False
) -> tuple[torch.Tensor, torch.Tensor, list[str], torch.Tensor, np.ndarray]:
    """A SkyRL batch of B prompts × G responses in shuffled order: token-level rewards (the
    reward at the last valid token), the response mask ``[bs, T]``, the uids (a list of str, as
    in SkyRL's ``metadata["uids"]``), the ``[B, G]`` rewards and the permutation."""
    tlr, mask, rewards, perm = shuffled(B, G, T, seed, binary)
    uids = [f"prompt-{int(p) // G}" for p in perm]
    return tlr, mask, uids, rewards, perm.numpy()


def _skyrl(
    name: str, tlr: torch.Tensor, mask: torch.Tensor, uids: list[str], **settings: object
) -> torch.Tensor:
    """SkyRL's ``compute_advantages_and_returns``, called with the arguments its trainer passes
    (``RayPPOTrainer.compute_advantages_and_returns``), from a default config."""
    config = settings.pop("config", AlgorithmConfig())
    adv, returns = ppo_utils.compute_advantages_and_returns(
        token_level_rewards=tlr,
        response_mask=mask,
        index=uids,
        adv_estimator=name,
        config=config,
        values=None,
        gamma=config.gamma,  # type: ignore[attr-defined]
        lambd=config.lambd,  # type: ignore[attr-defined]
        grpo_norm_by_std=settings.pop("grpo_norm_by_std", config.grpo_norm_by_std),  # type: ignore[attr-defined]
    )
    assert adv is returns  # an outcome estimator's return is its advantage, as SkyRL's grpo
    return adv


@pytest.mark.parametrize("name", NAMES)
def test_advest_estimator_through_skyrls_compute_advantages_and_returns(name: str) -> None:
    assert set(integration.register(k=2)) == SKIPPED
    B, G, T = 5, 4, 6
    entry = registry.entry(name)
    binary = name in ("chen_passk", "tang_passk")  # their domain is {0, 1}
    tlr, mask, uids, rewards, perm = _batch(B, G, T, seed=len(name), binary=binary)
    out = _skyrl(f"advest_{name}", tlr, mask, uids)
    args: dict[str, object] = {"rewards": rewards}
    if "k" in entry.inputs:
        args["k"] = 2
    if "lengths" in entry.inputs:
        args["lengths"] = mask.sum(-1)[np.argsort(perm)].reshape(B, G)
    direct = entry.fn(**args).reshape(-1)[perm]  # [bs], in the batch's shuffled order
    torch.testing.assert_close(out, direct[:, None] * mask, rtol=0, atol=0)


def test_a_multi_turn_batch_reaches_the_episode_estimators() -> None:
    """SkyRL's multi-turn rows: response_mask 0 on environment tokens, ragged uids; SkyRL's own
    compute_advantages_and_returns gives advest_turn_rloo the turns (the mask's runs of 1s)."""
    integration.register(k=2)
    tlr, mask, uids = multi_turn()
    out = _skyrl("advest_turn_rloo", tlr, mask, uids)
    torch.testing.assert_close(out, turn_rloo_by_uid(tlr, mask, uids), rtol=0, atol=0)
    assert bool((out[mask == 0] == 0).all())


def test_every_name_skyrl_lists_includes_advests_and_its_own() -> None:
    integration.register(k=2)
    available = set(ppo_utils.AdvantageEstimatorRegistry.list_available())
    assert {f"advest_{n}" for n in NAMES} | {"grpo", "rloo", "gae"} <= available
    assert not {f"advest_{n}" for n in SKIPPED} & available


def test_skyrls_validate_cfg_accepts_an_advest_name_once_registered() -> None:
    """SkyRL's driver checks ``trainer.algorithm.advantage_estimator`` against its registry
    before it starts Ray: ``register()`` must come first, as the docs say."""
    overrides = ["trainer.algorithm.advantage_estimator=advest_maxpo", "trainer.logger=console"]
    Registry = ppo_utils.AdvantageEstimatorRegistry
    for name in [n for n in Registry.list_available() if n.startswith("advest_")]:
        Registry.unregister(name)
    with pytest.raises(AssertionError, match="invalid advantage_estimator: advest_maxpo"):
        validate_cfg(SkyRLTrainConfig.from_cli_overrides(overrides))
    integration.register(k=2)
    validate_cfg(SkyRLTrainConfig.from_cli_overrides(overrides))


@dataclass
class AdvestAlgorithmConfig(AlgorithmConfig):
    """SkyRL's documented way to add a config field: subclass the algorithm config."""

    advest_k: int | None = None


def test_k_comes_from_an_advest_k_field_of_skyrls_config() -> None:
    integration.register(k=2)
    Config = make_config(algorithm_cls=AdvestAlgorithmConfig)
    cfg = Config.from_cli_overrides(
        ["trainer.algorithm.advantage_estimator=advest_maxpo", "trainer.algorithm.advest_k=3"]
    )
    algorithm = cfg.trainer.algorithm
    assert algorithm.advest_k == 3
    tlr, mask, uids, rewards, perm = _batch(3, 6, 4, seed=1)
    out = _skyrl(algorithm.advantage_estimator, tlr, mask, uids, config=algorithm)
    direct = registry.get("maxpo")(rewards, 3).reshape(-1)[perm]  # the config wins over K = 2
    torch.testing.assert_close(out[:, 0], direct, rtol=0, atol=0)
    out2 = _skyrl("advest_maxpo", tlr, mask, uids)  # SkyRL's own config: register's K
    torch.testing.assert_close(out2[:, 0], registry.get("maxpo")(rewards, 2).reshape(-1)[perm])


def _shaped_grpo(tlr: torch.Tensor, mask: torch.Tensor, uids: list[str]) -> torch.Tensor:
    """``[bs, T]``: advest's grpo of the rows' summed rewards shaped by gr3 (α = 0.5) by their
    response lengths, per uid (``by_group``): what a shaped ``advest_grpo`` must give."""
    made = shaping.shaping("gr3", alpha=0.5)
    want = by_group("grpo", tlr.sum(-1), uids, shaping=made, lengths=mask.sum(-1))
    assert not torch.equal(want, by_group("grpo", tlr.sum(-1), uids))  # the shaping acts here
    return want[:, None] * mask


def test_a_shaping_given_to_register_reaches_skyrls_compute_advantages_and_returns() -> None:
    tlr, mask, uids, _, _ = _batch(4, 5, 8, seed=9)
    want = _shaped_grpo(tlr, mask, uids)
    integration.register(k=2, shaping="gr3", shaping_options={"alpha": 0.5})
    try:
        out = _skyrl("advest_grpo", tlr, mask, uids)
    finally:
        integration.register(k=2)  # the other tests' estimators: no shaping
    torch.testing.assert_close(out, want, rtol=0, atol=0)


@dataclass
class ShapingAlgorithmConfig(AlgorithmConfig):
    """SkyRL's documented way to add a config field: subclass the algorithm config."""

    advest_shaping: str | None = None


def test_a_shaping_comes_from_an_advest_shaping_field_of_skyrls_config() -> None:
    integration.register(k=2)
    Config = make_config(algorithm_cls=ShapingAlgorithmConfig)
    cfg = Config.from_cli_overrides(
        [
            "trainer.algorithm.advantage_estimator=advest_grpo",
            "trainer.algorithm.advest_shaping=gr3",
        ]
    )
    algorithm = cfg.trainer.algorithm
    assert algorithm.advest_shaping == "gr3"
    tlr, mask, uids, _, _ = _batch(4, 5, 8, seed=9)
    want = _shaped_grpo(tlr, mask, uids)  # gr3's default α is 0.5
    out = _skyrl(algorithm.advantage_estimator, tlr, mask, uids, config=algorithm)
    torch.testing.assert_close(out, want, rtol=0, atol=0)


def test_a_max_at_k_estimator_without_k_says_where_k_goes() -> None:
    integration.register()  # replaces the K = 2 entries with K-less ones
    tlr, mask, uids, _, _ = _batch(2, 4, 3, seed=2)
    try:
        with pytest.raises(ValueError, match=r"register\(k=K\).*advest_k"):
            _skyrl("advest_maxpo", tlr, mask, uids)
    finally:
        integration.register(k=2)


def test_register_is_idempotent_and_a_new_k_replaces_the_old() -> None:
    Registry = ppo_utils.AdvantageEstimatorRegistry
    integration.register(k=2)
    first = Registry.get("advest_maxpo")
    integration.register(k=2)  # SkyRL's registry raises on a second register of a name
    assert Registry.get("advest_maxpo") is first
    integration.register(k=3)
    assert Registry.get("advest_maxpo") == integration.Estimator("maxpo", 3)
    assert Registry.list_available().count("advest_maxpo") == 1
    integration.register(k=2)


def test_groups_of_unequal_size_each_get_their_own_advantages() -> None:
    """A multi-turn or dynamic-sampling batch: uids with 2, 3 and 5 samples, interleaved."""
    integration.register(k=2)
    sizes = {"a": 3, "b": 5, "c": 2, "d": 5}
    gen = torch.Generator().manual_seed(7)
    order = torch.randperm(sum(sizes.values()), generator=gen).numpy()
    uids = list(np.array([u for u, n in sizes.items() for _ in range(n)])[order])
    scores = torch.randint(0, 4, (len(uids),), generator=gen).float()
    mask = torch.ones(len(uids), 3, dtype=torch.int64)
    tlr = torch.zeros(len(uids), 3)
    tlr[:, -1] = scores
    out = _skyrl("advest_rloo", tlr, mask, uids)[:, -1]
    for uid in sizes:
        rows = np.flatnonzero(np.array(uids) == uid)
        direct = registry.get("rloo")(scores[rows][None, :])[0]
        torch.testing.assert_close(out[rows], direct, rtol=0, atol=0)


@pytest.mark.parametrize("binary", [True, False], ids=["pass-fail", "five-levels"])
def test_skyrls_own_maxrl_is_advests_maxrl_with_skyrls_convention(binary: bool) -> None:
    """SkyRL 0.4.0's ``maxrl`` (its own registered estimator, through the function its trainer
    calls) against advest's ``maxrl`` with ``convention="skyrl-0.4.0"``, per uid, on the same
    float32 scores: groups of 1, 2, 5 and 8 samples, interleaved. SkyRL computes in float32 and
    advest in float64, so they agree to float32 rounding of |A| (the spread of the rewards over
    r̄ + ε); advest's own convention (no ε, a group of one gives 0) does not."""
    sizes = {"one": 1, "two": 2, "five": 5, "eight": 8, "eight-b": 8}
    gen = torch.Generator().manual_seed(11 + binary)
    order = torch.randperm(sum(sizes.values()), generator=gen).numpy()
    uids = list(np.array([u for u, n in sizes.items() for _ in range(n)])[order])
    levels = 2 if binary else 5
    scores = torch.randint(0, levels, (len(uids),), generator=gen).float() / (levels - 1)
    mask = torch.ones(len(uids), 3, dtype=torch.int64)
    tlr = torch.zeros(len(uids), 3)
    tlr[:, -1] = scores
    out = _skyrl("maxrl", tlr.clone(), mask, uids)[:, -1]
    worst, differs = 0.0, False
    for uid in sizes:
        rows = np.flatnonzero(np.array(uids) == uid)
        group = scores[rows][None, :].double()  # [1, G]
        direct = registry.get("maxrl")(group, convention="skyrl-0.4.0")[0]
        scale = float(direct.abs().max())
        err = float((out[rows].double() - direct).abs().max())
        assert err <= 4 * torch.finfo(torch.float32).eps * scale, (uid, err, scale)
        worst = max(worst, err)
        differs |= not torch.allclose(registry.get("maxrl")(group)[0], direct, rtol=0, atol=1e-9)
    assert differs  # the default convention is not SkyRL's
    print(f"SkyRL maxrl vs advest maxrl(convention='skyrl-0.4.0'): max |diff| = {worst:.2g}")


def test_an_estimators_error_names_skyrls_uid_and_batch_rows() -> None:
    integration.register(k=2)
    tlr, mask, uids, _, _ = _batch(3, 4, 5, seed=3)
    same = np.flatnonzero(np.array(uids) == uids[5])  # the batch rows of row 5's prompt
    tlr[int(same[1]), 0] = float("nan")
    rows = ", ".join(str(int(r)) for r in same)
    with pytest.raises(ValueError, match=f"uid '{uids[5]}' \\(SkyRL batch rows {rows}\\)"):
        _skyrl("advest_grpo", tlr, mask, uids)


def test_grpo_norm_by_std_false_is_dr_grpo_for_grpo_and_refused_elsewhere() -> None:
    integration.register(k=2)
    tlr, mask, uids, rewards, perm = _batch(4, 4, 3, seed=4)
    out = _skyrl("advest_grpo", tlr, mask, uids, grpo_norm_by_std=False)
    direct = registry.get("dr_grpo")(rewards).reshape(-1)[perm]
    torch.testing.assert_close(out, direct[:, None] * mask, rtol=0, atol=0)
    ours = _skyrl("grpo", tlr.clone(), mask, uids, grpo_norm_by_std=False)  # SkyRL's own
    torch.testing.assert_close(out, ours, rtol=0, atol=1e-6)
    with pytest.raises(ValueError, match="grpo_norm_by_std=false has no meaning for advest_maxpo"):
        _skyrl("advest_maxpo", tlr, mask, uids, grpo_norm_by_std=False)


DRIVER = """
import sys

import ray
from skyrl.train.config import SkyRLTrainConfig
from skyrl.train.utils.utils import initialize_ray, validate_cfg

from advest.integrations.skyrl import register

register(k=2)  # every advest_<name>; K for the max@K ones

@ray.remote(num_cpus=1)
def entrypoint(cfg):  # in place of SkyRL's skyrl_entrypoint: a Ray worker, a fresh interpreter
    import sys
    import torch
    from skyrl.backends.skyrl_train.utils import ppo_utils

    before = any(m.startswith("advest") for m in sys.modules)
    tlr = torch.zeros(4, 2)
    tlr[:, -1] = torch.tensor([0.0, 1.0, 3.0, 2.0])
    algorithm = cfg.trainer.algorithm
    adv, _ = ppo_utils.compute_advantages_and_returns(  # as RayPPOTrainer calls it
        token_level_rewards=tlr, response_mask=torch.ones(4, 2), index=["u"] * 4,
        adv_estimator=algorithm.advantage_estimator, config=algorithm, values=None,
        gamma=algorithm.gamma, lambd=algorithm.lambd, grpo_norm_by_std=algorithm.grpo_norm_by_std,
    )
    return before, "advest.integrations.skyrl" in sys.modules, adv[:, -1].tolist()

cfg = SkyRLTrainConfig.from_cli_overrides(sys.argv[1:])
validate_cfg(cfg)
initialize_ray(cfg)  # ray.init, then sync_registries(): advest's estimators reach every worker
try:
    print("RESULT", ray.get(entrypoint.remote(cfg), timeout=600))
finally:
    ray.shutdown()
"""


def test_a_ray_worker_resolves_advest_maxpo_after_the_driver_registers(tmp_path: Path) -> None:
    script = tmp_path / "main_advest.py"
    script.write_text(DRIVER)
    overrides = [
        "trainer.algorithm.advantage_estimator=advest_maxpo",
        "trainer.logger=console",  # SkyRL's default, wandb, needs an API key
        f"trainer.log_path={tmp_path / 'logs'}",
    ]
    run = subprocess.run(
        [sys.executable, str(script), *overrides], capture_output=True, text=True, timeout=900,
        cwd=tmp_path, env={**os.environ, "RAY_num_cpus": "1"},
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    line = next(x for x in run.stdout.splitlines() if x.startswith("RESULT "))
    before, after, adv = eval(line.removeprefix("RESULT "))
    assert not before  # the worker had not imported advest before it asked SkyRL's registry
    assert after  # SkyRL's registry unpickled advest's estimator, importing advest there
    expected = registry.get("maxpo")(torch.tensor([[0.0, 1.0, 3.0, 2.0]]), 2)[0].tolist()
    assert adv == pytest.approx(expected, abs=1e-6)
