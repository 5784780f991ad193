(** * Cert: a whole certificate, replayed; the theorem an exported file instantiates.

    [check_cert C] builds the node table, checks its order, the "varies over" analysis and the
    cut-freedom analysis, replays every step in order and reports, per obligation, [Proved cl]
    (with the claims it rests on) or [NotChecked why]. [check_cert_sound]: in every context
    with sizes satisfying the table's divisibility facts ([sizes_ok]) and the size facts the
    certificate lists, positive inputs positive, and Partial addends as in [po_ok], every
    [Proved cl] obligation whose claims hold is an equality of its two sides on every rank and
    index. *)

From Coq Require Import Reals Lra Lia List QArith ZArith PArith NArith Bool.
From Coq Require Import FSets.FMapPositive.
From Shardproof Require Import Base Num Pow Term Props RuleLib Congr Rel RulesBasic Signs Rules.
From Shardproof Require Import Steps StepsSound.
Import ListNotations.
Open Scope R_scope.

Inductive oproof := OStep (k : positive) | OReuse (k : positive).
Record oblig := Ob { o_e : positive; o_a : positive; o_pf : oproof }.
Inductive status := Proved (cl : list claim) | NotChecked (why : N).

Record cert := Cert {
  c_nodes : list node;           (* node i+1 is the i-th (ids from 1) *)
  c_facts : list (name * N);     (* sizes the proof may use as numbers *)
  c_cut : list name;             (* names of cut variables *)
  c_steps : list step;           (* step k+1 is the k-th *)
  c_obs : list oblig
}.

(** ** Tables and analyses, built in id order *)
Fixpoint index_from {A} (k : positive) (l : list A) (m : PositiveMap.t A) : PositiveMap.t A :=
  match l with [] => m | x :: r => index_from (Pos.succ k) r (PositiveMap.add k x m) end.

Definition build_table (l : list node) : table := index_from 1 l (PositiveMap.empty _).

Fixpoint scan {A} (f : node -> PositiveMap.t A -> A) (k : positive) (l : list node)
  (m : PositiveMap.t A) : PositiveMap.t A :=
  match l with [] => m | nd :: r => scan f (Pos.succ k) r (PositiveMap.add k (f nd m) m) end.

Definition vary_tab (l : list node) : vtab := scan vary_of 1 l (PositiveMap.empty _).

Definition set_of (l : list name) : PositiveMap.t unit :=
  fold_left (fun m n => PositiveMap.add n tt m) l (PositiveMap.empty _).

Definition cf_tab (cutn : PositiveMap.t unit) (l : list node) : PositiveMap.t bool :=
  scan (fun nd m => cf_of cutn m nd) 1 l (PositiveMap.empty _).

Definition pos_names (l : list node) : PositiveMap.t unit :=
  fold_left (fun m nd => match nop nd with OInput nm DPos => PositiveMap.add nm tt m | _ => m end)
            l (PositiveMap.empty _).

(** the sign table, in id order (untrusted: [Signs.sg_checkb] verifies it where it is used) *)
Definition sign_tab (pm : PositiveMap.t unit) (T : table) (l : list node)
  : PositiveMap.t (sset * bool) :=
  scan (fun nd m => sg_node pm T m nd) 1 l (PositiveMap.empty _).

Definition cert_gctx (C : cert) : gctx :=
  let T := build_table (c_nodes C) in
  let pm := pos_names (c_nodes C) in
  GCtx T (vary_tab (c_nodes C)) (c_facts C) pm (sign_tab pm T (c_nodes C)).

Definition cert_sctx (C : cert) (fuel : nat) : sctx :=
  SCtx (cert_gctx C) (set_of (c_cut C)) (cf_tab (set_of (c_cut C)) (c_nodes C)) fuel.

(** ** Replay *)
Fixpoint run (S : sctx) (steps : list step) (k : positive) (rs : results) (failed : list positive)
  : results * list positive :=
  match steps with
  | [] => (rs, rev' failed)
  | st :: r =>
      match check_step S rs st with
      | Some res => run S r (Pos.succ k) (PositiveMap.add k res rs) failed
      | None => run S r (Pos.succ k) rs (k :: failed)
      end
  end.

Definition check_ob (S : sctx) (rs : results) (ob : oblig) : status :=
  match o_pf ob with
  | OStep k =>
      match get_res rs k with
      | Some (l, r, g) => if Pos.eqb l (o_e ob) && Pos.eqb r (o_a ob) then Proved g else NotChecked 2
      | None => NotChecked 3
      end
  | OReuse k =>
      match rename_res S rs (o_e ob) (o_a ob) k with
      | Some (_, _, g) => Proved g
      | None => NotChecked 4
      end
  end.

Definition tables_ok_in (S : sctx) : bool :=
  wf_tableb (gT (sG S)) && vary_checkb (gT (sG S)) (gvt (sG S)) &&
  cf_checkb (gT (sG S)) (scut S) (scf S).

Definition tables_ok (C : cert) : bool := tables_ok_in (cert_sctx C 40).

Definition finish (S : sctx) (obs : list oblig) (ok : bool) (rf : results * list positive)
  : list status * list positive :=
  if ok then (map (check_ob S (fst rf)) obs, snd rf)
  else (map (fun _ => NotChecked 1) obs, []).

Definition check_in (S : sctx) (C : cert) : list status * list positive :=
  finish S (c_obs C) (tables_ok_in S) (run S (c_steps C) 1 (PositiveMap.empty _) []).

(** The report: a status per obligation, and the steps that did not check. The tables and
    analyses are built once ([cert_sctx] is an argument, evaluated once by [vm_compute]). *)
Definition check_cert (C : cert) : list status * list positive := check_in (cert_sctx C 40) C.

(** ** Soundness *)
Definition ob_holds (T : table) (c : ctx) (ob : oblig) (st : status) : Prop :=
  match st with
  | Proved cl => (forall k, In k cl -> holds c T k) -> eqv c T (o_e ob) (o_a ob)
  | NotChecked _ => True
  end.

Lemma run_sound : forall S, cf_checkb (gT (sG S)) (scut S) (scf S) = true ->
  forall steps k rs failed, res_ok S rs -> res_ok S (fst (run S steps k rs failed)).
Proof.
  intros S CF. induction steps as [|st steps IH]; intros k rs failed RS; simpl; auto.
  destruct (check_step S rs st) as [res|] eqn:E; apply IH; auto.
  intros k' l r g G' c M Hk. unfold get_res in G'. destruct (Pos.eq_dec k' k) as [->|Ne].
  - rewrite PositiveMap.gss in G'. injection G' as Er. subst res.
    apply (check_step_sound S CF rs st (l, r, g) RS E c M Hk).
  - rewrite PositiveMap.gso in G' by auto. apply (RS k' l r g G' c M Hk).
Qed.

Lemma check_ob_sound : forall S rs, cf_checkb (gT (sG S)) (scut S) (scf S) = true -> res_ok S rs ->
  forall c, model_ok (sG S) c -> forall ob, ob_holds (gT (sG S)) c ob (check_ob S rs ob).
Proof.
  intros S rs CF RS c M ob. unfold check_ob, ob_holds.
  destruct (o_pf ob) as [k|k].
  - destruct (get_res rs k) as [[[l r] g]|] eqn:E; simpl; auto.
    destruct (Pos.eqb l (o_e ob) && Pos.eqb r (o_a ob)) eqn:B; simpl; auto.
    apply andb_prop in B as [B1 B2]. apply Pos.eqb_eq in B1; apply Pos.eqb_eq in B2; subst.
    intros Hk. apply (RS k _ _ g E c M Hk).
  - destruct (rename_res S rs (o_e ob) (o_a ob) k) as [[[l r] g]|] eqn:E; simpl; auto.
    intros Hk.
    assert (H := rename_res_sound S rs (o_e ob) (o_a ob) k (l, r, g) RS E c M Hk). simpl in H.
    unfold rename_res in E.
    destruct (get_res rs k) as [[[L1 L2] g0]|]; try discriminate.
    destruct (rename_rel S L1 L2 (o_e ob) (o_a ob)) as [[R ren]|]; try discriminate.
    destruct (xfer_all (xfer R) g0); injection E as <- <- <-; auto.
Qed.

Theorem check_cert_sound : forall C c,
  sizes_ok (sz c) (gT (cert_gctx C)) ->
  (forall n v, In (n, v) (c_facts C) -> sz c n = N.to_nat v) ->
  dom_ok c (cert_gctx C) -> po_ok c ->
  Forall2 (ob_holds (gT (cert_gctx C)) c) (c_obs C) (fst (check_cert C)).
Proof.
  intros C c SZ F DO P. unfold check_cert, check_in, finish.
  destruct (tables_ok_in (cert_sctx C 40)) eqn:OK.
  - unfold tables_ok_in in OK.
    apply andb_prop in OK as [OK CF]. apply andb_prop in OK as [WF VC].
    apply wf_tableb_ok in WF.
    assert (M : model_ok (sG (cert_sctx C 40)) c) by exact (conj WF (conj VC (conj SZ (conj F (conj DO P))))).
    assert (RS := run_sound (cert_sctx C 40) CF (c_steps C) 1 (PositiveMap.empty _) []
                    ltac:(intros k l r g G'; unfold get_res in G'; rewrite PositiveMap.gempty in G'; discriminate)).
    simpl fst. induction (c_obs C) as [|ob obs IH]; simpl; constructor; auto.
    apply (check_ob_sound (cert_sctx C 40) _ CF RS c M ob).
  - simpl. induction (c_obs C) as [|ob obs IH]; simpl; constructor; simpl; auto.
Qed.

(** The assumptions are satisfiable: at sizes satisfying [sizes_ok] and the facts, all-one
    inputs and the Partial addends [po_witness] form a context of the theorem. *)
Lemma assumptions_satisfiable : forall C s uf, sizes_ok s (gT (cert_gctx C)) ->
  dom_ok (Ctx s (fun _ _ => 1) po_witness uf) (cert_gctx C) /\
  po_ok (Ctx s (fun _ _ => 1) po_witness uf).
Proof.
  intros C s uf [S1 _]. split.
  - intros nm _ x; simpl; lra.
  - apply po_witness_ok; auto.
Qed.

(** ** What the exported file prints *)
Definition status_code (st : status) : N :=
  match st with Proved [] => 0 | Proved _ => 1 | NotChecked w => 1000 + w end.

Definition report_codes (rep : list status * list positive) : list N := map status_code (fst rep).

Fixpoint claims_of (k : N) (l : list status) : list (N * list claim) :=
  match l with
  | [] => []
  | Proved (c0 :: cs) :: r => (k, c0 :: cs) :: claims_of (N.succ k) r
  | _ :: r => claims_of (N.succ k) r
  end.

Definition report_claims (rep : list status * list positive) : list (N * list claim) :=
  claims_of 0 (fst rep).
