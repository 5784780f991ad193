(** * RulesUnitDim: sums and maxima over dims of size 1 (docs/rules.md, issue 12).

    A dim [n] is a *unit* when the certificate's binding gives it size 1 (a size fact
    [sz n = 1] the exporter passes, [RulesAxis.unit_axis]). Every shard of such a dim divides 1
    ([sizes_ok]), so its local size is 1 wherever it appears, and a node is 0 at an index that
    is not 0 at one of its unit dims. Every lemma below compares the two sides at indices
    [zu j] (every unit dim at 0, [eqv_zu]); there a sum or a maximum over unit dims has one
    term ([sumover_units], [maxover_units]).

    A *squeeze* of [x] ([is_squeeze]) is [EINSUM((x,), o)] whose dims are among [x]'s (same
    shards) and which keeps (as a dim and an output name) every dim of [x] that is not a unit:
    at [zu j] it equals [x] ([squeeze_zu]).

    einsum-unit-dim: [EINSUM(xs, o) = EINSUM(ys, o)], each [y_k] [x_k] or a squeeze of it.
    squeeze-elementwise: [EINSUM((op(xs),), o) = op(ys)] ([op] elementwise, not [WHERE]), the
    left side a squeeze of [op(xs)], each [y_k] [x_k] or a squeeze of it, the two ops' dims the
    same but for units, every operand's names among its op's.
    reduce-max-unit-dim: [REDUCE_MAX(x, ds) = REDUCE_MAX(y, ds')] with [y] a squeeze of [x]
    (or [x]) and the non-unit names of [ds] and [ds'] the same list, or [= y] when every name of
    [ds] is a unit; the reduced names are dims of the operand.

    The guard's "U is non-empty" and "not a squeeze of one operand" (the e-graph's termination)
    are not needed by the lemmas and not tested; "unsharded" neither (a unit dim's every shard
    has size 1). *)

From Coq Require Import Reals Lra Lia List QArith ZArith PArith NArith Bool Permutation.
From Coq Require Import FSets.FMapPositive FunctionalExtensionality.
From Shardproof Require Import Base Num Pow Term Props RuleLib Congr Rel Shard RulesBasic RulesLift
  RulesAxis RulesEinsum RulesScalarOut RulesLiftEinsum RulesLiftReindex RulesEinsumMul RulesSplit
  RulesShift RulesNested.
Import ListNotations.
Open Scope R_scope.

Definition zu (G : gctx) (j : Ix) : Ix := fun n => if unit_axis G n then 0%nat else j n.
Definition nunit (G : gctx) (n : name) : bool := negb (unit_axis G n).

Lemma lsz_unit : forall s sh, spec_divb s 1 sh = true -> lsz s 1 sh = 1%nat.
Proof.
  intros s sh; induction sh as [|a sh IH]; intros H; [reflexivity|].
  simpl in H. apply andb_prop in H as [H H3]; apply andb_prop in H as [H1 H2].
  apply Nat.ltb_lt in H1. apply Nat.eqb_eq in H2.
  assert (K : kof s a = 1%nat).
  { destruct (Nat.eq_dec (kof s a) 1); auto. rewrite Nat.mod_small in H2 by lia. lia. }
  rewrite K in H3. simpl in H3. unfold lsz in *. simpl. rewrite K. simpl. apply IH; auto.
Qed.

Section Units.
Variable G : gctx.
Variable c : ctx.
Hypothesis M : model_ok G c.
Let T := gT G.

Lemma unit_lsz_in : forall k n sh, In (n, sh) (ndims (node_at T k)) -> unit_axis G n = true ->
  lsz (sz c) (sz c n) sh = 1%nat.
Proof.
  intros k n sh I U. rewrite (unit_axis_ok G c n M U).
  destruct M as [_ [_ [S _]]]. pose proof (node_sizes_at _ _ S k) as H.
  unfold node_sizes_okb in H. apply andb_prop in H as [H _]. rewrite forallb_forall in H.
  apply H in I. simpl in I. rewrite (unit_axis_ok G c n M U) in I. apply lsz_unit; auto.
Qed.

Lemma unit_lsz : forall k n sh, spec_of (ndims (node_at T k)) n = Some sh -> unit_axis G n = true ->
  lsz (sz c) (sz c n) sh = 1%nat.
Proof. intros k n sh E U. apply (unit_lsz_in k n sh); auto. apply spec_of_In; auto. Qed.

Lemma den_zu_same : forall k rho j,
  (forall n, In n (map fst (ndims (node_at T k))) -> unit_axis G n = true -> j n = 0%nat) ->
  den c T k rho j = den c T k rho (zu G j).
Proof.
  intros k rho j H. destruct M as [W _]. apply den_agree; auto. intros n I. unfold zu.
  destruct (unit_axis G n) eqn:U; auto.
Qed.

Lemma den_zu_zero : forall k rho j n, In n (map fst (ndims (node_at T k))) ->
  unit_axis G n = true -> j n <> 0%nat -> den c T k rho j = 0.
Proof.
  intros k rho j n I U Z. destruct M as [W _]. apply den_msk0; auto.
  destruct (msk (sz c) (ndims (node_at T k)) j) eqn:Mk; auto. exfalso.
  destruct (spec_of (ndims (node_at T k)) n) as [sh|] eqn:E.
  - pose proof (msk_spec _ _ _ _ _ Mk E). rewrite (unit_lsz k n sh E U) in H. lia.
  - apply In_spec_of in I. congruence.
Qed.

(** Two nodes with the same names are equal when they are at every [zu j]. *)
Lemma eqv_zu : forall l r, (forall n, In n (map fst (ndims (node_at T l))) <->
                                      In n (map fst (ndims (node_at T r)))) ->
  (forall rho, rk_ok (sz c) rho -> forall j, den c T l rho (zu G j) = den c T r rho (zu G j)) ->
  eqv c T l r.
Proof.
  intros l r NI H rho R j.
  destruct (existsb (fun n => unit_axis G n && negb (Nat.eqb (j n) 0))
                    (map fst (ndims (node_at T l)))) eqn:E.
  - apply existsb_exists in E as [n [I B]]. apply andb_prop in B as [U B].
    apply Bool.negb_true_iff, Nat.eqb_neq in B.
    rewrite (den_zu_zero l rho j n I U B), (den_zu_zero r rho j n (proj1 (NI n) I) U B). auto.
  - assert (Z : forall n, In n (map fst (ndims (node_at T l))) -> unit_axis G n = true -> j n = 0%nat).
    { intros n I U. destruct (Nat.eqb_spec (j n) 0); auto. exfalso.
      assert (existsb (fun n => unit_axis G n && negb (Nat.eqb (j n) 0))
                      (map fst (ndims (node_at T l))) = true); [|congruence].
      apply existsb_exists. exists n. rewrite U. split; auto. apply Nat.eqb_neq in n0.
      rewrite n0; auto. }
    rewrite (den_zu_same l), (den_zu_same r); auto.
    intros n I U. apply Z; auto. apply NI; auto.
Qed.
End Units.

(** ** One term for each unit dim *)
Lemma sumover_units : forall G C f i,
  (forall n L, In (n, L) C -> unit_axis G n = true -> L = 1%nat) ->
  (forall n, unit_axis G n = true -> i n = 0%nat) ->
  sumover C f i = sumover (filter (fun p => nunit G (fst p)) C) (fun t => f (zu G t)) i.
Proof.
  intros G; induction C as [|[n L] C IH]; intros f i HC Hi; simpl.
  - f_equal. apply functional_extensionality; intro m. unfold zu.
    destruct (unit_axis G m) eqn:U; auto.
  - unfold nunit at 1. destruct (unit_axis G n) eqn:U; simpl.
    + rewrite (HC n L) by (simpl; auto). simpl. rewrite Rplus_0_l.
      rewrite IH.
      * apply sumover_ext; auto. intros m _. unfold upd.
        destruct (Pos.eqb_spec m n); [subst; symmetry; apply Hi; auto|auto].
      * intros; eapply HC; simpl; eauto.
      * intros m Um. unfold upd. destruct (Pos.eqb_spec m n); auto.
    + apply rsum_ext; intros v _. apply IH.
      * intros; eapply HC; simpl; eauto.
      * intros m Um. unfold upd. destruct (Pos.eqb_spec m n); subst; auto. congruence.
Qed.

Lemma maxover_units : forall G C f i,
  (forall n L, In (n, L) C -> unit_axis G n = true -> L = 1%nat) ->
  (forall n, unit_axis G n = true -> i n = 0%nat) ->
  maxover C f i = maxover (filter (fun p => nunit G (fst p)) C) (fun t => f (zu G t)) i.
Proof.
  intros G; induction C as [|[n L] C IH]; intros f i HC Hi; simpl.
  - f_equal. apply functional_extensionality; intro m. unfold zu.
    destruct (unit_axis G m) eqn:U; auto.
  - unfold nunit at 1. destruct (unit_axis G n) eqn:U; simpl.
    + rewrite (HC n L) by (simpl; auto). simpl.
      rewrite IH.
      * apply maxover_ext; auto. intros m _. unfold upd.
        destruct (Pos.eqb_spec m n); [subst; symmetry; apply Hi; auto|auto].
      * intros; eapply HC; simpl; eauto.
      * intros m Um. unfold upd. destruct (Pos.eqb_spec m n); auto.
    + apply rmaxs_ext; intros v _. apply IH.
      * intros; eapply HC; simpl; eauto.
      * intros m Um. unfold upd. destruct (Pos.eqb_spec m n); subst; auto. congruence.
Qed.

Lemma op_names_first_spec : forall T xs n, In n (op_names T xs) ->
  exists sh, first_spec T xs n = Some sh.
Proof.
  intros T; induction xs as [|x xs IH]; intros n I; simpl in *; [contradiction|].
  destruct (spec_of (ndims (node_at T x)) n) as [sh|] eqn:E; eauto.
  apply in_app_or in I as [I|I]; auto. apply In_spec_of in I. congruence.
Qed.

Lemma contracted_units : forall G c, model_ok G c -> forall xs o n L,
  In (n, L) (contracted (sz c) (gT G) xs o) -> unit_axis G n = true -> L = 1%nat.
Proof.
  intros G c M xs o n L I U. apply In_contracted_iff in I as [I [_ ->]].
  destruct (op_names_first_spec _ _ _ I) as [sh E]. rewrite E.
  destruct (first_spec_In _ _ _ _ E) as [x [_ S]]. eapply unit_lsz; eauto.
Qed.

Lemma NoDup_fst_filter : forall (p : name * nat -> bool) C, NoDup (map fst C) ->
  NoDup (map fst (filter p C)).
Proof.
  intros p C ND. induction C as [|[n L] C IH]; simpl in *; auto.
  inversion ND as [|? ? NI ND']; subst.
  destruct (p (n, L)); simpl; auto. constructor; auto.
  intro I. apply NI. apply in_map_iff in I as [[m L'] [E I]]. simpl in E; subst.
  apply filter_In in I as [I _]. apply in_map_iff. exists (n, L'); auto.
Qed.

(** ** Squeezes *)
Definition is_squeeze (G : gctx) (y x : positive) : bool :=
  let T := gT G in
  match node_at T y with
  | Node (OEinsum oy) [x'] Dy =>
      Pos.eqb x x' && incl_dims Dy (ndims (node_at T x)) &&
      nodup_posb (map fst (ndims (node_at T x))) &&
      forallb (fun n => unit_axis G n || (has_name Dy n && existsb (Pos.eqb n) oy))
              (map fst (ndims (node_at T x)))
  | _ => false
  end.

Definition sq_or_same (G : gctx) (y x : positive) : bool := Pos.eqb y x || is_squeeze G y x.

Lemma squeeze_zu : forall G c, model_ok G c -> forall y x, is_squeeze G y x = true ->
  forall rho j, den c (gT G) y rho (zu G j) = den c (gT G) x rho (zu G j).
Proof.
  intros G c M y x H rho j. pose proof M as M'. destruct M' as [W _].
  unfold is_squeeze in H. set (T := gT G) in *.
  destruct (node_at T y) as [o ys Dy] eqn:Ey. destruct o; try discriminate.
  destruct ys as [|x' [|]]; try discriminate.
  repeat match type of H with _ && _ = true => apply andb_prop in H as [H ?] end.
  rename H0 into K, H1 into ND, H2 into Inc. apply Pos.eqb_eq in H; subst x'.
  rewrite (den_node c T y _ _ _ W Ey).
  destruct (msk (sz c) Dy (zu G j)) eqn:My.
  - cbn [core map]. rewrite (sumover_units G).
    + replace (filter (fun p => nunit G (fst p)) (contracted (sz c) T [x] out)) with
        (@nil (name * nat)).
      * simpl. rewrite Rmult_1_r. apply den_agree; auto. intros n I. unfold zu.
        destruct (unit_axis G n) eqn:U; auto.
        rewrite forallb_forall in K. pose proof (K n I) as Kn. rewrite U in Kn.
        simpl in Kn. apply andb_prop in Kn as [Hn _]. rewrite restrict_in.
        -- unfold zu; rewrite U; auto.
        -- apply has_name_In; auto.
      * destruct (filter _ _) as [|[n L] rest] eqn:F; auto. exfalso.
        assert (IF : In (n, L) (filter (fun p => nunit G (fst p)) (contracted (sz c) T [x] out)))
          by (rewrite F; simpl; auto).
        apply filter_In in IF as [IC Nu]. apply In_contracted_iff in IC as [IN [NO _]].
        unfold op_names in IN. simpl in IN. rewrite app_nil_r in IN.
        rewrite forallb_forall in K. pose proof (K n IN) as Kn. unfold nunit in Nu.
        simpl in Nu. apply Bool.negb_true_iff in Nu. rewrite Nu in Kn. simpl in Kn.
        apply andb_prop in Kn as [_ Kn]. congruence.
    + intros n L I U. eapply contracted_units; eauto.
    + intros n U. unfold restrict, zu. rewrite U. destruct (has_name Dy n); auto.
  - symmetry. apply den_msk0; auto.
    destruct (msk (sz c) (ndims (node_at T x)) (zu G j)) eqn:Mx; auto.
    rewrite (incl_dims_msk _ _ _ _ Inc Mx) in My. discriminate.
Qed.

Lemma squeeze_spec : forall G y x, is_squeeze G y x = true -> forall n, unit_axis G n = false ->
  spec_of (ndims (node_at (gT G) y)) n = spec_of (ndims (node_at (gT G) x)) n.
Proof.
  intros G y x H n U. unfold is_squeeze in H. set (T := gT G) in *.
  destruct (node_at T y) as [o ys Dy] eqn:Ey. destruct o; try discriminate.
  destruct ys as [|x' [|]]; try discriminate. simpl.
  repeat match type of H with _ && _ = true => apply andb_prop in H as [H ?] end.
  rename H0 into K, H1 into ND, H2 into Inc. apply nodup_posb_ok in ND.
  destruct (spec_of Dy n) as [sh|] eqn:E.
  - symmetry. apply In_spec_of_nodup; auto. eapply incl_dims_In; eauto. apply spec_of_In; auto.
  - destruct (spec_of (ndims (node_at T x)) n) eqn:E'; auto. exfalso.
    assert (I : In n (map fst (ndims (node_at T x)))) by (apply In_spec_of; congruence).
    rewrite forallb_forall in K. apply K in I. rewrite U in I. simpl in I.
    apply andb_prop in I as [I _]. apply has_name_In, In_spec_of in I. auto.
Qed.

Lemma sq_zu : forall G c, model_ok G c -> forall y x, sq_or_same G y x = true ->
  forall rho j, den c (gT G) y rho (zu G j) = den c (gT G) x rho (zu G j).
Proof.
  intros G c M y x H rho j. unfold sq_or_same in H. apply orb_prop in H as [H|H].
  - apply Pos.eqb_eq in H; subst; auto.
  - eapply squeeze_zu; eauto.
Qed.

Lemma sq_spec : forall G y x, sq_or_same G y x = true -> forall n, unit_axis G n = false ->
  spec_of (ndims (node_at (gT G) y)) n = spec_of (ndims (node_at (gT G) x)) n.
Proof.
  intros G y x H n U. unfold sq_or_same in H. apply orb_prop in H as [H|H].
  - apply Pos.eqb_eq in H; subst; auto.
  - eapply squeeze_spec; eauto.
Qed.

Lemma sqs_zu : forall G c, model_ok G c -> forall ys xs, list_eqb (sq_or_same G) ys xs = true ->
  forall rho j, map (fun k => den c (gT G) k rho (zu G j)) ys =
                map (fun k => den c (gT G) k rho (zu G j)) xs.
Proof.
  intros G c M; induction ys as [|y ys IH]; intros [|x xs] H rho j; simpl in *; try discriminate;
    auto.
  apply andb_prop in H as [H1 H2]. rewrite (sq_zu G c M y x H1), (IH xs H2). auto.
Qed.

Lemma sqs_first_spec : forall G ys xs, list_eqb (sq_or_same G) ys xs = true ->
  forall n, unit_axis G n = false -> first_spec (gT G) ys n = first_spec (gT G) xs n.
Proof.
  intros G; induction ys as [|y ys IH]; intros [|x xs] H n U; simpl in *; try discriminate; auto.
  apply andb_prop in H as [H1 H2]. rewrite (sq_spec G y x H1 n U), (IH xs H2 n U). auto.
Qed.

Lemma op_names_iff_first_spec : forall T xs n, In n (op_names T xs) <-> first_spec T xs n <> None.
Proof.
  intros T xs n. split.
  - intros I. destruct (op_names_first_spec T xs n I) as [sh E]. congruence.
  - intros E. destruct (first_spec T xs n) eqn:F; [|congruence]. eapply first_spec_names; eauto.
Qed.

(** ** einsum-unit-dim *)
Definition chk_einsum_unit_dim (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l, node_at T r with
  | Node (OEinsum o1) xs Dl, Node (OEinsum o2) ys Dr =>
      if names_eqb o1 o2 && dims_eqvb Dl Dr && list_eqb (sq_or_same G) ys xs
      then Some [] else None
  | _, _ => None
  end.

Lemma names_iff_perm : forall T l r o1 xs Dl o2 ys Dr, node_at T l = Node o1 xs Dl ->
  node_at T r = Node o2 ys Dr -> dims_eqvb Dl Dr = true ->
  forall n, In n (map fst (ndims (node_at T l))) <-> In n (map fst (ndims (node_at T r))).
Proof.
  intros T l r o1 xs Dl o2 ys Dr El Er DE n. rewrite El, Er. simpl.
  destruct (dims_eqvb_perm _ _ DE) as [P _]. split; intros I.
  - exact (Permutation_in _ (Permutation_map fst P) I).
  - exact (Permutation_in _ (Permutation_map fst (Permutation_sym P)) I).
Qed.

Lemma chk_einsum_unit_dim_sound : rule_sound chk_einsum_unit_dim.
Proof.
  intros G l r h cl H c M _. pose proof M as M'. destruct M' as [W _].
  unfold chk_einsum_unit_dim in H. set (T := gT G) in *.
  destruct (node_at T l) as [o1 xs Dl] eqn:El. destruct o1; try discriminate.
  destruct (node_at T r) as [o2 ys Dr] eqn:Er. destruct o2; try discriminate.
  match type of H with (if ?b then _ else _) = _ => destruct b eqn:B; try discriminate end.
  repeat match type of B with _ && _ = true => apply andb_prop in B as [B ?] end.
  rename H0 into SQ, H1 into DE. beq_to_eq.
  apply (eqv_zu G c M l r (names_iff_perm T l r _ _ _ _ _ _ El Er DE)).
  intros rho R j. destruct (dims_eqvb_perm _ _ DE) as [P _].
  rewrite (den_node c T l _ _ _ W El), (den_node c T r _ _ _ W Er).
  rewrite <- (msk_perm _ _ _ _ P), <- (restrict_perm _ _ _ P).
  destruct (msk (sz c) Dl (zu G j)); auto. cbn [core].
  assert (Hi : forall n, unit_axis G n = true -> restrict Dl (zu G j) n = 0%nat).
  { intros n U. unfold restrict, zu. rewrite U. destruct (has_name Dl n); auto. }
  rewrite (sumover_units G (contracted (sz c) T xs out0)) by
    (auto; intros; eapply contracted_units; eauto).
  rewrite (sumover_units G (contracted (sz c) T ys out0)) by
    (auto; intros; eapply contracted_units; eauto).
  assert (F : (fun t => prodl (map (fun v => v rho (zu G t)) (map (den c T) ys))) =
              (fun t => prodl (map (fun v => v rho (zu G t)) (map (den c T) xs)))).
  { apply functional_extensionality; intro t. rewrite !map_map.
    pose proof (sqs_zu G c M ys xs SQ rho t) as Q. change (gT G) with T in Q. rewrite Q. auto. }
  rewrite F. symmetry. apply sumover_perm.
  - apply NoDup_Permutation.
    + apply NoDup_fst_pairs, NoDup_fst_filter, NoDup_contracted.
    + apply NoDup_fst_pairs, NoDup_fst_filter, NoDup_contracted.
    + intros [n L]. rewrite !filter_In, !In_contracted_iff. simpl. unfold nunit.
      destruct (unit_axis G n) eqn:U; [simpl; split; intros [_ Z]; discriminate|].
      rewrite !op_names_iff_first_spec. pose proof (sqs_first_spec G ys xs SQ n U) as Q.
      change (gT G) with T in Q. rewrite Q. tauto.
  - apply NoDup_fst_filter, NoDup_contracted.
Qed.

(** ** reduce-max-unit-dim *)
Definition chk_reduce_max_unit_dim (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l with
  | Node (OReduceMax ds) [x] Dl =>
      let Dx := ndims (node_at T x) in
      if forallb (has_name Dx) ds && dims_eqvb Dl (ndims (node_at T r)) then
        match node_at T r with
        | Node (OReduceMax ds') [y] Dr =>
            if sq_or_same G y x && forallb (has_name (ndims (node_at T y))) ds' &&
               names_eqb (filter (nunit G) ds) (filter (nunit G) ds')
            then Some [] else None
        | Node (OEinsum _) _ _ =>
            if is_squeeze G r x && forallb (unit_axis G) ds &&
               forallb (fun n => unit_axis G n || has_name Dl n) (map fst Dx)
            then Some [] else None
        | _ => None
        end
      else None
  | _ => None
  end.

Lemma filter_map_pair : forall (p : name -> bool) (f : name -> nat) ds,
  filter (fun q => p (fst q)) (map (fun d => (d, f d)) ds) = map (fun d => (d, f d)) (filter p ds).
Proof. intros p f; induction ds as [|d ds IH]; simpl; auto. destruct (p d); simpl; f_equal; auto. Qed.

Lemma reduce_units : forall G c, model_ok G c -> forall x ds,
  forallb (has_name (ndims (node_at (gT G) x))) ds = true ->
  forall n L, In (n, L) (map (fun d => (d, lsize_of (sz c) (ndims (node_at (gT G) x)) d)) ds) ->
  unit_axis G n = true -> L = 1%nat.
Proof.
  intros G c M x ds H n L I U. apply in_map_iff in I as [d [E I]]. injection E as <- <-.
  rewrite forallb_forall in H. apply H, has_name_In, In_spec_of in I.
  unfold lsize_of. destruct (spec_of _ d) as [sh|] eqn:E; [|congruence].
  eapply unit_lsz; eauto.
Qed.

Lemma reduce_max_all_units : forall G c, model_ok G c -> forall l r x ds Dl,
  node_at (gT G) l = Node (OReduceMax ds) [x] Dl ->
  forallb (has_name (ndims (node_at (gT G) x))) ds = true ->
  dims_eqvb Dl (ndims (node_at (gT G) r)) = true -> is_squeeze G r x = true ->
  forallb (unit_axis G) ds = true ->
  forallb (fun n => unit_axis G n || has_name Dl n) (map fst (ndims (node_at (gT G) x))) = true ->
  forall rho j, den c (gT G) l rho (zu G j) = den c (gT G) r rho (zu G j).
Proof.
  intros G c M l r x ds Dl El HD DE SQ AU K rho j. pose proof M as M'. destruct M' as [W _].
  set (T := gT G) in *. destruct (dims_eqvb_perm _ _ DE) as [P _].
  rewrite (squeeze_zu G c M r x SQ). rewrite (den_node c T l _ _ _ W El).
  destruct (msk (sz c) Dl (zu G j)) eqn:Ml.
  - cbn [core]. unfold vat; simpl nth.
    rewrite (maxover_units G).
    + replace (filter _ _) with (@nil (name * nat)).
      * simpl. apply den_agree; auto. intros n I. unfold zu.
        destruct (unit_axis G n) eqn:U; auto. rewrite forallb_forall in K.
        pose proof (K n I) as Kn. rewrite U in Kn. simpl in Kn. rewrite restrict_in.
        -- unfold zu; rewrite U; auto.
        -- apply has_name_In; auto.
      * rewrite filter_map_pair. replace (filter (nunit G) ds) with (@nil name); auto.
        rewrite forallb_forall in AU. destruct (filter (nunit G) ds) as [|n rest] eqn:F; auto.
        assert (IF : In n (filter (nunit G) ds)) by (rewrite F; simpl; auto).
        apply filter_In in IF as [I Nu]. apply AU in I. unfold nunit in Nu. rewrite I in Nu.
        discriminate.
    + eapply reduce_units; eauto.
    + intros n U. unfold restrict, zu. rewrite U. destruct (has_name Dl n); auto.
  - symmetry.
    assert (Mr : msk (sz c) (ndims (node_at T r)) (zu G j) = false)
      by (rewrite <- (msk_perm _ _ _ _ P); auto).
    rewrite <- (squeeze_zu G c M r x SQ). apply den_msk0; auto.
Qed.

Lemma chk_reduce_max_unit_dim_sound : rule_sound chk_reduce_max_unit_dim.
Proof.
  intros G l r h cl H c M _. pose proof M as M'. destruct M' as [W _].
  unfold chk_reduce_max_unit_dim in H. set (T := gT G) in *.
  destruct (node_at T l) as [o1 xs Dl] eqn:El. destruct o1; try discriminate.
  destruct xs as [|x [|]]; try discriminate.
  destruct (forallb (has_name (ndims (node_at T x))) ds && dims_eqvb Dl (ndims (node_at T r)))
    eqn:B0; try discriminate. apply andb_prop in B0 as [HD DE].
  assert (NI : forall n, In n (map fst (ndims (node_at T l))) <-> In n (map fst (ndims (node_at T r)))).
  { rewrite El. simpl. destruct (dims_eqvb_perm _ _ DE) as [P _]. split; intros I.
    - exact (Permutation_in _ (Permutation_map fst P) I).
    - exact (Permutation_in _ (Permutation_map fst (Permutation_sym P)) I). }
  apply (eqv_zu G c M l r NI). intros rho R j.
  destruct (node_at T r) as [o2 ys Dr] eqn:Er. destruct o2; try discriminate.
  - match type of H with (if ?b then _ else _) = _ => destruct b eqn:B; try discriminate end.
    repeat match type of B with _ && _ = true => apply andb_prop in B as [B ?] end.
    apply (reduce_max_all_units G c M l r x ds Dl El HD); try assumption.
    change (gT G) with T; rewrite Er; auto.
  - destruct ys as [|y [|]]; try discriminate.
    match type of H with (if ?b then _ else _) = _ => destruct b eqn:B; try discriminate end.
    repeat match type of B with _ && _ = true => apply andb_prop in B as [B ?] end.
    rename H0 into FE, H1 into HD'.
    apply (list_eqb_eq _ _ (fun a b => proj1 (Pos.eqb_eq a b))) in FE.
    simpl in DE. destruct (dims_eqvb_perm _ _ DE) as [P _].
    rewrite (den_node c T l _ _ _ W El), (den_node c T r _ _ _ W Er).
    rewrite <- (msk_perm _ _ _ _ P), <- (restrict_perm _ _ _ P).
    destruct (msk (sz c) Dl (zu G j)); auto. cbn [core]. unfold vat; simpl nth.
    assert (Hi : forall n, unit_axis G n = true -> restrict Dl (zu G j) n = 0%nat).
    { intros n U. unfold restrict, zu. rewrite U. destruct (has_name Dl n); auto. }
    rewrite (maxover_units G _ _ _ (reduce_units G c M x ds HD) Hi).
    rewrite (maxover_units G _ _ _ (reduce_units G c M y ds0 HD') Hi).
    rewrite !filter_map_pair, FE. change (gT G) with T.
    replace (map (fun d => (d, lsize_of (sz c) (ndims (node_at T x)) d)) (filter (nunit G) ds0))
      with (map (fun d => (d, lsize_of (sz c) (ndims (node_at T y)) d)) (filter (nunit G) ds0)).
    + apply maxover_ext; auto. intros t _. symmetry. exact (sq_zu G c M y x B rho t).
    + apply map_ext_in. intros d I. apply filter_In in I as [_ Nu]. unfold nunit in Nu.
      apply Bool.negb_true_iff in Nu. unfold lsize_of. pose proof (sq_spec G y x B d Nu) as Q.
      change (gT G) with T in Q. rewrite Q. auto.
Qed.

(** ** squeeze-elementwise *)
Definition chk_squeeze_ew (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l with
  | Node (OEinsum _) [z] Dl =>
      match node_at T z, node_at T r with
      | Node o xs Dz, Node o' ys Dr =>
          if is_ew o && negb (op_eqb o OWhere) && op_eqb o o' && is_squeeze G l z &&
             dims_eqvb Dl Dr && list_eqb (sq_or_same G) ys xs &&
             forallb (fun x => incl_names (ndims (node_at T x)) Dz) xs &&
             forallb (fun y => incl_names (ndims (node_at T y)) Dr) ys &&
             forallb (fun d => unit_axis G (fst d) || existsb (dimspec_eqb d) Dr) Dz &&
             forallb (fun d => unit_axis G (fst d) || existsb (dimspec_eqb d) Dz) Dr
          then Some [] else None
      end
  | _ => None
  end.

Lemma msk_zu_sub : forall G c, model_ok G c -> forall k D2 j,
  forallb (fun d => unit_axis G (fst d) || existsb (dimspec_eqb d) D2)
          (ndims (node_at (gT G) k)) = true ->
  msk (sz c) D2 (zu G j) = true -> msk (sz c) (ndims (node_at (gT G) k)) (zu G j) = true.
Proof.
  intros G c M k D2 j H M2. unfold msk in *. rewrite forallb_forall in *. intros [n sh] I.
  pose proof (H _ I) as Hd. simpl in Hd. destruct (unit_axis G n) eqn:U.
  - apply Nat.ltb_lt. unfold lsize. simpl. rewrite (unit_lsz_in G c M k n sh I U).
    unfold zu. rewrite U. lia.
  - simpl in Hd. apply existsb_exists in Hd as [d' [I' E]]. apply dimspec_eqb_eq in E.
    subst d'. apply M2; auto.
Qed.

Lemma den_incl_names : forall c T k D rho i, wf_table T ->
  incl_names (ndims (node_at T k)) D = true -> den c T k rho (restrict D i) = den c T k rho i.
Proof.
  intros c T k D rho i W H. apply den_agree; auto. apply (incl_names_agree _ D); auto.
  intros n I. apply restrict_in; auto.
Qed.

Lemma chk_squeeze_ew_sound : rule_sound chk_squeeze_ew.
Proof.
  intros G l r h cl H c M _. pose proof M as M'. destruct M' as [W _].
  unfold chk_squeeze_ew in H. set (T := gT G) in *.
  destruct (node_at T l) as [o1 zs Dl] eqn:El. destruct o1; try discriminate.
  destruct zs as [|z [|]]; try discriminate.
  destruct (node_at T z) as [o xs Dz] eqn:Ez. destruct (node_at T r) as [o' ys Dr] eqn:Er.
  match type of H with (if ?b then _ else _) = _ => destruct b eqn:B; try discriminate end.
  repeat match type of B with _ && _ = true => apply andb_prop in B as [B ?] end.
  rename H0 into SR, H1 into SZ, H2 into IY, H3 into IX, H4 into SQS, H5 into DE, H6 into SQ,
    H7 into OE, H8 into NW.
  apply op_eqb_eq in OE. subst o'.
  apply (eqv_zu G c M l r (names_iff_perm T l r _ _ _ _ _ _ El Er DE)).
  intros rho R j. change (gT G) with T.
  pose proof (squeeze_zu G c M l z SQ rho j) as Q. change (gT G) with T in Q. rewrite Q.
  rewrite (den_node c T z _ _ _ W Ez), (den_node c T r _ _ _ W Er).
  assert (ME : msk (sz c) Dz (zu G j) = msk (sz c) Dr (zu G j)).
  { pose proof (msk_zu_sub G c M z Dr j) as A1. pose proof (msk_zu_sub G c M r Dz j) as A2.
    change (gT G) with T in A1, A2. rewrite Ez in A1. rewrite Er in A2. cbn [ndims] in A1, A2.
    destruct (msk (sz c) Dz (zu G j)) eqn:Mz, (msk (sz c) Dr (zu G j)) eqn:Mr; auto;
      try (specialize (A2 SR eq_refl); discriminate);
      try (specialize (A1 SZ eq_refl); discriminate). }
  rewrite ME. destruct (msk (sz c) Dr (zu G j)); auto.
  rewrite !core_ew by auto. rewrite !map_map. f_equal.
  transitivity (map (fun k => den c T k rho (zu G j)) xs).
  - apply map_ext_in. intros x Ix. apply den_incl_names; auto.
    rewrite forallb_forall in IX. apply IX; auto.
  - pose proof (sqs_zu G c M ys xs SQS rho j) as Q2. change (gT G) with T in Q2. rewrite <- Q2.
    apply map_ext_in. intros y Iy. symmetry. apply den_incl_names; auto.
    rewrite forallb_forall in IY. apply IY; auto.
Qed.
