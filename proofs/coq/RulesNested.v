(** * RulesNested: a contraction inside a contraction (docs/rules.md, "contraction"; issue 12).

    einsum-nested: [EINSUM(pre ++ [EINSUM(zs, o1)] ++ post, o) = EINSUM(pre ++ zs ++ post, o)]:
    the inner sum over the names [zs] contracts ([C2]) moves out and joins the outer one
    ([C1]): [sum_C1 (P * sum_C2 Z) = sum_(C1 ++ C2) P Z] when no other operand and no output
    name has a name of [C2]. Checked: that guard (the Python rule's; its "not among the names
    another operand sums" and "not a unit squeeze" keep the e-graph's renaming apart and are
    not needed here: a node's value does not depend on the names it sums), the inner node's
    dims are exactly [o1], names of [zs]; each summed name has the same spec in both sides'
    operand lists ([first_spec]); each dim of the inner node has the spec the outer sum (or
    the result) gives it, so the inner node is read in its range. *)

From Coq Require Import Reals Lra Lia List QArith ZArith PArith NArith Bool Permutation.
From Coq Require Import FSets.FMapPositive FunctionalExtensionality.
From Shardproof Require Import Base Num Pow Term Props RuleLib Congr Rel Shard RulesBasic RulesLift
  RulesEinsum RulesScalarOut RulesLiftEinsum RulesLiftReindex RulesEinsumMul RulesSplit
  RulesFactorOut.
Import ListNotations.
Open Scope R_scope.

Fixpoint splits (l : list positive) : list (list positive * positive * list positive) :=
  match l with
  | [] => []
  | x :: r => ([], x, r) :: map (fun t => let '(p, y, q) := t in (x :: p, y, q)) (splits r)
  end.

Lemma splits_ok : forall l p x q, In (p, x, q) (splits l) -> l = p ++ x :: q.
Proof.
  induction l as [|y l IH]; intros p x q H; simpl in H; [contradiction|].
  destruct H as [E|H]; [injection E as <- <- <-; auto|].
  apply in_map_iff in H as [[[p' x'] q'] [E I]]. injection E as <- <- <-.
  rewrite (IH _ _ _ I). auto.
Qed.

Definition memb (n : name) (l : list name) : bool := existsb (Pos.eqb n) l.

Definition nest_ok (G : gctx) (o : list name) (D : list dimspec) (ys : list positive)
  (pq : list positive * positive * list positive) : bool :=
  let T := gT G in
  let '(pre, x, post) := pq in
  let others := pre ++ post in
  match node_at T x with
  | Node (OEinsum o1) zs Di =>
      let xs := pre ++ x :: post in
      list_eqb Pos.eqb ys (pre ++ zs ++ post) &&
      nodup_posb (map fst Di) &&
      inclb (map fst Di) o1 && inclb o1 (map fst Di) && inclb o1 (op_names T zs) &&
      forallb (fun n => memb n o1 ||
                        (negb (memb n (op_names T others)) && negb (memb n o) &&
                         spec_opt_eqb (first_spec T zs n) (first_spec T ys n)))
              (op_names T zs) &&
      forallb (fun n => memb n o || spec_opt_eqb (first_spec T xs n) (first_spec T ys n))
              (op_names T xs) &&
      forallb (fun d => if memb (fst d) o then spec_opt_eqb (spec_of D (fst d)) (Some (snd d))
                        else spec_opt_eqb (first_spec T xs (fst d)) (Some (snd d))) Di
  | _ => false
  end.

Definition chk_einsum_nested (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l, node_at T r with
  | Node (OEinsum o) xs D, Node (OEinsum o') ys Dr =>
      if names_eqb o o' && dims_eqvb D Dr && existsb (nest_ok G o D ys) (splits xs)
      then Some [] else None
  | _, _ => None
  end.

Lemma op_names_app : forall T a b n, In n (op_names T (a ++ b)) <-> In n (op_names T a) \/ In n (op_names T b).
Proof. intros. unfold op_names. rewrite flat_map_app. apply in_app_iff. Qed.

Lemma op_names_cons : forall T x b n,
  In n (op_names T (x :: b)) <-> In n (map fst (ndims (node_at T x))) \/ In n (op_names T b).
Proof. intros. unfold op_names. simpl. apply in_app_iff. Qed.

Lemma memb_In : forall n l, memb n l = true <-> In n l.
Proof.
  intros n l. unfold memb. rewrite existsb_exists. split.
  - intros [m [I E]]. apply Pos.eqb_eq in E. subst; auto.
  - intros I. exists n. split; auto. apply Pos.eqb_refl.
Qed.

Lemma NoDup_app2 : forall (a b : list name), NoDup a -> NoDup b ->
  (forall x, In x a -> In x b -> False) -> NoDup (a ++ b).
Proof.
  induction a as [|y a IH]; intros b Na Nb D; simpl; auto.
  inversion Na as [|? ? NI Na']; subst. constructor.
  - rewrite in_app_iff. intros [I|I]; [contradiction|]. apply (D y); simpl; auto.
  - apply IH; auto. intros z I1 I2. apply (D z); simpl; auto.
Qed.

Lemma NoDup_contracted : forall s T xs o, NoDup (map fst (contracted s T xs o)).
Proof.
  intros. unfold contracted. rewrite map_map. simpl. rewrite map_id.
  apply NoDup_filter, NoDup_nodup_pos.
Qed.

Lemma chk_einsum_nested_sound : rule_sound chk_einsum_nested.
Proof.
  intros G l r h cl H c M _. destruct M as [W _].
  unfold chk_einsum_nested in H. set (T := gT G) in *.
  destruct (node_at T l) as [ol xs D] eqn:El. destruct ol; try discriminate. rename out into o.
  destruct (node_at T r) as [or ys Dr] eqn:Er. destruct or; try discriminate. rename out into o'.
  match type of H with (if ?b then _ else _) = _ => destruct b eqn:B; try discriminate end.
  apply andb_prop in B as [B EX]. apply andb_prop in B as [OO DE].
  apply (list_eqb_eq _ _ (fun a b => proj1 (Pos.eqb_eq a b))) in OO; subst o'.
  apply existsb_exists in EX as [[[pre x] post] [Isp NO]].
  apply splits_ok in Isp. subst xs.
  unfold nest_ok in NO. fold T in NO.
  destruct (node_at T x) as [ox zs Di] eqn:Ex. destruct ox; try discriminate. rename out into o1.
  repeat match type of NO with _ && _ = true => apply andb_prop in NO as [NO ?] end.
  rename H0 into SPI, H1 into SPX, H2 into SPZ, H3 into O1Z, H4 into O1D, H5 into DO1,
    H6 into NDi.
  apply (list_eqb_eq _ _ (fun a b => proj1 (Pos.eqb_eq a b))) in NO. subst ys.
  apply nodup_posb_ok in NDi.
  rewrite forallb_forall in SPI, SPX, SPZ.
  set (xs := pre ++ x :: post) in *. set (ys := pre ++ zs ++ post) in *.
  set (others := pre ++ post) in *.
  (* names *)
  assert (NX : forall n, In n (op_names T xs) <-> In n (op_names T others) \/ In n (map fst Di)).
  { intros n. unfold xs, others. rewrite op_names_app, op_names_cons, op_names_app, Ex. simpl. tauto. }
  assert (NY : forall n, In n (op_names T ys) <-> In n (op_names T others) \/ In n (op_names T zs)).
  { intros n. unfold ys, others. rewrite !op_names_app. tauto. }
  assert (Z2 : forall n, In n (op_names T zs) -> ~ In n o1 ->
            ~ In n (op_names T others) /\ ~ In n o /\ first_spec T zs n = first_spec T ys n).
  { intros n I N. specialize (SPZ n I). apply orb_prop in SPZ as [E|E].
    - apply memb_In in E. contradiction.
    - repeat match type of E with _ && _ = true => apply andb_prop in E as [E ?] end.
      apply negb_true_iff in E, H1. apply spec_opt_eqb_eq in H0.
      split; [intro I'; apply memb_In in I'; congruence|].
      split; [intro I'; apply memb_In in I'; congruence|auto]. }
  set (C1 := contracted (sz c) T xs o). set (C2 := contracted (sz c) T zs o1).
  set (C3 := contracted (sz c) T ys o).
  assert (NC1 : NoDup (map fst C1)) by apply NoDup_contracted.
  assert (NC2 : NoDup (map fst C2)) by apply NoDup_contracted.
  assert (NC3 : NoDup (map fst C3)) by apply NoDup_contracted.
  assert (NF : forall n l', existsb (Pos.eqb n) l' = false <-> ~ In n l').
  { intros n l'. split; intro E.
    - intro I. assert (memb n l' = true) by (apply memb_In; auto). unfold memb in *. congruence.
    - destruct (existsb (Pos.eqb n) l') eqn:E'; auto. exfalso. apply E, memb_In; auto. }
  assert (ND12 : NoDup (map fst (C1 ++ C2))).
  { rewrite map_app. apply NoDup_app2; auto.
    intros n I1 I2. unfold C1, C2 in *.
    apply in_map_iff in I1 as [[n1 L1] [E1 I1]]. apply in_map_iff in I2 as [[n2 L2] [E2 I2]].
    simpl in E1, E2. subst n1 n2.
    apply In_contracted_iff in I1 as [I1 [F1 _]]. apply In_contracted_iff in I2 as [I2 [F2 _]].
    apply NF in F2. destruct (Z2 n I2 F2) as [No _].
    apply NX in I1 as [I1|I1]; [contradiction|]. apply F2. apply (inclb_In _ _ _ DO1); auto. }
  assert (SX : forall n, In n (op_names T xs) -> ~ In n o -> first_spec T xs n = first_spec T ys n).
  { intros n I N. specialize (SPX n I). unfold memb in SPX. rewrite (proj2 (NF n o) N) in SPX.
    simpl in SPX.
    apply spec_opt_eqb_eq; auto. }
  assert (PC : Permutation (C1 ++ C2) C3).
  { apply NoDup_Permutation.
    - apply NoDup_fst_pairs; auto.
    - apply NoDup_fst_pairs; auto.
    - intros [n L]. rewrite in_app_iff. unfold C1, C2, C3. rewrite !In_contracted_iff. split.
      + intros [[I [F EL]]|[I [F EL]]].
        * split; [|split; auto].
          -- apply NY. apply NX in I as [I|I]; [left; auto|right].
             apply (inclb_In _ _ _ O1Z), (inclb_In _ _ _ DO1); auto.
          -- rewrite EL, SX; auto. apply NF; auto.
        * apply NF in F. destruct (Z2 n I F) as [_ [No Fz]].
          split; [apply NY; auto|]. split; [apply NF; auto|]. rewrite EL, Fz; auto.
      + intros [I [F EL]]. apply NF in F. apply NY in I as [I|I].
        * left. split; [apply NX; auto|]. split; [apply NF; auto|]. rewrite EL, SX; auto.
          apply NX; auto.
        * destruct (in_dec Pos.eq_dec n o1) as [Io|Io].
          -- left. assert (Ix : In n (op_names T xs)) by (apply NX; right; apply (inclb_In _ _ _ O1D); auto).
             split; auto. split; [apply NF; auto|]. rewrite EL, SX; auto.
          -- right. destruct (Z2 n I Io) as [_ [_ Fz]]. split; auto. split; [apply NF; auto|].
             rewrite EL, Fz; auto. }
  apply (eqv_by_core c T l r _ _ D _ _ Dr W El Er DE). intros rho R i Mi Ri. cbn [core].
  change (contracted (sz c) T xs o) with C1. change (contracted (sz c) T ys o) with C3.
  rewrite <- (sumover_perm _ _ PC ND12), sumover_app.
  apply sumover_ext_rng; auto. intros j Hj Hr.
  rewrite !map_map.
  (* the inner node is read in its range *)
  assert (MDi : msk (sz c) Di j = true).
  { apply msk_iff; auto. intros n sh E. apply spec_of_In in E as Id.
    specialize (SPI (n, sh) Id). simpl in SPI.
    destruct (memb n o) eqn:Mo.
    - apply spec_opt_eqb_eq in SPI. apply memb_In in Mo.
      rewrite Hj.
      + eapply msk_spec; eauto.
      + intro IC. apply contracted_out in IC. apply NF in IC. contradiction.
    - apply spec_opt_eqb_eq in SPI.
      assert (Ix : In n (op_names T xs)) by (apply NX; right; apply in_map_iff; exists (n, sh); auto).
      assert (IC : In (n, lsz (sz c) (sz c n) sh) C1).
      { unfold C1. apply In_contracted_iff. split; auto. split; [unfold memb in Mo; auto|].
        rewrite SPI. auto. }
      apply Hr in IC. auto. }
  unfold xs at 1. rewrite map_app, prodl_app'. cbn [map]. rewrite prodl_cons.
  rewrite (den_in c T x _ _ _ rho j W Ex MDi). cbn [core].
  change (contracted (sz c) T zs o1) with C2.
  rewrite (sumover_agree C2 _ (op_names T zs) (restrict Di j) j).
  2:{ intros j1 j2 A. rewrite !map_map. f_equal. apply map_ext_in. intros z Iz.
      apply den_agree; auto. intros n In_. apply A. unfold op_names. apply in_flat_map; eauto. }
  2:{ intros m Im NI. apply restrict_in. apply (inclb_In _ _ _ O1D).
      destruct (in_dec Pos.eq_dec m o1) as [Io|Io]; auto. exfalso. apply NI.
      apply in_map_iff. exists (m, match first_spec T zs m with Some sh => lsz (sz c) (sz c m) sh
                                    | None => 0%nat end).
      split; auto. unfold C2. apply In_contracted_iff. split; auto. split; auto. apply NF; auto. }
  set (Pp := prodl (map (fun y => den c T y rho j) pre)).
  set (Pq := prodl (map (fun y => den c T y rho j) post)).
  transitivity (sumover C2 (fun j' => Pp * Pq *
                  prodl (map (fun v => v rho j') (map (den c T) zs))) j).
  - rewrite sumover_scal. ring.
  - apply sumover_ext; auto. intros j' Hj'.
    unfold ys. rewrite !map_map, !map_app, !prodl_app'.
    assert (Oth : forall l0, (forall y, In y l0 -> In y others) ->
              prodl (map (fun y => den c T y rho j) l0) = prodl (map (fun y => den c T y rho j') l0)).
    { intros l0 Sub. f_equal. apply map_ext_in. intros y Iy. apply den_agree; auto.
      intros n In_. symmetry. apply Hj'. intro IC.
      apply in_map_iff in IC as [[n' L'] [E' IC]]. simpl in E'. subst n'.
      unfold C2 in IC. apply In_contracted_iff in IC as [Iz [Fo _]]. apply NF in Fo.
      destruct (Z2 n Iz Fo) as [No _]. apply No. unfold op_names. apply in_flat_map.
      exists y. split; auto. }
    unfold Pp, Pq. rewrite (Oth pre), (Oth post).
    + ring.
    + intros y I. unfold others. apply in_or_app; auto.
    + intros y I. unfold others. apply in_or_app; auto.
Qed.
