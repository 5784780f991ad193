(** * RulesComponents: a contraction that splits into groups sharing no summed dim
    (docs/rules.md, issue 12).

    einsum-components: [EINSUM(xs, out) = MUL(EINSUM(K_1, o_1), ..., EINSUM(K_m, o_m))]. Checked:
    every part an [EINSUM] whose dims are among the product's (same shards), whose output names
    are [out]'s among its operands' names and which keeps every such name as a dim
    ([part_ok]); the parts' operands, in order, a permutation of [xs]; no summed name of a part
    (a name of its operands not in [out]) is a name of another part's operands ([split_ok]);
    every operand gives a shared dim the same shards ([specs_agree]); the two sides with the
    same dims. Then the sum over the summed names is the sum over each part's in turn, and a
    sum of a product of factors that each read only their own summed names is the product of
    the sums ([sumover_mul_split]). The guard's "two or more groups" is not needed by the lemma
    and not tested. *)

From Coq Require Import Reals Lra Lia List QArith ZArith PArith NArith Bool Permutation.
From Coq Require Import FSets.FMapPositive FunctionalExtensionality.
From Shardproof Require Import Base Num Pow Term Props RuleLib Congr Rel Shard RulesBasic RulesLift
  RulesAxis RulesEinsum RulesScalarOut RulesLiftEinsum RulesLiftReindex RulesEinsumMul RulesSplit
  RulesShift RulesNested RulesFactorOut RulesUnitDim.
Import ListNotations.
Open Scope R_scope.

(** ** Sums of products of independent factors *)
Definition inv (S : list name) (g : Ix -> R) : Prop := forall j n v, In n S -> g (upd j n v) = g j.

Lemma sumover_inv : forall C g S, inv S g -> inv S (sumover C g).
Proof.
  induction C as [|[m L] C IH]; intros g S H j n v I; simpl; auto.
  apply rsum_ext; intros w _. destruct (Pos.eqb_spec m n).
  - subst. rewrite upd_upd_same. auto.
  - rewrite upd_comm by auto. apply (IH g S H); auto.
Qed.

Lemma inv_incl : forall S S' g, inv S g -> incl S' S -> inv S' g.
Proof. intros S S' g H I j n v In_; apply H; auto. Qed.

Lemma sumover_mul_l : forall C f K i, inv (map fst C) K ->
  sumover C (fun t => f t * K t) i = sumover C f i * K i.
Proof.
  induction C as [|[n L] C IH]; intros f K i H; simpl; auto.
  rewrite <- rsum_scal_r. apply rsum_ext; intros v _. rewrite IH.
  - rewrite (H i n v) by (simpl; auto). auto.
  - apply (inv_incl _ _ _ H). intros m I; simpl; auto.
Qed.

Lemma sumover_mul_r : forall C f g j, inv (map fst C) f ->
  sumover C (fun t => f t * g t) j = f j * sumover C g j.
Proof.
  induction C as [|[n L] C IH]; intros f g j H; simpl; auto.
  rewrite <- rsum_scal_l. apply rsum_ext; intros v _. rewrite IH.
  - rewrite (H j n v) by (simpl; auto). auto.
  - apply (inv_incl _ _ _ H). intros m I; simpl; auto.
Qed.

Lemma sumover_mul_split : forall C1 C2 f g i, inv (map fst C2) f -> inv (map fst C1) g ->
  sumover (C1 ++ C2) (fun t => f t * g t) i = sumover C1 f i * sumover C2 g i.
Proof.
  intros C1 C2 f g i Hf Hg. rewrite sumover_app.
  rewrite (sumover_ext C1 _ (fun j => f j * sumover C2 g j) i i); auto.
  - apply sumover_mul_l. apply sumover_inv; auto.
  - intros j _. apply sumover_mul_r; auto.
Qed.

(** ** The checker *)
Definition pargs (T : table) (p : positive) : list positive := nargs (node_at T p).
Definition pcon (s : name -> nat) (T : table) (p : positive) : list (name * nat) :=
  match node_at T p with Node (OEinsum o) ys _ => contracted s T ys o | _ => [] end.

Definition part_ok (G : gctx) (out : list name) (Dr : list dimspec) (p : positive) : bool :=
  let T := gT G in
  match node_at T p with
  | Node (OEinsum o) ys D =>
      incl_dims D Dr &&
      forallb (fun n => Bool.eqb (memb n o) (memb n out) && (negb (memb n out) || has_name D n))
              (op_names T ys)
  | _ => false
  end.

Fixpoint split_ok (T : table) (out : list name) (ps : list positive) : bool :=
  match ps with
  | [] => true
  | p :: rest =>
      let A := op_names T (pargs T p) in
      let B := op_names T (flat_map (pargs T) rest) in
      forallb (fun n => memb n out || negb (memb n B)) A &&
      forallb (fun n => memb n out || negb (memb n A)) B && split_ok T out rest
  end.

Definition specs_agree (T : table) (xs : list positive) : bool :=
  forallb (fun x => forallb (fun d => forallb (fun x' =>
    match spec_of (ndims (node_at T x')) (fst d) with
    | Some sh => list_eqb shard_eqb sh (snd d) | None => true end) xs)
    (ndims (node_at T x))) xs.

Definition chk_einsum_components (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l, node_at T r with
  | Node (OEinsum out) xs Dl, Node OMul ps Dr =>
      if dims_eqvb Dl Dr && forallb (part_ok G out Dr) ps && split_ok T out ps &&
         perm_posb (flat_map (pargs T) ps) xs && specs_agree T xs
      then Some [] else None
  | _, _ => None
  end.

(** ** Lemmas about the checked facts *)
Lemma op_names_flat : forall T ps n, In n (op_names T (flat_map (pargs T) ps)) <->
  exists p, In p ps /\ In n (op_names T (pargs T p)).
Proof.
  intros T ps n. unfold op_names. rewrite in_flat_map. split.
  - intros [x [Ix Inx]]. apply in_flat_map in Ix as [p [Ip Ixp]]. exists p. split; auto.
    apply in_flat_map. eauto.
  - intros [p [Ip Inp]]. apply in_flat_map in Inp as [x [Ix Inx]]. exists x. split; auto.
    apply in_flat_map. eauto.
Qed.

Lemma specs_agree_ok : forall T xs, specs_agree T xs = true -> forall x x' n sh sh',
  In x xs -> In x' xs -> spec_of (ndims (node_at T x)) n = Some sh ->
  spec_of (ndims (node_at T x')) n = Some sh' -> sh = sh'.
Proof.
  intros T xs H x x' n sh sh' Ix Ix' E E'. unfold specs_agree in H. rewrite forallb_forall in H.
  pose proof (H x Ix) as Hx. rewrite forallb_forall in Hx.
  pose proof (Hx (n, sh) (spec_of_In _ _ _ E)) as Hd. rewrite forallb_forall in Hd.
  pose proof (Hd x' Ix') as Hd'. simpl in Hd'. rewrite E' in Hd'.
  symmetry. apply (list_eqb_eq _ _ shard_eqb_eq); auto.
Qed.

Lemma first_spec_agree : forall T xs A B n, specs_agree T xs = true -> incl A xs -> incl B xs ->
  In n (op_names T A) -> In n (op_names T B) -> first_spec T A n = first_spec T B n.
Proof.
  intros T xs A B n H IA IB NA NB.
  destruct (op_names_first_spec T A n NA) as [sh EA]. destruct (op_names_first_spec T B n NB) as [sh' EB].
  rewrite EA, EB. destruct (first_spec_In _ _ _ _ EA) as [x [Ix Sx]].
  destruct (first_spec_In _ _ _ _ EB) as [x' [Ix' Sx']]. f_equal.
  eapply (specs_agree_ok T xs H x x'); eauto.
Qed.

Lemma names_pcon : forall s T p n L, In (n, L) (pcon s T p) -> In n (op_names T (pargs T p)).
Proof.
  intros s T p n L I. unfold pcon, pargs in *. destruct (node_at T p) as [o ys D]. simpl.
  destruct o; try contradiction. apply In_contracted_iff in I as [I _]. auto.
Qed.

Lemma NoDup_pcon : forall s T out ps, split_ok T out ps = true ->
  (forall p n L, In p ps -> In (n, L) (pcon s T p) -> memb n out = false) ->
  NoDup (map fst (flat_map (pcon s T) ps)).
Proof.
  intros s T out; induction ps as [|p ps IH]; intros S O; simpl; [constructor|].
  simpl in S. apply andb_prop in S as [S S3]; apply andb_prop in S as [S1 S2].
  rewrite map_app. apply NoDup_app2.
  - unfold pcon. destruct (node_at T p) as [o ys D]. destruct o; simpl; try constructor.
    apply NoDup_contracted.
  - apply IH; auto. intros; eapply O; simpl; eauto.
  - intros n I1 I2. apply in_map_iff in I1 as [[n1 L1] [E1 I1]]. simpl in E1; subst n1.
    apply in_map_iff in I2 as [[n2 L2] [E2 I2]]. simpl in E2; subst n2.
    apply in_flat_map in I2 as [q [Iq Iq2]].
    pose proof (O p n L1 (or_introl eq_refl) I1) as On.
    apply names_pcon in I1. rewrite forallb_forall in S1. apply S1 in I1.
    rewrite On in I1. simpl in I1. apply Bool.negb_true_iff in I1.
    assert (In n (op_names T (flat_map (pargs T) ps))).
    { apply op_names_flat. exists q. split; auto. eapply names_pcon; eauto. }
    apply memb_In in H. congruence.
Qed.

Lemma pcon_not_out : forall G s out Dr p n L, part_ok G out Dr p = true ->
  In (n, L) (pcon s (gT G) p) -> memb n out = false.
Proof.
  intros G s out Dr p n L H I. unfold part_ok, pcon in *. set (T := gT G) in *.
  destruct (node_at T p) as [o ys D]. destruct o; try discriminate.
  apply andb_prop in H as [_ H]. rewrite forallb_forall in H.
  apply In_contracted_iff in I as [IN [NO _]]. apply H in IN.
  apply andb_prop in IN as [E _]. apply Bool.eqb_prop in E. unfold memb in *. congruence.
Qed.

Section Parts.
Variable G : gctx.
Variable c : ctx.
Hypothesis W : wf_table (gT G).
Let T := gT G.
Variable rho : Rk.

Definition fprod (ys : list positive) (t : Ix) : R := prodl (map (fun y => den c T y rho t) ys).

Lemma inv_prod : forall ys S, (forall n, In n S -> ~ In n (op_names T ys)) -> inv S (fprod ys).
Proof.
  intros ys S H j n v I. unfold fprod. f_equal. apply map_ext_in. intros y Iy.
  apply den_lacks; auto. intro Hn. apply (H n I). unfold op_names. apply in_flat_map. eauto.
Qed.

Lemma den_part : forall out Dr p i, part_ok G out Dr p = true -> msk (sz c) Dr i = true ->
  den c T p rho i = sumover (pcon (sz c) T p) (fprod (pargs T p)) i.
Proof.
  intros out Dr p i H Mi. unfold part_ok, pcon, pargs in *. fold T in H |- *.
  destruct (node_at T p) as [o ys D] eqn:Ep. destruct o; try discriminate.
  apply andb_prop in H as [I H]. rewrite forallb_forall in H.
  rewrite (den_in c T p _ _ _ rho i W Ep) by (apply (incl_dims_msk _ _ Dr); auto).
  cbn [core nargs].
  replace (fun j => prodl (map (fun v => v rho j) (map (den c T) ys))) with (fprod ys)
    by (apply functional_extensionality; intro j; unfold fprod; rewrite map_map; auto).
  apply (sumover_agree _ _ (op_names T ys)).
  - intros j j' A. unfold fprod. f_equal. apply map_ext_in. intros y Iy.
    apply den_agree; auto. intros n In_. apply A. unfold op_names. apply in_flat_map. eauto.
  - intros m Im NI. pose proof (H m Im) as Hm. apply andb_prop in Hm as [E K].
    apply Bool.eqb_prop in E. destruct (memb m out) eqn:Mo.
    + simpl in K. apply restrict_in. apply has_name_In; auto.
    + exfalso. apply NI. apply (in_map fst _ (m, match first_spec T ys m with
        Some sh => lsz (sz c) (sz c m) sh | None => 0%nat end)).
      apply In_contracted_iff. repeat split; auto.
Qed.

Lemma parts_prod : forall out Dr i ps, forallb (part_ok G out Dr) ps = true ->
  split_ok T out ps = true -> msk (sz c) Dr i = true ->
  sumover (flat_map (pcon (sz c) T) ps) (fprod (flat_map (pargs T) ps)) i =
  prodl (map (fun p => den c T p rho i) ps).
Proof.
  intros out Dr i; induction ps as [|p ps IH]; intros P S Mi; simpl; auto.
  simpl in P, S. apply andb_prop in P as [P1 P]. apply andb_prop in S as [S S3].
  apply andb_prop in S as [S1 S2]. rewrite forallb_forall in S1, S2.
  replace (fprod (pargs T p ++ flat_map (pargs T) ps)) with
    (fun t => fprod (pargs T p) t * fprod (flat_map (pargs T) ps) t)
    by (apply functional_extensionality; intro t; unfold fprod; rewrite map_app, prodl_app'; auto).
  rewrite sumover_mul_split.
  - rewrite IH by auto. rewrite (den_part out Dr p i P1 Mi). auto.
  - apply inv_prod. intros n In_ IA. apply in_map_iff in In_ as [[n' L] [E I]]. simpl in E; subst n'.
    apply in_flat_map in I as [q [Iq Iq2]].
    assert (Pq : part_ok G out Dr q = true) by (rewrite forallb_forall in P; auto).
    pose proof (pcon_not_out G _ out Dr q n L Pq Iq2) as On.
    assert (IB : In n (op_names T (flat_map (pargs T) ps))).
    { apply op_names_flat. exists q. split; auto. eapply names_pcon; eauto. }
    pose proof (S2 n IB) as Sn. rewrite On in Sn. simpl in Sn.
    apply Bool.negb_true_iff in Sn. apply memb_In in IA. congruence.
  - apply inv_prod. intros n In_ IB. apply in_map_iff in In_ as [[n' L] [E I]]. simpl in E; subst n'.
    pose proof (pcon_not_out G _ out Dr p n L P1 I) as On. apply names_pcon in I.
    pose proof (S1 n I) as Sn. rewrite On in Sn. simpl in Sn.
    apply Bool.negb_true_iff in Sn. apply memb_In in IB. congruence.
Qed.
End Parts.

Lemma op_names_perm : forall T A B n, Permutation A B -> In n (op_names T A) -> In n (op_names T B).
Proof.
  intros T A B n P I. unfold op_names in *. apply in_flat_map in I as [x [Ix Inx]].
  apply in_flat_map. exists x. split; auto. eapply Permutation_in; eauto.
Qed.

Lemma chk_einsum_components_sound : rule_sound chk_einsum_components.
Proof.
  intros G l r h cl H c M _. destruct M as [W _].
  unfold chk_einsum_components in H. set (T := gT G) in *.
  destruct (node_at T l) as [o1 xs Dl] eqn:El. destruct o1; try discriminate.
  destruct (node_at T r) as [o2 ps Dr] eqn:Er. destruct o2; try discriminate.
  match type of H with (if ?b then _ else _) = _ => destruct b eqn:B; try discriminate end.
  repeat match type of B with _ && _ = true => apply andb_prop in B as [B ?] end.
  rename B into DE, H0 into SA, H1 into PP, H2 into SO, H3 into PO.
  apply perm_posb_ok in PP.
  assert (INC : forall p, In p ps -> incl (pargs T p) xs).
  { intros p Ip y Iy. apply (Permutation_in _ PP). apply in_flat_map. eauto. }
  assert (POk : forall p, In p ps -> part_ok G out Dr p = true)
    by (rewrite forallb_forall in PO; auto).
  apply (eqv_by_core c T l r _ _ _ _ _ _ W El Er DE). intros rho R i Mi Ri.
  destruct (dims_eqvb_perm _ _ DE) as [P _].
  assert (Mr : msk (sz c) Dr i = true) by (rewrite <- (msk_perm _ _ _ _ P); auto).
  cbn [core]. rewrite map_map.
  pose proof (parts_prod G c W rho out Dr i ps PO SO Mr) as PR. change (gT G) with T in PR.
  rewrite <- PR.
  transitivity (sumover (contracted (sz c) T xs out) (fprod G c rho (flat_map (pargs T) ps)) i).
  - apply sumover_ext; auto. intros j _. unfold fprod. rewrite map_map.
    apply prodl_Permutation, Permutation_map, Permutation_sym; auto.
  - apply sumover_perm; [|apply NoDup_contracted].
    apply NoDup_Permutation.
    + apply NoDup_fst_pairs, NoDup_contracted.
    + apply NoDup_fst_pairs. apply (NoDup_pcon _ _ out); auto.
      intros p n L Ip I. eapply pcon_not_out; eauto.
    + intros [n L]. rewrite In_contracted_iff, in_flat_map. split.
      * intros [IN [NO EL]].
        apply (op_names_perm T _ _ n (Permutation_sym PP)), op_names_flat in IN as [p [Ip Inp]].
        exists p. split; auto. pose proof (POk p Ip) as Pp. unfold part_ok, pcon, pargs in *.
        fold T in Pp |- *. destruct (node_at T p) as [o ys D] eqn:Ep. destruct o; try discriminate.
        simpl in Inp. apply andb_prop in Pp as [_ Pp]. rewrite forallb_forall in Pp.
        pose proof (Pp n Inp) as Pn. apply andb_prop in Pn as [E _]. apply Bool.eqb_prop in E.
        apply In_contracted_iff. split; auto. split.
        -- unfold memb in E. congruence.
        -- rewrite EL. rewrite (first_spec_agree T xs ys xs n SA); auto.
           ++ specialize (INC p Ip). unfold pargs in INC. rewrite Ep in INC. auto.
           ++ apply incl_refl.
           ++ apply (op_names_perm T (flat_map (pargs T) ps)); auto.
              apply op_names_flat. exists p. split; auto. unfold pargs. rewrite Ep. auto.
      * intros [p [Ip I]]. pose proof (pcon_not_out G _ out Dr p n L (POk p Ip) I) as On.
        pose proof (names_pcon _ _ _ _ _ I) as Inp.
        assert (INx : In n (op_names T xs)).
        { apply (op_names_perm T (flat_map (pargs T) ps)); auto.
          apply op_names_flat. exists p. auto. }
        split; auto. split; [unfold memb in On; auto|].
        unfold pcon, pargs in *. fold T in I, Inp. destruct (node_at T p) as [o ys D] eqn:Ep.
        destruct o; try contradiction. simpl in Inp.
        apply In_contracted_iff in I as [_ [_ EL]]. rewrite EL.
        rewrite (first_spec_agree T xs ys xs n SA); auto.
        -- specialize (INC p Ip). unfold pargs in INC. rewrite Ep in INC. auto.
        -- apply incl_refl.
Qed.
