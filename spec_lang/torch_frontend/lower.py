"""Pass 2 of the lowering: every node of a captured graph as IR terms (``spec_lang/term.py``).

Walks the graph in program order with each op's ``term`` rule. In-place ops (the optimizer's
``_foreach_*_``, clipping's ``mul_``, ``index_put_``) are given their meaning here: the op
computes the new value of the tensor it writes, and every node aliasing that storage through a
relabelling view (``detach``, ``view``, ``t``...) reads the new value from then on; a node that
aliases it through a slice is stale and reading it is UNKNOWN (but for a piece of a flat bucket
written whole: ``buckets.piece_read``, R35b-1). ``cat(xs, out=buf)`` writes all of ``buf``
(:data:`OUT_WRITES`, R35b-3).

A node without a rule (or whose rule does not cover its arguments) is :class:`Unsupported`; its
value is the marker :class:`Opaque`, which poisons every value computed from it. The goals that
read an opaque value are UNKNOWN, naming the op and the user's line (issue 11, deliverable 3);
so is a read of a functional collective's buffer before its ``wait_tensor`` (:mod:`waits`).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx as fx

from spec_lang.term import DimSpec, Term
from spec_lang.torch_frontend.aliasing import (c10d_returned, named_path, schema_alias,
                                               written_args, written_twice)
from spec_lang.torch_frontend.analysis import IGNORED, Analysis, node_site, record_node_site
from spec_lang.torch_frontend.buckets import (along, has_bucket, lower_on_bucket, piece_read,
                                              piece_write, written_value)
from spec_lang.torch_frontend.indexing import NotANumber
from spec_lang.torch_frontend.registry import RULES, Unsupported
from spec_lang.torch_frontend.values import TV, Bucket, Pieces, Stacked, const, exact_scalar
from spec_lang.torch_frontend.waits import NEVER_WAITED, PendingCollectives

__all__ = ["Opaque", "Lowering", "lower_graph", "RELABEL_VIEWS", "SLICE_VIEWS"]

RELABEL_VIEWS = frozenset({
    "aten.detach.default", "aten.alias.default", "aten.view.default", "aten.t.default",
    "aten.transpose.int", "aten.permute.default", "aten.unsqueeze.default",
    "aten.squeeze.dim", "aten.squeeze.dims", "aten.squeeze.default", "aten.expand.default",
    "aten._unsafe_view.default",    # a view whose schema does not say so (adversarial R18-1)
    "aten.lift.default", "aten.lift_fresh.default",   # the tensor itself (R19-1)
})
"""Views whose value is the same term (named dims make them relabellings)."""
SLICE_VIEWS = frozenset({
    "aten.slice.Tensor", "aten.select.int", "aten.split.Tensor", "aten.split_with_sizes.default",
    "aten.narrow.default", "aten.unbind.int",
    # ``unsafe_chunk`` / ``unsafe_split``: views whose schemas do not say so (R18-1: a write
    # through one was never seen by the base's readers, a false accept)
    "aten.unsafe_split.Tensor", "aten.unsafe_split_with_sizes.default",
})
"""Views that see part of their base."""
SET_STORAGE = frozenset({"aten.set_.source_Tensor", "aten.set_.source_Tensor_storage_offset"})
"""``t.set_(x)``: ``t`` shares ``x``'s storage (its schema marks ``t`` written: R18-1)."""
OUT_WRITES = frozenset({"aten.cat.out"})
"""Ops with a rule that write their result into all of ``out=`` (R35b-3): its old value is never
read, every alias of it reads the result, and the result is ``out``."""


@dataclass(frozen=True)
class Opaque:
    """The value of a node that could not be lowered: why, and where."""

    op: str
    site: str
    why: str

    def reason(self) -> str:
        return f"{self.op} at {self.site}: {self.why}"


@dataclass
class Lowering:
    """The context rules see in pass 2."""

    analysis: Analysis
    naming: Callable[[Any], DimSpec]          # leaf atom -> its IR dim
    scalar_of: Callable[[fx.Node, Any, Any], Any]   # (node, key, python value) -> exact | Term
    axis_of: Callable[[fx.Node, Any], str]           # (node, key) -> mesh axis of a group arg
    path: str | None = None
    traces: Any = None            # the aligned traces (literals.Traces): sizes for patterns
    sited: set[int] | None = None  # the plan's: terms it sited (analysis.record_node_site)
    env: dict[fx.Node, Any] = field(default_factory=dict)
    # id(term) -> the 0/1 mask on which that value is known to be 0 (index_put_ of 0)
    zero_where: dict[int, Any] = field(default_factory=dict)
    # IR name of a copy of a dim -> the dim's name (attention's "seq_k" -> "seq")
    copy_base: dict[str, str] = field(default_factory=dict)
    # nodes whose value was Opaque as soon as they were lowered (their rule gave no value), not
    # made Opaque later by a write (real_literals, round 34 R34-2)
    opaque_when_lowered: set[fx.Node] = field(default_factory=set)

    def base_of(self, name: str) -> str:
        while name in self.copy_base:
            name = self.copy_base[name]
        return name
    # dims rules create in pass 2 (attention's key positions): name -> the dim it copies
    same_size: dict[str, str] = field(default_factory=dict)

    # -- what rules use -----------------------------------------------------------------------
    def layout(self, n: fx.Node, i: int | None = None) -> tuple[tuple[DimSpec, ...], ...]:
        lay = self.analysis.layouts[n]
        if i is not None:
            lay = lay[i]
        return tuple(tuple(self.naming(a) for a in self.analysis.dims.canon(dim)) for dim in lay)

    def site(self, n: fx.Node) -> str:
        return node_site(n, self.path)

    def fail(self, n: fx.Node, why: str) -> Unsupported:
        return Unsupported(str(n.target), self.site(n), why)

    def scalar(self, n: fx.Node, key: Any, default: Any = None, *, rank: bool = False) -> Any:
        """The exact value (or lifted size term) of the python scalar argument ``key`` (an
        index into ``n.args`` or a kwarg name) of ``n``; a rank-dependent literal
        (:class:`~spec_lang.torch_frontend.literals.RankValues`) only with ``rank=True``."""
        if isinstance(key, int):
            v = n.args[key] if key < len(n.args) else default
        else:
            v = n.kwargs.get(key, default)
        if v is None:
            return None
        try:
            out = self.scalar_of(n, key, v)
        except ValueError as e:
            raise self.fail(n, str(e)) from None
        if not rank and type(out).__name__ == "RankValues":
            raise self.fail(n, f"the constant {v!r} differs across the ranks of {out.axis!r} "
                               f"({dict(sorted(out.values.items()))}) where no known pattern "
                               "(a shard offset) explains it")
        return out

    def scalar_item(self, n: fx.Node, key: Any, j: int) -> Any:
        """Item ``j`` of the python list argument ``key`` of ``n`` (a ``ScalarList``)."""
        v = n.args[key] if isinstance(key, int) else n.kwargs.get(key)
        try:
            out = self.scalar_of(n, (key, j), v[j])
        except ValueError as e:
            raise self.fail(n, str(e)) from None
        if type(out).__name__ == "RankValues":
            raise self.fail(n, f"the constant {v[j]!r} differs across ranks")
        return out

    def fit(self, n: fx.Node, operand: Any, value: Any, out: Any = None) -> Term:
        """``value``'s term with its dims renamed to ``n``'s output dims (or ``out``, a layout)
        where the two are copies of one named dim (right-aligned, as broadcasting aligns
        them)."""
        t = value.term
        if not isinstance(operand, fx.Node) or self.analysis.layouts.get(operand) is None:
            return t
        src = self.layout(operand)
        out = self.layout(n) if out is None else out
        for lay in (src, out):   # one named dim at two positions: renaming by position is
            names = [d.name for dim in lay for d in dim]   # ambiguous (R30b-1: e.t() + m)
            if len(set(names)) < len(names):
                raise self.fail(n, "a tensor whose layout holds one named dim twice (two dims "
                                   "of one square tensor related by the op)")
        off = len(out) - len(src)
        ren: dict[str, DimSpec] = {}
        for p, dim in enumerate(src):
            o = p + off
            if 0 <= o < len(out) and len(dim) == len(out[o]):
                for a, b in zip(dim, out[o]):
                    if a.name != b.name and a.name in t.dim_names:
                        ren[a.name] = b
        return rename_dims(t, ren, self.same_size)

    def new_dim(self, base: DimSpec, tag: str) -> DimSpec:
        """A fresh IR dim ``<base>_<tag>`` of the size of ``base`` (attention's key positions),
        with ``base``'s shards."""
        name = f"{base.name}_{tag}"
        self.same_size[name] = base.name
        return DimSpec(name, base.shards)

    def axis(self, n: fx.Node, key: Any) -> str:
        """The mesh axis of the process-group argument ``key`` of ``n``."""
        try:
            return self.axis_of(n, key)
        except ValueError as e:
            raise self.fail(n, str(e)) from None


def _storage_roots(gm: Any) -> dict[fx.Node, tuple[fx.Node, bool]]:
    """node -> (the node owning its storage, whether it sees all of it by relabelling)."""
    root: dict[fx.Node, tuple[fx.Node, bool]] = {}
    for n in gm.graph.nodes:
        if n.op == "call_function":
            name = str(n.target)
            if name in RELABEL_VIEWS or name in SLICE_VIEWS:
                src = n.args[0]
                if isinstance(src, fx.Node) and src in root:
                    base, full = root[src]
                    root[n] = (base, full and name in RELABEL_VIEWS)
                    continue
            t = c10d_returned(n) if n.target is operator.getitem else None
            if t is not None and t in root:     # the tensor a c10d op was given (R32d-4)
                root[n] = root[t]
                continue
            if n.target is operator.getitem and isinstance(n.args[0], fx.Node) \
                    and str(n.args[0].target) in SLICE_VIEWS and n.args[0] in root:
                base, _ = root[n.args[0]]
                root[n] = (base, False)
                continue
            if name in SET_STORAGE and len(n.args) > 1 and isinstance(n.args[1], fx.Node) \
                    and n.args[1] in root:
                shared = (root[n.args[1]][0], False)
                root[n] = shared
                if isinstance(n.args[0], fx.Node):
                    root[n.args[0]] = shared
                continue
            r = RULES.get(name)
            kind = schema_alias(n)
            if r is not None and r.inplace and n.args and isinstance(n.args[0], fx.Node) \
                    and n.args[0] in root:
                root[n] = root[n.args[0]]
                continue
            wrote = [t for t in written_args(n) if t in root] \
                if kind == "write" and (r is None or name in OUT_WRITES) else []
            if wrote:     # the result is the written tensor (in place, or out=)
                root[n] = root[wrote[0]]
                continue
            if kind == "view" and n.args and isinstance(n.args[0], fx.Node) \
                    and n.args[0] in root:
                # a view op without a rule (diagonal, unfold, as_strided): a write through it
                # leaves every reader of the base UNKNOWN (adversarial finding R4-6)
                root[n] = (root[n.args[0]][0], False)
                continue
        root[n] = (n, True)
    return root


def _poison_written(ctx: Lowering, n: fx.Node, val: Opaque, roots: Mapping[fx.Node, Any],
                    readers: Mapping[fx.Node, list[fx.Node]]) -> None:
    """An op without a rule wrote ``written_args(n)``: every reader of their storage is
    UNKNOWN (never the old value)."""
    for t in written_args(n):
        base = roots[t][0] if t in roots else t
        for r in readers.get(base, ()):
            if r in ctx.env and r is not n:
                ctx.env[r] = val


def _poison(x: Any) -> Opaque | None:
    if isinstance(x, Opaque):
        return x
    if isinstance(x, (list, tuple)):
        for y in x:
            p = _poison(y)
            if p is not None:
                return p
    if isinstance(x, Pieces):
        return _poison(x.values)
    return None


def _has_bucket(x: Any) -> bool:
    return isinstance(x, Bucket) or (isinstance(x, (list, tuple)) and any(map(_has_bucket, x)))


def _subst(x: Any, env: Mapping[fx.Node, Any]) -> Any:
    if isinstance(x, fx.Node):
        return env[x]
    if isinstance(x, (list, tuple)):
        return type(x)(_subst(y, env) for y in x)
    return x


def lower_graph(ctx: Lowering, inputs: list[Any]) -> dict[fx.Node, Any]:
    """Pass 2: the value of every node (placeholders get ``inputs`` in order).

    Returns:
        ``env``; the graph's output node maps to the list of output values.
    """
    gm = ctx.analysis.gm
    roots = _storage_roots(gm)
    readers: dict[fx.Node, list[fx.Node]] = {}
    for n, (base, _) in roots.items():
        readers.setdefault(base, []).append(n)
    env = ctx.env
    it = iter(inputs)
    waits = PendingCollectives(roots, (n for n in gm.graph.nodes if n.op == "call_function" and (
        str(n.target) in RELABEL_VIEWS | SLICE_VIEWS or schema_alias(n) == "view")))
    for n in gm.graph.nodes:
        if n.op == "placeholder":
            env[n] = next(it)
            continue
        if n.op == "get_attr":
            env[n] = _attr_value(ctx, n, getattr(gm, n.target))
            continue
        if n.op == "output":
            for base in waits.never_waited():      # R28-1: a collective nobody waited
                for r in readers.get(base, ()):
                    if r in env:
                        env[r] = Opaque(str(base.target), ctx.site(base), NEVER_WAITED)
            env[n] = _subst(n.args[0], env)
            if _has_bucket(env[n]):      # a flat bucket the step leaves (buckets)
                env[n] = _subst(n.args[0], {k: Opaque(str(k.target), ctx.site(k), "a flat "
                                            "bucket left by the step") if isinstance(v, Bucket)
                                            else v for k, v in env.items()})
            continue
        _lower_node(ctx, n, waits, roots, readers)
        if isinstance(env.get(n), Opaque):
            ctx.opaque_when_lowered.add(n)
        waits.after(n)
    return env


def _lower_node(ctx: Lowering, n: fx.Node, waits: PendingCollectives,
                roots: Mapping[fx.Node, Any], readers: Mapping[fx.Node, list[fx.Node]]) -> None:
    """The value of call node ``n`` into ``ctx.env`` (and what it writes in place)."""
    env = ctx.env
    if n.target is operator.getitem:
        src = env[n.args[0]]
        if isinstance(src, Opaque):
            env[n] = src
        elif isinstance(src, Pieces):
            env[n] = _piece(ctx, n, src)
        else:
            env[n] = src[n.args[1]]
        return
    name = str(n.target)
    if name in IGNORED:
        env[n] = None
        return
    early = waits.early_read(n)
    if early is not None:      # R28-1: the buffer read (or written) before wait_tensor
        env[n] = Opaque(name, ctx.site(n), f"reads the result of {early.target} (at "
                        f"{ctx.site(early)}) before its wait_tensor: the backend may not have "
                        "written it yet")
        _poison_written(ctx, n, env[n], roots, readers)
        return
    late = waits.early_input_write(written_args(n))
    if late is not None:       # the collective still reads its input in the background
        bad = Opaque(str(late.target), ctx.site(late), f"its input is written at {ctx.site(n)} "
                     "before its wait_tensor: the backend may read the new value")
        for r in readers.get(roots[late][0], ()):
            if r in env:
                env[r] = bad
    if n in ctx.analysis.unsupported:
        env[n] = Opaque(name, ctx.site(n), ctx.analysis.unsupported[n])
        if schema_alias(n) == "write":   # what it writes is unknown too (R4-6, R6-5)
            _poison_written(ctx, n, env[n], roots, readers)
        return
    args = _subst(n.args, env)
    kwargs = {k: _subst(v, env) for k, v in n.kwargs.items() if name not in OUT_WRITES
              or k != "out"}     # all of ``out`` is written: its old value is never read
    r = RULES[name]
    written = r.inplace or name in OUT_WRITES
    if ctx.traces is not None and ctx.traces.rank_refs:
        args = _rank_blocks(ctx, n, args)
    # ``dst.copy_(src)`` into a tensor that is no view of another overwrites all of it:
    # its old value (``torch.empty``'s garbage, a receive buffer) is never read (into a
    # view, the view's meaning is needed to write the base: round 26)
    whole = name == "aten.copy_.default" and isinstance(n.args[0], fx.Node) \
        and roots.get(n.args[0]) == (n.args[0], True)
    bad = _poison(args[1:] if whole else args) or _poison(list(kwargs.values()))
    if bad is not None:
        env[n] = bad
        if written:      # what it writes is unknown too (never the old value)
            _write_back(ctx, n, bad, roots, readers)
        return
    stacked = [x for x in args if isinstance(x, Stacked)]
    if stacked and name in ITEMWISE and not has_bucket(args, kwargs):
        env[n] = _itemwise(ctx, n, r, args, kwargs, len(stacked[0].items))
        return
    try:
        val = lower_on_bucket(ctx, n, r, args, kwargs) if has_bucket(args, kwargs) \
            else r.term(n, ctx, *args, **kwargs)
    except Unsupported as e:
        val = Opaque(e.op, e.site, e.why)
    except NotANumber as e:
        val = Opaque(name, ctx.site(n), str(e))
    except (ValueError, TypeError) as e:   # TermError is a ValueError
        val = Opaque(name, ctx.site(n), f"internal: {e}")
    env[n] = _checked(ctx, n, val)
    if written:
        _write_back(ctx, n, env[n], roots, readers)


ITEMWISE = frozenset({
    "aten.pow.Tensor_Scalar", "aten.mul.Tensor", "aten.mul.Scalar", "aten.div.Tensor",
    "aten.div.Scalar", "aten.add.Tensor", "aten.add.Scalar", "aten.sub.Tensor",
    "aten.sub.Scalar", "aten.sqrt.default", "aten.rsqrt.default", "aten.reciprocal.default",
    "aten.clamp.default", "_c10d_functional.all_reduce.default",
})
"""Ops applied item by item to a ``stack`` of scalars (``clip_grad_norm_``'s norms)."""


def _itemwise(ctx: Lowering, n: fx.Node, r: Any, args: tuple, kwargs: dict, k: int) -> Any:
    items = []
    for i in range(k):
        a_i = tuple(TV(x.items[i], ()) if isinstance(x, Stacked) else x for x in args)
        try:
            v = r.term(n, ctx, *a_i, **kwargs)
        except Unsupported as e:
            return Opaque(e.op, e.site, e.why)
        if not isinstance(v, TV):
            return Opaque(str(n.target), ctx.site(n), "an op on a stack of norms")
        items.append(v.term)
    return Stacked(tuple(items))


def _checked(ctx: Lowering, n: fx.Node, val: Any) -> Any:
    """A rule's tensor value (each item of a list: ``_foreach_*``) must carry only dims of its
    layout (else it would broadcast where torch does not): UNKNOWN otherwise, never a silently
    different value."""
    if isinstance(val, list):
        return [_checked(ctx, n, v) for v in val]
    if isinstance(val, TV):
        specs = {d for dim in val.dims for d in dim}
        extra = [d for d in val.term.dims if d not in specs]
        if extra and ctx.copy_base:
            # a copy of a dim (attention's key positions) where the layout has the dim again
            free = [s for s in specs if s not in val.term.dims]
            ren = {}
            for d in extra:
                cands = [s for s in free if ctx.base_of(s.name) == ctx.base_of(d.name)
                         and s.shards == d.shards]
                if len(cands) == 1:
                    ren[d.name] = cands[0]
                    free.remove(cands[0])
            if len(ren) == len(extra):
                val = TV(rename_dims(val.term, ren, ctx.same_size), val.dims)
                extra = []
        if extra:
            return Opaque(str(n.target), ctx.site(n), f"internal: the value has dims "
                          f"{[str(d) for d in extra]} its layout does not")
        record_node_site(n, val.term, getattr(ctx, "sited", None))   # messages only
    return val


def _rank_blocks(ctx: Lowering, n: fx.Node, args: tuple) -> tuple:
    """Arguments that read block ``r`` of a split on rank ``r`` become the rank's shard."""
    out = list(args)
    for (node, path), rv in ctx.traces.rank_refs.items():
        if node is not n or path[0] != 0:
            continue
        ref = n.args
        for p in path[1:]:
            ref = ref[p]
        split = ctx.env[ref.args[0]]
        val = _piece_at(ctx, n, split, rv) if isinstance(split, Pieces) else Opaque(
            str(n.target), ctx.site(n), "a rank-dependent block of a value that is no split")
        cur = out
        for p in path[1:-1]:
            cur = cur[p]
        if len(path) == 2:
            out[path[1]] = val
        else:
            cur = list(cur)
            return tuple(out)  # nested lists of rank blocks: not produced by torch 2.13
    return tuple(out)


def _piece_at(ctx: Lowering, n: fx.Node, src: Pieces, r: Any) -> Any:
    """Block ``r`` (the rank's coordinate) of ``src``: the rank's shard of the value split."""
    from spec_lang.term import Op, term
    parts = len(src.values)
    if not r.is_the_rank() or ctx.traces.axis_sizes.get(r.axis) != parts or src.src is None:
        return Opaque(str(n.target), ctx.site(n), f"block {dict(r.values)} of {parts} picked "
                      "by the rank in a way no shard explains")
    x = src.src
    a = x.dims[src.dim][0]
    if a.name not in x.term.dim_names:
        return Opaque(str(n.target), ctx.site(n), "the rank's block of a broadcast dim")
    cur = x.term.dim(a.name)
    new = DimSpec(cur.name, cur.shards + (r.axis,))
    t = term(Op.SHARD, (x.term,), (cur.name, r.axis),
             tuple(new if d.name == cur.name else d for d in x.term.dims))
    # its layout: the block's, with the block's outermost dim the rank's shard
    lay = list(src.values[0].dims)
    lay[src.dim] = (new,) + tuple(lay[src.dim][1:])
    return TV(t, tuple(lay))


def _piece(ctx: Lowering, n: fx.Node, src: Pieces) -> Any:
    """``getitem`` of split blocks; an index equal to the rank's coordinate on an axis of
    as many blocks is the rank's shard (``SHARD(x, A, axis)``)."""
    from spec_lang.term import Op, term
    from spec_lang.torch_frontend.literals import RankValues
    i = n.args[1]
    try:
        r = ctx.scalar_of(n, 1, i)
    except ValueError as e:
        return Opaque("getitem", ctx.site(n), str(e))
    if not isinstance(r, RankValues):
        return src.values[i]
    parts = len(src.values)
    if not r.is_the_rank() or ctx.traces.axis_sizes.get(r.axis) != parts or src.src is None:
        return Opaque("getitem", ctx.site(n), f"block {dict(r.values)} of {parts} picked by "
                      "the rank in a way no shard explains")
    x = src.src
    a = x.dims[src.dim][0]
    if a.name not in x.term.dim_names:
        return Opaque("getitem", ctx.site(n), "the rank's block of a broadcast dim")
    cur = x.term.dim(a.name)
    new = DimSpec(cur.name, cur.shards + (r.axis,))
    t = term(Op.SHARD, (x.term,), (cur.name, r.axis),
             tuple(new if d.name == cur.name else d for d in x.term.dims))
    return TV(t, ctx.layout(n))


def _write_back(ctx: Lowering, n: fx.Node, val: Any, roots: Mapping[fx.Node, Any],
                readers: Mapping[fx.Node, list[fx.Node]]) -> None:
    """After in-place ``n`` wrote its first argument(s) (``out=``: :data:`OUT_WRITES`), every
    alias reads the new value."""
    targets = [n.kwargs.get("out")] if str(n.target) in OUT_WRITES else \
        n.args[0] if isinstance(n.args[0], (list, tuple)) else [n.args[0]]
    if isinstance(val, tuple) and len(val) == 2 and isinstance(val[0], list) \
            and len(val[0]) == len(targets):
        val = val[0]          # c10d ops return (the written tensors, work)
    vals = val if isinstance(val, (list, tuple)) else [val] * len(targets)
    if len(vals) != len(targets) or written_twice(targets, roots, n):     # R37b-3: a list
        vals = [Opaque(str(n.target), ctx.site(n), "an in-place op wrote an unexpected number "
                       "of tensors, or one storage twice (a list naming it twice)")] * len(targets)
    for t, v in zip(targets, vals):
        if not isinstance(t, fx.Node):
            continue
        base, full = roots[t]
        whole, follows = (lambda x, b=base: roots.get(x) == (b, True)), along(roots, RELABEL_VIEWS)
        b = None if full or isinstance(v, Opaque) or not named_path(ctx.analysis, t, base, roots) \
            else piece_write(ctx, t, v, whole, follows)
        v, full = (v, full) if b is None else (b, True)    # through one piece of a bucket R36b-3
        for r in readers.get(base, ()):
            if r not in ctx.env or r is n:
                continue
            rb, rfull = roots[r]
            if isinstance(v, Opaque) or not named_path(ctx.analysis, r, base, roots):
                ctx.env[r] = v if isinstance(v, Opaque) else Opaque(str(n.target), ctx.site(n),
                                                                    _UNNAMED)
            elif full and rfull and isinstance(v, Bucket):     # a flat bucket, 1-d only
                ctx.env[r] = written_value(ctx, r, v, Opaque(
                    str(n.target), ctx.site(n), "a flat bucket read through a view"))
            elif full and isinstance(v, Bucket):   # a piece of it, through views (R35b-1)
                ctx.env[r] = piece_read(ctx, r, v, whole, follows,
                                        Opaque(str(n.target), ctx.site(n), _STALE))
            elif full and rfull and isinstance(v, TV):
                ctx.env[r] = TV(v.term, ctx.layout(r)) if ctx.analysis.layouts.get(r) is not None \
                    else v
            else:
                ctx.env[r] = Opaque(str(n.target), ctx.site(n), _STALE)


_STALE = "an in-place write through a slice of a tensor that is read again"
_UNNAMED = ("an in-place write into a tensor that is also read through a view shardproof cannot "
            "follow, taken before the write (take the view after the write, or view a piece "
            "with its own shape)")


def _attr_value(ctx: Lowering, n: fx.Node, v: Any) -> Any:
    why = ctx.traces.constant_differs(n) if ctx.traces is not None else None
    if why is not None:
        return Opaque("get_attr", ctx.site(n), why)
    if isinstance(v, torch.Tensor):
        if v.numel() == 1 and v.device.type != "meta":
            return TV(const(exact_scalar(v.item())), ())
        return Opaque("get_attr", ctx.site(n), f"a captured constant tensor of shape "
                      f"{tuple(v.shape)}")
    return v


def rename_dims(t: Term, ren: Mapping[str, DimSpec], sizes: dict[str, str] | None = None
                ) -> Term:
    """``t`` with dims renamed (``old -> new DimSpec``), through temporary names when two of
    them swap (``sizes``: where the temporary names' sizes are recorded, as ``name -> the dim
    whose size it has``)."""
    if not ren:
        return t
    from spec_lang.term import Op, term  # noqa: PLC0415
    tmp = {}
    for old, new in ren.items():
        if new.name in t.dim_names and new.name not in ren:
            raise ValueError(f"renaming {old} to {new} collides with a dim of {t!r}")
        mid = DimSpec(f"{old}_tmp", new.shards) if new.name in ren else new
        if mid is not new:
            if sizes is None:
                raise ValueError(f"renaming {old} to {new} needs a temporary dim")
            sizes[mid.name] = old
        t = term(Op.RENAME, (t,), (old, mid.name),
                 tuple(mid if d.name == old else d for d in t.dims))
        if mid is not new:
            tmp[mid.name] = new
    for mid, new in tmp.items():
        t = term(Op.RENAME, (t,), (mid, new.name),
                 tuple(new if d.name == mid else d for d in t.dims))
    return t


def as_term(x: Any) -> Term:
    """A value or python scalar as a term (scalars become exact constants)."""
    if isinstance(x, Term) or (hasattr(x, "term") and not isinstance(x, (int, float, bool))):
        return x if isinstance(x, Term) else x.term
    if isinstance(x, (int, float, bool)):
        return const(exact_scalar(x))
    raise TypeError(f"not a tensor value: {x!r}")
