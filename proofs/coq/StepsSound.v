(** * StepsSound: every replayed step relates equal values ([check_step_sound]). *)

From Coq Require Import Reals Lra Lia List QArith ZArith PArith NArith Bool Permutation.
From Coq Require Import FSets.FMapPositive FunctionalExtensionality.
From Shardproof Require Import Base Num Pow Term Props RuleLib Congr Rel RulesBasic Rules Steps.
Import ListNotations.
Open Scope R_scope.

Lemma eqv_fun : forall c T l r, eqv c T l r -> forall rho, rk_ok (sz c) rho -> den c T l rho = den c T r rho.
Proof. intros. apply functional_extensionality; intro x. apply H; auto. Qed.

Lemma eqv_sym : forall c T l r, eqv c T l r -> eqv c T r l.
Proof. intros c T l r H rho R x. symmetry; apply H; auto. Qed.

Lemma eqv_trans : forall c T a b d, eqv c T a b -> eqv c T b d -> eqv c T a d.
Proof. intros c T a b d H1 H2 rho R x. rewrite H1, H2; auto. Qed.

(** A claim about [v] in one context is a claim about [u] in another where [u] means [v]. *)
Lemma holds_transfer : forall c1 c2 T u v, sz c1 = sz c2 ->
  (forall rho, rk_ok (sz c1) rho -> den c1 T u rho = den c2 T v rho) ->
  (u = v \/ dims_eqvb (ndims (node_at T u)) (ndims (node_at T v)) = true \/
   dims_eqvb (ndims (node_at T v)) (ndims (node_at T u)) = true) ->
  (holds c2 T (CNZ v) -> holds c1 T (CNZ u)) /\ (holds c2 T (CNN v) -> holds c1 T (CNN u)).
Proof.
  intros c1 c2 T u v Hs E D. split; simpl; intros H rho R x.
  - intros M. rewrite E by auto. rewrite <- Hs in H. apply H; auto.
    destruct D as [<-|[D|D]]; auto.
    + destruct (dims_eqvb_perm _ _ D) as [P _]. rewrite <- (msk_perm _ _ _ x P); auto.
    + destruct (dims_eqvb_perm _ _ D) as [P _]. rewrite (msk_perm _ _ _ x P); auto.
  - rewrite E by auto. rewrite <- Hs in H. apply H; auto.
Qed.

Lemma claim_eqb_eq : forall a b, claim_eqb a b = true -> a = b.
Proof.
  intros [x|x|x y] [x'|x'|x' y'] H; simpl in H; try discriminate; beq_to_eq; auto.
Qed.

Lemma add_claims_l : forall a b k, In k a -> In k (add_claims a b).
Proof.
  induction a as [|k0 a IH]; intros b k I; simpl in *; [contradiction|].
  destruct I as [E0|I].
  - subst k0. destruct (existsb (claim_eqb k) (add_claims a b)) eqn:E; [|simpl; auto].
    apply existsb_exists in E as [k' [I' E]]. apply claim_eqb_eq in E; subst; auto.
  - destruct (existsb _ _); simpl; auto.
Qed.

Lemma add_claims_r : forall a b k, In k b -> In k (add_claims a b).
Proof.
  induction a as [|k0 a IH]; intros b k I; simpl in *; auto.
  destruct (existsb _ _); simpl; auto.
Qed.

Section Sound.
Variable S : sctx.
Local Notation G := (sG S).
Local Notation T := (gT (sG S)).
Hypothesis CF : cf_checkb T (scut S) (scf S) = true.

Definition res_ok (rs : results) : Prop :=
  forall k l r g, get_res rs k = Some (l, r, g) ->
  forall c, model_ok G c -> (forall kk, In kk g -> holds c T kk) -> eqv c T l r.

Lemma congr_args_sound : forall rs, res_ok rs -> forall xs ys args cl,
  congr_args S rs xs ys args = Some cl ->
  length xs = length ys /\ forall k, (k < length xs)%nat ->
  dims_eqvb (ndims (node_at T (nth k xs 1%positive))) (ndims (node_at T (nth k ys 1%positive))) = true /\
  forall c, model_ok G c -> (forall kk, In kk cl -> holds c T kk) ->
  forall rho, rk_ok (sz c) rho -> den c T (nth k xs 1%positive) rho = den c T (nth k ys 1%positive) rho.
Proof.
  intros rs RS. induction xs as [|x xs IH]; destruct ys as [|y ys]; destruct args as [|a args];
    intros cl H; simpl in H; try discriminate.
  - split; auto. intros; simpl in *; lia.
  - destruct (congr_args S rs xs ys args) as [cl'|] eqn:E; try discriminate.
    destruct (IH ys args cl' E) as [L C].
    destruct (dims_eqvb (ndims (node_at T x)) (ndims (node_at T y))) eqn:D; try discriminate.
    assert (Hc : forall c, model_ok G c -> (forall kk, In kk cl -> holds c T kk) ->
                   (forall kk, In kk cl' -> holds c T kk) /\
                   forall rho, rk_ok (sz c) rho -> den c T x rho = den c T y rho).
    { intros c M Hk. destruct a as [k|].
      - destruct (get_res rs k) as [[[l r] g]|] eqn:Gk; try discriminate.
        destruct (Pos.eqb l x && Pos.eqb r y) eqn:B; try discriminate. injection H as <-.
        apply andb_prop in B as [B1 B2]. apply Pos.eqb_eq in B1; apply Pos.eqb_eq in B2; subst.
        split; [intros; apply Hk, add_claims_r; auto|].
        apply eqv_fun. apply (RS k x y g Gk c M). intros; apply Hk, add_claims_l; auto.
      - destruct (Pos.eqb x y) eqn:B; try discriminate. injection H as <-.
        apply Pos.eqb_eq in B; subst. split; auto. }
    split; [simpl; lia|]. intros [|k] Hk; simpl.
    + split; auto. intros c M Hq rho R. apply (proj2 (Hc c M Hq)); auto.
    + destruct (C k ltac:(simpl in Hk; lia)) as [C1 C2]. split; auto.
      intros c M Hq rho R. apply C2; auto. apply (proj1 (Hc c M Hq)).
Qed.

Lemma congr_sound : forall rs l r args cl, res_ok rs ->
  op_eqb (nop (node_at T l)) (nop (node_at T r)) = true ->
  dims_eqvb (ndims (node_at T l)) (ndims (node_at T r)) = true ->
  congr_args S rs (nargs (node_at T l)) (nargs (node_at T r)) args = Some cl ->
  forall c, model_ok G c -> (forall kk, In kk cl -> holds c T kk) -> eqv c T l r.
Proof.
  intros rs l r args cl RS OE DE CA c M Hk.
  destruct (congr_args_sound rs RS _ _ _ _ CA) as [L CH].
  destruct (node_at T l) as [o xs D1] eqn:El. destruct (node_at T r) as [o' ys D2] eqn:Er.
  simpl in *. apply op_eqb_eq in OE; subst o'.
  destruct M as [W [VC [SZ [F [DO P]]]]].
  destruct (is_input o) eqn:I.
  - intros rho R x. destruct o; simpl in I; try discriminate.
    rewrite (den_node c T l _ xs D1 W El), (den_node c T r _ ys D2 W Er).
    destruct (dims_eqvb_perm _ _ DE) as [P' _].
    rewrite <- (msk_perm _ _ _ x P'), <- (restrict_perm _ _ x P'). auto.
  - intros rho R x. revert x. apply equal_f.
    apply (struct_eqv c c T l r o xs ys D1 D2); auto.
    intros k Hkk. destruct (CH k Hkk) as [C1 C2]. split; auto. intros; apply C2; auto.
    split; auto.
Qed.

Lemma trans_chain_sound : forall rs, res_ok rs -> forall chain cur e g,
  trans_chain rs cur chain = Some (e, g) ->
  forall c, model_ok G c -> (forall kk, In kk g -> holds c T kk) -> eqv c T cur e.
Proof.
  intros rs RS. induction chain as [|k chain IH]; intros cur e g H c M Hk; simpl in H.
  - injection H as <- <-. intros rho R x; auto.
  - destruct (get_res rs k) as [[[l r] g1]|] eqn:Gk; try discriminate.
    destruct (Pos.eqb l cur) eqn:B; try discriminate. apply Pos.eqb_eq in B; subst.
    destruct (trans_chain rs r chain) as [[e' g2]|] eqn:E; try discriminate.
    injection H as <- <-.
    apply eqv_trans with r.
    + apply (RS k cur r g1 Gk c M). intros; apply Hk, add_claims_l; auto.
    + apply (IH r e' g2 E c M). intros; apply Hk, add_claims_r; auto.
Qed.

(** ** Renaming *)
Definition env_ren (ren : PositiveMap.t name) (e : name -> Ix -> R) : name -> Ix -> R :=
  fun nm => match PositiveMap.find nm ren with Some nm' => e nm' | None => e nm end.

Definition ctx_ren (ren : PositiveMap.t name) (c : ctx) : ctx :=
  Ctx (sz c) (env_ren ren (env c)) (po c) (uf c).

Lemma elements_find : forall A (m : PositiveMap.t A) u v,
  In (u, v) (PositiveMap.elements m) -> PositiveMap.find u m = Some v.
Proof. intros. apply PositiveMap.elements_complete; auto. Qed.

Lemma input_of_some : forall nd n d D, input_of nd = Some (n, d, D) -> nd = Node (OInput n d) [] D.
Proof.
  intros [o xs D'] n d D H. destruct o; try discriminate. destruct xs; try discriminate.
  simpl in H. injection H as <- <- <-. auto.
Qed.

Lemma struct_dims : forall T R u v, struct_okb T R u v = true ->
  dims_eqvb (ndims (node_at T u)) (ndims (node_at T v)) = true.
Proof.
  intros. unfold struct_okb in H. repeat match type of H with _ && _ = true => apply andb_prop in H as [H ?] end.
  auto.
Qed.

Lemma model_ok_ren : forall c ren, model_ok G c ->
  (forall n1 n2, PositiveMap.find n1 ren = Some n2 -> pos_flag S n1 = pos_flag S n2) ->
  model_ok G (ctx_ren ren c).
Proof.
  intros c ren [W [VC [SZ [F [DO P]]]]] H.
  split; [auto|]. split; [auto|]. split; [auto|]. split; [auto|]. split; [|auto].
  intros nm Hp x. simpl. unfold env_ren. destruct (PositiveMap.find nm ren) as [n2|] eqn:E.
  - apply DO. specialize (H nm n2 E). unfold pos_flag in H. rewrite Hp in H.
    destruct (PositiveMap.find n2 (gpos G)) as [[]|]; auto; discriminate.
  - apply DO; auto.
Qed.

Lemma rename_rel_sound : forall L1 L2 l r R ren, rename_rel S L1 L2 l r = Some (R, ren) ->
  rget R L1 = Some l /\ rget R L2 = Some r /\
  (forall u v, rget R u = Some v -> dims_eqvb (ndims (node_at T u)) (ndims (node_at T v)) = true) /\
  forall c, model_ok G c -> model_ok G (ctx_ren ren c) /\
    forall u v, rget R u = Some v -> forall rho, rk_ok (sz c) rho ->
      den (ctx_ren ren c) T u rho = den c T v rho.
Proof.
  intros L1 L2 l r R ren H. unfold rename_rel in H.
  destruct (rel_walk _ _ _ _) as [R0|]; try discriminate.
  destruct (ren_build S (PositiveMap.elements R0)) as [ren0|]; try discriminate.
  match type of H with context [if ?b then _ else _] => destruct b eqn:B end; try discriminate.
  injection H as <- <-. apply andb_prop in B as [B B3]. apply andb_prop in B as [B1 B2].
  destruct (rget R0 L1) as [l'|] eqn:E1; try discriminate.
  destruct (rget R0 L2) as [r'|] eqn:E2; try discriminate.
  apply andb_prop in B3 as [B3 B4]. apply Pos.eqb_eq in B3; apply Pos.eqb_eq in B4; subst.
  rewrite forallb_forall in B1, B2.
  assert (PO : forall u v, rget R0 u = Some v -> ren_pair_ok S R0 ren0 u v = true).
  { intros u v Ru. apply (B1 (u, v)). apply PositiveMap.elements_correct; auto. }
  split; [auto|]. split; [auto|]. split.
  { intros u v Ru. specialize (PO u v Ru). unfold ren_pair_ok in PO.
    destruct (input_of (node_at T u)) as [[[n1 d1] D1]|] eqn:I1;
    [destruct (input_of (node_at T v)) as [[[n2 d2] D2]|] eqn:I2|].
    - apply input_of_some in I1; apply input_of_some in I2. rewrite I1, I2; simpl.
      repeat match type of PO with _ && _ = true => apply andb_prop in PO as [PO ?] end; auto.
    - apply struct_dims in PO; auto.
    - apply struct_dims in PO; auto. }
  intros c M. split.
  { apply model_ok_ren; auto. intros n1 n2 E.
    assert (I := PositiveMap.elements_correct _ _ E). specialize (B2 _ I). simpl in B2.
    apply Bool.eqb_prop in B2; auto. }
  destruct M as [W [VC [SZ [F [DO P]]]]].
  apply (rel_sound (ctx_ren ren0 c) c eq_refl eq_refl eq_refl P T W SZ R0
           (fun u v => exists n1 n2 d D1 D2, node_at T u = Node (OInput n1 d) [] D1 /\
                        node_at T v = Node (OInput n2 d) [] D2 /\ dims_eqvb D1 D2 = true /\
                        PositiveMap.find n1 ren0 = Some n2)).
  - intros u v [n1 [n2 [d [D1 [D2 [Eu [Ev [DE Rn]]]]]]]] rho Rr.
    apply functional_extensionality; intro x.
    rewrite (den_node _ T u _ _ _ W Eu), (den_node _ T v _ _ _ W Ev). simpl.
    destruct (dims_eqvb_perm _ _ DE) as [Pp _].
    rewrite <- (msk_perm _ _ _ x Pp), <- (restrict_perm _ _ x Pp).
    destruct (msk _ _ _); auto. unfold core; simpl. unfold env_ren. rewrite Rn; auto.
  - intros u v Ru. specialize (PO u v Ru). unfold ren_pair_ok in PO.
    destruct (input_of (node_at T u)) as [[[n1 d1] D1]|] eqn:I1;
    [destruct (input_of (node_at T v)) as [[[n2 d2] D2]|] eqn:I2|]; [|right; auto|right; auto].
    left. apply input_of_some in I1; apply input_of_some in I2.
    repeat match type of PO with _ && _ = true => apply andb_prop in PO as [PO ?] end.
    destruct (PositiveMap.find n1 ren0) as [n2'|] eqn:Rn; try discriminate.
    beq_to_eq. destruct d1, d2; simpl in *; try discriminate;
      exists n1, n2'; eexists; exists D1, D2; repeat split; eauto.
Qed.

(** ** Substitution (cut steps) *)
Lemma sub_rel_sound : forall K u0 v0 R, sub_rel S K u0 v0 = Some R ->
  rget R u0 = Some v0 /\
  (forall u v, rget R u = Some v ->
     u = v \/ dims_eqvb (ndims (node_at T u)) (ndims (node_at T v)) = true) /\
  forall c1 c2, sz c1 = sz c2 -> po c1 = po c2 -> uf c1 = uf c2 -> po_ok c1 -> wf_table T ->
    sizes_ok (sz c1) T ->
    (forall nm, PositiveMap.find nm (scut S) = None -> env c1 nm = env c2 nm) ->
    (forall u v, rget K u = Some v -> forall rho, rk_ok (sz c1) rho -> den c1 T u rho = den c2 T v rho) ->
    forall u v, rget R u = Some v -> forall rho, rk_ok (sz c1) rho -> den c1 T u rho = den c2 T v rho.
Proof.
  intros K u0 v0 R H. unfold sub_rel in H.
  destruct (rel_walk _ _ _ _) as [R0|]; try discriminate.
  match type of H with context [if ?b then _ else _] => destruct b eqn:B end; try discriminate.
  injection H as <-. apply andb_prop in B as [B1 B2]. rewrite forallb_forall in B1.
  destruct (rget R0 u0) as [v'|] eqn:E0; try discriminate. apply Pos.eqb_eq in B2; subst.
  assert (PO : forall u v, rget R0 u = Some v -> sub_pair_ok S K R0 u v = true).
  { intros u v Ru. apply (B1 (u, v)). apply PositiveMap.elements_correct; auto. }
  split; [auto|]. split.
  { intros u v Ru. specialize (PO u v Ru). unfold sub_pair_ok in PO.
    apply orb_prop in PO as [PO|PO]; [apply orb_prop in PO as [PO|PO]|].
    - apply andb_prop in PO as [PO _]. apply Pos.eqb_eq in PO; auto.
    - apply andb_prop in PO as [_ PO]; auto.
    - right; apply struct_dims in PO; auto. }
  intros c1 c2 Hs Hp Hu P1 W SZ Henv HK.
  apply (rel_sound c1 c2 Hs Hp Hu P1 T W SZ R0
           (fun u v => (u = v /\ cfget (scf S) u = true) \/ rget K u = Some v)).
  - intros u v [[<- C]|Kuv] rho Rr.
    + rewrite (cf_sound c1 c2 Hs Hp Hu T W (scut S) (scf S) CF Henv u C); auto.
    + apply HK; auto.
  - intros u v Ru. specialize (PO u v Ru). unfold sub_pair_ok in PO.
    apply orb_prop in PO as [PO|PO]; [apply orb_prop in PO as [PO|PO]|].
    + left; left. apply andb_prop in PO as [PO C]. apply Pos.eqb_eq in PO; auto.
    + left; right. apply andb_prop in PO as [PO _].
      destruct (rget K u) as [w|]; try discriminate. apply Pos.eqb_eq in PO; subst; auto.
    + right; auto.
Qed.

Lemma keys_In : forall f g cps u v, rget (keys f g cps) u = Some v ->
  exists cp, In cp cps /\ f cp = u /\ g cp = v.
Proof.
  intros f g cps u v. unfold keys.
  assert (G' : forall m, rget (fold_left (fun m cp => PositiveMap.add (f cp) (g cp) m) cps m) u = Some v ->
             (exists cp, In cp cps /\ f cp = u /\ g cp = v) \/ rget m u = Some v).
  { induction cps as [|cp cps IH]; intros m H; simpl in *; auto.
    destruct (IH _ H) as [[cp' [I E]]|E]; [left; eauto|].
    unfold rget in E. destruct (Pos.eq_dec (f cp) u) as [<-|Ne].
    - rewrite PositiveMap.gss in E. injection E as <-. left; eauto.
    - rewrite PositiveMap.gso in E by auto. right; auto. }
  intros H. destruct (G' _ H) as [X|X]; auto. unfold rget in X. rewrite PositiveMap.gempty in X.
  discriminate.
Qed.

Fixpoint var_spec (cps : list cutpt) (nm : name) : option positive :=
  match cps with
  | [] => None
  | cp :: r => match var_name S (cp_var cp) with
               | Some n => if Pos.eqb n nm then Some (cp_spec cp) else var_spec r nm
               | None => var_spec r nm
               end
  end.

Definition rho0 : Rk := fun _ => 0%nat.

Definition ctx_cut (c : ctx) (cps : list cutpt) : ctx :=
  Ctx (sz c) (fun nm => match var_spec cps nm with
                        | Some s => fun x => den c T s rho0 x
                        | None => env c nm end) (po c) (uf c).

Lemma var_name_ok : forall x nm, var_name S x = Some nm ->
  (exists D, node_at T x = Node (OInput nm DReal) [] D) /\
  PositiveMap.find nm (scut S) <> None /\ PositiveMap.find nm (gpos G) = None.
Proof.
  intros x nm H. unfold var_name in H. destruct (node_at T x) as [o xs D] eqn:E.
  destruct o; try discriminate. destruct d; try discriminate. destruct xs; try discriminate.
  destruct (PositiveMap.find nm0 (scut S)) eqn:C; try discriminate.
  destruct (PositiveMap.find nm0 (gpos G)) eqn:Pz; try discriminate. injection H as <-.
  split; [eauto|]. split; [congruence|auto].
Qed.

Lemma var_spec_cut : forall cps nm s, var_spec cps nm = Some s -> PositiveMap.find nm (scut S) <> None /\
  PositiveMap.find nm (gpos G) = None.
Proof.
  induction cps as [|cp cps IH]; intros nm s H; simpl in H; try discriminate.
  destruct (var_name S (cp_var cp)) as [n|] eqn:E; eauto.
  destruct (Pos.eqb_spec n nm); subst; eauto. apply var_name_ok in E as [_ E]; auto.
Qed.

Lemma var_spec_unique : forall cps cp nm, In cp cps -> var_name S (cp_var cp) = Some nm ->
  NoDup (map (fun cp => match var_name S (cp_var cp) with Some n => n | None => 1%positive end) cps) ->
  var_spec cps nm = Some (cp_spec cp).
Proof.
  induction cps as [|cp0 cps IH]; intros cp nm I V ND; simpl in *; [contradiction|].
  inversion ND as [|? ? NI ND']; subst.
  destruct I as [<-|I].
  - rewrite V, Pos.eqb_refl; auto.
  - destruct (var_name S (cp_var cp0)) as [n|] eqn:E.
    + destruct (Pos.eqb_spec n nm); subst; [|eauto].
      exfalso. apply NI. apply in_map_iff. exists cp; split; auto. rewrite V; auto.
    + eauto.
Qed.

Lemma model_ok_cut : forall c cps, model_ok G c -> model_ok G (ctx_cut c cps).
Proof.
  intros c cps [W [VC [SZ [F [DO P]]]]].
  split; [auto|]. split; [auto|]. split; [auto|]. split; [auto|]. split; [|auto].
  intros nm Hp x. simpl. destruct (var_spec cps nm) as [s|] eqn:E.
  - apply var_spec_cut in E as [_ E]. congruence.
  - apply DO; auto.
Qed.

Lemma xfer_all_In : forall f l l', xfer_all f l = Some l' ->
  forall k, In k l -> exists k', f k = Some k' /\ In k' l'.
Proof.
  induction l as [|k0 l IH]; intros l' H k I; simpl in *; [contradiction|].
  destruct (f k0) as [k0'|] eqn:E0; try discriminate.
  destruct (xfer_all f l) as [r|] eqn:Er; try discriminate. injection H as <-.
  destruct I as [<-|I]; [exists k0'; simpl; auto|].
  destruct (IH r eq_refl k I) as [k' [E I']]. exists k'; simpl; auto.
Qed.

Lemma inv_find_ok : forall R z u, inv_find R z = Some u -> rget R u = Some z.
Proof.
  intros R z u H. unfold inv_find in H.
  destruct (find (fun p => Pos.eqb (snd p) z) (PositiveMap.elements R)) as [[u' z']|] eqn:E;
    try discriminate. injection H as <-. apply find_some in E as [I B]. simpl in B.
  apply Pos.eqb_eq in B; subst. apply PositiveMap.elements_complete; auto.
Qed.

(** A claim transferred between two contexts along a map of nodes meaning the same. *)
Lemma xfer_claims : forall c1 c2 (f : positive -> option positive) (l l' : list claim),
  sz c1 = sz c2 ->
  (forall z u, f z = Some u -> (forall rho, rk_ok (sz c1) rho -> den c1 T z rho = den c2 T u rho) /\
     (z = u \/ dims_eqvb (ndims (node_at T z)) (ndims (node_at T u)) = true \/
      dims_eqvb (ndims (node_at T u)) (ndims (node_at T z)) = true)) ->
  xfer_all (fun k => match k with
                     | CNZ z => option_map CNZ (f z)
                     | CNN z => option_map CNN (f z)
                     | CEq a b => match f a, f b with Some a', Some b' => Some (CEq a' b') | _, _ => None end
                     end) l = Some l' ->
  (forall k, In k l' -> holds c2 T k) -> forall k, In k l -> holds c1 T k.
Proof.
  intros c1 c2 f l l' Hs Hf X H k I.
  destruct (xfer_all_In _ _ _ X k I) as [k' [E I']]. specialize (H k' I').
  destruct k as [z|z|a b]; simpl in E.
  - destruct (f z) as [u|] eqn:Ez; try discriminate. injection E as <-.
    destruct (Hf z u Ez) as [D Dm]. apply (proj1 (holds_transfer c1 c2 T z u Hs D Dm)); auto.
  - destruct (f z) as [u|] eqn:Ez; try discriminate. injection E as <-.
    destruct (Hf z u Ez) as [D Dm]. apply (proj2 (holds_transfer c1 c2 T z u Hs D Dm)); auto.
  - destruct (f a) as [a'|] eqn:Ea; try discriminate.
    destruct (f b) as [b'|] eqn:Eb; try discriminate. injection E as <-.
    destruct (Hf a a' Ea) as [Da _]. destruct (Hf b b' Eb) as [Db _].
    simpl in *. intros rho R x. rewrite Hs in R.
    rewrite (equal_f (Da rho ltac:(rewrite Hs; auto)) x), (equal_f (Db rho ltac:(rewrite Hs; auto)) x).
    apply H; auto.
Qed.

Lemma cut_points_ok_sound : forall rs K1 cps gP, cut_points_ok S rs K1 cps = Some gP ->
  forall cp, In cp cps ->
   (exists nm, var_name S (cp_var cp) = Some nm) /\
   cfget (scf S) (cp_spec cp) = true /\ vget (gvt G) (cp_spec cp) = [] /\
   dims_eqvb (ndims (node_at T (cp_spec cp))) (ndims (node_at T (cp_var cp))) = true /\
   exists i g R3, get_res rs (cp_prem cp) = Some (i, cp_plan cp, g) /\
                  (forall k, In k g -> In k gP) /\ sub_rel S K1 i (cp_embed cp) = Some R3.
Proof.
  induction cps as [|cp0 cps IH]; intros gP H cp I; simpl in *; [contradiction|].
  destruct (cut_point_ok S rs K1 cp0) as [g0|] eqn:E0; try discriminate.
  destruct (cut_points_ok S rs K1 cps) as [g1|] eqn:E1; try discriminate. injection H as <-.
  destruct I as [<-|I].
  - unfold cut_point_ok in E0.
    destruct (var_name S (cp_var cp0)) as [nm|] eqn:V; try discriminate.
    destruct (get_res rs (cp_prem cp0)) as [[[i p] g]|] eqn:Gp; try discriminate.
    match type of E0 with context [if ?b then _ else _] => destruct b eqn:B end; try discriminate.
    destruct (sub_rel S K1 i (cp_embed cp0)) as [R3|] eqn:Sr; try discriminate.
    injection E0 as <-.
    repeat match type of B with _ && _ = true => apply andb_prop in B as [B ?] end.
    apply Pos.eqb_eq in B; subst.
    split; [eauto|]. split; [auto|]. split; [destruct (vget _ _); auto; discriminate|].
    split; [auto|]. exists i, g, R3. split; auto. split; auto. intros; apply add_claims_l; auto.
  - destruct (IH g1 eq_refl cp I) as [A [B [C [D [i [g [R3 [E [F X]]]]]]]]].
    repeat split; eauto. exists i, g, R3. repeat split; auto. intros; apply add_claims_r; auto.
Qed.

Lemma cut_res_sound : forall rs l r k cps res, res_ok rs -> cut_res S rs l r k cps = Some res ->
  forall c, model_ok G c -> (forall kk, In kk (snd res) -> holds c T kk) ->
  eqv c T (fst (fst res)) (snd (fst res)).
Proof.
  intros rs l r k cps res RS H c M Hk. unfold cut_res in H.
  destruct (get_res rs k) as [[[L1 L2] gL]|] eqn:Gk; try discriminate.
  set (K1 := keys cp_spec cp_var cps) in *. set (K2 := keys cp_plan cp_embed cps) in *.
  match type of H with context [if ?b then _ else _] => destruct b eqn:B end; try discriminate.
  destruct (cut_points_ok S rs K1 cps) as [gP|] eqn:CP; try discriminate.
  destruct (sub_rel S K1 l L1) as [R1|] eqn:S1; try discriminate.
  destruct (sub_rel S K2 r L2) as [R2|] eqn:S2; try discriminate.
  destruct (xfer_all (xfer_back S R1 R2) gL) as [gL'|] eqn:X;
    [|injection H as <-; exact (Hk (CEq l r) (or_introl eq_refl))].
  injection H as <-. simpl in *.
  repeat match type of B with _ && _ = true => apply andb_prop in B as [B ?] end.
  rename H into ND.
  apply nodup_posb_ok in ND.
  assert (HkL : forall kk, In kk gL' -> holds c T kk) by (intros; apply Hk, add_claims_l; auto).
  assert (HkP : forall kk, In kk gP -> holds c T kk) by (intros; apply Hk, add_claims_r; auto).
  set (c' := ctx_cut c cps).
  assert (M' : model_ok G c') by (apply model_ok_cut; auto).
  pose proof M as M0. destruct M as [W [VC [SZ [F [DO P]]]]].
  assert (Henv : forall nm, PositiveMap.find nm (scut S) = None -> env c nm = env c' nm).
  { intros nm Hn. simpl. destruct (var_spec cps nm) as [s|] eqn:E; auto.
    apply var_spec_cut in E as [E _]. congruence. }
  assert (HK1 : forall u v, rget K1 u = Some v -> forall rho, rk_ok (sz c) rho ->
                  den c T u rho = den c' T v rho).
  { intros u v Kuv rho Rr. apply keys_In in Kuv as [cp [I [<- <-]]].
    destruct (cut_points_ok_sound rs K1 cps gP CP cp I) as [[nm V] [Cs [Vs [Ds _]]]].
    destruct (var_name_ok _ _ V) as [[Dx Ex] _].
    assert (VS : var_spec cps nm = Some (cp_spec cp)) by (apply var_spec_unique; auto).
    apply functional_extensionality; intro x.
    rewrite (den_node c' T _ _ _ _ W Ex). unfold core at 1; simpl. rewrite VS.
    rewrite Ex in Ds; simpl in Ds.
    rewrite <- (den_wrap c T W (cp_spec cp) Dx Ds rho x).
    destruct (msk _ _ _); auto.
    pose proof (vary_sound c T W P (gvt G) VC (cp_spec cp)) as DV. rewrite Vs in DV.
    rewrite (DV rho0 rho) by (intros a []). reflexivity. }
  assert (SR1 := sub_rel_sound K1 l L1 R1 S1).
  destruct SR1 as [R1l [R1d R1s]].
  specialize (R1s c c' eq_refl eq_refl eq_refl P W SZ Henv HK1).
  assert (HK2 : forall u v, rget K2 u = Some v -> forall rho, rk_ok (sz c) rho ->
                  den c T u rho = den c' T v rho).
  { intros u v Kuv rho Rr. apply keys_In in Kuv as [cp [I [<- <-]]].
    destruct (cut_points_ok_sound rs K1 cps gP CP cp I) as [_ [_ [_ [_ [i [g [R3 [Gp [Inc S3]]]]]]]]].
    destruct (sub_rel_sound K1 i (cp_embed cp) R3 S3) as [R3i [_ R3s]].
    specialize (R3s c c' eq_refl eq_refl eq_refl P W SZ Henv HK1).
    rewrite <- (R3s i (cp_embed cp) R3i rho Rr).
    symmetry. apply eqv_fun; auto. apply (RS _ _ _ _ Gp c M0).
    intros; apply HkP, Inc; auto. }
  destruct (sub_rel_sound K2 r L2 R2 S2) as [R2r [R2d R2s]].
  specialize (R2s c c' eq_refl eq_refl eq_refl P W SZ Henv HK2).
  assert (Lm : eqv c' T L1 L2).
  { apply (RS k L1 L2 gL Gk c' M').
    apply (xfer_claims c' c (back S R1 R2) gL gL' eq_refl); auto.
    intros z u Bz. unfold back in Bz.
    destruct (cfget (scf S) z) eqn:Cz.
    - injection Bz as <-. split; [|auto]. intros rho Rr. symmetry.
      rewrite (cf_sound c c' eq_refl eq_refl eq_refl T W (scut S) (scf S) CF Henv z Cz); auto.
    - destruct (inv_find R1 z) as [u1|] eqn:I1.
      + injection Bz as <-. apply inv_find_ok in I1. split.
        * intros rho Rr. symmetry. apply R1s; auto.
        * destruct (R1d _ _ I1) as [E|E]; auto.
      + apply inv_find_ok in Bz. split.
        * intros rho Rr. symmetry. apply R2s; auto.
        * destruct (R2d _ _ Bz) as [E|E]; auto. }
  intros rho Rr x.
  rewrite (equal_f (R1s l L1 R1l rho Rr) x), (equal_f (R2s r L2 R2r rho Rr) x). apply Lm; auto.
Qed.

Lemma rename_res_sound : forall rs l r k res, res_ok rs -> rename_res S rs l r k = Some res ->
  forall c, model_ok G c -> (forall kk, In kk (snd res) -> holds c T kk) ->
  eqv c T (fst (fst res)) (snd (fst res)).
Proof.
  intros rs l r k res RS H c M Hk. unfold rename_res in H.
  destruct (get_res rs k) as [[[L1 L2] g]|] eqn:Gk; try discriminate.
  destruct (rename_rel S L1 L2 l r) as [[R ren]|] eqn:RR; try discriminate.
  destruct (xfer_all (xfer R) g) as [g'|] eqn:X;
    [|injection H as <-; exact (Hk (CEq l r) (or_introl eq_refl))].
  injection H as <-. simpl in *.
  destruct (rename_rel_sound L1 L2 l r R ren RR) as [E1 [E2 [Dm F]]].
  destruct (F c M) as [M' Rs].
  assert (Lm : eqv (ctx_ren ren c) T L1 L2).
  { apply (RS k L1 L2 g Gk _ M').
    apply (xfer_claims (ctx_ren ren c) c (rget R) g g' eq_refl); auto.
    all: try (intros z u Ez; split; [intros; apply Rs; auto| right; left; apply Dm; auto]). }
  intros rho Rr x.
  rewrite <- (equal_f (Rs L1 l E1 rho Rr) x), <- (equal_f (Rs L2 r E2 rho Rr) x). apply Lm; auto.
Qed.

Theorem check_step_sound : forall rs st res, res_ok rs -> check_step S rs st = Some res ->
  forall c, model_ok G c -> (forall kk, In kk (snd res) -> holds c T kk) ->
  eqv c T (fst (fst res)) (snd (fst res)).
Proof.
  intros rs st res RS H c M Hk. destruct st; simpl in H.
  - injection H as <-. intros rho R x; auto.
  - destruct (rule_chk t G l r h) as [cl|] eqn:E; try discriminate. injection H as <-.
    apply (rule_chk_sound t G l r h cl E c M Hk).
  - match type of H with context [if ?b then _ else _] => destruct b eqn:B end; try discriminate.
    apply andb_prop in B as [B1 B2].
    destruct (congr_args S rs _ _ args) as [cl|] eqn:E; try discriminate. injection H as <-.
    apply (congr_sound rs l r args cl RS B1 B2 E c M Hk).
  - destruct chain as [|k0 chain']; try discriminate.
    destruct (trans_chain rs l (k0 :: chain')) as [[e g]|] eqn:E; try discriminate.
    destruct (Pos.eqb_spec e r); try discriminate. injection H as <-. subst.
    apply (trans_chain_sound rs RS _ _ _ _ E c M Hk).
  - destruct (get_res rs of) as [[[a b] g]|] eqn:E; try discriminate.
    destruct (Pos.eqb a r && Pos.eqb b l) eqn:B; try discriminate. injection H as <-.
    apply andb_prop in B as [B1 B2]. apply Pos.eqb_eq in B1; apply Pos.eqb_eq in B2; subst.
    apply eqv_sym. apply (RS of r l g E c M Hk).
  - apply (rename_res_sound rs l r of res RS H c M Hk).
  - apply (cut_res_sound rs l r lemma cuts res RS H c M Hk).
  - injection H as <-. simpl in *. apply (Hk (CEq l r)); auto.
Qed.

End Sound.
