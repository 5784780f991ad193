(** * RulesTopk: top-k routing masks and blocks (docs/rules.md, "lifting"; MoE routing; issue 17).

    lift-shard-topk: [TOPK_MASK(SHARD(x, d, a), e, k) = SHARD(TOPK_MASK(x, e, k), d, a)], [d <> e]
    and [x] does not vary over [a] (the rule's guard, tested; the lemma does not need the
    second: both sides read the block on the same rank): top-k along [e] acts on each position
    of the other dims alone, and both sides compare the same entries along [e] (the same spec
    of [e], so the same local size).
    lift-perm-topk: [TOPK_MASK(PERMUTE(x, d, o), e, k) = PERMUTE(TOPK_MASK(x, e, k), d, o)],
    [d <> e], [o] a block order (the rule's guard): the same, with the permuted position of [d]
    for the rank's block.
    lift-shard-topk-elig, lift-perm-topk-elig: the same with an eligibility mask, a block (a
    permutation) of the same spec along [d] as the scores ([d <> e]; for the blocks, neither
    varies over [a], tested; the lemma does not need it). *)

From Coq Require Import Reals Lra Lia List QArith ZArith PArith NArith Bool Permutation.
From Coq Require Import FSets.FMapPositive FunctionalExtensionality.
From Shardproof Require Import Base Num Pow Term Props RuleLib Congr Rel Shard RulesBasic RulesLift
  RulesAxis RulesEinsum RulesLiftEinsum RulesLiftReindex RulesCollect RulesReorder RulesGather RulesPerm
  RulesPermLift.
Import ListNotations.
Open Scope R_scope.

Lemma count_ext : forall n p q, (forall j, (j < n)%nat -> p j = q j) -> count n p = count n q.
Proof.
  induction n; intros p q H; simpl; auto.
  rewrite (IHn p q) by (intros; apply H; lia). rewrite (H n) by lia. auto.
Qed.

(** Top-k without an eligibility mask reads its operand only along [e]. *)
Lemma topk_reindex : forall L k e (f1 f2 : V) rho i1 i2, i1 e = i2 e ->
  (forall j, f1 rho (upd i1 e j) = f2 rho (upd i2 e j)) ->
  topk L k e f1 None rho i1 = topk L k e f2 None rho i2.
Proof.
  intros L k e f1 f2 rho i1 i2 E H. unfold topk. cbv beta.
  erewrite count_ext; [reflexivity|]. intros j _. cbv beta. rewrite !H, E. reflexivity.
Qed.

(** With an eligibility mask: it is read along [e] only, as the scores. *)
Lemma topk_reindex_el : forall L k e (f1 f2 w1 w2 : V) rho i1 i2, i1 e = i2 e ->
  (forall j, f1 rho (upd i1 e j) = f2 rho (upd i2 e j)) ->
  (forall j, w1 rho (upd i1 e j) = w2 rho (upd i2 e j)) ->
  topk L k e f1 (Some w1) rho i1 = topk L k e f2 (Some w2) rho i2.
Proof.
  intros L k e f1 f2 w1 w2 rho i1 i2 E H Hw. unfold topk. cbv beta zeta.
  rewrite (Hw (i1 e)), E.
  erewrite count_ext; [reflexivity|]. intros j _. cbv beta. rewrite !H, !Hw. reflexivity.
Qed.

Definition chk_lift_shard_topk (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l, node_at T r with
  | Node (OTopk e k) [s] D, Node (OShard d a) [y] Dr =>
      match node_at T y with
      | Node (OTopk e' k') [x] Dy =>
          if Pos.eqb e e' && N.eqb k k' && negb (Pos.eqb d e) && is_shard T s d a x &&
             is_shard T r d a y && invariant G x a && dims_eqvb D Dr && has_name Dy e &&
             spec_opt_eqb (spec_of D e) (spec_of Dy e) &&
             spec_opt_eqb (spec_of D d) (spec_of (ndims (node_at T s)) d) &&
             incl_names (ndims (node_at T x)) Dy
          then Some [] else None
      | _ => None
      end
  | _, _ => None
  end.

Lemma chk_lift_shard_topk_sound : rule_sound chk_lift_shard_topk.
Proof.
  intros G l r h cl H c M _. destruct M as [W [VC [SZ [F [DO P]]]]].
  unfold chk_lift_shard_topk in H. set (T := gT G) in *.
  destruct (node_at T l) as [ol ss D] eqn:El. destruct ol; try discriminate.
  destruct ss as [|s [|]]; try discriminate.
  destruct (node_at T r) as [or ys Dr] eqn:Er. destruct or; try discriminate.
  destruct ys as [|y [|]]; try discriminate.
  destruct (node_at T y) as [oy xs Dy] eqn:Ey. destruct oy; try discriminate.
  destruct xs as [|x [|]]; try discriminate. rename e0 into e', k0 into k'.
  match type of H with (if ?b then _ else _) = _ => destruct b eqn:B; try discriminate end.
  apply andb_prop in B as [B IX]. apply andb_prop in B as [B SPd].
  apply andb_prop in B as [B SPe]. apply andb_prop in B as [B HE].
  apply andb_prop in B as [B DE]. apply andb_prop in B as [B _].
  apply andb_prop in B as [B SR]. apply andb_prop in B as [B SS].
  apply andb_prop in B as [B NE]. apply andb_prop in B as [E1 K1].
  apply Pos.eqb_eq in E1. apply N.eqb_eq in K1. subst e' k'.
  apply Bool.negb_true_iff, Pos.eqb_neq in NE.
  apply spec_opt_eqb_eq in SPd, SPe. apply has_name_In in HE.
  destruct (dims_eqvb_perm _ _ DE) as [PD ND].
  destruct (is_shard_info T r d a y SR) as [_ [Hyd [PR [NDr NDy]]]].
  rewrite Er in PR, NDr; cbn [ndims] in PR, NDr. rewrite Ey in PR, Hyd, NDy; cbn [ndims] in PR, Hyd, NDy.
  apply (eqv_by_core c T l r _ _ D _ _ Dr W El Er DE).
  intros rho R i Mi Ri. cbn [core map]. unfold vat; simpl nth.
  assert (DinR : In d (map fst Dr)).
  { apply (Permutation_in _ (Permutation_map fst (Permutation_sym PR))).
    rewrite map_fst_shard_dims. apply has_name_In; auto. }
  assert (DinD : In d (map fst D))
    by (apply (Permutation_in _ (Permutation_map fst (Permutation_sym PD))); auto).
  assert (Lr : lsize_of (sz c) Dr d = lsize_of (sz c) D d) by (symmetry; apply lsize_of_perm; auto).
  assert (Ls : lsize_of (sz c) (ndims (node_at T s)) d = lsize_of (sz c) D d)
    by (symmetry; apply spec_lsize; auto).
  assert (Id : (i d < lsize_of (sz c) D d)%nat) by (apply lt_lsize; auto).
  assert (Mr : msk (sz c) (ndims (node_at T r)) i = true)
    by (rewrite Er; cbn [ndims]; rewrite <- (msk_perm _ _ _ i PD); auto).
  pose proof (shard_range c T SZ r d a y rho i SR R Mr) as My.
  rewrite Er, Ey in My; cbn [ndims] in My. unfold upd_shard in My.
  set (i' := upd i d (rho a * lsize_of (sz c) Dr d + i d)) in *.
  rewrite (den_in c T y _ _ _ rho _ W Ey My). cbn [core map]. unfold vat; simpl nth.
  rewrite (spec_lsize _ D Dy e SPe).
  apply topk_reindex.
  - rewrite restrict_in by auto. unfold i'. rewrite upd_other; congruence.
  - intros j.
    rewrite (shard_read_lt c T W s d a x rho _ SS) by (rewrite upd_other by congruence; rewrite Ls; auto).
    unfold upd_shard. rewrite Ls, (upd_other i e) by congruence.
    apply den_agree; auto. intros n In_.
    assert (InY : In n (map fst Dy)).
    { unfold incl_names in IX. rewrite forallb_forall in IX.
      apply in_map_iff in In_ as [dd [<- I]]. apply has_name_In, IX; auto. }
    destruct (Pos.eqb_spec n e) as [->|Ne].
    { rewrite (upd_other _ d) by congruence. rewrite !upd_same. auto. }
    rewrite (upd_other _ e) by auto. rewrite restrict_in by auto.
    destruct (Pos.eqb_spec n d) as [->|Nd].
    { rewrite upd_same. unfold i'. rewrite upd_same, Lr. auto. }
    rewrite !upd_other by auto. unfold i'. rewrite upd_other; auto.
Qed.

(** ** lift-perm-topk *)
Definition chk_lift_perm_topk (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l, node_at T r with
  | Node (OTopk e k) [s] D, Node (OPermute d o) [y] Dr =>
      match node_at T y with
      | Node (OTopk e' k') [x] Dy =>
          if Pos.eqb e e' && N.eqb k k' && negb (Pos.eqb d e) && order_b o && is_perm T s d o x &&
             dims_eqvb D Dr && dims_eqvb Dy Dr && has_name Dr d && has_name Dy e &&
             spec_opt_eqb (spec_of D e) (spec_of Dy e) &&
             spec_opt_eqb (spec_of D d) (spec_of (ndims (node_at T s)) d) &&
             incl_names (ndims (node_at T x)) Dy
          then Some [] else None
      | _ => None
      end
  | _, _ => None
  end.

Lemma chk_lift_perm_topk_sound : rule_sound chk_lift_perm_topk.
Proof.
  intros G l r h cl H c M _. destruct M as [W [VC [SZ [F [DO P]]]]].
  unfold chk_lift_perm_topk in H. set (T := gT G) in *.
  destruct (node_at T l) as [ol ss D] eqn:El. destruct ol; try discriminate.
  destruct ss as [|s [|]]; try discriminate.
  destruct (node_at T r) as [or ys Dr] eqn:Er. destruct or; try discriminate.
  destruct ys as [|y [|]]; try discriminate.
  destruct (node_at T y) as [oy xs Dy] eqn:Ey. destruct oy; try discriminate.
  destruct xs as [|x [|]]; try discriminate. rename e0 into e', k0 into k'.
  match type of H with (if ?b then _ else _) = _ => destruct b eqn:B; try discriminate end.
  apply andb_prop in B as [B IX]. apply andb_prop in B as [B SPd].
  apply andb_prop in B as [B SPe]. apply andb_prop in B as [B HE].
  apply andb_prop in B as [B HDr]. apply andb_prop in B as [B DY].
  apply andb_prop in B as [B DE]. apply andb_prop in B as [B SS].
  apply andb_prop in B as [B OB]. apply andb_prop in B as [B NE].
  apply andb_prop in B as [E1 K1].
  apply Pos.eqb_eq in E1. apply N.eqb_eq in K1. subst e' k'.
  apply Bool.negb_true_iff, Pos.eqb_neq in NE.
  apply spec_opt_eqb_eq in SPd, SPe. apply has_name_In in HE, HDr.
  assert (OR : ord_lt o = true)
    by (unfold order_b in OB; apply andb_prop in OB as [OB' _]; apply andb_prop in OB' as [_ OR']; exact OR').
  destruct (dims_eqvb_perm _ _ DE) as [PD ND]. destruct (dims_eqvb_perm _ _ DY) as [PY NDY].
  apply (eqv_by_core c T l r _ _ D _ _ Dr W El Er DE).
  intros rho R i Mi Ri. cbn [core map]. unfold vat; simpl nth.
  assert (Mr : msk (sz c) Dr i = true) by (rewrite <- (msk_perm _ _ _ i PD); auto).
  set (j := upd i d (pidx o (lsize_of (sz c) Dr d / length o) (i d))).
  assert (Mj : msk (sz c) Dy j = true) by (apply (perm_msk c T r d o y Dr Dy i SZ Er OR PY NDY HDr Mr)).
  transitivity (den c T y rho j); [|reflexivity].
  rewrite (den_in c T y _ _ _ rho _ W Ey Mj). cbn [core map]. unfold vat; simpl nth.
  rewrite (spec_lsize _ D Dy e SPe).
  assert (DinD : In d (map fst D))
    by (apply (Permutation_in _ (Permutation_map fst (Permutation_sym PD))); auto).
  assert (Ls : lsize_of (sz c) (ndims (node_at T s)) d = lsize_of (sz c) Dr d).
  { rewrite <- (lsize_of_perm _ _ _ _ PD ND). symmetry. apply spec_lsize; auto. }
  assert (Id : (i d < lsize_of (sz c) Dr d)%nat)
    by (rewrite <- (lsize_of_perm _ _ _ _ PD ND); apply lt_lsize; auto).
  apply topk_reindex.
  - rewrite restrict_in by auto. unfold j. rewrite upd_other; congruence.
  - intros jj.
    rewrite (perm_read_lt c T s d o x rho _ W SZ SS OR) by (rewrite upd_other by congruence; rewrite Ls; auto).
    rewrite Ls, (upd_other i e) by congruence.
    apply den_agree; auto. intros n In_.
    assert (InY : In n (map fst Dy)).
    { unfold incl_names in IX. rewrite forallb_forall in IX.
      apply in_map_iff in In_ as [dd [<- I]]. apply has_name_In, IX; auto. }
    destruct (Pos.eqb_spec n e) as [->|Ne].
    { rewrite (upd_other _ d) by congruence. rewrite !upd_same. auto. }
    rewrite (upd_other _ e) by auto. rewrite restrict_in by auto.
    destruct (Pos.eqb_spec n d) as [->|Nd].
    { rewrite upd_same. unfold j. rewrite upd_same. auto. }
    rewrite !upd_other by auto. unfold j. rewrite upd_other; auto.
Qed.

(** ** lift-shard-topk-elig *)
Definition chk_lift_shard_topk_elig (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l, node_at T r with
  | Node (OTopk e k) [s; t] D, Node (OShard d a) [y] Dr =>
      match node_at T y with
      | Node (OTopk e' k') [x; el] Dy =>
          if Pos.eqb e e' && N.eqb k k' && negb (Pos.eqb d e) && is_shard T s d a x &&
             is_shard T t d a el && is_shard T r d a y && invariant G x a && invariant G el a &&
             dims_eqvb D Dr && has_name Dy e && spec_opt_eqb (spec_of D e) (spec_of Dy e) &&
             spec_opt_eqb (spec_of D d) (spec_of (ndims (node_at T s)) d) &&
             spec_opt_eqb (spec_of D d) (spec_of (ndims (node_at T t)) d) &&
             incl_names (ndims (node_at T x)) Dy && incl_names (ndims (node_at T el)) Dy
          then Some [] else None
      | _ => None
      end
  | _, _ => None
  end.

(** A block of [x] read along [e], in the block's range of [d], is [x] read at the rank's
    position of [d] (used for the scores and the eligibility mask alike). *)
Lemma shard_read_along : forall c T s d a x D Dy e rho i i' jj, wf_table T ->
  is_shard T s d a x = true -> d <> e ->
  spec_of D d = spec_of (ndims (node_at T s)) d -> (i d < lsize_of (sz c) D d)%nat ->
  incl_names (ndims (node_at T x)) Dy = true -> In e (map fst Dy) ->
  i' = upd i d (rho a * lsize_of (sz c) D d + i d)%nat ->
  den c T s rho (upd i e jj) = den c T x rho (upd (restrict Dy i') e jj).
Proof.
  intros c T s d a x D Dy e rho i i' jj W SS NE SPd Id IX HE Ei.
  assert (Ls : lsize_of (sz c) (ndims (node_at T s)) d = lsize_of (sz c) D d)
    by (symmetry; apply spec_lsize; auto).
  rewrite (shard_read_lt c T W s d a x rho _ SS) by (rewrite upd_other by congruence; rewrite Ls; auto).
  unfold upd_shard. rewrite Ls, (upd_other i e) by congruence.
  apply den_agree; auto. intros n In_.
  assert (InY : In n (map fst Dy)).
  { unfold incl_names in IX. rewrite forallb_forall in IX.
    apply in_map_iff in In_ as [dd [<- I]]. apply has_name_In, IX; auto. }
  destruct (Pos.eqb_spec n e) as [->|Ne].
  { rewrite (upd_other _ d) by congruence. rewrite !upd_same. auto. }
  rewrite (upd_other _ e) by auto. rewrite restrict_in by auto. subst i'.
  destruct (Pos.eqb_spec n d) as [->|Nd].
  { rewrite !upd_same. auto. }
  rewrite !upd_other by auto. auto.
Qed.

Lemma chk_lift_shard_topk_elig_sound : rule_sound chk_lift_shard_topk_elig.
Proof.
  intros G l r h cl H c M _. destruct M as [W [VC [SZ [F [DO P]]]]].
  unfold chk_lift_shard_topk_elig in H. set (T := gT G) in *.
  destruct (node_at T l) as [ol ss D] eqn:El. destruct ol; try discriminate.
  destruct ss as [|s [|t [|]]]; try discriminate.
  destruct (node_at T r) as [or ys Dr] eqn:Er. destruct or; try discriminate.
  destruct ys as [|y [|]]; try discriminate.
  destruct (node_at T y) as [oy xs Dy] eqn:Ey. destruct oy; try discriminate.
  destruct xs as [|x [|el [|]]]; try discriminate. rename e0 into e', k0 into k'.
  match type of H with (if ?b then _ else _) = _ => destruct b eqn:B; try discriminate end.
  apply andb_prop in B as [B IXe]. apply andb_prop in B as [B IX].
  apply andb_prop in B as [B SPt]. apply andb_prop in B as [B SPd].
  apply andb_prop in B as [B SPe]. apply andb_prop in B as [B HE].
  apply andb_prop in B as [B DE]. apply andb_prop in B as [B _].
  apply andb_prop in B as [B _]. apply andb_prop in B as [B SR].
  apply andb_prop in B as [B ST]. apply andb_prop in B as [B SS].
  apply andb_prop in B as [B NE]. apply andb_prop in B as [E1 K1].
  apply Pos.eqb_eq in E1. apply N.eqb_eq in K1. subst e' k'.
  apply Bool.negb_true_iff, Pos.eqb_neq in NE.
  apply spec_opt_eqb_eq in SPd, SPe, SPt. apply has_name_In in HE.
  destruct (dims_eqvb_perm _ _ DE) as [PD ND].
  destruct (is_shard_info T r d a y SR) as [_ [Hyd [PR [NDr NDy]]]].
  rewrite Er in PR, NDr; cbn [ndims] in PR, NDr. rewrite Ey in PR, Hyd, NDy; cbn [ndims] in PR, Hyd, NDy.
  apply (eqv_by_core c T l r _ _ D _ _ Dr W El Er DE).
  intros rho R i Mi Ri. cbn [core map]. unfold vat; simpl nth.
  assert (DinR : In d (map fst Dr)).
  { apply (Permutation_in _ (Permutation_map fst (Permutation_sym PR))).
    rewrite map_fst_shard_dims. apply has_name_In; auto. }
  assert (DinD : In d (map fst D))
    by (apply (Permutation_in _ (Permutation_map fst (Permutation_sym PD))); auto).
  assert (Lr : lsize_of (sz c) Dr d = lsize_of (sz c) D d) by (symmetry; apply lsize_of_perm; auto).
  assert (Id : (i d < lsize_of (sz c) D d)%nat) by (apply lt_lsize; auto).
  assert (Mr : msk (sz c) (ndims (node_at T r)) i = true)
    by (rewrite Er; cbn [ndims]; rewrite <- (msk_perm _ _ _ i PD); auto).
  pose proof (shard_range c T SZ r d a y rho i SR R Mr) as My.
  rewrite Er, Ey in My; cbn [ndims] in My. unfold upd_shard in My.
  rewrite Lr in My |- *.
  set (i' := upd i d (rho a * lsize_of (sz c) D d + i d)) in *.
  rewrite (den_in c T y _ _ _ rho _ W Ey My). cbn [core map]. unfold vat; simpl nth.
  rewrite (spec_lsize _ D Dy e SPe).
  apply topk_reindex_el.
  - rewrite restrict_in by auto. unfold i'. rewrite upd_other; congruence.
  - intros jj. apply (shard_read_along c T s d a x D Dy e rho i i' jj); auto.
  - intros jj. apply (shard_read_along c T t d a el D Dy e rho i i' jj); auto.
Qed.

(** ** lift-perm-topk-elig *)
Definition chk_lift_perm_topk_elig (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l, node_at T r with
  | Node (OTopk e k) [s; t] D, Node (OPermute d o) [y] Dr =>
      match node_at T y with
      | Node (OTopk e' k') [x; el] Dy =>
          if Pos.eqb e e' && N.eqb k k' && negb (Pos.eqb d e) && order_b o && is_perm T s d o x &&
             is_perm T t d o el && dims_eqvb D Dr && dims_eqvb Dy Dr && has_name Dr d &&
             has_name Dy e && spec_opt_eqb (spec_of D e) (spec_of Dy e) &&
             spec_opt_eqb (spec_of D d) (spec_of (ndims (node_at T s)) d) &&
             spec_opt_eqb (spec_of D d) (spec_of (ndims (node_at T t)) d) &&
             incl_names (ndims (node_at T x)) Dy && incl_names (ndims (node_at T el)) Dy
          then Some [] else None
      | _ => None
      end
  | _, _ => None
  end.

Lemma perm_read_along : forall c T s d o x D Dr Dy e rho i jj, wf_table T -> sizes_ok (sz c) T ->
  is_perm T s d o x = true -> ord_lt o = true -> d <> e -> Permutation D Dr -> NoDup (map fst D) ->
  spec_of D d = spec_of (ndims (node_at T s)) d -> (i d < lsize_of (sz c) Dr d)%nat ->
  incl_names (ndims (node_at T x)) Dy = true -> In e (map fst Dy) -> In d (map fst Dy) ->
  den c T s rho (upd i e jj) =
  den c T x rho (upd (restrict Dy (upd i d (pidx o (lsize_of (sz c) Dr d / length o) (i d)))) e jj).
Proof.
  intros c T s d o x D Dr Dy e rho i jj W SZ SS OR NE PD ND SPd Id IX HE HD.
  assert (Ls : lsize_of (sz c) (ndims (node_at T s)) d = lsize_of (sz c) Dr d).
  { rewrite <- (lsize_of_perm _ _ _ _ PD ND). symmetry. apply spec_lsize; auto. }
  rewrite (perm_read_lt c T s d o x rho _ W SZ SS OR) by (rewrite upd_other by congruence; rewrite Ls; auto).
  rewrite Ls, (upd_other i e) by congruence.
  apply den_agree; auto. intros n In_.
  assert (InY : In n (map fst Dy)).
  { unfold incl_names in IX. rewrite forallb_forall in IX.
    apply in_map_iff in In_ as [dd [<- I]]. apply has_name_In, IX; auto. }
  destruct (Pos.eqb_spec n e) as [->|Ne].
  { rewrite (upd_other _ d) by congruence. rewrite !upd_same. auto. }
  rewrite (upd_other _ e) by auto. rewrite restrict_in by auto.
  destruct (Pos.eqb_spec n d) as [->|Nd].
  { rewrite !upd_same. auto. }
  rewrite !upd_other by auto. auto.
Qed.

Lemma chk_lift_perm_topk_elig_sound : rule_sound chk_lift_perm_topk_elig.
Proof.
  intros G l r h cl H c M _. destruct M as [W [VC [SZ [F [DO P]]]]].
  unfold chk_lift_perm_topk_elig in H. set (T := gT G) in *.
  destruct (node_at T l) as [ol ss D] eqn:El. destruct ol; try discriminate.
  destruct ss as [|s [|t [|]]]; try discriminate.
  destruct (node_at T r) as [or ys Dr] eqn:Er. destruct or; try discriminate.
  destruct ys as [|y [|]]; try discriminate.
  destruct (node_at T y) as [oy xs Dy] eqn:Ey. destruct oy; try discriminate.
  destruct xs as [|x [|el [|]]]; try discriminate. rename e0 into e', k0 into k'.
  match type of H with (if ?b then _ else _) = _ => destruct b eqn:B; try discriminate end.
  apply andb_prop in B as [B IXe]. apply andb_prop in B as [B IX].
  apply andb_prop in B as [B SPt]. apply andb_prop in B as [B SPd].
  apply andb_prop in B as [B SPe]. apply andb_prop in B as [B HE].
  apply andb_prop in B as [B HDr]. apply andb_prop in B as [B DY].
  apply andb_prop in B as [B DE]. apply andb_prop in B as [B ST].
  apply andb_prop in B as [B SS]. apply andb_prop in B as [B OB].
  apply andb_prop in B as [B NE]. apply andb_prop in B as [E1 K1].
  apply Pos.eqb_eq in E1. apply N.eqb_eq in K1. subst e' k'.
  apply Bool.negb_true_iff, Pos.eqb_neq in NE.
  apply spec_opt_eqb_eq in SPd, SPe, SPt. apply has_name_In in HE, HDr.
  assert (OR : ord_lt o = true)
    by (unfold order_b in OB; apply andb_prop in OB as [OB' _]; apply andb_prop in OB' as [_ OR']; exact OR').
  destruct (dims_eqvb_perm _ _ DE) as [PD ND]. destruct (dims_eqvb_perm _ _ DY) as [PY NDY].
  apply (eqv_by_core c T l r _ _ D _ _ Dr W El Er DE).
  intros rho R i Mi Ri. cbn [core map]. unfold vat; simpl nth.
  assert (Mr : msk (sz c) Dr i = true) by (rewrite <- (msk_perm _ _ _ i PD); auto).
  set (j := upd i d (pidx o (lsize_of (sz c) Dr d / length o) (i d))).
  assert (Mj : msk (sz c) Dy j = true) by (apply (perm_msk c T r d o y Dr Dy i SZ Er OR PY NDY HDr Mr)).
  transitivity (den c T y rho j); [|reflexivity].
  rewrite (den_in c T y _ _ _ rho _ W Ey Mj). cbn [core map]. unfold vat; simpl nth.
  rewrite (spec_lsize _ D Dy e SPe).
  assert (DinD : In d (map fst D))
    by (apply (Permutation_in _ (Permutation_map fst (Permutation_sym PD))); auto).
  assert (DinY : In d (map fst Dy))
    by (apply (Permutation_in _ (Permutation_map fst (Permutation_sym PY))); auto).
  assert (Id : (i d < lsize_of (sz c) Dr d)%nat)
    by (rewrite <- (lsize_of_perm _ _ _ _ PD ND); apply lt_lsize; auto).
  apply topk_reindex_el.
  - rewrite restrict_in by auto. unfold j. rewrite upd_other; congruence.
  - intros jj. apply (perm_read_along c T s d o x D Dr Dy e rho i jj); auto.
  - intros jj. apply (perm_read_along c T t d o el D Dr Dy e rho i jj); auto.
Qed.
