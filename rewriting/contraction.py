"""Canonical contractions: ``EINSUM`` operands as one sorted canonical product, sorted
``out_dims``, scalar factors outside, trivial contractions removed.

``einsum-canon`` carries the sorted operand list in its substitution (its guard is a permutation
check); ``einsum-mul-canon`` splices ``MUL`` operands in and merges equal bases into ``POW`` (a
contraction multiplies its operands pointwise), guarded by the monomial identity ``mono``.
"""

from __future__ import annotations

from collections import Counter

from spec_lang.term import Binding, Op, Term, term

from rewriting import build as b
from rewriting.canonical import canon_mul as _canon_mul
from rewriting.canonical import dimnames as _dimnames
from rewriting.canonical import mono
from rewriting.instances import draw_binding, draw_const, draw_dims, fresh
from rewriting.rule import Draw, Rule, Subst, always, register

__all__: list[str] = []


def _rule(name: str, law: str, guard_doc: str, ops: set[Op], match, lhs, rhs, guard=always,
          sample=None) -> Rule:
    return register(Rule(name, law, guard_doc, frozenset(ops), match, lhs, rhs, guard, sample,
                         group="canonical"))


def _einsum_raw(xs: tuple[Term, ...], out: tuple[str, ...]) -> Term:
    u = b.union_dims(xs)
    return term(Op.EINSUM, xs, (tuple(out),), tuple(u[n] for n in out))


def _match_einsum_canon(t: Term, bd: Binding) -> Subst | None:
    out = tuple(t.attrs[0])
    ys = tuple(sorted(t.args, key=b.skey))
    if ys == t.args and list(out) == sorted(out):
        return None
    return {"xs": t.args, "out": out, "ys": ys}


def _sample_einsum_canon(draw: Draw) -> tuple[Term, Binding]:
    x, w = fresh(["B", "H"]), fresh(["H", "F"])
    xs = (x, w) if draw.bool() else (w, x)
    out = ("F", "B") if draw.bool() else ("B", "F")
    t = _einsum_raw(xs, out)
    if _match_einsum_canon(t, None) is None:
        t = _einsum_raw(xs[::-1], ("F", "B"))
    return t, draw_binding(draw)


# a product is commutative and storage order is not meaning: sort operands and out_dims
_rule("einsum-canon", "EINSUM(xs, out) = EINSUM(ys, sorted(out))",
      "ys is a permutation of xs", {Op.EINSUM},
      match=_match_einsum_canon, lhs=lambda s: _einsum_raw(s["xs"], s["out"]),
      rhs=lambda s, bd: b.einsum(s["ys"], s["out"]),
      guard=lambda s, bd: Counter(map(id, s["xs"])) == Counter(map(id, s["ys"])),
      sample=_sample_einsum_canon)


def _sample_einsum_identity(draw: Draw) -> tuple[Term, Binding]:
    x = fresh(draw_dims(draw))
    return b.einsum([x], x.dim_names), draw_binding(draw)


# an einsum of one operand that keeps every dim is the operand
_rule("einsum-identity", "EINSUM((x,), out) = x", "set(out) == dims of x", {Op.EINSUM},
      match=lambda t, bd: ({"x": t.args[0], "out": t.attrs[0]}
                           if len(t.args) == 1 and set(t.attrs[0]) == set(t.args[0].dim_names)
                           else None),
      lhs=lambda s: b.einsum([s["x"]], s["out"]), rhs=lambda s, bd: s["x"],
      guard=lambda s, bd: set(s["out"]) == set(s["x"].dim_names),
      sample=_sample_einsum_identity)


def _scalar_split(xs: tuple[Term, ...]) -> tuple[list[Term], list[Term]]:
    scal: list[Term] = []
    rest: list[Term] = []
    for x in xs:
        if not x.dims:
            scal.append(x)
        elif x.op is Op.MUL and any(not a.dims for a in x.args):
            scal.extend(a for a in x.args if not a.dims)
            r = [a for a in x.args if a.dims]
            rest.append(r[0] if len(r) == 1 else b.mul(*r))
        else:
            rest.append(x)
    return scal, rest


def _einsum_scalar_rhs(s: Subst, bd: Binding) -> Term:
    scal, rest = _scalar_split(s["xs"])
    return b.mul(*scal, b.einsum(rest, s["out"]))


def _einsum_scalar_ok(s: Subst, bd: Binding) -> bool:
    scal, rest = _scalar_split(s["xs"])
    return bool(scal) and bool(rest)


def _sample_einsum_scalar(draw: Draw) -> tuple[Term, Binding]:
    x, w = fresh(["B", "H"]), fresh(["H", "F"])
    s = fresh([]) if draw.bool() else draw_const(draw)
    ops = [b.mul(s, x), w] if draw.bool() else [s, x, w]
    return b.einsum(sorted(ops, key=b.skey), ("B", "F")), draw_binding(draw)


# scalar factors leave a contraction: EINSUM(s*x, w) = s * EINSUM(x, w) (s has no dims)
_rule("einsum-scalar-out", "EINSUM(xs, out) = MUL(scalars..., EINSUM(rest, out))",
      "some operand is a scalar or a MUL with scalar factors, and a non-scalar remains",
      {Op.EINSUM},
      match=lambda t, bd: ({"xs": t.args, "out": t.attrs[0]}
                           if _einsum_scalar_ok({"xs": t.args}, bd) else None),
      lhs=lambda s: b.einsum(s["xs"], s["out"]), rhs=_einsum_scalar_rhs,
      guard=_einsum_scalar_ok, sample=_sample_einsum_scalar)


def _einsum_factors(xs: tuple[Term, ...]) -> tuple[Term, ...]:
    """The operands of a contraction as one canonical product: MUL operands spliced in, equal
    bases merged into POW (the contraction multiplies its operands pointwise)."""
    ys = [y for y in _canon_mul(xs) if y.op is not Op.CONST]
    return tuple(sorted(ys, key=b.skey))


def _match_einsum_mul(t: Term, bd: Binding) -> Subst | None:
    if not any(x.op is Op.MUL or x.op is Op.POW for x in t.args) and \
            len({id(x) for x in t.args}) == len(t.args):
        return None
    if any(not x.dims for x in t.args):
        return None  # scalars leave first (einsum-scalar-out)
    ys = _einsum_factors(t.args)
    if Counter(map(id, ys)) == Counter(map(id, t.args)) or not ys:
        return None
    return {"xs": t.args, "out": t.attrs[0], "ys": ys}


def _einsum_mul_ok(s: Subst, bd: Binding) -> bool:
    c1, e1 = mono(s["xs"])
    c2, e2 = mono(s["ys"])
    return (c1 == c2 == 1 and e1 == e2 and bool(s["ys"])
            and _dimnames(s["xs"]) == _dimnames(s["ys"]))


def _sample_einsum_mul(draw: Draw) -> tuple[Term, Binding]:
    g, w = fresh(["B", "H"]), fresh(["H", "F"])
    k = draw.int(0, 2)
    if k == 0:  # a squared norm written as g . g
        return b.einsum([g, g], []), draw_binding(draw)
    if k == 1:  # a product operand
        return b.einsum(sorted([b.mul(g, fresh(["B"])), w], key=b.skey), ["B", "F"]), \
            draw_binding(draw)
    return b.einsum(sorted([g, b.pow_(g, -1), w], key=b.skey), ["F"]), draw_binding(draw)


# a contraction multiplies its operands pointwise: they form one canonical product
_rule("einsum-mul-canon", "EINSUM(xs, out) = EINSUM(ys, out) (ys: the product's canonical factors)",
      "mono(xs) == mono(ys) with constant 1, ys non-empty, the dims are the same set", {Op.EINSUM},
      match=_match_einsum_mul, lhs=lambda s: b.einsum(s["xs"], s["out"]),
      rhs=lambda s, bd: b.einsum(s["ys"], s["out"]), guard=_einsum_mul_ok,
      sample=_sample_einsum_mul)
