(** * Positive: a node is positive (or non-negative) in range, from its structure.

    Discharges the side conditions of exponent merging ([mul-canon], [pow-pow]) when the base
    is, e.g., an exponential, a positive input, a sum of squares plus a positive constant, or a
    sum of exponentials. What it cannot show stays a claim of the final theorem. *)

From Coq Require Import Reals Lra Lia List QArith Qreals ZArith PArith NArith Bool Permutation.
From Coq Require Import FSets.FMapPositive FunctionalExtensionality.
From Shardproof Require Import Base Num Pow Term Props RuleLib Congr Rel RulesBasic RulesLift.
Import ListNotations.
Open Scope R_scope.

(** the children's dims are the node's (same shards), so the node's mask implies theirs *)
Definition kids_in (T : table) (xs : list positive) (D : list dimspec) : bool :=
  forallb (fun x => incl_dims (ndims (node_at T x)) D) xs.

Definition num_nonneg (x : num) : bool :=
  match x with [] => true | [(q, _)] => Qle_bool 0 q | _ => false end.

Lemma num_nonneg_val : forall x, num_nonneg x = true -> 0 <= num_val x.
Proof.
  intros x H. destruct x as [|[q m] [|t x]]; simpl in *; try discriminate; [lra|].
  apply Qle_bool_iff, Qle_Rle in H. pose proof (rad_val_pos m).
  unfold Q2R at 1 in H; simpl in H. rewrite Rplus_0_r.
  apply Rmult_le_pos; lra.
Qed.

Definition even_int (e : Q) : bool := qint e && Z.even (Qnum (Qred e)).

(** [(positive in range, non-negative everywhere)], from the structure; [fuel] bounds depth. *)
Fixpoint sign_chk (fuel : nat) (G : gctx) (i : positive) : bool * bool :=
  match fuel with
  | O => (false, false)
  | S f =>
      let T := gT G in
      match node_at T i with
      | Node (OConst k) [] _ => (num_pos k, num_nonneg k)
      | Node (OInput nm DPos) [] _ =>
          let b := match PositiveMap.find nm (gpos G) with Some _ => true | None => false end in
          (b, b)
      | Node (OUn UExp) [x] _ => (true, true)
      | Node (OUn USqrt) [x] D => (kids_in T [x] D && fst (sign_chk f G x), true)
      | Node (OPow e) [x] D =>
          let p := kids_in T [x] D && fst (sign_chk f G x) in (p, p || even_int e)
      | Node OMul xs D =>
          let ss := map (sign_chk f G) xs in
          (kids_in T xs D && forallb fst ss, kids_in T xs D && forallb snd ss)
      | Node OAdd xs D =>
          let ss := map (sign_chk f G) xs in
          (kids_in T xs D && forallb snd ss && existsb fst ss, kids_in T xs D && forallb snd ss)
      | _ => (false, false)
      end
  end.

Lemma kids_in_msk : forall c T xs D x k, kids_in T xs D = true -> msk (sz c) D x = true ->
  In k xs -> msk (sz c) (ndims (node_at T k)) x = true.
Proof.
  intros. unfold kids_in in H. rewrite forallb_forall in H. eapply incl_dims_msk; eauto.
Qed.

Lemma kids_in_restrict : forall T xs D k x, kids_in T xs D = true -> In k xs ->
  agree (map fst (ndims (node_at T k))) (restrict D x) x.
Proof.
  intros T xs D k x H I n In_. unfold kids_in in H. rewrite forallb_forall in H.
  apply restrict_in. apply in_map_iff in In_ as [d [<- Id]]. apply in_map.
  eapply incl_dims_In; eauto.
Qed.

Lemma even_pow_nonneg : forall x k, 0 <= powerRZ x (2 * k).
Proof.
  intros x k.
  assert (E : forall n, 0 <= x ^ (2 * n)) by (intros n; rewrite pow_mult; apply pow_le, pow2_ge_0).
  destruct k; simpl; [lra| |].
  - rewrite Pos2Nat.inj_xO. apply E.
  - rewrite Pos2Nat.inj_xO. destruct (Req_dec (x ^ (2 * Pos.to_nat p)) 0) as [Z|Z].
    + rewrite Z, Rinv_0; lra.
    + left. apply Rinv_0_lt_compat. specialize (E (Pos.to_nat p)). lra.
Qed.

Lemma even_int_nonneg : forall x e, even_int e = true -> 0 <= rpow x e.
Proof.
  intros x e H. unfold even_int in H. apply andb_prop in H as [I Ev].
  unfold rpow. rewrite I. apply Z.even_spec in Ev as [k Ek]. rewrite Ek. apply even_pow_nonneg.
Qed.

Lemma prodl_pos : forall l, (forall y, In y l -> 0 < y) -> 0 < prodl l.
Proof.
  induction l as [|y l IH]; intros H; simpl; [lra|].
  apply Rmult_lt_0_compat; [apply H; simpl; auto|apply IH; intros; apply H; simpl; auto].
Qed.

Lemma prodl_nonneg : forall l, (forall y, In y l -> 0 <= y) -> 0 <= prodl l.
Proof.
  induction l as [|y l IH]; intros H; simpl; [lra|].
  apply Rmult_le_pos; [apply H; simpl; auto|apply IH; intros; apply H; simpl; auto].
Qed.

Lemma suml_nonneg : forall l, (forall y, In y l -> 0 <= y) -> 0 <= suml l.
Proof.
  induction l as [|y l IH]; intros H; simpl; [lra|].
  apply Rplus_le_le_0_compat; [apply H; simpl; auto|apply IH; intros; apply H; simpl; auto].
Qed.

Lemma suml_pos : forall l, (forall y, In y l -> 0 <= y) -> (exists y, In y l /\ 0 < y) -> 0 < suml l.
Proof.
  induction l as [|y l IH]; intros H [z [I Z]]; simpl in *; [contradiction|].
  destruct I as [<-|I].
  - pose proof (suml_nonneg l (fun y I => H y (or_intror I))). lra.
  - assert (0 < suml l) by (apply IH; eauto). specialize (H y (or_introl eq_refl)). lra.
Qed.

Definition sign_ok (c : ctx) (T : table) (i : positive) (pn : bool * bool) : Prop :=
  (fst pn = true -> forall rho x, msk (sz c) (ndims (node_at T i)) x = true -> 0 < den c T i rho x) /\
  (snd pn = true -> forall rho x, 0 <= den c T i rho x).

Lemma den_nonneg_of : forall c T i, wf_table T ->
  (forall rho x, msk (sz c) (ndims (node_at T i)) x = true -> 0 <= den c T i rho x) ->
  forall rho x, 0 <= den c T i rho x.
Proof.
  intros c T i W H rho x. destruct (msk (sz c) (ndims (node_at T i)) x) eqn:M; auto.
  rewrite den_msk0; auto; lra.
Qed.

Lemma sign_chk_sound : forall fuel G c, model_ok G c -> forall i, sign_ok c (gT G) i (sign_chk fuel G i).
Proof.
  induction fuel as [|f IH]; intros G c M i; [split; simpl; discriminate|].
  pose proof M as M0. destruct M as [W [VC [SZ [F [DO P]]]]].
  unfold sign_chk; fold sign_chk.
  set (T := gT G) in *.
  destruct (node_at T i) as [o xs D] eqn:Ei.
  assert (Kid : forall k, In k xs -> sign_ok c T k (sign_chk f G k)) by (intros; apply IH; auto).
  assert (Den : forall rho x, msk (sz c) D x = true ->
                den c T i rho x = core c T o xs D (map (den c T) xs) rho (restrict D x))
    by (intros; apply (den_in c T i o xs D rho x W Ei); auto).
  assert (NN : (forall rho x, msk (sz c) D x = true -> 0 <= den c T i rho x) ->
               forall rho x, 0 <= den c T i rho x)
    by (intros H; apply den_nonneg_of; auto; rewrite Ei; auto).
  unfold sign_ok; rewrite Ei; simpl.
  destruct o; try (split; simpl; discriminate).
  - (* INPUT *) destruct d; try (split; simpl; discriminate). destruct xs; try (split; simpl; discriminate).
    destruct (PositiveMap.find nm (gpos G)) as [[]|] eqn:Pn; [|split; simpl; discriminate].
    assert (Pv : forall rho x, msk (sz c) D x = true -> 0 < den c T i rho x).
    { intros rho x Mx. rewrite Den by auto. simpl. apply DO; auto. }
    split; simpl; auto. intros _. apply NN. intros; left; auto.
  - (* CONST *) destruct xs; try (split; simpl; discriminate).
    split; simpl; intros H.
    + intros rho x Mx. rewrite Den by auto. simpl. apply num_pos_val; auto.
    + apply NN. intros rho x Mx. rewrite Den by auto. simpl. apply num_nonneg_val; auto.
  - (* ADD *)
    assert (Vals : forall rho x, msk (sz c) D x = true -> kids_in T xs D = true ->
              forall y, In y (map (fun v => v rho (restrict D x)) (map (den c T) xs)) ->
              exists k, In k xs /\ y = den c T k rho x /\ msk (sz c) (ndims (node_at T k)) x = true).
    { intros rho x Mx K y Iy. rewrite map_map in Iy. apply in_map_iff in Iy as [k [<- Ik]].
      exists k; split; auto. split.
      - apply den_agree; auto. apply kids_in_restrict with (xs := xs); auto.
      - eapply kids_in_msk; eauto. }
    split; simpl; intros H.
    + apply andb_prop in H as [H Ex]. apply andb_prop in H as [K Al].
      intros rho x Mx. rewrite Den by auto. simpl. apply suml_pos.
      * intros y Iy. destruct (Vals rho x Mx K y Iy) as [k [Ik [-> _]]].
        rewrite forallb_forall in Al. apply (proj2 (Kid k Ik)); auto.
        apply Al, in_map_iff; eauto.
      * apply existsb_exists in Ex as [pn [Ipn Fp]]. apply in_map_iff in Ipn as [k [Ek Ik]].
        exists (den c T k rho x). split.
        -- rewrite map_map. apply in_map_iff. exists k; split; auto.
           apply den_agree; auto. apply kids_in_restrict with (xs := xs); auto.
        -- subst pn. apply (proj1 (Kid k Ik)); auto. eapply kids_in_msk; eauto.
    + apply andb_prop in H as [K Al]. apply NN. intros rho x Mx. rewrite Den by auto. simpl.
      apply suml_nonneg. intros y Iy. destruct (Vals rho x Mx K y Iy) as [k [Ik [-> _]]].
      rewrite forallb_forall in Al. apply (proj2 (Kid k Ik)); auto. apply Al, in_map_iff; eauto.
  - (* MUL *)
    assert (Vals : forall rho x, msk (sz c) D x = true -> kids_in T xs D = true ->
              forall y, In y (map (fun v => v rho (restrict D x)) (map (den c T) xs)) ->
              exists k, In k xs /\ y = den c T k rho x /\ msk (sz c) (ndims (node_at T k)) x = true).
    { intros rho x Mx K y Iy. rewrite map_map in Iy. apply in_map_iff in Iy as [k [<- Ik]].
      exists k; split; auto. split.
      - apply den_agree; auto. apply kids_in_restrict with (xs := xs); auto.
      - eapply kids_in_msk; eauto. }
    split; simpl; intros H.
    + apply andb_prop in H as [K Al]. intros rho x Mx. rewrite Den by auto. simpl.
      apply prodl_pos. intros y Iy. destruct (Vals rho x Mx K y Iy) as [k [Ik [-> Mk]]].
      rewrite forallb_forall in Al. apply (proj1 (Kid k Ik)); auto. apply Al, in_map_iff; eauto.
    + apply andb_prop in H as [K Al]. apply NN. intros rho x Mx. rewrite Den by auto. simpl.
      apply prodl_nonneg. intros y Iy. destruct (Vals rho x Mx K y Iy) as [k [Ik [-> _]]].
      rewrite forallb_forall in Al. apply (proj2 (Kid k Ik)); auto. apply Al, in_map_iff; eauto.
  - (* UN *)
    destruct u; try (split; simpl; discriminate); destruct xs as [|x0 [|]]; try (split; simpl; discriminate).
    + (* EXP *)
      assert (Pv : forall rho x, msk (sz c) D x = true -> 0 < den c T i rho x)
        by (intros; rewrite Den by auto; simpl; unfold vat; simpl; apply exp_pos).
      split; simpl; auto. intros _. apply NN. intros; left; auto.
    + (* SQRT *)
      split; simpl; intros H.
      * apply andb_prop in H as [K Px]. intros rho x Mx. rewrite Den by auto. simpl. unfold vat; simpl.
        apply sqrt_lt_R0.
        rewrite (den_agree c T W x0 rho _ x) by (apply kids_in_restrict with (xs := [x0]); [exact K|simpl; auto]).
        apply (proj1 (Kid x0 (or_introl eq_refl))); auto.
        apply (kids_in_msk c T [x0] D x x0); [exact K|auto|simpl; auto].
      * apply NN. intros rho x Mx. rewrite Den by auto. simpl. unfold vat; simpl. apply sqrt_pos.
  - (* POW *)
    destruct xs as [|x0 [|]]; try (split; simpl; discriminate).
    assert (Pv : kids_in T [x0] D && fst (sign_chk f G x0) = true ->
                 forall rho x, msk (sz c) D x = true -> 0 < den c T i rho x).
    { intros H rho x Mx. apply andb_prop in H as [K Px]. rewrite Den by auto. simpl. unfold vat; simpl.
      rewrite (den_agree c T W x0 rho _ x) by (apply kids_in_restrict with (xs := [x0]); [exact K|simpl; auto]).
      assert (0 < den c T x0 rho x).
      { apply (proj1 (Kid x0 (or_introl eq_refl))); auto.
        apply (kids_in_msk c T [x0] D x x0); [exact K|auto|simpl; auto]. }
      rewrite rpow_pos by auto. unfold Rpower; apply exp_pos. }
    split; simpl; intros H; [apply Pv; auto|].
    apply orb_prop in H as [H|H].
    + apply NN. intros; left; apply Pv; auto.
    + apply NN. intros rho x Mx. rewrite Den by auto. simpl. unfold vat; simpl. apply even_int_nonneg; auto.
Qed.
