"""Run inside an environment with verl 0.9.1 (``tests/verl/test_verl.py`` builds it and runs this
file with pytest there): advest's estimators through verl's own ``compute_advantage``, verl's
estimators through ``advest check``."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from verl import DataProto
from verl.trainer.config import AlgoConfig
from verl.trainer.ppo.ray_trainer import compute_advantage

from advest import oracle
from advest.fast import by_group, group, registry, shaping
from advest.fast import gdpo as gdpo_fast
from advest.integrations import verl as integration
from advest.oracle.conventions import verl as verl_oracle
from tests.peer_batch import multi_turn, shuffled, turn_rloo_by_uid


def _batch(
    B: int, G: int, T: int, seed: int, binary: bool = False
) -> tuple[DataProto, torch.Tensor, np.ndarray]:
    """A verl batch of B prompts × G responses in shuffled order, and the [B, G] rewards."""
    tlr, mask, rewards, perm = shuffled(B, G, T, seed, binary)
    uids = np.array([f"prompt-{int(p) // G}-{'x' * (int(p) // G)}" for p in perm], dtype=object)
    data = DataProto.from_dict(
        tensors={"token_level_rewards": tlr, "response_mask": mask},
        non_tensors={"uid": uids},
    )
    return data, rewards, perm.numpy()


NAMES = sorted(
    n
    for n in registry.names()
    if n not in integration.SKIPPED and registry.entry(n).kind not in ("token", "episode")
)


@pytest.mark.parametrize("name", NAMES)
def test_advest_estimator_through_verls_compute_advantage(name: str) -> None:
    skipped = integration.register(k=2)
    assert set(skipped) == {
        "ktae",
        "covariance_weights",
        "hista",
        "numca",
        "kae",
        "gdpo",
        "optimal_token_baseline",
    }
    B, G, T = 5, 4, 6
    entry = registry.entry(name)
    binary = name in ("chen_passk", "tang_passk")  # their domain is {0, 1}
    data, rewards, perm = _batch(B, G, T, seed=len(name), binary=binary)
    out = compute_advantage(data, f"advest_{name}", config=AlgoConfig())
    args: dict[str, object] = {"rewards": rewards}
    if "k" in entry.inputs:
        args["k"] = 2
    if "lengths" in entry.inputs:
        lengths = data.batch["response_mask"].sum(-1)
        inverse = np.argsort(perm)
        args["lengths"] = lengths[inverse].reshape(B, G)
    direct = entry.fn(**args).reshape(-1)[perm]  # [bs], in the batch's shuffled order
    mask = data.batch["response_mask"]
    torch.testing.assert_close(out.batch["advantages"], direct[:, None] * mask, rtol=0, atol=0)


def test_k_comes_from_the_algorithm_config() -> None:
    integration.register(k=2)
    data, rewards, perm = _batch(3, 6, 4, seed=1)
    fn = integration.adapter("maxpo")
    args = (
        data.batch["token_level_rewards"],
        data.batch["response_mask"],
        data.non_tensor_batch["uid"],
    )
    adv, _ = fn(*args, config={"advest_k": 3})  # the config wins over register's K = 2
    direct = registry.get("maxpo")(rewards, 3).reshape(-1)[perm]
    torch.testing.assert_close(adv[:, 0], direct, rtol=0, atol=0)
    adv2, _ = fn(*args)  # no config: register's K
    torch.testing.assert_close(adv2[:, 0], registry.get("maxpo")(rewards, 2).reshape(-1)[perm])
    integration._DEFAULT_K.clear()
    try:
        with pytest.raises(ValueError, match="advest_k"):
            fn(*args)  # neither: refused, saying where K goes
    finally:
        integration.register(k=2)


def test_register_is_idempotent_whatever_k() -> None:
    from verl.trainer.ppo.core_algos import get_adv_estimator_fn

    integration.register(k=2)
    first = get_adv_estimator_fn("advest_maxpo")
    integration.register(k=3)  # verl would raise if a different function were registered
    integration.register()
    assert get_adv_estimator_fn("advest_maxpo") is first
    assert integration._DEFAULT_K["k"] == 3
    integration.register(k=2)


def test_groups_of_unequal_size_each_get_their_own_advantages() -> None:
    """A multi-output agent loop's batch: uids with 2, 3 and 5 samples, interleaved."""
    integration.register(k=2)
    sizes = {"a": 3, "b": 5, "c": 2, "d": 5}
    gen = torch.Generator().manual_seed(7)
    uids = np.array([u for u, n in sizes.items() for _ in range(n)], dtype=object)
    perm = torch.randperm(len(uids), generator=gen).numpy()
    uids = uids[perm]
    scores = torch.randint(0, 4, (len(uids),), generator=gen).float()
    T = 3
    mask = torch.ones(len(uids), T, dtype=torch.int64)
    tlr = torch.zeros(len(uids), T)
    tlr[:, -1] = scores
    data = DataProto.from_dict(
        tensors={"token_level_rewards": tlr, "response_mask": mask}, non_tensors={"uid": uids}
    )
    out = compute_advantage(data, "advest_rloo", config=AlgoConfig()).batch["advantages"][:, -1]
    for uid in sizes:
        rows = np.flatnonzero(uids == uid)
        direct = registry.get("rloo")(scores[rows][None, :])[0]
        torch.testing.assert_close(out[rows], direct, rtol=0, atol=0)


def test_a_multi_turn_batch_reaches_the_episode_estimators_through_compute_advantage() -> None:
    """verl's agent loop: response_mask 0 on tool output, a reward on each turn's last token,
    ragged uids in any order. verl's own compute_advantage gives advest_turn_rloo the turns
    (the mask's runs of 1s), and the advantages are turn_rloo's on each group's episodes."""
    integration.register(k=2)
    tlr, mask, names = multi_turn()
    data = DataProto.from_dict(
        tensors={"token_level_rewards": tlr, "response_mask": mask},
        non_tensors={"uid": np.array(names, dtype=object)},
    )
    out = compute_advantage(data, "advest_turn_rloo", config=AlgoConfig()).batch["advantages"]
    torch.testing.assert_close(out, turn_rloo_by_uid(tlr, mask, names), rtol=0, atol=0)
    assert bool((out[mask == 0] == 0).all())


def test_an_estimators_error_names_verls_uid_and_batch_rows() -> None:
    integration.register(k=2)
    data, _, _ = _batch(3, 4, 5, seed=3)
    tlr = data.batch["token_level_rewards"].clone()
    uids = data.non_tensor_batch["uid"]
    bad = int(np.flatnonzero(uids == uids[5])[1])  # the second sample of row 5's prompt
    tlr[bad, 0] = float("nan")
    data.batch["token_level_rewards"] = tlr
    rows = ", ".join(str(int(r)) for r in np.flatnonzero(uids == uids[5]))
    with pytest.raises(ValueError, match=f"uid '{uids[5]}' \\(verl batch rows {rows}\\)"):
        compute_advantage(data, "advest_grpo", config=AlgoConfig())


def _verdicts(
    name: str, family: oracle.Objective, k: int, ns: list[int]
) -> dict[tuple[str, str], str]:
    fn = verl_oracle.verl_estimator(name)
    findings = oracle.check(fn, family, k, ns=ns, convention="verl")
    # a searched finding is keyed apart, as the report's schema keys it: "centred (searched)"
    return {(f.prop + (" (searched)" if f.searched else ""), f.dtype): f.verdict for f in findings}


def test_verls_rloo_checked_through_its_registry_is_unbiased_in_float32() -> None:
    v = _verdicts("rloo", "outcome", 1, [3])
    assert v[("unbiased", "float32")].startswith("yes, E[ĝ] = 3·∇J")
    assert v[("centred", "float32")] == "yes"
    assert v[("modifies its inputs", "")] == "no"
    # its singleton group returns the raw reward, which the search finds as "not centred"
    assert v[("centred (searched)", "float32")].startswith("no")


def test_verls_grpo_is_biased_and_its_singleton_group_gives_r_over_one_plus_eps() -> None:
    v = _verdicts("grpo", "outcome", 1, [3])
    assert v[("unbiased", "float32")].startswith("no")
    assert v[("on G = 1", "float32")] == "value [0.999999]"


def test_verls_grpo_passk_is_checked_at_k_equal_n() -> None:
    v = _verdicts("grpo_passk", "maxk", 4, [4])
    assert ("unbiased", "float32") in v and not v[("unbiased", "float32")].startswith("not")


def test_verls_rloo_on_singleton_groups_returns_the_raw_reward() -> None:
    """A reported bug: verl's rloo leaves a lone sample's reward as its advantage."""
    v = _verdicts("rloo", "outcome", 1, [3])
    assert v[("singleton group", "float32")] == "no: A = r, the raw reward"
    assert _verdicts("rloo_vectorized", "outcome", 1, [3])[("singleton group", "float32")] == (
        "yes: A = 0"
    )


@pytest.mark.parametrize(
    "name", ["opo", "reinforce_plus_plus_baseline", "gdpo", "reinforce_plus_plus", "gae"]
)
def test_length_dependent_verl_estimators_are_permutation_equivariant(name: str) -> None:
    """Their baselines or whitening weigh samples by response length: the lengths move with the
    samples (they were left in place, and these were reported "no"); reinforce_plus_plus reads
    config.gamma (it crashed on a dict), gae gets values and gamma, lam (it could not be called)."""
    v = _verdicts(name, "outcome", 1, [3])
    assert v[("permutation equivariant", "float32")] == "yes"
    assert v[("permutation equivariant", "float64")] == "yes"


def test_verls_float32_grpo_vectorized_is_judged_at_float32_in_the_float64_column() -> None:
    v = _verdicts("grpo_vectorized", "outcome", 1, [3])
    assert v[("working precision", "float64")] == "float32"
    for prop in ("centred", "shift invariant", "permutation equivariant"):
        assert v[(prop, "float64")] == "yes", prop


def test_remax_gets_a_made_up_baseline_and_the_token_baselines_are_out_of_scope() -> None:
    v = _verdicts("remax", "outcome", 1, [3])  # greedy baseline 0: REINFORCE
    assert v[("unbiased", "float32")].startswith("yes, E[ĝ] = 3·∇J")
    for name in ("optimal_token_baseline", "tir_optimal_token_baseline"):
        with pytest.raises(oracle.OutOfScope, match="varies along a response"):
            _verdicts(name, "outcome", 1, [3])


def test_check_command_says_out_of_scope_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    from advest.cli import main

    assert main(["check", "verl:optimal_token_baseline", "--n", "3"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("advest check: verl:optimal_token_baseline is out of scope: its "), err
    assert "\n" not in err


# -- convention="verl-0.9.1": advest reproduces verl's own functions ---------------------------


def _verl_inputs(
    rewards: torch.Tensor, seed: int
) -> tuple[torch.Tensor, torch.Tensor, np.ndarray, torch.Tensor, torch.Tensor]:
    """verl's (token_level_rewards, response_mask, index) for rewards [B, G] in shuffled order,
    with the permutation and the response lengths [B, G]."""
    B, G = rewards.shape
    T = 5
    gen = torch.Generator().manual_seed(seed)
    perm = torch.randperm(B * G, generator=gen)  # batch row j holds flat sample perm[j]
    lengths = torch.randint(1, T + 1, (B * G,), generator=gen)  # by batch row
    mask = (torch.arange(T) < lengths[:, None]).to(torch.int64)  # [bs, T]
    tlr = torch.zeros(B * G, T, dtype=rewards.dtype)
    tlr[torch.arange(B * G), lengths - 1] = rewards.reshape(-1)[perm]
    index = np.array([f"uid-{int(p) // G}" for p in perm], dtype=object)
    by_sample = torch.empty_like(lengths)
    by_sample[perm] = lengths
    return tlr, mask, index, perm, by_sample.reshape(B, G)


DYADIC = [0.0, 0.25, 0.5, 0.75, 1.0]  # verl's float32 group means of these are exact


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("G", [1, 4])
def test_grpo_verl_convention_reproduces_verls_grpo(G: int, dtype: torch.dtype) -> None:
    from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage

    gen = torch.Generator().manual_seed(G)
    levels = torch.tensor(DYADIC, dtype=dtype)
    rewards = levels[torch.randint(0, 5, (6, G), generator=gen)]  # [B, G]
    rewards[0] = 0.5  # a constant group (a G = 1 group is always one)
    rewards[-1, 0] = 0.3 if G == 1 else rewards[-1, 0]  # not dyadic: tests the float32 1 + ε
    tlr, mask, index, perm, _ = _verl_inputs(rewards, seed=G)
    theirs, _ = compute_grpo_outcome_advantage(tlr, mask, index, epsilon=1e-6)
    ours = group.grpo(rewards, convention="verl-0.9.1").reshape(-1)[perm]  # [bs]
    if G == 1:  # the convention itself: bit for bit, in both dtypes
        torch.testing.assert_close(theirs, ours[:, None] * mask, rtol=0, atol=0)
        advest = group.grpo(rewards).reshape(-1)[perm]
        assert bool((advest == 0).all()) and not bool((ours == 0).all())
    else:  # verl's float32 std vs advest's float64 one: the dtype's rounding
        torch.testing.assert_close(theirs, ours[:, None] * mask)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("G", [1, 3])
def test_reinforce_pp_verl_convention_reproduces_verls_baseline(G: int, dtype: torch.dtype) -> None:
    from verl.trainer.ppo.core_algos import (
        compute_reinforce_plus_plus_baseline_outcome_advantage as verl_rpp,
    )

    gen = torch.Generator().manual_seed(10 + G)
    levels = torch.tensor(DYADIC, dtype=dtype)
    rewards = levels[torch.randint(0, 5, (7, G), generator=gen)]  # [B, G]
    tlr, mask, index, perm, lengths = _verl_inputs(rewards, seed=G)
    theirs, _ = verl_rpp(tlr, mask, index)
    ours = group.reinforce_pp(rewards, lengths, convention="verl-0.9.1").reshape(-1)[perm]
    # float32: verl accumulates in float32, advest in float64. float64: verl's Bessel factor
    # L/(L − 1) is an int64 division, hence float32 (a 6e-8 relative error, bounded, documented)
    rtol, atol = (1e-6, 1e-6) if dtype == torch.float32 else (1e-6, 1e-9)
    torch.testing.assert_close(theirs, ours[:, None] * mask, rtol=rtol, atol=atol)
    # advest's own convention (per-sample std, ε outside the root) is visibly different here
    plain = group.reinforce_pp(rewards).reshape(-1)[perm]
    assert not torch.allclose(theirs[:, 0], plain * mask[:, 0], atol=1e-3)


def test_norm_adv_by_std_in_grpo_is_honoured_by_grpo_and_refused_by_the_others() -> None:
    """verl's ``algorithm.norm_adv_by_std_in_grpo``: False makes ``advest_grpo`` Dr. GRPO's
    r − group mean (as verl's own grpo does), and is refused, by name, by an estimator that
    decides its own scale; True (verl's default) changes nothing."""
    integration.register(k=2)
    B, G = 4, 4
    data, rewards, perm = _batch(B, G, 5, seed=3)
    mask = data.batch["response_mask"]
    plain = compute_advantage(data, "advest_grpo", config=AlgoConfig(norm_adv_by_std_in_grpo=False))
    want = registry.get("dr_grpo")(rewards).reshape(-1)[perm]
    torch.testing.assert_close(plain.batch["advantages"], want[:, None] * mask, rtol=0, atol=0)
    scaled = registry.get("grpo")(rewards).reshape(-1)[perm]
    assert not torch.allclose(want, scaled)  # the setting changed the advantages
    data, rewards, perm = _batch(B, G, 5, seed=3)
    kept = compute_advantage(data, "advest_grpo", config=AlgoConfig(norm_adv_by_std_in_grpo=True))
    torch.testing.assert_close(kept.batch["advantages"], scaled[:, None] * mask, rtol=0, atol=0)
    with pytest.raises(
        ValueError, match="norm_adv_by_std_in_grpo=False has no meaning for advest_maxpo"
    ):
        compute_advantage(data, "advest_maxpo", config=AlgoConfig(norm_adv_by_std_in_grpo=False))


def _hydra_config(*more: str) -> Any:
    """verl's trainer config as ``main_ppo``'s Hydra reads it, with ``more`` overrides."""
    from hydra import compose, initialize_config_module

    base = ["algorithm.adv_estimator=advest_grpo", "actor_rollout_ref.rollout.n=5"]
    with initialize_config_module("verl.trainer.config", version_base=None):
        return compose("ppo_trainer", overrides=[*base, "data.train_batch_size=4", *more])


def test_a_shaping_in_verls_algorithm_config_reaches_advest_grpo_through_its_registry() -> None:
    """``+algorithm.advest_shaping=gr3 +algorithm.advest_shaping_options={alpha:0.5}`` on verl's
    command line: ``check_config`` accepts it, and the algorithm node verl's trainer passes to
    ``compute_advantage`` makes ``advest_grpo`` the estimator of the shaped rewards (each
    group's summed rewards by the response lengths), exactly ``by_group(..., shaping=...)``; a
    bad option is refused naming its key before any worker starts."""
    integration.register(k=2)
    cfg = _hydra_config(
        "+algorithm.advest_shaping=gr3", "+algorithm.advest_shaping_options={alpha:0.5}"
    )
    integration.check_config(cfg)
    data, _, _ = _batch(4, 5, 8, seed=9)
    tlr, mask = data.batch["token_level_rewards"], data.batch["response_mask"]
    uids = data.non_tensor_batch["uid"]
    out = compute_advantage(data, "advest_grpo", config=cfg.algorithm).batch["advantages"]
    made = shaping.shaping("gr3", alpha=0.5)
    want = by_group("grpo", tlr.sum(-1), uids, shaping=made, lengths=mask.sum(-1))
    torch.testing.assert_close(out, want[:, None] * mask, rtol=0, atol=0)
    plain = by_group("grpo", tlr.sum(-1), uids)
    assert not torch.allclose(want, plain)  # the shaping changed the advantages
    bad = _hydra_config(
        "+algorithm.advest_shaping=gr3", "+algorithm.advest_shaping_options={beta:1}"
    )
    with pytest.raises(ValueError, match=r"^algorithm.advest_shaping_options: shaping 'gr3' takes"):
        integration.check_config(bad)


# -- GDPO: advest's gdpo (convention="verl-0.9.1") against verl's own gdpo ----------------------


def _gdpo_batch(
    B: int, G: int, R: int, seed: int, levels: list[float]
) -> tuple[DataProto, torch.Tensor, torch.Tensor, torch.Tensor]:
    """A verl batch for GDPO: R reward components per response under the keys r0.. in
    ``non_tensor_batch`` (as a reward function returning a dict puts them), their weighted sum in
    ``token_level_rewards``, prompts and an attention mask (verl places each score at the last
    valid token with them), shuffled uids, ragged lengths. Returns the batch, the components
    [B, G, R], the permutation and the lengths [B, G]."""
    T, P = 6, 3
    gen = torch.Generator().manual_seed(seed)
    pick = torch.randint(0, len(levels), (B, G, R), generator=gen)
    parts = torch.tensor(levels)[pick]  # [B, G, R]
    parts[0, :, 0] = levels[1]  # one prompt flat in reward 0
    perm = torch.randperm(B * G, generator=gen)
    lengths = torch.randint(1, T + 1, (B * G,), generator=gen)  # by batch row
    mask = (torch.arange(T) < lengths[:, None]).to(torch.int64)  # [bs, T]
    flat = parts.reshape(B * G, R)[perm]  # [bs, R]
    tlr = torch.zeros(B * G, T)
    tlr[torch.arange(B * G), lengths - 1] = flat.sum(-1)
    non_tensors: dict[str, np.ndarray] = {f"r{j}": flat[:, j].numpy() for j in range(R)}
    non_tensors["uid"] = np.array([f"uid-{int(p) // G}" for p in perm], dtype=object)
    attention = torch.cat([torch.ones(B * G, P, dtype=torch.int64), mask], 1)
    data = DataProto.from_dict(
        tensors={
            "token_level_rewards": tlr,
            "response_mask": mask,
            "prompts": torch.zeros(B * G, P, dtype=torch.int64),
            "attention_mask": attention,
        },
        non_tensors=non_tensors,
    )
    by_sample = torch.empty_like(lengths)
    by_sample[perm] = lengths
    return data, parts, perm, by_sample.reshape(B, G)


@pytest.mark.parametrize(("G", "R"), [(1, 2), (4, 1), (4, 3), (8, 2)])
def test_gdpo_matches_verls_own_gdpo(G: int, R: int) -> None:
    """verl's compute_advantage with adv_estimator="gdpo" (its own function, fed the components
    by its own code path) against advest's gdpo(convention="verl-0.9.1") on the same components,
    and against integration.gdpo called as verl calls its gdpo: float32 tolerance."""
    B, weights = 5, [1.0, 0.5, 2.0][:R]
    data, parts, perm, lengths = _gdpo_batch(B, G, R, seed=G * 10 + R, levels=DYADIC)
    keys = [f"r{j}" for j in range(R)]
    config = AlgoConfig(gdpo_reward_keys=keys, gdpo_reward_weights=weights)
    theirs = compute_advantage(data, "gdpo", config=config).batch["advantages"]  # [bs, T]
    mask = data.batch["response_mask"]
    ours = gdpo_fast.gdpo(parts.double(), weights, lengths, convention="verl-0.9.1")
    ours_bs = ours.reshape(-1)[perm].float()[:, None] * mask
    diff = float((theirs - ours_bs).abs().max())
    size = float(theirs.abs().max())
    print(f"gdpo vs verl (G={G}, R={R}): max |Δ| = {diff:.3g}, max |A| = {size:.3g}")
    torch.testing.assert_close(theirs, ours_bs, rtol=1e-5, atol=1e-6)
    called, _ = integration.gdpo(
        data.batch["token_level_rewards"], mask, data.non_tensor_batch["uid"], config=config,
        non_tensor_batch=data.non_tensor_batch, batch=data.batch,
    )  # fmt: skip
    torch.testing.assert_close(called, ours_bs, rtol=0, atol=1e-7)
    plain = gdpo_fast.gdpo(parts.double(), weights)  # advest's sample whitening differs
    assert not torch.allclose(plain.reshape(-1)[perm].float(), ours.reshape(-1)[perm].float())


def test_gdpo_is_not_registered_in_verl_and_refuses_a_silent_fallback() -> None:
    from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY

    integration.register(k=2)
    assert "advest_grpo" in ADV_ESTIMATOR_REGISTRY and "advest_gdpo" not in ADV_ESTIMATOR_REGISTRY
    data, _, _, _ = _gdpo_batch(3, 4, 2, seed=1, levels=DYADIC)
    batch = data.batch
    args = (batch["token_level_rewards"], batch["response_mask"], data.non_tensor_batch["uid"])
    with pytest.raises(ValueError, match=r"set algorithm\.gdpo_reward_keys"):
        integration.gdpo(*args, config=AlgoConfig())
    config = AlgoConfig(gdpo_reward_keys=["r0", "r1"], norm_adv_by_std_in_grpo=False)
    with pytest.raises(ValueError, match="norm_adv_by_std_in_grpo=False has no meaning"):
        integration.gdpo(*args, config=config, non_tensor_batch=data.non_tensor_batch)


def test_where_gdpo_differs_from_verl_a_flat_reward_with_an_inexact_mean() -> None:
    """Three scores of 0.9 in a group: advest's flat rule gives that reward exact zeros; verl's
    float32 mean of them is off by an ulp, so it divides rounding noise (6e-8) by its float32
    std of the noise plus ε = 1e-6, about 0.05 per sample (spec/gdpo.md)."""
    data, parts, perm, lengths = _gdpo_batch(2, 3, 2, seed=5, levels=[0.0, 0.9, 0.25, 0.5])
    config = AlgoConfig(gdpo_reward_keys=["r0", "r1"])
    theirs = compute_advantage(data, "gdpo", config=config).batch["advantages"]
    ours = gdpo_fast.gdpo(parts.double(), None, lengths, convention="verl-0.9.1")
    mask = data.batch["response_mask"]
    assert not torch.allclose(theirs, ours.reshape(-1)[perm].float()[:, None] * mask, atol=1e-3)
