(** * RuleLib: what a rule checker sees and what its soundness lemma states.

    A rule checker gets the certificate's table (with the "varies over" analysis, the size
    facts it may use and the names of positive inputs), the two node ids of a [rule] step and
    a small hint, and answers [Some claims] or [None]. Its soundness lemma ([rule_sound]):
    for every context satisfying [model_ok] in which the claims hold, the two nodes are equal
    on every rank and index. Claims are side conditions the checker could not discharge
    itself: a node non-zero or non-negative in range ([CNZ], [CNN]), or an equality taken
    from a step Coq does not check ([CEq]); they become hypotheses of the final theorem. *)

From Coq Require Import Reals Lra Lia List QArith ZArith PArith NArith Bool Permutation.
From Coq Require Import FSets.FMapPositive FunctionalExtensionality.
From Shardproof Require Import Base Num Pow Term Props.
Import ListNotations.
Open Scope R_scope.

(** ** Boolean equalities *)
Fixpoint list_eqb {A} (f : A -> A -> bool) (l l' : list A) : bool :=
  match l, l' with
  | [], [] => true
  | x :: r, x' :: r' => f x x' && list_eqb f r r'
  | _, _ => false
  end.

Lemma list_eqb_eq : forall A (f : A -> A -> bool), (forall x y, f x y = true -> x = y) ->
  forall l l', list_eqb f l l' = true -> l = l'.
Proof.
  intros A f Hf; induction l as [|x l IH]; destruct l' as [|y l']; simpl; try discriminate; auto.
  intros H; apply andb_prop in H as [H1 H2]. rewrite (Hf _ _ H1), (IH _ H2); auto.
Qed.

Definition Qeqs (q q' : Q) : bool := Z.eqb (Qnum q) (Qnum q') && Pos.eqb (Qden q) (Qden q').

Lemma Qeqs_eq : forall q q', Qeqs q q' = true -> q = q'.
Proof.
  intros [a b] [a' b'] H. unfold Qeqs in H; simpl in H. apply andb_prop in H as [H1 H2].
  apply Z.eqb_eq in H1; apply Pos.eqb_eq in H2; subst; auto.
Qed.

Definition pair_eqb {A B} (f : A -> A -> bool) (g : B -> B -> bool) (p q : A * B) : bool :=
  f (fst p) (fst q) && g (snd p) (snd q).

Lemma pair_eqb_eq : forall A B (f : A -> A -> bool) (g : B -> B -> bool),
  (forall x y, f x y = true -> x = y) -> (forall x y, g x y = true -> x = y) ->
  forall p q, pair_eqb f g p q = true -> p = q.
Proof.
  intros. destruct p, q. unfold pair_eqb in H1; simpl in H1. apply andb_prop in H1 as [A1 A2].
  rewrite (H _ _ A1), (H0 _ _ A2); auto.
Qed.

Definition num_seqb : num -> num -> bool :=
  list_eqb (pair_eqb Qeqs (list_eqb (pair_eqb Pos.eqb Qeqs))).

Lemma num_seqb_eq : forall x y, num_seqb x y = true -> x = y.
Proof.
  apply list_eqb_eq, pair_eqb_eq; [apply Qeqs_eq|].
  apply list_eqb_eq, pair_eqb_eq; [apply Pos.eqb_eq|apply Qeqs_eq].
Qed.

Definition shard_eqb (s s' : shard) : bool :=
  match s, s' with
  | SAx a, SAx a' => Pos.eqb a a'
  | SCh i p, SCh i' p' => N.eqb i i' && N.eqb p p'
  | _, _ => false
  end.

Lemma shard_eqb_eq : forall s s', shard_eqb s s' = true -> s = s'.
Proof.
  intros [a|i p] [a'|i' p'] H; simpl in H; try discriminate.
  - apply Pos.eqb_eq in H; subst; auto.
  - apply andb_prop in H as [H1 H2]. apply N.eqb_eq in H1; apply N.eqb_eq in H2; subst; auto.
Qed.

Definition dimspec_eqb : dimspec -> dimspec -> bool := pair_eqb Pos.eqb (list_eqb shard_eqb).

Lemma dimspec_eqb_eq : forall d d', dimspec_eqb d d' = true -> d = d'.
Proof. apply pair_eqb_eq; [apply Pos.eqb_eq|apply list_eqb_eq, shard_eqb_eq]. Qed.

Definition red_eqb (r r' : red) : bool :=
  match r, r' with RSum, RSum | RMax, RMax => true | _, _ => false end.
Definition dom_eqb (d d' : dom) : bool :=
  match d, d' with DReal, DReal | DPos, DPos | DMask, DMask | DIndex, DIndex => true
  | _, _ => false end.
Definition uop_eqb (u u' : uop) : bool :=
  match u, u' with
  | UNeg, UNeg | URecip, URecip | UExp, UExp | ULog, ULog | USqrt, USqrt | URsqrt, URsqrt
  | USigmoid, USigmoid | USilu, USilu | UTanh, UTanh | UGelu, UGelu | UCast, UCast
  | UStop, UStop | UErf, UErf => true
  | _, _ => false
  end.

Definition names_eqb := list_eqb Pos.eqb.

Definition op_eqb (o o' : op) : bool :=
  match o, o' with
  | OInput n d, OInput n' d' => Pos.eqb n n' && dom_eqb d d'
  | OConst k, OConst k' => num_seqb k k'
  | ODimSize d, ODimSize d' => Pos.eqb d d'
  | OAxisSize a, OAxisSize a' => Pos.eqb a a'
  | ORankConst a l, ORankConst a' l' => Pos.eqb a a' && list_eqb num_seqb l l'
  | OCausal q k, OCausal q' k' => Pos.eqb q q' && Pos.eqb k k'
  | ORope b s h t, ORope b' s' h' t' => Bool.eqb b b' && Pos.eqb s s' && Pos.eqb h h' && Qeqs t t'
  | OAdd, OAdd | OMul, OMul | OMaximum, OMaximum | OWhere, OWhere => true
  | OUn u, OUn u' => uop_eqb u u'
  | OPow e, OPow e' => Qeqs e e'
  | OEinsum o1, OEinsum o2 => names_eqb o1 o2
  | OReduceMax l, OReduceMax l' => names_eqb l l'
  | OOneHot v, OOneHot v' => Pos.eqb v v'
  | OTopk e k, OTopk e' k' => Pos.eqb e e' && N.eqb k k'
  | ORename a b, ORename a' b' => Pos.eqb a a' && Pos.eqb b b'
  | OChunk d p i, OChunk d' p' i' => Pos.eqb d d' && N.eqb p p' && N.eqb i i'
  | OConcat d, OConcat d' => Pos.eqb d d'
  | OPermute d l, OPermute d' l' => Pos.eqb d d' && list_eqb N.eqb l l'
  | OShift d, OShift d' => Pos.eqb d d'
  | OShard d a, OShard d' a' => Pos.eqb d d' && Pos.eqb a a'
  | OPart a, OPart a' => Pos.eqb a a'
  | OAllReduce a r, OAllReduce a' r' => Pos.eqb a a' && red_eqb r r'
  | OAllGather a d, OAllGather a' d' => Pos.eqb a a' && Pos.eqb d d'
  | OReduceScatter a d, OReduceScatter a' d' => Pos.eqb a a' && Pos.eqb d d'
  | OBroadcast a s, OBroadcast a' s' => Pos.eqb a a' && N.eqb s s'
  | OAllToAll a s d, OAllToAll a' s' d' => Pos.eqb a a' && Pos.eqb s s' && Pos.eqb d d'
  | _, _ => false
  end.

Ltac beq_to_eq :=
  repeat match goal with
  | H : _ && _ = true |- _ => apply andb_prop in H as [? ?]
  | H : Pos.eqb _ _ = true |- _ => apply Pos.eqb_eq in H; subst
  | H : N.eqb _ _ = true |- _ => apply N.eqb_eq in H; subst
  | H : Nat.eqb _ _ = true |- _ => apply Nat.eqb_eq in H; subst
  | H : Z.eqb _ _ = true |- _ => apply Z.eqb_eq in H; subst
  | H : Bool.eqb _ _ = true |- _ => apply Bool.eqb_prop in H; subst
  | H : Qeqs _ _ = true |- _ => apply Qeqs_eq in H; subst
  | H : num_seqb _ _ = true |- _ => apply num_seqb_eq in H; subst
  | H : names_eqb _ _ = true |- _ => apply (list_eqb_eq _ _ (fun x y => proj1 (Pos.eqb_eq x y))) in H; subst
  | H : list_eqb num_seqb _ _ = true |- _ => apply (list_eqb_eq _ _ num_seqb_eq) in H; subst
  | H : list_eqb N.eqb _ _ = true |- _ => apply (list_eqb_eq _ _ (fun x y => proj1 (N.eqb_eq x y))) in H; subst
  end.

Lemma op_eqb_eq : forall o o', op_eqb o o' = true -> o = o'.
Proof.
  intros [] [] H; simpl in H; try discriminate; beq_to_eq; auto.
  - destruct d, d0; simpl in *; try discriminate; auto.
  - destruct u, u0; simpl in *; try discriminate; auto.
  - destruct r, r0; simpl in *; try discriminate; auto.
Qed.

(** ** Dims compared as sets *)
Fixpoint nodup_posb (l : list name) : bool :=
  match l with [] => true | x :: r => negb (existsb (Pos.eqb x) r) && nodup_posb r end.

Lemma nodup_posb_ok : forall l, nodup_posb l = true -> NoDup l.
Proof.
  induction l as [|x l IH]; simpl; intros H; constructor; apply andb_prop in H as [H1 H2]; auto.
  intro I. apply Bool.negb_true_iff in H1. assert (existsb (Pos.eqb x) l = true); [|congruence].
  apply existsb_exists. exists x; split; auto. apply Pos.eqb_refl.
Qed.

Definition dims_eqvb (D1 D2 : list dimspec) : bool :=
  Nat.eqb (length D1) (length D2) && nodup_posb (map fst D1) &&
  forallb (fun d => existsb (dimspec_eqb d) D2) D1.

Lemma dims_eqvb_perm : forall D1 D2, dims_eqvb D1 D2 = true ->
  Permutation D1 D2 /\ NoDup (map fst D1).
Proof.
  intros D1 D2 H. unfold dims_eqvb in H. apply andb_prop in H as [H H3].
  apply andb_prop in H as [H1 H2]. apply Nat.eqb_eq in H1. apply nodup_posb_ok in H2.
  split; auto. apply NoDup_Permutation_bis; auto.
  - apply NoDup_map_inv with (f := fst); auto.
  - lia.
  - intros d Hd. rewrite forallb_forall in H3. apply H3 in Hd.
    apply existsb_exists in Hd as [d' [I E]]. apply dimspec_eqb_eq in E; subst; auto.
Qed.

Lemma spec_of_perm : forall D1 D2, Permutation D1 D2 -> NoDup (map fst D1) ->
  forall n, spec_of D1 n = spec_of D2 n.
Proof.
  intros D1 D2 P. induction P; intros ND n; simpl; auto.
  - destruct x as [m sh]. destruct (Pos.eqb m n); auto. apply IHP. inversion ND; auto.
  - destruct x as [m sh], y as [m' sh']. simpl in ND. inversion ND; subst.
    destruct (Pos.eqb_spec m n), (Pos.eqb_spec m' n); subst; auto.
    exfalso. apply H1. simpl; auto.
  - rewrite IHP1 by auto. apply IHP2. apply (Permutation_NoDup (Permutation_map fst P1)); auto.
Qed.

Lemma msk_perm : forall s D1 D2 x, Permutation D1 D2 -> msk s D1 x = msk s D2 x.
Proof.
  intros s D1 D2 x P. unfold msk. induction P; simpl; auto.
  - rewrite IHP; auto.
  - destruct (Nat.ltb _ _), (Nat.ltb _ _); auto.
  - congruence.
Qed.

Lemma has_name_perm : forall D1 D2 n, Permutation D1 D2 -> has_name D1 n = has_name D2 n.
Proof.
  intros. destruct (has_name D1 n) eqn:E1, (has_name D2 n) eqn:E2; auto.
  - apply has_name_In in E1. apply (Permutation_in _ (Permutation_map fst H)) in E1.
    apply has_name_In in E1; congruence.
  - apply has_name_In in E2. apply (Permutation_in _ (Permutation_map fst (Permutation_sym H))) in E2.
    apply has_name_In in E2; congruence.
Qed.

Lemma restrict_perm : forall D1 D2 x, Permutation D1 D2 -> restrict D1 x = restrict D2 x.
Proof.
  intros. apply functional_extensionality; intro n. unfold restrict.
  rewrite (has_name_perm D1 D2 n H); auto.
Qed.

Lemma lsize_of_perm : forall s D1 D2 n, Permutation D1 D2 -> NoDup (map fst D1) ->
  lsize_of s D1 n = lsize_of s D2 n.
Proof. intros. unfold lsize_of. rewrite (spec_of_perm D1 D2); auto. Qed.

(** ** The certificate-wide data a checker reads *)

(** A sign set: which of [< 0], [= 0], [> 0] a value may have ([Signs.v]). *)
Record sset := SS { sneg : bool; szero : bool; spos : bool }.

Record gctx := GCtx {
  gT : table;                         (* the node table *)
  gvt : vtab;                         (* mesh axes each node varies over (checked) *)
  gF : list (name * N);               (* size facts the proofs may use: sz n = v *)
  gpos : PositiveMap.t unit;          (* names of inputs of domain "positive" *)
  gsg : PositiveMap.t (sset * bool)   (* sign set and definedness per node: Signs.sign_tab,
                                         verified (Signs.sg_checkb) by each checker using it *)
}.

(* every dim of the binding has size >= 1; every shard divides what is left of its dim *)
Fixpoint spec_divb (s : name -> nat) (n : nat) (sh : list shard) : bool :=
  match sh with
  | [] => true
  | x :: r => Nat.ltb 0 (kof s x) && Nat.eqb (n mod kof s x) 0%nat && spec_divb s (n / kof s x)%nat r
  end.

Definition node_sizes_okb (s : name -> nat) (T : table) (nd : node) : bool :=
  forallb (fun d => spec_divb s (s (fst d)) (snd d)) (ndims nd) &&
  match nop nd, nargs nd with
  | ORename old new, [x] =>
      Nat.eqb (lsize_of s (ndims (node_at T x)) old) (lsize_of s (ndims nd) new)
  | OConcat d, xs =>
      Nat.eqb (fold_right Nat.add 0%nat (map (fun x => lsize_of s (ndims (node_at T x)) d) xs))
              (lsize_of s (ndims nd) d)
  | OPermute d o, _ => Nat.ltb 0 (length o) && Nat.eqb (lsize_of s (ndims nd) d mod length o) 0%nat
  | OAllGather a d, _ => spec_divb s (s d) (match spec_of (ndims nd) d with
                                             Some sh => sh | None => [] end ++ [SAx a])
  | OAllToAll a _ cd, _ => spec_divb s (s cd) (match spec_of (ndims nd) cd with
                                             Some sh => sh | None => [] end ++ [SAx a])
  | OBroadcast a src, _ => Nat.ltb (N.to_nat src) (s a)
  | _, _ => true
  end.

Definition sizes_ok (s : name -> nat) (T : table) : Prop :=
  (forall n, (1 <= s n)%nat) /\
  (forall i nd, PositiveMap.find i T = Some nd -> node_sizes_okb s T nd = true).

Definition dom_ok (c : ctx) (G : gctx) : Prop :=
  forall nm, PositiveMap.find nm (gpos G) = Some tt -> forall x, 0 < env c nm x.

Definition model_ok (G : gctx) (c : ctx) : Prop :=
  wf_table (gT G) /\ vary_checkb (gT G) (gvt G) = true /\ sizes_ok (sz c) (gT G) /\
  (forall n v, In (n, v) (gF G) -> sz c n = N.to_nat v) /\ dom_ok c G /\ po_ok c.

Inductive claim := CNZ (z : positive) | CNN (z : positive) | CEq (l r : positive).

Definition holds (c : ctx) (T : table) (k : claim) : Prop :=
  match k with
  | CNZ z => forall rho, rk_ok (sz c) rho -> forall x, msk (sz c) (ndims (node_at T z)) x = true ->
               den c T z rho x <> 0
  | CNN z => forall rho, rk_ok (sz c) rho -> forall x, 0 <= den c T z rho x
  | CEq l r => eqv c T l r
  end.

Definition hint := list N.

Definition rule_sound (chk : gctx -> positive -> positive -> hint -> option (list claim)) :=
  forall G l r h cl, chk G l r h = Some cl -> forall c, model_ok G c ->
  (forall k, In k cl -> holds c (gT G) k) -> eqv c (gT G) l r.

(** ** Tools for proofs about particular nodes *)
Lemma den_node : forall c T i o xs D, wf_table T -> node_at T i = Node o xs D ->
  forall rho x, den c T i rho x =
    if msk (sz c) D x then core c T o xs D (map (den c T) xs) rho (restrict D x) else 0.
Proof. intros. rewrite den_unfold by auto. rewrite H0; auto. Qed.

(** Two nodes with set-equal dims: equal in range is equal. *)
Lemma eqv_by_core : forall c T l r o1 xs1 D1 o2 xs2 D2,
  wf_table T -> node_at T l = Node o1 xs1 D1 -> node_at T r = Node o2 xs2 D2 ->
  dims_eqvb D1 D2 = true ->
  (forall rho, rk_ok (sz c) rho -> forall x, msk (sz c) D1 x = true -> restrict D1 x = x ->
     core c T o1 xs1 D1 (map (den c T) xs1) rho x = core c T o2 xs2 D2 (map (den c T) xs2) rho x) ->
  eqv c T l r.
Proof.
  intros c T l r o1 xs1 D1 o2 xs2 D2 W E1 E2 DE H rho R x.
  destruct (dims_eqvb_perm _ _ DE) as [P ND].
  rewrite (den_node c T l o1 xs1 D1), (den_node c T r o2 xs2 D2) by auto.
  rewrite <- (msk_perm _ _ _ x P), <- (restrict_perm _ _ x P).
  destruct (msk (sz c) D1 x) eqn:M; auto. apply H; auto.
  - rewrite msk_restrict; auto.
  - apply restrict_restrict.
Qed.

(** Inverting a checker's answer. *)
Ltac inv_chk H :=
  repeat match type of H with
  | context [match ?x with _ => _ end] => let E := fresh "E" in destruct x eqn:E; try discriminate
  | context [if ?b then _ else _] => let E := fresh "E" in destruct b eqn:E; try discriminate
  end.
