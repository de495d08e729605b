"""The theorems of ``proofs/coq/*.v`` that ``advest prove`` checks: per theorem its qualified
name, the z3/sympy claim it matches, its statement in words and the spec row it backs."""

from __future__ import annotations

from dataclasses import dataclass

from advest.spec.maxk_weights import FORM_DEFINITIONS


@dataclass(frozen=True)
class Theorem:
    """One Coq theorem: its qualified name, the claim it proves and the spec row it backs."""

    name: str  # File.theorem, as Print Assumptions takes it (after Require Import of the file)
    claim: str  # the matching z3/sympy claim name in ``advest prove``, where there is one
    statement: str
    spec: str


UNBIASED_SPEC = "maxk.md §Unbiasedness"
# Unbiased.v: N i.i.d. samples y from π, a score s with E_π[s] = 0, the reward φ of K samples
# (max@K: their max) and ∇J_K = E_{π^K}[φ(z) Σ_j s(z_j)]; every N, every 0 < K ≤ N (K < N for
# Bagirov), every numeric field, every φ.
UNBIASED: tuple[Theorem, ...] = (
    Theorem(
        "Unbiased.leave_one_out_independent",
        "leave_one_out_independent",
        "F a function of y_{−i}: E_{π^N}[F(y) g(y_i)] = E_{π^N}[F] · E_π[g]",
        UNBIASED_SPEC,
    ),
    Theorem(
        "Unbiased.distinct_positions_are_iid",
        "distinct_positions_are_iid",
        "h injective: E_{π^N}[G(y_{h(1)}, …, y_{h(k)})] = E_{π^k}[G]",
        UNBIASED_SPEC,
    ),
    Theorem(
        "Unbiased.leave_one_out_adds_no_bias",
        "leave_one_out_adds_no_bias",
        "F a function of y_{−i}: E_{π^N}[F(y) s(y_i)] = 0",
        UNBIASED_SPEC,
    ),
    Theorem(
        "Unbiased.baseline_adds_no_bias",
        "baseline_adds_no_bias",
        "b fixed before sampling: E_{π^N}[Σ_i b_i s(y_i)] = 0",
        UNBIASED_SPEC,
    ),
    Theorem(
        "Unbiased.rloo_is_unbiased",
        "rloo_is_unbiased",
        "E_{π^N}[Σ_i (r(y_i) − mean_{j≠i} r(y_j)) s(y_i)] = N · E_π[r s] (= N ∇J_pass@1)",
        UNBIASED_SPEC + " (K = 1); group.md rloo",
    ),
    Theorem(
        "Unbiased.grpo_is_biased",
        "grpo_is_biased",
        "N = 2, ε 0, ddof 0 or 1, rewards (0, 1, 3), π uniform: no c with"
        " E_{π^2}[Σ_i A^GRPO_i s(y_i)] = c E_π[r s] for every zero-mean score s",
        "group.md grpo",
    ),
    Theorem(
        "Unbiased.l2o_baseline_adds_no_bias",
        "l2o_baseline_adds_no_bias",
        "E_{π^N}[Σ_i b_i s(y_i)] = 0 for MaxPO's leave-two-out baseline b",
        UNBIASED_SPEC,
    ),
    *(
        Theorem(f"Unbiased.{name}_is_unbiased", f"{name}_is_unbiased", statement, UNBIASED_SPEC)
        for name, statement in (
            ("ei", "E_{π^N}[Σ_i EI_i s(y_i)] = (N/K) ∇J_K"),
            ("maxpo", "E_{π^N}[Σ_i (EI_i − b_i) s(y_i)] = (N/K) ∇J_K"),
            ("canonical", "E_{π^N}[Σ_i Δ_i s(y_i)] = (N/K) ∇J_K"),
            ("pkpo_s", "E_{π^N}[Σ_i s^PKPO_i s(y_i)] = ∇J_K"),
            ("pkpo_sloo", "E_{π^N}[Σ_i sloo_i s(y_i)] = ∇J_K"),
            ("pkpo_sloo_minus_one", "E_{π^N}[Σ_i sloo−1_i s(y_i)] = ∇J_K"),
            ("bagirov_centred", "E_{π^N}[Σ_i (r̃_i − mean r̃) s(y_i)] = ((N−K)/N) ∇J_K"),
            ("m_plus_minus_m_hat", "E_{π^N}[Σ_i (M⁺_i − M̂_K) s(y_i)] = ((N−K)/K) ∇J_K"),
        )
    ),
    Theorem(
        "Biased.ei_l1o_is_biased",
        "ei_l1o_is_biased",
        "N = K = 2, rewards (0, 1, 3), π uniform, φ = max: no c with"
        " E_{π^2}[Σ_i ei_l1o_i s(y_i)] = c ∇J_2 for every zero-mean score s",
        UNBIASED_SPEC + " (ei_l1o)",
    ),
)

# Symmetry.v: f a max of the rewards x (Sorted.is_max, max ∅ = 0), any ordered field, every N and
# K, no sortedness; the nine estimators are EI, b, EI − b, Δ, ei_l1o, s, sloo, sloo−1 and Bagirov's
# centred s − mean s (tang_passk = EI at K = N, bagirov_transform = s by I6, Chen raw ∝ Δ by I9).
SYMMETRY: tuple[Theorem, ...] = (
    Theorem(
        "Symmetry.permutation_equivariance",
        "definitions_are_permutation_equivariant",
        "y_j = x_σ(j) for a permutation σ of the N samples: A(y)_i = A(x)_σ(i) for the nine"
        " estimators",
        "maxk.md P1",
    ),
    Theorem(
        "Symmetry.ties_get_equal_outputs",
        "ties_get_equal_outputs",
        "x_i = x_j: A_i = A_j for the nine estimators",
        "maxk.md P3",
    ),
    Theorem(
        "Symmetry.shift_rules",
        "shift_rules_hold",
        "y_j = x_j + c, 0 < K ≤ N: EI, s, sloo−1 move by c[K=1], cK/N, c[K=1]/N; ei_l1o by 0"
        " (N ≥ 2); K < N: b by c[K=1], sloo by −cK/(N(N−1)), EI − b, Δ, s − mean s by 0",
        "maxk.md I14",
    ),
    # Binary.v: rewards 0 or 1, N_neg failures, f a max of the rewards; Chen et al.'s formulas
    # (reference.maxk.chen_passk, normalize=False) transcribed.
    Theorem(
        "Binary.pass_at_k_is_m_hat",
        "pass_at_k_is_m_hat",
        "binary r, 0 < K ≤ N: R̄ = 1 − C(N_neg, K)/C(N, K) = M̂_K",
        "maxk.md I9",
    ),
    Theorem(
        "Binary.chen_raw_is_scaled_canonical",
        "chen_raw_is_scaled_canonical",
        "binary r, 0 < K < N: Chen raw_i (1 − R̄ if r_i = 1, else"
        " 1 − R̄ − C(N_neg−1, K−1)/C(N−1, K−1)) = ((N−K)/N) Δ_i",
        "maxk.md I9",
    ),
)

MAXRL_SPEC = "maxrl.md claim"
# MaxRL.v: Unbiased.v's model with pass/fail rewards (succ: which answers pass); ∇pass@k is the
# score-function gradient E_{π^k}[pass(z) Σ_j s(z_j)]; every N. The spec field names the claims
# table row of spec/maxrl.md that cites the theorem.
MAXRL: tuple[Theorem, ...] = (
    Theorem(
        "MaxRL.harmonic_canonical",
        "maxrl_harmonic_canonical",
        "f(T) = [T ∩ G ≠ ∅] (G the passing samples): Σ_{K=1}^{N} Δ_i(K) = N [i ∈ G] / |G|",
        f"{MAXRL_SPEC} 3",
    ),
    Theorem(
        "MaxRL.maxrl_is_a_sum_of_canonical",
        "maxrl_is_a_sum_of_canonical",
        "pass/fail r: maxrl(r)_i = Σ_{K=1}^{N−1} canonical(r, K)_i",
        f"{MAXRL_SPEC} 3",
    ),
    Theorem(
        "MaxRL.maxrl_is_a_harmonic_sum_of_canonical",
        "maxrl_is_a_harmonic_sum_of_canonical",
        "pass/fail r: maxrl_unbiased(r, baseline=False)_i = N r_i / S"
        " = Σ_{K=1}^{N} canonical(r, K)_i (canonical at K = N: the max of all N rewards)",
        f"{MAXRL_SPEC} 3",
    ),
    Theorem(
        "MaxRL.maxrl_unbiased_is_unbiased",
        "maxrl_unbiased_is_unbiased",
        "pass/fail r, baseline on or off: E_{π^N}[Σ_i A_i s(y_i)] = N Σ_{k=1}^{N} (1/k) ∇pass@k",
        f"{MAXRL_SPEC} 1",
    ),
    Theorem(
        "MaxRL.maxrl_bias",
        "maxrl_bias",
        "pass/fail r: E_{π^N}[Σ_i maxrl_i s(y_i)] = N Σ_{k=1}^{N} (1/k) ∇pass@k − ∇pass@N",
        f"{MAXRL_SPEC} 2",
    ),
    Theorem(
        "MaxRL.maxrl_is_unbiased_for_one_sample_fewer",
        "maxrl_is_unbiased_for_one_sample_fewer",
        "pass/fail r, N > 0: E_{π^N}[Σ_i maxrl_i s(y_i)] = N Σ_{k=1}^{N−1} (1/k) ∇pass@k",
        f"{MAXRL_SPEC} 2",
    ),
    Theorem(
        "MaxRL.grad_pass_at_k",
        "grad_pass_at_k",
        "pass/fail r, p = E_π[r], ∇p = E_π[r s]: ∇pass@k = k (1 − p)^{k−1} ∇p",
        f"{MAXRL_SPEC} 1",
    ),
    Theorem(
        "MaxRL.maxrl_unbiased_closed_form",
        "maxrl_unbiased_closed_form",
        "pass/fail r, p ≠ 0: E_{π^N}[Σ_i A_i s(y_i)] = N (1 − (1 − p)^N)/p ∇p",
        f"{MAXRL_SPEC} 1",
    ),
    Theorem(
        "MaxRL.maxrl_closed_form",
        "maxrl_closed_form",
        "pass/fail r, p ≠ 0: E_{π^N}[Σ_i maxrl_i s(y_i)]"
        " = N [(1 − (1 − p)^N)/p − (1 − p)^{N−1}] ∇p",
        f"{MAXRL_SPEC} 2",
    ),
)

# Baselines.v: Unbiased.v's model; a baseline built from the other samples and from quantities
# fixed before the group is drawn (KAE's history) keeps RLOO's expectation N ∇J (J = mean reward).
# The spec field names the page and the claims-table row that cites the theorem.
BASELINES: tuple[Theorem, ...] = (
    Theorem(
        "Baselines.loo_baseline_is_unbiased",
        "loo_baseline_is_unbiased",
        "b_i a function of y_{−i} (and of anything fixed before sampling):"
        " E_{π^N}[Σ_i (r(y_i) − b_i) s(y_i)] = N E_π[r s] (= N ∇J_pass@1)",
        "kae.md 15",
    ),
    Theorem(
        "Baselines.kae_is_unbiased",
        "kae_is_unbiased",
        "any history weights h_w, h_z: A_g = r_g − (h_z + Σ_{k≠g} r_k)/(h_w + N − 1):"
        " E_{π^N}[Σ_g A_g s(y_g)] = N E_π[r s]",
        "kae.md 15",
    ),
)

# Prefix.v: an autoregressive model over any finite alphabet, responses of any length.
PREFIX: tuple[Theorem, ...] = (
    Theorem(
        "Prefix.prefix_baseline_adds_no_bias",
        "prefix_baseline_adds_no_bias",
        "tokens drawn from p(·|prefix), Σ_v p(h,v) S(h·v) = 0 for every prefix h: a baseline b at"
        " step t that reads the prefix y_{<t} only has E[b(y_{<t}) S(y_{≤t})] = 0, every length",
        "hista.md unbiasedness",
    ),
    Theorem(
        "Prefix.later_token_baseline_can_be_biased",
        "later_token_baseline_can_be_biased",
        "Y = bool, p(y0) = 1/2, p(y1 = y0 | y0) = 3/4, s(y0) = ±1: the baseline [y1] read at"
        " step 0 has E[[y1] s(y0)] = 1/4 ≠ 0",
        "hista.md unbiasedness",
    ),
)

# Turns.v: multi-turn episodes at turn k, for every alphabet, number of turns and environment: the
# history before the turn (any finite type, any weights), the turn's policy choices, the rest of
# the episode and the other episodes (any finite types); only the policy's choices carry a score.
TURNS_SPEC = "episode.md"
TURNS: tuple[Theorem, ...] = (
    Theorem(
        "Turns.turn_baseline_adds_no_bias",
        "turn_baseline_adds_no_bias",
        "b a function of the history before turn k and of the other episodes:"
        " E[b(h, c) s(h, a)] = 0",
        TURNS_SPEC + " turn_rloo",
    ),
    Theorem(
        "Turns.turn_rloo_is_unbiased",
        "turn_rloo_is_unbiased",
        "R_k any return from turn k, g any function of the other episodes:"
        " E[(R_k − g(c)) s] = E[R_k s]",
        TURNS_SPEC + " turn_rloo",
    ),
    Theorem(
        "Turns.reward_to_go_suffices",
        "reward_to_go_suffices",
        "rewards before turn k (functions of h) add nothing: E[(past(h) + R_k) s] = E[R_k s]",
        TURNS_SPEC + " turn_rloo",
    ),
    Theorem(
        "Turns.turn_index_mean_bias",
        "turn_index_mean_bias",
        "the per-turn-index baseline μ_k + [go on] μ_{k+1}: E[(R_k − μ_k − [go] μ_{k+1}) s]"
        " = E[R_k s] − μ_{k+1} E[[go] s] (verl #7244's closed form)",
        TURNS_SPEC + " turn_index_mean",
    ),
    Theorem(
        "Turns.turn_index_mean_is_biased",
        "turn_index_mean_is_biased",
        "go on with probability p, score [go] − p: μ_{k+1} E[[go] s] = μ_{k+1} p (1 − p) ≠ 0"
        " for μ_{k+1} ≠ 0 and 0 < p < 1",
        TURNS_SPEC + " turn_index_mean",
    ),
)

# Every theorem holds for every N and every 0 < K < N (K <= N where the spec allows it), for any
# numeric field and *any* set function f in place of max (the counting theorems never use max).
THEOREMS: tuple[Theorem, ...] = (
    Theorem(
        "Counting.canonical_sums_to_zero",
        "canonical_sums_to_zero",
        "Σ_i Δ_i = 0",
        "maxk.md I4",
    ),
    Theorem(
        "Counting.maxpo_equals_canonical",
        "maxpo_equals_canonical",
        "EI_i − b_i = Δ_i",
        "maxk.md I3",
    ),
    Theorem(
        "Counting.mean_ei_equals_mean_l2o",
        "mean_ei_equals_mean_l2o",
        "mean EI = mean b",
        "maxk.md I13",
    ),
    Theorem(
        "Counting.all_subsets_decomposition",
        "all_subsets_decomposition",
        "M̂_K = (K/N) M⁺_i + ((N−K)/N) M⁻_i",
        "maxk.md I5",
    ),
    Theorem(
        "Counting.m_plus_minus_m_hat_is_scaled_canonical",
        "m_plus_minus_m_hat_is_scaled_canonical",
        "M⁺_i − M̂_K = ((N−K)/N) Δ_i",
        "maxk.md I5, I9",
    ),
    Theorem(
        "Counting.pkpo_sloo_minus_one_is_scaled_ei",
        "pkpo_sloo_minus_one_is_scaled_ei",
        "sloo−1_i = (K/N) EI_i",
        "maxk.md I7",
    ),
    Theorem(
        "Counting.pkpo_sloo_closed_form",
        "pkpo_sloo_closed_form",
        "sloo_i = (K/N) M⁺_i − (K/(N−1)) M⁻_i",
        "maxk.md I8",
    ),
    Theorem(
        "Counting.pkpo_sloo_sums_to",
        "pkpo_sloo_sums_to",
        "Σ_i sloo_i = −(K/(N−1)) M̂_K",
        "maxk.md I8",
    ),
    Theorem(
        "Counting.mean_ei_is_m_hat_difference",
        "mean_ei_is_m_hat_difference",
        "0 < K ≤ N: mean EI = M̂_K − M̂_{K−1}",
        "maxk.md I13",
    ),
    Theorem(
        "Counting.bagirov_centred_is_scaled_canonical",
        "bagirov_centred_is_scaled_canonical",
        "r̃_i − mean r̃ = K(N−K)/N² Δ_i",
        "maxk.md I10",
    ),
    Theorem(
        "Evaluation.fast_evaluation_is_the_linear_form",
        "fast_evaluation_is_the_linear_form",
        "(own−below)_p x_p + Σ_{q≤p}(below−above)_q x_q + Σ_q above_q x_q"
        " = own_p x_p + Σ_{q<p} below_q x_q + Σ_{q>p} above_q x_q",
        "maxk.md §Algorithm",
    ),
    Theorem(
        "Sorted.lform_is_linear_form",
        "lform_is_linear_form",
        "own_p x_p + Σ_{q:'I_N, q<p} below_q x_q + Σ_{q:'I_N, q>p} above_q x_q (Sorted.lform)"
        " = Evaluation.linear_form (sums over 0 ≤ q < p and p < q < N)",
        "maxk.md §Algorithm",
    ),
    Theorem(
        "Sorted.is_max_fmax",
        "is_max_fmax",
        "on a sorted x, the value at a set's largest index is its max (the premise is satisfiable)",
        "maxk.md §Algorithm",
    ),
    *(
        Theorem(
            f"Sorted.{definition}_sorted",
            "fast_forms_equal_definitions",
            f"sorted x, f = max: {definition}_p = FORMS[{form!r}] at p",
            "maxk.md I6, §Algorithm" if definition == "pkpo_s" else "maxk.md §Algorithm",
        )
        for form, (definition, _) in FORM_DEFINITIONS.items()
    ),
    *SYMMETRY,
    *UNBIASED,
    *MAXRL,
    *BASELINES,
    *PREFIX,
    *TURNS,
)
