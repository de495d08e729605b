(* Baselines of the state and history estimators (spec/kae.md claim 15), in Unbiased.v's model.

   A baseline b_i that is a function of the other samples y_{-i} and of quantities fixed before
   the group is drawn adds no bias (Unbiased.leave_one_out_adds_no_bias): the advantage
   r(y_i) - b_i then has RLOO's expectation, N * grad pass@1 (loo_baseline_is_unbiased).

   KAE (spec/kae.md, reference/kae.py) with normalize = "none" is such an advantage: with the
   history weights hw = sum_H K(u_j) and hz = sum_H K(u_j) Z_j (rewards of earlier iterations,
   fixed before this group is sampled, any values) and K(0) = 1,
     V_g = (hz + sum_{k <> g} Z_k) / (hw + (G - 1)),   A_g = Z_g - V_g,
   and V_g = 0 when the denominator is 0 (a cold start; x / 0 = 0 in Coq, as the spec pins).
   Hista's baseline is not covered: at token t it also reads rollout i's own hidden states
   before t, a per-token causal argument this whole-response model does not have. *)
From mathcomp Require Import all_ssreflect all_algebra.
From Advest Require Import Counting Unbiased.
Set Implicit Arguments.
Unset Strict Implicit.
Unset Printing Implicit Defensive.
Import GRing.Theory Num.Theory.
Local Open Scope ring_scope.

Section Baselines.
Variable R : numFieldType.
Variable Y : finType.
Variables (pi s : Y -> R).
Hypothesis pi_sum1 : \sum_v pi v = 1.
Hypothesis score_mean0 : \sum_v pi v * s v = 0.

(* Any leave-one-out baseline: r(y_i) - b_i has the RLOO expectation N * E_pi[r s]. *)
Theorem loo_baseline_is_unbiased m (r : Y -> R) (b : 'I_m -> {ffun 'I_m -> Y} -> R) :
  (forall i, leaves_out i (b i)) ->
  E pi (fun y : {ffun 'I_m -> Y} => \sum_i (r (y i) - b i y) * s (y i)) =
  m%:R * \sum_v pi v * r v * s v.
Proof.
move=> bi; rewrite (@E_ext _ _ pi m _ (fun y => \sum_i r (y i) * s (y i) -
    \sum_i b i y * s (y i))); last by move=> y; rewrite -sumrB; apply: eq_bigr => i _; rewrite mulrBl.
rewrite E_sub !E_sum [X in _ - X]big1 ?subr0; last first.
  by move=> i _; apply: leave_one_out_adds_no_bias.
rewrite (eq_bigr (fun _ => \sum_v pi v * r v * s v)); last first.
  move=> i _; rewrite (E_one_sample pi_sum1 i (fun v => r v * s v)).
  by apply: eq_bigr => v _; rewrite mulrA.
by rewrite sumr_const card_ord mulr_natl.
Qed.

(* spec/kae.md `kae`, one group at iteration i, normalize = "none": hw, hz the history's kernel
   weight and kernel-weighted reward sum, fixed before the group is drawn. *)
Definition kae (hw hz : R) m (r : Y -> R) (y : {ffun 'I_m -> Y}) (g : 'I_m) :=
  r (y g) - (hz + \sum_(k | k != g) r (y k)) / (hw + m.-1%:R).

(* spec/kae.md claim 15: for every history and every N, KAE's expectation is RLOO's, N grad J. *)
Theorem kae_is_unbiased (hw hz : R) m (r : Y -> R) :
  E pi (fun y : {ffun 'I_m -> Y} => \sum_g kae hw hz r y g * s (y g)) =
  m%:R * \sum_v pi v * r v * s v.
Proof.
rewrite -(@loo_baseline_is_unbiased m r
  (fun g y => (hz + \sum_(k | k != g) r (y k)) / (hw + m.-1%:R))) //.
by move=> g y z yz; congr ((hz + _) / _); apply: eq_bigr => k kg; rewrite yz.
Qed.
End Baselines.
