(** * Signs: the sign analysis of [proofs/checker_signs.py] (issue 10, family 3), in Coq.

    Per node, a sign set [sset] (which of [< 0], [= 0], [> 0] its elements may have) and a
    definedness bit. The sets are those of [checker_signs.Signs.sign] or larger: Coq's
    semantics is total ([/ 0 = 0], a fractional power of a non-positive base is 0, [Pow.v]), so
    a power of a base that may be 0 or negative may be 0 here, and what [Term.v] leaves
    arbitrary ([SIGMOID], [TANH], [SILU], [GELU], [LOG]: [uf]) or what needs a domain Coq does
    not assume ([mask], [index] inputs; covering indicators; the certificate's assumed spec
    denominators) is [sany]. The definedness bit is [Signs.defined]'s rule (every [POW] /
    [RECIP] / [SQRT] / [RSQRT] / [LOG] below the node has an argument whose sign set lies in
    the op's requirement), computed from these sets, so it holds only where the Python
    checker's holds. It has no meaning in Coq's total semantics: rule checkers test it as the
    Python guard does ([RulesMerge.v]), so that no Coq checker is weaker than its Python rule.

    [sign_tab] (built in [Cert.v] in id order) is not trusted: [sg_checkb] recomputes every
    entry from its children's, and [sg_sound] proves every set sound in every context of the
    theorem ([model_ok]: positive inputs positive, sizes at least 1). *)

From Coq Require Import Reals Lra Lia List QArith Qreals ZArith PArith NArith Bool.
From Coq Require Import FSets.FMapPositive FunctionalExtensionality.
From Shardproof Require Import Base Num Pow Term Props RuleLib Congr Rel RulesBasic RulesLift
  Positive.
Import ListNotations.
Open Scope R_scope.

(** ** Sign sets *)
Definition sany := SS true true true.
Definition spos1 := SS false false true.
Definition szero1 := SS false true false.
Definition snn := SS false true true.
Definition snp := SS true true false.
Definition snz := SS true false true.

Definition sin (s : sset) (v : R) : Prop :=
  (v < 0 -> sneg s = true) /\ (v = 0 -> szero s = true) /\ (0 < v -> spos s = true).

Definition sor (a b : sset) : sset := SS (sneg a || sneg b) (szero a || szero b) (spos a || spos b).
Definition sand (a b : sset) : sset := SS (sneg a && sneg b) (szero a && szero b) (spos a && spos b).
Definition ssub (a b : sset) : bool :=
  implb (sneg a) (sneg b) && implb (szero a) (szero b) && implb (spos a) (spos b).
Definition seqb (a b : sset) : bool := ssub a b && ssub b a.
Definition sflip (a : sset) : sset := SS (spos a) (szero a) (sneg a).

Definition smul (a b : sset) : sset :=
  SS ((sneg a && spos b) || (spos a && sneg b)) (szero a || szero b)
     ((spos a && spos b) || (sneg a && sneg b)).

Definition sadd (a b : sset) : sset :=
  let mixed := (sneg a && spos b) || (spos a && sneg b) in
  SS (mixed || (sneg a && (sneg b || szero b)) || (szero a && sneg b))
     (mixed || (szero a && szero b))
     (mixed || (spos a && (spos b || szero b)) || (szero a && spos b)).

(** [rpow v e] for [v] in [s] (Coq's total power: 0 where the real power is undefined) *)
Definition spow (s : sset) (e : Q) : sset :=
  SS (sneg s && qint e && negb (Z.even (Qnum (Qred e))))
     (szero s || (sneg s && negb (qint e)))
     (spos s || Qeq_bool e 0 || (sneg s && qint e)).

(** a sum of terms in [P] (over any range) *)
Definition ssum (P : sset) : sset := if ssub P snn then snn else if ssub P snp then snp else sany.

(** where [x^e] is defined: [checker_signs.requirement] *)
Definition sreq (e : Q) : sset :=
  if qint e then (if Qle_bool 0 e then sany else snz) else (if Qle_bool e 0 then spos1 else snn).

Ltac sgn_finish := repeat match goal with b : bool |- _ => destruct b end; simpl;
  rewrite ?orb_true_r; try reflexivity.

Lemma sin_any : forall v, sin sany v.
Proof. intros; repeat split; auto. Qed.

Lemma sin_sub : forall a b v, ssub a b = true -> sin a v -> sin b v.
Proof.
  intros [an az ap] [bn bz bp] v H [Hn [Hz Hp]]. unfold ssub in H; simpl in *.
  destruct an, az, ap, bn, bz, bp; simpl in H; try discriminate; repeat split; auto.
Qed.

Lemma sin_or_l : forall a b v, sin a v -> sin (sor a b) v.
Proof.
  intros [an az ap] b v [Hn [Hz Hp]]. unfold sor; simpl in *.
  repeat split; intro E; [rewrite (Hn E)|rewrite (Hz E)|rewrite (Hp E)]; auto.
Qed.

Lemma sin_zero1 : sin szero1 0.
Proof. repeat split; intros; auto; lra. Qed.

Lemma sin_pos1 : forall v, 0 < v -> sin spos1 v.
Proof. intros; repeat split; intros; auto; lra. Qed.

Lemma sin_or_zero : forall a v, (v = 0 \/ sin a v) -> sin (sor a szero1) v.
Proof.
  intros [an az ap] v [->|H].
  - unfold sor; simpl. repeat split; intros; try lra. rewrite orb_true_r; auto.
  - apply sin_or_l; auto.
Qed.

Lemma sin_flip : forall a v, sin a v -> sin (sflip a) (- v).
Proof.
  intros [an az ap] v [Hn [Hz Hp]]. unfold sflip; simpl in *.
  repeat split; intro E; [apply Hp|apply Hz|apply Hn]; lra.
Qed.

Lemma sin_mul : forall a b x y, sin a x -> sin b y -> sin (smul a b) (x * y).
Proof.
  intros [an az ap] [bn bz bp] x y [Hn [Hz Hp]] [Kn [Kz Kp]]. unfold smul; simpl in *.
  destruct (Rtotal_order x 0) as [Lx|[Ex|Gx]]; destruct (Rtotal_order y 0) as [Ly|[Ey|Gy]];
  [rewrite (Hn Lx), (Kn Ly)|rewrite (Hn Lx), (Kz Ey)|rewrite (Hn Lx), (Kp Gy)
  |rewrite (Hz Ex), (Kn Ly)|rewrite (Hz Ex), (Kz Ey)|rewrite (Hz Ex), (Kp Gy)
  |rewrite (Hp Gx), (Kn Ly)|rewrite (Hp Gx), (Kz Ey)|rewrite (Hp Gx), (Kp Gy)];
  repeat split; intro E; try (exfalso; subst; nra); sgn_finish.
Qed.

Lemma sin_add : forall a b x y, sin a x -> sin b y -> sin (sadd a b) (x + y).
Proof.
  intros [an az ap] [bn bz bp] x y [Hn [Hz Hp]] [Kn [Kz Kp]]. unfold sadd; simpl in *.
  destruct (Rtotal_order x 0) as [Lx|[Ex|Gx]]; destruct (Rtotal_order y 0) as [Ly|[Ey|Gy]];
  [rewrite (Hn Lx), (Kn Ly)|rewrite (Hn Lx), (Kz Ey)|rewrite (Hn Lx), (Kp Gy)
  |rewrite (Hz Ex), (Kn Ly)|rewrite (Hz Ex), (Kz Ey)|rewrite (Hz Ex), (Kp Gy)
  |rewrite (Hp Gx), (Kn Ly)|rewrite (Hp Gx), (Kz Ey)|rewrite (Hp Gx), (Kp Gy)];
  repeat split; intro E; try (exfalso; subst; lra); sgn_finish.
Qed.

Lemma sin_pow : forall s v e, sin s v -> sin (spow s e) (rpow v e).
Proof.
  intros [sn sz sp] v e [Hn [Hz Hp]]. unfold spow; simpl in *.
  destruct (Rtotal_order v 0) as [L|[E|G]].
  - rewrite (Hn L). destruct (qint e) eqn:Q.
    + assert (NZ : rpow v e <> 0).
      { unfold rpow; rewrite Q. apply powerRZ_NOR. lra. }
      destruct (Z.even (Qnum (Qred e))) eqn:Ev.
      * assert (0 <= rpow v e) by (apply even_int_nonneg; unfold even_int; rewrite Q, Ev; auto).
        repeat split; intro E'; try (exfalso; lra); try (exfalso; apply NZ; exact E'); sgn_finish.
      * repeat split; intro E'; try (exfalso; lra); try (exfalso; apply NZ; exact E'); sgn_finish.
    + assert (Z0 : rpow v e = 0).
      { unfold rpow; rewrite Q. destruct (Rlt_dec 0 v); [lra|auto]. }
      rewrite Z0. repeat split; intro E'; try (exfalso; lra); sgn_finish.
  - subst v. rewrite (Hz eq_refl). rewrite rpow_zero_base.
    destruct (Qeq_bool e 0); repeat split; intro E'; try (exfalso; lra); sgn_finish.
  - rewrite (Hp G). rewrite rpow_pos by auto. unfold Rpower.
    pose proof (exp_pos (Q2R e * ln v)).
    repeat split; intro E'; try (exfalso; lra); sgn_finish.
Qed.

Lemma sin_prodl : forall (f : positive -> sset) (g : positive -> R) xs,
  (forall k, In k xs -> sin (f k) (g k)) ->
  sin (fold_right smul spos1 (map f xs)) (prodl (map g xs)).
Proof.
  induction xs as [|k xs IH]; intros H; simpl.
  - apply sin_pos1; lra.
  - apply sin_mul; [apply H; simpl; auto|apply IH; intros; apply H; simpl; auto].
Qed.

Lemma sin_suml : forall (f : positive -> sset) (g : positive -> R) xs,
  (forall k, In k xs -> sin (f k) (g k)) ->
  sin (fold_right sadd szero1 (map f xs)) (suml (map g xs)).
Proof.
  induction xs as [|k xs IH]; intros H; simpl.
  - apply sin_zero1.
  - apply sin_add; [apply H; simpl; auto|apply IH; intros; apply H; simpl; auto].
Qed.

Lemma rsum_sign : forall n f, (forall j, 0 <= f j) -> 0 <= rsum n f.
Proof. induction n; intros f H; simpl; [lra|]. pose proof (IHn f H). pose proof (H n). lra. Qed.

Lemma sumover_sign : forall C f i, (forall j, 0 <= f j) -> 0 <= sumover C f i.
Proof.
  induction C as [|[n L] C IH]; intros f i H; simpl; auto.
  apply rsum_sign. intros; apply IH; auto.
Qed.

Lemma sin_sumover : forall P C f i, (forall j, sin P (f j)) -> sin (ssum P) (sumover C f i).
Proof.
  intros P C f i H. unfold ssum.
  destruct (ssub P snn) eqn:S1.
  - assert (0 <= sumover C f i).
    { apply sumover_sign. intros j. destruct (sin_sub _ _ _ S1 (H j)) as [N _].
      destruct (Rlt_dec (f j) 0) as [L|L]; [specialize (N L); discriminate|lra]. }
    unfold snn; repeat split; intros; auto; lra.
  - destruct (ssub P snp) eqn:S2; [|apply sin_any].
    assert (0 <= - sumover C f i).
    { replace (- sumover C f i) with (sumover C (fun j => - f j) i).
      - apply sumover_sign. intros j. destruct (sin_sub _ _ _ S2 (H j)) as [_ [_ N]].
        destruct (Rlt_dec 0 (f j)) as [L|L]; [specialize (N L); discriminate|lra].
      - transitivity (sumover C (fun j => -1 * f j) i).
        + apply sumover_ext; auto. intros; ring.
        + rewrite sumover_scal; ring. }
    unfold snp; repeat split; intros; auto; lra.
Qed.

(** ** The rule per node *)
Definition sg_get (st : PositiveMap.t (sset * bool)) (k : positive) : sset * bool :=
  match PositiveMap.find k st with Some e => e | None => (sany, false) end.

Definition const_sg (k : num) : sset :=
  if num_is_zero k then szero1 else if num_pos k then spos1
  else if num_pos (num_neg k) then SS true false false else sany.

(** a child's set at its parent's index: its own where its dims are among the parent's, else
    also 0 (out of its range) *)
Definition csg (T : table) (st : PositiveMap.t (sset * bool)) (D : list dimspec) (k : positive)
  : sset :=
  if incl_dims (ndims (node_at T k)) D then fst (sg_get st k) else sor (fst (sg_get st k)) szero1.

Definition sg_node (pm : PositiveMap.t unit) (T : table) (st : PositiveMap.t (sset * bool))
  (nd : node) : sset * bool :=
  let xs := nargs nd in
  let D := ndims nd in
  let kids := forallb (fun k => snd (sg_get st k)) xs in
  let arg x := fst (sg_get st x) in
  match nop nd, xs with
  | OInput nm DPos, [] =>
      (match PositiveMap.find nm pm with Some _ => spos1 | None => sany end, true)
  | OConst k, [] => (const_sg k, true)
  | ODimSize _, [] => (spos1, true)
  | OAxisSize _, [] => (spos1, true)
  | OUn UExp, [x] => (spos1, kids)
  | OUn UNeg, [x] => (sflip (csg T st D x), kids)
  | OUn UCast, [x] => (csg T st D x, kids)
  | OUn UStop, [x] => (csg T st D x, kids)
  | OUn URecip, [x] => (spow (csg T st D x) (-1), kids && ssub (arg x) snz)
  | OUn USqrt, [x] => (spow (csg T st D x) (1 # 2), kids && ssub (arg x) snn)
  | OUn URsqrt, [x] => (spow (csg T st D x) (-1 # 2), kids && ssub (arg x) spos1)
  | OUn ULog, [x] => (sany, kids && ssub (arg x) spos1)
  | OPow e, [x] => (spow (csg T st D x) e, kids && ssub (arg x) (sreq e))
  | OPow _, _ => (sany, false)
  | OUn URecip, _ | OUn USqrt, _ | OUn URsqrt, _ | OUn ULog, _ => (sany, false)
  | OMul, _ => (fold_right smul spos1 (map (csg T st D) xs), kids)
  | OAdd, _ => (fold_right sadd szero1 (map (csg T st D) xs), kids)
  | OEinsum _, _ =>
      (ssum (fold_right smul spos1 (map (fun k => sor (arg k) szero1) xs)), kids)
  | _, _ => (sany, kids)
  end.

Definition sg_checkb (G : gctx) : bool :=
  forallb (fun p => let r := sg_node (gpos G) (gT G) (gsg G) (node_at (gT G) (fst p)) in
                    ssub (fst r) (fst (snd p)) && Bool.eqb (snd r) (snd (snd p)))
          (PositiveMap.elements (gsg G)).

Definition sg_of (G : gctx) (k : positive) : sset := fst (sg_get (gsg G) k).
Definition dfn_of (G : gctx) (k : positive) : bool := snd (sg_get (gsg G) k).

(** ** Soundness *)
Section Sound.
Variable G : gctx.
Variable c : ctx.
Hypothesis M : model_ok G c.
Local Notation T := (gT G).
Local Notation st := (gsg G).

Definition kid_ok (k : positive) : Prop :=
  forall rho x, msk (sz c) (ndims (node_at T k)) x = true -> sin (fst (sg_get st k)) (den c T k rho x).

Lemma kid_any : forall k, kid_ok k -> forall rho j, sin (sor (fst (sg_get st k)) szero1) (den c T k rho j).
Proof.
  intros k H rho j. apply sin_or_zero.
  destruct (msk (sz c) (ndims (node_at T k)) j) eqn:Mk; [right; apply H; auto|left].
  apply den_msk0; auto. apply (proj1 M).
Qed.

Lemma kid_at : forall k D x, kid_ok k -> msk (sz c) D x = true ->
  forall rho, sin (csg T st D k) (den c T k rho (restrict D x)).
Proof.
  intros k D x H Mx rho. unfold csg.
  destruct (incl_dims (ndims (node_at T k)) D) eqn:I.
  - rewrite (den_agree c T (proj1 M) k rho (restrict D x) x).
    + apply H. apply (incl_dims_msk _ _ D); auto.
    + intros n In_. apply restrict_in. apply in_map_iff in In_ as [d [<- Id]].
      apply in_map. eapply incl_dims_In; eauto.
  - apply kid_any; auto.
Qed.

Lemma sg_node_sound : forall i, (forall k, In k (nargs (node_at T i)) -> kid_ok k) ->
  forall rho x, msk (sz c) (ndims (node_at T i)) x = true ->
  sin (fst (sg_node (gpos G) T st (node_at T i))) (den c T i rho x).
Proof.
  intros i K rho x Mx. destruct M as [W [_ [[S1 _] [_ [DO _]]]]].
  destruct (node_at T i) as [o xs D] eqn:Ei. simpl in Mx |- *.
  rewrite (den_in c T i o xs D rho x W Ei Mx).
  assert (K0 : forall x0, xs = [x0] -> sin (csg T st D x0) (den c T x0 rho (restrict D x))).
  { intros x0 ->. apply kid_at; auto. apply K. try rewrite Ei; simpl; auto. }
  assert (V0 : forall x0, xs = [x0] -> vat (map (den c T) xs) 0 rho (restrict D x) =
                                        den c T x0 rho (restrict D x)).
  { intros x0 ->. reflexivity. }
  unfold sg_node. cbn [nop nargs ndims].
  destruct o; simpl; try apply sin_any.
  - (* INPUT *) destruct d; try apply sin_any. destruct xs; try apply sin_any.
    destruct (PositiveMap.find nm (gpos G)) as [[]|] eqn:F; [|apply sin_any].
    apply sin_pos1. apply DO; auto.
  - (* CONST *) destruct xs; try apply sin_any. unfold const_sg.
    destruct (num_is_zero c0) eqn:Z.
    + rewrite (num_is_zero_val _ Z). apply sin_zero1.
    + destruct (num_pos c0) eqn:P; [apply sin_pos1, num_pos_val; auto|].
      destruct (num_pos (num_neg c0)) eqn:N; [|apply sin_any].
      apply num_pos_val in N. rewrite num_val_neg in N.
      repeat split; intros; simpl; auto; lra.
  - (* DIM_SIZE *) destruct xs; try apply sin_any. apply sin_pos1, lt_0_INR.
    specialize (S1 d); lia.
  - (* AXIS_SIZE *) destruct xs; try apply sin_any. apply sin_pos1, lt_0_INR.
    specialize (S1 a); lia.
  - (* ADD *) rewrite map_map. apply sin_suml. intros k Ik. apply kid_at; auto; try (apply K; simpl; auto).
  - (* MUL *) rewrite map_map. apply sin_prodl. intros k Ik. apply kid_at; auto; try (apply K; simpl; auto).
  - (* UN *) destruct xs as [|x0 [|]]; try (destruct u; apply sin_any).
    rewrite (V0 x0 eq_refl). pose proof (K0 x0 eq_refl) as Kx.
    destruct u; simpl; try apply sin_any.
    + apply sin_flip; auto.
    + rewrite <- rpow_minus_one. apply sin_pow; auto.
    + apply sin_pos1, exp_pos.
    + rewrite <- rpow_half. apply sin_pow; auto.
    + rewrite <- rpow_minus_half. apply sin_pow; auto.
    + auto.
    + auto.
  - (* POW *) destruct xs as [|x0 [|]]; try apply sin_any.
    rewrite (V0 x0 eq_refl). apply sin_pow. apply K0; auto.
  - (* EINSUM *) apply sin_sumover. intros j. rewrite map_map. apply sin_prodl.
    intros k Ik. apply kid_any. try (apply K; simpl; auto).
Qed.
End Sound.

Theorem sg_sound : forall G c, model_ok G c -> sg_checkb G = true ->
  forall i rho x, msk (sz c) (ndims (node_at (gT G) i)) x = true ->
  sin (sg_of G i) (den c (gT G) i rho x).
Proof.
  intros G c M CK i. pose proof (proj1 M) as W.
  induction i as [i IH] using (well_founded_ind (Wf_nat.well_founded_ltof _ Pos.to_nat)).
  intros rho x Mx. unfold sg_of, sg_get.
  destruct (PositiveMap.find i (gsg G)) as [e|] eqn:F; [|apply sin_any].
  unfold sg_checkb in CK. rewrite forallb_forall in CK.
  specialize (CK (i, e) (PositiveMap.elements_correct _ _ F)). simpl in CK.
  apply andb_prop in CK as [CK _].
  apply (sin_sub _ _ _ CK). apply sg_node_sound; auto.
  intros k Ik rho' x' Mk. change (sin (sg_of G k) (den c (gT G) k rho' x')). apply IH; auto.
  pose proof (node_args_lt (gT G) i W) as L. rewrite Forall_forall in L.
  unfold Wf_nat.ltof. apply Pos2Nat.inj_lt. apply L; auto.
Qed.
