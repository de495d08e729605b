"""The oracle on the project's own estimators gives the verdicts the notes predict, and
`advest check` behaves as a command (table, JSON, exit codes)."""

from __future__ import annotations

import functools

import pytest
import torch

import advest.fast.group
import advest.fast.maxk  # noqa: F401  (binds the submodule used as fast.maxk)
from advest import fast, oracle

# the explicit inputs' verdicts here; the search's are tests/core/oracle/test_search.py's
explicit_check = functools.partial(oracle.check, budget=None)


def _verdicts(fn: object, family: oracle.Objective, k: int = 2) -> dict[str, str]:
    """float64 verdicts at N = 4 (maxk, K = 2) or 8 (outcome), the notes' reference setting."""
    n = 4 if family == "maxk" else 8
    findings = explicit_check(fn, family, k, ns=[n], dtype="float64")  # type: ignore[arg-type]
    return {f.prop: f.verdict for f in findings}


def test_maxpo_is_the_canonical_advantage_and_unbiased() -> None:
    v = _verdicts(fast.maxk.maxpo, "maxk")
    assert v["relation to canonical"] == "canonical"
    assert v["unbiased"].startswith("yes, E[ĝ] = 2·∇J")  # N/K = 4/2
    assert v["centred"] == "yes" and v["shift invariant"] == "yes"


def test_chen_raw_is_proportional_with_n_minus_k_over_n() -> None:
    def raw(rewards: object, k: int) -> object:
        return fast.maxk.chen_passk(rewards, k, normalize=False)  # type: ignore[arg-type]

    findings = explicit_check(raw, "maxk", 2, ns=[8], dtype="float64")
    v = {f.prop: f.verdict for f in findings}
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


def test_maxrl_verdicts_come_out_as_spec_maxrl_claims() -> None:
    """--family maxrl (pass/fail rewards, J = Σ_{k≤N} (1/k)·pass@k): the unbiased form is
    unbiased with c = N, the trainers' form is not (c differs across bandits). As an outcome
    estimator both are biased for the mean reward; the batch with negative rewards is left out
    and said so."""
    import advest.fast.maxrl as fast_maxrl

    for n in (2, 4):
        unbiased = explicit_check(fast_maxrl.maxrl_unbiased, "maxrl", ns=[n], dtype="float64")
        verdicts = {f.prop: f.verdict for f in unbiased}
        assert verdicts["unbiased"] == f"yes, E[ĝ] = {n}·∇J for Σ_{{k≤N}} (1/k)·pass@k"
        trainers = explicit_check(fast_maxrl.maxrl, "maxrl", ns=[n], dtype="float64")
        found = {f.prop: f for f in trainers}
        assert found["unbiased"].verdict.startswith("no") and found["centred"].verdict == "yes"
    # the explicit inputs' verdicts (the search's are tests/core/oracle/test_search.py's)
    outcome = {f.prop: f for f in explicit_check(fast_maxrl.maxrl, "outcome", ns=[4])}
    assert outcome["unbiased"].verdict.startswith("no")
    assert outcome["scale equivariant"].verdict.startswith("invariant")
    assert "refused by the estimator: normal on a 1/32 grid" in outcome["centred"].evidence


def test_group_baselines_for_the_mean_reward() -> None:
    assert _verdicts(fast.group.rloo, "outcome")["unbiased"].startswith("yes, E[ĝ] = 8·∇J")
    # dr_grpo: unbiased up to the fixed factor (G−1)/G of RLOO's: 7 = 8 · 7/8
    assert _verdicts(fast.group.dr_grpo, "outcome")["unbiased"].startswith("yes, E[ĝ] = 7·∇J")
    grpo = _verdicts(fast.group.grpo, "outcome")
    assert grpo["centred"] == "yes" and grpo["unbiased"].startswith("no")


@pytest.mark.parametrize("name", ["grpo", "dr_grpo", "rloo"])
def test_no_group_baseline_is_unbiased_for_max_at_k(name: str) -> None:
    fn = getattr(fast.group, name)
    findings = explicit_check(fn, "maxk", 2, signature="rewards", ns=[4], dtype="float64")
    unbiased = next(f for f in findings if f.prop == "unbiased")  # one N, one dtype
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


def _naive_rloo(rewards: torch.Tensor) -> torch.Tensor:
    """RLOO in the rewards' own dtype, as users write it."""
    G = rewards.shape[-1]
    return rewards - (rewards.sum(-1, keepdim=True) - rewards) / (G - 1)


def _by(findings: list[oracle.Finding], prop: str, dtype: str) -> list[str]:
    return [f.verdict for f in findings if f.prop == prop and f.dtype == dtype]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_a_correct_low_precision_rloo_passes_every_check(dtype: str) -> None:
    for fn in (fast.group.rloo, _naive_rloo):
        findings = explicit_check(fn, "outcome", ns=[3, 8], dtype=dtype)
        for prop in ("centred", "shift invariant", "permutation equivariant"):
            assert _by(findings, prop, dtype) == ["yes", "yes"], (fn, prop)
        assert all(v.startswith("yes") for v in _by(findings, "unbiased", dtype)), fn
        assert _by(findings, "unbiased", "float64")  # float64 is run too, and reported


def test_a_biased_float32_rloo_still_comes_out_biased() -> None:
    def std_normalised(rewards: torch.Tensor) -> torch.Tensor:
        return _naive_rloo(rewards) / (rewards.std(-1, keepdim=True) + 1e-6)

    findings = explicit_check(std_normalised, "outcome", ns=[3], dtype="float32")
    assert _by(findings, "unbiased", "float32")[0].startswith("no")


def test_in_place_modification_is_reported_and_checks_run_on_copies() -> None:
    def in_place(rewards: torch.Tensor) -> torch.Tensor:
        G = rewards.shape[-1]
        rewards -= rewards.mean(-1, keepdim=True)
        rewards *= G / (G - 1)
        return rewards

    findings = explicit_check(in_place, "outcome", ns=[3])
    first = findings[0]
    assert first.prop == "modifies its inputs" and first.verdict.startswith("yes")
    assert "rewards changed in place" in first.evidence
    assert _by(findings, "shift invariant", "float32") == ["yes"]  # judged on copies
    assert explicit_check(_naive_rloo, "outcome", ns=[3])[0].verdict == "no"


def test_outputs_of_the_wrong_shape_dtype_or_device_are_refused() -> None:
    def transposed(rewards: torch.Tensor) -> torch.Tensor:
        return _naive_rloo(rewards).T.contiguous()

    def as_float64(rewards: torch.Tensor) -> torch.Tensor:
        return _naive_rloo(rewards).double()

    with pytest.raises(oracle.OracleError, match=r"got shape \[3, 32\], expected \[32, 3\]"):
        explicit_check(transposed, "outcome", ns=[3])
    wrong_dtype = r"got dtype torch\.float64, expected torch\.float32"
    with pytest.raises(oracle.OracleError, match=wrong_dtype):
        explicit_check(as_float64, "outcome", ns=[3])
    with pytest.raises(oracle.OracleError, match="got device meta, expected cpu"):
        explicit_check(lambda r: _naive_rloo(r).to("meta"), "outcome", ns=[3])


def test_k_and_n_are_validated_before_the_users_code_runs() -> None:
    calls: list[int] = []

    def spy(rewards: torch.Tensor, k: int) -> torch.Tensor:
        calls.append(k)
        return fast.maxk.maxpo(rewards, k)

    with pytest.raises(oracle.OracleError, match="--k must be an integer >= 1; got 0"):
        explicit_check(spy, "maxk", 0)
    with pytest.raises(oracle.OracleError, match="--n 3 is below --k 4"):
        explicit_check(spy, "maxk", 4, ns=[3])
    assert calls == []


def test_k_goes_only_into_a_parameter_named_k_unless_the_signature_says_so() -> None:
    def passk(rewards: torch.Tensor, epsilon: float = 1e-6) -> torch.Tensor:
        return fast.maxk.canonical(rewards, 2)

    with pytest.raises(oracle.OracleError, match="its second parameter is 'epsilon', not 'k'"):
        explicit_check(passk, "maxk", 2, ns=[4])
    findings = explicit_check(passk, "maxk", 2, signature="rewards, k", ns=[4])
    assert _by(findings, "relation to canonical", "float32") == ["canonical"]


def test_k_equal_n_is_checked_for_estimators_that_accept_it() -> None:
    findings = explicit_check(fast.maxk.ei, "maxk", 3, ns=[3, 4, 8], dtype="float64")
    assert [f.n for f in findings if f.prop == "unbiased"] == [3, 4, 8]
    assert _by(findings, "unbiased", "float64")[0].startswith("yes")
    refused = explicit_check(fast.maxk.maxpo, "maxk", 3, ns=[3, 4], dtype="float64")
    assert _by(refused, "accepts N", "float64")[0] == "refused"  # maxpo claims K <= N - 1


def test_the_report_table_has_a_row_per_property_and_a_column_per_dtype() -> None:
    """Verdicts merged over N where they agree, split by N where they do not; a global finding
    (no dtype) fills every column."""
    F = oracle.Finding
    findings = [
        F("centred", "yes", "", "float32", 2),
        F("centred", "yes", "", "float32", 8),
        F("centred", "no", "", "float64", 2),
        F("centred", "yes", "", "float64", 8),
        F("modifies its inputs", "no", ""),
    ]
    lines = oracle.table(findings).splitlines()
    assert lines[0] == "| property | float32 | float64 |"
    assert lines[2:] == [
        "| centred | yes (N = 2, 8) | N=2: no; N=8: yes |",
        "| modifies its inputs | no | no |",
    ]


def _all_nan(rewards: torch.Tensor) -> torch.Tensor:
    return torch.full_like(rewards, float("nan"))


def _z_score_without_eps(rewards: torch.Tensor) -> torch.Tensor:
    """GRPO as often written: 0/0 = NaN for a group of equal rewards."""
    centred = rewards - rewards.mean(-1, keepdim=True)
    return centred / rewards.std(-1, keepdim=True)


PROPERTIES = ("centred", "shift invariant", "scale equivariant", "permutation equivariant")


def test_nan_outputs_are_never_judged_centred_or_invariant_and_the_inputs_are_named() -> None:
    """NaN compares false with every bound: an all-NaN output used to pass every check."""
    findings = explicit_check(_all_nan, "outcome", ns=[3], dtype="float64")
    v = {f.prop: f for f in findings}
    for prop in (*PROPERTIES, "unbiased", "finite output"):
        assert v[prop].verdict == oracle.NON_FINITE, prop
    assert "NaN in 32 of 32 groups, e.g. rewards [" in v["finite output"].evidence
    assert v["centred"].evidence.endswith("→ [nan, nan, nan]")


def test_nan_on_some_groups_is_found_and_the_group_shown() -> None:
    """At N = 2 the integer batch has equal groups, where the z-score is 0/0; elsewhere it is
    centred, and the NaN groups used to be ignored by the max over the batch."""
    findings = explicit_check(_z_score_without_eps, "outcome", ns=[2], dtype="float64")
    v = {f.prop: f for f in findings}
    for prop in PROPERTIES:
        assert v[prop].verdict == oracle.NON_FINITE, prop
    equal = v["centred"].evidence.split("e.g. rewards [")[1].split("]")[0].split(", ")
    assert len(set(equal)) == 1, v["centred"].evidence  # the group shown is all-equal
    finite = _by(explicit_check(_naive_rloo, "outcome", ns=[2]), "finite output", "float32")
    assert finite == ["yes"]


def _length_weighted(rewards: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """OPO's baseline: the length-weighted mean reward of the group."""
    w = lengths.to(rewards.dtype)
    return rewards - (w * rewards).sum(-1, keepdim=True) / w.sum(-1, keepdim=True)


def test_response_lengths_are_permuted_with_their_samples() -> None:
    """A length-weighted baseline is permutation equivariant once each response keeps its
    length; before, the lengths stayed in place and verl's opo was reported "no"."""
    findings = explicit_check(_length_weighted, "outcome", signature="rewards, lengths", ns=[3, 8])
    assert _by(findings, "permutation equivariant", "float32") == ["yes", "yes"]
    assert _by(findings, "permutation equivariant", "float64") == ["yes", "yes"]


def _float32_inside(rewards: torch.Tensor) -> torch.Tensor:
    """A z-score computed in float32 whatever the rewards' dtype, as verl's grpo_vectorized
    does (its std's rounding is float32's)."""
    x = rewards.float()
    return ((x - x.mean(-1, keepdim=True)) / (x.std(-1, keepdim=True) + 1e-6)).to(rewards.dtype)


def test_an_estimator_computing_in_float32_is_judged_with_float32s_allowance() -> None:
    findings = explicit_check(_float32_inside, "outcome", ns=[3])
    assert _by(findings, "working precision", "float64") == ["float32"]
    for prop in ("centred", "shift invariant", "permutation equivariant"):
        assert _by(findings, prop, "float64") == ["yes"], prop
    # a float64 estimator gets no such row, and a real defect stays a "no" at float32's allowance
    assert _by(explicit_check(_naive_rloo, "outcome", ns=[3]), "working precision", "float64") == []

    def off_centre(rewards: torch.Tensor) -> torch.Tensor:
        return _float32_inside(rewards) + 1e-3

    assert _by(explicit_check(off_centre, "outcome", ns=[3]), "centred", "float64") == ["no"]


def _whitened(rewards: torch.Tensor) -> torch.Tensor:
    """Group-centred, then whitened over the whole batch (verl's reinforce_plus_plus_baseline
    without tokens): a group's advantages depend on the other groups."""
    centred = rewards - rewards.mean(-1, keepdim=True)
    return (centred - centred.mean()) / (centred.std() + 1e-8)


def test_coupled_groups_are_found_and_judged_with_the_batchs_allowance() -> None:
    findings = explicit_check(_whitened, "outcome", ns=[3, 8])
    v = {f.prop: f.verdict for f in findings}
    assert v["couples groups"].startswith("yes")
    assert _by(findings, "shift invariant", "float32") == ["yes", "yes"]
    assert _by(findings, "permutation equivariant", "float32") == ["yes", "yes"]
    assert v["all-equal groups"] == "yes: A = 0"  # the batch mean of group-centred values is 0
    assert v["centred"] == "yes"  # each group centred, then one scale for the batch

    def batch_whitened(rewards: torch.Tensor) -> torch.Tensor:  # verl's reinforce_plus_plus
        return (rewards - rewards.mean()) / (rewards.std() + 1e-8)

    v = {f.prop: f.verdict for f in explicit_check(batch_whitened, "outcome", ns=[3])}
    assert v["all-equal groups"].startswith("no: nonzero beside other groups, 0 alone")
    assert {f.prop: f.verdict for f in explicit_check(_naive_rloo, "outcome", ns=[3])}[
        "couples groups"
    ] == "no"


def _nemo_rl_loo_std(rewards: torch.Tensor) -> torch.Tensor:
    """NeMo-RL's GRPO advantage with ``use_leave_one_out_baseline`` and ``normalize_rewards``,
    re-implemented as NeMo-RL has it (``calculate_baseline_and_std_per_prompt`` before
    NVIDIA-NeMo/RL#4158), in the rewards' dtype (float32 in NeMo-RL): the leave-one-out mean and
    mean square by a matrix product, std = sqrt(E[r²] − E[r]²), and (r − b) / (std + ε) where
    std > 0. A one-pass variance: equal rewards leave a float32 residue instead of std = 0."""
    G = rewards.shape[-1]
    others = 1 - torch.eye(G, dtype=rewards.dtype)  # [G, G]: every sample but the i-th
    baseline = rewards @ others / (G - 1)  # [B, G]
    mean_square = rewards.square() @ others / (G - 1)  # [B, G]
    std = (mean_square - baseline.square()).sqrt().nan_to_num(0.0)
    advantage = rewards - baseline
    return torch.where(std > 0, advantage / (std + 1e-6), advantage)


def test_nemo_rls_float32_leave_one_out_std_is_inaccurate_for_one_against_equal_ones() -> None:
    """The reported spike: rewards [0, 0.95 × 7] give the 0 a leave-one-out std of float32
    residue instead of 0, and an advantage of about −2000 instead of −0.95."""
    findings = explicit_check(_nemo_rl_loo_std, "outcome", ns=[8])
    accurate = next(f for f in findings if f.prop == "accurate (vs float64)")
    assert accurate.verdict == "no", accurate.evidence
    assert "worst one reward against G − 1 equal ones" in accurate.evidence
    assert _by(findings, "unbiased", "float64")[0].startswith("no")  # normalised: biased too
    assert _by(
        explicit_check(_naive_rloo, "outcome", ns=[8]), "accurate (vs float64)", "float32"
    ) == ["yes"]


def test_a_singleton_group_returning_the_raw_reward_is_a_no() -> None:
    def rloo_as_verl(rewards: torch.Tensor) -> torch.Tensor:
        return rewards if rewards.shape[-1] == 1 else _naive_rloo(rewards)

    v = {f.prop: f.verdict for f in explicit_check(rloo_as_verl, "outcome", ns=[3])}
    assert v["singleton group"] == "no: A = r, the raw reward"
    zero = {f.prop: f.verdict for f in explicit_check(_whitened, "outcome", ns=[3])}
    assert zero["singleton group"].startswith("yes")


def test_an_estimator_whose_shift_is_not_checked_gets_its_whole_report() -> None:
    """maxrl refuses the shifted batches (negative rewards), so its shift finding carries no
    measured excess; the float64 column's working-precision rule must not need one (it raised
    KeyError: 'excess' for maxrl and chen_passk)."""
    from advest.fast import maxrl as fast_maxrl

    findings = explicit_check(fast_maxrl.maxrl, "maxrl", ns=[3])
    verdicts = {(f.prop, f.dtype): f.verdict for f in findings}
    assert verdicts[("shift invariant", "float64")] == "not checked"
    assert verdicts[("centred", "float64")] == "yes"
