(** * Congr: equal children give equal parents.

    [core_congr]: two nodes with the same op and the same dims (as sets), whose children are
    pairwise equal on the ranks in range and have the same dims, have equal cores at every
    rank in range and index in range. The two contexts may differ in their inputs (a renaming
    of inputs, or a cut variable bound to a value); the op is then not an [INPUT]. *)

From Coq Require Import Reals Lra Lia List QArith ZArith PArith NArith Bool Permutation.
From Coq Require Import FSets.FMapPositive FunctionalExtensionality.
From Shardproof Require Import Base Num Pow Term Props RuleLib.
Import ListNotations.
Open Scope R_scope.

Lemma rk_ok_upd : forall s rho a r, rk_ok s rho -> (r < s a)%nat -> rk_ok s (upd rho a r).
Proof. intros s rho a r R H b. unfold upd. destruct (Pos.eqb_spec b a); subst; auto. Qed.

Lemma lsz_app1 : forall s n sh x, lsz s n (sh ++ [x]) = (lsz s n sh / kof s x)%nat.
Proof. intros. unfold lsz. rewrite fold_left_app. reflexivity. Qed.

Lemma spec_divb_app1 : forall s sh n x, spec_divb s n (sh ++ [x]) = true ->
  (0 < kof s x)%nat /\ (lsz s n sh mod kof s x = 0)%nat.
Proof.
  intros s sh; induction sh as [|y sh IH]; intros n x H; simpl in H.
  - apply andb_prop in H as [H _]. apply andb_prop in H as [H1 H2].
    apply Nat.ltb_lt in H1; apply Nat.eqb_eq in H2. unfold lsz; simpl; auto.
  - apply andb_prop in H as [_ H]. apply IH in H. unfold lsz in *; simpl; auto.
Qed.

(** [i < lsz(sh)] and [|a| * L = lsz(sh)] give [i / L < |a|] ([L = lsz(sh ++ [a])]). *)
Lemma gather_rank_ok : forall s n sh a i, spec_divb s n (sh ++ [SAx a]) = true ->
  (i < lsz s n sh)%nat -> (i / lsz s n (sh ++ [SAx a]) < s a)%nat.
Proof.
  intros s n sh a i D H. apply spec_divb_app1 in D as [D1 D2]. simpl in *.
  rewrite lsz_app1. simpl. set (m := lsz s n sh) in *.
  assert (E : m = (s a * (m / s a))%nat) by (apply Nat.div_exact; lia).
  apply Nat.div_lt_upper_bound.
  - intro Z. rewrite Z in E. lia.
  - rewrite Nat.mul_comm. lia.
Qed.

Lemma vat_eq : forall vs1 vs2 k rho, length vs1 = length vs2 ->
  (forall k, vat vs1 k rho = vat vs2 k rho) -> vat vs1 k rho = vat vs2 k rho.
Proof. auto. Qed.

Lemma map_app_eq : forall (vs1 vs2 : list V) rho x, length vs1 = length vs2 ->
  (forall k, vat vs1 k rho = vat vs2 k rho) ->
  map (fun v => v rho x) vs1 = map (fun v => v rho x) vs2.
Proof.
  induction vs1 as [|v vs1 IH]; destruct vs2 as [|w vs2]; simpl; intros; try discriminate; auto.
  f_equal.
  - specialize (H0 O). unfold vat in H0; simpl in H0. rewrite H0; auto.
  - apply IH; auto. intros k. specialize (H0 (S k)). auto.
Qed.

Lemma first_spec_congr : forall T xs1 xs2, length xs1 = length xs2 ->
  (forall k, (k < length xs1)%nat -> spec_of (ndims (node_at T (nth k xs1 1%positive))) =
             spec_of (ndims (node_at T (nth k xs2 1%positive)))) ->
  forall n, first_spec T xs1 n = first_spec T xs2 n.
Proof.
  induction xs1 as [|x xs1 IH]; destruct xs2 as [|y xs2]; simpl; intros; try discriminate; auto.
  rewrite (H0 O) by lia; simpl. destruct (spec_of _ n); auto. apply IH; auto.
  intros k Hk; apply (H0 (S k)); lia.
Qed.

Lemma In_spec_of : forall D n, In n (map fst D) <-> spec_of D n <> None.
Proof.
  induction D as [|[m sh] D IH]; simpl; intros; split; intros H; try tauto.
  - destruct (Pos.eqb_spec m n); try discriminate. destruct H; try congruence. apply IH; auto.
  - destruct (Pos.eqb_spec m n); auto. right; apply IH; auto.
Qed.

(** The contracted dims of two einsums with pairwise set-equal operand dims are a permutation. *)
Lemma contracted_perm : forall s T xs1 xs2 out, length xs1 = length xs2 ->
  (forall k, (k < length xs1)%nat -> Permutation (ndims (node_at T (nth k xs1 1%positive)))
                         (ndims (node_at T (nth k xs2 1%positive))) /\
             NoDup (map fst (ndims (node_at T (nth k xs1 1%positive))))) ->
  Permutation (contracted s T xs1 out) (contracted s T xs2 out) /\
  NoDup (map fst (contracted s T xs1 out)).
Proof.
  intros s T xs1 xs2 out L H.
  assert (FS : forall n, first_spec T xs1 n = first_spec T xs2 n).
  { apply first_spec_congr; auto. intros k Hk. apply functional_extensionality; intro n.
    destruct (H k Hk) as [P N]. apply spec_of_perm; auto. }
  unfold contracted.
  set (g1 := fun n => (n, match first_spec T xs1 n with Some sh => lsz s (s n) sh | None => 0%nat end)).
  set (g2 := fun n => (n, match first_spec T xs2 n with Some sh => lsz s (s n) sh | None => 0%nat end)).
  assert (Eg : forall n, g1 n = g2 n) by (intros; unfold g1, g2; rewrite FS; auto).
  rewrite (map_ext g1 g2 Eg).
  set (N1 := flat_map (fun x => map fst (ndims (node_at T x))) xs1).
  set (N2 := flat_map (fun x => map fst (ndims (node_at T x))) xs2).
  assert (SN : forall n, In n N1 <-> In n N2).
  { intros n. unfold N1, N2. rewrite !in_flat_map. clear -L H.
    revert xs2 L H. induction xs1 as [|x xs1 IH]; destruct xs2 as [|y xs2]; simpl; intros; try discriminate.
    - split; intros [? [[] _]].
    - destruct (H O ltac:(simpl; lia)) as [P _]; simpl in P.
      assert (H' : forall k, (k < length xs1)%nat ->
                 Permutation (ndims (node_at T (nth k xs1 1%positive)))
                             (ndims (node_at T (nth k xs2 1%positive))) /\
                 NoDup (map fst (ndims (node_at T (nth k xs1 1%positive)))))
        by (intros k Hk; apply (H (S k)); simpl; lia).
      split.
      + intros [z [[<-|Iz] Hn]].
        * exists y; split; auto. apply (Permutation_in _ (Permutation_map fst P)); auto.
        * destruct (proj1 (IH xs2 ltac:(lia) H')) as [w [Iw Hw]]; eauto.
      + intros [z [[<-|Iz] Hn]].
        * exists x; split; auto. apply (Permutation_in _ (Permutation_map fst (Permutation_sym P))); auto.
        * destruct (proj2 (IH xs2 ltac:(lia) H')) as [w [Iw Hw]]; eauto. }
  split.
  - apply Permutation_map. apply NoDup_Permutation.
    + apply NoDup_filter, NoDup_nodup_pos.
    + apply NoDup_filter, NoDup_nodup_pos.
    + intros n. rewrite !filter_In, !In_nodup_pos. rewrite SN. tauto.
  - rewrite map_map. simpl. rewrite map_id. apply NoDup_filter, NoDup_nodup_pos.
Qed.

Lemma msk_spec : forall s D x n sh, msk s D x = true -> spec_of D n = Some sh ->
  (x n < lsz s (s n) sh)%nat.
Proof.
  intros s D x n sh M; induction D as [|[m sh'] D IH]; simpl in *; try discriminate.
  apply andb_prop in M as [M1 M2]. destruct (Pos.eqb_spec m n); auto.
  intros E; injection E as <-; subst. apply Nat.ltb_lt in M1; auto.
Qed.

Lemma topk_congr : forall L k e f1 f2 el1 el2 rho x, f1 rho = f2 rho ->
  match el1, el2 with Some w1, Some w2 => w1 rho = w2 rho | None, None => True | _, _ => False end ->
  topk L k e f1 el1 rho x = topk L k e f2 el2 rho x.
Proof.
  intros. unfold topk. rewrite H. destruct el1, el2; try contradiction; auto. rewrite H0; auto.
Qed.

Lemma concat_congr : forall (vs1 vs2 : list V) (ls : list nat) d rho x j,
  length vs1 = length vs2 -> (forall k, vat vs1 k rho = vat vs2 k rho) ->
  concat_at (combine vs1 ls) d rho x j = concat_at (combine vs2 ls) d rho x j.
Proof.
  induction vs1 as [|v vs1 IH]; destruct vs2 as [|w vs2]; intros ls d rho x j L H; simpl in *;
    try discriminate; auto.
  destruct ls as [|n ls]; simpl; auto.
  pose proof (H O) as H0. unfold vat in H0; simpl in H0. rewrite H0.
  destruct (Nat.ltb j n); auto. apply IH; auto. intros k; apply (H (S k)).
Qed.

Section CoreCongr.
Variables c1 c2 : ctx.
Hypothesis Hsz : sz c1 = sz c2.
Hypothesis Hpo : po c1 = po c2.
Hypothesis Huf : uf c1 = uf c2.
Hypothesis P1 : po_ok c1.
Hypothesis S1 : forall n, (1 <= sz c1 n)%nat.
Variable T : table.

Lemma core_congr : forall o xs1 xs2 D1 D2 vs1 vs2 rho x,
  (forall nm d, o <> OInput nm d) ->
  node_sizes_okb (sz c1) T (Node o xs1 D1) = true ->
  dims_eqvb D1 D2 = true ->
  length xs1 = length xs2 -> length vs1 = length xs1 -> length vs2 = length xs2 ->
  (forall k, (k < length xs1)%nat -> Permutation (ndims (node_at T (nth k xs1 1%positive)))
                         (ndims (node_at T (nth k xs2 1%positive))) /\
             NoDup (map fst (ndims (node_at T (nth k xs1 1%positive))))) ->
  (forall k r, rk_ok (sz c1) r -> vat vs1 k r = vat vs2 k r) ->
  rk_ok (sz c1) rho -> msk (sz c1) D1 x = true -> restrict D1 x = x ->
  core c1 T o xs1 D1 vs1 rho x = core c2 T o xs2 D2 vs2 rho x.
Proof.
  intros o xs1 xs2 D1 D2 vs1 vs2 rho x NI SZ DE L L1 L2 CH V R M RX.
  destruct (dims_eqvb_perm _ _ DE) as [P ND].
  assert (LS : forall n, lsize_of (sz c1) D2 n = lsize_of (sz c1) D1 n)
    by (intros; symmetry; apply lsize_of_perm; auto).
  assert (SP : forall n, spec_of D2 n = spec_of D1 n) by (intros; symmetry; apply spec_of_perm; auto).
  assert (LV : length vs1 = length vs2) by lia.
  assert (VR := V). 
  unfold core. rewrite <- Hsz, <- Hpo. simpl in SZ.
  assert (Rk0 : forall d, (spec_of D1 d = None -> x d = 0%nat)).
  { intros d E. rewrite <- RX. apply restrict_out. intro I. apply In_spec_of in I; auto. }
  assert (Gat : forall a d, spec_divb (sz c1) (sz c1 d)
                  (match spec_of D1 d with Some sh => sh | None => [] end ++ [SAx a]) = true ->
                (x d / lsz (sz c1) (sz c1 d)
                   ((match spec_of D1 d with Some sh => sh | None => [] end) ++ [SAx a]) < sz c1 a)%nat).
  { intros a d H. destruct (spec_of D1 d) as [sh|] eqn:E.
    - apply gather_rank_ok; auto. apply (msk_spec _ D1); auto.
    - rewrite (Rk0 d E). destruct (lsz _ _ _); simpl; specialize (S1 a); lia. }
  apply andb_prop in SZ as [_ SZ].
  destruct o; simpl; try rewrite !LS; try rewrite !SP; try reflexivity.
  - (* INPUT *) exfalso; eapply NI; eauto.
  - (* ADD *) rewrite (map_app_eq vs1 vs2 rho x LV (fun k => V k rho R)); auto.
  - (* MUL *) rewrite (map_app_eq vs1 vs2 rho x LV (fun k => V k rho R)); auto.
  - (* UN *) unfold uval. rewrite Huf, (V O rho R); auto.
  - (* POW *) rewrite (V O rho R); auto.
  - (* MAXIMUM *) rewrite (V O rho R), (V 1%nat rho R); auto.
  - (* WHERE *) rewrite (V O rho R), (V 1%nat rho R), (V 2%nat rho R); auto.
  - (* EINSUM *)
    destruct (contracted_perm (sz c1) T xs1 xs2 out L CH) as [CP CN].
    rewrite (sumover_perm _ _ CP CN). f_equal. apply functional_extensionality; intro j.
    rewrite (map_app_eq vs1 vs2 rho j LV (fun k => V k rho R)); auto.
  - (* REDUCE_MAX *)
    assert (E : forall d, lsize_of (sz c1) (match xs1 with x :: _ => ndims (node_at T x) | [] => [] end) d =
                          lsize_of (sz c1) (match xs2 with x :: _ => ndims (node_at T x) | [] => [] end) d).
    { intros d. destruct xs1 as [|x1 xs1], xs2 as [|x2 xs2]; simpl in L; try discriminate; auto.
      destruct (CH O ltac:(simpl; lia)) as [Pk Nk]. simpl in Pk, Nk. apply lsize_of_perm; auto. }
    rewrite (map_ext _ _ (fun d => f_equal (fun m => (d, m)) (E d))).
    f_equal. apply functional_extensionality; intro j. rewrite (V O rho R); auto.
  - (* ONE_HOT *) rewrite (V O rho R); auto.
  - (* TOPK *)
    apply topk_congr; [apply V; auto|].
    destruct vs1 as [|v1 [|w1 [|]]], vs2 as [|v2 [|w2 [|]]]; simpl in LV; try discriminate; auto.
    apply (V 1%nat rho R).
  - (* RENAME *) rewrite (V O rho R); auto.
  - (* CHUNK *) rewrite (V O rho R); auto.
  - (* CONCAT *)
    assert (E : map (fun x => lsize_of (sz c1) (ndims (node_at T x)) d) xs1 =
                map (fun x => lsize_of (sz c1) (ndims (node_at T x)) d) xs2).
    { clear -L CH. revert xs2 L CH. induction xs1 as [|x1 xs1 IH]; destruct xs2 as [|x2 xs2];
        simpl; intros; try discriminate; auto.
      destruct (CH O ltac:(simpl; lia)) as [Pk Nk]. simpl in Pk, Nk. f_equal.
      - apply lsize_of_perm; auto.
      - apply IH; auto. intros k Hk; apply (CH (S k)); simpl; lia. }
    rewrite E. apply concat_congr; auto.
  - (* PERMUTE *) rewrite (V O rho R); auto.
  - (* SHIFT *) rewrite (V O rho R); auto.
  - (* SHARD *) rewrite (V O rho R); auto.
  - (* PART *)
    destruct P1 as [_ [_ P3]]. rewrite (P3 a (vat vs1 0) (vat vs2 0)); auto.
  - (* ALL_REDUCE *)
    destruct r; [apply rsum_ext|apply rmaxs_ext]; intros r Hr;
      rewrite (V O (upd rho a r)) by (apply rk_ok_upd; auto); auto.
  - (* ALL_GATHER *)
    rewrite (V O); auto. apply rk_ok_upd; auto.
  - (* REDUCE_SCATTER *)
    apply rsum_ext; intros r Hr. rewrite (V O (upd rho a r)) by (apply rk_ok_upd; auto); auto.
  - (* BROADCAST *)
    apply Nat.ltb_lt in SZ. rewrite (V O); auto. apply rk_ok_upd; auto.
  - (* ALL_TO_ALL *)
    rewrite (V O); auto. apply rk_ok_upd; auto.
Qed.
End CoreCongr.
