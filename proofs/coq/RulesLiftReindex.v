(** * RulesLiftReindex: [SHARD] moves out through a re-indexing of another dim (docs/rules.md,
    "lifting").

    lift-shard-chunk: [CHUNK(SHARD(x, d, a), c, p, k) = SHARD(CHUNK(x, c, p, k), d, a)], [c <> d];
    lift-shard-rename: [RENAME(SHARD(x, d, a), o, n) = SHARD(RENAME(x, o, n), d', a)] with
    [d' = n] when [d = o], else [d' = d].

    Checked beside the shapes of the two sides: the chunk's dim keeps its spec in both chunks
    and [d] its spec in the block (so the offsets agree); the renamed name [n] is not a dim of
    [x], and every dim of [x] but [o] is one of the inner node's. The block sizes of [o] before
    and of [n] after a rename are equal by the table's size facts ([sizes_ok]). The rules'
    guard also asks that [x] does not vary over [a]; the lemmas do not need it (a block is read
    on the same rank on both sides), so Coq does not test it. *)

From Coq Require Import Reals Lra Lia List QArith ZArith PArith NArith Bool Permutation.
From Coq Require Import FSets.FMapPositive FunctionalExtensionality.
From Shardproof Require Import Base Num Pow Term Props RuleLib Congr Rel Shard RulesBasic RulesLift
  RulesEinsum RulesScalarOut RulesLiftEinsum.
Import ListNotations.
Open Scope R_scope.

(** Evaluate [upd] at names known equal or different, and [restrict] at names of its dims. *)
Ltac upd_simpl :=
  unfold upd; cbv beta;
  repeat (rewrite ?Pos.eqb_refl;
          match goal with
          | H : ?a <> ?b |- context [Pos.eqb ?a ?b] => rewrite (proj2 (Pos.eqb_neq a b) H)
          | H : ?b <> ?a |- context [Pos.eqb ?a ?b] =>
              rewrite (proj2 (Pos.eqb_neq a b) (not_eq_sym H))
          | H : In ?n (map fst ?D) |- context [restrict ?D ?J ?n] =>
              rewrite (restrict_in D J n H); cbv beta
          end);
  rewrite ?Pos.eqb_refl.

(** An index in range is below the local size of each of its dims. *)
Lemma lt_lsize : forall s D x n, msk s D x = true -> In n (map fst D) -> (x n < lsize_of s D n)%nat.
Proof.
  intros s D x n M I. apply In_spec_of in I.
  destruct (spec_of D n) as [sh|] eqn:E; [|congruence].
  unfold lsize_of. rewrite E. eapply msk_spec; eauto.
Qed.

Lemma spec_lsize : forall s D1 D2 n, spec_of D1 n = spec_of D2 n -> lsize_of s D1 n = lsize_of s D2 n.
Proof. intros. unfold lsize_of. rewrite H; auto. Qed.

(** A rename keeps the local size of its dim ([sizes_ok]). *)
Lemma rename_size : forall s T l old new x D, sizes_ok s T ->
  node_at T l = Node (ORename old new) [x] D ->
  lsize_of s (ndims (node_at T x)) old = lsize_of s D new.
Proof.
  intros s T l old new x D SZ E. pose proof (node_sizes_at s T SZ l) as NS.
  rewrite E in NS. unfold node_sizes_okb in NS. simpl in NS.
  apply andb_prop in NS as [_ NS]. apply Nat.eqb_eq; auto.
Qed.

Lemma names_In_dims : forall T s d a x n, is_shard T s d a x = true ->
  In n (map fst (ndims (node_at T x))) -> In n (map fst (ndims (node_at T s))).
Proof. intros. apply (names_shard T s d a x n H); auto. Qed.

(** ** lift-shard-chunk *)
Definition chk_lift_chunk (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l, node_at T r with
  | Node (OChunk cd p k) [s] Dl, Node (OShard d a) [y] Dr =>
      match node_at T y with
      | Node (OChunk cd' p' k') [x] Dy =>
          if negb (Pos.eqb cd d) && op_eqb (OChunk cd p k) (OChunk cd' p' k') &&
             is_shard T s d a x && is_shard T r d a y && dims_eqvb Dl Dr &&
             spec_opt_eqb (spec_of Dl cd) (spec_of Dy cd) &&
             spec_opt_eqb (spec_of Dl d) (spec_of (ndims (node_at T s)) d) &&
             incl_names (ndims (node_at T x)) Dy
          then Some [] else None
      | _ => None
      end
  | _, _ => None
  end.

Lemma chk_lift_chunk_sound : rule_sound chk_lift_chunk.
Proof.
  intros G l r h cl H c M _. destruct M as [W [VC [SZ [F [DO P]]]]].
  unfold chk_lift_chunk in H. set (T := gT G) in *.
  destruct (node_at T l) as [ol ss Dl] eqn:El. destruct ol; try discriminate.
  destruct ss as [|s [|]]; try discriminate.
  destruct (node_at T r) as [or ys Dr] eqn:Er. destruct or; try discriminate.
  destruct ys as [|y [|]]; try discriminate.
  destruct (node_at T y) as [oy xs Dy] eqn:Ey. destruct oy; try discriminate.
  destruct xs as [|x [|]]; try discriminate.
  rename d into cd, d0 into d, i into k.
  match type of H with (if ?b then _ else _) = _ => destruct b eqn:B; try discriminate end.
  apply andb_prop in B as [B IN]. apply andb_prop in B as [B SPd].
  apply andb_prop in B as [B SPc]. apply andb_prop in B as [B DE].
  apply andb_prop in B as [B SR]. apply andb_prop in B as [B SS].
  apply andb_prop in B as [NE OE].
  apply op_eqb_eq in OE. injection OE as <- <- <-.
  apply Bool.negb_true_iff, Pos.eqb_neq in NE.
  apply spec_opt_eqb_eq in SPd, SPc.
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
  assert (Lc : lsize_of (sz c) Dl cd = lsize_of (sz c) Dy cd) by (apply spec_lsize; auto).
  assert (Id : (i d < lsize_of (sz c) Dl d)%nat) by (apply lt_lsize; auto).
  rewrite (shard_read_lt c T W s d a x rho _ SS)
    by (rewrite upd_other by congruence; rewrite <- Ld; auto).
  assert (Mr : msk (sz c) (ndims (node_at T r)) i = true)
    by (rewrite Er; simpl; rewrite <- (msk_perm _ _ _ i PD); auto).
  pose proof (shard_range c T SZ r d a y rho i SR R Mr) as My.
  rewrite Er, Ey in My; simpl in My. unfold upd_shard in My.
  rewrite (den_in c T y _ _ _ rho _ W Ey My). cbn [core map]. unfold vat; simpl nth.
  unfold upd_shard.
  apply den_agree; auto. intros n In_.
  assert (InY : In n (map fst Dy)).
  { unfold incl_names in IN. rewrite forallb_forall in IN.
    apply in_map_iff in In_ as [dd [<- I]]. apply has_name_In, IN; auto. }
  destruct (Pos.eqb_spec n cd) as [->|Nc]; [|destruct (Pos.eqb_spec n d) as [->|Nd]].
  - upd_simpl. rewrite Lc. auto.
  - upd_simpl. rewrite Lr, Ld. auto.
  - upd_simpl. auto.
Qed.

(** ** lift-shard-rename *)
Definition chk_lift_rename (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l, node_at T r with
  | Node (ORename old new) [s] Dl, Node (OShard d' a) [y] Dr =>
      match node_at T s, node_at T y with
      | Node (OShard d a') [x] _, Node (ORename old' new') [x'] Dy =>
          if Pos.eqb old old' && Pos.eqb new new' && Pos.eqb x x' && Pos.eqb a a' &&
             is_shard T s d a x && is_shard T r d' a y && dims_eqvb Dl Dr &&
             has_name Dy new && negb (has_name (ndims (node_at T x)) new) &&
             forallb (fun n => Pos.eqb n old || has_name Dy n) (map fst (ndims (node_at T x))) &&
             (if Pos.eqb d old then Pos.eqb d' new
              else Pos.eqb d' d && spec_opt_eqb (spec_of Dl d) (spec_of (ndims (node_at T s)) d))
          then Some [] else None
      | _, _ => None
      end
  | _, _ => None
  end.

Lemma chk_lift_rename_sound : rule_sound chk_lift_rename.
Proof.
  intros G l r h cl H c M _. destruct M as [W [VC [SZ [F [DO P]]]]].
  unfold chk_lift_rename in H. set (T := gT G) in *.
  destruct (node_at T l) as [ol ss Dl] eqn:El. destruct ol; try discriminate.
  destruct ss as [|s [|]]; try discriminate.
  destruct (node_at T r) as [or ys Dr] eqn:Er. destruct or; try discriminate.
  destruct ys as [|y [|]]; try discriminate.
  destruct (node_at T s) as [os xs Ds] eqn:Es. destruct os; try discriminate.
  destruct xs as [|x [|]]; try discriminate.
  destruct (node_at T y) as [oy xs' Dy] eqn:Ey. destruct oy; try discriminate.
  destruct xs' as [|x' [|]]; try discriminate.
  rename d into d', a into a0, d0 into d, a0 into a'.
  match type of H with (if ?b then _ else _) = _ => destruct b eqn:B; try discriminate end.
  apply andb_prop in B as [B CASE]. apply andb_prop in B as [B NAMES].
  apply andb_prop in B as [B NX]. apply andb_prop in B as [B NY].
  apply andb_prop in B as [B DE]. apply andb_prop in B as [B SR].
  apply andb_prop in B as [B SS]. beq_to_eq.
  rename old0 into old, new0 into new, x' into x.
  apply Bool.negb_true_iff in NX.
  assert (NXn : ~ In new (map fst (ndims (node_at T x)))) by (rewrite <- has_name_In; congruence).
  apply has_name_In in NY.
  assert (XN : forall n, In n (map fst (ndims (node_at T x))) -> n = old \/ In n (map fst Dy)).
  { intros n I. rewrite forallb_forall in NAMES. apply NAMES in I.
    apply orb_prop in I as [E|E]; [left; apply Pos.eqb_eq; auto|right; apply has_name_In; auto]. }
  destruct (dims_eqvb_perm _ _ DE) as [PD ND].
  destruct (is_shard_info T r d' a' y SR) as [_ [Hyd [PR [NDr NDy]]]].
  rewrite Er in PR, NDr; simpl in PR, NDr. rewrite Ey in PR, Hyd, NDy; simpl in PR, Hyd, NDy.
  destruct (is_shard_info T s d a' x SS) as [_ [Hxd _]].
  apply has_name_In in Hxd.
  apply (eqv_by_core c T l r _ _ Dl _ _ Dr W El Er DE).
  intros rho R i Mi Ri. cbn [core map]. unfold vat; simpl nth.
  assert (DinR : In d' (map fst Dr)).
  { apply (Permutation_in _ (Permutation_map fst (Permutation_sym PR))).
    rewrite map_fst_shard_dims. apply has_name_In; auto. }
  assert (DinL : In d' (map fst Dl))
    by (apply (Permutation_in _ (Permutation_map fst (Permutation_sym PD))); auto).
  assert (Lr : lsize_of (sz c) Dr d' = lsize_of (sz c) Dl d')
    by (symmetry; apply lsize_of_perm; auto).
  assert (Id : (i d' < lsize_of (sz c) Dl d')%nat) by (apply lt_lsize; auto).
  assert (Mr : msk (sz c) (ndims (node_at T r)) i = true)
    by (rewrite Er; simpl; rewrite <- (msk_perm _ _ _ i PD); auto).
  pose proof (shard_range c T SZ r d' a' y rho i SR R Mr) as My.
  rewrite Er, Ey in My; simpl in My. unfold upd_shard in My.
  rewrite (den_in c T y _ _ _ rho _ W Ey My). cbn [core map]. unfold vat; simpl nth.
  destruct (Pos.eqb_spec d old) as [->|Nd].
  - (* the block's dim is renamed: d' = new *)
    apply Pos.eqb_eq in CASE; subst d'.
    assert (Ls : lsize_of (sz c) (ndims (node_at T s)) old = lsize_of (sz c) Dl new)
      by (apply (rename_size _ T l old new s Dl SZ El)).
    rewrite (shard_read_lt c T W s old a' x rho _ SS) by (rewrite upd_same, Ls; auto).
    unfold upd_shard.
    apply den_agree; auto. intros n In_.
    assert (Nn : n <> new) by (intro E; subst; auto).
    destruct (XN n In_) as [->|InY].
    + upd_simpl. rewrite Lr, Ls. auto.
    + destruct (Pos.eqb_spec n old) as [->|No]; upd_simpl; [rewrite Lr, Ls|]; auto.
  - (* another dim: d' = d *)
    apply andb_prop in CASE as [E SPd]. apply Pos.eqb_eq in E; subst d'.
    apply spec_opt_eqb_eq in SPd.
    assert (Ld : lsize_of (sz c) Dl d = lsize_of (sz c) (ndims (node_at T s)) d)
      by (apply spec_lsize; rewrite Es; simpl; auto).
    rewrite (shard_read_lt c T W s d a' x rho _ SS)
      by (rewrite upd_other by congruence; rewrite <- Ld; auto).
    unfold upd_shard.
    assert (Dnew : d <> new) by (intro E; subst; auto).
    assert (DY : In d (map fst Dy)) by (apply has_name_In; auto).
    apply den_agree; auto. intros n In_.
    assert (Nn : n <> new) by (intro E; subst; auto).
    destruct (Pos.eqb_spec n d) as [->|Ndn]; [upd_simpl; rewrite Lr, Ld; auto|].
    destruct (XN n In_) as [->|InY]; [upd_simpl; auto|].
    destruct (Pos.eqb_spec n old) as [->|No]; upd_simpl; auto.
Qed.

(** ** lift-shard-concat: [CONCAT(SHARD(x_k, d, a)..., c) = SHARD(CONCAT(x_k..., c), d, a)], [c <> d]
    (the blocks keep [c]'s spec, so the parts have the same sizes along [c] on both sides) *)
Lemma concat_at_pairs : forall c T (b : positive -> positive -> bool) cd rho i i'
  (f : positive -> nat) Ss Xs,
  forallb2 b Ss Xs = true ->
  (forall S X, b S X = true -> f S = f X /\ forall j', den c T S rho (upd i cd j') = den c T X rho (upd i' cd j')) ->
  forall j, concat_at (combine (map (den c T) Ss) (map f Ss)) cd rho i j =
            concat_at (combine (map (den c T) Xs) (map f Xs)) cd rho i' j.
Proof.
  intros c T b cd rho i i' f Ss. induction Ss as [|S Ss IH]; intros [|X Xs] B H j;
    simpl in B |- *; try discriminate; auto.
  apply andb_prop in B as [B1 B2]. destruct (H S X B1) as [E V]. rewrite E, V.
  destruct (Nat.ltb j (f X)); auto.
Qed.

Definition concat_arg (T : table) (Dl Dy : list dimspec) (d a : name) (S X : positive) : bool :=
  is_shard T S d a X && spec_opt_eqb (spec_of (ndims (node_at T S)) d) (spec_of Dl d) &&
  incl_names (ndims (node_at T X)) Dy.

Definition chk_lift_concat (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l, node_at T r with
  | Node (OConcat cd) Ss Dl, Node (OShard d a) [y] Dr =>
      match node_at T y with
      | Node (OConcat cd') Xs Dy =>
          if negb (Pos.eqb cd d) && Pos.eqb cd cd' && forallb2 (concat_arg T Dl Dy d a) Ss Xs &&
             is_shard T r d a y && dims_eqvb Dl Dr && has_name Dy cd
          then Some [] else None
      | _ => None
      end
  | _, _ => None
  end.

Lemma chk_lift_concat_sound : rule_sound chk_lift_concat.
Proof.
  intros G l r h cl H c M _. destruct M as [W [VC [SZ [F [DO P]]]]].
  unfold chk_lift_concat in H. set (T := gT G) in *.
  destruct (node_at T l) as [ol Ss Dl] eqn:El. destruct ol; try discriminate.
  rename d into cd.
  destruct (node_at T r) as [or ys Dr] eqn:Er. destruct or; try discriminate.
  destruct ys as [|y [|]]; try discriminate.
  destruct (node_at T y) as [oy Xs Dy] eqn:Ey. destruct oy; try discriminate.
  rename d0 into cd'.
  match type of H with (if ?b then _ else _) = _ => destruct b eqn:B; try discriminate end.
  apply andb_prop in B as [B HC]. apply andb_prop in B as [B DE].
  apply andb_prop in B as [B SR]. apply andb_prop in B as [B LA].
  apply andb_prop in B as [NE EC]. apply Pos.eqb_eq in EC; subst cd'.
  apply Bool.negb_true_iff, Pos.eqb_neq in NE.
  apply has_name_In in HC.
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
  assert (DY : In d (map fst Dy)) by (apply has_name_In; auto).
  assert (Lr : lsize_of (sz c) Dr d = lsize_of (sz c) Dl d)
    by (symmetry; apply lsize_of_perm; auto).
  assert (Id : (i d < lsize_of (sz c) Dl d)%nat) by (apply lt_lsize; auto).
  assert (Mr : msk (sz c) (ndims (node_at T r)) i = true)
    by (rewrite Er; simpl; rewrite <- (msk_perm _ _ _ i PD); auto).
  pose proof (shard_range c T SZ r d a y rho i SR R Mr) as My.
  rewrite Er, Ey in My; simpl in My. unfold upd_shard in My.
  rewrite (den_in c T y _ _ _ rho _ W Ey My). cbn [core].
  assert (JC : restrict Dy (upd i d (rho a * lsize_of (sz c) Dr d + i d)) cd = i cd).
  { rewrite restrict_in by auto. rewrite upd_other by congruence. auto. }
  rewrite JC.
  apply (concat_at_pairs c T (concat_arg T Dl Dy d a) cd rho i _ _ Ss Xs LA).
  intros S X SX. unfold concat_arg in SX.
  apply andb_prop in SX as [SX IN]. apply andb_prop in SX as [SX SPd].
  apply spec_opt_eqb_eq in SPd.
  destruct (is_shard_info T S d a X SX) as [_ [HX [PS [NS NX]]]].
  split.
  - rewrite (lsize_of_perm _ _ _ _ PS NS). unfold lsize_of. rewrite spec_of_shard_dims.
    rewrite (proj2 (Pos.eqb_neq cd d) NE). destruct (spec_of _ cd); auto.
  - intros j'.
    assert (SpS : lsize_of (sz c) (ndims (node_at T S)) d = lsize_of (sz c) Dl d)
      by (apply spec_lsize; auto).
    rewrite (shard_read_lt c T W S d a X rho _ SX) by (rewrite upd_other by congruence; rewrite SpS; auto).
    unfold upd_shard. apply den_agree; auto. intros n In_.
    assert (InY : In n (map fst Dy)).
    { unfold incl_names in IN. rewrite forallb_forall in IN.
      apply in_map_iff in In_ as [dd [<- I]]. apply has_name_In, IN; auto. }
    destruct (Pos.eqb_spec n cd) as [->|Nc]; [upd_simpl; auto|].
    destruct (Pos.eqb_spec n d) as [->|Nd]; upd_simpl; [rewrite SpS, Lr|]; auto.
Qed.

(** ** shard-swap: [SHARD(SHARD(x, d1, a1), d2, a2) = SHARD(SHARD(x, d2, a2), d1, a1)], [d1 <> d2]
    (the rule's guard also orders the axes and asks that [x] varies over neither; the lemma
    needs neither, so Coq does not test them) *)
Lemma spec_shard : forall T s d a x n, is_shard T s d a x = true ->
  spec_of (ndims (node_at T s)) n =
  match spec_of (ndims (node_at T x)) n with
  | Some sh => Some (if Pos.eqb n d then sh ++ [SAx a] else sh) | None => None end.
Proof.
  intros. destruct (is_shard_info T s d a x H) as [_ [_ [P [N _]]]].
  rewrite (spec_of_perm _ _ P N), spec_of_shard_dims; auto.
Qed.

Definition chk_shard_swap (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l, node_at T r with
  | Node (OShard d2 a2) [s1] Dl, Node (OShard d1 a1) [s2] Dr =>
      match node_at T s1 with
      | Node (OShard d1' a1') [x] _ =>
          if Pos.eqb d1 d1' && Pos.eqb a1 a1' && negb (Pos.eqb d1 d2) &&
             is_shard T l d2 a2 s1 && is_shard T s1 d1 a1 x &&
             is_shard T r d1 a1 s2 && is_shard T s2 d2 a2 x && dims_eqvb Dl Dr
          then Some [] else None
      | _ => None
      end
  | _, _ => None
  end.

Lemma chk_shard_swap_sound : rule_sound chk_shard_swap.
Proof.
  intros G l r h cl H c M _. destruct M as [W [VC [SZ [F [DO P]]]]].
  unfold chk_shard_swap in H. set (T := gT G) in *.
  destruct (node_at T l) as [ol ss Dl] eqn:El. destruct ol; try discriminate.
  destruct ss as [|s1 [|]]; try discriminate.
  destruct (node_at T r) as [or ss Dr] eqn:Er. destruct or; try discriminate.
  destruct ss as [|s2 [|]]; try discriminate.
  rename d into d2, a into a2, d0 into d1, a0 into a1.
  destruct (node_at T s1) as [os xs Ds] eqn:Es. destruct os; try discriminate.
  destruct xs as [|x [|]]; try discriminate.
  match type of H with (if ?b then _ else _) = _ => destruct b eqn:B; try discriminate end.
  apply andb_prop in B as [B DE]. apply andb_prop in B as [B S4].
  apply andb_prop in B as [B S3]. apply andb_prop in B as [B S2].
  apply andb_prop in B as [B S1]. apply andb_prop in B as [B NE].
  apply Bool.negb_true_iff, Pos.eqb_neq in NE.
  destruct (dims_eqvb_perm _ _ DE) as [PD ND].
  intros rho R i.
  destruct (msk (sz c) Dl i) eqn:Mi.
  2:{ rewrite (den_node c T l _ _ _ W El), Mi.
      rewrite (den_node c T r _ _ _ W Er), <- (msk_perm _ _ _ i PD), Mi; auto. }
  assert (Ml : msk (sz c) (ndims (node_at T l)) i = true) by (rewrite El; auto).
  assert (Mr : msk (sz c) (ndims (node_at T r)) i = true)
    by (rewrite Er; simpl; rewrite <- (msk_perm _ _ _ i PD); auto).
  rewrite (shard_read c T W l d2 a2 s1 rho i S1 Ml), (shard_read c T W r d1 a1 s2 rho i S3 Mr).
  (* the local sizes agree: each dim has x's spec with its axis appended on both sides *)
  assert (Sp : forall n, spec_of Dl n = spec_of Dr n) by (intros; apply spec_of_perm; auto).
  assert (L2 : lsize_of (sz c) (ndims (node_at T l)) d2 = lsize_of (sz c) (ndims (node_at T s2)) d2).
  { unfold lsize_of. rewrite (spec_shard T l d2 a2 s1 d2 S1), (spec_shard T s1 d1 a1 x d2 S2),
      (spec_shard T s2 d2 a2 x d2 S4), Pos.eqb_refl, (proj2 (Pos.eqb_neq d2 d1)) by congruence.
    destruct (spec_of _ d2); auto. }
  assert (L1 : lsize_of (sz c) (ndims (node_at T r)) d1 = lsize_of (sz c) (ndims (node_at T s1)) d1).
  { unfold lsize_of. rewrite (spec_shard T r d1 a1 s2 d1 S3), (spec_shard T s2 d2 a2 x d1 S4),
      (spec_shard T s1 d1 a1 x d1 S2), Pos.eqb_refl, (proj2 (Pos.eqb_neq d1 d2)) by congruence.
    destruct (spec_of _ d1); auto. }
  assert (L1' : lsize_of (sz c) (ndims (node_at T l)) d1 = lsize_of (sz c) (ndims (node_at T r)) d1).
  { rewrite El, Er. simpl. unfold lsize_of. rewrite Sp. auto. }
  assert (L2' : lsize_of (sz c) (ndims (node_at T r)) d2 = lsize_of (sz c) (ndims (node_at T s2)) d2).
  { rewrite <- L2, El, Er. simpl. unfold lsize_of. rewrite Sp. auto. }
  assert (Ll1 : (i d1 < lsize_of (sz c) (ndims (node_at T l)) d1)%nat).
  { apply lt_lsize; auto. apply In_spec_of. rewrite (spec_shard T l d2 a2 s1 d1 S1),
      (spec_shard T s1 d1 a1 x d1 S2).
    destruct (is_shard_info T s1 d1 a1 x S2) as [_ [HX _]]. apply has_name_In, In_spec_of in HX.
    destruct (spec_of _ d1); congruence. }
  assert (Lr2 : (i d2 < lsize_of (sz c) (ndims (node_at T r)) d2)%nat).
  { apply lt_lsize; [rewrite Er; simpl; rewrite <- (msk_perm _ _ _ i PD); auto|].
    apply In_spec_of. rewrite (spec_shard T r d1 a1 s2 d2 S3), (spec_shard T s2 d2 a2 x d2 S4).
    destruct (is_shard_info T s2 d2 a2 x S4) as [_ [HX _]]. apply has_name_In, In_spec_of in HX.
    destruct (spec_of _ d2); congruence. }
  unfold upd_shard.
  rewrite (shard_read_lt c T W s1 d1 a1 x rho _ S2)
    by (rewrite upd_other by congruence; rewrite <- L1, <- L1'; auto).
  rewrite (shard_read_lt c T W s2 d2 a2 x rho _ S4)
    by (rewrite upd_other by congruence; rewrite <- L2'; auto).
  unfold upd_shard. rewrite !upd_other by congruence.
  rewrite L2, L1, upd_comm by congruence. auto.
Qed.
