(** * Base: names, index updates, finite sums and maxima over [0, n).

    Part of shardproof's Coq library (docs/coq.md). Dims, mesh axes and input names are
    [positive] numbers (the exporter interns strings); an index assigns a natural number to
    every dim name, a rank assigns a coordinate to every mesh axis. *)

From Coq Require Import Reals Lra Lia List Arith PArith Permutation FunctionalExtensionality.
Import ListNotations.
Open Scope R_scope.

Definition name := positive.
Definition Ix := name -> nat.
Definition Rk := name -> nat.

(** [upd f n v]: [f] with the entry of [n] set to [v]. *)
Definition upd (f : name -> nat) (n : name) (v : nat) : name -> nat :=
  fun m => if Pos.eqb m n then v else f m.

Lemma upd_same : forall f n v, upd f n v n = v.
Proof. intros; unfold upd; now rewrite Pos.eqb_refl. Qed.

Lemma upd_other : forall f n v m, m <> n -> upd f n v m = f m.
Proof. intros; unfold upd; now rewrite (proj2 (Pos.eqb_neq m n) H). Qed.

(** Index and rank functions are compared with functional extensionality (the library's
    only axiom beside those of Coq's real numbers; docs/coq.md). *)
Lemma upd_upd_same : forall f n v w, upd (upd f n v) n w = upd f n w.
Proof.
  intros; apply functional_extensionality; intro m; unfold upd; destruct (Pos.eqb m n); auto.
Qed.

Lemma upd_comm : forall f n v n' v', n <> n' ->
  upd (upd f n v) n' v' = upd (upd f n' v') n v.
Proof.
  intros; apply functional_extensionality; intro m; unfold upd.
  destruct (Pos.eqb_spec m n'), (Pos.eqb_spec m n); subst; auto; congruence.
Qed.

Lemma upd_id : forall f n, upd f n (f n) = f.
Proof.
  intros; apply functional_extensionality; intro m; unfold upd.
  destruct (Pos.eqb_spec m n); subst; auto.
Qed.

(** ** Finite sums [rsum n f = f 0 + ... + f (n-1)] *)
Fixpoint rsum (n : nat) (f : nat -> R) : R :=
  match n with O => 0 | S k => rsum k f + f k end.

Lemma rsum_ext : forall n f g, (forall i, (i < n)%nat -> f i = g i) -> rsum n f = rsum n g.
Proof.
  induction n; intros; simpl; auto.
  rewrite (IHn f g) by (intros; apply H; lia). rewrite (H n) by lia. reflexivity.
Qed.

Lemma rsum_zero : forall n, rsum n (fun _ => 0) = 0.
Proof. induction n; simpl; auto. rewrite IHn; ring. Qed.

Lemma rsum_plus : forall n f g, rsum n (fun i => f i + g i) = rsum n f + rsum n g.
Proof. induction n; intros; simpl; [ring|]. rewrite IHn; ring. Qed.

Lemma rsum_scal_l : forall n c f, rsum n (fun i => c * f i) = c * rsum n f.
Proof. induction n; intros; simpl; [ring|]. rewrite IHn; ring. Qed.

Lemma rsum_scal_r : forall n c f, rsum n (fun i => f i * c) = rsum n f * c.
Proof. induction n; intros; simpl; [ring|]. rewrite IHn; ring. Qed.

Lemma rsum_const : forall n c, rsum n (fun _ => c) = INR n * c.
Proof. induction n; intros; simpl rsum; [simpl; ring|]. rewrite IHn, S_INR; ring. Qed.

Lemma rsum_add_len : forall a b f, rsum (a + b) f = rsum a f + rsum b (fun j => f (a + j)%nat).
Proof.
  intros a b; induction b; intros; simpl.
  - rewrite Nat.add_0_r; ring.
  - rewrite Nat.add_succ_r; simpl; rewrite IHb; ring.
Qed.

(** A sum over [a * b] positions is the sum over [a] blocks of [b] (the row-parallel law). *)
Lemma rsum_blocks : forall a b f,
  rsum (a * b) f = rsum a (fun r => rsum b (fun j => f (r * b + j)%nat)).
Proof.
  induction a; intros; simpl; auto.
  rewrite Nat.add_comm, rsum_add_len, IHa. reflexivity.
Qed.

Lemma rsum_swap : forall n m (f : nat -> nat -> R),
  rsum n (fun i => rsum m (fun j => f i j)) = rsum m (fun j => rsum n (fun i => f i j)).
Proof.
  induction n; intros; simpl.
  - rewrite rsum_zero; auto.
  - rewrite IHn, <- rsum_plus; auto.
Qed.

Lemma rsum_lin : forall n (l : list (nat -> R)),
  rsum n (fun i => fold_right Rplus 0 (map (fun f => f i) l)) =
  fold_right Rplus 0 (map (fun f => rsum n f) l).
Proof.
  intros n l; induction l; simpl.
  - apply rsum_zero.
  - rewrite rsum_plus, IHl; auto.
Qed.

Ltac rmax_crush := cbv beta; unfold Rmax;
  repeat match goal with
         | |- context [Rle_dec ?x ?y] =>
             lazymatch x with context [Rle_dec _ _] => fail | _ =>
             lazymatch y with context [Rle_dec _ _] => fail | _ =>
             destruct (Rle_dec x y) end end
         end; lra.

(** ** Finite maxima; the maximum over no position is 0 (both sides of every law agree on it) *)
Fixpoint rmaxs (n : nat) (f : nat -> R) : R :=
  match n with
  | O => 0
  | S k => match k with O => f O | _ => Rmax (rmaxs k f) (f k) end
  end.

Lemma rmaxs_S : forall k f, (k > 0)%nat -> rmaxs (S k) f = Rmax (rmaxs k f) (f k).
Proof. intros; destruct k; [lia|reflexivity]. Qed.

Lemma rmaxs_ext : forall n f g, (forall i, (i < n)%nat -> f i = g i) -> rmaxs n f = rmaxs n g.
Proof.
  induction n; intros; auto.
  destruct n.
  - simpl; apply H; lia.
  - rewrite !rmaxs_S by lia. rewrite (IHn f g) by (intros; apply H; lia).
    rewrite (H (S n)) by lia; auto.
Qed.

Lemma rmaxs_const : forall n c, (n > 0)%nat -> rmaxs n (fun _ => c) = c.
Proof.
  induction n; intros; [lia|]. destruct n; auto.
  rewrite rmaxs_S by lia. rewrite IHn by lia. rmax_crush.
Qed.

Lemma Rmax_assoc : forall a b c, Rmax a (Rmax b c) = Rmax (Rmax a b) c.
Proof. intros; rmax_crush. Qed.

Lemma Rmax_4 : forall a b c d, Rmax (Rmax a b) (Rmax c d) = Rmax (Rmax a c) (Rmax b d).
Proof. intros; rmax_crush. Qed.

Lemma Rmax_comm' : forall a b, Rmax a b = Rmax b a.
Proof. intros; apply Rmax_comm. Qed.

Lemma rmaxs_add_len : forall a b f, (a > 0)%nat -> (b > 0)%nat ->
  rmaxs (a + b) f = Rmax (rmaxs a f) (rmaxs b (fun j => f (a + j)%nat)).
Proof.
  intros a b f Ha; induction b; intros; [lia|].
  destruct b.
  - rewrite Nat.add_1_r, rmaxs_S by lia. simpl. rewrite Nat.add_0_r; auto.
  - rewrite Nat.add_succ_r, rmaxs_S by lia. rewrite IHb by lia.
    rewrite (rmaxs_S (S b)) by lia. rewrite Rmax_assoc. f_equal.
Qed.

Lemma rmaxs_blocks : forall a b f,
  rmaxs (a * b) f = rmaxs a (fun r => rmaxs b (fun j => f (r * b + j)%nat)).
Proof.
  intros a b f. destruct b.
  - rewrite Nat.mul_0_r. simpl. destruct a; auto. rewrite rmaxs_const by lia; auto.
  - induction a; auto.
    destruct a.
    + replace (1 * S b)%nat with (S b) by lia.
      change (rmaxs 1 ?g) with (g 0%nat); cbv beta.
      apply rmaxs_ext; intros; f_equal; lia.
    + replace (S (S a) * S b)%nat with (S a * S b + S b)%nat by lia.
      rewrite rmaxs_add_len by lia. rewrite IHa, (rmaxs_S (S a)) by lia. reflexivity.
Qed.

Lemma rmaxs_Rmax : forall k (g h : nat -> R), (k > 0)%nat ->
  rmaxs k (fun j => Rmax (g j) (h j)) = Rmax (rmaxs k g) (rmaxs k h).
Proof.
  induction k; intros; [lia|]. destruct k; auto.
  rewrite !rmaxs_S by lia. rewrite IHk by lia. apply Rmax_4.
Qed.

Lemma rmaxs_swap : forall n m (f : nat -> nat -> R),
  rmaxs n (fun i => rmaxs m (fun j => f i j)) = rmaxs m (fun j => rmaxs n (fun i => f i j)).
Proof.
  intros n m f. destruct m.
  { change (rmaxs n (fun _ => 0) = 0). destruct n; auto. apply rmaxs_const; lia. }
  destruct n.
  { change (0 = rmaxs (S m) (fun _ => 0)). symmetry; apply rmaxs_const; lia. }
  induction n.
  - change (rmaxs (S m) (fun j => f 0%nat j) = rmaxs (S m) (fun j => f 0%nat j)); auto.
  - rewrite rmaxs_S by lia. rewrite IHn.
    rewrite <- rmaxs_Rmax by lia. apply rmaxs_ext; intros. rewrite (rmaxs_S (S n)) by lia; auto.
Qed.

(** ** Sums and maxima over several dims: [sumover [(n1,L1); ...] f ι] sums [f] over every
    assignment of the listed names within their sizes, the other names as in [ι]. *)
Fixpoint sumover (C : list (name * nat)) (f : Ix -> R) (i : Ix) : R :=
  match C with
  | [] => f i
  | (n, L) :: C' => rsum L (fun j => sumover C' f (upd i n j))
  end.

Fixpoint maxover (C : list (name * nat)) (f : Ix -> R) (i : Ix) : R :=
  match C with
  | [] => f i
  | (n, L) :: C' => rmaxs L (fun j => maxover C' f (upd i n j))
  end.

(** The sum reads [i] only outside the summed names. *)
Lemma sumover_ext : forall C f g i i',
  (forall m, ~ In m (map fst C) -> i m = i' m) ->
  (forall j, (forall m, ~ In m (map fst C) -> j m = i m) -> f j = g j) ->
  sumover C f i = sumover C g i'.
Proof.
  induction C as [|[n L] C IH]; intros; simpl.
  - replace i' with i. apply H0; auto.
    apply functional_extensionality; intro m; apply H; auto.
  - apply rsum_ext; intros. apply IH.
    + intros m Hm. unfold upd. destruct (Pos.eqb_spec m n); auto.
      apply H. simpl; intros [E|E]; auto.
    + intros j Hj. apply H0. intros m Hm. rewrite Hj.
      * unfold upd. destruct (Pos.eqb_spec m n); auto. subst; simpl in Hm; tauto.
      * simpl in Hm; tauto.
Qed.

Lemma maxover_ext : forall C f g i i',
  (forall m, ~ In m (map fst C) -> i m = i' m) ->
  (forall j, (forall m, ~ In m (map fst C) -> j m = i m) -> f j = g j) ->
  maxover C f i = maxover C g i'.
Proof.
  induction C as [|[n L] C IH]; intros; simpl.
  - replace i' with i. apply H0; auto.
    apply functional_extensionality; intro m; apply H; auto.
  - apply rmaxs_ext; intros. apply IH.
    + intros m Hm. unfold upd. destruct (Pos.eqb_spec m n); auto.
      apply H. simpl; intros [E|E]; auto.
    + intros j Hj. apply H0. intros m Hm. rewrite Hj.
      * unfold upd. destruct (Pos.eqb_spec m n); auto. subst; simpl in Hm; tauto.
      * simpl in Hm; tauto.
Qed.

(** Functions of the index only through a set of names. *)
Definition ix_agree (S : list name) (i j : Ix) := forall m, In m S -> i m = j m.

Lemma sumover_swap2 : forall n L n' L' C f i, n <> n' ->
  sumover ((n, L) :: (n', L') :: C) f i = sumover ((n', L') :: (n, L) :: C) f i.
Proof.
  intros; simpl. rewrite rsum_swap. apply rsum_ext; intros. apply rsum_ext; intros.
  now rewrite upd_comm.
Qed.

Lemma sumover_perm : forall C C', Permutation C C' -> NoDup (map fst C) ->
  forall f i, sumover C f i = sumover C' f i.
Proof.
  intros C C' P. induction P; intros Hnd f i; auto.
  - destruct x as [n L]. simpl. apply rsum_ext; intros. apply IHP; auto.
    simpl in Hnd; inversion Hnd; auto.
  - destruct x as [n L], y as [n' L']. simpl in Hnd. inversion Hnd; subst.
    rewrite sumover_swap2. reflexivity. intro E; subst. apply H1; simpl; auto.
  - rewrite IHP1 by auto. apply IHP2; auto.
    apply (Permutation_NoDup (Permutation_map fst P1)); auto.
Qed.

Lemma maxover_swap2 : forall n L n' L' C f i, n <> n' ->
  maxover ((n, L) :: (n', L') :: C) f i = maxover ((n', L') :: (n, L) :: C) f i.
Proof.
  intros; simpl. rewrite rmaxs_swap. apply rmaxs_ext; intros. apply rmaxs_ext; intros.
  now rewrite upd_comm.
Qed.

Lemma sumover_plus : forall C f g i,
  sumover C (fun j => f j + g j) i = sumover C f i + sumover C g i.
Proof.
  induction C as [|[n L] C IH]; intros; simpl; auto.
  rewrite <- rsum_plus. apply rsum_ext; intros; auto.
Qed.

Lemma sumover_scal : forall C c f i, sumover C (fun j => c * f j) i = c * sumover C f i.
Proof.
  induction C as [|[n L] C IH]; intros; simpl; auto.
  rewrite <- rsum_scal_l. apply rsum_ext; intros; auto.
Qed.

Lemma sumover_app : forall C1 C2 f i,
  sumover (C1 ++ C2) f i = sumover C1 (fun j => sumover C2 f j) i.
Proof. induction C1 as [|[n L] C IH]; intros; simpl; auto. apply rsum_ext; auto. Qed.

Lemma rsum_sumover : forall L C f i,
  rsum L (fun r => sumover C (f r) i) = sumover C (fun j => rsum L (fun r => f r j)) i.
Proof.
  intros L C; revert L; induction C as [|[n M] C IH]; intros; simpl; auto.
  rewrite rsum_swap. apply rsum_ext; intros. apply IH.
Qed.
