(** * RulesMove: permutations and collectives that move past each other (docs/rules.md,
    "permute", "collectives"; issue 17). Block orders are tested in full ([RulesPerm.order_b]).

    perm-swap: [PERMUTE(PERMUTE(x, d1, o1), d2, o2) = PERMUTE(PERMUTE(x, d2, o2), d1, o1)],
    [d1 <> d2] (the rule's guard orders the names, a canonical direction for the e-graph that
    Coq cannot see: names are interned numbers; the lemma does not need it);
    allreduce-permute: [ALL_REDUCE(PERMUTE(x, d, o), a, r) = PERMUTE(ALL_REDUCE(x, a, r), d, o)]
    (sums and maxima over ranks are positionwise);
    allreduce-concat: [ALL_REDUCE(CONCAT(xs, d), a, r) = CONCAT(ALL_REDUCE(x, a, r) for x in xs, d)]
    (each part keeps its size along [d]);
    allreduce-allgather-comm: [ALL_REDUCE(ALL_GATHER(x, b, d), a, r) = ALL_GATHER(ALL_REDUCE(x, a, r), b, d)],
    [a <> b], no dim of [x] sharded over [a] (the rule's guard, tested; the lemma needs [a <> b]);
    lift-shard-shift: [SHIFT(SHARD(x, d, a), e) = SHARD(SHIFT(x, e), d, a)], [d <> e], [x] does
    not vary over [a] (tested; the lemma does not need it: both sides read the block on the
    same rank). *)

From Coq Require Import Reals Lra Lia List QArith ZArith PArith NArith Bool Permutation.
From Coq Require Import FSets.FMapPositive FunctionalExtensionality.
From Shardproof Require Import Base Num Pow Term Props RuleLib Congr Rel Shard RulesBasic RulesLift
  RulesAxis RulesEinsum RulesScalarOut RulesLiftEinsum RulesLiftReindex RulesCollect RulesSplit
  RulesReorder RulesGather RulesPerm RulesPermLift.
Import ListNotations.
Open Scope R_scope.

Lemma order_ord : forall o, order_b o = true -> ord_lt o = true.
Proof. intros o H. unfold order_b in H. apply andb_prop in H as [H _]. apply andb_prop in H as [_ H]. exact H. Qed.

(** ** perm-swap *)
Definition chk_perm_swap (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l, node_at T r with
  | Node (OPermute d2 o2) [m] Dl, Node (OPermute d1' o1') [n] Dr =>
      match node_at T m, node_at T n with
      | Node (OPermute d1 o1) [x] _, Node (OPermute d2' o2') [x'] _ =>
          if Pos.eqb d1 d1' && Pos.eqb d2 d2' && list_eqb N.eqb o1 o1' && list_eqb N.eqb o2 o2' &&
             Pos.eqb x x' && negb (Pos.eqb d1 d2) && order_b o1 && order_b o2 &&
             is_perm T m d1 o1 x && is_perm T n d2 o2 x && dims_eqvb Dl Dr &&
             dims_eqvb Dl (ndims (node_at T m))
          then Some [] else None
      | _, _ => None
      end
  | _, _ => None
  end.

Lemma chk_perm_swap_sound : rule_sound chk_perm_swap.
Proof.
  intros G l r h cl H c M _. destruct M as [W [VC [SZ [F [DO P]]]]].
  unfold chk_perm_swap in H. set (T := gT G) in *.
  destruct (node_at T l) as [ol ms Dl] eqn:El. destruct ol; try discriminate.
  destruct ms as [|m [|]]; try discriminate. rename d into d2, o into o2.
  destruct (node_at T r) as [or ns Dr] eqn:Er. destruct or; try discriminate.
  destruct ns as [|n [|]]; try discriminate. rename d into d1', o into o1'.
  destruct (node_at T m) as [om xs Dm] eqn:Em. destruct om; try discriminate.
  destruct xs as [|x [|]]; try discriminate. rename d into d1, o into o1.
  destruct (node_at T n) as [on xs' Dn] eqn:En. destruct on; try discriminate.
  destruct xs' as [|x' [|]]; try discriminate. rename d into d2', o into o2'.
  match type of H with (if ?b then _ else _) = _ => destruct b eqn:B; try discriminate end.
  apply andb_prop in B as [B DM]. apply andb_prop in B as [B DE].
  apply andb_prop in B as [B PN]. apply andb_prop in B as [B PM].
  apply andb_prop in B as [B OB2]. apply andb_prop in B as [B OB1].
  apply andb_prop in B as [B NE]. apply andb_prop in B as [B XX].
  apply andb_prop in B as [B E2]. apply andb_prop in B as [B E1].
  apply andb_prop in B as [D1 D2].
  apply Pos.eqb_eq in D1, D2, XX. subst d1' d2' x'.
  apply (list_eqb_eq _ _ (fun a b => proj1 (N.eqb_eq a b))) in E1, E2. subst o1' o2'.
  apply Bool.negb_true_iff, Pos.eqb_neq in NE.
  pose proof (order_ord o1 OB1) as OR1. pose proof (order_ord o2 OB2) as OR2.
  destruct (dims_eqvb_perm _ _ DE) as [PD ND]. destruct (dims_eqvb_perm _ _ DM) as [PLM _].
  destruct (is_perm_dims T m d1 o1 x PM) as [PMx NMm].
  destruct (is_perm_dims T n d2 o2 x PN) as [PNx NNn].
  pose proof (is_perm_has T m d1 o1 x PM) as H1. pose proof (is_perm_has T n d2 o2 x PN) as H2.
  apply has_name_In in H1, H2.
  (* the dims of l, r, m, n and x are the same, up to order *)
  assert (EDm : ndims (node_at T m) = Dm) by (rewrite Em; auto).
  assert (Sm : forall k, lsize_of (sz c) (ndims (node_at T m)) k = lsize_of (sz c) Dl k)
    by (intro k; rewrite EDm; symmetry; apply lsize_of_perm; auto).
  assert (Sn : forall k, lsize_of (sz c) (ndims (node_at T n)) k = lsize_of (sz c) Dl k).
  { intro k. rewrite (lsize_of_perm _ _ _ k PNx NNn), <- (lsize_of_perm _ _ _ k PMx NMm). auto. }
  assert (Sr : forall k, lsize_of (sz c) Dr k = lsize_of (sz c) Dl k)
    by (intro k; symmetry; apply lsize_of_perm; auto).
  assert (InL : forall k, In k (map fst (ndims (node_at T x))) -> In k (map fst Dl)).
  { intros k I. apply (Permutation_in _ (Permutation_map fst (Permutation_sym PLM))).
    rewrite <- EDm. apply (Permutation_in _ (Permutation_map fst (Permutation_sym PMx))); auto. }
  assert (I1 : In d1 (map fst Dl))
    by (apply InL, (Permutation_in _ (Permutation_map fst PMx)); auto).
  assert (I2 : In d2 (map fst Dl))
    by (apply InL, (Permutation_in _ (Permutation_map fst PNx)); auto).
  apply (eqv_by_core c T l r _ _ Dl _ _ Dr W El Er DE).
  intros rho R i Mi Ri. cbn [core map]. unfold vat; simpl nth.
  assert (Id1 : (i d1 < lsize_of (sz c) Dl d1)%nat) by (apply lt_lsize; auto).
  assert (Id2 : (i d2 < lsize_of (sz c) Dl d2)%nat) by (apply lt_lsize; auto).
  rewrite (perm_read_lt c T m d1 o1 x rho _ W SZ PM OR1)
    by (rewrite upd_other by congruence; rewrite Sm; auto).
  rewrite (perm_read_lt c T n d2 o2 x rho _ W SZ PN OR2)
    by (rewrite upd_other by congruence; rewrite Sn; auto).
  rewrite !upd_other by congruence. rewrite Sm, Sn, !Sr. unfold pidx.
  rewrite upd_comm by congruence. reflexivity.
Qed.

(** ** allreduce-permute *)
Definition chk_allreduce_permute (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l, node_at T r with
  | Node (OAllReduce a rd) [p] Dl, Node (OPermute d o) [y] Dr =>
      match node_at T y with
      | Node (OAllReduce a' rd') [x] Dy =>
          if Pos.eqb a a' && red_eqb rd rd' && order_b o && is_perm T p d o x &&
             dims_eqvb Dl Dr && dims_eqvb Dy Dr && has_name Dr d &&
             dims_eqvb Dl (ndims (node_at T p)) && incl_names (ndims (node_at T x)) Dy
          then Some [] else None
      | _ => None
      end
  | _, _ => None
  end.

Lemma chk_allreduce_permute_sound : rule_sound chk_allreduce_permute.
Proof.
  intros G l r h cl H c M _. destruct M as [W [VC [SZ [F [DO P]]]]].
  unfold chk_allreduce_permute in H. set (T := gT G) in *.
  destruct (node_at T l) as [ol ps Dl] eqn:El. destruct ol; try discriminate.
  destruct ps as [|p [|]]; try discriminate. rename r0 into rd.
  destruct (node_at T r) as [or ys Dr] eqn:Er. destruct or; try discriminate.
  destruct ys as [|y [|]]; try discriminate.
  destruct (node_at T y) as [oy xs Dy] eqn:Ey. destruct oy; try discriminate.
  destruct xs as [|x [|]]; try discriminate. rename a0 into a', r0 into rd'.
  match type of H with (if ?b then _ else _) = _ => destruct b eqn:B; try discriminate end.
  apply andb_prop in B as [B IX]. apply andb_prop in B as [B DP].
  apply andb_prop in B as [B HDr]. apply andb_prop in B as [B DY].
  apply andb_prop in B as [B DE]. apply andb_prop in B as [B PP].
  apply andb_prop in B as [B OB]. apply andb_prop in B as [A RR].
  apply Pos.eqb_eq in A. subst a'. apply red_eqb_eq in RR. subst rd'.
  apply has_name_In in HDr.
  pose proof (order_ord o OB) as OR.
  destruct (dims_eqvb_perm _ _ DE) as [PD ND]. destruct (dims_eqvb_perm _ _ DY) as [PY NDY].
  destruct (dims_eqvb_perm _ _ DP) as [PLP _].
  apply (eqv_by_core c T l r _ _ Dl _ _ Dr W El Er DE).
  intros rho R i Mi Ri. rewrite core_allreduce. cbn [core map]. unfold vat; simpl nth.
  assert (Mr : msk (sz c) Dr i = true) by (rewrite <- (msk_perm _ _ _ i PD); auto).
  set (j := upd i d (pidx o (lsize_of (sz c) Dr d / length o) (i d))).
  assert (Mj : msk (sz c) Dy j = true) by (apply (perm_msk c T r d o y Dr Dy i SZ Er OR PY NDY HDr Mr)).
  transitivity (den c T y rho j); [|reflexivity].
  rewrite (den_in c T y _ _ _ rho _ W Ey Mj), core_allreduce. cbn [map]. unfold vat; simpl nth.
  assert (Lp : lsize_of (sz c) (ndims (node_at T p)) d = lsize_of (sz c) Dr d).
  { rewrite <- (lsize_of_perm _ _ _ d PLP ND). apply lsize_of_perm; auto. }
  assert (Id : (i d < lsize_of (sz c) Dr d)%nat) by (apply lt_lsize; auto).
  apply redv_ext. intros q _.
  rewrite (perm_read_lt c T p d o x _ _ W SZ PP OR) by (rewrite Lp; auto). rewrite Lp. fold j.
  apply den_agree; auto. intros nn In_. symmetry. apply restrict_in.
  unfold incl_names in IX. rewrite forallb_forall in IX.
  apply in_map_iff in In_ as [dd [<- I]]. apply has_name_In, IX; auto.
Qed.

(** ** allreduce-concat *)
(** [Y] is [ALL_REDUCE(X, a, rd)] with [X]'s dims *)
Definition ar_of_red (T : table) (a : name) (rd : red) (X Y : positive) : bool :=
  match node_at T Y with
  | Node (OAllReduce a' rd') [X'] DY =>
      Pos.eqb a a' && red_eqb rd rd' && Pos.eqb X X' && dims_eqvb DY (ndims (node_at T X))
  | _ => false
  end.

Lemma ar_of_red_den : forall c T a rd X Y, wf_table T -> ar_of_red T a rd X Y = true ->
  forall rho j, den c T Y rho j = redv rd (sz c a) (fun q => den c T X (upd rho a q) j).
Proof.
  intros c T a rd X Y W H rho j. unfold ar_of_red in H.
  destruct (node_at T Y) as [oy xs DY] eqn:EY. destruct oy; try discriminate.
  destruct xs as [|X' [|]]; try discriminate.
  apply andb_prop in H as [H DX]. apply andb_prop in H as [H XX].
  apply andb_prop in H as [A RR]. apply Pos.eqb_eq in A, XX. apply red_eqb_eq in RR.
  subst a0 X' r.
  destruct (dims_eqvb_perm _ _ DX) as [PY _].
  rewrite (den_node c T Y _ _ _ W EY). destruct (msk (sz c) DY j) eqn:Mj.
  - rewrite core_allreduce. cbn [map]. unfold vat; simpl nth. apply redv_ext. intros q _.
    rewrite (restrict_perm _ _ j PY). apply den_restrict; auto.
  - symmetry. rewrite (redv_ext _ _ _ (fun _ => 0)); [apply redv_zero|]. intros q _.
    apply den_msk0; auto. rewrite <- (msk_perm _ _ _ j PY); auto.
Qed.

Lemma redv_concat : forall c T a rd d rho i (Xs Ys : list positive) (LX LY : positive -> nat),
  forallb2 (ar_of_red T a rd) Xs Ys = true -> wf_table T ->
  (forall X Y, ar_of_red T a rd X Y = true -> LX X = LY Y) ->
  forall j, redv rd (sz c a) (fun q => concat_at (combine (map (den c T) Xs) (map LX Xs)) d (upd rho a q) i j) =
            concat_at (combine (map (den c T) Ys) (map LY Ys)) d rho i j.
Proof.
  intros c T a rd d rho i Xs. induction Xs as [|X Xs IH]; intros [|Y Ys] LX LY F W HL j;
    simpl in F |- *; try discriminate.
  - apply redv_zero.
  - apply andb_prop in F as [FX F]. rewrite <- (HL X Y FX).
    destruct (Nat.ltb j (LX X)).
    + symmetry. apply (ar_of_red_den c T a rd X Y W FX).
    + apply IH; auto.
Qed.

Definition chk_allreduce_concat (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l, node_at T r with
  | Node (OAllReduce a rd) [m] Dl, Node (OConcat d') Ys Dr =>
      match node_at T m with
      | Node (OConcat d) Xs Dm =>
          if Pos.eqb d d' && dims_eqvb Dm Dl && dims_eqvb Dl Dr &&
             forallb2 (ar_of_red T a rd) Xs Ys
          then Some [] else None
      | _ => None
      end
  | _, _ => None
  end.

Lemma chk_allreduce_concat_sound : rule_sound chk_allreduce_concat.
Proof.
  intros G l r h cl H c M _. destruct M as [W _].
  unfold chk_allreduce_concat in H. set (T := gT G) in *.
  destruct (node_at T l) as [ol ms Dl] eqn:El. destruct ol; try discriminate.
  destruct ms as [|m [|]]; try discriminate. rename r0 into rd.
  destruct (node_at T r) as [or Ys Dr] eqn:Er. destruct or; try discriminate.
  rename d into d'.
  destruct (node_at T m) as [om Xs Dm] eqn:Em. destruct om; try discriminate.
  match type of H with (if ?b then _ else _) = _ => destruct b eqn:B; try discriminate end.
  apply andb_prop in B as [B FA]. apply andb_prop in B as [B DE].
  apply andb_prop in B as [DD DM]. apply Pos.eqb_eq in DD. subst d'.
  destruct (dims_eqvb_perm _ _ DM) as [PM _].
  apply (eqv_by_core c T l r _ _ Dl _ _ Dr W El Er DE).
  intros rho R i Mi Ri. rewrite core_allreduce. cbn [core map]. unfold vat; simpl nth.
  assert (Mm : msk (sz c) Dm i = true) by (rewrite (msk_perm _ _ _ i PM); auto).
  assert (Rm : restrict Dm i = i) by (rewrite (restrict_perm _ _ i PM); auto).
  rewrite (redv_ext _ _ _ (fun q => concat_at (combine (map (den c T) Xs)
             (map (fun x => lsize_of (sz c) (ndims (node_at T x)) d) Xs)) d (upd rho a q) i (i d))).
  2:{ intros q _. rewrite (den_in c T m _ _ _ _ i W Em Mm), Rm. reflexivity. }
  apply redv_concat; auto.
  intros X Y AR. unfold ar_of_red in AR.
  destruct (node_at T Y) as [oy xs DY] eqn:EY. destruct oy; try discriminate.
  destruct xs as [|X' [|]]; try discriminate.
  apply andb_prop in AR as [AR DX]. apply andb_prop in AR as [_ XX]. apply Pos.eqb_eq in XX. subst X'.
  destruct (dims_eqvb_perm _ _ DX) as [PY NY].
  cbn [ndims]. symmetry. apply lsize_of_perm; auto.
Qed.

(** ** allreduce-allgather-comm *)
Definition chk_allreduce_allgather_comm (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l, node_at T r with
  | Node (OAllReduce a rd) [g] Dl, Node (OAllGather b d) [y] Dr =>
      match node_at T g with
      | Node (OAllGather b' d') [x] Dg =>
          if Pos.eqb b b' && Pos.eqb d d' && negb (Pos.eqb a b) && ar_of_red T a rd x y &&
             dims_eqvb Dg Dl && dims_eqvb Dl Dr && has_name (ndims (node_at T x)) d &&
             forallb (fun p => negb (existsb (shard_eqb (SAx a)) (snd p))) (ndims (node_at T x))
          then Some [] else None
      | _ => None
      end
  | _, _ => None
  end.

Lemma chk_allreduce_allgather_comm_sound : rule_sound chk_allreduce_allgather_comm.
Proof.
  intros G l r h cl H c M _. destruct M as [W _].
  unfold chk_allreduce_allgather_comm in H. set (T := gT G) in *.
  destruct (node_at T l) as [ol gs Dl] eqn:El. destruct ol; try discriminate.
  destruct gs as [|g [|]]; try discriminate. rename r0 into rd.
  destruct (node_at T r) as [or ys Dr] eqn:Er. destruct or; try discriminate.
  destruct ys as [|y [|]]; try discriminate. rename a0 into b.
  destruct (node_at T g) as [og xs Dg] eqn:Eg. destruct og; try discriminate.
  destruct xs as [|x [|]]; try discriminate. rename a0 into b', d0 into d'.
  match type of H with (if ?b then _ else _) = _ => destruct b eqn:B; try discriminate end.
  apply andb_prop in B as [B _]. apply andb_prop in B as [B _].
  apply andb_prop in B as [B DE]. apply andb_prop in B as [B DG].
  apply andb_prop in B as [B AR]. apply andb_prop in B as [B NE].
  apply andb_prop in B as [E1 E2]. apply Pos.eqb_eq in E1, E2. subst b' d'.
  apply Bool.negb_true_iff, Pos.eqb_neq in NE.
  destruct (dims_eqvb_perm _ _ DG) as [PG NG]. destruct (dims_eqvb_perm _ _ DE) as [PD ND].
  apply (eqv_by_core c T l r _ _ Dl _ _ Dr W El Er DE).
  intros rho R i Mi Ri. rewrite core_allreduce. cbn [core map]. unfold vat; simpl nth.
  assert (Mg : msk (sz c) Dg i = true) by (rewrite (msk_perm _ _ _ i PG); auto).
  assert (Rg : restrict Dg i = i) by (rewrite (restrict_perm _ _ i PG); auto).
  assert (Sd : spec_of Dg d = spec_of Dr d).
  { rewrite <- (spec_of_perm _ _ PD ND). apply spec_of_perm; auto. }
  rewrite (redv_ext _ _ _ (fun q => den c T x (upd (upd rho a q) b
             (i d / lsz (sz c) (sz c d) (match spec_of Dr d with Some sh => sh | None => [] end ++ [SAx b])))
             (upd i d (i d mod lsz (sz c) (sz c d) (match spec_of Dr d with Some sh => sh | None => [] end ++ [SAx b]))))).
  2:{ intros q _. rewrite (den_in c T g _ _ _ _ i W Eg Mg), Rg. cbn [core map]. unfold vat; simpl nth.
      rewrite Sd. reflexivity. }
  rewrite (ar_of_red_den c T a rd x y W AR). apply redv_ext. intros q _.
  rewrite upd_comm by auto. reflexivity.
Qed.

(** ** lift-shard-shift *)
Definition chk_lift_shard_shift (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l, node_at T r with
  | Node (OShift e) [s] D, Node (OShard d a) [y] Dr =>
      match node_at T y with
      | Node (OShift e') [x] Dy =>
          if Pos.eqb e e' && negb (Pos.eqb d e) && is_shard T s d a x && is_shard T r d a y &&
             invariant G x a && dims_eqvb D Dr && has_name Dy e &&
             spec_opt_eqb (spec_of D e) (spec_of Dy e) &&
             spec_opt_eqb (spec_of D d) (spec_of (ndims (node_at T s)) d) &&
             incl_names (ndims (node_at T x)) Dy
          then Some [] else None
      | _ => None
      end
  | _, _ => None
  end.

Lemma chk_lift_shard_shift_sound : rule_sound chk_lift_shard_shift.
Proof.
  intros G l r h cl H c M _. destruct M as [W [VC [SZ [F [DO P]]]]].
  unfold chk_lift_shard_shift in H. set (T := gT G) in *.
  destruct (node_at T l) as [ol ss D] eqn:El. destruct ol; try discriminate.
  destruct ss as [|s [|]]; try discriminate. rename d into e.
  destruct (node_at T r) as [or ys Dr] eqn:Er. destruct or; try discriminate.
  destruct ys as [|y [|]]; try discriminate.
  destruct (node_at T y) as [oy xs Dy] eqn:Ey. destruct oy; try discriminate.
  destruct xs as [|x [|]]; try discriminate. rename d0 into e'.
  match type of H with (if ?b then _ else _) = _ => destruct b eqn:B; try discriminate end.
  apply andb_prop in B as [B IX]. apply andb_prop in B as [B SPd].
  apply andb_prop in B as [B SPe]. apply andb_prop in B as [B HE].
  apply andb_prop in B as [B DE]. apply andb_prop in B as [B _].
  apply andb_prop in B as [B SR]. apply andb_prop in B as [B SS].
  apply andb_prop in B as [E1 NE].
  apply Pos.eqb_eq in E1. subst e'.
  apply Bool.negb_true_iff, Pos.eqb_neq in NE.
  apply spec_opt_eqb_eq in SPd, SPe. apply has_name_In in HE.
  destruct (dims_eqvb_perm _ _ DE) as [PD ND].
  destruct (is_shard_info T r d a y SR) as [_ [Hyd [PR [NDr NDy]]]].
  rewrite Er in PR, NDr; cbn [ndims] in PR, NDr. rewrite Ey in PR, Hyd, NDy; cbn [ndims] in PR, Hyd, NDy.
  apply (eqv_by_core c T l r _ _ D _ _ Dr W El Er DE).
  intros rho R i Mi Ri. cbn [core map]. unfold vat; simpl nth.
  assert (DinR : In d (map fst Dr)).
  { apply (Permutation_in _ (Permutation_map fst (Permutation_sym PR))).
    rewrite map_fst_shard_dims. apply has_name_In; auto. }
  assert (DinD : In d (map fst D))
    by (apply (Permutation_in _ (Permutation_map fst (Permutation_sym PD))); auto).
  assert (Lr : lsize_of (sz c) Dr d = lsize_of (sz c) D d) by (symmetry; apply lsize_of_perm; auto).
  assert (Ls : lsize_of (sz c) (ndims (node_at T s)) d = lsize_of (sz c) D d)
    by (symmetry; apply spec_lsize; auto).
  assert (Id : (i d < lsize_of (sz c) D d)%nat) by (apply lt_lsize; auto).
  assert (Mr : msk (sz c) (ndims (node_at T r)) i = true)
    by (rewrite Er; cbn [ndims]; rewrite <- (msk_perm _ _ _ i PD); auto).
  pose proof (shard_range c T SZ r d a y rho i SR R Mr) as My.
  rewrite Er, Ey in My; cbn [ndims] in My. unfold upd_shard in My.
  set (i' := upd i d (rho a * lsize_of (sz c) Dr d + i d)) in *.
  rewrite (den_in c T y _ _ _ rho _ W Ey My). cbn [core map]. unfold vat; simpl nth.
  rewrite (spec_lsize _ D Dy e SPe).
  assert (Ie : restrict Dy i' e = i e) by (rewrite restrict_in by auto; unfold i'; rewrite upd_other; congruence).
  rewrite Ie. destruct (Nat.ltb (S (i e)) (lsize_of (sz c) Dy e)); auto.
  rewrite (shard_read_lt c T W s d a x rho _ SS) by (rewrite upd_other by congruence; rewrite Ls; auto).
  unfold upd_shard. rewrite Ls, (upd_other i e) by congruence.
  apply den_agree; auto. intros n In_.
  assert (InY : In n (map fst Dy)).
  { unfold incl_names in IX. rewrite forallb_forall in IX.
    apply in_map_iff in In_ as [dd [<- I]]. apply has_name_In, IX; auto. }
  destruct (Pos.eqb_spec n e) as [->|Ne].
  { rewrite (upd_other _ d) by congruence. rewrite !upd_same. auto. }
  rewrite (upd_other _ e) by auto. rewrite restrict_in by auto.
  destruct (Pos.eqb_spec n d) as [->|Nd].
  { rewrite upd_same. unfold i'. rewrite upd_same, Lr. auto. }
  rewrite !upd_other by auto. unfold i'. rewrite upd_other; auto.
Qed.
