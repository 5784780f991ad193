(** * Term: the certificate's term language and its meaning (docs/verifier-internals.md s.1).

    A term is a node of a hash-consed table: an op (with its attributes), children (ids of
    earlier nodes) and dims (named, each with the mesh axes or chunk markers that shard it,
    outermost first). Its meaning [den c T i] is, for every rank [rho] (a coordinate per mesh
    axis) and index [iota] (a position per dim name), a real number: a tensor over the node's
    *local* index space, symbolic in the rank. Sizes are the context's [sz], symbolic: every
    theorem quantifies over them (with the divisibility facts it needs, [sizes_ok]).

    Out of range (an index beyond a dim's local size) a node's value is 0, and a node reads
    the index only at its own dims ([restrict]); so two nodes with the same dims are equal when
    they agree in range, and equal children give equal parents (congruence) without further
    conditions. *)

From Coq Require Import Reals Lra Lia List QArith Qreals ZArith PArith NArith Bool.
From Coq Require Import FSets.FMapPositive FunctionalExtensionality.
From Shardproof Require Import Base Num Pow.
Import ListNotations.
Open Scope R_scope.

Inductive shard := SAx (a : name) | SCh (i p : N).
Definition dimspec := (name * list shard)%type.

Inductive red := RSum | RMax.
Inductive dom := DReal | DPos | DMask | DIndex.
Inductive uop := UNeg | URecip | UExp | ULog | USqrt | URsqrt | USigmoid | USilu | UTanh
               | UGelu | UCast | UStop | UErf.

Inductive op :=
| OInput (nm : name) (d : dom)
| OConst (c : num)
| ODimSize (d : name)
| OAxisSize (a : name)
| ORankConst (a : name) (vs : list num)
| OCausal (q k : name)
| ORope (is_sin : bool) (s h : name) (theta : Q)
| OAdd | OMul | OUn (u : uop) | OPow (e : Q) | OMaximum | OWhere
| OEinsum (out : list name)
| OReduceMax (ds : list name)
| OOneHot (v : name)
| OTopk (e : name) (k : N)
| ORename (old new : name)
| OChunk (d : name) (parts i : N)
| OConcat (d : name)
| OPermute (d : name) (o : list N)
| OShift (d : name)
| OShard (d a : name)
| OPart (a : name)
| OAllReduce (a : name) (r : red)
| OAllGather (a d : name)
| OReduceScatter (a d : name)
| OBroadcast (a : name) (src : N)
| OAllToAll (a s c : name).

Record node := Node { nop : op; nargs : list positive; ndims : list dimspec }.
Definition table := PositiveMap.t node.

Definition dflt_node := Node (OConst []) [] [].
Definition node_at (T : table) (i : positive) : node :=
  match PositiveMap.find i T with Some nd => nd | None => dflt_node end.

(** ** Sizes *)
Definition kof (sz : name -> nat) (s : shard) : nat :=
  match s with SAx a => sz a | SCh _ p => N.to_nat p end.
Definition offs (rho : Rk) (s : shard) : nat :=
  match s with SAx a => rho a | SCh i _ => N.to_nat i end.

(** local size of a dim of full size [n] after the shards [sh] (outermost first) *)
Definition lsz (sz : name -> nat) (n : nat) (sh : list shard) : nat :=
  fold_left (fun m s => (m / kof sz s)%nat) sh n.
Definition lsize (sz : name -> nat) (d : dimspec) : nat := lsz sz (sz (fst d)) (snd d).

Fixpoint spec_of (D : list dimspec) (n : name) : option (list shard) :=
  match D with [] => None | (m, sh) :: D' => if Pos.eqb m n then Some sh else spec_of D' n end.

Definition lsize_of (sz : name -> nat) (D : list dimspec) (n : name) : nat :=
  match spec_of D n with Some sh => lsz sz (sz n) sh | None => 0%nat end.

(** global position of local position [j] of a dim of full size [n] sharded by [sh] *)
Fixpoint gpos (sz : name -> nat) (rho : Rk) (n : nat) (sh : list shard) (j : nat) : nat :=
  match sh with
  | [] => j
  | s :: r => (offs rho s * (n / kof sz s) + gpos sz rho (n / kof sz s) r j)%nat
  end.

Definition msk (sz : name -> nat) (D : list dimspec) (i : Ix) : bool :=
  forallb (fun d => Nat.ltb (i (fst d)) (lsize sz d)) D.

Definition has_name (D : list dimspec) (n : name) : bool := existsb (fun d => Pos.eqb (fst d) n) D.

Definition restrict (D : list dimspec) (i : Ix) : Ix := fun n => if has_name D n then i n else 0%nat.

(** ** The context a theorem quantifies over *)
Definition V := Rk -> Ix -> R.

Record ctx := Ctx {
  sz : name -> nat;                 (* sizes of dims and mesh axes *)
  env : name -> Ix -> R;            (* the inputs, by name, over their local index *)
  po : name -> V -> V;              (* PART: a rank's addend of a value over an axis *)
  uf : uop -> R -> R                (* LOG, SIGMOID, TANH, ERF: any functions *)
}.

Definition uval (c : ctx) (u : uop) (x : R) : R :=
  match u with
  | UNeg => - x | URecip => / x | UExp => exp x | USqrt => sqrt x | URsqrt => / sqrt x
  | UCast | UStop => x
  | USilu => x * uf c USigmoid x          (* SILU(x) = x SIGMOID(x), its definition *)
  | UGelu => x / 2 * (1 + uf c UErf (x / sqrt 2))   (* the exact GELU, its definition *)
  | _ => uf c u x
  end.

Definition vat (vs : list V) (k : nat) : V := nth k vs (fun _ _ => 0).
Definition prodl (l : list R) : R := fold_right Rmult 1 l.
Definition suml (l : list R) : R := fold_right Rplus 0 l.

Definition Rbeq (x y : R) : bool := if Req_EM_T x y then true else false.
Definition Rltb (x y : R) : bool := if Rlt_dec x y then true else false.

Fixpoint count (n : nat) (p : nat -> bool) : nat :=
  match n with O => O | S k => (count k p + if p k then 1 else 0)%nat end.

(** Top-k along [e] (ties to the lower index), among eligible entries when [el] is given. *)
Definition topk (L k : nat) (e : name) (x : V) (el : option V) (rho : Rk) (i : Ix) : R :=
  let xv j := x rho (upd i e j) in
  let me := i e in
  let ok j := match el with None => true | Some w => Rbeq (w rho (upd i e j)) 1 end in
  if ok me then
    if Nat.ltb (count L (fun j => ok j && (Rltb (xv me) (xv j) ||
                                         (Rbeq (xv j) (xv me) && Nat.ltb j me)))) k
    then 1 else 0
  else 0.

Fixpoint concat_at (bl : list (V * nat)) (d : name) (rho : Rk) (i : Ix) (j : nat) : R :=
  match bl with
  | [] => 0
  | (v, L) :: bl' => if Nat.ltb j L then v rho (upd i d j) else concat_at bl' d rho i (j - L)%nat
  end.

Fixpoint nodup_pos (l : list name) (seen : list name) : list name :=
  match l with
  | [] => []
  | n :: l' => if existsb (Pos.eqb n) seen then nodup_pos l' seen else n :: nodup_pos l' (n :: seen)
  end.

(** the spec of dim [n] in the first operand that has it *)
Fixpoint first_spec (T : table) (xs : list positive) (n : name) : option (list shard) :=
  match xs with
  | [] => None
  | x :: r => match spec_of (ndims (node_at T x)) n with Some sh => Some sh | None => first_spec T r n end
  end.

(** The dims an einsum sums over: its operands' dims not in [out], with their local sizes. *)
Definition contracted (sz : name -> nat) (T : table) (xs : list positive) (out : list name)
  : list (name * nat) :=
  map (fun n => (n, match first_spec T xs n with Some sh => lsz sz (sz n) sh | None => 0%nat end))
      (filter (fun n => negb (existsb (Pos.eqb n) out))
              (nodup_pos (flat_map (fun x => map fst (ndims (node_at T x))) xs) [])).

Definition core (c : ctx) (T : table) (o : op) (xs : list positive) (D : list dimspec)
  (vs : list V) : V :=
  fun rho i =>
  let s := sz c in
  match o with
  | OInput nm _ => env c nm i
  | OConst k => num_val k
  | ODimSize d => INR (s d)
  | OAxisSize a => INR (s a)
  | ORankConst a l => nth (rho a) (map num_val l) (match l with [] => 0 | v :: _ => num_val v end)
  | OCausal q k => if Nat.leb (i k) (i q) then 1 else 0
  | ORope sn sd h th =>
      let ang := INR (i sd) * Rpower (Q2R th) (- (INR (i h) / INR (lsize_of s D h))) in
      if sn then sin ang else cos ang
  | OAdd => suml (map (fun v => v rho i) vs)
  | OMul => prodl (map (fun v => v rho i) vs)
  | OUn u => uval c u (vat vs 0 rho i)
  | OPow e => rpow (vat vs 0 rho i) e
  | OMaximum => Rmax (vat vs 0 rho i) (vat vs 1 rho i)
  | OWhere => if Rbeq (vat vs 0 rho i) 0 then vat vs 2 rho i else vat vs 1 rho i
  | OEinsum out => sumover (contracted s T xs out) (fun j => prodl (map (fun v => v rho j) vs)) i
  | OReduceMax ds =>
      let cd := match xs with x :: _ => ndims (node_at T x) | [] => [] end in
      maxover (map (fun d => (d, lsize_of s cd d)) ds) (fun j => vat vs 0 rho j) i
  | OOneHot v =>
      let sh := match spec_of D v with Some sh => sh | None => [] end in
      if Rbeq (vat vs 0 rho i) (INR (gpos s rho (s v) sh (i v))) then 1 else 0
  | OTopk e k =>
      topk (lsize_of s D e) (N.to_nat k) e (vat vs 0)
           (match vs with [_; w] => Some w | _ => None end) rho i
  | ORename old new => vat vs 0 rho (upd i old (i new))
  | OChunk d _ k => vat vs 0 rho (upd i d (N.to_nat k * lsize_of s D d + i d)%nat)
  | OConcat d =>
      concat_at (combine vs (map (fun x => lsize_of s (ndims (node_at T x)) d) xs)) d rho i (i d)
  | OPermute d o =>
      let B := (lsize_of s D d / length o)%nat in
      vat vs 0 rho (upd i d (N.to_nat (nth (i d / B) o 0%N) * B + i d mod B)%nat)
  | OShift d => if Nat.ltb (S (i d)) (lsize_of s D d) then vat vs 0 rho (upd i d (S (i d))) else 0
  | OShard d a => vat vs 0 rho (upd i d (rho a * lsize_of s D d + i d)%nat)
  | OPart a => po c a (vat vs 0) rho i
  | OAllReduce a RSum => rsum (s a) (fun r => vat vs 0 (upd rho a r) i)
  | OAllReduce a RMax => rmaxs (s a) (fun r => vat vs 0 (upd rho a r) i)
  | OAllGather a d =>
      let L := lsz s (s d) ((match spec_of D d with Some sh => sh | None => [] end) ++ [SAx a]) in
      vat vs 0 (upd rho a (i d / L)%nat) (upd i d (i d mod L)%nat)
  | OReduceScatter a d =>
      rsum (s a) (fun r => vat vs 0 (upd rho a r) (upd i d (rho a * lsize_of s D d + i d)%nat))
  | OBroadcast a src => vat vs 0 (upd rho a (N.to_nat src)) i
  | OAllToAll a sd cd =>
      let Lc := lsz s (s cd) ((match spec_of D cd with Some sh => sh | None => [] end) ++ [SAx a]) in
      vat vs 0 (upd rho a (i cd / Lc)%nat)
          (upd (upd i sd (rho a * lsize_of s D sd + i sd)%nat) cd (i cd mod Lc)%nat)
  end.

Fixpoint den_f (c : ctx) (T : table) (fuel : nat) (i : positive) : V :=
  match fuel with
  | O => fun _ _ => 0
  | S f =>
      let nd := node_at T i in
      fun rho j => if msk (sz c) (ndims nd) j
                   then core c T (nop nd) (nargs nd) (ndims nd) (map (den_f c T f) (nargs nd))
                             rho (restrict (ndims nd) j)
                   else 0
  end.

(** The meaning of node [i] of table [T] in context [c]. *)
Definition den (c : ctx) (T : table) (i : positive) : V := den_f c T (Pos.to_nat i) i.

(** ** Well-formed tables: children precede parents *)
Definition wf_table (T : table) : Prop :=
  forall i nd, PositiveMap.find i T = Some nd -> Forall (fun j => (j < i)%positive) (nargs nd).

Definition wf_tableb (T : table) : bool :=
  forallb (fun p => forallb (fun j => Pos.ltb j (fst p)) (nargs (snd p))) (PositiveMap.elements T).

Lemma wf_tableb_ok : forall T, wf_tableb T = true -> wf_table T.
Proof.
  intros T H i nd F. apply PositiveMap.elements_correct in F.
  unfold wf_tableb in H. rewrite forallb_forall in H. apply H in F. simpl in F.
  rewrite Forall_forall. intros j Hj. rewrite forallb_forall in F. apply F in Hj.
  apply Pos.ltb_lt; auto.
Qed.

Lemma node_args_lt : forall T i, wf_table T ->
  Forall (fun j => (j < i)%positive) (nargs (node_at T i)).
Proof.
  intros. unfold node_at. destruct (PositiveMap.find i T) eqn:F.
  - eapply H; eauto.
  - simpl; auto.
Qed.

Lemma den_f_fuel : forall c T, wf_table T -> forall i f,
  (Pos.to_nat i <= f)%nat -> den_f c T f i = den c T i.
Proof.
  intros c T W i. unfold den.
  induction i as [i IH] using (well_founded_ind (Wf_nat.well_founded_ltof _ Pos.to_nat));
    intros f Hf.
  destruct f; [lia|]. remember (Pos.to_nat i) as n. destruct n; [lia|].
  simpl. apply functional_extensionality; intro rho. apply functional_extensionality; intro j.
  destruct (msk _ _ _); auto. f_equal. apply map_ext_in. intros a Ha.
  pose proof (node_args_lt T i W) as L. rewrite Forall_forall in L. specialize (L a Ha).
  assert (L' : Wf_nat.ltof _ Pos.to_nat a i) by (unfold Wf_nat.ltof; apply Pos2Nat.inj_lt; auto).
  pose proof (Pos2Nat.inj_lt a i) as E. apply E in L.
  rewrite (IH a L' f) by lia. rewrite (IH a L' n) by lia. auto.
Qed.

(** Unfolding: a node's meaning from its children's. *)
Lemma den_unfold : forall c T i, wf_table T ->
  den c T i = fun rho j =>
    let nd := node_at T i in
    if msk (sz c) (ndims nd) j
    then core c T (nop nd) (nargs nd) (ndims nd) (map (den c T) (nargs nd)) rho
              (restrict (ndims nd) j)
    else 0.
Proof.
  intros c T i W. unfold den at 1. remember (Pos.to_nat i) as n.
  destruct n; [lia|]. simpl.
  apply functional_extensionality; intro rho. apply functional_extensionality; intro j.
  destruct (msk _ _ _); auto. f_equal. apply map_ext_in. intros a Ha.
  pose proof (node_args_lt T i W) as L. rewrite Forall_forall in L. specialize (L a Ha).
  apply den_f_fuel; auto. apply Pos2Nat.inj_lt in L. lia.
Qed.

(** ** The facts a theorem assumes of its context *)
Definition rk_ok (s : name -> nat) (rho : Rk) := forall a, (rho a < s a)%nat.

(** node [i] equals node [j] on every rank in range and every index *)
Definition eqv (c : ctx) (T : table) (i j : positive) : Prop :=
  forall rho, rk_ok (sz c) rho -> forall x, den c T i rho x = den c T j rho x.

Definition dep_only (S : list name) (v : V) : Prop :=
  forall rho rho', (forall a, In a S -> rho a = rho' a) -> v rho = v rho'.

(** What is known of a Partial tensor's addends: they vary over the axis at most beside what
    the value varies over, they sum to the value, and they are determined by the value (on
    the ranks in range). [po_witness] below shows such addends exist. *)
Definition po_ok (c : ctx) : Prop :=
  (forall a S v, dep_only S v -> dep_only (a :: S) (po c a v)) /\
  (forall a v, (forall rho r, v (upd rho a r) = v rho) ->
     forall rho x, rsum (sz c a) (fun r => po c a v (upd rho a r) x) = v rho x) /\
  (forall a v v', (forall rho, rk_ok (sz c) rho -> v rho = v' rho) ->
     forall rho, rk_ok (sz c) rho -> po c a v rho = po c a v' rho).

(** The whole value on coordinate 0, nothing elsewhere. *)
Definition po_witness : name -> V -> V := fun a v rho x => if Nat.eqb (rho a) 0 then v rho x else 0.

Lemma rsum_first : forall n f, (n > 0)%nat -> (forall k, (0 < k < n)%nat -> f k = 0) -> rsum n f = f O.
Proof.
  induction n; intros f Hn H; [lia|]. destruct n. { simpl; ring. }
  change (rsum (S (S n)) f) with (rsum (S n) f + f (S n)). rewrite (H (S n)) by lia.
  rewrite IHn; [ring|lia|]. intros k Hk; apply H; lia.
Qed.

Lemma po_witness_ok : forall s env uf, (forall n, (1 <= s n)%nat) -> po_ok (Ctx s env po_witness uf).
Proof.
  intros s env uf Hs. split; [|split].
  - intros a S v D rho rho' H. apply functional_extensionality; intro x. simpl.
    unfold po_witness. rewrite (H a) by (simpl; auto). rewrite (D rho rho'); auto.
    intros b Hb; apply H; simpl; auto.
  - intros a v I rho x. simpl. unfold po_witness. rewrite rsum_first.
    + rewrite upd_same. simpl. rewrite I; auto.
    + specialize (Hs a); lia.
    + intros k Hk. rewrite upd_same. destruct k; [lia|]. simpl; auto.
  - intros a v v' H rho R. simpl. unfold po_witness. rewrite H; auto.
Qed.
