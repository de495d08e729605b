(* Chen et al.'s binomial form of pass@K, for every N (spec/maxk.md chen_passk, I9).

   With binary rewards (every x_i is 0 or 1) and N_neg failures, Chen et al. (arXiv:2508.10751,
   Eqs. 14–15) write the group's pass@K as R̄ = 1 − C(N_neg, K)/C(N, K), the unbiased pass@k
   estimator of Chen et al. 2021, and the advantage of a sample as 1 − R̄ if it is correct and
   1 − R̄ − C(N_neg − 1, K − 1)/C(N − 1, K − 1) if not (reference.maxk.chen_passk, raw). For every
   N and 0 < K <= N, every ordered field and mx a max of x (Sorted.is_max, max ∅ = 0), R̄ is M̂_K
   of Counting.v (pass_at_k_is_m_hat), and for K < N the raw advantage is ((N − K)/N) Δ_i
   (chen_raw_is_scaled_canonical, I9): Chen's estimator is advest's canonical one, rescaled. *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp Require Import ring zify.
From Advest Require Import Counting Sorted.
Set Implicit Arguments.
Unset Strict Implicit.
Unset Printing Implicit Defensive.
Import GRing.Theory Num.Theory.
Local Open Scope ring_scope.

Section Chen.
Variable R : realFieldType.
Variables (n K : nat) (x : nat -> R) (mx : {set 'I_n} -> R).
Hypothesis binary : forall i : 'I_n, x i = 0 \/ x i = 1.
Hypothesis mx_is_max : is_max x mx.
Implicit Types (A S T Z : {set 'I_n}) (i : 'I_n).

(* The failures, and Chen's formulas (reference.maxk.chen_passk with normalize=False). *)
Definition failures := [set i : 'I_n | x i == 0].
Definition n_neg := #|failures|.
Definition chen_r_bar : R := 1 - 'C(n_neg, K)%:R / 'C(n, K)%:R.
Definition chen_raw i : R :=
  if x i == 1 then 1 - chen_r_bar
  else 1 - chen_r_bar - 'C(n_neg.-1, K.-1)%:R / 'C(n.-1, K.-1)%:R.

(* On binary rewards the max over T is 1 unless every sample of T failed (max ∅ = 0). *)
Lemma mx_binary T : mx T = (~~ (T \subset failures))%:R.
Proof.
case: mx_is_max => m0 mS; case: (eqVneq T set0) => [-> | T0]; first by rewrite m0 sub0set.
have [ub [j jT ej]] := mS T T0; case: (boolP (T \subset failures)) => [/subsetP TZ | TZ].
  by rewrite ej; have := TZ j jT; rewrite inE => /eqP.
have [i iT iZ] : exists2 i, i \in T & i \notin failures.
  by apply/exists_inP; rewrite -negb_forall_in; apply: contra TZ => /forall_inP h; apply/subsetP.
have xi1 : x i = 1 by move: iZ; rewrite inE; case: (binary i) => ->; rewrite ?eqxx.
have := ub i iT; rewrite ej xi1 /=; case: (binary j) => -> //.
by rewrite ler10.
Qed.

Lemma sum_not_sub A Z m :
  \sum_(T in subsets A m) (~~ (T \subset Z))%:R = 'C(#|A|, m)%:R - 'C(#|A :&: Z|, m)%:R :> R.
Proof.
rewrite (eq_bigr (fun T => 1 - if T \subset Z then 1 else 0)); last first.
  by move=> T _; case: (T \subset Z); rewrite ?subr0 ?subrr.
rewrite sumrB sumr_const card_subsets -big_mkcondr.
rewrite (eq_bigl (fun T => T \in subsets (A :&: Z) m)); last first.
  by move=> T; rewrite !in_subsets subsetI andbAC.
by rewrite sumr_const card_subsets.
Qed.

Hypothesis K_gt0 : (0 < K)%N.
Hypothesis K_le_n : (K <= n)%N.

(* Chen's R̄ = 1 − C(N_neg, K)/C(N, K) is M̂_K, the average max over all K-subsets. *)
Theorem pass_at_k_is_m_hat : m_hat K mx = 1 - 'C(n_neg, K)%:R / 'C(n, K)%:R.
Proof.
rewrite m_hatE (eq_bigr _ (fun T _ => mx_binary T)) sum_not_sub cardsT card_ord setTI.
by rewrite /n_neg mulrBl divff ?natr_bin_neq0.
Qed.

Lemma m_plus_binary i : m_plus K mx i =
  if x i == 1 then 1 else 1 - 'C(n_neg.-1, K.-1)%:R / 'C(n.-1, K.-1)%:R.
Proof.
have c0 : 'C(n.-1, K.-1)%:R != 0 :> R by rewrite natr_bin_neq0 //; lia.
rewrite m_plusE; case: (binary i) => xi; rewrite xi; last first.
  (* a success: every set i ∪ S has its max at 1 *)
  rewrite eqxx (eq_bigr (fun _ => 1)); last first.
    by move=> S _; rewrite mx_binary subUset sub1set inE xi oner_eq0.
  by rewrite sumr_const card_subsets card_others divff.
(* a failure: i ∪ S fails exactly when S does *)
rewrite [0 == 1]eq_sym oner_eq0 (eq_bigr (fun S => (~~ (S \subset failures))%:R)); last first.
  by move=> S _; rewrite mx_binary subUset sub1set inE xi eqxx.
rewrite sum_not_sub card_others.
have -> : #|others i :&: failures| = n_neg.-1.
  have -> : others i :&: failures = failures :\ i by apply/setP => j; rewrite !inE andbC.
  by have := cardsD1 i failures; rewrite inE xi eqxx /n_neg => ->.
by rewrite mulrBl divff.
Qed.

Hypothesis K_lt_n : (K < n)%N.

(* I9: Chen's raw advantage is ((N − K)/N) Δ_i, i.e. M⁺_i − M̂_K. *)
Theorem chen_raw_is_scaled_canonical i : chen_raw i = (n - K)%:R / n%:R * canonical K mx i.
Proof.
rewrite -m_plus_minus_m_hat_is_scaled_canonical // m_plus_binary pass_at_k_is_m_hat.
rewrite /chen_raw /chen_r_bar; set a := 'C(n_neg, K)%:R / _; set b := 'C(n_neg.-1, K.-1)%:R / _.
by case: (x i == 1); ring.
Qed.
End Chen.
