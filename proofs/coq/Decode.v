(** * Decode: an exported certificate is a list of primitive 63-bit integers.

    Coq parses a few thousand large integer literals far faster than the same data as
    constructor terms (docs/coq.md "Exported file"), so [proofs/coq_export.py] writes the
    certificate as a stream of unsigned variable-length numbers, 6-bit chunks (a continuation
    bit and 5 data bits, low bits first), 10 chunks per integer, and [decode] reads it back.
    The decoded [cert] is what the exported theorem is about; [cert_fingerprint] lets the
    exporter compare it with the certificate it started from. Layout (every count first):

    facts: (name, value)*; cut names: name*; dims lists: ((name, (shard)* )* )*;
    nodes: (opcode, attributes, children, dims-list index)*; steps: (tag, fields)*;
    obligations: (expected, actual, 0 | 1, step)*.

    Names, node ids and step ids are positive numbers written as [n - 1].

    Cost (docs/coq.md "Coverage and cost"): the reader works in primitive integers up to 55
    bits ([vfast]; longer constants go on in [N]), and lists are reversed with [rev'] (the
    stdlib's [rev] is quadratic: it made decoding the 405B's 194 342 nodes take minutes). *)

From Coq Require Import List ZArith NArith PArith QArith Uint63 FSets.FMapPositive.
From Shardproof Require Import Base Num Term RuleLib Rules Steps Cert.
Import ListNotations.

Record rd := Rd { r_ws : list int; r_cur : int; r_left : nat }.
Definition M (A : Type) := rd -> A * rd.

(** A chunk (6 bits) of the stream, as a primitive integer. *)
Definition next_chunk (s : rd) : int * rd :=
  match r_left s with
  | O => match r_ws s with
         | [] => (0%uint63, s)
         | w :: ws => ((w land 63)%uint63, Rd ws (w >> 6)%uint63 9)
         end
  | S k => ((r_cur s land 63)%uint63, Rd (r_ws s) (r_cur s >> 6)%uint63 k)
  end.

(** A non-negative primitive integer as [N], one step per bit. *)
Fixpoint pos_of_int (fuel : nat) (i : int) : positive :=
  match fuel with
  | O => 1%positive
  | S f => if (i <=? 1)%uint63 then 1%positive
           else let p := pos_of_int f (i >> 1)%uint63 in
                if (i land 1 =? 0)%uint63 then xO p else xI p
  end.
Definition N_of_int (i : int) : N := if (i =? 0)%uint63 then 0%N else Npos (pos_of_int 63 i).

(** Numbers of more than 55 bits (long constants only) go on in [N] arithmetic. *)
Fixpoint varint (fuel : nat) (shift acc : N) (s : rd) : N * rd :=
  match fuel with
  | O => (acc, s)
  | S f =>
      let (c, s') := next_chunk s in
      let acc' := N.lor acc (N.shiftl (N_of_int (c land 31)%uint63) shift) in
      if (c land 32 =? 0)%uint63 then (acc', s') else varint f (shift + 5)%N acc' s'
  end.

(** The first 11 chunks (55 bits) are read in primitive integers: most numbers end there. *)
Fixpoint vfast (k : nat) (shift acc : int) (s : rd) : N * rd :=
  match k with
  | O => varint 2700 55 (N_of_int acc) s
  | S k' =>
      let (c, s') := next_chunk s in
      let acc' := (acc lor ((c land 31) << shift))%uint63 in
      if (c land 32 =? 0)%uint63 then (N_of_int acc', s') else vfast k' (shift + 5)%uint63 acc' s'
  end.

Definition rdN : M N := vfast 11 0 0.   (* up to 55 + 13500 bits: 4000-digit constants *)
Definition rdP : M positive := fun s => let (n, s') := rdN s in (N.succ_pos n, s').
Definition rdZ : M Z := fun s =>
  let (n, s') := rdN s in
  (if N.odd n then Z.opp (Z.of_N (N.div2 n) + 1) else Z.of_N (N.div2 n), s').
Definition rdQ : M Q := fun s =>
  let (z, s1) := rdZ s in let (d, s2) := rdP s1 in (Qmake z d, s2).

Definition bind {A B} (m : M A) (f : A -> M B) : M B := fun s => let (a, s') := m s in f a s'.
Definition ret {A} (a : A) : M A := fun s => (a, s).
Notation "x <- m ;; k" := (bind m (fun x => k)) (at level 61, m at next level, right associativity).

Definition rdList {A} (m : M A) : M (list A) :=
  n <- rdN ;;
  fun s => let '(acc, s') := N.iter n (fun p => let '(acc, s0) := p in
                                              let (a, s1) := m s0 in (a :: acc, s1)) ([], s) in
           (rev' acc, s').

Definition rdRad : M rad := rdList (b <- rdP ;; e <- rdQ ;; ret (b, e)).
Definition rdNum : M num := rdList (q <- rdQ ;; m <- rdRad ;; ret (q, m)).
Definition rdNames : M (list name) := rdList rdP.

Definition rdShard : M shard :=
  t <- rdN ;;
  match t with
  | 0%N => a <- rdP ;; ret (SAx a)
  | _ => i <- rdN ;; p <- rdN ;; ret (SCh i p)
  end.
Definition rdDims : M (list dimspec) := rdList (n <- rdP ;; sh <- rdList rdShard ;; ret (n, sh)).

Definition dom_of (n : N) : dom :=
  match n with 0%N => DReal | 1%N => DPos | 2%N => DMask | _ => DIndex end.
Definition uop_of (n : N) : uop :=
  match n with
  | 0%N => UNeg | 1%N => URecip | 2%N => UExp | 3%N => ULog | 4%N => USqrt | 5%N => URsqrt
  | 6%N => USigmoid | 7%N => USilu | 8%N => UTanh | 9%N => UGelu | 10%N => UCast | 12%N => UErf
  | _ => UStop
  end.

(* An unknown opcode decodes to a constant 0 whose steps cannot check anything useful. *)
Definition rdOp : M op :=
  c <- rdN ;;
  match c with
  | 0%N => nm <- rdP ;; d <- rdN ;; ret (OInput nm (dom_of d))
  | 1%N => k <- rdNum ;; ret (OConst k)
  | 2%N => d <- rdP ;; ret (ODimSize d)
  | 3%N => a <- rdP ;; ret (OAxisSize a)
  | 4%N => a <- rdP ;; vs <- rdList rdNum ;; ret (ORankConst a vs)
  | 5%N => q <- rdP ;; k <- rdP ;; ret (OCausal q k)
  | 6%N => b <- rdN ;; sd <- rdP ;; h <- rdP ;; th <- rdQ ;; ret (ORope (N.eqb b 1) sd h th)
  | 7%N => ret OAdd
  | 8%N => ret OMul
  | 9%N => u <- rdN ;; ret (OUn (uop_of u))
  | 10%N => e <- rdQ ;; ret (OPow e)
  | 11%N => ret OMaximum
  | 12%N => ret OWhere
  | 13%N => o <- rdNames ;; ret (OEinsum o)
  | 14%N => ds <- rdNames ;; ret (OReduceMax ds)
  | 15%N => v <- rdP ;; ret (OOneHot v)
  | 16%N => e <- rdP ;; k <- rdN ;; ret (OTopk e k)
  | 17%N => o <- rdP ;; n <- rdP ;; ret (ORename o n)
  | 18%N => d <- rdP ;; p <- rdN ;; i <- rdN ;; ret (OChunk d p i)
  | 19%N => d <- rdP ;; ret (OConcat d)
  | 20%N => d <- rdP ;; o <- rdList rdN ;; ret (OPermute d o)
  | 21%N => d <- rdP ;; ret (OShift d)
  | 22%N => d <- rdP ;; a <- rdP ;; ret (OShard d a)
  | 23%N => a <- rdP ;; ret (OPart a)
  | 24%N => a <- rdP ;; r <- rdN ;; ret (OAllReduce a (if N.eqb r 0 then RSum else RMax))
  | 25%N => a <- rdP ;; d <- rdP ;; ret (OAllGather a d)
  | 26%N => a <- rdP ;; d <- rdP ;; ret (OReduceScatter a d)
  | 27%N => a <- rdP ;; src <- rdN ;; ret (OBroadcast a src)
  | 28%N => a <- rdP ;; sd <- rdP ;; cd <- rdP ;; ret (OAllToAll a sd cd)
  | _ => ret (OConst [])
  end.

Definition rdNode (dt : PositiveMap.t (list dimspec)) : M node :=
  o <- rdOp ;; xs <- rdList rdP ;; di <- rdP ;;
  ret (Node o xs (match PositiveMap.find di dt with Some D => D | None => [] end)).

Definition rdOpt : M (option positive) :=
  n <- rdN ;; ret (match n with 0%N => None | _ => Some (N.succ_pos (N.pred n)) end).

Definition rdCut : M cutpt :=
  s <- rdP ;; p <- rdP ;; v <- rdP ;; m <- rdP ;; q <- rdP ;; ret (CutPt s p v m q).

(* An unknown step tag decodes to a step that never checks (a transitivity without a chain). *)
Definition rdStep : M step :=
  t <- rdN ;;
  match t with
  | 0%N => l <- rdP ;; ret (SRefl l)
  | 1%N => c <- rdN ;; l <- rdP ;; r <- rdP ;; h <- rdList rdN ;;
           ret (match rtag_of c with Some tg => SRule tg l r h | None => STrans l r [] end)
  | 2%N => l <- rdP ;; r <- rdP ;; a <- rdList rdOpt ;; ret (SCongr l r a)
  | 3%N => l <- rdP ;; r <- rdP ;; ch <- rdList rdP ;; ret (STrans l r ch)
  | 4%N => l <- rdP ;; r <- rdP ;; k <- rdP ;; ret (SSym l r k)
  | 5%N => l <- rdP ;; r <- rdP ;; k <- rdP ;; ret (SRename l r k)
  | 6%N => l <- rdP ;; r <- rdP ;; k <- rdP ;; cs <- rdList rdCut ;; ret (SCut l r k cs)
  | 7%N => l <- rdP ;; r <- rdP ;; ret (SOpaque l r)
  | _ => l <- rdP ;; ret (STrans l l [])
  end.

Definition rdOb : M oblig :=
  e <- rdP ;; a <- rdP ;; kind <- rdN ;; k <- rdP ;;
  ret (Ob e a (if N.eqb kind 0 then OStep k else OReuse k)).

Definition rdCert : M cert :=
  facts <- rdList (n <- rdP ;; v <- rdN ;; ret (n, v)) ;;
  cut <- rdNames ;;
  dl <- rdList rdDims ;;
  let dt := index_from 1 dl (PositiveMap.empty _) in
  nodes <- rdList (rdNode dt) ;;
  steps <- rdList rdStep ;;
  obs <- rdList rdOb ;;
  ret (Cert nodes facts cut steps obs).

Definition decode (ws : list int) : cert := fst (rdCert (Rd ws 0 0)).

(** ** A fingerprint of the decoded certificate (compared by the exporter)
    In primitive 63-bit integers ([mix h x = h * 1000003 + x + 1] modulo 2^63: the multiplier is
    odd, so a single changed value always changes the result); numbers enter modulo 2^63,
    integers [z] as [2z] or [-2z - 1]. *)
Fixpoint int_of_pos (p : positive) : int :=
  match p with
  | xH => 1%uint63
  | xO q => (int_of_pos q << 1)%uint63
  | xI q => ((int_of_pos q << 1) lor 1)%uint63
  end.
Definition int_of_N (n : N) : int := match n with N0 => 0%uint63 | Npos p => int_of_pos p end.
Definition int_of_zig (z : Z) : int :=
  match z with
  | Z0 => 0%uint63
  | Zpos p => (int_of_pos p << 1)%uint63
  | Zneg p => ((int_of_pos p << 1) - 1)%uint63
  end.
Definition mix (h x : int) : int := (h * 1000003 + x + 1)%uint63.
Definition mixl {A} (f : int -> A -> int) (h : int) (l : list A) : int :=
  fold_left f l (mix h (fold_left (fun n _ => n + 1)%uint63 l 0%uint63)).
Definition mixp (h : int) (p : positive) : int := mix h (int_of_pos p).
Definition mixn (h : int) (n : N) : int := mix h (int_of_N n).
Definition fpQ (h : int) (q : Q) : int := mixp (mix h (int_of_zig (Qnum q))) (Qden q).
Definition fpNum (h : int) (x : num) : int :=
  mixl (fun h t => mixl (fun h be => fpQ (mixp h (fst be)) (snd be)) (fpQ h (fst t)) (snd t)) h x.
Definition fpShard (h : int) (s : shard) : int :=
  match s with SAx a => mixp (mix h 0) a | SCh i p => mixn (mixn (mix h 1) i) p end.
Definition fpDims (h : int) (D : list dimspec) : int :=
  mixl (fun h d => mixl fpShard (mixp h (fst d)) (snd d)) h D.
Definition fpNames (h : int) (l : list name) : int := mixl mixp h l.
Definition fpOp (h : int) (o : op) : int :=
  match o with
  | OInput nm d => mix (mixp (mix h 0) nm) (match d with DReal => 0 | DPos => 1 | DMask => 2 | DIndex => 3 end)
  | OConst k => fpNum (mix h 1) k
  | ODimSize d => mixp (mix h 2) d
  | OAxisSize a => mixp (mix h 3) a
  | ORankConst a vs => mixl fpNum (mixp (mix h 4) a) vs
  | OCausal q k => mixp (mixp (mix h 5) q) k
  | ORope b s hh th => fpQ (mixp (mixp (mix (mix h 6) (if b then 1 else 0)) s) hh) th
  | OAdd => mix h 7 | OMul => mix h 8
  | OUn u => mix (mix h 9) (match u with UNeg => 0 | URecip => 1 | UExp => 2 | ULog => 3 | USqrt => 4
                              | URsqrt => 5 | USigmoid => 6 | USilu => 7 | UTanh => 8 | UGelu => 9
                              | UCast => 10 | UStop => 11 | UErf => 12 end)
  | OPow e => fpQ (mix h 10) e
  | OMaximum => mix h 11 | OWhere => mix h 12
  | OEinsum o => fpNames (mix h 13) o
  | OReduceMax ds => fpNames (mix h 14) ds
  | OOneHot v => mixp (mix h 15) v
  | OTopk e k => mixn (mixp (mix h 16) e) k
  | ORename o n => mixp (mixp (mix h 17) o) n
  | OChunk d p i => mixn (mixn (mixp (mix h 18) d) p) i
  | OConcat d => mixp (mix h 19) d
  | OPermute d o => mixl mixn (mixp (mix h 20) d) o
  | OShift d => mixp (mix h 21) d
  | OShard d a => mixp (mixp (mix h 22) d) a
  | OPart a => mixp (mix h 23) a
  | OAllReduce a r => mix (mixp (mix h 24) a) (match r with RSum => 0 | RMax => 1 end)
  | OAllGather a d => mixp (mixp (mix h 25) a) d
  | OReduceScatter a d => mixp (mixp (mix h 26) a) d
  | OBroadcast a s => mixn (mixp (mix h 27) a) s
  | OAllToAll a s c => mixp (mixp (mixp (mix h 28) a) s) c
  end%uint63.
Definition fpNode (h : int) (nd : node) : int :=
  fpDims (fpNames (fpOp h (nop nd)) (nargs nd)) (ndims nd).

Definition cert_fingerprint (C : cert) : int :=
  let h := mixl (fun h p => mixn (mixp h (fst p)) (snd p)) 0%uint63 (c_facts C) in
  let h := fpNames h (c_cut C) in
  let h := mixl fpNode h (c_nodes C) in
  mixl (fun h _ => h) (mixl (fun h _ => h) h (c_steps C)) (c_obs C).
