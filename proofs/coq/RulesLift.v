(** * RulesLift: [SHARD] moves out through ops that act position by position along its dim.

    lift-shard-elementwise; and dims-sort (a node with its dims listed in another order). *)

From Coq Require Import Reals Lra Lia List QArith ZArith PArith NArith Bool Permutation.
From Coq Require Import FSets.FMapPositive FunctionalExtensionality.
From Shardproof Require Import Base Num Pow Term Props RuleLib Congr Rel Shard RulesBasic.
Import ListNotations.
Open Scope R_scope.

(** ** Elementwise ops: the core is a function of the children's values at the same place *)
Definition is_ew (o : op) : bool :=
  match o with OAdd | OMul | OUn _ | OPow _ | OMaximum | OWhere => true | _ => false end.

Definition ewf (c : ctx) (o : op) (l : list R) : R :=
  match o with
  | OAdd => suml l
  | OMul => prodl l
  | OUn u => uval c u (nth 0 l 0)
  | OPow e => rpow (nth 0 l 0) e
  | OMaximum => Rmax (nth 0 l 0) (nth 1 l 0)
  | OWhere => if Rbeq (nth 0 l 0) 0 then nth 2 l 0 else nth 1 l 0
  | _ => 0
  end.

Lemma vat_nth : forall vs k rho x, vat vs k rho x = nth k (map (fun v => v rho x) vs) 0.
Proof.
  intros vs k; revert vs. unfold vat. induction k; intros [|v vs] rho x; simpl; auto.
Qed.

Lemma core_ew : forall c T o xs D vs rho x, is_ew o = true ->
  core c T o xs D vs rho x = ewf c o (map (fun v => v rho x) vs).
Proof. intros. destruct o; simpl in H; try discriminate; simpl; rewrite ?vat_nth; auto. Qed.

(** [D1]'s dims are among [D2]'s (same shards) *)
Definition incl_dims (D1 D2 : list dimspec) : bool :=
  forallb (fun d => existsb (dimspec_eqb d) D2) D1.
Definition incl_names (D1 D2 : list dimspec) : bool :=
  forallb (fun d => has_name D2 (fst d)) D1.

Lemma incl_dims_In : forall D1 D2 d, incl_dims D1 D2 = true -> In d D1 -> In d D2.
Proof.
  intros. unfold incl_dims in H. rewrite forallb_forall in H. apply H in H0.
  apply existsb_exists in H0 as [d' [I E]]. apply dimspec_eqb_eq in E; subst; auto.
Qed.

Lemma incl_dims_msk : forall s D1 D2 x, incl_dims D1 D2 = true -> msk s D2 x = true ->
  msk s D1 x = true.
Proof.
  intros. unfold msk in *. rewrite forallb_forall in *. intros d I.
  apply H0. eapply incl_dims_In; eauto.
Qed.

Lemma incl_names_agree : forall D1 D2 x y, incl_names D1 D2 = true ->
  agree (map fst D2) x y -> agree (map fst D1) x y.
Proof.
  intros D1 D2 x y H A n I. apply A. unfold incl_names in H. rewrite forallb_forall in H.
  apply in_map_iff in I as [d [<- I]]. apply has_name_In, H; auto.
Qed.

Lemma spec_of_In : forall D n sh, spec_of D n = Some sh -> In (n, sh) D.
Proof.
  induction D as [|[m sh'] D IH]; intros n sh H; simpl in *; try discriminate.
  destruct (Pos.eqb_spec m n); subst; [injection H as <-; auto|right; auto].
Qed.

Lemma In_spec_of_nodup : forall D n sh, NoDup (map fst D) -> In (n, sh) D -> spec_of D n = Some sh.
Proof.
  induction D as [|[m sh'] D IH]; intros n sh ND I; simpl in *; [contradiction|].
  inversion ND as [|? ? NI ND']; subst. destruct I as [E|I].
  - injection E as <- <-. rewrite Pos.eqb_refl; auto.
  - destruct (Pos.eqb_spec m n); subst; auto. exfalso; apply NI.
    apply in_map_iff; exists (n, sh); auto.
Qed.

Lemma lsize_of_incl : forall s D1 D2 n, incl_dims D1 D2 = true -> NoDup (map fst D2) ->
  has_name D1 n = true -> lsize_of s D1 n = lsize_of s D2 n.
Proof.
  intros s D1 D2 n I ND H. apply has_name_In in H. apply In_spec_of in H.
  destruct (spec_of D1 n) as [sh|] eqn:E; [|contradiction].
  unfold lsize_of. rewrite E. rewrite (In_spec_of_nodup D2 n sh); auto.
  eapply incl_dims_In; eauto. apply spec_of_In; auto.
Qed.

(** A node at an index in range, read through its mask and restriction. *)
Lemma den_in : forall c T i o xs D rho x, wf_table T -> node_at T i = Node o xs D ->
  msk (sz c) D x = true ->
  den c T i rho x = core c T o xs D (map (den c T) xs) rho (restrict D x).
Proof. intros. rewrite (den_node c T i o xs D H H0), H1; auto. Qed.

(** ** lift-shard-elementwise: op(..SHARD(x_i, d, a)..y_j..) = SHARD(op(..x_i..y_j..), d, a) *)
Definition lift_arg (T : table) (d a : name) (A X : positive) : bool :=
  is_shard T A d a X || (Pos.eqb A X && negb (has_name (ndims (node_at T X)) d)).

Definition chk_lift_ew (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l, node_at T r with
  | Node o As D, Node (OShard d a) [y] Dr =>
      match node_at T y with
      | Node o' Xs Dy =>
          if is_ew o && op_eqb o o' && dims_eqvb D Dr && is_shard T r d a y &&
             forallb2 (lift_arg T d a) As Xs &&
             forallb (fun A => incl_dims (ndims (node_at T A)) D) As &&
             forallb (fun X => incl_names (ndims (node_at T X)) Dy) Xs
          then Some [] else None
      end
  | _, _ => None
  end.

Lemma is_shard_info : forall T s d a x, is_shard T s d a x = true ->
  node_at T s = Node (OShard d a) [x] (ndims (node_at T s)) /\
  has_name (ndims (node_at T x)) d = true /\
  Permutation (ndims (node_at T s)) (shard_dims (ndims (node_at T x)) d a) /\
  NoDup (map fst (ndims (node_at T s))) /\ NoDup (map fst (ndims (node_at T x))).
Proof.
  intros T s d a x H. unfold is_shard in H.
  destruct (node_at T s) as [o xs Ds] eqn:Es. destruct o; try discriminate.
  destruct xs as [|x' [|]]; try discriminate.
  repeat match type of H with _ && _ = true => apply andb_prop in H as [H ?] end. beq_to_eq.
  destruct (dims_eqvb_perm _ _ H1) as [P ND]. simpl.
  repeat split; auto. apply nodup_posb_ok; auto.
Qed.

Lemma names_shard : forall T s d a x n, is_shard T s d a x = true ->
  (In n (map fst (ndims (node_at T s))) <-> In n (map fst (ndims (node_at T x)))).
Proof.
  intros. destruct (is_shard_info T s d a x H) as [_ [_ [P _]]].
  rewrite <- (map_fst_shard_dims (ndims (node_at T x)) d a). split; intro I.
  - apply (Permutation_in _ (Permutation_map fst P)); auto.
  - apply (Permutation_in _ (Permutation_map fst (Permutation_sym P))); auto.
Qed.

Lemma chk_lift_ew_sound : rule_sound chk_lift_ew.
Proof.
  intros G l r h cl H c M _. destruct M as [W [VC [SZ [F [DO P]]]]].
  unfold chk_lift_ew in H.
  destruct (node_at (gT G) l) as [o As D] eqn:El.
  destruct (node_at (gT G) r) as [o2 xs2 Dr] eqn:Er.
  destruct o2; try discriminate. destruct xs2 as [|y [|]]; try discriminate.
  destruct (node_at (gT G) y) as [o' Xs Dy] eqn:Ey.
  match type of H with (if ?b then _ else _) = _ => destruct b eqn:B end; try discriminate.
  apply andb_prop in B as [B IX]. apply andb_prop in B as [B IA].
  apply andb_prop in B as [B LA]. apply andb_prop in B as [B SR].
  apply andb_prop in B as [B DE]. apply andb_prop in B as [EW OE].
  apply op_eqb_eq in OE; subst o'.
  set (T := gT G) in *.
  destruct (dims_eqvb_perm _ _ DE) as [PD ND].
  intros rho R x.
  destruct (msk (sz c) D x) eqn:Mx.
  2:{ rewrite (den_node c T l _ _ _ W El), Mx.
      rewrite (den_node c T r _ _ _ W Er), <- (msk_perm _ _ _ x PD), Mx; auto. }
  assert (Mr : msk (sz c) (ndims (node_at T r)) x = true) by (rewrite Er; simpl; rewrite <- (msk_perm _ _ _ x PD); auto).
  rewrite (shard_read c T W r d a y rho x SR Mr).
  pose proof (shard_range c T SZ r d a y rho x SR R Mr) as My. rewrite Ey in My; simpl in My.
  rewrite (den_in c T y o Xs Dy rho _ W Ey My), (den_in c T l o As D rho x W El Mx).
  rewrite !core_ew by auto. f_equal. rewrite !map_map.
  destruct (forallb2_nth _ _ _ _ _ 1%positive 1%positive LA) as [L LK].
  apply nth_ext with (d := 0) (d' := 0); [rewrite !map_length; auto|].
  intros k Hk. rewrite map_length in Hk.
  rewrite (nth_indep _ _ (den c T 1%positive rho (restrict D x))) by (rewrite map_length; auto).
  rewrite (nth_indep (map _ Xs) _ (den c T 1%positive rho (restrict Dy (upd_shard (sz c) (ndims (node_at T r)) d a rho x)))) by (rewrite map_length; lia).
  rewrite (map_nth (fun A => den c T A rho (restrict D x))).
  rewrite (map_nth (fun X => den c T X rho (restrict Dy _))).
  set (A := nth k As 1%positive). set (X := nth k Xs 1%positive).
  assert (IAk : incl_dims (ndims (node_at T A)) D = true).
  { rewrite forallb_forall in IA. apply IA, nth_In; auto. }
  assert (IXk : incl_names (ndims (node_at T X)) Dy = true).
  { rewrite forallb_forall in IX. apply IX, nth_In; lia. }
  assert (XD : forall n, In n (map fst (ndims (node_at T X))) -> In n (map fst Dy)).
  { intros n I. unfold incl_names in IXk. rewrite forallb_forall in IXk.
    apply in_map_iff in I as [dd [<- I]]. apply has_name_In, IXk; auto. }
  assert (AD : forall n, In n (map fst (ndims (node_at T A))) -> In n (map fst D)).
  { intros n I. apply in_map_iff in I as [dd [<- I]]. apply in_map.
    eapply incl_dims_In; eauto. }
  specialize (LK k Hk). fold A X in LK. unfold lift_arg in LK.
  apply orb_prop in LK as [SA|[EAX NX]%andb_prop].
  - assert (MA : msk (sz c) (ndims (node_at T A)) (restrict D x) = true)
      by (apply (incl_dims_msk _ _ D); auto; rewrite msk_restrict; auto).
    rewrite (shard_read c T W A d a X rho _ SA MA).
    apply den_agree; auto. intros n In_.
    assert (InA : In n (map fst (ndims (node_at T A)))) by (apply (names_shard T A d a X n SA); auto).
    unfold upd_shard, upd. rewrite (restrict_in Dy) by auto.
    destruct (Pos.eqb_spec n d) as [->|Nd].
    + f_equal. f_equal.
      * rewrite Er; simpl. rewrite <- (lsize_of_perm _ _ _ _ PD ND).
        destruct (is_shard_info T A d a X SA) as [_ [HX [PA [NA _]]]].
        apply lsize_of_incl; auto.
        apply has_name_In. apply (names_shard T A d a X d SA). apply has_name_In; auto.
      * apply restrict_in; auto.
    + apply restrict_in; auto.
  - apply Pos.eqb_eq in EAX. fold A in EAX. rewrite EAX in *. apply Bool.negb_true_iff in NX.
    apply den_agree; auto. intros n In_.
    unfold upd_shard, upd. rewrite (restrict_in Dy) by auto.
    destruct (Pos.eqb_spec n d) as [->|Nd].
    + exfalso. apply has_name_In in In_. congruence.
    + apply restrict_in; auto.
Qed.

(** ** dims-sort: the same node with its dims listed in another order *)
Lemma core_dims_perm : forall c T o xs D1 D2 vs, Permutation D1 D2 -> NoDup (map fst D1) ->
  core c T o xs D1 vs = core c T o xs D2 vs.
Proof.
  intros c T o xs D1 D2 vs P ND.
  assert (L : forall n, lsize_of (sz c) D1 n = lsize_of (sz c) D2 n) by (intros; apply lsize_of_perm; auto).
  assert (S : forall n, spec_of D1 n = spec_of D2 n) by (intros; apply spec_of_perm; auto).
  unfold core. destruct o; rewrite ?L, ?S; auto.
Qed.

Definition chk_dims_sort (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l, node_at T r with
  | Node o xs D, Node o' xs' D' =>
      if op_eqb o o' && list_eqb Pos.eqb xs xs' && dims_eqvb D D' then Some [] else None
  end.

Lemma chk_dims_sort_sound : rule_sound chk_dims_sort.
Proof.
  intros G l r h cl H c M _. destruct M as [W _].
  unfold chk_dims_sort in H.
  destruct (node_at (gT G) l) as [o xs D] eqn:El. destruct (node_at (gT G) r) as [o' xs' D'] eqn:Er.
  match type of H with (if ?b then _ else _) = _ => destruct b eqn:B end; try discriminate.
  apply andb_prop in B as [B DE]. apply andb_prop in B as [OE XE].
  apply op_eqb_eq in OE. apply (list_eqb_eq _ _ (fun x y => proj1 (Pos.eqb_eq x y))) in XE. subst.
  destruct (dims_eqvb_perm _ _ DE) as [P ND].
  intros rho R x. rewrite (den_node c _ l _ _ _ W El), (den_node c _ r _ _ _ W Er).
  rewrite (msk_perm _ _ _ x P), (restrict_perm _ _ x P), (core_dims_perm c _ o' xs' D D'); auto.
Qed.
