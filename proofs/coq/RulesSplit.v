(** * RulesSplit: summing the partial contractions of blocks is the contraction (docs/rules.md,
    "collectives"; the row-parallel all-reduce law).

    allreduce-einsum-split:
    [ALL_REDUCE(EINSUM(..SHARD(x_i, d, a)..y_j.., o), a, sum) = EINSUM(..x_i..y_j.., o)].
    Checked: [d] is not an output name; every operand is [SHARD(x_i, d, a)] or an operand [y_j]
    without [d], and some operand of the right side has [d]; the [x_i] give [d] one spec [sh]
    (the left side's contraction sums [d] over the block [sh ++ [a]]); no [x_i], [y_j] varies
    over [a] (the checked "varies over" analysis); the two contractions have the same output
    names and operand names, and the same spec for every other summed name; the dims agree.
    The sizes: [|a|] divides [d]'s size after [sh] ([sizes_ok] of a block's node). *)

From Coq Require Import Reals Lra Lia List QArith ZArith PArith NArith Bool Permutation.
From Coq Require Import FSets.FMapPositive FunctionalExtensionality.
From Shardproof Require Import Base Num Pow Term Props RuleLib Congr Rel Shard RulesBasic RulesLift
  RulesAxis RulesEinsum RulesScalarOut RulesLiftEinsum RulesLiftReindex RulesEinsumMul.
Import ListNotations.
Open Scope R_scope.

(** ** Membership in the list of summed dims *)
Lemma In_contracted_iff : forall s T xs o n L,
  In (n, L) (contracted s T xs o) <->
  In n (op_names T xs) /\ existsb (Pos.eqb n) o = false /\
  L = match first_spec T xs n with Some sh => lsz s (s n) sh | None => 0%nat end.
Proof.
  intros s T xs o n L. unfold contracted, op_names. split.
  - intro I. apply in_map_iff in I as [m [E I]]. injection E as <- <-.
    apply filter_In in I as [I F]. apply In_nodup_pos in I as [I _].
    apply Bool.negb_true_iff in F. auto.
  - intros [I [F ->]]. apply in_map_iff. exists n. split; auto.
    apply filter_In. split; [apply In_nodup_pos; split; auto|]. rewrite F; auto.
Qed.

Lemma first_spec_In : forall T xs n sh, first_spec T xs n = Some sh ->
  exists x, In x xs /\ spec_of (ndims (node_at T x)) n = Some sh.
Proof.
  induction xs as [|x xs IH]; intros n sh H; simpl in H; try discriminate.
  destruct (spec_of (ndims (node_at T x)) n) as [sh'|] eqn:E.
  - injection H as <-. exists x; split; simpl; auto.
  - destruct (IH n sh H) as [y [I S]]. exists y; split; simpl; auto.
Qed.

Lemma first_spec_names : forall T xs n sh, first_spec T xs n = Some sh -> In n (op_names T xs).
Proof.
  intros T xs n sh H. destruct (first_spec_In T xs n sh H) as [x [I S]].
  unfold op_names. apply in_flat_map. exists x; split; auto.
  apply In_spec_of. congruence.
Qed.

Definition drop_name (d : name) (C : list (name * nat)) : list (name * nat) :=
  filter (fun p => negb (Pos.eqb (fst p) d)) C.

Lemma NoDup_drop : forall d C, NoDup (map fst C) -> NoDup (map fst (drop_name d C)).
Proof.
  intros d C ND. induction C as [|[n L] C IH]; simpl in *; auto.
  inversion ND as [|? ? NI ND']; subst.
  destruct (negb (Pos.eqb n d)); simpl; auto. constructor; auto.
  intro I. apply NI. apply in_map_iff in I as [[m L'] [E I]]. simpl in E; subst.
  unfold drop_name in I. apply filter_In in I as [I _]. apply in_map_iff. exists (n, L'); auto.
Qed.

Lemma NoDup_fst_pairs : forall (C : list (name * nat)), NoDup (map fst C) -> NoDup C.
Proof. intros. apply NoDup_map_inv with (f := fst); auto. Qed.

(** A sum over [C] holding [(d, L)] is the sum over [d] of the sum over the other names. *)
Lemma sumover_front : forall C d L f i, NoDup (map fst C) -> In (d, L) C ->
  sumover C f i = rsum L (fun k => sumover (drop_name d C) f (upd i d k)).
Proof.
  intros C d L f i ND I.
  assert (P : Permutation C ((d, L) :: drop_name d C)).
  { apply NoDup_Permutation.
    - apply NoDup_fst_pairs; auto.
    - apply NoDup_fst_pairs. simpl. constructor; [|apply NoDup_drop; auto].
      intro I'. apply in_map_iff in I' as [[m L'] [E I']]. simpl in E; subst.
      unfold drop_name in I'. apply filter_In in I' as [_ F]. simpl in F.
      rewrite Pos.eqb_refl in F. discriminate.
    - intros [n L']. simpl. unfold drop_name. rewrite filter_In. simpl. split.
      + intro I'. destruct (Pos.eqb_spec n d) as [->|Nd]; [left|right; auto].
        f_equal. clear -ND I I'. induction C as [|[m M] C IH]; simpl in *; [contradiction|].
        inversion ND as [|? ? NI ND']; subst.
        destruct I as [E|I], I' as [E'|I'].
        * congruence.
        * injection E as -> ->. exfalso. apply NI. apply in_map_iff. exists (d, L'); auto.
        * injection E' as -> ->. exfalso. apply NI. apply in_map_iff. exists (d, L); auto.
        * apply IH; auto.
      + intros [E|[I' _]]; [injection E as -> ->; auto|auto]. }
  rewrite (sumover_perm _ _ P ND). reflexivity.
Qed.

(** ** The shard dim: the dim of the first operand that is a block over [a] *)
Fixpoint shard_dim (T : table) (a : name) (As : list positive) : option name :=
  match As with
  | [] => None
  | A :: r => match node_at T A with
              | Node (OShard d a') [_] _ => if Pos.eqb a a' then Some d else shard_dim T a r
              | _ => shard_dim T a r
              end
  end.

Definition chk_allreduce_einsum_split (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l, node_at T r with
  | Node (OAllReduce a RSum) [e] Dl, Node (OEinsum o') Xs Dr =>
      match node_at T e with
      | Node (OEinsum o) As De =>
          match shard_dim T a As with
          | Some d =>
              match first_spec T Xs d with
              | Some sh =>
                  if names_eqb o o' && negb (existsb (Pos.eqb d) o) &&
                     dims_eqvb De Dl && dims_eqvb Dl Dr &&
                     forallb2 (lift_arg T d a) As Xs &&
                     forallb (fun X => invariant G X a) Xs &&
                     forallb (fun X => negb (has_name (ndims (node_at T X)) d) ||
                                       spec_opt_eqb (spec_of (ndims (node_at T X)) d) (Some sh)) Xs &&
                     spec_opt_eqb (first_spec T As d) (Some (sh ++ [SAx a])) &&
                     inclb (op_names T As) (op_names T Xs) && inclb (op_names T Xs) (op_names T As) &&
                     forallb (fun n => Pos.eqb n d || existsb (Pos.eqb n) o ||
                                       spec_opt_eqb (first_spec T As n) (first_spec T Xs n))
                             (op_names T As)
                  then Some [] else None
              | None => None
              end
          | None => None
          end
      | _ => None
      end
  | _, _ => None
  end.

Lemma chk_allreduce_einsum_split_sound : rule_sound chk_allreduce_einsum_split.
Proof.
  intros G l r h cl H c M _. pose proof M as M'. destruct M as [W [VC [SZ [F [DO P]]]]].
  unfold chk_allreduce_einsum_split in H. set (T := gT G) in *.
  destruct (node_at T l) as [ol es Dl] eqn:El. destruct ol; try discriminate.
  destruct r0; try discriminate. destruct es as [|e [|]]; try discriminate.
  destruct (node_at T r) as [or Xs Dr] eqn:Er. destruct or; try discriminate.
  destruct (node_at T e) as [oe As De] eqn:Ee. destruct oe; try discriminate.
  rename out into o', out0 into o.
  destruct (shard_dim T a As) as [d|] eqn:SD; try discriminate.
  destruct (first_spec T Xs d) as [sh|] eqn:FXd; try discriminate.
  match type of H with (if ?b then _ else _) = _ => destruct b eqn:B; try discriminate end.
  apply andb_prop in B as [B FS]. apply andb_prop in B as [B I2].
  apply andb_prop in B as [B I1]. apply andb_prop in B as [B FAd].
  apply andb_prop in B as [B SPX]. apply andb_prop in B as [B INV].
  apply andb_prop in B as [B LAR]. apply andb_prop in B as [B DE2].
  apply andb_prop in B as [B DE1]. apply andb_prop in B as [OO DO'].
  apply (list_eqb_eq _ _ (fun a b => proj1 (Pos.eqb_eq a b))) in OO; subst o'.
  apply Bool.negb_true_iff in DO'. apply spec_opt_eqb_eq in FAd.
  assert (NS : forall n, In n (op_names T As) <-> In n (op_names T Xs)).
  { intros n; split; intro I; [apply (inclb_In _ _ _ I1)|apply (inclb_In _ _ _ I2)]; auto. }
  assert (FSn : forall n, In n (op_names T As) -> n <> d -> existsb (Pos.eqb n) o = false ->
                first_spec T As n = first_spec T Xs n).
  { intros n I Nd No. rewrite forallb_forall in FS. specialize (FS n I).
    rewrite (proj2 (Pos.eqb_neq n d) Nd), No in FS. simpl in FS. apply spec_opt_eqb_eq; auto. }
  (* sizes: |a| * LA = LX *)
  set (LX := lsz (sz c) (sz c d) sh). set (LA := lsz (sz c) (sz c d) (sh ++ [SAx a])).
  assert (Ka : (0 < sz c a)%nat /\ LX = (sz c a * LA)%nat).
  { destruct (first_spec_In T As d _ FAd) as [A [IA SA]].
    pose proof (node_sizes_at _ _ SZ A) as NS'. unfold node_sizes_okb in NS'.
    apply andb_prop in NS' as [NS' _]. rewrite forallb_forall in NS'.
    specialize (NS' (d, sh ++ [SAx a]) (spec_of_In _ _ _ SA)). simpl in NS'.
    apply spec_divb_app1 in NS' as [K0 K1]. simpl in K0, K1. split; auto.
    unfold LA, LX. rewrite lsz_app1. simpl. apply Nat.div_exact; lia. }
  destruct Ka as [Ka0 KaL].
  assert (DXs : In d (op_names T Xs)) by (eapply first_spec_names; eauto).
  assert (DAs : In d (op_names T As)) by (eapply first_spec_names; eauto).
  set (CA := contracted (sz c) T As o). set (CX := contracted (sz c) T Xs o).
  assert (NDA : NoDup (map fst CA)).
  { unfold CA, contracted. rewrite map_map. simpl. rewrite map_id. apply NoDup_filter, NoDup_nodup_pos. }
  assert (NDX : NoDup (map fst CX)).
  { unfold CX, contracted. rewrite map_map. simpl. rewrite map_id. apply NoDup_filter, NoDup_nodup_pos. }
  assert (IA : In (d, LA) CA) by (apply In_contracted_iff; rewrite FAd; auto).
  assert (IX : In (d, LX) CX) by (apply In_contracted_iff; rewrite FXd; auto).
  assert (P0 : Permutation (drop_name d CA) (drop_name d CX)).
  { apply NoDup_Permutation; try (apply NoDup_fst_pairs, NoDup_drop; auto).
    intros [n L]. unfold drop_name, CA, CX. rewrite !filter_In. simpl. rewrite !In_contracted_iff.
    split; intros [[I [Fo EL]] Nd]; apply Bool.negb_true_iff, Pos.eqb_neq in Nd;
      (split; [|apply Bool.negb_true_iff, Pos.eqb_neq; auto]).
    - split; [apply NS; auto|split; auto]. rewrite EL, FSn; auto.
    - assert (I' : In n (op_names T As)) by (apply NS; auto).
      split; auto. split; auto. rewrite EL, FSn; auto. }
  assert (NC : ~ In d (map fst (drop_name d CX))).
  { intro I. apply in_map_iff in I as [[m L] [E I]]. simpl in E; subst.
    unfold drop_name in I. apply filter_In in I as [_ Fd]. simpl in Fd.
    rewrite Pos.eqb_refl in Fd. discriminate. }
  destruct (dims_eqvb_perm _ _ DE1) as [P1 N1]. destruct (dims_eqvb_perm _ _ DE2) as [P2 N2].
  apply (eqv_by_core c T l r _ _ Dl _ _ Dr W El Er DE2).
  intros rho R i Mi Ri. cbn [core map]. unfold vat; simpl nth.
  assert (Me : msk (sz c) De i = true) by (rewrite (msk_perm _ _ _ i P1); auto).
  assert (Re : restrict De i = i) by (rewrite (restrict_perm _ _ i P1); auto).
  rewrite (rsum_ext _ _ (fun r0 => sumover CA (fun j => prodl (map (fun v => v (upd rho a r0) j)
                                                      (map (den c T) As))) i)).
  2:{ intros r0 _. rewrite (den_in c T e _ _ _ _ i W Ee Me). cbn [core]. rewrite Re. auto. }
  change (contracted (sz c) T Xs o) with CX.
  rewrite (sumover_front CX d LX) by auto. rewrite KaL, rsum_blocks.
  apply rsum_ext. intros r0 Hr0.
  rewrite (sumover_front CA d LA) by auto.
  apply rsum_ext. intros k Hk.
  rewrite (sumover_perm _ _ P0) by (apply NoDup_drop; auto).
  rewrite !sumover_upd_out by auto.
  apply sumover_ext; auto. intros j _. cbv beta. rewrite !map_map. f_equal.
  destruct (forallb2_nth _ _ _ _ _ 1%positive 1%positive LAR) as [Len LK].
  apply nth_ext with (d := 0) (d' := 0); [rewrite !map_length; auto|].
  intros q Hq. rewrite map_length in Hq.
  rewrite (nth_indep _ _ (den c T 1%positive (upd rho a r0) (upd j d k))) by (rewrite map_length; auto).
  rewrite (nth_indep (map _ Xs) _ (den c T 1%positive rho (upd j d (r0 * LA + k))))
    by (rewrite map_length; lia).
  rewrite (map_nth (fun A => den c T A (upd rho a r0) (upd j d k))).
  rewrite (map_nth (fun X => den c T X rho (upd j d (r0 * LA + k)))).
  set (A := nth q As 1%positive). set (X := nth q Xs 1%positive).
  assert (IXq : In X Xs) by (apply nth_In; lia).
  assert (IVX : forall rho' r', den c T X (upd rho' a r') = den c T X rho').
  { intros. rewrite forallb_forall in INV. apply (invariant_ok G c X a M' (INV X IXq)). }
  specialize (LK q Hq). fold A X in LK. unfold lift_arg in LK.
  apply orb_prop in LK as [SA|[EAX NX]%andb_prop].
  - destruct (is_shard_info T A d a X SA) as [_ [HX [PA [NA NX]]]].
    assert (SpA : spec_of (ndims (node_at T A)) d = Some (sh ++ [SAx a])).
    { rewrite (spec_of_perm _ _ PA NA), spec_of_shard_dims, Pos.eqb_refl.
      rewrite forallb_forall in SPX. specialize (SPX X IXq). rewrite HX in SPX. simpl in SPX.
      apply spec_opt_eqb_eq in SPX. rewrite SPX; auto. }
    assert (LA' : lsize_of (sz c) (ndims (node_at T A)) d = LA) by (unfold lsize_of; rewrite SpA; auto).
    rewrite (shard_read_lt c T W A d a X _ _ SA) by (rewrite upd_same, LA'; auto).
    unfold upd_shard. rewrite LA', upd_upd_same, !upd_same, IVX. auto.
  - apply Pos.eqb_eq in EAX. fold A in EAX. rewrite EAX. apply Bool.negb_true_iff in NX.
    assert (NXd : ~ In d (map fst (ndims (node_at T X)))) by (rewrite <- has_name_In; congruence).
    rewrite IVX, !den_lacks; auto.
Qed.

(** the dim and axis of the first operand that is a block *)
Fixpoint shard_dim_any (T : table) (As : list positive) : option (name * name) :=
  match As with
  | [] => None
  | A :: r => match node_at T A with
              | Node (OShard d a) [_] _ => Some (d, a)
              | _ => shard_dim_any T r
              end
  end.

(** ** einsum-unit-axis: [EINSUM(..SHARD(x_i, d, a)..y_j.., o) = EINSUM(..x_i..y_j.., o)] when
    [|a| = 1] (a size fact of the certificate's binding): the one block is the whole dim. The
    same checks as allreduce-einsum-split but for the axis's size and the "varies over" test,
    which the lemma does not need (one rank). *)
Definition chk_einsum_unit_axis (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l, node_at T r with
  | Node (OEinsum o) As Dl, Node (OEinsum o') Xs Dr =>
      match shard_dim_any T As with
      | Some (d, a) =>
          match first_spec T Xs d with
          | Some sh =>
              if unit_axis G a && names_eqb o o' && negb (existsb (Pos.eqb d) o) &&
                 dims_eqvb Dl Dr && forallb2 (lift_arg T d a) As Xs &&
                 forallb (fun X => negb (has_name (ndims (node_at T X)) d) ||
                                   spec_opt_eqb (spec_of (ndims (node_at T X)) d) (Some sh)) Xs &&
                 spec_opt_eqb (first_spec T As d) (Some (sh ++ [SAx a])) &&
                 inclb (op_names T As) (op_names T Xs) && inclb (op_names T Xs) (op_names T As) &&
                 forallb (fun n => Pos.eqb n d || existsb (Pos.eqb n) o ||
                                   spec_opt_eqb (first_spec T As n) (first_spec T Xs n))
                         (op_names T As)
              then Some [] else None
          | None => None
          end
      | None => None
      end
  | _, _ => None
  end.

Lemma chk_einsum_unit_axis_sound : rule_sound chk_einsum_unit_axis.
Proof.
  intros G l r h cl H c M _. pose proof M as M'. destruct M as [W [VC [SZ [F [DO P]]]]].
  unfold chk_einsum_unit_axis in H. set (T := gT G) in *.
  destruct (node_at T l) as [ol As Dl] eqn:El. destruct ol; try discriminate.
  destruct (node_at T r) as [or Xs Dr] eqn:Er. destruct or; try discriminate.
  rename out into o, out0 into o'.
  destruct (shard_dim_any T As) as [[d a]|] eqn:SD; try discriminate.
  destruct (first_spec T Xs d) as [sh|] eqn:FXd; try discriminate.
  match type of H with (if ?b then _ else _) = _ => destruct b eqn:B; try discriminate end.
  apply andb_prop in B as [B FS]. apply andb_prop in B as [B I2].
  apply andb_prop in B as [B I1]. apply andb_prop in B as [B FAd].
  apply andb_prop in B as [B SPX]. apply andb_prop in B as [B LAR].
  apply andb_prop in B as [B DE]. apply andb_prop in B as [B DO'].
  apply andb_prop in B as [UA OO].
  apply (list_eqb_eq _ _ (fun a b => proj1 (Pos.eqb_eq a b))) in OO; subst o'.
  apply Bool.negb_true_iff in DO'. apply spec_opt_eqb_eq in FAd.
  pose proof (unit_axis_ok G c a M' UA) as A1.
  assert (NS : forall n, In n (op_names T As) <-> In n (op_names T Xs)).
  { intros n; split; intro I; [apply (inclb_In _ _ _ I1)|apply (inclb_In _ _ _ I2)]; auto. }
  assert (FSn : forall n, In n (op_names T As) -> n <> d -> existsb (Pos.eqb n) o = false ->
                first_spec T As n = first_spec T Xs n).
  { intros n I Nd No. rewrite forallb_forall in FS. specialize (FS n I).
    rewrite (proj2 (Pos.eqb_neq n d) Nd), No in FS. simpl in FS. apply spec_opt_eqb_eq; auto. }
  set (LX := lsz (sz c) (sz c d) sh).
  assert (LA : lsz (sz c) (sz c d) (sh ++ [SAx a]) = LX).
  { rewrite lsz_app1. simpl. rewrite A1, Nat.div_1_r. auto. }
  set (CA := contracted (sz c) T As o). set (CX := contracted (sz c) T Xs o).
  assert (NDA : NoDup (map fst CA)).
  { unfold CA, contracted. rewrite map_map. simpl. rewrite map_id. apply NoDup_filter, NoDup_nodup_pos. }
  assert (PC : Permutation CA CX).
  { apply NoDup_Permutation; try apply NoDup_fst_pairs; auto.
    { unfold CX, contracted. rewrite map_map. simpl. rewrite map_id. apply NoDup_filter, NoDup_nodup_pos. }
    intros [n L]. unfold CA, CX. rewrite !In_contracted_iff.
    destruct (Pos.eqb_spec n d) as [->|Nd].
    - rewrite FAd, FXd, LA. split; intros [I [Fo EL]]; (split; [apply NS; auto|]); auto.
    - split; intros [I [Fo EL]].
      + split; [apply NS; auto|split; auto]. rewrite EL, FSn; auto.
      + assert (I' : In n (op_names T As)) by (apply NS; auto).
        split; auto. split; auto. rewrite EL, FSn; auto. }
  assert (IX : In (d, LX) CX).
  { unfold CX. apply In_contracted_iff. rewrite FXd. split; [eapply first_spec_names; eauto|auto]. }
  destruct (dims_eqvb_perm _ _ DE) as [PD ND].
  apply (eqv_by_core c T l r _ _ Dl _ _ Dr W El Er DE).
  intros rho R i Mi Ri. cbn [core].
  change (contracted (sz c) T As o) with CA. change (contracted (sz c) T Xs o) with CX.
  rewrite (sumover_perm _ _ PC NDA).
  assert (NDX : NoDup (map fst CX)) by (apply (Permutation_NoDup (Permutation_map fst PC)); auto).
  apply sumover_ext_rng; auto. intros j Hj Hr.
  assert (Jd : (j d < LX)%nat) by (apply Hr; auto).
  assert (R0 : rho a = 0%nat) by (specialize (R a); lia).
  rewrite !map_map. f_equal.
  destruct (forallb2_nth _ _ _ _ _ 1%positive 1%positive LAR) as [Len LK].
  apply nth_ext with (d := 0) (d' := 0); [rewrite !map_length; auto|].
  intros q Hq. rewrite map_length in Hq.
  rewrite (nth_indep _ _ (den c T 1%positive rho j)) by (rewrite map_length; auto).
  rewrite (nth_indep (map _ Xs) _ (den c T 1%positive rho j)) by (rewrite map_length; lia).
  rewrite (map_nth (fun A => den c T A rho j)), (map_nth (fun X => den c T X rho j)).
  set (A := nth q As 1%positive). set (X := nth q Xs 1%positive).
  assert (IXq : In X Xs) by (apply nth_In; lia).
  specialize (LK q Hq). fold A X in LK. unfold lift_arg in LK.
  apply orb_prop in LK as [SA|[EAX NX]%andb_prop].
  - destruct (is_shard_info T A d a X SA) as [_ [HX [PA [NA NX]]]].
    assert (SpA : spec_of (ndims (node_at T A)) d = Some (sh ++ [SAx a])).
    { rewrite (spec_of_perm _ _ PA NA), spec_of_shard_dims, Pos.eqb_refl.
      rewrite forallb_forall in SPX. specialize (SPX X IXq). rewrite HX in SPX. simpl in SPX.
      apply spec_opt_eqb_eq in SPX. rewrite SPX; auto. }
    assert (LA' : lsize_of (sz c) (ndims (node_at T A)) d = LX)
      by (unfold lsize_of; rewrite SpA; auto).
    rewrite (shard_read_lt c T W A d a X _ _ SA) by (rewrite LA'; auto).
    unfold upd_shard. rewrite R0. simpl. rewrite upd_id. auto.
  - apply Pos.eqb_eq in EAX. fold A in EAX. rewrite EAX. auto.
Qed.
