"""SHARD lifting: push ``SHARD(x, d, a)`` outward, toward the root.

A plan computes on blocks; the spec on whole tensors. An op applied to the rank's blocks is the
rank's block of the op applied to the whole tensors when the op does not mix positions along
``d`` (elementwise ops, contractions that keep ``d``, reductions and movement over other dims).
Lifting every SHARD to the root turns a plan term into ``SHARD(...SHARD(spec-like term)...)``,
which is what the lineage of the spec's output says the rank must hold.

Nested shards of different dims are kept in one canonical order (``shard-swap``): the outer
SHARD has the higher :func:`~rewriting.build.axis_rank` (``dp < tp < pp < cp < sp < mb < ep``),
shards of the same dim keep their nesting. Lifting tries the top SHARD of each operand.

Guards use ``varying_axes`` (``spec_lang/term.py``): an operand that is not a block must not vary
over the axis and must lack the dim (else its positions along ``d`` would not line up).
"""

from __future__ import annotations

from spec_lang.term import ELEMENTWISE, Binding, DimSpec, Op, Term

from rewriting import build as b
from rewriting.instances import draw_binding, fresh, fresh_index
from rewriting.rule import Draw, Rule, Subst, register

__all__ = ["lift_ok"]


def _rule(name: str, law: str, guard_doc: str, ops: set[Op], match, lhs, rhs, guard,
          sample) -> Rule:
    return register(Rule(name, law, guard_doc, frozenset(ops), match, lhs, rhs, guard, sample,
                         group="lifting"))


def _is_shard(x: Term, d: str, a: str) -> bool:
    return x.op is Op.SHARD and x.attrs[0] == d and x.attrs[1] == a


def lift_ok(xs: tuple[Term, ...], mask: tuple[bool, ...], d: str, a: str) -> bool:
    """Blocks ``xs[i]`` (``mask[i]``) all share the spec of ``d`` after sharding over ``a`` and
    none varies over ``a``; every other operand neither varies over ``a`` nor has ``d``."""
    spec = None
    if len(xs) != len(mask) or not any(mask):
        return False
    for x, m in zip(xs, mask):
        if a in b.varying(x):
            return False
        if m:
            if d not in x.dim_names:
                return False
            s = x.dim(d).shards
            if spec is None:
                spec = s
            elif s != spec:
                return False
        elif d in x.dim_names:
            return False
    return True


def _split(args: tuple[Term, ...], d: str, a: str) -> tuple[tuple[Term, ...], tuple[bool, ...]]:
    mask = tuple(_is_shard(x, d, a) for x in args)
    return tuple(x.args[0] if m else x for x, m in zip(args, mask)), mask


def _join(xs: tuple[Term, ...], mask: tuple[bool, ...], d: str, a: str) -> tuple[Term, ...]:
    return tuple(b.shard(x, d, a) if m else x for x, m in zip(xs, mask))


def _tops(args: tuple[Term, ...]) -> list[tuple[str, str]]:
    seen: list[tuple[str, str]] = []
    for x in args:
        if x.op is Op.SHARD and (x.attrs[0], x.attrs[1]) not in seen:
            seen.append((x.attrs[0], x.attrs[1]))
    return seen


# ---------------------------------------------------------------------------------------------
def _swap_ok(s: Subst, bd: Binding) -> bool:
    return (s["d1"] != s["d2"] and b.axis_rank(s["a1"]) > b.axis_rank(s["a2"])
            and s["a1"] not in b.varying(s["x"]) and s["a2"] not in b.varying(s["x"]))


def _match_swap(t: Term, bd: Binding) -> Subst | None:
    y = t.args[0]
    if y.op is not Op.SHARD:
        return None
    s = {"x": y.args[0], "d1": y.attrs[0], "a1": y.attrs[1], "d2": t.attrs[0], "a2": t.attrs[1]}
    return s if _swap_ok(s, bd) else None


def _sample_swap(draw: Draw) -> tuple[Term, Binding]:
    x = fresh(["B", "S", "H"])
    a_hi, a_lo = draw.choice([("tp", "dp"), ("mb", "dp"), ("cp", "tp"), ("mb", "cp")])
    d1, d2 = draw.choice([("B", "S"), ("S", "H"), ("H", "B")])
    return b.shard(b.shard(x, d1, a_hi), d2, a_lo), draw_binding(draw)


# blocks along different dims commute; the higher-ranked axis goes outside
_rule("shard-swap", "SHARD(SHARD(x, d1, a1), d2, a2) = SHARD(SHARD(x, d2, a2), d1, a1)",
      "d1 != d2 and rank(a1) > rank(a2)", {Op.SHARD},
      match=_match_swap,
      lhs=lambda s: b.shard(b.shard(s["x"], s["d1"], s["a1"]), s["d2"], s["a2"]),
      rhs=lambda s, bd: b.shard(b.shard(s["x"], s["d2"], s["a2"]), s["d1"], s["a1"]),
      guard=_swap_ok, sample=_sample_swap)


# ---------------------------------------------------------------------------------------------
_LIFT_ELEMENTWISE = set(ELEMENTWISE)


def _match_lift_ew(t: Term, bd: Binding) -> Subst | None:
    for d, a in _tops(t.args):
        xs, mask = _split(t.args, d, a)
        if lift_ok(xs, mask, d, a):
            return {"op": t.op.name, "attrs": t.attrs, "xs": xs, "mask": mask, "d": d, "a": a}
    return None


def _sample_lift_ew(draw: Draw) -> tuple[Term, Binding]:
    d, a = draw.choice([("B", "dp"), ("H", "tp"), ("S", "cp")])
    op = draw.choice([Op.ADD, Op.MUL, Op.EXP, Op.SILU, Op.MAXIMUM, Op.POW, Op.WHERE])
    x = b.shard(fresh(["B", "H", "S"]), d, a)
    other = [dd for dd in ("B", "H", "S") if dd != d]
    y = b.shard(fresh(["B", "H", "S"]), d, a) if draw.bool() else fresh(other[:draw.int(0, 2)])
    match op:
        case Op.ADD | Op.MUL | Op.MAXIMUM:
            t = b.elementwise(op, [x, y] if draw.bool() else [y, x])
        case Op.POW:
            t = b.pow_(x, draw.choice([2, -1, 3]))
        case Op.WHERE:
            m = b.shard(fresh(["B", "H", "S"], domain="mask"), d, a)
            t = b.elementwise(op, [m, x, y])
        case _:
            t = b.unary(op, x)
    return t, draw_binding(draw)


def _lhs_ew(s: Subst) -> Term:
    return b.elementwise(Op[s["op"]], _join(s["xs"], s["mask"], s["d"], s["a"]), s["attrs"])


# an elementwise op of blocks is the block of the op (non-block operands lack d)
_rule("lift-shard-elementwise",
      "op(..SHARD(x_i, d, a)..y_j..) = SHARD(op(..x_i..y_j..), d, a)  (op elementwise)",
      "some operand is SHARD(., d, a); those share d's spec; no operand varies over a "
      "after unwrapping; non-block operands lack d", _LIFT_ELEMENTWISE,
      match=_match_lift_ew, lhs=_lhs_ew,
      rhs=lambda s, bd: b.shard(b.elementwise(Op[s["op"]], s["xs"], s["attrs"]), s["d"], s["a"]),
      guard=lambda s, bd: Op[s["op"]] in ELEMENTWISE and lift_ok(s["xs"], s["mask"], s["d"], s["a"]),
      sample=_sample_lift_ew)


def _match_lift_einsum(t: Term, bd: Binding) -> Subst | None:
    out = t.attrs[0]
    for d, a in _tops(t.args):
        if d not in out:
            continue
        xs, mask = _split(t.args, d, a)
        if lift_ok(xs, mask, d, a):
            return {"xs": xs, "mask": mask, "d": d, "a": a, "out": out}
    return None


def _sample_lift_einsum(draw: Draw) -> tuple[Term, Binding]:
    x, w = fresh(["B", "H"]), fresh(["H", "F"])
    if draw.bool():  # column-parallel: w sharded on the kept dim F
        args, out = [x, b.shard(w, "F", "tp")], ("B", "F")
    else:  # data-parallel: x sharded on the kept dim B
        args, out = [b.shard(x, "B", "dp"), w], ("B", "F")
    return b.einsum(sorted(args, key=b.skey), out), draw_binding(draw)


# a contraction that keeps d, of blocks along d, is the block of the contraction
_rule("lift-shard-einsum",
      "EINSUM(..SHARD(x_i, d, a)..y_j.., out) = SHARD(EINSUM(..x_i..y_j.., out), d, a)",
      "d in out, and the lift-shard-elementwise condition", {Op.EINSUM},
      match=_match_lift_einsum,
      lhs=lambda s: b.einsum(_join(s["xs"], s["mask"], s["d"], s["a"]), s["out"]),
      rhs=lambda s, bd: b.shard(b.einsum(s["xs"], s["out"]), s["d"], s["a"]),
      guard=lambda s, bd: s["d"] in s["out"] and lift_ok(s["xs"], s["mask"], s["d"], s["a"]),
      sample=_sample_lift_einsum)


# ---------------------------------------------------------------------------------------------
# reductions and movement over other dims
def _single_shard(t: Term) -> Subst | None:
    x = t.args[0]
    if x.op is not Op.SHARD:
        return None
    return {"x": x.args[0], "d": x.attrs[0], "a": x.attrs[1]}


def _wf(s: Subst) -> bool:
    return s["a"] not in b.varying(s["x"]) and s["d"] in s["x"].dim_names


def _match_rmax(t: Term, bd: Binding) -> Subst | None:
    s = _single_shard(t)
    if s is None or s["d"] in t.attrs[0]:
        return None
    s["dims"] = t.attrs[0]
    return s


def _sample_rmax(draw: Draw) -> tuple[Term, Binding]:
    x = b.shard(fresh(["B", "V"]), "B", draw.choice(["dp", "mb"]))
    return b.reduce_max(x, ["V"]), draw_binding(draw)


# max over other dims commutes with taking a block along d
_rule("lift-shard-reduce-max",
      "REDUCE_MAX(SHARD(x, d, a), dims) = SHARD(REDUCE_MAX(x, dims), d, a)", "d not in dims",
      {Op.REDUCE_MAX}, match=_match_rmax,
      lhs=lambda s: b.reduce_max(b.shard(s["x"], s["d"], s["a"]), s["dims"]),
      rhs=lambda s, bd: b.shard(b.reduce_max(s["x"], s["dims"]), s["d"], s["a"]),
      guard=lambda s, bd: s["d"] not in s["dims"] and _wf(s), sample=_sample_rmax)


def _rename_ok(s: Subst, bd: Binding) -> bool:
    if not _wf(s):
        return False
    if s["d"] == s["old"]:
        return bool(s["nshards"]) and s["nshards"][-1] == s["a"]
    return True


def _match_rename(t: Term, bd: Binding) -> Subst | None:
    s = _single_shard(t)
    if s is None:
        return None
    s["old"], s["new"] = t.attrs
    s["nshards"] = t.dim(s["new"]).shards
    return s if _rename_ok(s, bd) else None


def _sample_rename(draw: Draw) -> tuple[Term, Binding]:
    d = draw.choice(["B", "S"])
    x = b.shard(fresh(["B", "S"]), d, "dp")
    bd = draw_binding(draw)
    return b.rename(x, "S", "K"), bd.replace(K=bd["S"])


def _rename_d(s: Subst) -> str:
    return s["new"] if s["d"] == s["old"] else s["d"]


def _rename_inner(s: Subst) -> tuple[str, ...]:
    sh = tuple(s["nshards"])
    return sh[:-1] if s["d"] == s["old"] else sh


# renaming commutes with taking a block (the block's dim is renamed with it)
_rule("lift-shard-rename",
      "RENAME(SHARD(x, d, a), old, new) = SHARD(RENAME(x, old, new), d', a)  (d' = new if d = old)",
      "the output spec of new is nshards; if d = old, nshards ends with a (the inner RENAME "
      "gets nshards without it)", {Op.RENAME}, match=_match_rename,
      lhs=lambda s: b.rename(b.shard(s["x"], s["d"], s["a"]), s["old"], s["new"], s["nshards"]),
      rhs=lambda s, bd: b.shard(b.rename(s["x"], s["old"], s["new"], _rename_inner(s)),
                                _rename_d(s), s["a"]),
      guard=_rename_ok, sample=_sample_rename)


def _match_chunk(t: Term, bd: Binding) -> Subst | None:
    s = _single_shard(t)
    if s is None or s["d"] == t.attrs[0]:
        return None
    s["cd"], s["parts"], s["index"] = t.attrs
    return s


def _sample_chunk(draw: Draw) -> tuple[Term, Binding]:
    x = b.shard(fresh(["B", "H"]), "B", "dp")
    return b.chunk(x, "H", 2, draw.int(0, 1)), draw_binding(draw)


# a chunk along another dim commutes with taking a block
_rule("lift-shard-chunk",
      "CHUNK(SHARD(x, d, a), c, parts, i) = SHARD(CHUNK(x, c, parts, i), d, a)", "c != d",
      {Op.CHUNK}, match=_match_chunk,
      lhs=lambda s: b.chunk(b.shard(s["x"], s["d"], s["a"]), s["cd"], s["parts"], s["index"]),
      rhs=lambda s, bd: b.shard(b.chunk(s["x"], s["cd"], s["parts"], s["index"]), s["d"], s["a"]),
      guard=lambda s, bd: s["cd"] != s["d"] and _wf(s), sample=_sample_chunk)


def _match_concat(t: Term, bd: Binding) -> Subst | None:
    c = t.attrs[0]
    for d, a in _tops(t.args):
        if d == c:
            continue
        xs, mask = _split(t.args, d, a)
        if all(mask) and lift_ok(xs, mask, d, a):
            return {"xs": xs, "d": d, "a": a, "cd": c, "cshards": t.dim(c).shards}
    return None


def _concat_spec(s: Subst) -> DimSpec:
    return DimSpec(s["cd"], tuple(s["cshards"]))


def _sample_concat(draw: Draw) -> tuple[Term, Binding]:
    x = fresh(["B", "H"])
    parts = [b.shard(b.chunk(x, "H", 2, i), "B", "dp") for i in range(2)]
    return b.concat(parts, "H", DimSpec("H")), draw_binding(draw)


# concatenating blocks along another dim is the block of the concatenation
_rule("lift-shard-concat",
      "CONCAT(SHARD(x_i, d, a)..., c) = SHARD(CONCAT(x_i..., c), d, a)",
      "c != d; every operand is SHARD(., d, a) with the same spec of d", {Op.CONCAT},
      match=_match_concat,
      lhs=lambda s: b.concat([b.shard(x, s["d"], s["a"]) for x in s["xs"]], s["cd"],
                             _concat_spec(s)),
      rhs=lambda s, bd: b.shard(b.concat(s["xs"], s["cd"], _concat_spec(s)), s["d"], s["a"]),
      guard=lambda s, bd: s["cd"] != s["d"] and lift_ok(s["xs"], (True,) * len(s["xs"]),
                                                          s["d"], s["a"]),
      sample=_sample_concat)


# ---------------------------------------------------------------------------------------------
# ONE_HOT
def _oh_out_ok(s: Subst, bd: Binding) -> bool:
    sh = tuple(s["vshards"])
    return (bool(sh) and not sh[-1].startswith("#") and sh[-1] not in b.varying(s["idx"])
            and s["v"] not in s["idx"].dim_names)


def _match_oh_out(t: Term, bd: Binding) -> Subst | None:
    s = {"idx": t.args[0], "v": t.attrs[0], "vshards": t.dim(t.attrs[0]).shards}
    return s if _oh_out_ok(s, bd) else None


def _sample_oh_out(draw: Draw) -> tuple[Term, Binding]:
    idx = fresh_index(["B", "S"], "V")
    if draw.bool():
        idx = b.shard(idx, "B", "dp")
    return b.one_hot(idx, "V", ("tp",)), draw_binding(draw)


# vocab-parallel lookup: the one-hot over the rank's vocab block is the block of the one-hot
_rule("onehot-shard-out",
      "ONE_HOT(idx, v)[v: s+(a,)] = SHARD(ONE_HOT(idx, v)[v: s], v, a)",
      "v's spec in the output ends with a mesh axis a, and idx does not vary over a",
      {Op.ONE_HOT}, match=_match_oh_out,
      lhs=lambda s: b.one_hot(s["idx"], s["v"], s["vshards"]),
      rhs=lambda s, bd: b.shard(b.one_hot(s["idx"], s["v"], s["vshards"][:-1]), s["v"],
                                s["vshards"][-1]),
      guard=_oh_out_ok, sample=_sample_oh_out)


def _oh_idx_ok(s: Subst, bd: Binding) -> bool:
    return s["a"] not in s["vshards"] and _wf(s) and s["d"] != s["v"]


def _match_oh_idx(t: Term, bd: Binding) -> Subst | None:
    x = t.args[0]
    if x.op is not Op.SHARD:
        return None
    s = {"x": x.args[0], "d": x.attrs[0], "a": x.attrs[1], "v": t.attrs[0],
         "vshards": t.dim(t.attrs[0]).shards}
    return s if _oh_idx_ok(s, bd) else None


def _sample_oh_idx(draw: Draw) -> tuple[Term, Binding]:
    idx = fresh_index(["B", "S"], "V")
    return b.one_hot(b.shard(idx, draw.choice(["B", "S"]), "dp"), "V"), draw_binding(draw)


# one-hot is positionwise in the indices: a block of indices gives a block of one-hots
_rule("lift-shard-onehot",
      "ONE_HOT(SHARD(idx, d, a), v) = SHARD(ONE_HOT(idx, v), d, a)",
      "a is not in v's spec", {Op.ONE_HOT}, match=_match_oh_idx,
      lhs=lambda s: b.one_hot(b.shard(s["x"], s["d"], s["a"]), s["v"], s["vshards"]),
      rhs=lambda s, bd: b.shard(b.one_hot(s["x"], s["v"], s["vshards"]), s["d"], s["a"]),
      guard=_oh_idx_ok, sample=_sample_oh_idx)


def _topk_ok(s: Subst, bd: Binding) -> bool:
    return _wf(s) and s["d"] != s["e"]


def _match_topk(t: Term, bd: Binding) -> Subst | None:
    x = t.args[0]
    if len(t.args) != 1 or x.op is not Op.SHARD:  # the eligibility form: lift-shard-topk-elig
        return None
    s = {"x": x.args[0], "d": x.attrs[0], "a": x.attrs[1], "e": t.attrs[0], "k": t.attrs[1]}
    return s if _topk_ok(s, bd) else None


def _sample_topk(draw: Draw) -> tuple[Term, Binding]:
    d = draw.choice(["B", "S"])
    x = b.shard(fresh(["B", "S", "H"]), d, draw.choice(["dp", "cp"]))
    return b.topk_mask(x, "H", draw.int(1, 3)), draw_binding(draw)


# top-k along e acts on each position of the other dims alone: a block along d != e gives the
# block of the mask (MoE routing on the rank's tokens is the rank's rows of the global routing)
_rule("lift-shard-topk",
      "TOPK_MASK(SHARD(x, d, a), e, k) = SHARD(TOPK_MASK(x, e, k), d, a)",
      "d != e, and x does not vary over a",
      {Op.TOPK_MASK}, match=_match_topk,
      lhs=lambda s: b.topk_mask(b.shard(s["x"], s["d"], s["a"]), s["e"], s["k"]),
      rhs=lambda s, bd: b.shard(b.topk_mask(s["x"], s["e"], s["k"]), s["d"], s["a"]),
      guard=_topk_ok, sample=_sample_topk)


def _topk_elig_ok(s: Subst, bd: Binding) -> bool:
    return (s["d"] != s["e"] and lift_ok((s["x"], s["el"]), (True, True), s["d"], s["a"]))


def _match_topk_elig(t: Term, bd: Binding) -> Subst | None:
    if len(t.args) != 2:
        return None
    x, el = t.args
    if not (x.op is Op.SHARD and _is_shard(el, x.attrs[0], x.attrs[1])):
        return None
    s = {"x": x.args[0], "el": el.args[0], "d": x.attrs[0], "a": x.attrs[1], "e": t.attrs[0],
         "k": t.attrs[1]}
    return s if _topk_elig_ok(s, bd) else None


def _sample_topk_elig(draw: Draw) -> tuple[Term, Binding]:
    d, a = draw.choice(["B", "S"]), draw.choice(["dp", "cp"])
    x = fresh(["B", "S", "H"])
    el = b.topk_mask(fresh(["B", "S", "H"]), "H", draw.int(1, 3))   # a 0/1 eligibility
    return (b.topk_mask(b.shard(x, d, a), "H", draw.int(1, 3), b.shard(el, d, a)),
            draw_binding(draw))


# top-k among eligible entries along e acts on each position of the other dims alone (score and
# eligibility blocks along d != e give the block of the mask: group-limited MoE routing on the
# rank's tokens)
_rule("lift-shard-topk-elig",
      "TOPK_MASK(SHARD(x, d, a), SHARD(el, d, a), e, k) = SHARD(TOPK_MASK(x, el, e, k), d, a)",
      "d != e, x and el have the same spec of d and do not vary over a",
      {Op.TOPK_MASK}, match=_match_topk_elig,
      lhs=lambda s: b.topk_mask(b.shard(s["x"], s["d"], s["a"]), s["e"], s["k"],
                                b.shard(s["el"], s["d"], s["a"])),
      rhs=lambda s, bd: b.shard(b.topk_mask(s["x"], s["e"], s["k"], s["el"]), s["d"], s["a"]),
      guard=_topk_elig_ok, sample=_sample_topk_elig)


def _shift_ok(s: Subst, bd: Binding) -> bool:
    return _wf(s) and s["d"] != s["e"]


def _match_shift(t: Term, bd: Binding) -> Subst | None:
    x = t.args[0]
    if x.op is not Op.SHARD:
        return None
    s = {"x": x.args[0], "d": x.attrs[0], "a": x.attrs[1], "e": t.attrs[0]}
    return s if _shift_ok(s, bd) else None


def _sample_shift(draw: Draw) -> tuple[Term, Binding]:
    d, e = draw.choice([("B", "S"), ("S", "B"), ("B", "H")])
    x = b.shard(fresh(["B", "S", "H"]), d, draw.choice(["dp", "tp"]))
    return b.shift(x, e), draw_binding(draw)


# a shift along e moves positions along e only: a block along d != e gives the block of the
# shifted tensor (next-token targets of the rank's sequences, e.g. DeepSeek-V3's MTP labels)
_rule("lift-shard-shift",
      "SHIFT(SHARD(x, d, a), e) = SHARD(SHIFT(x, e), d, a)",
      "d != e, and x does not vary over a",
      {Op.SHIFT}, match=_match_shift,
      lhs=lambda s: b.shift(b.shard(s["x"], s["d"], s["a"]), s["e"]),
      rhs=lambda s, bd: b.shard(b.shift(s["x"], s["e"]), s["d"], s["a"]),
      guard=_shift_ok, sample=_sample_shift)
