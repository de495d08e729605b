"""The oracle's grouped input model (oracle/conventions/rows.py, oracle/properties/grouped.py,
oracle/properties/extremes.py): every verdict row fails a planted estimator and passes a correct
one, and every registered estimator, called on flat rows through ``advest.fast.by_group``, gets
the rows it claims."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch import Tensor

from advest.fast import by_group
from advest.oracle.conventions.harness import Guard
from advest.oracle.conventions.rows import GroupList, NemoRows, RowCall, labellings
from advest.oracle.properties.extremes import low_precision, magnitude
from advest.oracle.properties.grouped import describe, grouped_findings
from advest.oracle.reports.catalogue import CATALOGUE, Row
from advest.testing import assert_estimator

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "scripts"))
import gallery_flat_bugs as bugs  # noqa: E402

ROWS = ("ids relabelled", "row order", "ragged groups", "masked rows", "dropped groups")


def _rows(fn: Callable[..., Tensor], n: int = 4) -> dict[str, Any]:
    est = RowCall(fn, Guard())
    found = describe(grouped_findings(est, n, torch.float32))
    found["magnitude bound"] = magnitude(est, n, torch.float32).verdict
    for f in low_precision(est, n):
        found[f"low-precision rewards {f.dtype}"] = f.verdict
    return found


CORRECT = _rows(bugs.nemo_3837_fixed)


def test_a_correct_flat_estimator_passes_every_row() -> None:
    assert set(CORRECT.values()) == {"yes"}, CORRECT


PLANTED = [
    (bugs.verl_7150_buggy, "ids relabelled", "no: raises"),
    (bugs.areal_1419_buggy, "row order", "no"),
    (bugs.slime_2230_buggy, "ragged groups", "no"),
    (bugs.nemo_3837_buggy, "masked rows", "no"),
    (bugs.verl_6452_buggy, "masked rows", "no"),
    (bugs.slime_2230_buggy, "dropped groups", "no"),
    (bugs.areal_1673_buggy, "magnitude bound", "no"),
    (bugs.openrlhf_1334_buggy, "low-precision rewards bfloat16", "no"),
]


@pytest.mark.parametrize(
    ("fn", "row", "verdict"), PLANTED, ids=[f"{r}-{f.__name__}" for f, r, _ in PLANTED]
)
def test_each_row_fails_its_planted_estimator(
    fn: Callable[..., Tensor], row: str, verdict: str
) -> None:
    assert _rows(fn)[row] == verdict


def test_a_leave_one_out_std_that_divides_by_epsilon_breaks_the_magnitude_bound() -> None:
    """NeMo-RL #1518: the others tie, their std is 0, the advantage ~1e6."""

    def loo_std(rewards: Tensor, index: Any) -> Tensor:
        out = torch.zeros_like(rewards)
        keys = list(np.asarray(index).tolist())
        for key in dict.fromkeys(keys):
            rows = torch.tensor([i for i, k in enumerate(keys) if k == key])
            r, n = rewards[rows].double(), len(rows)
            if n > 2:
                mean = (r.sum() - r) / (n - 1)
                var = ((r**2).sum() - r**2) / (n - 1) - mean**2
                out[rows] = ((r - mean) / (var.clamp(min=0).sqrt() + 1e-6)).to(rewards.dtype)
        return out

    found = magnitude(RowCall(loo_std, Guard()), 4, torch.float32)
    assert found.verdict == "no" and found.data["ratio"] > 1e4, found.evidence
    assert "one success" in found.evidence or "one failure" in found.evidence


def test_the_near_tie_of_openrlhf_1334_is_in_the_evidence() -> None:
    (bf16, _) = low_precision(RowCall(bugs.openrlhf_1334_buggy, Guard()), 4)
    assert "1.0078125" in bf16.evidence and "got [0.0, 0.0, 0.0, 2.0]" in bf16.evidence


def test_relabelling_covers_the_kinds_of_ids_trainers_use() -> None:
    kinds = labellings([0, 1, 1, 2])
    assert isinstance(kinds["numpy object array of str"], np.ndarray)
    assert min(kinds["negative ints"]) < 0 and max(kinds["sparse ints"]) > 10**6
    groups = {name: len(set(np.asarray(v).tolist())) for name, v in kinds.items()}
    assert set(groups.values()) == {3}


def test_nemo_rl_and_prime_rl_signatures_are_callable() -> None:
    def nemo(rewards: Tensor, prompt_ids: Tensor, valid_mask: Tensor) -> Tensor:
        assert prompt_ids.dtype == torch.int64 and prompt_ids.ndim == 2
        keys = [tuple(row) for row in prompt_ids.tolist()]
        return bugs.nemo_3837_fixed(rewards, keys, valid_mask.bool())

    def prime(groups: list[Tensor]) -> list[Tensor]:
        return [g - g.mean() for g in groups]

    nemo_rows = describe(grouped_findings(NemoRows(nemo, Guard()), 4, torch.float32))
    assert set(nemo_rows.values()) == {"yes"}, nemo_rows
    prime_rows = describe(grouped_findings(GroupList(prime, Guard()), 4, torch.float32))
    assert prime_rows["ids relabelled"] == "not applicable"
    assert prime_rows["ragged groups"] == prime_rows["row order"] == "yes"


SEQUENCE = [row for row in CATALOGUE if row.kind == "sequence"]


def _expected(row: Row) -> dict[str, str]:
    want = dict.fromkeys(ROWS, "yes")
    if row.batch_coupled:  # one batch statistic: one size per call, and every group counts
        want["ragged groups"], want["dropped groups"] = "no: refused", "no"
    return want


@pytest.mark.parametrize("row", SEQUENCE, ids=[row.id for row in SEQUENCE])
def test_every_registered_estimator_on_flat_rows(row: Row) -> None:
    """advest's own estimators through ``by_group``: the grouped rows their claims imply, their
    declared magnitude bound, and float64-accurate advantages from bf16 and fp16 rewards."""

    def flat(rewards: Tensor, index: Any, valid: Tensor | None = None) -> Tensor:
        # a response's length travels with its row: a function of its reward (1..5 tokens)
        lengths = 1 + (rewards.double() * 8).round().long() % 5
        return by_group(
            row.name, rewards, index, valid=valid, k=2, options=row.options, lengths=lengths
        )

    est = RowCall(flat, Guard())
    assert describe(grouped_findings(est, 4, torch.float32)) == _expected(row)
    assert row.magnitude is not None, f"{row.id} declares no magnitude bound"
    found = magnitude(est, 4, torch.float32, row.magnitude, 2, row.batch_coupled)
    assert found.verdict == "yes", found.evidence
    assert {f.verdict for f in low_precision(est, 4)} == {"yes"}


def test_a_declared_bound_that_is_too_tight_fails() -> None:
    """The planted defect for the registry's bounds: grpo held to rloo's bound of 1."""
    from advest.spec.bounds import unit

    def flat(rewards: Tensor, index: Any) -> Tensor:
        return by_group("grpo", rewards, index)

    assert magnitude(RowCall(flat, Guard()), 8, torch.float32, unit).verdict == "no"


def test_an_unknown_family_or_convention_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"family 'nonsense'.*outcome.*token"):
        assert_estimator(bugs.grouped_fixed, family="nonsense")
    with pytest.raises(ValueError, match=r"convention 'nope'.*flat"):
        assert_estimator(bugs.grouped_fixed, convention="nope")


def test_the_rows_of_verls_convention_fail_their_planted_twins() -> None:
    """verl PR 6497 (whitened over tokens: other lengths move the advantages) and verl PR 7893
    (``norm_adv_by_std_in_grpo=False`` never reaches the estimator), in verl's convention."""
    from advest.oracle.conventions.rows import TokenRows

    def rows(fn: Callable[..., Any]) -> dict[str, Any]:
        return describe(grouped_findings(TokenRows(fn, Guard(), 2, skyrl=False), 4, torch.float32))

    assert rows(bugs.verl_6497_buggy)["response length"] == "no"
    assert rows(bugs.verl_6497_fixed)["response length"] == "yes"
    assert rows(bugs.verl_7893_buggy)["std division off"] == "no effect"
    assert rows(bugs.verl_7893_fixed)["std division off"] == "yes"
