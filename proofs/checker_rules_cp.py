"""The checker's copies of the context-parallel rules (``docs/rules.md``: ``permute``, the
chunk map of ``rewriting/permute.py``; ``exp-shift``, the max shifts of online softmax in
``rewriting/expshift.py``), over kernel nodes. Registered last."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from proofs.checker_patterns import (
    _mask,
    _match,
    add,
    all_reduce,
    chunk,
    concat,
    const,
    einsum,
    ELEMENTWISE,
    Env,
    mul,
    num,
    one_hot,
    P,
    pow_,
    reduce_max,
    rename,
    rule_in,
    shard,
)

# ==== permute (rewriting/permute.py: the context-parallel chunk map) ==========================
rule = rule_in("permute")


def permute(x: Any, d: str, o: Any) -> P:
    return P("PERMUTE", (d, tuple(o)), (x,))


def _order(o: Any) -> bool:
    return (isinstance(o, tuple) and len(o) >= 1
            and all(isinstance(j, int) and not isinstance(j, bool) for j in o)
            and sorted(o) == list(range(len(o))))


def _perm_ok(e: Env, xs: tuple[int, ...], mask: tuple[bool, ...], d: str) -> bool:
    if len(xs) != len(mask) or not any(mask):
        return False
    spec = None
    for x, m in zip(xs, mask):
        dims = e.dims(x)
        if m:
            if d not in dims:
                return False
            if spec is None:
                spec = dims[d]
            elif dims[d] != spec:
                return False
        elif d in dims:
            return False
    return True


def _pjoin(xs: tuple[int, ...], mask: tuple[bool, ...], d: str, o: Any) -> tuple[Any, ...]:
    return tuple(permute(x, d, o) if m else x for x, m in zip(xs, mask))


# permutations along different dims commute; the smaller dim name goes outside
@rule("perm-swap", "PERMUTE(PERMUTE(x, d1, o1), d2, o2) = PERMUTE(PERMUTE(x, d2, o2), d1, o1)",
      "d1 < d2 (by name)")
def _perm_swap(e: Env) -> tuple[Any, Any]:
    x, d1, o1, d2, o2 = e.t("x"), e.v("d1"), e.v("o1"), e.v("d2"), e.v("o2")
    e.require(isinstance(d1, str) and isinstance(d2, str) and d1 < d2, "d1 < d2")
    e.require(_order(o1) and _order(o2), "block orders")
    return permute(permute(x, d1, o1), d2, o2), permute(permute(x, d2, o2), d1, o1)


# two permutations of the same blocks are one
@rule("perm-compose", "PERMUTE(PERMUTE(x, d, o1), d, o2) = PERMUTE(x, d, o) with o[j] = o1[o2[j]]",
      "o1 and o2 have the same number of blocks")
def _perm_compose(e: Env) -> tuple[Any, Any]:
    x, d, o1, o2 = e.t("x"), e.v("d"), e.v("o1"), e.v("o2")
    e.require(_order(o1) and _order(o2) and len(o1) == len(o2), "same number of blocks")
    return permute(permute(x, d, o1), d, o2), permute(x, d, tuple(o1[j] for j in o2))


# the identity order moves nothing
@rule("perm-identity", "PERMUTE(x, d, (0, 1, ..., n-1)) = x", "none")
def _perm_identity(e: Env) -> tuple[Any, Any]:
    x, d, n = e.t("x"), e.v("d"), e.v("n")
    e.require(isinstance(n, int) and not isinstance(n, bool) and n >= 1, "n >= 1")
    return permute(x, d, tuple(range(n))), x


# an elementwise op of permuted operands is the permuted op (others lack d)
@rule("lift-perm-elementwise",
      "op(..PERMUTE(x_i, d, o)..y_j..) = PERMUTE(op(..x_i..y_j..), d, o)  (op elementwise)",
      "some operand is PERMUTE(., d, o); those share d's spec; the other operands lack d")
def _lift_perm_ew(e: Env) -> tuple[Any, Any]:
    op, attrs, xs, mask, d, o = e.v("op"), e.v("attrs"), e.ts("xs"), _mask(e), e.v("d"), e.v("o")
    e.require(op in ELEMENTWISE, f"{op} is elementwise")
    e.require(_order(o) and _perm_ok(e, xs, mask, d), "lift condition")
    return P(op, tuple(attrs), _pjoin(xs, mask, d, o)), permute(P(op, tuple(attrs), xs), d, o)


# a contraction that keeps d, of operands permuted along d, is the permuted contraction
@rule("lift-perm-einsum",
      "EINSUM(..PERMUTE(x_i, d, o)..y_j.., out) = PERMUTE(EINSUM(..x_i..y_j.., out), d, o)",
      "d in out, and the lift-perm-elementwise condition")
def _lift_perm_einsum(e: Env) -> tuple[Any, Any]:
    xs, mask, d, o, out = e.ts("xs"), _mask(e), e.v("d"), e.v("o"), tuple(e.v("out"))
    e.require(d in out and _order(o) and _perm_ok(e, xs, mask, d), "d in out and lift condition")
    return einsum(_pjoin(xs, mask, d, o), out), permute(einsum(xs, out), d, o)


# a sum over d does not depend on the order of d's positions
@rule("einsum-perm-contract",
      "EINSUM(..PERMUTE(x_i, d, o)..y_j.., out) = EINSUM(..x_i..y_j.., out)",
      "d not in out; every operand with d is PERMUTE(., d, o) (one o, one spec of d)")
def _perm_contract(e: Env) -> tuple[Any, Any]:
    xs, mask, d, o, out = e.ts("xs"), _mask(e), e.v("d"), e.v("o"), tuple(e.v("out"))
    e.require(d not in out and _order(o) and _perm_ok(e, xs, mask, d),
              "d not in out and lift condition")
    return einsum(_pjoin(xs, mask, d, o), out), einsum(xs, out)


def _pwf(e: Env, x: int, d: str, o: Any) -> bool:
    return _order(o) and d in e.dims(x)


# max over other dims commutes with the permutation of d
@rule("lift-perm-reduce-max",
      "REDUCE_MAX(PERMUTE(x, d, o), dims) = PERMUTE(REDUCE_MAX(x, dims), d, o)", "d not in dims")
def _lift_perm_rmax(e: Env) -> tuple[Any, Any]:
    x, d, o, dims = e.t("x"), e.v("d"), e.v("o"), tuple(e.v("dims"))
    e.require(d not in dims and _pwf(e, x, d, o), "d not in dims")
    return reduce_max(permute(x, d, o), dims), permute(reduce_max(x, dims), d, o)


# top-k along e acts on each position of the other dims alone: it commutes with a
# permutation of another dim
@rule("lift-perm-topk",
      "TOPK_MASK(PERMUTE(x, d, o), e, k) = PERMUTE(TOPK_MASK(x, e, k), d, o)", "d != e")
def _lift_perm_topk(e: Env) -> tuple[Any, Any]:
    x, d, o, ee, k = e.t("x"), e.v("d"), e.v("o"), e.v("e"), e.v("k")
    e.require(d != ee and _pwf(e, x, d, o), "d != e")
    return (P("TOPK_MASK", (ee, k), (permute(x, d, o),)),
            permute(P("TOPK_MASK", (ee, k), (x,)), d, o))


@rule("lift-perm-topk-elig",
      "TOPK_MASK(PERMUTE(x, d, o), PERMUTE(el, d, o), e, k) = PERMUTE(TOPK_MASK(x, el, e, k), d, o)",
      "d != e")
def _lift_perm_topk_elig(e: Env) -> tuple[Any, Any]:
    x, el, d, o, ee, k = e.t("x"), e.t("el"), e.v("d"), e.v("o"), e.v("e"), e.v("k")
    e.require(d != ee and _pwf(e, x, d, o) and _pwf(e, el, d, o), "d != e")
    return (P("TOPK_MASK", (ee, k), (permute(x, d, o), permute(el, d, o))),
            permute(P("TOPK_MASK", (ee, k), (x, el)), d, o))


# a max over d does not depend on the order of d's positions
@rule("reduce-max-perm", "REDUCE_MAX(PERMUTE(x, d, o), dims) = REDUCE_MAX(x, dims)", "d in dims")
def _perm_rmax(e: Env) -> tuple[Any, Any]:
    x, d, o, dims = e.t("x"), e.v("d"), e.v("o"), tuple(e.v("dims"))
    e.require(d in dims and _pwf(e, x, d, o), "d in dims")
    return reduce_max(permute(x, d, o), dims), reduce_max(x, dims)


# renaming commutes with the permutation (the permuted dim is renamed with it)
@rule("lift-perm-rename",
      "RENAME(PERMUTE(x, d, o), old, new) = PERMUTE(RENAME(x, old, new), d', o)  (d' = new if d = old)",
      "the output spec of new is nshards; if d = old, nshards is x's spec of d")
def _lift_perm_rename(e: Env) -> tuple[Any, Any]:
    x, d, o, old, new = e.t("x"), e.v("d"), e.v("o"), e.v("old"), e.v("new")
    nsh = tuple(e.v("nshards"))
    e.require(_pwf(e, x, d, o), "x has d")
    if d == old:
        e.require(nsh == e.dims(x)[d], "nshards is x's spec of d")
    d2 = new if d == old else d
    return rename(permute(x, d, o), old, new, nsh), permute(rename(x, old, new, nsh), d2, o)


# a chunk along another dim commutes with the permutation
@rule("lift-perm-chunk",
      "CHUNK(PERMUTE(x, d, o), c, parts, i) = PERMUTE(CHUNK(x, c, parts, i), d, o)", "c != d")
def _lift_perm_chunk(e: Env) -> tuple[Any, Any]:
    x, d, o, cd, parts, i = (e.t("x"), e.v("d"), e.v("o"), e.v("cd"), e.v("parts"),
                             e.v("index"))
    e.require(cd != d and _pwf(e, x, d, o), "c != d")
    return chunk(permute(x, d, o), cd, parts, i), permute(chunk(x, cd, parts, i), d, o)


# concatenating permuted blocks along another dim is the permuted concatenation
@rule("lift-perm-concat", "CONCAT(PERMUTE(x_i, d, o)..., c) = PERMUTE(CONCAT(x_i..., c), d, o)",
      "c != d; every operand is PERMUTE(., d, o) with the same spec of d")
def _lift_perm_concat(e: Env) -> tuple[Any, Any]:
    xs, d, o, cd, csh = e.ts("xs"), e.v("d"), e.v("o"), e.v("cd"), tuple(e.v("cshards"))
    e.require(cd != d and _order(o) and _perm_ok(e, xs, (True,) * len(xs), d),
              "c != d and lift condition")
    return (concat(tuple(permute(x, d, o) for x in xs), cd, csh),
            permute(concat(xs, cd, csh), d, o))


# one-hot is positionwise in the indices
@rule("lift-perm-onehot", "ONE_HOT(PERMUTE(idx, d, o), v) = PERMUTE(ONE_HOT(idx, v), d, o)",
      "d != v")
def _lift_perm_onehot(e: Env) -> tuple[Any, Any]:
    x, d, o, v, sh = e.t("x"), e.v("d"), e.v("o"), e.v("v"), tuple(e.v("vshards"))
    e.require(d != v and _pwf(e, x, d, o), "d != v")
    return one_hot(permute(x, d, o), v, sh), permute(one_hot(x, v, sh), d, o)


# a permutation along d commutes with taking a block along another dim (on every rank)
@rule("lift-shard-permute", "PERMUTE(SHARD(x, e, a), d, o) = SHARD(PERMUTE(x, d, o), e, a)",
      "e != d")
def _lift_shard_perm(e: Env) -> tuple[Any, Any]:
    x, ee, a, d, o = e.t("x"), e.v("e"), e.v("a"), e.v("d"), e.v("o")
    e.require(ee != d and _order(o), "e != d")
    return permute(shard(x, ee, a), d, o), shard(permute(x, d, o), ee, a)


# a collective over ranks commutes with a permutation every rank applies
@rule("allreduce-permute",
      "ALL_REDUCE(PERMUTE(x, d, o), a, r) = PERMUTE(ALL_REDUCE(x, a, r), d, o)",
      "r in {sum, max}")
def _ar_perm(e: Env) -> tuple[Any, Any]:
    x, d, o, a, r = e.t("x"), e.v("d"), e.v("o"), e.v("a"), e.v("r")
    e.require(r in ("sum", "max") and _pwf(e, x, d, o), "r in {sum, max}")
    return all_reduce(permute(x, d, o), a, r), permute(all_reduce(x, a, r), d, o)


# ==== exp-shift (rewriting/expshift.py: max shifts of exp, online softmax) ====================
rule = rule_in("exp-shift")


def _is_max_node(e: Env, m: int) -> bool:
    while e.op(m) in ("SHARD", "PERMUTE"):
        m = e.args(m)[0]
    return e.op(m) in ("REDUCE_MAX", "MAXIMUM") or (e.op(m) == "ALL_REDUCE"
                                                     and e.attrs(m)[1] == "max")


def _max_factor(e: Env, f: int) -> bool:
    if e.op(f) == "POW":
        f = e.args(f)[0]
    return e.op(f) == "EXP" and _is_max_node(e, e.args(f)[0])


# exp(y) = exp(y - c m) * exp(m)^c: the max shift becomes a separate factor
@rule("exp-max-shift", "EXP(y) = MUL(EXP(ADD(y, MUL(CONST(-c), m))), POW(EXP(m), c))",
      "m is a max (REDUCE_MAX, MAXIMUM, ALL_REDUCE max; under PERMUTE/SHARD) with negative "
      "integer coefficient c in y read as a linear combination, and y has another term")
def _exp_max_shift(e: Env) -> tuple[Any, Any]:
    y, m, c = e.t("y"), e.t("m"), num(e.v("c"))
    e.require(isinstance(c, Fraction) and c.denominator == 1 and c < 0, "c a negative integer")
    e.require(_is_max_node(e, m), "m is a max")
    e.require(e.dimnames(m) <= e.dimnames(y), "m's dims are y's (m is a term of y)")
    return (P("EXP", (), (y,)),
            mul(P("EXP", (), (add(y, mul(const(-c), m)),)), pow_(P("EXP", (), (m,)), c)))


# a factor constant along every contracted dim leaves the contraction
@rule("einsum-max-factor-out",
      "EINSUM(..f.., out) = MUL(f, EINSUM(.. .., out'))  (out' = out restricted to the rest)",
      "f = EXP(m) or POW(EXP(m), c) with m a max; f's dims are in out; another operand remains")
def _einsum_max_factor(e: Env) -> tuple[Any, Any]:
    f, k, rest, out = e.t("f"), e.v("k"), e.ts("rest"), tuple(e.v("out"))
    e.require(_max_factor(e, f), "f is a max factor")
    e.require(bool(rest) and isinstance(k, int) and not isinstance(k, bool)
              and 0 <= k <= len(rest), "another operand remains")
    e.require(e.dimnames(f) <= set(out), "f's dims are in out")
    have = e.dimnames(rest)
    xs = list(rest)
    xs.insert(k, f)
    return einsum(tuple(xs), out), mul(f, einsum(tuple(rest), [n for n in out if n in have]))


# a max factor shared by every summand leaves the sum
@rule("add-max-factor-out", "ADD(MUL(.., f, ..), ...) = MUL(f, ADD(MUL(.. ..), ...))",
      "f = EXP(m) or POW(EXP(m), c) with m a max is a factor of every summand (at least two)")
def _add_max_factor(e: Env) -> tuple[Any, Any]:
    f, xs = e.t("f"), e.ts("xs")
    e.require(_max_factor(e, f) and len(xs) >= 2, "f is a max factor, two summands")
    outs: list[Any] = []
    for x in xs:
        e.require(e.op(x) == "MUL" and f in e.args(x), "f is a factor of every summand")
        a = list(e.args(x))
        a.remove(f)
        outs.append(a[0] if len(a) == 1 else mul(*a))
    return add(*xs), mul(f, add(*outs))


# 1 / (a sum) is constant along the contracted dims: softmax's normaliser leaves p @ v
@rule("einsum-recip-factor-out",
      "EINSUM(..f.., out) = MUL(f, EINSUM(.. .., out'))  (f = POW(EINSUM(..), e), e < 0)",
      "f's dims are in out; another operand has a contracted dim")
def _einsum_recip_factor(e: Env) -> tuple[Any, Any]:
    f, k, rest, out = e.t("f"), e.v("k"), e.ts("rest"), tuple(e.v("out"))
    e.require(e.op(f) == "POW" and e.op(e.args(f)[0]) == "EINSUM"
              and num(e.attrs(f)[0]) < 0, "f = POW(EINSUM(..), e), e < 0")
    e.require(bool(rest) and isinstance(k, int) and not isinstance(k, bool)
              and 0 <= k <= len(rest), "another operand remains")
    e.require(e.dimnames(f) <= set(out), "f's dims are in out")
    have = e.dimnames(rest)
    e.require(any(n not in out for n in have), "another operand has a contracted dim")
    xs = list(rest)
    xs.insert(k, f)
    return einsum(tuple(xs), out), mul(f, einsum(tuple(rest), [n for n in out if n in have]))


def _wrap_pat(e: Env, ws: Any, y: Any) -> Any:
    e.require(isinstance(ws, tuple) and len(ws) >= 1, "W is a non-empty chain")
    for w in reversed(ws):
        e.require(isinstance(w, tuple) and len(w) == 3 and w[0] in ("SHARD", "PERMUTE"),
                  "W is a chain of SHARD / PERMUTE")
        y = shard(y, w[1], w[2]) if w[0] == "SHARD" else permute(y, w[1], w[2])
    return y


# the same shift when the scaled max is a rank's block or in load-balanced order
@rule("exp-max-shift-block",
      "EXP(ADD(xs)) = MUL(EXP(ADD(xs without x_k)), POW(EXP(W(m)), c))  (x_k = W(MUL(CONST(c), m)))",
      "W is a non-empty chain of SHARD / PERMUTE; m is a max; c a negative integer")
def _exp_max_shift_block(e: Env) -> tuple[Any, Any]:
    xs, k, ws, c, m = e.ts("xs"), e.v("k"), e.v("ws"), num(e.v("c")), e.t("m")
    e.require(isinstance(k, int) and not isinstance(k, bool) and 0 <= k < len(xs)
              and len(xs) >= 2, "x_k is a summand of at least two")
    e.require(isinstance(c, Fraction) and c.denominator == 1 and c < 0, "c a negative integer")
    e.require(_is_max_node(e, m), "m is a max")
    _match(_wrap_pat(e, ws, mul(const(c), m)), xs[k], e.tab, "x_k")
    rest = xs[:k] + xs[k + 1:]
    y = rest[0] if len(rest) == 1 else add(*rest)
    return (P("EXP", (), (add(*xs),)),
            mul(P("EXP", (), (y,)), pow_(P("EXP", (), (_wrap_pat(e, ws, m),)), c)))
