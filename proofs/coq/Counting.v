(* General-N counting identities of the max@K family (spec/maxk.md I3, I4, I5, I7, I8, I10, I13).

   For every group size n, every comparator size K and every set function f from the subsets of
   the n samples to a numeric field R, the building blocks of spec/maxk.md §Conventions are
   defined literally as averages over subsets (proofs/definitions.py, reference/maxk.py with
   f = max). The identities below never use what f is: they are double counting over subsets,
   so they hold for max (any ordered field) and for any other function of the subsets. *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp Require Import ring zify.
Set Implicit Arguments.
Unset Strict Implicit.
Unset Printing Implicit Defensive.
Import GRing.Theory Num.Theory.
Local Open Scope ring_scope.

Section Subsets.
Variable R : numFieldType.
Variable n : nat.
Implicit Types (A S T : {set 'I_n}) (i j : 'I_n) (m : nat) (g : {set 'I_n} -> R).

(* The subsets of A of size m. *)
Definition subsets A m := [set S : {set 'I_n} | S \subset A & #|S| == m].

Lemma card_subsets A m : #|subsets A m| = 'C(#|A|, m).
Proof. exact: cards_draws. Qed.

Lemma in_subsets A m S : (S \in subsets A m) = (S \subset A) && (#|S| == m).
Proof. by rewrite inE. Qed.

(* The m-subsets of A containing j are j plus an (m-1)-subset of A \ {j}. *)
Lemma sum_subsets_in A m j g : j \in A -> (0 < m)%N ->
  \sum_(T in subsets A m | j \in T) g T = \sum_(S in subsets (A :\ j) m.-1) g (j |: S).
Proof.
move=> jA m0; rewrite (reindex_onto (fun S => j |: S) (fun T => T :\ j)) /=; last first.
  by move=> T /andP[_ jT]; rewrite setD1K.
apply: eq_bigl => S; rewrite !in_subsets setU11 andbT.
case jS: (j \in S).
  rewrite subsetD1 jS /= andbF.
  have -> : ((j |: S) :\ j == S) = false.
    by apply/negbTE/negP => /eqP/setP/(_ j); rewrite !inE jS eqxx.
  by rewrite andbF.
rewrite setU1K ?jS // eqxx andbT cardsU1 jS add1n subUset sub1set jA /=.
rewrite subsetD1 jS andbT; case: (S \subset A) => //=.
by case: m m0 => // m _; rewrite eqSS.
Qed.

(* The m-subsets of A avoiding j are the m-subsets of A \ {j}. *)
Lemma sum_subsets_notin A m j g :
  \sum_(T in subsets A m | j \notin T) g T = \sum_(T in subsets (A :\ j) m) g T.
Proof.
apply: eq_bigl => T; rewrite !in_subsets subsetD1.
by case: (T \subset A); case: (j \in T); case: (#|T| == m).
Qed.

Lemma sum_subsets_split A m j g :
  \sum_(T in subsets A m) g T =
  \sum_(T in subsets A m | j \in T) g T + \sum_(T in subsets A m | j \notin T) g T.
Proof. exact: bigID. Qed.

(* Double counting: each m-subset of A is counted once for each of its m elements. *)
Lemma double_count_in A m g :
  \sum_(j in A) \sum_(T in subsets A m | j \in T) g T = m%:R * \sum_(T in subsets A m) g T.
Proof.
rewrite (eq_bigr (fun j => \sum_(T in subsets A m) (if j \in T then g T else 0))); last first.
  by move=> j _; rewrite big_mkcondr.
rewrite exchange_big /= mulr_sumr; apply: eq_bigr => T; rewrite in_subsets => /andP[TA /eqP cT].
rewrite -big_mkcondr /= (eq_bigl (fun j => j \in T)); last first.
  by move=> j; apply/andP/idP => [[] //|jT]; split=> //; apply: (subsetP TA).
by rewrite sumr_const cT mulr_natl.
Qed.

Lemma double_count_notin A m g :
  \sum_(j in A) \sum_(T in subsets A m | j \notin T) g T =
  (#|A|%:R - m%:R) * \sum_(T in subsets A m) g T.
Proof.
have -> : \sum_(j in A) \sum_(T in subsets A m | j \notin T) g T =
  \sum_(j in A) (\sum_(T in subsets A m) g T - \sum_(T in subsets A m | j \in T) g T).
  by apply: eq_bigr => j _; rewrite (sum_subsets_split A m j) addrC addKr.
by rewrite sumrB double_count_in sumr_const mulrBl !mulr_natl.
Qed.

End Subsets.

Lemma natr_pred (R : numFieldType) m : (0 < m)%N -> (m.-1)%:R = m%:R - 1 :> R.
Proof. by move=> m0; rewrite -[in RHS](prednK m0) -addn1 natrD addrK. Qed.

Lemma natr_bin_neq0 (R : numFieldType) a b : (b <= a)%N -> 'C(a, b)%:R != 0 :> R.
Proof. by move=> ba; rewrite pnatr_eq0 -lt0n bin_gt0. Qed.

Lemma natr_neq0 (R : numFieldType) a : (0 < a)%N -> a%:R != 0 :> R.
Proof. by move=> a0; rewrite pnatr_eq0 -lt0n. Qed.

(* Closes the side conditions of `field`: every denominator is a positive natural number. *)
Ltac nonzero :=
  repeat (apply/andP; split);
  first [ apply: natr_bin_neq0 | apply: natr_neq0 | idtac ]; lia.

Section Blocks.
Variable R : numFieldType.
Variables (n K : nat) (f : {set 'I_n} -> R).
Implicit Types (i j : 'I_n).

(* The uniform average over a family of subsets, as in proofs/definitions.py (_avg). *)
Definition avg (F : {set {set 'I_n}}) (g : {set 'I_n} -> R) := (\sum_(S in F) g S) / #|F|%:R.
Definition others i := [set~ i].

(* spec/maxk.md §Conventions: M⁺, M⁻, C, M̂_K; §Estimators: EI, b, Δ, PKPO. *)
Definition m_plus i := avg (subsets (others i) K.-1) (fun S => f (i |: S)).
Definition m_minus i := avg (subsets (others i) K) f.
Definition comparator i := avg (subsets (others i) K.-1) f.
Definition m_hat := avg (subsets setT K) f.
Definition ei_on j (pool : {set 'I_n}) := avg (subsets pool K.-1) (fun S => f (j |: S) - f S).
Definition ei i := ei_on i (others i).
Definition l2o_baseline i :=
  (\sum_(j in others i) ei_on j (others i :\ j)) / #|others i|%:R.
Definition maxpo i := ei i - l2o_baseline i.
Definition canonical i := m_plus i - m_minus i.
Definition pkpo_S j (pool : {set 'I_n}) :=
  (\sum_(I in subsets pool K | j \in I) f I) / 'C(#|pool|, K)%:R.
Definition pkpo_s i := pkpo_S i setT.
Definition pkpo_sloo i :=
  pkpo_s i - (\sum_(j in others i) pkpo_S j (others i)) / #|others i|%:R.
Definition pkpo_sloo_minus_one i :=
  (\sum_(I in subsets setT K | i \in I) (f I - f (I :\ i))) / 'C(n, K)%:R.
Definition mean (g : 'I_n -> R) := (\sum_i g i) / n%:R.
(* EI with a leave-one-out baseline over the full-batch EIs (spec/maxk.md ei_l1o): the baseline
   of i averages EI_j, j ≠ i, each of which uses r_i as a comparator. *)
Definition ei_l1o i := ei i - (\sum_(j in others i) ei j) / #|others i|%:R.

(* The sums the blocks average. *)
Let Sp i := \sum_(S in subsets (others i) K.-1) f (i |: S).
Let Sm i := \sum_(T in subsets (others i) K) f T.
Let Sc i := \sum_(S in subsets (others i) K.-1) f S.
Let Sh := \sum_(T in subsets setT K) f T.

Lemma card_others i : #|others i| = n.-1.
Proof. by rewrite cardsC1 card_ord. Qed.

Lemma card_others_minus i j : j \in others i -> #|others i :\ j| = n.-1.-1.
Proof. by move=> jO; have := cardsD1 j (others i); rewrite jO card_others add1n => ->. Qed.

Lemma setT_minus i : [set: 'I_n] :\ i = others i.
Proof. by rewrite /others setTD. Qed.

Lemma m_plusE i : m_plus i = Sp i / 'C(n.-1, K.-1)%:R.
Proof. by rewrite /m_plus /avg card_subsets card_others. Qed.
Lemma m_minusE i : m_minus i = Sm i / 'C(n.-1, K)%:R.
Proof. by rewrite /m_minus /avg card_subsets card_others. Qed.
Lemma comparatorE i : comparator i = Sc i / 'C(n.-1, K.-1)%:R.
Proof. by rewrite /comparator /avg card_subsets card_others. Qed.
Lemma m_hatE : m_hat = Sh / 'C(n, K)%:R.
Proof. by rewrite /m_hat /avg card_subsets cardsT card_ord. Qed.

Lemma sum_all_setT (g : 'I_n -> R) : \sum_(j in [set: 'I_n]) g j = \sum_j g j.
Proof. by apply: eq_bigl => j; rewrite inE. Qed.

Hypothesis K_gt0 : (0 < K)%N.

(* Σ over K-subsets containing i = Σ over (K−1)-subsets of O_i of f(i ∪ S). *)
Lemma Sp_containing i : Sp i = \sum_(T in subsets setT K | i \in T) f T.
Proof. by rewrite sum_subsets_in ?inE // setT_minus. Qed.

Lemma split_hat i : Sh = Sp i + Sm i.
Proof.
by rewrite /Sh (sum_subsets_split _ _ i) sum_subsets_notin -Sp_containing setT_minus.
Qed.

Lemma sum_Sp : \sum_i Sp i = K%:R * Sh.
Proof.
rewrite (eq_bigr _ (fun i _ => Sp_containing i)) -sum_all_setT.
exact: double_count_in.
Qed.

Lemma ei_blocks i : ei i = m_plus i - comparator i.
Proof. by rewrite /ei /ei_on /avg sumrB mulrBl -/(avg _ _) -/(avg _ _). Qed.

Hypothesis K_le_n : (K <= n)%N.

Let n_gt0 : (0 < n)%N. Proof. exact: leq_trans K_gt0 K_le_n. Qed.

(* n·C(n−1, K−1) = K·C(n, K): a fraction K/n of the K-subsets contain a given sample. *)
Lemma bin_containing : 'C(n.-1, K.-1)%:R = K%:R * 'C(n, K)%:R / n%:R :> R.
Proof.
have := mul_bin_diag n K.-1; rewrite prednK // => /(congr1 (fun x => x%:R : R)).
rewrite !natrM => <-; field; exact: natr_neq0.
Qed.

Lemma sum_m_plus : \sum_i m_plus i = n%:R * m_hat.
Proof.
rewrite (eq_bigr _ (fun i _ => m_plusE i)) -mulr_suml sum_Sp m_hatE bin_containing.
field; nonzero.
Qed.

Theorem pkpo_sloo_minus_one_is_scaled_ei i : pkpo_sloo_minus_one i = K%:R / n%:R * ei i.
Proof.
rewrite /pkpo_sloo_minus_one /ei /ei_on /avg card_subsets card_others.
rewrite sum_subsets_in ?inE // setT_minus.
rewrite (eq_bigr (fun S => f (i |: S) - f S)); last first.
  move=> S; rewrite in_subsets => /andP[/subsetP sub _]; rewrite setU1K //.
  by apply/negP => /sub; rewrite !inE eqxx.
set X := (\sum_(S in subsets (others i) K.-1) (f (i |: S) - f S)).
rewrite bin_containing; field; nonzero.
Qed.

Lemma pkpo_s_m_plus i : pkpo_s i = K%:R / n%:R * m_plus i.
Proof.
rewrite /pkpo_s /pkpo_S cardsT card_ord -Sp_containing m_plusE bin_containing.
field; nonzero.
Qed.

Hypothesis K_lt_n : (K < n)%N.

(* n·C(n−1, K) = (n−K)·C(n, K): a fraction (n−K)/n of the K-subsets avoid a given sample. *)
Lemma bin_avoiding : 'C(n.-1, K)%:R = (n - K)%:R * 'C(n, K)%:R / n%:R :> R.
Proof.
have := mul_bin_down n K => /(congr1 (fun x => x%:R : R)).
rewrite !natrM => <-; field; exact: natr_neq0.
Qed.

Let nK_neq0 : (n - K)%:R != 0 :> R.
Proof. by rewrite natr_neq0 // subn_gt0. Qed.

(* I5: M̂_K = (K/N) M⁺_i + ((N−K)/N) M⁻_i. *)
Theorem all_subsets_decomposition i :
  m_hat = K%:R / n%:R * m_plus i + (n - K)%:R / n%:R * m_minus i.
Proof.
rewrite m_hatE m_plusE m_minusE (split_hat i) bin_containing bin_avoiding.
field; nonzero.
Qed.

(* I5: M⁺_i − M̂_K = ((N−K)/N) Δ_i. *)
Theorem m_plus_minus_m_hat_is_scaled_canonical i :
  m_plus i - m_hat = (n - K)%:R / n%:R * canonical i.
Proof.
rewrite (all_subsets_decomposition i) /canonical.
have nK : (n - K)%:R = n%:R - K%:R :> R by rewrite natrB // ltnW.
rewrite nK; field; exact: natr_neq0.
Qed.

Lemma sum_m_minus : \sum_i m_minus i = n%:R * m_hat.
Proof.
have -> : \sum_i m_minus i = \sum_i (n%:R * m_hat - K%:R * m_plus i) / (n - K)%:R.
  apply: eq_bigr => i _; rewrite (all_subsets_decomposition i).
  have nK : (n - K)%:R = n%:R - K%:R :> R by rewrite natrB // ltnW.
  by field; rewrite nK_neq0 natr_neq0.
rewrite -mulr_suml sumrB -[\sum_i (K%:R * _)]mulr_sumr sum_m_plus sumr_const card_ord.
have nK : (n - K)%:R = n%:R - K%:R :> R by rewrite natrB // ltnW.
rewrite -mulr_natr; move: nK_neq0; rewrite nK => nK0; field; exact: nK0.
Qed.

(* I4: Σ_i Δ_i = 0. *)
Theorem canonical_sums_to_zero : \sum_i canonical i = 0.
Proof. by rewrite /canonical sumrB sum_m_plus sum_m_minus subrr. Qed.

Lemma sum_ei_on_others i :
  \sum_(j in others i) ei_on j (others i :\ j) =
  (K%:R * Sm i - (n.-1 - K.-1)%:R * Sc i) / 'C(n.-1.-1, K.-1)%:R.
Proof.
rewrite (eq_bigr (fun j => (\sum_(S in subsets (others i :\ j) K.-1) f (j |: S)
    - \sum_(S in subsets (others i :\ j) K.-1) f S) / 'C(n.-1.-1, K.-1)%:R)); last first.
  by move=> j jO; rewrite /ei_on /avg card_subsets card_others_minus // sumrB.
rewrite -mulr_suml sumrB.
rewrite (eq_bigr (fun j => \sum_(T in subsets (others i) K | j \in T) f T)); last first.
  by move=> j jO; rewrite sum_subsets_in.
rewrite double_count_in.
rewrite (eq_bigr (fun j => \sum_(T in subsets (others i) K.-1 | j \notin T) f T)); last first.
  by move=> j _; rewrite sum_subsets_notin.
rewrite double_count_notin card_others -natrB //; lia.
Qed.

(* I3: EI_i − b_i = Δ_i (MaxPO: the leave-two-out baseline turns EI into the canonical
   advantage). *)
Theorem maxpo_equals_canonical i : maxpo i = canonical i.
Proof.
rewrite /maxpo ei_blocks /l2o_baseline sum_ei_on_others card_others /canonical.
rewrite m_plusE comparatorE m_minusE.
have b1 : 'C(n.-1, K)%:R = n.-1%:R * 'C(n.-1.-1, K.-1)%:R / K%:R :> R.
  have := mul_bin_diag n.-1 K.-1; rewrite prednK // => /(congr1 (fun x => x%:R : R)).
  rewrite !natrM => ->; field; nonzero.
have b2 : 'C(n.-1, K.-1)%:R = n.-1%:R * 'C(n.-1.-1, K.-1)%:R / (n.-1 - K.-1)%:R :> R.
  have := mul_bin_down n.-1 K.-1 => /(congr1 (fun x => x%:R : R)).
  rewrite !natrM => ->; field; nonzero.
rewrite b1 b2; field; nonzero.
Qed.

(* I13: mean EI = mean b. *)
Theorem mean_ei_equals_mean_l2o : mean ei = mean l2o_baseline.
Proof.
rewrite /mean; congr (_ / _); apply/eqP; rewrite -subr_eq0 -sumrB.
rewrite (eq_bigr _ (fun i _ => maxpo_equals_canonical i)).
by rewrite canonical_sums_to_zero.
Qed.

(* I8: sloo_i = (K/N) M⁺_i − (K/(N−1)) M⁻_i. *)
Theorem pkpo_sloo_closed_form i :
  pkpo_sloo i = K%:R / n%:R * m_plus i - K%:R / n.-1%:R * m_minus i.
Proof.
rewrite /pkpo_sloo pkpo_s_m_plus /pkpo_S card_others -mulr_suml double_count_in m_minusE.
rewrite -/(Sm i); field; nonzero.
Qed.

(* I8: Σ_i sloo_i = −(K/(N−1)) M̂_K (PKPO's sloo is not centred). *)
Theorem pkpo_sloo_sums_to : \sum_i pkpo_sloo i = - (K%:R / n.-1%:R) * m_hat.
Proof.
rewrite (eq_bigr _ (fun i _ => pkpo_sloo_closed_form i)) sumrB -!mulr_sumr sum_m_plus sum_m_minus.
rewrite natr_pred //; have n1 : n%:R - 1 != 0 :> R by rewrite -natr_pred ?natr_neq0 //; lia.
by field; rewrite n1 natr_neq0.
Qed.

(* I10: r̃_i − mean r̃ = K(N−K)/N² Δ_i, with r̃ = PKPO's s = Bagirov's transform (I6). *)
Theorem bagirov_centred_is_scaled_canonical i :
  pkpo_s i - mean pkpo_s = (K * (n - K))%:R / (n * n)%:R * canonical i.
Proof.
rewrite /mean (eq_bigr _ (fun i _ => pkpo_s_m_plus i)) -mulr_sumr sum_m_plus pkpo_s_m_plus.
have := m_plus_minus_m_hat_is_scaled_canonical i; move/eqP; rewrite subr_eq => /eqP ->.
rewrite !natrM; field; nonzero.
Qed.

End Blocks.

(* I13: mean EI = M̂_K − M̂_{K−1}, for every 0 < K <= N (M̂_0 = f ∅). *)
Theorem mean_ei_is_m_hat_difference (R : numFieldType) n K (f : {set 'I_n} -> R) :
  (0 < K)%N -> (K <= n)%N -> mean (ei K f) = m_hat K f - m_hat K.-1 f.
Proof.
move=> K0 Kn; have n0 : (0 < n)%N by apply: leq_trans Kn.
rewrite /mean (eq_bigr _ (fun i _ => ei_blocks K f i)) sumrB (sum_m_plus f K0 Kn).
rewrite (eq_bigr (fun i => (\sum_(T in subsets setT K.-1 | i \notin T) f T) / 'C(n.-1, K.-1)%:R));
  last by move=> i _; rewrite comparatorE -setT_minus sum_subsets_notin.
rewrite -mulr_suml -(sum_all_setT (fun i => \sum_(T in subsets setT K.-1 | i \notin T) f T)).
rewrite double_count_notin cardsT card_ord -natrB; last by lia.
rewrite [m_hat K.-1 f]m_hatE.
have b : (n - K.-1)%:R = n%:R * 'C(n.-1, K.-1)%:R / 'C(n, K.-1)%:R :> R.
  have := mul_bin_down n K.-1 => /(congr1 (fun x => x%:R : R)); rewrite !natrM => ->.
  by field; rewrite natr_bin_neq0 //; lia.
rewrite b; set S1 := \sum_(T in subsets _ K.-1) f T.
field; rewrite !natr_bin_neq0 ?natr_neq0 //; lia.
Qed.
