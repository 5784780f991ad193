(** * RulesShift: the max shift of an exponential (docs/rules.md, exp-shift; issue 12).

    exp-max-shift: [EXP(y) = MUL(EXP(ADD(y, MUL(CONST(-c), m))), POW(EXP(m), c))], i.e.
    [exp y = exp (y - c m) * (exp m)^c]: true for every real [y], [m] and rational [c]
    ([exp m > 0]). Checked as the Python rule does: [c] a negative integer and [m] a max
    ([REDUCE_MAX], [MAXIMUM] or a max [ALL_REDUCE], under [SHARD] / [PERMUTE]), whose dims are
    among [y]'s; each node's dims are among its parent's, so every node is read at the same
    index. *)

From Coq Require Import Reals Lra Lia List QArith Qreals ZArith PArith NArith Bool Permutation.
From Coq Require Import FSets.FMapPositive FunctionalExtensionality.
From Shardproof Require Import Base Num Pow Term Props RuleLib Congr Rel RulesBasic RulesLift
  RulesEinsum RulesScalarOut Positive Canon RulesCanon.
Import ListNotations.
Open Scope R_scope.

(** [checker_rules_cp._is_max_node] *)
Fixpoint is_max (T : table) (fuel : nat) (m : positive) : bool :=
  match fuel with
  | O => false
  | S f =>
      match node_at T m with
      | Node (OShard _ _) [x] _ | Node (OPermute _ _) [x] _ => is_max T f x
      | Node (OReduceMax _) _ _ | Node OMaximum _ _ | Node (OAllReduce _ RMax) _ _ => true
      | _ => false
      end
  end.

Definition names_of (T : table) (x : positive) : list name := map fst (ndims (node_at T x)).

Definition chk_exp_max_shift (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  let D x := ndims (node_at T x) in
  match node_at T l, node_at T r with
  | Node (OUn UExp) [y] Dl, Node OMul [e2; p] Dr =>
      match node_at T e2, node_at T p with
      | Node (OUn UExp) [a] De, Node (OPow c) [em] Dp =>
          match node_at T a, node_at T em with
          | Node OAdd [y'; mm] Da, Node (OUn UExp) [m] Dm =>
              match node_at T mm with
              | Node OMul [k; m'] Dmm =>
                  match const_of T k with
                  | Some kv =>
                      if Pos.eqb y y' && Pos.eqb m m' && num_eqb kv (num_of_Q (- c)) &&
                         qint c && negb (Qle_bool 0 c) && is_max T 64 m &&
                         forallb (fun n => existsb (Pos.eqb n) (names_of T y)) (names_of T m) &&
                         dims_eqvb Dl Dr && incl_dims (D y) Dl && incl_dims De Dr &&
                         incl_dims Dp Dr && incl_dims Da De && incl_dims (D y) Da &&
                         incl_dims Dmm Da && incl_dims (D m) Dmm && incl_dims Dm Dp &&
                         incl_dims (D m) Dm
                      then Some [] else None
                  | None => None
                  end
              | _ => None
              end
          | _, _ => None
          end
      | _, _ => None
      end
  | _, _ => None
  end.

Section At.
Variable c : ctx.
Variable T : table.
Hypothesis W : wf_table T.

(** a child whose dims are among [D] reads the parent's index *)
Lemma den_at_incl : forall k D rho x, incl_dims (ndims (node_at T k)) D = true ->
  den c T k rho (restrict D x) = den c T k rho x.
Proof.
  intros k D rho x I. apply den_agree; auto. intros n In_. apply restrict_in.
  apply in_map_iff in In_ as [d [<- Id]]. apply in_map. eapply incl_dims_In; eauto.
Qed.

Lemma msk_incl : forall D1 D2 x, incl_dims D1 D2 = true -> msk (sz c) D2 x = true ->
  msk (sz c) D1 x = true.
Proof. intros. apply (incl_dims_msk _ _ D2); auto. Qed.
End At.

Lemma chk_exp_max_shift_sound : rule_sound chk_exp_max_shift.
Proof.
  intros G l r h cl H c M _. destruct M as [W _].
  unfold chk_exp_max_shift in H. set (T := gT G) in *.
  destruct (node_at T l) as [o1 ys Dl] eqn:El. destruct o1; try discriminate.
  destruct u; try discriminate. destruct ys as [|y [|]]; try discriminate.
  destruct (node_at T r) as [o2 ps Dr] eqn:Er. destruct o2; try discriminate.
  destruct ps as [|e2 [|p [|]]]; try discriminate.
  destruct (node_at T e2) as [o3 as_ De] eqn:Ee. destruct o3; try discriminate.
  destruct u; try discriminate. destruct as_ as [|a [|]]; try discriminate.
  destruct (node_at T p) as [o4 ems Dp] eqn:Ep. destruct o4; try discriminate.
  destruct ems as [|em [|]]; try discriminate.
  destruct (node_at T a) as [o5 ams Da] eqn:Ea. destruct o5; try discriminate.
  destruct ams as [|y' [|mm [|]]]; try discriminate.
  destruct (node_at T em) as [o6 ms Dm] eqn:Em. destruct o6; try discriminate.
  destruct u; try discriminate. destruct ms as [|m [|]]; try discriminate.
  destruct (node_at T mm) as [o7 ks Dmm] eqn:Emm. destruct o7; try discriminate.
  destruct ks as [|k [|m' [|]]]; try discriminate.
  destruct (const_of T k) as [kv|] eqn:Ck; try discriminate.
  match type of H with (if ?b then _ else _) = _ => destruct b eqn:B; try discriminate end.
  repeat match type of B with _ && _ = true => apply andb_prop in B as [B ?] end.
  cbn beta in *. apply Pos.eqb_eq in B. subst y'.
  match goal with Hm : Pos.eqb m m' = true |- _ => apply Pos.eqb_eq in Hm; subst m' end.
  match goal with Hk : num_eqb kv _ = true |- _ => apply num_eqb_val in Hk; rename Hk into KV end.
  match goal with Hd : dims_eqvb Dl Dr = true |- _ => rename Hd into DE end.
  apply (eqv_by_core c T l r _ _ _ _ _ _ W El Er DE). intros rho R x Mx Rx.
  destruct (dims_eqvb_perm _ _ DE) as [P _].
  assert (Mr : msk (sz c) Dr x = true) by (rewrite <- (msk_perm _ _ _ _ P); auto).
  assert (Me : msk (sz c) De x = true) by (apply (msk_incl c De Dr); auto).
  assert (Mp : msk (sz c) Dp x = true) by (apply (msk_incl c Dp Dr); auto).
  assert (Ma : msk (sz c) Da x = true) by (apply (msk_incl c Da De); auto).
  assert (Mm : msk (sz c) Dm x = true) by (apply (msk_incl c Dm Dp); auto).
  assert (Mmm : msk (sz c) Dmm x = true) by (apply (msk_incl c Dmm Da); auto).
  cbn [core map]. unfold vat; simpl nth. cbn [prodl fold_right]. rewrite Rmult_1_r.
  rewrite (den_in c T e2 _ _ _ rho x W Ee Me). cbn [core map uval]. unfold vat; simpl nth.
  rewrite (den_at_incl c T W a De rho x) by (rewrite Ea; simpl; auto).
  rewrite (den_in c T a _ _ _ rho x W Ea Ma). cbn [core map suml fold_right].
  rewrite (den_at_incl c T W y Da rho x) by auto.
  rewrite (den_at_incl c T W mm Da rho x) by (rewrite Emm; simpl; auto).
  rewrite (den_in c T mm _ _ _ rho x W Emm Mmm). cbn [core map prodl fold_right].
  rewrite (den_at_incl c T W m Dmm rho x) by auto.
  unfold const_of in Ck. destruct (node_at T k) as [[] [] []] eqn:Ek; try discriminate.
  injection Ck as <-. rewrite (den_const c T W k c0 Ek).
  rewrite (den_in c T p _ _ _ rho x W Ep Mp). cbn [core map]. unfold vat; simpl nth.
  rewrite (den_at_incl c T W em Dp rho x) by (rewrite Em; simpl; auto).
  rewrite (den_in c T em _ _ _ rho x W Em Mm). cbn [core map uval]. unfold vat; simpl nth.
  rewrite (den_at_incl c T W m Dm rho x) by auto.
  rewrite rpow_pos by apply exp_pos. unfold Rpower. rewrite ln_exp.
  rewrite KV, num_val_of_Q, Q2R_opp. rewrite <- exp_plus. f_equal. ring.
Qed.
