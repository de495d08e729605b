"""The values table's paired MSE differences: the sign, the verdict, and that problems (not
states) are resampled."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from advest.experiments.values import paired as values_paired


def _rows(errors: dict[str, list[float]], per_problem: int = 1) -> list[dict[str, Any]]:
    """One state per entry; ``errors[key][i]`` is key's error on state i (V_MC = 0.5)."""
    n = len(errors["group_mean"])
    return [{"problem": f"p{i // per_problem}", "v_mc": 0.5,
             **{k: 0.5 + e[i] for k, e in errors.items()}} for i in range(n)]  # fmt: skip


def test_the_difference_is_the_mse_difference_on_the_same_states() -> None:
    rng = np.random.default_rng(0)
    g, o = rng.normal(0, 0.1, 200), rng.normal(0, 0.3, 200)
    mean, lo, hi = values_paired.paired(_rows({"group_mean": list(g), "other": list(o)}), "other")
    assert mean == pytest.approx(float((o**2).mean() - (g**2).mean()))
    assert lo < mean < hi
    assert values_paired.word(lo, hi) == "higher"
    mean, lo, hi = values_paired.paired(_rows({"group_mean": list(o), "other": list(g)}), "other")
    assert values_paired.word(lo, hi) == "lower"


def test_a_copy_of_the_group_mean_ties() -> None:
    g = list(np.random.default_rng(1).normal(0, 0.1, 50))
    mean, lo, hi = values_paired.paired(_rows({"group_mean": g, "same": g}), "same")
    assert (mean, lo, hi) == (0.0, 0.0, 0.0)
    assert values_paired.word(lo, hi) == "no measured difference"


def test_problems_are_resampled_with_their_states() -> None:
    # 4 problems × 50 states: on two problems the other baseline is worse on every state, on
    # two better. Resampling states would give a narrow interval; resampling problems cannot.
    other = [0.3] * 100 + [0.0] * 100
    g = [0.0] * 100 + [0.3] * 100
    mean, lo, hi = values_paired.paired(
        _rows({"group_mean": g, "other": other}, per_problem=50), "other"
    )
    assert mean == pytest.approx(0.0)
    assert hi - lo > 0.05
    assert values_paired.word(lo, hi) == "no measured difference"


def test_the_table_leaves_out_the_reference_and_prints_each_verdict() -> None:
    rng = np.random.default_rng(2)
    g, o = list(rng.normal(0, 0.1, 100)), list(rng.normal(0, 0.3, 100))
    lines = values_paired.table(_rows({"group_mean": g, "worse": o}), ["group_mean", "worse"])
    rows = [x for x in lines if x.startswith("| worse") or x.startswith("| group_mean |")]
    assert len(rows) == 1 and rows[0].endswith("| higher |")


def test_the_honest_reference_counts_the_all_zero_states_and_compares_without_them() -> None:
    rng = np.random.default_rng(3)
    keys = ["group_mean", "loo_mean", "other"]
    live = [{"problem": f"p{i}", "v_mc": 0.5, "group_mean": 0.5 + rng.normal(0, 0.1),
             "loo_mean": 0.5 + rng.normal(0, 0.1), "other": 0.5 + rng.normal(0, 0.3)}
            for i in range(60)]  # fmt: skip
    dead = [{"problem": f"z{i}", **dict.fromkeys(["v_mc", *keys], 0.0)} for i in range(40)]
    lines = values_paired.honest_table(live + dead, keys)
    assert "over all 100 states, of which 40 are all zero" in lines[0]
    assert "over the 60 others" in lines[0]
    [row] = [x for x in lines if x.startswith("| other |")]
    every = values_paired.paired(live + dead, "other", ref="loo_mean")[0]
    alive = values_paired.paired(live, "other", ref="loo_mean")[0]
    assert every == pytest.approx(alive * 60 / 100)  # the zero states only dilute the mean
    assert row.startswith(f"| other | {every:+.4f} [") and f"| {alive:+.4f} [" in row
    assert not any(x.startswith("| loo_mean |") for x in lines)
