(* Unbiasedness for every N (spec/maxk.md §Unbiasedness, spec/group.md `rloo`).

   One prompt is a finite sample space Y with a policy pi (sum_v pi v = 1; nonnegativity is never
   used) and a score s with sum_v pi v * s v = 0: s is one coordinate of grad log pi, and a zero
   pi-mean is the one property of the score the argument uses. N i.i.d. samples are a function
   y : 'I_N -> Y with weight prod_i pi (y i); E m F is the exact expectation of F over them, a
   finite sum. By the score-function identity, an advantage A is unbiased for c * grad J_K exactly
   when E_N[sum_i A_i(y) s(y_i)] = c * E_K[phi(z) sum_j s(z_j)] (= c * grad K below), where
   phi(z) is the reward of K samples: their max for max@K, the same with 0/1 rewards for pass@K.
   The theorems hold for every phi (phi need not be symmetric: a subset's samples are taken in
   index order), every numeric field, every N and every K with 0 < K <= N (K < N where the spec
   restricts the domain), so in particular for max@K and pass@K with any finite reward table.

   The two facts: a function of the samples other than y_i is independent of y_i
   (leave_one_out_independent), so it adds no bias; and the samples at any k distinct positions
   are k i.i.d. samples (distinct_positions_are_iid), so the K-subset terms of M+ average to grad K. The estimators
   are Counting.v's definitions, with f = phi of the subset's samples. grpo_is_biased, at the
   end, refutes unbiasedness for GRPO by a concrete counterexample. *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp Require Import ring.
From Advest Require Import Counting.
Set Implicit Arguments.
Unset Strict Implicit.
Unset Printing Implicit Defensive.
Import GRing.Theory Num.Theory.
Local Open Scope ring_scope.

Section Sample.
Variable R : numFieldType.
Variable Y : finType.
Variables (pi s : Y -> R).
Hypothesis pi_sum1 : \sum_v pi v = 1.
Hypothesis score_mean0 : \sum_v pi v * s v = 0.

Definition weight m (y : {ffun 'I_m -> Y}) := \prod_i pi (y i).
Definition E m (F : {ffun 'I_m -> Y} -> R) := \sum_(y : {ffun 'I_m -> Y}) weight y * F y.

Definition leaves_out m (i : 'I_m) (F : {ffun 'I_m -> Y} -> R) :=
  forall y z : {ffun 'I_m -> Y}, (forall j, j != i -> y j = z j) -> F y = F z.

Lemma E_sum m (I : finType) (P : pred I) (F : I -> {ffun 'I_m -> Y} -> R) :
  E (fun y => \sum_(i | P i) F i y) = \sum_(i | P i) E (F i).
Proof. by rewrite /E (eq_bigr _ (fun y _ => mulr_sumr _ _ _ _)) exchange_big. Qed.

Lemma E_scale m c (F : {ffun 'I_m -> Y} -> R) : E (fun y => c * F y) = c * E F.
Proof. by rewrite /E mulr_sumr; apply: eq_bigr => y _; rewrite mulrCA. Qed.

Lemma E_sub m (F G : {ffun 'I_m -> Y} -> R) : E (fun y => F y - G y) = E F - E G.
Proof. by rewrite /E -sumrB; apply: eq_bigr => y _; rewrite mulrBr. Qed.

Lemma E_ext m (F G : {ffun 'I_m -> Y} -> R) : (forall y, F y = G y) -> E F = E G.
Proof. by move=> FG; apply: eq_bigr => y _; rewrite FG. Qed.

Lemma E1 m : E (fun _ : {ffun 'I_m -> Y} => 1) = 1.
Proof.
transitivity (\sum_(y : {ffun 'I_m -> Y}) \prod_i pi (y i)).
  by apply: eq_bigr => y _; rewrite mulr1.
rewrite -(bigA_distr_bigA (fun (_ : 'I_m) v => pi v)) /=.
by rewrite (eq_bigr _ (fun _ _ => pi_sum1)) prodr_const expr1n.
Qed.

Lemma sum_indicator (a : Y) : \sum_v pi v * (v == a)%:R = pi a.
Proof.
rewrite (bigD1 a) //= eqxx mulr1 big1 ?addr0 // => v /negbTE ->; exact: mulr0.
Qed.

Lemma prod_indicator m k (h : 'I_k -> 'I_m) (y : {ffun 'I_m -> Y}) (z : {ffun 'I_k -> Y}) :
  \prod_j (y (h j) == z j)%:R = ([ffun j => y (h j)] == z)%:R :> R.
Proof.
case: eqP => [<- | ne]; first by rewrite big1 // => j _; rewrite ffunE eqxx.
apply/eqP; rewrite prodf_seq_eq0; apply/hasP.
have [j ej] : exists j, y (h j) != z j.
  apply/existsP; apply: contra_notT ne; rewrite negb_exists => /forallP e.
  by apply/ffunP => j; rewrite ffunE; apply/eqP; move: (e j); rewrite negbK.
by exists j; rewrite ?mem_index_enum //= (negbTE ej).
Qed.

Lemma prod_partition m k (h : 'I_k -> 'I_m) (F : 'I_k -> R) :
  \prod_x \prod_(j | h j == x) F j = \prod_j F j.
Proof. by rewrite [RHS](partition_big h predT). Qed.

(* The samples at k distinct positions h(0..k-1) of an N-sample are k i.i.d. samples. *)
Theorem distinct_positions_are_iid m k (h : 'I_k -> 'I_m) (G : {ffun 'I_k -> Y} -> R) :
  injective h -> E (fun y => G [ffun j => y (h j)]) = E G.
Proof.
move=> hinj; rewrite /E (partition_big (fun y : {ffun 'I_m -> Y} => [ffun j => y (h j)]) predT) //=.
apply: eq_bigr => z _.
rewrite (eq_bigr (fun y => weight y * G z)); last by move=> y /eqP ->.
rewrite -mulr_suml; congr (_ * _).
rewrite big_mkcond /=.
pose q (x : 'I_m) (v : Y) := pi v * \prod_(j | h j == x) (v == z j)%:R.
transitivity (\sum_(y : {ffun 'I_m -> Y}) \prod_x q x (y x)).
  apply: eq_bigr => y _; rewrite /q big_split /=.
  rewrite [X in _ = _ * X](eq_bigr (fun x : 'I_m => \prod_(j | h j == x) (y (h j) == z j)%:R)); last first.
    by move=> x _; apply: eq_bigr => j /eqP ->.
  rewrite prod_partition prod_indicator.
  by case: eqP => _; rewrite ?mulr1 ?mulr0 /weight.
rewrite -(bigA_distr_bigA q) /= /weight.
rewrite -(prod_partition h); apply: eq_bigr => x _.
case: (pickP (fun j => h j == x)) => [j0 /eqP hj0 | none].
  have e : forall j, (h j == x) = (j == j0).
    by move=> j; rewrite -hj0; apply/eqP/eqP => [/hinj | ->].
  rewrite (eq_bigl _ _ e) big_pred1_eq /q -(sum_indicator (z j0)).
  by apply: eq_bigr => v _; rewrite (eq_bigl _ _ e) big_pred1_eq.
rewrite [RHS]big_pred0 // -pi_sum1 /q; apply: eq_bigr => v _.
by rewrite big_pred0 // mulr1.
Qed.

Definition upd m (i : 'I_m) (v : Y) (y : {ffun 'I_m -> Y}) :=
  [ffun j => if j == i then v else y j].

(* A function of the other samples is independent of the sample it leaves out. *)
Theorem leave_one_out_independent m (i : 'I_m) F (g : Y -> R) :
  leaves_out i F -> E (fun y => F y * g (y i)) = E F * \sum_v pi v * g v.
Proof.
move=> Fi.
pose w (y : {ffun 'I_m -> Y}) := \prod_(j | j != i) pi (y j).
pose C v := \sum_(y : {ffun 'I_m -> Y} | y i == v) w y * F y.
have split (g' : Y -> R) : E (fun y => F y * g' (y i)) = \sum_v pi v * g' v * C v.
  rewrite /E (partition_big (fun y : {ffun 'I_m -> Y} => y i) predT) //=.
  apply: eq_bigr => v _; rewrite /C mulr_sumr; apply: eq_bigr => y /eqP yi.
  rewrite /weight (bigD1 i) //= yi -/(w y); ring.
have Cc v v' : C v = C v'.
  rewrite /C (reindex_onto (upd i v) (upd i v')); last first.
    move=> y /eqP yi; apply/ffunP => j; rewrite !ffunE.
    by case: eqP => [-> | _]; rewrite ?yi ?eqxx // ffunE; case: eqP.
  apply: eq_big => [y | y _].
    rewrite ffunE eqxx eqxx /=; apply/eqP/eqP => [<- | yi]; first by rewrite ffunE eqxx.
    apply/ffunP => j; rewrite !ffunE; case: eqP => [-> | _] //.
  congr (_ * _).
    by apply: eq_bigr => j ji; rewrite ffunE (negbTE ji).
  by apply: Fi => j ji; rewrite ffunE (negbTE ji).
case: (pickP (@predT Y)) => [v0 _ | Y0]; last by rewrite split !big_pred0 // mulr0.
rewrite split (eq_bigr (fun v => pi v * g v * C v0)); last by move=> v _; rewrite (Cc v v0).
have -> : E F = E (fun y => F y * 1) by apply: E_ext => y; rewrite mulr1.
rewrite (split (fun _ => 1)) -mulr_suml mulrC; congr (_ * _).
transitivity (\sum_v pi v * C v0); first by rewrite -mulr_suml pi_sum1 mul1r.
by apply: eq_bigr => v _; rewrite mulr1 (Cc v v0).
Qed.

Lemma E_one_sample m (i : 'I_m) (g : Y -> R) : E (fun y => g (y i)) = \sum_v pi v * g v.
Proof.
rewrite -[RHS]mul1r -(E1 m) -(@leave_one_out_independent _ i (fun _ => 1)) //.
by apply: E_ext => y; rewrite mul1r.
Qed.

Theorem leave_one_out_adds_no_bias m (i : 'I_m) F :
  leaves_out i F -> E (fun y => F y * s (y i)) = 0.
Proof. by move=> Fi; rewrite leave_one_out_independent // score_mean0 mulr0. Qed.

Theorem baseline_adds_no_bias m (b : 'I_m -> R) : E (fun y => \sum_i b i * s (y i)) = 0.
Proof.
rewrite E_sum big1 // => i _.
by apply: (leave_one_out_adds_no_bias (F := fun _ => b i)).
Qed.

Definition rloo m (r : Y -> R) (y : {ffun 'I_m -> Y}) (i : 'I_m) :=
  r (y i) - (\sum_(j | j != i) r (y j)) / m.-1%:R.

Theorem rloo_is_unbiased m (r : Y -> R) :
  E (fun y : {ffun 'I_m -> Y} => \sum_i rloo r y i * s (y i)) = m%:R * \sum_v pi v * r v * s v.
Proof.
rewrite E_sum (eq_bigr (fun _ : 'I_m => \sum_v pi v * r v * s v)); last first.
  move=> i _.
  rewrite (E_ext (G := fun y => r (y i) * s (y i) -
     (\sum_(j | j != i) r (y j)) / m.-1%:R * s (y i))); last by move=> y; rewrite mulrBl.
  rewrite E_sub (@leave_one_out_adds_no_bias _ i
    (fun y => (\sum_(j | j != i) r (y j)) / m.-1%:R)) ?subr0; last first.
    by move=> y z yz /=; congr (_ / _); apply: eq_bigr => j ji; rewrite yz.
  by rewrite (E_one_sample i (fun v => r v * s v)); apply: eq_bigr => v _; rewrite mulrA.
by rewrite sumr_const card_ord mulr_natl.
Qed.


(* max@K: phi k z is the reward of k samples z (for max@K, the max of their rewards; for
   pass@K, the same with binary rewards). The set function of Counting.v is phi of the samples
   a subset T picks, in index order; the objective J_K = E_{pi^K}[phi K z] has the score-function
   gradient grad K = E_{pi^K}[phi K z * sum_j s(z_j)]. *)
Variable phi : forall k, {ffun 'I_k -> Y} -> R.

Definition restrict m (y : {ffun 'I_m -> Y}) (T : {set 'I_m}) : {ffun 'I_#|T| -> Y} :=
  [ffun j => y (enum_val j)].
Definition fset m (y : {ffun 'I_m -> Y}) (T : {set 'I_m}) := phi (restrict y T).
Definition grad k := E (fun z : {ffun 'I_k -> Y} => phi z * \sum_j s (z j)).

Lemma fset_leaves_out m (i : 'I_m) (T : {set 'I_m}) :
  T \subset others i -> leaves_out i (fun y => fset y T).
Proof.
move=> /subsetP Ti y z yz; rewrite /fset; congr phi; apply/ffunP => j; rewrite !ffunE.
by apply: yz; have := Ti _ (enum_valP j); rewrite !inE.
Qed.

(* E over N samples of phi on a k-subset, times the scores of that subset, is grad k. *)
Lemma E_subset m (T : {set 'I_m}) :
  E (fun y : {ffun 'I_m -> Y} => fset y T * \sum_(i in T) s (y i)) = grad #|T|.
Proof.
rewrite /grad -(@distinct_positions_are_iid _ _ (fun j : 'I_#|T| => enum_val j) (fun z => phi z * \sum_j s (z j))).
  apply: E_ext => y; rewrite /fset /restrict big_enum_val; congr (_ * _).
  by apply: eq_bigr => j _; rewrite ffunE.
exact: enum_val_inj.
Qed.

Section Blocks.
Variables (N K : nat).
Hypothesis K_gt0 : (0 < K)%N.
Hypothesis K_le_N : (K <= N)%N.
Implicit Types (y : {ffun 'I_N -> Y}) (i : 'I_N).

Lemma exchange_in (A : {set {set 'I_N}}) (F : {set 'I_N} -> 'I_N -> R) :
  \sum_i \sum_(T in A | i \in T) F T i = \sum_(T in A) \sum_(i in T) F T i.
Proof.
rewrite (eq_bigr (fun i => \sum_(T in A) (if i \in T then F T i else 0))); last first.
  by move=> i _; rewrite big_mkcondr.
by rewrite exchange_big; apply: eq_bigr => T _; rewrite [RHS]big_mkcond.
Qed.

Lemma m_plus_term :
  E (fun y => \sum_i m_plus K (fset y) i * s (y i)) = N%:R / K%:R * grad K.
Proof.
have pointwise y : \sum_i m_plus K (fset y) i * s (y i) =
    'C(N.-1, K.-1)%:R^-1 * \sum_(T in subsets setT K) fset y T * \sum_(i in T) s (y i).
  rewrite (eq_bigr (fun i => 'C(N.-1, K.-1)%:R^-1 *
      \sum_(T in subsets setT K | i \in T) fset y T * s (y i))); last first.
    move=> i _; rewrite m_plusE (Sp_containing _ K_gt0). by rewrite mulrAC mulrC mulr_suml.
  rewrite -mulr_sumr exchange_in; congr (_ * _).
  by apply: eq_bigr => T _; rewrite mulr_sumr.
rewrite (E_ext pointwise) E_scale E_sum.
rewrite (eq_bigr (fun _ => grad K)); last first.
  by move=> T; rewrite in_subsets => /andP[_ /eqP <-]; exact: E_subset.
rewrite sumr_const card_subsets cardsT card_ord (bin_containing R K_gt0 K_le_N).
have N_gt0 : (0 < N)%N by apply: leq_trans K_le_N.
rewrite -mulr_natl; field; rewrite !natr_neq0 ?bin_gt0 //.
Qed.

Let N_gt0 : (0 < N)%N. Proof. exact: leq_trans K_gt0 K_le_N. Qed.

Lemma lo_add i (F G : {ffun 'I_N -> Y} -> R) :
  leaves_out i F -> leaves_out i G -> leaves_out i (fun y => F y + G y).
Proof. by move=> hF hG y z yz; rewrite (hF y z yz) (hG y z yz). Qed.

Lemma lo_scale i c (F : {ffun 'I_N -> Y} -> R) :
  leaves_out i F -> leaves_out i (fun y => c * F y).
Proof. by move=> hF y z yz; rewrite (hF y z yz). Qed.

Lemma m_minus_leaves_out i : leaves_out i (fun y => m_minus K (fset y) i).
Proof.
move=> y z yz; rewrite /m_minus /avg; congr (_ / _); apply: eq_bigr => T.
by rewrite in_subsets => /andP[Ti _]; exact (fset_leaves_out Ti yz).
Qed.

Lemma comparator_leaves_out i : leaves_out i (fun y => comparator K (fset y) i).
Proof.
move=> y z yz; rewrite /comparator /avg; congr (_ / _); apply: eq_bigr => T.
by rewrite in_subsets => /andP[Ti _]; exact (fset_leaves_out Ti yz).
Qed.

Lemma l2o_baseline_leaves_out i : leaves_out i (fun y => l2o_baseline K (fset y) i).
Proof.
move=> y z yz; rewrite /l2o_baseline /ei_on /avg; congr (_ / _); apply: eq_bigr => j jO.
congr (_ / _); apply: eq_bigr => S; rewrite in_subsets => /andP[Sj _].
have SO : S \subset others i by apply: subset_trans Sj (subsetDl _ _).
have jS : j |: S \subset others i by rewrite subUset sub1set jO.
by rewrite (fset_leaves_out SO yz) (fset_leaves_out jS yz).
Qed.

Lemma sloo_baseline_leaves_out i : leaves_out i (fun y =>
  (\sum_(j in others i) pkpo_S K (fset y) j (others i)) / #|others i|%:R).
Proof.
move=> y z yz; rewrite /pkpo_S; congr (_ / _); apply: eq_bigr => j _.
congr (_ / _); apply: eq_bigr => T /andP[+ _].
by rewrite in_subsets => /andP[Ti _]; exact (fset_leaves_out Ti yz).
Qed.

(* An advantage c * M+_i - L_i, with L_i a function of the other samples, has the expected
   score-weighted sum c * (N/K) * grad K. *)
Lemma unbiased_of (A L : {ffun 'I_N -> Y} -> 'I_N -> R) c :
  (forall i, leaves_out i (fun y => L y i)) ->
  (forall y i, A y i = c * m_plus K (fset y) i - L y i) ->
  E (fun y => \sum_i A y i * s (y i)) = c * (N%:R / K%:R * grad K).
Proof.
move=> Lo AE.
rewrite (E_ext (G := fun y => c * (\sum_i m_plus K (fset y) i * s (y i)) -
    \sum_i L y i * s (y i))); last first.
  by move=> y; rewrite mulr_sumr -sumrB; apply: eq_bigr => i _; rewrite AE mulrBl mulrA.
rewrite E_sub E_scale m_plus_term E_sum big1 ?subr0 // => i _.
exact: (leave_one_out_adds_no_bias (F := fun y => L y i)).
Qed.

Theorem ei_is_unbiased :
  E (fun y => \sum_i ei K (fset y) i * s (y i)) = N%:R / K%:R * grad K.
Proof.
rewrite (@unbiased_of _ (fun y i => comparator K (fset y) i) 1) ?mul1r //.
  by move=> i; apply: comparator_leaves_out.
by move=> y i; rewrite ei_blocks mul1r.
Qed.

Theorem l2o_baseline_adds_no_bias :
  E (fun y => \sum_i l2o_baseline K (fset y) i * s (y i)) = 0.
Proof.
rewrite E_sum big1 // => i _.
exact (leave_one_out_adds_no_bias (@l2o_baseline_leaves_out i)).
Qed.

Theorem maxpo_is_unbiased :
  E (fun y => \sum_i maxpo K (fset y) i * s (y i)) = N%:R / K%:R * grad K.
Proof.
rewrite (@unbiased_of _ (fun y i => comparator K (fset y) i + l2o_baseline K (fset y) i) 1)
  ?mul1r //.
  by move=> i; apply: lo_add; [apply: comparator_leaves_out | apply: l2o_baseline_leaves_out].
by move=> y i; rewrite /maxpo ei_blocks mul1r opprD addrA.
Qed.

Theorem canonical_is_unbiased :
  E (fun y => \sum_i canonical K (fset y) i * s (y i)) = N%:R / K%:R * grad K.
Proof.
rewrite (@unbiased_of _ (fun y i => m_minus K (fset y) i) 1) ?mul1r //.
  by move=> i; apply: m_minus_leaves_out.
by move=> y i; rewrite /canonical mul1r.
Qed.

Theorem pkpo_s_is_unbiased :
  E (fun y => \sum_i pkpo_s K (fset y) i * s (y i)) = grad K.
Proof.
rewrite (@unbiased_of _ (fun _ _ => 0) (K%:R / N%:R)).
- by field; rewrite !natr_neq0.
- by move=> i y z.
- by move=> y i; rewrite subr0 pkpo_s_m_plus.
Qed.

Theorem pkpo_sloo_is_unbiased :
  E (fun y => \sum_i pkpo_sloo K (fset y) i * s (y i)) = grad K.
Proof.
rewrite (@unbiased_of _ (fun y i =>
  (\sum_(j in others i) pkpo_S K (fset y) j (others i)) / #|others i|%:R) (K%:R / N%:R)).
- by field; rewrite !natr_neq0.
- by move=> i; apply: sloo_baseline_leaves_out.
- by move=> y i; rewrite /pkpo_sloo pkpo_s_m_plus.
Qed.

Theorem pkpo_sloo_minus_one_is_unbiased :
  E (fun y => \sum_i pkpo_sloo_minus_one K (fset y) i * s (y i)) = grad K.
Proof.
rewrite (@unbiased_of _ (fun y i => K%:R / N%:R * comparator K (fset y) i) (K%:R / N%:R)).
- by field; rewrite !natr_neq0.
- by move=> i; apply/lo_scale/comparator_leaves_out.
- by move=> y i; rewrite pkpo_sloo_minus_one_is_scaled_ei // ei_blocks mulrBr.
Qed.

Hypothesis K_lt_N : (K < N)%N.

(* Chen's raw pass@k advantage is M+_i - M^_K (spec/maxk.md I9: Binary.chen_raw_is_scaled_canonical
   with Counting.m_plus_minus_m_hat_is_scaled_canonical): c = (N-K)/K. *)
Theorem m_plus_minus_m_hat_is_unbiased :
  E (fun y => \sum_i (m_plus K (fset y) i - m_hat K (fset y)) * s (y i)) =
  (N - K)%:R / K%:R * grad K.
Proof.
pose c : R := (N - K)%:R / N%:R.
rewrite (@unbiased_of _ (fun y i => c * m_minus K (fset y) i) c).
- rewrite /c natrB ?(ltnW K_lt_N) //; field; rewrite !natr_neq0 //.
- by move=> i; apply/lo_scale/m_minus_leaves_out.
- by move=> y i; rewrite m_plus_minus_m_hat_is_scaled_canonical // /canonical mulrBr.
Qed.

Theorem bagirov_centred_is_unbiased :
  E (fun y => \sum_i (pkpo_s K (fset y) i - mean (pkpo_s K (fset y))) * s (y i)) =
  (N - K)%:R / N%:R * grad K.
Proof.
pose c : R := (K * (N - K))%:R / (N * N)%:R.
rewrite (@unbiased_of _ (fun y i => c * m_minus K (fset y) i) c).
- rewrite /c natrM natrB ?(ltnW K_lt_N) // natrM; field; rewrite !natr_neq0 //.
- by move=> i; apply/lo_scale/m_minus_leaves_out.
- by move=> y i; rewrite bagirov_centred_is_scaled_canonical // /canonical mulrBr.
Qed.
End Blocks.
End Sample.

(* A refutation: GRPO, listed as biased in spec/group.md, by a concrete counterexample. With 0/1
   rewards GRPO is a constant multiple of RLOO at N = 2 and N = 3 (every mixed group has the same
   std), hence unbiased there; three reward levels at N = 2 already break it. *)
Section Grpo.
Variable R : rcfType.

Section Two.
Variable Y : finType.
Variable pi : Y -> R.

Definition pair2 (a b : Y) : {ffun 'I_2 -> Y} := [ffun i : 'I_2 => if i == ord0 then a else b].

Lemma E2 (F : {ffun 'I_2 -> Y} -> R) :
  E pi F = \sum_a \sum_b pi a * pi b * F (pair2 a b).
Proof.
rewrite pair_bigA /E (reindex (fun p : Y * Y => pair2 p.1 p.2)) /=; last first.
  exists (fun y : {ffun 'I_2 -> Y} => (y ord0, y ord_max)) => [[a b] _ | y _] /=.
    by rewrite !ffunE.
  by apply/ffunP => i; rewrite ffunE; case: i => -[|[|]] //= ?; congr (y _); apply: val_inj.
apply: eq_bigr => -[a b] _; congr (_ * _).
by rewrite /weight big_ord_recl big_ord1 !ffunE.
Qed.

(* GRPO (spec/group.md) with eps = 0: (r_i - mean r) / std_ddof(r), ddof 0 or 1 (the spec's
   default); x / 0 = 0, so a constant group gives zeros, as the spec pins. *)
Definition grpo m (ddof : nat) (r : Y -> R) (y : {ffun 'I_m -> Y}) (i : 'I_m) :=
  let mu := (\sum_j r (y j)) / m%:R in
  (r (y i) - mu) / Num.sqrt ((\sum_j (r (y j) - mu) ^+ 2) / (m - ddof)%:R).

Lemma div_norm (x : R) : x / `|x| = Num.sg x.
Proof.
case: (eqVneq x 0) => [-> | x0]; first by rewrite normr0 invr0 mulr0 sgr0.
by rewrite {1}[x]numEsg mulfK // normr_eq0.
Qed.

(* At N = 2, GRPO is the sign of the reward difference. *)
Lemma grpo2 (r : Y -> R) (a b : Y) :
  grpo 0 r (pair2 a b) ord0 = Num.sg (r a - r b) /\
  grpo 0 r (pair2 a b) ord_max = Num.sg (r b - r a).
Proof.
rewrite /grpo subn0 !big_ord_recl !big_ord0 !ffunE /=.
have e : (r a - r b) / 2%:R = (r a - r b) / 2%:R by [].
have v : ((r a - (r a + (r b + 0)) / 2%:R) ^+ 2 + ((r b - (r a + (r b + 0)) / 2%:R) ^+ 2 + 0))
   / 2%:R = ((r a - r b) / 2%:R) ^+ 2 by field.
rewrite v sqrtr_sqr; split.
  have -> : r a - (r a + (r b + 0)) / 2%:R = (r a - r b) / 2%:R by field.
  by rewrite div_norm sgrM [Num.sg 2^-1]gtr0_sg ?mulr1 // invr_gt0 ltr0n.
have -> : r b - (r a + (r b + 0)) / 2%:R = - ((r a - r b) / 2%:R) by field.
by rewrite mulNr div_norm sgrM [Num.sg 2^-1]gtr0_sg ?mulr1 -?sgrN ?opprB // invr_gt0 ltr0n.
Qed.
Lemma grpo2_sum (r : Y -> R) (g : Y -> R) (a b : Y) :
  \sum_i grpo 0 r (pair2 a b) i * g (pair2 a b i) =
  Num.sg (r a - r b) * g a + Num.sg (r b - r a) * g b.
Proof.
have [e0 e1] := grpo2 r a b.
rewrite big_ord_recl big_ord1.
have -> : lift ord0 ord0 = ord_max :> 'I_2 by apply: val_inj.
by rewrite e0 e1 !ffunE.
Qed.
(* With ddof = 1 the std of two samples is sqrt 2 times the ddof-0 one: GRPO is rescaled. *)
Definition kappa (ddof : nat) : R := (Num.sqrt (2%:R / (2 - ddof)%:R))^-1.

Lemma grpo_ddof ddof r (y : {ffun 'I_2 -> Y}) i :
  (ddof <= 1)%N -> grpo ddof r y i = kappa ddof * grpo 0 r y i.
Proof.
move=> d1; rewrite /grpo /kappa subn0 /=.
set SS := \sum_(j < 2) (_ - _) ^+ 2; set x := r (y i) - _.
have d2 : (2 - ddof)%:R != 0 :> R by rewrite natr_neq0 // subn_gt0 (leq_ltn_trans d1).
have -> : SS / (2 - ddof)%:R = 2%:R / (2 - ddof)%:R * (SS / 2%:R) by field; rewrite d2.
by rewrite (@sqrtrM _ (2%:R / (2 - ddof)%:R)) ?divr_ge0 ?ler0n // invfM mulrCA.
Qed.
End Two.

Lemma sg_nat (a b : nat) :
  Num.sg (a%:R - b%:R : R) = if (a < b)%N then -1 else if (b < a)%N then 1 else 0.
Proof.
case: ltngtP => h.
- by rewrite ltr0_sg // subr_lt0 ltr_nat.
- by rewrite gtr0_sg // subr_gt0 ltr_nat.
- by rewrite h subrr sgr0.
Qed.

(* Three answers with rewards 0, 1, 3, drawn uniformly; the score of the softmax logit of answer
   c at uniform logits is [y = c] - 1/3. *)
Definition r3 (v : 'I_3) : R := (nth 0 [:: 0; 1; 3] v)%N%:R.
Definition uniform3 (v : 'I_3) : R := 3%:R^-1.
Definition score3 (c : nat) (v : 'I_3) : R := ((v : nat) == c)%:R - 3%:R^-1.

Lemma grpo_expected c :
  E uniform3 (fun y : {ffun 'I_2 -> 'I_3} => \sum_i grpo 0 r3 y i * score3 c (y i)) =
  \sum_a \sum_b uniform3 a * uniform3 b *
    (Num.sg (r3 a - r3 b) * score3 c a + Num.sg (r3 b - r3 a) * score3 c b).
Proof. by rewrite E2; apply: eq_bigr => a _; apply: eq_bigr => b _; rewrite grpo2_sum. Qed.

Let nz3 : 3%:R != 0 :> R. Proof. by rewrite natr_neq0. Qed.
Let nz9 : 9%:R != 0 :> R. Proof. by rewrite natr_neq0. Qed.

Lemma grpo_c0 : E uniform3 (fun y : {ffun 'I_2 -> 'I_3} => \sum_i grpo 0 r3 y i * score3 0 (y i)) =
  - (4%:R / 9%:R).
Proof.
rewrite grpo_expected !big_ord_recl !big_ord0 /r3 /score3 /uniform3 /= !sg_nat /=.
by field.
Qed.
Lemma grpo_c1 : E uniform3 (fun y : {ffun 'I_2 -> 'I_3} => \sum_i grpo 0 r3 y i * score3 1 (y i)) = 0.
Proof.
rewrite grpo_expected !big_ord_recl !big_ord0 /r3 /score3 /uniform3 /= !sg_nat /=.
by field.
Qed.

Lemma gradient_c0 : \sum_v uniform3 v * r3 v * score3 0 v = - (4%:R / 9%:R).
Proof. by rewrite !big_ord_recl big_ord0 /r3 /score3 /uniform3 /=; field. Qed.

Lemma gradient_c1 : \sum_v uniform3 v * r3 v * score3 1 v = - (1 / 9%:R).
Proof. by rewrite !big_ord_recl big_ord0 /r3 /score3 /uniform3 /=; field. Qed.

Lemma score3_mean0 c : (c < 3)%N -> \sum_v uniform3 v * score3 c v = 0.
Proof.
rewrite !big_ord_recl big_ord0 /score3 /uniform3 /=.
by case: c => [|[|[|c]]] //= _; field.
Qed.

Lemma grpo_rescaled ddof (s : 'I_3 -> R) : (ddof <= 1)%N ->
  E uniform3 (fun y : {ffun 'I_2 -> 'I_3} => \sum_i grpo ddof r3 y i * s (y i)) =
  kappa ddof * E uniform3 (fun y : {ffun 'I_2 -> 'I_3} => \sum_i grpo 0 r3 y i * s (y i)).
Proof.
move=> d1; rewrite -E_scale; apply: E_ext => y; rewrite mulr_sumr.
by apply: eq_bigr => i _; rewrite (grpo_ddof r3 y i d1) -mulrA.
Qed.

(* GRPO (eps 0, ddof 0 or 1) is biased for the pass@1 (mean reward) gradient: at N = 2, with
   three answers of rewards 0, 1, 3 drawn uniformly, no constant c gives E[sum_i A_i s(y_i)] =
   c * grad J for every score s of zero mean (the softmax scores of answers 0 and 1 disagree). *)
Theorem grpo_is_biased :
  \sum_v uniform3 v = 1 /\
  forall ddof, (ddof <= 1)%N ->
  ~ (exists c : R, forall s : 'I_3 -> R, \sum_v uniform3 v * s v = 0 ->
      E uniform3 (fun y : {ffun 'I_2 -> 'I_3} => \sum_i grpo ddof r3 y i * s (y i)) =
      c * \sum_v uniform3 v * r3 v * s v).
Proof.
split=> [|ddof d1 [c H]]; first by rewrite !big_ord_recl big_ord0 /uniform3; field.
have k0 : kappa ddof != 0.
  rewrite /kappa invr_eq0 sqrtr_eq0 Order.POrderTheory.lt_geF // divr_gt0 ?ltr0n //.
  by rewrite subn_gt0 (leq_ltn_trans d1).
have := H _ (score3_mean0 (isT : (1 < 3)%N)).
rewrite grpo_rescaled // grpo_c1 gradient_c1 mulr0 => /esym/eqP.
rewrite mulf_eq0 oppr_eq0 mulf_eq0 invr_eq0 oner_eq0 (negbTE nz9) orbF orbF => /eqP c0.
have := H _ (score3_mean0 (isT : (0 < 3)%N)).
rewrite grpo_rescaled // grpo_c0 gradient_c0 c0 mul0r => /eqP.
by rewrite mulf_eq0 (negbTE k0) oppr_eq0 mulf_eq0 invr_eq0 (negbTE nz9) orbF pnatr_eq0.
Qed.
End Grpo.
