(** * RulesPermLift: ops that commute with a block permutation of another dim (docs/rules.md,
    "permute"; issue 17). [o] is checked to be a block order ([RulesPerm.order_b]).

    lift-perm-reduce-max: [REDUCE_MAX(PERMUTE(x, d, o), ds) = PERMUTE(REDUCE_MAX(x, ds), d, o)],
    [d] not in [ds]: the maximum over the other dims is taken at each position of [d].
    lift-perm-chunk: [CHUNK(PERMUTE(x, d, o), c, parts, i) = PERMUTE(CHUNK(x, c, parts, i), d, o)],
    [c <> d]: both read [x] at the chunk's position of [c] and the permuted position of [d]. *)

From Coq Require Import Reals Lra Lia List QArith ZArith PArith NArith Bool Permutation.
From Coq Require Import FSets.FMapPositive FunctionalExtensionality.
From Shardproof Require Import Base Num Pow Term Props RuleLib Congr Rel Shard RulesBasic RulesLift
  RulesAxis RulesEinsum RulesScalarOut RulesLiftEinsum RulesLiftReindex RulesCollect RulesSplit
  RulesReorder RulesGather RulesPerm.
Import ListNotations.
Open Scope R_scope.

(** In range, the permuted position along [d] of a node with [d] is in range of a node with
    the same dims. *)
Lemma perm_msk : forall c T r d o y D Dy i, sizes_ok (sz c) T ->
  node_at T r = Node (OPermute d o) [y] D -> ord_lt o = true ->
  Permutation Dy D -> NoDup (map fst Dy) -> In d (map fst D) -> msk (sz c) D i = true ->
  msk (sz c) Dy (upd i d (pidx o (lsize_of (sz c) D d / length o) (i d))) = true.
Proof.
  intros c T r d o y D Dy i SZ Er OR PY NY HD Mi.
  pose proof (node_sizes_at _ _ SZ r) as NS. rewrite Er in NS. unfold node_sizes_okb in NS.
  cbn [nop nargs ndims] in NS. apply andb_prop in NS as [_ NS].
  apply andb_prop in NS as [N0 NM0]. apply Nat.ltb_lt in N0. apply Nat.eqb_eq in NM0.
  assert (XL : (i d < lsize_of (sz c) D d)%nat) by (apply lt_lsize; auto).
  pose proof (pidx_lt o (lsize_of (sz c) D d) (i d) OR N0 NM0 XL) as PL.
  rewrite (msk_perm _ _ _ _ PY).
  apply msk_iff; [apply (Permutation_NoDup (Permutation_map fst PY)); auto|].
  intros nn sh E'. unfold upd. destruct (Pos.eqb_spec nn d) as [->|Nn].
  - assert (Lsh : lsize_of (sz c) D d = lsz (sz c) (sz c d) sh) by (unfold lsize_of; rewrite E'; auto).
    lia.
  - apply (msk_spec _ D i nn sh); auto.
Qed.

(** ** lift-perm-reduce-max *)
Definition chk_lift_perm_reduce_max (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l, node_at T r with
  | Node (OReduceMax ds) [s] Dl, Node (OPermute d o) [y] Dr =>
      match node_at T y with
      | Node (OReduceMax ds') [x] Dy =>
          if names_eqb ds ds' && negb (existsb (Pos.eqb d) ds) && order_b o &&
             is_perm T s d o x && dims_eqvb Dl Dr && dims_eqvb Dy Dr && has_name Dr d &&
             spec_opt_eqb (spec_of Dl d) (spec_of (ndims (node_at T s)) d) &&
             forallb (fun n => existsb (Pos.eqb n) ds || has_name Dy n)
                     (map fst (ndims (node_at T x)))
          then Some [] else None
      | _ => None
      end
  | _, _ => None
  end.

Lemma chk_lift_perm_reduce_max_sound : rule_sound chk_lift_perm_reduce_max.
Proof.
  intros G l r h cl H c M _. destruct M as [W [VC [SZ [F [DO P]]]]].
  unfold chk_lift_perm_reduce_max in H. set (T := gT G) in *.
  destruct (node_at T l) as [ol ss Dl] eqn:El. destruct ol; try discriminate.
  destruct ss as [|s [|]]; try discriminate.
  destruct (node_at T r) as [or ys Dr] eqn:Er. destruct or; try discriminate.
  destruct ys as [|y [|]]; try discriminate.
  destruct (node_at T y) as [oy xs Dy] eqn:Ey. destruct oy; try discriminate.
  destruct xs as [|x [|]]; try discriminate. rename ds0 into ds'.
  match type of H with (if ?b then _ else _) = _ => destruct b eqn:B; try discriminate end.
  apply andb_prop in B as [B NX]. apply andb_prop in B as [B SPd].
  apply andb_prop in B as [B HDr]. apply andb_prop in B as [B DY].
  apply andb_prop in B as [B DE]. apply andb_prop in B as [B SS].
  apply andb_prop in B as [B OB]. apply andb_prop in B as [DD ND'].
  apply (list_eqb_eq _ _ (fun a b => proj1 (Pos.eqb_eq a b))) in DD; subst ds'.
  apply Bool.negb_true_iff in ND'. apply spec_opt_eqb_eq in SPd. apply has_name_In in HDr.
  rewrite forallb_forall in NX.
  pose proof OB as OB'. unfold order_b in OB'. apply andb_prop in OB' as [OB' _].
  apply andb_prop in OB' as [_ OR].
  destruct (dims_eqvb_perm _ _ DE) as [PD ND]. destruct (dims_eqvb_perm _ _ DY) as [PY NY].
  destruct (is_perm_dims T s d o x SS) as [PS NS].
  apply (eqv_by_core c T l r _ _ Dl _ _ Dr W El Er DE).
  intros rho R i Mi Ri. cbn [core map]. unfold vat; simpl nth.
  assert (Mr : msk (sz c) Dr i = true) by (rewrite <- (msk_perm _ _ _ i PD); auto).
  set (L := lsize_of (sz c) Dr d).
  set (j := upd i d (pidx o (L / length o) (i d))).
  assert (Mj : msk (sz c) Dy j = true).
  { apply (perm_msk c T r d o y Dr Dy i SZ Er OR PY NY HDr Mr). }
  transitivity (den c T y rho j); [|reflexivity].
  rewrite (den_in c T y _ _ _ rho _ W Ey Mj). cbn [core map]. unfold vat; simpl nth.
  assert (Ld : lsize_of (sz c) (ndims (node_at T s)) d = L).
  { unfold L. rewrite <- (lsize_of_perm _ _ _ _ PD ND). symmetry. apply spec_lsize; auto. }
  assert (Id : (i d < L)%nat) by (apply lt_lsize; auto).
  (* the reduced dims have the same sizes in the permuted node and in x *)
  assert (CE : map (fun n => (n, lsize_of (sz c) (ndims (node_at T s)) n)) ds =
               map (fun n => (n, lsize_of (sz c) (ndims (node_at T x)) n)) ds).
  { apply map_ext_in. intros n _. f_equal. apply lsize_of_perm; auto. }
  rewrite CE. set (C := map (fun n => (n, lsize_of (sz c) (ndims (node_at T x)) n)) ds).
  assert (NC : ~ In d (map fst C)).
  { unfold C. rewrite map_fst_pairs. intro I.
    assert (existsb (Pos.eqb d) ds = true) by (apply existsb_pos_In; auto). congruence. }
  rewrite (maxover_agree C (fun jj => den c T x rho jj) (map fst (ndims (node_at T x)))
             (restrict Dy j) j).
  2:{ intros jj jj' A. apply den_agree; auto. }
  2:{ intros m Im NI. apply restrict_in. apply NX in Im. apply orb_prop in Im as [E|E].
      - exfalso. apply NI. unfold C. rewrite map_fst_pairs. apply existsb_pos_In; auto.
      - apply has_name_In; auto. }
  unfold j. rewrite maxover_upd_out by auto.
  apply maxover_ext; auto. intros jj Hj.
  assert (Jd : jj d = i d) by (apply Hj; auto).
  rewrite (perm_read_lt c T s d o x rho jj W SZ SS OR) by (rewrite Jd, Ld; auto).
  rewrite Jd, Ld. reflexivity.
Qed.

(** ** lift-perm-chunk *)
Definition chk_lift_perm_chunk (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l, node_at T r with
  | Node (OChunk cd p k) [s] Dl, Node (OPermute d o) [y] Dr =>
      match node_at T y with
      | Node (OChunk cd' p' k') [x] Dy =>
          if negb (Pos.eqb cd d) && op_eqb (OChunk cd p k) (OChunk cd' p' k') && order_b o &&
             is_perm T s d o x && dims_eqvb Dl Dr && dims_eqvb Dy Dr && has_name Dr d &&
             spec_opt_eqb (spec_of Dl cd) (spec_of Dy cd) &&
             spec_opt_eqb (spec_of Dl d) (spec_of (ndims (node_at T s)) d) &&
             incl_names (ndims (node_at T x)) Dy
          then Some [] else None
      | _ => None
      end
  | _, _ => None
  end.

Lemma chk_lift_perm_chunk_sound : rule_sound chk_lift_perm_chunk.
Proof.
  intros G l r h cl H c M _. destruct M as [W [VC [SZ [F [DO P]]]]].
  unfold chk_lift_perm_chunk in H. set (T := gT G) in *.
  destruct (node_at T l) as [ol ss Dl] eqn:El. destruct ol; try discriminate.
  destruct ss as [|s [|]]; try discriminate.
  destruct (node_at T r) as [or ys Dr] eqn:Er. destruct or; try discriminate.
  destruct ys as [|y [|]]; try discriminate.
  destruct (node_at T y) as [oy xs Dy] eqn:Ey. destruct oy; try discriminate.
  destruct xs as [|x [|]]; try discriminate.
  rename d into cd, d0 into d, i into k.
  match type of H with (if ?b then _ else _) = _ => destruct b eqn:B; try discriminate end.
  apply andb_prop in B as [B IN]. apply andb_prop in B as [B SPd].
  apply andb_prop in B as [B SPc]. apply andb_prop in B as [B HDr].
  apply andb_prop in B as [B DY]. apply andb_prop in B as [B DE].
  apply andb_prop in B as [B SS]. apply andb_prop in B as [B OB].
  apply andb_prop in B as [NE OE].
  apply op_eqb_eq in OE. injection OE as <- <- <-.
  apply Bool.negb_true_iff, Pos.eqb_neq in NE.
  apply spec_opt_eqb_eq in SPd, SPc. apply has_name_In in HDr.
  pose proof OB as OB'. unfold order_b in OB'. apply andb_prop in OB' as [OB' _].
  apply andb_prop in OB' as [_ OR].
  destruct (dims_eqvb_perm _ _ DE) as [PD ND]. destruct (dims_eqvb_perm _ _ DY) as [PY NY].
  apply (eqv_by_core c T l r _ _ Dl _ _ Dr W El Er DE).
  intros rho R i Mi Ri. cbn [core map]. unfold vat; simpl nth.
  assert (Mr : msk (sz c) Dr i = true) by (rewrite <- (msk_perm _ _ _ i PD); auto).
  set (L := lsize_of (sz c) Dr d).
  set (j := upd i d (pidx o (L / length o) (i d))).
  assert (Mj : msk (sz c) Dy j = true).
  { apply (perm_msk c T r d o y Dr Dy i SZ Er OR PY NY HDr Mr). }
  transitivity (den c T y rho j); [|reflexivity].
  rewrite (den_in c T y _ _ _ rho _ W Ey Mj). cbn [core map]. unfold vat; simpl nth.
  assert (Ld : lsize_of (sz c) (ndims (node_at T s)) d = L).
  { unfold L. rewrite <- (lsize_of_perm _ _ _ _ PD ND). symmetry. apply spec_lsize; auto. }
  assert (Lc : lsize_of (sz c) Dl cd = lsize_of (sz c) Dy cd) by (apply spec_lsize; auto).
  assert (Id : (i d < L)%nat) by (apply lt_lsize; auto).
  rewrite (perm_read_lt c T s d o x rho _ W SZ SS OR)
    by (rewrite upd_other by congruence; rewrite Ld; auto).
  rewrite upd_other by congruence. rewrite Ld.
  apply den_agree; auto. intros n In_.
  assert (InY : In n (map fst Dy)).
  { unfold incl_names in IN. rewrite forallb_forall in IN.
    apply in_map_iff in In_ as [dd [<- I]]. apply has_name_In, IN; auto. }
  assert (DY' : In d (map fst Dy))
    by (apply (Permutation_in _ (Permutation_map fst (Permutation_sym PY))); auto).
  assert (CY : In cd (map fst Dy) -> restrict Dy j cd = i cd).
  { intro I. rewrite restrict_in by auto. unfold j. rewrite upd_other; auto. }
  destruct (Pos.eqb_spec n cd) as [->|Nc]; [|destruct (Pos.eqb_spec n d) as [->|Nd]].
  - rewrite upd_same. rewrite (upd_other _ d) by congruence. rewrite upd_same.
    rewrite CY by auto. rewrite Lc. auto.
  - rewrite upd_same. rewrite (upd_other _ cd) by congruence.
    rewrite restrict_in by auto. unfold j. rewrite upd_same. auto.
  - rewrite !upd_other by auto. rewrite restrict_in by auto. unfold j. rewrite upd_other; auto.
Qed.

(** ** lift-shard-permute: [PERMUTE(SHARD(x, e, a), d, o) = SHARD(PERMUTE(x, d, o), e, a)],
    [e <> d]: both read [x] at the rank's block position of [e] and the permuted one of [d]. *)
Definition chk_lift_shard_permute (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l, node_at T r with
  | Node (OPermute d o) [s] Dl, Node (OShard e a) [p] Dr =>
      match node_at T s with
      | Node (OShard e' a') [x] _ =>
          if Pos.eqb e e' && Pos.eqb a a' && negb (Pos.eqb e d) && order_b o &&
             is_shard T s e a x && is_perm T p d o x && is_shard T r e a p &&
             dims_eqvb Dl Dr && has_name Dl d
          then Some [] else None
      | _ => None
      end
  | _, _ => None
  end.

Lemma chk_lift_shard_permute_sound : rule_sound chk_lift_shard_permute.
Proof.
  intros G l r h cl H c M _. destruct M as [W [VC [SZ [F [DO P]]]]].
  unfold chk_lift_shard_permute in H. set (T := gT G) in *.
  destruct (node_at T l) as [ol ss Dl] eqn:El. destruct ol; try discriminate.
  destruct ss as [|s [|]]; try discriminate.
  destruct (node_at T r) as [or ps Dr] eqn:Er. destruct or; try discriminate.
  destruct ps as [|p [|]]; try discriminate. rename d0 into e.
  destruct (node_at T s) as [os xs Ds] eqn:Es. destruct os; try discriminate.
  destruct xs as [|x [|]]; try discriminate. rename d0 into e', a0 into a'.
  match type of H with (if ?b then _ else _) = _ => destruct b eqn:B; try discriminate end.
  apply andb_prop in B as [B HD]. apply andb_prop in B as [B DE].
  apply andb_prop in B as [B SR]. apply andb_prop in B as [B PP].
  apply andb_prop in B as [B SS]. apply andb_prop in B as [B OB].
  apply andb_prop in B as [B NE]. apply andb_prop in B as [E1 A1].
  apply Pos.eqb_eq in E1, A1. subst e' a'.
  apply Bool.negb_true_iff, Pos.eqb_neq in NE. apply has_name_In in HD.
  pose proof OB as OB'. unfold order_b in OB'. apply andb_prop in OB' as [OB' _].
  apply andb_prop in OB' as [_ OR].
  destruct (dims_eqvb_perm _ _ DE) as [PD ND].
  destruct (is_perm_dims T p d o x PP) as [PPx NPp].
  apply (eqv_by_core c T l r _ _ Dl _ _ Dr W El Er DE).
  intros rho R i Mi Ri. cbn [core map]. unfold vat; simpl nth.
  (* the specs of d and e on both sides *)
  assert (SpD : spec_of Dl d = spec_of (ndims (node_at T p)) d).
  { rewrite (spec_of_perm _ _ PD ND).
    pose proof (spec_shard T r e a p d SR) as S1. rewrite Er in S1. cbn [ndims] in S1.
    rewrite S1. destruct (spec_of (ndims (node_at T p)) d); auto. rewrite (proj2 (Pos.eqb_neq d e)) by congruence; auto. }
  assert (SpE : spec_of Dr e = spec_of (ndims (node_at T s)) e).
  { pose proof (spec_shard T r e a p e SR) as S1. rewrite Er in S1. cbn [ndims] in S1.
    rewrite S1, (spec_shard T s e a x e SS), (spec_of_perm _ _ PPx NPp). auto. }
  set (L := lsize_of (sz c) Dl d).
  assert (Lp : lsize_of (sz c) (ndims (node_at T p)) d = L) by (unfold L; symmetry; apply spec_lsize; auto).
  assert (Le : lsize_of (sz c) Dr e = lsize_of (sz c) (ndims (node_at T s)) e) by (apply spec_lsize; auto).
  assert (Id : (i d < L)%nat) by (apply lt_lsize; auto).
  assert (He : In e (map fst Dl)).
  { destruct (is_shard_info T r e a p SR) as [_ [Hpe [PR _]]]. rewrite Er in PR. cbn [ndims] in PR.
    apply (Permutation_in _ (Permutation_map fst (Permutation_sym PD))).
    apply (Permutation_in _ (Permutation_map fst (Permutation_sym PR))).
    rewrite map_fst_shard_dims. apply has_name_In; auto. }
  assert (Ie : (i e < lsize_of (sz c) (ndims (node_at T s)) e)%nat).
  { rewrite <- Le, <- (lsize_of_perm _ _ _ _ PD ND). apply lt_lsize; auto. }
  rewrite (shard_read_lt c T W s e a x rho _ SS) by (rewrite upd_other by congruence; auto).
  rewrite (perm_read_lt c T p d o x rho _ W SZ PP OR) by (rewrite upd_other by auto; rewrite Lp; auto).
  unfold upd_shard. rewrite !upd_other by congruence. rewrite Lp, Le.
  rewrite upd_comm by auto. reflexivity.
Qed.

(** ** lift-perm-rename: [RENAME(PERMUTE(x, d, o), old, new) = PERMUTE(RENAME(x, old, new), d', o)],
    [d' = new] if [d = old], else [d' = d] with the same spec of [d] on both sides; [new] is not
    a dim of [x]; the rename keeps the local size of its dim ([sizes_ok]). *)
Definition chk_lift_perm_rename (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l, node_at T r with
  | Node (ORename old new) [s] Dl, Node (OPermute d' o') [y] Dr =>
      match node_at T s, node_at T y with
      | Node (OPermute d o) [x] _, Node (ORename old' new') [x'] Dy =>
          if Pos.eqb old old' && Pos.eqb new new' && Pos.eqb x x' && list_eqb N.eqb o o' &&
             order_b o && is_perm T s d o x && dims_eqvb Dl Dr && dims_eqvb Dy Dr &&
             has_name Dr d' && has_name Dy new && negb (has_name (ndims (node_at T x)) new) &&
             forallb (fun n => Pos.eqb n old || has_name Dy n) (map fst (ndims (node_at T x))) &&
             (if Pos.eqb d old then Pos.eqb d' new
              else Pos.eqb d' d && spec_opt_eqb (spec_of Dl d) (spec_of (ndims (node_at T s)) d))
          then Some [] else None
      | _, _ => None
      end
  | _, _ => None
  end.

Lemma chk_lift_perm_rename_sound : rule_sound chk_lift_perm_rename.
Proof.
  intros G l r h cl H c M _. destruct M as [W [VC [SZ [F [DO P]]]]].
  unfold chk_lift_perm_rename in H. set (T := gT G) in *.
  destruct (node_at T l) as [ol ss Dl] eqn:El. destruct ol; try discriminate.
  destruct ss as [|s [|]]; try discriminate.
  destruct (node_at T r) as [or ys Dr] eqn:Er. destruct or; try discriminate.
  destruct ys as [|y [|]]; try discriminate. rename d into d', o into o'.
  destruct (node_at T s) as [os xs Ds] eqn:Es. destruct os; try discriminate.
  destruct xs as [|x [|]]; try discriminate.
  destruct (node_at T y) as [oy xs' Dy] eqn:Ey. destruct oy; try discriminate.
  destruct xs' as [|x' [|]]; try discriminate.
  rename old0 into old', new0 into new'.
  match type of H with (if ?b then _ else _) = _ => destruct b eqn:B; try discriminate end.
  apply andb_prop in B as [B CASE]. apply andb_prop in B as [B NAMES].
  apply andb_prop in B as [B NX]. apply andb_prop in B as [B NY].
  apply andb_prop in B as [B HDr]. apply andb_prop in B as [B DY].
  apply andb_prop in B as [B DE]. apply andb_prop in B as [B SS].
  apply andb_prop in B as [B OB]. apply andb_prop in B as [B OO].
  apply andb_prop in B as [B XX]. apply andb_prop in B as [E1 E2].
  apply Pos.eqb_eq in E1, E2, XX. subst old' new' x'.
  apply (list_eqb_eq _ _ (fun a b => proj1 (N.eqb_eq a b))) in OO. subst o'.
  apply Bool.negb_true_iff in NX. apply has_name_In in HDr.
  assert (NXn : ~ In new (map fst (ndims (node_at T x)))) by (rewrite <- has_name_In; congruence).
  apply has_name_In in NY.
  assert (XN : forall n, In n (map fst (ndims (node_at T x))) -> n = old \/ In n (map fst Dy)).
  { intros n I. rewrite forallb_forall in NAMES. apply NAMES in I.
    apply orb_prop in I as [E|E]; [left; apply Pos.eqb_eq; auto|right; apply has_name_In; auto]. }
  pose proof OB as OB'. unfold order_b in OB'. apply andb_prop in OB' as [OB' _].
  apply andb_prop in OB' as [_ OR].
  destruct (dims_eqvb_perm _ _ DE) as [PD ND]. destruct (dims_eqvb_perm _ _ DY) as [PY NDY].
  destruct (is_perm_dims T s d o x SS) as [PS NS].
  pose proof (is_perm_has T s d o x SS) as Hsd. apply has_name_In in Hsd.
  assert (Hxd : In d (map fst (ndims (node_at T x))))
    by (apply (Permutation_in _ (Permutation_map fst PS)); auto).
  assert (EDs : ndims (node_at T s) = Ds) by (rewrite Es; auto).
  apply (eqv_by_core c T l r _ _ Dl _ _ Dr W El Er DE).
  intros rho R i Mi Ri. cbn [core map]. unfold vat; simpl nth.
  assert (DinL : In d' (map fst Dl))
    by (apply (Permutation_in _ (Permutation_map fst (Permutation_sym PD))); auto).
  assert (Lr : lsize_of (sz c) Dr d' = lsize_of (sz c) Dl d')
    by (symmetry; apply lsize_of_perm; auto).
  assert (Id : (i d' < lsize_of (sz c) Dl d')%nat) by (apply lt_lsize; auto).
  assert (Mr : msk (sz c) Dr i = true) by (rewrite <- (msk_perm _ _ _ i PD); auto).
  set (j := upd i d' (pidx o (lsize_of (sz c) Dr d' / length o) (i d'))).
  assert (Mj : msk (sz c) Dy j = true) by (apply (perm_msk c T r d' o y Dr Dy i SZ Er OR PY NDY HDr Mr)).
  transitivity (den c T y rho j); [|reflexivity].
  rewrite (den_in c T y _ _ _ rho _ W Ey Mj). cbn [core map]. unfold vat; simpl nth.
  destruct (Pos.eqb_spec d old) as [->|Nd].
  - (* the permuted dim is renamed: d' = new *)
    apply Pos.eqb_eq in CASE; subst d'.
    assert (Ls : lsize_of (sz c) (ndims (node_at T s)) old = lsize_of (sz c) Dl new)
      by (apply (rename_size _ T l old new s Dl SZ El)).
    rewrite (perm_read_lt c T s old o x rho _ W SZ SS OR) by (rewrite upd_same, Ls; auto).
    rewrite upd_same, upd_upd_same, Ls, <- Lr.
    apply den_agree; auto. intros n In_.
    assert (Nn : n <> new) by (intro E; subst; auto).
    assert (Rn : restrict Dy j new = pidx o (lsize_of (sz c) Dr new / length o) (i new))
      by (rewrite restrict_in by auto; unfold j; apply upd_same).
    destruct (Pos.eqb_spec n old) as [->|No].
    + rewrite !upd_same, Rn. auto.
    + rewrite !upd_other by auto. destruct (XN n In_) as [->|InY]; [congruence|].
      rewrite restrict_in by auto. unfold j. rewrite upd_other; auto.
  - (* another dim: d' = d *)
    apply andb_prop in CASE as [E SPd]. apply Pos.eqb_eq in E; subst d'.
    apply spec_opt_eqb_eq in SPd.
    assert (Ld : lsize_of (sz c) (ndims (node_at T s)) d = lsize_of (sz c) Dl d)
      by (symmetry; apply spec_lsize; rewrite EDs; auto).
    assert (Dnew : d <> new) by (intro E; subst; auto).
    rewrite (perm_read_lt c T s d o x rho _ W SZ SS OR)
      by (rewrite upd_other by congruence; rewrite Ld; auto).
    rewrite (upd_other i old) by congruence. rewrite Ld, <- Lr.
    assert (DY' : In d (map fst Dy)) by (destruct (XN d Hxd); [congruence|auto]).
    assert (Rn : restrict Dy j new = i new)
      by (rewrite restrict_in by auto; unfold j; rewrite upd_other; auto).
    apply den_agree; auto. intros n In_.
    assert (Nn : n <> new) by (intro E; subst; auto).
    destruct (Pos.eqb_spec n d) as [->|Ndn].
    { rewrite upd_same, (upd_other _ old) by congruence. rewrite restrict_in by auto.
      unfold j. rewrite upd_same. auto. }
    rewrite (upd_other _ d) by auto.
    destruct (Pos.eqb_spec n old) as [->|No].
    { rewrite !upd_same. auto. }
    rewrite !upd_other by auto. destruct (XN n In_) as [->|InY]; [congruence|].
    rewrite restrict_in by auto. unfold j. rewrite upd_other; auto.
Qed.

(** ** lift-perm-onehot: [ONE_HOT(PERMUTE(idx, d, o), v) = PERMUTE(ONE_HOT(idx, v), d, o)],
    [d <> v]: one-hot is positionwise in the indices; both sides compare with the same global
    position along [v] (the same spec of [v]). *)
Definition chk_lift_perm_onehot (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l, node_at T r with
  | Node (OOneHot v) [A] D, Node (OPermute d o) [y] Dr =>
      match node_at T y with
      | Node (OOneHot v') [X] Dy =>
          if Pos.eqb v v' && negb (Pos.eqb d v) && order_b o && is_perm T A d o X &&
             dims_eqvb D Dr && dims_eqvb Dy Dr && has_name Dr d && has_name Dy v &&
             spec_opt_eqb (spec_of D d) (spec_of (ndims (node_at T A)) d) &&
             spec_opt_eqb (spec_of D v) (spec_of Dy v) && incl_names (ndims (node_at T X)) Dy
          then Some [] else None
      | _ => None
      end
  | _, _ => None
  end.

Lemma chk_lift_perm_onehot_sound : rule_sound chk_lift_perm_onehot.
Proof.
  intros G l r h cl H c M _. destruct M as [W [VC [SZ [F [DO P]]]]].
  unfold chk_lift_perm_onehot in H. set (T := gT G) in *.
  destruct (node_at T l) as [ol As D] eqn:El. destruct ol; try discriminate.
  destruct As as [|A [|]]; try discriminate.
  destruct (node_at T r) as [or ys Dr] eqn:Er. destruct or; try discriminate.
  destruct ys as [|y [|]]; try discriminate.
  destruct (node_at T y) as [oy Xs Dy] eqn:Ey. destruct oy; try discriminate.
  destruct Xs as [|X [|]]; try discriminate. rename v0 into v'.
  match type of H with (if ?b then _ else _) = _ => destruct b eqn:B; try discriminate end.
  apply andb_prop in B as [B IX]. apply andb_prop in B as [B SV].
  apply andb_prop in B as [B SPd]. apply andb_prop in B as [B HV].
  apply andb_prop in B as [B HDr]. apply andb_prop in B as [B DY].
  apply andb_prop in B as [B DE]. apply andb_prop in B as [B SA].
  apply andb_prop in B as [B OB]. apply andb_prop in B as [EV NE].
  apply Pos.eqb_eq in EV; subst v'. apply Bool.negb_true_iff, Pos.eqb_neq in NE.
  apply spec_opt_eqb_eq in SPd, SV. apply has_name_In in HDr, HV.
  pose proof OB as OB'. unfold order_b in OB'. apply andb_prop in OB' as [OB' _].
  apply andb_prop in OB' as [_ OR].
  destruct (dims_eqvb_perm _ _ DE) as [PD ND]. destruct (dims_eqvb_perm _ _ DY) as [PY NDY].
  apply (eqv_by_core c T l r _ _ D _ _ Dr W El Er DE).
  intros rho R i Mi Ri. cbn [core map]. unfold vat; simpl nth.
  assert (Mr : msk (sz c) Dr i = true) by (rewrite <- (msk_perm _ _ _ i PD); auto).
  set (j := upd i d (pidx o (lsize_of (sz c) Dr d / length o) (i d))).
  assert (Mj : msk (sz c) Dy j = true) by (apply (perm_msk c T r d o y Dr Dy i SZ Er OR PY NDY HDr Mr)).
  transitivity (den c T y rho j); [|reflexivity].
  rewrite (den_in c T y _ _ _ rho _ W Ey Mj). cbn [core map]. unfold vat; simpl nth.
  assert (LA : lsize_of (sz c) (ndims (node_at T A)) d = lsize_of (sz c) Dr d).
  { rewrite <- (lsize_of_perm _ _ _ _ PD ND). symmetry. apply spec_lsize; auto. }
  assert (DinD : In d (map fst D))
    by (apply (Permutation_in _ (Permutation_map fst (Permutation_sym PD))); auto).
  assert (Id : (i d < lsize_of (sz c) Dr d)%nat)
    by (rewrite <- (lsize_of_perm _ _ _ _ PD ND); apply lt_lsize; auto).
  rewrite (perm_read_lt c T A d o X rho i W SZ SA OR) by (rewrite LA; auto).
  rewrite LA, SV.
  assert (Jv : restrict Dy j v = i v)
    by (rewrite restrict_in by auto; unfold j; rewrite upd_other; auto).
  rewrite Jv. fold j.
  assert (XY : den c T X rho j = den c T X rho (restrict Dy j)).
  { apply den_agree; auto. intros n In_. symmetry. apply restrict_in.
    unfold incl_names in IX. rewrite forallb_forall in IX.
    apply in_map_iff in In_ as [dd [<- I]]. apply has_name_In, IX; auto. }
  rewrite XY. reflexivity.
Qed.

(** ** lift-perm-concat: [CONCAT(PERMUTE(x_k, d, o)..., c) = PERMUTE(CONCAT(x_k..., c), d, o)],
    [c <> d]: every part a [PERMUTE(x_k, d, o)] with the result's spec of [d] (the parts keep
    [c]'s sizes on both sides). *)
Definition concat_parg (T : table) (Dl Dy : list dimspec) (d : name) (o : list N) (S X : positive) : bool :=
  is_perm T S d o X && spec_opt_eqb (spec_of (ndims (node_at T S)) d) (spec_of Dl d) &&
  incl_names (ndims (node_at T X)) Dy.

Definition chk_lift_perm_concat (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l, node_at T r with
  | Node (OConcat cd) Ss Dl, Node (OPermute d o) [y] Dr =>
      match node_at T y with
      | Node (OConcat cd') Xs Dy =>
          if negb (Pos.eqb cd d) && Pos.eqb cd cd' && order_b o &&
             forallb2 (concat_parg T Dl Dy d o) Ss Xs &&
             dims_eqvb Dl Dr && dims_eqvb Dy Dr && has_name Dr d && has_name Dy cd
          then Some [] else None
      | _ => None
      end
  | _, _ => None
  end.

Lemma chk_lift_perm_concat_sound : rule_sound chk_lift_perm_concat.
Proof.
  intros G l r h cl H c M _. destruct M as [W [VC [SZ [F [DO P]]]]].
  unfold chk_lift_perm_concat in H. set (T := gT G) in *.
  destruct (node_at T l) as [ol Ss Dl] eqn:El. destruct ol; try discriminate.
  rename d into cd.
  destruct (node_at T r) as [or ys Dr] eqn:Er. destruct or; try discriminate.
  destruct ys as [|y [|]]; try discriminate.
  destruct (node_at T y) as [oy Xs Dy] eqn:Ey. destruct oy; try discriminate.
  rename d0 into cd'.
  match type of H with (if ?b then _ else _) = _ => destruct b eqn:B; try discriminate end.
  apply andb_prop in B as [B HC]. apply andb_prop in B as [B HDr].
  apply andb_prop in B as [B DY]. apply andb_prop in B as [B DE].
  apply andb_prop in B as [B LA]. apply andb_prop in B as [B OB].
  apply andb_prop in B as [NE EC]. apply Pos.eqb_eq in EC; subst cd'.
  apply Bool.negb_true_iff, Pos.eqb_neq in NE.
  apply has_name_In in HC, HDr.
  pose proof OB as OB'. unfold order_b in OB'. apply andb_prop in OB' as [OB' _].
  apply andb_prop in OB' as [_ OR].
  destruct (dims_eqvb_perm _ _ DE) as [PD ND]. destruct (dims_eqvb_perm _ _ DY) as [PY NDY].
  apply (eqv_by_core c T l r _ _ Dl _ _ Dr W El Er DE).
  intros rho R i Mi Ri. cbn [core map]. unfold vat; simpl nth.
  assert (Mr : msk (sz c) Dr i = true) by (rewrite <- (msk_perm _ _ _ i PD); auto).
  set (j := upd i d (pidx o (lsize_of (sz c) Dr d / length o) (i d))).
  assert (Mj : msk (sz c) Dy j = true) by (apply (perm_msk c T r d o y Dr Dy i SZ Er OR PY NDY HDr Mr)).
  transitivity (den c T y rho j); [|reflexivity].
  rewrite (den_in c T y _ _ _ rho _ W Ey Mj). cbn [core].
  assert (DinL : In d (map fst Dl))
    by (apply (Permutation_in _ (Permutation_map fst (Permutation_sym PD))); auto).
  assert (DYd : In d (map fst Dy))
    by (apply (Permutation_in _ (Permutation_map fst (Permutation_sym PY))); auto).
  assert (Lr : lsize_of (sz c) Dr d = lsize_of (sz c) Dl d)
    by (symmetry; apply lsize_of_perm; auto).
  assert (Id : (i d < lsize_of (sz c) Dl d)%nat) by (apply lt_lsize; auto).
  assert (JC : restrict Dy j cd = i cd).
  { rewrite restrict_in by auto. unfold j. rewrite upd_other by congruence. auto. }
  rewrite JC.
  apply (concat_at_pairs c T (concat_parg T Dl Dy d o) cd rho i _ _ Ss Xs LA).
  intros S X SX. unfold concat_parg in SX.
  apply andb_prop in SX as [SX IN]. apply andb_prop in SX as [SX SPd].
  apply spec_opt_eqb_eq in SPd.
  destruct (is_perm_dims T S d o X SX) as [PS NS].
  split.
  - apply lsize_of_perm; auto.
  - intros j'.
    assert (SpS : lsize_of (sz c) (ndims (node_at T S)) d = lsize_of (sz c) Dl d)
      by (apply spec_lsize; auto).
    rewrite (perm_read_lt c T S d o X rho _ W SZ SX OR)
      by (rewrite upd_other by congruence; rewrite SpS; auto).
    rewrite (upd_other i cd) by congruence. rewrite SpS, <- Lr.
    apply den_agree; auto. intros n In_.
    assert (InY : In n (map fst Dy)).
    { unfold incl_names in IN. rewrite forallb_forall in IN.
      apply in_map_iff in In_ as [dd [<- I]]. apply has_name_In, IN; auto. }
    destruct (Pos.eqb_spec n cd) as [->|Nc].
    { rewrite upd_same, (upd_other _ d) by congruence. rewrite upd_same. auto. }
    rewrite (upd_other _ cd) by auto.
    destruct (Pos.eqb_spec n d) as [->|Nd].
    { rewrite !upd_same. rewrite restrict_in by auto. unfold j. rewrite upd_same. auto. }
    rewrite !upd_other by auto. rewrite restrict_in by auto. unfold j. rewrite upd_other; auto.
Qed.
