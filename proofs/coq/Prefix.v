(* Prefix baselines in an autoregressive model, for every length (spec/hista.md).

   A response is a sequence over a finite alphabet Y, drawn token by token: after a prefix h
   the next token is v with probability p h v (sum_v p h v = 1 for every h). Eseq n h F is the
   exact expectation of F over the n tokens drawn after h (named apart from Unbiased.E). The
   score of token t is a function of the prefix through t, score (rcons h v) (one coordinate of
   grad log p h v), with the one property the proof uses: sum_v p h v * score (rcons h v) = 0 for every prefix h.

   prefix_baseline_adds_no_bias: a baseline b at step t that is a function of the prefix
   h = take t y alone adds no bias, E[b(take t y) * score(take t.+1 y)] = 0, for every length and
   every position t. Other samples drawn independently of this rollout enter b as fixed values
   (b is arbitrary), so the identity holds for each of their values and hence on average.

   later_token_baseline_can_be_biased: a baseline at step 0 that reads token 1 of the same
   rollout is biased in a concrete model (Y = bool, p(true) = 1/2, then p(true | y0) = 3/4 or
   1/4): E[[y1] * s(y0)] = 1/4, not 0. *)
From mathcomp Require Import all_ssreflect all_algebra.
From mathcomp.algebra_tactics Require Import ring.
Set Implicit Arguments.
Unset Strict Implicit.
Unset Printing Implicit Defensive.
Import GRing.Theory Num.Theory.
Local Open Scope ring_scope.

Section Prefix.
Variable R : numFieldType.
Variable Y : finType.
Variable p : seq Y -> Y -> R.
Hypothesis p_sum1 : forall h, \sum_v p h v = 1.

Fixpoint Eseq n (h : seq Y) (F : seq Y -> R) : R :=
  if n is n'.+1 then \sum_v p h v * Eseq n' (rcons h v) F else F h.

Lemma Eseq_constant n h F c : (forall q, F (h ++ q) = c) -> Eseq n h F = c.
Proof.
elim: n h => [|n IH] h Fc /=; first by rewrite -(cats0 h) Fc.
rewrite (eq_bigr (fun v => p h v * c)); first by rewrite -mulr_suml p_sum1 mul1r.
by move=> v _; rewrite IH // => q; rewrite cat_rcons Fc.
Qed.

Variable score : seq Y -> R.
Hypothesis score_mean0 : forall h, \sum_v p h v * score (rcons h v) = 0.

Theorem prefix_baseline_adds_no_bias (b : seq Y -> R) t n h :
  (size h <= t)%N -> (t < size h + n)%N ->
  Eseq n h (fun y => b (take t y) * score (take t.+1 y)) = 0.
Proof.
elim: n h => [|n IH] h le lt /=; first by rewrite addn0 ltnNge le in lt.
case: (ltngtP (size h) t) le => // [hlt|heq] _.
  rewrite big1 // => v _; rewrite IH ?mulr0 // size_rcons //.
  by rewrite addSnnS.
rewrite (eq_bigr (fun v => b h * (p h v * score (rcons h v)))).
  by rewrite -mulr_sumr score_mean0 mulr0.
move=> v _; rewrite (@Eseq_constant _ _ _ (b h * score (rcons h v))); first by rewrite mulrCA.
move=> q; rewrite cat_rcons -heq take_size_cat //.
by rewrite take_cat ltnNge leqnSn /= subSnn /= take0 cats1.
Qed.
End Prefix.

(* The counterexample: two boolean tokens; the first is true with probability 1/2, the second
   repeats the first with probability 3/4. The score of the first token is +1 for true, -1 for
   false (mean 0 under 1/2, 1/2). The baseline [y1 = true], read at step 0, has
   E[[y1] * s(y0)] = 1/2 * 3/4 - 1/2 * 1/4 = 1/4. *)
Section Counterexample.
Variable R : numFieldType.

Definition p2 (h : seq bool) (v : bool) : R :=
  if h is y0 :: _ then (if v == y0 then 3%:R / 4%:R else 4%:R^-1) else 2%:R^-1.
Definition score0 (h : seq bool) : R :=
  if h is y0 :: _ then (if y0 then 1 else -1) else 0.
Definition later (y : seq bool) : R := if y is _ :: true :: _ then 1 else 0.

Theorem later_token_baseline_can_be_biased :
  (forall h, \sum_v p2 h v = 1) /\ \sum_v p2 [::] v * score0 [:: v] = 0 /\
  Eseq p2 2 [::] (fun y => later y * score0 (take 1 y)) = 4%:R^-1 /\ 4%:R^-1 != 0 :> R.
Proof.
have n4 : 4%:R != 0 :> R by rewrite pnatr_eq0.
have n2 : 2%:R != 0 :> R by rewrite pnatr_eq0.
split; first by case=> [|[] h]; rewrite big_bool /=; field.
split; first by rewrite big_bool /=; field.
split; last by rewrite invr_eq0.
by rewrite /= !big_bool /=; field.
Qed.
End Counterexample.
