(** * RulesActivation: activations by their definitions (docs/rules.md).

    silu-def: [SILU(x) = MUL(x, SIGMOID(x))]. [Term.v] gives [SILU] its definition
    ([x * SIGMOID(x)]) and leaves [SIGMOID] an arbitrary function, so the lemma assumes no law
    of the sigmoid. Checked: the three [x] are one node, every node's dims are among its
    parent's and the two sides have the same dims.

    gelu-def: [GELU(x) = MUL(CONST(1/2), x, ADD(CONST(1), ERF(MUL(CONST(1/sqrt 2), x))))].
    [Term.v] gives [GELU] its definition ([x/2 (1 + ERF(x / sqrt 2))]) and leaves [ERF] an
    arbitrary function (no law of the error function is assumed). Checked: the operands in the
    rule's order, the constants by their exact values ([Num.num_eqb]: [1/2], [1], [2^(-1/2)]),
    dimless constants, the two [x] one node, every node's dims among its parent's and the two
    sides with the same dims. *)

From Coq Require Import Reals Lra Lia List QArith Qreals ZArith PArith NArith Bool Permutation.
From Coq Require Import FSets.FMapPositive FunctionalExtensionality.
From Shardproof Require Import Base Num Pow Term Props RuleLib Congr Rel RulesBasic RulesLift
  RulesShift.
Import ListNotations.
Open Scope R_scope.

Definition chk_silu_def (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l, node_at T r with
  | Node (OUn USilu) [x] Dl, Node OMul [x'; sg] Dr =>
      match node_at T sg with
      | Node (OUn USigmoid) [x''] Ds =>
          if Pos.eqb x x' && Pos.eqb x x'' && dims_eqvb Dl Dr &&
             incl_dims (ndims (node_at T x)) Dl && incl_dims (ndims (node_at T x)) Ds &&
             incl_dims Ds Dr
          then Some [] else None
      | _ => None
      end
  | _, _ => None
  end.

Lemma chk_silu_def_sound : rule_sound chk_silu_def.
Proof.
  intros G l r h cl H c M _. destruct M as [W _].
  unfold chk_silu_def in H. set (T := gT G) in *.
  destruct (node_at T l) as [o1 xs Dl] eqn:El. destruct o1; try discriminate.
  destruct u; try discriminate. destruct xs as [|x [|]]; try discriminate.
  destruct (node_at T r) as [o2 ys Dr] eqn:Er. destruct o2; try discriminate.
  destruct ys as [|x' [|sg [|]]]; try discriminate.
  destruct (node_at T sg) as [o3 zs Ds] eqn:Es. destruct o3; try discriminate.
  destruct u; try discriminate. destruct zs as [|x'' [|]]; try discriminate.
  match type of H with (if ?b then _ else _) = _ => destruct b eqn:B; try discriminate end.
  repeat match type of B with _ && _ = true => apply andb_prop in B as [B ?] end.
  rename H0 into I3, H1 into I2, H2 into I1, H3 into DE, H4 into E2.
  apply Pos.eqb_eq in B, E2. subst x' x''.
  apply (eqv_by_core c T l r _ _ _ _ _ _ W El Er DE). intros rho R i Mi Ri.
  destruct (dims_eqvb_perm _ _ DE) as [P _].
  assert (Mr : msk (sz c) Dr i = true) by (rewrite <- (msk_perm _ _ _ _ P); auto).
  assert (Ms : msk (sz c) Ds i = true) by (apply (msk_incl c Ds Dr); auto).
  cbn [core map uval]. unfold vat; simpl nth. cbn [prodl fold_right].
  rewrite (den_in c T sg _ _ _ rho i W Es Ms). cbn [core map uval]. unfold vat; simpl nth.
  rewrite (den_at_incl c T W x Ds rho i) by auto. ring.
Qed.

Definition num_half : num := [((1 # 2)%Q, [])].
Definition num_one : num := [((1 # 1)%Q, [])].
Definition num_isqrt2 : num := [((1 # 1)%Q, [(2%positive, (-1 # 2)%Q)])].

Definition const_is (T : table) (k : positive) (v : num) : bool :=
  match node_at T k with Node (OConst ck) [] [] => num_eqb ck v | _ => false end.

Definition chk_gelu_def (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l, node_at T r with
  | Node (OUn UGelu) [x] Dl, Node OMul [h; x'; a] Dr =>
      match node_at T a with
      | Node OAdd [one; e] Da =>
          match node_at T e with
          | Node (OUn UErf) [m] De =>
              match node_at T m with
              | Node OMul [k; x''] Dm =>
                  if Pos.eqb x x' && Pos.eqb x x'' && dims_eqvb Dl Dr &&
                     const_is T h num_half && const_is T one num_one &&
                     const_is T k num_isqrt2 &&
                     incl_dims (ndims (node_at T x)) Dl && incl_dims Da Dr &&
                     incl_dims De Da && incl_dims Dm De && incl_dims (ndims (node_at T x)) Dm
                  then Some [] else None
              | _ => None
              end
          | _ => None
          end
      | _ => None
      end
  | _, _ => None
  end.

Lemma const_is_den : forall c T k v rho i, wf_table T -> const_is T k v = true ->
  den c T k rho i = num_val v.
Proof.
  intros c T k v rho i W H. unfold const_is in H.
  destruct (node_at T k) as [o xs D] eqn:E. destruct o; try discriminate.
  destruct xs; try discriminate. destruct D; try discriminate.
  rewrite (den_in c T k _ _ _ rho i W E) by auto. cbn [core]. apply num_eqb_val; auto.
Qed.

Lemma num_isqrt2_val : num_val num_isqrt2 = / sqrt 2.
Proof.
  unfold num_isqrt2. cbn [num_val rad_val]. unfold bval.
  replace (Q2R (-1 # 2)) with (- / 2) by (unfold Q2R; simpl; field).
  replace (Q2R (1 # 1)) with 1 by (unfold Q2R; simpl; field).
  rewrite Rpower_Ropp, Rpower_sqrt by lra. ring.
Qed.

Lemma chk_gelu_def_sound : rule_sound chk_gelu_def.
Proof.
  intros G l r hh cl H c M _. destruct M as [W _].
  unfold chk_gelu_def in H. set (T := gT G) in *.
  destruct (node_at T l) as [o1 xs Dl] eqn:El. destruct o1; try discriminate.
  destruct u; try discriminate. destruct xs as [|x [|]]; try discriminate.
  destruct (node_at T r) as [o2 ys Dr] eqn:Er. destruct o2; try discriminate.
  destruct ys as [|h [|x' [|a [|]]]]; try discriminate.
  destruct (node_at T a) as [o3 zs Da] eqn:Ea. destruct o3; try discriminate.
  destruct zs as [|one [|e [|]]]; try discriminate.
  destruct (node_at T e) as [o4 ws De] eqn:Ee. destruct o4; try discriminate.
  destruct u; try discriminate. destruct ws as [|m [|]]; try discriminate.
  destruct (node_at T m) as [o5 vs Dm] eqn:Em. destruct o5; try discriminate.
  destruct vs as [|k [|x'' [|]]]; try discriminate.
  match type of H with (if ?b then _ else _) = _ => destruct b eqn:B; try discriminate end.
  repeat match type of B with _ && _ = true => apply andb_prop in B as [B ?] end.
  rename H0 into I5, H1 into I4, H2 into I3, H3 into I2, H4 into I1, H5 into Ck, H6 into Cone,
    H7 into Ch, H8 into DE, H9 into E2.
  apply Pos.eqb_eq in B, E2. subst x' x''.
  apply (eqv_by_core c T l r _ _ _ _ _ _ W El Er DE). intros rho R i Mi Ri.
  destruct (dims_eqvb_perm _ _ DE) as [P _].
  assert (Mr : msk (sz c) Dr i = true) by (rewrite <- (msk_perm _ _ _ _ P); auto).
  assert (Ma : msk (sz c) Da i = true) by (apply (msk_incl c Da Dr); auto).
  assert (Me : msk (sz c) De i = true) by (apply (msk_incl c De Da); auto).
  assert (Mm : msk (sz c) Dm i = true) by (apply (msk_incl c Dm De); auto).
  cbn [core map uval]. unfold vat; simpl nth. cbn [prodl suml fold_right].
  rewrite (den_in c T a _ _ _ rho i W Ea Ma). cbn [core map suml fold_right].
  rewrite (den_at_incl c T W e Da rho i) by (rewrite Ee; auto).
  rewrite (den_in c T e _ _ _ rho i W Ee Me). cbn [core map uval]. unfold vat; simpl nth.
  rewrite (den_at_incl c T W m De rho i) by (rewrite Em; auto).
  rewrite (den_in c T m _ _ _ rho i W Em Mm). cbn [core map prodl fold_right].
  rewrite (den_at_incl c T W x Dm rho i) by auto.
  rewrite (const_is_den c T h _ rho i W Ch), (const_is_den c T one _ rho _ W Cone),
    (const_is_den c T k _ rho _ W Ck).
  rewrite num_isqrt2_val. unfold num_half, num_one. cbn [num_val rad_val].
  replace (Q2R (1 # 2)) with (/ 2) by (unfold Q2R; simpl; field).
  replace (Q2R (1 # 1)) with 1 by (unfold Q2R; simpl; field).
  replace (/ sqrt 2 * (den c T x rho i * 1)) with (den c T x rho i / sqrt 2) by
    (unfold Rdiv; ring).
  unfold Rdiv. ring.
Qed.
