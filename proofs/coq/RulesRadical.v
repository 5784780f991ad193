(** * RulesRadical: rational powers of positive constants, exactly (docs/rules.md, powers).

    [num_qpow c e]: for a constant [c = q * prod b^f] with [q > 0] (one term of [Num.num]),
    [c^e = n^e * d^(-e) * prod b^(f e)] ([q = n / d]), again a [num]; [num_qpow_val] proves
    its value is [Rpower c e]. With it:
    - pow-const for non-integer exponents: [POW(CONST(c), e) = CONST(c^e)] ([c > 0], the
      Python guard for a fractional [e]; [RulesPow.v] does integer exponents);
    - pow-const-factor: [POW(MUL(.., CONST(c), ..), e) = MUL(CONST(c^e), POW(MUL(.. ..), e))]
      for [e] not an integer and [c > 0]: [rpow (c y) e = c^e rpow y e] in Coq's semantics
      ([c y > 0] exactly when [y > 0]). *)

From Coq Require Import Reals Lra Lia List QArith Qreals ZArith PArith NArith Bool Permutation.
From Coq Require Import FSets.FMapPositive FunctionalExtensionality.
From Shardproof Require Import Base Num Pow Term Props RuleLib Congr Rel RulesBasic RulesLift
  RulesEinsum RulesPow RulesScalarOut Positive Canon RulesCanon RulesShift.
Import ListNotations.
Open Scope R_scope.

Definition num_qpow (x : num) (e : Q) : option num :=
  match x with
  | [(q, m)] =>
      match Qnum q with
      | Zpos n => Some [(1%Q, (n, e) :: (Qden q, Qopp e) ::
                                 map (fun bf => (fst bf, Qmult (snd bf) e)) m)]
      | _ => None
      end
  | _ => None
  end.

Lemma Rpower_pos : forall x y, 0 < Rpower x y.
Proof. intros; unfold Rpower; apply exp_pos. Qed.

Lemma rad_val_pow : forall m e,
  Rpower (rad_val m) (Q2R e) = rad_val (map (fun bf => (fst bf, Qmult (snd bf) e)) m).
Proof.
  induction m as [|[b f] m IH]; intros e; simpl.
  - unfold Rpower. rewrite ln_1, Rmult_0_r, exp_0. auto.
  - rewrite <- Rpower_mult_distr by (try apply Rpower_pos; apply rad_val_pos).
    rewrite IH, Rpower_mult, Q2R_mult. auto.
Qed.

Lemma num_qpow_val : forall x e y, num_qpow x e = Some y ->
  0 < num_val x /\ num_val y = Rpower (num_val x) (Q2R e).
Proof.
  intros x e y H. destruct x as [|[q m] [|]]; try discriminate. simpl in H.
  destruct (Qnum q) as [|n|n] eqn:Eq; try discriminate. injection H as <-.
  assert (Qv : Q2R q = bval n * / bval (Qden q)).
  { unfold Q2R, bval. rewrite Eq. auto. }
  pose proof (bval_pos n) as Pn. pose proof (bval_pos (Qden q)) as Pd.
  pose proof (rad_val_pos m) as Pm.
  assert (Pq : 0 < Q2R q) by (rewrite Qv; apply Rmult_lt_0_compat; auto; apply Rinv_0_lt_compat; auto).
  simpl. rewrite !Rplus_0_r. split; [apply Rmult_lt_0_compat; auto|].
  rewrite <- Rpower_mult_distr by auto. rewrite <- rad_val_pow.
  rewrite Qv, <- Rpower_mult_distr by (auto; apply Rinv_0_lt_compat; auto).
  assert (Inv : Rpower (/ bval (Qden q)) (Q2R e) = Rpower (bval (Qden q)) (Q2R (- e))).
  { rewrite Q2R_opp. unfold Rpower. rewrite ln_Rinv by auto. f_equal. ring. }
  rewrite Inv. replace (Q2R 1) with 1 by (unfold Q2R; simpl; field). ring.
Qed.

(** ** pow-const, non-integer exponents *)
Definition chk_pow_const_frac (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l, node_at T r with
  | Node (OPow e) [k] [], Node (OConst w) [] [] =>
      match node_at T k with
      | Node (OConst v) [] [] =>
          match num_qpow v e with
          | Some w' => if negb (qint e) && num_eqb w w' then Some [] else None
          | None => None
          end
      | _ => None
      end
  | _, _ => None
  end.

Lemma chk_pow_const_frac_sound : rule_sound chk_pow_const_frac.
Proof.
  intros G l r h cl H c M _. destruct M as [W _].
  unfold chk_pow_const_frac in H. set (T := gT G) in *.
  destruct (node_at T l) as [ol ks Dl] eqn:El. destruct ol; try discriminate.
  destruct ks as [|k [|]]; try discriminate. destruct Dl; try discriminate.
  destruct (node_at T r) as [or zs Dr] eqn:Er. destruct or; try discriminate.
  destruct zs; try discriminate. destruct Dr; try discriminate.
  destruct (node_at T k) as [ok ys Dk] eqn:Ek. destruct ok; try discriminate.
  destruct ys; try discriminate. destruct Dk; try discriminate.
  rename c0 into w, c1 into v.
  destruct (num_qpow v e) as [w'|] eqn:CP; try discriminate.
  destruct (negb (qint e) && num_eqb w w') eqn:B; try discriminate.
  apply andb_prop in B as [Q E]. apply negb_true_iff in Q.
  destruct (num_qpow_val _ _ _ CP) as [Pv Vw].
  intros rho R i. rewrite (den_node c T l _ _ _ W El), (den_node c T r _ _ _ W Er). simpl.
  unfold vat; simpl. rewrite (den_const c T W k v Ek).
  rewrite (num_eqb_val _ _ E), Vw. unfold rpow. rewrite Q. destruct (Rlt_dec 0 (num_val v)); auto.
  lra.
Qed.

Definition chk_pow_const_all (G : gctx) (l r : positive) (h : hint) : option (list claim) :=
  match chk_pow_const G l r h with Some cl => Some cl | None => chk_pow_const_frac G l r h end.

Lemma chk_pow_const_all_sound : rule_sound chk_pow_const_all.
Proof.
  intros G l r h cl H. unfold chk_pow_const_all in H.
  destruct (chk_pow_const G l r h) eqn:E.
  - injection H as <-. eapply chk_pow_const_sound; eauto.
  - eapply chk_pow_const_frac_sound; eauto.
Qed.

(** ** pow-const-factor *)
Fixpoint rm_at (k : nat) (l : list positive) : list positive :=
  match l, k with
  | [], _ => []
  | _ :: r, O => r
  | x :: r, S k' => x :: rm_at k' r
  end.

Lemma prodl_rm_at : forall (f : positive -> R) k l, (k < length l)%nat ->
  prodl (map f l) = f (nth k l 1%positive) * prodl (map f (rm_at k l)).
Proof.
  intros f k; induction k as [|k IH]; intros [|x l] Hk; simpl in *; try lia; [ring|].
  rewrite (IH l) by lia. ring.
Qed.

Lemma In_rm_at : forall k l y, In y (rm_at k l) -> In y l.
Proof.
  intros k; induction k as [|k IH]; intros [|x l] y H; simpl in *; auto.
  destruct H as [<-|H]; auto.
Qed.

(** the factor at [k] is a positive constant [c] with [c^e = w], and [inner] is the rest *)
Definition pcf_at (G : gctx) (e : Q) (xs : list positive) (w : num) (inner : positive)
  (Dp : list dimspec) (k : nat) : bool :=
  let T := gT G in
  match const_of T (nth k xs 1%positive) with
  | Some cv =>
      match num_qpow cv e with
      | Some w' =>
          Nat.ltb k (length xs) && num_eqb w w' &&
          match rm_at k xs with
          | [y] => Pos.eqb y inner
          | rest =>
              match node_at T inner with
              | Node OMul ys Di => list_eqb Pos.eqb ys rest && Nat.leb 2 (length rest) &&
                                   kids_in T ys Di && incl_dims Di Dp
              | _ => false
              end
          end
      | None => false
      end
  | None => false
  end.

Definition chk_pow_const_factor (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l, node_at T r with
  | Node (OPow e) [m] Dl, Node OMul [kr; p] Dr =>
      match node_at T m, const_of T kr, node_at T p with
      | Node OMul xs Dm, Some w, Node (OPow e') [inner] Dp =>
          if negb (qint e) && Qeqs e e' && dims_eqvb Dl Dr && incl_dims Dm Dl &&
             kids_in T xs Dm && incl_dims Dp Dr && incl_dims (ndims (node_at T inner)) Dp &&
             existsb (pcf_at G e xs w inner Dp) (seq 0 (length xs))
          then Some [] else None
      | _, _, _ => None
      end
  | _, _ => None
  end.

Lemma rpow_scale : forall cv y e, 0 < cv -> qint e = false ->
  rpow (cv * y) e = Rpower cv (Q2R e) * rpow y e.
Proof.
  intros cv y e P Q. unfold rpow. rewrite Q.
  destruct (Rlt_dec 0 y) as [Py|Py].
  - destruct (Rlt_dec 0 (cv * y)) as [_|N]; [|exfalso; apply N; apply Rmult_lt_0_compat; auto].
    rewrite Rpower_mult_distr; auto.
  - destruct (Rlt_dec 0 (cv * y)) as [N|_]; [|ring].
    exfalso. apply Py. apply (Rmult_lt_reg_l cv); auto. lra.
Qed.

Lemma kids_den : forall c T xs D rho i, wf_table T -> kids_in T xs D = true ->
  map (fun v => v rho (restrict D i)) (map (den c T) xs) = map (fun y => den c T y rho i) xs.
Proof.
  intros c T xs D rho i W K. rewrite map_map. apply map_ext_in. intros y Iy.
  apply den_at_incl; auto. unfold kids_in in K. rewrite forallb_forall in K. auto.
Qed.

Lemma chk_pow_const_factor_sound : rule_sound chk_pow_const_factor.
Proof.
  intros G l r h cl H c M _. destruct M as [W _].
  unfold chk_pow_const_factor in H. set (T := gT G) in *.
  destruct (node_at T l) as [o1 ms Dl] eqn:El. destruct o1; try discriminate.
  destruct ms as [|m [|]]; try discriminate.
  destruct (node_at T r) as [o2 ps Dr] eqn:Er. destruct o2; try discriminate.
  destruct ps as [|kr [|p [|]]]; try discriminate.
  destruct (node_at T m) as [o3 xs Dm] eqn:Em. destruct o3; try discriminate.
  destruct (const_of T kr) as [w|] eqn:Ckr; try discriminate.
  destruct (node_at T p) as [o4 ins Dp] eqn:Ep. destruct o4; try discriminate.
  destruct ins as [|inner [|]]; try discriminate.
  match type of H with (if ?b then _ else _) = _ => destruct b eqn:B; try discriminate end.
  repeat match type of B with _ && _ = true => apply andb_prop in B as [B ?] end.
  rename H0 into EX, H1 into IIn, H2 into IDp, H3 into KX, H4 into IDm, H5 into DE, H6 into QE,
    B into Q.
  apply negb_true_iff in Q. apply Qeqs_eq in QE. subst e0.
  apply existsb_exists in EX as [k [Ik PK]]. apply in_seq in Ik.
  unfold pcf_at in PK. fold T in PK.
  destruct (const_of T (nth k xs 1%positive)) as [cv|] eqn:Ccv; try discriminate.
  destruct (num_qpow cv e) as [w'|] eqn:QP; try discriminate.
  apply andb_prop in PK as [PK RS]. apply andb_prop in PK as [_ WE].
  destruct (num_qpow_val _ _ _ QP) as [Pc Vw]. apply num_eqb_val in WE.
  apply (eqv_by_core c T l r _ _ _ _ _ _ W El Er DE). intros rho R i Mi Ri.
  destruct (dims_eqvb_perm _ _ DE) as [P _].
  assert (Mr : msk (sz c) Dr i = true) by (rewrite <- (msk_perm _ _ _ _ P); auto).
  assert (Mm : msk (sz c) Dm i = true) by (apply (msk_incl c Dm Dl); auto).
  assert (Mp : msk (sz c) Dp i = true) by (apply (msk_incl c Dp Dr); auto).
  cbn [core map]. unfold vat; simpl nth. cbn [prodl fold_right]. rewrite Rmult_1_r.
  rewrite (den_in c T m _ _ _ rho i W Em Mm). cbn [core]. rewrite (kids_den c T xs Dm rho i W KX).
  rewrite (prodl_rm_at _ k xs) by lia.
  unfold const_of in Ckr, Ccv.
  destruct (node_at T kr) as [[] [] []] eqn:Ek; try discriminate. injection Ckr as <-.
  destruct (node_at T (nth k xs 1%positive)) as [[] [] []] eqn:Ec; try discriminate.
  injection Ccv as <-.
  rewrite (den_const c T W kr c0 Ek), (den_const c T W _ c1 Ec), WE, Vw.
  rewrite (den_in c T p _ _ _ rho i W Ep Mp). cbn [core map]. unfold vat; simpl nth.
  try rewrite (den_at_incl c T W inner Dp rho i) by auto.
  rewrite rpow_scale by auto. f_equal. f_equal.
  destruct (rm_at k xs) as [|y [|y2 rest]] eqn:RM.
  - destruct (node_at T inner) as [[] ys Di] eqn:Ei; try discriminate.
    repeat match type of RS with _ && _ = true => apply andb_prop in RS as [RS ?] end.
    apply (list_eqb_eq _ _ (fun a b => proj1 (Pos.eqb_eq a b))) in RS. subst ys. discriminate.
  - apply Pos.eqb_eq in RS. subst inner. simpl. ring.
  - destruct (node_at T inner) as [[] ys Di] eqn:Ei; try discriminate.
    repeat match type of RS with _ && _ = true => apply andb_prop in RS as [RS ?] end.
    apply (list_eqb_eq _ _ (fun a b => proj1 (Pos.eqb_eq a b))) in RS. subst ys.
    assert (Mi' : msk (sz c) Di i = true).
    { apply (msk_incl c Di Dp); auto. }
    rewrite (den_in c T inner _ _ _ rho i W Ei Mi'). cbn [core].
    rewrite (kids_den c T _ Di rho i W); auto.
Qed.
