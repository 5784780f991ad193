(** * RulesBasic: rules of docs/rules.md that rewrite one node into its definition.

    stop-grad-elim, cast-elim, neg-mul, recip-pow, sqrt-pow, rsqrt-pow, pow-one, dim-size,
    axis-size, rank-const-uniform.
    Each [chk_*] reads the step's two nodes; each [chk_*_sound] is its lemma, proved for all
    sizes (the guard is what the checker tests). *)

From Coq Require Import Reals Lra Lia List QArith Qreals ZArith PArith NArith Bool.
From Coq Require Import FSets.FMapPositive FunctionalExtensionality.
From Shardproof Require Import Base Num Pow Term Props RuleLib.
Import ListNotations.
Open Scope R_scope.

Section Wrap.
Variable c : ctx.
Variable T : table.
Hypothesis W : wf_table T.

(** A node whose dims are (as a set) [D], read through [D]'s mask and restriction. *)
Lemma den_wrap : forall x D, dims_eqvb (ndims (node_at T x)) D = true ->
  forall rho i, (if msk (sz c) D i then den c T x rho (restrict D i) else 0) = den c T x rho i.
Proof.
  intros x D E rho i. destruct (dims_eqvb_perm _ _ E) as [P ND].
  rewrite <- (msk_perm _ _ _ i P), <- (restrict_perm _ _ i P).
  destruct (msk _ _ i) eqn:M.
  - apply den_restrict; auto.
  - rewrite den_msk0; auto.
Qed.

Lemma den_const : forall k v, node_at T k = Node (OConst v) [] [] ->
  forall rho i, den c T k rho i = num_val v.
Proof. intros. rewrite (den_node c T k _ _ _ W H); simpl; auto. Qed.

(** A rule [OP(x) = x'] where the core of [OP] is the identity on [x]. *)
Lemma eqv_unary_id : forall l r o x D,
  node_at T l = Node o [x] D -> dims_eqvb (ndims (node_at T r)) D = true ->
  (forall rho i, core c T o [x] D [den c T x] rho i = den c T r rho i) ->
  eqv c T l r.
Proof.
  intros l r o x D E DE H rho R i. rewrite (den_node c T l o [x] D W E). simpl map.
  rewrite <- (den_wrap r D DE rho i). destruct (msk _ _ _); auto.
Qed.
End Wrap.

Definition is_const (T : table) (k : positive) (v : num) : bool :=
  match node_at T k with
  | Node (OConst w) [] [] => num_eqb w v
  | _ => false
  end.

Lemma is_const_ok : forall c T k v, wf_table T -> is_const T k v = true ->
  forall rho i, den c T k rho i = num_val v.
Proof.
  intros c T k v W H rho i. unfold is_const in H.
  destruct (node_at T k) as [[] [] []] eqn:E; try discriminate.
  rewrite (den_const c T W k c0 E). apply num_eqb_val; auto.
Qed.

Definition Tof (G : gctx) := gT G.

(** ** STOP_GRAD(x) = x, CAST(x) = x (identities over the reals) *)
Definition chk_unary_id (u : uop) (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  match node_at (gT G) l with
  | Node (OUn u') [x] D =>
      if uop_eqb u u' && Pos.eqb x r && dims_eqvb (ndims (node_at (gT G) r)) D then Some []
      else None
  | _ => None
  end.

Lemma chk_unary_id_sound : forall u, (u = UStop \/ u = UCast) -> rule_sound (chk_unary_id u).
Proof.
  intros u Hu G l r h cl H c M _. destruct M as [W _].
  unfold chk_unary_id in H. destruct (node_at (gT G) l) as [o xs D] eqn:El.
  destruct o; try discriminate. destruct xs as [|x [|]]; try discriminate.
  destruct (uop_eqb u u0 && Pos.eqb x r && dims_eqvb _ D) eqn:B; try discriminate.
  beq_to_eq. apply (eqv_unary_id c (gT G) W l r (OUn u0) r D); auto.
  intros. simpl. destruct u, u0; simpl in *; try discriminate; destruct Hu; try discriminate; auto.
Qed.

Definition chk_stop_grad := chk_unary_id UStop.
Definition chk_cast := chk_unary_id UCast.

(** ** NEG(x) = MUL(CONST(-1), x) *)
Definition chk_neg_mul (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l, node_at T r with
  | Node (OUn UNeg) [x] D, Node OMul [k; x'] D' =>
      if Pos.eqb x x' && is_const T k (num_of_Q (-1)) && dims_eqvb D D' then Some [] else None
  | _, _ => None
  end.

Lemma chk_neg_mul_sound : rule_sound chk_neg_mul.
Proof.
  intros G l r h cl H c M _. destruct M as [W _].
  unfold chk_neg_mul in H. destruct (node_at (gT G) l) as [o xs D] eqn:El.
  destruct (node_at (gT G) r) as [o' xs' D'] eqn:Er.
  destruct o; try discriminate. destruct u; try discriminate.
  destruct xs as [|x [|]]; try discriminate. destruct o'; try discriminate.
  destruct xs' as [|k [|x' [|]]]; try discriminate.
  destruct (Pos.eqb x x' && is_const _ k _ && dims_eqvb D D') eqn:B; try discriminate.
  apply andb_prop in B as [B B3]. apply andb_prop in B as [B1 B2]. apply Pos.eqb_eq in B1; subst.
  apply (eqv_by_core c (gT G) l r _ _ D _ _ D' W El Er B3).
  intros rho R i _ _. simpl. rewrite (is_const_ok c _ k _ W B2 rho i).
  unfold vat; simpl. unfold Q2R; simpl. field.
Qed.

(** ** RECIP(x) = POW(x, -1), SQRT(x) = POW(x, 1/2), RSQRT(x) = POW(x, -1/2) *)
Definition chk_unary_pow (u : uop) (e : Q) (G : gctx) (l r : positive) (_ : hint)
  : option (list claim) :=
  let T := gT G in
  match node_at T l, node_at T r with
  | Node (OUn u') [x] D, Node (OPow e') [x'] D' =>
      if uop_eqb u u' && Qeq_bool e e' && Pos.eqb x x' && dims_eqvb D D' then Some [] else None
  | _, _ => None
  end.

Lemma chk_unary_pow_sound : forall u e,
  (forall v, uval (Ctx (fun _ => O) (fun _ _ => 0) (fun _ v => v) (fun _ y => y)) u v = rpow v e) ->
  (u = URecip \/ u = USqrt \/ u = URsqrt) -> rule_sound (chk_unary_pow u e).
Proof.
  intros u e Hue Hu G l r h cl H c M _. destruct M as [W _].
  unfold chk_unary_pow in H. destruct (node_at (gT G) l) as [o xs D] eqn:El.
  destruct (node_at (gT G) r) as [o' xs' D'] eqn:Er.
  destruct o; try discriminate. destruct xs as [|x [|]]; try discriminate.
  destruct o'; try discriminate. destruct xs' as [|x' [|]]; try discriminate.
  destruct (uop_eqb u u0 && Qeq_bool e e0 && Pos.eqb x x' && dims_eqvb D D') eqn:B;
    try discriminate.
  apply andb_prop in B as [B B4]. apply andb_prop in B as [B B3].
  apply andb_prop in B as [B1 B2]. apply Pos.eqb_eq in B3; subst.
  apply Qeq_bool_iff in B2.
  apply (eqv_by_core c (gT G) l r _ _ D _ _ D' W El Er B4).
  intros rho R i _ _. simpl. rewrite <- (rpow_ext _ _ _ B2). rewrite <- Hue.
  destruct u, u0; simpl in B1; try discriminate; destruct Hu as [?|[?|?]]; try discriminate; auto.
Qed.

Definition chk_recip_pow := chk_unary_pow URecip (-1).
Definition chk_sqrt_pow := chk_unary_pow USqrt (1 # 2).
Definition chk_rsqrt_pow := chk_unary_pow URsqrt (-1 # 2).

Lemma chk_recip_pow_sound : rule_sound chk_recip_pow.
Proof. apply chk_unary_pow_sound; auto. intros; simpl; rewrite rpow_minus_one; auto. Qed.
Lemma chk_sqrt_pow_sound : rule_sound chk_sqrt_pow.
Proof. apply chk_unary_pow_sound; auto. intros; simpl; rewrite rpow_half; auto. Qed.
Lemma chk_rsqrt_pow_sound : rule_sound chk_rsqrt_pow.
Proof. apply chk_unary_pow_sound; auto. intros; simpl; rewrite rpow_minus_half; auto. Qed.

(** ** POW(x, 1) = x *)
Definition chk_pow_one (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  match node_at (gT G) l with
  | Node (OPow e) [x] D =>
      if Qeq_bool e 1 && Pos.eqb x r && dims_eqvb (ndims (node_at (gT G) r)) D then Some []
      else None
  | _ => None
  end.

Lemma chk_pow_one_sound : rule_sound chk_pow_one.
Proof.
  intros G l r h cl H c M _. destruct M as [W _].
  unfold chk_pow_one in H. destruct (node_at (gT G) l) as [o xs D] eqn:El.
  destruct o; try discriminate. destruct xs as [|x [|]]; try discriminate.
  destruct (Qeq_bool e 1 && Pos.eqb x r && dims_eqvb _ D) eqn:B; try discriminate.
  apply andb_prop in B as [B B3]. apply andb_prop in B as [B1 B2]. apply Pos.eqb_eq in B2; subst.
  apply Qeq_bool_iff in B1.
  apply (eqv_unary_id c (gT G) W l r (OPow e) r D); auto.
  intros. simpl. rewrite (rpow_ext _ _ _ B1), rpow_one; auto.
Qed.

(** ** DIM_SIZE(d) = CONST(|d|), AXIS_SIZE(a) = CONST(|a|): a size fact [sz n = v] *)
Definition fact_of (F : list (name * N)) (n : name) : option N :=
  match find (fun p => Pos.eqb (fst p) n) F with Some p => Some (snd p) | None => None end.

Lemma fact_of_In : forall F n v, fact_of F n = Some v -> In (n, v) F.
Proof.
  intros F n v H. unfold fact_of in H.
  destruct (find (fun p => Pos.eqb (fst p) n) F) as [[m w]|] eqn:E; try discriminate.
  injection H as <-. apply find_some in E as [I B]. simpl in B. apply Pos.eqb_eq in B; subst; auto.
Qed.

Definition chk_size (axis : bool) (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l, node_at T r with
  | Node o [] [], Node (OConst v) [] [] =>
      let n := match o with ODimSize d => if axis then None else Some d
                          | OAxisSize a => if axis then Some a else None
                          | _ => None end in
      match n with
      | Some n => match fact_of (gF G) n with
                  | Some k => if num_eqb v (num_of_Q (inject_Z (Z.of_N k))) then Some [] else None
                  | None => None
                  end
      | None => None
      end
  | _, _ => None
  end.

Lemma chk_size_sound : forall axis, rule_sound (chk_size axis).
Proof.
  intros axis G l r h cl H c M _. destruct M as [W [_ [_ [F _]]]].
  unfold chk_size in H. destruct (node_at (gT G) l) as [o xs D] eqn:El.
  destruct (node_at (gT G) r) as [o' xs' D'] eqn:Er.
  destruct xs, D; try discriminate. destruct o'; try discriminate. destruct xs', D'; try discriminate.
  assert (K : forall n k, fact_of (gF G) n = Some k -> num_eqb c0 (num_of_Q (inject_Z (Z.of_N k))) = true ->
            INR (sz c n) = num_val c0).
  { intros n k E1 E2. apply fact_of_In, F in E1. rewrite E1. apply num_eqb_val in E2.
    rewrite E2, num_val_of_Q, Q2R_inject_Z', INR_IZR_INZ, N_nat_Z; auto. }
  apply (eqv_by_core c (gT G) l r _ _ [] _ _ [] W El Er eq_refl).
  intros rho R i _ _. simpl.
  destruct o; try discriminate; destruct axis; try discriminate; inv_chk H; eapply K; eauto.
Qed.

Definition chk_dim_size := chk_size false.
Definition chk_axis_size := chk_size true.

(** ** RANK_CONST(a, (v, ..., v)) = CONST(v) *)

Lemma nth_all_eq : forall (l : list num) v0 k, (forall x, In x l -> num_eqb x v0 = true) ->
  nth k (map num_val l) (num_val v0) = num_val v0.
Proof.
  induction l as [|v l IH]; intros v0 [|k] H; simpl; auto.
  - apply num_eqb_val, H; simpl; auto.
  - apply IH. intros; apply H; simpl; auto.
Qed.

Definition chk_rank_const_uniform (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l, node_at T r with
  | Node (ORankConst a (v0 :: vs)) [] [], Node (OConst w) [] [] =>
      if forallb (fun v => num_eqb v v0) vs && num_eqb v0 w then Some [] else None
  | _, _ => None
  end.

Lemma chk_rank_const_uniform_sound : rule_sound chk_rank_const_uniform.
Proof.
  intros G l r h cl H c M _. destruct M as [W _].
  unfold chk_rank_const_uniform in H. destruct (node_at (gT G) l) as [o xs D] eqn:El.
  destruct (node_at (gT G) r) as [o' xs' D'] eqn:Er.
  destruct o; try discriminate. destruct vs as [|v0 vs]; try discriminate.
  destruct xs, D; try discriminate. destruct o'; try discriminate. destruct xs', D'; try discriminate.
  destruct (forallb _ vs && num_eqb v0 c0) eqn:B; try discriminate.
  apply andb_prop in B as [B1 B2].
  apply (eqv_by_core c (gT G) l r _ _ [] _ _ [] W El Er eq_refl).
  intros rho R i _ _. simpl. rewrite <- (num_eqb_val _ _ B2).
  destruct (rho a) as [|k]; simpl; auto.
  rewrite forallb_forall in B1. apply nth_all_eq; auto.
Qed.
