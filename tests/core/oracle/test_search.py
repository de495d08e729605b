"""The oracle's search (spec/oracle.md, "Searched properties"): for each family a planted bug that
fires only on inputs no explicit example contains is found, with a shrunk input that reproduces
it when pasted; the correct twin passes; the same budget gives the same findings; a database
replays what it found."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from advest.oracle.conventions.harness import Guard, Plain
from advest.oracle.conventions.rows import RowCall
from advest.oracle.properties import episodes, grouped, sequence
from advest.oracle.properties import plain as judged_plain
from advest.oracle.properties import rows as judged
from advest.oracle.properties.findings import Finding
from advest.oracle.reports import report
from advest.oracle.reports.token_report import bind
from advest.oracle.search import Budget, plain, rows, search, tokens
from advest.oracle.search import episodes as search_episodes
from advest.oracle.search import shaping as search_shaping

from . import search_plants as plants

BUDGET = Budget()
"""The default budget: what a user's ``advest check`` searches."""
HELD = [
    Finding(p, "yes", "")
    for p in (
        "masked rows",
        "ids relabelled",
        "row order",
        "ragged groups",
        "dropped groups",
        "0 at padding",
        "padding values ignored",
    )
]
"""Explicit verdicts that let every searched property of the rows and tokens run."""


def _plain(fn: Callable[..., Any]) -> list[Finding]:
    est = Plain(fn, ["rewards"], 1, Guard())
    d = plain.domain(est, 8, torch.float32, binary=False)
    assert d is not None
    held = [Finding(p, "yes", "") for p in ("centred", "permutation equivariant")]
    return [search(p, BUDGET, "plain") for p in plain.properties(est, d, held)]


def _rows(fn: Callable[..., Any]) -> list[Finding]:
    est = RowCall(fn, Guard())
    d = rows.domain(est, 8, torch.float32)
    return [search(p, BUDGET, "rows") for p in rows.properties(est, d, HELD, coupled=False)]


def _tokens(fn: Callable[..., Any]) -> list[Finding]:
    est = bind(fn, "plain", {}, Guard())
    return [search(p, BUDGET, "token") for p in tokens.properties(est, HELD)]


def _episodes(fn: Callable[..., Any]) -> list[Finding]:
    return search_episodes.searched(fn, [], BUDGET)


def _by_prop(findings: list[Finding]) -> dict[str, Finding]:
    return {f.prop: f for f in findings}


def _pasted(snippet: str, fn: Callable[..., Any]) -> dict[str, Any]:
    """The names a shrunk input's snippet defines, run as a maintainer would paste it."""
    names: dict[str, Any] = {"torch": torch, "estimator": fn}
    with warnings.catch_warnings():  # a std of one sample warns: the NaN is what is asserted
        warnings.simplefilter("ignore")
        exec(snippet, names)  # the snippet is the oracle's own output, built from drawn tensors
    return names


def test_a_nan_for_a_group_of_one_is_found_at_the_smallest_input() -> None:
    found = _by_prop(_plain(plants.grpo_bessel))["finite output"]
    assert found.verdict == "no: non-finite output"
    assert found.counterexample is not None
    names = _pasted(found.counterexample["input"], plants.grpo_bessel)
    assert names["rewards"].shape == (1, 1)  # shrunk: one group of one sample
    assert not bool(names["A"].isfinite().all())  # the pasted snippet reproduces it
    assert all(f.verdict == "yes" for f in _plain(plants.grpo))


def test_a_nan_in_a_masked_row_reaching_its_group_is_found_and_reproduces() -> None:
    found = _by_prop(_rows(plants.flat_mean_multiplied))
    leak = found["masked rows"]
    assert leak.verdict == "no: a masked row's value reaches the valid rows"
    assert leak.counterexample is not None
    names = _pasted(leak.counterexample["input"], plants.flat_mean_multiplied)
    valid = names["valid"]
    assert len(names["index"]) == 2 and int(valid.sum()) == 1  # one valid row, one masked
    assert math.isnan(float(names["rewards"][~valid][0]))
    out = plants.flat_mean_multiplied(names["rewards"], names["index"], valid)
    assert not bool(out[valid].isfinite().all())
    assert all(f.verdict == "yes" for f in _rows(plants.flat_mean)), _rows(plants.flat_mean)


def test_a_whitening_with_bessels_correction_fails_on_one_valid_token() -> None:
    found = _by_prop(_tokens(plants.token_whitened_bessel))["finite output"]
    assert found.verdict == "no: non-finite output"
    assert found.counterexample is not None
    names = _pasted(found.counterexample["input"].split("; responses")[0], None)  # type: ignore[arg-type]
    assert int(names["mask"].sum()) == 1  # the batch's mask leaves one valid token
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = plants.token_whitened_bessel(names["rewards"], names["mask"])
    assert not bool(out[names["mask"]].isfinite().all())
    assert all(f.verdict == "yes" for f in _tokens(plants.token_whitened))


def test_a_nan_in_an_unused_turn_slot_reaching_the_return_is_found() -> None:
    found = _by_prop(_episodes(plants.episode_mean_multiplied))
    assert found["finite output"].verdict == "no: non-finite output"
    example = found["finite output"].counterexample
    assert example is not None
    names = _pasted(example["input"], plants.episode_mean_multiplied)
    out = plants.episode_mean_multiplied(names["turn_rewards"], names["turn_ids"])
    assert not bool(out[names["turn_ids"] >= 0].isfinite().all())
    assert all(f.verdict == "yes" for f in _episodes(plants.episode_mean))


def test_an_objective_defined_at_n_1_is_checked_there() -> None:
    with pytest.raises(Exception, match="not defined for groups of N < K"):
        report.validate("maxk", 2, [1], "float32")
    report.validate("maxrl", 1, [1], "float32")  # accepted: pass@1 is the objective at N = 1
    silent = report.check(plants.maxrl_silent_at_one, "maxrl", ns=[1], budget=None, float64=False)
    unbiased = [f for f in silent if f.prop == "unbiased"]
    assert [f.verdict.split(" for")[0] for f in unbiased] == ["no: E[ĝ] = 0"]
    assert report.default_ns("maxrl", 1)[0] == 1


def test_a_property_named_for_a_defect_reads_no_when_it_holds_and_yes_when_found() -> None:
    """ "couples groups" holds as "no": a searched group-independent estimator keeps that
    verdict, and one that whitens by the batch reads "yes: ..." with its counterexample."""

    def batch_whitened(rewards: torch.Tensor) -> torch.Tensor:
        centred = rewards - rewards.mean(-1, keepdim=True)
        return centred / (centred.std() + 1e-6) if centred.numel() > 1 else centred

    def coupling(fn: Callable[..., Any]) -> Finding:
        est = Plain(fn, ["rewards"], 1, Guard())
        d = plain.domain(est, 8, torch.float32, binary=False)
        assert d is not None
        held = [Finding("couples groups", "no", "")]
        (found,) = [f for f in plain.properties(est, d, held) if f.prop == "couples groups"]
        return search(found, BUDGET, "plain")

    independent = coupling(plants.grpo)
    assert independent.verdict == "no" and independent.counterexample is None
    coupled = coupling(batch_whitened)
    assert coupled.verdict == "yes: a group's advantages depend on the other groups"
    assert coupled.counterexample is not None


def test_a_shaping_whose_nan_is_at_a_group_of_one_is_found_and_reproduces() -> None:
    """The explicit shaping inputs have G = 4; the search draws groups of 1..8 and finds the
    0·inf of a mean written over G − 1; the correct twin passes every searched invariant."""
    found = _by_prop([f for f in search_shaping.checked(plants.gr3_bessel_mean, BUDGET, False)
                      if f.searched])  # fmt: skip
    finite = found["finite"]
    assert finite.verdict == "no: non-finite output" and finite.counterexample is not None
    names = _pasted(finite.counterexample["input"], plants.gr3_bessel_mean)
    assert names["rewards"].shape[-1] == 1  # shrunk to a group of one
    assert not bool(names["A"].isfinite().all())
    fixed = search_shaping.checked(plants.gr3, BUDGET, False)
    assert {f.prop for f in fixed if f.searched} == {
        "finite",
        "centred",
        "pass_over_fail",
        "per_group",
    }
    assert all(f.verdict == "yes" for f in fixed), [(f.prop, f.evidence) for f in fixed]


def test_a_database_replays_a_failing_input_found_before(tmp_path: Path) -> None:
    est = RowCall(plants.flat_mean_multiplied, Guard())
    d = rows.domain(est, 8, torch.float32)
    item = rows.properties(est, d, HELD, coupled=False)[1]
    found = search(item, Budget(database=str(tmp_path), target="t"), "rows")
    assert found.verdict.startswith("no") and any(tmp_path.iterdir())
    # one drawn input and another seed: found again only because the database replays it
    replayed = search(item, Budget(examples=1, seed=99, database=str(tmp_path), target="t"), "rows")
    assert replayed.verdict == found.verdict
    fresh = search(item, Budget(examples=1, seed=99), "rows")
    assert fresh.verdict == "yes"


def test_bad_budgets_are_refused_naming_the_flag() -> None:
    with pytest.raises(ValueError, match="--examples must be an integer >= 1"):
        Budget(examples=0)


def test_the_grouped_rows_of_a_masked_multiplication_pass_the_explicit_inputs() -> None:
    """The explicit masked-rows row holds finite rewards only: it cannot see this bug, which is
    why the search exists (the planted bug is outside every explicit example)."""
    est = RowCall(plants.flat_mean_multiplied, Guard())
    assert grouped.masked_rows(est, [3, 3], torch.float32).verdict == "yes"
    assert (
        episodes.observation_tokens(
            plants.episode_mean_multiplied, episodes.random_groups(0)
        ).verdict
        == "yes"
    )


def test_the_rows_comparison_allows_float64_s_floor_and_no_more() -> None:
    """Rows compared within spec/oracle.md's rule, float64's floor of 1e-12·|A| included: the
    same batch in another row order moved james_stein's advantages by two ulps (a searched
    "no" until the floor was added); an error of 1e-10 relative is still beyond it."""
    r = torch.tensor([0.0, 1.0, 0.0, 7.0, 0.75, 0.75, 0.75, 0.75], dtype=torch.float64)
    ids = [0, 0, 1, 1, 2, 2, 3, 3]
    a = torch.tensor([-0.5773671095371088, -0.18072268671799185, -1.5714844075889511,
                      6.428577306061995, -1.4722890746871966, -0.5773671095371088,
                      -0.5773671095371088, -0.5773671095371088], dtype=torch.float64)  # fmt: skip
    b = torch.tensor([-0.5773671095371087, -0.18072268671799135, -1.5714844075889383,
                      6.428577306061993, -1.4722890746871964, -0.5773671095371087,
                      -0.5773671095371088, -0.5773671095371088], dtype=torch.float64)  # fmt: skip
    assert judged.excess(a, b, r, ids, torch.float64) <= 1
    assert judged.excess(a, a * (1 + 1e-10), r, ids, torch.float64) > 1


def test_the_explicit_inputs_and_the_search_judge_by_one_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A property is one check of one input, which both surfaces run: a rule planted in that
    check (an allowance of 0, so that every rounding error breaks it) turns the explicit verdict
    and the searched one together, for ``[B, G]`` (centred) and for flat rows (masked rows)."""
    est = Plain(plants.grpo, ["rewards"], 1, Guard())
    batches = [
        ("normal on a 1/32 grid", torch.randn(8, 5, generator=torch.Generator().manual_seed(0)))
    ]
    row_est = RowCall(plants.flat_mean, Guard())
    d = rows.domain(row_est, 4, torch.float32)
    masked = next(p for p in rows.properties(row_est, d, HELD, False) if p.prop == "masked rows")

    def verdicts() -> list[str]:
        return [
            sequence.centred(est, batches, torch.float32).verdict,
            _by_prop(_plain(plants.grpo))["centred"].verdict,
            grouped.masked_rows(row_est, [3, 3], torch.float32).verdict,
            search(masked, BUDGET, "rows").verdict,
        ]

    assert verdicts() == ["yes"] * 4
    monkeypatch.setattr(judged_plain, "allowance", lambda r, *a, dtype: torch.zeros_like(r[:, :1]))
    monkeypatch.setattr(judged, "excess", lambda *a: math.inf)
    after = verdicts()
    assert after[0] == "no" and after[1].startswith("no: "), after
    assert after[2] == "no" and after[3].startswith("no: "), after


def _length_weighted(rewards: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """OPO's baseline: each group's length-weighted mean reward (group-local)."""
    w = lengths.to(rewards.dtype)
    return rewards - (w * rewards).sum(-1, keepdim=True) / w.sum(-1, keepdim=True)


def test_group_independence_keeps_each_sample_s_response_length() -> None:
    """A group alone and beside others is the same responses: each sample keeps its length. Drawn
    afresh for each shape, the lengths of a group alone differed from its lengths in the batch,
    and verl's ``opo`` (a length-weighted baseline, group-local) read "couples groups: yes"."""
    est = Plain(_length_weighted, ["rewards", "lengths"], 1, Guard())
    r = torch.tensor([[0.0, 1.0], [0.0, 0.0]], dtype=torch.float64)
    assert judged_plain.alone(est, torch.float32)(judged_plain.Grid(r)) is None
    d = plain.domain(est, 4, torch.float32, binary=False)
    assert d is not None
    held = [Finding("couples groups", "no", "")]
    (item,) = [p for p in plain.properties(est, d, held) if p.prop == "couples groups"]
    assert search(item, BUDGET, "plain").verdict == "no"


def test_a_group_s_advantages_that_move_when_another_is_dropped_are_found() -> None:
    """Dropping a group must leave the others' advantages alone. A rescaling by the batch's
    largest reward above 1 couples the groups only where some reward exceeds 1, which no explicit
    input holds: the explicit row says "yes", the search finds a batch and shrinks it, and the
    shrunk batch, pasted, moves the others when group 0 goes."""
    est = RowCall(plants.flat_mean_rescaled, Guard())
    assert grouped.dropped_groups(est, [3, 3, 3, 3], torch.float32).verdict == "yes"
    found = _by_prop(_rows(plants.flat_mean_rescaled))["dropped groups"]
    assert found.verdict == "no: dropping a group moves the others", found.evidence
    assert found.counterexample is not None
    names = _pasted(found.counterexample["input"], plants.flat_mean_rescaled)
    r, ids, valid = names["rewards"], names["index"], names.get("valid")
    keep = torch.tensor([g != 0 for g in ids])
    full = plants.flat_mean_rescaled(r, ids, valid)[keep]
    sub = plants.flat_mean_rescaled(
        r[keep], [g for g in ids if g != 0], None if valid is None else valid[keep]
    )
    assert not torch.allclose(full, sub)
