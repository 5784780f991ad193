(** * RulesContent: a constant factor leaves a sum (docs/rules.md, canonical forms).

    add-content: [ADD(xs) = MUL(CONST(c), ADD(MUL(CONST(c'), x) for x in xs))] where
    [c * c' = 1] (checked exactly on the constants' normal forms, [Num.num_eqb]; so [c <> 0],
    the rule's guard). Every [MUL(CONST(c'), x)] has [x]'s dims (as a set), and the two sums
    and the product have the same dims.

    concat-content: [CONCAT(xs, d) = MUL(CONST(c), CONCAT(MUL(CONST(c'), x) for x in xs, d))],
    the same checks (a concatenation is linear; the scaled parts have the parts' sizes).

    add-scaled-sum: a term [MUL(CONST(c), ADD(ys))] of a sum replaced by [MUL(CONST(c), y)] for
    each [y] of [ys], in place. *)

From Coq Require Import Reals Lra Lia List QArith ZArith PArith NArith Bool Permutation.
From Coq Require Import FSets.FMapPositive FunctionalExtensionality.
From Shardproof Require Import Base Num Pow Term Props RuleLib Rel RulesBasic RulesLift.
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

(** ** add-scaled-sum: [ADD(.. MUL(CONST(c), ADD(ys)) ..) = ADD(.. MUL(CONST(c), y) for y in ys ..)]
    (the scaled sum's dims among the sum's, with its own sum's; each [y]'s dims among them
    with their specs; each [MUL(CONST(c), y)] has [y]'s dims) *)
Fixpoint scaled_parts (T : table) (kc : positive) (ys zs : list positive) : option (list positive) :=
  match ys, zs with
  | [], _ => Some zs
  | y :: ys', z :: zs' =>
      match node_at T z with
      | Node OMul [kc'; y'] Dz =>
          if Pos.eqb kc kc' && Pos.eqb y y' && dims_eqvb Dz (ndims (node_at T y))
          then scaled_parts T kc ys' zs' else None
      | _ => None
      end
  | _ :: _, [] => None
  end.

Definition expand_ok (T : table) (D : list dimspec) (x : positive) (zs : list positive)
  : option (list positive) :=
  match node_at T x with
  | Node OMul [kc; s] Dx =>
      match node_at T kc, node_at T s with
      | Node (OConst _) [] [], Node OAdd ys Ds =>
          if incl_dims Dx D && dims_eqvb Ds Dx &&
             forallb (fun y => incl_dims (ndims (node_at T y)) Ds) ys
          then scaled_parts T kc ys zs else None
      | _, _ => None
      end
  | _ => None
  end.

Fixpoint add_scaled_walk (T : table) (D : list dimspec) (xs zs : list positive) : bool :=
  match xs with
  | [] => match zs with [] => true | _ => false end
  | x :: xs' =>
      match zs with
      | z :: zs' => if Pos.eqb x z then add_scaled_walk T D xs' zs'
                    else match expand_ok T D x zs with
                         | Some rest => add_scaled_walk T D xs' rest | None => false end
      | [] => match expand_ok T D x [] with
              | Some rest => add_scaled_walk T D xs' rest | None => false end
      end
  end.

Section Scaled2.
Variable ctxt : ctx.
Variable T : table.
Hypothesis W : wf_table T.

Lemma scaled_parts_val : forall kc v ys zs rest rho i,
  node_at T kc = Node (OConst v) [] [] -> scaled_parts T kc ys zs = Some rest ->
  (forall y, In y ys -> msk (sz ctxt) (ndims (node_at T y)) i = true) ->
  suml (map (fun z => den ctxt T z rho i) zs) =
  num_val v * suml (map (fun y => den ctxt T y rho i) ys) + suml (map (fun z => den ctxt T z rho i) rest).
Proof.
  intros kc v ys. induction ys as [|y ys IH]; intros zs rest rho i Ek S My; simpl in S.
  - injection S as <-. simpl. ring.
  - destruct zs as [|z zs]; try discriminate.
    destruct (node_at T z) as [oz ws Dz] eqn:Ez. destruct oz; try discriminate.
    destruct ws as [|kc' [|y' [|]]]; try discriminate.
    match type of S with (if ?b then _ else _) = _ => destruct b eqn:B; try discriminate end.
    apply andb_prop in B as [B DZ]. apply andb_prop in B as [K Y].
    apply Pos.eqb_eq in K, Y. subst kc' y'.
    destruct (dims_eqvb_perm _ _ DZ) as [PZ _].
    cbn [map suml fold_right]. fold (suml (map (fun z => den ctxt T z rho i) zs)).
    rewrite (IH zs rest rho i Ek S) by (intros; apply My; simpl; auto).
    assert (Mz : msk (sz ctxt) Dz i = true) by (rewrite (msk_perm _ _ _ i PZ); apply My; simpl; auto).
    rewrite (den_in ctxt T z _ _ _ rho i W Ez Mz). cbn [core map prodl fold_right].
    rewrite (den_const ctxt T W kc v Ek), (restrict_perm _ _ i PZ), den_restrict by auto.
    unfold suml; cbn [map fold_right]; ring.
Qed.

Lemma add_scaled_walk_val : forall D xs zs rho i, add_scaled_walk T D xs zs = true ->
  msk (sz ctxt) D i = true ->
  suml (map (fun x => den ctxt T x rho i) xs) = suml (map (fun z => den ctxt T z rho i) zs).
Proof.
  intros D xs. induction xs as [|x xs IH]; intros zs rho i H M.
  - destruct zs; simpl in H; try discriminate; auto.
  - assert (Exp : forall rest, expand_ok T D x zs = Some rest -> add_scaled_walk T D xs rest = true ->
              suml (map (fun x => den ctxt T x rho i) (x :: xs)) =
              suml (map (fun z => den ctxt T z rho i) zs)).
    { intros rest E Wk. unfold expand_ok in E.
      destruct (node_at T x) as [ox ks Dx] eqn:Ex. destruct ox; try discriminate.
      destruct ks as [|kc [|s [|]]]; try discriminate.
      destruct (node_at T kc) as [ok kk Dk] eqn:Ek. destruct ok; try discriminate.
      destruct kk; try discriminate. destruct Dk; try discriminate.
      destruct (node_at T s) as [os ys Ds] eqn:Es. destruct os; try discriminate.
      match type of E with (if ?b then _ else _) = _ => destruct b eqn:B; try discriminate end.
      apply andb_prop in B as [B YS]. apply andb_prop in B as [IXD DS].
      rewrite forallb_forall in YS.
      destruct (dims_eqvb_perm _ _ DS) as [PS _].
      assert (Mx : msk (sz ctxt) Dx i = true) by (apply (incl_dims_msk _ _ D); auto).
      assert (Ms : msk (sz ctxt) Ds i = true) by (rewrite (msk_perm _ _ _ i PS); auto).
      rewrite (scaled_parts_val kc c ys zs rest rho i Ek E)
        by (intros y Iy; apply (incl_dims_msk _ _ Ds); auto).
      cbn [map suml fold_right]. fold (suml (map (fun x => den ctxt T x rho i) xs)).
      rewrite (IH rest rho i Wk M). f_equal.
      rewrite (den_in ctxt T x _ _ _ rho i W Ex Mx). cbn [core map prodl fold_right].
      rewrite (den_const ctxt T W kc c Ek), Rmult_1_r. f_equal.
      rewrite (den_agree ctxt T W s rho (restrict Dx i) i).
      2:{ intros n In_. rewrite Es in In_. simpl in In_. apply restrict_in.
          apply (Permutation_in _ (Permutation_map fst PS)); auto. }
      rewrite (den_in ctxt T s _ _ _ rho i W Es Ms). cbn [core]. rewrite map_map. f_equal.
      apply map_ext_in. intros y Iy. apply den_agree; auto. intros n In_. apply restrict_in.
      apply in_map_iff in In_ as [d [<- Id]]. apply in_map. eapply incl_dims_In; eauto. }
    destruct zs as [|z zs]; simpl in H.
    + destruct (expand_ok T D x []) as [rest|] eqn:E; try discriminate. apply (Exp rest); auto.
    + destruct (Pos.eqb_spec x z) as [->|Nx].
      * cbn [map suml fold_right]. f_equal. apply IH; auto.
      * destruct (expand_ok T D x (z :: zs)) as [rest|] eqn:E; try discriminate. apply (Exp rest); auto.
Qed.
End Scaled2.

Definition chk_add_scaled_sum (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l, node_at T r with
  | Node OAdd xs D, Node OAdd zs Dr =>
      if dims_eqvb D Dr && add_scaled_walk T D xs zs then Some [] else None
  | _, _ => None
  end.

Lemma chk_add_scaled_sum_sound : rule_sound chk_add_scaled_sum.
Proof.
  intros G l r h cl H c M _. destruct M as [W _].
  unfold chk_add_scaled_sum in H. set (T := gT G) in *.
  destruct (node_at T l) as [o xs D] eqn:El. destruct (node_at T r) as [o' zs Dr] eqn:Er.
  destruct o; try discriminate. destruct o'; try discriminate.
  match type of H with (if ?b then _ else _) = _ => destruct b eqn:B; try discriminate end.
  apply andb_prop in B as [DE WK].
  apply (eqv_by_core c T l r _ _ D _ _ Dr W El Er DE).
  intros rho R i Mi Ri. cbn [core]. rewrite !map_map. apply (add_scaled_walk_val c T W D); auto.
Qed.
