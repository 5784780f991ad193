(** * RulesMerge: the sign-guarded instances of mul-canon, add-canon and pow-pow (docs/rules.md,
    canonical forms; the guards of [proofs/checker_rules_canonical.py]).

    [x^-1 * x = 1] needs [x <> 0], [x^-1 - x^-1 = 0] needs [x^-1] defined, [(x^-1)^-1 = x] needs
    [x <> 0]: the Python rules test these with the sign analysis of [proofs/checker_signs.py].
    Each checker here tests the same guard with the Coq analysis ([Signs.v]: the same rules,
    sets at least as large, so every step it accepts the Python guard accepts too) and, for
    its lemma, the sign condition Coq's total semantics needs, per base [v] with exponents
    [a_i] on the left and [b_j] on the right (equal sums):
    - [v > 0]: always ([Rpower] laws);
    - [v = 0] possible: all [a_i] are 0 exactly when all [b_j] are;
    - [v < 0] possible: all exponents integers, or a non-integer one on each side (both
      sides 0).
    pow-pow [(x^a)^b = x^(ab)]: [v < 0] possible only with [a], [b] integers, or [a] and [ab]
    both non-integers. *)

From Coq Require Import Reals Lra Lia List QArith Qreals ZArith PArith NArith Bool Permutation.
From Coq Require Import FSets.FMapPositive FunctionalExtensionality.
From Shardproof Require Import Base Num Pow Term Props RuleLib Congr Rel RulesBasic RulesLift
  RulesEinsum RulesScalarOut Positive Signs Canon RulesCanon.
Import ListNotations.
Open Scope R_scope.

(** ** Products of powers of one base *)
Definition qsum (l : list Q) : Q := fold_right Qplus 0%Q l.
Definition zsum (l : list Q) : Z := fold_right (fun e z => (Qnum (Qred e) + z)%Z) 0%Z l.
Definition allz (l : list Q) : bool := forallb (fun e => Qeq_bool e 0) l.
Definition allint (l : list Q) : bool := forallb qint l.
Definition anyfrac (l : list Q) : bool := existsb (fun e => negb (qint e)) l.

Definition base_ok (s : sset) (la ra : list Q) : bool :=
  Qeq_bool (qsum la) (qsum ra) &&
  implb (szero s) (Bool.eqb (allz la) (allz ra)) &&
  implb (sneg s) ((allint la && allint ra) || (anyfrac la && anyfrac ra)).

Lemma qint_inject : forall a, qint a = true -> (a == inject_Z (Qnum (Qred a)))%Q.
Proof.
  intros a H. rewrite <- (Qred_correct a) at 1. unfold qint in H. apply Pos.eqb_eq in H.
  destruct (Qred a) as [n d]; simpl in *; subst; reflexivity.
Qed.

Lemma rpow_int' : forall v a, qint a = true -> rpow v a = powerRZ v (Qnum (Qred a)).
Proof. intros. unfold rpow; rewrite H; auto. Qed.

Lemma prod_rpow_pos : forall v l, 0 < v -> prodl (map (rpow v) l) = Rpower v (Q2R (qsum l)).
Proof.
  intros v l P; induction l as [|e l IH]; simpl.
  - unfold Q2R; simpl. replace (0 * / 1) with 0 by field. rewrite Rpower_O; auto.
  - rewrite IH, rpow_pos, Q2R_plus, Rpower_plus by auto. auto.
Qed.

Lemma prod_rpow_zero : forall l, prodl (map (rpow 0) l) = if allz l then 1 else 0.
Proof.
  induction l as [|e l IH]; simpl; auto.
  rewrite IH, rpow_zero_base. destruct (Qeq_bool e 0), (allz l); simpl; ring.
Qed.

Lemma prod_rpow_int : forall v l, v <> 0 -> allint l = true ->
  prodl (map (rpow v) l) = powerRZ v (zsum l).
Proof.
  intros v l N; induction l as [|e l IH]; simpl; intros H; auto.
  apply andb_prop in H as [H1 H2]. rewrite IH, rpow_int', powerRZ_add by auto. auto.
Qed.

Lemma zsum_val : forall l, allint l = true -> IZR (zsum l) = Q2R (qsum l).
Proof.
  induction l as [|e l IH]; simpl; intros H.
  - unfold Q2R; simpl; field.
  - apply andb_prop in H as [H1 H2]. rewrite plus_IZR, IH, Q2R_plus by auto.
    rewrite (qint_val e H1). auto.
Qed.

Lemma prod_rpow_frac : forall v l, v < 0 -> anyfrac l = true -> prodl (map (rpow v) l) = 0.
Proof.
  intros v l N; induction l as [|e l IH]; simpl; intros H; [discriminate|].
  destruct (qint e) eqn:Q; simpl in H.
  - rewrite IH by auto. ring.
  - unfold rpow at 1. rewrite Q. destruct (Rlt_dec 0 v); [lra|ring].
Qed.

Lemma base_ok_sound : forall s la ra v, base_ok s la ra = true -> sin s v ->
  prodl (map (rpow v) la) = prodl (map (rpow v) ra).
Proof.
  intros s la ra v H [Hn [Hz Hp]]. unfold base_ok in H.
  apply andb_prop in H as [H H3]. apply andb_prop in H as [H1 H2].
  apply Qeq_bool_iff in H1.
  destruct (Rtotal_order v 0) as [L|[E|G]].
  - rewrite (Hn L) in H3. simpl in H3. apply orb_prop in H3 as [H3|H3].
    + apply andb_prop in H3 as [A1 A2].
      rewrite !prod_rpow_int by (auto; lra). f_equal.
      apply eq_IZR. rewrite !zsum_val by auto. apply Qeq_eqR; auto.
    + apply andb_prop in H3 as [A1 A2]. rewrite !prod_rpow_frac by auto. auto.
  - subst v. rewrite (Hz eq_refl) in H2. simpl in H2. apply Bool.eqb_prop in H2.
    rewrite !prod_rpow_zero, H2. auto.
  - rewrite !prod_rpow_pos by auto. rewrite (Qeq_eqR _ _ H1). auto.
Qed.

(** ** Grouping factors by base *)
Definition exps (k : positive) (P : list (positive * Q)) : list Q :=
  map snd (filter (fun p => Pos.eqb (fst p) k) P).
Definition rest (k : positive) (P : list (positive * Q)) : list (positive * Q) :=
  filter (fun p => negb (Pos.eqb (fst p) k)) P.

Fixpoint merge_ok (G : gctx) (K : list positive) (pl pr : list (positive * Q)) : bool :=
  match K with
  | [] => match pl, pr with [], [] => true | _, _ => false end
  | k :: K' => base_ok (sg_of G k) (exps k pl) (exps k pr) && merge_ok G K' (rest k pl) (rest k pr)
  end.

Lemma prodl_filter_any : forall A (f : A -> R) p l,
  prodl (map f l) = prodl (map f (filter p l)) * prodl (map f (filter (fun z => negb (p z)) l)).
Proof.
  intros A f p; induction l as [|z l IH]; simpl; [ring|].
  destruct (p z); simpl; rewrite IH; ring.
Qed.

Section Merge.
Variable val : positive -> R.
Local Notation F := (fun p : positive * Q => rpow (val (fst p)) (snd p)).

Lemma prod_exps : forall k P, prodl (map F (filter (fun p => Pos.eqb (fst p) k) P)) =
  prodl (map (rpow (val k)) (exps k P)).
Proof.
  intros k P; unfold exps; induction P as [|[b e] P IH]; simpl; auto.
  destruct (Pos.eqb_spec b k); simpl; auto. subst. rewrite IH. auto.
Qed.

Lemma exps_nil : forall k P, existsb (fun p => Pos.eqb (fst p) k) P = false -> exps k P = [].
Proof.
  intros k P; induction P as [|[b e] P IH]; simpl; intros H; auto.
  apply orb_false_elim in H as [H1 H2]. unfold exps; simpl; rewrite H1. apply IH; auto.
Qed.

Lemma merge_sound : forall G K pl pr, merge_ok G K pl pr = true ->
  (forall p, In p (pl ++ pr) -> sin (sg_of G (fst p)) (val (fst p))) ->
  prodl (map F pl) = prodl (map F pr).
Proof.
  intros G K; induction K as [|k K IH]; intros pl pr H S; simpl in H.
  - destruct pl, pr; try discriminate; auto.
  - apply andb_prop in H as [B H].
    rewrite (prodl_filter_any _ F (fun p => Pos.eqb (fst p) k) pl).
    rewrite (prodl_filter_any _ F (fun p => Pos.eqb (fst p) k) pr).
    rewrite !prod_exps. f_equal.
    + destruct (existsb (fun p => Pos.eqb (fst p) k) (pl ++ pr)) eqn:Ex.
      * apply existsb_exists in Ex as [p [Ip Ep]]. apply Pos.eqb_eq in Ep.
        apply (base_ok_sound _ _ _ _ B). rewrite <- Ep. apply S; auto.
      * rewrite existsb_app in Ex. apply orb_false_elim in Ex as [E1 E2].
        rewrite !exps_nil by auto. auto.
    + apply (IH _ _ H). intros p Ip. apply S. apply in_app_or in Ip as [Ip|Ip];
        apply filter_In in Ip as [Ip _]; apply in_or_app; auto.
Qed.
End Merge.

(** ** The Python guard, with Coq's sign sets ([checker_signs.product_keeps_definedness]) *)
Definition prd (T : table) (x : positive) : positive * sset :=
  match node_at T x with Node (OPow e) [b] _ => (b, sreq e) | _ => (x, sany) end.

Definition req_of (k : positive) (P : list (positive * sset)) : sset :=
  fold_right (fun p acc => if Pos.eqb (fst p) k then sand (snd p) acc else acc) sany P.
Definition has (k : positive) (P : list (positive * sset)) : bool :=
  existsb (fun p => Pos.eqb (fst p) k) P.

Definition keeps_defined (G : gctx) (L R : list (positive * sset)) : bool :=
  forallb (fun p => let k := fst p in let s := sg_of G k in
             if has k R then seqb (sand s (req_of k L)) (sand s (req_of k R))
             else dfn_of G k && ssub s (req_of k L)) L &&
  forallb (fun p => has (fst p) L || dfn_of G (fst p)) R.

(** ** mul-canon merging powers *)
(** a factor as a power of a base: [POW(b, e)] with [b]'s dims among its own is [(b, e)] *)
Definition rd (T : table) (x : positive) : positive * Q :=
  match node_at T x with
  | Node (OPow e) [b] Dx => if incl_dims (ndims (node_at T b)) Dx then (b, e) else (x, 1%Q)
  | _ => (x, 1%Q)
  end.

Definition chk_mul_merge (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  let Dr := ndims (node_at T r) in
  match node_at T l with
  | Node OMul xs D =>
      match flat OMul canon_fuel T D xs, flat OMul canon_fuel T Dr [r] with
      | Some fl, Some fr =>
          let nl := filter (fun x => negb (is_cst T x)) fl in
          let nr := filter (fun x => negb (is_cst T x)) fr in
          let pl := map (rd T) nl in
          let pr := map (rd T) nr in
          if negb (Nat.eqb (length xs) 0) && dims_eqvb D Dr && kids_in T xs D &&
             kids_in T [r] Dr && num_eqb (cprod T fl) (cprod T fr) && sg_checkb G &&
             keeps_defined G (map (prd T) nl) (map (prd T) nr) &&
             merge_ok G (map fst (pl ++ pr)) pl pr
          then Some [] else None
      | _, _ => None
      end
  | _ => None
  end.

Section Rd.
Variable c : ctx.
Variable T : table.
Hypothesis W : wf_table T.

Lemma rd_val : forall x rho i, msk (sz c) (ndims (node_at T x)) i = true ->
  msk (sz c) (ndims (node_at T (fst (rd T x)))) i = true /\
  den c T x rho i = rpow (den c T (fst (rd T x)) rho i) (snd (rd T x)).
Proof.
  intros x rho i M. unfold rd.
  destruct (node_at T x) as [o bs Dx] eqn:Ex.
  assert (Self : msk (sz c) (ndims (node_at T x)) i = true /\
                 den c T x rho i = rpow (den c T x rho i) 1)
    by (split; [rewrite ?Ex; exact M|rewrite rpow_one; auto]).
  destruct o; try exact Self. destruct bs as [|b [|]]; try exact Self.
  destruct (incl_dims (ndims (node_at T b)) Dx) eqn:I; try exact Self. simpl in M |- *. split.
  - apply (incl_dims_msk _ _ Dx); auto.
  - rewrite (den_in c T x _ _ _ rho i W Ex M). cbn [core map]. unfold vat; simpl nth.
    f_equal. apply den_agree; auto. intros n In_. apply restrict_in.
    apply in_map_iff in In_ as [d [<- Id]]. apply in_map. eapply incl_dims_In; eauto.
Qed.
End Rd.

Lemma chk_mul_merge_sound : rule_sound chk_mul_merge.
Proof.
  intros G l r h cl H c M _. pose proof M as M0. destruct M as [W _].
  unfold chk_mul_merge in H. set (T := gT G) in *. set (Dr := ndims (node_at T r)) in *.
  destruct (node_at T l) as [o xs D] eqn:El. destruct o; try discriminate.
  destruct (flat OMul canon_fuel T D xs) as [fl|] eqn:Fl; try discriminate.
  destruct (flat OMul canon_fuel T Dr [r]) as [fr|] eqn:Fr; try discriminate.
  match type of H with (if ?b then _ else _) = _ => destruct b eqn:B; try discriminate end.
  repeat match type of B with _ && _ = true => apply andb_prop in B as [B ?] end.
  rename H0 into MO, H1 into KD, H2 into SG, H3 into CE, H4 into KR, H5 into KL, H6 into DE.
  apply num_eqb_val in CE.
  destruct (flat_sound c T W OMul (or_intror eq_refl) canon_fuel D xs fl Fl KL) as [VL KFL].
  destruct (flat_sound c T W OMul (or_intror eq_refl) canon_fuel Dr [r] fr Fr KR) as [VR KFR].
  destruct (dims_eqvb_perm _ _ DE) as [P _].
  intros rho R x. rewrite (den_node c T l _ _ _ W El).
  destruct (msk (sz c) D x) eqn:Mx.
  2:{ rewrite den_msk0; auto. fold Dr. rewrite <- (msk_perm _ _ _ x P); auto. }
  assert (Mr : msk (sz c) Dr (restrict D x) = true)
    by (rewrite <- (msk_perm _ _ _ _ P), msk_restrict; auto).
  assert (Ml : msk (sz c) D (restrict D x) = true) by (rewrite msk_restrict; auto).
  rewrite <- (den_restrict c T W r rho x). fold Dr. rewrite <- (restrict_perm _ _ x P).
  cbn [core]. rewrite map_map.
  pose proof (VL rho (restrict D x) Ml) as E1. pose proof (VR rho (restrict D x) Mr) as E2.
  cbn [comb map prodl fold_right] in E2. cbn [comb] in E1.
  rewrite E1, Rmult_1_r in *. rewrite E2.
  rewrite (prod_split c T W fl), (prod_split c T W fr), CE. f_equal.
  set (y := restrict D x) in *.
  set (nl := filter (fun x => negb (is_cst T x)) fl) in *.
  set (nr := filter (fun x => negb (is_cst T x)) fr) in *.
  assert (Kn : forall D' l0, kids_in T l0 D' = true -> msk (sz c) D' y = true ->
            forall z, In z l0 -> msk (sz c) (ndims (node_at T z)) y = true).
  { intros D' l0 K0 M' z Iz. unfold kids_in in K0. rewrite forallb_forall in K0.
    apply (incl_dims_msk _ _ D'); auto. }
  assert (Conv : forall D' l0, kids_in T l0 D' = true -> msk (sz c) D' y = true ->
            prodl (map (fun z => den c T z rho y) l0) =
            prodl (map (fun p => rpow (den c T (fst p) rho y) (snd p)) (map (rd T) l0))).
  { intros D' l0 K0 M'. rewrite map_map. f_equal. apply map_ext_in. intros z Iz.
    apply (rd_val c T W z rho y). apply (Kn D' l0 K0 M'); auto. }
  rewrite (Conv D nl) by (auto; apply kids_in_filter; auto).
  rewrite (Conv Dr nr) by (auto; apply kids_in_filter; auto).
  apply (merge_sound (fun k => den c T k rho y) G _ _ _ MO).
  intros p Ip. apply in_app_or in Ip as [Ip|Ip]; apply in_map_iff in Ip as [z [<- Iz]];
    apply (sg_sound G c M0 SG); apply (rd_val c T W z rho y);
    [apply (Kn D nl)|apply (Kn Dr nr)]; auto; apply kids_in_filter; auto.
Qed.

(** mul-canon: the permutation checker of [RulesCanon.v], else the merging one *)
Definition chk_mul_canon_all (G : gctx) (l r : positive) (h : hint) : option (list claim) :=
  match chk_mul_canon G l r h with Some cl => Some cl | None => chk_mul_merge G l r h end.

Lemma chk_mul_canon_all_sound : rule_sound chk_mul_canon_all.
Proof.
  intros G l r h cl H. unfold chk_mul_canon_all in H.
  destruct (chk_mul_canon G l r h) eqn:E.
  - injection H as <-. eapply chk_mul_canon_sound; eauto.
  - eapply chk_mul_merge_sound; eauto.
Qed.

(** ** add-canon with its guard *)
(** [checker_rules_canonical._coeff_monomial]'s monomial of a term: a [CONST] has none, a
    [MUL] its non-[CONST] operands (sorted), any other term itself *)
Definition is_const_op (T : table) (z : positive) : bool :=
  match nop (node_at T z) with OConst _ => true | _ => false end.

Definition pmono (T : table) (t : positive) : list positive :=
  match node_at T t with
  | Node (OConst _) _ _ => []
  | Node OMul zs _ => sort_pos (filter (fun z => negb (is_const_op T z)) zs)
  | _ => [t]
  end.

(** The factors of every monomial of one side that the other side does not have: the rule's
    dropped monomials (those whose coefficients cancel) are among them, so requiring all of
    them defined is the Python guard or stronger. *)
Definition add_dropped (T : table) (fl fr : list positive) : list positive :=
  let ml := map (pmono T) fl in
  let mr := map (pmono T) fr in
  let out ms m := negb (existsb (list_eqb Pos.eqb m) ms) in
  concat (filter (out mr) ml) ++ concat (filter (out ml) mr).

Definition chk_add_canon_g (G : gctx) (l r : positive) (h : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l with
  | Node OAdd xs D =>
      match flat OAdd canon_fuel T D xs, flat OAdd canon_fuel T (ndims (node_at T r)) [r] with
      | Some fl, Some fr =>
          match add_dropped T fl fr with
          | [] => chk_add_canon G l r h
          | ds => if sg_checkb G && forallb (dfn_of G) ds then chk_add_canon G l r h else None
          end
      | _, _ => None
      end
  | _ => None
  end.

Lemma chk_add_canon_g_sound : rule_sound chk_add_canon_g.
Proof.
  intros G l r h cl H. unfold chk_add_canon_g in H. inv_chk H; eapply chk_add_canon_sound; eauto.
Qed.

(** ** pow-pow: (x^a)^b = x^(ab) *)
(** [checker_signs._pow], the Python sets (the power's value where it is defined) *)
Definition spow_py (s : sset) (e : Q) : sset :=
  let r := sreq e in
  let ev := Z.even (Qnum (Qred e)) in
  SS (sneg s && sneg r && negb ev) (szero s && szero r) ((spos s && spos r) || (sneg s && sneg r && ev)).

(** [checker_signs.pow_pow_keeps_definedness] *)
Definition pp_keeps (s : sset) (a b : Q) : bool :=
  let ra := sreq a in
  let fits one := ssub (spow_py one a) (sreq b) in
  let left := SS (sneg ra && fits (SS true false false)) (szero ra && fits szero1)
                 (spos ra && fits spos1) in
  seqb (sand s left) (sand s (sreq (a * b))).

Definition pp_sem (s : sset) (a b : Q) : bool :=
  implb (sneg s) ((qint a && qint b) || (negb (qint (a * b)) && negb (qint a))).

Definition chk_pow_pow (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l, node_at T r with
  | Node (OPow b) [y] D, Node (OPow ab) [x'] Dr =>
      match node_at T y with
      | Node (OPow a) [x] Dy =>
          if Pos.eqb x x' && Qeq_bool ab (a * b) && dims_eqvb D Dr && incl_dims Dy D &&
             incl_dims (ndims (node_at T x)) Dy && incl_dims (ndims (node_at T x)) Dr &&
             (qint b || Z.odd (Qnum (Qred a))) && sg_checkb G &&
             pp_keeps (sg_of G x) a b && pp_sem (sg_of G x) a b
          then Some [] else None
      | _ => None
      end
  | _, _ => None
  end.

Lemma powerRZ_opp' : forall x z, x <> 0 -> powerRZ x (- z) = / powerRZ x z.
Proof.
  intros x z N. pose proof (powerRZ_add x z (- z) N) as E.
  rewrite Z.add_opp_diag_r in E. simpl in E. pose proof (powerRZ_NOR x z N).
  field_simplify_eq; auto. rewrite E. ring.
Qed.

Lemma powerRZ_powerRZ : forall x a b, x <> 0 -> powerRZ (powerRZ x a) b = powerRZ x (a * b).
Proof.
  intros x a b N.
  assert (Nat : forall n, powerRZ x a ^ n = powerRZ x (a * Z.of_nat n)).
  { induction n as [|n IH]; simpl.
    - rewrite Z.mul_0_r. auto.
    - rewrite IH, <- powerRZ_add by auto. f_equal. lia. }
  destruct b as [|p|p]; simpl.
  - rewrite Z.mul_0_r; auto.
  - rewrite Nat, positive_nat_Z. auto.
  - rewrite Nat, positive_nat_Z. rewrite <- powerRZ_opp' by auto. f_equal. lia.
Qed.

Lemma rpow_one_base : forall e, rpow 1 e = 1.
Proof.
  intros e. rewrite rpow_pos by lra. unfold Rpower. rewrite ln_1, Rmult_0_r, exp_0. auto.
Qed.

Lemma qint_zero : forall q, (q == 0)%Q -> qint q = true.
Proof. intros q H. unfold qint. rewrite (Qred_complete q 0 H). reflexivity. Qed.

Lemma pp_sound : forall s a b v, pp_sem s a b = true -> sin s v ->
  rpow (rpow v a) b = rpow v (a * b).
Proof.
  intros s a b v H [Hn [Hz Hp]]. unfold pp_sem in H.
  destruct (Rtotal_order v 0) as [L|[E|G]].
  - rewrite (Hn L) in H. simpl in H. apply orb_prop in H as [H|H].
    + apply andb_prop in H as [Ia Ib].
      rewrite (rpow_ext v a _ (qint_inject a Ia)), rpow_int.
      rewrite (rpow_ext _ b _ (qint_inject b Ib)), rpow_int.
      assert (Eab : (a * b == inject_Z (Qnum (Qred a) * Qnum (Qred b)))%Q).
      { rewrite inject_Z_mult, <- (qint_inject a Ia), <- (qint_inject b Ib). reflexivity. }
      rewrite (rpow_ext v _ _ Eab), rpow_int. apply powerRZ_powerRZ; lra.
    + apply andb_prop in H as [Iab Ia]. apply negb_true_iff in Iab, Ia.
      assert (Z0 : rpow v a = 0) by (unfold rpow; rewrite Ia; destruct (Rlt_dec 0 v); [lra|auto]).
      assert (Z1 : rpow v (a * b) = 0)
        by (unfold rpow; rewrite Iab; destruct (Rlt_dec 0 v); [lra|auto]).
      rewrite Z0, Z1, rpow_zero_base. destruct (Qeq_bool b 0) eqn:Eb; auto.
      apply Qeq_bool_iff in Eb. exfalso.
      assert (qint (a * b) = true); [|congruence].
      apply qint_zero. rewrite Eb. apply Qmult_0_r.
  - subst v. rewrite (rpow_zero_base a), (rpow_zero_base (a * b)).
    destruct (Qeq_bool a 0) eqn:Ea.
    + rewrite rpow_one_base. apply Qeq_bool_iff in Ea.
      assert (Qeq_bool (a * b) 0 = true) as ->; auto.
      apply Qeq_bool_iff. rewrite Ea. apply Qmult_0_l.
    + rewrite rpow_zero_base.
      destruct (Qeq_bool b 0) eqn:Eb, (Qeq_bool (a * b) 0) eqn:Eab; auto; exfalso.
      * apply Qeq_bool_iff in Eb. assert (Qeq_bool (a * b) 0 = true); [|congruence].
        apply Qeq_bool_iff. rewrite Eb. apply Qmult_0_r.
      * apply Qeq_bool_iff in Eab. apply Qmult_integral in Eab as [Z|Z];
          apply Qeq_bool_iff in Z; congruence.
  - rewrite (rpow_pos v a G), (rpow_pos v (a * b) G).
    assert (0 < Rpower v (Q2R a)) by (unfold Rpower; apply exp_pos).
    rewrite rpow_pos by auto. rewrite Rpower_mult, Q2R_mult. auto.
Qed.

Lemma chk_pow_pow_sound : rule_sound chk_pow_pow.
Proof.
  intros G l r h cl H c M _. pose proof M as M0. destruct M as [W _].
  unfold chk_pow_pow in H. set (T := gT G) in *.
  destruct (node_at T l) as [o1 ys D] eqn:El. destruct o1; try discriminate.
  destruct ys as [|y [|]]; try discriminate.
  destruct (node_at T r) as [o2 xs' Dr] eqn:Er. destruct o2; try discriminate.
  destruct xs' as [|x' [|]]; try discriminate.
  destruct (node_at T y) as [o3 zs Dy] eqn:Ey. destruct o3; try discriminate.
  destruct zs as [|x [|]]; try discriminate.
  match type of H with (if ?b then _ else _) = _ => destruct b eqn:B; try discriminate end.
  repeat match type of B with _ && _ = true => apply andb_prop in B as [B ?] end.
  rename H0 into PS, H1 into PK, H2 into SG, H3 into G1, H4 into IXr, H5 into IXy,
    H6 into IYD, H7 into DE, H8 into QE, B into XE.
  apply Pos.eqb_eq in XE. subst x'. apply Qeq_bool_iff in QE.
  destruct (dims_eqvb_perm _ _ DE) as [P _].
  apply (eqv_by_core c T l r _ _ _ _ _ _ W El Er DE). intros rho R i Mi Ri.
  cbn [core map]. unfold vat; simpl nth.
  assert (My : msk (sz c) Dy i = true) by (apply (incl_dims_msk _ _ D); auto).
  assert (Mx : msk (sz c) (ndims (node_at T x)) i = true) by (apply (incl_dims_msk _ _ Dy); auto).
  assert (Ag : forall D' k, incl_dims (ndims (node_at T k)) D' = true ->
            den c T k rho (restrict D' i) = den c T k rho i).
  { intros D' k I. apply den_agree; auto. intros n In_. apply restrict_in.
    apply in_map_iff in In_ as [d [<- Id]]. apply in_map. eapply incl_dims_In; eauto. }
  rewrite (den_in c T y _ _ _ rho i W Ey My). cbn [core map]. unfold vat; simpl nth.
  rewrite (Ag Dy x IXy).
  rewrite (rpow_ext _ _ _ QE). apply (pp_sound (sg_of G x)); auto.
  apply (sg_sound G c M0 SG); auto.
Qed.
