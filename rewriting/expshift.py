"""Max-shift rules: ``exp(y)`` with a max ``m`` in ``y`` splits into ``exp(y - c m) exp(m)^c``.

Softmax, logsumexp and online-softmax (ring / flash attention) subtract a stop-gradient max
``m`` before ``exp`` (``docs/dsl.md`` section 4, "Why the max shift is exact"). Different
kernels subtract different maxima: the global ``max_T s``, a running max ``m_j`` updated block
by block with the rescaling ``exp(m_{j-1} - m_j)``. These two rules put every such ``exp`` in
one form, so that the shifts become separate factors ``POW(EXP(m), c)`` that the canonical
product cancels (``exp(a - m1) exp(m1 - m2) = exp(a) exp(m2)^-1``) and that leave contractions
they are constant in:

* ``exp-max-shift``: ``EXP(y) = MUL(EXP(ADD(y, MUL(CONST(-c), m))), POW(EXP(m), c))`` where
  ``y`` read as a linear combination has the max ``m`` with a negative integer coefficient
  ``c`` and some other term (so it terminates: the new ``EXP`` lacks ``m``);
* ``einsum-max-factor-out``: ``EINSUM(.., f, .., out) = MUL(f, EINSUM(.. .., out'))`` for a
  factor ``f = EXP(m)`` or ``POW(EXP(m), c)`` whose dims are all kept (``f`` is constant along
  every contracted dim).

A *max* is a ``REDUCE_MAX``, ``MAXIMUM`` or ``ALL_REDUCE(., max)`` node, possibly under
``PERMUTE``/``SHARD`` (the only terms these rules look at, which keeps every other normal form
unchanged). Both laws hold for every real
``y``, ``m`` (``exp(m) > 0``), so the guards only restrict where they fire.
"""

from __future__ import annotations

from fractions import Fraction

from spec_lang.term import Binding, Op, Term

from rewriting import build as b
from rewriting.instances import draw_binding, fresh
from rewriting.rule import Draw, Rule, Subst, register

__all__ = ["is_max", "lin_terms"]


def _rule(name: str, law: str, guard_doc: str, ops: set[Op], match, lhs, rhs, guard,
          sample) -> Rule:
    return register(Rule(name, law, guard_doc, frozenset(ops), match, lhs, rhs, guard, sample,
                         group="exp-shift"))


def is_max(t: Term) -> bool:
    """``t`` is a max: REDUCE_MAX, MAXIMUM or ALL_REDUCE with ``max``, possibly under
    ``PERMUTE``/``SHARD`` (a rank's block of a max, in load-balanced order)."""
    while t.op in (Op.PERMUTE, Op.SHARD):
        t = t.args[0]
    return t.op in (Op.REDUCE_MAX, Op.MAXIMUM) or (t.op is Op.ALL_REDUCE
                                                   and t.attrs[1] == "max")


def _mono(x: Term) -> tuple[Fraction, Term] | None:
    if x.op is Op.MUL and len(x.args) == 2 and x.args[0].op is Op.CONST \
            and isinstance(x.args[0].attrs[0], Fraction):
        return x.args[0].attrs[0], x.args[1]
    return Fraction(1), x


def lin_terms(y: Term) -> list[tuple[Fraction, Term]]:
    """``y`` as ``sum_k c_k t_k``: an ADD's summands, through one ``MUL(CONST(k), ADD(..))``
    scale and nested ADDs (coefficients of equal terms merged, zeros dropped)."""
    scale = Fraction(1)
    if y.op is Op.MUL and len(y.args) == 2 and y.args[0].op is Op.CONST \
            and isinstance(y.args[0].attrs[0], Fraction) and y.args[1].op is Op.ADD:
        scale, y = y.args[0].attrs[0], y.args[1]
    out: dict[int, list] = {}
    stack = [(scale, y)]
    while stack:
        k, t = stack.pop()
        if t.op is Op.ADD:
            stack.extend((k, a) for a in t.args)
            continue
        c, base = _mono(t)
        e = out.setdefault(id(base), [Fraction(0), base])
        e[0] += k * c
    return [(c, t) for c, t in out.values() if c != 0]


def _shift_ok(s: Subst, bd: Binding) -> bool:
    c, m, y = s["c"], s["m"], s["y"]
    if not (isinstance(c, Fraction) and c.denominator == 1 and c < 0 and is_max(m)):
        return False
    terms = lin_terms(y)
    return any(t is m and k == c for k, t in terms) and len(terms) >= 2


def _match_shift(t: Term, bd: Binding) -> Subst | None:
    y = t.args[0]
    if y.op not in (Op.ADD, Op.MUL):
        return None
    for k, m in lin_terms(y):
        if is_max(m) and k < 0 and k.denominator == 1:
            s = {"y": y, "m": m, "c": k}
            if _shift_ok(s, bd):
                return s
    return None


def _sample_shift(draw: Draw) -> tuple[Term, Binding]:
    s = fresh(["S", "T"])
    m = b.reduce_max(s, ["T"])
    if draw.bool():
        m = b.elementwise(Op.MAXIMUM, [m, fresh(["S"])])
    c = draw.choice([-1, -2])
    other = s if draw.bool() else b.reduce_max(fresh(["S", "H"]), ["H"])
    y = b.add(other, b.mul(b.const(c), m)) if draw.bool() else \
        b.mul(b.const(-1), b.add(b.mul(b.const(-1), other), b.mul(b.const(-c), m)))
    bd = draw_binding(draw)
    return b.unary(Op.EXP, y), bd.replace(T=bd["S"])


def _shift_rhs(s: Subst, bd: Binding) -> Term:
    y, m, c = s["y"], s["m"], s["c"]
    return b.mul(b.unary(Op.EXP, b.add(y, b.mul(b.const(-c), m))),
                 b.pow_(b.unary(Op.EXP, m), c))


# exp(y) = exp(y - c m) * exp(m)^c: the max shift becomes a separate factor
_rule("exp-max-shift", "EXP(y) = MUL(EXP(ADD(y, MUL(CONST(-c), m))), POW(EXP(m), c))",
      "m is a max (REDUCE_MAX, MAXIMUM, ALL_REDUCE max; under PERMUTE/SHARD) with negative "
      "integer coefficient c in "
      "y read as a linear combination, and y has another term",
      {Op.EXP}, match=_match_shift, lhs=lambda s: b.unary(Op.EXP, s["y"]), rhs=_shift_rhs,
      guard=_shift_ok, sample=_sample_shift)


# ---------------------------------------------------------------------------------------------
def _is_max_factor(f: Term) -> bool:
    if f.op is Op.POW:
        f = f.args[0]
    return f.op is Op.EXP and is_max(f.args[0])


def _rest_out(s: Subst) -> tuple[str, ...]:
    have = {n for x in s["rest"] for n in x.dim_names}
    return tuple(n for n in s["out"] if n in have)


def _factor_ok(s: Subst, bd: Binding) -> bool:
    f, k, rest = s["f"], s["k"], s["rest"]
    return (_is_max_factor(f) and bool(rest) and set(f.dim_names) <= set(s["out"])
            and isinstance(k, int) and 0 <= k <= len(rest))


def _match_factor(t: Term, bd: Binding) -> Subst | None:
    out = t.attrs[0]
    if len(t.args) < 2:
        return None
    for k, f in enumerate(t.args):
        if _is_max_factor(f) and set(f.dim_names) <= set(out):
            s = {"f": f, "k": k, "rest": t.args[:k] + t.args[k + 1:], "out": out}
            if _factor_ok(s, bd):
                return s
    return None


def _factor_lhs(s: Subst) -> Term:
    xs = list(s["rest"])
    xs.insert(s["k"], s["f"])
    return b.einsum(xs, s["out"])


def _sample_factor(draw: Draw) -> tuple[Term, Binding]:
    sc = fresh(["S", "T"])
    f = b.unary(Op.EXP, b.reduce_max(sc, ["T"]))
    if draw.bool():
        f = b.pow_(f, draw.choice([-1, 2]))
    v = fresh(["T", "H"])
    out = draw.choice([("S",), ("H", "S")])
    xs = [fresh(["S", "T"]), v, f] if "H" in out else [fresh(["S", "T"]), f]
    bd = draw_binding(draw)
    return b.einsum(sorted(xs, key=b.skey), out), bd.replace(T=bd["S"])


# a factor constant along every contracted dim leaves the contraction
_rule("einsum-max-factor-out",
      "EINSUM(..f.., out) = MUL(f, EINSUM(.. .., out'))  (out' = out restricted to the rest)",
      "f = EXP(m) or POW(EXP(m), c) with m a max; f's dims are in out; another operand remains",
      {Op.EINSUM}, match=_match_factor, lhs=_factor_lhs,
      rhs=lambda s, bd: b.mul(s["f"], b.einsum(s["rest"], _rest_out(s))),
      guard=_factor_ok, sample=_sample_factor)


# ---------------------------------------------------------------------------------------------
def _without(x: Term, f: Term) -> Term | None:
    """``x = MUL(.., f, ..)`` with ``f`` removed (one factor: itself), else None."""
    if x.op is not Op.MUL or f not in x.args:
        return None
    k = x.args.index(f)
    rest = x.args[:k] + x.args[k + 1:]
    return rest[0] if len(rest) == 1 else b.mul(*rest)


def _common_ok(s: Subst, bd: Binding) -> bool:
    f, xs = s["f"], s["xs"]
    return (_is_max_factor(f) and len(xs) >= 2
            and all(_without(x, f) is not None for x in xs))


def _match_common(t: Term, bd: Binding) -> Subst | None:
    first = t.args[0]
    if first.op is not Op.MUL:
        return None
    for f in first.args:
        if _is_max_factor(f):
            s = {"f": f, "xs": t.args}
            if _common_ok(s, bd):
                return s
    return None


def _sample_common(draw: Draw) -> tuple[Term, Binding]:
    f = b.unary(Op.EXP, b.reduce_max(fresh(["S", "T"]), ["T"]))
    if draw.bool():
        f = b.pow_(f, -1)
    xs = [b.mul(f, fresh(["S", "H"])), b.mul(fresh(["S"]), f, fresh(["H"]))]
    if draw.bool():
        xs.append(b.mul(fresh(["S", "H"]), f))
    bd = draw_binding(draw)
    return b.add(*xs), bd.replace(T=bd["S"])


# a max factor shared by every summand leaves the sum (so that it can cancel in a quotient)
_rule("add-max-factor-out", "ADD(MUL(.., f, ..), ...) = MUL(f, ADD(MUL(.. ..), ...))",
      "f = EXP(m) or POW(EXP(m), c) with m a max is a factor of every summand (at least two)",
      {Op.ADD}, match=_match_common,
      lhs=lambda s: b.add(*s["xs"]),
      rhs=lambda s, bd: b.mul(s["f"], b.add(*[_without(x, s["f"]) for x in s["xs"]])),
      guard=_common_ok, sample=_sample_common)


# ---------------------------------------------------------------------------------------------
def _recip_ok(s: Subst, bd: Binding) -> bool:
    f, k, rest = s["f"], s["k"], s["rest"]
    return (f.op is Op.POW and f.args[0].op is Op.EINSUM and f.attrs[0] < 0
            and bool(rest) and set(f.dim_names) <= set(s["out"])
            and any(n not in s["out"] for x in rest for n in x.dim_names)
            and isinstance(k, int) and 0 <= k <= len(rest))


def _match_recip(t: Term, bd: Binding) -> Subst | None:
    out = t.attrs[0]
    for k, f in enumerate(t.args):
        if f.op is Op.POW and f.args[0].op is Op.EINSUM:
            s = {"f": f, "k": k, "rest": t.args[:k] + t.args[k + 1:], "out": out}
            if _recip_ok(s, bd):
                return s
    return None


def _sample_recip(draw: Draw) -> tuple[Term, Binding]:
    e = fresh(["S", "T"])
    f = b.pow_(b.einsum([e], ["S"]), draw.choice([-1, -2]))
    out = draw.choice([("S",), ("H", "S")])
    xs = [e, fresh(["T", "H"]), f] if "H" in out else [e, f]
    bd = draw_binding(draw)
    return b.einsum(sorted(xs, key=b.skey), out), bd.replace(T=bd["S"])


# 1 / (a sum) is constant along the contracted dims: softmax's normaliser leaves p @ v
_rule("einsum-recip-factor-out",
      "EINSUM(..f.., out) = MUL(f, EINSUM(.. .., out'))  (f = POW(EINSUM(..), e), e < 0)",
      "f's dims are in out; another operand has a contracted dim",
      {Op.EINSUM}, match=_match_recip, lhs=_factor_lhs,
      rhs=lambda s, bd: b.mul(s["f"], b.einsum(s["rest"], _rest_out(s))),
      guard=_recip_ok, sample=_sample_recip)


# ---------------------------------------------------------------------------------------------
def _unwrap(x: Term) -> tuple[tuple[tuple, ...], Term]:
    """``x = W(y)`` with ``W`` a chain of SHARD / PERMUTE (outermost first): ``(W, y)``."""
    ws: list[tuple] = []
    while x.op in (Op.SHARD, Op.PERMUTE):
        ws.append((x.op.name,) + tuple(x.attrs))
        x = x.args[0]
    return tuple(ws), x


def _wrap(ws: tuple[tuple, ...], y: Term) -> Term:
    for w in reversed(ws):
        y = b.shard(y, w[1], w[2]) if w[0] == "SHARD" else b.permute(y, w[1], w[2])
    return y


def _block_ok(s: Subst, bd: Binding) -> bool:
    xs, k, ws, c, m = s["xs"], s["k"], s["ws"], s["c"], s["m"]
    return (isinstance(k, int) and 0 <= k < len(xs) and len(xs) >= 2 and bool(ws)
            and isinstance(c, Fraction) and c.denominator == 1 and c < 0 and is_max(m)
            and xs[k] is _wrap(ws, b.mul(b.const(c), m)))


def _match_block(t: Term, bd: Binding) -> Subst | None:
    y = t.args[0]
    if y.op is not Op.ADD:
        return None
    for k, x in enumerate(y.args):
        ws, core = _unwrap(x)
        if ws and core.op is Op.MUL and len(core.args) == 2 and core.args[0].op is Op.CONST:
            c = core.args[0].attrs[0]
            s = {"xs": y.args, "k": k, "ws": ws, "c": c, "m": core.args[1]}
            if isinstance(c, Fraction) and _block_ok(s, bd):
                return s
    return None


def _block_rhs(s: Subst, bd: Binding) -> Term:
    rest = s["xs"][:s["k"]] + s["xs"][s["k"] + 1:]
    y = rest[0] if len(rest) == 1 else b.add(*rest)
    return b.mul(b.unary(Op.EXP, y), b.pow_(b.unary(Op.EXP, _wrap(s["ws"], s["m"])), s["c"]))


def _sample_block(draw: Draw) -> tuple[Term, Binding]:
    bd = draw_binding(draw)
    m = b.reduce_max(fresh(["B", "S", "T"]), ["T"])
    ws: tuple[tuple, ...] = (("PERMUTE", "S", (1, 0)),)
    if draw.bool():
        ws = (("SHARD", "B", "dp"),) + ws
    x = _wrap(ws, b.mul(b.const(draw.choice([-1, -2])), m))
    other = _wrap(ws, fresh(["B", "S"] + (["H"] if draw.bool() else [])))
    return b.unary(Op.EXP, b.add(other, x) if draw.bool() else b.add(x, other)), \
        bd.replace(T=bd["S"])


# the same shift when the scaled max is a rank's block (SHARD) or in load-balanced order
# (PERMUTE): W(c m) = c W(m) for those movement ops
_rule("exp-max-shift-block",
      "EXP(ADD(xs)) = MUL(EXP(ADD(xs without x_k)), POW(EXP(W(m)), c))  (x_k = W(MUL(CONST(c), m)))",
      "W is a non-empty chain of SHARD / PERMUTE; m is a max; c a negative integer",
      {Op.EXP}, match=_match_block, lhs=lambda s: b.unary(Op.EXP, b.add(*s["xs"])),
      rhs=_block_rhs, guard=_block_ok, sample=_sample_block)
