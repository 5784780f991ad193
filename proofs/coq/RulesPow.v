(** * RulesPow: integer powers of products (docs/rules.md, "canonical").

    pow-mul: [POW(MUL(xs), n) = MUL(POW(x, n) for x in xs)] for an integer [n]
    ([Pow.rpow_mul_int]: [(x y)^n = x^n y^n] for every real [x], [y], zero included, with
    Coq's [/0 = 0] on both sides). Every [POW(x_k, n)] has [x_k]'s dims, among the product's.

    pow-const: [POW(CONST(c), e) = CONST(c^e)] for an integer [e], folded exactly ([Num]:
    [c^|e|] by repeated products, inverted when [e < 0]); the rule's guard ([c <> 0] unless
    [e > 0]) is tested as [num_inv] succeeding on [c] ([e = 0]) or on [c^|e|] ([e < 0]).
    Constants with a non-integer exponent are not in this checker (their steps are exported as
    hypotheses, [proofs/coq_subsets.py]). *)

From Coq Require Import Reals Lra Lia List QArith ZArith PArith NArith Bool Permutation.
From Coq Require Import FSets.FMapPositive FunctionalExtensionality.
From Shardproof Require Import Base Num Pow Term Props RuleLib Rel RulesLift RulesBasic.
Import ListNotations.
Open Scope R_scope.

Lemma rpow_prodl : forall e l, qint e = true ->
  rpow (prodl l) e = prodl (map (fun v => rpow v e) l).
Proof.
  intros e l H. induction l as [|v l IH]; simpl.
  - unfold rpow; rewrite H. apply powerRZ_R1.
  - rewrite rpow_mul_int, IH; auto.
Qed.

Lemma prodl_map2 : forall (f g : positive -> R) (P : positive -> positive -> bool) xs ys,
  forallb2 P xs ys = true -> (forall x y, P x y = true -> f y = g x) ->
  prodl (map f ys) = prodl (map g xs).
Proof.
  induction xs as [|x xs IH]; destruct ys as [|y ys]; simpl; intros H E; try discriminate; auto.
  apply andb_prop in H as [H1 H2]. rewrite (E x y H1), (IH ys H2 E). reflexivity.
Qed.

(** [y] is [POW(x, e)] with [x]'s dims, among [Dr] *)
Definition pow_of (T : table) (e : Q) (Dr : list dimspec) (x y : positive) : bool :=
  match node_at T y with
  | Node (OPow e') [x'] Dy =>
      Qeqs e e' && Pos.eqb x x' && dims_eqvb Dy (ndims (node_at T x)) && incl_dims Dy Dr
  | _ => false
  end.

Definition chk_pow_mul (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l, node_at T r with
  | Node (OPow e) [m] D, Node OMul ys Dr =>
      match node_at T m with
      | Node OMul xs Dm =>
          if qint e && dims_eqvb Dm D && dims_eqvb D Dr && forallb2 (pow_of T e Dr) xs ys
          then Some [] else None
      | _ => None
      end
  | _, _ => None
  end.

Lemma chk_pow_mul_sound : rule_sound chk_pow_mul.
Proof.
  intros G l r h cl H c M _. destruct M as [W _].
  unfold chk_pow_mul in H. destruct (node_at (gT G) l) as [o xs0 D] eqn:El.
  destruct (node_at (gT G) r) as [o' ys Dr] eqn:Er.
  destruct o; try discriminate. destruct xs0 as [|m [|]]; try discriminate.
  destruct o'; try discriminate.
  destruct (node_at (gT G) m) as [om xs Dm] eqn:Em. destruct om; try discriminate.
  match type of H with context [if ?b then _ else _] => destruct b eqn:B; [|discriminate] end.
  apply andb_prop in B as [B F]. apply andb_prop in B as [B DE]. apply andb_prop in B as [Q DM].
  destruct (dims_eqvb_perm _ _ DM) as [PM _]. destruct (dims_eqvb_perm _ _ DE) as [PE _].
  apply (eqv_by_core c (gT G) l r _ _ D _ _ Dr W El Er DE).
  intros rho R x Mx Rx. simpl. unfold vat; simpl.
  rewrite (den_node c _ m _ _ Dm W Em).
  rewrite (msk_perm _ _ _ _ PM), Mx, (restrict_perm _ _ _ PM), Rx. simpl.
  rewrite map_map, rpow_prodl by auto. rewrite map_map.
  symmetry. rewrite map_map. apply (prodl_map2 _ _ (pow_of (gT G) e Dr) xs ys F).
  intros u y P. unfold pow_of in P. destruct (node_at (gT G) y) as [oy zs Dy] eqn:Ey.
  destruct oy; try discriminate. destruct zs as [|u' [|]]; try discriminate.
  apply andb_prop in P as [P I]. apply andb_prop in P as [P DY]. apply andb_prop in P as [P U].
  apply Qeqs_eq in P. apply Pos.eqb_eq in U. subst e0 u'.
  rewrite (den_node c _ y _ _ Dy W Ey).
  assert (My : msk (sz c) Dy x = true)
    by (apply (incl_dims_msk _ _ Dr); auto; rewrite <- (msk_perm _ _ _ _ PE); auto).
  rewrite My. simpl. unfold vat; simpl. f_equal.
  destruct (dims_eqvb_perm _ _ DY) as [PY _]. rewrite (restrict_perm _ _ _ PY).
  apply den_restrict; auto.
Qed.

(** ** pow-const *)
Definition const_pow (v : num) (z : Z) : option num :=
  match z with
  | Z0 => match num_inv v with Some _ => Some (num_of_Q 1) | None => None end
  | Zpos p => Some (num_pow_nat v (Pos.to_nat p))
  | Zneg p => num_inv (num_pow_nat v (Pos.to_nat p))
  end.

Lemma const_pow_val : forall v z w, const_pow v z = Some w -> num_val w = powerRZ (num_val v) z.
Proof.
  intros v [|p|p] w H; simpl in H.
  - destruct (num_inv v); try discriminate. injection H as <-. simpl.
    unfold Q2R; simpl; field.
  - injection H as <-. simpl. apply num_val_pow_nat.
  - apply num_inv_val in H as [_ H]. rewrite H, num_val_pow_nat. reflexivity.
Qed.

Definition chk_pow_const (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l, node_at T r with
  | Node (OPow e) [k] [], Node (OConst w) [] [] =>
      match node_at T k with
      | Node (OConst v) [] [] =>
          if qint e then
            match const_pow v (Qnum (Qred e)) with
            | Some w' => if num_eqb w w' then Some [] else None
            | None => None
            end
          else None
      | _ => None
      end
  | _, _ => None
  end.

Lemma chk_pow_const_sound : rule_sound chk_pow_const.
Proof.
  intros G l r h cl H c M _. destruct M as [W _].
  unfold chk_pow_const in H. set (T := gT G) in *.
  destruct (node_at T l) as [ol ks Dl] eqn:El. destruct ol; try discriminate.
  destruct ks as [|k [|]]; try discriminate. destruct Dl; try discriminate.
  destruct (node_at T r) as [or zs Dr] eqn:Er. destruct or; try discriminate.
  destruct zs; try discriminate. destruct Dr; try discriminate.
  destruct (node_at T k) as [ok ys Dk] eqn:Ek. destruct ok; try discriminate.
  destruct ys; try discriminate. destruct Dk; try discriminate.
  rename c0 into w, c1 into v.
  destruct (qint e) eqn:Q; try discriminate.
  destruct (const_pow v (Qnum (Qred e))) as [w'|] eqn:CP; try discriminate.
  destruct (num_eqb w w') eqn:E; try discriminate.
  intros rho R i. rewrite (den_node c T l _ _ _ W El), (den_node c T r _ _ _ W Er). simpl.
  unfold vat; simpl. rewrite (den_const c T W k v Ek).
  rewrite (num_eqb_val _ _ E), (const_pow_val _ _ _ CP). unfold rpow. rewrite Q. auto.
Qed.
