(** * RulesGather: collectives over the blocks of a dim (docs/rules.md, "collectives"; issue 17).

    allreduce-max-shard: [ALL_REDUCE(REDUCE_MAX(SHARD(x, d, a), ds), a, max) = REDUCE_MAX(x, ds)]
    when [d] is among [ds] (no name twice) and [x] does not vary over [a] (the checked
    "varies over" analysis): the maximum over the ranks of [a] of the maxima over each block of
    [d] is the maximum over [d], as [|a|] blocks of size [L / |a|] tile [d]'s local size [L]
    ([sizes_ok] of the block's node; [Base.rmaxs_blocks]).

    allgather-shard-comm: [ALL_GATHER(SHARD(x, e, b), a, d) = SHARD(ALL_GATHER(x, a, d), e, b)]
    when [b <> a], [e <> d] and [x] does not vary over [b] (the rule's guard, tested; the lemma
    does not need the last one: both sides read the block of [e] on the same rank). Both sides
    read [x] on the rank of [a] that holds the gathered position of [d], at the same index. *)

From Coq Require Import Reals Lra Lia List QArith ZArith PArith NArith Bool Permutation.
From Coq Require Import FSets.FMapPositive FunctionalExtensionality.
From Shardproof Require Import Base Num Pow Term Props RuleLib Congr Rel Shard RulesBasic RulesLift
  RulesAxis RulesEinsum RulesScalarOut RulesLiftEinsum RulesLiftReindex RulesCollect RulesSplit
  RulesReorder.
Import ListNotations.
Open Scope R_scope.

(** ** Maxima over a list of dims, one of them moved to the front *)
Lemma maxover_perm : forall C C', Permutation C C' -> NoDup (map fst C) ->
  forall f i, maxover C f i = maxover C' f i.
Proof.
  intros C C' P. induction P; intros Hnd f i; auto.
  - destruct x as [n L]. simpl. apply rmaxs_ext; intros. apply IHP; auto.
    simpl in Hnd; inversion Hnd; auto.
  - destruct x as [n L], y as [n' L']. simpl in Hnd. inversion Hnd; subst.
    rewrite maxover_swap2. reflexivity. intro E; subst. apply H1; simpl; auto.
  - rewrite IHP1 by auto. apply IHP2; auto.
    apply (Permutation_NoDup (Permutation_map fst P1)); auto.
Qed.

Lemma maxover_front : forall C d L f i, NoDup (map fst C) -> In (d, L) C ->
  maxover C f i = rmaxs L (fun k => maxover (drop_name d C) f (upd i d k)).
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
  rewrite (maxover_perm _ _ P ND). reflexivity.
Qed.

Lemma drop_name_map : forall d (f g : name -> nat) ds, (forall n, n <> d -> f n = g n) ->
  drop_name d (map (fun n => (n, f n)) ds) = drop_name d (map (fun n => (n, g n)) ds).
Proof.
  intros d f g ds H. unfold drop_name. induction ds as [|n ds IH]; simpl; auto.
  destruct (Pos.eqb_spec n d) as [->|Nd]; simpl; auto.
  rewrite H by auto. f_equal; auto.
Qed.

Lemma not_in_drop : forall d C, ~ In d (map fst (drop_name d C)).
Proof.
  intros d C I. apply in_map_iff in I as [[m L] [E I]]. simpl in E; subst.
  unfold drop_name in I. apply filter_In in I as [_ F]. simpl in F.
  rewrite Pos.eqb_refl in F. discriminate.
Qed.

Lemma map_fst_pairs : forall (f : name -> nat) ds, map fst (map (fun n => (n, f n)) ds) = ds.
Proof. intros. rewrite map_map. simpl. apply map_id. Qed.

(** The spec of [d] in a block of [x] is [x]'s with [a] appended; [|a|] divides what is left. *)
Lemma shard_block_size : forall c T s d a x sh, sizes_ok (sz c) T -> is_shard T s d a x = true ->
  spec_of (ndims (node_at T x)) d = Some sh ->
  lsize_of (sz c) (ndims (node_at T s)) d = (lsz (sz c) (sz c d) sh / sz c a)%nat /\
  (0 < sz c a)%nat /\ (lsz (sz c) (sz c d) sh mod sz c a = 0)%nat.
Proof.
  intros c T s d a x sh SZ SH Sx.
  assert (Ss : spec_of (ndims (node_at T s)) d = Some (sh ++ [SAx a]))
    by (rewrite (spec_shard T s d a x d SH), Sx, Pos.eqb_refl; auto).
  assert (Dv : spec_divb (sz c) (sz c d) (sh ++ [SAx a]) = true).
  { pose proof (node_sizes_at _ _ SZ s) as NS. unfold node_sizes_okb in NS.
    apply andb_prop in NS as [NS _]. rewrite forallb_forall in NS.
    apply (NS (d, sh ++ [SAx a])), spec_of_In; auto. }
  apply spec_divb_app1 in Dv as [K0 K1]. simpl in K0, K1.
  split; auto. unfold lsize_of. rewrite Ss, lsz_app1. auto.
Qed.

(** ** allreduce-max-shard *)
Definition chk_allreduce_max_shard (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l, node_at T r with
  | Node (OAllReduce a RMax) [m] Dl, Node (OReduceMax ds') [x] Dr =>
      match node_at T m with
      | Node (OReduceMax ds) [s] Dm =>
          match node_at T s with
          | Node (OShard d a') [_] _ =>
              if Pos.eqb a a' && names_eqb ds ds' && nodup_posb ds && existsb (Pos.eqb d) ds &&
                 is_shard T s d a x && invariant G x a && dims_eqvb Dm Dl && dims_eqvb Dl Dr
              then Some [] else None
          | _ => None
          end
      | _ => None
      end
  | _, _ => None
  end.

Lemma chk_allreduce_max_shard_sound : rule_sound chk_allreduce_max_shard.
Proof.
  intros G l r h cl H c M _. pose proof M as M0. destruct M as [W [VC [SZ [F [DO P]]]]].
  unfold chk_allreduce_max_shard in H. set (T := gT G) in *.
  destruct (node_at T l) as [ol ms Dl] eqn:El. destruct ol; try discriminate.
  destruct r0; try discriminate. destruct ms as [|m [|]]; try discriminate.
  destruct (node_at T r) as [or xs Dr] eqn:Er. destruct or; try discriminate.
  destruct xs as [|x [|]]; try discriminate. rename ds into ds'.
  destruct (node_at T m) as [om ss Dm] eqn:Em. destruct om; try discriminate.
  destruct ss as [|s [|]]; try discriminate.
  destruct (node_at T s) as [os ys Ds] eqn:Es. destruct os; try discriminate.
  destruct ys as [|y [|]]; try discriminate. rename a0 into a'.
  match type of H with (if ?b then _ else _) = _ => destruct b eqn:B; try discriminate end.
  apply andb_prop in B as [B DE]. apply andb_prop in B as [B DM].
  apply andb_prop in B as [B INV]. apply andb_prop in B as [B SH].
  apply andb_prop in B as [B EX]. apply andb_prop in B as [B NDs].
  apply andb_prop in B as [AA DS].
  apply Pos.eqb_eq in AA; subst a'.
  apply (list_eqb_eq _ _ (fun a b => proj1 (Pos.eqb_eq a b))) in DS; subst ds'.
  apply nodup_posb_ok in NDs. apply existsb_pos_In in EX.
  destruct (is_shard_info T s d a x SH) as [_ [HX _]].
  destruct (dims_eqvb_perm _ _ DM) as [PM _].
  apply (eqv_by_core c T l r _ _ Dl _ _ Dr W El Er DE).
  intros rho R i Mi Ri. cbn [core map]. unfold vat; simpl nth.
  assert (Mm : msk (sz c) Dm i = true) by (rewrite (msk_perm _ _ _ i PM); auto).
  assert (Rm : restrict Dm i = i) by (rewrite (restrict_perm _ _ i PM); auto).
  set (Cs := map (fun n => (n, lsize_of (sz c) (ndims (node_at T s)) n)) ds).
  set (Cx := map (fun n => (n, lsize_of (sz c) (ndims (node_at T x)) n)) ds).
  rewrite (rmaxs_ext _ _ (fun r0 => maxover Cs (fun j => den c T s (upd rho a r0) j) i)).
  2:{ intros r0 _. rewrite (den_in c T m _ _ _ _ i W Em Mm), Rm. cbn [core map].
      unfold vat; simpl nth. reflexivity. }
  (* the sizes of d: L in x, L / |a| in the block *)
  apply has_name_In in HX. pose proof HX as HX'. apply In_spec_of in HX'.
  destruct (spec_of (ndims (node_at T x)) d) as [sh|] eqn:Sx; [|congruence].
  destruct (shard_block_size c T s d a x sh SZ SH Sx) as [LsE [K0 K1]].
  set (Lx := lsz (sz c) (sz c d) sh) in *.
  assert (LxE : lsize_of (sz c) (ndims (node_at T x)) d = Lx) by (unfold lsize_of; rewrite Sx; auto).
  set (k := sz c a) in *. set (Bk := (Lx / k)%nat) in *.
  assert (LxB : Lx = (k * Bk)%nat) by (apply Nat.div_exact; lia).
  assert (NCs : NoDup (map fst Cs)) by (unfold Cs; rewrite map_fst_pairs; auto).
  assert (NCx : NoDup (map fst Cx)) by (unfold Cx; rewrite map_fst_pairs; auto).
  assert (ICs : In (d, Bk) Cs).
  { pose proof (in_map (fun n => (n, lsize_of (sz c) (ndims (node_at T s)) n)) ds d EX) as I.
    simpl in I. rewrite LsE in I. auto. }
  assert (ICx : In (d, Lx) Cx).
  { pose proof (in_map (fun n => (n, lsize_of (sz c) (ndims (node_at T x)) n)) ds d EX) as I.
    simpl in I. rewrite LxE in I. auto. }
  assert (DC : drop_name d Cs = drop_name d Cx).
  { unfold Cs, Cx. apply drop_name_map. intros n Nd. unfold lsize_of.
    rewrite (spec_shard T s d a x n SH). destruct (spec_of _ n); auto.
    rewrite (proj2 (Pos.eqb_neq n d) Nd). auto. }
  assert (NC' : ~ In d (map fst (drop_name d Cx))) by apply not_in_drop.
  rewrite (maxover_front Cx d Lx _ _ NCx ICx).
  rewrite (rmaxs_ext _ _ (fun r0 => rmaxs Bk (fun j =>
             maxover (drop_name d Cx) (fun j' => den c T s (upd rho a r0) j') (upd i d j)))).
  2:{ intros r0 _. rewrite (maxover_front Cs d Bk _ _ NCs ICs), DC. reflexivity. }
  rewrite LxB, rmaxs_blocks. apply rmaxs_ext. intros r0 Hr. apply rmaxs_ext. intros j Hj.
  rewrite !maxover_upd_out by auto.
  apply maxover_ext; auto. intros j' _.
  rewrite (shard_read_lt c T W s d a x (upd rho a r0) (upd j' d j) SH)
    by (rewrite upd_same, LsE; auto).
  unfold upd_shard. rewrite !upd_same, upd_upd_same, LsE.
  rewrite (invariant_ok G c x a M0 INV). reflexivity.
Qed.

(** ** allgather-shard-comm *)
Definition chk_allgather_shard_comm (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l, node_at T r with
  | Node (OAllGather a d) [s] Dl, Node (OShard e b) [g] Dr =>
      match node_at T s, node_at T g with
      | Node (OShard e' b') [x] _, Node (OAllGather a' d') [x'] Dg =>
          if Pos.eqb a a' && Pos.eqb d d' && Pos.eqb e e' && Pos.eqb b b' && Pos.eqb x x' &&
             negb (Pos.eqb a b) && negb (Pos.eqb d e) && invariant G x b &&
             is_shard T s e b x && is_shard T r e b g && dims_eqvb Dl Dr && has_name Dl d &&
             spec_opt_eqb (spec_of Dl e) (spec_of (ndims (node_at T s)) e) &&
             incl_names (ndims (node_at T x)) Dg
          then Some [] else None
      | _, _ => None
      end
  | _, _ => None
  end.

Lemma chk_allgather_shard_comm_sound : rule_sound chk_allgather_shard_comm.
Proof.
  intros G l r h cl H c M _. destruct M as [W [VC [SZ [F [DO P]]]]].
  unfold chk_allgather_shard_comm in H. set (T := gT G) in *.
  destruct (node_at T l) as [ol ss Dl] eqn:El. destruct ol; try discriminate.
  destruct ss as [|s [|]]; try discriminate.
  destruct (node_at T r) as [or gs Dr] eqn:Er. destruct or; try discriminate.
  destruct gs as [|g [|]]; try discriminate. rename d0 into e, a0 into b.
  destruct (node_at T s) as [os xs Ds] eqn:Es. destruct os; try discriminate.
  destruct xs as [|x [|]]; try discriminate. rename d0 into e', a0 into b'.
  destruct (node_at T g) as [og xs' Dg] eqn:Eg. destruct og; try discriminate.
  destruct xs' as [|x' [|]]; try discriminate. rename d0 into d', a0 into a'.
  match type of H with (if ?b then _ else _) = _ => destruct b eqn:B; try discriminate end.
  apply andb_prop in B as [B IX]. apply andb_prop in B as [B SPe].
  apply andb_prop in B as [B HD]. apply andb_prop in B as [B DE].
  apply andb_prop in B as [B SR]. apply andb_prop in B as [B SS].
  apply andb_prop in B as [B _]. apply andb_prop in B as [B NDE].
  apply andb_prop in B as [B NAB]. apply andb_prop in B as [B X].
  apply andb_prop in B as [B Bb]. apply andb_prop in B as [B Ee].
  apply andb_prop in B as [Aa Dd].
  apply Pos.eqb_eq in Aa, Dd, Ee, Bb, X. subst a' d' e' b' x'.
  apply Bool.negb_true_iff, Pos.eqb_neq in NAB, NDE.
  apply spec_opt_eqb_eq in SPe. apply has_name_In in HD.
  destruct (dims_eqvb_perm _ _ DE) as [PD ND].
  destruct (is_shard_info T r e b g SR) as [_ [HGe [PR [NDr NDg]]]].
  rewrite Er in PR, NDr; simpl in PR, NDr. rewrite Eg in HGe, PR, NDg; simpl in HGe, PR, NDg.
  apply (eqv_by_core c T l r _ _ Dl _ _ Dr W El Er DE).
  intros rho R i Mi Ri. cbn [core map]. unfold vat; simpl nth.
  (* the spec of d: the same in the two gathers *)
  assert (SpD : spec_of Dg d = spec_of Dl d).
  { rewrite (spec_of_perm _ _ PD ND), (spec_of_perm _ _ PR NDr), spec_of_shard_dims.
    destruct (spec_of Dg d); auto. rewrite (proj2 (Pos.eqb_neq d e) NDE). auto. }
  set (L := lsz (sz c) (sz c d) ((match spec_of Dl d with Some sh => sh | None => [] end) ++ [SAx a])).
  assert (EDs : ndims (node_at T s) = Ds) by (rewrite Es; auto).
  (* the block size of e: the same in the two blocks *)
  assert (Le : lsize_of (sz c) Dr e = lsize_of (sz c) Ds e).
  { rewrite <- (lsize_of_perm _ _ _ e PD ND). apply spec_lsize. auto. }
  assert (Ie : (i e < lsize_of (sz c) Dl e)%nat).
  { apply lt_lsize; auto. apply (Permutation_in _ (Permutation_map fst (Permutation_sym PD))).
    apply (Permutation_in _ (Permutation_map fst (Permutation_sym PR))).
    rewrite map_fst_shard_dims. apply has_name_In; auto. }
  rewrite (lsize_of_perm _ _ _ e PD ND), Le in Ie.
  (* left: the block of x read on the gathering rank *)
  rewrite (shard_read_lt c T W s e b x _ _ SS) by (rewrite upd_other by congruence; rewrite EDs; auto).
  unfold upd_shard. rewrite EDs, <- Le.
  rewrite (upd_other rho a) by congruence. rewrite (upd_other i d) by congruence.
  (* right: the gather of x read at the block's position *)
  set (j := upd i e (rho b * lsize_of (sz c) Dr e + i e)%nat).
  assert (Mr : msk (sz c) (ndims (node_at T r)) i = true)
    by (rewrite Er; simpl; rewrite <- (msk_perm _ _ _ i PD); auto).
  pose proof (shard_range c T SZ r e b g rho i SR R Mr) as Mg.
  rewrite Er, Eg in Mg; cbn [ndims] in Mg. unfold upd_shard in Mg. fold j in Mg.
  rewrite (den_in c T g _ _ _ rho j W Eg Mg). cbn [core map]. unfold vat; simpl nth.
  rewrite SpD. fold L.
  assert (Dg_d : In d (map fst Dg)).
  { rewrite <- (map_fst_shard_dims Dg e b).
    apply (Permutation_in _ (Permutation_map fst PR)).
    apply (Permutation_in _ (Permutation_map fst PD)); auto. }
  assert (Dg_e : In e (map fst Dg)) by (apply has_name_In; auto).
  assert (Jd : restrict Dg j d = i d)
    by (rewrite restrict_in by auto; unfold j; rewrite upd_other; auto).
  rewrite Jd. apply den_agree; auto. intros n In_.
  assert (InG : In n (map fst Dg)).
  { unfold incl_names in IX. rewrite forallb_forall in IX.
    apply in_map_iff in In_ as [dd [<- I]]. apply has_name_In, IX; auto. }
  destruct (Pos.eqb_spec n d) as [->|Nd].
  { rewrite (upd_other _ e) by congruence. rewrite !upd_same. auto. }
  rewrite (upd_other (restrict Dg j) d) by auto.
  rewrite restrict_in by auto. unfold j.
  destruct (Pos.eqb_spec n e) as [->|Ne]; [rewrite !upd_same; auto|].
  rewrite !upd_other by auto. auto.
Qed.
