"""The episode oracle (oracle/properties/episodes.py; spec/episode.md): each row passes a correct
estimator and fails a planted one, and the four multi-turn bugs trainers shipped are told apart
from their fixed twins by the rows the issue threads describe."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from advest.fast import episode, registry
from advest.oracle.inputs.episode_trees import WORLDS
from advest.oracle.inputs.episode_trees import episodes as enumerate_episodes
from advest.oracle.properties import episodes

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))
from gallery_episode_bugs import (
    final_overwrites_steps,
    gae_masked_but_counted,
    gae_over_all_tokens,
    gae_over_policy_tokens,
    own_count_baseline,
    reinforce_to_go,
    rows_per_turn,
)

GROUPS = episodes.random_groups(0)


def _verdicts(fn: episodes.EpisodeEstimator, single: str | None = None) -> dict[str, str]:
    one = registry.get(single) if single else None
    return {f.prop: f.verdict for f in episodes.report(fn, one, single)}


YES = "yes"


def test_the_worlds_are_distributions_whose_length_the_policy_chooses() -> None:
    for world in WORLDS:
        eps = list(enumerate_episodes(world))
        assert sum(e.probability for e in eps) == 1
        assert {len(e.turns) for e in eps} == {1, 2, 3}


@pytest.mark.parametrize("name", ["turn_rloo", "turn_index_mean"])
def test_registered_estimators_get_the_verdicts_their_claims_state(name: str) -> None:
    entry = registry.entry(name)
    got = _verdicts(entry.fn, entry.one_turn)
    assert got["one-turn episodes"] == YES
    assert (got["unbiased"] == YES) == (entry.claims.pg_scale is not None)
    if entry.claims.pg_scale is not None:
        assert set(got.values()) == {YES}


def test_unbiased_row_passes_reinforce_and_fails_a_baseline_that_counts_its_own_turns() -> None:
    assert _verdicts(reinforce_to_go)["unbiased"] == YES
    planted = _verdicts(own_count_baseline)
    assert planted["unbiased"] == "no: biased"
    assert planted["reads its own future"].startswith("no")


def test_the_own_future_row_names_where_it_moved() -> None:
    finding = episodes.own_future(own_count_baseline, GROUPS)
    assert "one more turn taken later" in finding.evidence and "episode" in finding.evidence


def test_verl_7244_the_per_turn_index_normalisation_against_its_fix() -> None:
    bug, fix = _verdicts(episode.turn_index_mean), _verdicts(episode.turn_rloo)
    assert bug["unbiased"] == "no: biased" and fix["unbiased"] == YES
    assert bug["reads its own future"].startswith("no") and fix["reads its own future"] == YES


def test_agent_lightning_445_turns_as_rows_against_episodes_counted_once() -> None:
    bug, fix = _verdicts(rows_per_turn), _verdicts(episode.turn_rloo)
    assert bug["counts each episode once"] == "no: an episode with more turns weighs more"
    assert fix["counts each episode once"] == YES


def test_miles_1827_discounting_over_tool_tokens_against_policy_tokens_only() -> None:
    bug, fix = _verdicts(gae_over_all_tokens), _verdicts(gae_over_policy_tokens)
    assert bug["observation tokens"].startswith("no")
    assert fix["observation tokens"] == YES


def test_areal_1674_final_reward_overwriting_step_rewards_is_biased() -> None:
    bug, fix = _verdicts(final_overwrites_steps), _verdicts(episode.turn_rloo)
    assert bug["unbiased"] == "no: biased" and fix["unbiased"] == YES


def test_the_one_turn_row_fails_an_estimator_unlike_its_single_turn_twin() -> None:
    assert _verdicts(episode.turn_rloo, "rloo")["one-turn episodes"] == YES
    assert _verdicts(episode.turn_rloo, "dr_grpo")["one-turn episodes"].startswith("no")
    assert _verdicts(episode.turn_rloo)["one-turn episodes"] == "not compared"


def test_a_wrong_output_shape_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"an episode estimator returns \[B, G, T\]"):
        episodes.report(lambda r, ids: r)


def test_discounting_over_tool_tokens_moves_policy_tokens_even_with_them_masked() -> None:
    verdict = _verdicts(gae_masked_but_counted)["observation tokens"]
    assert verdict == "no: observation tokens move advantages"


def test_advest_check_family_episode_end_to_end(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The command, its child process included: verdicts for the gallery's agent-lightning #445
    twin, and a bad --one_turn refused by name (exit 2)."""
    import argparse

    from advest.oracle.reports.cli import add_arguments, command

    monkeypatch.chdir(Path(__file__).resolve().parents[3] / "scripts")
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    target = "gallery_episode_bugs:rows_per_turn"
    assert command(parser.parse_args([target, "--family", "episode", "--one_turn", "rloo"])) == 0
    out = capsys.readouterr().out
    assert "| counts each episode once | no: an episode with more turns weighs more |" in out
    assert "| observation tokens | yes; searched: yes |" in out
    bad = parser.parse_args([target, "--family", "episode", "--one_turn", "rlooo"])
    assert command(bad) == 2
    assert "--one_turn 'rlooo' is not a registered sequence estimator" in capsys.readouterr().err
