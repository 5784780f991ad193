(** * Pow: [POW(x, e)] for a rational exponent [e], as a total function.

    Integer exponents are [powerRZ] ([0 ^ -1 = / 0 = 0], Coq's [Rinv_0]); other exponents are
    [Rpower] on positive bases and 0 elsewhere (where a real power is undefined, e.g. the
    square root of a negative number; numpy gives nan there). The laws that merge or split
    exponents hold under side conditions, stated as hypotheses: the base is non-negative when
    an exponent is not an integer, and non-zero when exponents cancel. *)

From Coq Require Import Reals Lra Lia List QArith Qround Qreals ZArith PArith.
From Shardproof Require Import Base Num.
Import ListNotations.
Open Scope R_scope.

Definition qint (e : Q) : bool := Pos.eqb (Qden (Qred e)) 1.

Definition rpow (x : R) (e : Q) : R :=
  if qint e then powerRZ x (Qnum (Qred e))
  else if Rlt_dec 0 x then Rpower x (Q2R e) else 0.

Lemma Q2R_Qred : forall e, Q2R (Qred e) = Q2R e.
Proof. intros; apply Qeq_eqR, Qred_correct. Qed.

Lemma qint_val : forall e, qint e = true -> Q2R e = IZR (Qnum (Qred e)).
Proof.
  intros e H. unfold qint in H. apply Pos.eqb_eq in H. rewrite <- Q2R_Qred.
  unfold Q2R. rewrite H. simpl. field.
Qed.

Lemma rpow_pos : forall x e, 0 < x -> rpow x e = Rpower x (Q2R e).
Proof.
  intros x e Hx. unfold rpow. destruct (qint e) eqn:E.
  - rewrite (qint_val e E), Rpower_IZR; auto.
  - destruct (Rlt_dec 0 x); [auto|lra].
Qed.

Lemma rpow_ext : forall x e e', (e == e')%Q -> rpow x e = rpow x e'.
Proof.
  intros. unfold rpow, qint. rewrite (Qred_complete e e' H).
  destruct (Pos.eqb _ _); auto. rewrite (Qeq_eqR _ _ H); auto.
Qed.

Lemma Qred_inject_Z : forall k, Qred (inject_Z k) = inject_Z k.
Proof.
  intros k. unfold Qred, inject_Z.
  pose proof (Z.ggcd_gcd k 1) as G. pose proof (Z.ggcd_correct_divisors k 1) as D.
  destruct (Z.ggcd k 1) as [g [r1 r2]]. simpl in *. rewrite Z.gcd_1_r in G. subst g.
  destruct D as [D1 D2]. rewrite Z.mul_1_l in D1, D2. subst. reflexivity.
Qed.

Lemma rpow_int : forall x (k : Z), rpow x (inject_Z k) = powerRZ x k.
Proof. intros. unfold rpow, qint. rewrite Qred_inject_Z. simpl; auto. Qed.

Lemma rpow_one : forall x, rpow x 1 = x.
Proof. intros. change 1%Q with (inject_Z 1). rewrite rpow_int. simpl; ring. Qed.

Lemma rpow_zero_exp : forall x, rpow x 0 = 1.
Proof. intros. change 0%Q with (inject_Z 0). rewrite rpow_int. simpl; auto. Qed.

Lemma rpow_minus_one : forall x, rpow x (-1) = / x.
Proof.
  intros. change (-1)%Q with (inject_Z (-1)). rewrite rpow_int. simpl. rewrite Rmult_1_r; auto.
Qed.

Lemma rpow_half : forall x, rpow x (1 # 2) = sqrt x.
Proof.
  intros x. unfold rpow; simpl. destruct (Rlt_dec 0 x).
  - replace (Q2R (1 # 2)) with (/ 2) by (unfold Q2R; simpl; field).
    rewrite Rpower_sqrt; auto.
  - rewrite sqrt_neg_0; auto. lra.
Qed.

Lemma rpow_minus_half : forall x, rpow x (-1 # 2) = / sqrt x.
Proof.
  intros x. unfold rpow; simpl. destruct (Rlt_dec 0 x).
  - replace (Q2R (-1 # 2)) with (- / 2) by (unfold Q2R; simpl; field).
    rewrite Rpower_Ropp, Rpower_sqrt; auto.
  - rewrite sqrt_neg_0 by lra. rewrite Rinv_0; auto.
Qed.

Lemma rpow_exp : forall m c, qint c = true -> rpow (exp m) c = exp (Q2R c * m).
Proof.
  intros. rewrite rpow_pos by apply exp_pos. unfold Rpower. rewrite ln_exp; auto.
Qed.

Lemma rpow_nonneg_pos : forall x e, 0 <= x -> x <> 0 -> rpow x e = Rpower x (Q2R e).
Proof. intros; apply rpow_pos; lra. Qed.

Lemma rpow_zero_base : forall e, rpow 0 e = if Qeq_bool e 0 then 1 else 0.
Proof.
  intros e. unfold rpow. destruct (qint e) eqn:I.
  - destruct (Qeq_bool e 0) eqn:Z.
    + apply Qeq_bool_iff in Z. rewrite (Qred_complete _ _ Z). simpl; auto.
    + destruct (Qnum (Qred e)) eqn:N; simpl.
      * exfalso. assert (Qred e == 0)%Q by (unfold Qeq; rewrite N; simpl; lia).
        rewrite Qred_correct in H. apply Qeq_bool_iff in H; congruence.
      * apply pow_i; lia.
      * rewrite pow_i by lia. apply Rinv_0.
  - destruct (Rlt_dec 0 0); [lra|]. destruct (Qeq_bool e 0) eqn:Z; auto.
    apply Qeq_bool_iff in Z. unfold qint in I. rewrite (Qred_complete _ _ Z) in I.
    simpl in I; discriminate.
Qed.

Lemma powerRZ_mul_distr : forall x y k, powerRZ (x * y) k = powerRZ x k * powerRZ y k.
Proof.
  intros x y [|p|p]; simpl; try ring.
  - apply Rpow_mult_distr.
  - rewrite Rpow_mult_distr, Rinv_mult; auto.
Qed.

Lemma rpow_mul_int : forall x y e, qint e = true -> rpow (x * y) e = rpow x e * rpow y e.
Proof. intros. unfold rpow; rewrite H. apply powerRZ_mul_distr. Qed.

(** [x^a * x^b = x^(a+b)]: integer exponents when [x <> 0] or [a + b <> 0] with [a, b <> 0];
    any exponents when [x > 0]. *)
Lemma powerRZ_add' : forall x a b, x <> 0 -> powerRZ x (a + b) = powerRZ x a * powerRZ x b.
Proof. intros. apply powerRZ_add; auto. Qed.
