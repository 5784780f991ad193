"""PERMUTE rules: the load-balanced context-parallel chunk map, lifted like a SHARD.

``PERMUTE(x, d, order)`` is the block permutation of dim ``d`` that context parallelism applies
to the sequence before ``Shard(S)`` over ``cp`` (Megatron-LM / TransformerEngine load balancing:
``S`` cut into ``2 cp`` chunks, CP rank ``c`` holds chunks ``c`` and ``2 cp - 1 - c``): block
``j`` of the output is block ``order[j]`` of ``x`` (``spec_lang/cp.py``).

An op that does not mix positions along ``d`` commutes with the permutation, so the rules push
``PERMUTE`` outward (toward the root) exactly as ``rewriting/lifting.py`` pushes ``SHARD``, with
no guard on ranks (a permutation is the same on every rank). Two facts remove it:

* a contraction over ``d`` of operands that are all permuted along ``d`` by the same order is
  the contraction of the unpermuted operands (a sum is invariant under reordering its terms),
  and a max over ``d`` likewise;
* permutations along one dim compose (``PERMUTE(PERMUTE(x, d, o1), d, o2)`` takes block
  ``o1[o2[j]]``) and the identity order is the identity.

Nested permutations of different dims are kept in one order (``perm-swap``: the outer one has
the smaller dim name). ``SHARD`` stays outside ``PERMUTE`` (``lift-shard-permute``).
"""

from __future__ import annotations

from spec_lang.term import ELEMENTWISE, Binding, DimSpec, Op, Term

from rewriting import build as b
from rewriting.instances import draw_binding, fresh, fresh_index
from rewriting.rule import Draw, Rule, Subst, register

__all__ = ["perm_ok", "compose"]


def _rule(name: str, law: str, guard_doc: str, ops: set[Op], match, lhs, rhs, guard,
          sample) -> Rule:
    return register(Rule(name, law, guard_doc, frozenset(ops), match, lhs, rhs, guard, sample,
                         group="permute"))


def _is_perm(x: Term, d: str, o: tuple[int, ...]) -> bool:
    return x.op is Op.PERMUTE and x.attrs[0] == d and x.attrs[1] == o


def _is_order(o: object) -> bool:
    return (isinstance(o, tuple) and len(o) >= 1 and all(isinstance(j, int) for j in o)
            and sorted(o) == list(range(len(o))))


def compose(o1: tuple[int, ...], o2: tuple[int, ...]) -> tuple[int, ...]:
    """The order of ``PERMUTE(PERMUTE(x, d, o1), d, o2)``: block ``j`` is ``x``'s ``o1[o2[j]]``."""
    return tuple(o1[j] for j in o2)


def perm_ok(xs: tuple[Term, ...], mask: tuple[bool, ...], d: str) -> bool:
    """The unwrapped operands ``xs[i]`` with ``mask[i]`` have dim ``d`` with one spec; every
    other operand lacks ``d``."""
    spec = None
    if len(xs) != len(mask) or not any(mask):
        return False
    for x, m in zip(xs, mask):
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


def _split(args: tuple[Term, ...], d: str, o: tuple[int, ...]
           ) -> tuple[tuple[Term, ...], tuple[bool, ...]]:
    mask = tuple(_is_perm(x, d, o) for x in args)
    return tuple(x.args[0] if m else x for x, m in zip(args, mask)), mask


def _join(xs: tuple[Term, ...], mask: tuple[bool, ...], d: str, o: tuple[int, ...]
          ) -> tuple[Term, ...]:
    return tuple(b.permute(x, d, o) if m else x for x, m in zip(xs, mask))


def _tops(args: tuple[Term, ...]) -> list[tuple[str, tuple[int, ...]]]:
    seen: list[tuple[str, tuple[int, ...]]] = []
    for x in args:
        if x.op is Op.PERMUTE and (x.attrs[0], x.attrs[1]) not in seen:
            seen.append((x.attrs[0], x.attrs[1]))
    return seen


def _draw_order(draw: Draw, n: int) -> tuple[int, ...]:
    o = list(range(n))
    for i in range(n - 1, 0, -1):
        j = draw.int(0, i)
        o[i], o[j] = o[j], o[i]
    return tuple(o)


def _draw_parts(draw: Draw, bd: Binding, d: str = "S") -> int:
    return draw.choice([p for p in (2, 3, 4, 6) if bd[d] % p == 0])


def _lb(cp: int) -> tuple[int, ...]:
    """The load-balanced order for ``cp`` ranks (``spec_lang.cp.load_balanced_order``)."""
    out: list[int] = []
    for c in range(cp):
        out += [c, 2 * cp - 1 - c]
    return tuple(out)


def _sample_order(draw: Draw, bd: Binding, d: str = "S") -> tuple[int, ...]:
    p = _draw_parts(draw, bd, d)
    return _lb(p // 2) if p % 2 == 0 and draw.bool() else _draw_order(draw, p)


# ---------------------------------------------------------------------------------------------
def _swap_ok(s: Subst, bd: Binding) -> bool:
    return s["d1"] < s["d2"] and _is_order(s["o1"]) and _is_order(s["o2"])


def _match_swap(t: Term, bd: Binding) -> Subst | None:
    y = t.args[0]
    if y.op is not Op.PERMUTE:
        return None
    s = {"x": y.args[0], "d1": y.attrs[0], "o1": y.attrs[1], "d2": t.attrs[0], "o2": t.attrs[1]}
    return s if _swap_ok(s, bd) else None


def _sample_swap(draw: Draw) -> tuple[Term, Binding]:
    bd = draw_binding(draw)
    x = fresh(["B", "S", "H"])
    d1, d2 = draw.choice([("B", "S"), ("H", "S"), ("B", "H")])
    return (b.permute(b.permute(x, d1, _sample_order(draw, bd, d1)), d2,
                      _sample_order(draw, bd, d2)), bd)


# permutations along different dims commute; the smaller dim name goes outside
_rule("perm-swap", "PERMUTE(PERMUTE(x, d1, o1), d2, o2) = PERMUTE(PERMUTE(x, d2, o2), d1, o1)",
      "d1 < d2 (by name)", {Op.PERMUTE}, match=_match_swap,
      lhs=lambda s: b.permute(b.permute(s["x"], s["d1"], s["o1"]), s["d2"], s["o2"]),
      rhs=lambda s, bd: b.permute(b.permute(s["x"], s["d2"], s["o2"]), s["d1"], s["o1"]),
      guard=_swap_ok, sample=_sample_swap)


def _compose_ok(s: Subst, bd: Binding) -> bool:
    return _is_order(s["o1"]) and _is_order(s["o2"]) and len(s["o1"]) == len(s["o2"])


def _match_compose(t: Term, bd: Binding) -> Subst | None:
    y = t.args[0]
    if y.op is not Op.PERMUTE or y.attrs[0] != t.attrs[0]:
        return None
    s = {"x": y.args[0], "d": t.attrs[0], "o1": y.attrs[1], "o2": t.attrs[1]}
    return s if _compose_ok(s, bd) else None


def _sample_compose(draw: Draw) -> tuple[Term, Binding]:
    bd = draw_binding(draw)
    x = fresh(["B", "S"])
    o1 = _sample_order(draw, bd)
    o2 = _draw_order(draw, len(o1))
    return b.permute(b.permute(x, "S", o1), "S", o2), bd


# two permutations of the same blocks are one
_rule("perm-compose",
      "PERMUTE(PERMUTE(x, d, o1), d, o2) = PERMUTE(x, d, o) with o[j] = o1[o2[j]]",
      "o1 and o2 have the same number of blocks", {Op.PERMUTE}, match=_match_compose,
      lhs=lambda s: b.permute(b.permute(s["x"], s["d"], s["o1"]), s["d"], s["o2"]),
      rhs=lambda s, bd: b.permute(s["x"], s["d"], compose(s["o1"], s["o2"])),
      guard=_compose_ok, sample=_sample_compose)


def _match_identity(t: Term, bd: Binding) -> Subst | None:
    o = t.attrs[1]
    if o != tuple(range(len(o))):
        return None
    return {"x": t.args[0], "d": t.attrs[0], "n": len(o)}


def _sample_identity(draw: Draw) -> tuple[Term, Binding]:
    bd = draw_binding(draw)
    return b.permute(fresh(["B", "S"]), "S", tuple(range(_draw_parts(draw, bd)))), bd


# the identity order moves nothing
_rule("perm-identity", "PERMUTE(x, d, (0, 1, ..., n-1)) = x", "none", {Op.PERMUTE},
      match=_match_identity,
      lhs=lambda s: b.permute(s["x"], s["d"], tuple(range(s["n"]))),
      rhs=lambda s, bd: s["x"],
      guard=lambda s, bd: isinstance(s["n"], int) and s["n"] >= 1, sample=_sample_identity)


# ---------------------------------------------------------------------------------------------
def _match_lift_ew(t: Term, bd: Binding) -> Subst | None:
    for d, o in _tops(t.args):
        xs, mask = _split(t.args, d, o)
        if perm_ok(xs, mask, d):
            return {"op": t.op.name, "attrs": t.attrs, "xs": xs, "mask": mask, "d": d, "o": o}
    return None


def _sample_lift_ew(draw: Draw) -> tuple[Term, Binding]:
    bd = draw_binding(draw)
    o = _sample_order(draw, bd)
    op = draw.choice([Op.ADD, Op.MUL, Op.EXP, Op.SILU, Op.MAXIMUM, Op.POW, Op.WHERE])
    x = b.permute(fresh(["B", "H", "S"]), "S", o)
    y = b.permute(fresh(["B", "S"]), "S", o) if draw.bool() else fresh(["B", "H"][:draw.int(0, 2)])
    match op:
        case Op.ADD | Op.MUL | Op.MAXIMUM:
            t = b.elementwise(op, [x, y] if draw.bool() else [y, x])
        case Op.POW:
            t = b.pow_(x, draw.choice([2, -1, 3]))
        case Op.WHERE:
            m = b.permute(fresh(["B", "S"], domain="mask"), "S", o)
            t = b.elementwise(op, [m, x, y])
        case _:
            t = b.unary(op, x)
    return t, bd


# an elementwise op of permuted operands is the permuted op (others lack d)
_rule("lift-perm-elementwise",
      "op(..PERMUTE(x_i, d, o)..y_j..) = PERMUTE(op(..x_i..y_j..), d, o)  (op elementwise)",
      "some operand is PERMUTE(., d, o); those share d's spec; the other operands lack d",
      set(ELEMENTWISE), match=_match_lift_ew,
      lhs=lambda s: b.elementwise(Op[s["op"]], _join(s["xs"], s["mask"], s["d"], s["o"]),
                                  s["attrs"]),
      rhs=lambda s, bd: b.permute(b.elementwise(Op[s["op"]], s["xs"], s["attrs"]), s["d"],
                                  s["o"]),
      guard=lambda s, bd: (Op[s["op"]] in ELEMENTWISE and _is_order(s["o"])
                           and perm_ok(s["xs"], s["mask"], s["d"])),
      sample=_sample_lift_ew)


def _match_einsum(keep: bool):
    def match(t: Term, bd: Binding) -> Subst | None:
        out = t.attrs[0]
        for d, o in _tops(t.args):
            if (d in out) != keep:
                continue
            xs, mask = _split(t.args, d, o)
            if perm_ok(xs, mask, d):
                return {"xs": xs, "mask": mask, "d": d, "o": o, "out": out}
        return None
    return match


def _sample_einsum(keep: bool):
    def sample(draw: Draw) -> tuple[Term, Binding]:
        bd = draw_binding(draw)
        o = _sample_order(draw, bd)
        q, k = fresh(["B", "S", "H"]), fresh(["S", "H"])
        args = [b.permute(q, "S", o), b.permute(k, "S", o) if draw.bool() or not keep
                else fresh(["H"])]
        out = ("B", "S") if keep else draw.choice([("B",), ("B", "H"), ()])
        return b.einsum(sorted(args, key=b.skey), out), bd
    return sample


def _einsum_ok(keep: bool):
    return lambda s, bd: ((s["d"] in s["out"]) == keep and _is_order(s["o"])
                          and perm_ok(s["xs"], s["mask"], s["d"]))


# a contraction that keeps d, of operands permuted along d, is the permuted contraction
_rule("lift-perm-einsum",
      "EINSUM(..PERMUTE(x_i, d, o)..y_j.., out) = PERMUTE(EINSUM(..x_i..y_j.., out), d, o)",
      "d in out, and the lift-perm-elementwise condition", {Op.EINSUM},
      match=_match_einsum(True),
      lhs=lambda s: b.einsum(_join(s["xs"], s["mask"], s["d"], s["o"]), s["out"]),
      rhs=lambda s, bd: b.permute(b.einsum(s["xs"], s["out"]), s["d"], s["o"]),
      guard=_einsum_ok(True), sample=_sample_einsum(True))

# a sum over d does not depend on the order of d's positions
_rule("einsum-perm-contract",
      "EINSUM(..PERMUTE(x_i, d, o)..y_j.., out) = EINSUM(..x_i..y_j.., out)",
      "d not in out; every operand with d is PERMUTE(., d, o) (one o, one spec of d)",
      {Op.EINSUM}, match=_match_einsum(False),
      lhs=lambda s: b.einsum(_join(s["xs"], s["mask"], s["d"], s["o"]), s["out"]),
      rhs=lambda s, bd: b.einsum(s["xs"], s["out"]),
      guard=_einsum_ok(False), sample=_sample_einsum(False))


# ---------------------------------------------------------------------------------------------
def _single(t: Term) -> Subst | None:
    x = t.args[0]
    if x.op is not Op.PERMUTE:
        return None
    return {"x": x.args[0], "d": x.attrs[0], "o": x.attrs[1]}


def _match_rmax(keep: bool):
    def match(t: Term, bd: Binding) -> Subst | None:
        s = _single(t)
        if s is None or (s["d"] not in t.attrs[0]) != keep:
            return None
        s["dims"] = t.attrs[0]
        return s
    return match


def _sample_rmax(keep: bool):
    def sample(draw: Draw) -> tuple[Term, Binding]:
        bd = draw_binding(draw)
        x = b.permute(fresh(["B", "S", "H"]), "S", _sample_order(draw, bd))
        dims = draw.choice([["H"], ["B", "H"]]) if keep else draw.choice([["S"], ["S", "H"]])
        return b.reduce_max(x, dims), bd
    return sample


def _wf(s: Subst) -> bool:
    return _is_order(s["o"]) and s["d"] in s["x"].dim_names


# max over other dims commutes with the permutation of d
_rule("lift-perm-reduce-max",
      "REDUCE_MAX(PERMUTE(x, d, o), dims) = PERMUTE(REDUCE_MAX(x, dims), d, o)", "d not in dims",
      {Op.REDUCE_MAX}, match=_match_rmax(True),
      lhs=lambda s: b.reduce_max(b.permute(s["x"], s["d"], s["o"]), s["dims"]),
      rhs=lambda s, bd: b.permute(b.reduce_max(s["x"], s["dims"]), s["d"], s["o"]),
      guard=lambda s, bd: s["d"] not in s["dims"] and _wf(s), sample=_sample_rmax(True))

def _match_topk(t: Term, bd: Binding) -> Subst | None:
    x = t.args[0]
    if len(t.args) != 1 or x.op is not Op.PERMUTE:  # the eligibility form: lift-perm-topk-elig
        return None
    s = {"x": x.args[0], "d": x.attrs[0], "o": x.attrs[1], "e": t.attrs[0], "k": t.attrs[1]}
    return s if s["d"] != s["e"] and _wf(s) else None


def _sample_topk(draw: Draw) -> tuple[Term, Binding]:
    bd = draw_binding(draw)
    d = draw.choice(["B", "S"])
    x = b.permute(fresh(["B", "S", "H"]), d, _sample_order(draw, bd, d))
    return b.topk_mask(x, "H", draw.int(1, 3)), bd


# top-k along e acts on each position of the other dims alone, so it commutes with a
# permutation of another dim (MoE routing on context-parallel load-balanced tokens)
_rule("lift-perm-topk",
      "TOPK_MASK(PERMUTE(x, d, o), e, k) = PERMUTE(TOPK_MASK(x, e, k), d, o)", "d != e",
      {Op.TOPK_MASK}, match=_match_topk,
      lhs=lambda s: b.topk_mask(b.permute(s["x"], s["d"], s["o"]), s["e"], s["k"]),
      rhs=lambda s, bd: b.permute(b.topk_mask(s["x"], s["e"], s["k"]), s["d"], s["o"]),
      guard=lambda s, bd: s["d"] != s["e"] and _wf(s), sample=_sample_topk)


def _topk_elig_ok(s: Subst, bd: Binding) -> bool:
    return s["d"] != s["e"] and _wf(s) and _wf({**s, "x": s["el"]})


def _match_topk_elig(t: Term, bd: Binding) -> Subst | None:
    if len(t.args) != 2:
        return None
    x, el = t.args
    if x.op is not Op.PERMUTE or el.op is not Op.PERMUTE or el.attrs != x.attrs:
        return None
    s = {"x": x.args[0], "el": el.args[0], "d": x.attrs[0], "o": x.attrs[1], "e": t.attrs[0],
         "k": t.attrs[1]}
    return s if _topk_elig_ok(s, bd) else None


def _sample_topk_elig(draw: Draw) -> tuple[Term, Binding]:
    bd = draw_binding(draw)
    d = draw.choice(["B", "S"])
    o = _sample_order(draw, bd, d)
    el = b.topk_mask(fresh(["B", "S", "H"]), "H", draw.int(1, 3))
    return (b.topk_mask(b.permute(fresh(["B", "S", "H"]), d, o), "H", draw.int(1, 3),
                        b.permute(el, d, o)), bd)


_rule("lift-perm-topk-elig",
      "TOPK_MASK(PERMUTE(x, d, o), PERMUTE(el, d, o), e, k) = PERMUTE(TOPK_MASK(x, el, e, k), d, o)",
      "d != e", {Op.TOPK_MASK}, match=_match_topk_elig,
      lhs=lambda s: b.topk_mask(b.permute(s["x"], s["d"], s["o"]), s["e"], s["k"],
                                b.permute(s["el"], s["d"], s["o"])),
      rhs=lambda s, bd: b.permute(b.topk_mask(s["x"], s["e"], s["k"], s["el"]), s["d"], s["o"]),
      guard=_topk_elig_ok, sample=_sample_topk_elig)

# a max over d does not depend on the order of d's positions
_rule("reduce-max-perm", "REDUCE_MAX(PERMUTE(x, d, o), dims) = REDUCE_MAX(x, dims)", "d in dims",
      {Op.REDUCE_MAX}, match=_match_rmax(False),
      lhs=lambda s: b.reduce_max(b.permute(s["x"], s["d"], s["o"]), s["dims"]),
      rhs=lambda s, bd: b.reduce_max(s["x"], s["dims"]),
      guard=lambda s, bd: s["d"] in s["dims"] and _wf(s), sample=_sample_rmax(False))


def _rename_ok(s: Subst, bd: Binding) -> bool:
    if not _wf(s):
        return False
    if s["d"] == s["old"]:
        return tuple(s["nshards"]) == s["x"].dim(s["d"]).shards
    return True


def _match_rename(t: Term, bd: Binding) -> Subst | None:
    s = _single(t)
    if s is None:
        return None
    s["old"], s["new"] = t.attrs
    s["nshards"] = t.dim(s["new"]).shards
    return s if _rename_ok(s, bd) else None


def _sample_rename(draw: Draw) -> tuple[Term, Binding]:
    bd = draw_binding(draw)
    d = draw.choice(["B", "S"])
    x = b.permute(fresh(["B", "S"]), d, _sample_order(draw, bd, d))
    return b.rename(x, "S", "K"), bd.replace(K=bd["S"])


# renaming commutes with the permutation (the permuted dim is renamed with it)
_rule("lift-perm-rename",
      "RENAME(PERMUTE(x, d, o), old, new) = PERMUTE(RENAME(x, old, new), d', o)  (d' = new if d = old)",
      "the output spec of new is nshards; if d = old, nshards is x's spec of d",
      {Op.RENAME}, match=_match_rename,
      lhs=lambda s: b.rename(b.permute(s["x"], s["d"], s["o"]), s["old"], s["new"], s["nshards"]),
      rhs=lambda s, bd: b.permute(b.rename(s["x"], s["old"], s["new"], s["nshards"]),
                                  s["new"] if s["d"] == s["old"] else s["d"], s["o"]),
      guard=_rename_ok, sample=_sample_rename)


def _match_chunk(t: Term, bd: Binding) -> Subst | None:
    s = _single(t)
    if s is None or s["d"] == t.attrs[0]:
        return None
    s["cd"], s["parts"], s["index"] = t.attrs
    return s


def _sample_chunk(draw: Draw) -> tuple[Term, Binding]:
    bd = draw_binding(draw)
    x = b.permute(fresh(["S", "H"]), "S", _sample_order(draw, bd))
    return b.chunk(x, "H", 2, draw.int(0, 1)), bd


# a chunk along another dim commutes with the permutation
_rule("lift-perm-chunk",
      "CHUNK(PERMUTE(x, d, o), c, parts, i) = PERMUTE(CHUNK(x, c, parts, i), d, o)", "c != d",
      {Op.CHUNK}, match=_match_chunk,
      lhs=lambda s: b.chunk(b.permute(s["x"], s["d"], s["o"]), s["cd"], s["parts"], s["index"]),
      rhs=lambda s, bd: b.permute(b.chunk(s["x"], s["cd"], s["parts"], s["index"]), s["d"],
                                  s["o"]),
      guard=lambda s, bd: s["cd"] != s["d"] and _wf(s), sample=_sample_chunk)


def _match_concat(t: Term, bd: Binding) -> Subst | None:
    c = t.attrs[0]
    for d, o in _tops(t.args):
        if d == c:
            continue
        xs, mask = _split(t.args, d, o)
        if all(mask) and perm_ok(xs, mask, d):
            return {"xs": xs, "d": d, "o": o, "cd": c, "cshards": t.dim(c).shards}
    return None


def _sample_concat(draw: Draw) -> tuple[Term, Binding]:
    bd = draw_binding(draw)
    o = _sample_order(draw, bd)
    x = fresh(["S", "H"])
    parts = [b.permute(b.chunk(x, "H", 2, i), "S", o) for i in range(2)]
    return b.concat(parts, "H", DimSpec("H")), bd


# concatenating permuted blocks along another dim is the permuted concatenation
_rule("lift-perm-concat",
      "CONCAT(PERMUTE(x_i, d, o)..., c) = PERMUTE(CONCAT(x_i..., c), d, o)",
      "c != d; every operand is PERMUTE(., d, o) with the same spec of d", {Op.CONCAT},
      match=_match_concat,
      lhs=lambda s: b.concat([b.permute(x, s["d"], s["o"]) for x in s["xs"]], s["cd"],
                             DimSpec(s["cd"], tuple(s["cshards"]))),
      rhs=lambda s, bd: b.permute(b.concat(s["xs"], s["cd"], DimSpec(s["cd"], tuple(s["cshards"]))),
                                  s["d"], s["o"]),
      guard=lambda s, bd: (s["cd"] != s["d"] and _is_order(s["o"])
                           and perm_ok(s["xs"], (True,) * len(s["xs"]), s["d"])),
      sample=_sample_concat)


def _oh_ok(s: Subst, bd: Binding) -> bool:
    return _wf(s) and s["d"] != s["v"]


def _match_oh(t: Term, bd: Binding) -> Subst | None:
    s = _single(t)
    if s is None:
        return None
    s["v"], s["vshards"] = t.attrs[0], t.dim(t.attrs[0]).shards
    return s if _oh_ok(s, bd) else None


def _sample_oh(draw: Draw) -> tuple[Term, Binding]:
    bd = draw_binding(draw)
    idx = fresh_index(["B", "S"], "V")
    return b.one_hot(b.permute(idx, "S", _sample_order(draw, bd)), "V"), bd


# one-hot is positionwise in the indices
_rule("lift-perm-onehot", "ONE_HOT(PERMUTE(idx, d, o), v) = PERMUTE(ONE_HOT(idx, v), d, o)",
      "d != v", {Op.ONE_HOT}, match=_match_oh,
      lhs=lambda s: b.one_hot(b.permute(s["x"], s["d"], s["o"]), s["v"], s["vshards"]),
      rhs=lambda s, bd: b.permute(b.one_hot(s["x"], s["v"], s["vshards"]), s["d"], s["o"]),
      guard=_oh_ok, sample=_sample_oh)


# ---------------------------------------------------------------------------------------------
def _match_shard(t: Term, bd: Binding) -> Subst | None:
    x = t.args[0]
    if x.op is not Op.SHARD or x.attrs[0] == t.attrs[0]:
        return None
    s = {"x": x.args[0], "e": x.attrs[0], "a": x.attrs[1], "d": t.attrs[0], "o": t.attrs[1]}
    return s if _is_order(s["o"]) else None


def _sample_shard(draw: Draw) -> tuple[Term, Binding]:
    bd = draw_binding(draw)
    e, a = draw.choice([("B", "dp"), ("H", "tp"), ("B", "mb")])
    return b.permute(b.shard(fresh(["B", "S", "H"]), e, a), "S", _sample_order(draw, bd)), bd


# a permutation along d commutes with taking a block along another dim (on every rank)
_rule("lift-shard-permute",
      "PERMUTE(SHARD(x, e, a), d, o) = SHARD(PERMUTE(x, d, o), e, a)", "e != d",
      {Op.PERMUTE}, match=_match_shard,
      lhs=lambda s: b.permute(b.shard(s["x"], s["e"], s["a"]), s["d"], s["o"]),
      rhs=lambda s, bd: b.shard(b.permute(s["x"], s["d"], s["o"]), s["e"], s["a"]),
      guard=lambda s, bd: s["e"] != s["d"] and _is_order(s["o"]), sample=_sample_shard)


def _match_ar(t: Term, bd: Binding) -> Subst | None:
    s = _single(t)
    if s is None or t.attrs[1] not in ("sum", "max"):
        return None
    s["a"], s["r"] = t.attrs
    return s


def _sample_ar(draw: Draw) -> tuple[Term, Binding]:
    bd = draw_binding(draw)
    a = draw.choice(["dp", "cp"])
    x = b.part(fresh(["B", "S"]), a)
    return b.all_reduce(b.permute(x, "S", _sample_order(draw, bd)), a,
                        draw.choice(["sum", "max"])), bd


# a collective over ranks commutes with a permutation every rank applies
_rule("allreduce-permute",
      "ALL_REDUCE(PERMUTE(x, d, o), a, r) = PERMUTE(ALL_REDUCE(x, a, r), d, o)",
      "r in {sum, max}", {Op.ALL_REDUCE}, match=_match_ar,
      lhs=lambda s: b.all_reduce(b.permute(s["x"], s["d"], s["o"]), s["a"], s["r"]),
      rhs=lambda s, bd: b.permute(b.all_reduce(s["x"], s["a"], s["r"]), s["d"], s["o"]),
      guard=lambda s, bd: s["r"] in ("sum", "max") and _wf(s), sample=_sample_ar)
