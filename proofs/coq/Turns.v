(* Turn-level baselines of multi-turn episodes (spec/episode.md), for every alphabet, number of
   turns and environment.

   At turn k of an episode, h is everything before the turn (the earlier turns, the
   environment's answers: any finite type H, any weights mu), a is the policy's choices in the
   turn (any finite type A, probabilities pi h), and z is the rest of the episode (the
   environment's answers and later turns: any finite type Z, probabilities rho h a). c is the
   other episodes' data, drawn independently (weights nu). The score s h a is one coordinate of
   grad log pi h a: only the policy's choices carry one (the environment's tokens carry none),
   and it has mean zero under pi h. *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp Require Import ring.
Set Implicit Arguments.
Unset Strict Implicit.
Unset Printing Implicit Defensive.
Import GRing.Theory Num.Theory.
Local Open Scope ring_scope.

Section Turns.
Variable R : numFieldType.
Variables H A Z C : finType.
Variables (mu : H -> R) (pi : H -> A -> R) (rho : H -> A -> Z -> R) (nu : C -> R).
Variable s : H -> A -> R.
Hypothesis score_mean0 : forall h, \sum_a pi h a * s h a = 0.
Hypothesis rho_sum1 : forall h a, \sum_z rho h a z = 1.

(* E[f] over the episode (h, a, z) and the other episodes c. *)
Definition expect (f : H -> A -> Z -> C -> R) :=
  \sum_c nu c * \sum_h mu h * \sum_a pi h a * \sum_z rho h a z * f h a z c.

Lemma expect_ext f g : (forall h a z c, f h a z c = g h a z c) -> expect f = expect g.
Proof.
move=> fg; rewrite /expect; apply: eq_bigr => c _; congr (_ * _).
apply: eq_bigr => h _; congr (_ * _); apply: eq_bigr => a _; congr (_ * _).
by apply: eq_bigr => z _; rewrite fg.
Qed.

Lemma expect_sub f g :
  expect (fun h a z c => f h a z c - g h a z c) = expect f - expect g.
Proof.
rewrite /expect -sumrB; apply: eq_bigr => c _; rewrite -mulrBr -sumrB; congr (_ * _).
apply: eq_bigr => h _; rewrite -mulrBr -sumrB; congr (_ * _).
apply: eq_bigr => a _; rewrite -mulrBr -sumrB; congr (_ * _).
by apply: eq_bigr => z _; rewrite mulrBr.
Qed.

Lemma expect_scale k f : expect (fun h a z c => k * f h a z c) = k * expect f.
Proof.
rewrite /expect mulr_sumr; apply: eq_bigr => c _; rewrite mulrCA; congr (_ * _).
rewrite mulr_sumr; apply: eq_bigr => h _; rewrite mulrCA; congr (_ * _).
rewrite mulr_sumr; apply: eq_bigr => a _; rewrite mulrCA; congr (_ * _).
by rewrite mulr_sumr; apply: eq_bigr => z _; rewrite mulrCA.
Qed.

(* A baseline that is a function of the history up to turn k and of the other episodes adds no
   bias: E[b(h, c) s(h, a)] = 0. *)
Theorem turn_baseline_adds_no_bias (b : H -> C -> R) :
  expect (fun h a z c => b h c * s h a) = 0.
Proof.
rewrite /expect big1 // => c _; rewrite big1 ?mulr0 // => h _.
rewrite (eq_bigr (fun a => b h c * (pi h a * s h a))); last first.
  move=> a _; rewrite -big_distrl /= rho_sum1 mul1r mulrCA.
  by [].
by rewrite -big_distrr /= score_mean0 mulr0 mulr0.
Qed.

(* spec/episode.md turn_rloo: R_k (the return from turn k, any function of the episode) minus a
   baseline of the other episodes' returns has the expectation of R_k alone. *)
Theorem turn_rloo_is_unbiased (Rk : H -> A -> Z -> R) (g : C -> R) :
  expect (fun h a z c => (Rk h a z - g c) * s h a) =
  expect (fun h a z c => Rk h a z * s h a).
Proof.
rewrite (@expect_ext _ (fun h a z c => Rk h a z * s h a - (fun _ c => g c) h c * s h a)).
  by rewrite expect_sub turn_baseline_adds_no_bias subr0.
by move=> h a z c; rewrite mulrBl.
Qed.

(* The return from turn k is enough: rewards before turn k (functions of h) add nothing. *)
Theorem reward_to_go_suffices (past : H -> R) (Rk : H -> A -> Z -> R) :
  expect (fun h a z c => (past h + Rk h a z) * s h a) =
  expect (fun h a z c => Rk h a z * s h a).
Proof.
rewrite (@expect_ext _ (fun h a z c => Rk h a z * s h a - (fun h (_ : C) => - past h) h c * s h a)).
  by rewrite expect_sub turn_baseline_adds_no_bias subr0.
by move=> h a z c; rewrite mulNr opprK mulrDl addrC.
Qed.
(* spec/episode.md turn_index_mean: MT-GRPO's per-turn-index baseline at turn k sums one group
   mean per turn the episode itself takes. With the mean of turn k (mu1) and of turn k + 1 (mu2),
   the turn-k baseline is mu1 + [the episode goes on] * mu2, and the bias is the closed form of
   verl #7244: -mu2 times the gradient of the probability of taking another turn,
   E[[go] s] (a hidden -mu2 on every "take another turn"). *)
Theorem turn_index_mean_bias (Rk : H -> A -> Z -> R) (go : H -> A -> bool) (mu1 mu2 : R) :
  expect (fun h a z c => (Rk h a z - (mu1 + (go h a)%:R * mu2)) * s h a) =
  expect (fun h a z c => Rk h a z * s h a) - mu2 * expect (fun h a z c => (go h a)%:R * s h a).
Proof.
rewrite (@expect_ext _ (fun h a z c => (Rk h a z * s h a - (fun _ _ => mu1) h c * s h a)
                                       - mu2 * ((go h a)%:R * s h a))).
  by rewrite expect_sub expect_sub turn_baseline_adds_no_bias subr0 expect_scale.
by move=> h a z c; ring.
Qed.
End Turns.

(* The bias is not zero: a one-decision instance (the policy goes on with probability p, a
   tabular softmax's score of "go on" is [go] - p) gives E[[go] s] = p (1 - p), so with
   mu2 <> 0 and 0 < p < 1 the per-turn-index baseline moves the gradient by -mu2 p (1 - p). *)
Section Instance.
Variable R : numFieldType.
Variable p : R.

Lemma go_on_score_mean0 :
  \sum_(a : bool) (if a then p else 1 - p) * (a%:R - p) = 0.
Proof. rewrite big_bool /=; ring. Qed.

Lemma go_on_gradient :
  \sum_(a : bool) (if a then p else 1 - p) * (a%:R * (a%:R - p)) = p * (1 - p).
Proof. rewrite big_bool /=; ring. Qed.

Theorem turn_index_mean_is_biased (mu2 : R) :
  0 < p -> p < 1 -> mu2 != 0 ->
  (mu2 * (\sum_(a : bool) (if a then p else 1 - p) * (a%:R * (a%:R - p))) != 0)%R.
Proof.
move=> p0 p1 mu0; have q0 : 0 < 1 - p by rewrite subr_gt0.
by rewrite go_on_gradient !mulf_neq0 // lt0r_neq0.
Qed.
End Instance.
