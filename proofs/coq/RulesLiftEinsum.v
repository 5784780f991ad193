(** * RulesLiftEinsum: [SHARD] moves out of a contraction that keeps its dim (docs/rules.md).

    lift-shard-einsum: [EINSUM(..SHARD(x_i, d, a)..y_j.., out) = SHARD(EINSUM(..x_i..y_j.., out), d, a)]
    where [d] is an output name. Checked: every operand is [SHARD(x_i, d, a)] or an operand
    [y_j] without [d], at least one is a block, the blocks give [d] the spec it has in the
    result, the two contractions have the same output names and sum over the same names with
    the same specs (so the same local sizes), and the dims agree. The rule's guard also asks
    that no operand varies over [a]; the lemma does not need it (a block is read on the same
    rank on both sides), so Coq does not test it. *)

From Coq Require Import Reals Lra Lia List QArith ZArith PArith NArith Bool Permutation.
From Coq Require Import FSets.FMapPositive FunctionalExtensionality.
From Shardproof Require Import Base Num Pow Term Props RuleLib Congr Rel Shard RulesBasic RulesLift
  RulesEinsum RulesScalarOut.
Import ListNotations.
Open Scope R_scope.

(** A sum over names other than [n] commutes with setting [n]. *)
Lemma sumover_upd_out : forall C f i n v, ~ In n (map fst C) ->
  sumover C f (upd i n v) = sumover C (fun j => f (upd j n v)) i.
Proof.
  induction C as [|[m L] C IH]; intros f i n v N; simpl; auto.
  apply rsum_ext. intros k _. rewrite upd_comm by (intro E; subst; apply N; simpl; auto).
  apply IH. intro I; apply N; simpl; auto.
Qed.

Section ReadAll.
Variable c : ctx.
Variable T : table.
Hypothesis W : wf_table T.

(** A block read at a position of its dim within the block size, in range or not. *)
Lemma shard_read_lt : forall s d a x rho i, is_shard T s d a x = true ->
  (i d < lsize_of (sz c) (ndims (node_at T s)) d)%nat ->
  den c T s rho i = den c T x rho (upd_shard (sz c) (ndims (node_at T s)) d a rho i).
Proof.
  intros s d a x rho i H Lt.
  destruct (msk (sz c) (ndims (node_at T s)) i) eqn:M; [apply shard_read; auto|].
  rewrite (den_msk0 c T W s rho i M).
  destruct (msk (sz c) (ndims (node_at T x)) (upd_shard (sz c) (ndims (node_at T s)) d a rho i)) eqn:Mx.
  2:{ rewrite (den_msk0 c T W x _ _ Mx); auto. }
  exfalso. destruct (is_shard_info T s d a x H) as [_ [_ [P [NDs NDx]]]].
  assert (Ms : msk (sz c) (ndims (node_at T s)) i = true); [|congruence].
  rewrite (msk_perm _ _ _ i P). rewrite (msk_perm _ _ _ i P) in M.
  assert (NDsh : NoDup (map fst (shard_dims (ndims (node_at T x)) d a)))
    by (rewrite map_fst_shard_dims; auto).
  apply msk_iff; auto. intros n sh E.
  rewrite spec_of_shard_dims in E.
  destruct (spec_of (ndims (node_at T x)) n) as [shx|] eqn:Ex; try discriminate.
  injection E as <-. destruct (Pos.eqb_spec n d) as [->|Nd].
  - rewrite (lsize_of_perm _ _ _ _ P NDs) in Lt. unfold lsize_of in Lt.
    rewrite spec_of_shard_dims, Ex, Pos.eqb_refl in Lt. auto.
  - pose proof (msk_spec _ _ _ n shx Mx Ex) as L. unfold upd_shard in L.
    rewrite upd_other in L by auto. auto.
Qed.
End ReadAll.

(** [A] is a block of [X] along [d] over [a], or [X] itself when [X] lacks [d]. *)
Definition chk_lift_einsum (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l, node_at T r with
  | Node (OEinsum o) As D, Node (OShard d a) [y] Dr =>
      match node_at T y with
      | Node (OEinsum o') Xs Dy =>
          if names_eqb o o' && existsb (Pos.eqb d) o && dims_eqvb D Dr && is_shard T r d a y &&
             forallb2 (lift_arg T d a) As Xs && negb (list_eqb Pos.eqb As Xs) &&
             forallb (fun A => negb (has_name (ndims (node_at T A)) d) ||
                               spec_opt_eqb (spec_of (ndims (node_at T A)) d) (spec_of D d)) As &&
             inclb (op_names T As) (op_names T Xs) && inclb (op_names T Xs) (op_names T As) &&
             forallb (fun n => existsb (Pos.eqb n) o ||
                               spec_opt_eqb (first_spec T As n) (first_spec T Xs n)) (op_names T As)
          then Some [] else None
      | _ => None
      end
  | _, _ => None
  end.

Lemma chk_lift_einsum_sound : rule_sound chk_lift_einsum.
Proof.
  intros G l r h cl H c M _. destruct M as [W [VC [SZ [F [DO P]]]]].
  unfold chk_lift_einsum in H. set (T := gT G) in *.
  destruct (node_at T l) as [o As D] eqn:El. destruct (node_at T r) as [o2 ys Dr] eqn:Er.
  destruct o; try discriminate. destruct o2; try discriminate.
  destruct ys as [|y [|]]; try discriminate.
  destruct (node_at T y) as [oy Xs Dy] eqn:Ey. destruct oy; try discriminate.
  match type of H with (if ?b then _ else _) = _ => destruct b eqn:B; try discriminate end.
  repeat match type of B with _ && _ = true => apply andb_prop in B as [B ?] end.
  rename H0 into FS, H1 into I2, H2 into I1, H3 into DS, H4 into NE, H5 into LA, H6 into SR,
    H7 into DE, H8 into DO', B into OO.
  apply (list_eqb_eq _ _ (fun a b => proj1 (Pos.eqb_eq a b))) in OO; subst out0.
  apply existsb_pos_In in DO'.
  destruct (contracted_same (sz c) T As Xs out) as [CP CN].
  { intros n; split; intro I; [apply (inclb_In _ _ _ I1)|apply (inclb_In _ _ _ I2)]; auto. }
  { intros n I NO. rewrite forallb_forall in FS. specialize (FS n I). rewrite NO in FS.
    simpl in FS. apply spec_opt_eqb_eq; auto. }
  destruct (dims_eqvb_perm _ _ DE) as [PD ND].
  destruct (is_shard_info T r d a y SR) as [_ [Hyd [PR [NDr NDy]]]].
  rewrite Er, Ey in PR; simpl in PR. rewrite Ey in Hyd; simpl in Hyd.
  (* d is not summed over *)
  assert (NC : ~ In d (map fst (contracted (sz c) T As out))).
  { unfold contracted. rewrite map_map. simpl. rewrite map_id. intro I.
    apply filter_In in I as [_ I]. apply existsb_pos_In in DO'. rewrite DO' in I. discriminate. }
  apply (eqv_by_core c T l r _ _ D _ _ Dr W El Er DE).
  intros rho R x Mx Rx. cbn [core map]. unfold vat; simpl nth.
  set (L := lsize_of (sz c) Dr d).
  assert (Mr : msk (sz c) (ndims (node_at T r)) x = true) by (rewrite Er; simpl; rewrite <- (msk_perm _ _ _ x PD); auto).
  pose proof (shard_range c T SZ r d a y rho x SR R Mr) as My.
  rewrite Er, Ey in My; simpl in My. unfold upd_shard in My. fold L in My.
  rewrite (den_node c T y _ _ _ W Ey), My. cbn [core].
  (* x is in range along d *)
  assert (Dd : In d (map fst D)).
  { apply (Permutation_in _ (Permutation_map fst (Permutation_sym PD))).
    apply (Permutation_in _ (Permutation_map fst (Permutation_sym PR))).
    rewrite map_fst_shard_dims. apply has_name_In; auto. }
  assert (XL : (x d < L)%nat).
  { apply In_spec_of in Dd. destruct (spec_of D d) as [sh|] eqn:Sd; [|congruence].
    unfold L. rewrite <- (lsize_of_perm _ _ _ _ PD ND). unfold lsize_of. rewrite Sd.
    apply (msk_spec _ _ _ d sh Mx Sd). }
  (* the names of y are those of l *)
  assert (NY : forall m, In m (map fst Dy) <-> In m (map fst D)).
  { intros m. rewrite <- (map_fst_shard_dims Dy d a). split; intro I.
    - apply (Permutation_in _ (Permutation_map fst (Permutation_sym PD))).
      apply (Permutation_in _ (Permutation_map fst (Permutation_sym PR))); auto.
    - apply (Permutation_in _ (Permutation_map fst PR)).
      apply (Permutation_in _ (Permutation_map fst PD)); auto. }
  rewrite (sumover_perm _ _ CP CN).
  symmetry. rewrite (sumover_ext _ _ (fun j => prodl (map (fun v => v rho j) (map (den c T) Xs)))
                       _ (upd x d (rho a * L + x d)%nat)); cycle 1.
  { intros m Hm. destruct (in_dec Pos.eq_dec m (map fst Dy)) as [I|I].
    - apply restrict_in; auto.
    - rewrite restrict_out by auto. rewrite upd_other by (intro E; subst; apply I, NY; auto).
      rewrite <- Rx, restrict_out; auto. rewrite <- NY; auto. }
  { auto. }
  rewrite sumover_upd_out
    by (intro I; apply NC; apply (Permutation_in _ (Permutation_map fst (Permutation_sym CP))); auto).
  symmetry. apply sumover_ext; auto. intros j Hj.
  assert (Jd : j d = x d).
  { apply Hj. intro I. apply NC. apply (Permutation_in _ (Permutation_map fst (Permutation_sym CP))); auto. }
  cbv beta. rewrite !map_map. f_equal.
  destruct (forallb2_nth _ _ _ _ _ 1%positive 1%positive LA) as [Len LK].
  apply nth_ext with (d := 0) (d' := 0); [rewrite !map_length; auto|].
  intros k Hk. rewrite map_length in Hk.
  rewrite (nth_indep _ _ (den c T 1%positive rho j)) by (rewrite map_length; auto).
  rewrite (nth_indep (map _ Xs) _ (den c T 1%positive rho (upd j d (rho a * L + x d)%nat)))
    by (rewrite map_length; lia).
  rewrite (map_nth (fun A => den c T A rho j)), (map_nth (fun X => den c T X rho (upd j d (rho a * L + x d)%nat))).
  set (A := nth k As 1%positive). set (X := nth k Xs 1%positive).
  specialize (LK k Hk). fold A X in LK. unfold lift_arg in LK.
  apply orb_prop in LK as [SA|[EAX NX]%andb_prop].
  - destruct (is_shard_info T A d a X SA) as [_ [HX [PA [NA _]]]].
    assert (SpA : spec_of (ndims (node_at T A)) d = spec_of D d).
    { rewrite forallb_forall in DS. assert (IA : In A As) by (apply nth_In; auto).
      specialize (DS A IA). apply orb_prop in DS as [NH|SE].
      - exfalso. apply Bool.negb_true_iff in NH. apply has_name_In in HX.
        rewrite <- (map_fst_shard_dims _ d a) in HX.
        apply (Permutation_in _ (Permutation_map fst (Permutation_sym PA))) in HX.
        apply has_name_In in HX; congruence.
      - apply spec_opt_eqb_eq; auto. }
    assert (LA' : lsize_of (sz c) (ndims (node_at T A)) d = L).
    { unfold L. rewrite <- (lsize_of_perm _ _ _ _ PD ND). unfold lsize_of. rewrite SpA; auto. }
    rewrite (shard_read_lt c T W A d a X rho j SA) by (rewrite LA', Jd; auto).
    unfold upd_shard. rewrite LA', Jd. auto.
  - apply Pos.eqb_eq in EAX. rewrite EAX. apply Bool.negb_true_iff in NX.
    symmetry. apply den_lacks; auto.
    rewrite <- has_name_In. congruence.
Qed.
