"""The plug-ins pass a reward shaping through: verl's ``algorithm.advest_shaping``, SkyRL's
``register(shaping=...)`` (or a config ``advest_shaping``) and TRL's ``advest_shaping`` give the
advantages of ``by_group(name, ..., shaping=shaping(...))`` on the same rows, exactly; without
one nothing changes; a bad name or option is refused naming the setting."""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np
import pytest
import torch

from advest.fast import by_group, shaping
from advest.integrations import skyrl, verl
from advest.integrations.trl import AdvestGRPOConfig, advantage_fn, shaping_of
from tests.peer_batch import multi_turn, shuffled

SHAPINGS: list[tuple[str, dict[str, Any]]] = [
    ("gr3", {"alpha": 0.5}),
    ("overlong", {"max_length": 6, "cache": 2}),
    ("length_penalty", {"weight": 0.5}),
    ("efficiency", {}),
]
ESTIMATORS = [("grpo", None), ("rloo", None), ("maxpo", 2)]


def _batch() -> tuple[torch.Tensor, torch.Tensor, np.ndarray]:
    """verl's / SkyRL's rows: 4 prompts × 5 responses in shuffled order, lengths 1..8."""
    tlr, mask, _, perm = shuffled(4, 5, 8, seed=3)
    return tlr, mask, np.array([f"p{int(p) // 5}" for p in perm], dtype=object)


def _want(name: str, k: int | None, made: Any, tlr: torch.Tensor, mask: torch.Tensor,
          uids: np.ndarray) -> torch.Tensor:  # fmt: skip
    """``[bs, T]``: ``by_group`` on the rows' summed rewards and response lengths."""
    rows = by_group(name, tlr.sum(-1), uids, k=k, shaping=made, lengths=mask.sum(-1))
    return rows[:, None] * mask


def _trl(chosen: Any, options: Any) -> AdvestGRPOConfig:
    """TRL's config with the shaping settings (nothing is trained: only the settings are read)."""
    return AdvestGRPOConfig(
        output_dir="unused", advest_shaping=chosen, advest_shaping_options=options,
        use_cpu=True, bf16=False, activation_checkpointing=False, report_to=[],
    )  # fmt: skip


@pytest.mark.parametrize(("name", "k"), ESTIMATORS)
@pytest.mark.parametrize(("chosen", "options"), SHAPINGS, ids=[s for s, _ in SHAPINGS])
def test_verl_and_skyrl_give_by_group_of_the_shaped_rewards(
    name: str, k: int | None, chosen: str, options: dict[str, Any]
) -> None:
    tlr, mask, uids = _batch()
    want = _want(name, k, shaping.shaping(chosen, **options), tlr, mask, uids)
    assert not torch.equal(want, _want(name, k, None, tlr, mask, uids))  # the shaping acts here
    config = {"advest_k": k, "advest_shaping": chosen, "advest_shaping_options": options}
    got_verl, _ = verl.adapter(name)(tlr, mask, uids, config=config)
    items = tuple(sorted(options.items()))
    got_skyrl, _ = skyrl.Estimator(name, k, chosen, items)(tlr, mask, list(uids))
    # SkyRL: a config field overrides what register gave
    fields = {"advest_shaping": chosen, "advest_shaping_options": options}
    got_field, _ = skyrl.Estimator(name, k)(tlr, mask, list(uids), config=fields)
    for got in (got_verl, got_skyrl, got_field):
        assert torch.equal(got, want)


@pytest.mark.parametrize(("name", "k"), ESTIMATORS)
def test_without_a_shaping_nothing_changes(name: str, k: int | None) -> None:
    tlr, mask, uids = _batch()
    want = _want(name, k, None, tlr, mask, uids)
    for config in ({"advest_k": k}, {"advest_k": k, "advest_shaping": None}):
        assert torch.equal(verl.adapter(name)(tlr, mask, uids, config=config)[0], want)
        assert torch.equal(skyrl.Estimator(name, k)(tlr, mask, list(uids), config=config)[0], want)


def test_trls_advantage_is_by_group_of_the_shaped_rewards() -> None:
    gen = torch.Generator().manual_seed(5)
    B, G = 3, 4
    rewards = torch.randint(0, 5, (B, G), generator=gen).float() / 4
    lengths = torch.randint(1, 9, (B, G), generator=gen)
    index = torch.arange(B).repeat_interleave(G)
    for chosen, options in SHAPINGS:
        made = shaping_of(_trl(chosen, options), "grpo")
        got = advantage_fn("grpo", None, G, made)(rewards, lengths, torch.arange(B))
        want = by_group(
            "grpo", rewards.reshape(-1), index, shaping=made, lengths=lengths.reshape(-1)
        )
        assert torch.equal(got.reshape(-1), want)
        assert not torch.equal(want, by_group("grpo", rewards.reshape(-1), index))
    plain = advantage_fn("grpo", None, G)(rewards, lengths, torch.arange(B))
    assert torch.equal(plain.reshape(-1), by_group("grpo", rewards.reshape(-1), index))
    as_json = _trl("gr3", '{"alpha": 2}')
    assert shaping_of(as_json, "grpo") == shaping.GR3(alpha=2)  # TRL's command line: JSON


BAD: list[tuple[Any, Any, str]] = [
    ("gr4", None, r"advest_shaping: unknown shaping 'gr4'; valid: efficiency, gr3"),
    ("gr3", {"beta": 1}, r"advest_shaping_options: shaping 'gr3' takes options \['alpha'\]"),
    ("gr3", {"alpha": "x"}, r"advest_shaping_options: alpha takes a number; got 'x'"),
    ("gr3", [0.5], r"advest_shaping_options takes a mapping of option to number"),
    (None, {"alpha": 1}, r"advest_shaping_options is set but \S*advest_shaping is not"),
]


@pytest.mark.parametrize(("chosen", "options", "says"), BAD)
def test_a_bad_shaping_is_refused_naming_the_setting(chosen: Any, options: Any, says: str) -> None:
    tlr, mask, uids = _batch()
    algorithm = {"adv_estimator": "advest_grpo"}
    algorithm |= {"advest_shaping": chosen, "advest_shaping_options": options}
    with pytest.raises(ValueError, match=f"algorithm.{says}"):
        verl.adapter("grpo")(tlr, mask, uids, config=algorithm)
    with pytest.raises(ValueError, match=f"^algorithm.{says}"):  # before any worker starts
        verl.check_config({"algorithm": algorithm})
    with pytest.raises(ValueError, match=f"trainer.algorithm.{says}"):
        skyrl.Estimator("grpo")(tlr, mask, list(uids), config=algorithm)
    where = says.replace("advest_shaping_options", r"register\(shaping_options=...\)")
    where = where.replace("advest_shaping", r"register\(shaping=...\)")
    with pytest.raises(ValueError, match=where):  # in the driver, before SkyRL is imported
        skyrl.register(shaping=chosen, shaping_options=options)
    with pytest.raises(ValueError, match=f"^{says}"):
        shaping_of(_trl(chosen, options), "grpo")


def test_a_shaping_before_an_episode_estimator_is_refused() -> None:
    tlr, mask, uids = multi_turn()
    says = r"advest_shaping=gr3: advest_turn_rloo is an episode estimator, which reads each turn"
    config = {"adv_estimator": "advest_turn_rloo", "advest_shaping": "gr3"}
    with pytest.raises(ValueError, match=f"^algorithm.{says}"):
        verl.adapter("turn_rloo")(tlr, mask, uids, config=config)
    with pytest.raises(ValueError, match=f"^algorithm.{says}"):
        verl.check_config({"algorithm": config})
    with pytest.raises(ValueError, match=r"^register\(shaping=...\)=gr3: advest_turn_rloo"):
        skyrl.Estimator("turn_rloo", shaping="gr3")(tlr, mask, uids)


def test_verls_check_config_accepts_a_shaping_and_refuses_one_verl_would_ignore() -> None:
    algorithm = {"adv_estimator": "advest_grpo", "advest_shaping": "gr3"}
    config = {"algorithm": algorithm, "actor_rollout_ref": {"rollout": {"n": 4}}}
    verl.check_config(config)
    algorithm["adv_estimator"] = "grpo"  # verl's own: it never reads the shaping
    says = r"^algorithm.advest_shaping shapes the rewards of advest's estimators; algorithm.adv"
    with pytest.raises(ValueError, match=says):
        verl.check_config(config)
    algorithm["advest_shaping"] = None
    verl.check_config(config)


def test_skyrls_estimator_with_a_shaping_pickles_and_compares_by_value() -> None:
    made = skyrl.Estimator("grpo", None, "gr3", (("alpha", 0.5),))
    assert pickle.loads(pickle.dumps(made)) == made
    assert hash(made) == hash(skyrl.Estimator("grpo", None, "gr3", (("alpha", 0.5),)))
    assert made != skyrl.Estimator("grpo", None, "gr3", (("alpha", 1.0),))


def test_trls_command_line_takes_the_shaping_and_its_options_as_json() -> None:
    from transformers import HfArgumentParser

    argv = ["--output_dir", "unused", "--use_cpu", "--bf16", "false", "--report_to", "none"]
    argv += ["--activation_checkpointing", "false"]
    argv += ["--advest_shaping", "gr3", "--advest_shaping_options", '{"alpha": 0.25}']
    (config,) = HfArgumentParser(AdvestGRPOConfig).parse_args_into_dataclasses(argv)
    assert shaping_of(config, "rloo") == shaping.GR3(alpha=0.25)
