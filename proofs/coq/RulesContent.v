(** * RulesContent: a constant factor leaves a sum (docs/rules.md, canonical forms).

    add-content: [ADD(xs) = MUL(CONST(c), ADD(MUL(CONST(c'), x) for x in xs))] where
    [c * c' = 1] (checked exactly on the constants' normal forms, [Num.num_eqb]; so [c <> 0],
    the rule's guard). Every [MUL(CONST(c'), x)] has [x]'s dims (as a set), and the two sums
    and the product have the same dims.

    concat-content: [CONCAT(xs, d) = MUL(CONST(c), CONCAT(MUL(CONST(c'), x) for x in xs, d))],
    the same checks (a concatenation is linear; the scaled parts have the parts' sizes). *)

From Coq Require Import Reals Lra Lia List QArith ZArith PArith NArith Bool Permutation.
From Coq Require Import FSets.FMapPositive FunctionalExtensionality.
From Shardproof Require Import Base Num Pow Term Props RuleLib Rel RulesBasic.
Import ListNotations.
Open Scope R_scope.

(** [m] is [MUL(CONST(c'), x)] with [x]'s dims and [c * c' = 1]. *)
Definition scaled_by (T : table) (c : num) (m x : positive) : bool :=
  match node_at T m with
  | Node OMul [k; x'] Dm =>
      Pos.eqb x' x && dims_eqvb (ndims (node_at T x)) Dm &&
      match node_at T k with
      | Node (OConst c') [] [] => num_eqb (num_mul c c') (num_of_Q 1)
      | _ => false
      end
  | _ => false
  end.

Section Scaled.
Variable ctxt : ctx.
Variable T : table.
Hypothesis W : wf_table T.

Lemma scaled_by_val : forall c m x, scaled_by T c m x = true ->
  forall rho i, num_val c * den ctxt T m rho i = den ctxt T x rho i.
Proof.
  intros c m x H rho i. unfold scaled_by in H.
  destruct (node_at T m) as [o xs Dm] eqn:Em. destruct o; try discriminate.
  destruct xs as [|k [|x' [|]]]; try discriminate.
  apply andb_prop in H as [H K]. apply andb_prop in H as [X DE]. apply Pos.eqb_eq in X; subst x'.
  destruct (node_at T k) as [ok ks Dk] eqn:Ek. destruct ok; try discriminate.
  destruct ks; try discriminate. destruct Dk; try discriminate.
  assert (K1 : num_val c * num_val c0 = 1).
  { rewrite <- num_val_mul, (num_eqb_val _ _ K), num_val_of_Q. unfold Q2R; simpl; field. }
  rewrite <- (den_wrap ctxt T W x Dm DE rho i).
  rewrite (den_node ctxt T m _ _ _ W Em). destruct (msk (sz ctxt) Dm i); [|ring].
  cbn [core map prodl fold_right]. rewrite (den_const ctxt T W k c0 Ek).
  transitivity ((num_val c * num_val c0) * den ctxt T x rho (restrict Dm i)); [ring|].
  rewrite K1; ring.
Qed.

Lemma scaled_sum : forall c ms xs, forallb2 (scaled_by T c) ms xs = true ->
  forall rho i, num_val c * suml (map (fun m => den ctxt T m rho i) ms) =
                suml (map (fun x => den ctxt T x rho i) xs).
Proof.
  induction ms as [|m ms IH]; destruct xs as [|x xs]; simpl; intros H rho i; try discriminate.
  - ring.
  - apply andb_prop in H as [H1 H2]. rewrite <- (scaled_by_val c m x H1 rho i), <- (IH xs H2 rho i).
    ring.
Qed.
End Scaled.

Definition chk_add_content (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l, node_at T r with
  | Node OAdd xs D, Node OMul [k; s] Dr =>
      match node_at T k, node_at T s with
      | Node (OConst c) [] [], Node OAdd ms Ds =>
          if dims_eqvb D Dr && dims_eqvb Ds D && forallb2 (scaled_by T c) ms xs
          then Some [] else None
      | _, _ => None
      end
  | _, _ => None
  end.

Lemma chk_add_content_sound : rule_sound chk_add_content.
Proof.
  intros G l r h cl H c M _. destruct M as [W _].
  unfold chk_add_content in H. set (T := gT G) in *.
  destruct (node_at T l) as [o xs D] eqn:El. destruct (node_at T r) as [o' ys Dr] eqn:Er.
  destruct o; try discriminate. destruct o'; try discriminate.
  destruct ys as [|k [|s [|]]]; try discriminate.
  destruct (node_at T k) as [ok ks Dk] eqn:Ek. destruct ok; try discriminate.
  destruct ks; try discriminate. destruct Dk; try discriminate.
  destruct (node_at T s) as [os ms Ds] eqn:Es. destruct os; try discriminate.
  match type of H with context [if ?b then _ else _] => destruct b eqn:B; [|discriminate] end.
  apply andb_prop in B as [B SC]. apply andb_prop in B as [DE1 DE2].
  apply (eqv_by_core c T l r _ _ D _ _ Dr W El Er DE1).
  intros rho R x Mx Rx. simpl. rewrite (den_const c T W k c0 Ek).
  destruct (dims_eqvb_perm _ _ DE2) as [P _].
  rewrite (den_node c T s _ _ _ W Es), (msk_perm _ _ _ x P), Mx, (restrict_perm _ _ x P), Rx.
  simpl. rewrite !map_map. rewrite Rmult_1_r.
  symmetry. apply (scaled_sum c T W c0 ms xs SC).
Qed.

(** ** concat-content *)
Lemma concat_scaled : forall c T (cv : num) d rho i, wf_table T ->
  forall ms xs, forallb2 (scaled_by T cv) ms xs = true ->
  forall j, num_val cv * concat_at (combine (map (den c T) ms)
                                            (map (fun x => lsize_of (sz c) (ndims (node_at T x)) d) ms))
                                   d rho i j =
            concat_at (combine (map (den c T) xs)
                               (map (fun x => lsize_of (sz c) (ndims (node_at T x)) d) xs)) d rho i j.
Proof.
  intros c T cv d rho i W ms. induction ms as [|m ms IH]; intros [|x xs] H j;
    simpl in H |- *; try discriminate; [ring|].
  apply andb_prop in H as [H1 H2].
  assert (Ls : lsize_of (sz c) (ndims (node_at T m)) d = lsize_of (sz c) (ndims (node_at T x)) d).
  { unfold scaled_by in H1. destruct (node_at T m) as [o zs Dm] eqn:Em. destruct o; try discriminate.
    destruct zs as [|k [|x' [|]]]; try discriminate.
    apply andb_prop in H1 as [H1 _]. apply andb_prop in H1 as [_ DE].
    destruct (dims_eqvb_perm _ _ DE) as [P N]. simpl. symmetry. apply lsize_of_perm; auto. }
  rewrite Ls. destruct (Nat.ltb j _).
  - apply (scaled_by_val c T W cv m x H1).
  - apply IH; auto.
Qed.

Definition chk_concat_content (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l, node_at T r with
  | Node (OConcat d) xs D, Node OMul [k; s] Dr =>
      match node_at T k, node_at T s with
      | Node (OConst c) [] [], Node (OConcat d') ms Ds =>
          if Pos.eqb d d' && dims_eqvb D Dr && dims_eqvb Ds D && forallb2 (scaled_by T c) ms xs
          then Some [] else None
      | _, _ => None
      end
  | _, _ => None
  end.

Lemma chk_concat_content_sound : rule_sound chk_concat_content.
Proof.
  intros G l r h cl H c M _. destruct M as [W _].
  unfold chk_concat_content in H. set (T := gT G) in *.
  destruct (node_at T l) as [o xs D] eqn:El. destruct (node_at T r) as [o' ys Dr] eqn:Er.
  destruct o; try discriminate. destruct o'; try discriminate.
  destruct ys as [|k [|s [|]]]; try discriminate.
  destruct (node_at T k) as [ok ks Dk] eqn:Ek. destruct ok; try discriminate.
  destruct ks; try discriminate. destruct Dk; try discriminate.
  destruct (node_at T s) as [os ms Ds] eqn:Es. destruct os; try discriminate.
  match type of H with context [if ?b then _ else _] => destruct b eqn:B; [|discriminate] end.
  apply andb_prop in B as [B SC]. apply andb_prop in B as [B DE2].
  apply andb_prop in B as [Dd DE1]. apply Pos.eqb_eq in Dd; subst d0.
  apply (eqv_by_core c T l r _ _ D _ _ Dr W El Er DE1).
  intros rho R x Mx Rx. simpl. rewrite (den_const c T W k c0 Ek).
  destruct (dims_eqvb_perm _ _ DE2) as [P _].
  rewrite (den_node c T s _ _ _ W Es), (msk_perm _ _ _ x P), Mx, (restrict_perm _ _ x P), Rx.
  cbn [core]. rewrite Rmult_1_r. symmetry. apply concat_scaled; auto.
Qed.
