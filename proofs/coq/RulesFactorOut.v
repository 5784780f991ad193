(** * RulesFactorOut: factors constant along a contraction leave it (docs/rules.md,
    "contraction").

    einsum-factor-out: [EINSUM(xs, o) = MUL(fs..., EINSUM(rest, o'))] where [fs] are the
    operands with dims, all of them output names (in order), [rest] the others (in order).
    Checked: that split, both parts non-empty; the result's dims; for every name of [rest]: it
    is an output name of [o'] exactly when of [o], as an output name of [o'] it is a dim of the
    inner node (with its spec, [incl_dims]), and if it is summed it has the same spec in [xs]
    and [rest]. *)

From Coq Require Import Reals Lra Lia List QArith ZArith PArith NArith Bool Permutation.
From Coq Require Import FSets.FMapPositive FunctionalExtensionality.
From Shardproof Require Import Base Num Pow Term Props RuleLib Congr Rel Shard RulesBasic RulesLift
  RulesEinsum RulesScalarOut RulesLiftEinsum RulesLiftReindex RulesEinsumMul RulesSplit.
Import ListNotations.
Open Scope R_scope.

(** A sum reads its base index only at the names its summand reads, outside the summed ones. *)
Lemma sumover_agree : forall C f S i i',
  (forall j j', agree S j j' -> f j = f j') ->
  (forall m, In m S -> ~ In m (map fst C) -> i m = i' m) ->
  sumover C f i = sumover C f i'.
Proof.
  induction C as [|[n L] C IH]; intros f S i i' Hf H; simpl.
  - apply Hf. intros m Im. apply H; auto.
  - apply rsum_ext; intros k _. apply (IH f S); auto.
    intros m Im NI. unfold upd. destruct (Pos.eqb_spec m n); auto.
    apply H; auto. simpl. intros [E|E]; auto.
Qed.

(** the operands that leave: with dims, all of them output names *)
Definition pulled (T : table) (o : list name) (x : positive) : bool :=
  negb (is_scalar T x) && forallb (fun n => existsb (Pos.eqb n) o) (map fst (ndims (node_at T x))).

Definition chk_einsum_factor_out (G : gctx) (l r : positive) (_ : hint) : option (list claim) :=
  let T := gT G in
  match node_at T l, node_at T r with
  | Node (OEinsum o) xs Dl, Node OMul ys Dr =>
      match last_split ys with
      | Some (fs, e) =>
          match node_at T e with
          | Node (OEinsum o') rest De =>
              if list_eqb Pos.eqb fs (filter (pulled T o) xs) &&
                 list_eqb Pos.eqb rest (filter (fun x => negb (pulled T o x)) xs) &&
                 negb (Nat.eqb (length fs) 0) && negb (Nat.eqb (length rest) 0) &&
                 dims_eqvb Dl Dr && incl_dims De Dr &&
                 forallb (fun n => Bool.eqb (existsb (Pos.eqb n) o) (existsb (Pos.eqb n) o') &&
                                   (negb (existsb (Pos.eqb n) o') || has_name De n) &&
                                   (existsb (Pos.eqb n) o ||
                                    spec_opt_eqb (first_spec T xs n) (first_spec T rest n)))
                         (op_names T rest)
              then Some [] else None
          | _ => None
          end
      | None => None
      end
  | _, _ => None
  end.

Lemma op_names_filter : forall T p xs n, In n (op_names T (filter p xs)) -> In n (op_names T xs).
Proof.
  intros T p xs n I. unfold op_names in *. apply in_flat_map in I as [x [Ix Hn]].
  apply filter_In in Ix as [Ix _]. apply in_flat_map; eauto.
Qed.

Lemma chk_einsum_factor_out_sound : rule_sound chk_einsum_factor_out.
Proof.
  intros G l r h cl H c M _. destruct M as [W _].
  unfold chk_einsum_factor_out in H. set (T := gT G) in *.
  destruct (node_at T l) as [ol xs Dl] eqn:El. destruct ol; try discriminate.
  rename out into o.
  destruct (node_at T r) as [or ys Dr] eqn:Er. destruct or; try discriminate.
  destruct (last_split ys) as [[fs e]|] eqn:LS; try discriminate.
  apply last_split_ok in LS; subst ys.
  destruct (node_at T e) as [oe rest De] eqn:Ee. destruct oe; try discriminate.
  rename out into o'.
  match type of H with (if ?b then _ else _) = _ => destruct b eqn:B; try discriminate end.
  apply andb_prop in B as [B NM]. apply andb_prop in B as [B ID].
  apply andb_prop in B as [B DE]. apply andb_prop in B as [B _].
  apply andb_prop in B as [B _]. apply andb_prop in B as [FS RS].
  apply (list_eqb_eq _ _ (fun a b => proj1 (Pos.eqb_eq a b))) in FS, RS. subst fs rest.
  set (p := pulled T o) in *.
  set (rest := filter (fun x => negb (p x)) xs) in *.
  rewrite forallb_forall in NM.
  assert (NMo : forall n, In n (op_names T rest) ->
            existsb (Pos.eqb n) o = existsb (Pos.eqb n) o').
  { intros n I. specialize (NM n I). repeat (apply andb_prop in NM as [NM ?]).
    apply Bool.eqb_prop; auto. }
  assert (NMd : forall n, In n (op_names T rest) -> existsb (Pos.eqb n) o' = true -> In n (map fst De)).
  { intros n I E. specialize (NM n I). repeat (apply andb_prop in NM as [NM ?]).
    rewrite E in H1. apply has_name_In; auto. }
  assert (NMs : forall n, In n (op_names T rest) -> existsb (Pos.eqb n) o = false ->
            first_spec T xs n = first_spec T rest n).
  { intros n I E. specialize (NM n I). apply andb_prop in NM as [_ NM].
    rewrite E in NM. apply spec_opt_eqb_eq; auto. }
  (* a name of xs outside o is a name of rest *)
  assert (XR : forall n, In n (op_names T xs) -> existsb (Pos.eqb n) o = false ->
            In n (op_names T rest)).
  { intros n I E. unfold op_names in I |- *. apply in_flat_map in I as [x [Ix Hn]].
    apply in_flat_map. exists x; split; auto. unfold rest. apply filter_In. split; auto.
    destruct (p x) eqn:Px; auto. exfalso. unfold p, pulled in Px.
    apply andb_prop in Px as [_ Px]. rewrite forallb_forall in Px. rewrite (Px n Hn) in E.
    discriminate. }
  set (C := contracted (sz c) T xs o). set (C' := contracted (sz c) T rest o').
  assert (NDC : NoDup (map fst C)).
  { unfold C, contracted. rewrite map_map. simpl. rewrite map_id. apply NoDup_filter, NoDup_nodup_pos. }
  assert (PC : Permutation C C').
  { apply NoDup_Permutation; try apply NoDup_fst_pairs; auto.
    { unfold C', contracted. rewrite map_map. simpl. rewrite map_id. apply NoDup_filter, NoDup_nodup_pos. }
    intros [n L]. unfold C, C'. rewrite !In_contracted_iff. split.
    - intros [I [Fo EL]]. assert (IR : In n (op_names T rest)) by auto.
      split; auto. rewrite <- NMo by auto. split; auto. rewrite EL, NMs; auto.
    - intros [I [Fo EL]]. assert (Fo' : existsb (Pos.eqb n) o = false) by (rewrite NMo; auto).
      split; [apply (op_names_filter T _ xs n I)|]. split; auto. rewrite EL, NMs; auto. }
  destruct (dims_eqvb_perm _ _ DE) as [PD ND].
  apply (eqv_by_core c T l r _ _ Dl _ _ Dr W El Er DE).
  intros rho R i Mi Ri. cbn [core].
  assert (Mr : msk (sz c) Dr i = true) by (rewrite <- (msk_perm _ _ _ i PD); auto).
  assert (Me : msk (sz c) De i = true) by (apply (incl_dims_msk _ _ Dr); auto).
  rewrite !map_map, map_app, prodl_app'. cbn [map]. rewrite prodl_cons, prodl_nil, Rmult_1_r.
  rewrite (den_in c T e _ _ _ rho i W Ee Me). cbn [core].
  change (contracted (sz c) T xs o) with C. change (contracted (sz c) T rest o') with C'.
  rewrite (sumover_ext C _ (fun j => prodl (map (fun x => den c T x rho i) (filter p xs)) *
                                     prodl (map (fun x => den c T x rho j) rest)) i i); auto.
  2:{ intros j Hj. rewrite map_map, (prodl_filter _ p). f_equal. f_equal.
      apply map_ext_in. intros x Ix. apply den_agree; auto. intros n In_.
      apply filter_In in Ix as [_ Px]. unfold p, pulled in Px.
      apply andb_prop in Px as [_ Px]. rewrite forallb_forall in Px.
      apply Hj. intro IC. apply contracted_out in IC. rewrite (Px n In_) in IC. discriminate. }
  rewrite sumover_scal. f_equal.
  rewrite (sumover_perm _ _ PC NDC).
  transitivity (sumover C' (fun j => prodl (map (fun x => den c T x rho j) rest)) (restrict De i)).
  2:{ apply sumover_ext; auto. intros; rewrite map_map; auto. }
  apply (sumover_agree C' _ (op_names T rest)).
  - intros j j' A. f_equal. apply map_ext_in. intros x Ix. apply den_agree; auto.
    intros n In_. apply A. unfold op_names. apply in_flat_map; eauto.
  - intros m Im NI. symmetry. apply restrict_in. apply NMd; auto.
    destruct (existsb (Pos.eqb m) o') eqn:E; auto. exfalso. apply NI.
    apply in_map_iff. eexists (m, _). split; [reflexivity|]. unfold C'.
    apply In_contracted_iff. split; [auto|split; [auto|reflexivity]].
Qed.
