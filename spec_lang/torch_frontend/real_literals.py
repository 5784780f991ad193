"""A computing op's literal arguments mean the same at the real sizes (adversarial finding R33-2).

The program is lowered from its trace at the probe sizes. A python literal of a computing op
that a rule reads through :meth:`~spec_lang.torch_frontend.literals.Traces.scalar` is read at
both sizes (equal, or lifted to the product of sizes that gives both values). A rule that reads
the literal from the graph itself (``mean``'s dims, ``_softmax``'s dim, ``nll_loss``'s
reduction, a layer norm's ``normalized_shape``) sees the probe value only, so a train file that
branches on its sizes (``g.mean(1 if g.shape[0] == g.shape[1] else 0)``, 1 only where a
gradient is square at the real sizes) had the probe trace's program proved.

:func:`unread_real_literals` lists every literal argument of a computing node that differs
from its twin at the real sizes and that no rule read through ``scalar``, except

* a dim argument equal to its twin once negative dims are normalised (``-1`` and ``1`` of a
  2-d tensor);
* a size argument of an op whose output shape it sets (:data:`SHAPE_SIZE_ARGS`): ``full``'s
  shape, ``embedding_dense_backward``'s ``num_weights``, of the same Python types at both
  sizes (``arange(5.0)`` is a float tensor, ``arange(6)`` an int64 one: round 34, R34-1). Its
  meaning is the output's named dims, whose real sizes
  :func:`~spec_lang.torch_frontend.naming.solve_real_sizes` checks at the real sizes.

Every aligned node's dtype must also be the same at both sizes, and where a rule reads a
node's memory layout (``_reshape_alias``, a ``c10d`` all-reduce's buffers) the real twin's
must pass the same check: rules read the probe node's (rounds 34 and 34c).

Each entry makes the goals UNKNOWN (``frontend``), naming the user's line. Data movement is
:mod:`~spec_lang.torch_frontend.real_moves`'s; the ranks' literals are
:meth:`~spec_lang.torch_frontend.literals.Traces.unread_rank_literals`'s.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import torch.fx as fx

from spec_lang.torch_frontend.analysis import semantic_nodes
from spec_lang.torch_frontend.literals import Traces, _arg, _literal_differences

__all__ = ["SHAPE_SIZE_ARGS", "unread_real_literals"]

SHAPE_SIZE_ARGS: frozenset[tuple[str, str]] = frozenset({
    ("aten.full.default", "size"), ("aten.zeros.default", "size"),
    ("aten.ones.default", "size"), ("aten.empty.memory_format", "size"),
    ("aten.new_zeros.default", "size"), ("aten.new_ones.default", "size"),
    ("aten.new_full.default", "size"), ("aten.new_empty.default", "size"),
    ("aten.new_empty_strided.default", "size"), ("aten.empty_strided.default", "size"),
    ("aten.new_empty_strided.default", "stride"), ("aten.empty_strided.default", "stride"),
    ("aten.native_layer_norm.default", "normalized_shape"),
    ("aten.native_layer_norm_backward.default", "normalized_shape"),
    ("aten.embedding_dense_backward.default", "num_weights"),
    ("aten.sum_to_size.default", "size"),
    ("aten.arange.default", "end"), ("aten.arange.start", "end"),
})
"""``(op, argument)``: size arguments that set the op's output shape and nothing else (a layer
norm's ``normalized_shape`` of as many dims is its input's last dims; an empty tensor's strides
are read where a rule needs them row-major, ``_layout_read``; ``arange``'s end is its length,
the start and step stay literals compared as any other, ``rules_index.ArangeRule``)."""

_DIM_NAMES = frozenset({"dim", "dims", "dim0", "dim1", "start_dim", "end_dim"})


def _schema_arg(n: fx.Node, key: Any) -> Any:
    """The schema argument of ``n``'s op that argument ``key`` fills (None: not an aten op)."""
    schema = getattr(n.target, "_schema", None)
    if schema is None:
        return None
    k = key[0] if isinstance(key, tuple) else key
    args = schema.arguments
    if isinstance(k, int):
        return args[k] if k < len(args) else None
    return next((a for a in args if a.name == k), None)


def _types(v: Any) -> Any:
    return tuple(_types(u) for u in v) if isinstance(v, (list, tuple)) else type(v).__name__


def _dtypes(n: fx.Node) -> Any:
    """The dtype of each tensor ``n`` gives (None for a non-tensor)."""
    v = n.meta.get("val")
    if isinstance(v, (list, tuple)):
        return tuple(getattr(u, "dtype", None) for u in v)
    return getattr(v, "dtype", None)


def _row_major(shape: Any, stride: Any) -> bool:
    want, acc = [], 1
    for sz in reversed(list(shape)):
        want.append(acc)
        acc *= int(sz)
    return len(stride) == len(shape) and all(
        int(sz) == 1 or int(st) == w for sz, st, w in zip(shape, stride, reversed(want)))


def _layout_read(n: fx.Node) -> bool:
    """Whether the storage ``n`` reads is row-major where its rule requires it: the source and
    the stride argument of ``_reshape_alias`` (``rules_layout.ReshapeAlias``), the buffers of a
    ``c10d`` all-reduce (``rules_collectives.C10dAllReduce``: gloo reduces raw memory). Those
    rules check the probe node only; its real twin must pass too (round 34c, R34c-1..3: strides
    that transpose or pad only at the real sizes, through ``_reshape_alias`` or an
    ``empty_strided`` buffer). True for any other op."""
    target = str(n.target)
    try:
        if target == "aten._reshape_alias.default":
            return bool(n.args[0].meta["val"].is_contiguous()) and _row_major(n.args[1], n.args[2])
        if target == "c10d.allreduce_.default":
            return all(isinstance(t, fx.Node) and t.meta["val"].is_contiguous() for t in n.args[0])
    except (AttributeError, KeyError, IndexError, TypeError, RuntimeError):
        return False
    return True


def _rank_of_input(n: fx.Node) -> int | None:
    for a in n.args:
        v = a.meta.get("val") if isinstance(a, fx.Node) else None
        if hasattr(v, "shape"):
            return len(v.shape)
    return None


def _normalised(v: Any, rank: int) -> Any:
    if isinstance(v, bool):
        return v
    if isinstance(v, int):
        return v + rank if v < 0 else v
    if isinstance(v, (list, tuple)):
        return [_normalised(u, rank) for u in v]
    return v


def _same_meaning(x: fx.Node, y: fx.Node, key: Any) -> bool:
    """Argument ``key`` of twins ``x`` (probe) and ``y`` (real) means the same although its
    literal differs (module docstring)."""
    a = _schema_arg(x, key)
    if a is None:
        return False
    if (str(x.target), a.name) in SHAPE_SIZE_ARGS:   # of the same types: arange(5.0) is a
        return _types(_arg(x, key)) == _types(_arg(y, key))   # float tensor (R34-1)
    if a.name in _DIM_NAMES and "SymInt" not in str(a.type):
        rank = _rank_of_input(x)
        return rank is not None and rank == _rank_of_input(y) and \
            _normalised(_arg(x, key), rank) == _normalised(_arg(y, key), rank)
    return False


def unread_real_literals(tr: Traces, opaque: Collection[fx.Node]) -> list[tuple[fx.Node, str]]:
    """The literal arguments of computing nodes that differ at the real sizes and that no rule
    read through :meth:`~spec_lang.torch_frontend.literals.Traces.scalar` (the module
    docstring's exceptions aside), the nodes whose dtype differs there, and those whose rule
    reads a memory layout the real twin does not have (:func:`_layout_read`): each the probe node
    and a sentence naming the argument and both values; empty when the program was not traced
    at real sizes. Call it after the lowering (it reads which literals the rules read).

    ``opaque``: the nodes lowered to :class:`~spec_lang.torch_frontend.lower.Opaque` when their
    rule ran (``Lowering.opaque_when_lowered``: no value, so every goal reading them is UNKNOWN
    already); skipped. A node made Opaque only later, by a write after its value was read, is
    checked (round 34, R34-2)."""
    if tr.real is None:
        return []
    out = []
    for x, y in tr.twins.items():      # a dtype that depends on the sizes (R34-1: arange(5.0))
        if _dtypes(x) != _dtypes(y):
            out.append((x, f"the dtype of {x.name} ({x.target}) is {_dtypes(x)} at the probe "
                           f"sizes and {_dtypes(y)} at the real sizes"))
        elif _layout_read(x) and not _layout_read(y):   # R34c-1..3: the rule read the probe's
            out.append((x, f"{x.name} ({x.target}) reads its input's memory as row-major at "
                           "the probe sizes and not at the real sizes (strides that transpose "
                           "or pad only at the real sizes)"))
    for x in semantic_nodes(tr.main):
        y = tr.twin(x)
        if y is None or x in opaque:
            continue
        for key in _literal_differences(x, y):
            if tr.was_read(x, key) or _same_meaning(x, y, key):
                continue
            arg = key if not isinstance(key, tuple) else f"{key[0]}[{key[1]}]"
            out.append((x, f"argument {arg} of {x.name} ({x.target}) is {_arg(x, key)!r} at "
                           f"the probe sizes and {_arg(y, key)!r} at the real sizes, and no "
                           "rule reads it at both"))
    return out
