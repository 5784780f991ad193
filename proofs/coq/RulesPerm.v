(** * RulesPerm: contractions of block-permuted operands (docs/rules.md, "permute"; the
    context-parallel load-balancing chunk map of rewriting/permute.py; issue 17).

    [PERMUTE(x, d, o)] reads [x] at position [pidx o B j = o[j / B] * B + j mod B] of [d]
    ([B] the block size: [d]'s local size over the number of blocks, [Term.core]).

    lift-perm-einsum: [EINSUM(..PERMUTE(x_i, d, o)..y_j.., out) = PERMUTE(EINSUM(..x_i..y_j.., out), d, o)]
    ([d] an output name; every operand a [PERMUTE(x_i, d, o)] with the output's spec of [d] or
    an operand without [d], one of them a [PERMUTE]; the two contractions sum the same names
    with the same specs; [o] a block order: its entries are [0 .. n-1], each once).
    einsum-perm-contract: [EINSUM(..PERMUTE(x_i, d, o)..y_j.., out) = EINSUM(..x_i..y_j.., out)]
    ([d] summed; every operand with [d] a [PERMUTE(x_i, d, o)], all with one spec of [d]; [o]
    a block order): a sum over [d] does not depend on the order of its blocks ([rsum_pidx]). *)

From Coq Require Import Reals Lra Lia List QArith ZArith PArith NArith Bool Permutation.
From Coq Require Import FSets.FMapPositive FunctionalExtensionality.
From Shardproof Require Import Base Num Pow Term Props RuleLib Congr Rel Shard RulesBasic RulesLift
  RulesAxis RulesEinsum RulesScalarOut RulesLiftEinsum RulesLiftReindex RulesCollect RulesSplit
  RulesReorder RulesGather.
Import ListNotations.
Open Scope R_scope.

(** ** Block orders *)
Fixpoint nodup_nb (l : list N) : bool :=
  match l with [] => true | x :: r => negb (existsb (N.eqb x) r) && nodup_nb r end.

Definition ord_lt (o : list N) : bool := forallb (fun k => N.ltb k (N.of_nat (length o))) o.

(** [o] is a block order: non-empty, entries [0 .. n-1], each once (the Python [_order]) *)
Definition order_b (o : list N) : bool := Nat.ltb 0 (length o) && ord_lt o && nodup_nb o.

Definition pidx (o : list N) (B j : nat) : nat := (N.to_nat (nth (j / B) o 0%N) * B + j mod B)%nat.

Lemma pidx_lt : forall o L j, ord_lt o = true -> (0 < length o)%nat -> (L mod length o = 0)%nat ->
  (j < L)%nat -> (pidx o (L / length o) j < L)%nat.
Proof.
  intros o L j OR N0 NM J. unfold pidx. set (n := length o) in *.
  assert (E : L = (n * (L / n))%nat) by (apply Nat.div_exact; lia).
  set (Bk := (L / n)%nat) in *.
  assert (Bp : (0 < Bk)%nat) by (destruct Bk; lia).
  assert (Q : (j / Bk < n)%nat) by (apply Nat.div_lt_upper_bound; lia).
  assert (Rm : (j mod Bk < Bk)%nat) by (apply Nat.mod_upper_bound; lia).
  assert (K : (N.to_nat (nth (j / Bk) o 0%N) < n)%nat).
  { assert (I : In (nth (j / Bk) o 0%N) o) by (apply nth_In; lia).
    unfold ord_lt in OR. rewrite forallb_forall in OR. specialize (OR _ I).
    apply N.ltb_lt in OR. fold n in OR. lia. }
  nia.
Qed.

Lemma is_perm_has : forall T p d o x, is_perm T p d o x = true -> has_name (ndims (node_at T p)) d = true.
Proof.
  intros T p d o x H. unfold is_perm in H. destruct (node_at T p) as [op xs Dp].
  destruct op; try discriminate. destruct xs as [|x' [|]]; try discriminate.
  apply andb_prop in H as [_ H]. auto.
Qed.

Lemma is_perm_dims : forall T p d o x, is_perm T p d o x = true ->
  Permutation (ndims (node_at T p)) (ndims (node_at T x)) /\ NoDup (map fst (ndims (node_at T p))).
Proof.
  intros T p d o x H. unfold is_perm in H. destruct (node_at T p) as [op xs Dp].
  destruct op; try discriminate. destruct xs as [|x' [|]]; try discriminate.
  apply andb_prop in H as [H _]. apply andb_prop in H as [H DX].
  apply andb_prop in H as [_ XX]. apply Pos.eqb_eq in XX. subst x'.
  apply dims_eqvb_perm; auto.
Qed.

(** A permuted node read at a position of [d] in range, the other dims in range or not. *)
Lemma perm_read_lt : forall c T p d o x rho i, wf_table T -> sizes_ok (sz c) T ->
  is_perm T p d o x = true -> ord_lt o = true ->
  (i d < lsize_of (sz c) (ndims (node_at T p)) d)%nat ->
  den c T p rho i = den c T x rho
    (upd i d (pidx o (lsize_of (sz c) (ndims (node_at T p)) d / length o) (i d))).
Proof.
  intros c T p d o x rho i W SZ H OR Lt.
  unfold is_perm in H. destruct (node_at T p) as [op xs Dp] eqn:Ep. destruct op; try discriminate.
  destruct xs as [|x' [|]]; try discriminate.
  apply andb_prop in H as [H HD]. apply andb_prop in H as [H DX].
  apply andb_prop in H as [H XX]. apply andb_prop in H as [D1 O1].
  apply Pos.eqb_eq in D1, XX. subst d0 x'.
  apply (list_eqb_eq _ _ (fun a b => proj1 (N.eqb_eq a b))) in O1. subst o0.
  cbn [ndims] in *. apply has_name_In in HD.
  destruct (dims_eqvb_perm _ _ DX) as [PX NX].
  pose proof (node_sizes_at _ _ SZ p) as NS. rewrite Ep in NS.
  unfold node_sizes_okb in NS. cbn [nop nargs ndims] in NS. apply andb_prop in NS as [_ NS].
  apply andb_prop in NS as [N0 NM0]. apply Nat.ltb_lt in N0. apply Nat.eqb_eq in NM0.
  set (L := lsize_of (sz c) Dp d) in *.
  assert (PL : (pidx o (L / length o) (i d) < L)%nat) by (apply pidx_lt; auto).
  destruct (msk (sz c) Dp i) eqn:M.
  - rewrite (den_in c T p _ _ _ rho i W Ep M). cbn [core]. unfold vat; simpl nth.
    rewrite (restrict_in Dp i d HD). fold L. unfold pidx.
    apply den_agree; auto. intros n In_. unfold upd. destruct (Pos.eqb n d); auto.
    apply restrict_in. apply (Permutation_in _ (Permutation_map fst (Permutation_sym PX))); auto.
  - rewrite (den_msk0 c T W p rho i) by (rewrite Ep; auto). symmetry.
    destruct (msk (sz c) (ndims (node_at T x)) (upd i d (pidx o (L / length o) (i d)))) eqn:Mx.
    2:{ apply den_msk0; auto. }
    exfalso. rewrite <- (msk_perm _ _ _ _ PX) in Mx.
    assert (msk (sz c) Dp i = true); [|congruence].
    apply msk_iff; auto. intros n sh E. destruct (Pos.eqb_spec n d) as [->|Nn].
    + unfold L, lsize_of in Lt. rewrite E in Lt. auto.
    + pose proof (msk_spec _ _ _ n sh Mx E) as Hn. rewrite upd_other in Hn by auto. auto.
Qed.

(** ** A sum over the positions of [d] in any block order *)
Lemma rsum_seq : forall n f, rsum n f = suml (map f (seq 0 n)).
Proof.
  induction n; intros f; auto. rewrite seq_S, map_app. simpl rsum. rewrite IHn.
  unfold suml. rewrite fold_right_app. simpl. generalize (f n). intro v.
  induction (map f (seq 0 n)) as [|a l IH]; simpl; [ring|]. rewrite <- IH. ring.
Qed.

Lemma suml_perm : forall l l', Permutation l l' -> suml l = suml l'.
Proof. intros l l' P. induction P; unfold suml in *; simpl; try lra. Qed.

Lemma map_nth_seq_app : forall (l pre : list N),
  map (fun r => nth r (pre ++ l) 0%N) (seq (length pre) (length l)) = l.
Proof.
  induction l as [|a l IH]; intros pre; simpl; auto.
  rewrite app_nth2 by lia. rewrite Nat.sub_diag. simpl. f_equal.
  specialize (IH (pre ++ [a])). rewrite <- app_assoc in IH. simpl in IH.
  rewrite app_length in IH. simpl in IH. rewrite Nat.add_1_r in IH. auto.
Qed.

Lemma nodup_nb_map : forall o, nodup_nb o = true -> NoDup (map N.to_nat o).
Proof.
  induction o as [|x o IH]; simpl; intros H; constructor.
  - apply andb_prop in H as [H _]. apply Bool.negb_true_iff in H. intro I.
    apply in_map_iff in I as [y [E I]]. apply N2Nat.inj in E. subst y.
    assert (existsb (N.eqb x) o = true); [|congruence].
    apply existsb_exists. exists x; split; auto. apply N.eqb_refl.
  - apply andb_prop in H as [_ H]. auto.
Qed.

Lemma rsum_order : forall o (g : nat -> R), ord_lt o = true -> nodup_nb o = true ->
  rsum (length o) (fun r => g (N.to_nat (nth r o 0%N))) = rsum (length o) g.
Proof.
  intros o g OR ND. rewrite !rsum_seq.
  replace (map (fun r => g (N.to_nat (nth r o 0%N))) (seq 0 (length o)))
    with (map g (map N.to_nat o)).
  2:{ rewrite <- (map_nth_seq_app o []) at 1. simpl. rewrite !map_map. auto. }
  apply suml_perm, Permutation_map. apply NoDup_Permutation_bis.
  - apply nodup_nb_map; auto.
  - rewrite seq_length, map_length. lia.
  - intros k I. apply in_map_iff in I as [y [<- I]]. apply in_seq.
    unfold ord_lt in OR. rewrite forallb_forall in OR. specialize (OR y I).
    apply N.ltb_lt in OR. lia.
Qed.

Lemma rsum_pidx : forall o L (g : nat -> R), order_b o = true -> (L mod length o = 0)%nat ->
  rsum L (fun k => g (pidx o (L / length o) k)) = rsum L g.
Proof.
  intros o L g OB NM. unfold order_b in OB. apply andb_prop in OB as [OB ND].
  apply andb_prop in OB as [N0 OR]. apply Nat.ltb_lt in N0.
  set (n := length o) in *.
  assert (E : L = (n * (L / n))%nat) by (apply Nat.div_exact; lia).
  set (Bk := (L / n)%nat) in *. rewrite E, !rsum_blocks.
  destruct (Nat.eq_dec Bk 0) as [B0|B0].
  { rewrite B0. simpl. rewrite !rsum_zero. auto. }
  rewrite (rsum_ext _ _ (fun r => rsum Bk (fun j => g (N.to_nat (nth r o 0%N) * Bk + j)%nat))).
  2:{ intros r Hr. apply rsum_ext. intros j Hj. f_equal. unfold pidx.
      assert (Dv : ((r * Bk + j) / Bk = r)%nat).
      { rewrite Nat.div_add_l by lia. rewrite Nat.div_small by lia. lia. }
      assert (Md : ((r * Bk + j) mod Bk = j)%nat).
      { rewrite Nat.add_comm, Nat.mod_add by lia. apply Nat.mod_small; lia. }
      rewrite Dv, Md. auto. }
  unfold n. apply (rsum_order o (fun q => rsum Bk (fun j => g (q * Bk + j)%nat))); auto.
Qed.

(** ** lift-perm-einsum *)
Definition chk_lift_perm_einsum (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l, node_at T r with
  | Node (OEinsum o) As D, Node (OPermute d ord) [y] Dr =>
      match node_at T y with
      | Node (OEinsum o') Xs Dy =>
          if names_eqb o o' && existsb (Pos.eqb d) o && dims_eqvb D Dr && dims_eqvb Dy Dr &&
             has_name Dr d && order_b ord &&
             forallb2 (plift_arg T d ord) As Xs && negb (list_eqb Pos.eqb As Xs) &&
             forallb (fun A => negb (has_name (ndims (node_at T A)) d) ||
                               spec_opt_eqb (spec_of (ndims (node_at T A)) d) (spec_of D d)) As &&
             inclb (op_names T As) (op_names T Xs) && inclb (op_names T Xs) (op_names T As) &&
             forallb (fun n => existsb (Pos.eqb n) o ||
                               spec_opt_eqb (first_spec T As n) (first_spec T Xs n)) (op_names T As)
          then Some [] else None
      | _ => None
      end
  | _, _ => None
  end.

Lemma chk_lift_perm_einsum_sound : rule_sound chk_lift_perm_einsum.
Proof.
  intros G l r h cl H c M _. destruct M as [W [VC [SZ [F [DO P]]]]].
  unfold chk_lift_perm_einsum in H. set (T := gT G) in *.
  destruct (node_at T l) as [o As D] eqn:El. destruct o; try discriminate.
  destruct (node_at T r) as [o2 ys Dr] eqn:Er. destruct o2; try discriminate.
  destruct ys as [|y [|]]; try discriminate. rename o into ord.
  destruct (node_at T y) as [oy Xs Dy] eqn:Ey. destruct oy; try discriminate.
  match type of H with (if ?b then _ else _) = _ => destruct b eqn:B; try discriminate end.
  apply andb_prop in B as [B FS]. apply andb_prop in B as [B I2].
  apply andb_prop in B as [B I1]. apply andb_prop in B as [B DS].
  apply andb_prop in B as [B NE]. apply andb_prop in B as [B LA].
  apply andb_prop in B as [B OB]. apply andb_prop in B as [B HDr].
  apply andb_prop in B as [B DY]. apply andb_prop in B as [B DE].
  apply andb_prop in B as [OO DO'].
  apply (list_eqb_eq _ _ (fun a b => proj1 (Pos.eqb_eq a b))) in OO; subst out0.
  apply existsb_pos_In in DO'. apply has_name_In in HDr.
  pose proof OB as OB'. unfold order_b in OB'. apply andb_prop in OB' as [OB' _].
  apply andb_prop in OB' as [_ OR].
  destruct (contracted_same (sz c) T As Xs out) as [CP CN].
  { intros n; split; intro I; [apply (inclb_In _ _ _ I1)|apply (inclb_In _ _ _ I2)]; auto. }
  { intros n I NO. rewrite forallb_forall in FS. specialize (FS n I). rewrite NO in FS.
    simpl in FS. apply spec_opt_eqb_eq; auto. }
  destruct (dims_eqvb_perm _ _ DE) as [PD ND]. destruct (dims_eqvb_perm _ _ DY) as [PY NY].
  assert (NC : ~ In d (map fst (contracted (sz c) T As out))).
  { unfold contracted. rewrite map_map. simpl. rewrite map_id. intro I.
    apply filter_In in I as [_ I]. apply existsb_pos_In in DO'. rewrite DO' in I. discriminate. }
  assert (NC' : ~ In d (map fst (contracted (sz c) T Xs out)))
    by (intro I; apply NC; apply (Permutation_in _ (Permutation_map fst (Permutation_sym CP))); auto).
  apply (eqv_by_core c T l r _ _ D _ _ Dr W El Er DE).
  intros rho R x Mx Rx. cbn [core map]. unfold vat; simpl nth.
  pose proof (node_sizes_at _ _ SZ r) as NS. rewrite Er in NS. unfold node_sizes_okb in NS.
  cbn [nop nargs ndims] in NS. apply andb_prop in NS as [_ NS].
  apply andb_prop in NS as [N0 NM0]. apply Nat.ltb_lt in N0. apply Nat.eqb_eq in NM0.
  set (L := lsize_of (sz c) Dr d) in *.
  assert (XL : (x d < L)%nat) by (apply lt_lsize; auto; rewrite <- (msk_perm _ _ _ x PD); auto).
  set (p := pidx ord (L / length ord) (x d)).
  assert (PL : (p < L)%nat) by (apply pidx_lt; auto).
  set (j := upd x d p).
  assert (Mj : msk (sz c) Dy j = true).
  { rewrite (msk_perm _ _ _ j PY).
    apply msk_iff; [apply (Permutation_NoDup (Permutation_map fst PY)); auto|].
    intros nn sh E'. unfold j, upd. destruct (Pos.eqb_spec nn d) as [->|Nn].
    - assert (Lsh : L = lsz (sz c) (sz c d) sh) by (unfold L, lsize_of; rewrite E'; auto). lia.
    - apply (msk_spec _ Dr x nn sh); auto. rewrite <- (msk_perm _ _ _ x PD); auto. }
  transitivity (den c T y rho j); [|reflexivity].
  rewrite (den_in c T y _ _ _ rho j W Ey Mj). cbn [core].
  assert (YD : forall m, In m (map fst Dy) <-> In m (map fst D)).
  { intros m. split; intro I.
    - apply (Permutation_in _ (Permutation_map fst (Permutation_sym PD))).
      apply (Permutation_in _ (Permutation_map fst PY)); auto.
    - apply (Permutation_in _ (Permutation_map fst (Permutation_sym PY))).
      apply (Permutation_in _ (Permutation_map fst PD)); auto. }
  assert (DinY : In d (map fst Dy))
    by (apply (Permutation_in _ (Permutation_map fst (Permutation_sym PY))); auto).
  rewrite (sumover_perm _ _ CP CN).
  symmetry. rewrite (sumover_ext _ _ (fun jj => prodl (map (fun v => v rho jj) (map (den c T) Xs)))
                       _ j); cycle 1.
  { intros m Hm. destruct (in_dec Pos.eq_dec m (map fst Dy)) as [I|I].
    - apply restrict_in; auto.
    - rewrite restrict_out by auto. unfold j. rewrite upd_other by (intro E; subst; auto).
      rewrite <- Rx, restrict_out; auto. rewrite <- YD; auto. }
  { auto. }
  unfold j. rewrite sumover_upd_out by auto.
  symmetry. apply sumover_ext; auto. intros jj Hj.
  assert (Jd : jj d = x d) by (apply Hj; auto).
  cbv beta. rewrite !map_map. f_equal.
  destruct (forallb2_nth _ _ _ _ _ 1%positive 1%positive LA) as [Len LK].
  apply nth_ext with (d := 0) (d' := 0); [rewrite !map_length; auto|].
  intros k Hk. rewrite map_length in Hk.
  rewrite (nth_indep _ _ (den c T 1%positive rho jj)) by (rewrite map_length; auto).
  rewrite (nth_indep (map _ Xs) _ (den c T 1%positive rho (upd jj d p))) by (rewrite map_length; lia).
  rewrite (map_nth (fun A => den c T A rho jj)), (map_nth (fun X => den c T X rho (upd jj d p))).
  set (A := nth k As 1%positive). set (X := nth k Xs 1%positive).
  specialize (LK k Hk). fold A X in LK. unfold plift_arg in LK.
  apply orb_prop in LK as [SA|[EAX NX]%andb_prop].
  - pose proof (is_perm_has T A d ord X SA) as HA.
    assert (SpA : spec_of (ndims (node_at T A)) d = spec_of D d).
    { rewrite forallb_forall in DS. assert (IA : In A As) by (apply nth_In; auto).
      specialize (DS A IA). apply orb_prop in DS as [NH|SE].
      - exfalso. apply Bool.negb_true_iff in NH. congruence.
      - apply spec_opt_eqb_eq; auto. }
    assert (LA' : lsize_of (sz c) (ndims (node_at T A)) d = L).
    { unfold L. rewrite <- (lsize_of_perm _ _ _ _ PD ND). unfold lsize_of. rewrite SpA; auto. }
    rewrite (perm_read_lt c T A d ord X rho jj W SZ SA OR) by (rewrite LA', Jd; auto).
    rewrite LA', Jd. reflexivity.
  - apply Pos.eqb_eq in EAX. rewrite EAX. apply Bool.negb_true_iff in NX.
    symmetry. apply den_lacks; auto. rewrite <- has_name_In. congruence.
Qed.

(** ** einsum-perm-contract *)
(** the first operand that is [PERMUTE] of the other side's operand, its dim and order *)
Fixpoint perm_of (T : table) (As Xs : list positive) : option (positive * name * list N) :=
  match As, Xs with
  | A :: As', X :: Xs' =>
      match node_at T A with
      | Node (OPermute d o) [X'] _ => if Pos.eqb X X' then Some (A, d, o) else perm_of T As' Xs'
      | _ => perm_of T As' Xs'
      end
  | _, _ => None
  end.

Lemma perm_of_In : forall T As Xs A d o, perm_of T As Xs = Some (A, d, o) ->
  In A As /\ exists X, node_at T A = Node (OPermute d o) [X] (ndims (node_at T A)).
Proof.
  induction As as [|A0 As IH]; intros [|X Xs] A d o H; simpl in H; try discriminate.
  assert (Rec : perm_of T As Xs = Some (A, d, o) -> In A (A0 :: As) /\
            exists X0, node_at T A = Node (OPermute d o) [X0] (ndims (node_at T A))).
  { intro H'. destruct (IH Xs A d o H') as [I E]. split; simpl; auto. }
  destruct (node_at T A0) as [oa xa Da] eqn:EA.
  destruct oa; try (apply Rec; exact H).
  destruct xa as [|X1 xa]; [apply Rec; exact H|]. destruct xa; [|apply Rec; exact H].
  destruct (Pos.eqb X X1); [|apply Rec; exact H]. injection H as E1 E2 E3. subst.
  split; [simpl; auto|]. exists X1. rewrite EA. auto.
Qed.

Definition chk_einsum_perm_contract (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l, node_at T r with
  | Node (OEinsum o) As D, Node (OEinsum o') Xs Dr =>
      match perm_of T As Xs with
      | Some (A0, d, ord) =>
          if names_eqb o o' && negb (existsb (Pos.eqb d) o) && dims_eqvb D Dr && order_b ord &&
             has_name (ndims (node_at T A0)) d &&
             forallb2 (plift_arg T d ord) As Xs &&
             forallb (fun A => negb (has_name (ndims (node_at T A)) d) ||
                               spec_opt_eqb (spec_of (ndims (node_at T A)) d) (first_spec T As d)) As &&
             inclb (op_names T As) (op_names T Xs) && inclb (op_names T Xs) (op_names T As) &&
             forallb (fun n => existsb (Pos.eqb n) o ||
                               spec_opt_eqb (first_spec T As n) (first_spec T Xs n)) (op_names T As)
          then Some [] else None
      | None => None
      end
  | _, _ => None
  end.

Lemma chk_einsum_perm_contract_sound : rule_sound chk_einsum_perm_contract.
Proof.
  intros G l r h cl H c M _. destruct M as [W [VC [SZ [F [DO P]]]]].
  unfold chk_einsum_perm_contract in H. set (T := gT G) in *.
  destruct (node_at T l) as [o As D] eqn:El. destruct o; try discriminate.
  destruct (node_at T r) as [o2 Xs Dr] eqn:Er. destruct o2; try discriminate.
  rename out0 into out'.
  destruct (perm_of T As Xs) as [[[A0 d] ord]|] eqn:PO; try discriminate.
  match type of H with (if ?b then _ else _) = _ => destruct b eqn:B; try discriminate end.
  apply andb_prop in B as [B FS]. apply andb_prop in B as [B I2].
  apply andb_prop in B as [B I1]. apply andb_prop in B as [B DS].
  apply andb_prop in B as [B LA]. apply andb_prop in B as [B HA0].
  apply andb_prop in B as [B OB].
  apply andb_prop in B as [B DE]. apply andb_prop in B as [OO DO'].
  apply (list_eqb_eq _ _ (fun a b => proj1 (Pos.eqb_eq a b))) in OO; subst out'.
  apply Bool.negb_true_iff in DO'.
  pose proof OB as OB'. unfold order_b in OB'. apply andb_prop in OB' as [OB' _].
  apply andb_prop in OB' as [N0 OR]. apply Nat.ltb_lt in N0.
  rewrite forallb_forall in DS.
  destruct (contracted_same (sz c) T As Xs out) as [CP CN].
  { intros n; split; intro I; [apply (inclb_In _ _ _ I1)|apply (inclb_In _ _ _ I2)]; auto. }
  { intros n I NO. rewrite forallb_forall in FS. specialize (FS n I). rewrite NO in FS.
    simpl in FS. apply spec_opt_eqb_eq; auto. }
  (* d is summed over its local size Ld in the operands with d; |ord| divides it *)
  destruct (perm_of_In T As Xs A0 d ord PO) as [IA0 [X0 EA0]].
  assert (SpA : forall A, In A As -> has_name (ndims (node_at T A)) d = true ->
            lsize_of (sz c) (ndims (node_at T A)) d =
            match first_spec T As d with Some sh => lsz (sz c) (sz c d) sh | None => 0%nat end).
  { intros A IA HA. specialize (DS A IA). rewrite HA in DS. simpl in DS.
    apply spec_opt_eqb_eq in DS. unfold lsize_of. rewrite DS. auto. }
  set (Ld := match first_spec T As d with Some sh => lsz (sz c) (sz c d) sh | None => 0%nat end) in *.
  assert (NMd : (Ld mod length ord = 0)%nat).
  { pose proof (node_sizes_at _ _ SZ A0) as NS. rewrite EA0 in NS.
    unfold node_sizes_okb in NS. cbn [nop nargs ndims] in NS. apply andb_prop in NS as [_ NS].
    apply andb_prop in NS as [_ NM]. apply Nat.eqb_eq in NM. rewrite <- (SpA A0); auto. }
  assert (InC : In (d, Ld) (contracted (sz c) T Xs out)).
  { apply (Permutation_in _ CP). apply In_contracted_iff. split; [|split; [auto|reflexivity]].
    unfold op_names. apply in_flat_map. exists A0. split; auto. apply has_name_In; auto. }
  assert (NCX : NoDup (map fst (contracted (sz c) T Xs out)))
    by (apply (Permutation_NoDup (Permutation_map fst CP)); auto).
  apply (eqv_by_core c T l r _ _ D _ _ Dr W El Er DE).
  intros rho R x Mx Rx. cbn [core map].
  rewrite (sumover_perm _ _ CP CN).
  set (C' := drop_name d (contracted (sz c) T Xs out)).
  assert (NC' : ~ In d (map fst C')) by apply not_in_drop.
  rewrite !(sumover_front _ d Ld _ x NCX InC). fold C'.
  set (FA := fun j => prodl (map (fun v => v rho j) (map (den c T) As))).
  set (FX := fun j => prodl (map (fun v => v rho j) (map (den c T) Xs))).
  transitivity (sumover C' (fun j => rsum Ld (fun k => FA (upd j d k))) x).
  { transitivity (rsum Ld (fun k => sumover C' (fun j => FA (upd j d k)) x)).
    - apply rsum_ext. intros k _. apply sumover_upd_out; auto.
    - apply (rsum_sumover Ld C' (fun k j => FA (upd j d k)) x). }
  transitivity (sumover C' (fun j => rsum Ld (fun k => FX (upd j d k))) x).
  2:{ transitivity (rsum Ld (fun k => sumover C' (fun j => FX (upd j d k)) x)).
      - symmetry. apply (rsum_sumover Ld C' (fun k j => FX (upd j d k)) x).
      - apply rsum_ext. intros k _. symmetry. apply sumover_upd_out; auto. }
  apply sumover_ext; auto. intros j _.
  rewrite <- (rsum_pidx ord Ld (fun k => FX (upd j d k)) OB NMd).
  apply rsum_ext. intros k Hk. unfold FA, FX. cbv beta. rewrite !map_map. f_equal.
  destruct (forallb2_nth _ _ _ _ _ 1%positive 1%positive LA) as [Len LK].
  apply nth_ext with (d := 0) (d' := 0); [rewrite !map_length; auto|].
  intros kk Hkk. rewrite map_length in Hkk.
  set (pk := pidx ord (Ld / length ord) k).
  rewrite (nth_indep _ _ (den c T 1%positive rho (upd j d k))) by (rewrite map_length; auto).
  rewrite (nth_indep (map _ Xs) _ (den c T 1%positive rho (upd j d pk))) by (rewrite map_length; lia).
  rewrite (map_nth (fun A => den c T A rho (upd j d k))), (map_nth (fun X => den c T X rho (upd j d pk))).
  set (A := nth kk As 1%positive). set (X := nth kk Xs 1%positive).
  specialize (LK kk Hkk). fold A X in LK. unfold plift_arg in LK.
  apply orb_prop in LK as [SA|[EAX NX]%andb_prop].
  - pose proof (is_perm_has T A d ord X SA) as HA.
    assert (LA' : lsize_of (sz c) (ndims (node_at T A)) d = Ld)
      by (apply SpA; auto; apply nth_In; auto).
    rewrite (perm_read_lt c T A d ord X rho (upd j d k) W SZ SA OR) by (rewrite LA', upd_same; auto).
    rewrite LA', upd_same, upd_upd_same. reflexivity.
  - apply Pos.eqb_eq in EAX. rewrite EAX. apply Bool.negb_true_iff in NX.
    rewrite !den_lacks; auto; rewrite <- has_name_In; congruence.
Qed.

(** ** reduce-max-perm: [REDUCE_MAX(PERMUTE(x, d, o), ds) = REDUCE_MAX(x, ds)], [d] among [ds] (no
    name twice), [o] a block order: a maximum over [d] does not depend on the order of its
    blocks ([pidx] maps the positions of [d] onto themselves: [pidx_lt], [pidx_onto]). *)
Lemma rmaxs_ub : forall n f k, (k < n)%nat -> f k <= rmaxs n f.
Proof.
  induction n; intros f k H; [lia|]. destruct n.
  - assert (k = 0%nat) by lia. subst. simpl. lra.
  - rewrite rmaxs_S by lia. destruct (Nat.eq_dec k (S n)) as [->|Nk].
    + apply Rmax_r.
    + eapply Rle_trans; [apply (IHn f k); lia|apply Rmax_l].
Qed.

Lemma rmaxs_attained : forall n f, (0 < n)%nat -> exists k, (k < n)%nat /\ rmaxs n f = f k.
Proof.
  induction n; intros f H; [lia|]. destruct n.
  - exists 0%nat. split; [lia|reflexivity].
  - rewrite rmaxs_S by lia. destruct (IHn f) as [k [Hk E]]; [lia|]. rewrite E.
    destruct (Rle_dec (f k) (f (S n))).
    + exists (S n). split; [lia|]. apply Rmax_right; auto.
    + exists k. split; [lia|]. apply Rmax_left; lra.
Qed.

Lemma rmaxs_reindex : forall n f (p : nat -> nat),
  (forall k, (k < n)%nat -> (p k < n)%nat) ->
  (forall k', (k' < n)%nat -> exists k, (k < n)%nat /\ p k = k') ->
  rmaxs n (fun k => f (p k)) = rmaxs n f.
Proof.
  intros n f p Hin Hsur. destruct n as [|n]; [reflexivity|].
  destruct (rmaxs_attained (S n) (fun k => f (p k))) as [k [Hk E1]]; [lia|].
  destruct (rmaxs_attained (S n) f) as [k' [Hk' E2]]; [lia|].
  apply Rle_antisym.
  - rewrite E1. apply (rmaxs_ub (S n) f (p k)). auto.
  - rewrite E2. destruct (Hsur k' Hk') as [k'' [H1 H2]]. rewrite <- H2.
    apply (rmaxs_ub (S n) (fun k => f (p k)) k''). auto.
Qed.

Lemma pidx_onto : forall o L k', order_b o = true -> (L mod length o = 0)%nat -> (k' < L)%nat ->
  exists k, (k < L)%nat /\ pidx o (L / length o) k = k'.
Proof.
  intros o L k' OB NM H. unfold order_b in OB. apply andb_prop in OB as [OB ND].
  apply andb_prop in OB as [N0 OR]. apply Nat.ltb_lt in N0.
  set (n := length o) in *.
  assert (E : L = (n * (L / n))%nat) by (apply Nat.div_exact; lia).
  set (Bk := (L / n)%nat) in *.
  assert (Bp : (0 < Bk)%nat) by (destruct Bk; lia).
  set (q' := (k' / Bk)%nat). set (r := (k' mod Bk)%nat).
  assert (Q' : (q' < n)%nat) by (apply Nat.div_lt_upper_bound; lia).
  assert (Rr : (r < Bk)%nat) by (apply Nat.mod_upper_bound; lia).
  assert (Pm : Permutation (map N.to_nat o) (seq 0 n)).
  { apply NoDup_Permutation_bis.
    - apply nodup_nb_map; auto.
    - rewrite seq_length, map_length. lia.
    - intros kk I. apply in_map_iff in I as [y [<- I]]. apply in_seq.
      unfold ord_lt in OR. rewrite forallb_forall in OR. specialize (OR y I).
      apply N.ltb_lt in OR. fold n in OR. lia. }
  assert (Iq : In q' (map N.to_nat o)).
  { apply (Permutation_in _ (Permutation_sym Pm)). apply in_seq. lia. }
  apply in_map_iff in Iq as [y [Ey Iy]].
  apply In_nth with (d := 0%N) in Iy as [q [Hq Eq]]. fold n in Hq.
  exists (q * Bk + r)%nat. split; [nia|].
  unfold pidx. fold n Bk.
  assert (Dv : ((q * Bk + r) / Bk = q)%nat).
  { rewrite Nat.div_add_l by lia. rewrite Nat.div_small by lia. lia. }
  assert (Md : ((q * Bk + r) mod Bk = r)%nat).
  { rewrite Nat.add_comm, Nat.mod_add by lia. apply Nat.mod_small; lia. }
  rewrite Dv, Md, Eq, Ey. unfold q', r. rewrite Nat.mul_comm. symmetry. apply Nat.div_mod. lia.
Qed.

Definition chk_reduce_max_perm (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l, node_at T r with
  | Node (OReduceMax ds) [s] Dl, Node (OReduceMax ds') [x] Dr =>
      match node_at T s with
      | Node (OPermute d o) [_] _ =>
          if names_eqb ds ds' && nodup_posb ds && existsb (Pos.eqb d) ds && order_b o &&
             is_perm T s d o x && dims_eqvb Dl Dr
          then Some [] else None
      | _ => None
      end
  | _, _ => None
  end.

Lemma chk_reduce_max_perm_sound : rule_sound chk_reduce_max_perm.
Proof.
  intros G l r h cl H c M _. destruct M as [W [VC [SZ [F [DO P]]]]].
  unfold chk_reduce_max_perm in H. set (T := gT G) in *.
  destruct (node_at T l) as [ol ss Dl] eqn:El. destruct ol; try discriminate.
  destruct ss as [|s [|]]; try discriminate.
  destruct (node_at T r) as [or xs Dr] eqn:Er. destruct or; try discriminate.
  destruct xs as [|x [|]]; try discriminate. rename ds0 into ds'.
  destruct (node_at T s) as [os ys Ds] eqn:Es. destruct os; try discriminate.
  destruct ys as [|y [|]]; try discriminate.
  match type of H with (if ?b then _ else _) = _ => destruct b eqn:B; try discriminate end.
  apply andb_prop in B as [B DE]. apply andb_prop in B as [B SS].
  apply andb_prop in B as [B OB]. apply andb_prop in B as [B EX].
  apply andb_prop in B as [DS NDs].
  apply (list_eqb_eq _ _ (fun a b => proj1 (Pos.eqb_eq a b))) in DS; subst ds'.
  apply nodup_posb_ok in NDs. apply existsb_pos_In in EX.
  pose proof OB as OB'. unfold order_b in OB'. apply andb_prop in OB' as [OB' _].
  apply andb_prop in OB' as [N0 OR]. apply Nat.ltb_lt in N0.
  destruct (is_perm_dims T s d o x SS) as [PS NS].
  pose proof (is_perm_has T s d o x SS) as Hsd. apply has_name_In in Hsd.
  apply (eqv_by_core c T l r _ _ Dl _ _ Dr W El Er DE).
  intros rho R i Mi Ri. cbn [core map]. unfold vat; simpl nth.
  rewrite (map_ext (fun n => (n, lsize_of (sz c) (ndims (node_at T s)) n))
                   (fun n => (n, lsize_of (sz c) (ndims (node_at T x)) n)))
    by (intro n; f_equal; apply lsize_of_perm; auto).
  set (Cx := map (fun n => (n, lsize_of (sz c) (ndims (node_at T x)) n)) ds).
  set (L := lsize_of (sz c) (ndims (node_at T x)) d).
  assert (NCx : NoDup (map fst Cx)) by (unfold Cx; rewrite map_fst_pairs; auto).
  assert (ICx : In (d, L) Cx)
    by (apply (in_map (fun n => (n, lsize_of (sz c) (ndims (node_at T x)) n)) ds d EX)).
  assert (NC' : ~ In d (map fst (drop_name d Cx))) by apply not_in_drop.
  rewrite !(maxover_front Cx d L _ i NCx ICx).
  assert (Ls : lsize_of (sz c) (ndims (node_at T s)) d = L) by (apply lsize_of_perm; auto).
  pose proof (node_sizes_at _ _ SZ s) as NSs. rewrite Es in NSs. unfold node_sizes_okb in NSs.
  cbn [nop nargs ndims] in NSs. apply andb_prop in NSs as [_ NSs].
  apply andb_prop in NSs as [_ NM]. apply Nat.eqb_eq in NM.
  assert (EDs : ndims (node_at T s) = Ds) by (rewrite Es; auto).
  rewrite <- EDs, Ls in NM.
  set (G' := fun k => maxover (drop_name d Cx) (fun j => den c T x rho (upd j d k)) i).
  transitivity (rmaxs L (fun k => G' (pidx o (L / length o) k))).
  { apply rmaxs_ext. intros k Hk. unfold G'. rewrite maxover_upd_out by auto.
    apply maxover_ext; auto. intros j _.
    rewrite (perm_read_lt c T s d o x rho _ W SZ SS OR) by (rewrite upd_same, Ls; auto).
    rewrite upd_same, upd_upd_same, Ls. reflexivity. }
  transitivity (rmaxs L G').
  2:{ apply rmaxs_ext. intros k _. unfold G'. rewrite maxover_upd_out by auto. reflexivity. }
  apply rmaxs_reindex.
  - intros k Hk. apply pidx_lt; auto.
  - intros k' Hk'. apply pidx_onto; auto.
Qed.
