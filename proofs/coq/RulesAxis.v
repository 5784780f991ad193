(** * RulesAxis: collectives over one mesh axis, on values that do not vary over it or over an
    axis of size one (docs/rules.md, "collectives").

    allreduce-unit-axis, broadcast-unit-axis, part-unit-axis (|a| = 1, a size fact of the
    certificate's binding), allreduce-max-invariant, allreduce-sum-invariant and allreduce-part
    (x does not vary over a: the checked "varies over" analysis, [Props.vary_sound]). *)

From Coq Require Import Reals Lra Lia List QArith ZArith PArith NArith Bool.
From Coq Require Import FSets.FMapPositive FunctionalExtensionality.
From Shardproof Require Import Base Num Pow Term Props RuleLib RulesBasic.
Import ListNotations.
Open Scope R_scope.

(** the size fact [sz a = 1] *)
Definition unit_axis (G : gctx) (a : name) : bool :=
  match fact_of (gF G) a with Some k => N.eqb k 1 | None => false end.

Lemma unit_axis_ok : forall G c a, model_ok G c -> unit_axis G a = true -> sz c a = 1%nat.
Proof.
  intros G c a [_ [_ [_ [F _]]]] H. unfold unit_axis in H.
  destruct (fact_of (gF G) a) as [k|] eqn:E; try discriminate. apply N.eqb_eq in H; subst.
  apply fact_of_In, F in E. rewrite E. reflexivity.
Qed.

Lemma upd_rank_unit : forall s rho a, rk_ok s rho -> s a = 1%nat -> upd rho a 0%nat = rho.
Proof.
  intros s rho a R H. assert (Z : rho a = 0%nat) by (specialize (R a); lia).
  rewrite <- Z. apply upd_id.
Qed.

(** does not vary over [a] *)
Definition invariant (G : gctx) (x a : name) : bool := negb (existsb (Pos.eqb a) (vget (gvt G) x)).

Lemma invariant_ok : forall G c x a, model_ok G c -> invariant G x a = true ->
  forall rho r, den c (gT G) x (upd rho a r) = den c (gT G) x rho.
Proof.
  intros G c x a [W [VC [_ [_ [_ P]]]]] H rho r. unfold invariant in H.
  apply (vary_sound c (gT G) W P (gvt G) VC x). intros b Ib. unfold upd.
  destruct (Pos.eqb_spec b a); auto. subst. exfalso.
  rewrite negb_true_iff in H. assert (existsb (Pos.eqb a) (vget (gvt G) x) = true); [|congruence].
  apply existsb_exists. exists a; split; auto. apply Pos.eqb_refl.
Qed.

(** A node [OP(x)] whose value at [rho] and in-range index [j] is [f (den x) rho j], and [f]
    gives [den x] back there: the node is [x]. *)
Lemma eqv_through : forall c T l r o D, wf_table T ->
  node_at T l = Node o [r] D -> dims_eqvb (ndims (node_at T r)) D = true ->
  (forall rho, rk_ok (sz c) rho -> forall j, msk (sz c) D j = true ->
     core c T o [r] D [den c T r] rho (restrict D j) = den c T r rho (restrict D j)) ->
  eqv c T l r.
Proof.
  intros c T l r o D W E DE H rho R i. rewrite (den_node c T l o [r] D W E). simpl map.
  rewrite <- (den_wrap c T W r D DE rho i). destruct (msk _ _ _) eqn:M; auto.
Qed.

(** ** ALL_REDUCE(x, a, r) = x, BROADCAST(x, a, 0) = x, PART(x, a) = x when |a| = 1 *)
Definition chk_unit_axis (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l with
  | Node (OAllReduce a _) [x] D | Node (OBroadcast a 0%N) [x] D | Node (OPart a) [x] D =>
      if Pos.eqb x r && dims_eqvb (ndims (node_at T r)) D && unit_axis G a then Some [] else None
  | _ => None
  end.

Ltac if_true H B := match type of H with
  | context [if ?b then _ else _] => destruct b eqn:B; [|discriminate]
  end.

Lemma chk_unit_axis_sound : rule_sound chk_unit_axis.
Proof.
  intros G l r h cl H c M _. pose proof M as M0. destruct M as [W [_ [_ [_ [_ P]]]]].
  unfold chk_unit_axis in H. destruct (node_at (gT G) l) as [o xs D] eqn:El.
  destruct o; try discriminate; try (destruct src; [|discriminate]);
    destruct xs as [|x [|]]; try discriminate.
  - (* PART *)
    if_true H B.
    apply andb_prop in B as [B U]. apply andb_prop in B as [B DE]. apply Pos.eqb_eq in B; subst x.
    apply (eqv_through c _ l r _ D W El DE). intros rho R j _. simpl. unfold vat; simpl.
    pose proof (unit_axis_ok G c a M0 U) as A1.
    destruct P as [_ [P2 P3]].
    set (v' := fun rho0 => den c (gT G) r (upd rho0 a 0%nat)).
    assert (E' : forall rho0, rk_ok (sz c) rho0 -> den c (gT G) r rho0 = v' rho0).
    { intros rho0 R0. unfold v'. rewrite (upd_rank_unit _ rho0 a R0 A1). reflexivity. }
    rewrite (P3 a (den c (gT G) r) v' E' rho R).
    assert (Iv : forall rho0 k, v' (upd rho0 a k) = v' rho0).
    { intros. unfold v'. rewrite upd_upd_same. reflexivity. }
    assert (S : po c a v' rho (restrict D j) = v' rho (restrict D j)).
    { pose proof (P2 a v' Iv rho (restrict D j)) as S. rewrite A1 in S. simpl in S.
      rewrite Rplus_0_l, (upd_rank_unit _ rho a R A1) in S. exact S. }
    rewrite S, <- (E' rho R). reflexivity.
  - (* ALL_REDUCE *)
    if_true H B.
    apply andb_prop in B as [B U]. apply andb_prop in B as [B DE]. apply Pos.eqb_eq in B; subst x.
    apply (eqv_through c _ l r _ D W El DE). intros rho R j _.
    pose proof (unit_axis_ok G c a M0 U) as A1.
    destruct r0; simpl; rewrite A1; simpl; unfold vat; simpl;
      rewrite (upd_rank_unit _ rho a R A1); try ring; reflexivity.
  - (* BROADCAST *)
    if_true H B.
    apply andb_prop in B as [B U]. apply andb_prop in B as [B DE]. apply Pos.eqb_eq in B; subst x.
    apply (eqv_through c _ l r _ D W El DE). intros rho R j _. simpl. unfold vat; simpl.
    rewrite (upd_rank_unit _ rho a R (unit_axis_ok G c a M0 U)). reflexivity.
Qed.

(** ** ALL_REDUCE(x, a, max) = x when x does not vary over a *)
Definition chk_allreduce_max_inv (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l with
  | Node (OAllReduce a RMax) [x] D =>
      if Pos.eqb x r && dims_eqvb (ndims (node_at T r)) D && invariant G x a then Some [] else None
  | _ => None
  end.

Lemma chk_allreduce_max_inv_sound : rule_sound chk_allreduce_max_inv.
Proof.
  intros G l r h cl H c M _. pose proof M as M0. destruct M as [W _].
  unfold chk_allreduce_max_inv in H. destruct (node_at (gT G) l) as [o xs D] eqn:El.
  destruct o; try discriminate; destruct r0; try discriminate.
  destruct xs as [|x [|]]; try discriminate.
  if_true H B.
  apply andb_prop in B as [B I]. apply andb_prop in B as [B DE]. apply Pos.eqb_eq in B; subst x.
  apply (eqv_through c _ l r _ D W El DE). intros rho R j _. simpl. unfold vat; simpl.
  rewrite (rmaxs_ext _ _ (fun _ => den c (gT G) r rho (restrict D j)))
    by (intros; rewrite (invariant_ok G c r a M0 I); auto).
  apply rmaxs_const. specialize (R a). lia.
Qed.

(** ** ALL_REDUCE(x, a, sum) = MUL(CONST(|a|), x) when x does not vary over a *)
Definition chk_allreduce_sum_inv (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l, node_at T r with
  | Node (OAllReduce a RSum) [x] D, Node OMul [k; x'] D' =>
      match fact_of (gF G) a with
      | Some n => if Pos.eqb x x' && dims_eqvb D D' && invariant G x a &&
                     is_const T k (num_of_Q (inject_Z (Z.of_N n))) then Some [] else None
      | None => None
      end
  | _, _ => None
  end.

Lemma chk_allreduce_sum_inv_sound : rule_sound chk_allreduce_sum_inv.
Proof.
  intros G l r h cl H c M _. pose proof M as M0. destruct M as [W [_ [_ [F _]]]].
  unfold chk_allreduce_sum_inv in H. destruct (node_at (gT G) l) as [o xs D] eqn:El.
  destruct (node_at (gT G) r) as [o' xs' D'] eqn:Er.
  destruct o; try discriminate; destruct r0; try discriminate.
  destruct xs as [|x [|]]; try discriminate. destruct o'; try discriminate.
  destruct xs' as [|k [|x' [|]]]; try discriminate.
  destruct (fact_of (gF G) a) as [n|] eqn:Fa; try discriminate.
  if_true H B.
  apply andb_prop in B as [B K]. apply andb_prop in B as [B I]. apply andb_prop in B as [B DE].
  apply Pos.eqb_eq in B; subst x'.
  apply (eqv_by_core c (gT G) l r _ _ D _ _ D' W El Er DE).
  intros rho R i _ _. simpl. unfold vat; simpl.
  rewrite (rsum_ext _ _ (fun _ => den c (gT G) x rho i))
    by (intros; rewrite (invariant_ok G c x a M0 I); auto).
  rewrite rsum_const, (is_const_ok c _ k _ W K rho i).
  apply fact_of_In, F in Fa. rewrite Fa, num_val_of_Q, Q2R_inject_Z', INR_IZR_INZ, N_nat_Z. ring.
Qed.

(** ** ALL_REDUCE(PART(x, a), a, sum) = x when x does not vary over a *)
Definition chk_allreduce_part (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l with
  | Node (OAllReduce a RSum) [p] D =>
      match node_at T p with
      | Node (OPart a') [x] Dp =>
          if Pos.eqb a a' && Pos.eqb x r && dims_eqvb Dp D &&
             dims_eqvb (ndims (node_at T r)) D && invariant G x a then Some [] else None
      | _ => None
      end
  | _ => None
  end.

Lemma chk_allreduce_part_sound : rule_sound chk_allreduce_part.
Proof.
  intros G l r h cl H c M _. pose proof M as M0. destruct M as [W [_ [_ [_ [_ P]]]]].
  unfold chk_allreduce_part in H. destruct (node_at (gT G) l) as [o xs D] eqn:El.
  destruct o; try discriminate; destruct r0; try discriminate.
  destruct xs as [|p [|]]; try discriminate.
  destruct (node_at (gT G) p) as [op xp Dp] eqn:Ep.
  destruct op; try discriminate. destruct xp as [|x [|]]; try discriminate.
  if_true H B.
  apply andb_prop in B as [B I]. apply andb_prop in B as [B DE]. apply andb_prop in B as [B DP].
  apply andb_prop in B as [B1 B2]. apply Pos.eqb_eq in B1; apply Pos.eqb_eq in B2; subst a0 x.
  intros rho R i. rewrite (den_node c _ l _ [p] D W El). simpl map.
  rewrite <- (den_wrap c _ W r D DE rho i). destruct (msk (sz c) D i) eqn:M; auto.
  simpl. unfold vat; simpl.
  destruct (dims_eqvb_perm _ _ DP) as [PP _].
  assert (Hp : forall rho', den c (gT G) p rho' (restrict D i) =
                            po c a (den c (gT G) r) rho' (restrict D i)).
  { intro rho'. rewrite (den_node c _ p _ _ Dp W Ep).
    rewrite (msk_perm _ _ _ _ PP), (restrict_perm _ _ _ PP), msk_restrict, M, restrict_restrict.
    reflexivity. }
  rewrite (rsum_ext _ _ (fun k => po c a (den c (gT G) r) (upd rho a k) (restrict D i)))
    by (intros; apply Hp).
  destruct P as [_ [P2 _]]. apply P2. intros rho0 k. apply (invariant_ok G c r a M0 I).
Qed.
