"""Collectives the real backend rejects, which the fake process group runs (adversarial round
37a, R37a-2).

The capture runs the train file against torch's ``FakeProcessGroup`` (:mod:`world`): every
collective on the step's fake tensors returns at once, whatever its reduce op, dtypes and
shapes. gloo raises synchronously on some of them (``ProcessGroupGloo.cpp``; measured on torch
2.13 in a one-rank gloo world). A train file that catches the error takes another branch in
the real run than in the capture (r37a_04: a ``ReduceOp.BAND`` "agreement check" on a float
flag raises under gloo, the ``except`` skips the gradient all-reduce; the capture all-reduced
and was proved EQUIVALENT). Uncaught, the real run crashes where the capture went on. The
collective's value need not reach the step's outputs (r37a_04's flag is dead), so the lowering
never sees it fail: every traced collective, at the probe and at the real sizes, on every
traced rank, is checked here before anything is lowered, and one gloo rejects refuses the
train file (exit 3) with its line.

What gloo rejects (:func:`why_rejected`):

* a dtype gloo has no kernel for (``int16``, ``uint16`` / ``uint32`` / ``uint64``, the
  ``float8`` kinds: every collective raises);
* a reduce op for the dtype: ``PREMUL_SUM`` always ("Cannot use ReduceOp.PREMUL_SUM with
  Gloo"; NCCL has it, but the capture cannot tell which backend the real run uses), ``AVG`` on
  integers and ``bool``, ``BAND`` / ``BOR`` / ``BXOR`` on floating and complex dtypes,
  ``PRODUCT`` / ``MIN`` / ``MAX`` on complex ones; a functional collective's reduce op name
  gloo does not know;
* shapes: a list of tensors of different shapes or dtypes in one call; an all-gather whose
  output is not the group's inputs stacked along dim 0 (``(ws * n, *rest)`` for an input
  ``(n, *rest)``; gloo rejects the "stacked" ``(ws, n)`` form); a reduce-scatter whose input
  is not ``(ws * n, *rest)`` for an output ``(n, *rest)``; an all-to-all whose input and output
  numels differ (without split sizes), whose dim 0 does not divide by the group size, whose
  split sizes are not one per rank summing to dim 0 or differ for this rank's own piece in
  and out (gloo's alltoallv), whose tensors are not contiguous, or whose lists hold tensors
  unlike the inputs (R38b-3); a functional collective whose ``group_size`` is not the
  group's;
* a root (``broadcast``, ``reduce``, ``gather``, ``scatter``) outside the group.

Compute ops too (round 47d, R47d-4): a matrix product whose floating operands differ in dtype
(``mm`` / ``bmm`` / ``addmm`` / ``baddbmm`` / ``mv`` / ``dot`` ..., SDPA's query, key and value)
raises on the CPU and CUDA kernels ("mat1 and mat2 must have the same dtype") and runs on meta
tensors. FSDP2's mixed precision makes that reachable in a right-looking plan (a nested unit's
float16 output into its parent's bfloat16 weight): :func:`why_mixed_dtypes`.

The group's size is its mesh axis's, the world's (``"0"``, torch's name for the default group)
or that of a ``dist.new_group`` the capture recorded; a collective whose check needs the size
of another group is refused as well (it is also never lowered).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from torch import fx

from spec_lang.errors import PlanError

__all__ = ["WORLD_GROUP", "check_collectives", "why_rejected", "why_mixed_dtypes"]

WORLD_GROUP = "0"
"""torch's name of the default (world) process group (``_process_group_name`` counts from 0 at
``init_process_group``; tested in ``tests/torch_frontend/test_backend_rejects.py``)."""

UNSIZED = "whether gloo accepts it is not known"
# gloo's reduce ops (c10d ``ReduceOp.RedOpType``) and a functional collective's names of them
_CODES = {"sum": 0, "avg": 1, "product": 2, "min": 3, "max": 4, "band": 5, "bor": 6, "bxor": 7,
          "premul_sum": 8}
_NAMES = {v: k.upper() for k, v in _CODES.items()}
_FLOATING = ("torch.float16", "torch.bfloat16", "torch.float32", "torch.float64")
_COMPLEX = ("torch.complex64", "torch.complex128")
_INTEGRAL = ("torch.int8", "torch.uint8", "torch.int32", "torch.int64", "torch.bool")
_GLOO_DTYPES = _FLOATING + _COMPLEX + _INTEGRAL


def _op_rejects(code: int | None, dtype: str) -> str | None:
    """Why gloo raises for reduce op ``code`` on ``dtype`` (None: it does not)."""
    if code is None or code not in _NAMES or code == 8:
        return f"gloo has no ReduceOp {_NAMES.get(code, code)}"   # type: ignore[arg-type]
    name = _NAMES[code]
    if (code == 1 and dtype in _INTEGRAL) or (code in (5, 6, 7) and dtype not in _INTEGRAL) \
            or (code in (2, 3, 4) and dtype in _COMPLEX):
        return f"gloo raises for ReduceOp.{name} on a {dtype.removeprefix('torch.')} tensor"
    return None


def _val(x: Any) -> Any:
    return x.meta.get("val") if isinstance(x, fx.Node) else None


def _flat(x: Any) -> list[Any]:
    if isinstance(x, (list, tuple)):
        return [v for item in x for v in _flat(item)]
    v = _val(x)
    return [v] if v is not None and hasattr(v, "dtype") else []


def _shape(v: Any) -> tuple[int, ...]:
    return tuple(int(s) for s in v.shape)


def _same(vals: Sequence[Any]) -> str | None:
    if len({str(v.dtype) for v in vals}) > 1 or len({_shape(v) for v in vals}) > 1:
        return "gloo raises for tensors of different dtypes or shapes in one call"
    return None


def _stacked(big: Any, small: Any, ws: int) -> bool:
    b, s = _shape(big), _shape(small)
    return bool(s) and len(b) == len(s) and b[0] == ws * s[0] and b[1:] == s[1:]


def _splits(v: Any, splits: Sequence[Any], ws: int) -> bool:
    if not _shape(v):
        return False
    n = _shape(v)[0]
    if not splits:
        return n % ws == 0
    return len(splits) == ws and all(isinstance(s, int) for s in splits) and sum(splits) == n


def _code(gm: Any, x: Any) -> int | None:
    ref = getattr(gm, x.target, None) if isinstance(x, fx.Node) and x.op == "get_attr" else x
    op = getattr(ref, "op", None)
    return op if isinstance(op, int) else None


def _group(gm: Any, x: Any) -> str | None:
    if isinstance(x, str):
        return x
    ref = getattr(gm, x.target, None) if isinstance(x, fx.Node) and x.op == "get_attr" else None
    name = getattr(ref, "group_name", None)
    return name if isinstance(name, str) else None


# c10d op -> (index of the group, of the reduce op or None, of the root or None)
_C10D = {
    "allreduce_": (1, 2, None), "allreduce_coalesced_": (1, 2, None), "reduce_": (1, 2, 3),
    "reduce_scatter_": (2, 3, None), "_reduce_scatter_base_": (2, 3, None),
    "reduce_scatter_tensor_coalesced_": (2, 3, None), "allgather_": (2, None, None),
    "_allgather_base_": (2, None, None), "allgather_coalesced_": (2, None, None),
    "allgather_into_tensor_coalesced_": (2, None, None), "alltoall_": (2, None, None),
    "alltoall_base_": (2, None, None), "broadcast_": (1, None, 2), "gather_": (2, None, 3),
    "scatter_": (2, None, 3),
}
# functional collective -> (index of the group name, of the reduce op name or None,
# of group_size or None, of the root or None)
_FUNCOL = {
    "all_reduce": (2, 1, None, None), "all_reduce_": (2, 1, None, None),
    "all_reduce_coalesced": (2, 1, None, None), "all_reduce_coalesced_": (2, 1, None, None),
    "reduce_scatter_tensor": (3, 1, 2, None), "reduce_scatter_tensor_coalesced": (3, 1, 2, None),
    "reduce_scatter_tensor_out": (3, 1, 2, None), "all_gather_into_tensor": (2, None, 1, None),
    "all_gather_into_tensor_coalesced": (2, None, 1, None),
    "all_gather_into_tensor_out": (2, None, 1, None), "all_to_all_single": (3, None, None, None),
    "broadcast": (2, None, None, 1), "broadcast_": (2, None, None, 1),
}


def _contiguous(vals: Sequence[Any]) -> bool:
    return all(v.is_contiguous() for v in vals)


def _own_split(out: Any, inp: Any, out_splits: Sequence[Any], in_splits: Sequence[Any],
               me: int | None) -> bool:
    """gloo's alltoallv: this rank's own piece has as many elements in as out (R38b-3)."""
    if not out_splits or not in_splits:
        return True
    if me is None or not 0 <= me < min(len(out_splits), len(in_splits)):
        return False
    row_o = math.prod(_shape(out)[1:])
    row_i = math.prod(_shape(inp)[1:])
    return in_splits[me] * row_i == out_splits[me] * row_o


def _shapes_c10d(op: str, a: Sequence[Any], ws: int, me: int | None = None) -> str | None:
    """gloo's shape checks of c10d op ``op`` (args ``a``) in a group of ``ws`` ranks, this
    rank ``me`` of them."""
    if op in ("allreduce_", "broadcast_", "reduce_"):
        return _same(_flat(a[0]))
    if op in ("_allgather_base_", "_reduce_scatter_base_"):
        out, inp = _val(a[0]), _val(a[1])
        big, small = (out, inp) if op == "_allgather_base_" else (inp, out)
        if big is None or small is None or str(out.dtype) != str(inp.dtype) \
                or not _stacked(big, small, ws):
            what = "all-gather's output" if op == "_allgather_base_" else \
                "reduce-scatter's input"
            return f"gloo raises: the {what} is not the {ws} ranks' pieces along dim 0"
        return None
    if op in ("allgather_into_tensor_coalesced_", "reduce_scatter_tensor_coalesced_"):
        for out, inp in zip(a[0], a[1]):
            r = _shapes_c10d("_allgather_base_" if op.startswith("allgather") else
                             "_reduce_scatter_base_", (out, inp), ws)
            if r is not None:
                return r
        return None if len(a[0]) == len(a[1]) else "gloo raises: unequal lists"
    if op in ("allgather_", "allgather_coalesced_", "reduce_scatter_"):
        per_rank, single = (a[0], a[1]) if op != "reduce_scatter_" else (a[1], a[0])
        if len(per_rank) != len(single):
            return "gloo raises: unequal lists"
        for many, one in zip(per_rank, single):
            vals = _flat(many) + _flat(one)
            if len(_flat(many)) != ws or _same(vals) is not None:
                return f"gloo raises: a list that is not {ws} tensors like the input"
        return None
    if op == "alltoall_base_":
        out, inp = _val(a[0]), _val(a[1])
        if out is None or inp is None or not _contiguous((out, inp)):
            return "gloo raises: an all-to-all of a tensor that is not contiguous"
        splits = len(a) > 4 and (a[3] or a[4])
        if (not splits and math.prod(_shape(out)) != math.prod(_shape(inp))) \
                or str(out.dtype) != str(inp.dtype) or not _splits(out, a[3], ws) \
                or not _splits(inp, a[4], ws) or not _own_split(out, inp, a[3], a[4], me):
            return f"gloo raises: an all-to-all whose sizes are not split among {ws} ranks"
        return None
    if op == "alltoall_":
        outs, ins = _flat(a[0]), _flat(a[1])
        if len(outs) != ws or len(ins) != ws or not _contiguous(outs + ins) \
                or any(_shape(o) != _shape(i) or str(o.dtype) != str(i.dtype)
                       for o, i in zip(outs, ins)):
            return f"gloo raises: an all-to-all of lists that are not {ws} tensors like the inputs"
    return None


def why_rejected(n: fx.Node, gm: Any, size_of: Mapping[str, int]) -> str | None:
    """Why gloo raises at collective node ``n`` of ``gm`` (None: it does not, or ``n`` is not a
    collective).

    Args:
        n: a node of ``gm`` (``c10d.*`` or ``_c10d_functional.*``).
        gm: the graph module (its get_attr constants: ``ProcessGroupRef`` / ``ReduceOpRef``).
        size_of: a process group's name -> its number of ranks, or (that number, this
            rank's index in the group or None).
    """
    if n.op != "call_function":
        return None
    ns, _, rest = str(n.target).partition(".")
    op = rest.rsplit(".", 1)[0]
    if ns == "c10d" and op in _C10D:
        gi, oi, ri = _C10D[op]
    elif ns in ("_c10d_functional", "_c10d_functional_autograd") and op in _FUNCOL:
        gi, oi, si, ri = _FUNCOL[op]
    else:
        return None
    a = n.args
    tensors = _flat(a[:gi])
    for v in tensors:
        if str(v.dtype) not in _GLOO_DTYPES:
            return f"gloo has no collectives on {str(v.dtype).removeprefix('torch.')} tensors"
    if oi is not None:
        code = _code(gm, a[oi]) if ns == "c10d" else _CODES.get(a[oi]) \
            if isinstance(a[oi], str) else None
        for v in tensors:
            why = _op_rejects(code, str(v.dtype))
            if why is not None:
                return why
    name = _group(gm, a[gi]) if len(a) > gi else None
    got = size_of.get(name) if name is not None else None
    ws, me = got if isinstance(got, tuple) else (got, None)
    if ws is None:
        return f"a collective over process group {name!r}, which is no mesh axis: {UNSIZED}"
    if ri is not None and not (isinstance(a[ri], int) and 0 <= a[ri] < ws):
        return f"gloo raises: root rank {a[ri]} is not in the group of {ws} ranks"
    if ns == "c10d":
        return _shapes_c10d(op, a, ws, me)
    if si is not None and a[si] != ws:
        return f"gloo raises: group_size {a[si]} is not the group's {ws} ranks"
    if op == "all_to_all_single":
        v = _val(a[0])
        if v is None or not _contiguous((v,)):
            return "gloo raises: an all-to-all of a tensor that is not contiguous"
        rows = math.prod(_shape(v)[1:])
        if not _splits(v, a[2], ws) or len(a[1]) not in (0, ws) \
                or not all(isinstance(x, int) for x in a[1]) or (
                    a[1] and a[2] and (me is None or not 0 <= me < ws
                                       or a[1][me] * rows != a[2][me] * rows)):
            return f"gloo raises: an all-to-all whose sizes are not split among {ws} ranks"
    return None


def _sizes(t: Any) -> dict[str, tuple[int, int | None]]:
    """A group's name -> (its number of ranks, this trace's rank in it or None)."""
    from spec_lang.torch_frontend.world import rank_of

    mesh = dict(getattr(t, "mesh", None) or {})
    coords = dict(getattr(t, "coords", None) or {})
    me = rank_of(mesh, coords) if mesh else None
    sizes: dict[str, tuple[int, int | None]] = {
        WORLD_GROUP: (math.prod(mesh.values()), me)} if mesh else {}
    made = (getattr(t, "new_groups", None) or {}).get("made", [])
    sizes.update({e[1]: (len(e[0]), list(e[0]).index(me) if me in e[0] else None)
                  for e in made if isinstance(e[1], str)})
    sizes.update({name: (mesh[ax], coords.get(ax, 0))
                  for name, ax in (getattr(t, "groups", None) or {}).items() if ax in mesh})
    return sizes


def check_collectives(path: str, traces: Sequence[Any]) -> None:
    """Refuse a train file with a collective gloo would reject, or a matrix product of mixed
    dtypes the CPU / CUDA kernels reject (:func:`why_mixed_dtypes`), in any of ``traces`` (every
    traced rank of the plan, at the probe and the real sizes; ``capture.Trace``).

    Raises:
        PlanError: ``"<path>:<line>: <why> ..."`` (exit 3), the first such collective.
    """
    from spec_lang.torch_frontend.analysis import node_site

    for t in traces:
        sizes = _sizes(t)
        for n in t.gm.graph.nodes:
            why = why_mixed_dtypes(n) or why_rejected(n, t.gm, sizes)
            if why is None:
                continue
            tail = ("run it over a mesh axis's group" if why.endswith(UNSIZED) else
                    "the real run raises there, and a caught error takes a branch the "
                    "capture does not see; fix the op's reduce op, dtypes or shapes")
            raise PlanError(f"{node_site(n, path)}: {why} ({str(n.target).rsplit('.', 1)[0]} "
                            f"on the rank at {dict(getattr(t, 'coords', None) or {})}): {tail}")


_SAME_DTYPE = {"aten.mm.default": None, "aten.bmm.default": None, "aten.addmm.default": None,
               "aten.baddbmm.default": None, "aten.addbmm.default": None, "aten.mv.default": None,
               "aten.addmv.default": None, "aten.dot.default": None, "aten.vdot.default": None,
               "aten.matmul.default": None, "aten.linear.default": None,
               "aten._scaled_dot_product_flash_attention_for_cpu.default": 3,
               "aten._scaled_dot_product_efficient_attention.default": 3,
               "aten._scaled_dot_product_flash_attention.default": 3,
               "aten.scaled_dot_product_attention.default": 3}
"""Ops whose floating tensor operands (the first ``k`` when given) must share one dtype on the
CPU and CUDA kernels."""


def why_mixed_dtypes(n: fx.Node) -> str | None:
    """Why the real kernel rejects node ``n`` (floating operands of a matrix product or of
    SDPA in different dtypes, R47d-4), or None."""
    if n.op != "call_function" or str(n.target) not in _SAME_DTYPE:
        return None
    k = _SAME_DTYPE[str(n.target)]
    args = n.args if k is None else n.args[:k]
    dts = []
    for a in args:
        v = a.meta.get("val") if isinstance(a, fx.Node) else None
        dt = getattr(v, "dtype", None)
        if dt is not None and dt.is_floating_point:
            dts.append(dt)
    if len(set(dts)) > 1:
        return (f"{str(n.target).split('.')[1]} of operands in {sorted({str(d) for d in dts})}: "
                "the CPU and CUDA kernels raise (\"must have the same dtype\"), meta tensors do "
                "not")
    return None
