(** * RulesUnit: collectives over a mesh axis of size one, and the rank table of an axis summed
    over it (docs/rules.md, "collectives"; issue 17). The size of the axis is a size fact of
    the certificate's binding ([sz a = v], a hypothesis of the theorem).

    allgather-unit-axis: [ALL_GATHER(SHARD(x, d, a), a, d) = x] when [|a| = 1]: the one block is
    the whole of [x], read on rank 0, the only rank in range.
    allreduce-rank-const: [ALL_REDUCE(RANK_CONST(a, vs), a, sum) = CONST(sum(vs))] when
    [|vs| = |a|]; the sum is compared exactly ([Num.num_eqb] of the concatenated terms). *)

From Coq Require Import Reals Lra Lia List QArith ZArith PArith NArith Bool Permutation.
From Coq Require Import FSets.FMapPositive FunctionalExtensionality.
From Shardproof Require Import Base Num Pow Term Props RuleLib Congr Rel Shard RulesBasic RulesLift
  RulesAxis RulesEinsum RulesScalarOut RulesLiftEinsum RulesLiftReindex RulesCollect.
Import ListNotations.
Open Scope R_scope.

(** ** allgather-unit-axis *)
Definition chk_allgather_unit_axis (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l with
  | Node (OAllGather a d) [s] Dl =>
      if is_shard T s d a r && dims_eqvb (ndims (node_at T r)) Dl && unit_axis G a
      then Some [] else None
  | _ => None
  end.

Lemma chk_allgather_unit_axis_sound : rule_sound chk_allgather_unit_axis.
Proof.
  intros G l r h cl H c M _. pose proof M as M0. destruct M as [W [VC [SZ [F [DO P]]]]].
  unfold chk_allgather_unit_axis in H. set (T := gT G) in *.
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
  assert (A1 : sz c a = 1%nat) by (apply (unit_axis_ok G c a M0 I)).
  assert (Q0 : (j d / L = 0)%nat).
  { apply Nat.div_small. unfold L. rewrite lsz_app1. simpl kof. rewrite A1, Nat.div_1_r. auto. }
  rewrite Q0, (upd_rank_unit (sz c) rho a R A1).
  replace (j d mod L)%nat with (j d)
    by (symmetry; apply Nat.mod_small; unfold L; rewrite lsz_app1; simpl kof; rewrite A1, Nat.div_1_r; auto).
  rewrite upd_id. apply den_restrict; auto.
Qed.

(** ** allreduce-rank-const *)
Lemma map_nth_seq_R : forall (l pre : list R),
  map (fun r => nth r (pre ++ l) 0) (seq (length pre) (length l)) = l.
Proof.
  induction l as [|v l IH]; intros pre; simpl; auto.
  rewrite app_nth2 by lia. rewrite Nat.sub_diag. simpl. f_equal.
  specialize (IH (pre ++ [v])). rewrite <- app_assoc in IH. simpl in IH.
  rewrite app_length in IH. simpl in IH. rewrite Nat.add_1_r in IH. auto.
Qed.

Lemma rsum_nth : forall (l : list R), rsum (length l) (fun r => nth r l 0) = suml l.
Proof.
  intros l. assert (E : forall n f, rsum n f = suml (map f (seq 0 n))).
  { induction n; intros f; auto. rewrite seq_S, map_app. simpl rsum. rewrite IHn.
    unfold suml. rewrite fold_right_app. simpl. generalize (f n). intro v.
    induction (map f (seq 0 n)) as [|a0 l0 IH]; simpl; [ring|]. rewrite <- IH. ring. }
  rewrite E. rewrite <- (map_nth_seq_R l []) at 2. reflexivity.
Qed.

Lemma num_val_concat : forall vs, num_val (concat vs) = suml (map num_val vs).
Proof. induction vs as [|v vs IH]; simpl; auto. rewrite num_val_app, IH. reflexivity. Qed.

Definition chk_allreduce_rank_const (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l, node_at T r with
  | Node (OAllReduce a RSum) [k] [], Node (OConst w) [] [] =>
      match node_at T k with
      | Node (ORankConst a' vs) [] [] =>
          if Pos.eqb a a' && num_eqb (concat vs) w &&
             match fact_of (gF G) a with Some v => N.eqb v (N.of_nat (length vs)) | None => false end
          then Some [] else None
      | _ => None
      end
  | _, _ => None
  end.

Lemma chk_allreduce_rank_const_sound : rule_sound chk_allreduce_rank_const.
Proof.
  intros G l r h cl H c M _. pose proof M as M0. destruct M as [W [VC [SZ [F [DO P]]]]].
  unfold chk_allreduce_rank_const in H. set (T := gT G) in *.
  destruct (node_at T l) as [ol ks Dl] eqn:El. destruct ol; try discriminate.
  destruct r0; try discriminate. destruct ks as [|k [|]]; try discriminate.
  destruct Dl; try discriminate.
  destruct (node_at T r) as [or xs Dr] eqn:Er. destruct or; try discriminate.
  destruct xs, Dr; try discriminate.
  destruct (node_at T k) as [ok ys Dk] eqn:Ek. destruct ok; try discriminate.
  destruct ys, Dk; try discriminate. rename a0 into a'.
  match type of H with (if ?b then _ else _) = _ => destruct b eqn:B; try discriminate end.
  apply andb_prop in B as [B FA]. apply andb_prop in B as [A EQ].
  apply Pos.eqb_eq in A. subst a'.
  destruct (fact_of (gF G) a) as [v|] eqn:FO; try discriminate. apply N.eqb_eq in FA. subst v.
  assert (Sa : sz c a = length vs) by (apply fact_of_In, F in FO; rewrite FO; lia).
  apply (eqv_by_core c T l r _ _ [] _ _ [] W El Er eq_refl).
  intros rho R i _ _. cbn [core map]. unfold vat; simpl nth.
  rewrite <- (num_eqb_val _ _ EQ), num_val_concat, Sa.
  rewrite (rsum_ext _ _ (fun q => nth q (map num_val vs) 0)).
  - rewrite <- (map_length num_val vs). apply rsum_nth.
  - intros q Hq. rewrite (den_node c T k _ _ _ W Ek). cbn [msk forallb core]. rewrite upd_same.
    apply nth_indep. rewrite map_length. lia.
Qed.
