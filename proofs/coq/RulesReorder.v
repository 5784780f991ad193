(** * RulesReorder: reductions and block orders that commute (docs/rules.md, "collectives",
    "lifting", "permutations").

    allreduce-swap: [ALL_REDUCE(ALL_REDUCE(x, a, r), b, r) = ALL_REDUCE(ALL_REDUCE(x, b, r), a, r)]
    ([a <> b]; the rule's guard orders the axes, which the lemma does not need);
    perm-compose: [PERMUTE(PERMUTE(x, d, o1), d, o2) = PERMUTE(x, d, o)], [o[j] = o1[o2[j]]]
    (both orders of [n] blocks, [o2]'s entries below [n]);
    lift-shard-reduce-max: [REDUCE_MAX(SHARD(x, d, a), ds) = SHARD(REDUCE_MAX(x, ds), d, a)],
    [d] not in [ds] (the rule's guard also asks that [x] does not vary over [a]; the lemma does
    not need it);
    lift-perm-elementwise: [op(..PERMUTE(x_i, d, o)..y_j..) = PERMUTE(op(..x_i..y_j..), d, o)]. *)

From Coq Require Import Reals Lra Lia List QArith ZArith PArith NArith Bool Permutation.
From Coq Require Import FSets.FMapPositive FunctionalExtensionality.
From Shardproof Require Import Base Num Pow Term Props RuleLib Congr Rel Shard RulesBasic RulesLift
  RulesAxis RulesEinsum RulesScalarOut RulesLiftEinsum RulesLiftReindex RulesCollect.
Import ListNotations.
Open Scope R_scope.

(** ** allreduce-swap *)
Lemma redv_swap : forall rd n m (f : nat -> nat -> R),
  redv rd n (fun i => redv rd m (fun j => f i j)) = redv rd m (fun j => redv rd n (fun i => f i j)).
Proof. intros [] n m f; simpl; [apply rsum_swap|apply rmaxs_swap]. Qed.

Definition chk_allreduce_swap (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l, node_at T r with
  | Node (OAllReduce b rd) [m] Dl, Node (OAllReduce a' rd2) [n] Dr =>
      match node_at T m, node_at T n with
      | Node (OAllReduce a rd1) [x] Dm, Node (OAllReduce b' rd3) [x'] Dn =>
          if Pos.eqb a a' && Pos.eqb b b' && negb (Pos.eqb a b) && Pos.eqb x x' &&
             red_eqb rd rd1 && red_eqb rd rd2 && red_eqb rd rd3 &&
             dims_eqvb Dm Dl && dims_eqvb Dl Dr && dims_eqvb Dn Dr &&
             dims_eqvb Dm (ndims (node_at T x)) && dims_eqvb Dn (ndims (node_at T x))
          then Some [] else None
      | _, _ => None
      end
  | _, _ => None
  end.

Lemma red_eqb_eq : forall r r', red_eqb r r' = true -> r = r'.
Proof. intros [] [] H; simpl in H; congruence. Qed.

Lemma chk_allreduce_swap_sound : rule_sound chk_allreduce_swap.
Proof.
  intros G l r h cl H c M _. destruct M as [W _].
  unfold chk_allreduce_swap in H. set (T := gT G) in *.
  destruct (node_at T l) as [ol ms Dl] eqn:El. destruct ol; try discriminate.
  destruct ms as [|m [|]]; try discriminate. rename a into b, r0 into rd.
  destruct (node_at T r) as [or ns Dr] eqn:Er. destruct or; try discriminate.
  destruct ns as [|n [|]]; try discriminate. rename a into a', r0 into rd2.
  destruct (node_at T m) as [om xs Dm] eqn:Em. destruct om; try discriminate.
  destruct xs as [|x [|]]; try discriminate. rename r0 into rd1.
  destruct (node_at T n) as [on xs' Dn] eqn:En. destruct on; try discriminate.
  destruct xs' as [|x' [|]]; try discriminate. rename a0 into b', r0 into rd3.
  match type of H with (if ?b then _ else _) = _ => destruct b eqn:B; try discriminate end.
  apply andb_prop in B as [B XN]. apply andb_prop in B as [B XM].
  apply andb_prop in B as [B DN]. apply andb_prop in B as [B DE].
  apply andb_prop in B as [B DM]. apply andb_prop in B as [B R3].
  apply andb_prop in B as [B R2]. apply andb_prop in B as [B R1].
  apply andb_prop in B as [B X]. apply andb_prop in B as [B NE].
  apply andb_prop in B as [A Bb].
  apply Pos.eqb_eq in A, Bb, X. subst a' b' x'.
  apply red_eqb_eq in R1, R2, R3. subst rd1 rd2 rd3.
  apply Bool.negb_true_iff, Pos.eqb_neq in NE.
  destruct (dims_eqvb_perm _ _ DM) as [PM _]. destruct (dims_eqvb_perm _ _ DE) as [PD _].
  destruct (dims_eqvb_perm _ _ DN) as [PN _].
  destruct (dims_eqvb_perm _ _ XM) as [PXM _]. destruct (dims_eqvb_perm _ _ XN) as [PXN _].
  apply (eqv_by_core c T l r _ _ Dl _ _ Dr W El Er DE).
  intros rho R i Mi Ri. rewrite !core_allreduce. unfold vat; simpl nth.
  assert (Mm : msk (sz c) Dm i = true) by (rewrite (msk_perm _ _ _ i PM); auto).
  assert (Mn : msk (sz c) Dn i = true) by (rewrite (msk_perm _ _ _ i PN), <- (msk_perm _ _ _ i PD); auto).
  rewrite (redv_ext _ _ _ (fun s => redv rd (sz c a) (fun t => den c T x (upd (upd rho b s) a t) i))).
  2:{ intros s _. rewrite (den_in c T m _ _ _ _ i W Em Mm), core_allreduce. unfold vat; simpl nth.
      apply redv_ext. intros t _. rewrite (restrict_perm _ _ i PXM). apply den_restrict; auto. }
  rewrite (redv_ext _ _ (fun t => den c T n (upd rho a t) i)
                        (fun t => redv rd (sz c b) (fun s => den c T x (upd (upd rho b s) a t) i))).
  2:{ intros t _. rewrite (den_in c T n _ _ _ _ i W En Mn), core_allreduce. unfold vat; simpl nth.
      apply redv_ext. intros s _. rewrite (restrict_perm _ _ i PXN), upd_comm by auto.
      apply den_restrict; auto. }
  apply redv_swap.
Qed.

(** ** perm-compose *)
Definition chk_perm_compose (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l, node_at T r with
  | Node (OPermute d o2) [m] Dl, Node (OPermute d' o) [x] Dr =>
      match node_at T m with
      | Node (OPermute d'' o1) [x'] Dm =>
          if Pos.eqb d d' && Pos.eqb d d'' && Pos.eqb x x' && has_name Dl d &&
             Nat.eqb (length o1) (length o2) &&
             forallb (fun k => N.ltb k (N.of_nat (length o1))) o2 &&
             list_eqb N.eqb o (map (fun k => nth (N.to_nat k) o1 0%N) o2) &&
             dims_eqvb Dm Dl && dims_eqvb Dl Dr && incl_names (ndims (node_at T x)) Dl
          then Some [] else None
      | _ => None
      end
  | _, _ => None
  end.

Lemma chk_perm_compose_sound : rule_sound chk_perm_compose.
Proof.
  intros G l r h cl H c M _. destruct M as [W [VC [SZ [F [DO P]]]]].
  unfold chk_perm_compose in H. set (T := gT G) in *.
  destruct (node_at T l) as [ol ms Dl] eqn:El. destruct ol; try discriminate.
  destruct ms as [|m [|]]; try discriminate. rename o into o2.
  destruct (node_at T r) as [or xs Dr] eqn:Er. destruct or; try discriminate.
  destruct xs as [|x [|]]; try discriminate. rename d0 into d'.
  destruct (node_at T m) as [om xs' Dm] eqn:Em. destruct om; try discriminate.
  destruct xs' as [|x' [|]]; try discriminate. rename d0 into d'', o0 into o1.
  match type of H with (if ?b then _ else _) = _ => destruct b eqn:B; try discriminate end.
  apply andb_prop in B as [B IN]. apply andb_prop in B as [B DE].
  apply andb_prop in B as [B DM]. apply andb_prop in B as [B OE].
  apply andb_prop in B as [B O2]. apply andb_prop in B as [B LEN].
  apply andb_prop in B as [B HD]. apply andb_prop in B as [B X].
  apply andb_prop in B as [D1 D2].
  apply Pos.eqb_eq in D1, D2, X. subst d' d'' x'.
  apply Nat.eqb_eq in LEN. apply has_name_In in HD.
  apply (list_eqb_eq _ _ (fun a b => proj1 (N.eqb_eq a b))) in OE. subst o.
  rewrite forallb_forall in O2.
  destruct (dims_eqvb_perm _ _ DM) as [PM NM]. destruct (dims_eqvb_perm _ _ DE) as [PD ND].
  apply (eqv_by_core c T l r _ _ Dl _ _ Dr W El Er DE).
  intros rho R i Mi Ri. cbn [core]. unfold vat; simpl nth.
  set (n := length o1) in *. set (L := lsize_of (sz c) Dl d).
  assert (Lm : lsize_of (sz c) Dm d = L) by (unfold L; apply lsize_of_perm; auto).
  assert (Lr : lsize_of (sz c) Dr d = L) by (unfold L; symmetry; apply lsize_of_perm; auto).
  rewrite Lr, map_length. fold n. rewrite <- LEN. fold n.
  assert (Id : (i d < L)%nat) by (apply lt_lsize; auto).
  pose proof (node_sizes_at _ _ SZ l) as NS. rewrite El in NS. unfold node_sizes_okb in NS.
  simpl in NS. apply andb_prop in NS as [_ NS]. apply andb_prop in NS as [N0 NM0].
  apply Nat.ltb_lt in N0. apply Nat.eqb_eq in NM0. rewrite <- LEN in N0, NM0. fold n L in N0, NM0.
  assert (E : L = (n * (L / n))%nat) by (apply Nat.div_exact; lia).
  set (Bk := (L / n)%nat) in *.
  assert (Bp : (0 < Bk)%nat) by (destruct Bk; lia).
  set (q := (i d / Bk)%nat). set (rm := (i d mod Bk)%nat).
  assert (Q : (q < n)%nat) by (apply Nat.div_lt_upper_bound; lia).
  assert (Rm : (rm < Bk)%nat) by (apply Nat.mod_upper_bound; lia).
  set (k2 := N.to_nat (nth q o2 0%N)).
  assert (K2 : (k2 < n)%nat).
  { unfold k2. assert (I : In (nth q o2 0%N) o2) by (apply nth_In; lia).
    specialize (O2 _ I). apply N.ltb_lt in O2. lia. }
  (* the inner permutation read at the outer one's position *)
  set (j := upd i d (k2 * Bk + rm)%nat).
  assert (Mj : msk (sz c) Dm j = true).
  { rewrite (msk_perm _ _ _ j PM). apply msk_iff; auto. intros nn sh E'.
    unfold j, upd. destruct (Pos.eqb_spec nn d) as [->|Nn].
    - assert (Lsh : lsize_of (sz c) Dl d = lsz (sz c) (sz c d) sh) by (unfold lsize_of; rewrite E'; auto).
      fold L in Lsh. rewrite <- Lsh. nia.
    - eapply msk_spec; eauto. }
  rewrite (den_in c T m _ _ _ _ j W Em Mj). cbn [core]. unfold vat; simpl nth.
  rewrite Lm. fold Bk.
  assert (Rj : restrict Dm j d = (k2 * Bk + rm)%nat).
  { rewrite restrict_in; [unfold j; apply upd_same|].
    apply (Permutation_in _ (Permutation_map fst (Permutation_sym PM))); auto. }
  rewrite Rj.
  assert (Dv : ((k2 * Bk + rm) / Bk = k2)%nat).
  { rewrite Nat.div_add_l by lia. rewrite Nat.div_small by lia. lia. }
  assert (Md : ((k2 * Bk + rm) mod Bk = rm)%nat).
  { rewrite Nat.add_comm, Nat.mod_add by lia. apply Nat.mod_small; lia. }
  change (L / length o1)%nat with Bk. rewrite Dv, Md.
  rewrite (nth_indep (map (fun k => nth (N.to_nat k) o1 0%N) o2) 0%N (nth (N.to_nat 0%N) o1 0%N))
    by (rewrite map_length; lia).
  rewrite (map_nth (fun k => nth (N.to_nat k) o1 0%N)). fold q k2.
  apply den_agree; auto. intros nn In_.
  assert (InL : In nn (map fst Dl)).
  { unfold incl_names in IN. rewrite forallb_forall in IN.
    apply in_map_iff in In_ as [dd [<- I]]. apply has_name_In, IN; auto. }
  assert (InM : In nn (map fst Dm)) by (apply (Permutation_in _ (Permutation_map fst (Permutation_sym PM))); auto).
  unfold upd. destruct (Pos.eqb_spec nn d) as [->|Nn]; auto.
  rewrite restrict_in by auto. unfold j, upd. rewrite (proj2 (Pos.eqb_neq nn d) Nn). auto.
Qed.

(** ** lift-shard-reduce-max *)
Lemma maxover_upd_out : forall C f i n v, ~ In n (map fst C) ->
  maxover C f (upd i n v) = maxover C (fun j => f (upd j n v)) i.
Proof.
  induction C as [|[m L] C IH]; intros f i n v N; simpl; auto.
  apply rmaxs_ext. intros k _. rewrite upd_comm by (intro E; subst; apply N; simpl; auto).
  apply IH. intro I; apply N; simpl; auto.
Qed.

Lemma maxover_agree : forall C f S i i',
  (forall j j', agree S j j' -> f j = f j') ->
  (forall m, In m S -> ~ In m (map fst C) -> i m = i' m) ->
  maxover C f i = maxover C f i'.
Proof.
  induction C as [|[n L] C IH]; intros f S i i' Hf H; simpl.
  - apply Hf. intros m Im. apply H; auto.
  - apply rmaxs_ext; intros k _. apply (IH f S); auto.
    intros m Im NI. unfold upd. destruct (Pos.eqb_spec m n); auto.
    apply H; auto. simpl. intros [E|E]; auto.
Qed.

Definition chk_lift_reduce_max (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l, node_at T r with
  | Node (OReduceMax ds) [s] Dl, Node (OShard d a) [y] Dr =>
      match node_at T y with
      | Node (OReduceMax ds') [x] Dy =>
          if names_eqb ds ds' && negb (existsb (Pos.eqb d) ds) &&
             is_shard T s d a x && is_shard T r d a y && dims_eqvb Dl Dr &&
             spec_opt_eqb (spec_of Dl d) (spec_of (ndims (node_at T s)) d) &&
             forallb (fun n => existsb (Pos.eqb n) ds || has_name Dy n)
                     (map fst (ndims (node_at T x)))
          then Some [] else None
      | _ => None
      end
  | _, _ => None
  end.

Lemma chk_lift_reduce_max_sound : rule_sound chk_lift_reduce_max.
Proof.
  intros G l r h cl H c M _. destruct M as [W [VC [SZ [F [DO P]]]]].
  unfold chk_lift_reduce_max in H. set (T := gT G) in *.
  destruct (node_at T l) as [ol ss Dl] eqn:El. destruct ol; try discriminate.
  destruct ss as [|s [|]]; try discriminate.
  destruct (node_at T r) as [or ys Dr] eqn:Er. destruct or; try discriminate.
  destruct ys as [|y [|]]; try discriminate.
  destruct (node_at T y) as [oy xs Dy] eqn:Ey. destruct oy; try discriminate.
  destruct xs as [|x [|]]; try discriminate. rename ds0 into ds'.
  match type of H with (if ?b then _ else _) = _ => destruct b eqn:B; try discriminate end.
  apply andb_prop in B as [B NX]. apply andb_prop in B as [B SPd].
  apply andb_prop in B as [B DE]. apply andb_prop in B as [B SR].
  apply andb_prop in B as [B SS]. apply andb_prop in B as [DD ND'].
  apply (list_eqb_eq _ _ (fun a b => proj1 (Pos.eqb_eq a b))) in DD; subst ds'.
  apply Bool.negb_true_iff in ND'. apply spec_opt_eqb_eq in SPd.
  rewrite forallb_forall in NX.
  destruct (dims_eqvb_perm _ _ DE) as [PD ND].
  destruct (is_shard_info T r d a y SR) as [_ [Hyd [PR [NDr NDy]]]].
  rewrite Er in PR, NDr; simpl in PR, NDr. rewrite Ey in PR, Hyd, NDy; simpl in PR, Hyd, NDy.
  apply (eqv_by_core c T l r _ _ Dl _ _ Dr W El Er DE).
  intros rho R i Mi Ri. cbn [core map]. unfold vat; simpl nth.
  assert (DinR : In d (map fst Dr)).
  { apply (Permutation_in _ (Permutation_map fst (Permutation_sym PR))).
    rewrite map_fst_shard_dims. apply has_name_In; auto. }
  assert (DinL : In d (map fst Dl))
    by (apply (Permutation_in _ (Permutation_map fst (Permutation_sym PD))); auto).
  assert (Ld : lsize_of (sz c) Dl d = lsize_of (sz c) (ndims (node_at T s)) d)
    by (apply spec_lsize; auto).
  assert (Lr : lsize_of (sz c) Dr d = lsize_of (sz c) Dl d)
    by (symmetry; apply lsize_of_perm; auto).
  assert (Id : (i d < lsize_of (sz c) Dl d)%nat) by (apply lt_lsize; auto).
  assert (Mr : msk (sz c) (ndims (node_at T r)) i = true)
    by (rewrite Er; simpl; rewrite <- (msk_perm _ _ _ i PD); auto).
  pose proof (shard_range c T SZ r d a y rho i SR R Mr) as My.
  rewrite Er, Ey in My; simpl in My. unfold upd_shard in My.
  rewrite (den_in c T y _ _ _ rho _ W Ey My). cbn [core map]. unfold vat; simpl nth.
  (* the reduced dims have the same sizes in the block and in x *)
  assert (CE : map (fun n => (n, lsize_of (sz c) (ndims (node_at T s)) n)) ds =
               map (fun n => (n, lsize_of (sz c) (ndims (node_at T x)) n)) ds).
  { apply map_ext_in. intros n In_. f_equal. unfold lsize_of.
    rewrite (spec_shard T s d a x n SS).
    destruct (Pos.eqb_spec n d) as [->|Nd].
    - exfalso. assert (existsb (Pos.eqb d) ds = true) by (apply existsb_pos_In; auto). congruence.
    - destruct (spec_of _ n); auto. }
  rewrite CE. set (C := map (fun n => (n, lsize_of (sz c) (ndims (node_at T x)) n)) ds).
  assert (NC : ~ In d (map fst C)).
  { unfold C. rewrite map_map. simpl. rewrite map_id. intro I.
    assert (existsb (Pos.eqb d) ds = true) by (apply existsb_pos_In; auto). congruence. }
  rewrite (maxover_agree C (fun j => den c T x rho j) (map fst (ndims (node_at T x)))
             _ (upd i d (rho a * lsize_of (sz c) Dr d + i d))).
  2:{ intros j j' A. apply den_agree; auto. }
  2:{ intros m Im NI. apply restrict_in. apply NX in Im. apply orb_prop in Im as [E|E].
      - exfalso. apply NI. unfold C. rewrite map_map. simpl. rewrite map_id.
        apply existsb_pos_In; auto.
      - apply has_name_In; auto. }
  rewrite maxover_upd_out by auto.
  apply maxover_ext; auto. intros j Hj.
  assert (Jd : j d = i d) by (apply Hj; auto).
  rewrite (shard_read_lt c T W s d a x rho j SS) by (rewrite Jd, <- Ld; auto).
  unfold upd_shard. rewrite Jd, Lr, Ld. auto.
Qed.

(** ** lift-perm-elementwise: [op(..PERMUTE(x_i, d, o)..y_j..) = PERMUTE(op(..x_i..y_j..), d, o)]
    ([op] elementwise; the [y_j] lack [d]; every block number of [o] below its length: the
    rule's "o is an order" without the distinctness, which the lemma does not need) *)
Definition is_perm (T : table) (p : positive) (d : name) (o : list N) (x : positive) : bool :=
  match node_at T p with
  | Node (OPermute d' o') [x'] Dp =>
      Pos.eqb d d' && list_eqb N.eqb o o' && Pos.eqb x x' &&
      dims_eqvb Dp (ndims (node_at T x)) && has_name Dp d
  | _ => false
  end.

Definition plift_arg (T : table) (d : name) (o : list N) (A X : positive) : bool :=
  is_perm T A d o X || (Pos.eqb A X && negb (has_name (ndims (node_at T X)) d)).

Definition chk_lift_perm_ew (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l, node_at T r with
  | Node o As D, Node (OPermute d ord) [y] Dr =>
      match node_at T y with
      | Node o' Xs Dy =>
          if is_ew o && op_eqb o o' && dims_eqvb D Dr && dims_eqvb Dy Dr && has_name Dr d &&
             forallb (fun k => N.ltb k (N.of_nat (length ord))) ord &&
             forallb2 (plift_arg T d ord) As Xs &&
             forallb (fun A => incl_dims (ndims (node_at T A)) D) As &&
             forallb (fun X => incl_names (ndims (node_at T X)) Dy) Xs
          then Some [] else None
      end
  | _, _ => None
  end.

Lemma chk_lift_perm_ew_sound : rule_sound chk_lift_perm_ew.
Proof.
  intros G l r h cl H c M _. destruct M as [W [VC [SZ [F [DO P]]]]].
  unfold chk_lift_perm_ew in H. set (T := gT G) in *.
  destruct (node_at T l) as [o As D] eqn:El.
  destruct (node_at T r) as [or ys Dr] eqn:Er. destruct or; try discriminate.
  destruct ys as [|y [|]]; try discriminate. rename o0 into ord.
  destruct (node_at T y) as [o' Xs Dy] eqn:Ey.
  match type of H with (if ?b then _ else _) = _ => destruct b eqn:B; try discriminate end.
  apply andb_prop in B as [B IX]. apply andb_prop in B as [B IA].
  apply andb_prop in B as [B LA]. apply andb_prop in B as [B OR].
  apply andb_prop in B as [B HD]. apply andb_prop in B as [B DY].
  apply andb_prop in B as [B DE]. apply andb_prop in B as [EW OE].
  apply op_eqb_eq in OE; subst o'. apply has_name_In in HD.
  rewrite forallb_forall in OR, IA, IX.
  destruct (dims_eqvb_perm _ _ DE) as [PD ND]. destruct (dims_eqvb_perm _ _ DY) as [PY NY].
  apply (eqv_by_core c T l r _ _ D _ _ Dr W El Er DE).
  intros rho R i Mi Ri. cbn [core]. unfold vat; simpl nth.
  set (n := length ord) in *. set (L := lsize_of (sz c) Dr d).
  assert (Id : (i d < L)%nat).
  { apply lt_lsize; auto. rewrite <- (msk_perm _ _ _ i PD); auto. }
  pose proof (node_sizes_at _ _ SZ r) as NS. rewrite Er in NS. unfold node_sizes_okb in NS.
  simpl in NS. apply andb_prop in NS as [_ NS]. apply andb_prop in NS as [N0 NM0].
  apply Nat.ltb_lt in N0. apply Nat.eqb_eq in NM0. fold n L in N0, NM0.
  assert (E : L = (n * (L / n))%nat) by (apply Nat.div_exact; lia).
  set (Bk := (L / n)%nat) in *.
  assert (Bp : (0 < Bk)%nat) by (destruct Bk; lia).
  set (q := (i d / Bk)%nat). set (rm := (i d mod Bk)%nat).
  assert (Q : (q < n)%nat) by (apply Nat.div_lt_upper_bound; lia).
  assert (Rm : (rm < Bk)%nat) by (apply Nat.mod_upper_bound; lia).
  set (k := N.to_nat (nth q ord 0%N)).
  assert (K : (k < n)%nat).
  { unfold k. assert (I : In (nth q ord 0%N) ord) by (apply nth_In; lia).
    specialize (OR _ I). apply N.ltb_lt in OR. lia. }
  set (j := upd i d (k * Bk + rm)%nat).
  assert (Mj : msk (sz c) Dy j = true).
  { rewrite (msk_perm _ _ _ j PY). apply msk_iff; [apply (Permutation_NoDup (Permutation_map fst PY)); auto|].
    intros nn sh E'. unfold j, upd. destruct (Pos.eqb_spec nn d) as [->|Nn].
    - assert (Lsh : L = lsz (sz c) (sz c d) sh) by (unfold L, lsize_of; rewrite E'; auto).
      rewrite <- Lsh. nia.
    - apply (msk_spec _ Dr i nn sh); auto. rewrite <- (msk_perm _ _ _ i PD); auto. }
  rewrite (den_in c T y _ _ _ rho _ W Ey Mj).
  rewrite !core_ew by auto. f_equal. rewrite !map_map.
  destruct (forallb2_nth _ _ _ _ _ 1%positive 1%positive LA) as [Len LK].
  apply nth_ext with (d := 0) (d' := 0); [rewrite !map_length; auto|].
  intros p Hp. rewrite map_length in Hp.
  rewrite (nth_indep _ _ (den c T 1%positive rho i)) by (rewrite map_length; auto).
  rewrite (nth_indep (map _ Xs) _ (den c T 1%positive rho (restrict Dy j))) by (rewrite map_length; lia).
  rewrite (map_nth (fun A => den c T A rho i)), (map_nth (fun X => den c T X rho (restrict Dy j))).
  set (A := nth p As 1%positive). set (X := nth p Xs 1%positive).
  assert (XY : forall nn, In nn (map fst (ndims (node_at T X))) -> In nn (map fst Dy)).
  { intros nn I. assert (IXp : In X Xs) by (apply nth_In; lia). specialize (IX X IXp).
    unfold incl_names in IX. rewrite forallb_forall in IX.
    apply in_map_iff in I as [dd [<- I]]. apply has_name_In, IX; auto. }
  specialize (LK p Hp). fold A X in LK. unfold plift_arg in LK.
  apply orb_prop in LK as [PA|[EAX NX]%andb_prop].
  - unfold is_perm in PA. destruct (node_at T A) as [oa xa DA] eqn:EA. destruct oa; try discriminate.
    destruct xa as [|x' [|]]; try discriminate.
    apply andb_prop in PA as [PA HDA]. apply andb_prop in PA as [PA DAX].
    apply andb_prop in PA as [PA XX]. apply andb_prop in PA as [D1 O1].
    apply Pos.eqb_eq in D1, XX. subst d0 x'.
    apply (list_eqb_eq _ _ (fun a b => proj1 (N.eqb_eq a b))) in O1. subst o0.
    apply has_name_In in HDA. destruct (dims_eqvb_perm _ _ DAX) as [PAX NAX].
    assert (IAp : incl_dims DA D = true) by (specialize (IA A (nth_In _ _ Hp)); rewrite EA in IA; auto).
    assert (MA : msk (sz c) DA i = true) by (apply (incl_dims_msk _ _ D); auto).
    rewrite (den_in c T A _ _ _ rho i W EA MA). cbn [core]. unfold vat; simpl nth.
    assert (LAd : lsize_of (sz c) DA d = L).
    { unfold L. rewrite <- (lsize_of_perm _ _ _ _ PD ND). apply lsize_of_incl; auto.
      apply has_name_In; auto. }
    rewrite LAd. fold n Bk. rewrite (restrict_in DA i d HDA). fold q rm k.
    apply den_agree; auto. intros nn In_.
    assert (InY : In nn (map fst Dy)) by auto.
    assert (InA : In nn (map fst DA))
      by (apply (Permutation_in _ (Permutation_map fst (Permutation_sym PAX))); auto).
    rewrite (restrict_in Dy j nn InY). unfold j, upd.
    destruct (Pos.eqb_spec nn d); auto. apply restrict_in; auto.
  - apply Pos.eqb_eq in EAX. fold A in EAX. rewrite EAX. apply Bool.negb_true_iff in NX.
    apply den_agree; auto. intros nn In_.
    rewrite (restrict_in Dy j nn (XY nn In_)). unfold j, upd.
    destruct (Pos.eqb_spec nn d) as [->|]; auto.
    exfalso. apply has_name_In in In_. congruence.
Qed.
