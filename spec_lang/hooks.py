"""Backward hooks, gradient-scaling regions and activation recomputation, written in ops.

Frameworks change gradients in ways the forward does not show: a hook registered on a tensor
(``x.register_hook(lambda g: g / G)``, DeepSpeed's divide-by-gradient-accumulation hook), an
autograd function whose backward scales, or activation checkpointing whose backward reruns the
forward from a *saved and rebuilt* input. These constructs give each of them an exact meaning
with ``stop_gradient`` only (no new op, so no new rule): the normaliser removes ``STOP_GRAD``
after differentiation, and the forward value is the plain one.

* :func:`scale_grad` ``(x, c)``: value ``x``; the gradient reaching ``x`` is ``c`` times the
  gradient leaving it: ``x + (c - 1) (x - sg(x))`` (after ``STOP_GRAD`` is removed the second
  summand is ``(c - 1) * 0``, so the normal form is ``x`` even for a tensor ``c``).
* :func:`recompute` ``(fn, x, rebuilt)``: value ``fn(x)``; the backward is ``fn``'s backward at
  ``rebuilt`` (the input as the recompute sees it: the saved activation re-gathered), and the
  input gradient is handed to ``x`` (Megatron's ``CheckpointFunction``):
  ``sg(fn(x)) + fn(x') - sg(fn(x'))`` with ``x' = sg(rebuilt) + x - sg(x)``.
* :func:`split_and_gather` ``(x, axis, dim)``: Megatron's distributed saved activations
  (``split_tensor_into_1d_equal_chunks`` then ``gather_split_1d_tensor``): each rank keeps block
  ``r`` of *its own* ``x`` along ``dim`` and the blocks are all-gathered over ``axis``. When ``x``
  is the same on every rank of ``axis`` this is ``x``; when it is not (the wrong group,
  CASES2.md B41), the result mixes blocks of different ranks' tensors.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from spec_lang.collectives import all_gather, broadcast
from spec_lang.dims import DimLike, dim_name
from spec_lang.ops import add, chunk, concat, const, exact, mul, stop_gradient, sub
from spec_lang.tensor import Tensor, current_trace, fail, user_site
from spec_lang.term import DimSpec, Op, term, varying_axes

__all__ = ["scale_grad", "recompute", "split_and_gather"]


def scale_grad(x: Tensor, factor: Any) -> Tensor:
    """Identity forward; the gradient flowing back into ``x`` is multiplied by ``factor``: an
    exact constant, a scalar tensor such as ``1 / axis_size(DP)``, or a tensor over some of
    ``x``'s dims (elementwise, e.g. a 0/1 mask: a hook that zeroes some slots' gradients).

    x: any dims; returns ``x``'s dims. ``x + (c - 1) (x - stop_gradient(x))``: value ``x`` for
    every ``c``, derivative ``c``.

    Raises:
        SpecError / PlanError: ``factor`` has a dim ``x`` lacks.
    """
    c = factor if isinstance(factor, Tensor) else const(exact(factor, what="gradient scale"))
    extra = [d for d in c.dims if d not in x.dims]
    if extra:
        raise fail(f"scale_grad: the factor {c.describe()} has dims {extra} that "
                   f"{x.describe()} lacks", site=user_site(2))
    return add(x, mul(sub(c, const(1)), sub(x, stop_gradient(x))))


def recompute(fn: Callable[[Tensor], Tensor], x: Tensor, rebuilt: Tensor) -> Tensor:
    """Activation checkpointing: ``fn(x)`` forward, ``fn``'s backward evaluated at ``rebuilt``.

    Args:
        fn: the checkpointed block, ``(x) -> y`` (it may read parameters).
        x: the block's input as the forward computed it.
        rebuilt: the input as the recompute rebuilds it from the saved activation (same dims as
            ``x``), e.g. :func:`split_and_gather` of ``x`` over the layer's group.

    Returns:
        ``fn(x)``'s value; gradients of ``fn``'s parameters and of ``x`` are those of ``fn`` at
        ``rebuilt`` (equal to the plain ones exactly when ``rebuilt`` equals ``x``).

    Raises:
        SpecError / PlanError: ``rebuilt`` has other dims than ``x``.
    """
    if sorted(map(str, rebuilt.term.dims)) != sorted(map(str, x.term.dims)):
        raise fail(f"recompute: the rebuilt input {rebuilt.describe()} must have the type of "
                   f"the input {x.describe()}", site=user_site(2))
    y = fn(x)
    xr = add(stop_gradient(rebuilt), sub(x, stop_gradient(x)))
    yr = fn(xr)
    return add(stop_gradient(y), sub(yr, stop_gradient(yr)))


def split_and_gather(x: Tensor, axis: Any, dim: DimLike) -> Tensor:
    """Each rank keeps block ``r_axis`` of its own ``x`` along ``dim``; the blocks are
    all-gathered over ``axis`` (module docstring). Forward only (wrap the result in
    :func:`recompute`, which stops its gradient).

    Raises:
        PlanError: ``axis`` is not in the mesh; ``dim`` is not a dim of ``x``.
    """
    a = str(axis)
    d = dim_name(dim)
    tr = current_trace()
    if tr is None or a not in tr.mesh:
        raise fail(f"split_and_gather over {a!r}: not a mesh axis of this plan", site=user_site(2))
    if d not in x.dims:
        raise fail(f"split_and_gather: {x.describe()} has no dim {d}", site=user_site(2))
    if a not in varying_axes(x.term):       # one tensor on the group: the typed round trip
        dims = tuple(DimSpec(s.name, s.shards + (a,)) if s.name == d else s
                     for s in x.term.dims)
        own = Tensor(term(Op.SHARD, (x.term,), (d, a), dims), user_site(2))
        return all_gather(own, a, d)
    n = tr.mesh[a]
    return concat([broadcast(chunk(x, d, n, j), a, j) for j in range(n)], d)
