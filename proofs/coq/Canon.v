(** * Canon: flattening nested sums and products, the first step of the canonical-form rules
    (add-canon, mul-canon; docs/coq.md, "Not done").

    [flat] expands nested [ADD] (or [MUL]) nodes into the list of their terms; the children's
    dims are checked to be among the parent's, so every term is read at the same index.
    [flat_sound]: the sum (product) of the terms is the sum (product) of the flattened list.
    The comparison of the flattened sides (linear combinations of monomials with exact
    coefficients; monomials as a constant times powers of bases, with the side conditions of
    [Pow] for merged exponents) is not in this file yet, so no rule uses it. *)

From Coq Require Import Reals Lra Lia List QArith Qreals ZArith PArith NArith Bool Permutation.
From Coq Require Import FSets.FMapPositive FunctionalExtensionality.
From Shardproof Require Import Base Num Pow Term Props RuleLib Congr Rel RulesBasic RulesLift Positive.
Import ListNotations.
Open Scope R_scope.

Lemma prodl_app : forall a b, prodl (a ++ b) = prodl a * prodl b.
Proof. induction a; intros; simpl; [ring|]. rewrite IHa; ring. Qed.

Lemma suml_app : forall a b, suml (a ++ b) = suml a + suml b.
Proof. induction a; intros; simpl; [ring|]. rewrite IHa; ring. Qed.

Lemma prodl_perm : forall a b, Permutation a b -> prodl a = prodl b.
Proof.
  intros a b P; induction P; simpl; [auto|rewrite IHP; auto|ring|rewrite IHP1, IHP2; auto].
Qed.

(** ** Flattening nested sums or products *)
Fixpoint flat (o : op) (fuel : nat) (T : table) (D : list dimspec) (xs : list positive)
  {struct fuel} : option (list positive) :=
  let fix go (xs : list positive) : option (list positive) :=
    match xs with
    | [] => Some []
    | x :: r =>
        match go r with
        | None => None
        | Some l =>
            match node_at T x with
            | Node o' zs Dx =>
                if op_eqb o' o then
                  match fuel with
                  | O => None
                  | S f => if incl_dims Dx D && kids_in T zs Dx then
                             match flat o f T Dx zs with Some l' => Some (l' ++ l) | None => None end
                           else None
                  end
                else Some (x :: l)
            end
        end
    end in go xs.

Lemma flat_nil : forall o fuel T D, flat o fuel T D [] = Some [].
Proof. destruct fuel; reflexivity. Qed.

Lemma flat_cons : forall o fuel T D x r, flat o fuel T D (x :: r) =
  match flat o fuel T D r with
  | None => None
  | Some l =>
      match node_at T x with
      | Node o' zs Dx =>
          if op_eqb o' o then
            match fuel with
            | O => None
            | S f => if incl_dims Dx D && kids_in T zs Dx then
                       match flat o f T Dx zs with Some l' => Some (l' ++ l) | None => None end
                     else None
            end
          else Some (x :: l)
      end
  end.
Proof. destruct fuel; reflexivity. Qed.

Section Flat.
Variable c : ctx.
Variable T : table.
Hypothesis W : wf_table T.

Definition comb (o : op) : list R -> R := match o with OAdd => suml | _ => prodl end.

Lemma comb_app : forall o a b, (o = OAdd \/ o = OMul) ->
  comb o (a ++ b) = (if op_eqb o OAdd then comb o a + comb o b else comb o a * comb o b).
Proof. intros o a b [->| ->]; simpl; [apply suml_app|apply prodl_app]. Qed.

Lemma flat_sound : forall o, (o = OAdd \/ o = OMul) -> forall fuel D xs l, flat o fuel T D xs = Some l ->
  kids_in T xs D = true ->
  (forall rho x, msk (sz c) D x = true ->
     comb o (map (fun y => den c T y rho x) xs) = comb o (map (fun y => den c T y rho x) l)) /\
  kids_in T l D = true.
Proof.
  intros o Ho. induction fuel as [fuel IHf] using (well_founded_ind lt_wf).
  intros D xs. induction xs as [|x r IH]; intros l H K;
    [rewrite flat_nil in H | rewrite flat_cons in H].
  - injection H as <-. split; auto.
  - destruct (flat o fuel T D r) as [l0|] eqn:Er; try discriminate.
    unfold kids_in in K; simpl in K. apply andb_prop in K as [Kx Kr].
    destruct (IH l0 eq_refl Kr) as [V0 K0].
    destruct (node_at T x) as [o' zs Dx] eqn:Ex.
    destruct (op_eqb o' o) eqn:Oe.
    + apply op_eqb_eq in Oe; subst o'.
      destruct fuel as [|f]; try discriminate.
      destruct (incl_dims Dx D && kids_in T zs Dx) eqn:B; try discriminate.
      apply andb_prop in B as [B1 B2].
      destruct (flat o f T Dx zs) as [l'|] eqn:Ez; try discriminate. injection H as <-.
      destruct (IHf f (Nat.lt_succ_diag_r f) Dx zs l' Ez B2) as [V' K'].
      split.
      * intros rho y M. rewrite map_app. simpl.
        assert (Mx : msk (sz c) Dx y = true) by (apply (incl_dims_msk _ _ D); auto).
        rewrite (den_in c T x o zs Dx rho y W Ex Mx).
        assert (Ez' : core c T o zs Dx (map (den c T) zs) rho (restrict Dx y) =
                      comb o (map (fun z => den c T z rho y) zs)).
        { destruct Ho as [-> | ->]; simpl; f_equal; rewrite map_map; apply map_ext_in;
            intros z Iz; apply den_agree; auto; apply kids_in_restrict with (xs := zs); auto. }
        rewrite Ez', (V' rho y Mx).
        pose proof (V0 rho y M) as V0'.
        destruct Ho as [-> | ->]; simpl in V0' |- *;
          [rewrite suml_app|rewrite prodl_app]; rewrite V0'; reflexivity.
      * unfold kids_in in K0, K' |- *. rewrite forallb_app, K0, andb_true_r.
        rewrite forallb_forall in K' |- *. intros z Iz. specialize (K' z Iz).
        unfold incl_dims in K' |- *. rewrite forallb_forall in K' |- *. intros d Id.
        apply existsb_exists. exists d; split.
        -- apply (incl_dims_In Dx D _ B1). specialize (K' d Id).
           apply existsb_exists in K' as [d' [I' E']]. apply dimspec_eqb_eq in E'. subst; auto.
        -- destruct d as [n sh]. unfold dimspec_eqb, pair_eqb. simpl. rewrite Pos.eqb_refl. simpl.
           clear. induction sh as [|s sh IH]; simpl; auto. rewrite IH, andb_true_r.
           destruct s; simpl; [apply Pos.eqb_refl|rewrite !N.eqb_refl; auto].
    + injection H as <-. split.
      * intros rho y M. pose proof (V0 rho y M) as V0'.
        destruct Ho as [-> | ->]; simpl in V0' |- *; rewrite V0'; reflexivity.
      * unfold kids_in; simpl. rewrite Ex; simpl in Kx |- *. rewrite Kx. exact K0.
Qed.

End Flat.
