(** * Shard: reading a block. [SHARD(x, d, a)] on rank [rho] at index [i] is [x] at
    [i] with [d] moved to [rho a * L + i d] ([L] the block's size); in range, that position is
    in [x]'s range when [|a|] divides [d]'s size before the shard ([sizes_ok]). *)

From Coq Require Import Reals Lra Lia List QArith ZArith PArith NArith Bool Permutation.
From Coq Require Import FSets.FMapPositive FunctionalExtensionality.
From Shardproof Require Import Base Num Pow Term Props RuleLib Congr Rel.
Import ListNotations.
Open Scope R_scope.

Definition shard_dims (D : list dimspec) (d a : name) : list dimspec :=
  map (fun p => if Pos.eqb (fst p) d then (fst p, snd p ++ [SAx a]) else p) D.

(** [s] is [SHARD(x, d, a)] and its dims are [x]'s with [a] appended to [d]'s shards. *)
Definition is_shard (T : table) (s : positive) (d a x : positive) : bool :=
  match node_at T s with
  | Node (OShard d' a') [x'] Ds =>
      Pos.eqb d d' && Pos.eqb a a' && Pos.eqb x x' && has_name (ndims (node_at T x)) d &&
      dims_eqvb Ds (shard_dims (ndims (node_at T x)) d a) &&
      nodup_posb (map fst (ndims (node_at T x)))
  | _ => false
  end.

Definition upd_shard (s : name -> nat) (D : list dimspec) (d a : name) (rho : Rk) (i : Ix) : Ix :=
  upd i d (rho a * lsize_of s D d + i d)%nat.

Lemma spec_of_shard_dims : forall D d a n, spec_of (shard_dims D d a) n =
  match spec_of D n with Some sh => Some (if Pos.eqb n d then sh ++ [SAx a] else sh) | None => None end.
Proof.
  induction D as [|[m sh] D IH]; intros; simpl; auto.
  destruct (Pos.eqb_spec m d) as [Emd|Nmd]; simpl;
    destruct (Pos.eqb_spec m n) as [Emn|Nmn]; subst; auto.
  - rewrite Pos.eqb_refl; auto.
  - rewrite (proj2 (Pos.eqb_neq n d) Nmd); auto.
Qed.

Lemma map_fst_shard_dims : forall D d a, map fst (shard_dims D d a) = map fst D.
Proof. induction D as [|[m sh] D IH]; intros; simpl; auto. destruct (Pos.eqb m d); simpl; f_equal; auto. Qed.

Lemma msk_iff : forall s D x, NoDup (map fst D) ->
  (msk s D x = true <-> forall n sh, spec_of D n = Some sh -> (x n < lsz s (s n) sh)%nat).
Proof.
  intros s D x ND. unfold msk. rewrite forallb_forall. split.
  - intros H n sh E. induction D as [|[m sh'] D IH]; simpl in E; try discriminate.
    destruct (Pos.eqb_spec m n).
    + injection E as <-. subst. specialize (H (n, sh')). simpl in H.
      apply Nat.ltb_lt, H. simpl; auto.
    + apply IH; auto. inversion ND; auto. intros; apply H; simpl; auto.
  - intros H [n sh] I. apply Nat.ltb_lt. apply H. simpl.
    clear H. induction D as [|[m sh'] D IH]; simpl in *; [contradiction|].
    inversion ND as [|? ? NI ND']; subst. destruct I as [E|I].
    + injection E as <- <-. rewrite Pos.eqb_refl; auto.
    + destruct (Pos.eqb_spec m n); subst; auto. exfalso; apply NI.
      apply in_map_iff; exists (n, sh); auto.
Qed.

Section Read.
Variable c : ctx.
Variable T : table.
Hypothesis W : wf_table T.
Hypothesis SZ : sizes_ok (sz c) T.

Lemma shard_range : forall s d a x rho i,
  is_shard T s d a x = true -> rk_ok (sz c) rho -> msk (sz c) (ndims (node_at T s)) i = true ->
  msk (sz c) (ndims (node_at T x)) (upd_shard (sz c) (ndims (node_at T s)) d a rho i) = true.
Proof.
  intros s d a x rho i H R M. unfold is_shard in H.
  destruct (node_at T s) as [o xs Ds] eqn:Es. destruct o; try discriminate.
  destruct xs as [|x' [|]]; try discriminate.
  repeat match type of H with _ && _ = true => apply andb_prop in H as [H ?] end. beq_to_eq.
  rename H0 into ND, H1 into DE, H2 into HN. simpl in *. apply nodup_posb_ok in ND.
  destruct (dims_eqvb_perm _ _ DE) as [P ND'].
  set (Dx := ndims (node_at T x')) in *.
  rewrite (msk_perm _ _ _ i P) in M.
  assert (NDs : NoDup (map fst (shard_dims Dx d0 a0))) by (rewrite map_fst_shard_dims; auto).
  rewrite msk_iff in M |- * by auto.
  intros n sh E. unfold upd_shard, upd.
  rewrite (lsize_of_perm _ _ _ _ P ND').
  destruct (Pos.eqb_spec n d0).
  - subst n. specialize (M d0 (sh ++ [SAx a0])). rewrite spec_of_shard_dims, E, Pos.eqb_refl in M.
    specialize (M eq_refl). unfold lsize_of. rewrite spec_of_shard_dims, E, Pos.eqb_refl.
    (* the block fits: rho a < |a| and |a| * L = lsz sh *)
    assert (Dv : spec_divb (sz c) (sz c d0) (sh ++ [SAx a0]) = true).
    { destruct SZ as [_ SZ']. assert (I : In (d0, sh ++ [SAx a0]) (ndims (node_at T s))).
      { rewrite Es; simpl. apply (Permutation_in _ (Permutation_sym P)).
        clear -E. induction Dx as [|[m sh'] D IH]; simpl in *; try discriminate.
        destruct (Pos.eqb_spec m d0); subst.
        - injection E as <-. left; auto.
        - right. auto. }
      pose proof (node_sizes_at _ _ SZ s) as NS. unfold node_sizes_okb in NS.
      apply andb_prop in NS as [NS _]. rewrite forallb_forall in NS. apply (NS _ I). }
    apply spec_divb_app1 in Dv as [K0 K1]. simpl in K0, K1.
    rewrite lsz_app1 in *. simpl in *. specialize (R a0).
    set (m := lsz (sz c) (sz c d0) sh) in *.
    assert (Em : m = (sz c a0 * (m / sz c a0))%nat) by (apply Nat.div_exact; lia).
    nia.
  - specialize (M n sh). rewrite spec_of_shard_dims, E in M.
    rewrite (proj2 (Pos.eqb_neq n d0) n0) in M. auto.
Qed.

Lemma shard_read : forall s d a x rho i,
  is_shard T s d a x = true -> msk (sz c) (ndims (node_at T s)) i = true ->
  den c T s rho i = den c T x rho (upd_shard (sz c) (ndims (node_at T s)) d a rho i).
Proof.
  intros s d a x rho i H M. unfold is_shard in H.
  destruct (node_at T s) as [o xs Ds] eqn:Es. destruct o; try discriminate.
  destruct xs as [|x' [|]]; try discriminate.
  repeat match type of H with _ && _ = true => apply andb_prop in H as [H ?] end. beq_to_eq.
  rename H0 into ND, H1 into DE, H2 into HN. simpl in *.
  rewrite (den_node c T s _ _ _ W Es), M. simpl. unfold vat; simpl.
  destruct (dims_eqvb_perm _ _ DE) as [P ND'].
  apply den_agree; auto. intros n In_.
  assert (InD : In n (map fst Ds)).
  { apply (Permutation_in _ (Permutation_map fst (Permutation_sym P))).
    rewrite map_fst_shard_dims. auto. }
  unfold upd_shard, upd. destruct (Pos.eqb_spec n d0).
  - subst. rewrite (restrict_in Ds i d0 InD). auto.
  - apply restrict_in; auto.
Qed.

End Read.
