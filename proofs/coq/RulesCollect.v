(** * RulesCollect: collectives by their definitions (docs/rules.md, "collectives").

    allreduce-add, allreduce-rename, allreduce-chunk (a sum or max over ranks is positionwise),
    reduce-scatter-def, broadcast-invariant, allgather-shard, allreduce-shard-comm,
    all-to-all-def, perm-identity, allreduce-mul-factor.
    Checked as written in each checker; where the rule's guard asks that a value does not vary
    over an axis, the checked "varies over" analysis ([RulesAxis.invariant]) is tested when the
    lemma needs it, and the comment says when it does not. *)

From Coq Require Import Reals Lra Lia List QArith ZArith PArith NArith Bool Permutation.
From Coq Require Import FSets.FMapPositive FunctionalExtensionality.
From Shardproof Require Import Base Num Pow Term Props RuleLib Congr Rel Shard RulesBasic RulesLift
  RulesAxis RulesEinsum RulesScalarOut RulesLiftEinsum RulesLiftReindex.
Import ListNotations.
Open Scope R_scope.

Lemma rsum_suml : forall n (xs : list positive) (f : positive -> nat -> R),
  rsum n (fun r => suml (map (fun x => f x r) xs)) = suml (map (fun x => rsum n (f x)) xs).
Proof.
  intros n xs f. induction xs as [|x xs IH]; simpl.
  - apply rsum_zero.
  - rewrite rsum_plus, IH. auto.
Qed.

Lemma suml_map2 : forall (f g : positive -> R) (Pr : positive -> positive -> bool) xs ys,
  forallb2 Pr xs ys = true -> (forall x y, Pr x y = true -> f y = g x) ->
  suml (map f ys) = suml (map g xs).
Proof.
  induction xs as [|x xs IH]; destruct ys as [|y ys]; simpl; intros H E; try discriminate; auto.
  apply andb_prop in H as [H1 H2]. rewrite (E x y H1), (IH ys H2 E). reflexivity.
Qed.

(** the reduction over ranks of a value *)
Definition redv (rd : red) (n : nat) (f : nat -> R) : R :=
  match rd with RSum => rsum n f | RMax => rmaxs n f end.

Lemma redv_ext : forall rd n f g, (forall k, (k < n)%nat -> f k = g k) -> redv rd n f = redv rd n g.
Proof. intros [] n f g H; simpl; [apply rsum_ext|apply rmaxs_ext]; auto. Qed.

Lemma redv_zero : forall rd n, redv rd n (fun _ => 0) = 0.
Proof.
  intros [] n; simpl; [apply rsum_zero|]. destruct n; auto. apply rmaxs_const; lia.
Qed.

Lemma core_allreduce : forall c T a rd xs D vs rho i,
  core c T (OAllReduce a rd) xs D vs rho i = redv rd (sz c a) (fun r => vat vs 0 (upd rho a r) i).
Proof. intros. destruct rd; reflexivity. Qed.

(** ** allreduce-add: [ALL_REDUCE(ADD(xs), a, sum) = ADD(ALL_REDUCE(x, a, sum) for x in xs)] *)
Definition ar_of (T : table) (a : name) (Dr : list dimspec) (x y : positive) : bool :=
  match node_at T y with
  | Node (OAllReduce a' RSum) [x'] Dy =>
      Pos.eqb a a' && Pos.eqb x x' && dims_eqvb Dy (ndims (node_at T x)) && incl_dims Dy Dr
  | _ => false
  end.

Definition chk_allreduce_add (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l, node_at T r with
  | Node (OAllReduce a RSum) [s] Dl, Node OAdd ys Dr =>
      match node_at T s with
      | Node OAdd xs Ds =>
          if dims_eqvb Ds Dl && dims_eqvb Dl Dr && forallb2 (ar_of T a Dr) xs ys
          then Some [] else None
      | _ => None
      end
  | _, _ => None
  end.

Lemma chk_allreduce_add_sound : rule_sound chk_allreduce_add.
Proof.
  intros G l r h cl H c M _. destruct M as [W _].
  unfold chk_allreduce_add in H. set (T := gT G) in *.
  destruct (node_at T l) as [ol ss Dl] eqn:El. destruct ol; try discriminate.
  destruct r0; try discriminate. destruct ss as [|s [|]]; try discriminate.
  destruct (node_at T r) as [or ys Dr] eqn:Er. destruct or; try discriminate.
  destruct (node_at T s) as [os xs Ds] eqn:Es. destruct os; try discriminate.
  match type of H with (if ?b then _ else _) = _ => destruct b eqn:B; try discriminate end.
  apply andb_prop in B as [B F]. apply andb_prop in B as [DS DE].
  destruct (dims_eqvb_perm _ _ DS) as [PS NS]. destruct (dims_eqvb_perm _ _ DE) as [PD ND].
  apply (eqv_by_core c T l r _ _ Dl _ _ Dr W El Er DE).
  intros rho R i Mi Ri. cbn [core map]. unfold vat; simpl nth.
  assert (Ms : msk (sz c) Ds i = true) by (rewrite (msk_perm _ _ _ i PS); auto).
  assert (Rs : restrict Ds i = i) by (rewrite (restrict_perm _ _ i PS); auto).
  assert (Mr : msk (sz c) Dr i = true) by (rewrite <- (msk_perm _ _ _ i PD); auto).
  rewrite (rsum_ext _ _ (fun r0 => suml (map (fun x => den c T x (upd rho a r0) i) xs))).
  2:{ intros r0 _. rewrite (den_in c T s _ _ _ _ i W Es Ms). cbn [core]. rewrite Rs, map_map. auto. }
  rewrite rsum_suml, map_map. symmetry.
  apply (suml_map2 _ _ (ar_of T a Dr) xs ys F).
  intros x y Pr. unfold ar_of in Pr. destruct (node_at T y) as [oy zs Dy] eqn:Ey.
  destruct oy; try discriminate. destruct r0; try discriminate.
  destruct zs as [|x' [|]]; try discriminate.
  apply andb_prop in Pr as [Pr I]. apply andb_prop in Pr as [Pr DY].
  apply andb_prop in Pr as [A X]. apply Pos.eqb_eq in A, X. subst a0 x'.
  assert (My : msk (sz c) Dy i = true) by (apply (incl_dims_msk _ _ Dr); auto).
  rewrite (den_in c T y _ _ _ _ i W Ey My). cbn [core map]. unfold vat; simpl nth.
  destruct (dims_eqvb_perm _ _ DY) as [PY _].
  apply rsum_ext. intros r0 _. rewrite (restrict_perm _ _ i PY). apply den_restrict; auto.
Qed.

(** ** allreduce-rename, allreduce-chunk: [ALL_REDUCE(OP(x), a, r) = OP(ALL_REDUCE(x, a, r))]
    for [OP] a [RENAME] or a [CHUNK] (a re-indexing of its one operand, [RulesScalarOut.ridx]) *)
Definition chk_allreduce_reindex (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l, node_at T r with
  | Node (OAllReduce a rd) [m] Dl, Node o' [y] Dr =>
      match node_at T m, node_at T y with
      | Node o [x] Dm, Node (OAllReduce a' rd') [x'] Dy =>
          if reindex_op o && op_eqb o o' && Pos.eqb a a' && red_eqb rd rd' && Pos.eqb x x' &&
             dims_eqvb Dm Dl && dims_eqvb Dl Dr && dims_eqvb Dy (ndims (node_at T x))
          then Some [] else None
      | _, _ => None
      end
  | _, _ => None
  end.

Lemma chk_allreduce_reindex_sound : rule_sound chk_allreduce_reindex.
Proof.
  intros G l r h cl H c M _. destruct M as [W _].
  unfold chk_allreduce_reindex in H. set (T := gT G) in *.
  destruct (node_at T l) as [ol ms Dl] eqn:El. destruct ol; try discriminate.
  destruct ms as [|m [|]]; try discriminate. rename r0 into rd.
  destruct (node_at T r) as [o' ys Dr] eqn:Er. destruct ys as [|y [|]]; try discriminate.
  destruct (node_at T m) as [o xs Dm] eqn:Em. destruct xs as [|x [|]]; try discriminate.
  destruct (node_at T y) as [oy xs' Dy] eqn:Ey. destruct oy; try discriminate.
  destruct xs' as [|x' [|]]; try discriminate. rename r0 into rd'.
  match type of H with (if ?b then _ else _) = _ => destruct b eqn:B; try discriminate end.
  apply andb_prop in B as [B DY]. apply andb_prop in B as [B DE].
  apply andb_prop in B as [B DM]. apply andb_prop in B as [B X].
  apply andb_prop in B as [B RD]. apply andb_prop in B as [B A].
  apply andb_prop in B as [RO OE]. apply op_eqb_eq in OE. subst o'.
  apply Pos.eqb_eq in A, X. subst a0 x'.
  assert (RD' : rd' = rd) by (destruct rd, rd'; simpl in RD; congruence). subst rd'.
  destruct (dims_eqvb_perm _ _ DM) as [PM NM]. destruct (dims_eqvb_perm _ _ DE) as [PD ND].
  destruct (dims_eqvb_perm _ _ DY) as [PY NY].
  apply (eqv_by_core c T l r _ _ Dl _ _ Dr W El Er DE).
  intros rho R i Mi Ri. rewrite core_allreduce, core_reindex by auto. unfold vat; simpl nth.
  assert (Mm : msk (sz c) Dm i = true) by (rewrite (msk_perm _ _ _ i PM); auto).
  assert (Rm : restrict Dm i = i) by (rewrite (restrict_perm _ _ i PM); auto).
  rewrite (redv_ext _ _ _ (fun r0 => den c T x (upd rho a r0) (ridx (sz c) o Dr i))).
  2:{ intros k _. rewrite (den_in c T m _ _ _ _ i W Em Mm), core_reindex, Rm by auto.
      rewrite (ridx_perm _ _ _ _ i PM NM), (ridx_perm _ _ _ _ i PD ND). auto. }
  set (j := ridx (sz c) o Dr i).
  rewrite (den_node c T y _ _ _ W Ey), core_allreduce. unfold vat; simpl nth.
  rewrite <- (msk_perm _ _ _ j (Permutation_sym PY)).
  destruct (msk (sz c) (ndims (node_at T x)) j) eqn:Mj.
  - apply redv_ext. intros k _. rewrite <- (restrict_perm _ _ j (Permutation_sym PY)).
    symmetry. apply den_restrict; auto.
  - rewrite (redv_ext _ _ _ (fun _ => 0)) by (intros; apply den_msk0; auto). apply redv_zero.
Qed.

(** ** reduce-scatter-def: [REDUCE_SCATTER(x, a, d) = SHARD(ALL_REDUCE(x, a, sum), d, a)] *)
Definition chk_reduce_scatter_def (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l, node_at T r with
  | Node (OReduceScatter a d) [x] Dl, Node (OShard d' a') [y] Dr =>
      match node_at T y with
      | Node (OAllReduce a'' RSum) [x'] Dy =>
          if Pos.eqb d d' && Pos.eqb a a' && Pos.eqb a a'' && Pos.eqb x x' &&
             is_shard T r d a y && dims_eqvb Dl Dr && incl_names (ndims (node_at T x)) Dy
          then Some [] else None
      | _ => None
      end
  | _, _ => None
  end.

Lemma chk_reduce_scatter_def_sound : rule_sound chk_reduce_scatter_def.
Proof.
  intros G l r h cl H c M _. destruct M as [W [VC [SZ [F [DO P]]]]].
  unfold chk_reduce_scatter_def in H. set (T := gT G) in *.
  destruct (node_at T l) as [ol xs Dl] eqn:El. destruct ol; try discriminate.
  destruct xs as [|x [|]]; try discriminate.
  destruct (node_at T r) as [or ys Dr] eqn:Er. destruct or; try discriminate.
  destruct ys as [|y [|]]; try discriminate.
  destruct (node_at T y) as [oy xs' Dy] eqn:Ey. destruct oy; try discriminate.
  destruct r0; try discriminate. destruct xs' as [|x' [|]]; try discriminate.
  match type of H with (if ?b then _ else _) = _ => destruct b eqn:B; try discriminate end.
  apply andb_prop in B as [B IN]. apply andb_prop in B as [B DE].
  apply andb_prop in B as [B SR]. beq_to_eq.
  destruct (dims_eqvb_perm _ _ DE) as [PD ND].
  apply (eqv_by_core c T l r _ _ Dl _ _ Dr W El Er DE).
  intros rho R i Mi Ri. cbn [core map]. unfold vat; simpl nth.
  assert (Mr : msk (sz c) (ndims (node_at T r)) i = true)
    by (rewrite Er; simpl; rewrite <- (msk_perm _ _ _ i PD); auto).
  pose proof (shard_range c T SZ r d0 a0 y rho i SR R Mr) as My.
  rewrite Er, Ey in My; simpl in My. unfold upd_shard in My.
  rewrite (den_in c T y _ _ _ rho _ W Ey My). cbn [core map]. unfold vat; simpl nth.
  rewrite (lsize_of_perm _ _ _ _ PD ND).
  apply rsum_ext. intros k _. apply den_agree; auto. intros n In_.
  symmetry. apply restrict_in. unfold incl_names in IN. rewrite forallb_forall in IN.
  apply in_map_iff in In_ as [dd [<- I]]. apply has_name_In, IN; auto.
Qed.

(** ** broadcast-invariant: [BROADCAST(x, a, src) = x], [x] does not vary over [a] *)
Definition chk_broadcast_invariant (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l with
  | Node (OBroadcast a _) [x] D =>
      if Pos.eqb x r && dims_eqvb (ndims (node_at T r)) D && invariant G x a then Some [] else None
  | _ => None
  end.

Lemma chk_broadcast_invariant_sound : rule_sound chk_broadcast_invariant.
Proof.
  intros G l r h cl H c M _. pose proof M as M0. destruct M as [W _].
  unfold chk_broadcast_invariant in H. destruct (node_at (gT G) l) as [o xs D] eqn:El.
  destruct o; try discriminate. destruct xs as [|x [|]]; try discriminate.
  match type of H with (if ?b then _ else _) = _ => destruct b eqn:B; try discriminate end.
  apply andb_prop in B as [B I]. apply andb_prop in B as [B DE]. apply Pos.eqb_eq in B; subst x.
  apply (eqv_through c _ l r _ D W El DE). intros rho R j _. simpl. unfold vat; simpl.
  rewrite (invariant_ok G c r a M0 I); auto.
Qed.

(** ** allgather-shard: [ALL_GATHER(SHARD(x, d, a), a, d) = x], [x] does not vary over [a] *)
Definition chk_allgather_shard (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l with
  | Node (OAllGather a d) [s] Dl =>
      if is_shard T s d a r && dims_eqvb (ndims (node_at T r)) Dl && invariant G r a
      then Some [] else None
  | _ => None
  end.

Lemma chk_allgather_shard_sound : rule_sound chk_allgather_shard.
Proof.
  intros G l r h cl H c M _. pose proof M as M0. destruct M as [W [VC [SZ [F [DO P]]]]].
  unfold chk_allgather_shard in H. set (T := gT G) in *.
  destruct (node_at T l) as [ol ss Dl] eqn:El. destruct ol; try discriminate.
  destruct ss as [|s [|]]; try discriminate.
  match type of H with (if ?b then _ else _) = _ => destruct b eqn:B; try discriminate end.
  apply andb_prop in B as [B I]. apply andb_prop in B as [SS DE].
  destruct (dims_eqvb_perm _ _ DE) as [PD ND].
  intros rho R i. rewrite (den_node c T l _ _ _ W El).
  rewrite <- (msk_perm _ _ _ i PD). destruct (msk (sz c) (ndims (node_at T r)) i) eqn:Mi.
  2:{ rewrite den_msk0; auto. }
  cbn [core map]. unfold vat; simpl nth.
  rewrite <- (restrict_perm _ _ i PD).
  set (j := restrict (ndims (node_at T r)) i).
  assert (Mj : msk (sz c) (ndims (node_at T r)) j = true) by (unfold j; rewrite msk_restrict; auto).
  (* the spec of d in the gather's dims is x's; the block's is that with a appended *)
  destruct (is_shard_info T s d a r SS) as [_ [HX [PS [NS NX]]]].
  apply has_name_In in HX. pose proof HX as HX'. apply In_spec_of in HX'.
  destruct (spec_of (ndims (node_at T r)) d) as [sh|] eqn:Sx; [|congruence].
  assert (Sl : spec_of Dl d = Some sh) by (rewrite <- (spec_of_perm _ _ PD NX); auto).
  rewrite Sl.
  assert (Ls : lsize_of (sz c) (ndims (node_at T s)) d = lsz (sz c) (sz c d) (sh ++ [SAx a])).
  { unfold lsize_of. rewrite (spec_shard T s d a r d SS), Sx, Pos.eqb_refl. auto. }
  set (L := lsz (sz c) (sz c d) (sh ++ [SAx a])) in *.
  assert (Dv : spec_divb (sz c) (sz c d) (sh ++ [SAx a]) = true).
  { pose proof (node_sizes_at _ _ SZ l) as NS'. rewrite El in NS'. unfold node_sizes_okb in NS'.
    simpl in NS'. apply andb_prop in NS' as [_ NS']. rewrite Sl in NS'. auto. }
  assert (Jd : (j d < lsz (sz c) (sz c d) sh)%nat) by (eapply msk_spec; eauto).
  pose proof (gather_rank_ok _ _ _ _ _ Dv Jd) as Rk.
  assert (Lpos : (0 < L)%nat).
  { destruct L eqn:E; [|lia]. exfalso. apply spec_divb_app1 in Dv as [K0 K1]. simpl in K0, K1.
    unfold L in E. rewrite lsz_app1 in E. simpl in E. apply Nat.div_small_iff in E; [|lia].
    pose proof (Nat.mod_small _ _ E). lia. }
  rewrite (shard_read_lt c T W s d a r _ _ SS)
    by (rewrite upd_same, Ls; apply Nat.mod_upper_bound; lia).
  unfold upd_shard. rewrite Ls, upd_upd_same, !upd_same.
  rewrite (invariant_ok G c r a M0 I).
  rewrite (Nat.mul_comm (j d / L)), <- Nat.div_mod by lia. rewrite upd_id.
  apply den_restrict; auto.
Qed.

(** ** allreduce-shard-comm: [ALL_REDUCE(SHARD(x, d, b), a, r) = SHARD(ALL_REDUCE(x, a, r), d, b)],
    [b <> a] (the rule's guard also asks that no dim of [x] is sharded over [a]; the lemma does
    not need it, so Coq does not test it) *)
Definition chk_allreduce_shard_comm (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l, node_at T r with
  | Node (OAllReduce a rd) [s] Dl, Node (OShard d b) [y] Dr =>
      match node_at T s, node_at T y with
      | Node (OShard d' b') [x] Ds, Node (OAllReduce a' rd') [x'] Dy =>
          if Pos.eqb d d' && Pos.eqb b b' && Pos.eqb a a' && red_eqb rd rd' && Pos.eqb x x' &&
             negb (Pos.eqb a b) && is_shard T s d b x && is_shard T r d b y &&
             dims_eqvb Ds Dl && dims_eqvb Dl Dr && dims_eqvb Dy (ndims (node_at T x))
          then Some [] else None
      | _, _ => None
      end
  | _, _ => None
  end.

Lemma chk_allreduce_shard_comm_sound : rule_sound chk_allreduce_shard_comm.
Proof.
  intros G l r h cl H c M _. destruct M as [W [VC [SZ [F [DO P]]]]].
  unfold chk_allreduce_shard_comm in H. set (T := gT G) in *.
  destruct (node_at T l) as [ol ss Dl] eqn:El. destruct ol; try discriminate.
  destruct ss as [|s [|]]; try discriminate. rename r0 into rd.
  destruct (node_at T r) as [or ys Dr] eqn:Er. destruct or; try discriminate.
  destruct ys as [|y [|]]; try discriminate.
  destruct (node_at T s) as [os xs Ds] eqn:Es. destruct os; try discriminate.
  destruct xs as [|x [|]]; try discriminate.
  destruct (node_at T y) as [oy xs' Dy] eqn:Ey. destruct oy; try discriminate.
  destruct xs' as [|x' [|]]; try discriminate. rename r0 into rd'.
  match type of H with (if ?b then _ else _) = _ => destruct b eqn:B; try discriminate end.
  apply andb_prop in B as [B DY]. apply andb_prop in B as [B DE].
  apply andb_prop in B as [B DS]. apply andb_prop in B as [B SR].
  apply andb_prop in B as [B SS]. apply andb_prop in B as [B NE].
  apply andb_prop in B as [B X]. apply andb_prop in B as [B RD].
  apply andb_prop in B as [B A]. apply andb_prop in B as [Dd Bb].
  apply Pos.eqb_eq in Dd, Bb, A, X. subst d0 a1 a2 x'. rename a0 into b.
  assert (RD' : rd' = rd) by (destruct rd, rd'; simpl in RD; congruence). subst rd'.
  apply Bool.negb_true_iff, Pos.eqb_neq in NE.
  destruct (dims_eqvb_perm _ _ DS) as [PS NS]. destruct (dims_eqvb_perm _ _ DE) as [PD ND].
  destruct (dims_eqvb_perm _ _ DY) as [PY NY].
  apply (eqv_by_core c T l r _ _ Dl _ _ Dr W El Er DE).
  intros rho R i Mi Ri. rewrite core_allreduce. cbn [core map]. unfold vat; simpl nth.
  assert (Ms : msk (sz c) (ndims (node_at T s)) i = true)
    by (rewrite Es; simpl; rewrite (msk_perm _ _ _ i PS); auto).
  assert (Mr : msk (sz c) (ndims (node_at T r)) i = true)
    by (rewrite Er; simpl; rewrite <- (msk_perm _ _ _ i PD); auto).
  rewrite (redv_ext _ _ _ (fun k => den c T x (upd rho a k)
             (upd i d (rho b * lsize_of (sz c) Dr d + i d)))).
  2:{ intros k _. rewrite (shard_read c T W s d b x _ i SS Ms). unfold upd_shard.
      rewrite upd_other by congruence. rewrite Es. simpl ndims.
      rewrite (lsize_of_perm _ _ _ _ PS NS), (lsize_of_perm _ _ _ _ PD ND). auto. }
  pose proof (shard_range c T SZ r d b y rho i SR R Mr) as My.
  rewrite Er, Ey in My; simpl in My. unfold upd_shard in My.
  rewrite (den_in c T y _ _ _ rho _ W Ey My), core_allreduce. unfold vat; simpl nth.
  apply redv_ext. intros k _. rewrite <- (restrict_perm _ _ _ (Permutation_sym PY)).
  symmetry. apply den_restrict; auto.
Qed.

(** ** all-to-all-def: [ALL_TO_ALL(x, a, s, c) = SHARD(ALL_GATHER(x, a, c), s, a)], [s <> c] *)
Definition chk_all_to_all_def (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l, node_at T r with
  | Node (OAllToAll a sd cd) [x] Dl, Node (OShard sd' a') [y] Dr =>
      match node_at T y with
      | Node (OAllGather a'' cd') [x'] Dy =>
          if Pos.eqb sd sd' && Pos.eqb a a' && Pos.eqb a a'' && Pos.eqb cd cd' && Pos.eqb x x' &&
             negb (Pos.eqb sd cd) && is_shard T r sd a y && dims_eqvb Dl Dr &&
             spec_opt_eqb (spec_of Dl cd) (spec_of Dy cd) && has_name Dy cd &&
             incl_names (ndims (node_at T x)) Dy
          then Some [] else None
      | _ => None
      end
  | _, _ => None
  end.

Lemma chk_all_to_all_def_sound : rule_sound chk_all_to_all_def.
Proof.
  intros G l r h cl H c M _. destruct M as [W [VC [SZ [F [DO P]]]]].
  unfold chk_all_to_all_def in H. set (T := gT G) in *.
  destruct (node_at T l) as [ol xs Dl] eqn:El. destruct ol; try discriminate.
  destruct xs as [|x [|]]; try discriminate. rename s into sd, c0 into cd.
  destruct (node_at T r) as [or ys Dr] eqn:Er. destruct or; try discriminate.
  destruct ys as [|y [|]]; try discriminate.
  destruct (node_at T y) as [oy xs' Dy] eqn:Ey. destruct oy; try discriminate.
  destruct xs' as [|x' [|]]; try discriminate.
  match type of H with (if ?b then _ else _) = _ => destruct b eqn:B; try discriminate end.
  apply andb_prop in B as [B IN]. apply andb_prop in B as [B HC].
  apply andb_prop in B as [B SPc]. apply andb_prop in B as [B DE].
  apply andb_prop in B as [B SR]. apply andb_prop in B as [B NE].
  apply andb_prop in B as [B X]. apply andb_prop in B as [B Cd].
  apply andb_prop in B as [B A2]. apply andb_prop in B as [Sd A1].
  apply Pos.eqb_eq in Sd, A1, A2, Cd, X. subst d a0 a1 d0 x'.
  apply Bool.negb_true_iff, Pos.eqb_neq in NE. apply spec_opt_eqb_eq in SPc.
  apply has_name_In in HC.
  destruct (dims_eqvb_perm _ _ DE) as [PD ND].
  apply (eqv_by_core c T l r _ _ Dl _ _ Dr W El Er DE).
  intros rho R i Mi Ri. cbn [core map]. unfold vat; simpl nth.
  assert (Mr : msk (sz c) (ndims (node_at T r)) i = true)
    by (rewrite Er; simpl; rewrite <- (msk_perm _ _ _ i PD); auto).
  pose proof (shard_range c T SZ r sd a y rho i SR R Mr) as My.
  rewrite Er, Ey in My; simpl in My. unfold upd_shard in My.
  rewrite (den_in c T y _ _ _ rho _ W Ey My). cbn [core map]. unfold vat; simpl nth.
  rewrite (lsize_of_perm _ _ _ _ PD ND), SPc.
  assert (JC : restrict Dy (upd i sd (rho a * lsize_of (sz c) Dr sd + i sd)) cd = i cd).
  { rewrite restrict_in by auto. rewrite upd_other by congruence. auto. }
  rewrite JC. apply den_agree; auto. intros n In_.
  assert (InY : In n (map fst Dy)).
  { unfold incl_names in IN. rewrite forallb_forall in IN.
    apply in_map_iff in In_ as [dd [<- I]]. apply has_name_In, IN; auto. }
  destruct (Pos.eqb_spec n cd) as [->|Nc]; [upd_simpl; auto|].
  destruct (Pos.eqb_spec n sd) as [->|Ns]; upd_simpl; auto.
Qed.

(** ** perm-identity: [PERMUTE(x, d, (0, 1, ..., n-1)) = x] *)
Definition chk_perm_identity (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l with
  | Node (OPermute d o) [x] Dl =>
      if Pos.eqb x r && dims_eqvb (ndims (node_at T r)) Dl && has_name Dl d &&
         list_eqb N.eqb o (map N.of_nat (seq 0 (length o)))
      then Some [] else None
  | _ => None
  end.

Lemma chk_perm_identity_sound : rule_sound chk_perm_identity.
Proof.
  intros G l r h cl H c M _. destruct M as [W [VC [SZ [F [DO P]]]]].
  unfold chk_perm_identity in H. set (T := gT G) in *.
  destruct (node_at T l) as [ol xs Dl] eqn:El. destruct ol; try discriminate.
  destruct xs as [|x [|]]; try discriminate.
  match type of H with (if ?b then _ else _) = _ => destruct b eqn:B; try discriminate end.
  apply andb_prop in B as [B OI]. apply andb_prop in B as [B HD].
  apply andb_prop in B as [X DE]. apply Pos.eqb_eq in X; subst x.
  apply (list_eqb_eq _ _ (fun a b => proj1 (N.eqb_eq a b))) in OI.
  apply has_name_In in HD.
  apply (eqv_through c _ l r _ Dl W El DE). intros rho R j Mj. cbn [core]. unfold vat; simpl nth.
  set (J := restrict Dl j). set (n := length o) in *. set (Ld := lsize_of (sz c) Dl d).
  assert (Jd : (J d < Ld)%nat) by (apply lt_lsize; auto; unfold J; rewrite msk_restrict; auto).
  pose proof (node_sizes_at _ _ SZ l) as NS. rewrite El in NS. unfold node_sizes_okb in NS.
  simpl in NS. apply andb_prop in NS as [_ NS]. apply andb_prop in NS as [N0 NM].
  apply Nat.ltb_lt in N0. apply Nat.eqb_eq in NM. fold n Ld in N0, NM.
  assert (E : Ld = (n * (Ld / n))%nat) by (apply Nat.div_exact; lia).
  set (Bk := (Ld / n)%nat) in *.
  assert (Bp : (0 < Bk)%nat) by (destruct Bk; lia).
  assert (Q : (J d / Bk < n)%nat) by (apply Nat.div_lt_upper_bound; lia).
  rewrite OI at 1. rewrite (nth_indep _ _ (N.of_nat 0)) by (rewrite map_length, seq_length; auto).
  rewrite map_nth, seq_nth by auto. simpl. rewrite Nat2N.id.
  rewrite (Nat.mul_comm (J d / Bk)), <- Nat.div_mod by lia. rewrite upd_id. auto.
Qed.

(** ** allreduce-mul-factor: [ALL_REDUCE(MUL(xs), a, sum) = MUL(fixed..., ALL_REDUCE(inner, a, sum))]:
    [fixed] the factors that do not vary over [a] (the checked analysis), [vary] the others (both
    non-empty, in order), [inner] the one varying factor or [MUL(vary...)] *)
Definition inner_ok (T : table) (vary : list positive) (z : positive) (De : list dimspec) : bool :=
  match vary with
  | [v] => Pos.eqb z v
  | _ => match node_at T z with
         | Node OMul vs Dz => list_eqb Pos.eqb vs vary && dims_eqvb Dz De
         | _ => false
         end
  end.

Definition chk_allreduce_mul_factor (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l, node_at T r with
  | Node (OAllReduce a RSum) [m] Dl, Node OMul ys Dr =>
      match node_at T m, last_split ys with
      | Node OMul xs Dm, Some (fs, e) =>
          match node_at T e with
          | Node (OAllReduce a' RSum) [z] De =>
              let vary := filter (fun x => negb (invariant G x a)) xs in
              if Pos.eqb a a' && list_eqb Pos.eqb fs (filter (fun x => invariant G x a) xs) &&
                 negb (Nat.eqb (length fs) 0) && negb (Nat.eqb (length vary) 0) &&
                 inner_ok T vary z De && dims_eqvb Dm Dl && dims_eqvb Dl Dr && incl_dims De Dr &&
                 forallb (fun x => incl_names (ndims (node_at T x)) De) vary
              then Some [] else None
          | _ => None
          end
      | _, _ => None
      end
  | _, _ => None
  end.

Lemma chk_allreduce_mul_factor_sound : rule_sound chk_allreduce_mul_factor.
Proof.
  intros G l r h cl H c M _. pose proof M as M0. destruct M as [W _].
  unfold chk_allreduce_mul_factor in H. set (T := gT G) in *.
  destruct (node_at T l) as [ol ms Dl] eqn:El. destruct ol; try discriminate.
  destruct r0; try discriminate. destruct ms as [|m [|]]; try discriminate.
  destruct (node_at T r) as [or ys Dr] eqn:Er. destruct or; try discriminate.
  destruct (node_at T m) as [om xs Dm] eqn:Em. destruct om; try discriminate.
  destruct (last_split ys) as [[fs e]|] eqn:LS; try discriminate.
  apply last_split_ok in LS; subst ys.
  destruct (node_at T e) as [oe zs De] eqn:Ee. destruct oe; try discriminate.
  destruct r0; try discriminate. destruct zs as [|z [|]]; try discriminate.
  set (p := fun x => invariant G x a) in *.
  remember (filter (fun x => negb (p x)) xs) as vary eqn:EVary.
  match type of H with (if ?b then _ else _) = _ => destruct b eqn:B; try discriminate end.
  apply andb_prop in B as [B VN]. apply andb_prop in B as [B ID].
  apply andb_prop in B as [B DE]. apply andb_prop in B as [B DM].
  apply andb_prop in B as [B IO]. apply andb_prop in B as [B LV].
  apply andb_prop in B as [B _]. apply andb_prop in B as [A FS].
  apply Pos.eqb_eq in A; subst a0.
  apply (list_eqb_eq _ _ (fun a b => proj1 (Pos.eqb_eq a b))) in FS; subst fs.
  rewrite forallb_forall in VN.
  destruct (dims_eqvb_perm _ _ DM) as [PM NM]. destruct (dims_eqvb_perm _ _ DE) as [PD ND].
  apply (eqv_by_core c T l r _ _ Dl _ _ Dr W El Er DE).
  intros rho R i Mi Ri. cbn [core map]. unfold vat; simpl nth.
  assert (Mm : msk (sz c) Dm i = true) by (rewrite (msk_perm _ _ _ i PM); auto).
  assert (Rm : restrict Dm i = i) by (rewrite (restrict_perm _ _ i PM); auto).
  assert (Mr : msk (sz c) Dr i = true) by (rewrite <- (msk_perm _ _ _ i PD); auto).
  assert (Me : msk (sz c) De i = true) by (apply (incl_dims_msk _ _ Dr); auto).
  assert (FX : forall x, In x (filter p xs) -> forall k, den c T x (upd rho a k) = den c T x rho).
  { intros x Ix k. apply filter_In in Ix as [_ Px]. apply (invariant_ok G c x a M0 Px). }
  rewrite (rsum_ext _ _ (fun k => prodl (map (fun x => den c T x rho i) (filter p xs)) *
                                 prodl (map (fun x => den c T x (upd rho a k) i) vary))).
  2:{ intros k _. rewrite (den_in c T m _ _ _ _ i W Em Mm). cbn [core]. rewrite Rm, map_map.
      rewrite (prodl_filter _ p), EVary. f_equal. f_equal. apply map_ext_in. intros x Ix.
      rewrite FX; auto. }
  rewrite rsum_scal_l, !map_map, map_app, prodl_app'. cbn [map].
  rewrite prodl_cons, prodl_nil, Rmult_1_r. f_equal.
  rewrite (den_in c T e _ _ _ rho i W Ee Me). cbn [core map]. unfold vat; simpl nth.
  apply rsum_ext. intros k _.
  assert (VR : forall x, In x vary -> den c T x (upd rho a k) (restrict De i) = den c T x (upd rho a k) i).
  { intros x Ix. apply den_agree; auto. intros n In_. apply restrict_in.
    assert (Ix' : In x (filter (fun x => negb (invariant G x a)) xs)) by (rewrite EVary in Ix; exact Ix).
    specialize (VN x Ix'). unfold incl_names in VN. rewrite forallb_forall in VN.
    apply in_map_iff in In_ as [dd [<- I]]. apply has_name_In, VN; auto. }
  change (filter (fun x => negb (invariant G x a)) xs) with (filter (fun x => negb (p x)) xs)
    in IO, LV.
  rewrite <- EVary in IO, LV.
  unfold inner_ok in IO. destruct vary as [|v [|v' vs]] eqn:EV.
  - simpl in LV. discriminate.
  - apply Pos.eqb_eq in IO; subst z. simpl. rewrite Rmult_1_r. symmetry. apply VR. simpl; auto.
  - destruct (node_at T z) as [oz zs Dz] eqn:Ez. destruct oz; try discriminate.
    apply andb_prop in IO as [ZS DZ]. apply (list_eqb_eq _ _ (fun a b => proj1 (Pos.eqb_eq a b))) in ZS.
    subst zs. destruct (dims_eqvb_perm _ _ DZ) as [PZ NZ].
    rewrite (den_node c T z _ _ _ W Ez), (msk_perm _ _ _ _ PZ), msk_restrict, Me.
    rewrite (restrict_perm _ _ _ PZ), restrict_restrict. cbn [core]. rewrite map_map.
    f_equal. apply map_ext_in. intros x Ix. symmetry. apply VR. auto.
Qed.
