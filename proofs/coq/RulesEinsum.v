(** * RulesEinsum: contractions whose operands come in another order (docs/rules.md).

    einsum-canon: [EINSUM(xs, out) = EINSUM(ys, out')] where [ys] is a permutation of [xs] and
    [out'] lists the names of [out] (the rule sorts them). The sum runs over the same
    contracted dims with the same local sizes, provided every dim's spec is read from an
    operand with the same spec in both orders (checked: [first_spec] agrees on every name),
    and the product of the operands does not depend on their order. *)

From Coq Require Import Reals Lra Lia List QArith ZArith PArith NArith Bool Permutation.
From Coq Require Import FSets.FMapPositive FunctionalExtensionality.
From Shardproof Require Import Base Num Pow Term Props RuleLib Congr RulesBasic.
Import ListNotations.
Open Scope R_scope.

(** ** Permutations of node lists, decided *)
Fixpoint remove1 (x : positive) (l : list positive) : option (list positive) :=
  match l with
  | [] => None
  | y :: r => if Pos.eqb x y then Some r else option_map (cons y) (remove1 x r)
  end.

Fixpoint perm_posb (xs ys : list positive) : bool :=
  match xs with
  | [] => match ys with [] => true | _ => false end
  | x :: r => match remove1 x ys with Some ys' => perm_posb r ys' | None => false end
  end.

Lemma remove1_perm : forall x l l', remove1 x l = Some l' -> Permutation l (x :: l').
Proof.
  intros x l. induction l as [|y l IH]; intros l' H; simpl in H; try discriminate.
  destruct (Pos.eqb_spec x y).
  - injection H as <-. subst. auto.
  - destruct (remove1 x l) as [l0|] eqn:E; try discriminate. simpl in H. injection H as <-.
    apply perm_trans with (y :: x :: l0); [apply perm_skip, IH; auto|apply perm_swap].
Qed.

Lemma perm_posb_ok : forall xs ys, perm_posb xs ys = true -> Permutation xs ys.
Proof.
  induction xs as [|x r IH]; intros ys H; simpl in H.
  - destruct ys; try discriminate; auto.
  - destruct (remove1 x ys) as [ys'|] eqn:E; try discriminate.
    apply perm_trans with (x :: ys'); [apply perm_skip, IH; auto|].
    apply Permutation_sym, remove1_perm; auto.
Qed.

Lemma prodl_Permutation : forall a b, Permutation a b -> prodl a = prodl b.
Proof.
  intros a b P; induction P; simpl; [auto|rewrite IHP; auto|ring|rewrite IHP1, IHP2; auto].
Qed.

(** ** The same names, as sets *)
Definition same_names (o1 o2 : list name) : bool :=
  forallb (fun n => existsb (Pos.eqb n) o2) o1 && forallb (fun n => existsb (Pos.eqb n) o1) o2.

Lemma same_names_ok : forall o1 o2, same_names o1 o2 = true ->
  forall n, existsb (Pos.eqb n) o1 = existsb (Pos.eqb n) o2.
Proof.
  intros o1 o2 H n. apply andb_prop in H as [H1 H2]. rewrite forallb_forall in H1, H2.
  destruct (existsb (Pos.eqb n) o1) eqn:E1; destruct (existsb (Pos.eqb n) o2) eqn:E2; auto.
  - apply existsb_pos_In in E1. rewrite (H1 n E1) in E2. discriminate.
  - apply existsb_pos_In in E2. rewrite (H2 n E2) in E1. discriminate.
Qed.

Definition spec_opt_eqb (a b : option (list shard)) : bool :=
  match a, b with
  | Some x, Some y => list_eqb shard_eqb x y
  | None, None => true
  | _, _ => false
  end.

Lemma spec_opt_eqb_eq : forall a b, spec_opt_eqb a b = true -> a = b.
Proof.
  intros [x|] [y|] H; simpl in H; try discriminate; auto.
  f_equal. apply (list_eqb_eq _ shard_eqb shard_eqb_eq); auto.
Qed.

Definition op_names (T : table) (xs : list positive) : list name :=
  flat_map (fun x => map fst (ndims (node_at T x))) xs.

(** The contracted dims of [EINSUM(xs, o1)] and [EINSUM(ys, o2)]: a permutation. *)
Lemma contracted_reorder : forall s T xs ys o1 o2, Permutation xs ys ->
  (forall n, existsb (Pos.eqb n) o1 = existsb (Pos.eqb n) o2) ->
  (forall n, In n (op_names T xs) -> first_spec T xs n = first_spec T ys n) ->
  Permutation (contracted s T xs o1) (contracted s T ys o2) /\
  NoDup (map fst (contracted s T xs o1)).
Proof.
  intros s T xs ys o1 o2 P O FS. unfold contracted.
  set (f := fun n => negb (existsb (Pos.eqb n) o1)).
  assert (Ef : (fun n => negb (existsb (Pos.eqb n) o2)) = f)
    by (apply functional_extensionality; intro n; unfold f; rewrite O; auto).
  rewrite Ef.
  set (N1 := flat_map (fun x => map fst (ndims (node_at T x))) xs).
  set (N2 := flat_map (fun x => map fst (ndims (node_at T x))) ys).
  assert (SN : forall n, In n N1 <-> In n N2).
  { intros n. unfold N1, N2. rewrite !in_flat_map. split; intros [x [I H]]; exists x; split; auto.
    - apply (Permutation_in _ P); auto.
    - apply (Permutation_in _ (Permutation_sym P)); auto. }
  set (L1 := filter f (nodup_pos N1 [])). set (L2 := filter f (nodup_pos N2 [])).
  assert (PL : Permutation L1 L2).
  { apply NoDup_Permutation; try apply NoDup_filter, NoDup_nodup_pos.
    intros n. unfold L1, L2. rewrite !filter_In, !In_nodup_pos, SN. tauto. }
  split.
  - rewrite (map_ext_in _ (fun n => (n, match first_spec T ys n with
                                         | Some sh => lsz s (s n) sh | None => 0%nat end)) L1).
    + apply Permutation_map; auto.
    + intros n I. unfold L1 in I. apply filter_In in I as [I _]. apply In_nodup_pos in I as [I _].
      rewrite FS; auto.
  - rewrite map_map. simpl. rewrite map_id. apply NoDup_filter, NoDup_nodup_pos.
Qed.

(** ** einsum-canon *)
Definition chk_einsum_canon (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l, node_at T r with
  | Node (OEinsum o1) xs D, Node (OEinsum o2) ys D' =>
      if perm_posb xs ys && same_names o1 o2 && dims_eqvb D D' &&
         forallb (fun n => spec_opt_eqb (first_spec T xs n) (first_spec T ys n)) (op_names T xs)
      then Some [] else None
  | _, _ => None
  end.

Lemma chk_einsum_canon_sound : rule_sound chk_einsum_canon.
Proof.
  intros G l r h cl H c M _. destruct M as [W _].
  unfold chk_einsum_canon in H. destruct (node_at (gT G) l) as [o xs D] eqn:El.
  destruct (node_at (gT G) r) as [o' ys D'] eqn:Er.
  destruct o; try discriminate. destruct o'; try discriminate.
  match type of H with context [if ?b then _ else _] => destruct b eqn:B; [|discriminate] end.
  apply andb_prop in B as [B FS]. apply andb_prop in B as [B DE]. apply andb_prop in B as [PB SN].
  apply perm_posb_ok in PB. pose proof (same_names_ok _ _ SN) as SN'.
  rewrite forallb_forall in FS.
  destruct (contracted_reorder (sz c) (gT G) xs ys out out0 PB SN'
              (fun n I => spec_opt_eqb_eq _ _ (FS n I))) as [CP CN].
  apply (eqv_by_core c (gT G) l r _ _ D _ _ D' W El Er DE).
  intros rho R x _ _. simpl.
  rewrite (sumover_perm _ _ CP CN). f_equal. apply functional_extensionality; intro j.
  apply prodl_Permutation, Permutation_map, Permutation_map; auto.
Qed.

(** ** Contractions that sum over nothing *)
(** Every operand dim is an output name: the einsum contracts nothing. *)
Definition contracts_nothing (T : table) (xs : list positive) (out : list name) : bool :=
  forallb (fun n => existsb (Pos.eqb n) out) (op_names T xs).

Lemma contracted_nil : forall s T xs out, contracts_nothing T xs out = true ->
  contracted s T xs out = [].
Proof.
  intros s T xs out H. unfold contracted.
  destruct (filter _ _) as [|n l] eqn:E; auto. exfalso.
  assert (I : In n (filter (fun n => negb (existsb (Pos.eqb n) out))
                            (nodup_pos (flat_map (fun x => map fst (ndims (node_at T x))) xs) [])))
    by (rewrite E; simpl; auto).
  apply filter_In in I as [I N]. apply In_nodup_pos in I as [I _].
  unfold contracts_nothing in H. rewrite forallb_forall in H. specialize (H n I).
  rewrite H in N. discriminate.
Qed.

(** The output names are exactly the operands' dims (as sets; the rule's guard). *)
Definition out_is_dims (T : table) (xs : list positive) (out : list name) : bool :=
  contracts_nothing T xs out && forallb (fun n => existsb (Pos.eqb n) (op_names T xs)) out.

(** einsum-identity: [EINSUM((x,), out) = x] when [out] names exactly [x]'s dims. *)
Definition chk_einsum_identity (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l with
  | Node (OEinsum o) [x] D =>
      if Pos.eqb x r && out_is_dims T [x] o && dims_eqvb (ndims (node_at T r)) D
      then Some [] else None
  | _ => None
  end.

Lemma chk_einsum_identity_sound : rule_sound chk_einsum_identity.
Proof.
  intros G l r h cl H c M _. destruct M as [W _].
  unfold chk_einsum_identity in H. destruct (node_at (gT G) l) as [o xs D] eqn:El.
  destruct o; try discriminate. destruct xs as [|x [|]]; try discriminate.
  match type of H with context [if ?b then _ else _] => destruct b eqn:B; [|discriminate] end.
  apply andb_prop in B as [B DE]. apply andb_prop in B as [XR OD].
  apply Pos.eqb_eq in XR; subst x. apply andb_prop in OD as [CN _].
  apply (eqv_unary_id c (gT G) W l r (OEinsum out) r D El DE).
  intros rho i. simpl. rewrite (contracted_nil _ _ _ _ CN). simpl. ring.
Qed.

(** einsum-pointwise: [EINSUM(xs, out) = MUL(xs)] when [out] names every operand dim and
    there are at least two operands (the rule's guard). *)
Definition chk_einsum_pointwise (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l, node_at T r with
  | Node (OEinsum o) xs D, Node OMul ys D' =>
      if Nat.leb 2 (length xs) && list_eqb Pos.eqb xs ys && out_is_dims T xs o &&
         dims_eqvb D D'
      then Some [] else None
  | _, _ => None
  end.

Lemma chk_einsum_pointwise_sound : rule_sound chk_einsum_pointwise.
Proof.
  intros G l r h cl H c M _. destruct M as [W _].
  unfold chk_einsum_pointwise in H. destruct (node_at (gT G) l) as [o xs D] eqn:El.
  destruct (node_at (gT G) r) as [o' ys D'] eqn:Er.
  destruct o; try discriminate. destruct o'; try discriminate.
  match type of H with context [if ?b then _ else _] => destruct b eqn:B; [|discriminate] end.
  apply andb_prop in B as [B DE]. apply andb_prop in B as [B OD]. apply andb_prop in B as [_ XY].
  apply (list_eqb_eq _ _ (fun x y => proj1 (Pos.eqb_eq x y))) in XY; subst ys.
  apply andb_prop in OD as [CN _].
  apply (eqv_by_core c (gT G) l r _ _ D _ _ D' W El Er DE).
  intros rho R x _ _. simpl. rewrite (contracted_nil _ _ _ _ CN). reflexivity.
Qed.
