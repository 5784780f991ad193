"""Equivalent spellings of random terms: the normaliser's completeness, measured (issue 12).

A user writes the same value in different but natural ways: a sum of a product or an
``einsum``, operands and dims in another order, a constant distributed or factored, ``x / n`` or
``x * (1/n)``, a shard over a mesh axis of size 1, a sum over a dim of size 1, a reduction over
shards done in either order, the library's layers written by hand. Each *family* below draws a
random instance of one such freedom and returns the two spellings as terms (built with the DSL's
own ops, as a user would), together with the gradients of ``sum(value * w)`` (``w`` a random
cotangent) with respect to every input: a spelling that normalises in the forward pass but not
in the backward pass is still a miss (the GPT-2 target logit of issue 12 was one).

:func:`classify` says how a pair is proved by rewriting alone (no z3): ``"normal"`` (equal normal
forms), ``"cas"`` (normal forms that differ only in exact rational identities of their smallest
differing subterms, the prover's certified ``cas`` step) or ``"miss"``. ``bench/completeness.py``
prints the rate per family; ``tests/rewriting/test_completeness.py`` asserts it (hypothesis,
derandomised) and that both spellings agree numerically. ``docs/rules.md`` section 7 lists the
families, the rules added for the misses and the documented limitations.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction

from spec_lang import ops
from spec_lang.autodiff import grad
from spec_lang.errors import SpecLangError
from spec_lang.tensor import Tensor
from spec_lang.term import Binding, Op, Term

from rewriting import build as b
from rewriting.rule import Draw

__all__ = ["Pair", "FAMILIES", "draw_pair", "classify", "BINDING", "UNIT_BINDING"]

BINDING = Binding({"B": 4, "S": 4, "H": 6, "F": 4, "G": 1, "V": 8, "dp": 2, "tp": 2, "mb": 2})
"""Sizes of the families (``G`` is a dim of size 1: the size-1 family)."""
UNIT_BINDING = Binding({"B": 4, "S": 4, "H": 6, "F": 4, "G": 1, "V": 8, "dp": 1, "tp": 2,
                        "mb": 1})
"""Sizes with mesh axes ``dp`` and ``mb`` of size 1 (the size-1 axis family)."""

_DIMS = ("B", "S", "H", "F")
_COUNT = [0]


@dataclass(frozen=True)
class Pair:
    """Two spellings of one value: ``a`` and ``b`` (same dims), with the binding they live in.
    ``grads`` holds the pairs of gradients ``(d sum(a w)/d x, d sum(b w)/d x)`` for every
    input ``x``."""

    family: str
    what: str
    a: Term
    b: Term
    binding: Binding
    grads: tuple[tuple[Term, Term], ...] = ()


def _leaf(dims: Sequence[str], domain: str = "real", kind: str = "param") -> Tensor:
    _COUNT[0] += 1
    return Tensor(b.inp(f"s{_COUNT[0]}", list(dims), kind, domain))


def _dims(draw: Draw, lo: int = 1, hi: int = 2, pool: Sequence[str] = _DIMS) -> list[str]:
    k = draw.int(lo, min(hi, len(pool)))
    out: list[str] = []
    while len(out) < k:
        d = draw.choice(list(pool))
        if d not in out:
            out.append(d)
    return out


def _perm(draw: Draw, xs: Sequence) -> list:
    xs = list(xs)
    out = []
    while xs:
        out.append(xs.pop(draw.int(0, len(xs) - 1)))
    return out


def _product(xs: Sequence[Tensor]) -> Tensor:
    out = xs[0]
    for x in xs[1:]:
        out = out * x
    return out


def _einsum(*xs: Tensor, out: Sequence[str]) -> Tensor:
    """``ops.einsum`` opting in to every dim summed out of one operand alone (``sum_single``,
    docs/dsl.md): the families draw arbitrary contractions on purpose."""
    single = [d for d in sorted({d for x in xs for d in x.dims})
              if d not in out and sum(d in x.dims for x in xs) == 1]
    return ops.einsum(*xs, out=out, sum_single=single if len(xs) > 1 else ())


# -- the families ---------------------------------------------------------------------------------

def _contraction(draw: Draw) -> tuple[str, Tensor, Tensor]:
    """``einsum(xs, out)`` vs a sum of the product, permuted operands / out dims, transposed
    operands, or a two-step contraction order."""
    xs = [_leaf(_dims(draw, 1, 3)) for _ in range(draw.int(2, 3))]
    union = sorted({d for x in xs for d in x.dims})
    out = [d for d in union if draw.bool()]
    a = _einsum(*xs, out=out)
    k = draw.int(0, 3)
    if k == 0:
        summed = [d for d in union if d not in out]
        p = _product(_perm(draw, xs))
        return "sum of the product", a, ops.sum(p, summed) if summed else p
    if k == 1:
        return "permuted operands and out dims", a, _einsum(*_perm(draw, xs),
                                                            out=_perm(draw, out))
    if k == 2:
        ts = [ops.transpose(x, *_perm(draw, x.dims)) for x in xs]
        return "transposed operands", a, _einsum(*ts, out=out)
    if len(xs) == 2:
        xs.append(_leaf(_dims(draw, 1, 2)))
        union = sorted({d for x in xs for d in x.dims})
        out = [d for d in union if d in out or draw.bool()]
        a = _einsum(*xs, out=out)
    i, j, k3 = _perm(draw, range(3))
    keep = [d for d in sorted(set(xs[i].dims) | set(xs[j].dims))
            if d in out or d in xs[k3].dims]
    inner = _einsum(xs[i], xs[j], out=keep)
    return "contraction order", a, _einsum(inner, xs[k3], out=out)


def _scalars(draw: Draw) -> tuple[str, Tensor, Tensor]:
    """A scalar distributed over a sum or factored out of it; constants re-associated."""
    dims = _dims(draw, 1, 2)
    x, y = _leaf(dims), _leaf(dims if draw.bool() else dims[:1])
    k = draw.int(0, 3)
    c = {0: ops.const(Fraction(draw.int(1, 7), draw.int(1, 3))),
         1: ops.dim_size(draw.choice(_DIMS)),
         2: _leaf([]), 3: ops.recip(_leaf([], "positive"))}[k]
    form = draw.int(0, 2)
    if form == 0:
        return "c (x + y) vs c x + c y", c * (x + y), c * x + c * y
    if form == 1:
        return "c (x - y) vs c x - c y", c * (x - y), c * x - y * c
    c2 = ops.const(Fraction(draw.int(1, 5), draw.int(1, 4)))
    return "(c1 c2) x vs c1 (c2 x)", (c * c2) * x, c * (c2 * x)


def _division(draw: Draw) -> tuple[str, Tensor, Tensor]:
    """``x / n`` vs ``x * (1/n)``, ``x * n**-1``, ``x * recip(n)``; ``x / (a b)`` vs ``x / a / b``."""
    dims = _dims(draw, 1, 2)
    x = _leaf(dims)
    k = draw.int(0, 3)
    n = {0: ops.const(draw.int(2, 9)), 1: ops.dim_size(draw.choice(_DIMS)),
         2: _leaf(dims[:1], "positive"), 3: _leaf([], "positive")}[k]
    form = draw.int(0, 3)
    if form == 0:
        return "x / n vs x * (1 / n)", x / n, x * (1 / n if k == 0 else ops.recip(n))
    if form == 1:
        return "x / n vs x * n**-1", x / n, x * ops.pow(n, -1)
    if form == 2:
        return "x / n vs recip(n) * x", x / n, ops.recip(n) * x
    m = _leaf(dims[:1], "positive")
    return "x / (n m) vs x / n / m", x / (n * m), (x / m) / n


def _unit_axis(draw: Draw) -> tuple[str, Tensor, Tensor]:
    """(``UNIT_BINDING``: ``dp`` and ``mb`` of size 1) a shard over a size-1 axis is the whole
    tensor: a plan that sums or maxes over a ``B[dp]`` shard without an all-reduce, or all-reduces
    a value that varies over the size-1 axis."""
    dims = ["B"] + _dims(draw, 0, 1, ("S", "H"))
    x, y = _leaf(dims), _leaf(dims)
    axis = draw.choice(["dp", "mb"])
    xs, ys = (Tensor(b.shard(t.term, "B", axis)) for t in (x, y))
    k = draw.int(0, 3)
    rest = [d for d in dims if d != "B"]
    if k == 0:
        return "sum over a size-1-axis shard", _einsum(x, y, out=rest), \
            _einsum(xs, ys, out=rest)
    if k == 1:
        return "max over a size-1-axis shard", ops.max(x, "B"), ops.max(xs, "B")
    if k == 2:
        v = Tensor(b.all_reduce(ops.sum(xs * ys).term, axis))
        return "all-reduce over a size-1 axis", ops.sum(x * y), v
    p = Tensor(b.part(x.term, axis))
    return "Partial over a size-1 axis used as the whole", x, p


def _unit_dim(draw: Draw) -> tuple[str, Tensor, Tensor]:
    """(``G`` has size 1) a sum over a size-1 dim: ``sum_G(x y)`` vs ``sum_G(x) sum_G(y)``,
    ``max_G`` vs ``sum_G``."""
    dims = ["G"] + _dims(draw, 1, 2)
    x, y = _leaf(dims), _leaf(dims)
    rest = [d for d in dims if d != "G"]
    k = draw.int(0, 2)
    if k == 0:
        return "sum_G(x y) vs sum_G(x) sum_G(y)", ops.sum(x * y, "G"), \
            ops.sum(x, "G") * ops.sum(y, "G")
    if k == 1:
        return "max_G(x) vs sum_G(x)", ops.max(x, "G"), ops.sum(x, "G")
    w = _leaf(rest)
    return "einsum over G vs product of squeezes", _einsum(x, y, w, out=rest), \
        ops.sum(x, "G") * ops.sum(y, "G") * w


def _split_reduction(draw: Draw) -> tuple[str, Tensor, Tensor]:
    """A reduction over a dim split over two axes, in either order, or by gathering first; a
    sum split into two chunks."""
    dims = ["B"] + _dims(draw, 0, 1, ("S", "H"))
    rest = [d for d in dims if d != "B"]
    x = _leaf(dims)
    xs = b.shard(b.shard(x.term, "B", "dp"), "B", "mb")
    k = draw.int(0, 3)
    if k == 0:
        loc = ops.sum(Tensor(xs), "B").term
        return "sum: all-reduce mb then dp vs dp then mb", \
            Tensor(b.all_reduce(b.all_reduce(loc, "mb"), "dp")), \
            Tensor(b.all_reduce(b.all_reduce(loc, "dp"), "mb"))
    if k == 1:
        loc = ops.sum(Tensor(xs), "B").term
        full = b.all_gather(b.all_gather(xs, "mb", "B"), "dp", "B")
        return "sum: local then all-reduce vs gather then sum", \
            Tensor(b.all_reduce(b.all_reduce(loc, "mb"), "dp")), ops.sum(Tensor(full), "B")
    if k == 2:
        loc = ops.max(Tensor(xs), "B").term
        return "max: all-reduce mb then dp vs the spec's max", \
            Tensor(b.all_reduce(b.all_reduce(loc, "mb", "max"), "dp", "max")), ops.max(x, "B")
    c0, c1 = ops.chunk(x, "B", 2, 0), ops.chunk(x, "B", 2, 1)
    return "sum of two chunks vs the sum", ops.sum(x, "B"), ops.sum(c0, "B") + ops.sum(c1, "B")


def _library(draw: Draw) -> tuple[str, Tensor, Tensor]:
    """The library's layers vs the same math written by hand."""
    k = draw.int(0, 11)
    x = _leaf(["B", "V"])
    if k == 10:
        return "silu by hand", ops.silu(x), x * ops.sigmoid(x)
    if k == 11:
        y = Tensor(b.inp(f"lab{_COUNT[0]}", ["B"], "data", "index", "V"))
        _COUNT[0] += 1
        m = ops.stop_gradient(ops.max(x, "V"))
        by_hand = ops.log(ops.sum(ops.exp(x - m), "V")) + m - ops.sum(x * ops.one_hot(y, "V"), "V")
        return "cross-entropy by hand", ops.cross_entropy_per_token(x, y, "V"), by_hand
    if k == 0:
        m = ops.stop_gradient(ops.max(x, "V"))
        e = ops.exp(x - m)
        return "softmax by hand", ops.softmax(x, "V"), e / ops.sum(e, "V")
    if k == 1:
        m = ops.stop_gradient(ops.max(x, "V"))
        return "log_softmax by hand", ops.log_softmax(x, "V"), \
            x - m - ops.log(ops.sum(ops.exp(x - m), "V"))
    if k == 2:
        h, w, bb = _leaf(["B", "H"]), _leaf(["H"]), _leaf(["H"])
        mu = ops.sum(h, "H") / ops.dim_size("H")
        c = h - mu
        var = ops.sum(c * c, "H") * (1 / ops.dim_size("H"))
        return "layer_norm by hand", ops.layer_norm(h, w, bb, "H", Fraction(1, 10**5)), \
            c / ops.sqrt(var + 1e-5) * w + bb
    if k == 3:
        h, w = _leaf(["B", "H"]), _leaf(["H"])
        return "rms_norm by hand", ops.rms_norm(h, w, "H", Fraction(1, 10**6)), \
            w * h * ops.pow(ops.mean(ops.pow(h, 2), "H") + 1e-6, Fraction(-1, 2))
    if k == 4:
        return "tanh-GELU by hand with math floats", ops.gelu(x, approximate="tanh"), \
            0.5 * x * (1 + ops.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    if k == 5:
        return "erf-GELU by hand", ops.gelu(x), x * (1 + ops.erf(x / math.sqrt(2))) / 2
    y = Tensor(b.inp(f"lab{_COUNT[0]}", ["B"], "data", "index", "V"))
    _COUNT[0] += 1
    oh = ops.one_hot(y, "V")
    if k == 6:
        return "target logit: einsum vs sum of product", _einsum(x, oh, out=["B"]), \
            ops.sum(x * oh, "V")
    if k == 7:
        table = _leaf(["V", "H"])
        return "embedding by hand", ops.embedding(y, table, "V"), ops.sum(oh * table, "V")
    if k == 8:
        return "mean by hand", ops.mean(x, "V"), ops.sum(x, "V") * (1 / ops.dim_size("V"))
    # the vocab-parallel target logit as Megatron writes it, against the spec's gather
    xs = b.shard(x.term, "V", "tp")
    ohs = ops.one_hot(y, "V", shards=("tp",))
    plan = Tensor(b.all_reduce(ops.sum(Tensor(xs) * ohs, "V").term, "tp"))
    return "vocab-parallel target logit", _einsum(x, oh, out=["B"]), plan


FAMILIES: dict[str, tuple[Callable[[Draw], tuple[str, Tensor, Tensor]], Binding]] = {
    "contraction": (_contraction, BINDING),
    "scalars": (_scalars, BINDING),
    "division": (_division, BINDING),
    "unit_axis": (_unit_axis, UNIT_BINDING),
    "unit_dim": (_unit_dim, BINDING),
    "split_reduction": (_split_reduction, BINDING),
    "library": (_library, BINDING),
}
"""Family name -> (generator, binding)."""


def _inputs(t: Term) -> list[Term]:
    from spec_lang.term import walk

    return [n for n in walk(t) if n.op is Op.INPUT and n.attrs[1] == "param"]


def draw_pair(draw: Draw, family: str, *, with_grads: bool = True) -> Pair:
    """One random pair of spellings of ``family`` (see :data:`FAMILIES`), with gradients."""
    gen, bd = FAMILIES[family]
    what, a, bb = gen(draw)
    grads: list[tuple[Term, Term]] = []
    if with_grads and a.term.op is not Op.ALL_REDUCE and bb.term.op is not Op.ALL_REDUCE \
            and not _has_collective(a.term) and not _has_collective(bb.term):
        w = Tensor(b.inp(f"cot{_COUNT[0]}", [d.name for d in a.term.dims], "data"))
        _COUNT[0] += 1
        xs = sorted(set(_inputs(a.term)) | set(_inputs(bb.term)), key=lambda t: t.attrs[0])
        try:
            ga = grad(ops.sum(a * w).term, xs)
            gb = grad(ops.sum(bb * w).term, xs)
            grads = list(zip(ga, gb))
        except SpecLangError:   # max: no gradient (the library differentiates through
            grads = []          # stop_gradient)
    return Pair(family, what, a.term, bb.term, bd, tuple(grads))


def _has_collective(t: Term) -> bool:
    from spec_lang.term import COLLECTIVE, walk

    return any(n.op in COLLECTIVE or n.op in (Op.SHARD, Op.PART) for n in walk(t))


def _differing(a: Term, b2: Term) -> list[tuple[Term, Term]]:
    """Smallest differing subterm pairs under a common skeleton (the prover's congruence)."""
    out, stack, seen = [], [(a, b2)], set()
    while stack:
        x, y = stack.pop()
        if x is y or (id(x), id(y)) in seen:
            continue
        seen.add((id(x), id(y)))
        if x.op is y.op and x.attrs == y.attrs and x.dims == y.dims \
                and len(x.args) == len(y.args) and x.op is not Op.INPUT:
            stack.extend(zip(x.args, y.args))
        else:
            out.append((x, y))
    return out


def classify(a: Term, b2: Term, binding: Binding, normaliser=None) -> str:
    """``"normal"`` (equal normal forms), ``"cas"`` (equal up to exact rational identities of
    the differing subterms, as the prover certifies them) or ``"miss"``."""
    from rewriting.cas import cas_equal
    from rewriting.normalise import normalise

    (x, y), _ = normalise([a, b2], binding, normaliser=normaliser)
    if x is y:
        return "normal"
    if all(cas_equal(p, q).equal for p, q in _differing(x, y)) or cas_equal(x, y).equal:
        return "cas"   # (the prover retries the two whole normal forms, as here)
    return "miss"
