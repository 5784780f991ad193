"""Collectives, declared once: forward, declared backward, placement signature, numpy reference.

Two kinds:

* **Plain collectives** (``all_reduce``, ``all_gather``, ``reduce_scatter``, ``broadcast``) build
  the ops of the same name. They have no backward: on a differentiated path they are a
  :class:`PlanError` (wrap them in a region, or apply them outside the traced forward).
* **Regions** (Megatron's differentiable mappings, ``megatron/core/tensor_parallel/mappings.py``)
  build a ``REGION(name, fwd, bwd, axis, dim)`` term whose forward and *declared* backward are
  primitives from :data:`PRIMITIVES`. Autodiff applies the declared backward as written, so a
  wrong declaration produces a wrong gradient that the verifier reports.

The table in ``docs/dsl.md`` is generated from :data:`REGIONS` and :data:`PRIMITIVES` by
:func:`collectives_table` (a test keeps them in sync).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from spec_lang.dims import DimLike, dim_name
from spec_lang.ops import axis_size, cast, mul, recip
from spec_lang.partial import warn_pending
from spec_lang.rng import _IN_STAGE
from spec_lang.tensor import Tensor, current_trace, fail, user_site
from spec_lang.term import Axis, DimSpec, Op, Term, term

__all__ = [
    "Primitive", "PRIMITIVES", "Region", "REGIONS", "collectives_table",
    "all_reduce", "all_gather", "reduce_scatter", "broadcast",
    "region", "copy_to_tp_region", "reduce_from_tp_region", "scatter_to_tp_region",
    "gather_from_tp_region", "reduce_scatter_to_sp_region", "gather_from_sp_region",
    "prim_dims", "prim_term", "all_to_all", "all_to_all_region",
]


# -- primitives: type rule, term builder, numpy reference -----------------------------------------

@dataclass(frozen=True)
class Primitive:
    """A per-rank data movement over one mesh axis.

    Attributes:
        name: ``identity | all_reduce | all_gather | split | reduce_scatter``.
        needs_dim: whether it acts along a dim.
        signature: placement change, DTensor words.
        ref: numpy reference over the list of per-rank blocks ``xs[r]`` (dim index ``ax``).
    """

    name: str
    needs_dim: bool
    signature: str
    ref: Callable[[list[np.ndarray], int], list[np.ndarray]]


def _ref_identity(xs: list[np.ndarray], ax: int) -> list[np.ndarray]:
    return [x.copy() for x in xs]


def _ref_all_reduce(xs: list[np.ndarray], ax: int) -> list[np.ndarray]:
    s = np.sum(xs, axis=0)
    return [s.copy() for _ in xs]


def _ref_all_gather(xs: list[np.ndarray], ax: int) -> list[np.ndarray]:
    g = np.concatenate(xs, axis=ax)
    return [g.copy() for _ in xs]


def _ref_split(xs: list[np.ndarray], ax: int) -> list[np.ndarray]:
    return [np.array_split(x, len(xs), axis=ax)[r] for r, x in enumerate(xs)]


def _ref_reduce_scatter(xs: list[np.ndarray], ax: int) -> list[np.ndarray]:
    return _ref_split(_ref_all_reduce(xs, ax), ax)


def _ref_all_to_all(xs: list[np.ndarray], ax: tuple[int, int]) -> list[np.ndarray]:
    """``ax = (split, concat)``: rank q sends block r of ``xs[q]`` along split to rank r, which
    concatenates the received blocks along concat in rank order."""
    split, concat = ax
    n = len(xs)
    sent = [np.split(x, n, axis=split) for x in xs]
    return [np.concatenate([sent[q][r] for q in range(n)], axis=concat) for r in range(n)]


def _ref_all_to_all_reverse(xs: list[np.ndarray], ax: tuple[int, int]) -> list[np.ndarray]:
    return _ref_all_to_all(xs, (ax[1], ax[0]))


PRIMITIVES: dict[str, Primitive] = {p.name: p for p in [
    Primitive("identity", False, "P -> P", _ref_identity),
    Primitive("all_reduce", False, "Partial(sum) -> Replicate()", _ref_all_reduce),
    Primitive("all_gather", True, "Shard(d) -> Replicate()", _ref_all_gather),
    Primitive("split", True, "Replicate() -> Shard(d)", _ref_split),
    Primitive("reduce_scatter", True, "Partial(sum) -> Shard(d)", _ref_reduce_scatter),
    # dim = (split, concat): two dims (the only two-dim primitives)
    Primitive("all_to_all", True, "Shard(c) -> Shard(s)", _ref_all_to_all),
    Primitive("all_to_all_reverse", True, "Shard(s) -> Shard(c)", _ref_all_to_all_reverse),
]}

A2A = ("all_to_all", "all_to_all_reverse")


def _a2a_dims(prim: str, dims: tuple[DimSpec, ...], axis: str, dim: Any
              ) -> tuple[DimSpec, ...] | str:
    """Type of ``all_to_all`` with ``dim = (split, concat)`` (``_reverse``: the pair swapped):
    ``concat`` must be sharded last over ``axis`` and loses it; ``split`` gains it."""
    if not (isinstance(dim, tuple) and len(dim) == 2 and dim[0] != dim[1]):
        return f"{prim} needs dim = (split, concat), two different dims; got {dim!r}"
    split, concat = dim if prim == "all_to_all" else (dim[1], dim[0])
    names = [d.name for d in dims]
    for x in (split, concat):
        if x not in names:
            return f"{prim} along dim {x!r}, which the tensor {names} does not have"
    out = []
    for d in dims:
        if d.name == concat:
            if not d.shards or d.shards[-1] != axis:
                return (f"{prim} over {axis!r} concatenates {concat}, but {concat} is placed as "
                        f"{d} (its innermost shard must be {axis!r})")
            out.append(DimSpec(d.name, d.shards[:-1]))
        elif d.name == split:
            out.append(DimSpec(d.name, d.shards + (axis,)))
        else:
            out.append(d)
    return tuple(out)


def prim_dims(prim: str, dims: tuple[DimSpec, ...], axis: str, dim: str | None
              ) -> tuple[DimSpec, ...] | str:
    """Output type of primitive ``prim`` on input type ``dims``, or an error string."""
    p = PRIMITIVES.get(prim)
    if p is None:
        return f"unknown primitive {prim!r} (one of {sorted(PRIMITIVES)})"
    if not p.needs_dim:
        return dims
    if prim in A2A:
        return _a2a_dims(prim, dims, axis, dim)
    names = [d.name for d in dims]
    if dim is None or dim not in names:
        return f"{prim} along dim {dim!r}, which the tensor {names} does not have"
    out = []
    for d in dims:
        if d.name != dim:
            out.append(d)
        elif prim == "all_gather":
            if not d.shards or d.shards[-1] != axis:
                return (f"all_gather over {axis!r} along {dim}, but {dim} is placed as {d} "
                        f"(its innermost shard must be {axis!r})")
            out.append(DimSpec(d.name, d.shards[:-1]))
        else:
            out.append(DimSpec(d.name, d.shards + (axis,)))
    return tuple(out)


def prim_term(prim: str, x: Term, axis: str, dim: str | None) -> Term:
    """The term of primitive ``prim`` applied to ``x`` (used by ``lower`` and autodiff)."""
    dims = prim_dims(prim, x.dims, axis, dim)
    if isinstance(dims, str):
        raise fail(dims)
    match prim:
        case "identity":
            return x
        case "all_reduce":
            return term(Op.ALL_REDUCE, (x,), (axis, "sum"), dims)
        case "all_gather":
            return term(Op.ALL_GATHER, (x,), (axis, dim), dims)
        case "split":
            return term(Op.SHARD, (x,), (dim, axis), dims)
        case "reduce_scatter":
            return term(Op.REDUCE_SCATTER, (x,), (axis, dim), dims)
        case "all_to_all":
            return term(Op.ALL_TO_ALL, (x,), (axis, dim[0], dim[1]), dims)
        case "all_to_all_reverse":
            return term(Op.ALL_TO_ALL, (x,), (axis, dim[1], dim[0]), dims)
        case _:
            raise fail(f"unknown primitive {prim!r}")


# -- regions: Megatron's differentiable mappings ----------------------------------------------------

@dataclass(frozen=True)
class Region:
    """A differentiable collective: forward and declared backward side by side."""

    name: str
    fwd: str
    bwd: str
    needs_dim: bool
    signature: str
    megatron: str


REGIONS: dict[str, Region] = {r.name: r for r in [
    #      name                    fwd               bwd               dim?   placement in -> out
    Region("copy_to_tp", "identity", "all_reduce", False, "Replicate() -> Replicate()",
           "copy_to_tensor_model_parallel_region (f)"),
    Region("reduce_from_tp", "all_reduce", "identity", False, "Partial(sum) -> Replicate()",
           "reduce_from_tensor_model_parallel_region (g)"),
    Region("scatter_to_tp", "split", "all_gather", True, "Replicate() -> Shard(d)",
           "scatter_to_tensor_model_parallel_region"),
    Region("gather_from_tp", "all_gather", "split", True, "Shard(d) -> Replicate()",
           "gather_from_tensor_model_parallel_region"),
    Region("reduce_scatter_to_sp", "reduce_scatter", "all_gather", True,
           "Partial(sum) -> Shard(S)", "reduce_scatter_to_sequence_parallel_region"),
    Region("gather_from_sp", "all_gather", "reduce_scatter", True, "Shard(S) -> Replicate()",
           "gather_from_sequence_parallel_region (tensor_parallel_output_grad=True)"),
    Region("all_to_all", "all_to_all", "all_to_all_reverse", True,
           "Shard(c) -> Shard(s), dim = (s, c)",
           "MoE token dispatch / combine (_AllToAll in megatron/core/tensor_parallel/mappings.py)"),
]}


def collectives_table() -> str:
    """The markdown table of regions and primitives (``docs/dsl.md`` embeds it verbatim)."""
    lines = ["| region | forward | declared backward | placement | Megatron |",
             "|---|---|---|---|---|"]
    for r in REGIONS.values():
        lines.append(f"| `{r.name}_region` | {r.fwd} | {r.bwd} | {r.signature} | {r.megatron} |")
    lines += ["", "| primitive | along a dim | placement |", "|---|---|---|"]
    for p in PRIMITIVES.values():
        lines.append(f"| {p.name} | {'yes' if p.needs_dim else 'no'} | {p.signature} |")
    return "\n".join(lines)


def _axis(axis: Any) -> str:
    a = str(axis)
    tr = current_trace()
    if tr is not None and tr.kind == "plan" and a not in tr.mesh:
        raise fail(f"collective over axis {a!r}, which is not in the mesh {tr.mesh}; "
                   "add it to Mesh(...) or use one of its axes", site=user_site(3))
    stage = _IN_STAGE[-1] if _IN_STAGE and tr is not None and tr.kind == "plan" else None
    if stage is not None and a == stage.axis:
        # stages run different programs: a pp collective issued by stage code either hangs (one
        # stage issues it) or is paired by the library with another stage's unrelated call; the
        # composed trace cannot model either, so it is rejected, never simplified away
        raise fail(f"collective over the pipeline axis {a!r} inside the code of pipeline stage "
                   f"{stage.stage}: stages run different programs, so this call would hang or "
                   f"pair with another stage's unrelated collective; pass values between stages "
                   f"with send()/recv() and reduce over {a!r} in reduce_grads, grad_norm_sq or a "
                   "schedule hook", site=user_site(3))
    return a


def region(x: Tensor, name: str, fwd: str, bwd: str, axis: Any = Axis.TP,
           dim: DimLike | None = None) -> Tensor:
    """A differentiable collective with an explicit forward and declared backward primitive.

    The named wrappers below are the Megatron set; call ``region`` directly to declare a
    custom (or deliberately wrong, for a mutant) pairing.

    Raises:
        PlanError: unknown primitive, a dim the tensor lacks, or a shard it does not have.
    """
    a = _axis(axis)
    if isinstance(dim, tuple):  # all_to_all: (split, concat)
        d: Any = tuple(dim_name(x) for x in dim)
    else:
        d = dim_name(dim) if dim is not None else None
    site = user_site(2)
    for p in (fwd, bwd):
        if p not in PRIMITIVES:
            raise fail(f"region {name}: unknown primitive {p!r} (one of {sorted(PRIMITIVES)})",
                       site=site)
    dims = prim_dims(fwd, x.term.dims, a, d)
    if isinstance(dims, str):
        raise fail(f"region {name} on {x.describe()}: {dims}", site=site)
    _check_divisible(dims, site, f"region {name} on {x.describe()}")
    t = term(Op.REGION, (x.term,), (name, fwd, bwd, a, d), dims)
    if fwd in ("all_reduce", "reduce_scatter"):
        warn_pending(x.term, a, site)          # lint: non-linear ops on a Partial (partial.py)
    return Tensor(t, site)


def all_to_all_region(x: Tensor, axis: Any, split: DimLike, concat: DimLike) -> Tensor:
    """Differentiable all-to-all (Megatron's ``all_to_all`` mapping, used by the MoE token
    dispatcher): each rank cuts ``x`` into ``|axis|`` blocks along ``split``, sends block ``r``
    to rank ``r`` and concatenates what it receives along ``concat`` in rank order.

    Type: ``(.., split, concat[.., axis]) -> (.., split[axis], concat)``; expert-parallel
    dispatch is ``split=E, concat=T`` (tokens sharded -> experts sharded), combine the reverse.
    Declared backward: the reverse all-to-all (``split`` and ``concat`` swapped), which is the
    adjoint of a permutation of blocks.

    Raises:
        PlanError: a dim the tensor lacks, ``concat`` not sharded last over ``axis``, or
            ``axis`` not dividing ``split``.
    """
    a = _axis(axis)
    d = (dim_name(split), dim_name(concat))
    site = user_site(2)
    dims = prim_dims("all_to_all", x.term.dims, a, d)
    if isinstance(dims, str):
        raise fail(f"all_to_all_region on {x.describe()}: {dims}", site=site)
    _check_divisible(dims, site, f"all_to_all_region on {x.describe()}")
    return Tensor(term(Op.REGION, (x.term,), ("all_to_all", "all_to_all", "all_to_all_reverse",
                                              a, d), dims), site)


def all_to_all(x: Tensor, axis: Any, split: DimLike, concat: DimLike) -> Tensor:
    """Plain all-to-all (no backward): ``ALL_TO_ALL(x, axis, split, concat)``, which equals
    ``SHARD(ALL_GATHER(x, axis, concat), split, axis)``. Type as :func:`all_to_all_region`."""
    a = _axis(axis)
    d = (dim_name(split), dim_name(concat))
    site = user_site(2)
    dims = prim_dims("all_to_all", x.term.dims, a, d)
    if isinstance(dims, str):
        raise fail(f"all_to_all on {x.describe()}: {dims}", site=site)
    _check_divisible(dims, site, f"all_to_all of {x.describe()}")
    return Tensor(term(Op.ALL_TO_ALL, (x.term,), (a, d[0], d[1]), dims), site)


def _check_divisible(dims: tuple[DimSpec, ...], site: str, what: str) -> None:
    tr = current_trace()
    if tr is None:
        return
    for ds in dims:
        n = tr.sizes.get(ds.name)
        if n is None:
            continue
        for a in ds.shards:
            k = int(a.split("/")[1]) if a.startswith("#") else tr.mesh.get(a)
            if k is None:
                continue
            if n % k:
                raise fail(f"{what}: dim {ds.name} (size {tr.sizes[ds.name]}, {n} left before "
                           f"{a!r}) on axis {a!r} (size {k}); {k} does not divide {n}. Pad "
                           f"{ds.name} or shrink {a!r}.", site=site)
            n //= k


def _named(name: str, doc: str) -> Callable[..., Tensor]:
    r = REGIONS[name]
    if r.needs_dim:
        def f(x: Tensor, dim: DimLike, axis: Any = Axis.TP) -> Tensor:
            return region(x, name, r.fwd, r.bwd, axis, dim)
    else:
        def f(x: Tensor, axis: Any = Axis.TP) -> Tensor:  # type: ignore[misc]
            return region(x, name, r.fwd, r.bwd, axis, None)
    f.__name__ = f"{name}_region"
    f.__qualname__ = f.__name__
    f.__doc__ = f"{doc}\n\nForward: {r.fwd}; declared backward: {r.bwd}; {r.signature}."
    return f


copy_to_tp_region = _named("copy_to_tp", "Megatron's f: enter a TP region. x: (...) replicated.")
reduce_from_tp_region = _named("reduce_from_tp",
                               "Megatron's g: leave a TP region. x: (...) Partial(sum) over axis.")
scatter_to_tp_region = _named("scatter_to_tp", "Split x along dim over axis: (.., d) -> (.., d/n).")
gather_from_tp_region = _named("gather_from_tp",
                               "All-gather x along dim over axis: (.., d/n) -> (.., d).")
reduce_scatter_to_sp_region = _named(
    "reduce_scatter_to_sp", "Leave a TP region into SP: (S, B, H) Partial -> (S/n, B, H).")
gather_from_sp_region = _named("gather_from_sp",
                               "Enter a TP region from SP: (S/n, B, H) -> (S, B, H).")


# -- plain collectives (no backward) ----------------------------------------------------------------

def all_reduce(x: Tensor, axis: Any, op: str = "sum", *, dtype: str | None = None) -> Tensor:
    """Combine ``x`` over all ranks of ``axis``: ``sum``, ``avg`` (= ``sum * 1/|axis|``, the
    factor written explicitly as ``RECIP(AXIS_SIZE(axis))``) or ``max``. dims unchanged.

    ``dtype``: the communication dtype (``"bf16"``): ``x`` is cast to it first, as
    torch.distributed reduces in the tensor's dtype (the precision lint reads it)."""
    a = _axis(axis)
    site = user_site(2)
    if dtype is not None:
        x = cast(x, dtype)
    if op not in ("sum", "avg", "max"):
        raise fail(f'all_reduce op {op!r}: use "sum", "avg" or "max"', site=site)
    t = Tensor(term(Op.ALL_REDUCE, (x.term,), (a, "max" if op == "max" else "sum"), x.term.dims),
               site)
    if op != "max":                            # lint: non-linear ops on a Partial (partial.py)
        warn_pending(x.term, a, site, average=op == "avg")
    if op == "avg":
        t = mul(recip(axis_size(a)), t)
        t.site = site
    return t


def all_gather(x: Tensor, axis: Any, dim: DimLike) -> Tensor:
    """Concatenate the ranks' blocks along ``dim``: ``(.., d[.., axis]) -> (.., d[..])``."""
    a = _axis(axis)
    d = dim_name(dim)
    site = user_site(2)
    dims = prim_dims("all_gather", x.term.dims, a, d)
    if isinstance(dims, str):
        raise fail(f"all_gather on {x.describe()}: {dims}", site=site)
    return Tensor(term(Op.ALL_GATHER, (x.term,), (a, d), dims), site)


def reduce_scatter(x: Tensor, axis: Any, dim: DimLike, *, dtype: str | None = None) -> Tensor:
    """Sum over ``axis`` then keep this rank's block along ``dim``: ``(.., d) -> (.., d/n)``.

    ``dtype``: the communication dtype, as for :func:`all_reduce`."""
    a = _axis(axis)
    d = dim_name(dim)
    site = user_site(2)
    if dtype is not None:
        x = cast(x, dtype)
    dims = prim_dims("reduce_scatter", x.term.dims, a, d)
    if isinstance(dims, str):
        raise fail(f"reduce_scatter on {x.describe()}: {dims}", site=site)
    _check_divisible(dims, site, f"reduce_scatter of {x.describe()}")
    warn_pending(x.term, a, site)              # lint: non-linear ops on a Partial (partial.py)
    return Tensor(term(Op.REDUCE_SCATTER, (x.term,), (a, d), dims), site)


def broadcast(x: Tensor, axis: Any, src: int = 0) -> Tensor:
    """The value of ``x`` on coordinate ``src`` of ``axis``, on every rank. dims unchanged."""
    a = _axis(axis)
    tr = current_trace()
    if tr is not None and a in tr.mesh and not (0 <= src < tr.mesh[a]):
        raise fail(f"broadcast from src={src} over {a!r} of size {tr.mesh[a]}")
    return Tensor(term(Op.BROADCAST, (x.term,), (a, int(src)), x.term.dims), user_site(2))


