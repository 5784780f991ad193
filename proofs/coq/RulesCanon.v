(** * RulesCanon: products in canonical form (docs/rules.md, canonical forms).

    mul-canon, for the products whose factors are the same up to order and constants:
    [MUL(xs) = y] where, once nested [MUL]s are flattened on both sides ([Canon.flat]), the
    factors other than scalar constants are the same multiset and the products of the
    constants are equal (exact normal forms, [Num.num_eqb]); [y] is a [MUL] or its single
    factor or a constant (the rule's "one factor: ys[0]; none: CONST(1)"). The two nodes have
    the same dims (as a set). Powers merged by the rule ([x * x = x^2], [x^-1 * x = 1]) are
    not in this checker: the exporter sends those steps to Coq as hypotheses
    (proofs/coq_export.py, docs/coq.md), so no step that needs the rule's sign guard
    reaches this lemma. *)

From Coq Require Import Reals Lra Lia List QArith ZArith PArith NArith Bool Permutation.
From Coq Require Import FSets.FMapPositive FunctionalExtensionality.
From Shardproof Require Import Base Num Pow Term Props RuleLib Congr Rel RulesBasic RulesLift
  RulesEinsum RulesScalarOut Positive Canon.
Import ListNotations.
Open Scope R_scope.

Definition const_of (T : table) (x : positive) : option num :=
  match node_at T x with Node (OConst v) [] [] => Some v | _ => None end.

Definition is_cst (T : table) (x : positive) : bool :=
  match const_of T x with Some _ => true | None => false end.

(** the product of the constant factors *)
Definition cprod (T : table) (l : list positive) : num :=
  fold_right (fun x acc => match const_of T x with Some v => num_mul v acc | None => acc end)
             (num_of_Q 1) l.

Definition canon_fuel : nat := 64.

Definition chk_mul_canon (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  let Dr := ndims (node_at T r) in
  match node_at T l with
  | Node OMul xs D =>
      match flat OMul canon_fuel T D xs, flat OMul canon_fuel T Dr [r] with
      | Some fl, Some fr =>
          if negb (Nat.eqb (length xs) 0) && dims_eqvb D Dr && kids_in T xs D &&
             kids_in T [r] Dr &&
             perm_posb (filter (fun x => negb (is_cst T x)) fl)
                       (filter (fun x => negb (is_cst T x)) fr) &&
             num_eqb (cprod T fl) (cprod T fr)
          then Some [] else None
      | _, _ => None
      end
  | _ => None
  end.

Section Prod.
Variable c : ctx.
Variable T : table.
Hypothesis W : wf_table T.

Lemma cprod_val : forall l rho i,
  prodl (map (fun y => den c T y rho i) (filter (is_cst T) l)) = num_val (cprod T l).
Proof.
  induction l as [|x l IH]; intros rho i.
  - change (prodl (map (fun y => den c T y rho i) (filter (is_cst T) []))) with 1.
    unfold cprod. simpl fold_right. rewrite num_val_of_Q. unfold Q2R; simpl; field.
  - unfold cprod; cbn [fold_right]; fold (cprod T l). cbn [filter].
    destruct (is_cst T x) eqn:C; unfold is_cst in C; destruct (const_of T x) as [v|] eqn:E;
      try discriminate; [|apply IH].
    cbn [map]. rewrite prodl_cons, num_val_mul, (IH rho i). f_equal.
    unfold const_of in E. destruct (node_at T x) as [[] [] []] eqn:Ex; try discriminate.
    injection E as <-. apply (den_const c T W x c0 Ex).
Qed.

(** The product of a flattened list: its constants times the rest. *)
Lemma prod_split : forall l rho i,
  prodl (map (fun y => den c T y rho i) l) =
  num_val (cprod T l) * prodl (map (fun y => den c T y rho i) (filter (fun x => negb (is_cst T x)) l)).
Proof. intros. rewrite (prodl_filter _ (is_cst T)), cprod_val. reflexivity. Qed.
End Prod.

Lemma chk_mul_canon_sound : rule_sound chk_mul_canon.
Proof.
  intros G l r h cl H c M _. destruct M as [W _].
  unfold chk_mul_canon in H. set (T := gT G) in *. set (Dr := ndims (node_at T r)) in *.
  destruct (node_at T l) as [o xs D] eqn:El. destruct o; try discriminate.
  destruct (flat OMul canon_fuel T D xs) as [fl|] eqn:Fl; try discriminate.
  destruct (flat OMul canon_fuel T Dr [r]) as [fr|] eqn:Fr; try discriminate.
  match type of H with (if ?b then _ else _) = _ => destruct b eqn:B; try discriminate end.
  repeat match type of B with _ && _ = true => apply andb_prop in B as [B ?] end.
  rename H0 into CE, H1 into PN, H2 into KR, H3 into KL, H4 into DE.
  apply perm_posb_ok in PN. apply num_eqb_val in CE.
  destruct (flat_sound c T W OMul (or_intror eq_refl) canon_fuel D xs fl Fl KL) as [VL _].
  destruct (flat_sound c T W OMul (or_intror eq_refl) canon_fuel Dr [r] fr Fr KR) as [VR _].
  destruct (dims_eqvb_perm _ _ DE) as [P _].
  intros rho R x. rewrite (den_node c T l _ _ _ W El).
  destruct (msk (sz c) D x) eqn:Mx.
  2:{ rewrite den_msk0; auto. fold Dr. rewrite <- (msk_perm _ _ _ x P); auto. }
  assert (Mr : msk (sz c) Dr (restrict D x) = true)
    by (rewrite <- (msk_perm _ _ _ _ P), msk_restrict; auto).
  assert (Ml : msk (sz c) D (restrict D x) = true) by (rewrite msk_restrict; auto).
  rewrite <- (den_restrict c T W r rho x). fold Dr. rewrite <- (restrict_perm _ _ x P).
  cbn [core]. rewrite map_map.
  pose proof (VL rho (restrict D x) Ml) as E1. pose proof (VR rho (restrict D x) Mr) as E2.
  cbn [comb map prodl fold_right] in E2. cbn [comb] in E1.
  rewrite E1, Rmult_1_r in *. rewrite E2.
  rewrite (prod_split c T W fl), (prod_split c T W fr), CE. f_equal.
  apply prodl_Permutation, Permutation_map; auto.
Qed.
