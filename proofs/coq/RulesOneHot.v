(** * RulesOneHot: [ONE_HOT] and blocks (docs/rules.md, lifting; vocab-parallel lookup).

    lift-shard-onehot: [ONE_HOT(SHARD(idx, d, a), v) = SHARD(ONE_HOT(idx, v), d, a)] ([d <> v]):
    one-hot is positionwise in the indices, and both sides compare with the same global
    position along [v] (the same spec of [v], the same rank). Checked as the Python rule:
    [a] is not in [v]'s spec, [d <> v].
    onehot-shard-out: [ONE_HOT(idx, v)[v: s ++ [a]] = SHARD(ONE_HOT(idx, v)[v: s], v, a)]:
    the global position of a block's element ([Term.gpos] over [s ++ [a]]) is the position,
    over [s], of the element the block reads ([gpos_app1]). Checked: [idx] lacks [v] and does
    not vary over [a] (the Python guard; the lemma does not need the second: both sides read
    [idx] on the same rank). *)

From Coq Require Import Reals Lra Lia List QArith ZArith PArith NArith Bool Permutation.
From Coq Require Import FSets.FMapPositive FunctionalExtensionality.
From Shardproof Require Import Base Num Pow Term Props RuleLib Congr Rel Shard RulesBasic RulesLift
  RulesEinsum.
Import ListNotations.
Open Scope R_scope.

Definition chk_lift_onehot (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l, node_at T r with
  | Node (OOneHot v) [A] D, Node (OShard d a) [y] Dr =>
      match node_at T y with
      | Node (OOneHot v') [X] Dy =>
          if Pos.eqb v v' && negb (Pos.eqb d v) && dims_eqvb D Dr && is_shard T r d a y &&
             is_shard T A d a X && incl_dims (ndims (node_at T A)) D &&
             incl_names (ndims (node_at T X)) Dy &&
             spec_opt_eqb (spec_of D v) (spec_of Dy v) && has_name D v && has_name Dy v &&
             negb (match spec_of D v with
                   | Some sh => existsb (shard_eqb (SAx a)) sh | None => false end)
          then Some [] else None
      | _ => None
      end
  | _, _ => None
  end.

Lemma chk_lift_onehot_sound : rule_sound chk_lift_onehot.
Proof.
  intros G l r h cl H c M _. destruct M as [W [VC [SZ [F [DO P]]]]].
  unfold chk_lift_onehot in H.
  destruct (node_at (gT G) l) as [o As D] eqn:El. destruct o; try discriminate.
  destruct As as [|A [|]]; try discriminate.
  destruct (node_at (gT G) r) as [o2 xs2 Dr] eqn:Er.
  destruct o2; try discriminate. destruct xs2 as [|y [|]]; try discriminate.
  destruct (node_at (gT G) y) as [o' Xs Dy] eqn:Ey. destruct o'; try discriminate.
  destruct Xs as [|X [|]]; try discriminate.
  match type of H with (if ?b then _ else _) = _ => destruct b eqn:B end; try discriminate.
  repeat match type of B with _ && _ = true => apply andb_prop in B as [B ?] end.
  rename H0 into NA, H1 into HDy, H2 into HD, H3 into SV, H4 into IX, H5 into IA, H6 into SA,
    H7 into SR, H8 into DE, H9 into Ndv.
  apply Pos.eqb_eq in B. subst v0. apply Bool.negb_true_iff in Ndv.
  apply spec_opt_eqb_eq in SV.
  set (T := gT G) in *.
  destruct (dims_eqvb_perm _ _ DE) as [PD ND].
  intros rho R x.
  destruct (msk (sz c) D x) eqn:Mx.
  2:{ rewrite (den_node c T l _ _ _ W El), Mx.
      rewrite (den_node c T r _ _ _ W Er), <- (msk_perm _ _ _ x PD), Mx; auto. }
  assert (Mr : msk (sz c) (ndims (node_at T r)) x = true)
    by (rewrite Er; simpl; rewrite <- (msk_perm _ _ _ x PD); auto).
  rewrite (shard_read c T W r d a y rho x SR Mr).
  pose proof (shard_range c T SZ r d a y rho x SR R Mr) as My. rewrite Ey in My; simpl in My.
  rewrite (den_in c T y _ _ _ rho _ W Ey My), (den_in c T l _ _ _ rho x W El Mx).
  cbn [core map]. unfold vat; simpl nth. rewrite SV.
  set (j := upd_shard (sz c) (ndims (node_at T r)) d a rho x).
  assert (XD : forall n, In n (map fst (ndims (node_at T X))) -> In n (map fst Dy)).
  { intros n I. unfold incl_names in IX. rewrite forallb_forall in IX.
    apply in_map_iff in I as [dd [<- I]]. apply has_name_In, IX; auto. }
  assert (Jv : restrict Dy j v = restrict D x v).
  { rewrite !restrict_in by (apply has_name_In; auto). unfold j, upd_shard, upd.
    destruct (Pos.eqb_spec v d) as [E|E]; [subst; rewrite Pos.eqb_refl in Ndv; discriminate|auto]. }
  assert (Ax : den c T A rho (restrict D x) = den c T X rho (restrict Dy j)).
  { assert (MA : msk (sz c) (ndims (node_at T A)) (restrict D x) = true)
      by (apply (incl_dims_msk _ _ D); auto; rewrite msk_restrict; auto).
    rewrite (shard_read c T W A d a X rho _ SA MA).
    apply den_agree; auto. intros n In_.
    assert (InA : In n (map fst (ndims (node_at T A)))) by (apply (names_shard T A d a X n SA); auto).
    assert (AD : In n (map fst D)).
    { apply in_map_iff in InA as [dd [<- I]]. apply in_map. eapply incl_dims_In; eauto. }
    unfold j, upd_shard, upd. rewrite (restrict_in Dy) by auto.
    destruct (Pos.eqb_spec n d) as [->|Nd].
    + f_equal. f_equal.
      * rewrite Er; simpl. rewrite <- (lsize_of_perm _ _ _ _ PD ND).
        destruct (is_shard_info T A d a X SA) as [_ [HX [PA [NA' _]]]].
        apply lsize_of_incl; auto.
        apply has_name_In. apply (names_shard T A d a X d SA). apply has_name_In; auto.
      * apply restrict_in; auto.
    + apply restrict_in; auto. }
  rewrite Ax, Jv. auto.
Qed.

(** ** onehot-shard-out *)
Lemma gpos_app1 : forall s rho sh t n j,
  Term.gpos s rho n (sh ++ [t]) j = Term.gpos s rho n sh (offs rho t * (lsz s n sh / kof s t) + j)%nat.
Proof.
  induction sh as [|u sh IH]; intros t n j; simpl.
  - lia.
  - rewrite IH. auto.
Qed.

Definition chk_onehot_shard_out (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l, node_at T r with
  | Node (OOneHot v) [ix] D, Node (OShard v' a) [y] Dr =>
      match node_at T y with
      | Node (OOneHot v'') [ix'] Dy =>
          match spec_of D v, spec_of Dy v with
          | Some shl, Some shy =>
              if Pos.eqb v v' && Pos.eqb v v'' && Pos.eqb ix ix' && dims_eqvb D Dr &&
                 is_shard T r v a y && list_eqb shard_eqb shl (shy ++ [SAx a]) &&
                 negb (has_name (ndims (node_at T ix)) v) &&
                 negb (existsb (Pos.eqb a) (vget (gvt G) ix)) &&
                 incl_dims (ndims (node_at T ix)) D && incl_names (ndims (node_at T ix)) Dy
              then Some [] else None
          | _, _ => None
          end
      | _ => None
      end
  | _, _ => None
  end.

Lemma chk_onehot_shard_out_sound : rule_sound chk_onehot_shard_out.
Proof.
  intros G l r h cl H c M _. destruct M as [W [VC [SZ [F [DO P]]]]].
  unfold chk_onehot_shard_out in H.
  destruct (node_at (gT G) l) as [o xs D] eqn:El. destruct o; try discriminate.
  destruct xs as [|ix [|]]; try discriminate.
  destruct (node_at (gT G) r) as [o2 ys Dr] eqn:Er. destruct o2; try discriminate.
  destruct ys as [|y [|]]; try discriminate.
  destruct (node_at (gT G) y) as [o3 zs Dy] eqn:Ey. destruct o3; try discriminate.
  destruct zs as [|ix' [|]]; try discriminate.
  destruct (spec_of D v) as [shl|] eqn:Sl; try discriminate.
  destruct (spec_of Dy v) as [shy|] eqn:Sy; try discriminate.
  match type of H with (if ?b then _ else _) = _ => destruct b eqn:B end; try discriminate.
  repeat match type of B with _ && _ = true => apply andb_prop in B as [B ?] end.
  rename H0 into IXN, H1 into IXD, H2 into NV, H3 into NX, H4 into SH, H5 into SR, H6 into DE,
    H7 into E3, H8 into E2.
  apply Pos.eqb_eq in B, E2, E3. subst d v0 ix'.
  apply (list_eqb_eq _ _ shard_eqb_eq) in SH. subst shl.
  apply Bool.negb_true_iff in NX.
  set (T := gT G) in *.
  destruct (dims_eqvb_perm _ _ DE) as [PD ND].
  intros rho R x.
  destruct (msk (sz c) D x) eqn:Mx.
  2:{ rewrite (den_node c T l _ _ _ W El), Mx.
      rewrite (den_node c T r _ _ _ W Er), <- (msk_perm _ _ _ x PD), Mx; auto. }
  assert (Mr : msk (sz c) (ndims (node_at T r)) x = true)
    by (rewrite Er; simpl; rewrite <- (msk_perm _ _ _ x PD); auto).
  rewrite (shard_read c T W r v a y rho x SR Mr).
  pose proof (shard_range c T SZ r v a y rho x SR R Mr) as My. rewrite Ey in My; simpl in My.
  rewrite (den_in c T y _ _ _ rho _ W Ey My), (den_in c T l _ _ _ rho x W El Mx).
  cbn [core map]. unfold vat; simpl nth. rewrite Sl, Sy.
  set (j := upd_shard (sz c) (ndims (node_at T r)) v a rho x).
  assert (HvD : In v (map fst D)) by (apply In_spec_of; rewrite Sl; discriminate).
  assert (HvDy : In v (map fst Dy)) by (apply In_spec_of; rewrite Sy; discriminate).
  assert (Ix : den c T ix rho (restrict D x) = den c T ix rho (restrict Dy j)).
  { apply den_agree; auto. intros n In_.
    assert (ND' : n <> v) by (intro E; subst; apply has_name_In in In_; congruence).
    rewrite (restrict_in D) by (apply in_map_iff in In_ as [dd [<- I]]; apply in_map;
                                 eapply incl_dims_In; eauto).
    rewrite (restrict_in Dy).
    - unfold j, upd_shard. rewrite upd_other; auto.
    - unfold incl_names in IXN. rewrite forallb_forall in IXN.
      apply in_map_iff in In_ as [dd [<- I]]. apply has_name_In, IXN; auto. }
  rewrite Ix. f_equal. f_equal. f_equal.
  rewrite (restrict_in D _ _ HvD), (restrict_in Dy _ _ HvDy).
  unfold j, upd_shard. rewrite upd_same. rewrite gpos_app1. simpl. f_equal. f_equal.
  rewrite Er. simpl. rewrite <- (lsize_of_perm _ _ _ _ PD ND). unfold lsize_of. rewrite Sl.
  unfold lsz. rewrite fold_left_app. simpl. auto.
Qed.
