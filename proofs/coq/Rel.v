(** * Rel: two terms related node by node.

    A relation [R] (node [u] of one term to node [v] of another) whose every pair is either a
    *base* pair (known equal, e.g. an input and its renamed input, or a cut point and its
    variable) or a *structural* pair (same op and dims, children related by [R]) relates equal
    values ([rel_sound]). The relation is computed by a walk ([rel_walk]) and then checked pair
    by pair, so the walk itself needs no proof. Renaming ([rename] steps, reused obligations)
    and substitution ([cut] steps) are both instances. *)

From Coq Require Import Reals Lra Lia List QArith ZArith PArith NArith Bool Permutation.
From Coq Require Import FSets.FMapPositive FunctionalExtensionality.
From Shardproof Require Import Base Num Pow Term Props RuleLib Congr.
Import ListNotations.
Open Scope R_scope.

Definition pmap := PositiveMap.t positive.
Definition rget (R : pmap) (u : positive) : option positive := PositiveMap.find u R.

Fixpoint forallb2 {A B} (f : A -> B -> bool) (l1 : list A) (l2 : list B) : bool :=
  match l1, l2 with
  | [], [] => true
  | x :: r1, y :: r2 => f x y && forallb2 f r1 r2
  | _, _ => false
  end.

Lemma forallb2_nth : forall A B (f : A -> B -> bool) l1 l2 da db, forallb2 f l1 l2 = true ->
  length l1 = length l2 /\ forall k, (k < length l1)%nat -> f (nth k l1 da) (nth k l2 db) = true.
Proof.
  induction l1 as [|x l1 IH]; destruct l2 as [|y l2]; simpl; intros; try discriminate.
  - split; auto; intros; lia.
  - apply andb_prop in H as [H1 H2]. destruct (IH l2 da db H2) as [L F]. split; [lia|].
    intros [|k] Hk; auto. apply F; lia.
Qed.

Definition is_input (o : op) : bool := match o with OInput _ _ => true | _ => false end.

Definition struct_okb (T : table) (R : pmap) (u v : positive) : bool :=
  let nu := node_at T u in
  let nv := node_at T v in
  negb (is_input (nop nu)) && op_eqb (nop nu) (nop nv) && dims_eqvb (ndims nu) (ndims nv) &&
  forallb2 (fun a b => match rget R a with Some b' => Pos.eqb b b' | None => false end &&
                       dims_eqvb (ndims (node_at T a)) (ndims (node_at T b)))
           (nargs nu) (nargs nv).

Lemma node_sizes_at : forall s T, sizes_ok s T -> forall i, node_sizes_okb s T (node_at T i) = true.
Proof.
  intros s T [_ H] i. unfold node_at. destruct (PositiveMap.find i T) eqn:E; eauto.
Qed.

Lemma core_ctx : forall c1 c2 T o xs D vs, sz c1 = sz c2 -> po c1 = po c2 -> uf c1 = uf c2 ->
  is_input o = false -> core c1 T o xs D vs = core c2 T o xs D vs.
Proof.
  intros. unfold core. rewrite H, H0. destruct o; simpl in H2; try discriminate; auto.
  unfold uval. rewrite H1; auto.
Qed.

(** Nodes with the same (non-input) op and dims whose children are pairwise equal. *)
Lemma struct_eqv : forall c1 c2 T u v o xs ys D1 D2,
  sz c1 = sz c2 -> po c1 = po c2 -> uf c1 = uf c2 -> po_ok c1 -> wf_table T -> sizes_ok (sz c1) T ->
  node_at T u = Node o xs D1 -> node_at T v = Node o ys D2 -> is_input o = false ->
  dims_eqvb D1 D2 = true -> length xs = length ys ->
  (forall k, (k < length xs)%nat ->
     dims_eqvb (ndims (node_at T (nth k xs 1%positive))) (ndims (node_at T (nth k ys 1%positive))) = true /\
     forall rho, rk_ok (sz c1) rho -> den c1 T (nth k xs 1%positive) rho = den c2 T (nth k ys 1%positive) rho) ->
  forall rho, rk_ok (sz c1) rho -> den c1 T u rho = den c2 T v rho.
Proof.
  intros c1 c2 T u v o xs ys D1 D2 Hsz Hpo Huf P1 W SZ Eu Ev NI DE L CH rho Rr.
  apply functional_extensionality; intro x.
  rewrite (den_node c1 T u o xs D1 W Eu), (den_node c2 T v o ys D2 W Ev).
  destruct (dims_eqvb_perm _ _ DE) as [P ND].
  rewrite <- Hsz. rewrite <- (msk_perm _ _ _ x P), <- (restrict_perm _ _ x P).
  destruct (msk (sz c1) D1 x) eqn:M; auto.
  rewrite <- (core_ctx c1 c2 T o ys D2) by auto.
  apply (core_congr c1 c1 eq_refl eq_refl eq_refl P1 (proj1 SZ) T); auto.
  - intros nm d E; subst; simpl in NI; discriminate.
  - rewrite <- Eu. apply node_sizes_at; auto.
  - rewrite map_length; auto.
  - rewrite map_length; auto.
  - intros k Hk. apply dims_eqvb_perm, (CH k Hk).
  - intros k r Rk. unfold vat.
    destruct (Nat.lt_ge_cases k (length xs)) as [Hk|Hk].
    + rewrite (nth_indep _ _ (den c1 T 1%positive)) by (rewrite map_length; auto).
      rewrite (nth_indep (map (den c2 T) ys) _ (den c2 T 1%positive)) by (rewrite map_length; lia).
      rewrite !map_nth. apply (CH k Hk); auto.
    + rewrite !nth_overflow by (rewrite map_length; lia). auto.
  - rewrite msk_restrict; auto.
  - apply restrict_restrict.
Qed.

Section Rel.
Variables c1 c2 : ctx.
Hypothesis Hsz : sz c1 = sz c2.
Hypothesis Hpo : po c1 = po c2.
Hypothesis Huf : uf c1 = uf c2.
Hypothesis P1 : po_ok c1.
Variable T : table.
Hypothesis W : wf_table T.
Hypothesis SZ : sizes_ok (sz c1) T.
Variable R : pmap.
Variable base : positive -> positive -> Prop.
Hypothesis HB : forall u v, base u v -> forall rho, rk_ok (sz c1) rho -> den c1 T u rho = den c2 T v rho.
Hypothesis HR : forall u v, rget R u = Some v -> base u v \/ struct_okb T R u v = true.

Lemma rel_sound : forall u v, rget R u = Some v ->
  forall rho, rk_ok (sz c1) rho -> den c1 T u rho = den c2 T v rho.
Proof.
  intro u.
  induction u as [u IH] using (well_founded_ind (Wf_nat.well_founded_ltof _ Pos.to_nat)).
  intros v Ruv rho Rr. destruct (HR u v Ruv) as [B|S]; [apply HB; auto|].
  unfold struct_okb in S. destruct (node_at T u) as [o1 xs1 D1] eqn:Eu.
  destruct (node_at T v) as [o2 xs2 D2] eqn:Ev. simpl in S.
  apply andb_prop in S as [S CHS]. apply andb_prop in S as [S DE].
  apply andb_prop in S as [NI OE]. apply op_eqb_eq in OE; subst o2.
  apply Bool.negb_true_iff in NI.
  destruct (forallb2_nth _ _ _ _ _ 1%positive 1%positive CHS) as [L CH].
  apply (struct_eqv c1 c2 T u v o1 xs1 xs2 D1 D2); auto.
  intros k Hk. specialize (CH k Hk). apply andb_prop in CH as [CR CD]. split; auto.
  intros r Rk. destruct (rget R (nth k xs1 1%positive)) eqn:Rc; try discriminate.
  apply Pos.eqb_eq in CR; subst. apply (IH (nth k xs1 1%positive)); auto.
  unfold Wf_nat.ltof. apply Pos2Nat.inj_lt.
  pose proof (node_args_lt T u W) as A. rewrite Eu in A. simpl in A.
  rewrite Forall_forall in A. apply A, nth_In; auto.
Qed.
End Rel.

(** ** Walking two terms side by side.
    [loop] runs its step up to 2^n times with a small [n] (no large unary numbers), and stops
    as soon as [done] holds. *)
Fixpoint loop {St} (n : nat) (f : St -> St) (done : St -> bool) (s : St) : St :=
  if done s then s else match n with O => f s | S k => loop k f done (loop k f done s) end.

Definition walk_done (st : option (list (positive * positive) * pmap)) : bool :=
  match st with None => true | Some ([], _) => true | Some _ => false end.

(** Worklist state: pending pairs, the relation so far, or a failure. [leaf u v] answers
    [Some true] when the pair is a base pair (stop), [Some false] to go on structurally, [None]
    to fail. *)
Definition walk_step (T : table) (leaf : positive -> positive -> option bool)
  (st : option (list (positive * positive) * pmap)) : option (list (positive * positive) * pmap) :=
  match st with
  | None => None
  | Some ([], R) => Some ([], R)
  | Some ((u, v) :: todo, R) =>
      match rget R u with
      | Some v' => if Pos.eqb v v' then Some (todo, R) else None
      | None =>
          let R' := PositiveMap.add u v R in
          match leaf u v with
          | None => None
          | Some true => Some (todo, R')
          | Some false =>
              let xs := nargs (node_at T u) in
              let ys := nargs (node_at T v) in
              if Nat.eqb (length xs) (length ys) then Some (combine xs ys ++ todo, R') else None
          end
      end
  end.

(** [fuel] is a parameter (a certificate passes 40: up to 2^40 steps) so that no definition
    below can be unfolded while it is being elaborated. *)
Definition walk_all (fuel : nat) (T : table) (leaf : positive -> positive -> option bool)
  (roots : list (positive * positive)) : option (list (positive * positive) * pmap) :=
  loop fuel (walk_step T leaf) walk_done (Some (roots, PositiveMap.empty positive)).

Definition walk_result (st : option (list (positive * positive) * pmap)) : option pmap :=
  match st with
  | Some (todo, R) => match todo with [] => Some R | _ => None end
  | None => None
  end.

Definition rel_walk (fuel : nat) (T : table) (leaf : positive -> positive -> option bool)
  (roots : list (positive * positive)) : option pmap :=
  walk_result (walk_all fuel T leaf roots).
