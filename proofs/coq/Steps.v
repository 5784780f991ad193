(** * Steps: the certificate's proof steps, replayed (docs/certificate.md "Steps").

    [check_step] replays one step given the results of earlier ones; a result is
    [(lhs, rhs, claims)]. [step_sound]: every result relates equal values in every context
    satisfying [model_ok] in which its claims hold. Rule steps go to [Rules.rule_chk]
    (one checker and one lemma per rule); [congr], [trans], [sym] and [refl] are the
    equality laws; [rename] and [cut] are relational checks ([Rel]) whose lemma step is used
    at another context (inputs renamed, cut variables bound to the values they stand for);
    an [opaque] step (an smt or cas step, or a rule Coq has no checker for) proves nothing and
    becomes its own claim [CEq]. *)

From Coq Require Import Reals Lra Lia List QArith ZArith PArith NArith Bool Permutation.
From Coq Require Import FSets.FMapPositive FunctionalExtensionality.
From Shardproof Require Import Base Num Pow Term Props RuleLib Congr Rel RulesBasic Rules.
Import ListNotations.
Open Scope R_scope.

Record cutpt := CutPt { cp_spec : positive; cp_plan : positive; cp_var : positive;
                        cp_embed : positive; cp_prem : positive }.

Inductive step :=
| SRefl (l : positive)
| SRule (t : rtag) (l r : positive) (h : hint)
| SCongr (l r : positive) (args : list (option positive))
| STrans (l r : positive) (chain : list positive)
| SSym (l r : positive) (of : positive)
| SRename (l r : positive) (of : positive)
| SCut (l r : positive) (lemma : positive) (cuts : list cutpt)
| SOpaque (l r : positive).

Definition result := (positive * positive * list claim)%type.

(** Claims are kept without duplicates (a step used many times would repeat its claims). *)
Definition claim_eqb (a b : claim) : bool :=
  match a, b with
  | CNZ x, CNZ y | CNN x, CNN y => Pos.eqb x y
  | CEq x y, CEq x' y' => Pos.eqb x x' && Pos.eqb y y'
  | _, _ => false
  end.

Definition add_claims (a b : list claim) : list claim :=
  fold_right (fun k acc => if existsb (claim_eqb k) acc then acc else k :: acc) b a.
Definition results := PositiveMap.t result.

(** The data every step reads: the table, its analyses and the cut-variable names. *)
Record sctx := SCtx {
  sG : gctx;
  scut : PositiveMap.t unit;           (* names of cut variables *)
  scf : PositiveMap.t bool;            (* per node: mentions no cut variable (checked) *)
  sfuel : nat                          (* walks take at most 2^sfuel steps *)
}.

Definition cfget (cf : PositiveMap.t bool) (i : positive) : bool :=
  match PositiveMap.find i cf with Some b => b | None => false end.

Definition cf_of (cutn : PositiveMap.t unit) (cf : PositiveMap.t bool) (nd : node) : bool :=
  match nop nd with
  | OInput nm _ => match PositiveMap.find nm cutn with Some _ => false | None => true end
  | _ => forallb (cfget cf) (nargs nd)
  end.

Definition cf_checkb (T : table) (cutn : PositiveMap.t unit) (cf : PositiveMap.t bool) : bool :=
  forallb (fun p => implb (cfget cf (fst p)) (cf_of cutn cf (snd p))) (PositiveMap.elements T).

Lemma cf_checkb_node : forall T cutn cf i, cf_checkb T cutn cf = true -> cfget cf i = true ->
  PositiveMap.find i T <> None -> cf_of cutn cf (node_at T i) = true.
Proof.
  intros T cutn cf i H C F. unfold node_at. destruct (PositiveMap.find i T) eqn:E; [|congruence].
  apply PositiveMap.elements_correct in E. unfold cf_checkb in H. rewrite forallb_forall in H.
  apply H in E. simpl in E. rewrite C in E. auto.
Qed.

(** Nodes free of cut variables mean the same in two contexts that differ only there. *)
Section CutFree.
Variables c1 c2 : ctx.
Hypothesis Hsz : sz c1 = sz c2.
Hypothesis Hpo : po c1 = po c2.
Hypothesis Huf : uf c1 = uf c2.
Variable T : table.
Hypothesis W : wf_table T.
Variable cutn : PositiveMap.t unit.
Variable cf : PositiveMap.t bool.
Hypothesis CF : cf_checkb T cutn cf = true.
Hypothesis Henv : forall nm, PositiveMap.find nm cutn = None -> env c1 nm = env c2 nm.

Lemma cf_sound : forall u, cfget cf u = true -> den c1 T u = den c2 T u.
Proof.
  intro u.
  induction u as [u IH] using (well_founded_ind (Wf_nat.well_founded_ltof _ Pos.to_nat)).
  intros C. apply functional_extensionality; intro rho; apply functional_extensionality; intro x.
  destruct (PositiveMap.find u T) eqn:F.
  2:{ rewrite !den_unfold by auto. unfold node_at; rewrite F; simpl; auto. }
  pose proof (cf_checkb_node T cutn cf u CF C ltac:(congruence)) as N.
  destruct (node_at T u) as [o xs D] eqn:Eu.
  rewrite (den_node c1 T u o xs D W Eu), (den_node c2 T u o xs D W Eu). rewrite Hsz.
  destruct (msk _ _ _); auto.
  unfold cf_of in N; simpl in N.
  destruct o eqn:Eo;
  [ unfold core; simpl; destruct (PositiveMap.find nm cutn) eqn:Ec; try discriminate;
    rewrite Henv; auto
  | rewrite (core_ctx c1 c2) by auto; f_equal; apply map_ext_in; intros z Ha;
      apply IH; [unfold Wf_nat.ltof; apply Pos2Nat.inj_lt;
                 pose proof (node_args_lt T u W) as A; rewrite Eu in A; simpl in A;
                 rewrite Forall_forall in A; auto
                |rewrite forallb_forall in N; auto] .. ].
Qed.
End CutFree.

(** ** Replaying steps *)
Section Replay.
Variable S : sctx.
Let T := gT (sG S).
Let cf := scf S.

Definition get_res (rs : results) (k : positive) : option result := PositiveMap.find k rs.

Fixpoint congr_args (rs : results) (xs ys : list positive) (args : list (option positive))
  : option (list claim) :=
  match xs, ys, args with
  | [], [], [] => Some []
  | x :: xs', y :: ys', a :: args' =>
      match congr_args rs xs' ys' args' with
      | None => None
      | Some cl =>
          if dims_eqvb (ndims (node_at T x)) (ndims (node_at T y)) then
            match a with
            | None => if Pos.eqb x y then Some cl else None
            | Some k => match get_res rs k with
                        | Some (l, r, g) => if Pos.eqb l x && Pos.eqb r y then Some (add_claims g cl) else None
                        | None => None
                        end
            end
          else None
      end
  | _, _, _ => None
  end.

Fixpoint trans_chain (rs : results) (cur : positive) (chain : list positive) : option (positive * list claim) :=
  match chain with
  | [] => Some (cur, [])
  | k :: rest =>
      match get_res rs k with
      | Some (l, r, g) =>
          if Pos.eqb l cur then
            match trans_chain rs r rest with Some (e, g') => Some (e, add_claims g g') | None => None end
          else None
      | None => None
      end
  end.

(** renaming: the relation pairs inputs with inputs (a renaming) and other nodes structurally.
    The claims of the renamed step are carried over along the relation; a claim about a node
    outside it (an intermediate term of a step Coq takes as a hypothesis) cannot be, and then
    the step's own equation becomes its claim (as for an opaque step): the step is reported as
    resting on a hypothesis, never as Coq-checked. Cut steps do the same. *)
Definition ren_leaf (u v : positive) : option bool :=
  match nop (node_at T u), nop (node_at T v) with
  | OInput _ _, OInput _ _ => Some true
  | OInput _ _, _ => None
  | _, OInput _ _ => None
  | _, _ => Some false
  end.

Definition pos_flag (nm : name) : bool :=
  match PositiveMap.find nm (gpos (sG S)) with Some _ => true | None => false end.

Definition ren_build (l : list (positive * positive)) : option (PositiveMap.t name) :=
  fold_left (fun acc p =>
    match acc with
    | None => None
    | Some m =>
        match nop (node_at T (fst p)), nop (node_at T (snd p)) with
        | OInput n1 _, OInput n2 _ =>
            match PositiveMap.find n1 m with
            | Some n2' => if Pos.eqb n2 n2' then Some m else None
            | None => Some (PositiveMap.add n1 n2 m)
            end
        | _, _ => Some m
        end
    end) l (Some (PositiveMap.empty _)).

Definition input_of (nd : node) : option (name * dom * list dimspec) :=
  match nd with Node (OInput n d) [] D => Some (n, d, D) | _ => None end.

Definition ren_pair_ok (R : pmap) (ren : PositiveMap.t name) (u v : positive) : bool :=
  match input_of (node_at T u), input_of (node_at T v) with
  | Some (n1, d1, D1), Some (n2, d2, D2) =>
      dom_eqb d1 d2 && dims_eqvb D1 D2 && Bool.eqb (pos_flag n1) (pos_flag n2) &&
      match PositiveMap.find n1 ren with Some n2' => Pos.eqb n2 n2' | None => false end
  | _, _ => struct_okb T R u v
  end.

Definition xfer (R : pmap) (k : claim) : option claim :=
  match k with
  | CNZ z => option_map CNZ (rget R z)
  | CNN z => option_map CNN (rget R z)
  | CEq a b => match rget R a, rget R b with Some a', Some b' => Some (CEq a' b') | _, _ => None end
  end.

Fixpoint xfer_all (f : claim -> option claim) (l : list claim) : option (list claim) :=
  match l with
  | [] => Some []
  | k :: r => match f k, xfer_all f r with Some k', Some r' => Some (k' :: r') | _, _ => None end
  end.

(** [(L1, L2)] renamed into [(l, r)]: the relation and the renaming of inputs *)
Definition rename_rel (L1 L2 l r : positive) : option (pmap * PositiveMap.t name) :=
  match rel_walk (sfuel S) T ren_leaf [(L1, l); (L2, r)] with
  | None => None
  | Some R =>
      match ren_build (PositiveMap.elements R) with
      | None => None
      | Some ren =>
          if forallb (fun p => ren_pair_ok R ren (fst p) (snd p)) (PositiveMap.elements R) &&
             forallb (fun p => Bool.eqb (pos_flag (fst p)) (pos_flag (snd p)))
                     (PositiveMap.elements ren) &&
             match rget R L1, rget R L2 with
             | Some l', Some r' => Pos.eqb l l' && Pos.eqb r r'
             | _, _ => false
             end
          then Some (R, ren) else None
      end
  end.

Definition rename_res (rs : results) (l r k : positive) : option result :=
  match get_res rs k with
  | Some (L1, L2, g) =>
      match rename_rel L1 L2 l r with
      | Some (R, _) => match xfer_all (xfer R) g with
                       | Some g' => Some (l, r, g')
                       | None => Some (l, r, [CEq l r])   (* hypotheses that do not carry over *)
                       end
      | None => None
      end
  | None => None
  end.

(** cut: a lemma over fresh variables, one premise per cut point *)
Definition sub_leaf (K : pmap) (u v : positive) : option bool :=
  if Pos.eqb u v && cfget cf u then Some true
  else match rget K u with
       | Some v' => if Pos.eqb v v' then Some true else None
       | None => Some false
       end.

Definition sub_pair_ok (K R : pmap) (u v : positive) : bool :=
  (Pos.eqb u v && cfget cf u) ||
  (match rget K u with Some v' => Pos.eqb v v' | None => false end &&
   dims_eqvb (ndims (node_at T u)) (ndims (node_at T v))) ||
  struct_okb T R u v.

Definition sub_rel (K : pmap) (u v : positive) : option pmap :=
  match rel_walk (sfuel S) T (sub_leaf K) [(u, v)] with
  | Some R => if forallb (fun p => sub_pair_ok K R (fst p) (snd p)) (PositiveMap.elements R) &&
                 match rget R u with Some v' => Pos.eqb v v' | None => false end
              then Some R else None
  | None => None
  end.

Definition var_name (x : positive) : option name :=
  match node_at T x with
  | Node (OInput nm DReal) [] _ =>
      match PositiveMap.find nm (scut S), PositiveMap.find nm (gpos (sG S)) with
      | Some _, None => Some nm
      | _, _ => None
      end
  | _ => None
  end.

Definition cut_point_ok (rs : results) (K1 : pmap) (cp : cutpt) : option (list claim) :=
  match var_name (cp_var cp), get_res rs (cp_prem cp) with
  | Some _, Some (i, p, g) =>
      if Pos.eqb p (cp_plan cp) && cfget cf (cp_spec cp) && cfget cf (cp_plan cp) &&
         match vget (gvt (sG S)) (cp_spec cp) with [] => true | _ => false end &&
         dims_eqvb (ndims (node_at T (cp_spec cp))) (ndims (node_at T (cp_var cp))) &&
         dims_eqvb (ndims (node_at T (cp_plan cp))) (ndims (node_at T (cp_embed cp)))
      then match sub_rel K1 i (cp_embed cp) with Some _ => Some g | None => None end
      else None
  | _, _ => None
  end.

Fixpoint cut_points_ok (rs : results) (K1 : pmap) (cps : list cutpt) : option (list claim) :=
  match cps with
  | [] => Some []
  | cp :: r => match cut_point_ok rs K1 cp, cut_points_ok rs K1 r with
               | Some g, Some g' => Some (add_claims g g')
               | _, _ => None
               end
  end.

Definition inv_find (R : pmap) (z : positive) : option positive :=
  match find (fun p => Pos.eqb (snd p) z) (PositiveMap.elements R) with
  | Some p => Some (fst p)
  | None => None
  end.

Definition back (R1 R2 : pmap) (z : positive) : option positive :=
  if cfget cf z then Some z
  else match inv_find R1 z with Some u => Some u | None => inv_find R2 z end.

Definition xfer_back (R1 R2 : pmap) (k : claim) : option claim :=
  match k with
  | CNZ z => option_map CNZ (back R1 R2 z)
  | CNN z => option_map CNN (back R1 R2 z)
  | CEq a b => match back R1 R2 a, back R1 R2 b with Some a', Some b' => Some (CEq a' b') | _, _ => None end
  end.

Definition keys (f : cutpt -> positive) (g : cutpt -> positive) (cps : list cutpt) : pmap :=
  fold_left (fun m cp => PositiveMap.add (f cp) (g cp) m) cps (PositiveMap.empty _).

Definition cut_res (rs : results) (l r k : positive) (cps : list cutpt) : option result :=
  match get_res rs k with
  | Some (L1, L2, gL) =>
      let K1 := keys cp_spec cp_var cps in
      let K2 := keys cp_plan cp_embed cps in
      if cfget cf l && cfget cf r &&
         nodup_posb (map cp_spec cps) && nodup_posb (map cp_plan cps) &&
         nodup_posb (map (fun cp => match var_name (cp_var cp) with Some n => n | None => 1%positive end) cps)
      then
        match cut_points_ok rs K1 cps, sub_rel K1 l L1, sub_rel K2 r L2 with
        | Some gP, Some R1, Some R2 =>
            match xfer_all (xfer_back R1 R2) gL with
            | Some gL' => Some (l, r, add_claims gL' gP)
            | None => Some (l, r, [CEq l r])       (* hypotheses that do not carry over *)
            end
        | _, _, _ => None
        end
      else None
  | None => None
  end.

Definition check_step (rs : results) (st : step) : option result :=
  match st with
  | SRefl l => Some (l, l, [])
  | SRule t l r h => match rule_chk t (sG S) l r h with Some cl => Some (l, r, cl) | None => None end
  | SCongr l r args =>
      let nl := node_at T l in
      let nr := node_at T r in
      if op_eqb (nop nl) (nop nr) && dims_eqvb (ndims nl) (ndims nr) then
        match congr_args rs (nargs nl) (nargs nr) args with Some cl => Some (l, r, cl) | None => None end
      else None
  | STrans l r chain =>
      match chain with
      | [] => None
      | _ => match trans_chain rs l chain with
             | Some (e, g) => if Pos.eqb e r then Some (l, r, g) else None
             | None => None
             end
      end
  | SSym l r k =>
      match get_res rs k with
      | Some (a, b, g) => if Pos.eqb a r && Pos.eqb b l then Some (l, r, g) else None
      | None => None
      end
  | SRename l r k => rename_res rs l r k
  | SCut l r k cps => cut_res rs l r k cps
  | SOpaque l r => Some (l, r, [CEq l r])
  end.

End Replay.
