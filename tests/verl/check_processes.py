"""advest in verl's process layout (run inside the verl environment, like check_verl.py): the
``verl.plugins`` entry point registers advest's estimators in a fresh interpreter that never
imports advest, and in a Ray actor, as verl's ``TaskRunner`` is; the documented settings compose
against verl's own ``ppo_trainer`` config with Hydra."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

FRESH = """
import sys
import torch
from verl.trainer.ppo.core_algos import get_adv_estimator_fn
fn = get_adv_estimator_fn("advest_maxpo")
scores = torch.tensor([0.0, 1.0, 3.0, 2.0])
tlr = torch.zeros(4, 2); tlr[:, -1] = scores
adv, _ = fn(tlr, torch.ones(4, 2), ["u"] * 4, config={"advest_k": 2})
print("ADV", adv[:, -1].tolist())
print("IMPORTED_BY_PLUGIN", "advest.integrations.verl_plugin" in sys.modules)
"""


def _expected() -> list[float]:
    import torch

    from advest.fast import registry

    return registry.get("maxpo")(torch.tensor([[0.0, 1.0, 3.0, 2.0]]), 2)[0].tolist()


def test_a_fresh_interpreter_resolves_advest_maxpo_without_importing_advest() -> None:
    assert "advest" not in FRESH.replace("advest_", "").replace("advest.integrations", "")
    run = subprocess.run(
        [sys.executable, "-c", FRESH], capture_output=True, text=True, timeout=600,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"PYTHONPATH": ""},
        cwd="/",
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in run.stdout.splitlines() if " " in line)
    assert lines["IMPORTED_BY_PLUGIN"] == "True"
    assert eval(lines["ADV"]) == pytest.approx(_expected(), abs=1e-6)


def test_a_ray_actor_resolves_and_computes_advest_maxpo() -> None:
    import ray

    @ray.remote(num_cpus=1)
    class Runner:  # verl's TaskRunner is a Ray actor like this one: a fresh interpreter
        def run(self) -> tuple[bool, list[float]]:
            import sys

            import torch
            from verl.trainer.ppo.core_algos import get_adv_estimator_fn

            fn = get_adv_estimator_fn("advest_maxpo")
            tlr = torch.zeros(4, 2)
            tlr[:, -1] = torch.tensor([0.0, 1.0, 3.0, 2.0])
            adv, _ = fn(tlr, torch.ones(4, 2), ["u"] * 4, config={"advest_k": 2})
            return "advest.integrations.verl_plugin" in sys.modules, adv[:, -1].tolist()

    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        plugin, adv = ray.get(Runner.remote().run.remote(), timeout=600)  # type: ignore[attr-defined]
    finally:
        ray.shutdown()
    assert plugin
    assert adv == pytest.approx(_expected(), abs=1e-6)


def _compose(overrides: list[str]) -> object:
    import verl
    from hydra import compose, initialize_config_dir

    config_dir = Path(verl.__file__).parent / "trainer" / "config"
    with initialize_config_dir(config_dir=str(config_dir), version_base=None):
        return compose(config_name="ppo_trainer", overrides=overrides)


def test_the_documented_overrides_compose_against_verls_ppo_trainer_config() -> None:
    import torch
    from verl.trainer.ppo.core_algos import get_adv_estimator_fn

    cfg = _compose(["algorithm.adv_estimator=advest_maxpo", "+algorithm.advest_k=2"])
    algorithm = cfg.algorithm  # type: ignore[attr-defined]
    assert algorithm.advest_k == 2
    fn = get_adv_estimator_fn(algorithm.adv_estimator)
    tlr = torch.zeros(4, 2)
    tlr[:, -1] = torch.tensor([0.0, 1.0, 3.0, 2.0])
    adv, _ = fn(tlr, torch.ones(4, 2), ["u"] * 4, config=algorithm)
    assert adv[:, -1].tolist() == pytest.approx(_expected(), abs=1e-6)
    # without the '+', Hydra refuses the key verl's config does not declare: why the docs say '+'
    with pytest.raises(Exception, match="advest_k"):
        _compose(["algorithm.adv_estimator=advest_maxpo", "algorithm.advest_k=2"])
