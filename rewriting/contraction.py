"""Canonical contractions: ``EINSUM`` operands as one sorted canonical product, sorted
``out_dims``, scalar factors outside, trivial contractions removed.

``einsum-canon`` carries the sorted operand list in its substitution (its guard is a permutation
check); ``einsum-mul-canon`` splices ``MUL`` operands in and merges equal bases into ``POW`` (a
contraction multiplies its operands pointwise), guarded by the monomial identity ``mono``.
"""

from __future__ import annotations

from collections import Counter
from fractions import Fraction

from spec_lang.term import Binding, Op, Term, term

from rewriting import build as b
from rewriting.canonical import canon_mul as _canon_mul
from rewriting.canonical import dimnames as _dimnames
from rewriting.canonical import mono
from rewriting.instances import draw_binding, draw_const, draw_dims, fresh, nonzero_base
from rewriting.rule import Draw, Rule, Subst, always, register
from rewriting.signs import Signs, product_keeps_definedness, signs_for

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


def _einsum_factors(xs: tuple[Term, ...], signs: Signs) -> tuple[Term, ...]:
    """The operands of a contraction as one canonical product: MUL operands spliced in, equal
    bases merged into POW where that keeps definedness (the contraction multiplies its operands
    pointwise)."""
    ys = [y for y in _canon_mul(xs, signs) if y.op is not Op.CONST]
    return tuple(sorted(ys, key=b.skey))


def _match_einsum_mul(t: Term, bd: Binding) -> Subst | None:
    if not any(x.op is Op.MUL or x.op is Op.POW for x in t.args) and \
            len({id(x) for x in t.args}) == len(t.args):
        return None
    if any(not x.dims for x in t.args):
        return None  # scalars leave first (einsum-scalar-out)
    ys = _einsum_factors(t.args, signs_for(bd))
    if Counter(map(id, ys)) == Counter(map(id, t.args)) or not ys:
        return None
    return {"xs": t.args, "out": t.attrs[0], "ys": ys}


def _einsum_mul_ok(s: Subst, bd: Binding) -> bool:
    c1, e1 = mono(s["xs"])
    c2, e2 = mono(s["ys"])
    return (c1 == c2 == 1 and e1 == e2 and bool(s["ys"])
            and _dimnames(s["xs"]) == _dimnames(s["ys"])
            and product_keeps_definedness(s["xs"], s["ys"], signs_for(bd)))


def _sample_einsum_mul(draw: Draw) -> tuple[Term, Binding]:
    g, w = fresh(["B", "H"]), fresh(["H", "F"])
    k = draw.int(0, 2)
    if k == 0:  # a squared norm written as g . g
        return b.einsum([g, g], []), draw_binding(draw)
    if k == 1:  # a product operand
        return b.einsum(sorted([b.mul(g, fresh(["B"])), w], key=b.skey), ["B", "F"]), \
            draw_binding(draw)
    n = nonzero_base(draw, ["B", "H"], product=False)  # n^-1 * n cancels only where n != 0 (signs.py)
    return b.einsum(sorted([n, b.pow_(n, -1), w], key=b.skey), ["F"]), draw_binding(draw)


# a contraction multiplies its operands pointwise: they form one canonical product
_rule("einsum-mul-canon", "EINSUM(xs, out) = EINSUM(ys, out) (ys: the product's canonical factors)",
      "mono(xs) == mono(ys) with constant 1, ys non-empty, the dims are the same set; both sides "
      "defined at the same inputs of the spec's domain (rewriting/signs.py)", {Op.EINSUM},
      match=_match_einsum_mul, lhs=lambda s: b.einsum(s["xs"], s["out"]),
      rhs=lambda s, bd: b.einsum(s["ys"], s["out"]), guard=_einsum_mul_ok,
      sample=_sample_einsum_mul)


# ---------------------------------------------------------------------------------------------
# scalar factors leave linear movement too (so a constant has one place in a linear chain)
def _move_split(x: Term) -> tuple[list[Term], list[Term]]:
    scal = [a for a in x.args if not a.dims]
    rest = [a for a in x.args if a.dims]
    return scal, rest


def _move_scalar_rule(op: Op, name: str, law: str) -> Rule:
    def rebuild(x: Term, s: Subst) -> Term:
        if op is Op.RENAME:
            return b.rename(x, s["attrs"][0], s["attrs"][1], s["nshards"])
        return b.chunk(x, *s["attrs"])

    def match(t: Term, bd: Binding) -> Subst | None:
        x = t.args[0]
        if x.op is not Op.MUL:
            return None
        scal, rest = _move_split(x)
        if not scal or not rest:
            return None
        s = {"xs": x.args, "attrs": t.attrs}
        if op is Op.RENAME:
            s["nshards"] = t.dim(t.attrs[1]).shards
        return s

    def rhs(s: Subst, bd: Binding) -> Term:
        scal, rest = _move_split(b.mul(*s["xs"]))
        inner = rest[0] if len(rest) == 1 else b.mul(*rest)
        return b.mul(*scal, rebuild(inner, s))

    def ok(s: Subst, bd: Binding) -> bool:
        scal, rest = _move_split(b.mul(*s["xs"]))
        return bool(scal) and bool(rest)

    def sample(draw: Draw) -> tuple[Term, Binding]:
        bd = draw_binding(draw)
        x = b.mul(draw_const(draw), fresh(["B", "S"]))
        if draw.bool():
            x = b.mul(fresh([]), fresh(["B", "S"]))
        if op is Op.RENAME:
            return b.rename(x, "S", "K"), bd.replace(K=bd["S"])
        return b.chunk(x, "S", 2, draw.int(0, 1)), bd

    return _rule(name, law, "some factor of the MUL is dimless, and some is not", {op},
                 match=match, lhs=lambda s: rebuild(b.mul(*s["xs"]), s), rhs=rhs, guard=ok,
                 sample=sample)


# renaming and taking a chunk are linear: scalar factors move out of them
_move_scalar_rule(Op.RENAME, "rename-scalar-out",
                  "RENAME(MUL(xs), o, n) = MUL(scalars..., RENAME(MUL(rest...), o, n))")
_move_scalar_rule(Op.CHUNK, "chunk-scalar-out",
                  "CHUNK(MUL(xs), d, p, i) = MUL(scalars..., CHUNK(MUL(rest...), d, p, i))")


def _coef(x: Term):
    if x.op is Op.MUL and x.args[0].op is Op.CONST:
        return b.num(x.args[0].attrs[0])
    return Fraction(1)


def _concat_content(xs: tuple[Term, ...]):
    return next((c for c in map(_coef, xs) if c != 0), Fraction(1))


def _match_concat_content(t: Term, bd: Binding) -> Subst | None:
    c = _concat_content(t.args)
    if c == 1 or not b.certifiable(b.num_pow(b.num(c), Fraction(-1))):
        return None
    return {"xs": t.args, "d": t.attrs[0], "cshards": t.dim(t.attrs[0]).shards, "c": c}


def _concat_spec(s: Subst):
    from spec_lang.term import DimSpec

    return DimSpec(s["d"], tuple(s["cshards"]))


def _concat_content_rhs(s: Subst, bd: Binding) -> Term:
    inv = b.const(b.num_pow(b.num(s["c"]), Fraction(-1)))
    return b.mul(b.const(s["c"]),
                 b.concat([b.mul(inv, x) for x in s["xs"]], s["d"], _concat_spec(s)))


def _sample_concat_content(draw: Draw) -> tuple[Term, Binding]:
    x = fresh(["B", "H"])
    c = Fraction(draw.choice([-3, 2, 5]), draw.choice([1, 4]))
    blocks = [b.mul(b.const(c), b.chunk(x, "H", 2, 0)),
              b.mul(b.const(draw.choice([0, 1, 3])), b.chunk(fresh(["B", "H"]), "H", 2, 1))]
    return b.concat(blocks, "H"), draw_binding(draw)


# a concatenation is linear: the first non-zero block coefficient leaves it (zero blocks, as
# autodiff of a chunk makes them, take any factor)
_rule("concat-content", "CONCAT(xs, d) = MUL(CONST(c), CONCAT(MUL(CONST(1/c), x) for x in xs, d))",
      "c != 0", {Op.CONCAT}, match=_match_concat_content,
      lhs=lambda s: b.concat(s["xs"], s["d"], _concat_spec(s)), rhs=_concat_content_rhs,
      guard=lambda s, bd: b.num(s["c"]) != 0, sample=_sample_concat_content)
