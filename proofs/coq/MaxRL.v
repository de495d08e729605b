(* MaxRL for every N (spec/maxrl.md claims 1-3, reference/maxrl.py), on pass/fail rewards.

   Unbiased.v's model: one prompt, answers Y drawn i.i.d. from pi, a score s of zero pi-mean, and
   E_N the exact expectation over N samples. succ says which answers pass; pass k z (1 when one
   of k samples passes) is the reward of k samples, so grad pi s pass k is the score-function
   gradient of pass@k. The MaxRL objective of N samples is J_N = sum_{k=1}^{N} (1/k) pass@k.

   Section Harmonic is pure counting, for every N and every set of passing samples G: with f the
   pass@k set function, sum_{K=1}^{N} canonical(K)_i = N [i in G] / |G| (spec claim 3). A failed
   sample's terms telescope (its M+ at K is the others' M- at K-1); every passing sample gets the
   same value (its M- counts the failing subsets of the others, which depend on |G| only), and
   summed over the samples the terms K < N vanish (I4) while K = N gives N.

   Section MaxRL puts that under the expectation: canonical at K is unbiased for (N/K) grad
   pass@K (Unbiased.canonical_is_unbiased), and the baselines [S_{-i} > 0] leave out sample i
   (Unbiased.leave_one_out_adds_no_bias), so maxrl_unbiased is unbiased for N grad J_N (claim 1);
   the trainers' maxrl subtracts [S > 0] instead, whose expectation is grad pass@N
   (Unbiased.E_subset on all N samples), so its bias is exactly -grad pass@N (claim 2). *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp Require Import ring zify.
From Advest Require Import Counting Unbiased.
Set Implicit Arguments.
Unset Strict Implicit.
Unset Printing Implicit Defensive.
Import GRing.Theory Num.Theory.
Local Open Scope ring_scope.

(* At K = N the canonical estimator is the max of all N rewards: M+_i averages the one
   (N-1)-subset of the others, and M-_i is an average over no subset (0 in Coq; reference/maxk.py
   refuses K = N). *)
Lemma canonical_top (R : numFieldType) n (f : {set 'I_n} -> R) i : canonical n f i = f setT.
Proof.
have n0 : (0 < n)%N by exact: leq_ltn_trans (leq0n i) (ltn_ord i).
rewrite /canonical m_minusE bin_small ?prednK // invr0 mulr0 subr0 /m_plus /avg.
rewrite card_subsets card_others binn divr1 (big_pred1 (others i)); last first.
  move=> S; rewrite in_subsets /= eqEcard -(card_others i); apply: andb_id2l => Si.
  by rewrite eqn_leq (subset_leq_card Si).
by rewrite /others setUCr.
Qed.

Section Harmonic.
Variable R : numFieldType.
Variables (n : nat) (good : pred 'I_n) (f : {set 'I_n} -> R).
Hypothesis fE : forall T, f T = [exists j in T, good j]%:R.
Implicit Types (i j : 'I_n) (k : nat) (S T : {set 'I_n}).

Let G := [set j | good j].

Lemma avg_const (F : {set {set 'I_n}}) (g : {set 'I_n} -> R) c :
  #|F| != 0%N -> (forall S, S \in F -> g S = c) -> avg F g = c.
Proof.
move=> F0 gc; rewrite /avg (eq_bigr (fun _ => c)) // sumr_const -[c *+ _]mulr_natr mulfK //.
by rewrite pnatr_eq0.
Qed.

Lemma f_fail i S : ~~ good i -> f (i |: S) = f S.
Proof.
move=> gi; rewrite !fE; congr (nat_of_bool _)%:R.
apply/existsP/existsP => [[j /andP[]] | [j /andP[jS gj]]].
  rewrite !inE => /orP[/eqP -> gi' | jS gj]; first by rewrite gi' in gi.
  by exists j; rewrite jS.
by exists j; rewrite !inE jS orbT.
Qed.

Lemma f_good i S : good i -> f (i |: S) = 1.
Proof.
move=> gi; rewrite fE (_ : [exists j in i |: S, good j] = true) //.
by apply/existsP; exists i; rewrite !inE eqxx.
Qed.

Lemma i_pos i : (0 < n)%N.
Proof. exact: leq_ltn_trans (leq0n i) (ltn_ord i). Qed.

(* A failed sample i: the K-th canonical term is M-_{K-1} - M-_K, and the sum telescopes. *)
Lemma harmonic_fail i : ~~ good i -> \sum_(k < n) canonical k.+1 f i = 0.
Proof.
move=> gi.
rewrite (eq_bigr (fun k : 'I_n => m_minus k f i - m_minus k.+1 f i)); last first.
  move=> k _; rewrite /canonical /m_plus /m_minus /=; congr (_ - _).
  by rewrite /avg; congr (_ / _); apply: eq_bigr => S _; rewrite f_fail.
rewrite -(big_mkord xpredT (fun k => m_minus k f i - m_minus k.+1 f i)).
rewrite -[X in X = _]opprK -sumrN.
rewrite (eq_bigr (fun k => m_minus k.+1 f i - m_minus k f i)); last by move=> k _; rewrite opprB.
rewrite telescope_sumr // .
have -> : m_minus n f i = 0.
  by rewrite m_minusE bin_small ?invr0 ?mulr0 // prednK ?(i_pos i).
have -> : m_minus 0 f i = 0.
  rewrite m_minusE big1 ?mul0r // => T; rewrite in_subsets => /andP[_ /eqP/cards0_eq ->].
  by rewrite fE; apply/eqP; rewrite pnatr_eq0 eqb0; apply/existsP => -[j]; rewrite inE.
by rewrite subrr oppr0.
Qed.

Lemma m_minus_top i : m_minus n f i = 0.
Proof. by rewrite m_minusE bin_small ?invr0 ?mulr0 // prednK ?(i_pos i). Qed.

Lemma exists_not_subset T : [exists j in T, good j] = ~~ (T \subset ~: G).
Proof.
apply/existsP/subsetPn => [[x /andP[xT gx]] | [x xT]].
  by exists x => //; rewrite !inE gx.
by rewrite !inE negbK => gx; exists x; rewrite xT gx.
Qed.

(* For a successful sample j, a K-subset of the others fails exactly when it lies in the failures:
   M-_j depends on the number of successes only. *)
Lemma sum_f_good j k : good j ->
  \sum_(T in subsets (others j) k) f T = 'C(n.-1, k)%:R - 'C(#|~: G|, k)%:R.
Proof.
move=> gj.
rewrite (eq_bigr (fun T => 1 - if T \subset ~: G then 1 else 0)); last first.
  by move=> T _; rewrite fE exists_not_subset; case: (T \subset ~: G); rewrite ?subr0 ?subrr.
rewrite sumrB sumr_const card_subsets card_others -big_mkcondr /=.
rewrite (eq_bigl (fun T => T \in subsets (~: G) k)); last first.
  move=> T; rewrite !in_subsets; case sub: (T \subset ~: G); rewrite ?andbF ?andbT //=.
  rewrite (_ : T \subset others j) //; apply: subset_trans sub _.
  apply/subsetP => x; rewrite !inE; apply: contra => /eqP ->; exact: gj.
by rewrite sumr_const card_subsets.
Qed.

Lemma m_minus_good i j k : good i -> good j -> m_minus k f i = m_minus k f j.
Proof. by move=> gi gj; rewrite !m_minusE !sum_f_good. Qed.

Lemma m_plus_good i k : good i -> (k < n)%N -> m_plus k.+1 f i = 1.
Proof.
move=> gi kn; rewrite /m_plus; apply: avg_const => [| S _]; last exact: f_good.
by rewrite card_subsets card_others -lt0n bin_gt0 -ltnS (prednK (i_pos i)).
Qed.

Let X i := \sum_(k < n) canonical k.+1 f i.

Lemma harmonic_good_eq i j : good i -> good j -> X i = X j.
Proof.
move=> gi gj; apply: eq_bigr => k _.
by rewrite /canonical !m_plus_good // (m_minus_good k.+1 gi gj).
Qed.

Lemma m_hat_top : m_hat n f = f setT.
Proof.
rewrite /m_hat; apply: avg_const => [| S]; first by rewrite card_subsets cardsT card_ord binn.
rewrite in_subsets => /andP[_ /eqP cS].
suff -> : S = setT by [].
by apply/eqP; rewrite eqEcard subsetT cardsT card_ord; exact: eq_leq (esym cS).
Qed.

(* Summed over the samples, every term K < N vanishes (I4) and the K = N term is N f(all). *)
Lemma sum_harmonic i : \sum_j X j = n%:R * f setT.
Proof.
have -> : \sum_j X j = \sum_(k < n) \sum_j canonical k.+1 f j by rewrite exchange_big.
have n0 := i_pos i.
have lt : (n.-1 < n)%N by rewrite prednK.
rewrite [LHS](bigD1 (Ordinal lt)) //= [X in _ + X]big1 ?addr0; last first.
  move=> k kn; apply: canonical_sums_to_zero => //; rewrite ltn_neqAle (ltn_ord k) andbT.
  by apply: contra kn => kn; apply/eqP/val_inj/eqP => /=; rewrite -eqSS prednK.
rewrite prednK // /canonical sumrB [X in _ - X]big1 ?subr0; last by move=> j _; apply: m_minus_top.
by rewrite sum_m_plus // m_hat_top.
Qed.

(* Spec/maxrl.md claim 3 for every N: on pass/fail rewards, N r_i / S = sum_{K=1}^{N} canonical(r, K)_i. *)
Theorem harmonic_canonical i : \sum_(k < n) canonical k.+1 f i = n%:R * (good i)%:R / #|G|%:R.
Proof.
case gi: (good i); last by rewrite harmonic_fail ?gi // mulr0 mul0r.
have G0 : #|G|%:R != 0 :> R by rewrite pnatr_eq0 -lt0n card_gt0; apply/set0Pn; exists i; rewrite inE.
have : \sum_j X j = #|G|%:R * X i.
  rewrite (bigID good) /= [X in _ + X]big1 ?addr0; last first.
    by move=> j /negbTE gj; apply: harmonic_fail; rewrite gj.
  rewrite (eq_bigr (fun _ => X i)) => [| j gj]; last exact: harmonic_good_eq.
  by rewrite sumr_const /G cardsE -mulr_natl.
rewrite (sum_harmonic i) (_ : f setT = 1); last first.
  by rewrite fE (_ : [exists j in setT, good j] = true) //; apply/existsP; exists i; rewrite inE gi.
by move=> h; rewrite /= mulr1n h mulrC mulKf.
Qed.
End Harmonic.

Section MaxRL.
Variable R : numFieldType.
Variable Y : finType.
Variables (pi s : Y -> R).
Hypothesis pi_sum1 : \sum_v pi v = 1.
Hypothesis score_mean0 : \sum_v pi v * s v = 0.

(* spec/maxrl.md `maxrl` (reference/maxrl.py): the p-normalised form, A = 0 when rbar = 0. *)
Definition maxrl m (r : Y -> R) (y : {ffun 'I_m -> Y}) (i : 'I_m) :=
  let rbar := (\sum_j r (y j)) / m%:R in
  if rbar == 0 then 0 else (r (y i) - rbar) / rbar.

(* spec/maxrl.md `maxrl_unbiased`: N r_i / S - [S_{-i} > 0] (the baseline only with
   baseline = true), A = 0 when S = 0. *)
Definition maxrl_unbiased m (baseline : bool) (r : Y -> R) (y : {ffun 'I_m -> Y}) (i : 'I_m) :=
  let S := \sum_j r (y j) in
  if S == 0 then 0
  else m%:R * r (y i) / S - (baseline && [exists j, (j != i) && (0 < r (y j))])%:R.

(* Pass/fail rewards: succ v says whether answer v passes; pass k z is the reward of k samples
   (1 when one of them passes), so grad pi s pass k is the score-function gradient of pass@k. *)
Variable succ : pred Y.
Definition binary (v : Y) : R := (succ v)%:R.
Definition pass k (z : {ffun 'I_k -> Y}) : R := [exists j, succ (z j)]%:R.

Lemma fset_pass m (y : {ffun 'I_m -> Y}) (T : {set 'I_m}) :
  fset pass y T = [exists i in T, succ (y i)]%:R.
Proof.
rewrite /fset /pass; congr (nat_of_bool _)%:R.
apply/existsP/existsP => [[j] | [i /andP[iT si]]].
  by rewrite /restrict ffunE => sj; exists (enum_val j); rewrite enum_valP sj.
by exists (enum_rank_in iT i); rewrite /restrict ffunE enum_rankK_in.
Qed.

Lemma sum_binary m (y : {ffun 'I_m -> Y}) :
  \sum_j binary (y j) = #|[set j | succ (y j)]|%:R.
Proof.
rewrite -sumr_const [RHS]big_mkcond /=; apply: eq_bigr => j _.
by rewrite inE /binary; case: (succ (y j)).
Qed.

Section Pointwise.
Variables (m : nat) (y : {ffun 'I_m -> Y}).

(* Spec claim 3 (baseline = false), every N: N r_i / S = sum_{K=1}^{N} canonical(r, K)_i. *)
Theorem maxrl_is_a_harmonic_sum_of_canonical i :
  maxrl_unbiased false binary y i = \sum_(k < m) canonical k.+1 (fset pass y) i.
Proof.
rewrite (@harmonic_canonical _ _ (fun j => succ (y j))); last by move=> T; rewrite fset_pass.
rewrite /maxrl_unbiased /= sum_binary subr0 /binary.
by case: eqP => [-> | //]; rewrite invr0 !mulr0.
Qed.

Definition others_pass (i : 'I_m) := [exists j, (j != i) && succ (y j)].

Lemma maxrl_unbiased_baseline b i :
  maxrl_unbiased b binary y i = maxrl_unbiased false binary y i - (b && others_pass i)%:R.
Proof.
rewrite /maxrl_unbiased /= sum_binary subr0.
case: eqP => [S0 | _]; last first.
  congr (_ - (_ && _)%:R); apply: eq_existsb => j; by rewrite /binary ltr0n lt0b.
have -> : others_pass i = false; last by rewrite andbF subrr.
apply/existsP => -[j /andP[_ sj]]; move/eqP: S0; rewrite pnatr_eq0 cards_eq0 => /eqP/setP/(_ j).
by rewrite !inE sj.
Qed.

Lemma maxrl_pointwise i :
  maxrl binary y i = maxrl_unbiased false binary y i - [exists j, succ (y j)]%:R.
Proof.
have m0 : m%:R != 0 :> R by rewrite pnatr_eq0 -lt0n; exact: leq_ltn_trans (leq0n i) (ltn_ord i).
rewrite /maxrl_unbiased /maxrl /= sum_binary subr0 mulf_eq0 invr_eq0 (negbTE m0) orbF.
case: eqP => [S0 | /eqP S0].
  suff -> : [exists j, succ (y j)] = false by rewrite subrr.
  apply/existsP => -[j sj]; move/eqP: S0; rewrite pnatr_eq0 cards_eq0 => /eqP/setP/(_ j).
  by rewrite !inE sj.
have -> : [exists j, succ (y j)] = true.
  by move: S0; rewrite pnatr_eq0 cards_eq0 => /set0Pn[j]; rewrite inE => sj; apply/existsP; exists j.
by rewrite /=; field; rewrite m0 S0.
Qed.
End Pointwise.

(* Spec claim 3 as the spec writes it for the trainers' form: maxrl = sum_{K=1}^{N-1} canonical(r, K). *)
Theorem maxrl_is_a_sum_of_canonical m (y : {ffun 'I_m -> Y}) i :
  maxrl binary y i = \sum_(k < m.-1) canonical k.+1 (fset pass y) i.
Proof.
move: i; case: m y => [|m'] y i; first by case: i.
rewrite maxrl_pointwise maxrl_is_a_harmonic_sum_of_canonical big_ord_recr /= canonical_top.
rewrite fset_pass (_ : [exists j in setT, succ (y j)] = [exists j, succ (y j)]) ?addrK //.
by apply: eq_existsb => j; rewrite inE.
Qed.


Lemma others_pass_leaves_out m b (i : 'I_m) :
  leaves_out i (fun y => (b && others_pass y i)%:R : R).
Proof.
move=> y z yz; congr (_ && _)%:R; apply: eq_existsb => j.
by case: (boolP (j != i)) => //= ji; rewrite yz.
Qed.

(* Spec/maxrl.md claim 1, every N: maxrl_unbiased (with or without its baseline) is unbiased for
   N * sum_{k=1}^{N} (1/k) grad pass@k. *)
Theorem maxrl_unbiased_is_unbiased N b :
  E pi (fun y : {ffun 'I_N -> Y} => \sum_i maxrl_unbiased b binary y i * s (y i)) =
  N%:R * \sum_(k < N) (k.+1)%:R^-1 * grad pi s pass k.+1.
Proof.
rewrite (@E_ext _ _ pi N _ (fun y => \sum_(k < N) (\sum_i canonical k.+1 (fset pass y) i * s (y i)) -
    \sum_i (b && others_pass y i)%:R * s (y i))); last first.
  move=> y; rewrite exchange_big -sumrB; apply: eq_bigr => i _.
  by rewrite maxrl_unbiased_baseline maxrl_is_a_harmonic_sum_of_canonical mulrBl mulr_suml.
rewrite E_sub E_sum [X in _ - X]E_sum [X in _ - X]big1 ?subr0; last first.
  by move=> i _; apply: leave_one_out_adds_no_bias => //; apply: others_pass_leaves_out.
rewrite mulr_sumr; apply: eq_bigr => k _.
by rewrite (canonical_is_unbiased pi_sum1 score_mean0) ?ltn_ord // mulrA.
Qed.

(* Spec/maxrl.md claim 2, every N: the trainers' p-normalised form carries exactly the bias
   -grad pass@N (the K = N term of the harmonic sum, N * (1/N) grad pass@N, is missing). *)
Theorem maxrl_bias N :
  E pi (fun y : {ffun 'I_N -> Y} => \sum_i maxrl binary y i * s (y i)) =
  N%:R * (\sum_(k < N) (k.+1)%:R^-1 * grad pi s pass k.+1) - grad pi s pass N.
Proof.
rewrite (@E_ext _ _ pi N _ (fun y => \sum_i maxrl_unbiased false binary y i * s (y i) -
    fset pass y setT * \sum_(i in setT) s (y i))); last first.
  move=> y; rewrite fset_pass sum_all_setT mulr_sumr -sumrB; apply: eq_bigr => i _.
  rewrite maxrl_pointwise mulrBl; congr (_ - (nat_of_bool _)%:R * _).
  by apply: eq_existsb => j; rewrite inE.
by rewrite E_sub maxrl_unbiased_is_unbiased E_subset // cardsT card_ord.
Qed.

(* Put another way: the trainers' form is unbiased for the MaxRL objective of one sample fewer. *)
Theorem maxrl_is_unbiased_for_one_sample_fewer N : (0 < N)%N ->
  E pi (fun y : {ffun 'I_N -> Y} => \sum_i maxrl binary y i * s (y i)) =
  N%:R * \sum_(k < N.-1) (k.+1)%:R^-1 * grad pi s pass k.+1.
Proof.
case: N => // N _; rewrite maxrl_bias big_ord_recr /= mulrDr mulrA mulfV ?mul1r ?addrK //.
by rewrite pnatr_eq0.
Qed.
(* The closed forms of spec/maxrl.md: with p = E_pi[r] the pass rate and grad p = E_pi[r s] its
   score-function gradient, grad pass@k = k (1 - p)^(k-1) grad p. *)
Definition pass_rate := \sum_v pi v * binary v.
Definition pass_rate_grad := \sum_v pi v * binary v * s v.

Lemma E_prod k (h : 'I_k -> Y -> R) :
  E pi (fun z : {ffun 'I_k -> Y} => \prod_l h l (z l)) = \prod_l \sum_v pi v * h l v.
Proof.
rewrite (bigA_distr_bigA (fun l v => pi v * h l v)) /=; apply: eq_bigr => z _.
by rewrite /weight big_split.
Qed.

Lemma pass_complement k (z : {ffun 'I_k -> Y}) :
  pass z = 1 - \prod_l (1 - binary (z l)).
Proof.
rewrite /pass /binary; case: existsP => [[j sj] | none].
  by rewrite (bigD1 j) //= sj subrr mul0r subr0.
rewrite big1 ?subrr // => l _.
by case: (boolP (succ (z l))) => [sl | _]; [case: none; exists l | rewrite subr0].
Qed.

Theorem grad_pass_at_k k : grad pi s pass k = k%:R * (1 - pass_rate) ^+ k.-1 * pass_rate_grad.
Proof.
rewrite /grad (@E_ext _ _ pi k _ (fun z => \sum_j s (z j) -
    \sum_j \prod_l ((1 - binary (z l)) * (if l == j then s (z l) else 1)))); last first.
  move=> z; rewrite pass_complement mulrBl mul1r mulr_sumr; congr (_ - _).
  apply: eq_bigr => j _; rewrite big_split /= [X in _ = _ * X](bigD1 j) //= eqxx.
  by rewrite [X in _ = _ * (_ * X)]big1 ?mulr1 // => l /negbTE ->.
rewrite E_sub !E_sum big1 ?sub0r; last first.
  by move=> j _; rewrite (E_one_sample pi_sum1 j s).
rewrite (eq_bigr (fun _ => (1 - pass_rate) ^+ k.-1 * - pass_rate_grad)); last first.
  move=> j _; rewrite (E_prod (fun l v => (1 - binary v) * (if l == j then s v else 1))).
  rewrite (bigD1 j) //= eqxx mulrC; congr (_ * _).
    rewrite (eq_bigr (fun _ => 1 - pass_rate)); last first.
      move=> l /negbTE ->; rewrite /pass_rate -[in RHS]pi_sum1 -sumrB.
      by apply: eq_bigr => v _; rewrite mulr1 mulrBr mulr1.
    by rewrite prodr_const cardC1 card_ord.
  rewrite /pass_rate_grad [LHS](eq_bigr (fun v => pi v * s v - pi v * binary v * s v)).
    by rewrite sumrB score_mean0 sub0r.
  by move=> v _; rewrite mulrBl mul1r mulrBr mulrA.
by rewrite sumr_const card_ord -mulNrn mulrN opprK -mulr_natl mulrA.
Qed.

Lemma harmonic_closed N :
  N%:R * (\sum_(k < N) (k.+1)%:R^-1 * grad pi s pass k.+1) =
  N%:R * (\sum_(k < N) (1 - pass_rate) ^+ k) * pass_rate_grad.
Proof.
rewrite -mulrA mulr_suml; congr (_ * _); apply: eq_bigr => k _.
by rewrite grad_pass_at_k /= -!mulrA mulKf // pnatr_eq0.
Qed.

Lemma geometric N : pass_rate != 0 ->
  \sum_(k < N) (1 - pass_rate) ^+ k = (1 - (1 - pass_rate) ^+ N) / pass_rate.
Proof.
move=> p0; apply: (mulIf p0); rewrite mulfVK //.
have := subrX1 (1 - pass_rate) N; rewrite addrAC subrr add0r => h.
by rewrite -[RHS]opprB h mulNr opprK mulrC.
Qed.

(* Claim 1 as the paper writes it: E = N (1 - (1-p)^N) / p grad p. *)
Theorem maxrl_unbiased_closed_form N b : pass_rate != 0 ->
  E pi (fun y : {ffun 'I_N -> Y} => \sum_i maxrl_unbiased b binary y i * s (y i)) =
  N%:R * ((1 - (1 - pass_rate) ^+ N) / pass_rate) * pass_rate_grad.
Proof. by move=> p0; rewrite maxrl_unbiased_is_unbiased harmonic_closed geometric. Qed.

(* Claim 2 as issue 26 writes it: E = N [(1 - (1-p)^N) / p - (1-p)^(N-1)] grad p. *)
Theorem maxrl_closed_form N : pass_rate != 0 ->
  E pi (fun y : {ffun 'I_N -> Y} => \sum_i maxrl binary y i * s (y i)) =
  N%:R * ((1 - (1 - pass_rate) ^+ N) / pass_rate - (1 - pass_rate) ^+ N.-1) * pass_rate_grad.
Proof.
move=> p0; rewrite maxrl_bias harmonic_closed geometric // grad_pass_at_k.
by ring.
Qed.
End MaxRL.
