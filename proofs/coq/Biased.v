(* A refutation: ei_l1o, listed as biased for K >= 2 in spec/maxk.md (MaxPO §5.1), by a concrete
   counterexample in the setting of Unbiased.v.

   At N = K = 2 the leave-one-out baseline over the full-batch EIs turns EI into RLOO on the
   rewards of single samples, A_i = r(y_i) − r(y_j) (ei_l1o_pair), so its expected score-weighted
   sum is 2 ∇J_1, the pass@1 (mean reward) gradient, not a multiple of ∇J_2. With three answers of
   rewards 0, 1, 3 drawn uniformly (Unbiased.r3, as in grpo_is_biased) and phi the max of the
   rewards: along the softmax score of answer 0, E[Σ A_i s(y_i)] = −8/9 and ∇J_2 = −4/9; along
   that of answer 1, −2/9 and −2/9. No constant c fits both. *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp Require Import ring.
From Advest Require Import Counting Unbiased.
Set Implicit Arguments.
Unset Strict Implicit.
Unset Printing Implicit Defensive.
Import GRing.Theory Num.Theory.
Local Open Scope ring_scope.

(* EI at K = N: the one comparator set is all the other samples. *)
Lemma ei_all (R : numFieldType) n (f : {set 'I_n} -> R) i :
  ei n f i = f setT - f (others i).
Proof.
rewrite /ei /ei_on /avg.
have -> : subsets (others i) n.-1 = [set others i].
  apply/setP => S; rewrite in_subsets !inE -(card_others i); apply/andP/eqP => [[SO /eqP c] | ->].
    by apply/eqP; rewrite eqEcard SO c leqnn.
  by rewrite subxx.
rewrite big_set1 cards1 divr1; congr (f _ - _).
by apply/setP => j; rewrite !inE; case: eqP => // ->.
Qed.

Lemma others_two (i j : 'I_2) : j \in others i -> others j = [set i].
Proof.
rewrite !inE => ji; apply/setP => k; rewrite !inE.
by move: i j k ji; do 3 case=> [[|[|//]] ?].
Qed.

(* At N = K = 2, ei_l1o is RLOO on the single samples' rewards. *)
Lemma ei_l1o_pair (R : numFieldType) (f : {set 'I_2} -> R) i :
  ei_l1o 2 f i = f [set i] - f (others i).
Proof.
rewrite /ei_l1o ei_all.
rewrite (eq_bigr (fun _ => f setT - f [set i])); last first.
  by move=> j ji; rewrite ei_all (others_two ji).
rewrite sumr_const; have -> : #|others i| = 1%N by rewrite card_others.
by rewrite divr1 mulr1n; ring.
Qed.

Section Counterexample.
Variable R : rcfType.

(* max@K with the rewards 0, 1, 3 of the three answers (Unbiased.r3): the max of the rewards of
   the k samples, max ∅ = 0. *)
Definition reward3 (v : 'I_3) : nat := nth 0%N [:: 0; 1; 3]%N v.
Definition max3 k (z : {ffun 'I_k -> 'I_3}) : R := (\max_(j < k) reward3 (z j))%:R.

Lemma max3_single (y : {ffun 'I_2 -> 'I_3}) (i : 'I_2) : fset max3 y [set i] = r3 R (y i).
Proof.
rewrite /fset /max3 /restrict /r3.
rewrite (eq_bigr (fun j => reward3 (y (enum_val j)))); last by move=> j _; rewrite ffunE.
by rewrite -(big_enum_val (fun j => reward3 (y j))) big_set1.
Qed.

Lemma others_pair (y : {ffun 'I_2 -> 'I_3}) (i : 'I_2) :
  fset max3 y (others i) = r3 R (y (if i == ord0 then ord_max else ord0)).
Proof.
have -> : others i = [set (if i == ord0 then ord_max else ord0)].
  by apply/setP => k; rewrite !inE; move: i k; do 2 case=> [[|[|//]] ?].
exact: max3_single.
Qed.

Lemma ei_l1o_expected (s : 'I_3 -> R) :
  E (uniform3 R) (fun y : {ffun 'I_2 -> 'I_3} => \sum_i ei_l1o 2 (fset max3 y) i * s (y i)) =
  \sum_a \sum_b uniform3 R a * uniform3 R b *
    ((r3 R a - r3 R b) * s a + (r3 R b - r3 R a) * s b).
Proof.
rewrite E2; apply: eq_bigr => a _; apply: eq_bigr => b _; congr (_ * _).
rewrite big_ord_recl big_ord1 !ei_l1o_pair !max3_single !others_pair /=.
have -> : lift ord0 ord0 = ord_max :> 'I_2 by apply: val_inj.
by rewrite !ffunE.
Qed.

Lemma grad_expected (s : 'I_3 -> R) :
  grad (uniform3 R) s max3 2 =
  \sum_a \sum_b uniform3 R a * uniform3 R b * ((maxn (reward3 a) (reward3 b))%:R * (s a + s b)).
Proof.
rewrite /grad E2; apply: eq_bigr => a _; apply: eq_bigr => b _; congr (_ * _).
by rewrite /max3 !big_ord_recl !big_ord0 !ffunE /= maxn0 addr0.
Qed.

Let nz9 : 9%:R != 0 :> R. Proof. by rewrite natr_neq0. Qed.
Let nz2 : 2%:R != 0 :> R. Proof. by rewrite natr_neq0. Qed.

Lemma l1o_c0 : E (uniform3 R) (fun y : {ffun 'I_2 -> 'I_3} =>
  \sum_i ei_l1o 2 (fset max3 y) i * score3 R 0 (y i)) = - (8%:R / 9%:R).
Proof.
rewrite ei_l1o_expected !big_ord_recl !big_ord0 /r3 /score3 /uniform3 /=.
by field.
Qed.

Lemma l1o_c1 : E (uniform3 R) (fun y : {ffun 'I_2 -> 'I_3} =>
  \sum_i ei_l1o 2 (fset max3 y) i * score3 R 1 (y i)) = - (2%:R / 9%:R).
Proof.
rewrite ei_l1o_expected !big_ord_recl !big_ord0 /r3 /score3 /uniform3 /=.
by field.
Qed.

Lemma grad_c0 : grad (uniform3 R) (score3 R 0) max3 2 = - (4%:R / 9%:R).
Proof.
rewrite grad_expected !big_ord_recl !big_ord0 /reward3 /score3 /uniform3 /maxn /=.
by field.
Qed.

Lemma grad_c1 : grad (uniform3 R) (score3 R 1) max3 2 = - (2%:R / 9%:R).
Proof.
rewrite grad_expected !big_ord_recl !big_ord0 /reward3 /score3 /uniform3 /maxn /=.
by field.
Qed.

(* ei_l1o is biased for the max@2 gradient: at N = K = 2, with three answers of rewards 0, 1, 3
   drawn uniformly, no constant c gives E[Σ_i A_i s(y_i)] = c ∇J_2 for every score s of zero
   mean (those of the softmax logits of answers 0 and 1 need c = 2 and c = 1). *)
Theorem ei_l1o_is_biased :
  \sum_v uniform3 R v = 1 /\
  ~ (exists c : R, forall s : 'I_3 -> R, \sum_v uniform3 R v * s v = 0 ->
      E (uniform3 R) (fun y : {ffun 'I_2 -> 'I_3} => \sum_i ei_l1o 2 (fset max3 y) i * s (y i)) =
      c * grad (uniform3 R) s max3 2).
Proof.
split=> [|[c H]]; first by rewrite !big_ord_recl big_ord0 /uniform3; field.
have := H _ (score3_mean0 R (isT : (0 < 3)%N)); rewrite l1o_c0 grad_c0 => e0.
have := H _ (score3_mean0 R (isT : (1 < 3)%N)); rewrite l1o_c1 grad_c1 => e1.
have c1 : c = 1.
  have -> : c = c * - (2%:R / 9%:R) * - (9%:R / 2%:R) by field; rewrite ?nz2 ?nz9.
  by rewrite -e1; field; rewrite ?nz2 ?nz9.
move: e0; rewrite c1 mul1r => /eqP; rewrite -subr_eq0.
have -> : - (8%:R / 9%:R) - - (4%:R / 9%:R) = - (4%:R / 9%:R) :> R by field; rewrite ?nz9.
by rewrite oppr_eq0 mulf_eq0 invr_eq0 (negbTE nz9) orbF pnatr_eq0.
Qed.
End Counterexample.
