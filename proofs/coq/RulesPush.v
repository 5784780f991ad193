(** * RulesPush: an all-reduce moved into a contraction (docs/rules.md, "collectives"; issue 17).

    allreduce-einsum-push:
    [ALL_REDUCE(EINSUM(xs, out), a, sum) = EINSUM(xs with x_k -> ALL_REDUCE(x_k, a, sum), out)].
    Checked as the rule's guard: exactly one operand [x_k] is replaced, it varies over [a] and no
    dim of it is sharded over [a]; every other operand is kept and does not vary over [a] (the
    checked "varies over" analysis); the two contractions sum the same names with the same specs.
    The lemma: a contraction is linear in each operand, so the sum over the ranks of [a] moves
    onto the one operand that depends on the rank. *)

From Coq Require Import Reals Lra Lia List QArith ZArith PArith NArith Bool Permutation.
From Coq Require Import FSets.FMapPositive FunctionalExtensionality.
From Shardproof Require Import Base Num Pow Term Props RuleLib Congr Rel Shard RulesBasic RulesLift
  RulesAxis RulesEinsum RulesScalarOut RulesLiftEinsum.
Import ListNotations.
Open Scope R_scope.

(** [Y] is [ALL_REDUCE(X, a, sum)] with [X]'s dims, none of them sharded over [a] *)
Definition ar_node (T : table) (a : name) (X Y : positive) : bool :=
  match node_at T Y with
  | Node (OAllReduce a' RSum) [X'] DY =>
      Pos.eqb a a' && Pos.eqb X X' && dims_eqvb DY (ndims (node_at T X)) &&
      forallb (fun p => negb (existsb (shard_eqb (SAx a)) (snd p))) (ndims (node_at T X))
  | _ => false
  end.

Lemma ar_node_den : forall c T a X Y, wf_table T -> ar_node T a X Y = true ->
  forall rho j, den c T Y rho j = rsum (sz c a) (fun r => den c T X (upd rho a r) j).
Proof.
  intros c T a X Y W H rho j. unfold ar_node in H.
  destruct (node_at T Y) as [oy xs DY] eqn:EY. destruct oy; try discriminate.
  destruct r; try discriminate. destruct xs as [|X' [|]]; try discriminate.
  apply andb_prop in H as [H _]. apply andb_prop in H as [H DX].
  apply andb_prop in H as [A XX]. apply Pos.eqb_eq in A, XX. subst a0 X'.
  destruct (dims_eqvb_perm _ _ DX) as [PY _].
  rewrite (den_node c T Y _ _ _ W EY). destruct (msk (sz c) DY j) eqn:M.
  - cbn [core map]. unfold vat; simpl nth. apply rsum_ext. intros r _.
    rewrite (restrict_perm _ _ j PY). apply den_restrict; auto.
  - symmetry. rewrite (rsum_ext _ _ (fun _ => 0)); [apply rsum_zero|]. intros r _.
    apply den_msk0; auto. rewrite <- (msk_perm _ _ _ j PY); auto.
Qed.

(** a kept operand that does not vary over [a], or the replaced one (which varies over [a]) *)
Definition push_arg (G : gctx) (a : name) (X Y : positive) : bool :=
  (Pos.eqb X Y && invariant G X a) || (ar_node (gT G) a X Y && negb (invariant G X a)).

Fixpoint ar_count (T : table) (a : name) (Xs Ys : list positive) : nat :=
  match Xs, Ys with
  | X :: Xs', Y :: Ys' => ((if ar_node T a X Y then 1 else 0) + ar_count T a Xs' Ys')%nat
  | _, _ => 0%nat
  end.

Lemma push_prod : forall G c a, model_ok G c -> forall Xs Ys, forallb2 (push_arg G a) Xs Ys = true ->
  forall rho j,
  (ar_count (gT G) a Xs Ys = 0%nat -> forall r,
     prodl (map (fun X => den c (gT G) X (upd rho a r) j) Xs) =
     prodl (map (fun Y => den c (gT G) Y rho j) Ys)) /\
  (ar_count (gT G) a Xs Ys = 1%nat ->
     rsum (sz c a) (fun r => prodl (map (fun X => den c (gT G) X (upd rho a r) j) Xs)) =
     prodl (map (fun Y => den c (gT G) Y rho j) Ys)).
Proof.
  intros G c a M. pose proof M as [W _].
  induction Xs as [|X Xs IH]; intros [|Y Ys] F rho j; simpl in F; try discriminate.
  - split; [auto|intro E; simpl in E; discriminate].
  - apply andb_prop in F as [FX F]. destruct (IH Ys F rho j) as [IH0 IH1]. simpl.
    destruct (ar_node (gT G) a X Y) eqn:AR.
    + split; [intro E; simpl in E; discriminate|]. intro E. simpl in E. injection E as E.
      rewrite (rsum_ext _ _ (fun r => den c (gT G) X (upd rho a r) j *
                                      prodl (map (fun Y => den c (gT G) Y rho j) Ys)))
        by (intros r _; rewrite IH0; auto).
      rewrite rsum_scal_r, (ar_node_den c (gT G) a X Y W AR). reflexivity.
    + unfold push_arg in FX. rewrite AR in FX. simpl in FX. rewrite orb_false_r in FX.
      apply andb_prop in FX as [XY I]. apply Pos.eqb_eq in XY. subst Y.
      assert (IX : forall r, den c (gT G) X (upd rho a r) j = den c (gT G) X rho j)
        by (intro r; rewrite (invariant_ok G c X a M I); auto).
      simpl. split.
      * intros E r. rewrite IX, IH0; auto.
      * intro E. rewrite (rsum_ext _ _ (fun r => den c (gT G) X rho j *
                                          prodl (map (fun X => den c (gT G) X (upd rho a r) j) Xs)))
          by (intros r _; rewrite IX; auto).
        rewrite rsum_scal_l, IH1; auto.
Qed.

Definition chk_allreduce_einsum_push (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l, node_at T r with
  | Node (OAllReduce a RSum) [m] Dl, Node (OEinsum o') Ys Dr =>
      match node_at T m with
      | Node (OEinsum o) Xs Dm =>
          if names_eqb o o' && dims_eqvb Dm Dl && dims_eqvb Dl Dr &&
             forallb2 (push_arg G a) Xs Ys && Nat.eqb (ar_count T a Xs Ys) 1 &&
             inclb (op_names T Xs) (op_names T Ys) && inclb (op_names T Ys) (op_names T Xs) &&
             forallb (fun n => existsb (Pos.eqb n) o ||
                               spec_opt_eqb (first_spec T Xs n) (first_spec T Ys n)) (op_names T Xs)
          then Some [] else None
      | _ => None
      end
  | _, _ => None
  end.

Lemma chk_allreduce_einsum_push_sound : rule_sound chk_allreduce_einsum_push.
Proof.
  intros G l r h cl H c M _. pose proof M as M0. destruct M as [W [VC [SZ [F [DO P]]]]].
  unfold chk_allreduce_einsum_push in H. set (T := gT G) in *.
  destruct (node_at T l) as [ol ms Dl] eqn:El. destruct ol; try discriminate.
  destruct r0; try discriminate. destruct ms as [|m [|]]; try discriminate.
  destruct (node_at T r) as [or Ys Dr] eqn:Er. destruct or; try discriminate.
  destruct (node_at T m) as [om Xs Dm] eqn:Em. destruct om; try discriminate.
  rename out into o', out0 into o.
  match type of H with (if ?b then _ else _) = _ => destruct b eqn:B; try discriminate end.
  apply andb_prop in B as [B FS]. apply andb_prop in B as [B I2].
  apply andb_prop in B as [B I1]. apply andb_prop in B as [B C1].
  apply andb_prop in B as [B PA]. apply andb_prop in B as [B DE].
  apply andb_prop in B as [OO DM].
  apply (list_eqb_eq _ _ (fun a b => proj1 (Pos.eqb_eq a b))) in OO; subst o'.
  apply Nat.eqb_eq in C1.
  destruct (contracted_same (sz c) T Xs Ys o) as [CP CN].
  { intros n; split; intro I; [apply (inclb_In _ _ _ I1)|apply (inclb_In _ _ _ I2)]; auto. }
  { intros n I NO. rewrite forallb_forall in FS. specialize (FS n I). rewrite NO in FS.
    simpl in FS. apply spec_opt_eqb_eq; auto. }
  destruct (dims_eqvb_perm _ _ DM) as [PM _].
  apply (eqv_by_core c T l r _ _ Dl _ _ Dr W El Er DE).
  intros rho R i Mi Ri. cbn [core map]. unfold vat; simpl nth.
  assert (Mm : msk (sz c) Dm i = true) by (rewrite (msk_perm _ _ _ i PM); auto).
  assert (Rm : restrict Dm i = i) by (rewrite (restrict_perm _ _ i PM); auto).
  rewrite (rsum_ext _ _ (fun r0 => sumover (contracted (sz c) T Xs o)
             (fun j => prodl (map (fun X => den c T X (upd rho a r0) j) Xs)) i)).
  2:{ intros r0 _. rewrite (den_in c T m _ _ _ _ i W Em Mm), Rm. cbn [core].
      apply sumover_ext; auto. intros j _. rewrite map_map. reflexivity. }
  etransitivity; [apply (rsum_sumover (sz c a) (contracted (sz c) T Xs o)
                   (fun r0 j => prodl (map (fun X => den c T X (upd rho a r0) j) Xs)) i)|].
  rewrite (sumover_perm _ _ CP CN). apply sumover_ext; auto. intros j _. cbv beta.
  rewrite map_map. apply (proj2 (push_prod G c a M0 Xs Ys PA rho j)); auto.
Qed.
