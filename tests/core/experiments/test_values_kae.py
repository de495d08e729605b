"""The KAE table of ``advest experiment values`` on a moving policy: each bandwidth is scored only
on the iterations where it has a history, against the group mean on the same rows, and the
difference is paired (same prompt and iteration)."""

from __future__ import annotations

from typing import Any

import pytest

from advest.experiments.values import kae as values_kae


def _rows(kae_error: float, mean_error: float, iterations: int = 4) -> list[dict[str, Any]]:
    rows = []
    for it in range(iterations):
        for n in values_kae.SAMPLES:
            for p in range(6):
                truth = 0.1 * p + 0.05 * it  # the policy moves: the truth changes per iteration
                live = {k: it > 0 and (it + 1) * h > 1 for k, h in values_kae.BANDWIDTHS.items()}
                got = {k: truth + kae_error if live[k] else None for k in values_kae.BANDWIDTHS}
                rows.append({"iteration": it, "n": n, "prompt": p, "v_mc": truth,
                             "group_mean": truth + mean_error, **got})  # fmt: skip
    return rows


def test_each_bandwidth_is_scored_where_it_has_a_history_and_paired_with_the_mean() -> None:
    out = values_kae.summarise(_rows(kae_error=0.1, mean_error=0.3), mc=48, reps=200, seed=0)
    assert out["drift"] == pytest.approx([0.25, 0.30, 0.35, 0.40])
    e = out["by_n"]["n=1"]
    # h = 1 has a history from the second iteration, h = 0.5 from the third (1 − 1/(i·h) > 0)
    assert e["kae_h1"]["iterations"] == [2, 3, 4] and e["kae_h05"]["iterations"] == [3, 4]
    assert e["kae_h1"]["rows"] == 18 and e["kae_h05"]["rows"] == 12
    h1 = e["kae_h1"]
    assert h1["kae_h1"]["mse"] == pytest.approx(0.01)
    assert h1["group_mean"]["mse"] == pytest.approx(0.09)
    assert h1["difference"]["mean"] == pytest.approx(-0.08)
    assert h1["difference"]["ci"] == pytest.approx([-0.08, -0.08])
    assert "(lower)" in "\n".join(values_kae.table({"policy": _policy(), **out}))


def test_a_kae_worse_than_the_mean_is_said_to_be_higher() -> None:
    out = values_kae.summarise(_rows(kae_error=0.3, mean_error=0.1), mc=48, reps=200, seed=0)
    text = "\n".join(values_kae.table({"policy": _policy(), **out}))
    assert "(higher)" in text and "(lower)" not in text


def test_a_tie_is_no_measured_difference() -> None:
    out = values_kae.summarise(_rows(kae_error=0.2, mean_error=-0.2), mc=48, reps=200, seed=0)
    text = "\n".join(values_kae.table({"policy": _policy(), **out}))
    assert "no measured difference" in text and "(lower)" not in text and "(higher)" not in text


def _policy() -> dict[str, Any]:
    return {"prompts": 6, "iterations": 4, "lr": 1e-3, "trained_on": 8, "lora_r": 16}


def test_a_values_run_without_any_reward_is_warned_about() -> None:
    from types import SimpleNamespace

    from advest.experiments import values

    a = SimpleNamespace(reward="exact", max_new_tokens=16)
    zero = [{"group_mean": 0.0, "v_mc": 0.0}] * 3
    said = values.no_signal([zero, zero, zero], a) or ""
    assert "first 3 problems is 0 (--reward exact, --max_new_tokens 16)" in said
    assert values.no_signal([zero, [{"group_mean": 0.0, "v_mc": 0.02}]], a) is None
