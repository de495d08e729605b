(* Symmetries of the max@K family for every N (spec/maxk.md P1, P3, I14).

   Counting.v's estimators are functions of a set function f (the max of the rewards over a
   subset). Relabelling the samples by a permutation s, adding a constant c to every reward, or
   swapping two tied samples changes f in a known way; the estimators follow:

   * permutation equivariance (P1): if y_i = x_{s(i)}, every estimator on y at i is the estimator
     on x at s(i);
   * ties (P3): if x_i = x_j, every estimator gives i and j the same value;
   * shift rules (I14): if y_i = x_i + c, each estimator moves by c times the catalogue's
     shift(N, K) (oracle/reports/catalogue.py): 1 for EI and b at K = 1 (else 0), K/N for PKPO's s,
     −K/(N(N−1)) for sloo, K/N for sloo−1 at K = 1 (else 0), 0 for Δ, EI − b, Bagirov centred and
     ei_l1o.

   The generic lemmas hold for any numeric field and any set functions related as stated; the
   theorems at the end take f to be a max of the rewards (Sorted.is_max, max ∅ = 0) on any
   ordered field, for every N and every K (K ≤ N or K < N as each estimator's domain says).
   No sortedness is assumed. *)
From mathcomp Require Import all_ssreflect all_algebra fingroup perm.
From mathcomp Require Import ring zify.
From Advest Require Import Counting Sorted.
Set Implicit Arguments.
Unset Strict Implicit.
Unset Printing Implicit Defensive.
Import GRing.Theory Num.Theory.
Local Open Scope ring_scope.

Lemma subsets_neq0 n (A : {set 'I_n}) m :
  (m <= #|A|)%N -> subsets A m != set0.
Proof. by move=> mA; rewrite -card_gt0 card_subsets bin_gt0. Qed.

Lemma avg_ext (R : numFieldType) n (F : {set {set 'I_n}}) (g h : {set 'I_n} -> R) :
  (forall S, S \in F -> g S = h S) -> avg F g = avg F h.
Proof. by move=> gh; rewrite /avg (eq_bigr _ gh). Qed.

Lemma avg_shift (R : numFieldType) n (F : {set {set 'I_n}}) (g h : {set 'I_n} -> R) c :
  F != set0 -> (forall S, S \in F -> g S = h S + c) -> avg F g = avg F h + c.
Proof.
move=> F0 gh; rewrite /avg (eq_bigr _ gh) big_split sumr_const /= -mulr_natr.
by field; rewrite natr_neq0 // card_gt0.
Qed.

Section Relabel.
Variable R : numFieldType.
Variables (n K : nat) (s : {perm 'I_n}) (f g : {set 'I_n} -> R).
(* g is f on the samples relabelled by s: the max of y = x ∘ s over S is the max of x over s(S). *)
Hypothesis gE : forall S, g S = f (s @: S).
Implicit Types (A B S T : {set 'I_n}) (i j : 'I_n).

Lemma mem_perm A j : (j \in s @: A) = ((s^-1)%g j \in A).
Proof. by rewrite -{1}(permKV s j) mem_imset //; exact: perm_inj. Qed.

Lemma card_perm A : #|s @: A| = #|A|.
Proof. by rewrite card_imset //; exact: perm_inj. Qed.

Lemma others_perm i : s @: others i = others (s i).
Proof. by apply/setP => j; rewrite mem_perm !inE -(inj_eq (@perm_inj _ s)) permKV. Qed.

Lemma setT_perm : s @: setT = setT :> {set 'I_n}.
Proof. by apply/setP => j; rewrite mem_perm !inE. Qed.

Lemma setD1_perm A j : s @: (A :\ j) = s @: A :\ s j.
Proof.
apply/setP => k; rewrite mem_perm [in RHS]inE mem_perm !inE.
by rewrite -(inj_eq (@perm_inj _ s)) permKV.
Qed.

Lemma subset_perm A B : (s @: A \subset s @: B) = (A \subset B).
Proof.
apply/idP/idP => [/subsetP AB | ]; last exact: imsetS.
by apply/subsetP => k kA; have := AB _ (imset_f s kA); rewrite mem_imset //; exact: perm_inj.
Qed.

Lemma sum_subsets_perm A m (P : pred {set 'I_n}) (h : {set 'I_n} -> R) :
  \sum_(S in subsets A m | P (s @: S)) h (s @: S) = \sum_(S in subsets (s @: A) m | P S) h S.
Proof.
rewrite [RHS](reindex_inj (imset_inj (@perm_inj _ s))) /=; apply: eq_bigl => S.
by rewrite !in_subsets subset_perm card_perm.
Qed.

Lemma avg_perm A m (h k : {set 'I_n} -> R) : (forall S, h S = k (s @: S)) ->
  avg (subsets A m) h = avg (subsets (s @: A) m) k.
Proof.
move=> hk; rewrite /avg !card_subsets card_perm; congr (_ / _).
rewrite [RHS](reindex_inj (@imset_inj _ _ s (@perm_inj _ s))) /=.
by apply: eq_big => [S | S _]; rewrite ?in_subsets ?subset_perm ?card_perm ?hk.
Qed.

Lemma sum_others_perm i (F : 'I_n -> R) :
  \sum_(j in others i) F (s j) = \sum_(j in others (s i)) F j.
Proof. by rewrite -others_perm big_imset //; move=> a b _ _; exact: perm_inj. Qed.

Lemma mean_perm (F : 'I_n -> R) : mean (fun i => F (s i)) = mean F.
Proof. by rewrite /mean [in RHS](reindex_inj (@perm_inj _ s)). Qed.

Lemma m_plus_perm i : m_plus K g i = m_plus K f (s i).
Proof. by rewrite /m_plus (@avg_perm _ _ _ (fun T => f (s i |: T))) ?others_perm // => S; rewrite gE imsetU1. Qed.

Lemma m_minus_perm i : m_minus K g i = m_minus K f (s i).
Proof. by rewrite /m_minus (@avg_perm _ _ _ (f)) ?others_perm. Qed.

Lemma comparator_perm i : comparator K g i = comparator K f (s i).
Proof. by rewrite /comparator (@avg_perm _ _ _ (f)) ?others_perm. Qed.

Lemma m_hat_perm : m_hat K g = m_hat K f.
Proof. by rewrite /m_hat (@avg_perm _ _ _ (f)) ?setT_perm. Qed.

Lemma ei_on_perm j A : ei_on K g j A = ei_on K f (s j) (s @: A).
Proof.
rewrite /ei_on (@avg_perm _ _ _ (fun T => f (s j |: T) - f T)) // => S.
by rewrite !gE imsetU1.
Qed.

Lemma ei_perm i : ei K g i = ei K f (s i).
Proof. by rewrite /ei ei_on_perm others_perm. Qed.

Lemma l2o_baseline_perm i : l2o_baseline K g i = l2o_baseline K f (s i).
Proof.
rewrite /l2o_baseline !card_others; congr (_ / _).
rewrite (eq_bigr (fun j => ei_on K f (s j) (others (s i) :\ s j))); last first.
  by move=> j _; rewrite ei_on_perm setD1_perm others_perm.
exact: (sum_others_perm i (fun j => ei_on K f j (others (s i) :\ j))).
Qed.

Lemma maxpo_perm i : maxpo K g i = maxpo K f (s i).
Proof. by rewrite /maxpo ei_perm l2o_baseline_perm. Qed.

Lemma canonical_perm i : canonical K g i = canonical K f (s i).
Proof. by rewrite /canonical m_plus_perm m_minus_perm. Qed.

Lemma pkpo_S_perm j A : pkpo_S K g j A = pkpo_S K f (s j) (s @: A).
Proof.
rewrite /pkpo_S card_perm; congr (_ / _).
rewrite -(sum_subsets_perm A K (fun T => s j \in T)).
by apply: eq_big => [S | S _]; rewrite ?mem_imset ?gE //; exact: perm_inj.
Qed.

Lemma pkpo_s_perm i : pkpo_s K g i = pkpo_s K f (s i).
Proof. by rewrite /pkpo_s pkpo_S_perm setT_perm. Qed.

Lemma pkpo_sloo_perm i : pkpo_sloo K g i = pkpo_sloo K f (s i).
Proof.
rewrite /pkpo_sloo pkpo_s_perm !card_others; congr (_ - _ / _).
rewrite (eq_bigr (fun j => pkpo_S K f (s j) (others (s i)))); last first.
  by move=> j _; rewrite pkpo_S_perm others_perm.
exact: (sum_others_perm i (fun j => pkpo_S K f j (others (s i)))).
Qed.

Lemma pkpo_sloo_minus_one_perm i : pkpo_sloo_minus_one K g i = pkpo_sloo_minus_one K f (s i).
Proof.
rewrite /pkpo_sloo_minus_one; congr (_ / _).
rewrite -[in RHS]setT_perm.
rewrite -(sum_subsets_perm _ K (fun T => s i \in T) (fun T => f T - f (T :\ s i))).
apply: eq_big => [S | S _]; first by rewrite mem_imset //; exact: perm_inj.
by rewrite !gE setD1_perm.
Qed.

Lemma bagirov_centred_perm i :
  pkpo_s K g i - mean (pkpo_s K g) = pkpo_s K f (s i) - mean (pkpo_s K f).
Proof.
rewrite pkpo_s_perm -(mean_perm (pkpo_s K f)); congr (_ - _ / _).
by apply: eq_bigr => j _; rewrite pkpo_s_perm.
Qed.

Lemma ei_l1o_perm i : ei_l1o K g i = ei_l1o K f (s i).
Proof.
rewrite /ei_l1o ei_perm !card_others; congr (_ - _ / _).
rewrite (eq_bigr (fun j => ei K f (s j))); last by move=> j _; rewrite ei_perm.
exact: sum_others_perm.
Qed.
End Relabel.

Section Shift.
Variable R : numFieldType.
Variables (n K : nat) (c : R) (f g : {set 'I_n} -> R).
(* g is f after adding c to every reward: the max over a nonempty set moves by c, max ∅ = 0 stays. *)
Hypothesis gE : forall S, g S = f S + (S != set0)%:R * c.
Hypothesis K_gt0 : (0 < K)%N.
Hypothesis K_le_n : (K <= n)%N.
Implicit Types (S : {set 'I_n}) (i j : 'I_n).

Lemma m_plus_shift i : m_plus K g i = m_plus K f i + c.
Proof.
rewrite /m_plus; apply: avg_shift => [|S _]; first by apply: subsets_neq0; rewrite card_others; lia.
rewrite gE; have -> : (i |: S != set0) by apply/set0Pn; exists i; rewrite setU11.
by rewrite mul1r.
Qed.

Lemma comparator_shift i : comparator K g i = comparator K f i + (1 < K)%N%:R * c.
Proof.
rewrite /comparator; apply: avg_shift => [|S]; first by apply: subsets_neq0; rewrite card_others; lia.
rewrite in_subsets => /andP[_ /eqP cS]; rewrite gE -card_gt0 cS.
by case: (K).
Qed.

Lemma ei_shift i : ei K g i = ei K f i + (K == 1)%N%:R * c.
Proof.
rewrite !ei_blocks m_plus_shift comparator_shift.
have -> : (K == 1)%N%:R = 1 - (1 < K)%N%:R :> R.
  by case: (K) K_gt0 => [|[|k]] _ //=; rewrite ?subr0 ?subrr.
ring.
Qed.

Lemma pkpo_s_shift i : pkpo_s K g i = pkpo_s K f i + K%:R / n%:R * c.
Proof. by rewrite !pkpo_s_m_plus // m_plus_shift mulrDr. Qed.

Lemma pkpo_sloo_minus_one_shift i :
  pkpo_sloo_minus_one K g i = pkpo_sloo_minus_one K f i + (K == 1)%N%:R / n%:R * c.
Proof.
rewrite !pkpo_sloo_minus_one_is_scaled_ei // ei_shift mulrDr; congr (_ + _).
have h : K%:R * (K == 1)%N%:R = (K == 1)%N%:R :> R.
  by case: (K =P 1%N) => [-> | _]; rewrite ?mulr1 ?mulr0.
by rewrite -[in RHS]h; ring.
Qed.

Lemma ei_l1o_shift i : (1 < n)%N -> ei_l1o K g i = ei_l1o K f i.
Proof.
move=> n1; rewrite /ei_l1o ei_shift (eq_bigr _ (fun j _ => ei_shift j)) big_split sumr_const.
rewrite /= card_others -mulr_natr; field; rewrite natr_neq0 //; lia.
Qed.

Hypothesis K_lt_n : (K < n)%N.

Lemma m_minus_shift i : m_minus K g i = m_minus K f i + c.
Proof.
rewrite /m_minus; apply: avg_shift => [|S]; first by apply: subsets_neq0; rewrite card_others; lia.
by rewrite in_subsets => /andP[_ /eqP cS]; rewrite gE -card_gt0 cS K_gt0 mul1r.
Qed.

Lemma canonical_shift i : canonical K g i = canonical K f i.
Proof. by rewrite /canonical m_plus_shift m_minus_shift; ring. Qed.

Lemma maxpo_shift i : maxpo K g i = maxpo K f i.
Proof. by rewrite !maxpo_equals_canonical // canonical_shift. Qed.

Lemma l2o_baseline_shift i : l2o_baseline K g i = l2o_baseline K f i + (K == 1)%N%:R * c.
Proof.
have e h : l2o_baseline K h i = ei K h i - maxpo K h i by rewrite /maxpo; ring.
by rewrite !e ei_shift maxpo_shift; ring.
Qed.

Lemma pkpo_sloo_shift i : pkpo_sloo K g i = pkpo_sloo K f i - K%:R / (n * n.-1)%:R * c.
Proof.
rewrite !pkpo_sloo_closed_form // m_plus_shift m_minus_shift natrM !natr_pred; try lia.
have n0 : n%:R != 0 :> R by rewrite natr_neq0 //; lia.
have n1 : n%:R - 1 != 0 :> R by rewrite -natr_pred ?natr_neq0 //; lia.
by field; rewrite n0 n1.
Qed.

Lemma bagirov_centred_shift i :
  pkpo_s K g i - mean (pkpo_s K g) = pkpo_s K f i - mean (pkpo_s K f).
Proof. by rewrite !bagirov_centred_is_scaled_canonical // canonical_shift. Qed.
End Shift.

(* The max of the rewards (Sorted.is_max: max ∅ = 0, else an upper bound that one of the values
   attains) is unique, follows a relabelling of the samples and moves with a shift. *)
Section Max.
Variable R : realFieldType.
Variable n : nat.
Implicit Types (x y : nat -> R) (mx my : {set 'I_n} -> R) (S : {set 'I_n}).

Lemma is_max_unique x mx my : is_max x mx -> is_max x my -> forall S, my S = mx S.
Proof.
case=> m0 mS [m0' mS'] S; case: (eqVneq S set0) => [-> | S0]; first by rewrite m0 m0'.
have [ub [i iS ei]] := mS S S0; have [ub' [j jS ej]] := mS' S S0.
by apply: Order.POrderTheory.le_anti; rewrite ej ub //= -ej ei ub'.
Qed.

Lemma is_max_perm x y (s : {perm 'I_n}) mx my : (forall i : 'I_n, y i = x (s i)) ->
  is_max x mx -> is_max y my -> forall S, my S = mx (s @: S).
Proof.
move=> yx [m0 mS] ymy; apply: (@is_max_unique y (fun S => mx (s @: S)) my _ ymy).
split=> [|S S0]; first by rewrite imset0.
have sS0 : s @: S != set0 by rewrite -card_gt0 card_perm card_gt0.
have [ub [j jS ej]] := mS _ sS0.
split=> [i iS | ]; first by rewrite yx ub // imset_f.
by case/imsetP: jS => i iS ji; exists i; rewrite // yx -ji.
Qed.

Lemma is_max_shift x y c mx my : (forall i : 'I_n, y i = x i + c) ->
  is_max x mx -> is_max y my -> forall S, my S = mx S + (S != set0)%:R * c.
Proof.
move=> yx [m0 mS] ymy; apply: (@is_max_unique y (fun S => mx S + (S != set0)%:R * c) my _ ymy).
split=> [|S S0]; first by rewrite m0 eqxx mul0r addr0.
rewrite S0 mul1r; have [ub [j jS ej]] := mS _ S0.
split=> [i iS|]; first by rewrite yx ler_add2r ub.
by exists j; rewrite // yx ej.
Qed.

(* P1: relabelling the samples by any permutation s relabels every estimator's outputs. *)
Theorem permutation_equivariance x y (s : {perm 'I_n}) mx my K i :
  is_max x mx -> is_max y my -> (forall j : 'I_n, y j = x (s j)) ->
  [/\ ei K my i = ei K mx (s i), l2o_baseline K my i = l2o_baseline K mx (s i),
      maxpo K my i = maxpo K mx (s i), canonical K my i = canonical K mx (s i)
    & ei_l1o K my i = ei_l1o K mx (s i)] /\
  [/\ pkpo_s K my i = pkpo_s K mx (s i), pkpo_sloo K my i = pkpo_sloo K mx (s i),
      pkpo_sloo_minus_one K my i = pkpo_sloo_minus_one K mx (s i)
    & pkpo_s K my i - mean (pkpo_s K my) = pkpo_s K mx (s i) - mean (pkpo_s K mx)].
Proof.
move=> xmx ymy yx; have gE := is_max_perm yx xmx ymy.
split; split.
- exact: (ei_perm K gE).
- exact: (l2o_baseline_perm K gE).
- exact: (maxpo_perm K gE).
- exact: (canonical_perm K gE).
- exact: (ei_l1o_perm K gE).
- exact: (pkpo_s_perm K gE).
- exact: (pkpo_sloo_perm K gE).
- exact: (pkpo_sloo_minus_one_perm K gE).
- exact: (bagirov_centred_perm K gE).
Qed.

(* P3: two samples with equal rewards get equal outputs from every estimator. *)
Theorem ties_get_equal_outputs x mx K (i j : 'I_n) :
  is_max x mx -> x i = x j ->
  [/\ ei K mx i = ei K mx j, l2o_baseline K mx i = l2o_baseline K mx j,
      maxpo K mx i = maxpo K mx j, canonical K mx i = canonical K mx j
    & ei_l1o K mx i = ei_l1o K mx j] /\
  [/\ pkpo_s K mx i = pkpo_s K mx j, pkpo_sloo K mx i = pkpo_sloo K mx j,
      pkpo_sloo_minus_one K mx i = pkpo_sloo_minus_one K mx j
    & pkpo_s K mx i - mean (pkpo_s K mx) = pkpo_s K mx j - mean (pkpo_s K mx)].
Proof.
move=> xmx xij; have xs : forall k : 'I_n, x k = x (tperm i j k).
  by move=> k; case: tpermP => [-> | -> |].
have := permutation_equivariance K i xmx xmx xs; rewrite tpermL.
by case=> -[? ? ? ? ?] [? ? ? ?]; split; split.
Qed.

(* I14: adding c to every reward moves each estimator by c · shift(N, K) (oracle/reports/catalogue.py);
   tang_passk is ei at K = N. *)
Theorem shift_rules x y c mx my K i :
  (0 < K)%N -> (K <= n)%N -> is_max x mx -> is_max y my -> (forall j : 'I_n, y j = x j + c) ->
  [/\ ei K my i = ei K mx i + (K == 1)%N%:R * c,
      pkpo_s K my i = pkpo_s K mx i + K%:R / n%:R * c,
      pkpo_sloo_minus_one K my i = pkpo_sloo_minus_one K mx i + (K == 1)%N%:R / n%:R * c
    & (1 < n)%N -> ei_l1o K my i = ei_l1o K mx i] /\
  ((K < n)%N ->
  [/\ l2o_baseline K my i = l2o_baseline K mx i + (K == 1)%N%:R * c,
      maxpo K my i = maxpo K mx i, canonical K my i = canonical K mx i,
      pkpo_sloo K my i = pkpo_sloo K mx i - K%:R / (n * n.-1)%:R * c
    & pkpo_s K my i - mean (pkpo_s K my) = pkpo_s K mx i - mean (pkpo_s K mx)]).
Proof.
move=> K0 Kn xmx ymy yx; have gE := is_max_shift yx xmx ymy.
split; [split | move=> Kn'; split].
- by apply: (ei_shift gE).
- by apply: (pkpo_s_shift gE).
- by apply: (pkpo_sloo_minus_one_shift gE).
- by apply: (ei_l1o_shift gE).
- by apply: (l2o_baseline_shift gE).
- by apply: (maxpo_shift gE).
- by apply: (canonical_shift gE).
- by apply: (pkpo_sloo_shift gE).
- by apply: (bagirov_centred_shift gE).
Qed.
End Max.
