"""A mesh axis of size 1: its one block is the whole tensor, its one addend the sum.

A plan written for ``dp = N`` and run with ``dp = 1`` (or ``microbatches(1)``) keeps its
``Shard(B)`` placements and collectives; a plan written *for* one rank may leave them out. Over
an axis ``a`` with ``|a| = 1`` there is one coordinate, so (issue 12, item 1):

* ``ALL_REDUCE(x, a, r) = x``, ``PART(x, a) = x``, ``BROADCAST(x, a, src) = x`` (one rank);
* a contraction or a max over a dim whose blocks are ``SHARD(x, d, a)`` sums / maxes the whole
  dim (``einsum-unit-axis``, ``reduce-max-unit-axis``): the size-1 analogue of
  ``allreduce-einsum-split`` / ``allreduce-max-shard`` with no collective;
* ``ALL_GATHER(SHARD(x, d, a), a, d) = x`` even when ``x`` varies over ``a``.

The guards read ``|a|`` from the binding (the real mesh sizes); nothing else changes, so these
rules never fire on a plan whose axes all have two or more ranks.
"""

from __future__ import annotations

from spec_lang.term import Binding, Op, Term

from rewriting import build as b
from rewriting.instances import draw_binding, fresh
from rewriting.rule import Draw, Rule, Subst, register

__all__: list[str] = []


def _rule(name: str, law: str, guard_doc: str, ops: set[Op], match, lhs, rhs, guard,
          sample) -> Rule:
    return register(Rule(name, law, guard_doc, frozenset(ops), match, lhs, rhs, guard, sample,
                         group="collectives"))


def _unit(bd: Binding, a: str) -> bool:
    return a in bd and bd[a] == 1


def _unit_binding(draw: Draw, *axes: str) -> Binding:
    bd = draw_binding(draw)
    return bd.replace(**{a: 1 for a in axes})


# ---------------------------------------------------------------------------------------------
def _sample_ar(draw: Draw) -> tuple[Term, Binding]:
    a = draw.choice(["dp", "mb"])
    # x holds no SHARD over a (those reductions are allreduce-einsum-split's: _match_ar)
    x = b.part(fresh(["B", "H"]), a) if draw.bool() else b.einsum([fresh(["B", "H"])], ["H"])
    return b.all_reduce(x, a, draw.choice(["sum", "max"])), _unit_binding(draw, a)


def _match_ar(t: Term, bd: Binding) -> Subst | None:
    """Matches only when ``x`` holds no ``SHARD`` over ``a``: a reduction of ``a``-blocks is
    left to ``allreduce-einsum-split`` / ``allreduce-max-shard`` and the SHARD-lifting rules,
    which bring both sides to one normal form (dropping the reduction first left DeepSeek-V3's
    ZeRO-1 gradients at dp = 1 with ``SHARD(V, dp)`` on one side only). A narrower match than
    the guard: the law and its checker copy are unchanged."""
    a = t.attrs[0]
    if not _unit(bd, a):
        return None
    stack, seen = [t.args[0]], set()
    while stack:
        x = stack.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        if x.op is Op.SHARD and x.attrs[1] == a:
            return None
        stack.extend(x.args)
    return {"x": t.args[0], "a": a, "r": t.attrs[1]}


# a reduction over one rank is that rank's value
_rule("allreduce-unit-axis", "ALL_REDUCE(x, a, r) = x", "|a| == 1", {Op.ALL_REDUCE},
      match=_match_ar,
      lhs=lambda s: b.all_reduce(s["x"], s["a"], s["r"]), rhs=lambda s, bd: s["x"],
      guard=lambda s, bd: _unit(bd, s["a"]), sample=_sample_ar)


def _sample_part(draw: Draw) -> tuple[Term, Binding]:
    return b.part(fresh(["B", "H"]), "dp"), _unit_binding(draw, "dp")


# the only addend of a sum over one rank is the sum
_rule("part-unit-axis", "PART(x, a) = x", "|a| == 1", {Op.PART},
      match=lambda t, bd: {"x": t.args[0], "a": t.attrs[0]} if _unit(bd, t.attrs[0]) else None,
      lhs=lambda s: b.part(s["x"], s["a"]), rhs=lambda s, bd: s["x"],
      guard=lambda s, bd: _unit(bd, s["a"]), sample=_sample_part)


def _sample_bcast(draw: Draw) -> tuple[Term, Binding]:
    return b.broadcast(b.shard(fresh(["B", "H"]), "B", "dp"), "dp", 0), \
        _unit_binding(draw, "dp")


# broadcasting from the only rank changes nothing
_rule("broadcast-unit-axis", "BROADCAST(x, a, src) = x", "|a| == 1", {Op.BROADCAST},
      match=lambda t, bd: ({"x": t.args[0], "a": t.attrs[0], "src": t.attrs[1]}
                           if _unit(bd, t.attrs[0]) else None),
      lhs=lambda s: b.broadcast(s["x"], s["a"], s["src"]), rhs=lambda s, bd: s["x"],
      guard=lambda s, bd: _unit(bd, s["a"]), sample=_sample_bcast)


# ---------------------------------------------------------------------------------------------
def _is_block(x: Term, d: str, a: str) -> bool:
    return x.op is Op.SHARD and x.attrs[0] == d and x.attrs[1] == a


def _unjoin(xs: tuple[Term, ...], d: str, a: str) -> tuple[tuple[Term, ...], tuple[bool, ...]]:
    mask = tuple(_is_block(x, d, a) for x in xs)
    return tuple(x.args[0] if m else x for x, m in zip(xs, mask)), mask


def _join(xs: tuple[Term, ...], mask: tuple[bool, ...], d: str, a: str) -> tuple[Term, ...]:
    return tuple(b.shard(x, d, a) if m else x for x, m in zip(xs, mask))


def _blocks_ok(xs: tuple[Term, ...], mask: tuple[bool, ...], d: str, a: str) -> bool:
    """lift_ok without the no-variation condition (one rank: its block is the whole)."""
    if len(xs) != len(mask) or not any(mask):
        return False
    specs = {x.dim(d).shards for x, m in zip(xs, mask) if m and d in x.dim_names}
    return (len(specs) == 1 and all(d in x.dim_names for x, m in zip(xs, mask) if m)
            and not any(d in x.dim_names for x, m in zip(xs, mask) if not m))


def _einsum_ok(s: Subst, bd: Binding) -> bool:
    return (_unit(bd, s["a"]) and s["d"] not in s["out"]
            and _blocks_ok(s["xs"], s["mask"], s["d"], s["a"]))


def _match_einsum(t: Term, bd: Binding) -> Subst | None:
    out = t.attrs[0]
    for x in t.args:
        if x.op is Op.SHARD and _unit(bd, x.attrs[1]) and x.attrs[0] not in out:
            d, a = x.attrs
            xs, mask = _unjoin(t.args, d, a)
            s = {"xs": xs, "mask": mask, "d": d, "a": a, "out": out}
            if _einsum_ok(s, bd):
                return s
    return None


def _sample_einsum(draw: Draw) -> tuple[Term, Binding]:
    a = draw.choice(["dp", "mb"])
    x, g = fresh(["B", "H"]), fresh(["B", "F"])
    args = [b.shard(x, "B", a), b.shard(g, "B", a)] if draw.bool() else [b.shard(x, "B", a)]
    out = ("F", "H") if len(args) == 2 else ("H",)
    return b.einsum(sorted(args, key=b.skey), out), _unit_binding(draw, a)


# summing the one block of a size-1 split is summing the whole dim (no collective needed)
_rule("einsum-unit-axis",
      "EINSUM(..SHARD(x_i, d, a)..y_j.., out) = EINSUM(..x_i..y_j.., out)",
      "|a| == 1; d not in out; the blocks share d's spec; the y_j lack d", {Op.EINSUM},
      match=_match_einsum,
      lhs=lambda s: b.einsum(_join(s["xs"], s["mask"], s["d"], s["a"]), s["out"]),
      rhs=lambda s, bd: b.einsum(s["xs"], s["out"]), guard=_einsum_ok, sample=_sample_einsum)


def _max_ok(s: Subst, bd: Binding) -> bool:
    return _unit(bd, s["a"]) and s["d"] in s["dims"] and s["d"] in s["x"].dim_names


def _sample_max(draw: Draw) -> tuple[Term, Binding]:
    a = draw.choice(["dp", "mb"])
    dims = ["B"] if draw.bool() else ["B", "H"]
    return b.reduce_max(b.shard(fresh(["B", "H"]), "B", a), dims), _unit_binding(draw, a)


# the max over the one block of a size-1 split is the max over the whole dim
_rule("reduce-max-unit-axis", "REDUCE_MAX(SHARD(x, d, a), dims) = REDUCE_MAX(x, dims)",
      "|a| == 1 and d in dims", {Op.REDUCE_MAX},
      match=lambda t, bd: ({"x": t.args[0].args[0], "d": t.args[0].attrs[0],
                            "a": t.args[0].attrs[1], "dims": t.attrs[0]}
                           if t.args[0].op is Op.SHARD and _max_ok(
                               {"x": t.args[0].args[0], "d": t.args[0].attrs[0],
                                "a": t.args[0].attrs[1], "dims": t.attrs[0]}, bd) else None),
      lhs=lambda s: b.reduce_max(b.shard(s["x"], s["d"], s["a"]), s["dims"]),
      rhs=lambda s, bd: b.reduce_max(s["x"], s["dims"]), guard=_max_ok, sample=_sample_max)


def _gather_ok(s: Subst, bd: Binding) -> bool:
    return _unit(bd, s["a"]) and s["d"] in s["x"].dim_names


def _sample_gather(draw: Draw) -> tuple[Term, Binding]:
    x = b.shard(b.part(fresh(["B", "H"]), "dp"), "H", "dp")   # varies over dp: one rank
    return b.all_gather(x, "dp", "H"), _unit_binding(draw, "dp")


# gathering the one block of a size-1 split gives the whole (even a value that varies over a)
_rule("allgather-unit-axis", "ALL_GATHER(SHARD(x, d, a), a, d) = x", "|a| == 1",
      {Op.ALL_GATHER},
      match=lambda t, bd: ({"x": t.args[0].args[0], "a": t.attrs[0], "d": t.attrs[1]}
                           if _is_block(t.args[0], t.attrs[1], t.attrs[0])
                           and _gather_ok({"x": t.args[0].args[0], "a": t.attrs[0],
                                           "d": t.attrs[1]}, bd) else None),
      lhs=lambda s: b.all_gather(b.shard(s["x"], s["d"], s["a"]), s["a"], s["d"]),
      rhs=lambda s, bd: s["x"], guard=_gather_ok, sample=_sample_gather)
