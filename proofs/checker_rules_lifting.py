"""The checker's copies of the SHARD-lifting and collective rules (``docs/rules.md``: lifting,
collectives), over kernel nodes. Registered after :mod:`proofs.checker_rules_canonical`."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from proofs.checker_patterns import (
    _join,
    _lift_ok,
    _mask,
    _wf,
    add,
    all_gather,
    all_reduce,
    axis_rank,
    chunk,
    concat,
    const,
    einsum,
    ELEMENTWISE,
    Env,
    mul,
    num,
    num_add,
    one_hot,
    P,
    part,
    reduce_max,
    rename,
    rule_in,
    shard,
)

# ==== SHARD lifting ============================================================================
rule = rule_in("lifting")


# blocks along different dims commute; the higher-ranked axis goes outside
@rule("shard-swap", "SHARD(SHARD(x, d1, a1), d2, a2) = SHARD(SHARD(x, d2, a2), d1, a1)",
      "d1 != d2 and rank(a1) > rank(a2)")
def _shard_swap(e: Env) -> tuple[Any, Any]:
    x, d1, a1, d2, a2 = e.t("x"), e.v("d1"), e.v("a1"), e.v("d2"), e.v("a2")
    e.require(d1 != d2 and axis_rank(a1) > axis_rank(a2), "d1 != d2 and rank(a1) > rank(a2)")
    e.require(a1 not in e.var(x) and a2 not in e.var(x), "x varies over neither axis")
    return shard(shard(x, d1, a1), d2, a2), shard(shard(x, d2, a2), d1, a1)


# an elementwise op of blocks is the block of the op
@rule("lift-shard-elementwise",
      "op(..SHARD(x_i, d, a)..y_j..) = SHARD(op(..x_i..y_j..), d, a)  (op elementwise)",
      "some operand is SHARD(., d, a); those share d's spec; no operand varies over a after "
      "unwrapping; non-block operands lack d")
def _lift_ew(e: Env) -> tuple[Any, Any]:
    op, attrs, xs, mask, d, a = e.v("op"), e.v("attrs"), e.ts("xs"), _mask(e), e.v("d"), e.v("a")
    e.require(op in ELEMENTWISE, f"{op} is elementwise")
    e.require(_lift_ok(e, xs, mask, d, a), "lift condition")
    return P(op, tuple(attrs), _join(xs, mask, d, a)), shard(P(op, tuple(attrs), xs), d, a)


# a contraction that keeps d, of blocks along d, is the block of the contraction
@rule("lift-shard-einsum",
      "EINSUM(..SHARD(x_i, d, a)..y_j.., out) = SHARD(EINSUM(..x_i..y_j.., out), d, a)",
      "d in out, and the lift-shard-elementwise condition")
def _lift_einsum(e: Env) -> tuple[Any, Any]:
    xs, mask, d, a, out = e.ts("xs"), _mask(e), e.v("d"), e.v("a"), tuple(e.v("out"))
    e.require(d in out and _lift_ok(e, xs, mask, d, a), "d in out and the lift condition")
    return einsum(_join(xs, mask, d, a), out), shard(einsum(xs, out), d, a)


# max over other dims commutes with taking a block along d
@rule("lift-shard-reduce-max",
      "REDUCE_MAX(SHARD(x, d, a), dims) = SHARD(REDUCE_MAX(x, dims), d, a)", "d not in dims")
def _lift_rmax(e: Env) -> tuple[Any, Any]:
    x, d, a, dims = e.t("x"), e.v("d"), e.v("a"), tuple(e.v("dims"))
    e.require(d not in dims and _wf(e, x, d, a), "d not in dims")
    return reduce_max(shard(x, d, a), dims), shard(reduce_max(x, dims), d, a)


# renaming commutes with taking a block (the block's dim is renamed with it)
@rule("lift-shard-rename",
      "RENAME(SHARD(x, d, a), old, new) = SHARD(RENAME(x, old, new), d', a)  (d' = new if d = old)",
      "the output spec of new is nshards; if d = old, nshards ends with a (the inner RENAME gets "
      "nshards without it)")
def _lift_rename(e: Env) -> tuple[Any, Any]:
    x, d, a, old, new = e.t("x"), e.v("d"), e.v("a"), e.v("old"), e.v("new")
    nsh = tuple(e.v("nshards"))
    e.require(_wf(e, x, d, a), "x does not vary over a and has d")
    if d == old:
        e.require(bool(nsh) and nsh[-1] == a, "nshards ends with a")
    d2 = new if d == old else d
    inner = nsh[:-1] if d == old else nsh
    return rename(shard(x, d, a), old, new, nsh), shard(rename(x, old, new, inner), d2, a)


# a chunk along another dim commutes with taking a block
@rule("lift-shard-chunk",
      "CHUNK(SHARD(x, d, a), c, parts, i) = SHARD(CHUNK(x, c, parts, i), d, a)", "c != d")
def _lift_chunk(e: Env) -> tuple[Any, Any]:
    x, d, a, cd, parts, i = (e.t("x"), e.v("d"), e.v("a"), e.v("cd"), e.v("parts"),
                             e.v("index"))
    e.require(cd != d and _wf(e, x, d, a), "c != d")
    return chunk(shard(x, d, a), cd, parts, i), shard(chunk(x, cd, parts, i), d, a)


# concatenating blocks along another dim is the block of the concatenation
@rule("lift-shard-concat", "CONCAT(SHARD(x_i, d, a)..., c) = SHARD(CONCAT(x_i..., c), d, a)",
      "c != d; every operand is SHARD(., d, a) with the same spec of d")
def _lift_concat(e: Env) -> tuple[Any, Any]:
    xs, d, a, cd, csh = e.ts("xs"), e.v("d"), e.v("a"), e.v("cd"), tuple(e.v("cshards"))
    e.require(cd != d and _lift_ok(e, xs, (True,) * len(xs), d, a), "c != d and lift condition")
    return (concat(tuple(shard(x, d, a) for x in xs), cd, csh),
            shard(concat(xs, cd, csh), d, a))


# vocab-parallel lookup: the one-hot over the rank's vocab block is the block of the one-hot
@rule("onehot-shard-out", "ONE_HOT(idx, v)[v: s+(a,)] = SHARD(ONE_HOT(idx, v)[v: s], v, a)",
      "v's spec in the output ends with a mesh axis a, and idx does not vary over a")
def _onehot_out(e: Env) -> tuple[Any, Any]:
    idx, v, sh = e.t("idx"), e.v("v"), tuple(e.v("vshards"))
    e.require(bool(sh) and not sh[-1].startswith("#") and sh[-1] not in e.var(idx)
              and v not in e.dims(idx), "v's spec ends with a mesh axis idx does not vary over")
    return one_hot(idx, v, sh), shard(one_hot(idx, v, sh[:-1]), v, sh[-1])


# one-hot is positionwise in the indices
@rule("lift-shard-onehot", "ONE_HOT(SHARD(idx, d, a), v) = SHARD(ONE_HOT(idx, v), d, a)",
      "a is not in v's spec")
def _lift_onehot(e: Env) -> tuple[Any, Any]:
    x, d, a, v, sh = e.t("x"), e.v("d"), e.v("a"), e.v("v"), tuple(e.v("vshards"))
    e.require(a not in sh and _wf(e, x, d, a) and d != v, "a not in v's spec")
    return one_hot(shard(x, d, a), v, sh), shard(one_hot(x, v, sh), d, a)


# top-k along e acts on each position of the other dims alone
@rule("lift-shard-topk", "TOPK_MASK(SHARD(x, d, a), e, k) = SHARD(TOPK_MASK(x, e, k), d, a)",
      "d != e, and x does not vary over a")
def _lift_topk(e: Env) -> tuple[Any, Any]:
    x, d, a, ee, k = e.t("x"), e.v("d"), e.v("a"), e.v("e"), e.v("k")
    e.require(d != ee and _wf(e, x, d, a), "d != e and x does not vary over a")
    return P("TOPK_MASK", (ee, k), (shard(x, d, a),)), shard(P("TOPK_MASK", (ee, k), (x,)), d, a)


# the eligibility form: score and eligibility blocks along d != e give the block of the mask
@rule("lift-shard-topk-elig",
      "TOPK_MASK(SHARD(x, d, a), SHARD(el, d, a), e, k) = SHARD(TOPK_MASK(x, el, e, k), d, a)",
      "d != e, x and el have the same spec of d and do not vary over a")
def _lift_topk_elig(e: Env) -> tuple[Any, Any]:
    x, el, d, a, ee, k = e.t("x"), e.t("el"), e.v("d"), e.v("a"), e.v("e"), e.v("k")
    e.require(d != ee and _lift_ok(e, (x, el), (True, True), d, a),
              "d != e, x and el have the same spec of d and do not vary over a")
    return (P("TOPK_MASK", (ee, k), (shard(x, d, a), shard(el, d, a))),
            shard(P("TOPK_MASK", (ee, k), (x, el)), d, a))


# a shift along e moves positions along e only: a block along d != e gives the shifted block
@rule("lift-shard-shift", "SHIFT(SHARD(x, d, a), e) = SHARD(SHIFT(x, e), d, a)",
      "d != e, and x does not vary over a")
def _lift_shift(e: Env) -> tuple[Any, Any]:
    x, d, a, ee = e.t("x"), e.v("d"), e.v("a"), e.v("e")
    e.require(d != ee and _wf(e, x, d, a), "d != e and x does not vary over a")
    return P("SHIFT", (ee,), (shard(x, d, a),)), shard(P("SHIFT", (ee,), (x,)), d, a)


# ==== collectives ==============================================================================
rule = rule_in("collectives")


# a replicated value summed over |a| coordinates is |a| times the value
@rule("allreduce-sum-invariant", "ALL_REDUCE(x, a, sum) = MUL(CONST(|a|), x)",
      "x does not vary over a")
def _ar_sum_inv(e: Env) -> tuple[Any, Any]:
    x, a = e.t("x"), e.v("a")
    e.require(a not in e.var(x), "x does not vary over a")
    e.require(a in e.b, f"axis {a} is bound")
    return all_reduce(x, a, "sum"), mul(const(e.b[a]), x)


# the max of copies is the value
@rule("allreduce-max-invariant", "ALL_REDUCE(x, a, max) = x", "x does not vary over a")
def _ar_max_inv(e: Env) -> tuple[Any, Any]:
    x, a = e.t("x"), e.v("a")
    e.require(a not in e.var(x), "x does not vary over a")
    return all_reduce(x, a, "max"), x


# the addends of a Partial(sum) sum to the value
@rule("allreduce-part", "ALL_REDUCE(PART(x, a), a, sum) = x", "x does not vary over a")
def _ar_part(e: Env) -> tuple[Any, Any]:
    x, a = e.t("x"), e.v("a")
    e.require(a not in e.var(x), "x does not vary over a")
    return all_reduce(part(x, a), a, "sum"), x


# the sum over a of a per-rank constant on a is the sum of its values
@rule("allreduce-rank-const", "ALL_REDUCE(RANK_CONST(a, vs), a, sum) = CONST(sum(vs))",
      "|vs| == |a|")
def _ar_rank_const(e: Env) -> tuple[Any, Any]:
    a, values = e.v("a"), tuple(e.v("values"))
    e.require(a in e.b and len(values) == e.b[a], "|vs| == |a|")
    total = Fraction(0)
    for v in values:
        total = num_add(total, num(v))
    return all_reduce(P("RANK_CONST", (a, values)), a, "sum"), const(total)


# reducing over a commutes with taking a block over another axis b
@rule("allreduce-shard-comm",
      "ALL_REDUCE(SHARD(x, d, b), a, r) = SHARD(ALL_REDUCE(x, a, r), d, b)",
      "b != a; no dim of x is sharded over a")
def _ar_shard_comm(e: Env) -> tuple[Any, Any]:
    x, d, bb, a, r = e.t("x"), e.v("d"), e.v("b"), e.v("a"), e.v("r")
    e.require(bb != a and bb not in e.var(x) and d in e.dims(x), "b != a")
    e.require(not _blocks_over(e, x, a), "no dim of x is sharded over a")
    e.require(r in ("sum", "max"), "r is sum or max")
    return all_reduce(shard(x, d, bb), a, r), shard(all_reduce(x, a, r), d, bb)


# a sum of sums is the sum of the sums
@rule("allreduce-add", "ALL_REDUCE(ADD(xs), a, sum) = ADD(ALL_REDUCE(x, a, sum) for x in xs)")
def _ar_add(e: Env) -> tuple[Any, Any]:
    xs, a = e.ts("xs"), e.v("a")
    return all_reduce(add(*xs), a, "sum"), add(*[all_reduce(x, a, "sum") for x in xs])


# factors that do not vary over a leave the sum over a
@rule("allreduce-mul-factor",
      "ALL_REDUCE(MUL(xs), a, sum) = MUL(fixed..., ALL_REDUCE(MUL(vary...), a, sum))",
      "fixed = the xs not varying over a (non-empty), vary = the others (non-empty; one: itself)")
def _ar_mul_factor(e: Env) -> tuple[Any, Any]:
    xs, a = e.ts("xs"), e.v("a")
    fixed = [x for x in xs if a not in e.var(x)]
    vary = [x for x in xs if a in e.var(x)]
    e.require(bool(fixed) and bool(vary), "fixed and varying factors")
    inner = vary[0] if len(vary) == 1 else mul(*vary)
    return all_reduce(mul(*xs), a, "sum"), mul(*fixed, all_reduce(inner, a, "sum"))


# summing the partial contractions of blocks along a contracted dim d is the contraction
@rule("allreduce-einsum-split",
      "ALL_REDUCE(EINSUM(..SHARD(x_i, d, a)..y_j.., out), a, sum) = EINSUM(..x_i..y_j.., out)",
      "d not in out; the blocks share d's spec; no x_i, y_j varies over a; the y_j lack d")
def _ar_split(e: Env) -> tuple[Any, Any]:
    xs, mask, d, a, out = e.ts("xs"), _mask(e), e.v("d"), e.v("a"), tuple(e.v("out"))
    e.require(d not in out and _lift_ok(e, xs, mask, d, a), "d not in out and lift condition")
    return all_reduce(einsum(_join(xs, mask, d, a), out), a, "sum"), einsum(xs, out)


# a contraction is linear in each operand: the sum moves into the one varying operand
@rule("allreduce-einsum-push",
      "ALL_REDUCE(EINSUM(xs, out), a, sum) = EINSUM(xs with x_k -> ALL_REDUCE(x_k, a, sum), out)",
      "exactly one operand x_k varies over a, and no dim of x_k is sharded over a")
def _ar_push(e: Env) -> tuple[Any, Any]:
    xs, a, out = e.ts("xs"), e.v("a"), tuple(e.v("out"))
    vary = [i for i, x in enumerate(xs) if a in e.var(x)]
    e.require(len(vary) == 1, "exactly one operand varies over a")
    e.require(not _blocks_over(e, xs[vary[0]], a), "no dim of x_k is sharded over a")
    ys: list[Any] = list(xs)
    ys[vary[0]] = all_reduce(xs[vary[0]], a, "sum")
    return all_reduce(einsum(xs, out), a, "sum"), einsum(tuple(ys), out)


def _blocks_over(e: Env, x: int, a: str) -> bool:
    """Some dim of x is sharded over a."""
    return any(a in s for s in e.dims(x).values())


def _move(e: Env, op: str, xs: tuple[Any, ...]) -> P:
    attrs = tuple(e.v("attrs"))
    if op == "RENAME":
        return rename(xs[0], *attrs, tuple(e.v("nshards")))
    if op == "CHUNK":
        return chunk(xs[0], *attrs)
    return concat(xs, attrs[0], tuple(e.v("cshards")))


def _move_rule(op: str, name: str, law: str) -> None:
    def sides(e: Env) -> tuple[Any, Any]:
        xs, a, r = e.ts("xs"), e.v("a"), e.v("r")
        e.require(r in ("sum", "max"), "r is sum or max")
        if op != "CONCAT":
            e.require(len(xs) == 1, f"{op} has one operand")
        return (all_reduce(_move(e, op, xs), a, r),
                _move(e, op, tuple(all_reduce(x, a, r) for x in xs)))
    rule(name, law)(sides)


# sums and maxima over ranks are positionwise: they commute with renaming and block movement
_move_rule("RENAME", "allreduce-rename",
           "ALL_REDUCE(RENAME(x, o, n), a, r) = RENAME(ALL_REDUCE(x, a, r), o, n)")
_move_rule("CHUNK", "allreduce-chunk",
           "ALL_REDUCE(CHUNK(x, d, p, i), a, r) = CHUNK(ALL_REDUCE(x, a, r), d, p, i)")
_move_rule("CONCAT", "allreduce-concat",
           "ALL_REDUCE(CONCAT(xs, d), a, r) = CONCAT(ALL_REDUCE(x, a, r) for x in xs, d)")


# the max over ranks of the max over each block along d is the max over d
@rule("allreduce-max-shard",
      "ALL_REDUCE(REDUCE_MAX(SHARD(x, d, a), dims), a, max) = REDUCE_MAX(x, dims)", "d in dims")
def _ar_max_shard(e: Env) -> tuple[Any, Any]:
    x, d, a, dims = e.t("x"), e.v("d"), e.v("a"), tuple(e.v("dims"))
    e.require(d in dims and a not in e.var(x) and d in e.dims(x), "d in dims")
    return all_reduce(reduce_max(shard(x, d, a), dims), a, "max"), reduce_max(x, dims)


# reductions over two axes commute; the higher-ranked axis goes inside
@rule("allreduce-swap",
      "ALL_REDUCE(ALL_REDUCE(x, a, r), b, r) = ALL_REDUCE(ALL_REDUCE(x, b, r), a, r)",
      "rank(b) > rank(a)")
def _ar_swap(e: Env) -> tuple[Any, Any]:
    x, a, bb, r = e.t("x"), e.v("a"), e.v("b"), e.v("r")
    e.require(r in ("sum", "max") and axis_rank(bb) > axis_rank(a), "rank(b) > rank(a)")
    return all_reduce(all_reduce(x, a, r), bb, r), all_reduce(all_reduce(x, bb, r), a, r)


# gathering the blocks of x is x
@rule("allgather-shard", "ALL_GATHER(SHARD(x, d, a), a, d) = x", "x does not vary over a")
def _ag_shard(e: Env) -> tuple[Any, Any]:
    x, a, d = e.t("x"), e.v("a"), e.v("d")
    e.require(a not in e.var(x) and d in e.dims(x), "x does not vary over a")
    return all_gather(shard(x, d, a), a, d), x


# gathering along d over a commutes with taking a block along another dim over another axis
@rule("allgather-shard-comm",
      "ALL_GATHER(SHARD(x, e, b), a, d) = SHARD(ALL_GATHER(x, a, d), e, b)", "b != a and e != d")
def _ag_comm(e: Env) -> tuple[Any, Any]:
    x, ee, bb, a, d = e.t("x"), e.v("e"), e.v("b"), e.v("a"), e.v("d")
    e.require(bb != a and ee != d and bb not in e.var(x) and ee in e.dims(x), "b != a, e != d")
    return all_gather(shard(x, ee, bb), a, d), shard(all_gather(x, a, d), ee, bb)


# reduce-scatter is the rank's block of the all-reduce (its definition)
@rule("reduce-scatter-def", "REDUCE_SCATTER(x, a, d) = SHARD(ALL_REDUCE(x, a, sum), d, a)")
def _rs_def(e: Env) -> tuple[Any, Any]:
    x, a, d = e.t("x"), e.v("a"), e.v("d")
    return P("REDUCE_SCATTER", (a, d), (x,)), shard(all_reduce(x, a, "sum"), d, a)


# broadcasting a replicated value changes nothing
@rule("broadcast-invariant", "BROADCAST(x, a, src) = x", "x does not vary over a")
def _bc_inv(e: Env) -> tuple[Any, Any]:
    x, a, src = e.t("x"), e.v("a"), e.v("src")
    e.require(a not in e.var(x), "x does not vary over a")
    return P("BROADCAST", (a, src), (x,)), x


# all-to-all is the rank's block (along s) of the gathered tensor (along c): its definition
@rule("all-to-all-def", "ALL_TO_ALL(x, a, s, c) = SHARD(ALL_GATHER(x, a, c), s, a)")
def _a2a_def(e: Env) -> tuple[Any, Any]:
    x, a, sp, cc = e.t("x"), e.v("a"), e.v("s"), e.v("c")
    return P("ALL_TO_ALL", (a, sp, cc), (x,)), shard(all_gather(x, a, cc), sp, a)


# reducing over one axis and gathering over another commute
@rule("allreduce-allgather-comm",
      "ALL_REDUCE(ALL_GATHER(x, b, d), a, r) = ALL_GATHER(ALL_REDUCE(x, a, r), b, d)",
      "a != b; no dim of x is sharded over a")
def _ar_ag_comm(e: Env) -> tuple[Any, Any]:
    x, a, r, bb, d = e.t("x"), e.v("a"), e.v("r"), e.v("b"), e.v("d")
    e.require(a != bb and r in ("sum", "max") and not _blocks_over(e, x, a)
              and d in e.dims(x), "a != b; no dim of x is sharded over a")
    return all_reduce(all_gather(x, bb, d), a, r), all_gather(all_reduce(x, a, r), bb, d)
