"""Which graph nodes alias which: the schema's word (written arguments, views) and the tensors a
``c10d`` op hands back (:mod:`~spec_lang.torch_frontend.lower`'s storage roots read these).

A ``c10d`` op in its in-place form returns the very tensors it was given, with its work:
``c10d.allreduce_(tensors, ...) -> (Tensor[], Work)`` is ``return std::tuple(tensors, work)``
(``broadcast_``, ``allgather_``'s output lists, ``_allgather_base_``'s output likewise: element
0 of the result is argument 0). ``dist.all_reduce(g)`` then points ``g`` at
``getitem(getitem(allreduce_, 0), 0)``, so what the step does next to ``g`` (``g.div_(|dp|)``)
is recorded on that node. When that node was its own storage root, the write reached only the
readers of ``g``'s new node and never the tensor ``g`` is a view of: ``g =
w.grad.to_local()`` (a ``view_as`` of the DTensor gradient's local tensor) all-reduced and
divided in place left the gradient the optimizer and the goals read all-reduced but undivided,
a right dp x tp plan refuted by a factor |dp| (adversarial round 32d, R32d-4: r32d_06, truth
0.0), and an extra scaling written the same way on a one-axis mesh was never seen (a false
accept: r32d_13). :func:`c10d_returned` names the argument such a ``getitem`` is.
"""

from __future__ import annotations

import operator

from collections.abc import Mapping
from typing import Any

import torch.fx as fx

__all__ = ["is_c10d", "schema_alias", "written_args", "c10d_returned", "named_path",
           "written_twice"]


def is_c10d(n: fx.Node) -> bool:
    """A ``torch.distributed`` op in its in-place form (``c10d.broadcast_``, ``c10d.recv_``,
    ``c10d.alltoall_base_``, ``c10d.reduce_``, ...): its schema does not mark what it writes
    (``c10d::recv_(Tensor[] tensors, ...)``, no ``(a!)``), so without a rule every tensor it
    is given counts as written (adversarial round 16: a ``dist.broadcast`` / ``all_to_all_single``
    / ``reduce`` without a rule was read as its old value, three false accepts)."""
    return str(n.target).startswith("c10d.")


def schema_alias(n: fx.Node) -> str | None:
    """``"write"`` when the op's ATen schema writes an argument (``Tensor(a!)``: in place, or
    ``out=``) or it is a ``c10d`` op (:func:`is_c10d`), ``"view"`` when its result aliases an
    argument (``Tensor(a)``), else ``None``."""
    if is_c10d(n):
        return "write"
    schema = getattr(n.target, "_schema", None)
    if schema is None:
        return None
    if any(a.alias_info is not None and a.alias_info.is_write for a in schema.arguments):
        return "write"
    if any(r.alias_info is not None for r in schema.returns):
        return "view"
    return None


def written_args(n: fx.Node) -> list[fx.Node]:
    """The graph nodes the op's ATen schema says it writes (positional or keyword: ``out=``;
    adversarial finding R6-5); for a ``c10d`` op every tensor argument (:func:`is_c10d`)."""
    if is_c10d(n):
        out: list[fx.Node] = []
        fx.node.map_arg((n.args, n.kwargs), out.append)   # every node, nested in any container
        return out
    schema = getattr(n.target, "_schema", None)
    if schema is None:
        return []
    out = []
    for i, a in enumerate(schema.arguments):
        if a.alias_info is None or not a.alias_info.is_write:
            continue
        v = n.args[i] if i < len(n.args) else n.kwargs.get(a.name)
        for x in (v if isinstance(v, (list, tuple)) else [v]):
            if isinstance(x, fx.Node):
                out.append(x)
    return out


def c10d_returned(n: fx.Node) -> fx.Node | None:
    """The argument node that ``n`` is, when ``n`` is ``getitem(...getitem(c, 0)..., i...)`` of a
    ``c10d`` op ``c`` whose result holds its argument 0 as element 0 (module docstring): the
    same path of indices into ``c.args[0]``; None otherwise (the work, or not such a node)."""
    path: list[int] = []
    x: object = n
    while isinstance(x, fx.Node) and x.op == "call_function" and x.target is operator.getitem:
        if not isinstance(x.args[1], int):
            return None
        path.append(x.args[1])
        x = x.args[0]
    if not (isinstance(x, fx.Node) and x.op == "call_function" and is_c10d(x)) \
            or not path or path[-1] != 0 or not x.args:
        return None
    schema = getattr(x.target, "_schema", None)     # (Tensor[], Work) for (Tensor[] tensors, ..)
    if schema is None or len(schema.returns) != 2 or not schema.arguments \
            or str(schema.returns[0].type) != str(schema.arguments[0].type):
        return None
    val: object = x.args[0]
    for i in reversed(path[:-1]):
        if not isinstance(val, (list, tuple)) or not -len(val) <= i < len(val):
            return None
        val = val[i]
    return val if isinstance(val, fx.Node) else None


def named_path(analysis: Any, r: fx.Node, base: fx.Node, roots: Mapping[fx.Node, Any]) -> bool:
    """Whether alias ``r`` of storage ``base``, and each alias of ``base`` it is made from (its
    first node argument, back to ``base``), was named by pass 1: not ``unsupported`` and with a
    layout. ``base`` itself, the storage the write went into, is always named. A write into
    ``base`` may give its value only to such readers; a view pass 1 could not name
    (``flat[a:b].view(p.shape[1], p.shape[0])`` of a rectangular gradient: R36b-1 / R36b-2)
    keeps its Opaque, or a ``t()`` of it would read the written value as the gradient."""
    for _ in range(4096):
        if r is base:
            return True
        if r in analysis.unsupported or analysis.layouts.get(r) is None:
            return False
        s = next((a for a in r.args if isinstance(a, fx.Node)), None)
        if s is None or s is base or roots.get(s, (None,))[0] is not base:
            return True
        r = s
    return False


def written_twice(targets: Any, roots: Mapping[fx.Node, Any], n: fx.Node | None = None) -> bool:
    """Whether two of an in-place op's written tensors share a storage, or (a list op ``n``)
    a written storage is read at another index of another list argument (R37b-3:
    ``torch._foreach_div_(grads + grads[:1], n)`` divides w1's gradient twice in the real run,
    ``_foreach_add_([g1, g2], [g2, g1])`` adds the new ``g1`` to ``g2``; the traced node
    computes every entry from the values before the call), or a tensor argument of a list op
    shares a written storage (R38a-3: ``_foreach_mul_([s.grad, w1.grad], s.grad)``)."""
    bases = [roots[t][0] if isinstance(t, fx.Node) and t in roots else None for t in targets]
    named = [b for b in bases if b is not None]
    if len(named) != len(set(named)):
        return True
    for a in (n.args[1:] if n is not None else ()):
        if isinstance(a, fx.Node) and len(bases) > 1 and a in roots \
                and any(b is roots[a][0] for b in bases):
            # ``_foreach_mul_([s.grad, w1.grad], s.grad)``: entry 1 reads the written entry 0
            # (R38a-3)
            return True
        if isinstance(a, (list, tuple)) and len(a) == len(bases):
            for j, x in enumerate(a):
                rb = roots[x][0] if isinstance(x, fx.Node) and x in roots else None
                if rb is not None and any(b is rb for i, b in enumerate(bases) if i != j):
                    return True
    return False
