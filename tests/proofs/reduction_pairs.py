"""Term pairs for the reduction adversary (test_reduction_adversary.py), over the whole op set.

A *world* fixes real sizes: ``B`` (sharded over ``dp = 2``), ``H``, two sequence dims ``S`` and
``T`` (``T2`` a renaming of ``S``), a vocabulary ``V`` with a smaller ``V2``, a capacity ``C``, and
RoPE half dims ``R1`` and ``R2`` (``R2`` = 2 ``R1``). :func:`random_term` draws terms over
``B, H`` from every op kind; :data:`FAMILIES` build pairs that agree at small sizes and (mostly)
differ at the real ones (issue 10, family 1), and :func:`equal_variant` rewrites a term into an
equal one through layouts and collectives.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from hypothesis import strategies as st

from spec_lang.term import Binding, DimSpec, Op, Term, term

from terms import add, all_gather, all_reduce, const, einsum, inp, mul, part, shard, unary


@dataclass(frozen=True)
class World:
    sizes: dict[str, int]

    @property
    def binding(self) -> Binding:
        return Binding({**self.sizes, "dp": 2})


@st.composite
def worlds(draw) -> World:
    s = draw(st.integers(2, 5))
    v = draw(st.integers(3, 7))
    r1 = draw(st.integers(1, 3))
    return World({"B": 2 * draw(st.integers(1, 4)), "H": 2 * draw(st.integers(1, 3)), "S": s,
                  "T": draw(st.integers(2, 5)), "T2": s, "V": v,
                  "V2": draw(st.integers(1, v - 1)), "C": draw(st.integers(1, s)),
                  "R1": r1, "R2": 2 * r1})


X, Y = inp("x", "B", "H"), inp("y", "B", "H")
U, P = inp("u", "H"), inp("p", "H", domain="positive")
VB = inp("v", "B")
MB = inp("m", "B", kind="data", domain="mask")
LAB = term(Op.INPUT, (), ("lab", "data", "index", "V"), (DimSpec("B"),))
LEAVES = (X, Y, U, P, VB, MB)


def dim_size(d: str) -> Term:
    return term(Op.DIM_SIZE, (), (d,), ())


def rmax(x: Term, d: str) -> Term:
    return term(Op.REDUCE_MAX, (x,), ((d,),), tuple(s for s in x.dims if s.name != d))


def maximum(a: Term, b: Term) -> Term:
    u = {s.name: s for s in a.dims + b.dims}
    return term(Op.MAXIMUM, (a, b), (), tuple(u.values()))


def total(x: Term, d: str) -> Term:
    return einsum(tuple(s.name for s in x.dims if s.name != d), x)


def causal(q: str, k: str) -> Term:
    return term(Op.CAUSAL_MASK, (), (q, k), (DimSpec(q), DimSpec(k)))


def one_hot(idx: Term, d: str) -> Term:
    return term(Op.ONE_HOT, (idx,), (d,), idx.dims + (DimSpec(d),))


def neg(x: Term) -> Term:
    return unary(Op.NEG, x)


def sub(a: Term, b: Term) -> Term:
    return add(a, neg(b))


def power(x: Term, k: int) -> Term:
    return unary(Op.POW, x, Fraction(k))


UNARY = (Op.NEG, Op.EXP, Op.SILU, Op.TANH, Op.SIGMOID, Op.CAST, Op.STOP_GRAD)


@st.composite
def random_term(draw, depth: int = 3) -> Term:
    """A term over dims from {B, H}: every elementwise op, sums, means, maxima, sizes, layouts."""
    if depth == 0 or draw(st.integers(0, 4)) == 0:
        k = draw(st.integers(0, len(LEAVES) + 2))
        if k < len(LEAVES):
            return LEAVES[k]
        if k == len(LEAVES):
            return const(draw(st.sampled_from([Fraction(1, 2), 2, -1, 3])))
        return dim_size(draw(st.sampled_from(["B", "H"])))
    a = draw(random_term(depth - 1))
    kind = draw(st.integers(0, 16))
    names = [s.name for s in a.dims]
    if kind == 0:
        op = draw(st.sampled_from(UNARY))
        return unary(op, a, "float32") if op is Op.CAST else unary(op, a)
    if kind == 1:
        return power(a, draw(st.integers(2, 3)))
    if kind == 2:
        return unary(Op.RECIP, add(unary(Op.EXP, a), const(1)))
    if kind in (3, 4):
        return add(a, draw(random_term(depth - 1)))
    if kind in (5, 6):
        return mul(a, draw(random_term(depth - 1)))
    if kind == 7:
        return maximum(a, draw(random_term(depth - 1)))
    if kind == 8 and names:
        d = draw(st.sampled_from(names))
        how = draw(st.integers(0, 2))
        if how == 0:
            return total(a, d)
        if how == 1:
            return rmax(a, d)
        return mul(total(a, d), unary(Op.RECIP, dim_size(d)))      # a mean
    if kind == 9 and "B" in names:      # a layout round trip over dp (equal at every size)
        return all_gather(shard(a, "B", "dp"), "dp", "B")
    if kind == 10:
        return all_reduce(part(a, "dp"), "dp")
    if kind == 11:        # position- and size-dependent scalars
        return mul(a, draw(st.sampled_from(SIZE_SCALARS)))
    if kind == 12:        # a label filter / a one-hot lookup over B
        return mul(a, einsum(("B",), one_hot(LAB, draw(st.sampled_from(["V", "V2"])))))
    if kind == 13 and "H" in names:
        sel = term(Op.TOPK_MASK, (a,), ("H", 1), a.dims)
        return mul(a, term(Op.STOP_GRAD, (sel,), (), a.dims))
    if kind == 14 and "B" in names:
        return term(Op.SHIFT, (a,), ("B",), a.dims)
    if kind == 15 and "H" in names:   # swap the two halves of H (a block permutation)
        h = [term(Op.CHUNK, (a,), ("H", 2, i), tuple(DimSpec("H", ("#%d/2" % i,))
                                                     if s.name == "H" else s for s in a.dims))
             for i in (1, 0)]
        blocks = [term(Op.RENAME, (h[j],), ("H", "H"),
                       tuple(DimSpec("H", ("#%d/2" % j,)) if s.name == "H" else s
                             for s in a.dims)) for j in (0, 1)]
        return term(Op.CONCAT, tuple(blocks), ("H",), a.dims)
    if kind == 16 and "B" in names:   # reduce-scatter of a partial sum, gathered back
        rs = term(Op.REDUCE_SCATTER, (part(a, "dp"),), ("dp", "B"),
                  tuple(DimSpec("B", ("dp",)) if s.name == "B" else s for s in a.dims))
        return all_gather(rs, "dp", "B")
    return a


def _rope_scalar() -> Term:
    t = term(Op.ROPE_SIN, (), ("S", "R1", Fraction(100)), (DimSpec("S"), DimSpec("R1")))
    return einsum((), t)


SIZE_SCALARS = (einsum((), term(Op.CAUSAL_MASK, (), ("S", "T2"), (DimSpec("S"), DimSpec("T2")))),
                term(Op.DIM_SIZE, (), ("S",), ()), _rope_scalar())


def equal_variant(t: Term) -> Term:
    """An equal term: sums over B split across dp ranks, values routed through PART."""
    names = [s.name for s in t.dims]
    if "B" in names:
        return all_gather(shard(t, "B", "dp"), "dp", "B")
    return all_reduce(part(t, "dp"), "dp")


def _local_block_sum_max_min() -> tuple[Term, Term]:
    loc = shard(VB, "B", "dp")      # a rank's block of B
    smm = sub(sub(total(loc, "B"), rmax(loc, "B")), neg(rmax(neg(loc), "B")))
    return all_reduce(smm, "dp"), const(0)


def _e3() -> tuple[Term, Term]:
    p1, p2, p3 = total(U, "H"), total(power(U, 2), "H"), total(power(U, 3), "H")
    return add(power(p1, 3), mul(const(-3), p1, p2), mul(const(2), p3)), const(0)


def _count_ratio() -> tuple[Term, Term]:
    cs = einsum((), causal("S", "T2"))
    ct = einsum((), causal("T", "T3"))
    return mul(total(VB, "B"), cs, unary(Op.RECIP, ct)), total(VB, "B")


def _label_filter() -> tuple[Term, Term]:
    keep = einsum(("B",), one_hot(LAB, "V2"))          # 1 where lab < |V2|
    return total(mul(VB, keep), "B"), total(VB, "B")


def _rope() -> tuple[Term, Term]:
    spec = term(Op.ROPE_COS, (), ("S", "R1", Fraction(10000)), (DimSpec("S"), DimSpec("R1")))
    full = term(Op.ROPE_COS, (), ("S", "R2", Fraction(10000)), (DimSpec("S"), DimSpec("R2")))
    half = term(Op.CHUNK, (full,), ("R2", 2, 0), (DimSpec("S"), DimSpec("R2", ("#0/2",))))
    plan = term(Op.RENAME, (half,), ("R2", "R1"), (DimSpec("S"), DimSpec("R1")))
    return spec, plan


def _capacity() -> tuple[Term, Term]:
    # token s's slot = number of earlier tokens (a causal count); kept when the slot is < |C|
    xs = inp("xs", "S")
    slot = einsum(("S",), causal("S", "T2"))
    kept = einsum(("S",), one_hot(add(slot, const(-1)), "C"))
    return total(mul(xs, kept), "S"), total(xs, "S")


def _product_of_sums() -> tuple[Term, Term]:
    return mul(total(X, "H"), total(Y, "H")), total(mul(X, Y), "H")


def _own_times_sum() -> tuple[Term, Term]:
    return mul(U, total(U, "H")), power(U, 2)


def _max_after_sum() -> tuple[Term, Term]:
    # max(p1^2 - p2, 0) = max(2 sum_{i<j} u_i u_j, 0): 0 at one element, not at two
    p1, p2 = total(U, "H"), total(power(U, 2), "H")
    return maximum(sub(power(p1, 2), p2), const(0)), const(0)


def _count_literal(w: World) -> tuple[Term, Term]:
    # sum_H (u + 1) against sum_H u + |H| written for a reduced |H| (a count)
    return total(add(U, const(1)), "H"), add(total(U, "H"), const(max(1, w.sizes["H"] - 1)))


def _size_literal(w: World) -> tuple[Term, Term]:
    return mul(total(VB, "B"), unary(Op.RECIP, dim_size("B"))), \
        mul(total(VB, "B"), const(Fraction(1, w.sizes["B"] // 2)))


def _topk() -> tuple[Term, Term]:
    s = inp("sc", "H")
    mk = lambda k: term(Op.TOPK_MASK, (s,), ("H", k), s.dims)  # noqa: E731
    return total(mul(s, mk(1)), "H"), total(mul(s, mk(2)), "H")


FAMILIES = {
    "sum-max-min over a local block": lambda w: _local_block_sum_max_min(),
    "e3 power-sum identity": lambda w: _e3(),
    "causal count ratio over two dims": lambda w: _count_ratio(),
    "one_hot below a smaller dim": lambda w: _label_filter(),
    "rope over dims of different sizes": lambda w: _rope(),
    "capacity-style token dropping": lambda w: _capacity(),
    "product of sums": lambda w: _product_of_sums(),
    "own offset times its sum": lambda w: _own_times_sum(),
    "max after a sum": lambda w: _max_after_sum(),
    "count written as a literal": _count_literal,
    "size written as a literal": _size_literal,
    "top-k with k against k+1": lambda w: _topk(),
}


def world_sizes(w: World) -> dict[str, int]:
    """The world's sizes plus the renamed dims the families use, and the mesh (dp = 2)."""
    return {**w.sizes, "T3": w.sizes["T"], "dp": 2}
