"""Reverse-mode autodiff on the term graph, and ``lower`` (REGION -> its forward).

``grad(loss, wrt)`` walks the DAG once in reverse topological order (no recursion) and builds
each adjoint with one rule per op, written in primitive ops. Construction is canonical and
deterministic: the same op gets the same gradient terms in a spec and in a plan (operand order:
the adjoint first, then the op's other operands in their order; contributions to a shared node
are summed in the order they are produced), so the normaliser can compare them structurally.

Adjoints may *lack* dims of their node: an adjoint without dim ``d`` means "constant along
``d``" (elementwise broadcast by name). This avoids materialising broadcasts; a contribution
with dims its target lacks is summed out (``EINSUM([g], out=target dims)``).

Rules (``y`` the node, ``g`` its adjoint; each line is d(loss)/d(operand)):

=============  ======================================================================
ADD            ``g`` to every operand (times the rank's count of every dim of the node that
               both ``g`` and the operand lack: the sum over a broadcast, ``_broadcast_sum``)
MUL            ``MUL(g, other operands...)``
NEG            ``NEG(g)``
RECIP          ``NEG(MUL(g, y, y))``
EXP            ``MUL(g, y)``
LOG            ``MUL(g, RECIP(x))``
SQRT           ``MUL(g, 1/2, RECIP(y))``
RSQRT          ``MUL(g, -1/2, y, y, y)``                       (-1/2 x^(-3/2))
POW e          ``MUL(g, e, POW(x, e-1))``                      (``x`` when e-1 = 1)
SIGMOID        ``MUL(g, y, ADD(1, NEG(y)))``
SILU           ``MUL(g, s, ADD(1, MUL(x, ADD(1, NEG(s)))))``, ``s = SIGMOID(x)``
TANH           ``MUL(g, ADD(1, NEG(MUL(y, y))))``
ERF            ``MUL(g, 2/sqrt(pi), EXP(NEG(MUL(x, x))))``      (erf' = 2/sqrt(pi) e^(-x^2))
WHERE c a b    ``MUL(g, c)`` to a, ``MUL(g, ADD(1, NEG(c)))`` to b (c is 0/1 data; broadcast
               dims as for ADD)
CAST           ``g``;   STOP_GRAD: nothing
EINSUM         ``EINSUM(g, other operands..., out=operand dims present)``
RENAME o->n    ``RENAME(g, n->o)``
CHUNK d i      ``CONCAT(0.., g, ..0)`` along d (zero blocks ``MUL(0, CHUNK(x, d, n, j))``)
CONCAT d       ``CHUNK(g, d, n, i)`` to block i
PERMUTE d o    ``PERMUTE(g, d, o^-1)`` (the inverse block order)
REGION         the *declared* backward primitive applied to ``g``
=============  ======================================================================

No rule (error if on a differentiated path): GELU, MAXIMUM, REDUCE_MAX, TOPK_MASK (differentiate
through ``stop_gradient``; ``ops.topk_mask`` applies it; ALL_TO_ALL: use ``all_to_all_region``), SHIFT (a data transform), and the plain collectives SHARD, PART, ALL_REDUCE, ALL_GATHER,
REDUCE_SCATTER, BROADCAST (a :class:`PlanError` naming the site: declare a backward with a
region). ONE_HOT and leaves receive no gradient.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any, assert_never

import sympy

from spec_lang.collectives import PRIMITIVES, prim_dims, prim_term
from spec_lang.errors import PlanError, SpecError
from spec_lang.tensor import Tensor, current_trace, record_site, site_of, user_site
from spec_lang.term import DimSpec, Op, Term, term, walk

__all__ = ["grad", "backward", "lower", "zeros_like"]


# -- term builders (no user sites: these are internal terms) ----------------------------------------

def _dims_union(args: Sequence[Term]) -> tuple[DimSpec, ...]:
    out: dict[str, DimSpec] = {}
    for a in args:
        for d in a.dims:
            out.setdefault(d.name, d)
    return tuple(out.values())


def _c(v: Fraction | int) -> Term:
    return term(Op.CONST, (), (Fraction(v),), ())


# erf'(x) = 2/sqrt(pi) exp(-x^2) (Abramowitz & Stegun 7.1.19): an exact irrational constant
_ERF_SLOPE = term(Op.CONST, (), (2 / sympy.sqrt(sympy.pi),), ())


def _ew(op: Op, *args: Term, attrs: tuple = ()) -> Term:
    return term(op, args, attrs, _dims_union(args))


def _mul(*args: Term) -> Term:
    return args[0] if len(args) == 1 else _ew(Op.MUL, *args)


def _add(*args: Term) -> Term:
    return args[0] if len(args) == 1 else _ew(Op.ADD, *args)


def _neg(x: Term) -> Term:
    return _ew(Op.NEG, x)


def _one_minus(x: Term) -> Term:
    return _add(_c(1), _neg(x))


def _einsum(args: Sequence[Term], out: Sequence[str]) -> Term:
    dims = {d.name: d for d in _dims_union(args)}
    return term(Op.EINSUM, tuple(args), (tuple(out),), tuple(dims[n] for n in out))


def zeros_like(x: Term) -> Term:
    """``MUL(0, x)``: a zero of x's type (exact: 0 times a real is 0)."""
    return _mul(_c(0), x)


def _materialise(g: Term, like: Term) -> Term:
    """``g`` broadcast to every dim of ``like`` (``ADD(g, MUL(0, like))``) when it lacks some."""
    if all(d in g.dim_names for d in like.dim_names):
        return g
    return _add(g, zeros_like(like))


def _fit(g: Term, target: Term) -> Term:
    """Sum out dims of ``g`` that ``target`` lacks (the transpose of broadcasting)."""
    extra = [d for d in g.dim_names if d not in target.dim_names]
    if not extra:
        return g
    return _einsum((g,), tuple(d for d in target.dim_names if d in g.dim_names))


def _local_count(d: DimSpec) -> list[Term]:
    """The number of entries of dim ``d`` a rank holds, as factors: ``|d|`` over every shard
    axis ``|a|`` and chunk count."""
    out = [term(Op.DIM_SIZE, (), (d.name,), ())]
    for a in d.shards:
        if a.startswith("#"):
            out.append(_c(Fraction(1, int(a.split("/")[1]))))
        else:
            out.append(_ew(Op.RECIP, term(Op.AXIS_SIZE, (), (a,), ())))
    return out


def _broadcast_sum(g: Term, node: Term, child: Term) -> Term:
    """The transpose of an elementwise broadcast along dims the adjoint is constant on.

    An operand of ``ADD`` / ``WHERE`` that lacks a dim ``d`` of the node is broadcast along it,
    so its adjoint is the *sum* over ``d`` of the node's adjoint. When that adjoint also lacks
    ``d`` (constant along it, e.g. under ``mean_d``), the sum is the adjoint times the rank's
    count of ``d`` (``_fit`` only sums dims the adjoint has). Example: ``mean_V(z - lse)`` gives
    ``lse`` the adjoint ``-|V| * (1/|V|) = -1``, not ``-1/|V|``.
    """
    if node.op not in (Op.ADD, Op.WHERE):
        return g
    have = set(g.dim_names) | set(child.dim_names)
    missing = [d for d in node.dims if d.name not in have]
    if not missing:
        return g
    return _mul(g, *(f for d in missing for f in _local_count(d)))


# -- the walk ---------------------------------------------------------------------------------------

def _no_rule(n: Term, why: str) -> Exception:
    site = site_of(n)
    if n.op in (Op.SHARD, Op.PART, Op.ALL_REDUCE, Op.ALL_GATHER, Op.REDUCE_SCATTER, Op.BROADCAST,
                Op.ALL_TO_ALL):
        return PlanError(f"{site}: {n.op.name.lower()} over {n.attrs[0] if n.op is not Op.SHARD else n.attrs[1]!r} "
                         f"is on a differentiated path but has no declared backward; use a "
                         f"region (copy_to_tp_region, reduce_from_tp_region, ...) or move it out "
                         f"of the differentiated program")
    return SpecError(f"{site}: {n.op.name} is on a differentiated path: {why}")


def grad(loss: Term, wrt: Sequence[Term], *, seed: Term | None = None) -> list[Term]:
    """Gradients of scalar ``loss`` with respect to each term of ``wrt`` (same types as ``wrt``).

    Args:
        loss: a term with dims ``()``.
        wrt: terms to differentiate by (spec INPUTs, or a plan's local parameter terms).
        seed: the adjoint of ``loss`` (default the constant 1).

    Returns:
        one term per ``wrt`` entry; ``MUL(0, w)`` where ``loss`` does not depend on ``w``.

    Raises:
        SpecError: ``loss`` is not a scalar, or an op without a rule is on a differentiated path.
        PlanError: a plain collective is on a differentiated path, or a region's declared
            backward does not map the output type back to the input type.
    """
    if loss.dims:
        raise SpecError(f"{site_of(loss)}: the loss must be a scalar, got dims "
                        f"{[str(d) for d in loss.dims]}; sum or mean it first")
    targets = {id(w) for w in wrt}
    order = walk(loss)
    relevant: set[int] = set()
    for n in order:
        if id(n) in targets:
            relevant.add(id(n))
        elif n.op is not Op.STOP_GRAD and n.op is not Op.ONE_HOT \
                and any(id(c) in relevant for c in n.args):
            relevant.add(id(n))
    adj: dict[int, list[Term]] = {id(loss): [seed if seed is not None else _c(1)]}
    done: dict[int, Term] = {}
    watch = _boundary_watch()
    for n in reversed(order):
        contribs = adj.pop(id(n), None)
        if contribs is None or id(n) not in relevant:
            continue
        g = _add(*contribs)
        if id(n) in watch:  # the adjoint at a layer boundary: a backward cut point
            ctx, names = watch[id(n)]
            for name in names:
                ctx.adjoints.append((name, n, g))
        if id(n) in targets:
            done[id(n)] = g
            continue  # a target is a leaf of the differentiation (e.g. a plan's SHARD(w))
        if not any(id(c) in relevant for c in n.args):
            continue
        for child, cg in _rule(n, g):
            if id(child) in relevant:
                adj.setdefault(id(child), []).append(_fit(_broadcast_sum(cg, n, child), child))
    out = []
    for w in wrt:
        g = done.get(id(w))
        out.append(zeros_like(w) if g is None else _materialise(g, w))
    return out


def _boundary_watch() -> dict[int, tuple[Any, list[str]]]:
    """``id(term) -> (trace, names)`` of the current trace's layer boundaries
    (:func:`spec_lang.ops.layer_boundary`); their adjoints are recorded in ``trace.adjoints``."""
    ctx = current_trace()
    if ctx is None or not ctx.boundaries:
        return {}
    out: dict[int, tuple[Any, list[str]]] = {}
    for name, t, _site in ctx.boundaries:
        out.setdefault(id(t), (ctx, []))[1].append(name)
    return out


def _rule(n: Term, g: Term) -> list[tuple[Term, Term]]:  # noqa: C901, PLR0911, PLR0912
    """(child, contribution) pairs for node ``n`` with adjoint ``g``."""
    a = n.args
    match n.op:
        case Op.INPUT | Op.CONST | Op.DIM_SIZE | Op.AXIS_SIZE | Op.RANK_CONST | Op.CAUSAL_MASK \
                | Op.ROPE_COS | Op.ROPE_SIN | Op.ONE_HOT | Op.STOP_GRAD:
            return []
        case Op.ADD:
            return [(x, g) for x in a]
        case Op.MUL:
            return [(x, _mul(g, *(a[:i] + a[i + 1:]))) for i, x in enumerate(a)]
        case Op.NEG:
            return [(a[0], _neg(g))]
        case Op.RECIP:
            return [(a[0], _neg(_mul(g, n, n)))]
        case Op.EXP:
            return [(a[0], _mul(g, n))]
        case Op.LOG:
            return [(a[0], _mul(g, _ew(Op.RECIP, a[0])))]
        case Op.SQRT:
            return [(a[0], _mul(g, _c(Fraction(1, 2)), _ew(Op.RECIP, n)))]
        case Op.RSQRT:
            return [(a[0], _mul(g, _c(Fraction(-1, 2)), n, n, n))]
        case Op.POW:
            e = n.attrs[0]
            if e == 0:
                return []
            if e == 1:
                return [(a[0], g)]
            base = a[0] if e - 1 == 1 else _ew(Op.POW, a[0], attrs=(e - 1,))
            return [(a[0], _mul(g, _c(e), base))]
        case Op.SIGMOID:
            return [(a[0], _mul(g, n, _one_minus(n)))]
        case Op.SILU:
            s = _ew(Op.SIGMOID, a[0])
            return [(a[0], _mul(g, s, _add(_c(1), _mul(a[0], _one_minus(s)))))]
        case Op.TANH:
            return [(a[0], _mul(g, _one_minus(_mul(n, n))))]
        case Op.ERF:
            return [(a[0], _mul(g, _ERF_SLOPE, _ew(Op.EXP, _neg(_mul(a[0], a[0])))))]
        case Op.WHERE:
            c, x, y = a
            return [(x, _mul(g, c)), (y, _mul(g, _one_minus(c)))]
        case Op.CAST:
            return [(a[0], g)]
        case Op.GELU | Op.MAXIMUM | Op.REDUCE_MAX | Op.TOPK_MASK:
            raise _no_rule(n, "it has no gradient rule here; apply stop_gradient to it (as "
                              "softmax does with its max) or use another op")
        case Op.EINSUM:
            out = []
            for i, x in enumerate(a):
                others = a[:i] + a[i + 1:]
                if not others:
                    out.append((x, g))
                    continue
                have = set(g.dim_names).union(*(o.dim_names for o in others))
                out.append((x, _einsum((g, *others), tuple(d for d in x.dim_names if d in have))))
            return out
        case Op.RENAME:
            old, new = n.attrs
            if new not in g.dim_names:
                return [(a[0], g)]
            src = a[0].dim(old)
            dims = tuple(src if d.name == new else d for d in g.dims)
            return [(a[0], term(Op.RENAME, (g,), (new, old), dims))]
        case Op.CHUNK:
            d, parts, idx = n.attrs
            x = a[0]
            gg = _materialise(g, n) if d not in g.dim_names else g
            blocks = [gg if j == idx else zeros_like(term(Op.CHUNK, (x,), (d, parts, j), tuple(
                DimSpec(s.name, s.shards + (f"#{j}/{parts}",)) if s.name == d else s
                for s in x.dims))) for j in range(parts)]
            dims: dict[str, DimSpec] = {}
            for b in blocks:
                for s in b.dims:
                    dims.setdefault(s.name, x.dim(d) if s.name == d else s)
            return [(x, term(Op.CONCAT, tuple(blocks), (d,), tuple(dims.values())))]
        case Op.CONCAT:
            (d,) = n.attrs
            k = len(a)
            if d not in g.dim_names:
                return [(x, g) for x in a]
            out = []
            for i, x in enumerate(a):
                dims_i = tuple(x.dim(d) if s.name == d else s for s in g.dims)
                out.append((x, term(Op.CHUNK, (g,), (d, k, i), dims_i)))
            return out
        case Op.PERMUTE:
            d, order = n.attrs
            if d not in g.dim_names:
                return [(a[0], g)]
            inv = tuple(order.index(j) for j in range(len(order)))
            return [(a[0], term(Op.PERMUTE, (g,), (d, inv), g.dims))]
        case Op.SHIFT:
            raise _no_rule(n, "it is a data transform (next-token labels) with no gradient rule; "
                              "apply it to data, not to a differentiated value")
        case Op.REGION:
            name, fwd, bwd, axis, dim = n.attrs
            x = a[0]
            gg = _materialise(g, n) if (PRIMITIVES[bwd].needs_dim and dim not in g.dim_names) \
                else g
            want = prim_dims(bwd, gg.dims, axis, dim)
            got_ok = not isinstance(want, str) and all(
                x.dim(s.name) == s for s in want if s.name in x.dim_names)
            if not got_ok:
                why = want if isinstance(want, str) else (
                    f"it maps the output type ({', '.join(map(str, n.dims))}) to "
                    f"({', '.join(map(str, want))}), not the input type "
                    f"({', '.join(map(str, x.dims))})")
                raise PlanError(f"{site_of(n)}: region {name} (forward {fwd}, declared backward "
                                f"{bwd} over {axis!r}): the declared backward is ill-typed: {why}")
            return [(x, prim_term(bwd, gg, axis, dim))]
        case Op.SHARD | Op.PART | Op.ALL_REDUCE | Op.ALL_GATHER | Op.REDUCE_SCATTER | Op.BROADCAST \
                | Op.ALL_TO_ALL:
            raise _no_rule(n, "no declared backward")
        case _:
            assert_never(n.op)


def backward(loss: Tensor, wrt: Mapping[str, Tensor], *, seed: Tensor | None = None
             ) -> dict[str, Tensor]:
    """Tensor-level :func:`grad`: ``{name: d loss / d wrt[name]}``."""
    names = list(wrt)
    gs = grad(loss.term, [wrt[k].term for k in names], seed=seed.term if seed else None)
    site = user_site(2)
    return {k: Tensor(g, site, f"grad:{k}") for k, g in zip(names, gs)}


def lower(roots: Term | Sequence[Term]) -> list[Term]:
    """Replace every REGION by its forward primitive (bottom-up, no recursion)."""
    rs = [roots] if isinstance(roots, Term) else list(roots)
    new: dict[int, Term] = {}
    for n in walk(rs):
        args = tuple(new[id(c)] for c in n.args)
        if n.op is Op.REGION:
            _name, fwd, _bwd, axis, dim = n.attrs
            new[id(n)] = prim_term(fwd, args[0], axis, dim)
        elif all(x is y for x, y in zip(args, n.args)):
            new[id(n)] = n
        else:
            new[id(n)] = term(n.op, args, n.attrs, n.dims)
        if new[id(n)] is not n:  # the rebuilt node keeps the user's line (precision lint)
            site = site_of(n)
            if not site.startswith("<unknown>"):
                record_site(new[id(n)], site)
    return [new[id(r)] for r in rs]
