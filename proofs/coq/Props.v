(** * Props: what every node's meaning satisfies.

    - [den_agree]: a node reads the index only at its own dims;
    - [vary_sound]: a node depends on the rank only through the mesh axes it varies over
      (docs/rules.md s.2 "varying"), for the analysis [vary_of] checked by [vary_checkb];
    - sizes: the divisibility facts of a node's dims ([sizes_ok]). *)

From Coq Require Import Reals Lra Lia List QArith ZArith PArith NArith Bool.
From Coq Require Import FSets.FMapPositive FunctionalExtensionality.
From Shardproof Require Import Base Num Pow Term.
Import ListNotations.
Open Scope R_scope.

(** ** Names and masks *)
Lemma has_name_In : forall D n, has_name D n = true <-> In n (map fst D).
Proof.
  intros D n. unfold has_name. rewrite existsb_exists. split.
  - intros [d [H E]]. apply Pos.eqb_eq in E. subst. apply in_map; auto.
  - intros H. apply in_map_iff in H as [d [E H]]. exists d; split; auto. apply Pos.eqb_eq; auto.
Qed.

Lemma restrict_in : forall D i n, In n (map fst D) -> restrict D i n = i n.
Proof. intros. unfold restrict. apply has_name_In in H. rewrite H; auto. Qed.

Lemma restrict_out : forall D i n, ~ In n (map fst D) -> restrict D i n = 0%nat.
Proof.
  intros. unfold restrict. destruct (has_name D n) eqn:E; auto.
  apply has_name_In in E; tauto.
Qed.

Definition agree (S : list name) (i j : Ix) := forall n, In n S -> i n = j n.

Lemma msk_agree : forall s D i j, agree (map fst D) i j -> msk s D i = msk s D j.
Proof.
  intros s D i j A. unfold msk. induction D as [|d D IH]; simpl; auto.
  rewrite (A (fst d)) by (simpl; auto). rewrite IH; auto.
  intros n Hn; apply A; simpl; auto.
Qed.

Lemma restrict_agree : forall D i j, agree (map fst D) i j -> restrict D i = restrict D j.
Proof.
  intros. apply functional_extensionality; intro n. unfold restrict.
  destruct (has_name D n) eqn:E; auto. apply has_name_In in E; auto.
Qed.

Lemma msk_restrict : forall s D i, msk s D (restrict D i) = msk s D i.
Proof. intros. apply msk_agree. intros n Hn. apply restrict_in; auto. Qed.

Lemma restrict_restrict : forall D i, restrict D (restrict D i) = restrict D i.
Proof. intros. apply restrict_agree. intros n Hn. apply restrict_in; auto. Qed.

Section WithTable.
Variable c : ctx.
Variable T : table.
Hypothesis W : wf_table T.

Notation D i := (ndims (node_at T i)).

Lemma den_msk0 : forall i rho x, msk (sz c) (D i) x = false -> den c T i rho x = 0.
Proof. intros. rewrite den_unfold by auto. simpl. rewrite H; auto. Qed.

(** A node reads the index only at its own dims. *)
Lemma den_agree : forall i rho x y, agree (map fst (D i)) x y -> den c T i rho x = den c T i rho y.
Proof.
  intros. rewrite den_unfold by auto. simpl.
  rewrite (msk_agree _ _ _ _ H), (restrict_agree _ _ _ H); auto.
Qed.

Lemma den_restrict : forall i rho x, den c T i rho (restrict (D i) x) = den c T i rho x.
Proof. intros. apply den_agree. intros n Hn. apply restrict_in; auto. Qed.

Lemma den_lacks : forall i rho x n v, ~ In n (map fst (D i)) ->
  den c T i rho (upd x n v) = den c T i rho x.
Proof.
  intros. apply den_agree. intros m Hm. rewrite upd_other; auto. intro E; subst; auto.
Qed.

End WithTable.

Lemma existsb_pos_In : forall m l, existsb (Pos.eqb m) l = true <-> In m l.
Proof.
  intros. rewrite existsb_exists. split.
  - intros [k [Hk E]]. apply Pos.eqb_eq in E; subst; auto.
  - intros H. exists m; split; auto. apply Pos.eqb_refl.
Qed.

Lemma In_nodup_pos : forall l seen n, In n (nodup_pos l seen) <-> In n l /\ ~ In n seen.
Proof.
  induction l as [|m l IH]; intros seen n; simpl; [tauto|].
  destruct (existsb (Pos.eqb m) seen) eqn:E.
  - apply existsb_pos_In in E. rewrite IH. split; [tauto|].
    intros [[<-|H] H']; [contradiction|auto].
  - assert (Hm : ~ In m seen) by (intro I; apply existsb_pos_In in I; congruence).
    simpl. rewrite IH. simpl. split.
    + intros [<-|[H1 H2]]; [auto|]. split; auto.
    + intros [[<-|H1] H2]; [auto|]. destruct (Pos.eqb_spec m n); [left; auto|].
      right; split; auto. intros [E'|E']; auto.
Qed.

Lemma NoDup_nodup_pos : forall l seen, NoDup (nodup_pos l seen).
Proof.
  induction l as [|m l IH]; intros seen; simpl; [constructor|].
  destruct (existsb (Pos.eqb m) seen); auto. constructor; auto.
  rewrite In_nodup_pos. simpl; tauto.
Qed.

(** ** Varying over mesh axes *)
Definition vtab := PositiveMap.t (list name).
Definition vget (vt : vtab) (i : positive) : list name :=
  match PositiveMap.find i vt with Some l => l | None => [] end.

Fixpoint shard_axes (sh : list shard) : list name :=
  match sh with [] => [] | SAx a :: r => a :: shard_axes r | SCh _ _ :: r => shard_axes r end.

Definition vary_raw (nd : node) (vt : vtab) : list name :=
  let ch := flat_map (vget vt) (nargs nd) in
  match nop nd with
  | OInput _ _ | OConst _ | ODimSize _ | OAxisSize _ | OCausal _ _ | ORope _ _ _ _ => []
  | ORankConst a _ => [a]
  | OOneHot v => shard_axes (match spec_of (ndims nd) v with Some sh => sh | None => [] end) ++ ch
  | OShard _ a | OPart a | OReduceScatter a _ | OAllToAll a _ _ => a :: ch
  | OAllReduce a _ | OAllGather a _ | OBroadcast a _ => filter (fun b => negb (Pos.eqb b a)) ch
  | _ => ch
  end.

(** duplicate-free (unions of children's lists would grow along shared subterms) *)
Definition vary_of (nd : node) (vt : vtab) : list name := nodup_pos (vary_raw nd vt) [].

Definition inclb (l1 l2 : list name) : bool := forallb (fun a => existsb (Pos.eqb a) l2) l1.

Lemma inclb_In : forall l1 l2 a, inclb l1 l2 = true -> In a l1 -> In a l2.
Proof.
  intros. unfold inclb in H. rewrite forallb_forall in H. apply H in H0.
  apply existsb_exists in H0 as [b [Hb E]]. apply Pos.eqb_eq in E; subst; auto.
Qed.

Definition vary_checkb (T : table) (vt : vtab) : bool :=
  forallb (fun p => inclb (vary_of (snd p) vt) (vget vt (fst p))) (PositiveMap.elements T).

(** The analysis a checker runs: one pass over the table in id order. *)
Definition vary_build (T : table) : vtab :=
  PositiveMap.fold (fun i nd vt => PositiveMap.add i (vary_of nd vt) vt) T (PositiveMap.empty _).

Lemma vary_checkb_node : forall T vt i, vary_checkb T vt = true ->
  forall a, In a (vary_of (node_at T i) vt) -> In a (vget vt i).
Proof.
  intros T vt i H a Ha. unfold node_at in Ha. destruct (PositiveMap.find i T) eqn:F.
  - apply PositiveMap.elements_correct in F. unfold vary_checkb in H.
    rewrite forallb_forall in H. apply H in F. simpl in F. eapply inclb_In; eauto.
  - unfold vary_of in Ha; simpl in Ha; contradiction.
Qed.

Lemma dep_agree_upd : forall S rho rho' a r,
  (forall b, In b S -> b <> a -> rho b = rho' b) ->
  forall b, In b S -> upd rho a r b = upd rho' a r b.
Proof.
  intros. unfold upd. destruct (Pos.eqb_spec b a); auto.
Qed.

Lemma gpos_agree : forall s rho rho' n sh j,
  (forall a, In a (shard_axes sh) -> rho a = rho' a) -> gpos s rho n sh j = gpos s rho' n sh j.
Proof.
  intros s rho rho' n sh; revert n. induction sh as [|[a|k p] sh IH]; intros; simpl; auto.
  - rewrite (H a) by (simpl; auto). rewrite IH; auto. intros; apply H; simpl; auto.
Qed.

Section Vary.
Variable c : ctx.
Variable T : table.
Hypothesis W : wf_table T.
Hypothesis P : po_ok c.
Variable vt : vtab.
Hypothesis VC : vary_checkb T vt = true.

Lemma vary_sound : forall i, dep_only (vget vt i) (den c T i).
Proof.
  intro i.
  induction i as [i IH] using (well_founded_ind (Wf_nat.well_founded_ltof _ Pos.to_nat)).
  intros rho rho' Hag. rewrite den_unfold by auto.
  apply functional_extensionality; intro x. simpl.
  destruct (msk _ _ _); auto.
  assert (Ch : forall j, In j (nargs (node_at T i)) ->
            forall r r', (forall b, In b (vget vt j) -> r b = r' b) -> den c T j r = den c T j r').
  { intros j Hj r r' H. apply IH; auto. unfold Wf_nat.ltof. apply Pos2Nat.inj_lt.
    pose proof (node_args_lt T i W) as L. rewrite Forall_forall in L; auto. }
  assert (V : forall a, In a (vary_raw (node_at T i) vt) -> rho a = rho' a).
  { intros; apply Hag. eapply vary_checkb_node; eauto. unfold vary_of.
    apply In_nodup_pos. split; auto. }
  clear IH Hag.
  set (nd := node_at T i) in *. destruct nd as [o xs Ds]. simpl in *.
  unfold vary_raw in V; simpl in V.
  set (vs := map (den c T) xs).
  remember (flat_map (vget vt) xs) as ch eqn:Ech.
  assert (E : forall v, In v vs -> forall r r', (forall b, In b ch -> r b = r' b) -> v r = v r').
  { intros v Hv r r' H. apply in_map_iff in Hv as [j [<- Hj]]. apply Ch; auto.
    intros b Hb. apply H. rewrite Ech. apply in_flat_map; eauto. }
  assert (Vd : forall k r r', (forall b, In b ch -> r b = r' b) -> vat vs k r = vat vs k r').
  { intros k r r' H. unfold vat.
    destruct (nth_in_or_default k vs (fun _ _ => 0)) as [I|I].
    - apply E; auto.
    - rewrite I; auto. }
  clearbody vs. clear Ch Ech.
  assert (Same : (forall b, In b ch -> rho b = rho' b) ->
                 (forall k, vat vs k rho = vat vs k rho') /\
                 map (fun v => v rho) vs = map (fun v => v rho') vs).
  { intros H; split; [intros; apply Vd; auto|]. apply map_ext_in; intros; apply E; auto. }
  assert (Same' : (forall b, In b ch -> rho b = rho' b) ->
                  forall j, map (fun v => v rho j) vs = map (fun v => v rho' j) vs).
  { intros H j. apply map_ext_in; intros. rewrite (E a H0 rho rho'); auto. }
  destruct o; simpl in V |- *; auto;
    try (destruct (Same V) as [S1 S2]; pose proof (Same' V) as S3;
         repeat rewrite S1; try rewrite S3; auto; fail).
  - (* RANK_CONST *) rewrite (V a); auto.
  - (* EINSUM *) f_equal. apply functional_extensionality; intro j. f_equal.
    apply map_ext_in. intros v Hv. rewrite (E v Hv rho rho' V). auto.
  - (* ONE_HOT *)
    assert (Vc : forall b, In b ch -> rho b = rho' b) by (intros; apply V; apply in_app_iff; auto).
    rewrite (Vd 0%nat rho rho' Vc). rewrite (gpos_agree _ rho rho'); auto.
    intros; apply V; apply in_app_iff; auto.
  - (* TOPK *) unfold topk. rewrite (Vd 0%nat rho rho' V).
    destruct vs as [|v0 [|w [|]]]; simpl; auto.
    rewrite (E w) with (r' := rho'); simpl; auto.
  - (* CONCAT *)
    assert (G : forall (l : list nat) vs', (forall v, In v vs' -> v rho = v rho') ->
              forall j y, concat_at (combine vs' l) d rho j y = concat_at (combine vs' l) d rho' j y).
    { induction l as [|L l IHl]; destruct vs' as [|v vs']; intros; simpl; auto.
      rewrite H by (simpl; auto). rewrite IHl; auto. intros; apply H; simpl; auto. }
    apply G; auto.
  - (* SHARD *)
    rewrite (V a) by (simpl; auto). rewrite (Vd 0%nat rho rho'); auto.

  - (* PART *)
    destruct P as [P1 _]. rewrite (P1 a ch (vat vs 0)) with (rho' := rho'); auto.
    intros r r' H. apply Vd; auto.
  - (* ALL_REDUCE *)
    destruct r; f_equal; apply functional_extensionality; intro r; erewrite Vd; eauto;
      intros b Hb; unfold upd; destruct (Pos.eqb_spec b a); auto;
      apply V; apply filter_In; split; auto; apply Bool.negb_true_iff, Pos.eqb_neq; auto.
  - (* ALL_GATHER *)
    erewrite Vd; eauto; intros b Hb; unfold upd; destruct (Pos.eqb_spec b a); auto;
    apply V; apply filter_In; split; auto; apply Bool.negb_true_iff, Pos.eqb_neq; auto.
  - (* REDUCE_SCATTER *)
    rewrite (V a) by (simpl; auto). f_equal; apply functional_extensionality; intro r;
    erewrite Vd; eauto;
    intros b Hb; unfold upd; destruct (Pos.eqb_spec b a); auto; apply V; simpl; auto.
  - (* BROADCAST *)
    erewrite Vd; eauto; intros b Hb; unfold upd; destruct (Pos.eqb_spec b a); auto;
    apply V; apply filter_In; split; auto; apply Bool.negb_true_iff, Pos.eqb_neq; auto.
  - (* ALL_TO_ALL *)
    rewrite (V a) by (simpl; auto). erewrite Vd; eauto;
    intros b Hb; unfold upd; destruct (Pos.eqb_spec b a); auto; apply V; simpl; auto.
Qed.
End Vary.
