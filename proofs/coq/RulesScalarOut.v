(** * RulesScalarOut: scalar factors leave a contraction, a renaming or a chunk (docs/rules.md,
    issue 12).

    einsum-scalar-out: [EINSUM(xs, out) = MUL(ss..., EINSUM(rs, out))] where, walking [xs] in
    order, a scalar operand (no dims) goes to [ss]; an operand [MUL(zs)] with scalar factors
    sends its scalar factors (in order) to [ss] and the rest to [rs] (the one non-scalar
    factor, with the operand's dims, or a [MUL] of the non-scalar factors with the operand's
    dims); any other operand goes to [rs]. The rule's guard: [ss] and [rs] are not empty.
    The checker also tests what the lemma needs of dims: the factors of a split [MUL] have
    dims among its dims, the contracted names and their specs are the same on both sides,
    and the three nodes' dims are the same set. *)

From Coq Require Import Reals Lra Lia List QArith ZArith PArith NArith Bool Permutation.
From Coq Require Import FSets.FMapPositive FunctionalExtensionality.
From Shardproof Require Import Base Num Pow Term Props RuleLib Congr Rel RulesBasic RulesLift
  RulesEinsum.
Import ListNotations.
Open Scope R_scope.

Definition is_scalar (T : table) (x : positive) : bool :=
  match ndims (node_at T x) with [] => true | _ => false end.

(** [pre] is a prefix of [l]: the rest *)
Fixpoint strip_prefix (pre l : list positive) : option (list positive) :=
  match pre, l with
  | [], _ => Some l
  | p :: pre', y :: l' => if Pos.eqb p y then strip_prefix pre' l' else None
  | _, [] => None
  end.

(** the rest of an operand [MUL(zs)] with dims [Dx] once its scalar factors left: node [y] *)
Definition rest_ok (T : table) (zs : list positive) (Dx : list dimspec) (y : positive) : bool :=
  match filter (fun z => negb (is_scalar T z)) zs with
  | [z] => Pos.eqb y z && dims_eqvb (ndims (node_at T z)) Dx
  | nz => match node_at T y with
          | Node OMul ys Dy => list_eqb Pos.eqb ys nz && dims_eqvb Dy Dx
          | _ => false
          end
  end.

(** Walk the operands, consuming [ss] and [rs]; what is left of them. *)
Fixpoint split_walk (T : table) (xs ss rs : list positive) : option (list positive * list positive) :=
  match xs with
  | [] => Some (ss, rs)
  | x :: xt =>
      if is_scalar T x then
        match ss with s :: ss' => if Pos.eqb s x then split_walk T xt ss' rs else None | [] => None end
      else
        match node_at T x with
        | Node OMul zs Dx =>
            if existsb (is_scalar T) zs then
              match strip_prefix (filter (is_scalar T) zs) ss, rs with
              | Some ss', y :: rs' =>
                  if forallb (fun z => incl_dims (ndims (node_at T z)) Dx) zs && rest_ok T zs Dx y
                  then split_walk T xt ss' rs' else None
              | _, _ => None
              end
            else match rs with y :: rs' => if Pos.eqb y x then split_walk T xt ss rs' else None
                               | [] => None end
        | _ => match rs with y :: rs' => if Pos.eqb y x then split_walk T xt ss rs' else None
                             | [] => None end
        end
  end.

Lemma prodl_cons : forall a l, prodl (a :: l) = a * prodl l.
Proof. reflexivity. Qed.

Lemma mul_front : forall a b c d e f : R, b * c * d = e * f -> a * b * c * d = a * e * f.
Proof. intros. transitivity (a * (b * c * d)); [ring|]. rewrite H; ring. Qed.

Lemma mul_plain : forall a b c d e f : R, b * c * d = e * f -> a * b * c * d = e * (a * f).
Proof. intros. transitivity (a * (b * c * d)); [ring|]. rewrite H; ring. Qed.

Lemma mul_mix : forall s y b c d e f : R, b * c * d = e * f -> s * y * b * c * d = s * e * (y * f).
Proof. intros. transitivity (s * y * (b * c * d)); [ring|]. rewrite H; ring. Qed.

Lemma prodl_nil : prodl [] = 1.
Proof. reflexivity. Qed.

Lemma prodl_app' : forall a b, prodl (a ++ b) = prodl a * prodl b.
Proof. induction a; intros; simpl; [ring|]. rewrite IHa; ring. Qed.

Lemma prodl_filter : forall (f : positive -> R) p l,
  prodl (map f l) = prodl (map f (filter p l)) * prodl (map f (filter (fun z => negb (p z)) l)).
Proof.
  intros f p; induction l as [|z l IH]; simpl; [ring|].
  destruct (p z); simpl; rewrite IH; ring.
Qed.

Lemma strip_prefix_app : forall pre l l', strip_prefix pre l = Some l' -> l = pre ++ l'.
Proof.
  induction pre as [|p pre IH]; intros [|y l] l' H; simpl in H; try discriminate.
  - injection H as <-; auto.
  - injection H as <-; auto.
  - destruct (Pos.eqb_spec p y); try discriminate. subst. simpl. f_equal. auto.
Qed.

Section Split.
Variable c : ctx.
Variable T : table.
Hypothesis W : wf_table T.

Notation dv rho j := (fun y => den c T y rho j).

(** An operand [MUL(zs)] split into its scalar factors and the rest [y]. *)
Lemma split_mul : forall x zs Dx y rho j, node_at T x = Node OMul zs Dx ->
  forallb (fun z => incl_dims (ndims (node_at T z)) Dx) zs = true -> rest_ok T zs Dx y = true ->
  den c T x rho j = prodl (map (dv rho j) (filter (is_scalar T) zs)) * den c T y rho j.
Proof.
  intros x zs Dx y rho j Ex K R.
  assert (KZ : forall z, In z zs -> den c T z rho (restrict Dx j) = den c T z rho j).
  { intros z Iz. apply den_agree; auto. intros n In_.
    rewrite forallb_forall in K. specialize (K z Iz).
    apply restrict_in. apply in_map_iff in In_ as [d [<- Id]]. apply in_map.
    eapply incl_dims_In; eauto. }
  rewrite (den_node c T x _ _ _ W Ex). unfold rest_ok in R.
  assert (P : core c T OMul zs Dx (map (den c T) zs) rho (restrict Dx j) =
              prodl (map (dv rho j) (filter (is_scalar T) zs)) *
              prodl (map (dv rho j) (filter (fun z => negb (is_scalar T z)) zs))).
  { simpl. rewrite map_map, <- prodl_filter. f_equal. apply map_ext_in. intros; apply KZ; auto. }
  destruct (filter (fun z => negb (is_scalar T z)) zs) as [|z [|z' nz]] eqn:F.
  - destruct (node_at T y) as [oy ys Dy] eqn:Ey. destruct oy; try discriminate.
    apply andb_prop in R as [YS DE]. apply (list_eqb_eq _ _ (fun a b => proj1 (Pos.eqb_eq a b))) in YS.
    subst ys. destruct (dims_eqvb_perm _ _ DE) as [PD _].
    rewrite (den_node c T y _ _ _ W Ey), (msk_perm _ _ _ j PD).
    destruct (msk _ Dx j); [|ring]. rewrite P. simpl. ring.
  - apply andb_prop in R as [YZ DE]. apply Pos.eqb_eq in YZ; subst y.
    rewrite <- (den_wrap c T W z Dx DE rho j). destruct (msk _ Dx j); [|ring].
    assert (Iz : In z zs).
    { assert (In z (filter (fun z => negb (is_scalar T z)) zs)) by (rewrite F; simpl; auto).
      apply filter_In in H; tauto. }
    rewrite P. simpl. rewrite (KZ z Iz). ring.
  - destruct (node_at T y) as [oy ys Dy] eqn:Ey. destruct oy; try discriminate.
    apply andb_prop in R as [YS DE]. apply (list_eqb_eq _ _ (fun a b => proj1 (Pos.eqb_eq a b))) in YS.
    subst ys. destruct (dims_eqvb_perm _ _ DE) as [PD _].
    rewrite (den_node c T y _ _ _ W Ey), (msk_perm _ _ _ j PD).
    destruct (msk _ Dx j); [|ring]. rewrite P. rewrite (restrict_perm _ _ j PD).
    assert (Q : prodl (map (fun v => v rho (restrict Dx j)) (map (den c T) (z :: z' :: nz))) =
                prodl (map (dv rho j) (z :: z' :: nz))).
    { rewrite map_map. f_equal. apply map_ext_in. intros u Iu. apply KZ.
      assert (In u (filter (fun z => negb (is_scalar T z)) zs)) by (rewrite F; auto).
      apply filter_In in H; tauto. }
    cbn [core]. rewrite Q. ring.
Qed.

Lemma split_walk_prod : forall xs ss rs ss' rs', split_walk T xs ss rs = Some (ss', rs') ->
  forall rho j, prodl (map (dv rho j) xs) * prodl (map (dv rho j) ss') * prodl (map (dv rho j) rs')
              = prodl (map (dv rho j) ss) * prodl (map (dv rho j) rs).
Proof.
  induction xs as [|x xt IH]; intros ss rs ss' rs' H rho j; simpl in H.
  - injection H as <- <-. simpl. ring.
  - destruct (is_scalar T x) eqn:S.
    + destruct ss as [|s ss1]; try discriminate. destruct (Pos.eqb_spec s x); try discriminate.
      subst s. cbn [map]. rewrite !prodl_cons. apply mul_front, (IH _ _ _ _ H rho j).
    + assert (Plain : forall rs1, split_walk T xt ss rs1 = Some (ss', rs') ->
                prodl (map (dv rho j) (x :: xt)) * prodl (map (dv rho j) ss') *
                prodl (map (dv rho j) rs') = prodl (map (dv rho j) ss) * prodl (map (dv rho j) (x :: rs1))).
      { intros rs1 H1. cbn [map]. rewrite !prodl_cons. apply mul_plain, (IH _ _ _ _ H1 rho j). }
      destruct (node_at T x) as [o zs Dx] eqn:Ex. destruct o;
        try (destruct rs as [|y rs1]; try discriminate; destruct (Pos.eqb_spec y x); try discriminate;
             subst y; apply Plain; auto).
      destruct (existsb (is_scalar T) zs).
      * destruct (strip_prefix (filter (is_scalar T) zs) ss) as [ss1|] eqn:SP; try discriminate.
        destruct rs as [|y rs1]; try discriminate.
        match type of H with (if ?b then _ else _) = _ => destruct b eqn:B; try discriminate end.
        apply andb_prop in B as [K R].
        rewrite (strip_prefix_app _ _ _ SP). cbn [map]. rewrite !prodl_cons, (split_mul x zs Dx y rho j Ex K R).
        rewrite map_app, prodl_app'. apply mul_mix, (IH _ _ _ _ H rho j).
      * destruct rs as [|y rs1]; try discriminate. destruct (Pos.eqb_spec y x); try discriminate.
        subst y. apply Plain; auto.
Qed.

(** A scalar node reads no position of the index. *)
Lemma scalars_const : forall ss rho j j', forallb (is_scalar T) ss = true ->
  prodl (map (dv rho j) ss) = prodl (map (dv rho j') ss).
Proof.
  induction ss as [|s ss IH]; intros rho j j' H; simpl in *; auto.
  apply andb_prop in H as [H1 H2]. rewrite (IH rho j j' H2). f_equal.
  apply den_agree; auto. unfold is_scalar in H1. destruct (ndims (node_at T s)); try discriminate.
  intros n []. 
Qed.
End Split.

(** The contracted dims of two einsums whose operands have the same names and specs. *)
Lemma contracted_same : forall s T xs ys o,
  (forall n, In n (op_names T xs) <-> In n (op_names T ys)) ->
  (forall n, In n (op_names T xs) -> existsb (Pos.eqb n) o = false ->
     first_spec T xs n = first_spec T ys n) ->
  Permutation (contracted s T xs o) (contracted s T ys o) /\
  NoDup (map fst (contracted s T xs o)).
Proof.
  intros s T xs ys o SN FS. unfold contracted.
  set (f := fun n => negb (existsb (Pos.eqb n) o)).
  set (N1 := flat_map (fun x => map fst (ndims (node_at T x))) xs).
  set (N2 := flat_map (fun x => map fst (ndims (node_at T x))) ys).
  set (L1 := filter f (nodup_pos N1 [])). set (L2 := filter f (nodup_pos N2 [])).
  assert (PL : Permutation L1 L2).
  { apply NoDup_Permutation; try apply NoDup_filter, NoDup_nodup_pos.
    intros n. unfold L1, L2. rewrite !filter_In, !In_nodup_pos. unfold N1, N2.
    fold (op_names T xs) (op_names T ys). rewrite SN. tauto. }
  split.
  - rewrite (map_ext_in _ (fun n => (n, match first_spec T ys n with
                                         | Some sh => lsz s (s n) sh | None => 0%nat end)) L1).
    + apply Permutation_map; auto.
    + intros n I. unfold L1 in I. apply filter_In in I as [I Fn]. apply In_nodup_pos in I as [I _].
      unfold f in Fn. apply Bool.negb_true_iff in Fn. rewrite FS; auto.
  - rewrite map_map. simpl. rewrite map_id. apply NoDup_filter, NoDup_nodup_pos.
Qed.

Definition last_split (l : list positive) : option (list positive * positive) :=
  match rev l with [] => None | e :: r => Some (rev r, e) end.

Lemma last_split_ok : forall l ss e, last_split l = Some (ss, e) -> l = ss ++ [e].
Proof.
  intros l ss e H. unfold last_split in H. destruct (rev l) as [|e' r] eqn:E; try discriminate.
  injection H as <- <-. rewrite <- (rev_involutive l), E. simpl. auto.
Qed.

Definition chk_einsum_scalar_out (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l, node_at T r with
  | Node (OEinsum o) xs D, Node OMul ys Dr =>
      match last_split ys with
      | Some (ss, e) =>
          match node_at T e with
          | Node (OEinsum o') rs De =>
              match split_walk T xs ss rs with
              | Some ([], []) =>
                  if negb (Nat.eqb (length ss) 0) && negb (Nat.eqb (length rs) 0) &&
                     forallb (is_scalar T) ss && names_eqb o o' &&
                     dims_eqvb D Dr && dims_eqvb De D &&
                     inclb (op_names T xs) (op_names T rs) && inclb (op_names T rs) (op_names T xs) &&
                     forallb (fun n => spec_opt_eqb (first_spec T xs n) (first_spec T rs n))
                             (op_names T xs)
                  then Some [] else None
              | _ => None
              end
          | _ => None
          end
      | None => None
      end
  | _, _ => None
  end.

Lemma chk_einsum_scalar_out_sound : rule_sound chk_einsum_scalar_out.
Proof.
  intros G l r h cl H c M _. destruct M as [W _].
  unfold chk_einsum_scalar_out in H. set (T := gT G) in *.
  destruct (node_at T l) as [o xs D] eqn:El. destruct (node_at T r) as [o2 ys Dr] eqn:Er.
  destruct o; try discriminate. destruct o2; try discriminate.
  destruct (last_split ys) as [[ss e]|] eqn:LS; try discriminate.
  apply last_split_ok in LS; subst ys.
  destruct (node_at T e) as [oe rs De] eqn:Ee. destruct oe; try discriminate.
  destruct (split_walk T xs ss rs) as [[[|] [|]]|] eqn:SW; try discriminate.
  match type of H with (if ?b then _ else _) = _ => destruct b eqn:B; try discriminate end.
  repeat match type of B with _ && _ = true => apply andb_prop in B as [B ?] end.
  rename H0 into FS, H1 into I2, H2 into I1, H3 into DE2, H4 into DE1, H5 into OO, H6 into SC.
  apply (list_eqb_eq _ _ (fun a b => proj1 (Pos.eqb_eq a b))) in OO; subst out0.
  rewrite forallb_forall in FS.
  destruct (contracted_same (sz c) T xs rs out) as [CP CN].
  { intros n; split; intro I; [apply (inclb_In _ _ _ I1)|apply (inclb_In _ _ _ I2)]; auto. }
  { intros n I _. apply spec_opt_eqb_eq, FS; auto. }
  apply (eqv_by_core c T l r _ _ D _ _ Dr W El Er DE1).
  intros rho R x Mx Rx. cbn [core].
  rewrite (map_app (den c T) ss [e]), map_app, prodl_app'. cbn [map].
  rewrite prodl_cons, prodl_nil, Rmult_1_r.
  destruct (dims_eqvb_perm _ _ DE2) as [PD _].
  rewrite (den_node c T e _ _ _ W Ee), (msk_perm _ _ _ x PD), Mx, (restrict_perm _ _ x PD), Rx.
  cbn [core]. rewrite (sumover_perm _ _ CP CN), <- sumover_scal.
  apply sumover_ext; auto. intros j _.
  rewrite !map_map. pose proof (split_walk_prod c T W xs ss rs [] [] SW rho j) as SP.
  cbn [map] in SP. rewrite prodl_nil, !Rmult_1_r in SP. rewrite SP.
  f_equal. apply scalars_const; auto.
Qed.

(** ** rename-scalar-out, chunk-scalar-out: [OP(MUL(xs)) = MUL(ss..., OP(y))] for [OP] a
    [RENAME] or a [CHUNK] (a re-indexing of its one child): [ss] are the dimless factors of
    [xs] in order, [y] the rest ([rest_ok]); the rule's guard: both are non-empty. *)
Definition reindex_op (o : op) : bool :=
  match o with ORename _ _ | OChunk _ _ _ => true | _ => false end.

Definition ridx (s : name -> nat) (o : op) (D : list dimspec) (i : Ix) : Ix :=
  match o with
  | ORename old new => upd i old (i new)
  | OChunk d _ k => upd i d (N.to_nat k * lsize_of s D d + i d)%nat
  | _ => i
  end.

Lemma core_reindex : forall c T o m D rho i, reindex_op o = true ->
  core c T o [m] D [den c T m] rho i = den c T m rho (ridx (sz c) o D i).
Proof. intros c T o m D rho i H. destruct o; try discriminate; reflexivity. Qed.

Lemma ridx_perm : forall s o D D' i, Permutation D D' -> NoDup (map fst D) ->
  ridx s o D i = ridx s o D' i.
Proof. intros. destruct o; simpl; auto. rewrite (lsize_of_perm s D D'); auto. Qed.

Definition chk_reindex_scalar_out (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l, node_at T r with
  | Node o [m] D, Node OMul ys Dr =>
      match last_split ys, node_at T m with
      | Some (ss, e), Node OMul xs Dm =>
          match node_at T e with
          | Node o' [y] De =>
              if reindex_op o && op_eqb o o' && dims_eqvb D Dr && dims_eqvb De D &&
                 list_eqb Pos.eqb ss (filter (is_scalar T) xs) && negb (Nat.eqb (length ss) 0) &&
                 negb (Nat.eqb (length (filter (fun x => negb (is_scalar T x)) xs)) 0) &&
                 forallb (fun z => incl_dims (ndims (node_at T z)) Dm) xs && rest_ok T xs Dm y
              then Some [] else None
          | _ => None
          end
      | _, _ => None
      end
  | _, _ => None
  end.

Lemma chk_reindex_scalar_out_sound : rule_sound chk_reindex_scalar_out.
Proof.
  intros G l r h cl H c M _. destruct M as [W _].
  unfold chk_reindex_scalar_out in H. set (T := gT G) in *.
  destruct (node_at T l) as [o ms D] eqn:El. destruct ms as [|m [|]]; try discriminate.
  destruct (node_at T r) as [o2 ys Dr] eqn:Er. destruct o2; try discriminate.
  destruct (last_split ys) as [[ss e]|] eqn:LS; try discriminate.
  destruct (node_at T m) as [om xs Dm] eqn:Em. destruct om; try discriminate.
  apply last_split_ok in LS; subst ys.
  destruct (node_at T e) as [o' ys' De] eqn:Ee. destruct ys' as [|y [|]]; try discriminate.
  match type of H with (if ?b then _ else _) = _ => destruct b eqn:B; try discriminate end.
  repeat match type of B with _ && _ = true => apply andb_prop in B as [B ?] end.
  rename H0 into RO, H1 into K, H4 into SS, H5 into DE2, H6 into DE1, H7 into OE, B into RX.
  apply op_eqb_eq in OE; subst o'.
  apply (list_eqb_eq _ _ (fun a b => proj1 (Pos.eqb_eq a b))) in SS; subst ss.
  destruct (dims_eqvb_perm _ _ DE2) as [PD ND].
  apply (eqv_by_core c T l r _ _ D _ _ Dr W El Er DE1).
  intros rho R x Mx Rx. rewrite core_reindex by auto. cbn [core].
  rewrite (map_app (den c T) _ [e]), map_app, prodl_app'. cbn [map].
  rewrite prodl_cons, prodl_nil, Rmult_1_r.
  rewrite (den_node c T e _ _ _ W Ee), (msk_perm _ _ _ x PD), Mx, (restrict_perm _ _ x PD), Rx.
  rewrite core_reindex by auto. rewrite <- (ridx_perm _ _ _ _ x PD ND).
  rewrite (split_mul c T W m xs Dm y rho _ Em K RO). rewrite map_map. f_equal.
  apply scalars_const; auto. clear. induction xs as [|z xs IH]; simpl; auto.
  destruct (is_scalar T z) eqn:S; simpl; rewrite ?S; auto.
Qed.
