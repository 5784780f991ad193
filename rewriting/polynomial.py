"""Sums and products in canonical form: the ``add-canon`` / ``mul-canon`` family.

* ``ADD`` is n-ary, flat, its monomials sorted, equal monomials merged into one exact
  coefficient ``MUL(CONST c, m)`` (zero coefficients dropped when no dim is lost and the
  monomial is defined on the spec's domain);
* ``MUL`` is n-ary, flat, one leading exact ``CONST`` (1 dropped, 0 annihilates only a scalar
  product of defined factors), equal bases merged into ``POW(base, e)`` with exact rational
  exponents where that keeps the product defined at the same inputs (``x^-1 * x`` is ``1`` only
  where ``x != 0``: ``rewriting/signs.py``; a base that may not merge keeps its factors);
* a sum's *content* (the coefficient of its first non-constant summand) leaves it:
  ``2a + 4b = 2 (a + 2b)``, and a scaled sum that is a summand is distributed back into the
  enclosing sum, so a linear combination has one representation wherever its constants were
  written (inside contractions, products, or distributed).

There are no commutativity or associativity rules: ``add-canon`` and ``mul-canon`` carry the
canonical operand list in their substitution and their guard is an exact multiset identity
(formal linear combination / monomial) plus the definedness condition, which a checker
recomputes without knowing our sort key (``proofs/checker_signs.py``).
"""

from __future__ import annotations

from collections import Counter
from fractions import Fraction
from typing import Any

from spec_lang.term import Binding, Op, Term

from rewriting import build as b
from rewriting.instances import draw_binding, draw_const, draw_dims, fresh, nonzero_base
from rewriting.rule import Draw, Rule, Subst, register
from rewriting.signs import (
    ANY, CONTEXT_FREE, Signs, product_keeps_definedness, requirement, signs_for,
)

__all__ = ["lin", "mono", "canon_mul", "dimnames"]


def _rule(name: str, law: str, guard_doc: str, ops: set[Op], match, lhs, rhs, guard,
          sample=None) -> Rule:
    return register(Rule(name, law, guard_doc, frozenset(ops), match, lhs, rhs, guard, sample,
                         group="canonical"))


# ---------------------------------------------------------------------------------------------
# ADD: n-ary, flat, sorted monomials with merged exact coefficients
def _coeff_monomial(t: Term) -> tuple[Any, tuple[Term, ...]]:
    """``t = c * product(factors)``: CONST c -> (c, ()); MUL(CONST c, f...) -> (c, f...)."""
    if t.op is Op.CONST:
        return b.num(t.attrs[0]), ()
    if t.op is Op.MUL:
        c: Any = Fraction(1)
        fs = []
        for a in t.args:
            if a.op is Op.CONST:
                c = b.num_mul(c, b.num(a.attrs[0]))
            else:
                fs.append(a)
        return c, tuple(fs)
    return Fraction(1), (t,)


def _flat(op: Op, xs: tuple[Term, ...]) -> list[Term]:
    out: list[Term] = []
    stack = list(reversed(xs))
    while stack:
        x = stack.pop()
        if x.op is op:
            stack.extend(reversed(x.args))
        else:
            out.append(x)
    return out


def lin(xs: tuple[Term, ...]) -> dict[tuple[int, ...], Any]:
    """The formal linear combination ``{monomial: coefficient}`` of ``ADD(xs)`` (nested ADDs
    flattened; a monomial is the multiset of its non-constant factors, as sorted node ids)."""
    out: dict[tuple[int, ...], Any] = {}
    for x in _flat(Op.ADD, xs):
        c, fs = _coeff_monomial(x)
        k = tuple(sorted(id(f) for f in fs))
        out[k] = b.num_add(out.get(k, Fraction(0)), c)
    return {k: v for k, v in out.items() if v != 0}


def _dimnames(ts) -> set[str]:
    return {d.name for t in ts for d in t.dims}


_SUMMAND: dict[Term, tuple] = {}
_CANON: set[Term] = set()  # ADD / MUL nodes known to be in canonical form (no rule of theirs fires)


def _summand(t: Term) -> tuple:
    """``(coefficient, factors, monomial id key, sort key)`` of a summand (memoised)."""
    info = _SUMMAND.get(t)
    if info is None:
        c, fs = _coeff_monomial(t)
        info = (c, fs, tuple(sorted(id(f) for f in fs)), tuple(b.skey(f) for f in fs))
        _SUMMAND[t] = info
    return info


def _canon_add(xs: tuple[Term, ...], signs: Signs = CONTEXT_FREE) -> tuple[Term, ...]:
    groups: dict[tuple[int, ...], list] = {}
    for x in _flat(Op.ADD, xs):
        c, fs, k, sk = _summand(x)
        g = groups.get(k)
        if g is None:
            groups[k] = [c, fs, sk, x]
        else:
            g[0] = b.num_add(g[0], c)
            g[3] = None
    mons = sorted(groups.values(), key=lambda g: g[2])
    out: list[Term] = []
    zeros: list[Term] = []
    kept: list[Term] = []
    for c, fs, _sk, orig in mons:
        if not fs:
            if c != 0:
                out.append(orig if orig is not None else b.const(c))
            continue
        if c == 0:  # dropped only where defined: x^-1 - x^-1 = 0 needs x != 0 (signs.py)
            z = orig if orig is not None else b.mul(b.const(0), *fs)
            (zeros if all(signs.defined(f) for f in fs) else kept).append(z)
        elif orig is not None:  # a monomial seen once is kept as it is
            out.append(orig)
        elif c == 1:
            out.append(fs[0] if len(fs) == 1 else b.mul(*fs))
        else:
            out.append(b.mul(b.const(c), *fs))
    if zeros and not _dimnames(zeros) <= _dimnames(out + kept):
        kept += zeros
    if kept:
        out = sorted(out + kept, key=lambda t: _summand(t)[3])
    return tuple(out)


def _add_rhs(ys: tuple[Term, ...]) -> Term:
    if not ys:
        return b.const(0)
    return ys[0] if len(ys) == 1 else b.add(*ys)


def _add_is_canonical(t: Term) -> bool:
    """Fast path: a flat sum of distinct monomials in order, no zero or 1 coefficient."""
    prev: tuple | None = None
    seen: set[tuple[int, ...]] = set()
    for x in t.args:
        if x.op is Op.ADD:
            return False
        c, fs, k, sk = _summand(x)
        if c == 0 or k in seen:
            return False
        seen.add(k)
        if prev is not None and not prev < sk:
            return False
        prev = sk
    return len(t.args) > 1


def _match_add(t: Term, bd: Binding) -> Subst | None:
    if t in _CANON:
        return None
    if _add_is_canonical(t):
        _CANON.add(t)
        return None
    ys = _canon_add(t.args, signs_for(bd))
    if any(y.op is Op.ADD for y in ys):  # c A + (1-c) A, A a sum: lin(ys) would flatten A and
        return None                      # fail the guard; add-scaled-sum distributes c first
    rhs = _add_rhs(ys)
    if rhs.op is Op.ADD and _add_is_canonical(rhs):
        _CANON.add(rhs)
    if rhs is t:
        return None
    return {"xs": t.args, "ys": ys}


def _dropped(xs: tuple[Term, ...], ys: tuple[Term, ...]) -> list[Term]:
    """Factors of the monomials of ``ADD(xs)`` whose coefficients sum to 0 and that ``ys`` drops."""
    tot: dict[tuple[int, ...], Any] = {}
    fac: dict[tuple[int, ...], tuple[Term, ...]] = {}
    for x in _flat(Op.ADD, xs):
        c, fs, k, _sk = _summand(x)
        tot[k], fac[k] = b.num_add(tot.get(k, Fraction(0)), c), fs
    kept = {_summand(y)[2] for y in _flat(Op.ADD, ys)}
    return [f for k, c in tot.items() if c == 0 and k not in kept for f in fac[k]]


def _add_ok(s: Subst, bd: Binding) -> bool:
    lhs, rhs = b.add(*s["xs"]), _add_rhs(s["ys"])
    return (lin(s["xs"]) == lin(s["ys"]) and _dimnames([lhs]) == _dimnames([rhs])
            and all(signs_for(bd).defined(f) for f in _dropped(s["xs"], s["ys"])
                    + _dropped(s["ys"], s["xs"])))   # both directions (issue 17's finding)


def _sample_add(draw: Draw) -> tuple[Term, Binding]:
    dims = draw_dims(draw)
    # a quotient by a nonzero base may cancel out of the sum (x/n - x/n: dropped, defined)
    quot = b.mul(fresh(dims), b.pow_(nonzero_base(draw, dims[:1]), -1))
    pool = [fresh(dims), fresh(dims[:1]), b.const(Fraction(draw.int(-3, 3))), quot]
    xs = []
    for _ in range(draw.int(2, 5)):
        x = draw.choice(pool)
        if draw.bool():
            x = b.mul(draw_const(draw), *(x.args if x.op is Op.MUL else (x,)))
        xs.append(x)
    if draw.bool():
        xs.append(b.add(pool[0], pool[1]))
    if draw.bool():
        xs += [quot, b.mul(b.const(-1), *quot.args)]
    t = b.add(*xs)
    if _match_add(t, None) is None:  # already canonical: make it not so
        t = b.add(pool[0], pool[0], *xs)
    return t, draw_binding(draw)


# sums are formal linear combinations (flatten, merge coefficients, sort)
_rule("add-canon", "ADD(xs) = ADD(ys) (ys: the canonical sum; one term: ys[0]; none: CONST(0))",
      "lin(xs) == lin(ys) and the dims are the same set; a dropped monomial is defined on the "
      "spec's domain (rewriting/signs.py)", {Op.ADD},
      match=_match_add, lhs=lambda s: b.add(*s["xs"]), rhs=lambda s, bd: _add_rhs(s["ys"]),
      guard=_add_ok, sample=_sample_add)


# ---------------------------------------------------------------------------------------------
# MUL: n-ary, flat, one leading constant, merged exponents
def mono(xs: tuple[Term, ...]) -> tuple[Any, dict[int, Fraction]]:
    """``MUL(xs)`` as ``(c, {base id: exponent})`` (nested MULs flattened, ``POW(x, e)`` read
    as ``x^e``, zero exponents dropped)."""
    c: Any = Fraction(1)
    ex: Counter = Counter()
    for x in _flat(Op.MUL, xs):
        if x.op is Op.CONST:
            c = b.num_mul(c, b.num(x.attrs[0]))
        elif x.op is Op.POW:
            ex[id(x.args[0])] += Fraction(x.attrs[0])
        else:
            ex[id(x)] += 1
    return c, {k: v for k, v in ex.items() if v != 0}


def _canon_mul(xs: tuple[Term, ...], signs: Signs = CONTEXT_FREE) -> tuple[Term, ...]:
    c: Any = Fraction(1)
    bases: dict[int, list] = {}
    for x in _flat(Op.MUL, xs):
        if x.op is Op.CONST:
            c = b.num_mul(c, b.num(x.attrs[0]))
            continue
        base, e = (x.args[0], Fraction(x.attrs[0])) if x.op is Op.POW else (x, Fraction(1))
        g = bases.get(id(base))
        if g is None:
            bases[id(base)] = [base, e, [x]]
        else:
            g[1] += e
            g[2].append(x)
    facs: list[Term] = []
    zeros: list[Term] = []
    for base, e, seen in sorted(bases.values(), key=lambda g: b.skey(g[0])):
        if len(seen) > 1 or e == 0:  # merging or dropping must keep definedness (signs.py)
            left = ANY
            for x in seen:
                left &= requirement(x.attrs[0]) if x.op is Op.POW else ANY
            if not signs.same_definedness(base, left, None if e == 0 else requirement(e)):
                facs.extend(sorted(seen, key=lambda x: x.attrs[0] if x.op is Op.POW else 1))
                continue
        if e == 0:
            zeros.append(b.pow_(base, 0))
        else:
            facs.append(base if e == 1 else b.pow_(base, e))
    if zeros and not _dimnames(zeros) <= _dimnames(facs):
        facs = sorted(facs + zeros, key=lambda t: b.skey(t.args[0] if t.op is Op.POW else t))
    if c == 0 and not _dimnames(facs) and all(signs.defined(f) for f in facs):
        return (b.const(0),)
    return tuple(([b.const(c)] if c != 1 else []) + facs)


def _mul_rhs(ys: tuple[Term, ...]) -> Term:
    if not ys:
        return b.const(1)
    return ys[0] if len(ys) == 1 else b.mul(*ys)


def _mul_is_canonical(t: Term) -> bool:
    """Fast path: one leading constant (not 0 or 1), distinct bases in key order, no nesting."""
    args = t.args
    if len(args) < 2:
        return False
    start = 0
    if args[0].op is Op.CONST:
        v = args[0].attrs[0]
        if v == 0 or v == 1:
            return False
        start = 1
    prev = None
    seen: set[int] = set()
    for a in args[start:]:
        if a.op is Op.CONST or a.op is Op.MUL:
            return False
        if a.op is Op.POW:
            if a.attrs[0] == 0 or a.attrs[0] == 1:
                return False
            a = a.args[0]
        if id(a) in seen:
            return False
        seen.add(id(a))
        k = b.skey(a)
        if prev is not None and not prev < k:
            return False
        prev = k
    return True


def _match_mul(t: Term, bd: Binding) -> Subst | None:
    if t in _CANON:
        return None
    if _mul_is_canonical(t):
        _CANON.add(t)
        return None
    ys = _canon_mul(t.args, signs_for(bd))
    rhs = _mul_rhs(ys)
    if rhs.op is Op.MUL and len(mono(rhs.args)[1]) == sum(a.op is not Op.CONST for a in rhs.args):
        _CANON.add(rhs)  # distinct bases (a base kept unmerged is not: another context may merge)
    if rhs is t:
        return None
    return {"xs": t.args, "ys": ys}


def _mul_ok(s: Subst, bd: Binding) -> bool:
    c1, e1 = mono(s["xs"])
    c2, e2 = mono(s["ys"])
    same_dims = _dimnames(s["xs"]) == _dimnames(s["ys"])
    if not product_keeps_definedness(s["xs"], s["ys"], signs_for(bd)):
        return False  # x^-1 * x = 1 only where x != 0 (signs.py)
    if c1 == 0 and c2 == 0 and not _dimnames(s["xs"]):
        return True  # 0 annihilates a scalar product
    return c1 == c2 and e1 == e2 and same_dims


def _sample_mul(draw: Draw) -> tuple[Term, Binding]:
    dims = draw_dims(draw)
    pool = [nonzero_base(draw, dims, product=False), nonzero_base(draw, dims[:1], product=False)]
    xs = []
    for _ in range(draw.int(2, 5)):
        k = draw.int(0, 3)
        if k == 0:
            xs.append(draw_const(draw))
        elif k == 1:
            xs.append(draw.choice(pool))
        elif k == 2:
            xs.append(b.pow_(draw.choice(pool), Fraction(draw.choice([-2, -1, 1, 3]), draw.choice([1, 2]))))
        else:
            xs.append(b.mul(draw.choice(pool), draw.choice(pool)))
    t = b.mul(*xs)
    if _match_mul(t, None) is None:
        t = b.mul(t, pool[0])
    return t, draw_binding(draw)


# products are monomials c * prod base^e (flatten, fold constants, merge exponents, sort)
_rule("mul-canon", "MUL(xs) = MUL(ys) (ys: the canonical product; one factor: ys[0]; none: CONST(1))",
      "mono(xs) == mono(ys) and the dims are the same set (or both are 0 and scalar); both "
      "sides defined at the same inputs of the spec's domain (rewriting/signs.py)", {Op.MUL},
      match=_match_mul, lhs=lambda s: b.mul(*s["xs"]), rhs=lambda s, bd: _mul_rhs(s["ys"]),
      guard=_mul_ok, sample=_sample_mul)


def _match_add_scaled(t: Term, bd: Binding) -> Subst | None:
    for k, x in enumerate(t.args):
        if (x.op is Op.MUL and len(x.args) == 2 and x.args[0].op is Op.CONST
                and x.args[1].op is Op.ADD):
            return {"xs": t.args, "k": k}
    return None


def _add_scaled_ok(s: Subst, bd: Binding) -> bool:
    x = s["xs"][s["k"]]
    return (x.op is Op.MUL and len(x.args) == 2 and x.args[0].op is Op.CONST
            and x.args[1].op is Op.ADD)


def _add_scaled_rhs(s: Subst, bd: Binding) -> Term:
    xs, k = s["xs"], s["k"]
    c, inner = xs[k].args
    return b.add(*(xs[:k] + tuple(b.mul(c, y) for y in inner.args) + xs[k + 1:]))


def _sample_add_scaled(draw: Draw) -> tuple[Term, Binding]:
    dims = draw_dims(draw)
    scaled = b.mul(draw_const(draw), b.add(fresh(dims), fresh(dims[:1])))
    return b.add(*sorted([scaled, fresh(dims)], key=b.skey)), draw_binding(draw)


# a scaled sum inside a sum is part of one linear combination: distribute its constant
_rule("add-scaled-sum",
      "ADD(xs with xs[k] = MUL(CONST(c), ADD(ys))) = ADD(xs with xs[k] -> MUL(CONST(c), y)...)",
      "xs[k] is exactly MUL(CONST(c), ADD(ys))", {Op.ADD},
      match=_match_add_scaled, lhs=lambda s: b.add(*s["xs"]), rhs=_add_scaled_rhs,
      guard=_add_scaled_ok, sample=_sample_add_scaled)


def _content(xs: tuple[Term, ...]) -> Any:
    """The coefficient of the first non-constant summand (the producer's choice of content)."""
    for x in xs:
        c, fs, _k, _sk = _summand(x)
        if fs:
            return c
    return Fraction(1)


def _match_add_content(t: Term, bd: Binding) -> Subst | None:
    c = _content(t.args)
    if c == 1 or c == 0 or not b.certifiable(b.num_pow(b.num(c), Fraction(-1))):
        return None
    return {"xs": t.args, "c": c}


def _add_content_rhs(s: Subst, bd: Binding) -> Term:
    inv = b.const(b.num_pow(b.num(s["c"]), Fraction(-1)))
    return b.mul(b.const(s["c"]), b.add(*[b.mul(inv, x) for x in s["xs"]]))


def _sample_add_content(draw: Draw) -> tuple[Term, Binding]:
    dims = draw_dims(draw)
    c = Fraction(draw.choice([-3, -1, 3, 5]), draw.choice([1, 2]))  # never 1 or 1/2
    xs = [b.mul(b.const(c), fresh(dims)), b.mul(b.const(2 * c), fresh(dims[:1]))]
    if draw.bool():
        xs.append(b.const(Fraction(1, 3)))
    return b.add(*sorted(xs, key=lambda t: _summand(t)[3])), draw_binding(draw)


# a sum's content leaves it: c*a + c*k*b = c * (a + k*b), c the first summand's coefficient
_rule("add-content", "ADD(xs) = MUL(CONST(c), ADD(MUL(CONST(1/c), x) for x in xs))",
      "c != 0", {Op.ADD},
      match=_match_add_content, lhs=lambda s: b.add(*s["xs"]), rhs=_add_content_rhs,
      guard=lambda s, bd: b.num(s["c"]) != 0, sample=_sample_add_content)



canon_mul = _canon_mul
dimnames = _dimnames
