"""The checker's copies of the canonical-form and completeness rules (``docs/rules.md``:
canonical forms, issue 12's contraction / power / unit-axis rules), over kernel nodes.
Registered in :data:`proofs.checker_patterns.RULE_ROWS` in the producer's priority order."""

from __future__ import annotations

from collections import Counter
from fractions import Fraction
from typing import Any

from proofs.checker_patterns import (
    _join, _mask, _num_eq, _sym, add, all_gather, all_reduce, chunk, concat, const, einsum,
    einsum_raw, ELEMENTWISE, Env, LEAVES, mul, num, num_add, num_mul, num_pow, P, part, pow_,
    pow_is_real, reduce_max, rename, rule_in, shard,
)
from proofs.checker_signs import pow_pow_keeps_definedness, product_keeps_definedness
rule = rule_in("canonical")


# ==== canonical forms ==========================================================================
_DIMS_SORT_EXCLUDED = LEAVES | {"EINSUM", "REGION"}


@rule("dims-sort", "t = t with its dims listed by name (storage order is not meaning)",
      "t is not a leaf or EINSUM and its dims are not sorted by name")
def _dims_sort(e: Env) -> tuple[Any, Any]:
    t = e.t("t")
    op, args, attrs, dims = e.tab.nodes[t]
    names = [n for n, _ in dims]
    e.require(op not in _DIMS_SORT_EXCLUDED, f"{op} is a leaf or EINSUM")
    e.require(any(names[i] >= names[i + 1] for i in range(len(names) - 1)), "dims already sorted")
    return t, P(op, attrs, args, tuple(sorted(dims, key=lambda d: d[0])))


# STOP_GRAD is the identity forward (gradients were taken before normalisation)
@rule("stop-grad-elim", "STOP_GRAD(x) = x")
def _stop_grad(e: Env) -> tuple[Any, Any]:
    return P("STOP_GRAD", (), (e.t("x"),)), e.t("x")


# NEG x = (-1) * x
@rule("neg-mul", "NEG(x) = MUL(CONST(-1), x)")
def _neg_mul(e: Env) -> tuple[Any, Any]:
    return P("NEG", (), (e.t("x"),)), mul(const(-1), e.t("x"))


# 1/x = x^-1
@rule("recip-pow", "RECIP(x) = POW(x, -1)")
def _recip_pow(e: Env) -> tuple[Any, Any]:
    return P("RECIP", (), (e.t("x"),)), pow_(e.t("x"), -1)


# sqrt x = x^(1/2)
@rule("sqrt-pow", "SQRT(x) = POW(x, 1/2)")
def _sqrt_pow(e: Env) -> tuple[Any, Any]:
    return P("SQRT", (), (e.t("x"),)), pow_(e.t("x"), Fraction(1, 2))


# 1/sqrt x = x^(-1/2)
@rule("rsqrt-pow", "RSQRT(x) = POW(x, -1/2)")
def _rsqrt_pow(e: Env) -> tuple[Any, Any]:
    return P("RSQRT", (), (e.t("x"),)), pow_(e.t("x"), Fraction(-1, 2))


# CAST is the identity over the reals
@rule("cast-elim", "CAST(x, dtype) = x")
def _cast(e: Env) -> tuple[Any, Any]:
    return P("CAST", (e.v("dtype"),), (e.t("x"),)), e.t("x")


# sizes are the binding's integers
@rule("dim-size", "DIM_SIZE(d) = CONST(size(d))", "d is bound")
def _dim_size(e: Env) -> tuple[Any, Any]:
    d = e.v("d")
    e.require(isinstance(d, str) and d in e.b, f"dim {d!r} is not bound")
    return P("DIM_SIZE", (d,)), const(e.b[d])


@rule("axis-size", "AXIS_SIZE(a) = CONST(|a|)", "a is bound")
def _axis_size(e: Env) -> tuple[Any, Any]:
    a = e.v("a")
    e.require(isinstance(a, str) and a in e.b, f"axis {a!r} is not bound")
    return P("AXIS_SIZE", (a,)), const(e.b[a])


# a per-rank constant with the same value on every coordinate is a constant
@rule("rank-const-uniform", "RANK_CONST(a, (v, ..., v)) = CONST(v)",
      "every value equals the first and there are |a| of them")
def _rank_const_uniform(e: Env) -> tuple[Any, Any]:
    a, values = e.v("a"), tuple(e.v("values"))
    e.require(a in e.b and len(values) == e.b[a], "|a| values")
    e.require(all(_num_eq(num(v), num(values[0])) for v in values), "all values equal")
    return P("RANK_CONST", (a, values)), const(values[0])


# x^1 = x
@rule("pow-one", "POW(x, 1) = x")
def _pow_one(e: Env) -> tuple[Any, Any]:
    return pow_(e.t("x"), 1), e.t("x")


# c^e folded exactly
@rule("pow-const", "POW(CONST(c), e) = CONST(c^e)",
      "c^e is real and defined: c > 0, or e an integer and (c != 0 or e > 0)")
def _pow_const(e: Env) -> tuple[Any, Any]:
    c, x = num(e.v("c")), num(e.v("e"))
    e.require(isinstance(x, Fraction), "the exponent is rational")
    e.require(pow_is_real(c, x), f"{c}^{x} is real and defined")
    return pow_(const(c), x), const(num_pow(c, x))


# (x^a)^b = x^(ab), unless that would drop a sign
@rule("pow-pow", "POW(POW(x, a), b) = POW(x, a*b)",
      "b is an integer, or a's numerator is odd; both sides defined at the same inputs of the "
      "spec's domain (rewriting/signs.py)")
def _pow_pow(e: Env) -> tuple[Any, Any]:
    a, bb = Fraction(num(e.v("a"))), Fraction(num(e.v("b")))
    e.require(bb.denominator == 1 or a.numerator % 2 == 1, "b integer or a's numerator odd")
    e.require(pow_pow_keeps_definedness(e.signs, e.t("x"), a, bb),
              "both sides defined at the same inputs ((x^-1)^-1 = x needs x != 0)")
    return pow_(pow_(e.t("x"), a), bb), pow_(e.t("x"), a * bb)


# an integer power of a product is the product of the powers
@rule("pow-mul", "POW(MUL(xs), n) = MUL(POW(x, n) for x in xs)", "n is an integer")
def _pow_mul(e: Env) -> tuple[Any, Any]:
    xs, n = e.ts("xs"), num(e.v("e"))
    e.require(isinstance(n, Fraction) and n.denominator == 1, "n is an integer")
    return pow_(mul(*xs), n), mul(*[pow_(x, n) for x in xs])


def _flat(e: Env, op: str, xs: tuple[int, ...]) -> list[int]:
    out: list[int] = []
    stack = list(reversed(xs))
    while stack:
        x = stack.pop()
        if e.op(x) == op:
            stack.extend(reversed(e.args(x)))
        else:
            out.append(x)
    return out


def _coeff_monomial(e: Env, x: int) -> tuple[Any, tuple[int, ...]]:
    if e.op(x) == "CONST":
        return num(e.attrs(x)[0]), ()
    if e.op(x) == "MUL":
        c: Any = Fraction(1)
        fs = []
        for a in e.args(x):
            if e.op(a) == "CONST":
                c = num_mul(c, num(e.attrs(a)[0]))
            else:
                fs.append(a)
        return c, tuple(fs)
    return Fraction(1), (x,)


def _lin(e: Env, xs: tuple[int, ...]) -> dict[tuple[int, ...], Any]:
    """Formal linear combination {monomial (sorted factor ids): coefficient} of ADD(xs)."""
    out: dict[tuple[int, ...], Any] = {}
    for x in _flat(e, "ADD", xs):
        c, fs = _coeff_monomial(e, x)
        k = tuple(sorted(fs))
        out[k] = num_add(out.get(k, Fraction(0)), c)
    return {k: v for k, v in out.items() if not _num_eq(v, 0)}


def _same_coeffs(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(_num_eq(a[k], b[k]) for k in a)


def _nary(op: str, ys: tuple[int, ...], empty: Any) -> Any:
    if not ys:
        return empty
    return ys[0] if len(ys) == 1 else P(op, (), ys)


# sums are formal linear combinations
@rule("add-canon",
      "ADD(xs) = ADD(ys) (ys: the canonical sum; one term: ys[0]; none: CONST(0))",
      "lin(xs) == lin(ys) and the dims are the same set; a dropped monomial is defined on the "
      "spec's domain (rewriting/signs.py)")
def _add_canon(e: Env) -> tuple[Any, Any]:
    xs, ys = e.ts("xs"), e.ts("ys")
    e.require(bool(xs), "ADD has operands")
    e.require(_same_coeffs(_lin(e, xs), _lin(e, ys)), "lin(xs) == lin(ys)")
    e.require(e.dimnames(xs) == e.dimnames(ys), "same dims")
    # both directions: a monomial the right side introduces with coefficients summing to 0
    # (x -> x + y^-1 - y^-1) is a dropped one of the reverse step (found formalising issue 17)
    e.require(all(e.signs.defined(f) for f in _dropped(e, xs, ys) + _dropped(e, ys, xs)),
              "a dropped monomial is defined (x^-1 - x^-1 = 0 needs x != 0)")
    return add(*xs), _nary("ADD", ys, const(0))


def _dropped(e: Env, xs: tuple[int, ...], ys: tuple[int, ...]) -> list[int]:
    """Factors of the monomials of ADD(xs) whose coefficients sum to 0 and that ys drops."""
    tot: dict[tuple[int, ...], Any] = {}
    for x in _flat(e, "ADD", xs):
        c, fs = _coeff_monomial(e, x)
        k = tuple(sorted(fs))
        tot[k] = num_add(tot.get(k, Fraction(0)), c)
    kept = {tuple(sorted(_coeff_monomial(e, y)[1])) for y in _flat(e, "ADD", ys)}
    return [f for k, c in tot.items() if _num_eq(c, 0) and k not in kept for f in k]


def _mono(e: Env, xs: tuple[int, ...]) -> tuple[Any, dict[int, Fraction]]:
    c: Any = Fraction(1)
    ex: Counter = Counter()
    for x in _flat(e, "MUL", xs):
        if e.op(x) == "CONST":
            c = num_mul(c, num(e.attrs(x)[0]))
        elif e.op(x) == "POW":
            ex[e.args(x)[0]] += Fraction(num(e.attrs(x)[0]))
        else:
            ex[x] += 1
    return c, {k: v for k, v in ex.items() if v != 0}


# products are monomials c * prod base^e
@rule("mul-canon",
      "MUL(xs) = MUL(ys) (ys: the canonical product; one factor: ys[0]; none: CONST(1))",
      "mono(xs) == mono(ys) and the dims are the same set (or both are 0 and scalar); both "
      "sides defined at the same inputs of the spec's domain (rewriting/signs.py)")
def _mul_canon(e: Env) -> tuple[Any, Any]:
    xs, ys = e.ts("xs"), e.ts("ys")
    e.require(bool(xs), "MUL has operands")
    e.require(product_keeps_definedness(e.signs, xs, ys),
              "both sides defined at the same inputs (x^-1 * x = 1 needs x != 0)")
    c1, e1 = _mono(e, xs)
    c2, e2 = _mono(e, ys)
    zero_scalar = _num_eq(c1, 0) and _num_eq(c2, 0) and not e.dimnames(xs)
    e.require(zero_scalar or (_num_eq(c1, c2) and e1 == e2
                              and e.dimnames(xs) == e.dimnames(ys)), "mono(xs) == mono(ys)")
    return mul(*xs), _nary("MUL", ys, const(1))


# a scaled sum inside a sum is part of one linear combination: distribute its constant
@rule("add-scaled-sum",
      "ADD(xs with xs[k] = MUL(CONST(c), ADD(ys))) = ADD(xs with xs[k] -> MUL(CONST(c), y)...)",
      "xs[k] is exactly MUL(CONST(c), ADD(ys))")
def _add_scaled_sum(e: Env) -> tuple[Any, Any]:
    xs, k = e.ts("xs"), e.v("k")
    e.require(isinstance(k, int) and not isinstance(k, bool) and 0 <= k < len(xs), "k indexes xs")
    x = xs[k]
    e.require(e.op(x) == "MUL" and len(e.args(x)) == 2 and e.op(e.args(x)[0]) == "CONST"
              and e.op(e.args(x)[1]) == "ADD", "xs[k] is MUL(CONST(c), ADD(ys))")
    c, inner = e.args(x)
    return add(*xs), add(*(xs[:k] + tuple(mul(c, y) for y in e.args(inner)) + xs[k + 1:]))


# a sum's content leaves it: c*a + c*k*b = c * (a + k*b)
@rule("add-content", "ADD(xs) = MUL(CONST(c), ADD(MUL(CONST(1/c), x) for x in xs))", "c != 0")
def _add_content(e: Env) -> tuple[Any, Any]:
    xs, c = e.ts("xs"), num(e.v("c"))
    e.require(not _num_eq(c, 0), "c != 0")
    inv = const(num_pow(c, Fraction(-1)))
    return add(*xs), mul(const(c), add(*[mul(inv, x) for x in xs]))


# sort einsum operands and out_dims
@rule("einsum-canon", "EINSUM(xs, out) = EINSUM(ys, sorted(out))", "ys is a permutation of xs")
def _einsum_canon(e: Env) -> tuple[Any, Any]:
    xs, ys, out = e.ts("xs"), e.ts("ys"), tuple(e.v("out"))
    e.require(Counter(xs) == Counter(ys), "ys is a permutation of xs")
    return einsum_raw(xs, out), einsum(ys, out)


# an einsum of one operand that keeps every dim is the operand
@rule("einsum-identity", "EINSUM((x,), out) = x", "set(out) == dims of x")
def _einsum_identity(e: Env) -> tuple[Any, Any]:
    x, out = e.t("x"), tuple(e.v("out"))
    e.require(set(out) == e.dimnames(x), "set(out) == dims of x")
    return einsum((x,), out), x


# a contraction that sums over nothing is the pointwise product
@rule("einsum-pointwise", "EINSUM(xs, out) = MUL(xs)",
      "at least two operands, and out holds every dim of every operand")
def _einsum_pointwise(e: Env) -> tuple[Any, Any]:
    xs, out = e.ts("xs"), tuple(e.v("out"))
    e.require(len(xs) >= 2 and set(out) == e.dimnames(xs),
              "at least two operands, and out holds every dim of every operand")
    return einsum_raw(xs, out), mul(*xs)


def _scalar_split(e: Env, xs: tuple[int, ...]) -> tuple[list[int], list[Any]]:
    scal: list[int] = []
    rest: list[Any] = []
    for x in xs:
        if not e.dims(x):
            scal.append(x)
        elif e.op(x) == "MUL" and any(not e.dims(a) for a in e.args(x)):
            scal.extend(a for a in e.args(x) if not e.dims(a))
            r = [a for a in e.args(x) if e.dims(a)]
            rest.append(r[0] if len(r) == 1 else mul(*r))
        else:
            rest.append(x)
    return scal, rest


# scalar factors leave a contraction
@rule("einsum-scalar-out", "EINSUM(xs, out) = MUL(scalars..., EINSUM(rest, out))",
      "some operand is a scalar or a MUL with scalar factors, and a non-scalar remains")
def _einsum_scalar_out(e: Env) -> tuple[Any, Any]:
    xs, out = e.ts("xs"), tuple(e.v("out"))
    scal, rest = _scalar_split(e, xs)
    e.require(bool(scal) and bool(rest), "scalars and a non-scalar")
    return einsum(xs, out), mul(*scal, einsum(tuple(rest), out))


# a contraction multiplies its operands pointwise: they form one canonical product
@rule("einsum-mul-canon",
      "EINSUM(xs, out) = EINSUM(ys, out) (ys: the product's canonical factors)",
      "mono(xs) == mono(ys) with constant 1, ys non-empty, the dims are the same set; both sides "
      "defined at the same inputs of the spec's domain (rewriting/signs.py)")
def _einsum_mul_canon(e: Env) -> tuple[Any, Any]:
    xs, ys, out = e.ts("xs"), e.ts("ys"), tuple(e.v("out"))
    c1, e1 = _mono(e, xs)
    c2, e2 = _mono(e, ys)
    e.require(_num_eq(c1, 1) and _num_eq(c2, 1) and e1 == e2 and bool(ys)
              and e.dimnames(xs) == e.dimnames(ys), "mono(xs) == mono(ys) with constant 1")
    e.require(product_keeps_definedness(e.signs, xs, ys),
              "both sides defined at the same inputs (x^-1 * x = 1 needs x != 0)")
    return einsum(xs, out), einsum(ys, out)


def _move_scalar(e: Env, op: str) -> tuple[Any, Any]:
    xs, attrs = e.ts("xs"), tuple(e.v("attrs"))
    scal = [x for x in xs if not e.dims(x)]
    rest = [x for x in xs if e.dims(x)]
    e.require(bool(scal) and bool(rest), "a dimless factor and another")
    inner = rest[0] if len(rest) == 1 else mul(*rest)

    def rebuild(x: Any) -> P:
        if op == "RENAME":
            return rename(x, attrs[0], attrs[1], tuple(e.v("nshards")))
        return chunk(x, *attrs)
    return rebuild(mul(*xs)), mul(*scal, rebuild(inner))


# renaming and taking a chunk are linear: scalar factors move out of them
@rule("rename-scalar-out", "RENAME(MUL(xs), o, n) = MUL(scalars..., RENAME(MUL(rest...), o, n))",
      "some factor of the MUL is dimless, and some is not")
def _rename_scalar_out(e: Env) -> tuple[Any, Any]:
    return _move_scalar(e, "RENAME")


@rule("chunk-scalar-out",
      "CHUNK(MUL(xs), d, p, i) = MUL(scalars..., CHUNK(MUL(rest...), d, p, i))",
      "some factor of the MUL is dimless, and some is not")
def _chunk_scalar_out(e: Env) -> tuple[Any, Any]:
    return _move_scalar(e, "CHUNK")


# a concatenation is linear: the first non-zero block coefficient leaves it
@rule("concat-content",
      "CONCAT(xs, d) = MUL(CONST(c), CONCAT(MUL(CONST(1/c), x) for x in xs, d))", "c != 0")
def _concat_content(e: Env) -> tuple[Any, Any]:
    xs, d, csh, c = e.ts("xs"), e.v("d"), tuple(e.v("cshards")), num(e.v("c"))
    e.require(not _num_eq(c, 0), "c != 0")
    inv = const(num_pow(c, Fraction(-1)))
    return concat(xs, d, csh), mul(const(c), concat(tuple(mul(inv, x) for x in xs), d, csh))


# ---- completeness rules (issue 12): rewriting/contraction.py, powers.py, unit_axis.py ------
def _contracted(e: Env, xs: tuple[Any, ...], out: tuple[str, ...]) -> set[str]:
    return e.dimnames(xs) - set(out)


def _unit_dims(e: Env, x: int, names: set[str]) -> set[str]:
    """Dims among ``names`` that x holds unsharded and that have size 1."""
    return {n for n, sh in e.dims(x).items() if n in names and not sh and e.b.get(n) == 1}


def _is_unit_squeeze(e: Env, x: int) -> bool:
    if e.op(x) != "EINSUM" or len(e.args(x)) != 1:
        return False
    c = _contracted(e, e.args(x), tuple(e.attrs(x)[0]))
    return _unit_dims(e, e.args(x)[0], c) == c


def _squeeze(e: Env, x: int, u: set[str]) -> Any:
    mine = set(e.dims(x)) & u
    return einsum((x,), [n for n in e.dims(x) if n not in mine]) if mine else x


@rule("einsum-nested", "EINSUM(..EINSUM(zs, o1)..ys.., out) = EINSUM(..zs..ys.., out)",
      "the dims zs contract occur in no other operand, not in out and not among the dims another "
      "operand sums (an EINSUM, under collectives and shards); the inner EINSUM is not a sum "
      "over size-1 dims only")
def _einsum_nested(e: Env) -> tuple[Any, Any]:
    xs, k, out = e.ts("xs"), e.v("k"), tuple(e.v("out"))
    e.require(isinstance(k, int) and not isinstance(k, bool) and 0 <= k < len(xs)
              and e.op(xs[k]) == "EINSUM" and not _is_unit_squeeze(e, xs[k]),
              "xs[k] is an EINSUM, not a unit squeeze")
    inner = xs[k]
    others = xs[:k] + xs[k + 1:]
    outside = e.dimnames(others) | set(out)
    bound: set[str] = set()
    for x in others:
        while e.op(x) in ("ALL_REDUCE", "SHARD", "PART", "BROADCAST", "ALL_GATHER",
                          "REDUCE_SCATTER"):
            x = e.args(x)[0]
        if e.op(x) == "EINSUM":
            bound |= _contracted(e, e.args(x), tuple(e.attrs(x)[0]))
    e.require(not _contracted(e, e.args(inner), tuple(e.attrs(inner)[0])) & (outside | bound),
              "the inner contracted dims occur nowhere else")
    return einsum(xs, out), einsum(xs[:k] + e.args(inner) + xs[k + 1:], out)


@rule("einsum-unit-dim", "EINSUM(xs, out) = EINSUM(EINSUM((x,), dims(x) - U) for x in xs, out)",
      "U = the contracted dims of size 1 (unsharded) is non-empty, and the EINSUM is not a sum "
      "of one operand over dims of U only")
def _einsum_unit_dim(e: Env) -> tuple[Any, Any]:
    xs, out = e.ts("xs"), tuple(e.v("out"))
    c = _contracted(e, xs, out)
    u = {n for x in xs for n in _unit_dims(e, x, c)}
    e.require(bool(u) and not (len(xs) == 1 and u == c), "U non-empty, not a squeeze")
    return einsum(xs, out), einsum(tuple(_squeeze(e, x, u) for x in xs), out)


# a squeeze (a sum over size-1 dims only) of an elementwise op is the op of the squeezed operands
@rule("squeeze-elementwise",
      "EINSUM((op(..x_i..),), out) = op(..EINSUM((x_i,), dims(x_i) - U)..)  (op elementwise, "
      "not WHERE)",
      "U = the dims op(..x_i..) has and out lacks is non-empty, and every dim of U has size 1 "
      "and is unsharded in the operands that hold it")
def _squeeze_elementwise(e: Env) -> tuple[Any, Any]:
    op, attrs, xs, out = e.v("op"), tuple(e.v("attrs")), e.ts("xs"), tuple(e.v("out"))
    e.require(op in ELEMENTWISE and op != "WHERE" and bool(xs), f"{op} is elementwise, not WHERE")
    u = e.dimnames(xs) - set(out)
    e.require(bool(u) and {n for x in xs for n in _unit_dims(e, x, u)} == u,
              "U non-empty, every dim of U of size 1 and unsharded")
    return (einsum((P(op, attrs, xs),), out),
            P(op, attrs, tuple(_squeeze(e, x, u) for x in xs)))


@rule("reduce-max-unit-dim",
      "REDUCE_MAX(x, dims) = REDUCE_MAX(EINSUM((x,), dims(x) - U), dims - U)  (no REDUCE_MAX "
      "when dims = U)", "U = the dims among dims of size 1 (unsharded) is non-empty")
def _reduce_max_unit_dim(e: Env) -> tuple[Any, Any]:
    x, dims = e.t("x"), tuple(e.v("dims"))
    u = _unit_dims(e, x, set(dims))
    e.require(bool(u), "U non-empty")
    rest = [n for n in dims if n not in u]
    sq = _squeeze(e, x, u)
    return reduce_max(x, dims), (reduce_max(sq, rest) if rest else sq)


@rule("einsum-factor-out", "EINSUM(xs, out) = MUL(fs..., EINSUM(rest, out'))  (out' = out "
      "restricted to the rest)", "fs = the operands with dims, all in out (non-empty); the rest "
      "is non-empty and sums some dim")
def _einsum_factor_out(e: Env) -> tuple[Any, Any]:
    xs, out = e.ts("xs"), tuple(e.v("out"))
    keep = set(out)
    pulled = [x for x in xs if e.dims(x) and set(e.dims(x)) <= keep]
    rest = tuple(x for x in xs if x not in pulled)
    e.require(bool(pulled) and bool(rest) and bool(e.dimnames(rest) - keep),
              "factors constant along the contraction, and a contraction left")
    have = e.dimnames(rest)
    return einsum(xs, out), mul(*pulled, einsum(rest, [n for n in out if n in have]))


def _components(e: Env, xs: tuple[int, ...], out: tuple[str, ...]) -> list[list[int]]:
    """Operand positions grouped by "shares a summed dim", groups in order of first operand."""
    summed = e.dimnames(xs) - set(out)
    groups: list[list[int]] = []
    for i, x in enumerate(xs):
        mine = set(e.dims(x)) & summed
        hit = [g for g in groups if any(set(e.dims(xs[j])) & mine for j in g)]
        merged = sorted([i] + [j for g in hit for j in g])
        groups = [g for g in groups if g not in hit] + [merged]
    return sorted(groups, key=lambda g: g[0])


@rule("einsum-components", "EINSUM(xs, out) = MUL(EINSUM(K_j, out & dims(K_j)) for each K_j)",
      "the operands form two or more groups K_j that share no summed dim")
def _einsum_components(e: Env) -> tuple[Any, Any]:
    xs, out = e.ts("xs"), tuple(e.v("out"))
    groups = _components(e, xs, out)
    e.require(len(xs) >= 2 and len(groups) >= 2, "two or more groups")
    parts = []
    for g in groups:
        ys = tuple(xs[i] for i in g)
        have = e.dimnames(ys)
        parts.append(einsum(ys, [n for n in out if n in have]))
    return einsum(xs, out), mul(*parts)


def _positive(v: Any) -> bool:
    c = num(v)
    return c > 0 if isinstance(c, Fraction) else bool(_sym(c) > 0)


@rule("pow-const-factor", "POW(MUL(.., CONST(c), ..), e) = MUL(CONST(c^e), POW(MUL(..  ..), e))",
      "e is not an integer and c > 0")
def _pow_const_factor(e: Env) -> tuple[Any, Any]:
    xs, k, ex = e.ts("xs"), e.v("k"), num(e.v("e"))
    e.require(isinstance(ex, Fraction) and ex.denominator != 1, "e is not an integer")
    e.require(isinstance(k, int) and not isinstance(k, bool) and 0 <= k < len(xs)
              and len(xs) >= 2 and e.op(xs[k]) == "CONST" and _positive(e.attrs(xs[k])[0]),
              "xs[k] is a positive constant")
    rest = xs[:k] + xs[k + 1:]
    inner = rest[0] if len(rest) == 1 else mul(*rest)
    c = num_pow(num(e.attrs(xs[k])[0]), ex)
    return pow_(mul(*xs), ex), mul(const(c), pow_(inner, ex))


@rule("silu-def", "SILU(x) = MUL(x, SIGMOID(x))")
def _silu_def(e: Env) -> tuple[Any, Any]:
    x = e.t("x")
    return P("SILU", (), (x,)), mul(x, P("SIGMOID", (), (x,)))


@rule("gelu-def", "GELU(x) = MUL(CONST(1/2), x, ADD(CONST(1), ERF(MUL(CONST(1/sqrt 2), x))))")
def _gelu_def(e: Env) -> tuple[Any, Any]:
    import sympy

    x = e.t("x")
    return P("GELU", (), (x,)), mul(const(Fraction(1, 2)), x,
                                    add(const(1), P("ERF", (), (mul(const(1 / sympy.sqrt(2)),
                                                                     x),))))
rule = rule_in("collectives")


def _unit_axis(e: Env, a: Any) -> bool:
    return isinstance(a, str) and e.b.get(a) == 1


@rule("allreduce-unit-axis", "ALL_REDUCE(x, a, r) = x", "|a| == 1")
def _allreduce_unit_axis(e: Env) -> tuple[Any, Any]:
    x, a, r = e.t("x"), e.v("a"), e.v("r")
    e.require(_unit_axis(e, a), "|a| == 1")
    return all_reduce(x, a, r), x


@rule("part-unit-axis", "PART(x, a) = x", "|a| == 1")
def _part_unit_axis(e: Env) -> tuple[Any, Any]:
    x, a = e.t("x"), e.v("a")
    e.require(_unit_axis(e, a), "|a| == 1")
    return part(x, a), x


@rule("broadcast-unit-axis", "BROADCAST(x, a, src) = x", "|a| == 1")
def _broadcast_unit_axis(e: Env) -> tuple[Any, Any]:
    x, a, src = e.t("x"), e.v("a"), e.v("src")
    e.require(_unit_axis(e, a), "|a| == 1")
    return P("BROADCAST", (a, src), (x,)), x


@rule("einsum-unit-axis",
      "EINSUM(..SHARD(x_i, d, a)..y_j.., out) = EINSUM(..x_i..y_j.., out)",
      "|a| == 1; d not in out; the blocks share d's spec; the y_j lack d")
def _einsum_unit_axis(e: Env) -> tuple[Any, Any]:
    xs, mask, d, a, out = e.ts("xs"), _mask(e), e.v("d"), e.v("a"), tuple(e.v("out"))
    e.require(_unit_axis(e, a) and d not in out and len(xs) == len(mask) and any(mask),
              "|a| == 1, d not in out")
    specs = {e.dims(x).get(d) for x, m in zip(xs, mask) if m}
    e.require(len(specs) == 1 and None not in specs
              and not any(d in e.dims(x) for x, m in zip(xs, mask) if not m),
              "the blocks share d's spec; the other operands lack d")
    return einsum(_join(xs, mask, d, a), out), einsum(xs, out)


@rule("reduce-max-unit-axis", "REDUCE_MAX(SHARD(x, d, a), dims) = REDUCE_MAX(x, dims)",
      "|a| == 1 and d in dims")
def _reduce_max_unit_axis(e: Env) -> tuple[Any, Any]:
    x, d, a, dims = e.t("x"), e.v("d"), e.v("a"), tuple(e.v("dims"))
    e.require(_unit_axis(e, a) and d in dims and d in e.dims(x), "|a| == 1 and d in dims")
    return reduce_max(shard(x, d, a), dims), reduce_max(x, dims)


@rule("allgather-unit-axis", "ALL_GATHER(SHARD(x, d, a), a, d) = x", "|a| == 1")
def _allgather_unit_axis(e: Env) -> tuple[Any, Any]:
    x, a, d = e.t("x"), e.v("a"), e.v("d")
    e.require(_unit_axis(e, a) and d in e.dims(x), "|a| == 1")
    return all_gather(shard(x, d, a), a, d), x
