"""Traced contractions and reductions: ``einsum`` (contracts every dim not in ``out``), ``sum``,
``mean``, ``max``, ``one_hot`` and ``topk_mask`` (public through :mod:`spec_lang.ops`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from spec_lang.dims import Dim, DimLike, dim_name
from spec_lang.ops_constants import _t, dim_size
from spec_lang.ops_elementwise import _ew, _merge_dims, recip
from spec_lang.tensor import Tensor, current_trace, fail, user_site
from spec_lang.term import DimSpec, Op, Term, term


def einsum(*xs: object, out: Iterable[DimLike],
           sum_single: Iterable[DimLike] = ()) -> Tensor:
    """Product of the operands summed over every dim not in ``out``.

    ``einsum(x, w, out=(B, S, F))`` with ``x: (B, S, H)``, ``w: (H, F)`` is ``x @ w``. Dims are
    matched by name; a dim shared by operands must be placed the same way in each; every dim of
    ``out`` must occur in some operand.

    With two or more operands, a dim left out of ``out`` that occurs in only one operand (that
    operand summed over it before the product) is an error unless ``sum_single`` names it: it
    is almost always a typo in ``out`` or in a shape, and it silently proves a different model
    (issue 12, item 5). ``sum_single`` must name exactly such dims (docs/dsl.md, "einsum").

    Raises:
        SpecError (or the trace's error): repeated or unknown ``out`` dims, operands placing a
            shared dim differently, a dim summed out of one operand alone without
            ``sum_single``, or a ``sum_single`` dim that is not one.
    """
    ts = [_t(x) for x in xs]
    if not ts:
        raise fail("einsum of no operands")
    names = tuple(dim_name(d) for d in out)
    if len(set(names)) != len(names):
        raise fail(f"einsum out={names} repeats a dim")
    dims = {d.name: d for d in _merge_dims(ts, "einsum")}
    missing = [n for n in names if n not in dims]
    if missing:
        raise fail(f"einsum out dims {missing} occur in no operand "
                   f"({', '.join(t.describe() for t in ts)}); every output dim must come from "
                   "an operand")
    if len(ts) > 1:
        _check_single_sums(ts, names, dims, tuple(dim_name(d) for d in (
            (sum_single,) if isinstance(sum_single, Dim | str) else sum_single)))
    return Tensor(term(Op.EINSUM, tuple(t.term for t in ts), (names,),
                       tuple(dims[n] for n in names)), user_site(2))


def _check_single_sums(ts: Sequence[Tensor], out: tuple[str, ...], dims: dict[str, DimSpec],
                       allowed: tuple[str, ...]) -> None:
    """A dim summed out of exactly one operand must be named in ``sum_single`` (and only such
    dims may be)."""
    owners = {n: [t for t in ts if n in t.dims] for n in dims}
    single = [n for n in dims if n not in out and len(owners[n]) == 1]
    unmarked = [n for n in single if n not in allowed]
    if unmarked:
        n = unmarked[0]
        raise fail(f"einsum sums out dim {n}, which occurs only in {owners[n][0].describe()} (of "
                   f"{len(ts)} operands): that operand is summed over {n} before the product. "
                   f"If that is meant, write einsum(..., sum_single=({n!r},)); if not, add {n} to "
                   f"out=, or fix the dims of the operands")
    wrong = [n for n in allowed if n not in single]
    if wrong:
        raise fail(f"einsum sum_single names {wrong}, but only dims summed out of exactly one "
                   f"operand belong there (here: {single or 'none'})")


matmul = einsum
"""``matmul(a, b, out=...)`` is :func:`einsum` (dims by name make the two the same)."""


def _dims_arg(x: Tensor, dims: DimLike | Iterable[DimLike] | None) -> tuple[str, ...]:
    if dims is None:
        return x.dims
    if isinstance(dims, Dim | str):
        dims = (dims,)
    names = tuple(dim_name(d) for d in dims)
    for n in names:
        if n not in x.dims:
            raise fail(f"{x.describe()} has no dim {n}")
    return names


def sum(x: object, dims: DimLike | Iterable[DimLike] | None = None) -> Tensor:  # noqa: A001
    """Sum over ``dims`` (all when None): ``EINSUM([x], out=rest)``."""
    t = _t(x)
    red = _dims_arg(t, dims)
    keep = tuple(d for d in t.dims if d not in red)
    return Tensor(term(Op.EINSUM, (t.term,), (keep,), tuple(t.term.dim(n) for n in keep)),
                  user_site(2))


def mean(x: object, dims: DimLike | Iterable[DimLike] | None = None) -> Tensor:
    """``sum(x, dims) * prod(1/|d|)`` with the *global* sizes ``|d|`` (``DIM_SIZE``).

    On a plan rank whose ``x`` is sharded along ``d`` this is the rank's addend of the mean.
    """
    t = _t(x)
    red = _dims_arg(t, dims)
    s = sum(t, red)
    facs = [recip(dim_size(d)) for d in red]
    return _ew(Op.MUL, (s, *facs), what="mean") if facs else s


def max(x: object, dims: DimLike | Iterable[DimLike] | None = None) -> Tensor:  # noqa: A001
    """Max over ``dims`` (``REDUCE_MAX``); forward only: differentiate through ``stop_gradient``."""
    t = _t(x)
    red = _dims_arg(t, dims)
    keep = tuple(d for d in t.term.dims if d.name not in red)
    return Tensor(term(Op.REDUCE_MAX, (t.term,), (red,), keep), user_site(2))


def one_hot(indices: object, d: DimLike, *, shards: tuple[str, ...] = ()) -> Tensor:
    """``onehot[..., v] = [indices[...] == v]`` for ``v`` in ``d``; dims ``indices.dims + (d,)``.

    With ``shards=("tp",)`` ``v`` ranges over this rank's block of ``d`` (vocab-parallel lookup).
    """
    t = _t(indices)
    n = dim_name(d)
    if n in t.dims:
        raise fail(f"one_hot over {n}: {t.describe()} already has dim {n}")
    return Tensor(term(Op.ONE_HOT, (t.term,), (n,), t.term.dims + (DimSpec(n, tuple(shards)),)),
                  user_site(2))


def topk_mask(x: object, d: DimLike, k: int, *, eligible: object | None = None) -> Tensor:
    """0/1 over ``d``: 1 where ``x`` is among the ``k`` largest entries along ``d`` (ties go to
    the lower index, a stable order). dims unchanged, e.g. router scores ``(B, S, E) -> (B, S, E)``.

    With ``eligible`` (a 0/1 tensor with exactly ``x``'s dims, e.g. another ``topk_mask``): the
    ``k`` largest among the entries whose eligibility is 1 (ties to the lower index); ineligible
    entries get 0; if fewer than ``k`` are eligible, all eligible entries get 1. This is
    DeepSeek-V3's group-limited routing (``masked_fill(-inf)`` then ``topk`` in the official
    ``Gate.forward``) written exactly, without a large constant or ``-inf``
    (``TOPK_MASK(x, eligible)``, two operands).

    Top-k selection is discrete (piecewise constant): the result is wrapped in
    ``stop_gradient``, so gradients flow only through the values it selects (MoE gate weights,
    Shazeer et al. 2017; DeepSeek-V3 tech report sec. 2.1.2). ``TOPK_MASK`` itself has no
    gradient rule.

    Raises:
        SpecError/PlanError: ``d`` missing or sharded (gather it first), or ``k`` not in
            ``1..|d|``.
    """
    t = _t(x)
    n = dim_name(d)
    if n not in t.dims:
        raise fail(f"topk_mask over {n}: {t.describe()} has no dim {n}")
    if t.term.dim(n).shards:
        raise fail(f"topk_mask over {n}: {t.describe()} holds only a block of {n}; gather it "
                   f"first (top-k needs every entry along {n})")
    tr = current_trace()
    size = tr.sizes.get(n) if tr is not None else None
    if isinstance(k, bool) or not isinstance(k, int) or k < 1 or (size is not None and k > size):
        raise fail(f"topk_mask over {n}: k={k!r} must be an int in 1..{size or '|' + n + '|'}")
    args: tuple[Term, ...] = (t.term,)
    if eligible is not None:
        el = _t(eligible)
        if sorted(el.term.dims, key=str) != sorted(t.term.dims, key=str):
            raise fail(f"topk_mask over {n}: eligible {el.describe()} must have exactly the dims "
                       f"(and placements) of {t.describe()}")
        args = (t.term, el.term)
    m = term(Op.TOPK_MASK, args, (n, int(k)), t.term.dims)
    return Tensor(term(Op.STOP_GRAD, (m,), (), m.dims), user_site(2))
