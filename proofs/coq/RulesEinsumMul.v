(** * RulesEinsumMul: a contraction multiplies its operands pointwise (docs/rules.md,
    "contraction").

    einsum-mul-canon, for the instances that only splice products in and reorder:
    [EINSUM(xs, o) = EINSUM(ys, o)] where [ys] is a permutation of the factors of [xs] once the
    [MUL] operands are flattened ([Canon.flat]). Checked: the operands of both sides agree on
    the spec of every dim they share ([DU], the union of the left operands' dims, holds every
    operand's dims), the two sides have the same operand names and output names, and each output
    name has its [DU] spec in the result. The rule's other instances merge powers ([x * x =
    x^2], [x^-1 * x = 1]); the second needs [x <> 0], a sign fact: [chk_einsum_mul_merge]
    below tests the rule's guard and its lemma's sign condition with [Signs.v], as
    [RulesMerge.chk_mul_merge] does for mul-canon. *)

From Coq Require Import Reals Lra Lia List QArith ZArith PArith NArith Bool Permutation.
From Coq Require Import FSets.FMapPositive FunctionalExtensionality.
From Shardproof Require Import Base Num Pow Term Props RuleLib Congr Rel Shard RulesBasic RulesLift
  RulesEinsum RulesScalarOut Positive Signs Canon RulesCanon RulesMerge.
Import ListNotations.
Open Scope R_scope.

(** A sum over [C] is determined by the summand at the indices in range of [C]. *)
Lemma sumover_ext_rng : forall C f g i, NoDup (map fst C) ->
  (forall j, (forall m, ~ In m (map fst C) -> j m = i m) ->
     (forall m L, In (m, L) C -> (j m < L)%nat) -> f j = g j) ->
  sumover C f i = sumover C g i.
Proof.
  induction C as [|[n L] C IH]; intros f g i ND H; simpl.
  - apply H; auto. intros m L' [].
  - simpl in ND. inversion ND as [|? ? NI ND']; subst.
    apply rsum_ext; intros k Hk. apply IH; auto.
    intros j Hj Hr. apply H.
    + intros m Hm. rewrite Hj by (intro I; apply Hm; simpl; auto).
      rewrite upd_other; auto. intro E; subst; apply Hm; simpl; auto.
    + intros m L' [E|I].
      * injection E as <- <-. rewrite Hj by auto. rewrite upd_same; auto.
      * apply Hr; auto.
Qed.

(** ** The union of the operands' dims, each name once (its first spec) *)
Fixpoint dedup_dims (l : list dimspec) (seen : list name) : list dimspec :=
  match l with
  | [] => []
  | d :: r => if existsb (Pos.eqb (fst d)) seen then dedup_dims r seen
              else d :: dedup_dims r (fst d :: seen)
  end.

Definition udims (T : table) (xs : list positive) : list dimspec :=
  dedup_dims (flat_map (fun x => ndims (node_at T x)) xs) [].

Lemma dedup_dims_In : forall l seen d, In d (dedup_dims l seen) -> In d l.
Proof.
  induction l as [|d' l IH]; intros seen d H; simpl in *; auto.
  destruct (existsb (Pos.eqb (fst d')) seen); [right; eapply IH; eauto|].
  destruct H as [<-|H]; [left; auto|right; eapply IH; eauto].
Qed.

Lemma udims_names : forall T xs n, In n (map fst (udims T xs)) -> In n (op_names T xs).
Proof.
  intros T xs n H. apply in_map_iff in H as [d [<- H]]. apply dedup_dims_In in H.
  unfold op_names. apply in_flat_map in H as [x [Ix Hd]]. apply in_flat_map.
  exists x; split; auto. apply in_map; auto.
Qed.

(** Operands whose dims are all in [DU] (same specs) read every name with [DU]'s spec. *)
Lemma first_spec_kids : forall T DU xs n, kids_in T xs DU = true -> NoDup (map fst DU) ->
  In n (op_names T xs) -> first_spec T xs n = spec_of DU n.
Proof.
  intros T DU xs n K ND. induction xs as [|x xs IH]; simpl; [intros []|].
  unfold kids_in in K; simpl in K. apply andb_prop in K as [Kx Kr].
  intros I. unfold op_names in I; simpl in I. apply in_app_iff in I.
  destruct (spec_of (ndims (node_at T x)) n) as [sh|] eqn:E.
  - symmetry. apply In_spec_of_nodup; auto. eapply incl_dims_In; eauto. apply spec_of_In; auto.
  - apply IH; auto. destruct I as [I|I]; auto.
    exfalso. apply In_spec_of in I. congruence.
Qed.

Lemma In_contracted : forall s T xs o n, In n (op_names T xs) -> existsb (Pos.eqb n) o = false ->
  In (n, match first_spec T xs n with Some sh => lsz s (s n) sh | None => 0%nat end)
     (contracted s T xs o).
Proof.
  intros s T xs o n I E. unfold contracted. apply in_map_iff. exists n. split; auto.
  apply filter_In. split.
  - apply In_nodup_pos. split; auto.
  - rewrite E; auto.
Qed.

Lemma contracted_out : forall s T xs o n, In n (map fst (contracted s T xs o)) ->
  existsb (Pos.eqb n) o = false.
Proof.
  intros s T xs o n I. unfold contracted in I. rewrite map_map in I. simpl in I.
  rewrite map_id in I. apply filter_In in I as [_ I]. apply Bool.negb_true_iff; auto.
Qed.

(** ** einsum-mul-canon *)
Definition chk_einsum_mul_canon (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l, node_at T r with
  | Node (OEinsum o) xs D, Node (OEinsum o') ys Dr =>
      let DU := udims T xs in
      match flat OMul canon_fuel T DU xs with
      | Some fx =>
          if names_eqb o o' && dims_eqvb D Dr && nodup_posb (map fst DU) &&
             kids_in T xs DU && kids_in T ys DU && perm_posb fx ys &&
             inclb (op_names T xs) (op_names T ys) && inclb (op_names T ys) (op_names T xs) &&
             forallb (fun d => negb (existsb (Pos.eqb (fst d)) o) ||
                               spec_opt_eqb (spec_of D (fst d)) (Some (snd d))) DU
          then Some [] else None
      | None => None
      end
  | _, _ => None
  end.

Lemma chk_einsum_mul_canon_sound : rule_sound chk_einsum_mul_canon.
Proof.
  intros G l r h cl H c M _. destruct M as [W _].
  unfold chk_einsum_mul_canon in H. set (T := gT G) in *.
  destruct (node_at T l) as [ol xs D] eqn:El. destruct ol; try discriminate.
  destruct (node_at T r) as [or ys Dr] eqn:Er. destruct or; try discriminate.
  set (DU := udims T xs) in *.
  destruct (flat OMul canon_fuel T DU xs) as [fx|] eqn:Fx; try discriminate.
  match type of H with (if ?b then _ else _) = _ => destruct b eqn:B; try discriminate end.
  apply andb_prop in B as [B OS]. apply andb_prop in B as [B I2].
  apply andb_prop in B as [B I1]. apply andb_prop in B as [B PF].
  apply andb_prop in B as [B KY]. apply andb_prop in B as [B KX].
  apply andb_prop in B as [B NDU]. apply andb_prop in B as [OO DE].
  apply (list_eqb_eq _ _ (fun a b => proj1 (Pos.eqb_eq a b))) in OO; subst out0.
  apply nodup_posb_ok in NDU. apply perm_posb_ok in PF.
  assert (NS : forall n, In n (op_names T xs) <-> In n (op_names T ys)).
  { intros n; split; intro I; [apply (inclb_In _ _ _ I1)|apply (inclb_In _ _ _ I2)]; auto. }
  assert (FX : forall n, In n (op_names T xs) -> first_spec T xs n = spec_of DU n)
    by (intros; apply first_spec_kids; auto).
  assert (FY : forall n, In n (op_names T xs) -> first_spec T ys n = spec_of DU n)
    by (intros; apply first_spec_kids; auto; apply NS; auto).
  destruct (contracted_same (sz c) T xs ys out) as [CP CN].
  { auto. }
  { intros n I _. rewrite FX, FY; auto. }
  destruct (flat_sound c T W OMul (or_intror eq_refl) canon_fuel DU xs fx Fx KX) as [FV _].
  apply (eqv_by_core c T l r _ _ D _ _ Dr W El Er DE).
  intros rho R i Mi Ri. cbn [core].
  rewrite <- (sumover_perm _ _ CP CN).
  apply sumover_ext_rng; auto. intros j Hj Hr.
  assert (MU : msk (sz c) DU j = true).
  { apply msk_iff; auto. intros n sh E.
    assert (InU : In (n, sh) DU) by (apply spec_of_In; auto).
    destruct (existsb (Pos.eqb n) out) eqn:Eo.
    - (* an output name: j reads i there, in range by the result's spec *)
      rewrite forallb_forall in OS. specialize (OS _ InU). simpl in OS.
      rewrite Eo in OS. simpl in OS. apply spec_opt_eqb_eq in OS.
      rewrite Hj.
      + eapply msk_spec; eauto.
      + intro I. apply contracted_out in I. congruence.
    - (* a contracted name: in range by the sum *)
      assert (InX : In n (op_names T xs)).
      { apply udims_names. apply in_map_iff. exists (n, sh); auto. }
      pose proof (In_contracted (sz c) T xs out n InX Eo) as IC.
      rewrite FX in IC by auto. rewrite E in IC. apply Hr in IC. auto. }
  rewrite !map_map. pose proof (FV rho j MU) as V. simpl comb in V. rewrite V.
  apply prodl_Permutation. apply Permutation_map; auto.
Qed.

(** ** einsum-mul-canon merging powers ([RulesMerge.v]: the sign-guarded merge of factors) *)
Definition chk_einsum_mul_merge (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l, node_at T r with
  | Node (OEinsum o) xs D, Node (OEinsum o') ys Dr =>
      let DU := udims T xs in
      match flat OMul canon_fuel T DU xs with
      | Some fx =>
          if names_eqb o o' && dims_eqvb D Dr && nodup_posb (map fst DU) &&
             kids_in T xs DU && kids_in T ys DU && sg_checkb G &&
             keeps_defined G (map (prd T) (filter (fun x => negb (is_cst T x)) fx))
                             (map (prd T) (filter (fun x => negb (is_cst T x)) ys)) &&
             merge_ok G (map fst (map (rd T) fx ++ map (rd T) ys)) (map (rd T) fx) (map (rd T) ys) &&
             inclb (op_names T xs) (op_names T ys) && inclb (op_names T ys) (op_names T xs) &&
             forallb (fun d => negb (existsb (Pos.eqb (fst d)) o) ||
                               spec_opt_eqb (spec_of D (fst d)) (Some (snd d))) DU
          then Some [] else None
      | None => None
      end
  | _, _ => None
  end.

Lemma chk_einsum_mul_merge_sound : rule_sound chk_einsum_mul_merge.
Proof.
  intros G l r h cl H c M _. pose proof M as M0. destruct M as [W _].
  unfold chk_einsum_mul_merge in H. set (T := gT G) in *.
  destruct (node_at T l) as [ol xs D] eqn:El. destruct ol; try discriminate.
  destruct (node_at T r) as [or ys Dr] eqn:Er. destruct or; try discriminate.
  set (DU := udims T xs) in *.
  destruct (flat OMul canon_fuel T DU xs) as [fx|] eqn:Fx; try discriminate.
  match type of H with (if ?b then _ else _) = _ => destruct b eqn:B; try discriminate end.
  apply andb_prop in B as [B OS]. apply andb_prop in B as [B I2].
  apply andb_prop in B as [B I1].
  apply andb_prop in B as [B MO]. apply andb_prop in B as [B KD]. apply andb_prop in B as [B SG].
  apply andb_prop in B as [B KY]. apply andb_prop in B as [B KX].
  apply andb_prop in B as [B NDU]. apply andb_prop in B as [OO DE].
  apply (list_eqb_eq _ _ (fun a b => proj1 (Pos.eqb_eq a b))) in OO; subst out0.
  apply nodup_posb_ok in NDU.
  assert (NS : forall n, In n (op_names T xs) <-> In n (op_names T ys)).
  { intros n; split; intro I; [apply (inclb_In _ _ _ I1)|apply (inclb_In _ _ _ I2)]; auto. }
  assert (FX : forall n, In n (op_names T xs) -> first_spec T xs n = spec_of DU n)
    by (intros; apply first_spec_kids; auto).
  assert (FY : forall n, In n (op_names T xs) -> first_spec T ys n = spec_of DU n)
    by (intros; apply first_spec_kids; auto; apply NS; auto).
  destruct (contracted_same (sz c) T xs ys out) as [CP CN].
  { auto. }
  { intros n I _. rewrite FX, FY; auto. }
  destruct (flat_sound c T W OMul (or_intror eq_refl) canon_fuel DU xs fx Fx KX) as [FV KF].
  apply (eqv_by_core c T l r _ _ D _ _ Dr W El Er DE).
  intros rho R i Mi Ri. cbn [core].
  rewrite <- (sumover_perm _ _ CP CN).
  apply sumover_ext_rng; auto. intros j Hj Hr.
  assert (MU : msk (sz c) DU j = true).
  { apply msk_iff; auto. intros n sh E.
    assert (InU : In (n, sh) DU) by (apply spec_of_In; auto).
    destruct (existsb (Pos.eqb n) out) eqn:Eo.
    - (* an output name: j reads i there, in range by the result's spec *)
      rewrite forallb_forall in OS. specialize (OS _ InU). simpl in OS.
      rewrite Eo in OS. simpl in OS. apply spec_opt_eqb_eq in OS.
      rewrite Hj.
      + eapply msk_spec; eauto.
      + intro I. apply contracted_out in I. congruence.
    - (* a contracted name: in range by the sum *)
      assert (InX : In n (op_names T xs)).
      { apply udims_names. apply in_map_iff. exists (n, sh); auto. }
      pose proof (In_contracted (sz c) T xs out n InX Eo) as IC.
      rewrite FX in IC by auto. rewrite E in IC. apply Hr in IC. auto. }
  rewrite !map_map. pose proof (FV rho j MU) as V. simpl comb in V. rewrite V.
  assert (Kn : forall l0, kids_in T l0 DU = true -> forall z, In z l0 ->
            msk (sz c) (ndims (node_at T z)) j = true).
  { intros l0 K0 z Iz. unfold kids_in in K0. rewrite forallb_forall in K0.
    apply (incl_dims_msk _ _ DU); auto. }
  assert (Conv : forall l0, kids_in T l0 DU = true ->
            prodl (map (fun z => den c T z rho j) l0) =
            prodl (map (fun p => rpow (den c T (fst p) rho j) (snd p)) (map (rd T) l0))).
  { intros l0 K0. rewrite map_map. f_equal. apply map_ext_in. intros z Iz.
    apply (rd_val c T W z rho j). apply (Kn l0 K0); auto. }
  rewrite (Conv fx KF), (Conv ys KY).
  apply (merge_sound (fun k => den c T k rho j) G _ _ _ MO).
  intros p Ip. apply in_app_or in Ip as [Ip|Ip]; apply in_map_iff in Ip as [z [<- Iz]];
    apply (sg_sound G c M0 SG); apply (rd_val c T W z rho j);
    [apply (Kn fx)|apply (Kn ys)]; auto.
Qed.

(** einsum-mul-canon: the permutation checker, else the merging one *)
Definition chk_einsum_mul_canon_all (G : gctx) (l r : positive) (h : hint) : option (list claim) :=
  match chk_einsum_mul_canon G l r h with Some cl => Some cl | None => chk_einsum_mul_merge G l r h end.

Lemma chk_einsum_mul_canon_all_sound : rule_sound chk_einsum_mul_canon_all.
Proof.
  intros G l r h cl H. unfold chk_einsum_mul_canon_all in H.
  destruct (chk_einsum_mul_canon G l r h) eqn:E.
  - injection H as <-. eapply chk_einsum_mul_canon_sound; eauto.
  - eapply chk_einsum_mul_merge_sound; eauto.
Qed.
