(** * RulesActivation: activations by their definitions (docs/rules.md).

    silu-def: [SILU(x) = MUL(x, SIGMOID(x))]. [Term.v] gives [SILU] its definition
    ([x * SIGMOID(x)]) and leaves [SIGMOID] an arbitrary function, so the lemma assumes no law
    of the sigmoid. Checked: the three [x] are one node, every node's dims are among its
    parent's and the two sides have the same dims. ([gelu-def] needs [ERF], which the term
    language of [Term.v] does not have.) *)

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
