(** * RulesCanon: products in canonical form (docs/rules.md, canonical forms).

    mul-canon, for the products whose factors are the same up to order and constants:
    [MUL(xs) = y] where, once nested [MUL]s are flattened on both sides ([Canon.flat]), the
    factors other than scalar constants are the same multiset and the products of the
    constants are equal (exact normal forms, [Num.num_eqb]); [y] is a [MUL] or its single
    factor or a constant (the rule's "one factor: ys[0]; none: CONST(1)"). The two nodes have
    the same dims (as a set). Powers with a positive integer exponent [k <= 64] are read as
    [k] copies of their base ([pexp]: [x * x = x^2], [x^2 * x = x^3] hold for every real [x]).
    Other merges ([x^-1 * x = 1], [x^(-1/2) * x^(-1/2) = x^-1]) need the rule's sign guard:
    [RulesMerge.chk_mul_merge] checks them with [Signs.v] (docs/coq.md, "Sign facts"). *)

From Coq Require Import Reals Lra Lia List QArith ZArith PArith NArith Bool Permutation.
From Coq Require Import FSets.FMapPositive FunctionalExtensionality.
From Shardproof Require Import Base Num Pow Term Props RuleLib Congr Rel RulesBasic RulesLift
  RulesEinsum RulesScalarOut Positive Canon.
Import ListNotations.
Open Scope R_scope.

Definition const_of (T : table) (x : positive) : option num :=
  match node_at T x with Node (OConst v) [] [] => Some v | _ => None end.

Definition is_cst (T : table) (x : positive) : bool :=
  match const_of T x with Some _ => true | None => false end.

(** the product of the constant factors *)
Definition cprod (T : table) (l : list positive) : num :=
  fold_right (fun x acc => match const_of T x with Some v => num_mul v acc | None => acc end)
             (num_of_Q 1) l.

Definition canon_fuel : nat := 64.

(** A factor as a list of factors: [POW(b, k)] ([k] a positive integer, at most 64, [b]'s dims
    among the power's) is [k] copies of [b]; any other node is itself. *)
Definition pexp (T : table) (x : positive) : list positive :=
  match node_at T x with
  | Node (OPow e) [b] Dx =>
      if qint e && incl_dims (ndims (node_at T b)) Dx then
        match Qnum (Qred e) with
        | Zpos p => if Pos.leb p 64 then repeat b (Pos.to_nat p) else [x]
        | _ => [x]
        end
      else [x]
  | _ => [x]
  end.

Definition chk_mul_canon (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  let Dr := ndims (node_at T r) in
  match node_at T l with
  | Node OMul xs D =>
      match flat OMul canon_fuel T D xs, flat OMul canon_fuel T Dr [r] with
      | Some fl, Some fr =>
          if negb (Nat.eqb (length xs) 0) && dims_eqvb D Dr && kids_in T xs D &&
             kids_in T [r] Dr &&
             perm_posb (flat_map (pexp T) (filter (fun x => negb (is_cst T x)) fl))
                       (flat_map (pexp T) (filter (fun x => negb (is_cst T x)) fr)) &&
             num_eqb (cprod T fl) (cprod T fr)
          then Some [] else None
      | _, _ => None
      end
  | _ => None
  end.

Section Prod.
Variable c : ctx.
Variable T : table.
Hypothesis W : wf_table T.

Lemma cprod_val : forall l rho i,
  prodl (map (fun y => den c T y rho i) (filter (is_cst T) l)) = num_val (cprod T l).
Proof.
  induction l as [|x l IH]; intros rho i.
  - change (prodl (map (fun y => den c T y rho i) (filter (is_cst T) []))) with 1.
    unfold cprod. simpl fold_right. rewrite num_val_of_Q. unfold Q2R; simpl; field.
  - unfold cprod; cbn [fold_right]; fold (cprod T l). cbn [filter].
    destruct (is_cst T x) eqn:C; unfold is_cst in C; destruct (const_of T x) as [v|] eqn:E;
      try discriminate; [|apply IH].
    cbn [map]. rewrite prodl_cons, num_val_mul, (IH rho i). f_equal.
    unfold const_of in E. destruct (node_at T x) as [[] [] []] eqn:Ex; try discriminate.
    injection E as <-. apply (den_const c T W x c0 Ex).
Qed.

(** The product of a flattened list: its constants times the rest. *)
Lemma prod_split : forall l rho i,
  prodl (map (fun y => den c T y rho i) l) =
  num_val (cprod T l) * prodl (map (fun y => den c T y rho i) (filter (fun x => negb (is_cst T x)) l)).
Proof. intros. rewrite (prodl_filter _ (is_cst T)), cprod_val. reflexivity. Qed.

Lemma prodl_repeat : forall (f : positive -> R) b n, prodl (map f (repeat b n)) = f b ^ n.
Proof. intros f b n. induction n as [|n IH]; simpl; auto. rewrite IH; auto. Qed.

Lemma pexp_val : forall x rho i, msk (sz c) (ndims (node_at T x)) i = true ->
  den c T x rho i = prodl (map (fun y => den c T y rho i) (pexp T x)).
Proof.
  intros x rho i M. unfold pexp.
  destruct (node_at T x) as [o bs Dx] eqn:Ex.
  assert (Self : den c T x rho i = prodl (map (fun y => den c T y rho i) [x]))
    by (simpl; ring).
  destruct o; auto. destruct bs as [|b [|]]; auto.
  destruct (qint e && incl_dims (ndims (node_at T b)) Dx) eqn:B; auto.
  apply andb_prop in B as [Q I].
  destruct (Qnum (Qred e)) as [|p|p] eqn:Ep; auto.
  destruct (Pos.leb p 64); auto.
  rewrite prodl_repeat. simpl in M.
  rewrite (den_in c T x _ _ _ rho i W Ex M). cbn [core map]. unfold vat; simpl nth.
  unfold rpow. rewrite Q, Ep. simpl powerRZ. f_equal.
  apply den_agree; auto. intros n In_. apply restrict_in.
  apply in_map_iff in In_ as [d [<- Id]]. apply in_map. eapply incl_dims_In; eauto.
Qed.

Lemma kids_in_filter : forall p l D, kids_in T l D = true -> kids_in T (filter p l) D = true.
Proof.
  intros p l D K. unfold kids_in in *. rewrite forallb_forall in *. intros x Ix.
  apply filter_In in Ix as [Ix _]. auto.
Qed.

Lemma prod_pexp : forall l D rho i, kids_in T l D = true -> msk (sz c) D i = true ->
  prodl (map (fun y => den c T y rho i) l) =
  prodl (map (fun y => den c T y rho i) (flat_map (pexp T) l)).
Proof.
  induction l as [|x l IH]; intros D rho i K M; simpl; auto.
  unfold kids_in in K; simpl in K. apply andb_prop in K as [Kx Kl].
  rewrite map_app, prodl_app'. rewrite (IH D rho i Kl M). f_equal.
  rewrite (pexp_val x rho i) at 1; [simpl; ring|]. apply (incl_dims_msk _ _ D); auto.
Qed.
End Prod.

Lemma chk_mul_canon_sound : rule_sound chk_mul_canon.
Proof.
  intros G l r h cl H c M _. destruct M as [W _].
  unfold chk_mul_canon in H. set (T := gT G) in *. set (Dr := ndims (node_at T r)) in *.
  destruct (node_at T l) as [o xs D] eqn:El. destruct o; try discriminate.
  destruct (flat OMul canon_fuel T D xs) as [fl|] eqn:Fl; try discriminate.
  destruct (flat OMul canon_fuel T Dr [r]) as [fr|] eqn:Fr; try discriminate.
  match type of H with (if ?b then _ else _) = _ => destruct b eqn:B; try discriminate end.
  repeat match type of B with _ && _ = true => apply andb_prop in B as [B ?] end.
  rename H0 into CE, H1 into PN, H2 into KR, H3 into KL, H4 into DE.
  apply perm_posb_ok in PN. apply num_eqb_val in CE.
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
  rewrite (prod_pexp c T W (filter (fun x => negb (is_cst T x)) fl) D rho (restrict D x))
    by (auto; apply kids_in_filter; auto).
  rewrite (prod_pexp c T W (filter (fun x => negb (is_cst T x)) fr) Dr rho (restrict D x))
    by (auto; apply kids_in_filter; auto).
  apply prodl_Permutation, Permutation_map; auto.
Qed.

(** ** add-canon: sums as formal linear combinations of monomials

    A term of a flattened sum is a constant [(v, [])], a [MUL(zs)] (with [zs]'s dims among its
    own) read as the product of its constants times its other factors, sorted, or any other
    node [t] as [(1, [t])] (the rule's [lin]). The lhs terms and the negated rhs terms are
    collected by monomial; the step checks when every collected coefficient is zero (exact
    normal forms). Dropping a monomial whose coefficients cancel needs the monomial defined on
    the spec's domain (the rule's sign guard, [x^-1 - x^-1 = 0] needs [x <> 0]); Coq's
    semantics is total, so this lemma holds without it, and [RulesMerge.chk_add_canon_g]
    tests the guard before calling this checker (the rule table uses that one). *)
Fixpoint ins_pos (x : positive) (l : list positive) : list positive :=
  match l with [] => [x] | y :: r => if Pos.leb x y then x :: l else y :: ins_pos x r end.
Fixpoint sort_pos (l : list positive) : list positive :=
  match l with [] => [] | x :: r => ins_pos x (sort_pos r) end.

Lemma ins_pos_perm : forall x l, Permutation (x :: l) (ins_pos x l).
Proof.
  intros x l; induction l as [|y l IH]; simpl; auto. destruct (Pos.leb x y); auto.
  eapply perm_trans; [apply perm_swap|]. constructor; auto.
Qed.

Lemma sort_pos_perm : forall l, Permutation l (sort_pos l).
Proof.
  induction l as [|x l IH]; simpl; auto.
  eapply perm_trans; [apply perm_skip, IH|apply ins_pos_perm].
Qed.

Definition term_key (T : table) (t : positive) : list positive * num :=
  match const_of T t with
  | Some v => ([], v)
  | None =>
      match node_at T t with
      | Node OMul zs Dt =>
          if kids_in T zs Dt then (sort_pos (filter (fun x => negb (is_cst T x)) zs), cprod T zs)
          else ([t], num_of_Q 1)
      | _ => ([t], num_of_Q 1)
      end
  end.

Definition lin := list (list positive * num).

Fixpoint lin_ins (m : list positive) (v : num) (A : lin) : lin :=
  match A with
  | [] => [(m, v)]
  | (m', v') :: A' => if list_eqb Pos.eqb m m' then (m', v' ++ v) :: A' else (m', v') :: lin_ins m v A'
  end.

Definition lin_add (T : table) (neg : bool) (ts : list positive) (A : lin) : lin :=
  fold_right (fun t A => let k := term_key T t in
                         lin_ins (fst k) (if neg then num_neg (snd k) else snd k) A) A ts.

Section Lin.
Variable c : ctx.
Variable T : table.
Hypothesis W : wf_table T.
Variable rho : Rk.
Variable i : Ix.

Definition pv (m : list positive) : R := prodl (map (fun y => den c T y rho i) m).
Definition lval (A : lin) : R := suml (map (fun p => num_val (snd p) * pv (fst p)) A).

Lemma term_key_val : forall t, msk (sz c) (ndims (node_at T t)) i = true ->
  den c T t rho i = num_val (snd (term_key T t)) * pv (fst (term_key T t)).
Proof.
  intros t Mt. unfold term_key, pv. destruct (const_of T t) as [v|] eqn:E.
  - unfold const_of in E. destruct (node_at T t) as [[] [] []] eqn:Et; try discriminate.
    injection E as <-. simpl. rewrite (den_const c T W t c0 Et). ring.
  - destruct (node_at T t) as [o zs Dt] eqn:Et.
    assert (Dflt : den c T t rho i = num_val (num_of_Q 1) * prodl (map (fun y => den c T y rho i) [t])).
    { rewrite num_val_of_Q. cbn [map]. rewrite prodl_cons, prodl_nil. unfold Q2R; simpl. field. }
    destruct o; try exact Dflt.
    destruct (kids_in T zs Dt) eqn:K; [|exact Dflt]. simpl.
    simpl in Mt.
    rewrite (den_node c T t _ _ _ W Et), Mt. cbn [core]. rewrite map_map.
    rewrite (map_ext_in _ (fun y => den c T y rho i)).
    2:{ intros z Iz. apply den_agree; auto. intros n In_. apply restrict_in.
        unfold kids_in in K. rewrite forallb_forall in K. specialize (K z Iz).
        apply in_map_iff in In_ as [d [<- Id]]. apply in_map. eapply incl_dims_In; eauto. }
    rewrite (prod_split c T W zs). f_equal.
    apply prodl_Permutation, Permutation_map, sort_pos_perm.
Qed.

Lemma lin_ins_val : forall m v A, lval (lin_ins m v A) = num_val v * pv m + lval A.
Proof.
  intros m v A; induction A as [|[m' v'] A IH]; unfold lval in *; simpl.
  - ring.
  - destruct (list_eqb Pos.eqb m m') eqn:E; simpl.
    + apply (list_eqb_eq _ _ (fun a b => proj1 (Pos.eqb_eq a b))) in E; subst m'.
      rewrite num_val_app. ring.
    + rewrite IH. ring.
Qed.

Lemma lin_add_val : forall neg ts A,
  (forall t, In t ts -> msk (sz c) (ndims (node_at T t)) i = true) ->
  lval (lin_add T neg ts A) =
    (if neg then -1 else 1) * suml (map (fun y => den c T y rho i) ts) + lval A.
Proof.
  intros neg ts A; induction ts as [|t ts IH]; intros Mt; simpl.
  - ring.
  - rewrite lin_ins_val, IH by (intros; apply Mt; simpl; auto).
    rewrite (term_key_val t) by (apply Mt; simpl; auto).
    destruct neg; [rewrite num_val_neg|]; ring.
Qed.

Lemma lval_zero : forall A, forallb (fun p => num_is_zero (snd p)) A = true -> lval A = 0.
Proof.
  induction A as [|[m v] A IH]; unfold lval in *; simpl; intros H; [auto|].
  apply andb_prop in H as [H1 H2]. rewrite (num_is_zero_val _ H1), IH by auto. ring.
Qed.
End Lin.

Definition chk_add_canon (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  let Dr := ndims (node_at T r) in
  match node_at T l with
  | Node OAdd xs D =>
      match flat OAdd canon_fuel T D xs, flat OAdd canon_fuel T Dr [r] with
      | Some fl, Some fr =>
          if negb (Nat.eqb (length xs) 0) && dims_eqvb D Dr && kids_in T xs D &&
             kids_in T [r] Dr &&
             forallb (fun p => num_is_zero (snd p)) (lin_add T true fr (lin_add T false fl []))
          then Some [] else None
      | _, _ => None
      end
  | _ => None
  end.

Lemma kids_in_msk : forall c T l D x, kids_in T l D = true -> msk (sz c) D x = true ->
  forall t, In t l -> msk (sz c) (ndims (node_at T t)) x = true.
Proof.
  intros c T l D x K M t I. unfold kids_in in K. rewrite forallb_forall in K.
  apply (incl_dims_msk _ _ D); auto.
Qed.

Lemma chk_add_canon_sound : rule_sound chk_add_canon.
Proof.
  intros G l r h cl H c M _. destruct M as [W _].
  unfold chk_add_canon in H. set (T := gT G) in *. set (Dr := ndims (node_at T r)) in *.
  destruct (node_at T l) as [o xs D] eqn:El. destruct o; try discriminate.
  destruct (flat OAdd canon_fuel T D xs) as [fl|] eqn:Fl; try discriminate.
  destruct (flat OAdd canon_fuel T Dr [r]) as [fr|] eqn:Fr; try discriminate.
  match type of H with (if ?b then _ else _) = _ => destruct b eqn:B; try discriminate end.
  repeat match type of B with _ && _ = true => apply andb_prop in B as [B ?] end.
  rename H0 into ZZ, H1 into KR, H2 into KL, H3 into DE.
  destruct (flat_sound c T W OAdd (or_introl eq_refl) canon_fuel D xs fl Fl KL) as [VL KFL].
  destruct (flat_sound c T W OAdd (or_introl eq_refl) canon_fuel Dr [r] fr Fr KR) as [VR KFR].
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
  cbn [comb] in E1, E2. cbn [map suml fold_right] in E2. rewrite Rplus_0_r in E2.
  rewrite E1, E2.
  pose proof (lval_zero c T rho (restrict D x) _ ZZ) as Z.
  rewrite (lin_add_val c T W rho (restrict D x) true fr) in Z
    by (apply (kids_in_msk c T fr Dr); auto).
  rewrite (lin_add_val c T W rho (restrict D x) false fl) in Z
    by (apply (kids_in_msk c T fl D); auto).
  assert (L0 : lval c T rho (restrict D x) [] = 0) by reflexivity. rewrite L0 in Z. lra.
Qed.
