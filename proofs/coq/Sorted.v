(* The sorted forms of the fast algorithm equal the subset definitions, for every N and K
   (spec/maxk.md §Algorithm; spec/maxk_weights.py).

   For every group size n, every K with 0 < K <= n (K < n where M⁻ is involved), every ordered
   field R, every vector x sorted ascending (ties allowed) and any mx that is the maximum of x over
   a set (max ∅ = 0), the building blocks of Counting.v instantiated with f = mx equal the linear
   forms own_p x_p + Σ_{q<p} below_q x_q + Σ_{q>p} above_q x_q whose coefficients are the weights
   of spec.maxk_weights (α, β, γ, μlo, μhi, Bagirov's Eq. 9 weights), combined as in
   spec.maxk_weights.FORMS. Evaluation.v proves that fast's prefix-sum evaluation is that linear
   form; tests/core/proofs/test_coq.py reads the weight and form definitions below back into Python and
   checks them against WEIGHTS and FORMS, and fast's float64 weight tables against them.

   The one counting fact used: the K-subsets of a set A whose largest index is q number
   C(#{a ∈ A, a < q}, K − 1); on a sorted vector the max of a subset is the value at its largest
   index, whatever the ties. Positions are 0-based here (j), 1-based in spec.maxk_weights
   (q = j + 1). *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp Require Import ring zify.
From Advest Require Import Counting Evaluation.
Set Implicit Arguments.
Unset Strict Implicit.
Unset Printing Implicit Defensive.
Import GRing.Theory Num.Theory.
Local Open Scope ring_scope.

Section Max.
Variable R : realFieldType.
Variable n : nat.
Variable x : nat -> R.
Hypothesis sorted : forall i j, (i <= j)%N -> (j < n)%N -> x i <= x j.
Implicit Types (A S T : {set 'I_n}) (i j q : 'I_n) (m : nat).

Definition top S : nat := \max_(i in S) (i : nat).
Definition fmax S : R := if S == set0 then 0 else x (top S).

Lemma top_mem S : S != set0 -> exists2 i, i \in S & top S = i.
Proof.
move=> S0; have : (0 < #|S|)%N by rewrite card_gt0.
by case/(eq_bigmax_cond (fun i : 'I_n => (i : nat))) => i iS ti; exists i; rewrite // /top ti.
Qed.

Lemma top_ub S i : i \in S -> (i <= top S)%N.
Proof. exact: leq_bigmax_cond. Qed.

(* fmax is the maximum of the values in S: an upper bound that one of them attains. *)
Lemma fmax_is_max S : S != set0 ->
  (forall i, i \in S -> x i <= fmax S) /\ exists2 i, i \in S & fmax S = x i.
Proof.
move=> S0; rewrite /fmax (negbTE S0); have [j jS tj] := top_mem S0.
split; last by exists j; rewrite // tj.
by move=> i iS; apply: sorted; [exact: top_ub | rewrite tj ltn_ord].
Qed.

(* mx is the max of the values: 0 on the empty set (max ∅ := 0, spec/maxk.md §Conventions), and
   on every other set an upper bound of its values that one of them attains. *)
Definition is_max (mx : {set 'I_n} -> R) :=
  mx set0 = 0 /\ forall S, S != set0 ->
    (forall i, i \in S -> x i <= mx S) /\ exists2 i, i \in S & mx S = x i.

(* On a sorted vector fmax is such a max (so the premise is satisfiable), and it is the only one. *)
Theorem is_max_fmax : is_max fmax.
Proof. by split; [rewrite /fmax eqxx | exact: fmax_is_max]. Qed.

Lemma is_max_eq mx : is_max mx -> forall S, mx S = fmax S.
Proof.
case=> m0 mS S; case: (eqVneq S set0) => [-> | S0]; first by rewrite m0 /fmax eqxx.
have [ub [i iS ei]] := mS S S0; have [ub' [j jS ej]] := fmax_is_max S0.
by apply: Order.POrderTheory.le_anti; rewrite ei ub' //= -ei ej ub.
Qed.

Lemma top_eq S q m : (0 < m)%N -> #|S| = m ->
  (top S == q) = (q \in S) && [forall a in S, (a <= q)%N].
Proof.
move=> m0 cS; have S0 : S != set0 by rewrite -card_gt0 cS.
have [j jS tj] := top_mem S0.
apply/idP/andP => [/eqP tq | [qS /forall_inP le]].
  have -> : q = j by apply: val_inj; rewrite /= -tj -tq.
  by split=> //; apply/forall_inP => a aS; rewrite -tj top_ub.
apply/eqP/anti_leq; rewrite top_ub // andbT.
by apply/bigmax_leqP => a aS; exact: le.
Qed.

Lemma sum_fmax A m : (0 < m)%N ->
  \sum_(S in subsets A m) fmax S =
  \sum_(q in A) 'C(#|[set a in A | (a < q)%N]|, m.-1)%:R * x q.
Proof.
move=> m0.
have step : forall S, S \in subsets A m -> fmax S = \sum_(q in A | top S == q) x q.
  move=> S; rewrite in_subsets => /andP[SA /eqP cS].
  have S0 : S != set0 by rewrite -card_gt0 cS.
  have [j jS tj] := top_mem S0.
  rewrite /fmax (negbTE S0) (big_pred1 j) ?tj // => q.
  rewrite /=; apply/andP/eqP => [[_ /eqP e] | ->]; first by apply: val_inj.
  by rewrite (subsetP SA).
rewrite (eq_bigr _ step) (exchange_big_dep (fun q => q \in A)) /=; last first.
  by move=> S q _ /andP[].
apply: eq_bigr => q qA.
set B := [set a in A | (a <= q)%N].
have qB : q \in B by rewrite inE qA leqnn.
rewrite (eq_bigl (fun S => (S \in subsets B m) && (q \in S))); last first.
  move=> S; rewrite !in_subsets qA /=; apply/andP/andP.
    case=> /andP[SA /eqP cS]; rewrite (top_eq _ m0 cS) => /andP[qS /forall_inP le].
    split=> //; rewrite cS eqxx andbT; apply/subsetP => a aS.
    by rewrite inE (subsetP SA) // le.
  case=> /andP[SB /eqP cS] qS; rewrite cS eqxx andbT (top_eq _ m0 cS) qS /=.
  split; first by apply: subset_trans SB _; apply/subsetP => a; rewrite inE => /andP[].
  by apply/forall_inP => a /(subsetP SB); rewrite inE => /andP[].
rewrite sum_subsets_in // sumr_const card_subsets mulr_natl.
congr (_ *+ 'C(_, _)); apply: eq_card => a; rewrite !inE.
case: (a =P q) => [-> | /eqP aq]; first by rewrite ltnn andbF.
by move: aq; rewrite -val_eqE /= ltn_neqAle => ->.
Qed.


Lemma sum_fmax0 A : \sum_(S in subsets A 0) fmax S = 0.
Proof.
apply: big1 => S; rewrite in_subsets => /andP[_ /eqP/cards0_eq ->].
by rewrite /fmax eqxx.
Qed.

Lemma card_lt q : #|[set a : 'I_n | (a < q)%N]| = q.
Proof.
have qn : (q <= n)%N by apply: ltnW.
have -> : [set a : 'I_n | (a < q)%N] = widen_ord qn @: [set: 'I_q].
  apply/setP => a; rewrite inE; apply/idP/imsetP => [aq | [b _ ->]]; last by rewrite /= ltn_ord.
  by exists (Ordinal aq); rewrite ?inE //; apply: val_inj.
by rewrite card_imset ?cardsT ?card_ord // => a b /(congr1 val) /= e; apply: val_inj.
Qed.

Lemma card_lt_others p q : q != p ->
  #|[set a in others p | (a < q)%N]| = if (p < q)%N then q.-1 else q.
Proof.
move=> qp; have := cardsD1 p [set a : 'I_n | (a < q)%N]; rewrite card_lt inE.
have -> : [set a : 'I_n | (a < q)%N] :\ p = [set a in others p | (a < q)%N].
  by apply/setP => a; rewrite !inE andbC.
by case: (p < q)%N => /= e; lia.
Qed.

(* Σ over all q = the q = p term + Σ_{q<p} + Σ_{q>p}; Σ over q ≠ p = Σ_{q<p} + Σ_{q>p}. *)
Lemma sum_others p (g : 'I_n -> R) :
  \sum_(q in others p) g q = \sum_(q : 'I_n | (q < p)%N) g q + \sum_(q : 'I_n | (p < q)%N) g q.
Proof.
rewrite (bigID (fun q : 'I_n => (q < p)%N)) /=; congr (_ + _); apply: eq_bigl => q;
  by rewrite !inE -val_eqE /=; case: ltngtP.
Qed.

Lemma sum_split p (g : 'I_n -> R) :
  \sum_(q : 'I_n) g q = g p + \sum_(q : 'I_n | (q < p)%N) g q + \sum_(q : 'I_n | (p < q)%N) g q.
Proof.
rewrite (bigD1 p) //= -addrA -sum_others; congr (_ + _); apply: eq_bigl => q.
by rewrite !inE.
Qed.

Lemma sum_fmax_all m : (0 < m)%N ->
  \sum_(S in subsets setT m) fmax S = \sum_(q : 'I_n) 'C(q, m.-1)%:R * x q.
Proof.
move=> m0; rewrite sum_fmax // sum_all_setT; apply: eq_bigr => q _.
by congr ('C(_, _)%:R * _); rewrite -[RHS](card_lt q); apply: eq_card => a; rewrite !inE.
Qed.

Lemma sum_fmax_others p m : (0 < m)%N ->
  \sum_(S in subsets (others p) m) fmax S =
  \sum_(q : 'I_n | (q < p)%N) 'C(q, m.-1)%:R * x q + \sum_(q : 'I_n | (p < q)%N) 'C(q.-1, m.-1)%:R * x q.
Proof.
move=> m0; rewrite sum_fmax // sum_others; congr (_ + _); apply: eq_bigr => q qp.
  rewrite card_lt_others; first by rewrite ltnNge ltnW.
  by apply/eqP => /(congr1 val) /= e; rewrite e ltnn in qp.
rewrite card_lt_others ?qp //.
by apply/eqP => /(congr1 val) /= e; rewrite e ltnn in qp.
Qed.


(* The sorted linear form at position p (spec.maxk_weights), with sums over the ordinals of 'I_n;
   lform_is_linear_form: it is Evaluation.linear_form, whose sums run over natural numbers. *)
Definition lform (own below above : nat -> R) (p : 'I_n) :=
  own p * x p + \sum_(q : 'I_n | (q < p)%N) below q * x q
  + \sum_(q : 'I_n | (p < q)%N) above q * x q.

(* One form, two index styles: the theorems of this file (about lform) and Evaluation's (about
   linear_form, the prefix-sum evaluation fast/ runs) are about the same value. *)
Theorem lform_is_linear_form (own below above : nat -> R) (p : 'I_n) :
  lform own below above p = linear_form n own below above x (p : nat).
Proof.
rewrite /lform /linear_form; congr (_ + _ + _).
  rewrite -(big_mkord (fun k => k < p)%N (fun k => below k * x k)).
  by rewrite [RHS](big_nat_widen _ _ _ _ _ (ltnW (ltn_ord p))).
rewrite -(big_mkord (fun k => p < k)%N (fun k => above k * x k)).
rewrite (big_cat_nat _ _ _ (leq0n p.+1) (ltn_ord p)) /= big_nat_cond big1 ?add0r.
  rewrite big_nat_cond [RHS]big_nat_cond; apply: eq_bigl => k.
  by case: (p < k)%N; rewrite ?andbT ?andbF.
by move=> k /andP[/andP[_ kp] pk]; move: kp; rewrite ltnS leqNgt pk.
Qed.

Lemma lform_ext (o1 b1 a1 o2 b2 a2 : nat -> R) (p : 'I_n) :
  o1 p = o2 p -> (forall q : 'I_n, (q < p)%N -> b1 q = b2 q) ->
  (forall q : 'I_n, (p < q)%N -> a1 q = a2 q) ->
  lform o1 b1 a1 p = lform o2 b2 a2 p.
Proof.
move=> o b a; rewrite /lform o; congr (_ + _ + _); apply: eq_bigr => q qp; by rewrite ?b ?a.
Qed.

Lemma lform_sub (o1 b1 a1 o2 b2 a2 : nat -> R) (p : 'I_n) :
  lform o1 b1 a1 p - lform o2 b2 a2 p =
  lform (fun j : nat => o1 j - o2 j) (fun j : nat => b1 j - b2 j) (fun j : nat => a1 j - a2 j) p.
Proof.
rewrite /lform.
have eB : \sum_(q : 'I_n | (q < p)%N) (b1 q - b2 q) * x q =
  \sum_(q : 'I_n | (q < p)%N) b1 q * x q - \sum_(q : 'I_n | (q < p)%N) b2 q * x q.
  by rewrite -sumrB; apply: eq_bigr => q _; rewrite mulrBl.
have eA : \sum_(q : 'I_n | (p < q)%N) (a1 q - a2 q) * x q =
  \sum_(q : 'I_n | (p < q)%N) a1 q * x q - \sum_(q : 'I_n | (p < q)%N) a2 q * x q.
  by rewrite -sumrB; apply: eq_bigr => q _; rewrite mulrBl.
rewrite eB eA; ring.
Qed.

Lemma lform_scale c (o b a : nat -> R) (p : 'I_n) :
  c * lform o b a p = lform (fun j : nat => c * o j) (fun j : nat => c * b j) (fun j : nat => c * a j) p.
Proof.
rewrite /lform !mulrDr !mulr_sumr mulrA; congr (_ + _ + _); apply: eq_bigr => q _;
  by rewrite mulrA.
Qed.


Definition cK m (j : nat) : R := 'C(j, m.-1)%:R.

Lemma sum_fmax_all_lform m (p : 'I_n) : (0 < m)%N ->
  \sum_(S in subsets setT m) fmax S = lform (cK m) (cK m) (cK m) p.
Proof. by move=> m0; rewrite sum_fmax_all // (sum_split p). Qed.

Lemma sum_fmax_others_lform m (p : 'I_n) : (0 < m)%N ->
  \sum_(S in subsets (others p) m) fmax S =
  lform (fun _ : nat => 0) (cK m) (fun j : nat => cK m j.-1) p.
Proof. by move=> m0; rewrite sum_fmax_others // /lform mul0r add0r. Qed.

End Max.


(* C(a − da, b − db), and 0 where a − da or b − db is negative: spec.maxk_weights._comb at
   offsets that are natural numbers here (BinomRatio's top, k, den_n, den_k, negated). *)
Definition binz (a da b db : nat) : nat :=
  if (da <= a)%N && (db <= b)%N then 'C((a - da)%N, (b - db)%N) else 0%N.

Lemma binzE a da b db : (da <= a)%N -> (db <= b)%N -> binz a da b db = 'C((a - da)%N, (b - db)%N).
Proof. by rewrite /binz => -> ->. Qed.

(* C(q, k−1) − C(q−1, k−1) = C(q−1, k−2) for q > 0 (Pascal), 0 at k = 1. *)
Lemma pascal_w (R : numFieldType) q k : (0 < q)%N -> (0 < k)%N ->
  'C(q, k.-1)%:R - 'C(q.-1, k.-1)%:R = (binz q.+1 2 k 2)%:R :> R.
Proof.
case: q => // q _; case: k => // -[|k] _; first by rewrite /binz !bin0 subrr.
by rewrite binzE //= binS natrD addrAC subrr add0r !subn2.
Qed.

Section Forms.
Variable R : realFieldType.
Variables (n K : nat) (x : nat -> R) (mx : {set 'I_n} -> R).
Hypothesis sorted : forall i j, (i <= j)%N -> (j < n)%N -> x i <= x j.
Hypothesis mx_is_max : is_max x mx.
Let E : forall S, mx S = fmax x S. Proof. by move=> S; apply: (is_max_eq sorted mx_is_max). Qed.
Hypothesis K_gt0 : (0 < K)%N.
Hypothesis K_le_n : (K <= n)%N.

(* BinomRatio at 1-based position q = j + 1: C(q − t, K − k) / C(N − dn, K − dk). *)
Definition ratio (t k dn dk : nat) (j : nat) : R := (binz j.+1 t K k)%:R / (binz n dn K dk)%:R.

Definition alpha := ratio 1 1 1 1.
Definition beta := ratio 2 2 1 1.
Definition gamma := ratio 1 2 1 1.
Definition mu_lo := ratio 1 1 1 0.
Definition mu_hi := ratio 2 1 1 0.
Definition m_hat_w := ratio 1 1 0 0.
Definition bagirov_above := ratio 2 2 0 0.

Let n_gt0 : (0 < n)%N. Proof. exact: leq_trans K_gt0 K_le_n. Qed.

Lemma sum_in_p (p : 'I_n) : \sum_(S in subsets (others p) K.-1) mx (p |: S) =
  \sum_(S in subsets [set: 'I_n] K) fmax x S - \sum_(S in subsets (others p) K) fmax x S.
Proof.
have := sum_subsets_split [set: 'I_n] K p (fmax x); rewrite sum_subsets_notin setT_minus => ->.
rewrite addrK sum_subsets_in ?inE // setT_minus; apply: eq_bigr => S _; exact: E.
Qed.

Lemma m_plus_lform p : m_plus K mx p = lform x alpha (fun _ => 0) beta p.
Proof.
rewrite m_plusE sum_in_p (sum_fmax_all_lform x p) // (sum_fmax_others_lform x p) //.
rewrite lform_sub mulrC lform_scale; apply: lform_ext => [|q qp|q pq].
- by rewrite subr0 /alpha /ratio !binzE // /cK !subn1 /= mulrC.
- by rewrite subrr mulr0.
- rewrite /beta /ratio /cK (pascal_w _ _ K_gt0); last by apply: leq_ltn_trans pq.
  by rewrite [X in _ = _ / X%:R]binzE // !subn1 mulrC.
Qed.

Lemma m_minus_lform p : m_minus K mx p = lform x (fun _ => 0) mu_lo mu_hi p.
Proof.
rewrite m_minusE (eq_bigr _ (fun S _ => E S)) (sum_fmax_others_lform x p) //.
rewrite mulrC lform_scale; apply: lform_ext => [|q qp|q pq].
- by rewrite mulr0.
- by rewrite /mu_lo /ratio !binzE // /cK !subn1 subn0 mulrC.
- have q0 : (0 < q)%N by apply: leq_ltn_trans pq.
  rewrite /mu_hi /ratio !binzE //.
  by rewrite /cK subn2 /= !subn1 subn0 mulrC.
Qed.

Lemma comparator_lform p : comparator K mx p = lform x (fun _ => 0) gamma beta p.
Proof.
rewrite comparatorE (eq_bigr _ (fun S _ => E S)).
have [K1 | K2] : K = 1%N \/ (1 < K)%N.
  by move: K_gt0; rewrite leq_eqVlt => /orP[/eqP <-|]; [left|right].
  rewrite K1 /= sum_fmax0 mul0r /lform /gamma /beta /ratio /binz K1 mul0r add0r.
  by rewrite !big1 ?addr0 // => q _; rewrite ?ltnn ?andbF /= !mul0r.
rewrite (sum_fmax_others_lform x p); last by rewrite -subn1 subn_gt0.
rewrite mulrC lform_scale; apply: lform_ext => [|q qp|q pq].
- by rewrite mulr0.
- by rewrite /gamma /ratio !binzE // /cK !subn1 -subn2 mulrC.
- have q0 : (0 < q)%N by apply: leq_ltn_trans pq.
  rewrite /beta /ratio !binzE //.
  by rewrite /cK !subn2 /= !subn1 mulrC.
Qed.

(* The linear forms of spec.maxk_weights.FORMS, as data: (own, below, above), each a list of
   (coefficient, weight) pairs. tests/core/proofs/test_coq.py parses these definitions and checks them against
   FORMS and WEIGHTS, so the theorems below are about the very forms fast/ evaluates. *)
Definition one : R := 1.
Definition neg_one : R := -1.
Definition k_over_n : R := K%:R / n%:R.
Definition minus_k_over_n_minus_1 : R := - (K%:R / n.-1%:R).

Definition combo := seq (R * (nat -> R)).
Definition ecombo (c : combo) (j : nat) : R := \sum_(w <- c) w.1 * w.2 j.
Definition form := (combo * combo * combo)%type.
Definition lformF (F : form) (p : 'I_n) : R :=
  lform x (ecombo F.1.1) (ecombo F.1.2) (ecombo F.2) p.

Definition form_ei : form := ([:: (one, alpha)], [:: (neg_one, gamma)], [::]).
Definition form_b : form :=
  ([::], [:: (one, mu_lo); (neg_one, gamma)], [:: (one, mu_hi); (neg_one, beta)]).
Definition form_delta : form :=
  ([:: (one, alpha)], [:: (neg_one, mu_lo)], [:: (one, beta); (neg_one, mu_hi)]).
Definition form_m_plus : form := ([:: (one, alpha)], [::], [:: (one, beta)]).
Definition form_sloo : form :=
  ([:: (k_over_n, alpha)], [:: (minus_k_over_n_minus_1, mu_lo)],
   [:: (k_over_n, beta); (minus_k_over_n_minus_1, mu_hi)]).
Definition form_ei_minus_b : form :=
  ([:: (one, alpha)], [:: (neg_one, gamma); (neg_one, mu_lo); (one, gamma)],
   [:: (neg_one, mu_hi); (one, beta)]).
Definition form_bagirov : form := ([:: (one, m_hat_w)], [::], [:: (one, bagirov_above)]).

Ltac pointwise := apply: lform_ext => [|q qp|q pq];
  rewrite /ecombo /= ?big_cons ?big_nil /one /neg_one /k_over_n /minus_k_over_n_minus_1 /=;
  ring.

Theorem m_plus_sorted p : m_plus K mx p = lformF form_m_plus p.
Proof. rewrite m_plus_lform; pointwise. Qed.

Theorem ei_sorted p : ei K mx p = lformF form_ei p.
Proof. rewrite ei_blocks m_plus_lform comparator_lform lform_sub; pointwise. Qed.

Theorem pkpo_s_sorted p : pkpo_s K mx p = lformF form_bagirov p.
Proof.
rewrite pkpo_s_m_plus // m_plus_lform lform_scale.
have bc : 'C(n.-1, K.-1)%:R = K%:R * 'C(n, K)%:R / n%:R :> R by rewrite bin_containing.
apply: lform_ext => [|q qp|q pq]; rewrite /ecombo /= ?big_cons ?big_nil /one /=.
- by rewrite /alpha /m_hat_w /ratio !binzE // !subn1 !subn0 bc; field; nonzero.
- by rewrite mulr0.
- by rewrite /beta /bagirov_above /ratio [binz n 1 K 1]binzE // [binz n 0 K 0]binzE //
    !subn1 !subn0 bc; field; nonzero.
Qed.

Hypothesis K_lt_n : (K < n)%N.

Theorem canonical_sorted p : canonical K mx p = lformF form_delta p.
Proof. rewrite /canonical m_plus_lform m_minus_lform lform_sub; pointwise. Qed.

Theorem l2o_baseline_sorted p : l2o_baseline K mx p = lformF form_b p.
Proof.
have h : maxpo K mx p = canonical K mx p by rewrite maxpo_equals_canonical.
move: h; rewrite /maxpo /canonical => h.
have -> : l2o_baseline K mx p = ei K mx p - (m_plus K mx p - m_minus K mx p).
  by rewrite -h; ring.
rewrite ei_blocks m_plus_lform m_minus_lform comparator_lform !lform_sub; pointwise.
Qed.

Theorem maxpo_sorted p : maxpo K mx p = lformF form_ei_minus_b p.
Proof.
rewrite maxpo_equals_canonical // /canonical.
rewrite m_plus_lform m_minus_lform lform_sub; pointwise.
Qed.

Theorem pkpo_sloo_sorted p : pkpo_sloo K mx p = lformF form_sloo p.
Proof.
rewrite pkpo_sloo_closed_form // m_plus_lform m_minus_lform.
rewrite !lform_scale lform_sub; apply: lform_ext => [|q qp|q pq];
  rewrite /ecombo /= ?big_cons ?big_nil /k_over_n /minus_k_over_n_minus_1 /=;
  set a := K%:R / n%:R; set b := K%:R / n.-1%:R; ring.
Qed.

End Forms.
