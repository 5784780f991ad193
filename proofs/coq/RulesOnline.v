(** * RulesOnline: the online-softmax rules (docs/rules.md, exp-shift; rewriting/expshift.py).

    einsum-max-factor-out and einsum-recip-factor-out:
    [EINSUM(..f.., o) = MUL(f, EINSUM(.. .., o'))]: a factor [f] whose dims are all output
    names is constant along the contraction and leaves it (distributivity, for any [f]).
    Checked as the Python rules: [f] is a max factor ([EXP(m)] or [POW(EXP(m), c)], [m] a max)
    or [POW(EINSUM(..), e)] with [e < 0]; another operand remains (for the second, one with a
    contracted dim); [f]'s names are output names. Checked besides, what the lemma needs (the
    rule builds it): the outer operands are the inner ones with [f] inserted at one position;
    the result's dims; for every name of the rest: it is an output name of [o'] exactly when
    of [o], as one it is a dim of the inner node, and if summed it has the same spec in both
    operand lists.

    exp-max-shift-block: [EXP(ADD(xs)) = MUL(EXP(ADD(xs without x_k)), POW(EXP(W(m)), c))]
    where [x_k = W(MUL(CONST(c), m))] and [W] a non-empty chain of [SHARD] / [PERMUTE]: a
    re-indexing, so [W(c m) = c W(m)] everywhere, and [exp (s + c w) = exp s (exp w)^c].
    Checked as the Python rule: [c] a negative integer, [m] a max, [W] non-empty; the two
    chains have the same ops and the same dims level by level; every node's dims are among its
    parent's, so every node is read at the same index. *)

From Coq Require Import Reals Lra Lia List QArith Qreals ZArith PArith NArith Bool Permutation.
From Coq Require Import FSets.FMapPositive FunctionalExtensionality.
From Shardproof Require Import Base Num Pow Term Props RuleLib Congr Rel Shard RulesBasic RulesLift
  RulesEinsum RulesScalarOut RulesLiftEinsum Positive Canon RulesCanon RulesShift
  RulesLiftReindex RulesEinsumMul RulesSplit RulesFactorOut RulesPerm.
Import ListNotations.
Open Scope R_scope.

(** ** A factor that leaves a contraction *)

Definition names_in (T : table) (o : list name) (x : positive) : bool :=
  forallb (fun n => existsb (Pos.eqb n) o) (map fst (ndims (node_at T x))).

(** the checks on the inner sum (as [chk_einsum_factor_out]) *)
Definition inner_ok (T : table) (xs rest : list positive) (o o' : list name) (De : list dimspec)
  : bool :=
  forallb (fun n => Bool.eqb (existsb (Pos.eqb n) o) (existsb (Pos.eqb n) o') &&
                    (negb (existsb (Pos.eqb n) o') || has_name De n) &&
                    (existsb (Pos.eqb n) o ||
                     spec_opt_eqb (first_spec T xs n) (first_spec T rest n)))
          (op_names T rest).

Lemma op_names_perm_in : forall T xs ys n, Permutation xs ys -> In n (op_names T ys) ->
  In n (op_names T xs).
Proof.
  intros T xs ys n P I. unfold op_names in *. apply in_flat_map in I as [x [Ix Hn]].
  apply in_flat_map. exists x; split; auto. apply (Permutation_in _ (Permutation_sym P)); auto.
Qed.

(** [EINSUM(xs, o) = MUL(fs ++ [e])], [e = EINSUM(rest, o')], [xs] a permutation of
    [fs ++ rest], every name of [fs] an output name. *)
Lemma factor_out_eqv : forall c T l r o xs Dl fs e Dr o' rest De, wf_table T ->
  node_at T l = Node (OEinsum o) xs Dl -> node_at T r = Node OMul (fs ++ [e]) Dr ->
  node_at T e = Node (OEinsum o') rest De ->
  Permutation xs (fs ++ rest) -> forallb (names_in T o) fs = true ->
  dims_eqvb Dl Dr = true -> incl_dims De Dr = true -> inner_ok T xs rest o o' De = true ->
  eqv c T l r.
Proof.
  intros c T l r o xs Dl fs e Dr o' rest De W El Er Ee PX FN DE ID NM.
  unfold inner_ok in NM. rewrite forallb_forall in NM.
  rewrite forallb_forall in FN.
  assert (NMo : forall n, In n (op_names T rest) ->
            existsb (Pos.eqb n) o = existsb (Pos.eqb n) o').
  { intros n I. specialize (NM n I). repeat (apply andb_prop in NM as [NM ?]).
    apply Bool.eqb_prop; auto. }
  assert (NMd : forall n, In n (op_names T rest) -> existsb (Pos.eqb n) o' = true -> In n (map fst De)).
  { intros n I E. specialize (NM n I). repeat (apply andb_prop in NM as [NM ?]).
    rewrite E in H0. apply has_name_In; auto. }
  assert (NMs : forall n, In n (op_names T rest) -> existsb (Pos.eqb n) o = false ->
            first_spec T xs n = first_spec T rest n).
  { intros n I E. specialize (NM n I). apply andb_prop in NM as [_ NM].
    rewrite E in NM. apply spec_opt_eqb_eq; auto. }
  assert (RX : forall n, In n (op_names T rest) -> In n (op_names T xs)).
  { intros n I. apply (op_names_perm_in T xs (fs ++ rest) n PX). unfold op_names in *.
    rewrite flat_map_app. apply in_or_app; auto. }
  assert (XR : forall n, In n (op_names T xs) -> existsb (Pos.eqb n) o = false ->
            In n (op_names T rest)).
  { intros n I E. unfold op_names in I |- *. apply in_flat_map in I as [x [Ix Hn]].
    apply (Permutation_in _ PX) in Ix. apply in_app_or in Ix as [If|Ir].
    - exfalso. specialize (FN x If). unfold names_in in FN. rewrite forallb_forall in FN.
      rewrite (FN n Hn) in E. discriminate.
    - apply in_flat_map; eauto. }
  set (C := contracted (sz c) T xs o). set (C' := contracted (sz c) T rest o').
  assert (NDC : NoDup (map fst C)).
  { unfold C, contracted. rewrite map_map. simpl. rewrite map_id. apply NoDup_filter, NoDup_nodup_pos. }
  assert (PC : Permutation C C').
  { apply NoDup_Permutation; try apply NoDup_fst_pairs; auto.
    { unfold C', contracted. rewrite map_map. simpl. rewrite map_id. apply NoDup_filter, NoDup_nodup_pos. }
    intros [n L]. unfold C, C'. rewrite !In_contracted_iff. split.
    - intros [I [Fo EL]]. assert (IR : In n (op_names T rest)) by auto.
      split; auto. rewrite <- NMo by auto. split; auto. rewrite EL, NMs; auto.
    - intros [I [Fo EL]]. assert (Fo' : existsb (Pos.eqb n) o = false) by (rewrite NMo; auto).
      split; [auto|]. split; auto. rewrite EL, NMs; auto. }
  destruct (dims_eqvb_perm _ _ DE) as [PD ND].
  apply (eqv_by_core c T l r _ _ Dl _ _ Dr W El Er DE).
  intros rho R i Mi Ri. cbn [core].
  assert (Mr : msk (sz c) Dr i = true) by (rewrite <- (msk_perm _ _ _ i PD); auto).
  assert (Me : msk (sz c) De i = true) by (apply (incl_dims_msk _ _ Dr); auto).
  rewrite !map_map, map_app, prodl_app'. cbn [map]. rewrite prodl_cons, prodl_nil, Rmult_1_r.
  rewrite (den_in c T e _ _ _ rho i W Ee Me). cbn [core].
  change (contracted (sz c) T xs o) with C. change (contracted (sz c) T rest o') with C'.
  rewrite (sumover_ext C _ (fun j => prodl (map (fun x => den c T x rho i) fs) *
                                     prodl (map (fun x => den c T x rho j) rest)) i i); auto.
  2:{ intros j Hj. rewrite map_map, (prodl_Permutation _ _ (Permutation_map _ PX)), map_app, prodl_app'.
      f_equal. apply f_equal. apply map_ext_in. intros x Ix. apply den_agree; auto. intros n In_.
      specialize (FN x Ix). unfold names_in in FN. rewrite forallb_forall in FN.
      apply Hj. intro IC. apply contracted_out in IC. rewrite (FN n In_) in IC. discriminate. }
  rewrite sumover_scal. f_equal.
  rewrite (sumover_perm _ _ PC NDC).
  transitivity (sumover C' (fun j => prodl (map (fun x => den c T x rho j) rest)) (restrict De i)).
  2:{ apply sumover_ext; auto. intros; rewrite map_map; auto. }
  apply (sumover_agree C' _ (op_names T rest)).
  - intros j j' A. f_equal. apply map_ext_in. intros x Ix. apply den_agree; auto.
    intros n In_. apply A. unfold op_names. apply in_flat_map; eauto.
  - intros m Im NI. symmetry. apply restrict_in. apply NMd; auto.
    destruct (existsb (Pos.eqb m) o') eqn:E; auto. exfalso. apply NI.
    apply in_map_iff. eexists (m, _). split; [reflexivity|]. unfold C'.
    apply In_contracted_iff. split; [auto|split; [auto|reflexivity]].
Qed.

(** [f = POW(EINSUM(..), e)], [e < 0] *)
Definition recip_factor (T : table) (f : positive) : bool :=
  match node_at T f with
  | Node (OPow e) [s] _ =>
      match node_at T s with Node (OEinsum _) _ _ => negb (Qle_bool 0 e) | _ => false end
  | _ => false
  end.

(** [xs] is [rest] with [f] inserted at some position [k] (the Python rule's [xs]) *)
Definition inserted (f : positive) (rest xs : list positive) : bool :=
  existsb (fun k => list_eqb Pos.eqb xs (firstn k rest ++ f :: skipn k rest))
          (seq 0 (S (length rest))).

Lemma inserted_perm : forall f rest xs, inserted f rest xs = true -> Permutation xs (f :: rest).
Proof.
  intros f rest xs H. apply existsb_exists in H as [k [_ H]].
  apply (list_eqb_eq _ _ (fun a b => proj1 (Pos.eqb_eq a b))) in H. subst xs.
  transitivity (f :: firstn k rest ++ skipn k rest).
  - apply Permutation_sym, Permutation_middle.
  - rewrite firstn_skipn. reflexivity.
Qed.

(** [kind]: true for einsum-max-factor-out, false for einsum-recip-factor-out *)
Definition chk_einsum_one_factor (kind : bool) (G : gctx) (l r : positive) (_ : hint)
  : option (list claim) :=
  let T := gT G in
  match node_at T l, node_at T r with
  | Node (OEinsum o) xs Dl, Node OMul [f; e] Dr =>
      match node_at T e with
      | Node (OEinsum o') rest De =>
          if (if kind then max_factor T f
              else recip_factor T f &&
                   existsb (fun n => negb (existsb (Pos.eqb n) o)) (op_names T rest)) &&
             inserted f rest xs && negb (Nat.eqb (length rest) 0) &&
             names_in T o f && dims_eqvb Dl Dr && incl_dims De Dr &&
             inner_ok T xs rest o o' De
          then Some [] else None
      | _ => None
      end
  | _, _ => None
  end.

Definition chk_einsum_max_factor_out := chk_einsum_one_factor true.
Definition chk_einsum_recip_factor_out := chk_einsum_one_factor false.

Lemma chk_einsum_one_factor_sound : forall kind, rule_sound (chk_einsum_one_factor kind).
Proof.
  intros kind G l r h cl H c M _. destruct M as [W _].
  unfold chk_einsum_one_factor in H. set (T := gT G) in *.
  destruct (node_at T l) as [ol xs Dl] eqn:El. destruct ol; try discriminate.
  destruct (node_at T r) as [or ys Dr] eqn:Er. destruct or; try discriminate.
  destruct ys as [|f [|e [|]]]; try discriminate.
  destruct (node_at T e) as [oe rest De] eqn:Ee. destruct oe; try discriminate.
  match type of H with (if ?b then _ else _) = _ => destruct b eqn:B; try discriminate end.
  repeat match type of B with _ && _ = true => apply andb_prop in B as [B ?] end.
  apply (factor_out_eqv c T l r out xs Dl [f] e Dr out0 rest De W El Er Ee); auto.
  - apply inserted_perm; auto.
  - simpl. rewrite andb_true_r. auto.
Qed.

Lemma chk_einsum_max_factor_out_sound : rule_sound chk_einsum_max_factor_out.
Proof. apply chk_einsum_one_factor_sound. Qed.

Lemma chk_einsum_recip_factor_out_sound : rule_sound chk_einsum_recip_factor_out.
Proof. apply chk_einsum_one_factor_sound. Qed.

(** ** exp-max-shift-block *)

(** [a = W(MUL(CONST(cv), m))] and [b = W(m)] for one chain [W] of [SHARD] / [PERMUTE] (the
    same op, attributes and dims level by level), [m] a max. *)
Fixpoint scaled (T : table) (fuel : nat) (a b : positive) (cv : num) : bool :=
  match fuel with
  | O => false
  | S f =>
      match node_at T a with
      | Node (OShard d x) [a'] Da =>
          match node_at T b with
          | Node (OShard d' x') [b'] Db =>
              Pos.eqb d d' && Pos.eqb x x' && list_eqb dimspec_eqb Da Db && scaled T f a' b' cv
          | _ => false
          end
      | Node (OPermute d o) [a'] Da =>
          match node_at T b with
          | Node (OPermute d' o') [b'] Db =>
              Pos.eqb d d' && list_eqb N.eqb o o' && list_eqb dimspec_eqb Da Db &&
              scaled T f a' b' cv
          | _ => false
          end
      | Node OMul [k; m] Dm =>
          match const_of T k with
          | Some kv => num_eqb kv cv && Pos.eqb m b && is_max T 64 m &&
                       dims_eqvb Dm (ndims (node_at T m)) && incl_dims (ndims (node_at T m)) Dm
          | None => false
          end
      | _ => false
      end
  end.

Definition wrapped (T : table) (x : positive) : bool :=
  match node_at T x with Node (OShard _ _) [_] _ | Node (OPermute _ _) [_] _ => true | _ => false end.

Section Scaled.
Variable c : ctx.
Variable T : table.
Hypothesis W : wf_table T.

Lemma scaled_ok : forall fuel a b cv, scaled T fuel a b cv = true ->
  forall rho i, den c T a rho i = num_val cv * den c T b rho i.
Proof.
  induction fuel as [|f IH]; intros a b cv H rho i; [discriminate|]. cbn [scaled] in H.
  destruct (node_at T a) as [oa xa Da] eqn:Ea.
  destruct oa; try discriminate.
  - (* MUL *)
    destruct xa as [|k [|m [|]]]; try discriminate.
    destruct (const_of T k) as [kv|] eqn:Ck; try discriminate.
    repeat match type of H with _ && _ = true => apply andb_prop in H as [H ?] end.
    apply num_eqb_val in H. apply Pos.eqb_eq in H3. subst b.
    destruct (dims_eqvb_perm _ _ H1) as [P _].
    rewrite (den_node c T a _ _ _ W Ea). rewrite (msk_perm _ _ _ i P).
    destruct (msk (sz c) (ndims (node_at T m)) i) eqn:Mm.
    + cbn [core map prodl fold_right]. rewrite Rmult_1_r.
      unfold const_of in Ck. destruct (node_at T k) as [[] [] []] eqn:Ek; try discriminate.
      injection Ck as <-. rewrite (den_const c T W k c0 Ek), H.
      rewrite (den_at_incl c T W m Da rho i) by auto. auto.
    + rewrite (den_msk0 c T W m rho i Mm). ring.
  - (* PERMUTE *)
    destruct xa as [|a' [|]]; try discriminate.
    destruct (node_at T b) as [ob xb Db] eqn:Eb. destruct ob; try discriminate.
    destruct xb as [|b' [|]]; try discriminate.
    repeat match type of H with _ && _ = true => apply andb_prop in H as [H ?] end.
    apply (list_eqb_eq _ _ dimspec_eqb_eq) in H1. subst Db. beq_to_eq.
    rewrite (den_node c T a _ _ _ W Ea), (den_node c T b _ _ _ W Eb).
    destruct (msk _ _ _); [|ring]. cbn [core map]. unfold vat; simpl nth. apply IH; auto.
  - (* SHARD *)
    destruct xa as [|a' [|]]; try discriminate.
    destruct (node_at T b) as [ob xb Db] eqn:Eb. destruct ob; try discriminate.
    destruct xb as [|b' [|]]; try discriminate.
    repeat match type of H with _ && _ = true => apply andb_prop in H as [H ?] end.
    apply (list_eqb_eq _ _ dimspec_eqb_eq) in H1. subst Db. beq_to_eq.
    rewrite (den_node c T a _ _ _ W Ea), (den_node c T b _ _ _ W Eb).
    destruct (msk _ _ _); [|ring]. cbn [core map]. unfold vat; simpl nth. apply IH; auto.
Qed.
End Scaled.

(** the summands other than [x_k] are [y] (one) or [y]'s operands *)
Definition rest_ok (T : table) (y : positive) (De : list dimspec) (rs : list positive) : bool :=
  match rs with
  | [y0] => Pos.eqb y y0
  | _ => match node_at T y with
         | Node OAdd ys Dy => list_eqb Pos.eqb ys rs && kids_in T ys Dy && incl_dims Dy De
         | _ => false
         end
  end.

Definition chk_exp_max_shift_block (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l, node_at T r with
  | Node (OUn UExp) [a] Dl, Node OMul [e1; p] Dr =>
      match node_at T a, node_at T e1, node_at T p with
      | Node OAdd xs Da, Node (OUn UExp) [y] De, Node (OPow cq) [em] Dp =>
          match node_at T em with
          | Node (OUn UExp) [wm] Dem =>
              if qint cq && negb (Qle_bool 0 cq) && Nat.leb 2 (length xs) &&
                 dims_eqvb Dl Dr && incl_dims Da Dl && kids_in T xs Da && incl_dims De Dr &&
                 incl_dims (ndims (node_at T y)) De && incl_dims Dp Dr && incl_dims Dem Dp &&
                 incl_dims (ndims (node_at T wm)) Dem &&
                 existsb (fun xk => wrapped T xk && scaled T 64 xk wm (num_of_Q cq) &&
                                    match remove1 xk xs with
                                    | Some rs => rest_ok T y De rs
                                    | None => false
                                    end) xs
              then Some [] else None
          | _ => None
          end
      | _, _, _ => None
      end
  | _, _ => None
  end.

Lemma chk_exp_max_shift_block_sound : rule_sound chk_exp_max_shift_block.
Proof.
  intros G l r h cl H c M _. destruct M as [W _].
  unfold chk_exp_max_shift_block in H. set (T := gT G) in *.
  destruct (node_at T l) as [o1 as_ Dl] eqn:El. destruct o1; try discriminate.
  destruct u; try discriminate. destruct as_ as [|a [|]]; try discriminate.
  destruct (node_at T r) as [o2 ps Dr] eqn:Er. destruct o2; try discriminate.
  destruct ps as [|e1 [|p [|]]]; try discriminate.
  destruct (node_at T a) as [o3 xs Da] eqn:Ea. destruct o3; try discriminate.
  destruct (node_at T e1) as [o4 ys De] eqn:Ee. destruct o4; try discriminate.
  destruct u; try discriminate. destruct ys as [|y [|]]; try discriminate.
  destruct (node_at T p) as [o5 ems Dp] eqn:Ep. destruct o5; try discriminate.
  destruct ems as [|em [|]]; try discriminate.
  destruct (node_at T em) as [o6 wms Dem] eqn:Eem. destruct o6; try discriminate.
  destruct u; try discriminate. destruct wms as [|wm [|]]; try discriminate.
  match type of H with (if ?b then _ else _) = _ => destruct b eqn:B; try discriminate end.
  repeat match type of B with _ && _ = true => apply andb_prop in B as [B ?] end.
  rename H0 into EX, H1 into Iwm, H2 into Iem, H3 into Ip, H4 into Iy, H5 into IDe,
    H6 into KX, H7 into IDa, H8 into DE.
  apply existsb_exists in EX as [xk [Ixk EX]].
  apply andb_prop in EX as [EX RO]. apply andb_prop in EX as [_ SC].
  destruct (remove1 xk xs) as [rs|] eqn:RM; try discriminate.
  apply (eqv_by_core c T l r _ _ _ _ _ _ W El Er DE). intros rho R i Mi Ri.
  destruct (dims_eqvb_perm _ _ DE) as [P _].
  assert (Mr : msk (sz c) Dr i = true) by (rewrite <- (msk_perm _ _ _ _ P); auto).
  assert (Ma : msk (sz c) Da i = true) by (apply (msk_incl c Da Dl); auto).
  assert (Me : msk (sz c) De i = true) by (apply (msk_incl c De Dr); auto).
  assert (Mp : msk (sz c) Dp i = true) by (apply (msk_incl c Dp Dr); auto).
  assert (Mem : msk (sz c) Dem i = true) by (apply (msk_incl c Dem Dp); auto).
  assert (Rd : forall l0 D0, kids_in T l0 D0 = true ->
            map (fun y => den c T y rho (restrict D0 i)) l0 = map (fun y => den c T y rho i) l0).
  { intros l0 D0 K. apply map_ext_in. intros z Iz. apply den_at_incl; auto.
    unfold kids_in in K. rewrite forallb_forall in K. auto. }
  cbn [core map uval]. unfold vat; simpl nth. cbn [prodl fold_right]. rewrite Rmult_1_r.
  rewrite (den_in c T a _ _ _ rho i W Ea Ma). cbn [core]. rewrite map_map, (Rd xs Da KX).
  rewrite (suml_perm _ _ (Permutation_map _ (remove1_perm _ _ _ RM))). cbn [map suml fold_right].
  rewrite (scaled_ok c T W _ _ _ _ SC), num_val_of_Q.
  rewrite (den_in c T e1 _ _ _ rho i W Ee Me). cbn [core map uval]. unfold vat; simpl nth.
  rewrite (den_at_incl c T W y De rho i) by auto.
  rewrite (den_in c T p _ _ _ rho i W Ep Mp). cbn [core map]. unfold vat; simpl nth.
  rewrite (den_at_incl c T W em Dp rho i) by (rewrite Eem; auto).
  rewrite (den_in c T em _ _ _ rho i W Eem Mem). cbn [core map uval]. unfold vat; simpl nth.
  rewrite (den_at_incl c T W wm Dem rho i) by auto.
  rewrite rpow_pos by apply exp_pos. unfold Rpower. rewrite ln_exp.
  assert (Ey : den c T y rho i = suml (map (fun z => den c T z rho i) rs)).
  { unfold rest_ok in RO. destruct rs as [|y0 [|y1 rs']].
    - destruct (node_at T y) as [[] ys Dy] eqn:Ey; try discriminate.
      repeat match type of RO with _ && _ = true => apply andb_prop in RO as [RO ?] end.
      apply (list_eqb_eq _ _ (fun a b => proj1 (Pos.eqb_eq a b))) in RO. subst ys.
      assert (My : msk (sz c) Dy i = true) by (apply (msk_incl c Dy De); auto).
      rewrite (den_in c T y _ _ _ rho i W Ey My). cbn [core map]. auto.
    - apply Pos.eqb_eq in RO. subst y0. simpl. ring.
    - destruct (node_at T y) as [[] ys Dy] eqn:Ey; try discriminate.
      repeat match type of RO with _ && _ = true => apply andb_prop in RO as [RO ?] end.
      apply (list_eqb_eq _ _ (fun a b => proj1 (Pos.eqb_eq a b))) in RO. subst ys.
      assert (My : msk (sz c) Dy i = true) by (apply (msk_incl c Dy De); auto).
      rewrite (den_in c T y _ _ _ rho i W Ey My). cbn [core]. rewrite map_map, (Rd _ Dy H1).
      auto. }
  rewrite Ey, <- exp_plus. unfold suml. f_equal. ring.
Qed.
