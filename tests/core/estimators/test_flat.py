"""``advest.fast.by_group``: any registered estimator on flat rows with a group id per row, as
trainers hold them; and ``advest check``'s options for them (``--convention flat``,
``--dispatch``, ``--algorithm``)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import advest
from advest.cli import main
from advest.fast import by_group
from advest.oracle.reports.cli import parse_algorithm


@given(
    b=st.integers(1, 5),
    g=st.integers(2, 6),
    seed=st.integers(0, 2**16),
    name=st.sampled_from(["grpo", "rloo", "dr_grpo", "maxpo", "grpo_batch_std"]),
)
@settings(max_examples=25, deadline=None)
def test_equal_groups_give_the_b_g_call_whatever_the_ids_and_the_order(
    b: int, g: int, seed: int, name: str
) -> None:
    gen = torch.Generator().manual_seed(seed)
    rewards = torch.randint(0, 5, (b, g), generator=gen).double() / 4  # [B, G]
    k = 1 if advest.entry(name).needs_k else None
    want = advest.entry(name).fn(rewards, k) if k else advest.entry(name).fn(rewards)
    perm = torch.randperm(b * g, generator=gen)
    ids = np.array([f"uid-{-7 * (int(p) // g)}" for p in perm], dtype=object)  # shuffled rows
    got = by_group(name, rewards.reshape(-1)[perm], ids, k=k)
    # a group's rows in another order sum in another order: ulps of the rewards' spread (≤ 1)
    torch.testing.assert_close(got, want.reshape(-1)[perm], rtol=0, atol=1e-12)


def test_ragged_groups_are_each_computed_as_alone() -> None:
    rewards = torch.tensor([1.0, 0.0, 0.5, 1.0, 0.25, 0.0])
    index = [3, -1, 3, 10**9, -1, 3]
    got = by_group("grpo", rewards, index)
    alone = advest.get("grpo")(rewards[[0, 2, 5]][None])[0]
    assert torch.equal(got[[0, 2, 5]], alone)
    assert torch.equal(got[[1, 4]], advest.get("grpo")(rewards[[1, 4]][None])[0])
    assert got[3] == 0  # a group of one


def test_a_masked_row_gets_zero_and_moves_nothing() -> None:
    rewards = torch.tensor([1.0, 0.0, 0.5, 7.0])
    index = ["a", "a", "a", "a"]
    valid = torch.tensor([True, True, True, False])
    got = by_group("rloo", rewards, index, valid=valid)
    assert got[3] == 0
    assert torch.equal(got[:3], by_group("rloo", rewards[:3], index[:3]))


def test_token_level_rows_are_regrouped_with_their_tokens() -> None:
    gen = torch.Generator().manual_seed(0)
    token_ids = torch.randint(0, 9, (6, 4), generator=gen)  # [N, T]
    mask = torch.ones(6, 4, dtype=torch.bool)
    rewards = torch.tensor([1.0, 0.0, 1.0, 0.0, 1.0, 1.0])
    index = [0, 1, 0, 1, 0, 1]
    got = by_group("ktae", rewards, index, token_ids=token_ids, mask=mask)  # [N, T]
    rows = torch.tensor([[0, 2, 4], [1, 3, 5]])
    want = advest.get("ktae")(token_ids=token_ids[rows], mask=mask[rows], rewards=rewards[rows])
    assert torch.equal(got[rows.reshape(-1)], want.reshape(6, 4))


def test_bad_rows_are_refused_in_words() -> None:
    rewards = torch.tensor([1.0, 0.0, 0.5, 1.0, 0.25])
    with pytest.raises(ValueError, match=r"group id 'b' \(batch rows 3, 4\) has 2 samples"):
        by_group("maxpo", rewards, ["a", "a", "a", "b", "b"], k=2)
    with pytest.raises(ValueError, match=r"group id 7 \(batch rows 4\) has 1 samples: rloo"):
        by_group("rloo", rewards, [3, 3, 3, 3, 7])
    with pytest.raises(ValueError, match="needs every group the same size"):
        by_group("grpo_batch_std", rewards, ["a", "a", "a", "b", "b"])
    with pytest.raises(ValueError, match="index has 4 ids for 5 rewards"):
        by_group("grpo", rewards, ["a", "a", "b", "b"])
    with pytest.raises(ValueError, match="valid must be a bool tensor"):
        by_group("grpo", rewards, list("aabbb"), valid=torch.ones(5))
    with pytest.raises(ValueError, match="stable integers per prompt; got 'a'"):
        by_group("kae", rewards, list("aabbb"))
    with pytest.raises(TypeError, match="row 0"):
        by_group("grpo", rewards, [{}, {}, {}, {}, {}])


def test_check_help_names_the_flat_convention(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["check", "-h"])
    out = capsys.readouterr().out
    assert "flat:" in out and "fn(rewards [N], index [N], valid=[N] bool)" in out
    assert "--dispatch" in out


def test_algorithm_overrides_are_parsed_and_bad_ones_refused() -> None:
    assert parse_algorithm(["norm_adv_by_std_in_grpo=false", "gamma=0.9"]) == {
        "norm_adv_by_std_in_grpo": False,
        "gamma": 0.9,
    }
    assert parse_algorithm(["norm_adv_by_std_in_grpo=False"]) == {"norm_adv_by_std_in_grpo": False}
    with pytest.raises(ValueError, match="KEY=VALUE"):
        parse_algorithm(["gamma"])


def test_dispatch_is_refused_for_a_target_outside_verl(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "advest.fast.group:grpo", "--dispatch", "--timeout", "120"]) == 2
    assert "--dispatch is for verl:NAME targets" in capsys.readouterr().err
