"""Exploration rules: sound laws the normaliser does not orient (the egglog oracle uses them).

These rewrite in directions that would make normalisation loop or blow up if applied always
(distributing a product over a sum, merging nested contractions, pulling a collective out of a
contraction), so they are not in :data:`rewriting.rule.RULES`. The oracle (``egraph.py``) applies
them to explore alternatives of a goal's normal forms; each has a soundness test like every rule.
"""

from __future__ import annotations

from spec_lang.term import Binding, Op, Term

from rewriting import build as b
from rewriting.instances import draw_binding, draw_dims, fresh
from rewriting.rule import Draw, Rule, Subst, always

__all__ = ["EXPLORE"]

EXPLORE: list[Rule] = []


def _rule(name, law, guard_doc, ops, match, lhs, rhs, guard, sample) -> Rule:
    r = Rule(name, law, guard_doc, frozenset(ops), match, lhs, rhs, guard, sample, group="explore")
    EXPLORE.append(r)
    return r


def _first(xs: tuple[Term, ...], op: Op) -> int | None:
    return next((i for i, x in enumerate(xs) if x.op is op), None)


# ---------------------------------------------------------------------------------------------
def _m_einsum_add(t: Term, bd: Binding) -> Subst | None:
    k = _first(t.args, Op.ADD)
    return None if k is None else {"xs": t.args, "k": k, "out": t.attrs[0]}


def _r_einsum_add(s: Subst, bd: Binding) -> Term:
    xs, k = s["xs"], s["k"]
    return b.add(*[b.einsum(xs[:k] + (y,) + xs[k + 1:], s["out"]) for y in xs[k].args])


def _s_einsum_add(draw: Draw) -> tuple[Term, Binding]:
    x, y, w = fresh(["B", "H"]), fresh(["B", "H"]), fresh(["H", "F"])
    return b.einsum([b.add(x, y), w], ["B", "F"]), draw_binding(draw)


# a contraction is linear in each operand
_rule("einsum-add-dist", "EINSUM(..ADD(ys)..) = ADD(EINSUM(..y..) for y in ys)",
      "xs[k] is an ADD", {Op.EINSUM}, _m_einsum_add,
      lhs=lambda s: b.einsum(s["xs"], s["out"]), rhs=_r_einsum_add,
      guard=lambda s, bd: s["xs"][s["k"]].op is Op.ADD, sample=_s_einsum_add)


def _m_mul_add(t: Term, bd: Binding) -> Subst | None:
    k = _first(t.args, Op.ADD)
    return None if k is None else {"xs": t.args, "k": k}


def _r_mul_add(s: Subst, bd: Binding) -> Term:
    xs, k = s["xs"], s["k"]
    return b.add(*[b.mul(*(xs[:k] + (y,) + xs[k + 1:])) for y in xs[k].args])


def _s_mul_add(draw: Draw) -> tuple[Term, Binding]:
    dims = draw_dims(draw)
    return b.mul(fresh(dims), b.add(fresh(dims), fresh(dims[:1]))), draw_binding(draw)


# a product distributes over a sum
_rule("mul-add-dist", "MUL(..ADD(ys)..) = ADD(MUL(..y..) for y in ys)", "xs[k] is an ADD",
      {Op.MUL}, _m_mul_add, lhs=lambda s: b.mul(*s["xs"]), rhs=_r_mul_add,
      guard=lambda s, bd: s["xs"][s["k"]].op is Op.ADD, sample=_s_mul_add)


def _flatten_ok(s: Subst, bd: Binding) -> bool:
    xs, k = s["xs"], s["k"]
    inner = xs[k]
    if inner.op is not Op.EINSUM:
        return False
    contracted = {d.name for z in inner.args for d in z.dims} - set(inner.attrs[0])
    outside = {d.name for i, x in enumerate(xs) if i != k for d in x.dims} | set(s["out"])
    return not contracted & outside


def _m_flatten(t: Term, bd: Binding) -> Subst | None:
    for k, x in enumerate(t.args):
        s = {"xs": t.args, "k": k, "out": t.attrs[0]}
        if x.op is Op.EINSUM and _flatten_ok(s, bd):
            return s
    return None


def _s_flatten(draw: Draw) -> tuple[Term, Binding]:
    x, w1, w2 = fresh(["B", "H"]), fresh(["H", "F"]), fresh(["F", "S"])
    return b.einsum([b.einsum([x, w1], ["B", "F"]), w2], ["B", "S"]), draw_binding(draw)


# nested contractions are one contraction when no contracted dim is captured
_rule("einsum-flatten", "EINSUM(..EINSUM(zs, o1)..xs.., out) = EINSUM(..zs..xs.., out)",
      "the dims zs contract do not occur in the other operands or in out", {Op.EINSUM},
      _m_flatten, lhs=lambda s: b.einsum(s["xs"], s["out"]),
      rhs=lambda s, bd: b.einsum(s["xs"][:s["k"]] + s["xs"][s["k"]].args + s["xs"][s["k"] + 1:],
                                 s["out"]),
      guard=_flatten_ok, sample=_s_flatten)


def _m_mul_einsum(t: Term, bd: Binding) -> Subst | None:
    if len(t.args) < 2 or any(not x.dims or x.op is Op.CONST for x in t.args):
        return None
    return {"xs": t.args}


def _s_mul_einsum(draw: Draw) -> tuple[Term, Binding]:
    dims = draw_dims(draw)
    return b.mul(fresh(dims), fresh(dims[:1])), draw_binding(draw)


# an elementwise product is a contraction that keeps every dim
_rule("mul-einsum", "MUL(xs) = EINSUM(xs, all dims)", "every factor has dims", {Op.MUL},
      _m_mul_einsum, lhs=lambda s: b.mul(*s["xs"]),
      rhs=lambda s, bd: b.einsum(s["xs"], {d.name for x in s["xs"] for d in x.dims}),
      guard=lambda s, bd: all(x.dims for x in s["xs"]), sample=_s_mul_einsum)


def _pull_ok(s: Subst, bd: Binding) -> bool:
    xs, k, a = s["xs"], s["k"], s["a"]
    x = xs[k]
    return (x.op is Op.ALL_REDUCE and x.attrs == (a, "sum")
            and all(a not in b.varying(y) for i, y in enumerate(xs) if i != k))


def _m_pull(t: Term, bd: Binding) -> Subst | None:
    for k, x in enumerate(t.args):
        if x.op is Op.ALL_REDUCE and x.attrs[1] == "sum":
            s = {"xs": t.args, "k": k, "out": t.attrs[0], "a": x.attrs[0]}
            if _pull_ok(s, bd):
                return s
    return None


def _s_pull(draw: Draw) -> tuple[Term, Binding]:
    x, w = b.part(fresh(["B", "H"]), "tp"), fresh(["H", "F"])
    return b.einsum([b.all_reduce(x, "tp"), w], ["B", "F"]), draw_binding(draw)


# the reverse of allreduce-einsum-push: a sum over a moves out of a contraction
_rule("einsum-pull-allreduce",
      "EINSUM(..ALL_REDUCE(x, a, sum)..ys.., out) = ALL_REDUCE(EINSUM(..x..ys.., out), a, sum)",
      "no other operand varies over a", {Op.EINSUM}, _m_pull,
      lhs=lambda s: b.einsum(s["xs"], s["out"]),
      rhs=lambda s, bd: b.all_reduce(
          b.einsum(s["xs"][:s["k"]] + (s["xs"][s["k"]].args[0],) + s["xs"][s["k"] + 1:], s["out"]),
          s["a"], "sum"),
      guard=_pull_ok, sample=_s_pull)

del always
