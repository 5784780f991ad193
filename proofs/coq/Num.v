(** * Num: exact constants, Q-linear combinations of products of rational powers.

    A certificate's constants are rationals or numbers such as [sqrt(2)/16] (written
    [1/sqrt(128)] in a plan). A [num] is [sum_k q_k * prod_j b_kj ^ e_kj] with [q_k] and
    [e_kj] rational and [b_kj] positive integers. Arithmetic on [num]s is exact; the test
    [num_eqb] is sound (equal normal forms have equal values) but not complete, which can only
    make a step fail to check, never accept a wrong one. *)

From Coq Require Import Reals Lra Lia List QArith Qround Qreals ZArith PArith.
From Shardproof Require Import Base.
Import ListNotations.
Open Scope R_scope.

Definition rad := list (positive * Q).
Definition num := list (Q * rad).

Definition bval (b : positive) : R := IZR (Zpos b).

Lemma bval_pos : forall b, 0 < bval b.
Proof. intros; unfold bval; apply IZR_lt; lia. Qed.

Fixpoint rad_val (m : rad) : R :=
  match m with [] => 1 | (b, e) :: m' => Rpower (bval b) (Q2R e) * rad_val m' end.

Fixpoint num_val (x : num) : R :=
  match x with [] => 0 | (q, m) :: x' => Q2R q * rad_val m + num_val x' end.

Lemma rad_val_pos : forall m, 0 < rad_val m.
Proof.
  induction m as [|[b e] m IH]; simpl; [lra|].
  apply Rmult_lt_0_compat; auto. unfold Rpower; apply exp_pos.
Qed.

Lemma rad_val_app : forall m1 m2, rad_val (m1 ++ m2) = rad_val m1 * rad_val m2.
Proof. induction m1 as [|[b e] m IH]; intros; simpl; [ring|]. rewrite IH; ring. Qed.

Lemma num_val_app : forall x y, num_val (x ++ y) = num_val x + num_val y.
Proof. induction x as [|[q m] x IH]; intros; simpl; [ring|]. rewrite IH; ring. Qed.

(** ** Products *)
Definition num_mul (x y : num) : num :=
  flat_map (fun t => map (fun u => (Qmult (fst t) (fst u), snd t ++ snd u)) y) x.

Lemma num_val_map_mul : forall q m y,
  num_val (map (fun u => (Qmult q (fst u), m ++ snd u)) y) = Q2R q * rad_val m * num_val y.
Proof.
  induction y as [|[q' m'] y IH]; simpl; [ring|].
  rewrite IH, Q2R_mult, rad_val_app; ring.
Qed.

Lemma num_val_mul : forall x y, num_val (num_mul x y) = num_val x * num_val y.
Proof.
  induction x as [|[q m] x IH]; intros; simpl; [ring|].
  unfold num_mul in *; simpl. rewrite num_val_app, IH.
  rewrite (num_val_map_mul q m y). ring.
Qed.

Definition num_of_Q (q : Q) : num := [(q, [])].

Lemma num_val_of_Q : forall q, num_val (num_of_Q q) = Q2R q.
Proof. intros; simpl; ring. Qed.

Definition num_neg (x : num) : num := map (fun t => (Qopp (fst t), snd t)) x.

Lemma num_val_neg : forall x, num_val (num_neg x) = - num_val x.
Proof. induction x as [|[q m] x IH]; simpl; [ring|]. rewrite IH, Q2R_opp; ring. Qed.

(** ** Normal forms: bases factored (when trial division finishes), equal bases merged,
    integer parts of exponents moved into the coefficient, equal radicals merged. *)
Fixpoint pow_pos_nat (b : positive) (k : nat) : positive :=
  match k with O => 1%positive | S k' => (b * pow_pos_nat b k')%positive end.

(* [strip fuel d n = (k, r)] with n = d^k * r when the arithmetic is right; every use is
   re-checked by [fact_prod] below, so this function needs no proof. *)
Fixpoint strip (fuel : nat) (d n : positive) : nat * positive :=
  match fuel with
  | O => (O, n)
  | S f =>
      match Z.div_eucl (Zpos n) (Zpos d) with
      | (Zpos q, 0%Z) => let '(k, r) := strip f d q in (S k, r)
      | _ => (O, n)
      end
  end.

Definition small_primes : list positive := [2; 3; 5; 7; 11; 13]%positive.

Definition factor (b : positive) : list (positive * nat) :=
  let '(fs, r) := fold_left (fun acc d => let '(fs, n) := acc in
                               let '(k, n') := strip 64 d n in
                               (if Nat.eqb k 0 then fs else (d, k) :: fs, n'))
                            small_primes ([], b) in
  if Pos.eqb r 1 then fs else (r, 1%nat) :: fs.

Fixpoint fact_prod (f : list (positive * nat)) : positive :=
  match f with [] => 1%positive | (p, k) :: f' => (pow_pos_nat p k * fact_prod f')%positive end.

Definition expand1 (be : positive * Q) : rad :=
  let '(b, e) := be in
  let f := factor b in
  if Pos.eqb (fact_prod f) b then map (fun pk => (fst pk, Qmult (inject_Z (Z.of_nat (snd pk))) e)) f
  else [(b, e)].

Fixpoint rad_insert (be : positive * Q) (m : rad) : rad :=
  match m with
  | [] => [be]
  | (b', e') :: m' =>
      if Pos.eqb (fst be) b' then (b', Qplus (snd be) e') :: m'
      else if Pos.ltb (fst be) b' then be :: m
      else (b', e') :: rad_insert be m'
  end.

Definition rad_merge (m : rad) : rad := fold_right rad_insert [] (flat_map expand1 m).

(* move integer parts of exponents into a rational coefficient *)
Definition qpowZ (b : positive) (k : Z) : Q :=
  match k with
  | Z0 => 1%Q
  | Zpos p => inject_Z (Zpos b ^ Zpos p)
  | Zneg p => Qinv (inject_Z (Zpos b ^ Zpos p))
  end.

Fixpoint rad_split (m : rad) : Q * rad :=
  match m with
  | [] => (1%Q, [])
  | (b, e) :: m' =>
      let '(c, r) := rad_split m' in
      let k := Qfloor e in
      let f := Qminus e (inject_Z k) in
      (Qmult (qpowZ b k) c, if Qeq_bool f 0 then r else (b, f) :: r)
  end.

Fixpoint rad_eqb (m1 m2 : rad) : bool :=
  match m1, m2 with
  | [], [] => true
  | (b1, e1) :: r1, (b2, e2) :: r2 => Pos.eqb b1 b2 && Qeq_bool e1 e2 && rad_eqb r1 r2
  | _, _ => false
  end.

Fixpoint num_insert (t : Q * rad) (x : num) : num :=
  match x with
  | [] => [t]
  | (q, m) :: x' => if rad_eqb (snd t) m then (Qplus (fst t) q, m) :: x'
                    else (q, m) :: num_insert t x'
  end.

Definition num_norm (x : num) : num :=
  fold_right num_insert [] (map (fun t => let '(c, r) := rad_split (rad_merge (snd t)) in
                                          (Qmult (fst t) c, r)) x).

Definition num_is_zero (x : num) : bool := forallb (fun t => Qeq_bool (fst t) 0) (num_norm x).

Definition num_eqb (x y : num) : bool := num_is_zero (x ++ num_neg y).

Lemma Q2R_inject_Z' : forall z, Q2R (inject_Z z) = IZR z.
Proof. intros; unfold Q2R, inject_Z; simpl; field. Qed.

(** ** Soundness of the normal form *)
Lemma Rpower_bval_nat : forall p k e,
  Rpower (bval (pow_pos_nat p k)) e = Rpower (bval p) (INR k * e).
Proof.
  intros p k e. induction k; simpl pow_pos_nat.
  - simpl INR. rewrite Rmult_0_l, Rpower_O by apply bval_pos. unfold bval; simpl.
    unfold Rpower. rewrite ln_1, Rmult_0_r, exp_0; auto.
  - unfold bval in *. rewrite Pos2Z.inj_mul, mult_IZR. rewrite <- Rpower_mult_distr.
    + rewrite IHk, S_INR. rewrite <- Rpower_plus. f_equal; ring.
    + apply IZR_lt; lia.
    + apply IZR_lt; lia.
Qed.

Lemma rad_val_expand1 : forall be, rad_val (expand1 be) = rad_val [be].
Proof.
  intros [b e]. unfold expand1.
  destruct (Pos.eqb_spec (fact_prod (factor b)) b) as [E|E]; auto.
  rewrite <- E at 2. generalize (factor b) as f. clear E.
  induction f as [|[p k] f IH]; simpl.
  - unfold bval; simpl. unfold Rpower; rewrite ln_1, Rmult_0_r, exp_0; ring.
  - rewrite IH. simpl. rewrite Rmult_1_r, Rmult_1_r.
    replace (bval (pow_pos_nat p k * fact_prod f))
      with (bval (pow_pos_nat p k) * bval (fact_prod f))
      by (unfold bval; rewrite Pos2Z.inj_mul, mult_IZR; auto).
    rewrite <- Rpower_mult_distr by apply bval_pos.
    rewrite Rpower_bval_nat, Q2R_mult, Q2R_inject_Z', INR_IZR_INZ. auto.
Qed.

Lemma rad_val_insert : forall be m, rad_val (rad_insert be m) = rad_val [be] * rad_val m.
Proof.
  intros [b e] m. induction m as [|[b' e'] m IH]; simpl; [ring|].
  destruct (Pos.eqb_spec b b'); simpl.
  - subst. rewrite Q2R_plus, Rpower_plus; ring.
  - destruct (Pos.ltb b b'); simpl; [ring|]. rewrite IH; simpl; ring.
Qed.

Lemma rad_val_merge : forall m, rad_val (rad_merge m) = rad_val m.
Proof.
  intros m; unfold rad_merge. induction m as [|be m IH]; simpl; auto.
  rewrite fold_right_app.
  assert (G : forall l acc, rad_val (fold_right rad_insert acc l) = rad_val l * rad_val acc).
  { induction l as [|x l IHl]; intros; simpl; [ring|].
    rewrite rad_val_insert, IHl. destruct x; simpl; ring. }
  rewrite G, IH, rad_val_expand1. destruct be; simpl; ring.
Qed.

Lemma IZR_pow_pos : forall b p, IZR (Zpos b ^ Zpos p) = bval b ^ Pos.to_nat p.
Proof.
  intros. unfold bval. rewrite pow_IZR. f_equal. f_equal. symmetry; apply positive_nat_Z.
Qed.

Lemma Q2R_qpowZ : forall b k, Q2R (qpowZ b k) = powerRZ (bval b) k.
Proof.
  intros b k. destruct k; cbn [qpowZ powerRZ].
  - unfold Q2R; simpl; lra.
  - rewrite Q2R_inject_Z', IZR_pow_pos; auto.
  - rewrite Q2R_inv, Q2R_inject_Z', IZR_pow_pos; auto.
    intro E. apply Qeq_eqR in E. rewrite Q2R_inject_Z', IZR_pow_pos in E.
    unfold Q2R in E; simpl in E. apply (pow_nonzero (bval b) (Pos.to_nat p)).
    + generalize (bval_pos b); lra.
    + lra.
Qed.

Lemma Rpower_IZR : forall x k, 0 < x -> Rpower x (IZR k) = powerRZ x k.
Proof.
  intros x k Hx. destruct k; simpl.
  - unfold Rpower; rewrite Rmult_0_l, exp_0; auto.
  - rewrite <- (positive_nat_Z p), <- INR_IZR_INZ, Rpower_pow; auto.
  - replace (IZR (Zneg p)) with (- INR (Pos.to_nat p)).
    + rewrite Rpower_Ropp, Rpower_pow; auto.
    + rewrite INR_IZR_INZ, positive_nat_Z. rewrite <- opp_IZR. auto.
Qed.

Lemma rad_split_val : forall m, Q2R (fst (rad_split m)) * rad_val (snd (rad_split m)) = rad_val m.
Proof.
  induction m as [|[b e] m IH]; simpl.
  - unfold Q2R; simpl; lra.
  - destruct (rad_split m) as [c r] eqn:Er. simpl in *.
    set (k := Qfloor e). set (f := Qminus e (inject_Z k)).
    assert (He : Q2R e = IZR k + Q2R f).
    { unfold f. rewrite Q2R_minus, Q2R_inject_Z'. ring. }
    rewrite He, Rpower_plus, Rpower_IZR by apply bval_pos.
    rewrite Q2R_mult, Q2R_qpowZ. rewrite <- IH.
    destruct (Qeq_bool f 0) eqn:Ef; simpl.
    + apply Qeq_bool_iff in Ef. apply Qeq_eqR in Ef. rewrite Ef.
      replace (Q2R 0) with 0 by (unfold Q2R; simpl; ring).
      rewrite Rpower_O by apply bval_pos. ring.
    + ring.
Qed.

Lemma rad_eqb_val : forall m1 m2, rad_eqb m1 m2 = true -> rad_val m1 = rad_val m2.
Proof.
  induction m1 as [|[b e] m IH]; destruct m2 as [|[b' e'] m2]; simpl; try discriminate; auto.
  intros H. apply andb_prop in H as [H H2]. apply andb_prop in H as [H H1].
  apply Pos.eqb_eq in H; subst. apply Qeq_bool_iff, Qeq_eqR in H1. rewrite H1, (IH m2); auto.
Qed.

Lemma num_val_insert : forall t x, num_val (num_insert t x) = num_val [t] + num_val x.
Proof.
  intros [q m] x. induction x as [|[q' m'] x IH]; simpl; [ring|].
  destruct (rad_eqb m m') eqn:E; simpl.
  - rewrite (rad_eqb_val _ _ E), Q2R_plus; ring.
  - rewrite IH; simpl; ring.
Qed.

Lemma num_val_norm : forall x, num_val (num_norm x) = num_val x.
Proof.
  intros x; unfold num_norm. induction x as [|[q m] x IH]; simpl; auto.
  rewrite num_val_insert, IH. simpl.
  pose proof (rad_split_val (rad_merge m)) as S. rewrite rad_val_merge in S.
  destruct (rad_split (rad_merge m)) as [c r]; simpl in *.
  rewrite Q2R_mult, <- S; ring.
Qed.

Lemma num_is_zero_val : forall x, num_is_zero x = true -> num_val x = 0.
Proof.
  intros x H. rewrite <- num_val_norm. unfold num_is_zero in H.
  induction (num_norm x) as [|[q m] y IH]; simpl in *; auto.
  apply andb_prop in H as [H1 H2]. apply Qeq_bool_iff, Qeq_eqR in H1.
  rewrite H1, IH by auto. unfold Q2R; simpl; ring.
Qed.

Lemma num_eqb_val : forall x y, num_eqb x y = true -> num_val x = num_val y.
Proof.
  intros x y H. apply num_is_zero_val in H. rewrite num_val_app, num_val_neg in H. lra.
Qed.

(** ** Inverse and powers (the fold of [POW(CONST(c), e)]) *)
Definition num_inv (x : num) : option num :=
  match x with
  | [(q, m)] => if Qeq_bool q 0 then None
                else Some [(Qinv q, map (fun be => (fst be, Qopp (snd be))) m)]
  | _ => None
  end.

Lemma rad_val_opp : forall m,
  rad_val (map (fun be => (fst be, Qopp (snd be))) m) = / rad_val m.
Proof.
  induction m as [|[b e] m IH]; simpl; [field|].
  rewrite IH, Q2R_opp, Rpower_Ropp. field. split.
  - apply Rgt_not_eq, rad_val_pos.
  - unfold Rpower; apply Rgt_not_eq, exp_pos.
Qed.

Lemma num_inv_val : forall x y, num_inv x = Some y -> num_val x <> 0 /\ num_val y = / num_val x.
Proof.
  intros x y H. destruct x as [|[q m] [|t x]]; simpl in H; try discriminate.
  destruct (Qeq_bool q 0) eqn:Eq; try discriminate. injection H as <-. simpl.
  assert (Hq' : ~ (q == 0)%Q) by (intro E; apply Qeq_bool_iff in E; congruence).
  assert (Hq : Q2R q <> 0).
  { intro E. apply Hq'. apply eqR_Qeq. rewrite E. unfold Q2R; simpl; ring. }
  pose proof (rad_val_pos m).
  rewrite rad_val_opp, Q2R_inv by auto. split.
  - rewrite Rplus_0_r. apply Rmult_integral_contrapositive; split; auto; lra.
  - field; split; auto; lra.
Qed.

Fixpoint num_pow_nat (x : num) (n : nat) : num :=
  match n with O => num_of_Q 1 | S k => num_mul x (num_pow_nat x k) end.

Lemma num_val_pow_nat : forall x n, num_val (num_pow_nat x n) = num_val x ^ n.
Proof.
  induction n; simpl num_pow_nat.
  - simpl. unfold Q2R; simpl; field.
  - rewrite num_val_mul, IHn; auto.
Qed.

(** [num_pos x = true] only when [x]'s value is positive (one term, positive coefficient). *)
Definition num_pos (x : num) : bool :=
  match x with [(q, _)] => negb (Qle_bool q 0) | _ => false end.

Lemma num_pos_val : forall x, num_pos x = true -> 0 < num_val x.
Proof.
  intros x H. destruct x as [|[q m] [|t x]]; simpl in H; try discriminate. simpl.
  apply Bool.negb_true_iff in H.
  assert (Hq : (0 < q)%Q) by (apply Qnot_le_lt; intro E; apply Qle_bool_iff in E; congruence).
  apply Qlt_Rlt in Hq. pose proof (rad_val_pos m).
  rewrite Rplus_0_r. apply Rmult_lt_0_compat; auto. unfold Q2R in Hq at 1; simpl in Hq. lra.
Qed.

Definition num_zero (x : num) : bool := num_is_zero x.

Lemma num_zero_val : forall x, num_zero x = true -> num_val x = 0.
Proof. apply num_is_zero_val. Qed.
