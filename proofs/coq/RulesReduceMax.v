(** * RulesReduceMax: a maximum over blocks of an axis of size 1 (docs/rules.md, issue 12).

    reduce-max-unit-axis: [REDUCE_MAX(SHARD(x, d, a), ds) = REDUCE_MAX(x, ds)] when [|a| = 1]
    (a size fact of the certificate's binding, as for the other unit-axis rules) and [d] is
    among [ds]: the one block is the whole of [x], read on rank 0, the only rank in range. *)

From Coq Require Import Reals Lra Lia List QArith ZArith PArith NArith Bool Permutation.
From Coq Require Import FSets.FMapPositive FunctionalExtensionality.
From Shardproof Require Import Base Num Pow Term Props RuleLib Congr Rel Shard RulesBasic RulesLift
  RulesAxis RulesEinsum RulesLiftEinsum.
Import ListNotations.
Open Scope R_scope.

Definition chk_reduce_max_unit_axis (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l, node_at T r with
  | Node (OReduceMax ds) [s] Dl, Node (OReduceMax ds') [x] Dr =>
      match node_at T s with
      | Node (OShard d a) [x'] _ =>
          if unit_axis G a && names_eqb ds ds' && Pos.eqb x x' && is_shard T s d a x &&
             existsb (Pos.eqb d) ds && dims_eqvb Dl Dr
          then Some [] else None
      | _ => None
      end
  | _, _ => None
  end.

Lemma msk_lt : forall s D x n, msk s D x = true -> In n (map fst D) -> (x n < lsize_of s D n)%nat.
Proof.
  intros s D x n M I. unfold lsize_of. destruct (spec_of D n) as [sh|] eqn:E.
  - eapply msk_spec; eauto.
  - apply In_spec_of in I. congruence.
Qed.

Lemma chk_reduce_max_unit_axis_sound : rule_sound chk_reduce_max_unit_axis.
Proof.
  intros G l r h cl H c M _. pose proof M as M'. destruct M as [W _].
  unfold chk_reduce_max_unit_axis in H. set (T := gT G) in *.
  destruct (node_at T l) as [o1 ss Dl] eqn:El. destruct o1; try discriminate.
  destruct ss as [|s [|]]; try discriminate.
  destruct (node_at T r) as [o2 xs Dr] eqn:Er. destruct o2; try discriminate.
  destruct xs as [|x [|]]; try discriminate.
  destruct (node_at T s) as [o3 ys Ds0] eqn:Es. destruct o3; try discriminate.
  destruct ys as [|x' [|]]; try discriminate.
  match type of H with (if ?b then _ else _) = _ => destruct b eqn:B; try discriminate end.
  repeat match type of B with _ && _ = true => apply andb_prop in B as [B ?] end.
  rename H0 into DE, H1 into Dd, H2 into SH, H3 into Ex, H4 into DS, B into UA.
  apply (list_eqb_eq _ _ (fun a b => proj1 (Pos.eqb_eq a b))) in DS. subst ds0.
  pose proof (unit_axis_ok G c a M' UA) as A1.
  destruct (is_shard_info T s d a x SH) as [_ [HX [PA [NA NX]]]].
  assert (Lsz : forall n, lsize_of (sz c) (ndims (node_at T s)) n = lsize_of (sz c) (ndims (node_at T x)) n).
  { intros n. rewrite (lsize_of_perm _ _ _ n PA NA). unfold lsize_of. rewrite spec_of_shard_dims.
    destruct (spec_of (ndims (node_at T x)) n); auto.
    destruct (Pos.eqb n d); auto. rewrite lsz_app1. simpl. rewrite A1, Nat.div_1_r. auto. }
  assert (HS : In d (map fst (ndims (node_at T s)))).
  { apply (names_shard T s d a x d SH). apply has_name_In; auto. }
  assert (Eq : forall rho, rk_ok (sz c) rho -> forall j, den c T s rho j = den c T x rho j).
  { intros rho R j. assert (R0 : rho a = 0%nat) by (specialize (R a); lia).
    destruct (Nat.lt_ge_cases (j d) (lsize_of (sz c) (ndims (node_at T s)) d)) as [Lt|Ge].
    - rewrite (shard_read_lt c T W s d a x rho j SH Lt). unfold upd_shard. rewrite R0.
      simpl. rewrite upd_id. auto.
    - destruct (msk (sz c) (ndims (node_at T s)) j) eqn:Ms.
      { pose proof (msk_lt _ _ _ d Ms HS). lia. }
      destruct (msk (sz c) (ndims (node_at T x)) j) eqn:Mx.
      { pose proof (msk_lt _ _ _ d Mx (proj1 (has_name_In _ _) HX)). rewrite <- Lsz in *. lia. }
      rewrite (den_msk0 c T W s rho j Ms), (den_msk0 c T W x rho j Mx). auto. }
  apply (eqv_by_core c T l r _ _ _ _ _ _ W El Er DE). intros rho R i Mi Ri.
  cbn [core]. unfold vat; simpl nth.
  rewrite Es. simpl ndims.
  assert (Ds0E : Ds0 = ndims (node_at T s)) by (rewrite Es; auto). rewrite Ds0E.
  rewrite (map_ext _ _ (fun n => f_equal (pair n) (Lsz n))).
  apply maxover_ext; auto; intros j _; apply Eq; auto.
Qed.
