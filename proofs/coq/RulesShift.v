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

(** ** add-max-factor-out: [ADD(MUL(.., f, ..), ...) = MUL(f, ADD(MUL(.. ..), ...))]
    (distributivity, for any [f]). Checked as the Python rule: [f] is [EXP(m)] or
    [POW(EXP(m), c)] with [m] a max, a factor of every summand (at least two); each summand
    without one [f] is the matching operand of the inner sum (its one factor, or a [MUL] of
    them); every node's dims are among its parent's. *)
Definition max_factor (T : table) (f : positive) : bool :=
  let g := match node_at T f with Node (OPow _) [b] _ => b | _ => f end in
  match node_at T g with Node (OUn UExp) [m] _ => is_max T 64 m | _ => false end.

Definition out_ok (T : table) (f : positive) (Da : list dimspec) (x y : positive) : bool :=
  match node_at T x with
  | Node OMul args Dx =>
      kids_in T args Dx &&
      match remove1 f args with
      | Some [a] => Pos.eqb y a
      | Some rest =>
          match node_at T y with
          | Node OMul ys Dy => list_eqb Pos.eqb ys rest && kids_in T ys Dy && incl_dims Dy Da
          | _ => false
          end
      | None => false
      end
  | _ => false
  end.

Fixpoint outs_ok (T : table) (f : positive) (Da : list dimspec) (xs ys : list positive) : bool :=
  match xs, ys with
  | [], [] => true
  | x :: xs', y :: ys' => out_ok T f Da x y && outs_ok T f Da xs' ys'
  | _, _ => false
  end.

Definition chk_add_max_factor_out (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l, node_at T r with
  | Node OAdd xs D, Node OMul [f; a] Dr =>
      match node_at T a with
      | Node OAdd outs Da =>
          if max_factor T f && Nat.leb 2 (length xs) && dims_eqvb D Dr && incl_dims Da Dr &&
             kids_in T xs D && kids_in T outs Da && outs_ok T f Da xs outs
          then Some [] else None
      | _ => None
      end
  | _, _ => None
  end.

Lemma chk_add_max_factor_out_sound : rule_sound chk_add_max_factor_out.
Proof.
  intros G l r h cl H c M _. destruct M as [W _].
  unfold chk_add_max_factor_out in H. set (T := gT G) in *.
  destruct (node_at T l) as [o1 xs D] eqn:El. destruct o1; try discriminate.
  destruct (node_at T r) as [o2 ps Dr] eqn:Er. destruct o2; try discriminate.
  destruct ps as [|f [|a [|]]]; try discriminate.
  destruct (node_at T a) as [o3 outs Da] eqn:Ea. destruct o3; try discriminate.
  match type of H with (if ?b then _ else _) = _ => destruct b eqn:B; try discriminate end.
  repeat match type of B with _ && _ = true => apply andb_prop in B as [B ?] end.
  rename H0 into OK, H1 into KO, H2 into KX, H3 into IDa, H4 into DE.
  apply (eqv_by_core c T l r _ _ _ _ _ _ W El Er DE). intros rho R i Mi Ri.
  destruct (dims_eqvb_perm _ _ DE) as [P _].
  assert (Mr : msk (sz c) Dr i = true) by (rewrite <- (msk_perm _ _ _ _ P); auto).
  assert (Ma : msk (sz c) Da i = true) by (apply (msk_incl c Da Dr); auto).
  cbn [core map]. cbn [prodl fold_right]. rewrite Rmult_1_r.
  rewrite (den_in c T a _ _ _ rho i W Ea Ma). cbn [core]. rewrite !map_map.
  assert (Rd : forall l0 D0, kids_in T l0 D0 = true ->
            map (fun y => den c T y rho (restrict D0 i)) l0 = map (fun y => den c T y rho i) l0).
  { intros l0 D0 K. apply map_ext_in. intros y Iy. apply den_at_incl; auto.
    unfold kids_in in K. rewrite forallb_forall in K. auto. }
  rewrite (Rd outs Da KO).
  assert (Mk : forall l0 D0, kids_in T l0 D0 = true -> msk (sz c) D0 i = true ->
            forall y, In y l0 -> msk (sz c) (ndims (node_at T y)) i = true).
  { intros l0 D0 K M0 y Iy. unfold kids_in in K. rewrite forallb_forall in K.
    apply (msk_incl c _ D0); auto. }
  assert (MX : forall y, In y xs -> msk (sz c) (ndims (node_at T y)) i = true)
    by (apply (Mk xs D); auto).
  assert (MO : forall y, In y outs -> msk (sz c) (ndims (node_at T y)) i = true)
    by (apply (Mk outs Da); auto).
  clear El Er Ea KX KO DE Ri B H5.
  revert MX outs OK MO. induction xs as [|x xs IH]; intros MX [|y outs] OK MO; simpl in OK;
    try discriminate.
  all: try (simpl; ring; fail).
  simpl. apply andb_prop in OK as [O1 OK]. rewrite (IH (fun z Iz => MX z (or_intror Iz)) outs OK
    (fun z Iz => MO z (or_intror Iz))).
  rewrite Rmult_plus_distr_l. f_equal.
  unfold out_ok in O1. destruct (node_at T x) as [ox args Dx] eqn:Ex. destruct ox; try discriminate.
  apply andb_prop in O1 as [KA O1].
  pose proof (MX x (or_introl eq_refl)) as Mx. rewrite Ex in Mx. simpl in Mx.
  rewrite (den_in c T x _ _ _ rho i W Ex Mx). cbn [core]. rewrite map_map, (Rd args Dx KA).
  destruct (remove1 f args) as [rest|] eqn:RM; try discriminate.
  rewrite (prodl_Permutation _ _ (Permutation_map _ (remove1_perm _ _ _ RM))). cbn [map].
  rewrite prodl_cons. f_equal.
  destruct rest as [|a1 [|a2 rest]].
  - destruct (node_at T y) as [[] ys Dy] eqn:Ey; try discriminate.
    apply andb_prop in O1 as [O1 _]. apply andb_prop in O1 as [O1 _].
    apply (list_eqb_eq _ _ (fun a b => proj1 (Pos.eqb_eq a b))) in O1. subst ys.
    pose proof (MO y (or_introl eq_refl)) as My. rewrite Ey in My. simpl in My.
    rewrite (den_in c T y _ _ _ rho i W Ey My). cbn [core]. simpl. auto.
  - apply Pos.eqb_eq in O1. subst y. simpl. ring.
  - destruct (node_at T y) as [[] ys Dy] eqn:Ey; try discriminate.
    apply andb_prop in O1 as [O1 _]. apply andb_prop in O1 as [O1 KY].
    apply (list_eqb_eq _ _ (fun a b => proj1 (Pos.eqb_eq a b))) in O1. subst ys.
    pose proof (MO y (or_introl eq_refl)) as My. rewrite Ey in My. simpl in My.
    rewrite (den_in c T y _ _ _ rho i W Ey My). cbn [core]. rewrite map_map, (Rd _ Dy KY). auto.
Qed.
