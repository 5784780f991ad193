"""Canonical contractions: ``EINSUM`` operands as one sorted canonical product, sorted
``out_dims``, scalar factors outside, trivial contractions removed.

``einsum-canon`` carries the sorted operand list in its substitution (its guard is a permutation
check); ``einsum-mul-canon`` splices ``MUL`` operands in and merges equal bases into ``POW`` (a
contraction multiplies its operands pointwise), guarded by the monomial identity ``mono``.
"""

from __future__ import annotations

from collections import Counter
from fractions import Fraction

from spec_lang.term import ELEMENTWISE, Binding, Op, Term, term

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


def _pointwise_ok(s: Subst, bd: Binding) -> bool:
    return len(s["xs"]) >= 2 and set(s["out"]) == _dimnames(s["xs"])


def _sample_einsum_pointwise(draw: Draw) -> tuple[Term, Binding]:
    x, y = fresh(draw_dims(draw)), fresh(draw_dims(draw))
    ops = [x, y] + ([draw_const(draw)] if draw.bool() else [])
    out = sorted(_dimnames(ops))
    return _einsum_raw(tuple(ops), tuple(out[::-1] if draw.bool() else out)), \
        draw_binding(draw)


# a contraction that sums over nothing is the pointwise product (issue 12: the vocab-parallel
# target logit's gradient is MUL(g, onehot) when written as sum(z * onehot) and EINSUM(g, onehot)
# when written as an einsum): one spelling, MUL
_rule("einsum-pointwise", "EINSUM(xs, out) = MUL(xs)",
      "at least two operands, and out holds every dim of every operand", {Op.EINSUM},
      match=lambda t, bd: ({"xs": t.args, "out": t.attrs[0]}
                           if _pointwise_ok({"xs": t.args, "out": t.attrs[0]}, bd) else None),
      lhs=lambda s: _einsum_raw(s["xs"], s["out"]), rhs=lambda s, bd: b.mul(*s["xs"]),
      guard=_pointwise_ok, sample=_sample_einsum_pointwise)


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


# ---------------------------------------------------------------------------------------------
# completeness (issue 12): nested contractions, sums of contractions, dims of size 1
def unit_dims(t: Term, names, bd: Binding) -> set[str]:
    """The dims among ``names`` that ``t`` holds unsharded and that have size 1 in ``bd``."""
    return {d.name for d in t.dims if d.name in names and not d.shards and bd[d.name] == 1}


def _contracted(t: Term) -> set[str]:
    return _dimnames(t.args) - set(t.attrs[0])


def is_unit_squeeze(t: Term, bd: Binding) -> bool:
    """``t`` is ``EINSUM((x,), out)`` summing only dims of size 1 (the normal form of a sum over
    a size-1 dim: a squeeze), which ``einsum-nested`` leaves alone."""
    return (t.op is Op.EINSUM and len(t.args) == 1
            and unit_dims(t.args[0], _contracted(t), bd) == _contracted(t))


def _nested_ok(s: Subst, bd: Binding) -> bool:
    xs, k = s["xs"], s["k"]
    if not 0 <= k < len(xs) or xs[k].op is not Op.EINSUM or is_unit_squeeze(xs[k], bd):
        return False
    inner = xs[k]
    others = xs[:k] + xs[k + 1:]
    outside = _dimnames(others) | set(s["out"])
    # two nested sums over the same dim names (sum_e (sum_bs m)(sum_bs p)): flattening either
    # one would depend on the operand order; keep both (one normal form for both spellings)
    bound = {d for x in others for d in _bound(x)}
    return not _contracted(inner) & (outside | bound)


_WRAPPERS = frozenset({Op.ALL_REDUCE, Op.SHARD, Op.PART, Op.BROADCAST, Op.ALL_GATHER,
                       Op.REDUCE_SCATTER})


def _bound(x: Term) -> set[str]:
    """The dims an operand sums, looking through collectives and shards (which the normaliser
    removes later: a plan's partial sum over the tokens is ``ALL_REDUCE(EINSUM(...))``)."""
    while x.op in _WRAPPERS:
        x = x.args[0]
    return _contracted(x) if x.op is Op.EINSUM else set()


def _match_nested(t: Term, bd: Binding) -> Subst | None:
    for k, x in enumerate(t.args):
        s = {"xs": t.args, "k": k, "out": t.attrs[0]}
        if x.op is Op.EINSUM and _nested_ok(s, bd):
            return s
    return None


def _nested_rhs(s: Subst, bd: Binding) -> Term:
    xs, k = s["xs"], s["k"]
    return b.einsum(xs[:k] + xs[k].args + xs[k + 1:], s["out"])


def _sample_nested(draw: Draw) -> tuple[Term, Binding]:
    x, w1, w2 = fresh(["B", "H"]), fresh(["H", "F"]), fresh(["F", "S"])
    if draw.bool():  # LoRA / MLA: (x A) B
        inner = b.einsum([x, w1], ["B", "F"])
        return b.einsum(sorted([inner, w2], key=b.skey), ["B", "S"]), draw_binding(draw)
    inner = b.einsum([w1, w2], ["H", "S"])  # x (A B), and a sum of a contraction
    outer = b.einsum(sorted([x, inner], key=b.skey), ["B", "S"])
    return (b.einsum([outer], ["S"]) if draw.bool() else outer), draw_binding(draw)


# nested contractions are one contraction when no dim the inner one sums is used outside it:
# (x A) B = x (A B) = one EINSUM, whatever order the user contracted in
_rule("einsum-nested", "EINSUM(..EINSUM(zs, o1)..ys.., out) = EINSUM(..zs..ys.., out)",
      "the dims zs contract occur in no other operand, not in out and not among the dims another "
      "operand sums (an EINSUM, under collectives and shards); the inner EINSUM is not a sum "
      "over size-1 dims only", {Op.EINSUM}, match=_match_nested,
      lhs=lambda s: b.einsum(s["xs"], s["out"]), rhs=_nested_rhs, guard=_nested_ok,
      sample=_sample_nested)


def _squeeze(x: Term, u: set[str]) -> Term:
    mine = {d.name for d in x.dims} & u
    return b.einsum([x], [d.name for d in x.dims if d.name not in mine]) if mine else x


def _units(s: Subst, bd: Binding) -> tuple[set[str], set[str]]:
    """(U, contracted) of ``EINSUM(xs, out)``."""
    c = _dimnames(s["xs"]) - set(s["out"])
    return {d for x in s["xs"] for d in unit_dims(x, c, bd)}, c


def _unit_ok(s: Subst, bd: Binding) -> bool:
    u, c = _units(s, bd)
    return bool(u) and not (len(s["xs"]) == 1 and u == c)


def _unit_rhs(s: Subst, bd: Binding) -> Term:
    u, _ = _units(s, bd)
    return b.einsum([_squeeze(x, u) for x in s["xs"]], s["out"])


def _sample_unit_dim(draw: Draw) -> tuple[Term, Binding]:
    bd = draw_binding(draw).replace(G=1)
    x, y = fresh(["G", "B", "H"]), fresh(["G", "H"])
    out = ["B"] if draw.bool() else ["B", "H"]
    return b.einsum(sorted([x, y], key=b.skey), out), bd


# a sum over a dim of size 1 has one term: it factorises over the operands (each one's sum over
# the dim is a squeeze), so sum_G(x y) and sum_G(x) sum_G(y) have one normal form (|G| = 1)
_rule("einsum-unit-dim", "EINSUM(xs, out) = EINSUM(EINSUM((x,), dims(x) - U) for x in xs, out)",
      "U = the contracted dims of size 1 (unsharded) is non-empty, and the EINSUM is not a sum "
      "of one operand over dims of U only", {Op.EINSUM},
      match=lambda t, bd: ({"xs": t.args, "out": t.attrs[0]}
                           if _unit_ok({"xs": t.args, "out": t.attrs[0]}, bd) else None),
      lhs=lambda s: b.einsum(s["xs"], s["out"]), rhs=_unit_rhs, guard=_unit_ok,
      sample=_sample_unit_dim)


# WHERE's mask operand stays a predicate (no sum of a mask); every other elementwise op
_SQUEEZE_THROUGH = frozenset(ELEMENTWISE) - {Op.WHERE}


def _squeeze_ew_ok(s: Subst, bd: Binding) -> bool:
    if s["op"] not in {o.name for o in _SQUEEZE_THROUGH} or not s["xs"]:
        return False
    u = _dimnames(s["xs"]) - set(s["out"])
    return bool(u) and {d for x in s["xs"] for d in unit_dims(x, u, bd)} == u


def _squeeze_ew_lhs(s: Subst) -> Term:
    return b.einsum([b.elementwise(Op[s["op"]], s["xs"], s["attrs"])], s["out"])


def _match_squeeze_ew(t: Term, bd: Binding) -> Subst | None:
    if len(t.args) != 1 or t.args[0].op not in _SQUEEZE_THROUGH:
        return None
    x = t.args[0]
    s = {"op": x.op.name, "attrs": x.attrs, "xs": x.args, "out": t.attrs[0]}
    return s if _squeeze_ew_ok(s, bd) and _squeeze_ew_lhs(s) is t else None


def _squeeze_ew_rhs(s: Subst, bd: Binding) -> Term:
    u = _dimnames(s["xs"]) - set(s["out"])
    return b.elementwise(Op[s["op"]], [_squeeze(x, u) for x in s["xs"]], s["attrs"])


def _sample_squeeze_ew(draw: Draw) -> tuple[Term, Binding]:
    bd = draw_binding(draw).replace(G=1)
    x = fresh(["B", "G", "H"])
    y = fresh(draw.choice([["G", "H"], ["H"], ["B", "G", "H"]]))
    op = draw.choice([Op.ADD, Op.MUL, Op.POW, Op.EXP, Op.SILU, Op.MAXIMUM])
    match op:
        case Op.ADD | Op.MUL | Op.MAXIMUM:
            t = b.elementwise(op, [x, y] if draw.bool() else [y, x])
        case Op.POW:
            t = b.pow_(x, draw.choice([2, 3]))
        case _:
            t = b.unary(op, x)
    return b.einsum([t], ["B", "H"]), bd


# a sum over dims of size 1 is a squeeze, and a squeeze of an elementwise op is the op of the
# squeezed operands: squeezes sink to the leaves, so sum_G(x^2) and (sum_G x)^2 (|G| = 1) have
# one normal form (the torch front end's Llama-3-8B at batch 1; B28_fixed at |B| = 1)
_rule("squeeze-elementwise",
      "EINSUM((op(..x_i..),), out) = op(..EINSUM((x_i,), dims(x_i) - U)..)  (op elementwise, "
      "not WHERE)",
      "U = the dims op(..x_i..) has and out lacks is non-empty, and every dim of U has size 1 "
      "and is unsharded in the operands that hold it", {Op.EINSUM},
      match=_match_squeeze_ew, lhs=_squeeze_ew_lhs, rhs=_squeeze_ew_rhs, guard=_squeeze_ew_ok,
      sample=_sample_squeeze_ew)


def _max_unit_ok(s: Subst, bd: Binding) -> bool:
    return bool(unit_dims(s["x"], set(s["dims"]), bd))


def _max_unit_rhs(s: Subst, bd: Binding) -> Term:
    u = unit_dims(s["x"], set(s["dims"]), bd)
    rest = [d for d in s["dims"] if d not in u]
    sq = _squeeze(s["x"], u)
    return b.reduce_max(sq, rest) if rest else sq


def _sample_max_unit(draw: Draw) -> tuple[Term, Binding]:
    bd = draw_binding(draw).replace(G=1)
    dims = ["G"] if draw.bool() else ["G", "H"]
    return b.reduce_max(fresh(["G", "B", "H"]), dims), bd


# a max over a dim of size 1 is the squeeze (so max_G and sum_G agree when |G| = 1)
_rule("reduce-max-unit-dim",
      "REDUCE_MAX(x, dims) = REDUCE_MAX(EINSUM((x,), dims(x) - U), dims - U)  (no REDUCE_MAX "
      "when dims = U)", "U = the dims among dims of size 1 (unsharded) is non-empty",
      {Op.REDUCE_MAX},
      match=lambda t, bd: ({"x": t.args[0], "dims": t.attrs[0]}
                           if _max_unit_ok({"x": t.args[0], "dims": t.attrs[0]}, bd) else None),
      lhs=lambda s: b.reduce_max(s["x"], s["dims"]), rhs=_max_unit_rhs, guard=_max_unit_ok,
      sample=_sample_max_unit)


def _pull_split(xs: tuple[Term, ...], out) -> tuple[list[Term], list[Term]]:
    """Operands constant along every contracted dim (dims within ``out``) and the others."""
    keep = set(out)
    pulled = [x for x in xs if x.dims and set(x.dim_names) <= keep]
    return pulled, [x for x in xs if not (x.dims and set(x.dim_names) <= keep)]


def _pull_ok(s: Subst, bd: Binding) -> bool:
    pulled, rest = _pull_split(s["xs"], s["out"])
    return bool(pulled) and bool(rest) and bool(_dimnames(rest) - set(s["out"]))


def _pull_rhs(s: Subst, bd: Binding) -> Term:
    pulled, rest = _pull_split(s["xs"], s["out"])
    have = _dimnames(rest)
    return b.mul(*pulled, b.einsum(rest, [d for d in s["out"] if d in have]))


def _sample_pull(draw: Draw) -> tuple[Term, Binding]:
    x, w, g = fresh(["B", "H"]), fresh(["H", "F"]), fresh(["B", "F"])
    if draw.bool():  # a gate times a matmul: E(x, w, g) = g * E(x, w)
        return b.einsum(sorted([x, w, g], key=b.skey), ["B", "F"]), draw_binding(draw)
    s = fresh(["B"])   # a per-row scale inside a sum over H
    return b.einsum(sorted([x, s], key=b.skey), ["B"]), draw_binding(draw)


# an operand constant along every contracted dim leaves the contraction (the general form of
# einsum-scalar-out and of exp-shift's factor rules): E(x, w, g) = g * E(x, w) when g's dims are
# kept, so a factor multiplied before or after a contraction has one normal form
_rule("einsum-factor-out", "EINSUM(xs, out) = MUL(fs..., EINSUM(rest, out'))  (out' = out "
      "restricted to the rest)", "fs = the operands with dims, all in out (non-empty); the rest "
      "is non-empty and sums some dim", {Op.EINSUM},
      match=lambda t, bd: ({"xs": t.args, "out": t.attrs[0]}
                           if _pull_ok({"xs": t.args, "out": t.attrs[0]}, bd) else None),
      lhs=lambda s: b.einsum(s["xs"], s["out"]), rhs=_pull_rhs, guard=_pull_ok,
      sample=_sample_pull)


def components(xs: tuple[Term, ...], out) -> list[list[int]]:
    """Operand indices grouped into the connected components of "shares a contracted dim",
    each in operand order, components ordered by their first operand."""
    summed = _dimnames(xs) - set(out)
    parent = list(range(len(xs)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    owner: dict[str, int] = {}
    for i, x in enumerate(xs):
        for n in x.dim_names:
            if n in summed:
                if n in owner:
                    parent[find(i)] = find(owner[n])
                else:
                    owner[n] = i
    groups: dict[int, list[int]] = {}
    for i in range(len(xs)):
        groups.setdefault(find(i), []).append(i)
    return sorted(groups.values(), key=lambda g: g[0])


def _split_ok(s: Subst, bd: Binding) -> bool:
    return len(s["xs"]) >= 2 and len(components(s["xs"], s["out"])) >= 2


def _split_rhs(s: Subst, bd: Binding) -> Term:
    xs, out = s["xs"], s["out"]
    parts = []
    for g in components(xs, out):
        ys = tuple(xs[i] for i in g)
        have = _dimnames(ys)
        parts.append(b.einsum(ys, [d for d in out if d in have]))
    return b.mul(*parts)


def _sample_split(draw: Draw) -> tuple[Term, Binding]:
    x, y, z = fresh(["S", "H"]), fresh(["B", "S"]), fresh(["F"])
    if draw.bool():   # (sum_S x y) times an independent total sum_F z
        return b.einsum(sorted([x, y, z], key=b.skey), ["B", "H"]), draw_binding(draw)
    w = fresh(["F", "B"])
    return b.einsum(sorted([x, y, w, z], key=b.skey), ["B", "H"]), draw_binding(draw)


# a contraction of operands that share no summed dim is the product of the separate
# contractions (sum_s x_s * sum_f z_f): one normal form however the user grouped them
_rule("einsum-components", "EINSUM(xs, out) = MUL(EINSUM(K_j, out & dims(K_j)) for each K_j)",
      "the operands form two or more groups K_j that share no summed dim", {Op.EINSUM},
      match=lambda t, bd: ({"xs": t.args, "out": t.attrs[0]}
                           if _split_ok({"xs": t.args, "out": t.attrs[0]}, bd) else None),
      lhs=lambda s: b.einsum(s["xs"], s["out"]), rhs=_split_rhs, guard=_split_ok,
      sample=_sample_split)
