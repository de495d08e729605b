"""The one calling module (``fast/calling.py``): a plan fetches its estimator's inputs, keeps a
stateful estimator's own instance, copies it for an evaluation, and broadcasts over the mask."""

from __future__ import annotations

import pytest
import torch

from advest.fast import calling
from advest.fast.kae import KAE


def test_a_fresh_plan_copies_a_stateful_instance_and_leaves_the_runs_history_alone() -> None:
    run = calling.plan("kae")
    assert isinstance(run.instance, KAE)
    ids, rewards = torch.tensor([3, 5]), torch.tensor([[1.0, 0.0], [0.0, 0.0]])
    run.per_sample({"prompt_ids": ids, "rewards": rewards})
    evaluation = run.fresh()
    assert evaluation.instance is not run.instance and evaluation.entry is run.entry
    evaluation.per_sample({"prompt_ids": ids, "rewards": rewards})
    assert (run.instance.iteration, evaluation.instance.iteration) == (2, 3)
    # the run's next call sees its own history only: the same as a twin that never evaluated
    twin = calling.plan("kae")
    twin.per_sample({"prompt_ids": ids, "rewards": rewards})
    after = {"prompt_ids": ids, "rewards": torch.tensor([[0.0, 1.0], [1.0, 1.0]])}
    assert torch.equal(run.per_sample(after), twin.per_sample(after))


def test_a_fresh_plan_of_a_stateless_estimator_is_the_plan_itself() -> None:
    stateless = calling.plan("maxpo", k=2)
    assert stateless.fresh() is stateless


def test_sequence_advantages_are_broadcast_over_the_mask_in_float32() -> None:
    rewards = torch.tensor([[1.0, 0.0, 0.0]], dtype=torch.float64)
    mask = torch.tensor([[[1, 1, 0], [1, 0, 0], [0, 0, 0]]], dtype=torch.bool)
    out = calling.plan("rloo").advantages({"rewards": rewards, "mask": mask})
    per_sample = torch.tensor([1.0, -0.5, -0.5])
    want = per_sample[None, :, None].expand(1, 3, 3) * mask
    assert out.dtype == torch.float32 and torch.equal(out, want.float())


def test_an_estimator_output_of_another_shape_is_refused_naming_it() -> None:
    odd = calling.plan_for(lambda rewards: rewards[:, :1], "odd", "sequence", ("rewards",))
    source = {"rewards": torch.zeros(2, 3), "mask": torch.ones(2, 3, 4, dtype=torch.bool)}
    with pytest.raises(ValueError, match=r"estimator output has shape \(2, 1\); want \[B, G\]"):
        odd.advantages(source)


def test_lengths_come_from_the_mask_unless_the_source_has_them() -> None:
    """OPO weighs by response length: a source without ``lengths`` gets the mask's counts."""
    rewards = torch.tensor([[1.0, 0.0]], dtype=torch.float64)
    mask = torch.tensor([[[1, 1, 1], [1, 0, 0]]], dtype=torch.bool)
    opo = calling.plan("opo")
    from_mask = opo.per_sample({"rewards": rewards, "mask": mask})
    given = opo.per_sample({"rewards": rewards, "mask": mask, "lengths": torch.tensor([[1, 1]])})
    # baseline Σ l r / Σ l: 3/4 from the mask's lengths (3, 1), 1/2 from the given (1, 1)
    assert from_mask.tolist() == [[0.25, -0.75]] and given.tolist() == [[0.5, -0.5]]
