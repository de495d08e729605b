"""``advest experiment bandit``: the float64 closed form of ∇J against the exact rationals and
autograd, the batched estimate against a per-batch loop, and a quick run's outputs (their form,
not their values)."""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import torch

from advest.cli import main as cli_main
from advest.experiments import bandit
from advest.spec import bandit as exact

GOLDEN: list[dict[str, Any]] = json.loads(
    (Path(__file__).parents[3] / "spec" / "golden" / "bandit.json").read_text()
)["cases"]


@pytest.mark.parametrize("case", GOLDEN, ids=lambda c: f"N{c['N']}K{c['K']}A{len(c['pi'])}")
def test_float_closed_form_gradient_matches_the_exact_rational_gradient(
    case: dict[str, Any],
) -> None:
    pi = [Fraction(p) for p in case["pi"]]
    r = [Fraction(x) for x in case["r"]]
    logits = torch.log(torch.tensor([float(p) for p in pi], dtype=torch.float64))
    rf = torch.tensor([float(x) for x in r], dtype=torch.float64)
    got = bandit.exact_gradient(logits, rf, case["K"])
    want = torch.tensor([float(g) for g in exact.gradient(pi, r, case["K"])], dtype=torch.float64)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-14)
    objective = bandit.objective(torch.softmax(logits, 0), rf, case["K"])
    assert math.isclose(float(objective), float(exact.objective(pi, r, case["K"])), rel_tol=1e-12)


@pytest.mark.parametrize(("num_actions", "k"), [(2, 1), (7, 3), (300, 4), (1024, 7)])
def test_closed_form_gradient_equals_autograd_of_the_objective(num_actions: int, k: int) -> None:
    r, theta = bandit.instance(num_actions, seed=num_actions + k)
    theta.requires_grad_(True)
    bandit.objective(torch.softmax(theta, 0), r, k).backward()
    assert theta.grad is not None
    torch.testing.assert_close(bandit.exact_gradient(theta.detach(), r, k), theta.grad)


def test_batched_estimates_equal_a_loop_over_batches_of_the_score_formula() -> None:
    r, theta = bandit.instance(6, seed=3)
    pi = torch.softmax(theta, 0)
    actions = bandit.sample_actions(pi, 5, 4, torch.Generator().manual_seed(0))
    got = bandit.estimates("maxpo", actions, r, pi, 2)
    for m in range(5):
        adv = bandit.advantages("maxpo", r[actions[m]][None], 2)[0]
        score = torch.eye(6, dtype=torch.float64)[actions[m]] - pi  # [N, A]: e_a − π
        torch.testing.assert_close(got[m], (adv[:, None] * score).sum(0) / (4 / 2))


def test_sampled_actions_follow_the_policy() -> None:
    pi = torch.tensor([0.5, 0.3, 0.2], dtype=torch.float64)
    actions = bandit.sample_actions(pi, 20_000, 2, torch.Generator().manual_seed(1))
    freq = torch.bincount(actions.flatten(), minlength=3).double() / actions.numel()
    torch.testing.assert_close(freq, pi, atol=0.01, rtol=0)


def test_loglog_slope_recovers_a_power_law() -> None:
    xs = [1.0, 10.0, 100.0, 1000.0]
    assert math.isclose(bandit.loglog_slope(xs, [3 * x**-0.5 for x in xs]), -0.5)


def test_quick_run_writes_well_formed_config_metrics_plots_and_summary(tmp_path: Path) -> None:
    out = tmp_path / "bandit"
    assert cli_main(["experiment", "bandit", "--quick", "--out", str(out)]) == 0
    config = json.loads((out / "config.json").read_text())
    metrics = json.loads((out / "metrics.json").read_text())
    assert config["quick"] is True and metrics["config"] == config
    bias = metrics["bias"]
    assert set(bias["estimators"]) == set(config["estimators"])
    for d in bias["estimators"].values():
        assert len(d["error_mean_se"]) == len(bias["batches"])
        assert all(math.isfinite(x) for pair in d["error_mean_se"] for x in pair)
        assert math.isfinite(d["slope"][0]) and -1 <= d["cos"][0] <= 1
    for key, axis in (("variance_vs_actions", "actions"), ("variance_vs_k", "ks")):
        v = metrics[key]
        assert v["values"] == config[axis]
        for d in v["estimators"].values():
            assert len(d["variance"]) == len(v["values"])
            assert all(mean > 0 for mean, _ in d["variance"])
            assert len(d["ratio_to_ei"]) == len(v["values"])
    for png in ("figure1.png", "ratios.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = (out / "summary.md").read_text()
    assert "log-log slope" in text and "maxpo/ei" in text
    assert all(name in text for name in config["estimators"])


def test_bad_sizes_exit_with_a_message_naming_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["experiment", "bandit", "--quick", "--k", "8"]) == 2
    assert "--k" in capsys.readouterr().err
    assert cli_main(["experiment", "nope"]) == 2


def test_the_bandit_experiment_loads_neither_the_catalogue_nor_the_references() -> None:
    """Its scales come from spec.scales: the test catalogue imports every exact reference."""
    import json
    import subprocess
    import sys

    code = (
        "import json, sys, advest\n"
        "from advest.experiments import bandit\n"
        "scales = {n: bandit.pg_scale(n, 8, 2) for n in advest.names()}\n"
        "print(json.dumps([scales, sorted(m for m in sys.modules if m.startswith('advest'))]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300
    )
    scales, loaded = json.loads(done.stdout.splitlines()[-1])
    assert scales["maxpo"] == 4.0 and scales["rloo"] == 8.0 and scales["grpo"] is None
    assert not [m for m in loaded if m.startswith("advest.reference") or "catalogue" in m]


def test_maxrl_and_gdpo_run_in_the_bandit_on_two_rewards(tmp_path: Path) -> None:
    """Issue 26 item 6: MaxRL runs on pass/fail rewards against its own objective, GDPO on the
    two reward parts (no KeyError), each next to grpo and maxpo on the same sampled actions."""
    out = tmp_path / "bandit"
    names = ["ei", "grpo", "maxpo", "maxrl", "maxrl_unbiased", "gdpo"]
    argv = ["experiment", "bandit", "--quick", "--seeds", "1", "--out", str(out)]
    argv += ["--bias_batches", "4000", "--estimators", f"[{','.join(names)}]"]
    assert cli_main([*argv, "--format_weight", "0.5", "--actions", "[4]", "--ks", "[1]"]) == 0
    bias = json.loads((out / "metrics.json").read_text())["bias"]["estimators"]
    assert list(bias) == names
    # maxrl_unbiased divided by 1 estimates N Σ_k (1/k) ∇pass@k itself: mean close, c close to 1.
    assert bias["maxrl_unbiased"]["scale_divided_out"] == 1.0
    assert bias["maxrl_unbiased"]["cos"][0] > 0.99
    assert abs(bias["maxrl_unbiased"]["fitted_scale"][0] - 1) < 0.1
    assert bias["gdpo"]["scale_divided_out"] is None and bias["gdpo"]["cos"][0] > 0.5


def test_gdpo_sees_the_two_rewards_apart_and_the_others_their_weighted_sum() -> None:
    r, theta, parts, weights = bandit.reward_parts(6, seed=2, weight=0.5)
    assert parts.shape == (6, 2) and weights.tolist() == [1.0, 0.5]
    torch.testing.assert_close(r, parts[:, 0] + 0.5 * parts[:, 1], rtol=0, atol=0)
    assert torch.equal(parts[:, 0], bandit.instance(6, seed=2)[0])  # r unchanged by the weight
    actions = bandit.sample_actions(torch.softmax(theta, 0), 3, 4, torch.Generator().manual_seed(0))
    from advest.fast.gdpo import gdpo
    from advest.fast.group import grpo

    got = bandit.advantages("gdpo", r[actions], 2, parts[actions], weights)
    torch.testing.assert_close(got, gdpo(parts[actions], weights))
    torch.testing.assert_close(bandit.advantages("grpo", r[actions], 2), grpo(r[actions]))


def test_the_maxrl_target_is_n_times_the_harmonic_sum_of_pass_at_k_gradients() -> None:
    """spec/maxrl.md claim 1 on one bandit: ∇pass@k = k (1 − p)^(k−1) ∇p, so the target is
    N (1 − (1 − p)^N)/p ∇p, with ∇p the gradient of the pass rate p = π(r > 0)."""
    r, theta = bandit.instance(5, seed=1)
    seen = (r > 0).double()
    p = float(torch.softmax(theta, 0) @ seen)
    grad_p = bandit.exact_gradient(theta, seen, 1)
    want = 6 * (1 - (1 - p) ** 6) / p * grad_p
    torch.testing.assert_close(bandit.target_gradient("maxrl", theta, seen, 6, 2), want)
    torch.testing.assert_close(
        bandit.target_gradient("grpo", theta, seen, 6, 2), bandit.exact_gradient(theta, seen, 2)
    )
