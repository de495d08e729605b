"""The oracle on the project's own estimators gives the verdicts the notes predict, and
`advest check` behaves as a command (table, JSON, exit codes)."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest

import advest.fast.group
import advest.fast.maxk  # noqa: F401  (binds the submodule used as fast.maxk)
from advest import fast
from advest.spec import oracle
from advest.training.cli import main


def _verdicts(fn: object, family: oracle.Family, k: int = 2) -> dict[str, str]:
    return {f.prop: f.verdict for f in oracle.check(fn, family, k)}  # type: ignore[arg-type]


def test_maxpo_is_the_canonical_advantage_and_unbiased() -> None:
    v = _verdicts(fast.maxk.maxpo, "maxk")
    assert v["relation to canonical"] == "canonical"
    assert v["unbiased"].startswith("yes, E[ĝ] = 2·∇J")  # N/K = 4/2
    assert v["centred"] == "yes" and v["shift invariant"] == "yes"


def test_chen_raw_is_proportional_with_n_minus_k_over_n() -> None:
    raw = functools.partial(fast.maxk.chen_passk, normalize=False)
    v = _verdicts(raw, "maxk")
    assert v["relation to canonical"].startswith("proportional, c = 3/4")  # (N−K)/N, N = 8, K = 2


def test_normalised_estimators_are_normalised_canonical_and_biased() -> None:
    for fn in (fast.maxk.bagirov_zscore, fast.maxk.chen_passk):
        v = _verdicts(fn, "maxk")
        assert v["relation to canonical"].startswith("normalised canonical"), fn
        assert v["unbiased"].startswith("no"), fn


def test_ei_is_unbiased_but_not_centred_and_ei_l1o_is_biased() -> None:
    v = _verdicts(fast.maxk.ei, "maxk")
    assert v["unbiased"].startswith("yes") and v["centred"] == "no"
    assert _verdicts(fast.maxk.ei_l1o, "maxk")["unbiased"].startswith("no")


def test_group_baselines_for_the_mean_reward() -> None:
    assert _verdicts(fast.group.rloo, "outcome")["unbiased"].startswith("yes, E[ĝ] = 4·∇J")
    # dr_grpo: unbiased up to the fixed factor (G−1)/G of RLOO's: 3 = 4 · 3/4
    assert _verdicts(fast.group.dr_grpo, "outcome")["unbiased"].startswith("yes, E[ĝ] = 3·∇J")
    grpo = _verdicts(fast.group.grpo, "outcome")
    assert grpo["centred"] == "yes" and grpo["unbiased"].startswith("no")


@pytest.mark.parametrize("name", ["grpo", "dr_grpo", "rloo"])
def test_no_group_baseline_is_unbiased_for_max_at_k(name: str) -> None:
    fn = getattr(fast.group, name)
    findings = oracle.check(fn, "maxk", 2, signature="rewards")
    unbiased = next(f for f in findings if f.prop == "unbiased")
    assert unbiased.verdict.startswith("no")


def test_bad_input_behaviour_is_reported() -> None:
    v = _verdicts(fast.group.rloo, "outcome")
    assert v["on NaN rewards"].startswith("error: ValueError")
    assert v["on G = 1"].startswith("error: ValueError: rloo needs")
    assert v["on an all-equal group"].startswith("value [0.0")

    def naive(rewards: object) -> object:
        import torch

        assert isinstance(rewards, torch.Tensor)
        return (rewards - rewards.mean(-1, keepdim=True)) / rewards.std(-1, keepdim=True)

    v = _verdicts(naive, "outcome")
    assert v["on an all-equal group"] == "NaN in the output"


def test_check_command_prints_a_table_writes_json_and_uses_exit_codes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "report.json"
    assert (
        main(
            [
                "check",
                "advest.fast.maxk:canonical",
                "--family",
                "maxk",
                "--k",
                "2",
                "--json",
                str(out),
            ]
        )
        == 0
    )
    assert "relation to canonical    canonical" in capsys.readouterr().out
    assert {f["prop"] for f in json.loads(out.read_text())} >= {"centred", "unbiased"}
    assert main(["check", "no_such_module:fn"]) == 2
    assert "cannot import" in capsys.readouterr().err
    assert (
        main(
            ["check", "advest.fast.maxk:canonical", "--family", "maxk", "--signature", "k, rewards"]
        )
        == 2
    )
    assert "cannot call" in capsys.readouterr().err
