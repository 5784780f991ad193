"""Typed constructors for terms, exact constants and the structural key.

Every node the rewriter builds goes through these functions, so its dims follow one set of
shape rules (the ones ``proofs/kernel.py`` ``typecheck`` re-checks):

* elementwise ops: the union of the operands' dims (operands sharing a name agree on shards),
* ``EINSUM(out_dims)``: the operands' specs of the names in ``out_dims``,
* ``SHARD``/``REDUCE_SCATTER`` append the axis to the dim's shards, ``ALL_GATHER`` removes it,
* ``CHUNK`` appends the pseudo-shard ``"#i/parts"``, ``RENAME`` renames,
* ``ONE_HOT``/``CONCAT`` take the spec of their output dim as an argument.

**Canonical dims order.** Built nodes list their dims sorted by name and ``EINSUM.out_dims``
is sorted (storage order carries no meaning, ``docs/verifier-internals.md`` section 1), so two
equal expressions built in different orders are the same hash-consed node.

**Constants** are exact: a rational is always a :class:`fractions.Fraction` (never an ``int``
or a sympy ``Rational``), anything else is a sympy radical sum (``sqrt(2)/16``) that a
certificate can state (:mod:`spec_lang.exact_numbers`); a fold whose result is not one (``1/(1 +
sqrt(2))``, ``sqrt(1 + sqrt(2))``) does not fire.

**Structural key** (:func:`skey`): a 128-bit digest computed bottom-up from op, attrs, dims and
the children's keys. It orders the operands of ``ADD``/``MUL``/``EINSUM`` deterministically
across runs (uids differ between runs).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from fractions import Fraction
from typing import Any

import sympy

from spec_lang.exact_numbers import NotCertifiable, certificate_form
from spec_lang.exact_numbers import certifiable as _certifiable
from spec_lang.term import ELEMENTWISE, DimSpec, Op, Term, TermError, term, varying_axes

__all__ = [
    "Num", "num", "is_rational", "num_mul", "num_add", "num_pow", "pow_is_real", "certifiable",
    "dimspec", "sort_dims", "union_dims", "elementwise", "einsum", "const", "inp",
    "add", "mul", "neg", "recip", "pow_", "unary", "shard", "part", "all_reduce", "all_gather",
    "reduce_scatter", "broadcast", "reduce_max", "rename", "chunk", "concat", "one_hot",
    "topk_mask", "all_to_all",
    "permute", "shift",
    "dims_map", "skey", "encode_attr", "axis_rank", "varying",
]

Num = Any  # Fraction | sympy.Expr (a number)


# -- exact numbers --------------------------------------------------------------------------
def num(v: Any) -> Num:
    """Canonical exact number: Fraction for rationals, a sympy number otherwise.

    Raises:
        TermError: a float or a non-number.
    """
    if isinstance(v, bool):
        raise TermError(f"boolean constant {v!r}")
    if isinstance(v, Fraction):
        return v
    if isinstance(v, int):
        return Fraction(v)
    if isinstance(v, float):
        raise TermError(f"float constant {v!r}: use an exact Fraction or sympy number")
    if isinstance(v, sympy.Basic):
        if not v.is_number:
            raise TermError(f"constant {v!r} is not a number")
        if v.is_Rational:
            return Fraction(int(v.p), int(v.q))
        return v
    raise TermError(f"constant {v!r} of type {type(v).__name__} is not exact")


def is_rational(v: Num) -> bool:
    return isinstance(v, Fraction)


def _sym(v: Num) -> sympy.Expr:
    return sympy.Rational(v.numerator, v.denominator) if isinstance(v, Fraction) else v


def num_mul(a: Num, b: Num) -> Num:
    if isinstance(a, Fraction) and isinstance(b, Fraction):
        return a * b
    return num(sympy.expand(_sym(a) * _sym(b)))


def num_add(a: Num, b: Num) -> Num:
    if isinstance(a, Fraction) and isinstance(b, Fraction):
        return a + b
    return num(sympy.expand(_sym(a) + _sym(b)))


def pow_is_real(c: Num, e: Fraction) -> bool:
    """``c ** e`` is a defined real number (c > 0, or e an integer and c != 0 unless e > 0,
    or e with an odd denominator and c != 0 unless e > 0)."""
    if e.denominator == 1 or e.denominator % 2 == 1:
        return c != 0 or e > 0
    return bool(_sym(c) > 0) if not isinstance(c, Fraction) else c > 0


def certifiable(v: Num) -> bool:
    """Whether a certificate can state the number ``v`` (a fold whose result it cannot state
    does not fire; :mod:`spec_lang.exact_numbers`)."""
    return _certifiable(v)


def num_pow(c: Num, e: Fraction) -> Num:
    """Exact ``c ** e`` (real root for odd denominators); the caller checks :func:`pow_is_real`."""
    if isinstance(c, Fraction) and e.denominator == 1:
        return c ** int(e)
    base = _sym(c)
    if e.denominator % 2 == 1 and base.is_negative:  # real odd root: (-1)^p |c|^(p/q)
        r = (-base) ** sympy.Rational(e.numerator, e.denominator)
        return num(sympy.expand(-r if e.numerator % 2 else r))
    return num(sympy.expand(base ** sympy.Rational(e.numerator, e.denominator)))


# -- dims -----------------------------------------------------------------------------------
def dimspec(d: DimSpec | str | tuple) -> DimSpec:
    """``"B"``, ``("F", ("tp",))`` or a DimSpec."""
    if isinstance(d, DimSpec):
        return d
    if isinstance(d, str):
        return DimSpec(d)
    name, shards = d
    return DimSpec(name, tuple(str(s) for s in shards))


def sort_dims(dims: Iterable[DimSpec]) -> tuple[DimSpec, ...]:
    return tuple(sorted(dims, key=lambda d: d.name))


def union_dims(args: Sequence[Term]) -> dict[str, DimSpec]:
    """Union of the operands' dims by name.

    Raises:
        TermError: two operands disagree on the shards of a dim.
    """
    out: dict[str, DimSpec] = {}
    for a in args:
        for d in a.dims:
            prev = out.setdefault(d.name, d)
            if prev != d:
                raise TermError(f"operands disagree on dim {d.name}: {prev} vs {d}")
    return out


def dims_map(t: Term) -> dict[str, DimSpec]:
    return {d.name: d for d in t.dims}


# -- constructors ---------------------------------------------------------------------------
def elementwise(op: Op, args: Sequence[Term], attrs: Sequence[Any] = ()) -> Term:
    """An elementwise node with canonical (sorted) dims."""
    if op not in ELEMENTWISE:
        raise TermError(f"{op.name} is not elementwise")
    return term(op, tuple(args), tuple(attrs), sort_dims(union_dims(args).values()))


def einsum(args: Sequence[Term], out: Iterable[str]) -> Term:
    """EINSUM with sorted ``out_dims`` (every other dim is contracted)."""
    u = union_dims(args)
    out_t = tuple(sorted(set(out)))
    for n in out_t:
        if n not in u:
            raise TermError(f"einsum output dim {n} is in no operand")
    return term(Op.EINSUM, tuple(args), (out_t,), tuple(u[n] for n in out_t))


def const(v: Any) -> Term:
    return term(Op.CONST, (), (num(v),), ())


def inp(name: str, dims: Iterable[DimSpec | str | tuple], kind: str = "param",
        domain: str = "real", index_dim: str | None = None) -> Term:
    attrs: tuple = (name, kind, domain) if index_dim is None else (name, kind, domain, index_dim)
    return term(Op.INPUT, (), attrs, tuple(dimspec(d) for d in dims))


def add(*xs: Term) -> Term:
    return elementwise(Op.ADD, xs)


def mul(*xs: Term) -> Term:
    return elementwise(Op.MUL, xs)


def neg(x: Term) -> Term:
    return elementwise(Op.NEG, (x,))


def recip(x: Term) -> Term:
    return elementwise(Op.RECIP, (x,))


def pow_(x: Term, e: Any) -> Term:
    return elementwise(Op.POW, (x,), (num(e),))


def unary(op: Op, x: Term) -> Term:
    return elementwise(op, (x,))


def shard(x: Term, d: str, a: str) -> Term:
    m = dims_map(x)
    if d not in m:
        raise TermError(f"SHARD over {a}: {x!r} has no dim {d}")
    m[d] = DimSpec(d, m[d].shards + (str(a),))
    return term(Op.SHARD, (x,), (d, str(a)), sort_dims(m.values()))


def part(x: Term, a: str) -> Term:
    return term(Op.PART, (x,), (str(a),), sort_dims(x.dims))


def all_reduce(x: Term, a: str, reduce: str = "sum") -> Term:
    return term(Op.ALL_REDUCE, (x,), (str(a), reduce), sort_dims(x.dims))


def broadcast(x: Term, a: str, src: int = 0) -> Term:
    return term(Op.BROADCAST, (x,), (str(a), src), sort_dims(x.dims))


def all_gather(x: Term, a: str, d: str) -> Term:
    m = dims_map(x)
    if d not in m or not m[d].shards or m[d].shards[-1] != a:
        raise TermError(f"ALL_GATHER over {a} of {x!r}: dim {d} is not sharded last over {a}")
    m[d] = DimSpec(d, m[d].shards[:-1])
    return term(Op.ALL_GATHER, (x,), (str(a), d), sort_dims(m.values()))


def reduce_scatter(x: Term, a: str, d: str) -> Term:
    m = dims_map(x)
    m[d] = DimSpec(d, m[d].shards + (str(a),))
    return term(Op.REDUCE_SCATTER, (x,), (str(a), d), sort_dims(m.values()))


def reduce_max(x: Term, dims: Iterable[str]) -> Term:
    ds = tuple(sorted(set(dims)))
    return term(Op.REDUCE_MAX, (x,), (ds,), sort_dims(d for d in x.dims if d.name not in ds))


def rename(x: Term, old: str, new: str, new_shards: Sequence[str] | None = None) -> Term:
    """RENAME old -> new; ``new``'s spec defaults to ``old``'s (the DSL may give another spec
    of the same local size, e.g. a chunk ``HD[#0/2]`` renamed to a dim ``HD_half``)."""
    m = [DimSpec(new, d.shards if new_shards is None else tuple(new_shards)) if d.name == old
         else d for d in x.dims]
    return term(Op.RENAME, (x,), (old, new), sort_dims(m))


def chunk(x: Term, d: str, parts: int, index: int) -> Term:
    m = dims_map(x)
    m[d] = DimSpec(d, m[d].shards + (f"#{index}/{parts}",))
    return term(Op.CHUNK, (x,), (d, parts, index), sort_dims(m.values()))


def concat(xs: Sequence[Term], d: str, out_spec: DimSpec | None = None) -> Term:
    """CONCAT along ``d``; the output spec of ``d`` defaults to the operands' spec with a
    trailing ``#i/n`` pseudo-shard removed (the inverse of ``CHUNK``)."""
    u = {n: s for n, s in dims_map(xs[0]).items()}
    if out_spec is None:
        sh = u[d].shards
        out_spec = DimSpec(d, sh[:-1] if sh and sh[-1].startswith("#") else sh)
    u[d] = out_spec
    return term(Op.CONCAT, tuple(xs), (d,), sort_dims(u.values()))


def permute(x: Term, d: str, order: Sequence[int]) -> Term:
    """PERMUTE along ``d``: block ``j`` of the output is block ``order[j]`` of ``x``."""
    return term(Op.PERMUTE, (x,), (d, tuple(int(j) for j in order)), sort_dims(x.dims))


def shift(x: Term, d: str) -> Term:
    """SHIFT along ``d``: ``y[i] = x[i+1]``, ``y[n-1] = 0``."""
    return term(Op.SHIFT, (x,), (d,), sort_dims(x.dims))


def one_hot(idx: Term, d: str, shards: Sequence[str] = ()) -> Term:
    dims = list(idx.dims) + [DimSpec(d, tuple(str(s) for s in shards))]
    return term(Op.ONE_HOT, (idx,), (d,), sort_dims(dims))


def topk_mask(x: Term, d: str, k: int, eligible: Term | None = None) -> Term:
    args = (x,) if eligible is None else (x, eligible)
    return term(Op.TOPK_MASK, args, (d, int(k)), sort_dims(x.dims))


def all_to_all(x: Term, a: str, split: str, concat: str) -> Term:
    m = dims_map(x)
    if concat not in m or split not in m or split == concat or not m[concat].shards \
            or m[concat].shards[-1] != a:
        raise TermError(f"ALL_TO_ALL over {a} of {x!r}: dim {concat} is not sharded last over {a}")
    m[concat] = DimSpec(concat, m[concat].shards[:-1])
    m[split] = DimSpec(split, m[split].shards + (str(a),))
    return term(Op.ALL_TO_ALL, (x,), (str(a), split, concat), sort_dims(m.values()))


# -- attribute encoding and the structural key ----------------------------------------------
def encode_attr(x: Any) -> Any:
    """JSON form of an attribute, the same as ``proofs/kernel.py``'s ``encode_attr``:
    Fraction -> ``{"q": "p/q"}``, a non-rational exact number -> ``{"alg": [...]}``
    (:func:`spec_lang.exact_numbers.certificate_form`), tuple -> list.

    Raises:
        TermError: ``x`` has no encoding."""
    if x is None or isinstance(x, bool):
        return x
    if isinstance(x, str):
        return str(x)
    if isinstance(x, int):
        return int(x)
    if isinstance(x, (tuple, list)):
        return [encode_attr(y) for y in x]
    if isinstance(x, frozenset):
        return {"set": sorted(repr(encode_attr(y)) for y in x)}
    if isinstance(x, Fraction | sympy.Basic):
        try:
            return certificate_form(x)
        except NotCertifiable as e:
            raise TermError(f"attribute {x!r}: {e}") from None
    raise TermError(f"attribute {x!r} of type {type(x).__name__} has no encoding")


_KEYS: dict[Term, bytes] = {}
_KEY_PREFIX: dict[tuple, bytes] = {}  # (op, attrs, dims) -> encoded prefix (shared by many nodes)


def _missing(t: Term, done) -> list[Term]:
    """Nodes below ``t`` (children first) for which ``done(n)`` is false, descending only into
    such nodes: O(new nodes), not O(subtree) (a full ``walk`` per new node is quadratic)."""
    order: list[Term] = []
    seen: set[int] = set()
    stack: list[tuple[Term, bool]] = [(t, False)]
    while stack:
        n, post = stack.pop()
        if post:
            order.append(n)
            continue
        if id(n) in seen or done(n):
            continue
        seen.add(id(n))
        stack.append((n, True))
        for c in reversed(n.args):
            if id(c) not in seen and not done(c):
                stack.append((c, False))
    return order


def varying(t: Term) -> frozenset[str]:
    """The mesh axes ``t`` varies over: ``spec_lang.term.varying_axes``, the one definition
    (it walks only the nodes not yet cached, so new nodes over large normal forms are cheap)."""
    return varying_axes(t)


def skey(t: Term) -> bytes:
    """Structural key of ``t`` (memoised; children first, no recursion)."""
    k = _KEYS.get(t)
    if k is not None:
        return k
    for n in _missing(t, lambda m: m in _KEYS):
        pk = (n.op, n.attrs, n.dims)
        prefix = _KEY_PREFIX.get(pk)
        if prefix is None:
            prefix = _KEY_PREFIX[pk] = (
                n.op.name + repr(encode_attr(n.attrs))
                + repr([(d.name, tuple(str(s) for s in d.shards)) for d in n.dims])).encode()
        h = hashlib.blake2b(prefix, digest_size=16)
        for c in n.args:
            h.update(_KEYS[c])
        _KEYS[n] = h.digest()
    return _KEYS[t]


# ep above mb: under micro-batches an expert-parallel plan types its tokens B[dp, mb, ep] (the
# dispatch all-to-all over ep concatenates the innermost shard), so the canonical nesting
# reduces ep first (spec_lang/plans/deepseek.py). The order only orients the swap rules.
_AXIS_ORDER = ("dp", "dp_replicate", "dp_shard", "tp", "pp", "cp", "sp", "mb", "ep")


def axis_rank(a: str) -> tuple[int, str]:
    """Total order on mesh axes used by canonical forms: ``dp < dp_replicate < dp_shard < tp <
    pp < cp < sp < mb < ep``, then any other axis by name. Outer SHARDs and inner ALL_REDUCEs
    have the higher rank."""
    a = str(a)
    return (_AXIS_ORDER.index(a), "") if a in _AXIS_ORDER else (len(_AXIS_ORDER), a)

