(* The evaluation of the sorted linear forms that fast/ and proofs/ share
   (spec.maxk_weights.evaluate):

     out_p = (own − below)_p x_p + Σ_{q<=p} (below − above)_q x_q + Σ_q above_q x_q

   equals the linear form own_p x_p + Σ_{q<p} below_q x_q + Σ_{q>p} above_q x_q, for every group
   size n, every position p < n and any coefficients and values in a numeric field. Sorted.v's
   theorems are stated for Sorted.lform, the same form with sums over ordinals
   (Sorted.lform_is_linear_form). *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp Require Import ring.
Set Implicit Arguments.
Unset Strict Implicit.
Unset Printing Implicit Defensive.
Import GRing.Theory Num.Theory.
Local Open Scope ring_scope.

Section Evaluation.
Variable R : numFieldType.
Variables (n : nat) (own below above x : nat -> R).

Definition fast_evaluation p :=
  (own p - below p) * x p + \sum_(0 <= q < p.+1) (below q - above q) * x q
  + \sum_(0 <= q < n) above q * x q.

Definition linear_form p :=
  own p * x p + \sum_(0 <= q < p) below q * x q + \sum_(p.+1 <= q < n) above q * x q.

Theorem fast_evaluation_is_the_linear_form p : (p < n)%N -> fast_evaluation p = linear_form p.
Proof.
move=> pn; rewrite /fast_evaluation /linear_form.
rewrite (big_cat_nat _ _ _ (leq0n p.+1) pn) /= !big_nat_recr //=.
rewrite (eq_bigr (fun q => below q * x q - above q * x q)); last by move=> q _; rewrite mulrBl.
rewrite sumrB.
set B := \sum_(0 <= q < p) below q * x q; set A := \sum_(0 <= q < p) above q * x q.
set C := \sum_(p.+1 <= q < n) above q * x q; ring.
Qed.

End Evaluation.
